package spec

import (
	"math"
	"testing"
)

// TestMulCapped checks the overflow-safe product of the size checks.
func TestMulCapped(t *testing.T) {
	cases := []struct{ a, b, limit, want int64 }{
		{0, 5, 10, 0},
		{2, 5, 10, 10},
		{3, 4, 10, 11},
		{1 << 32, 1 << 32, 100, 101}, // 2⁶⁴ wraps to 0 in int64
		{math.MaxInt64, 2, math.MaxInt64 - 1, math.MaxInt64}, // limit + 1
		{-1, 5, 10, 0},
	}
	for _, c := range cases {
		if got := mulCapped(c.a, c.b, c.limit); got != c.want {
			t.Errorf("mulCapped(%d, %d, %d) = %d, want %d", c.a, c.b, c.limit, got, c.want)
		}
	}
}

// TestGeneratedServersOverflow: a server count over the limit stays over
// it, whatever the product would wrap to.
func TestGeneratedServersOverflow(t *testing.T) {
	cases := []struct {
		name string
		top  Topology
		want int // 0: anything over MaxServers
	}{
		{"two-tier 2×4", Topology{Kind: TopoTwoTier, TwoTier: &TwoTier{Racks: 2, ServersPerRack: 4}}, 8},
		{"two-tier 2³²×2³²", Topology{Kind: TopoTwoTier, TwoTier: &TwoTier{Racks: 1 << 32, ServersPerRack: 1 << 32}}, 0},
		{"fat-tree 4", Topology{Kind: TopoFatTree, FatTree: &FatTree{K: 4}}, 16},
		{"fat-tree 160", Topology{Kind: TopoFatTree, FatTree: &FatTree{K: 160}}, 1_024_000},
		{"fat-tree 2³²", Topology{Kind: TopoFatTree, FatTree: &FatTree{K: 1 << 32}}, 0},
		{"fat-tree 2⁶²", Topology{Kind: TopoFatTree, FatTree: &FatTree{K: 1 << 62}}, 0},
	}
	for _, c := range cases {
		got := c.top.generatedServers()
		if (c.want == 0 && got <= MaxServers) || (c.want != 0 && got != c.want) {
			t.Errorf("%s: %d servers, want %d (0: over %d)", c.name, got, c.want, MaxServers)
		}
	}
}
