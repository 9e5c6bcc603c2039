package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// satTol is the relative tolerance under which a resource counts as full.
const satTol = 1e-6

// VSwitchCapacity is what a hypervisor's virtual switch carries between VMs
// of the same server (bits/s).
const VSwitchCapacity = 100e9

// physics recomputes every connection's rate if anything changed since the
// last tick (active connections, limiter rates). Rates are a function of
// those alone, so unchanged ticks reuse the previous answer.
func (e *engine) physics() {
	if !e.dirty {
		return
	}
	e.catchUp() // the ticks pending had the state about to change
	e.dirty = false
	if e.clock != nil {
		e.clock.ph.Solves++
	}
	e.buildResources()
	e.solveUDP()
	e.solveTCP()
	e.markSaturation()
}

// resource order: physical links [0, L), then the limiters in force.
func (e *engine) buildResources() {
	res := e.prob.Resources[:0]
	for _, l := range e.tp.Links {
		res = append(res, alloc.Resource{ID: l.Name, Capacity: l.Capacity})
	}
	// A limiter's resource ID is made once, the first time it is in
	// force.
	add := func(rate float64, id string) int {
		if math.IsInf(rate, 1) {
			return -1
		}
		res = append(res, alloc.Resource{ID: id, Capacity: rate})
		return len(res) - 1
	}
	inForce := func(rate float64, id string) bool { return !math.IsInf(rate, 1) && id == "" }
	if cap(e.limRes) < len(e.pairs) {
		e.limRes = make([]int32, len(e.pairs))
	}
	e.limRes = e.limRes[:len(e.pairs)]
	for len(e.limID) < len(e.pairs) {
		e.limID = append(e.limID, "")
	}
	for i := range e.pairs {
		p := &e.pairs[i]
		if inForce(p.limRate, e.limID[i]) {
			e.limID[i] = "pair:" + p.id.Src + "->" + p.id.Dst
		}
		e.limRes[i] = int32(add(p.limRate, e.limID[i]))
	}
	for i := range e.vms {
		v := &e.vms[i]
		if inForce(v.egRate, v.egID) {
			v.egID = "egress:" + v.name
		}
		if inForce(v.inRate, v.inID) {
			v.inID = "ingress:" + v.name
		}
		v.egRes = add(v.egRate, v.egID)
		v.inRes = add(v.inRate, v.inID)
	}
	for i := range e.rflows {
		f := &e.rflows[i]
		if inForce(f.enfRate, f.enfID) {
			f.enfID = "enforcer:" + f.id.Src + "->" + f.id.Dst
		}
		f.enfRes = add(f.enfRate, f.enfID)
	}
	for i := range e.scheds {
		st := &e.scheds[i]
		st.res = -1
		if math.IsInf(st.rate, 1) {
			continue
		}
		dir := "egress-sched:"
		if st.dir == mech.Ingress {
			dir = "ingress-sched:"
		}
		res = append(res, alloc.Resource{ID: dir + e.tp.Nodes[st.host].Name, Capacity: st.rate, Classes: st.classes()})
		st.res = len(res) - 1
	}
	// The hypervisor's virtual switch carries traffic between VMs of one
	// server.
	for i := range e.hosts {
		h := e.hosts[i]
		res = append(res, alloc.Resource{ID: "vswitch:" + h.name, Capacity: VSwitchCapacity})
		h.vswitch = len(res) - 1
	}
	for i := range e.ports {
		ps := &e.ports[i]
		if ps.res = -1; e.portOf[ps.link] == i {
			ps.res = ps.link
			res[ps.link].Classes = ps.classes()
		}
	}
	e.prob.Resources = res
	R := len(res)
	if cap(e.classedAt) < R {
		e.classedAt = make([]*classedRes, R)
	}
	e.classedAt = e.classedAt[:R]
	clear(e.classedAt)
	for i := range e.scheds {
		if r := e.scheds[i].res; r >= 0 {
			e.classedAt[r] = &e.scheds[i].classedRes
		}
	}
	for i := range e.ports {
		if r := e.ports[i].res; r >= 0 {
			e.classedAt[r] = &e.ports[i].classedRes
		}
	}
	e.classed = false
	for _, c := range e.classedAt {
		if c != nil {
			e.classed = true
			break
		}
	}
	e.capacity = grow(e.capacity, R)
	for r := range res {
		e.capacity[r] = res[r].Capacity
	}
	e.udpLoad = grow(e.udpLoad, R)
	e.load = grow(e.load, R)
	e.udpIn = grow(e.udpIn, R)
	e.udpScale = grow(e.udpScale, R)
	if cap(e.sat) < R {
		e.sat = make([]bool, R)
	}
	e.sat = e.sat[:R]
}

