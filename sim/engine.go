package sim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// MTU is the packet size, in bits, used to turn dropped bits into packets.
const MTU = 1500 * 8

// Options tune a run. The zero value is usable except for Mechanism.
type Options struct {
	// Mechanism drives the limiters; required.
	Mechanism mech.Mechanism
	// TCPLoss is the fraction of the packets a TCP connection sends through
	// a saturated link that are lost (default 0.01).
	TCPLoss float64
	// Progress, if set, receives a progress line about once a second of
	// wall time once a run has taken longer than two seconds.
	Progress io.Writer
	// Logger for debug output; default discards.
	Logger *slog.Logger
	// Reservations are the tenants' hose reservations per link from
	// admission control, handed to a central controller
	// (mech.ControllerEnv.Reservations); the runner fills them in.
	Reservations []mech.Reservation
	// Model is the declared model the mechanism's agents and controller
	// start with (default: the scenario's); its VMs must be VMs of the
	// scenario, on the same servers.
	Model *model.Model
	// Phases, if set, receives where the run's wall time went.
	Phases *Phases
	// Workers is how many host agents step at once (0: GOMAXPROCS), for
	// mechanisms whose agents are independent (mech.Concurrent); others
	// step one at a time. On large runs it is also how many workers add
	// up the accumulators and take the samples, whatever the mechanism.
	// Results do not depend on it.
	Workers int
	// Updates change the declared model during the run, in time order:
	// from At on, the mechanism has Model's tenants and VMs (a tenant
	// joining, leaving, or its guarantees changing), handed to it through
	// the driver core. Mechanisms that cannot take a change at runtime fail
	// the run.
	Updates []Update
}

// Update is a change of the declared model at a time of a run.
type Update struct {
	At    time.Duration
	Model *model.Model
}

// Run simulates the scenario on the topology under opts.Mechanism and
// returns what the evaluation needs (samples of every pair, FCTs).
func Run(ctx context.Context, sc *spec.Scenario, tp *topo.Topology, opts Options) (*eval.Input, error) {
	t0 := time.Now()
	e, err := newEngine(sc, tp, opts)
	if err != nil {
		return nil, err
	}
	if opts.Phases != nil {
		*opts.Phases = Phases{Setup: time.Since(t0)}
		e.clock = &clock{ph: opts.Phases}
	}
	e.pool = newPool(e.maxWorkers())
	defer e.pool.Close()
	if err := e.run(ctx); err != nil {
		return nil, err
	}
	return e.out, nil
}

type vmInfo struct {
	name, tenant string
	host         int // server node ID
	in, out      float64
	// VM egress/ingress limiter rates (+Inf: none) and their resource
	// index in the current problem (-1: none).
	egRate, inRate float64
	egRes, inRes   int
	// the host schedulers the VM's traffic crosses (index into e.scheds,
	// -1: none)
	egSched, inSched int
	// the limiters' resource IDs (made when first in force)
	egID, inID string
	// since the host agent's last step
	inBits, outBits, inDropBits float64
}

type pairState struct {
	// Fields are grouped by who touches them, a cache line (64 bytes)
	// per group, so that walking every pair (catchUp, takeSample,
	// observe) reads few lines, and the source's and the destination's
	// agents observing a pair at once write different lines. The record
	// is 384 bytes (TestPairStateLayout).

	// read by observe at both ends
	id      mech.PairID
	tenant  string
	limRate float64 // the pair limiter's rate (+Inf: none)
	bound   bool    // held back by its own limiter this tick

	// since the source agent's last step; since the last sample
	txBits, txLoss, txMark float64
	boundTicks             int
	srcTicks               int
	sampleBits             float64
	boundedDemandDT        float64 // Σ offered·dt of bounded connections
	unboundedTicks         int

	// since the destination agent's last step; since the last sample
	rxBits, rxLoss, rxMark float64
	inDropAcc              float64
	activeTicks            int // ticks with traffic to offer
	firstActive            int // the sample's tick at which it first had
	// fractions of a packet lost or marked and not yet counted: a host
	// sees whole packets, so a slow pair sees a loss only every few
	// periods while a fast one through the same queue sees one in each
	lossAcc, markAcc float64

	// per tick
	rate     float64 // delivered bits/s this tick
	sentRate float64 // bits/s leaving the source host this tick
	partial  float64 // correction for flows that finished mid-tick (bits)
	lossRate float64 // bits/s lost in the network this tick
	markRate float64 // bits/s ECN-marked this tick
	inDrop   float64 // bits/s of it dropped at the receiver host's ingress
	// offered load of the active connections
	boundedOffered  float64 // Σ rates of active capped TCP and UDP connections
	unboundedActive int     // active TCP connections with no rate cap

	// since the controller's last step
	ctlBits            float64
	ctlBound, ctlTicks int

	src   int // vm index
	dst   int
	nconn int // connections ever made, for ECMP hashing
	_     [16]byte

	links []int // the pair's route (for the oracle)
	_     [40]byte
}

