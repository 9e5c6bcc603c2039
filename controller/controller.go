// Package controller is Bulkhead's control plane daemon (`bulkhead
// controller`): it keeps the declared cluster — topology, hosts, tenants,
// appliances (package api) — in a store (package store: bbolt embedded, or
// etcd with one leader among several controllers), admits and places
// tenants when an operator applies them, and serves the operator API
// (api/openapi.yaml) over HTTP.
//
// Writes go to the leader only: a follower answers reads from the store
// and refuses writes with 421 and the leader's address. Every apply is
// all or nothing: the objects are merged into the stored cluster, VMs
// without a host are placed, every tenant's hose guarantees must fit
// every link as the cluster's mechanism can guarantee them, and the
// changed objects are committed in one transaction conditioned on the
// revision read (redone if another write came between).
package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/pki"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/bulkhead-dc/bulkhead/webui"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is what a controller needs.
type Config struct {
	// Store keeps the declared objects; Elector says who leads (a bbolt
	// store leads alone).
	Store   store.Store
	Elector store.Elector
	// ID is this controller's operator API URL, which followers give
	// clients that ask them to write.
	ID string
	// Token is the operator token every API request must carry
	// (Authorization: Bearer TOKEN). Empty: requests must come with an
	// operator client certificate verified by the server's TLS (Authn).
	Token string
	// Authn, if set, decides whether a request without the token is an
	// operator's (e.g. a verified operator client certificate).
	Authn  func(r *RequestInfo) bool
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// RequestInfo is what Authn sees of a request.
type RequestInfo struct {
	// TLS is the connection's state when the request came over TLS (with
	// the verified chains of a client certificate, if one was sent).
	TLS *tls.ConnectionState
}

// Controller is one controller process's state. Its methods are safe for
// concurrent use.
type Controller struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry
	met metrics

	mu      sync.Mutex
	leading bool
	leader  string // the leader's ID, as last known
	ready   error  // why the controller is not ready (nil: ready)
	writeMu sync.Mutex

	rt  *runtime // connected agents and what they report
	cen *central // the cluster's central controller (central.go)
	ui  *webui.Server
	ds  dashCache // the web UI's per-revision figures (dashboard.go)
	// resyncEvery is the period of the leader's resyncs: the constant
	// resyncEvery, shorter in tests (set before Run).
	resyncEvery time.Duration

	cacheMu sync.Mutex
	cache   *built // the stored cluster, built, at its last revision
}

// New checks the configuration and returns a controller; Run makes it
// take part in leader election.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.Elector == nil {
		return nil, errors.New("controller: a store and an elector are required")
	}
	if cfg.Token == "" && cfg.Authn == nil {
		return nil, errors.New("controller: an operator token or client-certificate authentication is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Controller{cfg: cfg, log: cfg.Logger, reg: prometheus.NewRegistry(), ready: errors.New("not started"), rt: newRuntime(), cen: newCentral(),
		resyncEvery: resyncEvery}
	c.met = newMetrics(c.reg)
	c.reg.MustRegister(clusterCollector{c})
	ui, err := webui.New(webui.Config{Source: c.Dashboard, Token: cfg.Token, Logger: cfg.Logger, Now: cfg.Now,
		Guard:      func(op string, h http.HandlerFunc) http.Handler { return c.guard(op, true, h) },
		Authorized: func(r *http.Request) bool { return c.operator(r, true) },
		// The token alone: a client certificate needs no login.
		Login: func(token string) bool { return token != "" && c.authorized(token, &RequestInfo{}) }})
	if err != nil {
		return nil, err
	}
	c.ui = ui
	return c, nil
}