// grow returns s resliced to length n, or a new slice if it is too short;
// its contents are undefined.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// path appends connection c's resources in the order its packets meet them:
// pair limiter, VM egress limiter, the sender host's egress scheduler,
// links, the receiver host's ingress scheduler, VM ingress limiter.
func (e *engine) path(buf []hop, c *connState) []hop {
	p := &e.pairs[c.pair]
	src, dst := &e.vms[p.src], &e.vms[p.dst]
	if r := int(e.limRes[c.pair]); r >= 0 {
		buf = append(buf, hop{r, -1})
	}
	if src.egRes >= 0 {
		buf = append(buf, hop{src.egRes, -1})
	}
	if src.egSched >= 0 && len(c.links) > 0 {
		if st := &e.scheds[src.egSched]; st.res >= 0 {
			buf = append(buf, hop{st.res, st.classOf(src.name)})
		}
	}
	for _, l := range c.links {
		buf = append(buf, hop{l, e.linkClass(l, p.tenant)})
	}
	if len(c.links) == 0 {
		buf = append(buf, hop{e.hosts[e.hostN[e.tp.Nodes[src.host].Name]].vswitch, -1})
	}
	if dst.inSched >= 0 && len(c.links) > 0 {
		if st := &e.scheds[dst.inSched]; st.res >= 0 {
			buf = append(buf, hop{st.res, st.classOf(dst.name)})
		}
	}
	if dst.inRes >= 0 {
		buf = append(buf, hop{dst.inRes, -1})
	}
	return buf
}

// isIngressSched reports whether resource r is a host ingress scheduler.
func (e *engine) isIngressSched(r int) bool {
	for i := range e.scheds {
		if e.scheds[i].res == r {
			return e.scheds[i].dir == mech.Ingress
		}
	}
	return false
}

// solveUDP finds what unresponsive traffic gets: at every resource where it
// arrives faster than the capacity, each UDP connection keeps a share in
// proportion to its arrival rate (drop-tail), hop by hop; at a scheduler,
// per class (see schedState). A few sweeps of the fixed point settle the
// upstream/downstream interplay.
func (e *engine) solveUDP() {
	for r := range e.udpScale {
		e.udpScale[r] = 1
		e.udpLoad[r] = 0
	}
	for _, st := range e.classedAt {
		if st != nil {
			for k := range st.udpScale {
				st.udpScale[k], st.tcp[k] = 1, false
			}
		}
	}
	any := false
	for i := range e.conns {
		if !e.classed && e.activeUDP == 0 {
			break // no UDP to find and no class to mark
		}
		c := &e.conns[i]
		if !c.active {
			continue
		}
		if c.udp {
			any = true
			continue
		}
		if !e.classed {
			continue
		}
		// Classes with TCP ask a scheduler for all they can get.
		for _, h := range e.path(e.hops[:0], c) {
			if h.cls >= 0 {
				e.classedAt[h.r].tcp[h.cls] = true
			}
		}
	}
	for i := range e.rflows {
		f := &e.rflows[i]
		if !f.active {
			continue
		}
		for _, links := range [][]int{f.fwd, f.rev} {
			for _, l := range links {
				if k := e.linkClass(l, f.tenant); k >= 0 && e.classedAt[l] != nil {
					e.classedAt[l].tcp[k] = true
				}
			}
		}
	}
	if !any {
		return
	}
	scale := func(h hop) float64 {
		if h.cls >= 0 {
			return e.classedAt[h.r].udpScale[h.cls]
		}
		return e.udpScale[h.r]
	}
	for sweep := 0; sweep < 6; sweep++ {
		for r := range e.udpIn {
			e.udpIn[r] = 0
		}
		for _, st := range e.classedAt {
			if st != nil {
				clear(st.udpIn)
			}
		}
		for i := range e.conns {
			c := &e.conns[i]
			if !c.active || !c.udp {
				continue
			}
			a := c.offered
			e.hops = e.path(e.hops[:0], c)
			for _, h := range e.hops {
				e.udpIn[h.r] += a
				if h.cls >= 0 {
					e.classedAt[h.r].udpIn[h.cls] += a
				}
				a *= scale(h)
			}
		}
		for r, in := range e.udpIn {
			s := 1.0
			if in > e.capacity[r] {
				s = e.capacity[r] / in
			}
			e.udpScale[r] = s
		}
		for _, st := range e.classedAt {
			if st == nil {
				continue
			}
			for k := range st.dem {
				st.dem[k] = st.udpIn[k]
				if st.tcp[k] {
					st.dem[k] = math.Inf(1)
				}
			}
			wfqShares(e.capacity[st.res], st.weights, st.dem, st.share)
			for k, in := range st.udpIn {
				st.udpScale[k] = 1
				if in > st.share[k] {
					st.udpScale[k] = st.share[k] / in
				}
			}
		}
	}
	L := len(e.tp.Links)
	for i := range e.conns {
		c := &e.conns[i]
		if !c.active || !c.udp {
			continue
		}
		a := c.offered
		drop, inDrop := 0.0, 0.0
		sent := -1.0
		e.hops = e.path(e.hops[:0], c)
		for _, h := range e.hops {
			if h.r < L && sent < 0 {
				sent = a // what left the sender's host
			}
			pass := a * scale(h)
			if h.r < L {
				drop += a - pass
			} else if e.isIngressSched(h.r) {
				inDrop += a - pass
			}
			e.udpLoad[h.r] += pass
			a = pass
		}
		c.rate = a
		if sent < 0 {
			sent = a
		}
		c.sent = sent
		c.drop = drop + inDrop
		c.inDrop = inDrop
	}
}

