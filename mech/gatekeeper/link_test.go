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

// scale multiplies every rate of a scenario (links, guarantees, workload
// rates) by k and drops the mechanism's parameters.
func scale(k float64) func(*spec.Scenario) {
	return func(sc *spec.Scenario) {
		r := func(x *spec.Rate) { *x = spec.Rate(k * float64(*x)) }
		if tt := sc.Topology.TwoTier; tt != nil {
			r(&tt.Edge)
			r(&tt.Core)
		}
		for i := range sc.Tenants {
			t := &sc.Tenants[i]
			r(&t.Guarantee)
			r(&t.In)
			r(&t.Out)
			for j := range t.VMs {
				r(&t.VMs[j].Guarantee)
				r(&t.VMs[j].In)
				r(&t.VMs[j].Out)
			}
		}
		for i := range sc.Workloads {
			r(&sc.Workloads[i].Rate)
		}
		sc.Mechanism.Params = nil
	}
}

// The shipped Gatekeeper scenarios with every rate ×10, under Gatekeeper
// with no parameters, keep the work conservation and the worst tenant's
// compliance they have at 1 Gbps (within 5 points).
func TestLinkFromModelScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, file := range []string{"gatekeeper-fig5-rx.yaml", "gatekeeper-full-link.yaml", "gatekeeper-incast.yaml", "gatekeeper-churn.yaml"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			var wc, worst [2]float64
			for i, k := range []float64{1, 10} {
				r := run(t, load(t, file, scale(k)), variant{"gatekeeper", "gatekeeper", nil})
				wc[i], worst[i] = r.WorkConservation, r.Worst.Compliance
			}
			t.Logf("%s: 1 Gbps: work conservation %.3f, worst tenant compliance %.3f; 10 Gbps: %.3f, %.3f", file, wc[0], worst[0], wc[1], worst[1])
			if wc[1] < wc[0]-0.05 {
				t.Errorf("work conservation %.3f at 10 Gbps, more than 5 points below the %.3f at 1 Gbps", wc[1], wc[0])
			}
			if worst[1] < worst[0]-0.05 {
				t.Errorf("worst tenant's compliance %.3f at 10 Gbps against %.3f at 1 Gbps", worst[1], worst[0])
			}
		})
	}
}
