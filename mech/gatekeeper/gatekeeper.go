// Package gatekeeper is Gatekeeper (Soares, Santos, Tolia, Guedes,
// "Gatekeeper: Distributed Rate Control for Virtualized Datacenters",
// HP Labs HPL-2010-151; Rodrigues et al., USENIX WIOV 2011): per-VM
// bandwidth guarantees on each server's access link, in both directions,
// work-conserving, with no switch support and no central state (§1–§2).
// Gatekeeper presumes the network core congestion-free (§1: "the access
// link ... is presumed to be the bottleneck"); it protects access links
// only, which is exactly where ElasticSwitch's evaluation (Popa et al.,
// SIGCOMM 2013, Table 1 and §7.1) says it fails.
//
// Every host runs one Agent with the three components of §2 (Fig. 1):
//
//   - the egress scheduler (Fig. 2): a weighted fair queue across the
//     host's VMs on the access link, each VM's weight its egress hose
//     guarantee, serving at most LIM_IN, the link rate less the headroom
//     (a mech.Scheduler with Dir mech.Egress, Rate Config.LimIn(); §3.2
//     sets one "total rate limit below the link capacity" for both
//     directions). A scheduler at the full link rate is not the
//     bottleneck wherever it sits ahead of the NIC's own queue (an IFB on
//     a Linux host): bursts then queue in the NIC, shared first-come
//     first-served, and the weights no longer decide (on real traffic a
//     600 / 200 Mbps pair of tenants on one sending link, the small one
//     with 8 times the connections, got 552 / 448 in some runs); in front of it a per-VM egress
//     rate limit LIM_j (a mech.VMEgress limit), initially the link rate,
//     i.e. no limit (§2: "Initially, the limit LIM_j is set equal to the
//     physical link bandwidth");
//   - the ingress scheduler (Fig. 3): per-VM queues served by weighted
//     fair queueing, weights the ingress guarantees, at a total rate
//     LIM_IN slightly below the link rate, so that the bottleneck moves
//     from the physical link to the scheduler and the host sees the true
//     demand (a mech.Scheduler with Dir mech.Ingress and Rate
//     LIM_IN = Link × (1 − Headroom); §3.1: 5% headroom);
//   - the congestion agent: every Period (10 ms) it samples each local
//     VM's ingress drop rate and averages it over the previous Window
//     (100 ms; §3.1). When a VM's average drop rate exceeds DropThreshold,
//     it sends a congestion notification (a Notification message) to the
//     hosts of the VM's senders, and resends it every period while the
//     VM's drops last (soft state, below). The senders' hosts halve their LIM_j,
//     then raise it linearly (Slope bits/s per second) back to the link
//     rate (§2). Feedback false disables notifications: "Gatekeeper
//     without feedback" of §3.3 (Figs. 6–7).
//
// TCP adapts to the drops of the ingress queues by itself; the feedback
// exists for unresponsive senders (UDP) that keep filling the physical
// link whatever is dropped after it (§2).
//
// # Choices the paper leaves open
//
//   - Link capacity. Each host's access link rate comes from the
//     environment (mech.Env.HostLinks, from the declared model's hosts);
//     the parameter "link" overrides it on every host, and is the rate
//     (default 1 Gbps) where the environment does not know the link. It
//     sets the egress scheduler's rate, LIM_IN, the ceiling of LIM_j and
//     the defaults of the threshold, the floor of LIM_j and the slope,
//     which are fractions of the link (2%, 0.1%, 50% per second).
//   - Drop threshold. §2–§3.1 choose it "to ensure that congestion
//     notification messages are not triggered by TCP", and size the
//     160-packet ingress queues so that TCP's drop rate stays at most half
//     the headroom, 20 Mb/s on their 941 Mb/s link. The default is 2% of
//     the link (20 Mbps at 1 Gbps). In the simulator TCP pushing into a
//     full ingress scheduler loses sim.Options.TCPLoss (1%) of its
//     packets, at most 1% × LIM_IN = 9.5 Mbps per VM at 1 Gbps, half the
//     threshold; an unresponsive sender triggers as soon as it exceeds its
//     VM's share of LIM_IN by 20 Mbps.
//   - Ingress queues of 160 packets (§3.1). The fluid simulator has no
//     queue lengths: the queue is represented by its drop rule in sim
//     (UDP beyond its class's share of the scheduler is dropped at the
//     VM's queue; TCP pushing into a full scheduler loses TCPLoss of its
//     packets there), which is the behaviour the 160 packets were sized
//     for. On real hosts it is the HTB/IFB class's queue limit.
//   - Pacing of notifications. With statistics averaged over 100 ms and a
//     notification halving the sender's limit, notifying every 10 ms while
//     the average is high would halve the limit ten times for one event.
//     The agent therefore restarts a VM's statistics after notifying and
//     decides again only on fresh ones, skipping the first period after
//     the notification (measured while it was in flight). It decides as
//     soon as the window's average is sure to exceed the threshold: when
//     the bits dropped since it restarted already exceed threshold ×
//     Window (a 1 Gbps blast into a 150 Mbps share: after one period,
//     instead of a full window later), or over the sliding window.
//   - What is halved. A limit above what the VM actually sends is not in
//     force, so a notification halves min(LIM_j, the VM's measured sending
//     rate in the last period), never below MinRate.
//   - Slope. §2 tunes it "to ensure that the distributed rate control
//     favors well-behaved TCP connections" without giving a number. The
//     default, 500 Mbps per second, brings a halved limit back to a
//     1 Gbps link within a second. A gentler slope keeps a UDP blaster
//     lower for longer, which shortens the TCP flows it competes with and
//     wastes more of the capacity it leaves (gatekeeper-hadoop-udp.yaml,
//     means over the 30 s run: 100 Mbps/s gives the shuffle flows a mean
//     FCT of 0.39 s and the UDP streams 7.5 Gbps in all, 500 Mbps/s 0.40 s
//     and 8.0 Gbps, 2 Gbps/s 0.41 s and 8.4 Gbps).
//
// # Where the feedback departs from the paper
//
// §2's feedback targets "the sender of the last packet that was dropped"
// and halves its limit, which then climbs back at a fixed slope. Issue 11
// found three ways in which that loses guarantees it is meant to keep;
// each change below keeps the paper's parameters.
//
//   - Floors. Halving does not know the guarantee: an unresponsive sender
//     whose guarantee is its receiver's whole share was halved below it
//     and climbed back, a sawtooth averaging under the guarantee (three
//     tenants of 500, 300 and 150 Mbps filling LIM_IN, the small one
//     sending UDP at 400: it got 137 Mbps, 91%;
//     scenarios/gatekeeper-full-link.yaml). The receiver knows what its
//     ingress scheduler guarantees each local VM's queue (its ingress
//     guarantee, scaled down if the host's guarantees exceed LIM_IN) and
//     which VMs send to it; it splits that guarantee among them by
//     max-min, each capped at its egress guarantee (the hose model's pair
//     guarantees as the receiver sees them), and sends each sender its
//     share as a floor. The sender halves LIM_j but keeps at least the
//     floor plus what the VM sent elsewhere in the last period, and a VM
//     sending no more than that keeps its limit. Senders at their floors
//     never overload the receiver's link: the floors of one host's VMs sum
//     to at most LIM_IN.
//   - Every sender, and a shared slope. With many senders into one VM,
//     one halving per notification, each limit climbing back at the full
//     slope, never holds the aggregate: 64 senders blasting 20 Mbps each
//     starved a co-located VM (0 of its 300 Mbps;
//     scenarios/gatekeeper-incast.yaml), as 10 or more blasting senders
//     starved X in ElasticSwitch's Fig. 6. The receiver notifies every
//     remote sender of the congested VM (one message per host) with the
//     slope each may climb back at, its own slope ÷ the number of senders
//     n; a notified sender raises its limit at that slope (or its own, if
//     lower) until it is back at the link rate, so that the senders
//     together ramp at the receiver's slope, whatever their links.
//   - Limits that are not used do not grow. The paper raises LIM_j over
//     time; a sender that paused came back at a limit that had grown
//     while it was quiet and blasted over its share until the next
//     notification (tenants switching on and off every 500 ms:
//     scenarios/gatekeeper-churn.yaml). LIM_j now grows only while the VM
//     sends at it (≥ 95% of it); below it, what the limit gained above the
//     last floor decays at the slope (spare capacity is not kept for a VM
//     that stopped using it; its guarantee is), and the limit is removed
//     once unused for (Link − floor) ÷ Slope, the time the paper's ramp
//     takes to bring it back to the link rate.
//
// # Soft state for feedback
//
// Issue 13. §2 sends one notification per decision, so
// a lost one was made up for only once the receiver had gathered
// fresh evidence again (up to a Window of drops), while the sender's
// limit kept climbing; at 30% control-message loss the protected
// tenant fell to 0.88 (gatekeeper-full-link) and 0.86
// (gatekeeper-churn) compliance. The receiver now keeps each local
// VM's congestion as soft state: a decision opens a congestion
// episode (numbered, Notification.Episode), and while the VM still
// drops more than DropThreshold in a period (the period's own rate,
// not the window's average) the receiver resends the episode's
// notification to every sender host, every Period, with the senders
// and floors of that period; the first period at or below the
// threshold ends the episode's repeats. Decisions are unchanged: a
// new episode needs fresh evidence, as before.
//
// What a repeat means for the rate-decrease law: §2 halves LIM_j "on
// each congestion message" and raises it linearly "until it reaches
// the maximum rate or another congestion notification is received".
// A repeat is not new congestion: the receiver has not yet seen the
// effect of its episode's halving (it skips a period, then needs a
// new window's evidence), so halving again on every repeat would
// halve up to ten times for one event. A sender therefore halves once
// per episode — on whichever of its copies arrives first, which is
// what makes a lost one harmless — and treats a repeat of an episode
// it applied as "the congestion lasts": the limit is held (no linear
// increase in that period), neither halved nor raised. It remembers,
// per local VM, the last episode applied for each congested VM (at
// most one entry per VM of the environment), and forgets them when
// the limit returns to the link rate. An episode number that differs
// from the one recorded counts as new, so a receiver that restarted
// (numbering from 1 again) is obeyed; a reordered older repeat costs
// at most one extra halving, never below the floor. Notifications
// without an episode number (0) halve every time, as in §2. The
// parameter "repeat" (default true) turns this off: repeat false is
// exactly the one-message-per-decision protocol. Repeats cost one
// message per sender host and congested VM per Period while the
// congestion lasts; the repeat interval is the paper's 10 ms
// statistics period, no new time constant.
//
// # Fail to guarantees
//
// Issue 13. LIM_j exceeds a VM's egress guarantee only while receivers'
// notifications can bring it down; two failures take that away.
//
//   - An agent that stops (mech.Failsafe, applied by the host agent on
//     its way out) leaves every local VM's LIM_j at its egress guarantee
//     (min_rate for a VM without one) and the schedulers as they are.
//     Guarantee-safe in the paper's model (§1–§2): the egress scheduler
//     still serves each VM at least its guarantee R_i (its weight), the
//     ingress scheduler each queue at least its ingress guarantee, and a
//     VM at its egress guarantee sends no more than admission counted for
//     it on its own link. One case it does not cover, as no per-VM limit
//     can: VMs whose egress guarantees together exceed one receiver's
//     ingress guarantee (an incast the hose model does not guarantee)
//     still rely on the receiver's floors, which a stopped sender no
//     longer applies.
//   - A receiver whose agent is stopped, killed, frozen or cut off sends
//     no notifications, and silence read as "no congestion": its senders'
//     limits climbed unchecked. Receivers now send a Heartbeat every
//     HeartbeatEvery (3) periods, 30 ms, to each host that sent to their
//     VMs since the previous one (not to a host they have just sent a
//     notification, which says as much): at most one message per pair of
//     hosts per 30 ms while nothing is congested. A sender that hears
//     nothing (neither heartbeat nor notification) from a host its VM
//     sends to for PeerTimeout (parameter "peer_timeout", default 300 ms,
//     10 heartbeat intervals; counted from when it started sending there,
//     or started again after a pause longer than the timeout) holds the
//     VM's LIM_j at its egress guarantee — no growth above it, min_rate
//     for a VM without one — until the host is heard again, and grows
//     from there at the slope. A host found silent stays so until heard,
//     whatever the pauses in between. Any 300 ms holds 10 heartbeats:
//     with 30% of control messages lost independently, all 10 are lost
//     with probability 0.3^10 = 6·10⁻⁶, a false hold starting about once
//     in 700 10-second runs per pair of hosts (0.7 × 0.3^10 per heartbeat,
//     333 heartbeats in 10 s); at 60% loss, about 0.8 times per pair of
//     hosts in 10 s. Every 5 periods (50 ms, 6 heartbeats a timeout) it
//     was 0.1 per pair in 10 s at 30% loss, and each false hold costs
//     more than its 30 ms: the limit climbs back from the guarantee at the
//     slope (gatekeeper-churn at 30% loss lost 3% of its work
//     conservation to one). Without feedback no heartbeat is sent and no
//     host is taken for silent; peer_timeout 0 turns both off too (the
//     paper's protocol, e.g. with repeat false to compare with §2).
//   - A notification is about one congested VM (Dst), and only its host
//     knows its drops: one from any other host is dropped and counted
//     (Agent.Foreign), and is no word from anyone. Heartbeats from hosts
//     outside the environment are ignored.
//
// # The "rate limit" baseline
//
// Mode "rate-limit" is the paper's static baseline of §3.3 (Figs. 6–7:
// "a simple static rate limiter for both the ingress and egress
// traffic"): every VM's egress and ingress are capped at its guarantees
// (mech.VMEgress, mech.VMIngress; a VM without a guarantee in a direction
// is not limited in it), with no schedulers and no feedback. Its ingress
// limits act after the link, so they cannot keep a blast off it (§1). It
// differs from the registered "static" mechanism, which reserves per VM
// pair for the declared traffic pattern.
//
// Notification bodies encode to JSON and are accepted either as Go values
// (as the simulator delivers them) or as raw JSON (json.RawMessage, []byte
// or string) with their "kind" field.
package gatekeeper

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Name of the mechanism.
const Name = "gatekeeper"

