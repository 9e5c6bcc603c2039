package pulsar

import (
	"cmp"
	"math"
	"slices"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// ingest reads the observations into the flows: this interval's raw
// demand estimates (EstimateDemand) and whether the enforcer held them
// back (Held). smooth turns the estimates into demands.
func (c *Controller) ingest(obs *mech.ControllerObs, T float64) {
	for i := range obs.Flows {
		o := &obs.Flows[i]
		var f *flow
		// Drivers usually list flows in the same order every interval:
		// try the flow at this position last time before the map.
		if i < len(c.byPos) && c.byPos[i] != nil && !c.byPos[i].dead && c.byPos[i].id == o.Flow {
			f = c.byPos[i]
		} else {
			f = c.flows[o.Flow]
		}
		if f == nil {
			f = c.newFlow(o)
			c.flows[o.Flow] = f
			c.dirty = true
		} else if !slices.Equal(f.path, o.Path) {
			c.setPath(f, o.Path)
		}
		if i < len(c.byPos) {
			c.byPos[i] = f
		} else {
			c.byPos = append(c.byPos, f)
		}
		f.obs = o
		f.seen = c.step
		def := c.lastDef
		if r, ok := c.lastBySrc[o.Flow.Src]; ok && o.Allocation == nil {
			def = r // the source VM's default rate was in force
		}
		bound := Bound(o, def, c.p.Tolerance)
		f.raw = EstimateDemand(o, T, bound, f.raw)
		f.held = Held(o, f.raw, bound)
	}
}

// smooth turns this interval's estimates into the flows' demands, once the
// queueing delays at appliances are known (estimate), and finds the demand
// they hide:
//
//   - no flow can use more than a resource's capacity: this bounds the
//     closed-loop terms when o is tiny (zero-latency appliances, or an
//     open-loop flow's backlog read as queued requests), so one outlier
//     does not linger in the average. The whole vector is scaled down, not
//     each element cut: its shape is the flow's request mix (tokens per
//     request on each resource), which the allocation must keep;
//   - d ← ewma·estimate + (1−ewma)·d (the first estimate is taken as is);
//   - a flow whose requests wait in a FIFO queue at an allocated appliance
//     on its way hides demand, as a closed loop does at its enforcer
//     (§4.2): its window would run faster without the queue, at u·f.qf
//     (QueueFactor: its queued and outstanding tokens over its round trip
//     less the appliances' queueing delays; see hiddenDemand). f.hidden is
//     that over d, for the local step: a closed-loop tenant starved by a
//     queue that others' allocations build is seen to demand up to its
//     guarantee and gets it locally; the others' spare shrinks and the
//     queue drains. Whether the flow is closed- or open-loop cannot be told
//     (an open-loop backlog waiting in the queue reads the same), so the
//     hidden demand raises only the local demand, within the guarantees:
//     the spare follows the estimate d.
func (c *Controller) smooth() {
	w := c.p.EWMA
	for _, f := range c.order {
		o := f.obs
		if o == nil {
			continue
		}
		scale := 1.0
		for e, pe := range f.path {
			if pe.Resource >= 0 && pe.Resource < len(c.dcap) && f.raw[e] > c.dcap[pe.Resource] {
				scale = min(scale, c.dcap[pe.Resource]/f.raw[e])
			}
		}
		if scale < 1 {
			for e := range f.raw {
				f.raw[e] *= scale
			}
		}
		if f.fresh {
			copy(f.demand, f.raw)
			f.fresh = false
		} else {
			for e, d := range f.raw {
				f.demand[e] = w*d + (1-w)*f.demand[e]
			}
		}
		f.hidden = 1
		if f.qf > 1 {
			for _, e := range f.appEl {
				if u := at(o.Used, e); u > 0 && f.demand[e] > 0 {
					f.hidden = max(1, f.qf*u/f.demand[e])
					break
				}
			}
		}
	}
}

func (c *Controller) newFlow(o *mech.FlowObs) *flow {
	f := &flow{id: o.Flow, key: o.Flow.Src + "->" + o.Flow.Dst, w: 1}
	f.t = c.byName[o.Tenant]
	if f.t == nil {
		if vm, ok := c.vms[o.Flow.Src]; ok {
			f.t = vm.t
		} else {
			f.t = c.tenants[len(c.tenants)-1]
		}
	}
	if w, ok := f.t.weights[f.key]; ok {
		f.w = w
	}
	c.setPath(f, o.Path)
	return f
}

// setPath (re)computes a flow's mapping of path elements to the tenant's
// virtual resources, and resets its demand.
//
// Forward links map to the source VM's out-link and, for a flow to a VM of
// the same tenant, to the destination VM's in-link; Reverse links to the
// source VM's in-link; an Appliance to the tenant's virtual appliance. An
// element without such a guarantee (unknown VM, VM of another tenant,
// appliance not in the VDC) maps to the tenant's zero-capacity resource, so
// the flow gets nothing locally (only spare capacity).
func (c *Controller) setPath(f *flow, path []mech.PathElem) {
	n := len(path)
	f.path = slices.Clone(path)
	f.in = make([]bool, n)
	f.emap = make([][2]int16, n)
	f.vres = f.vres[:0]
	f.demand = make([]float64, n)
	f.fresh = true
	slot := func(v int32) int16 {
		for k, x := range f.vres {
			if x == v {
				return int16(k)
			}
		}
		f.vres = append(f.vres, v)
		return int16(len(f.vres) - 1)
	}
	var srcOut, srcIn, dstIn int32 = 0, 0, -1
	if vm, ok := c.vms[f.id.Src]; ok && vm.t == f.t {
		srcOut, srcIn = vm.out, vm.in
	}
	if vm, ok := c.vms[f.id.Dst]; ok && vm.t == f.t {
		dstIn = vm.in
	}
	for e, pe := range path {
		f.emap[e] = [2]int16{-1, -1}
		if pe.Resource < 0 || pe.Resource >= len(c.res) {
			continue
		}
		kind := c.res[pe.Resource].Kind
		if kind == mech.LinkResource && !c.allocL || kind == mech.ApplianceResource && (!c.allocA || c.apps[pe.Resource] == nil) {
			continue
		}
		f.in[e] = true
		switch pe.Role {
		case mech.Forward:
			f.emap[e][0] = slot(srcOut)
			if dstIn >= 0 {
				f.emap[e][1] = slot(dstIn)
			}
		case mech.Reverse:
			f.emap[e][0] = slot(srcIn)
		default:
			v, ok := f.t.app[pe.Resource]
			if !ok {
				v = 0
			}
			f.emap[e][0] = slot(v)
		}
	}
	f.vdem = make([]float64, len(f.vres))
	f.aslot = nil
	f.base = 0
	f.appEl = f.appEl[:0]
	for e, pe := range path {
		if pe.Resource >= 0 && pe.Resource < len(c.apps) && c.apps[pe.Resource] != nil {
			f.appEl = append(f.appEl, e)
		}
	}
}

// forget drops flows not observed for ForgetIntervals steps (returning
// allocations that reset their enforcers to the default rate) and decays
// the demand of the others that were not observed this step.
func (c *Controller) forget() []mech.FlowAllocation {
	var resets []mech.FlowAllocation
	for _, f := range c.order {
		if f.seen == c.step {
			continue
		}
		f.held, f.hidden, f.qf = false, 1, 1
		if c.step-f.seen >= c.p.ForgetIntervals {
			delete(c.flows, f.id)
			f.dead = true
			c.dirty = true
			rates := make([]float64, len(f.path))
			for e := range rates {
				rates[e] = math.Inf(1)
				if f.in[e] && c.p.DefaultRate > 0 {
					rates[e] = c.p.DefaultRate
				}
			}
			resets = append(resets, mech.FlowAllocation{Flow: f.id, Rates: rates})
			continue
		}
		for e := range f.demand {
			f.demand[e] *= 1 - c.p.EWMA
		}
	}
	return resets
}

// reorder sorts the flows by tenant, then source and destination.
func (c *Controller) reorder() {
	c.order = c.order[:0]
	for _, f := range c.flows {
		c.order = append(c.order, f)
	}
	slices.SortFunc(c.order, func(a, b *flow) int {
		return cmp.Or(cmp.Compare(a.t.idx, b.t.idx), cmp.Compare(a.id.Src, b.id.Src), cmp.Compare(a.id.Dst, b.id.Dst))
	})
	for _, t := range c.tenants {
		t.lo, t.hi = 0, 0
	}
	for i := 0; i < len(c.order); {
		t := c.order[i].t
		j := i
		for j < len(c.order) && c.order[j].t == t {
			j++
		}
		t.lo, t.hi = i, j
		i = j
	}
	c.dirty = false
}
