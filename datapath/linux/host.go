// Package linux is the data path of a Linux server (datapath.Host) over
// netlink, HTB, IFB and eBPF (package dataplane): pair limiters as HTB
// classes on the VMs' interfaces (dataplane.Limiter), receive counters as
// an eBPF program on the egress of their veths (RXCounters, package
// pairbytes: no qdisc), per-VM schedulers as HTB trees on the
// server's IFBs (Scheduler), and loss counters — eBPF sequence-number
// gaps at the receivers (SeqGaps, ElasticSwitch §6) or the senders' TCP
// retransmissions through sock_diag (TCPRetransmits).
//
// The emulated datacenter (package testbed) builds the devices and
// limiters and hands them to a Host (Config.VMs); a host agent (package
// agent) drives it through the datapath interfaces only.
//
// On a real host, a Host builds a VM's limiters itself from the
// interface the declared model names for it (datapath.VM Interface and
// Netns; model.VM), in one of two layouts, and removes them when the VM
// is detached or the Host removed (Remove), leaving the devices as it
// found them; Close leaves them enforcing, and a later Host adopts them:
//
//   - the VM in a namespace of its own (Netns set: a name in
//     /run/netns, or the path of the namespace's file; containers, the
//     testbed's VMs): Interface is the VM's end of a veth whose peer is
//     in the server's namespace. The pair limiter is an HTB on the
//     interface's egress inside the VM's namespace, where the VM's TCP
//     feels its backpressure (the namespace's TCP small-queue budget is
//     set to VMTSQBytes while a VM of the Host is in it, and put back);
//     the receive counters are a program on the peer's egress hook.
//   - the VM's device in the server's namespace (Netns empty; a VM's tap,
//     or a veth): the receive counters are a program on the device's
//     egress hook, and the pair limiter an HTB on an IFB (IFBName) that a
//     u32 filter on the device's ingress hook redirects every IPv4
//     packet to.
//
// The HTBs have the major handle ProvisionMajor: a device whose root
// qdisc is neither the kernel's default nor Bulkhead's, or whose ingress
// hook has another filter, is refused rather than taken over.
//
// Such a Host can build the per-VM schedulers' devices too
// (Config.Schedulers): two IFBs in the server's namespace (SchedTXIFB,
// SchedRXIFB) with a Scheduler on each. The ingress hook of every
// uplink redirects to SchedRXIFB — one u32 filter per attached VM,
// matching its address, whose counters are the VM's arrivals before the
// scheduler, and a catch-all (SchedCatchAll) — and the ingress hook of
// each attached VM's device on the server (the veth peer: VMs in
// namespaces of their own only) redirects to SchedTXIFB. Detach removes
// a VM's redirections, Close the IFBs and the uplinks' filters.
//
// A loss counter that follows VMs (VMLossCounter; NewLossCounter makes
// one with no VM) is told of each VM such a Host builds limiters for,
// with the VM's device on the server, and of it leaving, before the
// limiters go: the sequence-gap counter puts its count program on that
// device and takes it off; the retransmission counter watches the
// sockets of a VM in a namespace of its own (a VM without one is
// enforced, its losses not counted, and the Host logs so). The
// sequence-gap counter numbers and counts only the pairs of the model:
// the Host tells it of every VM it attaches (those of Config.VMs too)
// with the VM's limiter and receive counters, whose pairs the host
// agent sets from the model, and it declares those pairs to its eBPF
// programs (SeqGaps).
package linux

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// Limiters are what a server has for one of its VMs: the limiter of the
// pairs it sends (on its interface) and the receive counters of the pairs
// into it (on its veth in the server: NewRXCounters); nil: none. Whoever
// made them closes them: a Host given them does not.
type Limiters struct {
	TX *dataplane.Limiter
	RX *RXCounters
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
	// ingress) that the configuration built, "" if none (the testbed's).
	TXIFB, RXIFB string
	// Schedulers: the Host builds the per-VM schedulers' devices itself
	// (SchedTXIFB, SchedRXIFB) and the redirections into them — every
	// uplink's ingress (Links) to SchedRXIFB, one filter per VM it
	// attaches and a catch-all; the VM's device on the server to
	// SchedTXIFB — and removes them (Detach, Close). Only VMs in
	// namespaces of their own can then be attached (Attach). It excludes
	// TXIFB, RXIFB and VMs.
	Schedulers bool
	// Links are the server's devices toward the network (uplinks): the
	// ingress scheduler reads each VM's arrivals from their per-VM
	// redirection filters (dataplane.RedirectIngressMatch).
	Links []string
	// Loss counts losses per pair (nil: none). Close closes it. A
	// VMLossCounter is told of the VMs whose limiters the Host builds
	// (NewLossCounter makes one that starts with none).
	Loss datapath.LossCounter
	// Log receives what the Host cannot report as an error (a VM whose
	// losses Loss cannot count); nil: slog.Default().
	Log *slog.Logger
	// Release, if set, is called by Close (e.g. to close namespaces
	// opened for the data path).
	Release func()
}