// Run campaigns for leadership until ctx ends: while this controller
// leads it takes writes; otherwise it follows and keeps track of the
// leader. It returns nil when ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	c.setReady(nil)
	uiDone := make(chan struct{})
	go func() { defer close(uiDone); c.ui.Run(ctx) }()
	defer func() { <-uiDone }() // Run returns once ctx has ended
	followCtx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	go c.follow(followCtx)
	for {
		lead, err := c.cfg.Elector.Campaign(ctx, c.cfg.ID)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.setReady(fmt.Errorf("campaign: %w", err))
			if errors.Is(err, store.ErrSessionLost) {
				continue // a new session at once: every second adds to a handover
			}
			c.log.Warn("campaign failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		c.setLeading(true)
		c.log.Info("leading", "id", c.cfg.ID)
		c.lead(lead)
		c.setLeading(false)
		if ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = c.cfg.Elector.Resign(rctx)
			cancel()
			return nil
		}
		c.log.Warn("lost leadership", "id", c.cfg.ID)
	}
}

// resyncEvery is how often the leader builds again the snapshots of
// agents that may lack their latest (resync): one not queued while an
// agent's session was full must reach it without waiting for the store's
// next change. A resync with no stale session reads nothing.
const resyncEvery = time.Second

// lead runs the leader's loops until leadership ends: agents get a new
// snapshot whenever the store changes (and, if it could not be queued,
// within resyncEvery), tenants' compliance is counted
// every ComplianceInterval, and the cluster's central controller, if its
// mechanism has one, runs (runCentral).
func (c *Controller) lead(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); c.watchStore(ctx) }()
	go func() { defer wg.Done(); c.countCompliance(ctx) }()
	go func() { defer wg.Done(); c.runCentral(ctx) }()
	wg.Wait()
	// Agents connected to a former leader reconnect to the new one.
	c.rt.mu.Lock()
	for h, s := range c.rt.sessions {
		close(s.send)
		delete(c.rt.sessions, h)
	}
	c.rt.mu.Unlock()
}

