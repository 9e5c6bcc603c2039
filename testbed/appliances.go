package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/loadgen"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// Appliances on the testbed
//
// Every appliance of the scenario is a real server in a namespace of its
// own (PREFIX-a-NAME) behind its server's namespace, joined to it by a
// veth pair (PREFIX aI in the appliance, PREFIX aIh in the server), with
// the /31 ApplianceNet+2i / +2i+1 and routes in every node, so that a
// VM's requests cross the links the simulator puts on the flow's path
// (the VM's server, the fabric, the appliance's server) by normal routing,
// and the replies come back the same way; nothing is translated. Model kv
// runs redis-server on RedisPort, model filestore nginx with WebDAV PUT
// on HTTPPort. Encryption appliances, appliances in the hypervisor and
// custom ones have no real server to run and are refused (they stay in
// the simulator). The requests workloads run in the request generator
// (package loadgen) inside the source VMs' namespaces.

// applianceServer is what runs a real appliance of a model.
type applianceServer struct {
	bin, pkg string
	port     int
	protocol string
}

var applianceServers = map[string]applianceServer{
	model.ModelKV:        {bin: "redis-server", pkg: "redis-server", port: RedisPort, protocol: model.ProtoRedis},
	model.ModelFilestore: {bin: "nginx", pkg: "nginx", port: HTTPPort, protocol: model.ProtoHTTP},
}

// applianceRefusal says why an appliance cannot be a real server here.
func applianceRefusal(a *model.Appliance) string {
	switch {
	case a.Hypervisor:
		return "it runs in the hypervisor of its clients' servers (hypervisor: true), an engine inside every server that the testbed has no real counterpart of; it stays in the simulator (bulkhead sim)"
	case a.Model == model.ModelEncryption:
		return "model encryption has no real server here (an encryption engine sits in the data path, on the way of other traffic, which the testbed does not emulate); it stays in the simulator (bulkhead sim)"
	case applianceServers[a.Model].bin == "":
		return fmt.Sprintf("model %s has no real server here (kv runs redis-server, filestore nginx); it stays in the simulator (bulkhead sim)", a.Model)
	}
	return ""
}

