// Package proxybench measures what the proxy (Pulsar's request-aware
// enforcer) adds in front of a real Redis, side by side in one run with
// twemproxy (Debian's nutcracker) and with no proxy at all: redis-benchmark
// against each target with the same settings, requests/s and latency
// percentiles per target, pipelining depth and client count, the p99 each
// proxy adds over direct, and each proxy's CPU per 100K requests/s
// (`bulkhead bench proxy`).
//
// The Bulkhead proxy runs in this process with isolation on: one RESP
// appliance, one flow whose path is [forward link, appliance, reverse
// link], allocated a finite rate on every element (Allocation tokens/s,
// far above what loopback can carry), so every request goes through the
// flow's multi-resource token bucket and its accounting; its statistics
// are collected every second, as a host agent would. Its CPU is this
// process's (getrusage), nutcracker's is read from /proc/PID/stat.
package proxybench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/proxy"
)

// Targets.
const (
	Direct    = "direct"    // redis-server itself
	Twemproxy = "twemproxy" // nutcracker in front of it
	Bulkhead  = "bulkhead"  // the proxy, in this process, in front of it
)

// Allocation is the rate, tokens/s on every element of the flow's path,
// the Bulkhead target runs at: finite, so the buckets run, and far above
// what the runs reach (an appliance token is 8000 per small request, Fig.
// 6(b): 125M requests/s), so it never binds.
const Allocation = 1e12

// Options configures Run.
type Options struct {
	// Requests is redis-benchmark's -n (per test and run) without
	// pipelining; a pipelined run sends Requests × its depth, so that
	// runs last comparably long. The same for every target.
	Requests int
	Clients  []int    // -c values
	Pipeline []int    // -P values
	Targets  []string // of Direct, Twemproxy, Bulkhead
	// Tests are redis-benchmark's -t tests, each run on its own so that
	// CPU is measured per test (nil: set, get).
	Tests []string
	// Rounds repeats every run, interleaved (round 1 of every setting
	// and target, then round 2, ...; 0: 1); the table shows medians.
	Rounds int
	// Progress receives a line per run (nil: none).
	Progress io.Writer
	// CPUProfile, if set, receives a pprof CPU profile of this process
	// from the first Bulkhead run to the end: the proxy's, since nothing
	// else here works while redis-benchmark runs.
	CPUProfile io.Writer
}

// Row is one redis-benchmark run (one target, depth, client count, test).
type Row struct {
	Round    int // from 1; 0 in a Summary
	Target   string
	Pipeline int
	Clients  int
	Test     string // as redis-benchmark names it ("SET", "GET")
	Requests int    // -n
	RPS      float64
	P50, P99 float64 // ms, as redis-benchmark measures them (per pipelined batch)
	// AddedP99 is P99 minus direct's for the same depth, clients and test
	// (ms; NaN when direct was not run).
	AddedP99 float64
	// CPU is the proxy process's CPU time during the run (0 for direct);
	// CPUPer100K the cores it would use at 100K requests/s: CPU ÷
	// requests × 100K (NaN for direct).
	CPU        time.Duration
	CPUPer100K float64
	// RedisCPUPer100K is redis-server's CPU at 100K requests/s during
	// the run, measured as CPUPer100K (behind a proxy, Redis serves fewer
	// or more connections and reads per request).
	RedisCPUPer100K float64
	// SyscallsPerRequest is the proxy process's read and write system
	// calls during the run per request (/proc/PID/io; NaN for direct).
	SyscallsPerRequest float64
	// Accounted counts the requests the Bulkhead proxy's statistics saw
	// answered during the run (Collect's appliance Completed); 0 for the
	// other targets.
	Accounted uint64
	Wall      time.Duration
}

// Result is a bench's rows and what it ran on.
type Result struct {
	Rows       []Row // every run
	Rounds     int
	Env        string // versions, cores
	Allocation float64
}

var knownTargets = []string{Direct, Twemproxy, Bulkhead}

func (o *Options) check() error {
	if o.Requests < 1 {
		return fmt.Errorf("--requests: expected at least 1, got %d", o.Requests)
	}
	if len(o.Clients) == 0 || len(o.Pipeline) == 0 || len(o.Targets) == 0 {
		return errors.New("--clients, --pipeline and --targets need at least one value each")
	}
	for _, c := range o.Clients {
		if c < 1 {
			return fmt.Errorf("--clients: %d is not a positive count", c)
		}
	}
	for _, p := range o.Pipeline {
		if p < 1 {
			return fmt.Errorf("--pipeline: %d is not a positive depth", p)
		}
	}
	seen := map[string]bool{}
	for _, t := range o.Targets {
		if !slices.Contains(knownTargets, t) {
			return fmt.Errorf("--targets: unknown target %q (expected %s)", t, strings.Join(knownTargets, ", "))
		}
		if seen[t] {
			return fmt.Errorf("--targets: %q listed twice", t)
		}
		seen[t] = true
	}
	if o.Rounds == 0 {
		o.Rounds = 1
	}
	if o.Rounds < 1 {
		return fmt.Errorf("--rounds: expected at least 1, got %d", o.Rounds)
	}
	if len(o.Tests) == 0 {
		o.Tests = []string{"set", "get"}
	}
	return nil
}

