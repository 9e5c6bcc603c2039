// Package drive is the one driver core of Bulkhead: whatever drives a
// mechanism — the fluid simulator, the host agent on a real server, the
// emulated testbed's agents — goes through it. It builds the mechanism's
// environment from the declared model (Env, ControllerEnv), steps a
// mech.Agent (Host) or a mech.Controller (Controller), checks what they
// return once for every driver, routes messages, hands model changes over
// at runtime, and reconciles: it keeps the limits and schedulers a
// mechanism wants (mechanisms say a limit only when its value changes)
// and re-applies any that the data path does not hold — a refused write,
// a class someone deleted — until it does.
//
// A driver supplies what is particular to it: the observations, an
// Enforcer that sets limits and schedulers on its data path, and the
// delivery of messages between hosts. Like the mechanisms, this package
// imports no driver.
package drive

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// Enforcer applies a mechanism's settings on one host's data path: virtual
// resources in the simulator, HTB classes through netlink on a server.
type Enforcer interface {
	// SetLimit sets one limiter; Rate mech.Unlimited removes it.
	SetLimit(l mech.Limit) error
	// SetScheduler installs, changes or (Rate Unlimited, no Weights)
	// removes a per-VM scheduler.
	SetScheduler(s mech.Scheduler) error
}

// Verifier is implemented by enforcers that can tell whether the data
// path still holds a limit as it was last set. Host re-applies every
// desired limit that it does not hold.
type Verifier interface {
	HoldsLimit(l mech.Limit) bool
}

// SchedulerVerifier is implemented by enforcers that can tell whether the
// data path still holds a per-VM scheduler as it was last set. Host
// re-applies a desired scheduler that it does not hold.
type SchedulerVerifier interface {
	HoldsScheduler(s mech.Scheduler) bool
}

// HintedVerifier is a Verifier that finds a limit's enforcement point
// faster from a hint it left for it: Host keeps one hint per desired
// limit, -1 until the enforcer sets it.
type HintedVerifier interface {
	Verifier
	// HoldsLimitHint is HoldsLimit(l), given what the enforcer stored
	// at *hint when last asked about l's enforcement point (-1: never);
	// it may store a new hint there. A hint is only a hint: a wrong one
	// must not change the answer.
	HoldsLimitHint(l mech.Limit, hint *int32) bool
}

// HintedEnforcer is an Enforcer that finds a limit's enforcement point
// faster from a hint it left for it, in the same hint Host keeps for a
// HintedVerifier (one per desired limit, -1 until the enforcer sets it).
// Host writes a single limit through it.
type HintedEnforcer interface {
	Enforcer
	// SetLimitHint is SetLimit(l), given what the enforcer stored at
	// *hint when last given l's enforcement point (-1: never); it may
	// store a new hint there. A hint is only a hint: a wrong one must not
	// change what is set.
	SetLimitHint(l mech.Limit, hint *int32) error
}

// BatchEnforcer is implemented by enforcers that write many pair limits
// at once (one round trip to the data path rather than one per limit).
// Host then gives it, every step, the pair limits the mechanism asked
// for and those it re-applies, together.
type BatchEnforcer interface {
	// SetLimits sets pair limits in order, each as SetLimit would, and
	// returns each one's error (errs[i] is ls[i]'s; nil: in force).
	SetLimits(ls []mech.Limit) []error
}

// MaxInbox bounds the messages waiting for a host's next step; later ones
// are dropped (and counted).
const MaxInbox = 4096

// Stats counts what a Host did since it was made.
type Stats struct {
	// Steps of the mechanism.
	Steps int64
	// Writes of limits and schedulers to the data path, Failed those the
	// data path refused (each is retried at the next step).
	Writes, Failed int64
	// Retries are writes of settings the mechanism had already asked for:
	// after a refused write, or because the data path lost them.
	Retries int64
	// Invalid are settings refused by the checks (a NaN rate, a VM not on
	// the host).
	Invalid int64
	// Dropped are messages not queued because the inbox was full; Updates
	// are model changes handed to the mechanism.
	Dropped, Updates int64
}

