// Package drx is the Distributed Resource Exchange (Ranadive, Gavrilovska,
// Schwan, "Distributed Resource Exchange: Virtualized Resource Management
// for SR-IOV InfiniBand Clusters", IEEE Cluster 2013): congestion pricing
// in a resource currency, Resos, for VM ensembles (VMEs — a tenant's VMs),
// with caps on the VMs of the VMEs that cause the hurt.
//
// Every host runs a host agent (HA, Agent). VMEs receive Resos every epoch
// (60 s), split equally among their VMs; every interval (1 s) the HA
// charges each local VM for the I/O it did (sent + received, in MTUs) at
// its VME's current price (Resos/MTU). A tenant with an SLA (the scenario's
// tenants[].sla, a tolerated degradation such as 0.15) is watched: its
// performance degradation PD is 1 − (its VMs' I/O rate ÷ what they demand)
// (§IV-B: "the percentage change in the CQEs or I/O bytes"; see
// docs/drx.md). When PD exceeds the SLA, the VMEs of the DCCR set (eq. 1:
// the other VMEs with a VM on the same host as a degraded VM) have their
// price raised (§V):
//
//	NP_i = OP_i + (PD_x · β_P,i · α_i) · OP_i
//	Equal-Blame: β_P,i = 1 / N(DCCR_x)     Hurt-Based: β_P,i = IO_i / Σ_k IO_k
//
// and the HAs turn a price change into a new cap for each of the VME's VMs:
//
//	NC = OC − OC/100 · ((NP − OP)/OP · 100 · β_C),  β_C = EL_h / RL_i^j
//
// (EL_h the percentage of the epoch left, RL the percentage of the VM's
// Resos left). The paper's actuator is a CPU cap; in the simulator a cap
// of c% limits the VM's I/O to c% of what its applications demand (a
// mech.VMEgress limit, and optionally mech.VMIngress): a CPU cap slows the
// application, hence the I/O it issues, in proportion (§IV-C, [25]).
// Resos act through β_C only: a VM spending faster than the epoch passes
// (RL < EL) is capped harder on a price rise, one spent out goes to the
// floor; without a price change nothing is capped.
//
// The CPU-cap-only baselines of §VI-B have no prices: CC lowers every
// interfering VM's cap by 5 points per violation, PC by 5 points times its
// VME's I/O ratio, both down to 25%.
//
// Scopes: Local — each HA watches its own VMs and changes prices and caps
// of its own VMs only (the HA that reports the congestion); Distributed — a
// platform manager (PM, Controller, a mech.Central controller) watches every
// SLA VME with a global view (the ensemble managers' reports), computes the
// DCCR set over all hosts of the degraded VMs, and sends each VME's new
// price (or cap step) to every HA hosting one of its VMs, which applies it
// to all of them.
//
// Registered names: "drx" (parameters policy and scope) and one name per
// variant, drx-<policy>-<scope> (drx-eb-dist, drx-hb-local, drx-cc-dist,
// ...). Parameters are listed at Parse; docs/drx.md has the model and the
// assumptions where the paper is silent.
package drx

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Name is the mechanism with policy and scope as parameters.
const Name = "drx"

// MTU is the unit Resos prices are quoted in (Resos/MTU, Fig. 5): the
// InfiniBand MTU of 4096 bytes. Only ratios of Resos matter to the
// policies, so its value changes no decision.
const MTU = 4096

// Config is DRX's configuration.
type Config struct {
	// Policy is PolicyEB, PolicyHB, PolicyCC or PolicyPC.
	Policy string
	// Scope is ScopeDist or ScopeLocal.
	Scope string
	// Epoch is the Resos allocation period (§IV-A: 60 s).
	Epoch time.Duration
	// Interval is the charging and control interval (§IV-A: 1 s).
	Interval time.Duration
	// Alpha is α_i, every VME's weight or priority in the pricing
	// function, in (0, 1] (§IV-B; the paper's experiments do not give
	// one: 1).
	Alpha float64
	// BasePrice is every VME's price at the start (Resos/MTU; Fig. 5
	// starts at 1).
	BasePrice float64
	// Link is every host's access link rate (bits/s each way), used to
	// size the default Resos allocation (QDR InfiniBand: 32 Gbps of data).
	Link float64
	// Resos is each VM's allocation per epoch; 0 derives it: at the base
	// price, the VM's equal share of all hosts' links (both directions)
	// over the epoch. A VME's allocation is Resos × its VM count, split
	// equally among its VMs (§III).
	Resos float64
	// CapStep is CC's cap decrease per violation, in points (§VI-B: 5);
	// PC scales it by the VME's I/O ratio.
	CapStep float64
	// MinCap is the cap floor in percent (§VI-B: CC "upto 25%"; the same
	// floor bounds every policy).
	MinCap float64
	// CapIngress also limits a capped VM's ingress at its host (by default
	// a cap limits what the VM sends: a CPU-capped VM issues less I/O, but
	// one-sided RDMA into it needs none of its CPU).
	CapIngress bool
}

