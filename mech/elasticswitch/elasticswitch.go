// Package elasticswitch is ElasticSwitch (Popa et al., "ElasticSwitch:
// Practical Work-Conserving Bandwidth Guarantees for Cloud Computing",
// SIGCOMM 2013): hose-model bandwidth guarantees that are work-conserving,
// enforced by per-VM-pair rate limiters at source hypervisors, decided by
// every hypervisor independently (§3).
//
// Every host runs one Agent with two layers (§3, Fig. 3):
//
//   - Guarantee Partitioning (GP, §4), every gp_period (60 ms): each local
//     VM's hose guarantee is split max-min among its VM pairs by estimated
//     demand, separately for what it sends (VM.Out, at the source) and what
//     it receives (VM.In, at the destination). The guarantee of a pair is
//     B = min(source's share, destination's share); destinations tell
//     sources their share and whether they deem the pair unbounded in
//     remote-guarantee messages (Guarantees). See gp.go.
//   - Rate Allocation (RA, §5), every ra_period (15 ms), per pair at the
//     source: the limit R = max(B, R_W_TCP) follows a Seawall-like weighted
//     TCP with Hold-Increase and Rate-Caution (package ra, shared with
//     mech/seawall).
//
// Agent.Period is the RA period; GP runs every gp_period / ra_period-th
// step (every 4th by default).
//
// A best-effort pair (its source VM has no out-hose or its destination VM
// no in-hose, e.g. a best_effort tenant) has guarantee 0, so RA's weight
// ∝ guarantee would leave it unable to use even an idle link; it gets the
// RA weight of best_effort_weight (45 Mbps) instead, and no floor (see
// Config.BestEffortWeight).
//
// Headroom (§5 improvement 1, §7: 10%) is "a strictly positive gap between
// the link capacity and the maximum offered guarantees on any link": a
// property of admission control, which this mechanism can neither see nor
// enforce (it does not know link capacities). The scenarios reproducing
// the paper provide it (e.g. 2 × 450 Mbps of guarantees on a 1 Gbps link).
// On a link reserved to 100%, RA's probing above the guarantees eats into
// them, and guarantees are met only approximately.
//
// Congestion (the feedback F of §5) is a period with congestion events on
// the pair: lost packets and, on an ECN network (§6, §7.4), ECN-marked
// ones. The "congestion_signal" parameter says which count (ra.Signal):
// both (default; on a network without ECN nothing is marked, so this is
// loss detection, and on an ECN network it reacts to TCP's marks and to
// the drops that remain, such as UDP's), loss, or ecn. The "congestion"
// parameter says where they are read (ra.Source): from the source's
// Egress observation (default: the simulator copies there the losses and
// marks the receiver detects, and a host daemon may do the same), from
// congestion feedback messages that receiver hosts send to source hosts
// (§6: "receiver", the paper's protocol), or both.
//
// Control messages are Guarantees (destination → source, every GP period)
// and ra.Feedback (destination → source, every RA period with congestion
// events, only when congestion is "receiver" or "both"). Either may be
// delayed or lost (in the simulator: network.control_delay and
// control_loss): a lost Guarantees message leaves the source on the last
// share it heard of until the next GP period. Their bodies encode to JSON and
// are accepted either as Go values (as the simulator delivers them) or as
// raw JSON (json.RawMessage, []byte or string) with their "kind" field.
package elasticswitch

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch/ra"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Name of the mechanism.
const Name = "elasticswitch"

