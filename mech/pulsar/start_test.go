package pulsar

import (
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// startEnv: tenant A with VMs a1 on h1 and a2, a3 on h2, 300 B/s
// guaranteed in and out each, on 1000 B/s links.
func startEnv() mech.ControllerEnv {
	vms := []mech.VM{
		{Name: "a1", Tenant: "A", Host: "h1", In: 300, Out: 300},
		{Name: "a2", Tenant: "A", Host: "h2", In: 300, Out: 300},
		{Name: "a3", Tenant: "A", Host: "h2", In: 300, Out: 300},
	}
	return testEnv(1e6, vms, mech.VDC{Tenant: "A"})
}

// TestGuaranteeFirst: a flow its enforcer holds back — a new one at the
// default rate, one returning at a decayed allocation — gets its
// guarantee's share at the next step (§4.1: guarantees first); its
// estimate, which ramps up from what it used, decides only its part of the
// spare. A flow that uses less than its limit, or exactly its limit with
// nothing queued, is given what it uses.
func TestGuaranteeFirst(t *testing.T) {
	path12 := vmPath()
	held := func(dst string, used, backlog float64) mech.FlowObs {
		o := flowObs("a1", dst, "A", path12, used, used)
		o.Backlog = []float64{backlog, backlog}
		return o
	}
	cases := []struct {
		name  string
		flows []mech.FlowObs
		want  map[string][]float64 // by destination
	}{
		{"new flow held at the default rate: its guarantee",
			[]mech.FlowObs{held("a2", 10, 10)}, map[string][]float64{"a2": {300, 300}}},
		{"two new flows from one VM share its guarantee",
			[]mech.FlowObs{held("a2", 10, 10), held("a3", 10, 10)}, map[string][]float64{"a2": {150, 150}, "a3": {150, 150}}},
		{"below the default rate: what it uses, floored at the default",
			[]mech.FlowObs{flowObs("a1", "a2", "A", path12, 4, 4)}, map[string][]float64{"a2": {10, 10}}},
		{"at the default rate with nothing queued: not held",
			[]mech.FlowObs{flowObs("a1", "a2", "A", path12, 10, 10)}, map[string][]float64{"a2": {10, 10}}},
	}
	for _, c := range cases {
		ctl := newTestController(t, startEnv(), map[string]any{"default_rate": 10})
		got := step(ctl, c.flows...)
		for dst, want := range c.want {
			checkRates(t, c.name+" ("+dst+")", got[mech.FlowID{Src: "a1", Dst: dst}], want)
		}
	}

	// Return: a flow busy beyond its guarantee goes idle, its allocation
	// decays to the default rate's floor; back and held there, it gets its
	// guarantee at the next step, and the spare again only as its estimate
	// grows.
	ctl := newTestController(t, startEnv(), map[string]any{"default_rate": 10})
	id := mech.FlowID{Src: "a1", Dst: "a2"}
	got := step(ctl, held("a2", 10, 10))
	checkRates(t, "start", got[id], []float64{300, 300})
	for i := 0; i < 6; i++ {
		o := held("a2", got[id][0], got[id][0])
		o.Allocation = got[id]
		got = step(ctl, o)
	}
	if got[id][0] <= 600 {
		t.Fatalf("busy: allocation %v, want beyond the guarantee", got[id])
	}
	for i := 0; i < 12; i++ {
		o := flowObs("a1", "a2", "A", path12, 0, 0)
		o.Allocation = got[id]
		got = step(ctl, o)
	}
	checkRates(t, "idle", got[id], []float64{10, 10})
	o := held("a2", 10, 10)
	o.Allocation = got[id]
	got = step(ctl, o)
	checkRates(t, "back", got[id], []float64{300, 300})
}

// TestHiddenDemand: a closed-loop flow whose requests wait in a queue at
// the appliance is not held back by its enforcer and uses less than it
// would without the queue; its demand up to its guarantee is seen, and it
// is given that locally.
func TestHiddenDemand(t *testing.T) {
	vms := []mech.VM{
		{Name: "a1", Tenant: "A", Host: "h1", In: 1000, Out: 1000},
		{Name: "b1", Tenant: "B", Host: "h2", In: 1000, Out: 1000},
	}
	env := testEnv(2000, vms,
		mech.VDC{Tenant: "A", Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 500}}},
		mech.VDC{Tenant: "B", Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 500}}})
	c := newTestController(t, env, noDefault)
	pathB := []mech.PathElem{{Resource: rUp2, Role: mech.Forward}, {Resource: rKV, Role: mech.Appliance}, {Resource: rDown2, Role: mech.Reverse}}
	// A keeps 0.4 tokens outstanding (its window): 400 tokens/s at a 1 ms
	// round trip; B 0.8: 800 tokens/s.
	obs := func(src string, path []mech.PathElem, window, rtt float64) mech.FlowObs {
		u := window / rtt
		return mech.FlowObs{Flow: mech.FlowID{Src: src, Dst: "kv"}, Tenant: string(src[0] - 'a' + 'A'), Path: path,
			Used: []float64{u, u, u}, Outstanding: []float64{window, window, window}}
	}
	step(c, obs("a1", appPath(), 0.4, 0.001), obs("b1", pathB, 0.8, 0.001))
	// A queue of 1 ms at kv: both round trips double, both rates halve.
	got := step(c, obs("a1", appPath(), 0.4, 0.002), obs("b1", pathB, 0.8, 0.002))
	if d := c.apps[rKV].obs.Delay; !near(d, 0.001) {
		t.Fatalf("delay at kv %v, want 1 ms", d)
	}
	// A's estimate is 0.5·200 + 0.5·400 = 300; without the queue it would
	// use 400, within its guarantee: given locally, on every element.
	checkRates(t, "A", got[mech.FlowID{Src: "a1", Dst: "kv"}], []float64{400, 400, 400})
	// B's would be 800, beyond its guarantee: given its guarantee locally
	// (and a share of the spare by its estimate, 600).
	if b := got[mech.FlowID{Src: "b1", Dst: "kv"}]; b[1] < 600 {
		t.Errorf("B: %v, want at least its estimate 600 at kv", b)
	}
}

