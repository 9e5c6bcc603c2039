package dataplane

import (
	"math"
	"net/netip"
	"testing"
)

func TestIndebted(t *testing.T) {
	for _, tc := range []struct {
		old, new float64
		want     bool
	}{
		{100e3, 200e6, true},       // 64 KB at 100 kbit/s: 5 s of debt
		{20e6, 100e6, true},        // 26 ms
		{20e6, 30e6, false},        // not raised enough to matter
		{100e6, 1e9, false},        // 5 ms: a class change is fine
		{100e3, math.Inf(1), true}, // back to unlimited
		{200e6, 100e3, false},      // lowering never recreates
	} {
		if got := indebted(tc.old, tc.new); got != tc.want {
			t.Errorf("indebted(%g, %g) = %v, want %v", tc.old, tc.new, got, tc.want)
		}
	}
}

// TestLimiterClearsDebt: raising a pair from a rate at which an offload
// packet costs a long token debt recreates its class (same pair, a fresh
// class with its classifier); other changes stay in place.
func TestLimiterClearsDebt(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	c := newChain(t, prefix)
	p := Pair{Src: netip.MustParseAddr("10.200.0.1"), Dst: netip.MustParseAddr("10.200.0.3")}
	for _, r := range []float64{500e6, 100e3, 50e3} {
		if err := c.lim.SetPairRate(p, r); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.lim.Recreated(); n != 0 {
		t.Fatalf("recreated %d times while lowering", n)
	}
	if err := c.lim.SetPairRate(p, 400e6); err != nil {
		t.Fatal(err)
	}
	if n := c.lim.Recreated(); n != 1 {
		t.Errorf("recreated %d times after raising 50 kbit/s to 400 Mbit/s, want 1", n)
	}
	if r := c.lim.PairRate(p); r != 400e6 {
		t.Errorf("rate %v after the raise", r)
	}
	if _, ok := c.lim.ClassOf(p); !ok {
		t.Error("the pair lost its class")
	}
	cs, err := c.h.ClassCounters(prefix + "hx")
	if err != nil || len(cs) != 1 {
		t.Errorf("classes after recreation: %v, %v", cs, err)
	}
}

// TestLimiterRecreatesLostClass: the counters carry each class's rate in
// force (what a host agent verifies its limits with); a pair whose class
// and classifier were deleted behind the limiter's back reads as rate 0,
// and setting its rate again makes them anew.
func TestLimiterRecreatesLostClass(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	c := newChain(t, prefix)
	p := c.pair
	if err := c.lim.SetPairRate(p, 40e6); err != nil {
		t.Fatal(err)
	}
	cs, err := c.lim.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if got := cs[p]; got.Rate != 40e6 || got.Ceil != 40e6 {
		t.Fatalf("counters %+v, want rate and ceil 40 Mbit/s", got)
	}
	h, _ := c.lim.ClassOf(p)
	if err := c.h.DeleteU32(prefix+"hx", TCHandle(1, 0), uint16(h&0xffff)); err != nil {
		t.Fatal(err)
	}
	if err := c.h.DeleteClass(prefix+"hx", TCHandle(1, 0), h); err != nil {
		t.Fatal(err)
	}
	if cs, err = c.lim.Counters(); err != nil || cs[p].Rate != 0 {
		t.Fatalf("counters of the deleted class: %+v, %v; want rate 0", cs[p], err)
	}
	if err := c.lim.SetPairRate(p, 60e6); err != nil {
		t.Fatalf("setting the rate of a lost class: %v", err)
	}
	if cs, err = c.lim.Counters(); err != nil || cs[p].Rate != 60e6 {
		t.Errorf("counters after the class was made anew: %+v, %v", cs[p], err)
	}
	all, err := c.h.ClassCounters(prefix + "hx")
	if err != nil || len(all) != 1 {
		t.Errorf("classes on the limiter: %v, %v; want one", all, err)
	}
}
