// Package seawall is Seawall-style weighted sharing without guarantees
// (Shieh et al., "Sharing the Data Center Network", NSDI 2011), as
// ElasticSwitch's evaluation uses it as a baseline (Popa et al., SIGCOMM
// 2013, §7.2: "not using Hold-Increase nor Rate-Caution is equivalent to
// applying Seawall's algorithm for rate allocation"; §7.1: "Seawall would
// also perform like NoProtection for all many-to-one settings").
//
// Every host runs, for every VM pair whose source is on it, ElasticSwitch's
// rate allocation (package mech/elasticswitch/ra) with neither
// Hold-Increase nor Rate-Caution and no guarantee: the floor is 0 (ra's
// min_rate keeps the pair probing). Sharing is per source: a source VM's
// weight is its hose guarantee VM.Out divided by weight_unit, split among
// the pairs it sent on in the last period in proportion to their rates
// (Seawall divides an entity's share among its tunnels by their demands),
// so congested links are shared in proportion to the senders' weights,
// whatever their destinations, and short flows to other destinations take
// little weight from a long one. A pair that sent nothing in the period
// keeps the source's whole weight for its next step.
//
// A new pair starts from min_rate and grows convexly, by n·w·A in its
// n-th period, so pairs that start together reach rates in proportion to
// their weights. (Starting from the rate a pair reached before its limiter
// was set would freeze TCP's per-connection split: the concave return to
// the goal after a congestion event preserves rate ratios.)
// Congestion is taken as in ElasticSwitch (ra.Source and ra.Signal,
// parameters "congestion" and "congestion_signal": losses and ECN marks by
// default).
package seawall

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch/ra"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Name of the mechanism.
const Name = "seawall"

// Config is Seawall's configuration.
type Config struct {
	// RA holds the rate-allocation constants; HoldIncrease and RateCaution
	// are off.
	RA ra.Config
	// IdleTimeout is how long a pair may send nothing before it is
	// forgotten (its limiter removed).
	IdleTimeout time.Duration
}

// Defaults returns ElasticSwitch's RA constants (§7) without Hold-Increase
// and Rate-Caution, pairs forgotten after 1 s idle.
func Defaults() Config {
	c := ra.Defaults()
	c.HoldIncrease, c.RateCaution = false, false
	return Config{RA: c, IdleTimeout: time.Second}
}

// ParamNames lists the mechanism's parameters: ra.CoreParams and
// idle_timeout (duration, "1s").
func ParamNames() []string { return append(ra.CoreParams(), "idle_timeout") }

// Parse reads scenario parameters over Defaults; problems are
// *spec.FieldError values, joined.
func Parse(params map[string]any) (Config, error) {
	p := spec.Params(params)
	cfg := Defaults()
	if err := p.Check(ParamNames()...); err != nil {
		return cfg, err
	}
	r := p.Reader()
	r.Add(ra.Parse(p, &cfg.RA, ra.CoreParams()...))
	r.Duration(&cfg.IdleTimeout, "idle_timeout")
	if err := r.Err(); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := []error{c.RA.Validate()}
	if c.IdleTimeout <= 0 {
		errs = append(errs, &spec.FieldError{Path: "mechanism.params.idle_timeout", Msg: fmt.Sprintf("must be positive, got %v", c.IdleTimeout)})
	}
	return errors.Join(errs...)
}

// Mechanism is Seawall with one configuration.
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

// NewAgent implements mech.Mechanism.
func (m *Mechanism) NewAgent(env mech.Env) (mech.Agent, error) {
	return NewAgent(m.cfg, env)
}

type pair struct {
	id    mech.PairID
	flow  ra.Flow
	limit float64 // last set (NaN: none)
	last  time.Duration
	obs   *mech.PairObs
}

// Agent is Seawall on one host. It is not safe for concurrent use.
type Agent struct {
	cfg    Config
	env    mech.Env
	local  map[string]mech.VM
	det    *ra.Detector
	pairs  map[mech.PairID]*pair
	list   []*pair            // sorted by (Src, Dst)
	active map[string]float64 // Σ usage of the pairs sending this period, per source VM
}

// NewAgent returns the agent for env.Host under cfg.
func NewAgent(cfg Config, env mech.Env) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if env.Host == "" {
		return nil, fmt.Errorf("%s: environment names no host", Name)
	}
	a := &Agent{cfg: cfg, env: env, local: map[string]mech.VM{}, det: ra.NewDetector(cfg.RA.Congestion, cfg.RA.Signal),
		pairs: map[mech.PairID]*pair{}, active: map[string]float64{}}
	for _, v := range env.VMs {
		if v.Host == env.Host {
			a.local[v.Name] = v
		}
	}
	return a, nil
}

// usage is a sending pair's share of its source's weight: its rate, at
// least min_rate.
func (a *Agent) usage(rate float64) float64 { return math.Max(rate, a.cfg.RA.MinRate) }

// Period implements mech.Agent: the RA period.
func (a *Agent) Period() time.Duration { return a.cfg.RA.Period }

// Step implements mech.Agent.
func (a *Agent) Step(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	now := obs.Now
	var act mech.Actions
	a.det.Receive(inbox, a.env.HostOf)
	clear(a.active)
	for i := range obs.Egress {
		o := &obs.Egress[i]
		if _, ok := a.local[o.Pair.Src]; !ok {
			continue
		}
		p := a.pairs[o.Pair]
		if p == nil {
			if !(o.Rate > 0) {
				continue
			}
			p = &pair{id: o.Pair, limit: math.NaN(), last: now}
			a.pairs[o.Pair] = p
			a.list = append(a.list, p)
			sort.Slice(a.list, func(i, j int) bool {
				x, y := a.list[i].id, a.list[j].id
				return x.Src < y.Src || x.Src == y.Src && x.Dst < y.Dst
			})
		}
		p.obs = o
		if o.Rate > 0 {
			p.last = now
			a.active[o.Pair.Src] += a.usage(o.Rate)
		}
	}
	act.Messages = a.det.Report(a.env.Host, obs.Ingress, a.env.HostOf)
	c := &a.cfg.RA
	keep := a.list[:0]
	for _, p := range a.list {
		if now-p.last > a.cfg.IdleTimeout {
			delete(a.pairs, p.id)
			act.Limits = append(act.Limits, mech.Limit{Kind: mech.PairLimit, Pair: p.id, Rate: mech.Unlimited})
			continue
		}
		keep = append(keep, p)
		in := ra.Input{Now: now, Weight: ra.Weight(a.local[p.id.Src].Out, c)}
		if o := p.obs; o != nil && o.Rate > 0 {
			in.Weight = ra.Weight(a.local[p.id.Src].Out*a.usage(o.Rate)/a.active[p.id.Src], c)
		}
		if o := p.obs; o != nil {
			in.Rate = o.Rate
			in.Demanding = ra.Demanding(o.Rate, o.Limit, o.LimiterBound)
			in.Events = a.det.Congestion(o)
			p.obs = nil // it points into the driver's observation
		}
		if r := p.flow.Step(c, in); r != p.limit {
			p.limit = r
			act.Limits = append(act.Limits, mech.Limit{Kind: mech.PairLimit, Pair: p.id, Rate: r})
		}
	}
	clear(a.list[len(keep):])
	a.list = keep
	a.det.EndStep()
	return act
}
