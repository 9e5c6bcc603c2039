package elasticswitch_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch/ra"
	"github.com/bulkhead-dc/bulkhead/spec"
)

const (
	mbps   = 1e6
	period = 15 * time.Millisecond
)

var inf = math.Inf(1)

func pid(s, d string) mech.PairID { return mech.PairID{Src: s, Dst: d} }

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// env: tenant T with x on h1 and y, z, t on h2, h3, h4, all with 100 Mbps
// hoses; tenant U's u on h2 (another tenant on y's host).
func env(host string) mech.Env {
	return mech.Env{Host: host, VMs: []mech.VM{
		{Name: "t", Tenant: "T", Host: "h4", In: 100 * mbps, Out: 100 * mbps},
		{Name: "u", Tenant: "U", Host: "h2", In: 100 * mbps, Out: 100 * mbps},
		{Name: "x", Tenant: "T", Host: "h1", In: 100 * mbps, Out: 100 * mbps},
		{Name: "y", Tenant: "T", Host: "h2", In: 100 * mbps, Out: 100 * mbps},
		{Name: "z", Tenant: "T", Host: "h3", In: 100 * mbps, Out: 100 * mbps},
	}}
}

func newAgent(t *testing.T, host string, params map[string]any) *elasticswitch.Agent {
	t.Helper()
	m, err := elasticswitch.New(params)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.NewAgent(env(host))
	if err != nil {
		t.Fatal(err)
	}
	if a.Period() != period {
		t.Fatalf("period %v, want %v", a.Period(), period)
	}
	return a.(*elasticswitch.Agent)
}

// source drives an agent as the source of some pairs over an ideal network
// of 1 Gbps access links: every pair sends at min(its limit, its demand,
// 1 Gbps), is limiter-bound when its demand exceeds its limit, and loses
// packets in every period when lossy is set (which pins RA's limits at
// the guarantees).
type source struct {
	t       *testing.T
	a       *elasticswitch.Agent
	demand  map[mech.PairID]float64
	limit   map[mech.PairID]float64
	lossy   bool
	k       int
	inbox   []mech.Message
	sent    []mech.Message
	ingress []mech.PairObs
	// mute: the destinations' hosts say nothing. Otherwise each names
	// its pairs every GP period (4 steps), with a share that does not
	// limit them, as a live destination whose VMs have hoses to spare.
	mute bool
	// told are the shares the test's own messages gave, which live
	// destinations repeat
	told map[mech.PairID]elasticswitch.RemoteGuarantee
}

// alive is what live destination hosts send a source every GP period:
// each pair named, with a share that does not limit it.
func (s *source) alive() []mech.Message {
	if s.mute || s.k%4 != 0 {
		return nil
	}
	e := env("")
	byHost := map[string]*elasticswitch.Guarantees{}
	var out []mech.Message
	for p := range s.demand {
		h := e.HostOf(p.Dst)
		g := byHost[h]
		if g == nil {
			g = &elasticswitch.Guarantees{}
			byHost[h] = g
		}
		rg, ok := s.told[p]
		if !ok {
			rg = elasticswitch.RemoteGuarantee{Src: p.Src, Dst: p.Dst, Share: 1e15}
		}
		g.Pairs = append(g.Pairs, rg)
	}
	for h, g := range byHost {
		out = append(out, mech.Message{From: h, Body: *g})
	}
	return out
}

func newSource(t *testing.T, a *elasticswitch.Agent, demand map[mech.PairID]float64) *source {
	return &source{t: t, a: a, demand: demand, limit: map[mech.PairID]float64{}}
}

