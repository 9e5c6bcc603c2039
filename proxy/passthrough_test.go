package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/proxy/appliancetest"
	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// step is one write of a client and the replies it gets.
type step struct {
	send    string
	replies int
}

// TestRefusedRequests: no sequence of commands gets a reply the proxy does
// not charge. Once a connection subscribes or monitors (its replies no
// longer match its requests), only (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING
// and QUIT are relayed: an ordinary command after the last UNSUBSCRIBE,
// RESET or HELLO while subscribed, any ordinary command under RESP3 — all
// of which Redis would answer as ordinary replies the proxy relays
// unmatched — are refused, unforwarded, with an error and the close;
// CLIENT REPLY (whose OFF and SKIP leave requests unanswered) and the
// replication commands are refused on any connection. A real Redis.
func TestRefusedRequests(t *testing.T) {
	redis := appliancetest.StartRedis(t)
	p := newProxy(t, Config{}, Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(redis)})
	addr := listen(t, p, kvFlow("vm1"))
	incr := func(key string) string { return encode("INCR", key) }
	for _, tc := range []struct {
		name  string
		steps []step // the last step's request is refused, unless refused is false
		// refused: the last step ends with the proxy's error.
		refused bool
	}{
		{"command after unsubscribe", []step{{encode("SUBSCRIBE", "x"), 1}, {encode("UNSUBSCRIBE", "x"), 1}, {incr("k1"), 0}}, true},
		{"command after punsubscribe", []step{{encode("PSUBSCRIBE", "x*"), 1}, {encode("PUNSUBSCRIBE"), 1}, {incr("k2"), 0}}, true},
		{"command after unsubscribe without subscription", []step{{encode("UNSUBSCRIBE"), 1}, {incr("k3"), 0}}, true},
		{"reset while subscribed", []step{{encode("SUBSCRIBE", "x"), 1}, {encode("RESET") + incr("k4"), 0}}, true},
		{"hello 3 while subscribed", []step{{encode("SUBSCRIBE", "x"), 1}, {encode("HELLO", "3") + incr("k5"), 0}}, true},
		{"resp3 subscriber", []step{{encode("HELLO", "3"), 1}, {encode("SUBSCRIBE", "x"), 1}, {incr("k6"), 0}}, true},
		{"resp3 ping while subscribed, then a command", []step{{encode("HELLO", "3"), 1}, {encode("SUBSCRIBE", "x"), 1}, {encode("PING"), 1}, {incr("k7"), 0}}, true},
		{"monitor", []step{{encode("MONITOR"), 1}, {incr("k8"), 0}}, true},
		{"client reply off", []step{{encode("CLIENT", "REPLY", "OFF") + incr("k9"), 0}}, true},
		{"client reply skip, inline", []step{{encode("PING"), 1}, {"client Reply skip\r\n" + incr("k10"), 0}}, true},
		{"client reply on", []step{{encode("CLIENT", "REPLY", "ON"), 0}}, true},
		{"sync", []step{{encode("SYNC"), 0}}, true},
		{"psync", []step{{encode("PSYNC", "?", "-1"), 0}}, true},
		{"replconf ack", []step{{encode("REPLCONF", "ACK", "0") + incr("k11"), 0}}, true},
		{"subscriber's session", []step{{encode("SUBSCRIBE", "x", "y"), 2}, {encode("PSUBSCRIBE", "z*"), 1}, {encode("PING"), 1},
			{encode("UNSUBSCRIBE"), 2}, {encode("PUNSUBSCRIBE", "z*"), 1}, {encode("QUIT"), 1}}, false},
		{"other client subcommands", []step{{encode("CLIENT", "SETNAME", "n") + encode("CLIENT", "GETNAME"), 2}, {incr("k12"), 1}}, false},
		{"reset before subscribing", []step{{encode("HELLO", "3") + encode("RESET") + incr("k13"), 3}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialT(t, addr)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			rr := newReplyReader(t, c)
			for i, s := range tc.steps {
				write(t, c, s.send)
				for j := range s.replies {
					r, err := rr.next()
					if err != nil {
						t.Fatalf("step %d, reply %d: %v", i, j, err)
					}
					if strings.HasPrefix(r, "-ERR bulkhead") {
						t.Fatalf("step %d (%q): refused: %q", i, s.send, r)
					}
				}
			}
			if !tc.refused {
				return
			}
			r, err := rr.next()
			if err != nil || !strings.HasPrefix(r, "-ERR bulkhead proxy: resp requests: at byte") {
				t.Fatalf("last request: %q %v, want the proxy's refusal", r, err)
			}
			if r, err := rr.next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the refusal: %q %v, want the close", r, err)
			}
		})
	}
	// No refused INCR reached Redis; the relayed one did.
	c := dialT(t, redis)
	rr := newReplyReader(t, c)
	for i := 1; i <= 13; i++ {
		write(t, c, encode("GET", fmt.Sprintf("k%d", i)))
		r, err := rr.next()
		want := "$-1\r\n"
		if i == 12 || i == 13 {
			want = "$1\r\n1\r\n"
		}
		if err != nil || r != want {
			t.Errorf("k%d: %q %v, want %q", i, r, err, want)
		}
	}
}