// Host is a Linux server's data path.
type Host struct {
	cfg   Config
	log   *slog.Logger
	sched [2]*Scheduler
	built *schedIFBs // the schedulers' devices it built (Config.Schedulers)

	mu   sync.Mutex
	prov map[string]*provisioned // the VMs whose limiters it built, by name
	tsq  map[string]*nsTSQ       // the VM namespaces whose TCP small-queue budget it set

	once sync.Once
}

var _ datapath.Host = (*Host)(nil)

// NewHost returns the data path of cfg.
func NewHost(cfg Config) (*Host, error) {
	if cfg.NS == nil {
		return nil, errors.New("linux data path: no namespace")
	}
	cfg.VMs = maps.Clone(cfg.VMs)
	h := &Host{cfg: cfg, log: cfg.Log, prov: map[string]*provisioned{}, tsq: map[string]*nsTSQ{}}
	if h.log == nil {
		h.log = slog.Default()
	}
	if cfg.Schedulers {
		if cfg.TXIFB != "" || cfg.RXIFB != "" || len(cfg.VMs) > 0 {
			return nil, errors.New("linux data path: a Host that builds its per-VM schedulers (Config.Schedulers) builds its VMs' limiters and redirections too: it takes no TXIFB, RXIFB or VMs")
		}
		b, err := buildSchedIFBs(cfg.NS, cfg.Links)
		if err != nil {
			return nil, fmt.Errorf("linux data path: netns %s: per-VM schedulers: %w", cfg.NS.Name, err)
		}
		h.built, h.sched = b, b.schedulers()
		return h, nil
	}
	if cfg.TXIFB != "" {
		h.sched[mech.Egress] = NewScheduler(cfg.NS, cfg.TXIFB, mech.Egress, nil)
	}
	if cfg.RXIFB != "" {
		h.sched[mech.Ingress] = NewScheduler(cfg.NS, cfg.RXIFB, mech.Ingress, cfg.Links)
	}
	return h, nil
}

