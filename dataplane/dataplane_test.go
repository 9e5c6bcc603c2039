package dataplane

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// needRoot skips in -short mode and fails (never skips) without root: CI
// runs as root and these tests must run there.
func needRoot(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration test (namespaces, real traffic): skipped in -short mode")
	}
	if err := RequireRoot(); err != nil {
		tb.Fatalf("integration test needs root: %v", err)
	}
}

func needIperf3(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		tb.Fatal("iperf3 not found: install it (apt-get install -y iperf3)")
	}
}

// newPrefix returns a fresh run prefix and registers a cleanup that removes
// everything of it and fails the test if anything is left.
func newPrefix(tb testing.TB) string {
	tb.Helper()
	prefix := RandomPrefix("dt")
	tb.Cleanup(func() { cleanupAndCheck(tb, prefix) })
	return prefix
}

func cleanupAndCheck(tb testing.TB, prefix string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Cleanup(ctx, prefix); err != nil {
		tb.Errorf("cleanup %s: %v", prefix, err)
	}
	left, err := Find(prefix)
	if err != nil {
		tb.Errorf("find leftovers of %s: %v", prefix, err)
	} else if !left.Empty() {
		tb.Errorf("run %s left %s", prefix, left)
	}
}

// chain is VM a — host h — VM b: a's traffic enters h on ha, is redirected
// to the IFB hx (a limiter), and leaves h toward b on hb.
type chain struct {
	a, h, b *NS
	pair    Pair
	lim     *Limiter
	rx      *Limiter // unlimited classes: counters at the receiver's side
}

func newChain(t testing.TB, prefix string) *chain {
	t.Helper()
	mk := func(name string, fwd bool) *NS {
		n, err := CreateNS(NSPrefix(prefix)+name, NSOptions{Forwarding: fwd})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	c := &chain{a: mk("a", false), h: mk("h", true), b: mk("b", false)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pfx := netip.MustParsePrefix
	must(c.h.AddVeth(prefix+"ha", c.a, prefix+"a"))
	must(c.h.AddVeth(prefix+"hb", c.b, prefix+"b"))
	must(c.h.AddAddr(prefix+"ha", pfx("10.200.0.0/31")))
	must(c.a.AddAddr(prefix+"a", pfx("10.200.0.1/31")))
	must(c.h.AddAddr(prefix+"hb", pfx("10.200.0.2/31")))
	must(c.b.AddAddr(prefix+"b", pfx("10.200.0.3/31")))
	must(c.a.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Via: netip.MustParseAddr("10.200.0.0"), Dev: prefix + "a"}))
	must(c.b.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Via: netip.MustParseAddr("10.200.0.2"), Dev: prefix + "b"}))
	must(c.h.AddIFB(prefix + "hx"))
	must(c.h.RedirectIngress(prefix+"ha", prefix+"hx", 1))
	lim, err := NewLimiter(c.h, LimiterConfig{Dev: prefix + "hx"})
	must(err)
	c.lim = lim
	rx, err := NewLimiter(c.h, LimiterConfig{Dev: prefix + "hb"})
	must(err)
	c.rx = rx
	c.pair = Pair{Src: netip.MustParseAddr("10.200.0.1"), Dst: netip.MustParseAddr("10.200.0.3")}
	must(rx.SetPairRate(c.pair, math.Inf(1)))
	return c
}

