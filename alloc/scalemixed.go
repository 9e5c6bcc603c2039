package alloc

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// MaxMixedScale bounds the scale factor of PulsarScaleMixed (IDs are
// zero-padded to fit it, so that they sort as numbers).
const MaxMixedScale = 100

// Appliance kinds of PulsarScaleMixed.
const (
	mixedKV         = iota // key-value store: small, expensive requests
	mixedFileStore         // file store: large reads and writes, cheap per bit
	mixedEncryption        // encryption box: as much back as in
)

// PulsarScaleMixed builds a §6.4-scale instance, k times Pulsar's
// (k × 2000 servers × 12 VMs, k × 200 appliances), deterministically from
// seed, whose flows have different dominant resources, so that DRF and
// H-DRF differ from weighted max-min. (In PulsarScale every flow's
// dominant resource is its uplink, and DRF equals weighted max-min step
// for step.) It returns the rate problem and the vector problem over the
// same resources, like PulsarScale; k must be in [1, MaxMixedScale].
//
// Resources (k × 4,200): each server's uplink and downlink (resources 2s
// and 2s+1, "srv000042/up", "srv000042/down", 10 Gbit/s each), then the
// appliances ("app00017", resources 2·servers + a), each of one of three
// kinds, drawn uniformly:
//
//   - key-value store: 5, 10 or 15 G tokens/s, 2 or 3 tokens per request
//     bit (small requests cost more than they weigh), responses 0.1–0.5 of
//     the request: the appliance is the dominant resource of its flows
//     (appliance-heavy);
//   - file store: 40, 80 or 120 G tokens/s, 1 token per bit; a flow
//     writes (responses 0.05 of the request: uplink-heavy) or reads
//     (responses 2–8 times the request: downlink-heavy), half each;
//   - encryption box: 20 or 40 G tokens/s, 1.5 tokens per bit, responses
//     as large as the request (the two links tie).
//
// Tenants as in PulsarScale: runs of 10–200 consecutive VMs (12 per server,
// in server order), weight 1, 2, 4 or 8 (100–800 Mbit/s per VM), 1–3
// appliances each. Flows ("vm0001234", in ID order): every VM sources one;
// exactly 44% (chosen at random) go to one of their tenant's appliances,
// path {source uplink (coef 1), appliance (coef = its cost), source
// downlink (coef = the response ratio)}; the others to a VM of the same
// tenant on another server (any other server if the tenant has one), path
// {source uplink, destination downlink}. A quarter of the flows are
// unbounded, the others demand 0.1–3 Gbit/s. No floors, no classes.
//
// The vector problem has, per flow, the demand vector the flow would put
// on its path at its demand (an unbounded flow demands a full uplink,
// 10 Gbit/s), grouped by tenant ("tenant00042") and weighted as above.
func PulsarScaleMixed(seed int64, k int) (*Problem, *VectorProblem, error) {
	if k < 1 || k > MaxMixedScale {
		return nil, nil, fmt.Errorf("alloc: scale factor %d outside [1, %d]", k, MaxMixedScale)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6d69786564))
	nSrv := k * scaleServers
	nApp := k * scaleAppliances
	nVM := nSrv * scaleVMsPerServer
	nR := 2*nSrv + nApp

	resources := make([]Resource, nR)
	for s := 0; s < nSrv; s++ {
		resources[2*s] = Resource{ID: fmt.Sprintf("srv%06d/up", s), Capacity: scaleLinkCapacity}
		resources[2*s+1] = Resource{ID: fmt.Sprintf("srv%06d/down", s), Capacity: scaleLinkCapacity}
	}
	type appliance struct {
		kind int
		cost float64
	}
	apps := make([]appliance, nApp)
	for a := range apps {
		var c float64
		switch kind := rng.IntN(3); kind {
		case mixedKV:
			c = float64(5+5*rng.IntN(3)) * 1e9
			apps[a] = appliance{kind: kind, cost: float64(2 + rng.IntN(2))}
		case mixedFileStore:
			c = float64(40+40*rng.IntN(3)) * 1e9
			apps[a] = appliance{kind: kind, cost: 1}
		default:
			c = float64(20+20*rng.IntN(2)) * 1e9
			apps[a] = appliance{kind: kind, cost: 1.5}
		}
		resources[2*nSrv+a] = Resource{ID: fmt.Sprintf("app%05d", a), Capacity: c}
	}

	tenants, tenantOf, toAppliance := scaleTenants(rng, nVM, nApp)

	p := &Problem{Resources: resources, Flows: make([]Flow, nVM)}
	vp := &VectorProblem{Resources: make([]Resource, nR), Flows: make([]VectorFlow, nVM)}
	copy(vp.Resources, resources)
	// One backing array per problem for the flows' uses (fewer allocations
	// at 960,000 flows).
	uses := make([]Use, 0, 3*nVM)
	sparse := make([]Use, 0, 3*nVM)
	groups := make([]string, len(tenants))
	for t := range tenants {
		groups[t] = fmt.Sprintf("tenant%05d", t)
	}
	for v := 0; v < nVM; v++ {
		t := &tenants[tenantOf[v]]
		src := v / scaleVMsPerServer
		f := Flow{ID: fmt.Sprintf("vm%07d", v), Weight: t.weight, Demand: Unbounded}
		if rng.IntN(4) > 0 {
			f.Demand = 1e8 + rng.Float64()*2.9e9
		}
		start := len(uses)
		uses = append(uses, Use{Resource: 2 * src, Coef: 1})
		if toAppliance[v] {
			a := t.apps[rng.IntN(len(t.apps))]
			var resp float64
			switch apps[a].kind {
			case mixedKV:
				resp = 0.1 + 0.4*rng.Float64()
			case mixedFileStore:
				if rng.IntN(2) == 0 {
					resp = 0.05
				} else {
					resp = 2 + 6*rng.Float64()
				}
			default:
				resp = 1
			}
			uses = append(uses, Use{Resource: 2*nSrv + a, Coef: apps[a].cost}, Use{Resource: 2*src + 1, Coef: resp})
		} else {
			dst := t.peerServer(rng, src, nSrv)
			uses = append(uses, Use{Resource: 2*dst + 1, Coef: 1})
		}
		f.Uses = uses[start:len(uses):len(uses)]
		p.Flows[v] = f

		d := f.Demand
		if d == Unbounded {
			d = scaleLinkCapacity
		}
		vf := VectorFlow{ID: f.ID, Weight: f.Weight, Group: groups[tenantOf[v]]}
		sstart := len(sparse)
		for _, u := range f.Uses {
			sparse = append(sparse, Use{Resource: u.Resource, Coef: u.Coef * d})
		}
		vf.Sparse = sparse[sstart:len(sparse):len(sparse)]
		vp.Flows[v] = vf
	}
	return p, vp, nil
}

