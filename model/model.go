// Package model is Bulkhead's declared model: what an operator declares
// and the system enforces, apart from any experiment. Tenants with their
// VMs (name, host, addresses, interface and resolved hose guarantees),
// best-effort status, weights and SLAs, and their virtual datacenters
// (guarantees on appliances, allocation policy); appliances with their
// actual costs (service time by request type and size) and the virtual
// cost functions that price requests in tokens (Pulsar §3).
//
// A scenario (package spec) declares a model and more (topology,
// workloads, phases, outputs); spec.Scenario.Model extracts it. An
// operator's controller or a request-aware proxy uses a model without
// scenarios: built in code or decoded from JSON or YAML (the field names
// are the same in both), then ApplyDefaults and Validate.
package model

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Model is the declared model: tenants and appliances, each in the order
// declared.
type Model struct {
	Tenants    []Tenant    `yaml:"tenants" json:"tenants"`
	Appliances []Appliance `yaml:"appliances,omitempty" json:"appliances,omitempty"`
	// Hosts are the servers the model knows, with their access links
	// (mechanisms that schedule a host's link need its capacity); a host
	// of a VM that is not listed has an unknown link.
	Hosts []Host `yaml:"hosts,omitempty" json:"hosts,omitempty"`
}

// Host is a server and the capacity of its access link.
type Host struct {
	Name string `yaml:"name" json:"name"`
	// Link is the capacity of the host's access link in bits/s, each
	// direction (0: unknown).
	Link float64 `yaml:"link,omitempty" json:"link,omitempty"`
}

// Tenant is a set of VMs with hose-model guarantees and, optionally, a
// virtual datacenter with guarantees on appliances.
type Tenant struct {
	Name string `yaml:"name" json:"name"`
	// BestEffort marks a tenant without guarantees: its VMs have none and
	// nothing is reserved for it.
	BestEffort bool `yaml:"best_effort,omitempty" json:"best_effort,omitempty"`
	// Weight is an optional policy weight; 0: derived from the guarantees
	// by the mechanism.
	Weight float64 `yaml:"weight,omitempty" json:"weight,omitempty"`
	// SLA is the performance degradation the tenant tolerates, a fraction
	// of what its VMs demand (DRX: "within 15%" is 0.15); 0: no SLA.
	SLA float64 `yaml:"sla,omitempty" json:"sla,omitempty"`
	// VDC adds appliance guarantees and allocation policy (Pulsar).
	VDC *VDC `yaml:"vdc,omitempty" json:"vdc,omitempty"`
	VMs []VM `yaml:"vms" json:"vms"`
	// Pattern lists the VM pairs of the tenant that communicate, where
	// the operator declares them: reservation mechanisms (static) reserve
	// hose-model rates for these pairs only. Empty: not declared.
	Pattern []Pair `yaml:"pattern,omitempty" json:"pattern,omitempty"`
}

// Pair is a pair of VMs of one tenant: traffic from Src to Dst.
type Pair struct {
	Src string `yaml:"src" json:"src"`
	Dst string `yaml:"dst" json:"dst"`
}

// VM is one virtual machine of a tenant, on a host (a server). Names are
// unique in the model.
type VM struct {
	Name string `yaml:"name" json:"name"`
	// Tenant is the name of the tenant that lists the VM.
	Tenant string `yaml:"tenant" json:"tenant"`
	Host   string `yaml:"host" json:"host"`
	// Addrs are the VM's IP addresses, where known (a proxy tells VMs by
	// them); each belongs to one VM.
	Addrs []netip.Addr `yaml:"addrs,omitempty" json:"addrs,omitempty"`
	// Interface is the VM's network interface on its host, where known.
	Interface string `yaml:"interface,omitempty" json:"interface,omitempty"`
	// Netns, if set, is the named network namespace (/run/netns) the
	// Interface is in: the VM's own device there, one end of a veth whose
	// peer is in the host's namespace. Empty: the Interface is the VM's
	// device in the host's namespace (a tap or a veth).
	Netns string `yaml:"netns,omitempty" json:"netns,omitempty"`
	// In and Out are the VM's hose guarantees in bits/s, resolved (no
	// defaults from the tenant apply); 0: no guarantee that way.
	In  float64 `yaml:"in,omitempty" json:"in,omitempty"`
	Out float64 `yaml:"out,omitempty" json:"out,omitempty"`
}

