package pulsar

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// Resource indices of testEnv.
const (
	rUp1   = iota // h1's uplink
	rDown1        // h1's downlink
	rUp2          // h2's uplink
	rDown2        // h2's downlink
	rKV           // an appliance with a fixed capacity
)

// testEnv is two hosts with 1000 B/s links (each direction) and an
// appliance "kv" whose capacity is fixed at kvCap (CapacityMin =
// CapacityMax, so no estimation), plus the given VMs (bytes/s guarantees
// are multiplied by 8 here) and VDCs.
func testEnv(kvCap float64, vms []mech.VM, vdcs ...mech.VDC) mech.ControllerEnv {
	for i := range vms {
		vms[i].In *= 8
		vms[i].Out *= 8
	}
	return mech.ControllerEnv{
		Resources: []mech.ResourceInfo{
			{ID: "h1/up", Kind: mech.LinkResource, Capacity: 1000},
			{ID: "h1/down", Kind: mech.LinkResource, Capacity: 1000},
			{ID: "h2/up", Kind: mech.LinkResource, Capacity: 1000},
			{ID: "h2/down", Kind: mech.LinkResource, Capacity: 1000},
			{ID: "kv", Kind: mech.ApplianceResource, Capacity: kvCap, CapacityMin: kvCap, CapacityMax: kvCap},
		},
		VMs:  vms,
		VDCs: vdcs,
	}
}

// fwd returns the path of a VM-to-VM flow from h1 to h2.
func vmPath() []mech.PathElem {
	return []mech.PathElem{{Resource: rUp1, Role: mech.Forward}, {Resource: rDown2, Role: mech.Forward}}
}

// appPath returns the path of a flow from a VM on h1 to kv and back.
func appPath() []mech.PathElem {
	return []mech.PathElem{{Resource: rUp1, Role: mech.Forward}, {Resource: rKV, Role: mech.Appliance}, {Resource: rDown1, Role: mech.Reverse}}
}

// flowObs is an observation whose demand estimate is exactly used (nothing
// queued).
func flowObs(src, dst, tenant string, path []mech.PathElem, used ...float64) mech.FlowObs {
	return mech.FlowObs{Flow: mech.FlowID{Src: src, Dst: dst}, Tenant: tenant, Path: path, Used: used}
}

func newTestController(t *testing.T, env mech.ControllerEnv, params map[string]any) *Controller {
	t.Helper()
	m, err := New(params)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.NewController(env)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*Controller)
}

func step(c *Controller, flows ...mech.FlowObs) map[mech.FlowID][]float64 {
	act := c.Step(&mech.ControllerObs{Now: time.Second, Period: time.Second, Flows: flows})
	out := map[mech.FlowID][]float64{}
	for _, a := range act.Allocations {
		out[a.Flow] = a.Rates
	}
	return out
}

func near(a, b float64) bool {
	if math.IsInf(a, 1) || math.IsInf(b, 1) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-6*max(1, math.Abs(b))
}

func checkRates(t *testing.T, name string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: rates %v, want %v", name, got, want)
		return
	}
	for i := range got {
		if !near(got[i], want[i]) {
			t.Errorf("%s: rates %v, want %v", name, got, want)
			return
		}
	}
}

var noDefault = map[string]any{"default_rate": 0}

// TestDemandSmoothing checks the EWMA of demand estimates, the open- and
// closed-loop terms through the controller, and the cap at a resource's
// capacity.
func TestDemandSmoothing(t *testing.T) {
	env := testEnv(1e6, []mech.VM{{Name: "a1", Tenant: "A", Host: "h1", In: 1e6, Out: 1e6}})
	c := newTestController(t, env, map[string]any{"ewma": 0.5, "default_rate": 0})
	id := mech.FlowID{Src: "a1", Dst: "x"}
	path := []mech.PathElem{{Resource: rUp1, Role: mech.Forward}}
	o := mech.FlowObs{Flow: id, Tenant: "A", Path: path, Used: []float64{100}, Backlog: []float64{100}, Allocation: []float64{100}}
	step(c, o)
	if d := c.Demand(id); !near(d[0], 200) {
		t.Errorf("first interval: demand %v, want 200 (u + b/T, no history)", d)
	}
	o.Backlog = nil
	o.Queued, o.Outstanding = []float64{50}, []float64{25} // closed loop: +q·u/o = 200
	step(c, o)
	if d := c.Demand(id); !near(d[0], 0.5*300+0.5*200) {
		t.Errorf("second interval: demand %v, want 250", d)
	}
	o.Allocation = []float64{1000} // not bound: d = u
	step(c, o)
	if d := c.Demand(id); !near(d[0], 0.5*100+0.5*250) {
		t.Errorf("third interval: demand %v, want 175", d)
	}
	o.Allocation = []float64{100}
	o.Backlog = []float64{1e9} // capped at the link's capacity
	o.Queued, o.Outstanding = nil, nil
	step(c, o)
	if d := c.Demand(id); !near(d[0], 0.5*1000+0.5*175) {
		t.Errorf("fourth interval: demand %v, want 587.5", d)
	}
	// Not observed: decays.
	step(c)
	if d := c.Demand(id); !near(d[0], 0.5*587.5) {
		t.Errorf("unobserved: demand %v, want 293.75", d)
	}
}

