package drx_test

// Reproductions of DRX's Fig. 3 (symmetric layout), Fig. 7 (the two
// asymmetric layouts) and Fig. 5 (prices and caps over time) in the
// simulator, from scenarios/drx-*.yaml. See docs/results.md (DRX) for the
// numbers against the paper and docs/drx.md for the model. Each run takes
// well under a second.
//
//	go test ./mech/drx -run Repro -v           # the tables
//	go test ./mech/drx -run Fig5 -drx.out DIR  # Fig. 5's CSV and plots

import (
	"context"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/drx"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

var outDir = flag.String("drx.out", "", "write Fig. 5's CSV and plots to this directory")

// Nectere's run, over which every VME's degradation is measured.
const (
	from = 35 * time.Second
	to   = 65 * time.Second
)

// policies are Fig. 3's bars: "none" is NoMgmt.
var policies = []string{"none", "drx-cc-dist", "drx-pc-dist", "drx-eb-local", "drx-eb-dist", "drx-hb-local", "drx-hb-dist"}

var tenants = []string{"Nectere", "Hadoop", "Linpack"}

// simulateWith runs scenarios/<file>, changed by edit if set, under the
// named mechanism with params (rec, if set, records a DRX variant's
// prices, caps and degradations).
func simulateWith(t *testing.T, file, name string, params map[string]any, rec *drx.Recorder, edit func(*spec.Scenario)) *eval.Input {
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
	var m mech.Mechanism
	if rec != nil && strings.HasPrefix(name, drx.Name+"-") {
		parts := strings.Split(name, "-")
		p := map[string]any{"policy": parts[1], "scope": parts[2]}
		for k, v := range params {
			p[k] = v
		}
		cfg, err := drx.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err = drx.NewWithConfig(cfg, drx.Options{Name: name, Recorder: rec})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		m, err = all.New(name, params)
	}
	if err != nil {
		t.Fatal(err)
	}
	in, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// degradation is a tenant's performance degradation over (from, to]: 1 −
// its I/O over its demand (every connection of the scenarios is
// rate-bound).
func degradation(t *testing.T, in *eval.Input, tenant string, from, to time.Duration) float64 {
	t.Helper()
	rate, dem := 0.0, 0.0
	for _, s := range in.Samples {
		if s.T <= from || s.T > to {
			continue
		}
		for i, p := range in.Pairs {
			if p.Tenant != tenant {
				continue
			}
			if math.IsInf(s.Pairs[i].Demand, 0) {
				t.Fatalf("%s: pair %s->%s has unbounded demand", tenant, p.Src, p.Dst)
			}
			rate += s.Pairs[i].Rate
			dem += s.Pairs[i].Demand
		}
	}
	if dem <= 0 {
		t.Fatalf("%s: no demand between %v and %v", tenant, from, to)
	}
	return 1 - rate/dem
}

// steady is the last part of Nectere's run, after the policies settled.
const steady = 10 * time.Second

// result is one policy's degradations on one layout: over Nectere's run
// and over its last 10 s (steady state), per tenant.
type result struct{ run, steady map[string]float64 }

// table runs every policy on a layout.
func table(t *testing.T, file string) map[string]result {
	t.Helper()
	return tableWith(t, file, "", nil)
}

// tableWith is table with the scenario changed by edit (named variant).
func tableWith(t *testing.T, file, variant string, edit func(*spec.Scenario)) map[string]result {
	t.Helper()
	res := map[string]result{}
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s: performance degradation, %% (over Nectere's run %v-%v / its last %v)\n", file, variant, from, to, steady)
	fmt.Fprintf(&b, "%-14s %15s %15s %15s\n", "policy", "Nectere", "Hadoop", "Linpack")
	for _, p := range policies {
		in := simulateWith(t, file, p, nil, nil, edit)
		r := result{run: map[string]float64{}, steady: map[string]float64{}}
		fmt.Fprintf(&b, "%-14s", p)
		for _, tn := range tenants {
			r.run[tn] = degradation(t, in, tn, from, to)
			r.steady[tn] = degradation(t, in, tn, to-steady, to)
			fmt.Fprintf(&b, " %7.1f / %5.1f", 100*r.run[tn], 100*r.steady[tn])
		}
		b.WriteString("\n")
		res[p] = r
	}
	t.Log("\n" + b.String())
	return res
}

// sla is Nectere's SLA in the scenarios.
const sla = 0.15

// TestReproFig3Symmetric checks Fig. 3's claims that hold in the model:
// without management Nectere misses its SLA; the distributed EB and HB
// policies keep it within (over its whole run); the capping-only
// baselines CC-Dist and PC-Dist do not (they get there too slowly). The
// local policies also keep it within here, unlike the paper (see
// docs/results.md); TestReproFig7Asymmetric shows where they fail.
func TestReproFig3Symmetric(t *testing.T) {
	res := table(t, "drx-symmetric.yaml")
	n := func(p string) float64 { return res[p].run["Nectere"] }
	if n("none") <= sla {
		t.Errorf("NoMgmt: Nectere degraded %.1f%%: no interference to manage", 100*n("none"))
	}
	for _, p := range []string{"drx-eb-dist", "drx-hb-dist"} {
		if n(p) > sla || res[p].steady["Nectere"] > sla {
			t.Errorf("%s: Nectere degraded %.1f%% over its run (%.1f%% at the end), SLA %.0f%%", p, 100*n(p), 100*res[p].steady["Nectere"], 100*sla)
		}
	}
	for _, p := range []string{"drx-cc-dist", "drx-pc-dist"} {
		if n(p) <= sla {
			t.Errorf("%s: Nectere degraded only %.1f%% over its run: capping-only met the SLA", p, 100*n(p))
		}
		if n(p) >= n("none") {
			t.Errorf("%s: Nectere degraded %.1f%%, no better than NoMgmt (%.1f%%)", p, 100*n(p), 100*n("none"))
		}
	}
}

// TestReproFig7Asymmetric: with 16 interfering VMs next to each Nectere VM
// (Asymm1) capping the local ones is not enough, and NoMgmt, the local
// policies and PC miss the SLA; the distributed priced policies, whose
// caps reach every sender, keep it (the paper's CPU caps did not). With
// one interfering VM each (Asymm2) Nectere is undisturbed and DRX leaves
// the others alone.
func TestReproFig7Asymmetric(t *testing.T) {
	a1 := table(t, "drx-asymm1.yaml")
	for _, p := range []string{"none", "drx-eb-local", "drx-hb-local", "drx-pc-dist"} {
		if d := a1[p].run["Nectere"]; d <= sla {
			t.Errorf("Asymm1 %s: Nectere degraded only %.1f%%", p, 100*d)
		}
	}
	for _, p := range []string{"drx-eb-dist", "drx-hb-dist"} {
		if d := a1[p].run["Nectere"]; d > sla {
			t.Errorf("Asymm1 %s: Nectere degraded %.1f%%", p, 100*d)
		}
	}
	a2 := table(t, "drx-asymm2.yaml")
	for _, p := range policies {
		if d := a2[p].run["Nectere"]; d > sla {
			t.Errorf("Asymm2 %s: Nectere degraded %.1f%%", p, 100*d)
		}
		for _, tn := range []string{"Hadoop", "Linpack"} {
			if d, base := a2[p].run[tn], a2["none"].run[tn]; math.Abs(d-base) > 1e-9 {
				t.Errorf("Asymm2 %s: %s degraded %.1f%%, NoMgmt %.1f%%: DRX acted without a violation", p, tn, 100*d, 100*base)
			}
		}
	}
}

// moveVM places a VM on another server.
func moveVM(vm, server string) func(*spec.Scenario) {
	return func(sc *spec.Scenario) {
		for ti := range sc.Tenants {
			for vi := range sc.Tenants[ti].VMs {
				if v := &sc.Tenants[ti].VMs[vi]; v.Name == vm {
					v.Server = server
				}
			}
		}
	}
}

// TestReproNecterePlacement: the difference from the paper in the
// symmetric layout (the local policies keep Nectere within its SLA) does
// not depend on which server Nectere's server VM sits on (docs/results.md):
// with it on s3 or s5, EB-Local still keeps Nectere within the SLA, and
// without management it still misses it.
func TestReproNecterePlacement(t *testing.T) {
	for _, s := range []string{"s3", "s5"} {
		res := tableWith(t, "drx-symmetric.yaml", " (Nectere server on "+s+")", moveVM("ns", s))
		if d := res["drx-eb-local"].run["Nectere"]; d > sla {
			t.Errorf("Nectere on %s: EB-Local degraded it %.1f%%, SLA %.0f%%", s, 100*d, 100*sla)
		}
		if d := res["none"].run["Nectere"]; d <= sla {
			t.Errorf("Nectere on %s: NoMgmt degraded it only %.1f%%: no interference to manage", s, 100*d)
		}
	}
}