// TestUnmatchedRepliesCharged: a subscriber's replies — its confirmations,
// the messages published to it, PONGs — are charged their bytes on the
// reverse link, exactly, and count as nothing outstanding.
func TestUnmatchedRepliesCharged(t *testing.T) {
	redis := appliancetest.StartRedis(t)
	clock := tokenbucket.NewFakeClock(t0) // stands still: statistics are exact
	p := newProxy(t, Config{Clock: clock}, Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(redis)})
	for _, proto := range []string{"2", "3"} {
		t.Run("RESP"+proto, func(t *testing.T) {
			f := kvFlow("sub" + proto)
			c := dialT(t, listen(t, p, f))
			c.SetDeadline(time.Now().Add(10 * time.Second))
			rr := newReplyReader(t, c)
			pub := dialT(t, redis) // straight to Redis: another flow's
			prr := newReplyReader(t, pub)
			var sent, got int
			send := func(s string, replies int) {
				t.Helper()
				write(t, c, s)
				sent += len(s)
				for range replies {
					r, err := rr.next()
					if err != nil {
						t.Fatal(err)
					}
					got += len(r)
				}
			}
			send(encode("HELLO", proto), 1)
			send(encode("SUBSCRIBE", "ch"), 1)
			for range 5 {
				write(t, pub, encode("PUBLISH", "ch", strings.Repeat("m", 100<<10)))
				if _, err := prr.next(); err != nil {
					t.Fatal(err)
				}
				r, err := rr.next()
				if err != nil {
					t.Fatal(err)
				}
				got += len(r)
			}
			send(encode("PING"), 1)
			send(encode("UNSUBSCRIBE"), 1)
			// Every reply was charged before it was flushed to the
			// client: the statistics are complete.
			clock.Advance(time.Second)
			for _, fo := range p.Collect().Flows {
				if fo.Flow != f.ID {
					continue
				}
				if fo.Used[0] != float64(sent) || fo.Used[2] != float64(got) {
					t.Errorf("forward and reverse links charged %v and %v tokens, want the %d bytes sent and the %d received", fo.Used[0], fo.Used[2], sent, got)
				}
				for i := range fo.Path {
					if fo.Backlog[i] != 0 || fo.Outstanding[i] != 0 {
						t.Errorf("element %d: backlog %v, outstanding %v", i, fo.Backlog[i], fo.Outstanding[i])
					}
				}
				return
			}
			t.Fatal("flow not observed")
		})
	}
}

// TestRESP3SubscriberEnds: a RESP3 subscriber that closes its side ends
// the relay, though its SUBSCRIBE got no reply the proxy could match (a
// push), and whatever it had forwarded was answered.
func TestRESP3SubscriberEnds(t *testing.T) {
	redis := appliancetest.StartRedis(t)
	p := newProxy(t, Config{}, Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(redis)})
	c := dialT(t, listen(t, p, kvFlow("vm1")))
	write(t, c, encode("HELLO", "3")+encode("SUBSCRIBE", "x"))
	rr := newReplyReader(t, c)
	for range 2 {
		if _, err := rr.next(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if r, err := rr.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the client's close: %q %v, want the proxy's close", r, err)
	}
}
