package testbed

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// needAppliances is needRoot for tests of real appliances: it also fails
// (never skips) without their servers.
func needAppliances(t *testing.T, bins ...string) {
	t.Helper()
	needRoot(t)
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("%s not found: install it (apt-get install -y redis-server redis-tools nginx)", b)
		}
	}
}

// requireNoApplianceFiles fails the test if the run left its appliances'
// files.
func requireNoApplianceFiles(t *testing.T, prefix string) {
	t.Helper()
	if _, err := os.Stat(applianceDir(prefix)); !os.IsNotExist(err) {
		t.Fatalf("run %s left its appliances' files in %s (%v)", prefix, applianceDir(prefix), err)
	}
	if left := leftCgroups(prefix); len(left) > 0 {
		t.Fatalf("run %s left its appliances' control groups: %v", prefix, left)
	}
}

// flowMeans returns every request flow's mean requests/s and tokens/s
// over the samples from `from` on, by tenant.
func flowMeans(in *eval.Input, from time.Duration) (req, tok map[string]float64) {
	req, tok = map[string]float64{}, map[string]float64{}
	n := 0
	for _, s := range in.Samples {
		if s.T <= from {
			continue
		}
		n++
		for i, f := range in.RequestFlows {
			req[f.Tenant] += s.Requests[i].Requests
			tok[f.Tenant] += s.Requests[i].Tokens
		}
	}
	for k := range req {
		req[k] /= float64(n)
		tok[k] /= float64(n)
	}
	return req, tok
}

