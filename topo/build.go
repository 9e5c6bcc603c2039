package topo

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/bulkhead-dc/bulkhead/spec"
)

// NodeSpec is a node of an explicit graph.
type NodeSpec struct {
	Name string
	Kind NodeKind
}

// LinkSpec is a full-duplex link of an explicit graph with Capacity bits/s
// in each direction.
type LinkSpec struct {
	A, B     string
	Capacity float64
}

// FromSpec builds the topology a scenario declares. A two-tier topology
// without a core capacity gets servers_per_rack × edge / oversubscription
// (oversubscription 1 when not given).
func FromSpec(t spec.Topology) (*Topology, error) {
	var (
		top *Topology
		err error
	)
	switch t.Kind {
	case spec.TopoTwoTier:
		tt := t.TwoTier
		if tt == nil {
			return nil, errors.New("topology: kind two-tier without two_tier")
		}
		core := float64(tt.Core)
		if core == 0 {
			over := tt.Oversubscription
			if over == 0 {
				over = spec.DefaultOversub
			}
			if !(over > 0) {
				return nil, fmt.Errorf("topology: two-tier oversubscription must be positive, got %v", over)
			}
			core = float64(tt.ServersPerRack) * float64(tt.Edge) / over
		}
		top, err = TwoTier(tt.Racks, tt.ServersPerRack, float64(tt.Edge), core)
	case spec.TopoFatTree:
		if t.FatTree == nil {
			return nil, errors.New("topology: kind fat-tree without fat_tree")
		}
		top, err = OversubscribedFatTree(t.FatTree.K, max(1, t.FatTree.Oversubscription), float64(t.FatTree.Link))
	case spec.TopoExplicit:
		if t.Explicit == nil {
			return nil, errors.New("topology: kind explicit without explicit")
		}
		nodes := make([]NodeSpec, len(t.Explicit.Nodes))
		for i, n := range t.Explicit.Nodes {
			switch n.Kind {
			case spec.NodeServer:
				nodes[i] = NodeSpec{n.Name, Server}
			case spec.NodeSwitch:
				nodes[i] = NodeSpec{n.Name, Switch}
			default:
				return nil, fmt.Errorf("topology: explicit: nodes[%d]: unknown kind %q", i, n.Kind)
			}
		}
		links := make([]LinkSpec, len(t.Explicit.Links))
		for i, l := range t.Explicit.Links {
			links[i] = LinkSpec{l.A, l.B, float64(l.Capacity)}
		}
		top, err = Explicit(nodes, links)
	default:
		return nil, fmt.Errorf("topology: unknown kind %q", t.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	return top, nil
}

func validCapacity(c float64) bool { return c > 0 && !math.IsInf(c, 0) }

// TwoTier builds racks × serversPerRack servers s1..sN (rack by rack), each
// linked at edge bits/s to its rack's top-of-rack switch tor1..torR, and,
// when racks > 1, every ToR linked at core bits/s to one core switch
// "core". Node IDs: servers first, then ToRs, then the core. Links:
// server↔ToR in server order, then ToR↔core.
func TwoTier(racks, serversPerRack int, edge, core float64) (*Topology, error) {
	if racks < 1 || serversPerRack < 1 {
		return nil, fmt.Errorf("two-tier: need at least one rack and one server per rack, got %d × %d", racks, serversPerRack)
	}
	if !validCapacity(edge) {
		return nil, fmt.Errorf("two-tier: edge capacity must be positive, got %v", edge)
	}
	if racks > 1 && !validCapacity(core) {
		return nil, fmt.Errorf("two-tier: core capacity must be positive, got %v", core)
	}
	if int64(racks)*int64(serversPerRack) > spec.MaxServers {
		return nil, fmt.Errorf("two-tier: %d × %d servers is more than %d", racks, serversPerRack, spec.MaxServers)
	}
	b := newBuilder()
	n := racks * serversPerRack
	for i := 1; i <= n; i++ {
		b.node("s"+strconv.Itoa(i), Server)
	}
	tors := make([]int, racks)
	for r := range tors {
		tors[r] = b.node("tor"+strconv.Itoa(r+1), Switch)
	}
	for i := range n {
		b.link(i, tors[i/serversPerRack], edge)
	}
	if racks > 1 {
		c := b.node("core", Switch)
		for _, tor := range tors {
			b.link(tor, c, core)
		}
	}
	return b.finish(), nil
}

// FatTree builds the k-ary fat-tree of Al-Fares et al. (k even): k pods,
// each with k/2 edge switches e<pod>.<i> and k/2 aggregation switches
// a<pod>.<i> (pods and indexes from 1), every edge switch linked to every
// aggregation switch of its pod and to k/2 servers; (k/2)² core switches
// c1..c(k/2)², aggregation switch a<p>.<i> linked to cores
// c((i-1)·k/2+1)..c(i·k/2). Servers s1..s(k³/4) are numbered pod by pod,
// edge switch by edge switch. Every link has capacity link bits/s. Node IDs:
// servers, then edge, aggregation and core switches; links: server↔edge,
// edge↔aggregation, aggregation↔core.
func FatTree(k int, link float64) (*Topology, error) {
	if k < 2 || k%2 != 0 {
		return nil, fmt.Errorf("fat-tree: k must be even and at least 2, got %d", k)
	}
	if int64(k)*int64(k)*int64(k)/4 > spec.MaxServers {
		return nil, fmt.Errorf("fat-tree: k = %d gives more than %d servers", k, spec.MaxServers)
	}
	if !validCapacity(link) {
		return nil, fmt.Errorf("fat-tree: link capacity must be positive, got %v", link)
	}
	h := k / 2
	b := newBuilder()
	for i := 1; i <= k*k*k/4; i++ {
		b.node("s"+strconv.Itoa(i), Server)
	}
	edge := make([][]int, k)
	agg := make([][]int, k)
	for p := range k {
		edge[p] = make([]int, h)
		for i := range h {
			edge[p][i] = b.node(fmt.Sprintf("e%d.%d", p+1, i+1), Switch)
		}
	}
	for p := range k {
		agg[p] = make([]int, h)
		for i := range h {
			agg[p][i] = b.node(fmt.Sprintf("a%d.%d", p+1, i+1), Switch)
		}
	}
	core := make([]int, h*h)
	for j := range core {
		core[j] = b.node("c"+strconv.Itoa(j+1), Switch)
	}
	server := 0
	for p := range k {
		for i := range h {
			for range h {
				b.link(server, edge[p][i], link)
				server++
			}
		}
	}
	for p := range k {
		for i := range h {
			for j := range h {
				b.link(edge[p][i], agg[p][j], link)
			}
		}
	}
	for p := range k {
		for i := range h {
			for j := range h {
				b.link(agg[p][i], core[i*h+j], link)
			}
		}
	}
	return b.finish(), nil
}

// OversubscribedFatTree builds a k-ary fat-tree (FatTree's names) with
// only k/2 ÷ ratio aggregation switches per pod and the core switches they
// reach: every edge switch then has k/2 servers below and k/2 ÷ ratio
// uplinks (ratio:1), while aggregation switches stay 1:1.
func OversubscribedFatTree(k, ratio int, link float64) (*Topology, error) {
	h := k / 2
	if ratio < 1 || h%ratio != 0 {
		return nil, fmt.Errorf("fat-tree: oversubscription %d:1 must divide k/2 = %d", ratio, h)
	}
	if ratio == 1 {
		return FatTree(k, link)
	}
	a := h / ratio
	var nodes []NodeSpec
	var links []LinkSpec
	for i := 1; i <= k*k*k/4; i++ {
		nodes = append(nodes, NodeSpec{Name: fmt.Sprintf("s%d", i), Kind: Server})
	}
	for p := 1; p <= k; p++ {
		for i := 1; i <= h; i++ {
			nodes = append(nodes, NodeSpec{Name: fmt.Sprintf("e%d.%d", p, i), Kind: Switch})
		}
	}
	for p := 1; p <= k; p++ {
		for i := 1; i <= a; i++ {
			nodes = append(nodes, NodeSpec{Name: fmt.Sprintf("a%d.%d", p, i), Kind: Switch})
		}
	}
	for j := 1; j <= a*h; j++ {
		nodes = append(nodes, NodeSpec{Name: fmt.Sprintf("c%d", j), Kind: Switch})
	}
	s := 1
	for p := 1; p <= k; p++ {
		for i := 1; i <= h; i++ {
			for range h {
				links = append(links, LinkSpec{A: fmt.Sprintf("s%d", s), B: fmt.Sprintf("e%d.%d", p, i), Capacity: link})
				s++
			}
		}
	}
	for p := 1; p <= k; p++ {
		for i := 1; i <= h; i++ {
			for j := 1; j <= a; j++ {
				links = append(links, LinkSpec{A: fmt.Sprintf("e%d.%d", p, i), B: fmt.Sprintf("a%d.%d", p, j), Capacity: link})
			}
		}
	}
	for p := 1; p <= k; p++ {
		for i := 1; i <= a; i++ {
			for j := 1; j <= h; j++ {
				links = append(links, LinkSpec{A: fmt.Sprintf("a%d.%d", p, i), B: fmt.Sprintf("c%d", (i-1)*h+j), Capacity: link})
			}
		}
	}
	return Explicit(nodes, links)
}

// Explicit builds a graph from nodes and full-duplex links (each becomes two
// directed links, A→B first). Node IDs and link order follow the input. It
// rejects empty or duplicate node names, unknown kinds, links naming unknown
// nodes, self-links, duplicate links (in either orientation), non-positive
// capacities, servers without exactly one link, and servers that cannot
// reach each other. All problems are reported, joined.
func Explicit(nodes []NodeSpec, links []LinkSpec) (*Topology, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	b := newBuilder()
	servers := 0
	for i, n := range nodes {
		switch {
		case n.Name == "":
			bad("explicit: nodes[%d]: empty name", i)
		case n.Kind != Server && n.Kind != Switch:
			bad("explicit: nodes[%d]: unknown kind %v", i, n.Kind)
		default:
			if _, dup := b.t.byName[n.Name]; dup {
				bad("explicit: nodes[%d]: duplicate node %q", i, n.Name)
				continue
			}
			b.node(n.Name, n.Kind)
			if n.Kind == Server {
				servers++
			}
		}
	}
	if servers == 0 {
		bad("explicit: no servers")
	}
	type pair struct{ a, b int }
	seen := map[pair]int{}
	degree := make([]int, len(b.t.Nodes))
	for i, l := range links {
		a, aok := b.t.byName[l.A]
		c, cok := b.t.byName[l.B]
		switch {
		case !aok:
			bad("explicit: links[%d]: unknown node %q", i, l.A)
		case !cok:
			bad("explicit: links[%d]: unknown node %q", i, l.B)
		case a == c:
			bad("explicit: links[%d]: links node %q to itself", i, l.A)
		case !validCapacity(l.Capacity):
			bad("explicit: links[%d] (%s—%s): capacity must be positive, got %v", i, l.A, l.B, l.Capacity)
		default:
			key := pair{min(a, c), max(a, c)}
			if j, dup := seen[key]; dup {
				bad("explicit: links[%d]: duplicate of links[%d] (%s—%s)", i, j, l.A, l.B)
				continue
			}
			seen[key] = i
			degree[a]++
			degree[c]++
			b.link(a, c, l.Capacity)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for i, nd := range b.t.Nodes {
		if nd.Kind == Server && degree[i] != 1 {
			bad("explicit: server %q has %d links; a server needs exactly one", nd.Name, degree[i])
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t := b.finish()
	d := t.distances(t.servers[0])
	for _, s := range t.servers[1:] {
		if d[s] < 0 {
			bad("explicit: server %q is not connected to server %q", t.Nodes[s].Name, t.Nodes[t.servers[0]].Name)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}