// Modes of operation.
const (
	// ModeGatekeeper is Gatekeeper (§2).
	ModeGatekeeper = "gatekeeper"
	// ModeRateLimit is the paper's static baseline (§3.3): per-VM egress
	// and ingress limits at the guarantees.
	ModeRateLimit = "rate-limit"
)

// Config is Gatekeeper's configuration. Rates are in bits/s.
type Config struct {
	// Mode is ModeGatekeeper or ModeRateLimit.
	Mode string
	// Link is the capacity of every host's access link (each direction).
	Link float64
	// Headroom is the fraction of the link the ingress scheduler leaves
	// unused: LIM_IN = Link × (1 − Headroom) (§3.1: 5%).
	Headroom float64
	// Period is the statistics period, the agent's step (§3.1: 10 ms).
	Period time.Duration
	// Window is the averaging window of the statistics, a multiple of
	// Period (§3.1: 100 ms).
	Window time.Duration
	// DropThreshold is the average ingress drop rate of a VM above which a
	// congestion notification is sent (bits/s).
	DropThreshold float64
	// Slope is the linear increase of a reduced LIM_j, in bits/s per
	// second (§2).
	Slope float64
	// MinRate is the floor of LIM_j.
	MinRate float64
	// Feedback enables congestion notifications (false: "Gatekeeper without
	// feedback", §3.3).
	Feedback bool
	// Repeat keeps congestion as soft state: the receiver resends a
	// congested VM's latest notification to each sender host every Period
	// while the VM still drops more than DropThreshold, and a sender applies
	// each congestion episode once (a repeat holds LIM_j for the period).
	// False: one message per decision, as in §2, which a lost message
	// silences until the receiver has gathered fresh evidence again.
	Repeat bool
	// PeerTimeout is how long a sender waits to hear from the host of a
	// VM it sends to (a congestion notification or a heartbeat, which
	// receivers send every HeartbeatEvery periods to each host sending to
	// them) before it holds the sending VM's LIM_j at its egress guarantee:
	// a receiver whose agent stopped, was killed or cut off sends no
	// notifications, and silence would otherwise read as "no congestion".
	// The limit grows again once the host is heard. Not in the paper,
	// which does not treat agent failures; default 30 periods (300 ms, 10
	// heartbeat intervals), at least 2 heartbeat intervals; 0 turns
	// heartbeats and holds off (the paper's protocol, which takes silence
	// for "no congestion"). Unused without Feedback.
	PeerTimeout time.Duration
}

