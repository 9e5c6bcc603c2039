package tokenbucket

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

func newMulti(t testing.TB, c Clock, rates []float64, opts ...Option) *Multi {
	t.Helper()
	m, err := NewMulti(c, rates, opts...)
	if err != nil {
		t.Fatalf("NewMulti(%v): %v", rates, err)
	}
	return m
}

func offer(t *testing.T, m *Multi, id uint64, cost ...float64) bool {
	t.Helper()
	ok, err := m.Offer(Request{Cost: cost, ID: id})
	if err != nil {
		t.Fatalf("Offer(%v): %v", cost, err)
	}
	return ok
}

func ids(rs []Request) []uint64 {
	out := make([]uint64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func TestNewMulti(t *testing.T) {
	m := newMulti(t, NewFakeClock(t0), []float64{800, 5000}, WithBurst(500*time.Millisecond))
	if m.Resources() != 2 || m.Interval() != DefaultInterval ||
		!slices.Equal(m.Rates(), []float64{800, 5000}) || !slices.Equal(m.Depths(), []float64{400, 2500}) ||
		!slices.Equal(m.Available(), []float64{400, 2500}) {
		t.Fatalf("resources %d rates %v depths %v available %v", m.Resources(), m.Rates(), m.Depths(), m.Available())
	}
	if m.Queued() != 0 || !slices.Equal(m.QueuedCost(), []float64{0, 0}) {
		t.Fatal("new Multi has a queue")
	}
	if _, ok := m.NextRelease(); ok {
		t.Fatal("NextRelease on an empty queue")
	}
	for _, tc := range []struct {
		name  string
		rates []float64
		opts  []Option
	}{
		{"no resources", nil, nil},
		{"negative rate", []float64{1, -1}, nil},
		{"NaN rate", []float64{math.NaN()}, nil},
		{"infinite rate", []float64{math.Inf(1)}, nil},
		{"zero interval", []float64{1}, []Option{WithRefillInterval(0)}},
		{"zero burst", []float64{1}, []Option{WithBurst(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewMulti(NewFakeClock(t0), tc.rates, tc.opts...); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestMultiInvalidCost(t *testing.T) {
	m := newMulti(t, NewFakeClock(t0), []float64{100, 100})
	for _, cost := range [][]float64{nil, {1}, {1, 2, 3}, {-1, 0}, {0, math.NaN()}, {math.Inf(1), 0}} {
		if ok, err := m.Offer(Request{Cost: cost}); ok || !errors.Is(err, ErrInvalid) {
			t.Fatalf("Offer(%v) = %v, %v; want ErrInvalid", cost, ok, err)
		}
		if err := m.Wait(context.Background(), Request{Cost: cost}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Wait(%v) = %v; want ErrInvalid", cost, err)
		}
	}
	if !slices.Equal(m.Available(), []float64{100, 100}) || m.Queued() != 0 || m.Stats().Offered != 0 {
		t.Fatal("an invalid request changed the Multi")
	}
}

// TestMultiAtomicDebit: a request passes only when every bucket holds its
// cost, and then every bucket is debited; otherwise none is.
func TestMultiAtomicDebit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cost      []float64
		wantPass  bool
		wantAvail []float64
	}{
		{"fits all", []float64{40, 30, 0}, true, []float64{10, 120, 250}},
		{"short on the last", []float64{10, 10, 251}, false, []float64{50, 150, 250}},
		{"short on the first", []float64{51, 0, 0}, false, []float64{50, 150, 250}},
		{"exactly all", []float64{50, 150, 250}, true, []float64{0, 0, 0}},
		{"zero cost", []float64{0, 0, 0}, true, []float64{50, 150, 250}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMulti(t, NewFakeClock(t0), []float64{100, 200, 300})
			offer(t, m, 0, 50, 50, 50)
			m.Stats()
			if got := offer(t, m, 1, tc.cost...); got != tc.wantPass {
				t.Fatalf("Offer = %v, want %v", got, tc.wantPass)
			}
			if got := m.Available(); !slices.Equal(got, tc.wantAvail) {
				t.Fatalf("Available = %v, want %v", got, tc.wantAvail)
			}
			wantUsed := []float64{0, 0, 0}
			if tc.wantPass {
				wantUsed = tc.cost
			}
			if st := m.Stats(); !slices.Equal(st.Used, wantUsed) {
				t.Fatalf("Used = %v, want %v", st.Used, wantUsed)
			}
		})
	}
}

// TestMultiHeadOfLine: a queued request holds back later ones of the flow,
// even those the buckets could serve; Release returns them in FIFO order.
func TestMultiHeadOfLine(t *testing.T) {
	c := NewFakeClock(t0)
	m := newMulti(t, c, []float64{1000, 1000}) // 10 tokens per 10 ms
	if !offer(t, m, 0, 1000, 0) {
		t.Fatal("full bucket refused")
	}
	if offer(t, m, 1, 50, 0) { // needs 50 ms on resource 0
		t.Fatal("empty resource 0 let a request through")
	}
	if offer(t, m, 2, 0, 10) { // resource 1 is full, but request 1 is ahead
		t.Fatal("a request overtook the head of the queue")
	}
	if got := m.Release(nil); len(got) != 0 {
		t.Fatalf("Release = %v, want nothing", ids(got))
	}
	if d, ok := m.NextRelease(); !ok || d != 50*time.Millisecond {
		t.Fatalf("NextRelease = %v, %v; want 50ms", d, ok)
	}
	c.Advance(40 * time.Millisecond)
	if got := m.Release(nil); len(got) != 0 {
		t.Fatalf("at 40 ms Release = %v, want nothing", ids(got))
	}
	c.Advance(10 * time.Millisecond)
	dst := []Request{{ID: 99}}
	if got := m.Release(dst); !slices.Equal(ids(got), []uint64{99, 1, 2}) {
		t.Fatalf("at 50 ms Release = %v, want [99 1 2] (appended to dst)", ids(got))
	}
	if got := m.Available(); !slices.Equal(got, []float64{0, 990}) {
		t.Fatalf("Available = %v, want [0 990]", got)
	}
	if m.Queued() != 0 {
		t.Fatal("queue not empty")
	}
}

// TestMultiQueuedCost drives a Multi with a random but seeded sequence of
// offers, releases and rate changes, and checks Queued, QueuedCost and the
// release order against a model FIFO.
func TestMultiQueuedCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := NewFakeClock(t0)
	m := newMulti(t, c, []float64{1000, 3000, 500})
	var (
		model []Request
		next  uint64
		buf   []Request
	)
	for i := 0; i < 5000; i++ {
		switch op := rng.IntN(10); {
		case op < 6:
			cost := []float64{float64(rng.IntN(50)), float64(rng.IntN(150)), float64(rng.IntN(25))}
			ok := offer(t, m, next, cost...)
			if ok && len(model) > 0 {
				t.Fatal("Offer passed with a queue")
			}
			if !ok {
				model = append(model, Request{Cost: cost, ID: next})
			}
			next++
		case op < 9:
			c.Advance(time.Duration(rng.IntN(30)) * time.Millisecond)
			buf = m.Release(buf[:0])
			if len(buf) > len(model) || !slices.Equal(ids(buf), ids(model[:len(buf)])) {
				t.Fatalf("step %d: released %v, want a prefix of %v", i, ids(buf), ids(model))
			}
			model = model[len(buf):]
		default:
			rates := []float64{float64(rng.IntN(2000)), float64(rng.IntN(6000)), float64(rng.IntN(1000))}
			if err := m.SetRates(rates); err != nil {
				t.Fatal(err)
			}
		}
		want := make([]float64, 3)
		for _, r := range model {
			for k, x := range r.Cost {
				want[k] += x
			}
		}
		if got := m.QueuedCost(); m.Queued() != len(model) || !slices.Equal(got, want) {
			t.Fatalf("step %d: Queued %d QueuedCost %v, want %d %v", i, m.Queued(), got, len(model), want)
		}
	}
}

// TestMultiAvgQueued checks the time-averaged backlog (q_f) against the
// piecewise-constant integral done by hand.
func TestMultiAvgQueued(t *testing.T) {
	c := NewFakeClock(t0)
	m := newMulti(t, c, []float64{100, 1000}) // 1 and 10 tokens per 10 ms
	at := func(d time.Duration) { c.Set(t0.Add(d)) }
	ms := time.Millisecond

	// t = 0: request 0 empties resource 0; request 1 queues.
	offer(t, m, 0, 100, 0)
	offer(t, m, 1, 50, 200) // backlog ⟨50, 200⟩
	at(200 * ms)
	offer(t, m, 2, 30, 0) // backlog ⟨80, 200⟩
	// t = 0.5 s: 50 tokens, request 1 passes; backlog ⟨30, 0⟩.
	at(500 * ms)
	if got := m.Release(nil); !slices.Equal(ids(got), []uint64{1}) {
		t.Fatalf("at 0.5 s released %v, want [1]", ids(got))
	}
	// t = 0.8 s: 30 tokens, request 2 passes; backlog ⟨0, 0⟩.
	at(800 * ms)
	if got := m.Release(nil); !slices.Equal(ids(got), []uint64{2}) {
		t.Fatalf("at 0.8 s released %v, want [2]", ids(got))
	}
	at(time.Second)
	st := m.Stats()
	// ∫ backlog dt over [0, 1 s]: 0.2×⟨50,200⟩ + 0.3×⟨80,200⟩ + 0.3×⟨30,0⟩.
	wantAvg := []float64{0.2*50 + 0.3*80 + 0.3*30, 0.2*200 + 0.3*200}
	if !st.Start.Equal(t0) || !st.End.Equal(t0.Add(time.Second)) ||
		!approx(st.AvgQueued[0], wantAvg[0]) || !approx(st.AvgQueued[1], wantAvg[1]) ||
		!slices.Equal(st.Used, []float64{180, 200}) || !slices.Equal(st.Backlog, []float64{0, 0}) ||
		st.Offered != 3 || st.Passed != 3 {
		t.Fatalf("period 1: %+v, want avg queued %v, used [180 200], backlog 0, 3 offered and passed", st, wantAvg)
	}

	// Period 2: a request queued for the whole period.
	offer(t, m, 3, 100, 0) // 20 tokens at 1 s
	at(1500 * ms)
	st = m.Stats()
	if !slices.Equal(st.AvgQueued, []float64{100, 0}) || !slices.Equal(st.Backlog, []float64{100, 0}) ||
		!slices.Equal(st.Used, []float64{0, 0}) || st.Offered != 1 || st.Passed != 0 {
		t.Fatalf("period 2: %+v, want avg queued and backlog [100 0], nothing used", st)
	}
	// An empty period reports the current backlog.
	if st = m.Stats(); !slices.Equal(st.AvgQueued, []float64{100, 0}) || !st.Start.Equal(st.End) {
		t.Fatalf("empty period: %+v", st)
	}
	// Period 3: released at 1.8 s (100 tokens), then idle to 2 s; the
	// request passed in this period, offered in the previous one.
	at(1800 * ms)
	m.Release(nil)
	at(2 * time.Second)
	st = m.Stats()
	if !approx(st.AvgQueued[0], 100*0.3/0.5) || st.Offered != 0 || st.Passed != 1 || st.Used[0] != 100 {
		t.Fatalf("period 3: %+v, want avg queued 60", st)
	}
}

// TestMultiOversized: a request above a bucket's depth passes when that
// bucket is full, and the debt holds back what follows.
func TestMultiOversized(t *testing.T) {
	c := NewFakeClock(t0)
	m := newMulti(t, c, []float64{100, 1000}) // depths 100 and 1000
	if !offer(t, m, 1, 250, 10) {
		t.Fatal("oversized request refused by full buckets")
	}
	if got := m.Available(); !slices.Equal(got, []float64{-150, 990}) {
		t.Fatalf("Available = %v, want [-150 990] (debt)", got)
	}
	if offer(t, m, 2, 10, 0) {
		t.Fatal("request passed while resource 0 is in debt")
	}
	// 160 tokens to repay at 1 token per 10 ms.
	if d, ok := m.NextRelease(); !ok || d != 1600*time.Millisecond {
		t.Fatalf("NextRelease = %v, %v; want 1.6s", d, ok)
	}
	c.Advance(1590 * time.Millisecond)
	if got := m.Release(nil); len(got) != 0 {
		t.Fatalf("released %v before the debt is repaid", ids(got))
	}
	c.Advance(10 * time.Millisecond)
	if got := m.Release(nil); !slices.Equal(ids(got), []uint64{2}) {
		t.Fatalf("released %v, want [2]", ids(got))
	}
	// An oversized request waits for a full bucket, not for its cost.
	if offer(t, m, 3, 250, 0) {
		t.Fatal("oversized request passed a bucket that is not full")
	}
	if d, ok := m.NextRelease(); !ok || d != time.Second {
		t.Fatalf("NextRelease = %v, %v; want 1s (until full)", d, ok)
	}
	c.Advance(time.Second)
	if got := m.Release(nil); !slices.Equal(ids(got), []uint64{3}) {
		t.Fatalf("released %v, want [3]", ids(got))
	}
	// Over the run resource 0 let through 250+10+250 tokens in 2.6 s: at
	// most rate × time + depth + one request.
	if used := m.Stats().Used[0]; used > 100*2.6+100+250 {
		t.Fatalf("used %v", used)
	}
}

// TestMultiZeroRate: a resource at rate 0 passes only zero-cost requests,
// until SetRates gives it a rate.
func TestMultiZeroRate(t *testing.T) {
	c := NewFakeClock(t0)
	m := newMulti(t, c, []float64{100, 0})
	if !offer(t, m, 1, 10, 0) {
		t.Fatal("zero cost on the rate-0 resource refused")
	}
	if offer(t, m, 2, 10, 1) {
		t.Fatal("rate-0 resource let a request through")
	}
	if _, ok := m.NextRelease(); ok {
		t.Fatal("NextRelease promised a time at rate 0")
	}
	c.Advance(time.Hour)
	if got := m.Release(nil); len(got) != 0 {
		t.Fatal("released at rate 0")
	}
	if err := m.SetRates([]float64{100, 100}); err != nil {
		t.Fatal(err)
	}
	if d, ok := m.NextRelease(); !ok || d != 10*time.Millisecond {
		t.Fatalf("NextRelease = %v, %v; want 10ms", d, ok)
	}
	c.Advance(10 * time.Millisecond)
	if got := m.Release(nil); !slices.Equal(ids(got), []uint64{2}) {
		t.Fatalf("released %v, want [2]", ids(got))
	}
}

func TestMultiSetRates(t *testing.T) {
	c := NewFakeClock(t0)
	m := newMulti(t, c, []float64{1000, 1000})
	offer(t, m, 0, 1000, 1000)
	c.Advance(505 * time.Millisecond) // 500 tokens each
	if err := m.SetRates([]float64{200, 4000}); err != nil {
		t.Fatal(err)
	}
	if got := m.Available(); !slices.Equal(got, []float64{200, 500}) {
		t.Fatalf("Available = %v, want [200 500]: capped at the new depth, kept below it", got)
	}
	c.Advance(5 * time.Millisecond) // boundary at 510 ms: new rates
	if got := m.Available(); !slices.Equal(got, []float64{200, 540}) {
		t.Fatalf("Available = %v, want [200 540]", got)
	}
	for _, rates := range [][]float64{{1}, {1, 2, 3}, {1, -1}, {math.NaN(), 1}} {
		if err := m.SetRates(rates); !errors.Is(err, ErrInvalid) {
			t.Fatalf("SetRates(%v) = %v, want ErrInvalid", rates, err)
		}
	}
	if !slices.Equal(m.Rates(), []float64{200, 4000}) || !slices.Equal(m.Depths(), []float64{200, 4000}) {
		t.Fatal("a rejected SetRates changed the rates")
	}
}

// waitFor yields until cond holds (no sleeping; bounded by the test timeout).
func waitFor(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

func goWait(ctx context.Context, m *Multi, id uint64, cost ...float64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- m.Wait(ctx, Request{Cost: cost, ID: id}) }()
	return done
}

func notDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("Wait returned early: %v", err)
	default:
	}
}

func TestMultiWait(t *testing.T) {
	ctx := context.Background()
	t.Run("passes at once", func(t *testing.T) {
		m := newMulti(t, NewFakeClock(t0), []float64{100})
		if err := m.Wait(ctx, Request{Cost: []float64{100}}); err != nil {
			t.Fatal(err)
		}
		if m.Available()[0] != 0 {
			t.Fatal("not debited")
		}
	})
	t.Run("wakes on Advance", func(t *testing.T) {
		c := NewFakeClock(t0)
		m := newMulti(t, c, []float64{100})
		offer(t, m, 0, 100)
		done := goWait(ctx, m, 1, 5) // 5 tokens: 50 ms
		c.BlockUntilTimers(1)
		notDone(t, done)
		c.Advance(40 * time.Millisecond)
		notDone(t, done) // its timer is for 50 ms
		c.Advance(10 * time.Millisecond)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := m.Available()[0]; got != 0 || m.Queued() != 0 {
			t.Fatalf("after Wait: available %v queued %d", got, m.Queued())
		}
	})
	t.Run("FIFO among waiters", func(t *testing.T) {
		c := NewFakeClock(t0)
		m := newMulti(t, c, []float64{100})
		offer(t, m, 0, 100)
		first := goWait(ctx, m, 1, 20)
		waitFor(func() bool { return m.Queued() == 1 })
		second := goWait(ctx, m, 2, 1)
		waitFor(func() bool { return m.Queued() == 2 })
		c.BlockUntilTimers(1) // only the first waiter times the head
		c.Advance(100 * time.Millisecond)
		notDone(t, second) // 10 tokens: the second must not overtake
		c.Advance(100 * time.Millisecond)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		// The second is nudged, finds 0 tokens, times 10 ms.
		c.BlockUntilTimers(1)
		c.Advance(10 * time.Millisecond)
		if err := <-second; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("cancel withdraws", func(t *testing.T) {
		c := NewFakeClock(t0)
		m := newMulti(t, c, []float64{100})
		offer(t, m, 0, 100)
		cctx, cancel := context.WithCancel(ctx)
		first := goWait(cctx, m, 1, 50)
		c.BlockUntilTimers(1)
		second := goWait(ctx, m, 2, 1)
		waitFor(func() bool { return m.Queued() == 2 })
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if m.Queued() != 1 || m.QueuedCost()[0] != 1 {
			t.Fatalf("queued %d cost %v after cancel, want 1 [1]", m.Queued(), m.QueuedCost())
		}
		c.BlockUntilTimers(2) // the first's stale timer and the second's
		c.Advance(10 * time.Millisecond)
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		if got := m.Available()[0]; got != 0 {
			t.Fatalf("available %v: the cancelled request was debited", got)
		}
	})
	t.Run("done context", func(t *testing.T) {
		m := newMulti(t, NewFakeClock(t0), []float64{100})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := m.Wait(cctx, Request{Cost: []float64{1}}); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if m.Available()[0] != 100 {
			t.Fatal("debited")
		}
	})
	t.Run("deadline", func(t *testing.T) {
		c := NewFakeClock(t0)
		m := newMulti(t, c, []float64{0}) // never passes
		cctx, cancel := context.WithCancel(ctx)
		done := goWait(cctx, m, 1, 1)
		waitFor(func() bool { return m.Queued() == 1 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || m.Queued() != 0 {
			t.Fatalf("err = %v queued %d", err, m.Queued())
		}
	})
	t.Run("SetRates wakes", func(t *testing.T) {
		c := NewFakeClock(t0)
		m := newMulti(t, c, []float64{0})
		done := goWait(ctx, m, 1, 1)
		waitFor(func() bool { return m.Queued() == 1 })
		if err := m.SetRates([]float64{100}); err != nil {
			t.Fatal(err)
		}
		c.BlockUntilTimers(1)
		c.Advance(10 * time.Millisecond)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("mixed with Offer", func(t *testing.T) {
		c := NewFakeClock(t0)
		m := newMulti(t, c, []float64{100})
		offer(t, m, 0, 100)
		offer(t, m, 1, 10) // queued by Offer, ahead of the waiter
		done := goWait(ctx, m, 2, 10)
		c.BlockUntilTimers(1)
		c.Advance(200 * time.Millisecond) // the waiter lets 1 through, then itself
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d, ok := m.NextRelease(); !ok || d != 0 {
			t.Fatalf("NextRelease = %v, %v; want 0 (request 1 is ready)", d, ok)
		}
		if got := m.Release(nil); !slices.Equal(ids(got), []uint64{1}) {
			t.Fatalf("Release = %v, want [1]", ids(got))
		}
	})
	t.Run("no timer", func(t *testing.T) {
		m := newMulti(t, nowOnly{t0}, []float64{100})
		if err := m.Wait(ctx, Request{Cost: []float64{1}}); !errors.Is(err, ErrNoTimer) {
			t.Fatalf("err = %v, want ErrNoTimer", err)
		}
	})
}

type nowOnly struct{ t time.Time }

func (c nowOnly) Now() time.Time { return c.t }

// TestMultiConcurrent has producers offer and waiters wait while a consumer
// releases and the clock advances; every request passes exactly once and the
// buckets account for all of them. Run it with -race.
func TestMultiConcurrent(t *testing.T) {
	c := NewFakeClock(t0)
	m := newMulti(t, c, []float64{10000, 20000})
	const producers, perProducer = 4, 500
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		seen     = make(map[uint64]int)
		producer sync.WaitGroup
	)
	mark := func(id uint64) {
		mu.Lock()
		seen[id]++
		mu.Unlock()
	}
	for p := 0; p < producers; p++ {
		producer.Add(1)
		go func() {
			defer producer.Done()
			for i := 0; i < perProducer; i++ {
				id := uint64(p*perProducer + i)
				cost := []float64{float64(1 + i%7), float64(3 + i%11)}
				if p%2 == 0 {
					if err := m.Wait(context.Background(), Request{Cost: cost, ID: id}); err != nil {
						t.Error(err)
						return
					}
					mark(id)
				} else if ok, err := m.Offer(Request{Cost: cost, ID: id}); err != nil {
					t.Error(err)
					return
				} else if ok {
					mark(id)
				}
			}
		}()
	}
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // consumer and clock
		defer wg.Done()
		var buf []Request
		for {
			select {
			case <-stop:
				return
			default:
			}
			c.Advance(time.Millisecond)
			buf = m.Release(buf[:0])
			for _, r := range buf {
				mark(r.ID)
			}
			runtime.Gosched()
		}
	}()
	producer.Wait()
	waitFor(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == producers*perProducer
	})
	close(stop)
	wg.Wait()
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("request %d passed %d times", id, n)
		}
	}
	st := m.Stats()
	if st.Offered != producers*perProducer || st.Passed != producers*perProducer || m.Queued() != 0 {
		t.Fatalf("offered %d passed %d queued %d", st.Offered, st.Passed, m.Queued())
	}
}

// TestRefund: tokens given back return to the buckets (up to their
// depth), no longer count as used, and let a queued request through.
func TestRefund(t *testing.T) {
	c := NewFakeClock(t0)
	m := newMulti(t, c, []float64{100, 1000}) // depths 100 and 1000
	if ok, err := m.Offer(Request{Cost: []float64{80, 500}}); !ok || err != nil {
		t.Fatalf("first offer: %v %v", ok, err)
	}
	if ok, _ := m.Offer(Request{Cost: []float64{50, 100}}); ok {
		t.Fatal("the second request passed with 20 tokens left of 50")
	}
	if err := m.Refund([]float64{40, 0}); err != nil {
		t.Fatal(err)
	}
	if got := m.Release(nil); len(got) != 1 {
		t.Fatalf("after a refund of 40: %d released, want the queued request", len(got))
	}
	if err := m.Refund([]float64{1e6, 1e6}); err != nil {
		t.Fatal(err)
	}
	if av := m.Available(); av[0] != 100 || av[1] != 1000 {
		t.Errorf("available %v after a huge refund, want the depths [100 1000]", av)
	}
	if st := m.Stats(); st.Used[0] != 0 || st.Used[1] != 0 {
		t.Errorf("used %v: refunds beyond what was used leave 0", st.Used)
	}
	if err := m.Refund([]float64{-1, 0}); err == nil {
		t.Error("a negative refund was taken")
	}
	if err := m.Refund([]float64{1}); err == nil {
		t.Error("a refund of the wrong length was taken")
	}
}

// TestTryTake: TryTake lets a request through exactly as Offer would when
// nothing is queued and the buckets hold it (counted as offered and
// passed), and otherwise changes nothing: it never jumps the queue and
// never queues.
func TestTryTake(t *testing.T) {
	clock := NewFakeClock(t0)
	m := newMulti(t, clock, []float64{1000, 1000}, WithBurst(time.Second)) // depth 1000 each
	if ok, err := m.TryTake(clock.Now(), []float64{600, 100}); !ok || err != nil {
		t.Fatalf("TryTake on full buckets: %v %v", ok, err)
	}
	if got := m.Available(); !slices.Equal(got, []float64{400, 900}) {
		t.Fatalf("available %v after TryTake, want [400 900]", got)
	}
	// Short on the first bucket: nothing changes, nothing queued.
	if ok, err := m.TryTake(clock.Now(), []float64{600, 100}); ok || err != nil {
		t.Fatalf("TryTake short of tokens: %v %v", ok, err)
	}
	if got := m.Available(); !slices.Equal(got, []float64{400, 900}) || m.Queued() != 0 {
		t.Fatalf("available %v, %d queued after a refused TryTake", got, m.Queued())
	}
	// A queued request holds back a TryTake the buckets could serve.
	if offer(t, m, 1, 600, 0) {
		t.Fatal("Offer passed short of tokens")
	}
	if ok, _ := m.TryTake(clock.Now(), []float64{1, 1}); ok {
		t.Fatal("TryTake jumped the queue")
	}
	if m.Queued() != 1 {
		t.Fatalf("%d queued, want the Offer only", m.Queued())
	}
	if _, err := m.TryTake(clock.Now(), []float64{1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("TryTake of a short cost vector: %v", err)
	}
	if _, err := m.TryTake(clock.Now(), []float64{1, math.NaN()}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("TryTake of a NaN cost: %v", err)
	}
	clock.Advance(time.Second)
	if got := ids(m.Release(nil)); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("released %v, want [1]", got)
	}
	st := m.Stats()
	if st.Offered != 2 || st.Passed != 2 || !slices.Equal(st.Used, []float64{1200, 100}) {
		t.Fatalf("stats offered %d passed %d used %v, want 2, 2, [1200 100] (refused TryTakes not counted)", st.Offered, st.Passed, st.Used)
	}
}

func BenchmarkTryTake(b *testing.B) {
	m, _ := NewMulti(RealClock{}, []float64{1e15, 1e15, 1e15})
	cost := []float64{100, 8000, 100}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := m.TryTake(time.Now(), cost); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
