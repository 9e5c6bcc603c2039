package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Defaults of EtcdConfig.
const (
	// DefaultEtcdPrefix is where the store's keys live in etcd.
	DefaultEtcdPrefix = "/bulkhead/v1/"
	// DefaultSessionTTL is the lease of a campaigning controller: a leader
	// that dies loses leadership after at most this long (2 s, so that
	// another leads within 5 s), and a leader cut off from etcd for this
	// long steps down.
	DefaultSessionTTL = 2 * time.Second
	// DefaultDialTimeout bounds connecting to one endpoint.
	DefaultDialTimeout = 5 * time.Second
)

// etcdMetaValue is the value of the meta key, the store's layout version.
const etcdMetaValue = "bulkhead-store-v1"

// EtcdConfig says how to reach the etcd cluster.
type EtcdConfig struct {
	// Endpoints are the cluster's client URLs (e.g. https://10.0.0.1:2379).
	Endpoints []string
	// Prefix is where the store's keys live (DefaultEtcdPrefix if empty);
	// it must end with '/'. Objects are at Prefix + kind + "/" + name; the
	// store's own keys at Prefix + "_meta" and Prefix + "_election/".
	Prefix string
	// TLS, if not nil, is used to reach the endpoints (mutual TLS).
	TLS *tls.Config
	// SessionTTL is the lease of a campaigning controller's session
	// (DefaultSessionTTL if 0; rounded up to whole seconds, etcd's lease
	// granularity): a leader that stops refreshing it loses leadership
	// after at most this long, and another controller leads.
	SessionTTL time.Duration
	// DialTimeout bounds connecting to an endpoint (DefaultDialTimeout if 0).
	DialTimeout time.Duration
}

// Etcd is a Store in an etcd cluster, and an Elector over etcd's
// concurrency package.
//
// Revisions are etcd's. Every commit also writes a meta key, whose
// ModRevision is thus the revision of the last commit; a commit is one etcd
// transaction that succeeds if the meta key's ModRevision is not after its
// base (writes outside the store, e.g. elections, move etcd's revision but
// not the meta key, so they never conflict). List returns the etcd revision
// it read at, which is never compacted when it is returned, so that
// re-listing after ErrCompacted always yields a revision to watch from.
// An object's Revision is its key's ModRevision, the revision of the commit
// that wrote it.
type Etcd struct {
	cli      *clientv3.Client
	where    string // for errors: endpoints and prefix
	prefix   string
	metaKey  string
	elecPfx  string
	ttl      int // seconds
	limits   watchLimits
	closeCtx context.Context // ends when Close starts: watchers, lease grants
	closeFn  context.CancelFunc
	sessCtx  context.Context // ends when Close ends: the session's keep-alive and revoke
	sessFn   context.CancelFunc

	// campaignMu is held by Campaign while it makes a session and
	// campaigns (network round trips), and by Close to wait for it.
	campaignMu sync.Mutex

	mu      sync.Mutex // guards the fields below; held only briefly
	closed  bool
	session *concurrency.Session
	lead    *etcdLead
}

type etcdLead struct {
	el       *concurrency.Election
	cancel   context.CancelFunc
	once     sync.Once
	resigned chan struct{}
	err      error
}

// resign ends the leadership and deletes the election key, once.
func (l *etcdLead) resign(ctx context.Context) error {
	l.once.Do(func() {
		l.cancel()
		l.err = l.el.Resign(ctx)
		close(l.resigned)
	})
	<-l.resigned
	return l.err
}

// OpenEtcd connects to the etcd cluster in cfg and checks that it answers
// (within ctx) and that the prefix holds this store's layout or nothing.
func OpenEtcd(ctx context.Context, cfg EtcdConfig) (*Etcd, error) {
	return openEtcd(ctx, cfg, defaultWatchLimits)
}

