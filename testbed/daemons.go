package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bulkhead-dc/bulkhead/agent/hostpath"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/client"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/pki"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/units"
	"gopkg.in/yaml.v3"
)

// daemons are a run's control plane, as an operator runs it: one
// `bulkhead controller` process and one `bulkhead agent --controller`
// process per server with VMs. They run in the root namespace, which is
// the emulated datacenter's management network: the controller listens
// on loopback there, unreachable from the servers' and VMs' namespaces;
// each agent works in its server's namespace (--netns) and exchanges the
// mechanism's messages with its peers in band, from its server's control
// address.
type daemons struct {
	dir     string // the run's control plane files: pki/, controller/, logs
	log     *slog.Logger
	bin     string
	ctlArgs []string
	later   []api.Object // tenants declared later (DaemonOptions.Undeclared)
	ctl     *daemon
	agents  map[string]*daemon
	cli     *client.Client
	// Revision is the store revision of the declared objects.
	revision int64
}

// daemon is one daemon process.
type daemon struct {
	name string
	bin  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
	logf *os.File
}

func (p *daemon) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop asks the process to stop (SIGTERM) and waits up to grace, then
// kills it.
func (p *daemon) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// DaemonOptions configure the control plane of a run.
type DaemonOptions struct {
	// Binary is the bulkhead executable the daemons run (default: this
	// process's executable).
	Binary string
	// Loss is the agents' loss counter (LossSeq, LossTCP).
	Loss string
	// HTTP, if set (IP:PORT), makes agent i serve /metrics, /state and
	// /healthz on PORT + i.
	HTTP string
	// Trace makes every agent write its per-step trace (stop copies them
	// to the run's trace).
	Trace bool
	// Undeclared tenants are left out of the first apply (RunControl.Apply
	// declares them).
	Undeclared []string
	// LoseMessages is the fraction of their control messages the agents
	// drop (agent --fault-lose-messages; each server's agent with a seed
	// of its own).
	LoseMessages float64
	// External, if set, is a controller an operator runs: the run declares
	// the cluster and its servers to it and starts agents against it
	// instead of starting its own.
	External *External
}

// External is an operator's controller a run uses (RunOptions.External).
type External struct {
	// API is its operator API URL, Token the operator token.
	API, Token string
	// Agents is where agents connect (HOST:PORT; its certificate must be
	// valid for HOST).
	Agents string
	// PKI is the directory of its CA certificate (ca.crt) and of the
	// servers' host certificates (bulkhead controller init --host ...).
	PKI string
	// TenantsFile, if set, receives the scenario's tenants as objects
	// (YAML) instead of the run declaring them: the operator applies
	// them (`bulkhead apply -f`).
	TenantsFile string
}