type connState struct {
	pair      int
	udp       bool
	offered   float64 // UDP rate
	appCap    float64 // TCP application cap (Inf if none)
	links     []int
	active    bool
	remaining float64 // bits left for sized flows; Inf for bulk
	size      float64 // bytes, for FCT
	start     time.Duration
	gen       int     // client generator to notify when the flow ends (-1: none)
	epoch     int     // the generator's epoch when the flow started
	rate      float64 // delivered this tick
	drop      float64 // UDP bits/s dropped in the network this tick
	inDrop    float64 // of which at the receiver host's ingress scheduler
	sent      float64 // UDP bits/s leaving the sender's host this tick
	id        string  // for the allocator
	// arrival is a flows workload's Poisson arrival time, at or before
	// start (the tick that took it)
	arrival time.Duration
}

type engine struct {
	sc    *spec.Scenario
	tp    *topo.Topology
	opts  Options
	dt    time.Duration
	dtSec float64
	log   *slog.Logger
	clock *clock // Options.Phases (nil: none)

	vms    []vmInfo
	vmIdx  map[string]int
	pairs  []pairState
	pairIx map[mech.PairID]int
	conns  []connState
	free   []int // free conn slots (finished sized flows)
	// activeUDP counts the active UDP connections (setActive)
	activeUDP int
	sized     bool // a sized flow was started (account)

	hosts []*hostAgent
	hostN map[string]int // server name -> index in hosts
	due   []*hostAgent   // the hosts stepping in this tick
	// deferSettings: agents are stepping (stepAgents), their enforcers
	// hold their settings back
	deferSettings bool
	// concurrent: the mechanism's agents may step in parallel
	// (mech.Concurrent)
	concurrent bool
	// control messages in flight (network.control_delay), in send order,
	// and the random stream that loses them (network.control_loss)
	inflight []inflightMsg
	ctlRand  *rand.Rand

	gens   []*generator
	events eventQueue

	// physics; per-resource slices are indexed links first, then limiters
	dirty bool
	// shape counts the changes of the network problem's flows and their
	// paths: connections coming and going, limiters coming and going
	// (setActive, setLimiter); built is shape when the problem was last
	// built, and builtOK whether it may be solved again as it is
	shape, built int
	builtOK      bool
	solver       alloc.Solver
	pool         *pool // the run's helper goroutines
	prob         alloc.Problem
	uses         []alloc.Use
	tcpRates     []float64
	tcpConns     []int // conn index of each TCP problem flow
	capacity     []float64
	udpLoad      []float64 // UDP passing each resource
	load         []float64 // total passing each resource
	// probGen counts the network problems built (solveNetwork); the
	// index of their uses by resource (loadsByResource) is of problem
	// byResGen
	probGen, byResGen int
	byResOK           bool
	byRes             grouped
	byResFlow         []int32
	byResCoef         []float64
	// connGen counts the connections made and finished; the index of
	// connections by pair (connsByPair) is of connGen byPairGen
	connGen, byPairGen int
	byPair             grouped
	byPairList         []int32
	congPart           [][]bool  // markSaturation's parts' congested links
	udpScale           []float64 // fraction of arriving UDP that passes
	udpIn              []float64
	sat                []bool
	congested          []bool // per link: saturated and overflowing
	scheds             []schedState
	ports              []portState
	portOf             []int          // per link: port index, -1
	dscp               map[string]int // tenant → DSCP code point its packets carry
	classedAt          []*classedRes  // per resource: its classes, nil if flat
	classed            bool           // some resource has classes
	hops               []hop

	// appliances and request flows
	apps      []applianceState
	appIdx    map[string]int
	rflows    []rflow
	rflowSlot []int // rflow index of each request flow in the network problem, after the TCP connections
	appSolver alloc.Solver
	appProb   alloc.Problem
	appFlows  []int
	appRates  []float64
	appDemand []float64

	// the declared model the mechanism's agents and controller have, and
	// the declared traffic pattern (every pair of the workloads)
	model   *model.Model
	pattern []mech.PairID
	updates []Update // not yet applied
	// declared marks the VMs of the current model when it lacks some of
	// the scenario's (nil: every VM is declared); agents observe only
	// declared VMs and pairs between them.
	declared []bool

	// central controller (mechanisms implementing mech.Central)
	ctl *controllerState
	// per-VM demands and I/O for agents and the controller (vmio.go)
	vmio vmIO

	out *eval.Input
	// limRes[i] is the resource index of pair i's limiter in the current
	// problem (-1: none), beside the pairs so that marking saturation
	// reads it without a line of every pair's record
	limRes []int32
	// limID[i] is the resource ID of pair i's limiter (made when first
	// in force)
	limID      []string
	sampleTick int     // ticks since the last sample
	pend       pending // ticks accounted, not yet added up (account)
	now        time.Duration
}

