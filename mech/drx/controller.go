package drx

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// Controller is DRX's platform manager (PM) with the ensemble managers'
// view (§III): every interval it measures each SLA VME's degradation from
// its VMs' I/O and demands, and on a violation raises the prices (or steps
// the caps) of the DCCR set's VMEs cluster-wide — the set being the other
// VMEs with a VM on a host of a degraded VM — and sends the changes to
// every host agent with a VM of those VMEs. It is not safe for concurrent
// use.
type Controller struct {
	cfg Config
	rec *Recorder
	vms []mech.VM
	vm  map[string]mech.VM
	// tenants in order; sla of those with one; hosts of each tenant's VMs
	tenants []string
	sla     map[string]float64
	hosts   map[string][]string
	prices  map[string]float64
	// hold marks SLA VMEs acted upon in the previous interval: the
	// measurements of this interval predate the host agents applying the
	// change (delivered at their next step), so the PM waits for one that
	// reflects it.
	hold map[string]bool
}

// NewController returns the platform manager for env under cfg.
func NewController(cfg Config, env mech.ControllerEnv, rec *Recorder) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &Controller{cfg: cfg, rec: rec, vms: env.VMs, vm: map[string]mech.VM{}, sla: map[string]float64{},
		hosts: map[string][]string{}, prices: map[string]float64{}, hold: map[string]bool{}}
	seen := map[string]map[string]bool{}
	for _, v := range env.VMs {
		c.vm[v.Name] = v
		if seen[v.Tenant] == nil {
			seen[v.Tenant] = map[string]bool{}
			c.tenants = append(c.tenants, v.Tenant)
		}
		if !seen[v.Tenant][v.Host] {
			seen[v.Tenant][v.Host] = true
			c.hosts[v.Tenant] = append(c.hosts[v.Tenant], v.Host)
		}
	}
	sort.Strings(c.tenants)
	for _, h := range c.hosts {
		sort.Strings(h)
	}
	for _, d := range env.VDCs {
		if !(d.SLA >= 0 && d.SLA < 1) {
			return nil, fmt.Errorf("%s: tenant %s: SLA %g is not a fraction in [0, 1)", Name, d.Tenant, d.SLA)
		}
		if d.SLA > 0 {
			c.sla[d.Tenant] = d.SLA
		}
	}
	return c, nil
}

// Period implements mech.Controller: the control interval.
func (c *Controller) Period() time.Duration { return c.cfg.Interval }

// Price returns a VME's current cluster-wide price.
func (c *Controller) Price(tenant string) float64 {
	if p, ok := c.prices[tenant]; ok {
		return p
	}
	return c.cfg.BasePrice
}

// Step implements mech.Controller.
func (c *Controller) Step(obs *mech.ControllerObs) mech.ControllerActions {
	io := map[string]float64{}
	byVM := map[string]*mech.VMObs{}
	for i := range obs.VMs {
		o := &obs.VMs[i]
		v, ok := c.vm[o.VM]
		if !ok {
			continue
		}
		byVM[o.VM] = o
		io[v.Tenant] += o.OutRate + o.InRate
	}
	type change struct {
		old, new, step float64
		set            bool
	}
	changes := map[string]*change{}
	for _, x := range c.tenants {
		sla, ok := c.sla[x]
		if !ok {
			continue
		}
		rate, dem := 0.0, 0.0
		hosts := map[string]bool{}
		var active []string
		for _, v := range c.vms {
			o := byVM[v.Name]
			if v.Tenant != x || o == nil || math.IsInf(o.OutDemand, 0) || math.IsInf(o.InDemand, 0) {
				continue
			}
			r, d := o.OutRate+o.InRate, o.OutDemand+o.InDemand
			if !(d > 0) {
				continue
			}
			rate += r
			dem += d
			active = append(active, v.Host)
			if pd, _ := degradation(r, d); pd > sla {
				hosts[v.Host] = true
			}
		}
		pd, ok := degradation(rate, dem)
		if !ok {
			continue
		}
		c.rec.add(Event{T: obs.Now, Kind: EventDegradation, Tenant: x, Value: pd})
		if c.hold[x] {
			c.hold[x] = false
			continue
		}
		if pd <= sla {
			continue
		}
		if len(hosts) == 0 {
			// The VME misses its SLA though no VM alone does: blame the
			// hosts of all its active VMs.
			for _, h := range active {
				hosts[h] = true
			}
		}
		set := dccr(x, hosts, c.vms)
		if len(set) == 0 {
			continue
		}
		ios := make([]float64, len(set))
		for i, t := range set {
			ios[i] = io[t]
		}
		beta := Blame(c.cfg.Policy, ios)
		for i, t := range set {
			ch := changes[t]
			if ch == nil {
				ch = &change{old: c.Price(t)}
				changes[t] = ch
			}
			if c.cfg.Priced() {
				np := NewPrice(c.Price(t), pd, beta[i], c.cfg.Alpha)
				c.prices[t] = np
				ch.new, ch.set = np, true
				c.rec.add(Event{T: obs.Now, Kind: EventPrice, Tenant: t, Value: np})
				continue
			}
			share := 1.0
			if c.cfg.Policy == PolicyPC {
				share = beta[i]
			}
			ch.step += c.cfg.CapStep * share
			ch.set = ch.step > 0
		}
		c.hold[x] = true
	}
	if len(changes) == 0 {
		return mech.ControllerActions{}
	}
	// One Update per host with the changes of the VMEs it hosts.
	per := map[string][]Change{}
	for _, t := range c.tenants {
		ch := changes[t]
		if ch == nil || !ch.set {
			continue
		}
		cg := Change{Tenant: t, CapStep: ch.step}
		if c.cfg.Priced() {
			cg = Change{Tenant: t, OldPrice: ch.old, NewPrice: ch.new}
		}
		for _, h := range c.hosts[t] {
			per[h] = append(per[h], cg)
		}
	}
	hosts := make([]string, 0, len(per))
	for h := range per {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var act mech.ControllerActions
	for _, h := range hosts {
		act.Messages = append(act.Messages, mech.Message{To: h, Body: Update{Changes: per[h]}})
	}
	return act
}
