package pulsar

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"slices"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// estimate runs the capacity estimators on this interval's observations and
// returns the estimates by appliance ID.
func (c *Controller) estimate(T float64) map[string]float64 {
	if !c.allocA {
		return nil
	}
	for _, a := range c.apps {
		if a == nil {
			continue
		}
		a.obs = ApplianceObs{Period: T, Granted: a.granted}
		for i := range a.tenants {
			t := &a.tenants[i]
			t.Used, t.Outstanding, t.Forward, t.Reverse, t.Demand = 0, 0, 0, 0, 0
		}
	}
	for _, f := range c.order {
		o := f.obs
		if o == nil {
			continue
		}
		var fwd, rev float64
		hasApp := false
		for e, pe := range f.path {
			if pe.Resource < 0 || pe.Resource >= len(c.res) {
				continue
			}
			switch {
			case c.apps[pe.Resource] != nil:
				hasApp = true
			case pe.Role == mech.Forward:
				fwd = max(fwd, at(o.Used, e))
			case pe.Role == mech.Reverse:
				rev = max(rev, at(o.Used, e))
			}
		}
		if !hasApp {
			continue
		}
		for e, pe := range f.path {
			if pe.Resource < 0 || pe.Resource >= len(c.res) {
				continue
			}
			a := c.apps[pe.Resource]
			if a == nil {
				continue
			}
			u, out := at(o.Used, e), at(o.Outstanding, e)
			a.obs.Throughput += u
			a.obs.Outstanding += out
			s := &a.tenants[c.appSlot(f, e)]
			s.Used += u
			s.Outstanding += out
			s.Forward += fwd
			s.Reverse += rev
		}
	}
	c.delays()
	c.hiddenDemand()
	est := make(map[string]float64)
	for r, a := range c.apps {
		if a == nil {
			continue
		}
		a.obs.Tenants = a.tenants
		prev := a.est.Estimate()
		c.capacity[r] = a.est.Observe(&a.obs)
		est[c.res[r].ID] = c.capacity[r]
		if c.log.Enabled(context.Background(), slog.LevelDebug) {
			lo, hi := a.est.Window()
			thr, viol := a.est.Signals()
			c.log.Debug("capacity estimate", "appliance", c.res[r].ID, "phase", a.est.Phase(),
				"previous", prev, "estimate", c.capacity[r], "window_min", lo, "window_max", hi,
				"throughput", a.obs.Throughput, "granted", a.obs.Granted, "delay", a.obs.Delay, "latency", a.obs.Latency,
				"queued", a.est.Queued(), "throughput_signal", thr, "violation", viol)
		}
	}
	return est
}

// hiddenDemand sets every observed flow's f.qf, the factor by which the
// queues at the allocated appliances on its way hide its demand
// (QueueFactor with their delays; 1 without), and adds each flow's
// demand so revealed, used·qf, to its tenant's TenantObs.Demand at those
// appliances.
func (c *Controller) hiddenDemand() {
	for _, f := range c.order {
		f.qf = 1
		o := f.obs
		if o == nil {
			continue
		}
		if delay := c.queueDelay(f); delay > minDelay {
			for _, e := range f.appEl {
				if u := at(o.Used, e); u > 0 {
					f.qf = QueueFactor(u, at(o.Queued, e), at(o.Outstanding, e), delay)
					break
				}
			}
		}
		for _, e := range f.appEl {
			a := c.apps[f.path[e].Resource]
			a.tenants[c.appSlot(f, e)].Demand += f.qf * at(o.Used, e)
		}
	}
}

// queueDelay is the queueing delay f's requests met at the allocated
// appliances on their way this interval (seconds; set by delays).
func (c *Controller) queueDelay(f *flow) float64 {
	d := 0.0
	for _, e := range f.appEl {
		d += c.apps[f.path[e].Resource].delay
	}
	return d
}

// baseDrift is how fast a flow's latency baseline rises per interval while
// its requests take longer than it and no appliance queue explains why
// (its own workload changed, or the network delays it).
const baseDrift = 0.01

