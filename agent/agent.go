package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// VM is one of the host's VMs as the agent drives it.
type VM struct {
	Name string
	Addr netip.Addr
	// HostDev is the VM's veth in the server's namespace: its counters
	// say what the VM sent (received on it) and what was delivered to it.
	HostDev string
	// TX holds the limiters of the pairs the VM sends (nil: no pair
	// limiters). RX counts the pairs into the VM (nil: no counters).
	TX, RX *dataplane.Limiter
}

// Config is everything an agent needs. Rates the agent reads and sets on
// the wire are Scale × the scenario's units; the mechanism sees the
// scenario's units.
type Config struct {
	// Host is the server the agent runs for; NS its namespace.
	Host string
	NS   *dataplane.NS
	// Mechanism makes the agent's mechanism (mech/all.New).
	Mechanism mech.Mechanism
	// Env is the mechanism's environment (Env.Host must be Host).
	Env mech.Env
	// VMs are the host's VMs.
	VMs []VM
	// Addrs is every VM's address (to name pairs by address).
	Addrs map[string]netip.Addr
	// Listen is the agent's UDP address (inside NS); Peers the other
	// agents' addresses by host. A message to a host without an agent is
	// dropped (counted).
	Listen netip.AddrPort
	Peers  map[string]netip.AddrPort
	// TXIFB and RXIFB are the devices for per-VM schedulers (egress,
	// ingress), "" if none.
	TXIFB, RXIFB string
	// Links are the server's devices toward the network: with an ingress
	// scheduler, their per-VM redirection filters to RXIFB
	// (dataplane.RedirectIngressMatch) count each VM's arrivals.
	Links []string
	// Scale multiplies rates on the wire (default 1).
	Scale float64
	// Loss counts lost packets per pair (nil: none; the agent reports no
	// losses). The agent closes it.
	Loss LossCounter
	// HTTP, if set, is where the agent serves /metrics (Prometheus),
	// /state (JSON) and /healthz, in the caller's namespace.
	HTTP string
	// Restore puts every pair limiter the agent changed back to
	// unlimited and removes its schedulers when Run ends.
	Restore bool
	Logger  *slog.Logger
	// Trace, if set, receives one CSV line per egress pair per step:
	// time_s,host,src,dst,rate,limit,limiter_bound,losses (rates in Mbps
	// of the scenario's units), and one per VM with an egress limit or
	// ingress drops: time_s,host,vm,*,out_rate,egress_limit,false,in_drops. Writes are serialized by the agent; share a Trace between
	// agents only through a writer safe for concurrent use.
	Trace io.Writer
}

// Agent is a host agent: every mechanism period it reads the host's
// counters into a mech.HostObs, steps the mechanism's mech.Agent, applies
// the limits and schedulers it returns and sends its messages to the
// other agents over UDP.
type Agent struct {
	cfg  Config
	mech mech.Agent
	log  *slog.Logger
	// traceErr is the first failed write to cfg.Trace (tracing stops).
	traceErr error
	conn     *net.UDPConn
	epoch    int64
	seq      uint64
	met      *agentMetrics

	vms     map[string]*VM
	byAddr  map[netip.Addr]string
	addrOf  map[string]netip.Addr
	peerSeq map[string]*sequence
	txSched *Scheduler
	rxSched *Scheduler

	inMu  sync.Mutex
	inbox []mech.Message

	// measurement state
	start     time.Time
	last      time.Time
	prevTX    map[dataplane.Pair]dataplane.Counters
	prevRX    map[dataplane.Pair]uint64
	prevLoss  map[dataplane.Pair]uint64
	prevDev   map[string][2]uint64 // host dev → (rx, tx) bytes
	prevSch   [2]map[string]dataplane.Counters
	prevArr   map[string]uint64       // VM → bytes arrived for it on the links
	dropCarry map[string]float64      // VM → negative residue of the drop estimate (bytes)
	limits    map[mech.PairID]float64 // pair limits in force (scenario units)
	vmLimits  [2]map[string]float64

	stMu  sync.Mutex
	state State
}

