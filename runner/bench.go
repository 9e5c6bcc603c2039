package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// BenchScenario is the simulator benchmark: two tenants of 10 VMs each on a
// two-tier tree (4 racks × 10 servers, 1 Gbps edges, 4:1 oversubscribed
// core), 20 cross-rack VM pairs × conns/20 TCP connections, 1 ms ticks.
// Tenant A's pairs are bulk; tenant B's are on/off with exponential 50 ms
// periods, so the allocation changes every few ticks, as it does in a
// datacenter with churn.
func BenchScenario(conns int, duration time.Duration) (*Scenario, error) {
	if conns < 20 || conns%20 != 0 {
		return nil, fmt.Errorf("bench scenario: connections must be a positive multiple of 20, got %d", conns)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name: bench-%dconn\nduration: %s\ndt: 1ms\nseed: 1\n", conns, duration)
	b.WriteString("topology:\n  kind: two-tier\n  two_tier: {racks: 4, servers_per_rack: 10, edge: 1Gbps, oversubscription: 4}\ntenants:\n")
	for ti, t := range []string{"a", "b"} {
		fmt.Fprintf(&b, "  - name: %s\n    guarantee: 100Mbps\n    vms:\n", strings.ToUpper(t))
		for i := 1; i <= 10; i++ {
			fmt.Fprintf(&b, "      - {name: %s%d, server: s%d}\n", t, i, ti*20+i)
		}
	}
	b.WriteString("workloads:\n")
	for _, t := range []string{"a", "b"} {
		for i := 1; i <= 10; i++ {
			dst := (i % 10) + 1
			kind := "kind: tcp"
			if t == "b" {
				kind = "kind: onoff, on: 50ms, off: 50ms, exponential: true"
			}
			fmt.Fprintf(&b, "  - {tenant: %s, %s, src: %s%d, dst: %s%d, connections: %d}\n",
				strings.ToUpper(t), kind, t, i, t, dst, conns/20)
		}
	}
	sc, err := spec.Parse([]byte(b.String()), "bench.yaml")
	if err != nil {
		return nil, err
	}
	return Prepare(sc)
}

// ManyToOneScenario is ElasticSwitch's many-to-one experiment (Fig. 5/6):
// two tenants with 450 Mbps hose guarantees whose receivers share a 1 Gbps
// server link; tenant A's receiver has one sender, tenant B's has
// `senders` senders with one TCP connection each.
func ManyToOneScenario(senders int, duration time.Duration) (*Scenario, error) {
	if senders < 1 {
		return nil, fmt.Errorf("many-to-one scenario: need at least one sender, got %d", senders)
	}
	servers := senders + 2
	racks := (servers + 39) / 40
	var b strings.Builder
	fmt.Fprintf(&b, "name: many-to-one-%d\nduration: %s\ndt: 1ms\nseed: 1\n", senders, duration)
	fmt.Fprintf(&b, "topology:\n  kind: two-tier\n  two_tier: {racks: %d, servers_per_rack: 40, edge: 1Gbps, core: 400Gbps}\n", racks)
	b.WriteString("tenants:\n  - name: A\n    guarantee: 450Mbps\n    vms:\n      - {name: a-rx, server: s1}\n      - {name: a-tx, server: s2}\n")
	b.WriteString("  - name: B\n    guarantee: 450Mbps\n    vms:\n      - {name: b-rx, server: s1}\n")
	for i := 1; i <= senders; i++ {
		fmt.Fprintf(&b, "      - {name: b-tx%d, server: s%d, guarantee: %s}\n", i, i+2, "450Mbps")
	}
	b.WriteString("workloads:\n  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}\n  - tenant: B\n    kind: tcp\n    dst: b-rx\n    src: [")
	for i := 1; i <= senders; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "b-tx%d", i)
	}
	b.WriteString("]\n")
	sc, err := spec.Parse([]byte(b.String()), "many-to-one.yaml")
	if err != nil {
		return nil, err
	}
	return Prepare(sc)
}

