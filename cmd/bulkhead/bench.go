package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/alloc/allocbench"
	"github.com/bulkhead-dc/bulkhead/analysis"
	"github.com/bulkhead-dc/bulkhead/mech/pulsar"
	"github.com/bulkhead-dc/bulkhead/proxy/proxybench"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure allocator and simulator performance",
		Long: `Benchmarks that back the performance figures in docs/results.md.

  bench alloc  global allocation at Pulsar §6.4 scale (2000 servers × 12 VMs
               = 24K flows, 200 appliances, 4200 resources), one core;
               --scale K: every allocator on K times that, with flows
               whose dominant resources differ (DRF ≠ max-min)
  bench sim    simulated seconds per wall second at 1 ms ticks
  bench pulsar one Pulsar controller step (demand estimation, local and
               global allocation) at §6.4 scale, 20% and 100% of VMs active
  bench qshare QShare Table 1 and Fig. 10: 1024 servers × 100 VM slots,
               filled with QShare's placement; ports, dedicated queues, DSCP
               code points, throughput gain and link utilization
  bench proxy  the proxy's overhead: redis-benchmark against redis-server
               directly, through twemproxy and through Bulkhead's proxy
               with isolation on; requests/s, p50, p99, CPU
  bench cores  a cache line's round trip between two cores: what every
               parallel pass of the simulator pays for sharing data`,
	}
	cmd.AddCommand(newBenchAllocCmd(), newBenchSimCmd(), newBenchPulsarCmd(), newBenchQShareCmd(), newBenchProxyCmd(), newBenchCoresCmd())
	return cmd
}

