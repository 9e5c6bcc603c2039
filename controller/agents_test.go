package controller

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/bulkhead-dc/bulkhead/units"
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
			before, err := c.snapshotFor(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			s := newSession("s1", "test", before)
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
			want, err := c.snapshotFor(ctx, "s1")
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
	snap, err := c.snapshotFor(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	s := newSession("s1", "test", snap)
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
	want, err := c.snapshotFor(ctx, "s1")
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