// planAppliances plans the scenario's appliances (refusing those that
// cannot be real servers) and its request flows.
func (p *Plan) planAppliances(sc *spec.Scenario, tp *topo.Topology) error {
	if len(sc.Appliances) > MaxAppliances {
		return fmt.Errorf("testbed: more than %d appliances", MaxAppliances)
	}
	p.Model.Appliances = slices.Clone(p.Model.Appliances) // the scenario's stay as they are
	for i := range p.Model.Appliances {
		a := &p.Model.Appliances[i]
		if why := applianceRefusal(a); why != "" {
			return fmt.Errorf("testbed: %s: appliances[%d] (%s) cannot be emulated: %s", sc.File, i, a.Name, why)
		}
		if _, dup := p.vmIdx[a.Name]; dup {
			return fmt.Errorf("testbed: appliance %q has the name of a VM", a.Name)
		}
		srv, ok := p.Node(a.Server)
		if !ok || !srv.Server {
			return fmt.Errorf("testbed: appliance %q: unknown server %q", a.Name, a.Server)
		}
		s := applianceServers[a.Model]
		is := strconv.Itoa(i)
		ap := &AppliancePlan{
			Name: a.Name, Server: a.Server, Model: a.Model, NS: nsName(p.Prefix, "a", a.Name, i),
			Addr: addrAt(ApplianceNet, 2*i+1), Gateway: addrAt(ApplianceNet, 2*i),
			Dev: p.Prefix + "a" + is, HostDev: p.Prefix + "a" + is + "h",
			Port: s.port, Protocol: s.protocol,
		}
		if a.Parallelism > 0 && a.Parallelism < 1 {
			if a.Parallelism < minCPUShare {
				return fmt.Errorf("testbed: %s: appliances[%d] (%s): parallelism %g is below the smallest share of a CPU the testbed gives a server (%g)", sc.File, i, a.Name, a.Parallelism, minCPUShare)
			}
			ap.CPU = a.Parallelism
		}
		if a.Address != "" && a.Address != ap.Addr.String() {
			return fmt.Errorf("testbed: appliance %q declares address %s: the testbed gives appliances their addresses (%s here); leave address, port and protocol out", a.Name, a.Address, ap.Addr)
		}
		a.Address, a.Port, a.Protocol = ap.Addr.String(), ap.Port, ap.Protocol
		p.appIdx[a.Name] = len(p.Appliances)
		p.Appliances = append(p.Appliances, ap)
	}
	seen := map[[2]string]string{}
	for wi, w := range sc.Workloads {
		if w.Kind != spec.KindRequests {
			continue
		}
		switch {
		case len(w.Via) > 0:
			return fmt.Errorf("testbed: %s: workloads[%d] (%s): requests through appliances (via) are not emulated: the appliances on the way would sit in the data path", sc.File, wi, w.Name)
		case w.Appliance == "":
			return fmt.Errorf("testbed: %s: workloads[%d] (%s): requests to VMs are not emulated (only to appliances)", sc.File, wi, w.Name)
		}
		ap, ok := p.Appliance(w.Appliance)
		if !ok {
			return fmt.Errorf("testbed: workload %q: unknown appliance %q", w.Name, w.Appliance)
		}
		a := &p.Model.Appliances[p.appIdx[w.Appliance]]
		if _, err := loadgen.Ops(a, ap.Protocol, w.Mix); err != nil {
			return fmt.Errorf("testbed: workload %q: %w", w.Name, err)
		}
		an, _ := tp.Node(ap.Server)
		for _, src := range w.Sources() {
			if other, dup := seen[[2]string{src, ap.Name}]; dup {
				return fmt.Errorf("testbed: workload %q: VM %s already sends requests to %s in workload %q", w.Name, src, ap.Name, other)
			}
			seen[[2]string{src, ap.Name}] = w.Name
			v, ok := p.VM(src)
			if !ok {
				return fmt.Errorf("testbed: workload %q: unknown VM %q", w.Name, src)
			}
			vn, _ := tp.Node(v.Server)
			p.Requests = append(p.Requests, RequestPlan{Tenant: w.Tenant, Workload: w.Name, Src: src, Appliance: ap.Name,
				Fwd: tp.Route(vn.ID, an.ID, topo.ConnHash(sc.Seed, src, ap.Name, 0)),
				Rev: tp.Route(an.ID, vn.ID, topo.ConnHash(sc.Seed, ap.Name, src, 0))})
		}
	}
	return nil
}

// createAppliances joins every appliance's namespace to its server's.
func (tb *Testbed) createAppliances() error {
	for _, a := range tb.plan.Appliances {
		srv, ns := tb.nodeNS(a.Server), tb.ns[a.NS]
		if err := srv.AddVeth(a.HostDev, ns, a.Dev); err != nil {
			return err
		}
		if err := srv.AddAddr(a.HostDev, netip.PrefixFrom(a.Gateway, 31)); err != nil {
			return err
		}
		if err := ns.AddAddr(a.Dev, netip.PrefixFrom(a.Addr, 31)); err != nil {
			return err
		}
		if err := ns.AddRoute(dataplane.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: a.Gateway, Dev: a.Dev, RTOMin: VMRTOMin, CongestionControl: tb.tcp}); err != nil {
			return err
		}
	}
	return nil
}

// applianceDir is where a run's appliances keep their files (their
// configuration, logs and data: under the run's state, on tmpfs, removed
// with the run by Down and by the reaping of a run whose process died).
func applianceDir(prefix string) string { return filepath.Join(StateDir, prefix+".a") }

