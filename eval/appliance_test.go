package eval_test

import (
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/eval/evaltest"
)

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
			r, err := eval.Evaluate(evaltest.RequestsOnly(tc.tokens, tc.busy))
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.VDCCompliance, tc.wantVDC, 1e-9) {
				t.Errorf("VDC compliance %.3f, want %.3f", r.VDCCompliance, tc.wantVDC)
			}
			if len(r.ApplianceUse) != 1 || !near(r.ApplianceUse[0].Mean, tc.wantBusy, 1e-9) {
				t.Errorf("utilization %+v, want mean %.3f", r.ApplianceUse, tc.wantBusy)
			}
		})
	}
}

func TestApplianceBusyMismatch(t *testing.T) {
	in := evaltest.RequestsOnly([][2]float64{{1, 1}}, []float64{1})
	in.Samples[0].ApplianceBusy = nil
	if _, err := eval.Evaluate(in); err == nil || !strings.Contains(err.Error(), "appliance utilizations") {
		t.Errorf("err = %v, want a mismatch error", err)
	}
}
