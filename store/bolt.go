package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// DefaultOpenTimeout is how long OpenBolt waits for the file's lock when
// given no timeout.
const DefaultOpenTimeout = time.Second

// boltFormat is the layout version written to the meta bucket.
const boltFormat = "bulkhead-store-v1"

// The file's layout: a meta bucket (format, revision) and an objects bucket
// holding one bucket per kind, name → 8-byte big-endian revision + Data.
var (
	bucketMeta    = []byte("meta")
	bucketObjects = []byte("objects")
	keyFormat     = []byte("format")
	keyRevision   = []byte("revision")
)

// watchLimits bound how far a watcher may fall behind: the events (and
// their bytes) it has not yet received. Past them it is closed with
// ErrWatcherTooSlow, so that a stuck watcher never holds memory without
// bound nor blocks a commit. The defaults hold several maximal commits.
type watchLimits struct {
	events int
	bytes  int
}

var defaultWatchLimits = watchLimits{events: 4 * MaxCommitObjects, bytes: 4 * MaxCommitBytes}

// watchBuffer is the capacity of a watcher's channel.
const watchBuffer = 64

// eventBytes is what an event counts for against watchLimits.bytes.
func eventBytes(ev Event) int {
	return len(ev.Object.Data) + len(ev.Object.Kind) + len(ev.Object.Name) + 64
}

// Bolt is a Store kept in one bbolt file. It is also an Elector that leads
// at once: one process owns the file.
//
// Watch is served in process: each commit appends its events to a bounded
// in-memory history and wakes the watchers, each of which reads the history
// from its own position; a watcher whose next event has been dropped from
// the history is closed with ErrWatcherTooSlow. The history starts empty
// when the file is opened, so a watch from before the open's revision gets
// ErrCompacted.
type Bolt struct {
	db     *bolt.DB
	path   string
	limits watchLimits

	// commitMu serialises commits so that the history is appended in
	// revision order.
	commitMu sync.Mutex

	mu        sync.Mutex
	closed    bool
	done      chan struct{} // closed by Close
	rev       int64         // the revision of the last commit
	hist      []Event       // every event with a revision > histFloor, in order
	histFloor int64
	histBytes int
	changed   chan struct{} // closed and replaced by each commit
	lead      *boltLead
}

type boltLead struct {
	id     string
	ctx    context.Context
	cancel context.CancelFunc
}

// OpenBolt opens (creating if needed) the store in the bbolt file at path.
// It waits up to timeout (DefaultOpenTimeout if ≤ 0) for the file's lock and
// returns an error wrapping ErrLocked, naming the file, if another process
// holds it.
func OpenBolt(path string, timeout time.Duration) (*Bolt, error) {
	return openBolt(path, timeout, defaultWatchLimits)
}

func openBolt(path string, timeout time.Duration, limits watchLimits) (*Bolt, error) {
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("store: open %s: %w (no lock within %v: is another bulkhead controller using this file?)", path, ErrLocked, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	var rev int64
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketObjects); err != nil {
			return err
		}
		switch f := meta.Get(keyFormat); {
		case f == nil:
			if err := meta.Put(keyFormat, []byte(boltFormat)); err != nil {
				return err
			}
		case string(f) != boltFormat:
			return fmt.Errorf("format %q, this bulkhead reads %q", f, boltFormat)
		}
		rev, err = readRevision(meta)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return &Bolt{
		db:        db,
		path:      path,
		limits:    limits,
		done:      make(chan struct{}),
		rev:       rev,
		histFloor: rev,
		changed:   make(chan struct{}),
	}, nil
}

// Path returns the file's path.
func (b *Bolt) Path() string { return b.path }

