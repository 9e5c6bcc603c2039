package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// The round trip a request pays besides its service times follows its
// path: HostRTT in the hosts at its ends (the VM's stack and hypervisor,
// the appliance's or destination's), plus HopLatency for every link it
// crosses, going and coming back (propagation, switching and a packet's
// serialization; the fluid model has no queues in the network, so no
// queueing delay there). With N outstanding requests a closed-loop flow
// cannot exceed N / (service time + round trip) requests/s. A request from
// a VM to an appliance behind a server of its rack crosses 2 links each
// way: 60 + 4 × 10 = 100 µs; to another rack of a two-tier tree (4 links
// each way) 140 µs; across pods of a fat-tree (6) 180 µs; to an appliance
// in its own hypervisor (none) 60 µs.
const (
	HostRTT    = 60 * time.Microsecond
	HopLatency = 10 * time.Microsecond
)

// RoundTrip is the round trip of a request over fwd links going and rev
// links coming back, besides its service times: HostRTT + HopLatency per
// link.
func RoundTrip(fwd, rev int) time.Duration {
	return HostRTT + time.Duration(fwd+rev)*HopLatency
}

// Appliance physics (Pulsar §2.3, the brief's simulator model): an
// appliance serves requests FIFO and never drops them. Its capacity is
// Parallelism service-seconds per second; a request costs its actual
// service time, so its capacity in tokens/s moves with the request mix.
// Closed-loop flows share it in proportion to their outstanding requests,
// open-loop flows in proportion to their arrivals; what open-loop flows
// cannot get waits in a backlog that is served later.
//
// The fluid solution alternates two stages until they agree: the network
// stage (weighted max-min over links and limiters, request flows weighted
// like its connections of TCP in bits) gives every request flow the rate the
// network would carry; the appliance stage shares each appliance among the
// flows that reach it (weights: outstanding requests, or arrival rates) and
// caps the flows it cannot serve, which frees network capacity for others.
//
// The fluid solution is an equilibrium per tick: a queue that an appliance
// builds (requests of the flows it holds back) drains within the tick once
// the load goes away, which holds for the microsecond service times of the
// presets (an appliance serves hundreds of thousands of requests a second).
// While it stands, every request the appliance serves waits in it
// (accountRequests), which is what the flows' outstanding requests show.
type applianceState struct {
	name string
	spec *spec.Appliance
	node int // server node it sits behind; −1: in its clients' hypervisors
	par  float64
	res  int // index into the controller's resources
	// per tick
	busy float64 // service-seconds per second in use
	// wait is the FIFO queueing delay at the appliance, seconds: the
	// requests queued there by the flows it holds back, over their rate
	// (Little's law). Every request the appliance serves waits as long.
	wait         float64
	queue, qrate float64 // this tick: requests queued, requests/s of the flows it holds back
	// sampleBusy accumulates busy ÷ par × dt over the current sample,
	// sampleTokens the tokens served (virtual cost) and tokens the tokens/s
	// served this tick.
	sampleBusy, sampleTokens, tokens float64
}

// station is an appliance on a request flow's way.
type station struct {
	app    int     // appliance index
	svc    float64 // mean service time there, seconds
	tokens float64 // mean virtual cost there, tokens
	// the appliance stage's cap here (requests/s, +Inf: none), last round
	// and this one
	cap, next float64
}

