package place

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bulkhead-dc/bulkhead/topo"
)

// randomTree builds a random explicit tree: switches joined at random, each
// server hung off a random switch.
func randomTree(t *testing.T, rng *rand.Rand, switches, servers int) *topo.Topology {
	t.Helper()
	var nodes []topo.NodeSpec
	var links []topo.LinkSpec
	for i := range switches {
		nodes = append(nodes, topo.NodeSpec{Name: fmt.Sprintf("sw%d", i), Kind: topo.Switch})
		if i > 0 {
			links = append(links, topo.LinkSpec{A: fmt.Sprintf("sw%d", rng.IntN(i)), B: fmt.Sprintf("sw%d", i), Capacity: 1e9})
		}
	}
	for i := range servers {
		nodes = append(nodes, topo.NodeSpec{Name: fmt.Sprintf("s%d", i+1), Kind: topo.Server})
		links = append(links, topo.LinkSpec{A: fmt.Sprintf("s%d", i+1), B: fmt.Sprintf("sw%d", rng.IntN(switches)), Capacity: 1e9})
	}
	top, err := topo.Explicit(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// pairwise computes the reservations by routing every VM pair (the method
// for topologies that are not trees).
func pairwise(top *topo.Topology, seed int64, vms []VMHose) []LinkRate {
	var c hoseCalc
	c.tenant(top, seed, nil, func(int, float64) {}) // set up the topology
	c.tree = nil
	var out []LinkRate
	c.tenant(top, seed, vms, func(l int, r float64) { out = append(out, LinkRate{Link: l, Rate: r}) })
	return out
}

// TestTreeReservations checks the subtree-sum reservations of trees against
// routing every VM pair, on two-tier trees and random explicit trees, with
// several VMs per server and zero hoses at either end.
func TestTreeReservations(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 4))
	twoTier := func(racks, spr int) func(*testing.T) *topo.Topology {
		return func(t *testing.T) *topo.Topology {
			top, err := topo.TwoTier(racks, spr, 1e9, 4e9)
			if err != nil {
				t.Fatal(err)
			}
			return top
		}
	}
	cases := []struct {
		name     string
		build    func(*testing.T) *topo.Topology
		integral bool // integer rates: sums are exact, results identical
	}{
		{"two-tier 1x4", twoTier(1, 4), true},
		{"two-tier 4x4", twoTier(4, 4), true},
		{"two-tier 8x16", twoTier(8, 16), true},
		{"explicit tree", func(t *testing.T) *topo.Topology { return randomTree(t, rng, 12, 40) }, true},
		{"explicit tree, fractional rates", func(t *testing.T) *topo.Topology { return randomTree(t, rng, 6, 20) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			top := tc.build(t)
			if newTreeShape(top) == nil {
				t.Fatal("not recognised as a tree")
			}
			servers := top.Servers()
			for trial := range 60 {
				n := 1 + rng.IntN(3*len(servers))
				vms := make([]VMHose, n)
				for i := range vms {
					rate := func() float64 {
						if rng.IntN(5) == 0 {
							return 0
						}
						if tc.integral {
							return float64(1+rng.IntN(1000)) * 1e6
						}
						return rng.Float64() * 1e9
					}
					vms[i] = VMHose{Name: fmt.Sprintf("v%d", i), Server: servers[rng.IntN(len(servers))].ID, In: rate(), Out: rate()}
				}
				got := HoseReservations(top, 1, vms)
				want := pairwise(top, 1, vms)
				if len(got) != len(want) {
					t.Fatalf("trial %d: %d links reserved, pairwise %d", trial, len(got), len(want))
				}
				for i := range got {
					g, w := got[i], want[i]
					ok := g.Link == w.Link && g.Rate == w.Rate
					if !tc.integral {
						ok = g.Link == w.Link && math.Abs(g.Rate-w.Rate) <= 1e-12*w.Rate
					}
					if !ok {
						t.Fatalf("trial %d: link %d rate %v, pairwise link %d rate %v", trial, g.Link, g.Rate, w.Link, w.Rate)
					}
				}
			}
		})
	}
}

// TestTreeShape checks which topologies take the subtree-sum method.
func TestTreeShape(t *testing.T) {
	fat, err := topo.FatTree(4, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := topo.TwoTier(2, 2, 1e9, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := topo.Explicit([]topo.NodeSpec{{Name: "a", Kind: topo.Switch}, {Name: "b", Kind: topo.Switch}, {Name: "c", Kind: topo.Switch},
		{Name: "s1", Kind: topo.Server}, {Name: "s2", Kind: topo.Server}},
		[]topo.LinkSpec{{A: "a", B: "b", Capacity: 1}, {A: "b", B: "c", Capacity: 1}, {A: "c", B: "a", Capacity: 1}, {A: "s1", B: "a", Capacity: 1}, {A: "s2", B: "c", Capacity: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		top  *topo.Topology
		want bool
	}{{"fat-tree k=4", fat, false}, {"two-tier", tree, true}, {"ring", ring, false}} {
		if got := newTreeShape(tc.top) != nil; got != tc.want {
			t.Errorf("%s: tree %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTreeReservationsScale: one tenant of 10,000 VMs (one a server) on a
// tree is admitted in time linear in its VMs; pairwise it took over a
// minute and ~4 GB.
func TestTreeReservationsScale(t *testing.T) {
	top, err := topo.TwoTier(100, 100, 1e10, 1e12)
	if err != nil {
		t.Fatal(err)
	}
	servers := top.Servers()
	vms := make([]VMHose, len(servers))
	for i, s := range servers {
		vms[i] = VMHose{Name: fmt.Sprintf("v%d", i), Server: s.ID, In: 1e6, Out: 1e6}
	}
	res := HoseReservations(top, 1, vms)
	// Every access link carries 1 Mbps each way; every rack uplink
	// min(100, 9,900) Mbps.
	if want := 2*len(servers) + 2*100; len(res) != want {
		t.Fatalf("%d links reserved, want %d", len(res), want)
	}
	for _, r := range res {
		want := 1e6
		if !top.IsAccess(r.Link) {
			want = 100e6
		}
		if r.Rate != want {
			t.Errorf("%s: %v, want %v", r.Name, r.Rate, want)
		}
	}
}
