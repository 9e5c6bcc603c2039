package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/bulkhead-dc/bulkhead/analysis"
	"github.com/spf13/cobra"
)

func newAnalyzeLossCmd() *cobra.Command {
	var (
		o     analysis.LossOptions
		cases []string
		out   string
		quiet bool
	)
	var defCases []string
	for _, c := range analysis.LossCases() {
		defCases = append(defCases, c.Scenario+":"+c.Protected)
	}
	var labels []string
	for _, r := range analysis.LossRuns() {
		labels = append(labels, r.Label)
	}
	cmd := &cobra.Command{
		Use:   "loss [-o DIR]",
		Short: "Compliance against the fraction of control messages lost",
		Long: `Simulates scenarios with a protected tenant and an aggressor while a growing
fraction of the control messages between host agents is lost
(network.control_loss, drawn from the scenario's seed), under every
mechanism whose agents exchange messages: ` + strings.Join(labels, ", ") + `.
Seawall sends no messages (its congestion signal is the sender's own losses):
it is the flat reference. Gatekeeper one-shot (repeat: false,
peer_timeout: 0s) is the paper's protocol, one notification per decision and
no heartbeats, as it was before soft state.

Prints, as Markdown, one table per scenario: per loss, per mechanism, the
protected tenant's compliance / the worst tenant's name and compliance.
With -o DIR, also writes DIR/loss.csv (every run, full precision), DIR/loss.md
and one figure per scenario, DIR/loss-<scenario>.png/.svg (compliance
against loss, one colour per mechanism: the protected tenant solid, the worst
tenant dashed). The default sweep (2 scenarios × 10 levels × 5 runs) takes a
few minutes; progress goes to stderr.`,
		Example: `  bulkhead analyze loss -o docs/figures/loss
  bulkhead analyze loss --cases gatekeeper-churn:B --loss 0,0.3,0.6`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Logger = slog.Default()
			if !quiet {
				o.Progress = cmd.ErrOrStderr()
			}
			for _, c := range cases {
				scen, tenant, ok := strings.Cut(c, ":")
				if !ok || scen == "" || tenant == "" {
					return fmt.Errorf("--cases: %q is not SCENARIO:TENANT", c)
				}
				o.Cases = append(o.Cases, analysis.LossCase{Scenario: strings.TrimSuffix(scen, ".yaml"), Protected: tenant})
			}
			points, err := analysis.Loss(cmd.Context(), o)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w; run from the repository's root or point --scenarios at its scenarios directory", err)
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for i, t := range analysis.LossTables(points) {
				if i > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprint(w, t.Markdown())
			}
			if out == "" {
				return nil
			}
			if err := analysis.WriteLoss(out, points); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d runs written to %s (loss.csv, loss.md, loss-<scenario>.png/.svg)\n", len(points), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Scenarios, "scenarios", "scenarios", "directory of the scenario files")
	cmd.Flags().StringSliceVar(&cases, "cases", defCases, "scenarios (file name without .yaml) and their protected tenant, SCENARIO:TENANT")
	cmd.Flags().Float64SliceVar(&o.Levels, "loss", analysis.LossLevels(), "fractions of control messages lost")
	cmd.Flags().StringVarP(&out, "out", "o", "", "also write loss.csv, loss.md and the figures to DIR")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	return cmd
}