// SimSpeed runs s under the named mechanism without evaluation and returns
// simulated seconds per wall-clock second and the wall time; ph, if not
// nil, receives where that time went.
func SimSpeed(ctx context.Context, s *Scenario, mechanism string, ph *sim.Phases) (float64, time.Duration, error) {
	m, err := all.New(mechanism, nil)
	if err != nil {
		return 0, 0, err
	}
	res, err := Reservations(s)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if _, err := sim.Run(ctx, s.Spec, s.Topo, sim.Options{Mechanism: m, Reservations: res, Phases: ph}); err != nil {
		return 0, 0, err
	}
	wall := time.Since(start)
	return time.Duration(s.Spec.Duration).Seconds() / wall.Seconds(), wall, nil
}

// DatacenterTenantVMs is the size of every tenant of DatacenterScenario.
const DatacenterTenantVMs = 32

// DatacenterScenario is the simulator benchmark at datacenter scale: vms
// VMs (a multiple of DatacenterTenantVMs) in tenants of
// DatacenterTenantVMs, perServer VMs to a server, on a two-tier tree of 32
// servers per rack (10 Gbps edges, 2:1 oversubscribed core), each tenant
// with a 100 Mbps hose guarantee per VM; conns long-lived (bulk) TCP
// connections, one per VM pair, between VMs of a tenant: VM j sends to VMs
// j+1, …, j+k of its tenant (k = conns/vms, one more for the first
// conns mod vms VMs), 1 ms ticks. Tenant t's VM j is the (j·T+t)-th VM of
// the datacenter for T tenants, and VM number g is on server g mod
// (vms/perServer), so a tenant spreads over the racks.
func DatacenterScenario(vms, perServer, conns int, duration time.Duration) (*Scenario, error) {
	const size = DatacenterTenantVMs
	if vms < size || vms%size != 0 {
		return nil, fmt.Errorf("datacenter scenario: VMs must be a positive multiple of %d, got %d", size, vms)
	}
	if perServer < 1 || vms%perServer != 0 {
		return nil, fmt.Errorf("datacenter scenario: VMs per server must divide the VMs (%d), got %d", vms, perServer)
	}
	if conns < 1 || conns > vms*(size-1) {
		return nil, fmt.Errorf("datacenter scenario: connections must be in [1, %d] (one per pair of VMs of a tenant of %d), got %d", vms*(size-1), size, conns)
	}
	tenants := vms / size
	servers := vms / perServer
	const perRack = 32
	racks := (servers + perRack - 1) / perRack
	var b strings.Builder
	fmt.Fprintf(&b, "name: datacenter-%dvm-%dconn\nduration: %s\ndt: 1ms\nseed: 1\n", vms, conns, duration)
	fmt.Fprintf(&b, "topology:\n  kind: two-tier\n  two_tier: {racks: %d, servers_per_rack: %d, edge: 10Gbps, oversubscription: 2}\ntenants:\n", racks, perRack)
	name := func(t, j int) string { return fmt.Sprintf("t%d-%d", t, j) }
	for t := 0; t < tenants; t++ {
		fmt.Fprintf(&b, "  - name: T%d\n    guarantee: 100Mbps\n    vms:\n", t)
		for j := 0; j < size; j++ {
			fmt.Fprintf(&b, "      - {name: %s, server: s%d}\n", name(t, j), (j*tenants+t)%servers+1)
		}
	}
	b.WriteString("workloads:\n")
	k, extra := conns/vms, conns%vms
	for j := 0; j < size; j++ {
		for t := 0; t < tenants; t++ {
			peers := k
			if j*tenants+t < extra {
				peers++
			}
			for d := 1; d <= peers; d++ {
				fmt.Fprintf(&b, "  - {tenant: T%d, kind: tcp, src: %s, dst: %s}\n", t, name(t, j), name(t, (j+d)%size))
			}
		}
	}
	sc, err := spec.Parse([]byte(b.String()), "datacenter.yaml")
	if err != nil {
		return nil, err
	}
	return Prepare(sc)
}
