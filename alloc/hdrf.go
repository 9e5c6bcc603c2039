package alloc

import (
	"cmp"
	"math"
	"slices"
)

// HDRF returns x per flow (allocation = x·demand, x ∈ [0, 1]) under
// two-level hierarchical DRF (H-DRF, Bhattacharya et al., SoCC 2013):
// groups (VectorFlow.Group; "" makes a flow a group of its own), then flows
// within a group.
//
// Group weight: VectorProblem.GroupWeights[group] if given, else the sum of
// the weights of the group's flows (so a one-flow group weighs what its
// flow weighs).
//
// Algorithm (static H-DRF by progressive filling, divisible demands):
//
//   - Within a group, unfrozen flows share by weighted DRF: they all have
//     dominant share s_i = w_i·m_g for one group level m_g.
//   - A group's weighted dominant share is τ_g = max_r cons_gr / (C_r·W_g)
//     where cons_gr is the group's total consumption of r — its frozen
//     flows' allocations included, as the paper adds blocked children's
//     vectors unscaled (non-blocked children need no rescaling here: they
//     all have the same dominant share) — and the max ignores saturated
//     resources, as the paper does.
//   - Filling always raises the groups with the smallest τ, together, at the
//     same pace (the continuous form of H-DRF's "give to the child with the
//     lowest dominant share"). Groups ahead wait until the others catch up.
//   - A flow freezes at x = 1 or when a resource it demands saturates; the
//     rest of its group continues. When a resource saturates it leaves the
//     max in τ, so a group's τ may drop: that group then catches up alone
//     (with any others behind), while the rest wait, until it is level
//     again. A group whose τ is set by frozen consumption (its growing
//     flows do not raise it) grows at once, at constant τ, until its growth
//     raises τ; such groups are served one at a time (lowest τ, then lowest
//     group index), as the discrete scheduler would.
//
// Relation to the paper: H-DRF is defined there for discrete tasks, by a
// scheduler that repeatedly walks down the tree to the child with the
// lowest (weighted) dominant share, computing an internal node's share from
// its children's consumption vectors with the non-blocked ones rescaled to
// the smallest non-blocked dominant share and saturated resources ignored;
// its static form is the limit of that process. This is the same process
// in continuous form for two levels. The tests check it against a
// small-step discrete scheduler (agreement within the step size) and check
// that with one flow per group, or a single group, it is exactly DRF.
// Pulsar uses H-DRF for its global allocation with groups = tenants and
// weights derived from their guarantees: set GroupWeights accordingly.
//
// Events (saturations, demands met, a group's dominant resource changing,
// groups catching up) are processed with heaps of resources and groups; a
// group's state is recomputed in O(resources it uses) when one of its
// flows freezes (the §6.4 instance, 24,000 flows in ~230 tenants, takes
// ~25 ms).
func HDRF(p *VectorProblem) ([]float64, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	h := newHDRF(p)
	h.run()
	return h.x, nil
}

const (
	gsRunning = iota
	gsWaiting
	gsCatch
	gsDone
)

