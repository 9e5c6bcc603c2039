package ra_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch/ra"
	"github.com/bulkhead-dc/bulkhead/spec"
)

const period = 15 * time.Millisecond

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// plain is the RA without Hold-Increase and Rate-Caution (Seawall).
func plain() ra.Config {
	c := ra.Defaults()
	c.HoldIncrease, c.RateCaution = false, false
	return c
}

// stepper drives one flow period after period.
type stepper struct {
	c   ra.Config
	f   ra.Flow
	k   int
	in  ra.Input
	out []float64
}

func (s *stepper) step(congested bool) float64 {
	s.in.Now = time.Duration(s.k) * period
	s.in.Congested = congested
	s.k++
	r := s.f.Step(&s.c, s.in)
	s.out = append(s.out, r)
	return r
}

func TestConvexIncreaseWithoutCongestion(t *testing.T) {
	s := &stepper{c: plain(), in: ra.Input{Floor: 100e6, Weight: 1, Demanding: true}}
	if r := s.step(false); r != 100e6 {
		t.Fatalf("start at %g, want the floor 100e6", r)
	}
	// No congestion yet: convex, n·w·A in the n-th period.
	want := []float64{100.5e6, 101.5e6, 103e6, 105e6}
	for i, w := range want {
		if r := s.step(false); !near(r, w) {
			t.Fatalf("period %d: %g, want %g", i+1, r, w)
		}
	}
	// Weight 2 doubles the increments.
	s2 := &stepper{c: plain(), in: ra.Input{Floor: 100e6, Weight: 2, Demanding: true}}
	s2.step(false)
	if r := s2.step(false); !near(r, 101e6) {
		t.Errorf("weight 2: %g, want 101e6", r)
	}
	// A pair that does not use its limit is not increased.
	s3 := &stepper{c: plain(), in: ra.Input{Floor: 100e6, Weight: 1}}
	s3.step(false)
	if r := s3.step(false); r != 100e6 {
		t.Errorf("not demanding: %g, want 100e6", r)
	}
}

// TestStartIncrease: a flow that has met no congestion event climbs with
// StartIncrease; from its first event on, with Increase (once past the
// concave approach to its goal).
func TestStartIncrease(t *testing.T) {
	c := plain()
	c.StartIncrease = 2.5e6
	s := &stepper{c: c, in: ra.Input{Floor: 100e6, Weight: 1, Demanding: true}}
	s.step(false)
	for i, w := range []float64{102.5e6, 107.5e6, 115e6} {
		if r := s.step(false); !near(r, w) {
			t.Fatalf("before any congestion, period %d: %g, want %g (n·w·StartIncrease)", i+1, r, w)
		}
	}
	cut := s.step(true) // goal 115e6, rate cut to 69e6 → the floor 100e6
	if !near(cut, 100e6) {
		t.Fatalf("after the event: %g, want the floor 100e6", cut)
	}
	// Concave back towards the goal for T_S, then convex with Increase.
	for k := 0; k < int(1.5/period.Seconds())+2; k++ {
		s.step(false)
	}
	prev := s.out[len(s.out)-1]
	r1 := s.step(false)
	r2 := s.step(false)
	if d1, d2 := r1-prev, r2-r1; !near(d2-d1, c.Increase) {
		t.Errorf("convex after congestion: increments %g then %g, want them to grow by Increase (%g), not StartIncrease", d1, d2, c.Increase)
	}
	// Without StartIncrease the start is the paper's.
	p := &stepper{c: plain(), in: ra.Input{Floor: 100e6, Weight: 1, Demanding: true}}
	p.step(false)
	if r := p.step(false); !near(r, 100.5e6) {
		t.Errorf("StartIncrease 0: %g, want 100.5e6 (Increase)", r)
	}
}

func TestDecreaseByAlphaNeverBelowFloor(t *testing.T) {
	c := plain()
	f := ra.Flow{Start: 200e6}
	in := ra.Input{Floor: 100e6, Weight: 1, Demanding: true}
	if r := f.Step(&c, in); r != 200e6 {
		t.Fatalf("start %g, want 200e6", r)
	}
	in.Now, in.Congested = period, true
	if r := f.Step(&c, in); !near(r, 120e6) {
		t.Errorf("after congestion %g, want (1-0.4)·200e6 = 120e6", r)
	}
	if f.Goal != 200e6 {
		t.Errorf("goal %g, want the rate at congestion, 200e6", f.Goal)
	}
	in.Now = 2 * period
	if r := f.Step(&c, in); r != 100e6 {
		t.Errorf("after second congestion %g, want the floor 100e6 (0.6·120e6 = 72e6 is below it)", r)
	}
	for i := 0; i < 20; i++ {
		in.Now += period
		if r := f.Step(&c, in); r < 100e6 {
			t.Fatalf("rate %g below the floor", r)
		}
	}
}

