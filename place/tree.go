package place

import (
	"math"
	"slices"
)

// treeState is the scratch space of the search on a hierarchy.
type treeState struct {
	n        int
	words    int
	backing  []uint64
	f        []countSet // per group: the VM counts it can hold
	hi       []int      // largest member of f
	interval []bool     // f == {0..hi}
	freeG    []int      // free slots per group
}

func (ts *treeState) reset(groups, n int) {
	ts.n, ts.words = n, words(n)
	if need := groups * ts.words; cap(ts.backing) < need {
		ts.backing = make([]uint64, need)
	} else {
		ts.backing = ts.backing[:need]
	}
	if cap(ts.f) < groups {
		ts.f = make([]countSet, groups)
		ts.hi = make([]int, groups)
		ts.interval = make([]bool, groups)
		ts.freeG = make([]int, groups)
	}
	ts.f, ts.hi, ts.interval, ts.freeG = ts.f[:groups], ts.hi[:groups], ts.interval[:groups], ts.freeG[:groups]
	for g := range groups {
		ts.f[g] = countSet(ts.backing[g*ts.words : (g+1)*ts.words])
	}
}

// groupHeadroom is the least headroom over the group's uplinks and over its
// downlinks (+Inf for the root).
func (p *Placer) groupHeadroom(g *group) (up, down float64) {
	up, down = math.Inf(1), math.Inf(1)
	for _, l := range g.up {
		up = min(up, p.headroom(l))
	}
	for _, l := range g.down {
		down = min(down, p.headroom(l))
	}
	return up, down
}

// treeFeasible computes, bottom-up, the set of VM counts every group can
// hold: a server up to its free slots (and the WCS limit), a group any sum
// of its children's counts; with bandwidth, only the counts whose hose
// requirement fits the group's uplinks and downlinks (Oktopus's M_v, kept as
// a set because the requirement min(m, N−m)·B is not monotone in m).
func (p *Placer) treeFeasible(tr *tenantReq, bandwidth bool) {
	h, ts := p.hier, &p.tree
	n := tr.n
	ts.reset(len(h.groups), n)
	acc := make(countSet, ts.words)
	tmp := make(countSet, ts.words)
	for gi := range h.groups {
		g := &h.groups[gi]
		f := ts.f[gi]
		if g.level == 0 {
			ts.freeG[gi] = p.free[g.server]
			f.setRange(min(p.free[g.server], tr.perServer, n))
		} else {
			ts.freeG[gi] = 0
			allInterval, sumHi := true, 0
			for _, c := range g.children {
				ts.freeG[gi] += ts.freeG[c]
				if ts.hi[c] == 0 {
					continue
				}
				allInterval = allInterval && ts.interval[c]
				sumHi += ts.hi[c]
			}
			if allInterval {
				f.setRange(min(sumHi, n))
			} else {
				acc.clear()
				acc.set(0)
				for _, c := range g.children {
					if ts.hi[c] == 0 {
						continue
					}
					sum(tmp, acc, ts.f[c], n)
					acc, tmp = tmp, acc
				}
				copy(f, acc)
			}
		}
		if bandwidth && gi != h.root {
			up, down := p.groupHeadroom(g)
			if tr.maxUp > up || tr.maxDown > down {
				for m := 1; m <= n; m++ {
					if f.has(m) && (tr.reqUp[m] > up || tr.reqDown[m] > down) {
						f[m/64] &^= 1 << (uint(m) % 64)
					}
				}
			}
		}
		ts.hi[gi] = f.maxLE(n)
		ts.interval[gi] = f.count() == ts.hi[gi]+1
	}
}

// visit is a group and the VMs a layout puts in it.
type visit struct{ g, m int }

// treeLayout is a layout inside a group: per-server counts and the groups
// visited on the way.
type treeLayout struct {
	servers, counts []int
	visits          []visit
}

// treeAlloc puts m VMs into group g (m must be in its feasible set),
// filling its children one after the other with as many as each can take
// while the rest can still be placed: in topology order (Oktopus), or the
// child that can take the most first (QShare's "largest usable slots").
func (p *Placer) treeAlloc(g, m int, largestFirst bool, out *treeLayout) {
	h, ts := p.hier, &p.tree
	out.visits = append(out.visits, visit{g, m})
	gr := &h.groups[g]
	if gr.level == 0 {
		out.servers = append(out.servers, gr.server)
		out.counts = append(out.counts, m)
		return
	}
	kids := make([]int, 0, len(gr.children))
	for _, c := range gr.children {
		if ts.hi[c] > 0 {
			kids = append(kids, c)
		}
	}
	if largestFirst {
		slices.SortStableFunc(kids, func(a, b int) int { return ts.f[b].maxLE(m) - ts.f[a].maxLE(m) })
	}
	// suf[j]: the counts kids[j:] can hold together.
	k := len(kids)
	allInterval := true
	for _, c := range kids {
		allInterval = allInterval && ts.interval[c]
	}
	sufHi := make([]int, k+1)
	for j := k - 1; j >= 0; j-- {
		sufHi[j] = min(sufHi[j+1]+ts.hi[kids[j]], ts.n)
	}
	var suf []countSet
	if !allInterval {
		suf = make([]countSet, k+1)
		suf[k] = make(countSet, ts.words)
		suf[k].set(0)
		for j := k - 1; j >= 0; j-- {
			suf[j] = make(countSet, ts.words)
			sum(suf[j], ts.f[kids[j]], suf[j+1], ts.n)
		}
	}
	r := m
	for j, c := range kids {
		if r == 0 {
			break
		}
		f := ts.f[c]
		x := f.maxLE(r)
		if allInterval {
			// Intervals: the most this child takes leaves what the rest can hold.
			x = min(r, ts.hi[c])
		} else {
			for x > 0 && !suf[j+1].has(r-x) {
				x = f.maxLE(x - 1)
			}
		}
		if x > 0 {
			p.treeAlloc(c, x, largestFirst, out)
			r -= x
		}
	}
}