// Config is ElasticSwitch's configuration. Rates are in bits/s.
type Config struct {
	// RA holds the rate-allocation constants (§5, §7).
	RA ra.Config
	// GPPeriod is the GP period (§7: 60 ms), a multiple of RA.Period.
	GPPeriod time.Duration
	// Margin is the error margin of the demand estimates (§4): a pair
	// whose peak rate over a GP period, times 1 + Margin, stays below its
	// share is bounded, and its demand estimate is that rate times
	// (1 + Margin)² (so that a steady demand stays classified bounded).
	Margin float64
	// Initial is the least demand estimate of a new pair (§4: its demand
	// estimate and guarantee are set "at a small value"). Departure from
	// the paper: the new pair's VM's hose is re-partitioned at once, at
	// both ends, with the new pair's demand estimated from its first
	// (unlimited) period, at least Initial, then deemed unbounded as soon
	// as it uses its share, and whatever the other pairs' demands leave
	// of the hose lent to it (the whole hose for a VM that was idle); see
	// earlyDemands and repartition. Every VM's shares sum to at most its
	// hose.
	Initial float64
	// Growth is the factor by which the guarantee of a new (or bounded)
	// pair that used its guarantee grows at each GP, up to the fair share
	// of the unbounded pairs (§4: "exponentially").
	Growth float64
	// IdleTimeout is how long a pair may send nothing before it is
	// forgotten (its limiter removed at the source). It then starts anew.
	IdleTimeout time.Duration
	// BestEffortWeight is the rate whose RA weight (w = rate /
	// RA.WeightUnit) a best-effort pair gets: one whose hoses allow it no
	// guarantee (its source VM's out-hose or its destination VM's in-hose
	// is zero). §5 shares spare capacity "in proportion to the active
	// guarantees", which gives such a pair nothing where guaranteed pairs
	// want the spare, and leaves undefined what it gets on a link nobody
	// else uses, where §5's first goal is that "the entire available
	// network capacity is utilized". With the weight of its zero
	// guarantee (RA's MinRate, 100 Kbps: w = 0.0002) it could not use it:
	// its convex increase is n·w·A ≈ n·0.1 Kbps per period and one
	// congestion event holds it for ⌈1/w⌉ ≈ 4,500 periods (Hold-Increase),
	// so a best-effort tenant got ~1 Mbps of an idle 1 Gbps link. It gets
	// this weight instead; its floor stays zero, so it never holds
	// capacity a guarantee needs, and where guaranteed pairs want the
	// spare it takes about the share a pair guaranteed this rate would.
	// Default 45 Mbps (w = 0.1): a best-effort pair alone on an idle
	// 1 Gbps link averages ~800 Mbps; beside guaranteed tenants that want
	// the spare it stays below its ideal share (random scenario 73).
	BestEffortWeight float64
	// PeerTimeout is how long a source waits for its destination's host
	// to be heard of (a remote-guarantee message naming the pair, sent
	// every GP period) before it holds the pair at its guarantee: a
	// destination that is silent — its agent stopped, killed or cut off —
	// sends neither shares nor congestion, and RA would otherwise raise
	// the pair above its guarantee unchecked. The pair's RA restarts from
	// the guarantee when its destination is heard again. Not in the
	// paper, which does not treat agent failures; default 5 GP periods
	// (300 ms), so that a lost message or two (or 20% loss) does not
	// trip it.
	PeerTimeout time.Duration
	// IncreaseLink is the access-link speed for which RA's convex increase
	// A (RA.Increase) is given, bits/s: on a host whose access link is
	// faster (mech.Env.HostLinks), A grows in proportion, and a pair that
	// has met no congestion yet climbs with IncreaseStart, scaled the same
	// way. The paper's A (0.5 Mbps per 15 ms) is for its 1 Gbit/s
	// testbed, where a pair climbs from a 450 Mbps guarantee to the link
	// in about a second; unscaled, it needs 5 s at 10 Gbit/s and more than
	// 10 s at 40. Scaled in proportion alone it needs 1.7 s at either: a
	// guarantee of the same size is a smaller part of a faster link, so
	// the climb is longer relative to the link, and Rate-Caution slows it
	// to C_min sooner. Not in the paper; default 1 Gbit/s (links up to
	// 1 Gbit/s keep the paper's A); 0 keeps A at every speed.
	IncreaseLink float64
	// IncreaseStart is A, before that scaling, of a pair that has met no
	// congestion event yet on a host faster than IncreaseLink (RA's
	// StartIncrease): the paper's "More Aggr." A (§7.2, 2.5 Mbps), with
	// which a lone pair reaches 90% of a 10 or 40 Gbit/s link within 1 s.
	// From its first congestion event on, the pair climbs with the
	// paper's A scaled: with the aggressive A throughout, work
	// conservation on the DRX scenarios' 40-56 Gbit/s fabrics fell from
	// 93% to 72% (drx-symmetric) as pairs overshot and were cut.
	IncreaseStart float64
	// EdgeCeiling makes each host divide the capacity of its own access
	// link, in both directions, among the pairs from and to other hosts
	// that cross it, by weighted max-min (weights as RA's: the pairs'
	// guarantees), and cap every pair's RA rate at its share, never below
	// its guarantee (see edge.go). RA still finds the spare capacity of
	// the network's core by probing; at the edges, where a host sees every
	// pair that crosses its link, the spare is split by weight at once and
	// the limits leave the link EdgeHeadroom of its capacity. Not in the
	// paper, whose RA probes every link by losses: on real drop-tail
	// queues TCP then splits the spare per connection (a tenant with 64
	// small flows beside one large one takes more than its weight, and
	// the large one can fall below its guarantee). Default on.
	EdgeCeiling bool
	// EdgeHeadroom is the fraction of an access link the edge ceilings
	// leave unallocated, so that the queue at the link stays short
	// (default 0.02).
	EdgeHeadroom float64
}

// Defaults returns the paper's parameters (§7): RA every 15 ms and GP every
// 60 ms, α 0.4, δ 0.75, A 0.5 Mbps, T_S 1.5, w = B / 450 Mbps, Hold-Increase
// (γ 0.75), Rate-Caution (C 0.5, C_min 0.3); and, where the paper gives no
// number, a 10% demand-estimate margin, new pairs at 5 Mbps doubling every
// GP period, pairs forgotten after 1 s idle, and best-effort pairs weighted
// as a 45 Mbps guarantee (see Config.BestEffortWeight).
func Defaults() Config {
	return Config{
		RA:          ra.Defaults(),
		GPPeriod:    60 * time.Millisecond,
		Margin:      0.1,
		Initial:     5e6,
		Growth:      2,
		IdleTimeout: time.Second,
		PeerTimeout: 300 * time.Millisecond,

		IncreaseLink:  1e9,
		IncreaseStart: ra.AggressiveIncrease,
		EdgeCeiling:   true,
		EdgeHeadroom:  0.02,

		BestEffortWeight: 45e6,
	}
}

