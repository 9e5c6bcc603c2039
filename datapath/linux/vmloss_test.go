package linux

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/dataplane/seqloss"
)

// lossyPath is two servers joined by one link, with a VM on each, in
// namespaces of their own (a behind s1, b behind s2): the link's egress
// from s1 (u1) is shaped by an HTB with a short drop-tail queue, the
// emulated network's loss. Everything is removed when the test ends.
type lossyPath struct {
	prefix     string
	s1, s2     *dataplane.NS
	a, b       *dataplane.NS
	aDev, bDev string // the VMs' own interfaces
	sa, sb     string // their server sides
	u1, u2     string // the link's ends in s1 and s2
	pair       datapath.Pair
}

// The shaped link: the rate and queue of the seqloss package's tests,
// where the loss counted is checked packet by packet against the drops.
const (
	lossyRate  = 20e6
	lossyQueue = 30000
	shapeRoot  = 1 << 16   // 1:
	shapeClass = 1<<16 | 1 // 1:1
	shapeFIFO  = 10 << 16  // 10:
)

func newLossyPath(t *testing.T) *lossyPath {
	t.Helper()
	prefix := dataplane.RandomPrefix("dq")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := dataplane.Cleanup(ctx, prefix); err != nil {
			t.Errorf("cleanup %s: %v", prefix, err)
		}
		if left, err := dataplane.Find(prefix); err != nil || !left.Empty() {
			t.Errorf("run %s left %v (%v)", prefix, left, err)
		}
	})
	mk := func(name string, fwd bool) *dataplane.NS {
		n, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+name, dataplane.NSOptions{Forwarding: fwd})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	p := &lossyPath{prefix: prefix, s1: mk("s1", true), s2: mk("s2", true), a: mk("a", false), b: mk("b", false),
		aDev: prefix + "a", bDev: prefix + "b", sa: prefix + "sa", sb: prefix + "sb", u1: prefix + "u1", u2: prefix + "u2",
		pair: datapath.Pair{Src: netip.MustParseAddr("10.202.0.1"), Dst: netip.MustParseAddr("10.202.0.3")}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pfx, ip := netip.MustParsePrefix, netip.MustParseAddr
	must(p.s1.AddVeth(p.sa, p.a, p.aDev))
	must(p.s2.AddVeth(p.sb, p.b, p.bDev))
	must(p.s1.AddVeth(p.u1, p.s2, p.u2))
	must(p.s1.AddAddr(p.sa, pfx("10.202.0.0/31")))
	must(p.a.AddAddr(p.aDev, pfx("10.202.0.1/31")))
	must(p.s2.AddAddr(p.sb, pfx("10.202.0.2/31")))
	must(p.b.AddAddr(p.bDev, pfx("10.202.0.3/31")))
	must(p.s1.AddAddr(p.u1, pfx("10.202.128.0/31")))
	must(p.s2.AddAddr(p.u2, pfx("10.202.128.1/31")))
	must(p.a.AddRoute(dataplane.Route{Dst: pfx("0.0.0.0/0"), Via: ip("10.202.0.0"), Dev: p.aDev}))
	must(p.b.AddRoute(dataplane.Route{Dst: pfx("0.0.0.0/0"), Via: ip("10.202.0.2"), Dev: p.bDev}))
	must(p.s1.AddRoute(dataplane.Route{Dst: pfx("10.202.0.2/31"), Via: ip("10.202.128.1"), Dev: p.u1}))
	must(p.s2.AddRoute(dataplane.Route{Dst: pfx("10.202.0.0/31"), Via: ip("10.202.128.0"), Dev: p.u2}))
	must(p.s1.ReplaceHTB(p.u1, dataplane.HTB{Handle: shapeRoot, Parent: 0xFFFFFFFF, Default: 1}))
	must(p.s1.ReplaceHTBClass(p.u1, dataplane.HTBClass{Parent: shapeRoot, Handle: shapeClass, Rate: lossyRate}))
	must(p.s1.ReplaceFIFO(p.u1, shapeClass, shapeFIFO, lossyQueue))
	return p
}

// drops returns the packets the shaped link dropped so far.
func (p *lossyPath) drops(t *testing.T) uint64 {
	t.Helper()
	cs, err := p.s1.ClassCounters(p.u1)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(cs[shapeClass].Drops)
}

