package controller

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/pki"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/bulkhead-dc/bulkhead/wireauth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// secretKey is where the store keeps the master secret from which the
// agents' pair keys are derived (not an API kind: never listed).
var secretKey = store.Key{Kind: "Secret", Name: "agents"}

// Bounds on what an agent may send.
const (
	// MaxAgentMessage is the largest message an agent may send, bytes.
	MaxAgentMessage = 4 << 20
	maxReportVMs    = 10000
	maxReportPairs  = 100000
)

// agentService serves the agents' sessions (controlpb.Control).
type agentService struct {
	controlpb.UnimplementedControlServer
	c *Controller
}

// sessionBuffer is how many messages (snapshots, Pulsar's actions) a
// session queues for its agent; what does not fit is not queued.
const sessionBuffer = 4

// session is one connected agent.
type session struct {
	host    string
	version string
	// send is closed, and the session removed from runtime.sessions,
	// under runtime.mu (a newer session of the host, leadership lost):
	// send on it only under that lock, to a session still registered.
	send chan *controlpb.ControllerMessage

	// Under runtime.mu.
	last *controlpb.Snapshot // the snapshot last sent or queued, to skip unchanged ones
	// stale: the agent may lack its latest snapshot (one that was not
	// queued, could not be built, or was committed while the session
	// registered); the next resync builds it again.
	stale bool
}

// newSession is a session whose agent is first sent snap. It starts
// stale: a change committed after snap was built and before the session
// is registered reaches no push.
func newSession(host, version string, snap *controlpb.Snapshot) *session {
	return &session{host: host, version: version, send: make(chan *controlpb.ControllerMessage, sessionBuffer), last: snap, stale: true}
}

// hostState is what the controller knows of a host's agent.
type hostState struct {
	connected  bool
	version    string
	lastReport time.Time
	stats      *controlpb.AgentStats
	revision   int64
}

// vmState is one VM's rates from its host's latest report.
type vmState struct {
	received, sent float64
	at             time.Time
}

// hostPairs are the pair rates of a host's latest report (bounded by
// maxReportPairs).
type hostPairs struct {
	pairs []*controlpb.PairRates
	at    time.Time
}

// tenantCompliance counts a tenant's report intervals.
type tenantCompliance struct {
	intervals, compliant int
}

// runtime is the controller's view of the running cluster.
type runtime struct {
	mu       sync.Mutex
	sessions map[string]*session
	hosts    map[string]*hostState
	vms      map[string]*vmState
	tenants  map[string]*tenantCompliance
	bound    map[string]bool      // destination VMs some pair toward which its limiter held back, latest reports
	pairs    map[string]hostPairs // each host's VM pairs in its latest report (the web UI's link rates)
	// view is the latest compliance interval's judgement of every
	// declared tenant, declared the declared hosts, sorted (for the
	// metrics: clusterCollector); nil while not leading.
	view     map[string]tenantView
	declared []string
}

func newRuntime() *runtime {
	return &runtime{sessions: map[string]*session{}, hosts: map[string]*hostState{}, vms: map[string]*vmState{},
		tenants: map[string]*tenantCompliance{}, bound: map[string]bool{}, pairs: map[string]hostPairs{}}
}

// GRPCServer returns a gRPC server for the agents, over mutual TLS with
// creds (the controller's certificate; clients must present host
// certificates from the same CA).
func (c *Controller) GRPCServer(creds credentials.TransportCredentials) *grpc.Server {
	s := grpc.NewServer(grpc.Creds(creds), grpc.MaxRecvMsgSize(MaxAgentMessage))
	controlpb.RegisterControlServer(s, &agentService{c: c})
	return s
}

// hostOf is the host name in the verified certificate of the stream's
// peer.
func hostOf(ctx context.Context) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no peer")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "agents connect over mutual TLS with a host certificate")
	}
	name, err := pki.Require(ti.State, pki.Host)
	if err != nil {
		return "", status.Error(codes.PermissionDenied, err.Error())
	}
	return name, nil
}

