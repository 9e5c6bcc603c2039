package agent

import (
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
)

// enforcer applies the mechanism's settings on the data path for the
// driver core (drive.Enforcer): pair limits on the source VM's pair
// limiter, VM limits and schedulers on the server's schedulers, rates
// times Scale, VMs by their addresses in the model. It is a
// drive.Verifier: a limit is held while the queue it set is in the
// latest reading of the counters, with the rate that reading first
// showed after the limit was set — a queue deleted or changed behind the
// agent's back is re-applied at the next step. It runs under the agent's
// step lock.
type enforcer struct {
	a *Agent
	// limits in force (the model's units): what the data path took
	limits   map[mech.PairID]float64
	vmLimits [2]map[string]float64
	// seen is the rate (pairs) or ceiling (VMs) the first reading after a
	// write showed, by enforcement point (pointOf)
	seen map[mech.Limit]float64
}

// pointOf is a limit's enforcement point: the limit without its rate
// and the field its kind does not use.
func pointOf(l mech.Limit) mech.Limit {
	if l.Kind == mech.PairLimit {
		return mech.Limit{Kind: l.Kind, Pair: l.Pair}
	}
	return mech.Limit{Kind: l.Kind, VM: l.VM}
}

var (
	_ drive.Enforcer = (*enforcer)(nil)
	_ drive.Verifier = (*enforcer)(nil)
)

func newEnforcer(a *Agent) *enforcer {
	return &enforcer{a: a, limits: map[mech.PairID]float64{}, vmLimits: [2]map[string]float64{{}, {}}, seen: map[mech.Limit]float64{}}
}

// wire converts a rate in the model's units to bits/s on the data path.
func (e *enforcer) wire(r float64) float64 {
	if math.IsInf(r, 1) {
		return r
	}
	return r * e.a.cfg.Scale
}

func dirOf(k mech.LimitKind) mech.Direction {
	if k == mech.VMIngress {
		return mech.Ingress
	}
	return mech.Egress
}

// SetLimit implements drive.Enforcer.
func (e *enforcer) SetLimit(l mech.Limit) error {
	a := e.a
	t0 := time.Now()
	switch l.Kind {
	case mech.PairLimit:
		v := a.vms[l.Pair.Src]
		if v == nil || v.TX == nil {
			return fmt.Errorf("pair %s->%s: no limiter for its source here", l.Pair.Src, l.Pair.Dst)
		}
		p, ok := a.pairAddr(l.Pair)
		if !ok {
			return fmt.Errorf("pair %s->%s: a VM without an address", l.Pair.Src, l.Pair.Dst)
		}
		if err := v.TX.SetPairRate(p, e.wire(l.Rate)); err != nil {
			a.met.errors.WithLabelValues("limit").Inc()
			return err
		}
		e.limits[l.Pair] = l.Rate
	case mech.VMEgress, mech.VMIngress:
		dir := dirOf(l.Kind)
		sch := a.cfg.Path.Scheduler(dir)
		if sch == nil {
			return fmt.Errorf("VM %s: no device for %s limits", l.VM, dirName(dir))
		}
		if err := sch.SetLimit(l.VM, e.wire(l.Rate)); err != nil {
			a.met.errors.WithLabelValues("limit").Inc()
			return err
		}
		e.vmLimits[dir][l.VM] = l.Rate
	default:
		return fmt.Errorf("limit of unknown kind %d", l.Kind)
	}
	delete(e.seen, pointOf(l))
	took := time.Since(t0)
	a.met.limitUpdates.Inc()
	a.met.nUpdates.Add(1)
	a.met.updateNano.Add(int64(took))
	a.met.limitSeconds.Observe(took.Seconds())
	return nil
}

