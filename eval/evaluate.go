package eval

import (
	"math"
	"sort"
	"time"
)

// ServedFraction: a VM is served in a direction when it achieves at least
// this fraction of its guaranteed rate in that direction.
const ServedFraction = 0.95

// Work-conservation scopes (Report.WorkConservationScope).
const (
	ScopeBottlenecks = "bottlenecks" // pairs crossing a link the ideal saturates
	ScopeAll         = "all"         // no bottleneck ever: all pairs
	ScopeNone        = "none"        // no ideal throughput at all: 1 by convention
)

// Report is the evaluation of one run against the oracle. Throughputs are
// in Units (UnitScale bits/s each), means are over all samples (each of
// IntervalS seconds), shares and ratios are in [0, 1].
//
// Definitions (see also docs in Evaluate):
//
//   - guarantee: a pair's hose guarantee for its current demand (Oracle); a
//     tenant's guarantee is the sum over its pairs, averaged over samples.
//     A pair active for only part of a sample (PairSample.Active) is
//     guaranteed only then: the sample is cut where pairs start or stop,
//     the Oracle solves every segment on the demands of the pairs active
//     in it, and the pair's guarantee over the sample is the mean of its
//     segments' guarantees weighted by their lengths (a pair active half
//     the sample at a guarantee G is guaranteed G/2 on average, which its
//     mean rate over the sample is compared with).
//   - ideal_throughput: the Oracle's ideal work-conserving allocation,
//     pro-rated the same way.
//   - compliance: served VM-seconds ÷ VM-seconds, counting a VM in a sample
//     for the part of it in which it has a positive guaranteed rate (sum of
//     its pairs' hose guarantees) in at least one direction; it is served
//     when in every such direction its achieved rate over the sample is ≥
//     ServedFraction × its guaranteed rate over the sample. 1 when nothing
//     is guaranteed (vm_seconds = 0).
//   - work_conservation: Σ achieved ÷ Σ ideal over the (sample, pair)
//     entries whose pair crosses a physical link that the ideal allocation
//     saturates while the pair is active ("on the bottlenecks"), clipped to
//     [0, 1]. If the ideal never saturates a link, over all entries (scope
//     "all"); if there is no ideal throughput at all, 1 (scope "none").
//   - throughput_ratio: Σ achieved ÷ Σ ideal over all entries, unclipped.
//   - jain: Jain's index of mean_throughput ÷ guarantee over the tenants with
//     a positive guarantee.
//   - spare_share: the tenant's part of Σ max(0, achieved − guarantee) (per
//     tenant and sample, summed over samples); ideal_spare_share the same for
//     the ideal; weight_share: its guarantee ÷ Σ guarantees, the share the
//     weights (= guarantees) entitle it to.
type Report struct {
	Scenario              string    `json:"scenario"`
	Mechanism             string    `json:"mechanism"`
	DurationS             float64   `json:"duration_s"`
	IntervalS             float64   `json:"interval_s"`
	Samples               int       `json:"samples"`
	Units                 string    `json:"units"`
	UnitScale             float64   `json:"unit_scale"` // bits/s per unit
	WorkConservation      float64   `json:"work_conservation"`
	WorkConservationScope string    `json:"work_conservation_scope"`
	ThroughputRatio       float64   `json:"throughput_ratio"`
	Compliance            float64   `json:"compliance"`
	VMSeconds             float64   `json:"vm_seconds"`
	Jain                  float64   `json:"jain"`
	MeanThroughput        float64   `json:"mean_throughput"`
	Guarantee             float64   `json:"guarantee"`
	IdealThroughput       float64   `json:"ideal_throughput"`
	FCT                   *FCTStats `json:"fct,omitempty"`
	// Worst is the tenant with the lowest compliance among those with a
	// guarantee (nil when none has one): the run-level compliance counts
	// VM-seconds, so a large tenant can hide a starved small one.
	Worst *WorstTenant `json:"worst_tenant,omitempty"`
	// Invalid says why the measurements cannot be trusted (eval.Input's
	// Invalid); the figures are then not results.
	Invalid []string       `json:"invalid,omitempty"`
	Tenants []TenantReport `json:"tenants"`
	// Appliances: per tenant and appliance, token throughput against the
	// VDC guarantee (scenarios with appliances only).
	TokenUnits string            `json:"token_units,omitempty"`
	TokenScale float64           `json:"token_scale,omitempty"`
	Appliances []ApplianceReport `json:"appliances,omitempty"`
	Estimates  []EstimateSeries  `json:"capacity_estimates,omitempty"`
	// VDCCompliance is the share of (tenant, appliance) samples, among
	// those where the tenant is active there, in which it got at least
	// ServedFraction of its end-to-end VDC guarantee (scenarios with
	// request flows; −1 when no tenant has such a guarantee).
	VDCCompliance float64 `json:"vdc_compliance,omitempty"`
	// ApplianceUse is every appliance's utilization over time.
	ApplianceUse []ApplianceUse `json:"appliance_utilization,omitempty"`

	// Times holds the end of every sample interval, in seconds; tenants'
	// Series are indexed like it. Not serialised (see timeseries.csv).
	Times []float64 `json:"-"`
}

