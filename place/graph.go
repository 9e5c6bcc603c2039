package place

import (
	"math"
	"slices"
	"strconv"

	"github.com/bulkhead-dc/bulkhead/topo"
)

// On a topology that is not a (multi-rooted) tree — a random graph — there
// are no layers of groups. The search grows balls instead: layer r holds,
// for every switch w, the servers within r hops of w (layer 0: every server
// alone), each set once, at the first layer it appears; the search stops at
// the first layer with a ball of every server. A ball's tenant routing (TR)
// joins every server to the root w by the best of its k shortest paths
// (Yen's algorithm, by hops): the one with the most headroom for the
// tenant. The layout is QShare's greedy on the TR, and the exact check on
// the simulator's routes decides.

// ball is a candidate on a random graph.
type ball struct {
	layer   int
	root    int // switch node ID; the server itself at layer 0
	servers []int
}

type graphState struct {
	balls   [][]ball           // per layer
	paths   map[[2]int][][]int // (server, root) → up to K paths, links server → root
	servers []int
}

func newGraphState(t *topo.Topology) *graphState {
	gs := &graphState{paths: map[[2]int][][]int{}}
	for _, n := range t.Servers() {
		gs.servers = append(gs.servers, n.ID)
	}
	var layer0 []ball
	for _, s := range gs.servers {
		layer0 = append(layer0, ball{layer: 0, root: s, servers: []int{s}})
	}
	gs.balls = append(gs.balls, layer0)
	seen := map[string]bool{}
	for r := 1; ; r++ {
		var layer []ball
		full := false
		for _, n := range t.Nodes {
			if n.Kind != topo.Switch {
				continue
			}
			var in []int
			for _, s := range gs.servers {
				if h := t.Hops(s, n.ID); h >= 0 && h <= r {
					in = append(in, s)
				}
			}
			if len(in) == 0 {
				continue
			}
			key := make([]byte, 0, 4*len(in))
			for _, s := range in {
				key = strconv.AppendInt(key, int64(s), 10)
				key = append(key, ',')
			}
			full = full || len(in) == len(gs.servers)
			if seen[string(key)] {
				continue
			}
			seen[string(key)] = true
			layer = append(layer, ball{layer: r, root: n.ID, servers: in})
		}
		gs.balls = append(gs.balls, layer)
		if full || r > len(t.Nodes) {
			break
		}
	}
	return gs
}

// kPaths returns up to k loopless shortest paths (by hops) from src to dst
// as link IDs, shortest first (Yen's algorithm); ties are broken by link
// IDs, so the result is deterministic. Servers other than the ends are never
// crossed.
func (p *Placer) kPaths(src, dst, k int) [][]int {
	key := [2]int{src, dst}
	if ps, ok := p.gen.paths[key]; ok {
		return ps
	}
	t := p.top
	bannedNode := make([]bool, len(t.Nodes))
	bannedLink := make([]bool, len(t.Links))
	first := p.bfsPath(src, dst, bannedNode, bannedLink)
	if first == nil {
		p.gen.paths[key] = nil
		return nil
	}
	A := [][]int{first}
	var B [][]int
	for len(A) < k {
		prev := A[len(A)-1]
		for i := range prev {
			spur := src
			if i > 0 {
				spur = t.Links[prev[i-1]].To
			}
			rootPath := prev[:i]
			clear(bannedNode)
			clear(bannedLink)
			for _, a := range A {
				if len(a) > i && slices.Equal(a[:i], rootPath) {
					bannedLink[a[i]] = true
				}
			}
			for _, l := range rootPath {
				bannedNode[t.Links[l].From] = true
			}
			tail := p.bfsPath(spur, dst, bannedNode, bannedLink)
			if tail == nil {
				continue
			}
			cand := append(slices.Clone(rootPath), tail...)
			dup := false
			for _, x := range append(A[:len(A):len(A)], B...) {
				if slices.Equal(x, cand) {
					dup = true
					break
				}
			}
			if !dup {
				B = append(B, cand)
			}
		}
		if len(B) == 0 {
			break
		}
		best := 0
		for j := range B {
			if len(B[j]) < len(B[best]) || len(B[j]) == len(B[best]) && slices.Compare(B[j], B[best]) < 0 {
				best = j
			}
		}
		A = append(A, B[best])
		B = slices.Delete(B, best, best+1)
	}
	p.gen.paths[key] = A
	return A
}

// bfsPath is a shortest path from src to dst avoiding banned nodes and
// links, never through a server other than src and dst; nil if none.
func (p *Placer) bfsPath(src, dst int, bannedNode, bannedLink []bool) []int {
	t := p.top
	if bannedNode[src] {
		return nil
	}
	via := make([]int, len(t.Nodes)) // link that reached the node, -1 unvisited
	for i := range via {
		via[i] = -1
	}
	via[src] = -2
	queue := []int{src}
	for len(queue) > 0 && via[dst] == -1 {
		u := queue[0]
		queue = queue[1:]
		if u != src && t.Nodes[u].Kind == topo.Server {
			continue
		}
		for _, l := range p.adj[u] {
			v := t.Links[l].To
			if via[v] != -1 || bannedLink[l] || bannedNode[v] {
				continue
			}
			via[v] = l
			queue = append(queue, v)
		}
	}
	if via[dst] == -1 {
		return nil
	}
	var path []int
	for v := dst; v != src; v = t.Links[via[v]].From {
		path = append(path, via[v])
	}
	slices.Reverse(path)
	return path
}

