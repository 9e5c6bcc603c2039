package alloc

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func link(id string, c float64) Resource { return Resource{ID: id, Capacity: c} }

func flow(id string, dem, w float64, rs ...int) Flow {
	f := Flow{ID: id, Demand: dem, Weight: w}
	for _, r := range rs {
		f.Uses = append(f.Uses, Use{Resource: r, Coef: 1})
	}
	return f
}

var inf = math.Inf(1)

func TestMaxMinTable(t *testing.T) {
	withFloor := func(f Flow, fl float64) Flow { f.Floor = fl; return f }
	withClass := func(f Flow, c string) Flow { f.Class = c; return f }
	withCoef := func(f Flow, c ...float64) Flow {
		for k := range c {
			f.Uses[k].Coef = c[k]
		}
		return f
	}
	classes := func(r Resource, kv ...any) Resource {
		r.Classes = map[string]float64{}
		for k := 0; k < len(kv); k += 2 {
			r.Classes[kv[k].(string)] = float64(kv[k+1].(int))
		}
		return r
	}
	tests := []struct {
		name string
		p    Problem
		want []float64
	}{
		{"single link equal", Problem{
			Resources: []Resource{link("l", 90)},
			Flows:     []Flow{flow("a", inf, 1, 0), flow("b", inf, 1, 0), flow("c", inf, 1, 0)},
		}, []float64{30, 30, 30}},
		{"single link weighted", Problem{
			Resources: []Resource{link("l", 100)},
			Flows:     []Flow{flow("a", inf, 1, 0), flow("b", inf, 3, 0)},
		}, []float64{25, 75}},
		{"demand-limited", Problem{
			Resources: []Resource{link("l", 100)},
			Flows:     []Flow{flow("a", 10, 1, 0), flow("b", inf, 1, 0), flow("c", 40, 1, 0)},
		}, []float64{10, 50, 40}},
		{"demand-limited weighted", Problem{
			Resources: []Resource{link("l", 100)},
			Flows:     []Flow{flow("a", 20, 3, 0), flow("b", inf, 1, 0), flow("c", inf, 1, 0)},
		}, []float64{20, 40, 40}},
		{"all satisfied", Problem{
			Resources: []Resource{link("l", 100)},
			Flows:     []Flow{flow("a", 10, 1, 0), flow("b", 20, 1, 0)},
		}, []float64{10, 20}},
		{"floors additive", Problem{
			Resources: []Resource{link("l", 100)},
			Flows:     []Flow{withFloor(flow("a", inf, 1, 0), 40), flow("b", inf, 1, 0)},
		}, []float64{70, 30}},
		{"floor equals demand", Problem{
			Resources: []Resource{link("l", 100)},
			Flows:     []Flow{withFloor(flow("a", 30, 1, 0), 30), flow("b", inf, 1, 0)},
		}, []float64{30, 70}},
		{"floors fill the link", Problem{
			Resources: []Resource{link("l", 100)},
			Flows:     []Flow{withFloor(flow("a", inf, 1, 0), 60), withFloor(flow("b", inf, 1, 0), 40)},
		}, []float64{60, 40}},
		{"floors with residual demand", Problem{
			Resources: []Resource{link("l", 100)},
			Flows:     []Flow{withFloor(flow("a", 45, 1, 0), 40), withFloor(flow("b", inf, 1, 0), 10)},
		}, []float64{45, 55}},
		{"parking lot", Problem{
			// long flow over 3 links, one short flow per link
			Resources: []Resource{link("l1", 100), link("l2", 100), link("l3", 100)},
			Flows: []Flow{flow("long", inf, 1, 0, 1, 2), flow("s1", inf, 1, 0),
				flow("s2", inf, 1, 1), flow("s3", inf, 1, 2)},
		}, []float64{50, 50, 50, 50}},
		{"parking lot uneven", Problem{
			Resources: []Resource{link("l1", 100), link("l2", 60)},
			Flows:     []Flow{flow("long", inf, 1, 0, 1), flow("s1", inf, 1, 0), flow("s2", inf, 1, 1)},
		}, []float64{30, 70, 30}},
		{"two bottlenecks", Problem{
			Resources: []Resource{link("l1", 10), link("l2", 100)},
			Flows: []Flow{flow("a", inf, 1, 0, 1), flow("b", inf, 1, 0),
				flow("c", inf, 1, 1), flow("d", inf, 1, 1)},
		}, []float64{5, 5, 47.5, 47.5}},
		{"coefficients", Problem{
			// appliance of 90 tokens/s: a costs 2 tokens per unit, b 1
			Resources: []Resource{link("app", 90)},
			Flows:     []Flow{withCoef(flow("a", inf, 1, 0), 2), flow("b", inf, 1, 0)},
		}, []float64{30, 30}},
		{"coefficients over path", Problem{
			Resources: []Resource{link("net", 100), link("app", 120)},
			Flows:     []Flow{withCoef(flow("a", inf, 1, 0, 1), 1, 3), flow("b", inf, 1, 0)},
		}, []float64{40, 60}},
		{"duplicate use sums", Problem{
			Resources: []Resource{link("l", 90)},
			Flows:     []Flow{flow("a", inf, 1, 0, 0), flow("b", inf, 1, 0)},
		}, []float64{30, 30}},
		{"infinite capacity", Problem{
			Resources: []Resource{link("big", inf), link("l", 10)},
			Flows:     []Flow{flow("a", 5, 1, 0), flow("b", inf, 1, 0, 1)},
		}, []float64{5, 10}},
		{"zero capacity", Problem{
			Resources: []Resource{link("z", 0), link("l", 10)},
			Flows:     []Flow{flow("a", inf, 1, 0, 1), flow("b", inf, 1, 1)},
		}, []float64{0, 10}},
		{"no uses, finite demand", Problem{
			Resources: []Resource{link("l", 10)},
			Flows:     []Flow{flow("a", 7, 1)},
		}, []float64{7}},
		{"classes split by weight", Problem{
			Resources: []Resource{classes(link("l", 1000), "A", 3, "B", 1)},
			Flows: []Flow{withClass(flow("a", inf, 1, 0), "A"),
				withClass(flow("b1", inf, 1, 0), "B"), withClass(flow("b2", inf, 1, 0), "B")},
		}, []float64{750, 125, 125}},
		{"classes: absent class leaves its share", Problem{
			Resources: []Resource{classes(link("l", 1000), "A", 3, "B", 1)},
			Flows:     []Flow{withClass(flow("b1", inf, 1, 0), "B"), withClass(flow("b2", inf, 1, 0), "B")},
		}, []float64{500, 500}},
		{"classes: demand-limited class redistributes", Problem{
			Resources: []Resource{classes(link("l", 1000), "A", 3, "B", 1)},
			Flows: []Flow{withClass(flow("a", 100, 1, 0), "A"),
				withClass(flow("b1", inf, 1, 0), "B"), withClass(flow("b2", inf, 1, 0), "B")},
		}, []float64{100, 450, 450}},
		{"classes: class bottlenecked elsewhere redistributes", Problem{
			Resources: []Resource{classes(link("port", 1000), "A", 1, "B", 1), link("edge", 200)},
			Flows: []Flow{withClass(flow("a", inf, 1, 0, 1), "A"),
				withClass(flow("b", inf, 1, 0), "B"), withClass(flow("c", inf, 1, 1), "C")},
		}, []float64{100, 900, 100}},
		{"classes: within class weighted max-min", Problem{
			Resources: []Resource{classes(link("l", 1000), "A", 1, "B", 1)},
			Flows: []Flow{withClass(flow("a1", inf, 1, 0), "A"), withClass(flow("a2", inf, 4, 0), "A"),
				withClass(flow("b", 100, 1, 0), "B")},
		}, []float64{180, 720, 100}},
		{"classes with floors", Problem{
			// 1000 − floors 200 = 800 split 1:1 → A 400 (+200 floor), B 400
			Resources: []Resource{classes(link("l", 1000), "A", 1, "B", 1)},
			Flows:     []Flow{withFloor(withClass(flow("a", inf, 1, 0), "A"), 200), withClass(flow("b", inf, 1, 0), "B")},
		}, []float64{600, 400}},
		{"two hierarchical ports in series", Problem{
			Resources: []Resource{classes(link("p1", 100), "A", 1, "B", 1), classes(link("p2", 100), "A", 1, "B", 3)},
			Flows: []Flow{withClass(flow("a", inf, 1, 0, 1), "A"),
				withClass(flow("b1", inf, 1, 0), "B"), withClass(flow("b2", inf, 1, 1), "B")},
		}, []float64{25, 75, 75}},
	}
	var s Solver
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MaxMin(&tc.p)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				if !near(got[i], tc.want[i], 1) {
					t.Errorf("flow %s: got %.12g, want %g", tc.p.Flows[i].ID, got[i], tc.want[i])
				}
			}
			if err := checkMaxMin(&tc.p, got); err != nil {
				t.Error(err)
			}
			// The reusable solver agrees exactly.
			again := make([]float64, len(got))
			if err := s.Solve(&tc.p, again); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i] != again[i] {
					t.Errorf("Solver differs from MaxMin on flow %d: %g vs %g", i, again[i], got[i])
				}
			}
		})
	}
}

