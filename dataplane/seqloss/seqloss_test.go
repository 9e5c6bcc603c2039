package seqloss

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
)

// newPrefix returns a fresh run prefix and registers a cleanup that removes
// everything of it and fails the test if anything is left.
func newPrefix(tb testing.TB) string {
	tb.Helper()
	prefix := dataplane.RandomPrefix("sl")
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := dataplane.Cleanup(ctx, prefix); err != nil {
			tb.Errorf("cleanup %s: %v", prefix, err)
		}
		if left, err := dataplane.Find(prefix); err != nil {
			tb.Errorf("find leftovers of %s: %v", prefix, err)
		} else if !left.Empty() {
			tb.Errorf("run %s left %s", prefix, left)
		}
	})
	return prefix
}

// path is the testbed's layout in small: VM a behind server s1, whose
// uplink (up1, HTB-shaped with a drop-tail queue: the emulated link) leads
// to server s2, behind which is VM b. The stamp program runs on s1's
// uplink egress, the count program on s2's veth toward b (egress).
type path struct {
	prefix       string
	a, s1, s2, b *dataplane.NS
	up1, toB     string // devices: s1's uplink, s2's veth to b
	pair         dataplane.Pair
	tx, rx       *Probe
	lim          *dataplane.Limiter // nil unless newPathLimited
}

const (
	shapeQdisc = 1 << 16        // 1:
	shapeClass = 1<<16 | 1      // 1:1
	shapeQueue = 10 << 16       // 10:
	rootParent = math.MaxUint32 // netlink.HANDLE_ROOT
)

func newPath(t *testing.T, rate float64, queueBytes uint32) *path {
	return newPathLimited(t, rate, queueBytes, 0)
}

// newPathLimited is newPath with, when limit > 0, a pair limiter at limit
// bits/s on s1 as the testbed has it: an IFB receiving by redirection what
// a sends (a dataplane.Limiter), before the uplink.
func newPathLimited(t *testing.T, rate float64, queueBytes uint32, limit float64) *path {
	t.Helper()
	return newPathConfig(t, rate, queueBytes, limit, Config{})
}

// newPathConfig is newPathLimited with probes of configuration cfg.
func newPathConfig(t *testing.T, rate float64, queueBytes uint32, limit float64, cfg Config) *path {
	t.Helper()
	prefix := newPrefix(t)
	mk := func(name string, fwd bool) *dataplane.NS {
		n, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+name, dataplane.NSOptions{Forwarding: fwd})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	p := &path{prefix: prefix, a: mk("a", false), s1: mk("s1", true), s2: mk("s2", true), b: mk("b", false),
		up1: prefix + "l0a", toB: prefix + "v1h"}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pfx, ip := netip.MustParsePrefix, netip.MustParseAddr
	must(p.s1.AddVeth(prefix+"v0h", p.a, prefix+"v0"))
	must(p.s1.AddVeth(p.up1, p.s2, prefix+"l0b"))
	must(p.s2.AddVeth(p.toB, p.b, prefix+"v1"))
	must(p.a.AddAddr(prefix+"v0", pfx("10.200.0.1/31")))
	must(p.s1.AddAddr(prefix+"v0h", pfx("10.200.0.0/31")))
	must(p.b.AddAddr(prefix+"v1", pfx("10.200.0.3/31")))
	must(p.s2.AddAddr(p.toB, pfx("10.200.0.2/31")))
	must(p.s1.AddAddr(p.up1, pfx("10.200.128.0/31")))
	must(p.s2.AddAddr(prefix+"l0b", pfx("10.200.128.1/31")))
	must(p.a.AddRoute(dataplane.Route{Dst: pfx("0.0.0.0/0"), Via: ip("10.200.0.0"), Dev: prefix + "v0"}))
	must(p.b.AddRoute(dataplane.Route{Dst: pfx("0.0.0.0/0"), Via: ip("10.200.0.2"), Dev: prefix + "v1"}))
	must(p.s1.AddRoute(dataplane.Route{Dst: pfx("10.200.0.2/31"), Via: ip("10.200.128.1"), Dev: p.up1}))
	must(p.s2.AddRoute(dataplane.Route{Dst: pfx("10.200.0.0/31"), Via: ip("10.200.128.0"), Dev: prefix + "l0b"}))
	must(p.s1.ReplaceHTB(p.up1, dataplane.HTB{Handle: shapeQdisc, Parent: rootParent, Default: 1}))
	must(p.s1.ReplaceHTBClass(p.up1, dataplane.HTBClass{Parent: shapeQdisc, Handle: shapeClass, Rate: rate}))
	must(p.s1.ReplaceFIFO(p.up1, shapeClass, shapeQueue, queueBytes))
	p.pair = dataplane.Pair{Src: ip("10.200.0.1"), Dst: ip("10.200.0.3")}
	if limit > 0 {
		must(p.s1.AddIFB(prefix + "tx"))
		must(p.s1.RedirectIngress(prefix+"v0h", prefix+"tx", 1))
		lim, err := dataplane.NewLimiter(p.s1, dataplane.LimiterConfig{Dev: prefix + "tx", QueueBytes: 30000})
		must(err)
		must(lim.SetPairRate(p.pair, limit))
		p.lim = lim
	}

	var err error
	p.tx, err = New(p.s1, cfg)
	must(err)
	t.Cleanup(func() { must(p.tx.Close()) })
	p.rx, err = New(p.s2, cfg)
	must(err)
	t.Cleanup(func() { must(p.rx.Close()) })
	must(p.tx.AttachStamp(p.up1, dataplane.Egress))
	must(p.rx.AttachCount(p.toB, dataplane.Egress))
	return p
}

