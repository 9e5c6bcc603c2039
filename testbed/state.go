package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/model"
)

// StateDir holds one JSON file per run (PREFIX.json), written before the
// first object of the run is created and removed after its last is gone.
// It is on tmpfs, like the namespaces it describes.
const StateDir = "/run/bulkhead/testbed"

// State describes a run for `testbed status` and `testbed down`.
type State struct {
	Prefix   string    `json:"prefix"`
	Scenario string    `json:"scenario"`
	Created  time.Time `json:"created"`
	// Ephemeral runs belong to a process (`testbed run`, tests): it removes
	// them when it ends, and ReapStale removes them if it died. Others
	// (`testbed up`) stay until `testbed down`.
	Ephemeral  bool        `json:"ephemeral"`
	OwnerPID   int         `json:"owner_pid"`
	OwnerStart uint64      `json:"owner_start"` // the owner's start time (clock ticks after boot): tells a reused PID
	Ready      bool        `json:"ready"`       // fully built
	Scale      float64     `json:"scale"`
	Limiters   bool        `json:"limiters"`
	Schedulers bool        `json:"schedulers,omitempty"`
	Nodes      []StateNode `json:"nodes,omitempty"`
	VMs        []StateVM   `json:"vms,omitempty"`
	// Appliances are the run's real appliances.
	Appliances []StateAppliance `json:"appliances,omitempty"`
	// Model is the declared model the run enforces (Plan.Model: VMs with
	// their addresses and devices).
	Model *model.Model `json:"model,omitempty"`
}

// StateNode is a server or switch of a run.
type StateNode struct {
	Name   string `json:"name"`
	Server bool   `json:"server"`
	NS     string `json:"netns"`
}

// StateVM is a VM of a run.
type StateVM struct {
	Name   string `json:"name"`
	Tenant string `json:"tenant"`
	Server string `json:"server"`
	NS     string `json:"netns"`
	Addr   string `json:"addr"`
}

// StateAppliance is a real appliance of a run.
type StateAppliance struct {
	Name     string `json:"name"`
	Model    string `json:"model"`
	Server   string `json:"server"`
	NS       string `json:"netns"`
	Endpoint string `json:"endpoint"`
	Protocol string `json:"protocol"`
}

func statePath(prefix string) string { return filepath.Join(StateDir, prefix+".json") }

func newState(p *Plan, ephemeral bool) *State {
	s := &State{Prefix: p.Prefix, Scenario: p.Scenario, Created: time.Now().UTC(), Ephemeral: ephemeral,
		OwnerPID: os.Getpid(), OwnerStart: startTime(os.Getpid()), Scale: p.Scale, Limiters: p.Limiters, Schedulers: p.Schedulers,
		Model: p.Model}
	for _, n := range p.Nodes {
		s.Nodes = append(s.Nodes, StateNode{Name: n.Name, Server: n.Server, NS: n.NS})
	}
	for _, v := range p.VMs {
		s.VMs = append(s.VMs, StateVM{Name: v.Name, Tenant: v.Tenant, Server: v.Server, NS: v.NS, Addr: v.Addr.String()})
	}
	for _, a := range p.Appliances {
		s.Appliances = append(s.Appliances, StateAppliance{Name: a.Name, Model: a.Model, Server: a.Server, NS: a.NS,
			Endpoint: a.Endpoint().String(), Protocol: a.Protocol})
	}
	return s
}

func writeState(s *State) error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return fmt.Errorf("testbed state: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("testbed state: %w", err)
	}
	tmp := statePath(s.Prefix) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("testbed state: %w", err)
	}
	if err := os.Rename(tmp, statePath(s.Prefix)); err != nil {
		return fmt.Errorf("testbed state: %w", err)
	}
	return nil
}

