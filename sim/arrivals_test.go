package sim

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// arrivalEngine builds an engine for one flows workload of small flows
// (1 KB: each finishes within the tick it starts, so the network never
// holds many) from a-tx to a-rx at rate flows/s.
func arrivalEngine(t *testing.T, seed int, rate float64, dt, dur time.Duration, phase string) *engine {
	t.Helper()
	y := fmt.Sprintf(`
name: arrivals
duration: %v
dt: %v
seed: %d
topology:
  kind: two-tier
  two_tier: {racks: 1, servers_per_rack: 2, edge: 1Gbps}
tenants:
  - name: A
    guarantee: 450Mbps
    vms: [{name: a-tx, server: s1}, {name: a-rx, server: s2}]
workloads:
  - {tenant: A, kind: flows, src: a-tx, dst: a-rx, arrival_rate: %g, sizes: {dist: fixed, mean: 1KB}%s}
`, dur, dt, seed, rate, phase)
	sc, err := spec.Parse([]byte(y), "arrivals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.FromSpec(sc.Topology)
	if err != nil {
		t.Fatal(err)
	}
	m, err := all.New("none", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(sc, tp, Options{Mechanism: m})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestArrivalCount runs flows workloads at rates from far below one
// arrival per tick to many per tick and checks that the number of flows
// that arrive is that of a Poisson process: within 3σ = 3·√μ of its
// mean μ = rate·T. The run's last tick starts at duration − dt, so the
// arrivals it takes are those by then: T runs from the phase's start to
// min(stop, duration − dt). With each gap counted from the tick instead
// of from the previous arrival, at most one flow arrived a tick:
// 8,644 flows instead of 20,000 at 2,000 flows/s and 1 ms ticks.
func TestArrivalCount(t *testing.T) {
	tests := []struct {
		name        string
		rate        float64 // flows/s
		dt, dur     time.Duration
		phase       string
		start, stop time.Duration // the phase (stop 0: none)
	}{
		{"2000/s at 1ms: 2 a tick", 2000, time.Millisecond, 10 * time.Second, "", 0, 0},
		{"20000/s at 1ms: 20 a tick", 20000, time.Millisecond, 2 * time.Second, "", 0, 0},
		{"1000/s at 1ms: 1 a tick", 1000, time.Millisecond, 10 * time.Second, "", 0, 0},
		{"500/s at 1ms: 0.5 a tick", 500, time.Millisecond, 10 * time.Second, "", 0, 0},
		{"50/s at 1ms: 0.05 a tick", 50, time.Millisecond, 10 * time.Second, "", 0, 0},
		{"5/s at 1ms: 0.005 a tick", 5, time.Millisecond, 60 * time.Second, "", 0, 0},
		{"3000/s at 10ms: 30 a tick", 3000, 10 * time.Millisecond, 5 * time.Second, "", 0, 0},
		{"2000/s at 1ms from 1s to 4s", 2000, time.Millisecond, 6 * time.Second, ", start: 1s, stop: 4s", time.Second, 4 * time.Second},
	}
	// Each case has a seed of its own: with one seed, every case would
	// scale the same exponential draws.
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := arrivalEngine(t, i+1, tt.rate, tt.dt, tt.dur, tt.phase)
			if err := e.run(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := e.pairs[e.pairIx[mech.PairID{Src: "a-tx", Dst: "a-rx"}]].nconn
			end := tt.dur - tt.dt
			if tt.stop > 0 && tt.stop < end {
				end = tt.stop
			}
			mu := tt.rate * (end - tt.start).Seconds()
			sigma := math.Sqrt(mu)
			t.Logf("%d flows, expected %.0f ± %.0f (3σ)", got, mu, 3*sigma)
			if math.Abs(float64(got)-mu) > 3*sigma {
				t.Errorf("%d flows arrived, want %.0f ± %.0f (3σ)", got, mu, 3*sigma)
			}
		})
	}
}

// chi2Crit is the 0.999 quantile of the χ² distribution with 19 degrees
// of freedom (20 bins, no parameter estimated: the rate is known), as in
// any table (e.g. NIST/SEMATECH e-Handbook §1.3.6.7.4: 43.820). A correct
// Poisson process exceeds it one time in a thousand; the seed is fixed.
const (
	chi2Bins = 20
	chi2Crit = 43.820
)

// TestInterArrivalTimes checks the gaps between a flows workload's
// arrival times (from its phase's start to the first arrival, and between
// consecutive arrivals) against the exponential distribution of mean
// 1/rate with a χ² goodness-of-fit test over 20 bins of equal
// probability: the gap g falls into bin ⌊20·(1 − e^(−rate·g))⌋.
// The arrival times are the engine's own (connState.arrival), taken
// tick by tick as the run takes them (fireEvents), with rates from
// below one to many arrivals a tick. Gaps rounded up to the tick fail
// it by far (every gap would fall into the top bins at 2,000/s).
func TestInterArrivalTimes(t *testing.T) {
	tests := []struct {
		name    string
		rate    float64
		dt, dur time.Duration
	}{
		{"200/s at 1ms", 200, time.Millisecond, 20 * time.Second},
		{"2000/s at 1ms", 2000, time.Millisecond, 10 * time.Second},
		{"20000/s at 1ms", 20000, time.Millisecond, time.Second},
		{"300/s at 10ms", 300, 10 * time.Millisecond, 10 * time.Second},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seed := 101 + i
			times := arrivalTimes(t, arrivalEngine(t, seed, tt.rate, tt.dt, tt.dur, ""))
			if again := arrivalTimes(t, arrivalEngine(t, seed, tt.rate, tt.dt, tt.dur, "")); fmt.Sprint(again) != fmt.Sprint(times) {
				t.Fatalf("the same scenario and seed gave different arrival times")
			}
			var counts [chi2Bins]int
			prev := time.Duration(0)
			for _, at := range times {
				g := (at - prev).Seconds()
				if g < 0 {
					t.Fatalf("arrival at %v before the previous one at %v", at, prev)
				}
				prev = at
				b := int(chi2Bins * -math.Expm1(-tt.rate*g))
				counts[min(b, chi2Bins-1)]++
			}
			n := len(times)
			want := float64(n) / chi2Bins
			chi2 := 0.0
			for _, c := range counts {
				chi2 += (float64(c) - want) * (float64(c) - want) / want
			}
			t.Logf("%d gaps, χ² = %.1f (19 df, 0.999 quantile %.2f), bins %v", n, chi2, chi2Crit, counts)
			if want < 5 {
				t.Fatalf("%d gaps: too few for the χ² test (%.1f a bin, want ≥ 5)", n, want)
			}
			if chi2 > chi2Crit {
				t.Errorf("inter-arrival times are not exponential with mean %v: χ² = %.1f > %.2f; bins %v",
					time.Duration(float64(time.Second)/tt.rate), chi2, chi2Crit, counts)
			}
		})
	}
}

// arrivalTimes runs the engine's events tick by tick, as run does (no
// physics: no flow finishes, so no connection slot is reused), and
// returns the arrival times of the flows in the order they arrived.
func arrivalTimes(t *testing.T, e *engine) []time.Duration {
	t.Helper()
	dur := time.Duration(e.sc.Duration)
	for e.now = 0; e.now < dur; e.now += e.dt {
		if err := e.fireEvents(); err != nil {
			t.Fatal(err)
		}
	}
	var times []time.Duration
	for _, c := range e.conns {
		if c.arrival > c.start || c.start-c.arrival >= e.dt {
			t.Fatalf("flow arrived at %v started at %v: not the tick that took it (dt %v)", c.arrival, c.start, e.dt)
		}
		times = append(times, c.arrival)
	}
	return times
}