// CheckApplianceServers checks that the servers of the scenario's real
// appliances are installed.
func CheckApplianceServers(sc *spec.Scenario) error {
	var missing, pkgs []string
	for i := range sc.Appliances {
		s, ok := applianceServers[sc.Appliances[i].Model]
		if !ok {
			continue // refused by the plan, with its reason
		}
		if _, err := exec.LookPath(s.bin); err != nil && !slices.Contains(missing, s.bin) {
			missing, pkgs = append(missing, s.bin), append(pkgs, s.pkg)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("testbed: the scenario's appliances need %s, not found on PATH (apt-get install -y %s)", strings.Join(missing, " and "), strings.Join(pkgs, " "))
	}
	return nil
}

// running is a real appliance's server process.
type running struct {
	plan *AppliancePlan
	cmd  *exec.Cmd
	done chan struct{}
	log  string // its log file
	// cpu is its CPU time (ns, every thread) at the last sample
	cpu uint64
	// cg holds it at its CPU share (nil: no limit)
	cg *cpuGroup
	// share is the CPU share it has now (its plan's, or what
	// setShare gave it; 0: no limit), guarded by mu
	mu    sync.Mutex
	share float64
}

// appliances are a run's real appliances.
type appliances struct {
	tb   *Testbed
	dir  string
	runs []*running // indexed like plan.Appliances
}

// StartAppliances starts every appliance's server in its namespace, waits
// until each listens on its address and leaves them running after this
// process exits, for a datacenter left up (`bulkhead testbed up`):
// `bulkhead testbed down` stops them with everything else of the run (they
// are in its namespaces) and removes their files and CPU groups. On error
// nothing is left running.
func (tb *Testbed) StartAppliances(ctx context.Context) error {
	as, err := tb.launchAppliances(ctx, true)
	if err != nil {
		return err
	}
	as.runs = nil // theirs now: `testbed down` stops them
	return nil
}

// startAppliances starts every appliance's server in its namespace and
// waits until each listens on its address; they die with this process.
func (tb *Testbed) startAppliances(ctx context.Context) (*appliances, error) {
	return tb.launchAppliances(ctx, false)
}

// launchAppliances starts the servers, detached from this process (no
// parent-death signal) if detach.
func (tb *Testbed) launchAppliances(ctx context.Context, detach bool) (_ *appliances, err error) {
	as := &appliances{tb: tb, dir: applianceDir(tb.plan.Prefix)}
	if len(tb.plan.Appliances) == 0 {
		return as, nil
	}
	defer func() {
		if err != nil {
			as.stop()
		}
	}()
	for _, a := range tb.plan.Appliances {
		dir := filepath.Join(as.dir, a.Name)
		var bin string
		var args []string
		var logf string
		s := applianceServers[a.Model]
		if bin, err = exec.LookPath(s.bin); err != nil {
			return as, fmt.Errorf("testbed: appliance %s needs %s (apt-get install -y %s): %w", a.Name, s.bin, s.pkg, err)
		}
		switch a.Model {
		case model.ModelKV:
			args, logf, err = redisArgs(dir, a)
		case model.ModelFilestore:
			args, logf, err = nginxArgs(dir, a)
		}
		if err != nil {
			return as, fmt.Errorf("testbed: appliance %s: %w", a.Name, err)
		}
		cmd := tb.Command(context.WithoutCancel(ctx), bin, args...)
		if detach {
			cmd.SysProcAttr.Pdeathsig = 0
		}
		r := &running{plan: a, cmd: cmd, done: make(chan struct{}), log: logf, share: a.CPU}
		if err := tb.ns[a.NS].StartIn(cmd); err != nil {
			return as, fmt.Errorf("testbed: appliance %s: %w", a.Name, err)
		}
		go func() { _ = cmd.Wait(); close(r.done) }()
		as.runs = append(as.runs, r)
		if a.CPU > 0 {
			if r.cg, err = limitCPU(cgroupName(tb.plan.Prefix, a.Name), cmd.Process.Pid, a.CPU); err != nil {
				return as, fmt.Errorf("testbed: appliance %s: %w", a.Name, err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range as.runs {
		for !listening(r.cmd.Process.Pid, r.plan.Port) {
			select {
			case <-r.done:
				return as, fmt.Errorf("testbed: appliance %s: %s exited: %s\n%s", r.plan.Name, filepath.Base(r.cmd.Path), r.cmd.ProcessState, tailFile(r.log))
			case <-ctx.Done():
				return as, fmt.Errorf("testbed: appliance %s: %w", r.plan.Name, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return as, fmt.Errorf("testbed: appliance %s: %s not listening on %s after 10s\n%s", r.plan.Name, filepath.Base(r.cmd.Path), r.plan.Endpoint(), tailFile(r.log))
			}
		}
		tb.log.Info("appliance up", "appliance", r.plan.Name, "model", r.plan.Model, "server", r.plan.Server,
			"endpoint", r.plan.Endpoint(), "protocol", r.plan.Protocol, "pid", r.cmd.Process.Pid)
	}
	return as, nil
}

// redisArgs configures redis-server for a kv appliance: no persistence,
// its own directory, bound to the appliance's address.
func redisArgs(dir string, a *AppliancePlan) ([]string, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	logf := filepath.Join(dir, "redis.log")
	return []string{"--bind", a.Addr.String(), "--port", strconv.Itoa(a.Port), "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", logf, "--daemonize", "no", "--protected-mode", "no",
		"--maxclients", "10000", "--proto-max-bulk-len", "1gb", "--client-query-buffer-limit", "1gb"}, logf, nil
}

// nginxArgs configures nginx for a filestore appliance: one process (no
// master, so it dies with the run's process), WebDAV PUT with the paths
// it creates, its root and temporary files under dir, no access log.
func nginxArgs(dir string, a *AppliancePlan) ([]string, string, error) {
	for _, d := range []string{"root", "tmp", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, "", err
		}
	}
	logf := filepath.Join(dir, "logs", "error.log")
	conf := fmt.Sprintf(`# bulkhead testbed: appliance %[3]s (filestore)
master_process off;
daemon off;
pid %[1]s/nginx.pid;
error_log %[4]s warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path %[1]s/tmp/body;
  proxy_temp_path %[1]s/tmp/proxy;
  fastcgi_temp_path %[1]s/tmp/fastcgi;
  uwsgi_temp_path %[1]s/tmp/uwsgi;
  scgi_temp_path %[1]s/tmp/scgi;
  keepalive_requests 100000000;
  keepalive_timeout 600s;
  server {
    listen %[2]s;
    root %[1]s/root;
    client_max_body_size 0;
    client_body_buffer_size 1m;
    dav_methods PUT;
    create_full_put_path on;
  }
}
`, dir, a.Endpoint(), a.Name, logf)
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		return nil, "", err
	}
	return []string{"-c", cf, "-p", dir, "-e", logf}, logf, nil
}

// tailFile is the end of a log file, for errors.
func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}

// alive checks that every appliance's server still runs.
func (as *appliances) alive() error {
	for _, r := range as.runs {
		select {
		case <-r.done:
			return fmt.Errorf("testbed: appliance %s: %s exited during the run: %s\n%s", r.plan.Name, filepath.Base(r.cmd.Path), r.cmd.ProcessState, tailFile(r.log))
		default:
		}
	}
	return nil
}

// cpuTime is a process's CPU time so far, every thread (ns; from
// /proc/PID/task/*/schedstat).
func cpuTime(pid int) uint64 {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	var sum uint64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			v, _ := strconv.ParseUint(f[0], 10, 64)
			sum += v
		}
	}
	return sum
}

// busy returns every appliance's utilization since the previous call (its
// server's CPU time over the wall-clock time sec, and over its CPU share
// when it has one; at most 1).
func (as *appliances) busy(sec float64) []float64 {
	out := make([]float64, len(as.runs))
	for i, r := range as.runs {
		c := cpuTime(r.cmd.Process.Pid)
		if c >= r.cpu && sec > 0 {
			share := 1.0
			r.mu.Lock()
			if r.share > 0 {
				share = r.share
			}
			r.mu.Unlock()
			out[i] = min(float64(c-r.cpu)/1e9/sec/share, 1)
		}
		r.cpu = c
	}
	return out
}

// setShare gives the appliance name's server share of one CPU from now
// on; the samples' busy fractions are then of the new share. Only a
// server the plan limits (its CPU below 1) can be given another share.
func (as *appliances) setShare(name string, share float64) error {
	for _, r := range as.runs {
		if r.plan.Name != name {
			continue
		}
		if r.cg == nil {
			return fmt.Errorf("testbed: appliance %s runs without a CPU limit (parallelism 1 or more): no share to change", name)
		}
		if !(share >= minCPUShare && share <= 1) {
			return fmt.Errorf("testbed: appliance %s: a CPU share of %g, want %g to 1", name, share, minCPUShare)
		}
		if err := r.cg.setShare(share); err != nil {
			return fmt.Errorf("testbed: appliance %s: %w", name, err)
		}
		r.mu.Lock()
		r.share = share
		r.mu.Unlock()
		return nil
	}
	return fmt.Errorf("testbed: no appliance %q in this run", name)
}

// stop stops the servers (SIGTERM, then SIGKILL after 5 s) and removes
// their files.
func (as *appliances) stop() {
	for _, r := range as.runs {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, r := range as.runs {
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		r.cg.remove()
	}
	as.runs = nil
	if err := os.RemoveAll(as.dir); err != nil {
		as.tb.log.Warn("removing the appliances' files", "dir", as.dir, "err", err)
	}
}

// Request generators

// Request clients (RunOptions.RequestClient).
const (
	// RequestBuiltin is the request generator of package loadgen, in this
	// process: closed and open loop, every mix, Redis and HTTP.
	RequestBuiltin = "builtin"
	// RequestRedisBenchmark runs closed-loop workloads on kv appliances
	// with redis-benchmark (Debian's redis-tools), one process per mix
	// entry and source VM, in the VM's namespace (see benchmark.go).
	RequestRedisBenchmark = "redis-benchmark"
)

// requests runs a run's request flows (plan.Requests) and counts what
// each completed.
type requests struct {
	tb     *Testbed
	phases [][]spec.Phase // per flow
	flows  []*loadgen.Flow
	bench  []*benchFlow // with RequestRedisBenchmark, per flow (nil: builtin)

	mu   sync.Mutex
	errs []error
	wg   sync.WaitGroup
	stop context.CancelFunc

	prevReq []int64
	prevTok []float64
}

// newRequests builds the generators of the run's request flows.
func newRequests(tb *Testbed, sc *spec.Scenario, client string) (*requests, error) {
	r := &requests{tb: tb, stop: func() {}}
	byName := map[string]*spec.Workload{}
	for i := range sc.Workloads {
		byName[sc.Workloads[i].Name] = &sc.Workloads[i]
	}
	for i, rq := range tb.plan.Requests {
		w := byName[rq.Workload]
		ap, _ := tb.plan.Appliance(rq.Appliance)
		a := &tb.plan.Model.Appliances[tb.plan.appIdx[rq.Appliance]]
		ops, err := loadgen.Ops(a, ap.Protocol, w.Mix)
		if err != nil {
			return nil, fmt.Errorf("testbed: workload %q: %w", w.Name, err)
		}
		v, _ := tb.plan.VM(rq.Src)
		f, err := loadgen.New(loadgen.Config{
			Name: rq.Tenant + "/" + rq.Src + "->" + rq.Appliance, Protocol: ap.Protocol, Ops: ops,
			Outstanding: w.Outstanding, Rate: w.RequestRate, Connections: w.Connections,
			Dial: loadgen.DialFrom(v.Addr, ap.Endpoint(), tb.ns[v.NS].Do),
			Host: ap.Name, Seed: uint64(sc.Seed)<<20 + uint64(i), Logger: tb.log,
		})
		if err != nil {
			return nil, fmt.Errorf("testbed: workload %q: %w", w.Name, err)
		}
		r.flows = append(r.flows, f)
		r.phases = append(r.phases, w.Intervals(time.Duration(sc.Duration)))
		if client == RequestRedisBenchmark {
			b, err := newBenchFlow(tb, rq, ap, w, ops)
			if err != nil {
				return nil, err
			}
			r.bench = append(r.bench, b)
		}
	}
	r.prevReq, r.prevTok = make([]int64, len(r.flows)), make([]float64, len(r.flows))
	return r, nil
}

// prepare stores what the flows' reads get, through the network from
// each flow's VM.
func (r *requests) prepare(ctx context.Context) error {
	done := map[string]bool{}
	for i, f := range r.flows {
		rq := r.tb.plan.Requests[i]
		// one flow per appliance and mix is enough: the objects are shared
		key := rq.Appliance + "/" + rq.Workload
		if done[key] {
			continue
		}
		done[key] = true
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f.Prepare(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("testbed: %w", err)
		}
	}
	return nil
}

func (r *requests) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *requests) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// begin runs every flow during its phases, from t0.
func (r *requests) begin(ctx context.Context, t0 time.Time) {
	ctx, cancel := context.WithCancel(ctx)
	r.stop = cancel
	for i, f := range r.flows {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for k, ph := range r.phases[i] {
				if ph.Stop <= ph.Start {
					continue
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(t0.Add(time.Duration(ph.Start)))):
				}
				pctx, cancel := context.WithDeadline(ctx, t0.Add(time.Duration(ph.Stop)))
				var err error
				if r.bench != nil {
					err = r.bench[i].run(pctx, f)
				} else {
					err = f.Run(pctx, k)
				}
				cancel()
				if err != nil && ctx.Err() == nil {
					r.fail(fmt.Errorf("testbed: request flow %s (workload %s): %w", f.Config().Name, r.tb.plan.Requests[i].Workload, err))
					return
				}
			}
		}()
	}
}

