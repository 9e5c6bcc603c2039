package alloc

import (
	"fmt"
	"math"
	"testing"
)

// checkMaxMinFast is checkMaxMin for large flat problems (linear time).
func checkMaxMinFast(p *Problem, x []float64) error {
	nR := len(p.Resources)
	load := make([]float64, nR)
	maxShare := make([]float64, nR)
	share := func(i int) float64 { return (x[i] - p.Flows[i].Floor) / p.Flows[i].Weight }
	for i, f := range p.Flows {
		if x[i] < f.Floor-checkTol*(1+f.Floor) || x[i] > f.Demand*(1+checkTol)+checkTol {
			return fmt.Errorf("flow %s: rate %g outside [floor %g, demand %g]", f.ID, x[i], f.Floor, f.Demand)
		}
		for _, u := range f.Uses {
			load[u.Resource] += u.Coef * x[i]
			maxShare[u.Resource] = max(maxShare[u.Resource], share(i))
		}
	}
	for r, res := range p.Resources {
		if load[r] > res.Capacity*(1+checkTol) {
			return fmt.Errorf("resource %s: load %g > capacity %g", res.ID, load[r], res.Capacity)
		}
	}
	for i, f := range p.Flows {
		if x[i] >= f.Demand*(1-checkTol) {
			continue
		}
		ok := false
		for _, u := range f.Uses {
			r := u.Resource
			c := p.Resources[r].Capacity
			if !math.IsInf(c, 1) && load[r] >= c*(1-checkTol) && share(i) >= maxShare[r]*(1-checkTol) {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("flow %s (rate %g < demand %g) has no bottleneck", f.ID, x[i], f.Demand)
		}
	}
	return nil
}

// checkDRFFast is the DRF bottleneck check for large sparse problems.
func checkDRFFast(p *VectorProblem, x []float64) error {
	nR := len(p.Resources)
	load := make([]float64, nR)
	maxShare := make([]float64, nR)
	dom := make([]float64, len(p.Flows))
	for i, f := range p.Flows {
		for _, u := range f.Sparse {
			dom[i] = max(dom[i], u.Coef/p.Resources[u.Resource].Capacity)
		}
		for _, u := range f.Sparse {
			load[u.Resource] += x[i] * u.Coef
			maxShare[u.Resource] = max(maxShare[u.Resource], x[i]*dom[i]/f.Weight)
		}
	}
	for r, res := range p.Resources {
		if load[r] > res.Capacity*(1+checkTol) {
			return fmt.Errorf("resource %s: load %g > capacity %g", res.ID, load[r], res.Capacity)
		}
	}
	for i, f := range p.Flows {
		if x[i] >= 1-checkTol {
			continue
		}
		ok := false
		for _, u := range f.Sparse {
			r := u.Resource
			if load[r] >= p.Resources[r].Capacity*(1-checkTol) && x[i]*dom[i]/f.Weight >= maxShare[r]*(1-checkTol) {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("flow %s: x = %g without a DRF bottleneck", f.ID, x[i])
		}
	}
	return nil
}

func TestPulsarScale(t *testing.T) {
	p, vp := PulsarScale(1)
	if len(p.Flows) != 24000 || len(p.Resources) != 4200 || len(vp.Flows) != 24000 || len(vp.Resources) != 4200 {
		t.Fatalf("sizes: %d flows, %d resources; vector %d, %d", len(p.Flows), len(p.Resources), len(vp.Flows), len(vp.Resources))
	}
	toApp := 0
	for _, f := range p.Flows {
		if f.Uses[1].Resource >= 4000 {
			toApp++
		}
		if f.Uses[0].Resource%2 != 0 || f.Uses[0].Resource/2 == f.Uses[1].Resource/2 && f.Uses[1].Resource < 4000 {
			t.Fatalf("flow %s: bad path %v", f.ID, f.Uses)
		}
	}
	if toApp != 10560 {
		t.Errorf("%d flows to appliances, want 10560 (44%%)", toApp)
	}
	if err := Validate(p); err != nil {
		t.Fatal(err)
	}
	if err := vp.Validate(); err != nil {
		t.Fatal(err)
	}
	// Deterministic in the seed.
	p2, _ := PulsarScale(1)
	p3, _ := PulsarScale(2)
	same, differ := true, false
	for i := range p.Flows {
		a, b, c := p.Flows[i], p2.Flows[i], p3.Flows[i]
		if a.Demand != b.Demand || a.Weight != b.Weight || a.Uses[1] != b.Uses[1] {
			same = false
		}
		if a.Demand != c.Demand || a.Uses[1] != c.Uses[1] {
			differ = true
		}
	}
	if !same || !differ {
		t.Errorf("same seed same problem: %v; other seed differs: %v", same, differ)
	}

	x, err := MaxMin(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkMaxMinFast(p, x); err != nil {
		t.Error(err)
	}
	sat := 0
	load := Loads(p, x, nil)
	for r := range load {
		if load[r] >= p.Resources[r].Capacity*(1-1e-9) {
			sat++
		}
	}
	t.Logf("max-min: %d of %d resources saturated", sat, len(load))

	xd, err := DRF(vp)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDRFFast(vp, xd); err != nil {
		t.Error(err)
	}
	if !testing.Short() {
		xh, err := HDRF(vp)
		if err != nil {
			t.Fatal(err)
		}
		// Feasible and x ∈ [0, 1].
		vload := make([]float64, len(vp.Resources))
		for i, f := range vp.Flows {
			if xh[i] < 0 || xh[i] > 1 {
				t.Fatalf("H-DRF x[%d] = %g", i, xh[i])
			}
			for _, u := range f.Sparse {
				vload[u.Resource] += xh[i] * u.Coef
			}
		}
		for r := range vload {
			if vload[r] > vp.Resources[r].Capacity*(1+1e-9) {
				t.Fatalf("H-DRF overloads %s", vp.Resources[r].ID)
			}
		}
	}
}

func BenchmarkMaxMinPulsarScale(b *testing.B) {
	p, _ := PulsarScale(1)
	b.Run("MaxMin", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := MaxMin(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Solver", func(b *testing.B) {
		var s Solver
		rates := make([]float64, len(p.Flows))
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Solve(p, rates); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDRFPulsarScale(b *testing.B) {
	_, vp := PulsarScale(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DRF(vp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHDRFPulsarScale(b *testing.B) {
	_, vp := PulsarScale(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := HDRF(vp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFirstFitPulsarScale(b *testing.B) {
	_, vp := PulsarScale(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FirstFit(vp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSolverSmall(b *testing.B) {
	for _, classes := range []bool{false, true} {
		name := "flat"
		if classes {
			name = "wfq4classes"
		}
		b.Run(name, func(b *testing.B) {
			p := smallProblem(7, classes)
			var s Solver
			rates := make([]float64, len(p.Flows))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Solve(p, rates); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(s.Iterations()), "passes")
		})
	}
}
