package drive

import (
	"fmt"
	"math"
	"slices"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// CheckEnv checks an environment a driver built: VMs sorted by unique
// name (mech.Env.VM searches them), each with a host and guarantees that
// are finite and not negative.
func CheckEnv(env *mech.Env) error {
	for i, v := range env.VMs {
		switch {
		case v.Name == "" || v.Host == "":
			return fmt.Errorf("environment: VM %d (%q) needs a name and a host", i, v.Name)
		case i > 0 && env.VMs[i-1].Name >= v.Name:
			return fmt.Errorf("environment: VMs not sorted by unique name at %q", v.Name)
		case !finiteRate(v.In) || !finiteRate(v.Out):
			return fmt.Errorf("environment: VM %s: guarantees in %g, out %g: want finite and not negative", v.Name, v.In, v.Out)
		}
	}
	return nil
}

func finiteRate(r float64) bool { return r >= 0 && !math.IsInf(r, 1) }

// CheckLimit checks one limit a mechanism's agent on env.Host set: a rate
// that is not negative (Unlimited removes the limiter), a known kind, and
// its enforcement point on this host — a pair whose source VM is here and
// whose destination VM exists, or a VM that is here.
func CheckLimit(env *mech.Env, l mech.Limit) error {
	return checkLimit(l, func(vm string) bool { return env.HostOf(vm) == env.Host },
		func(vm string) bool { _, ok := env.VM(vm); return ok })
}

// checkLimit is CheckLimit with the environment's lookups: local says
// whether a VM is on the host, known whether it exists.
func checkLimit(l mech.Limit, local, known func(string) bool) error {
	if err := checkRate(l); err != nil {
		return err
	}
	switch l.Kind {
	case mech.PairLimit:
		if !local(l.Pair.Src) {
			return fmt.Errorf("limited pair %s->%s whose source is not on that host", l.Pair.Src, l.Pair.Dst)
		}
		if !known(l.Pair.Dst) {
			return fmt.Errorf("limited pair %s->%s to an unknown VM", l.Pair.Src, l.Pair.Dst)
		}
	case mech.VMEgress, mech.VMIngress:
		if !local(l.VM) {
			return fmt.Errorf("limited VM %q, which is not on that host", l.VM)
		}
	default:
		return fmt.Errorf("set a limit of unknown kind %d", l.Kind)
	}
	return nil
}

// checkRate checks a limit's rate (checkLimit's first check).
func checkRate(l mech.Limit) error {
	if math.IsNaN(l.Rate) || l.Rate < 0 {
		return fmt.Errorf("set an invalid rate %g", l.Rate)
	}
	return nil
}

// CheckScheduler checks a per-VM scheduler a mechanism's agent on env.Host
// set: a known direction, a rate that is not negative, and positive finite
// weights of VMs on this host.
func CheckScheduler(env *mech.Env, s mech.Scheduler) error {
	if s.Dir != mech.Egress && s.Dir != mech.Ingress {
		return fmt.Errorf("set a scheduler of unknown direction %d", s.Dir)
	}
	if math.IsNaN(s.Rate) || s.Rate < 0 {
		return fmt.Errorf("set a scheduler rate %g", s.Rate)
	}
	vms := make([]string, 0, len(s.Weights))
	for vm := range s.Weights {
		vms = append(vms, vm)
	}
	slices.Sort(vms)
	for _, vm := range vms {
		w := s.Weights[vm]
		if env.HostOf(vm) != env.Host {
			return fmt.Errorf("weighted VM %q, which is not on that host", vm)
		}
		if !(w > 0) || math.IsInf(w, 1) {
			return fmt.Errorf("gave VM %q scheduler weight %g", vm, w)
		}
	}
	return nil
}

// CheckControllerActions checks what a central controller returned: rates
// that are not negative (per-VM default rates positive and finite), DSCP code points in range. The driver checks
// what depends on its flows (a known flow, a rate per path element).
func CheckControllerActions(act *mech.ControllerActions) error {
	if act.DefaultRate < 0 || math.IsNaN(act.DefaultRate) {
		return fmt.Errorf("controller set default rate %g", act.DefaultRate)
	}
	vms := make([]string, 0, len(act.DefaultBySrc))
	for vm := range act.DefaultBySrc {
		vms = append(vms, vm)
	}
	slices.Sort(vms)
	for _, vm := range vms {
		if r := act.DefaultBySrc[vm]; !(r > 0) || math.IsInf(r, 1) {
			return fmt.Errorf("controller set default rate %g for VM %q", r, vm)
		}
	}
	for _, a := range act.Allocations {
		for _, r := range a.Rates {
			if math.IsNaN(r) || r < 0 {
				return fmt.Errorf("allocation for %s->%s has rate %g", a.Flow.Src, a.Flow.Dst, r)
			}
		}
	}
	tenants := make([]string, 0, len(act.DSCP))
	for t := range act.DSCP {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	for _, t := range tenants {
		if d := act.DSCP[t]; d < 0 || d > mech.MaxDSCP {
			return fmt.Errorf("tenant %q marked with DSCP %d, not in [0, %d]", t, d, mech.MaxDSCP)
		}
	}
	return nil
}
