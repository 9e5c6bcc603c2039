// Package hostpath makes what a host agent runs with on a real Linux
// server: the mechanism, told where the server's loss counter sees
// losses, and the server's data path — its network namespace, every VM's
// limiters built on the interface the declared model names, a loss
// counter that follows the VMs, the per-VM schedulers. The emulated
// datacenter (testbed) makes its agents' mechanisms here too.
package hostpath

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/linux"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/model"
)

// Loss counters of a server.
const (
	// LossSeq counts gaps in per-pair sequence numbers that eBPF programs
	// stamp on the server's uplinks and count at its VMs' devices
	// (ElasticSwitch §6): losses seen at the destination. Every server's
	// agent must use it for any to see its peers' losses.
	LossSeq = linux.LossSeq
	// LossTCP counts the sender VMs' TCP retransmissions (sock_diag in
	// each VM's network namespace): losses seen at the source; VMs
	// without a namespace of their own are not seen.
	LossTCP = linux.LossTCP
)

// LossSide returns where a loss counter sees losses ("" is LossSeq).
func LossSide(kind string) (mech.LossSide, error) {
	switch kind {
	case "", LossSeq:
		return mech.LossAtDestination, nil
	case LossTCP:
		return mech.LossAtSource, nil
	}
	return 0, fmt.Errorf("loss counter %q: want %q (TCP retransmissions at the sender) or %q (eBPF sequence-number gaps at the receiver)", kind, LossTCP, LossSeq)
}

// LossName is a loss counter's name, "" being LossSeq.
func LossName(kind string) string {
	if kind == "" {
		return LossSeq
	}
	return kind
}

// Mechanism makes a mechanism (mech/all) for real traffic: one whose
// agents can run on hosts, adapted, if it reacts to losses, to where the
// loss counter sees them (mech.LossAdapter).
func Mechanism(name string, params map[string]any, loss string) (mech.Mechanism, error) {
	side, err := LossSide(loss)
	if err != nil {
		return nil, err
	}
	m, err := all.New(name, params)
	if err != nil {
		return nil, err
	}
	caps := m.Capabilities()
	if ok, why := caps.RealTraffic(); !ok {
		return nil, fmt.Errorf("mechanism %s runs in the simulator only: %s", name, why)
	}
	if caps.Losses {
		la, ok := m.(mech.LossAdapter)
		if !ok {
			return nil, fmt.Errorf("mechanism %s reads losses but cannot be told where the loss counter sees them (no mech.LossAdapter)", name)
		}
		if m, err = la.ForLosses(side); err != nil {
			return nil, fmt.Errorf("mechanism %s with the %s loss counter (it sees losses at the %s): %w", name, LossName(loss), side, err)
		}
	}
	return m, nil
}

// Options describe a server for its agent.
type Options struct {
	// Netns names the server's network namespace (/run/netns/NAME) when
	// the agent runs outside it — as the emulated datacenter runs agents
	// in the root namespace, where they reach the controller over a
	// management network the VMs cannot reach; "": the process's own.
	Netns string
	// Loss is the loss counter (LossSeq, LossTCP; "" is LossSeq).
	Loss string
	// Uplinks are the server's devices toward the network, where the
	// sequence-number counter stamps packets and, for a mechanism with
	// per-VM schedulers, what arrives for the VMs is redirected to the
	// ingress scheduler.
	Uplinks []string
	Log     *slog.Logger
}

// Mechanism makes a mechanism for this server (Mechanism).
func (o Options) Mechanism(name string, params map[string]any) (mech.Mechanism, error) {
	return Mechanism(name, params, o.Loss)
}

// Path opens the data path of the server the process runs on for an
// agent of mechanism m: its own network namespace, every VM's limiters
// built from its interface, if m reacts to losses the loss counter, and
// if it schedules per VM (mech.Capabilities.Schedulers) the schedulers'
// IFBs and the redirections into them from the uplinks and the VMs'
// devices (linux.Config.Schedulers: VMs in namespaces of their own).
func (o Options) Path(_ *model.Model, m mech.Mechanism) (_ datapath.Host, err error) {
	var caps mech.Capabilities
	if m != nil {
		caps = m.Capabilities()
	}
	if len(o.Uplinks) == 0 {
		switch {
		case caps.Schedulers:
			return nil, fmt.Errorf("mechanism %s schedules per VM: the ingress scheduler needs the server's uplinks (--uplink), where what arrives for the VMs is redirected to it", m.Name())
		case caps.Losses && (o.Loss == LossSeq || o.Loss == ""):
			return nil, fmt.Errorf("mechanism %s reacts to losses: the sequence-number counter needs the server's uplinks (--uplink)", m.Name())
		}
	}
	ns, err := o.openNS()
	if err != nil {
		return nil, err
	}
	cfg := linux.Config{NS: ns, Release: func() { ns.Close() }, Links: o.Uplinks, Schedulers: caps.Schedulers, Log: o.Log}
	defer func() {
		if err != nil {
			if cfg.Loss != nil {
				err = errors.Join(err, cfg.Loss.Close())
			}
			ns.Close()
		}
	}()
	if caps.Losses {
		if cfg.Loss, err = linux.NewLossCounter(o.Loss, ns, o.Uplinks); err != nil {
			return nil, err
		}
	}
	h, err := linux.NewHost(cfg)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// openNS opens the server's namespace.
func (o Options) openNS() (*dataplane.NS, error) {
	if o.Netns != "" {
		return dataplane.OpenNS(o.Netns)
	}
	return dataplane.OpenNSPath("host", "/proc/self/ns/net")
}

// Listen opens the agent's UDP socket for its peers' messages at addr,
// in the server's namespace.
func (o Options) Listen(addr netip.AddrPort) (net.PacketConn, error) {
	ns, err := o.openNS()
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	var c net.PacketConn
	err = ns.Do(func() (err error) {
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %v in netns %s: %w", addr, ns.Name, err)
	}
	return c, nil
}

// Steering opens the server's steering of its VMs' connections to real
// appliances (policy routing in its namespace, datapath/linux).
func (o Options) Steering() (datapath.Steering, error) {
	ns, err := o.openNS()
	if err != nil {
		return nil, err
	}
	return linux.NewSteering(ns, ns.Close), nil
}
