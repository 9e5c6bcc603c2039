package qshare

import "github.com/bulkhead-dc/bulkhead/mech"

// Capabilities implements mech.Mechanism: a central controller that binds
// switch queues to tenants, and per-pair limiters at sources for the
// shared queue.
func (m *Mechanism) Capabilities() mech.Capabilities {
	return mech.Capabilities{PairLimits: true, Central: true, SwitchQueues: true}
}