// Defaults applied by ApplyDefaults to fields left zero.
const (
	DefaultParallelism = 1.0 // Appliance.Parallelism
	DefaultPolicy      = PolicyDRF
)

// ApplyDefaults fills the fields a model may leave out: every appliance's
// (Appliance.ApplyDefaults) and every VDC's (VDC.ApplyDefaults). It is
// idempotent; call it on a model built in code or decoded before Validate.
func (m *Model) ApplyDefaults() {
	for i := range m.Appliances {
		m.Appliances[i].ApplyDefaults()
	}
	for i := range m.Tenants {
		m.Tenants[i].VDC.ApplyDefaults()
	}
}

// ApplyDefaults sets Parallelism to DefaultParallelism when zero and adds
// DefaultVirtualCost (Pulsar Fig. 6(b)) for all types when no cost
// function covers all types. It is idempotent.
func (a *Appliance) ApplyDefaults() {
	if a.Parallelism == 0 {
		a.Parallelism = DefaultParallelism
	}
	for _, v := range a.VirtualCost {
		if v.Type == "" {
			return
		}
	}
	a.VirtualCost = append(a.VirtualCost, DefaultVirtualCost())
}

// ApplyDefaults sets Policy to DefaultPolicy when empty; nothing for a
// nil VDC.
func (v *VDC) ApplyDefaults() {
	if v != nil && v.Policy == "" {
		v.Policy = DefaultPolicy
	}
}

// Clone returns a deep copy of the model: changing one does not change
// the other.
func (m *Model) Clone() *Model {
	out := &Model{Tenants: slices.Clone(m.Tenants), Appliances: slices.Clone(m.Appliances), Hosts: slices.Clone(m.Hosts)}
	for i := range out.Tenants {
		t := &out.Tenants[i]
		if t.VDC != nil {
			v := *t.VDC
			v.Appliances = slices.Clone(v.Appliances)
			v.Weights = maps.Clone(v.Weights)
			t.VDC = &v
		}
		t.VMs = slices.Clone(t.VMs)
		t.Pattern = slices.Clone(t.Pattern)
		for j := range t.VMs {
			t.VMs[j].Addrs = slices.Clone(t.VMs[j].Addrs)
		}
	}
	for i := range out.Appliances {
		a := &out.Appliances[i]
		a.Costs = slices.Clone(a.Costs)
		a.VirtualCost = slices.Clone(a.VirtualCost)
		for k := range a.VirtualCost {
			a.VirtualCost[k].Points = slices.Clone(a.VirtualCost[k].Points)
		}
	}
	return out
}

// Tenant returns the named tenant (the first, if names repeat).
func (m *Model) Tenant(name string) (*Tenant, bool) {
	for i := range m.Tenants {
		if m.Tenants[i].Name == name {
			return &m.Tenants[i], true
		}
	}
	return nil, false
}

// VM returns the named VM and the tenant that lists it (the first, if
// names repeat).
func (m *Model) VM(name string) (*VM, *Tenant, bool) {
	for i := range m.Tenants {
		t := &m.Tenants[i]
		for j := range t.VMs {
			if t.VMs[j].Name == name {
				return &t.VMs[j], t, true
			}
		}
	}
	return nil, nil, false
}

// Appliance returns the named appliance (the first, if names repeat).
func (m *Model) Appliance(name string) (*Appliance, bool) {
	for i := range m.Appliances {
		if m.Appliances[i].Name == name {
			return &m.Appliances[i], true
		}
	}
	return nil, false
}

// VMs lists every VM of every tenant, sorted by name (VMs of the same
// name in the order declared). The list is a copy; Addrs are shared with
// the model.
func (m *Model) VMs() []VM {
	return m.vms(func(*VM) bool { return true })
}

// VMsOn lists the VMs on host, sorted by name as VMs.
func (m *Model) VMsOn(host string) []VM {
	return m.vms(func(v *VM) bool { return v.Host == host })
}

func (m *Model) vms(keep func(*VM) bool) []VM {
	var out []VM
	for i := range m.Tenants {
		for j := range m.Tenants[i].VMs {
			if v := &m.Tenants[i].VMs[j]; keep(v) {
				out = append(out, *v)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b VM) int { return strings.Compare(a.Name, b.Name) })
	return out
}
