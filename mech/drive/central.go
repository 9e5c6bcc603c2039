package drive

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// How a central controller's allocations are enforced on VM pairs: the
// rules the simulator's engine and host agents share.

// PairAllocLimit is the pair limit, bits/s, that enforces a VM pair's
// allocation (tokens/s per element of its path, tokens being bytes):
// the flow's multi-resource bucket admits what its scarcest element
// allows.
func PairAllocLimit(rates []float64) float64 {
	r := math.Inf(1)
	for _, x := range rates {
		r = math.Min(r, x*8)
	}
	return r
}

// DefaultFor is the rate, tokens/s on every element of its path, of a flow
// the controller never allocated: its source VM's default rate if the
// controller gave one, else the controller's default (0: none).
func DefaultFor(src string, def float64, bySrc map[string]float64) float64 {
	if r, ok := bySrc[src]; ok {
		return r
	}
	return def
}

// HeldBacklog is the backlog, in the flow's tokens, that a bulk sender held
// back by its enforcer for a period reports: a full send buffer, one
// period's worth of what it sent (Pulsar §4.2: the demand is utilization
// plus backlog, so a flow held at its allocation asks for more).
func HeldBacklog(used float64, period time.Duration) float64 {
	return used * period.Seconds()
}

// CentralPeriod is how often a host enforcing a central controller's
// allocations looks for new ones and measures its pairs: a tenth of
// Pulsar's one-second control interval.
const CentralPeriod = 100 * time.Millisecond

// CentralPairs makes a central mechanism's host agents enforce the
// controller's allocations for their VM pairs as pair limits — what the
// simulator's engine does with a controller's actions, for drivers that
// receive the actions from elsewhere (a host agent under a bulkhead
// controller). Allocations for flows to appliances are not pair limits:
// a request-aware enforcer in front of the appliance applies them.
type CentralPairs struct {
	mech.Mechanism

	mu    sync.Mutex
	flows map[mech.FlowID][]float64
	def   float64
	bySrc map[string]float64
	// given: SetActions was called. Until then the agents set no pair
	// limit of their own: an agent that took over a host keeps the limits
	// it found (its predecessor's, enforcing the controller's last
	// allocations) until this one's controller speaks, rather than
	// lifting them.
	given bool
}

// NewCentralPairs wraps a mechanism with a central controller (Pulsar).
func NewCentralPairs(m mech.Mechanism) *CentralPairs {
	return &CentralPairs{Mechanism: m}
}

// SetActions hands over the controller's latest allocations (tokens/s per
// path element; one value: the same on every element) and default rates.
// Safe to call while agents step.
func (c *CentralPairs) SetActions(flows map[mech.FlowID][]float64, def float64, bySrc map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flows, c.def, c.bySrc = maps.Clone(flows), def, maps.Clone(bySrc)
	c.given = true
}

// NewAgent implements mech.Mechanism: the mechanism's own agent, wrapped.
func (c *CentralPairs) NewAgent(env mech.Env) (mech.Agent, error) {
	in, err := c.Mechanism.NewAgent(env)
	if err != nil {
		return nil, err
	}
	a := &centralAgent{c: c, inner: in, set: map[mech.PairID]float64{}}
	a.setEnv(env)
	return a, nil
}

// centralAgent is one host's agent: the mechanism's, plus the pair limits
// of the controller's allocations.
type centralAgent struct {
	c     *CentralPairs
	inner mech.Agent
	local map[string]bool // the host's VMs
	vms   map[string]bool // every VM
	set   map[mech.PairID]float64
}

func (a *centralAgent) setEnv(env mech.Env) {
	a.local, a.vms = map[string]bool{}, map[string]bool{}
	for _, v := range env.VMs {
		a.vms[v.Name] = true
		if v.Host == env.Host {
			a.local[v.Name] = true
		}
	}
}

// Period is the wrapped agent's period, at most CentralPeriod.
func (a *centralAgent) Period() time.Duration {
	return min(a.inner.Period(), CentralPeriod)
}

// Step steps the mechanism's agent and adds a limit for every pair of the
// host's VMs whose enforced rate changed: its allocation, or, for a pair
// the controller never allocated, its source's default rate (none: no
// limit). Before the first SetActions it adds none: the pairs keep the
// limits in force.
func (a *centralAgent) Step(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	act := a.inner.Step(obs, inbox)
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	if !a.c.given {
		return act
	}
	want := map[mech.PairID]float64{}
	for f, r := range a.c.flows {
		if a.local[f.Src] && a.vms[f.Dst] && len(r) > 0 {
			want[mech.PairID(f)] = PairAllocLimit(r)
		}
	}
	// Pairs never allocated that the host has seen or limited.
	others := func(p mech.PairID) {
		if _, ok := want[p]; ok || !a.local[p.Src] {
			return
		}
		if d := DefaultFor(p.Src, a.c.def, a.c.bySrc); d > 0 {
			want[p] = d * 8
		} else {
			want[p] = mech.Unlimited
		}
	}
	if obs != nil {
		for _, p := range obs.Egress {
			others(p.Pair)
		}
	}
	for p := range a.set {
		others(p)
	}
	for _, p := range slices.SortedFunc(maps.Keys(want), comparePairs) {
		r := want[p]
		if old, ok := a.set[p]; ok && old == r {
			continue
		}
		a.set[p] = r
		act.Limits = append(act.Limits, mech.Limit{Kind: mech.PairLimit, Pair: p, Rate: r})
	}
	for p, r := range a.set {
		if _, ok := want[p]; !ok && r == mech.Unlimited {
			delete(a.set, p)
		}
	}
	return act
}

func comparePairs(a, b mech.PairID) int {
	return cmp.Or(strings.Compare(a.Src, b.Src), strings.Compare(a.Dst, b.Dst))
}

// Failsafe keeps the limits in force: the controller's last allocations
// hold every tenant's guarantee (Pulsar allocates guarantees first), and
// nobody recomputes them while the agent is away.
func (a *centralAgent) Failsafe() mech.Actions {
	if fs, ok := a.inner.(mech.Failsafe); ok {
		return fs.Failsafe()
	}
	return mech.Actions{}
}

// UpdateEnv implements mech.EnvUpdater: the host's VMs change, and the
// wrapped agent takes the environment if it can.
func (a *centralAgent) UpdateEnv(env mech.Env) error {
	if u, ok := a.inner.(mech.EnvUpdater); ok {
		if err := u.UpdateEnv(env); err != nil {
			return err
		}
	}
	a.setEnv(env)
	for p := range a.set {
		if !a.local[p.Src] || !a.vms[p.Dst] {
			delete(a.set, p)
		}
	}
	return nil
}
