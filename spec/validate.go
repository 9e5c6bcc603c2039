package spec

import (
	"fmt"
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
)

// Validate checks the scenario as it is (call ApplyDefaults first for one
// built in code; Parse does both) and returns every problem found, each a
// *FieldError, joined with errors.Join; nil if there is none. The checks are
// listed in docs/scenarios.md. They need nothing but the scenario: server
// names are checked against the names the topology declares (ServerNames),
// which are the names package topo builds.
//
// VM and appliance servers are checked only when the topology itself is
// valid, and workload VMs only when the workload's tenant exists, so that
// one mistake does not cascade.
func (s *Scenario) Validate() error {
	p := &problems{File: s.File}
	s.validateRun(p)
	before := p.Len()
	s.Topology.validate(p)
	server := s.serverCheck(p, p.Len() == before)
	c := model.NewChecker(s.Model(), p)
	s.validateTenants(p, c, server)
	s.validateAppliances(c, server)
	s.validateWorkloads(p)
	if s.Mechanism.Name == "" {
		p.Add("mechanism.name", "required")
	}
	return p.Err()
}

func (s *Scenario) validateRun(p *problems) {
	if s.Name == "" {
		p.Add("name", "required")
	}
	if n := s.Network.TCPLoss; n < 0 || n > 1 || math.IsNaN(n) {
		p.Add("network.tcp_loss", "%g is not a fraction in [0, 1]", n)
	}
	if n := s.Network.ControlLoss; n < 0 || n > 1 || math.IsNaN(n) {
		p.Add("network.control_loss", "%g is not a probability in [0, 1]", n)
	}
	if s.Network.ControlDelay < 0 {
		p.Add("network.control_delay", "%v is negative", s.Network.ControlDelay)
	}
	if n := s.Network.PortQueues; n < 0 || n > 64 {
		p.Add("network.port_queues", "%d is not a number of queues in [1, 64] (0: default %d)", n, DefaultPortQueues)
	}
	if n := s.Network.QueueWeightMax; n < 0 {
		p.Add("network.queue_weight_max", "%d is negative (0: any real weight)", n)
	}
	if _, ok := canonicalUnit(s.Units); !ok {
		p.Add("units", "unknown unit %q (use %s)", s.Units, model.OrList(reportUnits))
	}
	durOK := positive(p, "duration", s.Duration)
	dtOK := positive(p, "dt", s.DT)
	sampleOK := positive(p, "outputs.sample", s.Outputs.Sample)
	if durOK && dtOK {
		if s.DT > s.Duration {
			p.Add("dt", "%v is longer than duration %v", s.DT, s.Duration)
		} else if ticks := int64(s.Duration) / int64(s.DT); ticks > MaxTicks {
			p.Add("dt", "duration %v at dt %v is %d ticks; at most %d are allowed", s.Duration, s.DT, ticks, MaxTicks)
		}
	}
	if sampleOK && dtOK && s.Outputs.Sample < s.DT {
		p.Add("outputs.sample", "%v is shorter than dt %v", s.Outputs.Sample, s.DT)
	}
	if sampleOK && durOK && s.Outputs.Sample > s.Duration {
		p.Add("outputs.sample", "%v is longer than duration %v", s.Outputs.Sample, s.Duration)
	}
}

// positive checks a required positive duration.
func positive(p *problems, path string, d Duration) bool {
	switch {
	case d == 0:
		p.Add(path, "required (a positive duration such as \"30s\")")
	case d < 0:
		p.Add(path, "must be positive, got %v", d)
	default:
		return true
	}
	return false
}

// positiveRate checks a required positive rate.
func positiveRate(p *problems, path string, r Rate) {
	switch {
	case r == 0:
		p.Add(path, "required (a positive rate such as \"1Gbps\")")
	case r < 0 || math.IsNaN(float64(r)) || math.IsInf(float64(r), 0):
		p.Add(path, "must be a positive rate, got %v", float64(r))
	default:
		rateRange(p, path, r)
	}
}