// TestLocalDRF checks DRF among a tenant's flows on its virtual resources
// (fixed tenant: no global share).
func TestLocalDRF(t *testing.T) {
	vms := []mech.VM{
		{Name: "a1", Tenant: "T", Host: "h1", In: 500, Out: 300},
		{Name: "a2", Tenant: "T", Host: "h2", In: 1000, Out: 1000},
	}
	env := testEnv(1e6, vms, mech.VDC{Tenant: "T", Fixed: true, Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 200}}})
	c := newTestController(t, env, noDefault)
	// f1 to kv: 100 B/s up, 400 tokens/s at kv, 50 B/s back;
	// f2 to a2: 500 B/s. Virtual: a1/out 300, kv 200, a1/in 500, a2/in 1000.
	// Dominant shares: f1 400/200 = 2, f2 500/300. Equal shares s:
	// a1/out: 100·s/2 + 500·s·3/5 = 300 → s = 6/7.
	got := step(c,
		flowObs("a1", "kv", "T", appPath(), 100, 400, 50),
		flowObs("a1", "a2", "T", vmPath(), 500, 500),
	)
	s := 6.0 / 7
	x1, x2 := s/2, s*3/5
	checkRates(t, "f1", got[mech.FlowID{Src: "a1", Dst: "kv"}], []float64{100 * x1, 400 * x1, 50 * x1})
	checkRates(t, "f2", got[mech.FlowID{Src: "a1", Dst: "a2"}], []float64{500 * x2, 500 * x2})

	// The same with alloc.DRF on the virtual problem.
	vp := &alloc.VectorProblem{
		Resources: []alloc.Resource{{ID: "a1/out", Capacity: 300}, {ID: "kv", Capacity: 200}, {ID: "a1/in", Capacity: 500}, {ID: "a2/in", Capacity: 1000}},
		Flows: []alloc.VectorFlow{
			{ID: "f1", Weight: 1, Demand: []float64{100, 400, 50, 0}},
			{ID: "f2", Weight: 1, Demand: []float64{500, 0, 0, 500}},
		},
	}
	x, err := alloc.DRF(vp)
	if err != nil || !near(x[0], x1) || !near(x[1], x2) {
		t.Errorf("alloc.DRF = %v, %v; want %v, %v", x, err, x1, x2)
	}
}

// TestLocalWithinGuarantees: whatever the demands, the local allocations
// of a fixed tenant never exceed its guarantees on any virtual resource.
func TestLocalWithinGuarantees(t *testing.T) {
	for _, pol := range []string{"drf", "maxmin", "firstfit"} {
		vms := []mech.VM{
			{Name: "a1", Tenant: "T", Host: "h1", In: 400, Out: 300},
			{Name: "a2", Tenant: "T", Host: "h1", In: 300, Out: 200},
			{Name: "a3", Tenant: "T", Host: "h2", In: 250, Out: 1000},
		}
		env := testEnv(1e6, vms, mech.VDC{Tenant: "T", Fixed: true, Policy: pol, Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 300}}})
		c := newTestController(t, env, noDefault)
		to3 := []mech.PathElem{{Resource: rUp1, Role: mech.Forward}, {Resource: rDown2, Role: mech.Forward}}
		got := step(c,
			flowObs("a1", "kv", "T", appPath(), 200, 700, 300),
			flowObs("a2", "kv", "T", appPath(), 150, 300, 500),
			flowObs("a1", "a3", "T", to3, 400, 400),
			flowObs("a2", "a3", "T", to3, 100, 100),
		)
		r := func(src, dst string, e int) float64 { return got[mech.FlowID{Src: src, Dst: dst}][e] }
		checks := []struct {
			what       string
			load, guar float64
		}{
			{"a1/out", r("a1", "kv", 0) + r("a1", "a3", 0), 300},
			{"a2/out", r("a2", "kv", 0) + r("a2", "a3", 0), 200},
			{"a1/in", r("a1", "kv", 2), 400},
			{"a2/in", r("a2", "kv", 2), 300},
			{"a3/in", r("a1", "a3", 1) + r("a2", "a3", 1), 250},
			{"kv", r("a1", "kv", 1) + r("a2", "kv", 1), 300},
		}
		busy := false
		for _, k := range checks {
			if k.load > k.guar*(1+1e-9) {
				t.Errorf("%s: %s gets %v, guarantee %v", pol, k.what, k.load, k.guar)
			}
			busy = busy || near(k.load, k.guar)
		}
		if !busy {
			t.Errorf("%s: no guarantee used up: %v", pol, got)
		}
	}
}

