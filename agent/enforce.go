package agent

import (
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
)

// enforcer applies the mechanism's settings on the data path for the
// driver core (drive.Enforcer): pair limits on the source VM's pair
// limiter, VM limits and schedulers on the server's schedulers, rates
// times Scale, VMs by their addresses in the model. It is a
// drive.Verifier and a drive.SchedulerVerifier, from the counters of the
// latest reading, judged against what was asked for (as the data path
// holds it: datapath.Held, within its rounding): a limit is held while
// its queue reads its rate (a pair's class) or ceiling (a VM's class); a
// scheduler while it is installed and the class of each VM it weighs
// reads the scheduler's rate, or the VM's lower limit, as its ceiling. A
// setting deleted or changed behind the agent's back is re-applied at
// the next step; one still not held after unheldAfter consecutive
// re-applies is reported once (a warning, bulkhead_agent_unheld_total).
// It runs under the agent's step lock.
type enforcer struct {
	a *Agent
	// limits in force (the model's units): what the data path took
	limits   map[mech.PairID]float64
	vmLimits [2]map[string]float64
	// sched is the rate on the wire of the scheduler in force in each
	// direction (+Inf: none)
	sched [2]float64
	// read is what was in force at the latest reading, which the
	// verdicts judge (a setting written since does not show in it)
	read struct {
		sched    [2]float64
		vmLimits [2]map[string]float64
	}
	// unheld are the settings the latest verdicts found not held, by
	// enforcement point
	unheld map[point]*streak
}

// unheldAfter is how many consecutive re-applies of a setting the data
// path does not hold go by before it is reported.
const unheldAfter = 5

// point is where a setting is enforced: a limit's (pointOf), or a
// direction's scheduler.
type point struct {
	limit mech.Limit
	sched bool
	dir   mech.Direction
}

// streak is a setting found not held by consecutive verdicts.
type streak struct {
	what     string // the setting (another one at the point starts anew)
	n        int
	reported bool
}

// pointOf is a limit's enforcement point: the limit without its rate
// and the field its kind does not use.
func pointOf(l mech.Limit) point {
	if l.Kind == mech.PairLimit {
		return point{limit: mech.Limit{Kind: l.Kind, Pair: l.Pair}}
	}
	return point{limit: mech.Limit{Kind: l.Kind, VM: l.VM}}
}

var (
	_ drive.BatchEnforcer     = (*enforcer)(nil)
	_ drive.Enforcer          = (*enforcer)(nil)
	_ drive.Verifier          = (*enforcer)(nil)
	_ drive.SchedulerVerifier = (*enforcer)(nil)
	_ drive.HintedVerifier    = (*enforcer)(nil)
)

func newEnforcer(a *Agent) *enforcer {
	e := &enforcer{a: a, limits: map[mech.PairID]float64{}, vmLimits: [2]map[string]float64{{}, {}},
		sched: [2]float64{mech.Unlimited, mech.Unlimited}, unheld: map[point]*streak{}}
	e.observed()
	return e
}

// setLimit records pair id's limit in force (the model's units); at is
// the index of the pair's record if known (-1: none or unknown).
func (e *enforcer) setLimit(id mech.PairID, at int32, r float64) {
	e.limits[id] = r
	e.a.setLimit(id, at, r, true)
}

// dropLimit forgets pair id's limit.
func (e *enforcer) dropLimit(id mech.PairID) {
	delete(e.limits, id)
	e.a.setLimit(id, -1, 0, false)
}