func TestConcaveTowardsGoalThenConvex(t *testing.T) {
	c := plain()
	f := ra.Flow{Start: 200e6}
	in := ra.Input{Floor: 50e6, Weight: 1, Demanding: true}
	f.Step(&c, in)
	in.Now, in.Congested = period, true
	f.Step(&c, in) // 120e6, goal 200e6
	in.Congested = false
	in.Now = 2 * period
	// Δt = 15ms / 1.5 = 0.01: V = min(1, w·δ)·(goal − r)·(1 − Δt)³.
	want := 120e6 + 0.75*80e6*math.Pow(0.99, 3)
	if r := f.Step(&c, in); !near(r, want) {
		t.Fatalf("concave step %g, want %g", r, want)
	}
	for in.Now+period < period+1500*time.Millisecond {
		in.Now += period
		f.Step(&c, in)
		if f.Rate > f.Goal {
			t.Fatalf("concave phase crossed the goal at %v: %g > %g", in.Now, f.Rate, f.Goal)
		}
	}
	// Δt ≥ 1: convex again, from n = 1.
	before := f.Rate
	in.Now += period
	if r := f.Step(&c, in); !near(r-before, 0.5e6) {
		t.Errorf("first convex step +%g, want +0.5e6", r-before)
	}
}

// holdPeriods counts the periods after one congestion event during which
// the flow does not increase.
func holdPeriods(t *testing.T, c ra.Config, w float64) int {
	t.Helper()
	f := ra.Flow{Start: 450e6 * w * 2}
	in := ra.Input{Floor: 1e6, Weight: w, Demanding: true}
	f.Step(&c, in)
	in.Now, in.Congested = period, true
	f.Step(&c, in)
	in.Congested = false
	held := 0
	for i := 0; i < 1000; i++ {
		in.Now += period
		before := f.Rate
		if f.Step(&c, in) > before {
			return held
		}
		held++
	}
	t.Fatalf("w=%g: never increased again", w)
	return 0
}

func TestHoldIncrease(t *testing.T) {
	c := plain()
	c.HoldIncrease = true
	// One event holds the rate ⌈1/w⌉ periods: inversely proportional to
	// the guarantee (w = B / 450 Mbps).
	for _, tc := range []struct {
		w    float64
		want int
	}{{1, 1}, {0.5, 2}, {0.1, 10}, {0.01, 100}} {
		if got := holdPeriods(t, c, tc.w); got != tc.want {
			t.Errorf("w=%g: held %d periods, want %d", tc.w, got, tc.want)
		}
	}
	if got := holdPeriods(t, plain(), 0.1); got != 0 {
		t.Errorf("without Hold-Increase: held %d periods, want 0", got)
	}
	// Repeated events hold longer (logarithmically).
	f := ra.Flow{Start: 100e6}
	in := ra.Input{Floor: 1e6, Weight: 0.1, Demanding: true}
	f.Step(&c, in)
	for i := 0; i < 5; i++ {
		in.Now += period
		in.Congested = true
		f.Step(&c, in)
	}
	in.Congested = false
	held := 0
	for ; held < 1000; held++ {
		in.Now += period
		before := f.Rate
		if f.Step(&c, in) > before {
			break
		}
	}
	if held <= 10 {
		t.Errorf("5 events held %d periods, want more than the 10 of one event", held)
	}
}

func TestRateCaution(t *testing.T) {
	c := plain()
	c.RateCaution = true
	inc := func(rate float64) float64 {
		f := ra.Flow{Start: rate}
		in := ra.Input{Floor: 100e6, Weight: 1, Demanding: true}
		f.Step(&c, in)
		in.Now = period
		return f.Step(&c, in) - rate
	}
	// V' = V·max(1 − C·(R − B)/B, C_min), V = 0.5 Mbps (first convex step).
	for _, tc := range []struct{ rate, factor float64 }{
		{100e6, 1}, {150e6, 0.75}, {200e6, 0.5}, {300e6, 0.3}, {1000e6, 0.3},
	} {
		if got := inc(tc.rate); !near(got, 0.5e6*tc.factor) {
			t.Errorf("at %g: increase %g, want %g", tc.rate, got, 0.5e6*tc.factor)
		}
	}
}