// maxInbox bounds the messages waiting for the next step.
const maxInbox = 4096

// New checks the configuration, builds the mechanism's agent and opens
// the UDP socket inside the host's namespace.
func New(cfg Config) (*Agent, error) {
	if cfg.Host == "" || cfg.NS == nil || cfg.Mechanism == nil {
		return nil, errors.New("agent: config needs a host, its namespace and a mechanism")
	}
	if cfg.Env.Host != cfg.Host {
		return nil, fmt.Errorf("agent %s: environment is for host %q", cfg.Host, cfg.Env.Host)
	}
	if cfg.Scale == 0 {
		cfg.Scale = 1
	}
	if !(cfg.Scale > 0) {
		return nil, fmt.Errorf("agent %s: scale %v", cfg.Host, cfg.Scale)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ma, err := cfg.Mechanism.NewAgent(cfg.Env)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.Host, err)
	}
	a := &Agent{
		cfg: cfg, mech: ma, log: cfg.Logger.With("host", cfg.Host, "mechanism", cfg.Mechanism.Name()),
		epoch: time.Now().UnixNano(), met: newMetrics(cfg.Host),
		vms: map[string]*VM{}, byAddr: map[netip.Addr]string{}, addrOf: cfg.Addrs, peerSeq: map[string]*sequence{},
		prevTX: map[dataplane.Pair]dataplane.Counters{}, prevRX: map[dataplane.Pair]uint64{}, prevLoss: map[dataplane.Pair]uint64{},
		prevDev: map[string][2]uint64{}, prevArr: map[string]uint64{}, dropCarry: map[string]float64{}, limits: map[mech.PairID]float64{},
		vmLimits: [2]map[string]float64{{}, {}},
	}
	for i := range cfg.VMs {
		v := &cfg.VMs[i]
		if v2, ok := cfg.Env.VM(v.Name); !ok || v2.Host != cfg.Host {
			return nil, fmt.Errorf("agent %s: VM %s is not on this host in the environment", cfg.Host, v.Name)
		}
		a.vms[v.Name] = v
	}
	for n, ad := range cfg.Addrs {
		if !ad.Is4() {
			return nil, fmt.Errorf("agent %s: VM %s: address %v is not IPv4", cfg.Host, n, ad)
		}
		a.byAddr[ad] = n
	}
	vmAddrs := map[string]netip.Addr{}
	for _, v := range cfg.VMs {
		vmAddrs[v.Name] = v.Addr
	}
	if cfg.TXIFB != "" {
		a.txSched = NewScheduler(cfg.NS, cfg.TXIFB, mech.Egress, vmAddrs)
	}
	if cfg.RXIFB != "" {
		a.rxSched = NewScheduler(cfg.NS, cfg.RXIFB, mech.Ingress, vmAddrs)
	}
	err = cfg.NS.Do(func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(cfg.Listen))
		if err != nil {
			return err
		}
		a.conn = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("agent %s: listen on %s: %w", cfg.Host, cfg.Listen, err)
	}
	a.state = State{Host: cfg.Host, Mechanism: cfg.Mechanism.Name(), Period: ma.Period().String()}
	return a, nil
}

// Close releases what New opened (the UDP socket and the loss counter)
// for an agent that will not Run; Run releases them itself.
func (a *Agent) Close() error {
	err := a.conn.Close()
	if a.cfg.Loss != nil {
		err = errors.Join(err, a.cfg.Loss.Close())
	}
	return err
}

// pairName names a pair by its VMs (false if an address is unknown).
func (a *Agent) pairName(p dataplane.Pair) (mech.PairID, bool) {
	s, ok1 := a.byAddr[p.Src]
	d, ok2 := a.byAddr[p.Dst]
	return mech.PairID{Src: s, Dst: d}, ok1 && ok2
}

// pairAddr returns a pair's addresses.
func (a *Agent) pairAddr(p mech.PairID) (dataplane.Pair, bool) {
	s, ok1 := a.addrOf[p.Src]
	d, ok2 := a.addrOf[p.Dst]
	return dataplane.Pair{Src: s, Dst: d}, ok1 && ok2
}

