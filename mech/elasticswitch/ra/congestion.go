package ra

import (
	"encoding/json"
	"math"
	"sort"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// Source says where a source host learns that a pair met congestion.
//
// ElasticSwitch detects losses at the receiver (per-destination sequence
// numbers in the IP ID field, gaps counted at the destination hypervisor)
// and sends congestion feedback messages to the source (§6). A mech.HostObs
// carries losses on both sides: Ingress[i].Losses is what the receiver
// detected; Egress[i].Losses is the same count made available at the
// source — the simulator copies it there, and a host daemon may do the
// same when it delivers feedback to the source's observation itself.
type Source int

// Congestion sources.
const (
	// FromEgress reacts to Egress[i].Losses (default). Use it in the
	// simulator and with a data plane that attributes losses to the
	// source's observations.
	FromEgress Source = iota
	// FromReceiver makes every receiver host send Feedback messages for
	// its ingress pairs with losses, and sources react to those only, one
	// period late at most (messages are delivered at the recipient's next
	// step). This is the paper's protocol (§6).
	FromReceiver
	// FromBoth reacts to the larger of the two counts, for a data plane
	// that sees some losses at the source and learns others from
	// receivers. (In the simulator, where both carry the same losses, the
	// late copy counts as a second congestion event.)
	FromBoth
)

// String returns the parameter value of s.
func (s Source) String() string {
	switch s {
	case FromEgress:
		return "egress"
	case FromReceiver:
		return "receiver"
	case FromBoth:
		return "both"
	}
	return "unknown"
}

// ParseSource parses "egress", "receiver" or "both".
func ParseSource(s string) (Source, bool) {
	for _, v := range []Source{FromEgress, FromReceiver, FromBoth} {
		if v.String() == s {
			return v, true
		}
	}
	return 0, false
}

// FeedbackKind is the Kind of a Feedback message body.
const FeedbackKind = "elasticswitch.congestion"

// Feedback is the body of a congestion feedback message from a receiver
// host to a source host (§6): the packets of each pair found lost in the
// receiver's last period.
type Feedback struct {
	Kind  string     `json:"kind"`
	Pairs []PairLoss `json:"pairs"`
}

// PairLoss is one pair's losses in a Feedback.
type PairLoss struct {
	Src  string  `json:"src"`
	Dst  string  `json:"dst"`
	Lost float64 `json:"lost"`
}

// Decode returns body as a T if it is one: a T or *T (as the simulator
// delivers Go values), or JSON (json.RawMessage, []byte or string, as a
// host daemon may deliver what it read from the wire) whose "kind" field
// is kind.
func Decode[T any](body any, kind string) (T, bool) {
	var zero T
	switch b := body.(type) {
	case T:
		return b, true
	case *T:
		if b == nil {
			return zero, false
		}
		return *b, true
	case json.RawMessage:
		return decodeJSON[T](b, kind)
	case []byte:
		return decodeJSON[T](b, kind)
	case string:
		return decodeJSON[T]([]byte(b), kind)
	}
	return zero, false
}

func decodeJSON[T any](data []byte, kind string) (T, bool) {
	var zero T
	var k struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &k) != nil || k.Kind != kind {
		return zero, false
	}
	var v T
	if json.Unmarshal(data, &v) != nil {
		return zero, false
	}
	return v, true
}

// Detector turns observations and feedback messages into the losses a
// source reacts to, and (for FromReceiver and FromBoth) builds the
// feedback a receiver sends. One Detector serves one host. Per step: call
// Receive with the inbox, Report with the ingress observations, Losses for
// each egress pair, then EndStep.
type Detector struct {
	src    Source
	fed    map[mech.PairID]float64
	byHost map[string]int
	msgs   []mech.Message
}

// NewDetector returns a detector for one host.
func NewDetector(src Source) *Detector {
	return &Detector{src: src, fed: map[mech.PairID]float64{}, byHost: map[string]int{}}
}

// Receive consumes the Feedback messages of inbox and returns the other
// messages (inbox itself is not modified).
func (d *Detector) Receive(inbox []mech.Message) []mech.Message {
	var rest []mech.Message
	for i, m := range inbox {
		fb, ok := Decode[Feedback](m.Body, FeedbackKind)
		if !ok {
			if rest != nil {
				rest = append(rest, m)
			}
			continue
		}
		if rest == nil {
			rest = append(make([]mech.Message, 0, len(inbox)), inbox[:i]...)
		}
		for _, pl := range fb.Pairs {
			if pl.Lost > 0 {
				d.fed[mech.PairID{Src: pl.Src, Dst: pl.Dst}] += pl.Lost
			}
		}
	}
	if rest == nil {
		return inbox
	}
	return rest
}

// Report returns the feedback messages for the sources of the ingress
// pairs that lost packets (none for FromEgress), one message per source
// host, sorted by host. Pairs whose source is on this host (hostOf(src) ==
// self) are fed back directly, for this step. Pairs whose source host is
// unknown are skipped.
func (d *Detector) Report(self string, ingress []mech.PairObs, hostOf func(vm string) string) []mech.Message {
	if d.src == FromEgress {
		return nil
	}
	d.msgs = d.msgs[:0]
	clear(d.byHost)
	for i := range ingress {
		o := &ingress[i]
		if !(o.Losses > 0) {
			continue
		}
		h := hostOf(o.Pair.Src)
		switch h {
		case "":
			continue
		case self:
			d.fed[o.Pair] += o.Losses
			continue
		}
		j, ok := d.byHost[h]
		if !ok {
			j = len(d.msgs)
			d.byHost[h] = j
			d.msgs = append(d.msgs, mech.Message{To: h, Body: Feedback{Kind: FeedbackKind}})
		}
		fb := d.msgs[j].Body.(Feedback)
		fb.Pairs = append(fb.Pairs, PairLoss{Src: o.Pair.Src, Dst: o.Pair.Dst, Lost: o.Losses})
		d.msgs[j].Body = fb
	}
	if len(d.msgs) == 0 {
		return nil
	}
	out := append([]mech.Message(nil), d.msgs...)
	sort.Slice(out, func(i, j int) bool { return out[i].To < out[j].To })
	return out
}

// Losses returns the losses an egress pair reacts to in this step.
func (d *Detector) Losses(o *mech.PairObs) float64 {
	switch d.src {
	case FromReceiver:
		return d.fed[o.Pair]
	case FromBoth:
		return math.Max(o.Losses, d.fed[o.Pair])
	}
	return o.Losses
}

// EndStep forgets the feedback of this step.
func (d *Detector) EndStep() { clear(d.fed) }
