package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/wireauth"
)

// feedback is a test mechanism whose state depends on the messages it
// accepts: h2's agent sends h1's, every step, the rate the pair a1->b1
// may use (step × 1 Mbps); h1's agent records every rate it is given and
// limits a1->b1 to the last one. A forged message that got through would
// show in both.
type feedback struct {
	mu   sync.Mutex
	got  []float64 // rates h1's agent accepted, in order
	sent []float64 // rates h2's agent sent, in order
}

func (f *feedback) Name() string                    { return "feedback" }
func (f *feedback) Capabilities() mech.Capabilities { return mech.Capabilities{PairLimits: true} }
func (f *feedback) NewAgent(env mech.Env) (mech.Agent, error) {
	return &feedbackAgent{f: f, host: env.Host}, nil
}

// received returns the rates h1's agent accepted so far.
func (f *feedback) received() []float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]float64(nil), f.got...)
}

type feedbackAgent struct {
	f     *feedback
	host  string
	steps int
}

func (a *feedbackAgent) Period() time.Duration { return 10 * time.Millisecond }

func (a *feedbackAgent) Step(_ *mech.HostObs, inbox []mech.Message) mech.Actions {
	a.steps++
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	if a.host == "h2" {
		r := float64(a.steps) * 1e6
		a.f.sent = append(a.f.sent, r)
		return mech.Actions{Messages: []mech.Message{{To: "h1", Body: rateBody{Pair: "a1->b1", Rate: r}}}}
	}
	var act mech.Actions
	for _, m := range inbox {
		b, ok := mech.DecodeBody[rateBody](m.Body)
		if !ok || m.From != "h2" {
			continue
		}
		a.f.got = append(a.f.got, b.Rate)
		act.Limits = []mech.Limit{{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a1", Dst: "b1"}, Rate: b.Rate}}
	}
	return act
}

// authFixture is two agents on fake data paths over UDP on the loopback
// interface: h2's sends its messages to a socket of the test (out), which
// hands them to h1's agent from another socket of the test (wire) — the
// position of anyone on the path between them, who can also send h1
// datagrams of their own from the same address. h1 knows peers h2, h3
// (keys derived from testMaster) and h4 (no key), all at that address (h3
// and h4 hosts of the model without VMs).
type authFixture struct {
	t         *testing.T
	mc        *feedback
	h1, h2    *Agent
	p1        *fake.Host
	out, wire net.PacketConn
	now       time.Time
	wg        sync.WaitGroup
}

func newAuthFixture(t *testing.T) *authFixture {
	f := &authFixture{t: t, mc: &feedback{}, now: time.Unix(1000, 0)}
	var err error
	if f.out, err = loopback(); err != nil {
		t.Fatal(err)
	}
	if f.wire, err = loopback(); err != nil {
		t.Fatal(err)
	}
	md := testModel(t1VMs...)
	md.Hosts = []model.Host{{Name: "h3"}, {Name: "h4"}}
	here := netip.MustParseAddr("127.0.0.1")
	f.p1 = fake.New(fake.Options{Limiters: true})
	k1 := wireauth.Keys(testMaster, "h1")
	f.h1 = newTestAgent(t, Config{Host: "h1", Model: md, Mechanism: f.mc, Path: f.p1, Listen: loopback,
		Peers: PeerMap(map[string]netip.AddrPort{"h2": netip.AddrPortFrom(here, 1), "h3": netip.AddrPortFrom(here, 2), "h4": netip.AddrPortFrom(here, 3)}),
		Keys: func(p string) ([]byte, bool) {
			if p == "h4" {
				return nil, false
			}
			return k1(p)
		}})
	f.h2 = newTestAgent(t, Config{Host: "h2", Model: md, Mechanism: f.mc, Path: fake.New(fake.Options{Limiters: true}), Listen: loopback,
		Peers: PeerMap(map[string]netip.AddrPort{"h1": addrPort(f.out.LocalAddr())}), Keys: wireauth.Keys(testMaster, "h2")})
	f.h1.start, f.h2.start = f.now, f.now
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.h1.receive()
	}()
	t.Cleanup(func() {
		_ = f.h1.Close()
		f.wg.Wait()
		_ = f.out.Close()
		_ = f.wire.Close()
	})
	return f
}

// genuine steps h2's agent and returns the datagram it sent to h1 (not
// delivered yet).
func (f *authFixture) genuine() []byte {
	f.t.Helper()
	f.now = f.now.Add(10 * time.Millisecond)
	if err := f.h2.step(f.now); err != nil {
		f.t.Fatal(err)
	}
	buf := make([]byte, 65536)
	if err := f.out.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		f.t.Fatal(err)
	}
	n, _, err := f.out.ReadFrom(buf)
	if err != nil {
		f.t.Fatalf("h2's message: %v", err)
	}
	return buf[:n]
}

