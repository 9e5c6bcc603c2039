// Package linux is the data path of a Linux server (datapath.Host) over
// netlink, HTB, IFB and eBPF (package dataplane): pair limiters as HTB
// classes on the VMs' interfaces (dataplane.Limiter), receive counters as
// counting classes on their veths, per-VM schedulers as HTB trees on the
// server's IFBs (Scheduler), and loss counters — eBPF sequence-number
// gaps at the receivers (SeqGaps, ElasticSwitch §6) or the senders' TCP
// retransmissions through sock_diag (TCPRetransmits).
//
// The emulated datacenter (package testbed) builds the devices and
// limiters and hands them to a Host; a host agent (package agent) drives
// it through the datapath interfaces only.
package linux

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// Limiters are what a server has for one of its VMs: the limiter of the
// pairs it sends (on its interface) and the counting classes of the
// pairs into it (on its veth in the server); nil: none.
type Limiters struct {
	TX, RX *dataplane.Limiter
}

// Config is a server's data path.
type Config struct {
	// NS is the server's namespace (its devices' counters, its IFBs).
	NS *dataplane.NS
	// VMs are the limiters the server has for its VMs, by name (an
	// entry may have neither). Only these VMs can be attached; they keep
	// their limiters when they leave (Detach) and rejoin.
	VMs map[string]Limiters
	// TXIFB and RXIFB are the devices of the per-VM schedulers (egress,
	// ingress), "" if none.
	TXIFB, RXIFB string
	// Links are the server's devices toward the network: the ingress
	// scheduler reads each VM's arrivals from their per-VM redirection
	// filters (dataplane.RedirectIngressMatch).
	Links []string
	// Loss counts losses per pair (nil: none). Close closes it.
	Loss datapath.LossCounter
	// Release, if set, is called by Close (e.g. to close namespaces
	// opened for the data path).
	Release func()
}

// Host is a Linux server's data path.
type Host struct {
	cfg   Config
	sched [2]*Scheduler

	once sync.Once
}

var _ datapath.Host = (*Host)(nil)

// NewHost returns the data path of cfg.
func NewHost(cfg Config) (*Host, error) {
	if cfg.NS == nil {
		return nil, errors.New("linux data path: no namespace")
	}
	cfg.VMs = maps.Clone(cfg.VMs)
	h := &Host{cfg: cfg}
	if cfg.TXIFB != "" {
		h.sched[mech.Egress] = NewScheduler(cfg.NS, cfg.TXIFB, mech.Egress, nil)
	}
	if cfg.RXIFB != "" {
		h.sched[mech.Ingress] = NewScheduler(cfg.NS, cfg.RXIFB, mech.Ingress, cfg.Links)
	}
	return h, nil
}

// Attach implements datapath.Host: the VM's limiters from the
// configuration. A VM without an entry there is refused: the server has
// no limiter, counter or redirection for it.
func (h *Host) Attach(vm datapath.VM) (datapath.VMPath, error) {
	if !vm.Addr.Is4() {
		return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: address %v is not IPv4", vm.Name, vm.Addr)
	}
	l, ok := h.cfg.VMs[vm.Name]
	if !ok {
		return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: the server was not set up for it (no limiters or counters); it cannot be enforced here", vm.Name)
	}
	var p datapath.VMPath
	if l.TX != nil {
		p.TX = l.TX
	}
	if l.RX != nil {
		p.RX = l.RX
	}
	return p, nil
}

// Detach implements datapath.Host: the pair limiters of the VM are
// removed (its receive counters stay: the testbed measures with them);
// its limiters stay configured, for the VM to rejoin.
func (h *Host) Detach(vm string) error {
	l := h.cfg.VMs[vm]
	if l.TX == nil {
		return nil
	}
	var errs []error
	for _, p := range l.TX.Pairs() {
		errs = append(errs, l.TX.RemovePair(p))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("linux data path: detach VM %s: %w", vm, err)
	}
	return nil
}

// Devices implements datapath.Host: one netlink dump of the server's
// links.
func (h *Host) Devices() (map[string]datapath.DevCounters, error) {
	links, err := h.cfg.NS.Netlink().LinkList()
	if err != nil {
		return nil, fmt.Errorf("linux data path: netns %s: list links: %w", h.cfg.NS.Name, err)
	}
	out := make(map[string]datapath.DevCounters, len(links))
	for _, l := range links {
		at := l.Attrs()
		if s := at.Statistics; s != nil {
			out[at.Name] = datapath.DevCounters{Rx: s.RxBytes, Tx: s.TxBytes}
		}
	}
	return out, nil
}

// Scheduler implements datapath.Host.
func (h *Host) Scheduler(dir mech.Direction) datapath.Scheduler {
	if dir != mech.Egress && dir != mech.Ingress || h.sched[dir] == nil {
		return nil
	}
	return h.sched[dir]
}

// Loss implements datapath.Host.
func (h *Host) Loss() datapath.LossCounter { return h.cfg.Loss }

// Close implements datapath.Host: it closes the loss counter and calls
// Release, once.
func (h *Host) Close() error {
	var err error
	h.once.Do(func() {
		if h.cfg.Loss != nil {
			err = h.cfg.Loss.Close()
		}
		if h.cfg.Release != nil {
			h.cfg.Release()
		}
	})
	return err
}