// TestHeldNotFloored: the default-rate floor is for flows whose demand
// fell, to show they want more again; a flow held back by its enforcer
// shows it already, and is given its guarantee's share and its estimate's
// part of the spare, not the floor: 30 senders held back at their 10 B/s
// guarantees into one 1000 B/s link under a default rate of 100 B/s get
// their estimates (20 B/s: u + b/T), not 30 × 100 B/s, three times the
// link.
func TestHeldNotFloored(t *testing.T) {
	var vms []mech.VM
	var flows []mech.FlowObs
	for i := range 30 {
		name := string(rune('A'+i/26)) + string(rune('a'+i%26))
		vms = append(vms, mech.VM{Name: name, Tenant: "A", Host: "h1", In: 10, Out: 10})
		o := flowObs(name, "x", "A", vmPath(), 10, 10)
		o.Backlog, o.Allocation = []float64{10, 10}, []float64{10, 10}
		flows = append(flows, o)
	}
	vms = append(vms, mech.VM{Name: "x", Tenant: "A", Host: "h2", In: 1000, Out: 1000})
	c := newTestController(t, testEnv(1e6, vms, mech.VDC{Tenant: "A"}), map[string]any{"default_rate": 100})
	got := step(c, flows...)
	for _, f := range flows {
		checkRates(t, f.Flow.Src, got[f.Flow], []float64{20, 20})
	}
}

// TestFloorShare: a flow not held back whose demand is below the default
// rate is floored at the default rate, but at no more than its equal
// share of its tenant's guarantees among the flows that used them: 30
// senders into one receiver with 450 B/s guaranteed in, each limited to 5
// B/s by congestion (not by its enforcer), are floored at 450/30 = 15 B/s,
// not at the default rate of 100 B/s (3000 B/s into a 1000 B/s link that
// nobody's enforcer would then hold back); a 31st sender, idle, counts
// itself in: 450/31. A best-effort tenant's flow has no guarantee to
// share: the default rate.
func TestFloorShare(t *testing.T) {
	var vms []mech.VM
	var flows []mech.FlowObs
	for i := range 31 {
		name := string(rune('A'+i/26)) + string(rune('a'+i%26))
		vms = append(vms, mech.VM{Name: name, Tenant: "A", Host: "h1", In: 1000, Out: 1000})
		used := 5.0
		if i == 30 {
			used = 0
		}
		o := flowObs(name, "x", "A", vmPath(), used, used)
		o.Allocation = []float64{100, 100}
		flows = append(flows, o)
	}
	vms = append(vms, mech.VM{Name: "x", Tenant: "A", Host: "h2", In: 450, Out: 450})
	// A best-effort tenant's idle flow: no guarantee to share, the default
	// rate.
	vms = append(vms, mech.VM{Name: "z", Tenant: "B", Host: "h1"})
	be := flowObs("z", "x", "B", vmPath(), 0, 0)
	be.Allocation = []float64{100, 100}
	c := newTestController(t, testEnv(1e6, vms, mech.VDC{Tenant: "A"}, mech.VDC{Tenant: "B"}), map[string]any{"default_rate": 100})
	got := step(c, append(flows, be)...)
	for i, f := range flows {
		want := 15.0
		if i == 30 {
			want = 450.0 / 31
		}
		checkRates(t, f.Flow.Src, got[f.Flow], []float64{want, want})
	}
	checkRates(t, "best effort", got[be.Flow], []float64{100, 100})
}

