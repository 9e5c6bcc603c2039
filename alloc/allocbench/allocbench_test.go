package allocbench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/alloc"
)

func TestRun(t *testing.T) {
	var progress bytes.Buffer
	res, err := Run(context.Background(), Options{Scale: 1, Seed: 1, Runs: 2, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if res.Flows != 24000 || res.Resources != 4200 {
		t.Fatalf("%d flows, %d resources", res.Flows, res.Resources)
	}
	if sum := res.DominantAppliance + res.DominantUplink + res.DominantDownlink; sum != res.Flows || res.DominantAppliance == 0 || res.DominantDownlink == 0 {
		t.Errorf("dominant resources: appliance %d, uplink %d, downlink %d", res.DominantAppliance, res.DominantUplink, res.DominantDownlink)
	}
	if res.PulsarScaleDiffer != 0 {
		t.Errorf("DRF differs from weighted max-min on %d flows of PulsarScale", res.PulsarScaleDiffer)
	}
	want := []struct {
		name      string
		minDiffer int // at least
		maxDiffer int // at most
	}{
		{"weighted max-min", 0, 0},
		{"weighted max-min (reused Solver)", 0, 0},
		{"DRF", res.Flows / 10, res.Flows},
		{"H-DRF", res.Flows / 10, res.Flows},
		{"first fit", 1, res.Flows},
	}
	if len(res.Rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(res.Rows), len(want))
	}
	for i, w := range want {
		r := res.Rows[i]
		if r.Name != w.name || r.Differ < w.minDiffer || r.Differ > w.maxDiffer || r.Min <= 0 || r.Median < r.Min {
			t.Errorf("row %d: %+v, want %s with %d–%d flows differing", i, r, w.name, w.minDiffer, w.maxDiffer)
		}
	}
	if n := strings.Count(progress.String(), "\n"); n != 1+2*len(want) {
		t.Errorf("%d progress lines, want %d:\n%s", n, 1+2*len(want), progress.String())
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| DRF |", "| H-DRF |", "allocations/s", "differs from weighted max-min on 0 of 24000"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, md.String())
		}
	}
}

func TestRunErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		o    Options
		want string
	}{
		{"no runs", context.Background(), Options{Scale: 1, Runs: 0}, "runs"},
		{"scale 0", context.Background(), Options{Scale: 0, Runs: 1}, "scale factor 0"},
		{"scale too large", context.Background(), Options{Scale: alloc.MaxMixedScale + 1, Runs: 1}, "scale factor"},
		{"cancelled", ctx, Options{Scale: 1, Runs: 1}, "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Run(tc.ctx, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// What WriteJSON writes, `bulkhead alloc` reads back as the same problem:
// its answer is the allocator's, to the 10 digits it prints.
func TestWriteJSON(t *testing.T) {
	p, vp, err := alloc.PulsarScaleMixed(5, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The answer rounds to 10 digits and writes values below 1e-9 of the
	// largest capacity (120 G) as 0.
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b))+1e-9*120e9 }
	for _, form := range Forms() {
		t.Run(form, func(t *testing.T) {
			var in, out bytes.Buffer
			if err := WriteJSON(&in, 1, 5, form); err != nil {
				t.Fatal(err)
			}
			if err := alloc.SolveJSONLimit(&in, &out, 1<<30); err != nil {
				t.Fatal(err)
			}
			var ans struct {
				Rates       map[string]float64
				Allocations map[string]map[string]float64
			}
			if err := json.Unmarshal(out.Bytes(), &ans); err != nil {
				t.Fatal(err)
			}
			var want []float64
			switch form {
			case "rate":
				if want, err = alloc.MaxMin(alloc.UnitCoefs(p)); err != nil {
					t.Fatal(err)
				}
			default:
				solve := map[string]func(*alloc.VectorProblem) ([]float64, error){"drf": alloc.DRF, "hdrf": alloc.HDRF, "firstfit": alloc.FirstFit}[form]
				x, err := solve(vp)
				if err != nil {
					t.Fatal(err)
				}
				want = alloc.VectorRates(p, vp, x)
			}
			bad := 0
			for i, f := range p.Flows {
				got := ans.Rates[f.ID]
				if form != "rate" {
					got = ans.Allocations[f.ID][p.Resources[f.Uses[0].Resource].ID]
				}
				if !near(got, want[i]) {
					if bad++; bad < 5 {
						t.Errorf("flow %s: %g, want %g", f.ID, got, want[i])
					}
				}
			}
		})
	}
	if err := WriteJSON(&bytes.Buffer{}, 1, 1, "lp"); err == nil {
		t.Error("unknown form accepted")
	}
}
