package pulsar

import (
	"cmp"
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
// Each Step:
//
//   - Demand: every observed flow's estimate (EstimateDemand; Bound decides
//     whether it was held back, by its allocation or, for a flow never
//     allocated, by the default rate) is scaled down, as a vector, until
//     no element exceeds its resource's capacity (links: capacity;
//     appliances: the window's maximum), then averaged: d ← ewma·estimate + (1−ewma)·d (the first
//     estimate is taken as is). A flow not observed decays as if it
//     demanded 0; after ForgetIntervals steps without observations it is
//     forgotten and its allocation reset to the default rate.
//   - Capacity: each allocated appliance's CapacityEstimator observes the
//     interval: throughput and outstanding tokens summed over the flows on
//     it, per-tenant usage, what the previous step granted there, and the
//     queueing delay there, which the controller attributes to appliances
//     from its flows' round trips (outstanding ÷ used) against their
//     unloaded baselines (delays): a FIFO appliance delays every flow it
//     serves, so the flows through a queue-free appliance clear it of the
//     queueing its other flows meet elsewhere on their way.
//   - Local: for each tenant, its policy over its virtual resources. A
//     flow's demand on a virtual resource is its largest demand among the
//     path elements mapped to it: Forward links → the source VM's out-link
//     and, for a flow to a VM of the same tenant, the destination VM's
//     in-link; Reverse links → the source VM's in-link; an appliance → the
//     tenant's virtual appliance. An element without such a guarantee (an
//     unknown VM, a VM of another tenant, an appliance not in the VDC) maps
//     to a virtual resource of capacity 0: the flow then gets nothing
//     locally. The policies scale a flow's demand vector by x ∈ [0, 1]; the
//     flow's local allocation on each path element is x·d.
//   - Global: the spare capacity of every allocated physical resource —
//     links (1−headroom)·capacity, appliances the estimate, minus the local
//     allocations — goes to the unmet demands (1−x)·d of the flows of
//     tenants whose guarantees are minimums (not Fixed). A tenant's unmet
//     demand on an appliance with ApplianceGuarantee.Max is scaled down so
//     that local + global stays within Max. H-DRF: groups = tenants with
//     their global weights, flows weighted by VDC.Weights within; DRF and
//     max-min: a tenant's weight split among its flows by VDC.Weights;
//     first fit: heavier tenants first.
//   - Output: every known flow's allocation, (x + y·(1−x))·d on each
//     allocated element (floored at the default rate where d is below it,
//     so that idle flows can ramp up), +Inf on the others; the default
//     rate; the appliance estimates.
type Controller struct {
	p      Params
	res    []mech.ResourceInfo
	allocL bool // links are allocated (scope all or network)
	allocA bool // appliances are allocated (scope all or appliances)

	tenants  []*tenant // sorted by name; the last one is the unknown tenant ""
	byName   map[string]*tenant
	vms      map[string]vmRef
	apps     []*appState // per resource; nil for links or when appliances are not allocated
	flows    map[mech.FlowID]*flow
	byPos    []*flow // flow at each position of the previous observation
	order    []*flow // by tenant, then Src, Dst
	dirty    bool
	step     int
	capacity []float64 // current capacity per resource (links: (1−h)·C; appliances: estimate)
	dcap     []float64 // cap of a flow's demand per resource (links: C; appliances: the window's maximum)

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
	dead   bool    // forgotten
	x, y   float64 // local and global fractions of demand
	s      float64 // Max-cap scale of unmet demand
	luse   []alloc.Use
	guse   []alloc.Use
	aslot  []int32 // per element: the tenant's slot in its appliance's appState (−1: none; nil: not yet known)
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
				Tolerance: p.Tolerance, QueueDelay: p.QueueDelay,
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
	c.spare = make([]float64, len(c.res))
	c.gvp.Resources = make([]alloc.Resource, len(c.res))
	for i, r := range c.res {
		c.gvp.Resources[i].ID = r.ID
	}
	return c, nil
}

// window returns an appliance's initial probing window: [CapacityMin,
// CapacityMax]; if CapacityMin is 0, half the advertised Capacity, or else
// the sum of the tenants' guarantees on it (admission control has made them
// fit); if CapacityMax is 0, twice the advertised Capacity, or else four
// times the minimum. ok is false when nothing is known (the appliance is
// then not allocated).
func window(r mech.ResourceInfo, guarantees float64) (lo, hi float64, ok bool) {
	lo, hi = r.CapacityMin, r.CapacityMax
	if lo == 0 {
		if r.Capacity > 0 {
			lo = r.Capacity / 2
		} else {
			lo = guarantees
		}
	}
	if hi == 0 {
		if r.Capacity > 0 {
			hi = 2 * r.Capacity
		} else {
			hi = 4 * lo
		}
	}
	hi = max(hi, lo)
	return lo, hi, hi > 0
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

func (a *appState) slot(t *tenant) *TenantObs {
	i, ok := a.tpos[t]
	if !ok {
		i = len(a.tenants)
		a.tpos[t] = i
		a.tenants = append(a.tenants, TenantObs{Tenant: t.name})
	}
	return &a.tenants[i]
}

// appSlot returns the position of f's tenant in the appState of the
// appliance at f's path element e (which must have one), caching it.
func (c *Controller) appSlot(f *flow, e int) int32 {
	if f.aslot == nil {
		f.aslot = make([]int32, len(f.path))
		for k, pe := range f.path {
			f.aslot[k] = -1
			if pe.Resource >= 0 && pe.Resource < len(c.apps) && c.apps[pe.Resource] != nil {
				a := c.apps[pe.Resource]
				a.slot(f.t)
				f.aslot[k] = int32(a.tpos[f.t])
			}
		}
	}
	return f.aslot[e]
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
	c.local()
	c.global()
	act := c.output(resets)
	act.Estimates = est
	for _, f := range c.order {
		f.obs = nil
	}
	return act
}

// ingest updates the flows' demands from the observations.
func (c *Controller) ingest(obs *mech.ControllerObs, T float64) {
	w := c.p.EWMA
	for i := range obs.Flows {
		o := &obs.Flows[i]
		var f *flow
		// Drivers usually list flows in the same order every interval:
		// try the flow at this position last time before the map.
		if i < len(c.byPos) && c.byPos[i] != nil && !c.byPos[i].dead && c.byPos[i].id == o.Flow {
			f = c.byPos[i]
		} else {
			f = c.flows[o.Flow]
		}
		if f == nil {
			f = c.newFlow(o)
			c.flows[o.Flow] = f
			c.dirty = true
		} else if !slices.Equal(f.path, o.Path) {
			c.setPath(f, o.Path)
		}
		if i < len(c.byPos) {
			c.byPos[i] = f
		} else {
			c.byPos = append(c.byPos, f)
		}
		f.obs = o
		f.seen = c.step
		f.raw = EstimateDemand(o, T, Bound(o, c.p.DefaultRate, c.p.Tolerance), f.raw)
		// No flow can use more than a resource's capacity: this bounds the
		// closed-loop term when o is tiny (zero-latency appliances, or an
		// open-loop flow's backlog read as queued requests), so one
		// outlier does not linger in the average. The whole vector is
		// scaled down, not each element cut: its shape is the flow's
		// request mix (tokens per request on each resource), which the
		// allocation must keep.
		scale := 1.0
		for e, pe := range f.path {
			if pe.Resource >= 0 && pe.Resource < len(c.dcap) && f.raw[e] > c.dcap[pe.Resource] {
				scale = min(scale, c.dcap[pe.Resource]/f.raw[e])
			}
		}
		if scale < 1 {
			for e := range f.raw {
				f.raw[e] *= scale
			}
		}
		if f.fresh {
			copy(f.demand, f.raw)
			f.fresh = false
			continue
		}
		for e, d := range f.raw {
			f.demand[e] = w*d + (1-w)*f.demand[e]
		}
	}
}

func (c *Controller) newFlow(o *mech.FlowObs) *flow {
	f := &flow{id: o.Flow, key: o.Flow.Src + "->" + o.Flow.Dst, w: 1}
	f.t = c.byName[o.Tenant]
	if f.t == nil {
		if vm, ok := c.vms[o.Flow.Src]; ok {
			f.t = vm.t
		} else {
			f.t = c.tenants[len(c.tenants)-1]
		}
	}
	if w, ok := f.t.weights[f.key]; ok {
		f.w = w
	}
	c.setPath(f, o.Path)
	return f
}

// setPath (re)computes a flow's mapping of path elements to the tenant's
// virtual resources, and resets its demand.
//
// Forward links map to the source VM's out-link and, for a flow to a VM of
// the same tenant, to the destination VM's in-link; Reverse links to the
// source VM's in-link; an Appliance to the tenant's virtual appliance. An
// element without such a guarantee (unknown VM, VM of another tenant,
// appliance not in the VDC) maps to the tenant's zero-capacity resource, so
// the flow gets nothing locally (only spare capacity).
func (c *Controller) setPath(f *flow, path []mech.PathElem) {
	n := len(path)
	f.path = slices.Clone(path)
	f.in = make([]bool, n)
	f.emap = make([][2]int16, n)
	f.vres = f.vres[:0]
	f.demand = make([]float64, n)
	f.fresh = true
	slot := func(v int32) int16 {
		for k, x := range f.vres {
			if x == v {
				return int16(k)
			}
		}
		f.vres = append(f.vres, v)
		return int16(len(f.vres) - 1)
	}
	var srcOut, srcIn, dstIn int32 = 0, 0, -1
	if vm, ok := c.vms[f.id.Src]; ok && vm.t == f.t {
		srcOut, srcIn = vm.out, vm.in
	}
	if vm, ok := c.vms[f.id.Dst]; ok && vm.t == f.t {
		dstIn = vm.in
	}
	for e, pe := range path {
		f.emap[e] = [2]int16{-1, -1}
		if pe.Resource < 0 || pe.Resource >= len(c.res) {
			continue
		}
		kind := c.res[pe.Resource].Kind
		if kind == mech.LinkResource && !c.allocL || kind == mech.ApplianceResource && (!c.allocA || c.apps[pe.Resource] == nil) {
			continue
		}
		f.in[e] = true
		switch pe.Role {
		case mech.Forward:
			f.emap[e][0] = slot(srcOut)
			if dstIn >= 0 {
				f.emap[e][1] = slot(dstIn)
			}
		case mech.Reverse:
			f.emap[e][0] = slot(srcIn)
		default:
			v, ok := f.t.app[pe.Resource]
			if !ok {
				v = 0
			}
			f.emap[e][0] = slot(v)
		}
	}
	f.vdem = make([]float64, len(f.vres))
	f.aslot = nil
	f.base = 0
	f.appEl = f.appEl[:0]
	for e, pe := range path {
		if pe.Resource >= 0 && pe.Resource < len(c.apps) && c.apps[pe.Resource] != nil {
			f.appEl = append(f.appEl, e)
		}
	}
}

// forget drops flows not observed for ForgetIntervals steps (returning
// allocations that reset their enforcers to the default rate) and decays
// the demand of the others that were not observed this step.
func (c *Controller) forget() []mech.FlowAllocation {
	var resets []mech.FlowAllocation
	for _, f := range c.order {
		if f.seen == c.step {
			continue
		}
		if c.step-f.seen >= c.p.ForgetIntervals {
			delete(c.flows, f.id)
			f.dead = true
			c.dirty = true
			rates := make([]float64, len(f.path))
			for e := range rates {
				rates[e] = math.Inf(1)
				if f.in[e] && c.p.DefaultRate > 0 {
					rates[e] = c.p.DefaultRate
				}
			}
			resets = append(resets, mech.FlowAllocation{Flow: f.id, Rates: rates})
			continue
		}
		for e := range f.demand {
			f.demand[e] *= 1 - c.p.EWMA
		}
	}
	return resets
}

// reorder sorts the flows by tenant, then source and destination.
func (c *Controller) reorder() {
	c.order = c.order[:0]
	for _, f := range c.flows {
		c.order = append(c.order, f)
	}
	slices.SortFunc(c.order, func(a, b *flow) int {
		return cmp.Or(cmp.Compare(a.t.idx, b.t.idx), cmp.Compare(a.id.Src, b.id.Src), cmp.Compare(a.id.Dst, b.id.Dst))
	})
	for _, t := range c.tenants {
		t.lo, t.hi = 0, 0
	}
	for i := 0; i < len(c.order); {
		t := c.order[i].t
		j := i
		for j < len(c.order) && c.order[j].t == t {
			j++
		}
		t.lo, t.hi = i, j
		i = j
	}
	c.dirty = false
}

// estimate runs the capacity estimators on this interval's observations and
// returns the estimates by appliance ID.
func (c *Controller) estimate(T float64) map[string]float64 {
	if !c.allocA {
		return nil
	}
	for _, a := range c.apps {
		if a == nil {
			continue
		}
		a.obs = ApplianceObs{Period: T, Granted: a.granted}
		for i := range a.tenants {
			t := &a.tenants[i]
			t.Used, t.Outstanding, t.Forward, t.Reverse = 0, 0, 0, 0
		}
	}
	for _, f := range c.order {
		o := f.obs
		if o == nil {
			continue
		}
		var fwd, rev float64
		hasApp := false
		for e, pe := range f.path {
			if pe.Resource < 0 || pe.Resource >= len(c.res) {
				continue
			}
			switch {
			case c.apps[pe.Resource] != nil:
				hasApp = true
			case pe.Role == mech.Forward:
				fwd = max(fwd, at(o.Used, e))
			case pe.Role == mech.Reverse:
				rev = max(rev, at(o.Used, e))
			}
		}
		if !hasApp {
			continue
		}
		for e, pe := range f.path {
			if pe.Resource < 0 || pe.Resource >= len(c.res) {
				continue
			}
			a := c.apps[pe.Resource]
			if a == nil {
				continue
			}
			u, out := at(o.Used, e), at(o.Outstanding, e)
			a.obs.Throughput += u
			a.obs.Outstanding += out
			s := &a.tenants[c.appSlot(f, e)]
			s.Used += u
			s.Outstanding += out
			s.Forward += fwd
			s.Reverse += rev
		}
	}
	c.delays()
	est := make(map[string]float64)
	for r, a := range c.apps {
		if a == nil {
			continue
		}
		a.obs.Tenants = a.tenants
		c.capacity[r] = a.est.Observe(&a.obs)
		est[c.res[r].ID] = c.capacity[r]
	}
	return est
}

// baseDrift is how fast a flow's latency baseline rises per interval while
// its requests take longer than it and no appliance queue explains why
// (its own workload changed, or the network delays it).
const baseDrift = 0.01

// delays attributes queueing delay to appliances from the round trips of
// the flows through them, and sets every appliance's ApplianceObs.Delay
// and Latency.
//
// A flow's round trip is its outstanding tokens over its throughput at an
// appliance on its path (Little; both count the same requests, so any
// appliance element gives the same ratio); its baseline is the shortest
// seen, its excess the round trip beyond it: time queued at appliances and
// in the network. An appliance serves FIFO, so every flow through it waits
// its queueing delay; the delay of appliance a is the smallest excess of
// its flows once the delays of the other appliances on each flow's path
// are taken off: a flow through a queue-free appliance clears it of the
// queueing its other flows see elsewhere, e.g. at a second appliance on
// their way. Where flows cross several appliances the split is ambiguous;
// the delays are set one appliance at a time (two Gauss-Seidel passes),
// appliances with more flows first, so an excess goes to the appliance
// that most flows witness (the most parsimonious explanation). The
// latency of an appliance is the throughput-weighted baseline of its
// flows.
//
// A new flow's baseline is its first round trip less the delays of the
// appliances on its path; a baseline follows the round trip down at once
// and up by baseDrift per interval, the latter only while the appliances'
// delays explain less than half of the flow's excess.
func (c *Controller) delays() {
	for _, f := range c.order {
		f.lat = -1
		if o := f.obs; o != nil {
			for _, e := range f.appEl {
				if u := at(o.Used, e); u > 0 {
					f.lat = at(o.Outstanding, e) / u
					break
				}
			}
		}
	}
	explained := func(f *flow) float64 {
		s := 0.0
		for _, e := range f.appEl {
			s += c.apps[f.path[e].Resource].delay
		}
		return s
	}
	// Gauss-Seidel, appliances with more flows first (more witnesses).
	c.aorder = c.aorder[:0]
	for r, a := range c.apps {
		if a != nil {
			a.delay = 0
			a.flows = a.flows[:0]
			c.aorder = append(c.aorder, r)
		}
	}
	for _, f := range c.order {
		if f.lat < 0 || f.base <= 0 {
			continue
		}
		for _, e := range f.appEl {
			a := c.apps[f.path[e].Resource]
			a.flows = append(a.flows, f)
		}
	}
	slices.SortStableFunc(c.aorder, func(x, y int) int { return cmp.Compare(len(c.apps[y].flows), len(c.apps[x].flows)) })
	for range 2 {
		for _, r := range c.aorder {
			a := c.apps[r]
			d := math.Inf(1)
			for _, f := range a.flows {
				ex := max(0, f.lat-f.base)
				if len(f.appEl) > 1 {
					ex -= explained(f) - a.delay
				}
				d = min(d, ex)
			}
			a.delay = 0
			if !math.IsInf(d, 1) {
				a.delay = max(0, d)
			}
		}
	}
	for _, a := range c.apps {
		if a != nil {
			a.lsum, a.usum = 0, 0
		}
	}
	for _, f := range c.order {
		if f.lat < 0 {
			continue
		}
		x := explained(f)
		switch {
		case f.base <= 0:
			f.base = f.lat - x
			if f.base <= 0 {
				f.base = f.lat
			}
		case f.lat <= f.base:
			f.base = f.lat
		case x < (f.lat-f.base)/2:
			f.base = min(f.lat, f.base*(1+baseDrift))
		}
		if f.base <= 0 {
			continue
		}
		for _, e := range f.appEl {
			a := c.apps[f.path[e].Resource]
			u := at(f.obs.Used, e)
			a.lsum += u * f.base
			a.usum += u
		}
	}
	for _, a := range c.apps {
		if a == nil {
			continue
		}
		a.obs.Delay, a.obs.Latency = a.delay, 0
		if a.usum > 0 {
			a.obs.Latency = a.lsum / a.usum
		}
	}
}

// local computes every tenant's local allocation, f.x: the tenant's policy
// over its virtual resources. Tenants' virtual resources are disjoint and
// every policy here is separable (progressive filling, or first fit in
// order), so the tenants of one policy are solved together.
func (c *Controller) local() {
	for _, pol := range []Policy{DRF, MaxMin, FirstFit} {
		c.lfl = c.lfl[:0]
		c.ff = c.ff[:0]
		for _, t := range c.tenants {
			if t.policy != pol || t.hi == t.lo {
				continue
			}
			for _, f := range c.order[t.lo:t.hi] {
				if c.localDemand(f) {
					c.lfl = append(c.lfl, f)
					c.ff = append(c.ff, fillFlow{ID: f.key, Weight: f.w, Uses: f.luse})
				}
			}
		}
		if len(c.lfl) == 0 {
			continue
		}
		var err error
		if pol == FirstFit {
			err = c.localFirstFit()
		} else {
			c.fx = grow(c.fx, len(c.ff))
			if err = c.fill.solve(c.allV, c.ff, pol == DRF, c.fx); err == nil {
				for i, f := range c.lfl {
					f.x = c.fx[i]
				}
			}
		}
		if err != nil {
			c.log.Error("local allocation failed; no local allocation", "policy", pol, "err", err)
			for _, f := range c.lfl {
				f.x = 0
			}
		}
	}
}

// localDemand resets f's allocation state and computes its demand on its
// tenant's virtual resources: f.vdem, the largest demand of the path
// elements mapped to each, and f.luse, the same as uses of c.allV. It
// returns false if the flow demands nothing.
func (c *Controller) localDemand(f *flow) bool {
	f.x, f.y, f.s = 0, 0, 1
	clear(f.vdem)
	for e, m := range f.emap {
		d := f.demand[e]
		if !f.in[e] || !(d > 0) {
			continue
		}
		for _, k := range m {
			if k >= 0 {
				f.vdem[k] = max(f.vdem[k], d)
			}
		}
	}
	f.luse = f.luse[:0]
	for k, d := range f.vdem {
		if d > 0 {
			f.luse = append(f.luse, alloc.Use{Resource: f.t.voff + int(f.vres[k]), Coef: d})
		}
	}
	return len(f.luse) > 0
}

// localFirstFit serves the flows in order (tenant, source, destination),
// each taking the largest fraction of its demand that fits its tenant's
// remaining guarantees (alloc.FirstFit over the virtual resources used).
func (c *Controller) localFirstFit() error {
	c.lgen++
	c.lres = c.lres[:0]
	c.lvp.Flows = c.lvp.Flows[:0]
	for _, f := range c.lfl {
		for k := range f.luse {
			gv := f.luse[k].Resource
			if c.lstamp[gv] != c.lgen {
				c.lstamp[gv] = c.lgen
				c.lidx[gv] = int32(len(c.lres))
				c.lres = append(c.lres, c.allV[gv])
			}
			f.luse[k].Resource = int(c.lidx[gv])
		}
		c.lvp.Flows = append(c.lvp.Flows, alloc.VectorFlow{ID: f.key, Weight: f.w, Sparse: f.luse})
	}
	c.lvp.Resources = c.lres
	x, err := alloc.FirstFit(&c.lvp)
	if err != nil {
		return err
	}
	for i, f := range c.lfl {
		f.x = min(1, max(0, x[i]))
	}
	return nil
}

// global allocates the spare capacity: f.y (and f.s, the Max-cap scale).
func (c *Controller) global() {
	// Spare = capacity − local allocations.
	for r := range c.spare {
		c.spare[r] = c.capacity[r]
	}
	for _, t := range c.tenants {
		if t.capLocal != nil {
			clear(t.capLocal)
			clear(t.capUnmet)
		}
	}
	for _, f := range c.order {
		for e, pe := range f.path {
			if !f.in[e] {
				continue
			}
			d := f.demand[e]
			c.spare[pe.Resource] -= f.x * d
			if m := f.t.capLocal; m != nil {
				if _, ok := f.t.appMax[pe.Resource]; ok && pe.Role == mech.Appliance {
					m[pe.Resource] += f.x * d
					f.t.capUnmet[pe.Resource] += (1 - f.x) * d
				}
			}
		}
	}
	for r := range c.spare {
		c.spare[r] = max(0, c.spare[r])
	}

	// Flows with unmet demand, of tenants with minimum guarantees.
	c.gfl = c.gfl[:0]
	for _, f := range c.order {
		if f.t.fixed || f.x >= 1 {
			continue
		}
		s := 1.0
		if f.t.capLocal != nil {
			for e, pe := range f.path {
				if !f.in[e] || pe.Role != mech.Appliance {
					continue
				}
				if mx, ok := f.t.appMax[pe.Resource]; ok {
					if u := f.t.capUnmet[pe.Resource]; u > 0 {
						s = min(s, max(0, mx-f.t.capLocal[pe.Resource])/u)
					}
				}
			}
		}
		f.s = s
		f.guse = f.guse[:0]
		for e, pe := range f.path {
			if d := (1 - f.x) * s * f.demand[e]; f.in[e] && d > 0 {
				f.guse = append(f.guse, alloc.Use{Resource: pe.Resource, Coef: d})
			}
		}
		if len(f.guse) > 0 {
			c.gfl = append(c.gfl, f)
		}
	}
	if len(c.gfl) == 0 {
		return
	}

	// Per-tenant totals of local weights: flat policies split a tenant's
	// weight among its flows in proportion to their local weights.
	for _, t := range c.tenants {
		t.wsum = 0
	}
	for _, f := range c.gfl {
		f.t.wsum += f.w
	}
	for r := range c.gvp.Resources {
		c.gvp.Resources[r].Capacity = c.spare[r]
	}
	c.fx = grow(c.fx, len(c.gfl))
	y := c.fx
	var err error
	switch c.p.GlobalPolicy {
	case DRF, MaxMin:
		c.ff = c.ff[:0]
		for _, f := range c.gfl {
			c.ff = append(c.ff, fillFlow{ID: f.key, Weight: f.t.gweight * f.w / f.t.wsum, Uses: f.guse})
		}
		err = c.fill.solve(c.gvp.Resources, c.ff, c.p.GlobalPolicy == DRF, y)
	default:
		if c.p.GlobalPolicy == FirstFit {
			// Provider's order: heavier tenants first.
			slices.SortStableFunc(c.gfl, func(a, b *flow) int {
				return cmp.Or(cmp.Compare(b.t.gweight, a.t.gweight), cmp.Compare(a.t.idx, b.t.idx))
			})
		}
		c.gvp.Flows = c.gvp.Flows[:0]
		c.gvp.GroupWeights = nil
		if c.p.GlobalPolicy == HDRF {
			c.gvp.GroupWeights = make(map[string]float64)
			for _, t := range c.tenants {
				if t.wsum > 0 && t.name != "" {
					c.gvp.GroupWeights[t.name] = t.gweight
				}
			}
		}
		for _, f := range c.gfl {
			vf := alloc.VectorFlow{ID: f.key, Sparse: f.guse, Weight: f.w}
			if c.p.GlobalPolicy == HDRF {
				vf.Group = f.t.name
			}
			c.gvp.Flows = append(c.gvp.Flows, vf)
		}
		if c.p.GlobalPolicy == HDRF {
			y, err = alloc.HDRF(&c.gvp)
		} else {
			y, err = alloc.FirstFit(&c.gvp)
		}
	}
	if err != nil {
		c.log.Error("global allocation failed; no spare capacity allocated", "err", err)
		return
	}
	for i, f := range c.gfl {
		f.y = min(1, max(0, y[i]))
	}
}

// output builds the actions: every flow's allocation (local + global on
// allocated elements, floored at the default rate where the demand is below
// it; +Inf elsewhere), and records what was granted at each appliance.
func (c *Controller) output(resets []mech.FlowAllocation) mech.ControllerActions {
	for _, a := range c.apps {
		if a != nil {
			a.granted = 0
			for i := range a.tenants {
				a.tenants[i].Granted = 0
			}
		}
	}
	n := 0
	for _, f := range c.order {
		n += len(f.path)
	}
	buf := make([]float64, n)
	allocs := make([]mech.FlowAllocation, 0, len(c.order)+len(resets))
	def := c.p.DefaultRate
	for _, f := range c.order {
		rates := buf[:len(f.path):len(f.path)]
		buf = buf[len(f.path):]
		frac := f.x + f.y*f.s*(1-f.x)
		for e, pe := range f.path {
			if !f.in[e] {
				rates[e] = math.Inf(1)
				continue
			}
			d := f.demand[e]
			g := frac * d
			if a := c.apps[pe.Resource]; a != nil {
				a.granted += g
				a.tenants[c.appSlot(f, e)].Granted += g
			}
			if def > 0 && d < def {
				g = max(g, def)
			}
			rates[e] = g
		}
		allocs = append(allocs, mech.FlowAllocation{Flow: f.id, Rates: rates})
	}
	allocs = append(allocs, resets...)
	return mech.ControllerActions{Allocations: allocs, DefaultRate: def}
}
