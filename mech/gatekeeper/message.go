package gatekeeper

import "github.com/bulkhead-dc/bulkhead/mech"

// NotificationKind is the kind of a Notification body. Version 2 names
// every notified sender on the recipient host with its floor, the number
// of senders the receiver saw and the slope each may climb back at (v1
// named one sender, with no floor).
const NotificationKind = "gatekeeper.congestion.v2"

// Notification is a congestion notification (§2): the receiver host of Dst
// saw Dst's ingress queue drop DropRate bits/s on average over its window,
// while Senders VMs were sending to Dst. It asks the recipient host to
// halve the egress limit LIM_j of each VM in VMs, never below that VM's
// Floor, and to raise it again at no more than Slope.
type Notification struct {
	Dst      string  `json:"dst"`
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

// Decode returns the Notification in a message body (mech.DecodeBody).
func Decode(body any) (Notification, bool) {
	return mech.DecodeBody[Notification](body)
}
