package agentd

import (
	"context"
	"net/netip"
	"testing"

	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/units"
)

// kv is the tests' real appliance, behind s2.
var kv = netip.MustParseAddrPort("10.9.9.9:6379")

// withKV is host s1's Pulsar snapshot of tenant a using appliance kv
// (a1's flow to it on a path of three elements).
func withKV(t *testing.T, rev int64) *controlpb.Snapshot {
	m := testModel(tenantA...)
	m.Appliances = []model.Appliance{{Name: "kv", Server: "s2", Model: model.ModelKV, Address: kv.Addr().String(), Port: int(kv.Port()),
		Protocol: model.ProtoRedis, CapacityMin: units.Tokens(1e5), CapacityMax: units.Tokens(1e9)}}
	s := snapshot(t, rev, "pulsar", map[string]any{"interval": "100ms"}, m)
	s.AppliancePaths = []*controlpb.FlowPath{{Src: "a1", Dst: "kv", Path: []uint32{0 << 2, 1 << 2, 2 << 2}}}
	return s
}

// TestFrontSteeringEnds: the steering of the VMs' connections to the
// appliances to the front goes with the front when no front will take
// them again — the mechanism no longer enforces appliances, or no real
// appliance is left to this host's VMs —, whatever Restore says; the
// daemon's end leaves it (connections refused until the next agent's
// front listens) unless Restore.
func TestFrontSteeringEnds(t *testing.T) {
	for _, c := range []struct {
		name    string
		restore bool
		next    func(t *testing.T) *controlpb.Snapshot // nil: the daemon ends
		steered bool
	}{
		{"mechanism without appliances", false, func(t *testing.T) *controlpb.Snapshot {
			return snapshot(t, 2, "elasticswitch", nil, testModel(tenantA...))
		}, false},
		{"last appliance removed", false, func(t *testing.T) *controlpb.Snapshot {
			return snapshot(t, 2, "pulsar", map[string]any{"interval": "100ms"}, testModel(tenantA...))
		}, false},
		{"no flow of the host's VMs to it", false, func(t *testing.T) *controlpb.Snapshot {
			s := withKV(t, 2)
			s.AppliancePaths = nil
			return s
		}, false},
		{"same appliance", false, func(t *testing.T) *controlpb.Snapshot { return withKV(t, 2) }, true},
		{"daemon ends", false, nil, true},
		{"daemon ends, restore", true, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := fake.NewSteering(map[netip.AddrPort]string{kv: "127.0.0.1:1"}, nil)
			d := newTestDaemon(t, &paths{}, func(cfg *Config) {
				cfg.Restore = c.restore
				cfg.Steering = func() (datapath.Steering, error) { return st, nil }
			})
			ctx := context.Background()
			if err := d.apply(ctx, withKV(t, 1)); err != nil {
				t.Fatal(err)
			}
			if s, _ := st.Steered(); len(s[kv.Addr()]) != 1 || st.ListenAddr(kv) == "" {
				t.Fatalf("a1's connections to kv not steered to a front: steered %v, listener %q", s, st.ListenAddr(kv))
			}
			if c.next != nil {
				if err := d.apply(ctx, c.next(t)); err != nil {
					t.Fatal(err)
				}
			} else {
				d.shutdown()
			}
			s, _ := st.Steered()
			if got := len(s[kv.Addr()]) > 0; got != c.steered {
				t.Errorf("steered to the front afterwards: %v (%v), want %v", got, s, c.steered)
			}
			if running := d.front.Load() != nil; running != (c.next != nil && c.steered) {
				t.Errorf("front running: %v", running)
			}
		})
	}
}
