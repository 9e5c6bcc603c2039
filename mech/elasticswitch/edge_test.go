package elasticswitch_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
)

func TestWeightedMaxMin(t *testing.T) {
	for _, tc := range []struct {
		name             string
		capacity         float64
		weights, demands []float64
		want             []float64
		level            float64
	}{
		{"split by weight", 900, []float64{2, 1}, []float64{inf, inf}, []float64{600, 300}, 300},
		{"small demand met, rest by weight", 900, []float64{1, 1, 2}, []float64{100, inf, inf}, []float64{100, 800.0 / 3, 1600.0 / 3}, 800.0 / 3},
		{"all met", 900, []float64{1, 1}, []float64{100, 200}, []float64{100, 200}, inf},
		{"demand just above its share", 300, []float64{1, 1}, []float64{151, inf}, []float64{150, 150}, 150},
		{"nothing", 0, []float64{1}, []float64{inf}, []float64{0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]float64, len(tc.demands))
			level := elasticswitch.WeightedMaxMin(tc.capacity, tc.weights, tc.demands, out)
			for i := range out {
				if !near(out[i], tc.want[i]) {
					t.Errorf("out %v, want %v", out, tc.want)
					break
				}
			}
			if !(math.IsInf(tc.level, 1) && math.IsInf(level, 1)) && !near(level, tc.level) {
				t.Errorf("level %g, want %g", level, tc.level)
			}
		})
	}
}

// Properties of the weighted max-min on random inputs: it never gives
// more than the capacity or a demand; either every demand is met or the
// capacity is used up; a pair given less than its demand gets the level
// times its weight, and every pair whose demand was met asked for at most
// that.
func TestWeightedMaxMinProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for k := 0; k < 2000; k++ {
		n := 1 + r.IntN(12)
		capacity := r.Float64() * 1000
		w, d := make([]float64, n), make([]float64, n)
		for i := range w {
			w[i] = 0.01 + r.Float64()*5
			d[i] = r.Float64() * 300
			if r.IntN(4) == 0 {
				d[i] = inf
			}
		}
		out := make([]float64, n)
		level := elasticswitch.WeightedMaxMin(capacity, w, d, out)
		sum, sumD := 0.0, 0.0
		for i := range out {
			if out[i] > d[i]*(1+1e-9) || out[i] < 0 {
				t.Fatalf("case %d: pair %d gets %g for demand %g", k, i, out[i], d[i])
			}
			sum += out[i]
			sumD += d[i]
			if out[i] < d[i]*(1-1e-9) && !near(out[i], level*w[i]) {
				t.Fatalf("case %d: pair %d short of its demand gets %g, not level %g × weight %g", k, i, out[i], level, w[i])
			}
			if out[i] >= d[i]*(1-1e-9) && d[i]/w[i] > level*(1+1e-9) {
				t.Fatalf("case %d: pair %d met above the level", k, i)
			}
		}
		if sum > capacity*(1+1e-9) || (!near(sum, capacity) && !near(sum, sumD)) {
			t.Fatalf("case %d: allocated %g of %g for demands %g", k, sum, capacity, sumD)
		}
	}
}

// edgeEnv: a receiving host h0 with a 1 Gbps access link and two
// receivers, a (600 Mbps in-hose) and b (300), fed from s1 and s2 on
// other hosts; every VM sends up to 1 Gbps.
func edgeEnv(host string) mech.Env {
	return mech.Env{Host: host, HostLinks: map[string]float64{"h0": 1e9, "h1": 1e9, "h2": 1e9},
		VMs: []mech.VM{
			{Name: "a", Tenant: "A", Host: "h0", In: 600 * mbps, Out: 600 * mbps},
			{Name: "b", Tenant: "B", Host: "h0", In: 300 * mbps, Out: 300 * mbps},
			{Name: "s1", Tenant: "A", Host: "h1", In: 1000 * mbps, Out: 1000 * mbps},
			{Name: "s2", Tenant: "B", Host: "h2", In: 1000 * mbps, Out: 1000 * mbps},
		}}
}