// HeartbeatEvery is how often, in periods, a receiver tells each host that
// sent to its VMs that its agent runs (a Heartbeat message; 30 ms at the
// paper's 10 ms period).
const HeartbeatEvery = 3

// Defaults returns the paper's parameters (§3.1: 5% headroom, 10 ms
// statistics averaged over 100 ms) on a 1 Gbps link, a 20 Mbps drop
// threshold (2% of the link), LIM_j growing by 500 Mbps per second after
// a halving, never below 1 Mbps, feedback on, repeated every period while
// the congestion lasts, a silent receiver's senders held at their
// guarantees after 300 ms.
func Defaults() Config {
	return Config{
		Mode:          ModeGatekeeper,
		Link:          1e9,
		Headroom:      0.05,
		Period:        10 * time.Millisecond,
		Window:        100 * time.Millisecond,
		DropThreshold: 20e6,
		Slope:         500e6,
		MinRate:       1e6,
		Feedback:      true,
		Repeat:        true,
		PeerTimeout:   300 * time.Millisecond,
	}
}

// defaultThreshold is the default drop threshold as a fraction of the link.
const defaultThreshold = 0.02

// defaultMinRate is the default floor of LIM_j as a fraction of the link.
const defaultMinRate = 0.001

// defaultPeerTimeout is the default peer timeout in periods.
const defaultPeerTimeout = 30

