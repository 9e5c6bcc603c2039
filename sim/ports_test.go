package sim_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// portCentral is a test mechanism whose controller configures the queues
// of named links once and marks tenants with DSCP code points.
type portCentral struct {
	links map[string]mech.PortQueues // by link name; Link is filled in
	dscp  map[string]int
	env   *mech.ControllerEnv
}

func (portCentral) Name() string                          { return "ports" }
func (portCentral) Capabilities() mech.Capabilities       { return mech.Capabilities{} }
func (portCentral) NewAgent(mech.Env) (mech.Agent, error) { return idleAgent{}, nil }
func (p portCentral) NewController(env mech.ControllerEnv) (mech.Controller, error) {
	if p.env != nil {
		*p.env = env
	}
	return &portController{p: p, env: env}, nil
}

type portController struct {
	p    portCentral
	env  mech.ControllerEnv
	done bool
}

func (c *portController) Period() time.Duration { return 100 * time.Millisecond }

func (c *portController) Step(*mech.ControllerObs) mech.ControllerActions {
	if c.done {
		return mech.ControllerActions{}
	}
	c.done = true
	act := mech.ControllerActions{DSCP: c.p.dscp}
	for i, r := range c.env.Resources {
		if pq, ok := c.p.links[r.ID]; ok {
			pq.Link = i
			act.Ports = append(act.Ports, pq)
		}
	}
	return act
}

const portsHeader = `
name: ports
duration: 2s
dt: 1ms
topology: {kind: two-tier, two_tier: {racks: 2, servers_per_rack: 1, edge: 10Gbps, core: 1Gbps}}
tenants:
  - {name: A, guarantee: 300Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s2}]}
  - {name: B, guarantee: 300Mbps, vms: [{name: b1, server: s1}, {name: b2, server: s2}]}
  - {name: C, guarantee: 300Mbps, vms: [{name: c1, server: s1}, {name: c2, server: s2}]}
workloads:
  - {tenant: A, kind: tcp, src: a1, dst: a2}
  - {tenant: B, kind: tcp, src: b1, dst: b2, connections: 4}
  - {tenant: C, kind: tcp, src: c1, dst: c2, connections: 2}
`

func runPorts(t *testing.T, yaml string, m portCentral) (*eval.Input, error) {
	t.Helper()
	s := prepare(t, yaml)
	res, err := runner.Reservations(s)
	if err != nil {
		t.Fatal(err)
	}
	return sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m, Reservations: res})
}

// TestPortQueuesDSCP: the core link's port has three WFQ queues weighted
// 1:1:2. A is classified into queue 1 by its DSCP code point, B bound to
// queue 2 by tenant, C (unmarked) shares queue 0. Whatever their
// connection counts, they get 250, 500 and 250 Mbps of the 1 Gbps core
// link; without queues TCP would share per connection (1:4:2).
func TestPortQueuesDSCP(t *testing.T) {
	pq := mech.PortQueues{Weights: []float64{1, 1, 2}, Tenants: map[string]int{"B": 2}, DSCP: map[int]int{5: 1}}
	var env mech.ControllerEnv
	m := portCentral{links: map[string]mech.PortQueues{"tor1->core": pq}, dscp: map[string]int{"A": 5}, env: &env}
	in, err := runPorts(t, portsHeader, m)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, p := range [][2]string{{"a1", "a2"}, {"b1", "b2"}, {"c1", "c2"}} {
		got[p[0]] = meanRate(t, in, p[0], p[1], 0.5, 2)
	}
	want := map[string]float64{"a1": 250, "b1": 500, "c1": 250}
	for k, w := range want {
		if math.Abs(got[k]-w) > 0.02*w {
			t.Errorf("%s: %.1f Mbps, want %.0f (all: %v)", k, got[k], w, got)
		}
	}
	// The controller learns the ports' queues and the reservations.
	if len(env.Resources) == 0 || env.Resources[0].Queues != spec.DefaultPortQueues {
		t.Errorf("resources %+v: want %d queues per port", env.Resources, spec.DefaultPortQueues)
	}
	n := 0
	for _, rv := range env.Reservations {
		if env.Resources[rv.Resource].ID == "tor1->core" {
			n++
			if math.Abs(rv.Rate-300e6) > 1 {
				t.Errorf("reservation %+v, want 300 Mbps", rv)
			}
		}
	}
	if n != 3 {
		t.Errorf("%d tenants reserved on tor1->core, want 3", n)
	}
}

// TestPortQueuesInvalid: configurations a port cannot take are errors
// naming the port and the limit.
func TestPortQueuesInvalid(t *testing.T) {
	for _, c := range []struct {
		name, net string
		pq        mech.PortQueues
		dscp      map[string]int
		want      string
	}{
		{"too many queues", "network: {port_queues: 2}\n", mech.PortQueues{Weights: []float64{1, 1, 1}}, nil, "ports have 2 (network.port_queues)"},
		{"fractional weight", "network: {queue_weight_max: 100}\n", mech.PortQueues{Weights: []float64{1, 2.5}}, nil, "not an integer in [1, 100]"},
		{"weight too large", "network: {queue_weight_max: 100}\n", mech.PortQueues{Weights: []float64{1, 101}}, nil, "not an integer in [1, 100]"},
		{"dscp out of range", "", mech.PortQueues{Weights: []float64{1, 1}, DSCP: map[int]int{64: 1}}, nil, "DSCP 64 is not in [0, 63]"},
		{"dscp to missing queue", "", mech.PortQueues{Weights: []float64{1, 1}, DSCP: map[int]int{3: 2}}, nil, "DSCP 3 mapped to queue 2 of 2"},
		{"tenant mark", "", mech.PortQueues{Weights: []float64{1}}, map[string]int{"A": -1}, "tenant \"A\" marked with DSCP -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := portCentral{links: map[string]mech.PortQueues{"tor1->core": c.pq}, dscp: c.dscp}
			_, err := runPorts(t, portsHeader+c.net, m)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
