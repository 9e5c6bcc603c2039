package elasticswitch_test

// The ElasticSwitch paper's evaluation (§7) on the scenarios in
// scenarios/elasticswitch-*.yaml: tests assert what the paper claims, and
//
//	go test ./mech/elasticswitch -run TestReproduce -repro -v
//
// prints the numbers of docs/results.md for every scenario and mechanism.

import (
	"flag"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/metrics"
	"github.com/bulkhead-dc/bulkhead/spec"
)

var repro = flag.Bool("repro", false, "TestReproduce: print the reproduction tables")

const sec = time.Second

// manyPhases returns, for a many-to-one setup with tenants x and y, per
// phase (those the run covers): X's mean, the lowest sample of X, Y's
// mean and Jain's index among Y's active senders, over the last half of
// each phase.
func manyPhases(r *run, x, y string) (xs, xmin, ys, jain []float64) {
	n := min(len(manySenders), int(r.in.Duration/(manyPhase*sec)))
	for k := range n {
		w := phase(k, manyPhase*sec, manyPhase*sec/2)
		xs = append(xs, r.tenant(w, x))
		xmin = append(xmin, r.minSample(w, x))
		ys = append(ys, r.tenant(w, y))
		jain = append(jain, r.jainActive(w, y))
	}
	return
}

func row(cells ...any) string {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		switch v := c.(type) {
		case float64:
			switch {
			case math.IsNaN(v):
				b.WriteString(" — |")
			case math.Abs(v) < 10:
				fmt.Fprintf(&b, " %.2f |", v)
			default:
				fmt.Fprintf(&b, " %.0f |", v)
			}
		default:
			fmt.Fprintf(&b, " %v |", v)
		}
	}
	return b.String()
}

func TestReproduce(t *testing.T) {
	if !*repro {
		t.Skip("prints the reproduction tables; run with -repro -v")
	}
	mechs := mechanisms()
	summary := func(r *run) string {
		s := fmt.Sprintf("compliance %.1f%%, work conservation %.1f%%, Jain %.3f", 100*r.rep.Compliance, 100*r.rep.WorkConservation, r.rep.Jain)
		for _, tr := range r.rep.Tenants {
			if tr.Name == "X" || tr.Name == "T" || tr.Name == "AX" || tr.Name == "CT" {
				s += fmt.Sprintf(", %s compliance %.1f%%", tr.Name, 100*tr.Compliance)
			}
		}
		return s
	}
	// Fig. 2.
	t.Log("## Fig. 2: TCP rate (Mbps) per UDP rate, last 2 s of each phase")
	for _, m := range mechs {
		r := simulate(t, "elasticswitch-fig2.yaml", m, nil)
		cells := []any{m}
		for k := range udpRates {
			cells = append(cells, r.tenant(phase(k, udpPhase*sec, udpPhase*sec/2), "T"))
		}
		t.Log(row(cells...), summary(r))
	}
	// Fig. 5, 6, 7 and §7.4.
	for _, file := range []string{"elasticswitch-fig5-tcp.yaml", "elasticswitch-fig6-udp.yaml", "elasticswitch-fig5-ecn.yaml"} {
		t.Logf("## %s: X (min sample) / Y / Jain(Y's senders) per number of senders %v", file, manySenders)
		for _, m := range mechs {
			r := simulate(t, file, m, nil)
			xs, xmin, ys, jain := manyPhases(r, "X", "Y")
			cells := []any{m}
			for k := range xs {
				cells = append(cells, fmt.Sprintf("%.0f (%.0f) / %.0f / %.2f", xs[k], xmin[k], ys[k], jain[k]))
			}
			t.Log(row(cells...), summary(r))
		}
	}
	// Table 2.
	t.Log("## Table 2: rates (Mbps) and ratio")
	for _, m := range mechs {
		r := simulate(t, "elasticswitch-table2.yaml", m, nil)
		w := window{2 * sec, 20 * sec}
		cells := []any{m}
		for _, g := range [][2]string{{"A45", "B90"}, {"A90", "B180"}, {"A225", "B450"}} {
			a, b := r.tenant(w, g[0]), r.tenant(w, g[1])
			cells = append(cells, fmt.Sprintf("%.0f / %.0f = %.2f", a, b, b/a))
		}
		t.Log(row(cells...), summary(r))
	}
	// Fig. 8.
	for _, pl := range []string{"random", "unbalanced", "light"} {
		file := "elasticswitch-fig8-" + pl + ".yaml"
		t.Logf("## %s: reducers (throughput / guarantee: min, share < 95%%, mean), shuffle time / static (max, median), work conservation", file)
		static := simulate(t, file, "static", nil)
		for _, m := range mechs {
			r := static
			if m != "static" {
				r = simulate(t, file, m, nil)
			}
			f := fig8Result(r, static)
			t.Log(row(m, f.minRatio, fmt.Sprintf("%.0f%%", 100*f.below), f.meanRatio, f.maxShuffle, f.medShuffle, f.maxEst, f.workBulk,
				fmt.Sprintf("%d/%d done, max FCT %.2f s", f.tenantsDone, f.tenants, f.maxFCT)), summary(r))
			t.Logf("   %s shuffle time / static, sorted (CDF): %.2f", m, f.ratios)
		}
	}
	// Fig. 9.
	t.Log("## Fig. 9: X's elephant (Mbps) per phase (short flows/s / new pairs/s)")
	for _, m := range mechs {
		r := simulate(t, "elasticswitch-fig9.yaml", m, nil)
		cells := []any{m}
		for k := range micePhases {
			w := phase(k, micePhaseLen*sec, micePhaseLen*sec/2)
			cells = append(cells, fmt.Sprintf("%.0f / %.0f", r.pair(w, "x", "z"), r.pair(w, "y", "t")))
		}
		t.Log(row(cells...), summary(r))
	}
	// Fig. 10.
	t.Log("## Fig. 10: (a), (b) X per number of senders; (c) TCP per UDP rate")
	for _, v := range fig10Variants {
		r := simulate(t, "elasticswitch-fig10-"+v.name+".yaml", "elasticswitch", nil)
		for _, setup := range []string{"A", "B"} {
			xs, xmin, ys, _ := manyPhases(r, setup+"X", setup+"Y")
			cells := []any{v.name, setup}
			for k := range xs {
				cells = append(cells, fmt.Sprintf("%.0f (%.0f) / %.0f", xs[k], xmin[k], ys[k]))
			}
			t.Log(row(cells...))
		}
		cells := []any{v.name, "C"}
		for k := range udpRates {
			cells = append(cells, r.tenant(phase(k, udpPhase*sec, udpPhase*sec/2), "CT"))
		}
		t.Log(row(cells...), summary(r))
	}
}

