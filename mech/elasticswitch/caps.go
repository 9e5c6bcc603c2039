package elasticswitch

import (
	"fmt"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch/ra"
)

// Capabilities implements mech.Mechanism: per-pair limiters at sources,
// per-pair losses, tenants changed at runtime.
func (m *Mechanism) Capabilities() mech.Capabilities {
	return mech.Capabilities{PairLimits: true, Losses: true, LiveTenants: true}
}

// ConcurrentAgents implements mech.Concurrent: agents share only the
// read-only environment, and every message body is built anew.
func (m *Mechanism) ConcurrentAgents() bool { return true }

// ForLosses implements mech.LossAdapter (see ra.ForLosses).
func (m *Mechanism) ForLosses(side mech.LossSide) (mech.Mechanism, error) {
	c := *m
	if err := ra.ForLosses(&c.cfg.RA, c.congestionSet, side); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &c, nil
}

// UpdateEnv implements mech.EnvUpdater: the new VMs and guarantees take
// effect at the next step (a changed hose is partitioned at the next GP);
// pairs whose source or destination left this host or the environment are
// forgotten (the driver removes their limiters), as are remote guarantees
// heard for them.
func (a *Agent) UpdateEnv(env mech.Env) error {
	if env.Host != a.env.Host {
		return fmt.Errorf("%s: update for host %q given to the agent on %s", Name, env.Host, a.env.Host)
	}
	a.env = env
	a.forgetHints()
	a.setLocal()
	a.outList = prune(a.outList, func(p *outPair) bool {
		if _, here := a.local[p.id.Src]; here && env.HostOf(p.id.Dst) != "" {
			return false
		}
		delete(a.out, p.id)
		return true
	})
	a.inList = prune(a.inList, func(p *inPair) bool {
		if _, here := a.local[p.id.Dst]; here && env.HostOf(p.id.Src) != "" {
			return false
		}
		delete(a.in, p.id)
		return true
	})
	for _, p := range a.outList {
		a.annotate(&p.end)
	}
	for _, p := range a.inList {
		a.annotate(&p.end)
	}
	return nil
}