// delays attributes queueing delay to appliances from the round trips of
// the flows through them, and sets every appliance's ApplianceObs.Delay
// and Latency.
//
// A flow's round trip is its outstanding tokens over its throughput at an
// appliance on its path (Little; both count the same requests, so any
// appliance element gives the same ratio); its baseline is the shortest
// seen, its excess the round trip beyond it: time queued at appliances and
// in the network. An appliance serves FIFO, so every flow through it waits
// its queueing delay; the delay of appliance a is the smallest excess of
// its flows once the delays of the other appliances on each flow's path
// are taken off: a flow through a queue-free appliance clears it of the
// queueing its other flows see elsewhere, e.g. at a second appliance on
// their way. Where flows cross several appliances the split is ambiguous;
// the delays are set one appliance at a time (two Gauss-Seidel passes),
// appliances with more flows first, so an excess goes to the appliance
// that most flows witness (the most parsimonious explanation). The
// latency of an appliance is the throughput-weighted baseline of its
// flows.
//
// A new flow's baseline is its first round trip less the delays of the
// appliances on its path; a baseline follows the round trip down at once
// and up by baseDrift per interval, the latter only while the appliances'
// delays explain less than half of the flow's excess.
func (c *Controller) delays() {
	for _, f := range c.order {
		f.lat = -1
		if o := f.obs; o != nil {
			for _, e := range f.appEl {
				if u := at(o.Used, e); u > 0 {
					f.lat = at(o.Outstanding, e) / u
					break
				}
			}
		}
	}
	explained := func(f *flow) float64 {
		s := 0.0
		for _, e := range f.appEl {
			s += c.apps[f.path[e].Resource].delay
		}
		return s
	}
	// Gauss-Seidel, appliances with more flows first (more witnesses).
	c.aorder = c.aorder[:0]
	for r, a := range c.apps {
		if a != nil {
			a.delay = 0
			a.flows = a.flows[:0]
			c.aorder = append(c.aorder, r)
		}
	}
	for _, f := range c.order {
		if f.lat < 0 || f.base <= 0 {
			continue
		}
		for _, e := range f.appEl {
			a := c.apps[f.path[e].Resource]
			a.flows = append(a.flows, f)
		}
	}
	slices.SortStableFunc(c.aorder, func(x, y int) int { return cmp.Compare(len(c.apps[y].flows), len(c.apps[x].flows)) })
	for range 2 {
		for _, r := range c.aorder {
			a := c.apps[r]
			d := math.Inf(1)
			for _, f := range a.flows {
				ex := max(0, f.lat-f.base)
				if len(f.appEl) > 1 {
					ex -= explained(f) - a.delay
				}
				d = min(d, ex)
			}
			a.delay = 0
			if !math.IsInf(d, 1) {
				a.delay = max(0, d)
			}
		}
	}
	for _, a := range c.apps {
		if a != nil {
			a.lsum, a.usum = 0, 0
		}
	}
	for _, f := range c.order {
		if f.lat < 0 {
			continue
		}
		x := explained(f)
		switch {
		case f.base <= 0:
			f.base = f.lat - x
			if f.base <= 0 {
				f.base = f.lat
			}
		case f.lat <= f.base:
			f.base = f.lat
		case x < (f.lat-f.base)/2:
			f.base = min(f.lat, f.base*(1+baseDrift))
		}
		if f.base <= 0 {
			continue
		}
		for _, e := range f.appEl {
			a := c.apps[f.path[e].Resource]
			u := at(f.obs.Used, e)
			a.lsum += u * f.base
			a.usum += u
		}
	}
	for _, a := range c.apps {
		if a == nil {
			continue
		}
		a.obs.Delay, a.obs.Latency = a.delay, 0
		if a.usum > 0 {
			a.obs.Latency = a.lsum / a.usum
		}
	}
}

// window returns an appliance's initial probing window: [CapacityMin,
// CapacityMax]; if CapacityMin is 0, half the advertised Capacity, or else
// the sum of the tenants' guarantees on it (admission control has made them
// fit); if CapacityMax is 0, twice the advertised Capacity, or else four
// times the minimum. ok is false when nothing is known (the appliance is
// then not allocated).
func window(r mech.ResourceInfo, guarantees float64) (lo, hi float64, ok bool) {
	lo, hi = r.CapacityMin, r.CapacityMax
	if lo == 0 {
		if r.Capacity > 0 {
			lo = r.Capacity / 2
		} else {
			lo = guarantees
		}
	}
	if hi == 0 {
		if r.Capacity > 0 {
			hi = 2 * r.Capacity
		} else {
			hi = 4 * lo
		}
	}
	hi = max(hi, lo)
	return lo, hi, hi > 0
}

func (a *appState) slot(t *tenant) *TenantObs {
	i, ok := a.tpos[t]
	if !ok {
		i = len(a.tenants)
		a.tpos[t] = i
		a.tenants = append(a.tenants, TenantObs{Tenant: t.name})
	}
	return &a.tenants[i]
}

// appSlot returns the position of f's tenant in the appState of the
// appliance at f's path element e (which must have one), caching it.
func (c *Controller) appSlot(f *flow, e int) int32 {
	if f.aslot == nil {
		f.aslot = make([]int32, len(f.path))
		for k, pe := range f.path {
			f.aslot[k] = -1
			if pe.Resource >= 0 && pe.Resource < len(c.apps) && c.apps[pe.Resource] != nil {
				a := c.apps[pe.Resource]
				a.slot(f.t)
				f.aslot[k] = int32(a.tpos[f.t])
			}
		}
	}
	return f.aslot[e]
}
