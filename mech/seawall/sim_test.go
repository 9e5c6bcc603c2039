package seawall_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/spec"
)

func steady(t *testing.T, r *eval.Report, tenant string, from time.Duration) float64 {
	t.Helper()
	for _, tr := range r.Tenants {
		if tr.Name != tenant {
			continue
		}
		sum, n := 0.0, 0
		for i, at := range r.Times {
			if at > from.Seconds() {
				sum += tr.Series.Achieved[i]
				n++
			}
		}
		if n == 0 {
			t.Fatalf("no samples after %v", from)
		}
		return sum / float64(n)
	}
	t.Fatalf("no tenant %q", tenant)
	return 0
}

func run(t *testing.T, s *runner.Scenario, mechanism string) *eval.Report {
	t.Helper()
	r, err := runner.Run(context.Background(), s, mechanism, runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func scenario(t *testing.T, doc string) *runner.Scenario {
	t.Helper()
	sc, err := spec.Parse([]byte(doc), t.Name()+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := runner.Prepare(sc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ElasticSwitch §7.1: "Seawall would also perform like NoProtection for
// all many-to-one settings": every sender has the same weight, so X's one
// sender gets 1/(N+1) of the link.
func TestManyToOneLikeNoProtection(t *testing.T) {
	s, err := runner.ManyToOneScenario(10, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	x := steady(t, run(t, s, "seawall"), "A", time.Second)
	t.Logf("10 senders: X gets %.1f Mbps under seawall", x)
	if x > 0.95*450 {
		t.Errorf("X gets %.1f Mbps, want below its guarantee (Seawall gives none)", x)
	}
}

const twoSenders = `name: two-senders
duration: 4s
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 3, edge: 1Gbps}}
tenants:
  - {name: A, guarantee: %s, vms: [{name: a-rx, server: s1}, {name: a-tx, server: s2}]}
  - {name: B, guarantee: %s, vms: [{name: b-rx, server: s1}, {name: b-tx, server: s3}]}
workloads:
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx, connections: %d}
`

// Seawall shares per source by weight, whatever the number of
// connections: one connection against ten on a 1 Gbps link gets about
// half (without protection, 1/11); weights 1:2 get about 1:2.
func TestPerSourceWeightedSharing(t *testing.T) {
	equal := scenario(t, fmt.Sprintf(twoSenders, "450Mbps", "450Mbps", 10))
	a, b := steady(t, run(t, equal, "seawall"), "A", time.Second), steady(t, run(t, equal, "seawall"), "B", time.Second)
	none := steady(t, run(t, equal, "none"), "A", time.Second)
	weighted := scenario(t, fmt.Sprintf(twoSenders, "150Mbps", "300Mbps", 1))
	rw := run(t, weighted, "seawall")
	wa, wb := steady(t, rw, "A", time.Second), steady(t, rw, "B", time.Second)
	t.Logf("1 vs 10 connections: %.1f vs %.1f Mbps (none: %.1f); weights 1:2: %.1f vs %.1f Mbps", a, b, none, wa, wb)
	if r := b / a; r < 0.8 || r > 1.25 {
		t.Errorf("equal weights, 1 vs 10 connections: ratio %.2f, want about 1", r)
	}
	if r := wb / wa; r < 1.5 || r > 3 {
		t.Errorf("weights 1:2: ratio %.2f, want about 2", r)
	}
}

func TestWorkConserving(t *testing.T) {
	s := scenario(t, `name: alone
duration: 3s
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 2, edge: 1Gbps}}
tenants:
  - {name: A, guarantee: 450Mbps, vms: [{name: a-rx, server: s1}, {name: a-tx, server: s2}]}
workloads:
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
`)
	x := steady(t, run(t, s, "seawall"), "A", 1500*time.Millisecond)
	t.Logf("alone: %.1f Mbps", x)
	if x < 750 {
		t.Errorf("alone: %.1f Mbps, want ≥ 750", x)
	}
}