// gpParams are the GP parameters (see Parse).
func gpParams() []string {
	return []string{"gp_period", "gp_margin", "gp_initial", "gp_growth", "idle_timeout", "best_effort_weight", "peer_timeout", "increase_link", "increase_start", "edge_ceiling", "edge_headroom"}
}

// ParamNames lists every parameter of the mechanism: ra.CoreParams,
// ra.ImprovementParams and the GP parameters (see Parse).
func ParamNames() []string {
	n := append(ra.CoreParams(), ra.ImprovementParams()...)
	return append(n, gpParams()...)
}

// Parse reads scenario parameters (mechanism.params) over Defaults.
// Unknown parameters, wrong types and out-of-range values are reported as
// *spec.FieldError values ("mechanism.params.alpha: expected a number, got
// "x""), joined. The parameters are those of package ra (ra.CoreParams and
// ra.ImprovementParams) and:
//
//	gp_period     GP period (duration, "60ms"), a multiple of ra_period
//	gp_margin     demand-estimate error margin (0.1)
//	gp_initial    guarantee of a new pair (rate, "5Mbps")
//	gp_growth     growth factor of a new pair's guarantee per GP (2)
//	idle_timeout  idle time after which a pair is forgotten (duration, "1s")
//	best_effort_weight
//	              the RA weight of a pair with no guarantee, as a rate
//	              ("45Mbps"; see Config.BestEffortWeight)
//	peer_timeout  silence of a pair's destination host after which the
//	              source holds the pair at its guarantee (duration,
//	              "300ms", at least 2 gp_period; see Config.PeerTimeout)
//	increase_link the access-link speed the convex increase is given for
//	              (rate, "1Gbps"; 0: no scaling; see Config.IncreaseLink)
//	increase_start
//	              the convex increase, before scaling, of a pair that has
//	              met no congestion yet on a host faster than
//	              increase_link (rate, "2.5Mbps"; see Config.IncreaseStart)
//	edge_ceiling  divide each access link's capacity among the pairs
//	              crossing it by weight, and cap their rates there
//	              (true; see Config.EdgeCeiling)
//	edge_headroom the fraction of an access link the edge ceilings leave
//	              free (0.02)
func Parse(params map[string]any) (Config, error) {
	p := spec.Params(params)
	cfg := Defaults()
	if err := p.Check(ParamNames()...); err != nil {
		return cfg, err
	}
	r := p.Reader()
	r.Add(ra.Parse(p, &cfg.RA, append(ra.CoreParams(), ra.ImprovementParams()...)...))
	r.Duration(&cfg.GPPeriod, "gp_period")
	r.Float(&cfg.Margin, "gp_margin")
	r.Rate(&cfg.Initial, "gp_initial")
	r.Float(&cfg.Growth, "gp_growth")
	r.Duration(&cfg.IdleTimeout, "idle_timeout")
	r.Rate(&cfg.BestEffortWeight, "best_effort_weight")
	r.Duration(&cfg.PeerTimeout, "peer_timeout")
	r.Rate(&cfg.IncreaseLink, "increase_link")
	r.Rate(&cfg.IncreaseStart, "increase_start")
	r.Bool(&cfg.EdgeCeiling, "edge_ceiling")
	r.Float(&cfg.EdgeHeadroom, "edge_headroom")
	if err := r.Err(); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// Validate checks the configuration; problems are *spec.FieldError values
// named after the parameters, joined.
func (c *Config) Validate() error {
	var pe spec.ParamErrors
	pe.Add(c.RA.Validate())
	bad := pe.Bad
	switch {
	case c.GPPeriod <= 0:
		bad("gp_period", "must be positive, got %v", c.GPPeriod)
	case c.RA.Period > 0 && c.GPPeriod%c.RA.Period != 0:
		bad("gp_period", "must be a multiple of ra_period (%v), got %v", c.RA.Period, c.GPPeriod)
	}
	if !(c.Margin >= 0 && c.Margin < 1) {
		bad("gp_margin", "must be in [0, 1), got %g", c.Margin)
	}
	if !(c.Initial > 0) || math.IsInf(c.Initial, 0) {
		bad("gp_initial", "must be a positive finite rate, got %g", c.Initial)
	}
	if !(c.Growth > 1) || math.IsInf(c.Growth, 0) {
		bad("gp_growth", "must be finite and > 1, got %g", c.Growth)
	}
	if c.IdleTimeout <= 0 {
		bad("idle_timeout", "must be positive, got %v", c.IdleTimeout)
	}
	if c.PeerTimeout < 2*c.GPPeriod {
		bad("peer_timeout", "must be at least 2 gp_period (%v), got %v", 2*c.GPPeriod, c.PeerTimeout)
	}
	if !(c.IncreaseStart >= 0) || math.IsInf(c.IncreaseStart, 0) {
		bad("increase_start", "must be a finite rate ≥ 0, got %g", c.IncreaseStart)
	}
	if !(c.EdgeHeadroom >= 0 && c.EdgeHeadroom < 0.5) {
		bad("edge_headroom", "must be in [0, 0.5), got %g", c.EdgeHeadroom)
	}
	if !(c.BestEffortWeight > 0) || math.IsInf(c.BestEffortWeight, 0) {
		bad("best_effort_weight", "must be a positive finite rate, got %g", c.BestEffortWeight)
	}
	return pe.Err()
}

// Mechanism is ElasticSwitch with one configuration.
type Mechanism struct {
	cfg Config
	// congestionSet: the parameters chose where congestion is read
	// (ForLosses keeps that choice).
	congestionSet bool
}

// New parses params (see Parse) and returns the mechanism.
func New(params map[string]any) (*Mechanism, error) {
	cfg, err := Parse(params)
	if err != nil {
		return nil, err
	}
	_, set := params["congestion"]
	return &Mechanism{cfg: cfg, congestionSet: set}, nil
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
	return NewAgent(m.cfg, env)
}

// pairState is GP's classification of a pair at one end (§4).
type pairState int

const (
	// growing: a new pair (or a bounded one that used its guarantee) whose
	// guarantee grows by Growth per GP up to the fair share; not reported
	// as unbounded ("not considering new flows as unbounded", §4).
	growing pairState = iota
	// bounded: demand estimated from the measured rate.
	bounded
	// unbounded: got the fair share of the unbounded pairs.
	unbounded
)

// end is GP's state of a pair at one of its ends.
type end struct {
	id    mech.PairID
	share float64 // this end's share of its VM's hose
	state pairState
	peak  float64       // highest per-period rate since the last GP
	last  time.Duration // last time it sent anything (or was created)
	since time.Duration // when it was created
	// demand is the demand estimate the share was last split for: GP's
	// estimate, or +Inf for a pair not yet through a GP (see repartition).
	demand float64
	rate   float64 // rate measured in this step (0 if not seen)
	// what the environment says of the pair, kept from its creation or
	// the last UpdateEnv (see annotate): the hosts of its source and
	// destination VMs, the positions of those VMs in Agent.vms (-1: not
	// on this host), and whether it is best-effort
	srcHost, dstHost string
	srcVM, dstVM     int32
	bestEffort       bool

	fresh   bool // seen for the first time in this step
	held    bool // held back by its limiter in a period since the last GP (source only)
	heldNow bool // held back by its limiter in this step (source only)
	// early: the pair appeared since the last GP and has not stopped; its
	// demand is re-estimated at every step (see earlyDemands).
	early bool
}

// outPair is a pair whose source VM is on this host.
type outPair struct {
	end
	remote          float64 // the destination's share (if remoteKnown)
	remoteUnbounded bool
	remoteKnown     bool
	flow            ra.Flow
	limit           float64 // limit last set (NaN: none yet)
	// heard is when the destination's host last named the pair in a
	// remote-guarantee message (or when the pair was made); local: the
	// destination is on this host
	heard time.Duration
	local bool
	obs   *mech.PairObs
	// ceiling is the pair's share of this host's uplink, remoteCeiling
	// its share of the destination's downlink (see edge.go; 0: none)
	ceiling, remoteCeiling float64
}

// guarantee is B = min(source's share, destination's share) (§4); until
// the destination's share arrives, the source's ("Initially, each flow is
// given the guarantee allocated by the source hypervisor").
func (p *outPair) guarantee() float64 {
	if p.remoteKnown {
		return math.Min(p.share, p.remote)
	}
	return p.share
}

// inPair is a pair whose destination VM is on this host.
type inPair struct {
	end
	// ceiling is the pair's share of this host's downlink (see edge.go;
	// 0: none yet)
	ceiling float64
	// twin is the same pair at its source when that is on this host too,
	// as found when Agent.hintGen was twinGen (see remoteGuarantees)
	twin    *outPair
	twinGen int
}

// GuaranteesKind is the kind of a Guarantees message body.
const GuaranteesKind = "elasticswitch.guarantees.v1"

// Guarantees is the body of a remote-guarantee message (§4, §6) from a
// destination host to a source host, sent every GP period.
type Guarantees struct {
	Pairs []RemoteGuarantee `json:"pairs"`
}

// MessageKind implements mech.Body.
func (Guarantees) MessageKind() string { return GuaranteesKind }

// MarshalJSON encodes the body with its kind (mech.MarshalBody).
func (g Guarantees) MarshalJSON() ([]byte, error) {
	type fields Guarantees
	return mech.MarshalBody(GuaranteesKind, fields(g))
}

// RemoteGuarantee is the destination's share B_Y^{X→Y} of one pair, and
// whether the destination deems the pair unbounded (the flag bit of §4,
// footnote 3).
type RemoteGuarantee struct {
	Src       string  `json:"src"`
	Dst       string  `json:"dst"`
	Share     float64 `json:"share"`
	Unbounded bool    `json:"unbounded"`
	// Ceiling is the pair's share of the destination host's downlink
	// (Config.EdgeCeiling); 0 or absent: none.
	Ceiling float64 `json:"ceiling,omitempty"`
}

// Agent is ElasticSwitch on one host. It is not safe for concurrent use.
type Agent struct {
	cfg     Config
	env     mech.Env
	gpEvery int
	steps   int
	local   map[string]mech.VM // VMs on this host
	det     *ra.Detector
	// vms are the VMs on this host in the environment's order, vmIx
	// their positions (end.srcVM, end.dstVM)
	vms  []mech.VM
	vmIx map[string]int32

	out     map[mech.PairID]*outPair
	outList []*outPair // sorted by (Src, Dst)
	in      map[mech.PairID]*inPair
	inList  []*inPair // sorted by (Dst, Src)

	// foreign counts remote guarantees dropped because they did not come
	// from the host of the pair's destination
	foreign int64

	// scratch for GP
	demands, shares, weights []float64
	mm                       maxMinScratch
	to                       []int // remoteGuarantees' message of each inList pair
	edgeOuts                 []*outPair
	edgeIns                  []*inPair

	// egHint[i] and inHint[i] are the pairs of the i-th egress and
	// ingress observations of the last step (nil: none); every pair in
	// them is in out or in (forgetHints clears them when a pair leaves)
	egHint []*outPair
	inHint []*inPair
	// rgHint[h][j] is the pair the j-th remote guarantee of host h's last
	// message named (nil: none): a host names the same pairs in the same
	// order from one GP period to the next; forgetHints clears it
	rgHint map[string][]*outPair
	// hintGen counts forgetHints (inPair.twin)
	hintGen int

	// limits is the storage of a step's Actions.Limits (see Step)
	limits []mech.Limit
}

// growHints returns h with at least n entries (new ones nil).
func growHints[P any](h []*P, n int) []*P {
	for len(h) < n {
		h = append(h, nil)
	}
	return h
}

// forgetHints clears the observation hints (a pair was forgotten).
func (a *Agent) forgetHints() {
	clear(a.egHint)
	clear(a.inHint)
	clear(a.rgHint)
	a.hintGen++
}

// NewAgent returns the agent for env.Host under cfg (validated).
func NewAgent(cfg Config, env mech.Env) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if env.Host == "" {
		return nil, fmt.Errorf("%s: environment names no host", Name)
	}
	a := &Agent{
		cfg:     cfg,
		env:     env,
		gpEvery: int(cfg.GPPeriod / cfg.RA.Period),
		local:   map[string]mech.VM{},
		det:     ra.NewDetector(cfg.RA.Congestion, cfg.RA.Signal),
		out:     map[mech.PairID]*outPair{},
		in:      map[mech.PairID]*inPair{},
	}
	a.setLocal()
	if l := env.HostLinks[env.Host]; cfg.IncreaseLink > 0 && l > cfg.IncreaseLink && !math.IsInf(l, 0) {
		a.cfg.RA.Increase *= l / cfg.IncreaseLink
		a.cfg.RA.StartIncrease = cfg.IncreaseStart * l / cfg.IncreaseLink
	}
	return a, nil
}