// Addr returns the agent's UDP address.
func (a *Agent) Addr() netip.AddrPort { return a.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Mech returns the mechanism's agent (for inspection in tests; it must not
// be used while Run runs).
func (a *Agent) Mech() mech.Agent { return a.mech }

// Run runs the agent until ctx ends: the receiver in the background, a
// step every mechanism period, the HTTP server if configured. It closes
// the socket and the loss counter before it returns; with Restore it
// removes its limits. The error is nil when ctx ended it.
func (a *Agent) Run(ctx context.Context) (err error) {
	defer func() {
		err = errors.Join(err, a.traceErr)
		if a.cfg.Loss != nil {
			if cerr := a.cfg.Loss.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer a.conn.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.receive()
	}()
	if a.cfg.HTTP != "" {
		srv, ln, err := a.httpServer()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("http server", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	if a.cfg.Restore {
		defer a.restore()
	}
	period := a.mech.Period()
	if period <= 0 {
		return fmt.Errorf("agent %s: mechanism period %v", a.cfg.Host, period)
	}
	a.start = time.Now()
	if err := a.baseline(); err != nil {
		return err
	}
	a.log.Info("agent running", "period", period, "listen", a.Addr(), "vms", len(a.vms))
	// Steps are due every period from the start. A step that runs late
	// (a busy machine) does not make the next window short: it is at
	// least half a period after the previous reading, since counters
	// advance by whole offload packets (up to 64 KB) and a tiny window
	// would show absurd rates.
	timer := time.NewTimer(period)
	defer timer.Stop()
	due := a.start.Add(period)
	for {
		select {
		case <-ctx.Done():
			a.log.Info("agent stopped", "steps", a.met.nSteps.Load())
			return nil
		case <-timer.C:
		}
		now := time.Now()
		if late := now.Sub(due); late > period {
			a.met.late.Inc()
			due = now // skip the periods missed
		}
		due = due.Add(period)
		next := due
		if earliest := now.Add(period / 2); next.Before(earliest) {
			next = earliest
		}
		timer.Reset(time.Until(next))
		if err := a.step(now); err != nil {
			// A failed read or write of the data plane is logged and
			// counted; the next period tries again.
			a.met.errors.WithLabelValues("step").Inc()
			a.log.Warn("step", "err", err)
		}
	}
}

// step is one period: observe, step the mechanism, apply, send.
func (a *Agent) step(now time.Time) error {
	t0 := time.Now()
	obs, err := a.observe(now)
	if err != nil {
		return err
	}
	a.inMu.Lock()
	inbox := a.inbox
	a.inbox = nil
	a.inMu.Unlock()
	act := a.mech.Step(obs, inbox)
	aerr := a.apply(&act)
	a.send(act.Messages)
	a.met.step()
	took := time.Since(t0)
	a.met.stepNanos.Add(int64(took))
	a.met.stepSeconds.Observe(took.Seconds())
	a.record(obs, len(inbox), len(act.Messages))
	if a.cfg.Trace != nil && a.traceErr == nil {
		a.trace(obs)
	}
	return aerr
}

// apply sets the schedulers, then the limits.
func (a *Agent) apply(act *mech.Actions) error {
	var errs []error
	for _, s := range act.Schedulers {
		sch := a.sched(s.Dir)
		if sch == nil {
			errs = append(errs, fmt.Errorf("agent %s: no device for a %s scheduler", a.cfg.Host, dirName(s.Dir)))
			continue
		}
		w := map[string]float64{}
		for vm, x := range s.Weights {
			w[vm] = x
		}
		rate := s.Rate
		if !math.IsInf(rate, 1) {
			rate *= a.cfg.Scale
		}
		if err := sch.Set(rate, w); err != nil {
			errs = append(errs, err)
			continue
		}
		a.log.Info("scheduler set", "dir", dirName(s.Dir), "rate", rate, "weights", w)
	}
	for _, l := range act.Limits {
		if err := a.applyLimit(l); err != nil {
			a.met.errors.WithLabelValues("limit").Inc()
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func dirName(d mech.Direction) string {
	if d == mech.Ingress {
		return "ingress"
	}
	return "egress"
}

func (a *Agent) sched(d mech.Direction) *Scheduler {
	if d == mech.Ingress {
		return a.rxSched
	}
	return a.txSched
}

// wire converts a rate in scenario units to bits/s on the wire.
func (a *Agent) wire(r float64) float64 {
	if math.IsInf(r, 1) {
		return r
	}
	return r * a.cfg.Scale
}

func (a *Agent) applyLimit(l mech.Limit) error {
	if math.IsNaN(l.Rate) || l.Rate < 0 {
		return fmt.Errorf("agent %s: invalid rate %v", a.cfg.Host, l.Rate)
	}
	t0 := time.Now()
	switch l.Kind {
	case mech.PairLimit:
		v := a.vms[l.Pair.Src]
		if v == nil || v.TX == nil {
			return fmt.Errorf("agent %s: pair %s->%s: no limiter for its source here", a.cfg.Host, l.Pair.Src, l.Pair.Dst)
		}
		p, ok := a.pairAddr(l.Pair)
		if !ok {
			return fmt.Errorf("agent %s: pair %s->%s: unknown VM", a.cfg.Host, l.Pair.Src, l.Pair.Dst)
		}
		if _, has := v.TX.ClassOf(p); !has {
			return fmt.Errorf("agent %s: pair %s->%s has no limiter class (not a declared pair)", a.cfg.Host, l.Pair.Src, l.Pair.Dst)
		}
		if err := v.TX.SetPairRate(p, a.wire(l.Rate)); err != nil {
			return fmt.Errorf("agent %s: %w", a.cfg.Host, err)
		}
		a.limits[l.Pair] = l.Rate
	case mech.VMEgress, mech.VMIngress:
		dir := mech.Egress
		if l.Kind == mech.VMIngress {
			dir = mech.Ingress
		}
		sch := a.sched(dir)
		if sch == nil {
			return fmt.Errorf("agent %s: VM %s: no device for %s limits", a.cfg.Host, l.VM, dirName(dir))
		}
		if err := sch.SetLimit(l.VM, a.wire(l.Rate)); err != nil {
			return err
		}
		a.vmLimits[dir][l.VM] = l.Rate
	default:
		return fmt.Errorf("agent %s: limit of unknown kind %d", a.cfg.Host, l.Kind)
	}
	took := time.Since(t0)
	a.met.limitUpdates.Inc()
	a.met.nUpdates.Add(1)
	a.met.updateNano.Add(int64(took))
	a.met.limitSeconds.Observe(took.Seconds())
	return nil
}

// restore removes the agent's limits and schedulers (best effort).
func (a *Agent) restore() {
	for id := range a.limits {
		if err := a.applyLimit(mech.Limit{Kind: mech.PairLimit, Pair: id, Rate: mech.Unlimited}); err != nil {
			a.log.Warn("restore", "err", err)
		}
	}
	for _, s := range []*Scheduler{a.txSched, a.rxSched} {
		if s != nil && s.Installed() {
			if err := s.Set(mech.Unlimited, nil); err != nil {
				a.log.Warn("restore", "err", err)
			}
		}
	}
}

// send encodes and sends the mechanism's messages; one to this host is
// queued for the next step directly.
func (a *Agent) send(msgs []mech.Message) {
	for _, m := range msgs {
		m.From = a.cfg.Host
		if m.To == a.cfg.Host {
			a.deliver(m)
			continue
		}
		to, ok := a.cfg.Peers[m.To]
		if !ok {
			a.met.sendErrors.WithLabelValues("unknown-host").Inc()
			a.log.Warn("message to a host without an agent", "to", m.To)
			continue
		}
		a.seq++
		b, err := EncodeMessage(a.cfg.Host, m.To, a.epoch, a.seq, m.Body)
		if err != nil {
			a.met.sendErrors.WithLabelValues("encode").Inc()
			a.log.Warn("encode message", "err", err)
			continue
		}
		if _, err := a.conn.WriteToUDPAddrPort(b, to); err != nil {
			a.met.sendErrors.WithLabelValues("send").Inc()
			a.log.Debug("send message", "to", m.To, "err", err)
			continue
		}
		a.met.sent.Inc()
		a.met.sentBytes.Add(float64(len(b)))
	}
}

func (a *Agent) deliver(m mech.Message) bool {
	a.inMu.Lock()
	defer a.inMu.Unlock()
	if len(a.inbox) >= maxInbox {
		a.met.drop(DropOverflow)
		return false
	}
	a.inbox = append(a.inbox, m)
	return true
}

// receive reads datagrams until the socket is closed.
func (a *Agent) receive() {
	buf := make([]byte, 65536)
	for {
		n, from, err := a.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			a.log.Warn("receive", "err", err)
			continue
		}
		a.handle(buf[:n], from)
	}
}

// handle validates one datagram and queues its message; anything wrong is
// counted by reason and dropped.
func (a *Agent) handle(b []byte, from netip.AddrPort) {
	e, err := DecodeMessage(b, a.cfg.Host)
	if err == nil {
		peer, ok := a.cfg.Peers[e.From]
		switch {
		case !ok || e.From == a.cfg.Host:
			err = wireErr(DropSender, "unknown sender %q", e.From)
		case peer.Addr() != from.Addr().Unmap():
			err = wireErr(DropSender, "sender %q from %v, expected %v", e.From, from.Addr(), peer.Addr())
		}
	}
	if err == nil {
		a.inMu.Lock()
		sq := a.peerSeq[e.From]
		if sq == nil {
			sq = &sequence{}
			a.peerSeq[e.From] = sq
		}
		fresh := sq.accept(e.Epoch, e.Seq)
		a.inMu.Unlock()
		if !fresh {
			err = wireErr(DropStale, "message %d of epoch %d from %s", e.Seq, e.Epoch, e.From)
		}
	}
	if err != nil {
		a.met.drop(reason(err))
		a.log.Debug("message dropped", "from", from, "err", err)
		return
	}
	if a.deliver(mech.Message{From: e.From, To: e.To, Body: e.Body}) {
		a.met.received.Inc()
	}
}

// sortedVMs returns the host's VMs by name.
func (a *Agent) sortedVMs() []*VM {
	out := make([]*VM, 0, len(a.vms))
	for _, v := range a.vms {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// trace writes the step's egress pairs to cfg.Trace.
func (a *Agent) trace(obs *mech.HostObs) {
	var b []byte
	for _, o := range obs.Egress {
		lim := o.Limit
		if l, ok := a.limits[o.Pair]; ok {
			lim = l // after this step's changes
		}
		b = fmt.Appendf(b, "%.3f,%s,%s,%s,%.1f,%.1f,%t,%g\n", obs.Now.Seconds(), a.cfg.Host, o.Pair.Src, o.Pair.Dst,
			o.Rate/1e6, lim/1e6, o.LimiterBound, o.Losses)
	}
	for _, v := range obs.VMs {
		lim, ok := a.vmLimits[mech.Egress][v.VM]
		if !ok && v.InDrops == 0 {
			continue
		}
		if !ok {
			lim = mech.Unlimited
		}
		b = fmt.Appendf(b, "%.3f,%s,%s,*,%.1f,%.1f,false,%.1f\n", obs.Now.Seconds(), a.cfg.Host, v.VM, v.OutRate/1e6, lim/1e6, v.InDrops/1e6)
	}
	if len(b) > 0 {
		if _, err := a.cfg.Trace.Write(b); err != nil {
			// Stop tracing rather than leave a trace with holes; Run
			// returns the error.
			a.traceErr = fmt.Errorf("agent %s: trace: %w", a.cfg.Host, err)
			a.log.Error("trace write failed; tracing stopped", "err", err)
		}
	}
}