// Defaults returns the paper's parameters: Equal-Blame, distributed, 60 s
// epochs, 1 s intervals, α = 1, base price 1, 32 Gbps links, derived
// Resos, CC steps of 5 points, a 25% floor, egress caps.
func Defaults() Config {
	return Config{
		Policy:    PolicyEB,
		Scope:     ScopeDist,
		Epoch:     60 * time.Second,
		Interval:  time.Second,
		Alpha:     1,
		BasePrice: 1,
		Link:      32e9,
		CapStep:   5,
		MinCap:    25,
	}
}

// ParamNames lists the parameters of the "drx" name (see Parse).
func ParamNames() []string {
	return []string{"policy", "scope", "epoch", "interval", "alpha", "base_price", "link", "resos", "cap_step", "min_cap", "cap_ingress"}
}

// Parse reads scenario parameters (mechanism.params) over Defaults.
// Problems are *spec.FieldError values, joined. The parameters are:
//
//	policy       "eb" (Equal-Blame, default), "hb" (Hurt-Based),
//	             "cc" (CPU-cap-only) or "pc" (proportional capping)
//	scope        "dist" (platform manager, default) or "local" (host agents only)
//	epoch        Resos allocation period (duration, "60s")
//	interval     charging and control interval (duration, "1s"), ≤ epoch
//	alpha        VME priority α in (0, 1] (1)
//	base_price   starting price, Resos/MTU (> 0, 1)
//	link         host access link rate for the default Resos (rate, "32Gbps")
//	resos        Resos per VM per epoch (≥ 0; 0 derives the fair share)
//	cap_step     CC/PC cap decrease per violation, points in (0, 100) (5)
//	min_cap      cap floor, percent in (0, 100] (25)
//	cap_ingress  also cap the VM's ingress (false)
func Parse(params map[string]any) (Config, error) {
	p := spec.Params(params)
	cfg := Defaults()
	if err := p.Check(ParamNames()...); err != nil {
		return cfg, err
	}
	var errs []error
	get := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	cfg.Policy, err = p.String("policy", cfg.Policy)
	get(err)
	cfg.Scope, err = p.String("scope", cfg.Scope)
	get(err)
	cfg.Epoch, err = p.Duration("epoch", cfg.Epoch)
	get(err)
	cfg.Interval, err = p.Duration("interval", cfg.Interval)
	get(err)
	cfg.Alpha, err = p.Float("alpha", cfg.Alpha)
	get(err)
	cfg.BasePrice, err = p.Float("base_price", cfg.BasePrice)
	get(err)
	cfg.Link, err = p.Rate("link", cfg.Link)
	get(err)
	cfg.Resos, err = p.Float("resos", cfg.Resos)
	get(err)
	cfg.CapStep, err = p.Float("cap_step", cfg.CapStep)
	get(err)
	cfg.MinCap, err = p.Float("min_cap", cfg.MinCap)
	get(err)
	cfg.CapIngress, err = p.Bool("cap_ingress", cfg.CapIngress)
	get(err)
	if len(errs) > 0 {
		return cfg, errors.Join(errs...)
	}
	return cfg, cfg.Validate()
}

// Validate checks the configuration; problems are *spec.FieldError values
// named after the parameters, joined.
func (c *Config) Validate() error {
	var pe spec.ParamErrors
	bad := pe.Bad
	switch c.Policy {
	case PolicyEB, PolicyHB, PolicyCC, PolicyPC:
	default:
		bad("policy", "unknown policy %q (use %s, %s, %s or %s)", c.Policy, PolicyEB, PolicyHB, PolicyCC, PolicyPC)
	}
	if c.Scope != ScopeDist && c.Scope != ScopeLocal {
		bad("scope", "unknown scope %q (use %s or %s)", c.Scope, ScopeDist, ScopeLocal)
	}
	if c.Epoch <= 0 {
		bad("epoch", "must be positive, got %v", c.Epoch)
	}
	if c.Interval <= 0 || (c.Epoch > 0 && c.Interval > c.Epoch) {
		bad("interval", "must be positive and at most epoch (%v), got %v", c.Epoch, c.Interval)
	}
	if !(c.Alpha > 0 && c.Alpha <= 1) {
		bad("alpha", "must be in (0, 1], got %g", c.Alpha)
	}
	if !(c.BasePrice > 0) || math.IsInf(c.BasePrice, 0) {
		bad("base_price", "must be a positive finite number, got %g", c.BasePrice)
	}
	if !(c.Link > 0) || math.IsInf(c.Link, 0) {
		bad("link", "must be a positive finite rate, got %g", c.Link)
	}
	if !(c.Resos >= 0) || math.IsInf(c.Resos, 0) {
		bad("resos", "must be a non-negative finite number (0: derived), got %g", c.Resos)
	}
	if !(c.CapStep > 0 && c.CapStep < 100) {
		bad("cap_step", "must be in (0, 100) points, got %g", c.CapStep)
	}
	if !(c.MinCap > 0 && c.MinCap <= 100) {
		bad("min_cap", "must be in (0, 100] percent, got %g", c.MinCap)
	}
	return pe.Err()
}

