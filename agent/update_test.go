package agent

import (
	"errors"
	"math"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
)

// Two hosts: tenant T1 (a1 on h1, b1 on h2) from the start; tenant T2 (a2
// on h1, b2 on h2) added at runtime, then removed.
var (
	t1VMs = []vmSpec{{"a1", "T1", "h1", "10.0.1.1", 100e6, 100e6}, {"b1", "T1", "h2", "10.0.2.1", 100e6, 100e6}}
	t2VMs = []vmSpec{{"a2", "T2", "h1", "10.0.1.2", 300e6, 300e6}, {"b2", "T2", "h2", "10.0.2.2", 300e6, 300e6}}
	a1b1  = pair("10.0.1.1", "10.0.2.1")
	a2b2  = pair("10.0.1.2", "10.0.2.2")
)

// cluster is agents on fake data paths that exchange their messages over
// UDP on the loopback interface, stepped by the test on a synthetic
// clock.
type cluster struct {
	t      *testing.T
	hosts  []string
	agents map[string]*Agent
	paths  map[string]*fake.Host
	now    time.Time
	flows  map[datapath.Pair]*flow // traffic the test makes
	wg     sync.WaitGroup
}

// flow is a pair's traffic at a rate (bits/s on the wire) and its bytes.
type flow struct {
	src, dst string // hosts
	rate     float64
	bytes    uint64
}

func newCluster(t *testing.T, m mech.Mechanism, md *model.Model) *cluster {
	c := &cluster{t: t, hosts: []string{"h1", "h2"}, agents: map[string]*Agent{}, paths: map[string]*fake.Host{},
		now: time.Unix(1000, 0), flows: map[datapath.Pair]*flow{}}
	var mu sync.Mutex
	peers := map[string]netip.AddrPort{}
	resolve := func(h string) (netip.AddrPort, bool) {
		mu.Lock()
		defer mu.Unlock()
		a, ok := peers[h]
		return a, ok
	}
	for _, h := range c.hosts {
		p := fake.New(fake.Options{Limiters: true, Schedulers: true})
		a, err := New(Config{Host: h, Model: md, Mechanism: m, Path: p, Listen: loopback, Peers: resolve})
		if err != nil {
			t.Fatal(err)
		}
		a.start = c.now
		c.agents[h], c.paths[h] = a, p
		mu.Lock()
		peers[h] = a.Addr()
		mu.Unlock()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			a.receive()
		}()
	}
	t.Cleanup(func() {
		for _, a := range c.agents {
			_ = a.Close()
		}
		c.wg.Wait()
	})
	return c
}

// send makes a pair's traffic from now on.
func (c *cluster) send(p datapath.Pair, srcHost, dstHost string, rate float64) {
	c.flows[p] = &flow{src: srcHost, dst: dstHost, rate: rate}
}