// nonNegativeRate checks an optional rate.
func nonNegativeRate(p *problems, path string, r Rate) {
	if r < 0 || math.IsNaN(float64(r)) || math.IsInf(float64(r), 0) {
		p.Add(path, "must be a non-negative rate, got %v", float64(r))
		return
	}
	if r != 0 {
		rateRange(p, path, r)
	}
}

// rateRange checks that a positive rate is within [MinRate, MaxRate].
func rateRange(p *problems, path string, r Rate) {
	if !rateInRange(float64(r)) {
		p.Add(path, "%g bps is outside the representable range of rates, %g bps to %g bps", float64(r), float64(MinRate), float64(MaxRate))
	}
}

func (t *Topology) validate(p *problems) {
	sections := []struct {
		kind, field string
		given       bool
	}{
		{TopoTwoTier, "two_tier", t.TwoTier != nil},
		{TopoFatTree, "fat_tree", t.FatTree != nil},
		{TopoExplicit, "explicit", t.Explicit != nil},
	}
	known := false
	for _, sec := range sections {
		known = known || sec.kind == t.Kind
	}
	for _, sec := range sections {
		switch {
		case sec.kind == t.Kind && !sec.given:
			p.Add("topology."+sec.field, "required for kind %s", t.Kind)
		case sec.kind != t.Kind && sec.given && known:
			p.Add("topology."+sec.field, "not used by kind %s", t.Kind)
		}
	}
	switch {
	case t.Kind == "":
		p.Add("topology.kind", "required (two-tier, fat-tree or explicit)")
	case !known:
		p.Add("topology.kind", "unknown kind %q (use two-tier, fat-tree or explicit)", t.Kind)
	case t.Kind == TopoTwoTier && t.TwoTier != nil:
		t.TwoTier.validate(p)
	case t.Kind == TopoFatTree && t.FatTree != nil:
		t.FatTree.validate(p)
	case t.Kind == TopoExplicit && t.Explicit != nil:
		t.Explicit.validate(p)
	}
}

func (tt *TwoTier) validate(p *problems) {
	const at = "topology.two_tier"
	if tt.Racks < 1 {
		p.Add(at+".racks", "must be at least 1, got %d", tt.Racks)
	}
	if tt.ServersPerRack < 1 {
		p.Add(at+".servers_per_rack", "must be at least 1, got %d", tt.ServersPerRack)
	}
	switch {
	case tt.Racks > MaxServers:
		p.Add(at+".racks", "%d racks is more than the limit of %d servers", tt.Racks, MaxServers)
	case tt.ServersPerRack > MaxServers:
		p.Add(at+".servers_per_rack", "%d servers per rack is more than the limit of %d servers", tt.ServersPerRack, MaxServers)
	case tt.Racks >= 1 && tt.ServersPerRack >= 1 && mulCapped(int64(tt.Racks), int64(tt.ServersPerRack), MaxServers) > MaxServers:
		p.Add(at, "%d racks of %d servers is %d servers, more than the limit of %d", tt.Racks, tt.ServersPerRack, int64(tt.Racks)*int64(tt.ServersPerRack), MaxServers)
	}
	positiveRate(p, at+".edge", tt.Edge)
	nonNegativeRate(p, at+".core", tt.Core)
	switch {
	case tt.Core != 0 && tt.Oversubscription != 0:
		p.Add(at, "give core or oversubscription, not both")
	case tt.Oversubscription < 0 || math.IsNaN(tt.Oversubscription) || math.IsInf(tt.Oversubscription, 0):
		p.Add(at+".oversubscription", "must be positive, got %v", tt.Oversubscription)
	case tt.Oversubscription != 0 && (tt.Oversubscription < 1/MaxOversubscription || tt.Oversubscription > MaxOversubscription):
		p.Add(at+".oversubscription", "%g is outside the range %g to %g", tt.Oversubscription, 1/MaxOversubscription, float64(MaxOversubscription))
	case tt.Oversubscription != 0 && tt.ServersPerRack >= 1 && tt.ServersPerRack <= MaxServers && rateInRange(float64(tt.Edge)):
		// The core rate it gives: servers_per_rack × edge / oversubscription.
		if c := float64(tt.ServersPerRack) * float64(tt.Edge) / tt.Oversubscription; !rateInRange(c) {
			p.Add(at+".oversubscription", "gives a core of %g bps (servers_per_rack × edge / oversubscription), outside the representable range of rates, %g bps to %g bps", c, float64(MinRate), float64(MaxRate))
		}
	case tt.Core == 0 && tt.Oversubscription == 0:
		p.Add(at+".oversubscription", "required when core is not given (ApplyDefaults sets 1)")
	}
}

