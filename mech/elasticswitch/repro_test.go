package elasticswitch_test

// Helpers shared by the reproduction tests (paper_test.go): run a
// scenario file under a mechanism and read per-pair and per-phase numbers
// from the run.

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/metrics"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// run is one simulation: what the simulator recorded and its evaluation.
type run struct {
	file, mech string
	in         *metrics.Input
	rep        *metrics.Report
}

// simulate runs scenarios/<file> under mechanism (the scenario's
// parameters apply when it is the scenario's mechanism), after edit (if
// not nil) has changed the parsed scenario.
func simulate(t testing.TB, file, mechanism string, edit func(*spec.Scenario)) *run {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(scenarioDir, file))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := spec.Parse(data, file)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(sc)
	}
	s, err := runner.Prepare(sc)
	if err != nil {
		t.Fatal(err)
	}
	var params map[string]any
	if mechanism == sc.Mechanism.Name {
		params = sc.Mechanism.Params
	}
	m, err := all.New(mechanism, params)
	if err != nil {
		t.Fatal(err)
	}
	in, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := metrics.Evaluate(*in)
	if err != nil {
		t.Fatal(err)
	}
	return &run{file: file, mech: mechanism, in: in, rep: rep}
}

// window is a time interval (from, to]: the samples that end in it.
type window struct{ from, to time.Duration }

func (w window) has(t time.Duration) bool { return t > w.from && t <= w.to }

// phase returns the window of phase k of length l, without its first
// skip (the transient after the phase starts).
func phase(k int, l, skip time.Duration) window {
	return window{time.Duration(k)*l + skip, time.Duration(k+1) * l}
}

// pairKey names a pair in maps.
type pairKey struct{ Tenant, Src, Dst string }

// pairMeans returns, for every pair that pick accepts, its mean rate in
// Mbps over the samples of w, and its mean demand (whether it was active:
// > 0).
func (r *run) pairMeans(w window, pick func(p metrics.Pair) bool) (rate, demand map[pairKey]float64) {
	rate, demand = map[pairKey]float64{}, map[pairKey]float64{}
	n := 0
	for _, s := range r.in.Samples {
		if !w.has(s.T) {
			continue
		}
		n++
		for i, p := range r.in.Pairs {
			if !pick(p) {
				continue
			}
			k := pairKey{p.Tenant, p.Src, p.Dst}
			rate[k] += s.Pairs[i].Rate / 1e6
			if d := s.Pairs[i].Demand; d > 0 {
				demand[k] += math.Min(d, 1e12) / 1e6
			}
		}
	}
	if n == 0 {
		panic("no samples in window")
	}
	for p := range rate {
		rate[p] /= float64(n)
		demand[p] /= float64(n)
	}
	return rate, demand
}

// tenant returns the mean total rate (Mbps) of a tenant's pairs over w.
func (r *run) tenant(w window, name string) float64 {
	rate, _ := r.pairMeans(w, func(p metrics.Pair) bool { return p.Tenant == name })
	sum := 0.0
	for _, v := range rate {
		sum += v
	}
	return sum
}

// pair returns a pair's mean rate (Mbps) over w.
func (r *run) pair(w window, src, dst string) float64 {
	rate, _ := r.pairMeans(w, func(p metrics.Pair) bool { return p.Src == src && p.Dst == dst })
	sum := 0.0
	for _, v := range rate {
		sum += v
	}
	return sum
}

// jainActive is Jain's index of the mean rates over w of the tenant's
// pairs that were active (had demand) throughout w (Fig. 7).
func (r *run) jainActive(w window, tenant string) float64 {
	rate, demand := r.pairMeans(w, func(p metrics.Pair) bool { return p.Tenant == tenant })
	var x []float64
	for p, v := range rate {
		if demand[p] > 0 {
			x = append(x, v)
		}
	}
	if len(x) == 0 {
		return math.NaN()
	}
	return metrics.Jain(x)
}

// minSample is the lowest per-sample total rate (Mbps) of a tenant over w.
func (r *run) minSample(w window, tenant string) float64 {
	low := math.Inf(1)
	for _, s := range r.in.Samples {
		if !w.has(s.T) {
			continue
		}
		sum := 0.0
		for i, p := range r.in.Pairs {
			if p.Tenant == tenant {
				sum += s.Pairs[i].Rate / 1e6
			}
		}
		low = math.Min(low, sum)
	}
	return low
}

// receivers returns the mean received rate (Mbps) over w of every VM that
// receives in the tenant's pairs accepted by pick, by VM name.
func (r *run) receivers(w window, pick func(p metrics.Pair) bool) map[string]float64 {
	rate, _ := r.pairMeans(w, pick)
	out := map[string]float64{}
	for p, v := range rate {
		out[p.Dst] += v
	}
	return out
}

// mechanisms are the mechanisms the reproductions compare.
func mechanisms() []string {
	m := []string{"none", "static", "seawall"}
	if slices.Contains(all.Names(), "gatekeeper") {
		m = append(m, "gatekeeper")
	}
	return append(m, "elasticswitch")
}

// quantile is the q-quantile (nearest rank) of sorted x.
func quantile(x []float64, q float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(x)))) - 1
	return x[min(max(i, 0), len(x)-1)]
}

func isReducer(vm string) bool { return strings.Contains(vm, "-r") }
