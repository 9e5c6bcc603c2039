package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/controller"
	"github.com/bulkhead-dc/bulkhead/pki"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/credentials"
)

// Defaults shared by the controller and its clients.
const (
	defaultDataDir = "/var/lib/bulkhead"
	defaultListen  = "127.0.0.1:7470"
	tokenFileName  = "operator.token"
	// defaultAgentsListen is where agents connect.
	defaultAgentsListen = ":7472"
)

func newControllerCmd() *cobra.Command {
	var (
		listen, dataDir, advertise, tokenFile, pkiDir, agentsListen string
		etcd                                                        []string
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the controller: the declared cluster, admission and placement, the operator API",
		Long: `Run Bulkhead's controller, the daemon operators declare their cluster to:
the topology and the mechanism (kind Cluster), the servers and their
agents (Host), tenants with hose guarantees and virtual datacenters
(Tenant) and shared appliances (Appliance). It keeps them in a store that
survives restarts — a bbolt file in --data-dir — admits a tenant only if
its guarantees fit every link, places VMs declared without a host, and
serves the operator API (api/openapi.yaml) on --listen for 'bulkhead
apply', 'get', 'delete' and 'describe', with /metrics, /healthz and
/readyz, and a web dashboard at /ui/ (tenants against their guarantees,
topology, appliances, agents; live, once a second).

Every API request needs the operator token: --token-file, or, by default,
DATA_DIR/operator.token, created with a random token on first start
(clients on the same machine read it from there). The dashboard asks for
the same token once and keeps a session cookie.`,
		Example: `  bulkhead controller --data-dir /var/lib/bulkhead &
  bulkhead apply -f docs/examples/cluster.yaml
  bulkhead apply -f docs/examples/tenants.yaml
  bulkhead get tenants`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := slog.Default()
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return fmt.Errorf("controller: --data-dir: %w", err)
			}
			if pkiDir == "" {
				pkiDir = filepath.Join(dataDir, "pki")
			}
			tc, err := pki.ServerTLS(pkiDir, "controller")
			if err != nil {
				return fmt.Errorf("controller: the agents' TLS: %w (create the certificates with 'bulkhead controller init --pki %s --host HOST...')", err, pkiDir)
			}
			log.Info("opening the store", "etcd", etcd, "data_dir", dataDir)
			st, elector, where, err := openStore(ctx, dataDir, etcd)
			if err != nil {
				return fmt.Errorf("controller: %w", err)
			}
			defer st.Close()
			token, err := clusterToken(ctx, st, dataDir, tokenFile)
			if err != nil {
				return fmt.Errorf("controller: %w", err)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("controller: --listen: %w", err)
			}
			if advertise == "" {
				advertise = "http://" + ln.Addr().String()
			}
			c, err := controller.New(controller.Config{Store: st, Elector: elector, ID: advertise, Token: token, Logger: log})
			if err != nil {
				return err
			}
			gln, err := net.Listen("tcp", agentsListen)
			if err != nil {
				ln.Close()
				return fmt.Errorf("controller: --agents-listen: %w", err)
			}
			gs := c.GRPCServer(credentials.NewTLS(tc))
			defer gs.Stop()
			srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
				WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
			errc := make(chan error, 3)
			go func() {
				if err := gs.Serve(gln); err != nil {
					errc <- fmt.Errorf("controller: agents' gRPC: %w", err)
				}
			}()
			go func() { errc <- c.Run(ctx) }()
			go func() {
				if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
					errc <- fmt.Errorf("controller: serve: %w", err)
				}
			}()
			log.Info("controller serving", "api", advertise, "agents", gln.Addr().String(), "store", where)
			select {
			case <-ctx.Done():
			case err = <-errc:
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			return err
		},
	}
	cmd.AddCommand(newControllerInitCmd(), newControllerIssueCmd())
	cmd.Flags().StringVar(&listen, "listen", defaultListen, "address of the operator API (HTTP)")
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir, "where the controller keeps its state (state.db) and operator token")
	cmd.Flags().StringVar(&advertise, "advertise", "", "this controller's API URL as other controllers give it to clients (default: http://LISTEN)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file with the operator token (default: DATA_DIR/"+tokenFileName+", created if missing)")
	cmd.Flags().StringVar(&pkiDir, "pki", "", "directory of the CA and the controller's certificate (default: DATA_DIR/pki; 'bulkhead controller init' creates them)")
	cmd.Flags().StringVar(&agentsListen, "agents-listen", defaultAgentsListen, "address where agents connect (gRPC over mutual TLS)")
	cmd.Flags().StringSliceVar(&etcd, "etcd", nil, "keep the state in this etcd cluster (client URLs, comma-separated) instead of DATA_DIR/state.db; several controllers on one cluster elect a leader, which takes the writes")
	return cmd
}