// target is a server redis-benchmark runs against.
type target struct {
	name string
	addr string
	cpu  func() (time.Duration, error) // nil: not measured
	// syscalls returns the proxy's read and write system calls so far
	// (nil: not measured).
	syscalls func() (uint64, error)
	// accounted returns the requests the proxy's statistics counted
	// answered so far (nil: not a Bulkhead target).
	accounted func() uint64
}

// Run starts redis-server, the proxies of opt.Targets in front of it and
// runs redis-benchmark against each, interleaved by setting (every target
// with one depth and client count before the next); the servers stop
// before it returns, whatever happens (ctx's end included).
func Run(ctx context.Context, opt Options) (*Result, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	benchBin, err := need("redis-benchmark")
	if err != nil {
		return nil, err
	}
	if _, err := need("redis-server"); err != nil {
		return nil, err
	}
	if slices.Contains(opt.Targets, Twemproxy) {
		if _, err := need("nutcracker"); err != nil {
			return nil, err
		}
	}
	progress := opt.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir, err := os.MkdirTemp("", "bulkhead-bench-proxy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	redis, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	defer redis.Stop()
	targets := map[string]*target{Direct: {name: Direct, addr: redis.addr}}
	if slices.Contains(opt.Targets, Twemproxy) {
		tw, err := startTwemproxy(dir, redis.addr)
		if err != nil {
			return nil, err
		}
		defer tw.Stop()
		targets[Twemproxy] = &target{name: Twemproxy, addr: tw.addr, cpu: tw.cpu, syscalls: tw.syscalls}
	}
	if slices.Contains(opt.Targets, Bulkhead) {
		bh, stop, err := startBulkhead(ctx, redis.addr)
		if err != nil {
			return nil, err
		}
		defer stop()
		targets[Bulkhead] = bh
	}
	res := &Result{Allocation: Allocation, Env: fmt.Sprintf("%s; %s; %s; %d cores, GOMAXPROCS %d",
		version(ctx, benchBin), version(ctx, "redis-server"), nutcrackerVersion(ctx, opt.Targets), runtime.NumCPU(), runtime.GOMAXPROCS(0))}

	total := opt.Rounds * len(opt.Pipeline) * len(opt.Clients) * len(opt.Targets) * len(opt.Tests)
	fmt.Fprintf(progress, "bench proxy: %d redis-benchmark runs (%d rounds of %s), redis-server at %s\n",
		total, opt.Rounds, strings.Join(opt.Targets, ", "), redis.addr)
	profiling := false
	defer func() {
		if profiling {
			pprof.StopCPUProfile()
		}
	}()
	n := 0
	for round := 1; round <= opt.Rounds; round++ {
		for _, depth := range opt.Pipeline {
			for _, clients := range opt.Clients {
				for _, name := range opt.Targets {
					t := targets[name]
					if name == Bulkhead && opt.CPUProfile != nil && !profiling {
						if err := pprof.StartCPUProfile(opt.CPUProfile); err != nil {
							return nil, fmt.Errorf("CPU profile: %w", err)
						}
						profiling = true
					}
					for _, test := range opt.Tests {
						n++
						row, err := runOne(ctx, benchBin, redis, t, test, opt.Requests*depth, clients, depth)
						if err != nil {
							return nil, err
						}
						row.Round = round
						fmt.Fprintf(progress, "bench proxy: [%d/%d] %-9s -P %-3d -c %-3d %-4s %10.0f req/s  p50 %.3f ms  p99 %.3f ms  (%.1f s)\n",
							n, total, name, depth, clients, row.Test, row.RPS, row.P50, row.P99, row.Wall.Seconds())
						res.Rows = append(res.Rows, row)
					}
				}
			}
		}
	}
	if err := redis.alive(); err != nil {
		return nil, err
	}
	fillAdded(res.Rows)
	res.Rounds = opt.Rounds
	return res, nil
}

func nutcrackerVersion(ctx context.Context, targets []string) string {
	if !slices.Contains(targets, Twemproxy) {
		return "no nutcracker"
	}
	return version(ctx, "nutcracker")
}

// alive reports an error if the server exited during the bench.
func (p *process) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited during the bench (%v); log:\n%s", p.name, p.err, tail(p.log))
	default:
		return nil
	}
}

