package gatekeeper_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Gatekeeper takes each host's link rate from the model, not from a
// parameter the user must repeat: with no parameters, a 10 Gbps datacenter
// is as well used, and guarantees as well kept, as a 1 Gbps one scaled
// down by ten.
func TestLinkFromModel(t *testing.T) {
	scenario := func(edge float64) string {
		g := 0.45 * edge
		return fmt.Sprintf(`
name: link-%[1]g
duration: 6s
units: Gbps
topology:
  kind: two-tier
  two_tier: {racks: 1, servers_per_rack: 3, edge: %[1]gGbps}
tenants:
  - {name: A, guarantee: %[2]gGbps, vms: [{name: a1, server: s1}, {name: a2, server: s3}]}
  - {name: B, guarantee: %[2]gGbps, vms: [{name: b1, server: s2}, {name: b2, server: s3}]}
workloads:
  - {tenant: A, kind: tcp, src: a1, dst: a2}
  - {tenant: B, kind: udp, src: b1, dst: b2, rate: %[1]gGbps}
mechanism:
  name: gatekeeper
`, edge, g)
	}
	type result struct{ wc, worst float64 }
	run := func(edge float64) result {
		sc, err := spec.Parse([]byte(scenario(edge)), "link.yaml")
		if err != nil {
			t.Fatal(err)
		}
		s, err := runner.Prepare(sc)
		if err != nil {
			t.Fatal(err)
		}
		r, err := runner.Run(context.Background(), s, "gatekeeper", runner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return result{r.WorkConservation, r.Worst.Compliance}
	}
	one, ten := run(1), run(10)
	t.Logf("1 Gbps: work conservation %.3f, worst tenant compliance %.3f; 10 Gbps: %.3f, %.3f", one.wc, one.worst, ten.wc, ten.worst)
	if ten.wc < one.wc-0.05 {
		t.Errorf("work conservation %.3f at 10 Gbps, more than 5 points below the %.3f at 1 Gbps", ten.wc, one.wc)
	}
	if ten.worst < one.worst-0.05 {
		t.Errorf("worst tenant's compliance %.3f at 10 Gbps against %.3f at 1 Gbps", ten.worst, one.worst)
	}
}
