// Package spec is Bulkhead's declarative input: scenarios in YAML with a
// topology, tenants with hose-model guarantees and VM placement, workloads
// with phases, the mechanism and its parameters, and outputs.
//
// Rates are written with units ("450Mbps", "1Gbps", "10Kbps", "1.5G" = bits/s)
// and held in bits per second; durations are Go durations ("30s", "1ms")
// (package units). What a scenario declares for the system to enforce —
// tenants, VMs with their hose guarantees, VDCs, appliances and their cost
// models — is package model's declared model (Scenario.Model); the rest
// (topology, workloads, phases, duration, outputs) is the experiment.
// docs/scenarios.md is the reference for the format.
package spec

// Scenario is one runnable scenario file.
type Scenario struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description,omitempty"`
	Units       string      `yaml:"units,omitempty"` // report unit: bps, Kbps, Mbps (default), Gbps, Tbps, T/s, KT/s, MT/s, GT/s
	Duration    Duration    `yaml:"duration"`        // simulated time
	DT          Duration    `yaml:"dt,omitempty"`    // tick; default 1ms
	Seed        int64       `yaml:"seed,omitempty"`  // default 1
	Topology    Topology    `yaml:"topology"`
	Tenants     []Tenant    `yaml:"tenants"`
	Appliances  []Appliance `yaml:"appliances,omitempty"`
	Workloads   []Workload  `yaml:"workloads"`
	Mechanism   Mechanism   `yaml:"mechanism,omitempty"` // default: none
	Outputs     Outputs     `yaml:"outputs,omitempty"`
	Network     Network     `yaml:"network,omitempty"`

	// File is the path the scenario was read from (for error messages).
	File string `yaml:"-"`
}

// Topology selects one builder.
type Topology struct {
	Kind     string    `yaml:"kind" json:"kind"` // two-tier | fat-tree | explicit
	TwoTier  *TwoTier  `yaml:"two_tier,omitempty" json:"two_tier,omitempty"`
	FatTree  *FatTree  `yaml:"fat_tree,omitempty" json:"fat_tree,omitempty"`
	Explicit *Explicit `yaml:"explicit,omitempty" json:"explicit,omitempty"`
}

// TwoTier is racks of servers under top-of-rack switches joined by one core
// switch. Servers are named s1..sN (rack by rack), ToRs tor1..torR, the core
// "core". Core is the capacity of each ToR uplink; when zero it is derived
// from Oversubscription: servers_per_rack × edge / oversubscription.
type TwoTier struct {
	Racks            int     `yaml:"racks" json:"racks"`
	ServersPerRack   int     `yaml:"servers_per_rack" json:"servers_per_rack"`
	Edge             Rate    `yaml:"edge" json:"edge"`
	Core             Rate    `yaml:"core,omitempty" json:"core,omitempty"`
	Oversubscription float64 `yaml:"oversubscription,omitempty" json:"oversubscription,omitempty"` // default 1 when Core is not given
}

// FatTree is a k-ary fat-tree (k even): k pods, k/2 edge and k/2 aggregation
// switches per pod, (k/2)² core switches, k³/4 servers named s1..sN.
type FatTree struct {
	K    int  `yaml:"k" json:"k"`
	Link Rate `yaml:"link" json:"link"`
	// Oversubscription n (n:1 at the edge switches; default 1) keeps only
	// k/2 ÷ n aggregation switches per pod and the cores they reach: every
	// edge switch has k/2 servers below and k/2 ÷ n uplinks. n must divide
	// k/2.
	Oversubscription int `yaml:"oversubscription,omitempty" json:"oversubscription,omitempty"`
}

// Explicit is a graph given node by node and link by link.
type Explicit struct {
	Nodes []Node `yaml:"nodes" json:"nodes"`
	Links []Link `yaml:"links" json:"links"`
}

// Node of an explicit graph.
type Node struct {
	Name string `yaml:"name" json:"name"`
	Kind string `yaml:"kind" json:"kind"` // server | switch
}

// Link of an explicit graph: full duplex, Capacity in each direction.
type Link struct {
	A        string `yaml:"a" json:"a"`
	B        string `yaml:"b" json:"b"`
	Capacity Rate   `yaml:"capacity" json:"capacity"`
}