// solveTCP shares what UDP leaves between TCP connections, one unit of
// weight per connection, by weighted max-min, together with the request
// flows; where request flows meet appliances the appliance stage caps them
// and the network is solved again until both stages agree.
func (e *engine) solveTCP() {
	for r := range e.prob.Resources {
		e.prob.Resources[r].Capacity = math.Max(0, e.capacity[r]-e.udpLoad[r])
	}
	for i := range e.rflows {
		f := &e.rflows[i]
		f.appCap = math.Inf(1)
		for k := range f.stations {
			f.stations[k].cap = math.Inf(1)
		}
	}
	for iter := 0; ; iter++ {
		e.solveNetwork()
		if len(e.rflowSlot) == 0 || iter >= maxApplianceRounds {
			break
		}
		if !e.applianceStage() {
			break
		}
	}
	e.split(len(e.tcpConns), len(e.tcpConns), func(_, lo, hi int) {
		for f := lo; f < hi; f++ {
			e.conns[e.tcpConns[f]].rate = e.tcpRates[f]
		}
	})
	for k, i := range e.rflowSlot {
		e.rflows[i].rate = e.tcpRates[len(e.tcpConns)+k]
	}
}

// maxApplianceRounds bounds the network/appliance alternation.
const maxApplianceRounds = 8

// solveNetwork builds and solves the max-min problem of TCP connections and
// request flows.
func (e *engine) solveNetwork() {
	// The flows and their uses are those of the last time unless a
	// connection or a limiter came or went since. (Schedulers, switch
	// ports' queues and request flows change them in other ways: with
	// any of those the problem is built every time.)
	same := len(e.rflows) == 0 && len(e.scheds) == 0 && len(e.ports) == 0 && !e.classed
	if same && e.builtOK && e.built == e.shape {
		e.solveBuilt(true)
		return
	}
	e.built, e.builtOK = e.shape, same
	e.probGen++
	// Room for every connection and for a path of 8 uses each (a
	// limiter, a VM's, up to 6 links; appendRequestFlows adds what more
	// it needs), so that a large problem is not copied as it grows.
	flows := slices.Grow(e.prob.Flows[:0], len(e.conns))
	e.tcpConns = e.tcpConns[:0]
	e.rflowSlot = e.rflowSlot[:0]
	uses := slices.Grow(e.uses[:0], 8*len(e.conns))
	for i := range e.conns {
		c := &e.conns[i]
		if !c.active || c.udp {
			continue
		}
		e.hops = e.path(e.hops[:0], c)
		start := len(uses)
		for _, h := range e.hops {
			u := alloc.Use{Resource: h.r, Coef: 1}
			if h.cls >= 0 {
				u.Class = e.classedAt[h.r].names[h.cls]
			}
			uses = append(uses, u)
		}
		flows = append(flows, alloc.Flow{ID: c.id, Demand: c.appCap, Weight: 1, Uses: uses[start:len(uses):len(uses)]})
		e.tcpConns = append(e.tcpConns, i)
	}
	flows, uses = e.appendRequestFlows(flows, uses)
	// uses may have been reallocated while appending: re-slice every flow
	// into the final backing array.
	off := 0
	for f := range flows {
		n := len(flows[f].Uses)
		flows[f].Uses = uses[off : off+n : off+n]
		off += n
	}
	e.uses = uses
	e.prob.Flows = flows
	e.solveBuilt(false)
}

// solveBuilt solves the network problem as built (solveNetwork), again if
// its flows and their uses are those of the last solve.
func (e *engine) solveBuilt(again bool) {
	flows := e.prob.Flows
	e.tcpRates = grow(e.tcpRates, len(flows))
	if len(flows) > 0 {
		solve := e.solver.Solve
		if again {
			solve = e.solver.SolveAgain
		}
		if err := solve(&e.prob, e.tcpRates); err != nil {
			// The problem is built from validated inputs; an error here is
			// a bug, not bad input.
			panic(fmt.Sprintf("sim: network allocation failed: %v", err))
		}
	}
	for k, i := range e.rflowSlot {
		f := &e.rflows[i]
		if math.IsInf(f.appCap, 1) {
			f.netRate = e.tcpRates[len(e.tcpConns)+k]
		}
	}
}