// fig8Stats summarises one Fig. 8 run.
type fig8Stats struct {
	minRatio, below, meanRatio float64 // reducers' throughput / guarantee (bulk phase)
	maxShuffle, medShuffle     float64 // tenants' shuffle time / static's
	maxEst                     float64 // §7.1's worst-case estimate / static's, max over tenants
	workBulk                   float64 // Σ achieved / Σ ideal in the bulk phase
	tenantsDone, tenants       int
	maxFCT                     float64
	ratios                     []float64 // every tenant's shuffle time / static's, sorted
}

// fig8Result reads a Fig. 8 run: every reducer's mean throughput over the
// second half of the bulk phase against its guarantee (56.25 Mbps); every
// tenant's shuffle time (its largest FCT) against the static run's; and
// §7.1's estimate of the shuffle time from the bulk-phase throughputs
// (each pair's 1 MB at its bulk rate, "assuming the background traffic
// remains the same").
func fig8Result(r, static *run) fig8Stats {
	const guarantee = 56.25
	w := window{fig8Bulk * sec / 2, fig8Bulk * sec}
	var s fig8Stats
	recv := r.receivers(w, func(p metrics.Pair) bool { return isReducer(p.Dst) })
	s.minRatio = math.Inf(1)
	for _, v := range recv {
		ratio := v / guarantee
		s.minRatio = math.Min(s.minRatio, ratio)
		s.meanRatio += ratio / float64(len(recv))
		if ratio < 0.95 {
			s.below += 1 / float64(len(recv))
		}
	}
	shuffle := func(r *run) map[string]float64 {
		out := map[string]float64{}
		for _, f := range r.in.FCTs {
			out[f.Tenant] = math.Max(out[f.Tenant], f.Duration.Seconds())
		}
		return out
	}
	for _, f := range r.in.FCTs {
		s.maxFCT = math.Max(s.maxFCT, f.Duration.Seconds())
	}
	estimate := func(r *run) map[string]float64 {
		rate, _ := r.pairMeans(w, func(p metrics.Pair) bool { return true })
		out := map[string]float64{}
		for p, v := range rate {
			out[p.Tenant] = math.Max(out[p.Tenant], 8/math.Max(v, 1e-9)) // 1 MB = 8 Mb
		}
		return out
	}
	mine, base := shuffle(r), shuffle(static)
	var ratios []float64
	for tn, b := range base {
		s.tenants++
		if v, ok := mine[tn]; ok {
			s.tenantsDone++
			ratios = append(ratios, v/b)
		}
	}
	sort.Float64s(ratios)
	s.ratios = ratios
	s.maxShuffle, s.medShuffle = quantile(ratios, 1), quantile(ratios, 0.5)
	em, eb := estimate(r), estimate(static)
	for tn, b := range eb {
		s.maxEst = math.Max(s.maxEst, em[tn]/b)
	}
	var ach, ideal float64
	for _, tr := range r.rep.Tenants {
		for i, at := range r.rep.Times {
			if w.has(time.Duration(at * float64(sec))) {
				ach += tr.Series.Achieved[i]
				ideal += tr.Series.Ideal[i]
			}
		}
	}
	s.workBulk = ach / ideal
	return s
}