// ParamNames lists the mechanism's parameters (see Parse).
func ParamNames() []string {
	return []string{"mode", "link", "headroom", "period", "window", "drop_threshold", "slope", "min_rate", "feedback", "repeat", "peer_timeout"}
}

// Parse reads scenario parameters (mechanism.params) over Defaults.
// Unknown parameters, wrong types and out-of-range values are reported as
// *spec.FieldError values ("mechanism.params.link: expected a rate such as
// "450Mbps", got "fast""), joined. The parameters are:
//
//	mode            "gatekeeper" (default) or "rate-limit" (§3.3's static baseline)
//	link            access link capacity of every host (rate, "1Gbps")
//	headroom        ingress headroom fraction, LIM_IN = link × (1 − headroom) (0.05)
//	period          statistics period and agent step (duration, "10ms")
//	window          averaging window, a multiple of period (duration, "100ms")
//	drop_threshold  average ingress drop rate that triggers a notification
//	                (rate; default 2% of link, "20Mbps" at 1 Gbps)
//	slope           linear increase of a halved LIM_j per second (rate, "500Mbps")
//	min_rate        floor of LIM_j (rate; default 0.1% of link)
//	feedback        send congestion notifications (true)
//	repeat          resend a congested VM's notification every period while
//	                its drops stay above drop_threshold; senders apply each
//	                congestion episode once (true; false: one message per
//	                decision, the paper's §2 protocol)
//	peer_timeout    silence of a destination host after which a VM sending
//	                to it is held at its egress guarantee (duration;
//	                default 30 periods, "300ms"; at least 2 heartbeat
//	                intervals, 6 periods; "0s": no heartbeats, silence
//	                taken for no congestion, as in §2; see
//	                Config.PeerTimeout)
func Parse(params map[string]any) (Config, error) {
	p := spec.Params(params)
	cfg := Defaults()
	if err := p.Check(ParamNames()...); err != nil {
		return cfg, err
	}
	r := p.Reader()
	r.String(&cfg.Mode, "mode")
	r.Rate(&cfg.Link, "link")
	r.Float(&cfg.Headroom, "headroom")
	r.Duration(&cfg.Period, "period")
	r.Duration(&cfg.Window, "window")
	cfg.DropThreshold = defaultThreshold * cfg.Link
	r.Rate(&cfg.DropThreshold, "drop_threshold")
	r.Rate(&cfg.Slope, "slope")
	cfg.MinRate = defaultMinRate * cfg.Link
	r.Rate(&cfg.MinRate, "min_rate")
	r.Bool(&cfg.Feedback, "feedback")
	r.Bool(&cfg.Repeat, "repeat")
	cfg.PeerTimeout = time.Duration(math.MaxInt64)
	if cfg.Period > 0 && cfg.Period <= cfg.PeerTimeout/defaultPeerTimeout {
		cfg.PeerTimeout = defaultPeerTimeout * cfg.Period
	}
	r.Duration(&cfg.PeerTimeout, "peer_timeout")
	if err := r.Err(); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// Validate checks the configuration; problems are *spec.FieldError values
// named after the parameters, joined.
func (c *Config) Validate() error {
	var pe spec.ParamErrors
	bad := pe.Bad
	if c.Mode != ModeGatekeeper && c.Mode != ModeRateLimit {
		bad("mode", "unknown mode %q (use %s or %s)", c.Mode, ModeGatekeeper, ModeRateLimit)
	}
	if !(c.Link > 0) || math.IsInf(c.Link, 0) {
		bad("link", "must be a positive finite rate, got %g", c.Link)
	}
	if !(c.Headroom >= 0 && c.Headroom < 1) {
		bad("headroom", "must be in [0, 1), got %g", c.Headroom)
	}
	switch {
	case c.Period <= 0:
		bad("period", "must be positive, got %v", c.Period)
	case c.Window < c.Period || c.Window%c.Period != 0:
		bad("window", "must be a positive multiple of period (%v), got %v", c.Period, c.Window)
	case c.PeerTimeout != 0 && c.PeerTimeout/(2*HeartbeatEvery) < c.Period:
		bad("peer_timeout", "must be 0 (off) or at least 2 heartbeat intervals (%v), got %v", 2*HeartbeatEvery*c.Period, c.PeerTimeout)
	}
	if !(c.DropThreshold > 0) || math.IsInf(c.DropThreshold, 0) {
		bad("drop_threshold", "must be a positive finite rate, got %g", c.DropThreshold)
	}
	if !(c.Slope > 0) || math.IsInf(c.Slope, 0) {
		bad("slope", "must be a positive finite rate per second, got %g", c.Slope)
	}
	if !(c.MinRate > 0) || !(c.MinRate < c.Link) {
		bad("min_rate", "must be positive and below link (%g), got %g", c.Link, c.MinRate)
	}
	return pe.Err()
}

// LimIn is the ingress scheduler's rate LIM_IN = Link × (1 − Headroom).
func (c *Config) LimIn() float64 { return c.Link * (1 - c.Headroom) }

// Mechanism is Gatekeeper with one configuration.
type Mechanism struct {
	cfg Config
	// fromLink lists what follows each host's link capacity from the
	// environment because the parameters did not set it: the link itself
	// and the defaults given as fractions of it.
	fromLink linkDefaults
}

// linkDefaults says which settings follow the host's link.
type linkDefaults struct{ link, threshold, minRate, slope bool }

// New parses params (see Parse) and returns the mechanism. Where params
// do not set "link", every host's agent takes its access link's capacity
// from the environment (mech.Env.HostLinks) when known, and with it the
// defaults that are fractions of the link (drop_threshold, min_rate,
// slope), unless those are set.
func New(params map[string]any) (*Mechanism, error) {
	cfg, err := Parse(params)
	if err != nil {
		return nil, err
	}
	_, link := params["link"]
	_, th := params["drop_threshold"]
	_, mr := params["min_rate"]
	_, sl := params["slope"]
	return &Mechanism{cfg: cfg, fromLink: linkDefaults{link: !link, threshold: !th, minRate: !mr, slope: !sl}}, nil
}

// NewWithConfig returns the mechanism with a configuration built in code.
func NewWithConfig(cfg Config) (*Mechanism, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Mechanism{cfg: cfg}, nil
}

// Name implements mech.Mechanism.
func (m *Mechanism) Name() string { return Name }

// Config returns the mechanism's configuration.
func (m *Mechanism) Config() Config { return m.cfg }

// NewAgent implements mech.Mechanism.
func (m *Mechanism) NewAgent(env mech.Env) (mech.Agent, error) {
	cfg := m.cfg
	if c := env.HostLinks[env.Host]; m.fromLink.link && c > 0 && !math.IsInf(c, 0) {
		scale := c / cfg.Link
		cfg.Link = c
		if m.fromLink.threshold {
			cfg.DropThreshold = defaultThreshold * c
		}
		if m.fromLink.minRate {
			cfg.MinRate = defaultMinRate * c
		}
		if m.fromLink.slope {
			cfg.Slope *= scale
		}
	}
	return NewAgent(cfg, env)
}

// vmState is what the agent keeps per local VM: the congestion agent's
// ingress statistics (receiver side) and LIM_j (sender side).
type vmState struct {
	vm mech.VM

	// Receiver side: the last Window/Period drop-rate samples (bits/s) and
	// their lengths (s), a ring.
	drops, secs []float64
	next, n     int
	skip        int    // samples still to discard after a notification
	lastSrc     string // the sender that lost most in the latest period with drops
	episode     uint64 // congestion decisions made about the VM (the latest's number)
	active      bool   // the latest episode lasts: repeat its notification
	noteRate    float64

	// applied is, per congested remote VM that notified this VM, the
	// episode last applied to LIM_j: a notification of that episode again
	// is a repeat.
	applied map[string]uint64

	// Sender side.
	lim     float64 // LIM_j; +Inf: at the link rate, no limiter
	slope   float64 // LIM_j's linear increase (bits/s per s); 0: Config.Slope
	idle    float64 // seconds the VM has sent below its reduced LIM_j
	keep    float64 // the floor LIM_j was last reduced to keep
	set     float64 // rate last given to the driver (NaN: none yet)
	outRate float64 // measured sending rate in the last period
}

// dropRate is the average drop rate over the samples held.
func (v *vmState) dropRate() float64 {
	bits, sec := v.dropped()
	if sec <= 0 {
		return 0
	}
	return bits / sec
}

// dropped returns the bits dropped over the samples held and their length
// in seconds.
func (v *vmState) dropped() (bits, sec float64) {
	for i := 0; i < v.n; i++ {
		bits += v.drops[i] * v.secs[i]
		sec += v.secs[i]
	}
	return bits, sec
}

// congested says whether v's average drop rate over a window exceeds the
// threshold (§3.1): over the full window held, or already over a part of
// it, when the bits dropped so far would exceed the threshold over the
// whole window whatever the rest of it brings.
func (v *vmState) congested(threshold, window float64) bool {
	bits, sec := v.dropped()
	return bits > threshold*math.Max(sec, window)
}

func (v *vmState) push(rate, sec float64) {
	v.drops[v.next], v.secs[v.next] = rate, sec
	v.next = (v.next + 1) % len(v.drops)
	if v.n < len(v.drops) {
		v.n++
	}
}

func (v *vmState) reset() {
	v.next, v.n = 0, 0
}

// Agent is Gatekeeper on one host. It is not safe for concurrent use.
type Agent struct {
	cfg       Config
	env       mech.Env
	vms       []*vmState // local VMs, sorted by name
	byName    map[string]*vmState
	installed bool
	updated   bool // the environment changed at runtime (UpdateEnv)
	sent      int  // notifications sent

	hosts map[string]bool // the hosts of the environment's VMs
	steps int             // steps taken with a period (heartbeat clock)
	// beat lists the remote hosts that sent to a local VM since the last
	// heartbeat: the next heartbeat goes to them.
	beat map[string]bool
	// peers is, per remote host a local VM sends to, when it was last
	// heard of (at most one entry per host of the environment).
	peers    map[string]*peer
	foreign  int64 // notifications dropped: not from the host of their Dst
	beats    int   // heartbeats sent
	silences int   // times a host was found silent
}

// peer is a remote host that local VMs send to, as the sender side sees
// it.
type peer struct {
	heard time.Duration // last accepted message from the host
	since time.Duration // when local VMs started sending to it after a pause
	sent  time.Duration // last period a local VM sent to it
	// silent: not heard of for longer than PeerTimeout while local VMs
	// sent to it; only a message from the host clears it.
	silent bool
}

// rateLimit is the rate-limit baseline's limit for a guarantee: the
// guarantee, or none for a VM without one.
func rateLimit(g float64) float64 {
	if g > 0 {
		return g
	}
	return math.Inf(1)
}

// NewAgent returns the agent for env.Host under cfg (validated).
func NewAgent(cfg Config, env mech.Env) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if env.Host == "" {
		return nil, fmt.Errorf("%s: environment names no host", Name)
	}
	a := &Agent{cfg: cfg, env: env, byName: map[string]*vmState{}, beat: map[string]bool{}, peers: map[string]*peer{}}
	a.hosts = hostsOf(env)
	w := int(cfg.Window / cfg.Period)
	for _, v := range env.VMs {
		if v.Host != env.Host {
			continue
		}
		s := &vmState{vm: v, drops: make([]float64, w), secs: make([]float64, w), lim: math.Inf(1), set: math.NaN()}
		a.vms = append(a.vms, s)
		a.byName[v.Name] = s
	}
	sort.Slice(a.vms, func(i, j int) bool { return a.vms[i].vm.Name < a.vms[j].vm.Name })
	return a, nil
}