func TestWeightAndDemanding(t *testing.T) {
	c := ra.Defaults()
	if w := ra.Weight(450e6, &c); w != 1 {
		t.Errorf("weight of 450 Mbps = %g, want 1", w)
	}
	if w := ra.Weight(0, &c); !(w > 0) {
		t.Errorf("weight of 0 = %g, want > 0", w)
	}
	for _, tc := range []struct {
		rate, limit float64
		bound, want bool
	}{
		{10, 100, true, true}, {95, 100, false, true}, {50, 100, false, false}, {50, math.Inf(1), false, false},
	} {
		if got := ra.Demanding(tc.rate, tc.limit, tc.bound); got != tc.want {
			t.Errorf("Demanding(%g, %g, %v) = %v", tc.rate, tc.limit, tc.bound, got)
		}
	}
}

func TestParse(t *testing.T) {
	all := append(ra.CoreParams(), ra.ImprovementParams()...)
	c := ra.Defaults()
	if err := ra.Parse(spec.Params{"aggressive": true}, &c, all...); err != nil {
		t.Fatal(err)
	}
	if c.Increase != 2.5e6 || c.TimeScale != 2 {
		t.Errorf("aggressive: A %g T_S %g, want 2.5e6 and 2", c.Increase, c.TimeScale)
	}
	c = ra.Defaults()
	if err := ra.Parse(spec.Params{"aggressive": true, "increase": "1Mbps", "hold_increase": false,
		"congestion": "receiver", "ra_period": "10ms", "alpha": 0.5}, &c, all...); err != nil {
		t.Fatal(err)
	}
	if c.Increase != 1e6 || c.TimeScale != 2 || c.HoldIncrease || c.Congestion != ra.FromReceiver || c.Period != 10*time.Millisecond || c.Alpha != 0.5 {
		t.Errorf("parsed %+v", c)
	}
	for _, tc := range []struct {
		p    spec.Params
		want string
	}{
		{spec.Params{"alpha": "x"}, `mechanism.params.alpha: expected a number, got "x"`},
		{spec.Params{"alpha": 1.5}, "mechanism.params.alpha: must be in (0, 1), got 1.5"},
		{spec.Params{"increase": "fast"}, `mechanism.params.increase: expected a rate such as "450Mbps", got "fast"`},
		{spec.Params{"congestion": "ecn"}, `mechanism.params.congestion: expected egress, receiver or both, got "ecn"`},
		{spec.Params{"hold_increase": "yes"}, `mechanism.params.hold_increase: expected true or false, got "yes"`},
		{spec.Params{"gamma": 1}, "mechanism.params.gamma: must be in (0, 1), got 1"},
		{spec.Params{"caution_min": 0}, "mechanism.params.caution_min: must be in (0, 1], got 0"},
		{spec.Params{"ra_period": "0"}, "mechanism.params.ra_period: must be positive, got 0s"},
	} {
		c := ra.Defaults()
		err := ra.Parse(tc.p, &c, all...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want %q", tc.p, err, tc.want)
		}
		if len(spec.FieldErrors(err)) == 0 {
			t.Errorf("Parse(%v): no *spec.FieldError in %v", tc.p, err)
		}
	}
	// Parameters not asked for are not read.
	c = ra.Defaults()
	if err := ra.Parse(spec.Params{"gamma": "x"}, &c, ra.CoreParams()...); err != nil {
		t.Errorf("gamma read though not asked for: %v", err)
	}
}

