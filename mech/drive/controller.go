package drive

import (
	"fmt"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// ControllerUpdater is implemented by central controllers that take a new
// environment at runtime (tenants, VMs, VDCs added, removed or changed).
type ControllerUpdater interface {
	UpdateEnv(env mech.ControllerEnv) error
}

// Controller drives a mechanism's central controller.
type Controller struct {
	mname string
	ctl   mech.Controller
	env   mech.ControllerEnv
	per   time.Duration
	next  time.Duration
	steps int64
}

// NewController makes the central controller of m, or returns nil when m
// has none (it does not implement mech.Central).
func NewController(m mech.Mechanism, env mech.ControllerEnv) (*Controller, error) {
	c, ok := m.(mech.Central)
	if !ok {
		return nil, nil
	}
	for _, r := range env.Reservations {
		if r.Resource < 0 || r.Resource >= len(env.Resources) || env.Resources[r.Resource].Kind != mech.LinkResource {
			return nil, fmt.Errorf("drive: reservation of tenant %q on resource %d, which is not a link", r.Tenant, r.Resource)
		}
	}
	ctl, err := c.NewController(env)
	if err != nil {
		return nil, fmt.Errorf("mechanism %s: controller: %w", m.Name(), err)
	}
	p := ctl.Period()
	if p <= 0 {
		return nil, fmt.Errorf("mechanism %s: controller period %v is not positive", m.Name(), p)
	}
	return &Controller{mname: m.Name(), ctl: ctl, env: env, per: p}, nil
}

// Period is the controller's step period.
func (c *Controller) Period() time.Duration { return c.per }

// Due says whether a step is due at now (driver time).
func (c *Controller) Due(now time.Duration) bool { return now >= c.next }

// Env returns the controller's environment.
func (c *Controller) Env() *mech.ControllerEnv { return &c.env }

// Controller returns the mechanism's controller (for inspection).
func (c *Controller) Controller() mech.Controller { return c.ctl }

// Step runs one control interval and checks what the controller returned;
// messages get From mech.ControllerHost. On an error the actions must not
// be applied.
func (c *Controller) Step(obs *mech.ControllerObs) (mech.ControllerActions, error) {
	act := c.ctl.Step(obs)
	c.next = obs.Now + c.per
	c.steps++
	for i := range act.Messages {
		act.Messages[i].From = mech.ControllerHost
	}
	if err := CheckControllerActions(&act); err != nil {
		return act, fmt.Errorf("mechanism %s: %w", c.mname, err)
	}
	return act, nil
}

// Update hands a new environment to the controller, or refuses with
// ErrStaticEnv when it cannot take one.
func (c *Controller) Update(env mech.ControllerEnv) error {
	u, ok := c.ctl.(ControllerUpdater)
	if !ok {
		return fmt.Errorf("%w: mechanism %s's controller (restart it with the new model)", ErrStaticEnv, c.mname)
	}
	if err := u.UpdateEnv(env); err != nil {
		return fmt.Errorf("mechanism %s: controller: update: %w", c.mname, err)
	}
	c.env = env
	return nil
}