type inflightMsg struct {
	sent, at time.Duration
	to       int
	msg      mech.Message
}

type hostAgent struct {
	name    string
	drv     *drive.Host // the mechanism's agent, through the driver core
	last    time.Duration
	egress  []int               // pairs whose src is here
	egIx    map[mech.PairID]int // index in e.pairs of each pair of egress
	ingress []int               // pairs whose dst is here
	vmsHere map[string]bool
	obsEgr  []mech.PairObs
	obsIngr []mech.PairObs
	obsVMs  []mech.VMObs
	vms     []int // local VM indices
	vswitch int   // resource index of the host's virtual switch

	// a step in progress (stepAgents): its observation, the settings the
	// enforcer holds back until every due agent has stepped, and what the
	// driver core returned
	obs     *mech.HostObs
	pending []setting
	msgs    []mech.Message
	err     error
	// the recipients of the last step's messages, in order (recipient)
	sentTo []sentTo
}

// recipient returns the index in hostN of the host the k-th message of
// a step goes to, trying first the one the k-th message of the last step
// went to (agents send to the same hosts in the same order).
func (h *hostAgent) recipient(k int, to string, hostN map[string]int) (int, bool) {
	if k < len(h.sentTo) && h.sentTo[k].ix >= 0 && h.sentTo[k].name == to {
		return h.sentTo[k].ix, true
	}
	j, ok := hostN[to]
	if ok {
		for len(h.sentTo) <= k {
			h.sentTo = append(h.sentTo, sentTo{ix: -1})
		}
		h.sentTo[k] = sentTo{to, j}
	}
	return j, ok
}

// sentTo is a host a message went to, and its index.
type sentTo struct {
	name string
	ix   int
}

// setting is a limit (rate set on *limit) or a scheduler a host's agent
// set in a step, applied after every due agent has stepped.
type setting struct {
	limit *float64
	rate  float64
	sched *mech.Scheduler
}

