// Package ra is ElasticSwitch's rate allocation (RA), §5 of Popa et al.,
// "ElasticSwitch: Practical Work-Conserving Bandwidth Guarantees for Cloud
// Computing" (SIGCOMM 2013): a weighted TCP-like control, after Seawall, of
// one VM-to-VM rate limiter at the source host, with ElasticSwitch's two
// improvements, Hold-Increase and Rate-Caution. (The third improvement,
// headroom, is a property of admission control: see mech/elasticswitch.)
//
// The limit of a pair X→Y is R = max(B, R_W_TCP(B, F)) where B is the
// pair's guarantee (its floor) and F the congestion feedback (§5). One Flow
// holds the state of one pair; Step advances it by one RA period. Both
// mech/elasticswitch (floor = the GP guarantee, weight ∝ guarantee, both
// improvements on) and mech/seawall (floor 0, weights from the VMs' hoses,
// both improvements off) drive this same code.
//
// The increase (§5, "The Seawall algorithm increases..."): after a
// congestion event the goal is the rate at which congestion was seen; below
// the goal the rate grows concavely by min(1, w·δ)·(goal − r)·(1 − Δt)³ per
// period, Δt being the time since that event divided by T_S (§7: "Δt =
// dt/T_S"); once the goal is reached, or Δt ≥ 1 (where the concave term has
// vanished), it grows convexly by n·w·A in the n-th period. On congestion
// the rate is cut multiplicatively: r ← max(B, (1 − α)·r), independently of
// the weight, r being the limit or, if the pair sent less than its limit
// in the period, what it sent (a limit it did not use is stale); the goal
// becomes that r.
//
// Congestion events. The feedback F is a count of lost packets, or of
// ECN-marked ones (see Signal and Detector). A period is a congestion
// event once EventPackets (1) of them have accumulated, fractions carrying
// over: a real data plane counts whole packets, so any loss is an event,
// while a fluid model's expected fractions of a packet make events at a
// frequency proportional to the pair's rate, as Hold-Increase's reasoning
// assumes (§5: flows "should experience congestion events in the ratio"
// of their rates).
//
// Hold-Increase (§5, §7): the pair keeps a history of congestion events
// that decays by γ^w per period (+1 per event) and does not increase while
// the history is ≥ γ. One event therefore holds the rate for ⌈1/w⌉ periods,
// a time inversely proportional to the guarantee, and k events in a row
// hold it about log(k)/(w·log(1/γ)) periods longer (the paper's
// exponential-decay variant, "logarithmic factor of the congestion
// events").
//
// The guarantee B may change from one period to the next (GP runs every
// few RA periods). The limit then moves with it, keeping what RA won above
// the old guarantee (r − B_old) on top of the new one: a pair whose limit
// sat on a guarantee that shrank does not keep it until enough congestion
// events bring it down, and one whose guarantee grows keeps its spare.
//
// Rate-Caution (§5): an increase V becomes V·max(1 − C·(r − B)/B, C_min).
//
// Weights. §5 weights a pair by its guarantee B ("the weight of the flow
// between VMs X and Y is B^{X→Y}") and §7 writes "w = 450Mbps/B"; only
// w = B / 450 Mbps makes both the increase proportional to the guarantee
// (shares of spare capacity ∝ guarantees, §3) and the Hold-Increase period
// inversely proportional to it (§5), so that is what the callers use, with
// 450 Mbps as Config.WeightUnit.
package ra

import (
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/spec"
)

// Config holds the RA constants. Rates are in bits/s.
type Config struct {
	// Period is the RA period (§7: 15 ms).
	Period time.Duration
	// Alpha is the multiplicative decrease: the rate falls to (1 − α) of
	// itself on congestion (§7: 0.4).
	Alpha float64
	// Delta is the concave increase constant δ (§7: 0.75).
	Delta float64
	// Increase is the convex increase constant A in bits/s (§7: 0.5 Mbps,
	// 2.5 Mbps "more aggressive").
	Increase float64
	// StartIncrease, when positive, is the convex increase A of a pair
	// that has met no congestion event yet (bits/s; 0: Increase). Not in
	// the paper: mech/elasticswitch sets it on hosts faster than the
	// paper's testbed, so that a lone pair climbs to the link as fast as
	// there, and keeps the paper's A once the network has pushed back.
	StartIncrease float64
	// TimeScale is T_S: Δt = (time since the last congestion) / T_S,
	// seconds (§7: 1.5, 2.0 "more aggressive").
	TimeScale float64
	// WeightUnit is the rate of weight 1 (§7: 450 Mbps): w = B / WeightUnit.
	WeightUnit float64
	// HoldIncrease enables Hold-Increase with decay γ^w (§5, §7: γ = 0.75).
	HoldIncrease bool
	Gamma        float64
	// RateCaution enables Rate-Caution with constants C and C_min (§5, §7:
	// 0.5 and 0.3).
	RateCaution         bool
	Caution, CautionMin float64
	// MinRate is the lowest limit RA sets, whatever the floor, so that a
	// pair with no guarantee (Seawall, or a VM with a zero hose) can still
	// send and probe; it also bounds the weight from below.
	MinRate float64
	// EventPackets is how many lost (or marked) packets make a congestion
	// event. Counts below it carry over to later periods, so that a pair
	// sees events at a frequency proportional to its loss rate, hence to
	// its rate (§5: "two flows ... should experience congestion events in
	// the ratio" of their rates), even when a fluid model reports fractions
	// of packets. Real data planes report whole packets, so 1 (the
	// default) means "any loss". 0: any positive count is an event.
	EventPackets float64
	// Congestion says where congestion is taken from (see Detector).
	Congestion Source
	// Signal says which signals are congestion: losses, ECN marks or
	// both (see Signal).
	Signal Signal
}