// runOne runs redis-benchmark once against t.
func runOne(ctx context.Context, bin string, redis *process, t *target, test string, requests, clients, depth int) (Row, error) {
	host, port, err := net.SplitHostPort(t.addr)
	if err != nil {
		return Row{}, err
	}
	args := []string{"-h", host, "-p", port, "-t", test, "-n", strconv.Itoa(requests),
		"-c", strconv.Itoa(clients), "-P", strconv.Itoa(depth), "--csv"}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	var cpu0 time.Duration
	if t.cpu != nil {
		if cpu0, err = t.cpu(); err != nil {
			return Row{}, fmt.Errorf("%s: CPU time: %w", t.name, err)
		}
	}
	redis0, err := redis.cpu()
	if err != nil {
		return Row{}, fmt.Errorf("redis-server: CPU time: %w", err)
	}
	var sys0 uint64
	if t.syscalls != nil {
		if sys0, err = t.syscalls(); err != nil {
			return Row{}, fmt.Errorf("%s: system calls: %w", t.name, err)
		}
	}
	var acc0 uint64
	if t.accounted != nil {
		acc0 = t.accounted()
	}
	start := time.Now()
	out, err := cmd.Output()
	wall := time.Since(start)
	if ctx.Err() != nil {
		return Row{}, ctx.Err()
	}
	cmdline := "redis-benchmark " + strings.Join(args, " ")
	if err != nil {
		return Row{}, fmt.Errorf("%s against %s: %v\n%s%s", cmdline, t.name, err, out, stderr.String())
	}
	row := Row{Target: t.name, Pipeline: depth, Clients: clients, Requests: requests, Wall: wall,
		AddedP99: math.NaN(), CPUPer100K: math.NaN(), SyscallsPerRequest: math.NaN()}
	if t.cpu != nil {
		cpu1, err := t.cpu()
		if err != nil {
			return Row{}, fmt.Errorf("%s: CPU time: %w", t.name, err)
		}
		row.CPU = cpu1 - cpu0
		row.CPUPer100K = row.CPU.Seconds() / float64(requests) * 1e5
	}
	redis1, err := redis.cpu()
	if err != nil {
		return Row{}, fmt.Errorf("redis-server: CPU time: %w", err)
	}
	row.RedisCPUPer100K = (redis1 - redis0).Seconds() / float64(requests) * 1e5
	if t.syscalls != nil {
		sys1, err := t.syscalls()
		if err != nil {
			return Row{}, fmt.Errorf("%s: system calls: %w", t.name, err)
		}
		row.SyscallsPerRequest = float64(sys1-sys0) / float64(requests)
	}
	if t.accounted != nil {
		row.Accounted = t.accounted() - acc0
	}
	ms, err := ParseCSV(out)
	if err != nil {
		return Row{}, fmt.Errorf("%s against %s: %w (stderr: %s)", cmdline, t.name, err, stderr.String())
	}
	if len(ms) != 1 {
		return Row{}, fmt.Errorf("%s against %s: %d result lines, want 1", cmdline, t.name, len(ms))
	}
	row.Test, row.RPS, row.P50, row.P99 = ms[0].Test, ms[0].RPS, ms[0].P50, ms[0].P99
	return row, nil
}

// fillAdded sets every row's AddedP99 from direct's row of the same
// round and setting.
func fillAdded(rows []Row) {
	type key struct {
		round, p, c int
		test        string
	}
	direct := map[key]float64{}
	for _, r := range rows {
		if r.Target == Direct {
			direct[key{r.Round, r.Pipeline, r.Clients, r.Test}] = r.P99
		}
	}
	for i, r := range rows {
		if d, ok := direct[key{r.Round, r.Pipeline, r.Clients, r.Test}]; ok {
			rows[i].AddedP99 = r.P99 - d
		}
	}
}

// Summary returns one row per target and setting: the median over the
// rounds of each measure (requests/s, p50, p99, CPU, system calls,
// requests accounted), AddedP99 the difference of the median p99s.
func Summary(rows []Row) []Row {
	type key struct {
		target string
		p, c   int
		test   string
	}
	groups := map[key][]Row{}
	var order []key
	for _, r := range rows {
		k := key{r.Target, r.Pipeline, r.Clients, r.Test}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Row, 0, len(order))
	for _, k := range order {
		g := groups[k]
		med := func(f func(Row) float64) float64 {
			v := make([]float64, len(g))
			for i, r := range g {
				v[i] = f(r)
			}
			return median(v)
		}
		s := g[0]
		s.Round = 0
		s.RPS = med(func(r Row) float64 { return r.RPS })
		s.P50 = med(func(r Row) float64 { return r.P50 })
		s.P99 = med(func(r Row) float64 { return r.P99 })
		s.CPU = time.Duration(med(func(r Row) float64 { return float64(r.CPU) }))
		s.CPUPer100K = med(func(r Row) float64 { return r.CPUPer100K })
		s.RedisCPUPer100K = med(func(r Row) float64 { return r.RedisCPUPer100K })
		s.SyscallsPerRequest = med(func(r Row) float64 { return r.SyscallsPerRequest })
		s.Accounted = uint64(med(func(r Row) float64 { return float64(r.Accounted) }))
		s.Wall = time.Duration(med(func(r Row) float64 { return float64(r.Wall) }))
		s.AddedP99 = math.NaN()
		out = append(out, s)
	}
	fillAdded(out)
	return out
}