func openEtcd(ctx context.Context, cfg EtcdConfig, limits watchLimits) (*Etcd, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultEtcdPrefix
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	where := fmt.Sprintf("etcd %s prefix %s", strings.Join(cfg.Endpoints, ","), cfg.Prefix)
	switch {
	case len(cfg.Endpoints) == 0:
		return nil, errors.New("store: open etcd: no endpoints")
	case !strings.HasSuffix(cfg.Prefix, "/"):
		return nil, fmt.Errorf("store: open %s: the prefix must end with '/'", where)
	case cfg.SessionTTL < 0:
		return nil, fmt.Errorf("store: open %s: negative session TTL %v", where, cfg.SessionTTL)
	}
	ttl := int((cfg.SessionTTL + time.Second - 1) / time.Second)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		TLS:         cfg.TLS,
		DialTimeout: cfg.DialTimeout,
		// Room for a maximal commit: MaxCommitBytes plus the prefix
		// and framing of each operation.
		MaxCallSendMsgSize: MaxCommitBytes + MaxCommitObjects*(len(cfg.Prefix)+64) + 1<<20,
		Logger:             zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", where, err)
	}
	e := &Etcd{
		cli:     cli,
		where:   where,
		prefix:  cfg.Prefix,
		metaKey: cfg.Prefix + "_meta",
		elecPfx: cfg.Prefix + "_election/",
		ttl:     ttl,
		limits:  limits,
	}
	e.closeCtx, e.closeFn = context.WithCancel(context.Background())
	e.sessCtx, e.sessFn = context.WithCancel(context.Background())
	resp, err := cli.Get(ctx, e.metaKey)
	if err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("store: open %s: %w", where, err)
	}
	if len(resp.Kvs) > 0 && string(resp.Kvs[0].Value) != etcdMetaValue {
		_ = cli.Close()
		return nil, fmt.Errorf("store: open %s: layout %q, this bulkhead reads %q", where, resp.Kvs[0].Value, etcdMetaValue)
	}
	return e, nil
}

func (e *Etcd) key(k Key) string { return e.prefix + k.Kind + "/" + k.Name }

// parseKey returns the object key of an etcd key under the prefix, false
// for the store's own keys.
func (e *Etcd) parseKey(key []byte) (Key, bool) {
	rest, ok := strings.CutPrefix(string(key), e.prefix)
	if !ok || strings.HasPrefix(rest, "_") {
		return Key{}, false
	}
	kind, name, ok := strings.Cut(rest, "/")
	if !ok || kind == "" || name == "" {
		return Key{}, false
	}
	return Key{Kind: kind, Name: name}, true
}

func (e *Etcd) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// explain adds what the operator can do to etcd's refusals of big commits.
func explain(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return fmt.Errorf("%w (start etcd with --max-txn-ops of at least %d)", err, MaxCommitObjects+1)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("%w (start etcd with --max-request-bytes of 10 MiB: a commit may hold %d bytes plus framing)", err, MaxCommitBytes)
	}
	return err
}

// Get implements Store.
func (e *Etcd) Get(ctx context.Context, k Key) (Object, error) {
	if err := checkKey(k); err != nil {
		return Object{}, fmt.Errorf("store: get from %s: %w", e.where, err)
	}
	if e.isClosed() {
		return Object{}, fmt.Errorf("store: get %s from %s: %w", k, e.where, ErrClosed)
	}
	resp, err := e.cli.Get(ctx, e.key(k))
	if err != nil {
		return Object{}, fmt.Errorf("store: get %s from %s: %w", k, e.where, err)
	}
	if len(resp.Kvs) == 0 {
		return Object{}, fmt.Errorf("store: get %s from %s: %w", k, e.where, ErrNotFound)
	}
	kv := resp.Kvs[0]
	return Object{Key: k, Data: kv.Value, Revision: kv.ModRevision}, nil
}