// Host drives a mechanism's agent on one host. Deliver may be called
// concurrently with everything else; the other methods are called by one
// goroutine.
type Host struct {
	name  string
	mname string
	agent mech.Agent
	env   mech.Env
	local map[string]bool // VMs on this host
	hosts map[string]bool // every host with a VM
	// sentTo[i] is the host the i-th message of a step was last sent to
	// (a host of the environment; "": none)
	sentTo []string
	enf    Enforcer
	henf   HintedEnforcer // enf, if it is one
	per    time.Duration

	// desired state: what the mechanism last asked for, by enforcement
	// point; failed counts the limits whose last write failed; spend
	// marks schedulers whose last write failed
	limits map[limitKey]*desired
	order  []*desired // the desired limits, in no order (reconcile walks them)
	// seen[i] is the desired limit of the i-th limit of the last step's
	// actions (nil: none): a mechanism that says its limits in the same
	// order from step to step finds them here rather than in the map
	seen   []*desired
	bat    batch // a step's batch of pair limits (BatchEnforcer), reused
	failed int
	scheds [2]*mech.Scheduler
	spend  [2]bool

	next time.Duration // when the next step is due (Due)
	gen  int64         // counts the environments (setEnv)

	inMu   sync.Mutex
	inbox  []mech.Message
	maxBox int // 0: unbounded

	steps, writes, refused, retries, invalid, dropped, updates atomic.Int64
}

// desired is a limit the mechanism wants (its enforcement point is
// keyOf(l): set as soon as it is made), the step that last set it, and
// whether its last write failed. It is two cache lines, the limit the
// first: a step reads and writes both.
type desired struct {
	l      mech.Limit
	step   int64
	gen    int64 // Host.gen when its VMs were last checked
	pos    int   // its index in Host.order
	hint   int32 // the enforcer's (HintedVerifier, HintedEnforcer)
	failed bool
	gone   bool // no longer desired (unwant)
	_      [32]byte
}

// want returns the desired limit of point k, made if there is none.
func (h *Host) want(k limitKey) *desired {
	d := h.limits[k]
	if d == nil {
		d = &desired{l: limitOf(k), pos: len(h.order), hint: -1}
		h.limits[k] = d
		h.order = append(h.order, d)
	}
	return d
}

// unwant forgets the desired limit of point k.
func (h *Host) unwant(k limitKey) {
	d := h.limits[k]
	if d == nil {
		return
	}
	last := len(h.order) - 1
	h.order[d.pos] = h.order[last]
	h.order[d.pos].pos = d.pos
	h.order[last] = nil
	h.order = h.order[:last]
	d.gone = true
	delete(h.limits, k)
}

// lookup returns the desired limit of point k (nil: none), trying first
// the one the i-th limit of the last step had.
func (h *Host) lookup(i int, k limitKey) *desired {
	if i < len(h.seen) {
		if d := h.seen[i]; d != nil && !d.gone && keyOf(d.l) == k {
			return d
		}
	}
	return h.limits[k]
}

// knownHost says whether host is a host of the environment, for the i-th
// message of a step: messages go to the same hosts in the same order from
// step to step.
func (h *Host) knownHost(i int, host string) bool {
	if i < len(h.sentTo) && h.sentTo[i] == host && host != "" {
		return true
	}
	if !h.hosts[host] {
		return false
	}
	for len(h.sentTo) <= i {
		h.sentTo = append(h.sentTo, "")
	}
	h.sentTo[i] = host
	return true
}

// remember notes d as the desired limit of the step's i-th limit.
func (h *Host) remember(i int, d *desired) {
	for len(h.seen) <= i {
		h.seen = append(h.seen, nil)
	}
	h.seen[i] = d
}

// limitKey is one enforcement point.
type limitKey struct {
	kind mech.LimitKind
	pair mech.PairID
	vm   string
}

// limitOf is a limit of point k (rate 0).
func limitOf(k limitKey) mech.Limit {
	return mech.Limit{Kind: k.kind, Pair: k.pair, VM: k.vm}
}

func keyOf(l mech.Limit) limitKey {
	if l.Kind == mech.PairLimit {
		return limitKey{kind: l.Kind, pair: l.Pair}
	}
	return limitKey{kind: l.Kind, vm: l.VM}
}