// setLocal sets the agent's local VMs (local, vms, vmIx) from its
// environment.
func (a *Agent) setLocal() {
	a.local = map[string]mech.VM{}
	a.vms = a.vms[:0]
	a.vmIx = map[string]int32{}
	for _, v := range a.env.VMs {
		if v.Host == a.env.Host {
			a.local[v.Name] = v
			a.vmIx[v.Name] = int32(len(a.vms))
			a.vms = append(a.vms, v)
		}
	}
}

// vmIndex is the position of a VM in vms (-1: not on this host).
func (a *Agent) vmIndex(vm string) int32 {
	if i, ok := a.vmIx[vm]; ok {
		return i
	}
	return -1
}

// Period implements mech.Agent: the RA period.
func (a *Agent) Period() time.Duration { return a.cfg.RA.Period }

// Guarantee returns the guarantee B the agent currently enforces as the
// floor of a pair whose source is on its host.
func (a *Agent) Guarantee(p mech.PairID) (float64, bool) {
	if o, ok := a.out[p]; ok {
		return o.guarantee(), true
	}
	return 0, false
}

// Share returns this host's GP share of a pair: at the source if the
// pair's source VM is here (out), else at the destination.
func (a *Agent) Share(p mech.PairID, out bool) (float64, bool) {
	if out {
		if o, ok := a.out[p]; ok {
			return o.share, true
		}
		return 0, false
	}
	if i, ok := a.in[p]; ok {
		return i.share, true
	}
	return 0, false
}

