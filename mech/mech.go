// Package mech is the seam between isolation mechanisms and whatever drives
// them. A mechanism is control logic only: observations in, limiter settings
// and control messages out. The simulator (sim/) and the real host agent both
// drive the very same Agent values; a mechanism never imports either of them,
// nor netlink.
//
// One Agent runs per server (hypervisor). Every Period the driver hands it a
// HostObs measured since its previous step — the rates of the VM pairs whose
// source or destination is on the server, the limits in force and the
// congestion seen — together with the control messages peers sent it, and
// applies the Limits it returns and delivers its Messages.
package mech

import (
	"math"
	"time"
)

// Unlimited is the rate of a limiter that does not limit.
var Unlimited = math.Inf(1)

// PairID names a directed VM-to-VM pair. VM names are unique across tenants.
type PairID struct {
	Src, Dst string
}

// VM is a virtual machine as the provider knows it: its tenant, the server
// (host) it is placed on, and its hose-model guarantees in bits/s.
type VM struct {
	Name, Tenant, Host string
	In, Out            float64
}

// Env is the static knowledge an agent starts with.
type Env struct {
	// Host is the server this agent runs on.
	Host string
	// VMs lists every VM of every tenant (so an agent can find the host of a
	// peer VM and its guarantees), sorted by name.
	VMs []VM
	// Pattern is the set of VM pairs the operator declared would
	// communicate (the scenario's workloads). Only mechanisms that reserve
	// ahead of time (static) may use it; adaptive ones must rely on
	// observations.
	Pattern []PairID
	// SLA maps tenants with a performance SLA to the degradation they
	// tolerate, a fraction of their VMs' demand (DRX); others are absent.
	SLA map[string]float64
	// HostLinks maps hosts to the capacity of their access link in bits/s
	// (each direction); a host not listed has an unknown link. Mechanisms
	// that schedule a host's link (Gatekeeper) take its rate from here.
	HostLinks map[string]float64
}

// PairObs is one VM pair as seen by one host over the last period.
type PairObs struct {
	Pair   PairID
	Tenant string
	// Rate is the measured throughput in bits/s: sent (egress) or received
	// (ingress).
	Rate float64
	// Limit is the pair's egress limiter rate in force (Unlimited if none).
	Limit float64
	// LimiterBound is true when the pair's own limiter held it back during
	// the period (it was the pair's bottleneck).
	LimiterBound bool
	// Losses is the number of packets of this pair detected lost in the
	// period (congestion events; reported on the ingress side, where gaps in
	// per-pair sequence numbers are seen, and copied to the egress side in
	// the simulator for mechanisms that react at the source).
	Losses float64
	// Marks is the number of packets of this pair ECN-marked in the period
	// (scenarios with ECN: congested links mark TCP instead of dropping).
	Marks float64
}

// HostObs is what one host measured since its previous step.
type HostObs struct {
	Now    time.Duration // time of this step
	Period time.Duration // length of the measurement interval
	// Egress lists pairs whose source VM is on this host, Ingress those whose
	// destination VM is; pairs of two VMs on the same host appear in both.
	// Pairs with no traffic in the period and no limiter may be omitted.
	Egress, Ingress []PairObs
	// VMs lists the host's VMs.
	VMs []VMObs
}

// LimitKind says which enforcement point a Limit sets.
type LimitKind int

// Enforcement points at a host.
const (
	// PairLimit caps one VM pair's traffic at its source host.
	PairLimit LimitKind = iota
	// VMEgress caps everything a VM sends.
	VMEgress
	// VMIngress caps everything a VM receives (at its host's ingress).
	VMIngress
)

// Limit is one rate-limiter setting. Rate is in bits/s; Unlimited removes
// the limiter.
type Limit struct {
	Kind LimitKind
	Pair PairID // for PairLimit
	VM   string // for VMEgress, VMIngress
	Rate float64
}

// Message is a control message between agents (e.g. ElasticSwitch's
// remote-guarantee packets, Gatekeeper's congestion feedback). A mechanism
// sends a Body (a named, versioned type; see message.go); a host agent
// delivers what it read from the wire as json.RawMessage, which the
// mechanism decodes with DecodeBody.
type Message struct {
	From, To string // hosts
	Body     any
}

// Actions is what an agent wants done after a step. Limits not mentioned
// keep their current rate.
type Actions struct {
	Limits     []Limit
	Schedulers []Scheduler
	Messages   []Message
}

