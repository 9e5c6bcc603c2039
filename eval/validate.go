package eval

import (
	"fmt"
	"math"
)

// Validate checks that the Input is consistent: positive interval and unit
// scale, unique tenants and VMs, pairs naming known VMs of their tenant and
// known links, one PairSample per pair in every sample with finite
// non-negative rates and non-negative (possibly +Inf) demands, active parts
// within the interval, increasing sample times, and FCTs of known tenants. Errors name the offending item.
func (in *Input) Validate() error {
	if in.Interval <= 0 {
		return fmt.Errorf("eval: sample interval %v must be > 0", in.Interval)
	}
	if in.Duration < 0 {
		return fmt.Errorf("eval: duration %v must be ≥ 0", in.Duration)
	}
	if in.UnitScale < 0 || math.IsNaN(in.UnitScale) || math.IsInf(in.UnitScale, 0) {
		return fmt.Errorf("eval: unit scale %v must be finite and > 0 (0 means bits/s)", in.UnitScale)
	}
	if len(in.LinkNames) != 0 && len(in.LinkNames) != len(in.LinkCapacity) {
		return fmt.Errorf("eval: %d link names for %d link capacities", len(in.LinkNames), len(in.LinkCapacity))
	}
	for i, c := range in.LinkCapacity {
		if !(c >= 0) || math.IsInf(c, 0) {
			return fmt.Errorf("eval: link %s: capacity %v must be finite and ≥ 0", in.linkName(i), c)
		}
	}
	tenants := make(map[string]map[string]bool, len(in.Tenants))
	for i, t := range in.Tenants {
		if t.Name == "" {
			return fmt.Errorf("eval: tenant %d has no name", i)
		}
		if tenants[t.Name] != nil {
			return fmt.Errorf("eval: duplicate tenant %q", t.Name)
		}
		vms := make(map[string]bool, len(t.VMs))
		for j, v := range t.VMs {
			if v.Name == "" {
				return fmt.Errorf("eval: tenant %q: VM %d has no name", t.Name, j)
			}
			if vms[v.Name] {
				return fmt.Errorf("eval: tenant %q: duplicate VM %q", t.Name, v.Name)
			}
			if !(v.In >= 0) || !(v.Out >= 0) || math.IsInf(v.In, 0) || math.IsInf(v.Out, 0) {
				return fmt.Errorf("eval: tenant %q VM %q: hose guarantees in %v, out %v must be finite and ≥ 0", t.Name, v.Name, v.In, v.Out)
			}
			vms[v.Name] = true
		}
		tenants[t.Name] = vms
	}
	for i, p := range in.Pairs {
		vms := tenants[p.Tenant]
		if vms == nil {
			return fmt.Errorf("eval: pair %d (%s->%s): unknown tenant %q", i, p.Src, p.Dst, p.Tenant)
		}
		if !vms[p.Src] {
			return fmt.Errorf("eval: pair %d (%s->%s): tenant %q has no VM %q", i, p.Src, p.Dst, p.Tenant, p.Src)
		}
		if !vms[p.Dst] {
			return fmt.Errorf("eval: pair %d (%s->%s): tenant %q has no VM %q", i, p.Src, p.Dst, p.Tenant, p.Dst)
		}
		if p.Src == p.Dst {
			return fmt.Errorf("eval: pair %d: VM %q to itself", i, p.Src)
		}
		for _, l := range p.Links {
			if l < 0 || l >= len(in.LinkCapacity) {
				return fmt.Errorf("eval: pair %d (%s->%s): link %d out of range [0, %d)", i, p.Src, p.Dst, l, len(in.LinkCapacity))
			}
		}
	}
	if len(in.Samples) == 0 {
		return fmt.Errorf("eval: no samples")
	}
	for k, s := range in.Samples {
		if len(s.Pairs) != len(in.Pairs) {
			return fmt.Errorf("eval: sample %d (t=%v) has %d pair samples for %d pairs", k, s.T, len(s.Pairs), len(in.Pairs))
		}
		if k > 0 && s.T <= in.Samples[k-1].T {
			return fmt.Errorf("eval: sample %d (t=%v) not after sample %d (t=%v)", k, s.T, k-1, in.Samples[k-1].T)
		}
		for i, ps := range s.Pairs {
			if !(ps.Rate >= 0) || math.IsInf(ps.Rate, 0) {
				return fmt.Errorf("eval: sample %d (t=%v) pair %d (%s->%s): rate %v must be finite and ≥ 0", k, s.T, i, in.Pairs[i].Src, in.Pairs[i].Dst, ps.Rate)
			}
			if !(ps.Demand >= 0) {
				return fmt.Errorf("eval: sample %d (t=%v) pair %d (%s->%s): demand %v must be ≥ 0 (+Inf for unbounded)", k, s.T, i, in.Pairs[i].Src, in.Pairs[i].Dst, ps.Demand)
			}
			if !(ps.Active >= 0 && ps.Active <= 1) || !(ps.ActiveFrom >= 0 && ps.ActiveFrom < 1) || ps.ActiveFrom+ps.Active > 1+spanTolerance {
				return fmt.Errorf("eval: sample %d (t=%v) pair %d (%s->%s): active over [%v, %v+%v) of the interval, must be within [0, 1]", k, s.T, i, in.Pairs[i].Src, in.Pairs[i].Dst, ps.ActiveFrom, ps.ActiveFrom, ps.Active)
			}
			if ps.Active == 0 && ps.ActiveFrom != 0 {
				return fmt.Errorf("eval: sample %d (t=%v) pair %d (%s->%s): active from %v of the interval but for no time (Active 0: not recorded)", k, s.T, i, in.Pairs[i].Src, in.Pairs[i].Dst, ps.ActiveFrom)
			}
		}
	}
	for i, f := range in.FCTs {
		if tenants[f.Tenant] == nil {
			return fmt.Errorf("eval: FCT %d (%s->%s): unknown tenant %q", i, f.Src, f.Dst, f.Tenant)
		}
		if f.Duration < 0 {
			return fmt.Errorf("eval: FCT %d (%s->%s): negative duration %v", i, f.Src, f.Dst, f.Duration)
		}
	}
	return nil
}

func (in *Input) linkName(i int) string {
	if i >= 0 && i < len(in.LinkNames) && in.LinkNames[i] != "" {
		return fmt.Sprintf("%d (%s)", i, in.LinkNames[i])
	}
	return fmt.Sprint(i)
}
