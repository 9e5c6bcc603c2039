package static

import "github.com/bulkhead-dc/bulkhead/mech"

// Capabilities implements mech.Mechanism: per-pair limiters at sources,
// set once from the declared traffic pattern.
func (Mechanism) Capabilities() mech.Capabilities {
	return mech.Capabilities{PairLimits: true}
}
