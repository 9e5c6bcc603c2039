package metrics

import (
	"strings"
	"testing"
	"time"
)

// requestsOnly is a run with request flows only (no VM pairs): two
// tenants at one appliance with guarantees of 100 tokens/s each.
func requestsOnly(tokens [][2]float64, busy []float64) Input {
	in := Input{
		Scenario: "appliance", Mechanism: "test", Interval: time.Second, Units: "Mbps", UnitScale: mbps,
		Tenants:      []Tenant{{Name: "A", VMs: []VM{sym("a1", 0)}}, {Name: "B", VMs: []VM{sym("b1", 0)}}},
		RequestFlows: []RequestFlow{{Tenant: "A", Src: "a1", Appliance: "kv"}, {Tenant: "B", Src: "b1", Appliance: "kv"}},
		ApplianceGuarantees: map[string]map[string]float64{
			"A": {"kv": 100}, "B": {"kv": 100},
		},
		TokenScale: 1,
		Appliances: []string{"kv"},
	}
	for i, tk := range tokens {
		in.Samples = append(in.Samples, Sample{
			T:             time.Duration(i+1) * time.Second,
			Requests:      []RequestSample{{Requests: tk[0] / 10, Tokens: tk[0]}, {Requests: tk[1] / 10, Tokens: tk[1]}},
			ApplianceBusy: []float64{busy[i]},
		})
	}
	return in
}

func TestVDCComplianceAndUtilization(t *testing.T) {
	tests := []struct {
		name     string
		tokens   [][2]float64
		busy     []float64
		wantVDC  float64
		wantBusy float64
	}{
		// A is served in both samples, B in one of two: 3 of 4.
		{"one miss", [][2]float64{{150, 50}, {120, 96}}, []float64{1, 0.5}, 0.75, 0.75},
		// B idle in the second sample: not counted.
		{"idle not counted", [][2]float64{{150, 100}, {200, 0}}, []float64{1, 1}, 1, 1},
		{"all missed", [][2]float64{{10, 10}}, []float64{0.1}, 0, 0.1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Evaluate(requestsOnly(tc.tokens, tc.busy))
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.VDCCompliance, tc.wantVDC, 1e-9) {
				t.Errorf("VDC compliance %.3f, want %.3f", r.VDCCompliance, tc.wantVDC)
			}
			if len(r.ApplianceUse) != 1 || !near(r.ApplianceUse[0].Mean, tc.wantBusy, 1e-9) {
				t.Errorf("utilization %+v, want mean %.3f", r.ApplianceUse, tc.wantBusy)
			}
			// No VM pairs: the summary says the network figures do not
			// apply rather than printing 100% of nothing.
			md := string(summary(r))
			if !strings.Contains(md, "No VM-to-VM traffic") || strings.Contains(md, "| work conservation | guarantee compliance") {
				t.Errorf("summary of a run without VM pairs:\n%s", md)
			}
			c, err := Compare([]*Report{r})
			if err != nil {
				t.Fatal(err)
			}
			if cm := string(comparisonMD(c)); !strings.Contains(cm, "| test | "+pct(tc.wantVDC)+" | n/a | n/a | n/a |") {
				t.Errorf("comparison:\n%s", cm)
			}
		})
	}
}

func TestApplianceBusyMismatch(t *testing.T) {
	in := requestsOnly([][2]float64{{1, 1}}, []float64{1})
	in.Samples[0].ApplianceBusy = nil
	if _, err := Evaluate(in); err == nil || !strings.Contains(err.Error(), "appliance utilizations") {
		t.Errorf("err = %v, want a mismatch error", err)
	}
}

func TestApplianceCSV(t *testing.T) {
	in := requestsOnly([][2]float64{{150, 50}, {120, 96}}, []float64{1, 0.5})
	in.Samples[0].ApplianceCapacity = []float64{400}
	in.Samples[1].ApplianceCapacity = []float64{0}
	in.Estimates = []Estimate{{T: time.Second, Appliance: "kv", Tokens: 380}}
	r, err := Evaluate(in)
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
	var reps []*Report
	for _, tk := range [][2]float64{{150, 50}, {100, 100}} {
		r, err := Evaluate(requestsOnly([][2]float64{tk}, []float64{1}))
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