// drops returns the packets dropped by the uplink's shaper.
func (p *path) drops(t *testing.T) uint64 {
	t.Helper()
	cs, err := p.s1.ClassCounters(p.up1)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(cs[shapeClass].Drops)
}

// udp sends n datagrams of size bytes from a to b paced at rate bits/s
// (IP packets; at most maxBurst at once), then 3 trailing packets slowly, and returns how many b's
// socket received.
func (p *path) udp(t *testing.T, n, size int, rate float64, maxBurst int) int {
	t.Helper()
	var rc *net.UDPConn
	if err := p.b.Do(func() error {
		var err error
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.pair.Dst.AsSlice(), Port: 9000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	_ = rc.SetReadBuffer(8 << 20)
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			if _, err := rc.Read(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	var sc *net.UDPConn
	if err := p.a.Do(func() error {
		var err error
		sc, err = net.DialUDP("udp4", &net.UDPAddr{IP: p.pair.Src.AsSlice()}, &net.UDPAddr{IP: p.pair.Dst.AsSlice(), Port: 9000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	payload := make([]byte, size-28)
	pps := rate / 8 / float64(size)
	start := time.Now()
	for sent := 0; sent < n; {
		// At most maxBurst packets at once: a sender that was descheduled
		// sends late rather than in a burst that alone overflows a queue.
		due := min(n, int(time.Since(start).Seconds()*pps)+1, sent+maxBurst)
		for ; sent < due; sent++ {
			if _, err := sc.Write(payload); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
	// A loss is seen when the pair's next packet arrives: once the queue
	// has drained, a few trailing packets reveal the drops at the end of
	// the blast.
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		if _, err := sc.Write(payload); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	rc.Close()
	<-done
	return int(got.Load())
}

func tolerance(n uint64) uint64 { return max(2, n/100) }

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestUDPLossMatchesShaperDrops: a UDP blast at 3× the shaped uplink; the
// loss counted at the receiver's server (gaps less late arrivals) equals
// the packets the uplink's queue dropped (within 1%), and the receiver saw
// what was stamped less what was dropped.
func TestUDPLossMatchesShaperDrops(t *testing.T) {
	needRoot(t)
	p := newPath(t, 20e6, 30000)
	got := p.udp(t, 6000, 1000, 60e6, 64)
	sent, err := p.tx.Sent()
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := p.rx.Received()
	if err != nil {
		t.Fatal(err)
	}
	s, r, d := sent[p.pair], rcv[p.pair], p.drops(t)
	t.Logf("stamped %+v; counted %+v; shaper drops %d; socket received %d", s, r, d, got)
	if d < 1000 {
		t.Fatalf("the shaper dropped only %d packets: the blast did not overload it", d)
	}
	// Packets of one flow can be reordered before the uplink's queue (the
	// sender's packets cross the veth on whichever CPU it runs on): gaps
	// that late packets fill are not loss.
	if lost := r.Lost(Received{}); absDiff(lost, d) > tolerance(d) || r.Gaps < d || r.Resyncs != 0 {
		t.Errorf("lost %d (gaps %d - late %d; resyncs %d), shaper drops %d: want equal within %d",
			lost, r.Gaps, r.Late, r.Resyncs, d, tolerance(d))
	}
	if s.Packets != r.Packets+d || s.Segments != s.Packets {
		t.Errorf("stamped %d packets (%d segments), counted %d + dropped %d", s.Packets, s.Segments, r.Packets, d)
	}
	if absDiff(uint64(got), r.Packets) > tolerance(r.Packets) {
		t.Errorf("the receiving socket got %d datagrams, the count program saw %d", got, r.Packets)
	}
	if len(sent) != 1 || len(rcv) != 1 {
		t.Errorf("pairs stamped %v, counted %v: want only %s", datapath.SortedPairs(sent), datapath.SortedPairs(rcv), p.pair)
	}
}

// TestUDPNoOverloadNoLoss: below the shaped rate nothing is dropped and no
// gap is counted. The queue is the testbed's (1 MB): on a loaded machine
// the packets of a descheduled softirq reach the shaper in one burst (up to
// the 1000-packet backlog), which a small queue would drop.
func TestUDPNoOverloadNoLoss(t *testing.T) {
	needRoot(t)
	p := newPath(t, 20e6, 1<<20)
	got := p.udp(t, 1500, 1000, 10e6, 8)
	const trailing = 3
	sent, err := p.tx.Sent()
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.rx.ReceivedPair(p.pair)
	if err != nil {
		t.Fatal(err)
	}
	s, d := sent[p.pair], p.drops(t)
	t.Logf("stamped %+v; counted %+v; shaper drops %d; socket received %d", s, r, d, got)
	if d != 0 {
		t.Fatalf("the shaper dropped %d packets at half its rate", d)
	}
	if r.Gaps != 0 || r.Late != 0 || r.Resyncs != 0 || r.Packets != s.Packets || s.Packets < 1400+trailing {
		t.Errorf("no loss: stamped %+v, counted %+v; want every stamped packet counted, no gap", s, r)
	}
	st, err := p.rx.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RxFull != 0 || st.Fragments != 0 {
		t.Errorf("receiver stats %+v", st)
	}
}

// TestDeclaredOnlyPath: declared-only probes on both servers, the pair
// declared stamped from a's device on s1 (its veth, and, with the
// testbed's pair limiter, the IFB it is redirected through, which hands
// the packets back as received by the veth) and counted on s2, whose
// probe stamps on its own uplink (what arrives by it carries marks):
// the loss counted equals the uplink's drops as in learning mode, and
// no packet is taken as forged or undeclared.
func TestDeclaredOnlyPath(t *testing.T) {
	needRoot(t)
	for _, limit := range []float64{0, 100e6} {
		t.Run(fmt.Sprintf("limiter=%g", limit), func(t *testing.T) {
			p := newPathConfig(t, 20e6, 30000, limit, Config{DeclaredOnly: true})
			if err := p.rx.AttachStamp(p.prefix+"l0b", dataplane.Egress); err != nil {
				t.Fatal(err)
			}
			if err := p.tx.DeclareStamp(p.prefix+"v0h", p.pair); err != nil {
				t.Fatal(err)
			}
			if err := p.rx.DeclareCount(p.pair); err != nil {
				t.Fatal(err)
			}
			p.udp(t, 4000, 1000, 60e6, 64)
			sent, err := p.tx.Sent()
			if err != nil {
				t.Fatal(err)
			}
			r, err := p.rx.ReceivedPair(p.pair)
			if err != nil {
				t.Fatal(err)
			}
			d := p.drops(t)
			ts, _ := p.tx.Stats()
			rs, _ := p.rx.Stats()
			t.Logf("stamped %+v; counted %+v; uplink drops %d; sender %+v, receiver %+v", sent[p.pair], r, d, ts, rs)
			if d < 500 {
				t.Fatalf("the uplink dropped only %d packets: the blast did not overload it", d)
			}
			if lost := r.Lost(Received{}); absDiff(lost, d) > tolerance(d) || r.Resyncs != 0 {
				t.Errorf("lost %d (%+v), uplink drops %d: want equal within %d", lost, r, d, tolerance(d))
			}
			if ts.TxForeign != 0 || rs.RxForeign != 0 || rs.RxUndeclared != 0 || len(sent) != 1 {
				t.Errorf("sender %+v, receiver %+v, stamped %v: want only %s stamped, nothing foreign", ts, rs, sent, p.pair)
			}
		})
	}
}

// TestLimiterDropsAreNotLoss: with the testbed's pair limiter (IFB) before
// the uplink, the limiter's drops are not reported as loss: the stamp
// program numbers packets after the limiter. Then the uplink becomes the
// bottleneck and its drops are.
func TestLimiterDropsAreNotLoss(t *testing.T) {
	needRoot(t)
	p := newPathLimited(t, 20e6, 30000, 10e6)
	p.udp(t, 3000, 1000, 30e6, 32)
	cs, err := p.lim.Counters()
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.rx.ReceivedPair(p.pair)
	if err != nil {
		t.Fatal(err)
	}
	limDrops, upDrops := uint64(cs[p.pair].Drops), p.drops(t)
	t.Logf("limiter at 10 Mbit/s: limiter drops %d, uplink drops %d; counted %+v", limDrops, upDrops, r)
	if limDrops < 1000 || upDrops != 0 {
		t.Fatalf("limiter drops %d, uplink drops %d: want the limiter (only) to drop", limDrops, upDrops)
	}
	// A packet overtaken on the way is a gap, then a late arrival: no loss
	// (Received.Lost); the sender switching CPUs reorders one now and then.
	if r.Lost(Received{}) != 0 || r.Packets == 0 {
		t.Errorf("the limiter's drops were counted as loss: %+v", r)
	}
	// Raise the limit above the uplink: the uplink's queue drops now.
	if err := p.lim.SetPairRate(p.pair, 100e6); err != nil {
		t.Fatal(err)
	}
	p.udp(t, 3000, 1000, 40e6, 32)
	r2, err := p.rx.ReceivedPair(p.pair)
	if err != nil {
		t.Fatal(err)
	}
	cs2, err := p.lim.Counters()
	if err != nil {
		t.Fatal(err)
	}
	d := p.drops(t)
	// (the limiter's drop counter restarts if raising the rate recreated the
	// pair's class: dataplane.DebtLimit)
	t.Logf("limiter at 100 Mbit/s: limiter drops %d (counter before: %d), uplink drops %d; counted %+v", cs2[p.pair].Drops, limDrops, d, r2)
	if d < 500 {
		t.Fatalf("uplink dropped %d packets at 2× its rate", d)
	}
	if lost := r2.Lost(r); absDiff(lost, d) > tolerance(d) {
		t.Errorf("lost %d, uplink drops %d", lost, d)
	}
}

// TestTCPSegments: TCP through the overloaded uplink in segmentation-
// offload packets. Every segment stamped is either counted or in a gap,
// each packet the shaper drops (one or more segments) is at least one gap,
// and what TCP retransmits arrives (no resync).
func TestTCPSegments(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Fatal("iperf3 not found: install it (apt-get install -y iperf3)")
	}
	p := newPath(t, 50e6, 20000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := dataplane.Command(ctx, p.prefix, "iperf3", "-s", "-1", "-B", p.pair.Dst.String(), "-p", "5299")
	if err := p.b.StartIn(srv); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	var out []byte
	deadline := time.Now().Add(3 * time.Second)
	for {
		cli := dataplane.Command(ctx, p.prefix, "iperf3", "-c", p.pair.Dst.String(), "-B", p.pair.Src.String(),
			"-p", "5299", "-t", "2", "--connect-timeout", "500")
		var buf strings.Builder
		cli.Stdout, cli.Stderr = &buf, &buf
		if err := p.a.StartIn(cli); err != nil {
			t.Fatal(err)
		}
		err := cli.Wait()
		out = []byte(buf.String())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("iperf3 client: %v: %s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	sent, err := p.tx.Sent()
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := p.rx.Received()
	if err != nil {
		t.Fatal(err)
	}
	s, r, d := sent[p.pair], rcv[p.pair], p.drops(t)
	t.Logf("stamped %+v; counted %+v; shaper drops %d", s, r, d)
	if d == 0 {
		t.Fatalf("TCP did not overflow the uplink's queue: %s", out)
	}
	if s.Segments <= s.Packets {
		t.Errorf("stamped %d packets as %d segments: no segmentation offload seen", s.Packets, s.Segments)
	}
	if r.Segments+r.Gaps-r.Late != s.Segments {
		t.Errorf("segments: stamped %d, counted %d + gaps %d - late %d", s.Segments, r.Segments, r.Gaps, r.Late)
	}
	if r.Gaps < d || r.Resyncs != 0 {
		t.Errorf("gaps %d (resyncs %d) for %d dropped packets", r.Gaps, r.Resyncs, d)
	}
	if s.Packets != r.Packets+d {
		t.Errorf("stamped %d packets, counted %d + dropped %d", s.Packets, r.Packets, d)
	}
}

// filters returns the names of the BPF filters on dev's clsact hook dir.
func filters(t *testing.T, ns *dataplane.NS, dev string, dir dataplane.Direction) []string {
	t.Helper()
	idx, err := ns.LinkIndex(dev)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := ns.Netlink().FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}, parent(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		if b, ok := f.(*netlink.BpfFilter); ok {
			out = append(out, b.Name)
		}
	}
	return out
}

// gone waits until the program id no longer exists in the kernel.
func gone(t *testing.T, id ebpf.ProgramID) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		prog, err := ebpf.NewProgramFromID(id)
		if err != nil {
			return
		}
		prog.Close()
		if time.Now().After(deadline) {
			t.Errorf("program %d still exists", id)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAttachDetachClose: filters appear on the hooks, Detach and Close
// remove them, the programs are freed, and misuse is refused.
func TestAttachDetachClose(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	ns, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+"s", dataplane.NSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	peer, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+"v", dataplane.NSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	x, y := prefix+"x", prefix+"y"
	if err := ns.AddVeth(x, peer, prefix+"p"); err != nil {
		t.Fatal(err)
	}
	if err := ns.AddIFB(y); err != nil {
		t.Fatal(err)
	}
	// An existing ingress redirect at priority 2 keeps working beside the
	// programs (they run first and continue).
	if err := ns.RedirectIngress(x, y, 2); err != nil {
		t.Fatal(err)
	}
	pr, err := New(ns, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.AttachStamp(x, dataplane.Ingress); err != nil {
		t.Fatal(err)
	}
	if err := pr.AttachCount(x, dataplane.Egress); err != nil {
		t.Fatal(err)
	}
	if err := pr.AttachCount(y, dataplane.Egress); err != nil {
		t.Fatal(err)
	}
	if err := pr.AttachCount(x, dataplane.Ingress); err == nil {
		t.Error("a second program on one hook accepted")
	}
	if err := pr.AttachStamp("nosuchdev", dataplane.Egress); err == nil {
		t.Error("attaching to a missing device succeeded")
	}
	if err := pr.Attach(y, dataplane.Ingress, Role(7)); err == nil {
		t.Error("unknown role accepted")
	}
	// A probe whose priority is taken by the redirect (u32) is refused
	// with the priority named.
	clash, err := New(ns, Config{Prio: 2})
	if err != nil {
		t.Fatal(err)
	}
	err = clash.AttachStamp(x, dataplane.Ingress)
	t.Logf("priority clash: %v", err)
	if err == nil || !strings.Contains(err.Error(), "prio 2") {
		t.Errorf("attaching at the redirect's priority: %v", err)
	}
	if err := clash.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(filters(t, ns, x, dataplane.Ingress)); got != "[bulkhead_seqloss_stamp]" {
		t.Errorf("ingress BPF filters of %s: %s", x, got)
	}
	if got := fmt.Sprint(filters(t, ns, x, dataplane.Egress)); got != "[bulkhead_seqloss_count]" {
		t.Errorf("egress BPF filters of %s: %s", x, got)
	}
	if len(pr.Hooks()) != 3 {
		t.Errorf("hooks %v", pr.Hooks())
	}
	if err := pr.Detach(x, dataplane.Egress); err != nil {
		t.Fatal(err)
	}
	if err := pr.Detach(x, dataplane.Egress); err == nil {
		t.Error("detaching twice succeeded")
	}
	if got := filters(t, ns, x, dataplane.Egress); len(got) != 0 {
		t.Errorf("egress filters after Detach: %v", got)
	}
	// The stamp program's devices (what the count program takes marks
	// from in declared-only mode) follow its hooks.
	xi, err := ns.LinkIndex(x)
	if err != nil {
		t.Fatal(err)
	}
	if got := stampDevices(t, pr); !slices.Equal(got, []uint32{uint32(xi)}) {
		t.Errorf("stamp devices %v, want [%d]", got, xi)
	}
	if err := pr.Detach(x, dataplane.Ingress); err != nil {
		t.Fatal(err)
	}
	if got := stampDevices(t, pr); len(got) != 0 {
		t.Errorf("stamp devices %v after the stamp program's detach, want none", got)
	}
	if err := pr.AttachStamp(x, dataplane.Ingress); err != nil {
		t.Fatal(err)
	}
	stamp, count, err := pr.ProgramIDs()
	if err != nil {
		t.Fatal(err)
	}
	// The IFB goes away before Close: Close still succeeds.
	if err := ns.DeleteLink(y); err != nil {
		t.Fatal(err)
	}
	if err := pr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if got := filters(t, ns, x, dataplane.Ingress); len(got) != 0 {
		t.Errorf("ingress filters after Close: %v", got)
	}
	gone(t, stamp)
	gone(t, count)
	if _, err := pr.Received(); err == nil {
		t.Error("reading a closed probe succeeded")
	}
	if err := pr.AttachStamp(x, dataplane.Egress); err == nil {
		t.Error("attaching with a closed probe succeeded")
	}
}

// stampDevices returns the ifindexes in the probe's map of stamp devices.
func stampDevices(t *testing.T, pr *Probe) []uint32 {
	t.Helper()
	var out []uint32
	var k, v uint32
	it := pr.objs.SeqlossUplinks.Iterate()
	for it.Next(&k, &v) {
		out = append(out, k)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestStaleFilterReplaced: a probe whose process died without detaching
// (a killed agent) leaves its filter; a new probe at the same priority
// replaces it instead of failing with EEXIST, and only one seqloss filter
// stays on the hook.
func TestStaleFilterReplaced(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	ns, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+"s", dataplane.NSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	peer, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+"v", dataplane.NSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	x := prefix + "x"
	if err := ns.AddVeth(x, peer, prefix+"p"); err != nil {
		t.Fatal(err)
	}
	dead, err := New(ns, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	if err := dead.AttachStamp(x, dataplane.Egress); err != nil {
		t.Fatal(err)
	}
	fresh, err := New(ns, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.AttachStamp(x, dataplane.Egress); err != nil {
		t.Fatalf("attach over a stale filter: %v", err)
	}
	if got := fmt.Sprint(filters(t, ns, x, dataplane.Egress)); got != "[bulkhead_seqloss_stamp]" {
		t.Errorf("egress BPF filters of %s: %s, want the new probe's only", x, got)
	}
}

// TestNamespaceGoneFreesPrograms: deleting the namespace removes the
// filters; Close afterwards releases the programs without error.
func TestNamespaceGoneFreesPrograms(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	ns, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+"s", dataplane.NSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.AddIFB(prefix + "x"); err != nil {
		t.Fatal(err)
	}
	pr, err := New(ns, Config{MaxPairs: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.AttachStamp(prefix+"x", dataplane.Egress); err != nil {
		t.Fatal(err)
	}
	stamp, count, err := pr.ProgramIDs()
	if err != nil {
		t.Fatal(err)
	}
	ns.Close()
	if err := dataplane.Cleanup(context.Background(), prefix); err != nil {
		t.Fatal(err)
	}
	if err := pr.Close(); err != nil {
		t.Fatalf("Close after the namespace went: %v", err)
	}
	gone(t, stamp)
	gone(t, count)
}

func TestNewRefusesNilNamespace(t *testing.T) {
	if _, err := New(nil, Config{}); err == nil {
		t.Error("nil namespace accepted")
	}
}

// BenchmarkReceived reads the receiver's counters of 64 pairs (one batch
// lookup under the pairs' locks, decoding included): what an agent does
// every control interval.
func BenchmarkReceived(b *testing.B) {
	needRoot(b)
	objs, err := load(0, true)
	if err != nil {
		b.Fatal(err)
	}
	pr := newProbe(nil, 0, objs)
	defer pr.Close()
	for i := range 64 {
		k := seqlossPair{Src: [4]byte{10, 200, 0, byte(2*i + 1)}, Dst: [4]byte{10, 200, 1, byte(2*i + 1)}}
		v := seqlossRxVal{Packets: uint64(i), Gaps: 1}
		if err := objs.SeqlossRx.Put(&k, &v); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		r, err := pr.Received()
		if err != nil {
			b.Fatal(err)
		}
		if len(r) != 64 {
			b.Fatalf("%d pairs read", len(r))
		}
	}
}

// BenchmarkSent reads the sender's counters of 64 pairs.
func BenchmarkSent(b *testing.B) {
	needRoot(b)
	objs, err := load(0, true)
	if err != nil {
		b.Fatal(err)
	}
	pr := newProbe(nil, 0, objs)
	defer pr.Close()
	for i := range 64 {
		k := seqlossPair{Src: [4]byte{10, 200, 0, byte(2*i + 1)}, Dst: [4]byte{10, 200, 1, byte(2*i + 1)}}
		if err := objs.SeqlossTx.Put(&k, &seqlossTxVal{Segs: uint64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		s, err := pr.Sent()
		if err != nil {
			b.Fatal(err)
		}
		if len(s) != 64 {
			b.Fatalf("%d pairs read", len(s))
		}
	}
}

// BenchmarkPrograms reports the programs' run time per packet on a
// 1000-byte UDP frame as the kernel measures it (BPF_PROG_TEST_RUN):
//
//   - stamp/repeated: the stamp program run 1000 times in the kernel on
//     one packet (the whole path every time: it numbers each run);
//   - stamp/single, count/single: one run per syscall, on a fresh copy of
//     a marked frame (the count program clears the mark, so repeated runs
//     would measure its skip path). These include the kernel's timer and
//     cold caches: upper bounds, comparable with each other.
//
// ns/op is mostly the syscall; ns/packet is the program.
func BenchmarkPrograms(b *testing.B) {
	needRoot(b)
	objs, err := load(0, true)
	if err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	for _, c := range []struct {
		name   string
		prog   *ebpf.Program
		frag   uint16
		repeat int
	}{
		{"stamp/repeated", objs.SeqlossStamp, 0x4000, 1000},
		{"stamp/single", objs.SeqlossStamp, 0x4000, 1},
		{"count/single", objs.SeqlossCount, 0x4000 | Mark, 1},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := frame("10.200.0.1", "10.200.0.3", 0, c.frag, 1000-28)
			var total time.Duration
			for b.Loop() {
				_, d, err := c.prog.Benchmark(in, c.repeat, nil)
				if err != nil {
					b.Fatal(err)
				}
				total += d
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/packet")
		})
	}
}
