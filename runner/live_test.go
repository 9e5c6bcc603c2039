package runner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// joinScenario: tenant B joins at 2 s, floods A's receiver with UDP until
// 6 s and leaves.
const joinScenario = `
name: join
duration: 8s
topology:
  kind: two-tier
  two_tier: {racks: 1, servers_per_rack: 3, edge: 1Gbps}
tenants:
  - name: A
    guarantee: 450Mbps
    vms: [{name: a1, server: s1}, {name: a2, server: s3}]
  - name: B
    guarantee: 450Mbps
    join: 2s
    leave: 6s
    vms: [{name: b1, server: s2}, {name: b2, server: s3}]
workloads:
  - {tenant: A, kind: tcp, src: a1, dst: a2}
  - {tenant: B, kind: udp, src: b1, dst: b2, rate: 1Gbps, start: 2s, stop: 6s}
`

// A scenario's tenant that joins and leaves reaches the mechanism through
// the driver core: ElasticSwitch keeps A's guarantee against the newcomer's
// flood; a mechanism whose agents cannot take tenants at runtime fails
// with the reason.
func TestScenarioTenantJoins(t *testing.T) {
	sc, err := spec.Parse([]byte(joinScenario), "join.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := runner.Prepare(sc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.Run(context.Background(), s, "elasticswitch", runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A's mean over 3–6 s, once B has joined and floods (samples of 10 ms).
	mean := func(rep *eval.Report) float64 {
		x := tenant(t, rep, "A").Series.Achieved[300:600]
		sum := 0.0
		for _, v := range x {
			sum += v
		}
		return sum / float64(len(x))
	}
	if got := mean(r); got < 0.95*450 {
		t.Errorf("A gets %.0f Mbps while B floods under ElasticSwitch, want ≥ 95%% of 450", got)
	}
	none, err := runner.Run(context.Background(), s, "none", runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := mean(none); got >= 0.95*450 {
		t.Errorf("A gets %.0f Mbps under none: the flood should hurt it", got)
	}
	// Refused before the run (it used to fail at the join, mid-run), with
	// the file and the field path.
	_, err = runner.Run(context.Background(), s, "seawall", runner.Options{})
	if err == nil || !strings.Contains(err.Error(), "join.yaml: tenants[1]: joins or leaves during the run, but mechanism seawall cannot take tenants at runtime") {
		t.Errorf("seawall: %v, want a refusal naming the file and the tenant", err)
	}
}

// Preparing a scenario (`bulkhead validate`, `sim`) checks its mechanism:
// the name, the parameters, and that it can take tenants that join.
func TestPrepareChecksMechanism(t *testing.T) {
	for _, tc := range []struct{ mechanism, want string }{
		{"mechanism: {name: elasticswich}", `join.yaml: mechanism.name: unknown mechanism "elasticswich"`},
		{"mechanism: {name: elasticswitch, params: {gp_margin: 2}}", "join.yaml: mechanism.params.gp_margin: must be in [0, 1), got 2"},
		{"mechanism: {name: seawall}", "join.yaml: tenants[1]: joins or leaves during the run, but mechanism seawall cannot take tenants at runtime"},
		{"mechanism: {name: gatekeeper}", ""},
	} {
		sc, err := spec.Parse([]byte(joinScenario+tc.mechanism+"\n"), "join.yaml")
		if err != nil {
			t.Fatal(err)
		}
		_, err = runner.Prepare(sc)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.mechanism, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.mechanism, err, tc.want)
		}
	}
}
