package analysis

// Tolerance to control-message loss (`bulkhead analyze loss`): shipped
// scenarios with a protected tenant and an aggressor, simulated with a
// growing fraction of the messages between host agents and controllers
// dropped (network.control_loss, drawn from the scenario's seed), under
// every mechanism whose agents exchange messages in the simulator. Each run
// gives the protected tenant's compliance and the worst tenant's; the
// results are a CSV, Markdown tables and one figure per scenario.

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/report"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// LossCase is a scenario of the loss analysis and the tenant it protects
// from the aggressor.
type LossCase struct {
	Scenario  string // scenarios/<Scenario>.yaml
	Protected string // tenant name
}

// LossCases returns the default cases: Gatekeeper's full link (A, 500 Mbps
// guaranteed, against C's UDP blast) and ElasticSwitch's Fig. 6 with UDP (X's
// TCP flow against up to 300 UDP senders of Y).
func LossCases() []LossCase {
	return []LossCase{{"gatekeeper-full-link", "A"}, {"elasticswitch-fig6-udp", "X"}}
}

// LossLevels returns the default fractions of control messages lost: 0,
// 0.1, …, 0.9.
func LossLevels() []float64 {
	var l []float64
	for k := range 10 {
		l = append(l, float64(k)/10)
	}
	return l
}

// LossRun is one mechanism of the loss analysis: a mechanism, with
// parameters when Params is not nil (they replace the scenario's), under a
// label for the tables and figures.
type LossRun struct {
	Label, Mechanism string
	Params           map[string]any
}

// LossRuns returns the default runs: every mechanism whose agents exchange
// messages in the simulator (ElasticSwitch's remote guarantees, Gatekeeper's
// congestion notifications, QShare's ElasticSwitch below its queues), Seawall
// as the flat reference (its congestion signal is the sender's own losses:
// it sends none), and Gatekeeper one-shot: repeats and heartbeats off (one
// notification per decision, no silence detection: the paper's protocol,
// as before soft state). Central controllers (Pulsar,
// hose-fill, DRX) are left out: their messages are not lost.
func LossRuns() []LossRun {
	return []LossRun{
		{Label: "elasticswitch", Mechanism: "elasticswitch"},
		{Label: "gatekeeper", Mechanism: "gatekeeper"},
		{Label: "seawall", Mechanism: "seawall"},
		{Label: "qshare", Mechanism: "qshare"},
		{Label: "gatekeeper (one-shot)", Mechanism: "gatekeeper", Params: map[string]any{"repeat": false, "peer_timeout": "0s"}},
	}
}

// LossOptions configure Loss; the zero value runs LossCases at LossLevels
// under LossRuns on ./scenarios.
type LossOptions struct {
	Scenarios string     // directory of the scenario files (default "scenarios")
	Cases     []LossCase // default LossCases
	Levels    []float64  // fractions of control messages lost (default LossLevels)
	Runs      []LossRun  // default LossRuns
	// Progress, if set, receives a line per scenario and loss level.
	Progress io.Writer
	Logger   *slog.Logger // debug output (default: none)
}

// LossPoint is one run of the loss analysis.
type LossPoint struct {
	Scenario, Protected string
	Loss                float64
	Label               string // LossRun.Label
	// Compliance of the protected tenant, and the worst tenant's name and
	// compliance (eval.Report.Worst; "" and NaN when no tenant had VMs).
	ProtectedCompliance float64
	Worst               string
	WorstCompliance     float64
}

