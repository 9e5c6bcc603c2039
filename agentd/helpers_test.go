package agentd

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"

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

// tenantA is the tests' tenant on s1 and s2.
var tenantA = []vm{{"a1", "a", "s1", "10.0.0.1"}, {"a2", "a", "s2", "10.0.0.2"}}

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
}

// open is Config.Path.
func (p *paths) open(_ *model.Model, mc mech.Mechanism) (datapath.Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken[mc.Name()] {
		return nil, fmt.Errorf("test: the data path for %s does not open", mc.Name())
	}
	h := fake.New(fake.Options{Limiters: true})
	p.opened = append(p.opened, h)
	return &devHost{Host: h, p: p}, nil
}

func (p *paths) hasDevice(vm string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devices == nil || p.devices[vm]
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
