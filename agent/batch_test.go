package agent

import (
	"reflect"
	"testing"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// unbatched hides a data path's batched writes (datapath.RateBatcher):
// the agent then writes pair rates one by one.
type unbatched struct{ datapath.Host }

// TestBatchedLimits: the agent gives the data path every step's pair
// limits in one batch (datapath.RateBatcher), and with writes refused
// within a batch — the first, the last, all — what is in force, the
// driver core's stats and the failed-write metric are those of the same
// data path written one pair at a time: a refused limit is reported,
// never taken for in force, and re-applied at the next step.
func TestBatchedLimits(t *testing.T) {
	vms := append(append([]vmSpec{}, t1VMs...), t2VMs...)
	m := testModel(vms...)
	limits := []mech.Limit{
		{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a1", Dst: "b1"}, Rate: 40e6},
		{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a2", Dst: "b2"}, Rate: 60e6},
	}
	for _, tc := range []struct {
		name   string
		refuse int // writes refused from the first limit write of step 1
		skip   int // writes let through before those refused
	}{
		{"none refused", 0, 0},
		{"first refused", 1, 0},
		{"last refused", 1, 1},
		{"all refused", 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				limits  map[datapath.Pair]float64
				stats   []any
				failed  float64
				batches int
			}
			var res [2]result
			for i, batched := range []bool{true, false} {
				p := fake.New(fake.Options{Limiters: true})
				var path datapath.Host = p
				if !batched {
					path = unbatched{p}
				}
				a := newTestAgent(t, Config{Host: "h1", Model: m, Mechanism: once(mech.Actions{Limits: limits}, nil), Path: path})
				s := newStepper(a)
				b0 := p.Batches()
				// let skip writes of the step through, then refuse
				p.RefuseWritesAfter(tc.skip, tc.refuse)
				err := s.step()
				if (tc.refuse > 0) != (err != nil) {
					t.Errorf("batched=%v: step 1 error %v with %d writes refused", batched, err, tc.refuse)
				}
				mid := p.Limits()
				if n := len(mid); n != 2-tc.refuse {
					t.Errorf("batched=%v: %d limits in force after step 1 (%v), want %d", batched, n, mid, 2-tc.refuse)
				}
				s.steps(t, 1)
				st := a.Stats()
				res[i] = result{limits: p.Limits(), stats: []any{st.Writes, st.Failed, st.Retries}, failed: errorsCounted(t, a),
					batches: p.Batches() - b0}
			}
			if !reflect.DeepEqual(res[0].limits, res[1].limits) || !reflect.DeepEqual(res[0].stats, res[1].stats) || res[0].failed != res[1].failed {
				t.Errorf("batched %+v, one by one %+v", res[0], res[1])
			}
			if want := map[datapath.Pair]float64{a1b1: 40e6, a2b2: 60e6}; !reflect.DeepEqual(res[0].limits, want) {
				t.Errorf("in force %v after the retry, want %v", res[0].limits, want)
			}
			wantBatches := 1
			if tc.refuse > 0 {
				wantBatches = 2 // the retry
			}
			if res[0].batches != wantBatches || res[1].batches != 0 {
				t.Errorf("%d batches (one by one: %d), want %d", res[0].batches, res[1].batches, wantBatches)
			}
		})
	}
}

// errorsCounted sums the agent's bulkhead_agent_errors_total (0 before
// the first).
func errorsCounted(t *testing.T, a *Agent) float64 {
	t.Helper()
	mfs, err := a.met.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == "bulkhead_agent_errors_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
