package place

import (
	"slices"
	"strconv"

	"github.com/bulkhead-dc/bulkhead/topo"
)

// A group is a set of servers that a placement can be confined to: a single
// server (level 0), or the servers below the switches of one layer that
// reach exactly the same servers by downward paths (a rack under its ToR, a
// fat-tree pod under its aggregation switches, everything under the core).
// Its uplinks are the links from its top switches (or its server) to the
// layer above, its downlinks their reverses. On a multi-rooted tree with
// ECMP, a pair leaving the group may take any uplink, so the group's uplinks
// together are one "generalized link" (ElasticSwitch §8): the hose model
// needs, on each of them, at most min(Σ out inside, Σ in outside).
type group struct {
	level    int
	name     string
	server   int   // node ID at level 0, else -1
	switches []int // top switches (level > 0)
	up, down []int // link IDs
	children []int // group indexes, one level down
	parent   int   // -1 for the root
}

// hierarchy is a topology seen as nested groups: a tree or multi-rooted
// tree. Groups are stored level by level, so every child comes before its
// parent.
type hierarchy struct {
	groups  []group
	byLevel [][]int
	root    int
	leaf    []int // node ID → group of the server, -1 for switches
}

// levels returns every node's hop distance to the nearest server.
func levels(t *topo.Topology, adj [][]int) []int {
	lv := make([]int, len(t.Nodes))
	for i := range lv {
		lv[i] = -1
	}
	var queue []int
	for _, n := range t.Nodes {
		if n.Kind == topo.Server {
			lv[n.ID] = 0
			queue = append(queue, n.ID)
		}
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, l := range adj[u] {
			if v := t.Links[l].To; lv[v] < 0 {
				lv[v] = lv[u] + 1
				queue = append(queue, v)
			}
		}
	}
	return lv
}

// buildHierarchy returns the groups of a layered, laminar topology (every
// link joins adjacent layers, the switches of a layer split the servers into
// disjoint groups, one group covers every server), or nil when the topology
// is not one (a random graph, say).
func buildHierarchy(t *topo.Topology, adj [][]int) *hierarchy {
	lv := levels(t, adj)
	top := 0
	for _, l := range t.Links {
		a, b := lv[l.From], lv[l.To]
		if a < 0 || b < 0 || a-b != 1 && b-a != 1 {
			return nil
		}
		top = max(top, a)
	}
	h := &hierarchy{root: -1, leaf: make([]int, len(t.Nodes))}
	nodeGroup := make([]int, len(t.Nodes)) // group of a node of the current or lower level
	for i := range h.leaf {
		h.leaf[i], nodeGroup[i] = -1, -1
	}
	h.byLevel = make([][]int, top+1)
	for _, n := range t.Nodes {
		if n.Kind != topo.Server {
			continue
		}
		g := len(h.groups)
		h.groups = append(h.groups, group{level: 0, name: n.Name, server: n.ID, parent: -1})
		h.byLevel[0] = append(h.byLevel[0], g)
		h.leaf[n.ID], nodeGroup[n.ID] = g, g
	}
	for level := 1; level <= top; level++ {
		byKey := map[string]int{}
		for _, n := range t.Nodes {
			if lv[n.ID] != level {
				continue
			}
			var kids []int
			for _, l := range adj[n.ID] {
				if v := t.Links[l].To; lv[v] == level-1 {
					kids = append(kids, nodeGroup[v])
				}
			}
			slices.Sort(kids)
			kids = slices.Compact(kids)
			key := make([]byte, 0, 4*len(kids))
			for _, k := range kids {
				key = strconv.AppendInt(key, int64(k), 10)
				key = append(key, ',')
			}
			g, ok := byKey[string(key)]
			if !ok {
				g = len(h.groups)
				byKey[string(key)] = g
				h.groups = append(h.groups, group{level: level, server: -1, children: kids, parent: -1})
				h.byLevel[level] = append(h.byLevel[level], g)
				for _, k := range kids {
					if h.groups[k].parent >= 0 {
						return nil // two overlapping groups: not laminar
					}
					h.groups[k].parent = g
				}
			}
			h.groups[g].switches = append(h.groups[g].switches, n.ID)
			nodeGroup[n.ID] = g
		}
	}
	if len(h.byLevel[top]) != 1 {
		return nil
	}
	h.root = h.byLevel[top][0]
	for i := range h.groups {
		g := &h.groups[i]
		if i != h.root && g.parent < 0 {
			return nil
		}
		tops := g.switches
		if g.level == 0 {
			tops = []int{g.server}
		}
		for _, u := range tops {
			for _, l := range adj[u] {
				if lv[t.Links[l].To] == g.level+1 {
					g.up = append(g.up, l)
					g.down = append(g.down, t.Links[l].Reverse)
				}
			}
		}
		if g.level > 0 {
			g.name = t.Nodes[g.switches[0]].Name
			if n := len(g.switches); n > 1 {
				g.name += "+" + strconv.Itoa(n-1)
			}
		}
	}
	return h
}
