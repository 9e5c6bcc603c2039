package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/spf13/cobra"
)

func newSimCmd() *cobra.Command {
	var (
		out       string
		mechanism string
		compare   string
		noPlots   bool
		quiet     bool
	)
	cmd := &cobra.Command{
		Use:   "sim SCENARIO.yaml -o DIR",
		Short: "Simulate a scenario and write its report and plots",
		Long: `Simulate a scenario in the fluid simulator and evaluate it against the
oracle (hose guarantees and the ideal work-conserving allocation).

Writes DIR/report.json, DIR/summary.md, DIR/timeseries.csv, plots
(DIR/throughput.{png,svg}: per-tenant throughput over time with guarantee
lines; DIR/tenants.{png,svg}: per-tenant means against the ideal) and
DIR/report.html, one self-contained page with interactive charts that
opens offline.

With --compare a,b,c the scenario runs under each mechanism; each run's
report goes to DIR/<mechanism>/ and DIR/comparison.{md,json,png,svg}
compares them.

Mechanisms: ` + strings.Join(all.Names(), ", ") + `.`,
		Example: `  bulkhead sim scenarios/pulsar-fig3-network.yaml -o out/fig3
  bulkhead sim scenarios/pulsar-fig3-network.yaml --compare none,static -o out/cmp`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("-o DIR is required")
			}
			mechs, err := mechanismsFlag(mechanism, compare)
			if err != nil {
				return err
			}
			s, err := runner.Load(args[0])
			if err != nil {
				return err
			}
			opts := runner.Options{Logger: slog.Default()}
			if !quiet {
				opts.Progress = os.Stderr
			}
			reps, err := runner.RunAndReport(cmd.Context(), s, mechs, out, !noPlots, opts)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, r := range reps {
				writeSummary(w, r, "")
			}
			fmt.Fprintf(w, "report written to %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory (created)")
	cmd.Flags().StringVar(&mechanism, "mechanism", "", "run under this mechanism instead of the scenario's")
	cmd.Flags().StringVar(&compare, "compare", "", "comma-separated mechanisms to run and compare")
	cmd.Flags().BoolVar(&noPlots, "no-plots", false, "skip the PNG/SVG plots")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	return cmd
}

// mechanismsFlag returns the mechanisms that --mechanism or --compare
// name (nil: the scenario's own).
func mechanismsFlag(mechanism, compare string) ([]string, error) {
	if mechanism != "" && compare != "" {
		return nil, fmt.Errorf("--mechanism and --compare are exclusive")
	}
	var mechs []string
	switch {
	case compare != "":
		for _, m := range strings.Split(compare, ",") {
			if m = strings.TrimSpace(m); m != "" {
				mechs = append(mechs, m)
			}
		}
	case mechanism != "":
		mechs = []string{mechanism}
	}
	return mechs, nil
}

func newValidateCmd() *cobra.Command {
	var mechanism, compare string
	cmd := &cobra.Command{
		Use:   "validate SCENARIO.yaml...",
		Short: "Check scenario files and their admission without running them",
		Long: `Parse and validate scenario files: every field, cross references
(servers, VMs, tenants), hose-model admission control on every link, and
every check that ` + "`bulkhead sim`" + ` makes before it simulates (runner.Check):
the mechanism's name and parameters, admission for that mechanism, tenants
joining or leaving under a mechanism that can take them, and the oracle's
ideal allocation being computable with every pair active. With --mechanism
or --compare, the scenario is checked under those mechanisms as sim would
run it. Errors name the file, the field path and what was expected; every
problem is reported, and the exit status is 1 if any file is invalid.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mechs, err := mechanismsFlag(mechanism, compare)
			if err != nil {
				return err
			}
			var failed int
			for _, f := range args {
				s, err := runner.Load(f)
				if err == nil {
					err = runner.Check(s, mechs)
				}
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					failed++
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", f)
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d scenario files invalid", failed, len(args))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "", "check under this mechanism instead of the scenario's (as sim --mechanism)")
	cmd.Flags().StringVar(&compare, "compare", "", "comma-separated mechanisms to check (as sim --compare)")
	return cmd
}
