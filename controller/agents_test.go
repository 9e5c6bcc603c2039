package controller

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/bulkhead-dc/bulkhead/units"
	"github.com/bulkhead-dc/bulkhead/wireauth"
)

// pushController is a leading controller on a bbolt store with
// dashboardCluster applied; it does not run: tests push and resync.
func pushController(t *testing.T) *Controller {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := New(Config{Store: st, Elector: st, ID: "http://controller-1", Token: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.setLeading(true)
	if _, err := c.Apply(context.Background(), dashboardCluster(), false); err != nil {
		t.Fatal(err)
	}
	return c
}

// raisedGuarantee is tenant a of dashboardCluster (a1 on s1) with a
// guarantee of 400 Mbps instead of 300.
func raisedGuarantee(t *testing.T) []api.Object {
	t.Helper()
	for _, o := range dashboardCluster() {
		if o.Kind == api.KindTenant && o.Name() == "a" {
			o.Spec.(*api.TenantSpec).Guarantee = units.Rate(4e8)
			return []api.Object{o}
		}
	}
	t.Fatal("no tenant a")
	return nil
}

// sessionOf is a session of host's agent that was sent the host's
// snapshot of the stored cluster (not registered).
func sessionOf(t *testing.T, c *Controller, host string) *session {
	t.Helper()
	snap, view, err := c.snapshotFor(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	return newSession(host, "test", snap, view)
}

// reportAs takes r as the report of host's agent on a session that was
// sent the host's snapshot of the stored cluster.
func reportAs(t *testing.T, c *Controller, host string, r *controlpb.Report) error {
	t.Helper()
	return c.report(sessionOf(t, c, host), r)
}

func register(c *Controller, s *session) {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	c.rt.sessions[s.host] = s
}

func isStale(c *Controller, s *session) bool {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	return s.stale
}

// fill fills s's buffer with actions, as a slow agent's session under
// Pulsar.
func fill(t *testing.T, s *session) {
	t.Helper()
	for range sessionBuffer {
		select {
		case s.send <- &controlpb.ControllerMessage{Msg: &controlpb.ControllerMessage_Actions{Actions: &controlpb.Actions{}}}:
		default:
			t.Fatal("the session's buffer is already full")
		}
	}
}

// drain takes every message queued on s and returns the snapshots.
func drain(s *session) []*controlpb.Snapshot {
	var snaps []*controlpb.Snapshot
	for {
		select {
		case m := <-s.send:
			if snap := m.GetSnapshot(); snap != nil {
				snaps = append(snaps, snap)
			}
		default:
			return snaps
		}
	}
}

// TestPushResend: an agent gets every change of its snapshot exactly
// once — queued at the change's push, or at the next resync when its
// session's buffer was full at the push (then drained), or when its
// session registered (with a snapshot built before the change) after
// the push — and nothing when nothing changed.
func TestPushResend(t *testing.T) {
	for _, tc := range []struct {
		name                string
		full, late, change  bool
		queuedAtPush, total int
	}{
		{name: "queued at the change", change: true, queuedAtPush: 1, total: 1},
		{name: "buffer full at the change", full: true, change: true, queuedAtPush: 0, total: 1},
		{name: "registered while the change was pushed", late: true, change: true, queuedAtPush: 0, total: 1},
		{name: "buffer full, no change", full: true},
		{name: "no change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := pushController(t)
			before, view, err := c.snapshotFor(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			s := newSession("s1", "test", before, view)
			if !tc.late {
				register(c, s)
			}
			if tc.full {
				fill(t, s)
			}
			if tc.change {
				if _, err := c.Apply(ctx, raisedGuarantee(t), false); err != nil {
					t.Fatal(err)
				}
			}
			c.push(ctx)
			got := drain(s)
			if len(got) != tc.queuedAtPush {
				t.Errorf("%d snapshots queued at the push, want %d", len(got), tc.queuedAtPush)
			}
			if tc.late {
				register(c, s)
			}
			for range 2 {
				c.resync(ctx)
				got = append(got, drain(s)...)
			}
			want, _, err := c.snapshotFor(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			if sameSnapshot(before, want) == tc.change {
				t.Fatalf("the change changes s1's snapshot: %v, want %v", !sameSnapshot(before, want), tc.change)
			}
			if len(got) != tc.total {
				t.Fatalf("%d snapshots queued in all, want %d", len(got), tc.total)
			}
			if tc.total > 0 && !sameSnapshot(got[len(got)-1], want) {
				t.Errorf("the agent's latest snapshot (revision %d) is not the store's (revision %d)", got[len(got)-1].Revision, want.Revision)
			}
			if isStale(c, s) {
				t.Error("the session is still stale")
			}
		})
	}
}

// TestSnapshotResentAfterFullSession: a running leader whose agent's
// session is full when a tenant's guarantee rises queues the new
// snapshot within a resync of the session draining, with no further
// change to the store.
func TestSnapshotResentAfterFullSession(t *testing.T) {
	const period = 20 * time.Millisecond
	h := newHarnessWith(t, func(c *Controller) { c.resyncEvery = period })
	if code, _, p := h.apply(dashboardCluster()); code != http.StatusOK {
		t.Fatalf("apply: %d %+v", code, p)
	}
	c := h.c
	ctx := context.Background()
	snap, view, err := c.snapshotFor(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	s := newSession("s1", "test", snap, view)
	register(c, s)
	waitFor(t, func() bool { return !isStale(c, s) }) // a resync has checked it
	fill(t, s)
	code, res, p := h.apply(raisedGuarantee(t))
	if code != http.StatusOK {
		t.Fatalf("apply: %d %+v", code, p)
	}
	// The change's push found the buffer full: the session is stale (or,
	// were the snapshot recorded as sent, its last is the change's).
	waitFor(t, func() bool {
		c.rt.mu.Lock()
		defer c.rt.mu.Unlock()
		return s.stale || s.last.Revision >= res.Revision
	})
	time.Sleep(5 * period) // resyncs while it stays full
	if got := drain(s); len(got) != 0 {
		t.Fatalf("%d snapshots queued on a full session", len(got))
	}
	want, _, err := c.snapshotFor(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if sameSnapshot(snap, want) {
		t.Fatal("the raised guarantee does not change s1's snapshot")
	}
	start := time.Now()
	var got *controlpb.Snapshot
	waitFor(t, func() bool {
		select {
		case m := <-s.send:
			got = m.GetSnapshot()
		default:
		}
		return got != nil
	})
	if !sameSnapshot(got, want) {
		t.Errorf("queued snapshot of revision %d, want the store's (revision %d)", got.Revision, want.Revision)
	}
	t.Logf("queued %v after the session drained (resync every %v)", time.Since(start).Round(time.Millisecond), period)
}

// withTenantC is pushController's cluster with tenant c, whose VM c1 is
// on s1 beside tenant a's a1.
func withTenantC(t *testing.T) *Controller {
	t.Helper()
	c := pushController(t)
	tc := api.Object{APIVersion: api.Version, Kind: api.KindTenant, Metadata: api.Meta{Name: "c"},
		Spec: &api.TenantSpec{Guarantee: units.Rate(1e8), VMs: []api.VMSpec{{Name: "c1", Host: "s1"}}}}
	if _, err := c.Apply(context.Background(), []api.Object{tc}, false); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReportChecked: an agent's report is taken whole when every VM it
// names is one its host's snapshot gave it — its VMs' rates of VMs on the
// host, its pairs from a VM on the host toward a VM of the host's
// tenants, a pair held back by its limiter within one tenant — and
// otherwise refused with an error naming the entry, counted, and nothing
// of it kept: no VM's rates, no limiter, no pair, no last report, nothing
// for the central controller.
func TestReportChecked(t *testing.T) {
	vms := func(names ...string) []*controlpb.VMRates {
		var out []*controlpb.VMRates
		for _, n := range names {
			out = append(out, &controlpb.VMRates{Vm: n, Received: 1e8, Sent: 1e7})
		}
		return out
	}
	pair := func(src, dst string, bound bool) []*controlpb.PairRates {
		return []*controlpb.PairRates{{Src: src, Dst: dst, Rate: 1e8, Limit: 1e8, Bound: bound}}
	}
	flows := []*controlpb.FlowObs{{Src: "a1", Dst: "a3", Used: []float32{1e7}}}
	for _, tc := range []struct {
		name string
		r    *controlpb.Report
		err  string // "": taken
	}{
		{name: "the host's VMs and pairs",
			r: &controlpb.Report{Vms: vms("a1", "c1"), Flows: flows, Stats: &controlpb.AgentStats{Steps: 3, Dropped: map[string]uint64{"auth": 1}},
				Pairs: append(pair("a1", "a3", true), pair("c1", "a1", false)...)}},
		{name: "another host's VM", r: &controlpb.Report{Vms: vms("a1", "a3"), Flows: flows},
			err: `vms[1]: "a3" is not a VM of host s1`},
		{name: "another tenant's VM on another host", r: &controlpb.Report{Vms: vms("b2"), Flows: flows},
			err: `vms[0]: "b2" is not a VM of host s1`},
		{name: "an undeclared VM", r: &controlpb.Report{Vms: vms("ghost"), Flows: flows},
			err: `vms[0]: "ghost" is not a VM of host s1`},
		{name: "a pair from another host's VM", r: &controlpb.Report{Vms: vms("a1"), Pairs: pair("a3", "a1", true), Flows: flows},
			err: `pairs[0] ("a3"->"a1"): the source is not a VM of host s1`},
		{name: "a pair toward a VM of no tenant on the host", r: &controlpb.Report{Pairs: pair("a1", "b2", true), Flows: flows},
			err: `pairs[0] ("a1"->"b2"): the destination is not a VM of the tenants on host s1`},
		{name: "a pair toward an undeclared VM", r: &controlpb.Report{Pairs: pair("a1", "ghost", false), Flows: flows},
			err: `pairs[0] ("a1"->"ghost"): the destination is not a VM of the tenants on host s1`},
		{name: "a limiter across tenants", r: &controlpb.Report{Pairs: pair("a1", "c1", true), Flows: flows},
			err: `pairs[0] ("a1"->"c1"): held back by a pair limiter (bound) across tenants`},
		{name: "a bad rate after good ones", r: &controlpb.Report{Vms: append(vms("a1"), &controlpb.VMRates{Vm: "c1", Received: math.NaN()}), Flows: flows},
			err: `vms[1] (VM "c1"): received and sent must be finite and non-negative`},
		{name: "a negative pair rate", r: &controlpb.Report{Vms: vms("a1"), Pairs: []*controlpb.PairRates{{Src: "a1", Dst: "a3", Rate: -1}}, Flows: flows},
			err: `pairs[0] ("a1"->"a3"): rate, limit and losses must be finite and non-negative`},
		{name: "too many VMs", r: &controlpb.Report{Vms: vms(slices.Repeat([]string{"a1"}, maxReportVMs+1)...), Flows: flows},
			err: `vms: 10001 entries, at most 10000`},
		{name: "too many drop reasons", r: &controlpb.Report{Vms: vms("a1"), Flows: flows, Stats: &controlpb.AgentStats{Dropped: manyReasons(maxStatsReasons + 1)}},
			err: `stats.dropped: 65 reasons, at most 64`},
		{name: "a long name", r: &controlpb.Report{Vms: vms(strings.Repeat("x", 1000)), Flows: flows},
			err: `vms[0]: "` + strings.Repeat("x", 64) + `"… is not a VM of host s1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := withTenantC(t)
			err := reportAs(t, c, "s1", tc.r)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one with %q", err, tc.err)
			}
			// A report that names VMs its host's snapshots do not place
			// there (an agent a snapshot behind may) is not taken, and
			// its session goes on; a malformed one ends it.
			named := strings.Contains(tc.err, "not a VM") || strings.Contains(tc.err, "across tenants")
			if goesOn := errors.As(err, new(notOnHost)); tc.err != "" && goesOn != named {
				t.Errorf("the session goes on after %q: %v, want %v", tc.err, goesOn, named)
			}
			ms := gather(t, c.reg)
			taken, _ := value(ms, "bulkhead_controller_agent_reports_total", "", "")
			refused, _ := value(ms, "bulkhead_controller_agent_reports_refused_total", "", "")
			c.rt.mu.Lock()
			defer c.rt.mu.Unlock()
			c.cen.mu.Lock()
			_, central := c.cen.reports["s1"]
			c.cen.mu.Unlock()
			kept := len(c.rt.vms) > 0 || len(c.rt.bound) > 0 || len(c.rt.pairs) > 0 || c.rt.hosts["s1"] != nil || central
			if tc.err != "" {
				if kept || taken != 0 || refused != 1 {
					t.Errorf("refused, yet kept: VMs %v, limiters %v, pairs %v, host %+v, central %v; counted taken %v, refused %v",
						c.rt.vms, c.rt.bound, c.rt.pairs, c.rt.hosts["s1"], central, taken, refused)
				}
				return
			}
			if len(c.rt.vms) != 2 || c.rt.vms["a1"] == nil || c.rt.vms["c1"] == nil || !c.rt.bound["a3"] || len(c.rt.bound) != 1 ||
				len(c.rt.pairs["s1"].pairs) != 2 || c.rt.hosts["s1"].lastReport.IsZero() || !central || taken != 1 || refused != 0 {
				t.Errorf("taken: VMs %v, limiters %v, pairs %v, host %+v, central %v; counted taken %v, refused %v",
					c.rt.vms, c.rt.bound, c.rt.pairs, c.rt.hosts["s1"], central, taken, refused)
			}
		})
	}
}

func manyReasons(n int) map[string]uint64 {
	m := map[string]uint64{}
	for i := range n {
		m["r"+strconv.Itoa(i)] = 1
	}
	return m
}

// TestReportAcrossModelChange: after a change that takes a VM off a
// host, the host's agent may report it until it reports enforcing the
// new snapshot, and not after; the runtime forgets what it kept of the
// VMs, tenants and hosts no longer declared.
func TestReportAcrossModelChange(t *testing.T) {
	ctx := context.Background()
	c := withTenantC(t)
	s := sessionOf(t, c, "s1")
	register(c, s)
	old := s.last.Revision
	report := func(rev int64, vm string) error {
		return c.report(s, &controlpb.Report{Revision: rev, Vms: []*controlpb.VMRates{{Vm: vm, Received: 1e6}}})
	}
	if err := report(old, "c1"); err != nil {
		t.Fatalf("c1 on the first snapshot: %v", err)
	}
	if _, err := c.Delete(ctx, api.KindTenant, "c"); err != nil {
		t.Fatal(err)
	}
	c.push(ctx)
	snaps := drain(s)
	if len(snaps) != 1 {
		t.Fatalf("%d snapshots queued at the change, want 1", len(snaps))
	}
	cur := snaps[0].Revision
	// The agent has not taken the new snapshot yet: c1 is still its.
	if err := report(old, "c1"); err != nil {
		t.Errorf("c1 reported on the previous snapshot: %v", err)
	}
	if err := report(cur, "c1"); err == nil || !strings.Contains(err.Error(), `"c1" is not a VM of host s1`) {
		t.Errorf("c1 reported on the new snapshot: %v, want refused", err)
	}
	if err := report(cur, "a1"); err != nil {
		t.Fatalf("a1 on the new snapshot: %v", err)
	}
	// It has: reports on the previous snapshot are no longer its.
	if err := report(old, "c1"); err == nil {
		t.Error("c1 reported on the previous snapshot after the new one: taken")
	}

	// What the runtime keeps of what is no longer declared goes.
	_, cl, err := c.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	c.rt.bound["c1"], c.rt.tenants["c"], c.rt.tenants["a"] = true, &tenantCompliance{}, &tenantCompliance{}
	c.rt.pairs["gone"], c.rt.hosts["gone"], c.rt.hosts["gone-connected"] = hostPairs{}, &hostState{}, &hostState{connected: true}
	c.rt.forget(cl)
	if c.rt.vms["c1"] != nil || c.rt.vms["a1"] == nil || c.rt.bound["c1"] || c.rt.tenants["c"] != nil || c.rt.tenants["a"] == nil {
		t.Errorf("after c's deletion: VMs %v, limiters %v, tenants %v", c.rt.vms, c.rt.bound, c.rt.tenants)
	}
	if _, ok := c.rt.pairs["gone"]; ok || c.rt.hosts["gone"] != nil || c.rt.hosts["gone-connected"] == nil || c.rt.hosts["s1"] == nil {
		t.Errorf("undeclared hosts: pairs %v, hosts %v", c.rt.pairs, c.rt.hosts)
	}
	c.rt.forget(nil)
	if len(c.rt.vms)+len(c.rt.tenants)+len(c.rt.pairs) != 0 || len(c.rt.hosts) != 1 {
		t.Errorf("with nothing declared: VMs %v, tenants %v, pairs %v, hosts %v", c.rt.vms, c.rt.tenants, c.rt.pairs, c.rt.hosts)
	}
}

// TestSnapshotTooLarge: an apply that would make a host's snapshot larger
// than an agent receives is refused, naming the host, and stores
// nothing; one that leaves an already too large snapshot no larger, or
// shrinks it, is taken. A too large snapshot in the store (stored before
// the check, or by another writer) is not sent, counted, and not built
// again at every resync; its session's agent keeps its previous model.
func TestSnapshotTooLarge(t *testing.T) {
	ctx := context.Background()
	c := pushController(t)
	for _, o := range dashboardCluster() {
		if o.Kind == api.KindCluster {
			o.Spec.(*api.ClusterSpec).Slots = 8
			if _, err := c.Apply(ctx, []api.Object{o}, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := sessionOf(t, c, "s1")
	register(c, s)
	// Best-effort tenants with a VM on s1 and one on s2, each under the
	// store's 1 MiB an object with a pattern of one pair of long names
	// repeated (421 bytes of s1's and s2's models each): five make a
	// snapshot larger than 4 MiB, four do not.
	const pairs = 2200
	tenant := func(i, pattern int) api.Object {
		name := "big" + strconv.Itoa(i)
		vm := func(k string) string { return name + strings.Repeat("x", 200-len(name)-1) + k }
		return api.Object{APIVersion: api.Version, Kind: api.KindTenant, Metadata: api.Meta{Name: name},
			Spec: &api.TenantSpec{BestEffort: true, VMs: []api.VMSpec{{Name: vm("1"), Host: "s1"}, {Name: vm("2"), Host: "s2"}},
				Pattern: slices.Repeat([]model.Pair{{Src: vm("1"), Dst: vm("2")}}, pattern)}}
	}
	revision := func() int64 {
		_, rev, err := c.cfg.Store.List(ctx, api.KindCluster)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	refused := func(dry bool, objs ...api.Object) {
		t.Helper()
		before := revision()
		_, err := c.Apply(ctx, objs, dry)
		var inv *Invalid
		fes := model.FieldErrors(err)
		if !errors.As(err, &inv) || len(fes) != 1 || fes[0].File != `Host "s1"` || fes[0].Path != "snapshot" ||
			!strings.Contains(fes[0].Msg, "more than the 4194304 an agent receives") {
			t.Fatalf("apply (dry run %v): %v, want refused for s1's snapshot", dry, err)
		}
		if revision() != before {
			t.Fatal("a refused apply stored something")
		}
	}
	five := []api.Object{tenant(1, pairs), tenant(2, pairs), tenant(3, pairs), tenant(4, pairs), tenant(5, pairs)}
	refused(true, five...)
	if _, err := c.Apply(ctx, five[:4], false); err != nil {
		t.Fatalf("four tenants: %v", err)
	}
	c.push(ctx)
	if got := drain(s); len(got) != 1 || snapshotSize(got[0]) <= MaxSnapshotBytes*3/4 {
		t.Fatalf("%d snapshots queued with four tenants, want 1 of more than 3 MiB", len(got))
	}

	// The fifth stored all the same (as before the check): not sent,
	// counted.
	rec, err := encode(&five[4])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cfg.Store.Commit(ctx, revision(), []store.Object{rec}, nil); err != nil {
		t.Fatal(err)
	}
	c.push(ctx)
	if got := drain(s); len(got) != 0 {
		t.Fatalf("%d snapshots queued, want none", len(got))
	}
	counted := func() float64 {
		v, _ := value(gather(t, c.reg), "bulkhead_controller_snapshots_too_large_total", "", "")
		return v
	}
	if n := counted(); n != 1 {
		t.Errorf("%v snapshots counted too large, want 1", n)
	}
	if isStale(c, s) {
		t.Error("the session is stale: resyncs build its snapshot again every second")
	}
	c.resync(ctx)
	if n := counted(); n != 1 {
		t.Errorf("a resync built a too large snapshot again (%v counted)", n)
	}
	var tl *tooLarge
	if _, _, err := c.snapshotFor(ctx, "s1"); !errors.As(err, &tl) || tl.host != "s1" || tl.bytes <= MaxSnapshotBytes {
		t.Errorf("s1's snapshot: %v, want too large", err)
	}

	// An apply that leaves s1's snapshot as large, or shrinks it, is
	// taken; one that grows it is not.
	if _, err := c.Apply(ctx, raisedGuarantee(t), false); err != nil {
		t.Errorf("an apply that leaves s1's snapshot as large: %v", err)
	}
	refused(false, tenant(5, pairs+1))
	if _, err := c.Apply(ctx, []api.Object{tenant(5, 0)}, false); err != nil {
		t.Fatalf("an apply that shrinks s1's snapshot: %v", err)
	}
	c.push(ctx)
	if got := drain(s); len(got) != 1 {
		t.Errorf("%d snapshots queued after the shrinking apply, want 1", len(got))
	}
}

// TestSnapshotSizes: the sizes of the hosts' snapshots from their parts
// are those of the snapshots built — hosts with VMs of several tenants,
// of none, a real appliance (paths), a host's port, mechanism
// parameters.
func TestSnapshotSizes(t *testing.T) {
	plain := dashboardCluster()
	rich := dashboardCluster()
	for i, o := range rich {
		switch sp := o.Spec.(type) {
		case *api.ApplianceSpec:
			c := *sp
			c.Address, c.Port, c.Protocol = "10.8.0.1", 6379, "redis"
			rich[i].Spec = &c
		case *api.HostSpec:
			if o.Name() == "s2" {
				rich[i].Spec = &api.HostSpec{Address: netip.MustParseAddr("fd00::2"), Port: 9000}
			}
		case *api.ClusterSpec:
			c := *sp
			c.Mechanism = api.Mechanism{Name: "elasticswitch", Params: map[string]any{"headroom": 0.1}}
			rich[i].Spec = &c
		}
	}
	rich = append(rich, api.Object{APIVersion: api.Version, Kind: api.KindTenant, Metadata: api.Meta{Name: "c"},
		Spec: &api.TenantSpec{Guarantee: units.Rate(1e8), VMs: []api.VMSpec{{Name: "c1", Host: "s1"}, {Name: "c2", Host: "s1"}, {Name: "c3", Host: "s2"}},
			Pattern: []model.Pair{{Src: "c1", Dst: "c3"}}}})
	for name, objs := range map[string][]api.Object{"plain": plain, "rich": rich} {
		cl, err := api.Build(objs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sizes, err := snapshotSizes(cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(sizes) != len(cl.Hosts) {
			t.Errorf("%s: sizes of %d hosts, want %d", name, len(sizes), len(cl.Hosts))
		}
		for host := range cl.Hosts {
			s, err := buildSnapshot(cl, host, math.MaxInt64, func(peer string) []byte { return wireauth.PairKey(sizingKey, host, peer) })
			if err != nil {
				t.Fatal(err)
			}
			if want := snapshotSize(s); sizes[host] != want {
				t.Errorf("%s: %s's snapshot of %d bytes sized %d", name, host, want, sizes[host])
			}
			if name == "rich" && host == "s1" && len(s.AppliancePaths) != 3 {
				t.Errorf("rich: s1's snapshot has %d appliance paths, want 3 (a1, c1, c2 to kv)", len(s.AppliancePaths))
			}
		}
	}
}
