package pulsar

import (
	"math"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// EstimateDemand computes a flow's demand for the next interval in tokens/s
// per path element from one observation (Pulsar §4.2, eq. 6):
//
//	d = u + max(b/T, q·u/o)        element-wise
//
// where u is FlowObs.Used (tokens/s), b the Backlog, q the average Queued
// and o the average Outstanding tokens, and T the period in seconds. The
// backlog b (tokens still queued at the end of the interval) is spread over
// the next interval, b/T; q·u/o is already a rate (u is). With b alone this
// is the open-loop eq. (4), with q·u/o alone the closed-loop eq. (5).
//
// Guard: where o = 0 (nothing outstanding beyond the enforcer, so u/o is
// undefined) the closed-loop term is q/T: the queued tokens, released at
// once, served within the next interval.
//
// bound says whether the flow's allocation held it back during the period
// (see Bound). A flow that was not held back is not inflated: its demand is
// what it used, d = u (queues at an enforcer that had tokens to spare are
// not unmet demand).
//
// Missing vector entries count as 0. The result is written to dst (grown
// to len(o.Path)) and returned.
func EstimateDemand(o *mech.FlowObs, period float64, bound bool, dst []float64) []float64 {
	n := len(o.Path)
	dst = grow(dst, n)
	if !(period > 0) {
		period = 1
	}
	for e := 0; e < n; e++ {
		u := at(o.Used, e)
		if !bound {
			dst[e] = u
			continue
		}
		b, q, out := at(o.Backlog, e), at(o.Queued, e), at(o.Outstanding, e)
		closed := q / period
		if out > 0 {
			closed = q * u / out
		}
		dst[e] = u + max(b/period, closed)
	}
	return dst
}

// Bound reports whether a flow's limit held it back in the period: on some
// path element with a finite limit, it used at least (1 − tol) of it. The
// limit is o.Allocation, or defaultRate on every element for a flow not yet
// allocated (Allocation nil; defaultRate 0 means unlimited). Elements
// without traffic and without a limit never bind.
func Bound(o *mech.FlowObs, defaultRate, tol float64) bool {
	for e := range o.Path {
		lim := defaultRate
		if o.Allocation != nil {
			lim = at(o.Allocation, e)
		} else if defaultRate <= 0 {
			return false
		}
		if math.IsInf(lim, 1) || math.IsNaN(lim) {
			continue
		}
		if at(o.Used, e) >= (1-tol)*lim {
			if lim > 0 || at(o.Backlog, e) > 0 || at(o.Queued, e) > 0 {
				return true
			}
		}
	}
	return false
}

// Held reports whether the enforcer held the flow back with demand left
// over: Bound, and the estimate d (EstimateDemand with bound = true) above
// what the flow used on some element — requests were queued at the
// enforcer, so the flow's demand is larger than it could show. A flow
// that merely runs at its limit with nothing queued (it wants exactly
// that) is not held.
func Held(o *mech.FlowObs, d []float64, bound bool) bool {
	if !bound {
		return false
	}
	for e := range o.Path {
		if at(d, e) > at(o.Used, e)*(1+1e-9) {
			return true
		}
	}
	return false
}

// QueueFactor is the ratio by which queueing beyond the enforcer hides a
// closed-loop flow's demand: §4.2's closed-loop term generalized to
// requests that wait in a FIFO queue on their way. A flow with out tokens
// outstanding beyond its enforcer (on some element) and q queued at it
// runs at u; its round trip is out/u. Were the delay (seconds of it spent
// queued at appliances) gone and the queued requests released, the same
// window — q + out — would run at (q + out)/(out/u − delay):
//
//	factor = (q + out) / (out − u·delay)
//
// With nothing queued at the enforcer it is the round trip over the round
// trip without the queue; with delay = 0 it would be eq. (5), u·factor =
// u + q·u/out, which EstimateDemand applies. It returns 1 where it does
// not apply (no traffic, nothing outstanding, no delay, or a delay that
// explains the whole round trip).
func QueueFactor(u, q, out, delay float64) float64 {
	if !(u > 0) || !(out > 0) || !(delay > 0) {
		return 1
	}
	rest := out - u*delay
	if !(rest > 0) {
		return 1
	}
	return max(1, (max(q, 0)+out)/rest)
}

func at(v []float64, i int) float64 {
	if i < len(v) {
		x := v[i]
		if math.IsNaN(x) || x < 0 {
			return 0
		}
		return x
	}
	return 0
}

func grow(v []float64, n int) []float64 {
	if cap(v) < n {
		return make([]float64, n)
	}
	return v[:n]
}
