package agentd

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// setActions records what an enforcer of actions was given.
type setActions struct {
	calls int
	flows map[mech.FlowID][]float64
	def   float64
	bySrc map[string]float64
}

func (s *setActions) SetActions(flows map[mech.FlowID][]float64, def float64, bySrc map[string]float64) {
	s.calls++
	s.flows, s.def, s.bySrc = flows, def, bySrc
}

// TestSeedActions: an enforcer of the central controller's actions (the
// agent's pairs, the appliance front) made before any Actions message
// came — a restarted process — is given nothing, so that it leaves the
// limits in force rather than enforce a fresh process's empty
// allocations; once any came (a step's first part, or a step that
// allocates nothing), it is given the actions in force.
func TestSeedActions(t *testing.T) {
	a1a2 := &controlpb.FlowAllocation{Src: "a1", Dst: "a2", Rates: []float32{1000}}
	for _, c := range []struct {
		name string
		msgs []*controlpb.Actions
		want bool
	}{
		{"none received", nil, false},
		{"a step's first part", []*controlpb.Actions{{Seq: 1, DefaultRate: 50, Allocations: []*controlpb.FlowAllocation{a1a2}}}, true},
		{"a whole step", []*controlpb.Actions{{Seq: 1, Last: true, DefaultRate: 50, Allocations: []*controlpb.FlowAllocation{a1a2}}}, true},
		{"a step allocating nothing", []*controlpb.Actions{{Seq: 1, Last: true}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &Daemon{stepped: make(chan time.Duration, 1)}
			for _, m := range c.msgs {
				d.takeActions(m)
			}
			var got setActions
			if seeded := d.seedActions(&got); seeded != c.want || got.calls != map[bool]int{false: 0, true: 1}[c.want] {
				t.Fatalf("seeded %v (%d calls), want %v", seeded, got.calls, c.want)
			}
			if !c.want {
				return
			}
			al := d.Allocations()
			if !maps.EqualFunc(got.flows, al.Flows, slices.Equal) || got.def != al.DefaultRate || !maps.Equal(got.bySrc, al.DefaultBySrc) {
				t.Errorf("given %v (default %v, %v), want the actions in force %v (default %v, %v)", got.flows, got.def, got.bySrc, al.Flows, al.DefaultRate, al.DefaultBySrc)
			}
		})
	}
}
