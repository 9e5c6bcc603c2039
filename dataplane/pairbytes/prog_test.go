package pairbytes

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/bulkhead-dc/bulkhead/dataplane"
)

// needRoot skips in -short mode and fails (never skips) without root: CI
// runs as root and these tests must run there.
func needRoot(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs root (BPF programs, namespaces): skipped in -short mode")
	}
	if err := dataplane.RequireRoot(); err != nil {
		tb.Fatalf("test needs root: %v", err)
	}
}

// skbCtx is the prefix of struct __sk_buff up to gso_size, the context
// BPF_PROG_TEST_RUN takes (fields it does not accept stay zero).
type skbCtx struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTCI, VlanProto uint32
	Priority, IngressIfindex, Ifindex, TCIndex                                  uint32
	CB                                                                          [5]uint32
	Hash, TCClassid, Data, DataEnd, NapiID                                      uint32
	Family, RemoteIP4, LocalIP4                                                 uint32
	RemoteIP6, LocalIP6                                                         [4]uint32
	RemotePort, LocalPort, DataMeta                                             uint32
	FlowKeys, Tstamp                                                            uint64
	WireLen, GSOSegs                                                            uint32
	Sk                                                                          uint64
	GSOSize                                                                     uint32
	_                                                                           uint32
}

// frame builds an Ethernet + IPv4 frame carrying a UDP (proto 17) or TCP
// (proto 6, data offset tcpWords) header and payload bytes; ihlWords is
// the IP header's length in 32-bit words (5: no options).
func frame(src, dst string, proto uint8, ihlWords, tcpWords int, payload int) []byte {
	l4 := 8
	if proto == 6 {
		l4 = 4 * tcpWords
	}
	ipLen := 4*ihlWords + l4 + payload
	b := make([]byte, 14+ipLen)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0] = 0x40 | byte(ihlWords)
	binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
	ip[8] = 64
	ip[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	t := ip[4*ihlWords:]
	binary.BigEndian.PutUint16(t[0:], 5000)
	binary.BigEndian.PutUint16(t[2:], 5001)
	if proto == 6 {
		t[12] = byte(tcpWords << 4)
	} else {
		binary.BigEndian.PutUint16(t[4:], uint16(l4+payload))
	}
	return b
}

// arp is an Ethernet frame carrying an ARP request (60 bytes, padded).
func arp() []byte {
	b := make([]byte, 60)
	binary.BigEndian.PutUint16(b[12:], 0x0806)
	return b
}

// badVersion sets the IP version of an IPv4 frame to 6.
func badVersion(f []byte) []byte {
	f[14] = 0x60 | f[14]&0x0f
	return f
}

func loadObjs(t *testing.T, maxPairs uint32) *pairbytesObjects {
	t.Helper()
	needRoot(t)
	objs, err := load(maxPairs, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = objs.Close() })
	return objs
}

// run runs the program on the frame (a GSO packet of segs segments when
// segs > 0) and checks that it passed the frame on unchanged.
func run(t *testing.T, prog *ebpf.Program, in []byte, segs uint32) {
	t.Helper()
	out := make([]byte, len(in)+256)
	opts := &ebpf.RunOptions{Data: in, DataOut: out}
	if segs > 0 {
		opts.Context = skbCtx{GSOSegs: segs, GSOSize: 1000}
	}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("run %v: %v", prog, err)
	}
	if int32(ret) != -1 {
		t.Fatalf("program returned %d, want TC_ACT_UNSPEC (-1)", int32(ret))
	}
	if !bytes.Equal(opts.DataOut, in) {
		t.Errorf("the program changed the frame:\n in  %x\n out %x", in, opts.DataOut)
	}
}

func readAll(t *testing.T, objs *pairbytesObjects) (map[Pair]Counts, Stats) {
	t.Helper()
	c := &Counter{objs: objs, dev: "test"}
	pairs, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return pairs, st
}

func pair(src, dst string) Pair {
	return Pair{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst)}
}

