// Package hosefill is Bulkhead's own mechanism for hose-model bandwidth
// guarantees that are work-conserving: a central controller that, every
// period (10 ms), turns what the source hosts measured per VM pair into
// pair rate limits — each pair's hose guarantee for its estimated demand
// first, then the spare capacity of every link shared among the pairs that
// want more, in proportion to their guarantees — and fills what nobody
// wants into every pair's limit, so that a pair whose demand grows finds
// room at once. See docs/hosefill.md.
//
// It was built for issue 11, item 4: ElasticSwitch (mech/elasticswitch)
// decides at every hypervisor alone and finds spare capacity by probing
// (a weighted TCP-like increase, ∝ the pair's guarantee), so pairs with
// guarantees of a few Mbps climb into large spare capacity slowly and every
// congestion event takes back 40% of what they won (§5, §7): 57–66% of the
// ideal on the Fig. 8 shuffles. A controller that knows the topology's link
// capacities and every pair's path computes the same allocation the
// evaluation's ideal uses (hose guarantees as floors, the residual by
// weighted max-min with weights = guarantees, eval.Oracle), on demands it
// estimates from measurements alone:
//
//   - a pair its limiter held back (the source's enforcer had a backlog,
//     or it sent at ≥ 90% of its limit) is unbounded: it gets its
//     guarantee and its weighted share of whatever is left;
//   - a pair sending below its limit across a full link may be starved
//     there (TCP beside UDP) and is unbounded after two periods of it, or
//     at once if its VMs have no other pair with demand;
//   - any other pair that sent is bounded at what it sent × (1 + margin)²;
//   - a pair that sent nothing has no demand (no guarantee is held for it,
//     which is what work conservation means).
//
// No pair's limit is below the guarantee it would have were its demand
// unbounded (see potentials), so a flow that starts on an idle or bounded
// pair sends at its guarantee at once and gets its share of the spare at
// the next step. Links are allocated up to (1 − headroom) of their
// capacity; the headroom is also the gap through which a pair never seen
// (behind unresponsive senders filling its link) sends and shows up.
//
// The controller is central: host agents do nothing (the pair limits are
// the controller's allocations, applied by the driver at the sources).
// Capabilities declare it: pair limiters and a central controller, which
// host agents on real traffic do not run.
package hosefill

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/hose"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Name of the mechanism.
const Name = "hosefill"

// Config holds the controller's parameters. Rates are in bits/s.
type Config struct {
	// Period is the controller's period (10 ms).
	Period time.Duration
	// Margin: a bounded pair's demand is its measured rate × (1 + Margin)
	// (0.1).
	Margin float64
	// Headroom is the fraction of every link's capacity left unallocated
	// (0.01). It is how the controller finds pairs it has never seen: a
	// pair that sends nothing has no demand and no limit, and behind
	// unresponsive senders (UDP) allocated a link to the last bit, a TCP
	// pair gets nothing, so it would never send and never be seen (random
	// network scenarios 29 and 30: tenants at 0 behind a UDP flood). In
	// the gap it sends, shows demand across a full link and gets its
	// guarantee at the next step. A real network also wants a few percent
	// to keep its queues short.
	Headroom float64
	// MinRate is the lowest limit of a pair (100 Kbps).
	MinRate float64
}

// Defaults returns the default parameters.
func Defaults() Config {
	return Config{Period: 10 * time.Millisecond, Margin: 0.1, Headroom: 0.01, MinRate: 100e3}
}

// ParamNames lists the scenario parameters (see Parse).
func ParamNames() []string { return []string{"period", "margin", "headroom", "min_rate"} }

