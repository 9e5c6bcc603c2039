package testbed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/place"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// A run's measurements are invalid when more than 1/MaxLateSamples of its
// samples are read late, or when a pair's rate in a sample exceeds the
// bottleneck of its route by more than ImpossibleTolerance.
const (
	MaxLateSamples      = 10
	ImpossibleTolerance = 0.10
)

// DefaultSample is the shortest sample interval of a run: real TCP over
// 10 ms windows is too bursty for per-sample compliance.
const DefaultSample = 100 * time.Millisecond

// RunOptions configure Run.
type RunOptions struct {
	Options
	// Mechanism is run by host agents, one `bulkhead agent --controller`
	// process per server with VMs (default: the scenario's). Mechanisms
	// host agents cannot run (mech.Capabilities.RealTraffic: a central
	// controller, VMs' demands, appliances) are refused.
	Mechanism string
	// Params are the mechanism's parameters (default: the scenario's
	// mechanism.params when Mechanism is the scenario's mechanism).
	Params map[string]any
	// AgentHTTP, if set (IP:PORT), makes agent i serve /metrics, /state
	// and /healthz on PORT + i.
	AgentHTTP string
	// AfterRun, if set, is called with the agents' statistics after the
	// workloads, before the testbed is torn down.
	AfterRun func([]AgentStats)
	// Workload is what runs the flows: WorkloadIperf3 (default) or
	// WorkloadBuiltin (the generator in this process; see gen.go).
	Workload string
	// RequestClient is what sends the requests of requests workloads to
	// the real appliances: RequestBuiltin (default, package loadgen) or
	// RequestRedisBenchmark (closed loop on kv appliances; see
	// benchmark.go).
	RequestClient string
	// AgentTrace, if set, receives every agent's per-step trace
	// (agent.Config.Trace), each agent's after the other's at the end.
	AgentTrace io.Writer
	// Sample is the measurement interval (default: the scenario's
	// outputs.sample, at least DefaultSample).
	Sample time.Duration
	// Iperf3 is the iperf3 binary (default "iperf3" on PATH).
	Iperf3 string
	// Binary is the bulkhead executable the control plane's daemons run
	// (Options.Daemons; default: this process's executable).
	Binary string
	// LoseMessages is the fraction of their control messages the agents
	// drop, to measure tolerance of message loss (0: none).
	LoseMessages float64
	// Undeclared tenants are not declared to the controller at the start
	// (their VMs exist, their traffic runs unmanaged): During may apply
	// them.
	Undeclared []string
	// External, if set, runs the agents against an operator's controller
	// instead of the run's own.
	External *External
	// During, if set, runs while the workloads do, from their start, with
	// a handle on the run's control plane (not with InProcess); an error
	// fails the run. Its context ends with the workloads.
	During func(ctx context.Context, c *RunControl) error
}

// Workload engines.
const (
	WorkloadIperf3  = "iperf3"
	WorkloadBuiltin = "builtin"
)

// load runs the flows of a run.
type load interface {
	begin(ctx context.Context, fl []flow, t0 time.Time, scale float64)
	err() error
	stop()
}

// begin starts every flow's iperf3 client at its time.
func (w *workers) begin(ctx context.Context, fl []flow, t0 time.Time, scale float64) {
	for _, f := range fl {
		w.startClient(ctx, f, t0, scale)
	}
}

// flow is one iperf3 test: a pair of a workload during one phase.
type flow struct {
	pair     int
	src, dst string
	workload string
	tenant   string
	udp      bool
	// short: a Poisson stream of sized TCP flows (kind flows, built-in
	// generator only), arrival flows/s with sizes from sizes; rate is
	// then the offered load.
	short   bool
	arrival float64
	sizes   *spec.SizeDist
	conns   int
	rate    float64 // per pair, bits/s, unscaled; 0: no cap (tcp)
	phase   spec.Phase
	port    int
}