// udp sends n datagrams of size bytes (IP packets) from a to b at rate
// bits/s, at most 64 at once, then 3 slowly: a loss is seen when the
// pair's next packet arrives, and these reveal the drops at the end of
// the blast once the link's queue has drained.
func (p *lossyPath) udp(t *testing.T, n, size int, rate float64) {
	t.Helper()
	var rc *net.UDPConn
	if err := p.b.Do(func() (err error) {
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.pair.Dst.AsSlice(), Port: 9000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			if _, err := rc.Read(buf); err != nil {
				return
			}
		}
	}()
	var sc *net.UDPConn
	if err := p.a.Do(func() (err error) {
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
		due := min(n, int(time.Since(start).Seconds()*pps)+1, sent+64)
		for ; sent < due; sent++ {
			if _, err := sc.Write(payload); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		if _, err := sc.Write(payload); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	rc.Close()
	wg.Wait()
}

// lost reads a loss counter's count of one pair.
func lost(t *testing.T, l datapath.LossCounter, p datapath.Pair) uint64 {
	t.Helper()
	m, err := l.Lost()
	if err != nil {
		t.Fatal(err)
	}
	return m[p]
}

// hookFilters returns tc's listing of the filters on both hooks of dev
// ("" when there are none).
func hookFilters(t *testing.T, ns *dataplane.NS, dev string) string {
	t.Helper()
	var all []string
	for _, hook := range []string{"ingress", "egress"} {
		out, err := exec.Command("tc", "-n", ns.Name, "filter", "show", "dev", dev, hook).CombinedOutput()
		if err != nil {
			t.Fatalf("tc filter show dev %s %s: %v: %s", dev, hook, err, out)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			all = append(all, hook+": "+s)
		}
	}
	return strings.Join(all, "; ")
}

// noClsact fails the test if dev has a clsact qdisc or any filter.
func noClsact(t *testing.T, ns *dataplane.NS, dev string) {
	t.Helper()
	out, err := exec.Command("tc", "-n", ns.Name, "qdisc", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("tc qdisc show dev %s: %v: %s", dev, err, out)
	}
	if strings.Contains(string(out), "clsact") {
		t.Errorf("netns %s: %s still has a clsact: %q", ns.Name, dev, out)
	}
	if f := hookFilters(t, ns, dev); f != "" {
		t.Errorf("netns %s: %s still has filters: %s", ns.Name, dev, f)
	}
}

// bpfIDs returns the kernel ids of a sequence-gap counter's programs and
// maps.
func bpfIDs(t *testing.T, s *SeqGaps) ([]ebpf.ProgramID, []ebpf.MapID) {
	t.Helper()
	st, co, err := s.p.ProgramIDs()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := s.p.MapIDs()
	if err != nil {
		t.Fatal(err)
	}
	return []ebpf.ProgramID{st, co}, ms
}

// bpfGone fails the test unless the programs and maps no longer exist in
// the kernel (the kernel frees them shortly after the last reference).
func bpfGone(t *testing.T, progs []ebpf.ProgramID, maps []ebpf.MapID) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, id := range progs {
		for {
			p, err := ebpf.NewProgramFromID(id)
			if err != nil {
				break
			}
			p.Close()
			if time.Now().After(deadline) {
				t.Errorf("program %d still exists", id)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, id := range maps {
		for {
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				break
			}
			m.Close()
			if time.Now().After(deadline) {
				t.Errorf("map %d still exists", id)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// lossHost returns a data path for a server that builds its VMs'
// limiters itself, with a loss counter of kind made before any VM is
// attached (NewLossCounter), as an agent under a controller has it.
func lossHost(t *testing.T, kind string, ns *dataplane.NS, uplink string, log *slog.Logger) *Host {
	t.Helper()
	lc, err := NewLossCounter(kind, ns, []string{uplink})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHost(Config{NS: ns, Loss: lc, Log: log})
	if err != nil {
		t.Fatal(errors.Join(err, lc.Close()))
	}
	t.Cleanup(func() {
		if err := h.Remove(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

// TestSeqGapsFollowVMs: sequence-gap counters made for servers with no
// VM count the losses of the shaped link per pair once the VMs are
// attached and the pair is the model's — a's limiter has it and b's
// receive counters count it, as the host agent sets them — equal to the
// link's drops within 1% (the seqloss package's criterion), for VMs in
// namespaces of their own and VMs whose devices are on the server (a's
// packets then reach the uplink through its limiter's IFB); nothing
// before attach, nor for a pair not the model's (its packets are not
// numbered), nothing after detach; the pairs are declared to the
// programs while the VMs' limiters and counters have them; after detach
// and close no filter, clsact, program or map of theirs remains.
func TestSeqGapsFollowVMs(t *testing.T) {
	needRoot(t)
	for _, layout := range []string{"netns", "server"} {
		t.Run(layout, func(t *testing.T) {
			p := newLossyPath(t)
			h1 := lossHost(t, LossSeq, p.s1, p.u1, nil)
			h2 := lossHost(t, LossSeq, p.s2, p.u2, nil)
			g1, g2 := h1.Loss().(*SeqGaps), h2.Loss().(*SeqGaps)
			progs1, maps1 := bpfIDs(t, g1)
			progs2, maps2 := bpfIDs(t, g2)
			if !strings.Contains(hookFilters(t, p.s1, p.u1), "bulkhead_seqloss_stamp") {
				t.Fatalf("no stamp program on %s: %s", p.u1, hookFilters(t, p.s1, p.u1))
			}

			// no VM attached: the link drops, nothing is counted
			d0 := p.drops(t)
			p.udp(t, 1000, 1000, 3*lossyRate)
			if d := p.drops(t) - d0; d < 100 {
				t.Fatalf("the link dropped %d packets of a blast at 3× its rate", d)
			}
			if m, err := h2.Loss().Lost(); err != nil || len(m) != 0 {
				t.Fatalf("losses counted before any VM was attached: %v, %v", m, err)
			}

			va := datapath.VM{Name: "a", Addr: p.pair.Src, Interface: p.aDev, Netns: p.a.Name}
			vb, dev := datapath.VM{Name: "b", Addr: p.pair.Dst, Interface: p.bDev, Netns: p.b.Name}, p.sb
			if layout == "server" {
				va = datapath.VM{Name: "a", Addr: p.pair.Src, Interface: p.sa}
				vb = datapath.VM{Name: "b", Addr: p.pair.Dst, Interface: p.sb}
			}
			pa, err := h1.Attach(va)
			if err != nil {
				t.Fatal(err)
			}
			pb, err := h2.Attach(vb)
			if err != nil {
				t.Fatal(err)
			}
			// Attached, the pair not the model's yet: not numbered.
			d0 = p.drops(t)
			p.udp(t, 1000, 1000, 3*lossyRate)
			if d := p.drops(t) - d0; d < 100 {
				t.Fatalf("the link dropped %d packets of a blast at 3× its rate", d)
			}
			if m, err := h2.Loss().Lost(); err != nil || len(m) != 0 {
				t.Fatalf("losses counted of a pair not declared: %v, %v", m, err)
			}
			if st, err := g1.p.Stats(); err != nil || st.TxUndeclared < 1000 {
				t.Errorf("sender's stats %+v (%v): want the blast's packets not numbered", st, err)
			}
			// The agent gives a's limiter a class for the pair
			// (sendPairs) and asks b's receive counters for it
			// (countPairs); the counters declare them at their next
			// reading.
			declare(t, pa, pb, p.pair)
			syncLoss(t, h1, h2)
			if got := g1.p.Declared(seqloss.Stamp); !slices.Equal(got, []datapath.Pair{p.pair}) {
				t.Errorf("the sender's server numbers %v, want %s", got, p.pair)
			}
			if got := g2.p.Declared(seqloss.Count); !slices.Equal(got, []datapath.Pair{p.pair}) {
				t.Errorf("the receiver's server counts %v, want %s", got, p.pair)
			}
			if pb.Device != dev || g2.Devices()["b"] != dev {
				t.Fatalf("b's device %q, counted on %v; want %s", pb.Device, g2.Devices(), dev)
			}
			if f := hookFilters(t, p.s2, dev); !strings.Contains(f, "bulkhead_seqloss_count") {
				t.Fatalf("no count program on %s: %s", dev, f)
			}

			d0 = p.drops(t)
			p.udp(t, 6000, 1000, 3*lossyRate)
			d := p.drops(t) - d0
			m, err := h2.Loss().Lost()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: link drops %d, counted %v", layout, d, m)
			if d < 1000 {
				t.Fatalf("the link dropped only %d packets: the blast did not overload it", d)
			}
			if got := m[p.pair]; absDiff(got, d) > max(2, d/100) || len(m) != 1 {
				t.Errorf("counted %v; want %d ±%d for %s only", m, d, max(2, d/100), p.pair)
			}
			if m1, err := h1.Loss().Lost(); err != nil || len(m1) != 0 {
				t.Errorf("the sender's server counted %v, %v; want nothing (no packet into a)", m1, err)
			}

			if st, err := g1.p.Stats(); err != nil || st.TxForeign != 0 {
				t.Errorf("sender's stats %+v (%v): want no packet of a's taken as forged", st, err)
			}
			if st, err := g2.p.Stats(); err != nil || st.RxForeign != 0 || st.RxUndeclared != 0 {
				t.Errorf("receiver's stats %+v (%v): want every marked packet counted", st, err)
			}

			// b leaves: its device is as it was, and losses into it are no
			// longer counted
			before := m[p.pair]
			if err := h2.Detach("b"); err != nil {
				t.Fatal(err)
			}
			pristine(t, p.s2, dev)
			if len(g2.Devices()) != 0 {
				t.Errorf("still counting on %v", g2.Devices())
			}
			if got := g2.p.Declared(seqloss.Count); len(got) != 0 {
				t.Errorf("pairs still counted after b left: %v", got)
			}
			d0 = p.drops(t)
			p.udp(t, 1000, 1000, 3*lossyRate)
			if got := lost(t, h2.Loss(), p.pair); got != before || p.drops(t)-d0 < 100 {
				t.Errorf("after detach: counted %d (before %d), link drops %d", got, before, p.drops(t)-d0)
			}
			// b back: counted again, from afresh
			if pb, err = h2.Attach(vb); err != nil {
				t.Fatal(err)
			}
			declare(t, pa, pb, p.pair)
			syncLoss(t, h1, h2)
			d0 = p.drops(t)
			p.udp(t, 3000, 1000, 3*lossyRate)
			d = p.drops(t) - d0
			if got := lost(t, h2.Loss(), p.pair) - before; absDiff(got, d) > max(2, d/100) {
				t.Errorf("b attached again: counted %d more, link drops %d", got, d)
			}
			// The pair leaves the model: the agent removes a's class and
			// stops b's counting; the programs no longer have it.
			if err := pa.TX.RemovePair(p.pair); err != nil {
				t.Fatal(err)
			}
			if err := pb.RX.(datapath.PairCounterSet).RemovePair(p.pair); err != nil {
				t.Fatal(err)
			}
			syncLoss(t, h1, h2)
			if s, c := g1.p.Declared(seqloss.Stamp), g2.p.Declared(seqloss.Count); len(s) != 0 || len(c) != 0 {
				t.Errorf("pairs numbered %v, counted %v after the pair left; want none", s, c)
			}

			if err := h1.Remove(); err != nil {
				t.Fatal(err)
			}
			if err := h2.Remove(); err != nil {
				t.Fatal(err)
			}
			bpfGone(t, progs1, maps1)
			bpfGone(t, progs2, maps2)
			pristine(t, p.s1, p.sa)
			pristine(t, p.s2, p.sb)
			pristine(t, p.a, p.aDev)
			pristine(t, p.b, p.bDev)
			pristine(t, p.s2, p.u2)
			noClsact(t, p.s1, p.u1) // its shaper stays
		})
	}
}

// TestSeqGapsConfiguredVMs: a Host given its VMs' limiters and
// receive counters (Config.VMs, as the testbed builds them, with the
// pair's class and counting in place) and a sequence-gap counter made
// with the VMs' devices on the server (NewSeqGaps): the pair is
// numbered and counted once the VMs are attached — the Host hands the
// counter their limiters and counters — and its losses equal the link's
// drops (a's pair numbered only from a's device, which its receive
// counters are on); once b is detached the pair is no longer counted,
// though b's counters stay.
func TestSeqGapsConfiguredVMs(t *testing.T) {
	needRoot(t)
	p := newLossyPath(t)
	lim, err := dataplane.NewLimiter(p.a, dataplane.LimiterConfig{Dev: p.aDev, QueueBytes: VMLimiterQueue})
	if err != nil {
		t.Fatal(err)
	}
	if err := lim.SetPairRate(p.pair, math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	rxs := map[string]*RXCounters{}
	for _, c := range []struct {
		ns   *dataplane.NS
		dev  string
		pair datapath.Pair
	}{{p.s1, p.sa, datapath.Pair{Src: p.pair.Dst, Dst: p.pair.Src}}, {p.s2, p.sb, p.pair}} {
		rx, err := NewRXCounters(c.ns, c.dev)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rx.Close() })
		if err := rx.CountPair(c.pair); err != nil {
			t.Fatal(err)
		}
		rxs[c.dev] = rx
	}
	host := func(ns *dataplane.NS, uplink, dev, vm string, l Limiters) (*Host, *SeqGaps) {
		g, err := NewSeqGaps(ns, []string{uplink}, []string{dev})
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHost(Config{NS: ns, VMs: map[string]Limiters{vm: l}, Loss: g})
		if err != nil {
			t.Fatal(errors.Join(err, g.Close()))
		}
		t.Cleanup(func() { _ = h.Close() })
		return h, g
	}
	// a's receive counters say where a's device on the server is: its
	// pair is numbered only for packets that came in by it.
	h1, g1 := host(p.s1, p.u1, p.sa, "a", Limiters{TX: lim, RX: rxs[p.sa]})
	h2, g2 := host(p.s2, p.u2, p.sb, "b", Limiters{RX: rxs[p.sb]})
	if _, err := h1.Attach(datapath.VM{Name: "a", Addr: p.pair.Src}); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Attach(datapath.VM{Name: "b", Addr: p.pair.Dst}); err != nil {
		t.Fatal(err)
	}
	if s, c := g1.p.Declared(seqloss.Stamp), g2.p.Declared(seqloss.Count); !slices.Equal(s, []datapath.Pair{p.pair}) || !slices.Equal(c, []datapath.Pair{p.pair}) {
		t.Fatalf("numbered %v, counted %v once attached; want %s", s, c, p.pair)
	}
	g1.mu.Lock()
	from := g1.stamped[p.pair]
	g1.mu.Unlock()
	if from != p.sa {
		t.Errorf("%s numbered from device %q, want %s", p.pair, from, p.sa)
	}
	d0 := p.drops(t)
	p.udp(t, 4000, 1000, 3*lossyRate)
	d := p.drops(t) - d0
	got := lost(t, h2.Loss(), p.pair)
	t.Logf("link drops %d, counted %d", d, got)
	if d < 500 || absDiff(got, d) > max(2, d/100) {
		t.Errorf("counted %d, link drops %d: want equal within 1%%", got, d)
	}
	if st, err := g1.p.Stats(); err != nil || st.TxForeign != 0 {
		t.Errorf("sender's stats %+v (%v): want no packet of a's taken as forged", st, err)
	}
	if err := h2.Detach("b"); err != nil {
		t.Fatal(err)
	}
	if c := g2.p.Declared(seqloss.Count); len(c) != 0 {
		t.Errorf("counted %v after b was detached", c)
	}
	syncLoss(t, h2)
	if c := g2.p.Declared(seqloss.Count); len(c) != 0 {
		t.Errorf("counted %v after b was detached and the counter read", c)
	}
}

// declare makes pair the model's as the host agent does: a class,
// unlimited, in the sender's limiter, and the receiver's counters
// counting it.
func declare(t *testing.T, from, to datapath.VMPath, pair datapath.Pair) {
	t.Helper()
	if err := from.TX.SetPairRate(pair, math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	if err := to.RX.(datapath.PairCounterSet).CountPair(pair); err != nil {
		t.Fatal(err)
	}
}

// syncLoss reads the hosts' loss counters, as the host agent does every
// period (a sequence-gap counter then declares the pairs the VMs'
// limiters and counters have).
func syncLoss(t *testing.T, hs ...*Host) {
	t.Helper()
	for _, h := range hs {
		if _, err := h.Loss().Lost(); err != nil {
			t.Fatal(err)
		}
	}
}

// syncBuffer is a bytes.Buffer for a logger written from other
// goroutines.
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

// TestTCPRetransmitsFollowVMs: a TCP-retransmission counter made with no
// VM counts the retransmissions of a VM attached later, per pair: TCP
// through the shaped link retransmits at least every packet the link
// dropped; a VM without a namespace is attached, its losses not counted,
// and the log says so once; detached, the VM is no longer watched.
func TestTCPRetransmitsFollowVMs(t *testing.T) {
	needRoot(t)
	p := newLossyPath(t)
	var logs syncBuffer
	h1 := lossHost(t, LossTCP, p.s1, p.u1, slog.New(slog.NewTextHandler(&logs, nil)))
	h2 := lossHost(t, LossTCP, p.s2, p.u2, nil)
	tr := h1.Loss().(*TCPRetransmits)
	if _, err := h1.Attach(datapath.VM{Name: "a", Addr: p.pair.Src, Interface: p.aDev, Netns: p.a.Name}); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Attach(datapath.VM{Name: "b", Addr: p.pair.Dst, Interface: p.bDev, Netns: p.b.Name}); err != nil {
		t.Fatal(err)
	}
	// c: a device on the server, no namespace to watch sockets in
	if err := p.s1.AddVeth(p.prefix+"sc", p.a, p.prefix+"c"); err != nil {
		t.Fatal(err)
	}
	c := datapath.VM{Name: "c", Addr: netip.MustParseAddr("10.202.0.5"), Interface: p.prefix + "sc"}
	if pc, err := h1.Attach(c); err != nil || pc.TX == nil {
		t.Fatalf("a VM whose losses cannot be counted: %+v, %v; want it attached", pc, err)
	}
	if _, err := h1.Attach(c); err != nil { // again: the same path
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "vm=c"); n != 1 || !strings.Contains(logs.String(), "not counted") {
		t.Errorf("log %q: want one line saying c's losses are not counted", logs.String())
	}
	if got := tr.VMs(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("watching %v, want [a]", got)
	}

	iperf3(t, p.prefix, p.a, p.b, p.pair, 10*time.Second)
	time.Sleep(2 * time.Second)
	d := p.drops(t)
	// every packet dropped by now is retransmitted well within a second
	// (fast retransmit after one round trip, or a 200 ms timeout)
	time.Sleep(time.Second)
	s0 := retransSegs(t, p.a)
	m, err := h1.Loss().Lost()
	if err != nil {
		t.Fatal(err)
	}
	s1 := retransSegs(t, p.a)
	t.Logf("link drops %d (packets, of several segments each); retransmissions counted a second later %v; the kernel's count in a's namespace %d..%d", d, m, s0, s1)
	if d < 10 {
		t.Fatalf("the link dropped %d packets of TCP at its rate: no loss to count", d)
	}
	// a's namespace holds only the transfer's connections, made after a
	// was attached: their retransmissions are all the namespace's
	if got := m[p.pair]; got < d || got < s0 || got > s1 || len(m) != 1 {
		t.Errorf("counted %v; want at least %d (the link's drops) and the namespace's retransmitted segments (%d..%d), for %s only", m, d, s0, s1, p.pair)
	}
	if m2, err := h2.Loss().Lost(); err != nil || len(m2) != 0 {
		t.Errorf("the receiver's server counted %v, %v; want nothing (b retransmits nothing)", m2, err)
	}

	// a leaves while its transfer goes on: no longer counted
	if err := h1.Detach("a"); err != nil {
		t.Fatal(err)
	}
	if got := tr.VMs(); len(got) != 0 {
		t.Errorf("watching %v after detach", got)
	}
	// UDP blasts overflow the link's queue: the transfer loses segments
	// and retransmits them (as the kernel counts), none counted now
	before, r0 := lost(t, h1.Loss(), p.pair), retransSegs(t, p.a)
	for i := 0; i < 3 && retransSegs(t, p.a) == r0; i++ {
		p.udp(t, 1000, 1000, 3*lossyRate)
	}
	if got, more := lost(t, h1.Loss(), p.pair), retransSegs(t, p.a)-r0; got != before || more == 0 {
		t.Errorf("after detach: counted %d (before %d), a's namespace retransmitted %d segments more; want some, none counted", got, before, more)
	}
	if err := h1.Detach("c"); err != nil {
		t.Fatal(err)
	}
	pristine(t, p.s1, p.prefix+"sc")
	pristine(t, p.s1, p.sa)
	pristine(t, p.a, p.aDev)
}

// retransSegs reads the kernel's count of TCP segments retransmitted in
// a namespace (RetransSegs in /proc/net/snmp).
func retransSegs(t *testing.T, ns *dataplane.NS) uint64 {
	t.Helper()
	var b []byte
	if err := ns.Do(func() (err error) { b, err = os.ReadFile("/proc/thread-self/net/snmp"); return err }); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		if i := slices.Index(names, "RetransSegs"); i > 0 && i < len(f) {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("netns %s: no Tcp RetransSegs in /proc/net/snmp", ns.Name)
	return 0
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}
