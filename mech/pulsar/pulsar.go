// Package pulsar is Pulsar's controller (Angel et al., OSDI 2014): end-to-end
// throughput guarantees across the network and shared appliances, in
// tokens/s, for tenants' virtual datacenters (VDCs).
//
// Every control interval (1 s) the controller, given what the hosts' rate
// enforcers measured for every flow (mech.FlowObs), computes for each flow
// an allocation vector — tokens/s on every resource of its path — that the
// enforcers uphold with multi-resource token buckets:
//
//  1. demand estimation (§4.2): d = u + max(b/T, q·u/o), smoothed by an
//     EWMA (EstimateDemand), and the demand that queues at appliances hide
//     from a closed loop (QueueFactor);
//  2. appliance capacity estimation (§4.3): a probing window narrowed by
//     binary search on throughput and VDC-violation signals, then eq. (7)
//     (CapacityEstimator);
//  3. local allocation (§4.1, eq. 2): per tenant, its policy (DRF by
//     default) over its virtual resources, whose capacities are its
//     guarantees: each VM's virtual out-link and in-link (VM.Out/8 and
//     VM.In/8 bytes/s) and each virtual appliance (ApplianceGuarantee.Min);
//     guarantees first: a flow its enforcer holds back (a new one at the
//     default rate, one returning from idle) may take its whole guarantee
//     at the next step, and one whose requests queue at an appliance its
//     demand without the queue up to its guarantee; until traffic is
//     first seen, new flows run at the smallest share of a guarantee
//     that any flow of the declared model can have, not at the small
//     default rate;
//  4. global allocation (eq. 3): the spare capacity of the physical
//     resources (minus headroom on links) to the unmet demand of tenants
//     with minimum guarantees, by H-DRF over tenants by default; the spare
//     follows the estimates, which ramp up with what flows use.
//
// The allocation of a flow is local + global on every element of its path.
// The host side of Pulsar is the data-plane rate enforcer, which the driver
// (the simulator, the host daemon) models; the per-host agent is a no-op.
//
// Besides Pulsar ("pulsar", scope all) the package provides the two
// comparison classes of §6.1 as scopes: "pulsar-appliances" allocates only
// appliances (links unlimited) and "pulsar-network" only links (appliances
// unlimited, shared FIFO).
//
// Units: tokens everywhere; on links tokens are bytes, so a VM's hose
// guarantees (mech.VM.In/Out, bits/s) count /8. FlowObs.Used is tokens/s;
// Backlog, Queued and Outstanding are tokens.
//
// Files: params.go (parameters), demand.go (§4.2), capacity.go (§4.3),
// fill.go (the DRF / max-min solver shared by the local and global steps),
// scale.go (the §6.4 instance), and the control loop (§4.1) by phase:
// controller.go (types, NewController, Step), ingest.go (observations →
// flows, their paths and demands; forgetting), estimate.go (capacity
// estimation glue: appliance observations, queueing delays, probing
// windows), local.go (per-tenant DRF / max-min / first fit), global.go
// (spare capacity) and output.go (the allocations returned).
package pulsar

import (
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// Mechanism names.
const (
	// Name is Pulsar with every resource allocated.
	Name = "pulsar"
	// NameAppliances is per-appliance isolation only.
	NameAppliances = "pulsar-appliances"
	// NameNetwork is network-only isolation.
	NameNetwork = "pulsar-network"
)

// Mechanism is Pulsar with checked parameters; it implements mech.Central.
type Mechanism struct {
	name   string
	params Params
}

var _ mech.Central = (*Mechanism)(nil)

// New builds "pulsar" from its scenario parameters (see Params for the
// keys and defaults).
func New(params map[string]any) (*Mechanism, error) {
	p, err := parseParams(params, "")
	if err != nil {
		return nil, err
	}
	name := Name
	switch p.Scope {
	case ScopeAppliances:
		name = NameAppliances
	case ScopeNetwork:
		name = NameNetwork
	}
	return &Mechanism{name: name, params: p}, nil
}

// NewAppliances builds "pulsar-appliances": Pulsar allocating appliances
// only. It takes Pulsar's parameters except scope.
func NewAppliances(params map[string]any) (*Mechanism, error) {
	p, err := parseParams(params, ScopeAppliances)
	if err != nil {
		return nil, err
	}
	return &Mechanism{name: NameAppliances, params: p}, nil
}

// NewNetwork builds "pulsar-network": Pulsar allocating links only. It
// takes Pulsar's parameters except scope.
func NewNetwork(params map[string]any) (*Mechanism, error) {
	p, err := parseParams(params, ScopeNetwork)
	if err != nil {
		return nil, err
	}
	return &Mechanism{name: NameNetwork, params: p}, nil
}

// NewWithParams builds a mechanism from parsed parameters (for tools and
// benchmarks). Its name follows p.Scope.
func NewWithParams(p Params) *Mechanism {
	m := &Mechanism{name: Name, params: p}
	switch p.Scope {
	case ScopeAppliances:
		m.name = NameAppliances
	case ScopeNetwork:
		m.name = NameNetwork
	}
	return m
}

// Name implements mech.Mechanism: "pulsar", "pulsar-appliances" or
// "pulsar-network".
func (m *Mechanism) Name() string { return m.name }

// Params returns the mechanism's parameters.
func (m *Mechanism) Params() Params { return m.params }

// NewAgent implements mech.Mechanism. Pulsar's host side is the rate
// enforcer, which the driver models; the agent does nothing.
func (m *Mechanism) NewAgent(mech.Env) (mech.Agent, error) { return noopAgent{}, nil }

// NewController implements mech.Central.
func (m *Mechanism) NewController(env mech.ControllerEnv) (mech.Controller, error) {
	return NewController(env, m.params)
}

type noopAgent struct{}

// Period is long: the agent does nothing.
func (noopAgent) Period() time.Duration { return time.Hour }

func (noopAgent) Step(*mech.HostObs, []mech.Message) mech.Actions { return mech.Actions{} }
