package pulsar

import "math"

// Phase is what a CapacityEstimator did at its last observation (the four
// phases of Pulsar §4.3, Fig. 8, plus holding and restarting).
type Phase int

// Phases.
const (
	// PhaseIdle: searching, but the interval told nothing about capacity
	// (the estimate was not handed out, or the appliance's queue grew
	// without a clear signal): the estimate is held.
	PhaseIdle Phase = iota
	// PhaseIncrease: ① binary-search increase (minW ← estimate, estimate ←
	// window midpoint).
	PhaseIncrease
	// PhaseRevert: ② congestion: maxW ← estimate, estimate ← minW.
	PhaseRevert
	// PhaseWait: ③ after a revert on a VDC violation, the estimate is held
	// until all guarantees are met and the appliance's queue has drained.
	PhaseWait
	// PhaseStable: ④ the window is narrower than the stable threshold; the
	// estimate follows eq. (7).
	PhaseStable
	// PhaseRestart: the stable phase saw persistent congestion or a
	// workload change; the window is reset to its initial bounds and the
	// search resumes from the current estimate.
	PhaseRestart
)

var phaseNames = [...]string{"idle", "increase", "revert", "wait", "stable", "restart"}

func (p Phase) String() string {
	if p >= 0 && int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "phase?"
}

// EstimatorConfig configures a CapacityEstimator.
type EstimatorConfig struct {
	// Min and Max are the initial probing window in tokens/s (Min a known
	// lower bound of the appliance's capacity, Max an upper bound). The
	// estimate starts at Min. Max ≤ Min fixes the estimate at Min.
	Min, Max float64
	// Alpha, Readings, StableThreshold, RestartThreshold, Tolerance and
	// QueueDelay are as in Params.
	Alpha            float64
	Readings         int
	StableThreshold  float64
	RestartThreshold float64
	Tolerance        float64
	QueueDelay       float64
}

// ApplianceObs is what the controller saw at one appliance over one
// interval, under the estimate the CapacityEstimator returned last.
type ApplianceObs struct {
	// Period is the interval in seconds.
	Period float64
	// Throughput is the appliance's throughput, Σ of its flows' Used on
	// it, tokens/s.
	Throughput float64
	// Outstanding is O: the average tokens outstanding at the appliance,
	// Σ of its flows' Outstanding on it (§4.3, footnote 6).
	Outstanding float64
	// Granted is what the previous allocation handed out on the appliance
	// (Σ of local and global allocations, demand-capped), tokens/s. The
	// estimate was exercised ("demand exceeded it") when Granted reached
	// it.
	Granted float64
	// Tenants break the appliance's traffic down by tenant.
	Tenants []TenantObs
}

// TenantObs is one tenant's traffic at an appliance over one interval.
type TenantObs struct {
	Tenant string
	// Guarantee is the tenant's minimum guarantee on the appliance
	// (ApplianceGuarantee.Min), Granted what the previous allocation gave
	// it there, Used its throughput (tokens/s), Outstanding its average
	// tokens outstanding at the appliance.
	Guarantee, Granted, Used, Outstanding float64
	// Forward and Reverse are its requests' network bytes/s on the way to
	// the appliance and back (the request mix: bytes per appliance token).
	Forward, Reverse float64
}

