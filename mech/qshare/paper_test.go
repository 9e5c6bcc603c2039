package qshare_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// TestFig7a: QShare Fig. 7(a), predictable demand trends: ten tenants on a
// fully reserved 1 Gbps core link, each guaranteed 100 Mbps on it. The
// paper: every tenant receives at least its guarantee whatever the others
// do, and the core link is always fully utilized. Checked on every 100 ms
// sample: the core link carries ≥ 98% of its capacity, and every tenant
// that is sending gets ≥ 98% of its 100 Mbps (samples in which a tenant
// starts are left out of its check). The first sample is left out of the
// utilization check: until the first bindings reach the hypervisors (one
// agent period, 10 ms), every tenant is in the shared queue and capped at
// its guarantee, which the mean utilization check includes.
func TestFig7a(t *testing.T) {
	in := simulate(t, "qshare-fig7a.yaml", "", nil)
	const link = "tor1->core"
	capacity := linkCapacity(t, in, link)
	total, by := linkRates(t, in, link)
	starts := map[string]time.Duration{"T6": 2 * time.Second, "T7": 6 * time.Second, "T8": 3 * time.Second, "T9": 3 * time.Second, "T10": 3 * time.Second}
	mean := 0.0
	for i, s := range in.Samples {
		mean += total[i] / capacity / float64(len(total))
		if i > 0 && total[i] < 0.98*capacity {
			t.Errorf("t=%v: core link at %.1f%%, want ≥ 98%%", s.T, 100*total[i]/capacity)
		}
		for k := 1; k <= 10; k++ {
			name := fmt.Sprintf("T%d", k)
			if s.T <= starts[name]+in.Interval {
				continue // not sending yet, or starting within the sample
			}
			if got := by[i][name]; got < 0.98*100e6 {
				t.Errorf("t=%v: %s got %.1f Mbps on the core link, want ≥ 98 (guarantee 100)", s.T, name, got/1e6)
			}
		}
	}
	t.Logf("mean core link utilization %.2f%%", 100*mean)
	if mean < 0.98 {
		t.Errorf("mean core link utilization %.2f%%, want ≥ 98%%", 100*mean)
	}
}

// TestFig7aStatic: the same scenario under static reservation (every
// tenant at its guarantee) leaves the core link idle whenever a tenant is,
// so the test above can fail: its utilization check is not vacuous.
func TestFig7aStatic(t *testing.T) {
	in := simulate(t, "qshare-fig7a.yaml", "static", func(sc *spec.Scenario) {})
	const link = "tor1->core"
	capacity := linkCapacity(t, in, link)
	total, _ := linkRates(t, in, link)
	if u := total[10] / capacity; math.Abs(u-0.5) > 0.01 {
		t.Errorf("static at t=1s: core link at %.1f%%, want 50%% (five tenants at 100 Mbps)", 100*u)
	}
}

// utilization runs a scenario and returns the mean utilization of the
// named link over all samples, and the per-sample series.
func utilization(t *testing.T, file, mechanism, link string, edit func(*spec.Scenario)) (float64, []float64) {
	t.Helper()
	in := simulate(t, file, mechanism, edit)
	capacity := linkCapacity(t, in, link)
	total, _ := linkRates(t, in, link)
	mean := 0.0
	u := make([]float64, len(total))
	for i, x := range total {
		u[i] = x / capacity
		mean += u[i] / float64(len(total))
	}
	return mean, u
}

