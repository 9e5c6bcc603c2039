package place

import (
	"slices"

	"github.com/bulkhead-dc/bulkhead/topo"
)

// VMHose is one VM of a tenant for admission: its name (which, with the
// scenario seed, picks the ECMP route of each of its pairs), the node ID of
// its server and its hose guarantees in bits/s.
type VMHose struct {
	Name    string
	Server  int
	In, Out float64
}

// LinkRate is a rate on one directed link.
type LinkRate struct {
	Link int // link ID in the topology
	Name string
	Rate float64 // bits/s
}

// HoseReservations computes one tenant's hose-model reservation on every
// directed link (see the package comment): R = min(Σ out of the VMs that
// send over the link, Σ in of the VMs that receive over it), the pair
// src → dst taking topo.Route(src server, dst server, topo.PairHash(seed,
// src, dst)). It returns the links with a nonzero reservation in link-ID
// order. Servers must be node IDs of t.
//
// This is the one implementation of the reservation: Reservations and Admit
// (a scenario's fixed placement) and the Placer (every layout it commits)
// call it.
func HoseReservations(t *topo.Topology, seed int64, vms []VMHose) []LinkRate {
	var c hoseCalc
	var out []LinkRate
	c.tenant(t, seed, vms, func(l int, r float64) {
		out = append(out, LinkRate{Link: l, Name: t.Links[l].Name, Rate: r})
	})
	return out
}

// hoseCalc holds the scratch space of the reservation computation so that a
// Placer can reuse it from tenant to tenant. The zero value is ready.
type hoseCalc struct {
	out, in []float64 // Σ out of senders, Σ in of receivers over each link
	stamp   []int     // last VM counted on the link (index+1)
	seen    []bool    // link is in touched
	touched []int
	routes  []pairRoute // the ECMP-routed VM pairs, in sender order
	byDst   [][]int

	// The topology the adjacency is for.
	top *topo.Topology
	adj [][]int
	// The tenant's servers: every VM's index into servers, the VMs of each,
	// and for every ordered pair of them the route if it is the pair's only
	// shortest path (index into paths; -1: several, -2: not known yet).
	local   map[int]int
	servers []int
	vmSrv   []int
	members [][]int
	pathIx  []int32
	paths   [][]int

	// On a tree topology (nil otherwise) the reservations come from
	// subtree sums; the scratch space of treeTenant.
	tree   *treeShape
	tnode  []treeNode
	tmark  []bool
	tnodes []int32
	tlinks []LinkRate
}

type pairRoute struct {
	src, dst int
	path     []int
}

// maxPairTable bounds the servers of one tenant for which the routes of
// server pairs are cached (the table has one entry per ordered pair).
const maxPairTable = 2048

// serverRoute returns the route from the tenant's server i to its server j
// if it is their only shortest path (no ECMP choice anywhere on it), or nil.
func (c *hoseCalc) serverRoute(t *topo.Topology, i, j int) []int {
	k := len(c.servers)
	if k <= maxPairTable {
		if x := c.pathIx[i*k+j]; x >= -1 {
			if x < 0 {
				return nil
			}
			return c.paths[x]
		}
	}
	// Walk towards b while every hop has a single next hop on a shortest
	// path (the candidates topo.Route chooses among). Not worth it for a
	// single VM pair: routing it costs as much.
	a, b := c.servers[i], c.servers[j]
	var path []int
	single := len(c.members[i]) == 1 && len(c.members[j]) == 1
	for u := a; u != b && !single; {
		want, next := t.Hops(u, b)-1, -1
		for _, x := range c.adj[u] {
			if t.Hops(t.Links[x].To, b) == want {
				if next >= 0 {
					next = -2
					break
				}
				next = x
			}
		}
		if next < 0 {
			path = nil
			break
		}
		path = append(path, next)
		u = t.Links[next].To
	}
	if single {
		path = nil
	}
	if k <= maxPairTable {
		if path == nil {
			c.pathIx[i*k+j] = -1
		} else {
			c.pathIx[i*k+j] = int32(len(c.paths))
			c.paths = append(c.paths, path)
		}
	}
	return path
}

// add counts the VM with the given stamp and rate on the links not yet
// counted for it.
func (c *hoseCalc) add(path []int, stamp int, rate float64, acc []float64) {
	for _, l := range path {
		if !c.seen[l] {
			c.seen[l] = true
			c.touched = append(c.touched, l)
		}
		if c.stamp[l] != stamp {
			c.stamp[l] = stamp
			acc[l] += rate
		}
	}
}

