package pulsar

import (
	"math"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// output builds the actions: every flow's allocation (local + global on
// allocated elements, floored at the default rate where the demand is below
// it; +Inf elsewhere), and records what was granted at each appliance.
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
	def := c.p.DefaultRate
	for _, f := range c.order {
		rates := buf[:len(f.path):len(f.path)]
		buf = buf[len(f.path):]
		frac := f.x + f.y*f.s*(1-f.x)
		for e, pe := range f.path {
			if !f.in[e] {
				rates[e] = math.Inf(1)
				continue
			}
			d := f.demand[e]
			g := frac * d
			if a := c.apps[pe.Resource]; a != nil {
				a.granted += g
				a.tenants[c.appSlot(f, e)].Granted += g
			}
			if def > 0 && d < def {
				g = max(g, def)
			}
			rates[e] = g
		}
		allocs = append(allocs, mech.FlowAllocation{Flow: f.id, Rates: rates})
	}
	allocs = append(allocs, resets...)
	return mech.ControllerActions{Allocations: allocs, DefaultRate: def}
}