// SetScheduler implements drive.Enforcer.
func (e *enforcer) SetScheduler(s mech.Scheduler) error {
	sch := e.a.cfg.Path.Scheduler(s.Dir)
	if sch == nil {
		return fmt.Errorf("no device for a %s scheduler", dirName(s.Dir))
	}
	rate := e.wire(s.Rate)
	if err := sch.Set(rate, maps.Clone(s.Weights)); err != nil {
		e.a.met.errors.WithLabelValues("scheduler").Inc()
		return err
	}
	// The VMs' classes were rebuilt under the new rate: what a reading
	// shows of their limits is recorded anew.
	for p := range e.seen {
		if p.Kind != mech.PairLimit && dirOf(p.Kind) == s.Dir {
			delete(e.seen, p)
		}
	}
	e.a.log.Info("scheduler set", "dir", dirName(s.Dir), "rate", rate, "weights", s.Weights)
	return nil
}

// HoldsLimit implements drive.Verifier from the counters of the latest
// observation.
func (e *enforcer) HoldsLimit(l mech.Limit) bool {
	c, ok := e.reading(l)
	if !ok || !(c > 0) {
		return false
	}
	s, seen := e.seen[pointOf(l)]
	return !seen || s == c
}

// reading returns what the latest reading showed of a limit's queue: a
// pair class's rate, a VM class's ceiling.
func (e *enforcer) reading(l mech.Limit) (float64, bool) {
	a := e.a
	if l.Kind == mech.PairLimit {
		p, ok := a.pairAddr(l.Pair)
		if !ok {
			return 0, false
		}
		c, ok := a.prevTX[p]
		return c.Rate, ok
	}
	c, ok := a.prevSch[dirOf(l.Kind)][l.VM]
	return c.Ceil, ok
}

// observed records, after a reading, what it shows of the queues of the
// limits in force that have no record since they were set.
func (e *enforcer) observed() {
	for id := range e.limits {
		l := mech.Limit{Kind: mech.PairLimit, Pair: id}
		if _, ok := e.seen[pointOf(l)]; !ok {
			if r, ok := e.reading(l); ok && r > 0 {
				e.seen[pointOf(l)] = r
			}
		}
	}
	for d, m := range e.vmLimits {
		kind := mech.VMEgress
		if mech.Direction(d) == mech.Ingress {
			kind = mech.VMIngress
		}
		for vm := range m {
			l := mech.Limit{Kind: kind, VM: vm}
			if _, ok := e.seen[pointOf(l)]; !ok {
				if r, ok := e.reading(l); ok && r > 0 {
					e.seen[pointOf(l)] = r
				}
			}
		}
	}
}

// forget drops the state of limits whose VMs are no longer known, or
// whose source is no longer on this host.
func (e *enforcer) forget(known, local func(vm string) bool) {
	for id := range e.limits {
		if !local(id.Src) || !known(id.Dst) {
			delete(e.limits, id)
		}
	}
	for _, m := range e.vmLimits {
		for vm := range m {
			if !local(vm) {
				delete(m, vm)
			}
		}
	}
	for p := range e.seen {
		if (p.Kind == mech.PairLimit && (!local(p.Pair.Src) || !known(p.Pair.Dst))) || (p.Kind != mech.PairLimit && !local(p.VM)) {
			delete(e.seen, p)
		}
	}
}

// restore removes the agent's limits and schedulers from the data path
// (best effort).
func (e *enforcer) restore() {
	a := e.a
	for id := range e.limits {
		if err := e.SetLimit(mech.Limit{Kind: mech.PairLimit, Pair: id, Rate: mech.Unlimited}); err != nil {
			a.log.Warn("restore", "err", err)
		}
	}
	for _, d := range []mech.Direction{mech.Egress, mech.Ingress} {
		if s := a.cfg.Path.Scheduler(d); s != nil && s.Installed() {
			if err := s.Set(mech.Unlimited, nil); err != nil {
				a.log.Warn("restore", "err", err)
			}
		}
	}
}

// restore removes the agent's limits and schedulers when Run ends.
func (a *Agent) restore() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.enf.restore()
}
