package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// pipeDial is an in-memory appliance: each connection answers every PING
// with +PONG, or never when silent.
func pipeDial(silent bool) func(context.Context) (net.Conn, error) {
	return func(context.Context) (net.Conn, error) {
		proxySide, app := net.Pipe()
		go func() {
			defer app.Close()
			buf := make([]byte, len(pingReq))
			for {
				if _, err := io.ReadFull(app, buf); err != nil {
					return
				}
				if silent {
					continue
				}
				if _, err := io.WriteString(app, "+PONG\r\n"); err != nil {
					return
				}
			}
		}()
		return proxySide, nil
	}
}

// ping sends a PING on c and reads its +PONG.
func ping(c net.Conn) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, pingReq); err != nil {
		return err
	}
	buf := make([]byte, len("+PONG\r\n"))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return errors.New("reply " + string(buf))
	}
	return nil
}

// closedSoon reports whether the proxy closes c within d: its read ends
// with EOF (or a reset).
func closedSoon(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// syncBuffer is a log's output, read while written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConnLimitPerFlow: a flow's connections beyond MaxConnsPerFlow are
// closed at once, counted per flow and logged at a bounded rate; another
// flow is not affected; a connection that ends frees its place.
func TestConnLimitPerFlow(t *testing.T) {
	clock := tokenbucket.NewFakeClock(t0)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	p := newProxy(t, Config{Clock: clock, Logger: log, MaxConnsPerFlow: 2}, Appliance{Name: "kv", Protocol: RESP, Dial: pipeDial(false)})
	fA, fB := kvFlow("vmA"), kvFlow("vmB")
	addrA, addrB := listen(t, p, fA), listen(t, p, fB)
	var held []net.Conn
	for range 2 {
		c := dialT(t, addrA)
		if err := ping(c); err != nil {
			t.Fatalf("a connection within the bound: %v", err)
		}
		held = append(held, c)
	}
	for i := range 3 {
		c := dialT(t, addrA)
		if !closedSoon(c, 5*time.Second) {
			t.Fatalf("connection %d beyond the bound not closed", i+3)
		}
	}
	if err := ping(dialT(t, addrB)); err != nil {
		t.Fatalf("another flow's connection: %v", err)
	}
	if n := strings.Count(logs.String(), "too many for the flow"); n != 1 {
		t.Errorf("%d warnings for 3 refusals with the clock standing still, want 1:\n%s", n, logs.String())
	}
	clock.Advance(RefusalLogInterval)
	if !closedSoon(dialT(t, addrA), 5*time.Second) {
		t.Fatal("a fourth connection beyond the bound not closed")
	}
	if out := logs.String(); strings.Count(out, "too many for the flow") != 2 || !strings.Contains(out, "not_logged_since_last=2") {
		t.Errorf("after %v: want a second warning counting the 2 not logged:\n%s", RefusalLogInterval, out)
	}
	obs := p.Collect()
	if got := obs.Refused[fA.ID]; got != 4 || len(obs.Refused) != 1 {
		t.Errorf("refused %v, want 4 for %v only", obs.Refused, fA.ID)
	}
	// A connection that ends frees its place.
	held[0].Close()
	waitFor(t, "a place in the flow", func() bool {
		c, err := net.Dial("tcp", addrA)
		if err != nil {
			return false
		}
		defer c.Close()
		return ping(c) == nil
	})
	if err := ping(held[1]); err != nil {
		t.Fatalf("a held connection: %v", err)
	}
}

// TestIdleTimeout: a connection on which nothing moves for IdleTimeout is
// closed — silent, waiting for a reply that never comes, or half-closed
// waiting for one — and one whose client keeps talking, or whose request
// waits for its flow's tokens, is not.
func TestIdleTimeout(t *testing.T) {
	const idle = 100 * time.Millisecond
	for _, tc := range []struct {
		name   string
		silent bool // the appliance never answers
		rate   float64
		client func(t *testing.T, c net.Conn)
		closed bool
	}{
		{"silent client", false, Unlimited, func(*testing.T, net.Conn) {}, true},
		{"no reply", true, Unlimited, func(t *testing.T, c net.Conn) { write(t, c, pingReq) }, true},
		{"half-closed, no reply", true, Unlimited, func(t *testing.T, c net.Conn) {
			write(t, c, pingReq)
			c.(*net.TCPConn).CloseWrite()
		}, true},
		{"talking", false, Unlimited, func(t *testing.T, c net.Conn) {
			for range 10 {
				if err := ping(c); err != nil {
					t.Fatal(err)
				}
				time.Sleep(idle / 2)
			}
		}, false},
		{"waiting for tokens", false, 0, func(t *testing.T, c net.Conn) { write(t, c, pingReq) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := tokenbucket.NewFakeClock(t0)
			p := newProxy(t, Config{Clock: clock, IdleTimeout: idle}, Appliance{Name: "kv", Protocol: RESP, Dial: pipeDial(tc.silent)})
			f := kvFlow("vm1")
			if err := p.SetAllocation(f.ID, []float64{Unlimited, tc.rate, Unlimited}); err != nil {
				t.Fatal(err)
			}
			c := dialT(t, listen(t, p, f))
			start := time.Now()
			tc.client(t, c)
			if tc.closed {
				if !closedSoon(c, 6*idle) {
					t.Fatalf("not closed within %v", 6*idle)
				}
				if d := time.Since(start); d < idle {
					t.Fatalf("closed after %v, before the idle timeout %v", d, idle)
				}
				return
			}
			if tc.rate != 0 {
				if err := ping(c); err != nil {
					t.Fatalf("after %v of talking: %v", time.Since(start), err)
				}
				return
			}
			// Held by its flow's buckets: open however long it waits.
			if closedSoon(c, 6*idle) {
				t.Fatalf("closed while its request waited for tokens")
			}
			if err := p.SetAllocation(f.ID, []float64{Unlimited, Unlimited, Unlimited}); err != nil {
				t.Fatal(err)
			}
			clock.BlockUntilTimers(1)
			clock.Advance(time.Second)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, len("+PONG\r\n"))
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "+PONG\r\n" {
				t.Fatalf("the held request's reply: %q %v", buf, err)
			}
		})
	}
}

