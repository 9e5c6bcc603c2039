package pulsar

import (
	"cmp"
	"slices"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// global allocates the spare capacity: f.y (and f.s, the Max-cap scale).
func (c *Controller) global() {
	// Spare = capacity − local allocations.
	for r := range c.spare {
		c.spare[r] = c.capacity[r]
	}
	for _, t := range c.tenants {
		if t.capLocal != nil {
			clear(t.capLocal)
			clear(t.capUnmet)
		}
	}
	for _, f := range c.order {
		for e, pe := range f.path {
			if !f.in[e] {
				continue
			}
			d := f.demand[e]
			c.spare[pe.Resource] -= f.lx * d
			if m := f.t.capLocal; m != nil {
				if _, ok := f.t.appMax[pe.Resource]; ok && pe.Role == mech.Appliance {
					m[pe.Resource] += f.lx * d
					f.t.capUnmet[pe.Resource] += max(0, 1-f.lx) * d
				}
			}
		}
	}
	for r := range c.spare {
		c.spare[r] = max(0, c.spare[r])
	}

	// Flows with unmet demand, of tenants with minimum guarantees.
	c.gfl = c.gfl[:0]
	for _, f := range c.order {
		if f.t.fixed || f.lx >= 1 {
			continue
		}
		s := 1.0
		if f.t.capLocal != nil {
			for e, pe := range f.path {
				if !f.in[e] || pe.Role != mech.Appliance {
					continue
				}
				if mx, ok := f.t.appMax[pe.Resource]; ok {
					if u := f.t.capUnmet[pe.Resource]; u > 0 {
						s = min(s, max(0, mx-f.t.capLocal[pe.Resource])/u)
					}
				}
			}
		}
		f.s = s
		f.guse = f.guse[:0]
		for e, pe := range f.path {
			if d := (1 - f.lx) * s * f.demand[e]; f.in[e] && d > 0 {
				f.guse = append(f.guse, alloc.Use{Resource: pe.Resource, Coef: d})
			}
		}
		if len(f.guse) > 0 {
			c.gfl = append(c.gfl, f)
		}
	}
	if len(c.gfl) == 0 {
		return
	}

	// Per-tenant totals of local weights: flat policies split a tenant's
	// weight among its flows in proportion to their local weights.
	for _, t := range c.tenants {
		t.wsum = 0
	}
	for _, f := range c.gfl {
		f.t.wsum += f.w
	}
	for r := range c.gvp.Resources {
		c.gvp.Resources[r].Capacity = c.spare[r]
	}
	c.fx = grow(c.fx, len(c.gfl))
	y := c.fx
	var err error
	switch c.p.GlobalPolicy {
	case DRF, MaxMin:
		c.ff = c.ff[:0]
		for _, f := range c.gfl {
			c.ff = append(c.ff, fillFlow{ID: f.key, Weight: f.t.gweight * f.w / f.t.wsum, Uses: f.guse})
		}
		err = c.fill.solve(c.gvp.Resources, c.ff, c.p.GlobalPolicy == DRF, y)
	default:
		if c.p.GlobalPolicy == FirstFit {
			// Provider's order: heavier tenants first.
			slices.SortStableFunc(c.gfl, func(a, b *flow) int {
				return cmp.Or(cmp.Compare(b.t.gweight, a.t.gweight), cmp.Compare(a.t.idx, b.t.idx))
			})
		}
		c.gvp.Flows = c.gvp.Flows[:0]
		c.gvp.GroupWeights = nil
		if c.p.GlobalPolicy == HDRF {
			c.gvp.GroupWeights = make(map[string]float64)
			for _, t := range c.tenants {
				if t.wsum > 0 && t.name != "" {
					c.gvp.GroupWeights[t.name] = t.gweight
				}
			}
		}
		for _, f := range c.gfl {
			vf := alloc.VectorFlow{ID: f.key, Sparse: f.guse, Weight: f.w}
			if c.p.GlobalPolicy == HDRF {
				vf.Group = f.t.name
			}
			c.gvp.Flows = append(c.gvp.Flows, vf)
		}
		if c.p.GlobalPolicy == HDRF {
			y, err = alloc.HDRF(&c.gvp)
		} else {
			y, err = alloc.FirstFit(&c.gvp)
		}
	}
	if err != nil {
		c.log.Error("global allocation failed; no spare capacity allocated", "err", err)
		return
	}
	for i, f := range c.gfl {
		f.y = min(1, max(0, y[i]))
	}
}
