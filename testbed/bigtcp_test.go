package testbed

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestBigTCP: with offload packets above the kernel's 64 KB (BIG TCP,
// Options.GSOMaxSize = MaxGSO) a VM's TCP packets cross the emulated
// datacenter whole, and the agents' counters count them as they count
// 64 KB packets: the receiving VM's device takes packets of more than
// 64 KB on average, and the pair's bytes in the receiver's eBPF counter
// and in the sender's pair limiter agree with what that device took.
func TestBigTCP(t *testing.T) {
	needRoot(t)
	sc, tp := parseScenario(t, overheadYAML)
	ctx := context.Background()
	tb, err := Up(ctx, sc, tp, Options{Prefix: testPrefix(t), Limiters: true, Ephemeral: true, GSOMaxSize: MaxGSO})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	y, _ := tb.plan.VM("y")
	dev := func() (bytes, packets uint64) {
		bytes, packets, err := vmReceived(tb, "y")
		if err != nil {
			t.Fatal(err)
		}
		return bytes, packets
	}
	p, err := tb.plan.dpPair("x", "y")
	if err != nil {
		t.Fatal(err)
	}
	pairBytes := func() (tx, rx uint64) {
		tc, err := tb.tx["x"].Counters()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := tb.rx["y"].Counters()
		if err != nil {
			t.Fatal(err)
		}
		return tc[p].Bytes, rc[p].Bytes
	}

	g := &generator{tb: tb}
	defer g.stop()
	fl := []flow{{pair: 0, src: "x", dst: "y", workload: "w", conns: 1, phase: phase(0, 2*time.Second), port: 5201}}
	if err := g.listen(fl); err != nil {
		t.Fatal(err)
	}
	b0, n0 := dev()
	tx0, rx0 := pairBytes()
	g.begin(ctx, fl, time.Now(), 1)
	time.Sleep(1500 * time.Millisecond)
	b1, n1 := dev()
	tx1, rx1 := pairBytes()
	if err := g.err(); err != nil {
		t.Fatal(err)
	}
	got, pkts := float64(b1-b0), float64(n1-n0)
	t.Logf("%s took %.0f MB in %.0f packets (%.0f bytes a packet); the pair limiter counted %.0f MB, the receive counter %.0f MB",
		y.Dev, got/1e6, pkts, got/max(pkts, 1), float64(tx1-tx0)/1e6, float64(rx1-rx0)/1e6)
	if got < 100e6 {
		t.Fatalf("%s took %.0f MB in 1.5 s: the flow did not run", y.Dev, got/1e6)
	}
	if size := got / pkts; size <= 65536 {
		t.Errorf("%s took packets of %.0f bytes on average, want more than 64 KB (BIG TCP)", y.Dev, size)
	}
	// The receive counter counts at the VM's device on the server, the
	// limiter at the VM's own device; both count the headers of a packet
	// once or once per segment (within 5% of the payload at 1448 bytes a
	// segment), and a reading may fall between them.
	for name, c := range map[string]uint64{"pair limiter": tx1 - tx0, "receive counter": rx1 - rx0} {
		if d := math.Abs(float64(c)-got) / got; d > 0.1 {
			t.Errorf("the %s counted %.0f MB of the pair's packets, the receiving device took %.0f MB: %.0f%% apart, want within 10%%",
				name, float64(c)/1e6, got/1e6, 100*d)
		}
	}
}

// TestBigTCPLimits: a pair limiter holds a fast TCP flow to its limit as
// well with BIG TCP's offload packets of up to 512 KB as with the
// kernel's default 64 KB, though its class's burst (1 ms at the rate) is
// smaller than one such packet up to about 4.2 Gbit/s. One pair on links of
// 40 Gbit/s, limited in turn to 1, 4 and 12 Gbit/s: the flow's goodput
// over a second at each limit is within 90–99% of it (HTB charges every
// segment's headers, so a flow held at its limit has a goodput of about
// 1448/1514 = 95.6% of it; more would be a burst the class let through),
// with either packet size.
func TestBigTCPLimits(t *testing.T) {
	needRoot(t)
	sc, tp := parseScenario(t, overheadYAML)
	limits := []float64{1e9, 4e9, 12e9}
	const settle, window = 700 * time.Millisecond, time.Second
	for _, gso := range []int{0, MaxGSO} {
		ctx := context.Background()
		tb, err := Up(ctx, sc, tp, Options{Prefix: testPrefix(t), Limiters: true, Ephemeral: true, GSOMaxSize: gso})
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer tb.Close()
			g := &generator{tb: tb}
			defer g.stop()
			total := time.Duration(len(limits))*(settle+window) + time.Second
			fl := []flow{{pair: 0, src: "x", dst: "y", workload: "w", conns: 1, phase: phase(0, total), port: 5201}}
			if err := g.listen(fl); err != nil {
				t.Fatal(err)
			}
			if err := tb.SetPairRate("x", "y", limits[0]); err != nil {
				t.Fatal(err)
			}
			g.begin(ctx, fl, time.Now(), 1)
			for i, lim := range limits {
				if i > 0 {
					if err := tb.SetPairRate("x", "y", lim); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(settle)
				b0, t0 := g.received.Load(), time.Now()
				time.Sleep(window)
				rate := float64(g.received.Load()-b0) * 8 / time.Since(t0).Seconds()
				if err := g.err(); err != nil {
					t.Fatal(err)
				}
				size := "64 KB"
				if gso > 0 {
					size = "512 KB"
				}
				t.Logf("offload packets up to %s, limit %.0f Gbit/s: goodput %.3f Gbit/s (%.1f%%)", size, lim/1e9, rate/1e9, 100*rate/lim)
				if r := rate / lim; r < 0.9 || r > 0.99 {
					t.Errorf("offload packets up to %s: a flow limited to %.0f Gbit/s got %.3f Gbit/s (%.1f%% of its limit), want 90–99%%", size, lim/1e9, rate/1e9, 100*r)
				}
			}
		}()
	}
}
