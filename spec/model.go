package spec

import (
	"slices"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
)

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

// Present says whether the tenant is declared at time t of a run of the
// given duration (Join <= t < Leave, Leave 0 being the end).
func (t *Tenant) Present(at, duration time.Duration) bool {
	leave := time.Duration(t.Leave)
	if leave == 0 {
		leave = duration
	}
	return at >= time.Duration(t.Join) && at < leave
}

// ModelAt returns the model declared at time at of the run: Model without
// the tenants that have not joined yet or have left.
func (s *Scenario) ModelAt(at time.Duration) *model.Model {
	m := s.Model()
	keep := m.Tenants[:0]
	for i := range s.Tenants {
		if s.Tenants[i].Present(at, time.Duration(s.Duration)) {
			keep = append(keep, m.Tenants[i])
		}
	}
	m.Tenants = keep
	return m
}

// ModelChanges returns the times within the run, after its start, at which
// a tenant joins or leaves, sorted; nil when every tenant is declared for
// the whole run.
func (s *Scenario) ModelChanges() []time.Duration {
	var out []time.Duration
	for _, t := range s.Tenants {
		for _, d := range []Duration{t.Join, t.Leave} {
			if d > 0 && d < s.Duration {
				out = append(out, time.Duration(d))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
