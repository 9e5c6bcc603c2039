package agentd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/model"
)

// The daemon's tests below drive it without a controller: snapshots are
// handed to it as its session would, on fake data paths.

// vm is a VM of a test model: its name, tenant, host and address; its
// device is NAME-dev.
type vm struct{ name, tenant, host, addr string }

// testModel builds a model of the VMs, each guaranteed 100 Mbit/s each
// way, tenants in order of first appearance.
func testModel(vms ...vm) *model.Model {
	m := &model.Model{}
	idx := map[string]int{}
	for _, v := range vms {
		i, ok := idx[v.tenant]
		if !ok {
			i = len(m.Tenants)
			idx[v.tenant] = i
			m.Tenants = append(m.Tenants, model.Tenant{Name: v.tenant})
		}
		m.Tenants[i].VMs = append(m.Tenants[i].VMs, model.VM{Name: v.name, Tenant: v.tenant, Host: v.host,
			Addrs: []netip.Addr{netip.MustParseAddr(v.addr)}, Interface: v.name + "-dev", In: 100e6, Out: 100e6})
	}
	return m
}

// Tenants of the tests: a is on s1 from the start; b and c come later.
var (
	tenantA = []vm{{"a1", "a", "s1", "10.0.0.1"}, {"a2", "a", "s2", "10.0.0.2"}}
	tenantB = []vm{{"b1", "b", "s1", "10.0.0.3"}, {"b2", "b", "s2", "10.0.0.4"}}
	tenantC = []vm{{"c1", "c", "s1", "10.0.0.5"}, {"c2", "c", "s2", "10.0.0.6"}}
)

func vms(groups ...[]vm) []vm { return slices.Concat(groups...) }

// snapshot is host s1's snapshot of revision rev: model m under the
// mechanism with its parameters.
func snapshot(t *testing.T, rev int64, mechanism string, params map[string]any, m *model.Model) *controlpb.Snapshot {
	t.Helper()
	mj, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	pj, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return &controlpb.Snapshot{Revision: rev, ModelJson: mj, Mechanism: mechanism, ParamsJson: pj, Address: "127.0.0.1", Port: 7471}
}

// paths opens the test's data paths: fake servers with pair limiters on
// which only the VMs whose devices exist can be attached (as a VM the
// hypervisor has not created yet cannot), and whose opening fails for the
// mechanisms told to.
type paths struct {
	mu      sync.Mutex
	opened  []*fake.Host
	devices map[string]bool // the VMs whose devices exist; nil: every VM's
	broken  map[string]bool // mechanisms whose data path does not open
	fail    int             // opens still to fail, whatever the mechanism
}

// open is Config.Path.
func (p *paths) open(_ *model.Model, mc mech.Mechanism) (datapath.Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken[mc.Name()] || p.fail > 0 {
		p.fail = max(0, p.fail-1)
		return nil, fmt.Errorf("test: the data path for %s does not open", mc.Name())
	}
	h := fake.New(fake.Options{Limiters: true})
	p.opened = append(p.opened, h)
	return &devHost{Host: h, p: p}, nil
}

// create makes a VM's device appear.
func (p *paths) create(vm string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.devices[vm] = true
}

// failOpens makes the next n opens fail.
func (p *paths) failOpens(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = n
}

// breakFor makes the data path for a mechanism fail to open, or open
// again.
func (p *paths) breakFor(mechanism string, broken bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken == nil {
		p.broken = map[string]bool{}
	}
	p.broken[mechanism] = broken
}

func (p *paths) hasDevice(vm string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devices == nil || p.devices[vm]
}

// latest is the data path opened last (nil: none).
func (p *paths) latest() *fake.Host {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.opened) == 0 {
		return nil
	}
	return p.opened[len(p.opened)-1]
}

// count is how many data paths were opened.
func (p *paths) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.opened)
}

// devHost is a fake server that attaches only the VMs whose devices
// exist.
type devHost struct {
	*fake.Host
	p *paths
}

func (h *devHost) Attach(v datapath.VM) (datapath.VMPath, error) {
	if !h.p.hasDevice(v.Name) {
		return datapath.VMPath{}, fmt.Errorf("test: VM %s's device %s does not exist", v.Name, v.Device)
	}
	return h.Host.Attach(v)
}

// logs records what the daemon logs.
type logs struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// count is how many records have the message.
func (l *logs) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Message == msg {
			n++
		}
	}
	return n
}

// newTestDaemon makes host s1's daemon on p's data paths, its agents'
// sockets on loopback; set changes its configuration. The daemon ends
// with the test as Run ends it.
func newTestDaemon(t *testing.T, p *paths, set func(*Config)) *Daemon {
	t.Helper()
	cfg := Config{Host: "s1", Controllers: []string{"127.0.0.1:1"}, TLS: &tls.Config{}, Mechanism: all.New, Path: p.open,
		Listen: func(netip.AddrPort) (net.PacketConn, error) { return net.ListenPacket("udp4", "127.0.0.1:0") },
		Logger: slog.New(slog.DiscardHandler)}
	if set != nil {
		set(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.shutdown)
	return d
}

// running says which mechanism the daemon's agent runs, and at which
// revision ("" if none runs).
func (d *Daemon) running() (string, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return "", d.revision
	}
	return d.cur.mech, d.revision
}

// waitFor polls ok until it holds, for at most 10 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// retrying retries the daemon's refused snapshots every `every` until the
// test ends, as Run does.
func retrying(t *testing.T, d *Daemon, every time.Duration) {
	d.retryEvery = every
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.retryRefused(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// takeSettled takes a snapshot and settles the daemon's agent.
func takeSettled(t *testing.T, d *Daemon, s *controlpb.Snapshot) {
	t.Helper()
	d.take(context.Background(), s)
	settle(t, d)
}

// settle waits, if an agent runs, for its first step: an agent handed a
// model before its Run has started reads its VMs unlocked (agent.Agent.Run
// logs how many), a race of the agent package that the tests keep clear
// of.
func settle(t *testing.T, d *Daemon) {
	t.Helper()
	d.mu.Lock()
	cur := d.cur
	d.mu.Unlock()
	if cur != nil {
		waitFor(t, "the agent's first step", func() bool { return cur.a.Steps() > 0 })
	}
}
