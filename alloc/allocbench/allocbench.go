// Package allocbench is `bulkhead bench alloc --scale K`: every allocator
// of package alloc timed on alloc.PulsarScaleMixed at K times Pulsar
// §6.4's size (K × 24,000 flows, K × 4,200 resources), where flows'
// dominant resources differ (appliance-, uplink- and downlink-heavy
// flows), with the number of flows on which each allocator's answer
// differs from weighted max-min's — the proof that DRF and H-DRF are
// exercised, not weighted max-min under another name, as they are on
// alloc.PulsarScale. It also writes the instance as `bulkhead alloc`
// input (WriteJSON), for the whole-process measurement of
// scripts/alloc-bench.
package allocbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
)

// Options of Run.
type Options struct {
	Scale    int       // K, 1…alloc.MaxMixedScale
	Seed     int64     // seed of the instance
	Runs     int       // timed runs per allocator (≥ 1)
	Progress io.Writer // one line per run and per stage; nil for none
}

// Row is one allocator's figures.
type Row struct {
	Name        string
	Median, Min time.Duration
	// Differ counts the flows whose rate differs from weighted max-min's
	// by more than 1e-6 (relative); for the vector allocators the rate is
	// x times the flow's demand on its uplink.
	Differ int
}

// Result is what Run measured.
type Result struct {
	Scale     int
	Seed      int64
	Runs      int
	Flows     int
	Resources int
	// Flows whose dominant resource (in the vector problem) is an
	// appliance, a server's uplink, a server's downlink.
	DominantAppliance, DominantUplink, DominantDownlink int
	Build                                               time.Duration // generating the instance
	// PulsarScaleDiffer is Differ for DRF on alloc.PulsarScale(Seed) (1×),
	// where every flow's dominant resource is its uplink: 0.
	PulsarScaleDiffer int
	PulsarScaleFlows  int
	Rows              []Row
}

// Run builds the instance and times every allocator on it, Runs times
// each, in the calling goroutine (the caller sets GOMAXPROCS).
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Runs < 1 {
		return nil, fmt.Errorf("allocbench: runs: want at least 1, got %d", o.Runs)
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "allocbench: "+format+"\n", args...)
		}
	}
	start := time.Now()
	p, vp, err := alloc.PulsarScaleMixed(o.Seed, o.Scale)
	if err != nil {
		return nil, fmt.Errorf("allocbench: %w", err)
	}
	res := &Result{Scale: o.Scale, Seed: o.Seed, Runs: o.Runs, Flows: len(p.Flows), Resources: len(p.Resources), Build: time.Since(start)}
	for r, n := range alloc.DominantResources(vp) {
		switch {
		case strings.HasPrefix(vp.Resources[r].ID, "app"):
			res.DominantAppliance += n
		case r%2 == 0:
			res.DominantUplink += n
		default:
			res.DominantDownlink += n
		}
	}
	progress("%d× instance: %d flows, %d resources, built in %.2f s", o.Scale, res.Flows, res.Resources, res.Build.Seconds())

	// The comparison on PulsarScale (1×): DRF is weighted max-min there.
	pp, pvp := alloc.PulsarScale(o.Seed)
	pr, err := alloc.MaxMin(pp)
	if err != nil {
		return nil, fmt.Errorf("allocbench: PulsarScale: weighted max-min: %w", err)
	}
	px, err := alloc.DRF(pvp)
	if err != nil {
		return nil, fmt.Errorf("allocbench: PulsarScale: DRF: %w", err)
	}
	res.PulsarScaleDiffer, res.PulsarScaleFlows = alloc.Differing(pr, alloc.VectorRates(pp, pvp, px)), len(pp.Flows)

	var solver alloc.Solver
	solverRates := make([]float64, len(p.Flows))
	cases := []struct {
		name   string
		vector bool
		run    func() ([]float64, error)
	}{
		{"weighted max-min", false, func() ([]float64, error) { return alloc.MaxMin(p) }},
		{"weighted max-min (reused Solver)", false, func() ([]float64, error) { return solverRates, solver.Solve(p, solverRates) }},
		{"DRF", true, func() ([]float64, error) { return alloc.DRF(vp) }},
		{"H-DRF", true, func() ([]float64, error) { return alloc.HDRF(vp) }},
		{"first fit", true, func() ([]float64, error) { return alloc.FirstFit(vp) }},
	}
	var maxmin []float64
	for _, c := range cases {
		d := make([]time.Duration, o.Runs)
		var out []float64
		for i := range d {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("allocbench: %w", err)
			}
			t0 := time.Now()
			x, err := c.run()
			d[i] = time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("allocbench: %s: %w", c.name, err)
			}
			out = x
			progress("%d× %s: run %d/%d: %.1f ms", o.Scale, c.name, i+1, o.Runs, ms(d[i]))
		}
		slices.Sort(d)
		rates := out
		if c.vector {
			rates = alloc.VectorRates(p, vp, out)
		}
		if maxmin == nil {
			maxmin = slices.Clone(rates)
		}
		res.Rows = append(res.Rows, Row{Name: c.name, Median: d[len(d)/2], Min: d[0], Differ: alloc.Differing(maxmin, rates)})
	}
	return res, nil
}

// WriteMarkdown writes r as a table (one row per allocator) with the
// instance's description above it.
func WriteMarkdown(w io.Writer, r *Result) error {
	pct := func(n int) float64 { return 100 * float64(n) / float64(r.Flows) }
	var b bytes.Buffer
	fmt.Fprintf(&b, "PulsarScaleMixed %d× (seed %d): %d flows, %d resources; dominant resource: appliance %d (%.0f%%), uplink %d (%.0f%%), downlink %d (%.0f%%); median and min of %d runs\n\n",
		r.Scale, r.Seed, r.Flows, r.Resources, r.DominantAppliance, pct(r.DominantAppliance), r.DominantUplink, pct(r.DominantUplink),
		r.DominantDownlink, pct(r.DominantDownlink), r.Runs)
	fmt.Fprintln(&b, "| allocator | median | min | allocations/s | flows ≠ weighted max-min |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: | ---: |")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %.1f ms | %.1f ms | %.2f | %d (%.1f%%) |\n", row.Name, ms(row.Median), ms(row.Min),
			float64(time.Second)/float64(row.Median), row.Differ, pct(row.Differ))
	}
	fmt.Fprintf(&b, "\nOn PulsarScale (1×, every flow's dominant resource its uplink) DRF differs from weighted max-min on %d of %d flows.\n",
		r.PulsarScaleDiffer, r.PulsarScaleFlows)
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("allocbench: write: %w", err)
	}
	return nil
}

// Forms are the forms of WriteJSON.
func Forms() []string { return []string{"drf", "hdrf", "firstfit", "rate"} }

// WriteJSON writes PulsarScaleMixed(seed, scale) as `bulkhead alloc` input:
// the vector form for mechanism form ("drf", "hdrf", "firstfit"), or the
// rate form ("rate", every coefficient 1: the rate form names paths only).
func WriteJSON(w io.Writer, scale int, seed int64, form string) error {
	if !slices.Contains(Forms(), form) {
		return fmt.Errorf("allocbench: unknown form %q (want one of %v)", form, Forms())
	}
	p, vp, err := alloc.PulsarScaleMixed(seed, scale)
	if err != nil {
		return fmt.Errorf("allocbench: %w", err)
	}
	if form == "rate" {
		err = alloc.WriteRateJSON(w, alloc.UnitCoefs(p))
	} else {
		err = alloc.WriteVectorJSON(w, vp, form)
	}
	if err != nil {
		return fmt.Errorf("allocbench: %w", err)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
