// Package topo is the physical network: hosts, switches and full-duplex links
// (each direction its own resource), the builders (two-tier tree with
// oversubscription, fat-tree k, explicit graphs) and routing (unique paths on
// trees; ECMP by flow hash where shortest paths are many).
//
// Servers are named s1..sN in generated topologies (the names
// spec.Topology.ServerNames declares). A server has exactly one link, its
// access link (Uplink out of it, Downlink into it), so servers never carry
// transit traffic.
//
// Routing is by hop count. Route picks one shortest path, choosing among
// equal-cost next hops at every hop by a hash; the simulator and admission
// control (package place) both route the VM pair (src, dst) of a scenario
// with hash PairHash(seed, src, dst), so a pair's reservation and its
// traffic take the same path.
package topo

import (
	"sort"
	"strconv"
	"sync/atomic"

	"github.com/bulkhead-dc/bulkhead/model"
)

// NodeKind says what a node is.
type NodeKind int

// Node kinds.
const (
	Server NodeKind = iota
	Switch
)

// String returns "server" or "switch".
func (k NodeKind) String() string {
	switch k {
	case Server:
		return "server"
	case Switch:
		return "switch"
	}
	return "NodeKind(" + strconv.Itoa(int(k)) + ")"
}

// Node is a server or a switch.
type Node struct {
	ID   int
	Name string
	Kind NodeKind
}

// Link is one direction of a physical link. Name is "from->to".
type Link struct {
	ID       int
	Name     string
	From, To int     // node IDs
	Capacity float64 // bits/s
	Reverse  int     // ID of the opposite direction
}

// Topology is an immutable graph with routing. Build one with TwoTier,
// FatTree, Explicit or FromSpec. Nodes[i].ID == i and Links[i].ID == i; the
// two directions of a physical link have consecutive IDs (2j from the first
// endpoint given, 2j+1 back). Do not modify a Topology once built. Its
// methods are safe for concurrent use.
type Topology struct {
	Nodes []Node
	Links []Link

	byName  map[string]int
	out     [][]int // link IDs out of each node, ascending
	adj     [][]hop // the same links with their far ends, for routing
	servers []int   // server node IDs in name order
	access  []int   // access (out) link of each node, -1 for switches
	// dist[d] is the hop distance of every node to node d, computed on
	// first use; racing computations store identical slices.
	dist []atomic.Pointer[[]int32]
}

// hop is a link out of a node and the node it leads to.
type hop struct{ link, to int32 }

// builder accumulates nodes and links.
type builder struct {
	t *Topology
}

func newBuilder() *builder {
	return &builder{t: &Topology{byName: map[string]int{}}}
}

func (b *builder) node(name string, kind NodeKind) int {
	id := len(b.t.Nodes)
	b.t.Nodes = append(b.t.Nodes, Node{ID: id, Name: name, Kind: kind})
	b.t.byName[name] = id
	return id
}

// link adds a full-duplex link as two directed links.
func (b *builder) link(a, c int, capacity float64) {
	id := len(b.t.Links)
	na, nc := b.t.Nodes[a].Name, b.t.Nodes[c].Name
	b.t.Links = append(b.t.Links,
		Link{ID: id, Name: na + "->" + nc, From: a, To: c, Capacity: capacity, Reverse: id + 1},
		Link{ID: id + 1, Name: nc + "->" + na, From: c, To: a, Capacity: capacity, Reverse: id})
}

// finish builds the indexes.
func (b *builder) finish() *Topology {
	t := b.t
	n := len(t.Nodes)
	t.out = make([][]int, n)
	t.adj = make([][]hop, n)
	for _, l := range t.Links {
		t.out[l.From] = append(t.out[l.From], l.ID)
		t.adj[l.From] = append(t.adj[l.From], hop{link: int32(l.ID), to: int32(l.To)})
	}
	t.access = make([]int, n)
	for i, nd := range t.Nodes {
		t.access[i] = -1
		if nd.Kind == Server {
			t.servers = append(t.servers, i)
			if len(t.out[i]) > 0 {
				t.access[i] = t.out[i][0]
			}
		}
	}
	sort.SliceStable(t.servers, func(i, j int) bool {
		return naturalLess(t.Nodes[t.servers[i]].Name, t.Nodes[t.servers[j]].Name)
	})
	t.dist = make([]atomic.Pointer[[]int32], n)
	return t
}

// Node returns the named node.
func (t *Topology) Node(name string) (Node, bool) {
	id, ok := t.byName[name]
	if !ok {
		return Node{}, false
	}
	return t.Nodes[id], true
}

// Servers returns the servers in name order (s1, s2, ..., s10: numbers in
// names compare as numbers). The slice is the caller's.
func (t *Topology) Servers() []Node {
	out := make([]Node, len(t.servers))
	for i, id := range t.servers {
		out[i] = t.Nodes[id]
	}
	return out
}

// Uplink returns the server's access link out of it (toward the network),
// or -1 if node is not a server.
func (t *Topology) Uplink(server int) int {
	if server < 0 || server >= len(t.access) {
		return -1
	}
	return t.access[server]
}

// Downlink returns the link into the server (the reverse of its Uplink), or
// -1 if node is not a server.
func (t *Topology) Downlink(server int) int {
	up := t.Uplink(server)
	if up < 0 {
		return -1
	}
	return t.Links[up].Reverse
}

// IsAccess reports whether a link direction has a server at one end: a
// server's access link (uplink or downlink).
func (t *Topology) IsAccess(link int) bool {
	if link < 0 || link >= len(t.Links) {
		return false
	}
	l := t.Links[link]
	return t.Nodes[l.From].Kind == Server || t.Nodes[l.To].Kind == Server
}

// Hosts returns every server with the capacity of its access link (its
// uplink; each direction of a link has the same capacity), in node order.
func (t *Topology) Hosts() []model.Host {
	var out []model.Host
	for _, n := range t.Nodes {
		if n.Kind != Server {
			continue
		}
		h := model.Host{Name: n.Name}
		if up := t.Uplink(n.ID); up >= 0 {
			h.Link = t.Links[up].Capacity
		}
		out = append(out, h)
	}
	return out
}

// LinkBetween returns the ID of the directed link from → to.
func (t *Topology) LinkBetween(from, to int) (int, bool) {
	if from < 0 || from >= len(t.out) {
		return 0, false
	}
	for _, l := range t.out[from] {
		if t.Links[l].To == to {
			return l, true
		}
	}
	return 0, false
}

// naturalLess orders names with embedded numbers numerically: s2 < s10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			i, j := digits(a), digits(b)
			na, nb := trimZeros(a[:i]), trimZeros(b[:j])
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			if i != j {
				return i < j
			}
			a, b = a[i:], b[j:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digits(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
