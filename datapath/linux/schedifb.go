package linux

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// The IFBs of the per-VM schedulers a Host builds itself
// (Config.Schedulers), in the server's namespace: every VM's traffic in
// one direction passes through one of them, whose root qdisc is the
// Scheduler's HTB. The names are the same in every run: an IFB of one
// of these names is a Host's (one left by an agent that died is
// replaced); a device of one of them that is not an IFB is someone
// else's, and NewHost refuses it.
const (
	// SchedTXIFB carries what the VMs send: the ingress hook of every
	// VM's device on the server redirects to it.
	SchedTXIFB = "bhsched-tx"
	// SchedRXIFB carries what arrives for them: the ingress hook of
	// every uplink redirects to it, one filter per VM (its counters are
	// the VM's arrivals, before the scheduler; Scheduler.Arrivals) and
	// a catch-all (SchedCatchAll) for the rest.
	SchedRXIFB = "bhsched-rx"
)

// SchedCatchAll is the u32 node, under IngressPrio on every uplink's
// ingress hook, of the redirection of everything the VMs' filters did
// not match to SchedRXIFB; the VMs' filters have the nodes below it, and
// u32 tries a priority's nodes in order.
const SchedCatchAll = dataplane.MaxU32Node

// schedIFBs is what a Host built for its per-VM schedulers
// (Config.Schedulers).
type schedIFBs struct {
	ns    *dataplane.NS
	links []string
	// ifbs: the IFBs made; catchAll: the uplinks with the catch-all;
	// clsact: the uplinks whose clsact is the Host's to remove once empty.
	ifbs     []string
	catchAll []string
	clsact   map[string]bool
	nodes    map[uint16]string // the VMs' redirection nodes on the uplinks
}

// buildSchedIFBs makes the schedulers' IFBs with a root HTB that passes
// everything through its direct queue (as the Scheduler leaves it when
// nothing is installed), and the catch-all redirection on every uplink.
// An uplink whose ingress hook has a filter the Host did not make is
// refused: a packet follows one redirection only (or none, after a
// filter that accepts it). Leftovers of an agent that died — the IFBs,
// and u32 filters of IngressPrio on the uplinks — are replaced.
func buildSchedIFBs(ns *dataplane.NS, links []string) (_ *schedIFBs, err error) {
	if len(links) == 0 {
		return nil, errors.New("per-VM schedulers need the server's uplinks (Config.Links): what arrives for the VMs is redirected from their ingress to the ingress scheduler")
	}
	s := &schedIFBs{ns: ns, links: links, clsact: map[string]bool{}, nodes: map[uint16]string{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.remove(), s.dropClsacts())
		}
	}()
	for _, l := range links {
		at := where(l, ns.Name)
		if err := exists(ns, l); err != nil {
			return nil, fmt.Errorf("uplink %s: %w", at, err)
		}
		in, err := ns.HookFilters(l, dataplane.Ingress)
		if err != nil {
			return nil, fmt.Errorf("uplink %s: %w", at, err)
		}
		for _, f := range in {
			if f.Prio != IngressPrio || f.Kind != "u32" {
				return nil, fmt.Errorf("uplink %s: its ingress hook has a %s filter of priority %d that Bulkhead did not make; what arrives goes through one redirection only, so the ingress scheduler cannot see it", at, f.Kind, f.Prio)
			}
		}
		ours, err := clsactOurs(ns, l)
		if err != nil {
			return nil, fmt.Errorf("uplink %s: %w", at, err)
		}
		s.clsact[l] = ours
	}
	for _, ifb := range []string{SchedTXIFB, SchedRXIFB} {
		found, isIFB, err := ns.IsIFB(ifb)
		if err != nil {
			return nil, err
		}
		if found && !isIFB {
			return nil, fmt.Errorf("the scheduler's IFB %s: the name is taken by a device that is not an IFB", where(ifb, ns.Name))
		}
		if found { // left by an agent that died
			if err := ns.DeleteLink(ifb); err != nil {
				return nil, fmt.Errorf("the scheduler's IFB, left by an earlier run: %w", err)
			}
		}
		if err := ns.AddIFB(ifb); err != nil {
			return nil, fmt.Errorf("the scheduler's IFB: %w", err)
		}
		s.ifbs = append(s.ifbs, ifb)
		if err := ns.ReplaceHTB(ifb, dataplane.HTB{Handle: dataplane.TCHandle(schedMajor, 0), Parent: 0xFFFFFFFF, DirectQlen: dataplane.DefaultTxQLen}); err != nil {
			return nil, fmt.Errorf("the scheduler's IFB: %w", err)
		}
	}
	for _, l := range links {
		if err := ns.DeleteHookFilters(l, dataplane.Ingress, IngressPrio); err != nil { // leftovers
			return nil, fmt.Errorf("uplink %s: %w", where(l, ns.Name), err)
		}
		s.catchAll = append(s.catchAll, l)
		if err := ns.RedirectIngressMatch(l, SchedRXIFB, IngressPrio, SchedCatchAll, dataplane.Match{}); err != nil {
			return nil, fmt.Errorf("uplink %s: redirect its ingress to %s: %w", where(l, ns.Name), SchedRXIFB, err)
		}
	}
	return s, nil
}