// openStore opens the embedded store in dataDir, or the etcd cluster at
// endpoints; it returns the store, its elector and where it is.
func openStore(ctx context.Context, dataDir string, endpoints []string) (store.Store, store.Elector, string, error) {
	if len(endpoints) == 0 {
		st, err := store.OpenBolt(filepath.Join(dataDir, "state.db"), 5*time.Second)
		if err != nil {
			return nil, nil, "", err
		}
		return st, st, st.Path(), nil
	}
	st, err := store.OpenEtcd(ctx, store.EtcdConfig{Endpoints: endpoints})
	if err != nil {
		return nil, nil, "", err
	}
	return st, st, "etcd " + strings.Join(endpoints, ","), nil
}

// clusterToken returns the cluster's operator token: the one in the
// store, or (first start) the one in tokenFile if given, else a new
// random one, then stored. It writes it to DATA_DIR/operator.token
// (0600) for clients on this machine, unless tokenFile names the file.
func clusterToken(ctx context.Context, st store.Store, dataDir, tokenFile string) (string, error) {
	proposed := ""
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		if proposed = strings.TrimSpace(string(b)); proposed == "" {
			return "", fmt.Errorf("--token-file %s is empty", tokenFile)
		}
	}
	token, err := controller.EnsureToken(ctx, st, proposed)
	if err != nil {
		return "", err
	}
	if proposed != "" && proposed != token {
		return "", fmt.Errorf("--token-file %s differs from the token the cluster already has; use that one (it is in %s on its first controller's machine)", tokenFile, filepath.Join("DATA_DIR", tokenFileName))
	}
	if tokenFile == "" {
		path := filepath.Join(dataDir, tokenFileName)
		if b, err := os.ReadFile(path); err != nil || strings.TrimSpace(string(b)) != token {
			if err := writeSecret(path, []byte(token+"\n")); err != nil {
				return "", fmt.Errorf("token file: %w", err)
			}
			slog.Info("wrote the operator token", "file", path)
		}
	}
	return token, nil
}

// writeSecret writes a 0600 file by renaming a complete temporary one.
func writeSecret(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// pkiDirFlag adds --pki, the directory of the CA and certificates.
func pkiDirFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "pki", filepath.Join(defaultDataDir, "pki"), "directory of the CA and the certificates")
}

func newControllerInitCmd() *cobra.Command {
	var (
		dir   string
		hosts []string
		dns   []string
		ips   []net.IP
	)
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create the control plane's CA and certificates: the controller's, the hosts', an operator's",
		Long: `Create a certificate authority in --pki and issue from it the controller's
certificate (valid for localhost, 127.0.0.1 and every --dns and --ip the
agents dial), one host certificate per --host (the agents present them to
the controller, which trusts a host only as the name in its certificate)
and an operator certificate "admin". Copy each host's HOST.crt, HOST.key
and ca.crt to that host. The CA's key (ca.key) signs new hosts later
('bulkhead controller issue'); keep it on the controller's machine.

It refuses to overwrite an existing CA.`,
		Example: `  bulkhead controller init --pki /var/lib/bulkhead/pki --ip 10.0.0.1 --host s1 --host s2`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pki.InitCA(dir, "bulkhead CA"); err != nil {
				return fmt.Errorf("controller init: %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "CA: %s\n", filepath.Join(dir, pki.CACertFile))
			reqs := []pki.Request{{Name: "controller", Role: pki.Controller, DNS: append([]string{"localhost"}, dns...),
				IPs: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...)}, {Name: "admin", Role: pki.Operator}}
			for _, h := range hosts {
				reqs = append(reqs, pki.Request{Name: h, Role: pki.Host})
			}
			for _, r := range reqs {
				crt, _, err := pki.Issue(dir, r)
				if err != nil {
					return fmt.Errorf("controller init: %w", err)
				}
				fmt.Fprintf(out, "%s %s: %s\n", r.Role, r.Name, crt)
			}
			return nil
		},
	}
	pkiDirFlag(cmd, &dir)
	cmd.Flags().StringArrayVar(&hosts, "host", nil, "a host to issue a certificate for (repeatable)")
	cmd.Flags().StringArrayVar(&dns, "dns", nil, "a DNS name agents use to reach the controller (repeatable)")
	cmd.Flags().IPSliceVar(&ips, "ip", nil, "an address agents use to reach the controller (repeatable)")
	return cmd
}

func newControllerIssueCmd() *cobra.Command {
	var (
		dir, host, operator string
	)
	cmd := &cobra.Command{
		Use:     "issue --host NAME | --operator NAME",
		Short:   "Issue a certificate for a new host or operator from the control plane's CA",
		Example: `  bulkhead controller issue --host s17`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := pki.Request{Name: host, Role: pki.Host}
			switch {
			case (host == "") == (operator == ""):
				return errors.New("controller issue: give one of --host or --operator")
			case operator != "":
				r = pki.Request{Name: operator, Role: pki.Operator}
			}
			crt, _, err := pki.Issue(dir, r)
			if err != nil {
				return fmt.Errorf("controller issue: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %s\n", r.Role, r.Name, crt)
			return nil
		},
	}
	pkiDirFlag(cmd, &dir)
	cmd.Flags().StringVar(&host, "host", "", "host name (as declared, and as its agent's --host)")
	cmd.Flags().StringVar(&operator, "operator", "", "operator name")
	return cmd
}