// NewHost makes the mechanism's agent for env.Host and the core that
// drives it over enf.
func NewHost(m mech.Mechanism, env mech.Env, enf Enforcer) (*Host, error) {
	if m == nil || enf == nil {
		return nil, errors.New("drive: host needs a mechanism and an enforcer")
	}
	if env.Host == "" {
		return nil, errors.New("drive: the environment names no host")
	}
	if err := CheckEnv(&env); err != nil {
		return nil, fmt.Errorf("drive: mechanism %s: host %s: %w", m.Name(), env.Host, err)
	}
	a, err := m.NewAgent(env)
	if err != nil {
		return nil, fmt.Errorf("mechanism %s: agent on %s: %w", m.Name(), env.Host, err)
	}
	p := a.Period()
	if p <= 0 {
		return nil, fmt.Errorf("mechanism %s: agent on %s: non-positive period %v", m.Name(), env.Host, p)
	}
	henf, _ := enf.(HintedEnforcer)
	h := &Host{name: env.Host, mname: m.Name(), agent: a, enf: enf, henf: henf, per: p,
		limits: map[limitKey]*desired{}, maxBox: MaxInbox}
	h.setEnv(env)
	return h, nil
}

func (h *Host) setEnv(env mech.Env) {
	h.env = env
	h.gen++
	h.local = map[string]bool{}
	h.hosts = map[string]bool{}
	clear(h.sentTo)
	for _, v := range env.VMs {
		h.hosts[v.Host] = true
		if v.Host == env.Host {
			h.local[v.Name] = true
		}
	}
}

// Name is the host's name.
func (h *Host) Name() string { return h.name }

// Mechanism names the mechanism driven.
func (h *Host) Mechanism() string { return h.mname }

// Period is the mechanism agent's step period.
func (h *Host) Period() time.Duration { return h.per }

// Agent returns the mechanism's agent (for inspection; not to be stepped).
func (h *Host) Agent() mech.Agent { return h.agent }

// Env returns the environment the agent currently has.
func (h *Host) Env() *mech.Env { return &h.env }

func (h *Host) isKnown(vm string) bool {
	_, ok := h.env.VM(vm) // VMs sorted by name (CheckEnv)
	return ok
}

// Local says whether a VM is on this host.
func (h *Host) Local(vm string) bool { return h.local[vm] }

// Due says whether a step is due at now (driver time); Step moves the
// next due time one period on.
func (h *Host) Due(now time.Duration) bool { return now >= h.next }

// Stats returns the counts so far.
func (h *Host) Stats() Stats {
	return Stats{Steps: h.steps.Load(), Writes: h.writes.Load(), Failed: h.refused.Load(), Retries: h.retries.Load(),
		Invalid: h.invalid.Load(), Dropped: h.dropped.Load(), Updates: h.updates.Load()}
}

// BoundInbox sets how many messages may wait for a step (0: no bound; the
// simulator, whose messages come from mechanisms only, does not bound
// them). The default is MaxInbox.
func (h *Host) BoundInbox(n int) {
	h.inMu.Lock()
	h.maxBox = n
	h.inMu.Unlock()
}

// Deliver queues a message for the next step; false when the inbox is
// full (the message is dropped and counted).
func (h *Host) Deliver(m mech.Message) bool {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	if h.maxBox > 0 && len(h.inbox) >= h.maxBox {
		h.dropped.Add(1)
		return false
	}
	h.inbox = append(h.inbox, m)
	return true
}