// TestGlobal: spare capacity goes to tenants with minimum guarantees in
// proportion to their guarantees (H-DRF, weights = total guarantees);
// fixed tenants get their guarantees only.
func TestGlobal(t *testing.T) {
	vms := []mech.VM{
		{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 100},
		{Name: "a2", Tenant: "A", Host: "h2", In: 100, Out: 100},
		{Name: "b1", Tenant: "B", Host: "h1", In: 200, Out: 200},
		{Name: "b2", Tenant: "B", Host: "h2", In: 200, Out: 200},
		{Name: "f1", Tenant: "F", Host: "h1", In: 100, Out: 100},
		{Name: "f2", Tenant: "F", Host: "h2", In: 100, Out: 100},
	}
	for _, pol := range []string{"hdrf", "drf", "maxmin"} {
		env := testEnv(1e6, append([]mech.VM(nil), vms...), mech.VDC{Tenant: "A"}, mech.VDC{Tenant: "B"}, mech.VDC{Tenant: "F", Fixed: true})
		c := newTestController(t, env, map[string]any{"default_rate": 0, "global_policy": pol})
		got := step(c,
			flowObs("a1", "a2", "A", vmPath(), 2000, 2000),
			flowObs("b1", "b2", "B", vmPath(), 2000, 2000),
			flowObs("f1", "f2", "F", vmPath(), 2000, 2000),
		)
		// Spare on h1/up: 970 − 400 = 570, shared 1:2.
		checkRates(t, pol+" A", got[mech.FlowID{Src: "a1", Dst: "a2"}], []float64{100 + 190, 100 + 190})
		checkRates(t, pol+" B", got[mech.FlowID{Src: "b1", Dst: "b2"}], []float64{200 + 380, 200 + 380})
		checkRates(t, pol+" F", got[mech.FlowID{Src: "f1", Dst: "f2"}], []float64{100, 100})
	}

	// GlobalWeight overrides the guarantees; first fit serves the heavier
	// tenant first.
	env := testEnv(1e6, append([]mech.VM(nil), vms...), mech.VDC{Tenant: "A", GlobalWeight: 3}, mech.VDC{Tenant: "B", GlobalWeight: 1}, mech.VDC{Tenant: "F", Fixed: true})
	for _, c := range []struct {
		pol  string
		a, b float64
	}{{"hdrf", 100 + 427.5, 200 + 142.5}, {"firstfit", 100 + 570, 200}} {
		ctl := newTestController(t, env, map[string]any{"default_rate": 0, "global_policy": c.pol})
		got := step(ctl,
			flowObs("a1", "a2", "A", vmPath(), 2000, 2000),
			flowObs("b1", "b2", "B", vmPath(), 2000, 2000),
			flowObs("f1", "f2", "F", vmPath(), 2000, 2000),
		)
		checkRates(t, c.pol+" weighted A", got[mech.FlowID{Src: "a1", Dst: "a2"}], []float64{c.a, c.a})
		checkRates(t, c.pol+" weighted B", got[mech.FlowID{Src: "b1", Dst: "b2"}], []float64{c.b, c.b})
	}
}

// TestGlobalDemandBound: a flow gets no more than its demand; what it
// leaves goes to the others.
func TestGlobalDemandBound(t *testing.T) {
	vms := []mech.VM{
		{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 100},
		{Name: "b1", Tenant: "B", Host: "h1", In: 100, Out: 100},
	}
	env := testEnv(1e6, vms, mech.VDC{Tenant: "A"}, mech.VDC{Tenant: "B"})
	c := newTestController(t, env, noDefault)
	up := []mech.PathElem{{Resource: rUp1, Role: mech.Forward}}
	got := step(c, flowObs("a1", "x", "A", up, 50), flowObs("b1", "x", "B", up, 5000))
	checkRates(t, "A", got[mech.FlowID{Src: "a1", Dst: "x"}], []float64{50})
	checkRates(t, "B", got[mech.FlowID{Src: "b1", Dst: "x"}], []float64{920})
}

