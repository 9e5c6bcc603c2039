package spec_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/spec"
)

// pulsarBase is a small valid scenario with appliances: a key-value store
// and a filestore; tenant A uses only the network, B the key-value store,
// C and D the filestore (D the key-value store too), E is best effort.
const pulsarBase = `
name: pulsar
duration: 10s
units: MT/s
topology:
  kind: two-tier
  two_tier: {racks: 2, servers_per_rack: 4, edge: 10Gbps}
appliances:
  - {name: kv, server: s8, model: kv, capacity_max: 4000MT/s}
  - {name: fs, server: s4, model: filestore}
tenants:
  - name: A
    guarantee: 1Gbps
    vms: [{name: a1, server: s1}, {name: a2, server: s2}]
  - name: B
    guarantee: 1Gbps
    vms: [{name: b1, server: s3}, {name: b2, server: s5}]
    vdc:
      appliances: [{appliance: kv, guarantee: 1600MT/s}]
      weights: {b1->kv: 2, b1->b2: 0.5}
  - name: C
    guarantee: 1Gbps
    vms: [{name: c1, server: s6}]
    vdc:
      appliances: [{appliance: fs, guarantee: 800MT/s}]
  - name: D
    guarantee: 1Gbps
    vms: [{name: d1, server: s7}]
    vdc:
      policy: maxmin
      appliances: [{appliance: kv, guarantee: 1000MT/s}, {appliance: fs, guarantee: 800MT/s, max: 1200MT/s}]
  - name: E
    best_effort: true
    vms: [{name: e1, server: s7}]
workloads:
  - {name: wa, tenant: A, kind: tcp, src: a1, dst: a2}
  - name: wb
    tenant: B
    kind: requests
    src: [b1, b2]
    appliance: kv
    outstanding: 8
    mix: [{type: get, size: 8KB, fraction: 0.61}, {type: put, size: 8KB, fraction: 0.39}]
  - {name: wd, tenant: D, kind: requests, src: d1, appliance: fs, outstanding: 8, mix: [{type: read, size: 64KB, fraction: 0.56}, {type: write, size: 64KB, fraction: 0.44}]}
  - {name: wc, tenant: C, kind: requests, src: c1, appliance: fs, request_rate: 10000, mix: [{type: write, size: 512}]}
  - {name: we, tenant: E, kind: requests, src: e1, appliance: kv, outstanding: 1, mix: [{type: get, size: 64KB}]}
`

func parsePulsar(t *testing.T) *spec.Scenario {
	t.Helper()
	s, err := spec.Parse([]byte(pulsarBase), "scenario.yaml")
	if err != nil {
		t.Fatalf("pulsar base scenario: %v", err)
	}
	return s
}

func TestApplianceDefaults(t *testing.T) {
	s := parsePulsar(t)
	kv := s.Appliances[0]
	if kv.Parallelism != 1 || !reflect.DeepEqual(kv.VirtualCost, []spec.VirtualCost{spec.DefaultVirtualCost()}) {
		t.Errorf("kv defaults: %+v", kv)
	}
	if s.Tenants[1].VDC.Policy != "drf" || s.Tenants[3].VDC.Policy != "maxmin" {
		t.Errorf("policies %q %q", s.Tenants[1].VDC.Policy, s.Tenants[3].VDC.Policy)
	}
	wb := s.Workloads[1]
	if wb.Name != "wb" || wb.Mix[0].Request != 64 || wb.Mix[0].Response != 8000 || wb.Mix[1].Request != 8000 || wb.Mix[1].Response != 64 {
		t.Errorf("wb mix defaults: %+v", wb.Mix)
	}
	if wc := s.Workloads[3]; wc.Mix[0].Fraction != 1 {
		t.Errorf("single-entry fraction: %+v", wc.Mix)
	}

	// A cost function for one type keeps the default for the others; one
	// for all types replaces it; defaults are idempotent.
	s2 := &spec.Scenario{Appliances: []spec.Appliance{
		{Model: "kv", VirtualCost: []spec.VirtualCost{{Type: "put", Points: []spec.CostPoint{{Size: 0, Tokens: 1}}}}},
		{Model: "kv", Parallelism: 4, VirtualCost: []spec.VirtualCost{{Points: []spec.CostPoint{{Size: 0, Tokens: 1}}}}},
	}, Tenants: []spec.Tenant{{VDC: &spec.VDC{}}},
		Workloads: []spec.Workload{{Kind: "requests", Mix: []spec.RequestType{{Type: "aes", Size: 100, Fraction: 0.5, Response: 10}, {Type: "scan", Size: 7}}}}}
	s2.ApplyDefaults()
	s2.ApplyDefaults()
	if got := s2.Appliances[0].VirtualCost; len(got) != 2 || got[0].Type != "put" || !reflect.DeepEqual(got[1], spec.DefaultVirtualCost()) {
		t.Errorf("per-type cost function: %+v", got)
	}
	if got := s2.Appliances[1]; len(got.VirtualCost) != 1 || got.Parallelism != 4 {
		t.Errorf("all-types cost function: %+v", got)
	}
	if s2.Tenants[0].VDC.Policy != "drf" {
		t.Errorf("policy %q", s2.Tenants[0].VDC.Policy)
	}
	if m := s2.Workloads[0].Mix; m[0].Request != 100 || m[0].Response != 10 || m[1].Request != 7 || m[1].Response != 7 || m[1].Fraction != 0 {
		t.Errorf("mix: %+v", m)
	}
}