// List implements Store: one read (a transaction) of the meta key and the
// objects, so the revision and the objects agree.
func (e *Etcd) List(ctx context.Context, kind string) ([]Object, int64, error) {
	rng := e.prefix
	if kind != "" {
		if err := checkKind(kind); err != nil {
			return nil, 0, fmt.Errorf("store: list in %s: %w", e.where, err)
		}
		rng = e.prefix + kind + "/"
	}
	if e.isClosed() {
		return nil, 0, fmt.Errorf("store: list %q in %s: %w", kind, e.where, ErrClosed)
	}
	resp, err := e.cli.Txn(ctx).Then(
		clientv3.OpGet(e.metaKey, clientv3.WithCountOnly()),
		clientv3.OpGet(rng, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("store: list %q in %s: %w", kind, e.where, err)
	}
	rev := resp.Header.Revision
	kvs := resp.Responses[1].GetResponseRange().Kvs
	objs := make([]Object, 0, len(kvs))
	for _, kv := range kvs {
		k, ok := e.parseKey(kv.Key)
		if !ok {
			continue
		}
		objs = append(objs, Object{Key: k, Data: kv.Value, Revision: kv.ModRevision})
	}
	// etcd sorts by the whole key, where '/' after the kind sorts
	// differently from the end of a shorter kind.
	sort.Slice(objs, func(i, j int) bool {
		if objs[i].Kind != objs[j].Kind {
			return objs[i].Kind < objs[j].Kind
		}
		return objs[i].Name < objs[j].Name
	})
	return objs, rev, nil
}

// Commit implements Store: one etcd transaction, if the meta key's
// ModRevision is not after base, of the puts, the deletes and a put of
// the meta key.
func (e *Etcd) Commit(ctx context.Context, base int64, puts []Object, deletes []Key) (int64, error) {
	if err := checkCommit(puts, deletes); err != nil {
		return 0, fmt.Errorf("store: commit to %s: %w", e.where, err)
	}
	if e.isClosed() {
		return 0, fmt.Errorf("store: commit to %s: %w", e.where, ErrClosed)
	}
	if len(puts)+len(deletes) == 0 {
		resp, err := e.cli.Get(ctx, e.metaKey)
		if err != nil {
			return 0, fmt.Errorf("store: commit to %s: %w", e.where, err)
		}
		if len(resp.Kvs) > 0 && resp.Kvs[0].ModRevision > base {
			return 0, fmt.Errorf("store: commit to %s: base revision %d, committed at %d since: %w", e.where, base, resp.Kvs[0].ModRevision, ErrConflict)
		}
		return resp.Header.Revision, nil
	}
	ops := make([]clientv3.Op, 0, len(puts)+len(deletes)+1)
	for _, o := range puts {
		ops = append(ops, clientv3.OpPut(e.key(o.Key), string(o.Data)))
	}
	for _, k := range deletes {
		ops = append(ops, clientv3.OpDelete(e.key(k)))
	}
	ops = append(ops, clientv3.OpPut(e.metaKey, etcdMetaValue))
	resp, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(e.metaKey), "<", base+1)).
		Then(ops...).
		Else(clientv3.OpGet(e.metaKey)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("store: commit of %d puts and %d deletes to %s: %w", len(puts), len(deletes), e.where, explain(err))
	}
	if !resp.Succeeded {
		var cur int64
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			cur = kvs[0].ModRevision
		}
		return 0, fmt.Errorf("store: commit to %s: base revision %d, committed at %d since: %w", e.where, base, cur, ErrConflict)
	}
	return resp.Header.Revision, nil
}

