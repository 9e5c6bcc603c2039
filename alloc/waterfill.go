package alloc

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"
)

// byDemand marks a flow frozen by its demand cap (engine.by).
const byDemand = -1

// engine is the progressive water-filling core shared by MaxMin (over
// sub-resources) and DRF. Its problem: sub-resources s with capacity cap[s]
// (≥ 0, may be +Inf), flows f with weight w[f] > 0, demand cap dem[f] ≥ 0
// (may be +Inf) and uses (sub, coef > 0) in CSR form (useStart, useSub,
// useCoef). It finds the weighted max-min allocation e: all unfrozen flows
// grow together, e[f] = w[f]·L for one water level L; a flow freezes when it
// reaches its demand or when a sub-resource it uses saturates.
//
// Events are found with an indexed heap of sub-resources keyed by the level
// at which each would saturate, (cap − frozen load) / (Σ coef·w of its
// unfrozen flows), updated lazily when a flow on it freezes, and a list of
// flows sorted by demand level dem/w. Each flow freezes once and touches
// each of its uses once, so a run costs O(U log S + F log F) for U uses,
// S sub-resources and F flows. A caller that reads only the allocations
// (eOnly) lets the run freeze up front, in O(U), the flows that no shared
// sub-resource can hold back (freezeOwn): in the simulator, every flow
// whose limiter binds before any link fills.
type engine struct {
	// inputs
	cap      []float64
	w, dem   []float64
	useStart []int32 // len(w)+1
	useSub   []int32
	useCoef  []float64

	// outputs
	e     []float64 // allocation per flow
	by    []int32   // sub that froze the flow, or byDemand
	used  []float64 // final load per sub
	level []float64 // level at which a sub saturated, +Inf if it did not

	// scratch
	subStart  []int32
	subFlow   []int32
	subCoef   []float64
	satList   []int32 // sub-resources in the order they saturated
	slope     []float64
	slopeRef  []float64 // slope when last computed exactly
	cnt       []int32
	active    []bool
	order     []demandEvent
	h         idxHeap
	remaining int

	// With usePrio, events within tieTol of each other are ties, resolved
	// by prio (lower first) and then by index; a flow's demand wins ties.
	usePrio bool
	prio    []uint8
	batch   []int32

	mark    []bool  // per sub-resource: in touched
	touched []int32 // sub-resources whose heap key is stale

	// sameUses: the uses are those of the last run, and so is the
	// sub-resource → flows index (subStart, subFlow, subCoef)
	sameUses bool

	// eOnly: the caller reads only e (and run's result), so run may
	// freeze up front the flows that nothing shared can hold back
	// (freezeOwn); used, level and satList then leave those flows and
	// their own sub-resources out (by still names what froze them). Not
	// with usePrio.
	eOnly bool
	own   []float64 // freezeOwn: a flow's allocation at its own event
	ownBy []int32   // freezeOwn: what froze it there (a sub or byDemand)
	skip  []bool    // freezeOwn: a sub-resource left out of the queue
	nOwn  int       // flows the last run froze up front (freezeOwn)
	// ownSkip is how many more runs do not try freezeOwn: it changes no
	// allocation, only the work, and when it freezes under a twentieth
	// of the flows its passes cost more than they save, so the next
	// ownSkipRuns runs go without it.
	ownSkip int

	// sensitivity's scratch: each sub-resource's place in satList (−1:
	// none; satPosOK: of the last run), the places whose level can move,
	// the flows written
	satPos   []int32
	satPosOK bool
	live     []bool
	wrote    []int32

	// parallel, if set, runs fn on parts [lo, hi) covering [0, n),
	// possibly several at once (Solver.Parallel)
	parallel func(n int, fn func(lo, hi int))
}

// ownSkipRuns is how many runs go without freezeOwn after one in which it
// froze little.
const ownSkipRuns = 7