func readRevision(meta *bolt.Bucket) (int64, error) {
	v := meta.Get(keyRevision)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("corrupt revision: %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func encodeValue(rev int64, data []byte) []byte {
	v := make([]byte, 8+len(data))
	binary.BigEndian.PutUint64(v, uint64(rev))
	copy(v[8:], data)
	return v
}

// decodeValue copies the object out of bbolt's memory (valid only inside
// the transaction).
func decodeValue(k Key, v []byte) (Object, error) {
	if len(v) < 8 {
		return Object{}, fmt.Errorf("%s: corrupt value of %d bytes", k, len(v))
	}
	return Object{Key: k, Data: bytes.Clone(v[8:]), Revision: int64(binary.BigEndian.Uint64(v))}, nil
}

func (b *Bolt) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Get implements Store.
func (b *Bolt) Get(ctx context.Context, k Key) (Object, error) {
	if err := checkKey(k); err != nil {
		return Object{}, fmt.Errorf("store: get from %s: %w", b.path, err)
	}
	if err := ctx.Err(); err != nil {
		return Object{}, fmt.Errorf("store: get %s from %s: %w", k, b.path, err)
	}
	if b.isClosed() {
		return Object{}, fmt.Errorf("store: get %s from %s: %w", k, b.path, ErrClosed)
	}
	var o Object
	err := b.db.View(func(tx *bolt.Tx) error {
		kb := tx.Bucket(bucketObjects).Bucket([]byte(k.Kind))
		if kb == nil {
			return ErrNotFound
		}
		v := kb.Get([]byte(k.Name))
		if v == nil {
			return ErrNotFound
		}
		var err error
		o, err = decodeValue(k, v)
		return err
	})
	if err != nil {
		return Object{}, fmt.Errorf("store: get %s from %s: %w", k, b.path, err)
	}
	return o, nil
}

// List implements Store.
func (b *Bolt) List(ctx context.Context, kind string) ([]Object, int64, error) {
	if kind != "" {
		if err := checkKind(kind); err != nil {
			return nil, 0, fmt.Errorf("store: list in %s: %w", b.path, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("store: list %q in %s: %w", kind, b.path, err)
	}
	if b.isClosed() {
		return nil, 0, fmt.Errorf("store: list %q in %s: %w", kind, b.path, ErrClosed)
	}
	var (
		objs []Object
		rev  int64
	)
	err := b.db.View(func(tx *bolt.Tx) error {
		var err error
		if rev, err = readRevision(tx.Bucket(bucketMeta)); err != nil {
			return err
		}
		listKind := func(kind string, kb *bolt.Bucket) error {
			return kb.ForEach(func(name, v []byte) error {
				o, err := decodeValue(Key{Kind: kind, Name: string(name)}, v)
				objs = append(objs, o)
				return err
			})
		}
		all := tx.Bucket(bucketObjects)
		if kind != "" {
			if kb := all.Bucket([]byte(kind)); kb != nil {
				return listKind(kind, kb)
			}
			return nil
		}
		// bbolt iterates in byte order, which is Go's string order:
		// sorted by kind, then name.
		return all.ForEachBucket(func(k []byte) error {
			return listKind(string(k), all.Bucket(k))
		})
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: list %q in %s: %w", kind, b.path, err)
	}
	return objs, rev, nil
}

// Commit implements Store. The context is checked before the write; the
// write itself (an fsync) is not interrupted.
func (b *Bolt) Commit(ctx context.Context, base int64, puts []Object, deletes []Key) (int64, error) {
	if err := checkCommit(puts, deletes); err != nil {
		return 0, fmt.Errorf("store: commit to %s: %w", b.path, err)
	}
	b.commitMu.Lock()
	defer b.commitMu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("store: commit to %s: %w", b.path, err)
	}
	if b.isClosed() {
		return 0, fmt.Errorf("store: commit to %s: %w", b.path, ErrClosed)
	}
	var (
		rev    int64
		events []Event
	)
	err := b.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		cur, err := readRevision(meta)
		if err != nil {
			return err
		}
		if cur != base {
			return fmt.Errorf("base revision %d, the store is at %d: %w", base, cur, ErrConflict)
		}
		rev = cur
		if len(puts)+len(deletes) == 0 {
			return nil
		}
		rev = cur + 1
		all := tx.Bucket(bucketObjects)
		for _, o := range puts {
			kb, err := all.CreateBucketIfNotExists([]byte(o.Kind))
			if err != nil {
				return fmt.Errorf("put %s: %w", o.Key, err)
			}
			data := bytes.Clone(o.Data)
			if err := kb.Put([]byte(o.Name), encodeValue(rev, data)); err != nil {
				return fmt.Errorf("put %s: %w", o.Key, err)
			}
			events = append(events, Event{Type: Put, Object: Object{Key: o.Key, Data: data, Revision: rev}, Revision: rev})
		}
		for _, k := range deletes {
			kb := all.Bucket([]byte(k.Kind))
			if kb == nil || kb.Get([]byte(k.Name)) == nil {
				continue
			}
			if err := kb.Delete([]byte(k.Name)); err != nil {
				return fmt.Errorf("delete %s: %w", k, err)
			}
			events = append(events, Event{Type: Delete, Object: Object{Key: k, Revision: rev}, Revision: rev})
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(rev))
		return meta.Put(keyRevision, v[:])
	})
	if err != nil {
		return 0, fmt.Errorf("store: commit to %s: %w", b.path, err)
	}
	if rev != base {
		b.publish(rev, events)
	}
	return rev, nil
}

// publish appends a commit's events to the history, trims it to the
// limits (never dropping the newest commit) and wakes the watchers. It
// never blocks on a watcher.
func (b *Bolt) publish(rev int64, events []Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rev = rev
	b.hist = append(b.hist, events...)
	for _, ev := range events {
		b.histBytes += eventBytes(ev)
	}
	for len(b.hist) > 0 && b.hist[0].Revision != rev &&
		(len(b.hist) > b.limits.events || b.histBytes > b.limits.bytes) {
		oldest := b.hist[0].Revision
		i := 0
		for ; i < len(b.hist) && b.hist[i].Revision == oldest; i++ {
			b.histBytes -= eventBytes(b.hist[i])
		}
		b.hist = b.hist[i:]
		b.histFloor = oldest
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

type watcher struct {
	ch  chan Event
	err error // set before ch is closed
}

func (w *watcher) Events() <-chan Event { return w.ch }
func (w *watcher) Err() error           { return w.err }

// Watch implements Store. The history kept is bounded (see Bolt); it starts
// at the revision the file was opened at.
func (b *Bolt) Watch(ctx context.Context, rev int64) (Watcher, error) {
	if rev < 0 {
		return nil, fmt.Errorf("store: watch %s from revision %d: negative revision", b.path, rev)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("store: watch %s: %w", b.path, ErrClosed)
	}
	if rev < b.histFloor {
		return nil, fmt.Errorf("store: watch %s from revision %d: the history kept starts after %d: %w", b.path, rev, b.histFloor, ErrCompacted)
	}
	w := &watcher{ch: make(chan Event, watchBuffer)}
	go b.runWatch(ctx, w, rev)
	return w, nil
}

func (b *Bolt) runWatch(ctx context.Context, w *watcher, cursor int64) {
	defer close(w.ch)
	closedErr := fmt.Errorf("store: watch %s: %w", b.path, ErrClosed)
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			w.err = closedErr
			return
		}
		if cursor < b.histFloor {
			floor := b.histFloor
			b.mu.Unlock()
			w.err = fmt.Errorf("store: watch %s: delivered up to revision %d, the history kept starts after %d: %w", b.path, cursor, floor, ErrWatcherTooSlow)
			return
		}
		i := sort.Search(len(b.hist), func(i int) bool { return b.hist[i].Revision > cursor })
		// Full commits only: publish appends a commit's events at once.
		// Trimming never writes into this backing array.
		pending := b.hist[i:len(b.hist):len(b.hist)]
		changed := b.changed
		b.mu.Unlock()
		for _, ev := range pending {
			select {
			case w.ch <- ev:
			case <-ctx.Done():
				return
			case <-b.done:
				w.err = closedErr
				return
			}
		}
		if n := len(pending); n > 0 {
			cursor = pending[n-1].Revision
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-b.done:
			w.err = closedErr
			return
		}
	}
}

// Campaign implements Elector: the owner of the file leads at once. A
// Campaign while leading replaces the earlier leadership (whose context
// ends).
func (b *Bolt) Campaign(ctx context.Context, id string) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: campaign as %q on %s: %w", id, b.path, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("store: campaign as %q on %s: %w", id, b.path, ErrClosed)
	}
	if b.lead != nil {
		b.lead.cancel()
	}
	lctx, cancel := context.WithCancel(ctx)
	l := &boltLead{id: id, ctx: lctx, cancel: cancel}
	b.lead = l
	context.AfterFunc(lctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.lead == l {
			b.lead = nil
		}
	})
	return lctx, nil
}

// Leader implements Elector.
func (b *Bolt) Leader(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("store: leader on %s: %w", b.path, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lead == nil || b.lead.ctx.Err() != nil {
		return "", nil
	}
	return b.lead.id, nil
}

// Resign implements Elector.
func (b *Bolt) Resign(ctx context.Context) error {
	b.mu.Lock()
	l := b.lead
	b.lead = nil
	b.mu.Unlock()
	if l != nil {
		l.cancel()
	}
	return nil
}

// Close implements Store: it ends watchers and leadership and closes the
// file. Closing twice is not an error.
func (b *Bolt) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.done)
	l := b.lead
	b.lead = nil
	b.mu.Unlock()
	if l != nil {
		l.cancel()
	}
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", b.path, err)
	}
	return nil
}
