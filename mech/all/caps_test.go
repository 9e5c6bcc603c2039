package all_test

import (
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
)

// Every mechanism's declared capabilities agree with the interfaces it
// implements, so that drivers can trust them: Central with mech.Central,
// LiveTenants with its agents being mech.EnvUpdater, Losses with
// mech.LossAdapter (a driver must be able to tell it where losses are seen).
func TestCapabilitiesMatchInterfaces(t *testing.T) {
	env := mech.Env{Host: "h1", VMs: []mech.VM{
		{Name: "a1", Tenant: "A", Host: "h1", In: 1e8, Out: 1e8},
		{Name: "a2", Tenant: "A", Host: "h2", In: 1e8, Out: 1e8},
	}, Pattern: []mech.PairID{{Src: "a1", Dst: "a2"}}}
	for _, name := range all.Names() {
		m, err := all.New(name, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := m.Capabilities()
		if _, ok := m.(mech.Central); ok != c.Central {
			t.Errorf("%s: Capabilities.Central %v, implements mech.Central %v", name, c.Central, ok)
		}
		if _, ok := m.(mech.LossAdapter); c.Losses && !ok {
			t.Errorf("%s: reads losses but is no mech.LossAdapter", name)
		}
		a, err := m.NewAgent(env)
		if err != nil {
			t.Fatalf("%s: NewAgent: %v", name, err)
		}
		if _, ok := a.(mech.EnvUpdater); ok != c.LiveTenants {
			t.Errorf("%s: Capabilities.LiveTenants %v, agent implements mech.EnvUpdater %v", name, c.LiveTenants, ok)
		}
	}
}
