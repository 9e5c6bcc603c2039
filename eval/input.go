// Package eval is the oracle and the evaluation of a run: what an ideal
// system would have delivered on the same demands at the same instant, and
// how the run compares (guarantee compliance, hose and VDC, work
// conservation, fairness, FCTs, appliance utilization) in a Report.
// Package report writes Reports as JSON, Markdown, CSV and PNG/SVG plots.
package eval

import "time"

// PairSample is one VM pair's state averaged over one sample interval.
//
// A pair that has traffic to offer for only part of the interval (a phase,
// an on period or a flow that starts or ends within it) says which part
// with Active and ActiveFrom; the oracle then guarantees it, and counts its
// ideal rate, only over that part (see Evaluate). Left zero, the pair is
// taken as active over the whole interval whenever its demand is positive.
type PairSample struct {
	Rate float64 // achieved throughput, bits/s, mean over the interval
	// Demand is the offered demand, bits/s: for bounded traffic (UDP,
	// rate-capped TCP) its mean over the interval; +Inf when unbounded
	// connections (bulk or sized TCP) were active for at least half of the
	// time the pair was active (of the interval, when Active is not
	// recorded).
	Demand float64
	// Active is the fraction of the interval during which the pair had
	// traffic to offer (at least one active connection), in [0, 1];
	// ActiveFrom is the fraction of the interval that had passed when it
	// first had. The oracle takes the pair as active over [ActiveFrom,
	// ActiveFrom+Active) of the interval, offering Demand ÷ Active while
	// active: exact when its activity is one stretch, its amount kept and
	// its position approximate otherwise. Active = 0: not recorded (the
	// whole interval when Demand > 0).
	Active, ActiveFrom float64
}

// Pair is a directed VM pair of one tenant, with the physical route its
// traffic takes (link IDs into the topology).
type Pair struct {
	Tenant   string
	Src, Dst string
	Links    []int
}

// Sample is the state of all pairs over [T-Interval, T).
type Sample struct {
	T     time.Duration
	Pairs []PairSample // indexed like Input.Pairs
	// Requests is the throughput of each request flow, indexed like
	// Input.RequestFlows.
	Requests []RequestSample
	// ApplianceBusy is each appliance's utilization over the interval
	// (the fraction of its service capacity in use, 0–1), indexed like
	// Input.Appliances; empty when the input has no appliances.
	ApplianceBusy []float64
	// ApplianceCapacity is each appliance's capacity in tokens/s for the
	// request mix it served in the interval (tokens served ÷ the time it
	// was busy; 0 when idle): what a perfect capacity estimate would say.
	// Optional (nil: unknown).
	ApplianceCapacity []float64
}

// RequestFlow is a VM's request stream to an appliance (Pulsar).
type RequestFlow struct {
	Tenant    string
	Src       string
	Appliance string
}

// RequestSample is a request flow's throughput over one sample interval.
type RequestSample struct {
	Requests float64 // requests/s served
	Tokens   float64 // tokens/s at the appliance (its virtual cost)
}

// Estimate is a controller's capacity estimate of an appliance at one
// control step (tokens/s).
type Estimate struct {
	T         time.Duration
	Appliance string
	Tokens    float64
}

// FCT is one finished flow.
type FCT struct {
	Tenant   string
	Src, Dst string
	Bytes    float64
	Start    time.Duration
	Duration time.Duration
}

// Input is everything the evaluation needs from a run.
type Input struct {
	Scenario  string // name
	Mechanism string
	Duration  time.Duration
	Interval  time.Duration // sample interval
	Units     string        // report unit name, e.g. "Mbps"
	UnitScale float64       // bits/s per unit
	// Tenants with per-VM hose guarantees (bits/s) and policy weight.
	Tenants []Tenant
	// LinkCapacity[i] is the capacity (bits/s) of link ID i.
	LinkCapacity []float64
	LinkNames    []string
	Pairs        []Pair
	Samples      []Sample
	FCTs         []FCT
	// Request flows to appliances and the tenants' appliance guarantees
	// (tokens/s per appliance), and capacity estimates if the mechanism
	// makes them.
	RequestFlows        []RequestFlow
	ApplianceGuarantees map[string]map[string]float64 // tenant → appliance → tokens/s
	TokenScale          float64                       // tokens/s per report unit for appliance throughput
	Estimates           []Estimate
	// Appliances names the scenario's appliances (Sample.ApplianceBusy is
	// indexed like it).
	Appliances []string
	// Invalid says why the measurements cannot be trusted (a real-traffic
	// run whose samples came late, or show rates its links cannot carry);
	// empty when they can. The report carries it.
	Invalid []string
}

// Tenant as the oracle sees it.
type Tenant struct {
	Name string
	VMs  []VM
}

// VM with its hose guarantees.
type VM struct {
	Name    string
	In, Out float64 // bits/s
}
