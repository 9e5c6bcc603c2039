package topo

// distances returns the hop distance of every node to dst (-1 where dst is
// unreachable). Links are full duplex, so this is a BFS from dst. The result
// is cached per destination and must not be modified.
func (t *Topology) distances(dst int) []int32 {
	if p := t.dist[dst].Load(); p != nil {
		return *p
	}
	d := make([]int32, len(t.Nodes))
	for i := range d {
		d[i] = -1
	}
	d[dst] = 0
	queue := make([]int, 1, len(t.Nodes))
	queue[0] = dst
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, h := range t.adj[u] {
			if d[h.to] < 0 {
				d[h.to] = d[u] + 1
				queue = append(queue, int(h.to))
			}
		}
	}
	if t.dist[dst].CompareAndSwap(nil, &d) {
		return d
	}
	return *t.dist[dst].Load()
}

func (t *Topology) valid(id int) bool { return id >= 0 && id < len(t.Nodes) }

// Hops returns the number of links on a shortest path from src to dst, or
// -1 if dst cannot be reached.
func (t *Topology) Hops(src, dst int) int {
	if !t.valid(src) || !t.valid(dst) {
		return -1
	}
	return int(t.distances(dst)[src])
}

// Route returns the link IDs of one shortest path from src to dst (node
// IDs), nil if src == dst or dst cannot be reached. Where a node has several
// next hops on shortest paths (ECMP), the choice is made by hash, mixed with
// the node's ID so that the choices at successive hops are independent:
// the same hash always gives the same path, different hashes spread over
// the paths. On trees the path is unique and hash is irrelevant. The slice
// is the caller's.
func (t *Topology) Route(src, dst int, hash uint64) []int {
	if src == dst || !t.valid(src) || !t.valid(dst) {
		return nil
	}
	d := t.distances(dst)
	if d[src] < 0 {
		return nil
	}
	path := make([]int, 0, d[src])
	var buf [64]hop
	for u := src; u != dst; {
		want := d[u] - 1
		cand := buf[:0]
		for _, h := range t.adj[u] {
			if d[h.to] == want {
				cand = append(cand, h)
			}
		}
		h := cand[0]
		if len(cand) > 1 {
			h = cand[mix(hash, u)%uint64(len(cand))]
		}
		path = append(path, int(h.link))
		u = int(h.to)
	}
	return path
}

// Paths returns every shortest path from src to dst as link IDs, in a
// deterministic order; nil if src == dst or dst cannot be reached. The
// number of paths can grow fast on dense graphs; it is meant for tests,
// reports and small graphs.
func (t *Topology) Paths(src, dst int) [][]int {
	if src == dst || !t.valid(src) || !t.valid(dst) {
		return nil
	}
	d := t.distances(dst)
	if d[src] < 0 {
		return nil
	}
	var out [][]int
	cur := make([]int, 0, d[src])
	var walk func(u int)
	walk = func(u int) {
		if u == dst {
			out = append(out, append([]int(nil), cur...))
			return
		}
		for _, l := range t.out[u] {
			if v := t.Links[l].To; d[v] == d[u]-1 {
				cur = append(cur, l)
				walk(v)
				cur = cur[:len(cur)-1]
			}
		}
	}
	walk(src)
	return out
}

// PairHash is the ECMP hash of the VM pair src → dst (VM names) in a
// scenario with the given seed. The simulator routes a pair's traffic, and
// admission control (package place) its reservation, with
// Route(srcServer, dstServer, PairHash(seed, src, dst)), so both use the same
// path.
func PairHash(seed int64, src, dst string) uint64 {
	// FNV-1a over src, a zero byte and dst, then mixed with the seed.
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(src); i++ {
		h = (h ^ uint64(src[i])) * prime
	}
	h *= prime // the separator: h ^ 0
	for i := 0; i < len(dst); i++ {
		h = (h ^ uint64(dst[i])) * prime
	}
	return splitmix64(h ^ splitmix64(uint64(seed)))
}

// mix derives the hash used at node u from a path hash.
func mix(hash uint64, u int) uint64 {
	return splitmix64(hash ^ splitmix64(uint64(u)+0x9e3779b97f4a7c15))
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ConnHash is the ECMP hash of connection k of a pair (or of a request
// flow's hop, connection 0): the simulator spreads a pair's connections
// over equal-cost paths by it, the testbed routes request flows by it, and
// the controller allocates request flows on the paths it gives.
func ConnHash(seed int64, src, dst string, k int) uint64 {
	h := uint64(14695981039346656037)
	mix := func(b byte) { h ^= uint64(b); h *= 1099511628211 }
	for i := 0; i < 8; i++ {
		mix(byte(seed >> (8 * i)))
	}
	for i := 0; i < len(src); i++ {
		mix(src[i])
	}
	mix(0)
	for i := 0; i < len(dst); i++ {
		mix(dst[i])
	}
	mix(0)
	for i := 0; i < 8; i++ {
		mix(byte(k >> (8 * i)))
	}
	return h
}