func (s *source) step() mech.Actions {
	for _, m := range s.inbox {
		if g, ok := mech.DecodeBody[elasticswitch.Guarantees](m.Body); ok {
			if s.told == nil {
				s.told = map[mech.PairID]elasticswitch.RemoteGuarantee{}
			}
			for _, rg := range g.Pairs {
				if e := env(""); e.HostOf(rg.Dst) == m.From {
					s.told[pid(rg.Src, rg.Dst)] = rg
				}
			}
		}
	}
	alive := s.alive()
	obs := &mech.HostObs{Now: time.Duration(s.k) * period, Period: period}
	if s.k == 0 {
		obs.Period = 0
	}
	s.k++
	for p, d := range s.demand {
		lim, ok := s.limit[p]
		if !ok {
			lim = inf
		}
		o := mech.PairObs{Pair: p, Tenant: "T", Limit: lim, Rate: math.Min(math.Min(lim, d), 1000*mbps)}
		o.LimiterBound = d > lim
		if s.lossy {
			o.Losses = 1
		}
		if obs.Period > 0 {
			obs.Egress = append(obs.Egress, o)
		}
	}
	obs.Ingress = s.ingress
	act := s.a.Step(obs, append(alive, s.inbox...))
	s.inbox = nil
	for _, l := range act.Limits {
		if l.Kind != mech.PairLimit {
			s.t.Fatalf("unexpected limit kind %v", l.Kind)
		}
		s.limit[l.Pair] = l.Rate
	}
	s.sent = append(s.sent, act.Messages...)
	return act
}

func (s *source) run(n int) {
	for i := 0; i < n; i++ {
		s.step()
	}
}

func share(t *testing.T, a *elasticswitch.Agent, p mech.PairID, out bool) float64 {
	t.Helper()
	v, ok := a.Share(p, out)
	if !ok {
		t.Fatalf("no share for %v", p)
	}
	return v
}

// §4's example: B_X = 100 Mbps, demand to Y 20 Mbps, to Z and T
// unbounded: 20/40/40.
func TestMaxMinPaperExample(t *testing.T) {
	out := make([]float64, 3)
	elasticswitch.MaxMin(100*mbps, []float64{20 * mbps, inf, inf}, out)
	for i, w := range []float64{20 * mbps, 40 * mbps, 40 * mbps} {
		if !near(out[i], w) {
			t.Errorf("out[%d] = %g, want %g", i, out[i], w)
		}
	}
	elasticswitch.MaxMin(100*mbps, []float64{10 * mbps, 20 * mbps}, out[:2])
	if out[0] != 10*mbps || out[1] != 20*mbps {
		t.Errorf("satisfiable demands split %v", out[:2])
	}
	elasticswitch.MaxMin(90*mbps, []float64{50 * mbps, 50 * mbps, 50 * mbps}, out)
	for _, v := range out {
		if !near(v, 30*mbps) {
			t.Errorf("equal demands split %v", out)
		}
	}
}

// The same example through the agent, with the demands measured: X's
// pairs converge to 20/40/40 (margin 0), and the limits RA sets sit on
// the guarantees while every period sees losses.
func TestGPSplitThroughAgent(t *testing.T) {
	a := newAgent(t, "h1", map[string]any{"gp_margin": 0})
	s := newSource(t, a, map[mech.PairID]float64{pid("x", "y"): 20 * mbps, pid("x", "z"): inf, pid("x", "t"): inf})
	s.lossy = true
	s.run(40)
	for p, w := range map[mech.PairID]float64{pid("x", "y"): 20 * mbps, pid("x", "z"): 40 * mbps, pid("x", "t"): 40 * mbps} {
		if got := share(t, a, p, true); !near(got, w) {
			t.Errorf("share of %v = %g, want %g", p, got, w)
		}
		if got, _ := a.Guarantee(p); !near(got, w) {
			t.Errorf("guarantee of %v = %g, want %g", p, got, w)
		}
		if !near(s.limit[p], w) {
			t.Errorf("limit of %v = %g, want the guarantee %g", p, s.limit[p], w)
		}
	}
	// With the default 10% margin the bounded pair keeps (1.1)² of its
	// demand.
	a = newAgent(t, "h1", nil)
	s = newSource(t, a, map[mech.PairID]float64{pid("x", "y"): 20 * mbps, pid("x", "z"): inf, pid("x", "t"): inf})
	s.lossy = true
	s.run(40)
	if got, want := share(t, a, pid("x", "y"), true), 20*mbps*1.21; !near(got, want) {
		t.Errorf("bounded share %g, want %g", got, want)
	}
	if got, want := share(t, a, pid("x", "z"), true), (100*mbps-20*mbps*1.21)/2; !near(got, want) {
		t.Errorf("unbounded share %g, want %g", got, want)
	}
}