// handled is the datagrams h1's agent has taken or dropped.
func (f *authFixture) handled() float64 {
	n := counterValue(f.t, f.h1, "bulkhead_agent_messages_received_total")
	for _, d := range f.h1.Dropped() {
		n += d
	}
	return n
}

// inject sends datagrams to h1's agent and waits until it has handled
// them.
func (f *authFixture) inject(ds ...[]byte) {
	f.t.Helper()
	want := f.handled() + float64(len(ds))
	for _, d := range ds {
		if _, err := f.wire.WriteTo(d, net.UDPAddrFromAddrPort(f.h1.Addr())); err != nil {
			f.t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); f.handled() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatalf("h1 handled %v datagrams, want %v", f.handled(), want)
		}
	}
}

// stepH1 steps h1's agent (its mechanism takes what was delivered).
func (f *authFixture) stepH1() {
	f.t.Helper()
	if err := f.h1.step(f.now); err != nil {
		f.t.Fatal(err)
	}
}

// round is one genuine message from h2 to h1, delivered and taken.
func (f *authFixture) round() {
	f.t.Helper()
	f.inject(f.genuine())
	f.stepH1()
}

// receiverState is what a message can change at h1: the rates its
// mechanism accepted, the limit it set, the sequence it keeps of h2, its
// counters.
type receiverState struct {
	rates    []float64
	limit    float64
	limited  bool
	seq      sequence
	dropped  map[string]float64
	received float64
}

func (f *authFixture) state() receiverState {
	f.t.Helper()
	s := receiverState{rates: f.mc.received(), dropped: f.h1.Dropped(),
		received: counterValue(f.t, f.h1, "bulkhead_agent_messages_received_total")}
	s.limit, s.limited = f.p1.Limit(a1b1)
	f.h1.inMu.Lock()
	if sq := f.h1.peerSeq["h2"]; sq != nil {
		s.seq = *sq
	}
	f.h1.inMu.Unlock()
	return s
}

