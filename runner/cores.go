package runner

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// CoreRoundTrip measures how long a cache line takes to go from one core
// to another and back: two goroutines, each locked to a thread of its
// own, hand a counter to each other rounds times, in five batches; it
// returns the median batch's time per round trip. On a virtual machine
// whose two virtual CPUs the host sometimes places close together and
// sometimes far apart, this tells the two apart (about 45 ns against
// about 450 ns on the machine docs/results.md was measured on), and
// with them how much every pass split among the simulator's workers
// pays for reading what another worker wrote. ok is false with one
// core (GOMAXPROCS), or when a batch takes longer than a second (the
// threads did not run at once).
func CoreRoundTrip(ctx context.Context, rounds int) (rtt time.Duration, ok bool) {
	if runtime.GOMAXPROCS(0) < 2 || rounds < 1 {
		return 0, false
	}
	batches := make([]time.Duration, 0, 5)
	for range 5 {
		if ctx.Err() != nil {
			return 0, false
		}
		d, ok := pingPong(rounds, time.Second)
		if !ok {
			return 0, false
		}
		batches = append(batches, d/time.Duration(rounds))
	}
	slices.Sort(batches)
	return batches[len(batches)/2], true
}

// pingPong times rounds round trips of a counter between two threads,
// giving up after limit.
func pingPong(rounds int, limit time.Duration) (time.Duration, bool) {
	var turn atomic.Int64
	var late atomic.Bool // a thread gave up
	deadline := time.Now().Add(limit)
	var wg sync.WaitGroup
	player := func(first int64) {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := int64(0); i < int64(rounds); i++ {
			want := 2*i + first
			for spins := 0; turn.Load() != want; spins++ {
				if spins&1023 == 1023 && (late.Load() || time.Now().After(deadline)) {
					late.Store(true)
					return
				}
			}
			turn.Store(want + 1)
		}
	}
	wg.Add(2)
	start := time.Now()
	go player(0)
	go player(1)
	wg.Wait()
	return time.Since(start), !late.Load()
}