// Parse reads scenario parameters (mechanism.params) over Defaults:
//
//	period    controller period (duration, "10ms")
//	margin    demand-estimate margin of bounded pairs (0.1)
//	headroom  fraction of each link left unallocated, in [0, 1) (0.01)
//	min_rate  lowest pair limit (rate, "100Kbps")
//
// Problems are *spec.FieldError values, joined.
func Parse(params map[string]any) (Config, error) {
	p := spec.Params(params)
	cfg := Defaults()
	if err := p.Check(ParamNames()...); err != nil {
		return cfg, err
	}
	r := p.Reader()
	r.Duration(&cfg.Period, "period")
	r.Float(&cfg.Margin, "margin")
	r.Float(&cfg.Headroom, "headroom")
	r.Rate(&cfg.MinRate, "min_rate")
	if err := r.Err(); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// Validate checks the parameters' ranges.
func (c *Config) Validate() error {
	var pe spec.ParamErrors
	bad := pe.Bad
	if c.Period <= 0 {
		bad("period", "must be positive, got %v", c.Period)
	}
	if !(c.Margin >= 0 && c.Margin < 1) {
		bad("margin", "must be in [0, 1), got %g", c.Margin)
	}
	if !(c.Headroom >= 0 && c.Headroom < 1) {
		bad("headroom", "must be in [0, 1), got %g", c.Headroom)
	}
	if !(c.MinRate > 0) || math.IsInf(c.MinRate, 0) {
		bad("min_rate", "must be a positive finite rate, got %g", c.MinRate)
	}
	return pe.Err()
}

// Mechanism is hosefill with one configuration.
type Mechanism struct{ cfg Config }

// New parses params (see Parse) and returns the mechanism.
func New(params map[string]any) (*Mechanism, error) {
	cfg, err := Parse(params)
	if err != nil {
		return nil, err
	}
	return &Mechanism{cfg: cfg}, nil
}

// Name implements mech.Mechanism.
func (m *Mechanism) Name() string { return Name }

// Config returns the configuration.
func (m *Mechanism) Config() Config { return m.cfg }

// NewAgent implements mech.Mechanism: host agents do nothing; the
// controller's allocations are the pair limits.
func (m *Mechanism) NewAgent(mech.Env) (mech.Agent, error) { return idle{}, nil }

type idle struct{}

func (idle) Period() time.Duration                           { return time.Hour }
func (idle) Step(*mech.HostObs, []mech.Message) mech.Actions { return mech.Actions{} }

// NewController implements mech.Central.
func (m *Mechanism) NewController(env mech.ControllerEnv) (mech.Controller, error) {
	return NewController(m.cfg, env)
}

// usedFraction: a pair that sent at this fraction of its limit used it.
const usedFraction = 0.9

// neverActive is the last sending time of a pair that never sent.
const neverActive = -time.Duration(math.MaxInt64 / 2)

// fullLink: a link whose measured load reaches this fraction of its
// allocatable capacity is full.
const fullLink = 0.98

// bottlenecked says whether a pair crosses a full link.
func (c *Controller) bottlenecked(p *pair) bool {
	for _, l := range p.links {
		if c.sent[l] >= fullLink*c.env.Resources[l].Capacity*8*(1-c.cfg.Headroom) {
			return true
		}
	}
	return false
}

// minWeightFraction is the weight, relative to the largest guarantee, of a
// pair with no guarantee (eval.MinWeightFraction, for the same ideal).
const minWeightFraction = 1e-6

// pair is the controller's state of one VM pair.
type pair struct {
	id      mech.FlowID
	tenant  int   // index into Controller.tenants
	src     int   // VM indices in the tenant's hose network
	dst     int   //
	links   []int // resources on its path
	demand  float64
	guar    float64
	rate    float64       // allocation, bits/s
	active  time.Duration // last time it sent (the time of a step)
	suspect bool          // scratch for trustSuspects
}

type tenant struct {
	name string
	net  *hose.Network
	// scratch
	pairs []int
	ip    []hose.IndexPair
	g     []float64
	// per VM (index in net): the demands of its pairs with demand out of
	// it and into it, and the share of its out- and in-hose a pair with
	// unbounded demand would get among them (see potentials)
	dout, din [][]float64
	lout, lin []float64
}

// Controller is the central allocator. It is not safe for concurrent use.
type Controller struct {
	cfg     Config
	env     mech.ControllerEnv
	tenants []tenant
	vmAt    map[string][2]int // VM → tenant index, index in its network
	pairs   []*pair           // sorted by (Src, Dst)
	byID    map[mech.FlowID]*pair

	solver alloc.Solver
	prob   alloc.Problem
	rates  []float64
	load   []float64
	flowOf []int         // prob.Flows[k] is pairs[flowOf[k]]
	sent   []float64     // per resource: bits/s the pairs sent over the period
	obs    []int         // indices of the observed VM pairs in ControllerObs.Flows
	last   time.Duration // time of the previous step
	// pairs that sent in this period only, below their limits across a
	// full link, and the VMs (tenant, index) with other pairs with demand
	// out of them and into them (see trustSuspects)
	suspects        []*pair
	busyOut, busyIn map[[2]int]bool
}

// NewController returns the controller for env under cfg.
func NewController(cfg Config, env mech.ControllerEnv) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &Controller{cfg: cfg, env: env, vmAt: map[string][2]int{}, byID: map[mech.FlowID]*pair{},
		solver: alloc.Solver{Trusted: true}}
	byTenant := map[string][]hose.VM{}
	var names []string
	for _, v := range env.VMs {
		if _, ok := byTenant[v.Tenant]; !ok {
			names = append(names, v.Tenant)
		}
		byTenant[v.Tenant] = append(byTenant[v.Tenant], hose.VM{Name: v.Name, In: v.In, Out: v.Out})
	}
	sort.Strings(names)
	for ti, n := range names {
		net, err := hose.NewNetwork(byTenant[n])
		if err != nil {
			return nil, fmt.Errorf("%s: tenant %s: %w", Name, n, err)
		}
		c.tenants = append(c.tenants, tenant{name: n, net: net})
		for i, v := range byTenant[n] {
			c.vmAt[v.Name] = [2]int{ti, i}
		}
	}
	for i, r := range env.Resources {
		if r.Kind == mech.LinkResource {
			c.prob.Resources = append(c.prob.Resources, alloc.Resource{ID: r.ID})
		} else {
			c.prob.Resources = append(c.prob.Resources, alloc.Resource{ID: fmt.Sprintf("res%d", i)})
		}
	}
	return c, nil
}