// end stops the flows and waits for them.
func (r *requests) end() {
	r.stop()
	r.wg.Wait()
}

// sample fills a sample's request flows (requests/s and tokens/s since the
// previous sample, sec seconds ago) and appliances (utilization, and the
// capacity for the mix served: tokens ÷ busy time).
func (r *requests) sample(s *eval.Sample, as *appliances, sec float64) {
	if len(r.flows) == 0 && len(r.tb.plan.Appliances) == 0 {
		return
	}
	s.Requests = make([]eval.RequestSample, len(r.flows))
	served := make([]float64, len(r.tb.plan.Appliances))
	for i, f := range r.flows {
		n, tok := f.Totals()
		s.Requests[i] = eval.RequestSample{Requests: float64(n-r.prevReq[i]) / sec, Tokens: (tok - r.prevTok[i]) / sec}
		served[r.tb.plan.appIdx[r.tb.plan.Requests[i].Appliance]] += tok - r.prevTok[i]
		r.prevReq[i], r.prevTok[i] = n, tok
	}
	s.ApplianceBusy = as.busy(sec)
	s.ApplianceCapacity = make([]float64, len(served))
	for a, b := range s.ApplianceBusy {
		if b > 0 {
			s.ApplianceCapacity[a] = served[a] / (b * sec)
		}
	}
}

