package spec_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/spec"
)

func dur(d time.Duration) spec.Duration { return spec.Duration(d) }

// explicitTopo is a valid explicit graph: h1, h2 under sw1, h3 under sw2,
// sw1—sw2.
func explicitTopo() spec.Topology {
	return spec.Topology{Kind: "explicit", Explicit: &spec.Explicit{
		Nodes: []spec.Node{
			{Name: "h1", Kind: "server"}, {Name: "h2", Kind: "server"}, {Name: "h3", Kind: "server"},
			{Name: "sw1", Kind: "switch"}, {Name: "sw2", Kind: "switch"},
		},
		Links: []spec.Link{
			{A: "h1", B: "sw1", Capacity: 1e9}, {A: "h2", B: "sw1", Capacity: 1e9},
			{A: "h3", B: "sw2", Capacity: 1e9}, {A: "sw1", B: "sw2", Capacity: 1e9},
		},
	}}
}

// useExplicit switches the base scenario to explicitTopo with VMs on h1..h3.
func useExplicit(s *spec.Scenario) {
	s.Topology = explicitTopo()
	for i := range s.Tenants {
		for j := range s.Tenants[i].VMs {
			s.Tenants[i].VMs[j].Server = []string{"h1", "h2", "h3"}[j%3]
		}
	}
}