// CapacityEstimator estimates one appliance's VDC-compliant capacity in
// tokens/s by probing (Pulsar §4.3): a window [minW, maxW] that should
// contain the capacity is narrowed by binary search on congestion signals,
// then the estimate follows eq. (7).
//
// Each Observe sees one interval under the estimate C returned last. With
// tol = Tolerance, T the period, X the throughput, O the outstanding tokens
// and L = O/X the queueing delay at the appliance (Little):
//
//   - exercised: the allocation handed the estimate out, Granted ≥
//     (1−tol)·C ("demand exceeds it");
//   - queued: L exceeds its baseline (the smallest L seen while
//     exercised) by more than QueueDelay·T/10 (5 ms at the defaults);
//   - growing: O rose by more than tol·QueueDelay·T·C since the previous
//     interval (a rising average of O);
//   - throughput signal: exercised, and either X < (1−tol)·C while queued,
//     or X < C while growing (the appliance did not keep up with what the
//     enforcers let through; a shortfall without a queue is demand that
//     fell, not congestion);
//   - VDC-violation signal: some tenant used less than (1−tol)·min(its
//     Guarantee, what it was Granted) while its requests waited at the
//     appliance (its Outstanding > QueueDelay·T·Used): it was starved by the
//     appliance's queue, not idle.
//
// Search (phases ① and ②): on a signal, revert: maxW ← C and the estimate ←
// minW; on the throughput signal the estimate also stays below (1−2·tol)·X
// so the queue can drain (minW may be as high as what the saturated
// appliance serves), and if X fell below (1−tol)·minW the appliance cannot
// serve minW any more: minW drops to CapacityMin if that is below
// (1−tol)·X, else to (1−tol)·X. On the VDC-violation signal the revert
// leads to ③ wait: the estimate is held until no tenant is violated and O
// is back to its level before the overload (or to QueueDelay·T·X), then ①
// resumes at once. Without a signal, if the estimate was exercised and
// served (X ≥ (1−tol)·C) with no queue, ① increase: minW ← min(C, X) (the
// appliance has shown it serves that), estimate ← (minW+maxW)/2. Anything
// else holds (PhaseIdle). If the queue neither shrinks nor triggers a
// signal for Readings intervals while the estimate is held, the estimate is
// still too high: minW and the estimate drop to (1−2·tol)·min(C, X).
// Reverts and increases react to one interval: the revert is what limits
// an overload to one control interval (§4.3 ②); Readings applies to the
// stable phase.
//
// ④ Stable once maxW − minW < StableThreshold·maxW: the estimate is set to
// minW. O_s is the lowest O of the first Readings stable intervals, capped
// at the unqueued level X·(baseline L·(1+tol) + QueueDelay·T/10), and the
// workload is recorded. Then each interval C ← C − Alpha·(O − O_s)/T
// (eq. 7; upward only while exercised, never above maxW nor below the
// restart floor). Readings consecutive intervals with a clear throughput
// shortfall (X < (1−tol)·C, queued) or a VDC violation restart the search
// with the window [floor, C at the start of the stable phase]; Readings
// consecutive intervals whose workload differs from the recorded one by
// more than RestartThreshold restart it with the initial window. The
// estimate is kept: the search resumes from it.
//
// Workload: each tenant's share of the appliance's throughput and its
// network bytes per appliance token (Forward, Reverse: the request mix,
// e.g. reads against writes, small against large). The change is the
// total-variation distance of the shares plus the share-weighted relative
// change of bytes per token (per tenant capped at 1). A pure change of
// capacity without a change of workload is seen only through eq. (7) and
// congestion.
type CapacityEstimator struct {
	cfg             EstimatorConfig
	floor, ceil     float64 // restart window (floor may drop below Min)
	minW, maxW, est float64
	phase           Phase
	state           int
	fixed           bool

	prevO    float64
	havePrev bool
	oRef     float64 // O at the last clean interval
	lat0     float64 // baseline queueing delay at the appliance, s
	stuck    int     // wait intervals without the queue draining

	osSet      bool
	os         float64
	settle     int
	cs         float64 // estimate at the start of the stable phase
	mix0       map[string]mixEntry
	congCount  int
	mixCount   int
	congestion bool // last observation's signals, for inspection
	violation  bool
}

const (
	stSearch = iota
	stWait
	stStable
)

type mixEntry struct{ share, fwd, rev float64 }

// NewCapacityEstimator returns an estimator starting at cfg.Min.
func NewCapacityEstimator(cfg EstimatorConfig) *CapacityEstimator {
	if cfg.Readings < 1 {
		cfg.Readings = 1
	}
	e := &CapacityEstimator{cfg: cfg, floor: cfg.Min, ceil: cfg.Max, minW: cfg.Min, maxW: cfg.Max, est: cfg.Min, lat0: math.Inf(1)}
	if !(cfg.Max > cfg.Min) {
		e.fixed, e.state, e.phase = true, stStable, PhaseStable
		e.maxW = cfg.Min
	}
	return e
}

