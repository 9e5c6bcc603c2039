// Package api is the operator's view of Bulkhead: the objects an operator
// declares to a controller (`bulkhead apply -f FILE`) and reads back
// (`bulkhead get`), in the habit of Kubernetes — apiVersion, kind,
// metadata.name, spec, and a status the controller fills in:
//
//	apiVersion: bulkhead.dev/v1
//	kind: Tenant
//	metadata: {name: web}
//	spec:
//	  guarantee: 300Mbps
//	  vms: [{name: web-1, host: s1}, {name: web-2}]   # web-2 is placed by the controller
//
// Kinds: Cluster (one, named "default": the topology, VM slots per server,
// placement algorithm and the mechanism every agent runs), Host (a
// server of the topology and its agent's address), Tenant (VMs with hose
// guarantees and an optional virtual datacenter) and Appliance (a shared
// appliance with its costs). The fields of a spec are those of a scenario
// (docs/scenarios.md), so a tenant moves between a scenario and a cluster
// unchanged. Build turns a set of objects into the declared model
// (model.Model) and the topology; api/openapi.yaml is the schema of the
// objects and of the controller's HTTP API.
package api

import (
	"net/netip"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/units"
)

// Version is the apiVersion of every object.
const Version = "bulkhead.dev/v1"

// The kinds of objects.
const (
	KindCluster   = "Cluster"
	KindHost      = "Host"
	KindTenant    = "Tenant"
	KindAppliance = "Appliance"
)

// Kinds lists the kinds in the order a cluster is built: the cluster
// first, then hosts, appliances and tenants (which refer to the others).
var kinds = []string{KindCluster, KindHost, KindAppliance, KindTenant}

// Kinds returns the kinds in dependency order.
func Kinds() []string { return append([]string(nil), kinds...) }

// ClusterName is the name of the one Cluster object.
const ClusterName = "default"

// Meta is an object's metadata. Name is the operator's; the controller
// sets the others.
type Meta struct {
	Name string `json:"name" yaml:"name"`
	// ResourceVersion is the store revision at which the object was last
	// written.
	ResourceVersion string `json:"resourceVersion,omitempty" yaml:"resourceVersion,omitempty"`
	// Generation counts the changes of the object's spec, from 1.
	Generation int64 `json:"generation,omitempty" yaml:"generation,omitempty"`
	// CreationTimestamp is when the object was first stored.
	CreationTimestamp *time.Time `json:"creationTimestamp,omitempty" yaml:"creationTimestamp,omitempty"`
}

// Object is one declared object: Spec is *ClusterSpec, *HostSpec,
// *TenantSpec or *ApplianceSpec by Kind, and Status (filled by the
// controller when it reports the object) *TenantStatus or *HostStatus.
type Object struct {
	APIVersion string `json:"apiVersion" yaml:"apiVersion"`
	Kind       string `json:"kind" yaml:"kind"`
	Metadata   Meta   `json:"metadata" yaml:"metadata"`
	Spec       any    `json:"spec" yaml:"spec"`
	Status     any    `json:"status,omitempty" yaml:"status,omitempty"`
}

// Name returns the object's name.
func (o *Object) Name() string { return o.Metadata.Name }

// ClusterSpec is the datacenter the controller manages and how.
type ClusterSpec struct {
	// Topology is the physical network, as in a scenario.
	Topology spec.Topology `json:"topology" yaml:"topology"`
	// Slots is the number of VMs a server holds (default
	// place.DefaultSlots); placement fills no server beyond it.
	Slots int `json:"slots,omitempty" yaml:"slots,omitempty"`
	// Placement is the algorithm that places VMs declared without a host:
	// oktopus (default) or qshare (docs/placement.md).
	Placement string `json:"placement,omitempty" yaml:"placement,omitempty"`
	// Mechanism is what enforces the guarantees: its name and parameters,
	// as in a scenario (default none).
	Mechanism Mechanism `json:"mechanism,omitempty" yaml:"mechanism,omitempty"`
	// Seed picks every VM pair's ECMP route in the reservations (default
	// the scenario default).
	Seed int64 `json:"seed,omitempty" yaml:"seed,omitempty"`
}

// Mechanism names a mechanism and its parameters.
type Mechanism struct {
	Name   string         `json:"name,omitempty" yaml:"name,omitempty"`
	Params map[string]any `json:"params,omitempty" yaml:"params,omitempty"`
}

// HostSpec is a server of the cluster's topology (the object's name is the
// server's) and where its agent listens for its peers.
type HostSpec struct {
	// Address is the host's address on the control network: the agents
	// of other hosts send it the mechanism's messages there.
	Address netip.Addr `json:"address" yaml:"address"`
	// Port is the agents' UDP port (default DefaultAgentPort).
	Port int `json:"port,omitempty" yaml:"port,omitempty"`
}

// DefaultAgentPort is the UDP port on which agents exchange messages.
const DefaultAgentPort = 7471

// TenantSpec is a tenant: its VMs with hose guarantees, as in a scenario
// (Guarantee, In and Out are the defaults of its VMs), and an optional
// virtual datacenter.
type TenantSpec struct {
	Guarantee  units.Rate `json:"guarantee,omitempty" yaml:"guarantee,omitempty"`
	In         units.Rate `json:"in,omitempty" yaml:"in,omitempty"`
	Out        units.Rate `json:"out,omitempty" yaml:"out,omitempty"`
	BestEffort bool       `json:"best_effort,omitempty" yaml:"best_effort,omitempty"`
	Weight     float64    `json:"weight,omitempty" yaml:"weight,omitempty"`
	SLA        float64    `json:"sla,omitempty" yaml:"sla,omitempty"`
	VDC        *model.VDC `json:"vdc,omitempty" yaml:"vdc,omitempty"`
	VMs        []VMSpec   `json:"vms" yaml:"vms"`
	// Pattern, if given, lists the VM pairs that communicate: reservation
	// mechanisms (static) reserve rates for these pairs only.
	Pattern []model.Pair `json:"pattern,omitempty" yaml:"pattern,omitempty"`
}