// Priced reports whether the policy sets prices (EB, HB) rather than caps
// only (CC, PC).
func (c *Config) Priced() bool { return c.Policy == PolicyEB || c.Policy == PolicyHB }

// VariantName is the registered name of a policy and scope, such as
// "drx-eb-dist".
func VariantName(policy, scope string) string { return Name + "-" + policy + "-" + scope }

// Variants lists the registered variant names: every policy × scope.
func Variants() []string {
	var n []string
	for _, p := range []string{PolicyEB, PolicyHB, PolicyCC, PolicyPC} {
		for _, s := range []string{ScopeLocal, ScopeDist} {
			n = append(n, VariantName(p, s))
		}
	}
	return n
}

// Options are what a mechanism built in code may add to its configuration.
type Options struct {
	// Name overrides the mechanism's name (default Name, or the variant's).
	Name string
	// Recorder, if set, receives prices, caps and degradations as they
	// change (for plots; Fig. 5).
	Recorder *Recorder
}

// New parses params (see Parse) and returns the mechanism: a mech.Central
// for the distributed scope, a plain mech.Mechanism for the local one.
func New(params map[string]any) (mech.Mechanism, error) {
	cfg, err := Parse(params)
	if err != nil {
		return nil, err
	}
	return NewWithConfig(cfg, Options{})
}

// NewVariant returns the constructor of a registered variant: policy and
// scope are fixed by the name and may not be given as parameters.
func NewVariant(policy, scope string) func(map[string]any) (mech.Mechanism, error) {
	return func(params map[string]any) (mech.Mechanism, error) {
		var errs []error
		for _, k := range []string{"policy", "scope"} {
			if _, ok := params[k]; ok {
				errs = append(errs, &spec.FieldError{Path: "mechanism.params." + k,
					Msg: fmt.Sprintf("set by the mechanism's name %s (use %q to choose it)", VariantName(policy, scope), Name)})
			}
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		p := map[string]any{"policy": policy, "scope": scope}
		for k, v := range params {
			p[k] = v
		}
		cfg, err := Parse(p)
		if err != nil {
			return nil, err
		}
		return NewWithConfig(cfg, Options{Name: VariantName(policy, scope)})
	}
}

// NewWithConfig returns the mechanism for a configuration built in code.
func NewWithConfig(cfg Config, opts Options) (mech.Mechanism, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Name == "" {
		opts.Name = Name
	}
	m := &Mechanism{cfg: cfg, opts: opts}
	if cfg.Scope == ScopeDist {
		return &Distributed{Mechanism: m}, nil
	}
	return m, nil
}

// Mechanism is DRX with its host agents only (the local scope).
type Mechanism struct {
	cfg  Config
	opts Options
}

// Name implements mech.Mechanism.
func (m *Mechanism) Name() string { return m.opts.Name }

// Config returns the configuration.
func (m *Mechanism) Config() Config { return m.cfg }

// NewAgent implements mech.Mechanism.
func (m *Mechanism) NewAgent(env mech.Env) (mech.Agent, error) {
	return NewAgent(m.cfg, env, m.opts.Recorder)
}

// Distributed is DRX with a platform manager (mech.Central).
type Distributed struct {
	*Mechanism
}

// NewController implements mech.Central: the platform manager.
func (d *Distributed) NewController(env mech.ControllerEnv) (mech.Controller, error) {
	return NewController(d.cfg, env, d.opts.Recorder)
}

// resosPerVM is each VM's Resos per epoch: cfg.Resos, or the fair share at
// the base price of all hosts' links (both directions) over the epoch.
func resosPerVM(cfg Config, vms []mech.VM) float64 {
	if cfg.Resos > 0 {
		return cfg.Resos
	}
	hosts := map[string]bool{}
	for _, v := range vms {
		hosts[v.Host] = true
	}
	if len(vms) == 0 {
		return 0
	}
	bytes := 2 * cfg.Link / 8 * float64(len(hosts)) * cfg.Epoch.Seconds() / float64(len(vms))
	return bytes / MTU * cfg.BasePrice
}

// dccr is eq. (1): the VMEs other than victim with a VM on one of hosts,
// sorted.
func dccr(victim string, hosts map[string]bool, vms []mech.VM) []string {
	set := map[string]bool{}
	for _, v := range vms {
		if v.Tenant != victim && hosts[v.Host] {
			set[v.Tenant] = true
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