// Session implements controlpb.ControlServer.
func (s *agentService) Session(stream grpc.BidiStreamingServer[controlpb.AgentMessage, controlpb.ControllerMessage]) error {
	c := s.c
	ctx := stream.Context()
	host, err := hostOf(ctx)
	if err != nil {
		return err
	}
	if lead, leader := c.Leading(); !lead {
		return status.Errorf(codes.Unavailable, "not the leader; the leader is %q", leader)
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	switch {
	case hello == nil:
		return status.Error(codes.InvalidArgument, "the first message must be a Hello")
	case hello.Host != host:
		return status.Errorf(codes.PermissionDenied, "agent says it is host %q, its certificate is host %q's", hello.Host, host)
	case len(hello.Version) > 64:
		return status.Error(codes.InvalidArgument, "version longer than 64 bytes")
	}
	snap, err := c.snapshotFor(ctx, host)
	if err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	sess := newSession(host, hello.Version, snap)
	c.rt.mu.Lock()
	if old := c.rt.sessions[host]; old != nil {
		close(old.send) // a host has one session: the newer wins
	}
	c.rt.sessions[host] = sess
	hs := c.rt.host(host)
	hs.connected, hs.version, hs.revision = true, hello.Version, hello.Revision
	c.rt.mu.Unlock()
	c.met.agents.Inc()
	c.log.Info("agent connected", "host", host, "version", hello.Version, "revision", hello.Revision)
	defer func() {
		c.rt.mu.Lock()
		if c.rt.sessions[host] == sess {
			delete(c.rt.sessions, host)
			c.rt.host(host).connected = false
		}
		c.rt.mu.Unlock()
		c.met.agents.Dec()
		c.log.Info("agent disconnected", "host", host)
	}()
	if err := stream.Send(&controlpb.ControllerMessage{Msg: &controlpb.ControllerMessage_Snapshot{Snapshot: snap}}); err != nil {
		return err
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			r := m.GetReport()
			if r == nil {
				recvErr <- status.Error(codes.InvalidArgument, "after Hello an agent sends Reports only")
				return
			}
			if err := c.report(host, r); err != nil {
				recvErr <- status.Error(codes.InvalidArgument, err.Error())
				return
			}
		}
	}()
	for {
		select {
		case err := <-recvErr:
			return err
		case m, ok := <-sess.send:
			if !ok {
				return status.Error(codes.Aborted, "replaced by a newer session of the same host")
			}
			if err := stream.Send(m); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// snapshotFor builds the snapshot of one host from the store.
func (c *Controller) snapshotFor(ctx context.Context, host string) (*controlpb.Snapshot, error) {
	snap, cl, err := c.cluster(ctx)
	if snap == nil {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("the declared cluster is incomplete: %w", err)
	}
	if _, ok := cl.Hosts[host]; !ok {
		return nil, fmt.Errorf("host %q is not declared: apply a Host object named %q with its address", host, host)
	}
	master, err := c.agentSecret(ctx)
	if err != nil {
		return nil, err
	}
	m := &model.Model{Appliances: cl.Model.Appliances, Hosts: cl.Model.Hosts}
	for _, t := range cl.Model.Tenants {
		if slices.ContainsFunc(t.VMs, func(v model.VM) bool { return v.Host == host }) {
			m.Tenants = append(m.Tenants, t)
		}
	}
	mj, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	pj, err := json.Marshal(cl.Spec.Mechanism.Params)
	if err != nil {
		return nil, fmt.Errorf("mechanism parameters: %w", err)
	}
	self := cl.Hosts[host]
	s := &controlpb.Snapshot{Revision: snap.rev, ModelJson: mj, Mechanism: cl.Spec.Mechanism.Name, ParamsJson: pj,
		Address: self.Address.String(), Port: uint32(self.Port), AppliancePaths: appliancePaths(cl, host)}
	for _, name := range slices.Sorted(maps.Keys(cl.Hosts)) {
		if name == host {
			continue
		}
		h := cl.Hosts[name]
		s.Peers = append(s.Peers, &controlpb.Peer{Host: name, Address: h.Address.String(), Port: uint32(h.Port),
			Key: wireauth.PairKey(master, host, name)})
	}
	return s, nil
}

// sameSnapshot says whether two snapshots differ only in their revision
// (which changes with every commit, of any host's objects).
func sameSnapshot(a, b *controlpb.Snapshot) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := proto.Clone(a).(*controlpb.Snapshot), proto.Clone(b).(*controlpb.Snapshot)
	x.Revision, y.Revision = 0, 0
	return proto.Equal(x, y)
}

// agentSecret returns the master secret of the agents' pair keys,
// creating it in the store the first time.
func (c *Controller) agentSecret(ctx context.Context) ([]byte, error) {
	data, err := ensureSecret(ctx, c.cfg.Store, secretKey, func() ([]byte, error) {
		master, err := wireauth.NewMaster()
		if err != nil {
			return nil, err
		}
		return json.Marshal(struct{ Master string }{hex.EncodeToString(master)})
	})
	if err != nil {
		return nil, fmt.Errorf("agent secret: %w", err)
	}
	var s struct{ Master string }
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("stored agent secret: %w", err)
	}
	return hex.DecodeString(s.Master)
}

// ensureSecret returns the record at key, storing make's value there
// first if there is none. The check and the write are one conditional
// commit on the same read (newValue makes the value), so of several controllers starting at once
// all end with the value of the one that stored it first.
func ensureSecret(ctx context.Context, st store.Store, key store.Key, newValue func() ([]byte, error)) ([]byte, error) {
	for attempt := 0; attempt < maxRetries; attempt++ {
		recs, rev, err := st.List(ctx, key.Kind)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Name == key.Name {
				return r.Data, nil
			}
		}
		v, err := newValue()
		if err != nil {
			return nil, err
		}
		if _, err := st.Commit(ctx, rev, []store.Object{{Key: key, Data: v}}, nil); err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, err
		}
	}
	return nil, errors.New("the store kept changing")
}

func (rt *runtime) host(name string) *hostState {
	h := rt.hosts[name]
	if h == nil {
		h = &hostState{}
		rt.hosts[name] = h
	}
	return h
}

