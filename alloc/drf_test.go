package alloc

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func vres(caps ...float64) []Resource {
	var rs []Resource
	for i, c := range caps {
		rs = append(rs, Resource{ID: "r" + itoa(i), Capacity: c})
	}
	return rs
}

func vflow(id, group string, w float64, d ...float64) VectorFlow {
	return VectorFlow{ID: id, Group: group, Weight: w, Demand: d}
}

func assertX(t *testing.T, got []float64, want ...float64) {
	t.Helper()
	for i := range want {
		if !near(got[i], want[i], 1) {
			t.Errorf("x[%d] = %.12g, want %.12g (all %v)", i, got[i], want[i], got)
		}
	}
}

// TestDRFPaperExample is the DRF paper's example: 9 CPUs and 18 GB; user A's
// tasks need ⟨1 CPU, 4 GB⟩, B's ⟨3 CPU, 1 GB⟩. DRF gives A 3 tasks and B 2.
// With divisible demands, a flow demands enough for 9 tasks (the most that
// could ever run) and x·9 is its number of tasks.
func TestDRFPaperExample(t *testing.T) {
	p := &VectorProblem{
		Resources: vres(9, 18),
		Flows: []VectorFlow{
			vflow("A", "", 1, 9*1, 9*4),
			vflow("B", "", 1, 9*3, 9*1),
		},
	}
	x, err := DRF(p)
	if err != nil {
		t.Fatal(err)
	}
	assertX(t, x, 3.0/9, 2.0/9)
	if err := checkVector(p, x, true, true); err != nil {
		t.Error(err)
	}
	// Dominant shares are equal: A 12/18, B 6/9.
	if a, b := x[0]*36/18, x[1]*27/9; !near(a, b, 1) {
		t.Errorf("dominant shares %g, %g", a, b)
	}
}