func newEngine(sc *spec.Scenario, tp *topo.Topology, opts Options) (*engine, error) {
	if opts.Mechanism == nil {
		return nil, fmt.Errorf("sim: no mechanism")
	}
	if opts.TCPLoss == 0 {
		opts.TCPLoss = sc.Network.TCPLoss
	}
	if opts.TCPLoss == 0 {
		opts.TCPLoss = 0.01
	}
	if opts.TCPLoss < 0 || opts.TCPLoss > 1 {
		return nil, fmt.Errorf("sim: TCP loss fraction %g outside [0, 1]", opts.TCPLoss)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dt := time.Duration(sc.DT)
	if dt <= 0 {
		return nil, fmt.Errorf("sim: %s: dt must be positive", sc.File)
	}
	e := &engine{
		sc: sc, tp: tp, opts: opts, dt: dt, dtSec: dt.Seconds(), log: log,
		vmIdx:  map[string]int{},
		pairIx: map[mech.PairID]int{},
		hostN:  map[string]int{},
		appIdx: map[string]int{},
		dirty:  true,
		// A stream of its own, so that losing control messages does not
		// change the workloads' draws.
		ctlRand: rand.New(rand.NewPCG(uint64(sc.Seed), 0xC0)),
	}
	e.portOf = make([]int, len(tp.Links))
	for l := range e.portOf {
		e.portOf[l] = -1
	}
	// The simulator builds its problems itself from validated inputs and
	// solves them every time something changes.
	e.solver.Trusted = true
	// the solver's passes over a large problem's flows and resources run
	// on the run's workers
	e.solver.Parallel = func(n int, fn func(lo, hi int)) {
		e.split(n, n, func(_, lo, hi int) { fn(lo, hi) })
	}
	e.appSolver.Trusted = true
	if err := e.buildVMs(); err != nil {
		return nil, err
	}
	if err := e.checkModels(); err != nil {
		return nil, err
	}
	if err := e.buildAppliances(); err != nil {
		return nil, err
	}
	if err := e.buildWorkloads(); err != nil {
		return nil, err
	}
	if err := e.buildAgents(); err != nil {
		return nil, err
	}
	if err := e.buildController(); err != nil {
		return nil, err
	}
	e.updates = e.opts.Updates
	if c, ok := opts.Mechanism.(mech.Concurrent); ok {
		e.concurrent = c.ConcurrentAgents()
	}
	e.buildOutput()
	return e, nil
}

// checkModels sets the model the run starts with and checks every model
// of the run against the scenario's VMs.
func (e *engine) checkModels() error {
	e.model = e.opts.Model
	if e.model == nil {
		e.model = e.sc.Model()
	}
	check := func(what string, m *model.Model) error {
		if m == nil {
			return fmt.Errorf("sim: %s: no model", what)
		}
		for _, t := range m.Tenants {
			for _, v := range t.VMs {
				i, ok := e.vmIdx[v.Name]
				if !ok || e.tp.Nodes[e.vms[i].host].Name != v.Host || e.vms[i].tenant != t.Name {
					return fmt.Errorf("sim: %s: VM %q of tenant %q on %q is not a VM of the scenario on that server", what, v.Name, t.Name, v.Host)
				}
			}
		}
		return nil
	}
	if err := check("model", e.model); err != nil {
		return err
	}
	e.model = e.withHosts(e.model)
	e.declare(e.model)
	for i, u := range e.opts.Updates {
		if err := check(fmt.Sprintf("update %d", i), u.Model); err != nil {
			return err
		}
		if i > 0 && u.At < e.opts.Updates[i-1].At {
			return fmt.Errorf("sim: update %d at %v comes before update %d at %v", i, u.At, i-1, e.opts.Updates[i-1].At)
		}
	}
	return nil
}

// applyUpdates hands the model changes due by now to every agent and the
// controller.
func (e *engine) applyUpdates() error {
	for len(e.updates) > 0 && e.updates[0].At <= e.now {
		e.catchUp()
		u := e.updates[0]
		e.updates = e.updates[1:]
		e.model = e.withHosts(u.Model)
		e.declare(u.Model)
		for _, h := range e.hosts {
			if err := h.drv.Update(drive.Env(e.model, h.name, e.pattern)); err != nil {
				return fmt.Errorf("sim: t=%v: %w", e.now, err)
			}
		}
		if e.ctl != nil {
			if err := e.ctl.drv.Update(drive.ControllerEnv(e.model, e.ctl.drv.Env().Resources[:len(e.tp.Links)], e.opts.Reservations)); err != nil {
				return fmt.Errorf("sim: t=%v: %w", e.now, err)
			}
		}
		e.log.Debug("model updated", "t", e.now, "tenants", len(u.Model.Tenants))
	}
	return nil
}

// withHosts returns m with the topology's servers and their access links
// when m lists no hosts (a copy: m is the caller's).
func (e *engine) withHosts(m *model.Model) *model.Model {
	if len(m.Hosts) > 0 {
		return m
	}
	c := m.Clone()
	c.Hosts = e.tp.Hosts()
	return c
}

// declare marks the VMs of m (declared stays nil when m has them all).
func (e *engine) declare(m *model.Model) {
	in := make([]bool, len(e.vms))
	n := 0
	for _, t := range m.Tenants {
		for _, v := range t.VMs {
			if i, ok := e.vmIdx[v.Name]; ok && !in[i] {
				in[i] = true
				n++
			}
		}
	}
	e.declared = nil
	if n < len(e.vms) {
		e.declared = in
	}
}

// undeclared says whether a pair has a VM the mechanism does not know.
func (e *engine) undeclared(p *pairState) bool {
	return e.declared != nil && (!e.declared[p.src] || !e.declared[p.dst])
}

func (e *engine) buildVMs() error {
	for ti := range e.sc.Tenants {
		t := &e.sc.Tenants[ti]
		for vi := range t.VMs {
			v := &t.VMs[vi]
			n, ok := e.tp.Node(v.Server)
			if !ok || n.Kind != topo.Server {
				return fmt.Errorf("sim: %s: VM %q: unknown server %q", e.sc.File, v.Name, v.Server)
			}
			in, out := t.Hose(v)
			e.vmIdx[v.Name] = len(e.vms)
			e.vms = append(e.vms, vmInfo{name: v.Name, tenant: t.Name, host: n.ID, in: in, out: out,
				egRate: math.Inf(1), inRate: math.Inf(1), egRes: -1, inRes: -1, egSched: -1, inSched: -1})
		}
	}
	return nil
}

// pairFor returns the index of the pair src->dst, creating it.
func (e *engine) pairFor(tenant, src, dst string) int {
	id := mech.PairID{Src: src, Dst: dst}
	if i, ok := e.pairIx[id]; ok {
		return i
	}
	s, d := e.vmIdx[src], e.vmIdx[dst]
	links := e.tp.Route(e.vms[s].host, e.vms[d].host, topo.PairHash(e.sc.Seed, src, dst))
	e.pairIx[id] = len(e.pairs)
	// Pairs start at different points of their packet streams, so that
	// equal pairs through one queue do not lose packets in lockstep.
	phase := float64(topo.PairHash(e.sc.Seed+1, src, dst)>>11) / (1 << 53)
	e.pairs = append(e.pairs, pairState{id: id, tenant: tenant, src: s, dst: d, links: links, limRate: math.Inf(1),
		lossAcc: phase, markAcc: phase})
	return len(e.pairs) - 1
}

// newConn adds a connection of pair p (inactive) and returns its index.
// Every connection of a pair takes the pair's route (ECMP by the pair's
// hash), the route admission control reserved the pair's guarantee on.
func (e *engine) newConn(p int, udp bool, offered, appCap float64) int {
	ps := &e.pairs[p]
	k := ps.nconn
	ps.nconn++
	links := ps.links
	c := connState{pair: p, udp: udp, offered: offered, appCap: appCap, links: links, remaining: math.Inf(1), gen: -1,
		id: ps.id.Src + "->" + ps.id.Dst + "#" + strconv.Itoa(k)}
	e.connGen++
	if n := len(e.free); n > 0 {
		i := e.free[n-1]
		e.free = e.free[:n-1]
		e.conns[i] = c
		return i
	}
	e.conns = append(e.conns, c)
	return len(e.conns) - 1
}

func (e *engine) buildAgents() error {
	for _, p := range e.pairs {
		e.pattern = append(e.pattern, p.id)
	}
	env := drive.Env(e.model, "", e.pattern)
	// One agent per server that hosts a VM, in server order.
	hostSet := map[int]bool{}
	for _, v := range e.vms {
		hostSet[v.host] = true
	}
	var hostIDs []int
	for h := range hostSet {
		hostIDs = append(hostIDs, h)
	}
	sort.Ints(hostIDs)
	byNode := make(map[int]*hostAgent, len(hostIDs))
	for _, h := range hostIDs {
		name := e.tp.Nodes[h].Name
		ha := &hostAgent{name: name, vmsHere: map[string]bool{}, egIx: map[mech.PairID]int{}}
		env.Host = name
		d, err := drive.NewHost(e.opts.Mechanism, env, &enforcer{e: e, h: ha})
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		// Messages come from mechanisms only: no bound on what waits.
		d.BoundInbox(0)
		ha.drv = d
		byNode[h] = ha
		e.hostN[name] = len(e.hosts)
		e.hosts = append(e.hosts, ha)
	}
	// Every host's VMs and pairs, in VM and pair order.
	for vi, v := range e.vms {
		ha := byNode[v.host]
		ha.vmsHere[v.name] = true
		ha.vms = append(ha.vms, vi)
	}
	for i, ps := range e.pairs {
		src := byNode[e.vms[ps.src].host]
		src.egress = append(src.egress, i)
		src.egIx[ps.id] = i
		dst := byNode[e.vms[ps.dst].host]
		dst.ingress = append(dst.ingress, i)
	}
	return nil
}

func (e *engine) buildOutput() {
	in := &eval.Input{
		Scenario:     e.sc.Name,
		Mechanism:    e.opts.Mechanism.Name(),
		Duration:     time.Duration(e.sc.Duration),
		Interval:     time.Duration(e.sc.Outputs.Sample),
		Units:        e.sc.Units,
		UnitScale:    e.sc.UnitScale(),
		LinkCapacity: make([]float64, len(e.tp.Links)),
		LinkNames:    make([]string, len(e.tp.Links)),
	}
	for i, l := range e.tp.Links {
		in.LinkCapacity[i] = l.Capacity
		in.LinkNames[i] = l.Name
	}
	for _, t := range e.sc.Tenants {
		mt := eval.Tenant{Name: t.Name}
		for _, v := range t.VMs {
			vi := e.vms[e.vmIdx[v.Name]]
			mt.VMs = append(mt.VMs, eval.VM{Name: v.Name, In: vi.in, Out: vi.out})
		}
		in.Tenants = append(in.Tenants, mt)
	}
	for _, p := range e.pairs {
		in.Pairs = append(in.Pairs, eval.Pair{Tenant: p.tenant, Src: p.id.Src, Dst: p.id.Dst, Links: p.links})
	}
	for _, f := range e.rflows {
		in.RequestFlows = append(in.RequestFlows, eval.RequestFlow{Tenant: f.tenant, Src: f.id.Src, Appliance: f.id.Dst})
	}
	for _, a := range e.apps {
		in.Appliances = append(in.Appliances, a.name)
	}
	if len(e.rflows) > 0 {
		in.TokenScale = e.sc.TokenScale()
		in.ApplianceGuarantees = map[string]map[string]float64{}
		for _, t := range e.sc.Tenants {
			if t.VDC == nil {
				continue
			}
			for _, g := range t.VDC.Appliances {
				if in.ApplianceGuarantees[t.Name] == nil {
					in.ApplianceGuarantees[t.Name] = map[string]float64{}
				}
				in.ApplianceGuarantees[t.Name][g.Appliance] = float64(g.Guarantee)
			}
		}
		// Requests to a VM: the end-to-end guarantee is the destination's
		// in-link (tokens are bytes).
		for _, f := range e.rflows {
			if !f.toVM {
				continue
			}
			if in.ApplianceGuarantees[f.tenant] == nil {
				in.ApplianceGuarantees[f.tenant] = map[string]float64{}
			}
			in.ApplianceGuarantees[f.tenant][f.id.Dst] = e.vms[e.vmIdx[f.id.Dst]].in / 8
		}
	}
	e.out = in
}

func (e *engine) run(ctx context.Context) error {
	dur := time.Duration(e.sc.Duration)
	sample := time.Duration(e.sc.Outputs.Sample)
	if sample < e.dt {
		sample = e.dt
	}
	nextSample := sample
	lastSample := time.Duration(0)
	start := time.Now()
	lastProgress := start
	c := e.clock
	c.start()
	for e.now = 0; e.now < dur; e.now += e.dt {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sim: stopped at t=%v: %w", e.now, err)
		}
		if err := e.fireEvents(); err != nil {
			return err
		}
		if err := e.applyUpdates(); err != nil {
			return err
		}
		c.lap(partOther)
		if err := e.stepAgents(); err != nil {
			return err
		}
		c.lap(partAgents)
		if err := e.stepController(); err != nil {
			return err
		}
		c.lap(partController)
		e.physics()
		c.lap(partPhysics)
		e.account()
		e.accountRequests()
		c.lap(partAccounting)
		end := e.now + e.dt
		if end >= nextSample || end >= dur {
			e.takeSample(end, end-lastSample)
			lastSample = end
			nextSample = end + sample
			c.lap(partSamples)
		}
		if e.opts.Progress != nil {
			if w := time.Since(lastProgress); w >= time.Second && time.Since(start) >= 2*time.Second {
				lastProgress = time.Now()
				fmt.Fprintf(e.opts.Progress, "sim %s [%s]: %.1f/%.1f s simulated (%.0f%%), %.1f s elapsed\n",
					e.sc.Name, e.opts.Mechanism.Name(), end.Seconds(), dur.Seconds(), 100*end.Seconds()/dur.Seconds(), time.Since(start).Seconds())
			}
		}
	}
	e.catchUp()
	c.lap(partOther)
	return nil
}

