// Package agentd runs a host agent under a controller (`bulkhead agent
// --controller`): it keeps one session with the leading controller over
// mutual TLS (controlpb), takes from it everything the host needs — the
// declared model, the mechanism, the peers' addresses and the keys that
// authenticate messages to them — and runs the host agent (package agent)
// on the host's data path with it, handing every later change to the
// running agent (agent.Update) or, when the mechanism changes or its
// agents cannot take a new model (drive.ErrStaticEnv), starting a new one
// — the old one stops first, its limits left in the kernel for the new
// one to adopt, and if the new one does not start the previous one starts
// again. A snapshot that cannot be applied is retried until it applies or
// a newer one comes (Refused). It reports the host's rates to the
// controller every interval.
//
// The controller is not needed for enforcement: when it is unreachable
// the agent keeps enforcing with what it last received, and reconnects
// (to any of the controllers it was given; followers send it to the
// leader) until it comes back, when it re-synchronises. What it last
// received is kept on disk (Config.StateDir), so that a daemon started
// again enforces it before a controller answers.
package agentd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkhead-dc/bulkhead/agent"
	"github.com/bulkhead-dc/bulkhead/agent/appfront"
	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// Config is what the daemon needs.
type Config struct {
	// Host is the server the agent runs on; its certificate must name it.
	Host string
	// Controllers are the controllers' gRPC addresses (HOST:PORT), tried
	// in turn.
	Controllers []string
	// TLS is the client side of mutual TLS (the host's certificate).
	TLS *tls.Config
	// Mechanism makes a mechanism from the cluster's name and parameters
	// (mech/all.New).
	Mechanism func(name string, params map[string]any) (mech.Mechanism, error)
	// Path opens the host's data path for an agent of mechanism mc (the
	// agent closes it when it stops).
	Path func(m *model.Model, mc mech.Mechanism) (datapath.Host, error)
	// Listen opens the agent's UDP socket for its peers' messages, on
	// the address the host is declared with (nil: the agent listens on
	// it with net.ListenUDP).
	Listen func(addr netip.AddrPort) (net.PacketConn, error)
	// Scale multiplies rates on the data path (default 1).
	Scale float64
	// ReportEvery is the report interval (default 1 s). While a central
	// controller sends actions, reports follow its steps instead: each
	// goes a tenth of the controller's period (at most 100 ms) before its
	// next step and measures the time since the latest actions came.
	ReportEvery time.Duration
	// Version is reported to the controller.
	Version string
	// HTTP, if set, is where the running agent serves /metrics, /state
	// and /healthz.
	HTTP string
	// HTTPToken is the bearer token /metrics and /state require
	// (agent.Config.HTTPToken).
	HTTPToken string
	// Steering, if set, opens the server's steering of its VMs'
	// connections to real appliances: under a mechanism that enforces
	// appliance guarantees (Pulsar), the daemon runs a front for them
	// (appfront: a proxy through the flows' multi-resource buckets).
	Steering func() (datapath.Steering, error)
	// Restore puts the host's limiters back to unlimited when the
	// daemon stops.
	Restore bool
	// LoseSent and LoseSeed inject a fault: the fraction of the control
	// messages the agent sends that it drops (agent.Config.LoseSent).
	LoseSent float64
	LoseSeed uint64
	// Trace, if set, receives the agent's per-step trace (agent.Config.Trace).
	Trace io.Writer
	// StateDir, if set, is where the daemon keeps the last snapshot it
	// applied and the central controller's last actions (state.go), and
	// where, when it starts, it finds what to enforce before a
	// controller answers.
	StateDir string
	Logger   *slog.Logger
}