// DominantResources counts, for a vector problem, the flows whose dominant
// resource (largest demand relative to capacity) is each resource of
// p.Resources; ties go to the resource listed first in the flow.
func DominantResources(p *VectorProblem) []int {
	n := make([]int, len(p.Resources))
	for _, f := range p.Flows {
		best, bestShare := -1, 0.0
		if f.Demand != nil {
			for r, d := range f.Demand {
				if s := d / p.Resources[r].Capacity; s > bestShare {
					best, bestShare = r, s
				}
			}
		}
		for _, u := range f.Sparse {
			if s := u.Coef / p.Resources[u.Resource].Capacity; s > bestShare {
				best, bestShare = u.Resource, s
			}
		}
		if best >= 0 {
			n[best]++
		}
	}
	return n
}

// VectorRates turns a vector allocator's x into rates comparable with
// weighted max-min on p: x times the flow's demand on the first resource
// of its path, over that use's coefficient (p and vp as PulsarScale and
// PulsarScaleMixed build them).
func VectorRates(p *Problem, vp *VectorProblem, x []float64) []float64 {
	out := make([]float64, len(x))
	for i, f := range p.Flows {
		u := f.Uses[0]
		for _, s := range vp.Flows[i].Sparse {
			if s.Resource == u.Resource {
				out[i] = x[i] * s.Coef / u.Coef
				break
			}
		}
	}
	return out
}

// Differing counts the i where a[i] and b[i] differ by more than 1e-6 of
// the larger (or of 1).
func Differing(a, b []float64) int {
	n := 0
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-6*max(math.Abs(a[i]), math.Abs(b[i]), 1) {
			n++
		}
	}
	return n
}
