package mech

import "time"

// Central is implemented by mechanisms with a logically centralized
// controller (Pulsar; later QShare and DRX's platform manager). The driver
// runs one Controller besides the per-host agents.
type Central interface {
	Mechanism
	NewController(env ControllerEnv) (Controller, error)
}

// Controller is a central control loop: every Period it receives what the
// hosts' enforcers measured and returns allocations for them to enforce.
type Controller interface {
	Period() time.Duration
	Step(obs *ControllerObs) ControllerActions
}

// ResourceKind says what a physical resource is.
type ResourceKind int

// Resource kinds.
const (
	// LinkResource is one direction of a network link; its tokens are
	// bytes (Pulsar: "tokens are equivalent to bytes").
	LinkResource ResourceKind = iota
	// ApplianceResource is a shared appliance (key-value store, file
	// store, middlebox) whose tokens come from its virtual cost function.
	ApplianceResource
)

// ResourceInfo describes one physical resource the controller allocates.
type ResourceInfo struct {
	ID   string
	Kind ResourceKind
	// Capacity in tokens/s: known for links (bytes/s); for appliances it is
	// the provider's advertised figure, which the controller may estimate
	// afresh (Pulsar §4.3). CapacityMin/CapacityMax bound the estimate
	// (0: unknown).
	Capacity, CapacityMin, CapacityMax float64
	// Queues is the number of WFQ queues the link's sending port supports
	// (PortQueues; 0: none). MaxWeight is the largest queue weight the port
	// supports, weights then being integers in [1, MaxWeight] (0: any
	// positive real).
	Queues, MaxWeight int
}

// Reservation is what admission control reserved for a tenant's hose
// guarantees on one link (bits/s).
type Reservation struct {
	Tenant   string
	Resource int // index into ControllerEnv.Resources (a link)
	Rate     float64
}

// ApplianceGuarantee is a tenant's guarantee on one virtual appliance, in
// tokens/s. Max, when positive, caps what the tenant may get.
type ApplianceGuarantee struct {
	Appliance string // resource ID
	Min, Max  float64
}

// VDC is a tenant's virtual datacenter: its VMs' link guarantees (VM.In,
// VM.Out, in bytes/s = tokens/s) and its appliance guarantees.
type VDC struct {
	Tenant string
	// Fixed guarantees are never exceeded (the tenant is left out of the
	// global allocation of spare capacity); otherwise they are minimums.
	Fixed      bool
	Appliances []ApplianceGuarantee
	// Policy is the tenant's local allocation policy ("drf" by default,
	// "maxmin", "firstfit"); Weights overrides per-flow local weights
	// (key "src->dst"), default 1.
	Policy  string
	Weights map[string]float64
	// GlobalWeight biases the provider's global allocation; 0 means
	// derive it from the guarantees.
	GlobalWeight float64
	// SLA is the performance degradation the tenant tolerates, a fraction
	// of its VMs' demand (DRX); 0: no SLA.
	SLA float64
}

// ControllerEnv is what the controller knows from the start: the physical
// resources, every VM (with host and hose guarantees in bits/s as for the
// agents) and the tenants' VDCs.
type ControllerEnv struct {
	Resources []ResourceInfo
	VMs       []VM
	VDCs      []VDC
	// Reservations are the tenants' hose reservations on links, from
	// admission control: nil when the driver does not know them, empty when
	// nothing is reserved.
	Reservations []Reservation
}

// PathRole says how a flow uses a resource on its path.
type PathRole int

// Roles of a resource on a flow's path.
const (
	// Forward: a link carrying the flow's data or requests from its source.
	Forward PathRole = iota
	// Reverse: a link carrying responses back to the source (flows to
	// appliances, e.g. READ data).
	Reverse
	// Appliance: the appliance that serves the flow.
	Appliance
)

// PathElem is one resource on a flow's path.
type PathElem struct {
	Resource int // index into ControllerEnv.Resources
	Role     PathRole
}

// FlowID names a Pulsar flow: all connections between a source VM and a
// destination VM, or a source VM and an appliance (Dst is then the
// appliance's resource ID).
type FlowID struct {
	Src, Dst string
}

// FlowObs is what a source host's rate enforcer measured for one flow over
// the last control interval (Pulsar §4.2). Every vector is indexed like
// Path and counts tokens of that resource.
type FlowObs struct {
	Flow   FlowID
	Tenant string
	Path   []PathElem
	// Used is the utilization: tokens consumed per second over the period.
	Used []float64
	// Backlog is the tokens needed to serve the requests still queued at the
	// enforcer at the end of the period.
	Backlog []float64
	// Queued and Outstanding are the average tokens of requests queued at
	// the enforcer and outstanding beyond it during the period.
	Queued, Outstanding []float64
	// Allocation is the allocation in force (tokens/s per path element), nil
	// if the flow ran on the default rate.
	Allocation []float64
}

// ControllerObs is one control interval's measurements.
type ControllerObs struct {
	Now    time.Duration
	Period time.Duration
	Flows  []FlowObs
	// VMs is every VM's I/O over the period, as its host measured it
	// (rates and demands as in HostObs.VMs; DRX's platform manager).
	VMs []VMObs
}

// FlowAllocation is a flow's allocation vector in tokens/s per path element
// (indexed like the flow's Path).
type FlowAllocation struct {
	Flow  FlowID
	Rates []float64
}

// ControllerActions are the allocations for the enforcers. Flows not
// listed keep their allocation; flows never allocated run at DefaultRate
// tokens/s on every resource of their path (0: unlimited), or at their
// source VM's rate in DefaultBySrc.
type ControllerActions struct {
	Allocations []FlowAllocation
	DefaultRate float64
	// DefaultBySrc are per-VM default rates (Pulsar §5: "each VM a (small)
	// default rate for new VM-to-VM flows"): a flow never allocated whose
	// source is a VM listed here runs at that rate, tokens/s on every
	// resource of its path, instead of DefaultRate. Each step's map
	// replaces the previous one: VMs not listed (and a nil map) fall back
	// to DefaultRate. Rates must be > 0 and finite.
	DefaultBySrc map[string]float64
	// Estimates reports the controller's current capacity estimate per
	// appliance resource ID (for reports and plots; not enforced).
	Estimates map[string]float64
	// Ports configures switch ports' WFQ queues (QShare). Ports not listed
	// keep their configuration.
	Ports []PortQueues
	// DSCP sets the DSCP code point (0..63) hypervisors mark on a tenant's
	// packets; tenants not listed keep theirs (initially 0).
	DSCP map[string]int
	// Messages go to host agents (To a host; From is set to
	// ControllerHost), delivered at the recipient's next step like agents'
	// messages (QShare's bindings, DRX's prices). Bodies must encode to
	// JSON.
	Messages []Message
}

// ControllerHost is the From of the messages a controller sends.
const ControllerHost = "controller"

// MaxDSCP is the largest DSCP code point.
const MaxDSCP = 63

// PortQueues configures one switch port (a link's sending end) as weighted
// fair queues: Weights per queue (at most the port's Queues, within its
// MaxWeight), queue 0 being the shared queue, and how packets are
// classified into queues: by tenant (Tenants), or as real switches do by
// the packet's DSCP code point (DSCP: code point → queue, the tenant's
// code point being the one ControllerActions.DSCP set). Tenants bound in
// neither use queue 0. No Weights: one FIFO again.
type PortQueues struct {
	Link    int // index into ControllerEnv.Resources (a link)
	Weights []float64
	Tenants map[string]int
	DSCP    map[int]int
}
