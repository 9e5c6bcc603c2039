package gatekeeper_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Simulator tests: the same agents driven by the fluid simulator on the
// scenarios in scenarios/gatekeeper-*.yaml. `go test -v -run Sim` prints
// the tables quoted in docs/results.md.

// load reads a scenario file from scenarios/, letting edit change it
// before admission.
func load(t *testing.T, file string, edit func(*spec.Scenario)) *runner.Scenario {
	t.Helper()
	sc, err := spec.Load(filepath.Join("..", "..", "scenarios", file))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(sc)
	}
	s, err := runner.Prepare(sc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// variant is a mechanism with parameters (nil: the scenario's own when the
// name is the scenario's mechanism, else none).
type variant struct {
	label, mech string
	params      map[string]any
}

var (
	gk         = variant{"gatekeeper", "gatekeeper", map[string]any{"feedback": true}}
	gkNoFB     = variant{"gatekeeper, no feedback", "gatekeeper", map[string]any{"feedback": false}}
	gkRateLim  = variant{"rate limit (§3.3)", "gatekeeper", map[string]any{"mode": "rate-limit"}}
	noneMech   = variant{"none", "none", nil}
	staticMech = variant{"static", "static", nil}
	esMech     = variant{"elasticswitch", "elasticswitch", nil}
)

func run(t *testing.T, s *runner.Scenario, v variant) *eval.Report {
	t.Helper()
	sc := *s.Spec
	sc.Mechanism = spec.Mechanism{Name: v.mech, Params: v.params}
	r, err := runner.Run(context.Background(), &runner.Scenario{Spec: &sc, Topo: s.Topo}, v.mech, runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tenantReport(t *testing.T, r *eval.Report, name string) eval.TenantReport {
	t.Helper()
	for _, tr := range r.Tenants {
		if tr.Name == name {
			return tr
		}
	}
	t.Fatalf("no tenant %q in the report", name)
	return eval.TenantReport{}
}

// mean is a tenant's mean achieved (and ideal) throughput, in report
// units, over the samples ending in (from, to].
func mean(t *testing.T, r *eval.Report, tenant string, from, to float64) (achieved, ideal float64) {
	t.Helper()
	tr := tenantReport(t, r, tenant)
	n := 0
	for i, at := range r.Times {
		if at > from+1e-9 && at <= to+1e-9 {
			achieved += tr.Series.Achieved[i]
			ideal += tr.Series.Ideal[i]
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no samples in (%g, %g]", from, to)
	}
	return achieved / float64(n), ideal / float64(n)
}

// fig5Phases are the phases of gatekeeper-fig5-{rx,tx}.yaml: A's flows /
// B's flows, 5 s each.
var fig5Phases = []string{"1 TCP / none", "1 TCP / 1 TCP", "1 TCP / 10 TCP", "1 TCP / UDP", "none / 1 TCP", "10 TCP / 1 TCP", "UDP / 1 TCP", "UDP / UDP"}

// fig5 runs a Fig. 5 scenario and returns A's and B's mean throughput per
// phase (the first second of each phase left out), logging a table.
func fig5(t *testing.T, file string, vs ...variant) map[string][][2]float64 {
	t.Helper()
	s := load(t, file, nil)
	out := map[string][][2]float64{}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (Mbps, A / B, seconds 1-5 of each phase; wc = achieved ÷ ideal):\n%-26s", file, "phase (A / B)")
	for _, v := range vs {
		fmt.Fprintf(&b, " | %-28s", v.label)
	}
	b.WriteString("\n")
	rows := make([]string, len(fig5Phases))
	for i, p := range fig5Phases {
		rows[i] = fmt.Sprintf("%-26s", p)
	}
	for _, v := range vs {
		r := run(t, s, v)
		for i := range fig5Phases {
			from, to := float64(5*i+1), float64(5*i+5)
			a, ia := mean(t, r, "A", from, to)
			bb, ib := mean(t, r, "B", from, to)
			out[v.label] = append(out[v.label], [2]float64{a, bb})
			rows[i] += fmt.Sprintf(" | %6.1f / %6.1f  wc %4.2f", a, bb, (a+bb)/(ia+ib))
		}
	}
	b.WriteString(strings.Join(rows, "\n"))
	t.Log(b.String())
	return out
}

// Gatekeeper Fig. 5(b), RX bottleneck: with feedback, A (75%: 645 Mbps)
// stays within 10% of its target against B's UDP blast; whichever customer
// is alone gets the whole LIM_IN; TCP customers split LIM_IN 3:1 whatever
// their numbers of connections. Without feedback B's blast, which fills
// H1's link before the ingress scheduler drops it, starves A, as without
// any protection (Fig. 5(a)).
func TestSimFig5RX(t *testing.T) {
	const targetA, targetB, limIn = 645.0, 215.0, 950.0
	res := fig5(t, "gatekeeper-fig5-rx.yaml", gk, gkNoFB, noneMech, staticMech)
	g, nf, none := res[gk.label], res[gkNoFB.label], res[noneMech.label]
	if a := g[3][0]; a < 0.9*targetA {
		t.Errorf("RX, B blasting UDP: A gets %.1f Mbps under gatekeeper, want ≥ %.1f (within 10%% of its 645 Mbps target)", a, 0.9*targetA)
	}
	if b := g[3][1]; b < 0.75*targetB {
		t.Errorf("RX, B blasting UDP: B gets %.1f Mbps, want ≥ %.1f (its AIMD sawtooth around its 237.5 Mbps share)", b, 0.75*targetB)
	}
	if a := g[0][0]; a < 0.99*limIn {
		t.Errorf("RX, B idle: A gets %.1f Mbps, want B's idle share too (≥ %.1f)", a, 0.99*limIn)
	}
	if b := g[4][1]; b < 0.9*limIn {
		t.Errorf("RX, A idle: B gets %.1f Mbps, want A's idle share too (≥ %.1f)", b, 0.9*limIn)
	}
	for _, i := range []int{1, 2, 5} {
		if a, b := g[i][0], g[i][1]; math.Abs(a-712.5) > 2 || math.Abs(b-237.5) > 2 {
			t.Errorf("RX, %s: A %.1f, B %.1f Mbps, want the ingress scheduler's 712.5 / 237.5", fig5Phases[i], a, b)
		}
	}
	if b := g[6][1]; b < targetB {
		t.Errorf("RX, A blasting UDP: B gets %.1f Mbps, want ≥ its %.0f Mbps target", b, targetB)
	}
	if a := nf[3][0]; a > 0.1*targetA {
		t.Errorf("RX without feedback, B blasting UDP: A gets %.1f Mbps, want it starved (< %.1f)", a, 0.1*targetA)
	}
	if a := none[3][0]; a > 0.1*targetA {
		t.Errorf("RX without protection, B blasting UDP: A gets %.1f Mbps, want it starved", a)
	}
	if a := none[2][0]; a > 0.2*targetA {
		t.Errorf("RX without protection, B with 10 TCP flows: A gets %.1f Mbps, want its per-connection share (~91)", a)
	}
}

// Gatekeeper Fig. 5(b), TX bottleneck: the egress scheduler alone splits
// H1's link 3:1 (750 / 250 Mbps) against TCP or UDP, feedback or not; a
// customer alone gets the receiver's whole LIM_IN.
func TestSimFig5TX(t *testing.T) {
	res := fig5(t, "gatekeeper-fig5-tx.yaml", gk, gkNoFB, noneMech)
	for _, v := range []variant{gk, gkNoFB} {
		g := res[v.label]
		for i, p := range fig5Phases {
			a, b := g[i][0], g[i][1]
			switch i {
			case 0:
				if a < 949 {
					t.Errorf("TX %s, %s: A %.1f Mbps, want 950 (B's idle share)", v.label, p, a)
				}
			case 4:
				if b < 949 {
					t.Errorf("TX %s, %s: B %.1f Mbps, want 950 (A's idle share)", v.label, p, b)
				}
			default:
				if math.Abs(a-712.5) > 2 || math.Abs(b-237.5) > 2 {
					t.Errorf("TX %s, %s: A %.1f, B %.1f Mbps, want the egress scheduler's LIM_IN (950) split 3:1, 712.5 / 237.5", v.label, p, a, b)
				}
			}
		}
	}
	if a := res[noneMech.label][3][0]; a > 10 {
		t.Errorf("TX without protection, B blasting UDP: A gets %.1f Mbps, want it starved", a)
	}
}

// ElasticSwitch Fig. 5 with the congested link in the core: Gatekeeper,
// which only schedules access links, leaves X at TCP's per-connection
// share, far below its 450 Mbps guarantee, as without protection, while
// ElasticSwitch keeps X at its guarantee.
func TestSimCore(t *testing.T) {
	const guarantee = 450.0
	s := load(t, "gatekeeper-core.yaml", func(sc *spec.Scenario) { sc.Duration = spec.Duration(5 * time.Second) })
	var b strings.Builder
	b.WriteString("gatekeeper-core.yaml, seconds 1-5 (Mbps):\n")
	x := map[string]float64{}
	for _, v := range []variant{noneMech, staticMech, gk, esMech} {
		r := run(t, s, v)
		xa, _ := mean(t, r, "X", 1, 5)
		ya, _ := mean(t, r, "Y", 1, 5)
		x[v.label] = xa
		fmt.Fprintf(&b, "%-14s X %6.1f  Y %6.1f  X compliance %.2f  work conservation %.2f\n", v.label, xa, ya, tenantReport(t, r, "X").Compliance, r.WorkConservation)
	}
	t.Log(b.String())
	if x[gk.label] > 0.25*guarantee {
		t.Errorf("core congestion: X gets %.1f Mbps under gatekeeper; Gatekeeper cannot see the core link and should leave X far below its %g Mbps guarantee", x[gk.label], guarantee)
	}
	if x[noneMech.label] > 0.25*guarantee {
		t.Errorf("core congestion: X gets %.1f Mbps without protection, want TCP's per-connection share", x[noneMech.label])
	}
	if x[esMech.label] < 0.9*guarantee {
		t.Errorf("core congestion: X gets %.1f Mbps under elasticswitch, want ≥ %.1f", x[esMech.label], 0.9*guarantee)
	}
}

// hadoopResult is one run of a Hadoop scenario.
type hadoopResult struct {
	fct               *eval.FCTStats
	netperf, hadoop   float64 // mean throughput while the job runs (0-20 s), Mbps
	finished          int
	workConservation  float64
	netperfCompliance float64
}

func hadoopRun(t *testing.T, s *runner.Scenario, v variant) hadoopResult {
	t.Helper()
	r := run(t, s, v)
	h := tenantReport(t, r, "Hadoop")
	res := hadoopResult{fct: h.FCT, workConservation: r.WorkConservation, netperfCompliance: tenantReport(t, r, "Netperf").Compliance}
	if h.FCT != nil {
		res.finished = h.FCT.Count
	}
	res.hadoop, _ = mean(t, r, "Hadoop", 0, 20)
	res.netperf, _ = mean(t, r, "Netperf", 0, 20)
	return res
}

// allocation sets Hadoop's share of the ~900 Mbps usable per link (the
// rest to Netperf), and optionally removes the background.
func allocation(hadoop float64, background bool) func(*spec.Scenario) {
	return func(sc *spec.Scenario) {
		for i := range sc.Tenants {
			g := hadoop * 900e6
			if sc.Tenants[i].Name == "Netperf" {
				g = 900e6 - g
			}
			sc.Tenants[i].Guarantee = spec.Rate(g)
		}
		if !background {
			var w []spec.Workload
			for _, x := range sc.Workloads {
				if x.Tenant == "Hadoop" {
					w = append(w, x)
				}
			}
			sc.Workloads = w
		}
	}
}

func fmtFCT(f *eval.FCTStats, started int) string {
	if f == nil {
		return fmt.Sprintf("0/%d finished", started)
	}
	s := fmt.Sprintf("mean %5.2f s  p99 %5.2f s", f.MeanS, f.P99S)
	if f.Count < started {
		s += fmt.Sprintf("  only %d/%d finished", f.Count, started)
	}
	return s
}

// Gatekeeper Figs. 6–7: a Hadoop-like shuffle (16 MB flows between all
// pairs of 26 VMs) against 10 TCP streams or a UDP blast per netperf pair.
// Job time is a shuffle flow's completion time.
//
//   - 10 TCP streams (Fig. 6): without protection the shuffle slows down
//     several-fold; Gatekeeper keeps it at least as fast as the static
//     rate limits of §3.3 while giving the netperf streams far more (the
//     job's idle bandwidth), and feedback changes nothing ("Since TCP is
//     well behaved, Gatekeeper avoids using the congestion control
//     feedback mechanism, and thus the two Gatekeeper cases show identical
//     performance").
//   - UDP (Fig. 7): without protection shuffle flows into the blasted
//     hosts never finish; without feedback many are slow; with feedback
//     Gatekeeper matches the static rate limits and gives netperf more.
func TestSimHadoop(t *testing.T) {
	alone := hadoopRun(t, load(t, "gatekeeper-hadoop.yaml", allocation(0.5, false)), gk)
	started := alone.finished
	t.Logf("Hadoop alone (gatekeeper, 50%%): %s, %d flows", fmtFCT(alone.fct, started), started)
	if started < 600 {
		t.Fatalf("only %d shuffle flows finished without background traffic", started)
	}
	type key struct{ file, label string }
	results := map[key]*hadoopResult{}
	cases := []struct {
		file string
		vs   []variant
	}{
		{"gatekeeper-hadoop.yaml", []variant{noneMech, staticMech, gkRateLim, gkNoFB, gk}},
		{"gatekeeper-hadoop-udp.yaml", []variant{noneMech, gkRateLim, gkNoFB, gk}},
	}
	t.Run("runs", func(t *testing.T) {
		for _, c := range cases {
			s := load(t, c.file, nil)
			for _, v := range c.vs {
				res := &hadoopResult{}
				results[key{c.file, v.label}] = res
				t.Run(c.file+"/"+v.label, func(t *testing.T) {
					t.Parallel()
					*res = hadoopRun(t, s, v)
				})
			}
		}
	})
	var b strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&b, "%s, Hadoop 50%% (job time = shuffle-flow FCT; throughputs over 0-20 s, Mbps):\n", c.file)
		for _, v := range c.vs {
			r := *results[key{c.file, v.label}]
			fmt.Fprintf(&b, "  %-24s %-44s Hadoop %7.1f  Netperf %7.1f  work cons. %.2f  Netperf compliance %.2f\n",
				v.label, fmtFCT(r.fct, started), r.hadoop, r.netperf, r.workConservation, r.netperfCompliance)
		}
	}
	t.Log(b.String())

	get := func(file string, v variant) hadoopResult {
		r := *results[key{file, v.label}]
		if r.fct == nil && v.mech != "none" {
			t.Fatalf("%s under %s: no shuffle flow finished", file, v.label)
		}
		return r
	}
	tcp := "gatekeeper-hadoop.yaml"
	g, nf, rl, none := get(tcp, gk), get(tcp, gkNoFB), get(tcp, gkRateLim), get(tcp, noneMech)
	if g.finished != started || g.fct.MeanS > 1.1*rl.fct.MeanS {
		t.Errorf("10 TCP streams: gatekeeper finishes %d/%d flows, mean FCT %.2f s; want all, no slower than the rate limits' %.2f s (+10%%)", g.finished, started, g.fct.MeanS, rl.fct.MeanS)
	}
	if none.fct.MeanS < 2*g.fct.MeanS {
		t.Errorf("10 TCP streams: mean FCT %.2f s without protection, want at least twice gatekeeper's %.2f s", none.fct.MeanS, g.fct.MeanS)
	}
	if g.netperf < 1.5*rl.netperf {
		t.Errorf("10 TCP streams: netperf gets %.0f Mbps under gatekeeper, want well above the rate limits' %.0f (the job's idle bandwidth)", g.netperf, rl.netperf)
	}
	if *nf.fct != *g.fct || nf.netperf != g.netperf {
		t.Errorf("10 TCP streams: feedback changed the outcome (%+v vs %+v); TCP should never trigger it", *nf.fct, *g.fct)
	}
	udp := "gatekeeper-hadoop-udp.yaml"
	g, nf, rl, none = get(udp, gk), get(udp, gkNoFB), get(udp, gkRateLim), get(udp, noneMech)
	if none.finished > started*3/4 {
		t.Errorf("UDP: %d/%d shuffle flows finish without protection, want many starved", none.finished, started)
	}
	if g.finished != started || g.fct.MeanS > 1.1*rl.fct.MeanS {
		t.Errorf("UDP: gatekeeper finishes %d/%d flows, mean FCT %.2f s; want all, no slower than the rate limits' %.2f s (+10%%)", g.finished, started, g.fct.MeanS, rl.fct.MeanS)
	}
	if nf.fct.MeanS < 1.5*g.fct.MeanS || nf.fct.P99S < 2*g.fct.P99S {
		t.Errorf("UDP: without feedback mean/p99 FCT %.2f/%.2f s, want well above gatekeeper's %.2f/%.2f s", nf.fct.MeanS, nf.fct.P99S, g.fct.MeanS, g.fct.P99S)
	}
	if g.netperf <= rl.netperf {
		t.Errorf("UDP: netperf gets %.0f Mbps under gatekeeper, want more than the rate limits' %.0f", g.netperf, rl.netperf)
	}
}

// The paper's other Hadoop allocations (25% and 75% of the link), logged:
// Gatekeeper against the static rate limits.
func TestSimHadoopAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, file := range []string{"gatekeeper-hadoop.yaml", "gatekeeper-hadoop-udp.yaml"} {
		for _, share := range []float64{0.25, 0.75} {
			s := load(t, file, allocation(share, true))
			for _, v := range []variant{gkRateLim, gk} {
				t.Run(fmt.Sprintf("%s/%.0f%%/%s", file, 100*share, v.label), func(t *testing.T) {
					t.Parallel()
					r := hadoopRun(t, s, v)
					t.Logf("%s, Hadoop %.0f%%, %-18s %-30s Hadoop %6.1f  Netperf %7.1f Mbps", file, 100*share, v.label, fmtFCT(r.fct, 666), r.hadoop, r.netperf)
					if r.finished != 666 {
						t.Errorf("%d/666 shuffle flows finished", r.finished)
					}
				})
			}
		}
	}
}
