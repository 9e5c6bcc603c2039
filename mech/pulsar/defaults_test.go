package pulsar

import (
	"maps"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// TestVMDefaults: each VM's default rate for new flows (§5) is what is
// left of its tenant's guarantees that a new flow from it would use,
// shared among the possible new flows that would use them (VMs not listed
// in DefaultBySrc run at DefaultRate).
func TestVMDefaults(t *testing.T) {
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
		want   map[string]float64
	}{
		{"each tenant its own hose; best-effort VMs and lone VMs not listed",
			[]mech.VM{vm("a1", "A", 450), vm("a2", "A", 450), vm("b1", "B", 300), vm("b2", "B", 300),
				vm("c1", "C", 0), vm("c2", "C", 0), vm("d1", "D", 600)},
			nil, nil, map[string]float64{"a1": 450, "a2": 450, "b1": 300, "b2": 300, "c1": 10, "c2": 10, "d1": 10}},
		{"the smallest in-hose among the possible destinations",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600), vm("a3", "A", 600), {Name: "a4", Tenant: "A", Host: "h1", In: 300, Out: 600}},
			nil, nil, map[string]float64{"a1": 100, "a2": 100, "a3": 100, "a4": 200}},
		{"a flow to an appliance shares the VM's hoses; the appliance's guarantee among the tenant's VMs",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600)}, []mech.VDC{kv("A", 500)}, nil,
			map[string]float64{"a1": 250, "a2": 250}},
		{"appliances only: links are not allocated",
			[]mech.VM{vm("a1", "A", 0), vm("a2", "A", 0)}, []mech.VDC{kv("A", 100)}, map[string]any{"scope": "appliances"},
			map[string]float64{"a1": 50, "a2": 50}},
		{"default_rate 0: unlimited, none listed",
			[]mech.VM{vm("a1", "A", 600), vm("a2", "A", 600)}, nil, map[string]any{"default_rate": 0}, map[string]float64{"a1": 0, "a2": 0}},
	}
	for _, c := range cases {
		params := map[string]any{"default_rate": 10}
		maps.Copy(params, c.params)
		ctl := newTestController(t, testEnv(1e6, c.vms, c.vdcs...), params)
		act := ctl.Step(&mech.ControllerObs{Period: time.Second})
		if got := effectiveDefaults(act, c.vms); !maps.Equal(got, c.want) {
			t.Errorf("%s: default rates %v (listed: %v), want %v", c.name, got, act.DefaultBySrc, c.want)
		}
	}
}

// effectiveDefaults: the default rate of a new flow from each VM.
func effectiveDefaults(act mech.ControllerActions, vms []mech.VM) map[string]float64 {
	out := map[string]float64{}
	for _, v := range vms {
		out[v.Name] = act.DefaultRate
		if r, ok := act.DefaultBySrc[v.Name]; ok {
			out[v.Name] = r
		}
	}
	return out
}

// TestVMDefaultsAfterStart: once traffic is seen, a VM's default rate is
// what its existing flows' guarantee shares leave of the guarantees a new
// flow would use. Tenant A: a1, a2, a3 with 300 B/s in and out each.
func TestVMDefaultsAfterStart(t *testing.T) {
	ctl := newTestController(t, startEnv(), map[string]any{"default_rate": 10, "headroom": 0})
	vms := startEnv().VMs
	act := ctl.Step(&mech.ControllerObs{Period: time.Second})
	want := map[string]float64{"a1": 150, "a2": 150, "a3": 150}
	if got := effectiveDefaults(act, vms); !maps.Equal(got, want) {
		t.Fatalf("start: %v, want %v", got, want)
	}
	// a1 -> a2 held at a1's default: its guarantee (and the spare) at the
	// next step. a1's out-hose and a2's in-hose are then taken: a1 has
	// nothing left for a new flow, nor has a3 (a new flow from it may go
	// to a2); a2 has its whole out-hose for a1 and a3, whose in-hoses
	// are shared with a3 and a2.
	held := flowObs("a1", "a2", "A", vmPath(), 150, 150)
	held.Backlog = []float64{150, 150}
	act = ctl.Step(&mech.ControllerObs{Period: time.Second, Flows: []mech.FlowObs{held}})
	if len(act.Allocations) != 1 || act.Allocations[0].Rates[0] < 300 {
		t.Fatalf("held at its VM's default rate: %v, want at least its guarantee 300", act.Allocations)
	}
	alloc12 := act.Allocations[0].Rates
	want = map[string]float64{"a1": 10, "a2": 150, "a3": 10}
	if got := effectiveDefaults(act, vms); !maps.Equal(got, want) {
		t.Fatalf("after a1->a2: %v, want %v", got, want)
	}

	// A new flow from a2 is held back by its enforcer only if it used its
	// VM's default rate (150), not default_rate (10): below it, it is
	// given what it used, even with requests queued (something else held
	// it back); at it with requests queued, its guarantee.
	cases := []struct {
		name    string
		used    float64
		backlog float64
		atLeast float64
		atMost  float64
	}{
		{"below its VM's default, requests queued (not by its enforcer): what it used", 100, 150, 100, 100},
		{"held at its VM's default: its guarantee", 150, 150, 300, 1000},
	}
	for _, c := range cases {
		ctl := newTestController(t, startEnv(), map[string]any{"default_rate": 10, "headroom": 0})
		ctl.Step(&mech.ControllerObs{Period: time.Second})
		ctl.Step(&mech.ControllerObs{Period: time.Second, Flows: []mech.FlowObs{held}})
		o12 := flowObs("a1", "a2", "A", vmPath(), alloc12[0], alloc12[1])
		o12.Allocation = alloc12
		o23 := flowObs("a2", "a3", "A", vmPath(), c.used, c.used)
		o23.Backlog = []float64{c.backlog, c.backlog}
		got := step(ctl, o12, o23)[mech.FlowID{Src: "a2", Dst: "a3"}]
		if len(got) != 2 || got[0] < c.atLeast-1e-6 || got[0] > c.atMost+1e-6 {
			t.Errorf("%s: %v, want in [%v, %v]", c.name, got, c.atLeast, c.atMost)
		}
	}
}