// hdrf is the state of one HDRF computation. Group levels are functions of
// a common clock T (the share of the running groups); resources' loads are
// kept as load at rT0 plus rLam·(T − rT0).
type hdrf struct {
	p *VectorProblem
	x []float64

	// Live flows: they demand a finite-capacity resource and none of
	// capacity 0 (flowOf maps them to p.Flows). Sorted by group, then by
	// the level at which they are met.
	fg       []int32   // group
	fw       []float64 // weight
	fdom     []float64 // dominant share at x = 1
	fM       []float64 // group level at which x = 1: dom/w
	factive  []bool
	fuStart  []int32 // uses: line and coefficient a = d/dom (consumption per unit share)
	fuLine   []int32
	fuA      []float64
	resStart []int32 // resource → live flows
	resFlow  []int32

	// Groups.
	gW         []float64
	gState     []int
	gM0, gT0   []float64 // level m = gM0 + gMu·(T − gT0) when running
	gMu        []float64
	gActive    []int32
	gLineStart []int32
	gFlowStart []int32 // flows of the group sorted by fM
	gFlow      []int32
	gNext      []int32 // cursor in gFlow
	gh         idxHeap

	// Lines: (group, resource) pairs with finite capacity.
	lRes     []int32
	lF, lS   []float64
	lCnt     []int32
	lContrib []float64

	// Resources.
	rC     []float64
	rL     []float64 // load at time rT0
	rT0    []float64
	rLam   []float64 // load growth per unit T
	rRun   []int32   // lines with contrib > 0
	rSat   []bool
	rh     idxHeap
	rRate  []float64 // catch-up scratch
	rTouch []int32

	flowOf []int // live flow → index into p.Flows

	T       float64
	dirty   []int32
	isDirty []bool
	catch   []int32
}

func newHDRF(p *VectorProblem) *hdrf {
	nF, nR := len(p.Flows), len(p.Resources)
	v := sparseDemands(p)
	h := &hdrf{p: p, x: make([]float64, nF)}

	// Groups.
	gIndex := make(map[string]int32)
	flowGroup := make([]int32, nF)
	for i := range p.Flows {
		name := p.Flows[i].Group
		if name == "" {
			flowGroup[i] = int32(len(h.gW))
			h.gW = append(h.gW, p.Flows[i].Weight)
			continue
		}
		g, ok := gIndex[name]
		if !ok {
			g = int32(len(h.gW))
			gIndex[name] = g
			h.gW = append(h.gW, 0)
		}
		flowGroup[i] = g
		h.gW[g] += p.Flows[i].Weight
	}
	for name, w := range p.GroupWeights {
		if g, ok := gIndex[name]; ok {
			h.gW[g] = w
		}
	}
	nG := len(h.gW)

	// Live flows, grouped.
	type live struct {
		i   int
		g   int32
		dom float64
	}
	var lv []live
	for i := range p.Flows {
		res, amt := v.of(i)
		d, blocked := dominant(p, res, amt)
		switch {
		case blocked:
			h.x[i] = 0
		case d == 0:
			h.x[i] = 1
		default:
			lv = append(lv, live{i, flowGroup[i], d})
		}
	}
	// Sort live flows by group, then by the level at which they are met.
	slices.SortStableFunc(lv, func(a, b live) int {
		if c := cmp.Compare(a.g, b.g); c != 0 {
			return c
		}
		return cmp.Compare(a.dom/p.Flows[a.i].Weight, b.dom/p.Flows[b.i].Weight)
	})
	n := len(lv)
	h.fg = make([]int32, n)
	h.fw = make([]float64, n)
	h.fdom = make([]float64, n)
	h.fM = make([]float64, n)
	h.factive = make([]bool, n)
	h.gFlowStart = make([]int32, nG+1)
	h.gFlow = make([]int32, n)
	h.gActive = make([]int32, nG)
	flowOf := make([]int, n) // live index → p.Flows index
	for k, l := range lv {
		h.fg[k] = l.g
		h.fw[k] = p.Flows[l.i].Weight
		h.fdom[k] = l.dom
		h.fM[k] = l.dom / h.fw[k]
		h.factive[k] = true
		h.gFlowStart[l.g+1]++
		h.gFlow[k] = int32(k) // already sorted by group then fM
		h.gActive[l.g]++
		flowOf[k] = l.i
	}
	for g := 0; g < nG; g++ {
		h.gFlowStart[g+1] += h.gFlowStart[g]
	}

	// Lines per group, flow uses.
	h.rC = make([]float64, nR)
	for r := range p.Resources {
		h.rC[r] = p.Resources[r].Capacity
	}
	lineOf := make([]int32, nR) // resource → line of the current group
	for r := range lineOf {
		lineOf[r] = -1
	}
	h.gLineStart = make([]int32, nG+1)
	h.fuStart = make([]int32, 1, n+1)
	resCount := make([]int32, nR+1)
	for g := 0; g < nG; g++ {
		first := int32(len(h.lRes))
		h.gLineStart[g] = first
		for k := h.gFlowStart[g]; k < h.gFlowStart[g+1]; k++ {
			res, amt := v.of(flowOf[k])
			for j, r := range res {
				if math.IsInf(h.rC[r], 1) {
					continue // never saturates, never dominant
				}
				l := lineOf[r]
				if l < first {
					l = int32(len(h.lRes))
					lineOf[r] = l
					h.lRes = append(h.lRes, r)
					h.lF = append(h.lF, 0)
					h.lS = append(h.lS, 0)
					h.lCnt = append(h.lCnt, 0)
				}
				a := amt[j] / h.fdom[k]
				h.fuLine = append(h.fuLine, l)
				h.fuA = append(h.fuA, a)
				h.lS[l] += h.fw[k] * a
				h.lCnt[l]++
				resCount[r+1]++
			}
			h.fuStart = append(h.fuStart, int32(len(h.fuLine)))
		}
	}
	h.gLineStart[nG] = int32(len(h.lRes))
	h.lContrib = make([]float64, len(h.lRes))

	// Resource → live flows.
	for r := 0; r < nR; r++ {
		resCount[r+1] += resCount[r]
	}
	h.resStart = resCount
	h.resFlow = make([]int32, resCount[nR])
	fill := make([]int32, nR)
	for k := 0; k < n; k++ {
		for u := h.fuStart[k]; u < h.fuStart[k+1]; u++ {
			r := h.lRes[h.fuLine[u]]
			h.resFlow[h.resStart[r]+fill[r]] = int32(k)
			fill[r]++
		}
	}

	h.rL = make([]float64, nR)
	h.rT0 = make([]float64, nR)
	h.rLam = make([]float64, nR)
	h.rRun = make([]int32, nR)
	h.rSat = make([]bool, nR)
	h.rRate = make([]float64, nR)
	h.rh.reset(nR)

	h.gState = make([]int, nG)
	h.gM0 = make([]float64, nG)
	h.gT0 = make([]float64, nG)
	h.gMu = make([]float64, nG)
	h.gNext = make([]int32, nG)
	copy(h.gNext, h.gFlowStart[:nG])
	h.gh.reset(nG)
	h.isDirty = make([]bool, nG)

	h.flowOf = flowOf
	return h
}