// A new pair is partitioned into its VM's hose at once (repartition): x's
// hose is all held by x→z (bounded at 30 Mbps, alone: it gets the whole
// hose), and a new pair x→y gets what x→z's demand leaves, 100 − 30·1.1²,
// at once rather than growing from gp_initial (5 Mbps) by doubling every
// GP period (§4's rule, which took four GP periods, 240 ms, here), and
// keeps it at the next GPs.
func TestNewPairGetsWhatOthersLeave(t *testing.T) {
	a := newAgent(t, "h1", nil)
	s := newSource(t, a, map[mech.PairID]float64{pid("x", "z"): 30 * mbps})
	s.run(12)
	if got := share(t, a, pid("x", "z"), true); !near(got, 100*mbps) {
		t.Fatalf("x→z alone, bounded: share %g, want the whole 100 Mbps hose", got)
	}
	s.demand[pid("x", "y")] = inf
	s.run(1) // x→y seen at the 13th step; GP at the 16th
	if got := share(t, a, pid("x", "y"), true); !near(got, (100-30*1.21)*mbps) {
		t.Fatalf("new pair share %g, want what x→z leaves, %g Mbps", got, 100-30*1.21)
	}
	if got := s.limit[pid("x", "y")]; !near(got, (100-30*1.21)*mbps) {
		t.Fatalf("new pair limit %g, want %g Mbps", got, 100-30*1.21)
	}
	if y, z := share(t, a, pid("x", "y"), true), share(t, a, pid("x", "z"), true); y+z > 100*mbps*(1+1e-9) {
		t.Fatalf("shares %g + %g exceed x's 100 Mbps hose", y, z)
	}
	s.run(3)
	for _, w := range []float64{100 - 30*1.21, 100 - 30*1.21, 100 - 30*1.21} {
		if got := share(t, a, pid("x", "y"), true); !near(got, w*mbps) {
			t.Fatalf("share %g, want %g Mbps", got, w)
		}
		s.run(4)
	}
	// Bounded and unallocated guarantee: when all of a VM's pairs are
	// bounded, the rest of its hose is shared in proportion to demands.
	a = newAgent(t, "h1", nil)
	s = newSource(t, a, map[mech.PairID]float64{pid("x", "y"): 10 * mbps, pid("x", "z"): 30 * mbps})
	s.run(40)
	y, z := share(t, a, pid("x", "y"), true), share(t, a, pid("x", "z"), true)
	if !near(y+z, 100*mbps) || !near(z/y, 3) {
		t.Errorf("all bounded: shares %g and %g, want 100 Mbps in total, 1:3", y, z)
	}
}

// B = min(source's share, destination's share): the destination's share
// arrives in a remote-guarantee message.
func TestGuaranteeIsMinOfBothEnds(t *testing.T) {
	a := newAgent(t, "h1", nil)
	s := newSource(t, a, map[mech.PairID]float64{pid("x", "z"): inf, pid("x", "t"): inf})
	s.lossy = true
	s.run(40)
	if got := share(t, a, pid("x", "z"), true); !near(got, 50*mbps) {
		t.Fatalf("share %g, want 50 Mbps", got)
	}
	// z's host gives x→z 10 Mbps, not (yet) unbounded: B drops to 10 Mbps
	// at once, x's own share stays.
	s.inbox = []mech.Message{{From: "h3", To: "h1", Body: elasticswitch.Guarantees{
		Pairs: []elasticswitch.RemoteGuarantee{{Src: "x", Dst: "z", Share: 10 * mbps}}}}}
	s.run(1)
	if got, _ := a.Guarantee(pid("x", "z")); got != 10*mbps {
		t.Errorf("guarantee %g, want min(50, 10) Mbps", got)
	}
	s.run(4)
	if s.limit[pid("x", "z")] != 10*mbps {
		t.Errorf("limit %g, want 10 Mbps", s.limit[pid("x", "z")])
	}
	s.run(8)
	if got := share(t, a, pid("x", "z"), true); got < 30*mbps {
		t.Errorf("share fell to %g: a bounded destination share must not be adopted", got)
	}
	// Now flagged unbounded (as JSON, as a daemon would deliver it): weak
	// interdependence, x adopts 10 Mbps for x→z and gives t the rest.
	body, err := json.Marshal(elasticswitch.Guarantees{
		Pairs: []elasticswitch.RemoteGuarantee{{Src: "x", Dst: "z", Share: 10 * mbps, Unbounded: true}}})
	if err != nil {
		t.Fatal(err)
	}
	s.inbox = []mech.Message{{From: "h3", To: "h1", Body: json.RawMessage(body)}}
	s.run(8)
	if got := share(t, a, pid("x", "z"), true); !near(got, 10*mbps) {
		t.Errorf("share of x→z %g, want the destination's 10 Mbps", got)
	}
	if got := share(t, a, pid("x", "t"), true); !near(got, 90*mbps) {
		t.Errorf("share of x→t %g, want 90 Mbps", got)
	}
}

