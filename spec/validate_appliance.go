package spec

import (
	"fmt"
	"math"
	"slices"

	"github.com/bulkhead-dc/bulkhead/model"
)

// badNumber reports NaN and infinities.
func badNumber(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

// serverCheck returns the check of a VM's or an appliance's server (path,
// name) against the servers the topology declares; it checks nothing when
// the topology is not valid, so that one mistake does not cascade.
func (s *Scenario) serverCheck(p *problems, topoOK bool) func(path, name string) {
	isServer, kindOf := s.Topology.serverSet()
	return func(path, name string) {
		switch {
		case !topoOK:
		case kindOf != nil && kindOf[name] == NodeSwitch:
			p.Add(path, "%q is a switch, not a server", name)
		case !isServer(name):
			p.Add(path, "unknown server %q", name)
		}
	}
}

// validateAppliances checks the appliances (model.Checker.Appliance),
// their servers with server.
func (s *Scenario) validateAppliances(c *model.Checker, server func(path, name string)) {
	for i := range s.Appliances {
		c.Appliance(i, server)
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
				p.Add(field, "tenant %q has no guarantee on appliance %q in its VDC", w.Tenant, app)
			}
		}
	}
	var a *Appliance
	appOK := false
	switch {
	case len(w.Dst) > 0 && w.Appliance != "":
		p.Add(at+".dst", "give dst (VMs) or appliance as the requests' destination, not both")
	case len(w.Dst) > 0:
		// VM destinations are checked with src (same tenant).
	case w.Appliance == "":
		p.Add(at+".appliance", "required for kind requests (the appliance the VMs send requests to), or dst (VMs)")
	default:
		a, appOK = s.LookupAppliance(w.Appliance)
		if !appOK {
			p.Add(at+".appliance", "unknown appliance %q", w.Appliance)
		} else {
			inVDC(at+".appliance", w.Appliance)
		}
	}
	if len(w.Dst) == 1 && len(w.Src) == 1 && w.Dst[0] == w.Src[0] {
		p.Add(at, "no VM pairs: src and dst are the same single VM")
	}
	seenVia := map[string]int{}
	for k, v := range w.Via {
		vat := fmt.Sprintf("%s.via[%d]", at, k)
		va, ok := s.LookupAppliance(v.Appliance)
		switch {
		case v.Appliance == "":
			p.Add(vat+".appliance", "required")
			continue
		case !ok:
			p.Add(vat+".appliance", "unknown appliance %q", v.Appliance)
			continue
		case v.Appliance == w.Appliance:
			p.Add(vat+".appliance", "%q is the destination itself", v.Appliance)
			continue
		}
		if j, dup := seenVia[v.Appliance]; dup {
			p.Add(vat+".appliance", "%q already passed at via[%d]", v.Appliance, j)
			continue
		}
		seenVia[v.Appliance] = k
		inVDC(vat+".appliance", v.Appliance)
		if _, known := model.ModelCosts(va.Model); known && len(va.Types()) > 0 && !slices.Contains(va.Types(), v.Type) {
			if v.Type == "" {
				p.Add(vat+".type", "required (the request type the appliance serves, e.g. rc4)")
			} else {
				p.Add(vat+".type", "unknown type %q for appliance %q (use %s)", v.Type, va.Name, model.OrList(va.Types()))
			}
		}
	}
	switch {
	case w.Outstanding != 0 && w.RequestRate != 0:
		p.Add(at, "give outstanding (closed loop) or request_rate (open loop), not both")
	case w.Outstanding == 0 && w.RequestRate == 0:
		p.Add(at, "requests need outstanding (closed loop: requests in flight per VM) or request_rate (open loop: requests/s per VM)")
	}
	if w.Outstanding < 0 {
		p.Add(at+".outstanding", "must be positive, got %d", w.Outstanding)
	}
	if w.RequestRate < 0 || badNumber(w.RequestRate) {
		p.Add(at+".request_rate", "must be a positive number of requests per second, got %v", w.RequestRate)
	} else if w.RequestRate != 0 && !eventRateInRange(w.RequestRate) {
		p.Add(at+".request_rate", "%g requests/s is outside the range %g to %g requests/s", w.RequestRate, float64(MinEventRate), float64(MaxEventRate))
	}
	if w.Outstanding > MaxConnections {
		p.Add(at+".outstanding", "%d is more than the limit of %d requests in flight per VM", w.Outstanding, MaxConnections)
	}
	if len(w.Mix) == 0 {
		p.Add(at+".mix", "required for kind requests (request types with size and fraction)")
		return
	}
	// Types are checked when the appliance's own types are sound.
	typesOK := false
	if appOK {
		_, known := model.ModelCosts(a.Model)
		typesOK = known && len(a.Types()) > 0
	}
	sum, fractionsOK := 0.0, true
	for k, m := range w.Mix {
		mat := fmt.Sprintf("%s.mix[%d]", at, k)
		switch {
		case m.Type == "":
			p.Add(mat+".type", "required")
		case typesOK && !slices.Contains(a.Types(), m.Type):
			p.Add(mat+".type", "unknown type %q for appliance %q (use %s)", m.Type, a.Name, model.OrList(a.Types()))
		}
		switch {
		case m.Size == 0:
			p.Add(mat+".size", "required (a positive size such as \"8KB\")")
		case m.Size < 0 || badNumber(float64(m.Size)):
			p.Add(mat+".size", "must be a positive size, got %v", float64(m.Size))
		case !sizeInRange(float64(m.Size)):
			p.Add(mat+".size", "%g B is outside the representable range of sizes, %g B to %g B", float64(m.Size), float64(MinSize), float64(MaxSize))
		}
		switch {
		case m.Fraction == 0:
			p.Add(mat+".fraction", "required (the share of the workload's requests of this entry, > 0)")
			fractionsOK = false
		case m.Fraction < 0 || badNumber(m.Fraction):
			p.Add(mat+".fraction", "must be positive, got %v", m.Fraction)
			fractionsOK = false
		default:
			sum += m.Fraction
		}
		if m.Request < 0 || badNumber(float64(m.Request)) {
			p.Add(mat+".request", "must not be negative, got %v", float64(m.Request))
		} else if m.Request > MaxSize {
			p.Add(mat+".request", "%g B is more than the limit of %g B", float64(m.Request), float64(MaxSize))
		}
		if m.Response < 0 || badNumber(float64(m.Response)) {
			p.Add(mat+".response", "must not be negative, got %v", float64(m.Response))
		} else if m.Response > MaxSize {
			p.Add(mat+".response", "%g B is more than the limit of %g B", float64(m.Response), float64(MaxSize))
		}
	}
	if fractionsOK && math.Abs(sum-1) > 1e-6 {
		p.Add(at+".mix", "fractions sum to %.9g, not 1", sum)
	}
}
