package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBoltHistory: the watch history keeps whole commits within its limits
// (always the newest commit), so a watch from a revision is served or
// refused with ErrCompacted exactly as far back as the history reaches.
func TestBoltHistory(t *testing.T) {
	put := func(names ...string) []Object {
		var objs []Object
		for _, n := range names {
			objs = append(objs, obj("X", n, n))
		}
		return objs
	}
	type commit struct {
		puts    []Object
		deletes []Key
	}
	cases := []struct {
		name    string
		limits  watchLimits
		commits []commit
		// servable[i]: whether a watch from the revision after commit i
		// (-1: before the first) is served.
		servable map[int]bool
	}{
		{"all kept", watchLimits{events: 10, bytes: 1 << 20},
			[]commit{{puts: put("a")}, {puts: put("b")}, {puts: put("c")}},
			map[int]bool{-1: true, 0: true, 1: true, 2: true}},
		{"oldest commits dropped", watchLimits{events: 2, bytes: 1 << 20},
			[]commit{{puts: put("a")}, {puts: put("b")}, {puts: put("c")}},
			map[int]bool{-1: false, 0: true, 1: true, 2: true}},
		{"the newest commit kept whole beyond the limit", watchLimits{events: 1, bytes: 1 << 20},
			[]commit{{puts: put("a")}, {puts: put("b", "c", "d")}},
			map[int]bool{-1: false, 0: true, 1: true}},
		{"a commit without events", watchLimits{events: 1, bytes: 1 << 20},
			[]commit{{puts: put("a")}, {deletes: []Key{{"X", "missing"}}}},
			map[int]bool{-1: true, 0: true, 1: true}},
		{"a commit without events trims all", watchLimits{events: 1, bytes: 1 << 20},
			[]commit{{puts: put("a", "b")}, {deletes: []Key{{"X", "missing"}}}},
			map[int]bool{-1: false, 0: true, 1: true}},
		{"bytes limit", watchLimits{events: 100, bytes: 2 * eventBytes(Event{Object: obj("X", "a", "a")})},
			[]commit{{puts: put("a")}, {puts: put("b")}, {puts: put("c")}},
			map[int]bool{-1: false, 0: true, 1: true, 2: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := openBolt(filepath.Join(t.TempDir(), "state.db"), time.Second, c.limits)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			revs := map[int]int64{-1: 0}
			var base int64
			for i, cm := range c.commits {
				base = mustCommit(t, b, base, cm.puts, cm.deletes)
				revs[i] = base
			}
			for i, ok := range c.servable {
				w, err := b.Watch(ctxT(t), revs[i])
				switch {
				case ok && err != nil:
					t.Errorf("watch after commit %d (revision %d): %v", i, revs[i], err)
				case !ok && !errors.Is(err, ErrCompacted):
					t.Errorf("watch after commit %d (revision %d): %v, want ErrCompacted", i, revs[i], err)
				case ok:
					var want []string
					for j := i + 1; j < len(c.commits); j++ {
						for _, o := range c.commits[j].puts {
							want = append(want, fmt.Sprintf("put %s=%s@%d", o.Key, o.Data, revs[j]))
						}
					}
					got := collect(t, w, len(want))
					var gotS []string
					for _, ev := range got {
						gotS = append(gotS, describeEvents([]Event{ev}))
					}
					if fmt.Sprint(gotS) != fmt.Sprint(want) {
						t.Errorf("watch after commit %d: %v, want %v", i, gotS, want)
					}
				}
			}
		})
	}
}

func TestOpenBoltErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a bbolt file "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, path string }{
		{"not a bbolt file", garbage},
		{"missing directory", filepath.Join(dir, "missing", "state.db")},
		{"a directory", dir},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			b, err := OpenBolt(c.path, 100*time.Millisecond)
			if err == nil {
				_ = b.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.path) {
				t.Errorf("error %q does not name %s", err, c.path)
			}
		})
	}
}
