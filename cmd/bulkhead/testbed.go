package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/bulkhead-dc/bulkhead/agent"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/report"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/testbed"
	"github.com/spf13/cobra"
)

func newTestbedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "testbed",
		Short: "Emulate a scenario's datacenter on this machine and run it on real traffic",
		Long: `Build a scenario's datacenter out of network namespaces on this machine:
one per server (the hypervisor), one per VM behind its server, one per
switch, joined by veth links shaped with HTB to their capacities (times
--scale) with drop-tail queues, routed along the topology's routes, with
addresses in 10.200.0.0/16 that exist only inside the namespaces.

Every object of a run carries its prefix (namespaces PREFIX-n-NODE and
PREFIX-v-VM, links PREFIX..., processes marked BULKHEAD_RUN=PREFIX).
'testbed down' removes all of them, also for a run whose process was
killed; 'testbed run' removes its own on exit, error, Ctrl-C or SIGTERM.

Needs root and iperf3 (apt-get install -y iperf3).`,
	}
	cmd.AddCommand(newTestbedUpCmd(), newTestbedRunCmd(), newTestbedDownCmd(), newTestbedStatusCmd())
	return cmd
}

// testbedFlags are the options shared by up and run.
type testbedFlags struct {
	prefix    string
	scale     float64
	queue     int
	gso       int
	tcp       string
	mechanism string
	loss      string
}

func (f *testbedFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.prefix, "prefix", "", "run prefix (2-8 lowercase letters/digits; default: random bhXXXXX)")
	cmd.Flags().Float64Var(&f.scale, "scale", 1, "multiply every capacity and rate on the wire (measurements are divided by it)")
	cmd.Flags().IntVar(&f.queue, "queue", 0, "drop-tail queue of each link direction, bytes (0: 8 ms of the link's rate, 1 ms for mechanisms that react to losses, at least 128 KB; docs/testbed.md)")
	cmd.Flags().IntVar(&f.gso, "gso", 0, "largest offload (GSO/TSO) packet of the VMs, bytes (0: the kernel's 64 KB; up to 524280: BIG TCP, every veth on the path takes it)")
	cmd.Flags().StringVar(&f.tcp, "tcp", testbed.DefaultTCP, "TCP congestion control of the VMs and appliances (loss-based cubic, as the simulator's TCP, whatever the machine's default; docs/testbed.md)")
	cmd.Flags().StringVar(&f.mechanism, "mechanism", "", "mechanism run by host agents (default: the scenario's): "+strings.Join(testbed.Mechanisms(), ", "))
	cmd.Flags().StringVar(&f.loss, "loss", testbed.LossSeq, "agents' loss counter: tcp (senders' TCP retransmissions) or seq (eBPF sequence-number gaps at the receivers, ElasticSwitch §6; sees UDP too)")
}

func (f *testbedFlags) options() testbed.Options {
	return testbed.Options{Prefix: f.prefix, Scale: f.scale, QueueBytes: f.queue, GSOMaxSize: f.gso, TCP: f.tcp, Loss: f.loss, Logger: slog.Default()}
}

// testbedContext adds SIGHUP to the signals that cancel (main handles
// SIGINT and SIGTERM), so that closing a terminal also tears a run down.
func testbedContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), syscall.SIGHUP)
}