// median of v (NaN if any is: a measure that does not apply).
func median(v []float64) float64 {
	v = slices.Clone(v)
	for _, x := range v {
		if math.IsNaN(x) {
			return math.NaN()
		}
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// startBulkhead serves the proxy on a loopback port in front of redis:
// one RESP appliance, one flow allocated Allocation on every element of
// its path, statistics collected every second. stop ends it.
func startBulkhead(ctx context.Context, redis string) (t *target, stop func(), err error) {
	app := proxy.Appliance{Name: "redis", Protocol: proxy.RESP, Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", redis)
	}}
	p, err := proxy.New(proxy.Config{}, app)
	if err != nil {
		return nil, nil, err
	}
	flow := proxy.Flow{ID: mech.FlowID{Src: "bench", Dst: app.Name}, Tenant: "bench", Path: []mech.PathElem{
		{Resource: 0, Role: mech.Forward}, {Resource: 2, Role: mech.Appliance}, {Resource: 1, Role: mech.Reverse}}}
	rates := []float64{Allocation, Allocation, Allocation}
	if err := p.SetAllocation(flow.ID, rates); err != nil {
		p.Close()
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		p.Listen(ctx, ln, func(net.Conn) (proxy.Flow, error) { return flow, nil })
	})
	// The statistics a host agent would collect and report every second.
	var mu sync.Mutex
	var answered uint64
	collect := func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range p.Collect().Appliances {
			answered += a.Completed
		}
		return answered
	}
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				collect()
			}
		}
	})
	stop = func() {
		cancel()
		p.Close()
		wg.Wait()
	}
	addr := ln.Addr().String()
	if err := ping(addr); err != nil {
		stop()
		return nil, nil, fmt.Errorf("bulkhead proxy on %s: %w", addr, err)
	}
	got, ok := p.Rates(flow.ID)
	if !ok || !slices.Equal(got, rates) {
		stop()
		return nil, nil, fmt.Errorf("bulkhead proxy: flow's bucket rates %v, want the allocation %v", got, rates)
	}
	return &target{name: Bulkhead, addr: addr, cpu: func() (time.Duration, error) { return selfCPU(), nil },
		syscalls: func() (uint64, error) { return procSyscalls("self") }, accounted: collect}, stop, nil
}

// Goal checks issue 14's item 5 on the rows (one per target and setting:
// Summary's): with isolation on, Bulkhead's
// throughput at least twemproxy's for every setting, and the p99 it adds
// over direct under 100 µs unpipelined. It returns one line per failed
// check, and whether every check passed (false too when a target needed is
// missing).
func Goal(rows []Row) (lines []string, met bool) {
	type key struct {
		p, c int
		test string
	}
	tw := map[key]Row{}
	for _, r := range rows {
		if r.Target == Twemproxy {
			tw[key{r.Pipeline, r.Clients, r.Test}] = r
		}
	}
	met = true
	checked := 0
	for _, r := range rows {
		if r.Target != Bulkhead {
			continue
		}
		if t, ok := tw[key{r.Pipeline, r.Clients, r.Test}]; ok {
			checked++
			if r.RPS < t.RPS {
				met = false
				lines = append(lines, fmt.Sprintf("-P %d -c %d %s: throughput %.0f req/s, %.0f%% of twemproxy's %.0f", r.Pipeline, r.Clients, r.Test, r.RPS, 100*r.RPS/t.RPS, t.RPS))
			}
		}
		if r.Pipeline == 1 && !math.IsNaN(r.AddedP99) {
			checked++
			if r.AddedP99 >= 0.1 {
				met = false
				lines = append(lines, fmt.Sprintf("-P 1 -c %d %s: p99 added %.0f µs (≥ 100 µs)", r.Clients, r.Test, 1000*r.AddedP99))
			}
		}
	}
	if checked == 0 {
		return []string{"not checked: needs the bulkhead target with twemproxy or direct"}, false
	}
	has := func(target string) bool {
		return slices.ContainsFunc(rows, func(r Row) bool { return r.Target == target })
	}
	if !has(Twemproxy) {
		met = false
		lines = append(lines, "throughput not compared: twemproxy not run")
	}
	if !has(Direct) {
		met = false
		lines = append(lines, "p99 added not measured: direct not run")
	}
	return lines, met
}
