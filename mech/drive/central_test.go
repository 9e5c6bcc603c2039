package drive_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
)

func TestPairAllocLimit(t *testing.T) {
	for _, tc := range []struct {
		rates []float64
		want  float64
	}{
		{[]float64{1e6}, 8e6},
		{[]float64{3e6, 1e6, 2e6}, 8e6},
		{nil, math.Inf(1)},
		{[]float64{0, 5}, 0},
	} {
		if got := drive.PairAllocLimit(tc.rates); got != tc.want {
			t.Errorf("drive.PairAllocLimit(%v) = %g, want %g", tc.rates, got, tc.want)
		}
	}
	by := map[string]float64{"a1": 5}
	if drive.DefaultFor("a1", 2, by) != 5 || drive.DefaultFor("b1", 2, by) != 2 || drive.DefaultFor("b1", 0, nil) != 0 {
		t.Error("DefaultFor: a VM's own default first, then the controller's")
	}
	if got := drive.HeldBacklog(1000, 500*time.Millisecond); got != 500 {
		t.Errorf("HeldBacklog = %g, want 500", got)
	}
}

// TestCentralPairs: a host enforces the controller's allocations for its
// own VM pairs (the scarcest element, in bits/s), the default rate for
// pairs it sees that were never allocated, says a limit only when it
// changes, and ignores flows of other hosts' VMs and to appliances.
func TestCentralPairs(t *testing.T) {
	inner := &scripted{}
	c := drive.NewCentralPairs(inner)
	ag, err := c.NewAgent(testEnv("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if ag.Period() != 10*time.Millisecond { // the wrapped agent's, shorter than drive.CentralPeriod
		t.Errorf("period %v, want 10ms", ag.Period())
	}
	obs := &mech.HostObs{Egress: []mech.PairObs{{Pair: mech.PairID{Src: "b1", Dst: "a2"}, Limit: 3e6}}}
	// Before the controller's first actions (an agent that has just
	// taken over the host): the pairs keep the limits in force.
	if got := ag.Step(obs, nil).Limits; len(got) != 0 {
		t.Errorf("before any actions: limits %v, want none", got)
	}
	steps := []struct {
		flows map[mech.FlowID][]float64
		def   float64
		bySrc map[string]float64
		want  []mech.Limit
	}{
		{ // actions with no allocation: b1->a2 is seen, no default: unlimited
			want: []mech.Limit{pl("b1", "a2", mech.Unlimited)},
		},
		{
			flows: map[mech.FlowID][]float64{
				{Src: "a1", Dst: "a2"}:  {2e6, 1e6}, // 8 Mbit/s
				{Src: "a2", Dst: "a1"}:  {1e6},      // a2 is on h2: not this host's
				{Src: "a1", Dst: "kv"}:  {1e6},      // an appliance: the proxy's
				{Src: "a1", Dst: "zzz"}: {1e6},      // unknown VM
			},
			def: 1e5, bySrc: map[string]float64{"b1": 2e5},
			want: []mech.Limit{pl("a1", "a2", 8e6), pl("b1", "a2", 1.6e6)},
		},
		{ // the same again: nothing to say
			flows: map[mech.FlowID][]float64{{Src: "a1", Dst: "a2"}: {1e6}},
			def:   1e5, bySrc: map[string]float64{"b1": 2e5},
		},
		{ // a1->a2 no longer allocated: its source's default (the controller's)
			def:  1e5,
			want: []mech.Limit{pl("a1", "a2", 8e5), pl("b1", "a2", 8e5)},
		},
	}
	for i, st := range steps {
		c.SetActions(st.flows, st.def, st.bySrc)
		got := ag.Step(obs, nil).Limits
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d: limits %v, want %v", i, got, st.want)
		}
	}
	if err := ag.(mech.EnvUpdater).UpdateEnv(mech.Env{Host: "h1", VMs: testEnv("h1").VMs[:2]}); err != nil {
		t.Fatal(err)
	}
	if got := ag.Step(&mech.HostObs{}, nil).Limits; len(got) != 0 {
		t.Errorf("after b1 left: limits %v, want none new", got)
	}
	if len(inner.envs) != 1 {
		t.Errorf("the wrapped agent got %d environments, want 1", len(inner.envs))
	}
}
