package tokenbucket

import (
	"testing"
	"time"
)

// Pulsar §4.4's example. A flow f crosses two resources and is allocated
// ⟨800, 5000⟩ tokens per control interval; the control interval is 1 s, so
// its buckets refill at 800 and 5000 tokens/s (8 and 50 tokens per 10 ms
// refill), depth rate × 1 s.
//
// Cost assumptions: resource 1 carries the READ request messages, charged 80
// tokens each whatever the read size (the paper's "request messages are the
// same size": ten of them are the 800 of resource 1); resource 2 carries the
// responses, charged one token per byte with 1 KB = 1000 B as in the paper
// (ten 500 B READs = 5000 tokens, ten 4 KB READs = 40000). So a 500 B READ
// costs ⟨80, 500⟩ and a 4 KB READ ⟨80, 4000⟩.
//
// Interval i starts with empty buckets (the flow used its previous
// allocation) and consists of the 100 refill boundaries at 10, 20, …,
// 1000 ms; the ten READs arrive at its start.
var (
	pulsarRates = []float64{800, 5000}
	read500B    = []float64{80, 500}
	read4KB     = []float64{80, 4000}
)

func TestPulsarExample(t *testing.T) {
	for _, tc := range []struct {
		name       string
		multi      bool // multi-resource bucket, else a single bucket on resource 1
		cost       []float64
		wantPassed int
		wantUse2   float64 // tokens of resource 2 consumed in interval i
	}{
		{"500B READs, multi-resource", true, read500B, 10, 5000},
		{"500B READs, single-resource on r1", false, read500B, 10, 5000},
		// The paper: "only one 4 KB READ is sent during interval i, and the
		// remaining requests are queued".
		{"4KB READs, multi-resource", true, read4KB, 1, 4000},
		// The paper: "the rate-limiter would still let ten requests go
		// through ... 8× its allocation on resource 2".
		{"4KB READs, single-resource on r1", false, read4KB, 10, 40000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewFakeClock(t0)
			var pass func() int // lets through what may pass now; returns how many
			offered := 10
			if tc.multi {
				m, err := NewMulti(c, pulsarRates)
				if err != nil {
					t.Fatal(err)
				}
				if ok, _ := m.Offer(Request{Cost: []float64{800, 5000}}); !ok { // the previous interval's use
					t.Fatal("full buckets refused a full allocation")
				}
				queued := 0
				for i := 0; i < offered; i++ {
					ok, err := m.Offer(Request{Cost: tc.cost, ID: uint64(i)})
					if err != nil || ok {
						t.Fatalf("Offer on empty buckets = %v, %v; want queued", ok, err)
					}
					queued++
				}
				var buf []Request
				next := uint64(0)
				pass = func() int {
					buf = m.Release(buf[:0])
					for _, r := range buf {
						if r.ID != next {
							t.Fatalf("released %d, want FIFO %d", r.ID, next)
						}
						next++
					}
					return len(buf)
				}
				defer func() {
					if got, want := m.Queued(), offered-tc.wantPassed; got != want {
						t.Errorf("Queued = %d, want %d", got, want)
					}
					q := m.QueuedCost()
					for r := range q {
						if want := float64(offered-tc.wantPassed) * tc.cost[r]; q[r] != want {
							t.Errorf("QueuedCost[%d] = %v, want %v", r, q[r], want)
						}
					}
				}()
			} else {
				b, err := NewBucket(c, pulsarRates[0])
				if err != nil {
					t.Fatal(err)
				}
				b.Take(800)
				waiting := offered // the caller's own FIFO of READs
				pass = func() int {
					n := 0
					for waiting > 0 && b.Take(tc.cost[0]) {
						waiting--
						n++
					}
					return n
				}
			}

			passed := 0
			for step := 1; step <= 100; step++ {
				c.Advance(10 * time.Millisecond)
				passed += pass()
			}
			if passed != tc.wantPassed {
				t.Fatalf("READs let through in interval i = %d, want %d", passed, tc.wantPassed)
			}
			if use := float64(passed) * tc.cost[1]; use != tc.wantUse2 {
				t.Fatalf("resource 2 use = %v, want %v (%.1f× the allocation)", use, tc.wantUse2, use/pulsarRates[1])
			}
		})
	}
}

// TestPulsarExampleSwitch runs the flow through the workload switch and
// checks the release times and the demand-estimation inputs (§4.2) the
// multi-resource bucket reports at the end of each interval.
func TestPulsarExampleSwitch(t *testing.T) {
	c := NewFakeClock(t0)
	m, err := NewMulti(c, pulsarRates)
	if err != nil {
		t.Fatal(err)
	}
	// Interval i-1: ten 500 B READs use the whole allocation.
	for i := 0; i < 10; i++ {
		if ok, err := m.Offer(Request{Cost: read500B}); !ok || err != nil {
			t.Fatalf("500 B READ %d: %v, %v; want let through", i, ok, err)
		}
	}
	st := m.Stats()
	if st.Used[0] != 800 || st.Used[1] != 5000 || st.Passed != 10 {
		t.Fatalf("interval i-1: used %v passed %d, want [800 5000] 10", st.Used, st.Passed)
	}
	// Interval i onwards: the flow switches to 4 KB READs, ten per interval.
	var (
		buf      []Request
		passedAt []time.Duration
		used2    float64
	)
	for interval := 0; interval < 5; interval++ {
		for i := 0; i < 10; i++ {
			if _, err := m.Offer(Request{Cost: read4KB}); err != nil {
				t.Fatal(err)
			}
		}
		for step := 0; step < 100; step++ {
			c.Advance(10 * time.Millisecond)
			buf = m.Release(buf[:0])
			for range buf {
				passedAt = append(passedAt, c.Now().Sub(t0))
			}
		}
		st := m.Stats()
		// Resource 2 limits the flow (5000 tokens per interval, 4000 per
		// READ): its use since the switch never exceeds the allocation.
		used2 += st.Used[1]
		if limit := float64(interval+1) * pulsarRates[1]; used2 > limit {
			t.Fatalf("after %d intervals: used %v of resource 2, allocation %v", interval+1, used2, limit)
		}
		if got, want := st.Backlog[1], float64(m.Queued())*4000; got != want {
			t.Fatalf("interval %d: backlog %v, want %v", interval, got, want)
		}
		if interval == 0 {
			// One READ at 800 ms; 9 queued at the end. Queued tokens: 10
			// READs for 800 ms, then 9 for 200 ms.
			wantAvg := []float64{(800*0.8 + 720*0.2), (40000*0.8 + 36000*0.2)}
			if st.Used[0] != 80 || st.Used[1] != 4000 || st.Backlog[0] != 720 || st.Backlog[1] != 36000 ||
				!approx(st.AvgQueued[0], wantAvg[0]) || !approx(st.AvgQueued[1], wantAvg[1]) {
				t.Fatalf("interval i: stats %+v, want used [80 4000], backlog [720 36000], avg queued %v", st, wantAvg)
			}
		}
	}
	// 4 KB READs leave every 800 ms: 5000 tokens/s ÷ 4000 tokens.
	want := []time.Duration{800, 1600, 2400, 3200, 4000, 4800}
	if len(passedAt) != len(want) {
		t.Fatalf("passed at %v, want %v ms", passedAt, want)
	}
	for i := range want {
		if passedAt[i] != want[i]*time.Millisecond {
			t.Fatalf("passed at %v, want %v ms", passedAt, want)
		}
	}
}

func approx(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= 1e-9*max(1, b, -b)
}
