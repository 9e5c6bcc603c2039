package pulsar

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bulkhead-dc/bulkhead/alloc"
)

// TestFillerMatchesAlloc checks the reduced solver against alloc.DRF and
// alloc.MaxMin on random problems with single-user resources, resources
// that fit their demand, capacity 0 and +Inf.
func TestFillerMatchesAlloc(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var z filler
	for trial := 0; trial < 300; trial++ {
		nR, nF := 1+rng.IntN(12), 1+rng.IntN(15)
		res := make([]alloc.Resource, nR)
		for r := range res {
			res[r] = alloc.Resource{ID: fmt.Sprint("r", r), Capacity: 10 + 90*rng.Float64()}
			switch rng.IntN(12) {
			case 0:
				res[r].Capacity = 0
			case 1:
				res[r].Capacity = math.Inf(1)
			case 2:
				res[r].Capacity = 1e6
			}
		}
		flows := make([]fillFlow, nF)
		vp := &alloc.VectorProblem{Resources: res}
		for i := range flows {
			f := fillFlow{ID: fmt.Sprint("f", i), Weight: 0.5 + 3*rng.Float64()}
			for _, r := range rng.Perm(nR)[:1+rng.IntN(min(3, nR))] {
				f.Uses = append(f.Uses, alloc.Use{Resource: r, Coef: 1 + 60*rng.Float64()})
			}
			flows[i] = f
			vp.Flows = append(vp.Flows, alloc.VectorFlow{ID: f.ID, Weight: f.Weight, Sparse: f.Uses})
		}
		want, err := alloc.DRF(vp)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float64, nF)
		if err := z.solve(res, flows, true, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-6 {
				t.Fatalf("trial %d DRF: x = %v, alloc.DRF = %v", trial, got, want)
			}
		}

		// Max-min on each flow's largest demand.
		p := &alloc.Problem{Resources: res}
		for _, f := range flows {
			dmax := 0.0
			for _, u := range f.Uses {
				dmax = max(dmax, u.Coef)
			}
			af := alloc.Flow{ID: f.ID, Weight: f.Weight, Demand: dmax}
			for _, u := range f.Uses {
				af.Uses = append(af.Uses, alloc.Use{Resource: u.Resource, Coef: u.Coef / dmax})
			}
			p.Flows = append(p.Flows, af)
		}
		rates, err := alloc.MaxMin(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := z.solve(res, flows, false, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if w := rates[i] / p.Flows[i].Demand; math.Abs(got[i]-w) > 1e-6 {
				t.Fatalf("trial %d max-min: x = %v, alloc.MaxMin gives %v at %d", trial, got, w, i)
			}
		}
	}
}
