package controller

import (
	"maps"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/place"
)

// fillStatus sets the status of the tenants and hosts in objs from the
// snapshot: where each VM is, its guarantees, the tenant's reservations
// on the topology, and how many VMs each host runs.
func (c *Controller) fillStatus(snap *snapshot, objs []api.Object) {
	cl, err := api.Build(snap.objs)
	if err != nil {
		return // nothing stored yet, or no cluster: no status to give
	}
	links := linkReservations(cl)
	perHost := map[string]int{}
	for _, v := range cl.Model.VMs() {
		perHost[v.Host]++
	}
	now := c.cfg.Now()
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	for i := range objs {
		o := &objs[i]
		switch ts := o.Spec.(type) {
		case *api.TenantSpec:
			st := &api.TenantStatus{Links: links[o.Name()]}
			for j := range ts.VMs {
				v := &ts.VMs[j]
				in, out := ts.Hose(v)
				vs := api.VMStatus{Name: v.Name, Host: v.Host, In: in, Out: out}
				if r := c.rt.vms[v.Name]; r != nil && now.Sub(r.at) <= staleAfter {
					vs.Received, vs.Sent = r.received, r.sent
					st.Achieved += r.received
				}
				st.VMs = append(st.VMs, vs)
				st.Guarantee += in
			}
			st.Below = c.rt.view[o.Name()].below
			if tc := c.rt.tenants[o.Name()]; tc != nil && tc.intervals > 0 {
				f := float64(tc.compliant) / float64(tc.intervals)
				st.Compliance = &f
			}
			o.Status = st
		case *api.HostSpec:
			hs := &api.HostStatus{VMs: perHost[o.Name()]}
			if h := c.rt.hosts[o.Name()]; h != nil {
				hs.Connected, hs.Version, hs.Revision = h.connected, h.version, h.revision
				if st := h.stats; st != nil {
					hs.Steps, hs.StepSeconds, hs.LimitFailures = st.Steps, st.StepSeconds, st.LimitFailures
					hs.Dropped = maps.Clone(st.Dropped)
				}
				if !h.lastReport.IsZero() {
					t := h.lastReport.UTC()
					hs.LastReport = &t
				}
			}
			o.Status = hs
		}
	}
}

// linkReservations are every tenant's hose reservations on the links of
// the cluster's topology, as admission makes them (nil if the topology
// takes no placer).
func linkReservations(cl *api.Cluster) map[string][]api.LinkReservation {
	pl, err := place.NewPlacer(cl.Topology, place.Options{Slots: cl.Spec.Slots, Seed: cl.Spec.Seed})
	if err != nil {
		return nil
	}
	links := map[string][]api.LinkReservation{}
	for _, o := range cl.Objects {
		ts, ok := o.Spec.(*api.TenantSpec)
		if !ok {
			continue
		}
		st := specTenant(o.Name(), ts)
		if pl.Reserve(&st) != nil {
			continue
		}
		p, _ := pl.Tenant(o.Name())
		for _, l := range p.Links {
			links[o.Name()] = append(links[o.Name()], api.LinkReservation{Link: l.Name, Rate: l.Rate})
		}
	}
	return links
}
