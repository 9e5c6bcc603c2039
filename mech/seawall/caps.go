package seawall

import (
	"fmt"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch/ra"
)

// Capabilities implements mech.Mechanism: per-pair limiters at sources
// and per-pair losses.
func (m *Mechanism) Capabilities() mech.Capabilities {
	return mech.Capabilities{PairLimits: true, Losses: true}
}

// ForLosses implements mech.LossAdapter (see ra.ForLosses).
func (m *Mechanism) ForLosses(side mech.LossSide) (mech.Mechanism, error) {
	c := *m
	if err := ra.ForLosses(&c.cfg.RA, c.congestionSet, side); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &c, nil
}