func (ft *FatTree) validate(p *problems) {
	const at = "topology.fat_tree"
	switch {
	case ft.K < 2 || ft.K%2 != 0:
		p.Add(at+".k", "must be an even number of at least 2, got %d", ft.K)
	case ft.K > MaxFatTreeK:
		p.Add(at+".k", "%d is more than %d, the largest k within the limit of %d servers (k³/4)", ft.K, MaxFatTreeK, MaxServers)
	}
	positiveRate(p, at+".link", ft.Link)
	if n := ft.Oversubscription; n < 0 || (n > 1 && ft.K >= 2 && ft.K%2 == 0 && (ft.K/2)%n != 0) {
		p.Add(at+".oversubscription", "must divide k/2 = %d (n for n:1 at the edge switches), got %d", ft.K/2, n)
	}
}

func (e *Explicit) validate(p *problems) {
	const at = "topology.explicit"
	if len(e.Nodes) == 0 {
		p.Add(at+".nodes", "required (at least one server)")
		return
	}
	if len(e.Nodes) > MaxNodes {
		p.Add(at+".nodes", "%d nodes is more than the limit of %d", len(e.Nodes), MaxNodes)
		return
	}
	if len(e.Links) > MaxLinks {
		p.Add(at+".links", "%d links is more than the limit of %d", len(e.Links), MaxLinks)
		return
	}
	before := p.Len()
	index := map[string]int{}
	servers := 0
	for i, n := range e.Nodes {
		path := fmt.Sprintf("%s.nodes[%d]", at, i)
		switch {
		case n.Name == "":
			p.Add(path+".name", "required")
		default:
			if j, dup := index[n.Name]; dup {
				p.Add(path+".name", "duplicate node %q (also %s.nodes[%d])", n.Name, at, j)
			} else {
				index[n.Name] = i
			}
		}
		switch n.Kind {
		case NodeServer:
			servers++
		case NodeSwitch:
		case "":
			p.Add(path+".kind", "required (server or switch)")
		default:
			p.Add(path+".kind", "unknown kind %q (use server or switch)", n.Kind)
		}
	}
	if servers == 0 {
		p.Add(at+".nodes", "no node of kind server")
	}
	if servers > MaxServers {
		p.Add(at+".nodes", "%d nodes of kind server is more than the limit of %d servers", servers, MaxServers)
	}

	type pair struct{ a, b int }
	links := map[pair]int{}
	degree := make([]int, len(e.Nodes))
	uf := newUnionFind(len(e.Nodes))
	for i, l := range e.Links {
		path := fmt.Sprintf("%s.links[%d]", at, i)
		a, aok := e.endpoint(p, path+".a", l.A, index)
		b, bok := e.endpoint(p, path+".b", l.B, index)
		positiveRate(p, path+".capacity", l.Capacity)
		if !aok || !bok {
			continue
		}
		if a == b {
			p.Add(path, "links node %q to itself", l.A)
			continue
		}
		key := pair{min(a, b), max(a, b)}
		if j, dup := links[key]; dup {
			p.Add(path, "duplicate link between %q and %q (also %s.links[%d])", l.A, l.B, at, j)
			continue
		}
		links[key] = i
		degree[a]++
		degree[b]++
		uf.union(a, b)
	}

	if p.Len() > before {
		return // degree and connectivity would only repeat the problems above
	}
	first := -1
	for i, n := range e.Nodes {
		if n.Kind != NodeServer || index[n.Name] != i {
			continue
		}
		path := fmt.Sprintf("%s.nodes[%d]", at, i)
		if degree[i] != 1 {
			p.Add(path, "server %q has %d links; a server needs exactly one (its access link)", n.Name, degree[i])
		}
		if first < 0 {
			first = i
		} else if uf.find(i) != uf.find(first) {
			p.Add(path, "server %q is not connected to server %q", n.Name, e.Nodes[first].Name)
		}
	}
}