// rflow is one request flow: a VM sending a request mix to an appliance, or
// to a VM, possibly through appliances on the way (via).
type rflow struct {
	id        mech.FlowID
	tenant    string
	src       int // vm index
	stations  []station
	toVM      bool    // the destination is a VM
	e2eTokens float64 // tokens per request of its end-to-end throughput: at the destination appliance, or the request's bytes to a VM
	conns     float64 // transport connections its requests are spread over (network weight)
	closed    bool
	n         float64 // outstanding requests (closed loop)
	lambda    float64 // requests/s (open loop)
	gen       bool    // in a phase: generating requests
	active    bool    // generating, or (open loop) still has a backlog
	reqBits   float64 // mean bits per request on the forward path
	respBits  float64 // mean bits per response on the reverse path
	svc       float64 // mean service time over all stations, seconds
	rtt       float64 // round trip besides service times, seconds (RoundTrip of its path)
	fwd, rev  []int   // links
	elems     []mech.PathElem
	elemTok   []float64 // tokens per request on each path element
	enfRate   float64   // enforcer cap, requests/s (+Inf: none)
	enfRes    int
	enfID     string  // the enforcer's resource ID (made when first in force)
	backlog   float64 // open loop: requests waiting, anywhere

	// per tick
	rate       float64 // requests/s served
	appCap     float64 // cap from the appliance stage
	netRate    float64 // rate the network stage would carry
	enfBound   bool
	outstandng float64 // requests beyond the enforcer
	queued     float64 // requests at the enforcer

	// since the controller's last step
	accReq, accQueued, accOut, accTicks float64

	// since the last sample
	sampleReq float64
}

func (e *engine) buildAppliances() error {
	for i := range e.sc.Appliances {
		a := &e.sc.Appliances[i]
		node := -1 // in the hypervisor of every client's server
		if !a.Hypervisor {
			n, ok := e.tp.Node(a.Server)
			if !ok {
				return fmt.Errorf("sim: %s: appliances[%d].server: unknown server %q", e.sc.File, i, a.Server)
			}
			node = n.ID
		}
		par := a.Parallelism
		if par <= 0 {
			par = 1
		}
		e.appIdx[a.Name] = len(e.apps)
		e.apps = append(e.apps, applianceState{name: a.Name, spec: a, node: node, par: par, res: len(e.tp.Links) + len(e.apps)})
	}
	return nil
}

// newRequestFlow adds the request flow of workload w from VM src to dst
// (an appliance, or a VM when toVM).
func (e *engine) newRequestFlow(w *spec.Workload, wi int, src, dst string, toVM bool) (int, error) {
	s := e.vmIdx[src]
	f := rflow{id: mech.FlowID{Src: src, Dst: dst}, tenant: w.Tenant, src: s, toVM: toVM,
		closed: w.Outstanding > 0, n: float64(w.Outstanding), lambda: w.RequestRate, conns: float64(max(1, w.Connections)),
		enfRate: math.Inf(1), enfRes: -1, appCap: math.Inf(1)}
	for _, r := range e.rflows {
		if r.id == f.id {
			return 0, fmt.Errorf("sim: %s: workloads[%d]: VM %q already sends requests to %q in another workload", e.sc.File, wi, src, dst)
		}
	}
	// Stations: the via appliances in order, then the destination
	// appliance. At a via appliance every request is served as the via's
	// type with the request's size.
	type stop struct {
		name, typ string
	}
	var stops []stop
	for _, v := range w.Via {
		stops = append(stops, stop{v.Appliance, v.Type})
	}
	if !toVM {
		stops = append(stops, stop{name: dst})
	}
	var tokFwd, tokRev float64
	for _, m := range w.Mix {
		req, resp := m.Bytes()
		f.reqBits += m.Fraction * req * 8
		f.respBits += m.Fraction * resp * 8
		tokFwd += m.Fraction * req
		tokRev += m.Fraction * resp
	}
	for k, st := range stops {
		ai, ok := e.appIdx[st.name]
		if !ok {
			return 0, fmt.Errorf("sim: %s: workloads[%d]: unknown appliance %q", e.sc.File, wi, st.name)
		}
		app := e.apps[ai].spec
		sta := station{app: ai}
		for mi, m := range w.Mix {
			typ := m.Type
			if st.typ != "" {
				typ = st.typ
			}
			size := float64(m.Size)
			d, err := app.ServiceTime(typ, size)
			if err != nil {
				return 0, fmt.Errorf("sim: %s: workloads[%d].mix[%d] at %s: %w", e.sc.File, wi, mi, st.name, err)
			}
			sta.svc += m.Fraction * d.Seconds()
			sta.tokens += m.Fraction * app.Tokens(typ, size)
		}
		f.stations = append(f.stations, sta)
		f.svc += sta.svc
		if k == len(stops)-1 && !toVM {
			f.e2eTokens = sta.tokens
		}
	}
	if toVM {
		f.e2eTokens = tokFwd
	}
	// Links: source → each station → destination, and back the same way.
	// A hypervisor appliance serves the request where it is (on the
	// sender's server, or after an earlier station): no hop.
	nodes := []int{e.vms[s].host}
	names := []string{src}
	for _, st := range stops {
		if n := e.apps[e.appIdx[st.name]].node; n >= 0 {
			nodes = append(nodes, n)
			names = append(names, st.name)
		}
	}
	if toVM {
		nodes = append(nodes, e.vms[e.vmIdx[dst]].host)
		names = append(names, dst)
	}
	for k := 0; k+1 < len(nodes); k++ {
		f.fwd = append(f.fwd, e.tp.Route(nodes[k], nodes[k+1], topo.ConnHash(e.sc.Seed, names[k], names[k+1], 0))...)
	}
	for k := len(nodes) - 1; k > 0; k-- {
		f.rev = append(f.rev, e.tp.Route(nodes[k], nodes[k-1], topo.ConnHash(e.sc.Seed, names[k], names[k-1], 0))...)
	}
	f.rtt = RoundTrip(len(f.fwd), len(f.rev)).Seconds()
	for _, l := range f.fwd {
		f.elems = append(f.elems, mech.PathElem{Resource: l, Role: mech.Forward})
		f.elemTok = append(f.elemTok, tokFwd)
	}
	for _, st := range f.stations {
		f.elems = append(f.elems, mech.PathElem{Resource: e.apps[st.app].res, Role: mech.Appliance})
		f.elemTok = append(f.elemTok, st.tokens)
	}
	for _, l := range f.rev {
		f.elems = append(f.elems, mech.PathElem{Resource: l, Role: mech.Reverse})
		f.elemTok = append(f.elemTok, tokRev)
	}
	e.rflows = append(e.rflows, f)
	return len(e.rflows) - 1, nil
}