// Tenant is a set of VMs with hose-model guarantees.
type Tenant struct {
	Name string `yaml:"name"`
	// Guarantee is the default symmetric hose guarantee of every VM; In and
	// Out override it per direction (asymmetric hose).
	Guarantee Rate    `yaml:"guarantee,omitempty"`
	In        Rate    `yaml:"in,omitempty"`
	Out       Rate    `yaml:"out,omitempty"`
	VMs       []VM    `yaml:"vms"`
	Weight    float64 `yaml:"weight,omitempty"` // optional policy weight; default derived from guarantees
	// BestEffort marks a tenant without guarantees: its VMs must not set
	// any, and admission reserves nothing for it. Every VM of a tenant that
	// is not best-effort needs a nonzero guarantee in at least one
	// direction.
	BestEffort bool `yaml:"best_effort,omitempty"`
	// VDC adds appliance guarantees and allocation policy (Pulsar).
	VDC *VDC `yaml:"vdc,omitempty"`
	// SLA is the performance degradation the tenant tolerates, a fraction
	// of what its VMs demand (DRX: "within 15%" is 0.15); 0: no SLA.
	SLA float64 `yaml:"sla,omitempty"`
	// Join and Leave are when the tenant is declared to the mechanism: a
	// tenant that arrives or departs during the run, handed to the
	// mechanism's agents and controller at those times through the driver
	// core (mech/drive), as an operator's controller would. Leave 0 means
	// the end of the run. The tenant's workloads must run within
	// [Join, Leave). Only mechanisms whose agents take tenants at runtime
	// can run such a scenario (the run fails with the reason otherwise).
	Join  Duration `yaml:"join,omitempty"`
	Leave Duration `yaml:"leave,omitempty"`
	// Phases are when the tenant's workloads run: a workload of the tenant
	// with no start, stop or phases of its own runs in these (a tenant
	// going idle and coming back, without repeating phases on each of its
	// workloads).
	Phases []Phase `yaml:"phases,omitempty"`
}

// VM is one virtual machine, placed on a server. Names are unique in the
// scenario. Guarantee/In/Out override the tenant's defaults; Tenant.Hose
// resolves them (each direction: the first nonzero of the VM's In/Out, the
// VM's Guarantee, the tenant's In/Out, the tenant's Guarantee).
type VM struct {
	Name      string `yaml:"name"`
	Server    string `yaml:"server"`
	Guarantee Rate   `yaml:"guarantee,omitempty"`
	In        Rate   `yaml:"in,omitempty"`
	Out       Rate   `yaml:"out,omitempty"`
}

// Workload generates traffic from every VM in Src to every VM in Dst (the
// cross product, self pairs skipped), during its phases; a requests
// workload from every VM in Src to Appliance (Dst unused).
type Workload struct {
	Name   string     `yaml:"name,omitempty"`
	Tenant string     `yaml:"tenant"`
	Kind   string     `yaml:"kind"` // tcp | udp | onoff | flows | requests
	Src    StringList `yaml:"src"`
	Dst    StringList `yaml:"dst,omitempty"`

	// tcp: bulk transfer with Connections parallel connections per pair
	// (default 1), optionally capped at Rate per pair by the application.
	// udp: unresponsive, Rate per pair. onoff: like tcp (or udp with
	// Transport: udp), alternating On and Off periods (exponential when
	// Exponential is set). flows: a Poisson stream of TCP flows per pair with
	// ArrivalRate flows/s and sizes drawn from Sizes; their completion times
	// are reported.
	Connections int       `yaml:"connections,omitempty"`
	Rate        Rate      `yaml:"rate,omitempty"`
	Transport   string    `yaml:"transport,omitempty"` // for onoff: tcp (default) | udp
	On          Duration  `yaml:"on,omitempty"`
	Off         Duration  `yaml:"off,omitempty"`
	Exponential bool      `yaml:"exponential,omitempty"`
	ArrivalRate float64   `yaml:"arrival_rate,omitempty"`
	Sizes       *SizeDist `yaml:"sizes,omitempty"`
	// clients: every VM in Dst is a client that fetches one flow at a time
	// (size from Sizes) from a VM of Src drawn uniformly at random (data
	// flows src → dst); when a flow finishes, the client sleeps with
	// probability SleepProb for a time uniform in [0, Sleep], else fetches
	// the next one at once.
	Sleep     Duration `yaml:"sleep,omitempty"`
	SleepProb float64  `yaml:"sleep_prob,omitempty"`

	// requests: every VM in Src sends requests to Appliance with the given
	// Mix, closed-loop with Outstanding requests per VM or open-loop at
	// RequestRate requests/s per VM; exactly one of the two. The
	// tenant needs a guarantee on the appliance in its VDC unless it is
	// best effort. Connections (default 1) is the number of transport
	// connections each VM spreads its requests over: a request flow
	// competes in the network like that many TCP connections.
	Appliance   string        `yaml:"appliance,omitempty"`
	Via         []Via         `yaml:"via,omitempty"`
	Mix         []RequestType `yaml:"mix,omitempty"`
	Outstanding int           `yaml:"outstanding,omitempty"`
	RequestRate float64       `yaml:"request_rate,omitempty"`

	// Phases when the workload is active; Start/Stop are a shorthand for a
	// single phase. With neither, it runs for the whole scenario.
	Start  Duration `yaml:"start,omitempty"`
	Stop   Duration `yaml:"stop,omitempty"`
	Phases []Phase  `yaml:"phases,omitempty"`
}

