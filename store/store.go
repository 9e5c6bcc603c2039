// Package store keeps the controller's durable state: the objects an
// operator declared, as opaque JSON documents keyed by kind and name.
//
// One store-wide revision counter orders commits. A commit is a set of puts
// and deletes applied atomically if no other commit happened since the
// revision the caller read (optimistic concurrency); watchers receive every
// event after a revision, in commit order. Revisions increase with every
// commit; Bolt counts commits (1, 2, 3, ...), Etcd uses etcd's revisions,
// which other writes to etcd also advance (so they have gaps).
//
// Two backends implement Store and Elector:
//
//   - Bolt (OpenBolt): one file on local disk (go.etcd.io/bbolt), the default.
//     One process owns the file, so it always leads at once.
//   - Etcd (OpenEtcd): an etcd cluster (go.etcd.io/etcd/client/v3), for two or
//     three controllers; leader election with etcd's concurrency package.
//
// The store does not interpret Data; the api package encodes and validates
// objects. It refuses only malformed keys (empty, containing '/', reserved)
// and objects or commits over the size limits.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Key names one object: its kind (e.g. "Tenant") and its name.
type Key struct {
	Kind string
	Name string
}

// String returns "kind/name".
func (k Key) String() string { return k.Kind + "/" + k.Name }

// Object is one stored object.
type Object struct {
	Key
	// Data is the object as JSON (the api package's encoding). The store
	// does not interpret it. Objects returned by a store and events sent to
	// watchers may share Data with other callers: do not modify it.
	Data []byte
	// Revision is the store revision at which the object was last written.
	// It is ignored in the puts given to Commit.
	Revision int64
}

// EventType says what a commit did to an object.
type EventType int

const (
	// Put: the object was created or replaced.
	Put EventType = iota + 1
	// Delete: the object was deleted.
	Delete
)

