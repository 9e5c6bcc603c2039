package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/spec"
	"golang.org/x/sys/unix"
)

// The built-in workload generator runs every flow of a run inside this
// process (goroutines whose sockets were opened inside the VMs'
// namespaces), as an alternative to one iperf3 client and server per
// flow: tens of sender VMs cost goroutines, not processes.
//
//   - TCP: each connection of a flow writes 128 KB buffers as fast as the
//     socket takes them (or paced to the flow's rate); the receiver VM
//     has a listener per flow whose connections are drained.
//   - flows (short flows): a Poisson stream of TCP connections per pair at
//     the workload's arrival rate, each sending a size drawn from its
//     distribution (as the simulator draws them), then closing; the
//     completion time (arrival to the receiver's close) goes to the
//     report's FCTs. Flows that have not completed when the run ends are
//     not reported.
//   - UDP: an unconnected socket in the sender VM sends at the flow's
//     rate with UDP segmentation offload (UDP_SEGMENT): one send of 16
//     datagrams of 1472 bytes (full 1514-byte frames), segmented by the
//     kernel where needed. A socket bound in the receiver VM takes the
//     datagrams and is never read (the VM's veth counters measure them
//     before they reach it; its buffer overflows into the UDP drop
//     counters), so no ICMP port-unreachable answers go back.
//
// The generator needs far less CPU per bit than iperf3's UDP (one system
// call per 16 datagrams), which is what lets two cores offer 2 Gbit/s of
// UDP at all.

// genUDPSegment is the payload of one datagram: a 1514-byte frame.
const genUDPSegment = 1472

// genUDPBurst is the number of datagrams per send.
const genUDPBurst = 16

// genWrite is the bytes a TCP sender hands the kernel per write. With
// TCP_NODELAY (Go's default) each write leaves as one packet of up to the
// device's offload size, so it also bounds the offload packets.
const genWrite = 128 << 10

// generator runs the flows of a run.
type generator struct {
	tb *Testbed

	mu      sync.Mutex
	closers []func()
	errs    []error
	wg      sync.WaitGroup

	received atomic.Int64 // bytes read by the TCP receivers

	// write is the bytes an unpaced TCP sender hands the kernel per
	// write (0: genWrite); paced senders write genWrite
	write int

	seed uint64     // the scenario's: short flows' random streams
	fcts []eval.FCT // completed short flows (under mu)
}

// completed returns the completed short flows, by start time.
func (g *generator) completed() []eval.FCT {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := append([]eval.FCT(nil), g.fcts...)
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

func (g *generator) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, err)
}

func (g *generator) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}

func (g *generator) onStop(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closers = append(g.closers, f)
}

// stop closes every socket and waits for the goroutines.
func (g *generator) stop() {
	g.mu.Lock()
	cs := g.closers
	g.closers = nil
	g.mu.Unlock()
	for _, c := range cs {
		c()
	}
	g.wg.Wait()
}

// listen opens the receivers of every flow.
func (g *generator) listen(fl []flow) error {
	for _, f := range fl {
		d, _ := g.tb.plan.VM(f.dst)
		ns := g.tb.ns[d.NS]
		addr := netip.AddrPortFrom(d.Addr, uint16(f.port))
		if f.udp {
			var c *net.UDPConn
			err := ns.Do(func() error {
				var err error
				c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
				return err
			})
			if err != nil {
				return fmt.Errorf("testbed: udp receiver %s in %s: %w", addr, f.dst, err)
			}
			_ = c.SetReadBuffer(64 << 10)
			g.onStop(func() { c.Close() })
			continue
		}
		var ln *net.TCPListener
		err := ns.Do(func() error {
			var err error
			ln, err = net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(addr))
			return err
		})
		if err != nil {
			return fmt.Errorf("testbed: tcp receiver %s in %s: %w", addr, f.dst, err)
		}
		var conns sync.Map
		g.onStop(func() {
			ln.Close()
			conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		})
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns.Store(c, true)
				g.wg.Add(1)
				go func() {
					defer g.wg.Done()
					defer c.Close() // after EOF: a short flow's sender waits for it
					buf := make([]byte, 256<<10)
					for {
						n, err := c.Read(buf)
						g.received.Add(int64(n))
						if err != nil {
							return
						}
					}
				}()
			}
		}()
	}
	return nil
}

// begin runs each flow's senders from t0+start to t0+stop.
func (g *generator) begin(ctx context.Context, fl []flow, t0 time.Time, scale float64) {
	for _, f := range fl {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(t0.Add(time.Duration(f.phase.Start)))):
			}
			end := t0.Add(time.Duration(f.phase.Stop))
			fctx, cancel := context.WithDeadline(ctx, end)
			defer cancel()
			name := fmt.Sprintf("generator %s->%s (%s)", f.src, f.dst, f.workload)
			var err error
			switch {
			case f.short:
				err = g.short(ctx, fctx, f, t0)
			case f.udp:
				err = g.udp(fctx, f, f.rate*scale)
			default:
				err = g.tcp(fctx, f, f.rate*scale)
			}
			if err != nil && ctx.Err() == nil {
				g.fail(fmt.Errorf("testbed: %s: %w", name, err))
			}
		}()
	}
}