// Period implements mech.Controller.
func (c *Controller) Period() time.Duration { return c.cfg.Period }

// Guarantee returns the guarantee the controller last gave a pair (bits/s).
func (c *Controller) Guarantee(src, dst string) (float64, bool) {
	if p := c.byID[mech.FlowID{Src: src, Dst: dst}]; p != nil {
		return p.guar, true
	}
	return 0, false
}

// Demand returns the controller's last demand estimate of a pair (bits/s,
// +Inf for unbounded).
func (c *Controller) Demand(src, dst string) (float64, bool) {
	if p := c.byID[mech.FlowID{Src: src, Dst: dst}]; p != nil {
		return p.demand, true
	}
	return 0, false
}

// Step implements mech.Controller: it estimates every pair's demand from
// the period's measurements, computes the allocation and returns a limit
// for every pair it knows.
func (c *Controller) Step(obs *mech.ControllerObs) mech.ControllerActions {
	for _, p := range c.pairs {
		p.demand = 0 // not measured: nothing sent
	}
	// What the pairs sent on every link: a link loaded to its allocatable
	// capacity is a bottleneck, where a pair sending below its limit may
	// be held back by the network (TCP sharing with an unresponsive
	// sender, say) rather than by its own demand.
	if cap(c.sent) < len(c.env.Resources) {
		c.sent = make([]float64, len(c.env.Resources))
	}
	c.sent = c.sent[:len(c.env.Resources)]
	clear(c.sent)
	c.obs = c.obs[:0]
	for i := range obs.Flows {
		fo := &obs.Flows[i]
		p := c.pairOf(fo)
		if p == nil || len(fo.Used) == 0 {
			continue
		}
		c.obs = append(c.obs, i)
		for _, l := range p.links {
			c.sent[l] += fo.Used[0] * 8
		}
	}
	for _, i := range c.obs {
		fo := &obs.Flows[i]
		p := c.byID[fo.Flow]
		used := fo.Used[0] * 8
		limit := math.Inf(1)
		if len(fo.Allocation) > 0 {
			limit = fo.Allocation[0] * 8
			for _, a := range fo.Allocation[1:] {
				limit = math.Min(limit, a*8)
			}
		}
		held := len(fo.Backlog) > 0 && fo.Backlog[0] > 0
		// Sent in this period and the one before.
		steady := used > 0 && p.active == c.last
		if used > 0 {
			p.active = obs.Now
		}
		switch {
		case held || used >= usedFraction*limit:
			p.demand = math.Inf(1)
		case used > 0 && c.bottlenecked(p) && steady:
			// Sending for two periods below its limit across a full link:
			// its demand is unknown, perhaps starved there (TCP beside an
			// unresponsive sender gets only what the headroom leaves);
			// deem it unbounded so that it gets its guarantee.
			p.demand = math.Inf(1)
		case used > 0:
			// (1 + margin)²: a steady demand stays below usedFraction of
			// the limit it gets, so it stays classified bounded.
			p.demand = used * (1 + c.cfg.Margin) * (1 + c.cfg.Margin)
			if c.bottlenecked(p) {
				c.suspects = append(c.suspects, p)
			}
		}
	}
	c.trustSuspects()
	c.last = obs.Now
	c.allocate()
	var act mech.ControllerActions
	for _, p := range c.pairs {
		n := len(p.links)
		r := make([]float64, n)
		for k := range r {
			r[k] = p.rate / 8
		}
		act.Allocations = append(act.Allocations, mech.FlowAllocation{Flow: p.id, Rates: r})
	}
	return act
}