// hostsOf returns the hosts of env's VMs.
func hostsOf(env mech.Env) map[string]bool {
	hosts := map[string]bool{}
	for _, v := range env.VMs {
		hosts[v.Host] = true
	}
	return hosts
}

// Period implements mech.Agent: the statistics period.
func (a *Agent) Period() time.Duration { return a.cfg.Period }

// Limit returns LIM_j of a local VM (+Inf: at the link rate, no limiter)
// and whether the VM is on this host.
func (a *Agent) Limit(vm string) (float64, bool) {
	if v, ok := a.byName[vm]; ok {
		return v.lim, true
	}
	return 0, false
}

// DropRate returns a local VM's ingress drop rate averaged over the
// statistics held (at most Window) and whether the VM is on this host.
func (a *Agent) DropRate(vm string) (float64, bool) {
	if v, ok := a.byName[vm]; ok {
		return v.dropRate(), true
	}
	return 0, false
}

// Sent returns how many congestion notifications the agent has sent.
func (a *Agent) Sent() int { return a.sent }

// Schedulers returns the host's egress and ingress schedulers (§2, Figs.
// 2–3): weights are the local VMs' egress and ingress guarantees (VMs
// without one are left out and get the driver's negligible best-effort
// weight), both at LIM_IN.
func (a *Agent) Schedulers() []mech.Scheduler {
	eg := mech.Scheduler{Dir: mech.Egress, Rate: a.cfg.LimIn(), Weights: map[string]float64{}}
	in := mech.Scheduler{Dir: mech.Ingress, Rate: a.cfg.LimIn(), Weights: map[string]float64{}}
	for _, v := range a.vms {
		if v.vm.Out > 0 {
			eg.Weights[v.vm.Name] = v.vm.Out
		}
		if v.vm.In > 0 {
			in.Weights[v.vm.Name] = v.vm.In
		}
	}
	return []mech.Scheduler{eg, in}
}