func (e *Explicit) endpoint(p *problems, path, name string, index map[string]int) (int, bool) {
	if name == "" {
		p.Add(path, "required")
		return 0, false
	}
	i, ok := index[name]
	if !ok {
		p.Add(path, "unknown node %q", name)
	}
	return i, ok
}

type unionFind []int

func newUnionFind(n int) unionFind {
	u := make(unionFind, n)
	for i := range u {
		u[i] = i
	}
	return u
}

func (u unionFind) find(i int) int {
	for u[i] != i {
		u[i] = u[u[i]]
		i = u[i]
	}
	return i
}

func (u unionFind) union(a, b int) { u[u.find(a)] = u.find(b) }

// validateTenants checks the tenants: their names, SLAs, weights and VDCs
// and their VMs' names (model.Checker), the hose guarantees as written,
// and the VMs' servers with server.
func (s *Scenario) validateTenants(p *problems, c *model.Checker, server func(path, name string)) {
	if len(s.Tenants) == 0 {
		p.Add("tenants", "required (at least one tenant)")
		return
	}
	vms := 0
	for i := range s.Tenants {
		vms += len(s.Tenants[i].VMs)
	}
	if vms > MaxVMs {
		p.Add("tenants", "%d VMs in all is more than the limit of %d", vms, MaxVMs)
	}
	for i := range s.Tenants {
		t := &s.Tenants[i]
		at := fmt.Sprintf("tenants[%d]", i)
		c.Tenant(i)
		checkHose(p, at, t.BestEffort, t.Guarantee, t.In, t.Out)
		if len(t.VMs) == 0 {
			p.Add(at+".vms", "required (at least one VM)")
		}
		anyGuarantee := t.Guarantee != 0 || t.In != 0 || t.Out != 0
		for j := range t.VMs {
			anyGuarantee = anyGuarantee || t.VMs[j].Guarantee != 0 || t.VMs[j].In != 0 || t.VMs[j].Out != 0
		}
		if !t.BestEffort && !anyGuarantee && len(t.VMs) > 0 {
			p.Add(at, "no guarantees: set guarantee (or in and out), or best_effort: true")
		}
		for j := range t.VMs {
			v := &t.VMs[j]
			vat := fmt.Sprintf("%s.vms[%d]", at, j)
			c.VMName(i, j)
			if v.Server == "" {
				p.Add(vat+".server", "required")
			} else {
				server(vat+".server", v.Server)
			}
			checkHose(p, vat, t.BestEffort, v.Guarantee, v.In, v.Out)
			if in, out := t.Hose(v); !t.BestEffort && anyGuarantee && in == 0 && out == 0 {
				p.Add(vat, "no guarantee in either direction: set guarantee, in or out (here or on the tenant), or best_effort: true on the tenant")
			}
		}
		c.VDC(i)
		s.validatePresence(p, at, t)
		if len(t.Phases) > 0 {
			(&Workload{Phases: t.Phases}).validatePhases(p, at, s.Duration)
		}
	}
}

// validatePresence checks a tenant's join and leave times.
func (s *Scenario) validatePresence(p *problems, at string, t *Tenant) {
	if t.Join < 0 {
		p.Add(at+".join", "must not be negative, got %v", t.Join)
	} else if t.Join > 0 && t.Join >= s.Duration {
		p.Add(at+".join", "%v is not before the end of the run (%v)", t.Join, s.Duration)
	}
	switch {
	case t.Leave < 0:
		p.Add(at+".leave", "must not be negative, got %v", t.Leave)
	case t.Leave > 0 && t.Leave <= t.Join:
		p.Add(at+".leave", "%v is not after join (%v)", t.Leave, t.Join)
	case t.Leave > s.Duration:
		p.Add(at+".leave", "%v is after the end of the run (%v); leave it out to stay to the end", t.Leave, s.Duration)
	}
}