// trustSuspects deems unbounded, like a pair starved for two periods, a
// pair that started sending in this period below its limit across a full
// link when neither its source nor its destination VM has another pair
// with demand (other than such new ones): its guarantee then comes out of
// other tenants' spare, not out of its own tenant's other guarantees, and
// a pair that starts on an idle VM behind a full link (an on/off tenant)
// gets its guarantee a period sooner. A new pair of a busy VM waits for a
// second period of traffic: it may be a short flow, done already, whose
// guarantee would be cut from its VM's other pairs for a period in which
// it sends nothing (Fig. 9's short flows beside x's elephant).
func (c *Controller) trustSuspects() {
	if len(c.suspects) == 0 {
		return
	}
	if c.busyOut == nil {
		c.busyOut, c.busyIn = map[[2]int]bool{}, map[[2]int]bool{}
	}
	clear(c.busyOut)
	clear(c.busyIn)
	for _, p := range c.suspects {
		p.suspect = true
	}
	for _, p := range c.pairs {
		if p.demand > 0 && !p.suspect {
			c.busyOut[[2]int{p.tenant, p.src}] = true
			c.busyIn[[2]int{p.tenant, p.dst}] = true
		}
	}
	for _, p := range c.suspects {
		if !c.busyOut[[2]int{p.tenant, p.src}] && !c.busyIn[[2]int{p.tenant, p.dst}] {
			p.demand = math.Inf(1)
		}
		p.suspect = false
	}
	clear(c.suspects)
	c.suspects = c.suspects[:0]
}

// pairOf returns the state of an observed VM-to-VM flow, made on first
// sight; nil for flows the controller does not allocate (to appliances,
// between tenants, or with a path that is not all links).
func (c *Controller) pairOf(fo *mech.FlowObs) *pair {
	if p := c.byID[fo.Flow]; p != nil {
		return p
	}
	s, ok1 := c.vmAt[fo.Flow.Src]
	d, ok2 := c.vmAt[fo.Flow.Dst]
	if !ok1 || !ok2 || s[0] != d[0] {
		return nil
	}
	p := &pair{id: fo.Flow, tenant: s[0], src: s[1], dst: d[1], active: neverActive}
	for _, e := range fo.Path {
		if e.Role != mech.Forward || e.Resource < 0 || e.Resource >= len(c.env.Resources) ||
			c.env.Resources[e.Resource].Kind != mech.LinkResource {
			return nil
		}
		p.links = append(p.links, e.Resource)
	}
	c.byID[p.id] = p
	i := sort.Search(len(c.pairs), func(i int) bool { return !pairLess(c.pairs[i].id, p.id) })
	c.pairs = append(c.pairs, nil)
	copy(c.pairs[i+1:], c.pairs[i:])
	c.pairs[i] = p
	return p
}

