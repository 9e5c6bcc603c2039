package controller

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/topo"
	"github.com/bulkhead-dc/bulkhead/webui"
)

// maxRoutedPairs bounds the VM pairs one dashboard snapshot routes over
// the topology (the rates of links other than servers' access links).
const maxRoutedPairs = 200000

// dashCache keeps what the web UI's snapshots derive from the declared
// cluster alone, for the store revision it was derived at.
type dashCache struct {
	mu  sync.Mutex
	rev int64
	res map[string][]api.LinkReservation // by tenant
}

// reservations are the tenants' link reservations at the cluster's
// revision, computed once per revision.
func (c *Controller) reservations(rev int64, cl *api.Cluster) map[string][]api.LinkReservation {
	c.ds.mu.Lock()
	defer c.ds.mu.Unlock()
	if c.ds.res == nil || c.ds.rev != rev {
		c.ds.res, c.ds.rev = linkReservations(cl), rev
	}
	return c.ds.res
}

// Dashboard is the web UI's snapshot of the cluster (webui.Source): the
// declared tenants, links, appliances and hosts with what the agents'
// latest reports say of them. A follower has no reports: it gives the
// declared figures and who leads, and no rates.
func (c *Controller) Dashboard(ctx context.Context) (*webui.Snapshot, error) {
	now := c.cfg.Now()
	lead, leader := c.Leading()
	out := &webui.Snapshot{Time: now, Controller: webui.Controller{ID: c.cfg.ID, Leading: lead, Leader: leader},
		Tenants: []webui.Tenant{}, Links: []webui.Link{}, Appliances: []webui.Appliance{}, Agents: []webui.Agent{}}
	snap, cl, err := c.cluster(ctx)
	if snap == nil {
		return nil, err
	}
	out.Controller.Revision = snap.rev
	if err != nil {
		out.Notes = append(out.Notes, "the declared objects do not make a cluster yet: "+err.Error())
		return out, nil
	}
	out.Controller.Mechanism = cl.Spec.Mechanism.Name
	if lead {
		if cs := c.CentralStats(); cs.Running {
			out.Controller.Central = &webui.Central{Running: true, Steps: cs.Steps, StepSeconds: cs.Step.Seconds(),
				Flows: cs.Flows, Dropped: cs.Dropped}
		}
	}
	res := c.reservations(snap.rev, cl)
	vmTenant := map[string]string{}
	vmHost := map[string]string{}
	for _, v := range cl.Model.VMs() {
		vmTenant[v.Name], vmHost[v.Name] = v.Tenant, v.Host
	}
	usage, throughput := c.applianceUsage(cl, vmTenant, lead)

	c.rt.mu.Lock()
	fresh := func(name string) *vmState {
		if s := c.rt.vms[name]; lead && s != nil && now.Sub(s.at) <= staleAfter {
			return s
		}
		return nil
	}
	// Tenants.
	for _, t := range cl.Model.Tenants {
		wt := webui.Tenant{Name: t.Name, BestEffort: t.BestEffort, VMCount: len(t.VMs)}
		var achieved float64
		counted := false
		for _, v := range t.VMs {
			wt.Guarantee += v.In
			wv := webui.VM{Name: v.Name, Host: v.Host, In: v.In, Out: v.Out}
			if s := fresh(v.Name); s != nil {
				wv.Received, wv.Sent = ptr(s.received), ptr(s.sent)
				achieved += s.received
				counted = true
			}
			wt.VMs = append(wt.VMs, wv)
		}
		if counted {
			wt.Achieved = ptr(achieved)
		}
		if lead {
			wt.Below = c.rt.view[t.Name].below
			if tc := c.rt.tenants[t.Name]; tc != nil && tc.intervals > 0 {
				wt.Compliance = ptr(float64(tc.compliant) / float64(tc.intervals))
			}
		}
		if t.VDC != nil {
			for _, g := range t.VDC.Appliances {
				vg := webui.VDCGuarantee{Appliance: g.Appliance, Guarantee: float64(g.Guarantee), Max: float64(g.Max)}
				if u, ok := usage[g.Appliance][t.Name]; ok {
					vg.Used = ptr(u)
				}
				wt.VDC = append(wt.VDC, vg)
			}
		}
		out.Tenants = append(out.Tenants, wt)
	}
	// Agents.
	perHost := map[string]int{}
	for _, h := range vmHost {
		perHost[h]++
	}
	for _, name := range slices.Sorted(maps.Keys(cl.Hosts)) {
		a := webui.Agent{Host: name, VMs: perHost[name]}
		if h := c.rt.hosts[name]; h != nil && lead {
			a.Connected, a.Version, a.Revision = h.connected, h.version, h.revision
			if !h.lastReport.IsZero() {
				t := h.lastReport.UTC()
				a.LastReport = &t
			}
			if st := h.stats; st != nil {
				a.Steps, a.StepSeconds, a.LimitFailures = st.Steps, st.StepSeconds, st.LimitFailures
				a.Dropped = maps.Clone(st.Dropped)
			}
		}
		out.Agents = append(out.Agents, a)
	}
	// Links: servers' access links from their VMs' counters, the others
	// from the VM pairs reported, routed as admission routes them.
	tp := cl.Topology
	sent, recv := map[int]float64{}, map[int]float64{}
	measured := map[int]bool{} // servers with a VM with a fresh report
	for vm, h := range vmHost {
		n, ok := tp.Node(h)
		if s := fresh(vm); ok && s != nil {
			sent[n.ID] += s.sent
			recv[n.ID] += s.received
			measured[n.ID] = true
		}
	}
	onLink := make([]float64, len(tp.Links))
	pairsSeen, routed := false, 0
	if lead {
		for _, hp := range c.rt.pairs {
			if now.Sub(hp.at) > staleAfter {
				continue
			}
			for _, p := range hp.pairs {
				if routed >= maxRoutedPairs {
					break
				}
				sh, ok1 := vmHost[p.Src]
				dh, ok2 := vmHost[p.Dst]
				if !ok1 || !ok2 || !finiteNonNeg(p.Rate) {
					continue
				}
				pairsSeen = true
				routed++
				if p.Rate == 0 || sh == dh {
					continue
				}
				sn, _ := tp.Node(sh)
				dn, _ := tp.Node(dh)
				for _, l := range tp.Route(sn.ID, dn.ID, topo.PairHash(cl.Spec.Seed, p.Src, p.Dst)) {
					onLink[l] += p.Rate
				}
			}
		}
	}
	c.rt.mu.Unlock()
	if routed >= maxRoutedPairs {
		out.Notes = append(out.Notes, "links: more VM pairs reported than the UI routes; the rates of links between switches are partial")
	}
	reserved := map[string][]webui.Reservation{}
	for tenant, ls := range res {
		for _, l := range ls {
			reserved[l.Link] = append(reserved[l.Link], webui.Reservation{Tenant: tenant, Rate: l.Rate})
		}
	}
	for _, l := range tp.Links {
		from, to := tp.Nodes[l.From], tp.Nodes[l.To]
		wl := webui.Link{Name: l.Name, From: from.Name, To: to.Name, Capacity: l.Capacity, Reservations: reserved[l.Name]}
		slices.SortFunc(wl.Reservations, func(a, b webui.Reservation) int {
			return cmp.Or(cmp.Compare(b.Rate, a.Rate), cmp.Compare(a.Tenant, b.Tenant))
		})
		for _, r := range wl.Reservations {
			wl.Reserved += r.Rate
		}
		switch {
		case from.Kind == topo.Server:
			if measured[from.ID] {
				wl.Used, wl.Source = ptr(sent[from.ID]), "vms"
			}
		case to.Kind == topo.Server:
			if measured[to.ID] {
				wl.Used, wl.Source = ptr(recv[to.ID]), "vms"
			}
		case pairsSeen:
			wl.Used, wl.Source = ptr(onLink[l.ID]), "pairs"
		}
		out.Links = append(out.Links, wl)
	}
	slices.SortStableFunc(out.Links, func(a, b webui.Link) int {
		ua, ub := -1.0, -1.0
		if a.Used != nil && a.Capacity > 0 {
			ua = *a.Used / a.Capacity
		}
		if b.Used != nil && b.Capacity > 0 {
			ub = *b.Used / b.Capacity
		}
		ra, rb := 0.0, 0.0
		if a.Capacity > 0 {
			ra = a.Reserved / a.Capacity
		}
		if b.Capacity > 0 {
			rb = b.Reserved / b.Capacity
		}
		return cmp.Or(cmp.Compare(ub, ua), cmp.Compare(rb, ra))
	})
	// Appliances.
	var est map[string]float64
	if lead {
		c.cen.mu.Lock()
		est = maps.Clone(c.cen.estimates)
		c.cen.mu.Unlock()
	}
	for _, a := range cl.Model.Appliances {
		wa := webui.Appliance{Name: a.Name, Server: a.Server, Hypervisor: a.Hypervisor,
			CapacityMin: float64(a.CapacityMin), CapacityMax: float64(a.CapacityMax)}
		if x, ok := throughput[a.Name]; ok {
			wa.Throughput = ptr(x)
		}
		if x, ok := est[a.Name]; ok {
			wa.Estimate = ptr(x)
		}
		guar := map[string]float64{}
		for _, t := range cl.Model.Tenants {
			if t.VDC == nil {
				continue
			}
			for _, g := range t.VDC.Appliances {
				if g.Appliance == a.Name {
					guar[t.Name] += float64(g.Guarantee)
				}
			}
		}
		names := slices.Collect(maps.Keys(guar))
		for t := range usage[a.Name] {
			if _, ok := guar[t]; !ok {
				names = append(names, t)
			}
		}
		slices.Sort(names)
		for _, t := range names {
			at := webui.ApplianceTenant{Tenant: t, Guarantee: guar[t]}
			if u, ok := usage[a.Name][t]; ok {
				at.Used = ptr(u)
			}
			wa.Tenants = append(wa.Tenants, at)
		}
		out.Appliances = append(out.Appliances, wa)
	}
	return out, nil
}