// The destination side: y's host splits y's in-hose between its senders
// and reports the shares, new pairs not flagged unbounded.
func TestDestinationReportsShares(t *testing.T) {
	a := newAgent(t, "h2", nil)
	s := newSource(t, a, nil)
	s.ingress = []mech.PairObs{
		{Pair: pid("x", "y"), Tenant: "T", Rate: 80 * mbps, Limit: inf},
		{Pair: pid("z", "y"), Tenant: "T", Rate: 80 * mbps, Limit: inf},
	}
	s.run(1)
	// y had no pair: its two new pairs split its free hose, and y's host
	// tells their sources at once, not at the next GP period.
	if len(s.sent) != 2 || s.sent[0].To != "h1" || s.sent[1].To != "h3" {
		t.Fatalf("messages %+v, want one to h1 and one to h3", s.sent)
	}
	g, ok := s.sent[0].Body.(elasticswitch.Guarantees)
	if !ok || len(g.Pairs) != 1 || g.Pairs[0] != (elasticswitch.RemoteGuarantee{Src: "x", Dst: "y", Share: 50 * mbps}) {
		t.Fatalf("first report %+v, want x→y at 50 Mbps, not unbounded", s.sent[0].Body)
	}
	s.run(2)
	if len(s.sent) != 2 {
		t.Fatalf("%d messages before the first GP period, want the 2 first reports only", len(s.sent))
	}
	s.run(1)
	if len(s.sent) != 4 {
		t.Fatalf("%d messages after the first GP period, want 4", len(s.sent))
	}
	if _, err := json.Marshal(s.sent[0].Body); err != nil {
		t.Fatalf("body does not encode to JSON: %v", err)
	}
	s.sent = nil
	s.run(20)
	last := s.sent[len(s.sent)-1].Body.(elasticswitch.Guarantees).Pairs[0]
	if last.Src != "z" || !near(last.Share, 50*mbps) || !last.Unbounded {
		t.Errorf("final report %+v, want z→y at 50 Mbps, unbounded", last)
	}
}

// RA through the agent: without congestion the limit grows above the
// guarantee (work conservation); a period with losses cuts it by α, never
// below the guarantee.
func TestRAThroughAgent(t *testing.T) {
	a := newAgent(t, "h1", nil)
	p := pid("x", "y")
	s := newSource(t, a, map[mech.PairID]float64{p: inf})
	s.run(200) // 3 s
	b, _ := a.Guarantee(p)
	if b != 100*mbps {
		t.Fatalf("guarantee %g, want the whole 100 Mbps hose", b)
	}
	r := s.limit[p]
	if r < 2*b {
		t.Fatalf("after 3 s without congestion the limit is %g, want well above the guarantee %g", r, b)
	}
	s.lossy = true
	s.run(1)
	if got := s.limit[p]; !near(got, 0.6*r) {
		t.Errorf("after losses: %g, want (1-α)·%g = %g", got, r, 0.6*r)
	}
	s.run(20)
	if got := s.limit[p]; got != b {
		t.Errorf("under constant losses: %g, want the guarantee %g", got, b)
	}
	// The Rate-Caution and Hold-Increase switches slow the increase.
	grow := func(params map[string]any) float64 {
		a := newAgent(t, "h1", params)
		s := newSource(t, a, map[mech.PairID]float64{p: inf})
		s.run(100)
		return s.limit[p]
	}
	cautious, bold := grow(nil), grow(map[string]any{"rate_caution": false})
	if !(bold > cautious) {
		t.Errorf("without Rate-Caution the limit reached %g, not above %g with it", bold, cautious)
	}
	if aggr := grow(map[string]any{"aggressive": true}); !(aggr > cautious) {
		t.Errorf("aggressive preset reached %g, not above %g", aggr, cautious)
	}
}

