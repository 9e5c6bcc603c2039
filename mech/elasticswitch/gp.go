package elasticswitch

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// MaxMin writes to out the max-min split of capacity among demands (each
// ≥ 0, +Inf for unbounded): every demand below the fair share is met and
// the rest share what is left equally (§4, "GP in a static context"). The
// sum of out is min(capacity, Σ demands). out must be as long as demands.
// It is WeightedMaxMin with equal weights.
func MaxMin(capacity float64, demands, out []float64) {
	var m maxMinScratch
	m.equal(capacity, demands, out)
}

// estimate returns a pair end's demand estimate for the next GP period from
// its peak rate over the last one, and classifies it (§4, "GP in a dynamic
// context"):
//
//   - a pair that did not use its share (peak·(1+margin) < share, or sent
//     nothing) is bounded, with demand peak·(1+margin)², unless it is new
//     and was seen for less than a GP period (it then keeps its share and
//     stays growing: §4 gives a new pair "a small value" until GP has
//     measured it, and a partial first period would underestimate it);
//     at the source, a
//     pair its limiter held back did use it, whatever its rate (the limit
//     may be the destination's smaller share, which the source adopts only
//     if the destination deems the pair unbounded);
//   - a pair already unbounded that used its share stays unbounded (+Inf);
//   - any other pair that used its share (new, or bounded whose demand
//     grew) grows: demand Growth × its share (at least Initial), which the
//     max-min caps at the fair share of the unbounded pairs; a growing
//     pair so capped becomes unbounded (see divide).
func (a *Agent) estimate(e *end, now time.Duration) float64 {
	m := 1 + a.cfg.Margin
	if !(e.peak > 0) || e.peak*m < e.share && !e.held {
		if e.state == growing && now-e.since < a.cfg.GPPeriod {
			// Seen for less than a GP period (its first period is
			// partial): too soon to deem it bounded, which would give it
			// the rest of the hose if all its VM's pairs were bounded.
			// It keeps its small guarantee.
			return e.share
		}
		e.state = bounded
		return e.peak * m * m
	}
	if e.state == unbounded {
		return math.Inf(1)
	}
	e.state = growing
	return a.cfg.Growth * math.Max(e.share, a.cfg.Initial)
}

// divide sets the shares of one VM's pairs on one side (its out- or
// in-hose of capacity hose) from their demands: max-min, then, if every
// pair is bounded, the unallocated rest shared in proportion to the
// demands (equally if all are zero) so that the whole guarantee is
// allocated (§4). Growing pairs the max-min capped become unbounded. Peaks
// are reset for the next period.
func (a *Agent) divide(hose float64, ends []*end, demands []float64) {
	shares := a.split(hose, ends, demands)
	for i, e := range ends {
		if e.state == growing && shares[i] < demands[i]*(1-1e-9) {
			e.state = unbounded
		}
		e.share, e.demand, e.early = shares[i], demands[i], false
		e.peak, e.held = 0, false
	}
}

// split returns the shares of one VM's pairs on one side (hose capacity)
// for their demands: max-min, then, if every pair is bounded, the
// unallocated rest shared in proportion to the demands (equally if all
// are zero) so that the whole guarantee is allocated (§4). The result sums
// to at most hose. It changes no state.
func (a *Agent) split(hose float64, ends []*end, demands []float64) []float64 {
	shares := grow(&a.shares, len(ends))
	a.mm.equal(hose, demands, shares)
	allBounded := true
	sumShare, sumDemand := 0.0, 0.0
	for i, e := range ends {
		if e.state != bounded {
			allBounded = false
		}
		sumShare += shares[i]
		sumDemand += demands[i]
	}
	if rest := hose - sumShare; allBounded && rest > 0 {
		for i := range ends {
			if sumDemand > 0 {
				shares[i] += rest * demands[i] / sumDemand
			} else {
				shares[i] += rest / float64(len(ends))
			}
		}
	}
	return shares
}

func grow(s *[]float64, n int) []float64 {
	if cap(*s) < n {
		*s = make([]float64, n)
	}
	*s = (*s)[:n]
	return *s
}

