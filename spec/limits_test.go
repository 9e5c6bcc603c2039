package spec_test

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/spec"
)

// TestLimits checks every size limit and representable range: one value
// just inside (no error) and the values beyond it, including ones whose
// products overflow 64 bits, each refused at its own field with the limit.
func TestLimits(t *testing.T) {
	const rateRange = "outside the representable range of rates, 1 bps to 1e+15 bps"
	fatTree := func(k int) func(*spec.Scenario) {
		return func(s *spec.Scenario) {
			s.Topology = spec.Topology{Kind: "fat-tree", FatTree: &spec.FatTree{K: k, Link: 1e9}}
		}
	}
	manyVMs := func(n int) func(*spec.Scenario) {
		return func(s *spec.Scenario) {
			vms := make([]spec.VM, n)
			for i := range vms {
				vms[i] = spec.VM{Name: fmt.Sprintf("x%d", i), Server: "s1"}
			}
			s.Tenants = append(s.Tenants, spec.Tenant{Name: "X", Guarantee: 1e6, VMs: vms})
		}
	}
	// Workload 1 (udp) of tenant X with n src and n dst VMs.
	allToAll := func(n, connections int) func(*spec.Scenario) {
		return func(s *spec.Scenario) {
			manyVMs(n)(s)
			names := make(spec.StringList, n)
			for i := range names {
				names[i] = fmt.Sprintf("x%d", i)
			}
			s.Workloads[1] = spec.Workload{Name: "wx", Tenant: "X", Kind: "tcp", Src: names, Dst: names, Connections: connections}
		}
	}
	cases := []struct {
		name   string
		mutate func(s *spec.Scenario)
		want   []string
	}{
		// Servers.
		{"racks at the limit", func(s *spec.Scenario) { s.Topology.TwoTier.Racks, s.Topology.TwoTier.ServersPerRack = 1<<18, 4 }, nil},
		{"racks × servers over the limit", func(s *spec.Scenario) { s.Topology.TwoTier.Racks, s.Topology.TwoTier.ServersPerRack = 1<<18+1, 4 },
			[]string{`scenario.yaml: topology.two_tier: 262145 racks of 4 servers is 1048580 servers, more than the limit of 1048576`}},
		{"racks overflow", func(s *spec.Scenario) { s.Topology.TwoTier.Racks = 1 << 32 },
			[]string{`scenario.yaml: topology.two_tier.racks: 4294967296 racks is more than the limit of 1048576 servers`}},
		{"racks × servers overflow", func(s *spec.Scenario) {
			s.Topology.TwoTier.Racks, s.Topology.TwoTier.ServersPerRack = 1<<20, 1<<62
		}, []string{`scenario.yaml: topology.two_tier.servers_per_rack: 4611686018427387904 servers per rack is more than the limit of 1048576 servers`}},
		{"fat-tree k at the limit", fatTree(160), []string{}},
		{"fat-tree k over the limit", fatTree(162),
			[]string{`scenario.yaml: topology.fat_tree.k: 162 is more than 160, the largest k within the limit of 1048576 servers (k³/4)`}},
		{"fat-tree k overflow", fatTree(1 << 32),
			[]string{`scenario.yaml: topology.fat_tree.k: 4294967296 is more than 160, the largest k within the limit of 1048576 servers (k³/4)`}},
		{"fat-tree k³ wraps to 0", fatTree(1 << 62),
			[]string{`scenario.yaml: topology.fat_tree.k: 4611686018427387904 is more than 160, the largest k within the limit of 1048576 servers (k³/4)`}},

		// VMs.
		{"VMs over the limit", manyVMs(spec.MaxVMs - 5),
			[]string{`scenario.yaml: tenants: 1048577 VMs in all is more than the limit of 1048576`}},

		// Connections and flows.
		{"connections at the limit", func(s *spec.Scenario) { s.Workloads[0].Connections = 1024 }, nil},
		{"connections over the limit", func(s *spec.Scenario) { s.Workloads[0].Connections = 1e9 },
			[]string{`scenario.yaml: workloads[0].connections: 1000000000 is more than the limit of 1024 connections per pair`}},
		{"pairs × connections at the limit", allToAll(4096, 1), nil}, // 4096 × 4095 pairs
		{"pairs × connections over the limit", allToAll(4096, 2), []string{ // 2 × 16,773,120 flows
			`scenario.yaml: workloads[1]: 4096 src × 4096 dst VMs with 2 connections per pair is more than the limit of 16777216 flows per workload`}},
		{"pairs over the limit", allToAll(4097, 0), []string{ // 4097 × 4096 pairs
			`scenario.yaml: workloads[1]: 4097 src × 4097 dst VMs with 1 connections per pair is more than the limit of 16777216 flows per workload`}},
		{"arrivals over the limit", func(s *spec.Scenario) {
			flows(s, &spec.SizeDist{Dist: "fixed", Mean: 1e3})
			s.Workloads[0].ArrivalRate = 1e7 + 1 // × 1 pair × 10 s
		}, []string{`scenario.yaml: workloads[0].arrival_rate: 1.0000001e+07 flows/s on 1 pairs for 10s is 1e+08 flows expected, more than the limit of 100000000 per workload`}},
		{"arrivals at the limit", func(s *spec.Scenario) {
			flows(s, &spec.SizeDist{Dist: "fixed", Mean: 1e3})
			s.Workloads[0].ArrivalRate = 1e7
		}, nil},
		{"arrival rate too small", func(s *spec.Scenario) {
			flows(s, &spec.SizeDist{Dist: "fixed", Mean: 1e3})
			s.Workloads[0].ArrivalRate = 1e-300
		}, []string{`scenario.yaml: workloads[0].arrival_rate: 1e-300 flows/s is outside the range 1e-06 to 1e+09 flows/s`}},

		// Ticks.
		{"ticks at the limit", func(s *spec.Scenario) { s.DT = dur(100 * time.Nanosecond) }, nil},
		{"ticks of the longest duration", func(s *spec.Scenario) {
			s.Duration, s.DT = dur(math.MaxInt64), dur(1)
		}, []string{`scenario.yaml: dt: duration 2562047h47m16.854775807s at dt 1ns is 9223372036854775807 ticks; at most 100000000 are allowed`}},

		// Rates.
		{"guarantee 1e-300", func(s *spec.Scenario) { s.Tenants[0].Guarantee = 1e-300 },
			[]string{`scenario.yaml: tenants[0].guarantee: 1e-300 bps is ` + rateRange}},
		{"guarantee 1 bps", func(s *spec.Scenario) { s.Tenants[0].Guarantee = 1 }, nil},
		{"VM in above the range", func(s *spec.Scenario) { s.Tenants[1].VMs[2].In = 2e15 },
			[]string{`scenario.yaml: tenants[1].vms[2].in: 2e+15 bps is ` + rateRange}},
		{"edge 1e308", func(s *spec.Scenario) { s.Topology.TwoTier.Edge = 1e308 },
			[]string{`scenario.yaml: topology.two_tier.edge: 1e+308 bps is ` + rateRange}},
		{"edge 1 Pbps", func(s *spec.Scenario) { s.Topology.TwoTier.Edge, s.Topology.TwoTier.Oversubscription = 1e15, 4 }, nil},
		{"edge 1 Pbps, core over", func(s *spec.Scenario) { s.Topology.TwoTier.Edge = 1e15 },
			[]string{`scenario.yaml: topology.two_tier.oversubscription: gives a core of 4e+15 bps (servers_per_rack × edge / oversubscription), ` + rateRange}},
		{"core below the range", func(s *spec.Scenario) {
			s.Topology.TwoTier.Core, s.Topology.TwoTier.Oversubscription = 0.5, 0
		}, []string{`scenario.yaml: topology.two_tier.core: 0.5 bps is ` + rateRange}},
		{"oversubscription makes the core too fast", func(s *spec.Scenario) {
			s.Topology.TwoTier.Edge, s.Topology.TwoTier.Oversubscription = 1e15, 0.5
		}, []string{`scenario.yaml: topology.two_tier.oversubscription: gives a core of 8e+15 bps (servers_per_rack × edge / oversubscription), ` + rateRange}},
		{"oversubscription out of range", func(s *spec.Scenario) { s.Topology.TwoTier.Oversubscription = 1e-300 },
			[]string{`scenario.yaml: topology.two_tier.oversubscription: 1e-300 is outside the range 1e-06 to 1e+06`}},
		{"udp rate 1e308", func(s *spec.Scenario) { s.Workloads[1].Rate = 1e308 },
			[]string{`scenario.yaml: workloads[1].rate: 1e+308 bps is ` + rateRange}},
		{"explicit capacity 1e-300", func(s *spec.Scenario) {
			useExplicit(s)
			s.Topology.Explicit.Links[3].Capacity = 1e-300
		}, []string{`scenario.yaml: topology.explicit.links[3].capacity: 1e-300 bps is ` + rateRange}},
		{"fat-tree link 1e308", func(s *spec.Scenario) {
			fatTree(4)(s)
			s.Topology.FatTree.Link = 1e308
		}, []string{`scenario.yaml: topology.fat_tree.link: 1e+308 bps is ` + rateRange}},

		// Sizes.
		{"mean size 1e308", func(s *spec.Scenario) { flows(s, &spec.SizeDist{Dist: "exponential", Mean: 1e308}) },
			[]string{`scenario.yaml: workloads[0].sizes.mean: 1e+308 B is outside the representable range of sizes, 1 B to 1e+15 B`}},
		{"mean size 1e-300", func(s *spec.Scenario) { flows(s, &spec.SizeDist{Dist: "fixed", Mean: 1e-300}) },
			[]string{`scenario.yaml: workloads[0].sizes.mean: 1e-300 B is outside the representable range of sizes, 1 B to 1e+15 B`}},
		{"cdf size 1e308", func(s *spec.Scenario) {
			flows(s, &spec.SizeDist{Dist: "cdf", CDF: []spec.CDFPoint{{Size: 1, P: 0.5}, {Size: 1e308, P: 1}}})
		}, []string{`scenario.yaml: workloads[0].sizes.cdf[1].size: 1e+308 B is more than the limit of 1e+15 B`}},
		{"lognormal shape", func(s *spec.Scenario) { flows(s, &spec.SizeDist{Dist: "lognormal", Mean: 1e3, Shape: 40}) },
			[]string{`scenario.yaml: workloads[0].sizes.shape: 40 is more than the limit of 10`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := parseBase(t)
			c.mutate(s)
			got := messages(s.Validate())
			if len(got) == 0 && len(c.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

// TestRequestLimits checks the limits of requests workloads: rates,
// requests in flight, sizes, and the flows of many sources to one
// appliance.
func TestRequestLimits(t *testing.T) {
	const sizeRange = "outside the representable range of sizes, 1 B to 1e+15 B"
	cases := []struct {
		name   string
		mutate func(s *spec.Scenario)
		want   []string
	}{
		{"request rate at the limit", func(s *spec.Scenario) { s.Workloads[3].RequestRate = 1e9 }, nil},
		{"request rate over the limit", func(s *spec.Scenario) { s.Workloads[3].RequestRate = 1e12 },
			[]string{`scenario.yaml: workloads[3].request_rate: 1e+12 requests/s is outside the range 1e-06 to 1e+09 requests/s`}},
		{"request rate 1e-300", func(s *spec.Scenario) { s.Workloads[3].RequestRate = 1e-300 },
			[]string{`scenario.yaml: workloads[3].request_rate: 1e-300 requests/s is outside the range 1e-06 to 1e+09 requests/s`}},
		{"outstanding over the limit", func(s *spec.Scenario) { s.Workloads[1].Outstanding = 5000 },
			[]string{`scenario.yaml: workloads[1].outstanding: 5000 is more than the limit of 1024 requests in flight per VM`}},
		{"mix size 1e308", func(s *spec.Scenario) { s.Workloads[1].Mix[0].Size = 1e308 },
			[]string{`scenario.yaml: workloads[1].mix[0].size: 1e+308 B is ` + sizeRange}},
		{"mix size 1e-300", func(s *spec.Scenario) { s.Workloads[1].Mix[0].Size = 1e-300 },
			[]string{`scenario.yaml: workloads[1].mix[0].size: 1e-300 B is ` + sizeRange}},
		{"mix response 1e308", func(s *spec.Scenario) { s.Workloads[1].Mix[1].Response = 1e308 },
			[]string{`scenario.yaml: workloads[1].mix[1].response: 1e+308 B is more than the limit of 1e+15 B`}},
		{"mix request 2e15", func(s *spec.Scenario) { s.Workloads[1].Mix[1].Request = 2e15 },
			[]string{`scenario.yaml: workloads[1].mix[1].request: 2e+15 B is more than the limit of 1e+15 B`}},
		{"sources × connections to an appliance at the limit", manySources(1<<14, 1024), nil},
		{"sources × connections to an appliance over the limit", manySources(1<<14+1, 1024),
			[]string{`scenario.yaml: workloads[1]: 16385 src VMs to appliance "kv" with 1024 connections per pair is more than the limit of 16777216 flows per workload`}},
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

// manySources gives tenant B n VMs (on s1) that all send requests to kv
// in workload 1, each over the given connections.
func manySources(n, connections int) func(*spec.Scenario) {
	return func(s *spec.Scenario) {
		b := &s.Tenants[1]
		w := &s.Workloads[1]
		w.Src, w.Connections = nil, connections
		for i := range n {
			name := fmt.Sprintf("bx%d", i)
			b.VMs = append(b.VMs, spec.VM{Name: name, Server: "s1"})
			w.Src = append(w.Src, name)
		}
	}
}