// Step implements mech.Agent: it takes the messages and observations,
// runs GP when due, then RA for every pair whose source is here. The
// returned Limits are the agent's storage, valid until its next Step (a
// driver applies them before stepping it again).
func (a *Agent) Step(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	now := obs.Now
	var act mech.Actions
	for _, m := range a.det.Receive(inbox, a.env.HostOf) {
		g, ok := mech.DecodeBody[Guarantees](m.Body)
		if !ok {
			continue
		}
		hint := a.rgHint[m.From]
		for len(hint) < len(g.Pairs) {
			hint = append(hint, nil)
		}
		named := false // the message named a pair of ours from its destination's host
		for j, rg := range g.Pairs {
			// The host of a known pair's destination is kept with it.
			p := hint[j]
			if p == nil || p.id.Src != rg.Src || p.id.Dst != rg.Dst {
				p = a.out[mech.PairID{Src: rg.Src, Dst: rg.Dst}]
				hint[j] = p
			}
			h := ""
			if p != nil {
				h = p.dstHost
			} else {
				h = a.env.HostOf(rg.Dst)
			}
			if h != m.From {
				if h != "" { // only the destination's host knows its share
					a.foreign++
				}
				continue
			}
			named = named || p != nil
			if p != nil && rg.Share >= 0 {
				p.remote, p.remoteUnbounded, p.remoteKnown = rg.Share, rg.Unbounded, true
				p.heard = now
				p.remoteCeiling = 0
				if rg.Ceiling > 0 && !math.IsInf(rg.Ceiling, 0) {
					p.remoteCeiling = rg.Ceiling
				}
			}
		}
		if named { // hints kept only for hosts that send us guarantees
			if a.rgHint == nil {
				a.rgHint = map[string][]*outPair{}
			}
			a.rgHint[m.From] = hint
		}
	}
	a.egHint = growHints(a.egHint, len(obs.Egress))
	newOut, newIn := false, false // pairs added (the lists sorted after)
	for i := range obs.Egress {
		o := &obs.Egress[i]
		// A driver lists the same pairs in the same order from step to
		// step: the pair at this position last time is likely this one.
		if p := a.egHint[i]; p != nil && p.id == o.Pair {
			p.obs = o
			p.see(o.Rate, now)
			p.heldNow = ra.Demanding(o.Rate, o.Limit, o.LimiterBound)
			p.held = p.held || p.heldNow
			continue
		}
		vm, ok := a.local[o.Pair.Src]
		if !ok {
			continue
		}
		p := a.out[o.Pair]
		if p == nil {
			if !(o.Rate > 0) {
				continue // a limiter with nothing behind it: not a pair of ours
			}
			p = &outPair{end: a.newEnd(o.Pair, vm.Out, now), limit: math.NaN(), heard: now,
				local: a.env.HostOf(o.Pair.Dst) == a.env.Host}
			a.out[o.Pair] = p
			a.outList = append(a.outList, p)
			newOut = true
		}
		a.egHint[i] = p
		p.obs = o
		p.see(o.Rate, now)
		p.heldNow = ra.Demanding(o.Rate, o.Limit, o.LimiterBound)
		p.held = p.held || p.heldNow
	}
	a.inHint = growHints(a.inHint, len(obs.Ingress))
	for i := range obs.Ingress {
		o := &obs.Ingress[i]
		if p := a.inHint[i]; p != nil && p.id == o.Pair {
			p.see(o.Rate, now)
			continue
		}
		vm, ok := a.local[o.Pair.Dst]
		if !ok {
			continue
		}
		p := a.in[o.Pair]
		if p == nil {
			if !(o.Rate > 0) {
				continue
			}
			p = &inPair{end: a.newEnd(o.Pair, vm.In, now)}
			a.in[o.Pair] = p
			a.inList = append(a.inList, p)
			newIn = true
		}
		a.inHint[i] = p
		p.see(o.Rate, now)
	}
	if newOut {
		sort.Slice(a.outList, func(i, j int) bool { return pairLess(a.outList[i].id, a.outList[j].id) })
	}
	if newIn {
		sort.Slice(a.inList, func(i, j int) bool { return inLess(a.inList[i].id, a.inList[j].id) })
	}
	a.earlyDemands(now)
	ins := a.repartition()
	act.Messages = a.det.Report(a.env.Host, obs.Ingress, a.env.HostOf)

	a.steps++
	if a.steps%a.gpEvery == 0 {
		a.edgeCeilings(now)
		act.Messages = append(act.Messages, a.partition(now)...)
	} else if len(ins) > 0 {
		// The destination tells the sources of the pairs of the VMs it
		// re-partitioned their shares at once rather than at the next
		// GP period, so that a new pair gets its guarantee within one RA
		// period (plus the message's delay), and the pairs whose shares
		// shrank are held to them.
		act.Messages = append(act.Messages, a.remoteGuarantees(func(p *inPair) bool { return ins[p.id.Dst] })...)
	}
	a.clearFresh()

	clear(a.limits) // the last step's: no names kept alive
	act.Limits = a.allocate(now, a.limits[:0])
	a.forget(now, &act)
	a.limits = act.Limits
	a.det.EndStep()
	return act
}