// slackTol is, per use and one more, how far below its capacity (as a
// fraction of it) the allocations a sub-resource's flows would reach at
// their own events must stay for freezeOwn to leave it out, so that the
// rounding of run's key for it cannot make it saturate first: for n uses,
// its running load is off by at most about n·2⁻⁵³ of its capacity, and
// its running slope by 2n·2⁻⁵³ of its initial value while it is above
// satLevel's 10⁻⁶ of that value (below, satLevel recomputes it), so its
// key by less than n·2.3·10⁻¹⁰ of capacity/slope, under the margin of
// (n+1)·10⁻⁹.
const slackTol = 1e-9

// tieTol is the relative difference under which two saturation levels are
// treated as equal when attributing flows to sub-resources.
const tieTol = 1e-12

// reset sizes the engine for nSub sub-resources and nFlow flows and empties
// the use lists. The caller then fills cap, w, dem and appends uses with
// addUse, closing each flow with endFlow.
func (g *engine) reset(nSub, nFlow int) {
	g.cap = grow(g.cap, nSub)
	g.w = grow(g.w, nFlow)
	g.dem = grow(g.dem, nFlow)
	g.useStart = grow(g.useStart, nFlow+1)[:1]
	g.useStart[0] = 0
	g.useSub = g.useSub[:0]
	g.useCoef = g.useCoef[:0]
}

func (g *engine) addUse(s int32, c float64) {
	g.useSub = append(g.useSub, s)
	g.useCoef = append(g.useCoef, c)
}

func (g *engine) endFlow() { g.useStart = append(g.useStart, int32(len(g.useSub))) }

// demandEvent is a flow and the water level at which it meets its demand.
type demandEvent struct {
	level float64
	f     int32
}

// grow returns s resliced (or reallocated) to length n; contents undefined.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// run computes the allocation. It returns the index of a flow that nothing
// bounds (infinite demand and no finite-capacity sub-resource), or -1.
func (g *engine) run() int {
	nS, nF := len(g.cap), len(g.w)
	g.e = grow(g.e, nF)
	g.by = grow(g.by, nF)
	g.used = grow(g.used, nS)
	g.level = grow(g.level, nS)
	g.slope = grow(g.slope, nS)
	g.slopeRef = grow(g.slopeRef, nS)
	g.mark = grow(g.mark, nS)
	g.cnt = grow(g.cnt, nS)
	g.active = grow(g.active, nF)
	g.subStart = grow(g.subStart, nS+1)
	g.subFlow = grow(g.subFlow, len(g.useSub))
	g.subCoef = grow(g.subCoef, len(g.useSub))
	g.satList = g.satList[:0]
	g.satPosOK = false

	// Sub-resource → flows (CSR), initial slopes.
	if g.sameUses {
		g.initFromIndex()
	} else {
		g.init()
	}

	g.nOwn = 0
	reduced := false
	switch {
	case !g.eOnly || g.usePrio:
	case g.ownSkip > 0:
		g.ownSkip--
	default:
		reduced = g.freezeOwn()
		if 20*g.nOwn < nF {
			g.ownSkip = ownSkipRuns
		}
	}

	// Queue of sub-resources that can saturate. One used by a single
	// flow keeps its key until that flow freezes (and it leaves the
	// queue): it waits in the queue's sorted part rather than its heap.
	g.h.reset(nS)
	fixed := true
	for s := 0; s < nS; s++ {
		g.slopeRef[s] = g.slope[s]
		if g.cnt[s] > 0 && !math.IsInf(g.cap[s], 1) && !(reduced && g.skip[s]) {
			k := g.cap[s] / g.slope[s]
			if math.IsNaN(k) {
				fixed = false
			}
			if g.cnt[s] == 1 {
				g.h.pushSorted(int32(s), k)
			} else {
				g.h.push(int32(s), k)
			}
		}
	}
	if !fixed {
		// A NaN key orders nothing: keep the one heap it always had.
		g.h.unsort()
	}
	g.h.lazy = fixed
	g.h.heapify()

	// Flows by demand level (flows with equal levels in index order).
	g.order = g.order[:0]
	for f := 0; f < nF; f++ {
		if !math.IsInf(g.dem[f], 1) && g.active[f] {
			g.order = append(g.order, demandEvent{g.dem[f] / g.w[f], int32(f)})
		}
	}
	slices.SortFunc(g.order, func(a, b demandEvent) int {
		if a.level < b.level {
			return -1
		}
		if a.level > b.level {
			return 1
		}
		return int(a.f - b.f)
	})

	L := 0.0
	g.remaining = nF - g.nOwn
	di := 0
	for g.remaining > 0 {
		for di < len(g.order) && !g.active[g.order[di].f] {
			di++
		}
		ld := math.Inf(1)
		if di < len(g.order) {
			ld = g.order[di].level
		}
		lr := math.Inf(1)
		if g.h.len() > 0 {
			lr = g.h.minKey()
		}
		if math.IsInf(ld, 1) && math.IsInf(lr, 1) {
			break
		}
		if ld <= lr || (g.usePrio && ld <= lr+tieTol*lr) {
			f := g.order[di].f
			di++
			L = max(L, ld)
			g.freeze(f, g.dem[f], L, byDemand)
			continue
		}
		s := g.h.pop()
		L = max(L, lr)
		if !g.usePrio {
			g.saturate(s, L)
			continue
		}
		// Sub-resources that saturate at the same level (within tieTol)
		// are saturated together, in priority order, so that a flow held
		// by several is attributed to the one of lowest priority value.
		g.batch = append(g.batch[:0], s)
		for g.h.len() > 0 && g.h.minKey() <= L+tieTol*L {
			g.batch = append(g.batch, g.h.pop())
		}
		if len(g.batch) > 1 {
			prio := g.prio
			slices.SortFunc(g.batch, func(a, b int32) int {
				if c := cmp.Compare(prio[a], prio[b]); c != 0 {
					return c
				}
				return cmp.Compare(a, b)
			})
		}
		for _, s := range g.batch {
			g.saturate(s, L)
		}
	}
	if g.remaining > 0 {
		for f := 0; f < nF; f++ {
			if g.active[f] {
				return f
			}
		}
	}
	return -1
}