// Loss simulates every case at every loss level under every run and
// returns the points, by case, level and run in the options' order. The
// options and scenario files are checked before anything runs.
func Loss(ctx context.Context, o LossOptions) ([]LossPoint, error) {
	if o.Scenarios == "" {
		o.Scenarios = "scenarios"
	}
	if len(o.Cases) == 0 {
		o.Cases = LossCases()
	}
	if len(o.Levels) == 0 {
		o.Levels = LossLevels()
	}
	if len(o.Runs) == 0 {
		o.Runs = LossRuns()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	for _, l := range o.Levels {
		if !(l >= 0 && l <= 1) {
			return nil, fmt.Errorf("loss analysis: loss %g is not a fraction in [0, 1]", l)
		}
	}
	known := all.Names()
	for i, r := range o.Runs {
		if !slices.Contains(known, r.Mechanism) {
			return nil, fmt.Errorf("loss analysis: unknown mechanism %q (known: %s)", r.Mechanism, strings.Join(known, ", "))
		}
		if slices.ContainsFunc(o.Runs[:i], func(q LossRun) bool { return q.Label == r.Label }) {
			return nil, fmt.Errorf("loss analysis: run %q given twice", r.Label)
		}
	}
	for _, c := range o.Cases {
		sc, err := spec.Load(filepath.Join(o.Scenarios, c.Scenario+".yaml"))
		if err != nil {
			return nil, fmt.Errorf("loss analysis: %w", err)
		}
		if !slices.ContainsFunc(sc.Tenants, func(t spec.Tenant) bool { return t.Name == c.Protected }) {
			return nil, fmt.Errorf("loss analysis: %s: no tenant %q to protect", c.Scenario, c.Protected)
		}
	}
	var out []LossPoint
	start, total := time.Now(), len(o.Cases)*len(o.Levels)
	for _, c := range o.Cases {
		for _, l := range o.Levels {
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "analyze loss [%d/%d]: %s at %g%% control-message loss, %d runs (%.0f s elapsed)\n",
					len(out)/len(o.Runs)+1, total, c.Scenario, percent(l), len(o.Runs), time.Since(start).Seconds())
			}
			for _, r := range o.Runs {
				p, err := lossRun(ctx, o, c, l, r)
				if err != nil {
					return nil, fmt.Errorf("loss analysis: %s at loss %g under %s: %w", c.Scenario, l, r.Label, err)
				}
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func lossRun(ctx context.Context, o LossOptions, c LossCase, loss float64, r LossRun) (LossPoint, error) {
	edit := func(sc *spec.Scenario) {
		sc.Network.ControlLoss = loss
		if r.Params != nil {
			var params spec.Params
			if sc.Mechanism.Name == r.Mechanism {
				params = maps.Clone(sc.Mechanism.Params)
			}
			if params == nil {
				params = spec.Params{}
			}
			maps.Copy(params, r.Params)
			sc.Mechanism = spec.Mechanism{Name: r.Mechanism, Params: params}
		}
	}
	start := time.Now()
	s, err := Simulate(ctx, o.Scenarios, c.Scenario+".yaml", r.Mechanism, SimulateOptions{Edit: edit, Logger: o.Logger})
	if err != nil {
		return LossPoint{}, err
	}
	o.Logger.Debug("simulated", "scenario", c.Scenario, "loss", loss, "run", r.Label, "wall", time.Since(start))
	rep := s.Report
	i := slices.IndexFunc(rep.Tenants, func(t eval.TenantReport) bool { return t.Name == c.Protected })
	if i < 0 {
		return LossPoint{}, fmt.Errorf("no tenant %q in the report", c.Protected)
	}
	p := LossPoint{Scenario: c.Scenario, Protected: c.Protected, Loss: loss, Label: r.Label,
		ProtectedCompliance: rep.Tenants[i].Compliance, WorstCompliance: math.NaN()}
	if rep.Worst != nil {
		p.Worst, p.WorstCompliance = rep.Worst.Name, rep.Worst.Compliance
	}
	return p, nil
}

// percent is a fraction in percent, without the float's noise (0.7 → 70).
func percent(f float64) float64 { return math.Round(1e6*100*f) / 1e6 }

// LossCSV renders the points as CSV: scenario, protected tenant, loss,
// mechanism (the run's label), protected tenant's compliance, worst
// tenant's name and compliance; numbers in full precision, empty when
// unknown.
func LossCSV(points []LossPoint) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	g := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	w.Write([]string{"scenario", "protected", "loss", "mechanism", "protected_compliance", "worst_tenant", "worst_compliance"})
	for _, p := range points {
		w.Write([]string{p.Scenario, p.Protected, g(p.Loss), p.Label, g(p.ProtectedCompliance), p.Worst, g(p.WorstCompliance)})
	}
	w.Flush() // writes to memory: no error
	return b.Bytes()
}

// lossGroups splits points by scenario, in order, and lists the levels and
// labels in order of appearance.
func lossGroups(points []LossPoint) (scens []LossCase, levels []float64, labels []string) {
	for _, p := range points {
		if c := (LossCase{p.Scenario, p.Protected}); !slices.Contains(scens, c) {
			scens = append(scens, c)
		}
		if !slices.Contains(levels, p.Loss) {
			levels = append(levels, p.Loss)
		}
		if !slices.Contains(labels, p.Label) {
			labels = append(labels, p.Label)
		}
	}
	return scens, levels, labels
}

// LossTables returns one table per scenario: a row per loss level, per
// mechanism the protected tenant's compliance / the worst tenant's name
// and compliance.
func LossTables(points []LossPoint) []Table {
	scens, levels, labels := lossGroups(points)
	var ts []Table
	for _, c := range scens {
		t := Table{Name: "loss-" + c.Scenario, Left: 1,
			Title: fmt.Sprintf("%s: compliance of the protected tenant %s / of the worst tenant (name), by fraction of control messages lost",
				c.Scenario, c.Protected),
			Header: slices.Concat([]string{"loss"}, labels)}
		for _, l := range levels {
			row := []string{fmt.Sprintf("%g%%", percent(l))}
			for _, lb := range labels {
				cell := "—"
				for _, p := range points {
					if p.Scenario == c.Scenario && p.Loss == l && p.Label == lb {
						cell = fmt.Sprintf("%s / %s %s", num(p.ProtectedCompliance), p.Worst, num(p.WorstCompliance))
					}
				}
				row = append(row, cell)
			}
			t.Rows = append(t.Rows, row)
		}
		ts = append(ts, t)
	}
	return ts
}

// LossPlots returns one figure per scenario, named loss-<scenario>: the
// protected tenant's compliance (solid) and the worst tenant's (dashed)
// against the loss in percent, one colour per mechanism.
func LossPlots(points []LossPoint) map[string]report.LinePlot {
	scens, levels, labels := lossGroups(points)
	var xt, yt []float64
	for _, l := range levels {
		xt = append(xt, percent(l))
	}
	for k := range 11 {
		yt = append(yt, float64(k)/10)
	}
	out := map[string]report.LinePlot{}
	for _, c := range scens {
		lp := report.LinePlot{
			Title:  fmt.Sprintf("%s: protected tenant %s (solid), worst tenant (dashed)", c.Scenario, c.Protected),
			XLabel: "control messages lost (%)", YLabel: "compliance",
			YMin: 0, YMax: 1.05, XTicks: xt, YTicks: yt,
		}
		for _, dashed := range []bool{false, true} {
			for _, lb := range labels {
				ln := report.Line{Name: lb, Dashed: dashed}
				for _, p := range points {
					if p.Scenario != c.Scenario || p.Label != lb {
						continue
					}
					ln.X = append(ln.X, percent(p.Loss))
					if dashed {
						ln.Y = append(ln.Y, p.WorstCompliance)
					} else {
						ln.Y = append(ln.Y, p.ProtectedCompliance)
					}
				}
				lp.Lines = append(lp.Lines, ln)
			}
		}
		out["loss-"+c.Scenario] = lp
	}
	return out
}

// WriteLoss writes the points into dir (created if needed): loss.csv,
// loss.md (LossTables) and loss-<scenario>.png/.svg (LossPlots).
func WriteLoss(dir string, points []LossPoint) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write loss analysis: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "loss.csv"), LossCSV(points), 0o644); err != nil {
		return fmt.Errorf("write loss analysis: %w", err)
	}
	var md []string
	for _, t := range LossTables(points) {
		md = append(md, t.Markdown())
	}
	if err := os.WriteFile(filepath.Join(dir, "loss.md"), []byte(strings.Join(md, "\n")), 0o644); err != nil {
		return fmt.Errorf("write loss analysis: %w", err)
	}
	plots := LossPlots(points)
	for _, name := range slices.Sorted(maps.Keys(plots)) {
		if err := report.WriteLinePlot(dir, name, plots[name]); err != nil {
			return fmt.Errorf("write loss analysis: %w", err)
		}
	}
	return nil
}