// Congestion from receiver feedback: the destination host reports the
// losses it sees, the source reacts at its next step.
func TestReceiverFeedback(t *testing.T) {
	params := map[string]any{"congestion": "receiver"}
	src := newAgent(t, "h1", params)
	dst := newAgent(t, "h2", params)
	p := pid("x", "y")
	s := newSource(t, src, map[mech.PairID]float64{p: inf})
	s.run(200)
	r := s.limit[p]
	// Losses on the egress observation alone are ignored in this mode.
	s.lossy = true
	s.run(1)
	if s.limit[p] < r {
		t.Fatalf("egress losses acted on in receiver mode: %g < %g", s.limit[p], r)
	}
	s.lossy = false
	r = s.limit[p]
	act := dst.Step(&mech.HostObs{Now: time.Second, Period: period, Ingress: []mech.PairObs{{Pair: p, Tenant: "T", Rate: r, Losses: 4}}}, nil)
	var fb []mech.Message
	for _, m := range act.Messages {
		if _, ok := m.Body.(ra.Feedback); ok {
			m.From = "h2" // as the driver sends it
			fb = append(fb, m)
		}
	}
	if len(fb) != 1 || fb[0].To != "h1" {
		t.Fatalf("feedback %+v, want one message to h1", act.Messages)
	}
	s.inbox = fb
	s.run(1)
	if got := s.limit[p]; !near(got, math.Max(100*mbps, 0.6*r)) {
		t.Errorf("after feedback: %g, want %g", got, math.Max(100*mbps, 0.6*r))
	}
}

// Idle pairs are forgotten and their limiters removed.
func TestIdlePairForgotten(t *testing.T) {
	a := newAgent(t, "h1", nil)
	p := pid("x", "y")
	s := newSource(t, a, map[mech.PairID]float64{p: inf})
	s.run(10)
	s.demand[p] = 0
	s.run(80)
	if _, ok := a.Guarantee(p); ok {
		t.Error("idle pair still tracked after 1.2 s")
	}
	if !math.IsInf(s.limit[p], 1) {
		t.Errorf("idle pair's limit %g, want removed", s.limit[p])
	}
}

func TestParams(t *testing.T) {
	m, err := elasticswitch.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	d := elasticswitch.Defaults()
	if c.RA.Period != 15*time.Millisecond || c.GPPeriod != 60*time.Millisecond || c.RA.Alpha != 0.4 || c.RA.Delta != 0.75 ||
		c.RA.Increase != 0.5e6 || c.RA.TimeScale != 1.5 || c.RA.Caution != 0.5 || c.RA.CautionMin != 0.3 || c.RA.Gamma != 0.75 ||
		c.RA.WeightUnit != 450e6 || !c.RA.HoldIncrease || !c.RA.RateCaution || c.BestEffortWeight != 45e6 || c != d {
		t.Errorf("defaults %+v", c)
	}
	m, err = elasticswitch.New(map[string]any{"aggressive": true, "hold_increase": false, "rate_caution": false, "gp_period": "90ms"})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config(); c.RA.Increase != 2.5e6 || c.RA.TimeScale != 2 || c.RA.HoldIncrease || c.RA.RateCaution || c.GPPeriod != 90*time.Millisecond {
		t.Errorf("parsed %+v", c)
	}
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"alpha": "x"}, `mechanism.params.alpha: expected a number, got "x"`},
		{map[string]any{"alpah": 0.4}, "mechanism.params.alpah: unknown parameter (known: ra_period, alpha"},
		{map[string]any{"headroom": 0.1}, "mechanism.params.headroom: unknown parameter"},
		{map[string]any{"gp_period": "50ms"}, "mechanism.params.gp_period: must be a multiple of ra_period (15ms), got 50ms"},
		{map[string]any{"gp_growth": 1}, "mechanism.params.gp_growth: must be finite and > 1, got 1"},
		{map[string]any{"gp_initial": "-1Mbps"}, "mechanism.params.gp_initial: expected a rate"},
		{map[string]any{"increase_start": "fast"}, "mechanism.params.increase_start: expected a rate"},
		{map[string]any{"gp_margin": 1}, "mechanism.params.gp_margin: must be in [0, 1), got 1"},
		{map[string]any{"idle_timeout": 5}, `mechanism.params.idle_timeout: expected a duration such as "60ms", got 5`},
		{map[string]any{"best_effort_weight": "0Mbps"}, "mechanism.params.best_effort_weight: must be a positive finite rate, got 0"},
		{map[string]any{"delta": 0, "alpha": true}, "mechanism.params.alpha: expected a number, got true"},
	} {
		_, err := elasticswitch.New(tc.params)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want an error containing %q", tc.params, err, tc.want)
			continue
		}
		if len(spec.FieldErrors(err)) == 0 {
			t.Errorf("New(%v): %v has no *spec.FieldError", tc.params, err)
		}
		if _, err2 := all.New(elasticswitch.Name, tc.params); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("registry: %v, want %v", err2, err)
		}
	}
	if _, err := elasticswitch.NewAgent(elasticswitch.Defaults(), mech.Env{}); err == nil {
		t.Error("agent without a host accepted")
	}
}