// String returns "put" or "delete".
func (t EventType) String() string {
	switch t {
	case Put:
		return "put"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change a commit made.
type Event struct {
	Type EventType
	// Object is the object as written (for Put), or its Key with nil Data
	// and the deleting revision (for Delete).
	Object Object
	// Revision is the revision of the commit that made the change.
	Revision int64
}

// Sentinel errors. Stores wrap them with context (which key, which file or
// endpoints); test with errors.Is.
var (
	// ErrNotFound: no object has the key.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the store changed after the base revision the caller
	// read; re-read and retry.
	ErrConflict = errors.New("conflict: the store changed since it was read")
	// ErrNotLeader: this controller does not lead (for the controller to
	// refuse writes on a follower; the store itself does not return it).
	ErrNotLeader = errors.New("not the leader")
	// ErrCompacted: a watch asked for events older than the history the
	// store keeps; the caller re-lists and watches from the list's revision.
	ErrCompacted = errors.New("revision compacted: the store no longer has the events after it")
	// ErrWatcherTooSlow: a watcher fell so far behind that the store dropped
	// events it had not received; its channel is closed and Err reports
	// this. The caller re-lists.
	ErrWatcherTooSlow = errors.New("watcher fell too far behind")
	// ErrTooLarge: an object or a commit exceeds the limits below.
	ErrTooLarge = errors.New("too large")
	// ErrInvalidKey: an empty kind or name, a '/' in either, a kind
	// starting with '_' (reserved for the store's own keys), or one longer
	// than MaxKeyPartLen.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidCommit: a key both put and deleted, or put or deleted twice,
	// in one commit.
	ErrInvalidCommit = errors.New("invalid commit")
	// ErrSessionLost: the store's session with etcd was lost while
	// campaigning (no lease refresh for the session TTL, e.g. while etcd
	// elected a new raft leader); campaign again.
	ErrSessionLost = errors.New("session with the store lost")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrLocked: another process holds the bbolt file.
	ErrLocked = errors.New("locked by another process")
)

// Limits. Both backends enforce the same ones, before writing anything.
const (
	// MaxObjectBytes bounds one object's Data.
	MaxObjectBytes = 1 << 20
	// MaxCommitObjects bounds the puts plus deletes of one commit.
	MaxCommitObjects = 10000
	// MaxCommitBytes bounds the bytes of one commit: the Data, kinds and
	// names of its puts and the kinds and names of its deletes. It keeps
	// a commit one etcd request of under 10 MiB: etcd recommends no larger
	// requests, and etcd 3.4 cannot restart from a WAL entry over 10 MiB
	// ("wal: max entry size limit exceeded"). The etcd server must accept
	// requests this large (--max-request-bytes, default 1.5 MiB) and
	// transactions of MaxCommitObjects+1 operations (--max-txn-ops,
	// default 128).
	MaxCommitBytes = 8 << 20
	// MaxKeyPartLen bounds a kind's and a name's length in bytes.
	MaxKeyPartLen = 253
)

// Store is the controller's durable state. Every method takes a context
// (for etcd, the deadline of the round trip). Stores are safe for
// concurrent use.
type Store interface {
	// Get returns the object with key k, or an error wrapping ErrNotFound.
	Get(ctx context.Context, k Key) (Object, error)
	// List returns the objects of kind (every kind when kind is ""),
	// sorted by kind then name, and the store revision they were read at.
	List(ctx context.Context, kind string) ([]Object, int64, error)
	// Commit applies puts and deletes atomically if no commit happened
	// after revision base (optimistic concurrency; an error wrapping
	// ErrConflict otherwise) and returns the new revision. base is a
	// revision the store returned (by List, Commit or in an event; 0 for
	// a store never written). Deleting a missing key is not an error and
	// makes no event. An empty commit changes nothing and returns the
	// current revision (ErrConflict still applies).
	Commit(ctx context.Context, base int64, puts []Object, deletes []Key) (int64, error)
	// Watch sends every event after revision rev, in commit order, until
	// ctx ends (then closes the channel with Err nil) or the store closes.
	// rev is typically the revision a List returned (0 for an empty
	// store: every event). Watch returns an error wrapping
	// ErrCompacted when the events after rev are no longer kept. A watcher
	// that falls too far behind gets its channel closed with Err reporting
	// ErrWatcherTooSlow (the caller re-lists).
	Watch(ctx context.Context, rev int64) (Watcher, error)
	// Close releases the store. Watchers' channels close with Err
	// reporting ErrClosed; leadership contexts end.
	Close() error
}

// Watcher is a running watch.
type Watcher interface {
	// Events delivers the events in order; it is closed when the watch ends.
	Events() <-chan Event
	// Err says why the channel closed: nil when the watch's context ended,
	// otherwise an error (ErrWatcherTooSlow, ErrClosed, a backend error).
	// Call it after Events is closed.
	Err() error
}

// Elector says which controller leads.
type Elector interface {
	// Campaign blocks until this controller (id: its advertised operator
	// API URL) leads or ctx ends. The returned context ends when leadership
	// is lost: the session with the store is lost, Resign is called, the
	// store closes, or ctx ends (which also resigns).
	Campaign(ctx context.Context, id string) (context.Context, error)
	// Leader returns the current leader's id, "" when none leads.
	Leader(ctx context.Context) (string, error)
	// Resign gives up leadership (if held) so another controller can lead.
	Resign(ctx context.Context) error
}

// Checks that the backends implement the interfaces.
var (
	_ Store   = (*Bolt)(nil)
	_ Elector = (*Bolt)(nil)
	_ Store   = (*Etcd)(nil)
	_ Elector = (*Etcd)(nil)
)

func checkKeyPart(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty %s: %w", what, ErrInvalidKey)
	case len(s) > MaxKeyPartLen:
		return fmt.Errorf("%s %.20q... is %d bytes, more than %d: %w", what, s, len(s), MaxKeyPartLen, ErrInvalidKey)
	case strings.Contains(s, "/"):
		return fmt.Errorf("%s %q contains '/': %w", what, s, ErrInvalidKey)
	}
	return nil
}

func checkKind(kind string) error {
	if err := checkKeyPart("kind", kind); err != nil {
		return err
	}
	if strings.HasPrefix(kind, "_") {
		return fmt.Errorf("kind %q starts with '_' (reserved for the store): %w", kind, ErrInvalidKey)
	}
	return nil
}

func checkKey(k Key) error {
	if err := checkKind(k.Kind); err != nil {
		return err
	}
	return checkKeyPart("name", k.Name)
}

// checkCommit enforces the key rules, the limits and that each key appears
// at most once in a commit.
func checkCommit(puts []Object, deletes []Key) error {
	if n := len(puts) + len(deletes); n > MaxCommitObjects {
		return fmt.Errorf("commit of %d objects, more than %d: %w", n, MaxCommitObjects, ErrTooLarge)
	}
	seen := make(map[Key]struct{}, len(puts)+len(deletes))
	total := 0
	for _, o := range puts {
		if err := checkKey(o.Key); err != nil {
			return fmt.Errorf("put %s: %w", o.Key, err)
		}
		if len(o.Data) > MaxObjectBytes {
			return fmt.Errorf("put %s: object of %d bytes, more than %d: %w", o.Key, len(o.Data), MaxObjectBytes, ErrTooLarge)
		}
		total += len(o.Data) + len(o.Kind) + len(o.Name)
		if _, dup := seen[o.Key]; dup {
			return fmt.Errorf("%s put twice: %w", o.Key, ErrInvalidCommit)
		}
		seen[o.Key] = struct{}{}
	}
	for _, k := range deletes {
		total += len(k.Kind) + len(k.Name)
		if err := checkKey(k); err != nil {
			return fmt.Errorf("delete %s: %w", k, err)
		}
		if _, dup := seen[k]; dup {
			return fmt.Errorf("%s put or deleted twice: %w", k, ErrInvalidCommit)
		}
		seen[k] = struct{}{}
	}
	if total > MaxCommitBytes {
		return fmt.Errorf("commit of %d bytes (data and keys), more than %d: %w", total, MaxCommitBytes, ErrTooLarge)
	}
	return nil
}
