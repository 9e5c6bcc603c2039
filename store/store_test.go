package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/bulkhead-dc/bulkhead/internal/etcdtest"
)

// harness is one backend's store for one test case, with the operations
// the suite needs that are not part of Store.
type harness struct {
	s Store
	// reopen closes s and returns a store on the same data after the
	// backend restarted (bbolt: the file is closed and opened again; etcd:
	// the member is killed and restarted).
	reopen func(t *testing.T) Store
	// compact makes the events up to rev (and possibly later) unavailable
	// to new watches and returns the store to use from then on.
	compact func(t *testing.T, rev int64) Store
	// setLimits changes how far the store's watchers may lag (before any
	// Watch).
	setLimits func(l watchLimits)
}

type backend struct {
	name string
	// setup prepares what the cases share (an etcd cluster) and returns
	// the constructor of a case's harness (a fresh, empty store).
	setup func(t *testing.T) func(t *testing.T) *harness
}

var backends = []backend{
	{"bolt", func(*testing.T) func(*testing.T) *harness { return newBoltHarness }},
	{"etcd", func(t *testing.T) func(*testing.T) *harness {
		c := etcdtest.Start(t, 1)
		return func(t *testing.T) *harness { return newEtcdHarness(t, c) }
	}},
}

func newBoltHarness(t *testing.T) *harness {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := OpenBolt(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	h := &harness{s: b}
	h.reopen = func(t *testing.T) Store {
		if err := h.s.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := OpenBolt(path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		h.s = b
		return b
	}
	// The watch history is in memory and starts at the open.
	h.compact = func(t *testing.T, _ int64) Store { return h.reopen(t) }
	h.setLimits = func(l watchLimits) {
		b := h.s.(*Bolt)
		b.mu.Lock()
		b.limits = l
		b.mu.Unlock()
	}
	return h
}

func newEtcdHarness(t *testing.T, c *etcdtest.Cluster) *harness {
	cfg := EtcdConfig{Endpoints: c.Endpoints(), Prefix: "/test/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"}
	open := func(t *testing.T) *Etcd {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e, err := OpenEtcd(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	h := &harness{s: open(t)}
	h.reopen = func(t *testing.T) Store {
		if err := h.s.Close(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < c.Size(); i++ {
			c.Restart(i)
		}
		h.s = open(t)
		return h.s
	}
	// Compacts past rev, beyond the store's last commit: another write
	// to etcd (outside the prefix, as an election's) moves etcd's
	// revision, and the compaction goes up to it.
	h.compact = func(t *testing.T, rev int64) Store {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cli := h.s.(*Etcd).cli
		var resp *clientv3.PutResponse
		for range 2 {
			var err error
			if resp, err = cli.Put(ctx, "/elsewhere"+cfg.Prefix, "x"); err != nil {
				t.Fatal(err)
			}
		}
		if resp.Header.Revision <= rev {
			t.Fatalf("etcd at %d after a write, not past %d", resp.Header.Revision, rev)
		}
		if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		return h.s
	}
	h.setLimits = func(l watchLimits) { h.s.(*Etcd).limits = l }
	return h
}

func obj(kind, name, data string) Object {
	return Object{Key: Key{Kind: kind, Name: name}, Data: []byte(data)}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCommit(t *testing.T, s Store, base int64, puts []Object, deletes []Key) int64 {
	t.Helper()
	rev, err := s.Commit(ctxT(t), base, puts, deletes)
	if err != nil {
		t.Fatalf("commit at %d: %v", base, err)
	}
	return rev
}

func mustList(t *testing.T, s Store, kind string) ([]Object, int64) {
	t.Helper()
	objs, rev, err := s.List(ctxT(t), kind)
	if err != nil {
		t.Fatalf("list %q: %v", kind, err)
	}
	return objs, rev
}

// unchangedSince checks that a revision the store returned (rev) is not
// before the last commit (last), and that no commit happened after it:
// an empty commit at rev succeeds.
func unchangedSince(t *testing.T, s Store, rev, last int64) {
	t.Helper()
	if rev < last {
		t.Errorf("revision %d is before the last commit's %d", rev, last)
	}
	if _, err := s.Commit(ctxT(t), rev, nil, nil); err != nil {
		t.Errorf("an empty commit at revision %d: %v", rev, err)
	}
}

// describe renders objects as "kind/name=data@rev" for comparisons.
func describe(objs []Object) string {
	var parts []string
	for _, o := range objs {
		parts = append(parts, fmt.Sprintf("%s=%s@%d", o.Key, o.Data, o.Revision))
	}
	return strings.Join(parts, " ")
}

func describeEvents(evs []Event) string {
	var parts []string
	for _, ev := range evs {
		if ev.Object.Revision != ev.Revision {
			parts = append(parts, fmt.Sprintf("[object revision %d != event revision %d]", ev.Object.Revision, ev.Revision))
		}
		parts = append(parts, fmt.Sprintf("%s %s=%s@%d", ev.Type, ev.Object.Key, ev.Object.Data, ev.Revision))
	}
	return strings.Join(parts, " ")
}

// collect reads n events, failing after a timeout.
func collect(t *testing.T, w Watcher, n int) []Event {
	t.Helper()
	var evs []Event
	timeout := time.After(10 * time.Second)
	for len(evs) < n {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch closed after %d of %d events (err %v): %s", len(evs), n, w.Err(), describeEvents(evs))
			}
			evs = append(evs, ev)
		case <-timeout:
			t.Fatalf("%d of %d events within 10s: %s", len(evs), n, describeEvents(evs))
		}
	}
	return evs
}

// expectQuiet checks that no event arrives for a moment.
func expectQuiet(t *testing.T, w Watcher) {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		t.Fatalf("unexpected event %v (open %v, err %v)", describeEvents([]Event{ev}), ok, w.Err())
	case <-time.After(200 * time.Millisecond):
	}
}

// waitClosed drains the watcher until its channel closes and returns the
// events drained.
func waitClosed(t *testing.T, w Watcher) []Event {
	t.Helper()
	var evs []Event
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-timeout:
			t.Fatalf("watch not closed within 10s (%d events drained)", len(evs))
		}
	}
}

type storeCase struct {
	name string
	run  func(t *testing.T, h *harness)
}

var storeCases = []storeCase{
	{"get and list", func(t *testing.T, h *harness) {
		s := h.s
		ctx := ctxT(t)
		if objs, rev := mustList(t, s, ""); len(objs) != 0 {
			t.Fatalf("a new store holds %s", describe(objs))
		} else {
			unchangedSince(t, s, rev, 0)
		}
		// Kinds whose order differs between (kind, name) and the raw
		// key (kind + "/" + name): "A-" sorts after "A", but "A-/" before "A/".
		rev := mustCommit(t, s, 0, []Object{
			obj("Tenant", "b", `{"b":1}`), obj("Tenant", "a", `{"a":1}`),
			obj("Host", "h1", `{}`), obj("A-", "x", "1"), obj("A", "y", "2"), obj("AB", "z", "3"),
		}, nil)
		if rev <= 0 {
			t.Fatalf("commit returned revision %d", rev)
		}
		o, err := s.Get(ctx, Key{"Tenant", "a"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := describe([]Object{o}), fmt.Sprintf(`Tenant/a={"a":1}@%d`, rev); got != want {
			t.Errorf("get: %s, want %s", got, want)
		}
		for _, k := range []Key{{"Tenant", "c"}, {"Nothing", "a"}} {
			if _, err := s.Get(ctx, k); !errors.Is(err, ErrNotFound) {
				t.Errorf("get %s: %v, want ErrNotFound", k, err)
			} else if !strings.Contains(err.Error(), k.String()) {
				t.Errorf("get %s: error %q does not name the key", k, err)
			}
		}
		cases := []struct{ kind, want string }{
			{"Tenant", `Tenant/a={"a":1}@R Tenant/b={"b":1}@R`},
			{"", `A/y=2@R A-/x=1@R AB/z=3@R Host/h1={}@R Tenant/a={"a":1}@R Tenant/b={"b":1}@R`},
			{"A", `A/y=2@R`},
			{"Nothing", ``},
		}
		for _, c := range cases {
			objs, lrev := mustList(t, s, c.kind)
			want := strings.ReplaceAll(c.want, "@R", fmt.Sprintf("@%d", rev))
			if got := describe(objs); got != want {
				t.Errorf("list %q: %s, want %s", c.kind, got, want)
			}
			unchangedSince(t, s, lrev, rev)
		}
	}},
	{"commit", func(t *testing.T, h *harness) {
		s := h.s
		r1 := mustCommit(t, s, 0, []Object{obj("Tenant", "a", "1")}, nil)
		r2 := mustCommit(t, s, r1, []Object{obj("Tenant", "a", "2"), obj("Tenant", "b", "1")}, nil)
		if r2 <= r1 {
			t.Fatalf("revisions %d then %d, want increasing", r1, r2)
		}
		objs, rev := mustList(t, s, "Tenant")
		if got, want := describe(objs), fmt.Sprintf("Tenant/a=2@%d Tenant/b=1@%d", r2, r2); got != want {
			t.Errorf("after two commits: %s, want %s", got, want)
		}
		unchangedSince(t, s, rev, r2)
		// An empty commit changes nothing and still checks its base.
		if got := mustCommit(t, s, r2, nil, nil); got < r2 {
			t.Errorf("empty commit returned %d, before %d", got, r2)
		}
		if _, err := s.Commit(ctxT(t), r1, nil, nil); !errors.Is(err, ErrConflict) {
			t.Errorf("empty commit at a stale base: %v, want ErrConflict", err)
		}
		// The caller's slices are not kept.
		data := []byte("3")
		r3 := mustCommit(t, s, r2, []Object{{Key: Key{"Tenant", "c"}, Data: data}}, nil)
		data[0] = 'X'
		if o, err := s.Get(ctxT(t), Key{"Tenant", "c"}); err != nil || string(o.Data) != "3" || o.Revision != r3 {
			t.Errorf("get after the caller changed its data: %s, %v", describe([]Object{o}), err)
		}
	}},
	{"conflict", func(t *testing.T, h *harness) {
		s := h.s
		base := mustCommit(t, s, 0, []Object{obj("Tenant", "a", "1")}, nil)
		r := mustCommit(t, s, base, []Object{obj("Tenant", "a", "first")}, nil)
		for _, stale := range []int64{base, 0} {
			_, err := s.Commit(ctxT(t), stale, []Object{obj("Tenant", "a", "second"), obj("Tenant", "b", "x")}, []Key{{"Tenant", "c"}})
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("commit at base %d (store at %d): %v, want ErrConflict", stale, r, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(r)) {
				t.Errorf("conflict error %q does not say the current revision %d", err, r)
			}
		}
		objs, rev := mustList(t, s, "")
		if got, want := describe(objs), fmt.Sprintf("Tenant/a=first@%d", r); got != want {
			t.Errorf("after conflicts: %s, want %s", got, want)
		}
		unchangedSince(t, s, rev, r)
	}},
	{"concurrent commits", func(t *testing.T, h *harness) {
		// Writers race from the same base: each commit either wins or
		// conflicts, and the winners' revisions are distinct.
		s := h.s
		const writers, each = 4, 8
		var (
			mu   sync.Mutex
			revs = map[int64]string{}
			wg   sync.WaitGroup
		)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; {
					_, base, err := s.List(ctxT(t), "Counter")
					if err != nil {
						t.Error(err)
						return
					}
					name := fmt.Sprintf("w%d-%d", w, i)
					rev, err := s.Commit(ctxT(t), base, []Object{obj("Counter", name, "x")}, nil)
					if errors.Is(err, ErrConflict) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if other, dup := revs[rev]; dup {
						t.Errorf("revision %d returned to %s and %s", rev, other, name)
					}
					revs[rev] = name
					mu.Unlock()
					i++
				}
			}()
		}
		wg.Wait()
		objs, _ := mustList(t, s, "Counter")
		if len(objs) != writers*each {
			t.Fatalf("%d objects after %d commits", len(objs), writers*each)
		}
		for _, o := range objs {
			if revs[o.Revision] != o.Name {
				t.Errorf("%s at revision %d, which was returned to %q", o.Key, o.Revision, revs[o.Revision])
			}
		}
	}},
	{"delete", func(t *testing.T, h *harness) {
		s := h.s
		r1 := mustCommit(t, s, 0, []Object{obj("Tenant", "a", "1"), obj("Tenant", "b", "1")}, nil)
		r2 := mustCommit(t, s, r1, nil, []Key{{"Tenant", "a"}})
		if r2 <= r1 {
			t.Fatalf("delete returned revision %d after %d", r2, r1)
		}
		if _, err := s.Get(ctxT(t), Key{"Tenant", "a"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("get a deleted object: %v, want ErrNotFound", err)
		}
		// Deleting a missing key is not an error.
		r3 := mustCommit(t, s, r2, nil, []Key{{"Tenant", "a"}, {"Nothing", "x"}})
		objs, rev := mustList(t, s, "")
		if got, want := describe(objs), fmt.Sprintf("Tenant/b=1@%d", r1); got != want {
			t.Errorf("after deletes: %s, want %s", got, want)
		}
		unchangedSince(t, s, rev, r3)
		// Put and delete in one commit.
		r4 := mustCommit(t, s, r3, []Object{obj("Tenant", "c", "1")}, []Key{{"Tenant", "b"}})
		objs, _ = mustList(t, s, "")
		if got, want := describe(objs), fmt.Sprintf("Tenant/c=1@%d", r4); got != want {
			t.Errorf("after put and delete: %s, want %s", got, want)
		}
	}},
	{"invalid", func(t *testing.T, h *harness) {
		s := h.s
		base := mustCommit(t, s, 0, []Object{obj("Tenant", "a", "1")}, nil)
		long := strings.Repeat("x", MaxKeyPartLen+1)
		cases := []struct {
			name    string
			puts    []Object
			deletes []Key
			want    error
		}{
			{"empty kind", []Object{obj("", "a", "")}, nil, ErrInvalidKey},
			{"empty name", []Object{obj("Tenant", "", "")}, nil, ErrInvalidKey},
			{"slash in name", []Object{obj("Tenant", "a/b", "")}, nil, ErrInvalidKey},
			{"slash in kind", nil, []Key{{"Ten/ant", "a"}}, ErrInvalidKey},
			{"reserved kind", []Object{obj("_meta", "a", "")}, nil, ErrInvalidKey},
			{"long name", []Object{obj("Tenant", long, "")}, nil, ErrInvalidKey},
			{"put twice", []Object{obj("Tenant", "b", "1"), obj("Tenant", "b", "2")}, nil, ErrInvalidCommit},
			{"put and delete", []Object{obj("Tenant", "b", "1")}, []Key{{"Tenant", "b"}}, ErrInvalidCommit},
			{"delete twice", nil, []Key{{"Tenant", "a"}, {"Tenant", "a"}}, ErrInvalidCommit},
		}
		for _, c := range cases {
			if _, err := s.Commit(ctxT(t), base, c.puts, c.deletes); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		for _, k := range []Key{{"", "a"}, {"Tenant", "a/b"}, {"_meta", "x"}} {
			if _, err := s.Get(ctxT(t), k); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("get %q: %v, want ErrInvalidKey", k, err)
			}
		}
		if _, _, err := s.List(ctxT(t), "_election"); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("list a reserved kind: %v, want ErrInvalidKey", err)
		}
		objs, rev := mustList(t, s, "")
		if got, want := describe(objs), fmt.Sprintf("Tenant/a=1@%d", base); got != want {
			t.Errorf("after refused commits: %s, want %s", got, want)
		}
		unchangedSince(t, s, rev, base)
	}},
	{"limits", func(t *testing.T, h *harness) {
		s := h.s
		big := func(name string, n int) Object {
			return Object{Key: Key{"Blob", name}, Data: bytes.Repeat([]byte{'x'}, n)}
		}
		many := func(n int) []Object {
			objs := make([]Object, n)
			for i := range objs {
				objs[i] = obj("Many", fmt.Sprintf("o%05d", i), "{}")
			}
			return objs
		}
		// upTo returns objects of n bytes in all (data, kinds, names).
		upTo := func(n int) []Object {
			var objs []Object
			for i := 0; n > 0; i++ {
				o := big(fmt.Sprintf("b%02d", i), 0)
				size := min(n-len(o.Kind)-len(o.Name), MaxObjectBytes)
				o.Data = bytes.Repeat([]byte{'x'}, size)
				n -= size + len(o.Kind) + len(o.Name)
				objs = append(objs, o)
			}
			return objs
		}
		var base int64
		cases := []struct {
			name string
			puts []Object
			ok   bool
		}{
			{"object at the limit", []Object{big("max", MaxObjectBytes)}, true},
			{"object over the limit", []Object{big("over", MaxObjectBytes+1)}, false},
			{"commit of the most objects", many(MaxCommitObjects), true},
			{"commit of too many objects", many(MaxCommitObjects + 1), false},
			{"commit of the most bytes", upTo(MaxCommitBytes), true},
			{"commit of too many bytes", upTo(MaxCommitBytes + 1), false},
		}
		for _, c := range cases {
			rev, err := s.Commit(ctxT(t), base, c.puts, nil)
			switch {
			case c.ok && err != nil:
				t.Errorf("%s: %v", c.name, err)
			case !c.ok && !errors.Is(err, ErrTooLarge):
				t.Errorf("%s: %v, want ErrTooLarge", c.name, err)
			case c.ok:
				base = rev
			}
		}
		if objs, _ := mustList(t, s, "Many"); len(objs) != MaxCommitObjects {
			t.Errorf("%d objects of kind Many, want %d", len(objs), MaxCommitObjects)
		}
		if o, err := s.Get(ctxT(t), Key{"Blob", "max"}); err != nil || len(o.Data) != MaxObjectBytes {
			t.Errorf("get the largest object: %d bytes, %v", len(o.Data), err)
		}
		if _, err := s.Get(ctxT(t), Key{"Blob", "over"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("a refused object was stored: %v", err)
		}
	}},
	{"watch order", func(t *testing.T, h *harness) {
		s := h.s
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		r0 := mustCommit(t, s, 0, []Object{obj("Tenant", "old", "0")}, nil)
		w1, err := s.Watch(ctx, r0)
		if err != nil {
			t.Fatal(err)
		}
		_, listed := mustList(t, s, "")
		w2, err := s.Watch(ctx, listed) // the same events
		if err != nil {
			t.Fatal(err)
		}
		// Puts in the given order, then deletes in the given order.
		var want []Event
		base := r0
		steps := []struct {
			puts    []Object
			deletes []Key
		}{
			{[]Object{obj("Tenant", "b", "1"), obj("Tenant", "a", "1"), obj("Host", "h", "1")}, nil},
			{[]Object{obj("Tenant", "a", "2")}, []Key{{"Tenant", "old"}, {"Tenant", "missing"}}},
			{nil, []Key{{"Tenant", "b"}, {"Host", "h"}}},
		}
		for _, st := range steps {
			rev := mustCommit(t, s, base, st.puts, st.deletes)
			for _, o := range st.puts {
				want = append(want, Event{Type: Put, Object: Object{Key: o.Key, Data: o.Data, Revision: rev}, Revision: rev})
			}
			for _, k := range st.deletes {
				if k.Name == "missing" {
					continue // no event for a missing key
				}
				want = append(want, Event{Type: Delete, Object: Object{Key: k, Revision: rev}, Revision: rev})
			}
			base = rev
		}
		for i, w := range []Watcher{w1, w2} {
			got := collect(t, w, len(want))
			if describeEvents(got) != describeEvents(want) {
				t.Errorf("watcher %d:\n got %s\nwant %s", i, describeEvents(got), describeEvents(want))
			}
			expectQuiet(t, w)
		}
		cancel()
		for i, w := range []Watcher{w1, w2} {
			if evs := waitClosed(t, w); len(evs) != 0 || w.Err() != nil {
				t.Errorf("watcher %d after its context ended: %d more events, err %v, want none and nil", i, len(evs), w.Err())
			}
		}
	}},
	{"watch concurrent commits", func(t *testing.T, h *harness) {
		s := h.s
		_, from := mustList(t, s, "")
		w, err := s.Watch(ctxT(t), from)
		if err != nil {
			t.Fatal(err)
		}
		const writers, each = 3, 10
		var (
			mu   sync.Mutex
			revs = map[string]int64{}
			wg   sync.WaitGroup
		)
		for g := 0; g < writers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; {
					_, base, err := s.List(ctxT(t), "X")
					if err != nil {
						t.Error(err)
						return
					}
					name := fmt.Sprintf("g%d-%d", g, i)
					rev, err := s.Commit(ctxT(t), base, []Object{obj("X", name, name)}, nil)
					if errors.Is(err, ErrConflict) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					revs[name] = rev
					mu.Unlock()
					i++
				}
			}()
		}
		wg.Wait()
		evs := collect(t, w, writers*each)
		var last int64
		for _, ev := range evs {
			if ev.Revision <= last {
				t.Errorf("event at revision %d after %d", ev.Revision, last)
			}
			last = ev.Revision
			if revs[ev.Object.Name] != ev.Revision || string(ev.Object.Data) != ev.Object.Name {
				t.Errorf("event %s, committed at %d", describeEvents([]Event{ev}), revs[ev.Object.Name])
			}
		}
	}},
	{"watch from an old revision", func(t *testing.T, h *harness) {
		s := h.s
		r1 := mustCommit(t, s, 0, []Object{obj("Tenant", "a", "1")}, nil)
		r2 := mustCommit(t, s, r1, []Object{obj("Tenant", "b", "1")}, nil)
		r3 := mustCommit(t, s, r2, nil, []Key{{"Tenant", "a"}})
		cases := []struct {
			from int64
			want string
		}{
			{r1, fmt.Sprintf("put Tenant/b=1@%d delete Tenant/a=@%d", r2, r3)},
			{r2, fmt.Sprintf("delete Tenant/a=@%d", r3)},
			{r3, ""},
		}
		for _, c := range cases {
			w, err := s.Watch(ctxT(t), c.from)
			if err != nil {
				t.Fatalf("watch from %d: %v", c.from, err)
			}
			n := strings.Count(c.want, "@")
			if got := describeEvents(collect(t, w, n)); got != c.want {
				t.Errorf("watch from %d: %s, want %s", c.from, got, c.want)
			}
			expectQuiet(t, w)
		}
	}},
	{"watch a compacted revision", func(t *testing.T, h *harness) {
		s := h.s
		r1 := mustCommit(t, s, 0, []Object{obj("Tenant", "a", "1")}, nil)
		r2 := mustCommit(t, s, r1, []Object{obj("Tenant", "b", "1")}, nil)
		r3 := mustCommit(t, s, r2, []Object{obj("Tenant", "c", "1")}, nil)
		s = h.compact(t, r3)
		w, err := s.Watch(ctxT(t), r1)
		if err == nil {
			evs := waitClosed(t, w)
			err = w.Err()
			if len(evs) != 0 {
				t.Errorf("events from a compacted revision: %s", describeEvents(evs))
			}
		}
		if !errors.Is(err, ErrCompacted) {
			t.Fatalf("watch from compacted revision %d: %v, want ErrCompacted", r1, err)
		}
		// Re-listing gives a revision to watch from and commit at.
		_, listed := mustList(t, s, "")
		w, err = s.Watch(ctxT(t), listed)
		if err != nil {
			t.Fatalf("watch from the revision listed after compaction: %v", err)
		}
		r4 := mustCommit(t, s, listed, []Object{obj("Tenant", "d", "1")}, nil)
		if got, want := describeEvents(collect(t, w, 1)), fmt.Sprintf("put Tenant/d=1@%d", r4); got != want {
			t.Errorf("after compaction: %s, want %s", got, want)
		}
	}},
	{"slow watcher", func(t *testing.T, h *harness) {
		// A watcher that does not read is closed with ErrWatcherTooSlow;
		// commits go on meanwhile. What it got before is a gapless
		// prefix of the commits.
		const limit, commits = 50, 250
		h.setLimits(watchLimits{events: limit, bytes: 1 << 30})
		s := h.s
		_, from := mustList(t, s, "")
		w, err := s.Watch(ctxT(t), from)
		if err != nil {
			t.Fatal(err)
		}
		var revs []int64
		var base int64
		start := time.Now()
		for i := 0; i < commits; i++ {
			base = mustCommit(t, s, base, []Object{obj("X", fmt.Sprint(i), "")}, nil)
			revs = append(revs, base)
		}
		t.Logf("%d commits with a stuck watcher in %v", commits, time.Since(start).Round(time.Millisecond))
		// Give the watcher time to notice (etcd delivers asynchronously).
		time.Sleep(300 * time.Millisecond)
		evs := waitClosed(t, w)
		if !errors.Is(w.Err(), ErrWatcherTooSlow) {
			t.Fatalf("a stuck watcher ended with %v after %d events, want ErrWatcherTooSlow", w.Err(), len(evs))
		}
		if len(evs) >= commits {
			t.Fatalf("the stuck watcher got all %d events", len(evs))
		}
		for i, ev := range evs {
			if ev.Revision != revs[i] {
				t.Fatalf("event %d at revision %d, want %d (a gap)", i, ev.Revision, revs[i])
			}
		}
	}},
	{"reopen keeps data", func(t *testing.T, h *harness) {
		s := h.s
		r1 := mustCommit(t, s, 0, []Object{obj("Tenant", "a", "1"), obj("Host", "h", "2")}, nil)
		r2 := mustCommit(t, s, r1, []Object{obj("Tenant", "b", "3")}, []Key{{"Host", "h"}})
		before, _ := mustList(t, s, "")
		s = h.reopen(t)
		after, rev := mustList(t, s, "")
		if describe(after) != describe(before) {
			t.Fatalf("after reopening: %s, want %s", describe(after), describe(before))
		}
		unchangedSince(t, s, rev, r2)
		if _, err := s.Commit(ctxT(t), r1, []Object{obj("Tenant", "c", "")}, nil); !errors.Is(err, ErrConflict) {
			t.Errorf("commit at a stale base after reopening: %v, want ErrConflict", err)
		}
		w, err := s.Watch(ctxT(t), r2)
		if err != nil {
			t.Fatal(err)
		}
		r3 := mustCommit(t, s, r2, []Object{obj("Tenant", "c", "4")}, nil)
		if r3 <= r2 {
			t.Errorf("revision %d after %d", r3, r2)
		}
		if got, want := describeEvents(collect(t, w, 1)), fmt.Sprintf("put Tenant/c=4@%d", r3); got != want {
			t.Errorf("watch after reopening: %s, want %s", got, want)
		}
	}},
	{"context", func(t *testing.T, h *harness) {
		s := h.s
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		k := Key{"Tenant", "a"}
		if _, err := s.Get(ctx, k); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), k.String()) {
			t.Errorf("get with a cancelled context: %v, want context.Canceled naming the key", err)
		}
		if _, _, err := s.List(ctx, ""); !errors.Is(err, context.Canceled) {
			t.Errorf("list with a cancelled context: %v", err)
		}
		if _, err := s.Commit(ctx, 0, []Object{obj("Tenant", "a", "")}, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("commit with a cancelled context: %v", err)
		}
		if objs, _ := mustList(t, s, ""); len(objs) != 0 {
			t.Errorf("a cancelled commit stored %s", describe(objs))
		}
	}},
	{"close", func(t *testing.T, h *harness) {
		s := h.s
		_, from := mustList(t, s, "")
		w, err := s.Watch(ctxT(t), from)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if evs := waitClosed(t, w); len(evs) != 0 || !errors.Is(w.Err(), ErrClosed) {
			t.Errorf("watcher of a closed store: %d events, err %v, want ErrClosed", len(evs), w.Err())
		}
		if _, err := s.Get(ctxT(t), Key{"Tenant", "a"}); !errors.Is(err, ErrClosed) {
			t.Errorf("get from a closed store: %v", err)
		}
		if _, err := s.Commit(ctxT(t), 0, []Object{obj("Tenant", "a", "")}, nil); !errors.Is(err, ErrClosed) {
			t.Errorf("commit to a closed store: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
	}},
}

// TestStore runs the same cases against both backends.
func TestStore(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			newHarness := b.setup(t)
			for _, c := range storeCases {
				t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
					c.run(t, newHarness(t))
				})
			}
		})
	}
}