func removeState(prefix string) error {
	if err := os.Remove(statePath(prefix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("testbed state: %w", err)
	}
	_ = os.Remove(statePath(prefix) + ".tmp")
	_ = os.Remove(keyPath(prefix))
	_ = os.RemoveAll(daemonDir(prefix))
	_ = os.RemoveAll(applianceDir(prefix))
	removeCgroups(prefix)
	return nil
}

// ReadState reads a run's state file.
func ReadState(prefix string) (*State, error) {
	b, err := os.ReadFile(statePath(prefix))
	if err != nil {
		return nil, fmt.Errorf("testbed state of %s: %w", prefix, err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("testbed state of %s: %w", prefix, err)
	}
	return &s, nil
}

// OwnerAlive reports whether the process that made the run still runs (a
// zombie does not).
func (s *State) OwnerAlive() bool {
	if s.OwnerPID <= 0 {
		return false
	}
	st := startTime(s.OwnerPID)
	return st != 0 && st == s.OwnerStart
}

// startTime returns a process's start time (field 22 of /proc/PID/stat),
// 0 if it does not exist or has exited (a zombie).
func startTime(pid int) uint64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// after "pid (comm)": state is field 3, starttime field 22
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// nsRunRE recognizes the namespaces of a run: PREFIX-n-NODE, PREFIX-v-VM,
// PREFIX-a-APPLIANCE.
var nsRunRE = regexp.MustCompile(`^([a-z][a-z0-9]{1,7})-[nva]-`)

// Status is one run found on the machine.
type Status struct {
	Prefix     string
	State      *State // nil if the run has no state file
	Namespaces []string
	Processes  []int
}

// List returns every run on the machine: those with a state file and those
// with namespaces named like a run's, sorted by prefix.
func List() ([]Status, error) {
	prefixes := map[string]bool{}
	ents, err := os.ReadDir(StateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("testbed: list runs: %w", err)
	}
	for _, e := range ents {
		if p, ok := strings.CutSuffix(e.Name(), ".json"); ok && dataplane.ValidPrefix(p) == nil {
			prefixes[p] = true
		}
	}
	all, err := dataplane.ListNS("")
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	for _, n := range all {
		if m := nsRunRE.FindStringSubmatch(n); m != nil {
			prefixes[m[1]] = true
		}
	}
	var out []Status
	for p := range prefixes {
		st := Status{Prefix: p}
		if s, err := ReadState(p); err == nil {
			st.State = s
		}
		left, err := dataplane.Find(p)
		if err != nil {
			return nil, fmt.Errorf("testbed: %w", err)
		}
		st.Namespaces, st.Processes = left.Namespaces, left.Processes
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
	return out, nil
}

// Down removes everything of the run prefix, whether this process made it
// or not, alive or killed: its processes, namespaces (and so its devices,
// qdiscs, classes and filters) and its state file. Runs built by this
// process must have been closed (Testbed.Down does both).
func Down(ctx context.Context, prefix string) error {
	if err := dataplane.ValidPrefix(prefix); err != nil {
		return fmt.Errorf("testbed down: %w", err)
	}
	if err := dataplane.RequireRoot(); err != nil {
		return fmt.Errorf("testbed down: %w", err)
	}
	err := dataplane.Cleanup(ctx, prefix)
	if err == nil {
		left, ferr := dataplane.Find(prefix)
		switch {
		case ferr != nil:
			err = ferr
		case !left.Empty():
			err = fmt.Errorf("still there: %s", left)
		}
	}
	if err != nil {
		return fmt.Errorf("testbed down %s: %w", prefix, err)
	}
	return removeState(prefix)
}

// DownAll removes every run on the machine that has a state file (List
// also shows namespaces that merely look like a run's; Down removes those
// by prefix) except, unless force, the ephemeral runs whose owner is alive
// (a `testbed run` or a test in progress, which remove their own), which
// it returns as skipped.
func DownAll(ctx context.Context, force bool) (done, skipped []string, err error) {
	runs, err := List()
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, r := range runs {
		if r.State == nil {
			continue
		}
		if !force && r.State.Ephemeral && r.State.OwnerAlive() {
			skipped = append(skipped, r.Prefix)
			continue
		}
		if err := Down(ctx, r.Prefix); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, r.Prefix)
	}
	return done, skipped, errors.Join(errs...)
}

// ReapStale removes the ephemeral runs whose owner process died (a `testbed
// run` or a test that was killed) and returns their prefixes.
func ReapStale(ctx context.Context) ([]string, error) {
	runs, err := List()
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, r := range runs {
		if r.State == nil || !r.State.Ephemeral || r.State.OwnerAlive() {
			continue
		}
		if err := Down(ctx, r.Prefix); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, r.Prefix)
	}
	return done, errors.Join(errs...)
}
