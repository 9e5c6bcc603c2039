package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
	"github.com/spf13/cobra"
)

type placeFlags struct {
	topology, scenario, tenants string
	algorithm                   string
	slots, k, queues            int
	seed                        int64
	weight                      string
	out                         string
}

func newPlaceCmd() *cobra.Command {
	f := &placeFlags{}
	cmd := &cobra.Command{
		Use:   "place (--topology FILE | --scenario FILE) --tenants FILE",
		Short: "Admit and place a stream of tenant requests (Oktopus or QShare)",
		Long: `Place a stream of tenant requests with hose-model guarantees on a
topology with VM slots per server, admitting a tenant only if every link can
carry its hose reservations on the routes the simulator uses (ECMP by VM
pair, --seed), on top of what is already reserved.

  --topology FILE   a topology: a file with a topology: section (a scenario,
                    whose other fields are ignored) or the section itself
                    (kind: fat-tree, fat_tree: {k: 16, link: 10Gbps})
  --scenario FILE   a scenario: its topology, its seed, and its tenants,
                    whose fixed placements are reserved first
  --tenants FILE    the requests, YAML or JSON: a list of
                      {name, vms: N | [{name, guarantee, in, out}],
                       guarantee | in/out, best_effort, arrival, departure, wcs}
                    in order of arrival (ties in file order); a departure
                    releases the tenant's slots and bandwidth

Algorithms (docs/placement.md):
  oktopus  the smallest subtree that fits (server, rack, pod, whole tree),
           the first in topology order, filled greedily
  qshare   QShare Alg. 1: every group of the lowest feasible layer laid out
           with the least bandwidth, elected by a cost that weighs bandwidth
           against the tenants already on the ports (queue occupation) by
           the datacenter load; k shortest paths on random graphs

Prints every arrival (accepted with its layout, or rejected with the
resource that ran out), departures, the final per-link reservations and the
tenants per port; with -o FILE the same as JSON (written whole, or not at
all), and a one-line summary on stdout. Invalid input is reported with the
file, line and field, and a non-zero exit.`,
		Example: `  bulkhead place --topology topo.yaml --tenants tenants.yaml
  bulkhead place --scenario scenarios/pulsar-fig3-network.yaml --tenants more.json --algorithm qshare -o placed.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlace(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.topology, "topology", "", "topology file (a topology: section, or the section itself)")
	fl.StringVar(&f.scenario, "scenario", "", "scenario file: topology, seed and tenants already placed")
	fl.StringVar(&f.tenants, "tenants", "", "tenant requests, YAML or JSON (required)")
	fl.StringVar(&f.algorithm, "algorithm", string(place.Oktopus), "oktopus or qshare")
	fl.IntVar(&f.slots, "slots", place.DefaultSlots, "VM slots per server")
	fl.Int64Var(&f.seed, "seed", spec.DefaultSeed, "ECMP seed of the routes (with --topology; a scenario has its own)")
	fl.IntVar(&f.k, "k", place.DefaultK, "shortest paths per server on topologies that are not trees (qshare and oktopus)")
	fl.IntVar(&f.queues, "queues", 8, "queues per switch port, for the port report")
	fl.StringVar(&f.weight, "bandwidth-weight", "load", `qshare: weight of the bandwidth cost against queue occupation, a number in [0, 1] or "load" (the datacenter load)`)
	fl.StringVarP(&f.out, "out", "o", "", "write the result as JSON to this file (- for stdout)")
	return cmd
}

func runPlace(cmd *cobra.Command, f *placeFlags) error {
	// Flags.
	switch {
	case f.topology == "" && f.scenario == "":
		return errors.New("give --topology FILE or --scenario FILE")
	case f.topology != "" && f.scenario != "":
		return errors.New("--topology and --scenario are exclusive")
	case f.tenants == "":
		return errors.New("--tenants FILE is required")
	case f.slots < 1:
		return fmt.Errorf("--slots: expected at least 1, got %d", f.slots)
	case f.k < 1:
		return fmt.Errorf("--k: expected at least 1, got %d", f.k)
	case f.queues < 1:
		return fmt.Errorf("--queues: expected at least 1, got %d", f.queues)
	case f.scenario != "" && cmd.Flags().Changed("seed"):
		return errors.New("--seed: a scenario's own seed is used with --scenario")
	}
	alg := place.Algorithm(f.algorithm)
	if alg != place.Oktopus && alg != place.QShare {
		return fmt.Errorf("--algorithm: expected oktopus or qshare, got %q", f.algorithm)
	}
	var weight func(float64) float64
	if f.weight != "load" {
		w, err := strconv.ParseFloat(f.weight, 64)
		if err != nil || !(w >= 0 && w <= 1) {
			return fmt.Errorf("--bandwidth-weight: expected a number in [0, 1] or \"load\", got %q", f.weight)
		}
		weight = func(float64) float64 { return w }
	}

	// Inputs.
	var (
		top  *topo.Topology
		sc   *spec.Scenario
		seed = f.seed
		t    spec.Topology
	)
	if f.scenario != "" {
		s, err := spec.Load(f.scenario)
		if err != nil {
			return err
		}
		if top, err = topo.FromSpec(s.Topology); err != nil {
			return fmt.Errorf("%s: %w", f.scenario, err)
		}
		if err := place.Admit(s, top); err != nil {
			return err
		}
		sc, seed, t = s, s.Seed, s.Topology
	} else {
		data, err := os.ReadFile(f.topology)
		if err != nil {
			return fmt.Errorf("--topology: %w", err)
		}
		if t, err = spec.ParseTopology(data, f.topology); err != nil {
			return err
		}
		if top, err = topo.FromSpec(t); err != nil {
			return fmt.Errorf("%s: %w", f.topology, err)
		}
	}
	data, err := os.ReadFile(f.tenants)
	if err != nil {
		return fmt.Errorf("--tenants: %w", err)
	}
	reqs, err := place.ParseRequests(data, f.tenants)
	if err != nil {
		return err
	}

	// Placement.
	p, err := place.NewPlacer(top, place.Options{Algorithm: alg, Slots: f.slots, Seed: seed, K: f.k, BandwidthWeight: weight})
	if err != nil {
		return err
	}
	var reserved []string
	if sc != nil {
		for i := range sc.Tenants {
			if err := p.Reserve(&sc.Tenants[i]); err != nil {
				return &model.FieldError{File: sc.File, Path: fmt.Sprintf("tenants[%d]", i),
					Msg: fmt.Sprintf("cannot reserve with --slots %d: %v", f.slots, err)}
			}
			reserved = append(reserved, sc.Tenants[i].Name)
		}
	}
	events, err := place.Run(p, reqs)
	if err != nil {
		return err
	}
	rep := place.BuildReport(p, events, place.ReportOptions{Algorithm: alg, Topology: t, Slots: f.slots, Seed: seed, Queues: f.queues, Reserved: reserved})

	// Output.
	w := cmd.OutOrStdout()
	if f.out == "" {
		return rep.WriteTable(w)
	}
	js, err := rep.JSON()
	if err != nil {
		return err
	}
	if f.out == "-" {
		_, err = w.Write(js)
		return err
	}
	if err := writeFileAtomic(f.out, js); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s; written to %s\n", rep.Summary.Line(), f.out)
	return nil
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it, so that path holds either the whole result or what it held before.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("-o: %w", err)
	}
	return nil
}