// Estimate returns the current estimate in tokens/s.
func (e *CapacityEstimator) Estimate() float64 { return e.est }

// Phase returns what the last observation did.
func (e *CapacityEstimator) Phase() Phase { return e.phase }

// Window returns the probing window.
func (e *CapacityEstimator) Window() (minW, maxW float64) { return e.minW, e.maxW }

// Signals reports the last observation's congestion signals: throughput
// (the appliance did not deliver the estimate) and VDC violation.
func (e *CapacityEstimator) Signals() (throughput, violation bool) {
	return e.congestion, e.violation
}

// Observe consumes one interval's observation and returns the estimate for
// the next allocation.
func (e *CapacityEstimator) Observe(o *ApplianceObs) float64 {
	if e.fixed {
		return e.est
	}
	T := o.Period
	if !(T > 0) {
		T = 1
	}
	tol, qd := e.cfg.Tolerance, e.cfg.QueueDelay
	C := e.est
	X, O := o.Throughput, o.Outstanding

	// Queueing delay at the appliance (Little: O/X) and its baseline, the
	// smallest seen under load.
	lat := math.Inf(1)
	if X > 0 {
		lat = O / X
	}
	loaded := o.Granted >= (1-tol)*C && C > 0
	if loaded && lat < e.lat0 {
		e.lat0 = lat
	}
	queued := O > 0 && lat > e.lat0*(1+tol)+qd*T/10
	growing := e.havePrev && O-e.prevO > tol*qd*T*C
	// The queue can only grow if the appliance served less than it was
	// sent, which the enforcers keep below C.
	tp := loaded && (queued && X < (1-tol)*C || growing && X < C)
	viol := e.violated(o, T)
	e.congestion, e.violation = tp, viol

	// A queue that does not drain while the estimate is held means the
	// estimate is still above what the appliance serves.
	draining := e.havePrev && O < e.prevO*(1-tol)
	if e.state != stStable && queued && !draining && !tp {
		if e.stuck++; e.stuck >= e.cfg.Readings {
			e.lowerFloor(min(e.est, X) * (1 - 2*tol))
			e.stuck = 0
		}
	} else {
		e.stuck = 0
	}

	switch e.state {
	case stWait:
		drained := O <= max(e.oRef*(1+tol), qd*T*X)
		if tp && X < e.minW*(1-tol) {
			e.lowerFloor(X * (1 - tol))
		}
		if !viol && drained && !growing {
			e.state = stSearch
			e.search(C, X, O, loaded, false, false, false, false)
			break
		}
		e.phase = PhaseWait
	case stSearch:
		e.search(C, X, O, loaded, tp, viol, growing, queued)
	case stStable:
		// Small overloads are eq. (7)'s business: only a clear throughput
		// shortfall or a VDC violation counts as congestion here.
		e.stable(o, T, O, loaded, loaded && queued && X < (1-tol)*C || viol)
	}
	e.prevO, e.havePrev = O, true
	return e.est
}

// lowerFloor is called when the appliance cannot serve minW under this
// workload, only v: minW drops to the initial minimum if that is below v
// (the queue then drains fast), else to v; the restart floor follows and
// the estimate is set to minW.
func (e *CapacityEstimator) lowerFloor(v float64) {
	v = max(v, 0)
	if e.cfg.Min <= v {
		v = e.cfg.Min
	}
	e.minW = min(e.minW, v)
	e.floor = min(e.floor, e.minW)
	e.est = e.minW
}

// search is one step of phases ① and ②.
func (e *CapacityEstimator) search(C, X, O float64, loaded, tp, viol, growing, queued bool) {
	switch {
	case tp || viol:
		if C > e.minW {
			e.maxW = C
		}
		tol := e.cfg.Tolerance
		e.est = e.minW
		switch {
		case tp && X < e.minW*(1-tol):
			// The appliance cannot even serve minW any more.
			e.lowerFloor(X * (1 - tol))
		case tp:
			// minW may be as high as what the saturated appliance serves;
			// leave 2·tol of room for its queue to drain (the estimate
			// may dip below the window until the next increase).
			e.est = min(e.minW, X*(1-2*tol))
		}
		e.phase = PhaseRevert
		if viol {
			e.state = stWait
		}
	case loaded && !growing && !queued && X >= (1-e.cfg.Tolerance)*C:
		e.oRef = O
		e.minW = max(e.minW, min(C, X))
		e.est = (e.minW + e.maxW) / 2
		e.phase = PhaseIncrease
	default:
		e.phase = PhaseIdle
	}
	if e.state == stSearch && e.maxW-e.minW < e.cfg.StableThreshold*e.maxW {
		e.est = e.minW
		e.state = stStable
		e.osSet = false
		e.congCount, e.mixCount = 0, 0
	}
}