// Watch implements Store with an etcd watch of the prefix from rev+1. The
// watcher's lag is bounded like Bolt's (events received from etcd and not
// yet taken by the caller). ErrCompacted may come from Watch or, later,
// from Err.
func (e *Etcd) Watch(ctx context.Context, rev int64) (Watcher, error) {
	if rev < 0 {
		return nil, fmt.Errorf("store: watch %s from revision %d: negative revision", e.where, rev)
	}
	if e.isClosed() {
		return nil, fmt.Errorf("store: watch %s: %w", e.where, ErrClosed)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	stop := context.AfterFunc(e.closeCtx, cancel)
	wch := e.cli.Watch(wctx, e.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify(), clientv3.WithRev(rev+1))
	fail := func(err error) (Watcher, error) {
		stop()
		cancel()
		return nil, fmt.Errorf("store: watch %s from revision %d: %w", e.where, rev, err)
	}
	// The first response says whether the watch was created.
	var first clientv3.WatchResponse
	select {
	case resp, ok := <-wch:
		if !ok {
			if e.closeCtx.Err() != nil {
				return fail(ErrClosed)
			}
			return fail(context.Cause(wctx))
		}
		first = resp
	case <-wctx.Done():
		if e.closeCtx.Err() != nil {
			return fail(ErrClosed)
		}
		return fail(ctx.Err())
	}
	if first.CompactRevision != 0 {
		return fail(fmt.Errorf("etcd compacted up to %d: %w", first.CompactRevision, ErrCompacted))
	}
	if err := first.Err(); err != nil {
		return fail(err)
	}
	w := &watcher{ch: make(chan Event, watchBuffer)}
	go func() {
		defer close(w.ch)
		defer stop()
		defer cancel()
		w.err = e.forward(ctx, wch, w.ch, first)
		if w.err != nil {
			w.err = fmt.Errorf("store: watch %s from revision %d: %w", e.where, rev, w.err)
		}
	}()
	return w, nil
}

// forward turns etcd's watch responses into events on out, keeping at most
// e.limits of them pending. It returns nil when ctx ends.
func (e *Etcd) forward(ctx context.Context, wch clientv3.WatchChan, out chan<- Event, first clientv3.WatchResponse) error {
	var (
		pending      []Event
		pendingBytes int
	)
	add := func(resp clientv3.WatchResponse) error {
		if resp.CompactRevision != 0 {
			return fmt.Errorf("etcd compacted up to %d: %w", resp.CompactRevision, ErrCompacted)
		}
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			k, ok := e.parseKey(ev.Kv.Key)
			if !ok {
				continue
			}
			rev := ev.Kv.ModRevision
			var x Event
			switch ev.Type {
			case mvccpb.PUT:
				x = Event{Type: Put, Object: Object{Key: k, Data: ev.Kv.Value, Revision: rev}, Revision: rev}
			case mvccpb.DELETE:
				x = Event{Type: Delete, Object: Object{Key: k, Revision: rev}, Revision: rev}
			default:
				continue
			}
			pending = append(pending, x)
			pendingBytes += eventBytes(x)
		}
		if len(pending) > e.limits.events || pendingBytes > e.limits.bytes {
			return fmt.Errorf("%d events (%d bytes) not yet received: %w", len(pending), pendingBytes, ErrWatcherTooSlow)
		}
		return nil
	}
	if err := add(first); err != nil {
		return err
	}
	for {
		var (
			send chan<- Event
			next Event
		)
		if len(pending) > 0 {
			send, next = out, pending[0]
		}
		select {
		case resp, ok := <-wch:
			if !ok {
				switch {
				case e.closeCtx.Err() != nil:
					return ErrClosed
				case ctx.Err() != nil:
					return nil
				}
				return errors.New("etcd closed the watch")
			}
			if err := add(resp); err != nil {
				return err
			}
		case send <- next:
			pendingBytes -= eventBytes(next)
			pending[0] = Event{}
			pending = pending[1:]
		case <-ctx.Done():
			return nil
		case <-e.closeCtx.Done():
			return ErrClosed
		}
	}
}

// liveSession returns a live session, making a new one if there is none or
// the last one was lost. e.campaignMu is held.
func (e *Etcd) liveSession(ctx context.Context) (*concurrency.Session, error) {
	e.mu.Lock()
	sess := e.session
	e.mu.Unlock()
	if sess != nil {
		select {
		case <-sess.Done():
		default:
			return sess, nil
		}
	}
	// Grant within ctx, and not past the start of Close; the session's
	// keep-alive then lasts until Close ends.
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.closeCtx, cancel)
	defer stop()
	resp, err := e.cli.Grant(gctx, int64(e.ttl))
	if err != nil {
		if e.closeCtx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("grant a lease of %ds: %w", e.ttl, err)
	}
	sess, err = concurrency.NewSession(e.cli, concurrency.WithTTL(e.ttl), concurrency.WithLease(resp.ID), concurrency.WithContext(e.sessCtx))
	if err != nil {
		return nil, fmt.Errorf("keep lease %x alive: %w", resp.ID, err)
	}
	e.mu.Lock()
	e.session = sess
	e.mu.Unlock()
	return sess, nil
}