// Step implements mech.Agent: it installs the schedulers on the first
// step, applies the notifications received (halving LIM_j) and the linear
// increase, then updates the ingress statistics and sends notifications.
func (a *Agent) Step(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	var act mech.Actions
	if a.cfg.Mode == ModeRateLimit {
		if !a.installed {
			// Limits at the guarantees; after an update, a guarantee
			// that became 0 lifts its limit.
			a.installed = true
			for _, v := range a.vms {
				if v.vm.Out > 0 || a.updated {
					act.Limits = append(act.Limits, mech.Limit{Kind: mech.VMEgress, VM: v.vm.Name, Rate: rateLimit(v.vm.Out)})
				}
				if v.vm.In > 0 || a.updated {
					act.Limits = append(act.Limits, mech.Limit{Kind: mech.VMIngress, VM: v.vm.Name, Rate: rateLimit(v.vm.In)})
				}
			}
		}
		return act
	}
	if !a.installed {
		a.installed = true
		act.Schedulers = a.Schedulers()
	}
	sec := obs.Period.Seconds()
	for i := range obs.VMs {
		if v := a.byName[obs.VMs[i].VM]; v != nil {
			v.outRate = obs.VMs[i].OutRate
		}
	}

	// Sender side (§2): linear increase of reduced limits, except those
	// held by a repeated notification (the congestion they were reduced
	// for lasts), then halve once per new congestion episode.
	type target struct {
		n *Notification
		t Target
		v *vmState
	}
	var fresh []target
	held := map[*vmState]bool{}
	for _, m := range inbox {
		if _, ok := DecodeHeartbeat(m.Body); ok {
			a.hear(m.From, obs.Now)
			continue
		}
		n, ok := Decode(m.Body)
		if !ok {
			continue
		}
		// Only the host of the congested VM knows its drops: a
		// notification about it from any other host is dropped (and
		// counted), and hears from nobody.
		if a.env.HostOf(n.Dst) != m.From {
			a.foreign++
			continue
		}
		a.hear(m.From, obs.Now)
		// A notification names distinct VMs of this host: more targets
		// than local VMs is not one (the work per message stays bounded
		// whatever a datagram carries); so is one about an unknown VM.
		if len(n.VMs) > len(a.vms) {
			continue
		}
		for _, t := range n.VMs {
			v := a.byName[t.VM]
			if v == nil {
				continue // a stale notification: the VM is not (or no longer) here
			}
			if n.Episode != 0 && v.applied[n.Dst] == n.Episode {
				held[v] = true // a repeat: the congestion lasts
				continue
			}
			if n.Episode != 0 {
				// One entry per congested VM that notified v: at most
				// the environment's VMs, unless datagrams name others,
				// which then only restart the record.
				if v.applied == nil || len(v.applied) > len(a.env.VMs) {
					v.applied = map[string]uint64{}
				}
				v.applied[n.Dst] = n.Episode
			}
			fresh = append(fresh, target{&n, t, v})
		}
	}
	silent := a.track(obs)
	for _, v := range a.vms {
		a.grow(v, sec, held[v])
	}
	slopes := map[*vmState]float64{}
	for _, f := range fresh {
		n, v := f.n, f.v
		if !a.reduce(v, n.Dst, f.t.Floor, obs.Egress) {
			continue
		}
		s := a.cfg.Slope
		if n.Slope > 0 && n.Slope < s {
			s = n.Slope
		}
		if old, ok := slopes[v]; !ok || s < old {
			slopes[v] = s
		}
	}
	for v, s := range slopes {
		v.slope = s
	}
	for _, v := range a.vms {
		if silent[v] {
			a.hold(v)
		}
	}
	for _, v := range a.vms {
		if v.lim != v.set {
			v.set = v.lim
			act.Limits = append(act.Limits, mech.Limit{Kind: mech.VMEgress, VM: v.vm.Name, Rate: v.lim})
		}
	}

	// Receiver side (§2, §3.1): ingress drop statistics and notifications.
	if sec <= 0 {
		return act
	}
	notes := map[dest]*Notification{} // one per sender host and congested VM
	for i := range obs.Ingress {
		p := &obs.Ingress[i]
		if !(p.Rate > 0 || p.Losses > 0) || a.byName[p.Pair.Dst] == nil {
			continue
		}
		if h := a.env.HostOf(p.Pair.Src); h != "" && h != a.env.Host {
			a.beat[h] = true
		}
	}
	for i := range obs.VMs {
		o := &obs.VMs[i]
		v := a.byName[o.VM]
		if v == nil {
			continue
		}
		// Soft state: while the latest episode lasts (the VM still drops
		// more than the threshold in the period), its notification is sent
		// again, so that a lost one is made up for a period later.
		repeat := func() {
			if !v.active {
				return
			}
			if !a.cfg.Repeat || !a.cfg.Feedback || !(o.InDrops > a.cfg.DropThreshold) {
				v.active = false
				return
			}
			a.notify(notes, v, v.noteRate, obs.Ingress)
		}
		if v.skip > 0 {
			v.skip--
			repeat()
			continue
		}
		v.push(o.InDrops, sec)
		if o.InDrops > 0 && o.DropSrc != "" {
			v.lastSrc = o.DropSrc
		}
		if !a.cfg.Feedback || v.lastSrc == "" || !v.congested(a.cfg.DropThreshold, a.cfg.Window.Seconds()) {
			repeat()
			continue
		}
		v.episode++
		if !a.notify(notes, v, v.dropRate(), obs.Ingress) {
			v.episode--
			repeat()
			continue
		}
		v.active, v.noteRate = true, v.dropRate()
		v.reset()
		v.skip = 1
	}
	tos := make([]dest, 0, len(notes))
	for to := range notes {
		tos = append(tos, to)
	}
	sort.Slice(tos, func(i, j int) bool {
		if tos[i].host != tos[j].host {
			return tos[i].host < tos[j].host
		}
		return tos[i].dst < tos[j].dst
	})
	noted := map[string]bool{}
	for _, to := range tos {
		act.Messages = append(act.Messages, mech.Message{From: a.env.Host, To: to.host, Body: *notes[to]})
		a.sent++
		noted[to.host] = true
	}
	a.steps++
	if a.cfg.Feedback && a.cfg.PeerTimeout > 0 && a.steps%HeartbeatEvery == 0 {
		// A heartbeat to every host that sent to a local VM since the
		// last one, unless it has just been sent a notification (which
		// says as much).
		hosts := make([]string, 0, len(a.beat))
		for h := range a.beat {
			if !noted[h] {
				hosts = append(hosts, h)
			}
		}
		sort.Strings(hosts)
		for _, h := range hosts {
			act.Messages = append(act.Messages, mech.Message{From: a.env.Host, To: h, Body: Heartbeat{}})
			a.beats++
		}
		clear(a.beat)
	}
	return act
}

