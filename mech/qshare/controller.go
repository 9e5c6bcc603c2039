package qshare

import (
	"fmt"
	"maps"
	"math"
	"math/rand"
	"slices"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// BindingKind is the kind of Binding messages.
const BindingKind = "qshare.binding.v1"

// Binding is the controller's message to a hypervisor: which of the
// tenants with VMs there hold dedicated queues (the others are in the
// shared queue), and the DSCP code point each tenant's packets carry.
type Binding struct {
	Dedicated []string       `json:"dedicated"`
	DSCP      map[string]int `json:"dscp,omitempty"`
}

// MessageKind implements mech.Body.
func (Binding) MessageKind() string { return BindingKind }

// MarshalJSON encodes the body with its kind (mech.MarshalBody).
func (b Binding) MarshalJSON() ([]byte, error) {
	type fields Binding
	return mech.MarshalBody(BindingKind, fields(b))
}

// tenantInfo is what the controller knows of a tenant.
type tenantInfo struct {
	name  string
	hosts []string
	// Guarantee on each host's network interface (bits/s): the hose
	// reservation of the host's access link, out and in.
	bOut, bIn []float64
	// Usage measured in the last interval per host (bits/s).
	uOut, uIn []float64
	pay       float64 // payment factor
}

// Controller is QShare's central controller: U-factors, scores, Alg. 2,
// queue weights and DSCP colouring every control interval.
type Controller struct {
	p       Params
	env     mech.ControllerEnv
	tenants []tenantInfo
	tix     map[string]int
	vmAt    map[string][2]int // VM → (tenant, host slot)
	binder  *Binder
	links   []int                   // links with reservations
	onLink  map[int]map[int]float64 // link → tenant → reservation
	ports   map[int]mech.PortQueues // configuration in force
	hostTen map[string][]int        // host → tenants with VMs there
	rng     *rand.Rand
	u, s    []float64
	rounds  int
}

// NewController builds the controller. It needs the tenants' reservations
// (mech.ControllerEnv.Reservations), which define their routing trees.
func NewController(p Params, env mech.ControllerEnv) (*Controller, error) {
	c := &Controller{p: p, env: env, tix: map[string]int{}, vmAt: map[string][2]int{},
		onLink: map[int]map[int]float64{}, ports: map[int]mech.PortQueues{}, hostTen: map[string][]int{},
		rng: rand.New(rand.NewSource(p.Seed))}
	if env.Reservations == nil {
		return nil, fmt.Errorf("%s: the controller needs the tenants' link reservations from admission control, and the driver gave none", Name)
	}
	tenantOf := func(name string) int {
		if i, ok := c.tix[name]; ok {
			return i
		}
		c.tix[name] = len(c.tenants)
		c.tenants = append(c.tenants, tenantInfo{name: name})
		return len(c.tenants) - 1
	}
	for _, v := range env.VDCs {
		tenantOf(v.Tenant)
	}
	// Per tenant: hosts, and the hose sums on each host and elsewhere.
	type sums struct{ in, out float64 }
	perHost := map[int]map[string]*sums{}
	total := map[int]*sums{}
	for _, v := range env.VMs {
		t := tenantOf(v.Tenant)
		ti := &c.tenants[t]
		slot := slices.Index(ti.hosts, v.Host)
		if slot < 0 {
			slot = len(ti.hosts)
			ti.hosts = append(ti.hosts, v.Host)
			c.hostTen[v.Host] = append(c.hostTen[v.Host], t)
		}
		c.vmAt[v.Name] = [2]int{t, slot}
		if perHost[t] == nil {
			perHost[t], total[t] = map[string]*sums{}, &sums{}
		}
		if perHost[t][v.Host] == nil {
			perHost[t][v.Host] = &sums{}
		}
		perHost[t][v.Host].in += v.In
		perHost[t][v.Host].out += v.Out
		total[t].in += v.In
		total[t].out += v.Out
		// Payment factor ∝ total guaranteed bandwidth N·B (§5.2), in Gbps;
		// (in + out)/2 per VM is B for a symmetric hose.
		ti.pay += Payment(p.Price, v.In, v.Out)
	}
	for t := range c.tenants {
		ti := &c.tenants[t]
		n := len(ti.hosts)
		ti.bOut, ti.bIn, ti.uOut, ti.uIn = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		for k, h := range ti.hosts {
			here := perHost[t][h]
			// The hose reservation on the host's access link: what its VMs
			// may send is bounded by what the others may receive, and
			// vice versa (min(n, N−n)·B for a homogeneous hose).
			ti.bOut[k] = math.Min(here.out, total[t].in-here.in)
			ti.bIn[k] = math.Min(here.in, total[t].out-here.out)
		}
	}
	// Routing trees from the reservations.
	byTenant := map[int]map[int]float64{}
	for _, r := range env.Reservations {
		if r.Resource < 0 || r.Resource >= len(env.Resources) || env.Resources[r.Resource].Kind != mech.LinkResource {
			return nil, fmt.Errorf("%s: reservation of tenant %q on resource %d, which is not a link", Name, r.Tenant, r.Resource)
		}
		if !(r.Rate > 0) {
			continue
		}
		t := tenantOf(r.Tenant)
		if byTenant[t] == nil {
			byTenant[t] = map[int]float64{}
		}
		byTenant[t][r.Resource] += r.Rate
		if c.onLink[r.Resource] == nil {
			c.onLink[r.Resource] = map[int]float64{}
			c.links = append(c.links, r.Resource)
		}
		c.onLink[r.Resource][t] += r.Rate
	}
	sort.Ints(c.links)
	trs := make([][]int, len(c.tenants))
	res := make([][]float64, len(c.tenants))
	for t, m := range byTenant {
		trs[t] = slices.Sorted(maps.Keys(m))
		for _, l := range trs[t] {
			res[t] = append(res[t], m[l])
		}
	}
	queues := make([]int, len(env.Resources))
	for i, r := range env.Resources {
		queues[i] = r.Queues
	}
	c.binder = NewBinder(queues, trs, res)
	c.u = make([]float64, len(c.tenants))
	c.s = make([]float64, len(c.tenants))
	return c, nil
}

// Period implements mech.Controller: the control interval.
func (c *Controller) Period() time.Duration { return c.p.Interval }

// Step implements mech.Controller: one control interval.
func (c *Controller) Step(obs *mech.ControllerObs) mech.ControllerActions {
	for t := range c.tenants {
		ti := &c.tenants[t]
		clear(ti.uOut)
		clear(ti.uIn)
	}
	for i := range obs.Flows {
		f := &obs.Flows[i]
		if len(f.Used) == 0 {
			continue // same-host pair: no network interface crossed
		}
		rate := f.Used[0] * 8
		if src, ok := c.vmAt[f.Flow.Src]; ok {
			c.tenants[src[0]].uOut[src[1]] += rate
		}
		if dst, ok := c.vmAt[f.Flow.Dst]; ok {
			c.tenants[dst[0]].uIn[dst[1]] += rate
		}
	}
	for t := range c.tenants {
		c.u[t] = UFactor(&c.tenants[t], c.p.UCap)
		c.s[t] = Score(c.u[t], c.tenants[t].pay)
	}
	c.binder.Bind(c.s, c.rng)
	c.rounds++
	return c.actions()
}

// UFactor is eq. (1) as reconstructed (docs/qshare.md): over the tenant's
// hypervisors, the larger of outbound usage ÷ outbound guarantee and inbound
// usage ÷ inbound guarantee on the hypervisor's interface; the largest over
// hypervisors; capped at uCap. Hypervisors where the tenant has no
// guarantee on the interface (all its VMs there) do not count.
func UFactor(ti *tenantInfo, uCap float64) float64 {
	u := 0.0
	for k := range ti.hosts {
		if ti.bOut[k] > 0 {
			u = math.Max(u, ti.uOut[k]/ti.bOut[k])
		}
		if ti.bIn[k] > 0 {
			u = math.Max(u, ti.uIn[k]/ti.bIn[k])
		}
	}
	return math.Min(u, uCap)
}

// actions turns the binder's state into port configurations (changed ones
// only), DSCP marks and messages to the hypervisors.
func (c *Controller) actions() mech.ControllerActions {
	var act mech.ControllerActions
	for _, l := range c.links {
		pq := mech.PortQueues{Link: l, Weights: c.binder.Weights(l, c.onLink[l], c.env.Resources[l].MaxWeight)}
		if pq.Weights != nil {
			pq.DSCP = map[int]int{}
			for q, t := range c.binder.Holders(l) {
				if q > 0 && t >= 0 {
					pq.DSCP[c.binder.DSCP(t)] = q
				}
			}
		}
		if old, ok := c.ports[l]; ok && slices.Equal(old.Weights, pq.Weights) && maps.Equal(old.DSCP, pq.DSCP) {
			continue
		}
		if _, ok := c.ports[l]; !ok && pq.Weights == nil {
			continue
		}
		c.ports[l] = pq
		act.Ports = append(act.Ports, pq)
	}
	act.DSCP = make(map[string]int, len(c.tenants))
	for t := range c.tenants {
		act.DSCP[c.tenants[t].name] = c.binder.DSCP(t)
	}
	hosts := slices.Sorted(maps.Keys(c.hostTen))
	for _, h := range hosts {
		b := Binding{Dedicated: []string{}, DSCP: map[string]int{}}
		for _, t := range c.hostTen[h] {
			if c.binder.Dedicated(t) {
				b.Dedicated = append(b.Dedicated, c.tenants[t].name)
			}
			b.DSCP[c.tenants[t].name] = c.binder.DSCP(t)
		}
		act.Messages = append(act.Messages, mech.Message{To: h, Body: b})
	}
	return act
}

// Dedicated reports whether the named tenant holds dedicated queues.
func (c *Controller) Dedicated(tenant string) bool {
	t, ok := c.tix[tenant]
	return ok && c.binder.Dedicated(t)
}

// Score returns the named tenant's U-factor and score of the last round.
func (c *Controller) Score(tenant string) (u, s float64) {
	if t, ok := c.tix[tenant]; ok {
		return c.u[t], c.s[t]
	}
	return 0, 0
}