// cutCost is the bandwidth cost of a layout in group root (the hose
// requirement on every generalized link below it, counted once) and its
// queue-occupation cost (the most tenants on any port it uses).
func (p *Placer) cutCost(tr *tenantReq, root int, lay *treeLayout) (bw float64, queues int) {
	for _, v := range lay.visits {
		if v.g == root {
			continue
		}
		g := &p.hier.groups[v.g]
		up, down := tr.reqUp[v.m], tr.reqDown[v.m]
		bw += up + down
		if up > 0 {
			for _, l := range g.up {
				queues = max(queues, p.cnt[l])
			}
		}
		if down > 0 {
			for _, l := range g.down {
				queues = max(queues, p.cnt[l])
			}
		}
	}
	return bw, queues
}

// treePlace searches the hierarchy layer by layer: at the lowest layer
// with a group that can hold the tenant, Oktopus takes the first such group
// whose layout passes the exact check; QShare lays the tenant out in every
// such group and elects one by cost. It returns nil when no layer works.
func (p *Placer) treePlace(tr *tenantReq) *Placement {
	h, ts := p.hier, &p.tree
	p.treeFeasible(tr, true)
	qshare := p.opt.Algorithm == QShare
	var alpha float64
	if qshare {
		alpha = p.alpha()
	}
	for level, gs := range h.byLevel {
		var cands []candidate
		tried := 0
		for _, g := range gs {
			if !ts.f[g].has(tr.n) {
				continue
			}
			tried++
			var lay treeLayout
			p.treeAlloc(g, tr.n, qshare, &lay)
			c := candidate{servers: lay.servers, counts: lay.counts, layer: level, root: h.groups[g].name, freeAfter: ts.freeG[g] - tr.n}
			c.bandwidth, c.queues = p.cutCost(tr, g, &lay)
			if !qshare {
				if pl := p.try(tr, &c); pl != nil {
					pl.Candidates = tried
					return pl
				}
				continue
			}
			cands = append(cands, c)
		}
		if len(cands) == 0 {
			continue
		}
		elect(cands, alpha)
		for i := range cands {
			if pl := p.try(tr, &cands[i]); pl != nil {
				pl.Candidates, pl.Alpha = len(cands), alpha
				return pl
			}
		}
	}
	return nil
}

// try builds the candidate's placement and returns it if its exact
// reservations fit, nil otherwise.
func (p *Placer) try(tr *tenantReq, c *candidate) *Placement {
	pl := p.layout(tr, c.servers, c.counts)
	pl.Layer, pl.Root, pl.BandwidthCost, pl.QueueCost = c.layer, c.root, c.bandwidth, c.queues
	if !p.fits(pl) {
		return nil
	}
	return pl
}

// compact is the fallback and the diagnosis: the most compact layout by
// slots alone (the lowest layer's first group with enough slots, filled
// largest first). If its exact reservations fit, it is the placement;
// otherwise the link it would oversubscribe the most is the rejection.
func (p *Placer) compact(tr *tenantReq) (*Placement, *Rejection) {
	var pl *Placement
	if p.hier != nil {
		p.treeFeasible(tr, false)
	search:
		for level, gs := range p.hier.byLevel {
			for _, g := range gs {
				if p.tree.f[g].has(tr.n) {
					var lay treeLayout
					p.treeAlloc(g, tr.n, true, &lay)
					pl = p.layout(tr, lay.servers, lay.counts)
					pl.Layer, pl.Root = level, p.hier.groups[g].name
					pl.BandwidthCost, pl.QueueCost = p.cutCost(tr, g, &lay)
					break search
				}
			}
		}
	} else {
		pl = p.graphCompact(tr)
	}
	// Place checked that the slots suffice, so pl is not nil.
	if p.fits(pl) {
		pl.Candidates = 1
		return pl, nil
	}
	l, load := p.worst(pl.Links)
	return nil, &Rejection{Tenant: tr.name, Resource: "link", Link: p.top.Links[l].Name, Load: load, Capacity: p.top.Links[l].Capacity}
}