// stationAt returns the station of flow f at appliance ai, or nil.
func (f *rflow) stationAt(ai int) *station {
	for k := range f.stations {
		if f.stations[k].app == ai {
			return &f.stations[k]
		}
	}
	return nil
}

// baseDemand is what a request flow would send with nothing in its way,
// requests/s.
func (e *engine) baseDemand(f *rflow) float64 {
	if f.closed {
		return f.n / (f.svc + f.rtt)
	}
	d := f.backlog / e.dtSec
	if f.gen {
		d += f.lambda
	}
	return d
}

// appendRequestFlows adds the active request flows to the network problem.
// Their unit is requests/s; each is weighted like its connections (one by
// default) of TCP in bits (connections / bits per request on its busier
// direction).
func (e *engine) appendRequestFlows(flows []alloc.Flow, uses []alloc.Use) ([]alloc.Flow, []alloc.Use) {
	for i := range e.rflows {
		f := &e.rflows[i]
		if !f.active {
			continue
		}
		start := len(uses)
		if f.enfRes >= 0 {
			uses = append(uses, alloc.Use{Resource: f.enfRes, Coef: 1})
		}
		for _, l := range f.fwd {
			if f.reqBits > 0 {
				uses = append(uses, alloc.Use{Resource: l, Coef: f.reqBits, Class: e.linkClassName(l, f.tenant)})
			}
		}
		for _, l := range f.rev {
			if f.respBits > 0 {
				uses = append(uses, alloc.Use{Resource: l, Coef: f.respBits, Class: e.linkClassName(l, f.tenant)})
			}
		}
		d := math.Min(e.baseDemand(f), f.appCap)
		w := f.conns / math.Max(1, math.Max(f.reqBits, f.respBits))
		flows = append(flows, alloc.Flow{ID: f.id.Src + "->" + f.id.Dst, Uses: uses[start:len(uses):len(uses)], Demand: d, Weight: w})
		e.rflowSlot = append(e.rflowSlot, i)
	}
	return flows, uses
}