func TestDetectorReceiverFeedback(t *testing.T) {
	hostOf := func(vm string) string { return map[string]string{"x": "h1", "w": "h3", "y": "h2", "v": "h2"}[vm] }
	rx := ra.NewDetector(ra.FromReceiver, ra.SignalBoth)
	ingress := []mech.PairObs{
		{Pair: mech.PairID{Src: "x", Dst: "y"}, Losses: 3},
		{Pair: mech.PairID{Src: "w", Dst: "y"}, Losses: 0},
		{Pair: mech.PairID{Src: "v", Dst: "y"}, Losses: 2}, // same host
	}
	msgs := rx.Report("h2", ingress, hostOf)
	if len(msgs) != 1 || msgs[0].To != "h1" {
		t.Fatalf("messages %+v, want one to h1", msgs)
	}
	local := mech.PairObs{Pair: mech.PairID{Src: "v", Dst: "y"}}
	if l := rx.Congestion(&local); l != 2 {
		t.Errorf("same-host pair losses %g, want 2", l)
	}
	// The body travels as JSON on real hosts.
	raw, err := json.Marshal(msgs[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	other := mech.Message{From: "h9", To: "h1", Body: "unrelated"}
	tx := ra.NewDetector(ra.FromReceiver, ra.SignalBoth)
	// the same report from a host that is not y's is not taken
	tx.Receive([]mech.Message{{From: "h3", To: "h1", Body: json.RawMessage(raw)}}, hostOf)
	if l := tx.Congestion(&mech.PairObs{Pair: mech.PairID{Src: "x", Dst: "y"}}); l != 0 || tx.Foreign() != 1 {
		t.Errorf("a report from h3 about a pair into h2: losses %g, foreign %d; want 0, 1", l, tx.Foreign())
	}
	tx.EndStep()
	rest := tx.Receive([]mech.Message{other, {From: "h2", To: "h1", Body: json.RawMessage(raw)}}, hostOf)
	if len(rest) != 1 || rest[0].Body != "unrelated" {
		t.Errorf("Receive left %+v, want only the unrelated message", rest)
	}
	eg := mech.PairObs{Pair: mech.PairID{Src: "x", Dst: "y"}, Losses: 7}
	if l := tx.Congestion(&eg); l != 3 {
		t.Errorf("receiver mode: losses %g, want the 3 fed back (egress count ignored)", l)
	}
	tx.EndStep()
	if l := tx.Congestion(&eg); l != 0 {
		t.Errorf("feedback not cleared at the end of the step: %g", l)
	}
	both := ra.NewDetector(ra.FromBoth, ra.SignalBoth)
	both.Receive([]mech.Message{{From: "h2", Body: msgs[0].Body}}, hostOf)
	if l := both.Congestion(&eg); l != 7 {
		t.Errorf("both: %g, want max(7, 3)", l)
	}
	eg0 := ra.NewDetector(ra.FromEgress, ra.SignalBoth)
	if m := eg0.Report("h2", ingress, hostOf); m != nil {
		t.Errorf("egress mode sent feedback %+v", m)
	}
	if l := eg0.Congestion(&eg); l != 7 {
		t.Errorf("egress mode: %g, want 7", l)
	}
}

// ECN (§6, §7.4): marks count as congestion unless congestion_signal is
// loss; drops count unless it is ecn. Feedback carries both counts.
func TestDetectorSignals(t *testing.T) {
	marked := mech.PairObs{Pair: mech.PairID{Src: "x", Dst: "y"}, Marks: 2}
	lost := mech.PairObs{Pair: mech.PairID{Src: "x", Dst: "y"}, Losses: 3}
	for _, tc := range []struct {
		sig          ra.Signal
		marks, drops float64
	}{{ra.SignalBoth, 2, 3}, {ra.SignalLoss, 0, 3}, {ra.SignalECN, 2, 0}} {
		d := ra.NewDetector(ra.FromEgress, tc.sig)
		if got := d.Congestion(&marked); got != tc.marks {
			t.Errorf("%v: marked pair %g events, want %g", tc.sig, got, tc.marks)
		}
		if got := d.Congestion(&lost); got != tc.drops {
			t.Errorf("%v: lossy pair %g events, want %g", tc.sig, got, tc.drops)
		}
	}
	hostOf := func(vm string) string { return map[string]string{"x": "h1", "y": "h2"}[vm] }
	rx := ra.NewDetector(ra.FromReceiver, ra.SignalECN)
	in := []mech.PairObs{{Pair: mech.PairID{Src: "x", Dst: "y"}, Marks: 5, Losses: 1}}
	msgs := rx.Report("h2", in, hostOf)
	if len(msgs) != 1 {
		t.Fatalf("ecn receiver sent %+v, want one message", msgs)
	}
	raw, err := json.Marshal(msgs[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"marked":5`) {
		t.Errorf("feedback %s does not carry the marks", raw)
	}
	tx := ra.NewDetector(ra.FromReceiver, ra.SignalECN)
	tx.Receive([]mech.Message{{From: "h2", Body: json.RawMessage(raw)}}, hostOf)
	if got := tx.Congestion(&mech.PairObs{Pair: mech.PairID{Src: "x", Dst: "y"}}); got != 5 {
		t.Errorf("source counted %g marks from feedback, want 5", got)
	}
	// A loss-only receiver does not report marked pairs.
	if m := ra.NewDetector(ra.FromReceiver, ra.SignalLoss).Report("h2",
		[]mech.PairObs{{Pair: mech.PairID{Src: "x", Dst: "y"}, Marks: 5}}, hostOf); m != nil {
		t.Errorf("loss receiver reported marks: %+v", m)
	}
	c := ra.Defaults()
	all := append(ra.CoreParams(), ra.ImprovementParams()...)
	if c.Signal != ra.SignalBoth {
		t.Errorf("default signal %v, want both", c.Signal)
	}
	if err := ra.Parse(spec.Params{"congestion_signal": "ecn"}, &c, all...); err != nil || c.Signal != ra.SignalECN {
		t.Errorf("congestion_signal ecn: %v, %v", c.Signal, err)
	}
	c = ra.Defaults()
	err = ra.Parse(spec.Params{"congestion_signal": "red"}, &c, all...)
	if want := `mechanism.params.congestion_signal: expected loss, ecn or both, got "red"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bad signal: %v, want %q", err, want)
	}
}

// A congestion event is event_packets lost (or marked) packets; fractions
// carry over, so a pair losing 0.25 packets per period is cut every 4th
// period, and with event_packets 0 every period.
func TestEventPackets(t *testing.T) {
	cuts := func(c ra.Config) int {
		f := ra.Flow{Start: 100e6}
		in := ra.Input{Floor: 1e6, Weight: 1, Demanding: true}
		f.Step(&c, in)
		n := 0
		for k := 1; k <= 20; k++ {
			in.Now = time.Duration(k) * period
			in.Events = 0.25
			f.Step(&c, in)
			if f.Since == in.Now { // the time of the last congestion event
				n++
			}
		}
		return n
	}
	c := plain()
	if c.EventPackets != 1 {
		t.Fatalf("default event_packets %g, want 1", c.EventPackets)
	}
	if n := cuts(c); n != 5 {
		t.Errorf("0.25 packets per period: %d cuts in 20 periods, want 5", n)
	}
	c.EventPackets = 0
	if n := cuts(c); n != 20 {
		t.Errorf("event_packets 0: %d cuts in 20 periods, want 20", n)
	}
	c.EventPackets = 2
	if n := cuts(c); n != 2 {
		t.Errorf("event_packets 2: %d cuts in 20 periods, want 2", n)
	}
	c = ra.Defaults()
	if err := ra.Parse(spec.Params{"event_packets": -1}, &c, ra.CoreParams()...); err == nil ||
		!strings.Contains(err.Error(), "mechanism.params.event_packets: must be a finite number ≥ 0, got -1") {
		t.Errorf("event_packets -1: %v", err)
	}
}

// On congestion a pair that sent less than its limit is cut from what it
// sent, not from the stale limit.
func TestCutFromMeasuredRate(t *testing.T) {
	c := plain()
	f := ra.Flow{Start: 400e6}
	in := ra.Input{Floor: 10e6, Weight: 1}
	f.Step(&c, in)
	in.Now, in.Congested, in.Rate = period, true, 50e6
	if r := f.Step(&c, in); !near(r, 30e6) || !near(f.Goal, 50e6) {
		t.Errorf("limit 400 Mbps, sent 50: cut to %g (goal %g), want 0.6·50 Mbps (goal 50 Mbps)", r, f.Goal)
	}
	in.Now, in.Rate = 2*period, 100e6 // sent more than the limit: cut from the limit
	if r := f.Step(&c, in); !near(r, 18e6) {
		t.Errorf("cut to %g, want 0.6·30 Mbps", r)
	}
}

// When the guarantee changes, the limit moves with it and keeps what RA
// won above the old guarantee.
func TestLimitFollowsGuarantee(t *testing.T) {
	c := plain()
	f := ra.Flow{Start: 120e6}
	in := ra.Input{Floor: 100e6, Weight: 1}
	f.Step(&c, in) // 120: 20 above the guarantee
	in.Now, in.Floor = period, 10e6
	if r := f.Step(&c, in); !near(r, 30e6) {
		t.Errorf("guarantee 100 → 10 Mbps: limit %g, want 10 + 20 Mbps", r)
	}
	in.Now, in.Floor = 2*period, 200e6
	if r := f.Step(&c, in); !near(r, 220e6) {
		t.Errorf("guarantee 10 → 200 Mbps: limit %g, want 200 + 20 Mbps", r)
	}
}
