package pulsar

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// Controller is Pulsar's central control loop (see the package comment). It
// implements mech.Controller. It is not safe for concurrent use.
//
// Each Step, one phase after another (one file per phase):
//
//   - Demand (ingest.go): every observed flow's estimate (EstimateDemand;
//     Bound decides whether it was held back, by its allocation or, for a
//     flow never allocated, by the default rate; Held whether requests
//     were left queued at its enforcer). A flow not observed decays as if
//     it demanded 0; after ForgetIntervals steps without observations it
//     is forgotten and its allocation reset to the default rate.
//   - Capacity (estimate.go): each allocated appliance's CapacityEstimator
//     observes the interval: throughput and outstanding tokens summed over
//     the flows on it, per-tenant usage, what the previous step granted
//     there, and the queueing delay there, which the controller attributes
//     to appliances from its flows' round trips (outstanding ÷ used) against
//     their unloaded baselines (delays): a FIFO appliance delays every flow
//     it serves, so the flows through a queue-free appliance clear it of the
//     queueing its other flows meet elsewhere on their way. From those
//     delays, the demand the queues hide (hiddenDemand: QueueFactor, a
//     closed loop's window over its round trip without the queue), per
//     flow and summed per tenant (TenantObs.Demand, for the VDC-violation
//     signal).
//   - Smoothing (ingest.go, smooth): the estimate is scaled down, as a
//     vector, until no element exceeds its resource's capacity (links:
//     capacity; appliances: the window's maximum), then averaged:
//     d ← ewma·estimate + (1−ewma)·d (the first estimate is taken as is).
//   - Local (local.go): for each tenant, its policy over its virtual
//     resources. A flow's demand on a virtual resource is its largest demand
//     among the path elements mapped to it: Forward links → the source VM's
//     out-link and, for a flow to a VM of the same tenant, the destination
//     VM's in-link; Reverse links → the source VM's in-link; an appliance →
//     the tenant's virtual appliance. An element without such a guarantee
//     (an unknown VM, a VM of another tenant, an appliance not in the VDC)
//     maps to a virtual resource of capacity 0: the flow then gets nothing
//     locally. Guarantees first: the local demand of a flow held back by
//     its enforcer is k·d, k ≥ 1 raising it to the capacity of one of its
//     virtual resources (its whole guarantee: a new or returning flow gets
//     it at once, not as its estimate ramps up); of a flow whose requests
//     queue at appliances, k·d up to its demand without the queues, within
//     its guarantees. The policies scale a flow's local demand vector by
//     x ∈ [0, 1]; the flow's local allocation on each path element is
//     lx·d, lx = x·k.
//   - Global (global.go): the spare capacity of every allocated physical
//     resource — links (1−headroom)·capacity, appliances the estimate, minus
//     the local allocations — goes to the unmet demands (1−lx)·d of the
//     flows of tenants whose guarantees are minimums (not Fixed): the
//     spare follows the estimates. A tenant's unmet demand on an appliance
//     with ApplianceGuarantee.Max is scaled down so that local + global
//     stays within Max. H-DRF: groups = tenants with their global weights,
//     flows weighted by VDC.Weights within; DRF and max-min: a tenant's
//     weight split among its flows by VDC.Weights; first fit: heavier
//     tenants first.
//   - Output (output.go): every known flow's allocation, (lx + y·(1−lx)⁺)·d
//     on each allocated element (floored at the default rate where d is
//     below it and the flow is not held back, so that an idle flow can
//     show it wants more again), +Inf on the others; the default rate
//     (until a flow is first seen using anything, the start rate:
//     startRate; so are the floors); per VM, the default rate of its new
//     flows (vmDefaults: what the known flows' guarantee shares leave of
//     its tenant's guarantees, shared among its possible new flows); the
//     appliance estimates.
type Controller struct {
	p      Params
	res    []mech.ResourceInfo
	allocL bool // links are allocated (scope all or network)
	allocA bool // appliances are allocated (scope all or appliances)

	tenants []*tenant // sorted by name; the last one is the unknown tenant ""
	byName  map[string]*tenant
	vms     map[string]vmRef
	apps    []*appState // per resource; nil for links or when appliances are not allocated
	flows   map[mech.FlowID]*flow
	byPos   []*flow // flow at each position of the previous observation
	order   []*flow // by tenant, then Src, Dst
	dirty   bool
	step    int
	// def0 is the default rate until traffic is first seen (startRate);
	// lastDef the default rate announced at the previous step, in force
	// over the interval observed; started: some flow was allocated.
	def0, lastDef float64
	started       bool
	// lastBySrc: the per-VM default rates announced at the previous step
	// (vmDefaults), in force over the interval observed.
	lastBySrc map[string]float64
	capacity  []float64 // current capacity per resource (links: (1−h)·C; appliances: estimate)
	dcap      []float64 // cap of a flow's demand per resource (links: C; appliances: the window's maximum)

	// allV concatenates the tenants' virtual resources; lstamp, lidx map
	// them to the resources of this interval's local problems.
	allV   []alloc.Resource
	lstamp []int32
	lidx   []int32
	lgen   int32
	lres   []alloc.Resource
	lfl    []*flow
	lvp    alloc.VectorProblem
	ff     []fillFlow
	fx     []float64
	fill   filler

	// scratch
	aorder []int // appliances, for delay attribution
	spare  []float64
	vcount []int32   // per virtual resource (allV): the flows using it, for floors
	vused  []float64 // per virtual resource (allV): the known flows' guarantee shares, for vmDefaults
	vshare []float64 // per slot of one flow
	gvp    alloc.VectorProblem
	gfl    []*flow
	log    *slog.Logger
}