// markSaturation computes every resource's load and whether it is full,
// and from that the per-pair tick state: delivered rate, network losses,
// whether the pair's own limiter held it back.
func (e *engine) markSaturation() {
	if e.maxWorkers() > 1 && len(e.uses) >= 2*splitMin {
		e.loadsByResource()
	} else {
		copy(e.load, e.udpLoad)
		// A TCP connection's uses in the problem are its path (solveNetwork).
		for f, i := range e.tcpConns {
			c := &e.conns[i]
			for _, u := range e.prob.Flows[f].Uses {
				e.load[u.Resource] += c.rate
			}
		}
		for k, i := range e.rflowSlot {
			f := &e.rflows[i]
			for _, u := range e.prob.Flows[len(e.tcpConns)+k].Uses {
				e.load[u.Resource] += u.Coef * f.rate
			}
		}
		for r := range e.load {
			e.sat[r] = e.saturated(r)
		}
	}
	for _, i := range e.rflowSlot {
		f := &e.rflows[i]
		f.enfBound = f.enfRes >= 0 && e.sat[f.enfRes]
	}
	e.split(len(e.limRes), len(e.limRes), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			r := e.limRes[i]
			p := &e.pairs[i]
			p.rate, p.lossRate = 0, 0
			p.inDrop, p.markRate, p.sentRate = 0, 0, 0
			p.bound = r >= 0 && e.sat[r]
		}
	})
	// A saturated link is congested — its queue overflows — when traffic
	// pushes into it that is not held back upstream: a TCP connection not
	// bound by its own limiter, a request flow not bound by its enforcer,
	// or UDP being dropped there. Every pair crossing a congested link
	// then sees losses, limiter-bound or not (drop-tail drops whatever
	// arrives at a full queue): TCPLoss of its packets, plus for UDP the
	// bits the fluid model drops. A link filled exactly by limiter-bound
	// traffic stays loss-free.
	L := len(e.tp.Links)
	if cap(e.congested) < L {
		e.congested = make([]bool, L)
	}
	e.congested = e.congested[:L]
	clear(e.congested)
	parallel := e.maxWorkers() > 1 && len(e.conns) >= 2*splitMin
	mark := func(congested []bool, links []int) {
		for _, l := range links {
			if e.sat[l] {
				congested[l] = true
			}
		}
	}
	pushes := func(c *connState) bool {
		return c.active && !(!c.udp && e.pairs[c.pair].bound) && !(c.udp && c.drop == 0)
	}
	if parallel {
		// each part marks its own copy of the links; a link is congested
		// if any part marked it
		if len(e.congPart) < maxSplit {
			e.congPart = make([][]bool, maxSplit)
		}
		for _, part := range e.congPart {
			clear(part)
		}
		e.split(len(e.conns), len(e.conns), func(k, lo, hi int) {
			part := e.congPart[k]
			if len(part) != L {
				part = make([]bool, L)
				e.congPart[k] = part
			}
			for i := lo; i < hi; i++ {
				if c := &e.conns[i]; pushes(c) {
					mark(part, c.links)
				}
			}
		})
		for _, part := range e.congPart {
			for l, x := range part {
				e.congested[l] = e.congested[l] || x
			}
		}
	} else {
		for i := range e.conns {
			if c := &e.conns[i]; pushes(c) {
				mark(e.congested, c.links)
			}
		}
	}
	for _, i := range e.rflowSlot {
		f := &e.rflows[i]
		if !f.enfBound && math.IsInf(f.appCap, 1) {
			mark(e.congested, f.fwd)
			mark(e.congested, f.rev)
		}
	}
	if !parallel {
		for i := range e.conns {
			if c := &e.conns[i]; c.active {
				e.pairTick(&e.pairs[c.pair], c)
			}
		}
		return
	}
	// pair by pair, each adding its connections in connection order
	start, list := e.connsByPair()
	e.split(len(e.pairs), len(e.conns), func(_, lo, hi int) {
		for pi := lo; pi < hi; pi++ {
			for _, i := range list[start[pi]:start[pi+1]] {
				if c := &e.conns[i]; c.active {
					e.pairTick(&e.pairs[pi], c)
				}
			}
		}
	})
}

// pairTick adds active connection c's part of its pair p's tick state
// (markSaturation): its rates, and its losses at a congested link or at
// the receiver's ingress scheduler.
func (e *engine) pairTick(p *pairState, c *connState) {
	p.rate += c.rate
	if c.udp {
		p.lossRate += c.drop
		p.inDrop += c.inDrop
		p.sentRate += c.sent
	} else {
		p.sentRate += c.rate
	}
	lost := false
	for _, l := range c.links {
		if e.congested[l] {
			// With ECN, TCP packets are marked rather than dropped.
			if e.sc.Network.ECN && !c.udp {
				p.markRate += c.rate * e.opts.TCPLoss
			} else {
				p.lossRate += c.rate * e.opts.TCPLoss
			}
			lost = true
			break
		}
	}
	// The receiver host's ingress scheduler drops from a VM's queue
	// that TCP pushes into when it is full.
	if !c.udp && !lost && !p.bound && len(c.links) > 0 {
		if si := e.vms[p.dst].inSched; si >= 0 && e.scheds[si].res >= 0 && e.sat[e.scheds[si].res] {
			d := c.rate * e.opts.TCPLoss
			p.lossRate += d
			p.inDrop += d
		}
	}
}

