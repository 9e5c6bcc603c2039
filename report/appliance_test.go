package report

import (
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/eval/evaltest"
)

// A run without VM pairs: the summary says the network figures do not
// apply rather than printing 100% of nothing, both headline the worst
// tenant at an appliance, and the comparison gives its VDC compliance and
// that tenant only.
func TestApplianceSummary(t *testing.T) {
	r, err := eval.Evaluate(evaltest.RequestsOnly([][2]float64{{150, 50}, {120, 96}}, []float64{1, 0.5}))
	if err != nil {
		t.Fatal(err)
	}
	md := string(summary(r))
	if !strings.Contains(md, "No VM-to-VM traffic") || strings.Contains(md, "| work conservation | guarantee compliance") {
		t.Errorf("summary of a run without VM pairs:\n%s", md)
	}
	if !strings.Contains(md, "**Worst tenant at an appliance: B at kv**, VDC compliance 50.0%") {
		t.Errorf("summary does not headline the worst tenant at an appliance:\n%s", md)
	}
	c, err := Compare([]*eval.Report{r})
	if err != nil {
		t.Fatal(err)
	}
	if cm := string(comparisonMD(c)); !strings.Contains(cm, "| test | 75.0% | B at kv 50.0% | n/a | n/a | n/a |") {
		t.Errorf("comparison:\n%s", cm)
	}
}

func TestApplianceCSV(t *testing.T) {
	in := evaltest.RequestsOnly([][2]float64{{150, 50}, {120, 96}}, []float64{1, 0.5})
	in.Samples[0].ApplianceCapacity = []float64{400}
	in.Samples[1].ApplianceCapacity = []float64{0}
	in.Estimates = []eval.Estimate{{T: time.Second, Appliance: "kv", Tokens: 380}}
	r, err := eval.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	got := string(applianceCSV(r))
	for _, want := range []string{
		"t_s,appliance,what,tenant,value\n",
		"1,kv,throughput,B,50\n", "2,kv,guarantee,A,100\n",
		"2,kv,utilization,,0.5\n", "1,kv,capacity,,400\n", "1,kv,estimate,,380\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("appliances.csv lacks %q:\n%s", want, got)
		}
	}
}

// A comparison of runs without VM pairs plots the tenants' end-to-end
// throughput at their appliances.
func TestApplianceComparisonPlot(t *testing.T) {
	var reps []*eval.Report
	for _, tk := range [][2]float64{{150, 50}, {100, 100}} {
		r, err := eval.Evaluate(evaltest.RequestsOnly([][2]float64{tk}, []float64{1}))
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	if !appliancesOnly(reps) {
		t.Fatal("appliancesOnly = false for runs with request flows only")
	}
	c, err := Compare(reps)
	if err != nil {
		t.Fatal(err)
	}
	f, err := comparisonPlot(c, reps)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.p.X.Label.Text; got != "tenant @ appliance" {
		t.Errorf("x axis %q, want the tenant @ appliance groups", got)
	}
	if err := WriteComparison(t.TempDir(), reps, true); err != nil {
		t.Fatal(err)
	}
}
