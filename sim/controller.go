package sim

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
)

// controllerState drives a mechanism's central controller (mech.Central):
// every period it hands over what the hosts' enforcers measured per flow
// (Pulsar §4.2's utilization, backlog, queueing and outstanding vectors, in
// tokens) and applies the allocation vectors it returns. The enforcer is a
// multi-resource token bucket (tokenbucket/ on real hosts); in the fluid
// model a flow's bucket set admits min over its path of allocation ÷ tokens
// per unit, which becomes the capacity of the flow's enforcer resource.
type controllerState struct {
	drv  *drive.Controller
	last time.Duration
	// VM pairs as Pulsar flows: every link of the route is a Forward
	// element; tokens are bytes.
	pairElems [][]mech.PathElem
	pairAlloc [][]float64
	rflAlloc  [][]float64
	def       float64
	obs       mech.ControllerObs
}

func (e *engine) buildController() error {
	links := drive.LinkResources(e.tp, e.sc.Network.Queues(), e.sc.Network.QueueWeightMax)
	drv, err := drive.NewController(e.opts.Mechanism, drive.ControllerEnv(e.model, links, e.opts.Reservations))
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if drv == nil {
		return nil
	}
	cs := &controllerState{drv: drv,
		pairElems: make([][]mech.PathElem, len(e.pairs)),
		pairAlloc: make([][]float64, len(e.pairs)),
		rflAlloc:  make([][]float64, len(e.rflows))}
	for i, p := range e.pairs {
		for _, l := range p.links {
			cs.pairElems[i] = append(cs.pairElems[i], mech.PathElem{Resource: l, Role: mech.Forward})
		}
	}
	e.ctl = cs
	return nil
}

// stepController runs the controller when its step is due.
func (e *engine) stepController() error {
	cs := e.ctl
	if cs == nil || !cs.drv.Due(e.now) {
		return nil
	}
	e.catchUp() // observations read the accumulators
	period := e.now - cs.last
	sec := period.Seconds()
	obs := &cs.obs
	obs.Now, obs.Period = e.now, period
	obs.Flows = obs.Flows[:0]
	for i := range e.pairs {
		p := &e.pairs[i]
		bits := p.ctlBits
		bound := p.ctlTicks > 0 && 2*p.ctlBound >= p.ctlTicks
		p.ctlBits, p.ctlBound, p.ctlTicks = 0, 0, 0
		if bits == 0 && cs.pairAlloc[i] == nil {
			continue
		}
		n := len(cs.pairElems[i])
		fo := mech.FlowObs{Flow: mech.FlowID{Src: p.id.Src, Dst: p.id.Dst}, Tenant: p.tenant, Path: cs.pairElems[i],
			Used: make([]float64, n), Backlog: make([]float64, n), Queued: make([]float64, n), Outstanding: make([]float64, n),
			Allocation: cs.pairAlloc[i]}
		if sec > 0 {
			used := bits / 8 / sec
			for k := range fo.Used {
				fo.Used[k] = used
				// A bulk sender held back by its enforcer has a full send
				// buffer: report one interval's worth of backlog.
				if bound {
					fo.Backlog[k] = drive.HeldBacklog(used, period)
				}
			}
		}
		obs.Flows = append(obs.Flows, fo)
	}
	for i := range e.rflows {
		f := &e.rflows[i]
		if !f.active && f.accReq == 0 && cs.rflAlloc[i] == nil {
			continue
		}
		n := len(f.elems)
		fo := mech.FlowObs{Flow: f.id, Tenant: f.tenant, Path: f.elems,
			Used: make([]float64, n), Backlog: make([]float64, n), Queued: make([]float64, n), Outstanding: make([]float64, n),
			Allocation: cs.rflAlloc[i]}
		for k, tok := range f.elemTok {
			if sec > 0 {
				fo.Used[k] = f.accReq * tok / sec
			}
			if !f.closed && f.enfBound {
				fo.Backlog[k] = f.backlog * tok
			}
			if f.accTicks > 0 {
				// What the enforcer at the source sees: requests it holds,
				// and requests it released that have not come back —
				// wherever they are (on the wire, queued or in service at
				// any appliance on the way), which it cannot tell. Every
				// element counts the same requests in its own tokens.
				fo.Queued[k] = f.accQueued / f.accTicks * tok
				fo.Outstanding[k] = f.accOut / f.accTicks * tok
			}
		}
		f.accReq, f.accQueued, f.accOut, f.accTicks = 0, 0, 0, 0
		obs.Flows = append(obs.Flows, fo)
	}
	obs.VMs = e.controllerVMs(obs.VMs, sec)
	act, err := cs.drv.Step(obs)
	cs.last = e.now
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if err := e.sendControllerMessages(act.Messages); err != nil {
		return err
	}
	cs.def = act.DefaultRate
	for _, a := range act.Allocations {
		if err := e.applyAllocation(a); err != nil {
			return err
		}
	}
	// Flows never allocated run at their source VM's default rate, or the
	// default rate.
	def := func(src string) float64 { return drive.DefaultFor(src, cs.def, act.DefaultBySrc) }
	for i := range e.pairs {
		if d := def(e.pairs[i].id.Src); cs.pairAlloc[i] == nil && d > 0 {
			e.setLimiter(&e.pairs[i].limRate, d*8)
		}
	}
	for i := range e.rflows {
		f := &e.rflows[i]
		if d := def(f.id.Src); cs.rflAlloc[i] == nil && d > 0 {
			r := math.Inf(1)
			for _, tok := range f.elemTok {
				if tok > 0 {
					r = math.Min(r, d/tok)
				}
			}
			e.setLimiter(&f.enfRate, r)
		}
	}
	if len(act.Estimates) > 0 {
		e.recordEstimates(act.Estimates)
	}
	e.applyDSCP(act.DSCP)
	if err := e.applyPorts(act.Ports); err != nil {
		return err
	}
	return nil
}

