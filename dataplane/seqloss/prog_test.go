package seqloss

import (
	"encoding/binary"
	"net/netip"
	"slices"
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

const (
	offID    = 14 + 4
	offFrag  = 14 + 6
	offCsum  = 14 + 10
	ipHdrLen = 20
)

// frame builds an Ethernet + IPv4 + UDP frame with a valid header
// checksum.
func frame(src, dst string, id, frag uint16, payload int) []byte {
	b := make([]byte, 14+ipHdrLen+8+payload)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(ipHdrLen+8+payload))
	binary.BigEndian.PutUint16(ip[4:], id)
	binary.BigEndian.PutUint16(ip[6:], frag)
	ip[8] = 64
	ip[9] = 17
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:ipHdrLen]))
	binary.BigEndian.PutUint16(ip[ipHdrLen:], 5000)
	binary.BigEndian.PutUint16(ip[ipHdrLen+2:], 5001)
	binary.BigEndian.PutUint16(ip[ipHdrLen+4:], uint16(8+payload))
	return b
}

// ipChecksum is the Internet checksum of hdr with its checksum field
// taken as zero.
func ipChecksum(hdr []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(hdr[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func loadObjs(t *testing.T) *seqlossObjects {
	t.Helper()
	needRoot(t)
	objs, err := load(0, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = objs.Close() })
	return objs
}

// run runs prog on the frame (with gso_segs segs when > 0) and returns
// the frame as the program left it.
func run(t *testing.T, prog *ebpf.Program, in []byte, segs uint32) []byte {
	t.Helper()
	return runFrom(t, prog, in, segs, 0)
}

// runFrom is run for a packet that came in by the device of ifindex iif
// (skb->ingress_ifindex; 0: none).
func runFrom(t *testing.T, prog *ebpf.Program, in []byte, segs, iif uint32) []byte {
	t.Helper()
	out := make([]byte, len(in)+256)
	opts := &ebpf.RunOptions{Data: in, DataOut: out}
	if segs > 0 || iif > 0 {
		ctx := skbCtx{IngressIfindex: iif}
		if segs > 0 {
			ctx.GSOSegs, ctx.GSOSize = segs, 1000
		}
		opts.Context = ctx
	}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("run %v: %v", prog, err)
	}
	if int32(ret) != -1 {
		t.Fatalf("program returned %d, want TC_ACT_UNSPEC (-1)", int32(ret))
	}
	return opts.DataOut
}

func checkCsum(t *testing.T, what string, f []byte) {
	t.Helper()
	if got, want := binary.BigEndian.Uint16(f[offCsum:]), ipChecksum(f[14:14+ipHdrLen]); got != want {
		t.Errorf("%s: header checksum %#04x, want %#04x", what, got, want)
	}
}

// TestStampProgram: consecutive IDs per pair from 0, GSO packets take one
// number per segment, the mark is set, the checksum stays valid, and
// fragments and non-IPv4 frames are left alone.
func TestStampProgram(t *testing.T) {
	objs := loadObjs(t)
	a, b, c := "10.200.0.1", "10.200.0.3", "10.200.0.5"
	steps := []struct {
		src, dst string
		frag     uint16
		segs     uint32
		wantID   uint16
		wantFrag uint16
	}{
		{a, b, 0x4000, 0, 0, 0x4000 | Mark},
		{a, b, 0x4000, 0, 1, 0x4000 | Mark},
		{a, c, 0x0000, 0, 0, Mark}, // another pair has its own sequence
		{a, b, 0x4000, 10, 2, 0x4000 | Mark},
		{a, b, 0x4000, 1, 12, 0x4000 | Mark},
		{b, a, 0x4000, 0, 0, 0x4000 | Mark},
		{a, b, 0x2000, 0, 0x7777, 0x2000}, // first fragment: untouched
		{a, b, 0x0010, 0, 0x7777, 0x0010}, // later fragment: untouched
		{a, b, 0x4000 | Mark, 0, 13, 0x4000 | Mark},
	}
	for i, s := range steps {
		f := run(t, objs.SeqlossStamp, frame(s.src, s.dst, 0x7777, s.frag, 100), s.segs)
		id, frag := binary.BigEndian.Uint16(f[offID:]), binary.BigEndian.Uint16(f[offFrag:])
		if id != s.wantID || frag != s.wantFrag {
			t.Errorf("step %d (%s->%s frag %#04x): id %d frag %#04x, want id %d frag %#04x", i, s.src, s.dst, s.frag, id, frag, s.wantID, s.wantFrag)
		}
		checkCsum(t, "stamped", f)
	}
	// Not IPv4: untouched.
	arp := frame(a, b, 0x7777, 0x4000, 100)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	if f := run(t, objs.SeqlossStamp, arp, 0); binary.BigEndian.Uint16(f[offID:]) != 0x7777 {
		t.Error("a non-IPv4 frame was stamped")
	}
	var v seqlossTxVal
	k := seqlossPair{Src: netip.MustParseAddr(a).As4(), Dst: netip.MustParseAddr(b).As4()}
	if err := objs.SeqlossTx.Lookup(&k, &v); err != nil {
		t.Fatal(err)
	}
	if v.Packets != 5 || v.Segs != 14 {
		t.Errorf("%s->%s: %d packets, %d segments stamped; want 5, 14", a, b, v.Packets, v.Segs)
	}
	var per []seqlossStats
	if err := objs.SeqlossStats.Lookup(uint32(0), &per); err != nil {
		t.Fatal(err)
	}
	var frags uint64
	for _, s := range per {
		frags += s.Fragments
	}
	if frags != 2 {
		t.Errorf("%d fragments counted, want 2", frags)
	}
}

// TestCountProgram feeds sequences of stamped IDs to the count program and
// checks the pair's counters: in order, gaps, reordering, GSO packets,
// wrap-around, resynchronisation, unmarked packets and fragments.
func TestCountProgram(t *testing.T) {
	objs := loadObjs(t)
	type pkt struct {
		id     uint16
		segs   uint32 // 0: not GSO
		frag   uint16 // 0: DF | Mark
		noMark bool
	}
	seq := func(from, to uint16) []pkt { // from..to inclusive, wrapping
		var out []pkt
		for i := from; ; i++ {
			out = append(out, pkt{id: i})
			if i == to {
				return out
			}
		}
	}
	cat := func(ps ...[]pkt) []pkt {
		var out []pkt
		for _, p := range ps {
			out = append(out, p...)
		}
		return out
	}
	cases := []struct {
		name string
		pkts []pkt
		want Received
	}{
		{"in order", seq(0, 99), Received{Packets: 100, Segments: 100}},
		{"starts anywhere", seq(40000, 40009), Received{Packets: 10, Segments: 10}},
		{"one gap", cat(seq(0, 9), seq(15, 19)), Received{Packets: 15, Segments: 15, Gaps: 5}},
		{"several gaps", cat(seq(0, 0), seq(2, 2), seq(5, 9), seq(100, 100)),
			Received{Packets: 8, Segments: 8, Gaps: 1 + 2 + 90}},
		{"reordered", []pkt{{id: 0}, {id: 2}, {id: 1}, {id: 3}},
			Received{Packets: 4, Segments: 4, Gaps: 1, Late: 1}},
		{"duplicate", []pkt{{id: 0}, {id: 1}, {id: 1}, {id: 2}},
			Received{Packets: 4, Segments: 4, Late: 1}},
		{"wraps", seq(65530, 5), Received{Packets: 12, Segments: 12}},
		{"gap across the wrap", cat(seq(65530, 65533), seq(2, 3)),
			Received{Packets: 6, Segments: 6, Gaps: 4}},
		{"gso", []pkt{{id: 0, segs: 10}, {id: 10, segs: 5}, {id: 15}, {id: 26, segs: 4}, {id: 30}},
			Received{Packets: 5, Segments: 21, Gaps: 10}},
		{"largest gap", cat(seq(0, 0), seq(SeqWindow, SeqWindow)), Received{Packets: 2, Segments: 2, Gaps: SeqWindow - 1}},
		{"resync ahead", cat(seq(0, 0), seq(SeqWindow+1, SeqWindow+2)), Received{Packets: 3, Segments: 3, Resyncs: 1}},
		{"resync behind", cat(seq(20000, 20001), seq(0, 1)), Received{Packets: 4, Segments: 4, Resyncs: 1}},
		{"furthest late", cat(seq(SeqWindow, SeqWindow), seq(2, 2)), Received{Packets: 2, Segments: 2, Late: 1}},
		{"unmarked and fragments ignored", []pkt{{id: 0}, {id: 7, noMark: true}, {id: 9, frag: 0x2000 | Mark}, {id: 9, frag: 0x0001 | Mark}, {id: 1}},
			Received{Packets: 2, Segments: 2}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, dst := "10.201.0.1", netip.AddrFrom4([4]byte{10, 202, byte(i >> 8), byte(i)}).String()
			for _, p := range c.pkts {
				frag := p.frag
				if frag == 0 {
					frag = 0x4000 | Mark
				}
				if p.noMark {
					frag &^= Mark
				}
				f := run(t, objs.SeqlossCount, frame(src, dst, p.id, frag, 100), p.segs)
				checkCsum(t, "counted", f)
				if got := binary.BigEndian.Uint16(f[offFrag:]); frag&(0x2000|0x1fff) == 0 && got != frag&^Mark {
					t.Errorf("id %d: flags %#04x after the count program, want %#04x (mark cleared)", p.id, got, frag&^Mark)
				}
			}
			k := seqlossPair{Src: netip.MustParseAddr(src).As4(), Dst: netip.MustParseAddr(dst).As4()}
			var v seqlossRxVal
			if err := objs.SeqlossRx.LookupWithFlags(&k, &v, ebpf.LookupLock); err != nil {
				t.Fatal(err)
			}
			if got := receivedOf(v); got != c.want {
				t.Errorf("counters %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestStampThenCount: what the stamp program writes, the count program
// reads back: no gap for consecutive packets, one per packet dropped in
// between.
func TestStampThenCount(t *testing.T) {
	objs := loadObjs(t)
	src, dst := "10.203.0.1", "10.203.0.3"
	dropped := 0
	for i := range 1000 {
		f := run(t, objs.SeqlossStamp, frame(src, dst, uint16(i*7), 0x4000, 64), 0)
		if i%97 == 13 { // "lost" on the way
			dropped++
			continue
		}
		run(t, objs.SeqlossCount, f[:14+ipHdrLen+8+64], 0)
	}
	k := seqlossPair{Src: netip.MustParseAddr(src).As4(), Dst: netip.MustParseAddr(dst).As4()}
	var v seqlossRxVal
	if err := objs.SeqlossRx.LookupWithFlags(&k, &v, ebpf.LookupLock); err != nil {
		t.Fatal(err)
	}
	if int(v.Gaps) != dropped || v.Late != 0 || int(v.Packets) != 1000-dropped {
		t.Errorf("after %d of 1000 packets dropped: %+v", dropped, receivedOf(v))
	}
}

// TestMapsFull: with room for two pairs, a third pair's packets are left
// alone and counted in Stats; known pairs carry on.
func TestMapsFull(t *testing.T) {
	needRoot(t)
	objs, err := load(2, true)
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	pr := newProbe(nil, 0, objs)
	dsts := []string{"10.204.0.1", "10.204.0.2", "10.204.0.3"}
	for round := range 2 {
		for i, d := range dsts {
			f := run(t, objs.SeqlossStamp, frame("10.204.1.1", d, 0x7777, 0x4000, 64), 0)
			id, frag := binary.BigEndian.Uint16(f[offID:]), binary.BigEndian.Uint16(f[offFrag:])
			if i < 2 && (id != uint16(round) || frag&Mark == 0) {
				t.Errorf("pair %d round %d: id %d flags %#04x, want stamped %d", i, round, id, frag, round)
			}
			if i == 2 && (id != 0x7777 || frag&Mark != 0) {
				t.Errorf("third pair stamped (id %d flags %#04x) in a full map", id, frag)
			}
			run(t, objs.SeqlossCount, frame("10.204.2.1", d, uint16(round), 0x4000|Mark, 64), 0)
		}
	}
	st, err := pr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.TxFull != 2 || st.RxFull != 2 || st.RxUnmarked != 0 {
		t.Errorf("stats %+v, want 2 packets refused by each full map", st)
	}
	sent, err := pr.Sent()
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := pr.Received()
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || len(rcv) != 2 {
		t.Errorf("%d pairs stamped, %d counted; want 2 and 2", len(sent), len(rcv))
	}
	// Forget frees a slot for the third pair.
	gone := dataplane.Pair{Src: netip.MustParseAddr("10.204.2.1"), Dst: netip.MustParseAddr(dsts[0])}
	if err := pr.Forget(gone); err != nil {
		t.Fatal(err)
	}
	run(t, objs.SeqlossCount, frame("10.204.2.1", dsts[2], 5, 0x4000|Mark, 64), 0)
	if r, err := pr.ReceivedPair(dataplane.Pair{Src: netip.MustParseAddr("10.204.2.1"), Dst: netip.MustParseAddr(dsts[2])}); err != nil || r.Packets != 1 {
		t.Errorf("after Forget, the third pair: %+v, %v", r, err)
	}
	if r, err := pr.ReceivedPair(gone); err != nil || r != (Received{}) {
		t.Errorf("forgotten pair: %+v, %v", r, err)
	}
}

// declaredProbe loads the programs in declared-only mode (maxPairs 0:
// DefaultMaxPairs) with the devices of ifindexes uplinks as the stamp
// program's, as a server's probe has them once attached.
func declaredProbe(t *testing.T, maxPairs uint32, uplinks ...uint32) *Probe {
	t.Helper()
	needRoot(t)
	objs, err := load(maxPairs, false)
	if err != nil {
		t.Fatal(err)
	}
	pr := newProbe(nil, 0, objs)
	t.Cleanup(func() { _ = pr.Close() })
	for _, u := range uplinks {
		if err := pr.addStampDev(u); err != nil {
			t.Fatal(err)
		}
	}
	return pr
}

func mustPair(src, dst string) dataplane.Pair {
	return dataplane.Pair{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst)}
}

// idFlags returns a frame's IP ID and flags field.
func idFlags(f []byte) (uint16, uint16) {
	return binary.BigEndian.Uint16(f[offID:]), binary.BigEndian.Uint16(f[offFrag:])
}

// TestDeclaredOnlyBounded: in declared-only mode, a VM that sends to
// more destinations than the maps hold (DefaultMaxPairs + 904, each
// packet with the mark and an ID of its own on every other one), and
// as many sources that send marked packets to a VM of the receiving
// server, fill neither map: none of their packets is stamped or
// counted, every one leaves without the mark, and the stats count them.
// A pair declared before the flood and one declared after it are both
// stamped from 0, and the receiver counts exactly the packets dropped
// between the two programs as their gaps.
func TestDeclaredOnlyBounded(t *testing.T) {
	const uplink, vmDev = 7, 9 // ifindexes: the servers' uplinks, the sending VM's device
	tx, rx := declaredProbe(t, 0, uplink), declaredProbe(t, 0, uplink)
	a, b := "10.210.0.1", "10.210.0.3"
	before, after := mustPair(a, b), mustPair(a, "10.210.0.5")
	if err := tx.DeclareStamp("", before); err != nil { // "": any device
		t.Fatal(err)
	}
	if err := rx.DeclareCount(before); err != nil {
		t.Fatal(err)
	}
	const flood = DefaultMaxPairs + 904
	for i := range flood {
		other := netip.AddrFrom4([4]byte{10, 211, byte(i >> 8), byte(i)}).String()
		frag := uint16(0x4000)
		if i%2 == 1 {
			frag |= Mark // the VM's own mark: not a number
		}
		f := runFrom(t, tx.objs.SeqlossStamp, frame(a, other, 0x1234, frag, 64), 0, vmDev)
		if id, fl := idFlags(f); id != 0x1234 || fl != 0x4000 {
			t.Fatalf("undeclared pair %s->%s: id %#04x flags %#04x after the stamp program, want %#04x and %#04x (not stamped, no mark)", a, other, id, fl, 0x1234, 0x4000)
		}
		checkCsum(t, "not stamped", f)
		f = runFrom(t, rx.objs.SeqlossCount, frame(other, b, uint16(i), 0x4000|Mark, 64), 0, uplink)
		if _, fl := idFlags(f); fl != 0x4000 {
			t.Fatalf("undeclared pair %s->%s: flags %#04x after the count program, want the mark cleared", other, b, fl)
		}
	}
	if err := tx.DeclareStamp("", after); err != nil {
		t.Fatalf("declare a pair after the flood: %v", err)
	}
	if err := rx.DeclareCount(after); err != nil {
		t.Fatalf("declare a pair after the flood: %v", err)
	}
	for _, pair := range []dataplane.Pair{before, after} {
		dropped := 0
		for i := range 200 {
			f := runFrom(t, tx.objs.SeqlossStamp, frame(pair.Src.String(), pair.Dst.String(), 0x7777, 0x4000, 64), 0, vmDev)
			if id, fl := idFlags(f); id != uint16(i) || fl != 0x4000|Mark {
				t.Fatalf("%s packet %d: id %d flags %#04x, want stamped %d", pair, i, id, fl, i)
			}
			if i%17 == 5 { // lost on the way
				dropped++
				continue
			}
			runFrom(t, rx.objs.SeqlossCount, f[:14+ipHdrLen+8+64], 0, uplink)
		}
		r, err := rx.ReceivedPair(pair)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Received{Packets: uint64(200 - dropped), Segments: uint64(200 - dropped), Gaps: uint64(dropped)}); r != want {
			t.Errorf("%s: received %+v, want %+v", pair, r, want)
		}
	}
	sent, err := tx.Sent()
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := rx.Received()
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[before].Packets != 200 || sent[after].Packets != 200 || len(rcv) != 2 {
		t.Errorf("stamped %v, counted %d pairs; want the two declared pairs only", sent, len(rcv))
	}
	ts, err := tx.Stats()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rx.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if ts.TxUndeclared != flood || ts.TxFull != 0 || rs.RxUndeclared != flood || rs.RxFull != 0 {
		t.Errorf("sender %+v, receiver %+v; want %d packets of undeclared pairs at each, none refused by a full map", ts, rs, flood)
	}
}

// TestForgedSourceNotStamped: a packet with the source address of a VM
// whose pair is declared, sent by another VM of the server (it comes in
// by another device), is not stamped from that pair's numbering and
// leaves without a mark even if it had one; one whose source is no VM
// of the server (its pair is not declared) neither; a marked packet
// from a VM of the receiving server (it did not arrive by an uplink)
// is not counted. The declared pair's numbering and counts go on as if
// they had not been sent: no gap, nothing late, no resynchronisation.
func TestForgedSourceNotStamped(t *testing.T) {
	const uplink, devA, devC, devD = 7, 9, 11, 13 // ifindexes; a and c on the sender's server, d on the receiver's
	tx, rx := declaredProbe(t, 0, uplink), declaredProbe(t, 0, uplink)
	a, b := "10.212.0.1", "10.212.0.3"
	pair := mustPair(a, b)
	if err := tx.declareStamp(devA, pair); err != nil {
		t.Fatal(err)
	}
	if err := rx.DeclareCount(pair); err != nil {
		t.Fatal(err)
	}
	next := uint16(0)
	genuine := func(n int) {
		t.Helper()
		for range n {
			f := runFrom(t, tx.objs.SeqlossStamp, frame(a, b, 0, 0x4000, 64), 0, devA)
			if id, fl := idFlags(f); id != next || fl != 0x4000|Mark {
				t.Fatalf("a's packet: id %d flags %#04x, want stamped %d", id, fl, next)
			}
			next++
			runFrom(t, rx.objs.SeqlossCount, f[:14+ipHdrLen+8+64], 0, uplink)
		}
	}
	genuine(10)
	forged := []struct {
		what     string
		src      string
		iif      uint32
		id, frag uint16
	}{
		{"c as a", a, devC, 10 + 9000, 0x4000},
		{"c as a, marked", a, devC, 10 + 16000, 0x4000 | Mark},
		{"the server as a", a, 0, 10 + 5000, 0x4000 | Mark},
		{"c as another server's VM", "10.212.0.9", devC, 3, 0x4000 | Mark},
	}
	for _, fg := range forged {
		f := runFrom(t, tx.objs.SeqlossStamp, frame(fg.src, b, fg.id, fg.frag, 64), 0, fg.iif)
		if id, fl := idFlags(f); id != fg.id || fl != 0x4000 {
			t.Errorf("%s: id %d flags %#04x after the stamp program, want %d %#04x (not stamped, no mark)", fg.what, id, fl, fg.id, 0x4000)
		}
		checkCsum(t, fg.what, f)
		runFrom(t, rx.objs.SeqlossCount, f[:14+ipHdrLen+8+64], 0, uplink)
	}
	// A VM on the receiver's server marks its packets as a's, far
	// ahead: they never crossed a stamp program.
	for i := range 3 {
		f := runFrom(t, rx.objs.SeqlossCount, frame(a, b, next+uint16(1000*(i+1)), 0x4000|Mark, 64), 0, devD)
		if _, fl := idFlags(f); fl != 0x4000 {
			t.Errorf("a packet from %d: flags %#04x after the count program, want the mark cleared", devD, fl)
		}
	}
	genuine(10)
	r, err := rx.ReceivedPair(pair)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Received{Packets: 20, Segments: 20}); r != want {
		t.Errorf("%s received %+v, want %+v: the forged packets counted", pair, r, want)
	}
	if s, err := tx.Sent(); err != nil || s[pair] != (Sent{Packets: 20, Segments: 20}) {
		t.Errorf("%s sent %+v (%v), want 20 packets", pair, s[pair], err)
	}
	ts, _ := tx.Stats()
	rs, _ := rx.Stats()
	if ts.TxForeign != 3 || ts.TxUndeclared != 1 || rs.RxForeign != 3 || rs.RxUnmarked != 4 {
		t.Errorf("sender %+v, receiver %+v; want 3 foreign and 1 undeclared at the sender, 3 foreign and 4 unmarked at the receiver", ts, rs)
	}
}

// TestDeclare: declaring, undeclaring and forgetting pairs: the
// declared-only program stamps a pair from when it is declared until it
// is undeclared; Forget starts a declared pair afresh and keeps it
// declared; a pair cannot be declared from two devices, nor beyond
// MaxPairs.
func TestDeclare(t *testing.T) {
	pr := declaredProbe(t, 2, 7)
	p1, p2, p3 := mustPair("10.213.0.1", "10.213.0.3"), mustPair("10.213.0.1", "10.213.0.5"), mustPair("10.213.0.1", "10.213.0.7")
	stamp := func(p dataplane.Pair) uint16 {
		f := run(t, pr.objs.SeqlossStamp, frame(p.Src.String(), p.Dst.String(), 0x7777, 0x4000, 64), 0)
		return binary.BigEndian.Uint16(f[offID:])
	}
	if id := stamp(p1); id != 0x7777 {
		t.Errorf("undeclared pair stamped %d", id)
	}
	if err := pr.DeclareStamp("", p1, p2); err != nil {
		t.Fatal(err)
	}
	if err := pr.DeclareStamp("", p1); err != nil {
		t.Errorf("declare again: %v", err)
	}
	if err := pr.declareStamp(9, p1); err == nil {
		t.Error("a pair declared from two devices")
	}
	if err := pr.DeclareStamp("", p3); err == nil || !strings.Contains(err.Error(), "MaxPairs") {
		t.Errorf("a third pair declared with MaxPairs 2: %v", err)
	}
	if err := pr.DeclareCount(p1, p2); err != nil {
		t.Fatal(err)
	}
	if err := pr.DeclareCount(p3); err == nil {
		t.Error("a third pair declared counted with MaxPairs 2")
	}
	for i := range 3 {
		if id := stamp(p1); id != uint16(i) {
			t.Errorf("declared pair: id %d, want %d", id, i)
		}
	}
	if err := pr.Forget(p1); err != nil {
		t.Fatal(err)
	}
	if id := stamp(p1); id != 0 {
		t.Errorf("after Forget: id %d, want 0 (afresh)", id)
	}
	if got := pr.Declared(Stamp); !slices.Equal(got, []dataplane.Pair{p1, p2}) {
		t.Errorf("declared %v after Forget, want %v", got, []dataplane.Pair{p1, p2})
	}
	if err := pr.Undeclare(Stamp, p1); err != nil {
		t.Fatal(err)
	}
	if err := pr.Undeclare(Stamp, p1); err != nil {
		t.Errorf("undeclare again: %v", err)
	}
	if id := stamp(p1); id != 0x7777 {
		t.Errorf("undeclared pair stamped %d", id)
	}
	if err := pr.DeclareStamp("", p3); err != nil {
		t.Errorf("declare in the room an undeclared pair left: %v", err)
	}
	if got := pr.Declared(Count); !slices.Equal(got, []dataplane.Pair{p1, p2}) {
		t.Errorf("declared counted %v, want %v", got, []dataplane.Pair{p1, p2})
	}
}