// stepAgents runs every agent whose step is due through the driver core
// and queues its messages for delivery at the recipient's next step. Every
// due host observes the tick just simulated, then the agents step —
// several at once for a mech.Concurrent mechanism (Options.Workers) —
// and then their limits and schedulers are applied (enforcer) and their
// messages sent, host by host in host order: no agent sees in its
// observation what another set in the same tick, which takes effect at
// the next tick, so the results do not depend on the order or the
// number of workers.
func (e *engine) stepAgents() error {
	if len(e.inflight) > 0 {
		kept := e.inflight[:0]
		for _, m := range e.inflight {
			if m.at <= e.now && m.sent < e.now {
				e.hosts[m.to].drv.Deliver(m.msg)
			} else {
				kept = append(kept, m)
			}
		}
		e.inflight = kept
	}
	due := e.due[:0]
	for _, h := range e.hosts {
		if h.drv.Due(e.now) {
			due = append(due, h)
		}
	}
	e.due = due
	if len(due) == 0 {
		return nil
	}
	e.catchUp() // observations read the accumulators
	step := func(h *hostAgent) {
		h.obs = e.observe(h)
		h.msgs, h.err = h.drv.Step(h.obs)
	}
	if e.clock != nil {
		e.clock.ph.Steps += len(due)
	}
	e.deferSettings = true
	if w := e.workers(len(due)); w > 1 {
		e.pool.Run(w, len(due), func(i int) { step(due[i]) })
	} else {
		for _, h := range due {
			step(h)
		}
	}
	e.deferSettings = false
	e.applyPending(due)
	for _, h := range due {
		clear(h.pending)
		h.pending = h.pending[:0]
		h.obs = nil
		h.last = e.now
		msgs, err := h.msgs, h.err
		h.msgs, h.err = nil, nil
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		for k, m := range msgs {
			j, ok := h.recipient(k, m.To, e.hostN)
			if !ok {
				return fmt.Errorf("sim: mechanism %s: agent on %s sent a message to unknown host %q", e.opts.Mechanism.Name(), h.name, m.To)
			}
			if l := e.sc.Network.ControlLoss; l > 0 && e.ctlRand.Float64() < l {
				continue
			}
			// Delivered at the recipient's first step after it arrives,
			// and never in the tick it was sent.
			e.inflight = append(e.inflight, inflightMsg{sent: e.now, at: e.now + time.Duration(e.sc.Network.ControlDelay), to: j, msg: m})
		}
	}
	return nil
}

