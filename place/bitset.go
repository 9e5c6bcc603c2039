package place

import "math/bits"

// countSet is a set of VM counts 0..n as a bitset: bit m is set when m of
// a tenant's VMs can be placed in a group of servers.
type countSet []uint64

func words(n int) int { return n/64 + 1 }

func (s countSet) has(m int) bool {
	return m >= 0 && m/64 < len(s) && s[m/64]&(1<<(uint(m)%64)) != 0
}

func (s countSet) set(m int) { s[m/64] |= 1 << (uint(m) % 64) }

func (s countSet) clear() {
	for i := range s {
		s[i] = 0
	}
}

// setRange sets 0..hi.
func (s countSet) setRange(hi int) {
	s.clear()
	for m := 0; m <= hi; m++ {
		if m%64 == 0 && m+63 <= hi {
			s[m/64] = ^uint64(0)
			m += 63
			continue
		}
		s.set(m)
	}
}

// maxLE returns the largest member of s that is at most m, or -1.
func (s countSet) maxLE(m int) int {
	if m < 0 {
		return -1
	}
	w := m / 64
	if w >= len(s) {
		w = len(s) - 1
		m = w*64 + 63
	}
	x := s[w]
	if sh := uint(m%64) + 1; sh < 64 {
		x &= (1 << sh) - 1
	}
	for {
		if x != 0 {
			return w*64 + 63 - bits.LeadingZeros64(x)
		}
		w--
		if w < 0 {
			return -1
		}
		x = s[w]
	}
}

func (s countSet) count() int {
	c := 0
	for _, w := range s {
		c += bits.OnesCount64(w)
	}
	return c
}

// sum sets dst to {x + y : x ∈ a, y ∈ b, x + y ≤ n} (the Minkowski sum,
// truncated). dst must not share storage with a or b; all have words(n)
// words.
func sum(dst, a, b countSet, n int) {
	dst.clear()
	if a.count() > b.count() {
		a, b = b, a
	}
	for wi, w := range a {
		for w != 0 {
			i := wi*64 + bits.TrailingZeros64(w)
			w &= w - 1
			if i > n {
				break
			}
			orShift(dst, b, i)
		}
	}
	trim(dst, n)
}

// orShift sets dst |= b << sh (bits beyond dst's length are dropped).
func orShift(dst, b countSet, sh int) {
	ws, bs := sh/64, uint(sh%64)
	for i := len(dst) - 1; i >= ws; i-- {
		j := i - ws
		v := b[j] << bs
		if bs != 0 && j > 0 {
			v |= b[j-1] >> (64 - bs)
		}
		dst[i] |= v
	}
}

// trim clears the members above n.
func trim(s countSet, n int) {
	w := n / 64
	if sh := uint(n%64) + 1; sh < 64 {
		s[w] &= (1 << sh) - 1
	}
	for i := w + 1; i < len(s); i++ {
		s[i] = 0
	}
}
