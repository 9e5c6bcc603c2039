package gatekeeper

import "github.com/bulkhead-dc/bulkhead/mech"

// NotificationKind is the kind of a Notification body. Version 3 numbers
// the congestion episode a notification belongs to, so that a repeated
// notification (soft state: the receiver resends it every period while
// the congestion lasts) is told from a new one. Version 2 named every
// notified sender on the recipient host with its floor, the number of
// senders the receiver saw and the slope each may climb back at (v1 named
// one sender, with no floor).
const NotificationKind = "gatekeeper.congestion.v3"

// Notification is a congestion notification (§2): the receiver host of Dst
// saw Dst's ingress queue drop DropRate bits/s on average over its window,
// while Senders VMs were sending to Dst. It asks the recipient host to
// halve the egress limit LIM_j of each VM in VMs, never below that VM's
// Floor, and to raise it again at no more than Slope — once per Episode:
// a notification of an episode the sender already applied for Dst is a
// repeat, which only holds LIM_j (no increase) for the period.
type Notification struct {
	Dst string `json:"dst"`
	// Episode numbers the receiver's congestion decisions about Dst
	// (from 1); repeats carry the episode they repeat.
	Episode  uint64  `json:"episode"`
	DropRate float64 `json:"drop_rate"`
	// Senders is the number of VMs the receiver saw sending to Dst.
	Senders int `json:"senders"`
	// Slope is how fast each notified sender may raise its limit again
	// (bits/s per second): the receiver's slope ÷ Senders, so that Dst's
	// senders together ramp at the receiver's slope.
	Slope float64  `json:"slope"`
	VMs   []Target `json:"vms"`
}

// Target is one notified sender: the VM and its floor, the rate Dst's
// ingress scheduler guarantees the pair (bits/s).
type Target struct {
	VM    string  `json:"vm"`
	Floor float64 `json:"floor"`
}

// MessageKind implements mech.Body.
func (Notification) MessageKind() string { return NotificationKind }

// MarshalJSON encodes the body with its kind (mech.MarshalBody).
func (n Notification) MarshalJSON() ([]byte, error) {
	type fields Notification
	return mech.MarshalBody(NotificationKind, fields(n))
}

// HeartbeatKind is the kind of a Heartbeat body.
const HeartbeatKind = "gatekeeper.heartbeat.v1"

// Heartbeat says that the sending host's agent runs: a receiver sends one
// every HeartbeatEvery periods to each host that sent to its VMs since
// the previous one (not to those it has just sent a notification). A
// sender that hears nothing from a host it sends to for PeerTimeout holds
// its VMs that send there at their guarantees. It carries nothing else,
// so decoding it takes constant work.
type Heartbeat struct{}

// MessageKind implements mech.Body.
func (Heartbeat) MessageKind() string { return HeartbeatKind }

// MarshalJSON encodes the body with its kind (mech.MarshalBody).
func (h Heartbeat) MarshalJSON() ([]byte, error) {
	type fields Heartbeat
	return mech.MarshalBody(HeartbeatKind, fields(h))
}

// DecodeHeartbeat returns the Heartbeat in a message body.
func DecodeHeartbeat(body any) (Heartbeat, bool) {
	return mech.DecodeBody[Heartbeat](body)
}

// Decode returns the Notification in a message body (mech.DecodeBody).
func Decode(body any) (Notification, bool) {
	return mech.DecodeBody[Notification](body)
}