// init sets up a run on new uses: every flow active at 0, the
// sub-resource → flows index (CSR), and each sub-resource's use count and
// initial slope, adding its flows' coef·w in flow order.
func (g *engine) init() {
	nS, nF := len(g.cap), len(g.w)
	for s := 0; s <= nS; s++ {
		g.subStart[s] = 0
	}
	for s := 0; s < nS; s++ {
		g.used[s] = 0
		g.slope[s] = 0
		g.cnt[s] = 0
		g.level[s] = math.Inf(1)
		g.mark[s] = false
	}
	g.touched = g.touched[:0]
	for _, s := range g.useSub {
		g.subStart[s+1]++
	}
	for s := 0; s < nS; s++ {
		g.subStart[s+1] += g.subStart[s]
	}
	// Locals keep the compiler from reloading the slice headers after
	// every store.
	useStart, useSub, useCoef := g.useStart, g.useSub, g.useCoef
	subStart, subFlow, subCoef := g.subStart, g.subFlow, g.subCoef
	cnt, slope, w := g.cnt, g.slope, g.w
	for f := 0; f < nF; f++ {
		g.active[f] = true
		g.e[f] = 0
		g.by[f] = byDemand
		wf := w[f]
		for k := useStart[f]; k < useStart[f+1]; k++ {
			s, c := useSub[k], useCoef[k]
			pos := subStart[s] + cnt[s]
			subFlow[pos] = int32(f)
			subCoef[pos] = c
			cnt[s]++
			slope[s] += c * wf
		}
	}
}

