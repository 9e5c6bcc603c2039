package eval

import (
	"fmt"
	"sort"
)

// ApplianceReport is a tenant's end-to-end throughput at one appliance, in
// tokens (Pulsar's unified currency), against its VDC guarantee there.
type ApplianceReport struct {
	Appliance string  `json:"appliance"`
	Tenant    string  `json:"tenant"`
	Guarantee float64 `json:"guarantee"`       // token units (Report.TokenUnits)
	Mean      float64 `json:"mean_throughput"` // over the samples where the tenant is active there
	// Compliance is the share of active samples in which the tenant gets at
	// least ServedFraction of its guarantee at the appliance.
	Compliance    float64   `json:"compliance"`
	ActiveSamples int       `json:"active_samples"`
	Series        []float64 `json:"-"` // per sample, token units
}

// ApplianceUse is one appliance's utilization: the fraction of its service
// capacity in use (1: busy all the time, the appliance is work-conserving).
type ApplianceUse struct {
	Appliance string    `json:"appliance"`
	Mean      float64   `json:"mean"`
	Series    []float64 `json:"-"`
	// Capacity is, per sample, the appliance's capacity in token units for
	// the mix it served (0: idle or unknown).
	Capacity []float64 `json:"-"`
}

// EstimateSeries is a controller's capacity estimate of one appliance over
// time, in token units.
type EstimateSeries struct {
	Appliance string    `json:"appliance"`
	Times     []float64 `json:"times_s"`
	Tokens    []float64 `json:"tokens"`
}

// evaluateAppliances adds the appliance section of the report: per tenant
// and appliance, token throughput against the VDC guarantee.
func evaluateAppliances(in *Input, r *Report) error {
	if len(in.RequestFlows) == 0 {
		return nil
	}
	scale := in.TokenScale
	if scale <= 0 {
		scale = 1
	}
	r.TokenScale = scale
	r.TokenUnits = tokenUnits(scale)
	type key struct{ tenant, app string }
	idx := map[key]int{}
	var keys []key
	flowKey := make([]int, len(in.RequestFlows))
	for i, f := range in.RequestFlows {
		k := key{f.Tenant, f.Appliance}
		j, ok := idx[k]
		if !ok {
			j = len(keys)
			idx[k] = j
			keys = append(keys, k)
		}
		flowKey[i] = j
	}
	ns := len(in.Samples)
	reps := make([]ApplianceReport, len(keys))
	sums := make([]float64, len(keys))
	nServed := make([]int, len(keys))
	for j, k := range keys {
		reps[j] = ApplianceReport{Appliance: k.app, Tenant: k.tenant, Guarantee: in.ApplianceGuarantees[k.tenant][k.app] / scale,
			Series: make([]float64, ns)}
	}
	active := make([]bool, len(keys))
	for s, smp := range in.Samples {
		if len(smp.Requests) != len(in.RequestFlows) {
			return fmt.Errorf("eval: sample %d has %d request flows, want %d", s, len(smp.Requests), len(in.RequestFlows))
		}
		for j := range active {
			active[j] = false
		}
		for i, rs := range smp.Requests {
			j := flowKey[i]
			reps[j].Series[s] += rs.Tokens / scale
			if rs.Requests > 0 {
				active[j] = true
			}
		}
		for j := range keys {
			if !active[j] {
				continue
			}
			reps[j].ActiveSamples++
			sums[j] += reps[j].Series[s]
			if served(reps[j].Series[s], reps[j].Guarantee) {
				nServed[j]++
			}
		}
	}
	var vServed, vActive int
	for j := range reps {
		reps[j].Mean = ratio(sums[j], float64(reps[j].ActiveSamples), 0)
		reps[j].Compliance = ratio(float64(nServed[j]), float64(reps[j].ActiveSamples), 1)
		if reps[j].Guarantee > 0 {
			vServed += nServed[j]
			vActive += reps[j].ActiveSamples
		}
	}
	r.VDCCompliance = -1
	if vActive > 0 {
		r.VDCCompliance = float64(vServed) / float64(vActive)
	}
	for a, name := range in.Appliances {
		u := ApplianceUse{Appliance: name, Series: make([]float64, ns)}
		sum := 0.0
		for s, smp := range in.Samples {
			if len(smp.ApplianceBusy) != len(in.Appliances) {
				return fmt.Errorf("eval: sample %d has %d appliance utilizations, want %d", s, len(smp.ApplianceBusy), len(in.Appliances))
			}
			u.Series[s] = smp.ApplianceBusy[a]
			sum += smp.ApplianceBusy[a]
			if len(smp.ApplianceCapacity) == len(in.Appliances) {
				if u.Capacity == nil {
					u.Capacity = make([]float64, ns)
				}
				u.Capacity[s] = smp.ApplianceCapacity[a] / scale
			}
		}
		u.Mean = ratio(sum, float64(ns), 0)
		r.ApplianceUse = append(r.ApplianceUse, u)
	}
	sort.SliceStable(reps, func(a, b int) bool {
		if reps[a].Appliance != reps[b].Appliance {
			return reps[a].Appliance < reps[b].Appliance
		}
		return reps[a].Tenant < reps[b].Tenant
	})
	r.Appliances = reps
	byApp := map[string]int{}
	for _, e := range in.Estimates {
		j, ok := byApp[e.Appliance]
		if !ok {
			j = len(r.Estimates)
			byApp[e.Appliance] = j
			r.Estimates = append(r.Estimates, EstimateSeries{Appliance: e.Appliance})
		}
		r.Estimates[j].Times = append(r.Estimates[j].Times, e.T.Seconds())
		r.Estimates[j].Tokens = append(r.Estimates[j].Tokens, e.Tokens/scale)
	}
	return nil
}

// tokenUnits names a token scale.
func tokenUnits(scale float64) string {
	switch scale {
	case 1:
		return "T/s"
	case 1e3:
		return "KT/s"
	case 1e6:
		return "MT/s"
	case 1e9:
		return "GT/s"
	}
	return fmt.Sprintf("×%g T/s", scale)
}
