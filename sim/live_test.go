package sim

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// liveScenario: tenant A from the start; tenant B joins at 2 s, sends from
// 2 s to 6 s into the same server and leaves at 6 s.
const liveScenario = `
name: live
duration: 8s
dt: 1ms
topology:
  kind: two-tier
  two_tier: {racks: 1, servers_per_rack: 3, edge: 1Gbps}
tenants:
  - name: A
    guarantee: 450Mbps
    vms: [{name: a1, server: s1}, {name: a2, server: s3}]
  - name: B
    guarantee: 450Mbps
    vms: [{name: b1, server: s2}, {name: b2, server: s3}]
workloads:
`

// TestTenantJoinsAndLeaves hands tenant B to the mechanism's agents at
// runtime, through the driver core: once it has joined, the tenant the
// mechanism protects gets its guarantee, and once B has left its limits
// are gone. Without the join (B never declared) the protected tenant
// falls short. ElasticSwitch protects at the senders, so the joining B
// floods and A must keep its guarantee; Gatekeeper protects at the
// receivers, so A floods and the joining B must get its guarantee.
func TestTenantJoinsAndLeaves(t *testing.T) {
	for _, tc := range []struct {
		mechanism, workloads string
		protected            [2]string // the pair whose guarantee is checked
	}{
		{"elasticswitch", `
  - {tenant: A, kind: tcp, src: a1, dst: a2}
  - {tenant: B, kind: udp, src: b1, dst: b2, rate: 1Gbps, start: 2s, stop: 6s}`, [2]string{"a1", "a2"}},
		{"gatekeeper", `
  - {tenant: A, kind: udp, src: a1, dst: a2, rate: 1Gbps}
  - {tenant: B, kind: tcp, src: b1, dst: b2, start: 2s, stop: 6s}`, [2]string{"b1", "b2"}},
	} {
		t.Run(tc.mechanism, func(t *testing.T) {
			sc, err := spec.Parse([]byte(liveScenario+tc.workloads), "live.yaml")
			if err != nil {
				t.Fatal(err)
			}
			tp, err := topo.FromSpec(sc.Topology)
			if err != nil {
				t.Fatal(err)
			}
			full := sc.Model()
			onlyA := full.Clone()
			onlyA.Tenants = onlyA.Tenants[:1]
			run := func(updates []Update) *engine {
				m, err := all.New(tc.mechanism, nil)
				if err != nil {
					t.Fatal(err)
				}
				e, err := newEngine(sc, tp, Options{Mechanism: m, Model: onlyA, Updates: updates})
				if err != nil {
					t.Fatal(err)
				}
				if err := e.run(context.Background()); err != nil {
					t.Fatal(err)
				}
				return e
			}
			live := run([]Update{{At: 2 * time.Second, Model: full}, {At: 6 * time.Second, Model: onlyA}})
			never := run(nil)
			rate := func(e *engine, p [2]string) float64 { return meanPairRate(t, e, p[0], p[1], 3, 6) }
			a, b := [2]string{"a1", "a2"}, [2]string{"b1", "b2"}
			t.Logf("B joined: A %.0f Mbps, B %.0f Mbps; B never declared: A %.0f, B %.0f", rate(live, a), rate(live, b), rate(never, a), rate(never, b))
			if got := rate(live, tc.protected); got < 0.95*450 {
				t.Errorf("after B joined, %s->%s gets %.0f Mbps, below 95%% of its 450 Mbps guarantee", tc.protected[0], tc.protected[1], got)
			}
			if got := rate(never, tc.protected); got >= 0.95*450 {
				t.Errorf("%s->%s gets %.0f Mbps though B was never declared: the test cannot tell a join from none", tc.protected[0], tc.protected[1], got)
			}
			// B has left: nothing of it is enforced any more.
			b1 := live.vms[live.vmIdx["b1"]]
			p := live.pairs[live.pairIx[mech.PairID{Src: "b1", Dst: "b2"}]]
			if !math.IsInf(p.limRate, 1) || !math.IsInf(b1.egRate, 1) || !math.IsInf(b1.inRate, 1) {
				t.Errorf("after B left: pair limit %g, b1 egress %g, ingress %g; want none", p.limRate, b1.egRate, b1.inRate)
			}
			for _, h := range live.hosts {
				if len(h.drv.Env().VMs) != 2 {
					t.Errorf("agent on %s has %d VMs after B left, want 2", h.name, len(h.drv.Env().VMs))
				}
				for _, l := range h.drv.Desired() {
					if l.Pair.Src == "b1" || l.VM == "b1" || l.VM == "b2" {
						t.Errorf("agent on %s still wants %+v", h.name, l)
					}
				}
				if es, ok := h.drv.Agent().(*elasticswitch.Agent); ok {
					if _, ok := es.Guarantee(mech.PairID{Src: "b1", Dst: "b2"}); ok {
						t.Errorf("ElasticSwitch on %s still holds b1->b2", h.name)
					}
				}
			}
			for _, st := range live.scheds {
				if w, ok := st.classes()["b2"]; ok && w > minSchedWeight {
					t.Errorf("scheduler on node %d still weighs b2 %g", st.host, w)
				}
			}
		})
	}
}

// meanPairRate is the mean rate (Mbps) of a pair over the samples ending
// in (from, to] seconds.
func meanPairRate(t *testing.T, e *engine, src, dst string, from, to float64) float64 {
	t.Helper()
	idx := -1
	for i, p := range e.out.Pairs {
		if p.Src == src && p.Dst == dst {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("no pair %s->%s", src, dst)
	}
	sum, n := 0.0, 0
	for _, s := range e.out.Samples {
		if end := s.T.Seconds(); end > from && end <= to {
			sum += s.Pairs[idx].Rate
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no samples in (%g, %g]", from, to)
	}
	return sum / float64(n) / 1e6
}

// A mechanism whose agents cannot change tenants at runtime fails the run
// with a clear error rather than run on a stale model.
func TestUpdateRefused(t *testing.T) {
	sc, err := spec.Parse([]byte(liveScenario+"  - {tenant: A, kind: tcp, src: a1, dst: a2}\n"), "live.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.FromSpec(sc.Topology)
	if err != nil {
		t.Fatal(err)
	}
	m, err := all.New("seawall", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(sc, tp, Options{Mechanism: m, Updates: []Update{{At: time.Second, Model: sc.Model()}}})
	if err != nil {
		t.Fatal(err)
	}
	err = e.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot change tenants at runtime") || !strings.Contains(err.Error(), "seawall") {
		t.Errorf("run: %v, want a refusal naming seawall", err)
	}
}

// A VM that is not (or no longer) declared is not observed: a declared
// VM's traffic to it does not make the mechanism limit a pair to an
// unknown VM, which would fail the run.
func TestUndeclaredVMNotObserved(t *testing.T) {
	sc, err := spec.Parse([]byte(liveScenario+"  - {tenant: A, kind: tcp, src: a1, dst: a2}\n"), "live.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.FromSpec(sc.Topology)
	if err != nil {
		t.Fatal(err)
	}
	partial := sc.Model()
	partial.Tenants[0].VMs = partial.Tenants[0].VMs[:1] // a2 is not declared
	for _, name := range []string{"elasticswitch", "seawall", "static", "gatekeeper"} {
		m, err := all.New(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		e, err := newEngine(sc, tp, Options{Mechanism: m, Model: partial})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.run(context.Background()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
