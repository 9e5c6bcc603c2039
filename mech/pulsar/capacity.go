package pulsar

import "math"

// Phase is what a CapacityEstimator did at its last observation (the four
// phases of Pulsar §4.3, Fig. 8, plus holding and restarting).
type Phase int

// Phases.
const (
	// PhaseIdle: searching, but the interval told nothing about capacity
	// (the estimate was not handed out, or the appliance served less than
	// it without queueing: demand fell): the estimate is held.
	PhaseIdle Phase = iota
	// PhaseIncrease: ① binary-search increase (minW ← estimate, estimate ←
	// window midpoint).
	PhaseIncrease
	// PhaseRevert: ② congestion: maxW ← estimate, estimate ← minW.
	PhaseRevert
	// PhaseWait: ③ after a revert on a VDC violation, the estimate is held
	// until an interval passes with every guarantee met and no queue at
	// the appliance.
	PhaseWait
	// PhaseStable: ④ the window is narrower than the stable threshold; the
	// estimate follows eq. (7).
	PhaseStable
	// PhaseRestart: the stable phase saw persistent congestion or a
	// workload change; the window is reset and the search resumes from
	// the current estimate.
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
	// Probe is Params.ProbeIntervals: 0 never probes above a stable
	// estimate.
	Probe int
}

// ApplianceObs is what the controller saw at one appliance over one
// interval, under the estimate the CapacityEstimator returned last.
type ApplianceObs struct {
	// Period is the interval in seconds (for reference: the signals are
	// relative, and eq. (7) is scaled by O_s).
	Period float64
	// Throughput is the appliance's throughput, Σ of its flows' Used on
	// it, tokens/s.
	Throughput float64
	// Outstanding is O: the average tokens outstanding at the appliance,
	// Σ of its flows' Outstanding entries for it (§4.3, footnote 6). A
	// flow's entry counts all its requests beyond its enforcer, wherever
	// they are (the enforcer cannot tell).
	Outstanding float64
	// Delay is the queueing delay the appliance's requests waited there,
	// seconds, and Latency the round-trip time its flows' requests take
	// when nothing queues (throughput-weighted): what the controller
	// derives from its flows' outstanding requests (see Controller). An
	// appliance serves FIFO, so a queue there delays every flow it serves.
	Delay, Latency float64
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
	// tokens outstanding beyond its enforcers.
	Guarantee, Granted, Used, Outstanding float64
	// Forward and Reverse are its requests' network bytes/s on the way to
	// the appliance and back (the request mix: bytes per appliance token).
	Forward, Reverse float64
	// Demand is what it would have used there without the queues at
	// appliances on its flows' way: Used raised by the demand the queues
	// hid (Σ over its flows of used × QueueFactor), tokens/s; 0 when
	// unknown.
	Demand float64
}

