package tokenbucket

import (
	"slices"
	"sync"
	"time"
)

// Clock is the source of time of a Bucket or a Multi. Injecting it keeps the
// buckets free of global state and lets tests and the simulator drive time.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// TimerClock is a Clock that can also wake a waiter after a duration. Only
// Multi.Wait needs it; Bucket and the non-blocking Multi methods work with
// any Clock.
type TimerClock interface {
	Clock
	// After returns a channel that receives the time once d has elapsed on
	// this clock (at once when d <= 0).
	After(d time.Duration) <-chan time.Time
}

// RealClock is the system clock. Its zero value is ready to use.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// FakeClock is a manual clock for tests: time stands still until Advance or
// Set moves it, and moving it fires the channels returned by After whose
// deadline has been reached, so that tests drive Multi.Wait without real
// sleeps. It is safe for concurrent use.
type FakeClock struct {
	mu     sync.Mutex
	cond   *sync.Cond // signalled when a timer is added
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

// NewFakeClock returns a FakeClock that reads start until it is moved.
func NewFakeClock(start time.Time) *FakeClock {
	c := &FakeClock{now: start}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel (buffered, so an abandoned timer never blocks the
// clock) that receives the clock's time once Advance or Set has moved it to
// Now()+d or later. When d <= 0 the channel is ready at once.
func (c *FakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	c.cond.Broadcast()
	return ch
}

// Advance moves the clock forward by d (d < 0 is ignored) and fires every
// timer whose deadline has been reached, earliest first.
func (c *FakeClock) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the clock to t (a t before Now() is ignored: the clock is
// monotonic) and fires the timers whose deadline has been reached.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Before(c.now) {
		return
	}
	c.setLocked(t)
}

func (c *FakeClock) setLocked(t time.Time) {
	c.now = t
	slices.SortStableFunc(c.timers, func(a, b fakeTimer) int { return a.at.Compare(b.at) })
	n := 0
	for n < len(c.timers) && !c.timers[n].at.After(t) {
		c.timers[n].ch <- t
		n++
	}
	rest := copy(c.timers, c.timers[n:])
	clear(c.timers[rest:])
	c.timers = c.timers[:rest]
}

// Timers returns the number of timers (After channels) that have not fired.
func (c *FakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntilTimers blocks until at least n timers are pending. Tests call it
// before Advance to be sure that a goroutine in Multi.Wait has armed its
// timer, which makes the wake-up deterministic.
func (c *FakeClock) BlockUntilTimers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.cond.Wait()
	}
}