func (a *Agent) newEnd(id mech.PairID, hose float64, now time.Duration) end {
	e := end{id: id, share: math.Min(a.cfg.Initial, hose), state: growing, last: now, since: now, fresh: true,
		demand: math.Inf(1), early: true}
	a.annotate(&e)
	return e
}

// annotate sets what the environment says of a pair end (end.bestEffort,
// end.srcHost, end.dstHost), so that a step looks none of it up.
func (a *Agent) annotate(e *end) {
	e.bestEffort = a.bestEffort(e.id)
	e.srcVM, e.dstVM = a.vmIndex(e.id.Src), a.vmIndex(e.id.Dst)
	e.srcHost = a.env.HostOf(e.id.Src)
	e.dstHost = a.env.HostOf(e.id.Dst)
}

// resplit sets the shares of one VM side's pairs for their demands (see
// split); what max-min leaves unallocated when some pair is not bounded
// (early pairs of finite demand) goes to the early pairs that are not
// bounded, equally, so that a VM whose other pairs hold little of its hose
// (all of it for a VM that was idle) lends the free part to its new pairs
// at once. Their shares still sum to at most hose.
func (a *Agent) resplit(hose float64, ends []*end, demands []float64) (changed bool) {
	shares := a.split(hose, ends, demands)
	sum, n := 0.0, 0
	for i, e := range ends {
		sum += shares[i]
		if e.early && e.state != bounded {
			n++
		}
	}
	rest := hose - sum
	for i, e := range ends {
		s := shares[i]
		if rest > 0 && e.early && e.state != bounded {
			s += rest / float64(n)
		}
		changed = changed || s != e.share
		e.share = s
	}
	return changed
}