// CapacityEstimator estimates one appliance's VDC-compliant capacity in
// tokens/s by probing (Pulsar §4.3): a window [minW, maxW] that should
// contain the capacity is narrowed by binary search on congestion signals,
// then the estimate follows eq. (7).
//
// Each Observe sees one interval under the estimate C returned last. With
// tol = Tolerance, X the throughput and D, L the delay and latency of
// ApplianceObs:
//
//   - queued: D > QueueDelay·L (and D > 1 µs) — requests wait at the
//     appliance. A FIFO appliance queues only when it is saturated: then X
//     is what it can serve of this workload;
//   - exercised: the allocation handed the estimate out, Granted ≥
//     (1−tol)·C ("demand exceeds it");
//   - throughput signal: queued and X < C — the saturated appliance
//     serves less than the estimate, by more than the counters' rounding
//     (0.1%: an appliance that served what it was handed behind a short
//     queue is at its capacity, not above it). (A shortfall without a
//     queue is demand that fell, not congestion; and the appliance can be
//     saturated with the estimate not handed out, when flows are held
//     back elsewhere or their grants fell with what they got, so the
//     signal does not wait for the estimate to be exercised.) While
//     searching, a shortfall
//     within the tolerance (X ≥ (1−tol)·C) behind a queue shorter than
//     the shortfall would have built at the appliance — an average
//     delay of (C−X)·T/(2X) over the interval T; D below half that — is
//     not yet clear: a real appliance near its capacity serves a little
//     less than it was granted in some intervals (clients late to spend
//     their tokens, the interval's edges) while its queue stays short.
//     It is a throughput signal once it has persisted for Readings
//     intervals in a row; until then the estimate is held (PhaseIdle).
//     The signal is also raised without a queue that counts (QueueDelay)
//     when the appliance, handed the estimate, served clearly less than
//     it (X < (1−tol)·C) behind any queue (D > 1 µs) while some tenant
//     used clearly less than its grant there although its demand without
//     the queues (TenantObs.Demand) reached the grant: grants lost to the
//     queue. A closed-loop tenant's requests are bounded by its window,
//     so a saturated appliance it shares shows a short queue and the
//     tenant's throughput falling with the latency rather than a long
//     queue; left alone, the spare it cannot use goes to the others,
//     whose requests lengthen its round trip further. This holds only
//     above the window's floor (C > minW): at the floor, what the
//     appliance was shown to serve or the guarantees' sum, a short queue
//     is no evidence that it cannot serve it.
//   - VDC-violation signal: some tenant used less than (1−tol) of its
//     guarantee because of the appliance: either queued, and the tenant
//     had requests outstanding — it was starved by the queue, whatever it
//     was granted (a closed-loop tenant starved at a FIFO appliance uses
//     what the queue leaves it and is not held back by its enforcer) — or
//     with any queue there (D > 1 µs), however short against the round
//     trip, the tenant was granted at least (1−tol) of its guarantee and
//     its demand (TenantObs.Demand: with what the queues hid) reached
//     that too: it would have used its guarantee but for the queue. (The
//     controller grants a tenant whose requests queue its hidden demand up
//     to its guarantee, so such a tenant's grant does not fall to what it
//     gets.)
//
// Search (phases ① and ②). On the throughput signal, revert: maxW ←
// min(maxW, C); if the appliance could not serve minW either (C ≤ minW, or
// X < (1−tol)·minW), minW and the restart floor drop to (1−2·tol)·X and
// the estimate to minW; otherwise the estimate ← min(minW, (1−2·tol)·X),
// leaving room for the queue to drain (it may dip below the window until
// the next increase). On the VDC-violation signal alone (the appliance
// served at least C), revert: maxW ← C if C > minW — unless X > (1+tol)·C:
// the appliance then drains a queue an earlier overload left, and C is not
// to blame — and the estimate ← minW. A violation leads to ③ wait: the
// estimate is held (lowered as above if the throughput signal persists)
// until an interval has passed with every guarantee met and no queue; the
// search resumes at the next interval. Without a signal, if the estimate
// was exercised and served (X ≥ (1−tol)·C) with no queue — and not
// saturated: serving clearly less than it was granted (by 0.1%) behind a
// queue however short, which is no room to grow — ① increase: minW ←
// min(C, X) (the appliance has shown it serves that), estimate ←
// (minW+maxW)/2. If that X is clearly more (by tol) than the appliance
// served, saturated, at the throughput revert that set maxW, the bound
// that revert set is withdrawn first (maxW back to what it was): the
// appliance's capacity was lower then than it is now — a transient (a
// real server's capacity for a mix moves by ±15% from one second to the
// next) or a change its workload does not show — and a binary search
// that only narrows would otherwise keep the estimate below it for good.
// (An appliance of constant capacity never serves clearly more than it
// did saturated.) Anything else holds (PhaseIdle). Reverts and increases
// react to one interval: the revert is what limits an overload to one
// control interval (§4.3 ②); Readings applies to the stable phase and,
// in the search, only to a shortfall within the tolerance that its queue
// does not confirm (an overload of at most tol·C then lasts at most
// Readings intervals).
//
// ④ Stable once maxW − minW < StableThreshold·maxW: the estimate is set to
// minW. Eq. (7) tracks O, the tokens outstanding at the appliance; here O
// = X·(L + D), the appliance's own part of its flows' outstanding tokens
// (Little's law with the queueing delay attributed to it), or
// ApplianceObs.Outstanding when L is unknown: the raw sum of the flows'
// outstanding entries (footnote 6) also counts requests of flows through
// several appliances that queue at another one, which would move this
// estimate for congestion elsewhere. O_s is the lowest O of the first
// Readings stable intervals, capped at the unqueued level
// X·L·(1+QueueDelay), and the workload is recorded. Then each interval
// with the throughput signal relieves the appliance at once, as a revert
// would: C ← max(floor, min(C, (1−2·tol)·X)). Otherwise eq. (7), C ← C −
// α·(O − O_s), with α = Alpha·C/O_s (the paper gives α no value; scaled
// so, Alpha is dimensionless: O 10% above O_s lowers the estimate by
// Alpha·10%) and each step at most tol·C ("minor fluctuations"), upward
// only while exercised, never above the estimate the stable phase started
// from (served without a queue) nor below the restart floor. Readings
// consecutive intervals with a clear throughput shortfall (queued and X <
// (1−tol)·C) or a VDC violation restart the search with the window
// [floor, C at the start of the stable phase]; otherwise Readings
// consecutive intervals whose workload differs from the recorded one by
// more than RestartThreshold restart it with the initial window [floor,
// Max]. The estimate is kept: the search resumes from it.
//
// Probing (off unless Probe > 0; not in the paper): the stable phase
// above only lowers its estimate, so an appliance that becomes faster
// under the same workload would be used at its old capacity until the
// workload changes. With Probe > 0, Probe consecutive stable intervals in
// which the estimate was handed out and served in full without a queue
// (the search's condition for an increase) start a probe above it, as
// BIC-TCP probes past its last maximum: the estimate rises by
// 2·StableThreshold, and while the appliance keeps serving it in full
// without a queue, minW follows and each step doubles (at most
// 2·RestartThreshold of the estimate); the first congestion signal is a
// revert of the search (maxW at the estimate that congested), whose
// binary search then narrows the window again. A probe of an appliance
// already at its capacity overloads it by 2·StableThreshold for an
// interval (within Tolerance of every grant: no VDC violation), every
// Probe intervals or so.
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

	osSet     bool
	os        float64
	settle    int
	cs        float64 // estimate at the start of the stable phase
	mix0      map[string]mixEntry
	congCount int
	unclear   int // consecutive intervals with an unclear shortfall
	mixCount  int
	roomCount int // consecutive stable intervals served in full without a queue
	// Probing (cfg.Probe > 0): the probe's present step, relative to the
	// estimate.
	probeW     float64
	queued     bool // last observation's signals, for inspection
	congestion bool
	violation  bool

	// The throughput signal that last lowered maxW: the appliance served
	// xRev, saturated, and maxW was prevMax before (xRev 0: none since the
	// window was last set).
	xRev, prevMax float64
}

