// Command bulkhead is Bulkhead's one binary: simulate scenarios under
// isolation mechanisms and report against the oracle, solve allocation
// problems, and benchmark.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bulkhead:", err)
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		stop()
		os.Exit(code)
	}
}

type globalFlags struct {
	logLevel string
}

func newRoot() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "bulkhead",
		Short: "Work-conserving end-to-end performance isolation for multi-tenant datacenters",
		Long: `Bulkhead gives the tenants of a shared datacenter virtual datacenters:
minimum throughput guarantees across network links and shared appliances,
with spare capacity shared by policy, enforced at end hosts.

It implements Pulsar, ElasticSwitch, Gatekeeper, QShare and DRX behind one
model. Each mechanism runs in a fast fluid simulator and, from the same
code, on real Linux traffic. Results are compared with an oracle: what an
ideal system would have delivered on the same demands.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
				return fmt.Errorf("--log-level: expected debug, info, warn or error, got %q", g.logLevel)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
			return nil
		},
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.AddCommand(newSimCmd(), newValidateCmd(), newAllocCmd(), newBenchCmd(), newAnalyzeCmd(), newPlaceCmd(), newTestbedCmd(), newAgentCmd(), newGenCmd(),
		newControllerCmd(), newApplyCmd(), newGetCmd(), newDeleteCmd(), newDescribeCmd(), newTopCmd())
	return root
}