func TestApplianceAccessors(t *testing.T) {
	s := parsePulsar(t)
	if a, ok := s.LookupAppliance("fs"); !ok || a.Model != "filestore" || a != &s.Appliances[1] {
		t.Errorf("LookupAppliance(fs) = %+v, %v", a, ok)
	}
	if _, ok := s.LookupAppliance("b1"); ok {
		t.Error("LookupAppliance(b1) found")
	}
	wb := s.Workloads[1]
	if got := wb.Pairs(); got != nil {
		t.Errorf("requests Pairs = %v", got)
	}
	if got := wb.Sources(); !reflect.DeepEqual(got, []string{"b1", "b2"}) {
		t.Errorf("Sources = %v", got)
	}
	if got := s.Workloads[0].Sources(); !reflect.DeepEqual(got, []string{"a1"}) {
		t.Errorf("tcp Sources = %v", got)
	}
	if g, ok := s.Tenants[3].VDC.Guarantee("fs"); !ok || g.Guarantee != 800e6 || g.Max != 1200e6 {
		t.Errorf("Guarantee(fs) = %+v, %v", g, ok)
	}
	var none *spec.VDC
	if _, ok := none.Guarantee("fs"); ok {
		t.Error("nil VDC has a guarantee")
	}
	if s.UnitScale() != 8e6 || s.TokenScale() != 1e6 {
		t.Errorf("MT/s scales %v %v", s.UnitScale(), s.TokenScale())
	}
	for _, c := range []struct {
		units        string
		canon        string
		unit, tokens float64
	}{
		{"T/s", "T/s", 8, 1}, {"kt/s", "KT/s", 8e3, 1e3}, {"MT/S", "MT/s", 8e6, 1e6}, {"GT/s", "GT/s", 8e9, 1e9},
		{"Mbps", "Mbps", 1e6, 125e3}, {"bps", "bps", 1, 0.125}, {"Gbps", "Gbps", 1e9, 125e6},
	} {
		sc := &spec.Scenario{Units: c.units}
		sc.ApplyDefaults()
		if sc.Units != c.canon || sc.UnitScale() != c.unit || sc.TokenScale() != c.tokens {
			t.Errorf("units %q: %q, UnitScale %v, TokenScale %v", c.units, sc.Units, sc.UnitScale(), sc.TokenScale())
		}
	}
}

