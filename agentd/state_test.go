package agentd

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bulkhead-dc/bulkhead/controlpb"
)

// TestStateKept: a daemon with a state directory keeps the snapshot it
// applied and the central controller's actions; a daemon started again
// on it enforces them before any controller answers — the same agent,
// the same revision, the same allocations handed to its enforcers. A
// kept file that is not valid is left out, with nothing started from it.
func TestStateKept(t *testing.T) {
	dir := t.TempDir()
	p := &paths{devices: map[string]bool{"a1": true}}
	state := func(c *Config) { c.StateDir = dir }
	d := newTestDaemon(t, p, state)
	takeSettled(t, d, snapshot(t, 7, "pulsar", nil, testModel(tenantA...)))
	d.takeActions(&controlpb.Actions{Seq: 3, Revision: 7, Last: true, DefaultRate: 50, DefaultBySrc: map[string]float64{"a1": 60},
		Allocations: []*controlpb.FlowAllocation{{Src: "a1", Dst: "a2", Rates: []float32{1000, 2000}}}})
	want := d.Allocations()
	d.shutdown()
	for _, f := range []string{snapshotFile, actionsFile} {
		st, err := os.Stat(filepath.Join(dir, "s1", f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s kept: %v (mode %v), want a file only root reads", f, err, st)
		}
	}

	d2 := newTestDaemon(t, p, state)
	d2.resume(context.Background())
	settle(t, d2)
	if m, rev := d2.running(); m != "pulsar" || rev != 7 {
		t.Fatalf("after a restart without a controller: %q at revision %d, want pulsar at 7", m, rev)
	}
	got := d2.Allocations()
	if !maps.EqualFunc(got.Flows, want.Flows, slices.Equal) || got.DefaultRate != want.DefaultRate || !maps.Equal(got.DefaultBySrc, want.DefaultBySrc) || got.Revision != 7 {
		t.Errorf("actions after the restart %+v, want %+v", got, want)
	}
	if cp := d2.central.Load(); cp == nil {
		t.Error("no enforcer of the central controller's actions after the restart")
	}
	d2.shutdown()

	// Another host's daemon on the same directory does not take s1's.
	d3 := newTestDaemon(t, p, func(c *Config) { c.StateDir, c.Host = dir, "s2" })
	d3.resume(context.Background())
	if m, _ := d3.running(); m != "" || d3.Allocations().Flows != nil {
		t.Errorf("s2's daemon runs %q from s1's kept state", m)
	}
	d3.shutdown()

	for _, c := range []struct {
		name, file, body string
	}{
		{"a snapshot that does not parse", snapshotFile, "not a snapshot"},
		{"actions that do not parse", actionsFile, "{"},
		{"a negative rate", actionsFile, `{"flows":[{"src":"a1","dst":"a2","rates":[-1]}]}`},
		{"a flow with no rate", actionsFile, `{"flows":[{"src":"a1","dst":"a2"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := t.TempDir()
			if err := os.MkdirAll(filepath.Join(bad, "s1"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bad, "s1", c.file), []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			var log lockedBuilder
			d := newTestDaemon(t, p, func(cfg *Config) { cfg.StateDir = bad; cfg.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
			d.resume(context.Background())
			if m, _ := d.running(); m != "" {
				t.Errorf("an agent of %q runs from %s", m, c.file)
			}
			if al := d.Allocations(); al.Flows != nil {
				t.Errorf("actions %+v taken from %s", al, c.file)
			}
			if !strings.Contains(log.String(), "not used") || !strings.Contains(log.String(), c.file) {
				t.Errorf("log %q: want the file named as not used", log.String())
			}
		})
	}
}

// lockedBuilder is a strings.Builder safe for a logger's goroutines.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