// Step runs one step of the mechanism on obs and the messages delivered
// since the previous step, applies its settings (schedulers first, then
// limits), re-applies desired settings the data path does not hold, and
// returns the messages to send, From set to this host, in the order the
// mechanism gave them. The error joins every setting refused by the checks
// or by the data path; the step's other settings are applied regardless,
// and refused writes are retried at the next step.
func (h *Host) Step(obs *mech.HostObs) ([]mech.Message, error) {
	h.inMu.Lock()
	inbox := h.inbox
	h.inbox = nil
	h.inMu.Unlock()
	act := h.agent.Step(obs, inbox)
	h.next = obs.Now + h.per
	step := h.steps.Add(1)
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var schedTouched [2]bool
	for _, s := range act.Schedulers {
		if err := CheckScheduler(&h.env, s); err != nil {
			h.invalid.Add(1)
			keep(h.errf("%w", err))
			continue
		}
		d := s.Dir
		s.Weights = cloneWeights(s.Weights)
		h.scheds[d] = &s
		schedTouched[d] = true
		keep(h.writeScheduler(d, false))
	}
	be, _ := h.enf.(BatchEnforcer)
	b := &h.bat
	for i, l := range act.Limits {
		k := keyOf(l)
		d := h.lookup(i, k)
		// A point already desired under this environment passed the
		// checks of its VMs: only the rate is new.
		var err error
		if d != nil && d.gen == h.gen {
			err = checkRate(l)
		} else {
			err = checkLimit(l, h.Local, h.isKnown)
		}
		if err != nil {
			h.invalid.Add(1)
			keep(h.errf("%w", err))
			continue
		}
		if be != nil && b.has(k) {
			// the same point twice in a step: written in order
			keep(h.flush(be, b))
			d = h.limits[k]
		}
		if d == nil {
			d = h.want(k)
		}
		h.remember(i, d)
		d.l, d.step, d.gen = l, step, h.gen
		if be != nil && l.Kind == mech.PairLimit {
			b.add(k, d, false)
			continue
		}
		keep(h.writeDesired(k, d, false))
	}
	keep(h.reconcile(step, schedTouched, be, b))
	if be != nil {
		keep(h.flush(be, b))
	}
	for i := range act.Messages {
		m := &act.Messages[i]
		m.From = h.name
		if !h.knownHost(i, m.To) {
			errs = append(errs, h.errf("sent a message to unknown host %q", m.To))
		}
	}
	return act.Messages, errors.Join(errs...)
}

