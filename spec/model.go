package spec

import "github.com/bulkhead-dc/bulkhead/model"

// Model returns the model the scenario declares, what the system enforces:
// its tenants in order, each with its VMs in order (Host their server, In
// and Out their hose guarantees resolved by Tenant.Hose; no addresses or
// interfaces, which a scenario does not declare), and its appliances. The
// model is a copy: it shares nothing with the scenario.
func (s *Scenario) Model() *model.Model {
	m := &model.Model{Tenants: make([]model.Tenant, len(s.Tenants)), Appliances: s.Appliances}
	for i := range s.Tenants {
		t := &s.Tenants[i]
		mt := model.Tenant{Name: t.Name, BestEffort: t.BestEffort, Weight: t.Weight, SLA: t.SLA, VDC: t.VDC,
			VMs: make([]model.VM, len(t.VMs))}
		for j := range t.VMs {
			v := &t.VMs[j]
			in, out := t.Hose(v)
			mt.VMs[j] = model.VM{Name: v.Name, Tenant: t.Name, Host: v.Server, In: in, Out: out}
		}
		m.Tenants[i] = mt
	}
	return m.Clone()
}
