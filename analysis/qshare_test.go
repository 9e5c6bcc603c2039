package analysis_test

import (
	"context"
	"testing"

	"github.com/bulkhead-dc/bulkhead/analysis"
)

// TestQShareScaleSmall runs the large-scale analysis on a k = 4 fat-tree
// (16 servers) with few slots, 1:1 and 2:1, and checks its invariants:
// fractions in range, permanent tenants are dedicated in every round
// (nobody can pre-empt them), gains ≥ 1, QShare's utilization ≥ static's.
func TestQShareScaleSmall(t *testing.T) {
	rows, err := analysis.QShareScale(context.Background(), analysis.QShareScaleOptions{K: 4, Slots: 8, Ratios: []int{1, 2}, MeanVMs: 6, Rounds: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Logf("%+v", r)
		if r.Tenants == 0 || r.SlotLoad <= 0 {
			t.Fatalf("ratio %d: nothing placed", r.Ratio)
		}
		if r.Permanent > r.DedicatedMin+1e-9 {
			t.Errorf("ratio %d: %.3f permanent but only %.3f dedicated in some round", r.Ratio, r.Permanent, r.DedicatedMin)
		}
		for i, g := range r.Gain {
			if g < 1-1e-9 {
				t.Errorf("ratio %d: gain %.3f < 1 at inactive ratio %g", r.Ratio, g, r.Inactive[i])
			}
		}
		if r.UtilMedianQ < r.UtilMedianS-1e-9 {
			t.Errorf("ratio %d: median utilization QShare %.3f below static %.3f", r.Ratio, r.UtilMedianQ, r.UtilMedianS)
		}
		if r.CodePoints > 63 {
			t.Errorf("ratio %d: %d code points", r.Ratio, r.CodePoints)
		}
	}
	for _, bad := range []analysis.QShareScaleOptions{{K: 4, MeanVMs: -1}, {K: 4, Link: -1e9}} {
		if _, err := analysis.QShareScale(context.Background(), bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	if _, err := analysis.QShareScale(context.Background(), analysis.QShareScaleOptions{K: 4, Ratios: []int{3}}); err == nil {
		t.Error("ratio 3 on k = 4: no error")
	}
}

// TestQShareTable1 produces Table 1's columns for every oversubscription
// ratio at 1024 servers × 100 slots, with the run time (issue 6).
func TestQShareTable1(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a 1024-server datacenter three times")
	}
	rows, err := analysis.QShareScale(context.Background(), analysis.QShareScaleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 1:1, 2:1 and 4:1", len(rows))
	}
	for _, r := range rows {
		t.Logf("%d:1: %d tenants, slots %.1f%%, ports <8 %.1f%%, most per port %d, permanent %.1f%%, per interval %.1f–%.1f%%, %d DSCP values, gains %v, place %v, analysis %v",
			r.Ratio, r.Tenants, 100*r.SlotLoad, 100*r.Below[8], r.MaxPerPort, 100*r.Permanent, 100*r.DedicatedMin, 100*r.DedicatedMean, r.CodePoints, r.Gain, r.PlaceTime, r.AnalyzeTime)
		if r.Servers != 1024 || r.SlotLoad < 0.99 || r.Tenants == 0 || r.PlaceTime <= 0 || r.AnalyzeTime <= 0 {
			t.Errorf("%d:1: %d servers, slots %.3f reserved, %d tenants, times %v %v", r.Ratio, r.Servers, r.SlotLoad, r.Tenants, r.PlaceTime, r.AnalyzeTime)
		}
		if r.Permanent > r.DedicatedMin+1e-9 || r.CodePoints > 63 {
			t.Errorf("%d:1: permanent %.3f, per-interval min %.3f, %d code points", r.Ratio, r.Permanent, r.DedicatedMin, r.CodePoints)
		}
	}
}
