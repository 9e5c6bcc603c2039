package pulsar

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/spec"
)

// Scope says which physical resources a controller allocates. The other
// resources are left unprotected: their entries in allocation vectors are
// +Inf (mech.Unlimited).
type Scope string

// Scopes. "all" is Pulsar; the two others are the comparison classes of
// Pulsar §6.1 (Fig. 13).
const (
	// ScopeAll allocates links and appliances (Pulsar).
	ScopeAll Scope = "all"
	// ScopeAppliances allocates appliances only: appliances are shared in
	// proportion to guarantees, the network is unprotected (the
	// DRFQ/Pisces/IOFlow class).
	ScopeAppliances Scope = "appliances"
	// ScopeNetwork allocates links only: hose guarantees on links,
	// appliances FIFO (the Hadrian/ElasticSwitch class).
	ScopeNetwork Scope = "network"
)

// Policy names an allocation policy (an MRA mechanism, Pulsar §4.1).
type Policy string

// Policies. Local allocations take DRF, MaxMin or FirstFit; the global
// allocation takes any of the four.
const (
	// DRF is weighted Dominant Resource Fairness (alloc.DRF).
	DRF Policy = "drf"
	// HDRF is hierarchical DRF with groups = tenants (alloc.HDRF).
	HDRF Policy = "hdrf"
	// MaxMin is weighted max-min on each flow's largest demand (alloc.MaxMin).
	MaxMin Policy = "maxmin"
	// FirstFit serves flows in order, each as much as fits (alloc.FirstFit).
	FirstFit Policy = "firstfit"
)

// Global weight sources (Params.GlobalWeight): how a tenant's weight in the
// global allocation is derived from its VDC when VDC.GlobalWeight is 0. A
// tenant whose derived weight is below 1 (no such guarantees) weighs 1
// token/s.
const (
	// WeightMax: the tenant's largest single guarantee in tokens/s on the
	// resources the controller allocates — a VM's In/8 or Out/8, or an
	// appliance's Min (scope appliances: appliances only; scope network: VM
	// links only). H-DRF compares tenants resource by resource, so the
	// guarantee a tenant holds on one resource is what its weight should
	// scale with; a sum over all its VMs would let a large tenant outweigh
	// a small one on a resource where their guarantees are equal.
	WeightMax = "max"
	// WeightTotal: the tenant's total guarantee in tokens/s, Σ over its VMs
	// of (In + Out)/8 plus Σ over its appliances of Min.
	WeightTotal = "total"
	// WeightAppliances: Σ over its appliances of Min.
	WeightAppliances = "appliances"
	// WeightNetwork: Σ over its VMs of (In + Out)/8.
	WeightNetwork = "network"
	// WeightEqual: 1 for every tenant.
	WeightEqual = "equal"
)

