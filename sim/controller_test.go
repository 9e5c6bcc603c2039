package sim_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/sim"
)

// holdCentral is a test mechanism with a central controller that holds
// one flow at a fixed rate on one appliance (its other elements and the
// other flows unlimited) and records what it observes.
type holdCentral struct {
	flow mech.FlowID
	app  string
	rate float64 // tokens/s
	obs  *[]mech.ControllerObs
}

func (holdCentral) Name() string                          { return "hold" }
func (holdCentral) Capabilities() mech.Capabilities       { return mech.Capabilities{} }
func (holdCentral) NewAgent(mech.Env) (mech.Agent, error) { return idleAgent{}, nil }
func (h holdCentral) NewController(env mech.ControllerEnv) (mech.Controller, error) {
	return &holdController{h: h, env: env}, nil
}

type idleAgent struct{}

func (idleAgent) Period() time.Duration                           { return time.Hour }
func (idleAgent) Step(*mech.HostObs, []mech.Message) mech.Actions { return mech.Actions{} }

type holdController struct {
	h   holdCentral
	env mech.ControllerEnv
}

func (c *holdController) Period() time.Duration { return 500 * time.Millisecond }

func (c *holdController) Step(obs *mech.ControllerObs) mech.ControllerActions {
	o := *obs
	o.Flows = append([]mech.FlowObs(nil), obs.Flows...)
	*c.h.obs = append(*c.h.obs, o)
	var act mech.ControllerActions
	for _, f := range obs.Flows {
		if f.Flow != c.h.flow {
			continue
		}
		rates := make([]float64, len(f.Path))
		for k, pe := range f.Path {
			rates[k] = math.Inf(1)
			if c.env.Resources[pe.Resource].ID == c.h.app {
				rates[k] = c.h.rate
			}
		}
		act.Allocations = append(act.Allocations, mech.FlowAllocation{Flow: f.Flow, Rates: rates})
	}
	return act
}

// TestControllerObservations checks what a rate enforcer reports per flow
// (Pulsar §4.2): tokens used per second, and the average tokens queued at
// the enforcer and outstanding beyond it, on every element of the path in
// that element's tokens — the same requests, so outstanding ÷ used is the
// flow's round trip on every element. A FIFO appliance delays every
// request it serves alike: a flow its enforcer holds back to 100 MT/s
// waits as long at a filestore that another tenant (64 outstanding per
// VM, unlimited) keeps saturated as that tenant's requests do.
func TestControllerObservations(t *testing.T) {
	y := appHeader + `workloads:
  - {tenant: A, kind: requests, src: [a1, a2], appliance: fs, outstanding: 64, mix: [{type: write, size: 64KB}]}
  - {tenant: B, kind: requests, src: b1, appliance: fs, outstanding: 8, mix: [{type: write, size: 64KB}]}
`
	s := prepare(t, y)
	var seen []mech.ControllerObs
	m := holdCentral{flow: mech.FlowID{Src: "b1", Dst: "fs"}, app: "fs", rate: 100e6, obs: &seen}
	if _, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m}); err != nil {
		t.Fatal(err)
	}
	last := seen[len(seen)-1]
	rtt := map[string]float64{}
	for _, f := range last.Flows {
		var ratio float64
		for k := range f.Path {
			if f.Used[k] <= 0 {
				t.Fatalf("%v: element %d unused", f.Flow, k)
			}
			r := f.Outstanding[k] / f.Used[k]
			if k > 0 && math.Abs(r-ratio) > 1e-9*ratio {
				t.Errorf("%v: outstanding/used %g on element %d, %g on element 0", f.Flow, r, k, ratio)
			}
			ratio = r
		}
		rtt[f.Flow.Src] = ratio
		if f.Flow.Src == "b1" {
			// Held back to 100 MT/s of 64 KB writes: 1562.5 requests/s;
			// the rest of its 8 requests wait at the enforcer.
			fsTok := 64000.0
			k := len(f.Path) / 2 // the appliance, between the links
			if math.Abs(f.Used[k]-100e6) > 1e3 {
				t.Errorf("b1 used %g tokens/s at fs, want 100e6", f.Used[k])
			}
			if q, o := f.Queued[k]/fsTok, f.Outstanding[k]/fsTok; math.Abs(q+o-8) > 1e-6 || q <= 0 {
				t.Errorf("b1: %.3f requests queued, %.3f outstanding: want 8 in all, some queued", q, o)
			}
		}
	}
	t.Logf("round trips: a1 %.3g s, a2 %.3g s, b1 %.3g s", rtt["a1"], rtt["a2"], rtt["b1"])
	// A's requests wait at the saturated filestore far longer than the
	// round trip plus service (37 µs + 100 µs); B's as long.
	if rtt["a1"] < 10*137e-6 || math.Abs(rtt["b1"]-rtt["a1"]) > 0.01*rtt["a1"] {
		t.Errorf("round trips: a1 %.3g s, a2 %.3g s, b1 %.3g s; want b1 ≈ a1 ≫ 137 µs", rtt["a1"], rtt["a2"], rtt["b1"])
	}
}

