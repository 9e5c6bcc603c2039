package pulsar

import (
	"math"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// vmDefaults are the per-VM default rates (mech.ControllerActions
// .DefaultBySrc; §5: "each VM a (small) default rate for new VM-to-VM
// flows, which enables these flows to ramp up while the controller is
// contacted"): what a new flow from each VM can be given without any of
// its tenant's guarantees being exceeded, however many new flows start
// at once. c.vused holds, per virtual resource, the guarantee shares of
// the flows the controller knows, idle or not (their local allocations,
// or their floors where larger), as output computed them this step.
//
// A VM's possible new flows are one to each VM of its tenant and one to
// each appliance of its VDC that it has no flow to yet. What is left of a
// guarantee is shared equally among the possible new flows that would use
// it:
//   - a VM's out-link among its possible new flows;
//   - a VM's in-link among the possible new flows into it from its
//     tenant's VMs, and its own possible new flows to appliances
//     (their responses);
//   - a virtual appliance among the tenant's VMs that have no flow to it.
//
// A VM's default rate is the smallest of those shares its possible new
// flows use (links only when links are allocated, appliances only those
// allocated), and at least base. A new flow at that rate on every
// resource of its path therefore stays within its tenant's remaining
// guarantees, which admission fits into every link. A VM of no known
// tenant, or with no possible new flow, is not listed (base applies). So
// is a VM whose share is not above base.
//
// Should a new flow at such a rate be held back by others' spare
// capacity rather than by its enforcer, it is allocated its demand at the
// next step (Bound compares what it used with its VM's default rate, in
// force over the interval: c.lastBySrc), runs at that allocation and is
// then seen held: it gets its guarantee one step later than a flow held
// at the default would, having run at more than the default meanwhile.
// The default rate of one source covers all its destinations, so one
// destination whose in-hose is taken leaves its possible senders at the
// default rate even toward others.
func (c *Controller) vmDefaults(base float64) map[string]float64 {
	if !(base > 0) {
		return nil // unlimited
	}
	has := func(src, dst string) bool {
		f := c.flows[mech.FlowID{Src: src, Dst: dst}]
		return f != nil && !f.dead
	}
	var out map[string]float64
	for _, t := range c.tenants {
		if t.name == "" || len(t.vms) == 0 {
			continue
		}
		// Shares of the tenant's remaining guarantees.
		left := func(v int32) float64 {
			return max(0, t.vres[v].Capacity-c.vused[t.voff+int(v)])
		}
		inN := make([]int, len(t.vms))  // possible new flows into each VM's in-link
		outN := make([]int, len(t.vms)) // possible new flows from each VM
		appN := map[int]int{}           // VMs with no flow to each appliance
		for i, v := range t.vms {
			for j, u := range t.vms {
				if i != j && !has(v, u) {
					outN[i]++
					inN[j]++
				}
			}
			for r := range t.app {
				if !has(v, c.res[r].ID) {
					outN[i]++
					inN[i]++
					appN[r]++
				}
			}
		}
		inShare := make([]float64, len(t.vms))
		for j, u := range t.vms {
			inShare[j] = math.Inf(1)
			if inN[j] > 0 {
				inShare[j] = left(c.vms[u].in) / float64(inN[j])
			}
		}
		for i, v := range t.vms {
			if outN[i] == 0 {
				continue
			}
			ref := c.vms[v]
			share := math.Inf(1)
			if c.allocL {
				share = left(ref.out) / float64(outN[i])
				for j, u := range t.vms {
					if i != j && !has(v, u) {
						share = min(share, inShare[j])
					}
				}
			}
			for r, slot := range t.app {
				if has(v, c.res[r].ID) {
					continue
				}
				if c.allocL {
					share = min(share, inShare[i])
				}
				if c.apps[r] != nil {
					share = min(share, left(slot)/float64(appN[r]))
				}
			}
			if !(share > base) || math.IsInf(share, 1) {
				continue
			}
			if out == nil {
				out = map[string]float64{}
			}
			out[v] = share
		}
	}
	return out
}
