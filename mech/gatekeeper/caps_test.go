package gatekeeper_test

import (
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/gatekeeper"
)

// An update that leaves a host's VMs and guarantees as they were does not
// reinstall its schedulers (which resets them on a real host); one that
// changes them does; in rate-limit mode a guarantee that becomes 0 lifts
// its limit.
func TestUpdateEnvReinstalls(t *testing.T) {
	env := func(aOut float64, withC bool) mech.Env {
		e := mech.Env{Host: "h1", VMs: []mech.VM{
			{Name: "a", Tenant: "A", Host: "h1", In: 1e8, Out: aOut},
			{Name: "b", Tenant: "B", Host: "h2", In: 1e8, Out: 1e8},
		}}
		if withC {
			e.VMs = append(e.VMs, mech.VM{Name: "c", Tenant: "C", Host: "h2", In: 1e8, Out: 1e8})
		}
		return e
	}
	step := func(a mech.Agent, n int) mech.Actions {
		return a.Step(&mech.HostObs{Now: time.Duration(n) * 10 * time.Millisecond, Period: 10 * time.Millisecond}, nil)
	}
	for _, mode := range []string{"", "rate-limit"} {
		params := map[string]any{}
		if mode != "" {
			params["mode"] = mode
		}
		m, err := gatekeeper.New(params)
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.NewAgent(env(1e8, false))
		if err != nil {
			t.Fatal(err)
		}
		step(a, 0)
		u := a.(mech.EnvUpdater)
		// A tenant elsewhere joins: nothing local changes.
		if err := u.UpdateEnv(env(1e8, true)); err != nil {
			t.Fatal(err)
		}
		if act := step(a, 1); len(act.Schedulers) != 0 || len(act.Limits) != 0 {
			t.Errorf("%s: an update elsewhere reinstalled %+v", mode, act)
		}
		// a's egress guarantee goes to 0.
		if err := u.UpdateEnv(env(0, true)); err != nil {
			t.Fatal(err)
		}
		act := step(a, 2)
		if mode == "" {
			if len(act.Schedulers) != 2 || act.Schedulers[0].Weights["a"] != 0 {
				t.Errorf("scheduler mode: after a's guarantee changed: %+v", act.Schedulers)
			}
			continue
		}
		lifted := false
		for _, l := range act.Limits {
			if l.Kind == mech.VMEgress && l.VM == "a" && math.IsInf(l.Rate, 1) {
				lifted = true
			}
		}
		if !lifted {
			t.Errorf("rate-limit mode: a's egress limit not lifted: %+v", act.Limits)
		}
	}
}
