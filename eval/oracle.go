package eval

import (
	"fmt"
	"math"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/hose"
)

// SaturationTolerance: a link is saturated by the ideal allocation when its
// ideal load is at least (1 − SaturationTolerance) × its capacity.
const SaturationTolerance = 1e-6

// MinWeightFraction is the weight, relative to the largest guarantee in the
// sample, of a pair with demand but no guarantee in the ideal allocation.
const MinWeightFraction = 1e-6

// Oracle computes what an ideal system would deliver on given demands:
//
//   - the hose guarantee of each pair: per tenant, the max-min allocation of
//     the tenant's current demands on its hose network (hose.Network); pairs
//     without demand get 0;
//   - the ideal work-conserving allocation on the physical network: every
//     pair first gets its hose guarantee (its floor), then the residual link
//     capacity goes to the residual demand by weighted max-min with weight =
//     the pair's guarantee (MinWeightFraction × the largest guarantee for a
//     pair with demand but no guarantee). Unbounded demands are limited by
//     the physical links only. Should the guarantees over-commit a link
//     (admission control not done), the floors of the pairs crossing it are
//     scaled down to fit. A pair with no physical links gets its demand
//     (+Inf if unbounded).
//
// An Oracle keeps scratch space, so that repeated solves do not allocate;
// it is not safe for concurrent use.
type Oracle struct {
	pairs   []Pair
	linkCap []float64

	tenants    []oracleTenant
	pairTenant []int

	solver alloc.Solver
	prob   alloc.Problem
	uses   [][]alloc.Use // per pair
	ids    []string      // flow ID per pair
	active []int
	rates  []float64
	load   []float64 // per link
	scale  []float64 // per link: floor scale factor
}

type oracleTenant struct {
	net    *hose.Network
	pairs  []int            // global pair indices
	ip     []hose.IndexPair // with the demands of the last solve
	g      []float64
	solved bool // g holds the guarantees for ip
}

// NewOracle compiles the tenants' hose networks and the pairs' routes over
// links with the given capacities (bits/s). Pairs must name VMs of their
// tenant and links within linkCapacity.
func NewOracle(tenants []Tenant, pairs []Pair, linkCapacity []float64) (*Oracle, error) {
	o := &Oracle{
		// Problems are compiled here from validated inputs and solved at
		// every sample whose demands changed.
		solver:     alloc.Solver{Trusted: true},
		pairs:      pairs,
		linkCap:    linkCapacity,
		tenants:    make([]oracleTenant, len(tenants)),
		pairTenant: make([]int, len(pairs)),
		uses:       make([][]alloc.Use, len(pairs)),
		ids:        make([]string, len(pairs)),
		active:     make([]int, 0, len(pairs)),
		rates:      make([]float64, len(pairs)),
		load:       make([]float64, len(linkCapacity)),
		scale:      make([]float64, len(linkCapacity)),
	}
	byName := make(map[string]int, len(tenants))
	for i, t := range tenants {
		vms := make([]hose.VM, len(t.VMs))
		for j, v := range t.VMs {
			vms[j] = hose.VM{Name: v.Name, In: v.In, Out: v.Out}
		}
		net, err := hose.NewNetwork(vms)
		if err != nil {
			return nil, fmt.Errorf("eval: tenant %q: %w", t.Name, err)
		}
		o.tenants[i].net = net
		byName[t.Name] = i
	}
	o.prob.Resources = make([]alloc.Resource, len(linkCapacity))
	for l, c := range linkCapacity {
		o.prob.Resources[l] = alloc.Resource{ID: fmt.Sprint("link", l), Capacity: c}
	}
	o.prob.Flows = make([]alloc.Flow, 0, len(pairs))
	for i, p := range pairs {
		ti, ok := byName[p.Tenant]
		if !ok {
			return nil, fmt.Errorf("eval: pair %d (%s->%s): unknown tenant %q", i, p.Src, p.Dst, p.Tenant)
		}
		t := &o.tenants[ti]
		s, ok := t.net.Index(p.Src)
		if !ok {
			return nil, fmt.Errorf("eval: pair %d (%s->%s): tenant %q has no VM %q", i, p.Src, p.Dst, p.Tenant, p.Src)
		}
		d, ok := t.net.Index(p.Dst)
		if !ok {
			return nil, fmt.Errorf("eval: pair %d (%s->%s): tenant %q has no VM %q", i, p.Src, p.Dst, p.Tenant, p.Dst)
		}
		o.pairTenant[i] = ti
		t.pairs = append(t.pairs, i)
		t.ip = append(t.ip, hose.IndexPair{Src: s, Dst: d})
		u := make([]alloc.Use, len(p.Links))
		for k, l := range p.Links {
			if l < 0 || l >= len(linkCapacity) {
				return nil, fmt.Errorf("eval: pair %d (%s->%s): link %d out of range [0, %d)", i, p.Src, p.Dst, l, len(linkCapacity))
			}
			u[k] = alloc.Use{Resource: l, Coef: 1}
		}
		o.uses[i] = u
		o.ids[i] = fmt.Sprintf("pair%d:%s:%s->%s", i, p.Tenant, p.Src, p.Dst)
	}
	for i := range o.tenants {
		o.tenants[i].g = make([]float64, len(o.tenants[i].pairs))
	}
	return o, nil
}