func pairLess(x, y mech.FlowID) bool { return x.Src < y.Src || x.Src == y.Src && x.Dst < y.Dst }

// allocate computes every pair's guarantee and rate from the demands:
// hose guarantees per tenant; guarantees as floors (scaled down on a link
// they over-commit) and the residual to the pairs with demand above their
// guarantee by weighted max-min (weights = guarantees); then what is left
// on each link to every pair crossing it, again by weight, so that bounded
// and idle pairs can grow into it at once.
func (c *Controller) allocate() {
	for ti := range c.tenants {
		t := &c.tenants[ti]
		t.pairs, t.ip = t.pairs[:0], t.ip[:0]
	}
	for i, p := range c.pairs {
		t := &c.tenants[p.tenant]
		t.pairs = append(t.pairs, i)
		t.ip = append(t.ip, hose.IndexPair{Src: p.src, Dst: p.dst, Demand: p.demand})
	}
	maxG := 0.0
	for ti := range c.tenants {
		t := &c.tenants[ti]
		if len(t.pairs) == 0 {
			continue
		}
		if cap(t.g) < len(t.ip) {
			t.g = make([]float64, len(t.ip))
		}
		t.g = t.g[:len(t.ip)]
		if err := t.net.Solve(t.ip, t.g); err != nil {
			// Cannot happen: the networks and pairs were checked when built.
			clear(t.g)
		}
		for k, i := range t.pairs {
			p := c.pairs[i]
			p.guar = math.Min(t.g[k], p.demand)
			maxG = math.Max(maxG, p.guar)
		}
		t.potentials()
	}
	minW := 1.0
	if maxG > 0 {
		minW = minWeightFraction * maxG
	}
	// Capacities and the guarantees' load on each link.
	res := c.prob.Resources
	if cap(c.load) < len(res) {
		c.load = make([]float64, len(res))
	}
	c.load = c.load[:len(res)]
	clear(c.load)
	for _, p := range c.pairs {
		for _, l := range p.links {
			c.load[l] += p.guar
		}
	}
	for l := range res {
		res[l].Capacity = c.env.Resources[l].Capacity * 8 * (1 - c.cfg.Headroom)
	}
	scale := func(p *pair) float64 {
		s := 1.0
		for _, l := range p.links {
			if c.load[l] > res[l].Capacity && c.load[l] > 0 {
				s = math.Min(s, res[l].Capacity/c.load[l]*(1-1e-12))
			}
		}
		return s
	}
	// First pass: floors and demands.
	c.prob.Flows, c.flowOf = c.prob.Flows[:0], c.flowOf[:0]
	for i, p := range c.pairs {
		p.rate = 0
		if p.demand == 0 {
			continue
		}
		c.prob.Flows = append(c.prob.Flows, c.flow(p, p.guar*scale(p), p.demand, math.Max(p.guar, minW)))
		c.flowOf = append(c.flowOf, i)
	}
	c.solve()
	// Second pass: what is left, to every pair by weight (its guarantee
	// were it unbounded is unknown; its current one, or the least weight).
	for l := range res {
		res[l].Capacity = 0
	}
	for l := range c.load {
		c.load[l] = 0
	}
	for _, p := range c.pairs {
		for _, l := range p.links {
			c.load[l] += p.rate
		}
	}
	for l := range res {
		res[l].Capacity = math.Max(0, c.env.Resources[l].Capacity*8*(1-c.cfg.Headroom)-c.load[l])
	}
	c.prob.Flows, c.flowOf = c.prob.Flows[:0], c.flowOf[:0]
	for i, p := range c.pairs {
		c.prob.Flows = append(c.prob.Flows, c.flow(p, 0, alloc.Unbounded, math.Max(p.guar, minW)))
		c.flowOf = append(c.flowOf, i)
	}
	c.solve()
	// No pair is limited below the guarantee it would get were its demand
	// unbounded, so that a flow starting on an idle or bounded pair has
	// its guarantee at once instead of a period later (on a full link its
	// fill share is min_rate, and a short flow would crawl through its
	// first period and stay short of its guarantee for as long). When
	// several such pairs start together they may over-commit a link
	// until the next step, as a pair not yet seen, which runs unlimited,
	// does.
	for _, p := range c.pairs {
		t := &c.tenants[p.tenant]
		p.rate = math.Max(p.rate, math.Max(math.Min(t.lout[p.src], t.lin[p.dst]), c.cfg.MinRate))
	}
}

