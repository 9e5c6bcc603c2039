package drx

import "github.com/bulkhead-dc/bulkhead/mech"

// Capabilities implements mech.Mechanism: caps on VMs' egress, from what
// VMs' applications demand against their SLA; the distributed scope adds
// the platform manager (Distributed).
func (m *Mechanism) Capabilities() mech.Capabilities {
	return mech.Capabilities{Schedulers: true, VMDemand: true}
}

// Capabilities implements mech.Mechanism for the distributed scope.
func (d *Distributed) Capabilities() mech.Capabilities {
	c := d.Mechanism.Capabilities()
	c.Central = true
	return c
}
