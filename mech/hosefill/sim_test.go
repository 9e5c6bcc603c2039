package hosefill_test

import (
	"context"
	"testing"

	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Guarantees hold against unresponsive senders: a TCP tenant whose
// receiver's link is flooded by UDP from the start never sent a byte, so
// the controller, which allocates only pairs it has seen, gave the link
// to the UDP pairs and the TCP tenant got nothing for the whole run
// (random network scenarios 29 and 30). Every tenant must be served
// (≥ 95% of its guarantee in ≥ 95% of the samples, eval's compliance).
func TestGuaranteesBehindUDPSim(t *testing.T) {
	cases := []struct{ name, doc string }{
		{"TCP pair behind UDP into the same server", `name: tcp-behind-udp
duration: 3s
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 4, edge: 1Gbps}}
tenants:
  - name: B
    guarantee: 300Mbps
    vms: [{name: b1, server: s1}, {name: b2, server: s2}, {name: b3, server: s3}]
  - name: C
    guarantee: 500Mbps
    vms: [{name: c1, server: s1}, {name: c2, server: s4}]
workloads:
  - {tenant: B, kind: udp, src: b2, dst: b1, rate: 1Gbps}
  - {tenant: B, kind: udp, src: b3, dst: b1, rate: 1.2Gbps}
  - {tenant: C, kind: tcp, src: c2, dst: c1, connections: 16}
`},
		{"incasts behind two UDP tenants", `name: incast-behind-udp
duration: 3s
topology: {kind: two-tier, two_tier: {racks: 2, servers_per_rack: 4, edge: 1Gbps}}
tenants:
  - name: A
    guarantee: 160Mbps
    vms: [{name: a1, server: s1}, {name: a2, server: s2}, {name: a3, server: s3}, {name: a4, server: s5}]
  - name: C
    guarantee: 180Mbps
    vms: [{name: c1, server: s1}, {name: c2, server: s6}]
  - name: D
    guarantee: 80Mbps
    vms: [{name: d1, server: s1}, {name: d2, server: s7}]
workloads:
  - {tenant: A, kind: tcp, src: [a2, a3, a4], dst: a1}
  - {tenant: C, kind: udp, src: c2, dst: c1, rate: 1.1Gbps}
  - {tenant: D, kind: udp, src: d2, dst: d1, rate: 500Mbps}
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := spec.Parse([]byte(tc.doc), tc.name+".yaml")
			if err != nil {
				t.Fatal(err)
			}
			s, err := runner.Prepare(sc)
			if err != nil {
				t.Fatal(err)
			}
			r, err := runner.Run(context.Background(), s, "hosefill", runner.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range r.Tenants {
				t.Logf("%s: %.1f Mbps (guarantee %.1f, ideal %.1f), compliance %.3f", tr.Name, tr.MeanThroughput, tr.Guarantee,
					tr.IdealThroughput, tr.Compliance)
				if tr.Compliance < 0.95 {
					t.Errorf("tenant %s: compliance %.3f, want ≥ 0.95", tr.Name, tr.Compliance)
				}
			}
		})
	}
}

// Fig. 9 in small: x's elephant to z and y's to t share s1's uplink
// (900 Mbps reserved); x also sends 10 KB flows to five VMs, 100 a
// second. A short flow on an idle pair started at min_rate (its fill share
// on the full link) and crawled, short of its guarantee, for a period or
// more; and the pair, seen below its limit across a full link, was deemed
// starved and given a guarantee taken from x's elephant for a period in
// which it sent nothing: X at 39% compliance, the elephant at 320 Mbps.
func TestShortFlowsSim(t *testing.T) {
	sc, err := spec.Parse([]byte(`name: short-flows
duration: 4s
dt: 1ms
seed: 1
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 4, edge: 1Gbps}}
tenants:
  - name: X
    in: 450Mbps
    vms: [{name: x, server: s1, out: 450Mbps}, {name: z, server: s2}, {name: h1, server: s4}, {name: h2, server: s4},
          {name: h3, server: s4}, {name: h4, server: s4}, {name: h5, server: s4}]
  - name: Y
    guarantee: 450Mbps
    vms: [{name: y, server: s1}, {name: t, server: s3}]
workloads:
  - {tenant: X, kind: tcp, src: x, dst: z}
  - {tenant: Y, kind: tcp, src: y, dst: t}
  - {tenant: X, kind: flows, arrival_rate: 20, sizes: {dist: fixed, mean: 10KB}, src: x, dst: [h1, h2, h3, h4, h5]}
`), "short-flows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := runner.Prepare(sc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.Run(context.Background(), s, "hosefill", runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("work conservation %.3f", r.WorkConservation)
	for _, tr := range r.Tenants {
		t.Logf("%s: %.1f Mbps (ideal %.1f), compliance %.3f", tr.Name, tr.MeanThroughput, tr.IdealThroughput, tr.Compliance)
		if tr.Compliance < 0.95 {
			t.Errorf("tenant %s: compliance %.3f, want ≥ 0.95", tr.Name, tr.Compliance)
		}
		if tr.MeanThroughput < 0.9*tr.IdealThroughput {
			t.Errorf("tenant %s: %.1f Mbps, want ≥ 90%% of its ideal %.1f", tr.Name, tr.MeanThroughput, tr.IdealThroughput)
		}
	}
}