// tenant is one VDC with its virtual resources.
type tenant struct {
	name    string
	idx     int
	fixed   bool
	policy  Policy
	weights map[string]float64
	gweight float64
	// vres are the virtual resources, capacities = guarantees; vres[0] is
	// "none" (capacity 0): path elements without a guarantee map to it.
	vres   []alloc.Resource
	app    map[int]int32   // physical appliance → virtual resource
	appMin map[int]float64 // physical appliance → Min
	appMax map[int]float64 // physical appliance → Max (> 0 only)
	lo, hi int             // the tenant's flows are order[lo:hi]
	vms    []string        // its VMs, in the environment's order

	voff int // offset of vres in Controller.allV

	capLocal, capUnmet map[int]float64 // per step, appliances with a Max
	wsum               float64         // per step: Σ local weights of its flows in the global problem
}

type vmRef struct {
	t       *tenant
	out, in int32 // virtual out- and in-link in t.vres
}

// flow is the controller's state of one flow.
type flow struct {
	id     mech.FlowID
	key    string // "src->dst": VDC.Weights key, allocator ID
	t      *tenant
	w      float64 // local weight
	path   []mech.PathElem
	in     []bool     // element allocated (valid resource, in scope)
	emap   [][2]int16 // element → up to two slots of vres (−1: none)
	vres   []int32    // slots: the tenant's virtual resources the flow uses
	vdem   []float64  // per slot
	demand []float64  // smoothed, per element, tokens/s
	raw    []float64  // this interval's estimate
	seen   int        // last step with an observation
	obs    *mech.FlowObs
	fresh  bool
	dead   bool // forgotten
	// held: this interval its enforcer held it back with demand left
	// (Held); qf ≥ 1: the factor by which queues at appliances hid its
	// demand this interval (hiddenDemand), and hidden ≥ 1 that demand as
	// a multiple of d (smooth).
	held       bool
	qf, hidden float64
	// The local allocation is lx = x·k of the demand: x ∈ [0, 1] the
	// tenant's policy's fraction of the local demand k·d, k ≥ 1 (k > 1
	// for a held flow or one with hidden demand: its demand up to its
	// guarantees). y is the global fraction of the unmet demand
	// (1 − lx)·s·d.
	x, k, lx, y float64
	s           float64 // Max-cap scale of unmet demand
	luse        []alloc.Use
	guse        []alloc.Use
	aslot       []int32 // per element: the tenant's slot in its appliance's appState (−1: none; nil: not yet known)
	// Round trip of its requests (outstanding ÷ used at an appliance on
	// its path, s) this interval (−1: unknown) and its unloaded baseline
	// (0: none yet); appEl are the path elements at allocated appliances.
	lat, base float64
	appEl     []int
}

// appState is the capacity estimation of one appliance.
type appState struct {
	est     *CapacityEstimator
	tenants []TenantObs
	tpos    map[*tenant]int
	granted float64
	obs     ApplianceObs
	// queueing delay attributed to the appliance this interval (s), Σ
	// used·baseline and Σ used of its flows, and the flows with a known
	// round trip that cross it
	delay, lsum, usum float64
	flows             []*flow
}