func TestPlanAppliances(t *testing.T) {
	sc, tp := parseScenario(t, `
name: apps
duration: 1s
seed: 3
topology: {kind: fat-tree, fat_tree: {k: 4, link: 10Gbps}}
appliances:
  - {name: kv, server: s16, model: kv}
  - {name: fs, server: s9, model: filestore}
tenants:
  - name: T
    guarantee: 10Mbps
    vms:
      - {name: a, server: s1}
      - {name: b, server: s2}
      - {name: c, server: s5}
      - {name: d, server: s6}
      - {name: e, server: s16}
    vdc: {appliances: [{appliance: kv, guarantee: 10MT/s}, {appliance: fs, guarantee: 10MT/s}]}
workloads:
  - {tenant: T, kind: requests, src: [a, b, c, d, e], appliance: kv, outstanding: 2, mix: [{type: get, size: 100}]}
  - {tenant: T, kind: requests, src: [a, b, c, d], appliance: fs, request_rate: 10, mix: [{type: read, size: 100, fraction: 0.5}, {type: cwrite, size: 100, fraction: 0.5}]}
`)
	p, err := NewPlan(sc, tp, PlanOptions{Prefix: "bhapps"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Appliances) != 2 || len(p.Requests) != 9 {
		t.Fatalf("%d appliances, %d request flows", len(p.Appliances), len(p.Requests))
	}
	kv, _ := p.Appliance("kv")
	if kv.NS != "bhapps-a-kv" || kv.Addr.String() != "10.202.0.1" || kv.Gateway.String() != "10.202.0.0" || kv.Port != RedisPort || kv.Protocol != model.ProtoRedis {
		t.Errorf("kv: %+v", kv)
	}
	fs, _ := p.Appliance("fs")
	if fs.Addr.String() != "10.202.0.3" || fs.Port != HTTPPort || fs.Protocol != model.ProtoHTTP {
		t.Errorf("fs: %+v", fs)
	}
	// The declared model carries the endpoints; the scenario does not.
	if a := p.Model.Appliances[0]; a.Address != "10.202.0.1" || a.Port != RedisPort || a.Protocol != model.ProtoRedis {
		t.Errorf("model's kv: %+v", a)
	}
	if sc.Appliances[0].Address != "" {
		t.Error("the plan wrote into the scenario's appliances")
	}
	// Requests and replies follow the routes the simulator gives the
	// flow, ECMP included; the one from s16 (e) crosses no link.
	rules := 0
	for _, n := range p.Nodes {
		rules += len(n.Rules)
	}
	t.Logf("%d policy rules", rules)
	for _, rq := range p.Requests {
		v, _ := p.VM(rq.Src)
		a, _ := p.Appliance(rq.Appliance)
		fwd := walkAddr(t, p, v.Server, v.Addr, a.Server, a.Addr)
		rev := walkAddr(t, p, a.Server, a.Addr, v.Server, v.Addr)
		if !equalInts(fwd, rq.Fwd) || !equalInts(rev, rq.Rev) {
			t.Errorf("%s->%s: routes take %v and back %v, the simulator's %v and %v", rq.Src, rq.Appliance, fwd, rev, rq.Fwd, rq.Rev)
		}
		if rq.Src == "e" && len(fwd)+len(rev) != 0 {
			t.Errorf("e->kv on one server crosses %v %v", fwd, rev)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAppliancesRefused (c): encryption, hypervisor and custom appliances
// stay in the simulator; requests through appliances (via) or to VMs, and
// types with no protocol operation, are refused before anything is built.
func TestAppliancesRefused(t *testing.T) {
	base := `
name: refused
duration: 1s
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 3, edge: 10Gbps}}
appliances:
  - %APP%
tenants:
  - name: T
    guarantee: 10Mbps
    vms: [{name: a, server: s1}, {name: b, server: s2}]
    vdc: {appliances: [{appliance: x, guarantee: 10MT/s}]}
workloads:
  - %WL%
`
	kvWL := `{tenant: T, kind: requests, src: a, appliance: x, outstanding: 1, mix: [{type: get, size: 100}]}`
	for _, c := range []struct{ app, wl, want string }{
		{`{name: x, server: s3, model: encryption}`, `{tenant: T, kind: requests, src: a, appliance: x, outstanding: 1, mix: [{type: aes, size: 100}]}`,
			"appliances[0] (x) cannot be emulated: model encryption has no real server here"},
		{`{name: x, hypervisor: true, model: encryption}`, `{tenant: T, kind: requests, src: a, appliance: x, outstanding: 1, mix: [{type: rc4, size: 100}]}`,
			"appliances[0] (x) cannot be emulated: it runs in the hypervisor"},
		{`{name: x, server: s3, model: custom, costs: [{type: lookup, base: 1us}]}`, `{tenant: T, kind: requests, src: a, appliance: x, outstanding: 1, mix: [{type: lookup, size: 100}]}`,
			"appliances[0] (x) cannot be emulated: model custom has no real server here"},
		{`{name: x, server: s3, model: kv}`, `{tenant: T, kind: requests, src: a, dst: b, via: [{appliance: x, type: get}], outstanding: 1, mix: [{type: get, size: 100}]}`,
			"requests through appliances (via) are not emulated"},
		{`{name: x, server: s3, model: kv, costs: [{type: scan, base: 1us}]}`, `{tenant: T, kind: requests, src: a, appliance: x, outstanding: 1, mix: [{type: scan, size: 100}]}`,
			`type "scan" has no Redis operation`},
		{`{name: x, server: s3, model: kv, address: 10.9.9.9, port: 6379, protocol: redis}`, kvWL,
			"the testbed gives appliances their addresses"},
		{`{name: x, server: s3, model: kv, parallelism: 0.1}`, kvWL,
			"parallelism 0.1 is below the smallest share of a CPU the testbed gives a server (0.2)"},
	} {
		y := strings.ReplaceAll(strings.ReplaceAll(base, "%APP%", c.app), "%WL%", c.wl)
		sc, tp := parseScenario(t, y)
		prefix := "tb" + NewPrefix()[2:]
		_, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix}, Mechanism: "none"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %s: Run returned %v, want an error with %q", c.app, c.wl, err, c.want)
			continue
		}
		t.Logf("refused: %v", err)
		if _, err := os.Stat(statePath(prefix)); !os.IsNotExist(err) {
			t.Errorf("a refused run left its state file")
		}
	}
}

// TestRealKV (a, d): scenarios/real-kv.yaml under none on a real
// redis-server: both tenants' request flows are measured every sample,
// the one with 8 times the outstanding requests takes most of the store
// (Pulsar's problem), and the total is what redis-benchmark, run from the
// same VMs through the same emulated network, gets from it; nothing is
// left behind.
func TestRealKV(t *testing.T) {
	needAppliances(t, "redis-server", "redis-benchmark")
	sc, tp := loadScenario(t, "../scenarios/real-kv.yaml")
	sc.Duration = spec.Duration(4 * time.Second)

	// The store's capacity: redis-benchmark as the client, the same
	// outstanding requests and mix, no control plane.
	bprefix := testPrefix(t)
	capacity := func() float64 {
		tb, err := Up(context.Background(), sc, tp, Options{Prefix: bprefix, Ephemeral: true})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := tb.Down(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		as, err := tb.startAppliances(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer as.stop()
		r, err := newRequests(tb, sc, RequestRedisBenchmark)
		if err != nil {
			t.Fatal(err)
		}
		defer r.end()
		if err := r.prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.begin(context.Background(), time.Now())
		time.Sleep(time.Second) // warm up
		n0 := int64(0)
		for _, f := range r.flows {
			n, _ := f.Totals()
			n0 += n
		}
		t0 := time.Now()
		time.Sleep(2 * time.Second)
		n1 := int64(0)
		for _, f := range r.flows {
			n, _ := f.Totals()
			n1 += n
		}
		sec := time.Since(t0).Seconds()
		r.end()
		if err := r.err(); err != nil {
			t.Fatal(err)
		}
		return float64(n1-n0) / sec
	}()
	requireGone(t, bprefix)
	requireNoApplianceFiles(t, bprefix)
	t.Logf("redis-benchmark (36 clients, 1 KB gets and puts): %.0f requests/s", capacity)

	prefix := testPrefix(t)
	in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix}, Mechanism: "none"})
	if err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	requireNoApplianceFiles(t, prefix)
	if len(in.RequestFlows) != 2 || len(in.Appliances) != 1 || in.TokenScale != 1e6 || in.ApplianceGuarantees["B"]["kv"] != 160e6 {
		t.Fatalf("input: flows %+v, appliances %v, token scale %g, guarantees %v", in.RequestFlows, in.Appliances, in.TokenScale, in.ApplianceGuarantees)
	}
	for _, s := range in.Samples {
		for i, rs := range s.Requests {
			if rs.Requests <= 0 || math.Abs(rs.Tokens-rs.Requests*8000) > 1e-6*rs.Tokens {
				t.Errorf("t=%v: flow %+v: %.0f requests/s, %.0f tokens/s (8K tokens each)", s.T, in.RequestFlows[i], rs.Requests, rs.Tokens)
			}
		}
		if s.ApplianceBusy[0] <= 0 || s.ApplianceBusy[0] > 1 {
			t.Errorf("t=%v: the store's utilization %v", s.T, s.ApplianceBusy[0])
		}
	}
	req, tok := flowMeans(in, 500*time.Millisecond)
	total := req["A"] + req["B"]
	share := req["A"] / total
	rep, err := eval.Evaluate(*in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("none: A %.0f requests/s (%.1f MT/s), B %.0f (%.1f MT/s): A's share %.2f; total %.0f/s = %.2f of redis-benchmark's; store busy %.2f; VDC compliance %.2f",
		req["A"], tok["A"]/1e6, req["B"], tok["B"]/1e6, share, total, total/capacity, rep.ApplianceUse[0].Mean, rep.VDCCompliance)
	if share < 0.7 {
		t.Errorf("the tenant with 8x the outstanding requests got %.0f%% of the store, want > 70%%", 100*share)
	}
	if total < 0.4*capacity || total > 1.5*capacity {
		t.Errorf("the run's %.0f requests/s against redis-benchmark's %.0f: not the same store", total, capacity)
	}
}

// TestRealFilestore (b, d): a filestore (nginx with WebDAV) read and
// written under none by a closed-loop tenant (GET and PUT of 64 KB) and an
// open-loop one (compressible PUTs of 8 KB at 200/s, from 1 s on).
func TestRealFilestore(t *testing.T) {
	needAppliances(t, "nginx")
	sc, tp := parseScenario(t, `
name: real-fs
duration: 3s
units: MT/s
seed: 2
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 3, edge: 10Gbps}}
appliances:
  - {name: fs, server: s3, model: filestore}
tenants:
  - name: A
    guarantee: 1Gbps
    vms: [{name: a1, server: s1}]
    vdc: {appliances: [{appliance: fs, guarantee: 50MT/s}]}
  - name: B
    guarantee: 1Gbps
    vms: [{name: b1, server: s2}]
    vdc: {appliances: [{appliance: fs, guarantee: 50MT/s}]}
workloads:
  - {tenant: A, kind: requests, src: a1, appliance: fs, outstanding: 4, mix: [{type: read, size: 64KB, fraction: 0.5}, {type: write, size: 64KB, fraction: 0.5}]}
  - {tenant: B, kind: requests, src: b1, appliance: fs, request_rate: 200, start: 1s, mix: [{type: cwrite, size: 8KB}]}
outputs:
  sample: 500ms
`)
	prefix := testPrefix(t)
	in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix}, Mechanism: "none"})
	if err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	requireNoApplianceFiles(t, prefix)
	if len(in.Samples) != 6 || len(in.RequestFlows) != 2 {
		t.Fatalf("%d samples, %d request flows", len(in.Samples), len(in.RequestFlows))
	}
	for _, s := range in.Samples {
		a, b := s.Requests[0], s.Requests[1]
		if a.Requests <= 0 || math.Abs(a.Tokens-a.Requests*64000) > 1e-6*a.Tokens {
			t.Errorf("t=%v: A %.0f requests/s, %.0f tokens/s (64K tokens each)", s.T, a.Requests, a.Tokens)
		}
		switch {
		case s.T <= time.Second && b.Requests != 0:
			t.Errorf("t=%v: B sent %.0f requests/s before its phase", s.T, b.Requests)
		case s.T > time.Second && (b.Requests < 100 || b.Requests > 300 || math.Abs(b.Tokens-b.Requests*8000) > 1e-6*b.Tokens):
			t.Errorf("t=%v: B %.0f requests/s (%.0f tokens/s), want about 200 at 8K tokens each", s.T, b.Requests, b.Tokens)
		}
	}
	req, tok := flowMeans(in, time.Second)
	t.Logf("none: A %.0f requests/s (%.1f MT/s of 64 KB GETs and PUTs), B %.0f requests/s (%.1f MT/s of 8 KB compressible PUTs)",
		req["A"], tok["A"]/1e6, req["B"], tok["B"]/1e6)
}

