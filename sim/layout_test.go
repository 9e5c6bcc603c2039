package sim

import (
	"testing"
	"unsafe"
)

// A pair's record is whole cache lines, its groups of fields one line
// each (see pairState).
func TestPairStateLayout(t *testing.T) {
	var p pairState
	if n := unsafe.Sizeof(p); n != 384 {
		t.Errorf("pairState is %d bytes, want 384", n)
	}
	for _, f := range []struct {
		name string
		off  uintptr
	}{{"txBits", unsafe.Offsetof(p.txBits)}, {"rxBits", unsafe.Offsetof(p.rxBits)}, {"rate", unsafe.Offsetof(p.rate)},
		{"ctlBits", unsafe.Offsetof(p.ctlBits)}, {"links", unsafe.Offsetof(p.links)}} {
		if f.off%64 != 0 {
			t.Errorf("%s at offset %d, not at the start of a line", f.name, f.off)
		}
	}
}

// addTicks2 adds as two addTicks do, bit for bit.
func TestAddTicks2(t *testing.T) {
	x := []float64{0.1, 1e-17, 3.3, 1e16, 7, 0.7}
	for _, tc := range []struct {
		n      int
		pa, pb []int32
	}{{3, []int32{0, 1, 2}, []int32{3, 4}}, {5, []int32{5, 1}, []int32{0, 3, 2, 4, 1}}, {2, nil, []int32{1, 3}}, {4, []int32{2, 3}, nil}, {0, []int32{1}, []int32{2}}} {
		a, b := addTicks2(0.5, 1e-3, tc.n, tc.pa, tc.pb, x, x)
		wa, wb := addTicks(0.5, tc.n, tc.pa, x, false), addTicks(1e-3, tc.n, tc.pb, x, false)
		if a != wa || b != wb {
			t.Errorf("n %d %v %v: %v %v, want %v %v", tc.n, tc.pa, tc.pb, a, b, wa, wb)
		}
	}
}
