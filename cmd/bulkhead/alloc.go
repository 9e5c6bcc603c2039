package main

import (
	"fmt"
	"io"
	"os"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/units"
	"github.com/spf13/cobra"
)

func newAllocCmd() *cobra.Command {
	var maxInput string
	cmd := &cobra.Command{
		Use:   "alloc [PROBLEM.json]",
		Short: "Solve an allocation problem given as JSON (stdin or file)",
		Long: `Solve one allocation problem and print the allocation as JSON.

Rate problems (weighted max-min with demands, floors and classes):
  {"kind":"rate",
   "resources":[{"id":"l1","capacity":1000,"classes":{"A":3,"B":1}}],
   "flows":[{"id":"f1","path":["l1"],"demand":500,"weight":1,"floor":0,"class":"A"}]}
  -> {"rates":{"f1":500}}
  classes, class, demand, weight and floor are optional; no demand means
  unbounded; weight defaults to 1. Floors are met first, then the rest is
  shared by weight.

Vector problems (multi-resource: DRF, H-DRF by group, first fit):
  {"kind":"vector","mechanism":"drf",
   "resources":[{"id":"r1","capacity":10},{"id":"r2","capacity":10}],
   "flows":[{"id":"f1","demand":{"r1":4,"r2":1},"weight":1,"group":"tenantA"}]}
  -> {"allocations":{"f1":{"r1":4,"r2":1}}}

Input is at most 16 MiB (alloc.MaxJSONBytes) unless --max-input says
otherwise; larger input is refused before it is decoded. A key given twice in one object, and strings that are
not valid Unicode (invalid UTF-8, unpaired surrogate escapes), are refused
rather than resolved (last key wins) or rewritten (U+FFFD).

Invalid input is reported on stderr with the JSON field path and a non-zero
exit; nothing is printed on stdout.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			limit, err := units.ParseBytes(maxInput)
			if err != nil {
				return fmt.Errorf("--max-input: %w", err)
			}
			if limit < 1 || limit > 1<<40 {
				return fmt.Errorf("--max-input: %s outside 1 B–1 TiB", maxInput)
			}
			var in io.Reader = cmd.InOrStdin()
			name := "stdin"
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in, name = f, args[0]
			}
			if err := alloc.SolveJSONLimit(in, cmd.OutOrStdout(), int64(limit)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&maxInput, "max-input", "16MiB", "refuse input larger than this (peak memory: about 6 bytes per input byte, up to 16)")
	return cmd
}
