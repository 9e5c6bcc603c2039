package tokenbucket

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Request is one request of a flow, as a Multi sees it.
type Request struct {
	// Cost holds the tokens the request takes on each resource of the
	// flow's path (len = Multi.Resources(), entries finite and >= 0; Pulsar
	// derives them with the resources' cost functions). The Multi keeps a
	// reference while the request is queued: do not modify it until the
	// request has been released.
	Cost []float64
	// ID and Data are the caller's; the Multi hands them back untouched.
	// (A pointer in Data does not allocate.)
	ID   uint64
	Data any
}

// Stats are a flow's enforcement statistics over a period: the inputs of
// Pulsar's demand estimation (§4.2), all in tokens per resource.
type Stats struct {
	// Start and End delimit the period: from the previous Stats call (or
	// NewMulti) to this one.
	Start, End time.Time
	// Used is u_f: the tokens debited for requests let through in the period.
	// Used[r] / End.Sub(Start).Seconds() is the utilization in tokens/s.
	Used []float64
	// Backlog is b_f: the tokens of the requests still queued at End.
	Backlog []float64
	// AvgQueued is q_f: the time average of the queued tokens over the
	// period (the integral of the piecewise-constant backlog divided by the
	// period's length; the backlog at End for an empty period).
	AvgQueued []float64
	// Offered counts the requests offered (Offer and Wait) in the period,
	// Passed those let through (including earlier arrivals).
	Offered, Passed uint64
}

type waiter struct {
	ch       chan struct{} // buffered (1): released, or asked to re-check
	released bool          // guarded by Multi.mu
}

type entry struct {
	req Request
	w   *waiter // nil for a request queued by Offer
}

// Multi is Pulsar's multi-resource token bucket (§4.4) for one flow: one
// bucket per resource on the flow's path, each refilled at the flow's
// allocation for that resource. A request passes only when every bucket
// holds its cost on that resource, and then all buckets are debited at
// once; otherwise it waits in a FIFO queue, and a queued request holds back
// every later one (head of line).
//
// A request whose cost on some resource exceeds that bucket's depth passes
// once that bucket is full and the other buckets hold their costs; the
// bucket then goes into debt (see the package documentation). A cost > 0 on
// a resource at rate 0 waits until SetRates gives the resource a rate.
//
// A Multi is safe for concurrent use. Offer, Release and the accessors do not
// allocate once the queue has grown to its working size.
type Multi struct {
	mu    sync.Mutex
	clock Clock
	tick  ticker
	burst time.Duration
	lanes []lane

	// FIFO ring of queued requests: q[(head+i)&(len(q)-1)], i < n.
	q       []entry
	head, n int
	waiters int       // queued entries that belong to Wait calls
	queued  []float64 // b_f: sum of the costs of the queued requests
	ready   []Request // offered requests let through by a Wait, for Release

	// statistics since start
	start   time.Time
	last    time.Time // time up to which area is integrated
	area    []float64 // ∫ queued dt in token·ns
	used    []float64
	offered uint64
	passed  uint64
}

// NewMulti returns a Multi over len(rates) resources (at least one), rates in
// tokens/s, each bucket full with depth rate × burst. A nil clock means
// RealClock{}; Wait needs a TimerClock.
func NewMulti(clock Clock, rates []float64, opts ...Option) (*Multi, error) {
	c, err := buildConfig("NewMulti", opts)
	if err != nil {
		return nil, err
	}
	if len(rates) == 0 {
		return nil, fmt.Errorf("tokenbucket: NewMulti: no resources: %w", ErrInvalid)
	}
	if err := checkRates("NewMulti", rates, len(rates)); err != nil {
		return nil, err
	}
	if clock == nil {
		clock = RealClock{}
	}
	k := len(rates)
	now := clock.Now()
	m := &Multi{
		clock:  clock,
		tick:   ticker{epoch: now, interval: c.interval},
		burst:  c.burst,
		lanes:  make([]lane, k),
		queued: make([]float64, k),
		start:  now,
		last:   now,
		area:   make([]float64, k),
		used:   make([]float64, k),
	}
	for r, rate := range rates {
		depth := rate * c.burst.Seconds()
		m.lanes[r].set(rate, depth, c.interval)
		m.lanes[r].tokens = depth
	}
	return m, nil
}