// helperKV brings scenarios/real-kv.yaml up with its redis-server running,
// says READY and waits to be killed (TestKilledApplianceRunIsRemoved).
func helperKV(ctx context.Context, prefix string) int {
	return helperUpKV(ctx, prefix, "../scenarios/real-kv.yaml", false)
}

// helperKVLeave brings scenarios/real-kv-pulsar.yaml up as `bulkhead
// testbed up` does — its redis-server running, at its CPU share — and
// exits (TestUpLeavesAppliancesRunning).
func helperKVLeave(ctx context.Context, prefix string) int {
	return helperUpKV(ctx, prefix, "../scenarios/real-kv-pulsar.yaml", true)
}

// helperUpKV brings a scenario up with its appliances running and says
// READY; leave: as `bulkhead testbed up` (the run stays, the servers
// outlive this process, which exits), else as a run's process (ephemeral;
// it waits to be killed).
func helperUpKV(ctx context.Context, prefix, file string, leave bool) int {
	sc, err := spec.Load(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tp, err := topo.FromSpec(sc.Topology)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tb, err := Up(ctx, sc, tp, Options{Prefix: prefix, Ephemeral: !leave})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if leave {
		defer tb.Close()
		err = tb.StartAppliances(ctx)
	} else {
		_, err = tb.startAppliances(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("READY")
	if !leave {
		<-ctx.Done()
	}
	return 0
}

// TestUpLeavesAppliancesRunning: a datacenter left up (`bulkhead testbed
// up`) keeps its appliance's server running, in its CPU group, after the
// process that built it has exited; a VM reaches it at its address; `down`
// stops it and removes its files and group with everything else.
func TestUpLeavesAppliancesRunning(t *testing.T) {
	needAppliances(t, "redis-server", "redis-cli")
	prefix := testPrefix(t)
	t.Cleanup(func() { _ = Down(context.Background(), prefix) })
	cmd := startHelper(t, "upkvleave "+prefix)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the process that brought the datacenter up: %v", err)
	}
	left, err := dataplane.Find(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Processes) != 1 || !strings.Contains(left.String(), "redis-server") {
		t.Fatalf("after the builder exited: %s; want its redis-server running", left)
	}
	if len(leftCgroups(prefix)) != 1 {
		t.Errorf("the store's CPU group: %v, want one", leftCgroups(prefix))
	}
	s, err := ReadState(prefix)
	if err != nil {
		t.Fatal(err)
	}
	var vmNS string
	for _, v := range s.VMs {
		if v.Name == "a1" {
			vmNS = v.NS
		}
	}
	if len(s.Appliances) != 1 {
		t.Fatalf("the state's appliances: %+v, want kv", s.Appliances)
	}
	host, port, _ := strings.Cut(s.Appliances[0].Endpoint, ":")
	out, err := exec.Command("ip", "netns", "exec", vmNS, "redis-cli", "-h", host, "-p", port, "ping").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "PONG" {
		t.Errorf("redis-cli ping from VM a1 (%s): %q, %v; want PONG", vmNS, out, err)
	}
	if err := Down(context.Background(), prefix); err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	requireNoApplianceFiles(t, prefix)
}

// TestKilledApplianceRunIsRemoved (d): a process that built a testbed with
// a real appliance is killed (SIGKILL: no cleanup of its own); ReapStale
// removes its namespaces, its redis-server and the appliance's files.
func TestKilledApplianceRunIsRemoved(t *testing.T) {
	needAppliances(t, "redis-server")
	prefix := testPrefix(t)
	cmd := startHelper(t, "upkv "+prefix)
	left, err := dataplane.Find(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Namespaces) != 7 || len(left.Processes) != 1 || !strings.Contains(left.String(), "redis-server") {
		t.Fatalf("before the kill: %s; want 7 namespaces (3 servers, a switch, 2 VMs, the appliance) and redis-server", left)
	}
	if _, err := os.Stat(applianceDir(prefix)); err != nil {
		t.Fatalf("the appliance's files: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if left, err = dataplane.Find(prefix); err != nil || len(left.Namespaces) == 0 {
		t.Fatalf("after SIGKILL: %s, %v: the test does not test the killed path", left, err)
	}
	t.Logf("after SIGKILL: %s", left)
	if _, err := ReapStale(context.Background()); err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	requireNoApplianceFiles(t, prefix)
}

// TestApplianceDiesMidRun (d): the appliance's server killed during a run
// fails the run with a message naming it, and the teardown still removes
// everything.
func TestApplianceDiesMidRun(t *testing.T) {
	needAppliances(t, "redis-server")
	sc, tp := loadScenario(t, "../scenarios/real-kv.yaml")
	sc.Duration = spec.Duration(3 * time.Second)
	prefix := testPrefix(t)
	killed := false
	_, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix}, Mechanism: "none",
		During: func(ctx context.Context, c *RunControl) error {
			if err := c.Sleep(ctx, time.Second); err != nil {
				return nil
			}
			left, err := dataplane.Find(prefix)
			if err != nil {
				return err
			}
			for _, pid := range left.Processes {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(b)) == "redis-server" {
					killed = syscall.Kill(pid, syscall.SIGKILL) == nil
				}
			}
			return nil
		}})
	if !killed {
		t.Fatalf("no redis-server to kill (run: %v)", err)
	}
	if err == nil || !strings.Contains(err.Error(), "appliance kv: redis-server exited during the run") {
		t.Fatalf("run with its store killed: %v", err)
	}
	t.Logf("run failed: %v", err)
	requireGone(t, prefix)
	requireNoApplianceFiles(t, prefix)
}

