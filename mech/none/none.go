// Package none is the "no protection" baseline: no limiter is ever set, so
// TCP and UDP share the network as they are (TCP per connection, UDP
// unresponsive).
package none

import (
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// Name of the mechanism.
const Name = "none"

// Mechanism is the no-protection baseline.
type Mechanism struct{}

// New returns the mechanism; it takes no parameters.
func New() Mechanism { return Mechanism{} }

// Name implements mech.Mechanism.
func (Mechanism) Name() string { return Name }

// NewAgent implements mech.Mechanism.
func (Mechanism) NewAgent(mech.Env) (mech.Agent, error) { return agent{}, nil }

type agent struct{}

// Period is a second: the agent sets nothing, but a host agent observes
// its VMs every step, and those counters are what it reports to the
// controller (tenants' rates and compliance, the web UI) and exports as
// metrics — the baseline must be as visible as the mechanisms it is
// compared with.
func (agent) Period() time.Duration { return time.Second }

func (agent) Step(*mech.HostObs, []mech.Message) mech.Actions { return mech.Actions{} }
