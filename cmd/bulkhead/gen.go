package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/scengen"
	"github.com/bulkhead-dc/bulkhead/units"
	"github.com/spf13/cobra"
)

func newGenCmd() *cobra.Command {
	var (
		seed      int64
		count     int
		kind      string
		size      string
		duration  string
		mechanism string
		out       string
		joins     bool
	)
	cmd := &cobra.Command{
		Use:   "gen --seed N [--kind network|appliance|mixed] [-o FILE]",
		Short: "Generate random valid scenarios",
		Long: `Generate a random scenario that validate accepts (admission included):
a topology (two-tier with or without oversubscription, or a small
fat-tree, at 1 or 10 Gbps), tenants with hose guarantees scaled to fit
the links, and workloads among TCP pairs, many-to-one incasts, UDP at a
rate, shuffles, idle phases and tenants joining, and (kinds appliance and
mixed) tenants with virtual datacenters sending open- or closed-loop
requests to shared appliances. The same flags give the same file.

Without -o the scenario goes to stdout. With --count C, C scenarios of
seeds N, N+1, ... are written to the directory -o DIR (created) as
gen-<kind>-<seed>.yaml.

Tenants join (and leave) during the run with --joins, by default when the
scenario's mechanism takes tenants at runtime (none, elasticswitch,
gatekeeper); without, such a tenant is declared from the start and idle
until its join time: the traffic is the same. The file's first line is
the command that generates it.`,
		Example: `  bulkhead gen --seed 7 -o gen7.yaml && bulkhead sim gen7.yaml --compare none,elasticswitch -o out/gen7
  bulkhead gen --seed 1 --count 20 --kind appliance -o out/gen`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count < 1 {
				return fmt.Errorf("--count must be at least 1, got %d", count)
			}
			if count > 1 && out == "" {
				return fmt.Errorf("--count %d needs -o DIR", count)
			}
			m, err := all.New(mechanism, nil)
			if err != nil {
				return fmt.Errorf("--mechanism: %w", err)
			}
			o := scengen.Options{Kind: scengen.Kind(kind), Size: scengen.Size(size), Mechanism: mechanism,
				Joins: m.Capabilities().LiveTenants}
			if cmd.Flags().Changed("joins") {
				o.Joins = joins
			}
			if duration != "" {
				d, err := units.ParseDuration(duration)
				if err != nil {
					return fmt.Errorf("--duration: %w", err)
				}
				o.Duration = d
			}
			if count > 1 {
				if err := os.MkdirAll(out, 0o755); err != nil {
					return fmt.Errorf("create %s: %w", out, err)
				}
			}
			for i := range count {
				o.Seed = seed + int64(i)
				_, data, err := scengen.Generate(o)
				if err != nil {
					return err
				}
				switch {
				case out == "":
					_, err = cmd.OutOrStdout().Write(data)
				case count > 1:
					f := filepath.Join(out, o.Name()+".yaml")
					if err = os.WriteFile(f, data, 0o644); err == nil {
						fmt.Fprintln(cmd.OutOrStdout(), f)
					}
				default:
					err = os.WriteFile(out, data, 0o644)
				}
				if err != nil {
					return fmt.Errorf("write scenario: %w", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&seed, "seed", 1, "seed of the (first) scenario")
	cmd.Flags().IntVar(&count, "count", 1, "number of scenarios (seeds N, N+1, ...), written to the directory -o")
	cmd.Flags().StringVar(&kind, "kind", string(scengen.Network), "network, appliance or mixed")
	cmd.Flags().StringVar(&size, "size", string(scengen.Small), "small or medium")
	cmd.Flags().StringVar(&duration, "duration", "", "simulated time (default 6s)")
	cmd.Flags().StringVar(&mechanism, "mechanism", "none", "the scenario's mechanism")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output file (directory with --count); default stdout")
	cmd.Flags().BoolVar(&joins, "joins", false, "tenants join during the run (default: when the mechanism takes tenants at runtime)")
	return cmd
}
