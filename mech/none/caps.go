package none

import "github.com/bulkhead-dc/bulkhead/mech"

// Capabilities implements mech.Mechanism: the baseline needs nothing, and
// its agents take any environment at runtime.
func (Mechanism) Capabilities() mech.Capabilities {
	return mech.Capabilities{LiveTenants: true}
}

// UpdateEnv implements mech.EnvUpdater: there is nothing to change.
func (agent) UpdateEnv(mech.Env) error { return nil }