func (e *engine) observe(h *hostAgent) *mech.HostObs {
	period := e.now - h.last
	obs := &mech.HostObs{Now: e.now, Period: period}
	sec := period.Seconds()
	// Observations are written in place, at most one per pair.
	egr := slices.Grow(h.obsEgr[:0], len(h.egress))[:len(h.egress)]
	n := 0
	for _, i := range h.egress {
		p := &e.pairs[i]
		limited := !math.IsInf(p.limRate, 1)
		if (p.txBits > 0 || limited || p.txLoss > 0 || p.txMark > 0) && !e.undeclared(p) {
			o := &egr[n]
			n++
			*o = mech.PairObs{Pair: p.id, Tenant: p.tenant, Limit: p.limRate, Losses: p.txLoss, Marks: p.txMark}
			if sec > 0 {
				o.Rate = p.txBits / sec
			}
			o.LimiterBound = p.srcTicks > 0 && 2*p.boundTicks >= p.srcTicks
		}
		p.txBits, p.txLoss, p.txMark, p.boundTicks, p.srcTicks = 0, 0, 0, 0, 0
	}
	clear(egr[n:])
	h.obsEgr = egr[:n]
	ingr := slices.Grow(h.obsIngr[:0], len(h.ingress))[:len(h.ingress)]
	n = 0
	drops := false // some pair was dropped at a VM's ingress
	for _, i := range h.ingress {
		p := &e.pairs[i]
		drops = drops || p.inDropAcc > 0
		if (p.rxBits > 0 || p.rxLoss > 0 || p.rxMark > 0) && !e.undeclared(p) {
			o := &ingr[n]
			n++
			*o = mech.PairObs{Pair: p.id, Tenant: p.tenant, Limit: p.limRate, Losses: p.rxLoss, Marks: p.rxMark}
			if sec > 0 {
				o.Rate = p.rxBits / sec
			}
		}
		p.rxBits, p.rxLoss, p.rxMark = 0, 0, 0
	}
	clear(ingr[n:])
	h.obsIngr = ingr[:n]
	obs.Egress, obs.Ingress = h.obsEgr, h.obsIngr
	h.obsVMs = h.obsVMs[:0]
	for _, vi := range h.vms {
		v := &e.vms[vi]
		if e.declared != nil && !e.declared[vi] {
			v.inBits, v.outBits, v.inDropBits = 0, 0, 0
			continue
		}
		o := mech.VMObs{VM: v.name}
		if sec > 0 {
			o.InRate, o.OutRate, o.InDrops = v.inBits/sec, v.outBits/sec, v.inDropBits/sec
			o.InArrival = o.InRate + o.InDrops
		}
		o.OutDemand, o.InDemand = e.agentDemand(vi, sec)
		most := 0.0
		for _, i := range h.ingress {
			if !drops {
				break
			}
			p := &e.pairs[i]
			if p.dst == vi && p.inDropAcc > most && !e.undeclared(p) {
				most, o.DropSrc = p.inDropAcc, p.id.Src
			}
		}
		v.inBits, v.outBits, v.inDropBits = 0, 0, 0
		h.obsVMs = append(h.obsVMs, o)
	}
	if drops {
		for _, i := range h.ingress {
			e.pairs[i].inDropAcc = 0
		}
	}
	obs.VMs = h.obsVMs
	return obs
}

