package elasticswitch_test

// The ElasticSwitch paper's evaluation (§7) on the scenarios in
// scenarios/elasticswitch-*.yaml: tests assert what the paper claims, and
//
//	bulkhead analyze elasticswitch
//
// prints the numbers of docs/results.md for every scenario and mechanism
// (package analysis, which these tests read the runs with).

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/analysis"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// simulate runs scenarios/<file> under mechanism (the scenario's
// parameters apply when it is the scenario's mechanism), after edit (if
// not nil) has changed the parsed scenario.
func simulate(t testing.TB, file, mechanism string, edit func(*spec.Scenario)) *analysis.Simulation {
	t.Helper()
	r, err := analysis.Simulate(context.Background(), scenarioDir, file, mechanism, analysis.SimulateOptions{Edit: edit})
	if err != nil {
		t.Fatal(err)
	}
	return r
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
		e, no := analysis.ESManyToOne(es, "X", "Y"), analysis.ESManyToOne(none, "X", "Y")
		xs, ys, nx := e.X, e.Y, no.X
		for k, n := range manySenders[:len(xs)] {
			t.Logf("%s, %d senders: elasticswitch X %.0f Mbps (lowest 10 ms sample %.0f), Y %.0f, Jain(Y's senders) %.3f; none X %.0f, Jain %.3f",
				file, n, xs[k], e.XMin[k], ys[k], e.Jain[k], nx[k], no.Jain[k])
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
			sc.Duration = spec.Duration(4 * analysis.ESManyPhase)
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
		p := analysis.ESManyToOne(r, "X", "Y")
		xs, ys := p.X, p.Y
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
		sc.Duration = spec.Duration(5 * analysis.ESManyPhase)
		keep := sc.Workloads[:0]
		for _, w := range sc.Workloads {
			if w.Start < sc.Duration {
				w.Stop = 0
				keep = append(keep, w)
			}
		}
		sc.Workloads = keep
	})
	p := analysis.ESManyToOne(r, "X", "Y")
	xs, ys := p.X, p.Y
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
	w := analysis.Window{From: 2 * time.Second, To: 20 * time.Second}
	for _, c := range []struct {
		a, b   string
		ga, gb float64
		paper  float64
	}{{"A45", "B90", 45, 90, 2.64}, {"A90", "B180", 90, 180, 2.42}, {"A225", "B450", 225, 450, 2.14}} {
		a, b := r.Tenant(w, c.a), r.Tenant(w, c.b)
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
		flows := map[analysis.PairKey]int{}
		for _, f := range static.In.FCTs {
			flows[analysis.PairKey{Tenant: f.Tenant, Src: f.Src, Dst: f.Dst}]++
		}
		for _, p := range static.In.Pairs {
			if n := flows[analysis.PairKey{Tenant: p.Tenant, Src: p.Src, Dst: p.Dst}]; n != 1 {
				t.Errorf("%s: %d shuffle flows finished for %s→%s, want 1", pl, n, p.Src, p.Dst)
			}
		}
		es := analysis.ESFig8(simulate(t, file, "elasticswitch", nil), static)
		none := analysis.ESFig8(simulate(t, file, "none", nil), static)
		t.Logf("%s: elasticswitch: lowest reducer at %.2f× its guarantee (mean %.2f), shuffle time ≤ %.2f× static's (median %.2f), utilization %.2f of the ideal",
			pl, es.MinRatio, es.MeanRatio, es.MaxShuffle, es.MedShuffle, es.WorkBulk)
		t.Logf("%s: none: lowest reducer at %.2f×, %.0f%% of reducers below 95%% of the guarantee, shuffle ≤ %.2f× static's",
			pl, none.MinRatio, 100*none.Below, none.MaxShuffle)
		if es.MinRatio < 1 {
			t.Errorf("%s: a reducer gets %.2f× its guarantee under elasticswitch", pl, es.MinRatio)
		}
		// The paper's claim: no shuffle slower than under static. Every
		// placement meets it since hosts see whole lost packets (before,
		// a one-pair tenant on unbalanced was starved for ~70 ms and its
		// shuffle took 1.33× static's time; docs/results.md, Fig. 8).
		const maxShuffle = 1.02
		if es.MaxShuffle > maxShuffle || es.TenantsDone != es.Tenants {
			t.Errorf("%s: shuffle up to %.2f× static's (%d of %d done)", pl, es.MaxShuffle, es.TenantsDone, es.Tenants)
		}
		if none.Below == 0 {
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
		w := analysis.Phase(k, analysis.ESMicePhaseLen, analysis.ESMicePhaseLen/2)
		x[k] = r.Pair(w, "x", "z")
		y := r.Pair(w, "y", "t")
		t.Logf("%3d short flows/s, %2d to new pairs: x's elephant %.0f Mbps, y's %.0f", p.Flows, p.NewPairs, x[k], y)
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
// leaves. Logged: the lowest 10 ms samples, where the variants differ (the
// paper finds Hold-Increase "instrumental"; `bulkhead analyze elasticswitch
// --tables fig10` prints every variant).
func TestSensitivityPaper(t *testing.T) {
	t.Parallel()
	// (b) only differs from (a) in the number of TCP connections per VM
	// pair (its means move X by up to 31 Mbps, `bulkhead analyze
	// elasticswitch --tables fig10`); the claims below are about the
	// variants, which (a) shows: leave (b) out to save time.
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
	for _, v := range analysis.ESFig10Variants() {
		if v == "no-rc" || v == "no-hi" {
			continue // to save time; `bulkhead analyze elasticswitch --tables fig10` prints them
		}
		r := simulate(t, "elasticswitch-fig10-"+v+".yaml", "elasticswitch", noB)
		for _, setup := range []string{"A"} {
			p := analysis.ESManyToOne(r, setup+"X", setup+"Y")
			t.Logf("%s (%s): X per phase %.0f, lowest samples %.0f", v, setup, p.X, p.XMin)
			for k := 1; k < manyIdle; k++ {
				if p.X[k] < 0.95*450 {
					t.Errorf("%s (%s), %d senders: X gets %.0f Mbps, want ≥ 95%% of 450", v, setup, manySenders[k], p.X[k])
				}
			}
		}
		var tcp []float64
		for k := range udpRates {
			tcp = append(tcp, r.Tenant(analysis.Phase(k, analysis.ESUDPPhase, analysis.ESUDPPhase/2), "CT"))
		}
		t.Logf("%s (c): TCP per UDP rate %.0f", v, tcp)
		for k, u := range udpRates {
			if want := 0.9 * math.Max(1000-float64(u), 500); tcp[k] < want {
				t.Errorf("%s (c): TCP gets %.0f Mbps against %d Mbps of UDP, want ≥ %.0f", v, tcp[k], u, want)
			}
		}
	}
}
