package gatekeeper_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/gatekeeper"
)

// Issue 13, fail to guarantees: what an agent leaves in force when it
// stops, what a sender does when a receiver goes silent, and which hosts
// a notification is taken from.

// Failsafe: every local VM's egress limit at its egress guarantee (the
// floor min_rate for a VM without one), whatever LIM_j was, and no
// scheduler mentioned (they stay as installed); the rate-limit baseline
// leaves its own limits.
func TestFailsafe(t *testing.T) {
	eg := func(vm string, r float64) mech.Limit { return mech.Limit{Kind: mech.VMEgress, VM: vm, Rate: r} }
	in := func(vm string, r float64) mech.Limit { return mech.Limit{Kind: mech.VMIngress, VM: vm, Rate: r} }
	for _, c := range []struct {
		name   string
		params map[string]any
		// notified: b's limit was halved before the stop (LIM_j
		// below its guarantee: failsafe still names the guarantee).
		notified bool
		want     []mech.Limit
	}{
		{"fresh agent", nil, false, []mech.Limit{eg("a", 645*mbps), eg("b", 215*mbps), eg("e", 1*mbps)}},
		{"limit halved below the guarantee", nil, true, []mech.Limit{eg("a", 645*mbps), eg("b", 215*mbps), eg("e", 1*mbps)}},
		{"min_rate for a VM without guarantee", map[string]any{"min_rate": "5Mbps"}, false, []mech.Limit{eg("a", 645*mbps), eg("b", 215*mbps), eg("e", 5*mbps)}},
		{"feedback off", map[string]any{"feedback": false}, false, []mech.Limit{eg("a", 645*mbps), eg("b", 215*mbps), eg("e", 1*mbps)}},
		{"rate-limit baseline", map[string]any{"mode": "rate-limit"}, false, []mech.Limit{
			eg("a", 645*mbps), in("a", 645*mbps), eg("b", 215*mbps), in("b", 215*mbps), eg("e", math.Inf(1)), in("e", math.Inf(1))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAgent(t, "h1", c.params)
			d := &driver{a: a}
			d.step(sending(0))
			if c.notified {
				d.step(sending(300*mbps), notify("b", 0, 0))
				if r, _ := a.Limit("b"); !near(r, 150*mbps) {
					t.Fatalf("b's limit %g after a notification, want 150 Mbps", r)
				}
			}
			var fs mech.Agent = a
			f, ok := fs.(mech.Failsafe)
			if !ok {
				t.Fatal("the agent is not a mech.Failsafe")
			}
			act := f.Failsafe()
			if !reflect.DeepEqual(act.Limits, c.want) {
				t.Errorf("failsafe limits %+v, want %+v", act.Limits, c.want)
			}
			if len(act.Schedulers) != 0 || len(act.Messages) != 0 {
				t.Errorf("failsafe schedulers %+v, messages %+v; want none (schedulers kept as they are)", act.Schedulers, act.Messages)
			}
		})
	}
}

// toX is h1's observation with b sending rate bits/s to x (on h2).
func toX(rate float64) *mech.HostObs {
	return &mech.HostObs{VMs: sending(rate), Egress: []mech.PairObs{{Pair: mech.PairID{Src: "b", Dst: "x"}, Rate: rate}}}
}

func heartbeat(from string) mech.Message {
	return mech.Message{From: from, To: "h1", Body: gatekeeper.Heartbeat{}}
}