// initFromIndex is init for the uses of the last run, whose index it
// keeps: flow by flow, then sub-resource by sub-resource from the index,
// adding each one's coef·w in flow order as init does, to the same
// slopes; both passes split by g.each.
func (g *engine) initFromIndex() {
	nS, nF := len(g.cap), len(g.w)
	g.touched = g.touched[:0]
	g.each(nF, func(lo, hi int) {
		for f := lo; f < hi; f++ {
			g.active[f] = true
			g.e[f] = 0
			g.by[f] = byDemand
		}
	})
	subStart, subFlow, subCoef, w := g.subStart, g.subFlow, g.subCoef, g.w
	g.each(nS, func(lo, hi int) {
		for s := lo; s < hi; s++ {
			g.used[s] = 0
			g.level[s] = math.Inf(1)
			g.mark[s] = false
			g.cnt[s] = subStart[s+1] - subStart[s]
			slope := 0.0
			for k := subStart[s]; k < subStart[s+1]; k++ {
				slope += subCoef[k] * w[subFlow[k]]
			}
			g.slope[s] = slope
		}
	})
}

// freezeOwn freezes, before the run, every flow that run would freeze at
// one of its own events — its demand, or a sub-resource it alone uses —
// because every sub-resource it shares with other flows is slack: the
// allocations its flows would reach at their own events stay below its
// capacity (by a margin, slackTol), so it cannot saturate while one of
// them is active (a flow frozen earlier holds less than that). Those flows get
// the allocation run gives them: the first of their events in run's
// order (a demand before a sub-resource at its level, sub-resources at
// one level by index) at that event's level, which run reaches exactly
// (events are taken in order of level). The run then queues only the
// sub-resources that can still saturate and the flows that use one, and
// each of those flows meets the same events in the same order as in the
// full run: no sub-resource in its queue is shared with a flow frozen
// here. It marks the sub-resources left out in skip and reports whether
// it froze anything (nothing if a capacity or a level is NaN).
//
// It runs in three passes, each split by g.each: over flows (their own
// events), over sub-resources (their loads at those events, from the
// sub-resource → flows index, adding in flow order as the flows' uses
// come, so to the sums a pass over the flows would make), and over flows
// again (those frozen). A pass writes only its own flows' or
// sub-resources' entries (and of the sub-resources only those its flows
// alone use), so its parts are independent.
func (g *engine) freezeOwn() bool {
	nS, nF := len(g.cap), len(g.w)
	g.own = grow(g.own, nF)
	g.ownBy = grow(g.ownBy, nF)
	g.skip = grow(g.skip, nS)
	useStart, useSub := g.useStart, g.useSub
	cnt, capa := g.cnt, g.cap
	var nan, alone, slack atomic.Bool
	g.each(nF, func(lo, hi int) {
		shared := true // every flow of the part shares a finite sub-resource
		for f := lo; f < hi; f++ {
			wf := g.w[f]
			lv, by := math.Inf(1), int32(byDemand)
			if !math.IsInf(g.dem[f], 1) {
				lv = g.dem[f] / wf
			}
			shares := false
			for k := useStart[f]; k < useStart[f+1]; k++ {
				s := useSub[k]
				if math.IsInf(capa[s], 1) {
					continue
				}
				if cnt[s] != 1 {
					shares = true
					continue
				}
				key := capa[s] / g.slope[s]
				if math.IsNaN(key) {
					nan.Store(true)
					return
				}
				if key < lv || (key == lv && by != byDemand && s < by) {
					lv, by = key, s
				}
			}
			if math.IsNaN(lv) {
				nan.Store(true)
				return
			}
			shared = shared && shares
			g.ownBy[f] = by
			e := lv
			switch {
			case math.IsInf(lv, 1):
			case by == byDemand:
				e = g.dem[f]
			default:
				e = wf * max(0, lv) // run's level starts at +0: a key of −0 gives +0
			}
			g.own[f] = e
		}
		if !shared {
			alone.Store(true)
		}
	})
	if nan.Load() {
		return false
	}
	// A shared sub-resource is slack if the load its flows would put on
	// it at their own events stays below its capacity by the margin,
	// strictly: one of capacity 0 saturates at level 0 together with its
	// flows' own events there, and freezes them in another order.
	subStart, subFlow, subCoef, own := g.subStart, g.subFlow, g.subCoef, g.own
	g.each(nS, func(lo, hi int) {
		some := false // some finite sub-resource of the part is shared and slack
		for s := lo; s < hi; s++ {
			if math.IsNaN(capa[s]) {
				nan.Store(true)
				return
			}
			load := 0.0
			for k := subStart[s]; k < subStart[s+1]; k++ {
				load += subCoef[k] * own[subFlow[k]]
			}
			g.skip[s] = cnt[s] > 1 && load < capa[s]*(1-slackTol*float64(1+cnt[s]))
			some = some || (g.skip[s] && !math.IsInf(capa[s], 1))
		}
		if some {
			slack.Store(true)
		}
	})
	if nan.Load() || (!slack.Load() && !alone.Load()) {
		// every flow shares a sub-resource that can saturate
		return false
	}
	var frozen atomic.Int64
	g.each(nF, func(lo, hi int) {
		n := 0
		for f := lo; f < hi; f++ {
			free := !math.IsInf(g.own[f], 1)
			for k := useStart[f]; k < useStart[f+1] && free; k++ {
				s := useSub[k]
				free = cnt[s] == 1 || g.skip[s] || math.IsInf(capa[s], 1)
			}
			if !free {
				continue
			}
			g.active[f] = false
			g.e[f], g.by[f] = g.own[f], g.ownBy[f]
			for k := useStart[f]; k < useStart[f+1]; k++ {
				if s := useSub[k]; cnt[s] == 1 {
					g.skip[s] = true
				}
			}
			n++
		}
		frozen.Add(int64(n))
	})
	g.nOwn = int(frozen.Load())
	return g.nOwn > 0
}

