package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/wireauth"
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
		a, err := New(Config{Host: h, Model: md, Mechanism: m, Path: p, Listen: loopback, Peers: resolve, Keys: wireauth.Keys(testMaster, h)})
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
// gone from the data path, while the first tenant's stay; nothing the
// data path holds is re-applied; the agents' messages cross the wire and
// none is dropped.
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
				if st := a.Stats(); st.Updates != 2 || st.Invalid != 0 || st.Retries != 0 {
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

// TestUpdateChangedAddressOrDevice: a VM that stays but whose address or
// device changed is detached and attached anew: the data path knows its
// new address and device, the limit of its pair moves from the old
// addresses to the new ones (nothing is left at the old), its counters
// are read under the new ones, and the next steps re-apply nothing.
func TestUpdateChangedAddressOrDevice(t *testing.T) {
	vms := []vmSpec{{"a1", "T1", "h1", "10.0.1.1", 1e8, 1e8}, {"b1", "T1", "h2", "10.0.2.1", 1e8, 1e8},
		{"c1", "T1", "h1", "10.0.1.3", 1e8, 1e8}}
	a1b1ID, c1a1ID := mech.PairID{Src: "a1", Dst: "b1"}, mech.PairID{Src: "c1", Dst: "a1"}
	for _, tc := range []struct {
		name   string
		change func(m *model.Model)
		// a1->b1 and c1->a1 and a1's device in the new model
		a1b1, c1a1 datapath.Pair
		dev        string
	}{
		{
			name:   "local VM's address",
			change: func(m *model.Model) { m.Tenants[0].VMs[0].Addrs[0] = netip.MustParseAddr("10.0.1.9") },
			a1b1:   pair("10.0.1.9", "10.0.2.1"), c1a1: pair("10.0.1.3", "10.0.1.9"), dev: "a1-dev",
		},
		{
			name:   "local VM's device",
			change: func(m *model.Model) { m.Tenants[0].VMs[0].Interface = "a1-new" },
			a1b1:   pair("10.0.1.1", "10.0.2.1"), c1a1: pair("10.0.1.3", "10.0.1.1"), dev: "a1-new",
		},
		{
			name:   "remote VM's address",
			change: func(m *model.Model) { m.Tenants[0].VMs[1].Addrs[0] = netip.MustParseAddr("10.0.2.9") },
			a1b1:   pair("10.0.1.1", "10.0.2.9"), c1a1: pair("10.0.1.3", "10.0.1.1"), dev: "a1-dev",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := once(mech.Actions{Limits: []mech.Limit{{Kind: mech.PairLimit, Pair: a1b1ID, Rate: 10e6},
				{Kind: mech.PairLimit, Pair: c1a1ID, Rate: 20e6}}}, nil)
			p := fake.New(fake.Options{Limiters: true, Schedulers: true})
			a := newTestAgent(t, Config{Host: "h1", Model: testModel(vms...), Mechanism: mc, Path: p})
			s := newStepper(a)
			s.steps(t, 2)
			m := testModel(vms...)
			tc.change(m)
			if err := a.Update(m); err != nil {
				t.Fatal(err)
			}
			if v, ok := p.VM("a1"); !ok || v.Addr != tc.a1b1.Src || v.Device != tc.dev {
				t.Errorf("the data path has a1 as %+v (attached %v), want %v on %s", v, ok, tc.a1b1.Src, tc.dev)
			}
			want := map[datapath.Pair]float64{tc.a1b1: 10e6, tc.c1a1: 20e6}
			if got := p.Limits(); !maps.Equal(got, want) {
				t.Errorf("limits %v after the update, want %v", got, want)
			}
			retries := a.Stats().Retries
			for i := uint64(1); i <= 3; i++ {
				p.Send(tc.a1b1, datapath.Counters{Bytes: i * 125000})
				p.Device(tc.dev, datapath.DevCounters{Rx: i * 125000})
				s.steps(t, 1)
			}
			if got := a.Stats().Retries; got != retries {
				t.Errorf("%d retries after the update (%d before): limits not held where they were set", got, retries)
			}
			obs := mc.agent("h1").obs
			last := obs[len(obs)-1]
			if eg, ok := findPair(last.Egress, "a1", "b1"); !ok || eg.Rate == 0 || eg.Limit != 10e6 {
				t.Errorf("a1->b1 observed as %+v (%v): not read under its new addresses", eg, ok)
			}
			if v := findVM(last.VMs, "a1"); v.OutRate == 0 {
				t.Errorf("a1 observed as %+v: its new device not read", v)
			}
		})
	}
}

