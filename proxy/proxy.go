package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/proxy/httpfs"
	"github.com/bulkhead-dc/bulkhead/proxy/resp"
	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// Protocol is an appliance's wire protocol.
type Protocol int

// Protocols.
const (
	// RESP is Redis' protocol (RESP2 and RESP3).
	RESP Protocol = iota + 1
	// HTTP is HTTP/1.1 to a file store (GET, PUT, HEAD, DELETE).
	HTTP
)

func (p Protocol) String() string {
	switch p {
	case RESP:
		return "resp"
	case HTTP:
		return "http"
	}
	return fmt.Sprintf("protocol(%d)", int(p))
}

// CostFunc is an appliance's virtual cost function: the tokens one request
// of the type (a normalized command name or method) and size (payload
// bytes) costs at the appliance.
type CostFunc func(typ string, size float64) float64

// ModelCost returns the cost function the simulator charges with:
// a.Tokens(typ, size), the appliance's VirtualCost for the type (else for all
// types, else Pulsar Fig. 6(b)). alias renames the proxy's types to the
// model's first (e.g. "set" → "put" for Redis); nil for none.
func ModelCost(a model.Appliance, alias map[string]string) CostFunc {
	a.Costs = slices.Clone(a.Costs)
	a.VirtualCost = slices.Clone(a.VirtualCost)
	for k := range a.VirtualCost {
		a.VirtualCost[k].Points = slices.Clone(a.VirtualCost[k].Points)
	}
	alias = maps.Clone(alias)
	return func(typ string, size float64) float64 {
		if t, ok := alias[typ]; ok {
			typ = t
		}
		return a.Tokens(typ, size)
	}
}

// Appliance is an appliance the proxy relays to.
type Appliance struct {
	// Name is its resource ID: the Dst of its flows' IDs.
	Name     string
	Protocol Protocol
	// Dial opens a connection to it.
	Dial func(ctx context.Context) (net.Conn, error)
	// Cost is its virtual cost function (nil: Pulsar Fig. 6(b),
	// model.DefaultVirtualCost, for every type).
	Cost CostFunc
}

// Flow describes a Pulsar flow: every connection from one source VM to one
// appliance, and the resources on its path.
type Flow struct {
	ID     mech.FlowID
	Tenant string
	// Path lists the resources the flow's requests use (links in the
	// Forward direction carry requests, links in the Reverse direction
	// replies, Appliance elements serve them), in the order the flow's
	// allocations and statistics are indexed.
	Path []mech.PathElem
}

// Config configures a Proxy. The zero value works: real clock, default
// limits, every flow unlimited until allocated.
type Config struct {
	// Clock drives the token buckets and the statistics (nil: the real
	// clock).
	Clock tokenbucket.TimerClock
	// Logger receives warnings about broken connections and unmatched
	// replies (nil: discarded).
	Logger *slog.Logger
	// DefaultRate is the rate, tokens/s on every element of its path, of
	// a flow never allocated (0: unlimited); SetDefault changes it.
	DefaultRate float64
	// BufferSize is the size of each of a connection's four buffers (a
	// reader and a writer each way; 0: 64 KiB).
	BufferSize int
	// MaxInFlight bounds the requests of one connection forwarded and not
	// yet answered (0: 128); at the bound the proxy stops reading the
	// client.
	MaxInFlight int
	// RESP and HTTP bound the framers' inputs.
	RESP resp.Limits
	HTTP httpfs.Limits
	// MaxConnsPerFlow bounds a flow's connections at a time (0:
	// DefaultMaxConnsPerFlow): each holds four buffers, two goroutines
	// and a connection to the appliance. Serve closes a connection beyond
	// it at once, counts it (Observation.Refused) and logs at most one
	// such refusal per RefusalLogInterval.
	MaxConnsPerFlow int
	// IdleTimeout closes a connection on which nothing has moved for that
	// long (0: DefaultIdleTimeout): no bytes read from or written to
	// either the client or the appliance, and no request of it waiting
	// for its flow's tokens. A request outstanding does not keep it open
	// (a blocking command that waits longer, a subscriber that hears
	// nothing, must send something meanwhile, e.g. PING). It is real
	// time, not Clock's, checked every IdleTimeout: a connection closes
	// between one and two IdleTimeouts after it went quiet.
	IdleTimeout time.Duration
	// Buckets are options of every flow's tokenbucket.Multi (refill
	// interval, burst).
	Buckets []tokenbucket.Option
}

