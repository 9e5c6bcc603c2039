package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/client"
	"github.com/bulkhead-dc/bulkhead/units"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// clientFlags say how to reach the controller.
type clientFlags struct {
	server, token, tokenFile string
}

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", envOr("BULKHEAD_SERVER", "http://"+defaultListen), "the controller's API URL (env BULKHEAD_SERVER)")
	cmd.Flags().StringVar(&f.token, "token", "", "operator token (env BULKHEAD_TOKEN; default: read from --token-file)")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", filepath.Join(defaultDataDir, tokenFileName), "file with the operator token, as the controller on this machine writes it")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (f *clientFlags) client() (*client.Client, error) {
	token := f.token
	if token == "" {
		token = os.Getenv("BULKHEAD_TOKEN")
	}
	if token == "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("no operator token: give --token, set BULKHEAD_TOKEN, or make %s readable (%w)", f.tokenFile, err)
		}
		token = strings.TrimSpace(string(b))
	}
	return client.New(f.server, client.Options{Token: token})
}

// kindArg resolves what a user types for a kind: tenant, tenants, Tenant.
func kindArg(s string) (string, error) {
	l := strings.ToLower(s)
	for _, k := range api.Kinds() {
		kl := strings.ToLower(k)
		if l == kl || l == kl+"s" {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown kind %q (use cluster, hosts, tenants or appliances)", s)
}

func newApplyCmd() *cobra.Command {
	var (
		cf     clientFlags
		files  []string
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE [-f FILE...]",
		Short: "Declare or change objects on the controller (cluster, hosts, tenants, appliances)",
		Long: `Send the objects of one or more YAML files (several documents per file,
separated by "---") to the controller, which stores them all or none: it
checks every object, admits tenants only if their hose guarantees fit
every link, and places VMs declared without a host. Applying the same
files again changes nothing. '-f -' reads standard input.

Each object says apiVersion: bulkhead.dev/v1, its kind (Cluster, Host,
Tenant, Appliance), metadata.name and a spec (docs/operating.md).`,
		Example: `  bulkhead apply -f docs/examples/cluster.yaml -f docs/examples/tenants.yaml
  bulkhead apply -f tenant.yaml --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("apply: -f FILE is required")
			}
			var objs []api.Object
			for _, f := range files {
				var (
					b   []byte
					err error
				)
				if f == "-" {
					b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), api.MaxBytes+1))
				} else {
					b, err = os.ReadFile(f)
				}
				if err != nil {
					return fmt.Errorf("apply: %w", err)
				}
				o, err := api.Decode(b, f)
				if err != nil {
					return err
				}
				objs = append(objs, o...)
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			res, err := c.Apply(cmd.Context(), objs, dryRun)
			if err != nil {
				return err
			}
			suffix := ""
			if dryRun {
				suffix = " (dry run)"
			}
			for _, r := range res.Results {
				fmt.Fprintf(cmd.OutOrStdout(), "%s/%s %s%s\n", strings.ToLower(r.Kind), r.Name, r.Action, suffix)
			}
			return nil
		},
	}
	cf.add(cmd)
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file of objects ('-': standard input); repeatable")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check, admit and place, but store nothing")
	return cmd
}

func newGetCmd() *cobra.Command {
	var (
		cf  clientFlags
		out string
	)
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "Show objects: the cluster, hosts, tenants (with achieved rates), appliances",
		Long: `List the objects of a kind, or show one, with the status the controller
keeps: a tenant's guarantee, what it achieved over the last interval and
its compliance so far; a host's agent and VMs. -o yaml prints objects that
'bulkhead apply -f' takes back; -o json the API's form; -o wide more
columns.`,
		Example: `  bulkhead get tenants
  bulkhead get tenant web -o yaml
  bulkhead get hosts -o wide`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := kindArg(args[0])
			if err != nil {
				return err
			}
			if !slices.Contains([]string{"", "wide", "yaml", "json"}, out) {
				return fmt.Errorf("-o: expected yaml, json or wide, got %q", out)
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			var objs []api.Object
			if len(args) == 2 {
				o, err := c.Get(cmd.Context(), kind, args[1])
				if err != nil {
					return err
				}
				objs = []api.Object{o}
			} else if objs, err = c.List(cmd.Context(), kind); err != nil {
				return err
			}
			return printObjects(cmd.OutOrStdout(), kind, objs, out, len(args) == 2)
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVarP(&out, "output", "o", "", "output format: wide, yaml or json (default: a table)")
	return cmd
}

func newDeleteCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "delete KIND NAME",
		Short: "Delete an object from the controller",
		Long: `Delete one object. A tenant's limits disappear from its hosts; a host
that still runs VMs, an appliance a tenant's VDC uses, and the cluster
while anything else is declared cannot be deleted.`,
		Example: `  bulkhead delete tenant web`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := kindArg(args[0])
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			if _, err := c.Delete(cmd.Context(), kind, args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s deleted\n", strings.ToLower(kind), args[1])
			return nil
		},
	}
	cf.add(cmd)
	return cmd
}

func newDescribeCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "describe tenant NAME",
		Short: "Describe a tenant: guarantees, placement, reservations, achieved rates, compliance",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := kindArg(args[0])
			if err != nil {
				return err
			}
			if kind != api.KindTenant {
				return fmt.Errorf("describe: only tenants can be described (use 'bulkhead get %s %s -o yaml')", strings.ToLower(kind), args[1])
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			o, err := c.Get(cmd.Context(), kind, args[1])
			if err != nil {
				return err
			}
			describeTenant(cmd.OutOrStdout(), &o)
			return nil
		},
	}
	cf.add(cmd)
	return cmd
}

func printObjects(w io.Writer, kind string, objs []api.Object, out string, single bool) error {
	switch out {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if single {
			return enc.Encode(objs[0])
		}
		return enc.Encode(api.ObjectList{Objects: objs})
	case "yaml":
		for i := range objs {
			if i > 0 {
				fmt.Fprintln(w, "---")
			}
			b, err := yaml.Marshal(objs[i])
			if err != nil {
				return err
			}
			_, _ = w.Write(b)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	defer tw.Flush()
	wide := out == "wide"
	switch kind {
	case api.KindTenant:
		fmt.Fprint(tw, "NAME\tVMS\tGUARANTEE\tACHIEVED\tCOMPLIANCE\tAGE")
		if wide {
			fmt.Fprint(tw, "\tHOSTS")
		}
		fmt.Fprintln(tw)
		for _, o := range objs {
			ts := o.Spec.(*api.TenantSpec)
			st, _ := o.Status.(*api.TenantStatus)
			if st == nil {
				st = &api.TenantStatus{}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s", o.Name(), len(ts.VMs), tenantGuarantee(ts, st),
				dash(st.Achieved, shortRate), compliance(st.Compliance), age(o.Metadata.CreationTimestamp))
			if wide {
				var hosts []string
				for _, v := range ts.VMs {
					hosts = append(hosts, v.Name+"@"+v.Host)
				}
				fmt.Fprint(tw, "\t"+strings.Join(hosts, ","))
			}
			fmt.Fprintln(tw)
		}
	case api.KindHost:
		fmt.Fprintln(tw, "NAME\tADDRESS\tPORT\tVMS\tAGENT\tLAST REPORT\tAGE")
		for _, o := range objs {
			hs := o.Spec.(*api.HostSpec)
			st, _ := o.Status.(*api.HostStatus)
			if st == nil {
				st = &api.HostStatus{}
			}
			agent, last := "not connected", "-"
			if st.Connected {
				agent = "connected " + st.Version
			}
			if st.LastReport != nil {
				last = age(st.LastReport) + " ago"
			}
			port := hs.Port
			if port == 0 {
				port = api.DefaultAgentPort
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", o.Name(), hs.Address, port, st.VMs, agent, last, age(o.Metadata.CreationTimestamp))
		}
	case api.KindAppliance:
		fmt.Fprintln(tw, "NAME\tMODEL\tSERVER\tPARALLELISM\tAGE")
		for _, o := range objs {
			a := o.Spec.(*api.ApplianceSpec)
			where := a.Server
			if a.Hypervisor {
				where = "(hypervisors)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%g\t%s\n", o.Name(), a.Model, where, a.Parallelism, age(o.Metadata.CreationTimestamp))
		}
	case api.KindCluster:
		fmt.Fprintln(tw, "NAME\tTOPOLOGY\tMECHANISM\tPLACEMENT\tSLOTS\tAGE")
		for _, o := range objs {
			cs := o.Spec.(*api.ClusterSpec)
			mech := cs.Mechanism.Name
			if mech == "" {
				mech = "none"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", o.Name(), cs.Topology.Kind, mech, orDash(cs.Placement), cs.Slots, age(o.Metadata.CreationTimestamp))
		}
	}
	return nil
}

func describeTenant(w io.Writer, o *api.Object) {
	ts := o.Spec.(*api.TenantSpec)
	st, _ := o.Status.(*api.TenantStatus)
	if st == nil {
		st = &api.TenantStatus{}
	}
	fmt.Fprintf(w, "Name:        %s\n", o.Name())
	fmt.Fprintf(w, "Created:     %s (generation %d)\n", ts0(o.Metadata.CreationTimestamp), o.Metadata.Generation)
	kind := "hose guarantees"
	if ts.BestEffort {
		kind = "best effort"
	}
	fmt.Fprintf(w, "Kind:        %s\n", kind)
	fmt.Fprintf(w, "Guarantee:   %s received in all (sum of its VMs' receive guarantees)\n", units.FormatRate(st.Guarantee))
	fmt.Fprintf(w, "Achieved:    %s over the last interval\n", dash(st.Achieved, shortRate))
	fmt.Fprintf(w, "Compliance:  %s\n", compliance(st.Compliance))
	fmt.Fprintln(w, "VMs:")
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tHOST\tIN\tOUT\tRECEIVED\tSENT")
	for _, v := range st.VMs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", v.Name, v.Host, units.FormatRate(v.In), units.FormatRate(v.Out),
			dash(v.Received, shortRate), dash(v.Sent, shortRate))
	}
	tw.Flush()
	if len(st.Links) > 0 {
		fmt.Fprintln(w, "Reservations (hose model, per directed link):")
		tw = tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
		for _, l := range st.Links {
			fmt.Fprintf(tw, "  %s\t%s\n", l.Link, units.FormatRate(l.Rate))
		}
		tw.Flush()
	}
	if ts.VDC != nil && len(ts.VDC.Appliances) > 0 {
		fmt.Fprintln(w, "Appliance guarantees:")
		for _, g := range ts.VDC.Appliances {
			fmt.Fprintf(w, "  %s: %s\n", g.Appliance, g.Guarantee)
		}
	}
}

// tenantGuarantee is a tenant's receive guarantee for a table: per VM
// when its VMs have the same, else their sum.
func tenantGuarantee(ts *api.TenantSpec, st *api.TenantStatus) string {
	if ts.BestEffort {
		return "best effort"
	}
	same := len(st.VMs) > 0
	for _, v := range st.VMs {
		same = same && v.In == st.VMs[0].In
	}
	if same {
		return shortRate(st.VMs[0].In) + "/VM"
	}
	return shortRate(st.Guarantee) + " in all"
}

// shortRate formats bits/s with three significant digits.
func shortRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.3g Gbps", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.3g Mbps", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.3g Kbps", bps/1e3)
	}
	return fmt.Sprintf("%.3g bps", bps)
}

func dash(v float64, f func(float64) string) string {
	if v == 0 {
		return "-"
	}
	return f(v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func compliance(c *float64) string {
	if c == nil {
		return "-"
	}
	return strconv.FormatFloat(*c, 'f', 2, 64)
}

func ts0(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// age formats the time since t as kubectl does (45s, 3m, 2h, 5d).
func age(t *time.Time) string {
	if t == nil {
		return "-"
	}
	d := time.Since(*t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
