package alloc

import "math"

// sparseVec is the demand of every flow of a vector problem as sorted,
// merged (resource, amount) lists with zero amounts dropped (CSR form).
type sparseVec struct {
	start []int32 // len(flows)+1
	res   []int32
	amt   []float64
}

func (v *sparseVec) of(i int) ([]int32, []float64) {
	return v.res[v.start[i]:v.start[i+1]], v.amt[v.start[i]:v.start[i+1]]
}

// sparseDemands converts the (validated) demands of p to CSR form.
func sparseDemands(p *VectorProblem) *sparseVec {
	nR := len(p.Resources)
	v := &sparseVec{start: make([]int32, 1, len(p.Flows)+1)}
	acc := make([]float64, nR)
	stamp := make([]int32, nR)
	for r := range stamp {
		stamp[r] = -1
	}
	for i := range p.Flows {
		f := &p.Flows[i]
		if f.Demand != nil {
			for r, d := range f.Demand {
				if d > 0 {
					v.res = append(v.res, int32(r))
					v.amt = append(v.amt, d)
				}
			}
		} else {
			first := len(v.res)
			for _, u := range f.Sparse {
				if stamp[u.Resource] != int32(i) {
					stamp[u.Resource] = int32(i)
					acc[u.Resource] = 0
					v.res = append(v.res, int32(u.Resource))
				}
				acc[u.Resource] += u.Coef
			}
			rs := v.res[first:]
			sortInt32(rs)
			for _, r := range rs {
				v.amt = append(v.amt, acc[r])
			}
		}
		v.start = append(v.start, int32(len(v.res)))
	}
	return v
}

func sortInt32(a []int32) {
	// Insertion sort: demand lists are short.
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// dominant returns flow i's dominant share at x = 1, max_r d_ir/C_r over
// finite capacities, and whether it demands a resource of capacity 0 (then
// it can get nothing).
func dominant(p *VectorProblem, res []int32, amt []float64) (dom float64, blocked bool) {
	for k, r := range res {
		c := p.Resources[r].Capacity
		switch {
		case c == 0:
			blocked = true
		case !math.IsInf(c, 1):
			dom = max(dom, amt[k]/c)
		}
	}
	return dom, blocked
}

// DRF returns x per flow (allocation = x·demand, x ∈ [0, 1]) under weighted
// Dominant Resource Fairness with divisible demands: progressive filling
// that raises every unfrozen flow's weighted dominant share s_i/w_i (s_i =
// x_i·max_r d_ir/C_r) at the same pace; a flow freezes at x = 1 or when a
// resource it demands saturates. It is weighted max-min over shares s_i
// with coefficients d_ir/dom_i and demand caps dom_i, solved by the same
// water-filling core as MaxMin. A flow that demands nothing gets x = 1; a
// flow that demands a resource of capacity 0 gets x = 0; resources of
// infinite capacity never constrain.
func DRF(p *VectorProblem) ([]float64, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	nF, nR := len(p.Flows), len(p.Resources)
	v := sparseDemands(p)
	dom := make([]float64, nF)
	x := make([]float64, nF)
	var g engine
	g.reset(nR, nF)
	for r := range p.Resources {
		g.cap[r] = p.Resources[r].Capacity
	}
	for i := range p.Flows {
		res, amt := v.of(i)
		d, blocked := dominant(p, res, amt)
		g.w[i] = p.Flows[i].Weight
		switch {
		case blocked:
			x[i], dom[i], g.dem[i] = 0, -1, 0
		case d == 0:
			x[i], dom[i], g.dem[i] = 1, -1, 0
		default:
			dom[i], g.dem[i] = d, d
			for k, r := range res {
				g.addUse(r, amt[k]/d)
			}
		}
		g.endFlow()
	}
	g.eOnly = true // only the allocations are read
	g.run()        // every flow has a finite demand cap
	for i := range x {
		if dom[i] > 0 {
			x[i] = min(1, max(0, g.e[i]/dom[i]))
		}
	}
	return x, nil
}

// FirstFit returns x per flow (allocation = x·demand): flows are served in
// the given order, each taking the largest x ≤ 1 that fits in the capacity
// the earlier flows left.
func FirstFit(p *VectorProblem) ([]float64, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	v := sparseDemands(p)
	rem := make([]float64, len(p.Resources))
	for r := range rem {
		rem[r] = p.Resources[r].Capacity
	}
	x := make([]float64, len(p.Flows))
	for i := range p.Flows {
		res, amt := v.of(i)
		xi := 1.0
		for k, r := range res {
			xi = min(xi, rem[r]/amt[k])
		}
		xi = max(0, xi)
		for k, r := range res {
			rem[r] = max(0, rem[r]-xi*amt[k])
		}
		x[i] = xi
	}
	return x, nil
}