// checkHose checks the guarantee fields of a tenant or VM.
func checkHose(p *problems, at string, bestEffort bool, g, in, out Rate) {
	for _, f := range []struct {
		name string
		r    Rate
	}{{"guarantee", g}, {"in", in}, {"out", out}} {
		nonNegativeRate(p, at+"."+f.name, f.r)
		if bestEffort && f.r != 0 {
			p.Add(at+"."+f.name, "a best_effort tenant has no guarantees")
		}
	}
}

func (s *Scenario) validateWorkloads(p *problems) {
	vmIndex := s.VMIndex()
	names := map[string]int{}
	// A VM sends requests to a destination (appliance or VM) in at most one
	// workload: its request flow is one (src, dst) flow.
	requests := map[[2]string]int{}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		at := fmt.Sprintf("workloads[%d]", i)
		if w.Name != "" {
			if j, dup := names[w.Name]; dup {
				p.Add(at+".name", "duplicate workload %q (also workloads[%d])", w.Name, j)
			} else {
				names[w.Name] = i
			}
		}
		tenantOK := false
		switch _, ok := s.LookupTenant(w.Tenant); {
		case w.Tenant == "":
			p.Add(at+".tenant", "required")
		case !ok:
			p.Add(at+".tenant", "unknown tenant %q", w.Tenant)
		default:
			tenantOK = true
		}
		sides := []struct {
			field string
			list  StringList
		}{{"src", w.Src}, {"dst", w.Dst}}
		if w.Kind == KindRequests && len(w.Dst) == 0 {
			sides = sides[:1] // requests to an appliance have no dst
		}
		for _, side := range sides {
			if len(side.list) == 0 {
				p.Add(at+"."+side.field, "required (a VM name or a list of them)")
			}
			seen := map[string]int{}
			for k, name := range side.list {
				vat := fmt.Sprintf("%s.%s[%d]", at, side.field, k)
				if j, dup := seen[name]; dup {
					p.Add(vat, "VM %q listed twice (also %s.%s[%d])", name, at, side.field, j)
					continue
				}
				seen[name] = k
				if !tenantOK {
					continue
				}
				ref, ok := vmIndex[name]
				switch {
				case !ok:
					p.Add(vat, "unknown VM %q", name)
				case s.Tenants[ref.Tenant].Name != w.Tenant:
					p.Add(vat, "VM %q belongs to tenant %q, not %q", name, s.Tenants[ref.Tenant].Name, w.Tenant)
				}
			}
		}
		if w.Kind != KindRequests && len(w.Src) > 0 && len(w.Dst) > 0 && pairCount(w.Src, w.Dst, 0) == 0 {
			p.Add(at, "no VM pairs: src and dst are the same single VM")
		}
		w.validateKind(p, at)
		w.validateSize(p, at, s.Duration)
		if w.Kind == KindRequests {
			s.validateRequests(p, at, w, tenantOK)
			dsts := []string{w.Appliance}
			if len(w.Dst) > 0 {
				dsts = w.Dst
			}
			for k, src := range w.Src {
				for _, dst := range dsts {
					if dst == src || dst == "" {
						continue
					}
					key := [2]string{src, dst}
					if j, dup := requests[key]; dup && j != i {
						p.Add(fmt.Sprintf("%s.src[%d]", at, k), "VM %q already sends requests to %q in workloads[%d] (one workload per VM and destination)", src, dst, j)
					} else {
						requests[key] = i
					}
				}
			}
		}
		w.validatePhases(p, at, s.Duration)
		if t, ok := s.LookupTenant(w.Tenant); ok && (t.Join > 0 || t.Leave > 0) && s.presenceValid(t) {
			dur := time.Duration(s.Duration)
			for _, ph := range w.Intervals(dur) {
				start, stop := time.Duration(ph.Start), time.Duration(ph.Stop)
				if stop > start && (!t.Present(start, dur) || !t.Present(stop-1, dur)) {
					p.Add(at, "runs from %v to %v, but tenant %q is declared only from its join (%v) to its leave (%v)", start, stop, t.Name, t.Join, leaveOr(t.Leave, s.Duration))
					break
				}
			}
		}
	}
}

