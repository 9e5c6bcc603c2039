package drx

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// vmState is what a host agent keeps per local VM.
type vmState struct {
	vm mech.VM
	// cap is the VM's cap from prices or steps (percent).
	cap float64
	// Resos allocated this epoch and left.
	alloc, left float64
	// last interval's measurements (bits/s)
	outRate, inRate, outDem, inDem float64
	// the rates measured while the VM was last uncapped: the base of its
	// limits when its demand is unbounded
	refOut, refIn float64
	// limits last given to the driver (NaN: none yet)
	setOut, setIn float64
	lastCap       float64
}

// Agent is a DRX host agent (HA): Resos accounting and charging for its
// VMs, caps from price changes (or cap steps), and in the local scope the
// detection of SLA violations and the local price changes. It is not safe
// for concurrent use.
type Agent struct {
	cfg    Config
	env    mech.Env
	rec    *Recorder
	vms    []*vmState // local VMs, sorted by name
	byName map[string]*vmState
	// tenants lists the VMEs with a VM here, sorted; local their VMs here.
	tenants []string
	local   map[string][]*vmState
	// prices known here (local prices, or the platform manager's)
	prices map[string]float64
	epoch  int
}

// NewAgent returns the host agent for env.Host under cfg (validated).
func NewAgent(cfg Config, env mech.Env, rec *Recorder) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if env.Host == "" {
		return nil, fmt.Errorf("%s: environment names no host", Name)
	}
	for t, s := range env.SLA {
		if !(s >= 0 && s < 1) {
			return nil, fmt.Errorf("%s: tenant %s: SLA %g is not a fraction in [0, 1)", Name, t, s)
		}
	}
	a := &Agent{cfg: cfg, env: env, rec: rec, byName: map[string]*vmState{}, local: map[string][]*vmState{},
		prices: map[string]float64{}}
	alloc := resosPerVM(cfg, env.VMs)
	for _, v := range env.VMs {
		if v.Host != env.Host {
			continue
		}
		s := &vmState{vm: v, cap: 100, alloc: alloc, left: alloc, setOut: math.NaN(), setIn: math.NaN(), lastCap: 100}
		a.vms = append(a.vms, s)
		a.byName[v.Name] = s
		if a.local[v.Tenant] == nil {
			a.tenants = append(a.tenants, v.Tenant)
		}
		a.local[v.Tenant] = append(a.local[v.Tenant], s)
	}
	sort.Slice(a.vms, func(i, j int) bool { return a.vms[i].vm.Name < a.vms[j].vm.Name })
	sort.Strings(a.tenants)
	return a, nil
}

// Period implements mech.Agent: the charging interval.
func (a *Agent) Period() time.Duration { return a.cfg.Interval }

// Price returns the price of a VME as this host knows it.
func (a *Agent) Price(tenant string) float64 {
	if p, ok := a.prices[tenant]; ok {
		return p
	}
	return a.cfg.BasePrice
}

// Cap returns a local VM's cap in force (percent) and whether it is here.
func (a *Agent) Cap(vm string) (float64, bool) {
	if v, ok := a.byName[vm]; ok {
		return v.cap, true
	}
	return 0, false
}

// ResosLeft returns a local VM's Resos left this epoch and whether it is
// here.
func (a *Agent) ResosLeft(vm string) (float64, bool) {
	if v, ok := a.byName[vm]; ok {
		return v.left, true
	}
	return 0, false
}

// epochLeft is EL_h: the percentage of the current epoch left at now.
func (a *Agent) epochLeft(now time.Duration) float64 {
	e := a.cfg.Epoch
	end := (now/e + 1) * e
	return 100 * float64(end-now) / float64(e)
}

// Step implements mech.Agent.
func (a *Agent) Step(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	now := obs.Now
	sec := obs.Period.Seconds()
	for _, o := range obs.VMs {
		v, ok := a.byName[o.VM]
		if !ok {
			continue
		}
		v.outRate, v.inRate, v.outDem, v.inDem = o.OutRate, o.InRate, o.OutDemand, o.InDemand
		if v.cap >= 100 {
			// Uncapped over the interval: the base of future limits when
			// the demand is unbounded.
			if o.OutRate > 0 {
				v.refOut = o.OutRate
			}
			if o.InRate > 0 {
				v.refIn = o.InRate
			}
		}
		// Charge the interval's I/O at the VME's price.
		if sec > 0 && v.alloc > 0 {
			mtus := (o.OutRate + o.InRate) * sec / 8 / MTU
			v.left -= mtus * a.Price(v.vm.Tenant)
			// Spent out: β_C = EL/RL is infinite, the VM's next price
			// change sends its cap to the floor.
			v.left = math.Max(v.left, 0)
		}
	}
	if ep := int(now / a.cfg.Epoch); ep != a.epoch {
		// A new epoch (after charging the interval that closed the last
		// one): every VM gets its new allocation; prices and caps stay.
		a.epoch = ep
		for _, v := range a.vms {
			v.left = v.alloc
		}
	}
	el := a.epochLeft(now)
	for _, m := range inbox {
		u, ok := Decode(m.Body)
		if !ok {
			continue
		}
		for _, c := range u.Changes {
			a.apply(now, c, el)
		}
	}
	if a.cfg.Scope == ScopeLocal {
		a.watch(now, el)
	}
	return mech.Actions{Limits: a.limits(now)}
}

