package proxy

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// holdServer is an appliance that answers each PING ("*1\r\n$4\r\nPING\r\n")
// with +PONG only when the test releases it: received gets one value per
// request read, release lets one reply go.
type holdServer struct {
	addr     string
	received chan struct{}
	release  chan struct{}
}

const pingReq = "*1\r\n$4\r\nPING\r\n"

func startHoldServer(t *testing.T) *holdServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &holdServer{addr: ln.Addr().String(), received: make(chan struct{}, 100), release: make(chan struct{}, 100)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, len(pingReq))
				for {
					if _, err := io.ReadFull(c, buf); err != nil || string(buf) != pingReq {
						return
					}
					s.received <- struct{}{}
					select {
					case <-s.release:
					case <-time.After(10 * time.Second):
						return
					}
					if _, err := c.Write([]byte("+PONG\r\n")); err != nil {
						return
					}
				}
			})
		}
	})
	return s
}

// TestLongPathAndApplianceStats: a path longer than an exchange's inline
// vectors is charged exactly on every element, and the appliance's
// statistics, kept per flow, add up over the flows that share it: two
// flows' requests outstanding for a second count as two outstanding
// requests, their replies as two completed.
func TestLongPathAndApplianceStats(t *testing.T) {
	var path []mech.PathElem
	for i := range 4 {
		path = append(path, mech.PathElem{Resource: i, Role: mech.Forward})
	}
	path = append(path, mech.PathElem{Resource: 10, Role: mech.Appliance})
	for i := range 5 {
		path = append(path, mech.PathElem{Resource: 20 + i, Role: mech.Reverse})
	}
	if len(path) <= vecInline {
		t.Fatalf("path of %d elements fits the inline vectors (%d): the test needs a longer one", len(path), vecInline)
	}
	srv := startHoldServer(t)
	clock := tokenbucket.NewFakeClock(t0)
	p := newProxy(t, Config{Clock: clock}, Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(srv.addr)})
	flows := []Flow{
		{ID: mech.FlowID{Src: "vm1", Dst: "kv"}, Tenant: "a", Path: path},
		{ID: mech.FlowID{Src: "vm2", Dst: "kv"}, Tenant: "b", Path: path},
	}
	var conns []*bufio.Reader
	for _, f := range flows {
		c := dialT(t, listen(t, p, f))
		write(t, c, pingReq)
		conns = append(conns, bufio.NewReader(c))
	}
	for range flows {
		<-srv.received
	}
	// Both requests are at the appliance: a second passes.
	clock.Advance(time.Second)
	obs := p.Collect()
	if a := obs.Appliances[0]; a.Outstanding != 2 || a.Completed != 0 {
		t.Fatalf("appliance %+v, want 2 outstanding over the second, none completed", a)
	}
	if len(obs.Flows) != 2 {
		t.Fatalf("%d flows observed, want 2", len(obs.Flows))
	}
	for _, fo := range obs.Flows {
		for i, e := range fo.Path {
			want := 0.0 // reverse: no reply expected yet
			switch e.Role {
			case mech.Forward:
				want = float64(len(pingReq))
			case mech.Appliance:
				want = 8000
			}
			if fo.Outstanding[i] != want || fo.Used[i] != want {
				t.Errorf("flow %s element %d (%v): outstanding %v used %v tokens/s, want %v", fo.Flow.Src, i, e.Role, fo.Outstanding[i], fo.Used[i], want)
			}
		}
	}
	// The replies pass with the clock standing still; a second later
	// they count as completed, nothing outstanding.
	// Release both (the server answers them in whichever order it holds
	// them), then read both.
	for range conns {
		srv.release <- struct{}{}
	}
	for _, br := range conns {
		if line, err := br.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("reply %q %v", line, err)
		}
	}
	waitFor(t, "both replies settled", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, fl := range p.order {
			fl.mu.Lock()
			n := fl.done
			fl.mu.Unlock()
			if n != 1 {
				return false
			}
		}
		return true
	})
	clock.Advance(time.Second)
	obs = p.Collect()
	if a := obs.Appliances[0]; a.Outstanding != 0 || a.Completed != 2 || a.Throughput != 2*8000 {
		t.Fatalf("appliance %+v, want none outstanding, 2 completed, 16000 tokens/s", a)
	}
	for _, fo := range obs.Flows {
		for i, e := range fo.Path {
			want := 0.0
			if e.Role == mech.Reverse {
				want = float64(len("+PONG\r\n")) // the reply, charged when it passed
			}
			if fo.Used[i] != want || fo.Outstanding[i] != 0 {
				t.Errorf("flow %s element %d (%v): used %v outstanding %v, want %v and 0", fo.Flow.Src, i, e.Role, fo.Used[i], fo.Outstanding[i], want)
			}
		}
	}
	// The next PING is charged its expected reply at once on every
	// reverse link, and refunded nothing: the reply is as expected.
	write(t, dialT(t, listen(t, p, flows[0])), pingReq)
	<-srv.received
	srv.release <- struct{}{}
	p.mu.Lock()
	fl := p.flows[flows[0].ID]
	p.mu.Unlock()
	waitFor(t, "the third reply settled", func() bool {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		return fl.done == 1
	})
	clock.Advance(time.Second)
	for _, fo := range p.Collect().Flows {
		if fo.Flow != flows[0].ID {
			continue
		}
		for i, e := range fo.Path {
			if e.Role == mech.Reverse && fo.Used[i] != float64(len("+PONG\r\n")) {
				t.Errorf("element %d: used %v, want the reply's 7 bytes", i, fo.Used[i])
			}
		}
	}
}

// TestAdmitAllocs: a request the buckets let through at once, on a short
// path, allocates nothing but its exchange, whatever its reply.
func TestAdmitAllocs(t *testing.T) {
	p := newProxy(t, Config{}, Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial("127.0.0.1:1")})
	fl, err := p.flowFor(kvFlow("vm1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetAllocation(fl.id, []float64{1e12, 1e12, 1e12}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	flush := func() error { return nil }
	for _, reply := range []int64{10, 100, 5} { // larger, then smaller than expected: debt, refund
		allocs := testing.AllocsPerRun(100, func() {
			ex := fl.newExchange("get")
			if err := fl.admit(ctx, ex, 20, 1, flush); err != nil {
				t.Fatal(err)
			}
			if err := fl.answered(ex, reply, reply-5); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("reply of %d bytes: %v allocations per request, want 1 (the exchange)", reply, allocs)
		}
	}
}

// BenchmarkAccounting is a request's accounting alone, without the relay:
// exchange, admission through the flow's buckets (never binding), reply
// settled; serial and from parallel connections of one flow.
func BenchmarkAccounting(b *testing.B) {
	p := newProxy(b, Config{}, Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial("127.0.0.1:1")})
	fl, err := p.flowFor(kvFlow("vm1"))
	if err != nil {
		b.Fatal(err)
	}
	if err := p.SetAllocation(fl.id, []float64{1e12, 1e12, 1e12}); err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	flush := func() error { return nil }
	one := func() {
		ex := fl.newExchange("get")
		if err := fl.admit(ctx, ex, 27, 1, flush); err != nil {
			b.Fatal(err)
		}
		if err := fl.answered(ex, 107, 100); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			one()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one()
			}
		})
	})
}
