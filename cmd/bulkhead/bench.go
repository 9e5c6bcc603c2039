package main

import (
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/mech/pulsar"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure allocator and simulator performance",
		Long: `Benchmarks that back the performance figures in docs/results.md.

  bench alloc  global allocation at Pulsar §6.4 scale (2000 servers × 12 VMs
               = 24K flows, 200 appliances, 4200 resources), one core
  bench sim    simulated seconds per wall second at 1 ms ticks
  bench pulsar one Pulsar controller step (demand estimation, local and
               global allocation) at §6.4 scale, 20% and 100% of VMs active`,
	}
	cmd.AddCommand(newBenchAllocCmd(), newBenchSimCmd(), newBenchPulsarCmd())
	return cmd
}

func newBenchAllocCmd() *cobra.Command {
	var runs int
	var seed int64
	cmd := &cobra.Command{
		Use:   "alloc",
		Short: "Time weighted max-min, DRF and H-DRF on Pulsar's §6.4 problem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runs < 1 {
				return fmt.Errorf("--runs: expected at least 1, got %d", runs)
			}
			prev := runtime.GOMAXPROCS(1)
			defer runtime.GOMAXPROCS(prev)
			rp, vp := alloc.PulsarScale(seed)
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Pulsar §6.4 scale: %d flows, %d resources (seed %d), GOMAXPROCS=1, %d runs\n",
				len(rp.Flows), len(rp.Resources), seed, runs)
			cases := []struct {
				name string
				f    func() error
			}{
				{"weighted max-min", func() error { _, err := alloc.MaxMin(rp); return err }},
				{"DRF", func() error { _, err := alloc.DRF(vp); return err }},
				{"H-DRF", func() error { _, err := alloc.HDRF(vp); return err }},
				{"first fit", func() error { _, err := alloc.FirstFit(vp); return err }},
			}
			for _, c := range cases {
				if err := cmd.Context().Err(); err != nil {
					return err
				}
				d, err := timeRuns(runs, c.f)
				if err != nil {
					return fmt.Errorf("%s: %w", c.name, err)
				}
				fmt.Fprintf(w, "  %-17s median %8.2f ms   min %8.2f ms\n", c.name, ms(d[len(d)/2]), ms(d[0]))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 9, "repetitions per allocator")
	cmd.Flags().Int64Var(&seed, "seed", 1, "seed of the generated problem")
	return cmd
}

func timeRuns(n int, f func() error) ([]time.Duration, error) {
	d := make([]time.Duration, n)
	for i := range d {
		start := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		d[i] = time.Since(start)
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func newBenchSimCmd() *cobra.Command {
	var (
		conns     int
		senders   int
		duration  time.Duration
		mechanism string
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulated seconds per wall second at 1 ms ticks",
		Long: `Runs two simulator benchmarks at 1 ms ticks and reports simulated seconds
per wall-clock second:
  - a two-tier datacenter with --connections bulk TCP connections (default 100);
  - ElasticSwitch's many-to-one with --senders senders (default 300), 30 s.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			s, err := runner.BenchScenario(conns, duration)
			if err != nil {
				return err
			}
			speed, wall, err := runner.SimSpeed(cmd.Context(), s, mechanism)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%d TCP connections, %s simulated at 1 ms ticks under %s: %.2f s wall, %.1f simulated s per wall s\n",
				conns, duration, mechanism, wall.Seconds(), speed)
			if senders > 0 {
				m, err := runner.ManyToOneScenario(senders, 30*time.Second)
				if err != nil {
					return err
				}
				speed, wall, err := runner.SimSpeed(cmd.Context(), m, mechanism)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "many-to-one, %d senders, 30 s simulated at 1 ms ticks under %s: %.2f s wall, %.1f simulated s per wall s\n",
					senders, mechanism, wall.Seconds(), speed)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&conns, "connections", 100, "bulk TCP connections (multiple of 20)")
	cmd.Flags().IntVar(&senders, "senders", 300, "senders in the many-to-one run (0 to skip)")
	cmd.Flags().DurationVar(&duration, "duration", 30*time.Second, "simulated time of the first run")
	cmd.Flags().StringVar(&mechanism, "mechanism", "none", "mechanism to run")
	return cmd
}

func newBenchPulsarCmd() *cobra.Command {
	var runs int
	var seed int64
	cmd := &cobra.Command{
		Use:   "pulsar",
		Short: "Time one Pulsar controller step at Pulsar §6.4 scale",
		Long: `Times one step of the Pulsar controller — demand estimation, per-tenant
local allocation and the global allocation of spare capacity — on Pulsar
§6.4's datacenter: 2000 servers × 12 VMs, 200 appliances, 4200 resources,
44% of flows to appliances, with 20% and with 100% of the VMs active, for
the global policies DRF and H-DRF, on one core. Each run builds a fresh
controller and times its second step (the first learns the flows).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runs < 1 {
				return fmt.Errorf("--runs: expected at least 1, got %d", runs)
			}
			prev := runtime.GOMAXPROCS(1)
			defer runtime.GOMAXPROCS(prev)
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Pulsar §6.4 scale (seed %d), GOMAXPROCS=1, median of %d runs\n", seed, runs)
			for _, active := range []float64{0.2, 1} {
				env, obs := pulsar.ScaleInstance(seed, active)
				for _, policy := range []string{"drf", "hdrf"} {
					params := pulsar.DefaultParams()
					params.GlobalPolicy = pulsar.Policy(policy)
					d := make([]time.Duration, runs)
					for i := range d {
						if err := cmd.Context().Err(); err != nil {
							return err
						}
						c, err := pulsar.NewController(env, params)
						if err != nil {
							return err
						}
						obs.Now = time.Second
						c.Step(obs)
						obs.Now = 2 * time.Second
						start := time.Now()
						c.Step(obs)
						d[i] = time.Since(start)
					}
					sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
					fmt.Fprintf(w, "  %3.0f%% active (%5d flows), global %-5s median %8.2f ms   min %8.2f ms\n",
						100*active, len(obs.Flows), policy, ms(d[len(d)/2]), ms(d[0]))
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 5, "repetitions per case")
	cmd.Flags().Int64Var(&seed, "seed", 1, "seed of the generated instance")
	return cmd
}