// connsByPair returns the connections of each pair, in connection order:
// pair p's are list[start[p]:start[p+1]]. It is rebuilt when a connection
// is made or finishes (connGen).
func (e *engine) connsByPair() (start, list []int32) {
	if e.byPairGen != e.connGen || len(e.byPair.start) != len(e.pairs)+1 {
		e.byPairGen = e.connGen
		e.byPairList = grow(e.byPairList, len(e.conns))
		e.byPair.build(len(e.pairs), func(visit func(key int32) int32) {
			for i := range e.conns {
				if p := e.conns[i].pair; p >= 0 {
					if k := visit(int32(p)); k >= 0 {
						e.byPairList[k] = int32(i)
					}
				}
			}
		})
	}
	return e.byPair.start, e.byPairList
}

// grouped is a counting sort's index: the items of key k are at slots
// [start[k], start[k+1]), in the order they were visited.
type grouped struct {
	start, fill []int32
}

// build indexes items under keys in [0, keys). each visits every item
// with its key, twice: visit returns −1 the first time (counting) and
// the item's slot the second (for the caller to store the item there).
func (g *grouped) build(keys int, each func(visit func(key int32) int32)) {
	g.start = grow(g.start, keys+1)
	clear(g.start)
	each(func(k int32) int32 {
		g.start[k+1]++
		return -1
	})
	for k := range keys {
		g.start[k+1] += g.start[k]
	}
	g.fill = append(g.fill[:0], g.start[:keys]...)
	each(func(k int32) int32 {
		slot := g.fill[k]
		g.fill[k]++
		return slot
	})
}

// saturated is whether resource r is full at its load.
func (e *engine) saturated(r int) bool {
	cp := e.capacity[r]
	return e.load[r] >= cp*(1-satTol) && (e.load[r] > 0 || cp == 0)
}

// loadsByResource is markSaturation's loads and saturation, resource by
// resource on the run's workers: each resource adds its flows' rates in
// flow order, from an index of the problem's uses by resource (rebuilt
// with the problem), to the same sums as the pass over the flows.
func (e *engine) loadsByResource() {
	R := len(e.load)
	if e.byResGen != e.probGen || !e.byResOK {
		e.byResGen, e.byResOK = e.probGen, true
		n := 0
		for f := range e.prob.Flows {
			n += len(e.prob.Flows[f].Uses)
		}
		e.byResFlow, e.byResCoef = grow(e.byResFlow, n), grow(e.byResCoef, n)
		e.byRes.build(R, func(visit func(key int32) int32) {
			for f := range e.prob.Flows {
				for _, u := range e.prob.Flows[f].Uses {
					if k := visit(int32(u.Resource)); k >= 0 {
						e.byResFlow[k], e.byResCoef[k] = int32(f), u.Coef
					}
				}
			}
		})
	}
	// A flow's rate is tcpRates' (solveTCP copied it to its connection
	// or request flow); a TCP connection's uses add its rate as it is.
	nt := int32(len(e.tcpConns))
	rate, start, flow, coef := e.tcpRates, e.byRes.start, e.byResFlow, e.byResCoef
	e.split(R, len(e.uses), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			load := e.udpLoad[r]
			for k := start[r]; k < start[r+1]; k++ {
				if f := flow[k]; f < nt {
					load += rate[f]
				} else {
					load += coef[k] * rate[f]
				}
			}
			e.load[r] = load
			e.sat[r] = e.saturated(r)
		}
	})
}

// account advances one tick: bits delivered per pair, sized flows that
// finish, and the accumulators agents and samples read. When no flow is
// sized and no request flows run, a tick changes nothing but those
// accumulators, by the same amounts as the tick before as long as
// nothing changes the per-tick state: the tick is then left pending
// and added with the others by catchUp before anything reads the
// accumulators or changes that state, with the same additions in the
// same order for every accumulator.
func (e *engine) account() {
	if !e.sized && len(e.rflows) == 0 {
		if e.pend.ticks == 0 {
			e.pend.from = e.sampleTick
		}
		e.pend.ticks++
		e.pend.now = e.now
		e.sampleTick++
		return
	}
	e.catchUp()
	e.accountTick()
}