// Phase is an interval [Start, Stop); Stop zero means the end of the run.
type Phase struct {
	Start Duration `yaml:"start"`
	Stop  Duration `yaml:"stop,omitempty"`
}

// SizeDist is a flow-size distribution in bytes.
type SizeDist struct {
	Dist  string  `yaml:"dist"`            // fixed | exponential | pareto | lognormal | cdf
	Mean  Bytes   `yaml:"mean,omitempty"`  // fixed, exponential, pareto, lognormal
	Shape float64 `yaml:"shape,omitempty"` // pareto alpha (default 1.2); lognormal sigma (default 1)
	// CDF points (size, cumulative probability): sizes strictly increasing,
	// p non-decreasing in [0, 1], the last p exactly 1.
	CDF []CDFPoint `yaml:"cdf,omitempty"`
}

// CDFPoint is one point of an empirical size distribution.
type CDFPoint struct {
	Size Bytes   `yaml:"size"`
	P    float64 `yaml:"p"`
}

// Mechanism names the isolation mechanism and its parameters.
type Mechanism struct {
	Name   string `yaml:"name"`
	Params Params `yaml:"params,omitempty"`
}

// Network tunes the simulated network and control plane.
type Network struct {
	// TCPLoss is the fraction of its packets a TCP connection loses at a
	// congested link (default 0.01).
	TCPLoss float64 `yaml:"tcp_loss,omitempty"`
	// ECN makes congested links mark TCP packets instead of dropping them
	// (ElasticSwitch §6, §7.4): mechanisms see marks, not losses.
	ECN bool `yaml:"ecn,omitempty"`
	// ControlDelay delays every control message between host agents;
	// ControlLoss drops each with that probability.
	ControlDelay Duration `yaml:"control_delay,omitempty"`
	ControlLoss  float64  `yaml:"control_loss,omitempty"`
	// PortQueues is the number of WFQ queues every port (a link's sending
	// end: switch ports, and servers' NICs as software WFQ) supports, for
	// mechanisms that configure them (QShare); 0 means DefaultPortQueues.
	// QueueWeightMax is the largest WFQ weight a port supports, weights
	// then being integers in [1, QueueWeightMax]; 0 means any positive
	// real weight.
	PortQueues     int `yaml:"port_queues,omitempty"`
	QueueWeightMax int `yaml:"queue_weight_max,omitempty"`
}

// DefaultPortQueues is the number of WFQ queues per port of commodity
// switches (QShare §1: "typically 8").
const DefaultPortQueues = 8

// Queues returns the number of WFQ queues per port (DefaultPortQueues
// when not set).
func (n *Network) Queues() int {
	if n.PortQueues == 0 {
		return DefaultPortQueues
	}
	return n.PortQueues
}

// Outputs controls the report.
type Outputs struct {
	Sample Duration `yaml:"sample,omitempty"` // report sampling interval, default 10ms (≥ dt)
	Plots  *bool    `yaml:"plots,omitempty"`  // default true
}