// each runs fn on parts of [0, n) on g.parallel, or at once without it.
func (g *engine) each(n int, fn func(lo, hi int)) {
	if g.parallel != nil {
		g.parallel(n, fn)
	} else {
		fn(0, n)
	}
}

// saturate marks sub-resource s saturated at level L and freezes its flows.
func (g *engine) saturate(s int32, L float64) {
	g.level[s] = L
	g.satList = append(g.satList, s)
	for k := g.subStart[s]; k < g.subStart[s+1]; k++ {
		if f := g.subFlow[k]; g.active[f] {
			g.freezeOnly(f, g.w[f]*L, s)
		}
	}
	g.flush(L)
}

// sensitivity computes dx, the derivative of the last run's allocation
// along a change dcap of the sub-resource capacities, holding the run's
// event structure (which sub-resource froze which flow, in which order)
// fixed: the allocation is piecewise linear in the capacities and this is
// its slope on the current piece. A sub-resource's level is L = (cap −
// load of the flows frozen before it) / Σ coef·w of the flows it froze.
//
// dx must be all zero on entry (as the last call's clearDx leaves it).
// Going through the saturated sub-resources in the order they saturated,
// it works out only those whose level can move: with a change of
// capacity in dcap (the non-zero entries are in dsubs) or a flow whose
// dx an earlier one made non-zero. Any other one's level moves by +0 and
// its flows keep the +0 they start with, so dx is the same, bit for bit,
// as a pass over all of them (sensitivityAll, in the tests). It returns
// the flows it wrote, in increasing order, for the caller to read dx at
// and then clear (clearDx).
func (g *engine) sensitivity(dcap, dx []float64, dsubs []int32) []int32 {
	nS := len(g.cap)
	if !g.satPosOK {
		g.satPos = grow(g.satPos, nS)
		for s := range g.satPos {
			g.satPos[s] = -1
		}
		for p, s := range g.satList {
			g.satPos[s] = int32(p)
		}
		g.satPosOK = true
	}
	g.live = grow(g.live, len(g.satList))
	clear(g.live)
	for _, s := range dsubs {
		if p := g.satPos[s]; p >= 0 && dcap[s] != 0 {
			g.live[p] = true
		}
	}
	g.wrote = g.wrote[:0]
	for p, s := range g.satList {
		if !g.live[p] || !g.moveLevel(s, dcap, dx) {
			continue
		}
		for k := g.subStart[s]; k < g.subStart[s+1]; k++ {
			f := g.subFlow[k]
			if g.by[f] != s {
				continue
			}
			g.wrote = append(g.wrote, f)
			if dx[f] == 0 {
				continue
			}
			// the later sub-resources this flow crosses see it move
			for u := g.useStart[f]; u < g.useStart[f+1]; u++ {
				if q := g.satPos[g.useSub[u]]; q > int32(p) {
					g.live[q] = true
				}
			}
		}
	}
	slices.Sort(g.wrote)
	g.wrote = slices.Compact(g.wrote)
	return g.wrote
}

