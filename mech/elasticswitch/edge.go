package elasticswitch

import (
	"math"
	"slices"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch/ra"
)

// Edge ceilings (Config.EdgeCeiling). A host sees every pair that crosses
// its own access link: at the source every pair it sends to another host
// crosses its uplink, at the destination every pair it receives from
// another host crosses its downlink. Every GP period each host divides
// its link's capacity, less EdgeHeadroom, among those pairs by weighted
// max-min, with RA's weights (the pairs' guarantees, or BestEffortWeight)
// and the demands GP would estimate, and each pair's RA rate is capped at
// the smaller of its two shares (never below its guarantee). The
// destination sends its share with the remote guarantee.
//
// The guarantees of the pairs on a link sum to at most the link (hoses
// are admitted with headroom), so each share is at least the pair's
// guarantee when the guarantees are what GP gives; the ceiling only
// divides the spare. RA keeps probing the network's core by losses under
// the ceilings.

// edgeCeilings computes the ceilings of the pairs that cross this host's
// access link (see above); with EdgeCeiling off, or the link's capacity
// unknown, every pair's ceiling is cleared. It runs before GP resets the
// pairs' peaks. A pair that sent nothing in this step (now) has stopped:
// it is counted at zero (its peak is from before it stopped).
func (a *Agent) edgeCeilings(now time.Duration) {
	link := a.env.HostLinks[a.env.Host]
	on := a.cfg.EdgeCeiling && link > 0 && !math.IsInf(link, 0)
	capacity := link * (1 - a.cfg.EdgeHeadroom)
	m := 1 + a.cfg.Margin

	outs := a.edgeOuts[:0]
	for _, p := range a.outList {
		p.ceiling = 0
		if on && !p.local {
			outs = append(outs, p)
		}
	}
	weights := grow(&a.weights, len(outs))
	demands := grow(&a.demands, len(outs))
	for k, p := range outs {
		weights[k] = a.raWeight(&p.end, p.guarantee())
		switch {
		case p.last < now:
			// It stopped sending.
			demands[k] = 0
		case !p.held:
			// It did not use its limit: what it sent.
			demands[k] = p.peak
		default:
			// Held back by its limiter: room to grow from RA's rate,
			// and no more than the destination's ceiling, so that what
			// the destination does not give it goes to the other pairs
			// on this link.
			demands[k] = p.flow.Rate * m * m
			if p.remoteCeiling > 0 {
				demands[k] = math.Min(demands[k], p.remoteCeiling)
			}
		}
	}
	shares := grow(&a.shares, len(outs))
	level := a.mm.weighted(capacity, weights, demands, shares)
	for k, p := range outs {
		p.ceiling = ceiling(capacity, level, weights[k], shares[k], demands[k], a.cfg.RA.MinRate)
	}

	ins := a.edgeIns[:0]
	for _, p := range a.inList {
		h := p.srcHost
		if on && h != "" && h != a.env.Host {
			ins = append(ins, p)
			continue
		}
		p.ceiling = 0
	}
	weights = grow(&a.weights, len(ins))
	demands = grow(&a.demands, len(ins))
	for k, p := range ins {
		weights[k] = a.raWeight(&p.end, p.share)
		// A pair that came close to its last ceiling may want more; a
		// pair not yet given one is taken to.
		switch {
		case p.last < now:
			// It stopped sending.
			demands[k] = 0
		case p.ceiling > 0 && p.peak*m < p.ceiling:
			demands[k] = p.peak
		default:
			demands[k] = math.Inf(1)
		}
	}
	shares = grow(&a.shares, len(ins))
	level = a.mm.weighted(capacity, weights, demands, shares)
	for k, p := range ins {
		p.ceiling = ceiling(capacity, level, weights[k], shares[k], demands[k], a.cfg.RA.MinRate)
	}
	// kept for the next GP period, holding no pair
	clear(outs)
	clear(ins)
	a.edgeOuts, a.edgeIns = outs[:0], ins[:0]
}

