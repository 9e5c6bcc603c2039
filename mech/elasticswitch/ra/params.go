package ra

import (
	"fmt"

	"github.com/bulkhead-dc/bulkhead/spec"
)

// CoreParams are the scenario parameters of the RA algorithm itself, in
// the order they are documented:
//
//	ra_period    RA period (duration, "15ms")
//	alpha        multiplicative decrease α (0.4)
//	delta        concave increase constant δ (0.75)
//	increase     convex increase constant A (rate, "0.5Mbps")
//	time_scale   T_S (1.5)
//	aggressive   the §7.2 "More Aggr." preset: increase 2.5Mbps and
//	             time_scale 2.0 unless given (false)
//	weight_unit  the rate of weight 1 (rate, "450Mbps")
//	min_rate     the lowest limit RA sets (rate, "100Kbps")
//	event_packets  lost or marked packets that make one congestion event,
//	             fractions carrying over (1; 0: any loss in a period)
//	congestion   where congestion is taken from: egress, receiver or both
//	             (egress; see Detector)
//	congestion_signal
//	             what counts as congestion: loss, ecn or both (both, which
//	             is loss on a network without ECN; see Signal)
func CoreParams() []string {
	return []string{"ra_period", "alpha", "delta", "increase", "time_scale", "aggressive", "weight_unit", "min_rate",
		"event_packets", "congestion", "congestion_signal"}
}

// ImprovementParams are the parameters of ElasticSwitch's improvements
// over Seawall (§5):
//
//	hold_increase  Hold-Increase on (true)
//	gamma          its decay γ (0.75)
//	rate_caution   Rate-Caution on (true)
//	caution        C (0.5)
//	caution_min    C_min (0.3)
func ImprovementParams() []string {
	return []string{"hold_increase", "gamma", "rate_caution", "caution", "caution_min"}
}

// Parse reads the named parameters (a subset of CoreParams and
// ImprovementParams) from p into c, whose current values are the defaults,
// and validates the result. Errors are *spec.FieldError values such as
// "mechanism.params.alpha: expected a number, got "x"", joined. Parse does
// not reject unknown parameters: the caller calls p.Check with all the
// names it knows.
func Parse(p spec.Params, c *Config, names ...string) error {
	r := p.Reader()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	float := func(name string, dst *float64) {
		if want[name] {
			r.Float(dst, name)
		}
	}
	rate := func(name string, dst *float64) {
		if want[name] {
			r.Rate(dst, name)
		}
	}
	boolean := func(name string, dst *bool) {
		if want[name] {
			r.Bool(dst, name)
		}
	}
	if want["aggressive"] {
		aggr, err := p.Bool("aggressive", false)
		if err != nil {
			r.Add(err)
		} else if aggr {
			c.Increase, c.TimeScale = AggressiveIncrease, AggressiveTimeScale
		}
	}
	if want["ra_period"] {
		r.Duration(&c.Period, "ra_period")
	}
	float("alpha", &c.Alpha)
	float("delta", &c.Delta)
	rate("increase", &c.Increase)
	float("time_scale", &c.TimeScale)
	rate("weight_unit", &c.WeightUnit)
	rate("min_rate", &c.MinRate)
	float("event_packets", &c.EventPackets)
	boolean("hold_increase", &c.HoldIncrease)
	float("gamma", &c.Gamma)
	boolean("rate_caution", &c.RateCaution)
	float("caution", &c.Caution)
	float("caution_min", &c.CautionMin)
	if want["congestion"] {
		s, err := p.String("congestion", c.Congestion.String())
		if err != nil {
			r.Add(err)
		} else if src, ok := ParseSource(s); ok {
			c.Congestion = src
		} else {
			r.Add(&spec.FieldError{Path: "mechanism.params.congestion",
				Msg: fmt.Sprintf("expected egress, receiver or both, got %q", s)})
		}
	}
	if want["congestion_signal"] {
		s, err := p.String("congestion_signal", c.Signal.String())
		if err != nil {
			r.Add(err)
		} else if sig, ok := ParseSignal(s); ok {
			c.Signal = sig
		} else {
			r.Add(&spec.FieldError{Path: "mechanism.params.congestion_signal",
				Msg: fmt.Sprintf("expected loss, ecn or both, got %q", s)})
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	return c.Validate()
}