// presenceValid says whether a tenant's join and leave are valid (else
// validatePresence reports them, and workloads are not checked against
// them).
func (s *Scenario) presenceValid(t *Tenant) bool {
	return t.Join >= 0 && t.Join < s.Duration && t.Leave >= 0 && t.Leave <= s.Duration && (t.Leave == 0 || t.Leave > t.Join)
}

func leaveOr(leave, duration Duration) Duration {
	if leave == 0 {
		return duration
	}
	return leave
}

func (w *Workload) validateKind(p *problems, at string) {
	kind := w.Kind
	switch kind {
	case KindTCP, KindUDP, KindOnOff, KindFlows, KindClients, KindRequests:
	case "":
		p.Add(at+".kind", "required (tcp, udp, onoff, flows, clients or requests)")
		return
	default:
		p.Add(at+".kind", "unknown kind %q (use tcp, udp, onoff, flows, clients or requests)", kind)
		return
	}
	unused := func(field string, set bool) {
		if set {
			p.Add(at+"."+field, "not used by kind %s", kind)
		}
	}
	if kind != KindOnOff {
		unused("transport", w.Transport != "")
		unused("on", w.On != 0)
		unused("off", w.Off != 0)
		unused("exponential", w.Exponential)
	}
	if kind != KindFlows {
		unused("arrival_rate", w.ArrivalRate != 0)
	}
	if kind != KindFlows && kind != KindClients {
		unused("sizes", w.Sizes != nil)
	}
	if kind != KindClients {
		unused("sleep", w.Sleep != 0)
		unused("sleep_prob", w.SleepProb != 0)
	}
	if kind != KindRequests {
		unused("appliance", w.Appliance != "")
		unused("mix", len(w.Mix) > 0)
		unused("outstanding", w.Outstanding != 0)
		unused("request_rate", w.RequestRate != 0)
	}
	if w.Connections < 0 {
		p.Add(at+".connections", "must not be negative, got %d", w.Connections)
	} else if w.Connections > MaxConnections {
		p.Add(at+".connections", "%d is more than the limit of %d connections per pair", w.Connections, MaxConnections)
	}
	nonNegativeRate(p, at+".rate", w.Rate)
	switch kind {
	case KindRequests:
		unused("rate", w.Rate != 0)
	case KindUDP:
		unused("connections", w.Connections != 0)
		if w.Rate == 0 {
			p.Add(at+".rate", "required for kind udp (the sending rate of each pair)")
		}
	case KindOnOff:
		switch w.Transport {
		case "tcp":
		case "udp":
			if w.Connections != 0 {
				p.Add(at+".connections", "not used by onoff with transport udp")
			}
			if w.Rate == 0 {
				p.Add(at+".rate", "required for onoff with transport udp (the sending rate of each pair)")
			}
		case "":
			p.Add(at+".transport", "required (tcp or udp; ApplyDefaults sets tcp)")
		default:
			p.Add(at+".transport", "unknown transport %q (use tcp or udp)", w.Transport)
		}
		positive(p, at+".on", w.On)
		positive(p, at+".off", w.Off)
	case KindFlows:
		unused("connections", w.Connections != 0)
		unused("rate", w.Rate != 0)
		switch a := w.ArrivalRate; {
		case a == 0:
			p.Add(at+".arrival_rate", "required for kind flows (flows per second per pair)")
		case a < 0 || math.IsNaN(a) || math.IsInf(a, 0):
			p.Add(at+".arrival_rate", "must be a positive number of flows per second, got %v", a)
		case !eventRateInRange(a):
			p.Add(at+".arrival_rate", "%g flows/s is outside the range %g to %g flows/s", a, float64(MinEventRate), float64(MaxEventRate))
		}
		if w.Sizes == nil {
			p.Add(at+".sizes", "required for kind flows (a flow-size distribution)")
		} else {
			w.Sizes.validate(p, at+".sizes")
		}
	case KindClients:
		unused("connections", w.Connections != 0)
		unused("rate", w.Rate != 0)
		if w.Sizes == nil {
			p.Add(at+".sizes", "required for kind clients (a flow-size distribution)")
		} else {
			w.Sizes.validate(p, at+".sizes")
		}
		if w.Sleep < 0 {
			p.Add(at+".sleep", "must not be negative, got %v", w.Sleep)
		}
		if q := w.SleepProb; q < 0 || q > 1 || math.IsNaN(q) {
			p.Add(at+".sleep_prob", "%g is not a probability in [0, 1]", q)
		}
	}
}