// TestStartRate: until traffic is first seen, flows never allocated run at
// the smallest equal share of a guarantee any flow of the declared model
// can have (when above default_rate): new flows have their guarantees
// from their first moments, and however many start at once, stay within
// them.
func TestStartRate(t *testing.T) {
	vm := func(name, tenant string, g float64) mech.VM {
		return mech.VM{Name: name, Tenant: tenant, Host: "h1", In: g, Out: g}
	}
	kv := func(tenant string, g float64) mech.VDC {
		return mech.VDC{Tenant: tenant, Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: g}}}
	}
	cases := []struct {
		name   string
		vms    []mech.VM
		vdcs   []mech.VDC
		params map[string]any
		want   float64
	}{
		{"one pair per tenant: the whole guarantee",
			[]mech.VM{vm("a1", "A", 450), vm("a2", "A", 450), vm("b1", "B", 300), vm("b2", "B", 300)}, nil, nil, 300},
		{"four VMs: a third of the smallest hose",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600), vm("a3", "A", 600), vm("a4", "A", 300)}, nil, nil, 100},
		{"below the default rate: the default rate",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600)}, nil, map[string]any{"default_rate": 1000}, 1000},
		{"a best-effort tenant: the default rate",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600), vm("b1", "B", 0), vm("b2", "B", 0)}, nil, nil, 10},
		{"a VM alone has no flow",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600), vm("b1", "B", 0)}, nil, nil, 600},
		{"a flow to an appliance shares the VM's hoses; the appliance's guarantee among the tenant's VMs",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600)}, []mech.VDC{kv("A", 500)}, nil, 250},
		{"network only: appliances are not allocated",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600)}, []mech.VDC{kv("A", 100)}, map[string]any{"scope": "network"}, 600},
		{"appliances only: links are not allocated",
			[]mech.VM{vm("a1", "A", 0), vm("a2", "A", 0)}, []mech.VDC{kv("A", 100)}, map[string]any{"scope": "appliances"}, 50},
		{"default_rate 0: unlimited",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600)}, nil, map[string]any{"default_rate": 0}, 0},
	}
	for _, c := range cases {
		params := map[string]any{"default_rate": 10}
		for k, v := range c.params {
			params[k] = v
		}
		ctl := newTestController(t, testEnv(1e6, c.vms, c.vdcs...), params)
		if act := ctl.Step(&mech.ControllerObs{Period: time.Second}); act.DefaultRate != c.want {
			t.Errorf("%s: default rate %v, want %v", c.name, act.DefaultRate, c.want)
		}
	}

	// Fig. 3's two tenants: the first step (no traffic yet) announces the
	// whole guarantee; at the next, their flows, held there, get their
	// guarantees (and the spare), and new flows from then on run at
	// default_rate: others may now hold spare capacity, and a new flow at
	// a large default rate would be held back by their congestion, which
	// the controller does not see, rather than by its enforcer.
	vms := func() []mech.VM { // testEnv scales them
		return []mech.VM{vm("a1", "A", 300), vm("a2", "A", 300), vm("b1", "B", 300), vm("b2", "B", 300)}
	}
	ctl := newTestController(t, testEnv(1e6, vms()), map[string]any{"default_rate": 10, "headroom": 0})
	if act := ctl.Step(&mech.ControllerObs{Period: time.Second}); act.DefaultRate != 300 {
		t.Fatalf("first step: default rate %v, want 300", act.DefaultRate)
	}
	held := func(src, dst, tenant string) mech.FlowObs {
		o := flowObs(src, dst, tenant, vmPath(), 300, 300)
		o.Backlog = []float64{300, 300}
		return o
	}
	act := ctl.Step(&mech.ControllerObs{Period: time.Second, Flows: []mech.FlowObs{held("a1", "a2", "A"), held("b1", "b2", "B")}})
	if act.DefaultRate != 10 {
		t.Errorf("once traffic is seen: default rate %v, want 10", act.DefaultRate)
	}
	for _, a := range act.Allocations {
		checkRates(t, "held at the start rate: guarantee and spare", a.Rates, []float64{500, 500})
	}

	// A flow seen before it sends anything (a request flow, active from
	// the start) is floored at the start rate, which stays.
	ctl = newTestController(t, testEnv(1e6, vms()), map[string]any{"default_rate": 10, "headroom": 0})
	ctl.Step(&mech.ControllerObs{Period: time.Second})
	act = ctl.Step(&mech.ControllerObs{Period: time.Second, Flows: []mech.FlowObs{flowObs("a1", "a2", "A", vmPath(), 0, 0)}})
	if act.DefaultRate != 300 {
		t.Errorf("idle flow seen: default rate %v, want 300", act.DefaultRate)
	}
	for _, a := range act.Allocations {
		checkRates(t, "idle flow seen: floored at the start rate", a.Rates, []float64{300, 300})
	}
}