// Fig. 5 and 6 (§7.1): under ElasticSwitch X keeps ≥ 95% of its 450 Mbps
// guarantee whatever the number of Y's senders (up to 300, TCP in the
// core or UDP on the access link), Y gets its guarantee too, and X gets
// ≥ 90% of the link while Y's senders are idle (before they start and
// after they stop); without protection X falls below its guarantee.
// Phases are read over their last 2 s. Fig. 7: Jain's index among Y's
// senders is logged.
func TestManyToOnePaper(t *testing.T) {
	t.Parallel()
	const target, idle = 0.95 * 450, 0.9 * 1000
	for _, file := range []string{"elasticswitch-fig5-tcp.yaml", "elasticswitch-fig6-udp.yaml"} {
		es := simulate(t, file, "elasticswitch", nil)
		none := simulate(t, file, "none", nil)
		xs, xmin, ys, jain := manyPhases(es, "X", "Y")
		nx, _, _, njain := manyPhases(none, "X", "Y")
		for k, n := range manySenders[:len(xs)] {
			t.Logf("%s, %d senders: elasticswitch X %.0f Mbps (lowest 10 ms sample %.0f), Y %.0f, Jain(Y's senders) %.3f; none X %.0f, Jain %.3f",
				file, n, xs[k], xmin[k], ys[k], jain[k], nx[k], njain[k])
			if n == 0 {
				if xs[k] < idle {
					t.Errorf("%s, Y idle (phase %d): X gets %.0f Mbps, want ≥ %.0f", file, k, xs[k], idle)
				}
				continue
			}
			if xs[k] < target || ys[k] < target {
				t.Errorf("%s, %d senders: X gets %.0f and Y %.0f Mbps under elasticswitch, want both ≥ %.1f", file, n, xs[k], ys[k], target)
			}
			if n >= 10 && nx[k] >= 450 {
				t.Errorf("%s, %d senders: X gets %.0f Mbps without protection, want below its 450 Mbps guarantee", file, n, nx[k])
			}
		}
	}
}

// §7.4: on an ECN network ElasticSwitch reacts to marks (default
// congestion_signal: both) and keeps X's guarantee; counting losses only,
// it sees no congestion from TCP and X falls below it. Phases up to 50
// senders.
func TestECNPaper(t *testing.T) {
	t.Parallel()
	const target = 0.95 * 450
	short := func(signal string) func(*spec.Scenario) {
		return func(sc *spec.Scenario) {
			sc.Duration = spec.Duration(4 * manyPhase * sec)
			keep := sc.Workloads[:0]
			for _, w := range sc.Workloads {
				if w.Start < sc.Duration {
					w.Stop = 0
					keep = append(keep, w)
				}
			}
			sc.Workloads = keep
			if signal != "" {
				sc.Mechanism.Params = map[string]any{"congestion_signal": signal}
			}
		}
	}
	for _, signal := range []string{"", "ecn", "loss"} {
		r := simulate(t, "elasticswitch-fig5-ecn.yaml", "elasticswitch", short(signal))
		xs, _, ys, _ := manyPhases(r, "X", "Y")
		worst := math.Min(xs[2], xs[3])
		t.Logf("congestion_signal %q: X %.0f Mbps at 10 senders, %.0f at 50 (Y %.0f, %.0f)", signal, xs[2], xs[3], ys[2], ys[3])
		if signal == "loss" {
			if worst >= target {
				t.Errorf("counting losses only on an ECN network, X still gets %.0f Mbps", worst)
			}
			continue
		}
		if worst < target {
			t.Errorf("congestion_signal %q: X gets %.0f Mbps, want ≥ %.1f", signal, worst, target)
		}
	}
}