// Params are a Pulsar controller's parameters. The names in brackets are
// the keys under mechanism.params.
type Params struct {
	// Interval is the control interval [interval]; default 1s (§5).
	Interval time.Duration
	// EWMA is the weight of the newest demand estimate in the controller's
	// moving average (§4.2: "smoothens these estimates through an
	// exponentially weighted moving average"; the paper gives no value)
	// [ewma]; default 0.5, in (0, 1]; 1 disables smoothing.
	EWMA float64
	// Headroom is the fraction of every link's capacity kept out of the
	// global allocation for new flows' default rates (§5: 2–5%)
	// [headroom]; default 0.03, in [0, 0.5].
	Headroom float64
	// DefaultRate is the rate in tokens/s on every resource of a flow's
	// path for flows that were never allocated (ControllerActions
	// .DefaultRate) and the floor of allocations where a flow's demand is
	// below it and the flow is not held back, so that an idle flow can
	// show it wants more again (held back there, it gets its guarantee's
	// share at the next step) [default_rate]; default 1e6 (1 MB/s on links
	// ≈ 8 Mbit/s); 0 = unlimited for new flows, no floor. Until traffic is
	// first seen, new flows run at the smallest equal share of a guarantee
	// any flow of the declared model can have when that is larger (the
	// start rate: guarantees from a flow's first moments). A new flow from
	// a VM runs at that VM's default rate instead (ControllerActions
	// .DefaultBySrc, vmDefaults) when its share of what is left of its
	// tenant's guarantees is larger.
	DefaultRate float64
	// LocalPolicy is the local policy of tenants whose VDC.Policy is empty
	// [local_policy]: "drf" (default), "maxmin" or "firstfit".
	LocalPolicy Policy
	// GlobalPolicy is the provider's policy for spare capacity
	// [global_policy]: "hdrf" (default), "drf", "maxmin" or "firstfit".
	GlobalPolicy Policy
	// GlobalWeight says how tenants' global weights are derived from their
	// guarantees when VDC.GlobalWeight is 0 [global_weight]: "max"
	// (default), "total", "appliances", "network" or "equal".
	GlobalWeight string
	// Alpha is the sensitivity of the stable-phase capacity adjustment,
	// eq. (7): C[i+1] = C[i] − α·(O[i] − O_s) with α = Alpha·C[i]/O_s, so
	// that Alpha is dimensionless — O 10% above O_s lowers the estimate by
	// Alpha·10% (the paper gives α neither units nor a value); each step
	// is at most Tolerance·C (see CapacityEstimator) [alpha]; default 0.5,
	// ≥ 0.
	Alpha float64
	// Readings is the number of consecutive intervals a congestion or
	// workload-change signal must persist before the stable phase reacts
	// (§5: 3), and a shortfall within Tolerance behind a short queue
	// before the search counts it as congestion [readings]; default 3,
	// ≥ 1.
	Readings int
	// StableThreshold: the capacity search is stable once the probing
	// window is narrower than this fraction of its maximum (§4.3: 1%)
	// [stable_threshold]; default 0.01, in (0, 1).
	StableThreshold float64
	// RestartThreshold: a workload at an appliance that moves more than
	// this from the one at the start of the stable phase restarts the
	// search (§4.3: 10%) [restart_threshold]; default 0.10, > 0.
	RestartThreshold float64
	// ProbeIntervals: once the capacity search is stable, this many
	// consecutive intervals in which the appliance served the estimate it
	// was handed in full, without a queue, start a probe above the
	// estimate (steps that double while the appliance keeps up, then the
	// search; see CapacityEstimator), so that an appliance that has
	// become faster under the same workload is found; each probe may
	// overload the appliance for an interval. 0 (the default, as in
	// Pulsar §4.3) never probes: the stable phase then only lowers its
	// estimate, and the search restarts on a workload change
	// [probe_intervals]; ≥ 0.
	ProbeIntervals int
	// Tolerance is the relative margin of "clearly below" in congestion
	// signals (throughput below the estimate, a tenant below its
	// guarantee) and of "allocation bound" in demand estimation
	// [tolerance]; default 0.02, in [0, 0.5).
	Tolerance float64
	// QueueDelay: an appliance is queueing when the queueing delay its
	// requests wait there exceeds this fraction of the round trip its
	// flows' requests take when nothing queues (see CapacityEstimator and
	// Controller for how the delay is derived from the flows' outstanding
	// requests). Queueing gates the throughput and VDC-violation signals
	// and ends the wait phase [queue_delay]; default 0.5, in (0, 100].
	QueueDelay float64
	// ForgetIntervals: a flow without observations for this many intervals
	// is forgotten and its enforcer reset to the default rate
	// [forget_intervals]; default 5, ≥ 1.
	ForgetIntervals int
	// Scope is what the controller allocates [scope]: "all" (default),
	// "appliances" or "network".
	Scope Scope
}

// DefaultParams returns Pulsar's parameters from the paper and the design
// brief.
func DefaultParams() Params {
	return Params{
		Interval:         time.Second,
		EWMA:             0.5,
		Headroom:         0.03,
		DefaultRate:      1e6,
		LocalPolicy:      DRF,
		GlobalPolicy:     HDRF,
		GlobalWeight:     WeightMax,
		Alpha:            0.5,
		Readings:         3,
		StableThreshold:  0.01,
		RestartThreshold: 0.10,
		Tolerance:        0.02,
		QueueDelay:       0.5,
		ForgetIntervals:  5,
		Scope:            ScopeAll,
	}
}

// paramNames lists the keys ParseParams knows.
var paramNames = []string{
	"interval", "ewma", "headroom", "default_rate", "local_policy", "global_policy",
	"global_weight", "alpha", "readings", "stable_threshold", "restart_threshold",
	"tolerance", "queue_delay", "forget_intervals", "scope", "probe_intervals",
}

// ParseParams reads parameters as written under mechanism.params, starting
// from DefaultParams. Errors are *spec.FieldError values (joined), e.g.
//
//	mechanism.params.alpha: expected a number, got "x"
//	mechanism.params.ewma: must be in (0, 1], got 2
func ParseParams(params map[string]any) (Params, error) {
	return parseParams(params, "")
}

