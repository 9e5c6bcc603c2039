package model

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/bulkhead-dc/bulkhead/units"
)

// Validate checks the model as it is (call ApplyDefaults first) and
// returns every problem found, each a *FieldError located by its field's
// path (tenants[1].vms[0].host), joined with errors.Join; nil if there is
// none:
//
//   - tenants: a name, unique; sla a fraction in [0, 1); weight not
//     negative; VDC as Checker.VDC
//   - VMs: a name, unique across tenants; tenant the name of the tenant
//     that lists it; a host; in and out finite and not negative, zero for
//     a best-effort tenant; valid addresses, each of one VM
//   - appliances as Checker.Appliance (not checking hosts: the model
//     does not know the servers)
func (m *Model) Validate() error {
	p := &Problems{}
	c := NewChecker(m, p)
	addrs := map[netip.Addr]string{}
	for i := range m.Tenants {
		c.Tenant(i)
		t := &m.Tenants[i]
		for j := range t.VMs {
			v := &t.VMs[j]
			at := fmt.Sprintf("tenants[%d].vms[%d]", i, j)
			c.VMName(i, j)
			if v.Tenant != t.Name {
				p.Add(at+".tenant", "%q is not the tenant that lists the VM (%q)", v.Tenant, t.Name)
			}
			if v.Host == "" {
				p.Add(at+".host", "required")
			}
			for _, g := range []struct {
				field string
				bps   float64
			}{{"in", v.In}, {"out", v.Out}} {
				switch {
				case g.bps < 0 || badNumber(g.bps):
					p.Add(at+"."+g.field, "must be a non-negative rate in bits/s, got %v", g.bps)
				case t.BestEffort && g.bps != 0:
					p.Add(at+"."+g.field, "a best_effort tenant has no guarantees")
				}
			}
			for k, a := range v.Addrs {
				aat := fmt.Sprintf("%s.addrs[%d]", at, k)
				if !a.IsValid() {
					p.Add(aat, "not an IP address")
				} else if prev, dup := addrs[a]; dup {
					p.Add(aat, "%v is also %s", a, prev)
				} else {
					addrs[a] = aat
				}
			}
		}
		c.VDC(i)
	}
	for i := range m.Appliances {
		c.Appliance(i, nil)
	}
	return p.Err()
}

// Checker checks a model part by part, recording every problem in its
// Problems at the path of the field (tenants[i]…, appliances[i]…).
// Model.Validate checks every part with one; a declaration that holds a
// model and more (spec.Scenario) checks its own fields in between, so that
// the problems come in the order of the fields. A Checker indexes the
// model when it is made and does not see later changes to it.
type Checker struct {
	m       *Model
	p       *Problems
	tenants map[string]int    // the first tenant of every name
	vms     map[string][2]int // the first VM of every name: tenant, VM
	apps    map[string]int    // the first appliance of every name
}

// NewChecker returns a Checker of m that records problems in p.
func NewChecker(m *Model, p *Problems) *Checker {
	c := &Checker{m: m, p: p, tenants: map[string]int{}, vms: map[string][2]int{}, apps: map[string]int{}}
	for i, t := range m.Tenants {
		first(c.tenants, t.Name, i)
		for j, v := range t.VMs {
			first(c.vms, v.Name, [2]int{i, j})
		}
	}
	for i, a := range m.Appliances {
		first(c.apps, a.Name, i)
	}
	return c
}

// first records v for a nonempty name not yet in idx.
func first[V any](idx map[string]V, name string, v V) {
	if _, dup := idx[name]; !dup && name != "" {
		idx[name] = v
	}
}