// flows lists the iperf3 tests of the scenario's workloads.
func flows(sc *spec.Scenario, p *Plan) ([]flow, error) {
	pidx := p.pairIndex()
	ports := map[string]int{}
	var out []flow
	for _, w := range sc.Workloads {
		switch w.Kind {
		case spec.KindTCP, spec.KindUDP, spec.KindFlows:
		case spec.KindRequests:
			continue // the request generator's (Plan.Requests)
		default:
			return nil, fmt.Errorf("testbed: workload %q: kind %s is not supported on the testbed yet (tcp, udp, flows and requests are)", w.Name, w.Kind)
		}
		for _, pr := range w.Pairs() {
			for _, ph := range w.Intervals(time.Duration(sc.Duration)) {
				if ph.Stop <= ph.Start {
					continue
				}
				port := 5201 + ports[pr[1]]
				ports[pr[1]]++
				if port > 65535 {
					return nil, fmt.Errorf("testbed: too many flows into VM %s", pr[1])
				}
				f := flow{pair: pidx[pr], src: pr[0], dst: pr[1], workload: w.Name, tenant: w.Tenant, udp: w.Kind == spec.KindUDP,
					conns: max(w.Connections, 1), rate: float64(w.Rate), phase: ph, port: port}
				if w.Kind == spec.KindFlows {
					f.short, f.conns, f.arrival, f.sizes = true, 1, w.ArrivalRate, w.Sizes
					f.rate = w.ArrivalRate * meanSize(w.Sizes) * 8 // offered load, the demand
				}
				if f.udp {
					f.conns = 1
				}
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// active reports whether the flow runs at t.
// recordActivity sets what the workloads asked of each pair in the sample
// window [w0, w1) (times from the start of the workloads): the part of the
// window some flow of the pair ran (eval.ActiveIn: Active, ActiveFrom), an
// unbounded demand when bulk TCP ran for at least half of that part, and
// otherwise the offered rate averaged over the window.
func recordActivity(s *eval.Sample, fl []flow, w0, w1 time.Duration) {
	on := make([][]eval.Interval, len(s.Pairs))
	unbounded := make([]time.Duration, len(s.Pairs))
	for _, f := range fl {
		lo, hi := max(w0, time.Duration(f.phase.Start)), min(w1, time.Duration(f.phase.Stop))
		if lo >= hi {
			continue
		}
		on[f.pair] = append(on[f.pair], eval.Interval{Start: lo, Stop: hi})
		if !f.udp && f.rate == 0 {
			unbounded[f.pair] += hi - lo
		} else {
			s.Pairs[f.pair].Demand += f.rate * float64(hi-lo) / float64(w1-w0)
		}
	}
	for i := range s.Pairs {
		a, from := eval.ActiveIn(w0, w1, on[i])
		s.Pairs[i].Active, s.Pairs[i].ActiveFrom = a, from
		if a > 0 && 2*unbounded[i].Seconds() >= a*(w1-w0).Seconds() {
			s.Pairs[i].Demand = math.Inf(1)
		}
	}
}

func (f *flow) active(t time.Duration) bool {
	return t >= time.Duration(f.phase.Start) && t < time.Duration(f.phase.Stop)
}

// Run brings the scenario's datacenter up, starts its appliances' real
// servers, applies the mechanism, runs the workloads with iperf3 (or the
// built-in generator) and the requests workloads with the request
// generator for the scenario's duration, samples every declared pair's
// received throughput from the counters and every request flow's
// completed requests and tokens, and tears everything down
// (also on error and when ctx is cancelled). Rates in the result are in
// bits/s of link-layer frames, divided by the scale: the scenario's units.
func Run(ctx context.Context, sc *spec.Scenario, tp *topo.Topology, o RunOptions) (_ *eval.Input, err error) {
	if o.Mechanism == "" {
		o.Mechanism = sc.Mechanism.Name
	}
	if o.Params == nil && o.Mechanism == sc.Mechanism.Name {
		o.Params = sc.Mechanism.Params
	}
	for i, t := range sc.Tenants {
		if t.Join > 0 || t.Leave > 0 {
			return nil, fmt.Errorf("testbed: %s: tenants[%d] (%s) joins or leaves during the run, which the simulator runs (bulkhead sim); the testbed declares every tenant for the whole run", sc.File, i, t.Name)
		}
	}
	m, err := NewMechanism(o.Mechanism, o.Params, o.Loss)
	if err != nil {
		return nil, err
	}
	if err := place.AdmitFor(sc, tp, m); err != nil {
		return nil, err
	}
	o.ForMechanism(m)
	// The control plane's agents build limiters, schedulers and loss
	// counters; the testbed only measures.
	o.Daemons, o.Limiters, o.Schedulers = true, false, false
	if o.Sample == 0 {
		o.Sample = max(time.Duration(sc.Outputs.Sample), DefaultSample)
	}
	if o.Sample <= 0 || o.Sample > time.Duration(sc.Duration) {
		return nil, fmt.Errorf("testbed: sample interval %v: want > 0 and at most the duration %v", o.Sample, time.Duration(sc.Duration))
	}
	if o.Iperf3 == "" {
		o.Iperf3 = "iperf3"
	}
	switch o.RequestClient {
	case "":
		o.RequestClient = RequestBuiltin
	case RequestBuiltin, RequestRedisBenchmark:
	default:
		return nil, fmt.Errorf("testbed: request client %q: want %s or %s", o.RequestClient, RequestBuiltin, RequestRedisBenchmark)
	}
	if err := CheckApplianceServers(sc); err != nil {
		return nil, err
	}
	var iperf string
	switch o.Workload {
	case "", WorkloadIperf3:
		if !hasFlows(sc) {
			break // requests only: iperf3 is not needed
		}
		if iperf, err = exec.LookPath(o.Iperf3); err != nil {
			return nil, fmt.Errorf("testbed: iperf3 is needed for workloads (apt-get install -y iperf3, or the builtin generator): %w", err)
		}
	case WorkloadBuiltin:
	default:
		return nil, fmt.Errorf("testbed: workload engine %q: want %s or %s", o.Workload, WorkloadIperf3, WorkloadBuiltin)
	}
	o.Ephemeral = true
	if o.Prefix == "" {
		o.Prefix = NewPrefix()
	}
	// a plan without side effects first, to reject what cannot run
	plan, err := NewPlan(sc, tp, PlanOptions{Prefix: o.Prefix, Scale: o.Scale, QueueBytes: o.QueueBytes, QueueTime: o.QueueTime, Limiters: o.Limiters, Schedulers: o.Schedulers})
	if err != nil {
		return nil, err
	}
	fl, err := flows(sc, plan)
	if err != nil {
		return nil, err
	}
	if o.Workload != WorkloadBuiltin {
		for _, f := range fl {
			if f.short {
				return nil, fmt.Errorf("testbed: workload %q: short flows need the builtin workload engine", f.workload)
			}
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if reaped, err := ReapStale(ctx); err != nil {
		o.Logger.Warn("reaping stale runs", "err", err)
	} else if len(reaped) > 0 {
		o.Logger.Info("removed stale runs of dead processes", "prefixes", reaped)
	}

	tb, err := Up(ctx, sc, tp, o.Options)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := tb.Down(cctx); derr != nil {
			err = errors.Join(err, derr)
		}
	}()

	as, err := tb.startAppliances(ctx)
	if err != nil {
		return nil, err
	}
	defer as.stop()
	reqs, err := newRequests(tb, sc, o.RequestClient)
	if err != nil {
		return nil, err
	}
	defer reqs.end()
	if err := reqs.prepare(ctx); err != nil {
		return nil, err
	}

	var w load
	var gen *generator
	if o.Workload == WorkloadBuiltin {
		g := &generator{tb: tb, seed: uint64(sc.Seed)}
		gen = g
		defer g.stop()
		if err := g.listen(fl); err != nil {
			return nil, err
		}
		w = g
	} else {
		iw := &workers{tb: tb, iperf: iperf}
		defer iw.stop()
		if err := iw.startServers(ctx, fl); err != nil {
			return nil, err
		}
		w = iw
	}
	d, err := tb.startDaemons(ctx, sc, o.Mechanism, o.Params, DaemonOptions{Binary: o.Binary, Loss: o.Loss, HTTP: o.AgentHTTP, LoseMessages: o.LoseMessages,
		Trace: o.AgentTrace != nil, Undeclared: o.Undeclared, External: o.External})
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := d.stop(o.AgentTrace); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	var during func(context.Context, time.Time) error
	if o.During != nil {
		during = func(ctx context.Context, t0 time.Time) error {
			return o.During(ctx, &RunControl{T0: t0, d: d, tb: tb, as: as})
		}
	}
	tb.log.Info("controller and host agents started", "mechanism", m.Name(), "agents", len(d.agents))
	var estimates func(context.Context) (map[string]float64, error)
	if len(tb.plan.Appliances) > 0 {
		estimates = d.cli.CapacityEstimates
	}
	in, err := tb.measure(ctx, sc, fl, o, w, reqs, as, during, estimates)
	if err != nil {
		return nil, err
	}
	reqs.end()
	if err := reqs.err(); err != nil {
		return nil, err
	}
	if failed, dropped := reqs.failed(); failed > 0 || dropped > 0 {
		tb.log.Warn("requests failed or dropped", "failed", failed, "dropped", dropped)
	}
	if bad := eval.ImpossibleRates(in, ImpossibleTolerance); len(bad) > 0 {
		in.Invalid = append(in.Invalid, bad[0]+" (try a smaller --scale)")
	}
	w.stop()
	if err := w.err(); err != nil {
		return nil, err
	}
	if gen != nil {
		in.FCTs = gen.completed()
	}
	st, err := d.stats(ctx)
	if err != nil {
		return nil, err
	}
	if o.AfterRun != nil {
		o.AfterRun(st)
	}
	var steps int64
	dropped := 0.0
	for _, a := range st {
		steps += a.Steps
		for _, n := range a.Dropped {
			dropped += n
		}
	}
	tb.log.Info("host agents done", "steps", steps, "messages_dropped", dropped)
	in.Mechanism = o.Mechanism
	return in, nil
}

// workers runs the iperf3 processes of a run.
type workers struct {
	tb    *Testbed
	iperf string
	// clientArgs and serverArgs are added to every iperf3 client's and
	// server's arguments (none: none)
	clientArgs, serverArgs []string

	mu     sync.Mutex
	cancel []context.CancelFunc
	wg     sync.WaitGroup
	errs   []error
}

func (w *workers) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

func (w *workers) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

// stop kills every process and waits for them.
func (w *workers) stop() {
	w.mu.Lock()
	cs := w.cancel
	w.cancel = nil
	w.mu.Unlock()
	for _, c := range cs {
		c()
	}
	w.wg.Wait()
}

// proc is a process a run started.
type proc struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed when it has exited
	stderr bytes.Buffer  // read only after done
}

// run starts iperf3 with args in vm's namespace and waits for it in the
// background; failed is called with its error if it exits on its own with
// one (not when ctx ended it).
func (w *workers) run(ctx context.Context, vm string, args []string, failed func(error, string)) (*proc, error) {
	ctx, cancel := context.WithCancel(ctx)
	p := &proc{cmd: w.tb.Command(ctx, w.iperf, args...), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	if err := w.tb.Start(vm, p.cmd); err != nil {
		cancel()
		return nil, err
	}
	w.mu.Lock()
	w.cancel = append(w.cancel, cancel)
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		err := p.cmd.Wait()
		close(p.done)
		if ctx.Err() == nil && err != nil && failed != nil {
			failed(err, strings.TrimSpace(p.stderr.String()))
		}
	}()
	return p, nil
}

// startServers starts a one-off iperf3 server per flow in its destination
// VM and waits until all listen.
func (w *workers) startServers(ctx context.Context, fl []flow) error {
	type srv struct {
		p    *proc
		port int
		name string
	}
	var srvs []srv
	for _, f := range fl {
		d, _ := w.tb.plan.VM(f.dst)
		name := fmt.Sprintf("iperf3 server for %s->%s (%s) port %d", f.src, f.dst, f.workload, f.port)
		p, err := w.run(ctx, f.dst, append([]string{"-s", "-1", "-B", d.Addr.String(), "-p", strconv.Itoa(f.port)}, w.serverArgs...), nil)
		if err != nil {
			return fmt.Errorf("testbed: %s: %w", name, err)
		}
		srvs = append(srvs, srv{p, f.port, name})
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range srvs {
		for !listening(s.p.cmd.Process.Pid, s.port) {
			select {
			case <-s.p.done:
				return fmt.Errorf("testbed: %s exited: %s: %s", s.name, s.p.cmd.ProcessState, strings.TrimSpace(s.p.stderr.String()))
			default:
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("testbed: %s: %w", s.name, err)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("testbed: %s: not listening after 10s", s.name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// listening reports whether the process has a TCP socket listening on the
// port (/proc/PID/net/tcp shows the sockets of the process's namespace).
func listening(pid, port int) bool {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "net", "tcp"))
	if err != nil {
		return false
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "0A" {
			return true
		}
	}
	return false
}

// startClient runs the flow's iperf3 client from t0+start to t0+stop.
func (w *workers) startClient(ctx context.Context, f flow, t0 time.Time, scale float64) {
	s, _ := w.tb.plan.VM(f.src)
	d, _ := w.tb.plan.VM(f.dst)
	length := time.Duration(f.phase.Stop - f.phase.Start)
	args := []string{"-c", d.Addr.String(), "-B", s.Addr.String(), "-p", strconv.Itoa(f.port),
		"-t", strconv.Itoa(int(math.Ceil(length.Seconds())) + 1), "-O", "0", "--connect-timeout", "3000"}
	if f.conns > 1 {
		args = append(args, "-P", strconv.Itoa(f.conns))
	}
	if f.udp {
		args = append(args, "-u", "-b", strconv.FormatFloat(f.rate*scale, 'f', 0, 64))
	} else if f.rate > 0 {
		args = append(args, "-b", strconv.FormatFloat(f.rate*scale/float64(f.conns), 'f', 0, 64))
	}
	args = append(args, w.clientArgs...)
	name := fmt.Sprintf("iperf3 client %s->%s (%s)", f.src, f.dst, f.workload)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(t0.Add(time.Duration(f.phase.Start)))):
		}
		cctx, cancel := context.WithDeadline(ctx, t0.Add(time.Duration(f.phase.Stop)))
		defer cancel()
		_, err := w.run(cctx, f.src, args, func(err error, stderr string) {
			w.fail(fmt.Errorf("testbed: %s exited early: %w: %s", name, err, stderr))
		})
		if err != nil {
			w.fail(fmt.Errorf("testbed: %s: %w", name, err))
			return
		}
		<-cctx.Done()
	}()
}

// measure starts the clients and samples the pairs' received bytes every
// sample interval for the scenario's duration.
func (tb *Testbed) measure(ctx context.Context, sc *spec.Scenario, fl []flow, o RunOptions, w load, reqs *requests, as *appliances,
	during func(context.Context, time.Time) error, estimates func(context.Context) (map[string]float64, error)) (*eval.Input, error) {
	dur := time.Duration(sc.Duration)
	n := int(dur / o.Sample)
	in := tb.input(sc, o.Sample)
	prev, err := tb.ReceivedBytes()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	as.busy(0) // CPU time so far
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.begin(wctx, fl, t0, tb.plan.Scale)
	reqs.begin(wctx, t0)
	tb.log.Info("workloads started", "flows", len(fl), "request_flows", len(tb.plan.Requests), "duration", dur, "sample", o.Sample)
	duringErr := make(chan error, 1)
	if during != nil {
		go func() { duringErr <- during(wctx, t0) }()
	} else {
		duringErr <- nil
	}
	prevT := t0
	timer := time.NewTimer(0)
	defer timer.Stop()
	late := 0
	for k := 1; k <= n; k++ {
		// A reading taken late (a busy machine) must not make the next
		// window tiny: counters advance by whole offload packets (up to
		// 64 KB), so a window of microseconds would show absurd rates.
		due := t0.Add(time.Duration(k) * o.Sample)
		at := due
		if earliest := prevT.Add(o.Sample / 2); at.Before(earliest) {
			at = earliest
		}
		timer.Reset(time.Until(at))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testbed run %s: %w", tb.plan.Prefix, ctx.Err())
		case <-timer.C:
		}
		cur, err := tb.ReceivedBytes()
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if now.Sub(due) > o.Sample/4 {
			late++
		}
		sec := now.Sub(prevT).Seconds()
		s := eval.Sample{T: time.Duration(k) * o.Sample, Pairs: make([]eval.PairSample, len(cur))}
		for i := range cur {
			s.Pairs[i].Rate = float64(cur[i]-prev[i]) * 8 / sec / tb.plan.Scale
		}
		recordActivity(&s, fl, time.Duration(k-1)*o.Sample, time.Duration(k)*o.Sample)
		reqs.sample(&s, as, sec)
		in.Samples = append(in.Samples, s)
		if estimates != nil {
			// The controller's capacity estimates, as the simulator
			// records its controller's (a reading that fails is skipped:
			// the controller may be away, e.g. killed by the test).
			ectx, ecancel := context.WithTimeout(ctx, o.Sample/4)
			est, err := estimates(ectx)
			ecancel()
			if err == nil {
				for _, a := range tb.plan.Appliances {
					if v, ok := est[a.Name]; ok {
						in.Estimates = append(in.Estimates, eval.Estimate{T: s.T, Appliance: a.Name, Tokens: v})
					}
				}
			}
		}
		prev, prevT = cur, now
		if err := w.err(); err != nil {
			return nil, err
		}
		if err := reqs.err(); err != nil {
			return nil, err
		}
		if err := as.alive(); err != nil {
			return nil, err
		}
	}
	cancel()
	if err := <-duringErr; err != nil {
		return nil, fmt.Errorf("testbed run %s: %w", tb.plan.Prefix, err)
	}
	if late > 0 {
		tb.log.Warn("samples taken late (the machine is busy; consider a smaller --scale)", "late", late, "samples", n)
	}
	if late*MaxLateSamples > n {
		in.Invalid = append(in.Invalid, fmt.Sprintf("%d of %d samples were read more than a quarter of an interval late: the machine could not keep up with the emulated datacenter (try a smaller --scale)", late, n))
	}
	tb.log.Info("workloads done", "samples", len(in.Samples))
	return in, nil
}

// input is the run's eval.Input without samples.
func (tb *Testbed) input(sc *spec.Scenario, sample time.Duration) *eval.Input {
	in := &eval.Input{
		Scenario:  sc.Name,
		Duration:  time.Duration(sc.Duration),
		Interval:  sample,
		Units:     sc.Units,
		UnitScale: sc.UnitScale(),
	}
	tp := tb.plan
	maxLink := -1
	for _, l := range tp.Links {
		maxLink = max(maxLink, l.AB, l.BA)
	}
	in.LinkCapacity = make([]float64, maxLink+1)
	in.LinkNames = make([]string, maxLink+1)
	for _, l := range tp.Links {
		in.LinkCapacity[l.AB], in.LinkCapacity[l.BA] = l.Capacity, l.Capacity
		in.LinkNames[l.AB], in.LinkNames[l.BA] = l.A+"->"+l.B, l.B+"->"+l.A
	}
	for _, t := range sc.Tenants {
		mt := eval.Tenant{Name: t.Name}
		for _, v := range t.VMs {
			vp, _ := tp.VM(v.Name)
			mt.VMs = append(mt.VMs, eval.VM{Name: v.Name, In: vp.In, Out: vp.Out})
		}
		in.Tenants = append(in.Tenants, mt)
	}
	for _, p := range tp.Pairs {
		in.Pairs = append(in.Pairs, eval.Pair{Tenant: p.Tenant, Src: p.Src, Dst: p.Dst, Links: p.Links})
	}
	tb.inputRequests(in, sc)
	return in
}

// hasFlows reports whether the scenario has workloads other than
// requests (flows between VMs).
func hasFlows(sc *spec.Scenario) bool {
	for _, w := range sc.Workloads {
		if w.Kind != spec.KindRequests {
			return true
		}
	}
	return false
}