func withParams(kv ...any) func(*spec.Scenario) {
	return func(sc *spec.Scenario) {
		p := spec.Params{}
		for k, v := range sc.Mechanism.Params {
			p[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
		sc.Mechanism.Params = p
	}
}

// TestFig7b: unpredictable on/off clients. The paper reports > 91% mean
// core-link utilization (0.1 s samples over one minute); we report ours
// (docs/results.md) and check what must hold whatever the number: QShare
// uses the core link far better than static reservation, running
// ElasticSwitch in the shared queue does not lower it, and the
// utilization never exceeds the capacity.
func TestFig7b(t *testing.T) {
	if testing.Short() {
		t.Skip("one simulated minute per mechanism")
	}
	const link = "tor1->core"
	q, series := utilization(t, "qshare-fig7b.yaml", "", link, nil)
	es, _ := utilization(t, "qshare-fig7b.yaml", "", link, withParams("shared", "elasticswitch"))
	st, _ := utilization(t, "qshare-fig7b.yaml", "static", link, nil)
	// With 64 queues per port every tenant is dedicated: no binding
	// errors, what the workload's own demand allows.
	all, _ := utilization(t, "qshare-fig7b.yaml", "", link, func(sc *spec.Scenario) { sc.Network.PortQueues = 64 })
	under := 0
	for _, u := range series {
		if u < 0.9 {
			under++
		}
		if u > 1+1e-6 {
			t.Errorf("utilization %.4f above capacity", u)
		}
	}
	t.Logf("mean core-link utilization: qshare (shared: cap) %.1f%%, qshare (shared: elasticswitch) %.1f%%, static %.1f%%, every tenant dedicated (64 queues) %.1f%% (paper: QShare > 91%%); qshare samples below 90%%: %d of %d",
		100*q, 100*es, 100*st, 100*all, under, len(series))
	if q > all+0.01 {
		t.Errorf("8 queues %.1f%% above 64 queues %.1f%%: binding cannot beat dedicating every tenant", 100*q, 100*all)
	}
	if q < st+0.3 {
		t.Errorf("qshare %.1f%% vs static %.1f%%: want QShare well above static", 100*q, 100*st)
	}
	if es < q-0.01 {
		t.Errorf("ElasticSwitch in the shared queue lowered utilization: %.1f%% vs %.1f%%", 100*es, 100*q)
	}
}

// TestFig7c: mean core-link utilization against the control interval, for
// predictable (Fig. 7(a)) and unpredictable (Fig. 7(b)) demand. Logged for
// docs/results.md; checked: the predictable case stays ≥ 98% at every
// interval (its trends last longer than the intervals, and five tenants
// always demand), and the unpredictable one stays below it.
func TestFig7c(t *testing.T) {
	if testing.Short() {
		t.Skip("five simulated minutes")
	}
	const link = "tor1->core"
	for _, iv := range []string{"500ms", "1s", "2s", "4s", "8s"} {
		p, _ := utilization(t, "qshare-fig7a.yaml", "", link, withParams("interval", iv))
		u, _ := utilization(t, "qshare-fig7b.yaml", "", link, withParams("interval", iv))
		t.Logf("interval %5s: predictable %.1f%%, unpredictable %.1f%%", iv, 100*p, 100*u)
		if p < 0.98 {
			t.Errorf("interval %s: predictable utilization %.1f%%, want ≥ 98%%", iv, 100*p)
		}
		if u > p {
			t.Errorf("interval %s: unpredictable %.1f%% above predictable %.1f%%", iv, 100*u, 100*p)
		}
	}
}

// fctBins are Fig. 8's flow classes: small, medium and large flows.
var fctBins = []struct {
	name   string
	lo, hi float64 // bytes, (lo, hi]
}{{"all", 0, math.Inf(1)}, {"small ≤ 100KB", 0, 100e3}, {"medium", 100e3, 10e6}, {"large > 10MB", 10e6, math.Inf(1)}}

// meanFCT returns the mean FCT (s) and count of the tenant's flows in each
// of fctBins.
func meanFCT(in *eval.Input, tenant string) (mean []float64, n []int) {
	mean, n = make([]float64, len(fctBins)), make([]int, len(fctBins))
	for _, f := range in.FCTs {
		if f.Tenant != tenant {
			continue
		}
		for b, bin := range fctBins {
			if f.Bytes > bin.lo && f.Bytes <= bin.hi {
				mean[b] += f.Duration.Seconds()
				n[b]++
			}
		}
	}
	for b := range mean {
		if n[b] > 0 {
			mean[b] /= float64(n[b])
		}
	}
	return mean, n
}

// TestFig8: flow completion times of tenant T's shuffle as background
// guarantees load the core link, under QShare, ElasticSwitch and static
// reservation. The paper: QShare's FCTs are the shortest, ElasticSwitch's
// up to [lost]× longer, static reservation's longest; the gap is larger at
// small loads. Checked: at every load QShare's mean FCT is below
// ElasticSwitch's and static's, and under QShare the background tenants
// get their guarantees (they send exactly that much).
func TestFig8(t *testing.T) {
	if testing.Short() {
		t.Skip("twelve simulated half-minutes")
	}
	for _, load := range fig8Loads {
		file := fmt.Sprintf("qshare-fig8-load%d.yaml", load)
		means := map[string][]float64{}
		for _, m := range []string{"qshare", "elasticswitch", "static"} {
			in := simulate(t, file, m, nil)
			mean, n := meanFCT(in, "T")
			means[m] = mean
			line := fmt.Sprintf("load %d%% %-13s T's mean FCT:", load, m)
			for b, bin := range fctBins {
				line += fmt.Sprintf(" %s %.3fs (%d)", bin.name, mean[b], n[b])
			}
			t.Log(line)
			if m != "qshare" {
				continue
			}
			// Background tenants: each pair sends its tenant's guarantee.
			_, by := linkRates(t, in, "tor1->core")
			g := float64(load) * 1e9 / 100 / 4
			for k := 1; k <= 4; k++ {
				name := fmt.Sprintf("B%d", k)
				sum := 0.0
				for _, s := range by[1:] {
					sum += s[name]
				}
				if got := sum / float64(len(by)-1); got < 0.98*g {
					t.Errorf("load %d%%: %s got %.1f Mbps on the core link under QShare, guarantee %.1f", load, name, got/1e6, g/1e6)
				}
			}
		}
		if q := means["qshare"][0]; !(q < means["elasticswitch"][0] && q < means["static"][0]) {
			t.Errorf("load %d%%: mean FCT qshare %.3fs, elasticswitch %.3fs, static %.3fs: want QShare shortest",
				load, q, means["elasticswitch"][0], means["static"][0])
		}
	}
}

// TestFig7aElasticSwitch: Fig. 7(a) with ElasticSwitch in the shared queue
// instead of caps. ElasticSwitch's guarantee partitioning ramps a new pair
// up from 5 Mbps, so a tenant's first second is left out; after it every
// sending tenant gets ≥ 95% of its guarantee and the core link stays
// ≥ 98% utilized.
func TestFig7aElasticSwitch(t *testing.T) {
	in := simulate(t, "qshare-fig7a.yaml", "", withParams("shared", "elasticswitch"))
	const link = "tor1->core"
	capacity := linkCapacity(t, in, link)
	total, by := linkRates(t, in, link)
	starts := map[string]time.Duration{"T6": 2 * time.Second, "T7": 6 * time.Second, "T8": 3 * time.Second, "T9": 3 * time.Second, "T10": 3 * time.Second}
	for i, s := range in.Samples {
		if i > 0 && total[i] < 0.98*capacity {
			t.Errorf("t=%v: core link at %.1f%%", s.T, 100*total[i]/capacity)
		}
		for k := 1; k <= 10; k++ {
			name := fmt.Sprintf("T%d", k)
			if s.T <= starts[name]+time.Second {
				continue
			}
			if got := by[i][name]; got < 0.95*100e6 {
				t.Errorf("t=%v: %s got %.1f Mbps, want ≥ 95", s.T, name, got/1e6)
			}
		}
	}
}
