package drive

import (
	"slices"
	"strings"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// Env builds the environment of the agent on host from the declared model:
// every VM of every tenant (sorted by name), the tenants' SLAs and the
// declared traffic pattern between the model's VMs (pattern, or, when it
// is nil, the tenants' patterns in the model; nil when none is declared;
// only reservation mechanisms use it). It is the one place an Env is made.
func Env(m *model.Model, host string, pattern []mech.PairID) mech.Env {
	env := mech.Env{Host: host, VMs: VMs(m)}
	if pattern == nil {
		for _, t := range m.Tenants {
			for _, p := range t.Pattern {
				pattern = append(pattern, mech.PairID{Src: p.Src, Dst: p.Dst})
			}
		}
	}
	// The pattern's pairs between VMs of the model, in the given order.
	for _, p := range pattern {
		if _, ok := env.VM(p.Src); !ok {
			continue
		}
		if _, ok := env.VM(p.Dst); ok {
			env.Pattern = append(env.Pattern, p)
		}
	}
	for _, h := range m.Hosts {
		if h.Link > 0 {
			if env.HostLinks == nil {
				env.HostLinks = map[string]float64{}
			}
			env.HostLinks[h.Name] = h.Link
		}
	}
	for _, t := range m.Tenants {
		if t.SLA > 0 {
			if env.SLA == nil {
				env.SLA = map[string]float64{}
			}
			env.SLA[t.Name] = t.SLA
		}
	}
	return env
}

// VMs lists the model's VMs as mechanisms see them, sorted by name.
func VMs(m *model.Model) []mech.VM {
	var vms []mech.VM
	for _, t := range m.Tenants {
		for _, v := range t.VMs {
			vms = append(vms, mech.VM{Name: v.Name, Tenant: t.Name, Host: v.Host, In: v.In, Out: v.Out})
		}
	}
	slices.SortFunc(vms, func(a, b mech.VM) int { return strings.Compare(a.Name, b.Name) })
	return vms
}

// Hosts lists the hosts with VMs in the model, sorted.
func Hosts(m *model.Model) []string {
	var hosts []string
	for _, t := range m.Tenants {
		for _, v := range t.VMs {
			hosts = append(hosts, v.Host)
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// ControllerEnv builds a central controller's environment from the
// declared model: the links (resources the driver knows, in its order),
// then one resource per appliance of the model (in the model's order,
// with the bounds of its capacity estimate), every VM, one VDC per tenant
// (in the model's order) and the hose reservations admission control made
// on links (nil: unknown).
func ControllerEnv(m *model.Model, links []mech.ResourceInfo, reservations []mech.Reservation) mech.ControllerEnv {
	env := mech.ControllerEnv{Resources: slices.Clone(links), VMs: VMs(m), Reservations: reservations}
	for _, a := range m.Appliances {
		env.Resources = append(env.Resources, mech.ResourceInfo{ID: a.Name, Kind: mech.ApplianceResource,
			CapacityMin: float64(a.CapacityMin), CapacityMax: float64(a.CapacityMax)})
	}
	for _, t := range m.Tenants {
		v := mech.VDC{Tenant: t.Name, SLA: t.SLA}
		if t.VDC != nil {
			v.Fixed = t.VDC.Fixed
			v.Policy = t.VDC.Policy
			v.Weights = t.VDC.Weights
			v.GlobalWeight = t.VDC.GlobalWeight
			for _, g := range t.VDC.Appliances {
				v.Appliances = append(v.Appliances, mech.ApplianceGuarantee{Appliance: g.Appliance, Min: float64(g.Guarantee), Max: float64(g.Max)})
			}
		}
		env.VDCs = append(env.VDCs, v)
	}
	return env
}

// LinkResources are a topology's link directions as central controllers
// see them: capacities in tokens (bytes) per second, and the WFQ queues
// of their sending ports (queues, maxWeight; 0 for none).
func LinkResources(t *topo.Topology, queues, maxWeight int) []mech.ResourceInfo {
	links := make([]mech.ResourceInfo, 0, len(t.Links))
	for _, l := range t.Links {
		links = append(links, mech.ResourceInfo{ID: l.Name, Kind: mech.LinkResource, Capacity: l.Capacity / 8,
			Queues: queues, MaxWeight: maxWeight})
	}
	return links
}
