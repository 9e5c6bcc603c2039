package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/eval/evaltest"
	"github.com/bulkhead-dc/bulkhead/internal/uplot"
)

// htmlDataOf checks that page is self-contained (no resource fetched from
// anywhere: no src/href/url() to a network address, nothing loaded from a
// file either, uPlot and the page's script inline) and returns its parsed
// data block.
func htmlDataOf(t *testing.T, page string) htmlData {
	t.Helper()
	if m := regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*(https?:)?//`).FindString(page); m != "" {
		t.Errorf("report.html refers to the network: %q", m)
	}
	if m := regexp.MustCompile(`(?i)<(script|link|img|iframe)[^>]*\s(src|href)\s*=`).FindString(page); m != "" {
		t.Errorf("report.html loads a resource: %q", m)
	}
	if m := regexp.MustCompile(`(?i)url\(\s*["']?(https?:)?//`).FindString(page); m != "" {
		t.Errorf("report.html's style refers to the network: %q", m)
	}
	for _, want := range []string{"Content-Security-Policy", "default-src 'none'", strings.TrimSpace(uplot.JS()[:200]), "uplot", "report-data"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	m := regexp.MustCompile(`(?s)<script type="application/json" id="report-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("report.html has no data block")
	}
	var d htmlData
	if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
		t.Fatalf("data block: %v\n%.300s", err, m[1])
	}
	for _, c := range d.Charts {
		for _, s := range c.Series {
			if len(s.Values) != len(c.X) {
				t.Errorf("chart %s series %s: %d values for %d x", c.ID, s.Label, len(s.Values), len(c.X))
			}
		}
	}
	return d
}

// seriesOf lists, per tenant, the charts that draw a series of it (by
// label) and checks that each such series has values.
func seriesOf(d htmlData, kind string) map[string][]string {
	out := map[string][]string{}
	for _, c := range d.Charts {
		if c.Kind != kind {
			continue
		}
		for _, s := range c.Series {
			if s.Tenant != "" && s.Label == s.Tenant || strings.HasPrefix(s.Label, s.Tenant+" @ ") || strings.HasPrefix(s.Label, s.Tenant+" · ") {
				nonNull := false
				for _, v := range s.Values {
					nonNull = nonNull || v == v
				}
				if nonNull {
					out[s.Tenant] = append(out[s.Tenant], c.ID)
				}
			}
		}
	}
	return out
}

func TestReportHTML(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := demoReport(t, "test", inf)
	r.Invalid = []string{"a <script>alert(1)</script> note"}
	if err := WriteReport(dir, r, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportHTML))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if strings.Contains(page, "<script>alert(1)") {
		t.Error("report text not escaped")
	}
	d := htmlDataOf(t, page)
	if len(d.Tenants) != len(r.Tenants) {
		t.Errorf("tenants %v", d.Tenants)
	}
	over := seriesOf(d, "time")
	for _, tn := range r.Tenants {
		if len(over[tn.Name]) < 2 { // the overview and its own chart
			t.Errorf("tenant %s: its throughput is drawn over time in %v", tn.Name, over[tn.Name])
		}
		if !strings.Contains(page, "<td>"+tn.Name+"</td>") {
			t.Errorf("tenant %s not in the table", tn.Name)
		}
		var own *htmlChart
		for i, c := range d.Charts {
			if c.Kind == "time" && len(c.Series) == 3 && c.Series[0].Tenant == tn.Name {
				own = &d.Charts[i]
			}
		}
		if own == nil || own.Series[1].Label != tn.Name+" guarantee" || own.Series[2].Label != tn.Name+" ideal" || len(own.X) != len(r.Times) {
			t.Errorf("tenant %s: no chart of its throughput against its guarantee and ideal: %+v", tn.Name, own)
		}
	}
	if r.Worst == nil || !strings.Contains(page, "Worst tenant: <b>"+r.Worst.Name+"</b>") {
		t.Errorf("worst tenant not headlined")
	}
}

func TestReportHTMLAppliances(t *testing.T) {
	in := evaltest.RequestsOnly([][2]float64{{150, 50}, {120, 96}}, []float64{1, 0.5})
	in.Samples[0].ApplianceCapacity = []float64{400}
	in.Samples[1].ApplianceCapacity = []float64{0}
	in.Estimates = []eval.Estimate{{T: time.Second, Appliance: "kv", Tokens: 380}}
	r, err := eval.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := reportHTML(r)
	if err != nil {
		t.Fatal(err)
	}
	d := htmlDataOf(t, string(b))
	over := seriesOf(d, "time")
	for _, a := range r.Appliances {
		if len(over[a.Tenant]) == 0 {
			t.Errorf("tenant %s at %s not drawn over time", a.Tenant, a.Appliance)
		}
	}
	labels := map[string]bool{}
	for _, c := range d.Charts {
		for _, s := range c.Series {
			labels[s.Label] = true
		}
	}
	for _, want := range []string{"capacity estimate", "measured capacity (mix served)", "VDC guarantee", "A VDC guarantee"} {
		if !labels[want] {
			t.Errorf("no series %q in %v", want, labels)
		}
	}
	if !strings.Contains(string(b), "Worst tenant at an appliance") {
		t.Error("worst tenant at an appliance not headlined")
	}
	// comparison of appliance runs
	c, err := Compare([]*eval.Report{r, r})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := comparisonHTML(c, []*eval.Report{r, r})
	if err != nil {
		t.Fatal(err)
	}
	htmlDataOf(t, string(cb))
}

func TestComparisonHTML(t *testing.T) {
	reports := []*eval.Report{demoReport(t, "none", inf), demoReport(t, "static", 450)}
	dir := filepath.Join(t.TempDir(), "cmp")
	if err := WriteComparison(dir, reports, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportHTML))
	if err != nil {
		t.Fatal(err)
	}
	d := htmlDataOf(t, string(b))
	if d.Kind != "comparison" {
		t.Errorf("kind %q", d.Kind)
	}
	var mech, means *htmlChart
	for i, c := range d.Charts {
		switch c.ID {
		case "mechanisms":
			mech = &d.Charts[i]
		case "tenant-means":
			means = &d.Charts[i]
		}
	}
	if mech == nil || len(mech.Series) != 2 || mech.Series[1].Label != "static" || strings.Join(mech.Groups, ",") != "worst tenant's compliance,compliance,work conservation" {
		t.Errorf("mechanisms chart %+v", mech)
	}
	if means == nil || strings.Join(means.Groups, ",") != "X,Y" || len(means.Series) != 3 {
		t.Errorf("tenant means chart %+v", means)
	}
	over := seriesOf(d, "time")
	for _, tn := range reports[0].Tenants {
		if len(over[tn.Name]) != 2 { // one series per mechanism in its chart
			t.Errorf("tenant %s over time: %v", tn.Name, over[tn.Name])
		}
	}
	if !strings.Contains(string(b), "Worst tenant — none: <b>") {
		t.Error("worst tenant per mechanism not headlined")
	}
}