func checkRates(fn string, rates []float64, k int) error {
	if len(rates) != k {
		return fmt.Errorf("tokenbucket: %s: %d rates for %d resources: %w", fn, len(rates), k, ErrInvalid)
	}
	for r, x := range rates {
		if !validAmount(x) {
			return fmt.Errorf("tokenbucket: %s: resource %d: rate %v: %w", fn, r, x, ErrInvalid)
		}
	}
	return nil
}

func (m *Multi) checkCost(fn string, cost []float64) error {
	if len(cost) != len(m.lanes) {
		return fmt.Errorf("tokenbucket: %s: cost has %d entries for %d resources: %w", fn, len(cost), len(m.lanes), ErrInvalid)
	}
	for r, x := range cost {
		if !validAmount(x) {
			return fmt.Errorf("tokenbucket: %s: resource %d: cost %v: %w", fn, r, x, ErrInvalid)
		}
	}
	return nil
}

// Resources returns the number of resources (buckets).
func (m *Multi) Resources() int { return len(m.lanes) }

// Interval returns the refill interval.
func (m *Multi) Interval() time.Duration { return m.tick.interval }

// SetRates sets each bucket's rate (tokens/s) and depth (rate × burst), as
// Bucket.SetRate does: tokens accrued up to the last refill boundary at the
// old rates are kept, capped at the new depths (a debt is kept as it is).
// Queued requests are not released here; a Wait in progress re-plans.
func (m *Multi) SetRates(rates []float64) error {
	if err := checkRates("SetRates", rates, len(m.lanes)); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refill(m.clock.Now())
	for r, rate := range rates {
		m.lanes[r].set(rate, rate*m.burst.Seconds(), m.tick.interval)
	}
	m.nudgeFirstWaiter()
	return nil
}

// Rates returns the buckets' rates in tokens/s.
func (m *Multi) Rates() []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]float64, len(m.lanes))
	for r := range m.lanes {
		out[r] = m.lanes[r].rate
	}
	return out
}

// Depths returns the buckets' depths in tokens.
func (m *Multi) Depths() []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]float64, len(m.lanes))
	for r := range m.lanes {
		out[r] = m.lanes[r].depth
	}
	return out
}

// Available returns the tokens each bucket holds now (negative while an
// oversized request is being repaid).
func (m *Multi) Available() []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refill(m.clock.Now())
	out := make([]float64, len(m.lanes))
	for r := range m.lanes {
		out[r] = m.lanes[r].tokens
	}
	return out
}

// Offer submits a request. If nothing is queued and every bucket holds the
// request's cost, all buckets are debited and Offer returns true: the caller
// sends the request now. Otherwise the request joins the FIFO queue and Offer
// returns false; Release hands it back once it may pass (NextRelease says
// when). An invalid cost vector is an error and changes nothing.
func (m *Multi) Offer(req Request) (bool, error) {
	if err := m.checkCost("Offer", req.Cost); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	m.offered++
	if m.n == 0 && m.tryPass(now, req.Cost) {
		return true, nil
	}
	m.enqueue(now, entry{req: req})
	return false, nil
}

// TryTake is Offer's fast path for a caller that reads the Multi's clock
// itself (now must come from it): if nothing is queued and every bucket
// holds cost, all buckets are debited and TryTake returns true, counted as
// an offered request let through, exactly as Offer does. Otherwise it
// returns false and changes nothing (the request is neither queued nor
// counted): the caller then Offers it. The Multi keeps no reference to
// cost, which may live on the caller's stack.
func (m *Multi) TryTake(now time.Time, cost []float64) (bool, error) {
	if err := m.checkCost("TryTake", cost); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n != 0 || !m.tryPass(now, cost) {
		return false, nil
	}
	m.offered++
	return true, nil
}

// Release appends to dst, in FIFO order, the queued requests that may pass
// now (debiting the buckets for each) and returns the extended slice; the
// head of the queue that does not fit stops it. Requests that a concurrent
// Wait let through on the way to its own come first. Pass a reused dst[:0]
// to avoid allocation.
func (m *Multi) Release(dst []Request) []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.ready) > 0 {
		dst = append(dst, m.ready...)
		clear(m.ready)
		m.ready = m.ready[:0]
	}
	return m.process(m.clock.Now(), dst)
}

// NextRelease returns how long from now until the head of the queue may pass
// if the rates do not change (0: Release would return something now, which
// includes requests a Wait already let through). It returns false when
// Release has nothing to return and the queue is empty or its head waits on
// a resource at rate 0.
func (m *Multi) NextRelease() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.ready) > 0 {
		return 0, true
	}
	if m.n == 0 {
		return 0, false
	}
	now := m.clock.Now()
	m.refill(now)
	return m.headDelay(now)
}

