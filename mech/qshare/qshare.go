// Package qshare is QShare (Liu et al., "Enabling Work-conserving Bandwidth
// Guarantees for Multi-tenant Datacenters via Dynamic Tenant-Queue
// Binding", INFOCOM 2018): bandwidth guarantees and work conservation from
// weighted fair queues on switch ports, bound dynamically to the tenants
// whose demand exceeds their guarantee.
//
// A central controller (mech.Central) runs every control interval:
//
//   - From the hypervisors' measurements (the controller's per-VM-pair
//     observations) it sums every tenant's inbound and outbound usage per
//     hypervisor and computes its usage factor U (eq. 1): the largest, over
//     the tenant's hypervisors, of usage ÷ the tenant's guarantee on that
//     hypervisor's network interface, in or out, capped at u_cap; its
//     payment factor P = price · Σ guarantees (§5.2) and its score S = U·P
//     (eq. 2). See score.go.
//   - Alg. 2 (Binder.Bind): tenants in decreasing score keep the dedicated
//     queues they hold, take spare queues, or pre-empt the lowest-scored
//     holder on each full link; a tenant is dedicated only with a queue on
//     every link of its tenant routing tree (the links it has a reservation
//     on, from admission control).
//   - Queue weights are each queue's share of the bandwidth reserved on the
//     link, rounded to the integers a port accepts; D-tenants get DSCP code
//     points by greedy colouring within 64 values (code point 0 is the
//     shared queue) and every port maps its D-tenants' code points to their
//     queues.
//   - Hypervisors hear which of their tenants are dedicated. Tenants in the
//     shared queue are either capped at their guarantees (shared: cap: every
//     VM's egress at its Out and ingress at its In hose guarantee, so a
//     tenant's traffic on any link is within its reservation) or run
//     ElasticSwitch's guarantee partitioning and rate allocation (shared:
//     elasticswitch, the package mech/elasticswitch, its parameters
//     accepted here). D-tenants are not limited by their queue's share:
//     the queue isolates them.
//   - Inside a dedicated queue (dedicated: hose, the default; not the
//     paper's, which promises tenant-level guarantees) hypervisors keep
//     every VM pair's hose guarantee: a pair kept below it by its own
//     tenant's traffic is reported to the tenant's hypervisors, which cap
//     the siblings that share a host link with it by its deficit
//     (protector, protect.go). With dedicated: tenant the pairs are never
//     limited.
//
// docs/qshare.md gives the reconstruction of the formulas the paper's text
// lost and every assumption.
package qshare

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Name of the mechanism.
const Name = "qshare"

// Shared-queue policies.
const (
	// SharedCap caps tenants in the shared queue at their guarantees
	// (§7.1: "allocate them at most their guaranteed bandwidth").
	SharedCap = "cap"
	// SharedElasticSwitch runs ElasticSwitch for them (§5.4).
	SharedElasticSwitch = "elasticswitch"
)

// Policies inside a dedicated queue.
const (
	// DedicatedHose keeps every VM pair's hose guarantee inside its
	// tenant's queue (Bulkhead's, not the paper's: see protector).
	DedicatedHose = "hose"
	// DedicatedTenant leaves the pairs unlimited: the queue guarantees
	// the tenant as a whole (the paper, §9: "QShare enforces per-tenant
	// guarantees").
	DedicatedTenant = "tenant"
)

// Params are QShare's parameters (keys under mechanism.params in
// brackets).
type Params struct {
	// Interval is the control interval [interval]; default 1s (the
	// paper's value is lost; §7.1.2 shows "a few seconds" suffices).
	Interval time.Duration
	// UCap caps the usage factor (eq. 1's outermost min) [u_cap]; default
	// 2, > 0.
	UCap float64
	// Price is the payment factor's constant k in P = k·N·B, per Gbps
	// [price]; default 1, > 0 (it scales every score alike).
	Price float64
	// Shared is the policy for tenants in the shared queue [shared]: "cap"
	// (default) or "elasticswitch".
	Shared string
	// Dedicated is the policy inside a dedicated queue [dedicated]:
	// "hose" (default: every VM pair keeps its hose guarantee) or
	// "tenant" (the paper: the tenant's pairs share its queue as their
	// traffic does).
	Dedicated string
	// AgentPeriod is how often a host agent applies the bindings it heard
	// [agent_period], with shared: cap and dedicated: tenant; default
	// 10ms. Otherwise agents run ElasticSwitch and step every RA period.
	AgentPeriod time.Duration
	// Seed seeds the random tie-breaking of Alg. 2 [seed]; default 1.
	Seed int64
	// ES is ElasticSwitch's configuration for the shared queue and, with
	// dedicated: hose, for the guarantees inside dedicated queues (its
	// parameters, e.g. ra_period, alpha, are accepted as they are).
	ES elasticswitch.Config
}

