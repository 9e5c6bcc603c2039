package sim

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool is the run's helper goroutines, kept for the whole run so that a
// parallel part (the agents' steps, the accumulators, the samples, the
// passes of a re-solve) does not wait for new goroutines to be scheduled
// and an idle core to wake: a helper that has just finished keeps
// polling for the next part for up to poolSpin before it sleeps. The
// calling goroutine works too. The parts of a job are independent, so
// results do not depend on which goroutine ran which part.
type pool struct {
	helpers []*helper
	busy    atomic.Bool // a job is running (a nested one runs serially)

	// the current job, written before its helpers are called
	n    int // parts
	fn   func(k int)
	next atomic.Int64 // the next part to take

	left    atomic.Int32 // helpers of the current job not yet done
	waiting atomic.Bool  // the caller sleeps on done
	done    chan struct{}
	stop    atomic.Bool
	wg      sync.WaitGroup
}

type helper struct {
	gen      atomic.Uint64 // jobs this helper was called to
	sleeping atomic.Bool
	wake     chan struct{}
}

// poolSpin is how long an idle helper polls for the next job before it
// sleeps: longer than the gaps between the parallel parts of a step or a
// re-solve, short enough that a helper of an idle run gives its core
// back at once.
const poolSpin = 50 * time.Microsecond

// newPool starts workers−1 helpers (none for workers ≤ 1). Close stops them.
func newPool(workers int) *pool {
	p := &pool{done: make(chan struct{}, 1)}
	for i := 0; i < workers-1; i++ {
		h := &helper{wake: make(chan struct{}, 1)}
		p.helpers = append(p.helpers, h)
		p.wg.Add(1)
		go p.serve(h)
	}
	return p
}

// Close stops the helpers and waits for them to return.
func (p *pool) Close() {
	if p == nil {
		return
	}
	p.stop.Store(true)
	for _, h := range p.helpers {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
	p.wg.Wait()
}

// Run calls fn(k) for every k in [0, n), on up to w goroutines (the
// caller's and w−1 helpers), each taking the next k when it is free, and
// returns when all have returned. A nil pool, or a job started inside
// another, runs on the caller alone.
func (p *pool) Run(w, n int, fn func(k int)) {
	if p != nil {
		w = min(w, n, len(p.helpers)+1)
	}
	if p == nil || w <= 1 || !p.busy.CompareAndSwap(false, true) {
		for k := range n {
			fn(k)
		}
		return
	}
	defer p.busy.Store(false)
	p.n, p.fn = n, fn
	p.next.Store(0)
	p.left.Store(int32(w - 1))
	for _, h := range p.helpers[:w-1] {
		h.gen.Add(1)
		if h.sleeping.Load() {
			select {
			case h.wake <- struct{}{}:
			default:
			}
		}
	}
	p.work()
	// Wait for the helpers: poll while they finish their last parts,
	// then sleep.
	for start := time.Now(); p.left.Load() > 0; {
		if time.Since(start) < poolSpin {
			runtime.Gosched()
			continue
		}
		p.waiting.Store(true)
		if p.left.Load() > 0 {
			<-p.done
		}
		p.waiting.Store(false)
		// a helper may have sent after we stopped waiting: drain it
		select {
		case <-p.done:
		default:
		}
	}
	p.fn = nil
}

func (p *pool) work() {
	for {
		k := int(p.next.Add(1)) - 1
		if k >= p.n {
			return
		}
		p.fn(k)
	}
}

// serve is a helper's loop: wait to be called to a job, take its parts,
// report done.
func (p *pool) serve(h *helper) {
	defer p.wg.Done()
	seen := uint64(0)
	for {
		start := time.Now()
		for h.gen.Load() == seen {
			if p.stop.Load() {
				return
			}
			if time.Since(start) < poolSpin {
				runtime.Gosched()
				continue
			}
			h.sleeping.Store(true)
			if h.gen.Load() == seen && !p.stop.Load() {
				<-h.wake
			}
			h.sleeping.Store(false)
			start = time.Now()
		}
		seen = h.gen.Load()
		p.work()
		if p.left.Add(-1) == 0 && p.waiting.Load() {
			select {
			case p.done <- struct{}{}:
			default:
			}
		}
	}
}
