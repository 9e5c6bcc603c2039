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
// tenants sum to at most the link's capacity.
package place

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
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
	nl := len(t.Links)
	out := make([]float64, nl) // Σ out of senders over the link, this tenant
	in := make([]float64, nl)  // Σ in of receivers over the link, this tenant
	stamp := make([]int, nl)   // last VM counted on the link (index+1)
	seen := make([]bool, nl)   // link is in touched
	var touched []int
	perLink := make([][]TenantReservation, nl)

	type pairRoute struct {
		src, dst int
		path     []int
	}
	var routes []pairRoute
	var errs []error
	for ti := range s.Tenants {
		tn := &s.Tenants[ti]
		if tn.BestEffort {
			continue
		}
		n := len(tn.VMs)
		server := make([]int, n)
		vin := make([]float64, n)
		vout := make([]float64, n)
		ok := true
		for j := range tn.VMs {
			v := &tn.VMs[j]
			node, found := t.Node(v.Server)
			if !found || node.Kind != topo.Server {
				errs = append(errs, &spec.FieldError{File: s.File, Path: fmt.Sprintf("tenants[%d].vms[%d].server", ti, j),
					Msg: fmt.Sprintf("server %q is not in the topology", v.Server)})
				ok = false
				continue
			}
			server[j] = node.ID
			vin[j], vout[j] = tn.Hose(v)
		}
		if !ok {
			continue
		}
		touch := func(l int) {
			if !seen[l] {
				seen[l] = true
				touched = append(touched, l)
			}
		}
		// Route every pair that can need a reservation once.
		routes = routes[:0]
		for a := range n {
			for b := range n {
				if a == b || server[a] == server[b] || vout[a] == 0 && vin[b] == 0 {
					continue
				}
				path := t.Route(server[a], server[b], topo.PairHash(s.Seed, tn.VMs[a].Name, tn.VMs[b].Name))
				routes = append(routes, pairRoute{a, b, path})
				for _, l := range path {
					touch(l)
				}
			}
		}
		// Senders (routes are in sender order): each counted once per link.
		for _, r := range routes {
			for _, l := range r.path {
				if stamp[l] != r.src+1 {
					stamp[l] = r.src + 1
					out[l] += vout[r.src]
				}
			}
		}
		for _, l := range touched {
			stamp[l] = 0
		}
		// Receivers: a receiver's routes are spread over the list, so mark
		// (link, receiver) pairs seen by stamping per receiver in turn.
		byDst := make([][]int, n)
		for i, r := range routes {
			byDst[r.dst] = append(byDst[r.dst], i)
		}
		for b, idx := range byDst {
			for _, i := range idx {
				for _, l := range routes[i].path {
					if stamp[l] != b+1 {
						stamp[l] = b + 1
						in[l] += vin[b]
					}
				}
			}
		}
		for _, l := range touched {
			if r := min(out[l], in[l]); r > 0 {
				perLink[l] = append(perLink[l], TenantReservation{Tenant: tn.Name, Rate: r})
			}
			out[l], in[l], stamp[l], seen[l] = 0, 0, 0, false
		}
		touched = touched[:0]
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("admission: %w", errors.Join(errs...))
	}
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
	return res, nil
}

// Admit checks that the scenario's placement fits the topology: on every
// directed link the tenants' hose reservations (Reservations) sum to at most
// its capacity. It reports every oversubscribed link, each a
// *spec.FieldError with path "admission", joined:
//
//	scenario.yaml: admission: link "s1->tor1" oversubscribed: guarantees sum to 1.2 Gbps, capacity 1 Gbps (tenants A 600 Mbps, B 600 Mbps)
func Admit(s *spec.Scenario, t *topo.Topology) error {
	res, err := Reservations(s, t)
	if err != nil {
		return err
	}
	var errs []error
	for i := range res {
		r := &res[i]
		if !r.Oversubscribed() {
			continue
		}
		parts := make([]string, len(r.Tenants))
		for j, x := range r.Tenants {
			parts[j] = x.Tenant + " " + spec.FormatRate(x.Rate)
		}
		errs = append(errs, &spec.FieldError{File: s.File, Path: "admission", Msg: fmt.Sprintf(
			"link %q oversubscribed: guarantees sum to %s, capacity %s (tenants %s)",
			r.Name, spec.FormatRate(r.Total), spec.FormatRate(r.Capacity), strings.Join(parts, ", "))})
	}
	return errors.Join(errs...)
}
