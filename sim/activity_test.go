package sim_test

import (
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
)

// Every sample says when in it each pair had traffic to offer, and a pair
// on for part of a sample is guaranteed only for that part: static, which
// holds every guarantee, is compliant in samples where flows start and stop.
func TestPairActivity(t *testing.T) {
	in := run(t, header+`outputs: {sample: 100ms}
workloads:
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx, phases: [{start: 250ms, stop: 1250ms}]}
  - {tenant: B, kind: udp, src: b-tx, dst: b-rx, rate: 600Mbps, phases: [{start: 430ms, stop: 470ms}]}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx, phases: [{start: 1970ms}]}
`, "static")
	pair := map[string]int{}
	for i, p := range in.Pairs {
		pair[p.Src] = i
	}
	at := func(end time.Duration, src string) eval.PairSample {
		for _, s := range in.Samples {
			if s.T == end {
				return s.Pairs[pair[src]]
			}
		}
		t.Fatalf("no sample ending at %v", end)
		return eval.PairSample{}
	}
	inf := math.Inf(1)
	for _, c := range []struct {
		end          time.Duration
		src          string
		demand       float64 // Mbps
		active, from float64
	}{
		{200 * time.Millisecond, "a-tx", 0, 0, 0},
		{300 * time.Millisecond, "a-tx", inf, 0.5, 0.5},
		{800 * time.Millisecond, "a-tx", inf, 1, 0},
		{1300 * time.Millisecond, "a-tx", inf, 0.5, 0},
		{500 * time.Millisecond, "b-tx", 240, 0.4, 0.3},
		{600 * time.Millisecond, "b-tx", 0, 0, 0},
		// bulk TCP on for 30% of the sample: unbounded while active
		{2000 * time.Millisecond, "b-tx", inf, 0.3, 0.7},
	} {
		ps := at(c.end, c.src)
		d := ps.Demand / 1e6
		if !(d == c.demand || math.Abs(d-c.demand) < 1e-6) || math.Abs(ps.Active-c.active) > 1e-9 || math.Abs(ps.ActiveFrom-c.from) > 1e-9 {
			t.Errorf("%s at %v: demand %v Mbps, active %v from %v; want %v, %v from %v", c.src, c.end, d, ps.Active, ps.ActiveFrom, c.demand, c.active, c.from)
		}
	}
	r, err := eval.Evaluate(*in)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range r.Tenants {
		if tr.Compliance < 1 {
			t.Errorf("static: tenant %s compliance %.3f, want 1", tr.Name, tr.Compliance)
		}
	}
}