// schedulers returns the Host's schedulers on the IFBs.
func (s *schedIFBs) schedulers() [2]*Scheduler {
	var out [2]*Scheduler
	out[mech.Egress] = NewScheduler(s.ns, SchedTXIFB, mech.Egress, nil)
	out[mech.Ingress] = NewScheduler(s.ns, SchedRXIFB, mech.Ingress, s.links)
	return out
}

// node returns a free redirection node for a VM on the uplinks.
func (s *schedIFBs) node(vm string) (uint16, error) {
	for n := uint16(1); n < SchedCatchAll; n++ {
		if _, used := s.nodes[n]; !used {
			s.nodes[n] = vm
			return n, nil
		}
	}
	return 0, fmt.Errorf("the ingress scheduler has %d VMs already, the most the uplinks' filters can tell apart", SchedCatchAll-1)
}

// attach redirects a provisioned VM's traffic through the schedulers:
// its device's ingress on the server (what it sends) to SchedTXIFB, and
// what arrives for its address on every uplink to SchedRXIFB, counted by
// a filter of its own.
func (s *schedIFBs) attach(p *provisioned) error {
	at := where(p.dev, s.ns.Name)
	in, err := s.ns.HookFilters(p.dev, dataplane.Ingress)
	if err != nil {
		return fmt.Errorf("%s: %w", at, err)
	}
	for _, f := range in {
		if f.Prio != IngressPrio || f.Kind != "u32" {
			return fmt.Errorf("%s: its ingress hook has a %s filter of priority %d that Bulkhead did not make; what the VM sends goes through one redirection only, so the egress scheduler cannot see it", at, f.Kind, f.Prio)
		}
	}
	p.redirect = true // leftovers of an agent that died go too
	if err := s.ns.DeleteHookFilters(p.dev, dataplane.Ingress, IngressPrio); err != nil {
		return fmt.Errorf("%s: %w", at, err)
	}
	if err := s.ns.RedirectIngress(p.dev, SchedTXIFB, IngressPrio); err != nil {
		return fmt.Errorf("%s: redirect its ingress to the egress scheduler's %s: %w", at, SchedTXIFB, err)
	}
	n, err := s.node(p.vm.Name)
	if err != nil {
		return fmt.Errorf("VM %s: %w", p.vm.Name, err)
	}
	p.sched, p.node = s, n
	m := dataplane.Match{Dst: netip.PrefixFrom(p.vm.Addr, 32)}
	for _, l := range s.links {
		if err := s.ns.RedirectIngressMatch(l, SchedRXIFB, IngressPrio, n, m); err != nil {
			return fmt.Errorf("uplink %s: redirect what arrives for %v to the ingress scheduler's %s: %w", where(l, s.ns.Name), p.vm.Addr, SchedRXIFB, err)
		}
	}
	return nil
}

// detach removes a VM's redirections on the uplinks and frees its node;
// uplinks that are gone are not errors.
func (s *schedIFBs) detach(p *provisioned) error {
	if p.sched != s {
		return nil
	}
	var errs []error
	for _, l := range s.links {
		if err := s.ns.DeleteHookU32(l, dataplane.Ingress, IngressPrio, p.node); err != nil && !dataplane.IsLinkNotFound(err) {
			errs = append(errs, fmt.Errorf("uplink %s: %w", where(l, s.ns.Name), err))
		}
	}
	delete(s.nodes, p.node)
	p.sched, p.node = nil, 0
	return errors.Join(errs...)
}

// remove removes the uplinks' redirections and the IFBs (the
// schedulers' trees with them); what is gone is not an error.
func (s *schedIFBs) remove() error {
	var errs []error
	for _, l := range s.catchAll {
		if err := s.ns.DeleteHookFilters(l, dataplane.Ingress, IngressPrio); err != nil && !dataplane.IsLinkNotFound(err) {
			errs = append(errs, fmt.Errorf("uplink %s: %w", where(l, s.ns.Name), err))
		}
	}
	s.catchAll = nil
	for _, ifb := range s.ifbs {
		if err := s.ns.DeleteLink(ifb); err != nil && !dataplane.IsLinkNotFound(err) {
			errs = append(errs, err)
		}
	}
	s.ifbs = nil
	return errors.Join(errs...)
}

// dropClsacts removes the uplinks' clsact qdiscs that are the Host's and
// hold no filter (after the loss counter took its programs off).
func (s *schedIFBs) dropClsacts() error {
	var errs []error
	for l, ours := range s.clsact {
		if !ours {
			continue
		}
		err := dropEmptyClsact(s.ns, l)
		if err != nil && !dataplane.IsLinkNotFound(err) {
			errs = append(errs, fmt.Errorf("uplink %s: %w", where(l, s.ns.Name), err))
		}
	}
	return errors.Join(errs...)
}

// dropEmptyClsact removes dev's clsact qdisc if it holds no filter.
func dropEmptyClsact(ns *dataplane.NS, dev string) error {
	in, err := ns.HookFilters(dev, dataplane.Ingress)
	if err != nil || len(in) > 0 {
		return err
	}
	eg, err := ns.HookFilters(dev, dataplane.Egress)
	if err != nil || len(eg) > 0 {
		return err
	}
	return ns.DeleteClsact(dev)
}