// ballLayout is QShare's get_optimal_allocation on a ball: repeatedly take
// the server with the most usable slots — free slots (and the WCS limit),
// further limited by the headroom of its best path to the root for the hose
// of the VMs it would hold, less what the VMs already laid out take on the
// same links — and give it as many VMs as it can take (largest first); in
// Oktopus's variant the servers are taken in order. It returns nil if the
// VMs do not fit.
func (p *Placer) ballLayout(tr *tenantReq, b *ball, largestFirst bool) *Placement {
	extra := map[int]float64{} // link → what this layout already takes
	head := func(l int) float64 { return p.headroom(l) - extra[l] }
	done := map[int]bool{}
	var servers, counts []int
	remaining := tr.n
	for remaining > 0 {
		best, bestM := -1, 0
		var bestPath []int
		for _, s := range b.servers {
			c := min(p.free[s], tr.perServer, remaining)
			if done[s] || c == 0 {
				continue
			}
			var paths [][]int
			if s != b.root {
				paths = p.kPaths(s, b.root, p.opt.K)
				if len(paths) == 0 {
					continue
				}
			} else {
				paths = [][]int{nil}
			}
			m, path := 0, []int(nil)
			for _, pt := range paths {
				up, down := math.Inf(1), math.Inf(1)
				for _, l := range pt {
					up = min(up, head(l))
					down = min(down, head(p.top.Links[l].Reverse))
				}
				x := c
				for x > 0 && (tr.reqUp[x] > up || tr.reqDown[x] > down) {
					x--
				}
				if x > m {
					m, path = x, pt
				}
			}
			if m > bestM {
				best, bestM, bestPath = s, m, path
				if !largestFirst {
					break
				}
			}
		}
		if best < 0 {
			return nil
		}
		done[best] = true
		servers = append(servers, best)
		counts = append(counts, bestM)
		remaining -= bestM
		for _, l := range bestPath {
			extra[l] += tr.reqUp[bestM]
			extra[p.top.Links[l].Reverse] += tr.reqDown[bestM]
		}
	}
	return p.layout(tr, servers, counts)
}

// exactCost is the bandwidth cost (Σ of the exact reservations) and the
// queue-occupation cost of a checked placement.
func (p *Placer) exactCost(pl *Placement) (bw float64, queues int) {
	for _, r := range pl.Links {
		bw += r.Rate
		queues = max(queues, p.cnt[r.Link])
	}
	return bw, queues
}

// graphPlace is treePlace on a random graph: balls layer by layer, every
// layout checked exactly.
func (p *Placer) graphPlace(tr *tenantReq) *Placement {
	qshare := p.opt.Algorithm == QShare
	var alpha float64
	if qshare {
		alpha = p.alpha()
	}
	for _, layer := range p.gen.balls {
		var cands []candidate
		tried := 0
		for i := range layer {
			b := &layer[i]
			free := 0
			for _, s := range b.servers {
				free += min(p.free[s], tr.perServer)
			}
			if free < tr.n {
				continue
			}
			tried++
			pl := p.ballLayout(tr, b, qshare)
			if pl == nil || !p.fits(pl) {
				continue
			}
			pl.Layer, pl.Root = b.layer, p.top.Nodes[b.root].Name
			pl.BandwidthCost, pl.QueueCost = p.exactCost(pl)
			if !qshare {
				pl.Candidates = tried
				return pl
			}
			cands = append(cands, candidate{pl: pl, bandwidth: pl.BandwidthCost, queues: pl.QueueCost, freeAfter: free - tr.n})
		}
		if len(cands) > 0 {
			elect(cands, alpha)
			c := cands[0]
			c.pl.Candidates, c.pl.Alpha = len(cands), alpha
			return c.pl
		}
	}
	return nil
}

// graphCompact lays the tenant out in the first ball (layer by layer) with
// enough slots, servers with the most free slots first.
func (p *Placer) graphCompact(tr *tenantReq) *Placement {
	for _, layer := range p.gen.balls {
		for i := range layer {
			b := &layer[i]
			servers := slices.Clone(b.servers)
			slices.SortStableFunc(servers, func(a, c int) int {
				return min(p.free[c], tr.perServer) - min(p.free[a], tr.perServer)
			})
			var counts []int
			remaining := tr.n
			for _, s := range servers {
				x := min(p.free[s], tr.perServer, remaining)
				counts = append(counts, x)
				remaining -= x
			}
			if remaining > 0 {
				continue
			}
			pl := p.layout(tr, servers, counts)
			pl.Layer, pl.Root = b.layer, p.top.Nodes[b.root].Name
			return pl
		}
	}
	return nil
}