// applianceUsage is what each tenant's flows to each appliance used, and
// every appliance's total, in the hosts' latest fresh reports (tokens/s
// at the appliance element of each flow's path). Only a leader has
// reports.
func (c *Controller) applianceUsage(cl *api.Cluster, vmTenant map[string]string, lead bool) (map[string]map[string]float64, map[string]float64) {
	usage, total := map[string]map[string]float64{}, map[string]float64{}
	if !lead || len(cl.Model.Appliances) == 0 {
		return usage, total
	}
	apps := map[string]bool{}
	for _, a := range cl.Model.Appliances {
		apps[a.Name] = true
	}
	now := c.cfg.Now()
	c.cen.mu.Lock()
	defer c.cen.mu.Unlock()
	for _, hr := range c.cen.reports {
		if now.Sub(hr.at) > staleAfter {
			continue
		}
		for _, f := range hr.r.Flows {
			tenant, ok := vmTenant[f.Src]
			if !ok || !apps[f.Dst] {
				continue
			}
			used, ok := expand(f.Used, max(len(f.Path), 1), false)
			if !ok {
				continue
			}
			x := used[0]
			for i, e := range f.Path {
				if mech.PathRole(e&3) == mech.Appliance {
					x = used[i]
					break
				}
			}
			if usage[f.Dst] == nil {
				usage[f.Dst] = map[string]float64{}
			}
			usage[f.Dst][tenant] += x
			total[f.Dst] += x
		}
	}
	return usage, total
}

func ptr(x float64) *float64 { return &x }