// potentials computes, for every VM of the tenant, the share of its out-
// and in-hose a pair with unbounded demand would get besides the VM's
// pairs with demand (t.ip): the level of the max-min of the hose among
// their demands and one more unbounded one. The lower of a pair's
// source's and destination's levels is at most its hose guarantee were
// its demand unbounded (at the VM where it would be bottlenecked, every
// other pair gets at most its demand and at most the pair's share), so a
// limit at that level holds no more than the pair's guarantee.
func (t *tenant) potentials() {
	vms := t.net.VMs()
	n := len(vms)
	for len(t.dout) < n {
		t.dout, t.din = append(t.dout, nil), append(t.din, nil)
	}
	if cap(t.lout) < n {
		t.lout, t.lin = make([]float64, n), make([]float64, n)
	}
	t.lout, t.lin = t.lout[:n], t.lin[:n]
	for i := range n {
		t.dout[i], t.din[i] = t.dout[i][:0], t.din[i][:0]
	}
	for _, ip := range t.ip {
		if ip.Demand > 0 {
			t.dout[ip.Src] = append(t.dout[ip.Src], ip.Demand)
			t.din[ip.Dst] = append(t.din[ip.Dst], ip.Demand)
		}
	}
	for i, v := range vms {
		t.lout[i] = level(v.Out, t.dout[i])
		t.lin[i] = level(v.In, t.din[i])
	}
}

// level is the max-min share of capacity that one more unbounded demand
// gets among demands (sorted in place).
func level(capacity float64, demands []float64) float64 {
	sort.Float64s(demands)
	left, k := capacity, len(demands)+1
	for _, d := range demands {
		if d > left/float64(k) {
			break // every demand from here on gets the level (+Inf too)
		}
		left -= d
		k--
	}
	return math.Max(left/float64(k), 0)
}

func (c *Controller) flow(p *pair, floor, demand, weight float64) alloc.Flow {
	uses := make([]alloc.Use, len(p.links))
	for k, l := range p.links {
		uses[k] = alloc.Use{Resource: l, Coef: 1}
	}
	return alloc.Flow{ID: p.id.Src + "->" + p.id.Dst, Uses: uses, Demand: demand, Weight: weight, Floor: math.Min(floor, demand)}
}

// solve runs the max-min on c.prob and adds the rates to the pairs.
func (c *Controller) solve() {
	if len(c.prob.Flows) == 0 {
		return
	}
	if cap(c.rates) < len(c.prob.Flows) {
		c.rates = make([]float64, len(c.prob.Flows))
	}
	c.rates = c.rates[:len(c.prob.Flows)]
	if err := c.solver.Solve(&c.prob, c.rates); err != nil {
		return // inputs are built here from checked values
	}
	for k, i := range c.flowOf {
		if r := c.rates[k]; r > 0 && !math.IsInf(r, 1) {
			c.pairs[i].rate += r
		}
	}
}
