package pulsar

import (
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// TestDemandCapKeepsShape: a demand estimate beyond a resource's capacity
// is scaled down as a vector, so it keeps the flow's request mix (here 2
// link bytes per appliance token).
func TestDemandCapKeepsShape(t *testing.T) {
	env := testEnv(1e6, []mech.VM{{Name: "a1", Tenant: "A", Host: "h1", In: 1e6, Out: 1e6}},
		mech.VDC{Tenant: "A", Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 100}}})
	env.Resources[rKV].CapacityMin, env.Resources[rKV].CapacityMax = 0, 0
	env.Resources[rKV].Capacity = 2000 // window [1000, 4000]
	c := newTestController(t, env, noDefault)
	id := mech.FlowID{Src: "a1", Dst: "kv"}
	// Closed loop, held back, with almost nothing outstanding: q·u/o is
	// huge on every element.
	o := mech.FlowObs{Flow: id, Tenant: "A", Path: appPath(),
		Used: []float64{20, 10, 20}, Queued: []float64{2000, 1000, 2000}, Outstanding: []float64{0.2, 0.1, 0.2},
		Allocation: []float64{20, 10, 20}}
	step(c, o)
	d := c.Demand(id)
	// The links (1000 B/s) bind: 1000 bytes/s, 500 tokens/s.
	checkRates(t, "demand", d, []float64{1000, 500, 1000})
}

// TestDelayAttribution: a FIFO appliance delays every flow it serves. A
// queue at the shared appliance shows in both tenants' round trips and is
// attributed to it, not to the second appliance on B's way; a queue at the
// second appliance shows only in B's round trip.
func TestDelayAttribution(t *testing.T) {
	env := mech.ControllerEnv{
		Resources: []mech.ResourceInfo{
			{ID: "enc", Kind: mech.ApplianceResource, CapacityMin: 1000, CapacityMax: 4000},
			{ID: "kv", Kind: mech.ApplianceResource, CapacityMin: 1000, CapacityMax: 4000},
		},
		VDCs: []mech.VDC{
			{Tenant: "A", Appliances: []mech.ApplianceGuarantee{{Appliance: "enc", Min: 500}}},
			{Tenant: "B", Appliances: []mech.ApplianceGuarantee{{Appliance: "enc", Min: 500}, {Appliance: "kv", Min: 500}}},
		},
	}
	c := newTestController(t, env, noDefault)
	pa := []mech.PathElem{{Resource: 0, Role: mech.Appliance}}
	pb := []mech.PathElem{{Resource: 0, Role: mech.Appliance}, {Resource: 1, Role: mech.Appliance}}
	// Round trips: A 1 ms, B 2 ms unloaded, plus extra delays.
	obs := func(extraA, extraB float64) []mech.FlowObs {
		var fs []mech.FlowObs
		for i, name := range []string{"a1", "a2"} {
			u := 100.0 * float64(i+1)
			fs = append(fs, mech.FlowObs{Flow: mech.FlowID{Src: name, Dst: "enc"}, Tenant: "A", Path: pa,
				Used: []float64{u}, Outstanding: []float64{u * (0.001 + extraA)}})
		}
		u := 300.0
		fs = append(fs, mech.FlowObs{Flow: mech.FlowID{Src: "b1", Dst: "kv"}, Tenant: "B", Path: pb,
			Used: []float64{u, u}, Outstanding: []float64{u * (0.002 + extraB), u * (0.002 + extraB)}})
		return fs
	}
	check := func(name string, enc, kv float64) {
		t.Helper()
		if got := c.apps[0].obs.Delay; !near(got, enc) {
			t.Errorf("%s: enc delay %v, want %v", name, got, enc)
		}
		if got := c.apps[1].obs.Delay; !near(got, kv) {
			t.Errorf("%s: kv delay %v, want %v", name, got, kv)
		}
	}
	step(c, obs(0, 0)...)
	check("unloaded", 0, 0)
	// Latency: throughput-weighted baselines (A 1 ms for 300, B 2 ms for 300).
	if got := c.apps[0].obs.Latency; !near(got, 0.0015) {
		t.Errorf("enc latency %v, want 0.0015", got)
	}
	step(c, obs(0.004, 0.004)...)
	check("queue at enc", 0.004, 0)
	step(c, obs(0, 0.003)...)
	check("queue at kv", 0, 0.003)
	step(c, obs(0.001, 0.004)...)
	check("queues at both", 0.001, 0.003)
	// Baselines did not move: the delays explained the excess.
	step(c, obs(0, 0)...)
	check("unloaded again", 0, 0)
}