// Campaign implements Elector with concurrency.Election under Prefix +
// "_election/". The leadership context ends when the session's lease is no
// longer refreshed (the client lost the cluster for SessionTTL), on
// Resign, on Close, or when ctx ends (which also resigns). One Campaign at
// a time per store: a second one, or one while leading, is refused. When
// the session is lost while waiting, Campaign returns an error wrapping
// ErrSessionLost: campaign again (on a new session).
//
// Leadership is a lease: a leader cut off from etcd may still believe it
// leads for up to about half a second after its lease expired and another
// controller leads (etcd's client checks lease deadlines every 500 ms).
// Commit's base revision keeps the data consistent meanwhile.
func (e *Etcd) Campaign(ctx context.Context, id string) (context.Context, error) {
	if !e.campaignMu.TryLock() {
		return nil, fmt.Errorf("store: campaign as %q on %s: another campaign of this store is running", id, e.where)
	}
	defer e.campaignMu.Unlock()
	e.mu.Lock()
	closed, leading := e.closed, e.lead != nil
	e.mu.Unlock()
	switch {
	case closed:
		return nil, fmt.Errorf("store: campaign as %q on %s: %w", id, e.where, ErrClosed)
	case leading:
		return nil, fmt.Errorf("store: campaign as %q on %s: already leading (resign first)", id, e.where)
	}
	sess, err := e.liveSession(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: campaign as %q on %s: %w", id, e.where, err)
	}
	// Wait for leadership until ctx ends, the store closes or the
	// session is lost (the caller may campaign again, on a new session).
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	stopOnClose := context.AfterFunc(e.closeCtx, ccancel)
	defer stopOnClose()
	stopOnLoss := context.AfterFunc(sess.Ctx(), ccancel)
	defer stopOnLoss()
	el := concurrency.NewElection(sess, e.elecPfx)
	if err := el.Campaign(cctx, id); err != nil {
		switch {
		case e.closeCtx.Err() != nil:
			err = ErrClosed
		case ctx.Err() == nil && sess.Ctx().Err() != nil:
			err = fmt.Errorf("lease %x not refreshed for %ds: %w", sess.Lease(), e.ttl, ErrSessionLost)
		}
		return nil, fmt.Errorf("store: campaign as %q on %s: %w", id, e.where, err)
	}
	lctx, cancel := context.WithCancel(ctx)
	l := &etcdLead{el: el, cancel: cancel, resigned: make(chan struct{})}
	e.mu.Lock()
	closed = e.closed
	if !closed {
		e.lead = l
	}
	e.mu.Unlock()
	if closed {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Duration(e.ttl)*time.Second)
		defer rcancel()
		_ = l.resign(rctx)
		return nil, fmt.Errorf("store: campaign as %q on %s: %w", id, e.where, ErrClosed)
	}
	go func() {
		select {
		case <-sess.Done():
		case <-lctx.Done():
		}
		// Delete the election key if the lease still lives (Resign, Close
		// or ctx ended); if the session was lost, the lease expires.
		rctx, rcancel := context.WithTimeout(context.Background(), time.Duration(e.ttl)*time.Second)
		_ = l.resign(rctx)
		rcancel()
		e.mu.Lock()
		if e.lead == l {
			e.lead = nil
		}
		e.mu.Unlock()
	}()
	return lctx, nil
}

// Leader implements Elector: the value of the oldest key in the election.
func (e *Etcd) Leader(ctx context.Context) (string, error) {
	resp, err := e.cli.Get(ctx, e.elecPfx, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("store: leader on %s: %w", e.where, err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Resign implements Elector. It returns when the election key is deleted
// (or deleting it failed), so another controller can lead.
func (e *Etcd) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.lead
	e.lead = nil
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	if err := l.resign(ctx); err != nil {
		return fmt.Errorf("store: resign on %s: %w", e.where, err)
	}
	return nil
}

// Close implements Store: it resigns, ends the watchers, revokes the
// session's lease and closes the client. Closing twice is not an error.
func (e *Etcd) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	l := e.lead
	e.lead = nil
	e.mu.Unlock()
	var errs []error
	if l != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(e.ttl)*time.Second)
		errs = append(errs, l.resign(ctx))
		cancel()
	}
	// Ends the watchers and a lease grant in flight, then waits for a
	// campaign in flight (a campaign waiting for leadership holds until
	// its context ends or it leads; the revoke below ends it).
	e.closeFn()
	e.mu.Lock()
	sess := e.session
	e.mu.Unlock()
	if sess != nil {
		errs = append(errs, sess.Close())
	}
	e.campaignMu.Lock()
	e.mu.Lock()
	if e.session != sess && e.session != nil {
		errs = append(errs, e.session.Close())
	}
	e.mu.Unlock()
	e.campaignMu.Unlock()
	e.sessFn()
	errs = append(errs, e.cli.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close %s: %w", e.where, err)
	}
	return nil
}
