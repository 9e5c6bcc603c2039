// Package runner is the pipeline behind `bulkhead sim`: load and validate a
// scenario, build its topology, admit its guarantees, run it in the
// simulator under one or more mechanisms, evaluate each run against the
// oracle and write the reports.
package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/report"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// Scenario is a validated, admitted scenario with its topology.
type Scenario struct {
	Spec *spec.Scenario
	Topo *topo.Topology
}

// Load reads, validates and admits a scenario file.
func Load(file string) (*Scenario, error) {
	sc, err := spec.Load(file)
	if err != nil {
		return nil, err
	}
	return Prepare(sc)
}

// Prepare validates and admits a scenario already in memory.
func Prepare(sc *spec.Scenario) (*Scenario, error) {
	tp, err := topo.FromSpec(sc.Topology)
	if err != nil {
		return nil, fmt.Errorf("%s: topology: %w", sc.File, err)
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if err := place.Admit(sc, tp); err != nil {
		return nil, err
	}
	s := &Scenario{Spec: sc, Topo: tp}
	// The scenario's own mechanism: its name, its parameters, and that it
	// can take the tenants that join or leave during the run.
	if _, err := newMechanism(s, ""); err != nil {
		return nil, err
	}
	return s, nil
}

// Reservations returns the scenario's hose reservations (place.Reservations)
// as a central controller sees them.
func Reservations(s *Scenario) ([]mech.Reservation, error) {
	return place.MechReservations(s.Spec, s.Topo)
}

// Options for a run.
type Options struct {
	// Progress receives progress lines on long runs (nil: none).
	Progress io.Writer
	Logger   *slog.Logger
}

// Run simulates the scenario under the named mechanism (the scenario's own
// parameters apply when the name is the scenario's mechanism) and
// evaluates it.
func Run(ctx context.Context, s *Scenario, mechanism string, opts Options) (*eval.Report, error) {
	in, err := Simulate(ctx, s, mechanism, opts)
	if err != nil {
		return nil, err
	}
	rep, err := eval.Evaluate(*in)
	if err != nil {
		return nil, fmt.Errorf("%s: evaluate %s run: %w", s.Spec.File, in.Mechanism, err)
	}
	return rep, nil
}

// Simulate simulates the scenario under the named mechanism, as Run does,
// and returns what the simulator measured.
func Simulate(ctx context.Context, s *Scenario, mechanism string, opts Options) (*eval.Input, error) {
	m, err := newMechanism(s, mechanism)
	if err != nil {
		return nil, err
	}
	res, err := Reservations(s)
	if err != nil {
		return nil, err
	}
	so := sim.Options{Mechanism: m, Progress: opts.Progress, Logger: opts.Logger, Reservations: res}
	// Tenants that join or leave during the run reach the mechanism as
	// model updates at those times.
	if changes := s.Spec.ModelChanges(); len(changes) > 0 {
		so.Model = s.Spec.ModelAt(0)
		for _, t := range changes {
			so.Updates = append(so.Updates, sim.Update{At: t, Model: s.Spec.ModelAt(t)})
		}
	}
	in, err := sim.Run(ctx, s.Spec, s.Topo, so)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Spec.File, err)
	}
	return in, nil
}

// RunAndReport runs the scenario under each mechanism (one: its report in
// dir; several: one sub-directory each plus a comparison in dir). Nothing is
// written unless every run succeeds, and nothing runs unless Check passes
// for every mechanism.
func RunAndReport(ctx context.Context, s *Scenario, mechanisms []string, dir string, plots bool, opts Options) ([]*eval.Report, error) {
	if len(mechanisms) == 0 {
		mechanisms = []string{s.Spec.Mechanism.Name}
	}
	if err := Check(s, mechanisms); err != nil {
		return nil, err
	}
	var reps []*eval.Report
	for _, m := range mechanisms {
		r, err := Run(ctx, s, m, opts)
		if err != nil {
			return nil, err
		}
		reps = append(reps, r)
	}
	existed := true
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		existed = false
	}
	fail := func(err error) ([]*eval.Report, error) {
		if !existed {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	if len(reps) == 1 {
		if err := report.WriteReport(dir, reps[0], plots); err != nil {
			return fail(fmt.Errorf("write report to %s: %w", dir, err))
		}
		return reps, nil
	}
	for _, r := range reps {
		if err := report.WriteReport(filepath.Join(dir, r.Mechanism), r, plots); err != nil {
			return fail(fmt.Errorf("write report to %s: %w", dir, err))
		}
	}
	if err := report.WriteComparison(dir, reps, plots); err != nil {
		return fail(fmt.Errorf("write comparison to %s: %w", dir, err))
	}
	return reps, nil
}