// applyDSCP sets the code points hypervisors mark tenants' packets with
// (checked by the driver core).
func (e *engine) applyDSCP(marks map[string]int) {
	for t, d := range marks {
		if e.dscp == nil {
			e.dscp = map[string]int{}
		}
		if e.dscp[t] != d {
			e.dscp[t] = d
			e.dirty = true
		}
	}
}

func (e *engine) applyAllocation(a mech.FlowAllocation) error {
	cs := e.ctl
	name := e.opts.Mechanism.Name()
	check := func(n int) error {
		if len(a.Rates) != n {
			return fmt.Errorf("sim: mechanism %s: allocation for %s->%s has %d rates for a path of %d", name, a.Flow.Src, a.Flow.Dst, len(a.Rates), n)
		}
		return nil
	}
	if i, ok := e.pairIx[mech.PairID{Src: a.Flow.Src, Dst: a.Flow.Dst}]; ok {
		if err := check(len(cs.pairElems[i])); err != nil {
			return err
		}
		cs.pairAlloc[i] = append(cs.pairAlloc[i][:0], a.Rates...)
		e.setLimiter(&e.pairs[i].limRate, drive.PairAllocLimit(a.Rates))
		return nil
	}
	for i := range e.rflows {
		f := &e.rflows[i]
		if f.id != a.Flow {
			continue
		}
		if err := check(len(f.elems)); err != nil {
			return err
		}
		cs.rflAlloc[i] = append(cs.rflAlloc[i][:0], a.Rates...)
		r := math.Inf(1)
		for k, tok := range f.elemTok {
			if tok > 0 {
				r = math.Min(r, a.Rates[k]/tok)
			}
		}
		e.setLimiter(&f.enfRate, r)
		return nil
	}
	return fmt.Errorf("sim: mechanism %s: allocation for unknown flow %s->%s", name, a.Flow.Src, a.Flow.Dst)
}

func (e *engine) recordEstimates(est map[string]float64) {
	names := make([]string, 0, len(est))
	for n := range est {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e.out.Estimates = append(e.out.Estimates, eval.Estimate{T: e.now, Appliance: n, Tokens: est[n]})
	}
}
