package alloc

import (
	"fmt"
	"math/rand/v2"
)

// Pulsar §6.4 scale: 2000 servers × 12 VMs, 200 appliances.
const (
	scaleServers       = 2000
	scaleVMsPerServer  = 12
	scaleAppliances    = 200
	scaleApplianceFrac = 0.44
	scaleLinkCapacity  = 10e9 // bits/s, each direction of a server link
)

// PulsarScale builds the instance of Pulsar's controller-scalability
// experiment (§6.4), deterministically from seed, as a weighted max-min
// problem and as a vector (DRF family) problem over the same resources.
//
// Resources (4,200): each server's uplink and downlink (resources 2s and
// 2s+1, "srv0042/up", "srv0042/down", 10 Gbit/s each) and 200 appliances
// (resources 4000+a, "app017"). An appliance has a capacity in tokens/s
// drawn from 40, 80 or 120 G and a cost of 1, 1.5, 2 or 3 tokens per bit
// (a key-value store, a file store, an encryption box, ...).
//
// Tenants: the 24,000 VMs (12 per server, in server order) are cut into
// tenants of 10–200 consecutive VMs (so a tenant spans a few servers, as a
// locality-aware placement would leave it); each tenant has a per-VM
// guarantee class of 100, 200, 400 or 800 Mbit/s, whose multiple of 100
// Mbit/s is the weight of its flows, and uses 1–3 appliances.
//
// Flows (24,000, "vm01234"): every VM sources one. Exactly 44% of them
// (chosen at random) go to one of their tenant's appliances, with path
// {source uplink (coef 1), appliance (coef = its cost)}; the others go to
// a VM of the same tenant on another server (any other server if the
// tenant has one), with path {source uplink, destination downlink}. A
// quarter of the flows are unbounded; the others demand 0.1–3 Gbit/s. No
// floors. Class is empty (no hierarchical resources).
//
// The vector problem has the same resources and, per flow, the demand
// vector a bounded flow would put on its path at its demand (an unbounded
// flow demands a full link, 10 Gbit/s); flows are grouped by tenant and
// weighted as above.
func PulsarScale(seed int64) (*Problem, *VectorProblem) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	nVM := scaleServers * scaleVMsPerServer
	nR := 2*scaleServers + scaleAppliances

	resources := make([]Resource, nR)
	for s := 0; s < scaleServers; s++ {
		resources[2*s] = Resource{ID: fmt.Sprintf("srv%04d/up", s), Capacity: scaleLinkCapacity}
		resources[2*s+1] = Resource{ID: fmt.Sprintf("srv%04d/down", s), Capacity: scaleLinkCapacity}
	}
	appCost := make([]float64, scaleAppliances)
	costs := []float64{1, 1.5, 2, 3}
	for a := 0; a < scaleAppliances; a++ {
		resources[2*scaleServers+a] = Resource{ID: fmt.Sprintf("app%03d", a), Capacity: float64(40+40*rng.IntN(3)) * 1e9}
		appCost[a] = costs[rng.IntN(len(costs))]
	}

	// Tenants: runs of consecutive VMs.
	tenants, tenantOf, toAppliance := scaleTenants(rng, nVM, scaleAppliances)

	p := &Problem{Resources: resources, Flows: make([]Flow, nVM)}
	vp := &VectorProblem{Resources: make([]Resource, nR), Flows: make([]VectorFlow, nVM)}
	copy(vp.Resources, resources)
	for v := 0; v < nVM; v++ {
		t := &tenants[tenantOf[v]]
		src := v / scaleVMsPerServer
		f := Flow{ID: fmt.Sprintf("vm%05d", v), Weight: t.weight, Demand: Unbounded}
		if rng.IntN(4) > 0 {
			f.Demand = 1e8 + rng.Float64()*2.9e9
		}
		up := Use{Resource: 2 * src, Coef: 1}
		if toAppliance[v] {
			a := t.apps[rng.IntN(len(t.apps))]
			f.Uses = []Use{up, {Resource: 2*scaleServers + a, Coef: appCost[a]}}
		} else {
			dst := t.peerServer(rng, src, scaleServers)
			f.Uses = []Use{up, {Resource: 2*dst + 1, Coef: 1}}
		}
		p.Flows[v] = f

		d := f.Demand
		if d == Unbounded {
			d = scaleLinkCapacity
		}
		vf := VectorFlow{ID: f.ID, Weight: f.Weight, Group: fmt.Sprintf("tenant%03d", tenantOf[v])}
		for _, u := range f.Uses {
			vf.Sparse = append(vf.Sparse, Use{Resource: u.Resource, Coef: u.Coef * d})
		}
		vp.Flows[v] = vf
	}
	return p, vp
}

// scaleTenant is a tenant of a §6.4-scale instance: a run of consecutive
// VMs, a weight and the appliances its VMs use.
type scaleTenant struct {
	first, n int
	weight   float64
	apps     []int
}

// scaleTenants draws an instance's tenants (runs of 10–200 consecutive
// VMs, weights 1, 2, 4 or 8, one to three of nApp appliances each), every
// VM's tenant, and which VMs send to an appliance (scaleApplianceFrac of
// them).
func scaleTenants(rng *rand.Rand, nVM, nApp int) (tenants []scaleTenant, tenantOf []int, toAppliance []bool) {
	tenantOf = make([]int, nVM)
	for v := 0; v < nVM; {
		n := min(10+rng.IntN(191), nVM-v)
		t := scaleTenant{first: v, n: n, weight: float64(int(1) << rng.IntN(4))}
		for k := 1 + rng.IntN(3); k > 0; k-- {
			t.apps = append(t.apps, rng.IntN(nApp))
		}
		for i := v; i < v+n; i++ {
			tenantOf[i] = len(tenants)
		}
		tenants = append(tenants, t)
		v += n
	}
	toAppliance = make([]bool, nVM)
	for _, v := range rng.Perm(nVM)[:int(scaleApplianceFrac*float64(nVM)+0.5)] {
		toAppliance[v] = true
	}
	return tenants, tenantOf, toAppliance
}

// peerServer draws the server of a VM-to-VM flow's destination from the
// tenant's own servers other than src, or, for a tenant on one server,
// any other of the nSrv servers.
func (t *scaleTenant) peerServer(rng *rand.Rand, src, nSrv int) int {
	if t.first/scaleVMsPerServer == (t.first+t.n-1)/scaleVMsPerServer {
		return (src + 1 + rng.IntN(nSrv-1)) % nSrv
	}
	dst := src
	for dst == src {
		dst = (t.first + rng.IntN(t.n)) / scaleVMsPerServer
	}
	return dst
}