// limiterOf returns the limiter and addresses of a pair limit's pair
// (by the index of its record when the pair has one: at, else -1), or
// why there are none.
func (e *enforcer) limiterOf(id mech.PairID) (v *vmPath, p datapath.Pair, at int32, err error) {
	a := e.a
	if i, ok := a.pairByID[id]; ok && a.pairs[i].src != nil && a.pairs[i].src.TX != nil {
		return a.pairs[i].src, a.pairs[i].pair, i, nil
	}
	v = a.vms[id.Src]
	if v == nil || v.TX == nil {
		return nil, p, -1, fmt.Errorf("pair %s->%s: no limiter for its source here", id.Src, id.Dst)
	}
	p, ok := a.pairAddr(id)
	if !ok {
		return nil, p, -1, fmt.Errorf("pair %s->%s: a VM without an address", id.Src, id.Dst)
	}
	return v, p, -1, nil
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

// vmKind is the kind of the VM limits of a direction.
func vmKind(d mech.Direction) mech.LimitKind {
	if d == mech.Ingress {
		return mech.VMIngress
	}
	return mech.VMEgress
}

// SetLimit implements drive.Enforcer.
func (e *enforcer) SetLimit(l mech.Limit) error {
	a := e.a
	t0 := time.Now()
	switch l.Kind {
	case mech.PairLimit:
		v, p, at, err := e.limiterOf(l.Pair)
		if err != nil {
			return err
		}
		if err := v.TX.SetPairRate(p, e.wire(l.Rate)); err != nil {
			a.met.errors.WithLabelValues("limit").Inc()
			return err
		}
		e.setLimit(l.Pair, at, l.Rate)
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
	if math.IsInf(l.Rate, 1) {
		delete(e.unheld, pointOf(l))
	}
	took := time.Since(t0)
	a.met.limitUpdates.Inc()
	a.met.nUpdates.Add(1)
	a.met.updateNano.Add(int64(took))
	a.met.limitSeconds.Observe(took.Seconds())
	return nil
}

// SetLimits implements drive.BatchEnforcer: the pair limits go to the
// data path together (datapath.SetPairRates: one round trip per
// namespace on a datapath.RateBatcher), and each is accounted for as
// SetLimit does; a limit of another kind is written alone. Each update's
// latency is its share of the batch's time.
func (e *enforcer) SetLimits(ls []mech.Limit) []error {
	a := e.a
	errs := make([]error, len(ls))
	t0 := time.Now()
	ops := make([]datapath.PairRate, 0, len(ls))
	at := make([]int, 0, len(ls))
	rec := make([]int32, 0, len(ls)) // the pairs' records' indices
	for i, l := range ls {
		if l.Kind != mech.PairLimit {
			errs[i] = e.SetLimit(l)
			continue
		}
		v, p, r, err := e.limiterOf(l.Pair)
		if err != nil {
			errs[i] = err
			continue
		}
		ops = append(ops, datapath.PairRate{TX: v.TX, Pair: p, Bps: e.wire(l.Rate)})
		at, rec = append(at, i), append(rec, r)
	}
	if len(ops) == 0 {
		return errs
	}
	werrs := datapath.SetPairRates(a.cfg.Path, ops)
	each := time.Since(t0) / time.Duration(len(ops))
	for j, i := range at {
		l := ls[i]
		if j >= len(werrs) || werrs[j] != nil {
			a.met.errors.WithLabelValues("limit").Inc()
			if j < len(werrs) {
				errs[i] = werrs[j]
			} else {
				errs[i] = fmt.Errorf("pair %s->%s: no answer from the data path", l.Pair.Src, l.Pair.Dst)
			}
			continue
		}
		e.setLimit(l.Pair, rec[j], l.Rate)
		if math.IsInf(l.Rate, 1) {
			delete(e.unheld, pointOf(l))
		}
		a.met.limitUpdates.Inc()
		a.met.nUpdates.Add(1)
		a.met.updateNano.Add(int64(each))
		a.met.limitSeconds.Observe(each.Seconds())
	}
	return errs
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
	e.sched[s.Dir] = rate
	if math.IsInf(rate, 1) && len(s.Weights) == 0 {
		delete(e.unheld, point{sched: true, dir: s.Dir})
	}
	e.a.log.Info("scheduler set", "dir", dirName(s.Dir), "rate", rate, "weights", s.Weights)
	return nil
}

// HoldsLimit implements drive.Verifier: the latest reading shows the
// limit's queue at its rate — for a VM, at the lower of its rate and the
// scheduler's then in force.
func (e *enforcer) HoldsLimit(l mech.Limit) bool {
	c, ok := e.reading(l)
	want := e.wire(l.Rate)
	if l.Kind != mech.PairLimit {
		want = min(want, e.read.sched[dirOf(l.Kind)])
	}
	return e.verdict(pointOf(l), ok && datapath.Shows(c, want), func() string { return settingName(l) })
}

// HoldsLimitHint implements drive.HintedVerifier: HoldsLimit, with a
// pair limit's pair found by the index of its record (obsState.pairs)
// when the hint still names it.
func (e *enforcer) HoldsLimitHint(l mech.Limit, hint *int32) bool {
	a := e.a
	if l.Kind != mech.PairLimit {
		return e.HoldsLimit(l)
	}
	i := *hint
	if i < 0 || int(i) >= len(a.pairs) || !a.pairs[i].named || a.pairs[i].id != l.Pair {
		var ok bool
		if i, ok = a.pairByID[l.Pair]; !ok {
			*hint = -1
			return e.HoldsLimit(l)
		}
		*hint = i
	}
	info := &a.pairs[i]
	held := a.reads > 0 && info.txRead == a.reads && datapath.Shows(info.tx.Rate, e.wire(l.Rate))
	return e.verdict(pointOf(l), held, func() string { return settingName(l) })
}

// HoldsScheduler implements drive.SchedulerVerifier: the latest reading
// shows the scheduler installed and the class of each VM it weighs with
// the scheduler's rate as its ceiling (or the VM's lower limit then in
// force). A removal is held once written (the driver core forgets it).
func (e *enforcer) HoldsScheduler(s mech.Scheduler) bool {
	if math.IsInf(s.Rate, 1) && len(s.Weights) == 0 {
		return true
	}
	cs := e.a.prevSch[s.Dir]
	held := cs != nil
	for vm := range s.Weights {
		want := e.wire(s.Rate)
		if l, ok := e.read.vmLimits[s.Dir][vm]; ok {
			want = min(want, e.wire(l))
		}
		if c, ok := cs[vm]; !ok || !datapath.Shows(c.Ceil, want) {
			held = false
			break
		}
	}
	return e.verdict(point{sched: true, dir: s.Dir}, held, func() string {
		return fmt.Sprintf("%s scheduler at %g bit/s, weights %v", dirName(s.Dir), s.Rate, s.Weights)
	})
}

// verdict returns held, and counts consecutive verdicts that a setting
// (named by name) is not held at point p: each is followed by a
// re-apply, and one still not held after unheldAfter re-applies is
// reported, once.
func (e *enforcer) verdict(p point, held bool, name func() string) bool {
	if held {
		if len(e.unheld) > 0 {
			delete(e.unheld, p)
		}
		return true
	}
	what := name()
	s := e.unheld[p]
	if s == nil || s.what != what {
		s = &streak{what: what}
		e.unheld[p] = s
	}
	s.n++
	if s.n > unheldAfter && !s.reported {
		s.reported = true
		e.a.met.unheld.Inc()
		e.a.log.Warn("setting not held by the data path, re-applied at every step", "setting", what, "reapplies", s.n-1)
	}
	return false
}

// settingName names a limit for the log (rates in the model's units).
func settingName(l mech.Limit) string {
	switch l.Kind {
	case mech.PairLimit:
		return fmt.Sprintf("limit of pair %s->%s at %g bit/s", l.Pair.Src, l.Pair.Dst, l.Rate)
	default:
		return fmt.Sprintf("%s limit of VM %s at %g bit/s", dirName(dirOf(l.Kind)), l.VM, l.Rate)
	}
}

// reading returns what the latest reading showed of a limit's queue: a
// pair class's rate, a VM class's ceiling.
func (e *enforcer) reading(l mech.Limit) (float64, bool) {
	a := e.a
	if l.Kind == mech.PairLimit {
		if i, ok := a.pairByID[l.Pair]; ok {
			info := &a.pairs[i]
			return info.tx.Rate, a.reads > 0 && info.txRead == a.reads
		}
		// not indexed since the model changed: its latest reading, if
		// it was in it
		p, ok := a.pairAddr(l.Pair)
		if !ok {
			return 0, false
		}
		c, ok := a.carryTX[p]
		return c.Rate, ok
	}
	c, ok := a.prevSch[dirOf(l.Kind)][l.VM]
	return c.Ceil, ok
}

// observed records, after a reading, what was in force when it was
// taken.
func (e *enforcer) observed() {
	e.read.sched = e.sched
	for d, m := range e.vmLimits {
		if e.read.vmLimits[d] == nil {
			e.read.vmLimits[d] = map[string]float64{}
		}
		clear(e.read.vmLimits[d])
		maps.Copy(e.read.vmLimits[d], m)
	}
}

// forget drops the state of limits whose VMs are no longer known, or
// whose source is no longer on this host.
func (e *enforcer) forget(known, local func(vm string) bool) {
	for id := range e.limits {
		if !local(id.Src) || !known(id.Dst) {
			e.dropLimit(id)
		}
	}
	for _, m := range e.vmLimits {
		for vm := range m {
			if !local(vm) {
				delete(m, vm)
			}
		}
	}
	for p := range e.unheld {
		l := p.limit
		if !p.sched && ((l.Kind == mech.PairLimit && (!local(l.Pair.Src) || !known(l.Pair.Dst))) || (l.Kind != mech.PairLimit && !local(l.VM))) {
			delete(e.unheld, p)
		}
	}
}

// restore removes the agent's limits and schedulers from the data path
// (best effort): VM limits first, which a removed scheduler would keep.
func (e *enforcer) restore() {
	a := e.a
	for id := range e.limits {
		if err := e.SetLimit(mech.Limit{Kind: mech.PairLimit, Pair: id, Rate: mech.Unlimited}); err != nil {
			a.log.Warn("restore", "err", err)
		}
	}
	for d, m := range e.vmLimits {
		for vm, r := range m {
			if math.IsInf(r, 1) {
				continue
			}
			if err := e.SetLimit(mech.Limit{Kind: vmKind(mech.Direction(d)), VM: vm, Rate: mech.Unlimited}); err != nil {
				a.log.Warn("restore", "err", err)
			}
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