func (d *SizeDist) validate(p *problems, at string) {
	unused := func(field string, set bool) {
		if set {
			p.Add(at+"."+field, "not used by dist %s", d.Dist)
		}
	}
	switch d.Dist {
	case DistFixed, DistExponential, DistPareto, DistLognormal:
		switch {
		case d.Mean == 0:
			p.Add(at+".mean", "required for dist %s (a size such as \"64KB\")", d.Dist)
		case d.Mean < 0 || math.IsNaN(float64(d.Mean)) || math.IsInf(float64(d.Mean), 0):
			p.Add(at+".mean", "must be a positive size, got %v", float64(d.Mean))
		case !sizeInRange(float64(d.Mean)):
			p.Add(at+".mean", "%g B is outside the representable range of sizes, %g B to %g B", float64(d.Mean), float64(MinSize), float64(MaxSize))
		}
		unused("cdf", len(d.CDF) > 0)
	case DistCDF:
		unused("mean", d.Mean != 0)
		unused("shape", d.Shape != 0)
	case "":
		p.Add(at+".dist", "required (fixed, exponential, pareto, lognormal or cdf)")
		return
	default:
		p.Add(at+".dist", "unknown distribution %q (use fixed, exponential, pareto, lognormal or cdf)", d.Dist)
		return
	}
	switch d.Dist {
	case DistFixed, DistExponential:
		unused("shape", d.Shape != 0)
	case DistPareto:
		if !(d.Shape > 1) || math.IsInf(d.Shape, 0) {
			p.Add(at+".shape", "must be greater than 1 (a finite mean), got %v", d.Shape)
		}
	case DistLognormal:
		if !(d.Shape > 0) || math.IsInf(d.Shape, 0) {
			p.Add(at+".shape", "must be positive (the sigma of the log of the size), got %v", d.Shape)
		} else if d.Shape > MaxLognormalShape {
			p.Add(at+".shape", "%g is more than the limit of %g", d.Shape, float64(MaxLognormalShape))
		}
	case DistCDF:
		if len(d.CDF) == 0 {
			p.Add(at+".cdf", "required for dist cdf (points of size and cumulative probability p)")
			return
		}
		for k, pt := range d.CDF {
			pat := fmt.Sprintf("%s.cdf[%d]", at, k)
			if pt.Size < 0 || math.IsNaN(float64(pt.Size)) || math.IsInf(float64(pt.Size), 0) {
				p.Add(pat+".size", "must be a non-negative size, got %v", float64(pt.Size))
			} else if pt.Size > MaxSize {
				p.Add(pat+".size", "%g B is more than the limit of %g B", float64(pt.Size), float64(MaxSize))
			} else if k > 0 && pt.Size <= d.CDF[k-1].Size {
				p.Add(pat+".size", "%v is not larger than the previous size %v (sizes must increase)", float64(pt.Size), float64(d.CDF[k-1].Size))
			}
			if !(pt.P >= 0 && pt.P <= 1) {
				p.Add(pat+".p", "must be between 0 and 1, got %v", pt.P)
			} else if k > 0 && pt.P < d.CDF[k-1].P {
				p.Add(pat+".p", "%v is less than the previous p %v (a CDF never decreases)", pt.P, d.CDF[k-1].P)
			}
		}
		if last := d.CDF[len(d.CDF)-1]; last.P != 1 && last.P >= 0 && last.P <= 1 {
			p.Add(fmt.Sprintf("%s.cdf[%d].p", at, len(d.CDF)-1), "the last point must have p 1, got %v", last.P)
		}
	}
}

