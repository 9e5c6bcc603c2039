package gatekeeper_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/gatekeeper"
)

// Unit tests: the agent driven through mech.Agent with hand-written
// observations and messages.

const (
	mbps   = 1e6
	period = 10 * time.Millisecond
)

// env: Fig. 4's three hosts. h1 holds a (tenant A, 645 Mbps) and b
// (tenant B, 215 Mbps); a2 is on h2, b2 on h3; best-effort e on h1.
func env(host string) mech.Env {
	return mech.Env{Host: host, VMs: []mech.VM{
		{Name: "a", Tenant: "A", Host: "h1", In: 645 * mbps, Out: 645 * mbps},
		{Name: "a2", Tenant: "A", Host: "h2", In: 645 * mbps, Out: 645 * mbps},
		{Name: "b", Tenant: "B", Host: "h1", In: 215 * mbps, Out: 215 * mbps},
		{Name: "b2", Tenant: "B", Host: "h3", In: 215 * mbps, Out: 215 * mbps},
		{Name: "e", Tenant: "E", Host: "h1"},
	}}
}

func newAgent(t *testing.T, host string, params map[string]any) *gatekeeper.Agent {
	t.Helper()
	m, err := all.New(gatekeeper.Name, params)
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
	return a.(*gatekeeper.Agent)
}

// driver steps one agent every period.
type driver struct {
	a mech.Agent
	k int
}

func (d *driver) step(vms []mech.VMObs, inbox ...mech.Message) mech.Actions {
	obs := &mech.HostObs{Now: time.Duration(d.k) * period, Period: period, VMs: vms}
	if d.k == 0 {
		obs.Period = 0
	}
	d.k++
	return d.a.Step(obs, inbox)
}

