package gatekeeper_test

import (
	"fmt"
	"strings"
	"testing"
)

// Isolation on scenarios written for issue 11: every tenant at ≥ 95%
// compliance (the share of samples with ≥ 95% of its guarantee) and work
// conservation ≥ 90% of the ideal, under Gatekeeper with its defaults.
// Where a shipped scenario falls short by design (congestion in the core,
// feedback turned off, a VM's share split among its peers by TCP) it is
// not listed here; docs/results.md says why.
func TestSimIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, file := range []string{
		"gatekeeper-full-link.yaml",
		"gatekeeper-incast.yaml",
		"gatekeeper-churn.yaml",
		"gatekeeper-fig5-rx.yaml",
		"gatekeeper-fig5-tx.yaml",
		"gatekeeper-real-rx.yaml",
		"real-incast.yaml",
		"real-connections.yaml",
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			r := run(t, load(t, file, nil), gk)
			var b strings.Builder
			fmt.Fprintf(&b, "%s: work conservation %.3f", file, r.WorkConservation)
			for _, tr := range r.Tenants {
				fmt.Fprintf(&b, "; %s %.1f of %.1f Mbps, compliance %.3f", tr.Name, tr.MeanThroughput, tr.Guarantee, tr.Compliance)
				if tr.Compliance < 0.95 {
					t.Errorf("%s: tenant %s compliance %.3f, want ≥ 0.95 (mean %.1f Mbps, guarantee %.1f)", file, tr.Name, tr.Compliance, tr.MeanThroughput, tr.Guarantee)
				}
			}
			t.Log(b.String())
			if r.WorkConservation < 0.9 {
				t.Errorf("%s: work conservation %.3f, want ≥ 0.9", file, r.WorkConservation)
			}
		})
	}
}

// phaseMeans returns each tenant's mean throughput and mean guarantee over
// the samples in (from, to], in Mbps.
func phaseMeans(t *testing.T, file string, from, to float64, tenants ...string) (achieved, guaranteed map[string]float64) {
	t.Helper()
	r := run(t, load(t, file, nil), gk)
	achieved, guaranteed = map[string]float64{}, map[string]float64{}
	for _, name := range tenants {
		tr := tenantReport(t, r, name)
		n := 0
		for i, at := range r.Times {
			if at > from+1e-9 && at <= to+1e-9 {
				achieved[name] += tr.Series.Achieved[i]
				guaranteed[name] += tr.Series.Guarantee[i]
				n++
			}
		}
		achieved[name] /= float64(n)
		guaranteed[name] /= float64(n)
	}
	return achieved, guaranteed
}

// Guarantees that fill LIM_IN (500 + 300 + 150 Mbps on one receiving
// link), the small tenant blasting UDP at 400: every tenant gets at least
// 95% of its guarantee in every phase. The feedback used to halve C's
// sender below its 150 Mbps and let it climb back, so C averaged 137 Mbps
// in every phase.
func TestSimFullLink(t *testing.T) {
	const file = "gatekeeper-full-link.yaml"
	phases := []struct {
		name     string
		from, to float64
		tenants  []string
	}{
		{"A TCP, B TCP, C UDP 400", 1, 8, []string{"A", "B", "C"}},
		{"A TCP, B idle, C UDP 400", 9, 16, []string{"A", "C"}},
		{"A UDP 700, B UDP 400, C UDP 400", 17, 24, []string{"A", "B", "C"}},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, seconds 1-8 of each phase (Mbps, achieved / guarantee):", file)
	for _, p := range phases {
		a, g := phaseMeans(t, file, p.from, p.to, p.tenants...)
		fmt.Fprintf(&b, "\n  %-32s", p.name)
		for _, name := range p.tenants {
			fmt.Fprintf(&b, " %s %6.1f / %5.1f", name, a[name], g[name])
			if a[name] < 0.95*g[name] {
				t.Errorf("%s: tenant %s gets %.1f Mbps, want ≥ 95%% of its %.1f", p.name, name, a[name], g[name])
			}
		}
	}
	t.Log(b.String())
}

// 64 senders into one VM beside a co-located VM receiving one TCP flow:
// b keeps its 300 Mbps guarantee whether the 64 senders are unresponsive
// (UDP at 20 Mbps each, 1.28 Gbps in all) or TCP. With one sender halved
// per notification b got nothing while the UDP senders blasted.
func TestSimIncast(t *testing.T) {
	const file = "gatekeeper-incast.yaml"
	for _, p := range []struct {
		name     string
		from, to float64
	}{{"64 UDP senders", 1, 6}, {"64 TCP senders", 7, 12}} {
		a, g := phaseMeans(t, file, p.from, p.to, "A", "B")
		t.Logf("%s, %s: a %.1f Mbps (guarantee %.1f), b %.1f (guarantee %.1f)", file, p.name, a["A"], g["A"], a["B"], g["B"])
		for _, name := range []string{"A", "B"} {
			if a[name] < 0.95*g[name] {
				t.Errorf("%s: tenant %s gets %.1f Mbps, want ≥ 95%% of its %.1f", p.name, name, a[name], g[name])
			}
		}
	}
}