// stable is one step of phase ④.
func (e *CapacityEstimator) stable(o *ApplianceObs, T, O float64, loaded, congested bool) {
	e.phase = PhaseStable
	mix := workload(o)
	if !e.osSet {
		e.os, e.mix0, e.osSet, e.settle, e.cs = O, mix, true, e.cfg.Readings, e.est
	}
	if e.settle > 0 {
		// The first intervals may still drain a queue left by the search:
		// O_s is the lowest O they see, and no more than the appliance
		// holds when it is not queueing (so eq. 7 drains a standing queue).
		e.settle--
		e.os = min(e.os, O)
		if !math.IsInf(e.lat0, 1) {
			e.os = min(e.os, o.Throughput*(e.lat0*(1+e.cfg.Tolerance)+e.cfg.QueueDelay*T/10))
		}
		return
	}
	if d := e.cfg.Alpha * (O - e.os) / T; d > 0 || loaded {
		// Never above maxW, which was seen congested.
		e.est = min(max(e.est-d, e.floor), e.maxW)
	}
	if congested {
		e.congCount++
	} else {
		e.congCount = 0
	}
	if mix != nil && mixChange(e.mix0, mix) > e.cfg.RestartThreshold {
		e.mixCount++
	} else {
		e.mixCount = 0
	}
	if e.congCount >= e.cfg.Readings || e.mixCount >= e.cfg.Readings {
		e.state = stSearch
		e.minW, e.maxW = e.floor, e.ceil
		if e.mixCount < e.cfg.Readings {
			// Congestion alone: the capacity is below the stable estimate.
			e.maxW = max(e.cs, e.minW)
		}
		e.est = min(max(e.est, e.minW), e.maxW)
		e.congCount, e.mixCount = 0, 0
		e.phase = PhaseRestart
	}
}

// violated reports the VDC-violation signal.
func (e *CapacityEstimator) violated(o *ApplianceObs, T float64) bool {
	for i := range o.Tenants {
		t := &o.Tenants[i]
		need := min(t.Guarantee, t.Granted)
		if need <= 0 {
			continue
		}
		if t.Used < (1-e.cfg.Tolerance)*need && t.Outstanding > 0 && t.Outstanding > e.cfg.QueueDelay*T*t.Used {
			return true
		}
	}
	return false
}

// workload returns the appliance's request mix, nil if it carried nothing.
func workload(o *ApplianceObs) map[string]mixEntry {
	if !(o.Throughput > 0) {
		return nil
	}
	m := make(map[string]mixEntry, len(o.Tenants))
	for _, t := range o.Tenants {
		if !(t.Used > 0) {
			continue
		}
		m[t.Tenant] = mixEntry{share: t.Used / o.Throughput, fwd: t.Forward / t.Used, rev: t.Reverse / t.Used}
	}
	return m
}

// mixChange is the distance between two workloads (see CapacityEstimator).
func mixChange(a, b map[string]mixEntry) float64 {
	tv := 0.0
	for k, x := range a {
		tv += math.Abs(x.share - b[k].share)
	}
	for k, y := range b {
		if _, ok := a[k]; !ok {
			tv += y.share
		}
	}
	d := tv / 2
	for k, x := range a {
		y, ok := b[k]
		if !ok || x.fwd+x.rev == 0 {
			continue
		}
		d += x.share * min(1, (math.Abs(y.fwd-x.fwd)+math.Abs(y.rev-x.rev))/(x.fwd+x.rev))
	}
	return d
}
