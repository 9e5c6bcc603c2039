// Package place is admission control for hose-model tenants (Oktopus): can
// the physical links carry every tenant's hose guarantees whatever the
// traffic pattern inside each tenant?
//
// For a tenant and a directed link L, the hose model needs
//
//	R(tenant, L) = min( Σ out of the tenant's VMs that send over L,
//	                    Σ in  of the tenant's VMs that receive over L )
//
// where "send over L" means the route to at least one other VM of the tenant
// crosses L, and "receive over L" that the route from at least one crosses
// it. On a tree L splits the VMs in two and this is exactly Oktopus's
// min(Σ out on one side, Σ in on the other). On multipath topologies the
// routes are those the simulator uses: the pair src → dst of VMs takes
// topo.Route(server(src), server(dst), topo.PairHash(seed, src, dst)).
// VMs on the same server use no link. Best-effort tenants reserve nothing.
//
// A placement is admitted when, on every link, the reservations of all
// tenants sum to at most the link's capacity. HoseReservations is the one
// implementation of R; Reservations and Admit apply it to a scenario's
// fixed placement.
//
// Placement: a Placer admits a stream of tenant requests (N VMs with
// per-VM hoses, symmetric or not, optionally a worst-case survival ratio)
// onto a topology with VM slots per server, keeping every link's
// reservations; tenants can leave. Two algorithms search for a layout:
// Oktopus (the first group of the lowest layer — server, rack, pod, whole
// tree — that can hold the tenant, filled greedily) and QShare's Alg. 1
// (every group of the lowest feasible layer laid out with the least
// bandwidth, the winner elected by a load-weighted cost of bandwidth and
// per-port tenant count). Trees and multi-rooted trees are searched over
// their groups, with the parallel uplinks of a group as one generalized
// link; other graphs over balls around switches, each server joined to the
// ball's root by the best of its k shortest paths. Whatever the search
// proposes is admitted only if its exact reservations (HoseReservations, on
// the simulator's routes) fit; a rejection names the resource that ran out.
// docs/placement.md describes the algorithms and what was reconstructed.
package place

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bulkhead-dc/bulkhead/mech"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
	"github.com/bulkhead-dc/bulkhead/units"
)

// TenantReservation is what one tenant reserves on a link.
type TenantReservation struct {
	Tenant string
	Rate   float64 // bits/s
}

// LinkReservation is the hose-model reservation on one directed link.
type LinkReservation struct {
	Link     int // link ID in the topology
	Name     string
	Capacity float64 // bits/s
	Total    float64 // Σ Tenants[i].Rate
	// Tenants with a nonzero reservation on the link, in scenario order.
	Tenants []TenantReservation
}

// Oversubscribed reports whether the reservations exceed the capacity
// (beyond a relative tolerance of 1e-9 for rounding).
func (r *LinkReservation) Oversubscribed() bool {
	return r.Total > r.Capacity*(1+1e-9)
}

// Reservations computes the hose-model reservation of every tenant on every
// link (see the package comment). It returns the links with a nonzero
// reservation in link-ID order. It fails if a VM's server is not a server of
// t.
func Reservations(s *spec.Scenario, t *topo.Topology) ([]LinkReservation, error) {
	perLink := make([][]TenantReservation, len(t.Links))
	var (
		calc hoseCalc
		vms  []VMHose
		errs []error
	)
	for ti := range s.Tenants {
		tn := &s.Tenants[ti]
		if tn.BestEffort {
			continue
		}
		vms = vms[:0]
		ok := true
		for j := range tn.VMs {
			v := &tn.VMs[j]
			node, found := t.Node(v.Server)
			if !found || node.Kind != topo.Server {
				errs = append(errs, &model.FieldError{File: s.File, Path: fmt.Sprintf("tenants[%d].vms[%d].server", ti, j),
					Msg: fmt.Sprintf("server %q is not in the topology", v.Server)})
				ok = false
				continue
			}
			in, out := tn.Hose(v)
			vms = append(vms, VMHose{Name: v.Name, Server: node.ID, In: in, Out: out})
		}
		if !ok {
			continue
		}
		calc.tenant(t, s.Seed, vms, func(l int, r float64) {
			perLink[l] = append(perLink[l], TenantReservation{Tenant: tn.Name, Rate: r})
		})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("admission: %w", errors.Join(errs...))
	}
	return linkReservations(t, perLink), nil
}