func (w *Workload) validatePhases(p *problems, at string, duration Duration) {
	if len(w.Phases) > 0 && (w.Start != 0 || w.Stop != 0) {
		p.Add(at, "give start/stop or phases, not both")
		return
	}
	check := func(path string, ph Phase) {
		if ph.Start < 0 {
			p.Add(path+".start", "must not be negative, got %v", ph.Start)
		} else if duration > 0 && ph.Start >= duration {
			p.Add(path+".start", "%v is not before the end of the run (duration %v)", ph.Start, duration)
		}
		switch {
		case ph.Stop < 0:
			p.Add(path+".stop", "must not be negative, got %v", ph.Stop)
		case ph.Stop == 0:
		case ph.Stop <= ph.Start:
			p.Add(path+".stop", "%v is not after start %v", ph.Stop, ph.Start)
		case duration > 0 && ph.Stop > duration:
			p.Add(path+".stop", "%v is after the end of the run (duration %v)", ph.Stop, duration)
		}
	}
	if len(w.Phases) == 0 {
		check(at, Phase{Start: w.Start, Stop: w.Stop})
		return
	}
	for k, ph := range w.Phases {
		path := fmt.Sprintf("%s.phases[%d]", at, k)
		check(path, ph)
		if k == 0 {
			continue
		}
		prev := w.Phases[k-1]
		switch {
		case prev.Stop == 0:
			p.Add(path, "follows phases[%d], which runs to the end of the run", k-1)
		case ph.Start < prev.Stop:
			p.Add(path+".start", "%v is before the end of phases[%d] (%v); phases must be in order and not overlap", ph.Start, k-1, prev.Stop)
		}
	}
}

// validateSize checks a workload against the limits on the flows it
// creates: pairs × connections at once (MaxWorkloadFlows; for requests,
// each source and destination) and, for kind flows, the arrivals expected
// over the run (MaxWorkloadArrivals).
func (w *Workload) validateSize(p *problems, at string, duration Duration) {
	if w.Connections < 0 || w.Connections > MaxConnections {
		return
	}
	pairs := pairCount(w.Src, w.Dst, MaxWorkloadFlows)
	if w.Kind == KindRequests && len(w.Dst) == 0 {
		pairs = int64(len(w.Src)) // each source to the appliance
	}
	if flows := mulCapped(pairs, int64(max(w.Connections, 1)), MaxWorkloadFlows); flows > MaxWorkloadFlows {
		what := fmt.Sprintf("%d src × %d dst VMs", len(w.Src), len(w.Dst))
		if w.Kind == KindRequests && len(w.Dst) == 0 {
			what = fmt.Sprintf("%d src VMs to appliance %q", len(w.Src), w.Appliance)
		}
		p.Add(at, "%s with %d connections per pair is more than the limit of %d flows per workload", what, max(w.Connections, 1), MaxWorkloadFlows)
		return
	}
	if w.Kind == KindFlows && eventRateInRange(w.ArrivalRate) && duration > 0 {
		if n := w.ArrivalRate * float64(pairs) * activeSeconds(w, duration); n > MaxWorkloadArrivals {
			p.Add(at+".arrival_rate", "%g flows/s on %d pairs for %gs is %.3g flows expected, more than the limit of %d per workload", w.ArrivalRate, pairs, activeSeconds(w, duration), n, MaxWorkloadArrivals)
		}
	}
}
