package pulsar

import (
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// synthApp is a synthetic appliance for capacity-estimation tests: a FIFO
// that serves capacity tokens/s and never drops, fed by open-loop flows
// (one per tenant) through token-bucket enforcers at their allocated rates.
// It is stepped in 10 ms sub-steps over each 1 s interval.
type synthApp struct {
	capacity float64
	flows    []*synthFlow
	fifo     []chunk
	defRate  float64
}

type synthFlow struct {
	id      mech.FlowID
	tenant  string
	arrival float64 // tokens/s
	alloc   []float64
	enq     float64 // queued at the enforcer
	inFifo  float64 // outstanding at the appliance
}

type chunk struct {
	f   int
	amt float64
}

// run simulates one interval and returns the controller's observations.
func (s *synthApp) run(now time.Duration) *mech.ControllerObs {
	const dt, steps = 0.01, 100
	n := len(s.flows)
	served := make([]float64, n)
	qAvg := make([]float64, n)
	oAvg := make([]float64, n)
	for k := 0; k < steps; k++ {
		for i, f := range s.flows {
			f.enq = min(f.enq+f.arrival*dt, 2*f.arrival)
			rate := s.defRate
			if f.alloc != nil {
				rate = f.alloc[0]
			}
			rel := min(f.enq, rate*dt)
			f.enq -= rel
			if rel > 0 {
				s.fifo = append(s.fifo, chunk{i, rel})
				f.inFifo += rel
			}
		}
		budget := s.capacity * dt
		for budget > 1e-12 && len(s.fifo) > 0 {
			c := &s.fifo[0]
			take := min(budget, c.amt)
			c.amt -= take
			budget -= take
			served[c.f] += take
			s.flows[c.f].inFifo -= take
			if c.amt <= 1e-12 {
				s.flows[c.f].inFifo = max(0, s.flows[c.f].inFifo)
				s.fifo = s.fifo[1:]
			}
		}
		for i, f := range s.flows {
			qAvg[i] += f.enq / steps
			oAvg[i] += f.inFifo / steps
		}
	}
	obs := &mech.ControllerObs{Now: now, Period: time.Second}
	for i, f := range s.flows {
		fo := mech.FlowObs{
			Flow: f.id, Tenant: f.tenant,
			Path:        []mech.PathElem{{Resource: 0, Role: mech.Appliance}},
			Used:        []float64{served[i]},
			Backlog:     []float64{f.enq},
			Queued:      []float64{qAvg[i]},
			Outstanding: []float64{oAvg[i]},
		}
		if f.alloc != nil {
			fo.Allocation = []float64{f.alloc[0]}
		}
		obs.Flows = append(obs.Flows, fo)
	}
	return obs
}

// apply installs the controller's allocations.
func (s *synthApp) apply(act mech.ControllerActions) {
	for _, a := range act.Allocations {
		for _, f := range s.flows {
			if f.id == a.Flow {
				f.alloc = []float64{a.Rates[0]}
				if math.IsInf(a.Rates[0], 1) {
					f.alloc[0] = math.MaxFloat64
				}
			}
		}
	}
}

// synthEnv is the controller's view of a synthetic appliance "kv" with an
// initial window [5000, 10000] and tenants A (guarantee 1000, aggressive)
// and B (guarantee 3500, demand 3500).
func synthEnv() (mech.ControllerEnv, *synthApp) {
	env := mech.ControllerEnv{
		Resources: []mech.ResourceInfo{{ID: "kv", Kind: mech.ApplianceResource, CapacityMin: 5000, CapacityMax: 10000}},
		VMs: []mech.VM{
			{Name: "a1", Tenant: "A", Host: "h1", In: 1e9, Out: 1e9},
			{Name: "b1", Tenant: "B", Host: "h2", In: 1e9, Out: 1e9},
			{Name: "c1", Tenant: "C", Host: "h3", In: 1e9, Out: 1e9},
		},
		VDCs: []mech.VDC{
			{Tenant: "A", Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 1000}}},
			{Tenant: "B", Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 3500}}},
			{Tenant: "C", Appliances: []mech.ApplianceGuarantee{{Appliance: "kv", Min: 400}}},
		},
	}
	app := &synthApp{capacity: 6500, defRate: 100, flows: []*synthFlow{
		{id: mech.FlowID{Src: "a1", Dst: "kv"}, tenant: "A", arrival: 8000, alloc: []float64{1500}},
		{id: mech.FlowID{Src: "b1", Dst: "kv"}, tenant: "B", arrival: 3500, alloc: []float64{3500}},
	}}
	return env, app
}
