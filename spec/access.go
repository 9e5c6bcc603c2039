package spec

import (
	"strconv"
	"strings"
	"time"
)

// Names used in scenario files.
const (
	// Topology kinds.
	TopoTwoTier  = "two-tier"
	TopoFatTree  = "fat-tree"
	TopoExplicit = "explicit"

	// Node kinds of explicit graphs.
	NodeServer = "server"
	NodeSwitch = "switch"

	// Workload kinds.
	KindTCP   = "tcp"
	KindUDP   = "udp"
	KindOnOff = "onoff"
	KindFlows = "flows"
	// KindClients: closed-loop clients fetching flows from servers.
	KindClients = "clients"
	// KindRequests: VMs sending requests to an appliance.
	KindRequests = "requests"

	// Size distributions.
	DistFixed       = "fixed"
	DistExponential = "exponential"
	DistPareto      = "pareto"
	DistLognormal   = "lognormal"
	DistCDF         = "cdf"
)

// Hose returns the hose-model guarantees (bits/s) of one of the tenant's
// VMs: each direction takes the first nonzero of the VM's in (out), the VM's
// guarantee, the tenant's in (out), the tenant's guarantee. Zero means no
// guarantee in that direction.
func (t *Tenant) Hose(vm *VM) (in, out float64) {
	in = float64(firstNonzero(vm.In, vm.Guarantee, t.In, t.Guarantee))
	out = float64(firstNonzero(vm.Out, vm.Guarantee, t.Out, t.Guarantee))
	return in, out
}

func firstNonzero(rs ...Rate) Rate {
	for _, r := range rs {
		if r != 0 {
			return r
		}
	}
	return 0
}

// VMRef locates a VM: s.Tenants[Tenant].VMs[VM].
type VMRef struct{ Tenant, VM int }

// LookupTenant returns the named tenant.
func (s *Scenario) LookupTenant(name string) (*Tenant, bool) {
	for i := range s.Tenants {
		if s.Tenants[i].Name == name {
			return &s.Tenants[i], true
		}
	}
	return nil, false
}

// LookupVM returns the named VM and its tenant (the VM's server is
// vm.Server). It scans the tenants; for many lookups build VMIndex once.
func (s *Scenario) LookupVM(name string) (vm *VM, tenant *Tenant, ok bool) {
	for i := range s.Tenants {
		t := &s.Tenants[i]
		for j := range t.VMs {
			if t.VMs[j].Name == name {
				return &t.VMs[j], t, true
			}
		}
	}
	return nil, nil, false
}

// VMIndex maps every VM name to its place (the first, if names repeat).
func (s *Scenario) VMIndex() map[string]VMRef {
	idx := map[string]VMRef{}
	for i := range s.Tenants {
		for j, v := range s.Tenants[i].VMs {
			if _, dup := idx[v.Name]; !dup {
				idx[v.Name] = VMRef{i, j}
			}
		}
	}
	return idx
}

// VMGuarantee returns the resolved hose guarantees (bits/s) of the named
// VM, as Tenant.Hose; zeros for an unknown VM.
func (s *Scenario) VMGuarantee(vm string) (in, out float64) {
	v, t, ok := s.LookupVM(vm)
	if !ok {
		return 0, 0
	}
	return t.Hose(v)
}

// Intervals returns the workload's active intervals, ordered, with every
// Stop resolved (a zero Stop becomes duration, the scenario's length):
// Phases if given, else [Start, Stop) if either is set, else the whole run.
func (w Workload) Intervals(duration time.Duration) []Phase {
	end := func(d Duration) Duration {
		if d == 0 {
			return Duration(duration)
		}
		return d
	}
	if len(w.Phases) > 0 {
		out := make([]Phase, len(w.Phases))
		for i, p := range w.Phases {
			out[i] = Phase{Start: p.Start, Stop: end(p.Stop)}
		}
		return out
	}
	return []Phase{{Start: w.Start, Stop: end(w.Stop)}}
}

// Pairs returns the workload's directed VM pairs: every Src VM to every Dst
// VM, in that order, skipping a VM paired with itself. A requests workload
// has no VM pairs (its flows go from each of Sources to its Appliance):
// Pairs returns nil for it.
func (w Workload) Pairs() [][2]string {
	if w.Kind == KindRequests {
		return nil
	}
	out := make([][2]string, 0, len(w.Src)*len(w.Dst))
	for _, a := range w.Src {
		for _, b := range w.Dst {
			if a != b {
				out = append(out, [2]string{a, b})
			}
		}
	}
	return out
}

// Sources returns the VMs that send: Src, in order (for a requests
// workload, the VMs that each send the mix to Appliance).
func (w Workload) Sources() []string {
	return append([]string(nil), w.Src...)
}

// ServerNames lists the servers the topology declares, in order: s1..sN
// for two-tier (rack by rack) and fat-tree, the nodes of kind "server" in
// the order given for explicit graphs. topo builds exactly these names.
func (t *Topology) ServerNames() []string {
	n := t.generatedServers()
	if n < 0 {
		var out []string
		if t.Explicit != nil {
			for _, nd := range t.Explicit.Nodes {
				if nd.Kind == NodeServer {
					out = append(out, nd.Name)
				}
			}
		}
		return out
	}
	out := make([]string, n)
	for i := range out {
		out[i] = "s" + strconv.Itoa(i+1)
	}
	return out
}

// generatedServers is the number of servers a generated topology (two-tier,
// fat-tree) has, or -1 for other kinds. Over MaxServers it returns a
// number above MaxServers instead (the product is never overflowed).
func (t *Topology) generatedServers() int {
	switch {
	case t.Kind == TopoTwoTier && t.TwoTier != nil:
		return int(mulCapped(int64(t.TwoTier.Racks), int64(t.TwoTier.ServersPerRack), MaxServers))
	case t.Kind == TopoFatTree && t.FatTree != nil:
		k := int64(max(t.FatTree.K, 0))
		const limit = 4*MaxServers + 3 // capped at 4*MaxServers + 4: over MaxServers once divided
		return int(mulCapped(mulCapped(k, k, limit), k, limit) / 4)
	}
	return -1
}

// serverSet returns a membership test for server names and, for explicit
// graphs, the kind of every node (to tell "a switch" from "unknown").
func (t *Topology) serverSet() (isServer func(string) bool, kindOf map[string]string) {
	if n := t.generatedServers(); n >= 0 {
		return func(name string) bool {
			num, ok := strings.CutPrefix(name, "s")
			if !ok || num == "" || num[0] == '0' {
				return false
			}
			i, err := strconv.Atoi(num)
			return err == nil && i >= 1 && i <= n
		}, nil
	}
	kindOf = map[string]string{}
	if t.Explicit != nil {
		for _, nd := range t.Explicit.Nodes {
			if _, dup := kindOf[nd.Name]; !dup {
				kindOf[nd.Name] = nd.Kind
			}
		}
	}
	return func(name string) bool { return kindOf[name] == NodeServer }, kindOf
}