// applianceStage shares every appliance among the flows that reach it at
// their network rates and caps those it cannot serve. It reports whether
// any cap changed by more than a relative 1e-9.
func (e *engine) applianceStage() (changed bool) {
	for ai := range e.apps {
		app := &e.apps[ai]
		e.appProb.Resources = e.appProb.Resources[:0]
		e.appProb.Resources = append(e.appProb.Resources, alloc.Resource{ID: app.name, Capacity: app.par})
		e.appProb.Flows = e.appProb.Flows[:0]
		e.appFlows = e.appFlows[:0]
		e.appDemand = e.appDemand[:0]
		for i := range e.rflows {
			f := &e.rflows[i]
			st := f.stationAt(ai)
			if !f.active || st == nil || f.netRate <= 0 {
				continue
			}
			st.next = math.Inf(1)
			// What reaches this appliance: the network's rate, less what
			// the flow's other appliances held back in the last round.
			d := f.netRate
			for k := range f.stations {
				if o := &f.stations[k]; o != st {
					d = math.Min(d, o.cap)
				}
			}
			// Closed loop: share by outstanding requests. Open loop: FIFO
			// shares by arrivals — requests arrive no faster than they are
			// generated and than the enforcer and the network let them
			// through — and, once a flow stops generating, its backlog by
			// its share of the queue.
			w := f.n
			if !f.closed {
				if f.gen {
					w = math.Min(f.lambda, d)
				} else if drain := e.drainTime(ai); drain > 0 {
					w = math.Min(f.backlog/drain, d)
				} else {
					w = 0
				}
				if w <= 0 {
					continue
				}
			}
			e.appProb.Flows = append(e.appProb.Flows, alloc.Flow{ID: f.id.Src + "->" + f.id.Dst, Weight: w, Demand: d,
				Uses: []alloc.Use{{Resource: 0, Coef: math.Max(st.svc, 1e-12)}}})
			e.appFlows = append(e.appFlows, i)
			e.appDemand = append(e.appDemand, d)
		}
		if len(e.appFlows) == 0 {
			continue
		}
		e.appRates = grow(e.appRates, len(e.appFlows))
		if err := e.appSolver.Solve(&e.appProb, e.appRates); err != nil {
			panic(fmt.Sprintf("sim: appliance %s allocation failed: %v", app.name, err))
		}
		for k, i := range e.appFlows {
			if a := e.appRates[k]; a < e.appDemand[k]*(1-1e-9) {
				e.rflows[i].stationAt(ai).next = a
			}
		}
	}
	// A flow through several appliances takes the smallest of their caps.
	for i := range e.rflows {
		f := &e.rflows[i]
		c := math.Inf(1)
		for k := range f.stations {
			st := &f.stations[k]
			if f.active && f.netRate > 0 {
				st.cap = st.next
			}
			c = math.Min(c, st.cap)
		}
		if !sameRate(c, f.appCap) {
			f.appCap = c
			changed = true
		}
	}
	return changed
}

// drainTime is how long appliance ai would take to serve the open-loop
// backlogs of its flows at full speed.
func (e *engine) drainTime(ai int) float64 {
	work := 0.0
	for i := range e.rflows {
		f := &e.rflows[i]
		if st := f.stationAt(ai); st != nil && !f.closed {
			work += f.backlog * st.svc
		}
	}
	return work / e.apps[ai].par
}

// setGenerating starts or stops a request flow's generation. An open-loop
// flow stays active until its backlog is served: the appliance never drops.
func (e *engine) setGenerating(i int, on bool) {
	f := &e.rflows[i]
	if f.gen == on {
		return
	}
	f.gen = on
	f.active = on || (!f.closed && f.backlog > 0)
	e.dirty = true
}

