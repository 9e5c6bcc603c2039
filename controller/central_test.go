package controller

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/pki"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/bulkhead-dc/bulkhead/units"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// fleetSpec is a cluster for the central controller: a two-tier topology
// of racks × perRack servers, vmsPerHost VMs on every server in tenants
// of the sizes given (cycled, each tenant's VMs on consecutive slots),
// appliances behind the first servers, and Pulsar.
type fleetSpec struct {
	racks, perRack, vmsPerHost int
	tenantSizes                []int
	appliances                 int
	// Every VM sends to the next peers VMs of its tenant; a VM of every
	// appEvery-th tenant also to its tenant's appliance.
	peers, appEvery int
	interval        time.Duration // Pulsar's control interval and the agents' report interval
}

// fleet is a controller with simulated agents: one goroutine and one gRPC
// session over mutual TLS per host, reporting its flows every interval.
type fleet struct {
	tb     testing.TB
	fs     fleetSpec
	c      *Controller
	addr   string
	pki    string
	conns  *connCounter
	cl     *api.Cluster
	agents []*simAgent
	stop   func()
	began  time.Time
	// base is the heap in use before the fleet starts; heapBefore the
	// heap the fleet added with the controller running (its central
	// controller built) and no agent connected.
	base, heapBefore uint64
}

// simAgent is one host's simulated agent.
type simAgent struct {
	host  string
	flows []*controlpb.FlowObs
	vms   []string
	// extra flows to report (tests: another host's flow, a bad vector).
	extra atomic.Pointer[[]*controlpb.FlowObs]

	mu      sync.Mutex
	allocs  map[mech.FlowID][]float32 // allocations received
	actions int
	foreign int // allocations for flows whose source is not on this host
	seq     uint64

	upBytes, upFlows atomic.Int64 // proto sizes of the reports sent, flows in them
	flowBytes        atomic.Int64 // proto sizes of the flows in them (each with its field tag and length)
	downBytes        atomic.Int64 // proto sizes of the actions received
}

// connCounter counts the bytes on the controller's connections.
type connCounter struct {
	net.Listener
	read, written atomic.Int64
}

type countedConn struct {
	net.Conn
	cc *connCounter
}

func (c *connCounter) Accept() (net.Conn, error) {
	conn, err := c.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: conn, cc: c}, nil
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.cc.read.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.cc.written.Add(int64(n))
	return n, err
}

// connectBatch is how many simulated agents connect at once.
const connectBatch = 32

func hostName(i int) string { return "s" + strconv.Itoa(i+1) }

// fleetObjects declares the fleet's cluster.
func fleetObjects(fs fleetSpec) (objs []api.Object, vmHost map[string]string) {
	o := func(kind, name string, s any) api.Object {
		return api.Object{APIVersion: api.Version, Kind: kind, Metadata: api.Meta{Name: name}, Spec: s}
	}
	hosts := fs.racks * fs.perRack
	objs = append(objs, o(api.KindCluster, api.ClusterName, &api.ClusterSpec{
		Topology: spec.Topology{Kind: "two-tier", TwoTier: &spec.TwoTier{Racks: fs.racks, ServersPerRack: fs.perRack,
			Edge: spec.Rate(10e9), Oversubscription: 2}},
		Slots:     fs.vmsPerHost + 1, // room for tenants added later
		Mechanism: api.Mechanism{Name: "pulsar", Params: map[string]any{"interval": fs.interval.String()}},
	}))
	for i := 0; i < hosts; i++ {
		objs = append(objs, o(api.KindHost, hostName(i), &api.HostSpec{Address: netip.MustParseAddr("127.0.0.1"), Port: 7000 + i%1000}))
	}
	for a := 0; a < fs.appliances; a++ {
		objs = append(objs, o(api.KindAppliance, fmt.Sprintf("kv%d", a), &api.ApplianceSpec{Server: hostName(a), Model: "kv",
			CapacityMin: units.Tokens(1e5), CapacityMax: units.Tokens(1e9)}))
	}
	vmHost = map[string]string{}
	slot, total := 0, hosts*fs.vmsPerHost
	for t := 0; slot < total; t++ {
		n := min(fs.tenantSizes[t%len(fs.tenantSizes)], total-slot)
		ts := &api.TenantSpec{Guarantee: units.Rate(50e6)}
		if fs.appliances > 0 && t%fs.appEvery == 0 {
			ts.VDC = &model.VDC{Appliances: []model.ApplianceGuarantee{{Appliance: fmt.Sprintf("kv%d", t%fs.appliances), Guarantee: units.Tokens(1000)}}}
		}
		for k := 0; k < n; k++ {
			name := fmt.Sprintf("t%d-%d", t, k)
			h := hostName(slot / fs.vmsPerHost)
			ts.VMs = append(ts.VMs, api.VMSpec{Name: name, Host: h})
			vmHost[name] = h
			slot++
		}
		objs = append(objs, o(api.KindTenant, fmt.Sprintf("t%d", t), ts))
	}
	return objs, vmHost
}