// TestApplianceMax: ApplianceGuarantee.Max caps a tenant's total on an
// appliance; the rest of the spare goes to the others.
func TestApplianceMax(t *testing.T) {
	vms := []mech.VM{
		{Name: "a1", Tenant: "A", Host: "h1", In: 1000, Out: 1000},
		{Name: "a2", Tenant: "A", Host: "h1", In: 1000, Out: 1000},
		{Name: "b1", Tenant: "B", Host: "h1", In: 1000, Out: 1000},
	}
	env := testEnv(1000, vms,
		mech.VDC{Tenant: "A", GlobalWeight: 1, Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 100, Max: 300}}},
		mech.VDC{Tenant: "B", GlobalWeight: 1, Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 100}}})
	c := newTestController(t, env, noDefault)
	kv := []mech.PathElem{{Resource: rKV, Role: mech.Appliance}}
	got := step(c, flowObs("a1", "kv", "A", kv, 2000), flowObs("a2", "kv", "A", kv, 2000), flowObs("b1", "kv", "B", kv, 2000))
	a := got[mech.FlowID{Src: "a1", Dst: "kv"}][0] + got[mech.FlowID{Src: "a2", Dst: "kv"}][0]
	b := got[mech.FlowID{Src: "b1", Dst: "kv"}][0]
	if !near(a, 300) || !near(b, 700) {
		t.Errorf("A gets %v (max 300), B %v; want 300, 700", a, b)
	}
}

// TestHeadroom: the global step leaves the headroom of every link.
func TestHeadroom(t *testing.T) {
	for _, h := range []float64{0, 0.03, 0.05} {
		vms := []mech.VM{{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 100}}
		env := testEnv(1e6, vms, mech.VDC{Tenant: "A"})
		c := newTestController(t, env, map[string]any{"default_rate": 0, "headroom": h})
		up := []mech.PathElem{{Resource: rUp1, Role: mech.Forward}}
		got := step(c, flowObs("a1", "x", "A", up, 5000))
		checkRates(t, "headroom", got[mech.FlowID{Src: "a1", Dst: "x"}], []float64{1000 * (1 - h)})
	}
}

// TestDefaultRate: the default rate is announced, floors the allocation of
// flows whose demand is below it, and is what forgotten flows return to.
func TestDefaultRate(t *testing.T) {
	vms := []mech.VM{{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 100}, {Name: "a2", Tenant: "A", Host: "h2", In: 100, Out: 100}}
	env := testEnv(1e6, vms, mech.VDC{Tenant: "A"})
	c := newTestController(t, env, map[string]any{"default_rate": 10, "forget_intervals": 2})
	idle := flowObs("a1", "a2", "A", vmPath(), 0, 0)
	busy := flowObs("a2", "a1", "A", []mech.PathElem{{Resource: rUp2, Role: mech.Forward}, {Resource: rDown1, Role: mech.Forward}}, 50, 50)
	act := c.Step(&mech.ControllerObs{Period: time.Second, Flows: []mech.FlowObs{idle, busy}})
	if act.DefaultRate != 10 {
		t.Errorf("DefaultRate = %v", act.DefaultRate)
	}
	got := map[mech.FlowID][]float64{}
	for _, a := range act.Allocations {
		got[a.Flow] = a.Rates
	}
	checkRates(t, "idle", got[idle.Flow], []float64{10, 10})
	checkRates(t, "busy", got[busy.Flow], []float64{50, 50})

	// The idle flow disappears: kept for forget_intervals − 1 steps, then
	// reset to the default rate and forgotten.
	got = step(c, busy)
	checkRates(t, "idle, unobserved once", got[idle.Flow], []float64{10, 10})
	got = step(c, busy)
	checkRates(t, "idle, forgotten", got[idle.Flow], []float64{10, 10})
	if c.Demand(idle.Flow) != nil {
		t.Error("flow not forgotten")
	}
	if got = step(c, busy); got[idle.Flow] != nil {
		t.Errorf("forgotten flow still allocated: %v", got[idle.Flow])
	}
}

