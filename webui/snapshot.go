package webui

import "time"

// Snapshot is the cluster as the controller sees it at one instant: what
// every page of the UI draws from. Rates are bits/s, appliance figures
// tokens/s. A value the controller does not know (no fresh report, a
// follower) is null, never zero.
type Snapshot struct {
	// Seq numbers the snapshots the UI's loop made (0: made on request,
	// outside the loop).
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Controller is who serves the UI and who leads.
	Controller Controller `json:"controller"`
	// Tenants, below their guarantee first, then by lowest compliance,
	// then by name.
	Tenants []Tenant `json:"tenants"`
	// Links, the most utilized first (by measured utilization, then by
	// reservation).
	Links      []Link      `json:"links"`
	Appliances []Appliance `json:"appliances"`
	Agents     []Agent     `json:"agents"`
	// Notes explain what is missing (no cluster declared, a link's rates
	// not measured, history not kept for every VM).
	Notes []string `json:"notes,omitempty"`
	// HistorySeconds is the span the history keeps (and Tenant.Mean and
	// Worst cover at most).
	HistorySeconds float64 `json:"historySeconds"`
}

// Controller is the controller serving the UI.
type Controller struct {
	// ID is this controller's API URL; Leader the leader's, as last known.
	ID      string `json:"id"`
	Leading bool   `json:"leading"`
	Leader  string `json:"leader,omitempty"`
	// Mechanism is the cluster's; Revision the store revision shown.
	Mechanism string `json:"mechanism,omitempty"`
	Revision  int64  `json:"revision,omitempty"`
	// Central describes the cluster's central controller, when its
	// mechanism has one running here.
	Central *Central `json:"central,omitempty"`
}

// Central is the leader's central controller (Pulsar's).
type Central struct {
	Running     bool    `json:"running"`
	Steps       uint64  `json:"steps"`
	StepSeconds float64 `json:"stepSeconds"`
	Flows       int     `json:"flows"`
	Dropped     uint64  `json:"dropped"`
}

// Tenant is one tenant's row.
type Tenant struct {
	Name       string `json:"name"`
	BestEffort bool   `json:"bestEffort,omitempty"`
	// Guarantee is the sum of its VMs' receive guarantees.
	Guarantee float64 `json:"guarantee"`
	// Achieved is what its VMs received in the agents' latest reports
	// (null while none is fresh, or on a follower).
	Achieved *float64 `json:"achieved"`
	// Below: in the latest compliance interval a VM of the tenant got
	// less than 95% of its guarantee while a limiter toward it or a full
	// link into its host held it back (the rule of `bulkhead get
	// tenants`).
	Below bool `json:"below"`
	// Compliance is the fraction of intervals, since the tenant was
	// applied, in which it was not below its guarantee.
	Compliance *float64 `json:"compliance"`
	// Mean is Achieved averaged over the history (MeanSeconds of it),
	// Worst its lowest one-second value there, BelowSeconds the seconds
	// in which the tenant was below its guarantee there.
	Mean         *float64 `json:"mean"`
	MeanSeconds  float64  `json:"meanSeconds"`
	Worst        *float64 `json:"worst"`
	BelowSeconds int      `json:"belowSeconds"`
	VMCount      int      `json:"vmCount"`
	// VMs are only in the snapshot of one tenant (?tenant=NAME).
	VMs []VM `json:"vms,omitempty"`
	// VDC are its appliance guarantees and what it uses of each.
	VDC []VDCGuarantee `json:"vdc,omitempty"`
}

// VM is one VM of a tenant.
type VM struct {
	Name string `json:"name"`
	Host string `json:"host"`
	// In and Out are its hose guarantees.
	In  float64 `json:"in"`
	Out float64 `json:"out"`
	// Received and Sent are its rates in its agent's latest report.
	Received *float64 `json:"received"`
	Sent     *float64 `json:"sent"`
}

// VDCGuarantee is a tenant's guarantee on an appliance (tokens/s) and
// what its flows to it used in the latest reports.
type VDCGuarantee struct {
	Appliance string   `json:"appliance"`
	Guarantee float64  `json:"guarantee"`
	Max       float64  `json:"max,omitempty"`
	Used      *float64 `json:"used"`
}

// Link is one direction of a physical link.
type Link struct {
	Name     string  `json:"name"`
	From     string  `json:"from"`
	To       string  `json:"to"`
	Capacity float64 `json:"capacity"`
	// Reserved is what admission reserved on it for the tenants' hose
	// guarantees, Reservations by tenant (largest first).
	Reserved     float64       `json:"reserved"`
	Reservations []Reservation `json:"reservations,omitempty"`
	// Used is the rate the agents' latest reports put on it (null: not
	// measured), and Source how: "vms" (a server's access link: what its
	// VMs sent or received, from their interfaces' counters) or "pairs"
	// (other links: the reported rates of VM pairs, on the route
	// admission reserves them on).
	Used   *float64 `json:"used"`
	Source string   `json:"source,omitempty"`
}

// Reservation is one tenant's reservation on a link.
type Reservation struct {
	Tenant string  `json:"tenant"`
	Rate   float64 `json:"rate"`
}

// Appliance is a shared appliance (tokens/s).
type Appliance struct {
	Name       string `json:"name"`
	Server     string `json:"server,omitempty"`
	Hypervisor bool   `json:"hypervisor,omitempty"`
	// Throughput is what every flow to it used in the latest reports
	// (null: no flow reported).
	Throughput *float64 `json:"throughput"`
	// Estimate is the central controller's capacity estimate at its
	// latest step (null: no central controller estimates it).
	Estimate    *float64 `json:"estimate"`
	CapacityMin float64  `json:"capacityMin,omitempty"`
	CapacityMax float64  `json:"capacityMax,omitempty"`
	// Tenants are the tenants with a guarantee on it or flows to it.
	Tenants []ApplianceTenant `json:"tenants,omitempty"`
}

// ApplianceTenant is a tenant's use of an appliance.
type ApplianceTenant struct {
	Tenant    string   `json:"tenant"`
	Guarantee float64  `json:"guarantee"`
	Used      *float64 `json:"used"`
}

// Agent is a declared host's agent.
type Agent struct {
	Host      string `json:"host"`
	Connected bool   `json:"connected"`
	// LastReport is when it last reported to this controller.
	LastReport *time.Time `json:"lastReport"`
	Version    string     `json:"version,omitempty"`
	// Revision is the store revision of the model it enforces.
	Revision      int64             `json:"revision,omitempty"`
	VMs           int               `json:"vms"`
	Steps         uint64            `json:"steps"`
	StepSeconds   float64           `json:"stepSeconds"`
	LimitFailures uint64            `json:"limitFailures"`
	Dropped       map[string]uint64 `json:"dropped,omitempty"`
}

// withVMsOf is s with the VMs of tenant only (none if tenant is empty):
// a copy of the tenants, sharing the rest.
func (s *Snapshot) withVMsOf(tenant string) *Snapshot {
	c := *s
	c.Tenants = make([]Tenant, len(s.Tenants))
	for i, t := range s.Tenants {
		if t.Name != tenant {
			t.VMs = nil
		}
		c.Tenants[i] = t
	}
	return &c
}
