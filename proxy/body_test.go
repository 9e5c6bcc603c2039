package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// bodyServer is a file store that reads requests' bodies to their end and
// answers each "201 Created" with no body; raw counts the bytes it has read
// from its connections.
type bodyServer struct {
	addr string
	raw  atomic.Int64
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

const created = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"

func startBodyServer(t *testing.T) *bodyServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &bodyServer{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(countingReader{c, &s.raw})
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if _, err := io.Copy(io.Discard, req.Body); err != nil {
						return
					}
					if _, err := io.WriteString(c, created); err != nil {
						return
					}
				}
			})
		}
	})
	return s
}

// stable waits until n stops growing for a while (at most 10 s), and
// returns it.
func stable(n func() int64) int64 {
	last, since := n(), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if v := n(); v != last {
			last, since = v, time.Now()
		} else if time.Since(since) > 300*time.Millisecond {
			break
		}
	}
	return last
}

// charged returns the tokens flow f was charged on its path's elements
// (forward, appliance, reverse) since the last Collect, advancing clock by
// a second first.
func charged(t *testing.T, p *Proxy, clock *tokenbucket.FakeClock, f Flow) (fwd, app, rev float64) {
	t.Helper()
	clock.Advance(time.Second)
	obs := p.Collect()
	span := obs.End.Sub(obs.Start).Seconds()
	for _, fo := range obs.Flows {
		if fo.Flow == f.ID {
			return fo.Used[0] * span, fo.Used[1] * span, fo.Used[2] * span
		}
	}
	t.Fatalf("flow %v not observed", f.ID)
	return 0, 0, 0
}

// TestHTTPBodyPaced: a request body is charged before it is forwarded,
// whether its length is declared or it is chunked: at 1000 tokens/s on the
// forward link and the clock standing still, a 20 MiB body of declared
// length passes whole (charged whole with its head: the bucket's
// over-depth debt), and a chunked one, never terminated, passes no further
// than what it has been charged — a part at a time as the bucket refills,
// never the 20 MiB.
func TestHTTPBodyPaced(t *testing.T) {
	const size = 20 << 20
	chunk := strings.Repeat("z", 1<<16)
	for _, tc := range []struct {
		name    string
		head    string
		body    func(w io.Writer) error
		atLeast int64 // of the body, received with the clock standing still
		atMost  int64
	}{
		{"content-length", fmt.Sprintf("PUT /f HTTP/1.1\r\nHost: fs\r\nContent-Length: %d\r\n\r\n", size),
			func(w io.Writer) error {
				for range size / len(chunk) {
					if _, err := io.WriteString(w, chunk); err != nil {
						return err
					}
				}
				return nil
			}, size, size},
		{"chunked", "PUT /f HTTP/1.1\r\nHost: fs\r\nTransfer-Encoding: chunked\r\n\r\n",
			func(w io.Writer) error {
				for range size / len(chunk) { // no last chunk: the body never ends
					if _, err := fmt.Fprintf(w, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
						return err
					}
				}
				return nil
			}, 0, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startBodyServer(t)
			clock := tokenbucket.NewFakeClock(t0)
			p := newProxy(t, Config{Clock: clock}, Appliance{Name: "fs", Protocol: HTTP, Dial: tcpDial(srv.addr)})
			f := httpFlow("vm1")
			if err := p.SetAllocation(f.ID, []float64{1000, Unlimited, Unlimited}); err != nil {
				t.Fatal(err)
			}
			c := dialT(t, listen(t, p, f))
			go func() {
				io.WriteString(c, tc.head)
				tc.body(c)
			}()
			got := stable(srv.raw.Load)
			body := got - int64(len(tc.head))
			if body < tc.atLeast || body > tc.atMost {
				t.Fatalf("the appliance received %d body bytes with the clock standing still, want %d to %d", body, tc.atLeast, tc.atMost)
			}
			fwd, _, _ := charged(t, p, clock, f)
			if fwd < float64(got) {
				t.Fatalf("forward link charged %.0f tokens for the %d bytes the appliance received", fwd, got)
			}
			if tc.atLeast > 0 {
				return
			}
			// The chunked body moves on as the bucket refills, never
			// ahead of its charge.
			for range 20 {
				clock.Advance(5 * time.Second)
				time.Sleep(5 * time.Millisecond)
			}
			after := stable(srv.raw.Load)
			fwd2, _, _ := charged(t, p, clock, f)
			if after <= got || fwd+fwd2 < float64(after) {
				t.Fatalf("after 100 s of refill: %d bytes received (from %d), %.0f charged", after, got, fwd+fwd2)
			}
			t.Logf("chunked body at 1000 tokens/s: %d bytes received with the clock still, %d after 100 s of refill", got, after)
		})
	}
}

// TestHTTPBodyCharge: a body is charged the same whether its length is
// declared or it is chunked: the forward link exactly the bytes the
// appliance received (head, body, chunk framing), the appliance its cost
// for the body's payload.
func TestHTTPBodyCharge(t *testing.T) {
	body := strings.Repeat("b", 300<<10+17)
	for _, tc := range []struct {
		name string
		req  string
	}{
		{"content-length", fmt.Sprintf("PUT /f HTTP/1.1\r\nHost: fs\r\nContent-Length: %d\r\n\r\n%s", len(body), body)},
		{"chunked", "PUT /f HTTP/1.1\r\nHost: fs\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", 100<<10, body[:100<<10], len(body)-100<<10, body[100<<10:])},
		{"chunked with trailers", "PUT /f HTTP/1.1\r\nHost: fs\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\nX-Sum: 1234\r\n\r\n", len(body), body)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startBodyServer(t)
			clock := tokenbucket.NewFakeClock(t0)
			p := newProxy(t, Config{Clock: clock}, Appliance{Name: "fs", Protocol: HTTP, Dial: tcpDial(srv.addr)})
			f := httpFlow("vm1")
			c := dialT(t, listen(t, p, f))
			write(t, c, tc.req)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != http.StatusCreated {
				t.Fatalf("%v %v", resp, err)
			}
			got := srv.raw.Load()
			fwd, app, rev := charged(t, p, clock, f)
			if fwd != float64(got) || app != float64(len(body)) || rev != float64(len(created)) {
				t.Fatalf("charged forward %.0f, appliance %.0f, reverse %.0f; want the %d bytes the appliance received, the body's %d, the response's %d",
					fwd, app, rev, got, len(body), len(created))
			}
		})
	}
}
