package drx

import (
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// UpdateKind is the kind of an Update body.
const UpdateKind = "drx.update.v1"

// Update is the platform manager's message to a host agent: new prices
// (EB, HB) or cap steps (CC, PC) for VMEs with VMs on that host.
type Update struct {
	Changes []Change `json:"changes"`
}

// MessageKind implements mech.Body.
func (Update) MessageKind() string { return UpdateKind }

// MarshalJSON encodes the body with its kind (mech.MarshalBody).
func (u Update) MarshalJSON() ([]byte, error) {
	type fields Update
	return mech.MarshalBody(UpdateKind, fields(u))
}

// Change is one VME's adjustment: its price went from OldPrice to NewPrice
// (priced policies), or its VMs' caps drop by CapStep points (CC, PC).
type Change struct {
	Tenant   string  `json:"tenant"`
	OldPrice float64 `json:"old_price,omitempty"`
	NewPrice float64 `json:"new_price,omitempty"`
	CapStep  float64 `json:"cap_step,omitempty"`
}

// Decode returns the Update in a message body (mech.DecodeBody).
func Decode(body any) (Update, bool) {
	return mech.DecodeBody[Update](body)
}

// Event kinds a Recorder receives.
const (
	// EventPrice: a VME's price changed (Host "" for the platform
	// manager's cluster-wide price, else the host agent's local price).
	EventPrice = "price"
	// EventCap: a VM's effective cap changed (percent).
	EventCap = "cap"
	// EventDegradation: an SLA VME's measured degradation (fraction), each
	// interval it had demand (Host "" for the platform manager's view).
	EventDegradation = "degradation"
)

// Event is one recorded change.
type Event struct {
	T                time.Duration
	Kind             string
	Host, Tenant, VM string
	Value            float64
}

// Recorder collects events from a mechanism's agents and controller (safe
// for concurrent use; a nil *Recorder records nothing).
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *Recorder) add(e Event) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of the events recorded so far, in recording order.
func (r *Recorder) Events() []Event {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}
