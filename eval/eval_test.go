package eval_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/eval/evaltest"
)

var inf = math.Inf(1)

func near(a, b, tol float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestOracle(t *testing.T) {
	tests := []struct {
		name     string
		in       eval.Input
		demand   []float64 // Mbps
		wantG    []float64 // Mbps
		wantI    []float64 // Mbps
		wantBott []bool
	}{
		{
			name:     "two greedy tenants share 500/500",
			in:       evaltest.ManyToOne(1),
			demand:   []float64{inf, inf},
			wantG:    []float64{450, 450},
			wantI:    []float64{500, 500},
			wantBott: []bool{true, true},
		},
		{
			name:     "one idle: the other gets the link",
			in:       evaltest.ManyToOne(1),
			demand:   []float64{inf, 0},
			wantG:    []float64{450, 0},
			wantI:    []float64{1000, 0},
			wantBott: []bool{true, false},
		},
		{
			name:     "4 pairs vs 1 pair: hose guarantee, not 4x",
			in:       evaltest.ManyToOne(4),
			demand:   []float64{inf, inf, inf, inf, inf},
			wantG:    []float64{450, 112.5, 112.5, 112.5, 112.5},
			wantI:    []float64{500, 125, 125, 125, 125},
			wantBott: []bool{true, true, true, true, true},
		},
		{
			name:     "bounded demand below guarantee",
			in:       evaltest.ManyToOne(1),
			demand:   []float64{200, inf},
			wantG:    []float64{200, 450},
			wantI:    []float64{200, 800},
			wantBott: []bool{true, true},
		},
		{
			name:     "small demands: no bottleneck",
			in:       evaltest.ManyToOne(2),
			demand:   []float64{100, 100, 0},
			wantG:    []float64{100, 100, 0},
			wantI:    []float64{100, 100, 0},
			wantBott: []bool{false, false, false},
		},
		{
			name: "over-committed guarantees are scaled to fit",
			in: func() eval.Input {
				in := evaltest.ManyToOne(1)
				for i := range in.Tenants {
					for j := range in.Tenants[i].VMs {
						in.Tenants[i].VMs[j] = evaltest.Sym(in.Tenants[i].VMs[j].Name, 600)
					}
				}
				return in
			}(),
			demand: []float64{inf, inf},
			wantG:  []float64{600, 600},
			wantI:  []float64{500, 500},
		},
		{
			name: "unguaranteed tenant gets only the leftovers",
			in: func() eval.Input {
				in := evaltest.ManyToOne(1)
				in.Tenants[1].VMs = []eval.VM{{Name: "Y0"}, {Name: "Y1"}}
				return in
			}(),
			demand: []float64{inf, inf},
			wantG:  []float64{450, 0},
			wantI:  []float64{1000, 0},
		},
		{
			name: "pair with no physical links gets its demand",
			in: func() eval.Input {
				in := evaltest.ManyToOne(2)
				in.Pairs[2].Links = nil
				return in
			}(),
			demand: []float64{inf, 50, inf},
			wantG:  []float64{450, 50, 400},
			wantI:  []float64{950, 50, inf},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := eval.NewOracle(tc.in.Tenants, tc.in.Pairs, tc.in.LinkCapacity)
			if err != nil {
				t.Fatal(err)
			}
			n := len(tc.in.Pairs)
			d := make([]float64, n)
			for i := range d {
				d[i] = tc.demand[i] * evaltest.Mbps
			}
			g, id, b := make([]float64, n), make([]float64, n), make([]bool, n)
			if err := o.Solve(d, g, id, b); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if !near(g[i]/evaltest.Mbps, tc.wantG[i], 1e-6) {
					t.Errorf("pair %d guarantee %v Mbps, want %v", i, g[i]/evaltest.Mbps, tc.wantG[i])
				}
				if !near(id[i]/evaltest.Mbps, tc.wantI[i], 1e-3) {
					t.Errorf("pair %d ideal %v Mbps, want %v", i, id[i]/evaltest.Mbps, tc.wantI[i])
				}
				if tc.wantBott != nil && b[i] != tc.wantBott[i] {
					t.Errorf("pair %d bottleneck %v, want %v", i, b[i], tc.wantBott[i])
				}
			}
		})
	}
}

