// Package static is the Oktopus-like reservation baseline: at admission time
// every declared VM pair gets a fixed rate equal to its hose-model guarantee
// for the declared traffic pattern (the max-min partition of each VM's hose
// among the pairs it will use, demands unknown hence unbounded), enforced by
// a per-pair limiter at the source. It protects guarantees but is not
// work-conserving: a pair never sends faster than its reservation, whatever
// is idle.
package static

import (
	"fmt"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/hose"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// Name of the mechanism.
const Name = "static"

// Mechanism is the static reservation baseline.
type Mechanism struct{}

// New returns the mechanism; it takes no parameters.
func New() Mechanism { return Mechanism{} }

// Name implements mech.Mechanism.
func (Mechanism) Name() string { return Name }

// NewAgent computes the reservations of the pairs that start on env.Host.
func (Mechanism) NewAgent(env mech.Env) (mech.Agent, error) {
	rates, err := Reservations(env)
	if err != nil {
		return nil, err
	}
	a := &agent{reserved: map[mech.PairID]bool{}}
	for p, r := range rates {
		if env.HostOf(p.Src) != env.Host {
			continue
		}
		a.reserved[p] = true
		a.pending = append(a.pending, mech.Limit{Kind: mech.PairLimit, Pair: p, Rate: r})
	}
	sort.Slice(a.pending, func(i, j int) bool {
		pi, pj := a.pending[i].Pair, a.pending[j].Pair
		return pi.Src < pj.Src || pi.Src == pj.Src && pi.Dst < pj.Dst
	})
	return a, nil
}

// Reservations returns the fixed rate of every pair in env.Pattern: per
// tenant, the hose-model max-min of unbounded demands over the pattern.
func Reservations(env mech.Env) (map[mech.PairID]float64, error) {
	byTenant := map[string][]mech.PairID{}
	for _, p := range env.Pattern {
		src, ok := env.VM(p.Src)
		if !ok {
			return nil, fmt.Errorf("static: pattern pair %s->%s: unknown VM %q", p.Src, p.Dst, p.Src)
		}
		dst, ok := env.VM(p.Dst)
		if !ok {
			return nil, fmt.Errorf("static: pattern pair %s->%s: unknown VM %q", p.Src, p.Dst, p.Dst)
		}
		if src.Tenant != dst.Tenant {
			return nil, fmt.Errorf("static: pattern pair %s->%s crosses tenants %q and %q", p.Src, p.Dst, src.Tenant, dst.Tenant)
		}
		byTenant[src.Tenant] = append(byTenant[src.Tenant], p)
	}
	out := make(map[mech.PairID]float64, len(env.Pattern))
	tenants := make([]string, 0, len(byTenant))
	for t := range byTenant {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	for _, t := range tenants {
		var vms []hose.VM
		for _, v := range env.VMs {
			if v.Tenant == t {
				vms = append(vms, hose.VM{Name: v.Name, In: v.In, Out: v.Out})
			}
		}
		pairs := make([]hose.Pair, len(byTenant[t]))
		for i, p := range byTenant[t] {
			pairs[i] = hose.Pair{Src: p.Src, Dst: p.Dst, Demand: mech.Unlimited}
		}
		g, err := hose.Guarantees(vms, pairs)
		if err != nil {
			return nil, fmt.Errorf("static: tenant %q: %w", t, err)
		}
		for i, p := range byTenant[t] {
			out[p] = g[i]
		}
	}
	return out, nil
}

type agent struct {
	reserved map[mech.PairID]bool
	pending  []mech.Limit
}

// Period: the reservation is set once; later steps only close pairs that
// were never reserved.
func (a *agent) Period() time.Duration { return 100 * time.Millisecond }

// Step sets the reservations on the first call and caps at zero any pair
// that sends without a reservation (admission reserved nothing for it).
func (a *agent) Step(obs *mech.HostObs, _ []mech.Message) mech.Actions {
	act := mech.Actions{Limits: a.pending}
	a.pending = nil
	for _, p := range obs.Egress {
		if !a.reserved[p.Pair] {
			a.reserved[p.Pair] = true
			act.Limits = append(act.Limits, mech.Limit{Kind: mech.PairLimit, Pair: p.Pair, Rate: 0})
		}
	}
	return act
}
