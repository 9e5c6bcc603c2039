package sim

import (
	"fmt"
	"math"
	"sort"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// A host scheduler (mech.Scheduler) is a hierarchical resource on the
// host's access link: capacity Rate, one class per local VM weighted as the
// mechanism says, work-conserving between classes (alloc's classes). A
// connection crosses its sender host's egress scheduler in the sender's
// class and its receiver host's ingress scheduler in the receiver's.
//
// Unresponsive UDP meets a scheduler in the first stage: the classes split
// the capacity by weighted max-min, a class holding only UDP asking for its
// arrivals and a class with TCP for as much as it can get; UDP beyond its
// class's share is dropped there. (When UDP and TCP share one class the
// split is approximate: TCP then shares what UDP left by the class
// weights.)
type schedState struct {
	classedRes // classes: the host's VMs, sorted
	host       int
	dir        mech.Direction
	rate       float64
}

// classedRes is a resource whose capacity is split between classes by
// weight, work-conserving: a host scheduler's per-VM classes, a switch
// port's queues (portState).
type classedRes struct {
	names   []string
	weights []float64
	res     int // resource index in the current problem, -1 if none
	// first stage, per class
	udpIn, udpScale, share, dem []float64
	tcp                         []bool
}

func newClassedRes(names []string) classedRes {
	k := len(names)
	return classedRes{names: names, weights: make([]float64, k), res: -1,
		udpIn: make([]float64, k), udpScale: make([]float64, k), share: make([]float64, k), dem: make([]float64, k),
		tcp: make([]bool, k)}
}

// minSchedWeight is the weight of a local VM a scheduler does not name.
const minSchedWeight = 1e-6

// hop is one resource on a connection's path and, for a scheduler, the
// class the connection takes there (-1 otherwise).
type hop struct {
	r, cls int
}

// applyScheduler installs, changes or removes a host scheduler.
// The driver core has checked it (drive.CheckScheduler).
func (e *engine) applyScheduler(h *hostAgent, s mech.Scheduler) {
	node, _ := e.tp.Node(h.name)
	ix := -1
	for i := range e.scheds {
		if e.scheds[i].host == node.ID && e.scheds[i].dir == s.Dir {
			ix = i
		}
	}
	remove := math.IsInf(s.Rate, 1) && len(s.Weights) == 0
	if ix < 0 {
		if remove {
			return
		}
		var names []string
		for vm := range h.vmsHere {
			names = append(names, vm)
		}
		sort.Strings(names)
		st := schedState{classedRes: newClassedRes(names), host: node.ID, dir: s.Dir}
		ix = len(e.scheds)
		e.scheds = append(e.scheds, st)
		for vi := range e.vms {
			if e.vms[vi].host != node.ID {
				continue
			}
			if s.Dir == mech.Egress {
				e.vms[vi].egSched = ix
			} else {
				e.vms[vi].inSched = ix
			}
		}
	}
	st := &e.scheds[ix]
	changed := st.rate != s.Rate
	st.rate = s.Rate
	for k, vm := range st.names {
		w, ok := s.Weights[vm]
		if !ok {
			w = minSchedWeight
		}
		if st.weights[k] != w {
			st.weights[k] = w
			changed = true
		}
	}
	if remove {
		st.rate = math.Inf(1)
	}
	if changed {
		e.dirty = true
	}
}

// classes returns the class weights for the allocator.
func (st *classedRes) classes() map[string]float64 {
	m := make(map[string]float64, len(st.names))
	for k, n := range st.names {
		m[n] = st.weights[k]
	}
	return m
}

// classOf returns the index of the named class, -1 if none.
func (st *classedRes) classOf(vm string) int {
	k := sort.SearchStrings(st.names, vm)
	if k < len(st.names) && st.names[k] == vm {
		return k
	}
	return -1
}

// wfqShares splits capacity c between classes with weights w and demands d
// by weighted max-min (work-conserving weighted fair queueing), into out.
func wfqShares(c float64, w, d, out []float64) {
	n := len(w)
	for k := range out {
		out[k] = 0
	}
	left := c
	active := make([]bool, n)
	na := 0
	for k := 0; k < n; k++ {
		if d[k] > 0 {
			active[k] = true
			na++
		}
	}
	for na > 0 && left > 1e-12*c {
		sw := 0.0
		for k := 0; k < n; k++ {
			if active[k] {
				sw += w[k]
			}
		}
		// Largest level all active classes can reach.
		level := left / sw
		capped := false
		for k := 0; k < n; k++ {
			if active[k] && d[k]-out[k] <= w[k]*level {
				capped = true
			}
		}
		if !capped {
			for k := 0; k < n; k++ {
				if active[k] {
					out[k] += w[k] * level
				}
			}
			return
		}
		// Satisfy the classes whose demand is below the level, then repeat.
		for k := 0; k < n; k++ {
			if active[k] && d[k]-out[k] <= w[k]*level {
				left -= d[k] - out[k]
				out[k] = d[k]
				active[k] = false
				na--
			}
		}
	}
}

// portState is a switch port's WFQ queues (mech.PortQueues): one class per
// queue ("q0" is the shared queue), each tenant bound to one.
type portState struct {
	classedRes
	link int
	bind map[string]int // tenant → queue
	dscp map[int]int    // code point → queue
}

// applyPorts installs the port queue configurations a controller set.
func (e *engine) applyPorts(ports []mech.PortQueues) error {
	name := e.opts.Mechanism.Name()
	for _, pq := range ports {
		if pq.Link < 0 || pq.Link >= len(e.tp.Links) {
			return fmt.Errorf("sim: mechanism %s: port queues on resource %d, which is not a link", name, pq.Link)
		}
		link := e.tp.Links[pq.Link].Name
		if len(pq.Weights) == 0 {
			// No queues: the port goes back to one FIFO.
			if i := e.portOf[pq.Link]; i >= 0 {
				e.ports[i].res, e.portOf[pq.Link] = -1, -1
				e.dirty = true
			}
			continue
		}
		if nq := e.sc.Network.Queues(); len(pq.Weights) > nq {
			return fmt.Errorf("sim: mechanism %s: port %s configured with %d queues; ports have %d (network.port_queues)", name, link, len(pq.Weights), nq)
		}
		maxW := float64(e.sc.Network.QueueWeightMax)
		names := make([]string, len(pq.Weights))
		for k, w := range pq.Weights {
			if !(w > 0) || math.IsInf(w, 1) {
				return fmt.Errorf("sim: mechanism %s: port %s queue %d weight %g", name, link, k, w)
			}
			if maxW > 0 && (w != math.Trunc(w) || w > maxW) {
				return fmt.Errorf("sim: mechanism %s: port %s queue %d weight %g is not an integer in [1, %g] (network.queue_weight_max)", name, link, k, w, maxW)
			}
			names[k] = fmt.Sprintf("q%d", k)
		}
		for t, q := range pq.Tenants {
			if q < 0 || q >= len(pq.Weights) {
				return fmt.Errorf("sim: mechanism %s: port %s: tenant %q bound to queue %d of %d", name, link, t, q, len(pq.Weights))
			}
		}
		for d, q := range pq.DSCP {
			if d < 0 || d > mech.MaxDSCP {
				return fmt.Errorf("sim: mechanism %s: port %s: DSCP %d is not in [0, %d]", name, link, d, mech.MaxDSCP)
			}
			if q < 0 || q >= len(pq.Weights) {
				return fmt.Errorf("sim: mechanism %s: port %s: DSCP %d mapped to queue %d of %d", name, link, d, q, len(pq.Weights))
			}
		}
		ps := portState{classedRes: newClassedRes(names), link: pq.Link, bind: pq.Tenants, dscp: pq.DSCP}
		copy(ps.weights, pq.Weights)
		if i := e.portOf[pq.Link]; i >= 0 {
			e.ports[i] = ps
		} else {
			e.portOf[pq.Link] = len(e.ports)
			e.ports = append(e.ports, ps)
		}
		e.dirty = true
	}
	return nil
}

// linkClass is the queue a tenant's traffic takes on link l (-1: the link
// has no queues).
func (e *engine) linkClass(l int, tenant string) int {
	i := e.portOf[l]
	if i < 0 {
		return -1
	}
	ps := &e.ports[i]
	if q, ok := ps.bind[tenant]; ok {
		return q
	}
	return ps.dscp[e.dscp[tenant]] // unclassified traffic shares queue 0
}

// linkClassName is the allocator class of a tenant's traffic on link l (""
// if the link has no queues).
func (e *engine) linkClassName(l int, tenant string) string {
	if k := e.linkClass(l, tenant); k >= 0 {
		return e.ports[e.portOf[l]].names[k]
	}
	return ""
}
