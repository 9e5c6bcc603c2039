package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
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
	"google.golang.org/protobuf/encoding/protowire"
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
	// maxStatsReasons bounds the drop reasons of a report's stats, and
	// maxReasonLen each reason's name (the agent has a handful).
	maxStatsReasons = 64
	maxReasonLen    = 64
)

// MaxSnapshotBytes is the largest message an agent receives, bytes:
// gRPC's default receive limit, which agentd's client keeps (it sets no
// MaxCallRecvMsgSize; it should take this constant if it ever does). A
// host's snapshot (its ControllerMessage) larger than this never reaches
// the agent: it is not sent (snapshotFor), and an apply that would make
// one is refused (checkSnapshots).
const MaxSnapshotBytes = 4 << 20

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
	// views are the VMs of the snapshots sent or queued that the agent
	// may still enforce, oldest first (at most maxViews): what its
	// reports may name (checkVMs).
	views []hostView
}

// hostView is what one snapshot of a host tells its agent of the VMs
// it may report on: every VM of the tenants with a VM on the host, with
// its tenant and whether it is the host's own.
type hostView struct {
	rev int64
	vms map[string]viewVM
}

type viewVM struct {
	tenant string
	local  bool // on the host
}

// maxViews bounds the views a session keeps: the snapshots queued since
// the one the agent last reported enforcing (an agent that cannot apply
// a snapshot keeps reporting on its previous one; agentd retries it).
const maxViews = 2 * sessionBuffer

// viewOf is the view of host's snapshot of cluster cl at revision rev.
func viewOf(cl *api.Cluster, host string, rev int64) hostView {
	v := hostView{rev: rev, vms: map[string]viewVM{}}
	for _, t := range cl.Model.Tenants {
		if !slices.ContainsFunc(t.VMs, func(v model.VM) bool { return v.Host == host }) {
			continue
		}
		for _, vm := range t.VMs {
			v.vms[vm.Name] = viewVM{tenant: t.Name, local: vm.Host == host}
		}
	}
	return v
}

// newSession is a session whose agent is first sent snap, of view. It
// starts stale: a change committed after snap was built and before the
// session is registered reaches no push.
func newSession(host, version string, snap *controlpb.Snapshot, view hostView) *session {
	return &session{host: host, version: version, send: make(chan *controlpb.ControllerMessage, sessionBuffer), last: snap, stale: true,
		views: []hostView{view}}
}

