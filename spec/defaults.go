package spec

import (
	"fmt"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/units"
)

// Defaults, applied by ApplyDefaults (and so by Parse and Load) to fields
// left zero.
const (
	DefaultUnits       = "Mbps"
	DefaultDT          = Duration(time.Millisecond)
	DefaultSeed        = 1
	DefaultMechanism   = "none"
	DefaultSample      = Duration(10 * time.Millisecond) // or dt, if dt is longer
	DefaultConnections = 1
	DefaultTransport   = "tcp" // onoff workloads
	DefaultParetoShape = 1.2
	DefaultLognormal   = 1.0                      // sigma
	DefaultOversub     = 1.0                      // two-tier, when core is not given
	DefaultParallelism = model.DefaultParallelism // appliances
	DefaultPolicy      = model.DefaultPolicy
)

// ApplyDefaults fills the fields a scenario may leave out:
//
//   - units "Mbps" (and the canonical spelling of a known unit: "gbps" → "Gbps")
//   - dt 1ms; seed 1; mechanism.name "none"
//   - outputs.sample 10ms, or dt when dt is longer; outputs.plots true
//   - two_tier.oversubscription 1 when two_tier.core is not given
//   - workloads: name "<tenant>-<kind>-<n>" (n = its 1-based position in the
//     workloads list); connections 1 for tcp workloads and tcp onoff
//     workloads; transport "tcp" for onoff
//   - sizes: shape 1.2 for pareto, sigma (shape) 1 for lognormal
//   - appliances: parallelism 1; virtual_cost gains Pulsar Fig. 6(b)
//     (DefaultVirtualCost) for all types when no entry covers all types
//   - tenants' vdc: policy "drf"
//   - requests workloads: a mix of one entry has fraction 1; every mix
//     entry's request and response bytes by type (RequestType.Bytes)
//
// It is idempotent. Parse calls it; call it yourself on a Scenario built in
// code before Validate.
func (s *Scenario) ApplyDefaults() {
	if s.Units == "" {
		s.Units = DefaultUnits
	} else if u, ok := canonicalUnit(s.Units); ok {
		s.Units = u
	}
	if s.DT == 0 {
		s.DT = DefaultDT
	}
	if s.Seed == 0 {
		s.Seed = DefaultSeed
	}
	// Workloads without phases of their own run in their tenant's.
	for i := range s.Workloads {
		w := &s.Workloads[i]
		if w.Start != 0 || w.Stop != 0 || len(w.Phases) > 0 {
			continue
		}
		if t, ok := s.LookupTenant(w.Tenant); ok && len(t.Phases) > 0 {
			w.Phases = append([]Phase(nil), t.Phases...)
		}
	}
	if s.Mechanism.Name == "" {
		s.Mechanism.Name = DefaultMechanism
	}
	if s.Outputs.Sample == 0 {
		s.Outputs.Sample = max(DefaultSample, s.DT)
	}
	if s.Outputs.Plots == nil {
		t := true
		s.Outputs.Plots = &t
	}
	s.Topology.applyDefaults()
	for i := range s.Appliances {
		s.Appliances[i].ApplyDefaults()
	}
	for i := range s.Tenants {
		s.Tenants[i].VDC.ApplyDefaults()
	}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		if w.Kind == KindRequests {
			if len(w.Mix) == 1 && w.Mix[0].Fraction == 0 {
				w.Mix[0].Fraction = 1
			}
			for k := range w.Mix {
				m := &w.Mix[k]
				req, resp := m.Bytes()
				m.Request, m.Response = Bytes(req), Bytes(resp)
			}
		}
		if w.Name == "" && w.Tenant != "" && w.Kind != "" {
			w.Name = fmt.Sprintf("%s-%s-%d", w.Tenant, w.Kind, i+1)
		}
		if w.Kind == KindOnOff && w.Transport == "" {
			w.Transport = DefaultTransport
		}
		if w.Connections == 0 && (w.Kind == KindTCP || w.Kind == KindOnOff && w.Transport == "tcp") {
			w.Connections = DefaultConnections
		}
		if d := w.Sizes; d != nil && d.Shape == 0 {
			switch d.Dist {
			case DistPareto:
				d.Shape = DefaultParetoShape
			case DistLognormal:
				d.Shape = DefaultLognormal
			}
		}
	}
}

// applyDefaults fills what a topology may leave out (ApplyDefaults).
func (t *Topology) applyDefaults() {
	if tt := t.TwoTier; tt != nil && tt.Core == 0 && tt.Oversubscription == 0 {
		tt.Oversubscription = DefaultOversub
	}
}

// reportUnits are the report units, canonically spelled: rates, then
// token rates.
var reportUnits = []string{"bps", "Kbps", "Mbps", "Gbps", "Tbps", "T/s", "KT/s", "MT/s", "GT/s"}

// canonicalUnit returns the canonical spelling of a report unit.
func canonicalUnit(u string) (string, bool) {
	for _, c := range reportUnits {
		if strings.EqualFold(u, c) {
			return c, true
		}
	}
	return "", false
}

// UnitScale is the number of bits/s in one report unit (Units): 1e6 for
// "Mbps". For a token unit, network tokens are bytes, so it is 8 × the
// tokens/s of the unit: 8e6 for "MT/s". It is 1e6 for an unknown or empty
// unit (Validate rejects those).
func (s *Scenario) UnitScale() float64 {
	u, ok := canonicalUnit(s.Units)
	if !ok {
		return 1e6
	}
	if strings.HasSuffix(u, "T/s") {
		f, _ := units.ParseTokens("1" + u)
		return 8 * f
	}
	f, _ := units.ParseRate("1" + u)
	return f
}

// TokenScale is the number of tokens/s in one report unit, for appliance
// throughput and guarantees: 1e6 for "MT/s"; for a bps unit a token counts
// as a byte, UnitScale()/8 (125 000 for "Mbps").
func (s *Scenario) TokenScale() float64 {
	return s.UnitScale() / 8
}
