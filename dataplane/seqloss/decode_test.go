package seqloss

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/bulkhead-dc/bulkhead/dataplane"
)

func TestPairKeyDecoding(t *testing.T) {
	cases := []struct {
		raw      [8]byte // the key as the program writes it: source, destination in network order
		src, dst string
	}{
		{[8]byte{10, 200, 0, 1, 10, 200, 0, 3}, "10.200.0.1", "10.200.0.3"},
		{[8]byte{192, 168, 255, 254, 0, 0, 0, 1}, "192.168.255.254", "0.0.0.1"},
		{[8]byte{255, 255, 255, 255, 1, 2, 3, 4}, "255.255.255.255", "1.2.3.4"},
	}
	if unsafe.Sizeof(seqlossPair{}) != 8 {
		t.Fatalf("key size %d, want 8", unsafe.Sizeof(seqlossPair{}))
	}
	for _, c := range cases {
		k := *(*seqlossPair)(unsafe.Pointer(&c.raw))
		want := dataplane.Pair{Src: netip.MustParseAddr(c.src), Dst: netip.MustParseAddr(c.dst)}
		if got := pairOf(k); got != want {
			t.Errorf("key % x decodes to %s, want %s", c.raw, got, want)
		}
		back, err := keyOf(want)
		if err != nil || back != k {
			t.Errorf("%s encodes to %+v (%v), want %+v", want, back, err, k)
		}
	}
	for _, bad := range []dataplane.Pair{{}, {Src: netip.MustParseAddr("::1"), Dst: netip.MustParseAddr("10.0.0.1")}} {
		if _, err := keyOf(bad); err == nil {
			t.Errorf("pair %s encoded", bad)
		}
	}
}

func TestCounterDecoding(t *testing.T) {
	// struct rx_val as the kernel lays it out (little-endian hosts): lock,
	// next, then five u64 counters; struct tx_val: two u64 counters, the
	// ifindex declared and padding; struct stats: eight u64 counters.
	if unsafe.Sizeof(seqlossRxVal{}) != 48 || unsafe.Sizeof(seqlossTxVal{}) != 24 || unsafe.Sizeof(seqlossStats{}) != 64 {
		t.Fatalf("value sizes %d, %d, %d; want 48, 24, 64", unsafe.Sizeof(seqlossRxVal{}), unsafe.Sizeof(seqlossTxVal{}), unsafe.Sizeof(seqlossStats{}))
	}
	var raw [48]byte
	binary.NativeEndian.PutUint32(raw[0:], 0xdead) // lock word: ignored
	binary.NativeEndian.PutUint32(raw[4:], 77)     // next expected
	for i, v := range []uint64{1000, 1400, 30, 4, 1} {
		binary.NativeEndian.PutUint64(raw[8+8*i:], v)
	}
	v := *(*seqlossRxVal)(unsafe.Pointer(&raw))
	want := Received{Packets: 1000, Segments: 1400, Gaps: 30, Late: 4, Resyncs: 1}
	if got := receivedOf(v); got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
	var traw [24]byte
	binary.NativeEndian.PutUint64(traw[0:], 1400)
	binary.NativeEndian.PutUint64(traw[8:], 1000)
	binary.NativeEndian.PutUint32(traw[16:], 9)
	tv := *(*seqlossTxVal)(unsafe.Pointer(&traw))
	if got := sentOf(tv); got != (Sent{Packets: 1000, Segments: 1400}) || tv.Ifindex != 9 {
		t.Errorf("decoded %+v, ifindex %d", got, tv.Ifindex)
	}
}

func TestLost(t *testing.T) {
	cases := []struct {
		prev, now Received
		want      uint64
	}{
		{Received{}, Received{Gaps: 10}, 10},
		{Received{Gaps: 10}, Received{Gaps: 25, Late: 5}, 10},
		{Received{Gaps: 10, Late: 2}, Received{Gaps: 10, Late: 3}, 0}, // a packet of an earlier gap arrived late
		{Received{Gaps: 5}, Received{Gaps: 5}, 0},
		{Received{Gaps: 50, Late: 4}, Received{Gaps: 3}, 3}, // counters restarted: not 2^64
	}
	for _, c := range cases {
		if got := c.now.Lost(c.prev); got != c.want {
			t.Errorf("%+v since %+v: lost %d, want %d", c.now, c.prev, got, c.want)
		}
	}
}