// TestScopes: "appliances" allocates appliances only (links +Inf),
// "network" links only (appliances +Inf, no estimates).
func TestScopes(t *testing.T) {
	inf := math.Inf(1)
	vms := []mech.VM{{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 100}, {Name: "a2", Tenant: "A", Host: "h2", In: 100, Out: 100}}
	vdc := mech.VDC{Tenant: "A", Fixed: true, Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 40}}}
	flows := []mech.FlowObs{flowObs("a1", "kv", "A", appPath(), 500, 500, 500), flowObs("a1", "a2", "A", vmPath(), 500, 500)}
	cases := []struct {
		scope     string
		app, vm   []float64
		estimates bool
	}{
		// DRF: dominant shares 500/40 (kv) and 500/100 (a1/out) rise
		// together until a1/out (100 B/s) is full.
		{"all", []float64{200. / 7, 200. / 7, 200. / 7}, []float64{500. / 7, 500. / 7}, true},
		{"appliances", []float64{inf, 40, inf}, []float64{inf, inf}, true},
		{"network", []float64{50, inf, 50}, []float64{50, 50}, false},
	}
	for _, k := range cases {
		env := testEnv(1e6, append([]mech.VM(nil), vms...), vdc)
		c := newTestController(t, env, map[string]any{"default_rate": 0, "scope": k.scope})
		act := c.Step(&mech.ControllerObs{Period: time.Second, Flows: flows})
		got := map[mech.FlowID][]float64{}
		for _, a := range act.Allocations {
			got[a.Flow] = a.Rates
		}
		checkRates(t, k.scope+" to kv", got[flows[0].Flow], k.app)
		checkRates(t, k.scope+" VM to VM", got[flows[1].Flow], k.vm)
		if _, ok := act.Estimates["kv"]; ok != k.estimates {
			t.Errorf("%s: estimates %v", k.scope, act.Estimates)
		}
	}
}

// TestUnguaranteed: elements without a guarantee (an appliance not in the
// VDC, an unknown tenant) get nothing locally, only spare capacity.
func TestUnguaranteed(t *testing.T) {
	vms := []mech.VM{{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 100}}
	env := testEnv(300, vms, mech.VDC{Tenant: "A", Fixed: true}, mech.VDC{Tenant: "B"})
	c := newTestController(t, env, noDefault)
	kv := []mech.PathElem{{Resource: rKV, Role: mech.Appliance}}
	got := step(c, flowObs("a1", "kv", "A", kv, 100), flowObs("zz", "kv", "nobody", kv, 1000))
	checkRates(t, "fixed tenant without kv guarantee", got[mech.FlowID{Src: "a1", Dst: "kv"}], []float64{0})
	checkRates(t, "unknown tenant: spare only", got[mech.FlowID{Src: "zz", Dst: "kv"}], []float64{300})
}

// TestFeasible: at every resource, local + global allocations stay within
// capacity (links less headroom) for every global policy, and the
// Estimates report the appliance capacity.
func TestFeasible(t *testing.T) {
	for _, pol := range []Policy{HDRF, DRF, MaxMin, FirstFit} {
		env, obs := ScaleInstance(7, 0.05)
		p := DefaultParams()
		p.GlobalPolicy = pol
		c, err := NewController(env, p)
		if err != nil {
			t.Fatal(err)
		}
		act := c.Step(obs)
		load := make([]float64, len(env.Resources))
		paths := map[mech.FlowID][]mech.PathElem{}
		for _, f := range obs.Flows {
			paths[f.Flow] = f.Path
		}
		for _, a := range act.Allocations {
			for e, pe := range paths[a.Flow] {
				load[pe.Resource] += a.Rates[e]
			}
		}
		for r, res := range env.Resources {
			capy := res.Capacity * (1 - p.Headroom)
			if res.Kind == mech.ApplianceResource {
				capy = act.Estimates[res.ID]
			}
			if load[r] > capy*(1+1e-9) {
				t.Errorf("%s: %s load %v > %v", pol, res.ID, load[r], capy)
			}
		}
		if len(act.Allocations) != len(obs.Flows) || len(act.Estimates) != 200 {
			t.Errorf("%s: %d allocations for %d flows, %d estimates", pol, len(act.Allocations), len(obs.Flows), len(act.Estimates))
		}
	}
}