// startFleet declares the cluster, starts the controller with its gRPC
// server and connects one simulated agent per host.
func startFleet(tb testing.TB, fs fleetSpec) *fleet {
	tb.Helper()
	began := time.Now()
	base := heapInuse()
	dir := tb.TempDir()
	hosts := fs.racks * fs.perRack
	if err := pki.InitCA(dir, "bench CA"); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := pki.Issue(dir, pki.Request{Name: "controller", Role: pki.Controller, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < hosts; i++ {
		if _, _, err := pki.Issue(dir, pki.Request{Name: hostName(i), Role: pki.Host}); err != nil {
			tb.Fatal(err)
		}
	}
	st, err := store.OpenBolt(filepath.Join(dir, "state.db"), time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := New(Config{Store: st, Elector: st, ID: "http://controller-1", Token: token})
	if err != nil {
		tb.Fatal(err)
	}
	objs, _ := fleetObjects(fs)
	// Declared in applies of at most api.MaxObjects objects, through
	// admission like an operator's.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if lead, _ := c.Leading(); lead {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatal("the controller does not lead")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < len(objs); i += api.MaxObjects {
		if _, err := c.Apply(ctx, objs[i:min(len(objs), i+api.MaxObjects)], false); err != nil {
			tb.Fatalf("apply: %v", err)
		}
	}
	tc, err := pki.ServerTLS(dir, "controller")
	if err != nil {
		tb.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cc := &connCounter{Listener: lis}
	gs := c.GRPCServer(credentials.NewTLS(tc))
	go func() { _ = gs.Serve(cc) }()
	f := &fleet{tb: tb, fs: fs, c: c, addr: lis.Addr().String(), pki: dir, conns: cc, began: began}
	snap, err := load(ctx, st)
	if err != nil {
		tb.Fatal(err)
	}
	if f.cl, err = api.Build(snap.objs); err != nil {
		tb.Fatal(err)
	}
	f.agents = f.makeAgents()
	for deadline := time.Now().Add(2 * time.Minute); !f.c.CentralStats().Running; {
		if time.Now().After(deadline) {
			tb.Fatalf("no central controller: %+v", f.c.CentralStats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	h := heapInuse()
	f.base, f.heapBefore = base, h-min(base, h)
	tb.Logf("declared in %v; heap in use %.0f MiB before the agents connect", time.Since(f.began).Round(time.Millisecond), float64(f.heapBefore)/(1<<20))
	agentCtx, stopAgents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	connected := make(chan error, len(f.agents))
	t0 := time.Now()
	// Agents connect connectBatch at a time: every session's snapshot
	// builds the whole cluster (snapshotFor), and a thousand at once hold
	// gigabytes (reported apart from the steady state).
	for i := 0; i < len(f.agents); i += connectBatch {
		batch := f.agents[i:min(len(f.agents), i+connectBatch)]
		for _, a := range batch {
			wg.Add(1)
			go func() { defer wg.Done(); f.runAgent(agentCtx, a, connected) }()
		}
		for range batch {
			if err := <-connected; err != nil {
				tb.Fatal(err)
			}
		}
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	tb.Logf("%d agents connected (a snapshot each) in %v; heap obtained from the OS %.0f MiB", len(f.agents), time.Since(t0).Round(time.Millisecond), float64(ms.HeapSys)/(1<<20))
	f.stop = func() {
		stopAgents()
		wg.Wait()
		gs.Stop()
		cancel()
		<-done
		st.Close()
	}
	tb.Cleanup(f.stop)
	return f
}

// makeAgents prepares every host's flows, with vectors as a Pulsar
// enforcer would report them: bytes on every link (one value), and for a
// flow to an appliance the tokens of each path element.
func (f *fleet) makeAgents() []*simAgent {
	paths := &central{tp: f.cl.Topology, seed: f.cl.Spec.Seed, vms: map[string]vmInfo{}, apps: map[string]appInfo{},
		paths: map[mech.FlowID][]mech.PathElem{}}
	paths.index(f.cl, len(f.cl.Topology.Links))
	byHost := map[string]*simAgent{}
	var agents []*simAgent
	for i := 0; i < f.fs.racks*f.fs.perRack; i++ {
		a := &simAgent{host: hostName(i), allocs: map[mech.FlowID][]float32{}}
		byHost[a.host] = a
		agents = append(agents, a)
	}
	for ti, t := range f.cl.Model.Tenants {
		for k, v := range t.VMs {
			a := byHost[v.Host]
			a.vms = append(a.vms, v.Name)
			for p := 1; p <= f.fs.peers && p < len(t.VMs); p++ {
				dst := t.VMs[(k+p)%len(t.VMs)].Name
				used := float32(1e6 * (1 + (ti+k+p)%50))
				a.flows = append(a.flows, &controlpb.FlowObs{Src: v.Name, Dst: dst, Used: []float32{used}, Backlog: []float32{used / 10}})
			}
			if t.VDC != nil && len(t.VDC.Appliances) > 0 {
				app := t.VDC.Appliances[0].Appliance
				p, err := paths.path(mech.FlowID{Src: v.Name, Dst: app}, paths.vms[v.Name])
				if err != nil {
					f.tb.Fatal(err)
				}
				fo := &controlpb.FlowObs{Src: v.Name, Dst: app}
				for _, e := range p {
					bytes := float32(2e6)
					if e.Role == mech.Appliance {
						bytes = 400 // tokens at the appliance
					}
					fo.Used = append(fo.Used, bytes)
					fo.Queued = append(fo.Queued, bytes/100)
					fo.Outstanding = append(fo.Outstanding, bytes/50)
				}
				a.flows = append(a.flows, fo)
			}
		}
	}
	return agents
}

// runAgent is one host's agent: a session over mutual TLS with the
// host's certificate, a report every interval (with the allocations in
// force, as received), and the actions counted.
func (f *fleet) runAgent(ctx context.Context, a *simAgent, connected chan<- error) {
	fail := func(err error) { connected <- fmt.Errorf("agent %s: %w", a.host, err) }
	tc, err := pki.ClientTLS(f.pki, a.host)
	if err != nil {
		fail(err)
		return
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		fail(err)
		return
	}
	defer conn.Close()
	stream, err := controlpb.NewControlClient(conn).Session(ctx)
	if err != nil {
		fail(err)
		return
	}
	if err := stream.Send(&controlpb.AgentMessage{Msg: &controlpb.AgentMessage_Hello{Hello: &controlpb.Hello{Host: a.host, Version: "bench"}}}); err != nil {
		fail(err)
		return
	}
	m, err := stream.Recv()
	if err != nil || m.GetSnapshot() == nil {
		fail(fmt.Errorf("no snapshot: %v", err))
		return
	}
	connected <- nil
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			act := m.GetActions()
			if act == nil {
				continue
			}
			a.downBytes.Add(int64(proto.Size(m)))
			a.mu.Lock()
			a.actions++
			for _, fa := range act.Allocations {
				if !strings.HasPrefix(fa.Src, "t") || !a.hasVM(fa.Src) {
					a.foreign++
				}
				a.allocs[mech.FlowID{Src: fa.Src, Dst: fa.Dst}] = fa.Rates
			}
			a.mu.Unlock()
		}
	}()
	t := time.NewTicker(f.fs.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := a.report(f.fs.interval)
		m := &controlpb.AgentMessage{Msg: &controlpb.AgentMessage_Report{Report: r}}
		a.upBytes.Add(int64(proto.Size(m)))
		a.upFlows.Add(int64(len(r.Flows)))
		for _, fo := range r.Flows {
			n := proto.Size(fo)
			a.flowBytes.Add(int64(1 + protowire.SizeVarint(uint64(n)) + n))
		}
		if err := stream.Send(m); err != nil {
			return
		}
	}
}

func (a *simAgent) hasVM(vm string) bool {
	for _, v := range a.vms {
		if v == vm {
			return true
		}
	}
	return false
}

// report is one interval's report: the host's flows with the
// allocations in force, and its VMs.
func (a *simAgent) report(interval time.Duration) *controlpb.Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	r := &controlpb.Report{Seq: a.seq, UnixNano: time.Now().UnixNano(), PeriodSeconds: interval.Seconds()}
	flows := a.flows
	if x := a.extra.Load(); x != nil {
		flows = append(flows[:len(flows):len(flows)], *x...)
	}
	for _, fl := range flows {
		fo := proto.Clone(fl).(*controlpb.FlowObs)
		fo.Allocation = a.allocs[mech.FlowID{Src: fl.Src, Dst: fl.Dst}]
		r.Flows = append(r.Flows, fo)
	}
	for _, v := range a.vms {
		r.VmObs = append(r.VmObs, &controlpb.VMObs{Vm: v, InRate: 1e8, OutRate: 1e8, InArrival: 1e8})
	}
	return r
}

// waitSteps waits for n more steps of the central controller.
func (f *fleet) waitSteps(n uint64, within time.Duration) CentralStats {
	f.tb.Helper()
	start := f.c.CentralStats().Steps
	deadline := time.Now().Add(within)
	for {
		s := f.c.CentralStats()
		if s.Steps >= start+n {
			return s
		}
		if time.Now().After(deadline) {
			f.tb.Fatalf("%d central steps not within %v (stats %+v)", n, within, s)
		}
		time.Sleep(f.fs.interval / 20)
	}
}

func (f *fleet) flows() int {
	n := 0
	for _, a := range f.agents {
		n += len(a.flows)
	}
	return n
}

// TestCentralController runs Pulsar's controller over simulated agents on
// real gRPC sessions: every reported flow is observed, each source host
// gets its own flows' allocations only, flows a host may not report are
// left out and counted, and a changed model builds a new controller.
func TestCentralController(t *testing.T) {
	fs := fleetSpec{racks: 2, perRack: 4, vmsPerHost: 4, tenantSizes: []int{3, 5, 8}, appliances: 1, peers: 2, appEvery: 2,
		interval: 100 * time.Millisecond}
	f := startFleet(t, fs)
	st := f.waitSteps(5, 10*time.Second)
	if !st.Running || st.Mechanism != "pulsar" || st.Builds != 1 {
		t.Fatalf("stats %+v: want pulsar's controller built once", st)
	}
	if st.Flows != f.flows() || st.VMs != fs.racks*fs.perRack*fs.vmsPerHost || st.Rejected != 0 {
		t.Errorf("observed %d flows and %d VMs, %d rejected; reported %d flows and %d VMs", st.Flows, st.VMs, st.Rejected, f.flows(), fs.racks*fs.perRack*fs.vmsPerHost)
	}
	if st.Dropped != 0 || st.Sent == 0 || st.Allocations == 0 {
		t.Errorf("actions: %d sent, %d dropped, %d allocations; want some sent and none dropped", st.Sent, st.Dropped, st.Allocations)
	}
	for _, a := range f.agents {
		a.mu.Lock()
		if a.actions == 0 || a.foreign != 0 {
			t.Errorf("host %s: %d actions, %d allocations for other hosts' flows", a.host, a.actions, a.foreign)
		}
		if len(a.flows) > 0 && len(a.allocs) == 0 {
			t.Errorf("host %s: none of its %d flows allocated", a.host, len(a.flows))
		}
		a.mu.Unlock()
	}

	other := f.agents[1].vms[0]
	remote := f.agents[len(f.agents)-1].vms[0] // a destination across the core
	bad := []struct {
		name string
		flow *controlpb.FlowObs
	}{
		{"another host's source", &controlpb.FlowObs{Src: other, Dst: f.agents[0].vms[0], Used: []float32{1}}},
		{"unknown destination", &controlpb.FlowObs{Src: f.agents[0].vms[0], Dst: "nowhere", Used: []float32{1}}},
		{"vector of the wrong length", &controlpb.FlowObs{Src: f.agents[0].vms[0], Dst: remote, Used: []float32{1, 2, 3, 4, 5, 6, 7}}},
		{"negative", &controlpb.FlowObs{Src: f.agents[0].vms[0], Dst: remote, Backlog: []float32{-1}}},
		{"not finite", &controlpb.FlowObs{Src: f.agents[0].vms[0], Dst: remote, Used: []float32{float32(math.Inf(1))}}},
		{"resource out of range", &controlpb.FlowObs{Src: f.agents[0].vms[0], Dst: remote, Path: []uint32{1 << 20}}},
		{"a link as an appliance", &controlpb.FlowObs{Src: f.agents[0].vms[0], Dst: remote, Path: []uint32{0<<2 | uint32(mech.Appliance)}}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			before := f.c.CentralStats().Rejected
			f.agents[0].extra.Store(&[]*controlpb.FlowObs{tc.flow})
			defer f.agents[0].extra.Store(nil)
			s := f.waitSteps(3, 5*time.Second)
			if s.Rejected <= before {
				t.Errorf("rejected %d before, %d after: the flow was taken", before, s.Rejected)
			}
			if s.Flows != f.flows() {
				t.Errorf("observed %d flows, want the %d good ones", s.Flows, f.flows())
			}
		})
	}

	t.Run("model change", func(t *testing.T) {
		before := f.c.CentralStats()
		ts := &api.TenantSpec{Guarantee: units.Rate(10e6), VMs: []api.VMSpec{{Name: "late-1"}, {Name: "late-2"}}}
		obj := api.Object{APIVersion: api.Version, Kind: api.KindTenant, Metadata: api.Meta{Name: "late"}, Spec: ts}
		if _, err := f.c.Apply(context.Background(), []api.Object{obj}, false); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			s := f.c.CentralStats()
			if s.Builds+s.Updates > before.Builds+before.Updates && s.Revision > before.Revision {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new controller for the new model: before %+v, now %+v", before, s)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if s := f.waitSteps(2, 5*time.Second); s.Flows != f.flows() {
			t.Errorf("after the change: %d flows observed, want %d", s.Flows, f.flows())
		}
	})
}

func TestCompactVectors(t *testing.T) {
	for _, tc := range []struct {
		in      []float32
		n       int
		zeroNil bool
		want    []float64
		ok      bool
	}{
		{nil, 3, false, []float64{0, 0, 0}, true},
		{nil, 3, true, nil, true},
		{[]float32{2}, 3, false, []float64{2, 2, 2}, true},
		{[]float32{1, 2, 3}, 3, false, []float64{1, 2, 3}, true},
		{[]float32{1, 2}, 3, false, nil, false},
		{[]float32{-1}, 2, false, nil, false},
		{[]float32{-1}, 0, false, nil, false}, // a path without links: still checked
		{[]float32{float32(math.NaN())}, 2, false, nil, false},
	} {
		got, ok := expand(tc.in, tc.n, tc.zeroNil)
		if ok != tc.ok || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("expand(%v, %d, %v) = %v, %v; want %v, %v", tc.in, tc.n, tc.zeroNil, got, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   []float64
		want []float32
	}{
		{[]float64{5, 5, 5}, []float32{5}},
		{[]float64{5, 6}, []float32{5, 6}},
		{nil, []float32{}},
	} {
		if got := compact(tc.in); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("compact(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// BenchmarkCentralController is the issue's benchmark: one controller,
// 1,000 simulated agents over real gRPC and mutual TLS on loopback, each
// reporting its flows every second, Pulsar's controller at 1 s over 24,000
// VMs. One iteration is one control interval. Metrics: the mechanism's
// step and the whole interval (gathering, step, sending), control bytes
// per flow per interval up (reports) and down (actions) as protobuf
// sizes and as bytes on the connections (TLS and HTTP/2 included), and
// the process's memory (controller and agents: one process).
//
//	nice -n 10 go test ./controller -run '^$' -bench CentralController -benchtime 10x -timeout 30m
func BenchmarkCentralController(b *testing.B) {
	fs := fleetSpec{racks: 25, perRack: 40, vmsPerHost: 24, tenantSizes: []int{4, 8, 12, 24, 40, 64, 100}, appliances: 4,
		peers: 2, appEvery: 4, interval: time.Second}
	if s := os.Getenv("BULKHEAD_BENCH_HOSTS"); s != "" { // a smaller fleet, e.g. to profile
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n%40 != 0 {
			b.Fatalf("BULKHEAD_BENCH_HOSTS=%q: a positive multiple of 40", s)
		}
		fs.racks = n / 40
	}
	setup := time.Now()
	f := startFleet(b, fs)
	b.Logf("setup: %v for %d hosts, %d VMs, %d flows", time.Since(setup).Round(time.Millisecond), len(f.agents), fs.racks*fs.perRack*fs.vmsPerHost, f.flows())
	f.waitSteps(3, 60*time.Second) // every agent reporting, allocations in force
	var up0, upFlows0, down0, flowB0 int64
	for _, a := range f.agents {
		flowB0 += a.flowBytes.Load()
		up0 += a.upBytes.Load()
		upFlows0 += a.upFlows.Load()
		down0 += a.downBytes.Load()
	}
	read0, written0 := f.conns.read.Load(), f.conns.written.Load()
	s0 := f.c.CentralStats()
	var step, interval, maxStep, maxInterval time.Duration
	flows := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := f.waitSteps(1, 10*time.Second)
		step += s.Step
		interval += s.Interval
		maxStep, maxInterval = max(maxStep, s.Step), max(maxInterval, s.Interval)
		flows += s.Flows
	}
	b.StopTimer()
	s1 := f.c.CentralStats()
	var up, upFlows, down, flowB int64
	for _, a := range f.agents {
		flowB += a.flowBytes.Load()
		up += a.upBytes.Load()
		upFlows += a.upFlows.Load()
		down += a.downBytes.Load()
	}
	read, written := f.conns.read.Load()-read0, f.conns.written.Load()-written0
	steps := float64(s1.Steps - s0.Steps)
	reported := float64(upFlows - upFlows0)
	if s1.Rejected != s0.Rejected || s1.Dropped != s0.Dropped {
		b.Errorf("%d flows rejected, %d actions dropped during the run", s1.Rejected-s0.Rejected, s1.Dropped-s0.Dropped)
	}
	heap := heapInuse()
	heap -= min(f.base, heap)
	n := float64(b.N)
	b.ReportMetric(float64(step.Microseconds())/n/1e3, "step-ms")
	b.ReportMetric(float64(maxStep.Microseconds())/1e3, "max-step-ms")
	b.ReportMetric(float64(interval.Microseconds())/n/1e3, "interval-ms")
	b.ReportMetric(float64(maxInterval.Microseconds())/1e3, "max-interval-ms")
	b.ReportMetric(float64(flows)/n, "flows/step")
	b.ReportMetric(float64(up-up0)/reported, "up-B/flow")
	b.ReportMetric(float64(flowB-flowB0)/reported, "flowobs-B/flow")
	b.ReportMetric(float64(down-down0)/(float64(flows)/n*steps), "down-B/flow")
	b.ReportMetric(float64(s1.Allocations-s0.Allocations)/steps, "allocs/step")
	b.ReportMetric(float64(read)/reported, "wire-up-B/flow")
	b.ReportMetric(float64(written)/(float64(flows)/n*steps), "wire-down-B/flow")
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB") // the fleet's: controller, agents, sessions
	b.ReportMetric(float64(f.heapBefore)/(1<<20), "heap-no-agents-MiB")
	if rss := rssBytes(); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	}
}

// heapInuse is the heap in use after garbage collections (two: pools
// keep their objects for one).
func heapInuse() uint64 {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// rssBytes is the process's resident set (Linux; 0 elsewhere).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
