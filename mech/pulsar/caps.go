package pulsar

import "github.com/bulkhead-dc/bulkhead/mech"

// Capabilities implements mech.Mechanism: a central controller whose
// allocations are enforced per flow at the sources (pair limiters for
// VM-to-VM flows, request-aware enforcers for flows to appliances).
func (m *Mechanism) Capabilities() mech.Capabilities {
	return mech.Capabilities{PairLimits: true, Central: true, Appliances: true}
}
