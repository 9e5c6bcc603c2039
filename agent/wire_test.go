package agent

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch/ra"
	"github.com/bulkhead-dc/bulkhead/mech/gatekeeper"
)

// testAgent is an agent with only what handle needs: host s1, peers s2
// (10.201.0.2) and s3 (10.201.0.3).
func testAgent() *Agent {
	return &Agent{
		cfg: Config{Host: "s1", Peers: map[string]netip.AddrPort{
			"s2": netip.MustParseAddrPort("10.201.0.2:7471"),
			"s3": netip.MustParseAddrPort("10.201.0.3:7471"),
		}},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), met: newMetrics("s1"), peerSeq: map[string]*sequence{},
	}
}

var fromS2 = netip.MustParseAddrPort("10.201.0.2:7471")

func mustEncode(t *testing.T, from, to string, epoch int64, seq uint64, body any) []byte {
	t.Helper()
	b, err := EncodeMessage(from, to, epoch, seq, body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMechanismBodiesRoundTrip: the bodies of ElasticSwitch and Gatekeeper
// go through the wire and are decoded by the mechanisms' own decoders
// from the json.RawMessage the agent delivers.
func TestMechanismBodiesRoundTrip(t *testing.T) {
	a := testAgent()
	g := elasticswitch.Guarantees{Pairs: []elasticswitch.RemoteGuarantee{{Src: "a", Dst: "b", Share: 450e6, Unbounded: true}}}
	fb := ra.Feedback{Pairs: []ra.PairLoss{{Src: "a", Dst: "b", Lost: 3}}}
	n := gatekeeper.Notification{VM: "a", Dst: "b", DropRate: 30e6}
	for i, body := range []any{g, fb, n} {
		a.handle(mustEncode(t, "s2", "s1", 1, uint64(i+1), body), fromS2)
	}
	if len(a.inbox) != 3 {
		t.Fatalf("inbox has %d messages, want 3 (dropped %v)", len(a.inbox), a.Dropped())
	}
	for _, m := range a.inbox {
		if m.From != "s2" || m.To != "s1" {
			t.Errorf("message %+v", m)
		}
		if _, ok := m.Body.(json.RawMessage); !ok {
			t.Errorf("body %T, want json.RawMessage", m.Body)
		}
	}
	if got, ok := mech.DecodeBody[elasticswitch.Guarantees](a.inbox[0].Body); !ok || got.Pairs[0] != g.Pairs[0] {
		t.Errorf("guarantees: %+v %v", got, ok)
	}
	if got, ok := mech.DecodeBody[ra.Feedback](a.inbox[1].Body); !ok || got.Pairs[0] != fb.Pairs[0] {
		t.Errorf("feedback: %+v %v", got, ok)
	}
	if got, ok := gatekeeper.Decode(a.inbox[2].Body); !ok || got != n {
		t.Errorf("notification: %+v %v", got, ok)
	}
}

// TestBadDatagramsDropped: malformed and unexpected datagrams are counted
// by reason and dropped; none reaches the mechanism.
func TestBadDatagramsDropped(t *testing.T) {
	body := map[string]any{"kind": "elasticswitch.guarantees", "pairs": []any{}}
	good := func(from, to string, epoch int64, seq uint64) []byte {
		return mustEncode(t, from, to, epoch, seq, body)
	}
	env := func(fields string) []byte { return []byte(`{` + fields + `}`) }
	for _, tc := range []struct {
		name   string
		data   []byte
		from   netip.AddrPort
		reason string
	}{
		{"empty", nil, fromS2, DropMalformed},
		{"not json", []byte("hello"), fromS2, DropMalformed},
		{"json array", []byte(`[1,2]`), fromS2, DropMalformed},
		{"no version", env(`"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropMalformed},
		{"version as string", env(`"v":"1","from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropMalformed},
		{"future version", env(`"v":2,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"}`), fromS2, DropVersion},
		{"unknown field", env(`"v":1,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x"},"extra":1`), fromS2, DropMalformed},
		{"trailing data", append(good("s2", "s1", 1, 1), []byte(` {}`)...), fromS2, DropMalformed},
		{"negative seq", env(`"v":1,"from":"s2","to":"s1","epoch":1,"seq":-1,"body":{"kind":"x"}`), fromS2, DropMalformed},
		{"too large", append(good("s2", "s1", 1, 1), []byte(strings.Repeat(" ", MaxDatagram))...), fromS2, DropSize},
		{"other recipient", good("s2", "s3", 1, 1), fromS2, DropRecipient},
		{"unknown sender", good("s9", "s1", 1, 1), fromS2, DropSender},
		{"from itself", good("s1", "s1", 1, 1), fromS2, DropSender},
		{"spoofed sender address", good("s3", "s1", 1, 1), fromS2, DropSender},
		{"no body", env(`"v":1,"from":"s2","to":"s1","epoch":1,"seq":1`), fromS2, DropBody},
		{"body not an object", env(`"v":1,"from":"s2","to":"s1","epoch":1,"seq":1,"body":[1]`), fromS2, DropBody},
		{"body without kind", env(`"v":1,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"pairs":[]}`), fromS2, DropBody},
		{"kind not a string", env(`"v":1,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":7}`), fromS2, DropBody},
		{"bad kind", env(`"v":1,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"Drop Table"}`), fromS2, DropBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAgent()
			a.handle(tc.data, tc.from)
			if len(a.inbox) != 0 {
				t.Errorf("delivered %+v", a.inbox)
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
	a := testAgent()
	body := map[string]any{"kind": "gatekeeper.congestion"}
	for _, m := range []struct {
		epoch int64
		seq   uint64
		ok    bool
	}{
		{5, 1, true}, {5, 1, false}, {5, 3, true}, {5, 2, false}, {4, 9, false}, {6, 1, true}, {6, 2, true},
	} {
		before := len(a.inbox)
		a.handle(mustEncode(t, "s2", "s1", m.epoch, m.seq, body), fromS2)
		if got := len(a.inbox) > before; got != m.ok {
			t.Errorf("epoch %d seq %d: accepted %v, want %v", m.epoch, m.seq, got, m.ok)
		}
	}
	if d := a.Dropped()[DropStale]; d != 3 {
		t.Errorf("stale drops %v, want 3", d)
	}
}

// TestEncodeRejects: bodies that are not objects with a kind, or too
// large, are refused at the sender.
func TestEncodeRejects(t *testing.T) {
	for _, body := range []any{nil, 3, "x", []int{1}, map[string]any{"pairs": 1}, map[string]any{"kind": ""},
		map[string]any{"kind": "x", "pad": strings.Repeat("a", MaxDatagram)}, func() {}} {
		if _, err := EncodeMessage("s1", "s2", 1, 1, body); err == nil {
			t.Errorf("body %v encoded", body)
		}
	}
}

// TestInboxBounded: a flood is cut at maxInbox messages per step.
func TestInboxBounded(t *testing.T) {
	a := testAgent()
	body := map[string]any{"kind": "x"}
	for i := 1; i <= maxInbox+10; i++ {
		a.handle(mustEncode(t, "s2", "s1", 1, uint64(i), body), fromS2)
	}
	if len(a.inbox) != maxInbox || a.Dropped()[DropOverflow] != 10 {
		t.Errorf("inbox %d, dropped %v", len(a.inbox), a.Dropped())
	}
}

// FuzzHandle: no datagram makes the agent panic, and whatever is
// delivered is a valid envelope from a known peer.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"v":1,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"elasticswitch.guarantees","pairs":[]}}`))
	f.Add([]byte(`{"v":1,"from":"s2","to":"s1","epoch":1,"seq":1,"body":{"kind":"x","pairs":[{"src":"a","share":1e400}]}}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,"body":{"kind":null}}`))
	f.Add([]byte{0xff, 0xfe, '{'})
	f.Fuzz(func(t *testing.T, b []byte) {
		a := testAgent()
		a.handle(b, fromS2)
		for _, m := range a.inbox {
			if m.From != "s2" || m.To != "s1" {
				t.Fatalf("delivered %+v", m)
			}
			raw := m.Body.(json.RawMessage)
			if err := checkBody(raw); err != nil {
				t.Fatalf("delivered an invalid body: %v", err)
			}
			// the mechanisms' decoders must not panic on it either
			mech.DecodeBody[elasticswitch.Guarantees](raw)
			mech.DecodeBody[ra.Feedback](raw)
			gatekeeper.Decode(raw)
		}
	})
}