// iperf3 runs a TCP transfer a → b for d in the background.
func (c *chain) iperf3(t *testing.T, ctx context.Context, prefix string, d time.Duration) {
	t.Helper()
	srv := Command(ctx, prefix, "iperf3", "-s", "-1", "-B", c.pair.Dst.String(), "-p", "5299")
	if err := c.b.StartIn(srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	var cli *exec.Cmd
	deadline := time.Now().Add(3 * time.Second)
	for {
		cli = Command(ctx, prefix, "iperf3", "-c", c.pair.Dst.String(), "-B", c.pair.Src.String(), "-p", "5299",
			"-t", fmt.Sprint(int(math.Ceil(d.Seconds()))), "--connect-timeout", "500")
		if err := c.a.StartIn(cli); err != nil {
			t.Fatal(err)
		}
		// a client that fails fast did not find the server listening yet
		done := make(chan error, 1)
		go func() { done <- cli.Wait() }()
		select {
		case err := <-done:
			if time.Now().After(deadline) {
				t.Fatalf("iperf3 client: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		case <-time.After(300 * time.Millisecond):
		}
		t.Cleanup(func() { _ = cli.Process.Kill(); <-done })
		return
	}
}

// rate measures the pair's throughput over d from the limiter's class and
// the receiver-side counter (bits/s).
func (c *chain) rate(t *testing.T, d time.Duration) (class, rx float64) {
	t.Helper()
	read := func() (uint64, uint64) {
		cs, err := c.lim.Counters()
		if err != nil {
			t.Fatal(err)
		}
		rs, err := c.rx.Counters()
		if err != nil {
			t.Fatal(err)
		}
		return cs[c.pair].Bytes, rs[c.pair].Bytes
	}
	c0, r0 := read()
	t0 := time.Now()
	time.Sleep(d)
	c1, r1 := read()
	s := time.Since(t0).Seconds()
	return float64(c1-c0) * 8 / s, float64(r1-r0) * 8 / s
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

// TestLimiterRateChange: a pair limited at 40 Mbit/s, then 120 Mbit/s
// (one class change), measured by the class counters and by the
// receiver-side counter, and cross-checked with tc.
func TestLimiterRateChange(t *testing.T) {
	needRoot(t)
	needIperf3(t)
	prefix := newPrefix(t)
	c := newChain(t, prefix)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.lim.SetPairRate(c.pair, 40e6); err != nil {
		t.Fatal(err)
	}
	c.iperf3(t, ctx, prefix, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	cl, rx := c.rate(t, 1500*time.Millisecond)
	t.Logf("limit 40 Mbit/s: class %.1f Mbit/s, receiver %.1f Mbit/s", cl/1e6, rx/1e6)
	if !within(cl, 40e6, 0.05) || !within(rx, 40e6, 0.05) {
		t.Errorf("limit 40 Mbit/s: class measured %.1f, receiver %.1f Mbit/s; want 40 ± 5%%", cl/1e6, rx/1e6)
	}
	start := time.Now()
	if err := c.lim.SetPairRate(c.pair, 120e6); err != nil {
		t.Fatal(err)
	}
	t.Logf("class change took %v", time.Since(start))
	if got := c.lim.PairRate(c.pair); got != 120e6 {
		t.Errorf("PairRate = %v, want 120e6", got)
	}
	time.Sleep(300 * time.Millisecond)
	cl, rx = c.rate(t, 1500*time.Millisecond)
	t.Logf("limit 120 Mbit/s: class %.1f Mbit/s, receiver %.1f Mbit/s", cl/1e6, rx/1e6)
	if !within(cl, 120e6, 0.05) || !within(rx, 120e6, 0.05) {
		t.Errorf("limit 120 Mbit/s: class measured %.1f, receiver %.1f Mbit/s; want 120 ± 5%%", cl/1e6, rx/1e6)
	}
	// Cross-check the class with tc (tests only).
	out, err := exec.Command("tc", "-n", c.h.Name, "class", "show", "dev", prefix+"hx").CombinedOutput()
	if err != nil {
		t.Fatalf("tc class show: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "rate 120Mbit ceil 120Mbit burst 15000b cburst 15000b") {
		t.Errorf("tc shows %q, want rate 120Mbit ceil 120Mbit burst 15000b cburst 15000b", out)
	}
	cs, err := c.lim.Counters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("class counters: %+v", cs[c.pair])
	if cs[c.pair].Overlimits == 0 {
		t.Errorf("the pair's class never went over its limit: %+v", cs[c.pair])
	}
}

// TestLimiterPairs: classes for several pairs, removal and reuse, unlimited
// and zero rates, invalid input.
func TestLimiterPairs(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	c := newChain(t, prefix)
	p := func(s, d string) Pair { return Pair{Src: netip.MustParseAddr(s), Dst: netip.MustParseAddr(d)} }
	pairs := []Pair{p("10.200.0.1", "10.200.0.3"), p("10.200.0.1", "10.200.0.5"), p("10.200.0.7", "10.200.0.3")}
	for i, pr := range pairs {
		if err := c.lim.SetPairRate(pr, float64(i+1)*1e6); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.lim.SetPairRate(pairs[0], math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	if err := c.lim.SetPairRate(pairs[1], 0); err != nil {
		t.Fatal(err)
	}
	if got := c.lim.Pairs(); len(got) != 3 {
		t.Fatalf("Pairs() = %v, want 3", got)
	}
	cs, err := c.h.ClassCounters(prefix + "hx")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Errorf("%d classes on the limiter, want 3: %v", len(cs), cs)
	}
	if err := c.lim.RemovePair(pairs[1]); err != nil {
		t.Fatal(err)
	}
	if err := c.lim.RemovePair(pairs[1]); err != nil {
		t.Fatalf("second removal: %v", err)
	}
	if !math.IsInf(c.lim.PairRate(pairs[1]), 1) {
		t.Errorf("removed pair has rate %v", c.lim.PairRate(pairs[1]))
	}
	if err := c.lim.SetPairRate(p("10.200.0.9", "10.200.0.3"), 5e6); err != nil {
		t.Fatalf("reusing a freed class: %v", err)
	}
	h, ok := c.lim.ClassOf(p("10.200.0.9", "10.200.0.3"))
	if !ok || h != TCHandle(1, 2) {
		t.Errorf("reused class = %x, %v; want 1:2", h, ok)
	}
	for _, bad := range []float64{-1, math.NaN()} {
		if err := c.lim.SetPairRate(pairs[0], bad); err == nil {
			t.Errorf("rate %v accepted", bad)
		}
	}
	if err := c.lim.SetPairRate(Pair{}, 1e6); err == nil {
		t.Error("invalid pair accepted")
	}
	for range 2 { // the second finds no qdisc: not an error
		if err := c.h.DeleteRootQdisc(prefix + "hx"); err != nil {
			t.Fatal(err)
		}
	}
	if cs, err := c.h.ClassCounters(prefix + "hx"); err != nil || len(cs) != 0 {
		t.Errorf("classes after deleting the root qdisc: %v, %v", cs, err)
	}
}

// TestCleanupKillsAndRemoves: namespaces with a process inside and another
// marked process; Cleanup removes them all (the path every failure takes).
func TestCleanupKillsAndRemoves(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	a, err := CreateNS(NSPrefix(prefix)+"a", NSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := CreateNS(NSPrefix(prefix)+"b", NSOptions{Forwarding: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddVeth(prefix+"x", b, prefix+"y"); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateNS(NSPrefix(prefix)+"a", NSOptions{}); err == nil {
		t.Error("creating an existing namespace succeeded")
	}
	ctx := context.Background()
	sleeper := Command(ctx, prefix, "sleep", "60")
	if err := a.StartIn(sleeper); err != nil {
		t.Fatal(err)
	}
	go func() { _ = sleeper.Wait() }()
	// A process that only entered the namespace through setns (not marked).
	unmarked := exec.Command("sleep", "60")
	if err := b.StartIn(unmarked); err != nil {
		t.Fatal(err)
	}
	go func() { _ = unmarked.Wait() }()
	left, err := Find(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Namespaces) != 2 || len(left.Processes) != 2 {
		t.Fatalf("before cleanup: %s; want 2 namespaces and 2 processes", left)
	}
	links, err := b.Links()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(links, " "), prefix+"y") {
		t.Errorf("links in b: %v", links)
	}
	a.Close()
	b.Close()
	if err := Cleanup(ctx, prefix); err != nil {
		t.Fatal(err)
	}
	if left, err := Find(prefix); err != nil || !left.Empty() {
		t.Fatalf("after cleanup: %s, %v", left, err)
	}
	if _, err := os.Stat(NetnsDir + "/" + NSPrefix(prefix) + "a"); !os.IsNotExist(err) {
		t.Errorf("namespace file still there: %v", err)
	}
}

func TestValidPrefix(t *testing.T) {
	for _, p := range []string{"bh", "bh12345", "x9abcdef"} {
		if err := ValidPrefix(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "b", "Bh1", "1bh", "bh-1", "abcdefghi"} {
		if err := ValidPrefix(p); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
}

func TestMatchSelector(t *testing.T) {
	m := Match{Src: netip.MustParsePrefix("10.200.0.1/32"), Dst: netip.MustParsePrefix("10.200.1.0/24")}
	sel, err := m.selector()
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Keys) != 2 || sel.Keys[0].Val != 0x0ac80001 || sel.Keys[0].Mask != 0xffffffff || sel.Keys[0].Off != 12 ||
		sel.Keys[1].Val != 0x0ac80100 || sel.Keys[1].Mask != 0xffffff00 || sel.Keys[1].Off != 16 {
		t.Errorf("selector %+v", sel.Keys)
	}
	if _, err := (Match{Src: netip.MustParsePrefix("::1/128")}).selector(); err == nil {
		t.Error("IPv6 accepted")
	}
	all, _ := Match{}.selector()
	if len(all.Keys) != 1 || all.Keys[0].Mask != 0 {
		t.Errorf("match-all selector %+v", all.Keys)
	}
}

// BenchmarkClassChange measures one limiter update: SetPairRate on a pair
// whose class exists, i.e. one HTB class change through netlink (the
// brief: ~36 µs raw here, target < 50 µs).
func BenchmarkClassChange(b *testing.B) {
	needRoot(b)
	prefix := newPrefix(b)
	n := testNS(b, prefix, "h")
	lim := ifbLimiter(b, n, prefix+"x")
	pair := Pair{Src: netip.MustParseAddr("10.200.0.1"), Dst: netip.MustParseAddr("10.200.0.3")}
	if err := lim.SetPairRate(pair, 100e6); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := lim.SetPairRate(pair, 100e6+float64(i%1000)*1e5); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClassChangeNetlinkLib is the same change through the netlink
// package's ClassChange (rate tables, reflection-based encoding), for
// comparison with the hand-built request SetPairRate uses.
func BenchmarkClassChangeNetlinkLib(b *testing.B) {
	needRoot(b)
	prefix := newPrefix(b)
	n := testNS(b, prefix, "h")
	lim := ifbLimiter(b, n, prefix+"x")
	pair := Pair{Src: netip.MustParseAddr("10.200.0.1"), Dst: netip.MustParseAddr("10.200.0.3")}
	if err := lim.SetPairRate(pair, 100e6); err != nil {
		b.Fatal(err)
	}
	h, _ := lim.ClassOf(pair)
	idx, err := n.LinkIndex(prefix + "x")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c, err := htbClass(idx, HTBClass{Parent: TCHandle(1, 0), Handle: h, Rate: 100e6 + float64(i%1000)*1e5})
		if err != nil {
			b.Fatal(err)
		}
		if err := n.nl.ClassChange(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClassDump measures one reading of a limiter's counters: a
// netlink dump of every class of its device (64 or 1,024 pair classes),
// parsed by hand (fast, what Limiter.Counters uses) or through the
// netlink package's ClassList (lib, as before).
func BenchmarkClassDump(b *testing.B) {
	needRoot(b)
	for _, n := range []int{64, 1024} {
		prefix := newPrefix(b)
		ns := testNS(b, prefix, "h")
		lim := ifbLimiter(b, ns, prefix+"x")
		for i := 0; i < n; i++ {
			p := Pair{Src: netip.AddrFrom4([4]byte{10, 1, 0, 1}), Dst: netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)})}
			if err := lim.SetPairRate(p, 100e6); err != nil {
				b.Fatal(err)
			}
		}
		for _, lib := range []bool{false, true} {
			name := fmt.Sprintf("classes=%d/fast", n)
			if lib {
				name = fmt.Sprintf("classes=%d/lib", n)
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					var cs map[uint32]Counters
					var err error
					if lib {
						cs, err = ns.classCountersLib(lim.idx, lim.dev)
					} else {
						cs, err = ns.classCounters(lim.idx, lim.dev)
					}
					if err != nil || len(cs) != n {
						b.Fatalf("%d classes, %v", len(cs), err)
					}
				}
			})
		}
	}
}

// testNS creates the namespace name of run prefix, closed at cleanup.
func testNS(tb testing.TB, prefix, name string) *NS {
	tb.Helper()
	ns, err := CreateNS(NSPrefix(prefix)+name, NSOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(ns.Close)
	return ns
}

// ifbLimiter adds the IFB dev to ns and returns a pair limiter on it.
func ifbLimiter(tb testing.TB, ns *NS, dev string) *Limiter {
	tb.Helper()
	if err := ns.AddIFB(dev); err != nil {
		tb.Fatal(err)
	}
	l, err := NewLimiter(ns, LimiterConfig{Dev: dev})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}