func TestOracleNoAllocs(t *testing.T) {
	in := evaltest.ManyToOne(50)
	o, err := eval.NewOracle(in.Tenants, in.Pairs, in.LinkCapacity)
	if err != nil {
		t.Fatal(err)
	}
	n := len(in.Pairs)
	d, g, id, b := make([]float64, n), make([]float64, n), make([]float64, n), make([]bool, n)
	for i := range d {
		d[i] = float64(i%7) * 100 * evaltest.Mbps
		if i%3 == 0 {
			d[i] = inf
		}
	}
	allocs := testing.AllocsPerRun(50, func() {
		if err := o.Solve(d, g, id, b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Oracle.Solve allocates %v times per call", allocs)
	}
}

func TestCompliance(t *testing.T) {
	// X1→X0 guaranteed 450 Mbps; 95% is 427.5.
	tests := []struct {
		name string
		rd   [][][2]float64 // samples × pairs × (rate, demand)
		want float64
		vms  float64 // counted VM-seconds
	}{
		{"exactly 95% is served", [][][2]float64{{{427.5, inf}, {0, 0}}}, 1, 0.2},
		{"just below is not", [][][2]float64{{{427.4, inf}, {0, 0}}}, 0, 0.2},
		{"half the time", [][][2]float64{{{450, inf}, {0, 0}}, {{400, inf}, {0, 0}}}, 0.5, 0.4},
		{"bounded demand: guarantee = demand", [][][2]float64{{{95, 100}, {0, 0}}, {{94, 100}, {0, 0}}}, 0.5, 0.4},
		{"idle samples not counted", [][][2]float64{{{450, inf}, {0, 0}}, {{0, 0}, {0, 0}}}, 1, 0.2},
		{"nothing guaranteed: 1 by convention", [][][2]float64{{{0, 0}, {0, 0}}}, 1, 0},
		{
			// Y1→Y0 guaranteed 450, Y2 idle; X served, Y not.
			"per VM and tenant",
			[][][2]float64{{{500, inf}, {100, inf}}},
			0.5, 0.4,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := evaltest.ManyToOne(2)
			for _, s := range tc.rd {
				evaltest.AddSample(&in, append(s, [2]float64{0, 0})...)
			}
			r, err := eval.Evaluate(in)
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.Compliance, tc.want, 1e-12) {
				t.Errorf("compliance %v, want %v", r.Compliance, tc.want)
			}
			if !near(r.VMSeconds, tc.vms, 1e-12) {
				t.Errorf("VM-seconds %v, want %v", r.VMSeconds, tc.vms)
			}
		})
	}
}

func TestComplianceDirections(t *testing.T) {
	// One tenant: A sends to B and receives from C. A is served only if
	// both its out and in directions are.
	in := eval.Input{
		Interval: time.Second, LinkCapacity: []float64{1e9},
		Tenants: []eval.Tenant{{Name: "T", VMs: []eval.VM{evaltest.Sym("A", 100), evaltest.Sym("B", 100), evaltest.Sym("C", 100)}}},
		Pairs: []eval.Pair{
			{Tenant: "T", Src: "A", Dst: "B", Links: []int{0}},
			{Tenant: "T", Src: "C", Dst: "A", Links: []int{0}},
		},
	}
	evaltest.AddSample(&in, [2]float64{100, inf}, [2]float64{100, inf}) // A, B, C served
	evaltest.AddSample(&in, [2]float64{100, inf}, [2]float64{50, inf})  // A (in), C (out) not; B served
	r, err := eval.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := 4.0 / 6; !near(r.Compliance, want, 1e-12) {
		t.Errorf("compliance %v, want %v", r.Compliance, want)
	}
	if r.Units != "bit/s" || r.UnitScale != 1 {
		t.Errorf("default units %q scale %v", r.Units, r.UnitScale)
	}
}

