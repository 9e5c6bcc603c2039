package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/bulkhead-dc/bulkhead/agent"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/testbed"
	"github.com/spf13/cobra"
)

func newAgentCmd() *cobra.Command {
	var (
		prefix, server, mechanism, loss string
		web                             httpFlags
		d                               daemonFlags
	)
	cmd := &cobra.Command{
		Use:   "agent --controller ADDR --host NAME | agent SCENARIO.yaml --prefix PREFIX --server SERVER",
		Short: "Run a server's host agent: under a controller, or for a server of an emulated datacenter",
		Long: `Under a controller (--controller ADDR --host NAME): connect to the
controller over mutual TLS with the host's certificate (--pki DIR holds
ca.crt, NAME.crt and NAME.key), receive the host's slice of the declared
model, the mechanism and the peers' addresses and keys, and enforce on the
interfaces the model names for the host's VMs (a VM's interface in its own
namespace with netns, or its tap/veth on the host), building and removing
the limiters as tenants come and go. The agent keeps enforcing what it has
while the controller is unreachable, and re-synchronises when it is back
(give every controller's address to follow whichever leads). It reports
the host's rates to the controller every second. Run it as root in the
host's network namespace. docs/operating.md.

Under a mechanism that enforces appliance guarantees (pulsar), the agent
also fronts the real appliances the model declares (address, port,
protocol): a policy rule per VM takes the VM's connections to an
appliance's address to a listener on the host, and every request is
relayed through its flow's token buckets at the controller's allocation
(table 7471; docs/operating.md). The VMs connect to the appliance as
before.

When it stops (SIGINT, SIGTERM, SIGHUP, SIGQUIT, or a restart for an
upgrade), it leaves its VMs limited at settings that keep every guarantee
without it (for ElasticSwitch, each pair at its guarantee; for
Gatekeeper, each VM at its guarantee), and the next agent on the host
adopts the limiters it finds, so the VMs never run unlimited in between.
With --remove-on-exit it removes them instead. If it is killed, the last
limits stay in force; peers that stop hearing from it hold what they send
to its VMs at their guarantees.

For a server of an emulated datacenter (SCENARIO --prefix --server): run
the host agent of one server of a testbed that is up ('bulkhead
testbed up SCENARIO.yaml --mechanism M'): every mechanism period it reads
the server's counters (pair limiters on its VMs' interfaces, receive
counters on their veths, per-VM schedulers), steps the mechanism (the same
code the simulator runs, through the same driver core), applies the limits
and schedulers it returns with netlink (re-applying any that a write
failed to set), and exchanges the mechanism's messages with the other
servers' agents over UDP (port 7471 on each server's control address, in
band), authenticated with a key per pair of servers derived from the
run's master secret (/run/bulkhead/testbed/PREFIX.key, created by the
first agent of the run; a datagram without a valid tag, or replayed, is
dropped and counted).

The agent takes over its server's limiters (it replaces their qdiscs) and
puts them back to unlimited when it stops (SIGINT, SIGTERM, SIGHUP). It
opens its sockets inside the server's namespace; it can run from any
namespace, e.g. 'ip netns exec PREFIX-n-SERVER bulkhead agent ...', which
also makes 'testbed down' stop it.

With --http it serves /metrics (Prometheus), /state (JSON) and /healthz
(in the namespace it runs in). /state and the metrics show every tenant's
pair rates on the host: on an address other hosts can reach they need a
token (--http-token-file; Prometheus sends it with authorization:
credentials_file), and an address without a host (:9100) is loopback.

Losses (for mechanisms that react to them) come, with --loss seq
(default), from gaps in per-pair sequence numbers that eBPF programs stamp
in the IP ID on the server's uplinks and count at its VMs' veths
(ElasticSwitch §6; the mechanism then reads them at the receivers), or,
with --loss tcp, from the senders' TCP retransmissions (sock_diag in the
VMs' namespaces). Every agent of a run must use the same.`,
		Example: `  bulkhead agent --controller 10.0.0.1:7472 --host s1 --pki /etc/bulkhead

  bulkhead testbed up scenarios/elasticswitch-real-fig5.yaml --prefix demo
  for s in s1 s2 s6 s7 s8 s9 s10; do
    ip netns exec demo-n-$s bulkhead agent scenarios/elasticswitch-real-fig5.yaml --prefix demo --server $s --http 127.0.0.1:9100 &
  done`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := web.check(); err != nil {
				return err
			}
			if len(d.controllers) > 0 {
				if len(args) > 0 || prefix != "" || server != "" {
					return errors.New("agent: --controller runs the agent under a controller: no scenario, --prefix or --server")
				}
				return d.run(cmd, web, loss)
			}
			if len(args) != 1 {
				return errors.New("agent: give --controller ADDR --host NAME, or a scenario with --prefix and --server")
			}
			if prefix == "" || server == "" {
				return errors.New("agent: --prefix and --server are required")
			}
			if err := dataplane.RequireRoot(); err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			ctx, stop := testbedContext(cmd)
			defer stop()
			s, err := runner.Load(args[0])
			if err != nil {
				return err
			}
			st, err := testbed.ReadState(prefix)
			if err != nil {
				return fmt.Errorf("agent: is testbed %s up? %w", prefix, err)
			}
			if st.Scenario != s.Spec.Name {
				return fmt.Errorf("agent: testbed %s runs scenario %q, not %q", prefix, st.Scenario, s.Spec.Name)
			}
			name := mechanism
			if name == "" {
				name = s.Spec.Mechanism.Name
			}
			var params map[string]any
			if name == s.Spec.Mechanism.Name {
				params = s.Spec.Mechanism.Params
			}
			m, err := testbed.NewMechanism(name, params, loss)
			if err != nil {
				return fmt.Errorf("agent: %s: %w", args[0], err)
			}
			limiters, schedulers := testbed.Needs(m)
			if schedulers && !st.Schedulers {
				return fmt.Errorf("agent: mechanism %s needs the per-VM scheduler devices: bring the testbed up with --mechanism %s", name, name)
			}
			plan, err := testbed.NewPlan(s.Spec, s.Topo, testbed.PlanOptions{Prefix: prefix, Scale: st.Scale, Limiters: limiters, Schedulers: schedulers})
			if err != nil {
				return err
			}
			cfg, err := testbed.AttachAgent(plan, server, m, loss, slog.Default())
			if err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			cfg.HTTP, cfg.HTTPToken, cfg.Restore = web.addr, web.token, true
			a, err := agent.New(cfg) // closes cfg's data path on error
			if err != nil {
				return err
			}
			return a.Run(ctx)
		},
	}
	d.add(cmd)
	cmd.Flags().StringVar(&prefix, "prefix", "", "the testbed's run prefix")
	cmd.Flags().StringVar(&server, "server", "", "the server whose agent this is")
	cmd.Flags().StringVar(&mechanism, "mechanism", "", "mechanism (default: the scenario's): "+strings.Join(testbed.Mechanisms(), ", "))
	web.add(cmd)
	cmd.Flags().StringVar(&loss, "loss", testbed.LossSeq, "loss counter: tcp (senders' TCP retransmissions) or seq (eBPF sequence-number gaps at the receivers; use the same on every agent)")
	return cmd
}

// httpFlags configure the agent's HTTP endpoint.
type httpFlags struct {
	addr, tokenFile string
	token           string // read from tokenFile by check
}

func (f *httpFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.addr, "http", "", "serve /metrics, /state and /healthz on this address (IP:PORT; :PORT is loopback)")
	cmd.Flags().StringVar(&f.tokenFile, "http-token-file", "", "a file holding the bearer token that /metrics and /state require (needed when --http is reachable from other hosts)")
}

// check reads the token and refuses an endpoint that would show tenants'
// rates to anyone who can reach it.
func (f *httpFlags) check() error {
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return fmt.Errorf("agent: --http-token-file: %w", err)
		}
		f.token = strings.TrimSpace(string(b))
		if f.token == "" || strings.ContainsAny(f.token, " \t\r\n") {
			return fmt.Errorf("agent: --http-token-file %s: expected one token on one line", f.tokenFile)
		}
		if f.addr == "" {
			return errors.New("agent: --http-token-file needs --http")
		}
	}
	if f.addr == "" {
		return nil
	}
	if err := agent.CheckHTTP(f.addr, f.token); err != nil {
		return fmt.Errorf("agent: --http: %w", err)
	}
	return nil
}
