package place

import (
	"cmp"
	"slices"

	"github.com/bulkhead-dc/bulkhead/topo"
)

// treeShape is a topology that is a tree (connected, one full-duplex link
// fewer than nodes, no parallel links), rooted at node 0. On a tree every
// pair of servers has one path, so a directed link u → v splits the VMs of
// a tenant in two: those on u's side send over it exactly when v's side
// holds one, and the hose reservation is Oktopus's
//
//	R(u → v) = min(Σ out on u's side, Σ in on v's side)
//
// computed from per-subtree sums in O(n + m log m) for n VMs whose servers'
// paths to the root cover m nodes, instead of routing every VM pair.
type treeShape struct {
	parent []int32 // parent node, -1 for the root
	up     []int32 // link node → parent, -1 for the root
	order  []int32 // position of each node in BFS order from the root
}

// newTreeShape returns the rooted tree of t, or nil if t is not a tree.
func newTreeShape(t *topo.Topology) *treeShape {
	n := len(t.Nodes)
	if n == 0 || len(t.Links) != 2*(n-1) {
		return nil
	}
	adj := make([][]int32, n)
	for _, l := range t.Links {
		adj[l.From] = append(adj[l.From], int32(l.ID))
	}
	ts := &treeShape{parent: make([]int32, n), up: make([]int32, n), order: make([]int32, n)}
	for i := range ts.parent {
		ts.parent[i], ts.up[i], ts.order[i] = -2, -1, -1
	}
	ts.parent[0], ts.order[0] = -1, 0
	queue := []int32{0}
	for h := 0; h < len(queue); h++ {
		u := queue[h]
		for _, l := range adj[u] {
			if l == ts.up[u] {
				continue
			}
			v := int32(t.Links[l].To)
			if ts.order[v] >= 0 {
				return nil // a cycle or a parallel link
			}
			ts.parent[v] = u
			ts.up[v] = int32(t.Links[l].Reverse)
			ts.order[v] = int32(len(queue))
			queue = append(queue, v)
		}
	}
	if len(queue) != n {
		return nil // not connected
	}
	return ts
}

// dd is a double-double sum: hi + lo exactly represents the sum of the
// float64s added (to 106 bits), so that sums and differences of subtree
// sums round once, like a sum of integer rates taken in any order.
type dd struct{ hi, lo float64 }

func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	e = (a - (s - bb)) + (b - bb)
	return s, e
}

func (x dd) add(y dd) dd {
	s, e := twoSum(x.hi, y.hi)
	e += x.lo + y.lo
	hi := s + e
	return dd{hi, e - (hi - s)}
}

func (x dd) neg() dd { return dd{-x.hi, -x.lo} }

// treeNode is the per-node scratch state of treeTenant.
type treeNode struct {
	out, in dd
	vms     int
}

// treeTenant is tenant on a tree topology (see treeShape).
func (c *hoseCalc) treeTenant(t *topo.Topology, vms []VMHose, emit func(link int, rate float64)) {
	ts := c.tree
	if len(c.tnode) < len(t.Nodes) {
		c.tnode = make([]treeNode, len(t.Nodes))
		c.tmark = make([]bool, len(t.Nodes))
	}
	// The nodes on the servers' paths to the root, each once.
	c.tnodes = c.tnodes[:0]
	var total treeNode
	for _, v := range vms {
		for u := int32(v.Server); u >= 0 && !c.tmark[u]; u = ts.parent[u] {
			c.tmark[u] = true
			c.tnodes = append(c.tnodes, u)
		}
		x := &c.tnode[v.Server]
		x.out = x.out.add(dd{v.Out, 0})
		x.in = x.in.add(dd{v.In, 0})
		x.vms++
		total.out = total.out.add(dd{v.Out, 0})
		total.in = total.in.add(dd{v.In, 0})
		total.vms++
	}
	// Subtree sums, children before parents.
	slices.SortFunc(c.tnodes, func(a, b int32) int { return cmp.Compare(ts.order[b], ts.order[a]) })
	c.tlinks = c.tlinks[:0]
	for _, u := range c.tnodes {
		x := &c.tnode[u]
		if p := ts.parent[u]; p >= 0 {
			y := &c.tnode[p]
			y.out, y.in, y.vms = y.out.add(x.out), y.in.add(x.in), y.vms+x.vms
			if x.vms > 0 && x.vms < total.vms {
				up := ts.up[u]
				// Up: the subtree sends, the rest receives; down: the reverse.
				if r := min(x.out.hi, total.in.add(x.in.neg()).hi); r > 0 {
					c.tlinks = append(c.tlinks, LinkRate{Link: int(up), Rate: r})
				}
				if r := min(total.out.add(x.out.neg()).hi, x.in.hi); r > 0 {
					c.tlinks = append(c.tlinks, LinkRate{Link: t.Links[up].Reverse, Rate: r})
				}
			}
		}
	}
	for _, u := range c.tnodes {
		c.tnode[u], c.tmark[u] = treeNode{}, false
	}
	slices.SortFunc(c.tlinks, func(a, b LinkRate) int { return cmp.Compare(a.Link, b.Link) })
	for _, l := range c.tlinks {
		emit(l.Link, l.Rate)
	}
}