// Failsafe applies the settings the mechanism's agent names as safe to
// leave in force with no agent stepping (mech.Failsafe): what a host
// agent does last when it stops. An agent that is not a Failsafe leaves
// the settings in force as they are. It returns how many settings it
// wrote; the error joins those refused (nothing is retried: no step
// follows).
func (h *Host) Failsafe() (int, error) {
	fs, ok := h.agent.(mech.Failsafe)
	if !ok {
		return 0, nil
	}
	act := fs.Failsafe()
	var errs []error
	n := 0
	for _, s := range act.Schedulers {
		if err := CheckScheduler(&h.env, s); err != nil {
			h.invalid.Add(1)
			errs = append(errs, h.errf("failsafe: %w", err))
			continue
		}
		s.Weights = cloneWeights(s.Weights)
		h.scheds[s.Dir] = &s
		n++
		if err := h.writeScheduler(s.Dir, false); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range act.Limits {
		if err := checkLimit(l, h.Local, h.isKnown); err != nil {
			h.invalid.Add(1)
			errs = append(errs, h.errf("failsafe: %w", err))
			continue
		}
		k := keyOf(l)
		d := h.want(k)
		d.l = l
		n++
		if err := h.writeLimit(k, false); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

func (h *Host) errf(format string, args ...any) error {
	return fmt.Errorf("mechanism %s: agent on %s: "+format, append([]any{h.mname, h.name}, args...)...)
}

// batch is the pair limits of a step a BatchEnforcer writes together.
type batch struct {
	keys   []limitKey
	ds     []*desired
	retry  []bool
	limits []mech.Limit
	in     map[limitKey]bool
}

func (b *batch) has(k limitKey) bool { return b.in[k] }

func (b *batch) add(k limitKey, d *desired, retry bool) {
	if b.in == nil {
		b.in = map[limitKey]bool{}
	}
	b.in[k] = true
	b.keys, b.ds, b.retry, b.limits = append(b.keys, k), append(b.ds, d), append(b.retry, retry), append(b.limits, d.l)
}

// flush writes the batch's limits in one call and accounts for each as
// writeLimit does; the batch is then empty.
func (h *Host) flush(be BatchEnforcer, b *batch) error {
	if len(b.limits) == 0 {
		return nil
	}
	errs := be.SetLimits(b.limits)
	var out []error
	for i, k := range b.keys {
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = errors.New("no answer from the enforcer")
		}
		if err := h.wrote(k, b.ds[i], b.retry[i], err); err != nil {
			out = append(out, err)
		}
	}
	b.reset()
	return errors.Join(out...)
}

// reset empties the batch, keeping its storage for the next one.
func (b *batch) reset() {
	clear(b.keys)
	clear(b.ds)
	clear(b.limits)
	clear(b.in)
	b.keys, b.ds, b.retry, b.limits = b.keys[:0], b.ds[:0], b.retry[:0], b.limits[:0]
}

// writeLimit writes the desired limit k; an Unlimited one that reached the
// data path is no longer desired state.
func (h *Host) writeLimit(k limitKey, retry bool) error {
	return h.writeDesired(k, h.limits[k], retry)
}

// writeDesired is writeLimit of k's desired limit d.
func (h *Host) writeDesired(k limitKey, d *desired, retry bool) error {
	if h.henf != nil {
		return h.wrote(k, d, retry, h.henf.SetLimitHint(d.l, &d.hint))
	}
	return h.wrote(k, d, retry, h.enf.SetLimit(d.l))
}

// wrote accounts for the write of desired limit k (d), whose error is
// err.
func (h *Host) wrote(k limitKey, d *desired, retry bool, err error) error {
	h.tally(retry, err)
	h.markFailed(d, err != nil)
	if err != nil {
		return h.errf("set %s: %w", describe(d.l, retry), err)
	}
	if math.IsInf(d.l.Rate, 1) {
		h.unwant(k)
	}
	return nil
}

// markFailed records whether d's last write failed.
func (h *Host) markFailed(d *desired, failed bool) {
	if d.failed != failed {
		d.failed = failed
		if failed {
			h.failed++
		} else {
			h.failed--
		}
	}
}

func (h *Host) writeScheduler(d mech.Direction, retry bool) error {
	s := h.scheds[d]
	err := h.enf.SetScheduler(*s)
	h.tally(retry, err)
	h.spend[d] = err != nil
	if err != nil {
		what := "egress scheduler"
		if d == mech.Ingress {
			what = "ingress scheduler"
		}
		if retry {
			what += " (retry)"
		}
		return h.errf("set %s: %w", what, err)
	}
	if math.IsInf(s.Rate, 1) && len(s.Weights) == 0 {
		h.scheds[d] = nil
	}
	return nil
}

// describe names a limit for errors.
func describe(l mech.Limit, retry bool) string {
	var s string
	switch l.Kind {
	case mech.PairLimit:
		s = "pair " + l.Pair.Src + "->" + l.Pair.Dst
	case mech.VMEgress:
		s = "egress of VM " + l.VM
	default:
		s = "ingress of VM " + l.VM
	}
	s += fmt.Sprintf(" to %g bit/s", l.Rate)
	if retry {
		s += " (retry)"
	}
	return s
}

// tally counts one write.
func (h *Host) tally(retry bool, err error) {
	h.writes.Add(1)
	if retry {
		h.retries.Add(1)
	}
	if err != nil {
		h.refused.Add(1)
	}
}

// reconcile re-applies the desired settings not written in this step that
// the data path does not hold: those whose last write failed and, with a
// Verifier, those it reports lost. Schedulers go first (VM limits may
// live in them), limits in a fixed order. With a BatchEnforcer (be), the
// pair limits join the step's batch b.
func (h *Host) reconcile(step int64, schedTouched [2]bool, be BatchEnforcer, b *batch) error {
	var errs []error
	sver, _ := h.enf.(SchedulerVerifier)
	for d, s := range h.scheds {
		if s == nil || schedTouched[d] {
			continue
		}
		if h.spend[d] || (sver != nil && !sver.HoldsScheduler(*s)) {
			errs = append(errs, h.writeScheduler(mech.Direction(d), true))
		}
	}
	ver, _ := h.enf.(Verifier)
	if h.failed == 0 && ver == nil {
		return errors.Join(errs...)
	}
	hver, _ := h.enf.(HintedVerifier)
	var redo []limitKey
	for _, d := range h.order {
		if d.step == step {
			continue
		}
		switch {
		case d.failed:
		case hver != nil:
			if hver.HoldsLimitHint(d.l, &d.hint) {
				continue
			}
		case ver == nil || ver.HoldsLimit(d.l):
			continue
		}
		redo = append(redo, keyOf(d.l))
	}
	slices.SortFunc(redo, compareKeys)
	for _, k := range redo {
		if be != nil && k.kind == mech.PairLimit {
			b.add(k, h.limits[k], true)
			continue
		}
		errs = append(errs, h.writeLimit(k, true))
	}
	return errors.Join(errs...)
}

func compareKeys(a, b limitKey) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.pair.Src, b.pair.Src),
		cmp.Compare(a.pair.Dst, b.pair.Dst), cmp.Compare(a.vm, b.vm))
}