// watchStore pushes snapshots to agents when the stored objects change,
// and resyncs stale sessions every resyncEvery.
func (c *Controller) watchStore(ctx context.Context) {
	t := time.NewTicker(c.resyncEvery)
	defer t.Stop()
	for ctx.Err() == nil {
		_, rev, err := c.cfg.Store.List(ctx, api.KindCluster)
		if err == nil {
			var w store.Watcher
			if w, err = c.cfg.Store.Watch(ctx, rev); err == nil {
				c.push(ctx)
				err = c.pushEvents(ctx, w, t.C)
			}
		}
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("store watch ended; watching again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// pushEvents pushes snapshots at each of w's events and resyncs at each
// tick, until w ends; it returns w's error.
func (c *Controller) pushEvents(ctx context.Context, w store.Watcher, tick <-chan time.Time) error {
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			c.push(ctx)
		case <-tick:
			c.resync(ctx)
		}
	}
}

// follow keeps the leader's ID current for followers' answers.
func (c *Controller) follow(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		id, err := c.cfg.Elector.Leader(ctx)
		c.mu.Lock()
		if err == nil {
			c.leader = id
			c.ready = nil
		} else if ctx.Err() == nil {
			c.ready = fmt.Errorf("leader unknown: %w", err)
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Controller) setLeading(on bool) {
	c.mu.Lock()
	c.leading = on
	if on {
		c.leader = c.cfg.ID
	}
	c.mu.Unlock()
	v := 0.0
	if on {
		v = 1
	}
	c.met.leader.Set(v)
}

func (c *Controller) setReady(err error) {
	c.mu.Lock()
	c.ready = err
	c.mu.Unlock()
}

// Leading reports whether this controller leads, and the leader's ID.
func (c *Controller) Leading() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading, c.leader
}

// NotLeader is a write refused by a follower.
type NotLeader struct{ Leader string }

func (e *NotLeader) Error() string {
	if e.Leader == "" {
		return "this controller does not lead and no leader is known yet: retry"
	}
	return "this controller does not lead: write to the leader at " + e.Leader
}

// notLeader is a follower's refusal, naming the leader as the elector
// says now.
func (c *Controller) notLeader(ctx context.Context) error {
	id, err := c.cfg.Elector.Leader(ctx)
	if err != nil || id == "" {
		_, id = c.Leading()
	}
	return &NotLeader{Leader: id}
}

// Apply stores objects (see the package comment). With dryRun, it checks
// and places them and stores nothing.
func (c *Controller) Apply(ctx context.Context, objs []api.Object, dryRun bool) (*api.ApplyResult, error) {
	if len(objs) == 0 {
		return nil, &Invalid{errors.New("no objects to apply")}
	}
	if len(objs) > api.MaxObjects {
		return nil, &Invalid{fmt.Errorf("%d objects, at most %d in one apply", len(objs), api.MaxObjects)}
	}
	if lead, _ := c.Leading(); !lead && !dryRun {
		return nil, c.notLeader(ctx)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	for attempt := 0; ; attempt++ {
		snap, err := load(ctx, c.cfg.Store)
		if err != nil {
			return nil, err
		}
		merged, puts, results, err := snap.apply(objs, c.cfg.Now())
		if err != nil {
			return nil, err
		}
		res := &api.ApplyResult{Results: results, Revision: snap.rev, DryRun: dryRun}
		for _, r := range results {
			if i := indexOf(merged, r.Kind, r.Name); i >= 0 {
				res.Objects = append(res.Objects, merged[i])
			}
		}
		if dryRun || len(puts) == 0 {
			return res, nil
		}
		recs := make([]store.Object, len(puts))
		for i := range puts {
			if recs[i], err = encode(&puts[i]); err != nil {
				return nil, err
			}
		}
		rev, err := c.cfg.Store.Commit(ctx, snap.rev, recs, nil)
		if errors.Is(err, store.ErrConflict) && attempt < maxRetries {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store the objects: %w", err)
		}
		res.Revision = rev
		for _, r := range results {
			c.met.applied.WithLabelValues(r.Kind, string(r.Action)).Inc()
			if r.Action != api.Unchanged {
				c.log.Info("applied", "kind", r.Kind, "name", r.Name, "action", r.Action, "revision", rev)
			}
		}
		return res, nil
	}
}

// Delete removes one object, refusing what others depend on.
func (c *Controller) Delete(ctx context.Context, kind, name string) (api.Object, error) {
	if lead, _ := c.Leading(); !lead {
		return api.Object{}, c.notLeader(ctx)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	for attempt := 0; ; attempt++ {
		snap, err := load(ctx, c.cfg.Store)
		if err != nil {
			return api.Object{}, err
		}
		o, err := snap.remove(kind, name)
		if err != nil {
			return api.Object{}, err
		}
		rev, err := c.cfg.Store.Commit(ctx, snap.rev, nil, []store.Key{key(&o)})
		if errors.Is(err, store.ErrConflict) && attempt < maxRetries {
			continue
		}
		if err != nil {
			return api.Object{}, fmt.Errorf("delete %s %q: %w", kind, name, err)
		}
		c.met.deleted.WithLabelValues(kind).Inc()
		c.log.Info("deleted", "kind", kind, "name", name, "revision", rev)
		return o, nil
	}
}

// List returns the stored objects of a kind ("" for all) by name, with
// their status.
func (c *Controller) List(ctx context.Context, kind string) ([]api.Object, error) {
	snap, err := load(ctx, c.cfg.Store)
	if err != nil {
		return nil, err
	}
	var out []api.Object
	for _, o := range snap.objs {
		if kind == "" || o.Kind == kind {
			out = append(out, o)
		}
	}
	c.fillStatus(snap, out)
	return out, nil
}

// Get returns one stored object with its status.
func (c *Controller) Get(ctx context.Context, kind, name string) (api.Object, error) {
	snap, err := load(ctx, c.cfg.Store)
	if err != nil {
		return api.Object{}, err
	}
	i, ok := snap.find(kind, name)
	if !ok {
		return api.Object{}, fmt.Errorf("%s %q: %w", kind, name, store.ErrNotFound)
	}
	out := []api.Object{snap.objs[i]}
	c.fillStatus(snap, out)
	return out[0], nil
}

func indexOf(objs []api.Object, kind, name string) int {
	for i := range objs {
		if objs[i].Kind == kind && objs[i].Name() == name {
			return i
		}
	}
	return -1
}

// authorized checks a request's operator credentials.
func (c *Controller) authorized(bearer string, info *RequestInfo) bool {
	if pki.TokenEqual(bearer, c.cfg.Token) {
		return true
	}
	return c.cfg.Authn != nil && c.cfg.Authn(info)
}