// round advances the clock by a period, counts the flows' bytes on the
// data paths, steps every agent and waits until the messages sent have
// arrived.
func (c *cluster) round(period time.Duration) {
	c.t.Helper()
	c.now = c.now.Add(period)
	for p, f := range c.flows {
		f.bytes += uint64(f.rate * period.Seconds() / 8)
		c.paths[f.src].Send(p, datapath.Counters{Bytes: f.bytes})
		c.paths[f.dst].Receive(p, f.bytes)
	}
	for _, h := range c.hosts {
		if err := c.agents[h].step(c.now); err != nil {
			c.t.Fatalf("%s: %v", h, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var sent, arrived float64
		for _, a := range c.agents {
			sent += counterValue(c.t, a, "bulkhead_agent_messages_sent_total")
			arrived += counterValue(c.t, a, "bulkhead_agent_messages_received_total")
			for _, n := range a.Dropped() {
				arrived += n
			}
		}
		if arrived >= sent {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%v of %v messages arrived", arrived, sent)
		}
		time.Sleep(time.Millisecond)
	}
}

func (c *cluster) rounds(n int) {
	c.t.Helper()
	p := c.agents[c.hosts[0]].drv.Period()
	for i := 0; i < n; i++ {
		c.round(p)
	}
}

func (c *cluster) update(md *model.Model) {
	c.t.Helper()
	for _, h := range c.hosts {
		if err := c.agents[h].Update(md); err != nil {
			c.t.Fatalf("%s: update: %v", h, err)
		}
	}
}

// vmEnforced says whether a VM of h has a weight in one of h's installed
// schedulers or a VM limit.
func vmEnforced(p *fake.Host, vm string) bool {
	for _, d := range []mech.Direction{mech.Egress, mech.Ingress} {
		s := p.Sched(d)
		installed, _, w := s.State()
		if _, ok := w[vm]; installed && ok {
			return true
		}
		if _, ok := s.Limit(vm); ok {
			return true
		}
	}
	return false
}

// TestTenantAddedAndRemoved: under every mechanism the host agents run
// that takes tenants at runtime and enforces something (ElasticSwitch's
// pair limits, Gatekeeper's schedulers), real mechanisms from the
// registry on fake data paths: a tenant added to the model at runtime
// gets its VMs enforced (its active pair limited, its VMs weighted in
// the schedulers), and once it is removed its limits and weights are
// gone from the data path, while the first tenant's stay; the agents'
// messages cross the wire and none is dropped.
func TestTenantAddedAndRemoved(t *testing.T) {
	m1 := testModel(t1VMs...)
	m2 := testModel(append(slices.Clone(t1VMs), t2VMs...)...)
	var pairs, scheds bool
	for _, name := range all.Names() {
		m, err := all.New(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		caps := m.Capabilities()
		if ok, _ := caps.RealTraffic(); !ok || !caps.LiveTenants || !caps.PairLimits && !caps.Schedulers {
			continue
		}
		pairs, scheds = pairs || caps.PairLimits, scheds || caps.Schedulers
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, m, m1)
			c.send(a1b1, "h1", "h2", 80e6)
			c.rounds(10)
			h1, h2 := c.paths["h1"], c.paths["h2"]
			if _, ok := h1.Limit(a2b2); ok || vmEnforced(h1, "a2") {
				t.Fatal("T2 enforced before it exists")
			}
			c.update(m2)
			c.send(a2b2, "h1", "h2", 250e6)
			c.rounds(10)
			if caps.PairLimits {
				if r, ok := h1.Limit(a2b2); !ok || math.IsInf(r, 1) {
					t.Errorf("a2->b2 not limited after T2 was added (%v, %v)", r, ok)
				}
			}
			if caps.Schedulers && (!vmEnforced(h1, "a2") || !vmEnforced(h2, "b2")) {
				t.Error("T2's VMs not in the schedulers after T2 was added")
			}
			before := h1.Limits()[a1b1]
			delete(c.flows, a2b2)
			c.update(m1)
			if _, ok := h1.Limit(a2b2); ok {
				t.Error("a2->b2 still has a limiter after T2 was removed")
			}
			c.rounds(5)
			if _, ok := h1.Limit(a2b2); ok || vmEnforced(h1, "a2") || vmEnforced(h2, "b2") {
				t.Error("T2 still enforced after it was removed")
			}
			if slices.Contains(h1.Attached(), "a2") || slices.Contains(h2.Attached(), "b2") {
				t.Error("T2's VMs still attached")
			}
			if caps.PairLimits && h1.Limits()[a1b1] == 0 && before != 0 {
				t.Error("T1's limit went with T2")
			}
			if caps.Schedulers && !vmEnforced(h1, "a1") {
				t.Error("T1's VMs left the schedulers with T2")
			}
			for h, a := range c.agents {
				if st := a.Stats(); st.Updates != 2 || st.Invalid != 0 {
					t.Errorf("%s: stats %+v", h, st)
				}
				for r, n := range a.Dropped() {
					if n > 0 {
						t.Errorf("%s dropped %v messages (%s)", h, n, r)
					}
				}
			}
			t.Logf("%s: %v messages sent by h2", name, counterValue(t, c.agents["h2"], "bulkhead_agent_messages_sent_total"))
		})
	}
	if !pairs || !scheds {
		t.Errorf("tested mechanisms with pair limits: %v, with schedulers: %v; want both", pairs, scheds)
	}
}