// minDelay is the smallest queueing delay that counts, seconds: below it,
// floating-point noise of an appliance whose flows see no latency at all.
const minDelay = 1e-6

const (
	stSearch = iota
	stWait
	stStable
	stProbe
)

type mixEntry struct{ share, fwd, rev float64 }

// NewCapacityEstimator returns an estimator starting at cfg.Min.
func NewCapacityEstimator(cfg EstimatorConfig) *CapacityEstimator {
	if cfg.Readings < 1 {
		cfg.Readings = 1
	}
	e := &CapacityEstimator{cfg: cfg, floor: cfg.Min, ceil: cfg.Max, minW: cfg.Min, maxW: cfg.Max, est: cfg.Min}
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
// (the saturated appliance did not deliver the estimate) and VDC
// violation.
func (e *CapacityEstimator) Signals() (throughput, violation bool) {
	return e.congestion, e.violation
}

// Queued reports whether the last observation saw a queue at the
// appliance.
func (e *CapacityEstimator) Queued() bool { return e.queued }

// Observe consumes one interval's observation and returns the estimate for
// the next allocation.
func (e *CapacityEstimator) Observe(o *ApplianceObs) float64 {
	if e.fixed {
		return e.est
	}
	tol := e.cfg.Tolerance
	C := e.est
	X := o.Throughput
	queued := o.Delay > minDelay && o.Delay > e.cfg.QueueDelay*o.Latency
	exercised := C > 0 && o.Granted >= (1-tol)*C
	// Grants lost behind a short queue count only above the window's
	// floor: minW is what the appliance was shown to serve, or the
	// guarantees' sum it was admitted for, and a tenant short of its grant
	// behind a few microseconds of queue there is no evidence that it
	// cannot (it would lower the floor and close the window above it).
	over := (queued || C > e.minW && e.grantsLost(o, C)) && X < C*(1-servedShort)
	// A shortfall within the tolerance, behind a queue shorter than the
	// shortfall would have built at the appliance, is not yet clear: a
	// real appliance near its capacity serves a little less than it was
	// granted in some intervals (clients late to use their tokens, the
	// interval's edges) while its queue stays short. It counts once it
	// has persisted for Readings intervals.
	if e.state == stSearch && over && X >= (1-tol)*C && o.Period > 0 && o.Delay < queueBuilt(C, X, o.Period) {
		e.unclear++
		over = e.unclear >= e.cfg.Readings
	} else {
		e.unclear = 0
	}
	if over {
		e.unclear = 0
	}
	viol := e.violated(o, queued)
	e.queued, e.congestion, e.violation = queued, over, viol

	switch e.state {
	case stWait:
		e.phase = PhaseWait
		if over {
			// The appliance still cannot serve the held estimate.
			e.maxW = max(min(e.maxW, C), e.minW)
			e.xRev = 0
			if C <= e.minW {
				e.lowerFloor(X * (1 - 2*tol))
			}
			e.est = min(e.est, X*(1-2*tol))
		}
		if !viol && !queued {
			e.state = stSearch
		}
	case stSearch:
		e.search(o, C, X, exercised, queued, over, viol)
	case stProbe:
		e.probeStep(o, C, X, exercised, queued, over, viol)
	case stStable:
		// Overloads are relieved at once; only a clear throughput
		// shortfall or a VDC violation counts towards a restart.
		e.stable(o, exercised, over, over && X < (1-tol)*C || viol)
		if e.state == stStable && e.cfg.Probe > 0 {
			e.probe(!over && !viol && e.servedInFull(o, C, X, exercised, queued))
		}
	}
	return e.est
}

// probe counts the stable intervals in which the appliance served the
// estimate it was handed in full without a queue (room), and after
// cfg.Probe of them in a row starts probing above the estimate (stProbe,
// probeStep).
func (e *CapacityEstimator) probe(room bool) {
	if !room {
		e.roomCount = 0
		return
	}
	e.roomCount++
	if e.roomCount < e.cfg.Probe {
		return
	}
	e.roomCount = 0
	if e.ceil-e.est < e.cfg.StableThreshold*e.ceil {
		return // no room left below the initial maximum
	}
	e.state = stProbe
	e.minW, e.maxW = e.est, e.ceil
	e.xRev = 0
	e.unclear = 0
	e.probeW = 2 * e.cfg.StableThreshold
	e.est = min(e.ceil, e.est*(1+e.probeW))
	e.phase = PhaseRestart
}

// probeStep is one interval of probing above a stable estimate, as
// BIC-TCP probes past its last maximum: while the appliance serves the
// estimate it is handed in full without a queue, minW rises to it and the
// next step is twice the last (2·StableThreshold of the estimate at
// first, at most 2·RestartThreshold); at the first congestion signal the
// probe becomes the search's revert, with maxW at the estimate that
// congested and the estimate back at minW, and the binary search goes on
// between them. Anything else holds the estimate (demand fell).
func (e *CapacityEstimator) probeStep(o *ApplianceObs, C, X float64, exercised, queued, over, viol bool) {
	switch {
	case over || viol:
		e.state = stSearch
		e.search(o, C, X, exercised, queued, over, viol)
	case e.servedInFull(o, C, X, exercised, queued):
		e.minW = max(e.minW, min(C, X))
		e.probeW = min(2*e.probeW, 2*e.cfg.RestartThreshold)
		e.est = min(e.ceil, e.minW*(1+e.probeW))
		e.phase = PhaseIncrease
		if e.est >= e.ceil {
			// the initial maximum: the search takes over below it
			e.state = stSearch
			e.est = (e.minW + e.maxW) / 2
		}
	default:
		e.phase = PhaseIdle
	}
}

// lowerFloor is called when the appliance cannot serve minW under this
// workload, only about v: minW drops to v, the restart floor follows and
// the estimate is set to minW.
func (e *CapacityEstimator) lowerFloor(v float64) {
	e.minW = min(e.minW, max(v, 0))
	e.floor = min(e.floor, e.minW)
	e.est = e.minW
}

// search is one step of phases ① and ②.
func (e *CapacityEstimator) search(o *ApplianceObs, C, X float64, exercised, queued, over, viol bool) {
	tol := e.cfg.Tolerance
	switch {
	case over || viol:
		if over {
			// The saturated appliance served X < C: the capacity is
			// below C. minW may be as high as X; leave 2·tol of room for
			// the queue to drain (the estimate may dip below the window
			// until the next increase). If the appliance could not serve
			// minW either (the estimate was at or below it, or X is
			// clearly below it), minW drops below X.
			if C < e.maxW {
				e.xRev, e.prevMax = X, e.maxW
				e.maxW = C
			}
			if C <= e.minW || X < (1-tol)*e.minW {
				e.lowerFloor(X * (1 - 2*tol))
			} else {
				e.est = min(e.minW, X*(1-2*tol))
			}
		} else {
			// A violation with the appliance serving at least C: C is too
			// high for a VDC-compliant workload — unless the appliance
			// served clearly more than C, draining a queue left by an
			// earlier overload.
			if C > e.minW && X <= (1+tol)*C {
				e.maxW = min(e.maxW, C)
				e.xRev = 0
			}
			e.est = e.minW
		}
		e.phase = PhaseRevert
		if viol {
			e.state = stWait
		}
	case e.servedInFull(o, C, X, exercised, queued):
		if e.xRev > 0 && X > (1+tol)*e.xRev && e.prevMax > e.maxW {
			// The appliance serves clearly more, without a queue, than
			// it served saturated at the revert that set maxW: its
			// capacity was lower then than it is now (a transient, or
			// a change the workload does not show). That revert's
			// bound is withdrawn.
			e.maxW, e.xRev = e.prevMax, 0
		}
		e.minW = min(max(e.minW, min(C, X)), e.maxW)
		e.est = (e.minW + e.maxW) / 2
		e.phase = PhaseIncrease
	default:
		e.phase = PhaseIdle
	}
	if e.state == stSearch && e.maxW-e.minW < e.cfg.StableThreshold*e.maxW {
		e.est = e.minW
		e.state = stStable
		e.osSet = false
		e.congCount, e.mixCount, e.roomCount = 0, 0, 0
	}
}

// stable is one step of phase ④.
func (e *CapacityEstimator) stable(o *ApplianceObs, exercised, over, congested bool) {
	e.phase = PhaseStable
	O := o.Outstanding
	if o.Latency > 0 {
		// The appliance's own outstanding tokens (Little): its flows'
		// unloaded latency plus its own queueing delay.
		O = o.Throughput * (o.Latency + o.Delay)
	}
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
		if o.Latency > 0 {
			e.os = min(e.os, o.Throughput*o.Latency*(1+e.cfg.QueueDelay))
		}
		return
	}
	tol := e.cfg.Tolerance
	switch {
	case over:
		// A queue and a shortfall: the appliance is saturated below the
		// estimate. Relieve it at once, as a revert would (eq. 7 is for
		// minor fluctuations); Readings of these restart the search.
		e.est = max(min(e.est, o.Throughput*(1-2*tol)), e.floor)
	case e.os > o.Throughput*minDelay:
		// (An O_s below a microsecond of throughput is floating-point
		// noise of flows that see no latency at all: nothing to track.)
		d := e.cfg.Alpha * e.est * (O - e.os) / e.os
		d = min(max(d, -tol*e.est), tol*e.est)
		if d > 0 || exercised {
			// Never above the estimate the stable phase started from,
			// which the appliance served without a queue (maxW was seen
			// congested).
			e.est = min(max(e.est-d, e.floor), e.cs)
		}
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
		e.xRev = 0
		if e.congCount >= e.cfg.Readings {
			// Congestion (with or without a new workload): the capacity
			// is below the stable estimate.
			e.maxW = max(e.cs, e.minW)
		}
		e.est = min(max(e.est, e.minW), e.maxW)
		e.congCount, e.mixCount = 0, 0
		e.phase = PhaseRestart
	}
}

