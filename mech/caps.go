package mech

// Capabilities says what a mechanism needs from whatever drives it, so that
// drivers (the simulator, the emulated testbed, host agents) ask instead
// of knowing mechanisms by name.
type Capabilities struct {
	// PairLimits: its agents set PairLimit limits, so every VM pair needs
	// a limiter at its source.
	PairLimits bool
	// Schedulers: its agents install per-VM schedulers on hosts' access
	// links and set VMEgress/VMIngress limits.
	Schedulers bool
	// Losses: its agents react to per-pair losses (PairObs.Losses), so
	// hosts need a loss counter.
	Losses bool
	// Central: it has a central controller (it implements Central).
	Central bool
	// VMDemand: its agents or controller read what VMs' applications
	// demand (VMObs.OutDemand, InDemand), which only the simulator knows
	// today.
	VMDemand bool
	// Appliances: it enforces guarantees on shared appliances, which needs
	// request-level enforcement in front of them.
	Appliances bool
	// SwitchQueues: its controller binds tenants to switch ports' WFQ
	// queues and sets the DSCP code points hosts mark tenants' packets
	// with (ControllerActions.Ports, DSCP).
	SwitchQueues bool
	// FastCentral: its controller steps on pair rates measured every few
	// milliseconds (hosefill, every 10 ms), faster than host agents report
	// to a controller (every second).
	FastCentral bool
	// Headroom is the fraction of every server's access link the
	// mechanism keeps free of guarantees (its schedulers serve at most
	// 1 − Headroom of the link): admission must fit the guarantees on
	// those links in the rest.
	Headroom float64
	// LiveTenants: its agents accept a new Env at runtime (they implement
	// EnvUpdater): tenants and VMs added, removed or their guarantees
	// changed without a restart.
	LiveTenants bool
}

// RealTraffic says whether host agents on real traffic can run a
// mechanism with these needs: per-host control over pair limiters,
// schedulers and loss counters, and, for a central controller, the
// allocations it sends each host for its VM pairs (enforced as pair
// limits, drive.CentralPairs). Switch queues and the demand of VMs'
// applications are beyond them. It returns a reason when they cannot.
// Flows to appliances need a request-aware enforcer in front of the
// appliance, which pair limiters are not: drivers that cannot put one
// there refuse models with appliances themselves.
func (c Capabilities) RealTraffic() (ok bool, why string) {
	switch {
	case c.SwitchQueues:
		return false, "it configures switch ports' WFQ queues and the DSCP marks of tenants' packets, which no driver on real hosts applies"
	case c.VMDemand:
		return false, "it reads the demand of VMs' applications, which hosts do not measure"
	case c.FastCentral:
		return false, "its controller needs pair rates every few milliseconds, and host agents report to a controller every second"
	}
	return true, ""
}

// EnvUpdater is implemented by agents that take a new Env at runtime
// (a tenant or VM added or removed, a guarantee changed), in the spirit
// of raft's configuration changes: the driver hands the change over
// between two steps, and the agent's next Step sees it. Env.Host does not
// change. Pairs whose VMs left are the agent's to forget; the driver
// removes their limiters.
type EnvUpdater interface {
	UpdateEnv(env Env) error
}

// LossSide says where a host measures per-pair losses.
type LossSide int

// Where losses are seen.
const (
	// LossAtSource: the source host counts its pairs' losses (TCP
	// retransmissions), reported in HostObs.Egress.
	LossAtSource LossSide = iota
	// LossAtDestination: the destination host counts them (gaps in
	// per-pair sequence numbers), reported in HostObs.Ingress.
	LossAtDestination
)

// String names the side.
func (s LossSide) String() string {
	if s == LossAtDestination {
		return "destination"
	}
	return "source"
}

// LossAdapter is implemented by mechanisms whose agents read losses on one
// side and can be set up for where a driver's loss counter sees them
// (ElasticSwitch, Seawall: from the source's observation, or from the
// receivers' congestion feedback). Adapt returns the mechanism configured
// for side, or an error when its parameters ask for the other side.
type LossAdapter interface {
	ForLosses(side LossSide) (Mechanism, error)
}