// PairTraffic says whether the run had VM-to-VM traffic with network
// figures to report (a guaranteed VM or any throughput between VMs); runs
// of request flows to appliances only do not.
func (r *Report) PairTraffic() bool { return r.VMSeconds > 0 || r.MeanThroughput > 0 }

// WorstAtAppliance is the tenant and appliance with the lowest VDC
// compliance among those with a guarantee (nil: none; the first of equals).
func (r *Report) WorstAtAppliance() *ApplianceReport {
	var w *ApplianceReport
	for i, a := range r.Appliances {
		if a.Guarantee > 0 && (w == nil || a.Compliance < w.Compliance) {
			w = &r.Appliances[i]
		}
	}
	return w
}

// TenantReport is one tenant's part of a Report.
type TenantReport struct {
	Name                  string    `json:"name"`
	VMs                   int       `json:"vms"`
	Pairs                 int       `json:"pairs"`
	Guarantee             float64   `json:"guarantee"`
	MeanThroughput        float64   `json:"mean_throughput"`
	IdealThroughput       float64   `json:"ideal_throughput"`
	Compliance            float64   `json:"compliance"`
	VMSeconds             float64   `json:"vm_seconds"`
	WorkConservation      float64   `json:"work_conservation"`
	WorkConservationScope string    `json:"work_conservation_scope"`
	SpareShare            float64   `json:"spare_share"`
	IdealSpareShare       float64   `json:"ideal_spare_share"`
	WeightShare           float64   `json:"weight_share"`
	FCT                   *FCTStats `json:"fct,omitempty"`

	// Series is the tenant's total per sample, in Units. Not serialised.
	Series Series `json:"-"`
	// FCTs are the tenant's flow completion times in seconds, sorted. Not
	// serialised.
	FCTs []float64 `json:"-"`
}

// WorstTenant names the tenant with the lowest compliance and its figures.
type WorstTenant struct {
	Name           string  `json:"name"`
	Compliance     float64 `json:"compliance"`
	MeanThroughput float64 `json:"mean_throughput"`
	Guarantee      float64 `json:"guarantee"`
}

// Series is a tenant's achieved, guaranteed and ideal total throughput per
// sample.
type Series struct {
	Achieved, Guarantee, Ideal []float64
}

// FCTStats summarises flow completion times, in seconds. P99 is the
// nearest-rank 99th percentile; Median averages the middle two of an even
// count.
type FCTStats struct {
	Count   int     `json:"count"`
	MeanS   float64 `json:"mean_s"`
	MedianS float64 `json:"median_s"`
	P99S    float64 `json:"p99_s"`
	MaxS    float64 `json:"max_s"`
}

