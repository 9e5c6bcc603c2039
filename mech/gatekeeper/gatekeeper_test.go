package gatekeeper_test

import (
	"encoding/json"
	"math"
	"reflect"
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
// (tenant B, 215 Mbps); a2 is on h2, b2 on h3; best-effort e on h1; x
// (tenant X, 300 Mbps), the congested receiver of the sender-side tests,
// on h2.
func env(host string) mech.Env {
	return mech.Env{Host: host, VMs: []mech.VM{
		{Name: "a", Tenant: "A", Host: "h1", In: 645 * mbps, Out: 645 * mbps},
		{Name: "a2", Tenant: "A", Host: "h2", In: 645 * mbps, Out: 645 * mbps},
		{Name: "b", Tenant: "B", Host: "h1", In: 215 * mbps, Out: 215 * mbps},
		{Name: "b2", Tenant: "B", Host: "h3", In: 215 * mbps, Out: 215 * mbps},
		{Name: "e", Tenant: "E", Host: "h1"},
		{Name: "x", Tenant: "X", Host: "h2", In: 300 * mbps, Out: 300 * mbps},
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
	return d.stepObs(&mech.HostObs{VMs: vms}, inbox...)
}

// stepObs steps with obs (pairs and VMs), setting its time and period.
func (d *driver) stepObs(obs *mech.HostObs, inbox ...mech.Message) mech.Actions {
	obs.Now, obs.Period = time.Duration(d.k)*period, period
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
		mech.Egress:  {Dir: mech.Egress, Rate: 950 * mbps, Weights: map[string]float64{"a": 645 * mbps, "b": 215 * mbps}},
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

	// Parameters move LIM_IN, the rate of both schedulers.
	d = &driver{a: newAgent(t, "h1", map[string]any{"link": "10Gbps", "headroom": 0.1})}
	for _, s := range d.step(nil).Schedulers {
		want := 9000 * mbps
		if !near(s.Rate, want) {
			t.Errorf("10 Gbps link, 10%% headroom: scheduler %d rate %g, want %g", s.Dir, s.Rate, want)
		}
	}
}

// A VM's ingress drops trigger a notification once their average over a
// 100 ms window exceeds the 20 Mbps threshold (2 Mb dropped in a window):
// as soon as the bits dropped since the last decision are sure to exceed
// it, or over the sliding window. After notifying, the period measured
// while the notification is in flight is skipped and the next decision
// rests on fresh samples only.
func TestNotification(t *testing.T) {
	// One message per decision (repeat off; TestRepeat covers repeats).
	steps := func(drop float64, n int) (at []int, sent []mech.Message, a *gatekeeper.Agent) {
		a = newAgent(t, "h1", map[string]any{"repeat": false})
		d := &driver{a: a}
		d.step(nil) // Now 0: no measurement yet
		for k := 1; k <= n; k++ {
			act := d.step(receiving(drop))
			if len(act.Messages) > 0 {
				at = append(at, k)
			}
			sent = append(sent, act.Messages...)
		}
		return at, sent, a
	}
	for _, c := range []struct {
		drop float64
		want []int
	}{
		// 1 Mb per period: 3 Mb > 2 Mb at step 3; skip 4, fresh 5..7.
		{100 * mbps, []int{3, 7, 11, 15, 19, 23, 27}},
		// 0.3 Mb per period: 2.1 Mb at step 7; skip 8, fresh 9..15.
		{30 * mbps, []int{7, 15, 23}},
		// 21 Mbps: only a full window exceeds the threshold.
		{21 * mbps, []int{10, 21}},
		// Below the threshold, never.
		{19 * mbps, nil},
	} {
		at, _, _ := steps(c.drop, 30)
		if !reflect.DeepEqual(at, c.want) {
			t.Errorf("%g Mbps of drops: notified at steps %v, want %v", c.drop/mbps, at, c.want)
		}
	}
	_, sent, a := steps(100*mbps, 10)
	if len(sent) != 2 || a.Sent() != 2 {
		t.Fatalf("%d notifications (Sent() %d) in 10 periods of 100 Mbps drops, want 2", len(sent), a.Sent())
	}
	m := sent[0]
	if m.To != "h3" {
		t.Errorf("notification to %q, want h3 (the host of b2)", m.To)
	}
	// b2 is b's only sender: its floor is b's whole ingress guarantee
	// (215 Mbps; h1's guarantees, 860 Mbps, fit in LIM_IN).
	n, ok := gatekeeper.Decode(m.Body)
	want := gatekeeper.Notification{Dst: "b", Episode: 1, DropRate: 100 * mbps, Senders: 1, Slope: 500 * mbps, VMs: []gatekeeper.Target{{VM: "b2", Floor: 215 * mbps}}}
	if !ok || !reflect.DeepEqual(n, want) {
		t.Errorf("body %+v, want %+v", m.Body, want)
	}
	raw, err := json.Marshal(m.Body)
	if err != nil {
		t.Fatalf("body does not encode to JSON: %v", err)
	}
	if back, ok := gatekeeper.Decode(json.RawMessage(raw)); !ok || !reflect.DeepEqual(back, n) {
		t.Errorf("JSON round trip gave %+v, %v; want %+v", back, ok, n)
	}

	// A burst shorter than the window that averages below the threshold
	// does not trigger.
	d := &driver{a: newAgent(t, "h1", nil)}
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

// notify is a notification from h2 about its VM x, for vm with a floor
// and the slope it may climb back at (0: none given), each a new
// congestion episode (Episode 0: not numbered).
func notify(vm string, floor, slope float64) mech.Message {
	return mech.Message{From: "h2", To: "h1", Body: gatekeeper.Notification{Dst: "x", DropRate: 50 * mbps, Senders: 1, Slope: slope,
		VMs: []gatekeeper.Target{{VM: vm, Floor: floor}}}}
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
// the limit), which then grows linearly at the slope while the VM sends at
// it, up to the link rate.
func TestLimitHalvesAndGrows(t *testing.T) {
	a := newAgent(t, "h1", map[string]any{"slope": "1Gbps"}) // +10 Mbps per 10 ms
	d := &driver{a: a}
	d.step(sending(0))
	d.step(sending(1000 * mbps))
	act := d.step(sending(1000*mbps), notify("b", 0, 0))
	if r, ok := egressLimit(t, act, "b"); !ok || !near(r, 500*mbps) {
		t.Fatalf("after one notification b's limit is %g (set %v), want 500 Mbps", r, ok)
	}
	want := func(k int) float64 { return (500 + 10*float64(k)) * mbps } // b sends at its limit
	for k := 1; k <= 5; k++ {
		act = d.step(sending(want(k - 1)))
		if r, ok := egressLimit(t, act, "b"); !ok || !near(r, want(k)) {
			t.Fatalf("%d periods after the halving: limit %g (set %v), want %g", k, r, ok, want(k))
		}
		if _, ok := egressLimit(t, act, "a"); ok {
			t.Errorf("a's limit changed though it was never notified")
		}
	}
	// Two notifications in one step: halved twice, from what b sends
	// (550 Mbps; its limit has grown to 560).
	act = d.step(sending(550*mbps), notify("b", 0, 0), notify("b", 0, 0))
	if r, _ := egressLimit(t, act, "b"); !near(r, 550*mbps/4) {
		t.Fatalf("after two notifications: limit %g, want %g", r, 550*mbps/4)
	}
	// A VM sending less than its limit is halved from its rate.
	act = d.step(sending(20*mbps), notify("b", 0, 0))
	if r, _ := egressLimit(t, act, "b"); !near(r, 10*mbps) {
		t.Fatalf("b sending 20 Mbps: limit %g after a notification, want 10 Mbps", r)
	}
	// Never below min_rate (1 Mbps on a 1 Gbps link).
	act = d.step(sending(10*mbps), notify("b", 0, 0))
	if r, _ := egressLimit(t, act, "b"); !near(r, 5*mbps) {
		t.Fatalf("limit %g, want 5 Mbps", r)
	}
	for k := 0; k < 5; k++ {
		r, _ := a.Limit("b")
		d.step(sending(r), notify("b", 0, 0))
	}
	if r, _ := a.Limit("b"); !near(r, 1*mbps) {
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
	// bodies are understood, the previous version's are not.
	act = d.step(sending(0), notify("b2", 0, 0), mech.Message{Body: "hello"}, mech.Message{Body: 42},
		mech.Message{Body: `{"kind":"gatekeeper.congestion.v1","vm":"b","dst":"b2","drop_rate":5e7}`})
	if len(act.Limits) != 0 {
		t.Errorf("foreign notifications changed limits: %+v", act.Limits)
	}
	act = d.step(sending(800*mbps), mech.Message{From: "h3", Body: `{"kind":"gatekeeper.congestion.v3","dst":"b2","episode":1,"drop_rate":5e7,"senders":1,"slope":1e9,"vms":[{"vm":"b","floor":1e8}]}`})
	if r, _ := egressLimit(t, act, "b"); !near(r, 400*mbps) {
		t.Errorf("JSON notification: limit %g, want 400 Mbps", r)
	}
	act = d.step(sending(400*mbps), mech.Message{Body: `{"kind":"elasticswitch.feedback","vm":"b"}`})
	if r, _ := egressLimit(t, act, "b"); !near(r, 410*mbps) {
		t.Errorf("another mechanism's message: limit %g, want 410 Mbps (growth only)", r)
	}
}

// The floor: a notification never takes LIM_j below the rate the congested
// receiver guarantees the pair, plus what the VM sends elsewhere; a VM
// sending no more than that keeps its limit. Before floors, an
// unresponsive sender halved below its guarantee averaged under it
// (gatekeeper-full-link.yaml).
func TestFloor(t *testing.T) {
	d := &driver{a: newAgent(t, "h1", nil)} // slope 500 Mbps/s: 5 Mbps per period
	d.step(sending(0))
	lim := func(act mech.Actions) float64 {
		r, ok := egressLimit(t, act, "b")
		if !ok {
			r, _ = d.a.(*gatekeeper.Agent).Limit("b")
		}
		return r
	}
	if got := lim(d.step(sending(400*mbps), notify("b", 150*mbps, 0))); !near(got, 200*mbps) {
		t.Fatalf("b sending 400 Mbps, floor 150: limit %g, want 200 Mbps", got)
	}
	if got := lim(d.step(sending(200*mbps), notify("b", 150*mbps, 0))); !near(got, 150*mbps) {
		t.Fatalf("b sending 200 Mbps, floor 150: limit %g, want the 150 Mbps floor", got)
	}
	// b sends at its floor: the limit grows (b uses it) and the
	// notification leaves it.
	if got := lim(d.step(sending(150*mbps), notify("b", 150*mbps, 0))); !near(got, 155*mbps) {
		t.Fatalf("b sending its 150 Mbps floor: limit %g, want 155 Mbps (grown, not halved)", got)
	}
	// What b sends elsewhere is kept too: b sends 300 Mbps to x and 200
	// to y; x's host guarantees b→x 100.
	obs := &mech.HostObs{VMs: sending(500 * mbps), Egress: []mech.PairObs{
		{Pair: mech.PairID{Src: "b", Dst: "x"}, Rate: 300 * mbps},
		{Pair: mech.PairID{Src: "b", Dst: "y"}, Rate: 200 * mbps},
	}}
	d = &driver{a: newAgent(t, "h1", nil)}
	d.step(sending(0))
	if got := lim(d.stepObs(obs, notify("b", 100*mbps, 0))); !near(got, 300*mbps) {
		t.Fatalf("b sending 300 to x (floor 100) and 200 to y: limit %g, want 300 Mbps", got)
	}
	// A floor above what b is guaranteed to send (a datagram no receiver
	// would write) counts as b's guarantee: it cannot exempt b from the
	// halving, nor can a negative one lower b below its minimum rate.
	d = &driver{a: newAgent(t, "h1", nil)}
	d.step(sending(0))
	if got := lim(d.step(sending(1000*mbps), notify("b", 1e12, 0))); !(got < 1000*mbps) {
		t.Errorf("b sending 1 Gbps, notified with a 1 Tbps floor: limit %g, want it halved to at most b's guarantee", got)
	}
	d = &driver{a: newAgent(t, "h1", nil)}
	d.step(sending(0))
	if got := lim(d.step(sending(400*mbps), notify("b", -1e12, 0))); !near(got, 200*mbps) {
		t.Errorf("b sending 400 Mbps, notified with a negative floor: limit %g, want 200 Mbps (halved)", got)
	}
}

// A notified sender raises its limit at the slope the notification gives
// (the receiver's slope ÷ its number of senders, so that they ramp at the
// receiver's slope together), or at its own if that is lower; its own
// slope comes back when the limit reaches the link rate.
func TestSlopeShared(t *testing.T) {
	for _, c := range []struct {
		slope, want float64
		why         string
	}{
		{250 * mbps, 2.5 * mbps, "a 1 Gbps/s receiver with 4 senders: 250 Mbps/s"},
		{5000 * mbps, 10 * mbps, "a 10 Gbps receiver's 5 Gbps/s is above this host's 1 Gbps/s: its own"},
		{0, 10 * mbps, "no slope given: its own"},
	} {
		a := newAgent(t, "h1", map[string]any{"slope": "1Gbps"}) // +10 Mbps per period
		d := &driver{a: a}
		d.step(sending(0))
		d.step(sending(20*mbps), notify("b", 5*mbps, c.slope))
		lim := 10 * mbps
		for k := 1; k <= 10; k++ {
			r, _ := egressLimit(t, d.step(sending(lim)), "b")
			if !near(r, lim+c.want) {
				t.Fatalf("%s: period %d after the notification: limit %g, want %g", c.why, k, r, lim+c.want)
			}
			lim = r
		}
		for k := 0; k < 1000 && !math.IsInf(lim, 1); k++ {
			if r, ok := egressLimit(t, d.step(sending(lim)), "b"); ok {
				lim = r
			}
		}
		if !math.IsInf(lim, 1) {
			t.Fatalf("%s: limit %g after 10 s, want back at the link rate", c.why, lim)
		}
		d.step(sending(1000*mbps), notify("b", 5*mbps, 0))
		if r, _ := egressLimit(t, d.step(sending(500*mbps)), "b"); !near(r, 510*mbps) {
			t.Errorf("%s: after the limit came back and a new notification: limit %g, want 510 Mbps (its own slope)", c.why, r)
		}
	}
}

// A VM that sends below its reduced limit does not raise it: what the
// limit gained above the last floor decays at the slope, and the limit
// is lifted once unused for as long as the ramp from the floor to the
// link rate takes ((1000 − 150) ÷ 500 Mbps/s = 1.7 s). A sender that
// pauses resumes at its floor.
func TestIdleLimit(t *testing.T) {
	a := newAgent(t, "h1", nil) // slope 500 Mbps/s: 5 Mbps per period
	d := &driver{a: a}
	d.step(sending(0))
	d.step(sending(400*mbps), notify("b", 150*mbps, 0)) // 200
	lim := func() float64 { r, _ := a.Limit("b"); return r }
	for k := 0; k < 10; k++ {
		d.step(sending(lim())) // grows to 250 while b uses it
	}
	if !near(lim(), 250*mbps) {
		t.Fatalf("limit %g after 10 periods at it, want 250 Mbps", lim())
	}
	for k := 0; k < 50; k++ {
		d.step(sending(0))
	}
	if !near(lim(), 150*mbps) {
		t.Fatalf("limit %g after 0.5 s idle, want the 150 Mbps floor", lim())
	}
	d.step(sending(150 * mbps)) // back: at its floor, growing
	if !near(lim(), 155*mbps) {
		t.Fatalf("limit %g when b sends again, want 155 Mbps", lim())
	}
	for k := 0; k < 165; k++ {
		d.step(sending(10 * mbps))
	}
	if math.IsInf(lim(), 1) {
		t.Fatal("limit lifted after 1.65 s below it, want it kept until 1.7 s")
	}
	for k := 0; k < 10; k++ {
		d.step(sending(10 * mbps))
	}
	if !math.IsInf(lim(), 1) {
		t.Fatalf("limit %g after 1.75 s below it, want lifted", lim())
	}
}

// The receiver notifies every remote sender of the congested VM, grouped
// by host, each with its floor: the VM's ingress guarantee (scaled down
// when the host's guarantees exceed LIM_IN) split by max-min among them,
// each capped at its egress guarantee. A sender on the same host does not
// cross the access link and is left out.
func TestNotifyAllSenders(t *testing.T) {
	vms := func(xIn float64) []mech.VM {
		return []mech.VM{
			{Name: "l", Tenant: "X", Host: "h1", Out: 400 * mbps},
			{Name: "p", Tenant: "X", Host: "h2", Out: 100 * mbps},
			{Name: "q", Tenant: "X", Host: "h2", Out: 400 * mbps},
			{Name: "r", Tenant: "X", Host: "h3", Out: 400 * mbps},
			{Name: "x", Tenant: "X", Host: "h1", In: xIn},
			{Name: "y", Tenant: "Y", Host: "h1", In: 300 * mbps},
		}
	}
	for _, c := range []struct {
		xIn     float64
		p, q, r float64
		why     string
	}{
		{600 * mbps, 100 * mbps, 250 * mbps, 250 * mbps, "x's 600 Mbps: p capped at its 100, q and r 250 each"},
		{700 * mbps, 100 * mbps, 282.5 * mbps, 282.5 * mbps, "guarantees 1000 Mbps > LIM_IN: x's class gets 700 × 0.95 = 665"},
	} {
		m, err := all.New(gatekeeper.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		ag, err := m.NewAgent(mech.Env{Host: "h1", VMs: vms(c.xIn)})
		if err != nil {
			t.Fatal(err)
		}
		d := &driver{a: ag}
		d.step(nil)
		var msgs []mech.Message
		for k := 0; k < 3; k++ {
			obs := &mech.HostObs{
				VMs: []mech.VMObs{{VM: "x", InArrival: 750 * mbps, InRate: 650 * mbps, InDrops: 100 * mbps, DropSrc: "q"}, {VM: "y"}},
				Ingress: []mech.PairObs{
					{Pair: mech.PairID{Src: "l", Dst: "x"}, Rate: 50 * mbps},
					{Pair: mech.PairID{Src: "p", Dst: "x"}, Rate: 100 * mbps},
					{Pair: mech.PairID{Src: "q", Dst: "x"}, Rate: 250 * mbps},
					{Pair: mech.PairID{Src: "r", Dst: "x"}, Rate: 250 * mbps},
				},
			}
			msgs = append(msgs, d.stepObs(obs).Messages...)
		}
		want := []mech.Message{
			{From: "h1", To: "h2", Body: gatekeeper.Notification{Dst: "x", DropRate: 100 * mbps, Senders: 3, Slope: 500 * mbps / 3,
				VMs: []gatekeeper.Target{{VM: "p", Floor: c.p}, {VM: "q", Floor: c.q}}}},
			{From: "h1", To: "h3", Body: gatekeeper.Notification{Dst: "x", DropRate: 100 * mbps, Senders: 3, Slope: 500 * mbps / 3,
				VMs: []gatekeeper.Target{{VM: "r", Floor: c.r}}}},
		}
		if len(msgs) != len(want) {
			t.Fatalf("%s: %d messages %+v, want %+v", c.why, len(msgs), msgs, want)
		}
		for i := range want {
			g, _ := gatekeeper.Decode(msgs[i].Body)
			w := want[i].Body.(gatekeeper.Notification)
			ok := msgs[i].To == want[i].To && g.Dst == w.Dst && g.Senders == w.Senders && near(g.Slope, w.Slope) && len(g.VMs) == len(w.VMs)
			for j := 0; ok && j < len(w.VMs); j++ {
				ok = g.VMs[j].VM == w.VMs[j].VM && near(g.VMs[j].Floor, w.VMs[j].Floor)
			}
			if !ok {
				t.Errorf("%s: message %d to %s: %+v, want to %s: %+v", c.why, i, msgs[i].To, g, want[i].To, w)
			}
		}
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
		if act := d.step(receiving(500*mbps), notify("b", 0, 0)); len(act.Limits)+len(act.Messages)+len(act.Schedulers) > 0 {
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
		"drop_threshold": "30Mbps", "slope": "100Mbps", "min_rate": "2Mbps", "feedback": false, "repeat": false})
	if err != nil {
		t.Fatal(err)
	}
	want := gatekeeper.Config{Mode: "gatekeeper", Link: 1e9, Headroom: 0, Period: 5 * time.Millisecond, Window: 50 * time.Millisecond,
		DropThreshold: 30 * mbps, Slope: 100 * mbps, MinRate: 2 * mbps, Feedback: false, Repeat: false,
		PeerTimeout: 150 * time.Millisecond} // 30 periods by default
	if m.Config() != want {
		t.Errorf("parsed %+v, want %+v", m.Config(), want)
	}
	if c.PeerTimeout != 300*time.Millisecond {
		t.Errorf("default peer timeout %v, want 300ms (30 periods)", c.PeerTimeout)
	}
	for _, d := range []time.Duration{time.Second, 0} {
		m, err = gatekeeper.New(map[string]any{"peer_timeout": d.String()})
		if err != nil || m.Config().PeerTimeout != d {
			t.Errorf("peer_timeout %v: %v, %+v", d, err, m.Config())
		}
	}

	bad := []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"queue": 160}, "mechanism.params.queue: unknown parameter (known: mode, link, headroom, period, window, drop_threshold, slope, min_rate, feedback, repeat, peer_timeout)"},
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
		{map[string]any{"repeat": 1}, `mechanism.params.repeat: expected true or false, got 1`},
		{map[string]any{"peer_timeout": "50ms"}, "mechanism.params.peer_timeout: must be 0 (off) or at least 2 heartbeat intervals (60ms), got 50ms"},
		{map[string]any{"peer_timeout": "-1s"}, `mechanism.params.peer_timeout: expected a duration such as "60ms", got "-1s"`},
		{map[string]any{"peer_timeout": 1}, `mechanism.params.peer_timeout: expected a duration such as "60ms", got 1`},
		{map[string]any{"period": "100ms", "window": "1s", "peer_timeout": "300ms"}, "mechanism.params.peer_timeout: must be 0 (off) or at least 2 heartbeat intervals (600ms), got 300ms"},
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

// Soft state: while b's drops stay above the threshold the receiver
// resends the latest episode's notification every period; a new decision
// (fresh evidence, as without repeats) starts a new episode; once the
// drops fall below the threshold the repeats stop. The sender halves once
// per episode: a repeat holds its limit, and a repeat whose original was
// lost halves it.
func TestRepeat(t *testing.T) {
	for _, c := range []struct {
		why      string
		drops    []float64 // b's drop rate in steps 1, 2, ...
		episodes []uint64  // episode sent at each step (0: none)
	}{
		{"100 Mbps of drops throughout: decisions at 3, 7, 11, repeats between",
			[]float64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100},
			[]uint64{0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3}},
		{"drops below the threshold after the decision: no repeat",
			[]float64{100, 100, 100, 10, 10, 10, 10, 100, 10},
			[]uint64{0, 0, 1, 0, 0, 0, 0, 0, 0}},
		{"drops at the threshold are not above it",
			[]float64{100, 100, 100, 20, 100},
			[]uint64{0, 0, 1, 0, 0}},
	} {
		d := &driver{a: newAgent(t, "h1", nil)}
		d.step(nil)
		for k, drop := range c.drops {
			act := d.step(receiving(drop * mbps))
			var got uint64
			for _, m := range act.Messages {
				n, ok := gatekeeper.Decode(m.Body)
				if !ok || m.To != "h3" {
					t.Fatalf("%s: step %d: message %+v", c.why, k+1, m)
				}
				got = n.Episode
			}
			if len(act.Messages) > 1 || got != c.episodes[k] {
				t.Errorf("%s: step %d: %d messages, episode %d; want episode %d", c.why, k+1, len(act.Messages), got, c.episodes[k])
			}
		}
	}

	note := func(ep uint64) mech.Message {
		return mech.Message{From: "h2", To: "h1", Body: gatekeeper.Notification{Dst: "x", Episode: ep, DropRate: 50 * mbps, Senders: 1,
			VMs: []gatekeeper.Target{{VM: "b", Floor: 10 * mbps}}}}
	}
	for _, c := range []struct {
		why   string
		inbox [][]uint64 // episodes received at steps 1, 2, ... (b sends at its limit)
		want  []float64  // b's limit after each step, Mbps
	}{
		{"a repeat holds the limit, a new episode halves it",
			[][]uint64{{1}, {1}, {1}, nil, {2}, {2}},
			[]float64{400, 400, 400, 405, 202.5, 202.5}},
		{"the original lost: the first repeat halves",
			[][]uint64{nil, {1}, {1}},
			[]float64{math.Inf(1), 400, 400}},
		{"unnumbered notifications (episode 0) halve every time",
			[][]uint64{{0}, {0}},
			[]float64{400, 200}},
		{"an episode repeated in one inbox halves once",
			[][]uint64{{1, 1}},
			[]float64{400}},
	} {
		a := newAgent(t, "h1", nil) // slope 500 Mbps/s: 5 Mbps per period
		d := &driver{a: a}
		d.step(sending(0))
		out := 800 * mbps
		for k, eps := range c.inbox {
			var in []mech.Message
			for _, ep := range eps {
				in = append(in, note(ep))
			}
			d.step(sending(out), in...)
			lim, _ := a.Limit("b")
			if !near(lim, c.want[k]*mbps) && !(math.IsInf(lim, 1) && math.IsInf(c.want[k], 1)) {
				t.Fatalf("%s: step %d: limit %g, want %g Mbps", c.why, k+1, lim, c.want[k])
			}
			if !math.IsInf(lim, 1) {
				out = lim
			}
		}
	}
}
