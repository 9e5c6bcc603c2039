// Package tokenbucket holds the rate enforcers of Bulkhead: a single-resource
// token bucket (Bucket) and Pulsar's multi-resource token bucket (Multi,
// Pulsar §4.4), both over an injected Clock.
//
// Refill is discrete, as in Pulsar's enforcer: tokens are added at the
// boundaries of a refill interval (DefaultInterval, 10 ms), rate × interval
// tokens per boundary, never in between; the boundaries are aligned to the
// time the bucket was made. A bucket holds at most its depth, rate × burst
// (DefaultBurst, 1 s: Pulsar's "bucket size = rate × 1 s"), and starts full.
//
// Requests larger than the depth: a Bucket is strict — Take(n) with n above
// the depth never succeeds and TimeUntil reports ErrExceedsDepth. A Multi, the
// enforcer a proxy puts requests through, cannot leave an indivisible request
// stuck at the head of its queue, so it lets a request whose cost exceeds the
// depth of some resource through once that resource's bucket is full (and
// every other bucket holds its cost), and the bucket goes into debt (negative
// tokens) that later refills repay before anything else passes on that
// resource: the long-run rate stays within the allocation, and the burst
// grows by at most one request's excess over the depth.
//
// Token comparisons allow a relative slack of 1e-9 so that float rounding of
// rate × interval sums never holds a request back by one refill step.
//
// Bucket and Multi are safe for concurrent use (each is guarded by a mutex).
//
// Files: clock.go holds Clock, TimerClock, RealClock and FakeClock; bucket.go
// the options, the refill arithmetic and Bucket; multi.go Multi, Request and
// Stats.
package tokenbucket

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

const (
	// DefaultInterval is the refill interval (Pulsar's 10 ms refill).
	DefaultInterval = 10 * time.Millisecond
	// DefaultBurst is the time a bucket takes to fill from empty at its rate:
	// depth = rate × burst (Pulsar's bucket size = rate × 1 s).
	DefaultBurst = time.Second
)

// Errors reported by this package; match them with errors.Is.
var (
	// ErrInvalid reports an invalid argument: a negative, NaN or infinite
	// rate, depth or cost, a cost vector of the wrong length, a
	// non-positive refill interval or burst.
	ErrInvalid = errors.New("invalid argument")
	// ErrExceedsDepth reports a request larger than a Bucket's depth, which
	// a Bucket can never let through.
	ErrExceedsDepth = errors.New("request exceeds bucket depth")
	// ErrNoRefill reports a request that is not available and never will be
	// at the current rate (the rate is 0).
	ErrNoRefill = errors.New("bucket does not refill at rate 0")
	// ErrNoTimer reports a Multi.Wait on a Multi whose Clock is not a
	// TimerClock.
	ErrNoTimer = errors.New("clock cannot wait (not a TimerClock)")
)

// slack is the relative tolerance of token comparisons.
const slack = 1e-9

// Option configures a Bucket or a Multi.
type Option func(*config)

type config struct {
	interval time.Duration
	burst    time.Duration
}

// WithRefillInterval sets the refill interval (default DefaultInterval). It
// must be positive.
func WithRefillInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// WithBurst sets the burst window: depth = rate × d (default DefaultBurst).
// It must be positive.
func WithBurst(d time.Duration) Option { return func(c *config) { c.burst = d } }

func buildConfig(fn string, opts []Option) (config, error) {
	c := config{interval: DefaultInterval, burst: DefaultBurst}
	for _, o := range opts {
		o(&c)
	}
	if c.interval <= 0 {
		return c, fmt.Errorf("tokenbucket: %s: refill interval %v must be positive: %w", fn, c.interval, ErrInvalid)
	}
	if c.burst <= 0 {
		return c, fmt.Errorf("tokenbucket: %s: burst %v must be positive: %w", fn, c.burst, ErrInvalid)
	}
	return c, nil
}