// Evaluate validates the input, runs the Oracle on every sample's demands
// (on every segment of it where pairs started or stopped; recomputing only
// when demands change) and computes the Report.
func Evaluate(in Input) (*Report, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	o, err := NewOracle(in.Tenants, in.Pairs, in.LinkCapacity)
	if err != nil {
		return nil, err
	}
	scale, units := in.UnitScale, in.Units
	if scale == 0 {
		scale = 1
		if units == "" {
			units = "bit/s"
		}
	}
	np, nt, ns := len(in.Pairs), len(in.Tenants), len(in.Samples)
	ivl := in.Interval.Seconds()

	// VMs numbered across tenants.
	vmTenant := []int{}
	vmIndex := make([]map[string]int, nt)
	for ti, t := range in.Tenants {
		vmIndex[ti] = make(map[string]int, len(t.VMs))
		for _, v := range t.VMs {
			vmIndex[ti][v.Name] = len(vmTenant)
			vmTenant = append(vmTenant, ti)
		}
	}
	tenantIdx := make(map[string]int, nt)
	for ti, t := range in.Tenants {
		tenantIdx[t.Name] = ti
	}
	pt := make([]int, np)
	src := make([]int, np)
	dst := make([]int, np)
	for i, p := range in.Pairs {
		ti := tenantIdx[p.Tenant]
		pt[i], src[i], dst[i] = ti, vmIndex[ti][p.Src], vmIndex[ti][p.Dst]
	}
	nv := len(vmTenant)
	gOut := make([]float64, nv)
	gIn := make([]float64, nv)
	aOut := make([]float64, nv)
	aIn := make([]float64, nv)

	so := newSampleOracle(o, src, dst, nv)

	type acc struct {
		a, g, i             float64 // this sample
		sumA, sumG, sumI    float64
		botA, botI          float64
		spare, idealSpare   float64
		counted, served     float64 // VM-samples, weighted
		achieved, gs, ideal []float64
	}
	ts := make([]acc, nt)
	for ti := range ts {
		ts[ti].achieved = make([]float64, ns)
		ts[ti].gs = make([]float64, ns)
		ts[ti].ideal = make([]float64, ns)
	}
	r := &Report{
		Scenario:  in.Scenario,
		Mechanism: in.Mechanism,
		DurationS: in.Duration.Seconds(),
		IntervalS: ivl,
		Samples:   ns,
		Units:     units,
		UnitScale: scale,
		Times:     make([]float64, ns),
		Invalid:   in.Invalid,
	}
	if in.Duration == 0 {
		r.DurationS = (time.Duration(ns) * in.Interval).Seconds()
	}

	for k, s := range in.Samples {
		r.Times[k] = s.T.Seconds()
		guar, ideal, bott, vmW, err := so.sample(s.Pairs)
		if err != nil {
			return nil, err
		}
		for v := 0; v < nv; v++ {
			gOut[v], gIn[v], aOut[v], aIn[v] = 0, 0, 0, 0
		}
		for ti := range ts {
			ts[ti].a, ts[ti].g, ts[ti].i = 0, 0, 0
		}
		for i, ps := range s.Pairs {
			a, g, id := ps.Rate, guar[i], ideal[i]
			if math.IsInf(id, 1) {
				// No physical link limits this pair: nothing to compare.
				id = math.Max(a, g)
			}
			t := &ts[pt[i]]
			t.a += a
			t.g += g
			t.i += id
			if bott[i] {
				t.botA += a
				t.botI += id
			}
			gOut[src[i]] += g
			aOut[src[i]] += a
			gIn[dst[i]] += g
			aIn[dst[i]] += a
		}
		for v := 0; v < nv; v++ {
			if vmW[v] <= 0 {
				continue
			}
			t := &ts[vmTenant[v]]
			t.counted += vmW[v]
			if served(aOut[v], gOut[v]) && served(aIn[v], gIn[v]) {
				t.served += vmW[v]
			}
		}
		for ti := range ts {
			t := &ts[ti]
			t.sumA += t.a
			t.sumG += t.g
			t.sumI += t.i
			t.spare += math.Max(0, t.a-t.g)
			t.idealSpare += math.Max(0, t.i-t.g)
			t.achieved[k] = t.a / scale
			t.gs[k] = t.g / scale
			t.ideal[k] = t.i / scale
		}
	}

	// Aggregate.
	var sumA, sumG, sumI, botA, botI, spare, idealSpare float64
	var counted, servedN float64
	for _, t := range ts {
		sumA += t.sumA
		sumG += t.sumG
		sumI += t.sumI
		botA += t.botA
		botI += t.botI
		spare += t.spare
		idealSpare += t.idealSpare
		counted += t.counted
		servedN += t.served
	}
	nsf := float64(ns)
	r.WorkConservation, r.WorkConservationScope = workConservation(botA, botI, sumA, sumI)
	r.ThroughputRatio = ratio(sumA, sumI, 1)
	r.Compliance = ratio(servedN, counted, 1)
	r.VMSeconds = counted * ivl
	r.MeanThroughput = sumA / nsf / scale
	r.Guarantee = sumG / nsf / scale
	r.IdealThroughput = sumI / nsf / scale

	fcts := make([][]float64, nt)
	var all []float64
	for _, f := range in.FCTs {
		ti := tenantIdx[f.Tenant]
		fcts[ti] = append(fcts[ti], f.Duration.Seconds())
		all = append(all, f.Duration.Seconds())
	}
	r.FCT = fctStats(all)

	var jx []float64
	r.Tenants = make([]TenantReport, nt)
	for ti, t := range ts {
		tr := &r.Tenants[ti]
		tr.Name = in.Tenants[ti].Name
		tr.VMs = len(in.Tenants[ti].VMs)
		tr.Guarantee = t.sumG / nsf / scale
		tr.MeanThroughput = t.sumA / nsf / scale
		tr.IdealThroughput = t.sumI / nsf / scale
		tr.Compliance = ratio(t.served, t.counted, 1)
		tr.VMSeconds = t.counted * ivl
		tr.WorkConservation, tr.WorkConservationScope = workConservation(t.botA, t.botI, t.sumA, t.sumI)
		tr.SpareShare = ratio(t.spare, spare, 0)
		tr.IdealSpareShare = ratio(t.idealSpare, idealSpare, 0)
		tr.WeightShare = ratio(t.sumG, sumG, 0)
		sort.Float64s(fcts[ti])
		tr.FCTs = fcts[ti]
		tr.FCT = fctStats(fcts[ti])
		tr.Series = Series{Achieved: t.achieved, Guarantee: t.gs, Ideal: t.ideal}
		if tr.Guarantee > 0 {
			jx = append(jx, tr.MeanThroughput/tr.Guarantee)
		}
	}
	for _, p := range in.Pairs {
		r.Tenants[tenantIdx[p.Tenant]].Pairs++
	}
	r.Jain = Jain(jx)
	for i := range r.Tenants {
		t := &r.Tenants[i]
		if t.VMSeconds > 0 && (r.Worst == nil || t.Compliance < r.Worst.Compliance) {
			r.Worst = &WorstTenant{Name: t.Name, Compliance: t.Compliance, MeanThroughput: t.MeanThroughput, Guarantee: t.Guarantee}
		}
	}
	if err := evaluateAppliances(&in, r); err != nil {
		return nil, err
	}
	return r, nil
}