// TestUpdateRefused: a mechanism whose agents cannot take a new model is
// refused (drive.ErrStaticEnv); the agent keeps the old model and
// attaches nothing new.
func TestUpdateRefused(t *testing.T) {
	p := fake.New(fake.Options{Limiters: true})
	a := newTestAgent(t, Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: &script{}, Path: p})
	err := a.Update(testModel(append(slices.Clone(t1VMs), t2VMs...)...))
	if !errors.Is(err, drive.ErrStaticEnv) {
		t.Fatalf("update: %v, want drive.ErrStaticEnv", err)
	}
	if got := p.Attached(); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("attached %v after a refused update", got)
	}
	if _, ok := a.addrOf["a2"]; ok || len(a.model.Tenants) != 1 {
		t.Error("the agent took the refused model")
	}
}

// TestUpdateMovesLimits: a VM that leaves the host takes its pairs'
// limits with it; a pair whose destination left the model loses its
// limit; the script mechanism's new VM can be limited right after the
// update.
func TestUpdateMovesLimits(t *testing.T) {
	mA := testModel(append(slices.Clone(t1VMs), t2VMs...)...)
	a1b2, a2b1 := mech.PairID{Src: "a1", Dst: "b2"}, mech.PairID{Src: "a2", Dst: "b1"}
	var limits []mech.Limit
	mc := &script{live: true, act: func(string, int, *mech.HostObs) mech.Actions {
		l := limits
		limits = nil
		return mech.Actions{Limits: l}
	}}
	p := fake.New(fake.Options{Limiters: true})
	a := newTestAgent(t, Config{Host: "h1", Model: mA, Mechanism: mc, Path: p})
	s := newStepper(a)
	limits = []mech.Limit{{Kind: mech.PairLimit, Pair: a1b2, Rate: 10e6}, {Kind: mech.PairLimit, Pair: a2b1, Rate: 20e6}}
	if err := s.step(); err != nil {
		t.Fatal(err)
	}
	if len(p.Limits()) != 2 {
		t.Fatalf("limits %v", p.Limits())
	}
	// b2 leaves; a2 moves to h2
	mB := testModel(t1VMs[0], t1VMs[1], vmSpec{"a2", "T2", "h2", "10.0.1.2", 1e6, 1e6})
	if err := a.Update(mB); err != nil {
		t.Fatal(err)
	}
	if got := p.Limits(); len(got) != 0 {
		t.Errorf("limits %v after b2 left and a2 moved", got)
	}
	if _, ok := p.Limit(pair("10.0.1.1", "10.0.2.2")); ok {
		t.Error("a1->b2 still has a limiter after b2 left")
	}
	if got := p.Attached(); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("attached %v", got)
	}
	if len(a.enf.limits) != 0 {
		t.Errorf("the enforcer remembers %v", a.enf.limits)
	}
	// a VM new on the host can be limited at the next step
	mC := testModel(append(slices.Clone(t1VMs), vmSpec{"c1", "T1", "h1", "10.0.1.3", 1e6, 1e6})...)
	if err := a.Update(mC); err != nil {
		t.Fatal(err)
	}
	limits = []mech.Limit{{Kind: mech.PairLimit, Pair: mech.PairID{Src: "c1", Dst: "b1"}, Rate: 5e6}}
	if err := s.step(); err != nil {
		t.Fatal(err)
	}
	if r, ok := p.Limit(pair("10.0.1.3", "10.0.2.1")); !ok || r != 5e6 {
		t.Errorf("c1->b1: %v %v", r, ok)
	}
}
