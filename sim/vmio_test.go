package sim_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/sim"
)

// vmProbe is a central test mechanism: agents and the controller record
// the per-VM observations (rates and demands); the controller sends every
// host a message each step.
type vmProbe struct{ log *vmProbeLog }

type vmProbeLog struct {
	agent    map[string][]mech.VMObs // per VM, each agent step
	ctl      map[string][]mech.VMObs // per VM, each controller step
	received map[string]int          // controller messages per host
	hosts    []string
}

func (vmProbe) Name() string                    { return "vmprobe" }
func (vmProbe) Capabilities() mech.Capabilities { return mech.Capabilities{} }
func (p vmProbe) NewAgent(env mech.Env) (mech.Agent, error) {
	p.log.hosts = append(p.log.hosts, env.Host)
	return &vmProbeAgent{log: p.log, host: env.Host}, nil
}
func (p vmProbe) NewController(env mech.ControllerEnv) (mech.Controller, error) {
	return &vmProbeCtl{log: p.log}, nil
}

type vmProbeAgent struct {
	log  *vmProbeLog
	host string
}

func (a *vmProbeAgent) Period() time.Duration { return 100 * time.Millisecond }
func (a *vmProbeAgent) Step(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	for _, v := range obs.VMs {
		a.log.agent[v.VM] = append(a.log.agent[v.VM], v)
	}
	for _, m := range inbox {
		if m.From == "controller" && m.Body == "hello "+a.host {
			a.log.received[a.host]++
		}
	}
	return mech.Actions{}
}

type vmProbeCtl struct{ log *vmProbeLog }

func (c *vmProbeCtl) Period() time.Duration { return 500 * time.Millisecond }
func (c *vmProbeCtl) Step(obs *mech.ControllerObs) mech.ControllerActions {
	for _, v := range obs.VMs {
		c.log.ctl[v.VM] = append(c.log.ctl[v.VM], v)
	}
	var act mech.ControllerActions
	for _, h := range c.log.hosts {
		act.Messages = append(act.Messages, mech.Message{To: h, Body: "hello " + h})
	}
	return act
}

func TestVMDemandsAndControllerMessages(t *testing.T) {
	y := header + `workloads:
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx, rate: 300Mbps}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx}
`
	s := prepare(t, y)
	log := &vmProbeLog{agent: map[string][]mech.VMObs{}, ctl: map[string][]mech.VMObs{}, received: map[string]int{}}
	if _, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: vmProbe{log}}); err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-3*b }
	// Skip each consumer's first step (an empty period).
	for name, obs := range map[string][]mech.VMObs{"agent": log.agent["a-tx"][1:], "controller": log.ctl["a-tx"][1:]} {
		for _, o := range obs {
			if !near(o.OutDemand, 300e6) || !near(o.OutRate, 300e6) || o.InDemand != 0 {
				t.Fatalf("%s: a-tx %+v: want out demand and rate 300 Mbps, no in demand", name, o)
			}
		}
	}
	for _, o := range log.agent["a-rx"][1:] {
		if !near(o.InDemand, 300e6) || !near(o.InRate, 300e6) {
			t.Fatalf("agent: a-rx %+v: want in demand and rate 300 Mbps", o)
		}
	}
	for name, obs := range map[string][]mech.VMObs{"agent": log.agent["b-tx"][1:], "controller": log.ctl["b-tx"][1:]} {
		for _, o := range obs {
			if !math.IsInf(o.OutDemand, 1) || !near(o.OutRate, 700e6) {
				t.Fatalf("%s: b-tx %+v: want unbounded demand, 700 Mbps", name, o)
			}
		}
	}
	if len(log.ctl["a-tx"]) != 4 {
		t.Errorf("controller steps %d in 2 s, want 4", len(log.ctl["a-tx"]))
	}
	// Messages sent at 0, 0.5, 1, 1.5 s arrive at the hosts' next steps.
	for _, h := range log.hosts {
		if log.received[h] != 4 {
			t.Errorf("host %s received %d controller messages, want 4", h, log.received[h])
		}
	}
}