// parseParams parses params; fixedScope, when set, is the scope of a
// variant mechanism, which then rejects a scope parameter.
func parseParams(params map[string]any, fixedScope Scope) (Params, error) {
	p := DefaultParams()
	sp := spec.Params(params)
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	bad := func(name, format string, args ...any) {
		errs = append(errs, &spec.FieldError{Path: "mechanism.params." + name, Msg: fmt.Sprintf(format, args...)})
	}
	known := paramNames
	if fixedScope != "" {
		known = nil
		for _, n := range paramNames {
			if n != "scope" {
				known = append(known, n)
			}
		}
	}
	add(sp.Check(known...))

	var err error
	if p.Interval, err = sp.Duration("interval", p.Interval); err != nil {
		add(err)
	} else if p.Interval <= 0 {
		bad("interval", "must be > 0, got %v", p.Interval)
	}
	num := func(name string, v *float64, ok func(float64) bool, want string) {
		x, err := sp.Float(name, *v)
		if err != nil {
			add(err)
			return
		}
		if !ok(x) {
			bad(name, "must be %s, got %s", want, fmtNum(x))
			return
		}
		*v = x
	}
	integer := func(name string, v *int, lo int) {
		x, err := sp.Int(name, *v)
		if err != nil {
			add(err)
			return
		}
		if x < lo {
			bad(name, "must be ≥ %d, got %d", lo, x)
			return
		}
		*v = x
	}
	num("ewma", &p.EWMA, func(x float64) bool { return x > 0 && x <= 1 }, "in (0, 1]")
	num("headroom", &p.Headroom, func(x float64) bool { return x >= 0 && x <= 0.5 }, "in [0, 0.5]")
	num("default_rate", &p.DefaultRate, func(x float64) bool { return x >= 0 }, "≥ 0 (tokens/s; 0 = unlimited)")
	num("alpha", &p.Alpha, func(x float64) bool { return x >= 0 }, "≥ 0")
	num("stable_threshold", &p.StableThreshold, func(x float64) bool { return x > 0 && x < 1 }, "in (0, 1)")
	num("restart_threshold", &p.RestartThreshold, func(x float64) bool { return x > 0 }, "> 0")
	num("tolerance", &p.Tolerance, func(x float64) bool { return x >= 0 && x < 0.5 }, "in [0, 0.5)")
	num("queue_delay", &p.QueueDelay, func(x float64) bool { return x > 0 && x <= 100 }, "in (0, 100]")
	integer("readings", &p.Readings, 1)
	integer("forget_intervals", &p.ForgetIntervals, 1)
	integer("probe_intervals", &p.ProbeIntervals, 0)

	choice := func(name string, def string, allowed ...string) string {
		s, err := sp.String(name, def)
		if err != nil {
			add(err)
			return def
		}
		for _, a := range allowed {
			if s == a {
				return s
			}
		}
		bad(name, "unknown value %q (known: %s)", s, strings.Join(allowed, ", "))
		return def
	}
	p.LocalPolicy = Policy(choice("local_policy", string(p.LocalPolicy), string(DRF), string(MaxMin), string(FirstFit)))
	p.GlobalPolicy = Policy(choice("global_policy", string(p.GlobalPolicy), string(HDRF), string(DRF), string(MaxMin), string(FirstFit)))
	p.GlobalWeight = choice("global_weight", p.GlobalWeight, WeightMax, WeightTotal, WeightAppliances, WeightNetwork, WeightEqual)
	if fixedScope != "" {
		p.Scope = fixedScope
	} else {
		p.Scope = Scope(choice("scope", string(p.Scope), string(ScopeAll), string(ScopeAppliances), string(ScopeNetwork)))
	}
	return p, errors.Join(errs...)
}

func fmtNum(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return fmt.Sprint(x)
	}
	return fmt.Sprintf("%g", x)
}

// validate checks parameters built in Go rather than parsed (ParseParams
// reports the same problems with field paths).
func (p Params) validate() error {
	m := map[string]any{
		"interval": p.Interval.String(), "ewma": p.EWMA, "headroom": p.Headroom,
		"default_rate": p.DefaultRate, "local_policy": string(p.LocalPolicy),
		"global_policy": string(p.GlobalPolicy), "global_weight": p.GlobalWeight,
		"alpha": p.Alpha, "readings": p.Readings, "stable_threshold": p.StableThreshold,
		"restart_threshold": p.RestartThreshold, "tolerance": p.Tolerance,
		"queue_delay": p.QueueDelay, "forget_intervals": p.ForgetIntervals, "scope": string(p.Scope),
		"probe_intervals": p.ProbeIntervals,
	}
	q, err := ParseParams(m)
	if err != nil {
		return fmt.Errorf("invalid parameters: %w", err)
	}
	if q != p {
		return fmt.Errorf("invalid parameters: %+v", p)
	}
	return nil
}