// A new pair is not deemed bounded before GP has seen it for a whole GP
// period: otherwise, from its partial first period, it would be bounded
// at a small demand, and with every pair of its VM bounded it would get
// part of the rest of the hose it has not measured.
func TestNewPairKeepsInitialShareUntilMeasured(t *testing.T) {
	a := newAgent(t, "h1", nil)
	s := newSource(t, a, map[mech.PairID]float64{pid("x", "z"): 30 * mbps})
	s.run(10) // x→z alone and bounded: the whole hose
	s.demand[pid("x", "y")] = 3 * mbps
	s.run(2) // x→y created at the 11th step, GP at the 12th: seen for 15 ms
	// It kept the share it got at once: what x→z's demand (30·1.1²)
	// leaves of the hose (see TestNewPairGetsWhatOthersLeave).
	if got := share(t, a, pid("x", "y"), true); !near(got, (100-30*1.21)*mbps) {
		t.Fatalf("share after the first GP %g, want the %g Mbps it got at once", got, 100-30*1.21)
	}
	s.run(4) // next GP: measured for a whole period, bounded
	y, z := share(t, a, pid("x", "y"), true), share(t, a, pid("x", "z"), true)
	if !near(y+z, 100*mbps) || !near(z/y, 10) {
		t.Errorf("after the second GP: shares %g and %g, want the 100 Mbps hose split 3:30 (all pairs bounded)", y, z)
	}
}

// A pair of a VM with no other pair (one that starts, or comes back after
// its pairs were forgotten: an on/off tenant) gets the VM's whole hose at
// once, at both ends, rather than growing from the initial 5 Mbps for
// several GP periods (issue 11: an on/off tenant with 250 ms bursts was
// worse off under ElasticSwitch than without isolation).
func TestNewPairOfIdleVMTakesFreeHose(t *testing.T) {
	a := newAgent(t, "h1", nil)
	s := newSource(t, a, map[mech.PairID]float64{pid("x", "y"): inf})
	s.run(2) // seen at the 2nd step
	if got := share(t, a, pid("x", "y"), true); got != 100*mbps {
		t.Fatalf("share %g, want the whole 100 Mbps hose", got)
	}
	if s.limit[pid("x", "y")] != 100*mbps {
		t.Fatalf("limit %g, want 100 Mbps", s.limit[pid("x", "y")])
	}
	// Idle past the idle timeout (1 s): forgotten; back: the whole hose
	// again, not 5 Mbps.
	s.demand[pid("x", "y")] = 0
	s.run(80)
	if _, ok := a.Share(pid("x", "y"), true); ok {
		t.Fatal("pair idle for 1.2 s not forgotten")
	}
	s.demand[pid("x", "y")] = inf
	s.run(1)
	if got := share(t, a, pid("x", "y"), true); got != 100*mbps {
		t.Errorf("share on return %g, want the whole 100 Mbps hose", got)
	}
	// Two new pairs at once split the free hose (a third one later: see
	// TestNewPairOfBusyVMGetsFairShare).
	a = newAgent(t, "h1", nil)
	s = newSource(t, a, map[mech.PairID]float64{pid("x", "y"): inf, pid("x", "z"): inf})
	s.run(2)
	if y, z := share(t, a, pid("x", "y"), true), share(t, a, pid("x", "z"), true); y != 50*mbps || z != 50*mbps {
		t.Errorf("two new pairs: shares %g and %g, want 50 Mbps each", y, z)
	}
}