// validAmount reports whether x is a usable rate, depth or cost: finite and
// non-negative.
func validAmount(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// tol is the slack allowed when comparing n tokens.
func tol(n float64) float64 {
	a := math.Abs(n)
	if a < 1 {
		a = 1
	}
	return slack * a
}

// fits reports whether tokens covers n, within the slack.
func fits(tokens, n float64) bool { return n <= tokens || n <= tokens+tol(n) }

// ticker counts the refill boundaries of one bucket (or of the buckets of one
// Multi, which share them).
type ticker struct {
	epoch    time.Time
	interval time.Duration
	step     int64 // boundaries credited so far
}

// advance returns the number of boundaries passed since the last call and
// credits them.
func (t *ticker) advance(now time.Time) int64 {
	s := int64(now.Sub(t.epoch) / t.interval)
	if s <= t.step {
		return 0
	}
	d := s - t.step
	t.step = s
	return d
}

// after returns the time from now until steps more boundaries have passed.
func (t *ticker) after(now time.Time, steps int64) time.Duration {
	return t.epoch.Add(time.Duration(t.step+steps) * t.interval).Sub(now)
}

// lane is the state of one bucket.
type lane struct {
	rate   float64 // tokens per second
	depth  float64 // maximum tokens
	inc    float64 // tokens added per boundary: rate × interval
	tokens float64 // current tokens; negative while an oversized request is repaid
}

func (l *lane) set(rate, depth float64, interval time.Duration) {
	l.rate, l.depth = rate, depth
	l.inc = rate * float64(interval.Nanoseconds()) / 1e9
	l.tokens = math.Min(l.tokens, depth)
}

func (l *lane) refill(steps int64) {
	if steps > 0 && l.tokens < l.depth {
		l.tokens = math.Min(l.depth, l.tokens+float64(steps)*l.inc)
	}
}

// debit takes n tokens; a shortfall within the slack is rounding, not debt.
func (l *lane) debit(n float64) {
	l.tokens -= n
	if l.tokens < 0 && -l.tokens <= tol(n) {
		l.tokens = 0
	}
}

// stepsTo returns how many more boundaries it takes to hold target tokens,
// and false when that never happens at the current rate.
func (l *lane) stepsTo(target float64) (int64, bool) {
	if fits(l.tokens, target) {
		return 0, true
	}
	if l.inc <= 0 {
		return 0, false
	}
	s := math.Ceil((target-l.tokens)/l.inc - slack)
	if s > math.MaxInt32 { // years of refill; treat as never
		return 0, false
	}
	return max(int64(s), 1), true
}

// Bucket is a single-resource token bucket: it holds up to depth tokens and
// gains rate × interval tokens at every refill boundary. It is safe for
// concurrent use.
type Bucket struct {
	mu    sync.Mutex
	clock Clock
	tick  ticker
	burst time.Duration
	l     lane
}

// NewBucket returns a full bucket with the given rate in tokens/s and depth
// rate × burst. A nil clock means RealClock{}.
func NewBucket(clock Clock, rate float64, opts ...Option) (*Bucket, error) {
	c, err := buildConfig("NewBucket", opts)
	if err != nil {
		return nil, err
	}
	if !validAmount(rate) {
		return nil, fmt.Errorf("tokenbucket: NewBucket: rate %v: %w", rate, ErrInvalid)
	}
	if clock == nil {
		clock = RealClock{}
	}
	b := &Bucket{clock: clock, burst: c.burst}
	b.tick = ticker{epoch: clock.Now(), interval: c.interval}
	depth := rate * c.burst.Seconds()
	b.l.set(rate, depth, c.interval)
	b.l.tokens = depth
	return b, nil
}

func (b *Bucket) refillLocked() {
	b.l.refill(b.tick.advance(b.clock.Now()))
}

// Take removes n tokens and returns true if the bucket holds at least n;
// otherwise it changes nothing and returns false. A request larger than the
// depth can never pass (Take always returns false for it; TimeUntil reports
// ErrExceedsDepth), nor can a negative or NaN n.
func (b *Bucket) Take(n float64) bool {
	if !validAmount(n) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	if !fits(b.l.tokens, n) {
		return false
	}
	b.l.debit(n)
	return true
}

// Available returns the tokens the bucket holds now.
func (b *Bucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	return b.l.tokens
}

// TimeUntil returns how long from now until Take(n) would succeed if nothing
// else takes tokens and the rate does not change: 0 when it would succeed
// now, else the time to the refill boundary that brings the tokens to n. It
// reports ErrExceedsDepth when n is above the depth, ErrNoRefill when the
// rate is 0 and the tokens fall short, and ErrInvalid for a negative n.
func (b *Bucket) TimeUntil(n float64) (time.Duration, error) {
	if !validAmount(n) {
		return 0, fmt.Errorf("tokenbucket: TimeUntil(%v): %w", n, ErrInvalid)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.l.refill(b.tick.advance(now))
	if !fits(b.l.depth, n) {
		return 0, fmt.Errorf("tokenbucket: TimeUntil(%v): depth %v: %w", n, b.l.depth, ErrExceedsDepth)
	}
	s, ok := b.l.stepsTo(n)
	if !ok {
		return 0, fmt.Errorf("tokenbucket: TimeUntil(%v): %v tokens held: %w", n, b.l.tokens, ErrNoRefill)
	}
	if s == 0 {
		return 0, nil
	}
	return b.tick.after(now, s), nil
}

// SetRate changes the rate to rate tokens/s and the depth to rate × burst.
// Tokens accrued at the old rate up to the last refill boundary are kept,
// capped at the new depth (so lowering the rate also lowers the burst a flow
// can still send); from the next boundary on, each adds rate × interval.
func (b *Bucket) SetRate(rate float64) error {
	if !validAmount(rate) {
		return fmt.Errorf("tokenbucket: SetRate(%v): %w", rate, ErrInvalid)
	}
	return b.set(rate, rate*b.burst.Seconds())
}

// SetRateDepth is SetRate with an explicit depth instead of rate × burst; a
// later SetRate goes back to rate × burst.
func (b *Bucket) SetRateDepth(rate, depth float64) error {
	if !validAmount(rate) || !validAmount(depth) {
		return fmt.Errorf("tokenbucket: SetRateDepth(%v, %v): %w", rate, depth, ErrInvalid)
	}
	return b.set(rate, depth)
}

func (b *Bucket) set(rate, depth float64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	b.l.set(rate, depth, b.tick.interval)
	return nil
}

// Rate returns the refill rate in tokens/s.
func (b *Bucket) Rate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.l.rate
}

// Depth returns the bucket size in tokens.
func (b *Bucket) Depth() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.l.depth
}

// Interval returns the refill interval.
func (b *Bucket) Interval() time.Duration { return b.tick.interval }
