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

// TestProtectorCapsSiblings: with dedicated: hose, a D-tenant's pair that
// its own siblings keep below its hose guarantee makes the hypervisors of
// its tenant cap the siblings that share a host link with it: a
// responsive one by the deficit (never below its guarantee), an
// unresponsive one (losing more than it delivers) at its guarantee; the
// cap stays while the short pair keeps what it gained. With dedicated:
// tenant (the paper) nothing is limited. Tenant A (hoses 200 Mbps): a2 →
// a1 (host h2 → h1) and a4 → a3 (h3 → h1) share A's queue on h1's
// downlink, 650 Mbps: a2 → a1 takes 520 (TCP, more connections, few
// losses) or delivers 500 of 1000 (UDP), a4 → a3 what is left.
func TestProtectorCapsSiblings(t *testing.T) {
	const hose, queue = 200e6, 650e6
	vms := []mech.VM{ // sorted by name, as mech.Env wants them
		{Name: "a1", Tenant: "A", Host: "h1", In: hose, Out: hose},
		{Name: "a2", Tenant: "A", Host: "h2", In: hose, Out: hose},
		{Name: "a3", Tenant: "A", Host: "h1", In: hose, Out: hose},
		{Name: "a4", Tenant: "A", Host: "h3", In: hose, Out: hose},
	}
	heavy, light := mech.PairID{Src: "a2", Dst: "a1"}, mech.PairID{Src: "a4", Dst: "a3"}
	for _, c := range []struct {
		name      string
		dedicated string
		udp       bool
		first     float64 // the heavy pair's first cap (0: never capped)
	}{
		{"tcp", DedicatedHose, false, 520e6 - 70e6},
		{"udp", DedicatedHose, true, hose},
		{"paper", DedicatedTenant, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultParams()
			p.Dedicated = c.dedicated
			h2, err := newAgent(p, mech.Env{Host: "h2", VMs: vms})
			if err != nil {
				t.Fatal(err)
			}
			h3, err := newAgent(p, mech.Env{Host: "h3", VMs: vms})
			if err != nil {
				t.Fatal(err)
			}
			period := h2.Period()
			secs := period.Seconds()
			bind := mech.Message{From: mech.ControllerHost, Body: Binding{Dedicated: []string{"A"}}}
			in2, in3 := []mech.Message{bind}, []mech.Message{bind}
			limit, first := mech.Unlimited, 0.0
			for step := 1; step <= 20; step++ {
				now := time.Duration(step) * period
				// What the queue gives each pair under the heavy pair's limit.
				hr, hl := math.Min(520e6, limit), 0.0
				if c.udp {
					offered := math.Min(1000e6, limit)
					hr = math.Min(offered, 500e6)
					hl = offered - hr
				} else {
					hl = hr * 0.01
				}
				lr := queue - hr
				o2 := &mech.HostObs{Now: now, Period: period, Egress: []mech.PairObs{{Pair: heavy, Tenant: "A",
					Rate: hr, Limit: limit, LimiterBound: hr >= limit, Losses: hl * secs / packetBits}}}
				o3 := &mech.HostObs{Now: now, Period: period, Egress: []mech.PairObs{{Pair: light, Tenant: "A",
					Rate: lr, Limit: mech.Unlimited, Losses: lr * 0.01 * secs / packetBits}}}
				a2, a3 := h2.Step(o2, in2), h3.Step(o3, in3)
				in2, in3 = nil, nil
				for _, m := range a3.Messages {
					if m.To == "h2" {
						m.From = "h3"
						in2 = append(in2, m)
					}
				}
				for _, m := range a2.Messages {
					if m.To == "h3" {
						m.From = "h2"
						in3 = append(in3, m)
					}
				}
				for _, l := range a2.Limits {
					if l.Kind == mech.PairLimit && l.Pair == heavy {
						limit = l.Rate
						if first == 0 && !math.IsInf(l.Rate, 1) {
							first = l.Rate
						}
					}
				}
				for _, l := range a3.Limits {
					if l.Kind == mech.PairLimit && !math.IsInf(l.Rate, 1) {
						t.Errorf("step %d: the short pair limited to %.1f Mbps", step, l.Rate/1e6)
					}
				}
			}
			if math.Abs(first-c.first) > 1 {
				t.Errorf("heavy pair first capped at %.1f Mbps, want %.1f (0: never)", first/1e6, c.first/1e6)
			}
			if !c.udp && c.first > 0 && limit != c.first {
				t.Errorf("heavy pair at %.1f Mbps after 20 periods, want its cap %.1f to stay while the short pair keeps its guarantee", limit/1e6, c.first/1e6)
			}
		})
	}
}
