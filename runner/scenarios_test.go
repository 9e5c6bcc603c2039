package runner_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/runner"
)

func runScenario(t *testing.T, file, mechanism string) *eval.Report {
	t.Helper()
	s, err := runner.Load(filepath.Join("..", "scenarios", file))
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.Run(context.Background(), s, mechanism, runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tenant(t *testing.T, r *eval.Report, name string) eval.TenantReport {
	t.Helper()
	for _, x := range r.Tenants {
		if x.Name == name {
			return x
		}
	}
	t.Fatalf("no tenant %q in report", name)
	return eval.TenantReport{}
}

// Scenario (a): without protection the tenant with 4x the connections takes
// ~80% of the shared link and the other falls below its guarantee.
func TestFig3NetworkNone(t *testing.T) {
	r := runScenario(t, "pulsar-fig3-network.yaml", "none")
	a, b := tenant(t, r, "A"), tenant(t, r, "B")
	share := b.MeanThroughput / (a.MeanThroughput + b.MeanThroughput)
	if math.Abs(share-0.8) > 0.02 {
		t.Errorf("aggressive tenant's share %.3f, want ~0.8", share)
	}
	if a.MeanThroughput >= 450*0.95 || a.Compliance > 0.05 {
		t.Errorf("tenant A got %.1f Mbps (compliance %.2f); it should be squeezed below its 450 Mbps guarantee", a.MeanThroughput, a.Compliance)
	}
	if r.WorkConservation < 0.99 {
		t.Errorf("no protection is work-conserving here, got %.3f", r.WorkConservation)
	}
}

// Scenario (a) under static: both held at their guarantees.
func TestFig3NetworkStatic(t *testing.T) {
	r := runScenario(t, "pulsar-fig3-network.yaml", "static")
	for _, name := range []string{"A", "B"} {
		x := tenant(t, r, name)
		if math.Abs(x.MeanThroughput-450) > 1 || x.Compliance < 0.99 {
			t.Errorf("tenant %s: %.1f Mbps, compliance %.2f; want 450 and 1", name, x.MeanThroughput, x.Compliance)
		}
	}
}

// Scenario (b): static keeps the busy tenant at its guarantee while the
// other is idle, so work conservation falls well below 1.
func TestStaticIdle(t *testing.T) {
	r := runScenario(t, "static-idle.yaml", "")
	a := tenant(t, r, "A")
	if a.Compliance < 0.99 {
		t.Errorf("tenant A compliance %.2f under static, want 1", a.Compliance)
	}
	if math.Abs(a.MeanThroughput-450) > 1 {
		t.Errorf("tenant A mean %.1f Mbps, want 450 throughout (also when B is idle)", a.MeanThroughput)
	}
	// Busy phase: 900 of an ideal 1000; idle phase: 450 of 1000.
	if r.WorkConservation > 0.8 || r.WorkConservation < 0.6 {
		t.Errorf("work conservation %.3f, want ≈ (900+450)/2000 = 0.675", r.WorkConservation)
	}
}

func TestRunAndReportWritesFiles(t *testing.T) {
	s, err := runner.Load(filepath.Join("..", "scenarios", "pulsar-fig3-network.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := runner.RunAndReport(context.Background(), s, []string{"none", "static"}, dir, true, runner.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"comparison.md", "comparison.png", "comparison.svg", "none/report.json", "static/throughput.png", "static/tenants.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	// An unknown mechanism fails before anything is written.
	dir2 := filepath.Join(t.TempDir(), "out2")
	if _, err := runner.RunAndReport(context.Background(), s, []string{"none", "nosuch"}, dir2, false, runner.Options{}); err == nil {
		t.Fatal("unknown mechanism accepted")
	}
	if _, err := os.Stat(dir2); !os.IsNotExist(err) {
		t.Errorf("failed run left %s behind", dir2)
	}
}