// Solve computes, for demand (bits/s, indexed like the pairs, +Inf for
// unbounded), each pair's hose guarantee and ideal rate, and, when
// bottleneck is not nil, whether the pair crosses a physical link that the
// ideal allocation saturates. All slices have one entry per pair.
func (o *Oracle) Solve(demand, guarantee, ideal []float64, bottleneck []bool) error {
	n := len(o.pairs)
	if len(demand) != n || len(guarantee) != n || len(ideal) != n || (bottleneck != nil && len(bottleneck) != n) {
		return fmt.Errorf("eval: oracle: slices must have one entry per pair (%d)", n)
	}
	for i, d := range demand {
		if !(d >= 0) {
			return fmt.Errorf("eval: oracle: pair %d (%s->%s): demand %v must be ≥ 0", i, o.pairs[i].Src, o.pairs[i].Dst, d)
		}
	}
	// Hose guarantees, tenant by tenant.
	for ti := range o.tenants {
		t := &o.tenants[ti]
		same := t.solved
		for k, i := range t.pairs {
			if t.ip[k].Demand != demand[i] {
				same = false
				t.ip[k].Demand = demand[i]
			}
		}
		if !same {
			t.solved = false
			if err := t.net.Solve(t.ip, t.g); err != nil {
				return fmt.Errorf("eval: oracle: %w", err)
			}
			t.solved = true
		}
		for k, i := range t.pairs {
			guarantee[i] = math.Min(t.g[k], demand[i])
		}
	}
	// Floors: guarantees, scaled down on over-committed links.
	maxG := 0.0
	for l := range o.load {
		o.load[l] = 0
	}
	for i, g := range guarantee {
		maxG = math.Max(maxG, g)
		for _, u := range o.uses[i] {
			o.load[u.Resource] += g
		}
	}
	for l, c := range o.linkCap {
		o.scale[l] = 1
		if o.load[l] > c {
			o.scale[l] = c / o.load[l] * (1 - 1e-12)
		}
	}
	minW := 1.0
	if maxG > 0 {
		minW = MinWeightFraction * maxG
	}
	o.prob.Flows = o.prob.Flows[:0]
	o.active = o.active[:0]
	for i, d := range demand {
		ideal[i] = 0
		if d == 0 {
			continue
		}
		if len(o.uses[i]) == 0 {
			ideal[i] = d
			continue
		}
		f := guarantee[i]
		for _, u := range o.uses[i] {
			f *= o.scale[u.Resource]
		}
		w := guarantee[i]
		if w <= 0 {
			w = minW
		}
		o.prob.Flows = append(o.prob.Flows, alloc.Flow{ID: o.ids[i], Uses: o.uses[i], Demand: d, Weight: w, Floor: f})
		o.active = append(o.active, i)
	}
	if len(o.active) > 0 {
		rates := o.rates[:len(o.active)]
		if err := o.solver.Solve(&o.prob, rates); err != nil {
			return fmt.Errorf("eval: oracle: ideal allocation: %w", err)
		}
		for k, i := range o.active {
			ideal[i] = math.Max(0, math.Min(rates[k], demand[i]))
		}
	}
	if bottleneck == nil {
		return nil
	}
	for l := range o.load {
		o.load[l] = 0
	}
	for i, r := range ideal {
		for _, u := range o.uses[i] {
			o.load[u.Resource] += r
		}
	}
	for i := range bottleneck {
		b := false
		if demand[i] > 0 {
			for _, u := range o.uses[i] {
				if o.load[u.Resource] >= o.linkCap[u.Resource]*(1-SaturationTolerance) {
					b = true
					break
				}
			}
		}
		bottleneck[i] = b
	}
	return nil
}