// servedInFull reports an interval in which the estimate C was handed
// out (exercised) and the appliance served it (X ≥ (1−tol)·C) without a
// queue, not even a short one behind which it served clearly less than
// it was granted (saturated): the evidence that its capacity is above C,
// on which the search increases and the stable phase probes.
func (e *CapacityEstimator) servedInFull(o *ApplianceObs, C, X float64, exercised, queued bool) bool {
	return exercised && !queued && X >= (1-e.cfg.Tolerance)*C && !saturated(o)
}

// queueBuilt is the queueing delay (seconds) that an appliance serving X
// tokens/s under an estimate C > X for an interval of T seconds shows at
// the least when it is the shortfall's cause: the (C−X)·T tokens it did
// not serve queue there, an average delay of (C−X)·T/(2X) if they build
// up steadily over the interval; half that, to leave room for the
// measurement.
func queueBuilt(C, X, T float64) float64 {
	return (C - X) * T / (4 * X)
}

// servedShort is the relative shortfall of an appliance's throughput
// against what it was granted beyond which it did not serve what it was
// given (above the rounding of counters).
const servedShort = 1e-3

// saturated reports whether the appliance, behind a queue however short
// (D > 1 µs), served clearly less than it was granted: it is saturated
// below the grant, although the queue is too short against the round trip
// to count as one (QueueDelay).
func saturated(o *ApplianceObs) bool {
	return o.Delay > minDelay && o.Throughput < (1-servedShort)*o.Granted
}