// TestApplianceValidation checks one kind of problem with appliances,
// VDCs and requests workloads per case: the exact messages and nothing
// else.
func TestApplianceValidation(t *testing.T) {
	us := func(f float64) spec.Duration { return spec.Duration(f * float64(time.Microsecond)) }
	pts := func(xy ...float64) []spec.CostPoint {
		var out []spec.CostPoint
		for i := 0; i+1 < len(xy); i += 2 {
			out = append(out, spec.CostPoint{Size: spec.Bytes(xy[i]), Tokens: spec.Tokens(xy[i+1])})
		}
		return out
	}
	cases := []struct {
		name   string
		mutate func(s *spec.Scenario)
		want   []string
	}{
		{"two request workloads from one VM to one appliance", func(s *spec.Scenario) {
			w := s.Workloads[2]
			w.Name = "wd2"
			s.Workloads = append(s.Workloads, w)
		},
			[]string{`scenario.yaml: workloads[5].src[0]: VM "d1" already sends requests to "fs" in workloads[2] (one workload per VM and destination)`}},
		// Appliances.
		{"name required", func(s *spec.Scenario) {
			s.Appliances[1].Name = ""
			s.Tenants[2].VDC = nil
			s.Tenants[3].VDC.Appliances = s.Tenants[3].VDC.Appliances[:1]
			s.Workloads = s.Workloads[:2]
		},
			[]string{`scenario.yaml: appliances[1].name: required`}},
		{"duplicate appliance", func(s *spec.Scenario) { s.Appliances[1].Name = "kv"; s.Appliances[1].CapacityMax = 0 },
			[]string{`scenario.yaml: tenants[2].vdc.appliances[0].appliance: unknown appliance "fs"`,
				`scenario.yaml: tenants[3].vdc.appliances[1].appliance: unknown appliance "fs"`,
				`scenario.yaml: appliances[1].name: duplicate appliance "kv" (also appliances[0])`,
				`scenario.yaml: workloads[2].appliance: unknown appliance "fs"`,
				`scenario.yaml: workloads[3].appliance: unknown appliance "fs"`}},
		{"name of a VM", func(s *spec.Scenario) {
			s.Appliances = append(s.Appliances, spec.Appliance{Name: "c1", Server: "s1", Model: "kv", Parallelism: 1})
		}, []string{`scenario.yaml: appliances[2].name: "c1" is also the name of a VM (tenants[2].vms[0])`}},
		{"server required", func(s *spec.Scenario) { s.Appliances[0].Server = "" },
			[]string{`scenario.yaml: appliances[0].server: required (or hypervisor: true)`}},
		{"hypervisor appliance", func(s *spec.Scenario) { s.Appliances[0].Server = ""; s.Appliances[0].Hypervisor = true }, nil},
		{"hypervisor appliance with a server", func(s *spec.Scenario) { s.Appliances[0].Hypervisor = true },
			[]string{`scenario.yaml: appliances[0].server: not used by a hypervisor appliance (it runs on the servers of the VMs that use it)`}},
		{"unknown server", func(s *spec.Scenario) { s.Appliances[0].Server = "s9" },
			[]string{`scenario.yaml: appliances[0].server: unknown server "s9"`}},
		{"server is a switch", func(s *spec.Scenario) { useExplicit(s); s.Appliances[0].Server = "sw2"; s.Appliances[1].Server = "h3" },
			[]string{`scenario.yaml: appliances[0].server: "sw2" is a switch, not a server`}},
		{"server not checked on a bad topology", func(s *spec.Scenario) { s.Topology.TwoTier.Racks = 0; s.Appliances[0].Server = "s9" },
			[]string{`scenario.yaml: topology.two_tier.racks: must be at least 1, got 0`}},
		{"model required", func(s *spec.Scenario) { s.Appliances[1].Model = "" },
			[]string{`scenario.yaml: appliances[1].model: required (kv, filestore, encryption or custom)`}},
		{"unknown model", func(s *spec.Scenario) { s.Appliances[1].Model = "ssd" },
			[]string{`scenario.yaml: appliances[1].model: unknown model "ssd" (use kv, filestore, encryption or custom)`}},
		{"custom needs costs", func(s *spec.Scenario) { s.Appliances[1].Model = "custom" },
			[]string{`scenario.yaml: appliances[1].costs: required for model custom (the service cost of every request type)`}},
		{"custom types", func(s *spec.Scenario) {
			s.Appliances[1].Model = "custom"
			s.Appliances[1].Costs = []spec.ServiceCost{{Type: "read", Base: us(1)}, {Type: "write", PerKB: us(1)}}
		}, nil},
		{"custom type unknown", func(s *spec.Scenario) {
			s.Appliances[1].Model = "custom"
			s.Appliances[1].Costs = []spec.ServiceCost{{Type: "lookup", Base: us(1)}, {Type: "write", PerKB: us(1)}}
		}, []string{`scenario.yaml: workloads[2].mix[0].type: unknown type "read" for appliance "fs" (use lookup or write)`}},
		{"parallelism", func(s *spec.Scenario) { s.Appliances[0].Parallelism = -2 },
			[]string{`scenario.yaml: appliances[0].parallelism: must be a positive number, got -2`}},
		{"cost type", func(s *spec.Scenario) {
			s.Appliances[0].Costs = []spec.ServiceCost{{Type: "get", Base: us(1)}, {Base: us(1)}, {Type: "get", Base: us(2)}}
		}, []string{`scenario.yaml: appliances[0].costs[1].type: required`,
			`scenario.yaml: appliances[0].costs[2].type: duplicate type "get" (also appliances[0].costs[0])`}},
		{"negative costs", func(s *spec.Scenario) {
			s.Appliances[0].Costs = []spec.ServiceCost{{Type: "get", Base: us(-1)}, {Type: "put", Base: us(1), PerKB: us(-0.5)}}
		}, []string{`scenario.yaml: appliances[0].costs[0].base: must not be negative, got -1µs`,
			`scenario.yaml: appliances[0].costs[1].per_kb: must not be negative, got -500ns`}},
		{"zero cost", func(s *spec.Scenario) { s.Appliances[0].Costs = []spec.ServiceCost{{Type: "get"}} },
			[]string{`scenario.yaml: appliances[0].costs[0]: base and per_kb are both zero: a request must take some service time`}},

		// Virtual cost functions.
		{"decreasing cost function", func(s *spec.Scenario) {
			s.Appliances[0].VirtualCost = []spec.VirtualCost{{Points: pts(0, 8000, 8000, 8000, 16000, 4000)}}
		}, []string{`scenario.yaml: appliances[0].virtual_cost[0].points[2].tokens: 4000 is less than the previous point's 8000: a cost function must not decrease with request size`}},
		{"negative cost function", func(s *spec.Scenario) {
			s.Appliances[0].VirtualCost = []spec.VirtualCost{{Points: pts(0, -1, 1000, 1000)}}
		}, []string{`scenario.yaml: appliances[0].virtual_cost[0].points[0].tokens: must be a non-negative number of tokens, got -1`}},
		{"sizes not increasing", func(s *spec.Scenario) {
			s.Appliances[0].VirtualCost = []spec.VirtualCost{{Points: pts(-1, 0, 8000, 8000, 8000, 9000)}}
		}, []string{`scenario.yaml: appliances[0].virtual_cost[0].points[0].size: must be a non-negative size, got -1`,
			`scenario.yaml: appliances[0].virtual_cost[0].points[2].size: 8000 is not larger than the previous size 8000 (sizes must increase)`}},
		{"points required", func(s *spec.Scenario) { s.Appliances[0].VirtualCost[0].Points = nil },
			[]string{`scenario.yaml: appliances[0].virtual_cost[0].points: required (at least one point of size and tokens)`}},
		{"free requests", func(s *spec.Scenario) { s.Appliances[0].VirtualCost[0].Points = pts(0, 0, 1000, 0) },
			[]string{`scenario.yaml: appliances[0].virtual_cost[0].points: every point costs 0 tokens: requests would be free`}},
		{"negative step", func(s *spec.Scenario) { s.Appliances[0].VirtualCost[0].Step = -1 },
			[]string{`scenario.yaml: appliances[0].virtual_cost[0].step: must not be negative, got -1`}},
		{"cost function types", func(s *spec.Scenario) {
			s.Appliances[1].VirtualCost = append(s.Appliances[1].VirtualCost,
				spec.VirtualCost{Type: "read", Points: pts(0, 1)}, spec.VirtualCost{Type: "read", Points: pts(0, 1)},
				spec.VirtualCost{Type: "get", Points: pts(0, 1)}, spec.VirtualCost{Points: pts(0, 1)})
		}, []string{`scenario.yaml: appliances[1].virtual_cost[2].type: duplicate cost function for type "read" (also appliances[1].virtual_cost[1])`,
			`scenario.yaml: appliances[1].virtual_cost[3].type: unknown type "get" for appliance "fs" (use read, write or cwrite)`,
			`scenario.yaml: appliances[1].virtual_cost[4]: duplicate cost function for all types (also appliances[1].virtual_cost[0])`}},

		// Capacity bounds and guarantees.
		{"negative capacity", func(s *spec.Scenario) { s.Appliances[1].CapacityMin = -5 },
			[]string{`scenario.yaml: appliances[1].capacity_min: must not be negative, got -5`}},
		{"capacity_min above capacity_max", func(s *spec.Scenario) { s.Appliances[0].CapacityMin = 5000e6 },
			[]string{`scenario.yaml: appliances[0].capacity_min: 5000M tokens/s is more than capacity_max 4000M tokens/s`}},
		{"guarantees beyond capacity", func(s *spec.Scenario) {
			s.Appliances[0].CapacityMax = 4000
			s.Tenants[1].VDC.Appliances[0].Guarantee = 3000
			s.Tenants[3].VDC.Appliances[0].Guarantee = 2000
		}, []string{`scenario.yaml: appliances[0]: guarantees sum to 5000 tokens/s, more than capacity_max 4000 tokens/s (tenants B 3000, D 2000)`}},
		{"guarantees beyond capacity (MT/s)", func(s *spec.Scenario) { s.Tenants[3].VDC.Appliances[0].Guarantee = 2500e6 },
			[]string{`scenario.yaml: appliances[0]: guarantees sum to 4100M tokens/s, more than capacity_max 4000M tokens/s (tenants B 1600M, D 2500M)`}},

		// VDCs.
		{"unknown policy", func(s *spec.Scenario) { s.Tenants[1].VDC.Policy = "wfq" },
			[]string{`scenario.yaml: tenants[1].vdc.policy: unknown policy "wfq" (use drf, maxmin or firstfit)`}},
		{"policy required", func(s *spec.Scenario) { s.Tenants[1].VDC.Policy = "" },
			[]string{`scenario.yaml: tenants[1].vdc.policy: required (drf, maxmin or firstfit; ApplyDefaults sets drf)`}},
		{"global weight", func(s *spec.Scenario) { s.Tenants[1].VDC.GlobalWeight = -1 },
			[]string{`scenario.yaml: tenants[1].vdc.global_weight: must be a non-negative number, got -1`}},
		{"unknown appliance in VDC", func(s *spec.Scenario) { s.Tenants[2].VDC.Appliances[0].Appliance = "nfs" },
			[]string{`scenario.yaml: tenants[2].vdc.appliances[0].appliance: unknown appliance "nfs"`,
				`scenario.yaml: workloads[3].appliance: tenant "C" has no guarantee on appliance "fs" in its VDC`}},
		{"duplicate guarantee", func(s *spec.Scenario) { s.Tenants[3].VDC.Appliances[1].Appliance = "kv" },
			[]string{`scenario.yaml: tenants[3].vdc.appliances[1].appliance: duplicate guarantee on appliance "kv" (also tenants[3].vdc.appliances[0])`,
				`scenario.yaml: workloads[2].appliance: tenant "D" has no guarantee on appliance "fs" in its VDC`}},
		{"appliance required", func(s *spec.Scenario) {
			s.Tenants[1].VDC.Appliances = append(s.Tenants[1].VDC.Appliances, spec.ApplianceGuarantee{Guarantee: 1})
		}, []string{`scenario.yaml: tenants[1].vdc.appliances[1].appliance: required`}},
		{"guarantee required", func(s *spec.Scenario) { s.Tenants[2].VDC.Appliances[0].Guarantee = 0 },
			[]string{`scenario.yaml: tenants[2].vdc.appliances[0].guarantee: required (a positive rate of tokens such as "1600MT/s")`}},
		{"negative guarantee", func(s *spec.Scenario) { s.Tenants[2].VDC.Appliances[0].Guarantee = -1 },
			[]string{`scenario.yaml: tenants[2].vdc.appliances[0].guarantee: must be positive, got -1`}},
		{"max below guarantee", func(s *spec.Scenario) { s.Tenants[3].VDC.Appliances[1].Max = 500e6 },
			[]string{`scenario.yaml: tenants[3].vdc.appliances[1].max: 500M is less than the guarantee 800M`}},
		{"negative max", func(s *spec.Scenario) { s.Tenants[3].VDC.Appliances[1].Max = -1 },
			[]string{`scenario.yaml: tenants[3].vdc.appliances[1].max: must not be negative, got -1`}},
		{"best effort guarantee", func(s *spec.Scenario) {
			s.Tenants[4].VDC = &spec.VDC{Policy: "drf", Appliances: []spec.ApplianceGuarantee{{Appliance: "kv", Guarantee: 1e6}}}
		}, []string{`scenario.yaml: tenants[4].vdc.appliances[0].guarantee: a best_effort tenant has no guarantees`}},
		{"weights", func(s *spec.Scenario) {
			s.Tenants[1].VDC.Weights = map[string]float64{"b1->kv": 2, "b1": 1, "b9->kv": 1, "a1->kv": 1, "b2->fs": 1, "b2->c1": 1, "b2->b1": 0, "->kv": 1}
		}, []string{
			`scenario.yaml: tenants[1].vdc.weights.->kv: not of the form "src->dst" (a VM of the tenant, then a VM of the tenant or an appliance in its VDC)`,
			`scenario.yaml: tenants[1].vdc.weights.a1->kv: VM "a1" belongs to tenant "A", not "B"`,
			`scenario.yaml: tenants[1].vdc.weights.b1: not of the form "src->dst" (a VM of the tenant, then a VM of the tenant or an appliance in its VDC)`,
			`scenario.yaml: tenants[1].vdc.weights.b2->b1: must be a positive number, got 0`,
			`scenario.yaml: tenants[1].vdc.weights.b2->c1: "c1" is neither a VM of tenant "B" nor an appliance in its VDC`,
			`scenario.yaml: tenants[1].vdc.weights.b2->fs: "fs" is neither a VM of tenant "B" nor an appliance in its VDC`,
			`scenario.yaml: tenants[1].vdc.weights.b9->kv: unknown VM "b9"`,
		}},

		// Requests workloads.
		{"flow to an appliance outside its VDC", func(s *spec.Scenario) {
			s.Workloads[3].Appliance = "kv"
			s.Workloads[3].Mix[0].Type = "put"
		}, []string{`scenario.yaml: workloads[3].appliance: tenant "C" has no guarantee on appliance "kv" in its VDC`}},
		{"best effort needs no VDC", func(s *spec.Scenario) { s.Workloads[4].Appliance = "fs"; s.Workloads[4].Mix[0].Type = "read" }, nil},
		{"appliance required", func(s *spec.Scenario) { s.Workloads[1].Appliance = "" },
			[]string{`scenario.yaml: workloads[1].appliance: required for kind requests (the appliance the VMs send requests to), or dst (VMs)`}},
		{"unknown appliance", func(s *spec.Scenario) { s.Workloads[1].Appliance = "kvs" },
			[]string{`scenario.yaml: workloads[1].appliance: unknown appliance "kvs"`}},
		{"dst and appliance", func(s *spec.Scenario) { s.Workloads[1].Dst = spec.StringList{"b2"} },
			[]string{`scenario.yaml: workloads[1].dst: give dst (VMs) or appliance as the requests' destination, not both`}},
		{"dst of another tenant", func(s *spec.Scenario) { s.Workloads[1].Appliance = ""; s.Workloads[1].Dst = spec.StringList{"c1"} },
			[]string{`scenario.yaml: workloads[1].dst[0]: VM "c1" belongs to tenant "C", not "B"`}},
		{"via unknown appliance", func(s *spec.Scenario) { s.Workloads[1].Via = []spec.Via{{Appliance: "enc9", Type: "rc4"}} },
			[]string{`scenario.yaml: workloads[1].via[0].appliance: unknown appliance "enc9"`}},
		{"via is the destination", func(s *spec.Scenario) {
			s.Workloads[1].Via = []spec.Via{{Appliance: s.Workloads[1].Appliance, Type: "get"}}
		},
			[]string{`scenario.yaml: workloads[1].via[0].appliance: "kv" is the destination itself`}},
		{"src checked", func(s *spec.Scenario) { s.Workloads[1].Src = spec.StringList{"b1", "c1"} },
			[]string{`scenario.yaml: workloads[1].src[1]: VM "c1" belongs to tenant "C", not "B"`}},
		{"both loops", func(s *spec.Scenario) { s.Workloads[1].RequestRate = 100 },
			[]string{`scenario.yaml: workloads[1]: give outstanding (closed loop) or request_rate (open loop), not both`}},
		{"no loop", func(s *spec.Scenario) { s.Workloads[1].Outstanding = 0 },
			[]string{`scenario.yaml: workloads[1]: requests need outstanding (closed loop: requests in flight per VM) or request_rate (open loop: requests/s per VM)`}},
		{"negative outstanding", func(s *spec.Scenario) { s.Workloads[1].Outstanding = -4 },
			[]string{`scenario.yaml: workloads[1].outstanding: must be positive, got -4`}},
		{"negative request rate", func(s *spec.Scenario) { s.Workloads[3].RequestRate = -1 },
			[]string{`scenario.yaml: workloads[3].request_rate: must be a positive number of requests per second, got -1`}},
		{"mix required", func(s *spec.Scenario) { s.Workloads[1].Mix = nil },
			[]string{`scenario.yaml: workloads[1].mix: required for kind requests (request types with size and fraction)`}},
		{"mix type", func(s *spec.Scenario) { s.Workloads[1].Mix[0].Type = "read"; s.Workloads[1].Mix[1].Type = "" },
			[]string{`scenario.yaml: workloads[1].mix[0].type: unknown type "read" for appliance "kv" (use get or put)`,
				`scenario.yaml: workloads[1].mix[1].type: required`}},
		{"mix sizes", func(s *spec.Scenario) { s.Workloads[1].Mix[0].Size = 0; s.Workloads[1].Mix[1].Size = -1 },
			[]string{`scenario.yaml: workloads[1].mix[0].size: required (a positive size such as "8KB")`,
				`scenario.yaml: workloads[1].mix[1].size: must be a positive size, got -1`}},
		{"mix fractions", func(s *spec.Scenario) { s.Workloads[1].Mix[0].Fraction = 0; s.Workloads[1].Mix[1].Fraction = -0.5 },
			[]string{`scenario.yaml: workloads[1].mix[0].fraction: required (the share of the workload's requests of this entry, > 0)`,
				`scenario.yaml: workloads[1].mix[1].fraction: must be positive, got -0.5`}},
		{"fractions sum", func(s *spec.Scenario) { s.Workloads[1].Mix[1].Fraction = 0.3 },
			[]string{`scenario.yaml: workloads[1].mix: fractions sum to 0.91, not 1`}},
		{"fractions sum within 1e-6", func(s *spec.Scenario) { s.Workloads[1].Mix[1].Fraction = 0.3900005 }, nil},
		{"wire bytes", func(s *spec.Scenario) { s.Workloads[1].Mix[0].Request = -1; s.Workloads[1].Mix[1].Response = -2 },
			[]string{`scenario.yaml: workloads[1].mix[0].request: must not be negative, got -1`,
				`scenario.yaml: workloads[1].mix[1].response: must not be negative, got -2`}},
		{"fields of other kinds", func(s *spec.Scenario) {
			s.Workloads[1].Connections = 2 // allowed: the connections its requests are spread over
			s.Workloads[1].Rate = 1e6
			s.Workloads[1].ArrivalRate = 3
			s.Workloads[0].Appliance = "kv"
			s.Workloads[0].Outstanding = 1
			s.Workloads[0].Mix = s.Workloads[1].Mix
			s.Workloads[0].RequestRate = 1
		}, []string{`scenario.yaml: workloads[0].appliance: not used by kind tcp`,
			`scenario.yaml: workloads[0].mix: not used by kind tcp`,
			`scenario.yaml: workloads[0].outstanding: not used by kind tcp`,
			`scenario.yaml: workloads[0].request_rate: not used by kind tcp`,
			`scenario.yaml: workloads[1].arrival_rate: not used by kind requests`,
			`scenario.yaml: workloads[1].rate: not used by kind requests`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := parsePulsar(t)
			c.mutate(s)
			got := messages(s.Validate())
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

// TestApplianceDecodeErrors checks token values and unknown fields in the
// new sections through Parse.
func TestApplianceDecodeErrors(t *testing.T) {
	doc := strings.Replace(pulsarBase, "capacity_max: 4000MT/s", "capacity_max: 4000Mbps", 1)
	doc = strings.Replace(doc, "policy: maxmin", "polcy: maxmin", 1)
	_, err := spec.Parse([]byte(doc), "s.yaml")
	want := []string{
		`s.yaml:9: appliances[0].name: invalid tokens "4000Mbps": unknown unit "Mbps" (use K, M, G or T, optionally followed by T or T/s: "8K", "1600MT/s")`,
		`s.yaml:30: tenants[3].vdc.polcy: unknown field "polcy"`,
	}
	if got := messages(err); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestParamsTokens(t *testing.T) {
	p := spec.Params{"cap": "6840MT/s", "n": 8000, "bad": "5Mbps", "neg": -1}
	for _, c := range []struct {
		name string
		want float64
	}{{"cap", 6.84e9}, {"n", 8000}, {"missing", 42}} {
		if got, err := p.Tokens(c.name, 42); err != nil || got != c.want {
			t.Errorf("Tokens(%s) = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	for _, name := range []string{"bad", "neg"} {
		_, err := p.Tokens(name, 0)
		want := "mechanism.params." + name + `: expected an amount of tokens such as "1600MT/s", got `
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Tokens(%s) error %v", name, err)
		}
	}
}
