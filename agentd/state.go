package agentd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// What the daemon keeps on disk (Config.StateDir), so that an agent that
// starts again enforces what its predecessor enforced before any
// controller answers: the last snapshot it applied and the central
// controller's last complete actions. Without them a host whose agent
// restarts while the controllers are unreachable runs no agent at all
// (the kernel's limits stay, but nothing adapts them, and an appliance's
// front does not listen), and a new front admits its flows unlimited
// until the controller's next step.

const (
	snapshotFile = "snapshot.pb"
	actionsFile  = "actions.json"
	// maxStateFile bounds what is read back: a snapshot is at most what
	// an agent receives (the controller's MaxSnapshotBytes, gRPC's 4 MiB
	// default), and actions at most MaxAllocations flows.
	maxStateFile = 8 << 20
)

// keptActions is Allocations as kept on disk.
type keptActions struct {
	Seq          uint64             `json:"seq"`
	Revision     int64              `json:"revision"`
	Flows        []keptFlow         `json:"flows"`
	DefaultRate  float64            `json:"default_rate"`
	DefaultBySrc map[string]float64 `json:"default_by_src,omitempty"`
}

type keptFlow struct {
	Src   string    `json:"src"`
	Dst   string    `json:"dst"`
	Rates []float64 `json:"rates"`
}

// stateDir is where the host's state is kept: a directory of the host's
// name in Config.StateDir, so that what one host kept is never taken for
// another's (New checks that the name is one directory's).
func (d *Daemon) stateDir() string { return filepath.Join(d.cfg.StateDir, d.cfg.Host) }

// writeState replaces file name in the state directory with b, whole or
// not at all (a file beside it renamed over it), readable by root only
// (a snapshot holds the keys of the host's peers).
func (d *Daemon) writeState(name string, b []byte) error {
	dir := d.stateDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	f, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	_, err = f.Write(b)
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("state directory: keep %s: %w", name, err)
	}
	return nil
}

// readState reads file name of the state directory (nil, nil: there is
// none).
func (d *Daemon) readState(name string) ([]byte, error) {
	path := filepath.Join(d.stateDir(), name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxStateFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxStateFile)
	}
	return b, nil
}

// keepSnapshot keeps s, the snapshot just applied (nothing without a
// state directory); a failure is logged once per distinct error.
func (d *Daemon) keepSnapshot(s *controlpb.Snapshot) {
	if d.cfg.StateDir == "" {
		return
	}
	b, err := proto.Marshal(s)
	if err == nil {
		err = d.writeState(snapshotFile, b)
	}
	d.stateErr(err)
}

// keepActions keeps a copy of the actions in force (nothing without a
// state directory).
func (d *Daemon) keepActions(a Allocations) {
	if d.cfg.StateDir == "" {
		return
	}
	k := keptActions{Seq: a.Seq, Revision: a.Revision, DefaultRate: a.DefaultRate, DefaultBySrc: a.DefaultBySrc}
	for id, r := range a.Flows {
		k.Flows = append(k.Flows, keptFlow{Src: id.Src, Dst: id.Dst, Rates: r})
	}
	b, err := json.Marshal(k)
	if err == nil {
		err = d.writeState(actionsFile, b)
	}
	d.stateErr(err)
}

// keepActionsEvery is how often, at most, the actions in force are kept:
// a central controller steps every second, and what a restarted agent
// finds may be that much older.
const keepActionsEvery = 10 * time.Second

// actionsDue says whether the actions should be kept now (and notes that
// they are).
func (d *Daemon) actionsDue() bool {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	now := time.Now()
	if !d.actionsKept.IsZero() && now.Sub(d.actionsKept) < keepActionsEvery {
		return false
	}
	d.actionsKept = now
	return true
}

// stateErr logs a failure to keep the state once per distinct error.
func (d *Daemon) stateErr(err error) {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != d.stateLogged && err != nil {
		d.log.Warn("what the agent enforces is not kept on disk: a restart without a controller will not find it", "err", err)
	}
	d.stateLogged = msg
}

// resume starts enforcing what the state directory keeps, before any
// controller answers: the actions first (so that the enforcers the
// snapshot's agent makes are given them), then the snapshot, applied as
// one from a controller would be (retried if refused). A file that
// cannot be read or is not valid is logged and left out.
func (d *Daemon) resume(ctx context.Context) {
	if d.cfg.StateDir == "" {
		return
	}
	if a, err := d.readActions(); err != nil {
		d.log.Warn("kept actions not used", "err", err)
	} else if a != nil {
		d.actMu.Lock()
		d.actions = *a
		d.actMu.Unlock()
	}
	b, err := d.readState(snapshotFile)
	if err != nil || b == nil {
		if err != nil {
			d.log.Warn("kept snapshot not used", "err", err)
		}
		return
	}
	s := &controlpb.Snapshot{}
	if err := proto.Unmarshal(b, s); err != nil {
		d.log.Warn("kept snapshot not used", "file", filepath.Join(d.stateDir(), snapshotFile), "err", err)
		return
	}
	d.log.Info("enforcing the kept snapshot until a controller answers", "revision", s.Revision)
	d.take(ctx, s)
}

// readActions reads the kept actions (nil, nil: none), checked as
// takeActions checks a controller's.
func (d *Daemon) readActions() (*Allocations, error) {
	b, err := d.readState(actionsFile)
	if err != nil || b == nil {
		return nil, err
	}
	path := filepath.Join(d.stateDir(), actionsFile)
	var k keptActions
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(k.Flows) > MaxAllocations {
		return nil, fmt.Errorf("%s: %d flows, more than %d", path, len(k.Flows), MaxAllocations)
	}
	ok := func(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }
	if !ok(k.DefaultRate) {
		return nil, fmt.Errorf("%s: default_rate %v: want a finite rate ≥ 0", path, k.DefaultRate)
	}
	for src, r := range k.DefaultBySrc {
		if !ok(r) {
			return nil, fmt.Errorf("%s: default_by_src[%q] %v: want a finite rate ≥ 0", path, src, r)
		}
	}
	a := &Allocations{Seq: k.Seq, Revision: k.Revision, Flows: make(map[mech.FlowID][]float64, len(k.Flows)),
		DefaultRate: k.DefaultRate, DefaultBySrc: k.DefaultBySrc}
	for i, f := range k.Flows {
		if len(f.Rates) == 0 {
			return nil, fmt.Errorf("%s: flows[%d] (%s->%s): no rate", path, i, f.Src, f.Dst)
		}
		for _, x := range f.Rates {
			if !ok(x) {
				return nil, fmt.Errorf("%s: flows[%d] (%s->%s): rate %v: want a finite rate ≥ 0", path, i, f.Src, f.Dst, x)
			}
		}
		a.Flows[mech.FlowID{Src: f.Src, Dst: f.Dst}] = f.Rates
	}
	return a, nil
}