func TestNewControllerErrors(t *testing.T) {
	vms := func() []mech.VM { return []mech.VM{{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 100}} }
	cases := []struct {
		name string
		env  mech.ControllerEnv
		want string
	}{
		{"unknown appliance", testEnv(1, vms(), mech.VDC{Tenant: "A", Appliances: []mech.ApplianceGuarantee{{Appliance: "nope", Min: 1}}}), `tenant "A": appliances[0]: unknown resource "nope"`},
		{"link as appliance", testEnv(1, vms(), mech.VDC{Tenant: "A", Appliances: []mech.ApplianceGuarantee{{Appliance: "h1/up", Min: 1}}}), `resource "h1/up" is not an appliance`},
		{"bad policy", testEnv(1, vms(), mech.VDC{Tenant: "A", Policy: "hdrf"}), `tenant "A": unknown local policy "hdrf"`},
		{"bad weight", testEnv(1, vms(), mech.VDC{Tenant: "A", Weights: map[string]float64{"a1->x": 0}}), `weight of flow "a1->x" must be > 0`},
		{"duplicate tenant", testEnv(1, vms(), mech.VDC{Tenant: "A"}, mech.VDC{Tenant: "A"}), `duplicate tenant "A"`},
		{"duplicate VM", testEnv(1, append(vms(), vms()...)), `duplicate VM "a1"`},
	}
	dup := testEnv(1, vms())
	dup.Resources = append(dup.Resources, mech.ResourceInfo{ID: "kv", Kind: mech.ApplianceResource})
	cases = append(cases, struct {
		name string
		env  mech.ControllerEnv
		want string
	}{"duplicate resource", dup, `resources[5]: duplicate id "kv"`})
	zero := testEnv(1, vms())
	zero.Resources[0].Capacity = 0
	cases = append(cases, struct {
		name string
		env  mech.ControllerEnv
		want string
	}{"zero link", zero, "link capacity must be > 0"})
	bad := DefaultParams()
	bad.EWMA = 0
	if _, err := NewController(testEnv(1, vms()), bad); err == nil || !strings.Contains(err.Error(), "pulsar: invalid parameters: mechanism.params.ewma: must be in (0, 1], got 0") {
		t.Errorf("invalid Params: %v", err)
	}
	for _, c := range cases {
		_, err := NewController(c.env, DefaultParams())
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "pulsar: ") {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestLocalWeights: VDC.Weights biases the tenant's local DRF.
func TestLocalWeights(t *testing.T) {
	vms := []mech.VM{{Name: "a1", Tenant: "A", Host: "h1", In: 300, Out: 300}, {Name: "a2", Tenant: "A", Host: "h1", In: 300, Out: 300}}
	env := testEnv(1e6, vms, mech.VDC{Tenant: "A", Fixed: true, Weights: map[string]float64{"a1->x": 2}})
	c := newTestController(t, env, noDefault)
	up := []mech.PathElem{{Resource: rUp1, Role: mech.Forward}}
	// Both flows leave a1 (its out-link, 300 B/s): split 2:1.
	got := step(c, flowObs("a1", "x", "A", up, 1000), flowObs("a1", "y", "A", up, 1000))
	checkRates(t, "weight 2", got[mech.FlowID{Src: "a1", Dst: "x"}], []float64{200})
	checkRates(t, "weight 1", got[mech.FlowID{Src: "a1", Dst: "y"}], []float64{100})
}

// TestGlobalWeightModes: how tenants' global weights follow from their
// guarantees.
func TestGlobalWeightModes(t *testing.T) {
	vms := func() []mech.VM {
		return []mech.VM{{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 300}, {Name: "b1", Tenant: "B", Host: "h1", In: 50, Out: 50}}
	}
	vdcs := []mech.VDC{
		{Tenant: "A", Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 40}}},
		{Tenant: "B", GlobalWeight: 7},
	}
	cases := []struct {
		params map[string]any
		a      float64
	}{
		{nil, 300}, // max(a1 in 100, out 300, kv 40)
		{map[string]any{"scope": "appliances"}, 40},
		{map[string]any{"scope": "network"}, 300},
		{map[string]any{"global_weight": "total"}, 440},
		{map[string]any{"global_weight": "network"}, 400},
		{map[string]any{"global_weight": "appliances"}, 40},
		{map[string]any{"global_weight": "equal"}, 1},
	}
	for _, k := range cases {
		c := newTestController(t, testEnv(1000, vms(), vdcs...), k.params)
		if a, b := c.byName["A"].gweight, c.byName["B"].gweight; a != k.a || b != 7 {
			t.Errorf("%v: weights A %v, B %v; want %v, 7", k.params, a, b, k.a)
		}
	}
}