// runs calls fn with every run of consecutive items of list that have
// the same key (the pair lists are sorted by their local VM), in order.
func runs[T any, K comparable](list []T, key func(T) K, fn func(key K, run []T)) {
	for i := 0; i < len(list); {
		k := key(list[i])
		j := i + 1
		for j < len(list) && key(list[j]) == k {
			j++
		}
		fn(k, list[i:j])
		i = j
	}
}

// partition runs GP (§4) for every VM on this host, both sides, and
// returns the remote-guarantee messages for the source hosts of the pairs
// received here (one message per host, in host order). Pairs between two
// VMs of this host take the destination's share directly.
func (a *Agent) partition(now time.Duration) []mech.Message {
	var ends []*end
	// Out side: outList is sorted by source VM.
	runs(a.outList, func(p *outPair) int32 { return p.srcVM }, func(src int32, run []*outPair) {
		ends = ends[:0]
		demands := grow(&a.demands, len(run))
		for k, p := range run {
			ends = append(ends, &p.end)
			if p.remoteKnown && p.remoteUnbounded && p.remote <= p.share && p.peak > 0 {
				// Weak interdependence (§4): the destination gives the
				// unbounded pair no more than we do; deem its demand the
				// destination's guarantee.
				p.state = bounded
				demands[k] = p.remote
				continue
			}
			demands[k] = a.estimate(&p.end, now)
		}
		a.divide(a.vms[src].Out, ends, demands)
	})
	// In side: inList is sorted by destination VM.
	runs(a.inList, func(p *inPair) int32 { return p.dstVM }, func(dst int32, run []*inPair) {
		ends = ends[:0]
		demands := grow(&a.demands, len(run))
		for k, p := range run {
			ends = append(ends, &p.end)
			demands[k] = a.estimate(&p.end, now)
		}
		a.divide(a.vms[dst].In, ends, demands)
	})
	return a.remoteGuarantees(nil)
}

// remoteGuarantees returns the remote-guarantee messages for the source
// hosts of the pairs received here that only selects (all if nil), one
// message per host, in host order; pairs whose source is on this host
// take the share directly.
func (a *Agent) remoteGuarantees(only func(*inPair) bool) []mech.Message {
	// The source host of every pair a message names (-1: none), hosts in
	// order of first appearance, and how many pairs each message names.
	byHost := map[string]int{}
	var hosts []string
	var count []int
	to := a.to[:0]
	for _, p := range a.inList {
		k := -1
		if only == nil || only(p) {
			switch h := p.srcHost; h {
			case "":
			case a.env.Host:
				if o := a.twin(p); o != nil {
					o.remote, o.remoteUnbounded, o.remoteKnown = p.share, p.state == unbounded, true
				}
			default:
				var ok bool
				if k, ok = byHost[h]; !ok {
					k = len(hosts)
					byHost[h] = k
					hosts = append(hosts, h)
					count = append(count, 0)
				}
				count[k]++
			}
		}
		to = append(to, k)
	}
	a.to = to
	if len(hosts) == 0 {
		return nil
	}
	// One array for every message's pairs, each message its own part of
	// it (in inList order).
	start := make([]int, len(hosts))
	n := 0
	for k, c := range count {
		start[k] = n
		n += c
	}
	all := make([]RemoteGuarantee, n)
	fill := slices.Clone(start)
	for i, p := range a.inList {
		if k := to[i]; k >= 0 {
			all[fill[k]] = RemoteGuarantee{Src: p.id.Src, Dst: p.id.Dst, Share: p.share, Unbounded: p.state == unbounded, Ceiling: p.ceiling}
			fill[k]++
		}
	}
	msgs := make([]mech.Message, len(hosts))
	for k, h := range hosts {
		end := start[k] + count[k]
		msgs[k] = mech.Message{To: h, Body: Guarantees{Pairs: all[start[k]:end:end]}}
	}
	slices.SortFunc(msgs, func(x, y mech.Message) int { return strings.Compare(x.To, y.To) })
	return msgs
}

// twin returns the pair p at its source (on this host; nil: not known
// there), looked up once until a pair is forgotten.
func (a *Agent) twin(p *inPair) *outPair {
	if p.twin != nil && p.twinGen == a.hintGen {
		return p.twin
	}
	o := a.out[p.id]
	p.twin, p.twinGen = o, a.hintGen
	return o
}
