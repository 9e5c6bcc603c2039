package testbed

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

func loadScenario(t *testing.T, path string) (*spec.Scenario, *topo.Topology) {
	t.Helper()
	sc, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.FromSpec(sc.Topology)
	if err != nil {
		t.Fatal(err)
	}
	return sc, tp
}

func parseScenario(t testing.TB, y string) (*spec.Scenario, *topo.Topology) {
	t.Helper()
	sc, err := spec.Parse([]byte(y), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.FromSpec(sc.Topology)
	if err != nil {
		t.Fatal(err)
	}
	return sc, tp
}

// walk follows the plan's routes and rules for a packet from src to dst VM
// and returns the topology links it crosses.
func walk(t *testing.T, p *Plan, tp *topo.Topology, src, dst string) []int {
	t.Helper()
	s, _ := p.VM(src)
	d, _ := p.VM(dst)
	return walkAddr(t, p, s.Server, s.Addr, d.Server, d.Addr)
}

// walkAddr follows the plan's routes and rules for a packet from the
// address src behind server from to the address dst behind server to.
func walkAddr(t *testing.T, p *Plan, from string, src netip.Addr, to string, dst netip.Addr) []int {
	t.Helper()
	node, _ := p.Node(from)
	var links []int
	for hops := 0; node.Name != to; hops++ {
		if hops > len(p.Nodes) {
			t.Fatalf("%s->%s: routing loop through %v", src, dst, links)
		}
		table := 0
		for _, r := range node.Rules {
			if r.Src.Contains(src) && r.Dst.Contains(dst) {
				table = r.Table
				break
			}
		}
		var dev string
		for _, r := range node.Routes {
			if r.Table == table && r.Dst.Contains(dst) && (dev == "" || r.Dst.Bits() == 32) {
				dev = r.Dev
			}
		}
		if dev == "" {
			t.Fatalf("%s->%s: no route at %s (table %d)", src, dst, node.Name, table)
		}
		next := ""
		for _, l := range p.Links {
			switch {
			case l.A == node.Name && l.DevA == dev:
				links, next = append(links, l.AB), l.B
			case l.B == node.Name && l.DevB == dev:
				links, next = append(links, l.BA), l.A
			}
		}
		if next == "" {
			t.Fatalf("%s->%s: device %s of %s is on no link", src, dst, dev, node.Name)
		}
		node, _ = p.Node(next)
	}
	return links
}

func TestPlanFig3(t *testing.T) {
	sc, tp := loadScenario(t, "../scenarios/pulsar-fig3-network.yaml")
	p, err := NewPlan(sc, tp, PlanOptions{Prefix: "bhtest1", Scale: 0.5, Limiters: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 4 || len(p.VMs) != 4 || len(p.Links) != 3 || len(p.Pairs) != 2 {
		t.Fatalf("plan: %d nodes, %d VMs, %d links, %d pairs", len(p.Nodes), len(p.VMs), len(p.Links), len(p.Pairs))
	}
	for _, ns := range p.Namespaces() {
		if !strings.HasPrefix(ns, "bhtest1-") || !dataplane.ValidNSName(ns) {
			t.Errorf("namespace %q", ns)
		}
	}
	a, _ := p.VM("a-tx")
	if a.NS != "bhtest1-v-a-tx" || a.Addr != netip.MustParseAddr("10.200.0.1") || a.Gateway != netip.MustParseAddr("10.200.0.0") {
		t.Errorf("a-tx: %+v", a)
	}
	for _, v := range p.VMs {
		if !Network.Contains(v.Addr) || len(v.Dev) > dataplane.MaxLinkName || len(v.HostDev) > dataplane.MaxLinkName || !strings.HasPrefix(v.HostDev, "bhtest1") {
			t.Errorf("VM %+v", v)
		}
	}
	for _, n := range p.Nodes {
		for _, s := range n.Shapes {
			if s.Rate != 0.5e9 {
				t.Errorf("%s: shaper %+v, want 500 Mbit/s (1 Gbps scaled by 0.5)", n.Name, s)
			}
		}
		if n.Server && len(n.VMs) > 0 && (!CtlNet.Contains(n.Ctl) || n.TXIFB != "") {
			t.Errorf("%s: control address %v, scheduler IFB %q (none without Schedulers)", n.Name, n.Ctl, n.TXIFB)
		}
		// every node routes every other server's control address
		for _, o := range p.Nodes {
			if !o.Ctl.IsValid() || o == n {
				continue
			}
			found := false
			for _, r := range n.Routes {
				found = found || r.Table == 0 && r.Dst == netip.PrefixFrom(o.Ctl, 32)
			}
			if !found {
				t.Errorf("%s: no route to %s's control address %v", n.Name, o.Name, o.Ctl)
			}
		}
		if len(n.Rules) != 0 {
			t.Errorf("%s: rules on a tree: %v", n.Name, n.Rules)
		}
	}
	for _, pr := range p.Pairs {
		got := walk(t, p, tp, pr.Src, pr.Dst)
		if len(got) != 2 || got[0] != pr.Links[0] || got[1] != pr.Links[1] {
			t.Errorf("%s->%s: routes take %v, the topology routes %v", pr.Src, pr.Dst, got, pr.Links)
		}
	}
	// Every VM reaches every other (replies, undeclared pairs).
	for _, s := range p.VMs {
		for _, d := range p.VMs {
			if s != d && s.Server != d.Server {
				walk(t, p, tp, s.Name, d.Name)
			}
		}
	}
}

// TestPlanECMP: on a fat-tree, declared pairs follow exactly the ECMP routes
// the simulator and admission control use, through policy rules where pairs
// toward one VM diverge.
func TestPlanECMP(t *testing.T) {
	y := `
name: ecmp
duration: 1s
topology: {kind: fat-tree, fat_tree: {k: 4, link: 1Gbps}}
tenants:
  - name: T
    guarantee: 10Mbps
    vms:
      - {name: a, server: s1}
      - {name: b, server: s2}
      - {name: c, server: s3}
      - {name: d, server: s5}
      - {name: e, server: s6}
      - {name: x, server: s13}
      - {name: y, server: s14}
workloads:
  - {tenant: T, kind: tcp, src: [a, b, c, d, e], dst: [x, y]}
  - {tenant: T, kind: tcp, src: [x], dst: [a, d]}
`
	sc, tp := parseScenario(t, y)
	p, err := NewPlan(sc, tp, PlanOptions{Prefix: "bhecmp"})
	if err != nil {
		t.Fatal(err)
	}
	rules := 0
	for _, n := range p.Nodes {
		rules += len(n.Rules)
	}
	t.Logf("%d policy rules", rules)
	if rules == 0 {
		t.Error("no policy rules: the pairs' ECMP routes all agree, the test does not exercise rules")
	}
	for _, pr := range p.Pairs {
		got := walk(t, p, tp, pr.Src, pr.Dst)
		if len(got) != len(pr.Links) {
			t.Fatalf("%s->%s: routes take %v, the topology routes %v", pr.Src, pr.Dst, got, pr.Links)
		}
		for i := range got {
			if got[i] != pr.Links[i] {
				t.Errorf("%s->%s: routes take %v, the topology routes %v", pr.Src, pr.Dst, got, pr.Links)
				break
			}
		}
	}
}

func TestPlanErrors(t *testing.T) {
	sc, tp := loadScenario(t, "../scenarios/pulsar-fig3-network.yaml")
	for _, o := range []PlanOptions{
		{Prefix: ""}, {Prefix: "BH1"}, {Prefix: "bh12345678"},
		{Prefix: "bh1", Scale: -1}, {Prefix: "bh1", Scale: 1000}, {Prefix: "bh1", QueueBytes: 10},
	} {
		if _, err := NewPlan(sc, tp, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if p := NewPrefix(); dataplane.ValidPrefix(p) != nil || NewPrefix() == p {
		t.Errorf("NewPrefix %q", p)
	}
}

func TestFlows(t *testing.T) {
	y := `
name: flows
duration: 4s
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 2, edge: 1Gbps}}
tenants:
  - name: T
    guarantee: 100Mbps
    vms: [{name: a, server: s1}, {name: b, server: s2}]
workloads:
  - {tenant: T, kind: tcp, src: a, dst: b, connections: 3, phases: [{start: 0s, stop: 1s}, {start: 2s}]}
  - {tenant: T, kind: udp, src: b, dst: a, rate: 50Mbps}
`
	sc, tp := parseScenario(t, y)
	p, err := NewPlan(sc, tp, PlanOptions{Prefix: "bhflows"})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := flows(sc, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 3 {
		t.Fatalf("%d flows: %+v", len(fl), fl)
	}
	if fl[0].port == fl[1].port || fl[0].conns != 3 || fl[1].phase.Stop != spec.Duration(4e9) || !fl[2].udp || fl[2].rate != 50e6 {
		t.Errorf("flows %+v", fl)
	}
	if !fl[0].active(0) || fl[0].active(1e9) || !fl[1].active(3e9) {
		t.Error("phases")
	}
	// What a sample records of the pairs' activity: the TCP pair (a->b)
	// runs [0, 1 s) and [2 s, 4 s), the UDP pair (b->a) all the time.
	pair := map[string]int{}
	for _, f := range fl {
		pair[f.src] = f.pair
	}
	for _, tc := range []struct {
		name          string
		w0, w1        time.Duration
		active, from  float64
		tcpUnbounded  bool
		udpDemandMbps float64
	}{
		{"inside a phase", 500 * time.Millisecond, 600 * time.Millisecond, 1, 0, true, 50},
		{"the phase ends mid-sample", 950 * time.Millisecond, 1050 * time.Millisecond, 0.5, 0, true, 50},
		{"idle", 1500 * time.Millisecond, 1600 * time.Millisecond, 0, 0, false, 50},
		{"the phase starts mid-sample", 1950 * time.Millisecond, 2050 * time.Millisecond, 0.5, 0.5, true, 50},
	} {
		s := eval.Sample{Pairs: make([]eval.PairSample, 2)}
		recordActivity(&s, fl, tc.w0, tc.w1)
		tcp, udp := s.Pairs[pair["a"]], s.Pairs[pair["b"]]
		if math.Abs(tcp.Active-tc.active) > 1e-9 || math.Abs(tcp.ActiveFrom-tc.from) > 1e-9 || math.IsInf(tcp.Demand, 1) != tc.tcpUnbounded {
			t.Errorf("%s: TCP pair active %g from %g demand %g, want %g from %g unbounded %v", tc.name, tcp.Active, tcp.ActiveFrom, tcp.Demand, tc.active, tc.from, tc.tcpUnbounded)
		}
		if math.Abs(udp.Demand-tc.udpDemandMbps*1e6) > 1 || udp.Active != 1 {
			t.Errorf("%s: UDP pair demand %g active %g, want %g Mbps all the time", tc.name, udp.Demand, udp.Active, tc.udpDemandMbps)
		}
	}
	sc.Workloads[0].Kind = spec.KindOnOff
	if _, err := flows(sc, p); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("onoff accepted: %v", err)
	}
}