// earlyDemands re-estimates, at every step, the demand of the pairs that
// appeared since the last GP (early), and marks fresh those whose estimate
// changed so that their VM's side is re-partitioned at once (repartition):
//
//   - at first sight, its rate in this step (plus the error margin, as
//     at a GP), and at least Initial: it had no limiter yet, so this is
//     what it wanted, over a partial period;
//   - a pair that sent nothing in this step stopped (a short flow that
//     ended): it becomes bounded, of demand 0 until the next GP estimates
//     it from its peak, and is no longer early, so the share it held goes
//     back to its VM's other pairs now rather than at the next GP;
//   - a pair that used its share in this step (at the source: held back
//     by its limiter; at the destination: rate·(1+margin) ≥ share) is
//     deemed unbounded for the split (+Inf), so max-min gives it the fair
//     share of its VM's hose.
func (a *Agent) earlyDemands(now time.Duration) {
	m := 1 + a.cfg.Margin
	est := func(e *end, held bool) {
		switch {
		case !e.early:
		case e.fresh:
			e.demand = math.Max(a.cfg.Initial, e.rate*m*m)
		case e.last < now:
			e.early = false
			e.state = bounded
			e.demand = 0
			e.fresh = true
		case !math.IsInf(e.demand, 1) && (held || e.rate*m >= e.share):
			e.demand = math.Inf(1)
			e.fresh = true
		}
	}
	for _, p := range a.outList {
		est(&p.end, p.heldNow)
		p.rate, p.heldNow = 0, false
	}
	for _, p := range a.inList {
		est(&p.end, false)
		p.rate = 0
	}
}

// repartition applies GP at once to every VM side with a pair that
// appeared (fresh) or an early pair that stopped (endEarly marks it fresh)
// in this step, and returns the destination VMs whose shares it changed.
//
// §4 applies GP "on each new VM-to-VM flow" but sets the new pair's
// demand estimate (and guarantee) "at a small value" (Initial) until the
// next GP has measured it. Departure from the paper: the new pair's demand
// is estimated at every step until the next GP (earlyDemands), and is
// deemed unbounded as soon as it uses its share, so that it gets the fair
// share of its VM's hose within an RA period; the other pairs keep the
// demand estimates of the last GP (max-min, as GP does; resplit lends
// what they leave to the new pairs). A flow from a VM whose hose an
// elephant holds otherwise runs at Initial, a few Mbps, until the next GP
// (up to 60 ms) and then doubles per GP. The new pair is still not
// reported as unbounded to its source (§4: "not considering new flows as
// unbounded"), and it gives its share back as soon as it stops sending
// or at the next GP. Every VM's shares still sum to at most its hose.
func (a *Agent) repartition() map[string]bool {
	var outs, ins map[string]bool
	for _, p := range a.outList {
		if p.fresh {
			if outs == nil {
				outs = map[string]bool{}
			}
			outs[p.id.Src] = true
		}
	}
	for _, p := range a.inList {
		if p.fresh {
			if ins == nil {
				ins = map[string]bool{}
			}
			ins[p.id.Dst] = true
		}
	}
	if outs == nil && ins == nil {
		return nil // nothing appeared or stopped early: no side to re-split
	}
	var ends []*end
	runs(a.outList, func(p *outPair) int32 { return p.srcVM }, func(src int32, run []*outPair) {
		if !outs[run[0].id.Src] {
			return
		}
		ends = ends[:0]
		demands := grow(&a.demands, len(run))
		for k, p := range run {
			ends = append(ends, &p.end)
			demands[k] = p.demand
		}
		a.resplit(a.vms[src].Out, ends, demands)
	})
	runs(a.inList, func(p *inPair) int32 { return p.dstVM }, func(vm int32, run []*inPair) {
		dst := run[0].id.Dst
		if !ins[dst] {
			return
		}
		ends = ends[:0]
		demands := grow(&a.demands, len(run))
		for k, p := range run {
			ends = append(ends, &p.end)
			demands[k] = p.demand
		}
		if !a.resplit(a.vms[vm].In, ends, demands) {
			delete(ins, dst)
		}
	})
	return ins
}

func (a *Agent) clearFresh() {
	for _, p := range a.outList {
		p.fresh = false
	}
	for _, p := range a.inList {
		p.fresh = false
	}
}

func (e *end) see(rate float64, now time.Duration) {
	e.rate = rate
	if rate > e.peak {
		e.peak = rate
	}
	if rate > 0 {
		e.last = now
	}
}

