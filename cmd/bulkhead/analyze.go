package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/bulkhead-dc/bulkhead/analysis"
	"github.com/spf13/cobra"
)

func newAnalyzeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "analyze",
		Short: "Print evaluation tables (a paper's, loss tolerance) from simulations",
		Long: `Simulate shipped scenarios under the mechanisms compared and print, as
Markdown, the tables that docs/results.md quotes: a paper's evaluation, or
how compliance holds as control messages are lost.

Unlike "bulkhead sim", which reports each run's per-tenant figures against
the oracle, a paper's tables read the simulator's per-pair samples the way
the paper does: per phase of a scenario, per VM pair, per reducer.

  analyze elasticswitch  ElasticSwitch's Fig. 2, 5, 6, 7, 8, 9, 10, Table 2
                         and §7.4
  analyze loss           compliance against the fraction of control messages
                         lost, for the mechanisms whose agents exchange them`,
	}
	cmd.AddCommand(newAnalyzeElasticSwitchCmd(), newAnalyzeLossCmd())
	return cmd
}

func newAnalyzeElasticSwitchCmd() *cobra.Command {
	var (
		o     analysis.ElasticSwitchOptions
		out   string
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "elasticswitch [-o DIR]",
		Short: "ElasticSwitch's evaluation (§7) on scenarios/elasticswitch-*.yaml",
		Long: `Simulates ElasticSwitch's reproduction scenarios (scenarios/elasticswitch-*.yaml)
under each mechanism and prints, as Markdown, the tables of the paper's
evaluation that docs/results.md quotes, so that the reproduction can be
checked against the paper, and again after any change to a mechanism or to
the simulator:

  fig2             TCP rate per UDP rate, one guaranteed TCP flow against UDP
  fig5-tcp         many-to-one in the core: X (lowest sample) / Y / Jain's
  fig6-udp         index among Y's senders (Fig. 7), per number of Y's senders
  fig5-ecn         (Fig. 5 with TCP, Fig. 6 with UDP blasts, §7.4 with ECN)
  table2           rates and ratio of tenants guaranteed 1:2
  fig8-random      MapReduce: reducers against their guarantee, shuffle time
  fig8-unbalanced  against static reservations, utilization
  fig8-light
  fig9             elephants against short flows to new VM pairs
  fig10            ElasticSwitch's rate-allocation variants (ElasticSwitch
                   only: made when elasticswitch is among the mechanisms)

Per-phase numbers are means over the last half of each phase. Every table
also gives each run's compliance, work conservation and Jain's index. All
tables under the five default mechanisms take about half a minute; progress
goes to stderr. With -o DIR, each table is also written to DIR/<table>.md
(fig10 as fig10-ab.md and fig10-c.md).`,
		Example: `  bulkhead analyze elasticswitch
  bulkhead analyze elasticswitch --mechanisms none,elasticswitch --tables fig2,table2
  bulkhead analyze elasticswitch -o out/es-tables`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Logger = slog.Default()
			if !quiet {
				o.Progress = cmd.ErrOrStderr()
			}
			ts, err := analysis.ElasticSwitchTables(cmd.Context(), o)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w; run from the repository's root or point --scenarios at its scenarios directory", err)
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for i, t := range ts {
				if i > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprint(w, t.Markdown())
			}
			if out == "" {
				return nil
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("write tables: %w", err)
			}
			for _, t := range ts {
				if err := os.WriteFile(filepath.Join(out, t.Name+".md"), []byte(t.Markdown()), 0o644); err != nil {
					return fmt.Errorf("write tables: %w", err)
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d tables written to %s\n", len(ts), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Scenarios, "scenarios", "scenarios", "directory of the elasticswitch-*.yaml scenarios")
	cmd.Flags().StringSliceVar(&o.Mechanisms, "mechanisms", analysis.ESMechanisms(), "mechanisms to compare")
	cmd.Flags().StringSliceVar(&o.Tables, "tables", nil, "tables to make (default all): "+strings.Join(analysis.ElasticSwitchTableNames(), ", "))
	cmd.Flags().StringVarP(&out, "out", "o", "", "also write each table to DIR/<table>.md")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	return cmd
}
