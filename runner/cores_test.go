package runner

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// The round trip is measured on two cores, is positive and well under
// the batch's limit; on one core, or once cancelled, there is none.
// Other tests may hold a core meanwhile (a batch then stalls and gives
// up), so the two-core measurement has a few tries.
func TestCoreRoundTrip(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Fatalf("the test needs two CPUs, the machine has %d", runtime.NumCPU())
	}
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	var rtt time.Duration
	ok := false
	for try := 0; try < 5 && !ok; try++ {
		rtt, ok = CoreRoundTrip(context.Background(), 5000)
	}
	if !ok || rtt <= 0 || rtt > 50*time.Microsecond {
		t.Fatalf("round trip %v (ok %v): want a positive figure under 50 µs", rtt, ok)
	}
	runtime.GOMAXPROCS(1)
	if rtt, ok := CoreRoundTrip(context.Background(), 20000); ok {
		t.Fatalf("one core: got a round trip of %v, want none", rtt)
	}
	runtime.GOMAXPROCS(2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := CoreRoundTrip(ctx, 20000); ok {
		t.Fatal("a cancelled context: got a round trip, want none")
	}
}
