package place

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/topo"
)

func TestCountSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		n := rng.IntN(200)
		w := words(n)
		a, b, got := make(countSet, w), make(countSet, w), make(countSet, w)
		var xs, ys []int
		for m := 0; m <= n; m++ {
			if rng.IntN(5) == 0 {
				a.set(m)
				xs = append(xs, m)
			}
			if rng.IntN(7) == 0 {
				b.set(m)
				ys = append(ys, m)
			}
		}
		sum(got, a, b, n)
		want := map[int]bool{}
		for _, x := range xs {
			for _, y := range ys {
				if x+y <= n {
					want[x+y] = true
				}
			}
		}
		for m := 0; m < 64*w; m++ {
			if got.has(m) != want[m] {
				t.Fatalf("n %d: sum has %d = %v", n, m, got.has(m))
			}
		}
		if got.count() != len(want) {
			t.Fatalf("count %d, want %d", got.count(), len(want))
		}
		for m := -1; m <= n+70; m++ {
			best := -1
			for _, x := range xs {
				if x <= m {
					best = max(best, x)
				}
			}
			if a.maxLE(m) != best {
				t.Fatalf("maxLE(%d) = %d, want %d", m, a.maxLE(m), best)
			}
		}
		hi := rng.IntN(n + 1)
		a.setRange(hi)
		if a.count() != hi+1 || a.maxLE(n) != hi {
			t.Fatalf("setRange(%d): count %d max %d", hi, a.count(), a.maxLE(n))
		}
	}
}

// TestKPaths: Yen's algorithm on a square with one diagonal.
func TestKPaths(t *testing.T) {
	nodes := []topo.NodeSpec{{Name: "w1", Kind: topo.Switch}, {Name: "w2", Kind: topo.Switch}, {Name: "w3", Kind: topo.Switch},
		{Name: "w4", Kind: topo.Switch}, {Name: "s", Kind: topo.Server}, {Name: "r", Kind: topo.Server}}
	links := []topo.LinkSpec{{A: "w1", B: "w2", Capacity: 1}, {A: "w2", B: "w3", Capacity: 1}, {A: "w3", B: "w4", Capacity: 1},
		{A: "w4", B: "w1", Capacity: 1}, {A: "w1", B: "w3", Capacity: 1}, {A: "s", B: "w1", Capacity: 1}, {A: "r", B: "w3", Capacity: 1}}
	top, err := topo.Explicit(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlacer(top, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.hier != nil {
		t.Fatal("hierarchy on a graph with a triangle")
	}
	names := func(paths [][]int) []string {
		var out []string
		for _, pt := range paths {
			var ls []string
			for _, l := range pt {
				ls = append(ls, top.Links[l].Name)
			}
			out = append(out, strings.Join(ls, " "))
		}
		return out
	}
	s, _ := top.Node("s")
	w3, _ := top.Node("w3")
	want := []string{"s->w1 w1->w3", "s->w1 w1->w2 w2->w3", "s->w1 w1->w4 w4->w3"}
	if got := names(p.kPaths(s.ID, w3.ID, 5)); !reflect.DeepEqual(got, want) {
		t.Errorf("k=5: %q; want %q", got, want)
	}
	// Cached per (server, root): k is the placer's, fixed.
	if got := names(p.kPaths(s.ID, w3.ID, 5)); !reflect.DeepEqual(got, want) {
		t.Errorf("cached: %q", got)
	}
	w2, _ := top.Node("w2")
	if got := names(p.kPaths(s.ID, w2.ID, 2)); !reflect.DeepEqual(got, []string{"s->w1 w1->w2", "s->w1 w1->w3 w3->w2"}) {
		t.Errorf("to w2, k=2: %q", got)
	}
	// Servers are never crossed: r's only path to w1 starts at w3.
	r, _ := top.Node("r")
	for _, pt := range names(p.kPaths(r.ID, s.ID, 10)) {
		if strings.Count(pt, "->") != strings.Count(pt, " ")+1 || strings.Contains(pt, "->r ") {
			t.Errorf("path %q", pt)
		}
	}
}

// TestHierarchy: the groups of a fat-tree and a two-tier tree.
func TestHierarchy(t *testing.T) {
	ft, _ := topo.FatTree(4, 1e9)
	h := buildHierarchy(ft, adjacency(ft))
	if h == nil {
		t.Fatal("fat-tree: no hierarchy")
	}
	var sizes []int
	for _, gs := range h.byLevel {
		sizes = append(sizes, len(gs))
	}
	if !reflect.DeepEqual(sizes, []int{16, 8, 4, 1}) {
		t.Errorf("fat-tree k=4 groups per level %v", sizes)
	}
	pod := h.groups[h.byLevel[2][0]]
	if pod.name != "a1.1+1" || len(pod.up) != 4 || len(pod.children) != 2 {
		t.Errorf("pod 1: %+v", pod)
	}
	rack := h.groups[h.byLevel[1][0]]
	if rack.name != "e1.1" || len(rack.up) != 2 || len(rack.children) != 2 || rack.parent != h.byLevel[2][0] {
		t.Errorf("rack 1: %+v", rack)
	}
	tt, _ := topo.TwoTier(3, 2, 1e9, 1e9)
	h = buildHierarchy(tt, adjacency(tt))
	if h == nil || h.groups[h.root].name != "core" || len(h.byLevel[1]) != 3 {
		t.Errorf("two-tier: %+v", h)
	}
	one, _ := topo.TwoTier(1, 3, 1e9, 0)
	if h = buildHierarchy(one, adjacency(one)); h == nil || h.groups[h.root].name != "tor1" {
		t.Errorf("one rack: %+v", h)
	}
}

func adjacency(t *topo.Topology) [][]int {
	adj := make([][]int, len(t.Nodes))
	for _, l := range t.Links {
		adj[l.From] = append(adj[l.From], l.ID)
	}
	return adj
}