// Control messages delayed by 1 ms and 1% of them lost: X still keeps its
// guarantee in Fig. 6 (phases up to 100 senders).
func TestControlDelayAndLoss(t *testing.T) {
	t.Parallel()
	const target = 0.95 * 450
	r := simulate(t, "elasticswitch-fig6-udp.yaml", "elasticswitch", func(sc *spec.Scenario) {
		sc.Network.ControlDelay = spec.Duration(time.Millisecond)
		sc.Network.ControlLoss = 0.01
		sc.Duration = spec.Duration(5 * manyPhase * sec)
		keep := sc.Workloads[:0]
		for _, w := range sc.Workloads {
			if w.Start < sc.Duration {
				w.Stop = 0
				keep = append(keep, w)
			}
		}
		sc.Workloads = keep
	})
	xs, _, ys, _ := manyPhases(r, "X", "Y")
	for k := 1; k < 5; k++ {
		t.Logf("%d senders: X %.0f Mbps, Y %.0f", manySenders[k], xs[k], ys[k])
		if xs[k] < target || ys[k] < target {
			t.Errorf("%d senders: X %.0f and Y %.0f Mbps, want both ≥ %.1f", manySenders[k], xs[k], ys[k], target)
		}
	}
}

// Table 2 (§7.1): both flows get more than their guarantees, the link is
// used, and the one guaranteed twice as much gets more (paper: ratios
// 2.64, 2.42 and 2.14, ideal 2). Logged: the achieved rates and ratios.
func TestTable2Paper(t *testing.T) {
	r := simulate(t, "elasticswitch-table2.yaml", "elasticswitch", nil)
	w := window{2 * sec, 20 * sec}
	for _, c := range []struct {
		a, b   string
		ga, gb float64
		paper  float64
	}{{"A45", "B90", 45, 90, 2.64}, {"A90", "B180", 90, 180, 2.42}, {"A225", "B450", 225, 450, 2.14}} {
		a, b := r.tenant(w, c.a), r.tenant(w, c.b)
		t.Logf("guarantees %.0f/%.0f Mbps: %.0f/%.0f Mbps, ratio %.2f (paper %.2f, ideal 2)", c.ga, c.gb, a, b, b/a, c.paper)
		if a < c.ga || b < c.gb {
			t.Errorf("%s/%s: %.0f/%.0f Mbps, below the guarantees", c.a, c.b, a, b)
		}
		if a+b < 700 {
			t.Errorf("%s/%s: %.0f Mbps of the 1 Gbps link used (paper: 739 to 864)", c.a, c.b, a+b)
		}
		if ratio := b / a; ratio < 1.5 || ratio > 3.5 {
			t.Errorf("%s/%s: ratio %.2f, want about 2 (paper %.2f)", c.a, c.b, ratio, c.paper)
		}
	}
}

// Fig. 8 (§7.1): under ElasticSwitch no reducer gets less than its
// 56.25 Mbps guarantee while all jobs run and no shuffle takes longer
// than with static reservations; without protection some reducers do
// (paper, unbalanced: 30% of them, some at 1% of the guarantee).
func TestMapReducePaper(t *testing.T) {
	t.Parallel()
	for _, pl := range []string{"random", "unbalanced"} {
		file := "elasticswitch-fig8-" + pl + ".yaml"
		static := simulate(t, file, "static", nil)
		// The shuffle starts exactly one flow per mapper→reducer pair.
		flows := map[pairKey]int{}
		for _, f := range static.in.FCTs {
			flows[pairKey{f.Tenant, f.Src, f.Dst}]++
		}
		for _, p := range static.in.Pairs {
			if n := flows[pairKey{p.Tenant, p.Src, p.Dst}]; n != 1 {
				t.Errorf("%s: %d shuffle flows finished for %s→%s, want 1", pl, n, p.Src, p.Dst)
			}
		}
		es := fig8Result(simulate(t, file, "elasticswitch", nil), static)
		none := fig8Result(simulate(t, file, "none", nil), static)
		t.Logf("%s: elasticswitch: lowest reducer at %.2f× its guarantee (mean %.2f), shuffle time ≤ %.2f× static's (median %.2f), utilization %.2f of the ideal",
			pl, es.minRatio, es.meanRatio, es.maxShuffle, es.medShuffle, es.workBulk)
		t.Logf("%s: none: lowest reducer at %.2f×, %.0f%% of reducers below 95%% of the guarantee, shuffle ≤ %.2f× static's",
			pl, none.minRatio, 100*none.below, none.maxShuffle)
		if es.minRatio < 1 {
			t.Errorf("%s: a reducer gets %.2f× its guarantee under elasticswitch", pl, es.minRatio)
		}
		if es.maxShuffle > 1.02 || es.tenantsDone != es.tenants {
			t.Errorf("%s: shuffle up to %.2f× static's (%d of %d done)", pl, es.maxShuffle, es.tenantsDone, es.tenants)
		}
		if none.below == 0 {
			t.Errorf("%s: no reducer below its guarantee without protection", pl)
		}
	}
}

