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
		wantA  float64 // A's allocation after the second period, Mbps (the link: 990 allocatable)
		wantB  float64
		demand float64 // A's demand estimate after the second, Mbps (-1: +Inf)
	}{
		{"both unbounded: the link split by guarantees",
			[2]meas{{500 * mbps, true}, {500 * mbps, true}}, [2]meas{{500 * mbps, true}, {500 * mbps, true}}, 495, 495, -1},
		{"A bounded at 100: its demand × 1.1², B the rest; A's limit at what a second unbounded pair of a1 would get (450 − 121)",
			[2]meas{{100 * mbps, false}, {100 * mbps, false}}, [2]meas{{500 * mbps, true}, {869 * mbps, true}}, 329, 869, 121},
		{"A starved on the full link, still sending a little: unbounded, its guarantee at once",
			[2]meas{{500 * mbps, true}, {5 * mbps, false}}, [2]meas{{500 * mbps, true}, {985 * mbps, false}}, 495, 495, -1},
		{"A stopped after it sent: no demand, its limit at the guarantee it would have",
			[2]meas{{500 * mbps, true}, {0, false}}, [2]meas{{500 * mbps, true}, {990 * mbps, true}}, 450, 990, 0},
		{"A starts below its limit across the full link, its VMs otherwise idle: unbounded at once",
			[2]meas{{0, false}, {8 * mbps, false}}, [2]meas{{990 * mbps, true}, {982 * mbps, false}}, 495, 495, -1},
		{"A idle: no demand, no guarantee held; B fills the link, A's limit at the guarantee it would have (its hose)",
			[2]meas{{0, false}, {0, false}}, [2]meas{{1000 * mbps, true}, {990 * mbps, true}}, 450, 990, 0},
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
			// What the pairs are expected to send (their limits, up to
			// their demand estimates) fits the link less the headroom; a
			// limit above a demand holds room only for a pair whose demand
			// grows.
			d, _ := c.Demand("a1", "a2")
			dB, _ := c.Demand("b1", "b2")
			if sent := math.Min(limA, d) + math.Min(limB, dB); sent > 990*mbps*(1+1e-9) {
				t.Errorf("allocations %.1f / %.1f Mbps for demands %.1f / %.1f over-commit the link's 990 Mbps", limA/mbps, limB/mbps, d/mbps, dB/mbps)
			}
			if want := tc.demand * mbps; tc.demand < 0 && !math.IsInf(d, 1) || tc.demand >= 0 && math.Abs(d-want) > 1e3 {
				t.Errorf("A's demand %g, want %g Mbps (-1: unbounded)", d, tc.demand)
			}
		})
	}
}

// A pair the controller has never seen (it never sent: a TCP pair behind
// UDP that fills its link) has no limit and no demand; the headroom is
// the gap in which it sends and shows up. B alone, held back by its
// limiter, is given the link less the headroom, not all of it.
func TestUnseenPairFindsGap(t *testing.T) {
	m, err := all.New(hosefill.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := m.(mech.Central).NewController(env())
	if err != nil {
		t.Fatal(err)
	}
	c := ctl.(*hosefill.Controller)
	lim := 0.0
	for k := 0; k < 3; k++ {
		act := c.Step(&mech.ControllerObs{Now: time.Duration(k+1) * c.Period(), Period: c.Period(),
			Flows: []mech.FlowObs{flow("b1", "b2", meas{1000 * mbps, true}, lim)}})
		if len(act.Allocations) != 1 {
			t.Fatalf("step %d: %d allocations, want 1", k, len(act.Allocations))
		}
		lim = act.Allocations[0].Rates[0] * 8
	}
	if want := (1 - hosefill.Defaults().Headroom) * 1000 * mbps; lim > want*(1+1e-9) || hosefill.Defaults().Headroom <= 0 {
		t.Errorf("B alone is allocated %.1f Mbps of the 1 Gbps link (headroom %g), want ≤ %.1f: no gap for a pair not yet seen",
			lim/mbps, hosefill.Defaults().Headroom, want/mbps)
	}
}

// A pair that starts sending below its limit across a full link while its
// VM has another pair with demand may be a short flow, done already: it is
// bounded at what it sent for its first period, and its VM's elephant
// keeps its guarantee (Fig. 9). Sending for a second period, it is deemed
// starved there and gets its share of the hose.
func TestNewPairOfBusyVM(t *testing.T) {
	e := mech.ControllerEnv{
		Resources: []mech.ResourceInfo{{ID: "core", Kind: mech.LinkResource, Capacity: 1000 * mbps / 8}},
		VMs: []mech.VM{
			{Name: "a1", Tenant: "A", Host: "h1", In: 0, Out: 450 * mbps},
			{Name: "a2", Tenant: "A", Host: "h2", In: 450 * mbps, Out: 0},
			{Name: "a3", Tenant: "A", Host: "h4", In: 450 * mbps, Out: 0},
			{Name: "b1", Tenant: "B", Host: "h3", In: 450 * mbps, Out: 450 * mbps},
			{Name: "b2", Tenant: "B", Host: "h2", In: 450 * mbps, Out: 450 * mbps},
		},
	}
	c, err := hosefill.NewController(hosefill.Defaults(), e)
	if err != nil {
		t.Fatal(err)
	}
	lim := map[string]float64{}
	step := func(k int, flows ...mech.FlowObs) {
		act := c.Step(&mech.ControllerObs{Now: time.Duration(k) * c.Period(), Period: c.Period(), Flows: flows})
		for _, a := range act.Allocations {
			lim[a.Flow.Src+a.Flow.Dst] = a.Rates[0] * 8
		}
	}
	step(1, flow("a1", "a2", meas{500 * mbps, true}, 0), flow("b1", "b2", meas{500 * mbps, true}, 0))
	step(2, flow("a1", "a2", meas{lim["a1a2"], true}, lim["a1a2"]), flow("b1", "b2", meas{lim["b1b2"], true}, lim["b1b2"]),
		flow("a1", "a3", meas{8 * mbps, false}, 0))
	if d, _ := c.Demand("a1", "a3"); math.IsInf(d, 1) || lim["a1a2"] < 480*mbps {
		t.Errorf("first period of a1→a3 (8 Mbps): demand %g Mbps, a1→a2 allocated %.1f Mbps; want bounded and a1→a2 ≥ 480",
			d/mbps, lim["a1a2"]/mbps)
	}
	step(3, flow("a1", "a2", meas{lim["a1a2"], true}, lim["a1a2"]), flow("b1", "b2", meas{lim["b1b2"], true}, lim["b1b2"]),
		flow("a1", "a3", meas{8 * mbps, false}, lim["a1a3"]))
	if d, _ := c.Demand("a1", "a3"); !math.IsInf(d, 1) || math.Abs(lim["a1a3"]-247.5*mbps) > 1e3 {
		t.Errorf("second period of a1→a3: demand %g, allocation %.1f Mbps; want unbounded, 225 + its share of the spare (247.5)",
			d/mbps, lim["a1a3"]/mbps)
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
	if !c.PairLimits || !c.Central || !c.FastCentral || c.Losses || c.Schedulers {
		t.Errorf("capabilities %+v", c)
	}
	if ok, _ := c.RealTraffic(); ok {
		t.Error("a controller stepping every 10 ms cannot run over host agents' reports")
	}
}