// TestCountProgram: each IPv4 packet is counted under its (source,
// destination) pair with its length including the Ethernet header; a GSO
// packet counts its segments and its headers once per segment in
// SegBytes; other frames are counted apart; nothing is changed.
func TestCountProgram(t *testing.T) {
	objs := loadObjs(t, 0)
	a, b, c := "10.200.0.1", "10.200.0.3", "10.200.0.5"
	steps := []struct {
		frame []byte
		segs  uint32
	}{
		{frame(a, b, 17, 5, 0, 972), 0},             // 14+20+8+972 = 1014
		{frame(a, b, 17, 5, 0, 10), 0},              // 52
		{frame(b, a, 17, 5, 0, 100), 0},             // the reverse is another pair: 142
		{frame(c, b, 6, 5, 8, 3000), 3},             // TCP GSO, 3 segments, headers 14+20+32
		{frame(c, b, 6, 6, 5, 2000), 2},             // IP options: headers 14+24+20
		{frame(c, b, 17, 5, 0, 2000), 2},            // UDP GSO: headers 14+20+8
		{frame(c, b, 47, 5, 0, 100), 0},             // another protocol, not GSO
		{arp(), 0},                                  // not IPv4
		{badVersion(frame(a, c, 17, 5, 0, 100)), 0}, // not version 4: not counted as a pair
	}
	for _, s := range steps {
		run(t, objs.PairbytesCount, s.frame, s.segs)
	}
	pairs, st := readAll(t, objs)
	want := map[Pair]Counts{
		pair(a, b): {Bytes: 1014 + 52, Packets: 2, Segments: 2, SegBytes: 1014 + 52},
		pair(b, a): {Bytes: 142, Packets: 1, Segments: 1, SegBytes: 142},
		pair(c, b): {
			Bytes:    (14 + 20 + 32 + 3000) + (14 + 24 + 20 + 2000) + (14 + 20 + 8 + 2000) + (14 + 20 + 8 + 100),
			Packets:  4,
			Segments: 3 + 2 + 2 + 1,
			SegBytes: (14 + 20 + 32 + 3000 + 2*66) + (14 + 24 + 20 + 2000 + 58) + (14 + 20 + 8 + 2000 + 42) + (14 + 20 + 8 + 100),
		},
	}
	if len(pairs) != len(want) {
		t.Errorf("pairs %v, want %v", pairs, want)
	}
	for p, w := range want {
		if got := pairs[p]; got != w {
			t.Errorf("pair %s: %+v, want %+v", p, got, w)
		}
	}
	wantOther := Counts{Bytes: 60 + 142, Packets: 2, Segments: 2, SegBytes: 60 + 142}
	if st.Other != wantOther || st.Overflow != (Counts{}) {
		t.Errorf("stats %+v, want other %+v and no overflow", st, wantOther)
	}
}

// TestOverflow: pairs beyond the map's size are counted in Overflow, and
// the pairs already in the map go on being counted.
func TestOverflow(t *testing.T) {
	objs := loadObjs(t, 2)
	a, b, c, d := "10.200.0.1", "10.200.0.3", "10.200.0.5", "10.200.0.7"
	for _, f := range [][]byte{
		frame(a, b, 17, 5, 0, 100),
		frame(a, c, 17, 5, 0, 100),
		frame(a, d, 17, 5, 0, 200), // the map is full
		frame(b, a, 17, 5, 0, 300), // still full
		frame(a, b, 17, 5, 0, 100), // a pair in the map
	} {
		run(t, objs.PairbytesCount, f, 0)
	}
	pairs, st := readAll(t, objs)
	one := Counts{Bytes: 142, Packets: 1, Segments: 1, SegBytes: 142}
	if len(pairs) != 2 || pairs[pair(a, b)] != one.Add(one) || pairs[pair(a, c)] != one {
		t.Errorf("pairs %v", pairs)
	}
	wantOver := Counts{Bytes: 242 + 342, Packets: 2, Segments: 2, SegBytes: 242 + 342}
	if st.Overflow != wantOver || st.Other != (Counts{}) {
		t.Errorf("stats %+v, want overflow %+v", st, wantOver)
	}
}

// TestReadManyPairs: a map of more pairs than one batch read returns
// reads whole.
func TestReadManyPairs(t *testing.T) {
	const n = 3*batchSize + 17
	objs := loadObjs(t, n)
	want := map[Pair]Counts{}
	for i := range n {
		src, dst := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), netip.AddrFrom4([4]byte{10, 2, 0, 1})
		size := 100 + i%50
		for range 1 + i%3 {
			run(t, objs.PairbytesCount, frame(src.String(), dst.String(), 17, 5, 0, size), 0)
		}
		b := uint64(14 + 20 + 8 + size)
		k := uint64(1 + i%3)
		want[Pair{Src: src, Dst: dst}] = Counts{Bytes: k * b, Packets: k, Segments: k, SegBytes: k * b}
	}
	pairs, st := readAll(t, objs)
	if len(pairs) != n {
		t.Errorf("read %d pairs, want %d", len(pairs), n)
	}
	for p, w := range want {
		if pairs[p] != w {
			t.Errorf("pair %s: %+v, want %+v", p, pairs[p], w)
		}
	}
	if st != (Stats{}) {
		t.Errorf("stats %+v, want none", st)
	}
}