// Fig. 9 (§7.1): short flows to new VM pairs eat into the guarantee of
// x's elephant flow (GP gives every new pair a share of x's hose): little
// at 10 new pairs/s, more at 50. Y's elephant keeps its guarantee.
func TestMiceElephantPaper(t *testing.T) {
	t.Parallel()
	r := simulate(t, "elasticswitch-fig9.yaml", "elasticswitch", nil)
	x := make([]float64, len(micePhases))
	for k, p := range micePhases {
		w := phase(k, micePhaseLen*sec, micePhaseLen*sec/2)
		x[k] = r.pair(w, "x", "z")
		y := r.pair(w, "y", "t")
		t.Logf("%3d short flows/s, %2d to new pairs: x's elephant %.0f Mbps, y's %.0f", p.flows, p.pairs, x[k], y)
		if y < 0.95*450 {
			t.Errorf("phase %d: y's elephant %.0f Mbps, below its guarantee", k, y)
		}
	}
	if x[0] < 0.95*450 || x[1] < 0.95*450 {
		t.Errorf("x's elephant %.0f Mbps without short flows, %.0f with 10 new pairs/s: want ≥ 95%% of 450", x[0], x[1])
	}
	if last := x[len(x)-1]; !(last < x[1]) {
		t.Errorf("x's elephant %.0f Mbps at 100 flows/s to 50 new pairs/s, not below %.0f at 10/10", last, x[1])
	}
}

// Fig. 10 (§7.2): "ElasticSwitch is resilient to parameter changes": with
// the default, the more aggressive and Seawall's rate allocation X keeps
// its guarantee in (a) (phase means), and (c) TCP borrows the bandwidth UDP
// leaves. Logged:
// the lowest 10 ms samples, where the variants differ (the paper finds
// Hold-Increase "instrumental"; see TestReproduce).
func TestSensitivityPaper(t *testing.T) {
	t.Parallel()
	// (b) only differs from (a) in the number of TCP connections per VM
	// pair, which does not change the fluid model's results once pairs are
	// limiter-bound (see TestReproduce): leave it out to save time.
	noB := func(sc *spec.Scenario) {
		tenants := sc.Tenants[:0]
		for _, tn := range sc.Tenants {
			if !strings.HasPrefix(tn.Name, "B") {
				tenants = append(tenants, tn)
			}
		}
		sc.Tenants = tenants
		workloads := sc.Workloads[:0]
		for _, w := range sc.Workloads {
			if !strings.HasPrefix(w.Tenant, "B") {
				workloads = append(workloads, w)
			}
		}
		sc.Workloads = workloads
	}
	for _, v := range fig10Variants {
		if v.name == "no-rc" || v.name == "no-hi" {
			continue // between less-aggr and no-hi-rc; see TestReproduce
		}
		r := simulate(t, "elasticswitch-fig10-"+v.name+".yaml", "elasticswitch", noB)
		for _, setup := range []string{"A"} {
			xs, xmin, _, _ := manyPhases(r, setup+"X", setup+"Y")
			t.Logf("%s (%s): X per phase %.0f, lowest samples %.0f", v.name, setup, xs, xmin)
			for k := 1; k < manyIdle; k++ {
				if xs[k] < 0.95*450 {
					t.Errorf("%s (%s), %d senders: X gets %.0f Mbps, want ≥ 95%% of 450", v.name, setup, manySenders[k], xs[k])
				}
			}
		}
		var tcp []float64
		for k := range udpRates {
			tcp = append(tcp, r.tenant(phase(k, udpPhase*sec, udpPhase*sec/2), "CT"))
		}
		t.Logf("%s (c): TCP per UDP rate %.0f", v.name, tcp)
		for k, u := range udpRates {
			if want := 0.9 * math.Max(1000-float64(u), 500); tcp[k] < want {
				t.Errorf("%s (c): TCP gets %.0f Mbps against %d Mbps of UDP, want ≥ %.0f", v.name, tcp[k], u, want)
			}
		}
	}
}