// Agent is the per-host control loop of a mechanism.
type Agent interface {
	// Period is how often the agent wants to step.
	Period() time.Duration
	// Step consumes one observation and the messages that arrived since the
	// previous step.
	Step(obs *HostObs, inbox []Message) Actions
}

// Concurrent is implemented by mechanisms whose agents on different hosts
// may step at the same time: they share no mutable state (with each other
// or with the mechanism), and a message's body is not changed once sent.
// A driver that runs many agents in one process (the simulator) may then
// step them in parallel.
type Concurrent interface {
	ConcurrentAgents() bool
}

// Failsafe is implemented by agents that can name, at any moment, the
// settings that keep every guarantee on their host without another step
// or message: what a host agent leaves in force when it stops (a signal,
// an upgrade), until it or its successor steps again. A mechanism that
// lets pairs or VMs above their guarantees while its peers' feedback
// holds them (work conservation) returns them to their guarantees here.
// Limits and schedulers not mentioned keep their current settings; an
// agent that is not a Failsafe leaves every setting as it is.
type Failsafe interface {
	// Failsafe returns the limits and schedulers to leave in force
	// (Messages are ignored).
	Failsafe() Actions
}

// Rejecter is implemented by agents that drop what a message says when
// the sender cannot know it — a report about a VM pair from a host that is
// neither of the pair's (ElasticSwitch takes a pair's share and congestion
// only from the host of its destination) — and count them.
type Rejecter interface {
	// Foreign returns how many such reports the agent dropped so far.
	Foreign() int64
}

// Mechanism makes agents. Parameters are parsed and checked when the
// Mechanism is built (see mech/all), so NewAgent only fails on an Env the
// mechanism cannot serve.
type Mechanism interface {
	Name() string
	// Capabilities says what the mechanism needs from its driver.
	Capabilities() Capabilities
	NewAgent(env Env) (Agent, error)
}

// HostOf returns the host of the named VM in env, or "" if unknown.
func (e *Env) HostOf(vm string) string {
	if v, ok := e.VM(vm); ok {
		return v.Host
	}
	return ""
}

// VM looks a VM up by name (Env.VMs is sorted by name).
func (e *Env) VM(name string) (VM, bool) {
	lo, hi := 0, len(e.VMs)
	for lo < hi {
		m := (lo + hi) / 2
		if e.VMs[m].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(e.VMs) && e.VMs[lo].Name == name {
		return e.VMs[lo], true
	}
	return VM{}, false
}

// Direction of a host scheduler on its access link.
type Direction int

// Scheduler directions.
const (
	Egress Direction = iota
	Ingress
)

// Scheduler configures a host's per-VM scheduler on its access link
// (Gatekeeper's egress and ingress schedulers; an HTB tree of per-VM classes
// on real hosts): a work-conserving weighted fair queue across the host's
// VMs, weights typically their guarantees, serving at most Rate bits/s in
// total. VMs of the host not in Weights get a negligible weight (best
// effort). Rate Unlimited with no Weights removes the scheduler.
type Scheduler struct {
	Dir     Direction
	Rate    float64
	Weights map[string]float64
}

// VMObs is one local VM as its host measured it over the last period.
type VMObs struct {
	VM string
	// InArrival is the rate (bits/s) at which traffic for the VM arrived at
	// the host, InRate what was delivered to it, InDrops what the host's
	// ingress dropped (its per-VM queue overflowing); OutRate is what the VM
	// sent out of its host (after its own limiters and the host's egress
	// scheduler, before any drop in the network).
	InArrival, InRate, InDrops, OutRate float64
	// DropSrc is the source VM that lost most at this VM's ingress queue in
	// the period ("" if none): Gatekeeper targets the sender of the last
	// dropped packet.
	DropSrc string
	// OutDemand and InDemand are the I/O the VM's applications tried to
	// send and the traffic its peers' applications tried to send to it
	// (bits/s, averaged over the period): the offered load of its rate-bound
	// connections, +Inf when an unbounded (bulk) connection was active for
	// most of the period. With OutRate and InRate they give the VM's
	// performance against what it demands (DRX's degradation against an
	// SLA). On real hosts they come from the application (its posted work
	// requests), 0 when unknown.
	OutDemand, InDemand float64
}