// envelopeOf parses the envelope of a datagram (its tag cut).
func envelopeOf(t *testing.T, d []byte) Envelope {
	t.Helper()
	var e Envelope
	if err := json.Unmarshal(d[:len(d)-wireauth.TagSize], &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// tamper replaces old by new, once, in a datagram's envelope and keeps its
// tag.
func tamper(t *testing.T, d []byte, old, new string) []byte {
	t.Helper()
	env, tag := d[:len(d)-wireauth.TagSize], d[len(d)-wireauth.TagSize:]
	if bytes.Count(env, []byte(old)) != 1 {
		t.Fatalf("%q is not once in %s", old, env)
	}
	out := bytes.Replace(env, []byte(old), []byte(new), 1)
	return append(out, tag...)
}

// TestForgedMessagesDropped: between two agents over UDP on the loopback
// interface, a datagram sent to the receiver from its peer's address that
// is unsigned, signed with a wrong key, changed in any field, or replayed
// is dropped and counted under its reason ("auth", "stale"), and leaves
// the receiver as it was: its mechanism accepted nothing more, the limit
// it set and its sequence of the peer are unchanged. The peer's genuine
// message sent just before the attack is still accepted after it, and so
// are the following ones — a forged epoch or sequence, however large,
// locks no peer out.
func TestForgedMessagesDropped(t *testing.T) {
	otherMaster := bytes.Clone(testMaster)
	otherMaster[0] ^= 1
	forged := func(t *testing.T, key []byte, from string, epoch int64, seq uint64) []byte {
		b, err := EncodeMessage(key, from, "h1", epoch, seq, rateBody{Pair: "a1->b1", Rate: 1})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	unsigned := func(d []byte) []byte { return bytes.Clone(d[:len(d)-wireauth.TagSize]) }
	k12, k13, k14 := wireauth.PairKey(testMaster, "h1", "h2"), wireauth.PairKey(testMaster, "h1", "h3"), wireauth.PairKey(testMaster, "h1", "h4")
	const huge = math.MaxInt64
	for _, tc := range []struct {
		name string
		// attack returns the datagrams sent, from g (h2's genuine
		// message, not delivered yet) and old (one delivered before).
		attack    func(t *testing.T, g, old []byte) [][]byte
		delivered int                // of the attack's datagrams
		drops     map[string]float64 // by reason
	}{
		{"genuine", func(t *testing.T, g, _ []byte) [][]byte { return [][]byte{g} }, 1, nil},
		{"unsigned", func(t *testing.T, g, _ []byte) [][]byte { return [][]byte{unsigned(g)} }, 0, map[string]float64{DropAuth: 1}},
		{"version 1, unsigned", func(t *testing.T, g, _ []byte) [][]byte {
			return [][]byte{bytes.Replace(unsigned(g), fmt.Appendf(nil, `"v":%d`, WireVersion), []byte(`"v":1`), 1)}
		}, 0, map[string]float64{DropVersion: 1}},
		{"wrong key", func(t *testing.T, g, _ []byte) [][]byte {
			e := envelopeOf(t, g)
			return [][]byte{forged(t, wireauth.PairKey(otherMaster, "h1", "h2"), "h2", e.Epoch, e.Seq)}
		}, 0, map[string]float64{DropAuth: 1}},
		{"another peer's key", func(t *testing.T, g, _ []byte) [][]byte {
			e := envelopeOf(t, g)
			return [][]byte{forged(t, k13, "h2", e.Epoch, e.Seq)}
		}, 0, map[string]float64{DropAuth: 1}},
		{"sender without a key", func(t *testing.T, g, _ []byte) [][]byte {
			return [][]byte{forged(t, k14, "h4", 1, 1)}
		}, 0, map[string]float64{DropAuth: 1}},
		{"tampered body", func(t *testing.T, g, _ []byte) [][]byte {
			return [][]byte{tamper(t, g, fmt.Sprintf(`"rate":%v`, f64(envelopeRate(t, g))), `"rate":1`)}
		}, 0, map[string]float64{DropAuth: 1}},
		{"tampered to", func(t *testing.T, g, _ []byte) [][]byte { return [][]byte{tamper(t, g, `"to":"h1"`, `"to":"h3"`)} },
			0, map[string]float64{DropAuth: 1}},
		{"tampered from", func(t *testing.T, g, _ []byte) [][]byte { return [][]byte{tamper(t, g, `"from":"h2"`, `"from":"h3"`)} },
			0, map[string]float64{DropAuth: 1}},
		{"tampered epoch", func(t *testing.T, g, _ []byte) [][]byte {
			e := envelopeOf(t, g)
			return [][]byte{tamper(t, g, fmt.Sprintf(`"epoch":%d`, e.Epoch), fmt.Sprintf(`"epoch":%d`, e.Epoch+1))}
		}, 0, map[string]float64{DropAuth: 1}},
		{"tampered seq", func(t *testing.T, g, _ []byte) [][]byte {
			e := envelopeOf(t, g)
			return [][]byte{tamper(t, g, fmt.Sprintf(`"seq":%d`, e.Seq), fmt.Sprintf(`"seq":%d`, e.Seq+1000))}
		}, 0, map[string]float64{DropAuth: 1}},
		{"tampered version", func(t *testing.T, g, _ []byte) [][]byte {
			return [][]byte{tamper(t, g, fmt.Sprintf(`"v":%d`, WireVersion), fmt.Sprintf(`"v":%d`, WireVersion+1))}
		},
			0, map[string]float64{DropVersion: 1}},
		{"re-encoded (a space added)", func(t *testing.T, g, _ []byte) [][]byte {
			return [][]byte{tamper(t, g, fmt.Sprintf(`"v":%d,`, WireVersion), fmt.Sprintf(`"v":%d, `, WireVersion))}
		},
			0, map[string]float64{DropAuth: 1}},
		{"tag changed", func(t *testing.T, g, _ []byte) [][]byte {
			d := bytes.Clone(g)
			d[len(d)-1] ^= 0x80
			return [][]byte{d}
		}, 0, map[string]float64{DropAuth: 1}},
		{"replayed", func(t *testing.T, _, old []byte) [][]byte { return [][]byte{old} }, 0, map[string]float64{DropStale: 1}},
		{"delivered twice", func(t *testing.T, g, _ []byte) [][]byte { return [][]byte{g, g} }, 1, map[string]float64{DropStale: 1}},
		{"forged huge epoch", func(t *testing.T, g, _ []byte) [][]byte {
			e := envelopeOf(t, g)
			return [][]byte{
				unsigned(forged(t, k12, "h2", huge, 1)),                                                  // no tag
				forged(t, wireauth.PairKey(otherMaster, "h1", "h2"), "h2", huge, 1),                      // a wrong key
				forged(t, k13, "h2", huge, math.MaxUint64),                                               // another peer's key
				tamper(t, g, fmt.Sprintf(`"epoch":%d`, e.Epoch), fmt.Sprintf(`"epoch":%d`, int64(huge))), // a genuine tag
			}
		}, 0, map[string]float64{DropAuth: 4}},
		// Signed with the pair's own key (a peer whose key leaked, or a
		// bug): the clock bounds what the receiver adopts, so the genuine
		// messages that follow are still accepted.
		{"signed, epoch from the future", func(t *testing.T, g, _ []byte) [][]byte {
			return [][]byte{
				forged(t, k12, "h2", huge, 1),
				forged(t, k12, "h2", time.Now().Add(MaxClockSkew+time.Minute).UnixNano(), 1),
			}
		}, 0, map[string]float64{DropFuture: 2}},
		{"signed, sequence beyond the sender's clock", func(t *testing.T, g, _ []byte) [][]byte {
			e := envelopeOf(t, g)
			return [][]byte{forged(t, k12, "h2", e.Epoch, math.MaxUint64), forged(t, k12, "h2", e.Epoch, e.Seq+1e9)}
		}, 0, map[string]float64{DropFuture: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAuthFixture(t)
			var old []byte
			for i := 0; i < 3; i++ {
				g := f.genuine()
				if old == nil {
					old = bytes.Clone(g)
				}
				f.inject(g)
				f.stepH1()
			}
			g := bytes.Clone(f.genuine())
			before := f.state()
			if len(before.rates) != 3 || !before.limited || before.limit != before.rates[2] {
				t.Fatalf("before the attack: %+v", before)
			}
			f.inject(tc.attack(t, g, old)...)
			f.stepH1()
			after := f.state()
			drops := maps.Clone(before.dropped)
			for r, n := range tc.drops {
				drops[r] += n
			}
			if !maps.Equal(after.dropped, drops) {
				t.Errorf("dropped %v, want %v", after.dropped, drops)
			}
			if got := after.received - before.received; got != float64(tc.delivered) {
				t.Errorf("%v delivered, want %d", got, tc.delivered)
			}
			gr := envelopeRate(t, g)
			if tc.delivered == 0 {
				if !slices.Equal(after.rates, before.rates) || after.limit != before.limit || after.seq != before.seq {
					t.Errorf("receiver changed: before %+v, after %+v", before, after)
				}
				// h2's genuine message sent before the attack is still new
				f.inject(g)
				f.stepH1()
			}
			if st := f.state(); !slices.Equal(st.rates, append(before.rates, gr)) || st.limit != gr {
				t.Errorf("after h2's message: rates %v, limit %v; want %v, %v", st.rates, st.limit, append(before.rates, gr), gr)
			}
			// and so are the next ones
			f.round()
			f.round()
			f.mc.mu.Lock()
			want := append([]float64(nil), f.mc.sent...)
			f.mc.mu.Unlock()
			if st := f.state(); !slices.Equal(st.rates, want) || st.limit != want[len(want)-1] {
				t.Errorf("h1 accepted %v with limit %v; h2 sent %v", st.rates, st.limit, want)
			}
		})
	}
}

// envelopeRate is the rate a datagram of the feedback mechanism carries.
func envelopeRate(t *testing.T, d []byte) float64 {
	t.Helper()
	b, ok := mech.DecodeBody[rateBody](envelopeOf(t, d).Body)
	if !ok {
		t.Fatalf("not a rate: %s", d)
	}
	return b.Rate
}

// f64 formats a rate as encoding/json does.
func f64(r float64) string {
	b, _ := json.Marshal(r)
	return string(b)
}

// TestSocketNeedsKeys: an agent with a socket and no keys refuses to
// start, and closes its data path.
func TestSocketNeedsKeys(t *testing.T) {
	p := fake.New(fake.Options{Limiters: true})
	_, err := New(Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: &script{}, Path: p, Listen: loopback})
	if err == nil || !strings.Contains(err.Error(), "Config.Keys") {
		t.Errorf("error %v, want one naming Config.Keys", err)
	}
	if !p.Closed() {
		t.Error("data path not closed")
	}
}

// TestSendNeedsKey: a message to a peer without a key is not sent, and is
// counted; one to a peer with a key is.
func TestSendNeedsKey(t *testing.T) {
	sink, err := loopback()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	to := addrPort(sink.LocalAddr())
	mc := &script{act: func(string, int, *mech.HostObs) mech.Actions {
		return mech.Actions{Messages: []mech.Message{{To: "h2", Body: rateBody{Rate: 1}}, {To: "h3", Body: rateBody{Rate: 1}}}}
	}}
	md := testModel(append(slices.Clone(t1VMs), vmSpec{"c1", "T1", "h3", "10.0.3.1", 100e6, 100e6})...)
	a := newTestAgent(t, Config{Host: "h1", Model: md, Mechanism: mc, Path: fake.New(fake.Options{Limiters: true}),
		Listen: loopback, Peers: PeerMap(map[string]netip.AddrPort{"h2": to, "h3": to}),
		Keys: wireauth.KeyMap(map[string][]byte{"h2": wireauth.PairKey(testMaster, "h1", "h2")})})
	s := newStepper(a)
	if err := s.step(); err != nil {
		t.Fatal(err)
	}
	if n := counterValue(t, a, "bulkhead_agent_messages_sent_total"); n != 1 {
		t.Errorf("%v messages sent, want 1", n)
	}
	if n := counterValue(t, a, "bulkhead_agent_send_errors_total"); n != 1 {
		t.Errorf("%v send errors, want 1 (no key for h3)", n)
	}
	buf := make([]byte, 65536)
	_ = sink.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := sink.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	e, err := DecodeMessage(buf[:n], "h2", wireauth.PairKey(testMaster, "h1", "h2"))
	if err != nil || e.From != "h1" {
		t.Errorf("the message to h2: %+v, %v", e, err)
	}
}