// enforcer applies a host's limits and schedulers in the simulator (the
// driver core has checked them against the environment).
type enforcer struct {
	e *engine
	h *hostAgent
}

// SetLimit implements drive.Enforcer.
func (en *enforcer) SetLimit(l mech.Limit) error {
	hint := int32(-1)
	return en.SetLimitHint(l, &hint)
}

// SetLimitHint implements drive.HintedEnforcer: a pair limit's hint is
// the pair's index in e.pairs.
func (en *enforcer) SetLimitHint(l mech.Limit, hint *int32) error {
	e := en.e
	var rate *float64
	switch l.Kind {
	case mech.PairLimit:
		if i := int(*hint); i >= 0 && i < len(e.pairs) && e.pairs[i].id == l.Pair {
			rate = &e.pairs[i].limRate
			break
		}
		// The driver core has checked that the pair's source is here:
		// the pair is one of the host's (a smaller map than e.pairIx).
		i, ok := en.h.egIx[l.Pair]
		if !ok {
			return fmt.Errorf("limited pair %s->%s, which has no traffic in the scenario", l.Pair.Src, l.Pair.Dst)
		}
		*hint = int32(i)
		rate = &e.pairs[i].limRate
	case mech.VMEgress:
		rate = &e.vms[e.vmIdx[l.VM]].egRate
	case mech.VMIngress:
		rate = &e.vms[e.vmIdx[l.VM]].inRate
	default:
		return nil
	}
	if e.deferSettings {
		en.h.pending = append(en.h.pending, setting{limit: rate, rate: l.Rate})
		return nil
	}
	e.setLimiter(rate, l.Rate)
	return nil
}