// Queued returns the number of queued requests.
func (m *Multi) Queued() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// QueuedCost returns the backlog vector, Pulsar's b_f: the sum of the costs
// of the queued requests, per resource.
func (m *Multi) QueuedCost() []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]float64(nil), m.queued...)
}

// Refund gives back tokens a request was charged beyond what it turned
// out to cost (an estimate that was too high), per resource: each bucket
// gets them back up to its depth, they no longer count as used, and
// queued requests the buckets now admit pass. Amounts must be finite and
// non-negative.
func (m *Multi) Refund(tokens []float64) error {
	if err := m.checkCost("Refund", tokens); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refill(m.clock.Now())
	for r, c := range tokens {
		l := &m.lanes[r]
		l.tokens = math.Min(l.depth, l.tokens+c)
		m.used[r] = math.Max(0, m.used[r]-c)
	}
	m.nudgeFirstWaiter()
	return nil
}

// Stats returns the statistics of the period since the previous Stats call
// (or NewMulti) and starts a new period.
func (m *Multi) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	m.integrate(now)
	k := len(m.lanes)
	s := Stats{
		Start:     m.start,
		End:       now,
		Used:      append(make([]float64, 0, k), m.used...),
		Backlog:   append(make([]float64, 0, k), m.queued...),
		AvgQueued: make([]float64, k),
		Offered:   m.offered,
		Passed:    m.passed,
	}
	if span := now.Sub(m.start); span > 0 {
		for r := range s.AvgQueued {
			s.AvgQueued[r] = m.area[r] / float64(span)
		}
	} else {
		copy(s.AvgQueued, m.queued)
	}
	m.start = now
	clear(m.area)
	clear(m.used)
	m.offered, m.passed = 0, 0
	return s
}

// Wait blocks until req passes (the buckets are then debited: send it) or
// ctx is done (req is then withdrawn from the queue and the error wraps
// ctx.Err(); a request already let through returns nil). It queues behind
// earlier requests like Offer. The Multi's clock must be a TimerClock; with a
// FakeClock, Advance wakes the waiter (BlockUntilTimers tells when it sleeps).
func (m *Multi) Wait(ctx context.Context, req Request) error {
	tc, ok := m.clock.(TimerClock)
	if !ok {
		return fmt.Errorf("tokenbucket: Wait: clock %T: %w", m.clock, ErrNoTimer)
	}
	if err := m.checkCost("Wait", req.Cost); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("tokenbucket: Wait: %w", err)
	}
	m.mu.Lock()
	now := m.clock.Now()
	m.offered++
	if m.n == 0 && m.tryPass(now, req.Cost) {
		m.mu.Unlock()
		return nil
	}
	w := &waiter{ch: make(chan struct{}, 1)}
	m.enqueue(now, entry{req: req, w: w})
	for {
		// Holding m.mu.
		m.ready = m.process(now, m.ready)
		if w.released {
			m.mu.Unlock()
			return nil
		}
		// Only the first waiter in the queue times the head; the others
		// are nudged when they become first.
		var timer <-chan time.Time
		if m.firstWaiter() == w {
			if d, ok := m.headDelay(now); ok {
				timer = tc.After(d)
			}
		}
		m.mu.Unlock()
		select {
		case <-w.ch:
		case <-timer:
		case <-ctx.Done():
			m.mu.Lock()
			defer m.mu.Unlock()
			if w.released {
				return nil
			}
			m.remove(m.clock.Now(), w)
			return fmt.Errorf("tokenbucket: Wait: %w", ctx.Err())
		}
		m.mu.Lock()
		now = m.clock.Now()
	}
}

// refill credits the refill boundaries passed by now to every bucket.
func (m *Multi) refill(now time.Time) {
	if s := m.tick.advance(now); s > 0 {
		for r := range m.lanes {
			m.lanes[r].refill(s)
		}
	}
}

// admits reports whether the buckets let a request of this cost through.
func (m *Multi) admits(cost []float64) bool {
	for r, c := range cost {
		l := &m.lanes[r]
		if c <= 0 || fits(l.tokens, c) {
			continue
		}
		if c > l.depth && l.depth > 0 && fits(l.tokens, l.depth) {
			continue // oversized, bucket full: pass into debt
		}
		return false
	}
	return true
}