// addView records the view of a snapshot queued to the agent (runtime.mu
// held).
func (s *session) addView(v hostView) {
	if len(s.views) >= maxViews {
		s.views = slices.Delete(s.views, 0, len(s.views)-maxViews+1)
	}
	s.views = append(s.views, v)
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
	snap, view, err := c.snapshotFor(ctx, host)
	if err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	sess := newSession(host, hello.Version, snap, view)
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
		lastRefused := "" // the last report not taken, logged once
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
			if err := c.report(sess, r); err != nil {
				if errors.As(err, new(notOnHost)) {
					// Its agent may be a snapshot behind (one it cannot
					// apply) and name a VM that has left the host: the
					// report is not taken, the session goes on.
					if msg := err.Error(); msg != lastRefused {
						lastRefused = msg
						c.log.Warn("agent's report not taken: it names a VM its snapshots do not place on its host", "host", host, "err", err)
					}
					continue
				}
				c.log.Warn("agent's report refused; its session ends", "host", host, "err", err)
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

// snapshotFor builds the snapshot of one host from the store, with its
// view.
func (c *Controller) snapshotFor(ctx context.Context, host string) (*controlpb.Snapshot, hostView, error) {
	snap, cl, err := c.cluster(ctx)
	if snap == nil {
		return nil, hostView{}, err
	}
	if err != nil {
		return nil, hostView{}, fmt.Errorf("the declared cluster is incomplete: %w", err)
	}
	if _, ok := cl.Hosts[host]; !ok {
		return nil, hostView{}, fmt.Errorf("host %q is not declared: apply a Host object named %q with its address", host, host)
	}
	master, err := c.agentSecret(ctx)
	if err != nil {
		return nil, hostView{}, err
	}
	s, err := buildSnapshot(cl, host, snap.rev, func(peer string) []byte { return wireauth.PairKey(master, host, peer) })
	if err != nil {
		return nil, hostView{}, err
	}
	if n := snapshotSize(s); n > MaxSnapshotBytes {
		c.met.tooLarge.Inc()
		c.log.Error("snapshot larger than an agent receives: not sent; the agent keeps its previous model",
			"host", host, "bytes", n, "limit", MaxSnapshotBytes, "revision", snap.rev)
		return nil, hostView{}, &tooLarge{host: host, bytes: n}
	}
	return s, viewOf(cl, host, snap.rev), nil
}

// tooLarge is a host's snapshot larger than MaxSnapshotBytes.
type tooLarge struct {
	host  string
	bytes int
}

func (e *tooLarge) Error() string {
	return fmt.Sprintf("host %s's snapshot is %d bytes, more than the %d an agent receives: not sent", e.host, e.bytes, MaxSnapshotBytes)
}

// snapshotSize is the encoded size of the message that carries s.
func snapshotSize(s *controlpb.Snapshot) int {
	return proto.Size(&controlpb.ControllerMessage{Msg: &controlpb.ControllerMessage_Snapshot{Snapshot: s}})
}

// buildSnapshot is host's snapshot of cluster cl at revision rev, with
// key(peer) the key the host shares with each peer.
func buildSnapshot(cl *api.Cluster, host string, rev int64, key func(peer string) []byte) (*controlpb.Snapshot, error) {
	m := &model.Model{Appliances: cl.Model.Appliances, Hosts: cl.Model.Hosts}
	for _, t := range cl.Model.Tenants {
		if slices.ContainsFunc(t.VMs, func(v model.VM) bool { return v.Host == host }) {
			m.Tenants = append(m.Tenants, t)
		}
	}
	mj, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("host %s's model: %w", host, err)
	}
	pj, err := json.Marshal(cl.Spec.Mechanism.Params)
	if err != nil {
		return nil, fmt.Errorf("mechanism parameters: %w", err)
	}
	self := cl.Hosts[host]
	s := &controlpb.Snapshot{Revision: rev, ModelJson: mj, Mechanism: cl.Spec.Mechanism.Name, ParamsJson: pj,
		Address: self.Address.String(), Port: uint32(self.Port), AppliancePaths: appliancePaths(cl, host)}
	for _, name := range slices.Sorted(maps.Keys(cl.Hosts)) {
		if name == host {
			continue
		}
		h := cl.Hosts[name]
		s.Peers = append(s.Peers, &controlpb.Peer{Host: name, Address: h.Address.String(), Port: uint32(h.Port),
			Key: key(name)})
	}
	return s, nil
}

// sizingKey stands for the pair keys when only a snapshot's size
// matters: every key has this length (wireauth.PairKey, an HMAC-SHA256).
var sizingKey = make([]byte, sha256.Size)

// checkSnapshots refuses a cluster in which a host's snapshot would be
// larger than an agent receives (MaxSnapshotBytes): the host's agent
// would keep its previous model. A host whose snapshot was already that
// large in the stored cluster (before, its objects) may keep one no
// larger, so that an apply that shrinks it is taken.
func checkSnapshots(cl *api.Cluster, before []api.Object) error {
	sizes, err := snapshotSizes(cl)
	if err != nil {
		return err
	}
	var was map[string]int
	for _, host := range slices.Sorted(maps.Keys(sizes)) {
		n := sizes[host]
		if n <= MaxSnapshotBytes {
			continue
		}
		if was == nil && len(before) > 0 {
			if prev, err := api.Build(before); err == nil { // not, if the stored objects were no cluster yet
				was, _ = snapshotSizes(prev)
			}
		}
		if m, ok := was[host]; ok && n <= m {
			continue
		}
		return &Invalid{&model.FieldError{File: api.KindHost + " " + strconv.Quote(host), Path: "snapshot",
			Msg: fmt.Sprintf("the host's snapshot (the tenants with a VM on it, whole; every host as a peer; the appliances and the paths to them) would be %d bytes, more than the %d an agent receives (MaxSnapshotBytes): its agent would keep its previous model. Declare fewer or smaller tenants with VMs on it, or fewer hosts or appliances", n, MaxSnapshotBytes)}}
	}
	return nil
}

// snapshotSizes are the encoded sizes of every host's snapshot of cl at
// any revision (snapshotSize of buildSnapshot's, at the largest), from
// the sizes of their parts: each tenant is encoded once, not once for
// each host of its VMs, and each peer once.
func snapshotSizes(cl *api.Cluster) (map[string]int, error) {
	// A host's model is base with "null" for its tenants, or
	// "[T1,T2,...]".
	base, err := json.Marshal(&model.Model{Appliances: cl.Model.Appliances, Hosts: cl.Model.Hosts})
	if err != nil {
		return nil, fmt.Errorf("the hosts' models: %w", err)
	}
	modelSize := map[string]int{}
	vmsOn := map[string][]model.VM{}
	for _, t := range cl.Model.Tenants {
		b, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("tenant %s's model: %w", t.Name, err)
		}
		seen := map[string]bool{}
		for _, v := range t.VMs {
			vmsOn[v.Host] = append(vmsOn[v.Host], v)
			if seen[v.Host] {
				continue
			}
			seen[v.Host] = true
			if modelSize[v.Host] == 0 {
				modelSize[v.Host] = len(base) - len("null") + len("[]") - len(",")
			}
			modelSize[v.Host] += len(b) + len(",")
		}
	}
	pj, err := json.Marshal(cl.Spec.Mechanism.Params)
	if err != nil {
		return nil, fmt.Errorf("mechanism parameters: %w", err)
	}
	const (
		snapshotField = 1 // ControllerMessage.snapshot
		modelField    = 2 // Snapshot.model_json
		peersField    = 5 // Snapshot.peers
	)
	peer := map[string]int{}
	var peers int
	for name, h := range cl.Hosts {
		p := &controlpb.Peer{Host: name, Address: h.Address.String(), Port: uint32(h.Port), Key: sizingKey}
		peer[name] = protowire.SizeTag(peersField) + protowire.SizeBytes(proto.Size(p))
		peers += peer[name]
	}
	out := make(map[string]int, len(cl.Hosts))
	for name, h := range cl.Hosts {
		m := modelSize[name]
		if m == 0 {
			m = len(base)
		}
		rest := &controlpb.Snapshot{Revision: math.MaxInt64, Mechanism: cl.Spec.Mechanism.Name, ParamsJson: pj,
			Address: h.Address.String(), Port: uint32(h.Port), AppliancePaths: vmPaths(cl, vmsOn[name])}
		n := proto.Size(rest) + protowire.SizeTag(modelField) + protowire.SizeBytes(m) + peers - peer[name]
		out[name] = protowire.SizeTag(snapshotField) + protowire.SizeBytes(n)
	}
	return out, nil
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

// report takes an agent's report on session s, whole or not at all: it
// is checked first — its bounds and rates (checkReport), and that every
// VM it names is one the session's snapshots gave the host
// (session.checkVMs) — and a report that fails is refused with an error
// saying which entry and why, counted, and nothing of it kept. A VM's
// rates feed its tenant's compliance, the metrics and the web UI: a host
// speaks for its own VMs only.
func (c *Controller) report(s *session, r *controlpb.Report) error {
	if err := checkReport(r); err != nil {
		c.met.refused.Inc()
		return fmt.Errorf("report refused: %w", err)
	}
	now := c.cfg.Now()
	c.rt.mu.Lock()
	if err := s.checkVMs(r); err != nil {
		c.rt.mu.Unlock()
		c.met.refused.Inc()
		return fmt.Errorf("report refused: %w", notOnHost{err})
	}
	s.enforces(r.Revision)
	hs := c.rt.host(s.host)
	hs.lastReport, hs.stats, hs.revision = now, r.Stats, r.Revision
	for _, v := range r.Vms {
		c.rt.vms[v.Vm] = &vmState{received: v.Received, sent: v.Sent, at: now}
	}
	for _, p := range r.Pairs {
		if p.Bound {
			c.rt.bound[p.Dst] = true
		}
	}
	c.rt.pairs[s.host] = hostPairs{pairs: r.Pairs, at: now}
	c.rt.mu.Unlock()
	c.cen.observe(s.host, r, now)
	c.met.reports.Inc()
	return nil
}

// notOnHost is the refusal of a report that names a VM its session's
// snapshots do not place on its host (checkVMs): the report is not taken,
// but the session goes on.
type notOnHost struct{ err error }

func (e notOnHost) Error() string { return e.err.Error() }
func (e notOnHost) Unwrap() error { return e.err }

// checkReport checks a report's bounds and values, naming the first
// entry that is wrong.
func checkReport(r *controlpb.Report) error {
	switch {
	case len(r.Vms) > maxReportVMs:
		return fmt.Errorf("vms: %d entries, at most %d", len(r.Vms), maxReportVMs)
	case len(r.Pairs) > maxReportPairs:
		return fmt.Errorf("pairs: %d entries, at most %d", len(r.Pairs), maxReportPairs)
	case len(r.Flows) > maxReportFlows:
		return fmt.Errorf("flows: %d entries, at most %d", len(r.Flows), maxReportFlows)
	case len(r.VmObs) > maxReportVMs:
		return fmt.Errorf("vm_obs: %d entries, at most %d", len(r.VmObs), maxReportVMs)
	}
	for i, v := range r.Vms {
		if !finiteNonNeg(v.Received) || !finiteNonNeg(v.Sent) {
			return fmt.Errorf("vms[%d] (VM %s): received and sent must be finite and non-negative", i, quote(v.Vm))
		}
	}
	for i, p := range r.Pairs {
		if !finiteNonNeg(p.Rate) || !(p.Limit >= 0) || math.IsInf(p.Limit, 1) || !(p.Losses >= 0) || math.IsInf(p.Losses, 1) {
			return fmt.Errorf("pairs[%d] (%s->%s): rate, limit and losses must be finite and non-negative", i, quote(p.Src), quote(p.Dst))
		}
	}
	if st := r.Stats; st != nil {
		if len(st.Dropped) > maxStatsReasons {
			return fmt.Errorf("stats.dropped: %d reasons, at most %d", len(st.Dropped), maxStatsReasons)
		}
		for k := range st.Dropped {
			if len(k) > maxReasonLen {
				return fmt.Errorf("stats.dropped: reason %s longer than %d bytes", quote(k), maxReasonLen)
			}
		}
		if !finiteNonNeg(st.StepSeconds) {
			return errors.New("stats.step_seconds must be finite and non-negative")
		}
	}
	return nil
}

// checkVMs checks that a report names only VMs the session's snapshots
// gave its host: each VM's rates are of a VM on the host; each pair is
// one of the host's egress pairs (agentd reports its VMs' pair limiters:
// the source on the host), toward a VM of the model it was sent (of the
// tenants with a VM on the host), and a pair its limiter held back
// (bound, which marks the destination held back in its tenant's
// compliance) is within one tenant, as pair limits are. It checks
// against the views of the snapshot the report says the agent enforces
// (its revision) and of those queued after it — all the session's views
// when it names none. runtime.mu held.
func (s *session) checkVMs(r *controlpb.Report) error {
	views := s.views[s.enforced(r.Revision):]
	local := func(vm string) bool {
		return slices.ContainsFunc(views, func(v hostView) bool { return v.vms[vm].local })
	}
	known := func(vm string) bool {
		return slices.ContainsFunc(views, func(v hostView) bool { _, ok := v.vms[vm]; return ok })
	}
	sameTenant := func(a, b string) bool {
		return slices.ContainsFunc(views, func(v hostView) bool {
			x, ok1 := v.vms[a]
			y, ok2 := v.vms[b]
			return ok1 && ok2 && x.tenant == y.tenant
		})
	}
	for i, v := range r.Vms {
		if !local(v.Vm) {
			return fmt.Errorf("vms[%d]: %s is not a VM of host %s", i, quote(v.Vm), s.host)
		}
	}
	for i, p := range r.Pairs {
		switch {
		case !local(p.Src):
			return fmt.Errorf("pairs[%d] (%s->%s): the source is not a VM of host %s", i, quote(p.Src), quote(p.Dst), s.host)
		case !known(p.Dst):
			return fmt.Errorf("pairs[%d] (%s->%s): the destination is not a VM of the tenants on host %s", i, quote(p.Src), quote(p.Dst), s.host)
		case p.Bound && !sameTenant(p.Src, p.Dst):
			return fmt.Errorf("pairs[%d] (%s->%s): held back by a pair limiter (bound) across tenants", i, quote(p.Src), quote(p.Dst))
		}
	}
	return nil
}

// enforced is the index of the view of the snapshot an agent reporting
// revision rev enforces: the latest at or before rev (0 when none is).
func (s *session) enforced(rev int64) int {
	k := 0
	for i, v := range s.views {
		if v.rev <= rev {
			k = i
		}
	}
	return k
}

// enforces drops the views of the snapshots before the one an agent
// reporting revision rev enforces: it has taken a later one (runtime.mu
// held).
func (s *session) enforces(rev int64) {
	s.views = slices.Delete(s.views, 0, s.enforced(rev))
}

// quote quotes a name from an agent for an error, cut to 64 bytes.
func quote(name string) string {
	const max = 64
	if len(name) > max {
		return strconv.Quote(name[:max]) + "…"
	}
	return strconv.Quote(name)
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
		snap, view, err := c.snapshotFor(ctx, s.host)
		var big *tooLarge
		if errors.As(err, &big) {
			// Logged and counted: built again at the store's next change,
			// not at every resync (it does not shrink by itself).
			c.rt.mu.Lock()
			s.stale = false
			c.rt.mu.Unlock()
			continue
		}
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
				s.addView(view)
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