// Daemon is one host's agent under a controller.
type Daemon struct {
	cfg Config
	log *slog.Logger

	// applyMu serializes the snapshots' application (the session's and
	// the retries') and the daemon's end, after which none is applied
	// (closed).
	applyMu sync.Mutex
	closed  bool
	// refused is the latest snapshot that could not be applied, retried
	// every retryEvery until it applies or a newer one comes; logged is
	// the refusal's error last logged, frontLogged the front's (all
	// under applyMu). refusal is what Refused reports.
	refused     *controlpb.Snapshot
	logged      string
	frontLogged string
	refusal     atomic.Pointer[Refusal]
	retryEvery  time.Duration

	// stateMu guards what keeping the state to disk logged last and
	// when the actions were last kept (state.go).
	stateMu     sync.Mutex
	stateLogged string
	actionsKept time.Time

	peers atomic.Pointer[map[string]netip.AddrPort]
	keys  atomic.Pointer[map[string][]byte]

	mu       sync.Mutex
	cur      *running
	revision int64
	seq      uint64
	last     map[string][2]float64 // VM totals at the last report
	lastAt   time.Time

	actMu   sync.Mutex
	actions Allocations // the central controller's latest actions
	nact    atomic.Uint64
	nrep    atomic.Uint64
	// stepped carries the central controller's step period when a step's
	// actions have all arrived (capacity 1: the latest).
	stepped chan time.Duration
	// central enforces the actions on the running agent's VM pairs when
	// the mechanism has a central controller (nil otherwise).
	central atomic.Pointer[drive.CentralPairs]
	// front relays the VMs' requests to real appliances when the
	// mechanism enforces appliance guarantees (nil otherwise).
	front atomic.Pointer[appfront.Front]
}

// running is the agent of one mechanism.
type running struct {
	mech, params string
	snap         *controlpb.Snapshot // the latest snapshot it took
	a            *agent.Agent
	cancel       context.CancelFunc
	done         chan error
}

