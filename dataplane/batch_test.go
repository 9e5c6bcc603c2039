package dataplane

import (
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// TestSetPairRates: the class changes of a batch go to the kernel
// together (in chunks of the socket's batch size, here forced small),
// each answered on its own: the ops on existing classes take their
// rates, a pair's first op creates its class, a class deleted behind the
// limiter's back is made anew, a bad rate is refused alone, and a pair
// named twice ends at its last rate; the counters read by the
// hand-parsed dump are the netlink package's.
func TestSetPairRates(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	ns := testNS(t, prefix, "h")
	var lims []*Limiter
	for _, dev := range []string{prefix + "a", prefix + "b"} {
		l := ifbLimiter(t, ns, dev)
		lims = append(lims, l)
	}
	pair := func(i int) Pair {
		return Pair{Src: netip.AddrFrom4([4]byte{10, 1, 0, 1}), Dst: netip.AddrFrom4([4]byte{10, 2, 0, byte(i)})}
	}
	for i := 1; i <= 6; i++ {
		if err := lims[i%2].SetPairRate(pair(i), 100e6); err != nil {
			t.Fatal(err)
		}
	}
	// pair 3's class is deleted behind the limiter's back
	h3, _ := lims[1].ClassOf(pair(3))
	if err := ns.DeleteU32(lims[1].dev, TCHandle(1, 0), uint16(h3)); err != nil {
		t.Fatal(err)
	}
	if err := ns.DeleteClass(lims[1].dev, TCHandle(1, 0), h3); err != nil {
		t.Fatal(err)
	}
	f, err := ns.fastSocket()
	if err != nil {
		t.Fatal(err)
	}
	f.batch = 2 // several sendmsg calls
	tests := []struct {
		op   RateOp
		err  string
		want float64 // the class's rate read afterwards (0: no class)
	}{
		{RateOp{lims[1], pair(1), 200e6}, "", 200e6},
		{RateOp{lims[0], pair(2), 300e6}, "", 300e6},
		{RateOp{lims[1], pair(3), 400e6}, "", 400e6}, // made anew
		{RateOp{lims[0], pair(4), math.NaN()}, "rate NaN", 100e6},
		{RateOp{lims[1], pair(5), math.Inf(1)}, "", MaxRate},
		{RateOp{lims[0], pair(6), 50e6}, "", 0},    // named twice
		{RateOp{lims[1], pair(7), 70e6}, "", 70e6}, // new
		{RateOp{lims[0], pair(6), 60e6}, "", 60e6},
		{RateOp{nil, pair(8), 1e6}, "no limiter", 0},
	}
	var ops []RateOp
	for _, tc := range tests {
		ops = append(ops, tc.op)
	}
	errs := SetPairRates(ops)
	if len(errs) != len(ops) {
		t.Fatalf("%d errors for %d ops", len(errs), len(ops))
	}
	for i, tc := range tests {
		switch {
		case tc.err == "" && errs[i] != nil:
			t.Errorf("op %d (%s): %v", i, tc.op.P, errs[i])
		case tc.err != "" && (errs[i] == nil || !strings.Contains(errs[i].Error(), tc.err)):
			t.Errorf("op %d (%s): error %v, want %q", i, tc.op.P, errs[i], tc.err)
		}
	}
	for _, l := range lims {
		fast, err := ns.classCounters(l.idx, l.dev)
		if err != nil {
			t.Fatal(err)
		}
		lib, err := ns.classCountersLib(l.idx, l.dev)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, lib) {
			t.Errorf("%s: hand-parsed dump %v, netlink package's %v", l.dev, fast, lib)
		}
		cs, err := l.Counters()
		if err != nil {
			t.Fatal(err)
		}
		for i, tc := range tests {
			if tc.op.L != l || tc.want == 0 {
				continue
			}
			if got := cs[tc.op.P].Rate; math.Abs(got-tc.want) > 8 {
				t.Errorf("op %d (%s): class rate %g, want %g", i, tc.op.P, got, tc.want)
			}
		}
	}
	if got := lims[0].PairRate(pair(6)); got != 60e6 {
		t.Errorf("pair named twice at %g, want its last rate", got)
	}
	if got := lims[1].PairRate(pair(3)); got != 400e6 {
		t.Errorf("lost pair at %g, want 400e6", got)
	}
}

// TestChangeHTBClassesRefusals: with only the last request of a sendmsg
// asking for an ack, every refused change is still reported for itself
// and every other one is in force, wherever the refused ones are in the
// batch and its chunks.
func TestChangeHTBClassesRefusals(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	ns := testNS(t, prefix, "h")
	dev := prefix + "a"
	l := ifbLimiter(t, ns, dev)
	const n = 7
	var handles []uint32
	for i := range n {
		p := Pair{Src: netip.AddrFrom4([4]byte{10, 1, 0, 1}), Dst: netip.AddrFrom4([4]byte{10, 2, 0, byte(i + 1)})}
		if err := l.SetPairRate(p, 1e6); err != nil {
			t.Fatal(err)
		}
		h, _ := l.ClassOf(p)
		handles = append(handles, h)
	}
	f, err := ns.fastSocket()
	if err != nil {
		t.Fatal(err)
	}
	missing := TCHandle(1, 0x7000) // no such class: its change is refused
	tests := []struct {
		name    string
		batch   int
		refused []bool // per change: to a class that does not exist
	}{
		{"none", 64, []bool{false, false, false}},
		{"first", 64, []bool{true, false, false, false}},
		{"middle", 64, []bool{false, true, false, true, false}},
		{"last", 64, []bool{false, false, true}},
		{"all", 64, []bool{true, true, true}},
		{"chunks of two", 2, []bool{false, true, true, false, false, true, false}},
	}
	rate := 2e6
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.batch = tc.batch
			rate += 1e6
			var cs []classChange
			for i, r := range tc.refused {
				h := handles[i%n]
				if r {
					h = missing
				}
				cs = append(cs, classChange{ifindex: l.idx, c: HTBClass{Parent: TCHandle(1, 0), Handle: h, Rate: rate, Ceil: rate}})
			}
			errs := f.changeHTBClasses(cs)
			read, err := ns.classCounters(l.idx, dev)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range tc.refused {
				switch {
				case r && errs[i] == nil:
					t.Errorf("change %d (no class) not refused", i)
				case !r && errs[i] != nil:
					t.Errorf("change %d: %v", i, errs[i])
				case !r && math.Abs(read[cs[i].c.Handle].Rate-rate) > 8:
					t.Errorf("change %d: class at %g, want %g", i, read[cs[i].c.Handle].Rate, rate)
				}
			}
		})
	}
}
