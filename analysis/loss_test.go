package analysis_test

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/analysis"
)

// TestLoss runs the loss analysis on Gatekeeper's full link at two loss
// levels under the default runs, and checks
// the points and the files WriteLoss makes: a point per level and run in
// order; Seawall, which sends no messages, the same at every level; the
// Gatekeeper runs (whose notifications are lost) not; and the CSV, the
// Markdown table and the figures.
func TestLoss(t *testing.T) {
	var progress strings.Builder
	levels := []float64{0, 0.9}
	points, err := analysis.Loss(context.Background(), analysis.LossOptions{
		Scenarios: scenarios, Cases: []analysis.LossCase{{Scenario: "gatekeeper-full-link", Protected: "A"}},
		Levels: levels, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	runs := analysis.LossRuns()
	if got := strings.Count(progress.String(), "analyze loss ["); got != len(levels) {
		t.Errorf("%d progress lines for %d levels:\n%s", got, len(levels), progress.String())
	}
	if len(points) != len(levels)*len(runs) {
		t.Fatalf("%d points, want %d", len(points), len(levels)*len(runs))
	}
	at := map[string][]analysis.LossPoint{}
	for i, p := range points {
		l, r := levels[i/len(runs)], runs[i%len(runs)]
		if p.Scenario != "gatekeeper-full-link" || p.Protected != "A" || p.Loss != l || p.Label != r.Label {
			t.Errorf("point %d is %s/%s at %g under %s, want gatekeeper-full-link/A at %g under %s", i, p.Scenario, p.Protected, p.Loss, p.Label, l, r.Label)
		}
		if !(p.ProtectedCompliance >= 0 && p.ProtectedCompliance <= 1) || !(p.WorstCompliance <= p.ProtectedCompliance) || p.Worst == "" {
			t.Errorf("point %d (%s at %g): protected %g, worst %s %g", i, p.Label, p.Loss, p.ProtectedCompliance, p.Worst, p.WorstCompliance)
		}
		at[p.Label] = append(at[p.Label], p)
	}
	t.Log("\n" + analysis.LossTables(points)[0].Markdown())
	for _, c := range []struct {
		label string
		same  bool // the same results at both levels
	}{
		{"seawall", true},
		{"gatekeeper", false},
		{"gatekeeper (one-shot)", false},
	} {
		p := at[c.label]
		if len(p) != 2 {
			t.Fatalf("%s: %d points", c.label, len(p))
		}
		if same := p[0].ProtectedCompliance == p[1].ProtectedCompliance && p[0].WorstCompliance == p[1].WorstCompliance; same != c.same {
			t.Errorf("%s: protected %g / worst %g at loss 0, %g / %g at 0.9: same %v, want %v",
				c.label, p[0].ProtectedCompliance, p[0].WorstCompliance, p[1].ProtectedCompliance, p[1].WorstCompliance, same, c.same)
		}
	}

	dir := t.TempDir()
	if err := analysis.WriteLoss(dir, points); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "loss.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+len(points) || !slices.Equal(rows[0], []string{"scenario", "protected", "loss", "mechanism", "protected_compliance", "worst_tenant", "worst_compliance"}) {
		t.Fatalf("loss.csv: %d rows, header %v", len(rows), rows[0])
	}
	if r := rows[1+len(runs)]; r[2] != "0.9" || r[3] != runs[0].Label {
		t.Errorf("loss.csv row %d: %v, want loss 0.9 under %s", 1+len(runs), r, runs[0].Label)
	}
	md, err := os.ReadFile(filepath.Join(dir, "loss.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(md), "\n| "); got != 2+len(levels) {
		t.Errorf("loss.md: %d table lines, want header, separator and %d rows:\n%s", got, len(levels), md)
	}
	for _, r := range runs {
		if !strings.Contains(string(md), " "+r.Label+" |") {
			t.Errorf("loss.md: no column %s:\n%s", r.Label, md)
		}
	}
	for _, ext := range []string{"png", "svg"} {
		if fi, err := os.Stat(filepath.Join(dir, "loss-gatekeeper-full-link."+ext)); err != nil || fi.Size() == 0 {
			t.Errorf("figure .%s: %v", ext, err)
		}
	}
}

// TestLossErrors: bad options fail before anything runs, with errors that
// say what is wrong.
func TestLossErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		o    analysis.LossOptions
		want string
	}{
		{"no scenario", analysis.LossOptions{Scenarios: scenarios, Cases: []analysis.LossCase{{Scenario: "no-such", Protected: "A"}}}, "no-such.yaml"},
		{"no tenant", analysis.LossOptions{Scenarios: scenarios, Cases: []analysis.LossCase{{Scenario: "gatekeeper-full-link", Protected: "Z"}}}, `no tenant "Z"`},
		{"loss above 1", analysis.LossOptions{Scenarios: scenarios, Levels: []float64{0, 1.5}}, "1.5"},
		{"unknown mechanism", analysis.LossOptions{Scenarios: scenarios, Runs: []analysis.LossRun{{Label: "x", Mechanism: "no-such"}}}, `"no-such"`},
		{"label twice", analysis.LossOptions{Scenarios: scenarios, Runs: []analysis.LossRun{{Label: "x", Mechanism: "none"}, {Label: "x", Mechanism: "seawall"}}}, `"x" given twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var progress strings.Builder
			c.o.Progress = &progress
			_, err := analysis.Loss(context.Background(), c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one naming %s", err, c.want)
			}
			if progress.Len() > 0 {
				t.Errorf("ran before failing:\n%s", progress.String())
			}
		})
	}
}