// TestDeclaredPairs: a declared pair is counted in its slot from zero,
// read through the mapped array; with DeclaredOnly the packets of pairs
// not declared are overflow, without it they get entries of their own;
// an undeclared pair's slot is reused from zero; declaring more pairs than
// MaxPairs is refused and leaves the declared pairs counted.
func TestDeclaredPairs(t *testing.T) {
	a, b, c := "10.200.0.1", "10.200.0.3", "10.200.0.5"
	one := func(n uint64) Counts { return Counts{Bytes: n, Packets: 1, Segments: 1, SegBytes: n} }
	for _, learn := range []bool{false, true} {
		needRoot(t)
		objs, err := load(2, learn)
		if err != nil {
			t.Fatal(err)
		}
		defer objs.Close()
		mem, err := objs.PairbytesDeclared.Memory()
		if err != nil {
			t.Fatal(err)
		}
		ctr := &Counter{objs: objs, dev: "test", decl: declared{mem: mem}}
		declaredCounts := func() map[Pair]Counts {
			t.Helper()
			m := map[Pair]Counts{}
			if err := ctr.EachDeclared(func(p Pair, n Counts) { m[p] = n }); err != nil {
				t.Fatal(err)
			}
			return m
		}
		if err := ctr.Declare(pair(a, b)); err != nil {
			t.Fatal(err)
		}
		if err := ctr.Declare(pair(a, b)); err != nil {
			t.Fatalf("declared twice: %v", err)
		}
		run(t, objs.PairbytesCount, frame(a, b, 17, 5, 0, 100), 0) // 142 bytes
		run(t, objs.PairbytesCount, frame(a, b, 17, 5, 0, 100), 0)
		run(t, objs.PairbytesCount, frame(b, a, 17, 5, 0, 200), 0) // not declared: 242
		got := declaredCounts()
		if len(got) != 1 || got[pair(a, b)] != one(142).Add(one(142)) {
			t.Errorf("learn=%v: declared %v, want only %s at two packets of 142", learn, got, pair(a, b))
		}
		all, st := readAll(t, objs)
		// readAll's Counter has no declared pairs: the learned ones only.
		if learn {
			if len(all) != 1 || all[pair(b, a)] != one(242) || st.Overflow != (Counts{}) {
				t.Errorf("learn: learned %v and overflow %+v, want %s at 242 and none", all, st.Overflow, pair(b, a))
			}
		} else if len(all) != 0 || st.Overflow != one(242) {
			t.Errorf("declared only: learned %v and overflow %+v, want none and 242", all, st.Overflow)
		}
		if r, err := ctr.Read(); err != nil || r[pair(a, b)] != one(142).Add(one(142)) {
			t.Errorf("learn=%v: Read %v (%v), want the declared pair in it", learn, r, err)
		}

		// The slot of an undeclared pair is reused from zero.
		if err := ctr.Undeclare(pair(a, b)); err != nil {
			t.Fatal(err)
		}
		if err := ctr.Undeclare(pair(a, b)); err != nil {
			t.Fatalf("undeclared twice: %v", err)
		}
		if err := ctr.Declare(pair(c, b)); err != nil {
			t.Fatal(err)
		}
		run(t, objs.PairbytesCount, frame(c, b, 17, 5, 0, 10), 0) // 52
		if got := declaredCounts(); len(got) != 1 || got[pair(c, b)] != one(52) {
			t.Errorf("learn=%v: after reuse %v, want only %s at 52", learn, got, pair(c, b))
		}
		if len(ctr.decl.bySlot) != 1 {
			t.Errorf("slots in use %d, want the freed one reused", len(ctr.decl.bySlot))
		}

		// MaxPairs 2: a third pair is refused; the others still count.
		if err := ctr.Declare(pair(a, c)); err != nil {
			t.Fatal(err)
		}
		if err := ctr.Declare(pair(b, c)); err == nil || !strings.Contains(err.Error(), "MaxPairs") {
			t.Errorf("a third pair with MaxPairs 2: %v, want it refused", err)
		}
		if err := ctr.Declare(Pair{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr(b)}); err == nil {
			t.Error("an IPv6 pair was declared")
		}
		run(t, objs.PairbytesCount, frame(a, c, 17, 5, 0, 10), 0)
		if got := declaredCounts(); len(got) != 2 || got[pair(a, c)] != one(52) || got[pair(c, b)] != one(52) {
			t.Errorf("learn=%v: %v, want %s and %s at 52", learn, got, pair(a, c), pair(c, b))
		}
	}
}
