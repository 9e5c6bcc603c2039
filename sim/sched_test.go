package sim_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// schedMech installs one ingress scheduler on s3 and records what the
// agent there observes.
type schedMech struct {
	s    mech.Scheduler
	seen *[]mech.VMObs
}

func (schedMech) Name() string                    { return "test-sched" }
func (schedMech) Capabilities() mech.Capabilities { return mech.Capabilities{} }
func (m schedMech) NewAgent(env mech.Env) (mech.Agent, error) {
	return &schedAgent{m: m, host: env.Host}, nil
}

type schedAgent struct {
	m    schedMech
	host string
	done bool
}

func (a *schedAgent) Period() time.Duration { return 100 * time.Millisecond }
func (a *schedAgent) Step(obs *mech.HostObs, _ []mech.Message) mech.Actions {
	if a.host != "s3" {
		return mech.Actions{}
	}
	if obs.Now > 0 {
		*a.m.seen = append((*a.m.seen)[:0], obs.VMs...)
	}
	if a.done {
		return mech.Actions{}
	}
	a.done = true
	return mech.Actions{Schedulers: []mech.Scheduler{a.m.s}}
}

func TestIngressScheduler(t *testing.T) {
	weights := map[string]float64{"a-rx": 3, "b-rx": 1}
	equal := map[string]float64{"a-rx": 1, "b-rx": 1}
	cases := []struct {
		name      string
		workloads string
		weights   map[string]float64
		wantA     float64
		wantB     float64
		dropsB    float64 // Mbps dropped at b-rx's ingress queue (TCP: TCPLoss of its rate)
	}{
		{"WFQ by weight, TCP", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx, connections: 4}`, weights, 675, 225, 2.25},
		{"work-conserving when a class is idle", `
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx, connections: 4}`, weights, 0, 900, 9},
		{"UDP under its share passes", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
  - {tenant: B, kind: udp, src: b-tx, dst: b-rx, rate: 400Mbps}`, equal, 500, 400, 0},
		// The link carries B's 800 Mbps of UDP and leaves A 200; the
		// scheduler serves B its 450 and drops the rest from B's queue.
		{"UDP over its share is dropped at the VM's queue", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
  - {tenant: B, kind: udp, src: b-tx, dst: b-rx, rate: 800Mbps}`, equal, 200, 450, 350},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, err := spec.Parse([]byte(header+"workloads:"+c.workloads+"\n"), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			s, err := runner.Prepare(sc)
			if err != nil {
				t.Fatal(err)
			}
			var seen []mech.VMObs
			m := schedMech{s: mech.Scheduler{Dir: mech.Ingress, Rate: 900e6, Weights: c.weights}, seen: &seen}
			in, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m})
			if err != nil {
				t.Fatal(err)
			}
			var a, b float64
			if c.wantA > 0 {
				a = meanRate(t, in, "a-tx", "a-rx", 0.1, 2)
			}
			b = meanRate(t, in, "b-tx", "b-rx", 0.1, 2)
			if !near(a, c.wantA, 1) || !near(b, c.wantB, 1) {
				t.Errorf("A %.1f, B %.1f Mbps; want %g, %g", a, b, c.wantA, c.wantB)
			}
			var drops float64
			var src string
			for _, v := range seen {
				if v.VM == "b-rx" {
					drops, src = v.InDrops/1e6, v.DropSrc
				}
			}
			if math.Abs(drops-c.dropsB) > 0.1 {
				t.Errorf("b-rx ingress drops %.1f Mbps, want %g", drops, c.dropsB)
			}
			if c.dropsB > 0 && src != "b-tx" {
				t.Errorf("drop source %q, want b-tx", src)
			}
		})
	}
}