// ceiling is the ceiling of a pair of the given weight, given share of
// its link's capacity for demand by a split whose fair share per unit of
// weight is level. A pair that did not use its last ceiling (finite
// demand: its peak rate) was counted at what it sent, so that the others
// are not held back by slack it does not use, but may grow at once to
// what it would get if it did (level·weight): a pair that was idle and
// comes back is not held at what it sent while idle. At most the link's
// capacity, at least minRate.
func ceiling(capacity, level, weight, share, demand, minRate float64) float64 {
	if !math.IsInf(demand, 1) {
		share = math.Max(share, math.Min(level*weight, capacity))
	}
	return math.Max(share, minRate)
}

// raWeight is the RA weight of a pair of the given guarantee (see
// allocate).
func (a *Agent) raWeight(e *end, guarantee float64) float64 {
	if e.bestEffort {
		return ra.Weight(a.cfg.BestEffortWeight, &a.cfg.RA)
	}
	return ra.Weight(guarantee, &a.cfg.RA)
}

// edgeCeiling is the cap on a pair's RA rate: the smaller of its shares
// of the two access links (none if neither is known), never below floor
// (its guarantee) or RA's MinRate.
func (p *outPair) edgeCeiling(floor float64) float64 {
	ceil := math.Inf(1)
	if p.ceiling > 0 {
		ceil = p.ceiling
	}
	if p.remoteCeiling > 0 {
		ceil = math.Min(ceil, p.remoteCeiling)
	}
	return math.Max(ceil, floor)
}

// WeightedMaxMin writes to out the weighted max-min split of capacity
// among demands (each ≥ 0, +Inf for unbounded) with weights (each > 0):
// every demand below its weighted fair share is met and the rest share
// what is left in proportion to their weights. The sum of out is
// min(capacity, Σ demands). out must be as long as demands. It returns the
// fair share per unit of weight of the pairs whose demands were not met
// (+Inf if every demand was met).
func WeightedMaxMin(capacity float64, weights, demands, out []float64) (level float64) {
	var m maxMinScratch
	return m.weighted(capacity, weights, demands, out)
}

// maxMinScratch is the storage WeightedMaxMin and MaxMin need, kept by an
// agent from step to step.
type maxMinScratch struct {
	idx  []int
	norm []float64
	ones []float64
}

// weighted is WeightedMaxMin over m's storage.
func (m *maxMinScratch) weighted(capacity float64, weights, demands, out []float64) (level float64) {
	n := len(demands)
	if cap(m.idx) < n {
		m.idx = make([]int, n)
		m.norm = make([]float64, n)
	}
	idx, norm := m.idx[:n], m.norm[:n]
	nan := false
	for i := range idx {
		idx[i] = i
		norm[i] = math.Max(demands[i], 0) / weights[i]
		nan = nan || math.IsNaN(norm[i])
	}
	sortByNorm(idx, norm, nan)
	left := math.Max(capacity, 0)
	wsum := 0.0
	for _, i := range idx {
		wsum += weights[i]
	}
	for k, i := range idx {
		fair := left / wsum
		if norm[i] <= fair {
			out[i] = math.Max(demands[i], 0)
			left -= out[i]
			wsum -= weights[i]
			continue
		}
		for _, j := range idx[k:] {
			out[j] = fair * weights[j]
		}
		return fair
	}
	return math.Inf(1)
}

// equal is MaxMin over m's storage.
func (m *maxMinScratch) equal(capacity float64, demands, out []float64) {
	for len(m.ones) < len(demands) {
		m.ones = append(m.ones, 1)
	}
	m.weighted(capacity, m.ones[:len(demands)], demands, out)
}

// sortByNorm sorts idx (the positions 0, 1, … of norm, in order) stably
// by norm; hasNaN says whether norm holds a NaN.
func sortByNorm(idx []int, norm []float64, hasNaN bool) {
	if hasNaN {
		// A stable sort by norm: the algorithm of sort.SliceStable,
		// which asks only whether one is less than the other (a NaN is
		// neither, and where it ends depends on the algorithm).
		slices.SortStableFunc(idx, func(i, j int) int {
			if norm[i] < norm[j] {
				return -1
			}
			return 0
		})
	} else {
		// The same order, found faster: with no NaN, "less" orders the
		// norms strictly and weakly, and the stable order is the one by
		// norm, then by position.
		slices.SortFunc(idx, func(i, j int) int {
			if norm[i] < norm[j] {
				return -1
			}
			if norm[j] < norm[i] {
				return 1
			}
			return i - j
		})
	}
}