// tauTol is the tolerance used when comparing group shares.
func tauTol(t float64) float64 { return 1e-11*math.Abs(t) + 1e-300 }

func (h *hdrf) run() {
	for g := range h.gW {
		h.gState[g] = gsWaiting // recompute decides
		h.markDirty(int32(g))
	}
	h.resolve()
	for {
		tg, tr := math.Inf(1), math.Inf(1)
		if h.gh.len() > 0 {
			tg = h.gh.minKey()
		}
		if h.rh.len() > 0 {
			tr = h.rh.minKey()
		}
		if math.IsInf(tg, 1) && math.IsInf(tr, 1) {
			break
		}
		if tg <= tr {
			g := h.gh.pop()
			h.T = max(h.T, tg)
			if h.gState[g] == gsWaiting {
				h.gState[g] = gsRunning
				h.gT0[g] = h.T
			} else {
				h.materialize(g)
				h.freezeMet(g)
			}
			h.markDirty(g)
		} else {
			r := h.rh.pop()
			h.T = max(h.T, tr)
			h.saturate(r)
		}
		h.resolve()
	}
	// Anything still unfrozen (should not happen) keeps its current level.
	for k := range h.factive {
		if h.factive[k] {
			h.freezeFlow(int32(k), h.fw[k]*h.level(h.fg[k]))
		}
	}
}