// A silent receiver: b blasts 800 Mbps at x on h2. While h2 is heard of
// (a heartbeat every 5 periods, or anything it sends) b's limit stays
// off; PeerTimeout (300 ms) after the last message from h2, b is held at
// its 215 Mbps guarantee, and grows again from there once h2 is heard.
// Only messages from x's host count, a host is given the timeout from
// when b starts sending to it (again, after a pause longer than the
// timeout), and a host found silent stays so until heard.
func TestSilentReceiver(t *testing.T) {
	const steps = 120
	every5 := func(until int) func(k int) []mech.Message {
		return func(k int) []mech.Message {
			if k%5 == 0 && k < until {
				return []mech.Message{heartbeat("h2")}
			}
			return nil
		}
	}
	always := func(k int) bool { return true }
	for _, c := range []struct {
		name    string
		params  map[string]any
		inbox   func(k int) []mech.Message
		sends   func(k int) bool
		held    int // first step with b held (limit 215 Mbps); -1: never
		silent  []string
		foreign int64
	}{
		// Last heartbeat at step 45 (450 ms): 300 ms later is step 75,
		// more than 300 ms step 76.
		{"silent after the last heartbeat", nil, every5(50), always, 76, []string{"h2"}, 0},
		{"heard all along", nil, every5(steps), always, -1, nil, 0},
		{"never heard: timeout from the first send", nil, func(int) []mech.Message { return nil }, always, 31, []string{"h2"}, 0},
		{"another host's heartbeats", nil, func(k int) []mech.Message {
			if k%5 == 0 {
				return []mech.Message{heartbeat("h3"), heartbeat("nowhere"), heartbeat("h1")}
			}
			return nil
		}, always, 31, []string{"h2"}, 0},
		{"a foreign notification is not a word from h2", nil, func(k int) []mech.Message {
			if k%5 == 0 && k > 0 {
				m := notify("b", 0, 0)
				m.From = "h3" // about x, which is on h2
				return []mech.Message{m}
			}
			return nil
		}, always, 31, []string{"h2"}, 23},
		{"peer_timeout 1s", map[string]any{"peer_timeout": "1s"}, func(int) []mech.Message { return nil }, always, 101, []string{"h2"}, 0},
		{"feedback off: nothing is heard, nothing held", map[string]any{"feedback": false}, func(int) []mech.Message { return nil }, always, -1, nil, 0},
		{"peer_timeout 0: off", map[string]any{"peer_timeout": "0s"}, func(int) []mech.Message { return nil }, always, -1, nil, 0},
		// b sends for 200 ms, pauses 400 ms (> 300 ms), sends again from
		// step 60: a new timeout from there.
		{"a pause restarts the timeout", nil, func(int) []mech.Message { return nil },
			func(k int) bool { return k <= 20 || k >= 60 }, 91, []string{"h2"}, 0},
		// Silent at step 31; b pauses and comes back: held at once.
		{"silent stays silent", nil, func(int) []mech.Message { return nil },
			func(k int) bool { return k <= 35 || k >= 80 }, 31, []string{"h2"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAgent(t, "h1", c.params)
			d := &driver{a: a}
			held := -1
			for k := 0; k < steps; k++ {
				rate := 0.0
				if c.sends(k) {
					rate = 800 * mbps
				}
				d.stepObs(toX(rate), c.inbox(k)...)
				r, _ := a.Limit("b")
				if held < 0 && !math.IsInf(r, 1) {
					held = k
					if !near(r, 215*mbps) {
						t.Errorf("step %d: b's limit %g, want its 215 Mbps guarantee", k, r)
					}
				}
				if held >= 0 && c.sends(k) && !near(r, 215*mbps) {
					t.Errorf("step %d: b held since step %d at %g, want 215 Mbps (no growth above the guarantee)", k, held, r)
				}
			}
			if held != c.held {
				t.Errorf("b first held at step %d, want %d", held, c.held)
			}
			if got := a.Silent(); !reflect.DeepEqual(got, c.silent) {
				t.Errorf("Silent() = %v, want %v", got, c.silent)
			}
			if got := a.Foreign(); got != c.foreign {
				t.Errorf("Foreign() = %d, want %d", got, c.foreign)
			}
		})
	}

	// Heard again: held at the guarantee, then the linear increase (500
	// Mbps/s: 5 Mbps a period) while b sends at its limit, up to the link.
	a := newAgent(t, "h1", nil)
	d := &driver{a: a}
	for k := 0; k <= 31; k++ {
		d.stepObs(toX(800 * mbps))
	}
	if r, _ := a.Limit("b"); !near(r, 215*mbps) {
		t.Fatalf("b's limit %g after 310 ms of silence, want 215 Mbps", r)
	}
	want := 215 * mbps
	for k := 0; k < 10; k++ {
		var inbox []mech.Message
		if k%5 == 0 {
			inbox = append(inbox, heartbeat("h2"))
		}
		want += 5 * mbps
		act := d.stepObs(toX(800*mbps), inbox...)
		if r, ok := egressLimit(t, act, "b"); !ok || !near(r, want) {
			t.Fatalf("%d periods after h2 was heard again: b's limit %g (set %v), want %g", k+1, r, ok, want)
		}
	}
	if got := a.Silent(); len(got) != 0 {
		t.Errorf("Silent() = %v after h2 was heard, want none", got)
	}

	// A VM without a guarantee sending to a silent host is held at
	// min_rate.
	a = newAgent(t, "h1", nil)
	d = &driver{a: a}
	for k := 0; k <= 31; k++ {
		d.stepObs(&mech.HostObs{VMs: []mech.VMObs{{VM: "e", OutRate: 500 * mbps}},
			Egress: []mech.PairObs{{Pair: mech.PairID{Src: "e", Dst: "x"}, Rate: 500 * mbps}}})
	}
	if r, _ := a.Limit("e"); !near(r, 1*mbps) {
		t.Errorf("e (no guarantee) sending to a silent host: limit %g, want min_rate (1 Mbps)", r)
	}
}

