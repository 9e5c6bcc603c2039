package pulsar

import (
	"math"

	"github.com/bulkhead-dc/bulkhead/alloc"
)

// local computes every tenant's local allocation, f.x and f.lx: the
// tenant's policy over its virtual resources. Tenants' virtual resources
// are disjoint and every policy here is separable (progressive filling, or
// first fit in order), so the tenants of one policy are solved together.
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
		for _, f := range c.lfl {
			f.lx = f.x * f.k
		}
	}
}

// localDemand resets f's allocation state and computes its demand on its
// tenant's virtual resources: f.vdem, the largest demand of the path
// elements mapped to each, and f.luse, the same as uses of c.allV. It
// returns false if the flow demands nothing.
//
// Guarantees first (§4.1): a flow its enforcer held back (f.held: a new
// flow at the default rate, one returning from idle at a decayed
// allocation, one that grows) demands more than its estimate can show,
// which only grows by what the enforcer let through. Its local demand is
// its estimate scaled up, keeping its shape, until it reaches the
// capacity of one of its virtual resources (f.k ≥ 1): it can then be
// given its whole guarantee at once — the tenant's policy shares the
// guarantees among its flows — while the estimate, which ramps up from
// what the flow used, decides its part of the spare capacity. A flow
// whose requests wait in queues at appliances is scaled up the same way
// by the demand the queues hide (f.hidden), within its guarantees.
func (c *Controller) localDemand(f *flow) bool {
	f.x, f.k, f.lx, f.y, f.s = 0, 1, 0, 0, 1
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
	if f.held || f.hidden > 1 {
		k := math.Inf(1)
		if !f.held {
			k = f.hidden
		}
		for i, d := range f.vdem {
			if d > 0 {
				k = min(k, c.allV[f.t.voff+int(f.vres[i])].Capacity/d)
			}
		}
		if k > 1 && !math.IsInf(k, 1) {
			f.k = k
		}
	}
	f.luse = f.luse[:0]
	for k, d := range f.vdem {
		if d > 0 {
			f.luse = append(f.luse, alloc.Use{Resource: f.t.voff + int(f.vres[k]), Coef: f.k * d})
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
