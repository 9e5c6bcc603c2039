package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/bulkhead-dc/bulkhead/wireauth"
)

// WireVersion is the version of the agents' message format. A datagram
// of another version is dropped (counted as "version"). Version 2 added
// the authentication tag (version 1 had none), version 3 the send time
// (Envelope.Sent).
const WireVersion = 3

// MaxDatagram is the largest message an agent sends or accepts, bytes,
// its tag included (below the 65,507 bytes of one IPv4 UDP datagram).
const MaxDatagram = 60000

// Envelope is one agent-to-agent message on the wire: a JSON object
// followed by its authentication tag (wireauth.Seal: HMAC-SHA256 over the
// exact bytes of the object, under the key the sender and recipient
// share, wireauth.PairKey) in one UDP datagram. The tag covers every
// field, so none can be changed without the key. Body is a mechanism's
// message body (mech.Message.Body encoded to JSON): an object with a
// "kind" naming its type, such as "MECHANISM.guarantees.v1"
// (mech.Body.MessageKind); the agent hands it to the mechanism as a
// json.RawMessage, which the mechanisms decode and check themselves.
//
// Epoch is the sender's start time (Unix nanoseconds) and Seq its message
// counter since then: a receiver drops a message that is not newer than the
// last one it accepted from the same sender (a duplicate, a replay, or
// reordered behind a newer one), and a larger epoch (the sender restarted)
// resets the sequence. Sent (version 3) is when the sender sealed the
// message (Unix nanoseconds, its clock): a message that would start a
// sequence at the receiver — the first it takes from that sender since it
// started or forgot the sender (its host left the model), or the first of
// a newer epoch — is dropped if sent more than MaxMessageAge before the
// receiver's clock (or more than MaxClockSkew after), since nothing
// received orders it: a datagram captured earlier and replayed to a
// restarted receiver is older. The receiver checks them only once the tag
// verifies, so no one without the key can move a sender's sequence, and
// bounds them against its clock (MaxClockSkew, MaxSendRate), so that not
// even a key holder can move it beyond what the sender can reach.
type Envelope struct {
	V     int             `json:"v"`
	From  string          `json:"from"`
	To    string          `json:"to"`
	Epoch int64           `json:"epoch"`
	Seq   uint64          `json:"seq"`
	Sent  int64           `json:"sent"`
	Body  json.RawMessage `json:"body"`
}

// Reasons a received datagram is dropped (the "reason" label of the
// agent's dropped-message counter).
const (
	DropMalformed = "malformed" // not a JSON envelope (or unknown fields, trailing data)
	DropSize      = "size"      // larger than MaxDatagram
	DropVersion   = "version"   // another format version
	DropSender    = "sender"    // from an address that is no peer agent's (checked first), an unknown sender, or not from its address
	DropAuth      = "auth"      // no tag, no key for its sender, or a tag that does not verify (another key, changed)
	DropRecipient = "recipient" // addressed to another host
	DropBody      = "body"      // body not an object with a valid kind
	DropStale     = "stale"     // not newer than the last accepted from its sender (a replay, a duplicate), or starting a sequence and sent more than MaxMessageAge ago
	DropFuture    = "future"    // an epoch, sequence or send time its sender's clock cannot have reached yet
	DropOverflow  = "overflow"  // inbox full
	// DropForeign counts reports inside accepted messages that the
	// mechanism dropped: about a VM pair, from a host that cannot know
	// it (mech.Rejecter).
	DropForeign = "foreign"
)

// dropReasons are every drop reason, for the metrics.
var dropReasons = []string{DropMalformed, DropSize, DropVersion, DropSender, DropAuth, DropRecipient, DropBody, DropStale, DropFuture, DropOverflow, DropForeign}

// kindRE is what a body's kind may look like.
var kindRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// WireError is why a datagram was rejected.
type WireError struct {
	Reason string
	Err    error
}

func (e *WireError) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *WireError) Unwrap() error { return e.Err }

func wireErr(reason, format string, args ...any) error {
	return &WireError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// EncodeMessage builds the datagram of one message, sent now, sealed with
// key, the key from and to share (wireauth.PairKey).
func EncodeMessage(key []byte, from, to string, epoch int64, seq uint64, body any) ([]byte, error) {
	return encodeMessage(key, from, to, epoch, seq, time.Now().UnixNano(), body)
}

// encodeMessage is EncodeMessage for a message sent at sent (Unix
// nanoseconds).
func encodeMessage(key []byte, from, to string, epoch int64, seq uint64, sent int64, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode message body for %s: %w", to, err)
	}
	if err := checkBody(b); err != nil {
		return nil, fmt.Errorf("encode message for %s: %w", to, err)
	}
	out, err := json.Marshal(Envelope{V: WireVersion, From: from, To: to, Epoch: epoch, Seq: seq, Sent: sent, Body: b})
	if err != nil {
		return nil, fmt.Errorf("encode message for %s: %w", to, err)
	}
	if len(out)+wireauth.TagSize > MaxDatagram {
		return nil, fmt.Errorf("encode message for %s: %d bytes with its tag, more than %d", to, len(out)+wireauth.TagSize, MaxDatagram)
	}
	if out, err = wireauth.Seal(key, out); err != nil {
		return nil, fmt.Errorf("encode message for %s: %w", to, err)
	}
	return out, nil
}

// header is what Sender reads of an envelope before it is authenticated.
type header struct {
	V    *int    `json:"v"`
	From *string `json:"from"`
}