// Unlimited is the rate, tokens/s, the proxy gives an unlimited bucket
// (1 PB/s: tokenbucket rates must be finite).
const Unlimited = 1e15

const (
	defaultBufferSize  = 64 << 10
	defaultMaxInFlight = 128
)

// Defaults of Config's bounds on connections.
const (
	// DefaultMaxConnsPerFlow is a flow's bound on its connections at a
	// time: 256 MiB of buffers at the default BufferSize, far more than
	// client libraries' default pools (Jedis 8, go-redis 10 per CPU), and
	// four times the 256 a closed-loop client of the Pulsar experiments
	// keeps from one VM (one connection per outstanding request; the
	// testbed's real-kv-pulsar.yaml).
	DefaultMaxConnsPerFlow = 1024
	// DefaultIdleTimeout is a connection's idle timeout: longer than
	// Redis clients' health checks and HTTP clients' idle connections
	// (net/http's 90 s).
	DefaultIdleTimeout = 10 * time.Minute
	// RefusalLogInterval is the least time (Config.Clock's) between two
	// warnings about connections refused (beyond MaxConnsPerFlow, or by
	// Listen's classify): a VM that opens connections as fast as it can
	// does not flood the log.
	RefusalLogInterval = 10 * time.Second
)

// Errors Serve and Listen return, wrapped; match them with errors.Is.
var (
	// ErrTooManyConns: the connection was beyond its flow's
	// MaxConnsPerFlow and closed at once.
	ErrTooManyConns = errors.New("too many connections for the flow")
	// ErrIdle: the connection was closed after IdleTimeout with nothing
	// moving on it.
	ErrIdle = errors.New("idle")
)

// Proxy relays clients' connections to appliances through their flows'
// multi-resource token buckets and measures the flows for a Pulsar
// controller. It is safe for concurrent use.
type Proxy struct {
	cfg   Config
	clock tokenbucket.TimerClock
	log   *slog.Logger
	apps  map[string]*appliance

	mu     sync.Mutex
	flows  map[mech.FlowID]*flow
	order  []*flow
	alloc  map[mech.FlowID][]float64 // allocations of flows not seen yet
	def    float64                   // default rate (0: unlimited)
	bySrc  map[string]float64
	last   time.Time // of the previous Collect
	closed chan struct{}
	once   sync.Once

	// Warnings about refused connections, at a bounded rate.
	overLimitLog, classifyLog rateLog
}

// rateLog logs one kind of warning at most once per RefusalLogInterval,
// with the number of those it did not log since the last one.
type rateLog struct {
	mu      sync.Mutex
	last    time.Time
	logged  bool
	skipped uint64
}

func (r *rateLog) warn(log *slog.Logger, now time.Time, msg string, args ...any) {
	r.mu.Lock()
	if r.logged && now.Sub(r.last) < RefusalLogInterval {
		r.skipped++
		r.mu.Unlock()
		return
	}
	skipped := r.skipped
	r.last, r.logged, r.skipped = now, true, 0
	r.mu.Unlock()
	log.Warn(msg, append(args, "not_logged_since_last", skipped)...)
}

