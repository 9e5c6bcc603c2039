package gatekeeper

import (
	"fmt"
	"math"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// Capabilities implements mech.Mechanism: per-VM egress and ingress
// schedulers with VM limits, tenants changed at runtime; the schedulers
// serve LIM_IN, so guarantees must fit in the link less the headroom (the
// paper's "rate limit" baseline has no schedulers and no headroom).
func (m *Mechanism) Capabilities() mech.Capabilities {
	c := mech.Capabilities{Schedulers: true, LiveTenants: true}
	if m.cfg.Mode != ModeRateLimit {
		c.Headroom = m.cfg.Headroom
	}
	return c
}

// UpdateEnv implements mech.EnvUpdater: VMs new on the host start with no
// limit, VMs that left are forgotten (the driver removes their limits),
// and the next step installs the schedulers again with the new
// guarantees as weights (in rate-limit mode, the VMs' limits).
func (a *Agent) UpdateEnv(env mech.Env) error {
	if env.Host != a.env.Host {
		return fmt.Errorf("%s: update for host %q given to the agent on %s", Name, env.Host, a.env.Host)
	}
	// Whether this host's VMs or their guarantees change (before the
	// states are updated).
	same, n := true, 0
	for _, v := range env.VMs {
		if v.Host != env.Host {
			continue
		}
		if n >= len(a.vms) || a.vms[n].vm != v {
			same = false
		}
		n++
	}
	same = same && n == len(a.vms)
	w := int(a.cfg.Window / a.cfg.Period)
	vms := make([]*vmState, 0, len(a.vms))
	byName := map[string]*vmState{}
	for _, v := range env.VMs {
		if v.Host != env.Host {
			continue
		}
		s := a.byName[v.Name]
		if s == nil {
			s = &vmState{drops: make([]float64, w), secs: make([]float64, w), lim: math.Inf(1), set: math.NaN()}
		}
		s.vm = v
		vms = append(vms, s)
		byName[v.Name] = s
	}
	// env.VMs is sorted by name, so vms is too. The schedulers (or the
	// rate-limit baseline's limits) are installed again only when this
	// host's VMs or their guarantees changed: reinstalling resets them.
	a.env, a.vms, a.byName = env, vms, byName
	a.hosts = hostsOf(env)
	for h := range a.peers {
		if !a.hosts[h] {
			delete(a.peers, h)
		}
	}
	for h := range a.beat {
		if !a.hosts[h] {
			delete(a.beat, h)
		}
	}
	if !same {
		a.installed, a.updated = false, true
	}
	return nil
}
