package tokenbucket

import (
	"errors"
	"math"
	"testing"
	"time"
)

func newBucket(t *testing.T, c Clock, rate float64, opts ...Option) *Bucket {
	t.Helper()
	b, err := NewBucket(c, rate, opts...)
	if err != nil {
		t.Fatalf("NewBucket(%v): %v", rate, err)
	}
	return b
}

func TestNewBucketDefaults(t *testing.T) {
	b := newBucket(t, NewFakeClock(t0), 800)
	if b.Rate() != 800 || b.Depth() != 800 || b.Interval() != 10*time.Millisecond || b.Available() != 800 {
		t.Fatalf("rate %v depth %v interval %v available %v, want 800, 800 (rate × 1 s), 10ms, full",
			b.Rate(), b.Depth(), b.Interval(), b.Available())
	}
	b = newBucket(t, NewFakeClock(t0), 800, WithBurst(250*time.Millisecond), WithRefillInterval(time.Millisecond))
	if b.Depth() != 200 || b.Interval() != time.Millisecond {
		t.Fatalf("depth %v interval %v, want 200, 1ms", b.Depth(), b.Interval())
	}
	if b, err := NewBucket(nil, 1); err != nil || b.Available() != 1 {
		t.Fatalf("NewBucket(nil clock): %v", err)
	}
}

func TestNewBucketErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
		opts []Option
	}{
		{"negative rate", -1, nil},
		{"NaN rate", math.NaN(), nil},
		{"infinite rate", math.Inf(1), nil},
		{"zero interval", 1, []Option{WithRefillInterval(0)}},
		{"negative interval", 1, []Option{WithRefillInterval(-time.Millisecond)}},
		{"zero burst", 1, []Option{WithBurst(0)}},
		{"negative burst", 1, []Option{WithBurst(-time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewBucket(NewFakeClock(t0), tc.rate, tc.opts...); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestBucketRefillSteps checks that tokens arrive only at 10 ms boundaries,
// rate × 10 ms at a time, aligned to the bucket's creation, and never above
// the depth.
func TestBucketRefillSteps(t *testing.T) {
	c := NewFakeClock(t0)
	b := newBucket(t, c, 1000) // 10 tokens per 10 ms, depth 1000
	if !b.Take(1000) {
		t.Fatal("full bucket refused its depth")
	}
	for _, st := range []struct {
		advance time.Duration
		want    float64
	}{
		{0, 0},
		{9 * time.Millisecond, 0},         // t = 9 ms: no boundary yet
		{time.Millisecond, 10},            // t = 10 ms: first boundary
		{5 * time.Millisecond, 10},        // t = 15 ms
		{4*time.Millisecond + 999999, 10}, // t = 19.999999 ms
		{1, 20},                           // t = 20 ms
		{35 * time.Millisecond, 50},       // t = 55 ms: boundaries 30, 40, 50
		{945 * time.Millisecond, 1000},    // t = 1 s: 100 boundaries, full
		{time.Hour, 1000},                 // capped at the depth
	} {
		c.Advance(st.advance)
		if got := b.Available(); got != st.want {
			t.Fatalf("at %v: Available = %v, want %v", c.Now().Sub(t0), got, st.want)
		}
	}
}

func TestBucketTake(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rate     float64
		advance  time.Duration // after draining the bucket
		take     float64
		want     bool
		wantLeft float64
	}{
		{"empty", 1000, 0, 1, false, 0},
		{"one step", 1000, 10 * time.Millisecond, 10, true, 0},
		{"one step short", 1000, 10 * time.Millisecond, 10.5, false, 10},
		{"zero", 1000, 0, 0, true, 0},
		{"negative", 1000, time.Second, -1, false, 1000},
		{"NaN", 1000, time.Second, math.NaN(), false, 1000},
		{"more than depth, full", 1000, time.Hour, 1001, false, 1000},
		// 33.3 × 10 ms summed over 100 steps is 33.299999999999926: the
		// slack still lets a one-second request through.
		{"float rounding", 33.3, time.Second, 33.3, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewFakeClock(t0)
			b := newBucket(t, c, tc.rate)
			if !b.Take(b.Depth()) {
				t.Fatal("could not drain")
			}
			// Refill one boundary at a time, as a busy flow would see it.
			for d := time.Duration(0); d < tc.advance && d < 2*time.Second; d += 10 * time.Millisecond {
				c.Advance(10 * time.Millisecond)
				b.Available()
			}
			if tc.advance > 2*time.Second {
				c.Advance(tc.advance)
			}
			if got := b.Take(tc.take); got != tc.want {
				t.Fatalf("Take(%v) = %v, want %v", tc.take, got, tc.want)
			}
			if got := b.Available(); math.Abs(got-tc.wantLeft) > 1e-9 {
				t.Fatalf("Available = %v, want %v", got, tc.wantLeft)
			}
		})
	}
}

func TestBucketSetRate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		before    time.Duration // from a drained bucket at rate 1000, before SetRate
		set       func(b *Bucket) error
		after     time.Duration // then
		wantDepth float64
		wantAvail float64
	}{
		// 500 tokens accrued, new depth 200: capped.
		{"lower caps tokens", 500 * time.Millisecond, func(b *Bucket) error { return b.SetRate(200) }, 0, 200, 200},
		// Accrued tokens are kept; the new depth is above them.
		{"higher keeps tokens", 500 * time.Millisecond, func(b *Bucket) error { return b.SetRate(4000) }, 0, 4000, 500},
		// Change at 15 ms: the boundary at 10 ms paid 10 at the old rate,
		// the one at 20 ms pays 40 at the new one.
		{"new rate from next boundary", 15 * time.Millisecond, func(b *Bucket) error { return b.SetRate(4000) }, 5 * time.Millisecond, 4000, 50},
		{"rate 0 stops refill", 100 * time.Millisecond, func(b *Bucket) error { return b.SetRateDepth(0, 1000) }, time.Second, 1000, 100},
		{"explicit depth", time.Second, func(b *Bucket) error { return b.SetRateDepth(1000, 50) }, 0, 50, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewFakeClock(t0)
			b := newBucket(t, c, 1000)
			b.Take(1000)
			c.Advance(tc.before)
			if err := tc.set(b); err != nil {
				t.Fatal(err)
			}
			c.Advance(tc.after)
			if b.Depth() != tc.wantDepth || b.Available() != tc.wantAvail {
				t.Fatalf("depth %v available %v, want %v, %v", b.Depth(), b.Available(), tc.wantDepth, tc.wantAvail)
			}
		})
	}

	b := newBucket(t, NewFakeClock(t0), 1000)
	for _, err := range []error{
		b.SetRate(-1), b.SetRate(math.NaN()), b.SetRate(math.Inf(1)),
		b.SetRateDepth(1, -1), b.SetRateDepth(-1, 1), b.SetRateDepth(1, math.Inf(1)),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	}
	if b.Rate() != 1000 || b.Depth() != 1000 {
		t.Fatal("a rejected SetRate changed the bucket")
	}
}