// A new pair of a VM whose hose its other pairs hold (unbounded) gets the
// fair share of the hose at once, at both ends, and the other pairs' shares
// shrink in the same step, so that every VM's shares sum to at most its
// hose; the destination reports its new shares at once. §4 starts it at
// gp_initial (5 Mbps) until the next GP period, and a flow of a few ms
// never outlasts that. A pair that stops gives its share back at the next
// step, not at the next GP.
func TestNewPairOfBusyVMGetsFairShare(t *testing.T) {
	for _, out := range []bool{true, false} {
		host := "h1" // x's host: the source side
		if !out {
			host = "h2" // y's host: the destination side (x→y, t→y, z→y)
		}
		a := newAgent(t, host, nil)
		s := newSource(t, a, nil)
		pairs := []mech.PairID{pid("x", "y"), pid("x", "z"), pid("x", "t")}
		if !out {
			pairs = []mech.PairID{pid("x", "y"), pid("t", "y"), pid("z", "y")}
		}
		rate := map[mech.PairID]float64{pairs[0]: 200 * mbps, pairs[1]: 200 * mbps}
		obs := func() {
			if out { // unbounded demands, limited by the agent's limits
				s.demand = map[mech.PairID]float64{}
				for p := range rate {
					s.demand[p] = inf
				}
				return
			}
			s.ingress = nil
			for _, p := range pairs {
				if r := rate[p]; r > 0 {
					s.ingress = append(s.ingress, mech.PairObs{Pair: p, Tenant: "T", Rate: r, Limit: inf})
				}
			}
		}
		obs()
		s.run(9) // two unbounded pairs: 50 Mbps each
		for _, p := range pairs[:2] {
			if got := share(t, a, p, out); !near(got, 50*mbps) {
				t.Fatalf("out=%v: %v share %g, want 50 Mbps", out, p, got)
			}
		}
		sent := len(s.sent)
		rate[pairs[2]] = 200 * mbps // a third pair, at full speed
		obs()
		s.run(1) // not a GP step (the 10th)
		sum := 0.0
		for _, p := range pairs {
			got := share(t, a, p, out)
			sum += got
			if !near(got, 100*mbps/3) {
				t.Errorf("out=%v: %v share %g right after the third pair appeared, want 100/3 Mbps", out, p, got)
			}
		}
		if sum > 100*mbps*(1+1e-9) {
			t.Errorf("out=%v: shares sum to %g, above the 100 Mbps hose", out, sum)
		}
		if !out && len(s.sent) == sent {
			t.Errorf("destination: no report of the new shares before the next GP")
		}
		delete(rate, pairs[2]) // it stops
		obs()
		s.run(1)
		for _, p := range pairs[:2] {
			if got := share(t, a, p, out); !(got > 45*mbps) {
				t.Errorf("out=%v: %v share %g after the third pair stopped, want its ~50 Mbps back", out, p, got)
			}
		}
	}
}

// A source whose destination host falls silent (its agent stopped or cut
// off) holds the pair at its guarantee after peer_timeout, instead of
// letting RA raise it with no congestion to hear of; when the destination
// is heard again RA grows from the guarantee.
func TestSilentDestinationHeldAtGuarantee(t *testing.T) {
	a := newAgent(t, "h1", nil)
	p := pid("x", "y")
	s := newSource(t, a, map[mech.PairID]float64{p: inf})
	s.run(200) // 3 s with a live destination: RA well above the guarantee
	b, _ := a.Guarantee(p)
	if r := s.limit[p]; r < 2*b {
		t.Fatalf("live destination: limit %g, want well above the guarantee %g", r, b)
	}
	s.mute = true
	steps := int(elasticswitch.Defaults().PeerTimeout / period)
	s.run(steps - 4) // the last message came at most 4 steps ago: not yet
	if r := s.limit[p]; r < 2*b || len(a.Silent(time.Duration(s.k-1)*period)) != 0 {
		t.Fatalf("%d steps of silence, within the timeout: limit %g, silent %v", steps-4, r, a.Silent(time.Duration(s.k-1)*period))
	}
	s.run(6)
	if r := s.limit[p]; r != b {
		t.Errorf("silent destination: limit %g, want the guarantee %g", r, b)
	}
	if sil := a.Silent(time.Duration(s.k-1) * period); len(sil) != 1 || sil[0] != p {
		t.Errorf("silent pairs %v, want [%v]", sil, p)
	}
	s.run(100) // still silent: still held
	if r := s.limit[p]; r != b {
		t.Errorf("1.5 s of silence: limit %g, want the guarantee %g", r, b)
	}
	s.mute = false
	s.run(100)
	if r := s.limit[p]; r < 1.5*b {
		t.Errorf("destination heard again for 1.5 s: limit %g, want RA above the guarantee %g again", r, b)
	}
}

