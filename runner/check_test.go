package runner

import (
	"math"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/spec"
)

const checkScenario = `name: check
duration: 100ms
dt: 1ms
topology:
  kind: two-tier
  two_tier: {racks: 1, servers_per_rack: 3, edge: 1Gbps}
tenants:
  - {name: T, guarantee: 450Mbps, vms: [{name: t-rx, server: s1}, {name: t-tx, server: s2}]}
  - {name: U, guarantee: 450Mbps, vms: [{name: u-rx, server: s1}, {name: u-tx, server: s3}]}
workloads:
  - {name: tcp, tenant: T, kind: tcp, src: t-tx, dst: t-rx}
  - {name: udp, tenant: U, kind: udp, src: u-tx, dst: u-rx, rate: 800Mbps}
mechanism: {name: elasticswitch}
`

// Check refuses, before any run, what the evaluation or the report would
// refuse after it. spec now bounds rates to a representable range, so the
// numbers are set past it here, after Prepare, to reach the backstop.
func TestCheckOracle(t *testing.T) {
	cases := []struct {
		name  string
		mut   func(s *Scenario)
		mechs []string
		want  []string // none: no error
	}{
		{"fine", func(*Scenario) {}, nil, nil},
		{"fine, compared", func(*Scenario) {}, []string{"none", "static", "elasticswitch"}, nil},
		{"huge link capacities", func(s *Scenario) {
			for i := range s.Topo.Links {
				s.Topo.Links[i].Capacity = 1e308
			}
		}, nil, []string{"rates too large to evaluate", "overflow float64"}},
		{"tiny guarantee", func(s *Scenario) { s.Spec.Tenants[0].Guarantee = spec.Rate(1e-300) }, nil,
			[]string{"the evaluation's ideal allocation cannot be computed"}},
		{"two unknown mechanisms and the oracle", func(s *Scenario) {
			for i := range s.Topo.Links {
				s.Topo.Links[i].Capacity = math.MaxFloat64
			}
		}, []string{"static", "magic", "wizard"},
			[]string{`unknown mechanism "magic"`, `unknown mechanism "wizard"`, "rates too large to evaluate"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, err := spec.Parse([]byte(checkScenario), "check.yaml")
			if err != nil {
				t.Fatal(err)
			}
			s, err := Prepare(sc)
			if err != nil {
				t.Fatal(err)
			}
			c.mut(s)
			err = Check(s, c.mechs)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check: no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check: %q does not mention %q", err, w)
				}
			}
		})
	}
}