func TestWorkConservation(t *testing.T) {
	tests := []struct {
		name      string
		rd        [][][2]float64
		want      float64
		scope     string
		tenantWC  []float64
		throughX  float64
		idealX    float64
		guarantee float64
	}{
		{
			name: "capped at 450 when ideal is 1000",
			rd:   [][][2]float64{{{450, inf}, {0, 0}}},
			want: 0.45, scope: eval.ScopeBottlenecks, tenantWC: []float64{0.45, 1},
			throughX: 450, idealX: 1000, guarantee: 450,
		},
		{
			name: "unfair but work-conserving",
			rd:   [][][2]float64{{{100, inf}, {900, inf}}},
			want: 1, scope: eval.ScopeBottlenecks, tenantWC: []float64{0.2, 1},
			throughX: 100, idealX: 500, guarantee: 450,
		},
		{
			name: "static reservation",
			rd:   [][][2]float64{{{450, inf}, {450, inf}}, {{450, inf}, {450, inf}}},
			want: 0.9, scope: eval.ScopeBottlenecks, tenantWC: []float64{0.9, 0.9},
			throughX: 450, idealX: 500, guarantee: 450,
		},
		{
			name: "no bottleneck: all pairs",
			rd:   [][][2]float64{{{50, 100}, {0, 0}}},
			want: 0.5, scope: eval.ScopeAll, tenantWC: []float64{0.5, 1},
			throughX: 50, idealX: 100, guarantee: 100,
		},
		{
			name: "nothing to carry",
			rd:   [][][2]float64{{{0, 0}, {0, 0}}},
			want: 1, scope: eval.ScopeNone, tenantWC: []float64{1, 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := evaltest.ManyToOne(1)
			for _, s := range tc.rd {
				evaltest.AddSample(&in, s...)
			}
			r, err := eval.Evaluate(in)
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.WorkConservation, tc.want, 1e-6) || r.WorkConservationScope != tc.scope {
				t.Errorf("work conservation %v (%s), want %v (%s)", r.WorkConservation, r.WorkConservationScope, tc.want, tc.scope)
			}
			for i, w := range tc.tenantWC {
				if !near(r.Tenants[i].WorkConservation, w, 1e-6) {
					t.Errorf("tenant %s work conservation %v, want %v", r.Tenants[i].Name, r.Tenants[i].WorkConservation, w)
				}
			}
			x := r.Tenants[0]
			if !near(x.MeanThroughput, tc.throughX, 1e-9) || !near(x.IdealThroughput, tc.idealX, 1e-6) || !near(x.Guarantee, tc.guarantee, 1e-9) {
				t.Errorf("X: throughput %v ideal %v guarantee %v, want %v %v %v", x.MeanThroughput, x.IdealThroughput, x.Guarantee, tc.throughX, tc.idealX, tc.guarantee)
			}
		})
	}
}