func newBenchAllocCmd() *cobra.Command {
	var runs, scale int
	var seed int64
	var writeJSON, form string
	cmd := &cobra.Command{
		Use:   "alloc",
		Short: "Time weighted max-min, DRF and H-DRF on Pulsar's §6.4 problem",
		Long: `Times every allocator on one core (GOMAXPROCS=1).

Without --scale: alloc.PulsarScale, Pulsar §6.4's problem (2000 servers ×
12 VMs = 24K flows, 200 appliances, 4200 resources), where every flow's
dominant resource is its uplink, so that DRF is weighted max-min.

With --scale K (1–100): alloc.PulsarScaleMixed at K times that size, with
appliance-heavy (key-value stores), uplink-heavy (writes to file stores,
VM-to-VM) and downlink-heavy (reads from file stores) flows; a markdown
table of each allocator's median and min time, allocations/s and how many
flows' rates differ from weighted max-min's. Progress goes to stderr.

--write-json FILE writes the --scale instance as ` + "`bulkhead alloc`" + ` input
(--form drf, hdrf, firstfit or rate) instead of timing anything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runs < 1 {
				return fmt.Errorf("--runs: expected at least 1, got %d", runs)
			}
			if writeJSON != "" {
				return writeAllocJSON(writeJSON, scale, seed, form)
			}
			prev := runtime.GOMAXPROCS(1)
			defer runtime.GOMAXPROCS(prev)
			w := cmd.OutOrStdout()
			if cmd.Flags().Changed("scale") {
				res, err := allocbench.Run(cmd.Context(), allocbench.Options{Scale: scale, Seed: seed, Runs: runs, Progress: cmd.ErrOrStderr()})
				if err != nil {
					return err
				}
				return allocbench.WriteMarkdown(w, res)
			}
			rp, vp := alloc.PulsarScale(seed)
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
	cmd.Flags().IntVar(&scale, "scale", 1, "time alloc.PulsarScaleMixed at this multiple of §6.4's size (1–100)")
	cmd.Flags().StringVar(&writeJSON, "write-json", "", "write the --scale instance as `bulkhead alloc` input to this file and exit")
	cmd.Flags().StringVar(&form, "form", "drf", "form of --write-json: drf, hdrf, firstfit (vector) or rate (paths, coefficients 1)")
	return cmd
}

func writeAllocJSON(path string, scale int, seed int64, form string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := allocbench.WriteJSON(f, scale, seed, form); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func newBenchQShareCmd() *cobra.Command {
	var o analysis.QShareScaleOptions
	cmd := &cobra.Command{
		Use:   "qshare",
		Short: "QShare Table 1 and Fig. 10 at 1024 servers",
		Long: `Embeds tenants (exponential sizes, five per-VM guarantees) with QShare's
placement into a k = 16 fat-tree (1024 servers, 10 Gbps links) and its
oversubscribed variants until full, then runs QShare's tenant-queue binding
on the result at tenant level (docs/qshare.md): Table 1's columns for every
oversubscription ratio with the run time, and Fig. 10's throughput gain
against the inactive ratio and link utilization against static reservation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			rows, err := analysis.QShareScale(cmd.Context(), o)
			if err != nil {
				return err
			}
			q := o.Queues
			if q == 0 {
				q = 8
			}
			fmt.Fprintf(w, "QShare Table 1 (%d queues per switch port, seed %d)\n\n", q, max(o.Seed, 1))
			fmt.Fprintf(w, "| O.R. | servers | tenants (requests) | slots / links reserved | ports < %d / < %d / < %d tenants | most per port | ports > %d | local tenants | permanent dedicated | dedicated per interval (min–mean) | DSCP values | place | analysis |\n", q, 2*q, 4*q, q-1)
			fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
			for _, r := range rows {
				fmt.Fprintf(w, "| %d:1 | %d | %d (%d) | %.1f%% / %.1f%% | %.1f%% / %.1f%% / %.1f%% | %d | %d | %d | %.1f%% | %.1f%%–%.1f%% | %d | %.1f s | %.2f s |\n",
					r.Ratio, r.Servers, r.Tenants, r.Requests, 100*r.SlotLoad, 100*r.LinkLoad,
					100*r.Below[q], 100*r.Below[2*q], 100*r.Below[4*q], r.MaxPerPort, r.Overloaded, r.Local,
					100*r.Permanent, 100*r.DedicatedMin, 100*r.DedicatedMean, r.CodePoints,
					r.PlaceTime.Seconds(), r.AnalyzeTime.Seconds())
			}
			fmt.Fprintln(w, "\nFig. 10(a): mean throughput gain of the active tenants against the inactive ratio")
			fmt.Fprintln(w)
			head, sep := "| O.R. |", "| --- |"
			for _, x := range rows[0].Inactive {
				head += fmt.Sprintf(" %.0f%% |", 100*x)
				sep += " ---: |"
			}
			fmt.Fprintln(w, head)
			fmt.Fprintln(w, sep)
			for _, r := range rows {
				line := fmt.Sprintf("| %d:1 |", r.Ratio)
				for _, g := range r.Gain {
					line += fmt.Sprintf(" %.2f |", g)
				}
				fmt.Fprintln(w, line)
			}
			fmt.Fprintf(w, "\nFig. 10(b): link utilization at inactive ratio %.0f%% (links with a reservation)\n\n", 100*rows[0].UtilAt)
			fmt.Fprintln(w, "| O.R. | median QShare | median static | links full, QShare | links full, static | one binding round |")
			fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
			for _, r := range rows {
				fmt.Fprintf(w, "| %d:1 | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.2f ms |\n", r.Ratio, 100*r.UtilMedianQ, 100*r.UtilMedianS,
					100*r.UtilFullQ, 100*r.UtilFullS, ms(r.BindTime))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&o.K, "k", 16, "fat-tree arity (k³/4 servers)")
	cmd.Flags().IntVar(&o.Slots, "slots", 100, "VM slots per server")
	cmd.Flags().IntSliceVar(&o.Ratios, "ratios", []int{1, 2, 4}, "oversubscription ratios (each divides k/2)")
	cmd.Flags().IntVar(&o.Queues, "queues", 8, "WFQ queues per switch port")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 20, "binding rounds with random scores")
	cmd.Flags().Float64Var(&o.MeanVMs, "mean-vms", 49, "mean of the exponential tenant size (VMs)")
	cmd.Flags().Float64Var(&o.Link, "link", 10e9, "capacity of every link, bits/s")
	cmd.Flags().Int64Var(&o.Seed, "seed", 1, "seed of the tenant stream")
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

// coreRounds is the round trips of each batch of runner.CoreRoundTrip
// (5 batches: 10–100 ms in all).
const coreRounds = 20000

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func newBenchSimCmd() *cobra.Command {
	var (
		conns     int
		senders   int
		duration  time.Duration
		mechanism string
		vms       int
		perServer int
		profile   string
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulated seconds per wall second at 1 ms ticks",
		Long: `Runs two simulator benchmarks at 1 ms ticks and reports simulated seconds
per wall-clock second:
  - a two-tier datacenter with --connections TCP connections (default 100):
    without --vms, 20 VMs in two tenants, 20 VM pairs, one tenant's
    connections bulk and the other's on/off (runner.BenchScenario); with
    --vms N, N VMs in tenants of 32, --vms-per-server to a server, one bulk
    connection per VM pair within a tenant (runner.DatacenterScenario);
  - ElasticSwitch's many-to-one with --senders senders (default 300), 30 s.

For the first run it also tells where the wall time went, per simulated
second: the host agents' steps, the network's re-solves, the accounting
and the samples. All run on several cores on a large run except the
water-filling at the heart of each re-solve, which is serial and so bounds
how much more cores would help.

It measures, before and after the first run, how long a cache line takes
to go from one core to another and back. Every pass the simulator splits
among cores reads what another core wrote, so its speed depends on that
figure, which a virtual machine's host can change while it runs (it
places the virtual CPUs close together or far apart): compare runs only
at about the same figure.

--cpuprofile FILE writes a CPU profile of the first run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			var (
				s   *runner.Scenario
				err error
			)
			what := fmt.Sprintf("%d TCP connections", conns)
			if vms > 0 {
				s, err = runner.DatacenterScenario(vms, perServer, conns, duration)
				what = fmt.Sprintf("%d VMs (%d per server), %d bulk TCP connections", vms, perServer, conns)
			} else {
				s, err = runner.BenchScenario(conns, duration)
			}
			if err != nil {
				return err
			}
			// measured before the profile starts, so as not to show in it
			before, okBefore := runner.CoreRoundTrip(cmd.Context(), coreRounds)
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
			}
			var ph sim.Phases
			speed, wall, err := runner.SimSpeed(cmd.Context(), s, mechanism, &ph)
			if profile != "" {
				pprof.StopCPUProfile()
			}
			if err != nil {
				return err
			}
			after, okAfter := runner.CoreRoundTrip(cmd.Context(), coreRounds)
			fmt.Fprintf(w, "%s, %s simulated at 1 ms ticks under %s: %.2f s wall, %.2f simulated s per wall s\n",
				what, duration, mechanism, wall.Seconds(), speed)
			printPhases(w, &ph, duration)
			if okBefore && okAfter {
				fmt.Fprintf(w, "  a cache line's round trip between two cores: %.0f ns before the run, %.0f ns after\n",
					float64(before.Nanoseconds()), float64(after.Nanoseconds()))
			}
			if senders > 0 {
				m, err := runner.ManyToOneScenario(senders, 30*time.Second)
				if err != nil {
					return err
				}
				speed, wall, err := runner.SimSpeed(cmd.Context(), m, mechanism, nil)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "many-to-one, %d senders, 30 s simulated at 1 ms ticks under %s: %.2f s wall, %.1f simulated s per wall s\n",
					senders, mechanism, wall.Seconds(), speed)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&conns, "connections", 100, "TCP connections (without --vms: a multiple of 20)")
	cmd.Flags().IntVar(&vms, "vms", 0, "VMs of the datacenter run (a multiple of 32; 0: the 20-VM run)")
	cmd.Flags().IntVar(&perServer, "vms-per-server", 4, "VMs per server of the datacenter run")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the first run to this file")
	cmd.Flags().IntVar(&senders, "senders", 300, "senders in the many-to-one run (0 to skip)")
	cmd.Flags().DurationVar(&duration, "duration", 30*time.Second, "simulated time of the first run")
	cmd.Flags().StringVar(&mechanism, "mechanism", "none", "mechanism to run")
	return cmd
}

// printPhases tells where a run's wall time went, per simulated second:
// the parts that run on several cores and the serial part of the
// re-solves bound how fast a larger machine could run it.
func printPhases(w io.Writer, ph *sim.Phases, simulated time.Duration) {
	per := func(d time.Duration) string {
		return fmt.Sprintf("%.1f ms", 1000*d.Seconds()/simulated.Seconds())
	}
	cores := "1 core"
	if n := runtime.GOMAXPROCS(0); n > 1 {
		cores = fmt.Sprintf("up to %d cores", n)
	}
	fmt.Fprintf(w, "  wall time per simulated second: agents %s (%d steps, on %s), network re-solves %s (%d, partly serial), accounting %s and samples %s (on %s), controller %s, other %s; setup %.2f s\n",
		per(ph.Agents), ph.Steps, cores, per(ph.Physics), ph.Solves, per(ph.Accounting), per(ph.Samples), cores,
		per(ph.Controller), per(ph.Other), ph.Setup.Seconds())
}

func newBenchCoresCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cores",
		Short: "A cache line's round trip between two cores",
		Long: `Measures how long a cache line takes to go from one core to another and
back (two threads handing a counter to each other; the median of five
batches) and prints it in nanoseconds.

The simulator splits its passes among cores, and each pass reads what
another core wrote in the one before, so its speed follows this figure.
On a virtual machine the host may place the virtual CPUs close together
(tens of nanoseconds) or far apart (hundreds), and move them while a
benchmark runs: measure before and after, and compare runs only at the
same figure (scripts/sim-speed does). Needs two cores (GOMAXPROCS).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rtt, ok := runner.CoreRoundTrip(cmd.Context(), coreRounds)
			if !ok {
				if err := cmd.Context().Err(); err != nil {
					return err
				}
				return fmt.Errorf("bench cores: no round trip measured: needs two cores running at once (GOMAXPROCS is %d)", runtime.GOMAXPROCS(0))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%.0f ns\n", float64(rtt.Nanoseconds()))
			return nil
		},
	}
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

func newBenchProxyCmd() *cobra.Command {
	var (
		o       proxybench.Options
		outDir  string
		profile string
	)
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "The proxy's overhead against direct Redis and twemproxy",
		Long: `Starts a redis-server, nutcracker (twemproxy) in front of it and Bulkhead's
proxy in this process (one RESP appliance, one flow whose buckets run at a
finite, non-binding allocation: isolation on), all on loopback, then runs
redis-benchmark (SET then GET, each its own run) against each target with
the same settings for every --pipeline depth and --clients count, --rounds
times, interleaved. Prints a markdown table of the medians: requests/s, p50
and p99 (ms), the p99 each proxy adds over direct, the proxy's CPU at 100K
requests/s (CPU time ÷ requests) and its read and write system calls per
request; then whether issue 14's goal holds (throughput ≥ twemproxy's, p99
added under 100 µs unpipelined). -o DIR writes every run to
DIR/proxy-overhead.csv. Needs the Debian packages redis-server,
redis-tools and nutcracker. Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = cmd.ErrOrStderr()
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return err
				}
				defer f.Close()
				o.CPUProfile = f
			}
			res, err := proxybench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if err := proxybench.WriteMarkdown(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if outDir != "" {
				if err := os.MkdirAll(outDir, 0o755); err != nil {
					return err
				}
				f, err := os.Create(filepath.Join(outDir, "proxy-overhead.csv"))
				if err != nil {
					return err
				}
				if err := proxybench.WriteCSV(f, res); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Requests, "requests", 50000, "redis-benchmark -n per test and run unpipelined (pipelined runs: × the depth)")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 3, "rounds of every run, interleaved; the table shows medians, the CSV every run")
	cmd.Flags().IntSliceVar(&o.Clients, "clients", []int{1, 50}, "redis-benchmark -c values")
	cmd.Flags().IntSliceVar(&o.Pipeline, "pipeline", []int{1, 16}, "redis-benchmark -P values")
	cmd.Flags().StringSliceVar(&o.Targets, "targets", []string{proxybench.Direct, proxybench.Twemproxy, proxybench.Bulkhead}, "targets: direct, twemproxy, bulkhead")
	cmd.Flags().StringVarP(&outDir, "output", "o", "", "directory to write proxy-overhead.csv to")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write a pprof CPU profile of the Bulkhead proxy's runs to this file")
	return cmd
}
