package hosefill

import "github.com/bulkhead-dc/bulkhead/mech"

// Capabilities implements mech.Mechanism: a central controller whose
// allocations are enforced by pair limiters at the sources.
func (m *Mechanism) Capabilities() mech.Capabilities {
	return mech.Capabilities{PairLimits: true, Central: true, FastCentral: true}
}