// allocate runs RA (§5) for every pair whose source is here.
func (a *Agent) allocate(now time.Duration, limits []mech.Limit) []mech.Limit {
	c := &a.cfg.RA
	for _, p := range a.outList {
		in := ra.Input{Now: now}
		in.Floor = p.guarantee()
		in.Weight = a.raWeight(&p.end, in.Floor)
		if o := p.obs; o != nil {
			in.Rate = o.Rate
			in.Demanding = ra.Demanding(o.Rate, o.Limit, o.LimiterBound)
			in.Events = a.det.Congestion(o)
			p.obs = nil // it points into the driver's observation
		}
		if a.silent(p, now) {
			// No word from the destination's host: hold the pair at its
			// guarantee, and start RA from there when it is heard again.
			p.flow = ra.Flow{}
		}
		r := p.flow.Step(c, in)
		if ceil := p.edgeCeiling(in.Floor); r > ceil {
			p.flow.Clamp(ceil)
			r = ceil
		}
		if r != p.limit {
			p.limit = r
			limits = append(limits, mech.Limit{Kind: mech.PairLimit, Pair: p.id, Rate: r})
		}
	}
	return limits
}

// silent says whether the host of a pair's destination has not named the
// pair for longer than PeerTimeout.
func (a *Agent) silent(p *outPair, now time.Duration) bool {
	return !p.local && now-p.heard > a.cfg.PeerTimeout
}

// Silent returns the pairs whose source is here and whose destination's
// host has been silent for longer than PeerTimeout (held at their
// guarantees), sorted.
func (a *Agent) Silent(now time.Duration) []mech.PairID {
	var out []mech.PairID
	for _, p := range a.outList {
		if a.silent(p, now) {
			out = append(out, p.id)
		}
	}
	return out
}

// Foreign returns how many remote guarantees and congestion reports were
// dropped because they did not come from the host of the pair's
// destination.
func (a *Agent) Foreign() int64 { return a.foreign + a.det.Foreign() }

// Failsafe implements mech.Failsafe: every pair whose source is here
// held at its guarantee B (§4), the floor RA never goes below: the
// guarantees of a VM's pairs sum to at most its hose at both ends, so
// with no agent stepping nobody can take another tenant's guarantee.
// A best-effort pair (no guarantee) is held at RA's MinRate, and so is
// every pair from a VM here to another VM of its tenant that is idle
// (not among the pairs GP partitioned the hose for): with no agent to
// see it start, it must not start unlimited. An idle pair whose reverse
// brings traffic here is left as it is: it carries that traffic's
// acknowledgements (which a driver need not even count, when only the
// forward pair is declared), and holding it at MinRate would stall the
// senders' TCP. Idle pairs come after the others, sorted.
func (a *Agent) Failsafe() mech.Actions {
	var act mech.Actions
	for _, p := range a.outList {
		act.Limits = append(act.Limits, mech.Limit{Kind: mech.PairLimit, Pair: p.id, Rate: math.Max(p.guarantee(), a.cfg.RA.MinRate)})
	}
	byTenant := map[string][]string{}
	for _, v := range a.env.VMs {
		byTenant[v.Tenant] = append(byTenant[v.Tenant], v.Name)
	}
	for _, v := range a.env.VMs { // sorted by name, as are a tenant's VMs
		if v.Host != a.env.Host {
			continue
		}
		for _, d := range byTenant[v.Tenant] {
			id := mech.PairID{Src: v.Name, Dst: d}
			if _, active := a.out[id]; active || d == v.Name {
				continue
			}
			if _, acks := a.in[mech.PairID{Src: d, Dst: v.Name}]; acks {
				continue
			}
			act.Limits = append(act.Limits, mech.Limit{Kind: mech.PairLimit, Pair: id, Rate: a.cfg.RA.MinRate})
		}
	}
	return act
}

// bestEffort says whether a pair can have no guarantee: its source VM's
// out-hose or its destination VM's in-hose is zero.
func (a *Agent) bestEffort(p mech.PairID) bool {
	src, ok1 := a.env.VM(p.Src)
	dst, ok2 := a.env.VM(p.Dst)
	return ok1 && ok2 && (src.Out <= 0 || dst.In <= 0)
}

// forget drops the pairs idle for longer than IdleTimeout, removing their
// limiters.
func (a *Agent) forget(now time.Duration, act *mech.Actions) {
	a.outList = prune(a.outList, func(p *outPair) bool {
		if now-p.last <= a.cfg.IdleTimeout {
			return false
		}
		a.forgetHints()
		delete(a.out, p.id)
		act.Limits = append(act.Limits, mech.Limit{Kind: mech.PairLimit, Pair: p.id, Rate: mech.Unlimited})
		return true
	})
	a.inList = prune(a.inList, func(p *inPair) bool {
		if now-p.last <= a.cfg.IdleTimeout {
			return false
		}
		a.forgetHints()
		delete(a.in, p.id)
		return true
	})
}

// prune keeps, in order, the pairs for which drop says false (drop forgets
// the others), and clears the slots it freed.
func prune[P any](list []P, drop func(P) bool) []P {
	keep := list[:0]
	for _, p := range list {
		if !drop(p) {
			keep = append(keep, p)
		}
	}
	clear(list[len(keep):])
	return keep
}

func pairLess(x, y mech.PairID) bool {
	return x.Src < y.Src || x.Src == y.Src && x.Dst < y.Dst
}

func inLess(x, y mech.PairID) bool {
	return x.Dst < y.Dst || x.Dst == y.Dst && x.Src < y.Src
}