// TestUpdateUnenforceableVM: a VM the data path cannot enforce (it has
// nothing for it) makes New and Update fail, naming it; the refused
// update leaves the old model and attaches nothing. A VM that leaves and
// rejoins is attached again and can be limited.
func TestUpdateUnenforceableVM(t *testing.T) {
	opts := fake.Options{Limiters: true, VMs: []string{"a1"}}
	if _, err := New(Config{Host: "h1", Model: testModel(append(slices.Clone(t1VMs), t2VMs...)...),
		Mechanism: &script{live: true}, Path: fake.New(opts)}); err == nil || !strings.Contains(err.Error(), "a2") {
		t.Errorf("new with a VM the data path cannot enforce: %v", err)
	}
	var limits []mech.Limit
	mc := &script{live: true, act: func(string, int, *mech.HostObs) mech.Actions {
		l := limits
		limits = nil
		return mech.Actions{Limits: l}
	}}
	p := fake.New(opts)
	a := newTestAgent(t, Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: mc, Path: p})
	err := a.Update(testModel(append(slices.Clone(t1VMs), t2VMs...)...))
	if err == nil || !strings.Contains(err.Error(), "a2") {
		t.Fatalf("update with a VM the data path cannot enforce: %v", err)
	}
	if got := p.Attached(); !slices.Equal(got, []string{"a1"}) || a.Stats().Updates != 0 || len(a.model.Tenants) != 1 {
		t.Errorf("after the refused update: attached %v, stats %+v, %d tenants", got, a.Stats(), len(a.model.Tenants))
	}
	// a1 leaves and rejoins
	if err := a.Update(testModel(t1VMs[1])); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(testModel(t1VMs...)); err != nil {
		t.Fatal(err)
	}
	limits = []mech.Limit{{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a1", Dst: "b1"}, Rate: 5e6}}
	s := newStepper(a)
	s.steps(t, 1)
	if r, ok := p.Limit(a1b1); !ok || r != 5e6 {
		t.Errorf("a1->b1 after a1 rejoined: %v %v", r, ok)
	}
}

// TestUpdatePrunesState: what the agent keeps between readings of VMs,
// pairs and peers that left the model is dropped at the update.
func TestUpdatePrunesState(t *testing.T) {
	peers := map[string]netip.AddrPort{"h2": netip.MustParseAddrPort("10.201.0.2:7471"), "h3": netip.MustParseAddrPort("10.201.0.3:7471")}
	a1, b1 := vmSpec{"a1", "T", "h1", "10.0.1.1", 1e6, 1e6}, vmSpec{"b1", "T", "h2", "10.0.2.1", 1e6, 1e6}
	c1, x1 := vmSpec{"c1", "T", "h1", "10.0.1.3", 1e6, 1e6}, vmSpec{"x1", "T", "h3", "10.0.3.1", 1e6, 1e6}
	p := fakePath(mech.LossAtDestination)
	a := newTestAgent(t, Config{Host: "h1", Model: testModel(a1, b1, c1, x1), Mechanism: &script{live: true}, Path: p, Peers: PeerMap(peers),
		Keys: wireauth.Keys(testMaster, "h1")})
	s := newStepper(a)
	b1a1, b1c1, x1a1 := pair("10.0.2.1", "10.0.1.1"), pair("10.0.2.1", "10.0.1.3"), pair("10.0.3.1", "10.0.1.1")
	for i, h := range []string{"h2", "h3"} {
		a.handle(mustEncode(t, h, "h1", 1, 1, rateBody{Pair: "x", Rate: 1}), peers[h])
		if len(a.peerSeq) != i+1 {
			t.Fatalf("message from %s not accepted", h)
		}
	}
	for _, pr := range []datapath.Pair{b1a1, b1c1, x1a1} {
		p.Receive(pr, 1000)
		p.Lose(pr, 1)
	}
	p.Device("a1-dev", datapath.DevCounters{Rx: 1})
	p.Device("c1-dev", datapath.DevCounters{Rx: 1})
	s.steps(t, 2)
	if len(a.prevRX()) != 3 || len(a.prevLoss) != 3 || len(a.prevDev) != 2 {
		t.Fatalf("before the update: prevRX %v, prevLoss %v, prevDev %v", a.prevRX(), a.prevLoss, a.prevDev)
	}
	// c1 and x1 (and with it host h3) leave
	if err := a.Update(testModel(a1, b1)); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(a.prevRX(), map[datapath.Pair]uint64{b1a1: 1000}) || !maps.Equal(a.prevLoss, map[datapath.Pair]uint64{b1a1: 1}) {
		t.Errorf("pairs kept: prevRX %v, prevLoss %v; want only b1->a1", a.prevRX(), a.prevLoss)
	}
	if _, ok := a.prevDev["c1-dev"]; ok || len(a.prevDev) != 1 {
		t.Errorf("devices kept: %v", a.prevDev)
	}
	if _, ok := a.peerSeq["h3"]; ok || a.peerSeq["h2"] == nil {
		t.Errorf("peers' sequences kept: %v", slices.Sorted(maps.Keys(a.peerSeq)))
	}
}

// TestUpdateRemovePairRefused: the limiter of a pair whose destination
// left the model, which the data path refuses to remove, is reported
// (Update's error, a warning) and its removal retried at the next steps
// until the data path takes it.
func TestUpdateRemovePairRefused(t *testing.T) {
	a1, b1, b2 := vmSpec{"a1", "T", "h1", "10.0.1.1", 1e6, 1e6}, vmSpec{"b1", "T", "h2", "10.0.2.1", 1e6, 1e6}, vmSpec{"b2", "T", "h2", "10.0.2.2", 1e6, 1e6}
	a1b2 := pair("10.0.1.1", "10.0.2.2")
	var log bytes.Buffer
	p := fake.New(fake.Options{Limiters: true})
	a := newTestAgent(t, Config{Host: "h1", Model: testModel(a1, b1, b2), Path: p, Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Mechanism: once(mech.Actions{Limits: []mech.Limit{{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a1", Dst: "b2"}, Rate: 10e6}}}, nil)})
	s := newStepper(a)
	s.steps(t, 1)
	p.RefuseWrites(2) // the core's lifting of the limit, and the removal of the class
	err := a.Update(testModel(a1, b1))
	if !errors.Is(err, fake.ErrRefused) || !strings.Contains(err.Error(), a1b2.String()) {
		t.Fatalf("update: %v, want the refused removal of %s", err, a1b2)
	}
	if _, ok := p.Limit(a1b2); !ok {
		t.Fatal("the data path took the removal it was told to refuse")
	}
	if !strings.Contains(log.String(), a1b2.String()) {
		t.Errorf("the refused removal is not in the log:\n%s", log.String())
	}
	p.RefuseWrites(1)
	if err := s.step(); !errors.Is(err, fake.ErrRefused) {
		t.Errorf("step with the removal refused again: %v", err)
	}
	s.steps(t, 1)
	if _, ok := p.Limit(a1b2); ok {
		t.Error("the limiter of a1->b2 is still there after the retries")
	}
	w := p.Writes()
	s.steps(t, 2)
	if p.Writes() != w {
		t.Error("a removal the data path took is retried")
	}
}

// TestUpdateKeepsReadings: the pairs' readings before a model update
// are the previous readings of the first observation after it (the
// pairs' records are indexed anew): a pair's rate over that period is
// its rate, not zero or two periods' worth, at its source and at its
// destination; a limit's verdict (held) stands across the update.
func TestUpdateKeepsReadings(t *testing.T) {
	a1, b1 := vmSpec{"a1", "T", "h1", "10.0.1.1", 1e9, 1e9}, vmSpec{"b1", "T", "h1", "10.0.1.2", 1e9, 1e9}
	c1 := vmSpec{"c1", "T", "h2", "10.0.2.1", 1e9, 1e9}
	p := fakePath(mech.LossAtDestination)
	mc := &script{live: true, act: func(_ string, step int, _ *mech.HostObs) mech.Actions {
		if step == 1 {
			return mech.Actions{Limits: []mech.Limit{pl("a1", "b1", 500e6)}}
		}
		return mech.Actions{}
	}}
	a := newTestAgent(t, Config{Host: "h1", Model: testModel(a1, b1), Mechanism: mc, Path: p})
	s := newStepper(a)
	ab := pair("10.0.1.1", "10.0.1.2")
	const perStep = 125000 // bytes per 10 ms: 100 Mbit/s
	sent := uint64(0)
	step := func() {
		sent += perStep
		p.Send(ab, datapath.Counters{Bytes: sent})
		p.Receive(ab, sent)
		s.steps(t, 1)
	}
	for range 3 {
		step()
	}
	tests := []struct {
		name   string
		update *model.Model
	}{
		{"same model", testModel(a1, b1)},
		{"a VM added", testModel(a1, b1, c1)},
		{"a VM removed", testModel(a1, b1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := a.Update(tc.update); err != nil {
				t.Fatal(err)
			}
			retries := a.Stats().Retries
			step()
			obs := mc.agent("h1").obs
			last := obs[len(obs)-1]
			eg, ok1 := findPair(last.Egress, "a1", "b1")
			in, ok2 := findPair(last.Ingress, "a1", "b1")
			if !ok1 || !ok2 || !near(eg.Rate, 100e6) || !near(in.Rate, 100e6) || eg.Limit != 500e6 {
				t.Errorf("after the update: egress %+v (%v), ingress %+v (%v), want 100 Mbit/s, limit 500 Mbit/s", eg, ok1, in, ok2)
			}
			if got := a.Stats().Retries; got != retries {
				t.Errorf("%d retries: the limit was found not held after the update", got-retries)
			}
		})
	}
}

// TestPeerAddressesFollowResolver: the addresses datagrams are accepted
// from follow the resolver (Config.Peers) at the next step, and the
// model's hosts at the next update: a peer that moved is heard only at
// its new address, one that left the model at none, one that joined at
// its own.
func TestPeerAddressesFollowResolver(t *testing.T) {
	var mu sync.Mutex
	peers := map[string]netip.AddrPort{"h2": netip.MustParseAddrPort("10.201.0.2:7471"), "h3": netip.MustParseAddrPort("10.201.0.3:7471")}
	resolve := func(h string) (netip.AddrPort, bool) {
		mu.Lock()
		defer mu.Unlock()
		a, ok := peers[h]
		return a, ok
	}
	a1, b1 := vmSpec{"a1", "T", "h1", "10.0.1.1", 1e6, 1e6}, vmSpec{"b1", "T", "h2", "10.0.2.1", 1e6, 1e6}
	x1 := vmSpec{"x1", "T", "h3", "10.0.3.1", 1e6, 1e6}
	a := newTestAgent(t, Config{Host: "h1", Model: testModel(a1, b1), Mechanism: &script{live: true}, Path: fakePath(mech.LossAtDestination),
		Peers: resolve, Keys: wireauth.Keys(testMaster, "h1")})
	s := newStepper(a)
	seq := uint64(0)
	// taken says whether a datagram from host h at address from is taken
	taken := func(h, from string) bool {
		seq++
		before := a.Dropped()[DropSender]
		a.handle(mustEncode(t, h, "h1", 1, seq, rateBody{Pair: "x", Rate: 1}), netip.MustParseAddrPort(from))
		return a.Dropped()[DropSender] == before
	}
	for _, step := range []struct {
		name   string
		change func()
		want   map[[2]string]bool // host, address: taken
	}{
		{"start", func() {}, map[[2]string]bool{
			{"h2", "10.201.0.2:7471"}: true, {"h2", "10.201.0.9:7471"}: false,
			{"h3", "10.201.0.3:7471"}: false, // not a host of the model
		}},
		{"h2 moves", func() {
			mu.Lock()
			peers["h2"] = netip.MustParseAddrPort("10.201.0.9:7471")
			mu.Unlock()
			if err := s.step(); err != nil {
				t.Fatal(err)
			}
		}, map[[2]string]bool{{"h2", "10.201.0.2:7471"}: false, {"h2", "10.201.0.9:7471"}: true}},
		{"h3 joins the model", func() {
			if err := a.Update(testModel(a1, b1, x1)); err != nil {
				t.Fatal(err)
			}
		}, map[[2]string]bool{{"h3", "10.201.0.3:7471"}: true, {"h2", "10.201.0.9:7471"}: true}},
		{"h2 leaves the model", func() {
			if err := a.Update(testModel(a1, x1)); err != nil {
				t.Fatal(err)
			}
		}, map[[2]string]bool{{"h2", "10.201.0.9:7471"}: false, {"h3", "10.201.0.3:7471"}: true}},
	} {
		step.change()
		for k, want := range step.want {
			if got := taken(k[0], k[1]); got != want {
				t.Errorf("%s: a datagram from %s at %s taken %v, want %v", step.name, k[0], k[1], got, want)
			}
		}
	}
}