// New returns a Proxy for the given appliances.
func New(cfg Config, apps ...Appliance) (*Proxy, error) {
	if cfg.Clock == nil {
		cfg.Clock = tokenbucket.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.BufferSize == 0 {
		cfg.BufferSize = defaultBufferSize
	}
	if cfg.BufferSize < 4096 {
		return nil, fmt.Errorf("proxy: buffer size %d below 4096 bytes", cfg.BufferSize)
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	if cfg.MaxInFlight < 1 {
		return nil, fmt.Errorf("proxy: MaxInFlight %d must be positive", cfg.MaxInFlight)
	}
	if cfg.MaxConnsPerFlow == 0 {
		cfg.MaxConnsPerFlow = DefaultMaxConnsPerFlow
	}
	if cfg.MaxConnsPerFlow < 1 {
		return nil, fmt.Errorf("proxy: MaxConnsPerFlow %d must be positive", cfg.MaxConnsPerFlow)
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("proxy: IdleTimeout %v must be positive", cfg.IdleTimeout)
	}
	if err := checkRate(cfg.DefaultRate); err != nil {
		return nil, fmt.Errorf("proxy: default rate: %w", err)
	}
	cfg.Buckets = slices.Clone(cfg.Buckets)
	if _, err := tokenbucket.NewMulti(cfg.Clock, []float64{1}, cfg.Buckets...); err != nil {
		return nil, fmt.Errorf("proxy: bucket options: %w", err)
	}
	p := &Proxy{
		cfg:    cfg,
		clock:  cfg.Clock,
		log:    cfg.Logger,
		apps:   make(map[string]*appliance, len(apps)),
		flows:  make(map[mech.FlowID]*flow),
		alloc:  make(map[mech.FlowID][]float64),
		def:    cfg.DefaultRate,
		last:   cfg.Clock.Now(),
		closed: make(chan struct{}),
	}
	for i, a := range apps {
		switch {
		case a.Name == "":
			return nil, fmt.Errorf("proxy: appliance %d has no name", i)
		case a.Protocol != RESP && a.Protocol != HTTP:
			return nil, fmt.Errorf("proxy: appliance %q: unknown protocol %v", a.Name, a.Protocol)
		case a.Dial == nil:
			return nil, fmt.Errorf("proxy: appliance %q: no Dial", a.Name)
		case p.apps[a.Name] != nil:
			return nil, fmt.Errorf("proxy: appliance %q listed twice", a.Name)
		}
		if a.Cost == nil {
			fig6b := model.DefaultVirtualCost()
			a.Cost = func(_ string, size float64) float64 { return fig6b.Cost(size) }
		}
		p.apps[a.Name] = &appliance{Appliance: a}
	}
	return p, nil
}

func checkRate(r float64) error {
	if !(r >= 0) || math.IsInf(r, -1) {
		return fmt.Errorf("rate %v: must be >= 0 (+Inf: unlimited)", r)
	}
	return nil
}

// bucketRate maps an allocation entry to a bucket rate: +Inf is Unlimited.
func bucketRate(r float64) float64 {
	if math.IsInf(r, 1) || r > Unlimited {
		return Unlimited
	}
	return r
}

// Close stops the proxy's background work (the flows' release loops) and
// makes every Serve in progress return. It does not close listeners.
func (p *Proxy) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

// flowFor returns the flow of f, made on first use.
func (p *Proxy) flowFor(f Flow) (*flow, error) {
	app := p.apps[f.ID.Dst]
	if app == nil {
		return nil, fmt.Errorf("proxy: flow %s->%s: unknown appliance %q", f.ID.Src, f.ID.Dst, f.ID.Dst)
	}
	if len(f.Path) == 0 {
		return nil, fmt.Errorf("proxy: flow %s->%s: empty path", f.ID.Src, f.ID.Dst)
	}
	for i, e := range f.Path {
		if e.Role != mech.Forward && e.Role != mech.Reverse && e.Role != mech.Appliance {
			return nil, fmt.Errorf("proxy: flow %s->%s: path[%d]: unknown role %d", f.ID.Src, f.ID.Dst, i, e.Role)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if fl := p.flows[f.ID]; fl != nil {
		if !slices.Equal(fl.path, f.Path) || fl.tenant != f.Tenant {
			return nil, fmt.Errorf("proxy: flow %s->%s: path or tenant differs from the flow's (%v, %q)", f.ID.Src, f.ID.Dst, fl.path, fl.tenant)
		}
		return fl, nil
	}
	rates, allocated := p.alloc[f.ID]
	if allocated && len(rates) != len(f.Path) {
		p.log.Warn("allocation does not fit the flow's path: default rate", "flow", f.ID, "rates", len(rates), "path", len(f.Path))
		allocated = false
	}
	delete(p.alloc, f.ID)
	k := len(f.Path)
	bucket := make([]float64, k)
	for i := range bucket {
		if allocated {
			bucket[i] = bucketRate(rates[i])
		} else {
			bucket[i] = p.defaultFor(f.ID.Src)
		}
	}
	m, err := tokenbucket.NewMulti(p.clock, bucket, p.cfg.Buckets...)
	if err != nil {
		return nil, fmt.Errorf("proxy: flow %s->%s: %w", f.ID.Src, f.ID.Dst, err)
	}
	now := p.clock.Now()
	fl := &flow{
		p: p, id: f.ID, tenant: f.Tenant, path: slices.Clone(f.Path), app: app, m: m,
		kick: make(chan struct{}, 1),
		out:  make([]float64, k), area: make([]float64, k), last: now, appLast: now,
	}
	if allocated {
		fl.alloc = slices.Clone(rates)
	}
	p.flows[f.ID] = fl
	p.order = append(p.order, fl)
	return fl, nil
}

// defaultFor returns the bucket rate of a never-allocated flow from src.
// Holding p.mu.
func (p *Proxy) defaultFor(src string) float64 {
	r, ok := p.bySrc[src]
	if !ok {
		r = p.def
	}
	if r == 0 {
		return Unlimited
	}
	return bucketRate(r)
}

// SetAllocation sets a flow's allocation, tokens/s per element of its path
// (+Inf: unlimited), atomically for all its buckets. A flow not seen yet
// gets it when its first connection comes.
func (p *Proxy) SetAllocation(id mech.FlowID, rates []float64) error {
	for i, r := range rates {
		if err := checkRate(r); err != nil {
			return fmt.Errorf("proxy: SetAllocation %s->%s: [%d]: %w", id.Src, id.Dst, i, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fl := p.flows[id]
	if fl == nil {
		p.alloc[id] = slices.Clone(rates)
		return nil
	}
	if len(rates) != len(fl.path) {
		return fmt.Errorf("proxy: SetAllocation %s->%s: %d rates for a path of %d", id.Src, id.Dst, len(rates), len(fl.path))
	}
	bucket := make([]float64, len(rates))
	for i, r := range rates {
		bucket[i] = bucketRate(r)
	}
	if err := fl.setRates(bucket); err != nil {
		return fmt.Errorf("proxy: SetAllocation %s->%s: %w", id.Src, id.Dst, err)
	}
	fl.alloc = slices.Clone(rates)
	return nil
}

// SetDefault sets the rate of flows never allocated, tokens/s on every
// element of their paths: bySrc's entry for their source VM, else rate (0:
// unlimited), as mech.ControllerActions' DefaultBySrc and DefaultRate say.
func (p *Proxy) SetDefault(rate float64, bySrc map[string]float64) error {
	if err := checkRate(rate); err != nil {
		return fmt.Errorf("proxy: SetDefault: %w", err)
	}
	for src, r := range bySrc {
		if err := checkRate(r); err != nil {
			return fmt.Errorf("proxy: SetDefault: %s: %w", src, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.def, p.bySrc = rate, maps.Clone(bySrc)
	var errs []error
	for _, fl := range p.order {
		if fl.alloc != nil {
			continue
		}
		bucket := make([]float64, len(fl.path))
		for i := range bucket {
			bucket[i] = p.defaultFor(fl.id.Src)
		}
		if err := fl.setRates(bucket); err != nil {
			errs = append(errs, fmt.Errorf("proxy: SetDefault: flow %s->%s: %w", fl.id.Src, fl.id.Dst, err))
		}
	}
	return errors.Join(errs...)
}

// Apply applies a controller's actions for this host: the default rates,
// then every listed allocation.
func (p *Proxy) Apply(act mech.ControllerActions) error {
	errs := []error{p.SetDefault(act.DefaultRate, act.DefaultBySrc)}
	for _, a := range act.Allocations {
		errs = append(errs, p.SetAllocation(a.Flow, a.Rates))
	}
	return errors.Join(errs...)
}

// Rates returns a flow's bucket rates in tokens/s (Unlimited for unlimited),
// false if the flow has not been seen.
func (p *Proxy) Rates(id mech.FlowID) ([]float64, bool) {
	p.mu.Lock()
	fl := p.flows[id]
	p.mu.Unlock()
	if fl == nil {
		return nil, false
	}
	return fl.m.Rates(), true
}

// Serve relays one client connection of flow f to f's appliance until
// either side closes, a framing error (the client then gets an error reply
// after the replies to its earlier requests), the connection is idle
// (Config.IdleTimeout: ErrIdle), ctx is done or the Proxy is closed. A
// connection beyond its flow's Config.MaxConnsPerFlow is closed at once
// (ErrTooManyConns). It closes client. A clean close by either side
// returns nil.
func (p *Proxy) Serve(ctx context.Context, client net.Conn, f Flow) error {
	defer client.Close()
	fl, err := p.flowFor(f)
	if err != nil {
		return err
	}
	if !fl.addConn() {
		p.overLimitLog.warn(p.log, p.clock.Now(), "connection refused: too many for the flow", "flow", f.ID, "remote", client.RemoteAddr(), "max", p.cfg.MaxConnsPerFlow)
		return fmt.Errorf("proxy: flow %s->%s: %w (%d)", f.ID.Src, f.ID.Dst, ErrTooManyConns, p.cfg.MaxConnsPerFlow)
	}
	defer fl.removeConn()
	server, err := fl.app.Dial(ctx)
	if err != nil {
		return fmt.Errorf("proxy: flow %s->%s: dial: %w", f.ID.Src, f.ID.Dst, err)
	}
	c := newConn(p, fl, client, server)
	defer c.abandon()
	defer c.watchIdle(p.cfg.IdleTimeout)()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, c.closeBoth)
	defer stop()
	go func() {
		select {
		case <-p.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	switch fl.app.Protocol {
	case RESP:
		err = c.relayRESP(ctx)
	default:
		err = c.relayHTTP(ctx)
	}
	c.closeBoth()
	if c.idle.Load() {
		return fmt.Errorf("proxy: flow %s->%s: %w for %v", f.ID.Src, f.ID.Dst, ErrIdle, p.cfg.IdleTimeout)
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("proxy: flow %s->%s: %w", f.ID.Src, f.ID.Dst, err)
	}
	return nil
}

// Accept's retries after a temporary error: the first delay, doubled
// after each further error up to the last.
const (
	acceptRetryMin = 5 * time.Millisecond
	acceptRetryMax = time.Second
)

// temporaryAccept reports whether an Accept error may pass by itself: out
// of file descriptors or memory, a connection aborted before it was
// accepted (net/http's Server.Serve retries the same errors).
func temporaryAccept(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// Listen accepts connections on ln and serves each with Serve, the flow
// given by classify (a connection it refuses is closed, and logged at a
// bounded rate), until ctx is done or the Proxy is closed; it then closes
// ln and waits for the connections it started, and returns nil. A
// temporary Accept error (out of file descriptors, say) is logged and
// retried after a delay that doubles, from 5 ms to 1 s, while it lasts;
// after any other, Listen closes ln and its connections, waits for them
// and returns the error.
func (p *Proxy) Listen(ctx context.Context, ln net.Listener, classify func(net.Conn) (Flow, error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the wait: the connections end
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	go func() {
		select {
		case <-p.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !temporaryAccept(err) {
				return fmt.Errorf("proxy: accept on %v: %w", ln.Addr(), err)
			}
			delay = min(max(2*delay, acceptRetryMin), acceptRetryMax)
			p.log.Warn("accept failed: retrying", "addr", ln.Addr(), "in", delay, "err", err)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			continue
		}
		delay = 0
		f, err := classify(conn)
		if err != nil {
			p.classifyLog.warn(p.log, p.clock.Now(), "connection refused", "remote", conn.RemoteAddr(), "err", err)
			conn.Close()
			continue
		}
		wg.Go(func() {
			err := p.Serve(ctx, conn, f)
			switch {
			case err == nil, errors.Is(err, ErrTooManyConns): // logged by Serve
			case errors.Is(err, ErrIdle):
				p.log.Debug("connection ended", "flow", f.ID, "remote", conn.RemoteAddr(), "err", err)
			default:
				p.log.Warn("connection ended", "flow", f.ID, "remote", conn.RemoteAddr(), "err", err)
			}
		})
	}
}