// Tenant checks tenants[i]: its name (required, unique), sla (a fraction
// in [0, 1)) and weight (not negative).
func (c *Checker) Tenant(i int) {
	t := &c.m.Tenants[i]
	at := fmt.Sprintf("tenants[%d]", i)
	if t.Name == "" {
		c.p.Add(at+".name", "required")
	} else if j := c.tenants[t.Name]; j != i {
		c.p.Add(at+".name", "duplicate tenant %q (also tenants[%d])", t.Name, j)
	}
	if !(t.SLA >= 0 && t.SLA < 1) {
		c.p.Add(at+".sla", "must be a fraction in [0, 1) (0.15 for within 15%%), got %v", t.SLA)
	}
	if t.Weight < 0 || badNumber(t.Weight) {
		c.p.Add(at+".weight", "must be a non-negative number, got %v", t.Weight)
	}
	for k, p := range t.Pattern {
		for _, end := range []struct{ field, vm string }{{"src", p.Src}, {"dst", p.Dst}} {
			if !slices.ContainsFunc(t.VMs, func(v VM) bool { return v.Name == end.vm }) {
				c.p.Add(fmt.Sprintf("%s.pattern[%d].%s", at, k, end.field), "%q is not a VM of tenant %q", end.vm, t.Name)
			}
		}
		if p.Src == p.Dst {
			c.p.Add(fmt.Sprintf("%s.pattern[%d]", at, k), "a VM does not send to itself (%q)", p.Src)
		}
	}
}

// VMName checks the name of tenants[i].vms[j]: required, and unique
// across tenants.
func (c *Checker) VMName(i, j int) {
	name := c.m.Tenants[i].VMs[j].Name
	at := fmt.Sprintf("tenants[%d].vms[%d].name", i, j)
	if name == "" {
		c.p.Add(at, "required")
	} else if f := c.vms[name]; f != [2]int{i, j} {
		c.p.Add(at, "duplicate VM %q (also tenants[%d].vms[%d])", name, f[0], f[1])
	}
}

// Appliance checks appliances[i]: its name (required, unique, not a VM's);
// its server, required unless the appliance is in the hypervisor (then not
// allowed), and checked with server (path and name) when server is not
// nil; its model (known; custom needs costs); parallelism (positive);
// costs (a type each, unique, some service time, nothing negative);
// virtual cost functions (at most one per type and one for all types,
// types the appliance serves, points of increasing size and tokens that do
// not decrease nor are all zero, step not negative); capacity bounds (not
// negative, min at most max); and that the tenants' guarantees on it sum
// to at most capacity_max.
func (c *Checker) Appliance(i int, server func(path, name string)) {
	p := c.p
	a := &c.m.Appliances[i]
	at := fmt.Sprintf("appliances[%d]", i)
	switch ref, isVM := c.vms[a.Name]; {
	case a.Name == "":
		p.Add(at+".name", "required")
	case isVM:
		p.Add(at+".name", "%q is also the name of a VM (tenants[%d].vms[%d])", a.Name, ref[0], ref[1])
	case c.apps[a.Name] != i:
		p.Add(at+".name", "duplicate appliance %q (also appliances[%d])", a.Name, c.apps[a.Name])
	}
	switch {
	case a.Hypervisor && a.Server != "":
		p.Add(at+".server", "not used by a hypervisor appliance (it runs on the servers of the VMs that use it)")
	case a.Hypervisor:
	case a.Server == "":
		p.Add(at+".server", "required (or hypervisor: true)")
	case server != nil:
		server(at+".server", a.Server)
	}
	_, modelOK := modelCosts[a.Model]
	switch {
	case a.Model == "":
		p.Add(at+".model", "required (%s)", OrList(Models))
	case !modelOK:
		p.Add(at+".model", "unknown model %q (use %s)", a.Model, OrList(Models))
	case a.Model == ModelCustom && len(a.Costs) == 0:
		p.Add(at+".costs", "required for model custom (the service cost of every request type)")
	}
	if !(a.Parallelism > 0) || math.IsInf(a.Parallelism, 0) {
		p.Add(at+".parallelism", "must be a positive number, got %v", a.Parallelism)
	}
	a.checkCosts(p, at)
	a.checkVirtualCost(p, at, modelOK)
	minOK := nonNegativeTokens(p, at+".capacity_min", a.CapacityMin)
	maxOK := nonNegativeTokens(p, at+".capacity_max", a.CapacityMax)
	if minOK && maxOK && a.CapacityMax > 0 && a.CapacityMin > a.CapacityMax {
		p.Add(at+".capacity_min", "%v tokens/s is more than capacity_max %v tokens/s", a.CapacityMin, a.CapacityMax)
	}
	if maxOK && a.CapacityMax > 0 && a.Name != "" {
		c.checkGuaranteeSum(at, a)
	}
	a.checkEndpoint(p, at)
}

