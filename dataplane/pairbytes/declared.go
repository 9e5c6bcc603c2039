package pairbytes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
)

// declared is a Counter's declared pairs: each has a slot of the
// pairbytes_declared array, which the program adds the pair's packets to
// and which is read through a mapping of the array into this process's
// memory.
type declared struct {
	mem    *ebpf.Memory
	slot   map[Pair]uint32
	bySlot []Pair // the pair at each slot (the zero Pair: free)
	free   []uint32
	buf    []byte
}

// countsSize is the size of one slot: four 64-bit counters.
const countsSize = int(unsafe.Sizeof(pairbytesCounts{}))

// Declare asks for p to be counted in a slot of its own, from zero. A
// pair declared already keeps its slot and counts. It is an error when
// MaxPairs pairs are declared, or p is not a pair of IPv4 addresses.
func (c *Counter) Declare(p Pair) error {
	return c.locked(func() error { return c.declare(p) })
}

// declare is Declare with the locks held.
func (c *Counter) declare(p Pair) error {
	d := &c.decl
	if _, ok := d.slot[p]; ok {
		return nil
	}
	if !p.Src.Is4() || !p.Dst.Is4() {
		return fmt.Errorf("pairbytes: declare %v on %s: not a pair of IPv4 addresses", p, c.dev)
	}
	s, reuse := uint32(len(d.bySlot)), len(d.free) > 0
	switch {
	case reuse:
		s = d.free[len(d.free)-1]
	case s >= c.objs.PairbytesDeclared.MaxEntries():
		return fmt.Errorf("pairbytes: declare %v on %s: %d pairs are declared, the most the counter holds (MaxPairs)", p, c.dev, len(d.bySlot))
	}
	// The slot starts at zero (a pair undeclared from it may have left
	// counts), then the program is told.
	if err := c.objs.PairbytesDeclared.Update(s, pairbytesCounts{}, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("pairbytes: declare %v on %s: clear slot %d: %w", p, c.dev, s, err)
	}
	if err := c.objs.PairbytesSlots.Update(keyOf(p), s, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("pairbytes: declare %v on %s: %w", p, c.dev, err)
	}
	if d.slot == nil {
		d.slot = make(map[Pair]uint32)
	}
	d.slot[p] = s
	if reuse {
		d.free = d.free[:len(d.free)-1]
		d.bySlot[s] = p
	} else {
		d.bySlot = append(d.bySlot, p)
	}
	return nil
}

// Undeclare stops counting p in a slot of its own (a pair not declared
// is not an error). Its packets then count as any pair's not declared.
func (c *Counter) Undeclare(p Pair) error {
	return c.locked(func() error { return c.undeclare(p) })
}

// undeclare is Undeclare with the locks held.
func (c *Counter) undeclare(p Pair) error {
	d := &c.decl
	s, ok := d.slot[p]
	if !ok {
		return nil
	}
	if err := c.objs.PairbytesSlots.Delete(keyOf(p)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("pairbytes: undeclare %v on %s: %w", p, c.dev, err)
	}
	delete(d.slot, p)
	d.bySlot[s] = Pair{}
	d.free = append(d.free, s)
	return nil
}

// EachDeclared gives each declared pair's counts to fn, in the order of
// their slots: one copy of the slots out of the mapped array, no system
// call, no allocation once the buffer has grown to the declared pairs.
// As with Each, a packet being counted may have some of its fields in
// and not yet the others.
func (c *Counter) EachDeclared(fn func(Pair, Counts)) error {
	return c.locked(func() error { return c.eachDeclared(fn) })
}

// eachDeclared is EachDeclared with the locks held.
func (c *Counter) eachDeclared(fn func(Pair, Counts)) error {
	d := &c.decl
	n := len(d.bySlot) * countsSize
	if n == 0 {
		return nil
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	b := d.buf[:n]
	if _, err := d.mem.ReadAt(b, 0); err != nil {
		return fmt.Errorf("pairbytes: read the declared pairs of %s: %w", c.dev, err)
	}
	ne := binary.NativeEndian
	for s, p := range d.bySlot {
		if !p.Src.IsValid() {
			continue
		}
		v := b[s*countsSize:]
		fn(p, Counts{Bytes: ne.Uint64(v), Packets: ne.Uint64(v[8:]), Segments: ne.Uint64(v[16:]), SegBytes: ne.Uint64(v[24:])})
	}
	return nil
}

// keyOf encodes a pair as the maps' key (addresses in network byte
// order).
func keyOf(p Pair) pairbytesPair {
	return pairbytesPair{Src: p.Src.As4(), Dst: p.Dst.As4()}
}
