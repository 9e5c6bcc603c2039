package metrics

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const mbps = 1e6

var inf = math.Inf(1)

func near(a, b, tol float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// sym is a VM with a symmetric hose in Mbps.
func sym(name string, b float64) VM { return VM{Name: name, In: b * mbps, Out: b * mbps} }

// manyToOne builds ElasticSwitch's Fig. 5 layout: tenant X (X1→X0) and
// tenant Y (n senders Yi→Y0) with 450 Mbps hoses, every pair crossing the
// 1 Gbps link 0 (the receivers' access link) and its own sender link.
func manyToOne(n int) Input {
	in := Input{
		Scenario: "many-to-one", Mechanism: "test",
		Interval: 100 * time.Millisecond, Units: "Mbps", UnitScale: mbps,
		LinkCapacity: []float64{1000 * mbps},
	}
	x := Tenant{Name: "X", VMs: []VM{sym("X0", 450), sym("X1", 450)}}
	y := Tenant{Name: "Y", VMs: []VM{sym("Y0", 450)}}
	in.LinkCapacity = append(in.LinkCapacity, 1000*mbps) // X1's access link
	in.Pairs = append(in.Pairs, Pair{Tenant: "X", Src: "X1", Dst: "X0", Links: []int{1, 0}})
	for i := 1; i <= n; i++ {
		name := "Y" + string(rune('0'+i))
		y.VMs = append(y.VMs, sym(name, 450))
		in.LinkCapacity = append(in.LinkCapacity, 1000*mbps)
		in.Pairs = append(in.Pairs, Pair{Tenant: "Y", Src: name, Dst: "Y0", Links: []int{len(in.LinkCapacity) - 1, 0}})
	}
	in.Tenants = []Tenant{x, y}
	in.LinkNames = []string{"bottleneck"}
	for l := 1; l < len(in.LinkCapacity); l++ {
		in.LinkNames = append(in.LinkNames, "access"+string(rune('0'+l)))
	}
	return in
}

// sample appends a sample with the given (rate, demand) per pair in Mbps.
func addSample(in *Input, rd ...[2]float64) {
	s := Sample{T: time.Duration(len(in.Samples)+1) * in.Interval, Pairs: make([]PairSample, len(rd))}
	for i, v := range rd {
		s.Pairs[i] = PairSample{Rate: v[0] * mbps, Demand: v[1] * mbps}
	}
	in.Samples = append(in.Samples, s)
}

func TestOracle(t *testing.T) {
	tests := []struct {
		name     string
		in       Input
		demand   []float64 // Mbps
		wantG    []float64 // Mbps
		wantI    []float64 // Mbps
		wantBott []bool
	}{
		{
			name:     "two greedy tenants share 500/500",
			in:       manyToOne(1),
			demand:   []float64{inf, inf},
			wantG:    []float64{450, 450},
			wantI:    []float64{500, 500},
			wantBott: []bool{true, true},
		},
		{
			name:     "one idle: the other gets the link",
			in:       manyToOne(1),
			demand:   []float64{inf, 0},
			wantG:    []float64{450, 0},
			wantI:    []float64{1000, 0},
			wantBott: []bool{true, false},
		},
		{
			name:     "4 pairs vs 1 pair: hose guarantee, not 4x",
			in:       manyToOne(4),
			demand:   []float64{inf, inf, inf, inf, inf},
			wantG:    []float64{450, 112.5, 112.5, 112.5, 112.5},
			wantI:    []float64{500, 125, 125, 125, 125},
			wantBott: []bool{true, true, true, true, true},
		},
		{
			name:     "bounded demand below guarantee",
			in:       manyToOne(1),
			demand:   []float64{200, inf},
			wantG:    []float64{200, 450},
			wantI:    []float64{200, 800},
			wantBott: []bool{true, true},
		},
		{
			name:     "small demands: no bottleneck",
			in:       manyToOne(2),
			demand:   []float64{100, 100, 0},
			wantG:    []float64{100, 100, 0},
			wantI:    []float64{100, 100, 0},
			wantBott: []bool{false, false, false},
		},
		{
			name: "over-committed guarantees are scaled to fit",
			in: func() Input {
				in := manyToOne(1)
				for i := range in.Tenants {
					for j := range in.Tenants[i].VMs {
						in.Tenants[i].VMs[j] = sym(in.Tenants[i].VMs[j].Name, 600)
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
			in: func() Input {
				in := manyToOne(1)
				in.Tenants[1].VMs = []VM{{Name: "Y0"}, {Name: "Y1"}}
				return in
			}(),
			demand: []float64{inf, inf},
			wantG:  []float64{450, 0},
			wantI:  []float64{1000, 0},
		},
		{
			name: "pair with no physical links gets its demand",
			in: func() Input {
				in := manyToOne(2)
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
			o, err := NewOracle(tc.in.Tenants, tc.in.Pairs, tc.in.LinkCapacity)
			if err != nil {
				t.Fatal(err)
			}
			n := len(tc.in.Pairs)
			d := make([]float64, n)
			for i := range d {
				d[i] = tc.demand[i] * mbps
			}
			g, id, b := make([]float64, n), make([]float64, n), make([]bool, n)
			if err := o.Solve(d, g, id, b); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if !near(g[i]/mbps, tc.wantG[i], 1e-6) {
					t.Errorf("pair %d guarantee %v Mbps, want %v", i, g[i]/mbps, tc.wantG[i])
				}
				if !near(id[i]/mbps, tc.wantI[i], 1e-3) {
					t.Errorf("pair %d ideal %v Mbps, want %v", i, id[i]/mbps, tc.wantI[i])
				}
				if tc.wantBott != nil && b[i] != tc.wantBott[i] {
					t.Errorf("pair %d bottleneck %v, want %v", i, b[i], tc.wantBott[i])
				}
			}
		})
	}
}

func TestOracleNoAllocs(t *testing.T) {
	in := manyToOne(50)
	o, err := NewOracle(in.Tenants, in.Pairs, in.LinkCapacity)
	if err != nil {
		t.Fatal(err)
	}
	n := len(in.Pairs)
	d, g, id, b := make([]float64, n), make([]float64, n), make([]float64, n), make([]bool, n)
	for i := range d {
		d[i] = float64(i%7) * 100 * mbps
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
			in := manyToOne(2)
			for _, s := range tc.rd {
				addSample(&in, append(s, [2]float64{0, 0})...)
			}
			r, err := Evaluate(in)
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
	in := Input{
		Interval: time.Second, LinkCapacity: []float64{1e9},
		Tenants: []Tenant{{Name: "T", VMs: []VM{sym("A", 100), sym("B", 100), sym("C", 100)}}},
		Pairs: []Pair{
			{Tenant: "T", Src: "A", Dst: "B", Links: []int{0}},
			{Tenant: "T", Src: "C", Dst: "A", Links: []int{0}},
		},
	}
	addSample(&in, [2]float64{100, inf}, [2]float64{100, inf}) // A, B, C served
	addSample(&in, [2]float64{100, inf}, [2]float64{50, inf})  // A (in), C (out) not; B served
	r, err := Evaluate(in)
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
			want: 0.45, scope: ScopeBottlenecks, tenantWC: []float64{0.45, 1},
			throughX: 450, idealX: 1000, guarantee: 450,
		},
		{
			name: "unfair but work-conserving",
			rd:   [][][2]float64{{{100, inf}, {900, inf}}},
			want: 1, scope: ScopeBottlenecks, tenantWC: []float64{0.2, 1},
			throughX: 100, idealX: 500, guarantee: 450,
		},
		{
			name: "static reservation",
			rd:   [][][2]float64{{{450, inf}, {450, inf}}, {{450, inf}, {450, inf}}},
			want: 0.9, scope: ScopeBottlenecks, tenantWC: []float64{0.9, 0.9},
			throughX: 450, idealX: 500, guarantee: 450,
		},
		{
			name: "no bottleneck: all pairs",
			rd:   [][][2]float64{{{50, 100}, {0, 0}}},
			want: 0.5, scope: ScopeAll, tenantWC: []float64{0.5, 1},
			throughX: 50, idealX: 100, guarantee: 100,
		},
		{
			name: "nothing to carry",
			rd:   [][][2]float64{{{0, 0}, {0, 0}}},
			want: 1, scope: ScopeNone, tenantWC: []float64{1, 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := manyToOne(1)
			for _, s := range tc.rd {
				addSample(&in, s...)
			}
			r, err := Evaluate(in)
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
	in := manyToOne(1)
	addSample(&in, [2]float64{700, inf}, [2]float64{300, inf})
	addSample(&in, [2]float64{700, inf}, [2]float64{300, inf})
	r, err := Evaluate(in)
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
		{"jain", r.Jain, Jain([]float64{700.0 / 450, 300.0 / 450})},
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
		if got := Jain(tc.x); !near(got, tc.want, 1e-12) {
			t.Errorf("Jain(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
}

func TestFCTStats(t *testing.T) {
	in := manyToOne(1)
	addSample(&in, [2]float64{0, 0}, [2]float64{0, 0})
	for i := 1; i <= 100; i++ {
		in.FCTs = append(in.FCTs, FCT{Tenant: "X", Src: "X1", Dst: "X0", Bytes: 1e4, Duration: time.Duration(i) * time.Millisecond})
	}
	in.FCTs = append(in.FCTs, FCT{Tenant: "Y", Src: "Y1", Dst: "Y0", Duration: time.Second})
	r, err := Evaluate(in)
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
	if p := Percentile([]float64{1, 2, 3, 4}, 0.5); p != 2 {
		t.Errorf("Percentile 0.5 = %v", p)
	}
}

func TestValidate(t *testing.T) {
	ok := func() Input {
		in := manyToOne(1)
		addSample(&in, [2]float64{1, inf}, [2]float64{1, 1})
		return in
	}
	tests := []struct {
		name string
		mod  func(*Input)
		want string
	}{
		{"no interval", func(in *Input) { in.Interval = 0 }, "interval"},
		{"negative unit scale", func(in *Input) { in.UnitScale = -1 }, "unit scale"},
		{"link names", func(in *Input) { in.LinkNames = []string{"a", "b", "c", "d"} }, "4 link names for 3 link capacities"},
		{"bad capacity", func(in *Input) { in.LinkCapacity[0] = math.NaN() }, "link 0 (bottleneck)"},
		{"duplicate tenant", func(in *Input) { in.Tenants[1].Name = "X" }, `duplicate tenant "X"`},
		{"duplicate VM", func(in *Input) { in.Tenants[0].VMs[1].Name = "X0" }, `duplicate VM "X0"`},
		{"negative hose", func(in *Input) { in.Tenants[0].VMs[0].In = -1 }, "hose guarantees"},
		{"unknown tenant", func(in *Input) { in.Pairs[0].Tenant = "Q" }, `unknown tenant "Q"`},
		{"VM of another tenant", func(in *Input) { in.Pairs[0].Src = "Y1" }, `tenant "X" has no VM "Y1"`},
		{"self pair", func(in *Input) { in.Pairs[0].Dst = "X1" }, "to itself"},
		{"link out of range", func(in *Input) { in.Pairs[1].Links = []int{7} }, "link 7 out of range"},
		{"no samples", func(in *Input) { in.Samples = nil }, "no samples"},
		{"short sample", func(in *Input) { in.Samples[0].Pairs = in.Samples[0].Pairs[:1] }, "has 1 pair samples for 2 pairs"},
		{"time order", func(in *Input) { in.Samples = append(in.Samples, in.Samples[0]) }, "not after sample 0"},
		{"negative rate", func(in *Input) { in.Samples[0].Pairs[1].Rate = -1 }, "pair 1 (Y1->Y0): rate"},
		{"infinite rate", func(in *Input) { in.Samples[0].Pairs[1].Rate = inf }, "rate +Inf"},
		{"NaN demand", func(in *Input) { in.Samples[0].Pairs[0].Demand = math.NaN() }, "demand NaN"},
		{"FCT tenant", func(in *Input) { in.FCTs = []FCT{{Tenant: "Q"}} }, `FCT 0 (->): unknown tenant "Q"`},
		{"FCT duration", func(in *Input) { in.FCTs = []FCT{{Tenant: "X", Duration: -1}} }, "negative duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := ok()
			tc.mod(&in)
			_, err := Evaluate(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Evaluate(ok()); err != nil {
		t.Fatalf("valid input: %v", err)
	}
}

// demoReport evaluates a small run of two tenants with on/off demand and
// some flows.
func demoReport(t testing.TB, mechanism string, capX float64) *Report {
	in := manyToOne(3)
	in.Mechanism = mechanism
	for k := 0; k < 100; k++ {
		yOn := k >= 30 && k < 70
		yd := 0.0
		if yOn {
			yd = inf
		}
		x := math.Min(capX, 1000)
		if yOn {
			x = math.Min(capX, 480)
		}
		y := 0.0
		if yOn {
			y = (1000 - x) / 3
		}
		addSample(&in, [2]float64{x, inf}, [2]float64{y, yd}, [2]float64{y, yd}, [2]float64{y, yd})
	}
	for i := 0; i < 200; i++ {
		tn := "X"
		if i%2 == 1 {
			tn = "Y"
		}
		in.FCTs = append(in.FCTs, FCT{Tenant: tn, Duration: time.Duration(1+i*i) * time.Millisecond})
	}
	r, err := Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWriteReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "run")
	r := demoReport(t, "test", inf)
	if err := WriteReport(dir, r, true); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "mechanism", "duration_s", "units", "work_conservation", "compliance", "jain", "tenants"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report.json lacks %q", k)
		}
	}
	ten := m["tenants"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "guarantee", "mean_throughput", "ideal_throughput", "compliance", "work_conservation", "spare_share", "weight_share", "fct"} {
		if _, ok := ten[k]; !ok {
			t.Errorf("report.json tenant lacks %q", k)
		}
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.Tenants[1].FCT == nil || back.Units != "Mbps" {
		t.Errorf("report.json does not round-trip: %v %+v", err, back)
	}
	for _, f := range []string{SummaryMD, TimeseriesCSV, "throughput.png", "throughput.svg", "tenants.png", "tenants.svg", "fct_cdf.png", "fct_cdf.svg"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (empty?)", f, err)
		}
	}
	png, _ := os.ReadFile(filepath.Join(dir, "throughput.png"))
	if !strings.HasPrefix(string(png), "\x89PNG") {
		t.Error("throughput.png is not a PNG")
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "tenants.svg"))
	if !strings.Contains(string(svg), "<svg") {
		t.Error("tenants.svg is not an SVG")
	}
	csv, _ := os.ReadFile(filepath.Join(dir, TimeseriesCSV))
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if lines[0] != "t_s,tenant,achieved,guarantee,ideal" || len(lines) != 1+100*2 {
		t.Errorf("timeseries.csv: header %q, %d lines", lines[0], len(lines))
	}
	md, _ := os.ReadFile(filepath.Join(dir, SummaryMD))
	if !strings.Contains(string(md), "| X |") || !strings.Contains(string(md), "**Y** averaged") {
		t.Errorf("summary.md lacks tenant rows:\n%s", md)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	// Without plots.
	dir2 := filepath.Join(t.TempDir(), "np")
	if err := WriteReport(dir2, r, false); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir2); len(ents) != 3 {
		t.Errorf("without plots: %d files, want 3", len(ents))
	}
}

func TestWriteReportFailureLeavesNothing(t *testing.T) {
	r := demoReport(t, "test", inf)
	t.Run("dir is a file", func(t *testing.T) {
		base := t.TempDir()
		file := filepath.Join(base, "file")
		if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := WriteReport(file, r, true); err == nil {
			t.Fatal("no error writing into a file")
		}
		if err := WriteReport(filepath.Join(file, "sub"), r, true); err == nil {
			t.Fatal("no error writing below a file")
		}
		ents, _ := os.ReadDir(base)
		if len(ents) != 1 {
			t.Errorf("left behind: %v", ents)
		}
		if b, _ := os.ReadFile(file); string(b) != "x" {
			t.Error("file clobbered")
		}
	})
	t.Run("rename fails midway", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		// A non-empty directory where summary.md should go: report.json
		// is renamed into place first, then summary.md fails.
		if err := os.MkdirAll(filepath.Join(dir, SummaryMD, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteReport(dir, r, true); err == nil {
			t.Fatal("no error")
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 || ents[0].Name() != SummaryMD {
			t.Errorf("left behind: %v", ents)
		}
	})
	t.Run("created dir removed", func(t *testing.T) {
		base := t.TempDir()
		dir := filepath.Join(base, "new")
		bad := *r
		bad.Tenants = append([]TenantReport(nil), r.Tenants...)
		bad.Tenants[0].Series.Ideal = nil // inconsistent: fails before writing
		if err := WriteReport(dir, &bad, true); err == nil {
			t.Fatal("no error")
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("dir exists after failure: %v", err)
		}
	})
}

func TestWriteComparison(t *testing.T) {
	reports := []*Report{demoReport(t, "none", inf), demoReport(t, "static", 450), demoReport(t, "elasticswitch", inf)}
	dir := filepath.Join(t.TempDir(), "cmp")
	if err := WriteComparison(dir, reports, true); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ComparisonJSON))
	if err != nil {
		t.Fatal(err)
	}
	var c Comparison
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != 6 || len(c.Mechanisms) != 3 || c.Scenario != "many-to-one" || c.Rows[2].Mechanism != "static" || c.Rows[2].Tenant != "X" {
		t.Errorf("comparison %+v", c)
	}
	if !near(c.Mechanisms[1].WorkConservation, reports[1].WorkConservation, 0) || reports[1].WorkConservation >= 1 {
		t.Errorf("static work conservation %v", reports[1].WorkConservation)
	}
	for _, f := range []string{ComparisonMD, "comparison.png", "comparison.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, ComparisonMD))
	if !strings.Contains(string(md), "| static | X |") {
		t.Errorf("comparison.md:\n%s", md)
	}
	if err := WriteComparison(dir, nil, false); err == nil {
		t.Error("no error comparing nothing")
	}
	other := *reports[0]
	other.Units = "Gbps"
	if err := WriteComparison(dir, []*Report{reports[0], &other}, false); err == nil || !strings.Contains(err.Error(), "Gbps") {
		t.Errorf("mixed units: %v", err)
	}
	// Reports read back from JSON (no series) still compare and write.
	var back Report
	js, _ := json.Marshal(reports[0])
	_ = json.Unmarshal(js, &back)
	if err := WriteReport(filepath.Join(t.TempDir(), "back"), &back, true); err != nil {
		t.Errorf("report from JSON: %v", err)
	}
}

// bigInput is 3000 samples × 300 pairs: 10 tenants of 31 VMs (30 senders to
// one receiver) over a two-level tree; demands change every `every` samples.
func bigInput(every int) Input {
	in := Input{Scenario: "big", Mechanism: "bench", Interval: 10 * time.Millisecond, Units: "Mbps", UnitScale: mbps}
	in.LinkCapacity = []float64{10000 * mbps} // core
	for ti := 0; ti < 10; ti++ {
		tn := Tenant{Name: "T" + string(rune('A'+ti))}
		tn.VMs = append(tn.VMs, sym("r", 100))
		recv := len(in.LinkCapacity)
		in.LinkCapacity = append(in.LinkCapacity, 1000*mbps)
		for s := 0; s < 30; s++ {
			name := "s" + string(rune('A'+s))
			tn.VMs = append(tn.VMs, sym(name, 100))
			in.LinkCapacity = append(in.LinkCapacity, 1000*mbps)
			in.Pairs = append(in.Pairs, Pair{Tenant: tn.Name, Src: name, Dst: "r", Links: []int{len(in.LinkCapacity) - 1, 0, recv}})
		}
		in.Tenants = append(in.Tenants, tn)
	}
	for k := 0; k < 3000; k++ {
		s := Sample{T: time.Duration(k+1) * in.Interval, Pairs: make([]PairSample, len(in.Pairs))}
		phase := k / every
		for i := range s.Pairs {
			d := inf
			if (i+phase)%4 == 0 {
				d = float64(10+(i*7+phase)%50) * mbps
			}
			if (i+phase)%9 == 0 {
				d = 0
			}
			s.Pairs[i] = PairSample{Rate: math.Min(d, 30*mbps), Demand: d}
		}
		in.Samples = append(in.Samples, s)
	}
	return in
}

func TestEvaluateBig(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	r, err := Evaluate(bigInput(10))
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
				if _, err := Evaluate(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