// receiving: what h1 sees when b's queue drops drop bits/s sent by b2.
func receiving(drop float64) []mech.VMObs {
	return []mech.VMObs{
		{VM: "a", InArrival: 700 * mbps, InRate: 700 * mbps},
		{VM: "b", InArrival: 237.5*mbps + drop, InRate: 237.5 * mbps, InDrops: drop, DropSrc: "b2"},
		{VM: "e"},
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestSchedulers(t *testing.T) {
	d := &driver{a: newAgent(t, "h1", nil)}
	act := d.step(receiving(0))
	if len(act.Schedulers) != 2 {
		t.Fatalf("first step set %d schedulers, want 2: %+v", len(act.Schedulers), act.Schedulers)
	}
	want := map[mech.Direction]mech.Scheduler{
		mech.Egress:  {Dir: mech.Egress, Rate: 1000 * mbps, Weights: map[string]float64{"a": 645 * mbps, "b": 215 * mbps}},
		mech.Ingress: {Dir: mech.Ingress, Rate: 950 * mbps, Weights: map[string]float64{"a": 645 * mbps, "b": 215 * mbps}},
	}
	for _, s := range act.Schedulers {
		w := want[s.Dir]
		if !near(s.Rate, w.Rate) {
			t.Errorf("scheduler %d: rate %g, want %g", s.Dir, s.Rate, w.Rate)
		}
		if len(s.Weights) != len(w.Weights) {
			t.Errorf("scheduler %d: weights %v, want %v (best-effort e left out)", s.Dir, s.Weights, w.Weights)
		}
		for vm, x := range w.Weights {
			if s.Weights[vm] != x {
				t.Errorf("scheduler %d: weight of %s %g, want %g", s.Dir, vm, s.Weights[vm], x)
			}
		}
		delete(want, s.Dir)
	}
	if len(want) > 0 {
		t.Errorf("missing schedulers %v", want)
	}
	// LIM_j starts at the link rate: no limiter.
	for _, l := range act.Limits {
		if l.Kind != mech.VMEgress || !math.IsInf(l.Rate, 1) {
			t.Errorf("first step set %+v, want only VM egress limits at the link rate (Unlimited)", l)
		}
	}
	act = d.step(receiving(0))
	if len(act.Schedulers) != 0 || len(act.Limits) != 0 || len(act.Messages) != 0 {
		t.Errorf("second step repeated itself: %+v", act)
	}

	// Parameters move LIM_IN and the egress rate.
	d = &driver{a: newAgent(t, "h1", map[string]any{"link": "10Gbps", "headroom": 0.1})}
	for _, s := range d.step(nil).Schedulers {
		want := 10000 * mbps
		if s.Dir == mech.Ingress {
			want = 9000 * mbps
		}
		if !near(s.Rate, want) {
			t.Errorf("10 Gbps link, 10%% headroom: scheduler %d rate %g, want %g", s.Dir, s.Rate, want)
		}
	}
}

// A drop rate over the threshold sends exactly one notification, to the
// host of the drop source, once a full 100 ms window has been seen; the
// next one needs a fresh full window, measured after the sender reacted.
func TestNotification(t *testing.T) {
	a := newAgent(t, "h1", nil)
	d := &driver{a: a}
	d.step(nil) // Now 0: no measurement yet
	var sent []mech.Message
	at := -1
	for k := 1; k <= 30; k++ {
		act := d.step(receiving(100 * mbps))
		if len(act.Messages) > 0 && at < 0 {
			at = k
		}
		sent = append(sent, act.Messages...)
		if k == 10 && len(sent) != 1 {
			t.Fatalf("after a full window of 100 Mbps drops: %d notifications, want 1", len(sent))
		}
		if k > 10 && k < 21 && len(sent) != 1 {
			t.Fatalf("step %d: %d notifications; the next must wait for a fresh full window", k, len(sent))
		}
	}
	if at != 10 {
		t.Errorf("first notification at step %d, want 10 (the window is 10 periods)", at)
	}
	// Notified at 10; the sample of step 11 is skipped (in flight), steps
	// 12..21 fill a fresh window.
	if len(sent) != 2 {
		t.Fatalf("%d notifications in 30 periods of heavy drops, want 2 (steps 10 and 21)", len(sent))
	}
	m := sent[0]
	if m.To != "h3" {
		t.Errorf("notification to %q, want h3 (the host of b2)", m.To)
	}
	n, ok := gatekeeper.Decode(m.Body)
	if !ok || n.VM != "b2" || n.Dst != "b" || !near(n.DropRate, 100*mbps) {
		t.Errorf("body %+v, want a notification for b2 at b with 100 Mbps of drops", m.Body)
	}
	raw, err := json.Marshal(m.Body)
	if err != nil {
		t.Fatalf("body does not encode to JSON: %v", err)
	}
	if back, ok := gatekeeper.Decode(json.RawMessage(raw)); !ok || back != n {
		t.Errorf("JSON round trip gave %+v, %v; want %+v", back, ok, n)
	}
	if got := a.Sent(); got != 2 {
		t.Errorf("Sent() = %d, want 2", got)
	}

	// A burst shorter than the window that averages below the threshold
	// does not trigger.
	d = &driver{a: newAgent(t, "h1", nil)}
	d.step(nil)
	for k := 1; k <= 30; k++ {
		drop := 0.0
		if k == 15 {
			drop = 150 * mbps // 15 Mbps over the window
		}
		if act := d.step(receiving(drop)); len(act.Messages) > 0 {
			t.Fatalf("step %d: a 10 ms burst averaging 15 Mbps triggered %+v", k, act.Messages)
		}
	}
}

// TCP pushing into a full ingress scheduler loses 1% of its packets (sim's
// TCPLoss): at most 1% of LIM_IN, 9.5 Mbps, never a notification.
func TestNoNotificationUnderTCPDrops(t *testing.T) {
	a := newAgent(t, "h1", nil)
	d := &driver{a: a}
	d.step(nil)
	for k := 1; k <= 200; k++ {
		vms := []mech.VMObs{
			{VM: "a", InArrival: 950 * mbps, InRate: 940.5 * mbps, InDrops: 9.5 * mbps, DropSrc: "a2"},
			{VM: "b", InArrival: 240 * mbps, InRate: 237.6 * mbps, InDrops: 2.4 * mbps, DropSrc: "b2"},
		}
		if act := d.step(vms); len(act.Messages) > 0 {
			t.Fatalf("step %d: TCP-like drops triggered %+v", k, act.Messages)
		}
	}
	if r, _ := a.DropRate("a"); !near(r, 9.5*mbps) {
		t.Errorf("a's average drop rate %g, want 9.5 Mbps", r)
	}
}

func TestFeedbackOff(t *testing.T) {
	d := &driver{a: newAgent(t, "h1", map[string]any{"feedback": false})}
	d.step(nil)
	for k := 1; k <= 50; k++ {
		if act := d.step(receiving(500 * mbps)); len(act.Messages) > 0 {
			t.Fatalf("feedback off: step %d sent %+v", k, act.Messages)
		}
	}
}

func notify(vm string) mech.Message {
	return mech.Message{From: "h2", To: "h1", Body: gatekeeper.Notification{VM: vm, Dst: "x", DropRate: 50 * mbps}}
}

// sending: h1's VMs, b sending at out bits/s.
func sending(out float64) []mech.VMObs {
	return []mech.VMObs{{VM: "a"}, {VM: "b", OutRate: out}, {VM: "e"}}
}

func egressLimit(t *testing.T, act mech.Actions, vm string) (float64, bool) {
	t.Helper()
	found, rate := false, 0.0
	for _, l := range act.Limits {
		if l.Kind != mech.VMEgress {
			t.Errorf("unexpected limit %+v", l)
			continue
		}
		if l.VM == vm {
			found, rate = true, l.Rate
		}
	}
	return rate, found
}

// A notification halves LIM_j (from what the VM sends, when that is below
// the limit), which then grows linearly at the slope up to the link rate.
func TestLimitHalvesAndGrows(t *testing.T) {
	a := newAgent(t, "h1", map[string]any{"slope": "1Gbps"}) // +10 Mbps per 10 ms
	d := &driver{a: a}
	d.step(sending(0))
	d.step(sending(1000 * mbps))
	act := d.step(sending(1000*mbps), notify("b"))
	if r, ok := egressLimit(t, act, "b"); !ok || !near(r, 500*mbps) {
		t.Fatalf("after one notification b's limit is %g (set %v), want 500 Mbps", r, ok)
	}
	for k := 1; k <= 5; k++ {
		act = d.step(sending(500 * mbps))
		want := (500 + 10*float64(k)) * mbps
		if r, ok := egressLimit(t, act, "b"); !ok || !near(r, want) {
			t.Fatalf("%d periods after the halving: limit %g (set %v), want %g", k, r, ok, want)
		}
		if _, ok := egressLimit(t, act, "a"); ok {
			t.Errorf("a's limit changed though it was never notified")
		}
	}
	// Two notifications in one step: halved twice, from what b sends
	// (550 Mbps; its limit has grown to 560).
	act = d.step(sending(550*mbps), notify("b"), notify("b"))
	if r, _ := egressLimit(t, act, "b"); !near(r, 550*mbps/4) {
		t.Fatalf("after two notifications: limit %g, want %g", r, 550*mbps/4)
	}
	// A VM sending less than its limit is halved from its rate.
	act = d.step(sending(20*mbps), notify("b"))
	if r, _ := egressLimit(t, act, "b"); !near(r, 10*mbps) {
		t.Fatalf("b sending 20 Mbps: limit %g after a notification, want 10 Mbps", r)
	}
	// Never below min_rate (1 Mbps on a 1 Gbps link).
	act = d.step(sending(0.5*mbps), notify("b"))
	if r, _ := egressLimit(t, act, "b"); !near(r, 1*mbps) {
		t.Fatalf("limit %g, want the 1 Mbps floor", r)
	}
	// Linear growth back to the link rate, where the limiter goes.
	lim := 1 * mbps
	for k := 0; k < 200 && !math.IsInf(lim, 1); k++ {
		act = d.step(sending(lim))
		if r, ok := egressLimit(t, act, "b"); ok {
			lim = r
		}
	}
	if !math.IsInf(lim, 1) {
		t.Fatalf("limit %g after 2 s at 1 Gbps/s, want Unlimited (back at the link rate)", lim)
	}
	if r, _ := a.Limit("b"); !math.IsInf(r, 1) {
		t.Errorf("Limit(b) = %g, want +Inf", r)
	}
	// Notifications for VMs elsewhere, and other bodies, are ignored; JSON
	// bodies are understood.
	act = d.step(sending(0), notify("b2"), mech.Message{Body: "hello"}, mech.Message{Body: 42})
	if len(act.Limits) != 0 {
		t.Errorf("foreign notifications changed limits: %+v", act.Limits)
	}
	act = d.step(sending(800*mbps), mech.Message{Body: `{"kind":"gatekeeper.congestion.v1","vm":"b","dst":"b2","drop_rate":5e7}`})
	if r, _ := egressLimit(t, act, "b"); !near(r, 400*mbps) {
		t.Errorf("JSON notification: limit %g, want 400 Mbps", r)
	}
	act = d.step(sending(800*mbps), mech.Message{Body: `{"kind":"elasticswitch.feedback","vm":"b"}`})
	if r, _ := egressLimit(t, act, "b"); !near(r, 410*mbps) {
		t.Errorf("another mechanism's message: limit %g, want 410 Mbps (growth only)", r)
	}
}

func TestRateLimitMode(t *testing.T) {
	d := &driver{a: newAgent(t, "h1", map[string]any{"mode": "rate-limit"})}
	act := d.step(nil)
	if len(act.Schedulers) != 0 {
		t.Errorf("rate-limit mode set schedulers %+v", act.Schedulers)
	}
	want := map[mech.Limit]bool{
		{Kind: mech.VMEgress, VM: "a", Rate: 645 * mbps}:  true,
		{Kind: mech.VMIngress, VM: "a", Rate: 645 * mbps}: true,
		{Kind: mech.VMEgress, VM: "b", Rate: 215 * mbps}:  true,
		{Kind: mech.VMIngress, VM: "b", Rate: 215 * mbps}: true,
	}
	for _, l := range act.Limits {
		if !want[l] {
			t.Errorf("unexpected limit %+v", l)
		}
		delete(want, l)
	}
	if len(want) > 0 {
		t.Errorf("missing limits %+v", want)
	}
	for k := 0; k < 20; k++ {
		if act := d.step(receiving(500*mbps), notify("b")); len(act.Limits)+len(act.Messages)+len(act.Schedulers) > 0 {
			t.Fatalf("rate-limit mode reacted: %+v", act)
		}
	}
}

func TestParams(t *testing.T) {
	m, err := gatekeeper.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	if c != gatekeeper.Defaults() {
		t.Errorf("no params: %+v, want the defaults %+v", c, gatekeeper.Defaults())
	}
	if c.Period != 10*time.Millisecond || c.Window != 100*time.Millisecond || c.Headroom != 0.05 || !near(c.LimIn(), 950*mbps) || !near(c.DropThreshold, 20*mbps) || !c.Feedback {
		t.Errorf("defaults %+v differ from the paper's (§3.1)", c)
	}
	// The default threshold and floor follow the link.
	m, err = gatekeeper.New(map[string]any{"link": "10Gbps"})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config(); !near(c.DropThreshold, 200*mbps) || !near(c.MinRate, 10*mbps) {
		t.Errorf("10 Gbps link: threshold %g, min rate %g; want 200 Mbps, 10 Mbps", c.DropThreshold, c.MinRate)
	}
	m, err = gatekeeper.New(map[string]any{"mode": "gatekeeper", "link": 1e9, "headroom": 0, "period": "5ms", "window": "50ms",
		"drop_threshold": "30Mbps", "slope": "100Mbps", "min_rate": "2Mbps", "feedback": false})
	if err != nil {
		t.Fatal(err)
	}
	want := gatekeeper.Config{Mode: "gatekeeper", Link: 1e9, Headroom: 0, Period: 5 * time.Millisecond, Window: 50 * time.Millisecond,
		DropThreshold: 30 * mbps, Slope: 100 * mbps, MinRate: 2 * mbps, Feedback: false}
	if m.Config() != want {
		t.Errorf("parsed %+v, want %+v", m.Config(), want)
	}

	bad := []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"queue": 160}, "mechanism.params.queue: unknown parameter (known: mode, link, headroom, period, window, drop_threshold, slope, min_rate, feedback)"},
		{map[string]any{"link": "fast"}, `mechanism.params.link: expected a rate such as "450Mbps", got "fast"`},
		{map[string]any{"link": 0}, "mechanism.params.link: must be a positive finite rate, got 0"},
		{map[string]any{"headroom": "5%"}, `mechanism.params.headroom: expected a number, got "5%"`},
		{map[string]any{"headroom": 1}, "mechanism.params.headroom: must be in [0, 1), got 1"},
		{map[string]any{"period": 10}, `mechanism.params.period: expected a duration such as "60ms", got 10`},
		{map[string]any{"period": "0s"}, "mechanism.params.period: must be positive, got 0s"},
		{map[string]any{"window": "25ms"}, "mechanism.params.window: must be a positive multiple of period (10ms), got 25ms"},
		{map[string]any{"window": "5ms"}, "mechanism.params.window: must be a positive multiple of period (10ms), got 5ms"},
		{map[string]any{"drop_threshold": 0}, "mechanism.params.drop_threshold: must be a positive finite rate, got 0"},
		{map[string]any{"drop_threshold": -1}, `mechanism.params.drop_threshold: expected a rate such as "450Mbps", got -1`},
		{map[string]any{"slope": "0"}, "mechanism.params.slope: must be a positive finite rate per second, got 0"},
		{map[string]any{"min_rate": "2Gbps"}, "mechanism.params.min_rate: must be positive and below link (1e+09), got 2e+09"},
		{map[string]any{"feedback": "yes"}, `mechanism.params.feedback: expected true or false, got "yes"`},
		{map[string]any{"mode": "strict"}, `mechanism.params.mode: unknown mode "strict" (use gatekeeper or rate-limit)`},
		{map[string]any{"mode": 1}, `mechanism.params.mode: expected a string, got 1`},
	}
	for _, b := range bad {
		_, err := all.New(gatekeeper.Name, b.params)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("params %v: error %v, want %q", b.params, err, b.want)
		}
	}
	// Several problems are all reported.
	_, err = gatekeeper.New(map[string]any{"link": "x", "slope": "y"})
	if err == nil || !strings.Contains(err.Error(), "params.link") || !strings.Contains(err.Error(), "params.slope") {
		t.Errorf("two bad params: %v, want both reported", err)
	}
	if _, err := gatekeeper.NewAgent(gatekeeper.Defaults(), mech.Env{}); err == nil {
		t.Error("an environment without a host was accepted")
	}
}