// TestApplianceCPUShare: a server given a share of a CPU runs in a control
// group of its own at that quota, with a burst of one quota where the
// kernel has it, and the group is gone after removal,
// with its process moved out of it.
func TestApplianceCPUShare(t *testing.T) {
	needRoot(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	prefix := "tb" + NewPrefix()[2:]
	g, err := limitCPU(cgroupName(prefix, "kv"), cmd.Process.Pid, 0.4)
	if err != nil {
		t.Fatal(err)
	}
	defer g.remove()
	procs, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
	if err != nil || strings.TrimSpace(string(procs)) != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("the group's processes: %q (%v), want %d", procs, err, cmd.Process.Pid)
	}
	var quota string
	if b, err := os.ReadFile(filepath.Join(g.dir, "cpu.max")); err == nil {
		quota = strings.TrimSpace(string(b))
	} else {
		q, _ := os.ReadFile(filepath.Join(g.dir, "cpu.cfs_quota_us"))
		p, _ := os.ReadFile(filepath.Join(g.dir, "cpu.cfs_period_us"))
		quota = strings.TrimSpace(string(q)) + " " + strings.TrimSpace(string(p))
	}
	if quota != "2000 5000" {
		t.Errorf("quota and period %q, want 2000 5000 (0.4 of a CPU)", quota)
	}
	burst, err := os.ReadFile(filepath.Join(g.dir, "cpu.max.burst"))
	if err != nil {
		burst, err = os.ReadFile(filepath.Join(g.dir, "cpu.cfs_burst_us"))
	}
	if err == nil && strings.TrimSpace(string(burst)) != "2000" {
		t.Errorf("the group's burst %q, want 2000: a period's unused quota carried into the next", burst)
	}
	weight, err := os.ReadFile(filepath.Join(g.dir, "cpu.weight"))
	want := strconv.Itoa(cgroupV2MaxWeight)
	if err != nil {
		weight, err = os.ReadFile(filepath.Join(g.dir, "cpu.shares"))
		want = strconv.Itoa(cgroupV1MaxShares)
	}
	if err != nil || strings.TrimSpace(string(weight)) != want {
		t.Errorf("the group's CPU weight %q (%v), want %s: the server must get its share on a busy machine", weight, err, want)
	}
	if left := leftCgroups(prefix); len(left) != 1 {
		t.Errorf("the run's groups: %v, want the one made", left)
	}
	removeCgroups(prefix)
	if left := leftCgroups(prefix); len(left) > 0 {
		t.Errorf("groups left after removal: %v", left)
	}
	if _, err := limitCPU(cgroupName(prefix, "kv"), cmd.Process.Pid, 0.1); err == nil || !strings.Contains(err.Error(), "below the smallest") {
		t.Errorf("a share of 0.1: %v, want it refused", err)
	}
}
