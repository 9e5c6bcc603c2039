package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/bulkhead-dc/bulkhead/agent/hostpath"
	"github.com/bulkhead-dc/bulkhead/agentd"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/pki"
	"github.com/spf13/cobra"
)

// version is what agents report to the controller.
const version = "bulkhead-dev"

// daemonFlags configure `bulkhead agent --controller`.
type daemonFlags struct {
	controllers []string
	host, pki   string
	uplinks     []string
	netns       string
	trace       string
	scale       float64
	remove      bool
	state       string
	lose        float64
	loseSeed    uint64
}

func (f *daemonFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&f.controllers, "controller", nil, "the controllers' agent addresses (HOST:PORT, comma-separated or repeated): run under a controller")
	cmd.Flags().StringVar(&f.host, "host", "", "this host's name, as declared and in its certificate (with --controller)")
	cmd.Flags().StringVar(&f.pki, "pki", filepath.Join(defaultDataDir, "pki"), "directory with ca.crt and the host's HOST.crt and HOST.key (with --controller)")
	cmd.Flags().StringSliceVar(&f.uplinks, "uplink", nil, "the host's devices toward the network, where the loss counter numbers packets (with --controller)")
	cmd.Flags().StringVar(&f.netns, "netns", "", "the host's network namespace, if the agent runs outside it (with --controller; the testbed runs agents in the root namespace, on its management network)")
	cmd.Flags().StringVar(&f.trace, "trace", "", "write the agent's per-step pair observations and limits to this CSV file (with --controller; no header)")
	cmd.Flags().Float64Var(&f.scale, "scale", 1, "multiply every rate on the wire (with --controller; as the testbed's --scale)")
	cmd.Flags().Float64Var(&f.lose, "fault-lose-messages", 0, "fault injection: drop this fraction of the control messages the agent sends to its peers, to measure how the mechanism tolerates their loss (with --controller)")
	cmd.Flags().Uint64Var(&f.loseSeed, "fault-seed", 1, "seed of --fault-lose-messages' random draws")
	cmd.Flags().StringVar(&f.state, "state-dir", filepath.Join(defaultDataDir, "agent"), "where the agent keeps the last model it applied and the central controller's last allocations, and, when it starts, finds what to enforce before a controller answers (with --controller; \"\": keep nothing)")
	cmd.Flags().BoolVar(&f.remove, "remove-on-exit", false, "on exit, remove every limiter and scheduler the agent built, leaving the host's VMs unlimited (with --controller; by default they stay at guarantee-safe limits for the next agent to adopt)")
}

// run runs the agent under a controller until the command's context ends.
func (f *daemonFlags) run(cmd *cobra.Command, web httpFlags, loss string) error {
	if f.host == "" {
		return errors.New("agent: --host is required with --controller")
	}
	tc, err := pki.ClientTLS(f.pki, f.host)
	if err != nil {
		return fmt.Errorf("agent: %w (issue it with 'bulkhead controller issue --host %s' and copy it here)", err, f.host)
	}
	if err := dataplane.RequireRoot(); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	var trace io.Writer
	if f.trace != "" {
		tf, err := os.Create(f.trace)
		if err != nil {
			return fmt.Errorf("agent: --trace: %w", err)
		}
		defer tf.Close()
		bw := bufio.NewWriter(tf)
		defer bw.Flush()
		trace = bw
	}
	hp := hostpath.Options{Netns: f.netns, Loss: loss, Uplinks: f.uplinks, Log: slog.Default()}
	d, err := agentd.New(agentd.Config{
		Host: f.host, Controllers: f.controllers, TLS: tc, Scale: f.scale, HTTP: web.addr, HTTPToken: web.token, Version: version,
		Logger: slog.Default(), Mechanism: hp.Mechanism, Path: hp.Path, Listen: hp.Listen, Steering: hp.Steering, Trace: trace,
		Restore: f.remove, LoseSent: f.lose, LoseSeed: f.loseSeed, StateDir: f.state,
	})
	if err != nil {
		return err
	}
	// SIGINT and SIGTERM end every command; an agent stops cleanly on
	// the other signals it can catch too, leaving guarantee-safe limits.
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGHUP, syscall.SIGQUIT)
	defer stop()
	return d.Run(ctx)
}
