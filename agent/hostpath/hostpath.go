// Package hostpath makes what a host agent runs with on a real Linux
// server: the mechanism, told where the server's loss counter sees
// losses, and the server's data path — its network namespace, every VM's
// limiters built on the interface the declared model names, a loss
// counter that follows the VMs. The emulated datacenter (testbed) makes
// its agents' mechanisms here too.
package hostpath

import (
	"fmt"
	"log/slog"

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

func lossName(kind string) string {
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
			return nil, fmt.Errorf("mechanism %s with the %s loss counter (it sees losses at the %s): %w", name, lossName(loss), side, err)
		}
	}
	return m, nil
}

// Options describe a server for its agent.
type Options struct {
	// Loss is the loss counter (LossSeq, LossTCP; "" is LossSeq).
	Loss string
	// Uplinks are the server's devices toward the network, where the
	// sequence-number counter stamps packets.
	Uplinks []string
	Log     *slog.Logger
}

// Mechanism makes a mechanism for this server: as Mechanism, refusing
// what an agent on a real host cannot do yet (per-VM schedulers).
func (o Options) Mechanism(name string, params map[string]any) (mech.Mechanism, error) {
	m, err := Mechanism(name, params, o.Loss)
	if err != nil {
		return nil, err
	}
	if m.Capabilities().Schedulers {
		return nil, fmt.Errorf("mechanism %s needs per-VM schedulers, which agents on real hosts do not build yet (the testbed's agents do)", name)
	}
	return m, nil
}

// Path opens the data path of the server the process runs on for an
// agent of mechanism m: its own network namespace, every VM's limiters
// built from its interface, and, if m reacts to losses, the loss
// counter.
func (o Options) Path(_ *model.Model, m mech.Mechanism) (datapath.Host, error) {
	{
		ns, err := dataplane.OpenNSPath("host", "/proc/self/ns/net")
		if err != nil {
			return nil, err
		}
		cfg := linux.Config{NS: ns, Release: func() { ns.Close() }, Links: o.Uplinks, Log: o.Log}
		if m != nil && m.Capabilities().Losses {
			if o.Loss == LossSeq || o.Loss == "" {
				if len(o.Uplinks) == 0 {
					ns.Close()
					return nil, fmt.Errorf("mechanism %s reacts to losses: the sequence-number counter needs the server's uplinks (--uplink)", m.Name())
				}
			}
			lc, err := linux.NewLossCounter(o.Loss, ns, o.Uplinks)
			if err != nil {
				ns.Close()
				return nil, err
			}
			cfg.Loss = lc
		}
		return linux.NewHost(cfg)
	}
}