func TestMaxMinValidation(t *testing.T) {
	ok := func() Problem {
		return Problem{
			Resources: []Resource{link("l1", 100), {ID: "w", Capacity: 50, Classes: map[string]float64{"A": 1}}},
			Flows:     []Flow{flow("f1", inf, 1, 0), flow("f2", 10, 1, 0)},
		}
	}
	tests := []struct {
		name  string
		mod   func(p *Problem)
		field string
		msg   string
	}{
		{"negative capacity", func(p *Problem) { p.Resources[0].Capacity = -1 }, "capacity", "must be ≥ 0"},
		{"NaN capacity", func(p *Problem) { p.Resources[0].Capacity = math.NaN() }, "capacity", "NaN"},
		{"empty resource id", func(p *Problem) { p.Resources[0].ID = "" }, "id", "empty id"},
		{"duplicate resource id", func(p *Problem) { p.Resources[1].ID = "l1" }, "id", `duplicate resource id "l1"`},
		{"class weight zero", func(p *Problem) { p.Resources[1].Classes["A"] = 0 }, "classes", "weight must be > 0"},
		{"empty class name", func(p *Problem) { p.Resources[1].Classes[""] = 1 }, "classes", "empty class name"},
		{"unknown resource", func(p *Problem) { p.Flows[0].Uses[0].Resource = 7 }, "resource", "unknown resource index 7"},
		{"negative resource", func(p *Problem) { p.Flows[0].Uses[0].Resource = -1 }, "resource", "unknown resource index -1"},
		{"zero weight", func(p *Problem) { p.Flows[0].Weight = 0 }, "weight", "must be > 0"},
		{"negative weight", func(p *Problem) { p.Flows[0].Weight = -2 }, "weight", "got -2"},
		{"NaN weight", func(p *Problem) { p.Flows[0].Weight = math.NaN() }, "weight", "NaN"},
		{"negative demand", func(p *Problem) { p.Flows[1].Demand = -1 }, "demand", "must be ≥ 0"},
		{"NaN demand", func(p *Problem) { p.Flows[1].Demand = math.NaN() }, "demand", "NaN"},
		{"negative floor", func(p *Problem) { p.Flows[1].Floor = -1 }, "floor", "must be finite and ≥ 0"},
		{"floor above demand", func(p *Problem) { p.Flows[1].Floor = 11 }, "floor", "floor 11 exceeds demand 10"},
		{"zero coef", func(p *Problem) { p.Flows[0].Uses[0].Coef = 0 }, "coef", "must be > 0"},
		{"negative coef", func(p *Problem) { p.Flows[0].Uses[0].Coef = -1 }, "coef", "must be > 0"},
		{"empty flow id", func(p *Problem) { p.Flows[1].ID = "" }, "id", "empty id"},
		{"duplicate flow id", func(p *Problem) { p.Flows[1].ID = "f1" }, "id", `duplicate flow id "f1" (also flow 0)`},
		{"missing class", func(p *Problem) { p.Flows[0].Uses = append(p.Flows[0].Uses, Use{Resource: 1, Coef: 1}) }, "class", `no class but resource "w" is hierarchical`},
		{"unknown class", func(p *Problem) {
			p.Flows[0].Class = "Z"
			p.Flows[0].Uses = append(p.Flows[0].Uses, Use{Resource: 1, Coef: 1})
		}, "class", `class "Z" is not a class of resource "w"`},
		{"floors do not fit", func(p *Problem) {
			p.Flows[0].Floor = 95
			p.Flows[1].Floor = 10
		}, "", `resource 0 ("l1"): floors sum to 105, more than capacity 100`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ok()
			if err := Validate(&p); err != nil {
				t.Fatalf("base problem invalid: %v", err)
			}
			tc.mod(&p)
			_, err := MaxMin(&p)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *Error", err)
			}
			if e.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got field %q, error %q; want field %q containing %q", e.Field, err, tc.field, tc.msg)
			}
			if err2 := p.Validate(); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("Validate: %v, MaxMin: %v", err2, err)
			}
		})
	}
	t.Run("unbounded flow", func(t *testing.T) {
		p := Problem{Resources: []Resource{link("big", inf)}, Flows: []Flow{flow("a", inf, 1, 0)}}
		_, err := MaxMin(&p)
		if fieldOf(err) != "demand" || !strings.Contains(err.Error(), `flow 0 ("a") demand: unbounded`) {
			t.Errorf("got %v", err)
		}
	})
	t.Run("rates length", func(t *testing.T) {
		p := ok()
		var s Solver
		if err := s.Solve(&p, make([]float64, 1)); err == nil {
			t.Error("no error for short rates")
		}
	})
}

