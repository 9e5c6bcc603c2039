package seawall_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/seawall"
	"github.com/bulkhead-dc/bulkhead/spec"
)

const (
	mbps   = 1e6
	period = 15 * time.Millisecond
)

func pid(s, d string) mech.PairID { return mech.PairID{Src: s, Dst: d} }

func env() mech.Env {
	return mech.Env{Host: "h1", VMs: []mech.VM{
		{Name: "w", Tenant: "T", Host: "h1", In: 900 * mbps, Out: 900 * mbps},
		{Name: "x", Tenant: "T", Host: "h1", In: 450 * mbps, Out: 450 * mbps},
		{Name: "y", Tenant: "T", Host: "h2", In: 450 * mbps, Out: 450 * mbps},
		{Name: "z", Tenant: "T", Host: "h3", In: 450 * mbps, Out: 450 * mbps},
	}}
}

// host drives the agent of h1 with every pair limiter-bound (infinite
// demand) and, when lossy, losses in every period.
type host struct {
	a     mech.Agent
	pairs []mech.PairID
	limit map[mech.PairID]float64
	lossy bool
	k     int
}

func newHost(t *testing.T, params map[string]any, pairs ...mech.PairID) *host {
	t.Helper()
	m, err := seawall.New(params)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.NewAgent(env())
	if err != nil {
		t.Fatal(err)
	}
	return &host{a: a, pairs: pairs, limit: map[mech.PairID]float64{}}
}

func (h *host) run(n int) {
	for i := 0; i < n; i++ {
		obs := &mech.HostObs{Now: time.Duration(h.k) * period, Period: period}
		h.k++
		for _, p := range h.pairs {
			lim, ok := h.limit[p]
			if !ok {
				lim = math.Inf(1)
			}
			o := mech.PairObs{Pair: p, Tenant: "T", Limit: lim, Rate: math.Min(lim, 1000*mbps), LimiterBound: true}
			if h.lossy {
				o.Losses = 1
			}
			obs.Egress = append(obs.Egress, o)
		}
		for _, l := range h.a.Step(obs, nil).Limits {
			h.limit[l.Pair] = l.Rate
		}
	}
}

// Weights come from the source VMs' hoses, split among their active pairs;
// no guarantee: losses drive a pair down to min_rate.
func TestWeightsAndNoFloor(t *testing.T) {
	h := newHost(t, nil, pid("w", "y"), pid("x", "y"), pid("x", "z"))
	h.run(1)
	for _, p := range h.pairs {
		if h.limit[p] != 0.1*mbps {
			t.Fatalf("%v starts at %g, want min_rate 100 Kbps", p, h.limit[p])
		}
	}
	h.run(40)
	// w (900 Mbps, one pair) has weight 2; x (450 Mbps, two pairs) 0.5 per
	// pair: convex increases in the ratio 4:1.
	gw := h.limit[pid("w", "y")] - 0.1*mbps
	gx := h.limit[pid("x", "y")] - 0.1*mbps
	if math.Abs(gw/gx-4) > 1e-6 {
		t.Errorf("increases %g and %g, want ratio 4", gw, gx)
	}
	if h.limit[pid("x", "y")] != h.limit[pid("x", "z")] {
		t.Errorf("x's pairs differ: %g and %g", h.limit[pid("x", "y")], h.limit[pid("x", "z")])
	}
	before := h.limit[pid("w", "y")]
	h.lossy = true
	h.run(1)
	if got := h.limit[pid("w", "y")]; math.Abs(got-0.6*before) > 1e-6 {
		t.Errorf("after losses %g, want 0.6·%g", got, before)
	}
	h.run(60)
	if got := h.limit[pid("w", "y")]; got != 0.1*mbps {
		t.Errorf("under constant losses %g, want min_rate (no guarantee)", got)
	}
}

func TestParams(t *testing.T) {
	if _, err := seawall.New(map[string]any{"alpha": 0.5, "aggressive": true, "congestion": "both"}); err != nil {
		t.Fatal(err)
	}
	d := seawall.Defaults()
	if d.RA.HoldIncrease || d.RA.RateCaution || d.RA.Alpha != 0.4 || d.RA.Period != period {
		t.Errorf("defaults %+v", d)
	}
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"alpha": "x"}, `mechanism.params.alpha: expected a number, got "x"`},
		{map[string]any{"hold_increase": true}, "mechanism.params.hold_increase: unknown parameter"},
		{map[string]any{"rate_caution": true}, "mechanism.params.rate_caution: unknown parameter"},
		{map[string]any{"min_rate": 0}, "mechanism.params.min_rate: must be a positive finite rate, got 0"},
		{map[string]any{"idle_timeout": "-1s"}, "mechanism.params.idle_timeout"},
	} {
		_, err := seawall.New(tc.params)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want an error containing %q", tc.params, err, tc.want)
			continue
		}
		if len(spec.FieldErrors(err)) == 0 {
			t.Errorf("New(%v): %v has no *spec.FieldError", tc.params, err)
		}
		if _, err2 := all.New(seawall.Name, tc.params); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("registry: %v, want %v", err2, err)
		}
	}
}