// served reports whether achieved meets ServedFraction of guaranteed (always
// true when nothing is guaranteed). Exactly ServedFraction counts, up to
// rounding.
func served(achieved, guaranteed float64) bool {
	return guaranteed <= 0 || achieved >= ServedFraction*guaranteed*(1-1e-9)
}

func ratio(a, b, ifZero float64) float64 {
	if b <= 0 {
		return ifZero
	}
	return a / b
}

func workConservation(botA, botI, sumA, sumI float64) (float64, string) {
	switch {
	case botI > 0:
		return math.Min(1, botA/botI), ScopeBottlenecks
	case sumI > 0:
		return math.Min(1, sumA/sumI), ScopeAll
	default:
		return 1, ScopeNone
	}
}

// Jain returns Jain's fairness index (Σx)² / (n Σx²) of x: 1 when all are
// equal, 1/n when one value has everything. It is 1 for an empty or all-zero
// x.
func Jain(x []float64) float64 {
	var s, s2 float64
	for _, v := range x {
		s += v
		s2 += v * v
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(x)) * s2)
}

// fctStats summarises sorted-or-not durations (seconds); nil when empty.
func fctStats(d []float64) *FCTStats {
	if len(d) == 0 {
		return nil
	}
	s := append([]float64(nil), d...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return &FCTStats{
		Count:   n,
		MeanS:   sum / float64(n),
		MedianS: med,
		P99S:    Percentile(s, 0.99),
		MaxS:    s[n-1],
	}
}

// Percentile returns the nearest-rank p-quantile (0 < p ≤ 1) of sorted
// values: the smallest value with at least p of the values at or below it.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted))-1e-9)) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}