// New checks the configuration.
func New(cfg Config) (*Daemon, error) {
	switch {
	case cfg.Host == "":
		return nil, errors.New("agent: the host name is required")
	case len(cfg.Controllers) == 0:
		return nil, errors.New("agent: at least one controller address is required")
	case cfg.TLS == nil:
		return nil, errors.New("agent: the host's TLS certificate is required (bulkhead controller init issues it)")
	case cfg.Mechanism == nil || cfg.Path == nil:
		return nil, errors.New("agent: a mechanism constructor and a data path are required")
	case cfg.StateDir != "" && (cfg.Host == "." || cfg.Host == ".." || strings.ContainsAny(cfg.Host, `/\`)):
		return nil, fmt.Errorf("agent: host name %q: the state directory keeps a directory of that name; expected a name without '/'", cfg.Host)
	}
	if cfg.ReportEvery <= 0 {
		cfg.ReportEvery = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Listen == nil {
		cfg.Listen = func(ap netip.AddrPort) (net.PacketConn, error) {
			return net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
		}
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger.With("host", cfg.Host), stepped: make(chan time.Duration, 1), retryEvery: retryInterval}
	d.peers.Store(&map[string]netip.AddrPort{})
	d.keys.Store(&map[string][]byte{})
	return d, nil
}

// Run keeps a session with a controller until ctx ends, then stops the
// agent. A snapshot that cannot be applied is retried meanwhile
// (retryRefused), with or without a controller.
func (d *Daemon) Run(ctx context.Context) error {
	rctx, stopRetries := context.WithCancel(ctx)
	retries := make(chan struct{})
	go func() {
		defer close(retries)
		d.retryRefused(rctx)
	}()
	defer func() {
		stopRetries()
		<-retries
		d.shutdown()
	}()
	d.resume(ctx)
	backoff := 200 * time.Millisecond
	for i := 0; ctx.Err() == nil; i++ {
		addr := d.cfg.Controllers[i%len(d.cfg.Controllers)]
		err := d.session(ctx, addr)
		if ctx.Err() != nil {
			break
		}
		d.log.Warn("controller session ended; the agent keeps enforcing what it has and reconnects", "controller", addr, "err", err, "retry", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		switch {
		case err == nil || status.Code(errors.Unwrap(err)) == codes.Unavailable && strings.Contains(err.Error(), "not the leader"):
			backoff = 200 * time.Millisecond // a follower answered: try the next at once
		default:
			backoff = min(2*backoff, 2*time.Second)
		}
	}
	return nil
}

// session is one connection to a controller.
func (d *Daemon) session(ctx context.Context, addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(d.cfg.TLS)))
	if err != nil {
		return fmt.Errorf("controller %s: %w", addr, err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := controlpb.NewControlClient(conn).Session(sctx)
	if err != nil {
		return fmt.Errorf("controller %s: %w", addr, err)
	}
	d.mu.Lock()
	rev := d.revision
	d.mu.Unlock()
	if err := stream.Send(&controlpb.AgentMessage{Msg: &controlpb.AgentMessage_Hello{Hello: &controlpb.Hello{
		Host: d.cfg.Host, Version: d.cfg.Version, Revision: rev}}}); err != nil {
		return fmt.Errorf("controller %s: hello: %w", addr, err)
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if s := m.GetSnapshot(); s != nil {
				d.take(ctx, s)
			}
			if a := m.GetActions(); a != nil {
				d.takeActions(a)
			}
		}
	}()
	// Reports go every ReportEvery; while a central controller sends
	// actions, each report is timed to reach it just before its next step
	// and to measure the interval under its latest actions alone.
	t := time.NewTimer(d.cfg.ReportEvery)
	defer t.Stop()
	for {
		select {
		case err := <-recvErr:
			return fmt.Errorf("controller %s: %w", addr, err)
		case <-ctx.Done():
			return nil
		case p := <-d.stepped:
			d.restartWindow()
			t.Reset(p - reportLead(p))
		case <-t.C:
			t.Reset(d.cfg.ReportEvery)
			if r := d.report(); r != nil {
				if err := stream.Send(&controlpb.AgentMessage{Msg: &controlpb.AgentMessage_Report{Report: r}}); err != nil {
					return fmt.Errorf("controller %s: report: %w", addr, err)
				}
				d.nrep.Add(1)
			}
		}
	}
}

// maxStepPeriod bounds the step period a controller's actions may give.
const maxStepPeriod = time.Minute

// reportLead is how long before a central controller's next step (period
// p after its actions arrived) the agent reports: a tenth of the period,
// at most 100 ms, for the report to arrive in time.
func reportLead(p time.Duration) time.Duration { return min(p/10, 100*time.Millisecond) }

// restartWindow starts the appliance front's measurement period afresh
// (what it measured before the actions in force came is dropped), so that
// the next report speaks of those actions only — as the simulator's
// controller sees each interval under one allocation.
func (d *Daemon) restartWindow() {
	if f := d.front.Load(); f != nil {
		f.Collect()
	}
}

// retryInterval is how often a snapshot that could not be applied is
// tried again.
const retryInterval = 3 * time.Second

// Refusal is a snapshot the daemon could not apply and retries.
type Refusal struct {
	// Revision is the snapshot's.
	Revision int64
	// Err is why its latest attempt failed.
	Err error
	// Attempts counts its attempts so far.
	Attempts int
}

// Refused returns the latest snapshot that could not be applied and is
// being retried (false: every snapshot received has been applied, or a
// newer one replaced it). Meanwhile the agent enforces the revision it
// reports.
func (d *Daemon) Refused() (Refusal, bool) {
	if r := d.refusal.Load(); r != nil {
		return *r, true
	}
	return Refusal{}, false
}

// take applies a snapshot from the controller. One that cannot be applied
// is kept and retried (retryRefused) until it applies or a newer one
// comes: the controller does not send an unchanged snapshot again, and
// what refused it — a VM's device the hypervisor has not created yet —
// may pass.
func (d *Daemon) take(ctx context.Context, s *controlpb.Snapshot) {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	d.takeLocked(ctx, s)
}

// takeLocked is take with applyMu held. A refusal is logged once per
// distinct error, not at every retry.
func (d *Daemon) takeLocked(ctx context.Context, s *controlpb.Snapshot) {
	if d.closed {
		return
	}
	attempts := 1
	if r := d.refusal.Load(); r != nil && d.refused == s {
		attempts = r.Attempts + 1
	}
	err := d.apply(ctx, s)
	if err == nil {
		d.keepSnapshot(s)
		if attempts > 1 {
			d.log.Info("snapshot applied at last", "revision", s.Revision, "attempts", attempts)
		}
		d.refused, d.logged = nil, ""
		d.refusal.Store(nil)
		return
	}
	d.refused = s
	d.refusal.Store(&Refusal{Revision: s.Revision, Err: err, Attempts: attempts})
	if msg := err.Error(); msg != d.logged {
		d.logged = msg
		d.log.Error("snapshot not applied; enforcing the previous one and retrying", "revision", s.Revision, "every", d.retryEvery, "err", err)
		return
	}
	d.log.Debug("snapshot still not applied", "revision", s.Revision, "attempts", attempts, "err", err)
}

// retryRefused tries the refused snapshot again every retryEvery until
// ctx ends.
func (d *Daemon) retryRefused(ctx context.Context) {
	t := time.NewTicker(d.retryEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.applyMu.Lock()
		if s := d.refused; s != nil {
			d.takeLocked(ctx, s)
		}
		d.applyMu.Unlock()
	}
}

// apply takes a snapshot: peers and keys at once, the model to the
// running agent, or a new agent when the mechanism changed or none runs
// (applyMu held).
func (d *Daemon) apply(ctx context.Context, s *controlpb.Snapshot) error {
	m, err := snapshotModel(s)
	if err != nil {
		return err
	}
	peers := map[string]netip.AddrPort{}
	keys := map[string][]byte{}
	for _, p := range s.Peers {
		a, err := netip.ParseAddr(p.Address)
		if err != nil || p.Port == 0 || p.Port > 65535 || len(p.Key) < 16 {
			return fmt.Errorf("peer %q: bad address %q:%d or key", p.Host, p.Address, p.Port)
		}
		peers[p.Host] = netip.AddrPortFrom(a, uint16(p.Port))
		keys[p.Host] = p.Key
	}
	d.peers.Store(&peers)
	d.keys.Store(&keys)
	if err := d.updateFront(ctx, s, m); err == nil {
		d.frontLogged = ""
	} else if msg := err.Error(); msg != d.frontLogged {
		d.frontLogged = msg // logged once, not at every retry of the snapshot
		d.log.Error("appliance front", "err", err)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil && d.cur.mech == s.Mechanism && d.cur.params == string(s.ParamsJson) {
		err := d.cur.a.Update(m)
		switch {
		case err == nil:
			d.cur.snap, d.revision = s, s.Revision
			d.log.Info("model updated", "revision", s.Revision, "vms", len(m.VMsOn(d.cfg.Host)))
			return nil
		case !errors.Is(err, drive.ErrStaticEnv):
			return fmt.Errorf("update the agent: %w", err)
		}
		// The mechanism's agents cannot take a new model (static,
		// seawall): a new agent takes it, as for a mechanism change.
		if err := d.restartLocked(ctx, s, m); err != nil {
			return fmt.Errorf("restart the agent with the new model (mechanism %s's agents cannot take one at runtime): %w", s.Mechanism, err)
		}
		d.log.Info("agent restarted with the new model: the mechanism's agents cannot take one at runtime", "mechanism", s.Mechanism, "revision", s.Revision)
		return nil
	}
	return d.restartLocked(ctx, s, m)
}

// snapshotModel is a snapshot's model, with its defaults, checked.
func snapshotModel(s *controlpb.Snapshot) (*model.Model, error) {
	var m model.Model
	if err := json.Unmarshal(s.ModelJson, &m); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m.ApplyDefaults()
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return &m, nil
}

// restartLocked replaces the running agent, if any, with one for
// snapshot s and its model m (d.mu held). The old agent stops first,
// leaving its guarantee-safe settings in the kernel for the new one to
// adopt: two agents cannot share the host's limiters, nor its agent
// address. What needs neither (the mechanism, the agent's address) is
// checked before it stops. If the new agent does not start, one for the
// previous snapshot starts again, so that the host is not left without
// an agent, and the error says so; the caller retries s.
func (d *Daemon) restartLocked(ctx context.Context, s *controlpb.Snapshot, m *model.Model) error {
	next, err := d.plan(s, m)
	if err != nil {
		return err
	}
	prev := d.cur
	if prev != nil {
		// Another agent starts at once: even with Restore, the limits
		// stay in force for it.
		prev.a.KeepOnStop()
	}
	d.stopLocked()
	err = d.startLocked(ctx, next)
	if err == nil || prev == nil {
		return err
	}
	if perr := d.startAgainLocked(ctx, prev.snap); perr != nil {
		return errors.Join(err, fmt.Errorf("no agent runs: the agent of revision %d does not start again either: %w", prev.snap.Revision, perr))
	}
	return fmt.Errorf("%w (the agent of revision %d runs again)", err, prev.snap.Revision)
}

// startAgainLocked starts an agent for a snapshot an agent ran before
// (d.mu held).
func (d *Daemon) startAgainLocked(ctx context.Context, s *controlpb.Snapshot) error {
	m, err := snapshotModel(s)
	if err != nil {
		return err
	}
	p, err := d.plan(s, m)
	if err != nil {
		return err
	}
	return d.startLocked(ctx, p)
}

// agentPlan is what an agent for a snapshot is made of.
type agentPlan struct {
	s    *controlpb.Snapshot
	m    *model.Model
	mc   mech.Mechanism
	self netip.AddrPort
}

// plan makes the snapshot's mechanism and finds its agent's address.
func (d *Daemon) plan(s *controlpb.Snapshot, m *model.Model) (agentPlan, error) {
	mc, err := d.mechanism(s)
	if err != nil {
		return agentPlan{}, err
	}
	self, err := d.selfAddr(s)
	if err != nil {
		return agentPlan{}, err
	}
	return agentPlan{s: s, m: m, mc: mc, self: self}, nil
}

// startLocked starts an agent on a new data path (d.mu held, no agent
// running).
func (d *Daemon) startLocked(ctx context.Context, p agentPlan) error {
	s, m, mc := p.s, p.m, p.mc
	// A central mechanism's allocations reach the host as actions; its
	// agents enforce them for the host's VM pairs.
	var cp *drive.CentralPairs
	if mc.Capabilities().Central {
		cp = drive.NewCentralPairs(mc)
		mc = cp
	}
	path, err := d.cfg.Path(m, mc)
	if err != nil {
		return fmt.Errorf("data path: %w", err)
	}
	a, err := agent.New(agent.Config{
		Host: d.cfg.Host, Model: m, Mechanism: mc, Path: path, Scale: d.cfg.Scale, HTTP: d.cfg.HTTP, HTTPToken: d.cfg.HTTPToken,
		Restore: d.cfg.Restore, Logger: d.cfg.Logger, Trace: d.cfg.Trace, LoseSent: d.cfg.LoseSent, LoseSeed: d.cfg.LoseSeed,
		Listen: func() (net.PacketConn, error) { return d.cfg.Listen(p.self) },
		Peers: func(h string) (netip.AddrPort, bool) {
			ap, ok := (*d.peers.Load())[h]
			return ap, ok
		},
		Keys: func(h string) ([]byte, bool) {
			k, ok := (*d.keys.Load())[h]
			return k, ok
		},
	})
	if err != nil {
		return fmt.Errorf("start the agent: %w", err)
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &running{mech: s.Mechanism, params: string(s.ParamsJson), snap: s, a: a, cancel: cancel, done: make(chan error, 1)}
	d.central.Store(cp)
	if cp != nil {
		d.seedActions(cp)
	}
	go func() { r.done <- a.Run(actx) }()
	d.cur, d.revision, d.last = r, s.Revision, nil
	d.log.Info("agent started", "mechanism", s.Mechanism, "revision", s.Revision, "vms", len(m.VMsOn(d.cfg.Host)))
	return nil
}

// selfAddr is where this host's agent listens: its declared address.
func (d *Daemon) selfAddr(s *controlpb.Snapshot) (netip.AddrPort, error) {
	a, err := netip.ParseAddr(s.Address)
	if err != nil || s.Port == 0 || s.Port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("host %s's own agent address %q:%d is not an address", d.cfg.Host, s.Address, s.Port)
	}
	return netip.AddrPortFrom(a, uint16(s.Port)), nil
}

// shutdown is the daemon's end: the front and the agent stop, leaving
// the steering and the limits in force for the next agent unless
// Restore, and no snapshot is applied after it.
func (d *Daemon) shutdown() {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	d.closed = true
	d.stopFront(d.cfg.Restore)
	d.stopAgent()
}

func (d *Daemon) stopAgent() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
}

func (d *Daemon) stopLocked() {
	if d.cur == nil {
		return
	}
	d.cur.cancel()
	if err := <-d.cur.done; err != nil {
		d.log.Warn("agent stopped with an error", "err", err)
	}
	d.cur = nil
	d.central.Store(nil) // its pairs are no one's until an agent starts
}

// report builds the report of the interval since the last one from the
// running agent's state (nil if no agent runs).
func (d *Daemon) report() *controlpb.Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return nil
	}
	st := d.cur.a.Snapshot()
	now := time.Now()
	d.seq++
	r := &controlpb.Report{Seq: d.seq, UnixNano: now.UnixNano(), Revision: d.revision}
	dt := now.Sub(d.lastAt).Seconds()
	cur := map[string][2]float64{}
	for _, v := range st.VMs {
		cur[v.VM] = [2]float64{v.InTotal, v.OutTotal}
		if prev, ok := d.last[v.VM]; ok && dt > 0 {
			r.Vms = append(r.Vms, &controlpb.VMRates{Vm: v.VM, Received: max(0, (v.InTotal-prev[0])/dt), Sent: max(0, (v.OutTotal-prev[1])/dt)})
		}
	}
	if d.last != nil {
		r.PeriodSeconds = dt
	}
	d.last, d.lastAt = cur, now
	for _, p := range st.Egress {
		pr := &controlpb.PairRates{Src: p.Src, Dst: p.Dst, Rate: p.Rate, Bound: p.LimiterBound, Losses: p.Losses}
		if p.Limit != nil {
			pr.Limit = *p.Limit
		}
		r.Pairs = append(r.Pairs, pr)
		// The same as a central controller's flow (a VM pair: bytes per
		// second on every link of its path); a pair its limiter held back
		// has a sender with more to send (drive.HeldBacklog, as in the
		// simulator).
		if p.Rate > 0 {
			fo := &controlpb.FlowObs{Src: p.Src, Dst: p.Dst, Used: []float32{float32(p.Rate / 8)}}
			if p.LimiterBound && dt > 0 {
				fo.Backlog = []float32{float32(drive.HeldBacklog(p.Rate/8, time.Duration(dt*float64(time.Second))))}
			}
			r.Flows = append(r.Flows, fo)
		}
	}
	if f := d.front.Load(); f != nil {
		for _, fo := range f.Collect() {
			r.Flows = append(r.Flows, flowReport(fo))
		}
	}
	for _, v := range st.VMs {
		r.VmObs = append(r.VmObs, &controlpb.VMObs{Vm: v.VM, InArrival: v.InArrival, InRate: v.InRate, InDrops: v.InDrops,
			OutRate: v.OutRate, DropSrc: v.DropSrc})
	}
	dropped := map[string]uint64{}
	for k, v := range st.Dropped {
		dropped[k] = uint64(v)
	}
	steps := d.cur.a.Steps()
	ds := d.cur.a.Stats()
	stats := &controlpb.AgentStats{Steps: uint64(steps), Dropped: dropped, LimitFailures: uint64(max(0, ds.Failed))}
	if steps > 0 {
		stats.StepSeconds = d.cur.a.StepTime().Seconds() / float64(steps)
	}
	r.Stats = stats
	return r
}

// MaxAllocations bounds the flow allocations the daemon keeps.
const MaxAllocations = 100000

// Allocations are the central controller's latest actions for this
// host's flows (controlpb.Actions, merged over steps). The agent enforces
// those of VM pairs as pair limits (drive.CentralPairs); those of flows to
// appliances are for a request-aware enforcer in front of the appliance.
type Allocations struct {
	// Seq and Revision are those of the latest Actions.
	Seq      uint64
	Revision int64
	// Flows are the allocations in force, tokens/s per path element (one
	// value: the same on every element).
	Flows map[mech.FlowID][]float64
	// DefaultRate and DefaultBySrc are the default rates of flows never
	// allocated (tokens/s; 0: unlimited).
	DefaultRate  float64
	DefaultBySrc map[string]float64
	// Refused counts allocations not kept (beyond MaxAllocations, or
	// with a rate that is not finite and non-negative).
	Refused uint64
}

// takeActions keeps a central controller's actions.
func (d *Daemon) takeActions(a *controlpb.Actions) {
	d.nact.Add(1)
	var keep *Allocations // kept on disk once the lock is released
	defer func() {
		if keep != nil {
			d.keepActions(*keep)
		}
	}()
	d.actMu.Lock()
	defer d.actMu.Unlock()
	st := &d.actions
	if st.Flows == nil {
		st.Flows = map[mech.FlowID][]float64{}
	}
	if a.Part == 0 {
		st.DefaultRate, st.DefaultBySrc = a.DefaultRate, maps.Clone(a.DefaultBySrc)
	}
	st.Seq, st.Revision = a.Seq, a.Revision
	for _, fa := range a.Allocations {
		id := mech.FlowID{Src: fa.Src, Dst: fa.Dst}
		_, known := st.Flows[id]
		if (!known && len(st.Flows) >= MaxAllocations) || len(fa.Rates) == 0 || slices.ContainsFunc(fa.Rates, func(x float32) bool { return !(x >= 0) || math.IsInf(float64(x), 1) }) {
			st.Refused++
			continue
		}
		r := make([]float64, len(fa.Rates))
		for i, x := range fa.Rates {
			r[i] = float64(x)
		}
		st.Flows[id] = r
	}
	if a.Last {
		if a.Period > 0 && a.Period <= maxStepPeriod.Seconds() {
			p := time.Duration(a.Period * float64(time.Second))
			// The latest step's period wins over one not yet taken.
			select {
			case <-d.stepped:
			default:
			}
			d.stepped <- p
		}
		if cp := d.central.Load(); cp != nil {
			cp.SetActions(st.Flows, st.DefaultRate, st.DefaultBySrc)
		}
		if f := d.front.Load(); f != nil {
			f.SetActions(st.Flows, st.DefaultRate, st.DefaultBySrc)
		}
		if d.cfg.StateDir != "" && d.actionsDue() {
			c := *st
			c.Flows, c.DefaultBySrc = maps.Clone(st.Flows), maps.Clone(st.DefaultBySrc)
			keep = &c
		}
	}
}

// actionsSetter enforces a central controller's actions: the agent's VM
// pairs (drive.CentralPairs), the appliance front.
type actionsSetter interface {
	SetActions(flows map[mech.FlowID][]float64, def float64, bySrc map[string]float64)
}

// seedActions gives a new enforcer the actions in force, if any Actions
// message was taken (takeActions makes Flows non-nil), and says whether
// it did. A daemon that has taken none (a process just restarted) gives
// it nothing: an enforcer never given actions leaves the limits in force
// (those its data path adopted), where the empty allocations of a fresh
// process would lift them. The same lock as takeActions' orders the two:
// an enforcer stored before seedActions misses no later step.
func (d *Daemon) seedActions(e actionsSetter) bool {
	d.actMu.Lock()
	defer d.actMu.Unlock()
	if d.actions.Flows == nil {
		return false
	}
	e.SetActions(d.actions.Flows, d.actions.DefaultRate, d.actions.DefaultBySrc)
	return true
}

// Allocations returns a copy of the central controller's latest actions
// for this host.
func (d *Daemon) Allocations() Allocations {
	d.actMu.Lock()
	defer d.actMu.Unlock()
	a := d.actions
	a.Flows = maps.Clone(a.Flows)
	a.DefaultBySrc = maps.Clone(a.DefaultBySrc)
	return a
}

// ActionsReceived counts the Actions messages received from controllers.
func (d *Daemon) ActionsReceived() uint64 { return d.nact.Load() }

// ReportsSent counts the reports sent to controllers.
func (d *Daemon) ReportsSent() uint64 { return d.nrep.Load() }

// mechanism makes the snapshot's mechanism with its parameters.
func (d *Daemon) mechanism(s *controlpb.Snapshot) (mech.Mechanism, error) {
	var params map[string]any
	if len(s.ParamsJson) > 0 {
		if err := json.Unmarshal(s.ParamsJson, &params); err != nil {
			return nil, fmt.Errorf("mechanism parameters: %w", err)
		}
	}
	mc, err := d.cfg.Mechanism(s.Mechanism, params)
	if err != nil {
		return nil, fmt.Errorf("mechanism %q: %w", s.Mechanism, err)
	}
	return mc, nil
}

// updateFront runs the front to the real appliances while the cluster's
// mechanism enforces appliance guarantees, on the paths the controller
// sent; it stops it otherwise, and its VMs' connections to the
// appliances are no longer steered: no front will take them (a snapshot
// whose mechanism cannot be made leaves the front as it is).
func (d *Daemon) updateFront(ctx context.Context, s *controlpb.Snapshot, m *model.Model) error {
	if d.cfg.Steering == nil {
		return nil
	}
	mc, err := d.mechanism(s)
	if err != nil {
		return err
	}
	if !mc.Capabilities().Appliances || len(s.AppliancePaths) == 0 {
		d.stopFront(true)
		return nil
	}
	paths := map[mech.FlowID][]mech.PathElem{}
	for _, fp := range s.AppliancePaths {
		p := make([]mech.PathElem, len(fp.Path))
		for i, x := range fp.Path {
			p[i] = mech.PathElem{Resource: int(x >> 2), Role: mech.PathRole(x & 3)}
		}
		paths[mech.FlowID{Src: fp.Src, Dst: fp.Dst}] = p
	}
	f := d.front.Load()
	if f == nil {
		st, err := d.cfg.Steering()
		if err != nil {
			return fmt.Errorf("steering: %w", err)
		}
		// The front connects to the appliances from the host's declared
		// address, which the network routes back to the host.
		src, _ := netip.ParseAddr(s.Address)
		if f, err = appfront.New(appfront.Config{Host: d.cfg.Host, Steering: st, Source: src, Log: d.log}); err != nil {
			st.Close()
			return err
		}
		d.front.Store(f)
		d.seedActions(f)
	}
	return f.Update(ctx, m, paths)
}

// stopFront closes the front. With unsteer the VMs' connections to the
// appliances are no longer steered to the host and reach the appliances
// directly (appfront.Front.Close): no front will take them again. Without,
// they are refused until an agent runs a front again (never relayed
// unenforced).
func (d *Daemon) stopFront(unsteer bool) {
	if f := d.front.Swap(nil); f != nil {
		if err := f.Close(unsteer); err != nil {
			d.log.Warn("appliance front closed with an error", "err", err)
		}
	}
}

// flowReport is a flow the front measured, on the path it runs on.
func flowReport(fo mech.FlowObs) *controlpb.FlowObs {
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	r := &controlpb.FlowObs{Src: fo.Flow.Src, Dst: fo.Flow.Dst, Used: f32(fo.Used), Backlog: f32(fo.Backlog),
		Queued: f32(fo.Queued), Outstanding: f32(fo.Outstanding), Allocation: f32(fo.Allocation)}
	for _, e := range fo.Path {
		r.Path = append(r.Path, uint32(e.Resource)<<2|uint32(e.Role))
	}
	return r
}