// Defaults returns the paper's constants (§7, "Less Aggr."): RA every
// 15 ms, α 0.4, δ 0.75, A 0.5 Mbps, T_S 1.5, weight unit 450 Mbps,
// Hold-Increase with γ 0.75, Rate-Caution with C 0.5 and C_min 0.3,
// congestion from the egress observations, losses and ECN marks alike.
func Defaults() Config {
	return Config{
		Period:       15 * time.Millisecond,
		Alpha:        0.4,
		Delta:        0.75,
		Increase:     0.5e6,
		TimeScale:    1.5,
		WeightUnit:   450e6,
		HoldIncrease: true,
		Gamma:        0.75,
		RateCaution:  true,
		Caution:      0.5,
		CautionMin:   0.3,
		MinRate:      100e3,
		EventPackets: 1,
		Congestion:   FromEgress,
		Signal:       SignalBoth,
	}
}

// Aggressive are the "More Aggr." constants of §7.2: A 2.5 Mbps, T_S 2.0.
const (
	AggressiveIncrease  = 2.5e6
	AggressiveTimeScale = 2.0
)

// Validate checks the constants' ranges. Problems are *spec.FieldError
// values named after the scenario parameters (mechanism.params.alpha, ...),
// joined.
func (c *Config) Validate() error {
	var pe spec.ParamErrors
	bad := pe.Bad
	if c.Period <= 0 {
		bad("ra_period", "must be positive, got %v", c.Period)
	}
	if !(c.Alpha > 0 && c.Alpha < 1) {
		bad("alpha", "must be in (0, 1), got %g", c.Alpha)
	}
	if !(c.Delta > 0 && c.Delta <= 1) {
		bad("delta", "must be in (0, 1], got %g", c.Delta)
	}
	if !(c.Increase >= 0) || math.IsInf(c.Increase, 0) {
		bad("increase", "must be a finite rate ≥ 0, got %g", c.Increase)
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0) {
		bad("time_scale", "must be positive and finite, got %g", c.TimeScale)
	}
	if !(c.WeightUnit > 0) || math.IsInf(c.WeightUnit, 0) {
		bad("weight_unit", "must be a positive finite rate, got %g", c.WeightUnit)
	}
	if c.HoldIncrease && !(c.Gamma > 0 && c.Gamma < 1) {
		bad("gamma", "must be in (0, 1), got %g", c.Gamma)
	}
	if c.RateCaution {
		if !(c.Caution >= 0) || math.IsInf(c.Caution, 0) {
			bad("caution", "must be finite and ≥ 0, got %g", c.Caution)
		}
		if !(c.CautionMin > 0 && c.CautionMin <= 1) {
			bad("caution_min", "must be in (0, 1], got %g", c.CautionMin)
		}
	}
	if !(c.MinRate > 0) || math.IsInf(c.MinRate, 0) {
		bad("min_rate", "must be a positive finite rate, got %g", c.MinRate)
	}
	if !(c.EventPackets >= 0) || math.IsInf(c.EventPackets, 0) {
		bad("event_packets", "must be a finite number ≥ 0, got %g", c.EventPackets)
	}
	if c.Congestion < FromEgress || c.Congestion > FromBoth {
		bad("congestion", "unknown source %d", c.Congestion)
	}
	if c.Signal < SignalBoth || c.Signal > SignalECN {
		bad("congestion_signal", "unknown signal %d", c.Signal)
	}
	return pe.Err()
}

// Input is what one RA period tells a Flow.
type Input struct {
	Now time.Duration
	// Floor is the guarantee B the limit never goes below (0: none).
	Floor float64
	// Weight is w (> 0); callers use Weight(rate, cfg).
	Weight float64
	// Rate is the pair's measured rate over the period (0 if unknown).
	Rate float64
	// Demanding says the pair used its limit (see Demanding); without it
	// the rate is not increased, since the limiter was not what held the
	// pair back (like TCP's congestion-window validation, RFC 7661).
	Demanding bool
	// Congested says congestion was reported for the pair in the period.
	Congested bool
	// Events is the number of packets reported lost (or ECN-marked) in
	// the period; they make a congestion event once EventPackets of them
	// have accumulated (see Config.EventPackets). Congested forces an
	// event whatever Events says.
	Events float64
}

