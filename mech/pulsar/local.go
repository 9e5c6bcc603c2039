package pulsar

import "github.com/bulkhead-dc/bulkhead/alloc"

// local computes every tenant's local allocation, f.x: the tenant's policy
// over its virtual resources. Tenants' virtual resources are disjoint and
// every policy here is separable (progressive filling, or first fit in
// order), so the tenants of one policy are solved together.
func (c *Controller) local() {
	for _, pol := range []Policy{DRF, MaxMin, FirstFit} {
		c.lfl = c.lfl[:0]
		c.ff = c.ff[:0]
		for _, t := range c.tenants {
			if t.policy != pol || t.hi == t.lo {
				continue
			}
			for _, f := range c.order[t.lo:t.hi] {
				if c.localDemand(f) {
					c.lfl = append(c.lfl, f)
					c.ff = append(c.ff, fillFlow{ID: f.key, Weight: f.w, Uses: f.luse})
				}
			}
		}
		if len(c.lfl) == 0 {
			continue
		}
		var err error
		if pol == FirstFit {
			err = c.localFirstFit()
		} else {
			c.fx = grow(c.fx, len(c.ff))
			if err = c.fill.solve(c.allV, c.ff, pol == DRF, c.fx); err == nil {
				for i, f := range c.lfl {
					f.x = c.fx[i]
				}
			}
		}
		if err != nil {
			c.log.Error("local allocation failed; no local allocation", "policy", pol, "err", err)
			for _, f := range c.lfl {
				f.x = 0
			}
		}
	}
}

// localDemand resets f's allocation state and computes its demand on its
// tenant's virtual resources: f.vdem, the largest demand of the path
// elements mapped to each, and f.luse, the same as uses of c.allV. It
// returns false if the flow demands nothing.
func (c *Controller) localDemand(f *flow) bool {
	f.x, f.y, f.s = 0, 0, 1
	clear(f.vdem)
	for e, m := range f.emap {
		d := f.demand[e]
		if !f.in[e] || !(d > 0) {
			continue
		}
		for _, k := range m {
			if k >= 0 {
				f.vdem[k] = max(f.vdem[k], d)
			}
		}
	}
	f.luse = f.luse[:0]
	for k, d := range f.vdem {
		if d > 0 {
			f.luse = append(f.luse, alloc.Use{Resource: f.t.voff + int(f.vres[k]), Coef: d})
		}
	}
	return len(f.luse) > 0
}

// localFirstFit serves the flows in order (tenant, source, destination),
// each taking the largest fraction of its demand that fits its tenant's
// remaining guarantees (alloc.FirstFit over the virtual resources used).
func (c *Controller) localFirstFit() error {
	c.lgen++
	c.lres = c.lres[:0]
	c.lvp.Flows = c.lvp.Flows[:0]
	for _, f := range c.lfl {
		for k := range f.luse {
			gv := f.luse[k].Resource
			if c.lstamp[gv] != c.lgen {
				c.lstamp[gv] = c.lgen
				c.lidx[gv] = int32(len(c.lres))
				c.lres = append(c.lres, c.allV[gv])
			}
			f.luse[k].Resource = int(c.lidx[gv])
		}
		c.lvp.Flows = append(c.lvp.Flows, alloc.VectorFlow{ID: f.key, Weight: f.w, Sparse: f.luse})
	}
	c.lvp.Resources = c.lres
	x, err := alloc.FirstFit(&c.lvp)
	if err != nil {
		return err
	}
	for i, f := range c.lfl {
		f.x = min(1, max(0, x[i]))
	}
	return nil
}