// checkEndpoint checks a real appliance's address, port and protocol: all
// three or none, an address that can be connected to, a port in 1..65535,
// a known protocol; not for a hypervisor appliance (no address of its own).
func (a *Appliance) checkEndpoint(p *Problems, at string) {
	if a.Address == "" && a.Port == 0 && a.Protocol == "" {
		return
	}
	if a.Hypervisor {
		p.Add(at+".address", "a hypervisor appliance has no address of its own")
		return
	}
	if ip, err := netip.ParseAddr(a.Address); a.Address == "" {
		p.Add(at+".address", "required with port and protocol (the IP address clients connect to)")
	} else if err != nil || ip.Zone() != "" {
		p.Add(at+".address", "%q is not an IP address", a.Address)
	} else if ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() {
		p.Add(at+".address", "%v is not an address clients can connect to", ip)
	}
	if a.Port < 1 || a.Port > 65535 {
		p.Add(at+".port", "must be 1..65535 with an address, got %d", a.Port)
	}
	if !slices.Contains(Protocols, a.Protocol) {
		p.Add(at+".protocol", "%q: use %s", a.Protocol, OrList(Protocols))
	}
}

// checkGuaranteeSum reports an appliance whose tenants' guarantees sum to
// more than its capacity_max.
func (c *Checker) checkGuaranteeSum(at string, a *Appliance) {
	var sum float64
	var parts []string
	for _, t := range c.m.Tenants {
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
			parts = append(parts, t.Name+" "+units.FormatTokens(g))
		}
	}
	if max := float64(a.CapacityMax); sum > max*(1+1e-9) {
		c.p.Add(at, "guarantees sum to %s tokens/s, more than capacity_max %s tokens/s (tenants %s)",
			units.FormatTokens(sum), units.FormatTokens(max), strings.Join(parts, ", "))
	}
}

