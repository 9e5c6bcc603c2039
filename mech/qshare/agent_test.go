package qshare

import (
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// TestAgentCap: in cap mode a hypervisor caps the VMs of its shared-queue
// tenants at their hose guarantees, lifts the caps of D-tenants once the
// controller says so, leaves best-effort VMs alone, and only sends
// changes.
func TestAgentCap(t *testing.T) {
	env := mech.Env{Host: "h1", VMs: []mech.VM{
		{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 200},
		{Name: "a2", Tenant: "A", Host: "h2", In: 100, Out: 200},
		{Name: "b1", Tenant: "B", Host: "h1", In: 50, Out: 50},
		{Name: "e1", Tenant: "E", Host: "h1"},
	}}
	a, err := newAgent(DefaultParams(), env)
	if err != nil {
		t.Fatal(err)
	}
	limits := func(act mech.Actions) map[string]float64 {
		m := map[string]float64{}
		for _, l := range act.Limits {
			k := l.VM + "/out"
			if l.Kind == mech.VMIngress {
				k = l.VM + "/in"
			}
			m[k] = l.Rate
		}
		return m
	}
	obs := &mech.HostObs{Period: 10 * time.Millisecond}
	got := limits(a.Step(obs, nil))
	want := map[string]float64{"a1/out": 200, "a1/in": 100, "b1/out": 50, "b1/in": 50}
	if len(got) != len(want) {
		t.Fatalf("first step: limits %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("first step: %s = %g, want %g", k, got[k], v)
		}
	}
	if got := a.Step(obs, nil); len(got.Limits) != 0 {
		t.Errorf("nothing changed, yet limits %v", got.Limits)
	}
	msg := mech.Message{From: mech.ControllerHost, To: "h1", Body: Binding{Dedicated: []string{"A"}}}
	got = limits(a.Step(obs, []mech.Message{msg}))
	if len(got) != 2 || !math.IsInf(got["a1/out"], 1) || !math.IsInf(got["a1/in"], 1) {
		t.Errorf("A dedicated: limits %v, want a1 unlimited only", got)
	}
	// As JSON, as a host daemon would read it off the wire.
	raw := `{"kind":"qshare.binding.v1","dedicated":[]}`
	got = limits(a.Step(obs, []mech.Message{{From: mech.ControllerHost, To: "h1", Body: raw}}))
	if got["a1/out"] != 200 || got["a1/in"] != 100 {
		t.Errorf("A back in the shared queue: limits %v", got)
	}
}

// TestAgentElasticSwitch: in elasticswitch mode the agent runs
// ElasticSwitch on the shared-queue tenants' pairs and lifts the pair
// limiters of D-tenants.
func TestAgentElasticSwitch(t *testing.T) {
	p := DefaultParams()
	p.Shared = SharedElasticSwitch
	env := mech.Env{Host: "h1", VMs: []mech.VM{
		{Name: "a1", Tenant: "A", Host: "h1", In: 100e6, Out: 100e6},
		{Name: "a2", Tenant: "A", Host: "h2", In: 100e6, Out: 100e6},
		{Name: "b1", Tenant: "B", Host: "h1", In: 100e6, Out: 100e6},
		{Name: "b2", Tenant: "B", Host: "h2", In: 100e6, Out: 100e6},
	}}
	a, err := newAgent(p, env)
	if err != nil {
		t.Fatal(err)
	}
	if a.Period() != p.ES.RA.Period {
		t.Errorf("period %v, want the RA period %v", a.Period(), p.ES.RA.Period)
	}
	pa, pb := mech.PairID{Src: "a1", Dst: "a2"}, mech.PairID{Src: "b1", Dst: "b2"}
	msg := mech.Message{From: mech.ControllerHost, To: "h1", Body: Binding{Dedicated: []string{"A"}}}
	var inbox []mech.Message
	inbox = append(inbox, msg)
	limitedB := false // ElasticSwitch limited B's pair at some step
	for step := 1; step <= 20; step++ {
		obs := &mech.HostObs{Now: time.Duration(step) * p.ES.RA.Period, Period: p.ES.RA.Period, Egress: []mech.PairObs{
			{Pair: pa, Tenant: "A", Rate: 50e6, Limit: 50e6, LimiterBound: true},
			{Pair: pb, Tenant: "B", Rate: 50e6, Limit: mech.Unlimited},
		}}
		act := a.Step(obs, inbox)
		inbox = nil
		liftedA := false
		for _, l := range act.Limits {
			if l.Kind == mech.PairLimit && l.Pair == pa {
				if !math.IsInf(l.Rate, 1) {
					t.Fatalf("step %d: D-tenant pair limited to %g", step, l.Rate)
				}
				liftedA = true
			}
			limitedB = limitedB || (l.Kind == mech.PairLimit && l.Pair == pb && !math.IsInf(l.Rate, 1))
		}
		if !liftedA {
			t.Errorf("step %d: D-tenant's limited pair not lifted", step)
		}
	}
	if !limitedB {
		t.Errorf("shared tenant's pair never limited by ElasticSwitch")
	}
}