func (h *hdrf) markDirty(g int32) {
	if !h.isDirty[g] {
		h.isDirty[g] = true
		h.dirty = append(h.dirty, g)
	}
}

// level is group g's current level m.
func (h *hdrf) level(g int32) float64 {
	if h.gState[g] == gsRunning {
		return h.gM0[g] + h.gMu[g]*(h.T-h.gT0[g])
	}
	return h.gM0[g]
}

func (h *hdrf) materialize(g int32) {
	h.gM0[g] = h.level(g)
	h.gT0[g] = h.T
}

// freezeMet freezes the flows of g whose demand is met at its level.
func (h *hdrf) freezeMet(g int32) {
	m := h.gM0[g]
	for h.gNext[g] < h.gFlowStart[g+1] {
		k := h.gFlow[h.gNext[g]]
		if !h.factive[k] {
			h.gNext[g]++
			continue
		}
		if h.fM[k] > m*(1+1e-12) {
			break
		}
		h.freezeFlow(k, h.fdom[k])
		h.gNext[g]++
	}
}

// nextMet is the level at which g's next unfrozen flow is met (+Inf if none).
func (h *hdrf) nextMet(g int32) float64 {
	for h.gNext[g] < h.gFlowStart[g+1] {
		k := h.gFlow[h.gNext[g]]
		if h.factive[k] {
			return h.fM[k]
		}
		h.gNext[g]++
	}
	return math.Inf(1)
}

// freezeFlow fixes live flow k at dominant share s.
func (h *hdrf) freezeFlow(k int32, s float64) {
	h.factive[k] = false
	h.x[h.flowOf[k]] = min(1, max(0, s/h.fdom[k]))
	g := h.fg[k]
	h.gActive[g]--
	w := h.fw[k]
	for u := h.fuStart[k]; u < h.fuStart[k+1]; u++ {
		l := h.fuLine[u]
		a := h.fuA[u]
		h.lF[l] += s * a
		h.lCnt[l]--
		if h.lCnt[l] == 0 {
			h.lS[l] = 0
		} else {
			h.lS[l] -= w * a
		}
	}
	h.markDirty(g)
}

// saturate marks r saturated and freezes the flows on it.
func (h *hdrf) saturate(r int32) {
	if h.rSat[r] {
		return
	}
	h.matRes(r)
	h.rSat[r] = true
	h.rh.remove(r)
	for j := h.resStart[r]; j < h.resStart[r+1]; j++ {
		k := h.resFlow[j]
		if h.factive[k] {
			h.freezeFlow(k, h.fw[k]*h.level(h.fg[k]))
		}
	}
}

func (h *hdrf) matRes(r int32) {
	if h.rLam[r] != 0 {
		h.rL[r] += h.rLam[r] * (h.T - h.rT0[r])
	}
	h.rT0[r] = h.T
}

func (h *hdrf) updResKey(r int32) {
	if h.rSat[r] || !(h.rLam[r] > 0) {
		h.rh.remove(r)
		return
	}
	h.rh.set(r, h.T+max(0, h.rC[r]-h.rL[r])/h.rLam[r])
}

func (h *hdrf) setContrib(l int32, c float64) {
	old := h.lContrib[l]
	if c == old {
		return
	}
	r := h.lRes[l]
	h.matRes(r)
	if old > 0 {
		h.rRun[r]--
	}
	if c > 0 {
		h.rRun[r]++
	}
	h.lContrib[l] = c
	if h.rRun[r] == 0 {
		h.rLam[r] = 0
	} else {
		h.rLam[r] += c - old
	}
	h.updResKey(r)
}

func (h *hdrf) clearContribs(g int32) {
	for l := h.gLineStart[g]; l < h.gLineStart[g+1]; l++ {
		h.setContrib(l, 0)
	}
}