// grantsLost reports an appliance that served clearly less than the
// estimate C it was handed, behind a queue however short, while some
// tenant used clearly less than its grant there although its demand
// without the queues (TenantObs.Demand) reached the grant: the queue, not
// the tenant, kept it from its allocation. A closed-loop tenant's requests
// are bounded by its window, so a saturated appliance it shares shows a
// short queue and the tenant's throughput falling with the latency,
// rather than a long queue: the queued test alone (QueueDelay) misses
// it, while the spare the tenant leaves goes to the others and lengthens
// its round trip further.
func (e *CapacityEstimator) grantsLost(o *ApplianceObs, C float64) bool {
	tol := e.cfg.Tolerance
	if !(o.Delay > minDelay) || !(o.Granted >= (1-tol)*C) || !(o.Throughput < (1-tol)*C) {
		return false
	}
	for i := range o.Tenants {
		t := &o.Tenants[i]
		if t.Granted > 0 && t.Used < (1-tol)*t.Granted && t.Demand >= (1-tol)*t.Granted {
			return true
		}
	}
	return false
}

// violated reports the VDC-violation signal: some tenant used clearly
// less than its guarantee because of the appliance. That is so when the
// appliance is queued and the tenant has requests outstanding (a starved
// closed loop uses what the queue leaves it), or when — with any queue
// there, however short against the round trip — the tenant was granted
// its guarantee and its demand (Demand: with what the queues hid) reached
// it: it would have used its guarantee but for the queue.
func (e *CapacityEstimator) violated(o *ApplianceObs, queued bool) bool {
	tol := e.cfg.Tolerance
	for i := range o.Tenants {
		t := &o.Tenants[i]
		if !(t.Guarantee > 0) || t.Used >= (1-tol)*t.Guarantee {
			continue
		}
		if queued && t.Outstanding > 0 {
			return true
		}
		if o.Delay > minDelay && t.Granted >= (1-tol)*t.Guarantee && t.Demand >= (1-tol)*t.Guarantee {
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