// pending is the ticks accounted but not yet added to the accumulators
// (account).
type pending struct {
	ticks int
	from  int           // e.sampleTick at the first of them
	now   time.Duration // e.now at the last of them
	// per pair, its bits delivered and sent in one tick, its bits
	// dropped at the receiver's ingress, and its offered load if bounded
	// (accountVMIO's; 0: none)
	bits, sent, drop, offer []float64
	// the pairs of each VM as source and as destination, in pair order
	outOf, inOf [][]int32
	unb         []bool // per pair: an unbounded connection is active
}

// catchUp adds the pending ticks to the accumulators as accountTick
// would have, tick by tick: an accumulator of one pair takes the same
// amount once per tick, one of a VM takes, in every tick, the amounts of
// its pairs in pair order.
func (e *engine) catchUp() {
	n := e.pend.ticks
	if n == 0 {
		return
	}
	if c := e.clock; c != nil {
		t := time.Now()
		e.catchUpTicks(n)
		c.ph.Accounting += time.Since(t)
		return
	}
	e.catchUpTicks(n)
}

// catchUpTicks is catchUp of the n ticks pending.
func (e *engine) catchUpTicks(n int) {
	e.pend.ticks = 0
	pd := &e.pend
	if len(pd.outOf) != len(e.vms) || len(pd.bits) != len(e.pairs) {
		pd.outOf, pd.inOf = make([][]int32, len(e.vms)), make([][]int32, len(e.vms))
		for i := range e.pairs {
			p := &e.pairs[i]
			pd.outOf[p.src] = append(pd.outOf[p.src], int32(i))
			pd.inOf[p.dst] = append(pd.inOf[p.dst], int32(i))
		}
		n := len(e.pairs)
		pd.bits, pd.sent, pd.drop, pd.offer = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		pd.unb = make([]bool, n)
	}
	// Pairs, then VMs (which read what the pairs' pass wrote), each
	// split between the workers: every pair and every VM is added up by
	// one of them, the same way whatever their number.
	var anyDrop, anyOffer [maxSplit]bool
	e.split(len(e.pairs), len(e.pairs), func(k, lo, hi int) {
		anyDrop[k], anyOffer[k] = e.catchUpPairs(n, lo, hi)
	})
	a := e.vmioInit()
	drop, offer := slices.Contains(anyDrop[:], true), slices.Contains(anyOffer[:], true)
	e.split(len(e.vms), len(e.pairs), func(_, lo, hi int) { e.catchUpVMs(n, lo, hi, a, drop, offer) })
}

// catchUpPairs is catchUp of pairs [lo, hi) (n ticks): their own
// accumulators, and their amounts per tick for the VMs' (pend). It says
// whether some pair dropped bits at its destination's ingress, and
// whether some offered a bounded load.
func (e *engine) catchUpPairs(n, lo, hi int) (anyDrop, anyOffer bool) {
	pd := &e.pend
	dt := e.dtSec
	ctl := e.ctl != nil
	for i := lo; i < hi; i++ {
		p := &e.pairs[i]
		bits := p.rate*dt + p.partial
		sentBits := p.sentRate*dt + p.partial
		pd.bits[i], pd.sent[i] = bits, sentBits
		pd.drop[i], pd.offer[i] = 0, 0
		if p.inDrop != 0 {
			pd.drop[i] = p.inDrop * dt
			anyDrop = true
		}
		pd.unb[i] = p.unboundedActive > 0
		if d := p.boundedOffered * e.dtSec; !pd.unb[i] && d > 0 {
			pd.offer[i] = d
			anyOffer = true
		}
		unbounded := p.unboundedActive > 0 || p.partial > 0
		if unbounded || p.boundedOffered > 0 {
			if p.activeTicks == 0 {
				p.firstActive = pd.from
			}
			p.activeTicks += n
		}
		p.partial = 0
		if p.lossRate != 0 {
			for range n {
				lost := wholePackets(&p.lossAcc, p.lossRate*dt/MTU)
				p.txLoss += lost
				p.rxLoss += lost
			}
		}
		if p.markRate != 0 {
			for range n {
				marked := wholePackets(&p.markAcc, p.markRate*dt/MTU)
				p.txMark += marked
				p.rxMark += marked
			}
		}
		if p.inDrop != 0 {
			for range n {
				p.inDropAcc += p.inDrop * dt
			}
		}
		tx, rx, sb, cb := p.txBits, p.rxBits, p.sampleBits, p.ctlBits
		for range n {
			tx += bits
			rx += bits
			sb += bits
		}
		if ctl {
			for range n {
				cb += bits
			}
			p.ctlTicks += n
			if p.bound {
				p.ctlBound += n
			}
		}
		p.txBits, p.rxBits, p.sampleBits, p.ctlBits = tx, rx, sb, cb
		p.srcTicks += n
		if p.bound {
			p.boundTicks += n
		}
		if unbounded {
			p.unboundedTicks += n
		} else {
			d := p.boundedDemandDT
			for range n {
				d += p.boundedOffered * dt
			}
			p.boundedDemandDT = d
		}
	}
	return anyDrop, anyOffer
}