func newTestbedUpCmd() *cobra.Command {
	var f testbedFlags
	cmd := &cobra.Command{
		Use:   "up SCENARIO.yaml",
		Short: "Build a scenario's emulated datacenter and leave it up",
		Long: `Build the scenario's emulated datacenter and leave it running (no
traffic): use 'ip netns exec NAMESPACE ...' to run programs in a VM, and
'bulkhead testbed down --prefix PREFIX' to remove it. The scenario's
appliances run as real servers in their namespaces (kv: redis-server,
filestore: nginx with WebDAV), at the CPU share their parallelism gives,
listening on the addresses printed; 'testbed down' stops them. The data plane the mechanism (--mechanism, default the
scenario's) needs is built — pair limiters, per-VM scheduler devices —
and what it sets from the model alone is applied: every server's agent
steps once and stops (a reservation mechanism's pair limits, a
scheduler's weights). 'bulkhead agent' runs its host agents, which adapt
to the traffic.`,
		Example: `  bulkhead testbed up scenarios/pulsar-fig3-network.yaml --prefix demo
  ip netns exec demo-v-a-rx iperf3 -s -B 10.200.0.3 &
  ip netns exec demo-v-a-tx iperf3 -c 10.200.0.3
  bulkhead testbed down --prefix demo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := dataplane.RequireRoot(); err != nil {
				return fmt.Errorf("testbed up: %w", err)
			}
			ctx, stop := testbedContext(cmd)
			defer stop()
			s, err := runner.Load(args[0])
			if err != nil {
				return err
			}
			name := f.mechanism
			if name == "" {
				name = s.Spec.Mechanism.Name
			}
			var params map[string]any
			if name == s.Spec.Mechanism.Name {
				params = s.Spec.Mechanism.Params
			}
			o := f.options()
			m, err := testbed.NewMechanism(name, params, f.loss)
			switch {
			case err != nil && f.mechanism != "":
				return fmt.Errorf("testbed up: %s: %w", args[0], err)
			case err != nil:
				// The scenario's mechanism: the emulation is still of use.
				fmt.Fprintf(cmd.ErrOrStderr(), "%v; the datacenter is built without its data plane\n", err)
				m = nil
			default:
				o.ForMechanism(m)
			}
			if err := testbed.CheckApplianceServers(s.Spec); err != nil {
				return err
			}
			tb, err := testbed.Up(ctx, s.Spec, s.Topo, o)
			if err != nil {
				return err
			}
			defer tb.Close()
			undo := func(err error) error {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				return errors.Join(err, tb.Down(cctx))
			}
			if m != nil {
				if err := tb.Apply(m); err != nil {
					return undo(err)
				}
			}
			if err := tb.StartAppliances(ctx); err != nil {
				return undo(err)
			}
			printPlan(cmd.OutOrStdout(), tb.Plan())
			if o.Limiters || o.Schedulers {
				fmt.Fprintf(cmd.OutOrStdout(), "\nstart the host agents (%s) with:\n", name)
				for _, n := range tb.Plan().Agents() {
					fmt.Fprintf(cmd.OutOrStdout(), "  ip netns exec %s bulkhead agent %s --prefix %s --server %s --mechanism %s &\n", n.NS, args[0], tb.Prefix(), n.Name, name)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nremove it with: bulkhead testbed down --prefix %s\n", tb.Prefix())
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func printPlan(w io.Writer, p *testbed.Plan) {
	fmt.Fprintf(w, "testbed %s: scenario %s, scale %g\n\n", p.Prefix, p.Scenario, p.Scale)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VM\tTENANT\tSERVER\tADDRESS\tNAMESPACE")
	for _, v := range p.VMs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, v.Tenant, v.Server, v.Addr, v.NS)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tCAPACITY\tON THE WIRE")
	for _, l := range p.Links {
		fmt.Fprintf(tw, "%s<->%s\t%s\t%s\n", l.A, l.B, fmtRate(l.Capacity), fmtRate(l.Capacity*p.Scale))
	}
	tw.Flush()
	if len(p.Appliances) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "APPLIANCE	MODEL	SERVER	LISTENS ON	PROTOCOL	NAMESPACE")
		for _, a := range p.Appliances {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.Model, a.Server, a.Endpoint(), a.Protocol, a.NS)
		}
		tw.Flush()
	}
}

func fmtRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.3g Gbit/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.3g Mbit/s", bps/1e6)
	}
	return fmt.Sprintf("%.3g kbit/s", bps/1e3)
}

func newTestbedRunCmd() *cobra.Command {
	var (
		f       testbedFlags
		out     string
		sample  time.Duration
		noPlots bool
		trace   string
		http    string
		engine  string
		ext     externalFlags
	)
	cmd := &cobra.Command{
		Use:   "run SCENARIO.yaml -o DIR",
		Short: "Run a scenario on real traffic in an emulated datacenter and report",
		Long: `Bring the scenario's datacenter up, start its control plane as an
operator runs it — a 'bulkhead controller' process, to which the run
declares the scenario's cluster, servers and tenants through the operator
API, and one 'bulkhead agent --controller' process per server, which
builds every VM's limiters, schedulers and loss counters and runs the
mechanism (--mechanism, default the scenario's; not those that need switch
queues or VMs' demands) — start its appliances as real servers (kv:
redis-server, filestore: nginx), run its tcp and udp workloads with
iperf3 or the built-in generator and its requests workloads with the
request generator for the scenario's duration, sample every declared VM
pair's received throughput from the counters and every request flow's
completions every --sample, tear everything down, and write the same
report as 'bulkhead sim' (report.json, summary.md, timeseries.csv,
plots, report.html) to DIR.

Rates are link-layer (Ethernet frame) bits/s divided by --scale, the unit
the link shapers use; iperf3's goodput is about 5% lower.

With --controller URL the agents run under a controller you run
('bulkhead controller'): the run declares the scenario's cluster and
servers to it and, with --tenants-file FILE, writes the scenario's
tenants there for you to apply ('bulkhead apply -f FILE') and watch
('bulkhead get tenants') while the traffic runs (--duration).`,
		Example: `  bulkhead testbed run scenarios/pulsar-fig3-network.yaml -o out/fig3-real
  bulkhead testbed run scenarios/elasticswitch-real-fig5.yaml -o out/es5-real
  bulkhead testbed run scenarios/real-join.yaml -o out/join --controller http://127.0.0.1:7470 \
      --pki /var/lib/bulkhead/pki --tenants-file /tmp/tenants.yaml --duration 60s`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("-o DIR is required")
			}
			if err := dataplane.RequireRoot(); err != nil {
				return fmt.Errorf("testbed run: %w", err)
			}
			if http != "" {
				if err := agent.CheckHTTP(http, ""); err != nil {
					return fmt.Errorf("testbed run: --agent-http: %w", err)
				}
			}
			ctx, stop := testbedContext(cmd)
			defer stop()
			s, err := runner.Load(args[0])
			if err != nil {
				return err
			}
			ro := testbed.RunOptions{Options: f.options(), Mechanism: f.mechanism, Sample: sample, AgentHTTP: http, Workload: engine}
			if ro.External, err = ext.external(); err != nil {
				return err
			}
			if ext.duration > 0 {
				s.Spec.Duration = spec.Duration(ext.duration)
			}
			var finishTrace func() error
			if trace != "" {
				tf, err := os.Create(trace)
				if err != nil {
					return err
				}
				defer tf.Close()
				bw := bufio.NewWriter(tf)
				fmt.Fprintln(bw, "time_s,host,src,dst,rate_mbps,limit_mbps,limiter_bound,losses")
				ro.AgentTrace = bw
				finishTrace = func() error {
					if err := errors.Join(bw.Flush(), tf.Close()); err != nil {
						return fmt.Errorf("agent trace %s: %w", trace, err)
					}
					return nil
				}
			}
			in, err := testbed.Run(ctx, s.Spec, s.Topo, ro)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if finishTrace != nil {
				if err := finishTrace(); err != nil {
					return err
				}
			}
			rep, err := eval.Evaluate(*in)
			if err != nil {
				return fmt.Errorf("%s: evaluate testbed run: %w", args[0], err)
			}
			if err := report.WriteReport(out, rep, !noPlots); err != nil {
				return fmt.Errorf("write report to %s: %w", out, err)
			}
			w := cmd.OutOrStdout()
			writeSummary(w, rep, " (testbed)")
			fmt.Fprintf(w, "report written to %s\n", out)
			if len(rep.Invalid) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%s: the measurements are invalid (the report says so): %s", args[0], strings.Join(rep.Invalid, "; "))}
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory (created)")
	cmd.Flags().DurationVar(&sample, "sample", 0, "measurement interval (default: the scenario's outputs.sample, at least 100ms)")
	cmd.Flags().BoolVar(&noPlots, "no-plots", false, "skip the PNG/SVG plots")
	cmd.Flags().StringVar(&engine, "workload", testbed.WorkloadIperf3, "what runs the flows: iperf3 (one client and server process per flow; tcp and udp) or builtin (all flows in this process: tcp, udp with segmentation offload, and short flows with their completion times)")
	cmd.Flags().StringVar(&trace, "agent-trace", "", "write every host agent's per-step pair observations and limits to this CSV file")
	cmd.Flags().StringVar(&http, "agent-http", "", "IP:PORT on loopback: host agent i serves /metrics, /state and /healthz on PORT+i")
	ext.add(cmd)
	return cmd
}

// externalFlags point a testbed run at an operator's controller.
type externalFlags struct {
	api, agents, tokenFile, pki, tenants string
	duration                             time.Duration
}

func (f *externalFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.api, "controller", "", "run the agents under this controller (its operator API URL) instead of the run's own")
	cmd.Flags().StringVar(&f.agents, "controller-agents", "", "where agents connect to that controller (default: its host, port 7472)")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", filepath.Join(defaultDataDir, tokenFileName), "the operator token of that controller")
	cmd.Flags().StringVar(&f.pki, "pki", filepath.Join(defaultDataDir, "pki"), "that controller's CA and the servers' host certificates")
	cmd.Flags().StringVar(&f.tenants, "tenants-file", "", "write the scenario's tenants to this file for you to apply, instead of declaring them")
	cmd.Flags().DurationVar(&f.duration, "duration", 0, "run the traffic this long instead of the scenario's duration")
}

func (f *externalFlags) external() (*testbed.External, error) {
	if f.api == "" {
		if f.tenants != "" {
			return nil, errors.New("--tenants-file needs --controller")
		}
		return nil, nil
	}
	tok, err := os.ReadFile(f.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	agents := f.agents
	if agents == "" {
		u, err := url.Parse(f.api)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("--controller %q: expected http://HOST:PORT", f.api)
		}
		host := u.Hostname()
		if host == "127.0.0.1" {
			host = "localhost" // the name the controller's certificate has
		}
		agents = net.JoinHostPort(host, "7472")
	}
	return &testbed.External{API: f.api, Token: strings.TrimSpace(string(tok)), Agents: agents, PKI: f.pki, TenantsFile: f.tenants}, nil
}

func newTestbedDownCmd() *cobra.Command {
	var (
		prefix string
		all    bool
		force  bool
	)
	cmd := &cobra.Command{
		Use:   "down (--prefix PREFIX | --all)",
		Short: "Remove an emulated datacenter (namespaces, links, qdiscs, processes)",
		Long: `Remove everything of a run: kill its processes, delete its namespaces
(with their veth and IFB devices, qdiscs, classes and filters) and its
state file. Works for runs whose process was killed. --all removes every
run on the machine ('testbed status' lists them) except those of a
'testbed run' or test still in progress (they remove their own), unless
--force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (prefix == "") == !all {
				return errors.New("testbed down: give exactly one of --prefix PREFIX and --all")
			}
			if err := dataplane.RequireRoot(); err != nil {
				return fmt.Errorf("testbed down: %w", err)
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), time.Minute)
			defer cancel()
			if all {
				done, skipped, err := testbed.DownAll(ctx, force)
				for _, p := range done {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", p)
				}
				for _, p := range skipped {
					fmt.Fprintf(cmd.OutOrStdout(), "kept %s: its run is in progress (--force removes it)\n", p)
				}
				if len(done)+len(skipped) == 0 && err == nil {
					fmt.Fprintln(cmd.OutOrStdout(), "no testbed runs")
				}
				return err
			}
			if err := testbed.Down(ctx, prefix); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", prefix)
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "the run to remove")
	cmd.Flags().BoolVar(&all, "all", false, "remove every run on this machine (but runs in progress)")
	cmd.Flags().BoolVar(&force, "force", false, "with --all: also remove runs in progress")
	return cmd
}

func newTestbedStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List the emulated datacenters on this machine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := dataplane.RequireRoot(); err != nil {
				return fmt.Errorf("testbed status: %w", err)
			}
			runs, err := testbed.List()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(runs)
			}
			if len(runs) == 0 {
				fmt.Fprintln(w, "no testbed runs")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PREFIX\tSCENARIO\tKIND\tSTATE\tNAMESPACES\tPROCESSES\tCREATED")
			for _, r := range runs {
				scen, kind, state, created := "?", "?", "no state file", "?"
				if s := r.State; s != nil {
					scen, created = s.Scenario, s.Created.Local().Format(time.DateTime)
					kind = "up"
					if s.Ephemeral {
						kind = "run"
					}
					switch {
					case s.Ephemeral && !s.OwnerAlive():
						state = "stale (owner died)"
					case !s.Ready:
						state = "building"
					default:
						state = "ready"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Prefix, scen, kind, state, len(r.Namespaces), len(r.Processes), created)
			}
			tw.Flush()
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
