package qshare

import (
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
)

// agent is QShare on one hypervisor: it hears from the controller which of
// its tenants hold dedicated queues and enforces the shared-queue policy on
// the others (§5.4's policy enforcer; the DSCP marking itself is the
// driver's, from mech.ControllerActions.DSCP).
type agent struct {
	p      Params
	local  []mech.VM
	tenant map[string]string // local and remote VM → tenant
	ded    map[string]bool   // tenants dedicated, as last heard
	capped map[string]bool   // local VM → capped now (absent: never set)
	es     *elasticswitch.Agent
}

func newAgent(p Params, env mech.Env) (*agent, error) {
	a := &agent{p: p, tenant: map[string]string{}, ded: map[string]bool{}, capped: map[string]bool{}}
	for _, v := range env.VMs {
		a.tenant[v.Name] = v.Tenant
		if v.Host == env.Host {
			a.local = append(a.local, v)
		}
	}
	if p.Shared == SharedElasticSwitch {
		es, err := elasticswitch.NewAgent(p.ES, env)
		if err != nil {
			return nil, err
		}
		a.es = es
	}
	return a, nil
}

// Period implements mech.Agent.
func (a *agent) Period() time.Duration {
	if a.es != nil {
		return a.es.Period()
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
		rest = append(rest, m)
	}
	if a.es != nil {
		return a.stepES(obs, rest)
	}
	var act mech.Actions
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
		act.Limits = append(act.Limits,
			mech.Limit{Kind: mech.VMEgress, VM: v.Name, Rate: out},
			mech.Limit{Kind: mech.VMIngress, VM: v.Name, Rate: in})
	}
	return act
}

// stepES runs ElasticSwitch on the shared-queue tenants' pairs only and
// lifts the limiters of the dedicated tenants' pairs.
func (a *agent) stepES(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	sub := *obs
	sub.Egress, sub.Ingress = nil, nil
	var lift []mech.Limit
	for _, o := range obs.Egress {
		if a.ded[a.tenant[o.Pair.Src]] {
			if !math.IsInf(o.Limit, 1) {
				lift = append(lift, mech.Limit{Kind: mech.PairLimit, Pair: o.Pair, Rate: mech.Unlimited})
			}
			continue
		}
		sub.Egress = append(sub.Egress, o)
	}
	for _, o := range obs.Ingress {
		if !a.ded[a.tenant[o.Pair.Dst]] {
			sub.Ingress = append(sub.Ingress, o)
		}
	}
	act := a.es.Step(&sub, inbox)
	kept := act.Limits[:0]
	for _, l := range act.Limits {
		if l.Kind == mech.PairLimit && a.ded[a.tenant[l.Pair.Src]] {
			continue
		}
		kept = append(kept, l)
	}
	act.Limits = append(kept, lift...)
	return act
}
