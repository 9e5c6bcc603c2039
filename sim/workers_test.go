package sim_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/sim"
)

// Agents of a mech.Concurrent mechanism step in parallel, and large
// runs add up their accumulators and samples in parallel; the results do
// not depend on how many workers.
func TestWorkersSameResults(t *testing.T) {
	t.Run("600 pairs", func(t *testing.T) { workersSameResults(t, 64, 600, 300*time.Millisecond) })
	// enough pairs for the simulator's own loops to be split
	t.Run("5000 pairs", func(t *testing.T) { workersSameResults(t, 256, 5000, 100*time.Millisecond) })
}

func workersSameResults(t *testing.T, vms, conns int, d time.Duration) {
	s, err := runner.DatacenterScenario(vms, 4, conns, d)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Reservations(s)
	if err != nil {
		t.Fatal(err)
	}
	var first any
	for _, w := range []int{1, 2, 5} {
		m, err := all.New("elasticswitch", nil)
		if err != nil {
			t.Fatal(err)
		}
		in, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m, Reservations: res, Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		if len(in.Samples) == 0 || len(in.Pairs) != conns {
			t.Fatalf("%d workers: %d samples, %d pairs", w, len(in.Samples), len(in.Pairs))
		}
		if first == nil {
			first = in
			continue
		}
		if !reflect.DeepEqual(first, in) {
			t.Errorf("%d workers: results differ from one worker's", w)
		}
	}
}
