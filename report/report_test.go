package report

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/eval/evaltest"
)

var inf = math.Inf(1)

// demoReport evaluates a small run of two tenants with on/off demand and
// some flows.
func demoReport(t testing.TB, mechanism string, capX float64) *eval.Report {
	in := evaltest.ManyToOne(3)
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
		evaltest.AddSample(&in, [2]float64{x, inf}, [2]float64{y, yd}, [2]float64{y, yd}, [2]float64{y, yd})
	}
	for i := 0; i < 200; i++ {
		tn := "X"
		if i%2 == 1 {
			tn = "Y"
		}
		in.FCTs = append(in.FCTs, eval.FCT{Tenant: tn, Duration: time.Duration(1+i*i) * time.Millisecond})
	}
	r, err := eval.Evaluate(in)
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
	var back eval.Report
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
	// report.json, summary.md, timeseries.csv and report.html (not a plot:
	// written with or without them)
	if ents, _ := os.ReadDir(dir2); len(ents) != 4 {
		t.Errorf("without plots: %d files, want 4", len(ents))
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
		bad.Tenants = append([]eval.TenantReport(nil), r.Tenants...)
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
	reports := []*eval.Report{demoReport(t, "none", inf), demoReport(t, "static", 450), demoReport(t, "elasticswitch", inf)}
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
	if c.Mechanisms[1].WorkConservation != reports[1].WorkConservation || reports[1].WorkConservation >= 1 {
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
	if err := WriteComparison(dir, []*eval.Report{reports[0], &other}, false); err == nil || !strings.Contains(err.Error(), "Gbps") {
		t.Errorf("mixed units: %v", err)
	}
	// Reports read back from JSON (no series) still compare and write.
	var back eval.Report
	js, _ := json.Marshal(reports[0])
	_ = json.Unmarshal(js, &back)
	if err := WriteReport(filepath.Join(t.TempDir(), "back"), &back, true); err != nil {
		t.Errorf("report from JSON: %v", err)
	}
}
