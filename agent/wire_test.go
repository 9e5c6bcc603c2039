package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/wireauth"
)

// testMaster is the master secret of the tests' pair keys.
var testMaster = []byte("bulkhead agent tests master key!")

// testAgent is an agent without a socket for what handle needs: host
// s1, peers s2 (10.201.0.2) and s3 (10.201.0.3) with keys derived from
// testMaster, s4 (10.201.0.4, a host of the model without VMs) without a
// key, a script mechanism.
func testAgent(t testing.TB) *Agent {
	t.Helper()
	peers := map[string]netip.AddrPort{
		"s2": netip.MustParseAddrPort("10.201.0.2:7471"),
		"s3": netip.MustParseAddrPort("10.201.0.3:7471"),
		"s4": netip.MustParseAddrPort("10.201.0.4:7471"),
	}
	keys := wireauth.KeyMap(map[string][]byte{"s2": wireauth.PairKey(testMaster, "s1", "s2"), "s3": wireauth.PairKey(testMaster, "s1", "s3")})
	m := testModel(vmSpec{"x1", "T", "s1", "10.0.0.1", 1e6, 1e6}, vmSpec{"x2", "T", "s2", "10.0.0.2", 1e6, 1e6},
		vmSpec{"x3", "T", "s3", "10.0.0.3", 1e6, 1e6})
	m.Hosts = []model.Host{{Name: "s4"}}
	a, err := New(Config{Host: "s1", Model: m, Mechanism: &script{}, Path: fakePath(mech.LossAtSource), Peers: PeerMap(peers),
		Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// inbox steps the agent's mechanism and returns the messages it was
// given.
func inbox(t testing.TB, a *Agent) []mech.Message {
	t.Helper()
	if _, err := a.drv.Step(&mech.HostObs{}); err != nil {
		t.Fatal(err)
	}
	in := a.cfg.Mechanism.(*script).agent("s1").inbox
	return in[len(in)-1]
}

var fromS2 = netip.MustParseAddrPort("10.201.0.2:7471")

// mustEncode encodes a message sealed with the key of its sender and
// recipient.
func mustEncode(t testing.TB, from, to string, epoch int64, seq uint64, body any) []byte {
	t.Helper()
	b, err := EncodeMessage(wireauth.PairKey(testMaster, from, to), from, to, epoch, seq, body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rateBody is a test message body (mech.Body).
type rateBody struct {
	Pair string  `json:"pair"`
	Rate float64 `json:"rate"`
}

func (rateBody) MessageKind() string { return "test.rate.v1" }

func (b rateBody) MarshalJSON() ([]byte, error) {
	type fields rateBody
	return mech.MarshalBody(b.MessageKind(), fields(b))
}

// TestBodiesRoundTrip: a body goes through the wire and reaches the
// mechanism as the JSON the sender encoded, a json.RawMessage that the
// mechanism decodes itself (mech.DecodeBody).
func TestBodiesRoundTrip(t *testing.T) {
	a := testAgent(t)
	bodies := []any{
		rateBody{Pair: "a->b", Rate: 450e6},
		map[string]any{"kind": "test.shares.v1", "pairs": []map[string]any{{"src": "a", "dst": "b", "share": 1e6}}},
	}
	for i, body := range bodies {
		a.handle(mustEncode(t, "s2", "s1", 1, uint64(i+1), body), fromS2)
	}
	got := inbox(t, a)
	if len(got) != len(bodies) {
		t.Fatalf("inbox has %d messages, want %d (dropped %v)", len(got), len(bodies), a.Dropped())
	}
	for i, m := range got {
		if m.From != "s2" || m.To != "s1" {
			t.Errorf("message %+v", m)
		}
		raw, ok := m.Body.(json.RawMessage)
		if !ok {
			t.Fatalf("body %T, want json.RawMessage", m.Body)
		}
		want, _ := json.Marshal(bodies[i])
		if string(raw) != string(want) {
			t.Errorf("body %s, want %s", raw, want)
		}
	}
	if b, ok := mech.DecodeBody[rateBody](got[0].Body); !ok || b != bodies[0] {
		t.Errorf("decoded %+v %v", b, ok)
	}
}

// TestBadDatagramsDropped: malformed, unauthenticated and unexpected
// datagrams are counted by reason and dropped; none reaches the
// mechanism. Envelopes with bad contents are sealed with the right key,
// so that they are refused for their contents, after the tag verifies.
func TestBadDatagramsDropped(t *testing.T) {
	body := map[string]any{"kind": "test.shares", "pairs": []any{}}
	good := func(from, to string, epoch int64, seq uint64) []byte {
		return mustEncode(t, from, to, epoch, seq, body)
	}
	k12 := wireauth.PairKey(testMaster, "s1", "s2")
	env := func(fields string) []byte { return []byte(`{` + fields + `}`) }
	sealed := func(key []byte, payload []byte) []byte {
		b, err := wireauth.Seal(key, payload)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	signed := func(fields string) []byte { return sealed(k12, env(fields)) }
	encode := func(key []byte, from, to string) []byte {
		b, err := EncodeMessage(key, from, to, 1, 1, body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 1
		return b
	}
	g := good("s2", "s1", 1, 1)
	otherMaster := bytes.Clone(testMaster)
	otherMaster[0] ^= 1
	for _, tc := range []struct {
		name   string
		data   []byte
		from   netip.AddrPort
		reason string
	}{
		{"empty", nil, fromS2, DropMalformed},
		{"not json", []byte("hello"), fromS2, DropMalformed},
		{"json array", []byte(`[1,2]`), fromS2, DropMalformed},
		{"no version", signed(`"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropMalformed},
		{"version as string", signed(`"v":"2","from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropMalformed},
		{"future version", signed(`"v":4,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropVersion},
		{"version 1 (no tag)", env(`"v":1,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropVersion},
		{"version 2 (no send time)", signed(`"v":2,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropVersion},
		{"no send time", signed(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropStale},
		{"unsigned", env(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropAuth},
		{"tag cut", g[:len(g)-wireauth.TagSize], fromS2, DropAuth},
		{"wrong key", encode(wireauth.PairKey(otherMaster, "s1", "s2"), "s2", "s1"), fromS2, DropAuth},
		{"another pair's key", encode(wireauth.PairKey(testMaster, "s1", "s3"), "s2", "s1"), fromS2, DropAuth},
		{"a prefix of the key", encode(k12[:wireauth.MinKeySize], "s2", "s1"), fromS2, DropAuth},
		{"sender without a key", encode(wireauth.PairKey(testMaster, "s1", "s4"), "s4", "s1"), netip.MustParseAddrPort("10.201.0.4:7471"), DropAuth},
		{"envelope changed", flip(g, bytes.Index(g, []byte(`"seq":1`))+6), fromS2, DropAuth},
		{"tag changed", flip(g, len(g)-1), fromS2, DropAuth},
		{"unknown field", signed(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"},"extra":1`), fromS2, DropMalformed},
		{"trailing data", sealed(k12, append(env(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), []byte(` {}`)...)), fromS2, DropMalformed},
		{"bytes after the tag", append(bytes.Clone(g), []byte(` {}`)...), fromS2, DropMalformed},
		{"negative seq", signed(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":-1,"body":{"kind":"x"}`), fromS2, DropMalformed},
		{"too large", append(bytes.Clone(g), []byte(strings.Repeat(" ", MaxDatagram))...), fromS2, DropSize},
		{"other recipient", encode(k12, "s2", "s3"), fromS2, DropRecipient},
		{"for another pair", good("s2", "s3", 1, 1), fromS2, DropAuth},
		{"unknown sender", good("s9", "s1", 1, 1), fromS2, DropSender},
		{"no sender", signed(`"v":3,"to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropSender},
		{"from itself", good("s1", "s1", 1, 1), fromS2, DropSender},
		{"spoofed sender address", good("s3", "s1", 1, 1), fromS2, DropSender},
		{"no body", signed(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":1`), fromS2, DropBody},
		{"body not an object", signed(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":1,"body":[1]`), fromS2, DropBody},
		{"body without kind", signed(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"pairs":[]}`), fromS2, DropBody},
		{"kind not a string", signed(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":7}`), fromS2, DropBody},
		{"bad kind", signed(`"v":3,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"Drop Table"}`), fromS2, DropBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAgent(t)
			a.handle(tc.data, tc.from)
			if in := inbox(t, a); len(in) != 0 {
				t.Errorf("delivered %+v", in)
			}
			d := a.Dropped()
			if d[tc.reason] != 1 {
				t.Errorf("dropped %v, want one %q", d, tc.reason)
			}
		})
	}
}

// TestSequence: duplicates and messages older than the newest accepted
// are dropped as stale; a restarted sender (larger epoch) starts anew.
func TestSequence(t *testing.T) {
	a := testAgent(t)
	body := map[string]any{"kind": "test.congestion"}
	for _, m := range []struct {
		epoch int64
		seq   uint64
		ok    bool
	}{
		{5, 1, true}, {5, 1, false}, {5, 3, true}, {5, 2, false}, {4, 9, false}, {6, 1, true}, {6, 2, true},
	} {
		a.handle(mustEncode(t, "s2", "s1", m.epoch, m.seq, body), fromS2)
		if got := len(inbox(t, a)) > 0; got != m.ok {
			t.Errorf("epoch %d seq %d: accepted %v, want %v", m.epoch, m.seq, got, m.ok)
		}
	}
	if d := a.Dropped()[DropStale]; d != 3 {
		t.Errorf("stale drops %v, want 3", d)
	}
}

// TestEncodeRejects: bodies that are not objects with a kind, or too
// large with their tag, and keys too short, are refused at the sender.
func TestEncodeRejects(t *testing.T) {
	key := wireauth.PairKey(testMaster, "s1", "s2")
	for _, body := range []any{nil, 3, "x", []int{1}, map[string]any{"pairs": 1}, map[string]any{"kind": ""},
		map[string]any{"kind": "x", "pad": strings.Repeat("a", MaxDatagram)}, func() {}} {
		if _, err := EncodeMessage(key, "s1", "s2", 1, 1, body); err == nil {
			t.Errorf("body %v encoded", body)
		}
	}
	// the largest envelope that fits without its tag, and not with it
	body := map[string]any{"kind": "x", "pad": ""}
	b, err := EncodeMessage(key, "s1", "s2", 1, 1, body)
	if err != nil {
		t.Fatal(err)
	}
	body["pad"] = strings.Repeat("a", MaxDatagram-len(b)+1)
	if b, err := EncodeMessage(key, "s1", "s2", 1, 1, body); err == nil {
		t.Errorf("%d bytes encoded", len(b))
	}
	body["pad"] = strings.Repeat("a", MaxDatagram-len(b))
	if b, err := EncodeMessage(key, "s1", "s2", 1, 1, body); err != nil || len(b) != MaxDatagram {
		t.Errorf("%d bytes: %v", len(b), err)
	}
	for _, k := range [][]byte{nil, key[:wireauth.MinKeySize-1]} {
		if _, err := EncodeMessage(k, "s1", "s2", 1, 1, map[string]any{"kind": "x"}); err == nil {
			t.Errorf("encoded with a %d-byte key", len(k))
		}
	}
}

// TestInboxBounded: a flood is cut at drive.MaxInbox messages per step.
func TestInboxBounded(t *testing.T) {
	a := testAgent(t)
	body := map[string]any{"kind": "x"}
	for i := 1; i <= drive.MaxInbox+10; i++ {
		a.handle(mustEncode(t, "s2", "s1", 1, uint64(i), body), fromS2)
	}
	if in := inbox(t, a); len(in) != drive.MaxInbox || a.Dropped()[DropOverflow] != 10 {
		t.Errorf("inbox %d, dropped %v", len(in), a.Dropped())
	}
}

// FuzzHandle: no datagram makes the agent panic, whatever is delivered
// is a valid envelope from a known peer, and the agents of every
// mechanism host agents run take it without panicking. With sealed, the
// fuzzer's bytes are sealed with the key s1 and s2 share (a peer that
// has the key sends them), so that what follows the tag's check is
// fuzzed too; without, nothing is ever delivered.
func FuzzHandle(f *testing.F) {
	// sent now, as far as the fuzzer's runs go (MaxMessageAge)
	seed := func(body string) []byte {
		return fmt.Appendf(nil, `{"v":%d,"from":"s2","to":"s1","epoch":1,"seq":1,"sent":%d,"body":%s}`, WireVersion, time.Now().UnixNano(), body)
	}
	f.Add(seed(`{"kind":"x.y","pairs":[]}`), true)
	f.Add(seed(`{"kind":"x","pairs":[{"src":"a","share":1e400}]}`), true)
	f.Add(seed(`{"kind":"x.y","pairs":[]}`), false)
	f.Add(fmt.Appendf(nil, `{"v":%d}`, WireVersion), false)
	f.Add([]byte(`{"v":1,"body":{"kind":null}}`), true)
	f.Add([]byte{0xff, 0xfe, '{'}, false)
	key := wireauth.PairKey(testMaster, "s1", "s2")
	env := mech.Env{Host: "s1", VMs: []mech.VM{{Name: "a", Tenant: "T", Host: "s1", In: 1e8, Out: 1e8},
		{Name: "b", Tenant: "T", Host: "s2", In: 1e8, Out: 1e8}}}
	var agents []mech.Agent
	for _, name := range all.Names() {
		m, err := all.New(name, nil)
		if err != nil {
			f.Fatal(err)
		}
		if ok, _ := m.Capabilities().RealTraffic(); !ok {
			continue
		}
		ma, err := m.NewAgent(env)
		if err != nil {
			f.Fatal(err)
		}
		agents = append(agents, ma)
	}
	f.Fuzz(func(t *testing.T, b []byte, sealed bool) {
		if sealed {
			var err error
			if b, err = wireauth.Seal(key, b); err != nil {
				t.Fatal(err)
			}
		}
		a := testAgent(t)
		a.handle(b, fromS2)
		in := inbox(t, a)
		if !sealed && len(in) > 0 {
			t.Fatalf("an unsealed datagram delivered: %q", b)
		}
		for _, m := range in {
			if m.From != "s2" || m.To != "s1" {
				t.Fatalf("delivered %+v", m)
			}
			raw := m.Body.(json.RawMessage)
			if err := checkBody(raw); err != nil {
				t.Fatalf("delivered an invalid body: %v", err)
			}
		}
		// the mechanisms' agents must not panic on it either
		for _, ma := range agents {
			ma.Step(&mech.HostObs{}, in)
		}
	})
}

// TestNoPeerAddressDroppedFirst: a datagram from an address that is no
// peer agent's (a VM flooding the agent's port) is dropped as "sender"
// whatever it holds — unparsable, of another version, too large, claiming
// a peer, even sealed with that peer's key —, before it is parsed and
// before any key is looked up or tag computed; one from a peer's address
// that claims another sender is dropped the same way.
func TestNoPeerAddressDroppedFirst(t *testing.T) {
	body := map[string]any{"kind": "test.shares", "pairs": []any{}}
	g := mustEncode(t, "s2", "s1", 1, 1, body)
	vm := netip.MustParseAddrPort("10.0.0.9:7471")
	big := mustEncode(t, "s2", "s1", 1, 1, map[string]any{"kind": "x", "pad": strings.Repeat("a", MaxDatagram-200)})
	for _, tc := range []struct {
		name string
		data []byte
		from netip.AddrPort
	}{
		{"not json", []byte("hello"), vm},
		{"version 1", []byte(`{"v":1,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}}`), vm},
		{"too large", append(bytes.Clone(g), []byte(strings.Repeat(" ", MaxDatagram))...), vm},
		{"unsigned, claiming a peer", g[:len(g)-wireauth.TagSize], vm},
		{"wrong key, claiming a peer", func() []byte {
			b, err := EncodeMessage(bytes.Repeat([]byte{7}, 32), "s2", "s1", 1, 1, body)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}(), vm},
		{"60 KB, claiming a peer", big, vm},
		{"genuine, from a VM's address", g, vm},
		{"genuine, from a VM of the peer's host", g, netip.MustParseAddrPort("10.0.0.2:7471")},
		{"genuine, from another peer's address", g, netip.MustParseAddrPort("10.201.0.3:7471")},
		{"genuine, from a mapped VM address", g, netip.MustParseAddrPort("[::ffff:10.0.0.9]:7471")},
		{"from a peer's address, claiming another peer", mustEncode(t, "s3", "s1", 1, 1, body), fromS2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAgent(t)
			keys, looked := a.cfg.Keys, 0
			a.cfg.Keys = func(p string) ([]byte, bool) {
				looked++
				return keys(p)
			}
			a.handle(tc.data, tc.from)
			if in := inbox(t, a); len(in) != 0 {
				t.Errorf("delivered %+v", in)
			}
			if d := a.Dropped(); d[DropSender] != 1 {
				t.Errorf("dropped %v, want one %q", d, DropSender)
			}
			if looked != 0 {
				t.Errorf("%d key lookups, want none", looked)
			}
		})
	}
	// the same genuine datagram from its sender's address is taken, from
	// any port (as before) and as an IPv4-mapped address
	for _, from := range []string{"10.201.0.2:7471", "10.201.0.2:40000", "[::ffff:10.201.0.2]:7471"} {
		a := testAgent(t)
		a.handle(g, netip.MustParseAddrPort(from))
		if in := inbox(t, a); len(in) != 1 {
			t.Errorf("genuine datagram from s2 at %s: delivered %d, dropped %v", from, len(in), a.Dropped())
		}
	}
}

// BenchmarkForgedDatagram: what one forged datagram costs the receiver
// (a VM flooding the agent's port, claiming a peer, sealed with a wrong
// key), from an address that is no peer's and from the peer's own
// (spoofed), of 1 KB and of 60 KB: "before" reads it as the agent did
// before the source address was checked first (handleBefore), "after" as
// it does now (handle).
func BenchmarkForgedDatagram(b *testing.B) {
	wrong := bytes.Repeat([]byte{7}, 32)
	for _, size := range []int{1000, MaxDatagram} {
		// a body padded to size bytes with its envelope and tag
		d, err := EncodeMessage(wrong, "s2", "s1", 1, 1, map[string]any{"kind": "x", "pad": ""})
		if err != nil {
			b.Fatal(err)
		}
		if d, err = EncodeMessage(wrong, "s2", "s1", 1, 1, map[string]any{"kind": "x", "pad": strings.Repeat("a", size-len(d))}); err != nil || len(d) != size {
			b.Fatalf("%d bytes: %v", len(d), err)
		}
		for _, src := range []struct {
			name string
			from netip.AddrPort
		}{{"no-peer-address", netip.MustParseAddrPort("10.0.0.9:7471")}, {"peer-address", fromS2}} {
			for _, impl := range []struct {
				name   string
				handle func(a *Agent, b []byte, from netip.AddrPort)
			}{{"before", handleBefore}, {"after", (*Agent).handle}} {
				b.Run(fmt.Sprintf("%s/%s/%dB", src.name, impl.name, size), func(b *testing.B) {
					a := testAgent(b)
					b.SetBytes(int64(len(d)))
					b.ReportAllocs()
					for b.Loop() {
						impl.handle(a, d, src.from)
					}
					b.StopTimer()
					if in := inbox(b, a); len(in) != 0 {
						b.Fatalf("forged datagrams taken: %+v", in)
					}
				})
			}
		}
	}
}

// handleBefore is handle as it was before the source address was checked
// first (as of 4f0cc59): the claimed sender parsed, its key looked up,
// the tag computed and the envelope parsed, and only then the datagram's
// source address compared with the sender's.
func handleBefore(a *Agent, b []byte, from netip.AddrPort) {
	open := func() (Envelope, error) {
		sender, err := Sender(b)
		if err != nil {
			return Envelope{}, err
		}
		peer, ok := a.cfg.Peers(sender)
		if !ok || sender == a.cfg.Host {
			return Envelope{}, wireErr(DropSender, "unknown sender %q", sender)
		}
		key, ok := a.cfg.Keys(sender)
		if !ok {
			return Envelope{}, wireErr(DropAuth, "no key for sender %q", sender)
		}
		e, err := DecodeMessage(b, a.cfg.Host, key)
		if err != nil {
			return e, err
		}
		if peer.Addr() != from.Addr().Unmap() {
			return e, wireErr(DropSender, "sender %q from %v, expected %v", e.From, from.Addr(), peer.Addr())
		}
		return e, nil
	}
	if _, err := open(); err != nil {
		a.met.drop(reason(err))
		a.log.Debug("message dropped", "from", from, "err", err)
		return
	}
	panic("a forged datagram was taken")
}

// TestReplayToFreshReceiver: a message that starts its sender's sequence
// at the receiver — the first since the receiver (re)started or forgot
// the sender (its host left the model), or the first of a newer epoch —
// is taken only if sent within MaxMessageAge of the receiver's clock,
// whatever its epoch: a long-running sender's next message is taken, a
// datagram captured earlier and replayed to a restarted receiver is
// dropped as stale and moves nothing, so the sender's genuine message
// that follows is taken. Within a sequence, order alone decides.
func TestReplayToFreshReceiver(t *testing.T) {
	now := time.Now()
	ns := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	type msg struct {
		epoch int64
		seq   uint64
		sent  int64
	}
	body := rateBody{Pair: "x", Rate: 1}
	started := ns(-30 * 24 * time.Hour) // the sender's start, a month ago
	for _, tc := range []struct {
		name   string
		before []msg // taken before (the receiver holds the sequence)
		forget bool  // then s2 leaves the model and comes back
		m      msg
		want   string // "": taken
	}{
		{"restarted receiver, sent now", nil, false, msg{started, 1e6, ns(0)}, ""},
		{"restarted receiver, sent just within MaxMessageAge", nil, false, msg{started, 1e6, ns(-MaxMessageAge + time.Second)}, ""},
		{"restarted receiver, sent a minute ago (replayed)", nil, false, msg{started, 1e6, ns(-time.Minute)}, DropStale},
		{"restarted receiver, a past epoch's message (replayed)", nil, false, msg{ns(-2 * time.Hour), 5, ns(-time.Hour)}, DropStale},
		{"restarted receiver, sent a day ahead", nil, false, msg{started, 1e6, ns(24 * time.Hour)}, DropFuture},
		{"restarted receiver, sent just within MaxClockSkew ahead", nil, false, msg{started, 1e6, ns(MaxClockSkew - time.Second)}, ""},
		{"sender forgotten, an older message replayed", []msg{{started, 1e6, ns(0)}}, true, msg{started, 1e6 - 10, ns(-time.Minute)}, DropStale},
		{"sender forgotten, its next message", []msg{{started, 1e6, ns(0)}}, true, msg{started, 1e6 + 1, ns(0)}, ""},
		{"newer epoch, sent an hour ago", []msg{{ns(-2 * time.Hour), 10, ns(0)}}, false, msg{ns(-time.Hour), 1, ns(-time.Hour)}, DropStale},
		{"newer epoch, sent now", []msg{{ns(-2 * time.Hour), 10, ns(0)}}, false, msg{ns(-time.Hour), 1, ns(0)}, ""},
		{"same epoch, next message sent a minute ago", []msg{{started, 10, ns(0)}}, false, msg{started, 11, ns(-time.Minute)}, ""},
		{"same epoch, older message sent now", []msg{{started, 10, ns(0)}}, false, msg{started, 9, ns(0)}, DropStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAgent(t)
			key := wireauth.PairKey(testMaster, "s1", "s2")
			handle := func(m msg) {
				t.Helper()
				b, err := encodeMessage(key, "s2", "s1", m.epoch, m.seq, m.sent, body)
				if err != nil {
					t.Fatal(err)
				}
				a.handle(b, fromS2)
			}
			for _, m := range tc.before {
				handle(m)
			}
			if n := len(inbox(t, a)); n != len(tc.before) {
				t.Fatalf("%d of the messages before taken, want %d (dropped %v)", n, len(tc.before), a.Dropped())
			}
			if tc.forget {
				m := a.model
				a.prunePeers(testModel(vmSpec{"x1", "T", "s1", "10.0.0.1", 1e6, 1e6}))
				a.prunePeers(m)
			}
			var held sequence
			if sq := a.peerSeq["s2"]; sq != nil {
				held = *sq
			}
			handle(tc.m)
			in := inbox(t, a)
			if tc.want == "" {
				if len(in) != 1 {
					t.Fatalf("not taken: dropped %v", a.Dropped())
				}
				return
			}
			if len(in) != 0 || a.Dropped()[tc.want] != 1 {
				t.Fatalf("taken %d, dropped %v; want it dropped as %q", len(in), a.Dropped(), tc.want)
			}
			if sq := a.peerSeq["s2"]; sq != nil && *sq != held {
				t.Errorf("sequence moved from %+v to %+v", held, *sq)
			}
			// the sender's genuine next message is taken
			e := started
			if len(tc.before) > 0 {
				e = tc.before[0].epoch
			}
			handle(msg{e, 1e6 + 100, time.Now().UnixNano()})
			if len(inbox(t, a)) != 1 {
				t.Errorf("the sender's next message not taken: dropped %v", a.Dropped())
			}
		})
	}
}