// hear records a message accepted from host h at now: it is not silent.
// Hosts outside the environment are not recorded.
func (a *Agent) hear(h string, now time.Duration) {
	if h == a.env.Host || !a.hosts[h] {
		return
	}
	p := a.peers[h]
	if p == nil {
		p = &peer{since: now, sent: -a.cfg.PeerTimeout - 1}
		a.peers[h] = p
	}
	p.heard, p.silent = now, false
}

// track records the remote hosts local VMs sent to in the last period and
// returns the VMs that sent to a silent one: a host not heard of for
// longer than PeerTimeout since local VMs started sending to it (again,
// after a pause of more than PeerTimeout; a host found silent stays so
// until it is heard). Without feedback no host is ever heard of, and
// none is taken for silent; nor with PeerTimeout 0.
func (a *Agent) track(obs *mech.HostObs) map[*vmState]bool {
	if !a.cfg.Feedback || a.cfg.PeerTimeout == 0 {
		return nil
	}
	now := obs.Now
	silent := map[*vmState]bool{}
	for i := range obs.Egress {
		o := &obs.Egress[i]
		v := a.byName[o.Pair.Src]
		if v == nil || !(o.Rate > 0) {
			continue
		}
		h := a.env.HostOf(o.Pair.Dst)
		if h == "" || h == a.env.Host {
			continue
		}
		p := a.peers[h]
		if p == nil {
			p = &peer{heard: now, since: now}
			a.peers[h] = p
		} else if !p.silent && now-p.sent > a.cfg.PeerTimeout {
			p.since = now
		}
		p.sent = now
		if !p.silent && now-max(p.heard, p.since) > a.cfg.PeerTimeout {
			p.silent = true
			a.silences++
		}
		if p.silent {
			silent[v] = true
		}
	}
	return silent
}

// hold keeps a VM that sends to a silent host at no more than its egress
// guarantee (MinRate without one): the silent receiver can no longer ask
// for less, and the VM's guarantee is what every receiver's admission
// counted on. A limit below that may still grow to it.
func (a *Agent) hold(v *vmState) {
	c := math.Max(v.vm.Out, a.cfg.MinRate)
	if math.IsInf(v.lim, 1) {
		// No reduced limit to come back from: the guarantee is the
		// floor an unused limit decays to.
		v.keep, v.slope = c, 0
	}
	v.lim = math.Min(v.lim, c)
}

