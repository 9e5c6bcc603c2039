package qshare

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
)

// agent is QShare on one hypervisor: it hears from the controller which of
// its tenants hold dedicated queues and enforces the shared-queue policy on
// the others (§5.4's policy enforcer; the DSCP marking itself is the
// driver's, from mech.ControllerActions.DSCP) and, with dedicated: hose,
// the hose guarantees of the D-tenants' VM pairs inside their queues
// (protector).
type agent struct {
	p      Params
	local  []mech.VM
	tenant map[string]string // local and remote VM → tenant
	ded    map[string]bool   // tenants dedicated, as last heard
	capped map[string]bool   // local VM → capped now (absent: never set)
	// es runs ElasticSwitch on the pairs of shared-queue tenants (shared:
	// elasticswitch); gp runs it on the pairs of D-tenants (dedicated:
	// hose), for its guarantee partitioning only: its limits are dropped,
	// the protector's apply. Each sees only its tenants' pairs, so that a
	// tenant's rate allocation in the shared queue does not run on while
	// it is dedicated.
	es, gp *elasticswitch.Agent
	prot   *protector
	// esLimit is the last limit es set for each pair (it says a limit
	// only when it changes); set the limit each local-source pair was
	// last given (absent: none).
	esLimit, set map[mech.PairID]float64
	want         map[mech.PairID]float64 // scratch: the protector's limits
}

func newAgent(p Params, env mech.Env) (*agent, error) {
	a := &agent{p: p, tenant: map[string]string{}, ded: map[string]bool{}, capped: map[string]bool{},
		esLimit: map[mech.PairID]float64{}, set: map[mech.PairID]float64{}, want: map[mech.PairID]float64{}}
	for _, v := range env.VMs {
		a.tenant[v.Name] = v.Tenant
		if v.Host == env.Host {
			a.local = append(a.local, v)
		}
	}
	var err error
	if p.Shared == SharedElasticSwitch {
		if a.es, err = elasticswitch.NewAgent(p.ES, env); err != nil {
			return nil, err
		}
	}
	if p.Dedicated == DedicatedHose {
		if a.gp, err = elasticswitch.NewAgent(p.ES, env); err != nil {
			return nil, err
		}
		a.prot = newProtector(p, env)
	}
	return a, nil
}

// Period implements mech.Agent: the ElasticSwitch RA period when agents
// run it, else agent_period.
func (a *agent) Period() time.Duration {
	if a.p.runsES() {
		return a.p.ES.RA.Period
	}
	return a.p.AgentPeriod
}

// Step implements mech.Agent.
func (a *agent) Step(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	var rest []mech.Message
	for _, m := range inbox {
		if m.From == mech.ControllerHost {
			if b, ok := mech.DecodeBody[Binding](m.Body); ok {
				clear(a.ded)
				for _, t := range b.Dedicated {
					a.ded[t] = true
				}
				continue
			}
		}
		if c, ok := mech.DecodeBody[Contention](m.Body); ok {
			if a.prot != nil {
				a.prot.hear(c)
			}
			continue
		}
		rest = append(rest, m)
	}
	var act mech.Actions
	if a.p.Shared == SharedCap {
		act.Limits = a.caps()
	}
	if !a.p.runsES() {
		return act
	}
	if a.es != nil {
		esAct := a.es.Step(a.only(obs, false), rest)
		act.Messages = append(act.Messages, esAct.Messages...)
		for _, l := range esAct.Limits {
			if l.Kind == mech.PairLimit {
				a.esLimit[l.Pair] = l.Rate
				if math.IsInf(l.Rate, 1) {
					delete(a.esLimit, l.Pair) // forgotten
				}
			}
		}
	}
	clear(a.want)
	if a.gp != nil {
		ded := a.only(obs, true)
		act.Messages = append(act.Messages, a.gp.Step(ded, rest).Messages...)
		act.Messages = append(act.Messages, a.prot.step(ded, rest, a.dedicated, a.gp, a.tenantOf, a.want)...)
	}
	act.Limits = a.pairLimits(obs, act.Limits)
	return act
}

// only returns the observation restricted to the pairs of D-tenants
// (dedicated) or of shared-queue tenants.
func (a *agent) only(obs *mech.HostObs, dedicated bool) *mech.HostObs {
	sub := *obs
	sub.Egress, sub.Ingress = nil, nil
	for _, o := range obs.Egress {
		if a.ded[a.tenant[o.Pair.Src]] == dedicated {
			sub.Egress = append(sub.Egress, o)
		}
	}
	for _, o := range obs.Ingress {
		if a.ded[a.tenant[o.Pair.Dst]] == dedicated {
			sub.Ingress = append(sub.Ingress, o)
		}
	}
	return &sub
}

func (a *agent) dedicated(tenant string) bool { return a.ded[tenant] }
func (a *agent) tenantOf(vm string) string    { return a.tenant[vm] }

// caps caps the VMs of shared-queue tenants at their hose guarantees and
// lifts the caps of D-tenants (shared: cap).
func (a *agent) caps() []mech.Limit {
	var limits []mech.Limit
	for _, v := range a.local {
		if v.In <= 0 && v.Out <= 0 {
			continue // best effort: nothing to cap at
		}
		want := !a.ded[v.Tenant]
		if was, ok := a.capped[v.Name]; ok && was == want {
			continue
		}
		a.capped[v.Name] = want
		out, in := mech.Unlimited, mech.Unlimited
		if want {
			out, in = v.Out, v.In
		}
		limits = append(limits,
			mech.Limit{Kind: mech.VMEgress, VM: v.Name, Rate: out},
			mech.Limit{Kind: mech.VMIngress, VM: v.Name, Rate: in})
	}
	return limits
}

// pairLimits gives every local-source pair the limiter its tenant's state
// asks for: a D-tenant's pair none unless the protector caps it (a.want);
// a shared-queue tenant's pair ElasticSwitch's limit with shared:
// elasticswitch, none with shared: cap (its VMs are capped). A limit is
// said when it differs from the last one given, or when the observation
// shows a limiter where none should be or none where one should be.
func (a *agent) pairLimits(obs *mech.HostObs, limits []mech.Limit) []mech.Limit {
	desired := func(p mech.PairID) float64 {
		t := a.tenant[p.Src]
		switch {
		case a.ded[t]:
			if r, ok := a.want[p]; ok {
				return r
			}
		case a.p.Shared == SharedElasticSwitch:
			if r, ok := a.esLimit[p]; ok {
				return r
			}
		}
		return mech.Unlimited
	}
	observed := map[mech.PairID]float64{}
	var pairs []mech.PairID
	for _, o := range obs.Egress {
		observed[o.Pair] = o.Limit
		pairs = append(pairs, o.Pair)
	}
	for p := range a.set {
		pairs = append(pairs, p)
	}
	for p := range a.esLimit {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(x, y mech.PairID) int {
		return cmp.Or(cmp.Compare(x.Src, y.Src), cmp.Compare(x.Dst, y.Dst))
	})
	pairs = slices.Compact(pairs)
	for _, p := range pairs {
		if _, ok := a.tenant[p.Src]; !ok {
			continue
		}
		r := desired(p)
		old, ok := a.set[p]
		if !ok {
			old = mech.Unlimited
		}
		seen, ok := observed[p]
		lost := ok && math.IsInf(seen, 1) != math.IsInf(r, 1)
		if r == old && !lost {
			continue
		}
		limits = append(limits, mech.Limit{Kind: mech.PairLimit, Pair: p, Rate: r})
		if math.IsInf(r, 1) {
			delete(a.set, p)
		} else {
			a.set[p] = r
		}
	}
	return limits
}