// Flow is the RA state of one VM pair. The zero value is a flow that has
// not started: its first Step starts it at Start (or at the floor).
type Flow struct {
	// Rate is the current limit R, bits/s.
	Rate float64
	// Goal is the rate at the last congestion event (0: none yet).
	Goal float64
	// Since is the time of the last congestion event.
	Since time.Duration
	// N counts the periods of the current convex phase.
	N int
	// History is the decayed count of congestion events (Hold-Increase).
	History float64
	// Pending is the count of lost packets not yet making an event.
	Pending float64
	// Start is the rate the first Step starts from if above the floor.
	Start float64

	started bool
	floor   float64 // the floor of the previous Step
	// decay is γ^w for the weight decayW and the γ decayGamma (a pair's
	// weight seldom changes: math.Pow once per change, not per step)
	decay, decayW, decayGamma float64
}

// Weight returns the RA weight of a pair whose guarantee (ElasticSwitch)
// or weight rate (Seawall) is rate: rate / WeightUnit, at least
// MinRate / WeightUnit.
func Weight(rate float64, c *Config) float64 {
	return math.Max(rate, c.MinRate) / c.WeightUnit
}

// usedFraction is how close to its limit a pair must send to count as
// demanding when the observation does not say it was limiter-bound.
const usedFraction = 0.9

// Demanding reports whether a pair with the given measured rate, limit in
// force and limiter-bound flag used its limit: it was held back by it, or
// sent at ≥ 90% of it.
func Demanding(rate, limit float64, limiterBound bool) bool {
	return limiterBound || (limit > 0 && !math.IsInf(limit, 1) && rate >= usedFraction*limit)
}

// holdTol absorbs rounding in γ^w products when comparing with γ.
const holdTol = 1e-9

// Holding reports whether Hold-Increase currently forbids increases.
func (f *Flow) Holding(c *Config) bool {
	return c.HoldIncrease && f.History >= c.Gamma*(1-holdTol)
}

// event adds the period's lost packets to Pending and reports whether they
// make a congestion event.
func (f *Flow) event(c *Config, in Input) bool {
	if e := in.Events; e > 0 {
		f.Pending += math.Min(e, math.Max(c.EventPackets, 1)) // +Inf: one event
	}
	if c.EventPackets == 0 {
		ev := in.Congested || f.Pending > 0
		f.Pending = 0
		return ev
	}
	if f.Pending >= c.EventPackets {
		f.Pending = math.Mod(f.Pending, c.EventPackets)
		return true
	}
	return in.Congested
}

// Step advances the flow by one RA period and returns the new limit R.
func (f *Flow) Step(c *Config, in Input) float64 {
	floor := math.Max(in.Floor, c.MinRate)
	w := in.Weight
	if !(w > 0) {
		w = c.MinRate / c.WeightUnit
	}
	if !f.started {
		f.started = true
		f.Rate = math.Max(f.Start, floor)
		f.Since = in.Now
		f.floor = floor
		return f.Rate
	}
	if floor != f.floor {
		// The guarantee changed: the limit keeps what RA won above the
		// old guarantee, on top of the new one.
		f.Rate = math.Max(floor, f.Rate+floor-f.floor)
	}
	f.floor = floor
	if c.HoldIncrease {
		if w != f.decayW || c.Gamma != f.decayGamma || f.decay == 0 {
			f.decay, f.decayW, f.decayGamma = math.Pow(c.Gamma, w), w, c.Gamma
		}
		f.History *= f.decay
	}
	if f.event(c, in) {
		// Cut from what the pair sent if that is below its limit: a
		// limit it did not use is stale (as TCP reduces a non-validated
		// window from what was in flight, RFC 7661 §4.4).
		base := f.Rate
		if in.Rate > 0 && in.Rate < base {
			base = in.Rate
		}
		f.Goal = base
		f.Since = in.Now
		f.N = 0
		if c.HoldIncrease {
			f.History++
		}
		f.Rate = math.Max(floor, (1-c.Alpha)*base)
		return f.Rate
	}
	if f.Rate < floor {
		f.Rate = floor
	}
	if !in.Demanding || f.Holding(c) {
		return f.Rate
	}
	var v float64
	dt := (in.Now - f.Since).Seconds() / c.TimeScale
	if f.Goal > 0 && f.Rate < f.Goal && dt < 1 {
		v = math.Min(1, w*c.Delta) * (f.Goal - f.Rate) * math.Pow(1-dt, 3)
	} else {
		f.N++
		a := c.Increase
		if f.Goal == 0 && c.StartIncrease > 0 {
			a = c.StartIncrease // no congestion met yet
		}
		v = float64(f.N) * w * a
	}
	if c.RateCaution && in.Floor > 0 {
		v *= math.Max(1-c.Caution*(f.Rate-in.Floor)/in.Floor, c.CautionMin)
	}
	f.Rate += v
	return f.Rate
}

// Clamp lowers the flow's rate to max if it is above (a cap the caller
// enforces on top of RA, such as ElasticSwitch's edge ceilings): the next
// increase starts from there.
func (f *Flow) Clamp(max float64) {
	if f.Rate > max {
		f.Rate = max
	}
}