// accountRequests advances request flows by one tick.
//
// Where a flow's requests are: a closed-loop flow's N requests are queued
// at its enforcer when the enforcer holds it back, otherwise all beyond it;
// an open-loop flow's backlog is at the enforcer when the enforcer holds it
// back, otherwise beyond it. Beyond the enforcer a request spends the round
// trip of its path, its service times and, at every appliance on its way, that
// appliance's FIFO queueing delay. The delay comes from the flows the
// appliance holds back (its cap binds them): their requests beyond the
// enforcer that are neither in service nor on the wire wait in its queue,
// and by Little's law the queue over their rate is the wait, which every
// request served there pays — also those of flows held back elsewhere
// (by their enforcer, the network), whose requests then take longer to
// come back, so more of them are outstanding beyond the enforcer.
func (e *engine) accountRequests() {
	dt := e.dtSec
	for ai := range e.apps {
		a := &e.apps[ai]
		a.busy, a.queue, a.qrate, a.tokens = 0, 0, 0, 0
	}
	for i := range e.rflows {
		f := &e.rflows[i]
		if !f.active {
			f.rate = 0
			continue
		}
		for _, st := range f.stations {
			e.apps[st.app].busy += f.rate * st.svc
			e.apps[st.app].tokens += f.rate * st.tokens
		}
		if !f.closed {
			arrivals := 0.0
			if f.gen {
				arrivals = f.lambda
			}
			f.backlog = math.Max(0, f.backlog+(arrivals-f.rate)*dt)
			if f.backlog < 1e-6 {
				f.backlog = 0
			}
			if f.backlog > 0 || !f.gen {
				e.dirty = true // the drain term of its demand moves
			}
			if !f.gen && f.backlog == 0 {
				f.active = false
			}
		}
		// The appliance that holds the flow back queues its excess.
		if k := f.bindingStation(); k >= 0 && !f.enfBound {
			excess := f.backlog
			if f.closed {
				excess = f.n - f.rate*(f.svc+f.rtt)
			}
			a := &e.apps[f.stations[k].app]
			a.queue += math.Max(0, excess)
			a.qrate += f.rate
		}
	}
	for ai := range e.apps {
		a := &e.apps[ai]
		a.sampleBusy += math.Min(1, a.busy/a.par) * dt
		a.sampleTokens += a.tokens * dt
		a.wait = 0
		if a.qrate > 0 {
			a.wait = a.queue / a.qrate
		}
	}
	for i := range e.rflows {
		f := &e.rflows[i]
		if !f.active {
			continue
		}
		// The waits at the appliances that do not hold the flow back.
		bind := -1
		if !f.enfBound {
			bind = f.bindingStation()
		}
		wait := 0.0
		for k, st := range f.stations {
			if k != bind {
				wait += e.apps[st.app].wait
			}
		}
		inFlight := f.rate * (f.svc + f.rtt + wait)
		if f.closed {
			if f.enfBound {
				f.outstandng = math.Min(f.n, inFlight)
			} else {
				f.outstandng = f.n
			}
			f.queued = f.n - f.outstandng
		} else {
			if f.enfBound {
				f.queued, f.outstandng = f.backlog, inFlight
			} else {
				f.queued, f.outstandng = 0, inFlight+f.backlog
			}
		}
		f.accReq += f.rate * dt
		f.accQueued += f.queued * dt
		f.accOut += f.outstandng * dt
		f.accTicks += dt
		f.sampleReq += f.rate * dt
	}
}

// bindingStation returns the station whose appliance holds the flow back
// (its cap is the flow's rate), −1 if none does.
func (f *rflow) bindingStation() int {
	if math.IsInf(f.appCap, 1) || f.rate < f.appCap*(1-1e-6) {
		return -1
	}
	for k := range f.stations {
		if f.stations[k].cap == f.appCap {
			return k
		}
	}
	return -1
}

// sameRate reports whether two rates (possibly +Inf) agree within a
// relative 1e-9.
func sameRate(a, b float64) bool {
	if math.IsInf(a, 1) || math.IsInf(b, 1) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