func TestShares(t *testing.T) {
	in := evaltest.ManyToOne(1)
	evaltest.AddSample(&in, [2]float64{700, inf}, [2]float64{300, inf})
	evaltest.AddSample(&in, [2]float64{700, inf}, [2]float64{300, inf})
	r, err := eval.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	x, y := r.Tenants[0], r.Tenants[1]
	checks := []struct {
		name      string
		got, want float64
	}{
		{"X spare share", x.SpareShare, 1},
		{"Y spare share", y.SpareShare, 0},
		{"X ideal spare share", x.IdealSpareShare, 0.5},
		{"X weight share", x.WeightShare, 0.5},
		{"Y compliance", y.Compliance, 0},
		{"X compliance", x.Compliance, 1},
		{"jain", r.Jain, eval.Jain([]float64{700.0 / 450, 300.0 / 450})},
		{"mean throughput", r.MeanThroughput, 1000},
		{"ideal", r.IdealThroughput, 1000},
		{"duration", r.DurationS, 0.2},
	}
	for _, c := range checks {
		if !near(c.got, c.want, 1e-6) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if len(x.Series.Achieved) != 2 || x.Series.Achieved[1] != 700 || !near(x.Series.Guarantee[0], 450, 1e-9) || !near(x.Series.Ideal[0], 500, 1e-6) {
		t.Errorf("X series %+v", x.Series)
	}
	if r.Times[0] != 0.1 || r.Times[1] != 0.2 {
		t.Errorf("times %v", r.Times)
	}
}

func TestJain(t *testing.T) {
	tests := []struct {
		x    []float64
		want float64
	}{
		{[]float64{1, 1, 1, 1}, 1},
		{[]float64{1, 0, 0, 0}, 0.25},
		{[]float64{1, 2, 3}, 36.0 / 42},
		{[]float64{2, 2}, 1},
		{[]float64{3, 1}, 16.0 / 20},
		{nil, 1},
		{[]float64{0, 0}, 1},
	}
	for _, tc := range tests {
		if got := eval.Jain(tc.x); !near(got, tc.want, 1e-12) {
			t.Errorf("Jain(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
}

func TestFCTStats(t *testing.T) {
	in := evaltest.ManyToOne(1)
	evaltest.AddSample(&in, [2]float64{0, 0}, [2]float64{0, 0})
	for i := 1; i <= 100; i++ {
		in.FCTs = append(in.FCTs, eval.FCT{Tenant: "X", Src: "X1", Dst: "X0", Bytes: 1e4, Duration: time.Duration(i) * time.Millisecond})
	}
	in.FCTs = append(in.FCTs, eval.FCT{Tenant: "Y", Src: "Y1", Dst: "Y0", Duration: time.Second})
	r, err := eval.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	f := r.Tenants[0].FCT
	if f == nil || f.Count != 100 || !near(f.MeanS, 0.0505, 1e-12) || !near(f.MedianS, 0.0505, 1e-12) || !near(f.P99S, 0.099, 1e-12) || !near(f.MaxS, 0.1, 1e-12) {
		t.Errorf("X FCT %+v", f)
	}
	if r.FCT == nil || r.FCT.Count != 101 || r.FCT.MaxS != 1 || r.FCT.MedianS != 0.051 {
		t.Errorf("overall FCT %+v", r.FCT)
	}
	if g := r.Tenants[1].FCT; g == nil || g.Count != 1 || g.P99S != 1 {
		t.Errorf("Y FCT %+v", g)
	}
	if p := eval.Percentile([]float64{1, 2, 3, 4}, 0.5); p != 2 {
		t.Errorf("Percentile 0.5 = %v", p)
	}
}

func TestValidate(t *testing.T) {
	ok := func() eval.Input {
		in := evaltest.ManyToOne(1)
		evaltest.AddSample(&in, [2]float64{1, inf}, [2]float64{1, 1})
		return in
	}
	tests := []struct {
		name string
		mod  func(*eval.Input)
		want string
	}{
		{"no interval", func(in *eval.Input) { in.Interval = 0 }, "interval"},
		{"negative unit scale", func(in *eval.Input) { in.UnitScale = -1 }, "unit scale"},
		{"link names", func(in *eval.Input) { in.LinkNames = []string{"a", "b", "c", "d"} }, "4 link names for 3 link capacities"},
		{"bad capacity", func(in *eval.Input) { in.LinkCapacity[0] = math.NaN() }, "link 0 (bottleneck)"},
		{"duplicate tenant", func(in *eval.Input) { in.Tenants[1].Name = "X" }, `duplicate tenant "X"`},
		{"duplicate VM", func(in *eval.Input) { in.Tenants[0].VMs[1].Name = "X0" }, `duplicate VM "X0"`},
		{"negative hose", func(in *eval.Input) { in.Tenants[0].VMs[0].In = -1 }, "hose guarantees"},
		{"unknown tenant", func(in *eval.Input) { in.Pairs[0].Tenant = "Q" }, `unknown tenant "Q"`},
		{"VM of another tenant", func(in *eval.Input) { in.Pairs[0].Src = "Y1" }, `tenant "X" has no VM "Y1"`},
		{"self pair", func(in *eval.Input) { in.Pairs[0].Dst = "X1" }, "to itself"},
		{"link out of range", func(in *eval.Input) { in.Pairs[1].Links = []int{7} }, "link 7 out of range"},
		{"no samples", func(in *eval.Input) { in.Samples = nil }, "no samples"},
		{"short sample", func(in *eval.Input) { in.Samples[0].Pairs = in.Samples[0].Pairs[:1] }, "has 1 pair samples for 2 pairs"},
		{"time order", func(in *eval.Input) { in.Samples = append(in.Samples, in.Samples[0]) }, "not after sample 0"},
		{"negative rate", func(in *eval.Input) { in.Samples[0].Pairs[1].Rate = -1 }, "pair 1 (Y1->Y0): rate"},
		{"infinite rate", func(in *eval.Input) { in.Samples[0].Pairs[1].Rate = inf }, "rate +Inf"},
		{"NaN demand", func(in *eval.Input) { in.Samples[0].Pairs[0].Demand = math.NaN() }, "demand NaN"},
		{"FCT tenant", func(in *eval.Input) { in.FCTs = []eval.FCT{{Tenant: "Q"}} }, `FCT 0 (->): unknown tenant "Q"`},
		{"FCT duration", func(in *eval.Input) { in.FCTs = []eval.FCT{{Tenant: "X", Duration: -1}} }, "negative duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := ok()
			tc.mod(&in)
			_, err := eval.Evaluate(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := eval.Evaluate(ok()); err != nil {
		t.Fatalf("valid input: %v", err)
	}
}

// bigInput is 3000 samples × 300 pairs: 10 tenants of 31 VMs (30 senders to
// one receiver) over a two-level tree; demands change every `every` samples.
func bigInput(every int) eval.Input {
	in := eval.Input{Scenario: "big", Mechanism: "bench", Interval: 10 * time.Millisecond, Units: "Mbps", UnitScale: evaltest.Mbps}
	in.LinkCapacity = []float64{10000 * evaltest.Mbps} // core
	for ti := 0; ti < 10; ti++ {
		tn := eval.Tenant{Name: "T" + string(rune('A'+ti))}
		tn.VMs = append(tn.VMs, evaltest.Sym("r", 100))
		recv := len(in.LinkCapacity)
		in.LinkCapacity = append(in.LinkCapacity, 1000*evaltest.Mbps)
		for s := 0; s < 30; s++ {
			name := "s" + string(rune('A'+s))
			tn.VMs = append(tn.VMs, evaltest.Sym(name, 100))
			in.LinkCapacity = append(in.LinkCapacity, 1000*evaltest.Mbps)
			in.Pairs = append(in.Pairs, eval.Pair{Tenant: tn.Name, Src: name, Dst: "r", Links: []int{len(in.LinkCapacity) - 1, 0, recv}})
		}
		in.Tenants = append(in.Tenants, tn)
	}
	for k := 0; k < 3000; k++ {
		s := eval.Sample{T: time.Duration(k+1) * in.Interval, Pairs: make([]eval.PairSample, len(in.Pairs))}
		phase := k / every
		for i := range s.Pairs {
			d := inf
			if (i+phase)%4 == 0 {
				d = float64(10+(i*7+phase)%50) * evaltest.Mbps
			}
			if (i+phase)%9 == 0 {
				d = 0
			}
			s.Pairs[i] = eval.PairSample{Rate: math.Min(d, 30*evaltest.Mbps), Demand: d}
		}
		in.Samples = append(in.Samples, s)
	}
	return in
}

func TestEvaluateBig(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	r, err := eval.Evaluate(bigInput(10))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tenants) != 10 || r.Samples != 3000 {
		t.Fatalf("report %d tenants %d samples", len(r.Tenants), r.Samples)
	}
	for _, tr := range r.Tenants {
		// Each tenant's receiver hose (100 Mbps) bounds its guarantee.
		if tr.Guarantee > 100+1e-6 || tr.Guarantee <= 0 {
			t.Errorf("tenant %s guarantee %v", tr.Name, tr.Guarantee)
		}
	}
}

// BenchmarkEvaluate: 3000 samples × 300 pairs, demands changing every
// sample (worst case) or every 10.
func BenchmarkEvaluate(b *testing.B) {
	for _, every := range []int{1, 10} {
		b.Run(fmt.Sprintf("change-every-%d", every), func(b *testing.B) {
			in := bigInput(every)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := eval.Evaluate(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The worst tenant is named even when the run-level compliance, which
// counts VM-seconds, looks fine: X is starved, Y's eight senders are
// served.
func TestWorstTenant(t *testing.T) {
	in := evaltest.ManyToOne(8)
	// X1→X0 gets 20 of its 450 Mbps guarantee; each Yi→Y0 gets its share.
	s := [][2]float64{{20, inf}}
	for i := 0; i < 8; i++ {
		s = append(s, [2]float64{120, inf})
	}
	for k := 0; k < 10; k++ {
		evaltest.AddSample(&in, s...)
	}
	r, err := eval.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Worst == nil || r.Worst.Name != "X" || r.Worst.Compliance != 0 {
		t.Fatalf("worst tenant %+v, want X at compliance 0", r.Worst)
	}
	if r.Compliance < 0.8 {
		t.Errorf("run compliance %.2f: the case wants a run-level figure that hides X", r.Compliance)
	}
	idle := evaltest.ManyToOne(1)
	evaltest.AddSample(&idle, [2]float64{0, 0}, [2]float64{0, 0})
	if r, err := eval.Evaluate(idle); err != nil || r.Worst != nil {
		t.Errorf("nothing guaranteed: worst %+v, %v; want none", r.Worst, err)
	}
}

// Rates no route can carry are reported, with the worst one; rates at the
// bottleneck (and within the tolerance) are not.
func TestImpossibleRates(t *testing.T) {
	in := evaltest.ManyToOne(1) // every pair's bottleneck: 1000 Mbps
	evaltest.AddSample(&in, [2]float64{1000, inf}, [2]float64{0, 0})
	evaltest.AddSample(&in, [2]float64{1050, inf}, [2]float64{0, 0})
	if got := eval.ImpossibleRates(&in, 0.1); got != nil {
		t.Errorf("rates within 10%% of the bottleneck reported: %v", got)
	}
	evaltest.AddSample(&in, [2]float64{0, 0}, [2]float64{2300, inf})
	evaltest.AddSample(&in, [2]float64{1200, inf}, [2]float64{0, 0})
	got := eval.ImpossibleRates(&in, 0.1)
	if len(got) != 1 || !strings.Contains(got[0], "2 of 4 samples") || !strings.Contains(got[0], "Y1->Y0 at 2300.0 Mbps") {
		t.Errorf("ImpossibleRates = %v, want 2 of 4 samples, worst Y1->Y0 at 2300 Mbps", got)
	}
	in.Invalid = got
	r, err := eval.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Invalid) != 1 {
		t.Errorf("the report does not carry the reason: %v", r.Invalid)
	}
}
