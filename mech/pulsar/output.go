package pulsar

import (
	"maps"
	"math"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// output builds the actions: every flow's allocation (local + global on
// allocated elements, floored at the default rate where the demand is below
// it unless the flow is held back; +Inf elsewhere), and records what was
// granted at each appliance.
//
// The floor lets a flow whose demand fell show that it wants more again:
// held back there, it gets its guarantee's share at the next step. It is
// the default rate, but no more than the flow's equal share of each of its
// tenant's virtual resources on the element (guarantee ÷ the flows using
// it): so the floors of a tenant's flows stay within its guarantees, and
// hundreds of senders into one link, each floored, cannot oversubscribe
// it when none of them is held back by its enforcer (all of them limited
// by the congestion their floors cause, which the controller would never
// see). A flow held back already shows it wants more, and is given its
// guarantee's share and its estimate's part of the spare: no floor.
func (c *Controller) output(resets []mech.FlowAllocation) mech.ControllerActions {
	for _, a := range c.apps {
		if a != nil {
			a.granted = 0
			for i := range a.tenants {
				a.tenants[i].Granted = 0
			}
		}
	}
	n := 0
	for _, f := range c.order {
		n += len(f.path)
	}
	buf := make([]float64, n)
	allocs := make([]mech.FlowAllocation, 0, len(c.order)+len(resets))
	// The default rate: the start rate until some flow has used anything
	// (flows observed before, idle, are allocated at their floors: the
	// start rate too, so nobody holds spare capacity yet).
	for _, f := range c.order {
		if f.obs != nil && f.active() {
			c.started = true
			break
		}
	}
	def := c.p.DefaultRate
	if !c.started {
		def = c.def0
	}
	if def > 0 {
		c.vcount = growInt(c.vcount, len(c.allV))
		clear(c.vcount)
		for _, f := range c.order {
			if f.obs == nil || !f.active() {
				continue
			}
			for _, v := range f.vres {
				c.vcount[f.t.voff+int(v)]++
			}
		}
	}
	// vused: per virtual resource, the guarantee shares of the known flows
	// (local allocation, or floor), for the per-VM default rates.
	c.vused = growFloat(c.vused, len(c.allV))
	clear(c.vused)
	for _, f := range c.order {
		rates := buf[:len(f.path):len(f.path)]
		buf = buf[len(f.path):]
		frac := f.lx + f.y*f.s*max(0, 1-f.lx)
		c.vshare = growFloat(c.vshare, len(f.vres))
		clear(c.vshare)
		for e, pe := range f.path {
			if !f.in[e] {
				rates[e] = math.Inf(1)
				continue
			}
			d := f.demand[e]
			g := frac * d
			gl := f.lx * d
			if a := c.apps[pe.Resource]; a != nil {
				a.granted += g
				a.tenants[c.appSlot(f, e)].Granted += g
			}
			if def > 0 && d < def && !f.held {
				fl := c.floor(f, e, def)
				g = max(g, fl)
				gl = max(gl, fl)
			}
			rates[e] = g
			for _, k := range f.emap[e] {
				if k >= 0 {
					c.vshare[k] = max(c.vshare[k], gl)
				}
			}
		}
		for k, v := range f.vres {
			c.vused[f.t.voff+int(v)] += c.vshare[k]
		}
		allocs = append(allocs, mech.FlowAllocation{Flow: f.id, Rates: rates})
	}
	allocs = append(allocs, resets...)
	c.lastDef = def
	c.lastBySrc = c.vmDefaults(def)
	return mech.ControllerActions{Allocations: allocs, DefaultRate: def, DefaultBySrc: maps.Clone(c.lastBySrc)}
}

func growFloat(v []float64, n int) []float64 {
	if cap(v) < n {
		return make([]float64, n)
	}
	return v[:n]
}

// floor is the default-rate floor of flow f on path element e: the default
// rate def, at most f's equal share of each virtual resource of its tenant the
// element maps to among the flows that used it this interval (c.vcount;
// an idle flow counts itself in). A resource without a guarantee (a
// best-effort tenant's) does not lower it: such flows only get spare
// capacity, and the floor is what lets them ask again.
func (c *Controller) floor(f *flow, e int, def float64) float64 {
	fl := def
	self := int32(1)
	if f.obs != nil && f.active() {
		self = 0
	}
	for _, k := range f.emap[e] {
		if k < 0 {
			continue
		}
		v := f.t.voff + int(f.vres[k])
		if g := c.allV[v].Capacity; g > 0 {
			fl = min(fl, g/float64(c.vcount[v]+self))
		}
	}
	return fl
}

// active reports whether the flow used anything in the interval observed.
func (f *flow) active() bool {
	for e := range f.path {
		if at(f.obs.Used, e) > 0 {
			return true
		}
	}
	return false
}

func growInt(v []int32, n int) []int32 {
	if cap(v) < n {
		return make([]int32, n)
	}
	return v[:n]
}
