package agentd

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/model"
)

// withPattern is a model of the VMs whose tenants declare that each VM on
// s1 sends to its tenant's VM on s2 (what static reserves for).
func withPattern(vs ...vm) *model.Model {
	m := testModel(vs...)
	for i := range m.Tenants {
		t := &m.Tenants[i]
		t.Pattern = []model.Pair{{Src: t.VMs[0].Name, Dst: t.VMs[1].Name}}
	}
	return m
}

// TestStaticMechanismRestarts: under a mechanism whose agents cannot take
// a new model (static, seawall: drive.ErrStaticEnv), a tenant admitted
// later is enforced: the agent restarts with the new model, as for a
// mechanism change (the old one leaves its settings, the new one's data
// path adopts them). If the new agent cannot start, the previous one runs
// again until it can.
func TestStaticMechanismRestarts(t *testing.T) {
	b1b2 := datapath.Pair{Src: netip.MustParseAddr("10.0.0.3"), Dst: netip.MustParseAddr("10.0.0.4")}
	for _, c := range []struct {
		mech    string
		reserve bool // b1->b2 gets its reservation
	}{
		{"static", true},
		{"seawall", false},
	} {
		t.Run(c.mech, func(t *testing.T) {
			p := &paths{} // every VM's device exists
			d := newTestDaemon(t, p, nil)
			takeSettled(t, d, snapshot(t, 1, c.mech, nil, withPattern(tenantA...)))
			first := p.latest()

			// Tenant b is admitted: its VM b1 is enforced by a new agent.
			takeSettled(t, d, snapshot(t, 2, c.mech, nil, withPattern(vms(tenantA, tenantB)...)))
			if r, ok := d.Refused(); ok {
				t.Fatalf("revision 2 refused: %v", r.Err)
			}
			if m, rev := d.running(); m != c.mech || rev != 2 {
				t.Fatalf("running %q at revision %d, want %s at 2", m, rev, c.mech)
			}
			h := p.latest()
			if h == first || !first.Closed() || !slices.Equal(h.Attached(), []string{"a1", "b1"}) {
				t.Fatalf("after tenant b: a new agent %v, the old one's data path closed %v, enforcing %v; want a new one enforcing a1 and b1",
					h != first, first.Closed(), h.Attached())
			}
			if c.reserve {
				waitFor(t, "b1->b2's reservation", func() bool { _, ok := h.Limit(b1b2); return ok })
			}

			// Tenant c is admitted, but the new agent's data path does not
			// open: the agent of revision 2 starts again, and revision 3's
			// at a retry.
			n := p.count()
			p.failOpens(1)
			d.take(context.Background(), snapshot(t, 3, c.mech, nil, withPattern(vms(tenantA, tenantB, tenantC)...)))
			if r, ok := d.Refused(); !ok || r.Revision != 3 {
				t.Fatalf("refused %+v (%v), want revision 3", r, ok)
			}
			if m, rev := d.running(); m != c.mech || rev != 2 || p.count() != n+1 || !slices.Equal(p.latest().Attached(), []string{"a1", "b1"}) {
				t.Fatalf("running %q at revision %d enforcing %v on %d new data paths; want revision 2 enforcing a1 and b1 on one",
					m, rev, p.latest().Attached(), p.count()-n)
			}
			settle(t, d)
			retrying(t, d, 10*time.Millisecond)
			waitFor(t, "revision 3's agent", func() bool { _, rev := d.running(); return rev == 3 })
			if got := p.latest().Attached(); !slices.Equal(got, []string{"a1", "b1", "c1"}) {
				t.Errorf("enforcing %v, want a1, b1 and c1", got)
			}
		})
	}
}