// envelope returns g's share τ at level m (max over unsaturated lines), the
// normalised slope σ* of the line that sets it (ties: the steepest) and the
// step in m before another line overtakes it (+Inf if none).
func (h *hdrf) envelope(g int32, m float64) (tau, sigma, kink float64) {
	W := h.gW[g]
	tau = math.Inf(-1)
	for l := h.gLineStart[g]; l < h.gLineStart[g+1]; l++ {
		r := h.lRes[l]
		if h.rSat[r] {
			continue
		}
		tau = max(tau, (h.lF[l]+m*h.lS[l])/(h.rC[r]*W))
	}
	if math.IsInf(tau, -1) {
		return 0, 0, math.Inf(1)
	}
	cut := tau - tauTol(tau)
	for l := h.gLineStart[g]; l < h.gLineStart[g+1]; l++ {
		r := h.lRes[l]
		if h.rSat[r] {
			continue
		}
		cw := h.rC[r] * W
		if (h.lF[l]+m*h.lS[l])/cw >= cut {
			sigma = max(sigma, h.lS[l]/cw)
		}
	}
	kink = math.Inf(1)
	for l := h.gLineStart[g]; l < h.gLineStart[g+1]; l++ {
		r := h.lRes[l]
		if h.rSat[r] {
			continue
		}
		cw := h.rC[r] * W
		s := h.lS[l] / cw
		if s > sigma {
			rho := (h.lF[l] + m*h.lS[l]) / cw
			kink = min(kink, max(0, (tau-rho)/(s-sigma)))
		}
	}
	return tau, sigma, kink
}

// resolve recomputes dirty groups and runs catch-ups until every group is
// running at the common level T, waiting above it, or done.
func (h *hdrf) resolve() {
	for {
		for len(h.dirty) > 0 {
			g := h.dirty[len(h.dirty)-1]
			h.dirty = h.dirty[:len(h.dirty)-1]
			h.isDirty[g] = false
			h.recompute(g)
		}
		if len(h.catch) == 0 {
			return
		}
		h.catchUp()
	}
}

func (h *hdrf) recompute(g int32) {
	if h.gState[g] == gsCatch {
		return // catchUp owns it
	}
	h.materialize(g)
	if h.gActive[g] == 0 {
		h.gState[g] = gsDone
		h.clearContribs(g)
		h.gh.remove(g)
		return
	}
	m := h.gM0[g]
	tau, sigma, kink := h.envelope(g, m)
	tol := tauTol(max(tau, h.T))
	switch {
	case tau > h.T+tol:
		h.gState[g] = gsWaiting
		h.clearContribs(g)
		h.gh.set(g, tau)
	case sigma == 0 || tau < h.T-tol:
		h.gState[g] = gsCatch
		h.clearContribs(g)
		h.gh.remove(g)
		h.catch = append(h.catch, g)
	default:
		h.gState[g] = gsRunning
		h.gT0[g] = h.T
		mu := 1 / sigma
		h.gMu[g] = mu
		for l := h.gLineStart[g]; l < h.gLineStart[g+1]; l++ {
			if h.rSat[h.lRes[l]] {
				h.setContrib(l, 0)
			} else {
				h.setContrib(l, mu*h.lS[l])
			}
		}
		dm := min(kink, h.nextMet(g)-m)
		h.gh.set(g, h.T+max(0, dm)*sigma)
	}
}