func (m *Multi) debit(cost []float64) {
	for r, c := range cost {
		m.lanes[r].debit(c)
		m.used[r] += c
	}
	m.passed++
}

// tryPass refills and, if the buckets admit cost, debits them.
func (m *Multi) tryPass(now time.Time, cost []float64) bool {
	m.refill(now)
	if !m.admits(cost) {
		return false
	}
	m.debit(cost)
	return true
}

// headDelay returns the time from now until the head of the (non-empty)
// queue is admitted, false if never at the current rates. The buckets must
// have been refilled at now.
func (m *Multi) headDelay(now time.Time) (time.Duration, bool) {
	cost := m.q[m.head].req.Cost
	var steps int64
	for r, c := range cost {
		if c <= 0 {
			continue
		}
		l := &m.lanes[r]
		target := c
		if c > l.depth {
			if l.depth <= 0 {
				return 0, false
			}
			target = l.depth
		}
		s, ok := l.stepsTo(target)
		if !ok {
			return 0, false
		}
		steps = max(steps, s)
	}
	if steps == 0 {
		return 0, true
	}
	return m.tick.after(now, steps), true
}

// integrate adds the backlog held since m.last to the queued-token integral.
func (m *Multi) integrate(now time.Time) {
	if !now.After(m.last) {
		return
	}
	if m.n > 0 {
		dt := float64(now.Sub(m.last))
		for r, x := range m.queued {
			m.area[r] += x * dt
		}
	}
	m.last = now
}

func (m *Multi) enqueue(now time.Time, e entry) {
	m.integrate(now)
	if m.n == len(m.q) {
		m.grow()
	}
	m.q[(m.head+m.n)&(len(m.q)-1)] = e
	m.n++
	for r, c := range e.req.Cost {
		m.queued[r] += c
	}
	if e.w != nil {
		m.waiters++
	}
}

func (m *Multi) grow() {
	q := make([]entry, max(8, 2*len(m.q)))
	for i := 0; i < m.n; i++ {
		q[i] = m.q[(m.head+i)&(len(m.q)-1)]
	}
	m.q, m.head = q, 0
}

// pop removes the head of the queue and returns it.
func (m *Multi) pop() entry {
	e := m.q[m.head]
	m.q[m.head] = entry{}
	m.head = (m.head + 1) & (len(m.q) - 1)
	m.n--
	m.dequeued(e)
	return e
}

// dequeued updates the backlog after e left the queue.
func (m *Multi) dequeued(e entry) {
	if m.n == 0 {
		clear(m.queued) // exact zero, no rounding residue
	} else {
		for r, c := range e.req.Cost {
			m.queued[r] -= c
		}
	}
	if e.w != nil {
		m.waiters--
	}
}

// process lets through, in FIFO order, the queued requests the buckets admit
// at now: offered ones are appended to dst, waiting ones are woken.
func (m *Multi) process(now time.Time, dst []Request) []Request {
	if m.n == 0 {
		return dst
	}
	m.refill(now)
	m.integrate(now)
	released := false
	for m.n > 0 && m.admits(m.q[m.head].req.Cost) {
		e := m.pop()
		m.debit(e.req.Cost)
		released = true
		if e.w != nil {
			e.w.released = true
			notify(e.w)
		} else {
			dst = append(dst, e.req)
		}
	}
	if released {
		m.nudgeFirstWaiter()
	}
	return dst
}

// remove withdraws w's request from the queue.
func (m *Multi) remove(now time.Time, w *waiter) {
	mask := len(m.q) - 1
	for i := 0; i < m.n; i++ {
		if m.q[(m.head+i)&mask].w != w {
			continue
		}
		m.integrate(now)
		e := m.q[(m.head+i)&mask]
		for j := i; j < m.n-1; j++ {
			m.q[(m.head+j)&mask] = m.q[(m.head+j+1)&mask]
		}
		m.q[(m.head+m.n-1)&mask] = entry{}
		m.n--
		m.dequeued(e)
		m.nudgeFirstWaiter() // the queue ahead of it may have changed
		return
	}
}

func (m *Multi) firstWaiter() *waiter {
	if m.waiters == 0 {
		return nil
	}
	mask := len(m.q) - 1
	for i := 0; i < m.n; i++ {
		if w := m.q[(m.head+i)&mask].w; w != nil {
			return w
		}
	}
	return nil
}

func (m *Multi) nudgeFirstWaiter() {
	if w := m.firstWaiter(); w != nil {
		notify(w)
	}
}

func notify(w *waiter) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}
