package ra

import (
	"fmt"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// ForLosses sets where cfg takes congestion from for a driver whose loss
// counter sees losses on side (mech.LossAdapter of ElasticSwitch and
// Seawall). At the destination, congestion comes from the receivers'
// feedback (FromReceiver) unless the parameters asked for FromBoth; at the
// source, from the egress observations. explicit says whether the
// parameters set "congestion": a choice that would see no loss at all is
// an error.
func ForLosses(cfg *Config, explicit bool, side mech.LossSide) error {
	switch side {
	case mech.LossAtSource:
		if cfg.Congestion == FromReceiver {
			return fmt.Errorf("mechanism.params.congestion is receiver, but the loss counter sees losses at the senders only: use egress (default) or both")
		}
	case mech.LossAtDestination:
		switch {
		case !explicit:
			cfg.Congestion = FromReceiver
		case cfg.Congestion == FromEgress:
			return fmt.Errorf("mechanism.params.congestion is egress, but the loss counter sees losses at the receivers: use receiver or both")
		}
	default:
		return fmt.Errorf("unknown loss side %d", side)
	}
	return nil
}