func TestBucketTimeUntil(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offset  time.Duration // clock position after draining at t0
		rate    float64       // set after draining (depth rate × 1 s) unless depth > 0
		depth   float64
		n       float64
		want    time.Duration
		wantErr error
	}{
		{"available now", 0, 1000, 0, 0, 0, nil},
		{"one step", 0, 1000, 0, 10, 10 * time.Millisecond, nil},
		{"one step and a bit", 0, 1000, 0, 10.5, 20 * time.Millisecond, nil},
		{"mid interval", 3 * time.Millisecond, 1000, 0, 10, 7 * time.Millisecond, nil},
		{"whole depth", 0, 1000, 0, 1000, time.Second, nil},
		{"after some refill", 25 * time.Millisecond, 1000, 0, 30, 5 * time.Millisecond, nil},
		{"exceeds depth", 0, 1000, 0, 1000.5, 0, ErrExceedsDepth},
		{"rate 0", 0, 0, 100, 1, 0, ErrNoRefill},
		{"negative", 0, 1000, 0, -1, 0, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewFakeClock(t0)
			b := newBucket(t, c, 1000)
			b.Take(1000)
			if tc.depth > 0 {
				if err := b.SetRateDepth(tc.rate, tc.depth); err != nil {
					t.Fatal(err)
				}
			} else if err := b.SetRate(tc.rate); err != nil {
				t.Fatal(err)
			}
			c.Advance(tc.offset)
			got, err := b.TimeUntil(tc.n)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("TimeUntil(%v) error = %v, want %v", tc.n, err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("TimeUntil(%v) = %v, want %v", tc.n, got, tc.want)
			}
			if err != nil {
				return
			}
			// Check the promise: not before, yes at.
			if got > 0 {
				c.Advance(got - 1)
				if b.Take(tc.n) {
					t.Fatalf("Take(%v) succeeded before TimeUntil", tc.n)
				}
				c.Advance(1)
			}
			if !b.Take(tc.n) {
				t.Fatalf("Take(%v) failed after TimeUntil", tc.n)
			}
		})
	}
}
