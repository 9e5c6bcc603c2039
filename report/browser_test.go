package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/report"
	"github.com/bulkhead-dc/bulkhead/runner"
)

// chromiumBin finds headless Chromium; the browser tests fail (never skip)
// without it.
func chromiumBin(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: the report.html browser tests need it (apt-get install -y chromium; scripts/test installs it)")
	return ""
}

// openInBrowser loads page in headless Chromium with no network (every
// proxied request goes to a closed port, on top of the page's own
// Content-Security-Policy), lets its scripts run and returns the DOM after
// them and Chromium's log of console messages.
func openInBrowser(t *testing.T, page string) (dom, console string) {
	t.Helper()
	bin := chromiumBin(t)
	abs, err := filepath.Abs(page)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000",
		"--enable-logging=stderr", "--v=0", "--dump-dom", "file://"+abs)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium on %s: %v\n%s", page, err, stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "CONSOLE") || strings.Contains(l, "Uncaught") {
			lines = append(lines, l)
		}
	}
	return stdout.String(), strings.Join(lines, "\n")
}

var (
	chartRE  = regexp.MustCompile(`<div class="chart" id="chart-([^"]+)"([^>]*)>`)
	attrRE   = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
	bodyRE   = regexp.MustCompile(`<body([^>]*)>`)
	canvasRE = regexp.MustCompile(`<canvas`)
)

func attrs(s string) map[string]string {
	m := map[string]string{}
	for _, a := range attrRE.FindAllStringSubmatch(s, -1) {
		m[a[1]] = html.UnescapeString(a[2])
	}
	return m
}

// checkDrawn opens page and checks that its scripts ran without a console
// message, drew every chart, and that every label in want is a series
// uPlot drew.
func checkDrawn(t *testing.T, page string, want []string) {
	t.Helper()
	dom, console := openInBrowser(t, page)
	if console != "" {
		t.Errorf("%s: console messages:\n%s", page, console)
	}
	if strings.Contains(dom, `data-errors=`) {
		t.Errorf("%s: the page recorded errors: %s", page, regexp.MustCompile(`data-errors="[^"]*"`).FindString(dom))
	}
	bm := bodyRE.FindStringSubmatch(dom)
	if bm == nil {
		t.Fatalf("%s: no body in the DOM:\n%.500s", page, dom)
	}
	body := attrs(bm[1])
	charts := chartRE.FindAllStringSubmatch(dom, -1)
	if body["data-status"] != "drawn" || body["data-charts"] != strconv.Itoa(len(charts)) || len(charts) == 0 {
		t.Errorf("%s: body %v, %d charts", page, body, len(charts))
	}
	if n := len(canvasRE.FindAllString(dom, -1)); n != len(charts) {
		t.Errorf("%s: %d canvases for %d charts", page, n, len(charts))
	}
	drawn := map[string]bool{}
	for _, c := range charts {
		a := attrs(c[2])
		if a["data-drawn"] != "1" {
			t.Errorf("%s: chart %s not drawn", page, c[1])
			continue
		}
		var labels []string
		if err := json.Unmarshal([]byte(a["data-series"]), &labels); err != nil {
			t.Errorf("%s: chart %s: data-series %q: %v", page, c[1], a["data-series"], err)
		}
		for _, l := range labels {
			drawn[l] = true
			if !strings.Contains(dom, `<div class="u-label">`+html.EscapeString(l)+`</div>`) {
				t.Errorf("%s: chart %s: %q not in its legend", page, c[1], l)
			}
		}
	}
	for _, w := range want {
		if !drawn[w] {
			t.Errorf("%s: series %q not drawn (drawn: %v)", page, w, drawn)
		}
	}
}

func runShipped(t *testing.T, scenario string, mechanisms []string) (string, []*eval.Report) {
	t.Helper()
	s, err := runner.Load(filepath.Join("..", "scenarios", scenario))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	reps, err := runner.RunAndReport(context.Background(), s, mechanisms, dir, false, runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, reps
}

// The report.html of a shipped network scenario draws every tenant's
// throughput against its guarantee and ideal, offline, without errors.
func TestReportHTMLInBrowser(t *testing.T) {
	dir, reps := runShipped(t, "pulsar-fig3-network.yaml", nil)
	var want []string
	for _, tn := range reps[0].Tenants {
		want = append(want, tn.Name, tn.Name+" guarantee", tn.Name+" ideal")
	}
	checkDrawn(t, filepath.Join(dir, report.ReportHTML), want)
}

// With appliances: every tenant at its appliance against its VDC
// guarantee, the capacity estimate and the measured capacity.
func TestReportHTMLAppliancesInBrowser(t *testing.T) {
	dir, reps := runShipped(t, "pulsar-fig12.yaml", nil)
	want := []string{"capacity estimate", "measured capacity (mix served)", "VDC guarantee"}
	for _, a := range reps[0].Appliances {
		want = append(want, a.Tenant+" @ "+a.Appliance, a.Tenant+" VDC guarantee")
	}
	checkDrawn(t, filepath.Join(dir, report.ReportHTML), want)
}

// --compare: one report.html in the comparison directory with the
// mechanisms side by side, and each run's own.
func TestComparisonHTMLInBrowser(t *testing.T) {
	mechs := []string{"none", "static"}
	dir, reps := runShipped(t, "pulsar-fig3-network.yaml", mechs)
	want := append([]string{"guarantee"}, mechs...)
	for _, tn := range reps[0].Tenants {
		for _, m := range mechs {
			want = append(want, fmt.Sprintf("%s · %s", tn.Name, m))
		}
	}
	checkDrawn(t, filepath.Join(dir, report.ReportHTML), want)
	if _, err := os.Stat(filepath.Join(dir, "static", report.ReportHTML)); err != nil {
		t.Error(err)
	}
}
