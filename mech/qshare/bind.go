package qshare

import (
	"math"
	"math/bits"
	"math/rand"
	"slices"
	"sort"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// Binder is QShare's tenant-queue binding state (§5.3, Alg. 2) over a set
// of links, each with a number of WFQ queues, and tenants, each with a
// tenant routing tree (TR): the links it has a reservation on. Queue 0 of
// every link is the shared queue; the others are dedicated queues, each
// held by at most one tenant. A tenant is dedicated (a D-tenant) only when
// it holds a dedicated queue on every link of its TR; otherwise it is
// served in the shared queue on all of them.
//
// A Binder is plain data and logic: the controller drives it from
// measurements, the large-scale analysis (Table 1, Fig. 10) from a
// placement. It is not safe for concurrent use.
type Binder struct {
	queues []int       // per link: queues of its port (0: none)
	hold   [][]int     // per link: tenant holding each queue (-1 free), len = queues
	free   []int       // per link: free dedicated queues
	trs    [][]int     // per tenant: links of its TR, sorted
	res    [][]float64 // per tenant: reservation on each TR link (bits/s)
	qix    [][]int     // per tenant: its queue on each TR link (0: shared)
	ded    []bool
	dscp   []int    // per tenant: code point (0: shared)
	used   []uint64 // per link: code points of its D-tenants (bit set)

	order []int     // scratch
	rank  []int     // scratch: tie-break rank per tenant
	vict  []int     // scratch
	score []float64 // scores of the last Bind
}

// NewBinder returns a binder with every tenant in the shared queue.
// queues[l] is the number of WFQ queues of link l's port; trs[t] the links
// of tenant t's TR and res[t] its reservation on each (parallel to trs[t]).
func NewBinder(queues []int, trs [][]int, res [][]float64) *Binder {
	b := &Binder{
		queues: queues,
		hold:   make([][]int, len(queues)),
		free:   make([]int, len(queues)),
		trs:    trs,
		res:    res,
		qix:    make([][]int, len(trs)),
		ded:    make([]bool, len(trs)),
		dscp:   make([]int, len(trs)),
		used:   make([]uint64, len(queues)),
		rank:   make([]int, len(trs)),
	}
	for l, q := range queues {
		b.hold[l] = make([]int, max(q, 1))
		for k := range b.hold[l] {
			b.hold[l][k] = -1
		}
		b.free[l] = max(q-1, 0)
	}
	for t := range trs {
		b.qix[t] = make([]int, len(trs[t]))
	}
	return b
}

// Dedicated reports whether tenant t holds dedicated queues.
func (b *Binder) Dedicated(t int) bool { return b.ded[t] }

// DSCP returns tenant t's code point (0 for the shared queue).
func (b *Binder) DSCP(t int) int { return b.dscp[t] }

// Tenants returns the number of tenants.
func (b *Binder) Tenants() int { return len(b.trs) }

// TR returns the links of tenant t's TR.
func (b *Binder) TR(t int) []int { return b.trs[t] }

// Bind runs one round of Alg. 2 on the tenants' scores: tenants are taken in
// decreasing score (ties broken at random with rng); a tenant holding
// dedicated queues keeps them; one in the shared queue gets a spare queue
// on every link of its TR that has one and, on every link that has none,
// pre-empts the holder with the lowest score there if that score is below
// its own (opportunistically_enqueue). If some link has neither, it stays
// in the shared queue. Pre-empted tenants go back to the shared queue.
// Bind then colours the D-tenants with DSCP code points (Colour). It
// returns the number of tenants whose binding changed.
func (b *Binder) Bind(scores []float64, rng *rand.Rand) int {
	n := len(b.trs)
	b.score = scores
	b.order = b.order[:0]
	for t := 0; t < n; t++ {
		b.order = append(b.order, t)
	}
	for i, p := range rng.Perm(n) {
		b.rank[i] = p
	}
	sort.Slice(b.order, func(i, j int) bool {
		x, y := b.order[i], b.order[j]
		if scores[x] != scores[y] {
			return scores[x] > scores[y]
		}
		return b.rank[x] < b.rank[y]
	})
	before := slices.Clone(b.ded)
	for _, t := range b.order {
		if len(b.trs[t]) == 0 {
			// No link to share: dedicated, vacuously, on every link of
			// its (empty) TR.
			b.ded[t] = true
			continue
		}
		if b.ded[t] {
			continue
		}
		b.vict = b.vict[:0]
		ok := true
		for _, l := range b.trs[t] {
			if b.free[l] > 0 {
				continue
			}
			v := b.lowest(l)
			if v < 0 || !(scores[v] < scores[t]) {
				ok = false
				break
			}
			if !slices.Contains(b.vict, v) {
				b.vict = append(b.vict, v)
			}
		}
		if !ok {
			continue
		}
		for _, v := range b.vict {
			b.release(v)
		}
		b.enqueue(t)
	}
	b.Colour()
	changed := 0
	for t := range b.ded {
		if b.ded[t] != before[t] {
			changed++
		}
	}
	return changed
}

// lowest returns the holder of a dedicated queue on link l with the lowest
// score (the lowest-scored tenant, LST), -1 if none.
func (b *Binder) lowest(l int) int {
	v := -1
	for _, t := range b.hold[l][1:] {
		if t >= 0 && (v < 0 || b.score[t] < b.score[v] || (b.score[t] == b.score[v] && b.rank[t] > b.rank[v])) {
			v = t
		}
	}
	return v
}

// enqueue gives t the lowest free dedicated queue on every link of its TR
// (every link must have one).
func (b *Binder) enqueue(t int) {
	for k, l := range b.trs[t] {
		for q := 1; q < len(b.hold[l]); q++ {
			if b.hold[l][q] < 0 {
				b.hold[l][q] = t
				b.qix[t][k] = q
				b.free[l]--
				break
			}
		}
	}
	b.ded[t] = true
}

// release puts t back into the shared queue on every link.
func (b *Binder) release(t int) {
	for k, l := range b.trs[t] {
		if q := b.qix[t][k]; q > 0 {
			b.hold[l][q] = -1
			b.qix[t][k] = 0
			b.free[l]++
		}
	}
	b.ded[t] = false
	b.dscp[t] = 0
}

// Colour assigns DSCP code points to the D-tenants (§5.4): D-tenants whose
// TRs share a link need different code points, code point 0 is the shared
// queue's, so 63 are available. Greedily, in the order of the last Bind
// (highest score first): a tenant keeps its code point if no tenant
// coloured before it on a common link took it, else it takes the smallest
// code point not used on any link of its TR. A D-tenant for which no code
// point is left cannot be told apart on some port and goes back to the
// shared queue. It returns the number of tenants so demoted.
func (b *Binder) Colour() int {
	for l := range b.used {
		b.used[l] = 0
	}
	order := b.order
	if len(order) != len(b.trs) {
		order = make([]int, len(b.trs))
		for t := range order {
			order[t] = t
		}
	}
	demoted := 0
	for _, t := range order {
		if !b.ded[t] || len(b.trs[t]) == 0 {
			b.dscp[t] = 0
			continue
		}
		var taken uint64 = 1 // code point 0 is the shared queue's
		for _, l := range b.trs[t] {
			taken |= b.used[l]
		}
		d := b.dscp[t]
		if d == 0 || taken&(1<<uint(d)) != 0 {
			d = bits.TrailingZeros64(^taken)
			if d > mech.MaxDSCP {
				b.dscp[t] = 0
				b.release(t)
				demoted++
				continue
			}
		}
		b.dscp[t] = d
		for _, l := range b.trs[t] {
			b.used[l] |= 1 << uint(d)
		}
	}
	return demoted
}

// CodePoints returns the number of distinct code points the D-tenants use.
func (b *Binder) CodePoints() int {
	var all uint64
	for t, d := range b.dscp {
		if b.ded[t] && d > 0 {
			all |= 1 << uint(d)
		}
	}
	return bits.OnesCount64(all)
}

// Weights returns the WFQ weights of link l's queues (§5.3, "queue weight
// computation"): a queue's weight is its share of the bandwidth reserved on
// the link — a dedicated queue its holder's reservation, the shared queue
// the reservations of every tenant on the link without a dedicated queue —
// over the link's total reservation. With maxWeight > 0 the port takes
// integer weights in [1, maxWeight]: the shares are scaled so that the
// largest becomes maxWeight and rounded, a nonzero share to at least 1.
// A queue with no reservation (a free queue, or the shared queue when every
// tenant on the link is dedicated) gets the smallest weight. The slice is
// as long as the highest queue in use plus one; nil when no tenant holds a
// dedicated queue on the link (the port is one FIFO).
func (b *Binder) Weights(l int, reserved map[int]float64, maxWeight int) []float64 {
	top := 0
	for q := 1; q < len(b.hold[l]); q++ {
		if b.hold[l][q] >= 0 {
			top = q
		}
	}
	if top == 0 {
		return nil
	}
	w := make([]float64, top+1)
	total := 0.0
	for t, r := range reserved {
		total += r
		w[b.queueOn(t, l)] += r
	}
	if !(total > 0) {
		for q := range w {
			w[q] = 1
		}
		return w
	}
	hi := 0.0
	for q := range w {
		w[q] /= total
		hi = math.Max(hi, w[q])
	}
	const minShare = 1e-3
	for q := range w {
		switch {
		case maxWeight > 0:
			w[q] = math.Max(1, math.Round(w[q]/hi*float64(maxWeight)))
		case w[q] < minShare*hi:
			w[q] = minShare * hi
		}
	}
	return w
}

// queueOn returns t's queue on link l (0: shared).
func (b *Binder) queueOn(t, l int) int {
	k, ok := slices.BinarySearch(b.trs[t], l)
	if !ok {
		return 0
	}
	return b.qix[t][k]
}

// Holders returns link l's dedicated queue holders: queue → tenant (nil
// when none).
func (b *Binder) Holders(l int) []int { return b.hold[l] }