// badNumber reports NaN and infinities.
func badNumber(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

// nonNegativeTokens checks an optional amount of tokens.
func nonNegativeTokens(p *Problems, path string, t units.Tokens) bool {
	if t < 0 || badNumber(float64(t)) {
		p.Add(path, "must not be negative, got %v", t)
		return false
	}
	return true
}

func (a *Appliance) checkCosts(p *Problems, at string) {
	types := map[string]int{}
	for j, c := range a.Costs {
		cat := fmt.Sprintf("%s.costs[%d]", at, j)
		if c.Type == "" {
			p.Add(cat+".type", "required")
		} else if k, dup := types[c.Type]; dup {
			p.Add(cat+".type", "duplicate type %q (also %s.costs[%d])", c.Type, at, k)
		} else {
			types[c.Type] = j
		}
		ok := true
		if c.Base < 0 {
			p.Add(cat+".base", "must not be negative, got %v", c.Base)
			ok = false
		}
		if c.PerKB < 0 {
			p.Add(cat+".per_kb", "must not be negative, got %v", c.PerKB)
			ok = false
		}
		if ok && c.Base == 0 && c.PerKB == 0 {
			p.Add(cat, "base and per_kb are both zero: a request must take some service time")
		}
	}
}

func (a *Appliance) checkVirtualCost(p *Problems, at string, modelOK bool) {
	types := map[string]int{}
	for k, v := range a.VirtualCost {
		vat := fmt.Sprintf("%s.virtual_cost[%d]", at, k)
		if j, dup := types[v.Type]; dup {
			if v.Type == "" {
				p.Add(vat, "duplicate cost function for all types (also %s.virtual_cost[%d])", at, j)
			} else {
				p.Add(vat+".type", "duplicate cost function for type %q (also %s.virtual_cost[%d])", v.Type, at, j)
			}
		} else {
			types[v.Type] = k
			if v.Type != "" && modelOK && len(a.Types()) > 0 && !slices.Contains(a.Types(), v.Type) {
				p.Add(vat+".type", "unknown type %q for appliance %q (use %s)", v.Type, a.Name, OrList(a.Types()))
			}
		}
		if v.Step < 0 || badNumber(float64(v.Step)) {
			p.Add(vat+".step", "must not be negative, got %v", float64(v.Step))
		}
		if len(v.Points) == 0 {
			p.Add(vat+".points", "required (at least one point of size and tokens)")
			continue
		}
		ok := true
		for m, pt := range v.Points {
			pat := fmt.Sprintf("%s.points[%d]", vat, m)
			if pt.Size < 0 || badNumber(float64(pt.Size)) {
				p.Add(pat+".size", "must be a non-negative size, got %v", float64(pt.Size))
				ok = false
			} else if m > 0 && pt.Size <= v.Points[m-1].Size {
				p.Add(pat+".size", "%v is not larger than the previous size %v (sizes must increase)", float64(pt.Size), float64(v.Points[m-1].Size))
				ok = false
			}
			if pt.Tokens < 0 || badNumber(float64(pt.Tokens)) {
				p.Add(pat+".tokens", "must be a non-negative number of tokens, got %v", pt.Tokens)
				ok = false
			} else if m > 0 && pt.Tokens < v.Points[m-1].Tokens {
				p.Add(pat+".tokens", "%v is less than the previous point's %v: a cost function must not decrease with request size", pt.Tokens, v.Points[m-1].Tokens)
				ok = false
			}
		}
		if ok && v.Points[len(v.Points)-1].Tokens == 0 {
			p.Add(vat+".points", "every point costs 0 tokens: requests would be free")
		}
	}
}

// VDC checks the VDC of tenants[i], if it has one: its policy (known;
// ApplyDefaults sets drf), global weight (not negative), appliance
// guarantees (a declared appliance each, once; a positive guarantee, none
// for a best-effort tenant; max not below it) and local weights (positive,
// keyed "src->dst" with src a VM of the tenant and dst a VM of the tenant
// or an appliance in its VDC).
func (c *Checker) VDC(i int) {
	p := c.p
	t := &c.m.Tenants[i]
	v := t.VDC
	if v == nil {
		return
	}
	at := fmt.Sprintf("tenants[%d].vdc", i)
	switch {
	case v.Policy == "":
		p.Add(at+".policy", "required (%s; ApplyDefaults sets drf)", OrList(Policies))
	case !slices.Contains(Policies, v.Policy):
		p.Add(at+".policy", "unknown policy %q (use %s)", v.Policy, OrList(Policies))
	}
	if v.GlobalWeight < 0 || badNumber(v.GlobalWeight) {
		p.Add(at+".global_weight", "must be a non-negative number, got %v", v.GlobalWeight)
	}
	seen := map[string]int{}
	for j, g := range v.Appliances {
		gat := fmt.Sprintf("%s.appliances[%d]", at, j)
		_, known := c.apps[g.Appliance]
		switch k, dup := seen[g.Appliance]; {
		case g.Appliance == "":
			p.Add(gat+".appliance", "required")
		case dup:
			p.Add(gat+".appliance", "duplicate guarantee on appliance %q (also %s.appliances[%d])", g.Appliance, at, k)
		case !known:
			p.Add(gat+".appliance", "unknown appliance %q", g.Appliance)
		default:
			seen[g.Appliance] = j
		}
		switch {
		case t.BestEffort:
			p.Add(gat+".guarantee", "a best_effort tenant has no guarantees")
		case g.Guarantee == 0:
			p.Add(gat+".guarantee", "required (a positive rate of tokens such as \"1600MT/s\")")
		case g.Guarantee < 0 || badNumber(float64(g.Guarantee)):
			p.Add(gat+".guarantee", "must be positive, got %v", g.Guarantee)
		}
		switch {
		case g.Max < 0 || badNumber(float64(g.Max)):
			p.Add(gat+".max", "must not be negative, got %v", g.Max)
		case g.Max > 0 && g.Guarantee > 0 && g.Max < g.Guarantee:
			p.Add(gat+".max", "%v is less than the guarantee %v", g.Max, g.Guarantee)
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
			p.Add(wat, "must be a positive number, got %v", w)
		}
		src, dst, ok := strings.Cut(k, "->")
		if !ok || src == "" || dst == "" {
			p.Add(wat, "not of the form \"src->dst\" (a VM of the tenant, then a VM of the tenant or an appliance in its VDC)")
			continue
		}
		switch ref, ok := c.vms[src]; {
		case !ok:
			p.Add(wat, "unknown VM %q", src)
		case ref[0] != i:
			p.Add(wat, "VM %q belongs to tenant %q, not %q", src, c.m.Tenants[ref[0]].Name, t.Name)
		}
		ref, isVM := c.vms[dst]
		_, inVDC := v.Guarantee(dst)
		if !(isVM && ref[0] == i || !isVM && inVDC) {
			p.Add(wat, "%q is neither a VM of tenant %q nor an appliance in its VDC", dst, t.Name)
		}
	}
}
