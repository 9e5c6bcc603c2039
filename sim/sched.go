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
	host    int
	dir     mech.Direction
	rate    float64
	names   []string // local VMs, sorted: the classes
	weights []float64
	res     int // resource index in the current problem, -1 if none
	// first stage, per class
	udpIn, udpScale, share, dem []float64
	tcp                         []bool
}

// minSchedWeight is the weight of a local VM a scheduler does not name.
const minSchedWeight = 1e-6

// hop is one resource on a connection's path and, for a scheduler, the
// class the connection takes there (-1 otherwise).
type hop struct {
	r, cls int
}

// applyScheduler installs, changes or removes a host scheduler.
func (e *engine) applyScheduler(h *hostAgent, s mech.Scheduler) error {
	name := e.opts.Mechanism.Name()
	if s.Dir != mech.Egress && s.Dir != mech.Ingress {
		return fmt.Errorf("sim: mechanism %s: agent on %s set a scheduler of unknown direction %d", name, h.name, s.Dir)
	}
	if math.IsNaN(s.Rate) || s.Rate < 0 {
		return fmt.Errorf("sim: mechanism %s: agent on %s set a scheduler rate %g", name, h.name, s.Rate)
	}
	for vm, w := range s.Weights {
		if !h.vmsHere[vm] {
			return fmt.Errorf("sim: mechanism %s: agent on %s weighted VM %q, which is not on that host", name, h.name, vm)
		}
		if !(w > 0) || math.IsInf(w, 1) {
			return fmt.Errorf("sim: mechanism %s: agent on %s gave VM %q scheduler weight %g", name, h.name, vm, w)
		}
	}
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
			return nil
		}
		st := schedState{host: node.ID, dir: s.Dir, res: -1}
		for vm := range h.vmsHere {
			st.names = append(st.names, vm)
		}
		sort.Strings(st.names)
		k := len(st.names)
		st.weights = make([]float64, k)
		st.udpIn, st.udpScale, st.share, st.dem = make([]float64, k), make([]float64, k), make([]float64, k), make([]float64, k)
		st.tcp = make([]bool, k)
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
	return nil
}

// schedClasses returns the class weights of scheduler st for the
// allocator.
func (st *schedState) classes() map[string]float64 {
	m := make(map[string]float64, len(st.names))
	for k, n := range st.names {
		m[n] = st.weights[k]
	}
	return m
}

// classOf returns the class index of vm at st.
func (st *schedState) classOf(vm string) int {
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
