package gatekeeper

import "github.com/bulkhead-dc/bulkhead/mech"

// NotificationKind is the kind of a Notification body.
const NotificationKind = "gatekeeper.congestion.v1"

// Notification is a congestion notification (§2): the receiver host of Dst
// saw Dst's ingress queue drop DropRate bits/s on average over its window,
// most recently from VM, and asks VM's host to halve VM's egress limit
// LIM_j.
type Notification struct {
	VM       string  `json:"vm"`
	Dst      string  `json:"dst"`
	DropRate float64 `json:"drop_rate"`
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