// catchUp grows the groups in h.catch, with every other group held, until
// each is level with T (or done). The ones with the lowest share grow
// together; a flat group among the lowest (whose
// share is set by frozen consumption) grows first, alone.
func (h *hdrf) catchUp() {
	type cg struct {
		g                int32
		tau, sigma, kink float64
	}
	var cs []cg
	for len(h.catch) > 0 {
		cs = cs[:0]
		keep := h.catch[:0]
		for _, g := range h.catch {
			if h.gActive[g] == 0 {
				h.gState[g] = gsDone
				h.markDirty(g)
				continue
			}
			tau, sigma, kink := h.envelope(g, h.gM0[g])
			if sigma > 0 && tau >= h.T-tauTol(max(tau, h.T)) {
				h.gState[g] = gsWaiting // recompute decides between running and waiting
				h.markDirty(g)
				continue
			}
			keep = append(keep, g)
			cs = append(cs, cg{g, tau, sigma, kink})
		}
		h.catch = keep
		if len(cs) == 0 {
			return
		}
		tmin := math.Inf(1)
		for _, c := range cs {
			tmin = min(tmin, c.tau)
		}
		cut := tmin + tauTol(tmin)
		// Among the lowest, a flat group grows first (lowest index).
		best := -1
		for j, c := range cs {
			if c.sigma == 0 && c.tau <= cut && (best < 0 || c.g < cs[best].g) {
				best = j
			}
		}
		if best >= 0 {
			h.growFlat(cs[best].g, cs[best].tau)
			continue
		}
		// Progressive step among the lowest.
		next := h.T
		delta := math.Inf(1)
		h.rTouch = h.rTouch[:0]
		for _, c := range cs {
			if c.tau > cut {
				next = min(next, c.tau)
				continue
			}
			mu := 1 / c.sigma
			delta = min(delta, c.kink*c.sigma, (h.nextMet(c.g)-h.gM0[c.g])*c.sigma)
			for l := h.gLineStart[c.g]; l < h.gLineStart[c.g+1]; l++ {
				r := h.lRes[l]
				if h.rSat[r] || h.lS[l] == 0 {
					continue
				}
				if h.rRate[r] == 0 {
					h.rTouch = append(h.rTouch, r)
				}
				h.rRate[r] += mu * h.lS[l]
			}
		}
		delta = min(delta, next-tmin)
		for _, r := range h.rTouch {
			h.matRes(r)
			delta = min(delta, max(0, h.rC[r]-h.rL[r])/h.rRate[r])
		}
		delta = max(0, delta)
		for _, c := range cs {
			if c.tau <= cut {
				h.gM0[c.g] += delta / c.sigma
			}
		}
		for _, r := range h.rTouch {
			h.rL[r] += h.rRate[r] * delta
			h.rRate[r] = 0
			h.updResKey(r)
		}
		for _, r := range h.rTouch {
			if h.rC[r]-h.rL[r] <= 1e-12*h.rC[r] {
				h.saturate(r)
			}
		}
		for _, c := range cs {
			if c.tau <= cut {
				h.freezeMet(c.g)
			}
		}
	}
}

// growFlat grows group g, alone, at constant share tau until a growing line
// reaches tau, a flow is met or a resource saturates.
func (h *hdrf) growFlat(g int32, tau float64) {
	W := h.gW[g]
	m := h.gM0[g]
	dm := h.nextMet(g) - m
	for l := h.gLineStart[g]; l < h.gLineStart[g+1]; l++ {
		r := h.lRes[l]
		if h.rSat[r] || h.lS[l] == 0 {
			continue
		}
		cw := h.rC[r] * W
		dm = min(dm, (tau-(h.lF[l]+m*h.lS[l])/cw)/(h.lS[l]/cw))
		h.matRes(r)
		dm = min(dm, max(0, h.rC[r]-h.rL[r])/h.lS[l])
	}
	dm = max(0, dm)
	h.gM0[g] = m + dm
	for l := h.gLineStart[g]; l < h.gLineStart[g+1]; l++ {
		r := h.lRes[l]
		if h.rSat[r] || h.lS[l] == 0 {
			continue
		}
		h.rL[r] += h.lS[l] * dm
		h.updResKey(r)
	}
	for l := h.gLineStart[g]; l < h.gLineStart[g+1]; l++ {
		r := h.lRes[l]
		if !h.rSat[r] && h.rC[r]-h.rL[r] <= 1e-12*h.rC[r] {
			h.saturate(r)
		}
	}
	h.freezeMet(g)
}