// failed sums the flows' failed requests and dropped arrivals.
func (r *requests) failed() (failed, dropped int64) {
	for _, f := range r.flows {
		failed += f.Failed()
		dropped += f.Dropped()
	}
	return failed, dropped
}

// inputRequests adds the run's request flows, appliances and VDC
// guarantees to its input, as the simulator does.
func (tb *Testbed) inputRequests(in *eval.Input, sc *spec.Scenario) {
	for _, rq := range tb.plan.Requests {
		in.RequestFlows = append(in.RequestFlows, eval.RequestFlow{Tenant: rq.Tenant, Src: rq.Src, Appliance: rq.Appliance})
	}
	for _, a := range tb.plan.Appliances {
		in.Appliances = append(in.Appliances, a.Name)
	}
	if len(tb.plan.Requests) == 0 {
		return
	}
	in.TokenScale = sc.TokenScale()
	in.ApplianceGuarantees = map[string]map[string]float64{}
	for _, t := range sc.Tenants {
		if t.VDC == nil {
			continue
		}
		for _, g := range t.VDC.Appliances {
			if in.ApplianceGuarantees[t.Name] == nil {
				in.ApplianceGuarantees[t.Name] = map[string]float64{}
			}
			in.ApplianceGuarantees[t.Name][g.Appliance] = float64(g.Guarantee)
		}
	}
}
