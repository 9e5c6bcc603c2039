package drive

import (
	"testing"
	"unsafe"
)

// A desired limit is two cache lines, its limit the first (see desired).
func TestDesiredLayout(t *testing.T) {
	var d desired
	if n := unsafe.Sizeof(d); n != 128 {
		t.Errorf("desired is %d bytes, want 128", n)
	}
	if off := unsafe.Offsetof(d.step); off != 64 {
		t.Errorf("desired.step at offset %d, want 64 (after the limit)", off)
	}
}