// moveLevel works out how far saturated sub-resource s's level moves
// along dcap, given dx of the flows frozen before it, and sets dx of the
// flows it froze. It reports false, writing nothing, if it froze none.
func (g *engine) moveLevel(s int32, dcap, dx []float64) bool {
	num, den := dcap[s], 0.0
	for k := g.subStart[s]; k < g.subStart[s+1]; k++ {
		f, c := g.subFlow[k], g.subCoef[k]
		if g.by[f] == s {
			den += c * g.w[f]
		} else {
			num -= c * dx[f]
		}
	}
	if den == 0 {
		return false
	}
	dL := num / den
	for k := g.subStart[s]; k < g.subStart[s+1]; k++ {
		if f := g.subFlow[k]; g.by[f] == s {
			dx[f] = g.w[f] * dL
		}
	}
	return true
}

// clearDx sets dx back to zero at the flows sensitivity wrote.
func (g *engine) clearDx(dx []float64, wrote []int32) {
	for _, f := range wrote {
		dx[f] = 0
	}
}

// freeze fixes flow f at allocation val (water level L) and updates the
// saturation levels of the sub-resources it uses.
func (g *engine) freeze(f int32, val, L float64, by int32) {
	g.freezeOnly(f, val, by)
	g.flush(L)
}

// freezeOnly fixes flow f at allocation val and updates the loads and
// slopes of its sub-resources, deferring their heap updates to flush (a
// saturation freezes many flows that share sub-resources).
func (g *engine) freezeOnly(f int32, val float64, by int32) {
	g.active[f] = false
	g.e[f] = val
	g.by[f] = by
	g.remaining--
	wf := g.w[f]
	for k := g.useStart[f]; k < g.useStart[f+1]; k++ {
		s := g.useSub[k]
		c := g.useCoef[k]
		g.used[s] += c * val
		g.cnt[s]--
		if !g.h.contains(s) {
			continue
		}
		g.slope[s] -= c * wf
		if !g.mark[s] {
			g.mark[s] = true
			g.touched = append(g.touched, s)
		}
	}
}

// flush updates the heap keys of the sub-resources touched since the last
// flush, at water level L.
func (g *engine) flush(L float64) {
	for _, s := range g.touched {
		g.mark[s] = false
		if !g.h.contains(s) {
			continue
		}
		if g.cnt[s] == 0 {
			g.slope[s] = 0
			g.h.remove(s)
			continue
		}
		g.h.fix(s, g.satLevel(s, L))
	}
	g.touched = g.touched[:0]
}

// satLevel is the level at which sub-resource s saturates, at least L.
func (g *engine) satLevel(s int32, L float64) float64 {
	sl := g.slope[s]
	if !(sl > 1e-6*g.slopeRef[s]) {
		// The running sum has lost most of its magnitude, so cancellation
		// may dominate it: recompute it exactly (rare; amortised O(1)).
		sl = 0
		for k := g.subStart[s]; k < g.subStart[s+1]; k++ {
			f := g.subFlow[k]
			if !g.active[f] {
				continue
			}
			for u := g.useStart[f]; u < g.useStart[f+1]; u++ {
				if g.useSub[u] == s {
					sl += g.useCoef[u] * g.w[f]
				}
			}
		}
		g.slope[s] = sl
		g.slopeRef[s] = sl
	}
	lv := (g.cap[s] - g.used[s]) / sl
	if !(lv > L) {
		return L
	}
	return lv
}

