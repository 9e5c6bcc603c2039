package tokenbucket

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkOffer measures the per-request cost of the enforcer a proxy puts
// every request through.
//
//   - pass: every request fits (the common case below the allocation), with
//     the real clock.
//   - queue+release: the flow is above its allocation: requests queue and a
//     Release per 10 ms refill lets 64 of them through (the cost shown is per
//     request, Offer plus its share of Release and of the fake clock).
func BenchmarkOffer(b *testing.B) {
	for _, k := range []int{2, 8} {
		b.Run(fmt.Sprintf("pass/k=%d", k), func(b *testing.B) {
			rates := make([]float64, k)
			cost := make([]float64, k)
			for r := range rates {
				rates[r], cost[r] = 1e15, 1
			}
			m := newMulti(b, RealClock{}, rates)
			req := Request{Cost: cost}
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := m.Offer(req); !ok || err != nil {
					b.Fatal("refused")
				}
			}
		})
		b.Run(fmt.Sprintf("queue+release/k=%d", k), func(b *testing.B) {
			rates := make([]float64, k)
			cost := make([]float64, k)
			for r := range rates {
				rates[r], cost[r] = 6400, 1 // 64 requests per 10 ms
			}
			c := NewFakeClock(t0)
			m := newMulti(b, c, rates)
			req := Request{Cost: cost}
			buf := make([]Request, 0, 128)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Offer(req); err != nil {
					b.Fatal(err)
				}
				if i++; i%64 == 0 {
					c.Advance(10 * time.Millisecond)
					buf = m.Release(buf[:0])
				}
			}
		})
	}
}

// BenchmarkOfferParallel is BenchmarkOffer/pass with all cores offering to
// one Multi (the mutex contended).
func BenchmarkOfferParallel(b *testing.B) {
	m := newMulti(b, RealClock{}, []float64{1e15, 1e15})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := Request{Cost: []float64{1, 1}}
		for pb.Next() {
			if ok, err := m.Offer(req); !ok || err != nil {
				b.Error("refused")
				return
			}
		}
	})
}

// BenchmarkBucketTake measures Bucket.Take with the real clock.
func BenchmarkBucketTake(b *testing.B) {
	bk, err := NewBucket(RealClock{}, 1e15)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !bk.Take(1) {
			b.Fatal("refused")
		}
	}
}