// Silent returns the remote hosts that local VMs send to and that have
// been silent for longer than PeerTimeout (their senders held at their
// guarantees), sorted.
func (a *Agent) Silent() []string {
	var out []string
	for h, p := range a.peers {
		if p.silent {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

// Foreign returns how many notifications were dropped because they did not
// come from the host of the VM they are about.
func (a *Agent) Foreign() int64 { return a.foreign }

// Silences returns how many times a host that local VMs send to was found
// silent (each lasting until the host was heard again).
func (a *Agent) Silences() int { return a.silences }

// Heartbeats returns how many heartbeats the agent has sent.
func (a *Agent) Heartbeats() int { return a.beats }

// Failsafe implements mech.Failsafe: every local VM's egress limit LIM_j
// at its egress guarantee (MinRate for a VM without one), the schedulers
// left as they are. LIM_j exceeds the guarantee only while receivers'
// notifications can bring it down (§2); with no agent stepping, none
// can. The egress scheduler keeps serving every VM at least its
// guarantee (its weight), the ingress scheduler keeps every VM's queue at
// least its ingress guarantee, and a VM held at its egress guarantee
// sends no more than admission counted for it on its own link. In
// rate-limit mode, the baseline's own limits (at the guarantees).
func (a *Agent) Failsafe() mech.Actions {
	var act mech.Actions
	for _, v := range a.vms {
		if a.cfg.Mode == ModeRateLimit {
			act.Limits = append(act.Limits,
				mech.Limit{Kind: mech.VMEgress, VM: v.vm.Name, Rate: rateLimit(v.vm.Out)},
				mech.Limit{Kind: mech.VMIngress, VM: v.vm.Name, Rate: rateLimit(v.vm.In)})
			continue
		}
		act.Limits = append(act.Limits, mech.Limit{Kind: mech.VMEgress, VM: v.vm.Name, Rate: math.Max(v.vm.Out, a.cfg.MinRate)})
	}
	return act
}

// notify adds v's notification of its current episode (dropping rate
// bits/s) to notes, one per sender host, to every remote VM sending to v,
// with its floor. It says whether v has remote senders.
func (a *Agent) notify(notes map[dest]*Notification, v *vmState, rate float64, ingress []mech.PairObs) bool {
	senders, floors := a.floors(v, ingress)
	for k, src := range senders {
		to := dest{a.env.HostOf(src), v.vm.Name}
		n := notes[to]
		if n == nil {
			n = &Notification{Dst: v.vm.Name, Episode: v.episode, DropRate: rate, Senders: len(senders), Slope: a.cfg.Slope / float64(len(senders))}
			notes[to] = n
		}
		n.VMs = append(n.VMs, Target{VM: src, Floor: floors[k]})
	}
	return len(senders) > 0
}

// dest is where a notification goes: the senders' host, about one local
// VM.
type dest struct{ host, dst string }

// classGuarantee is the rate the ingress scheduler guarantees a local VM's
// queue when every queue is backlogged: its ingress guarantee, scaled down
// when the host's guarantees together exceed LIM_IN.
func (a *Agent) classGuarantee(v *vmState) float64 {
	sum := 0.0
	for _, u := range a.vms {
		sum += u.vm.In
	}
	g := v.vm.In
	if sum > a.cfg.LimIn() {
		g *= a.cfg.LimIn() / sum
	}
	return g
}

// floors returns the remote VMs that sent to v in the last period (or
// lost packets on the way; and v's latest drop source), sorted, with each
// one's floor: v's class guarantee split among them by max-min, each
// capped at its egress guarantee — the hose model's pair guarantees as
// v's host sees them. Senders on v's own host do not cross its access
// link and are left out.
func (a *Agent) floors(v *vmState, ingress []mech.PairObs) ([]string, []float64) {
	seen := map[string]bool{}
	var senders []string
	add := func(src string) {
		if seen[src] {
			return
		}
		seen[src] = true
		if h := a.env.HostOf(src); h != "" && h != a.env.Host {
			senders = append(senders, src)
		}
	}
	for i := range ingress {
		p := &ingress[i]
		if p.Pair.Dst == v.vm.Name && (p.Rate > 0 || p.Losses > 0) {
			add(p.Pair.Src)
		}
	}
	if v.lastSrc != "" {
		add(v.lastSrc)
	}
	sort.Strings(senders)
	caps := make([]float64, len(senders))
	order := make([]int, len(senders))
	for k, src := range senders {
		u, _ := a.env.VM(src)
		caps[k], order[k] = u.Out, k
	}
	sort.SliceStable(order, func(i, j int) bool { return caps[order[i]] < caps[order[j]] })
	floors := make([]float64, len(senders))
	left := a.classGuarantee(v)
	for i, k := range order {
		f := math.Min(caps[k], left/float64(len(order)-i))
		floors[k] = f
		left -= f
	}
	return senders, floors
}

// pushing is the fraction of LIM_j a VM must send at for its limit to be
// in force (the limiter holding it back).
const pushing = 0.95

// grow raises a reduced LIM_j linearly (§2) while the VM sends at it: the
// increase probes for spare capacity, which a VM sending below its limit
// does not use. While the VM sends below its limit, what the limit gained
// above the floor of the last notification (the rate the congested
// receiver guarantees it) decays at the same slope — spare capacity is
// not kept for a VM that stopped using it, its guarantee is — and the
// limit is removed once the VM has been below it for as long as the
// paper's ramp takes from that floor to the link rate ((Link − floor) ÷
// Slope). A sender that pauses and comes back resumes at its floor
// instead of blasting again at a limit that grew while it was quiet.
//
// A held limit (a repeated notification arrived: the congestion it was
// reduced for lasts) does not increase in the period.
func (a *Agent) grow(v *vmState, sec float64, held bool) {
	if math.IsInf(v.lim, 1) {
		return
	}
	if held && v.outRate >= pushing*v.lim {
		v.idle = 0
	} else if v.outRate >= pushing*v.lim {
		slope := a.cfg.Slope
		if v.slope > 0 {
			slope = v.slope
		}
		v.lim += slope * sec
		v.idle = 0
	} else {
		v.idle += sec
		if v.idle >= (a.cfg.Link-v.keep)/a.cfg.Slope {
			v.lim = a.cfg.Link
		} else if v.lim > v.keep {
			v.lim = math.Max(v.keep, v.lim-a.cfg.Slope*sec)
		}
	}
	if v.lim >= a.cfg.Link {
		v.lim, v.slope, v.idle, v.keep, v.applied = math.Inf(1), 0, 0, 0, nil
	}
}

// reduce applies one notification for v (congestion at dst): LIM_j is
// halved from min(LIM_j, what v sends) but kept at no less than the
// floor dst's host guarantees the pair plus what v sent elsewhere in the
// last period (egress). A VM that sends no more than that is within its
// guarantee at dst and keeps its limit. It says whether LIM_j changed.
func (a *Agent) reduce(v *vmState, dst string, floor float64, egress []mech.PairObs) bool {
	base := math.Min(v.lim, a.cfg.Link)
	if v.outRate > 0 && v.outRate < base {
		base = v.outRate
	}
	// The floor comes from another host: never above what the VM is
	// guaranteed to send (the receiver caps it there), never negative or
	// NaN, whatever a datagram carries.
	keep := 0.0
	if floor > 0 {
		keep = math.Min(floor, v.vm.Out)
	}
	for i := range egress {
		if p := &egress[i]; p.Pair.Src == v.vm.Name && p.Pair.Dst != dst {
			keep += p.Rate
		}
	}
	if base <= keep {
		return false
	}
	v.keep = math.Max(keep, a.cfg.MinRate)
	v.lim = math.Max(base/2, v.keep)
	v.idle = 0
	return true
}