// TestMaxMinDifferential compares the solver with the brute-force
// reference on thousands of random flat instances.
func TestMaxMinDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s Solver
	n := nInstances(20000)
	for k := 0; k < n; k++ {
		p := randProblem(rng, 6, 9, false)
		want, err := refMaxMin(p)
		if err != nil {
			t.Fatalf("instance %d: reference: %v", k, err)
		}
		got := make([]float64, len(p.Flows))
		if err := s.Solve(p, got); err != nil {
			t.Fatalf("instance %d: %v", k, err)
		}
		for i := range got {
			if !near(got[i], want[i], 1) {
				t.Fatalf("instance %d flow %d: got %.12g, reference %.12g\n%+v", k, i, got[i], want[i], p)
			}
		}
		if err := checkMaxMin(p, got); err != nil {
			t.Fatalf("instance %d: %v\n%+v\n%v", k, err, p, got)
		}
	}
}

// TestMaxMinProperties checks feasibility, demands, floors and the
// (hierarchical) bottleneck condition on random instances where about half
// the resources are hierarchical, from tiny to medium sizes. The class split
// is iterative: the condition is checked whenever the Solver reports
// convergence, feasibility always, and non-convergence must stay rare.
func TestMaxMinProperties(t *testing.T) {
	sizes := []struct {
		maxR, maxF, n int
	}{{5, 10, 20000}, {12, 30, 5000}, {30, 80, 1500}}
	var s Solver
	for _, sz := range sizes {
		rng := rand.New(rand.NewPCG(3, uint64(sz.maxR)))
		n := nInstances(sz.n)
		maxIter, nonConv := 0, 0
		for k := 0; k < n; k++ {
			p := randProblem(rng, sz.maxR, sz.maxF, true)
			got := make([]float64, len(p.Flows))
			if err := s.Solve(p, got); err != nil {
				t.Fatalf("instance %d: %v", k, err)
			}
			maxIter = max(maxIter, s.Iterations())
			check := checkMaxMin
			if !s.Converged() {
				nonConv++
				check = checkFeasible
			}
			if err := check(p, got); err != nil {
				t.Fatalf("size %v instance %d: %v\n%+v\n%v", sz, k, err, p, got)
			}
			if k%10 == 0 {
				fresh, _ := MaxMin(p)
				for i := range got {
					if fresh[i] != got[i] {
						t.Fatalf("instance %d: reused Solver differs from MaxMin", k)
					}
				}
			}
		}
		t.Logf("size %v: %d instances, max passes %d, not converged %d", sz, n, maxIter, nonConv)
		if nonConv > n/200 {
			t.Errorf("size %v: %d of %d instances did not converge", sz, nonConv, n)
		}
	}
}

