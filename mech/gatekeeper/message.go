package gatekeeper

import "github.com/bulkhead-dc/bulkhead/mech"

// NotificationKind is the Kind of a Notification body.
const NotificationKind = "gatekeeper.congestion"

// Notification is a congestion notification (§2): the receiver host of Dst
// saw Dst's ingress queue drop DropRate bits/s on average over its window,
// most recently from VM, and asks VM's host to halve VM's egress limit
// LIM_j.
type Notification struct {
	Kind     string  `json:"kind"`
	VM       string  `json:"vm"`
	Dst      string  `json:"dst"`
	DropRate float64 `json:"drop_rate"`
}

// Decode returns the Notification in a message body: a Notification or
// *Notification (as the simulator delivers them) or its JSON encoding
// (json.RawMessage, []byte or string, as a host daemon receives it), whose
// "kind" must be NotificationKind.
func Decode(body any) (Notification, bool) {
	n, ok := mech.DecodeBody[Notification](body, NotificationKind)
	return n, ok && (n.Kind == NotificationKind || n.Kind == "")
}
