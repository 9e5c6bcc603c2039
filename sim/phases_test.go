package sim_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/sim"
)

// TestPhases: a run timed into Options.Phases gives the same results as
// one that is not; its parts are none negative and add up to no more than
// the wall time around sim.Run; it counts the agents' steps (two hosts
// with senders under ElasticSwitch, every 15 ms for 2 s, and a third
// host receiving) and at least one re-solve.
func TestPhases(t *testing.T) {
	yaml := header + `workloads:
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
  - {tenant: B, kind: udp, rate: 900Mbps, src: b-tx, dst: b-rx}
`
	s := prepare(t, yaml)
	do := func(ph *sim.Phases) any {
		m, err := all.New("elasticswitch", nil)
		if err != nil {
			t.Fatal(err)
		}
		in, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m, Phases: ph})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	plain := do(nil)
	var ph sim.Phases
	t0 := time.Now()
	timed := do(&ph)
	wall := time.Since(t0)
	if !reflect.DeepEqual(plain, timed) {
		t.Fatal("the timed run's results differ from the untimed run's")
	}
	t.Logf("%+v, total %v of %v", ph, ph.Total(), wall)
	for name, d := range map[string]time.Duration{"setup": ph.Setup, "agents": ph.Agents, "controller": ph.Controller,
		"physics": ph.Physics, "accounting": ph.Accounting, "samples": ph.Samples, "other": ph.Other} {
		if d < 0 {
			t.Errorf("%s took %v", name, d)
		}
	}
	if ph.Total() > wall {
		t.Errorf("the parts add up to %v, more than the run's %v", ph.Total(), wall)
	}
	// three hosts' agents every 15 ms for 2 s
	if want := 3 * (2000/15 + 1); ph.Steps < want*9/10 || ph.Steps > want {
		t.Errorf("%d agent steps, want about %d", ph.Steps, want)
	}
	if ph.Solves < 1 || ph.Solves > 2000 {
		t.Errorf("%d re-solves", ph.Solves)
	}
}
