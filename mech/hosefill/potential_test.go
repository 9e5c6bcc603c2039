package hosefill

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bulkhead-dc/bulkhead/hose"
)

func TestLevel(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		capacity float64
		demands  []float64
		want     float64
	}{
		{450, nil, 450},
		{450, []float64{121}, 329},
		{450, []float64{inf}, 225},
		{100, []float64{20, inf, inf}, 80.0 / 3},
		{100, []float64{50, 60}, 100.0 / 3},
		{0, []float64{10}, 0},
	}
	for _, tc := range cases {
		if got := level(tc.capacity, append([]float64(nil), tc.demands...)); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("level(%g, %v) = %g, want %g", tc.capacity, tc.demands, got, tc.want)
		}
	}
}

// The limit a pair keeps whatever its demand, the lower of its source's
// and destination's levels, is never above its hose guarantee were its
// demand unbounded, so it holds no more than the pair is entitled to:
// random tenants, pairs and demands, each pair checked against the hose
// max-min with its demand made unbounded.
func TestPotentialAtMostGuarantee(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 0))
	for trial := range 300 {
		n := 2 + rng.IntN(6)
		var vms []hose.VM
		for i := range n {
			vms = append(vms, hose.VM{Name: string(rune('a' + i)), In: float64(rng.IntN(500)), Out: float64(rng.IntN(500))})
		}
		net, err := hose.NewNetwork(vms)
		if err != nil {
			t.Fatal(err)
		}
		var ip []hose.IndexPair
		for s := range n {
			for d := range n {
				if s == d || rng.IntN(2) == 0 {
					continue
				}
				dem := []float64{0, math.Inf(1), float64(rng.IntN(300))}[rng.IntN(3)]
				ip = append(ip, hose.IndexPair{Src: s, Dst: d, Demand: dem})
			}
		}
		tn := &tenant{net: net, ip: ip}
		tn.potentials()
		g := make([]float64, len(ip))
		for k, p := range ip {
			alt := append([]hose.IndexPair(nil), ip...)
			alt[k].Demand = math.Inf(1)
			if err := net.Solve(alt, g); err != nil {
				t.Fatal(err)
			}
			if pot := math.Min(tn.lout[p.Src], tn.lin[p.Dst]); pot > g[k]*(1+1e-9)+1e-9 {
				t.Fatalf("trial %d: pair %d→%d (demand %g): level %g above its guarantee %g were it unbounded", trial, p.Src, p.Dst, p.Demand, pot, g[k])
			}
		}
	}
}