// apply turns one VME's price change or cap step into new caps for its
// VMs here.
func (a *Agent) apply(now time.Duration, c Change, el float64) {
	vms := a.local[c.Tenant]
	if c.CapStep > 0 {
		for _, v := range vms {
			v.cap = StepCap(v.cap, c.CapStep, 1, a.cfg.MinCap)
		}
		return
	}
	if !(c.OldPrice > 0) || !(c.NewPrice > 0) {
		return
	}
	a.prices[c.Tenant] = c.NewPrice
	for _, v := range vms {
		rl := 100.0
		if v.alloc > 0 {
			rl = 100 * v.left / v.alloc
		}
		v.cap = NewCap(v.cap, c.OldPrice, c.NewPrice, CapBeta(el, rl), a.cfg.MinCap)
	}
}

// ioRate is a set of VMs' I/O (sent + received, bits/s).
func ioRate(vms []*vmState) float64 {
	s := 0.0
	for _, v := range vms {
		s += v.outRate + v.inRate
	}
	return s
}

// degradation is a set of VMs' performance degradation: 1 − their I/O over
// what they demand, counting VMs whose demands are known and bounded; ok
// is false when none had demand.
func degradation(rate, dem float64) (float64, bool) {
	if !(dem > 0) || math.IsInf(dem, 0) {
		return 0, false
	}
	return math.Max(0, 1-rate/dem), true
}

// watch is the local scope: the agent checks the SLA of its local VMs and,
// on a violation, raises the prices (or steps the caps) of the VMEs with a
// VM on this host, for their VMs on this host only.
func (a *Agent) watch(now time.Duration, el float64) {
	for _, x := range a.tenants {
		sla, ok := a.env.SLA[x]
		if !ok {
			continue
		}
		rate, dem := 0.0, 0.0
		for _, v := range a.local[x] {
			if math.IsInf(v.outDem, 0) || math.IsInf(v.inDem, 0) {
				continue
			}
			rate += v.outRate + v.inRate
			dem += v.outDem + v.inDem
		}
		pd, ok := degradation(rate, dem)
		if !ok {
			continue
		}
		a.rec.add(Event{T: now, Kind: EventDegradation, Host: a.env.Host, Tenant: x, Value: pd})
		if pd <= sla {
			continue
		}
		set := dccr(x, map[string]bool{a.env.Host: true}, a.env.VMs)
		io := make([]float64, len(set))
		for i, t := range set {
			io[i] = ioRate(a.local[t])
		}
		beta := Blame(a.cfg.Policy, io)
		for i, t := range set {
			if a.cfg.Priced() {
				op := a.Price(t)
				np := NewPrice(op, pd, beta[i], a.cfg.Alpha)
				a.rec.add(Event{T: now, Kind: EventPrice, Host: a.env.Host, Tenant: t, Value: np})
				a.apply(now, Change{Tenant: t, OldPrice: op, NewPrice: np}, el)
				continue
			}
			share := 1.0
			if a.cfg.Policy == PolicyPC {
				share = beta[i]
			}
			if step := a.cfg.CapStep * share; step > 0 {
				a.apply(now, Change{Tenant: t, CapStep: step}, el)
			}
		}
	}
}

// limits returns the limiter settings for the caps in force: a cap of c%
// limits the VM to c% of what its applications demand (or, for unbounded
// demand, of the rate it had when last uncapped).
func (a *Agent) limits(now time.Duration) []mech.Limit {
	var out []mech.Limit
	for _, v := range a.vms {
		c := v.cap
		if c != v.lastCap {
			a.rec.add(Event{T: now, Kind: EventCap, Host: a.env.Host, Tenant: v.vm.Tenant, VM: v.vm.Name, Value: c})
			v.lastCap = c
		}
		if l, ok := limitFor(c, v.outDem, v.refOut, v.setOut); ok {
			v.setOut = l
			out = append(out, mech.Limit{Kind: mech.VMEgress, VM: v.vm.Name, Rate: l})
		}
		if a.cfg.CapIngress {
			if l, ok := limitFor(c, v.inDem, v.refIn, v.setIn); ok {
				v.setIn = l
				out = append(out, mech.Limit{Kind: mech.VMIngress, VM: v.vm.Name, Rate: l})
			}
		}
	}
	return out
}

// limitFor is the limiter rate for cap c (percent) over demand dem (or ref
// when dem is unbounded), and whether it differs from set.
func limitFor(c, dem, ref, set float64) (float64, bool) {
	l := mech.Unlimited
	if c < 100 {
		base := dem
		if math.IsInf(base, 0) || !(base > 0) {
			base = ref
		}
		if !(base > 0) {
			// Idle and never measured: nothing to scale; keep what is set.
			return set, false
		}
		l = c / 100 * base
	}
	switch {
	case math.IsNaN(set):
		return l, !math.IsInf(l, 1)
	case math.IsInf(l, 1) || math.IsInf(set, 1):
		return l, l != set
	default:
		return l, math.Abs(l-set) > 1e-3*set
	}
}