// defaultsCentral is a test mechanism whose controller never allocates a
// flow: it announces a default rate and per-VM default rates only.
type defaultsCentral struct {
	def   float64
	bySrc map[string]float64
}

func (defaultsCentral) Name() string                          { return "defaults" }
func (defaultsCentral) Capabilities() mech.Capabilities       { return mech.Capabilities{} }
func (defaultsCentral) NewAgent(mech.Env) (mech.Agent, error) { return idleAgent{}, nil }
func (d defaultsCentral) NewController(mech.ControllerEnv) (mech.Controller, error) {
	return defaultsController(d), nil
}

type defaultsController defaultsCentral

func (defaultsController) Period() time.Duration { return 500 * time.Millisecond }
func (c defaultsController) Step(*mech.ControllerObs) mech.ControllerActions {
	return mech.ControllerActions{DefaultRate: c.def, DefaultBySrc: c.bySrc}
}

// TestControllerDefaultBySrc: flows never allocated run at their source
// VM's default rate when the controller lists one (on every element of
// their path, in its tokens), at the default rate otherwise.
func TestControllerDefaultBySrc(t *testing.T) {
	y := appHeader + `workloads:
  - {tenant: A, kind: tcp, src: a1, dst: a2}
  - {tenant: A, kind: tcp, src: a2, dst: a1}
  - {tenant: B, kind: requests, src: b1, appliance: fs, outstanding: 64, mix: [{type: write, size: 64KB}]}
  - {tenant: B, kind: requests, src: b2, appliance: fs, outstanding: 64, mix: [{type: write, size: 64KB}]}
`
	s := prepare(t, y)
	m := defaultsCentral{def: 10e6, bySrc: map[string]float64{"a1": 50e6, "b1": 20e6}}
	in, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m})
	if err != nil {
		t.Fatal(err)
	}
	last := in.Samples[len(in.Samples)-1]
	for i, p := range in.Pairs {
		want := 10e6 * 8
		if p.Src == "a1" {
			want = 50e6 * 8
		}
		if got := last.Pairs[i].Rate; math.Abs(got-want) > 0.01*want {
			t.Errorf("%s->%s: %.4g bits/s, want %.4g", p.Src, p.Dst, got, want)
		}
	}
	// Both request flows are limited on the same element (the same mix):
	// b1 at twice b2's rate, at most its 20 M tokens/s there.
	tok := map[string]float64{}
	for i, f := range in.RequestFlows {
		tok[f.Src] = last.Requests[i].Tokens
	}
	if r := tok["b1"] / tok["b2"]; !(tok["b2"] > 0) || math.Abs(r-2) > 0.02 || tok["b1"] > 20e6*1.001 {
		t.Errorf("request flows: b1 %.4g, b2 %.4g tokens/s at fs; want b1 = 2·b2 ≤ 20e6", tok["b1"], tok["b2"])
	}
	t.Logf("request flows: b1 %.4g, b2 %.4g tokens/s at fs", tok["b1"], tok["b2"])
}