// catchUpVMs is catchUp of VMs [lo, hi) (n ticks): the VMs' accumulators
// (and accountVMIO's), pairs in pair order within every tick; an amount
// of 0 is not added, as accountTick does not add it.
func (e *engine) catchUpVMs(n, lo, hi int, a *vmIO, anyDrop, anyOffer bool) {
	pd := &e.pend
	ctl := e.ctl != nil
	for vi := lo; vi < hi; vi++ {
		v := &e.vms[vi]
		outs, ins := pd.outOf[vi], pd.inOf[vi]
		v.outBits, v.inBits = addTicks2(v.outBits, v.inBits, n, outs, ins, pd.sent, pd.bits)
		if anyDrop {
			v.inDropBits = addTicks(v.inDropBits, n, ins, pd.drop, true)
		}
		if ctl {
			a.ctlOut[vi] = addTicks(a.ctlOut[vi], n, outs, pd.sent, false)
			a.ctlIn[vi] = addTicks(a.ctlIn[vi], n, ins, pd.bits, false)
		}
		// accountVMIO: a tick with an unbounded pair counts once per VM
		// and side; the others add their offered load.
		outUnb, inUnb := false, false
		for _, i := range outs {
			outUnb = outUnb || pd.unb[i]
		}
		for _, i := range ins {
			inUnb = inUnb || pd.unb[i]
		}
		if outUnb {
			a.outStamp[vi] = pd.now
			a.agent[vi].outUnb += n
			a.ctl[vi].outUnb += n
		}
		if inUnb {
			a.inStamp[vi] = pd.now
			a.agent[vi].inUnb += n
			a.ctl[vi].inUnb += n
		}
		if anyOffer {
			a.agent[vi].out = addTicks(a.agent[vi].out, n, outs, pd.offer, true)
			a.agent[vi].in = addTicks(a.agent[vi].in, n, ins, pd.offer, true)
			if ctl {
				a.ctl[vi].out = addTicks(a.ctl[vi].out, n, outs, pd.offer, true)
				a.ctl[vi].in = addTicks(a.ctl[vi].in, n, ins, pd.offer, true)
			}
		}
	}
}

// addTicks2 is addTicks of two accumulators at once (amounts of 0 are
// added), a after n ticks of xa over pa and b after n ticks of xb over pb:
// each takes its additions in its order, the two chains interleaved so
// that the processor overlaps them.
func addTicks2(a, b float64, n int, pa, pb []int32, xa, xb []float64) (float64, float64) {
	la, lb := len(pa), len(pb)
	if la == 0 || lb == 0 {
		return addTicks(a, n, pa, xa, false), addTicks(b, n, pb, xb, false)
	}
	ka, kb := n*la, n*lb
	ja, jb := 0, 0
	k := 0
	for ; k < ka && k < kb; k++ {
		a += xa[pa[ja]]
		b += xb[pb[jb]]
		if ja++; ja == la {
			ja = 0
		}
		if jb++; jb == lb {
			jb = 0
		}
	}
	for ; k < ka; k++ {
		a += xa[pa[ja]]
		if ja++; ja == la {
			ja = 0
		}
	}
	for ; k < kb; k++ {
		b += xb[pb[jb]]
		if jb++; jb == lb {
			jb = 0
		}
	}
	return a, b
}

// addTicks returns acc after n ticks each adding amount[i] for every i
// of pairs, in order (skipping amounts of 0 if skipZero).
func addTicks(acc float64, n int, pairs []int32, amount []float64, skipZero bool) float64 {
	if len(pairs) == 0 {
		return acc
	}
	for range n {
		for _, i := range pairs {
			if x := amount[i]; x != 0 || !skipZero {
				acc += x
			}
		}
	}
	return acc
}

