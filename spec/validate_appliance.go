package spec

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// badNumber reports NaN and infinities.
func badNumber(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

// applianceIndex maps every appliance name to its first index.
func (s *Scenario) applianceIndex() map[string]int {
	idx := map[string]int{}
	for i, a := range s.Appliances {
		if _, dup := idx[a.Name]; !dup && a.Name != "" {
			idx[a.Name] = i
		}
	}
	return idx
}

// validateAppliances checks the appliances: names, servers (when the
// topology is valid), models and costs, virtual cost functions, capacity
// bounds, and the tenants' guarantees against capacity_max.
func (s *Scenario) validateAppliances(p *problems, topoOK bool) {
	isServer, kindOf := s.Topology.serverSet()
	vmIndex := s.VMIndex()
	names := map[string]int{}
	for i := range s.Appliances {
		a := &s.Appliances[i]
		at := fmt.Sprintf("appliances[%d]", i)
		switch ref, isVM := vmIndex[a.Name]; {
		case a.Name == "":
			p.add(at+".name", "required")
		case isVM:
			p.add(at+".name", "%q is also the name of a VM (tenants[%d].vms[%d])", a.Name, ref.Tenant, ref.VM)
		default:
			if j, dup := names[a.Name]; dup {
				p.add(at+".name", "duplicate appliance %q (also appliances[%d])", a.Name, j)
			} else {
				names[a.Name] = i
			}
		}
		switch {
		case a.Hypervisor && a.Server != "":
			p.add(at+".server", "not used by a hypervisor appliance (it runs on the servers of the VMs that use it)")
		case a.Hypervisor:
		case a.Server == "":
			p.add(at+".server", "required (or hypervisor: true)")
		case !topoOK:
		case kindOf != nil && kindOf[a.Server] == NodeSwitch:
			p.add(at+".server", "%q is a switch, not a server", a.Server)
		case !isServer(a.Server):
			p.add(at+".server", "unknown server %q", a.Server)
		}
		_, modelOK := modelCosts[a.Model]
		switch {
		case a.Model == "":
			p.add(at+".model", "required (%s)", orList(Models))
		case !modelOK:
			p.add(at+".model", "unknown model %q (use %s)", a.Model, orList(Models))
		case a.Model == ModelCustom && len(a.Costs) == 0:
			p.add(at+".costs", "required for model custom (the service cost of every request type)")
		}
		if !(a.Parallelism > 0) || math.IsInf(a.Parallelism, 0) {
			p.add(at+".parallelism", "must be a positive number, got %v", a.Parallelism)
		}
		a.validateCosts(p, at)
		a.validateVirtualCost(p, at, modelOK)
		minOK := nonNegativeTokens(p, at+".capacity_min", a.CapacityMin)
		maxOK := nonNegativeTokens(p, at+".capacity_max", a.CapacityMax)
		if minOK && maxOK && a.CapacityMax > 0 && a.CapacityMin > a.CapacityMax {
			p.add(at+".capacity_min", "%v tokens/s is more than capacity_max %v tokens/s", a.CapacityMin, a.CapacityMax)
		}
		if maxOK && a.CapacityMax > 0 && a.Name != "" {
			s.checkGuaranteeSum(p, at, a)
		}
	}
}

// checkGuaranteeSum reports an appliance whose tenants' guarantees sum to
// more than its capacity_max.
func (s *Scenario) checkGuaranteeSum(p *problems, at string, a *Appliance) {
	var sum float64
	var parts []string
	for _, t := range s.Tenants {
		if t.VDC == nil {
			continue
		}
		var g float64
		for _, ag := range t.VDC.Appliances {
			if ag.Appliance == a.Name && ag.Guarantee > 0 && !badNumber(float64(ag.Guarantee)) {
				g += float64(ag.Guarantee)
			}
		}
		if g > 0 {
			sum += g
			parts = append(parts, t.Name+" "+FormatTokens(g))
		}
	}
	if max := float64(a.CapacityMax); sum > max*(1+1e-9) {
		p.add(at, "guarantees sum to %s tokens/s, more than capacity_max %s tokens/s (tenants %s)",
			FormatTokens(sum), FormatTokens(max), strings.Join(parts, ", "))
	}
}

// nonNegativeTokens checks an optional amount of tokens.
func nonNegativeTokens(p *problems, path string, t Tokens) bool {
	if t < 0 || badNumber(float64(t)) {
		p.add(path, "must not be negative, got %v", t)
		return false
	}
	return true
}

func (a *Appliance) validateCosts(p *problems, at string) {
	types := map[string]int{}
	for j, c := range a.Costs {
		cat := fmt.Sprintf("%s.costs[%d]", at, j)
		if c.Type == "" {
			p.add(cat+".type", "required")
		} else if k, dup := types[c.Type]; dup {
			p.add(cat+".type", "duplicate type %q (also %s.costs[%d])", c.Type, at, k)
		} else {
			types[c.Type] = j
		}
		ok := true
		if c.Base < 0 {
			p.add(cat+".base", "must not be negative, got %v", c.Base)
			ok = false
		}
		if c.PerKB < 0 {
			p.add(cat+".per_kb", "must not be negative, got %v", c.PerKB)
			ok = false
		}
		if ok && c.Base == 0 && c.PerKB == 0 {
			p.add(cat, "base and per_kb are both zero: a request must take some service time")
		}
	}
}

func (a *Appliance) validateVirtualCost(p *problems, at string, modelOK bool) {
	types := map[string]int{}
	for k, v := range a.VirtualCost {
		vat := fmt.Sprintf("%s.virtual_cost[%d]", at, k)
		if j, dup := types[v.Type]; dup {
			if v.Type == "" {
				p.add(vat, "duplicate cost function for all types (also %s.virtual_cost[%d])", at, j)
			} else {
				p.add(vat+".type", "duplicate cost function for type %q (also %s.virtual_cost[%d])", v.Type, at, j)
			}
		} else {
			types[v.Type] = k
			if v.Type != "" && modelOK && len(a.Types()) > 0 && !slices.Contains(a.Types(), v.Type) {
				p.add(vat+".type", "unknown type %q for appliance %q (use %s)", v.Type, a.Name, orList(a.Types()))
			}
		}
		if v.Step < 0 || badNumber(float64(v.Step)) {
			p.add(vat+".step", "must not be negative, got %v", float64(v.Step))
		}
		if len(v.Points) == 0 {
			p.add(vat+".points", "required (at least one point of size and tokens)")
			continue
		}
		ok := true
		for m, pt := range v.Points {
			pat := fmt.Sprintf("%s.points[%d]", vat, m)
			if pt.Size < 0 || badNumber(float64(pt.Size)) {
				p.add(pat+".size", "must be a non-negative size, got %v", float64(pt.Size))
				ok = false
			} else if m > 0 && pt.Size <= v.Points[m-1].Size {
				p.add(pat+".size", "%v is not larger than the previous size %v (sizes must increase)", float64(pt.Size), float64(v.Points[m-1].Size))
				ok = false
			}
			if pt.Tokens < 0 || badNumber(float64(pt.Tokens)) {
				p.add(pat+".tokens", "must be a non-negative number of tokens, got %v", pt.Tokens)
				ok = false
			} else if m > 0 && pt.Tokens < v.Points[m-1].Tokens {
				p.add(pat+".tokens", "%v is less than the previous point's %v: a cost function must not decrease with request size", pt.Tokens, v.Points[m-1].Tokens)
				ok = false
			}
		}
		if ok && v.Points[len(v.Points)-1].Tokens == 0 {
			p.add(vat+".points", "every point costs 0 tokens: requests would be free")
		}
	}
}

// validateVDC checks a tenant's VDC: policy, appliance guarantees and
// local weights.
func (s *Scenario) validateVDC(p *problems, at string, ti int, apps map[string]int, vmIndex map[string]VMRef) {
	t := &s.Tenants[ti]
	v := t.VDC
	at += ".vdc"
	switch {
	case v.Policy == "":
		p.add(at+".policy", "required (%s; ApplyDefaults sets drf)", orList(Policies))
	case !slices.Contains(Policies, v.Policy):
		p.add(at+".policy", "unknown policy %q (use %s)", v.Policy, orList(Policies))
	}
	if v.GlobalWeight < 0 || badNumber(v.GlobalWeight) {
		p.add(at+".global_weight", "must be a non-negative number, got %v", v.GlobalWeight)
	}
	seen := map[string]int{}
	for j, g := range v.Appliances {
		gat := fmt.Sprintf("%s.appliances[%d]", at, j)
		_, known := apps[g.Appliance]
		switch k, dup := seen[g.Appliance]; {
		case g.Appliance == "":
			p.add(gat+".appliance", "required")
		case dup:
			p.add(gat+".appliance", "duplicate guarantee on appliance %q (also %s.appliances[%d])", g.Appliance, at, k)
		case !known:
			p.add(gat+".appliance", "unknown appliance %q", g.Appliance)
		default:
			seen[g.Appliance] = j
		}
		switch {
		case t.BestEffort:
			p.add(gat+".guarantee", "a best_effort tenant has no guarantees")
		case g.Guarantee == 0:
			p.add(gat+".guarantee", "required (a positive rate of tokens such as \"1600MT/s\")")
		case g.Guarantee < 0 || badNumber(float64(g.Guarantee)):
			p.add(gat+".guarantee", "must be positive, got %v", g.Guarantee)
		}
		switch {
		case g.Max < 0 || badNumber(float64(g.Max)):
			p.add(gat+".max", "must not be negative, got %v", g.Max)
		case g.Max > 0 && g.Guarantee > 0 && g.Max < g.Guarantee:
			p.add(gat+".max", "%v is less than the guarantee %v", g.Max, g.Guarantee)
		}
	}
	keys := make([]string, 0, len(v.Weights))
	for k := range v.Weights {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		wat := at + ".weights." + k
		if w := v.Weights[k]; !(w > 0) || math.IsInf(w, 0) {
			p.add(wat, "must be a positive number, got %v", w)
		}
		src, dst, ok := strings.Cut(k, "->")
		if !ok || src == "" || dst == "" {
			p.add(wat, "not of the form \"src->dst\" (a VM of the tenant, then a VM of the tenant or an appliance in its VDC)")
			continue
		}
		switch ref, ok := vmIndex[src]; {
		case !ok:
			p.add(wat, "unknown VM %q", src)
		case ref.Tenant != ti:
			p.add(wat, "VM %q belongs to tenant %q, not %q", src, s.Tenants[ref.Tenant].Name, t.Name)
		}
		ref, isVM := vmIndex[dst]
		_, inVDC := v.Guarantee(dst)
		if !(isVM && ref.Tenant == ti || !isVM && inVDC) {
			p.add(wat, "%q is neither a VM of tenant %q nor an appliance in its VDC", dst, t.Name)
		}
	}
}

// validateRequests checks the fields of a requests workload: the
// appliance (known, and in the tenant's VDC), the loop (outstanding or
// request_rate) and the mix.
func (s *Scenario) validateRequests(p *problems, at string, w *Workload, tenantOK bool) {
	var t *Tenant
	if tenantOK {
		t, _ = s.LookupTenant(w.Tenant)
	}
	inVDC := func(field, app string) {
		if t != nil && !t.BestEffort {
			if _, ok := t.VDC.Guarantee(app); !ok {
				p.add(field, "tenant %q has no guarantee on appliance %q in its VDC", w.Tenant, app)
			}
		}
	}
	var a *Appliance
	appOK := false
	switch {
	case len(w.Dst) > 0 && w.Appliance != "":
		p.add(at+".dst", "give dst (VMs) or appliance as the requests' destination, not both")
	case len(w.Dst) > 0:
		// VM destinations are checked with src (same tenant).
	case w.Appliance == "":
		p.add(at+".appliance", "required for kind requests (the appliance the VMs send requests to), or dst (VMs)")
	default:
		a, appOK = s.LookupAppliance(w.Appliance)
		if !appOK {
			p.add(at+".appliance", "unknown appliance %q", w.Appliance)
		} else {
			inVDC(at+".appliance", w.Appliance)
		}
	}
	if len(w.Dst) == 1 && len(w.Src) == 1 && w.Dst[0] == w.Src[0] {
		p.add(at, "no VM pairs: src and dst are the same single VM")
	}
	seenVia := map[string]int{}
	for k, v := range w.Via {
		vat := fmt.Sprintf("%s.via[%d]", at, k)
		va, ok := s.LookupAppliance(v.Appliance)
		switch {
		case v.Appliance == "":
			p.add(vat+".appliance", "required")
			continue
		case !ok:
			p.add(vat+".appliance", "unknown appliance %q", v.Appliance)
			continue
		case v.Appliance == w.Appliance:
			p.add(vat+".appliance", "%q is the destination itself", v.Appliance)
			continue
		}
		if j, dup := seenVia[v.Appliance]; dup {
			p.add(vat+".appliance", "%q already passed at via[%d]", v.Appliance, j)
			continue
		}
		seenVia[v.Appliance] = k
		inVDC(vat+".appliance", v.Appliance)
		if _, known := modelCosts[va.Model]; known && len(va.Types()) > 0 && !slices.Contains(va.Types(), v.Type) {
			if v.Type == "" {
				p.add(vat+".type", "required (the request type the appliance serves, e.g. rc4)")
			} else {
				p.add(vat+".type", "unknown type %q for appliance %q (use %s)", v.Type, va.Name, orList(va.Types()))
			}
		}
	}
	switch {
	case w.Outstanding != 0 && w.RequestRate != 0:
		p.add(at, "give outstanding (closed loop) or request_rate (open loop), not both")
	case w.Outstanding == 0 && w.RequestRate == 0:
		p.add(at, "requests need outstanding (closed loop: requests in flight per VM) or request_rate (open loop: requests/s per VM)")
	}
	if w.Outstanding < 0 {
		p.add(at+".outstanding", "must be positive, got %d", w.Outstanding)
	}
	if w.RequestRate < 0 || badNumber(w.RequestRate) {
		p.add(at+".request_rate", "must be a positive number of requests per second, got %v", w.RequestRate)
	}
	if len(w.Mix) == 0 {
		p.add(at+".mix", "required for kind requests (request types with size and fraction)")
		return
	}
	// Types are checked when the appliance's own types are sound.
	typesOK := false
	if appOK {
		_, known := modelCosts[a.Model]
		typesOK = known && len(a.Types()) > 0
	}
	sum, fractionsOK := 0.0, true
	for k, m := range w.Mix {
		mat := fmt.Sprintf("%s.mix[%d]", at, k)
		switch {
		case m.Type == "":
			p.add(mat+".type", "required")
		case typesOK && !slices.Contains(a.Types(), m.Type):
			p.add(mat+".type", "unknown type %q for appliance %q (use %s)", m.Type, a.Name, orList(a.Types()))
		}
		switch {
		case m.Size == 0:
			p.add(mat+".size", "required (a positive size such as \"8KB\")")
		case m.Size < 0 || badNumber(float64(m.Size)):
			p.add(mat+".size", "must be a positive size, got %v", float64(m.Size))
		}
		switch {
		case m.Fraction == 0:
			p.add(mat+".fraction", "required (the share of the workload's requests of this entry, > 0)")
			fractionsOK = false
		case m.Fraction < 0 || badNumber(m.Fraction):
			p.add(mat+".fraction", "must be positive, got %v", m.Fraction)
			fractionsOK = false
		default:
			sum += m.Fraction
		}
		if m.Request < 0 || badNumber(float64(m.Request)) {
			p.add(mat+".request", "must not be negative, got %v", float64(m.Request))
		}
		if m.Response < 0 || badNumber(float64(m.Response)) {
			p.add(mat+".response", "must not be negative, got %v", float64(m.Response))
		}
	}
	if fractionsOK && math.Abs(sum-1) > 1e-6 {
		p.add(at+".mix", "fractions sum to %.9g, not 1", sum)
	}
}
