package agentd

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/controlpb"
)

// TestMechanismChangeFailsBack: when the agent of a new mechanism cannot
// start after the old one stopped, an agent of the previous snapshot runs
// again (never none, unless it cannot start either), and the new snapshot
// is retried until its agent starts. What can be checked without the
// kernel (the agent's own address) is checked before the old one stops.
func TestMechanismChangeFailsBack(t *testing.T) {
	const es, st = "elasticswitch", "static"
	for _, c := range []struct {
		name   string
		devs   []string                               // devices that exist
		broken []string                               // mechanisms whose data path does not open
		next   func(t *testing.T) *controlpb.Snapshot // the new mechanism's snapshot
		opened int                                    // data paths opened by the refusal
		back   string                                 // the mechanism enforcing meanwhile ("": none)
		fix    func(p *paths)                         // what lets it start
		after  []string                               // VMs enforced in the end
	}{
		{"its data path does not open", []string{"a1"}, []string{st}, func(t *testing.T) *controlpb.Snapshot {
			return snapshot(t, 2, st, nil, testModel(tenantA...))
		}, 1, es, func(p *paths) { p.breakFor(st, false) }, []string{"a1"}},
		{"its agent cannot attach a VM", []string{"a1"}, nil, func(t *testing.T) *controlpb.Snapshot {
			return snapshot(t, 2, st, nil, testModel(vms(tenantA, tenantB)...))
		}, 2, es, func(p *paths) { p.create("b1") }, []string{"a1", "b1"}},
		{"nor the previous one", []string{"a1"}, []string{st, es}, func(t *testing.T) *controlpb.Snapshot {
			return snapshot(t, 2, st, nil, testModel(tenantA...))
		}, 0, "", func(p *paths) { p.breakFor(st, false) }, []string{"a1"}},
		{"its own address is not one", []string{"a1"}, nil, func(t *testing.T) *controlpb.Snapshot {
			s := snapshot(t, 2, st, nil, testModel(tenantA...))
			s.Address = "s1.example"
			return s
		}, 0, es, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &paths{devices: map[string]bool{}}
			for _, v := range c.devs {
				p.create(v)
			}
			d := newTestDaemon(t, p, nil)
			takeSettled(t, d, snapshot(t, 1, es, nil, testModel(tenantA...)))
			first, n := p.latest(), p.count()
			for _, m := range c.broken {
				p.breakFor(m, true)
			}
			d.take(context.Background(), c.next(t))
			if r, ok := d.Refused(); !ok || r.Revision != 2 {
				t.Fatalf("refused %+v (%v), want revision 2", r, ok)
			}
			m, rev := d.running()
			if m != c.back || rev != 1 {
				t.Fatalf("running %q at revision %d, want %q at revision 1", m, rev, c.back)
			}
			if got := p.count() - n; got != c.opened {
				t.Errorf("%d data paths opened, want %d", got, c.opened)
			}
			if m != "" && !slices.Equal(p.latest().Attached(), []string{"a1"}) {
				t.Errorf("enforced meanwhile: %v, want a1", p.latest().Attached())
			}
			if c.opened == 0 && m != "" && (p.latest() != first || first.Closed()) {
				t.Error("the running agent was stopped for a snapshot refused before")
			}
			if c.fix == nil {
				return
			}
			c.fix(p)
			retrying(t, d, 10*time.Millisecond)
			waitFor(t, "the new mechanism's agent", func() bool { m, rev := d.running(); return m == st && rev == 2 })
			if _, ok := d.Refused(); ok {
				t.Error("still refused once applied")
			}
			if got := p.latest().Attached(); !slices.Equal(got, c.after) {
				t.Errorf("enforced: %v, want %v", got, c.after)
			}
		})
	}
}
