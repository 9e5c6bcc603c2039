package agentd_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/agentd"
	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/controller"
	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/pki"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// cluster is a controller with its store, its PKI and agents on fake data
// paths, over real gRPC and mutual TLS on loopback.
type cluster struct {
	t       *testing.T
	pki     string
	dbPath  string
	addr    string
	c       *controller.Controller
	stopCtl func()
	ports   map[string]int
	mu      sync.Mutex
	paths   map[string]*fake.Host // the latest data path of each host
}

func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	if err := pki.InitCA(dir, "test CA"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pki.Issue(dir, pki.Request{Name: "controller", Role: pki.Controller, DNS: []string{"localhost"}}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"s1", "s2"} {
		if _, _, err := pki.Issue(dir, pki.Request{Name: h, Role: pki.Host}); err != nil {
			t.Fatal(err)
		}
	}
	cl := &cluster{t: t, pki: dir, dbPath: filepath.Join(dir, "state.db"), addr: fmt.Sprintf("localhost:%d", freePort(t, "tcp")),
		ports: map[string]int{"s1": freePort(t, "udp"), "s2": freePort(t, "udp")}, paths: map[string]*fake.Host{}}
	cl.startController()
	t.Cleanup(func() { cl.stopCtl() })
	return cl
}

func (cl *cluster) startController() {
	t := cl.t
	st, err := store.OpenBolt(cl.dbPath, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Config{Store: st, Elector: st, ID: "test", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := pki.ServerTLS(cl.pki, "controller")
	if err != nil {
		t.Fatal(err)
	}
	var lis net.Listener
	for i := 0; ; i++ { // the port may linger briefly after a restart
		if lis, err = net.Listen("tcp", strings.Replace(cl.addr, "localhost", "127.0.0.1", 1)); err == nil || i > 50 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	gs := c.GRPCServer(credentials.NewTLS(tc))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	go func() { defer wg.Done(); _ = gs.Serve(lis) }()
	cl.c = c
	cl.stopCtl = func() {
		gs.Stop()
		cancel()
		wg.Wait()
		st.Close()
		cl.stopCtl = func() {}
	}
	waitFor(t, "the controller leads", func() bool { l, _ := c.Leading(); return l })
}

func waitFor(t *testing.T, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// startAgent runs host's daemon; it returns a stop function.
func (cl *cluster) startAgent(host string) func() {
	t := cl.t
	tc, err := pki.ClientTLS(cl.pki, host)
	if err != nil {
		t.Fatal(err)
	}
	d, err := agentd.New(agentd.Config{
		Host: host, Controllers: []string{cl.addr}, TLS: tc, ReportEvery: 100 * time.Millisecond,
		Mechanism: all.New, Version: "test",
		Path: func(*model.Model, mech.Mechanism) (datapath.Host, error) {
			p := fake.New(fake.Options{Limiters: true})
			cl.mu.Lock()
			cl.paths[host] = p
			cl.mu.Unlock()
			return p, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func (cl *cluster) attached(host string) []string {
	cl.mu.Lock()
	p := cl.paths[host]
	cl.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Attached()
}

func (cl *cluster) apply(objs ...api.Object) {
	cl.t.Helper()
	if _, err := cl.c.Apply(context.Background(), objs, false); err != nil {
		cl.t.Fatal(err)
	}
}

func obj(kind, name string, spec any) api.Object {
	return api.Object{APIVersion: api.Version, Kind: kind, Metadata: api.Meta{Name: name}, Spec: spec}
}

func (cl *cluster) declare() {
	objs := []api.Object{obj(api.KindCluster, api.ClusterName, &api.ClusterSpec{
		Topology:  mustTopology(cl.t),
		Mechanism: api.Mechanism{Name: "elasticswitch"},
	})}
	for _, h := range []string{"s1", "s2"} {
		objs = append(objs, obj(api.KindHost, h, &api.HostSpec{Address: mustAddr("127.0.0.1"), Port: cl.ports[h]}))
	}
	objs = append(objs, tenant("a", "a1", "s1", "10.0.0.1", "a2", "s2", "10.0.0.2"))
	cl.apply(objs...)
}

func TestAgentsFollowTheController(t *testing.T) {
	cl := newCluster(t)
	cl.declare()
	cl.startAgent("s1")
	cl.startAgent("s2")
	waitFor(t, "both agents enforce tenant a", func() bool {
		return slices.Equal(cl.attached("s1"), []string{"a1"}) && slices.Equal(cl.attached("s2"), []string{"a2"})
	})
	waitFor(t, "both agents reported", func() bool {
		hs, err := cl.c.List(context.Background(), api.KindHost)
		if err != nil {
			t.Log(err)
			return false
		}
		for _, h := range hs {
			if st := h.Status.(*api.HostStatus); !st.Connected || st.LastReport == nil {
				t.Logf("%s: %+v", h.Name(), st)
				return false
			}
		}
		return true
	})

	// A tenant applied at runtime reaches its hosts within 2 s; a deleted
	// one leaves them within 2 s.
	cl.apply(tenant("b", "b1", "s1", "10.0.0.3", "b2", "s2", "10.0.0.4"))
	took := waitFor(t, "tenant b reaches both hosts", func() bool {
		return slices.Equal(cl.attached("s1"), []string{"a1", "b1"}) && slices.Equal(cl.attached("s2"), []string{"a2", "b2"})
	})
	if took > 2*time.Second {
		t.Errorf("tenant b took %v to reach its hosts", took)
	}
	if _, err := cl.c.Delete(context.Background(), api.KindTenant, "b"); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, "tenant b leaves both hosts", func() bool {
		return slices.Equal(cl.attached("s1"), []string{"a1"}) && slices.Equal(cl.attached("s2"), []string{"a2"})
	})
	if took > 2*time.Second {
		t.Errorf("tenant b took %v to leave its hosts", took)
	}

	// The controller stops: the agents keep enforcing; it comes back from
	// its store and they re-register.
	cl.mu.Lock()
	before := cl.paths["s1"]
	cl.mu.Unlock()
	cl.stopCtl()
	time.Sleep(500 * time.Millisecond)
	if before.Closed() || !slices.Equal(before.Attached(), []string{"a1"}) {
		t.Fatalf("agent s1 stopped enforcing without its controller: closed %v, VMs %v", before.Closed(), before.Attached())
	}
	cl.startController()
	waitFor(t, "the agents re-register", func() bool {
		h, err := cl.c.Get(context.Background(), api.KindHost, "s2")
		return err == nil && h.Status.(*api.HostStatus).Connected
	})
	cl.apply(tenant("c", "c1", "s1", "10.0.0.5", "c2", "s2", "10.0.0.6"))
	waitFor(t, "tenant c reaches the re-registered agents", func() bool {
		return slices.Equal(cl.attached("s1"), []string{"a1", "c1"})
	})
	cl.mu.Lock()
	after := cl.paths["s1"]
	cl.mu.Unlock()
	if after != before {
		t.Errorf("the agent restarted its data path on reconnecting (same mechanism: it should only update)")
	}
}

// TestHostCannotPoseAsAnother: a host's certificate cannot open another
// host's session.
func TestHostCannotPoseAsAnother(t *testing.T) {
	cl := newCluster(t)
	cl.declare()
	tc, err := pki.ClientTLS(cl.pki, "s1")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(cl.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := controlpb.NewControlClient(conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&controlpb.AgentMessage{Msg: &controlpb.AgentMessage_Hello{Hello: &controlpb.Hello{Host: "s2"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if err == nil || !strings.Contains(err.Error(), "certificate is host \"s1\"") {
		t.Errorf("s1's certificate saying hello as s2: %v", err)
	}
	// Without a client certificate the handshake fails.
	tc2 := &tls.Config{RootCAs: tc.RootCAs, MinVersion: tls.VersionTLS13, ServerName: "localhost"}
	conn2, err := grpc.NewClient(cl.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc2)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if s, err := controlpb.NewControlClient(conn2).Session(ctx); err == nil {
		if err := s.Send(&controlpb.AgentMessage{Msg: &controlpb.AgentMessage_Hello{Hello: &controlpb.Hello{Host: "s1"}}}); err == nil {
			if _, err := s.Recv(); err == nil {
				t.Error("a session without a client certificate was served")
			}
		}
	}
}

func tenant(name string, vms ...string) api.Object {
	ts := &api.TenantSpec{Guarantee: 100e6}
	for i := 0; i+2 < len(vms)+1; i += 3 {
		ts.VMs = append(ts.VMs, api.VMSpec{Name: vms[i], Host: vms[i+1], Addrs: []netip.Addr{mustAddr(vms[i+2])}})
	}
	return obj(api.KindTenant, name, ts)
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func mustTopology(t *testing.T) spec.Topology {
	t.Helper()
	return spec.Topology{Kind: "two-tier", TwoTier: &spec.TwoTier{Racks: 1, ServersPerRack: 2, Edge: 1e9}}
}