// SetScheduler implements drive.Enforcer.
func (en *enforcer) SetScheduler(s mech.Scheduler) error {
	if en.e.deferSettings {
		en.h.pending = append(en.h.pending, setting{sched: &s})
		return nil
	}
	en.e.applyScheduler(en.h, s)
	return nil
}

// setLimiter sets a limiter's rate (+Inf removes it).
func (e *engine) setLimiter(rate *float64, r float64) {
	changed, comesOrGoes := setRate(rate, r)
	if comesOrGoes {
		e.shape++
	}
	e.dirty = e.dirty || changed
}

// setRate sets a limiter's rate and reports whether it changed, and
// whether a limiter came or went (+Inf: none).
func setRate(rate *float64, r float64) (changed, comesOrGoes bool) {
	if *rate == r {
		return false, false
	}
	comesOrGoes = math.IsInf(*rate, 1) != math.IsInf(r, 1)
	*rate = r
	return true, comesOrGoes
}

// applyPending applies the settings the due hosts' agents made in their
// steps, host by host. Each host sets only its own pairs' and VMs'
// limiters, so without schedulers (which change what several hosts
// share) the hosts' limits are set on the run's workers.
func (e *engine) applyPending(due []*hostAgent) {
	n, scheds := 0, false
	for _, h := range due {
		n += len(h.pending)
		for _, st := range h.pending {
			scheds = scheds || st.sched != nil
		}
	}
	if w := e.workers(len(due)); !scheds && w > 1 && n >= 2*splitMin {
		var shape atomic.Int64
		var dirty atomic.Bool
		e.pool.Run(w, len(due), func(i int) {
			k, d := 0, false
			for _, st := range due[i].pending {
				changed, comesOrGoes := setRate(st.limit, st.rate)
				d = d || changed
				if comesOrGoes {
					k++
				}
			}
			shape.Add(int64(k))
			if d {
				dirty.Store(true)
			}
		})
		e.shape += int(shape.Load())
		e.dirty = e.dirty || dirty.Load()
		return
	}
	for _, h := range due {
		for _, st := range h.pending {
			if st.sched != nil {
				e.applyScheduler(h, *st.sched)
			} else {
				e.setLimiter(st.limit, st.rate)
			}
		}
	}
}

// splitMin is the least work split gives a worker (below it, starting
// workers costs more than it saves).
const splitMin = 2048

// maxSplit bounds the parts of split.
const maxSplit = 64

// split calls fn on parts k (< maxSplit) of [0, n), [lo, hi), in parallel
// when there are several workers (Options.Workers, GOMAXPROCS by default)
// and the work (in items of about a pair's cost) is large, and returns
// when all have returned. Every index is in one part; fn must not write
// what another part reads. The parts are more than the workers, taken
// in turn by whichever is free, so that a worker the machine holds back
// delays the others little.
func (e *engine) split(n, work int, fn func(k, lo, hi int)) {
	w := min(e.maxWorkers(), work/splitMin, n, maxSplit)
	if w <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	parts := min(4*w, n, maxSplit)
	e.pool.Run(w, parts, func(k int) { fn(k, k*n/parts, (k+1)*n/parts) })
}

// maxWorkers is Options.Workers, GOMAXPROCS by default.
func (e *engine) maxWorkers() int {
	if w := e.opts.Workers; w > 0 {
		return w
	}
	return runtime.GOMAXPROCS(0)
}

// workers is how many agents step at once when n are due.
func (e *engine) workers(n int) int {
	if !e.concurrent {
		return 1
	}
	return min(e.maxWorkers(), n)
}