// DefaultParams returns the defaults.
func DefaultParams() Params {
	return Params{Interval: time.Second, UCap: 2, Price: 1, Shared: SharedCap, Dedicated: DedicatedHose,
		AgentPeriod: 10 * time.Millisecond, Seed: 1, ES: elasticswitch.Defaults()}
}

var ownParams = []string{"interval", "u_cap", "price", "shared", "dedicated", "agent_period", "seed"}

// ParamNames lists every parameter: QShare's own and ElasticSwitch's.
func ParamNames() []string {
	return append(append([]string(nil), ownParams...), elasticswitch.ParamNames()...)
}

// Parse reads mechanism.params over DefaultParams. Errors are
// *spec.FieldError values, joined, e.g.
//
//	mechanism.params.u_cap: must be > 0, got -1
//	mechanism.params.shared: must be "cap" or "elasticswitch", got "x"
func Parse(params map[string]any) (Params, error) {
	p := DefaultParams()
	sp := spec.Params(params)
	if err := sp.Check(ParamNames()...); err != nil {
		return p, err
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	bad := func(name, format string, args ...any) {
		errs = append(errs, &spec.FieldError{Path: "mechanism.params." + name, Msg: fmt.Sprintf(format, args...)})
	}
	var err error
	if p.Interval, err = sp.Duration("interval", p.Interval); err != nil {
		add(err)
	} else if p.Interval <= 0 {
		bad("interval", "must be > 0, got %v", p.Interval)
	}
	if p.AgentPeriod, err = sp.Duration("agent_period", p.AgentPeriod); err != nil {
		add(err)
	} else if p.AgentPeriod <= 0 {
		bad("agent_period", "must be > 0, got %v", p.AgentPeriod)
	}
	if p.UCap, err = sp.Float("u_cap", p.UCap); err != nil {
		add(err)
	} else if !(p.UCap > 0) || math.IsInf(p.UCap, 0) {
		bad("u_cap", "must be > 0, got %g", p.UCap)
	}
	if p.Price, err = sp.Float("price", p.Price); err != nil {
		add(err)
	} else if !(p.Price > 0) || math.IsInf(p.Price, 0) {
		bad("price", "must be > 0, got %g", p.Price)
	}
	if p.Shared, err = sp.String("shared", p.Shared); err != nil {
		add(err)
	} else if p.Shared != SharedCap && p.Shared != SharedElasticSwitch {
		bad("shared", "must be %q or %q, got %q", SharedCap, SharedElasticSwitch, p.Shared)
	}
	if p.Dedicated, err = sp.String("dedicated", p.Dedicated); err != nil {
		add(err)
	} else if p.Dedicated != DedicatedHose && p.Dedicated != DedicatedTenant {
		bad("dedicated", "must be %q or %q, got %q", DedicatedHose, DedicatedTenant, p.Dedicated)
	}
	if _, ok := params["agent_period"]; ok && p.runsES() && len(errs) == 0 {
		bad("agent_period", "applies with shared: %s and dedicated: %s only; otherwise agents step every ElasticSwitch ra_period", SharedCap, DedicatedTenant)
	}
	seed, err := sp.Int("seed", int(p.Seed))
	add(err)
	p.Seed = int64(seed)
	esParams := map[string]any{}
	for _, n := range elasticswitch.ParamNames() {
		if v, ok := params[n]; ok {
			esParams[n] = v
		}
	}
	if len(esParams) > 0 && !p.runsES() && len(errs) == 0 {
		for _, n := range elasticswitch.ParamNames() {
			if _, ok := esParams[n]; ok {
				bad(n, "is an ElasticSwitch parameter; it needs shared: %s or dedicated: %s", SharedElasticSwitch, DedicatedHose)
			}
		}
	}
	if p.ES, err = elasticswitch.Parse(esParams); err != nil {
		add(err)
	}
	return p, errors.Join(errs...)
}

// runsES says whether host agents run ElasticSwitch: for the shared queue
// or for the guarantees inside dedicated queues.
func (p Params) runsES() bool { return p.Shared == SharedElasticSwitch || p.Dedicated == DedicatedHose }

// Mechanism is QShare with one set of parameters.
type Mechanism struct {
	p Params
}

// New parses params (see Parse) and returns the mechanism.
func New(params map[string]any) (*Mechanism, error) {
	p, err := Parse(params)
	if err != nil {
		return nil, err
	}
	return &Mechanism{p: p}, nil
}

// Name implements mech.Mechanism.
func (m *Mechanism) Name() string { return Name }

// Params returns the mechanism's parameters.
func (m *Mechanism) Params() Params { return m.p }

// NewAgent implements mech.Mechanism.
func (m *Mechanism) NewAgent(env mech.Env) (mech.Agent, error) {
	return newAgent(m.p, env)
}

// NewController implements mech.Central.
func (m *Mechanism) NewController(env mech.ControllerEnv) (mech.Controller, error) {
	return NewController(m.p, env)
}