// idxHeap is a min-queue of int32 items (0..n-1) with float keys, popped
// in the order of (key, item) (less): a binary heap with a position index,
// so keys can be changed and items removed in O(log n), beside a sorted
// part for items whose keys do not change (pushSorted), removed lazily.
// Both parts pop in the same order, so which part holds an item changes
// nothing of what is popped when. A heap entry carries its key, so that
// comparisons read no other array, and sifting moves entries into a hole
// rather than swapping them (the same comparisons and the same order as
// swapping).
type idxHeap struct {
	items []heapEntry
	pos   []int32 // -1 when not queued, inSorted when in the sorted part
	// the sorted part: sorted[head:] holds its items (and those removed
	// since, whose pos is no longer inSorted), nSorted of them queued
	sorted  []heapEntry
	head    int
	nSorted int
	spare   []heapEntry // radixSort's other buffer
	// With lazy, fix raises no key in the heap at once: it keeps the new
	// key in later[i] (stale[i] set) and the entry's key below it, and
	// settle raises the keys of the entries that reach the top. Every
	// entry's key is then at most its own, so a top whose key is its own
	// is the least of them all by less, as in a heap raised at once.
	lazy  bool
	later []float64
	stale []bool
}

// inSorted is the position of an item in the sorted part.
const inSorted = -2

type heapEntry struct {
	key float64
	i   int32
}

func (h *idxHeap) reset(n int) {
	h.items = h.items[:0]
	h.sorted = h.sorted[:0]
	h.head, h.nSorted = 0, 0
	h.pos = grow(h.pos, n)
	for i := range h.pos {
		h.pos[i] = -1
	}
	h.lazy = false
	h.later = grow(h.later, n)
	h.stale = grow(h.stale, n)
	clear(h.stale)
}

// settle gives the heap's top entry its own key until it has it (lazy).
func (h *idxHeap) settle() {
	for len(h.items) > 0 {
		x := h.items[0].i
		if !h.stale[x] {
			return
		}
		h.stale[x] = false
		h.items[0].key = h.later[x]
		h.down(0)
	}
}

func (h *idxHeap) len() int              { return len(h.items) + h.nSorted }
func (h *idxHeap) contains(i int32) bool { return h.pos[i] != -1 }

func (h *idxHeap) minKey() float64 {
	h.settle()
	if h.sortedFirst() {
		return h.sorted[h.head].key
	}
	return h.items[0].key
}

// sortedFirst says whether the queue's least item is the sorted part's
// first (the queue must not be empty).
func (h *idxHeap) sortedFirst() bool {
	if h.nSorted == 0 {
		return false
	}
	h.settle()
	for h.pos[h.sorted[h.head].i] != inSorted {
		h.head++ // removed
	}
	return len(h.items) == 0 || less(h.sorted[h.head], h.items[0])
}

func less(a, b heapEntry) bool {
	return a.key < b.key || (a.key == b.key && a.i < b.i)
}

// push appends to the heap without restoring order; call heapify
// afterwards.
func (h *idxHeap) push(i int32, k float64) {
	h.pos[i] = int32(len(h.items))
	h.items = append(h.items, heapEntry{k, i})
}

// pushSorted adds i with key k to the sorted part, whose order heapify
// makes; i's key must not change while it is there (fix moves it to the
// heap).
func (h *idxHeap) pushSorted(i int32, k float64) {
	h.pos[i] = inSorted
	h.sorted = append(h.sorted, heapEntry{k, i})
	h.nSorted++
}

// unsort moves the sorted part's items into the heap (before heapify).
func (h *idxHeap) unsort() {
	for _, x := range h.sorted {
		h.push(x.i, x.key)
	}
	h.sorted = h.sorted[:0]
	h.nSorted = 0
}

func (h *idxHeap) heapify() {
	for j := len(h.items)/2 - 1; j >= 0; j-- {
		h.down(j)
	}
	if !h.radixSort() {
		slices.SortFunc(h.sorted, func(a, b heapEntry) int {
			if less(a, b) {
				return -1
			}
			if less(b, a) {
				return 1
			}
			return 0
		})
	}
}