// TestValidationErrors checks one kind of problem per case: the exact
// message(s), with file, path and expectation, and nothing else.
func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *spec.Scenario)
		want   []string
	}{
		// Run.
		{"name required", func(s *spec.Scenario) { s.Name = "" },
			[]string{`scenario.yaml: name: required`}},
		{"unknown units", func(s *spec.Scenario) { s.Units = "MBs" },
			[]string{`scenario.yaml: units: unknown unit "MBs" (use bps, Kbps, Mbps, Gbps, Tbps, T/s, KT/s, MT/s or GT/s)`}},
		{"duration required", func(s *spec.Scenario) { s.Duration = 0 },
			[]string{`scenario.yaml: duration: required (a positive duration such as "30s")`}},
		{"negative dt", func(s *spec.Scenario) { s.DT = dur(-time.Millisecond) },
			[]string{`scenario.yaml: dt: must be positive, got -1ms`}},
		{"dt longer than duration", func(s *spec.Scenario) { s.DT = dur(20 * time.Second); s.Outputs.Sample = dur(20 * time.Second) },
			[]string{`scenario.yaml: dt: 20s is longer than duration 10s`,
				`scenario.yaml: outputs.sample: 20s is longer than duration 10s`}},
		{"too many ticks", func(s *spec.Scenario) { s.DT = dur(10 * time.Nanosecond) },
			[]string{`scenario.yaml: dt: duration 10s at dt 10ns is 1000000000 ticks; at most 100000000 are allowed`}},
		{"sample shorter than dt", func(s *spec.Scenario) {
			s.DT = dur(10 * time.Millisecond)
			s.Outputs.Sample = dur(5 * time.Millisecond)
		},
			[]string{`scenario.yaml: outputs.sample: 5ms is shorter than dt 10ms`}},
		{"sample longer than duration", func(s *spec.Scenario) { s.Outputs.Sample = dur(time.Minute) },
			[]string{`scenario.yaml: outputs.sample: 1m0s is longer than duration 10s`}},
		{"mechanism name", func(s *spec.Scenario) { s.Mechanism.Name = "" },
			[]string{`scenario.yaml: mechanism.name: required`}},

		// Topology.
		{"topology kind required", func(s *spec.Scenario) { s.Topology.Kind = "" },
			[]string{`scenario.yaml: topology.kind: required (two-tier, fat-tree or explicit)`}},
		{"unknown topology kind", func(s *spec.Scenario) { s.Topology.Kind = "torus" },
			[]string{`scenario.yaml: topology.kind: unknown kind "torus" (use two-tier, fat-tree or explicit)`}},
		{"section for another kind", func(s *spec.Scenario) { s.Topology.Kind = "fat-tree" },
			[]string{`scenario.yaml: topology.two_tier: not used by kind fat-tree`,
				`scenario.yaml: topology.fat_tree: required for kind fat-tree`}},
		{"racks", func(s *spec.Scenario) { s.Topology.TwoTier.Racks = 0 },
			[]string{`scenario.yaml: topology.two_tier.racks: must be at least 1, got 0`}},
		{"servers per rack", func(s *spec.Scenario) { s.Topology.TwoTier.ServersPerRack = -2 },
			[]string{`scenario.yaml: topology.two_tier.servers_per_rack: must be at least 1, got -2`}},
		{"too many servers", func(s *spec.Scenario) { s.Topology.TwoTier.Racks = 1 << 20 },
			[]string{`scenario.yaml: topology.two_tier: 1048576 racks of 4 servers is 4194304 servers, more than the limit of 1048576`}},
		{"edge required", func(s *spec.Scenario) { s.Topology.TwoTier.Edge = 0 },
			[]string{`scenario.yaml: topology.two_tier.edge: required (a positive rate such as "1Gbps")`}},
		{"core and oversubscription", func(s *spec.Scenario) { s.Topology.TwoTier.Core = 1e9 },
			[]string{`scenario.yaml: topology.two_tier: give core or oversubscription, not both`}},
		{"negative oversubscription", func(s *spec.Scenario) { s.Topology.TwoTier.Oversubscription = -1 },
			[]string{`scenario.yaml: topology.two_tier.oversubscription: must be positive, got -1`}},
		{"fat-tree k", func(s *spec.Scenario) {
			s.Topology = spec.Topology{Kind: "fat-tree", FatTree: &spec.FatTree{K: 3, Link: 1e9}}
		}, []string{`scenario.yaml: topology.fat_tree.k: must be an even number of at least 2, got 3`}},
		{"fat-tree oversubscription", func(s *spec.Scenario) {
			s.Topology = spec.Topology{Kind: "fat-tree", FatTree: &spec.FatTree{K: 8, Link: 1e9, Oversubscription: 3}}
		}, []string{`scenario.yaml: topology.fat_tree.oversubscription: must divide k/2 = 4 (n for n:1 at the edge switches), got 3`}},
		{"fat-tree link", func(s *spec.Scenario) {
			s.Topology = spec.Topology{Kind: "fat-tree", FatTree: &spec.FatTree{K: 4}}
		}, []string{`scenario.yaml: topology.fat_tree.link: required (a positive rate such as "1Gbps")`}},
		{"explicit unknown node", func(s *spec.Scenario) { useExplicit(s); s.Topology.Explicit.Links[3].B = "sw9" },
			[]string{`scenario.yaml: topology.explicit.links[3].b: unknown node "sw9"`}},
		{"explicit duplicate link", func(s *spec.Scenario) {
			useExplicit(s)
			s.Topology.Explicit.Links = append(s.Topology.Explicit.Links, spec.Link{A: "sw2", B: "sw1", Capacity: 1e9})
		}, []string{`scenario.yaml: topology.explicit.links[4]: duplicate link between "sw2" and "sw1" (also topology.explicit.links[3])`}},
		{"explicit self link", func(s *spec.Scenario) {
			useExplicit(s)
			s.Topology.Explicit.Links = append(s.Topology.Explicit.Links, spec.Link{A: "sw2", B: "sw2", Capacity: 1e9})
		}, []string{`scenario.yaml: topology.explicit.links[4]: links node "sw2" to itself`}},
		{"explicit capacity", func(s *spec.Scenario) { useExplicit(s); s.Topology.Explicit.Links[0].Capacity = 0 },
			[]string{`scenario.yaml: topology.explicit.links[0].capacity: required (a positive rate such as "1Gbps")`}},
		{"explicit duplicate node", func(s *spec.Scenario) {
			useExplicit(s)
			s.Topology.Explicit.Nodes = append(s.Topology.Explicit.Nodes, spec.Node{Name: "sw1", Kind: "switch"})
		}, []string{`scenario.yaml: topology.explicit.nodes[5].name: duplicate node "sw1" (also topology.explicit.nodes[3])`}},
		{"explicit node kind", func(s *spec.Scenario) { useExplicit(s); s.Topology.Explicit.Nodes[4].Kind = "router" },
			[]string{`scenario.yaml: topology.explicit.nodes[4].kind: unknown kind "router" (use server or switch)`}},
		{"explicit disconnected server", func(s *spec.Scenario) { useExplicit(s); s.Topology.Explicit.Links = s.Topology.Explicit.Links[:3] },
			[]string{`scenario.yaml: topology.explicit.nodes[2]: server "h3" is not connected to server "h1"`}},
		{"explicit server with two links", func(s *spec.Scenario) {
			useExplicit(s)
			s.Topology.Explicit.Links = append(s.Topology.Explicit.Links, spec.Link{A: "h1", B: "sw2", Capacity: 1e9})
		}, []string{`scenario.yaml: topology.explicit.nodes[0]: server "h1" has 2 links; a server needs exactly one (its access link)`}},
		{"explicit no servers", func(s *spec.Scenario) {
			useExplicit(s)
			s.Topology.Explicit = &spec.Explicit{Nodes: []spec.Node{{Name: "x", Kind: "switch"}}}
		}, []string{`scenario.yaml: topology.explicit.nodes: no node of kind server`}},

		// Tenants and VMs.
		{"tenants required", func(s *spec.Scenario) { s.Tenants = nil; s.Workloads = nil },
			[]string{`scenario.yaml: tenants: required (at least one tenant)`}},
		{"tenant name required", func(s *spec.Scenario) { s.Tenants[0].Name = ""; s.Workloads = s.Workloads[1:] },
			[]string{`scenario.yaml: tenants[0].name: required`}},
		{"duplicate tenant", func(s *spec.Scenario) { s.Tenants[1].Name = "A"; s.Workloads = s.Workloads[:1] },
			[]string{`scenario.yaml: tenants[1].name: duplicate tenant "A" (also tenants[0])`}},
		{"vms required", func(s *spec.Scenario) { s.Tenants[1].VMs = nil; s.Workloads = s.Workloads[:1] },
			[]string{`scenario.yaml: tenants[1].vms: required (at least one VM)`}},
		{"duplicate VM", func(s *spec.Scenario) { s.Tenants[1].VMs[2].Name = "a1" },
			[]string{`scenario.yaml: tenants[1].vms[2].name: duplicate VM "a1" (also tenants[0].vms[0])`,
				`scenario.yaml: workloads[1].dst[0]: unknown VM "b3"`}},
		{"unknown server", func(s *spec.Scenario) { s.Tenants[1].VMs[3].Server = "s99" },
			[]string{`scenario.yaml: tenants[1].vms[3].server: unknown server "s99"`}},
		{"server required", func(s *spec.Scenario) { s.Tenants[0].VMs[0].Server = "" },
			[]string{`scenario.yaml: tenants[0].vms[0].server: required`}},
		{"VM on a switch", func(s *spec.Scenario) { useExplicit(s); s.Tenants[0].VMs[1].Server = "sw1" },
			[]string{`scenario.yaml: tenants[0].vms[1].server: "sw1" is a switch, not a server`}},
		{"weight", func(s *spec.Scenario) { s.Tenants[0].Weight = -1 },
			[]string{`scenario.yaml: tenants[0].weight: must be a non-negative number, got -1`}},
		{"sla", func(s *spec.Scenario) { s.Tenants[0].SLA = 1.5 },
			[]string{`scenario.yaml: tenants[0].sla: must be a fraction in [0, 1) (0.15 for within 15%), got 1.5`}},
		{"negative guarantee", func(s *spec.Scenario) { s.Tenants[0].VMs[1].In = -5 },
			[]string{`scenario.yaml: tenants[0].vms[1].in: must be a non-negative rate, got -5`}},
		{"tenant without guarantees", func(s *spec.Scenario) { s.Tenants[0].Guarantee = 0 },
			[]string{`scenario.yaml: tenants[0]: no guarantees: set guarantee (or in and out), or best_effort: true`}},
		{"VM without guarantee", func(s *spec.Scenario) { s.Tenants[0].Guarantee = 0; s.Tenants[0].VMs[0].Out = 1e6 },
			[]string{`scenario.yaml: tenants[0].vms[1]: no guarantee in either direction: set guarantee, in or out (here or on the tenant), or best_effort: true on the tenant`}},
		{"best effort with guarantee", func(s *spec.Scenario) { s.Tenants[0].BestEffort = true; s.Tenants[0].VMs[1].Out = 1e6 },
			[]string{`scenario.yaml: tenants[0].guarantee: a best_effort tenant has no guarantees`,
				`scenario.yaml: tenants[0].vms[1].out: a best_effort tenant has no guarantees`}},

		{"join after the end", func(s *spec.Scenario) { s.Tenants[1].Join = dur(10 * time.Second) },
			[]string{`scenario.yaml: tenants[1].join: 10s is not before the end of the run (10s)`}},
		{"leave before join", func(s *spec.Scenario) {
			s.Tenants[1].Join = dur(4 * time.Second)
			s.Tenants[1].Leave = dur(3 * time.Second)
		},
			[]string{`scenario.yaml: tenants[1].leave: 3s is not after join (4s)`}},
		{"leave after the end", func(s *spec.Scenario) { s.Tenants[1].Leave = dur(11 * time.Second) },
			[]string{`scenario.yaml: tenants[1].leave: 11s is after the end of the run (10s); leave it out to stay to the end`}},
		{"workload while its tenant is absent", func(s *spec.Scenario) {
			s.Tenants[1].Join = dur(2 * time.Second)
			s.Tenants[1].Leave = dur(6 * time.Second)
			s.Workloads[1].Start = dur(2 * time.Second)
		},
			[]string{`scenario.yaml: workloads[1]: runs from 2s to 10s, but tenant "B" is declared only from its join (2s) to its leave (6s)`}},

		// Workloads.
		{"duplicate workload", func(s *spec.Scenario) { s.Workloads[1].Name = "wa" },
			[]string{`scenario.yaml: workloads[1].name: duplicate workload "wa" (also workloads[0])`}},
		{"workload tenant required", func(s *spec.Scenario) { s.Workloads[0].Tenant = "" },
			[]string{`scenario.yaml: workloads[0].tenant: required`}},
		{"unknown tenant", func(s *spec.Scenario) { s.Workloads[0].Tenant = "Z" },
			[]string{`scenario.yaml: workloads[0].tenant: unknown tenant "Z"`}},
		{"unknown VM", func(s *spec.Scenario) { s.Workloads[1].Dst[1] = "b9" },
			[]string{`scenario.yaml: workloads[1].dst[1]: unknown VM "b9"`}},
		{"VM of another tenant", func(s *spec.Scenario) { s.Workloads[1].Src[0] = "a1" },
			[]string{`scenario.yaml: workloads[1].src[0]: VM "a1" belongs to tenant "A", not "B"`}},
		{"VM listed twice", func(s *spec.Scenario) { s.Workloads[1].Src = spec.StringList{"b1", "b2", "b1"} },
			[]string{`scenario.yaml: workloads[1].src[2]: VM "b1" listed twice (also workloads[1].src[0])`}},
		{"src required", func(s *spec.Scenario) { s.Workloads[0].Src = nil },
			[]string{`scenario.yaml: workloads[0].src: required (a VM name or a list of them)`}},
		{"no pairs", func(s *spec.Scenario) { s.Workloads[0].Dst = spec.StringList{"a1"} },
			[]string{`scenario.yaml: workloads[0]: no VM pairs: src and dst are the same single VM`}},
		{"kind required", func(s *spec.Scenario) { s.Workloads[0].Kind = "" },
			[]string{`scenario.yaml: workloads[0].kind: required (tcp, udp, onoff, flows, clients or requests)`}},
		{"unknown kind", func(s *spec.Scenario) { s.Workloads[0].Kind = "quic" },
			[]string{`scenario.yaml: workloads[0].kind: unknown kind "quic" (use tcp, udp, onoff, flows, clients or requests)`}},
		{"udp rate", func(s *spec.Scenario) { s.Workloads[1].Rate = 0 },
			[]string{`scenario.yaml: workloads[1].rate: required for kind udp (the sending rate of each pair)`}},
		{"field of another kind", func(s *spec.Scenario) { s.Workloads[0].On = dur(time.Second); s.Workloads[1].Connections = 2 },
			[]string{`scenario.yaml: workloads[0].on: not used by kind tcp`,
				`scenario.yaml: workloads[1].connections: not used by kind udp`}},
		{"onoff periods", func(s *spec.Scenario) {
			s.Workloads[0].Kind = "onoff"
			s.Workloads[0].Transport = "tcp"
			s.Workloads[0].Off = dur(time.Second)
		}, []string{`scenario.yaml: workloads[0].on: required (a positive duration such as "30s")`}},
		{"onoff transport", func(s *spec.Scenario) {
			w := &s.Workloads[0]
			w.Kind, w.Transport, w.On, w.Off = "onoff", "sctp", dur(time.Second), dur(time.Second)
		}, []string{`scenario.yaml: workloads[0].transport: unknown transport "sctp" (use tcp or udp)`}},
		{"onoff udp rate", func(s *spec.Scenario) {
			w := &s.Workloads[0]
			w.Kind, w.Transport, w.On, w.Off, w.Connections = "onoff", "udp", dur(time.Second), dur(time.Second), 0
		}, []string{`scenario.yaml: workloads[0].rate: required for onoff with transport udp (the sending rate of each pair)`}},
		{"flows needs arrival rate and sizes", func(s *spec.Scenario) { s.Workloads[0].Kind = "flows"; s.Workloads[0].Connections = 0 },
			[]string{`scenario.yaml: workloads[0].arrival_rate: required for kind flows (flows per second per pair)`,
				`scenario.yaml: workloads[0].sizes: required for kind flows (a flow-size distribution)`}},
		{"clients", func(s *spec.Scenario) {
			w := &s.Workloads[0]
			w.Kind, w.Connections, w.Sleep, w.SleepProb = "clients", 0, dur(-time.Second), 2
		}, []string{`scenario.yaml: workloads[0].sizes: required for kind clients (a flow-size distribution)`,
			`scenario.yaml: workloads[0].sleep: must not be negative, got -1s`,
			`scenario.yaml: workloads[0].sleep_prob: 2 is not a probability in [0, 1]`}},
		{"sleep on tcp", func(s *spec.Scenario) { s.Workloads[0].SleepProb = 0.5 },
			[]string{`scenario.yaml: workloads[0].sleep_prob: not used by kind tcp`}},

		// Size distributions.
		{"unknown dist", func(s *spec.Scenario) { flows(s, &spec.SizeDist{Dist: "zipf", Mean: 1e3}) },
			[]string{`scenario.yaml: workloads[0].sizes.dist: unknown distribution "zipf" (use fixed, exponential, pareto, lognormal or cdf)`}},
		{"mean required", func(s *spec.Scenario) { flows(s, &spec.SizeDist{Dist: "exponential"}) },
			[]string{`scenario.yaml: workloads[0].sizes.mean: required for dist exponential (a size such as "64KB")`}},
		{"pareto shape", func(s *spec.Scenario) { flows(s, &spec.SizeDist{Dist: "pareto", Mean: 1e3, Shape: 0.9}) },
			[]string{`scenario.yaml: workloads[0].sizes.shape: must be greater than 1 (a finite mean), got 0.9`}},
		{"shape not used", func(s *spec.Scenario) { flows(s, &spec.SizeDist{Dist: "fixed", Mean: 1e3, Shape: 2}) },
			[]string{`scenario.yaml: workloads[0].sizes.shape: not used by dist fixed`}},
		{"cdf required", func(s *spec.Scenario) { flows(s, &spec.SizeDist{Dist: "cdf"}) },
			[]string{`scenario.yaml: workloads[0].sizes.cdf: required for dist cdf (points of size and cumulative probability p)`}},
		{"cdf decreasing", func(s *spec.Scenario) {
			flows(s, &spec.SizeDist{Dist: "cdf", CDF: []spec.CDFPoint{{Size: 1e3, P: 0.5}, {Size: 1e3, P: 0.4}, {Size: 1e4, P: 1}}})
		}, []string{`scenario.yaml: workloads[0].sizes.cdf[1].size: 1000 is not larger than the previous size 1000 (sizes must increase)`,
			`scenario.yaml: workloads[0].sizes.cdf[1].p: 0.4 is less than the previous p 0.5 (a CDF never decreases)`}},
		{"cdf not ending at 1", func(s *spec.Scenario) {
			flows(s, &spec.SizeDist{Dist: "cdf", CDF: []spec.CDFPoint{{Size: 1e3, P: 0.5}, {Size: 1e4, P: 0.9}}})
		}, []string{`scenario.yaml: workloads[0].sizes.cdf[1].p: the last point must have p 1, got 0.9`}},
		{"cdf p range", func(s *spec.Scenario) {
			flows(s, &spec.SizeDist{Dist: "cdf", CDF: []spec.CDFPoint{{Size: 1e3, P: -0.1}, {Size: 1e4, P: 1}}})
		}, []string{`scenario.yaml: workloads[0].sizes.cdf[0].p: must be between 0 and 1, got -0.1`}},

		// Phases.
		{"start/stop and phases", func(s *spec.Scenario) {
			s.Workloads[0].Start = dur(time.Second)
			s.Workloads[0].Phases = []spec.Phase{{Start: dur(2 * time.Second)}}
		}, []string{`scenario.yaml: workloads[0]: give start/stop or phases, not both`}},
		{"stop before start", func(s *spec.Scenario) {
			s.Workloads[0].Start = dur(5 * time.Second)
			s.Workloads[0].Stop = dur(time.Second)
		},
			[]string{`scenario.yaml: workloads[0].stop: 1s is not after start 5s`}},
		{"stop after the run", func(s *spec.Scenario) { s.Workloads[0].Stop = dur(11 * time.Second) },
			[]string{`scenario.yaml: workloads[0].stop: 11s is after the end of the run (duration 10s)`}},
		{"start after the run", func(s *spec.Scenario) { s.Workloads[0].Phases = []spec.Phase{{Start: dur(10 * time.Second)}} },
			[]string{`scenario.yaml: workloads[0].phases[0].start: 10s is not before the end of the run (duration 10s)`}},
		{"phases overlap", func(s *spec.Scenario) {
			s.Workloads[0].Phases = []spec.Phase{{Start: 0, Stop: dur(3 * time.Second)}, {Start: dur(2 * time.Second), Stop: dur(4 * time.Second)}}
		}, []string{`scenario.yaml: workloads[0].phases[1].start: 2s is before the end of phases[0] (3s); phases must be in order and not overlap`}},
		{"phase after an open phase", func(s *spec.Scenario) {
			s.Workloads[0].Phases = []spec.Phase{{Start: dur(time.Second)}, {Start: dur(2 * time.Second)}}
		}, []string{`scenario.yaml: workloads[0].phases[1]: follows phases[0], which runs to the end of the run`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := parseBase(t)
			c.mutate(s)
			got := messages(s.Validate())
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

// flows turns workload 0 into a flows workload with the given sizes.
func flows(s *spec.Scenario, d *spec.SizeDist) {
	w := &s.Workloads[0]
	w.Kind, w.Connections, w.ArrivalRate, w.Sizes = "flows", 0, 10, d
}

// TestValidateCollectsAll checks that problems from every part are reported
// together, through Parse, and that the base scenario variants are valid.
func TestValidateCollectsAll(t *testing.T) {
	doc := strings.Replace(base, "name: base", "name: ''", 1)
	doc = strings.Replace(doc, "server: s6", "server: s99", 1)
	doc = strings.Replace(doc, "rate: 50Mbps", "", 1)
	_, err := spec.Parse([]byte(doc), "scenario.yaml")
	want := []string{
		`scenario.yaml: name: required`,
		`scenario.yaml: tenants[1].vms[3].server: unknown server "s99"`,
		`scenario.yaml: workloads[1].rate: required for kind udp (the sending rate of each pair)`,
	}
	if got := messages(err); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if err.Error() != strings.Join(want, "\n") {
		t.Errorf("Error() = %q", err.Error())
	}

	s := parseBase(t)
	useExplicit(s)
	if err := s.Validate(); err != nil {
		t.Errorf("explicit variant: %v", err)
	}
	s = parseBase(t)
	s.Topology = spec.Topology{Kind: "fat-tree", FatTree: &spec.FatTree{K: 4, Link: 1e9}}
	if err := s.Validate(); err != nil {
		t.Errorf("fat-tree variant: %v", err)
	}
	s.Tenants[0].VMs[0].Server = "s17"
	if got := messages(s.Validate()); len(got) != 1 || got[0] != `scenario.yaml: tenants[0].vms[0].server: unknown server "s17"` {
		t.Errorf("fat-tree k=4 s17: %v", got)
	}
}