// linkReservations gathers per-link tenant reservations into
// LinkReservations, in link-ID order, leaving out links without any.
func linkReservations(t *topo.Topology, perLink [][]TenantReservation) []LinkReservation {
	var res []LinkReservation
	for l, ts := range perLink {
		if len(ts) == 0 {
			continue
		}
		r := LinkReservation{Link: l, Name: t.Links[l].Name, Capacity: t.Links[l].Capacity, Tenants: ts}
		for _, x := range ts {
			r.Total += x.Rate
		}
		res = append(res, r)
	}
	return res
}

// Admit checks that the scenario's placement fits the topology: on every
// directed link the tenants' hose reservations (Reservations) sum to at most
// its capacity. It reports every oversubscribed link, each a
// *model.FieldError with path "admission", joined:
//
//	scenario.yaml: admission: link "s1->tor1" oversubscribed: guarantees sum to 1.2 Gbps, capacity 1 Gbps (tenants A 600 Mbps, B 600 Mbps)
func Admit(s *spec.Scenario, t *topo.Topology) error {
	return AdmitWithHeadroom(s, t, 0, "")
}

// AdmitFor checks that the scenario's guarantees fit what a mechanism
// can guarantee: links less the headroom it keeps on servers' access
// links (mech.Capabilities.Headroom). Admit has checked them against the
// links' capacities.
func AdmitFor(s *spec.Scenario, t *topo.Topology, m mech.Mechanism) error {
	h := m.Capabilities().Headroom
	if h <= 0 {
		return nil
	}
	return AdmitWithHeadroom(s, t, h, m.Name())
}

// AdmitWithHeadroom is Admit for a mechanism (named by who) that keeps a
// fraction headroom of every server's access link free of guarantees
// (mech.Capabilities.Headroom): on those links the guarantees must fit
// in capacity × (1 − headroom).
func AdmitWithHeadroom(s *spec.Scenario, t *topo.Topology, headroom float64, who string) error {
	res, err := Reservations(s, t)
	if err != nil {
		return err
	}
	var errs []error
	for i := range res {
		r := &res[i]
		capacity, why := r.Capacity, ""
		if headroom > 0 && t.IsAccess(r.Link) {
			capacity *= 1 - headroom
			why = fmt.Sprintf(" of which %s guarantees at most %s (it keeps %g%% of a server's link free)",
				who, units.FormatRate(capacity), 100*headroom)
		}
		if r.Total <= capacity*(1+1e-9) {
			continue
		}
		parts := make([]string, len(r.Tenants))
		for j, x := range r.Tenants {
			parts[j] = x.Tenant + " " + units.FormatRate(x.Rate)
		}
		errs = append(errs, &model.FieldError{File: s.File, Path: "admission", Msg: fmt.Sprintf(
			"link %q oversubscribed: guarantees sum to %s, capacity %s%s (tenants %s)",
			r.Name, units.FormatRate(r.Total), units.FormatRate(r.Capacity), why, strings.Join(parts, ", "))})
	}
	return errors.Join(errs...)
}

// MechReservations are the hose-model reservations of a scenario's
// tenants on the topology's links as central controllers take them (a
// tenant's rate per link ID); an empty, non-nil list when nothing is
// reserved.
func MechReservations(s *spec.Scenario, t *topo.Topology) ([]mech.Reservation, error) {
	lr, err := Reservations(s, t)
	if err != nil {
		return nil, err
	}
	out := []mech.Reservation{} // none reserved, but known
	for _, l := range lr {
		for _, tr := range l.Tenants {
			out = append(out, mech.Reservation{Tenant: tr.Tenant, Resource: l.Link, Rate: tr.Rate})
		}
	}
	return out, nil
}
