// Package wireauth authenticates the datagrams host agents send each
// other. Every unordered pair of hosts shares a key derived from a master
// secret that only the controller (or, in the emulated datacenter, the
// process that builds the run) holds: PairKey(master, a, b) =
// HMAC-SHA256(master, label ‖ len(min) ‖ min ‖ len(max) ‖ max), the same
// for (a, b) and (b, a). A host is given the keys of its pairs only, so
// it can speak for itself and check what its peers say, but cannot speak
// for another host; a process in a tenant's VM has no key at all.
//
// Seal appends to a payload an HMAC-SHA256 tag over the exact bytes of the
// payload (after a domain-separation label); Open checks it in constant
// time (hmac.Equal) and returns the payload. The payload is whatever the
// caller sends (the agent's JSON envelope: version, sender, recipient,
// epoch, sequence and body): the tag covers every byte of it, so nothing
// in it can be changed, and nothing re-encoded, without the key. Replay
// protection is the caller's: its payload carries a sequence it checks
// after Open succeeds.
package wireauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	// KeySize is the size of a master secret made by NewMaster and of a
	// key made by PairKey, bytes.
	KeySize = sha256.Size
	// MinKeySize is the shortest key Seal and Open take, bytes.
	MinKeySize = 16
	// TagSize is the size of the tag Seal appends, bytes.
	TagSize = sha256.Size
)

// Domain-separation labels: a pair key and a message tag are HMACs of
// different kinds of input, so neither can stand for the other.
const (
	pairLabel = "bulkhead/pair/v1\x00"
	msgLabel  = "bulkhead/msg/v1\x00"
)

var (
	// ErrAuth: the datagram is shorter than a tag or its tag does not
	// verify under the key (unsigned, another key, or changed).
	ErrAuth = errors.New("wireauth: message authentication failed")
	// ErrKey: a key shorter than MinKeySize.
	ErrKey = fmt.Errorf("wireauth: key shorter than %d bytes", MinKeySize)
)

// NewMaster returns a random master secret of KeySize bytes.
func NewMaster() ([]byte, error) {
	m := make([]byte, KeySize)
	if _, err := rand.Read(m); err != nil {
		return nil, fmt.Errorf("wireauth: master secret: %w", err)
	}
	return m, nil
}

// PairKey returns the key hosts a and b share: an HMAC-SHA256 under the
// master secret of a label and the two names in order, each preceded by
// its length (so that no two pairs of names give the same input). It is
// symmetric: PairKey(m, a, b) == PairKey(m, b, a).
func PairKey(master []byte, a, b string) []byte {
	if b < a {
		a, b = b, a
	}
	mac := hmac.New(sha256.New, master)
	mac.Write([]byte(pairLabel))
	var n [8]byte
	for _, s := range []string{a, b} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		mac.Write(n[:])
		mac.Write([]byte(s))
	}
	return mac.Sum(nil)
}

// Keys returns the key resolver of host self (for agent.Config.Keys):
// the key it shares with each peer, derived from the master secret. It
// has no key for self. It is for a process that holds the master secret
// (the emulated datacenter's agents, tests); a host on a real network is
// given its pairs' keys instead (KeyMap).
func Keys(master []byte, self string) func(peer string) ([]byte, bool) {
	master = append([]byte(nil), master...)
	return func(peer string) ([]byte, bool) {
		if peer == self {
			return nil, false
		}
		return PairKey(master, self, peer), true
	}
}

// KeyMap returns the key resolver of a fixed map of peer → key (the
// keys a controller handed out). The map is copied.
func KeyMap(keys map[string][]byte) func(peer string) ([]byte, bool) {
	own := make(map[string][]byte, len(keys))
	for p, k := range keys {
		own[p] = append([]byte(nil), k...)
	}
	return func(peer string) ([]byte, bool) {
		k, ok := own[peer]
		return k, ok
	}
}

// tag returns the HMAC-SHA256 of payload under key, after the message
// label.
func tag(key, payload []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgLabel))
	mac.Write(payload)
	return mac.Sum(nil)
}

// Seal returns payload followed by its TagSize-byte tag under key (a new
// slice; payload is not changed).
func Seal(key, payload []byte) ([]byte, error) {
	if len(key) < MinKeySize {
		return nil, ErrKey
	}
	out := make([]byte, 0, len(payload)+TagSize)
	out = append(out, payload...)
	return append(out, tag(key, payload)...), nil
}

// Open checks the tag at the end of datagram under key and returns the
// payload before it (a subslice of datagram). Errors: ErrKey for a short
// key, ErrAuth when the tag does not verify.
func Open(key, datagram []byte) ([]byte, error) {
	if len(key) < MinKeySize {
		return nil, ErrKey
	}
	if len(datagram) < TagSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than a tag", ErrAuth, len(datagram))
	}
	payload, got := datagram[:len(datagram)-TagSize], datagram[len(datagram)-TagSize:]
	if !hmac.Equal(got, tag(key, payload)) {
		return nil, ErrAuth
	}
	return payload, nil
}
