package sim

import (
	"sync/atomic"
	"testing"
	"time"
)

// Every part of every job runs exactly once, whatever the workers, with
// helpers that poll, sleep between jobs, or are not called to a job; a
// job started inside another runs on its caller.
func TestPool(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 3, 8} {
		p := newPool(workers)
		for job := range 300 {
			n := job % 37
			w := 1 + job%(workers+2)
			counts := make([]atomic.Int32, n)
			p.Run(w, n, func(k int) {
				counts[k].Add(1)
				if k == 0 && job%5 == 0 {
					p.Run(w, 3, func(int) { counts[k].Add(10) })
				}
			})
			for k := range counts {
				want := int32(1)
				if k == 0 && job%5 == 0 {
					want = 31
				}
				if c := counts[k].Load(); c != want {
					t.Fatalf("%d workers, job %d (w %d, n %d): part %d ran %d times, want %d", workers, job, w, n, k, c, want)
				}
			}
			if job%50 == 49 {
				time.Sleep(2 * poolSpin) // the helpers go to sleep
			}
		}
		p.Close()
	}
	var p *pool // a nil pool runs on the caller
	ran := 0
	p.Run(4, 5, func(int) { ran++ })
	p.Close()
	if ran != 5 {
		t.Fatalf("nil pool: %d parts ran, want 5", ran)
	}
}