// Attach implements datapath.Host. A VM the configuration has
// limiters for (Config.VMs) gets them. Another VM whose Interface is
// named gets limiters built for it (ProvisionMajor), which Detach and
// Close remove:
//
//   - with a Netns, Interface is the VM's own device in that namespace,
//     one end of a veth whose peer is in the server's namespace: the
//     pair limiter is an HTB on the interface's egress (and the
//     namespace's TCP small-queue budget is VMTSQBytes, as in the
//     testbed), the receive counters a program on the peer's egress
//     hook (RXCounters);
//   - without, Interface is the VM's device in the server's namespace
//     (a tap or a veth): the receive counters are a program on its
//     egress hook, the pair limiter an HTB on an IFB (IFBName) that its
//     ingress redirects every IPv4 packet to (IngressPrio).
//
// With Config.Schedulers, the VM must be in a namespace of its own: its
// device on the server gets the redirection of its ingress to the
// egress scheduler's IFB (IngressPrio; a device whose ingress hook has
// another filter is refused), and each uplink a redirection of what
// arrives for its address to the ingress scheduler's. The VM is then
// known to the schedulers by its address once their user says so
// (Scheduler.SetVMs).
//
// The receive counters count the pairs their user asks for
// (datapath.PairCounterSet). A device that does not exist (yet), that is
// not what the layout needs, or whose root qdisc someone else made, is
// refused with an error naming the VM, the device and the namespace;
// the VM can be attached again later. Any other VM is refused: the
// server has no limiter, counter or redirection for it.
func (h *Host) Attach(vm datapath.VM) (datapath.VMPath, error) {
	if !vm.Addr.Is4() {
		return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: address %v is not IPv4", vm.Name, vm.Addr)
	}
	l, ok := h.cfg.VMs[vm.Name]
	if !ok {
		if vm.Interface == "" {
			return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: the server was not set up for it (no limiters or counters) and it names no interface to build them on; it cannot be enforced here", vm.Name)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.provision(vm)
	}
	var p datapath.VMPath
	if l.TX != nil {
		p.TX = l.TX
	}
	if l.RX != nil {
		p.RX = l.RX
	}
	if f, ok := h.cfg.Loss.(pairFollower); ok {
		// The VM's device on the server: as attached, else where its
		// receive counters are (the server's side of its veth).
		dev := vm.Device
		if dev == "" && l.RX != nil {
			dev = l.RX.Dev()
		}
		sent, received := l.listers()
		f.followPairs(vm.Name, vm.Addr, dev, sent, received)
	}
	return p, nil
}

// Detach implements datapath.Host: the pair limiters of the VM are
// removed (its receive counters stay: the testbed measures with them),
// and the loss counter no longer counts its pairs;
// its limiters stay configured, for the VM to rejoin. What was built for
// a VM from its Interface is removed whole: its devices are left as
// they were found (no qdisc, filter or IFB of Bulkhead's).
func (h *Host) Detach(vm string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.prov[vm]
	delete(h.prov, vm)
	if ok {
		if err := errors.Join(h.unwatchLoss(p), h.teardown(p)); err != nil {
			return fmt.Errorf("linux data path: detach VM %s: %w", vm, err)
		}
		return nil
	}
	l := h.cfg.VMs[vm]
	var errs []error
	if f, ok := h.cfg.Loss.(pairFollower); ok {
		errs = append(errs, f.unfollowPairs(vm))
	}
	if l.TX != nil {
		for _, p := range l.TX.Pairs() {
			errs = append(errs, l.TX.RemovePair(p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("linux data path: detach VM %s: %w", vm, err)
	}
	return nil
}

// Devices implements datapath.Host: one netlink dump of the server's
// links.
func (h *Host) Devices() (map[string]datapath.DevCounters, error) {
	out, err := h.cfg.NS.DevCounters()
	if err != nil {
		return nil, fmt.Errorf("linux data path: %w", err)
	}
	return out, nil
}

var _ datapath.RateBatcher = (*Host)(nil)

// SetPairRates implements datapath.RateBatcher: the class changes of
// the pair limiters of one namespace go to the kernel in one netlink
// round trip (dataplane.SetPairRates); a limiter the Host did not make
// is written pair by pair.
func (h *Host) SetPairRates(ops []datapath.PairRate) []error {
	errs := make([]error, len(ops))
	var batch []dataplane.RateOp
	var at []int
	for i, op := range ops {
		l, ok := op.TX.(*dataplane.Limiter)
		if !ok {
			if op.TX == nil {
				errs[i] = fmt.Errorf("linux data path: pair %s: no limiter", op.Pair)
				continue
			}
			errs[i] = op.TX.SetPairRate(op.Pair, op.Bps)
			continue
		}
		batch = append(batch, dataplane.RateOp{L: l, P: op.Pair, Bps: op.Bps})
		at = append(at, i)
	}
	for j, err := range dataplane.SetPairRates(batch) {
		errs[at[j]] = err
	}
	return errs
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

// Close implements datapath.Host: it closes the loss counter (its
// programs come off) and the handles it opened and calls Release, once,
// and leaves in force what it built for VMs from their Interface and the
// schedulers' devices and redirections (Config.Schedulers), with the
// rates last set: a server whose agent stops keeps its VMs limited. The
// next Host on the server adopts the VMs' limiters as it finds them
// (dataplane.AdoptLimiter). Remove removes them.
func (h *Host) Close() error { return h.close(false) }

// Remove removes everything the Host built — its VMs' limiters and
// redirections, the schedulers' IFBs and filters — and closes it
// (datapath.Remover): the devices are left as they were found.
func (h *Host) Remove() error { return h.close(true) }

// close closes the Host; remove: what it built goes too.
func (h *Host) close(remove bool) error {
	var err error
	h.once.Do(func() {
		h.mu.Lock()
		var errs []error
		for _, n := range slices.Sorted(maps.Keys(h.prov)) {
			p := h.prov[n]
			errs = append(errs, h.unwatchLoss(p))
			if remove {
				errs = append(errs, h.teardown(p))
			} else {
				// The limiters stay; the next Host adopts them and
				// counts anew.
				errs = append(errs, p.closeRX())
				if p.vmNS != nil {
					p.vmNS.Close()
				}
			}
		}
		clear(h.prov)
		if remove && h.built != nil {
			errs = append(errs, h.built.remove())
		}
		h.mu.Unlock()
		if h.cfg.Loss != nil {
			errs = append(errs, h.cfg.Loss.Close())
		}
		if remove && h.built != nil { // once the loss counter's programs are off
			errs = append(errs, h.built.dropClsacts())
		}
		if h.cfg.Release != nil {
			h.cfg.Release()
		}
		if e := errors.Join(errs...); e != nil {
			err = fmt.Errorf("linux data path: close: %w", e)
		}
	})
	return err
}
