package pulsar

import (
	"math"

	"github.com/bulkhead-dc/bulkhead/alloc"
)

// fillFlow is one client of a filler: its demand vector as a list of
// distinct resources with the demand (> 0) on each.
type fillFlow struct {
	ID     string
	Weight float64
	Uses   []alloc.Use // Resource: index into the resources; Coef: demand
}

// filler solves DRF and weighted max-min over demand vectors with a reused
// alloc.Solver, after reducing the problem without changing its answer.
//
// Both policies are weighted max-min by progressive filling in a
// normalized unit: flow i's level s_i = x_i·unit_i (x_i ∈ [0, 1] the
// fraction of its demand vector d_i it gets) rises at pace w_i; it puts
// d_ir/unit_i per unit of s_i on resource r and freezes at x_i = 1 or when
// a resource it uses saturates. For DRF, unit_i is the dominant share
// max_r d_ir/C_r over finite capacities — this is exactly alloc.DRF (see
// its documentation), and the tests check the two agree; for max-min,
// unit_i = max_r d_ir (max-min on each flow's largest demand).
//
// Reduction: a resource whose total demand fits its capacity never
// saturates and is left out of the solver's problem; a resource that only
// one flow uses becomes a cap on that flow's x (it saturates exactly when
// the flow reaches C_r/d_ir); a flow left without a shared constraint gets
// its cap without solving. A flow demanding a resource of capacity 0 gets
// x = 0; a DRF flow that only demands resources of infinite capacity gets
// x = 1. At Pulsar's scale most virtual resources (a VM's out-link) have
// one flow, so the local allocation shrinks to the shared ones.
type filler struct {
	stamp []int32
	gen   int32
	tot   []float64
	cnt   []int32
	idx   []int32

	res    []alloc.Resource
	p      alloc.Problem
	uses   []alloc.Use
	starts []int32
	who    []int32
	unit   []float64
	rates  []float64
	solver alloc.Solver
}

// solve writes x per flow into x (len(flows)).
func (z *filler) solve(res []alloc.Resource, flows []fillFlow, drf bool, x []float64) error {
	if n := len(res); len(z.stamp) < n {
		z.stamp = make([]int32, n)
		z.tot = make([]float64, n)
		z.cnt = make([]int32, n)
		z.idx = make([]int32, n)
		z.gen = 0
	}
	z.gen++
	for i := range flows {
		for _, u := range flows[i].Uses {
			r := u.Resource
			if z.stamp[r] != z.gen {
				z.stamp[r], z.tot[r], z.cnt[r], z.idx[r] = z.gen, 0, 0, -1
			}
			z.tot[r] += u.Coef
			z.cnt[r]++
		}
	}
	z.res, z.uses, z.starts, z.who, z.unit = z.res[:0], z.uses[:0], z.starts[:0], z.who[:0], z.unit[:0]
	z.p.Flows = z.p.Flows[:0]
	for i := range flows {
		f := &flows[i]
		unit, blocked := 0.0, false
		for _, u := range f.Uses {
			c := res[u.Resource].Capacity
			switch {
			case c <= 0:
				blocked = true
			case !drf:
				unit = max(unit, u.Coef)
			case !math.IsInf(c, 1):
				unit = max(unit, u.Coef/c)
			}
		}
		if blocked || len(f.Uses) == 0 || unit == 0 {
			x[i] = 0
			if !blocked {
				x[i] = 1
			}
			continue
		}
		xcap := 1.0
		start := len(z.uses)
		for _, u := range f.Uses {
			r := u.Resource
			c := res[r].Capacity
			switch {
			case z.tot[r] <= c:
			case z.cnt[r] == 1:
				xcap = min(xcap, c/u.Coef)
			default:
				if z.idx[r] < 0 {
					z.idx[r] = int32(len(z.res))
					z.res = append(z.res, res[r])
				}
				z.uses = append(z.uses, alloc.Use{Resource: int(z.idx[r]), Coef: u.Coef / unit})
			}
		}
		if len(z.uses) == start {
			x[i] = xcap
			continue
		}
		z.starts = append(z.starts, int32(start))
		z.who = append(z.who, int32(i))
		z.unit = append(z.unit, unit)
		z.p.Flows = append(z.p.Flows, alloc.Flow{ID: f.ID, Demand: xcap * unit, Weight: f.Weight})
	}
	if len(z.p.Flows) == 0 {
		return nil
	}
	for k := range z.p.Flows {
		end := len(z.uses)
		if k+1 < len(z.starts) {
			end = int(z.starts[k+1])
		}
		z.p.Flows[k].Uses = z.uses[z.starts[k]:end:end]
	}
	z.p.Resources = z.res
	z.rates = grow(z.rates, len(z.p.Flows))
	if err := z.solver.Solve(&z.p, z.rates); err != nil {
		return err
	}
	for k, i := range z.who {
		x[i] = min(1, max(0, z.rates[k]/z.unit[k]))
	}
	return nil
}