// VMSpec is one VM. Without a Host the controller places it (and records
// the host in the stored object). On its host a VM is a network device
// (Interface, e.g. a tap or veth, in the host's namespace or in Netns)
// with its addresses.
type VMSpec struct {
	Name      string       `json:"name" yaml:"name"`
	Host      string       `json:"host,omitempty" yaml:"host,omitempty"`
	Guarantee units.Rate   `json:"guarantee,omitempty" yaml:"guarantee,omitempty"`
	In        units.Rate   `json:"in,omitempty" yaml:"in,omitempty"`
	Out       units.Rate   `json:"out,omitempty" yaml:"out,omitempty"`
	Addrs     []netip.Addr `json:"addrs,omitempty" yaml:"addrs,omitempty"`
	Interface string       `json:"interface,omitempty" yaml:"interface,omitempty"`
	Netns     string       `json:"netns,omitempty" yaml:"netns,omitempty"`
}

// Hose returns the VM's resolved hose guarantees (bits/s), each direction
// the first nonzero of the VM's In/Out, the VM's Guarantee, the tenant's
// In/Out and the tenant's Guarantee; zero for a best-effort tenant.
func (t *TenantSpec) Hose(v *VMSpec) (in, out float64) {
	if t.BestEffort {
		return 0, 0
	}
	first := func(rs ...units.Rate) float64 {
		for _, r := range rs {
			if r != 0 {
				return float64(r)
			}
		}
		return 0
	}
	return first(v.In, v.Guarantee, t.In, t.Guarantee), first(v.Out, v.Guarantee, t.Out, t.Guarantee)
}

// ApplianceSpec is a shared appliance, as in a scenario; its name is the
// object's (spec.name, if given, must be the same).
type ApplianceSpec = model.Appliance

// TenantStatus is what the controller reports about a tenant.
type TenantStatus struct {
	// VMs are where the tenant's VMs are and how they fare.
	VMs []VMStatus `json:"vms,omitempty" yaml:"vms,omitempty"`
	// Achieved is the tenant's received throughput over the last report
	// interval (bits/s), Guarantee the sum of its VMs' receive guarantees.
	Achieved  float64 `json:"achieved,omitempty" yaml:"achieved,omitempty"`
	Guarantee float64 `json:"guarantee,omitempty" yaml:"guarantee,omitempty"`
	// Compliance is the fraction of report intervals, since the tenant
	// was applied, in which every VM with demand got at least 95% of its
	// guarantee or all it asked for.
	Compliance *float64 `json:"compliance,omitempty" yaml:"compliance,omitempty"`
	// Below says that in the latest interval a VM of the tenant got less
	// than 95% of its guarantee while its limiter or a full link held it
	// back (what Compliance counts against it).
	Below bool `json:"below,omitempty" yaml:"below,omitempty"`
	// Links are the tenant's hose reservations on the topology.
	Links []LinkReservation `json:"links,omitempty" yaml:"links,omitempty"`
}

// VMStatus is one VM's placement and rates.
type VMStatus struct {
	Name string  `json:"name" yaml:"name"`
	Host string  `json:"host" yaml:"host"`
	In   float64 `json:"in,omitempty" yaml:"in,omitempty"`   // guarantee, bits/s
	Out  float64 `json:"out,omitempty" yaml:"out,omitempty"` // guarantee, bits/s
	// Received and Sent are the VM's measured rates (bits/s) over the
	// last interval, when an agent reports them.
	Received float64 `json:"received,omitempty" yaml:"received,omitempty"`
	Sent     float64 `json:"sent,omitempty" yaml:"sent,omitempty"`
}

// LinkReservation is a tenant's hose reservation on one directed link.
type LinkReservation struct {
	Link string  `json:"link" yaml:"link"`
	Rate float64 `json:"rate" yaml:"rate"` // bits/s
}

// HostStatus is what the controller knows of a host's agent.
type HostStatus struct {
	Connected  bool       `json:"connected" yaml:"connected"`
	LastReport *time.Time `json:"lastReport,omitempty" yaml:"lastReport,omitempty"`
	Version    string     `json:"version,omitempty" yaml:"version,omitempty"`
	VMs        int        `json:"vms" yaml:"vms"`
	// Revision is the store revision of the model the agent enforces.
	Revision int64 `json:"revision,omitempty" yaml:"revision,omitempty"`
	// Steps is the mechanism steps the agent ran, StepSeconds their mean
	// duration, LimitFailures the limiter and scheduler writes that
	// failed, Dropped the peers' messages it dropped by reason.
	Steps         uint64            `json:"steps,omitempty" yaml:"steps,omitempty"`
	StepSeconds   float64           `json:"stepSeconds,omitempty" yaml:"stepSeconds,omitempty"`
	LimitFailures uint64            `json:"limitFailures,omitempty" yaml:"limitFailures,omitempty"`
	Dropped       map[string]uint64 `json:"dropped,omitempty" yaml:"dropped,omitempty"`
}