// TestMaxMinLarger compares with the reference on fewer, larger flat
// instances.
func TestMaxMinLarger(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for k := 0; k < nInstances(1000); k++ {
		p := randProblem(rng, 30, 80, false)
		got, err := MaxMin(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkMaxMin(p, got); err != nil {
			t.Fatalf("instance %d: %v", k, err)
		}
		want, _ := refMaxMin(p)
		for i := range got {
			if !near(got[i], want[i], 1) {
				t.Fatalf("instance %d flow %d: got %g, reference %g", k, i, got[i], want[i])
			}
		}
	}
}

func TestSolverNoAllocs(t *testing.T) {
	for _, classes := range []bool{false, true} {
		p := smallProblem(7, classes)
		var s Solver
		rates := make([]float64, len(p.Flows))
		if err := s.Solve(p, rates); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(50, func() {
			if err := s.Solve(p, rates); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("classes=%v: %v allocations per Solve, want 0", classes, allocs)
		}
	}
}

// smallProblem is the simulator-sized instance: 300 flows over 5-resource
// paths (source NIC, source ToR uplink, one of two core links, destination
// ToR downlink, destination NIC) in a two-tier network of 40 hosts in 4
// racks; with classes, the ToR and core links are WFQ ports with 4 classes.
func smallProblem(seed uint64, classes bool) *Problem {
	rng := rand.New(rand.NewPCG(seed, 99))
	const hosts, racks = 40, 4
	p := &Problem{}
	add := func(id string, c float64, wfq bool) int {
		r := Resource{ID: id, Capacity: c}
		if wfq && classes {
			r.Classes = map[string]float64{"t0": 1, "t1": 2, "t2": 3, "t3": 4}
		}
		p.Resources = append(p.Resources, r)
		return len(p.Resources) - 1
	}
	up := make([]int, hosts)
	down := make([]int, hosts)
	for h := 0; h < hosts; h++ {
		up[h] = add("h"+itoa(h)+"/up", 1e9, false)
		down[h] = add("h"+itoa(h)+"/down", 1e9, false)
	}
	torUp := make([]int, racks)
	torDown := make([]int, racks)
	for r := 0; r < racks; r++ {
		torUp[r] = add("tor"+itoa(r)+"/up", 4e9, true)
		torDown[r] = add("tor"+itoa(r)+"/down", 4e9, true)
	}
	core := []int{add("core/a", 6e9, true), add("core/b", 6e9, true)}
	for i := 0; i < 300; i++ {
		src := rng.IntN(hosts)
		dst := (src + hosts/racks + rng.IntN(hosts-hosts/racks)) % hosts
		f := Flow{ID: "c" + itoa(i), Weight: float64(1 + rng.IntN(4)), Demand: Unbounded,
			Class: "t" + itoa(rng.IntN(4))}
		if rng.IntN(3) == 0 {
			f.Demand = 1e7 + rng.Float64()*3e8
		}
		for _, r := range []int{up[src], torUp[src*racks/hosts], core[i%2], torDown[dst*racks/hosts], down[dst]} {
			f.Uses = append(f.Uses, Use{Resource: r, Coef: 1})
		}
		p.Flows = append(p.Flows, f)
	}
	return p
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}

// Use.Class overrides Flow.Class at one resource: a connection crosses its
// sender's egress scheduler in the sender's class and its receiver's
// ingress scheduler in the receiver's.
func TestUseClassOverridesFlowClass(t *testing.T) {
	p := &Problem{
		Resources: []Resource{{ID: "port", Capacity: 100, Classes: map[string]float64{"A": 3, "B": 1}}},
		Flows: []Flow{
			{ID: "f1", Uses: []Use{{Resource: 0, Coef: 1, Class: "A"}}, Demand: Unbounded, Weight: 1, Class: "B"},
			{ID: "f2", Uses: []Use{{Resource: 0, Coef: 1}}, Demand: Unbounded, Weight: 1, Class: "B"},
		},
	}
	got, err := MaxMin(p)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got[0]-75) > 1e-6 || math.Abs(got[1]-25) > 1e-6 {
		t.Errorf("rates %v, want [75 25]", got)
	}
	p.Flows[0].Uses[0].Class = "C"
	if _, err := MaxMin(p); err == nil || !strings.Contains(err.Error(), `class "C" is not a class of resource "port"`) {
		t.Errorf("unknown per-use class: %v", err)
	}
}

// A trusted Solver skips validation and gives the same answers on valid
// input.
func TestTrustedSolverAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var checked, trusted Solver
	trusted.Trusted = true
	for n := 0; n < 500; n++ {
		p := randProblem(rng, 6, 12, n%2 == 0)
		a := make([]float64, len(p.Flows))
		b := make([]float64, len(p.Flows))
		errA := checked.Solve(p, a)
		if errA != nil {
			continue
		}
		if err := trusted.Solve(p, b); err != nil {
			t.Fatalf("instance %d: trusted solve failed: %v", n, err)
		}
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-9*math.Max(1, math.Abs(a[i])) {
				t.Fatalf("instance %d flow %d: %g checked, %g trusted", n, i, a[i], b[i])
			}
		}
	}
}