// Desired returns the limits the mechanism currently wants in force,
// sorted by enforcement point (Unlimited ones that reached the data path
// are not listed).
func (h *Host) Desired() []mech.Limit {
	keys := make([]limitKey, 0, len(h.limits))
	for k := range h.limits {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	out := make([]mech.Limit, len(keys))
	for i, k := range keys {
		out[i] = h.limits[k].l
	}
	return out
}

// Pending returns how many desired settings the data path has refused
// and not yet taken.
func (h *Host) Pending() int {
	n := h.failed
	for _, p := range h.spend {
		if p {
			n++
		}
	}
	return n
}

// Update hands a new environment to the mechanism's agent between two
// steps (a tenant or VM added or removed, a guarantee changed). Agents
// that cannot take one (they do not implement mech.EnvUpdater) are
// refused with ErrStaticEnv and keep the old environment. Limits of VMs
// that left the host or the environment are removed from the data path,
// whatever the mechanism does.
func (h *Host) Update(env mech.Env) error {
	if env.Host != h.name {
		return fmt.Errorf("drive: update for host %q given to the agent on %s", env.Host, h.name)
	}
	if err := CheckEnv(&env); err != nil {
		return fmt.Errorf("drive: mechanism %s: host %s: %w", h.mname, h.name, err)
	}
	u, ok := h.agent.(mech.EnvUpdater)
	if !ok {
		return fmt.Errorf("%w: mechanism %s (restart its agents with the new model)", ErrStaticEnv, h.mname)
	}
	if err := u.UpdateEnv(env); err != nil {
		return fmt.Errorf("mechanism %s: agent on %s: update: %w", h.mname, h.name, err)
	}
	h.setEnv(env)
	h.updates.Add(1)
	// Limits that the new environment's checks refuse: their VMs left.
	var gone []limitKey
	for k, d := range h.limits {
		if checkLimit(d.l, h.Local, h.isKnown) != nil {
			gone = append(gone, k)
		}
	}
	slices.SortFunc(gone, compareKeys)
	var errs []error
	for _, k := range gone {
		// Removed once: a VM that left is no longer the agent's to
		// enforce, so a refused removal is reported, not retried (the
		// data path may already have let go of the VM).
		d := h.limits[k]
		d.l.Rate = mech.Unlimited
		if err := h.writeLimit(k, false); err != nil {
			errs = append(errs, err)
		}
		h.markFailed(d, false)
		h.unwant(k)
	}
	// Desired schedulers lose the weights of VMs that left.
	for _, s := range h.scheds {
		if s == nil {
			continue
		}
		for vm := range s.Weights {
			if !h.local[vm] {
				delete(s.Weights, vm)
			}
		}
	}
	return errors.Join(errs...)
}

// ErrStaticEnv is returned by Update for mechanisms whose agents cannot
// take a new environment at runtime.
var ErrStaticEnv = errors.New("this mechanism's agents cannot change tenants at runtime")

func cloneWeights(w map[string]float64) map[string]float64 {
	if w == nil {
		return nil
	}
	out := make(map[string]float64, len(w))
	for k, v := range w {
		out[k] = v
	}
	return out
}