// flakyListener's Accept returns the errors queued in errs before the
// listener's own connections.
type flakyListener struct {
	net.Listener
	errs chan error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	select {
	case err := <-l.errs:
		return nil, err
	default:
	}
	return l.Listener.Accept()
}

// TestListenAcceptErrors: Listen retries temporary Accept errors (out of
// file descriptors) and keeps serving; after any other error it closes
// the listener and its connections and returns it.
func TestListenAcceptErrors(t *testing.T) {
	p := newProxy(t, Config{}, Appliance{Name: "kv", Protocol: RESP, Dial: pipeDial(false)})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &flakyListener{Listener: inner, errs: make(chan error, 10)}
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	for range 4 {
		ln.errs <- emfile
	}
	done := make(chan error, 1)
	go func() {
		done <- p.Listen(context.Background(), ln, func(net.Conn) (Flow, error) { return kvFlow("vm1"), nil })
	}()
	c := dialT(t, inner.Addr().String())
	if err := ping(c); err != nil {
		t.Fatalf("after temporary accept errors: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Listen returned %v on temporary errors", err)
	default:
	}
	broken := errors.New("listener broken")
	ln.errs <- broken
	dialT(t, inner.Addr().String()).Close() // wakes the blocked Accept; the next one fails
	select {
	case err := <-done:
		if !errors.Is(err, broken) {
			t.Fatalf("Listen returned %v, want the permanent error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Listen did not return after a permanent accept error")
	}
	if !closedSoon(c, 5*time.Second) {
		t.Error("a connection outlived its listener's error")
	}
	if c, err := net.Dial("tcp", inner.Addr().String()); err == nil {
		c.Close()
		t.Error("the listener is still open")
	}
}
