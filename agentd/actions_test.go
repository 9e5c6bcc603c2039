package agentd_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/agentd"
	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/pki"
	"github.com/bulkhead-dc/bulkhead/proxy/appliancetest"
	"github.com/bulkhead-dc/bulkhead/units"
)

// pulsarCluster is a controller running Pulsar every 100 ms over hosts s1
// and s2, with tenant a's VMs a1 on s1 and a2 on s2.
func pulsarCluster(t *testing.T) *cluster {
	cl := newCluster(t)
	cl.apply(obj(api.KindCluster, api.ClusterName, &api.ClusterSpec{
		Topology:  mustTopology(t),
		Mechanism: api.Mechanism{Name: "pulsar", Params: map[string]any{"interval": "100ms"}},
	}))
	objs := []api.Object{}
	for _, h := range []string{"s1", "s2"} {
		objs = append(objs, obj(api.KindHost, h, &api.HostSpec{Address: mustAddr("127.0.0.1"), Port: cl.ports[h]}))
	}
	objs = append(objs, tenant("a", "a1", "s1", "10.0.0.1", "a2", "s2", "10.0.0.2"))
	cl.apply(objs...)
	return cl
}

// runDaemon runs host's agent daemon against cl's controller on path (a
// fake data path with limiters when nil), reporting every `every`, until
// t ends.
func runDaemon(t *testing.T, cl *cluster, host string, every time.Duration, path datapath.Host) *agentd.Daemon {
	t.Helper()
	tc, err := pki.ClientTLS(cl.pki, host)
	if err != nil {
		t.Fatal(err)
	}
	if path == nil {
		path = fake.New(fake.Options{Limiters: true})
	}
	d, err := agentd.New(agentd.Config{
		Host: host, Controllers: []string{cl.addr}, TLS: tc, ReportEvery: every,
		Mechanism: all.New, Version: "test",
		Path: func(*model.Model, mech.Mechanism) (datapath.Host, error) { return path, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// TestAgentKeepsCentralActions: under a mechanism with a central
// controller (Pulsar), the daemon receives the controller's actions every
// interval and keeps the latest for its host; default rates name only
// its own VMs.
func TestAgentKeepsCentralActions(t *testing.T) {
	cl := pulsarCluster(t)
	own := map[string]string{"s1": "a1", "s2": "a2"}
	for _, host := range []string{"s1", "s2"} {
		t.Run(host, func(t *testing.T) {
			d := runDaemon(t, cl, host, 100*time.Millisecond, nil)
			waitFor(t, "three actions", func() bool { return d.ActionsReceived() >= 3 })
			a := d.Allocations()
			// Three steps' actions, the latest kept: its seq is at least 3.
			if a.Seq < 3 || a.Revision == 0 || a.Refused != 0 || !(a.DefaultRate > 0) {
				t.Errorf("actions kept: seq %d, revision %d, %d refused, default rate %v (Pulsar's default rate: > 0)", a.Seq, a.Revision, a.Refused, a.DefaultRate)
			}
			for vm := range a.DefaultBySrc {
				if vm != own[host] {
					t.Errorf("host %s got a default rate for VM %s of another host", host, vm)
				}
			}
			for f := range a.Flows {
				if f.Src != own[host] {
					t.Errorf("host %s got an allocation for flow %s->%s", host, f.Src, f.Dst)
				}
			}
		})
	}
}

// TestAgentEnforcesCentralAllocations: under Pulsar, a host whose VM
// sends reports the pair as a flow; the controller allocates it and the
// agent holds the pair at its allocation, in bits/s (the pair's limit
// the data path holds is the allocation's scarcest element × 8).
func TestAgentEnforcesCentralAllocations(t *testing.T) {
	path := fake.New(fake.Options{Limiters: true})
	d := runDaemon(t, pulsarCluster(t), "s1", 100*time.Millisecond, path)

	// a1 sends to a2 at 50 Mbit/s, held back by its limiter.
	pair := datapath.Pair{Src: mustAddr("10.0.0.1"), Dst: mustAddr("10.0.0.2")}
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		start := time.Now()
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tk.C:
				b := uint64(now.Sub(start).Seconds() * 50e6 / 8)
				path.Send(pair, datapath.Counters{Bytes: b, Packets: b / 1500, Overlimits: uint32(b / 1500)})
			}
		}
	}()
	defer func() { close(stop); <-sent }()
	id := mech.FlowID{Src: "a1", Dst: "a2"}
	waitFor(t, "an allocation for a1->a2", func() bool { _, ok := d.Allocations().Flows[id]; return ok })
	var want float64
	waitFor(t, "the pair held at its allocation", func() bool {
		want = drive.PairAllocLimit(d.Allocations().Flows[id])
		got, ok := path.Limit(pair)
		return ok && want > 0 && math.Abs(got-want) <= 1e-6*want
	})
	// The flow's demand (50 Mbit/s) is below its guarantee (100): Pulsar
	// allocates what it measured of it (an interval's rate, which a loaded
	// machine's timing moves by some percent).
	if want < 0.8*50e6 {
		t.Errorf("a1->a2 held at %.3g bit/s, below its 50 Mbit/s demand (guarantee 100 Mbit/s)", want)
	}
}

// TestAgentFrontsAppliances: under Pulsar, a host whose VM uses a real
// appliance (a redis-server, declared at 10.9.9.9:6379) steers the VM's
// connections to its front, relays its requests, reports the flow on the
// controller's path, and the controller's allocation reaches the front:
// the tenant's guarantee at the appliance holds in the allocation.
func TestAgentFrontsAppliances(t *testing.T) {
	ac := newApplianceCluster(t)
	st, ep := ac.st, ac.ep
	d := ac.startAgent()
	defer d.stop()
	waitFor(t, "the front to listen", func() bool { return st.ListenAddr(ep) != "" })
	if s, _ := st.Steered(); len(s[ep.Addr()]) != 1 {
		t.Errorf("steered %v, want a1's address to %v", s, ep.Addr())
	}

	// a1 sends SETs, one at a time, until the controller has allocated
	// its flow.
	conn, err := net.Dial("tcp", st.ListenAddr(ep))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	id := mech.FlowID{Src: "a1", Dst: "kv"}
	waitFor(t, "an allocation for a1->kv", func() bool {
		fmt.Fprintf(conn, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n")
		if line, err := rd.ReadString('\n'); err != nil || line != "+OK\r\n" {
			t.Fatalf("SET through the front: %q, %v", line, err)
		}
		_, ok := d.Allocations().Flows[id]
		return ok
	})
	cl := ac.cl
	if s := cl.c.CentralStats(); s.Flows < 1 || s.Rejected != 0 {
		t.Errorf("controller: %d flows observed, %d rejected; want a1->kv, none rejected", s.Flows, s.Rejected)
	}
	// s1 -> tor1 -> s2, kv, and back: the appliance is element 2.
	if rates := d.Allocations().Flows[id]; len(rates) != 5 || rates[2] < 80000 {
		t.Errorf("allocation %v tokens/s: want 5 elements, kv's (element 2) at least the 80000 tokens/s guarantee", rates)
	}
}

// applianceCluster is a controller running Pulsar every 200 ms over hosts
// s1 and s2, with a real redis-server declared as appliance kv at
// 10.9.9.9:6379 behind s2, and tenant a (a1 on s1 at 127.0.0.1, a2 on s2)
// guaranteed 80,000 tokens/s at it; s1's agent steers on loopback.
type applianceCluster struct {
	t  *testing.T
	cl *cluster
	st *fake.Steering
	ep netip.AddrPort
}

func newApplianceCluster(t *testing.T) *applianceCluster {
	redis := appliancetest.StartRedis(t)
	cl := newCluster(t)
	cl.apply(obj(api.KindCluster, api.ClusterName, &api.ClusterSpec{
		Topology:  mustTopology(t),
		Mechanism: api.Mechanism{Name: "pulsar", Params: map[string]any{"interval": "200ms"}},
	}))
	objs := []api.Object{}
	for _, h := range []string{"s1", "s2"} {
		objs = append(objs, obj(api.KindHost, h, &api.HostSpec{Address: mustAddr("127.0.0.1"), Port: cl.ports[h]}))
	}
	ep := netip.MustParseAddrPort("10.9.9.9:6379")
	objs = append(objs, obj(api.KindAppliance, "kv", &api.ApplianceSpec{Server: "s2", Model: model.ModelKV,
		Address: ep.Addr().String(), Port: int(ep.Port()), Protocol: model.ProtoRedis, CapacityMin: 1e5, CapacityMax: 1e9}))
	tn := tenant("a", "a1", "s1", "127.0.0.1", "a2", "s2", "10.0.0.2")
	tn.Spec.(*api.TenantSpec).VDC = &model.VDC{Appliances: []model.ApplianceGuarantee{{Appliance: "kv", Guarantee: units.Tokens(80000)}}}
	cl.apply(append(objs, tn)...)
	return &applianceCluster{t: t, cl: cl, st: fake.NewSteering(map[netip.AddrPort]string{ep: redis}, nil), ep: ep}
}

// runningAgent is s1's agent daemon, running.
type runningAgent struct {
	*agentd.Daemon
	stop func()
}

func (ac *applianceCluster) startAgent() runningAgent {
	t := ac.t
	tc, err := pki.ClientTLS(ac.cl.pki, "s1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := agentd.New(agentd.Config{
		Host: "s1", Controllers: []string{ac.cl.addr}, TLS: tc, ReportEvery: 200 * time.Millisecond,
		Mechanism: all.New, Version: "test",
		Path: func(*model.Model, mech.Mechanism) (datapath.Host, error) {
			return fake.New(fake.Options{Limiters: true}), nil
		},
		Steering: func() (datapath.Steering, error) { return ac.st, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	return runningAgent{Daemon: d, stop: func() { cancel(); <-done }}
}

// TestFrontSurvivesRestarts: a VM increments a counter through the front,
// one request at a time, reconnecting when its connection closes. The
// controller restarting closes nothing (the agent keeps its front and
// allocations); the agent restarting closes the VM's connection, and the
// VM reconnects to the next agent's front. Every answered request counted
// once, in order; at most the one request in flight on a closed
// connection is unanswered.
func TestFrontSurvivesRestarts(t *testing.T) {
	ac := newApplianceCluster(t)
	d := ac.startAgent()
	waitFor(t, "the front to listen", func() bool { return ac.st.ListenAddr(ac.ep) != "" })

	var (
		mu      sync.Mutex
		replies []int
		breaks  int
	)
	stop := make(chan struct{})
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		var c net.Conn
		var rd *bufio.Reader
		for {
			select {
			case <-stop:
				if c != nil {
					c.Close()
				}
				return
			default:
			}
			if c == nil {
				var err error
				if c, err = net.DialTimeout("tcp", ac.st.ListenAddr(ac.ep), time.Second); err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				rd = bufio.NewReader(c)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err := io.WriteString(c, "*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n")
			var line string
			if err == nil {
				line, err = rd.ReadString('\n')
			}
			if err != nil {
				c.Close()
				c = nil
				mu.Lock()
				breaks++
				mu.Unlock()
				continue
			}
			var v int
			fmt.Sscanf(line, ":%d", &v)
			mu.Lock()
			replies = append(replies, v)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(replies) }
	waitFor(t, "requests through the front", func() bool { return count() > 50 })

	ac.cl.stopCtl()
	n := count()
	waitFor(t, "requests while the controller is away", func() bool { return count() > n+50 })
	ac.cl.startController()
	mu.Lock()
	if breaks != 0 {
		t.Errorf("the controller's restart closed the VM's connection %d times", breaks)
	}
	mu.Unlock()

	d.stop()
	d = ac.startAgent()
	defer d.stop()
	n = count()
	waitFor(t, "requests through the restarted agent's front", func() bool { return count() > n+50 })
	close(stop)
	<-clientDone

	mu.Lock()
	defer mu.Unlock()
	lost := 0
	for i := 1; i < len(replies); i++ {
		switch gap := replies[i] - replies[i-1]; {
		case gap < 1:
			t.Fatalf("reply %d: %d after %d: a request counted twice or out of order", i, replies[i], replies[i-1])
		case gap > 1:
			lost += gap - 1
		}
	}
	t.Logf("%d requests answered, %d connection breaks, %d executed but unanswered", len(replies), breaks, lost)
	if breaks < 1 {
		t.Error("the agent's restart did not close the VM's connection: was the front restarted?")
	}
	if lost > breaks {
		t.Errorf("%d requests executed without an answer over %d closed connections (at most one each)", lost, breaks)
	}
}

// TestReportsFollowControllerSteps: under a central controller (Pulsar,
// stepping every 100 ms) an agent configured to report every second
// reports once per step instead, timed after each step's actions, so that
// every report measures one allocation's interval and reaches the
// controller before its next step.
func TestReportsFollowControllerSteps(t *testing.T) {
	d := runDaemon(t, pulsarCluster(t), "s1", time.Second, nil)
	waitFor(t, "two actions", func() bool { return d.ActionsReceived() >= 2 })
	a0, r0 := d.ActionsReceived(), d.ReportsSent()
	waitFor(t, "ten more actions", func() bool { return d.ActionsReceived() >= a0+10 })
	a, r := d.ActionsReceived()-a0, d.ReportsSent()-r0
	// One report per step (a step's actions may come late or be
	// missed now and then); on the 1 s timer alone it would be one.
	if r < a*7/10 || r > a+1 {
		t.Errorf("%d reports over %d steps' actions, want about one per step", r, a)
	}
}
