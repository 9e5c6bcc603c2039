package analysis

// Reading simulations the way the papers' evaluations do: a scenario run
// under a mechanism (Simulate, through the same simulator and evaluation as
// `bulkhead sim`), then per-pair samples averaged over windows of time —
// per phase, per VM pair, per receiver — which the report's per-tenant
// figures do not give; and Markdown tables of the results.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Simulation is one simulated run: what the simulator recorded and its
// evaluation against the oracle.
type Simulation struct {
	File, Mechanism string
	In              *eval.Input
	Report          *eval.Report
}

// SimulateOptions tune Simulate; the zero value runs the file as it is.
type SimulateOptions struct {
	// Edit, if not nil, changes the parsed scenario before it is admitted.
	Edit func(*spec.Scenario)
	// Progress, if set, receives the simulator's progress lines.
	Progress io.Writer
	// Logger for the simulator's debug output (default: none).
	Logger *slog.Logger
}

// Simulate runs dir/file under mechanism (the scenario's parameters apply
// when it is the scenario's own mechanism) through the runner's pipeline,
// as `bulkhead sim` does, and evaluates the run.
func Simulate(ctx context.Context, dir, file, mechanism string, o SimulateOptions) (*Simulation, error) {
	path := filepath.Join(dir, file)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	sc, err := spec.Parse(data, path)
	if err != nil {
		return nil, err
	}
	if o.Edit != nil {
		o.Edit(sc)
	}
	s, err := runner.Prepare(sc)
	if err != nil {
		return nil, err
	}
	in, err := runner.Simulate(ctx, s, mechanism, runner.Options{Progress: o.Progress, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("under %s: %w", mechanism, err)
	}
	rep, err := eval.Evaluate(*in)
	if err != nil {
		return nil, fmt.Errorf("%s: evaluate the %s run: %w", path, mechanism, err)
	}
	return &Simulation{File: file, Mechanism: mechanism, In: in, Report: rep}, nil
}

// Window is a time interval (From, To]: the samples that end in it.
type Window struct{ From, To time.Duration }

// Has says whether a sample ending at t is in w.
func (w Window) Has(t time.Duration) bool { return t > w.From && t <= w.To }

// Phase returns the window of phase k of length l, without its first skip
// (the transient after the phase starts).
func Phase(k int, l, skip time.Duration) Window {
	return Window{time.Duration(k)*l + skip, time.Duration(k+1) * l}
}

// PairKey names a VM pair in maps.
type PairKey struct{ Tenant, Src, Dst string }

// means returns, indexed like r.In.Pairs, the mean rate (Mbps) over w of
// every pair pick accepts and its mean demand (> 0: it was active), and
// whether pick accepted it. Rates are NaN when no sample ends in w.
func (r *Simulation) means(w Window, pick func(p eval.Pair) bool) (rate, demand []float64, picked []bool) {
	np := len(r.In.Pairs)
	rate, demand, picked = make([]float64, np), make([]float64, np), make([]bool, np)
	for i, p := range r.In.Pairs {
		picked[i] = pick(p)
	}
	n := 0
	for _, s := range r.In.Samples {
		if !w.Has(s.T) {
			continue
		}
		n++
		for i := range r.In.Pairs {
			if !picked[i] {
				continue
			}
			rate[i] += s.Pairs[i].Rate / 1e6
			if d := s.Pairs[i].Demand; d > 0 {
				demand[i] += math.Min(d, 1e12) / 1e6
			}
		}
	}
	for i := range rate {
		rate[i] /= float64(n) // NaN when n = 0
		demand[i] /= float64(n)
	}
	return rate, demand, picked
}

// PairMeans returns, for every pair that pick accepts, its mean rate in
// Mbps over the samples of w, and its mean demand (whether it was active:
// > 0). Rates are NaN when no sample ends in w.
func (r *Simulation) PairMeans(w Window, pick func(p eval.Pair) bool) (rate, demand map[PairKey]float64) {
	rs, ds, picked := r.means(w, pick)
	rate, demand = map[PairKey]float64{}, map[PairKey]float64{}
	for i, p := range r.In.Pairs {
		if picked[i] {
			k := PairKey{p.Tenant, p.Src, p.Dst}
			rate[k], demand[k] = rs[i], ds[i]
		}
	}
	return rate, demand
}

// sum is the total mean rate (Mbps) over w of the pairs pick accepts.
func (r *Simulation) sum(w Window, pick func(p eval.Pair) bool) float64 {
	rate, _, picked := r.means(w, pick)
	total := 0.0
	for i, v := range rate {
		if picked[i] {
			total += v
		}
	}
	return total
}

// Tenant returns the mean total rate (Mbps) of a tenant's pairs over w.
func (r *Simulation) Tenant(w Window, name string) float64 {
	return r.sum(w, func(p eval.Pair) bool { return p.Tenant == name })
}

// Pair returns the mean rate (Mbps) over w of the pairs from src to dst.
func (r *Simulation) Pair(w Window, src, dst string) float64 {
	return r.sum(w, func(p eval.Pair) bool { return p.Src == src && p.Dst == dst })
}

// JainActive is Jain's index of the mean rates over w of the tenant's pairs
// that were active (had demand) in w (Fig. 7); NaN when none was.
func (r *Simulation) JainActive(w Window, tenant string) float64 {
	rate, demand, picked := r.means(w, func(p eval.Pair) bool { return p.Tenant == tenant })
	var x []float64
	for i, v := range rate {
		if picked[i] && demand[i] > 0 {
			x = append(x, v)
		}
	}
	if len(x) == 0 {
		return math.NaN()
	}
	return eval.Jain(x)
}

// MinSample is the lowest per-sample total rate (Mbps) of a tenant over w
// (+Inf when no sample ends in w).
func (r *Simulation) MinSample(w Window, tenant string) float64 {
	low := math.Inf(1)
	for _, s := range r.In.Samples {
		if !w.Has(s.T) {
			continue
		}
		sum := 0.0
		for i, p := range r.In.Pairs {
			if p.Tenant == tenant {
				sum += s.Pairs[i].Rate / 1e6
			}
		}
		low = math.Min(low, sum)
	}
	return low
}

// Receivers returns the mean received rate (Mbps) over w of every VM that
// receives in the pairs pick accepts, by VM name.
func (r *Simulation) Receivers(w Window, pick func(p eval.Pair) bool) map[string]float64 {
	rate, _, picked := r.means(w, pick)
	out := map[string]float64{}
	for i, p := range r.In.Pairs {
		if picked[i] {
			out[p.Dst] += rate[i]
		}
	}
	return out
}

// Table is one Markdown table of an analysis.
type Table struct {
	Name   string // file name without .md
	Title  string
	Header []string
	Left   int // leading columns aligned left (labels); the rest right
	Rows   [][]string
}

// Markdown renders the table under its title as a level-2 heading.
func (t Table) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", t.Title)
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	line(t.Header)
	sep := make([]string, len(t.Header))
	for i := range sep {
		sep[i] = "---:"
		if i < t.Left {
			sep[i] = "---"
		}
	}
	line(sep)
	for _, r := range t.Rows {
		line(r)
	}
	return b.String()
}