// report takes an agent's report: bounded, checked against the host's
// own VMs.
func (c *Controller) report(host string, r *controlpb.Report) error {
	if len(r.Vms) > maxReportVMs || len(r.Pairs) > maxReportPairs {
		return fmt.Errorf("report with %d VMs and %d pairs exceeds the bounds (%d, %d)", len(r.Vms), len(r.Pairs), maxReportVMs, maxReportPairs)
	}
	now := c.cfg.Now()
	if err := c.cen.observe(host, r, now); err != nil {
		return err
	}
	c.met.reports.Inc()
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	hs := c.rt.host(host)
	hs.lastReport, hs.stats, hs.revision = now, r.Stats, r.Revision
	for _, v := range r.Vms {
		if !finiteNonNeg(v.Received) || !finiteNonNeg(v.Sent) {
			return fmt.Errorf("VM %q: rates must be finite and non-negative", v.Vm)
		}
		c.rt.vms[v.Vm] = &vmState{received: v.Received, sent: v.Sent, at: now}
	}
	for _, p := range r.Pairs {
		if p.Bound {
			c.rt.bound[p.Dst] = true
		}
	}
	c.rt.pairs[host] = hostPairs{pairs: r.Pairs, at: now}
	return nil
}

func finiteNonNeg(x float64) bool { return x >= 0 && x <= 1e15 }

// push queues every connected agent its snapshot if it changed (at a
// store event).
func (c *Controller) push(ctx context.Context) { c.sendSnapshots(ctx, true) }

// resync queues again the snapshots of stale sessions: a snapshot not
// queued (the agent's session full for a moment) or not built (a store
// error) is not lost until the store's next change, and an agent never
// stays on an old model — new VMs unenforced, raised guarantees not
// applied. It reads nothing when no session is stale, and only the
// store's revision when the store has not changed since their snapshots.
func (c *Controller) resync(ctx context.Context) { c.sendSnapshots(ctx, false) }

// sendSnapshots builds the snapshots of every session (all) or of the
// stale ones and queues those that changed since the one last sent. A
// snapshot counts as sent once queued; one that is not leaves its
// session stale.
func (c *Controller) sendSnapshots(ctx context.Context, all bool) {
	var rev int64
	if !all {
		if !c.anyStale() {
			return
		}
		var err error
		if _, rev, err = c.cfg.Store.List(ctx, api.KindCluster); err != nil {
			if ctx.Err() == nil {
				c.log.Debug("resync: read the store", "err", err)
			}
			return
		}
	}
	type pending struct {
		s    *session
		last *controlpb.Snapshot
	}
	var todo []pending
	c.rt.mu.Lock()
	for _, s := range c.rt.sessions {
		switch {
		case all:
		case !s.stale:
			continue
		case s.last != nil && s.last.Revision == rev:
			s.stale = false // its snapshot was built at the store's current revision
			continue
		}
		todo = append(todo, pending{s, s.last})
	}
	c.rt.mu.Unlock()
	for _, p := range todo {
		s := p.s
		snap, err := c.snapshotFor(ctx, s.host)
		if err != nil {
			c.rt.mu.Lock()
			s.stale = true
			c.rt.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			c.log.Log(ctx, level(all), "snapshot not built; built again at the next resync", "host", s.host, "err", err)
			continue
		}
		same := sameSnapshot(snap, p.last) // outside the lock: it copies both
		c.rt.mu.Lock()
		dropped := false
		switch {
		case c.rt.sessions[s.host] != s:
			// Ended: its agent gets a fresh snapshot when it connects again.
		case s.last != p.last:
			s.stale = true // another push came between: the next resync compares again
		case same:
			s.stale = false
		default:
			select {
			case s.send <- &controlpb.ControllerMessage{Msg: &controlpb.ControllerMessage_Snapshot{Snapshot: snap}}:
				s.last, s.stale = snap, false
			default:
				s.stale, dropped = true, true
			}
		}
		c.rt.mu.Unlock()
		if dropped {
			c.log.Log(ctx, level(all), "agent is not reading its session: snapshot not queued; queued again at the next resync", "host", s.host, "revision", snap.Revision)
		}
	}
}

// level is the level of a snapshot's failure: a warning at a store
// event, a debug message at the resyncs that follow every second.
func level(all bool) slog.Level {
	if all {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// anyStale says whether some session is stale.
func (c *Controller) anyStale() bool {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	for _, s := range c.rt.sessions {
		if s.stale {
			return true
		}
	}
	return false
}

// tokenKey is where the store keeps the operator token, so that every
// controller of a cluster takes the same.
var tokenKey = store.Key{Kind: "Secret", Name: "operator-token"}

// EnsureToken returns the cluster's operator token from the store,
// storing proposed there first if it has none (a random one if proposed
// is empty).
func EnsureToken(ctx context.Context, st store.Store, proposed string) (string, error) {
	b, err := ensureSecret(ctx, st, tokenKey, func() ([]byte, error) {
		if proposed != "" {
			return []byte(proposed), nil
		}
		return []byte(pki.NewToken()), nil
	})
	if err != nil {
		return "", fmt.Errorf("operator token: %w", err)
	}
	return string(b), nil
}