// Sender returns the sender a datagram claims, not yet authenticated (the
// caller finds the key it shares with that sender and calls
// DecodeMessage), after checking its size and version. A JSON envelope of
// this version without a tag is "auth" (unsigned). Errors are *WireError
// values.
func Sender(b []byte) (string, error) {
	if len(b) > MaxDatagram {
		return "", wireErr(DropSize, "%d bytes, more than %d", len(b), MaxDatagram)
	}
	var h header
	if len(b) <= wireauth.TagSize || json.Unmarshal(b[:len(b)-wireauth.TagSize], &h) != nil {
		// Not an envelope followed by a tag: an unsigned envelope (of
		// this version or an older one), or not an envelope at all.
		var whole header
		if err := json.Unmarshal(b, &whole); err != nil || whole.V == nil {
			return "", wireErr(DropMalformed, "not a JSON envelope followed by a tag")
		}
		if *whole.V != WireVersion {
			return "", wireErr(DropVersion, "version %d, want %d", *whole.V, WireVersion)
		}
		return "", wireErr(DropAuth, "no authentication tag")
	}
	if h.V == nil {
		return "", wireErr(DropMalformed, "no version field")
	}
	if *h.V != WireVersion {
		return "", wireErr(DropVersion, "version %d, want %d", *h.V, WireVersion)
	}
	if h.From == nil || *h.From == "" || len(*h.From) > 200 {
		return "", wireErr(DropSender, "no valid sender")
	}
	return *h.From, nil
}

// DecodeMessage authenticates a datagram with key, the key this host
// (self) shares with the sender it claims (Sender), then parses and checks
// it: the format, version, recipient and body. The sender's address and
// the message's sequence are checked by the caller (it knows its peers).
// Nothing but the tag is looked at before the tag verifies. Errors are
// *WireError values.
func DecodeMessage(b []byte, self string, key []byte) (Envelope, error) {
	var e Envelope
	if len(b) > MaxDatagram {
		return e, wireErr(DropSize, "%d bytes, more than %d", len(b), MaxDatagram)
	}
	payload, err := wireauth.Open(key, b)
	if err != nil {
		return e, &WireError{Reason: DropAuth, Err: err}
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, wireErr(DropMalformed, "%v", err)
	}
	if dec.More() {
		return e, wireErr(DropMalformed, "trailing data after the message")
	}
	if e.V != WireVersion {
		return e, wireErr(DropVersion, "version %d, want %d", e.V, WireVersion)
	}
	if e.From == "" || len(e.From) > 200 {
		return e, wireErr(DropSender, "sender %q", e.From)
	}
	if e.To != self {
		return e, wireErr(DropRecipient, "addressed to %q, this is %q", e.To, self)
	}
	if err := checkBody(e.Body); err != nil {
		return e, err
	}
	return e, nil
}

// checkBody checks that a body is a JSON object with a valid "kind".
func checkBody(b json.RawMessage) error {
	if len(b) == 0 {
		return wireErr(DropBody, "no body")
	}
	var k struct {
		Kind *string `json:"kind"`
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return wireErr(DropBody, "body is not a JSON object: %v", err)
	}
	if err := json.Unmarshal(b, &k); err != nil || k.Kind == nil {
		return wireErr(DropBody, "body has no string kind")
	}
	if !kindRE.MatchString(*k.Kind) {
		return wireErr(DropBody, "body kind %q", *k.Kind)
	}
	return nil
}

// MaxClockSkew is how far a sender's clock may run ahead of the
// receiver's: a message whose epoch (the sender's start) is later than
// the receiver's clock plus MaxClockSkew is from the future and dropped,
// not adopted, so that no message can move a sender's epoch beyond what
// its restarts can reach.
const MaxClockSkew = 10 * time.Second

// MaxSendRate bounds the messages an agent sends per second: a sequence
// number larger than MaxSendRate × the time since its epoch (plus
// MaxClockSkew) cannot have been reached and is dropped as from the
// future. Agents send a few hundred messages per second per peer.
const MaxSendRate = 1e6

// MaxMessageAge is how long before the receiver's clock a message may
// have been sent (Envelope.Sent, the sender's clock) and still start a
// sequence at the receiver: MaxClockSkew for a sender's clock behind the
// receiver's, and 5 s in flight and queued.
const MaxMessageAge = MaxClockSkew + 5*time.Second

// sequence tracks the newest message accepted from one sender.
type sequence struct {
	epoch int64
	seq   uint64
	any   bool
}

// check says why (epoch, seq), sent at sent and received at now (Unix
// nanoseconds), is not accepted: "" if it is newer than what was
// accepted and within what the sender's clock can have reached (it is
// then recorded), DropFuture if beyond, DropStale if not newer. One that
// starts a sequence (the first accepted, or of a newer epoch) must also
// have been sent within MaxMessageAge before now (else DropStale) and
// MaxClockSkew after it (else DropFuture).
func (s *sequence) check(epoch int64, seq uint64, sent, now int64) string {
	skew := MaxClockSkew.Nanoseconds()
	if epoch > now+skew {
		return DropFuture
	}
	if elapsed := float64(now+skew-epoch) / 1e9; float64(seq) > MaxSendRate*elapsed {
		return DropFuture
	}
	switch {
	case !s.any || epoch > s.epoch:
		// Nothing received orders it: only its send time tells a
		// message sent now from one captured before and replayed.
		switch {
		case sent < now-MaxMessageAge.Nanoseconds():
			return DropStale
		case sent > now+skew:
			return DropFuture
		}
	case epoch == s.epoch && seq > s.seq:
	default:
		return DropStale
	}
	s.epoch, s.seq, s.any = epoch, seq, true
	return ""
}

// reason returns the drop reason of an error from DecodeMessage.
func reason(err error) string {
	var we *WireError
	if errors.As(err, &we) {
		return we.Reason
	}
	return DropMalformed
}
