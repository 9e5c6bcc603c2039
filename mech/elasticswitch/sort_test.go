package elasticswitch

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortByNorm without NaNs orders as the stable sort by "less" does, ties
// (equal norms, +0 and -0, +Inf) in position order.
func TestSortByNormStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 4))
	vals := []float64{0, math.Copysign(0, -1), 1e-300, 0.5, 1, 1, 3e6, 450e6, math.Inf(1)}
	for trial := range 2000 {
		n := 1 + rng.IntN(80)
		norm := make([]float64, n)
		for i := range norm {
			if rng.IntN(3) == 0 {
				norm[i] = rng.Float64() * 1e9
			} else {
				norm[i] = vals[rng.IntN(len(vals))]
			}
		}
		got, want := make([]int, n), make([]int, n)
		for i := range got {
			got[i], want[i] = i, i
		}
		sortByNorm(got, norm, false)
		slices.SortStableFunc(want, func(i, j int) int {
			if norm[i] < norm[j] {
				return -1
			}
			return 0
		})
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: norms %v: order %v, want %v", trial, norm, got, want)
		}
	}
}
