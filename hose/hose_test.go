package hose

import (
	"math"
	"math/rand"
	"strings"
	"testing"
)

func near(a, b float64) bool {
	if math.IsInf(a, 1) || math.IsInf(b, 1) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func sym(name string, b float64) VM { return VM{Name: name, In: b, Out: b} }

func TestGuarantees(t *testing.T) {
	unb := Unbounded
	tests := []struct {
		name  string
		vms   []VM
		pairs []Pair
		want  []float64
	}{
		{
			// ElasticSwitch §4, "GP in a static context".
			name:  "elasticswitch-sec4",
			vms:   []VM{sym("X", 100), sym("Y", 1000), sym("Z", 1000), sym("T", 1000)},
			pairs: []Pair{{"X", "Y", 20}, {"X", "Z", unb}, {"X", "T", unb}},
			want:  []float64{20, 40, 40},
		},
		{
			name:  "single pair min of hoses",
			vms:   []VM{sym("A", 450), sym("B", 300)},
			pairs: []Pair{{"A", "B", unb}},
			want:  []float64{300},
		},
		{
			name:  "demand below hose",
			vms:   []VM{sym("A", 450), sym("B", 450)},
			pairs: []Pair{{"A", "B", 100}},
			want:  []float64{100},
		},
		{
			// Many-to-one: the receiver's in-link is the bottleneck.
			name: "many-to-one",
			vms:  []VM{sym("R", 450), sym("S1", 450), sym("S2", 450), sym("S3", 450), sym("S4", 450)},
			pairs: []Pair{
				{"S1", "R", unb}, {"S2", "R", unb}, {"S3", "R", unb}, {"S4", "R", unb},
			},
			want: []float64{112.5, 112.5, 112.5, 112.5},
		},
		{
			name: "many-to-one with a small sender",
			vms:  []VM{sym("R", 450), sym("S1", 50), sym("S2", 450), sym("S3", 450)},
			pairs: []Pair{
				{"S1", "R", unb}, {"S2", "R", unb}, {"S3", "R", unb},
			},
			want: []float64{50, 200, 200},
		},
		{
			// Asymmetric hoses: A sends a lot, receives little.
			name:  "asymmetric",
			vms:   []VM{{"A", 10, 100}, {"B", 100, 10}},
			pairs: []Pair{{"A", "B", unb}, {"B", "A", unb}},
			want:  []float64{100, 10},
		},
		{
			name:  "asymmetric fan-out, one slow receiver",
			vms:   []VM{{"A", 0, 100}, {"B", 20, 0}, {"C", 100, 0}},
			pairs: []Pair{{"A", "B", unb}, {"A", "C", unb}},
			want:  []float64{20, 80},
		},
		{
			// ElasticSwitch Fig. 4 / weak interdependence: all hoses B,
			// X→Y, X→Z; Y also receives from W and V. Y's in-link gives
			// B/3 to X→Y, so X→Z gets 2B/3.
			name: "fig4 interdependence",
			vms:  []VM{sym("X", 90), sym("Y", 90), sym("Z", 90), sym("W", 90), sym("V", 90)},
			pairs: []Pair{
				{"X", "Y", unb}, {"X", "Z", unb}, {"W", "Y", unb}, {"V", "Y", unb},
			},
			want: []float64{30, 60, 30, 30},
		},
		{
			name:  "zero demand and zero hose",
			vms:   []VM{sym("A", 100), sym("B", 100), {"C", 0, 0}},
			pairs: []Pair{{"A", "B", 0}, {"A", "C", unb}, {"C", "B", 5}, {"B", "A", unb}},
			want:  []float64{0, 0, 0, 100},
		},
		{
			name:  "duplicate pairs share",
			vms:   []VM{sym("A", 100), sym("B", 100)},
			pairs: []Pair{{"A", "B", unb}, {"A", "B", unb}},
			want:  []float64{50, 50},
		},
		{
			name:  "no pairs",
			vms:   []VM{sym("A", 100)},
			pairs: nil,
			want:  []float64{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Guarantees(tc.vms, tc.pairs)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d guarantees, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !near(got[i], tc.want[i]) {
					t.Errorf("pair %d %s->%s: got %v, want %v", i, tc.pairs[i].Src, tc.pairs[i].Dst, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestGuaranteesErrors(t *testing.T) {
	ok := []VM{sym("A", 1), sym("B", 1)}
	tests := []struct {
		name  string
		vms   []VM
		pairs []Pair
		want  string
	}{
		{"duplicate VM", []VM{sym("A", 1), sym("A", 2)}, nil, `duplicate VM "A"`},
		{"unnamed VM", []VM{sym("", 1)}, nil, "no name"},
		{"negative hose", []VM{{"A", -1, 1}}, nil, "in guarantee"},
		{"infinite hose", []VM{{"A", 1, math.Inf(1)}}, nil, "out guarantee"},
		{"NaN hose", []VM{{"A", math.NaN(), 1}}, nil, "in guarantee"},
		{"unknown src", ok, []Pair{{"Q", "B", 1}}, `unknown VM "Q"`},
		{"unknown dst", ok, []Pair{{"A", "Q", 1}}, `unknown VM "Q"`},
		{"self pair", ok, []Pair{{"A", "A", 1}}, "to itself"},
		{"negative demand", ok, []Pair{{"A", "B", -1}}, "demand"},
		{"NaN demand", ok, []Pair{{"A", "B", math.NaN()}}, "demand"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Guarantees(tc.vms, tc.pairs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	n, err := NewNetwork(ok)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Solve([]IndexPair{{0, 1, 1}}, nil); err != ErrLength {
		t.Fatalf("short output: got %v, want ErrLength", err)
	}
	if err := n.Solve([]IndexPair{{0, 2, 1}}, make([]float64, 1)); err == nil {
		t.Fatal("index out of range accepted")
	}
}

// TestMaxMinProperty checks, on random tenants, that guarantees are feasible
// on the hose network, within demands, and max-min fair: every pair below
// its demand crosses a saturated hose link on which no pair gets more.
func TestMaxMinProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 200; trial++ {
		nv := 2 + rng.Intn(8)
		vms := make([]VM, nv)
		for i := range vms {
			vms[i] = VM{Name: string(rune('a' + i)), In: float64(rng.Intn(5) * 50), Out: float64(rng.Intn(5) * 50)}
		}
		np := 1 + rng.Intn(15)
		pairs := make([]Pair, 0, np)
		for len(pairs) < np {
			s, d := rng.Intn(nv), rng.Intn(nv)
			if s == d {
				continue
			}
			dem := Unbounded
			switch rng.Intn(3) {
			case 0:
				dem = float64(rng.Intn(100))
			case 1:
				dem = rng.Float64() * 200
			}
			pairs = append(pairs, Pair{vms[s].Name, vms[d].Name, dem})
		}
		g, err := Guarantees(vms, pairs)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		in := map[string]float64{}
		for k, p := range pairs {
			if g[k] < 0 || g[k] > p.Demand+1e-9 {
				t.Fatalf("trial %d pair %d: guarantee %v outside [0, demand %v]", trial, k, g[k], p.Demand)
			}
			out[p.Src] += g[k]
			in[p.Dst] += g[k]
		}
		hoses := map[string]VM{}
		for _, v := range vms {
			hoses[v.Name] = v
			if out[v.Name] > v.Out+1e-6 || in[v.Name] > v.In+1e-6 {
				t.Fatalf("trial %d VM %s: out %v/%v in %v/%v exceeds hose", trial, v.Name, out[v.Name], v.Out, in[v.Name], v.In)
			}
		}
		for k, p := range pairs {
			if g[k] >= p.Demand-1e-6 {
				continue
			}
			bottleneck := false
			if out[p.Src] >= hoses[p.Src].Out-1e-6 {
				max := true
				for j, q := range pairs {
					if q.Src == p.Src && g[j] > g[k]+1e-6 {
						max = false
					}
				}
				bottleneck = bottleneck || max
			}
			if in[p.Dst] >= hoses[p.Dst].In-1e-6 {
				max := true
				for j, q := range pairs {
					if q.Dst == p.Dst && g[j] > g[k]+1e-6 {
						max = false
					}
				}
				bottleneck = bottleneck || max
			}
			if !bottleneck {
				t.Fatalf("trial %d pair %d %s->%s: %v below demand %v without a bottleneck (pairs %v, guarantees %v, vms %v)",
					trial, k, p.Src, p.Dst, g[k], p.Demand, pairs, g, vms)
			}
		}
	}
}

func TestNetworkReuse(t *testing.T) {
	n, err := NewNetwork([]VM{sym("X", 100), sym("Y", 1000), sym("Z", 1000), sym("T", 1000)})
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := n.Index("Z"); !ok || i != 2 {
		t.Fatalf("Index(Z) = %d, %v", i, ok)
	}
	pairs := []IndexPair{{0, 1, 20}, {0, 2, Unbounded}, {0, 3, Unbounded}}
	out := make([]float64, 3)
	for round := 0; round < 3; round++ {
		pairs[0].Demand = float64(20 * (round + 1)) // 20, 40, 60
		if err := n.Solve(pairs, out); err != nil {
			t.Fatal(err)
		}
		want := []float64{20, 40, 40}
		if round > 0 { // demand 40 or 60 is above the fair share
			want = []float64{100.0 / 3, 100.0 / 3, 100.0 / 3}
		}
		for i := range out {
			if !near(out[i], want[i]) {
				t.Errorf("round %d pair %d: got %v want %v", round, i, out[i], want[i])
			}
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := n.Solve(pairs, out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Solve allocates %v times per call in steady state", allocs)
	}
}

func BenchmarkNetworkSolve(b *testing.B) {
	// One tenant of 30 VMs, all-to-all among 15 mappers and 15 reducers.
	vms := make([]VM, 30)
	for i := range vms {
		vms[i] = sym(string(rune('A'+i)), 56.25e6)
	}
	n, err := NewNetwork(vms)
	if err != nil {
		b.Fatal(err)
	}
	var pairs []IndexPair
	for s := 0; s < 15; s++ {
		for d := 15; d < 30; d++ {
			pairs = append(pairs, IndexPair{s, d, Unbounded})
		}
	}
	out := make([]float64, len(pairs))
	b.ReportAllocs()
	for b.Loop() {
		if err := n.Solve(pairs, out); err != nil {
			b.Fatal(err)
		}
	}
}
