package pulsar

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// §6.4 scale.
const (
	scaleServers      = 2000
	scaleVMsPerServer = 12
	scaleAppliances   = 200
	scaleAppFraction  = 0.44
	scaleLink         = 10e9 / 8 // bytes/s, each direction of a server link
)

// ScaleInstance builds the controller-scalability instance of Pulsar §6.4,
// deterministically from seed: the environment and one interval's
// observations with activeFraction of the VMs active (each active VM
// sources one flow). It is what `bulkhead bench pulsar` and the package
// benchmark step.
//
// Resources (4,200): each server's uplink and downlink (resources 2s and
// 2s+1, "srv0042/up", "srv0042/down", 10 Gbit/s = 1.25e9 bytes/s) and 200
// appliances ("app017", resources 4000+a) with an advertised capacity of
// 5, 10 or 15 G tokens/s (window from half to 1.5 times that) and a cost of
// 1, 1.5, 2 or 3 tokens per request byte.
//
// Tenants, as in alloc.PulsarScale: the 24,000 VMs (12 per server, in
// server order) are cut into tenants of 10–200 consecutive VMs, each with a
// per-VM hose guarantee of 100, 200, 400 or 800 Mbit/s in and out and 1–3
// appliances; a tenant's guarantee on an appliance is its share of 80% of
// the appliance's minimum capacity, in proportion to the VM guarantees of
// the tenants using it. VDCs are minimum guarantees, local policy DRF.
//
// Flows: exactly 44% of all VMs (chosen at random) send to one of their
// tenant's appliances, with path {source uplink (Forward), appliance,
// source downlink (Reverse, responses of 0.1–2 bytes per request byte)};
// the others to a VM of the same tenant on another server, path {source
// uplink, destination downlink}. A quarter of the flows want a full link,
// the others 0.1–3 Gbit/s. Observations: every flow ran under an
// allocation of 0.3–1.5 times its demand; flows held back report the rest
// as backlog (and half of it queued on average), with outstanding tokens of
// 10 ms of their throughput.
func ScaleInstance(seed int64, activeFraction float64) (mech.ControllerEnv, *mech.ControllerObs) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x51a7e5ca1e))
	nVM := scaleServers * scaleVMsPerServer
	var env mech.ControllerEnv
	for s := 0; s < scaleServers; s++ {
		env.Resources = append(env.Resources,
			mech.ResourceInfo{ID: fmt.Sprintf("srv%04d/up", s), Kind: mech.LinkResource, Capacity: scaleLink},
			mech.ResourceInfo{ID: fmt.Sprintf("srv%04d/down", s), Kind: mech.LinkResource, Capacity: scaleLink})
	}
	costs := []float64{1, 1.5, 2, 3}
	appCost := make([]float64, scaleAppliances)
	for a := 0; a < scaleAppliances; a++ {
		c := float64(5+5*rng.IntN(3)) * 1e9
		env.Resources = append(env.Resources, mech.ResourceInfo{
			ID: fmt.Sprintf("app%03d", a), Kind: mech.ApplianceResource,
			Capacity: c, CapacityMin: c / 2, CapacityMax: 1.5 * c,
		})
		appCost[a] = costs[rng.IntN(len(costs))]
	}

	type tenant struct {
		first, n int
		guar     float64 // bits/s per VM
		apps     []int
	}
	var tenants []tenant
	tenantOf := make([]int, nVM)
	for v := 0; v < nVM; {
		n := min(10+rng.IntN(191), nVM-v)
		t := tenant{first: v, n: n, guar: float64(int(100e6) << rng.IntN(4))}
		for k := 1 + rng.IntN(3); k > 0; k-- {
			a := rng.IntN(scaleAppliances)
			dup := false
			for _, b := range t.apps {
				dup = dup || a == b
			}
			if !dup {
				t.apps = append(t.apps, a)
			}
		}
		for i := v; i < v+n; i++ {
			tenantOf[i] = len(tenants)
		}
		tenants = append(tenants, t)
		v += n
	}
	// Appliance guarantees: 80% of the minimum capacity, shared in
	// proportion to the tenants' VM guarantees.
	weight := make([]float64, scaleAppliances)
	for _, t := range tenants {
		for _, a := range t.apps {
			weight[a] += t.guar * float64(t.n)
		}
	}
	for i, t := range tenants {
		vdc := mech.VDC{Tenant: fmt.Sprintf("tenant%03d", i), Policy: "drf"}
		for _, a := range t.apps {
			r := env.Resources[2*scaleServers+a]
			vdc.Appliances = append(vdc.Appliances, mech.ApplianceGuarantee{
				Appliance: r.ID, Min: 0.8 * r.CapacityMin * t.guar * float64(t.n) / weight[a],
			})
		}
		env.VDCs = append(env.VDCs, vdc)
		for v := t.first; v < t.first+t.n; v++ {
			env.VMs = append(env.VMs, mech.VM{
				Name: fmt.Sprintf("vm%05d", v), Tenant: vdc.Tenant,
				Host: fmt.Sprintf("srv%04d", v/scaleVMsPerServer), In: t.guar, Out: t.guar,
			})
		}
	}

	toApp := make([]bool, nVM)
	for _, v := range rng.Perm(nVM)[:int(scaleAppFraction*float64(nVM)+0.5)] {
		toApp[v] = true
	}
	active := make([]bool, nVM)
	for _, v := range rng.Perm(nVM)[:int(activeFraction*float64(nVM)+0.5)] {
		active[v] = true
	}

	obs := &mech.ControllerObs{Now: time.Second, Period: time.Second}
	for v := 0; v < nVM; v++ {
		t := &tenants[tenantOf[v]]
		src := v / scaleVMsPerServer
		demand := scaleLink
		if rng.IntN(4) > 0 {
			demand = (1e8 + rng.Float64()*2.9e9) / 8
		}
		allocated := demand * (0.3 + 1.2*rng.Float64())
		var dst string
		var path []mech.PathElem
		var coef []float64
		if toApp[v] {
			a := t.apps[rng.IntN(len(t.apps))]
			dst = env.Resources[2*scaleServers+a].ID
			path = []mech.PathElem{{Resource: 2 * src, Role: mech.Forward}, {Resource: 2*scaleServers + a, Role: mech.Appliance}, {Resource: 2*src + 1, Role: mech.Reverse}}
			coef = []float64{1, appCost[a], 0.1 + 1.9*rng.Float64()}
		} else {
			d := src
			if t.first/scaleVMsPerServer != (t.first+t.n-1)/scaleVMsPerServer {
				var w int
				for d == src {
					w = t.first + rng.IntN(t.n)
					d = w / scaleVMsPerServer
				}
				dst = fmt.Sprintf("vm%05d", w)
			} else {
				w := rng.IntN(nVM)
				for w/scaleVMsPerServer == src {
					w = rng.IntN(nVM)
				}
				d = w / scaleVMsPerServer
				dst = fmt.Sprintf("vm%05d", w)
			}
			path = []mech.PathElem{{Resource: 2 * src, Role: mech.Forward}, {Resource: 2*d + 1, Role: mech.Forward}}
			coef = []float64{1, 1}
		}
		if !active[v] {
			continue
		}
		used := min(demand, allocated)
		f := mech.FlowObs{
			Flow:   mech.FlowID{Src: fmt.Sprintf("vm%05d", v), Dst: dst},
			Tenant: fmt.Sprintf("tenant%03d", tenantOf[v]),
			Path:   path,
		}
		n := len(path)
		f.Used, f.Backlog, f.Queued, f.Outstanding, f.Allocation = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		for e, c := range coef {
			f.Allocation[e] = c * allocated
			f.Used[e] = c * used
			f.Outstanding[e] = c * used * 0.01
			if demand > allocated {
				f.Backlog[e] = c * (demand - allocated)
				f.Queued[e] = f.Backlog[e] / 2
			}
		}
		obs.Flows = append(obs.Flows, f)
	}
	return env, obs
}