// A remote guarantee or a congestion report about a pair is taken only
// from the host of the pair's destination: no other host can shrink or
// grow it (and each one dropped is counted).
func TestMessagesOnlyFromTheDestinationHost(t *testing.T) {
	params := map[string]any{"congestion": "receiver"}
	a := newAgent(t, "h1", params)
	p := pid("x", "y") // y is on h2
	s := newSource(t, a, map[mech.PairID]float64{p: inf})
	s.run(200)
	r := s.limit[p]
	// h3 claims y's share is 1 Mbps and that the pair loses packets
	s.inbox = []mech.Message{
		{From: "h3", To: "h1", Body: elasticswitch.Guarantees{Pairs: []elasticswitch.RemoteGuarantee{{Src: "x", Dst: "y", Share: 1 * mbps}}}},
		{From: "h3", To: "h1", Body: ra.Feedback{Pairs: []ra.PairLoss{{Src: "x", Dst: "y", Lost: 50}}}},
	}
	s.run(1)
	if b, _ := a.Guarantee(p); b != 100*mbps {
		t.Errorf("guarantee %g after h3's claim, want 100 Mbps", b)
	}
	if got := s.limit[p]; got < r {
		t.Errorf("limit %g after h3's congestion report, want at least %g", got, r)
	}
	if n := a.Foreign(); n != 2 {
		t.Errorf("foreign messages counted %d, want 2", n)
	}
}

// Failsafe: every pair at its guarantee (what an agent leaves in force
// when it stops), whatever RA had reached.
func TestFailsafeAtGuarantees(t *testing.T) {
	a := newAgent(t, "h1", nil)
	px, pz := pid("x", "y"), pid("x", "z")
	s := newSource(t, a, map[mech.PairID]float64{px: inf, pz: inf})
	s.run(200)
	act := a.Failsafe()
	// x's active pairs at their guarantees, then its idle pair to t
	// (another VM of its tenant) at RA's minimum rate, not unlimited.
	if len(act.Limits) != 3 || len(act.Schedulers) != 0 || len(act.Messages) != 0 {
		t.Fatalf("failsafe %+v, want three pair limits", act)
	}
	if idle := act.Limits[2]; idle != (mech.Limit{Kind: mech.PairLimit, Pair: pid("x", "t"), Rate: 100e3}) {
		t.Errorf("failsafe of the idle pair: %+v, want x→t at RA's MinRate (100 kbit/s)", idle)
	}
	sum := 0.0
	for _, l := range act.Limits[:2] {
		b, _ := a.Guarantee(l.Pair)
		if l.Kind != mech.PairLimit || l.Rate != b || s.limit[l.Pair] <= b {
			t.Errorf("failsafe %+v: want the guarantee %g (RA had %g)", l, b, s.limit[l.Pair])
		}
		sum += l.Rate
	}
	if !near(sum, 100*mbps) {
		t.Errorf("failsafe limits sum to %g, want x's 100 Mbps hose", sum)
	}

	// x also receives from t: the idle x→t carries the acknowledgements
	// of t's traffic and is left as it is.
	s.ingress = []mech.PairObs{{Pair: pid("t", "x"), Tenant: "T", Rate: 50 * mbps, Limit: inf}}
	s.run(5)
	act = a.Failsafe()
	if len(act.Limits) != 2 {
		t.Errorf("failsafe with t→x arriving: %+v, want only x's two active pairs", act.Limits)
	}
}