func TestDRFTable(t *testing.T) {
	tests := []struct {
		name string
		p    VectorProblem
		want []float64
	}{
		{"one resource equal", VectorProblem{Resources: vres(10),
			Flows: []VectorFlow{vflow("a", "", 1, 10), vflow("b", "", 1, 10)}}, []float64{0.5, 0.5}},
		{"one resource weighted", VectorProblem{Resources: vres(10),
			Flows: []VectorFlow{vflow("a", "", 1, 10), vflow("b", "", 3, 10)}}, []float64{0.25, 0.75}},
		{"demand met", VectorProblem{Resources: vres(10, 10),
			Flows: []VectorFlow{vflow("a", "", 1, 2, 1), vflow("b", "", 1, 20, 0)}}, []float64{1, 0.4}},
		{"disjoint resources", VectorProblem{Resources: vres(10, 10),
			Flows: []VectorFlow{vflow("a", "", 1, 20, 0), vflow("b", "", 1, 0, 40)}}, []float64{0.5, 0.25}},
		{"nothing demanded", VectorProblem{Resources: vres(10),
			Flows: []VectorFlow{vflow("a", "", 1, 0), vflow("b", "", 1, 30)}}, []float64{1, 1.0 / 3}},
		{"zero capacity", VectorProblem{Resources: vres(0, 10),
			Flows: []VectorFlow{vflow("a", "", 1, 1, 5), vflow("b", "", 1, 0, 20)}}, []float64{0, 0.5}},
		{"infinite capacity", VectorProblem{Resources: vres(math.Inf(1), 10),
			Flows: []VectorFlow{vflow("a", "", 1, 100, 0), vflow("b", "", 1, 100, 20)}}, []float64{1, 0.5}},
		{"sparse and dense agree", VectorProblem{Resources: vres(9, 18),
			Flows: []VectorFlow{{ID: "A", Weight: 1, Sparse: []Use{{Resource: 1, Coef: 36}, {Resource: 0, Coef: 9}}},
				{ID: "B", Weight: 1, Sparse: []Use{{Resource: 0, Coef: 20}, {Resource: 1, Coef: 9}, {Resource: 0, Coef: 7}}}}}, []float64{3.0 / 9, 2.0 / 9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := DRF(&tc.p)
			if err != nil {
				t.Fatal(err)
			}
			assertX(t, x, tc.want...)
			if err := checkVector(&tc.p, x, true, true); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestDRFProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for k := 0; k < nInstances(20000); k++ {
		p := randVector(rng, 5, 9, 0, k%2 == 0)
		x, err := DRF(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkVector(p, x, true, true); err != nil {
			t.Fatalf("instance %d: %v\n%+v\n%v", k, err, p, x)
		}
	}
}

func TestFirstFit(t *testing.T) {
	p := &VectorProblem{
		Resources: vres(10, 10),
		Flows: []VectorFlow{
			vflow("a", "", 1, 4, 2),  // fits: x = 1, leaves 6, 8
			vflow("b", "", 1, 12, 4), // 6/12: x = 0.5, leaves 0, 6
			vflow("c", "", 1, 0, 3),  // fits: x = 1, leaves 0, 3
			vflow("d", "", 1, 1, 1),  // r0 full: x = 0
		},
	}
	x, err := FirstFit(p)
	if err != nil {
		t.Fatal(err)
	}
	assertX(t, x, 1, 0.5, 1, 0)
	rng := rand.New(rand.NewPCG(9, 10))
	for k := 0; k < nInstances(2000); k++ {
		p := randVector(rng, 5, 9, 0, k%2 == 0)
		x, err := FirstFit(p)
		if err != nil {
			t.Fatal(err)
		}
		// First fit never wastes: a flow with x < 1 hit a full resource.
		if err := checkVector(p, x, false, true); err != nil {
			t.Fatalf("instance %d: %v", k, err)
		}
	}
}

func TestHDRFTable(t *testing.T) {
	tests := []struct {
		name string
		p    VectorProblem
		want []float64
	}{
		{"two groups, one resource", VectorProblem{Resources: vres(12),
			// group g1 weighs 2 (its flows' sum), g2 1: g1 gets 8, g2 4.
			Flows: []VectorFlow{vflow("a", "g1", 1, 12), vflow("b", "g1", 1, 12), vflow("c", "g2", 1, 12)}},
			[]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"group weights given", VectorProblem{Resources: vres(12),
			Flows:        []VectorFlow{vflow("a", "g1", 1, 12), vflow("b", "g1", 1, 12), vflow("c", "g2", 1, 12)},
			GroupWeights: map[string]float64{"g1": 1, "g2": 2}},
			[]float64{1.0 / 6, 1.0 / 6, 2.0 / 3}},
		{"blocked sibling: rest of group continues", VectorProblem{Resources: vres(10, 10),
			// a (g1, weight 2) and c (g2, weight 1) share r0 2:1 and it
			// saturates; b (g1) alone on r1 continues to its demand.
			Flows: []VectorFlow{vflow("a", "g1", 1, 10, 0), vflow("b", "g1", 1, 0, 10), vflow("c", "g2", 1, 10, 0)}},
			[]float64{2.0 / 3, 1, 1.0 / 3}},
		{"group consumption counts", VectorProblem{Resources: vres(10, 10),
			// g1 = {a ⟨5,0⟩, b ⟨5,10⟩}, g2 = {c ⟨0,10⟩}, weights 1. g1's
			// share is its r0 usage, 1.5× b's share: r1 splits b 0.4, c 0.6
			// (not 0.5/0.5 as flat DRF would); a then reaches its demand.
			Flows:        []VectorFlow{vflow("a", "g1", 1, 5, 0), vflow("b", "g1", 1, 5, 10), vflow("c", "g2", 1, 0, 10)},
			GroupWeights: map[string]float64{"g1": 1}},
			[]float64{1, 0.4, 0.6}},
		{"paper starvation example", VectorProblem{Resources: vres(1, 1),
			// H-DRF paper, Fig. 3-like: n1 ⟨1,0⟩, n2 ⟨1,0⟩, n3 = {⟨1,0⟩, ⟨0,1⟩},
			// n4 ⟨0,1⟩ (demands large). CPU is shared 1/3 each; GPU 1/2
			// between n3,2 and n4.
			Flows: []VectorFlow{vflow("n1", "n1", 1, 3, 0), vflow("n2", "n2", 1, 3, 0),
				vflow("n31", "n3", 1, 3, 0), vflow("n32", "n3", 1, 0, 3), vflow("n4", "n4", 1, 0, 3)},
			GroupWeights: map[string]float64{"n3": 1}},
			[]float64{1.0 / 9, 1.0 / 9, 1.0 / 9, 1.0 / 6, 1.0 / 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := HDRF(&tc.p)
			if err != nil {
				t.Fatal(err)
			}
			assertX(t, x, tc.want...)
			if err := checkVector(&tc.p, x, false, true); err != nil {
				t.Error(err)
			}
			ref := refHDRF(&tc.p, 1e-5)
			for i := range ref {
				if math.Abs(ref[i]-x[i]) > 1e-3 {
					t.Errorf("flow %d: %g, discrete reference %g", i, x[i], ref[i])
				}
			}
		})
	}
}

// TestHDRFEqualsDRF: one flow per group, or a single group, is DRF.
func TestHDRFEqualsDRF(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for k := 0; k < nInstances(10000); k++ {
		p := randVector(rng, 5, 9, 0, k%2 == 0)
		if k%3 == 0 {
			for i := range p.Flows {
				p.Flows[i].Group = "one"
			}
		} else if k%3 == 1 {
			for i := range p.Flows {
				p.Flows[i].Group = "g" + itoa(i)
			}
		}
		want, err := DRF(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := HDRF(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !near(got[i], want[i], 1) {
				t.Fatalf("instance %d flow %d: H-DRF %.12g, DRF %.12g\n%+v", k, i, got[i], want[i], p)
			}
		}
	}
}

// TestHDRFDifferential compares H-DRF with a discrete small-step scheduler
// on random small instances, and checks feasibility and non-wastefulness.
func TestHDRFDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	worst := 0.0
	for k := 0; k < nInstances(2000); k++ {
		p := randVector(rng, 4, 8, 3, k%2 == 0)
		if k%3 == 0 {
			p.GroupWeights = map[string]float64{}
			for _, f := range p.Flows {
				p.GroupWeights[f.Group] = float64(1 + rng.IntN(3))
			}
		}
		got, err := HDRF(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkVector(p, got, false, true); err != nil {
			t.Fatalf("instance %d: %v\n%+v\n%v", k, err, p, got)
		}
		ref := refHDRF(p, 2e-4)
		for i := range got {
			d := math.Abs(got[i] - ref[i])
			worst = max(worst, d)
			if d > 1e-2 {
				t.Fatalf("instance %d flow %d: H-DRF %.6g, discrete %.6g\n%+v\n%v\n%v", k, i, got[i], ref[i], p, got, ref)
			}
		}
	}
	t.Logf("worst |x − discrete| = %.3g", worst)
}

func TestVectorValidation(t *testing.T) {
	ok := func() VectorProblem {
		return VectorProblem{
			Resources: vres(10, 10),
			Flows:     []VectorFlow{vflow("a", "g", 1, 1, 2), {ID: "b", Weight: 1, Sparse: []Use{{Resource: 1, Coef: 3}}}},
		}
	}
	tests := []struct {
		name  string
		mod   func(p *VectorProblem)
		field string
		msg   string
	}{
		{"negative capacity", func(p *VectorProblem) { p.Resources[0].Capacity = -3 }, "capacity", "got -3"},
		{"classes", func(p *VectorProblem) { p.Resources[0].Classes = map[string]float64{"A": 1} }, "classes", "not supported"},
		{"duplicate resource", func(p *VectorProblem) { p.Resources[1].ID = "r0" }, "id", "duplicate resource id"},
		{"zero weight", func(p *VectorProblem) { p.Flows[0].Weight = 0 }, "weight", "must be > 0"},
		{"short demand", func(p *VectorProblem) { p.Flows[0].Demand = []float64{1} }, "demand", "has 1 entries, want one per resource (2)"},
		{"negative demand", func(p *VectorProblem) { p.Flows[0].Demand[1] = -1 }, "demand", `demand for resource "r1" must be finite and ≥ 0`},
		{"infinite demand", func(p *VectorProblem) { p.Flows[0].Demand[1] = math.Inf(1) }, "demand", "+Inf"},
		{"both forms", func(p *VectorProblem) { p.Flows[0].Sparse = []Use{{Resource: 0, Coef: 1}} }, "demand", "both"},
		{"sparse unknown resource", func(p *VectorProblem) { p.Flows[1].Sparse[0].Resource = 2 }, "resource", "unknown resource index 2"},
		{"sparse zero", func(p *VectorProblem) { p.Flows[1].Sparse[0].Coef = 0 }, "coef", "must be > 0"},
		{"empty id", func(p *VectorProblem) { p.Flows[1].ID = "" }, "id", "empty id"},
		{"duplicate flow", func(p *VectorProblem) { p.Flows[1].ID = "a" }, "id", `duplicate flow id "a"`},
		{"group weight unknown group", func(p *VectorProblem) { p.GroupWeights = map[string]float64{"zz": 1} }, "group_weights", `group "zz", which has no flows`},
		{"group weight zero", func(p *VectorProblem) { p.GroupWeights = map[string]float64{"g": 0} }, "group_weights", "must be > 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ok()
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			tc.mod(&p)
			for name, fn := range map[string]func(*VectorProblem) ([]float64, error){"DRF": DRF, "HDRF": HDRF, "FirstFit": FirstFit} {
				_, err := fn(&p)
				var e *Error
				if !errors.As(err, &e) || e.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("%s: got %v (field %q), want field %q containing %q", name, err, fieldOf(err), tc.field, tc.msg)
				}
			}
		})
	}
}

func fieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
