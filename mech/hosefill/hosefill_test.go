package hosefill_test

import (
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/hosefill"
)

const mbps = 1e6

// env: tenants A (a1 → a2) and B (b1 → b2), 450 Mbps hoses, both pairs
// over one 1 Gbps link (resource 0, capacity in bytes/s).
func env() mech.ControllerEnv {
	return mech.ControllerEnv{
		Resources: []mech.ResourceInfo{{ID: "core", Kind: mech.LinkResource, Capacity: 1000 * mbps / 8}},
		VMs: []mech.VM{
			{Name: "a1", Tenant: "A", Host: "h1", In: 450 * mbps, Out: 450 * mbps},
			{Name: "a2", Tenant: "A", Host: "h2", In: 450 * mbps, Out: 450 * mbps},
			{Name: "b1", Tenant: "B", Host: "h3", In: 450 * mbps, Out: 450 * mbps},
			{Name: "b2", Tenant: "B", Host: "h2", In: 450 * mbps, Out: 450 * mbps},
		},
	}
}

// meas is one pair's measurement in a period: what it sent (bits/s) and
// whether its limiter held it back.
type meas struct {
	used float64
	held bool
}

func flow(src, dst string, m meas, limit float64) mech.FlowObs {
	fo := mech.FlowObs{Flow: mech.FlowID{Src: src, Dst: dst}, Path: []mech.PathElem{{Resource: 0}},
		Used: []float64{m.used / 8}, Backlog: []float64{0}}
	if m.held {
		fo.Backlog[0] = m.used / 8 * 0.01
	}
	if limit > 0 {
		fo.Allocation = []float64{limit / 8}
	}
	return fo
}

func TestAllocation(t *testing.T) {
	cases := []struct {
		name string
		// a and b: the pairs' measurements in two successive periods
		a, b   [2]meas
		wantA  float64 // A's allocation after the second period, Mbps
		wantB  float64
		demand float64 // A's demand estimate after the second, Mbps (-1: +Inf)
	}{
		{"both unbounded: the link split by guarantees",
			[2]meas{{500 * mbps, true}, {500 * mbps, true}}, [2]meas{{500 * mbps, true}, {500 * mbps, true}}, 500, 500, -1},
		{"A bounded at 100: its demand × 1.1², B the rest",
			[2]meas{{100 * mbps, false}, {100 * mbps, false}}, [2]meas{{500 * mbps, true}, {879 * mbps, true}}, 121, 879, 121},
		{"A starved on the full link after it sent: unbounded, its guarantee at once",
			[2]meas{{500 * mbps, true}, {0, false}}, [2]meas{{500 * mbps, true}, {1000 * mbps, false}}, 500, 500, -1},
		{"A idle: no demand, no guarantee held; B fills the link, A keeps min_rate above it",
			[2]meas{{0, false}, {0, false}}, [2]meas{{1000 * mbps, true}, {1000 * mbps, true}}, 0.1, 1000, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := all.New(hosefill.Name, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctl, err := m.(mech.Central).NewController(env())
			if err != nil {
				t.Fatal(err)
			}
			c := ctl.(*hosefill.Controller)
			if c.Period() != 10*time.Millisecond {
				t.Fatalf("period %v, want 10ms", c.Period())
			}
			limA, limB := 0.0, 0.0
			var act mech.ControllerActions
			for k := 0; k < 2; k++ {
				obs := &mech.ControllerObs{Now: time.Duration(k+1) * c.Period(), Period: c.Period(), Flows: []mech.FlowObs{
					flow("a1", "a2", tc.a[k], limA), flow("b1", "b2", tc.b[k], limB)}}
				act = c.Step(obs)
				if len(act.Allocations) != 2 {
					t.Fatalf("step %d: %d allocations, want 2", k, len(act.Allocations))
				}
				limA, limB = act.Allocations[0].Rates[0]*8, act.Allocations[1].Rates[0]*8
			}
			if math.Abs(limA-tc.wantA*mbps) > 1e3 || math.Abs(limB-tc.wantB*mbps) > 1e3 {
				t.Errorf("allocations %.1f / %.1f Mbps, want %g / %g", limA/mbps, limB/mbps, tc.wantA, tc.wantB)
			}
			// Only min_rate (100 Kbps) may be above the link's capacity.
			if limA+limB > 1000.1*mbps*(1+1e-9) {
				t.Errorf("allocations %.1f + %.1f Mbps over-commit the 1 Gbps link by more than min_rate", limA/mbps, limB/mbps)
			}
			d, _ := c.Demand("a1", "a2")
			if want := tc.demand * mbps; tc.demand < 0 && !math.IsInf(d, 1) || tc.demand >= 0 && math.Abs(d-want) > 1e3 {
				t.Errorf("A's demand %g, want %g Mbps (-1: unbounded)", d, tc.demand)
			}
		})
	}
}

func TestParams(t *testing.T) {
	cases := []struct {
		params map[string]any
		bad    string
	}{
		{map[string]any{"period": "5ms", "margin": 0.2, "headroom": 0.05, "min_rate": "1Mbps"}, ""},
		{map[string]any{"period": "0s"}, "mechanism.params.period"},
		{map[string]any{"margin": 1.0}, "mechanism.params.margin"},
		{map[string]any{"headroom": -0.1}, "mechanism.params.headroom"},
		{map[string]any{"min_rate": "0bps"}, "mechanism.params.min_rate"},
		{map[string]any{"alpha": 0.4}, "mechanism.params.alpha"},
	}
	for _, tc := range cases {
		_, err := hosefill.New(tc.params)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%v: %v", tc.params, err)
		case tc.bad != "" && (err == nil || !contains(err.Error(), tc.bad)):
			t.Errorf("%v: error %v, want one naming %s", tc.params, err, tc.bad)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// The mechanism declares what it needs: pair limiters and a central
// controller, so host agents on real traffic cannot run it.
func TestCapabilities(t *testing.T) {
	m, err := hosefill.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Capabilities()
	if !c.PairLimits || !c.Central || c.Losses || c.Schedulers {
		t.Errorf("capabilities %+v", c)
	}
	if ok, _ := c.RealTraffic(); ok {
		t.Error("a central controller cannot run on host agents")
	}
}