// accountTick is account of one tick, at once.
func (e *engine) accountTick() {
	dt := e.dtSec
	for i := range e.conns {
		if !e.sized {
			break // only bulk connections: none finishes
		}
		c := &e.conns[i]
		if !c.active || math.IsInf(c.remaining, 1) {
			continue
		}
		sent := c.rate * dt
		if sent >= c.remaining && c.rate > 0 {
			fin := e.now + secondsToDuration(c.remaining/c.rate)
			p := &e.pairs[c.pair]
			e.out.FCTs = append(e.out.FCTs, eval.FCT{Tenant: p.tenant, Src: p.id.Src, Dst: p.id.Dst,
				Bytes: c.size, Start: c.start, Duration: fin - c.start})
			// Count only the bits actually left in this tick.
			e.pairs[c.pair].partial -= (sent - c.remaining)
			gen, epoch := c.gen, c.epoch
			e.finishConn(i)
			e.clientDone(gen, epoch, fin)
			continue
		}
		c.remaining -= sent
	}
	// Every accumulator starts at +0 and adds amounts ≥ 0, so adding an
	// exact zero changes none and is skipped; those only the central
	// controller reads are kept only when there is one.
	ctl := e.ctl != nil
	for i := range e.pairs {
		p := &e.pairs[i]
		bits := p.rate*dt + p.partial
		sentBits := p.sentRate*dt + p.partial
		// A sized flow that finished in this tick (partial) was an
		// unbounded connection active in it.
		unbounded := p.unboundedActive > 0 || p.partial > 0
		if unbounded || p.boundedOffered > 0 {
			if p.activeTicks == 0 {
				p.firstActive = e.sampleTick
			}
			p.activeTicks++
		}
		p.partial = 0
		if p.lossRate != 0 {
			// (with none, the carried fraction in [0, 1) stays, and
			// no packet completes)
			lost := wholePackets(&p.lossAcc, p.lossRate*dt/MTU)
			p.txLoss += lost
			p.rxLoss += lost
		}
		if p.markRate != 0 {
			marked := wholePackets(&p.markAcc, p.markRate*dt/MTU)
			p.txMark += marked
			p.rxMark += marked
		}
		e.vms[p.src].outBits += sentBits
		e.vms[p.dst].inBits += bits
		if p.inDrop != 0 {
			e.vms[p.dst].inDropBits += p.inDrop * dt
			p.inDropAcc += p.inDrop * dt
		}
		e.accountVMIO(p, sentBits, bits, ctl)
		p.txBits += bits
		p.rxBits += bits
		p.srcTicks++
		if p.bound {
			p.boundTicks++
		}
		p.sampleBits += bits
		if ctl {
			p.ctlBits += bits
			p.ctlTicks++
			if p.bound {
				p.ctlBound++
			}
		}
		if unbounded {
			p.unboundedTicks++
		} else {
			p.boundedDemandDT += p.boundedOffered * dt
		}
	}
	e.sampleTick++
}

// takeSample records every pair's mean rate and demand over the last span.
func (e *engine) takeSample(t, span time.Duration) {
	e.catchUp()
	sec := span.Seconds()
	ticks := e.sampleTick
	s := eval.Sample{T: t, Pairs: make([]eval.PairSample, len(e.pairs))}
	smp := &pairSampler{out: s.Pairs, sec: sec, ticks: ticks}
	e.split(len(e.pairs), len(e.pairs), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			smp.take(i, &e.pairs[i])
		}
	})
	e.sampleTick = 0
	if len(e.rflows) > 0 {
		s.Requests = make([]eval.RequestSample, len(e.rflows))
		for i := range e.rflows {
			f := &e.rflows[i]
			r := f.sampleReq / sec
			s.Requests[i] = eval.RequestSample{Requests: r, Tokens: r * f.e2eTokens}
			f.sampleReq = 0
		}
	}
	if len(e.apps) > 0 {
		s.ApplianceBusy = make([]float64, len(e.apps))
		s.ApplianceCapacity = make([]float64, len(e.apps))
		for i := range e.apps {
			a := &e.apps[i]
			s.ApplianceBusy[i] = a.sampleBusy / sec
			if a.sampleBusy > 0 {
				// tokens served per second of full service: the capacity
				// for the mix served in the interval
				s.ApplianceCapacity[i] = a.sampleTokens / a.sampleBusy
			}
			a.sampleBusy, a.sampleTokens = 0, 0
		}
	}
	e.out.Samples = append(e.out.Samples, s)
}

// pairSampler takes the pairs' samples over sec seconds of ticks ticks
// into out.
type pairSampler struct {
	out   []eval.PairSample
	sec   float64
	ticks int
}

// take records pair i's mean rate and demand since its last sample, and
// starts its next.
func (smp *pairSampler) take(i int, p *pairState) {
	sec, ticks := smp.sec, smp.ticks
	ps := eval.PairSample{Rate: p.sampleBits / sec}
	if p.activeTicks > 0 && 2*p.unboundedTicks >= p.activeTicks {
		ps.Demand = math.Inf(1)
	} else {
		ps.Demand = p.boundedDemandDT / sec
	}
	if p.activeTicks > 0 && ticks > 0 {
		ps.Active = float64(p.activeTicks) / float64(ticks)
		ps.ActiveFrom = float64(p.firstActive) / float64(ticks)
	}
	smp.out[i] = ps
	p.sampleBits, p.unboundedTicks, p.boundedDemandDT, p.activeTicks = 0, 0, 0, 0
}

func secondsToDuration(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// wholePackets adds n packets' worth to the fraction *acc carries and
// returns the whole packets now complete, keeping the rest.
func wholePackets(acc *float64, n float64) float64 {
	*acc += n
	w := math.Floor(*acc)
	*acc -= w
	return w
}
