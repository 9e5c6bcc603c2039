package pulsar

import (
	"math"
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
)

func TestEstimateDemand(t *testing.T) {
	path := []mech.PathElem{{Resource: 0, Role: mech.Forward}, {Resource: 1, Role: mech.Appliance}}
	cases := []struct {
		name   string
		o      mech.FlowObs
		period float64
		bound  bool
		want   []float64
	}{
		{"open loop: u + b/T", mech.FlowObs{Used: []float64{100, 800}, Backlog: []float64{50, 400}}, 1, true, []float64{150, 1200}},
		{"open loop over 2 s", mech.FlowObs{Used: []float64{100, 800}, Backlog: []float64{50, 400}}, 2, true, []float64{125, 1000}},
		{"closed loop: u + q·u/o", mech.FlowObs{Used: []float64{100, 800}, Queued: []float64{20, 160}, Outstanding: []float64{10, 80}}, 1, true, []float64{300, 2400}},
		{"max of both", mech.FlowObs{Used: []float64{100, 100}, Backlog: []float64{500, 10}, Queued: []float64{20, 20}, Outstanding: []float64{10, 10}}, 1, true, []float64{600, 300}},
		{"o = 0: q/T", mech.FlowObs{Used: []float64{0, 0}, Queued: []float64{40, 80}, Outstanding: []float64{0, 0}}, 2, true, []float64{20, 40}},
		{"not bound: u only", mech.FlowObs{Used: []float64{100, 800}, Backlog: []float64{50, 400}, Queued: []float64{5, 5}, Outstanding: []float64{1, 1}}, 1, false, []float64{100, 800}},
		{"missing vectors count as 0", mech.FlowObs{Used: []float64{100}}, 1, true, []float64{100, 0}},
		{"NaN and negative ignored", mech.FlowObs{Used: []float64{math.NaN(), -5}, Backlog: []float64{10, 10}}, 1, true, []float64{10, 10}},
	}
	for _, c := range cases {
		c.o.Path = path
		got := EstimateDemand(&c.o, c.period, c.bound, nil)
		if len(got) != len(c.want) {
			t.Fatalf("%s: got %v", c.name, got)
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-9 {
				t.Errorf("%s: got %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}

func TestBound(t *testing.T) {
	path := []mech.PathElem{{Resource: 0}, {Resource: 1}}
	inf := math.Inf(1)
	cases := []struct {
		name string
		o    mech.FlowObs
		def  float64
		want bool
	}{
		{"used its allocation", mech.FlowObs{Used: []float64{99, 10}, Allocation: []float64{100, 100}}, 0, true},
		{"well below", mech.FlowObs{Used: []float64{50, 10}, Allocation: []float64{100, 100}}, 0, false},
		{"second element binds", mech.FlowObs{Used: []float64{10, 100}, Allocation: []float64{100, 100}}, 0, true},
		{"unlimited element", mech.FlowObs{Used: []float64{500, 10}, Allocation: []float64{inf, 100}}, 0, false},
		{"zero allocation with backlog", mech.FlowObs{Used: []float64{0, 0}, Backlog: []float64{5, 0}, Allocation: []float64{0, 0}}, 0, true},
		{"zero allocation, idle", mech.FlowObs{Used: []float64{0, 0}, Allocation: []float64{0, 0}}, 0, false},
		{"default rate binds", mech.FlowObs{Used: []float64{1000, 0}}, 1000, true},
		{"default rate does not bind", mech.FlowObs{Used: []float64{10, 0}}, 1000, false},
		{"unlimited default", mech.FlowObs{Used: []float64{1e9, 0}, Backlog: []float64{1, 1}}, 0, false},
	}
	for _, c := range cases {
		c.o.Path = path
		if got := Bound(&c.o, c.def, 0.02); got != c.want {
			t.Errorf("%s: Bound = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHeld(t *testing.T) {
	path := []mech.PathElem{{Resource: 0}, {Resource: 1}}
	cases := []struct {
		name  string
		o     mech.FlowObs
		bound bool
		want  bool
	}{
		{"held back with a backlog", mech.FlowObs{Used: []float64{100, 100}, Backlog: []float64{50, 50}}, true, true},
		{"held back with requests queued", mech.FlowObs{Used: []float64{100, 100}, Queued: []float64{5, 5}, Outstanding: []float64{5, 5}}, true, true},
		{"at its limit, nothing queued", mech.FlowObs{Used: []float64{100, 100}}, true, false},
		{"not bound", mech.FlowObs{Used: []float64{100, 100}, Backlog: []float64{50, 50}}, false, false},
	}
	for _, c := range cases {
		c.o.Path = path
		d := EstimateDemand(&c.o, 1, c.bound, nil)
		if got := Held(&c.o, d, c.bound); got != c.want {
			t.Errorf("%s: Held = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestQueueFactor(t *testing.T) {
	cases := []struct {
		name                string
		u, q, out, delay, w float64
	}{
		// 100 tokens/s with 0.3 tokens outstanding: a 3 ms round trip, of
		// which 2 ms queued: 1 ms without the queue, 3× the rate.
		{"queue beyond the enforcer", 100, 0, 0.3, 0.002, 3},
		// Without a queue beyond the enforcer the factor would be eq. (5),
		// which EstimateDemand applies: 1 here.
		{"no queue beyond the enforcer", 100, 0.6, 0.3, 0, 1},
		{"both", 100, 0.3, 0.3, 0.002, 6},
		{"no traffic", 0, 0, 0.3, 0.002, 1},
		{"nothing outstanding", 100, 0, 0, 0.002, 1},
		{"the delay explains the whole round trip", 100, 0, 0.3, 0.003, 1},
	}
	for _, c := range cases {
		if got := QueueFactor(c.u, c.q, c.out, c.delay); math.Abs(got-c.w) > 1e-9 {
			t.Errorf("%s: QueueFactor = %v, want %v", c.name, got, c.w)
		}
	}
}