// short runs a flow's Poisson stream of sized TCP flows until fctx
// ends (the phase); flows still running then finish under ctx (the run)
// and are recorded when they complete. A flow's completion time runs from
// its arrival (before the connection is opened) to the receiver's close
// after the last byte.
func (g *generator) short(ctx, fctx context.Context, f flow, t0 time.Time) error {
	if !(f.arrival > 0) {
		return fmt.Errorf("arrival rate %v", f.arrival)
	}
	size, err := sizeSampler(f.sizes)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(g.seed, uint64(f.port)<<20|uint64(f.pair)))
	s, _ := g.tb.plan.VM(f.src)
	d, _ := g.tb.plan.VM(f.dst)
	ns := g.tb.ns[s.NS]
	var wg sync.WaitGroup
	defer wg.Wait()
	next := time.Now()
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / f.arrival * float64(time.Second)))
		t := time.NewTimer(time.Until(next))
		select {
		case <-fctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		bytes := int64(math.Max(1, math.Round(size(rng))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			var c net.Conn
			err := ns.Do(func() error {
				dl := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(s.Addr, 0)), Timeout: 3 * time.Second}
				var err error
				c, err = dl.DialContext(ctx, "tcp4", netip.AddrPortFrom(d.Addr, uint16(f.port)).String())
				return err
			})
			if err != nil {
				if ctx.Err() == nil {
					g.fail(fmt.Errorf("testbed: short flow %s->%s: %w", f.src, f.dst, err))
				}
				return
			}
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			buf := make([]byte, 64<<10)
			for left := bytes; left > 0; {
				n, err := c.Write(buf[:min(left, int64(len(buf)))])
				if err != nil {
					return // the run ended
				}
				left -= int64(n)
			}
			_ = c.(*net.TCPConn).CloseWrite()
			if _, err := c.Read(buf[:1]); err != io.EOF {
				return
			}
			g.mu.Lock()
			g.fcts = append(g.fcts, eval.FCT{Tenant: f.tenant, Src: f.src, Dst: f.dst, Bytes: float64(bytes),
				Start: start.Sub(t0), Duration: time.Since(start)})
			g.mu.Unlock()
		}()
	}
}

// meanSize is a size distribution's mean in bytes.
func meanSize(d *spec.SizeDist) float64 {
	if d == nil {
		return 0
	}
	if d.Dist != "cdf" {
		return float64(d.Mean)
	}
	// piecewise linear between the points, the first point's mass at its size
	m, prev := 0.0, spec.CDFPoint{}
	for i, p := range d.CDF {
		if i == 0 {
			m += p.P * float64(p.Size)
		} else {
			m += (p.P - prev.P) * (float64(p.Size) + float64(prev.Size)) / 2
		}
		prev = p
	}
	return m
}

// sizeSampler returns the flow-size sampler of a flows workload.
func sizeSampler(d *spec.SizeDist) (func(*rand.Rand) float64, error) {
	if d == nil {
		return nil, errors.New("no size distribution")
	}
	return d.Sampler()
}

// pacerSlack is how far behind its schedule a pacer may fall before it
// gives the lost time up.
const pacerSlack = 5 * time.Millisecond

// pacer releases bytes at a rate (bits/s; 0: no pacing).
type pacer struct {
	rate  float64
	start time.Time
	sent  float64
}

// wait blocks until n more bytes may go, or ctx ends.
func (p *pacer) wait(ctx context.Context, n int) error {
	if p.rate <= 0 {
		return ctx.Err()
	}
	p.sent += float64(n)
	due := p.start.Add(time.Duration(p.sent * 8 / p.rate * float64(time.Second)))
	d := time.Until(due)
	if d < -pacerSlack {
		// fell behind (a busy machine): do not burst to catch up
		p.start = p.start.Add(-d - pacerSlack)
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return ctx.Err()
}

func (g *generator) tcp(ctx context.Context, f flow, rate float64) error {
	s, _ := g.tb.plan.VM(f.src)
	d, _ := g.tb.plan.VM(f.dst)
	ns := g.tb.ns[s.NS]
	var wg sync.WaitGroup
	errc := make(chan error, f.conns)
	for i := 0; i < f.conns; i++ {
		var c net.Conn
		var err error
		for try := 0; try < 3 && c == nil; try++ {
			err = ns.Do(func() error {
				dl := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(s.Addr, 0)), Timeout: 3 * time.Second}
				var err error
				c, err = dl.DialContext(ctx, "tcp4", netip.AddrPortFrom(d.Addr, uint16(f.port)).String())
				return err
			})
			if err != nil && ctx.Err() == nil {
				g.tb.log.Warn("generator: connect failed, retrying", "flow", f.src+"->"+f.dst, "err", err)
			}
		}
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			size := genWrite
			if rate <= 0 && g.write > 0 {
				size = g.write
			}
			buf := make([]byte, size)
			p := pacer{rate: rate / float64(f.conns), start: time.Now()}
			for {
				if err := p.wait(ctx, len(buf)); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					if ctx.Err() == nil {
						errc <- err
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func (g *generator) udp(ctx context.Context, f flow, rate float64) error {
	s, _ := g.tb.plan.VM(f.src)
	d, _ := g.tb.plan.VM(f.dst)
	ns := g.tb.ns[s.NS]
	var c *net.UDPConn
	err := ns.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.Addr, 0)))
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT, genUDPSegment)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("UDP_SEGMENT: %w", serr)
	}
	_ = c.SetWriteBuffer(4 << 20)
	to := netip.AddrPortFrom(d.Addr, uint16(f.port))
	buf := make([]byte, genUDPSegment*genUDPBurst)
	p := pacer{rate: rate, start: time.Now()}
	for {
		// on the wire each datagram is a 1514-byte frame
		if err := p.wait(ctx, genUDPBurst*(genUDPSegment+42)); err != nil {
			return nil
		}
		if _, err := c.WriteToUDPAddrPort(buf, to); err != nil {
			if errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ECONNREFUSED) {
				continue // a full queue drops, as a NIC would
			}
			return err
		}
	}
}