// NewController builds a controller for env. It checks env: resource IDs
// unique and non-empty, link capacities > 0, VDCs naming known tenants'
// appliances, weights and guarantees ≥ 0 and policies known.
func NewController(env mech.ControllerEnv, p Params) (*Controller, error) {
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("pulsar: %w", err)
	}
	c := &Controller{
		p:      p,
		res:    env.Resources,
		allocL: p.Scope != ScopeAppliances,
		allocA: p.Scope != ScopeNetwork,
		byName: map[string]*tenant{},
		vms:    map[string]vmRef{},
		flows:  map[mech.FlowID]*flow{},
		apps:   make([]*appState, len(env.Resources)),
		log:    slog.Default().With("mechanism", Name),
	}
	resIdx := make(map[string]int, len(env.Resources))
	for i, r := range env.Resources {
		if r.ID == "" {
			return nil, fmt.Errorf("pulsar: resources[%d]: empty id", i)
		}
		if j, dup := resIdx[r.ID]; dup {
			return nil, fmt.Errorf("pulsar: resources[%d]: duplicate id %q (also resources[%d])", i, r.ID, j)
		}
		resIdx[r.ID] = i
		switch r.Kind {
		case mech.LinkResource:
			if !(r.Capacity > 0) {
				return nil, fmt.Errorf("pulsar: resources[%d] (%s): link capacity must be > 0, got %v", i, r.ID, r.Capacity)
			}
		case mech.ApplianceResource:
			if r.Capacity < 0 || r.CapacityMin < 0 || r.CapacityMax < 0 || math.IsNaN(r.Capacity+r.CapacityMin+r.CapacityMax) {
				return nil, fmt.Errorf("pulsar: resources[%d] (%s): capacities must be ≥ 0", i, r.ID)
			}
		default:
			return nil, fmt.Errorf("pulsar: resources[%d] (%s): unknown kind %d", i, r.ID, r.Kind)
		}
	}

	// Tenants: every VDC, and every tenant that has VMs.
	vdcs := map[string]*mech.VDC{}
	for i := range env.VDCs {
		v := &env.VDCs[i]
		if v.Tenant == "" {
			return nil, fmt.Errorf("pulsar: vdcs[%d]: empty tenant", i)
		}
		if _, dup := vdcs[v.Tenant]; dup {
			return nil, fmt.Errorf("pulsar: vdcs[%d]: duplicate tenant %q", i, v.Tenant)
		}
		vdcs[v.Tenant] = v
	}
	names := map[string]bool{}
	for n := range vdcs {
		names[n] = true
	}
	for _, vm := range env.VMs {
		if vm.Tenant != "" {
			names[vm.Tenant] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	for _, n := range sorted {
		t, err := c.newTenant(n, vdcs[n], resIdx)
		if err != nil {
			return nil, err
		}
		c.tenants = append(c.tenants, t)
		c.byName[n] = t
	}
	unknown := &tenant{name: "", idx: len(c.tenants), policy: p.LocalPolicy, gweight: 1,
		vres: []alloc.Resource{{ID: "tenant:/none", Capacity: 0}}}
	c.tenants = append(c.tenants, unknown)

	// VMs and their virtual links.
	netW := map[*tenant]float64{}   // Σ (In+Out)/8
	netMax := map[*tenant]float64{} // max(In, Out)/8
	for i, vm := range env.VMs {
		if vm.Name == "" {
			return nil, fmt.Errorf("pulsar: vms[%d]: empty name", i)
		}
		if _, dup := c.vms[vm.Name]; dup {
			return nil, fmt.Errorf("pulsar: vms[%d]: duplicate VM %q", i, vm.Name)
		}
		if vm.In < 0 || vm.Out < 0 || math.IsNaN(vm.In+vm.Out) {
			return nil, fmt.Errorf("pulsar: vms[%d] (%s): guarantees must be ≥ 0", i, vm.Name)
		}
		t := c.byName[vm.Tenant]
		if t == nil {
			t = unknown
		}
		ref := vmRef{t: t, out: int32(len(t.vres)), in: int32(len(t.vres) + 1)}
		t.vres = append(t.vres,
			alloc.Resource{ID: "vm:" + vm.Name + "/out", Capacity: vm.Out / 8},
			alloc.Resource{ID: "vm:" + vm.Name + "/in", Capacity: vm.In / 8})
		c.vms[vm.Name] = ref
		t.vms = append(t.vms, vm.Name)
		netW[t] += (vm.In + vm.Out) / 8
		netMax[t] = max(netMax[t], vm.In/8, vm.Out/8)
	}
	for _, t := range c.tenants[:len(c.tenants)-1] {
		v := vdcs[t.name]
		if v != nil && v.GlobalWeight > 0 {
			t.gweight = v.GlobalWeight
			continue
		}
		appW, appMax := 0.0, 0.0
		for _, m := range t.appMin {
			appW += m
			appMax = max(appMax, m)
		}
		switch p.GlobalWeight {
		case WeightEqual:
			t.gweight = 1
		case WeightAppliances:
			t.gweight = appW
		case WeightNetwork:
			t.gweight = netW[t]
		case WeightTotal:
			t.gweight = netW[t] + appW
		default: // WeightMax
			if c.allocA {
				t.gweight = appMax
			}
			if c.allocL {
				t.gweight = max(t.gweight, netMax[t])
			}
		}
		if !(t.gweight >= 1) {
			t.gweight = 1 // a tenant without such guarantees weighs 1 token/s
		}
	}

	for _, t := range c.tenants {
		t.voff = len(c.allV)
		c.allV = append(c.allV, t.vres...)
	}
	c.lstamp = make([]int32, len(c.allV))
	c.lidx = make([]int32, len(c.allV))

	// Appliances: capacity estimators.
	c.capacity = make([]float64, len(c.res))
	c.dcap = make([]float64, len(c.res))
	for i, r := range c.res {
		if r.Kind == mech.LinkResource {
			c.capacity[i] = r.Capacity * (1 - p.Headroom)
			c.dcap[i] = r.Capacity
			continue
		}
		c.capacity[i] = math.Inf(1)
		c.dcap[i] = math.Inf(1)
		if !c.allocA {
			continue
		}
		guar := 0.0
		for _, t := range c.tenants {
			guar += t.appMin[i]
		}
		lo, hi, ok := window(r, guar)
		if !ok {
			c.log.Warn("appliance without capacity information: not allocated", "appliance", r.ID)
			continue
		}
		a := &appState{
			est: NewCapacityEstimator(EstimatorConfig{
				Min: lo, Max: hi, Alpha: p.Alpha, Readings: p.Readings,
				StableThreshold: p.StableThreshold, RestartThreshold: p.RestartThreshold,
				Tolerance: p.Tolerance, QueueDelay: p.QueueDelay, Probe: p.ProbeIntervals,
			}),
			tpos: map[*tenant]int{},
		}
		for _, t := range c.tenants {
			if g, ok := t.appMin[i]; ok {
				a.slot(t).Guarantee = g
			}
		}
		c.apps[i] = a
		c.capacity[i] = a.est.Estimate()
		c.dcap[i] = hi
	}
	c.def0 = c.startRate(env.VMs)
	c.lastDef = p.DefaultRate
	c.spare = make([]float64, len(c.res))
	c.gvp.Resources = make([]alloc.Resource, len(c.res))
	for i, r := range c.res {
		c.gvp.Resources[i].ID = r.ID
	}
	return c, nil
}

func (c *Controller) newTenant(name string, v *mech.VDC, resIdx map[string]int) (*tenant, error) {
	t := &tenant{
		name: name, idx: len(c.tenants), policy: c.p.LocalPolicy,
		vres:   []alloc.Resource{{ID: "tenant:" + name + "/none", Capacity: 0}},
		app:    map[int]int32{},
		appMin: map[int]float64{},
		appMax: map[int]float64{},
	}
	if v == nil {
		return t, nil
	}
	t.fixed = v.Fixed
	if v.Policy != "" {
		switch Policy(v.Policy) {
		case DRF, MaxMin, FirstFit:
			t.policy = Policy(v.Policy)
		default:
			return nil, fmt.Errorf("pulsar: tenant %q: unknown local policy %q (known: drf, maxmin, firstfit)", name, v.Policy)
		}
	}
	for k, w := range v.Weights {
		if !(w > 0) || math.IsInf(w, 1) {
			return nil, fmt.Errorf("pulsar: tenant %q: weight of flow %q must be > 0 and finite, got %v", name, k, w)
		}
	}
	t.weights = v.Weights
	if v.GlobalWeight < 0 || math.IsNaN(v.GlobalWeight) || math.IsInf(v.GlobalWeight, 1) {
		return nil, fmt.Errorf("pulsar: tenant %q: global weight must be finite and ≥ 0, got %v", name, v.GlobalWeight)
	}
	for j, g := range v.Appliances {
		r, ok := resIdx[g.Appliance]
		if !ok {
			return nil, fmt.Errorf("pulsar: tenant %q: appliances[%d]: unknown resource %q", name, j, g.Appliance)
		}
		if c.res[r].Kind != mech.ApplianceResource {
			return nil, fmt.Errorf("pulsar: tenant %q: appliances[%d]: resource %q is not an appliance", name, j, g.Appliance)
		}
		if _, dup := t.app[r]; dup {
			return nil, fmt.Errorf("pulsar: tenant %q: appliances[%d]: duplicate guarantee on %q", name, j, g.Appliance)
		}
		if !(g.Min >= 0) || g.Max < 0 || math.IsInf(g.Min, 1) || math.IsNaN(g.Max) {
			return nil, fmt.Errorf("pulsar: tenant %q: appliances[%d] (%s): min and max must be finite and ≥ 0", name, j, g.Appliance)
		}
		t.app[r] = int32(len(t.vres))
		t.vres = append(t.vres, alloc.Resource{ID: "tenant:" + name + "/app:" + g.Appliance, Capacity: g.Min})
		t.appMin[r] = g.Min
		if g.Max > 0 {
			t.appMax[r] = g.Max
		}
	}
	if len(t.appMax) > 0 {
		t.capLocal, t.capUnmet = map[int]float64{}, map[int]float64{}
	}
	return t, nil
}

// startRate is the default rate (of flows never allocated, and the floor
// of those allocated) until the controller first sees a flow use anything
// (a run's first control interval): Params.DefaultRate, raised to the
// smallest equal share of a guarantee that any flow the declared model
// allows can have, when that is larger. Guarantees first (§4.1), from a
// flow's first moments: a VM's possible flows are one to each other VM
// of its tenant and one to each appliance of its VDC, and each is given
// no more than its equal share of every guarantee it uses — its source
// VM's out-link and its destination VM's in-link (a flow to an appliance:
// its VM's out- and in-link) among that VM's possible flows, a virtual
// appliance among the tenant's VMs. So however many flows start at once,
// their default rates stay within their tenants' guarantees, which
// admission fits into every link. The default is one number for every
// flow (mech.ControllerActions.DefaultRate, in each resource's tokens), so
// it is the smallest such share: a tenant without a guarantee on an
// allocated resource it can use (a best-effort tenant), or a VM of no
// known tenant, leaves it at Params.DefaultRate.
//
// Only until traffic is first seen: from then on some flows may hold spare
// capacity, and a flow floored at a large rate would be held back by the
// congestion they cause rather than by its enforcer, which the controller
// cannot see (it would never be found held, and never given its
// guarantee). Idle flows are floored at the small Params.DefaultRate, and
// held back there by their enforcers get their guarantees at the next
// step. New flows run at their VMs' default rates (vmDefaults), which,
// never being floors, do not keep them from being seen held.
func (c *Controller) startRate(vms []mech.VM) float64 {
	def := c.p.DefaultRate
	if !(def > 0) {
		return def
	}
	count := map[*tenant]int{}
	for _, vm := range vms {
		count[c.vms[vm.Name].t]++
	}
	share := math.Inf(1)
	for _, vm := range vms {
		ref := c.vms[vm.Name]
		t := ref.t
		if t.name == "" {
			return def
		}
		apps := 0
		for r := range t.app {
			if c.apps[r] != nil {
				apps++
			}
		}
		flows := count[t] - 1 + apps
		if flows == 0 {
			continue
		}
		if c.allocL {
			share = min(share, t.vres[ref.out].Capacity/float64(flows), t.vres[ref.in].Capacity/float64(flows))
		}
	}
	for _, t := range c.tenants {
		for r, g := range t.appMin {
			if c.apps[r] != nil && count[t] > 0 {
				share = min(share, g/float64(count[t]))
			}
		}
	}
	if math.IsInf(share, 1) {
		return def
	}
	return max(def, share)
}

// Period implements mech.Controller: the control interval.
func (c *Controller) Period() time.Duration { return c.p.Interval }

// Estimator returns the capacity estimator of the named appliance, nil if
// there is none (a link, or appliances not allocated).
func (c *Controller) Estimator(appliance string) *CapacityEstimator {
	for i, r := range c.res {
		if r.ID == appliance && c.apps[i] != nil {
			return c.apps[i].est
		}
	}
	return nil
}

// Demand returns the controller's smoothed demand of a flow per path
// element (tokens/s), nil if the flow is unknown.
func (c *Controller) Demand(id mech.FlowID) []float64 {
	if f := c.flows[id]; f != nil {
		return slices.Clone(f.demand)
	}
	return nil
}

// Step implements mech.Controller: one control interval. The returned
// slices belong to the caller.
func (c *Controller) Step(obs *mech.ControllerObs) mech.ControllerActions {
	if obs == nil {
		obs = &mech.ControllerObs{}
	}
	c.step++
	T := obs.Period.Seconds()
	if !(T > 0) {
		T = c.p.Interval.Seconds()
	}
	c.ingest(obs, T)
	resets := c.forget()
	if c.dirty {
		c.reorder()
	}
	est := c.estimate(T)
	c.smooth()
	c.local()
	c.global()
	act := c.output(resets)
	act.Estimates = est
	for _, f := range c.order {
		f.obs = nil
	}
	return act
}