// A notification about a VM is taken only from that VM's host: from any
// other host (or none) it is dropped and counted, and changes no limit.
func TestForeignNotification(t *testing.T) {
	for _, c := range []struct {
		from    string
		foreign int64
		want    float64 // b's limit after the notification
	}{
		{"h2", 0, 400 * mbps}, // x is on h2: halved
		{"h3", 1, math.Inf(1)},
		{"h1", 1, math.Inf(1)},
		{"", 1, math.Inf(1)},
		{"elsewhere", 1, math.Inf(1)},
	} {
		a := newAgent(t, "h1", nil)
		d := &driver{a: a}
		d.step(sending(0))
		m := notify("b", 0, 0)
		m.From = c.from
		d.step(sending(800*mbps), m)
		if r, _ := a.Limit("b"); !(r == c.want || near(r, c.want)) {
			t.Errorf("notification about x from %q: b's limit %g, want %g", c.from, r, c.want)
		}
		if got := a.Foreign(); got != c.foreign {
			t.Errorf("notification about x from %q: Foreign() = %d, want %d", c.from, got, c.foreign)
		}
	}
}

// Receivers send a heartbeat every HeartbeatEvery periods to each host
// that sent to their VMs since the previous one, except to hosts just
// sent a notification; none without feedback or with peer_timeout 0.
func TestHeartbeats(t *testing.T) {
	// h1 receives from a2 (h2) and b2 (h3); b's queue drops 100 Mbps
	// from step 3 on, so that h3 gets notifications.
	obs := func(k int) *mech.HostObs {
		drop := 0.0
		if k >= 3 {
			drop = 100 * mbps
		}
		return &mech.HostObs{VMs: receiving(drop), Ingress: []mech.PairObs{
			{Pair: mech.PairID{Src: "a2", Dst: "a"}, Rate: 700 * mbps},
			{Pair: mech.PairID{Src: "b2", Dst: "b"}, Rate: 237.5 * mbps, Losses: 10},
			{Pair: mech.PairID{Src: "a", Dst: "b"}, Rate: 1 * mbps}, // local: no heartbeat to h1
		}}
	}
	type sent struct {
		step int
		to   string
		kind string
	}
	for _, c := range []struct {
		name   string
		params map[string]any
		want   []sent
	}{
		// Steps 1..10 (step 0 has no period). Heartbeats at steps 3,
		// 6 and 9 (every HeartbeatEvery measured periods), after any
		// notification, to the hosts that sent to h1's VMs. b's drops
		// (1 Mb a period from step 3) exceed 2 Mb at step 5: a
		// notification to h3, repeated every period while the drops
		// last, so that from then on only h2 gets heartbeats.
		{"feedback on", nil, []sent{
			{3, "h2", gatekeeper.HeartbeatKind}, {3, "h3", gatekeeper.HeartbeatKind},
			{5, "h3", gatekeeper.NotificationKind},
			{6, "h3", gatekeeper.NotificationKind}, {6, "h2", gatekeeper.HeartbeatKind},
			{7, "h3", gatekeeper.NotificationKind}, {8, "h3", gatekeeper.NotificationKind},
			{9, "h3", gatekeeper.NotificationKind}, {9, "h2", gatekeeper.HeartbeatKind},
			{10, "h3", gatekeeper.NotificationKind},
		}},
		{"feedback off", map[string]any{"feedback": false}, nil},
		{"peer_timeout 0: no heartbeats", map[string]any{"peer_timeout": "0s"}, []sent{
			{5, "h3", gatekeeper.NotificationKind}, {6, "h3", gatekeeper.NotificationKind}, {7, "h3", gatekeeper.NotificationKind},
			{8, "h3", gatekeeper.NotificationKind}, {9, "h3", gatekeeper.NotificationKind}, {10, "h3", gatekeeper.NotificationKind},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAgent(t, "h1", c.params)
			d := &driver{a: a}
			var got []sent
			beats := 0
			for k := 0; k <= 10; k++ {
				for _, m := range d.stepObs(obs(k)).Messages {
					kind := ""
					if _, ok := gatekeeper.Decode(m.Body); ok {
						kind = gatekeeper.NotificationKind
					}
					if _, ok := gatekeeper.DecodeHeartbeat(m.Body); ok {
						kind = gatekeeper.HeartbeatKind
						beats++
					}
					if m.From != "h1" {
						t.Errorf("message from %q, want h1", m.From)
					}
					got = append(got, sent{k, m.To, kind})
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("sent %v, want %v", got, c.want)
			}
			if a.Heartbeats() != beats {
				t.Errorf("Heartbeats() = %d, want %d", a.Heartbeats(), beats)
			}
		})
	}
	// A heartbeat encodes to JSON with its kind and decodes back; a
	// notification is not a heartbeat.
	raw, err := gatekeeper.Heartbeat{}.MarshalJSON()
	if err != nil || string(raw) != `{"kind":"gatekeeper.heartbeat.v1"}` {
		t.Errorf("heartbeat JSON %s, %v", raw, err)
	}
	if _, ok := gatekeeper.DecodeHeartbeat(string(raw)); !ok {
		t.Error("heartbeat JSON not decoded")
	}
	if _, ok := gatekeeper.DecodeHeartbeat(notify("b", 0, 0).Body); ok {
		t.Error("a notification decoded as a heartbeat")
	}
}
