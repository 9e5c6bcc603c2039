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
