package agentd

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/controlpb"
)

// TestRefusedSnapshotRetried: a snapshot the agent refuses — one with a
// VM whose device the hypervisor has not created yet — is retried until
// it applies, the rest of its changes with it, unless a newer snapshot
// replaces it; meanwhile the previous one is enforced (or none, before
// the first).
func TestRefusedSnapshotRetried(t *testing.T) {
	const es = "elasticswitch"
	for _, c := range []struct {
		name    string
		devices []string                                 // the devices that exist at first
		snaps   func(t *testing.T) []*controlpb.Snapshot // taken in turn
		refused int64                                    // the revision refused after them
		before  []string                                 // VMs enforced meanwhile
		create  []string                                 // devices that appear then
		after   []string                                 // VMs enforced in the end
		rev     int64                                    // the revision applied in the end
	}{
		{"a tenant before its VM's device", []string{"a1"}, func(t *testing.T) []*controlpb.Snapshot {
			return []*controlpb.Snapshot{snapshot(t, 1, es, nil, testModel(tenantA...)), snapshot(t, 2, es, nil, testModel(vms(tenantA, tenantB)...))}
		}, 2, []string{"a1"}, []string{"b1"}, []string{"a1", "b1"}, 2},
		{"the first snapshot before a VM's device", nil, func(t *testing.T) []*controlpb.Snapshot {
			return []*controlpb.Snapshot{snapshot(t, 1, es, nil, testModel(tenantA...))}
		}, 1, nil, []string{"a1"}, []string{"a1"}, 1},
		{"a newer refused snapshot replaces it", []string{"a1"}, func(t *testing.T) []*controlpb.Snapshot {
			return []*controlpb.Snapshot{snapshot(t, 1, es, nil, testModel(tenantA...)), snapshot(t, 2, es, nil, testModel(vms(tenantA, tenantB)...)),
				snapshot(t, 3, es, nil, testModel(vms(tenantA, tenantC)...))}
		}, 3, []string{"a1"}, []string{"b1", "c1"}, []string{"a1", "c1"}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &paths{devices: map[string]bool{}}
			for _, v := range c.devices {
				p.create(v)
			}
			d := newTestDaemon(t, p, nil)
			retrying(t, d, 10*time.Millisecond)
			for _, s := range c.snaps(t) {
				takeSettled(t, d, s)
			}
			r, ok := d.Refused()
			if !ok || r.Revision != c.refused || r.Err == nil {
				t.Fatalf("refused %+v (%v), want revision %d", r, ok, c.refused)
			}
			if m, _ := d.running(); (m != "") != (c.before != nil) {
				t.Fatalf("agent running while refused: %q, want one with %v", m, c.before)
			}
			if c.before != nil && !slices.Equal(p.latest().Attached(), c.before) {
				t.Fatalf("enforced while refused: %v, want %v", p.latest().Attached(), c.before)
			}
			for _, v := range c.create {
				p.create(v)
			}
			waitFor(t, "the refused snapshot applied", func() bool { _, ok := d.Refused(); return !ok })
			if h := p.latest(); !slices.Equal(h.Attached(), c.after) {
				t.Errorf("enforced: %v, want %v", h.Attached(), c.after)
			}
			if m, rev := d.running(); m != es || rev != c.rev {
				t.Errorf("running %q at revision %d, want %s at %d", m, rev, es, c.rev)
			}
		})
	}
}

// TestAppliedSnapshotEndsRetries: a snapshot applied replaces the refused
// one, which is not retried (its VM is never attached, even once its
// device appears).
func TestAppliedSnapshotEndsRetries(t *testing.T) {
	const es = "elasticswitch"
	p := &paths{devices: map[string]bool{"a1": true, "c1": true}}
	d := newTestDaemon(t, p, nil)
	retrying(t, d, 10*time.Millisecond)
	ctx := context.Background()
	takeSettled(t, d, snapshot(t, 1, es, nil, testModel(tenantA...)))
	d.take(ctx, snapshot(t, 2, es, nil, testModel(vms(tenantA, tenantB)...)))
	if _, ok := d.Refused(); !ok {
		t.Fatal("revision 2 applied without b1's device")
	}
	d.take(ctx, snapshot(t, 3, es, nil, testModel(vms(tenantA, tenantC)...)))
	if r, ok := d.Refused(); ok {
		t.Fatalf("still refused after revision 3 applied: %+v", r)
	}
	p.create("b1")
	// Retries go every 10 ms; a tenth of a second is ten chances to
	// apply revision 2 again if it were still kept.
	time.Sleep(100 * time.Millisecond)
	if m, rev := d.running(); m != es || rev != 3 || !slices.Equal(p.latest().Attached(), []string{"a1", "c1"}) {
		t.Errorf("running %q at revision %d, enforcing %v; want revision 3, a1 and c1", m, rev, p.latest().Attached())
	}
}

// TestRefusalLoggedOnce: a snapshot refused again and again is logged
// once per distinct error, not at every retry.
func TestRefusalLoggedOnce(t *testing.T) {
	const es = "elasticswitch"
	const msg = "snapshot not applied; enforcing the previous one and retrying"
	p := &paths{devices: map[string]bool{"a1": true}}
	l := &logs{}
	d := newTestDaemon(t, p, func(c *Config) { c.Logger = slog.New(l) })
	retrying(t, d, time.Millisecond)
	ctx := context.Background()
	takeSettled(t, d, snapshot(t, 1, es, nil, testModel(tenantA...)))
	for i, s := range []*controlpb.Snapshot{
		snapshot(t, 2, es, nil, testModel(vms(tenantA, tenantB)...)), // b1's device missing
		snapshot(t, 3, es, nil, testModel(vms(tenantA, tenantC)...)), // c1's: another error
	} {
		d.take(ctx, s)
		waitFor(t, "ten attempts", func() bool { r, _ := d.Refused(); return r.Revision == s.Revision && r.Attempts >= 10 })
		if n := l.count(msg); n != i+1 {
			t.Errorf("after revision %d's attempts: %d refusals logged, want %d", s.Revision, n, i+1)
		}
	}
	p.create("c1")
	waitFor(t, "revision 3 applied", func() bool { _, rev := d.running(); return rev == 3 })
	if n := l.count("snapshot applied at last"); n != 1 {
		t.Errorf("applied at last logged %d times", n)
	}
}