// ceilings runs the receiving host h0 for n steps with the pairs' rates
// and returns the ceilings of its last remote-guarantee messages.
func ceilings(t *testing.T, params map[string]any, rates func(k int) map[mech.PairID]float64, n int) map[mech.PairID]float64 {
	t.Helper()
	m, err := elasticswitch.New(params)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := m.NewAgent(edgeEnv("h0"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[mech.PairID]float64{}
	for k := 0; k < n; k++ {
		obs := &mech.HostObs{Now: time.Duration(k) * period, Period: period}
		for p, r := range rates(k) {
			obs.Ingress = append(obs.Ingress, mech.PairObs{Pair: p, Rate: r, Limit: inf})
		}
		for _, msg := range ag.Step(obs, nil).Messages {
			if g, ok := mech.DecodeBody[elasticswitch.Guarantees](msg.Body); ok {
				for _, rg := range g.Pairs {
					got[pid(rg.Src, rg.Dst)] = rg.Ceiling
				}
			}
		}
	}
	return got
}

// A receiving host divides its downlink, less the headroom, among the
// pairs crossing it by their guarantees (600:300), whatever their number
// of connections; a pair that stops is counted at zero and the other
// may take the link; with edge_ceiling off no ceiling is sent.
func TestEdgeCeilingsAtTheReceiver(t *testing.T) {
	sa, sb := pid("s1", "a"), pid("s2", "b")
	both := func(int) map[mech.PairID]float64 {
		return map[mech.PairID]float64{sa: 700 * mbps, sb: 300 * mbps}
	}
	got := ceilings(t, nil, both, 40)
	if !near(got[sa], 980*mbps*2/3) || !near(got[sb], 980*mbps/3) {
		t.Errorf("ceilings a %.1f b %.1f Mbps, want 653.3 and 326.7 (980 Mbps by 2:1)", got[sa]/mbps, got[sb]/mbps)
	}
	bStops := func(k int) map[mech.PairID]float64 {
		if k >= 20 {
			return map[mech.PairID]float64{sa: 700 * mbps}
		}
		return both(k)
	}
	got = ceilings(t, nil, bStops, 40)
	if !near(got[sa], 980*mbps) {
		t.Errorf("with b stopped, a's ceiling %.1f Mbps, want the link less headroom (980)", got[sa]/mbps)
	}
	got = ceilings(t, map[string]any{"edge_ceiling": false}, both, 40)
	if got[sa] != 0 || got[sb] != 0 {
		t.Errorf("edge_ceiling off: ceilings %v, want none", got)
	}
}

// A source caps a pair's RA rate at the destination's ceiling, but never
// below the pair's guarantee.
func TestEdgeCeilingCapsRA(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ceiling float64
		want    float64
	}{
		{"ceiling above the guarantee", 700 * mbps, 700 * mbps},
		{"ceiling below the guarantee", 100 * mbps, 600 * mbps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := elasticswitch.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			ag, err := m.NewAgent(edgeEnv("h1"))
			if err != nil {
				t.Fatal(err)
			}
			p := pid("s1", "a")
			limit := inf
			for k := 0; k < 400; k++ {
				obs := &mech.HostObs{Now: time.Duration(k) * period, Period: period}
				obs.Egress = []mech.PairObs{{Pair: p, Rate: math.Min(limit, 1000*mbps), Limit: limit, LimiterBound: limit < 1000*mbps}}
				var inbox []mech.Message
				if k%4 == 0 {
					inbox = []mech.Message{{From: "h0", Body: elasticswitch.Guarantees{Pairs: []elasticswitch.RemoteGuarantee{
						{Src: "s1", Dst: "a", Share: 600 * mbps, Unbounded: true, Ceiling: tc.ceiling}}}}}
				}
				for _, l := range ag.Step(obs, inbox).Limits {
					limit = l.Rate
				}
			}
			if !near(limit, tc.want) {
				t.Errorf("limit %.1f Mbps after 6 s, want %.1f", limit/mbps, tc.want/mbps)
			}
		})
	}
}
