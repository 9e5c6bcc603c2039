package dataplane

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/bulkhead-dc/bulkhead/datapath"
)

// TestReadPairs: a limiter's ReadPairs reads what Counters reads, in
// ComparePairs order, after each change of its pairs (a pair added, one
// removed, a class deleted behind its back, rates changed), and reuses
// the caller's slice without allocating.
func TestReadPairs(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	ns := testNS(t, prefix, "h")
	dev := prefix + "a"
	l := ifbLimiter(t, ns, dev)
	pair := func(i int) Pair {
		// the order pairs are made in is not theirs
		return Pair{Src: netip.AddrFrom4([4]byte{10, 1, 0, byte(7 - i%7)}), Dst: netip.AddrFrom4([4]byte{10, 2, 0, byte(i)})}
	}
	tests := []struct {
		name   string
		change func() error
		n      int // pairs read afterwards
	}{
		{"empty", func() error { return nil }, 0},
		{"six pairs", func() error {
			for i := 1; i <= 6; i++ {
				if err := l.SetPairRate(pair(i), float64(i)*10e6); err != nil {
					return err
				}
			}
			return nil
		}, 6},
		{"rates changed", func() error {
			return errorsOf(SetPairRates([]RateOp{{l, pair(2), 1e6}, {l, pair(5), 2e6}}))
		}, 6},
		{"one removed", func() error { return l.RemovePair(pair(3)) }, 5},
		{"one added in its minor", func() error { return l.SetPairRate(pair(9), 9e6) }, 6},
		{"a class deleted behind its back", func() error {
			h, _ := l.ClassOf(pair(4))
			if err := ns.DeleteU32(dev, TCHandle(1, 0), uint16(h)); err != nil {
				return err
			}
			return ns.DeleteClass(dev, TCHandle(1, 0), h)
		}, 6},
	}
	var buf []datapath.PairReading
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.change(); err != nil {
				t.Fatal(err)
			}
			cs, err := l.Counters()
			if err != nil {
				t.Fatal(err)
			}
			var want []datapath.PairReading
			for _, p := range datapath.SortedPairs(cs) {
				want = append(want, datapath.PairReading{Pair: p, Counters: cs[p]})
			}
			buf, err = l.ReadPairs(buf)
			if err != nil {
				t.Fatal(err)
			}
			if len(buf) != tc.n || !slices.Equal(buf, want) {
				t.Errorf("ReadPairs %v, want %d pairs: %v", buf, tc.n, want)
			}
			if allocs := testing.AllocsPerRun(10, func() { buf, _ = l.ReadPairs(buf) }); allocs != 0 {
				t.Errorf("%v allocations per reading", allocs)
			}
		})
	}
}

func errorsOf(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestDevCounters: the device counters (statistics dump, names from
// the link dump kept while the link monitor reports no change) read
// each device's bytes as the netlink package's LinkList does, between
// two readings of it, and follow the devices as they come, go and are
// renamed.
func TestDevCounters(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	ns := testNS(t, prefix, "h")
	peer := testNS(t, prefix, "p")
	a, b := prefix+"va", prefix+"vb"
	if err := ns.AddVeth(a, peer, b); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		ns   *NS
		dev  string
		addr string
	}{{ns, a, "10.99.0.1/24"}, {peer, b, "10.99.0.2/24"}} {
		if err := x.ns.AddAddr(x.dev, netip.MustParsePrefix(x.addr)); err != nil {
			t.Fatal(err)
		}
		if err := x.ns.SetUp(x.dev); err != nil {
			t.Fatal(err)
		}
	}
	lib := func() map[string]datapath.DevCounters {
		ls, err := ns.Netlink().LinkList()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]datapath.DevCounters{}
		for _, l := range ls {
			if s := l.Attrs().Statistics; s != nil {
				out[l.Attrs().Name] = datapath.DevCounters{Rx: s.RxBytes, Tx: s.TxBytes}
			}
		}
		return out
	}
	ifb, renamed := prefix+"i", prefix+"j"
	tests := []struct {
		name   string
		change func() error
		has    []string // devices read
		hasnt  []string // devices not read
	}{
		{"first reading", func() error { return nil }, []string{"lo", a}, []string{ifb}},
		{"traffic", func() error { return ns.Do(func() error { return sendUDP("10.99.0.2:9", 10) }) }, []string{a}, nil},
		{"a device added", func() error { return ns.AddIFB(ifb) }, []string{a, ifb}, nil},
		{"renamed", func() error {
			if err := ns.Netlink().LinkSetDown(mustLink(t, ns, ifb)); err != nil {
				return err
			}
			return ns.Netlink().LinkSetName(mustLink(t, ns, ifb), renamed)
		}, []string{a, renamed}, []string{ifb}},
		{"deleted", func() error { return ns.DeleteLink(renamed) }, []string{a}, []string{ifb, renamed}},
		{"no change", func() error { return nil }, []string{a}, []string{ifb, renamed}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.change(); err != nil {
				t.Fatal(err)
			}
			before := lib()
			got, err := ns.DevCounters()
			if err != nil {
				t.Fatal(err)
			}
			after := lib()
			if len(got) != len(before) || len(got) != len(after) {
				t.Fatalf("devices %v, netlink package's %v", got, before)
			}
			for d, c := range got {
				lo, hi := before[d], after[d]
				if c.Rx < lo.Rx || c.Rx > hi.Rx || c.Tx < lo.Tx || c.Tx > hi.Tx {
					t.Errorf("%s: %+v, netlink package's %+v then %+v", d, c, lo, hi)
				}
			}
			for _, d := range tc.has {
				if _, ok := got[d]; !ok {
					t.Errorf("%s not read: %v", d, got)
				}
			}
			for _, d := range tc.hasnt {
				if _, ok := got[d]; ok {
					t.Errorf("%s read: %v", d, got)
				}
			}
			if tc.name == "traffic" && got[a].Tx == 0 {
				t.Errorf("no traffic counted on %s: %v", a, got)
			}
		})
	}
}

func mustLink(t *testing.T, ns *NS, name string) netlink.Link {
	t.Helper()
	l, err := ns.Netlink().LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// sendUDP sends n datagrams to addr (from the calling thread's
// namespace).
func sendUDP(addr string, n int) error {
	to, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	c, err := net.ListenPacket("udp", ":0")
	if err != nil {
		return err
	}
	defer c.Close()
	for range n {
		if _, err := c.WriteTo([]byte("bulkhead"), to); err != nil {
			return err
		}
	}
	return nil
}