// tenant calls emit(link, rate) for every link with a nonzero reservation,
// in ascending link order.
//
// A VM counts as a sender over a link if its route to any other VM of the
// tenant crosses it, as a receiver if the route from any does. On a tree
// (treeShape) that is decided per link from subtree sums: O(n + m log m)
// for n VMs whose servers' paths to the root cover m nodes. Elsewhere
// (multi-rooted trees, meshes) pairs of servers joined by a single shortest
// path are routed once for all their VM pairs and the others VM pair by VM
// pair, with the pair's ECMP hash: O(n·k) server routes for n VMs on k
// servers plus one route per VM pair across an ECMP choice, O(n²) when
// every VM has its own server (and the hop distances to each of the k
// servers, O(k·nodes) memory).
func (c *hoseCalc) tenant(t *topo.Topology, seed int64, vms []VMHose, emit func(link int, rate float64)) {
	nl := len(t.Links)
	if len(c.out) < nl {
		c.out = make([]float64, nl)
		c.in = make([]float64, nl)
		c.stamp = make([]int, nl)
		c.seen = make([]bool, nl)
	}
	if c.top != t {
		c.top = t
		c.adj = make([][]int, len(t.Nodes))
		for _, l := range t.Links {
			c.adj[l.From] = append(c.adj[l.From], l.ID)
		}
		c.tree = newTreeShape(t)
	}
	if c.tree != nil {
		c.treeTenant(t, vms, emit)
		return
	}
	n := len(vms)
	// The tenant's servers.
	if c.local == nil {
		c.local = map[int]int{}
	}
	clear(c.local)
	c.servers, c.vmSrv = c.servers[:0], c.vmSrv[:0]
	for _, v := range vms {
		i, ok := c.local[v.Server]
		if !ok {
			i = len(c.servers)
			c.local[v.Server] = i
			c.servers = append(c.servers, v.Server)
		}
		c.vmSrv = append(c.vmSrv, i)
	}
	k := len(c.servers)
	if cap(c.members) < k {
		c.members = make([][]int, k)
	}
	c.members = c.members[:k]
	for i := range c.members {
		c.members[i] = c.members[i][:0]
	}
	for a, i := range c.vmSrv {
		c.members[i] = append(c.members[i], a)
	}
	c.paths = c.paths[:0]
	if k <= maxPairTable {
		if cap(c.pathIx) < k*k {
			c.pathIx = make([]int32, k*k)
		}
		c.pathIx = c.pathIx[:k*k]
		for i := range c.pathIx {
			c.pathIx[i] = -2
		}
	}

	// Senders, one after the other: every link of their routes counted
	// once. The ECMP-routed pairs are kept for the receivers. A pair
	// without a guarantee at either end is left out (it would add 0).
	c.routes = c.routes[:0]
	for a := range n {
		i := c.vmSrv[a]
		for j := range k {
			if j == i {
				continue
			}
			if path := c.serverRoute(t, i, j); path != nil {
				c.add(path, a+1, vms[a].Out, c.out)
				continue
			}
			for _, b := range c.members[j] {
				if vms[a].Out == 0 && vms[b].In == 0 {
					continue
				}
				path := t.Route(vms[a].Server, vms[b].Server, topo.PairHash(seed, vms[a].Name, vms[b].Name))
				c.routes = append(c.routes, pairRoute{a, b, path})
				c.add(path, a+1, vms[a].Out, c.out)
			}
		}
	}
	for _, l := range c.touched {
		c.stamp[l] = 0
	}
	// Receivers, one after the other.
	if cap(c.byDst) < n {
		c.byDst = make([][]int, n)
	}
	c.byDst = c.byDst[:n]
	for i := range c.byDst {
		c.byDst[i] = c.byDst[i][:0]
	}
	for x, r := range c.routes {
		c.byDst[r.dst] = append(c.byDst[r.dst], x)
	}
	for b := range n {
		j := c.vmSrv[b]
		for i := range k {
			if i == j {
				continue
			}
			if path := c.serverRoute(t, i, j); path != nil {
				c.add(path, b+1, vms[b].In, c.in)
			}
		}
		for _, x := range c.byDst[b] {
			c.add(c.routes[x].path, b+1, vms[b].In, c.in)
		}
	}
	slices.Sort(c.touched)
	for _, l := range c.touched {
		if r := min(c.out[l], c.in[l]); r > 0 {
			emit(l, r)
		}
		c.out[l], c.in[l], c.stamp[l], c.seen[l] = 0, 0, 0, false
	}
	c.touched = c.touched[:0]
	for x := range c.routes {
		c.routes[x].path = nil
	}
	clear(c.paths)
}