func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs a daemon with its output in dir/NAME.log.
func (d *daemons) start(name, bin string, args ...string) (*daemon, error) {
	// appended to: a daemon started again keeps its earlier log
	logf, err := os.OpenFile(filepath.Join(d.dir, name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The daemons die with this process (a testbed run killed hard).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("testbed: start %s: %w", name, err)
	}
	p := &daemon{name: name, bin: bin, args: args, cmd: cmd, done: make(chan struct{}), logf: logf}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	return p, nil
}

// exited says whether a daemon's process has ended.
func exited(p *daemon) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the last lines of a daemon's log, for errors.
func (d *daemons) tail(name string) string {
	b, _ := os.ReadFile(filepath.Join(d.dir, name+".log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// startDaemons starts the controller, declares the scenario's cluster
// and tenants through its API, starts the agents and waits until every
// agent enforces the declared model.
func (tb *Testbed) startDaemons(ctx context.Context, sc *spec.Scenario, mechanism string, params map[string]any, o DaemonOptions) (_ *daemons, err error) {
	if o.Binary == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("testbed: the bulkhead binary: %w", err)
		}
	}
	// Under the run's state, so that removing a run (Down, or the reaping
	// of a run whose process died) removes its control plane's files too.
	dir := daemonDir(tb.plan.Prefix)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	d := &daemons{dir: dir, log: tb.log, agents: map[string]*daemon{}}
	defer func() {
		if err != nil {
			d.stop(nil)
		}
	}()
	hosts := tb.plan.Agents()
	var pkiDir, agentsAddr string
	if x := o.External; x != nil {
		pkiDir, agentsAddr = x.PKI, x.Agents
		for _, n := range hosts {
			if _, err := os.Stat(filepath.Join(pkiDir, n.Name+".crt")); err != nil {
				return d, fmt.Errorf("testbed: server %s has no host certificate in %s: issue it with 'bulkhead controller issue --pki %s --host %s'", n.Name, pkiDir, pkiDir, n.Name)
			}
		}
		if d.cli, err = client.New(x.API, client.Options{Token: x.Token}); err != nil {
			return d, err
		}
	} else if err := d.startController(ctx, o.Binary, hosts, &pkiDir, &agentsAddr); err != nil {
		return d, err
	}
	all, err := tb.objects(sc, mechanism, params)
	if err != nil {
		return d, err
	}
	var objs []api.Object
	var forOperator []api.Object
	for _, ob := range all {
		if ob.Kind == api.KindTenant && o.External != nil && o.External.TenantsFile != "" {
			forOperator = append(forOperator, ob)
			continue
		}
		if ob.Kind == api.KindTenant && slices.Contains(o.Undeclared, ob.Name()) {
			d.later = append(d.later, ob)
			continue
		}
		objs = append(objs, ob)
	}
	if len(d.later) != len(o.Undeclared) {
		return d, fmt.Errorf("testbed: undeclared tenants %v: not all are tenants of the scenario", o.Undeclared)
	}
	res, err := d.cli.Apply(ctx, objs, false)
	if err != nil {
		return d, fmt.Errorf("testbed: declare the scenario to the controller: %w", err)
	}
	d.revision = res.Revision
	if len(forOperator) > 0 {
		if err := writeObjects(o.External.TenantsFile, forOperator); err != nil {
			return d, err
		}
	}
	ctlAgents := agentsAddr
	if o.External == nil {
		ctlAgents = "localhost:" + portOf(agentsAddr)
	}
	for i, n := range hosts {
		args := []string{"agent", "--controller", ctlAgents, "--host", n.Name, "--pki", pkiDir,
			"--state-dir", filepath.Join(dir, "state-"+n.Name), "--netns", n.NS, "--scale", strconv.FormatFloat(tb.plan.Scale, 'g', -1, 64), "--loss", hostpath.LossName(o.Loss)}
		var up []string
		for _, s := range n.Shapes {
			up = append(up, s.Dev)
		}
		if len(up) > 0 {
			args = append(args, "--uplink", strings.Join(up, ","))
		}
		if o.Trace {
			args = append(args, "--trace", filepath.Join(dir, "trace-"+n.Name+".csv"))
		}
		if o.LoseMessages > 0 {
			args = append(args, "--fault-lose-messages", strconv.FormatFloat(o.LoseMessages, 'g', -1, 64), "--fault-seed", strconv.Itoa(i+1))
		}
		if o.HTTP != "" {
			h, port, err := splitHostPort(o.HTTP)
			if err != nil {
				return d, err
			}
			args = append(args, "--http", net.JoinHostPort(h, strconv.Itoa(port+i)))
		}
		p, err := d.start("agent-"+n.Name, o.Binary, args...)
		if err != nil {
			return d, err
		}
		d.agents[n.Name] = p
	}
	if err := d.waitEnforcing(ctx); err != nil {
		return d, err
	}
	return d, nil
}

// startController issues the run's certificates and starts its own
// controller, with its operator API and agents' address on loopback.
func (d *daemons) startController(ctx context.Context, bin string, hosts []*NodePlan, pkiDir, agentsAddr *string) error {
	*pkiDir = filepath.Join(d.dir, "pki")
	if err := pki.InitCA(*pkiDir, "bulkhead testbed"); err != nil {
		return err
	}
	if _, _, err := pki.Issue(*pkiDir, pki.Request{Name: "controller", Role: pki.Controller, DNS: []string{"localhost"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
		return err
	}
	for _, n := range hosts {
		if _, _, err := pki.Issue(*pkiDir, pki.Request{Name: n.Name, Role: pki.Host}); err != nil {
			return err
		}
	}
	ctlDir := filepath.Join(d.dir, "controller")
	var apiAddr string
	for attempt := 1; ; attempt++ {
		var err error
		if apiAddr, err = freeLoopback(); err != nil {
			return err
		}
		if *agentsAddr, err = freeLoopback(); err != nil {
			return err
		}
		d.bin, d.ctlArgs = bin, []string{"controller", "--data-dir", ctlDir, "--pki", *pkiDir, "--listen", apiAddr, "--agents-listen", *agentsAddr}
		if d.ctl, err = d.start("controller", bin, d.ctlArgs...); err != nil {
			return err
		}
		err = waitReady(ctx, d.ctl, "http://"+apiAddr+"/readyz")
		if err == nil {
			break
		}
		// A port free when it was picked may be taken before the
		// controller binds it (by any connection's local port, drawn
		// from the same range): the controller exits, and other ports
		// are tried.
		if attempt < 3 && exited(d.ctl) && strings.Contains(d.tail("controller"), "address already in use") {
			continue
		}
		return fmt.Errorf("testbed: the controller did not start: %w\n%s", err, d.tail("controller"))
	}
	token, err := os.ReadFile(filepath.Join(ctlDir, "operator.token"))
	if err != nil {
		return fmt.Errorf("testbed: the controller's token: %w", err)
	}
	d.cli, err = client.New("http://"+apiAddr, client.Options{Token: strings.TrimSpace(string(token))})
	return err
}

// writeObjects writes objects as a YAML file `bulkhead apply -f` takes.
func writeObjects(path string, objs []api.Object) error {
	var b strings.Builder
	for i := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(objs[i])
		if err != nil {
			return err
		}
		b.Write(y)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("testbed: tenants file: %w", err)
	}
	return nil
}

// daemonDir is where a run's control plane keeps its files.
func daemonDir(prefix string) string { return filepath.Join(StateDir, prefix+".d") }

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// waitReady polls a daemon's readiness URL.
func waitReady(ctx context.Context, p *daemon, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.alive() {
			return errors.New("it exited")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitEnforcing waits until every agent is connected and enforces the
// revision declared.
func (d *daemons) waitEnforcing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		hs, err := d.cli.List(ctx, api.KindHost)
		ready := err == nil
		var missing []string
		for _, h := range hs {
			st, _ := h.Status.(*api.HostStatus)
			if _, ours := d.agents[h.Name()]; ours && (st == nil || !st.Connected || st.Revision < d.revision) {
				ready = false
				missing = append(missing, h.Name())
			}
		}
		if ready {
			return nil
		}
		for name, p := range d.agents {
			if !p.alive() {
				return fmt.Errorf("testbed: the agent of %s exited:\n%s", name, d.tail("agent-"+name))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed: agents %v do not enforce the declared model after 30 s: %w", missing, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stats reads every agent's statistics from the controller.
func (d *daemons) stats(ctx context.Context) ([]AgentStats, error) {
	hs, err := d.cli.List(ctx, api.KindHost)
	if err != nil {
		return nil, fmt.Errorf("testbed: the agents' statistics: %w", err)
	}
	var out []AgentStats
	for _, h := range hs {
		st, _ := h.Status.(*api.HostStatus)
		if _, ours := d.agents[h.Name()]; !ours || st == nil {
			continue
		}
		a := AgentStats{Host: h.Name(), Steps: int64(st.Steps), Dropped: map[string]float64{}}
		for r, n := range st.Dropped {
			a.Dropped[r] = float64(n)
		}
		out = append(out, a)
	}
	return out, nil
}

// stop stops the agents (which remove what they built), then the
// controller, copies the agents' traces to trace (if any) and removes
// the run's files.
func (d *daemons) stop(trace io.Writer) error {
	var errs []error
	for name, p := range d.agents {
		p.stop(10 * time.Second)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			errs = append(errs, fmt.Errorf("testbed: the agent of %s exited with %d:\n%s", name, code, d.tail("agent-"+name)))
		}
	}
	if trace != nil {
		for name := range d.agents {
			b, err := os.ReadFile(filepath.Join(d.dir, "trace-"+name+".csv"))
			if err == nil {
				_, err = trace.Write(b)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("testbed: the trace of %s's agent: %w", name, err))
			}
		}
	}
	if d.ctl != nil {
		d.ctl.stop(5 * time.Second)
	}
	if len(errs) == 0 && os.Getenv("BULKHEAD_KEEP_DAEMON_LOGS") == "" {
		os.RemoveAll(d.dir)
	} else {
		d.log.Warn("daemon logs kept", "dir", d.dir)
	}
	return errors.Join(errs...)
}

// objects are the scenario's cluster and tenants as an operator declares
// them: the topology and mechanism, each server with VMs and its agent's
// control address, every appliance with its endpoint (address, port and
// protocol of its real server), every tenant with its VMs' hosts, addresses and
// interfaces (each VM's own device, in its namespace).
func (tb *Testbed) objects(sc *spec.Scenario, mechanism string, params map[string]any) ([]api.Object, error) {
	obj := func(kind, name string, s any) api.Object {
		return api.Object{APIVersion: api.Version, Kind: kind, Metadata: api.Meta{Name: name}, Spec: s}
	}
	slots := 0
	for _, n := range tb.plan.Nodes {
		slots = max(slots, len(n.VMs))
	}
	objs := []api.Object{obj(api.KindCluster, api.ClusterName, &api.ClusterSpec{Topology: sc.Topology, Slots: max(slots, 1),
		Seed: sc.Seed, Mechanism: api.Mechanism{Name: mechanism, Params: params}})}
	for _, n := range tb.plan.Agents() {
		objs = append(objs, obj(api.KindHost, n.Name, &api.HostSpec{Address: n.Ctl, Port: AgentPort}))
	}
	// The real appliances with the endpoints the testbed gave them
	// (Plan.Model's appliances; the scenario's have none).
	for i := range tb.plan.Model.Appliances {
		a := tb.plan.Model.Appliances[i]
		name := a.Name
		a.Name = ""
		objs = append(objs, obj(api.KindAppliance, name, &a))
	}
	for _, t := range sc.Tenants {
		ts := &api.TenantSpec{BestEffort: t.BestEffort, Weight: t.Weight, SLA: t.SLA, VDC: t.VDC}
		for _, v := range t.VMs {
			vp, ok := tb.plan.VM(v.Name)
			if !ok {
				return nil, fmt.Errorf("testbed: VM %s is not in the plan", v.Name)
			}
			in, out := t.Hose(&v)
			ts.VMs = append(ts.VMs, api.VMSpec{Name: v.Name, Host: vp.Server, In: units.Rate(in), Out: units.Rate(out),
				Addrs: []netip.Addr{vp.Addr}, Interface: vp.Dev, Netns: vp.NS})
		}
		for _, p := range tb.plan.Pairs {
			if p.Tenant == t.Name {
				ts.Pattern = append(ts.Pattern, model.Pair{Src: p.Src, Dst: p.Dst})
			}
		}
		objs = append(objs, obj(api.KindTenant, t.Name, ts))
	}
	return objs, nil
}

// RunControl is a handle on a run's control plane while its workloads
// run (RunOptions.During): what an operator can do to a running cluster.
type RunControl struct {
	// T0 is when the workloads started.
	T0 time.Time
	d  *daemons
	tb *Testbed
	as *appliances
}

// SetApplianceCPU gives the real server of the appliance name (one whose
// parallelism is below 1, so that the testbed limits its CPU) share of
// one CPU from now on, as a faster or slower machine would (how much its
// capacity for a mix changes with it depends on what else shares the
// machine's cores). The samples' busy fractions and capacities are then
// of the new share.
func (c *RunControl) SetApplianceCPU(name string, share float64) error {
	if c.as == nil {
		return fmt.Errorf("testbed: no appliance %q in this run", name)
	}
	return c.as.setShare(name, share)
}

// Client is the operator API's client.
func (c *RunControl) Client() *client.Client { return c.d.cli }

// Sleep waits until at seconds after the workloads started (or ctx ends).
func (c *RunControl) Sleep(ctx context.Context, at time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(c.T0.Add(at))):
		return nil
	}
}

// Declare applies tenants the run left undeclared (RunOptions.Undeclared).
func (c *RunControl) Declare(ctx context.Context, tenants ...string) (*api.ApplyResult, error) {
	var objs []api.Object
	for _, o := range c.d.later {
		if slices.Contains(tenants, o.Name()) {
			objs = append(objs, o)
		}
	}
	if len(objs) != len(tenants) {
		return nil, fmt.Errorf("declare %v: not all are undeclared tenants of the run", tenants)
	}
	return c.d.cli.Apply(ctx, objs, false)
}

// KillController kills the controller (SIGKILL) and waits for it to die.
func (c *RunControl) KillController() {
	_ = c.d.ctl.cmd.Process.Kill()
	<-c.d.ctl.done
}

// StartController starts the controller again, on its store, and waits
// until it is ready.
func (c *RunControl) StartController(ctx context.Context) error {
	if c.d.ctl.alive() {
		return errors.New("the controller is running")
	}
	p, err := c.d.start("controller", c.d.bin, c.d.ctlArgs...)
	if err != nil {
		return err
	}
	c.d.ctl = p
	addr := ""
	for i, a := range c.d.ctlArgs {
		if a == "--listen" {
			addr = c.d.ctlArgs[i+1]
		}
	}
	return waitReady(ctx, p, "http://"+addr+"/readyz")
}

// SignalAgent sends sig to the agent process of a server: SIGTERM or
// SIGINT stop it cleanly, SIGKILL kills it, SIGSTOP freezes it and
// SIGCONT lets it go on. StartAgent starts it again once it exited.
func (c *RunControl) SignalAgent(server string, sig syscall.Signal) error {
	p, ok := c.d.agents[server]
	if !ok {
		return fmt.Errorf("testbed: server %s has no agent", server)
	}
	if !p.alive() {
		return fmt.Errorf("testbed: the agent of %s has exited", server)
	}
	return p.cmd.Process.Signal(sig)
}

// WaitAgent waits until the agent of a server has exited (after
// SIGTERM or SIGKILL), or ctx ends.
func (c *RunControl) WaitAgent(ctx context.Context, server string) error {
	p, ok := c.d.agents[server]
	if !ok {
		return fmt.Errorf("testbed: server %s has no agent", server)
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StartAgent starts the agent of a server again, as it was first
// started, once it has exited; it returns when the process runs (it
// connects to the controller and adopts its server's limiters on its
// own).
func (c *RunControl) StartAgent(server string) error {
	p, ok := c.d.agents[server]
	if !ok {
		return fmt.Errorf("testbed: server %s has no agent", server)
	}
	if p.alive() {
		return fmt.Errorf("testbed: the agent of %s is running", server)
	}
	np, err := c.d.start(p.name, p.bin, p.args...)
	if err != nil {
		return err
	}
	c.d.agents[server] = np
	return nil
}

// ControllerAddrs are the run's controller's operator API and agents'
// addresses (HOST:PORT; "" for an external controller).
func (c *RunControl) ControllerAddrs() (api, agents string) {
	for i, a := range c.d.ctlArgs {
		switch a {
		case "--listen":
			api = c.d.ctlArgs[i+1]
		case "--agents-listen":
			agents = c.d.ctlArgs[i+1]
		}
	}
	return api, agents
}

// VMNamespace is the namespace of a VM of the run.
func (c *RunControl) VMNamespace(vm string) (*dataplane.NS, bool) {
	v, ok := c.tb.plan.VM(vm)
	if !ok {
		return nil, false
	}
	ns, ok := c.tb.ns[v.NS]
	return ns, ok
}

// VM is a VM's plan (its namespace, device, address, server).
func (c *RunControl) VM(vm string) (*VMPlan, bool) { return c.tb.plan.VM(vm) }

// AgentAddr is where a server's agent receives its peers' messages.
func (c *RunControl) AgentAddr(server string) (netip.AddrPort, bool) { return c.tb.plan.peers(server) }
