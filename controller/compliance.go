package controller

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
)

// ComplianceInterval is how often the leader counts whether each tenant
// gets its guarantees, from the agents' latest reports.
const ComplianceInterval = time.Second

// staleAfter is when a VM's last report no longer counts.
const staleAfter = 3 * ComplianceInterval

// countCompliance counts, every ComplianceInterval, each tenant as
// compliant or not (satisfied, below), and keeps the interval's view of
// the declared tenants and hosts for the metrics (runtime.view) until
// leadership ends.
func (c *Controller) countCompliance(ctx context.Context) {
	t := time.NewTicker(ComplianceInterval)
	defer t.Stop()
	defer func() {
		c.rt.mu.Lock()
		c.rt.view, c.rt.declared = nil, nil
		c.rt.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		snap, cl, err := c.cluster(ctx)
		if err != nil {
			c.rt.mu.Lock()
			c.rt.view, c.rt.declared = nil, nil // no cluster (yet): nothing to judge
			if snap != nil {
				c.rt.forget(nil) // read, and nothing is declared
			}
			c.rt.mu.Unlock()
			continue
		}
		now := c.cfg.Now()
		c.rt.mu.Lock()
		c.rt.forget(cl)
		view := make(map[string]tenantView, len(cl.Model.Tenants))
		c.rt.declared = slices.Sorted(maps.Keys(cl.Hosts))
		// What each host's VMs received, against its downlink.
		hostIn := map[string]float64{}
		for _, v := range cl.Model.VMs() {
			if s := c.rt.vms[v.Name]; s != nil && now.Sub(s.at) <= staleAfter {
				hostIn[v.Host] += s.received
			}
		}
		link := map[string]float64{}
		for _, h := range cl.Model.Hosts {
			link[h.Name] = h.Link
		}
		for _, t := range cl.Model.Tenants {
			counted, ok := false, true
			var tv tenantView
			for _, v := range t.VMs {
				tv.guarantee += v.In
				s := c.rt.vms[v.Name]
				if s == nil || now.Sub(s.at) > staleAfter {
					continue
				}
				counted = true
				tv.achieved += s.received
				ok = ok && satisfied(s.received, v.In, c.rt.bound[v.Name], hostIn[v.Host], link[v.Host])
			}
			tv.counted, tv.below = counted, counted && !ok
			view[t.Name] = tv
			if !counted {
				continue
			}
			tc := c.rt.tenants[t.Name]
			if tc == nil {
				tc = &tenantCompliance{}
				c.rt.tenants[t.Name] = tc
			}
			tc.intervals++
			if ok {
				tc.compliant++
			}
		}
		clear(c.rt.bound)
		c.rt.view = view
		c.rt.mu.Unlock()
	}
}

// forget drops what the runtime keeps of VMs, tenants and hosts that cl
// no longer declares (nil: nothing is declared), so that its memory is
// bounded by the model: the VMs' rates and limiters, the compliance
// counts of deleted tenants, the pair rates of hosts no longer declared,
// and the state of those whose agent is not connected either
// (runtime.mu held).
func (rt *runtime) forget(cl *api.Cluster) {
	var vms, tenants map[string]bool
	var hosts map[string]*api.HostSpec
	if cl != nil {
		vms, tenants, hosts = make(map[string]bool, len(rt.vms)), make(map[string]bool, len(cl.Model.Tenants)), cl.Hosts
		for _, t := range cl.Model.Tenants {
			tenants[t.Name] = true
			for _, v := range t.VMs {
				vms[v.Name] = true
			}
		}
	}
	maps.DeleteFunc(rt.vms, func(vm string, _ *vmState) bool { return !vms[vm] })
	maps.DeleteFunc(rt.bound, func(vm string, _ bool) bool { return !vms[vm] })
	maps.DeleteFunc(rt.tenants, func(t string, _ *tenantCompliance) bool { return !tenants[t] })
	maps.DeleteFunc(rt.pairs, func(h string, _ hostPairs) bool { _, ok := hosts[h]; return !ok })
	maps.DeleteFunc(rt.hosts, func(h string, hs *hostState) bool { _, ok := hosts[h]; return !ok && !hs.connected })
}

// satisfied says whether a VM got its receive guarantee in an interval,
// as far as the agents can tell without knowing its demand: it received
// at least 95% of its guarantee, or it was held back neither by a limiter
// toward it (bound) nor by a full downlink of its host (what the host's
// VMs received, against the link) — it received all it asked for.
func satisfied(received, guarantee float64, bound bool, hostIn, link float64) bool {
	if received >= 0.95*guarantee {
		return true
	}
	full := link > 0 && hostIn >= 0.9*link
	return !bound && !full
}
