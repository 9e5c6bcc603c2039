package ra

import (
	"math"
	"sort"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// Source says where a source host learns that a pair met congestion.
//
// ElasticSwitch detects losses at the receiver (per-destination sequence
// numbers in the IP ID field, gaps counted at the destination hypervisor)
// and sends congestion feedback messages to the source (§6). A mech.HostObs
// carries losses (and ECN marks, see Signal) on both sides:
// Ingress[i].Losses is what the receiver detected; Egress[i].Losses is the
// same count made available at the source — the simulator copies it there,
// and a host daemon may do the same when it delivers feedback to the
// source's observation itself.
type Source int

// Congestion sources.
const (
	// FromEgress reacts to Egress[i].Losses and Marks (default). Use it in the
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

// Signal says which congestion signals count as a congestion event.
//
// On a network without ECN every congestion event is a loss. On an
// ECN-capable network (§6, §7.4: switches mark packets above a queue
// threshold; in the simulator, `network: {ecn: true}`) congested links mark
// TCP packets instead of dropping them, while unresponsive traffic that
// overflows a queue is still dropped, so marks and losses both occur.
type Signal int

// Congestion signals.
const (
	// SignalBoth (default) counts losses and ECN marks alike. On a network
	// without ECN no packet is ever marked and it behaves as SignalLoss;
	// on an ECN network it reacts to marks and to the drops that remain
	// (UDP overflowing a queue). It is the "auto" choice: the mechanism
	// works on either network without being told which it runs on.
	SignalBoth Signal = iota
	// SignalLoss counts losses only (§6's sequence-number gaps); on an ECN
	// network TCP pairs then never see congestion.
	SignalLoss
	// SignalECN counts marks only (§6: "detect congestion using ECN, as an
	// alternative"); drops, including those of UDP, are ignored.
	SignalECN
)

// String returns the parameter value of s.
func (s Signal) String() string {
	switch s {
	case SignalBoth:
		return "both"
	case SignalLoss:
		return "loss"
	case SignalECN:
		return "ecn"
	}
	return "unknown"
}

// ParseSignal parses "loss", "ecn" or "both".
func ParseSignal(s string) (Signal, bool) {
	for _, v := range []Signal{SignalLoss, SignalECN, SignalBoth} {
		if v.String() == s {
			return v, true
		}
	}
	return 0, false
}

// count returns the congestion events among lost and marked packets.
func (s Signal) count(lost, marked float64) float64 {
	switch s {
	case SignalLoss:
		return lost
	case SignalECN:
		return marked
	}
	return lost + marked
}

// FeedbackKind is the kind of a Feedback message body.
const FeedbackKind = "elasticswitch.congestion.v1"

// Feedback is the body of a congestion feedback message from a receiver
// host to a source host (§6): the packets of each pair found lost, and
// those found ECN-marked, in the receiver's last period.
type Feedback struct {
	Pairs []PairLoss `json:"pairs"`
}

// MessageKind implements mech.Body.
func (Feedback) MessageKind() string { return FeedbackKind }

// MarshalJSON encodes the body with its kind (mech.MarshalBody).
func (f Feedback) MarshalJSON() ([]byte, error) {
	type fields Feedback
	return mech.MarshalBody(FeedbackKind, fields(f))
}

// PairLoss is one pair's losses and marks in a Feedback.
type PairLoss struct {
	Src    string  `json:"src"`
	Dst    string  `json:"dst"`
	Lost   float64 `json:"lost"`
	Marked float64 `json:"marked,omitempty"`
}

// Detector turns observations and feedback messages into the congestion
// events a source reacts to, and (for FromReceiver and FromBoth) builds
// the feedback a receiver sends. One Detector serves one host. Per step:
// call Receive with the inbox, Report with the ingress observations,
// Congestion for each egress pair, then EndStep.
type Detector struct {
	src    Source
	sig    Signal
	fed    map[mech.PairID]fed
	byHost map[string]int
	msgs   []mech.Message
	// foreign counts pairs reported by a host not their destination's
	foreign int64
}

// fed is what receivers reported for one pair in this step.
type fed struct{ lost, marked float64 }

// NewDetector returns a detector for one host that takes congestion from
// src and counts the signals sig.
func NewDetector(src Source, sig Signal) *Detector {
	return &Detector{src: src, sig: sig, fed: map[mech.PairID]fed{}, byHost: map[string]int{}}
}

// Foreign returns how many pairs' congestion reports were dropped because
// they did not come from the host of the pair's destination.
func (d *Detector) Foreign() int64 { return d.foreign }

func (d *Detector) feed(p mech.PairID, lost, marked float64) {
	f := d.fed[p]
	f.lost += math.Max(lost, 0)
	f.marked += math.Max(marked, 0)
	d.fed[p] = f
}

// Receive consumes the Feedback messages of inbox and returns the other
// messages (inbox itself is not modified). A pair's congestion is taken
// only from its destination's host (hostOf, the host of a VM): another
// host cannot know it, so what it says is dropped and counted
// (Foreign).
func (d *Detector) Receive(inbox []mech.Message, hostOf func(vm string) string) []mech.Message {
	var rest []mech.Message
	for i, m := range inbox {
		fb, ok := mech.DecodeBody[Feedback](m.Body)
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
			if h := hostOf(pl.Dst); h != m.From {
				if h != "" { // not a VM that left the model
					d.foreign++
				}
				continue
			}
			if pl.Lost > 0 || pl.Marked > 0 {
				d.feed(mech.PairID{Src: pl.Src, Dst: pl.Dst}, pl.Lost, pl.Marked)
			}
		}
	}
	if rest == nil {
		return inbox
	}
	return rest
}

// Report returns the feedback messages for the sources of the ingress
// pairs with congestion events of the detector's signal (none for
// FromEgress), one message per source host, sorted by host; a message
// carries both counts of the pairs it names. Pairs whose source is on this host (hostOf(src) ==
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
		if !(d.sig.count(o.Losses, o.Marks) > 0) {
			continue
		}
		h := hostOf(o.Pair.Src)
		switch h {
		case "":
			continue
		case self:
			d.feed(o.Pair, o.Losses, o.Marks)
			continue
		}
		j, ok := d.byHost[h]
		if !ok {
			j = len(d.msgs)
			d.byHost[h] = j
			d.msgs = append(d.msgs, mech.Message{To: h, Body: Feedback{}})
		}
		fb := d.msgs[j].Body.(Feedback)
		fb.Pairs = append(fb.Pairs, PairLoss{Src: o.Pair.Src, Dst: o.Pair.Dst, Lost: o.Losses, Marked: o.Marks})
		d.msgs[j].Body = fb
	}
	if len(d.msgs) == 0 {
		return nil
	}
	out := append([]mech.Message(nil), d.msgs...)
	sort.Slice(out, func(i, j int) bool { return out[i].To < out[j].To })
	return out
}

// Congestion returns the congestion events (lost and/or marked packets,
// as the detector's Signal says) an egress pair reacts to in this step.
func (d *Detector) Congestion(o *mech.PairObs) float64 {
	switch d.src {
	case FromReceiver:
		f := d.fed[o.Pair]
		return d.sig.count(f.lost, f.marked)
	case FromBoth:
		f := d.fed[o.Pair]
		return d.sig.count(math.Max(o.Losses, f.lost), math.Max(o.Marks, f.marked))
	}
	return d.sig.count(o.Losses, o.Marks)
}

// EndStep forgets the feedback of this step.
func (d *Detector) EndStep() {
	if len(d.fed) > 0 {
		clear(d.fed)
	}
}