// radixSort sorts the sorted part by less when it can: every key ≥ 0
// (not NaN) and the items in increasing order, as run pushes them. A key
// ≥ 0 orders as its bits do (with -0 as +0, which compares equal), and a
// stable sort by key keeps equal keys in item order. It reports whether
// it sorted.
func (h *idxHeap) radixSort() bool {
	a := h.sorted
	if len(a) < 64 {
		return false
	}
	for j, x := range a {
		if !(x.key >= 0) || j > 0 && x.i <= a[j-1].i {
			return false
		}
	}
	bits := func(k float64) uint64 {
		if k == 0 {
			return 0
		}
		return math.Float64bits(k)
	}
	h.spare = grow(h.spare, len(a))
	tmp := h.spare
	for shift := 0; shift < 64; shift += 8 {
		var count [256]int
		for _, x := range a {
			count[byte(bits(x.key)>>shift)]++
		}
		if count[byte(bits(a[0].key)>>shift)] == len(a) {
			continue // one digit for all: the order stays
		}
		at := 0
		for d, c := range count {
			count[d] = at
			at += c
		}
		for _, x := range a {
			d := byte(bits(x.key) >> shift)
			tmp[count[d]] = x
			count[d]++
		}
		a, tmp = tmp, a
	}
	h.sorted, h.spare = a, tmp
	return true
}

// insert adds i with key k to the heap (i must not be queued).
func (h *idxHeap) insert(i int32, k float64) {
	h.push(i, k)
	h.up(len(h.items) - 1)
}

func (h *idxHeap) pop() int32 {
	h.settle()
	if h.sortedFirst() {
		top := h.sorted[h.head].i
		h.head++
		h.pos[top] = -1
		h.nSorted--
		return top
	}
	top := h.items[0].i
	h.removeAt(0)
	return top
}

func (h *idxHeap) remove(i int32) {
	switch p := h.pos[i]; {
	case p == inSorted:
		h.pos[i] = -1
		h.nSorted--
	case p >= 0:
		h.removeAt(int(p))
	}
}

func (h *idxHeap) removeAt(p int) {
	i := h.items[p].i
	last := len(h.items) - 1
	if p != last {
		h.items[p] = h.items[last]
		h.pos[h.items[p].i] = int32(p)
	}
	h.items = h.items[:last]
	h.pos[i] = -1
	h.stale[i] = false
	if p != last {
		if !h.down(p) {
			h.up(p)
		}
	}
}

// fix sets the key of i (which must be in the heap) and restores order.
func (h *idxHeap) fix(i int32, k float64) {
	if h.pos[i] == inSorted {
		h.remove(i)
		h.insert(i, k)
		return
	}
	p := int(h.pos[i])
	old := h.items[p].key
	if h.lazy && k > old {
		h.later[i], h.stale[i] = k, true
		return
	}
	h.stale[i] = false
	h.items[p].key = k
	if k < old {
		h.up(p)
	} else if k > old {
		h.down(p)
	}
}

// set inserts i or changes its key.
func (h *idxHeap) set(i int32, k float64) {
	if h.pos[i] != -1 {
		h.fix(i, k)
	} else {
		h.insert(i, k)
	}
}

func (h *idxHeap) up(j int) {
	items := h.items
	x := items[j]
	for j > 0 {
		p := (j - 1) / 2
		if !less(x, items[p]) {
			break
		}
		items[j] = items[p]
		h.pos[items[j].i] = int32(j)
		j = p
	}
	items[j] = x
	h.pos[x.i] = int32(j)
}

func (h *idxHeap) down(j int) bool {
	j0 := j
	items := h.items
	n := len(items)
	x := items[j]
	for {
		l := 2*j + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(items[r], items[l]) {
			m = r
		}
		if !less(items[m], x) {
			break
		}
		items[j] = items[m]
		h.pos[items[j].i] = int32(j)
		j = m
	}
	items[j] = x
	h.pos[x.i] = int32(j)
	return j > j0
}
