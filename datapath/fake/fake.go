// Package fake is an in-memory data path (datapath.Host) for tests of a
// host agent without root: counters the test programs, a record of the
// limits and schedulers set, and faults on demand — writes refused, reads
// failed, classes or trees lost or pinned at other rates behind the
// agent's back, VMs it cannot enforce. Where it matters to the agent it
// behaves like datapath/linux: classes read the rates a server holds
// (datapath.Held), VM limits outlive a removed scheduler.
package fake

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sync"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// ErrRefused is the error of a write the fake was told to refuse.
var ErrRefused = errors.New("fake data path: write refused")

// ErrRead is the error of a read the fake was told to fail.
var ErrRead = errors.New("fake data path: read failed")

// Options say what the fake server has.
type Options struct {
	// Limiters: every VM attached has a pair limiter.
	Limiters bool
	// Schedulers: the server has per-VM schedulers in both directions.
	Schedulers bool
	// Loss: the server has a loss counter that sees losses on LossSide.
	Loss     bool
	LossSide mech.LossSide
	// VMs, if set, are the only VMs the server can enforce (as
	// datapath/linux's configured VMs): attaching another fails.
	VMs []string
}

// Host is an in-memory server data path. Its methods are safe for
// concurrent use.
type Host struct {
	opt Options

	mu       sync.Mutex
	vms      map[string]datapath.VM    // attached
	tx       map[datapath.Pair]*class  // pair limiters, at the source VM
	pinned   map[datapath.Pair]float64 // pair classes someone else keeps at a rate
	rx       map[datapath.Pair]*class  // receive counters, at the destination VM
	devs     map[string]datapath.DevCounters
	lost     map[datapath.Pair]uint64
	sched    [2]*Scheduler
	refuse   int // writes still to refuse
	pass     int // writes to let through before those refused
	failRead int // reads still to fail
	writes   int
	batches  int
	closed   bool
}

type class struct {
	c    datapath.Counters
	rate float64 // bits/s; +Inf: unlimited
}

var _ datapath.Host = (*Host)(nil)

// New returns an empty fake server.
func New(o Options) *Host {
	h := &Host{opt: o, vms: map[string]datapath.VM{}, tx: map[datapath.Pair]*class{}, rx: map[datapath.Pair]*class{},
		devs: map[string]datapath.DevCounters{}, lost: map[datapath.Pair]uint64{}, pinned: map[datapath.Pair]float64{}}
	if o.Schedulers {
		for d := range h.sched {
			h.sched[d] = &Scheduler{h: h, dir: mech.Direction(d), vms: map[string]netip.Addr{}, limits: map[string]float64{},
				counters: map[string]datapath.Counters{}, arrived: map[string]uint64{}}
		}
	}
	return h
}

// RefuseWrites makes the next n writes (pair rates, pair removals,
// scheduler settings, VM limits) fail with ErrRefused.
func (h *Host) RefuseWrites(n int) {
	h.mu.Lock()
	h.refuse = n
	h.mu.Unlock()
}

// RefuseWritesAfter lets the next skip writes through and makes the n
// after them fail with ErrRefused (to refuse writes in the middle of a
// batch).
func (h *Host) RefuseWritesAfter(skip, n int) {
	h.mu.Lock()
	h.pass, h.refuse = skip, n
	h.mu.Unlock()
}

// FailReads makes the next n reads of counters fail with ErrRead.
func (h *Host) FailReads(n int) {
	h.mu.Lock()
	h.failRead = n
	h.mu.Unlock()
}

// Writes returns the writes accepted so far.
func (h *Host) Writes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes
}

// Batches returns how many times SetPairRates was called.
func (h *Host) Batches() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.batches
}

var _ datapath.RateBatcher = (*Host)(nil)

// SetPairRates implements datapath.RateBatcher: the pairs' rates in
// order, each as its limiter's SetPairRate (each write counts against
// RefuseWrites, so a batch can be refused in part).
func (h *Host) SetPairRates(ops []datapath.PairRate) []error {
	h.mu.Lock()
	h.batches++
	h.mu.Unlock()
	errs := make([]error, len(ops))
	for i, op := range ops {
		if op.TX == nil {
			errs[i] = fmt.Errorf("fake data path: pair %s: no limiter", op.Pair)
			continue
		}
		errs[i] = op.TX.SetPairRate(op.Pair, op.Bps)
	}
	return errs
}

// write says whether a write goes through (h.mu held).
func (h *Host) write() error {
	if h.pass > 0 {
		h.pass--
	} else if h.refuse > 0 {
		h.refuse--
		return ErrRefused
	}
	h.writes++
	return nil
}

// read says whether a read goes through (h.mu held).
func (h *Host) read() error {
	if h.failRead > 0 {
		h.failRead--
		return ErrRead
	}
	return nil
}

// Attach implements datapath.Host.
func (h *Host) Attach(vm datapath.VM) (datapath.VMPath, error) {
	if !vm.Addr.IsValid() {
		return datapath.VMPath{}, fmt.Errorf("fake data path: VM %s without an address", vm.Name)
	}
	if h.opt.VMs != nil && !slices.Contains(h.opt.VMs, vm.Name) {
		return datapath.VMPath{}, fmt.Errorf("fake data path: VM %s is not one the server can enforce", vm.Name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vms[vm.Name] = vm
	p := datapath.VMPath{RX: &receiver{h: h, vm: vm.Addr}}
	if h.opt.Limiters {
		p.TX = &limiter{h: h, vm: vm.Addr}
	}
	return p, nil
}

// Detach implements datapath.Host: the VM's pair limiters are removed.
func (h *Host) Detach(vm string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.vms[vm]
	if !ok {
		return nil
	}
	delete(h.vms, vm)
	for p := range h.tx {
		if p.Src == v.Addr {
			delete(h.tx, p)
		}
	}
	return nil
}

// Attached lists the VMs attached, sorted.
func (h *Host) Attached() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.vms))
}

// VM returns an attached VM as the data path knows it.
func (h *Host) VM(name string) (datapath.VM, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.vms[name]
	return v, ok
}

// Devices implements datapath.Host.
func (h *Host) Devices() (map[string]datapath.DevCounters, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.read(); err != nil {
		return nil, err
	}
	return maps.Clone(h.devs), nil
}

// Scheduler implements datapath.Host.
func (h *Host) Scheduler(dir mech.Direction) datapath.Scheduler {
	if dir != mech.Egress && dir != mech.Ingress || h.sched[dir] == nil {
		return nil
	}
	return h.sched[dir]
}

// Sched returns the fake scheduler of a direction (nil: none).
func (h *Host) Sched(dir mech.Direction) *Scheduler { return h.sched[dir] }

// Loss implements datapath.Host.
func (h *Host) Loss() datapath.LossCounter {
	if !h.opt.Loss {
		return nil
	}
	return loss{h}
}

// Close implements datapath.Host.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	return nil
}

// Closed says whether Close was called.
func (h *Host) Closed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// Send sets the traffic counters of a pair at its source (bytes,
// packets, drops, overlimits, backlog; the rates are the limit's); a pair
// without a limiter gets an unlimited one, as a server makes them for
// declared pairs.
func (h *Host) Send(p datapath.Pair, c datapath.Counters) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.tx[p]
	if k == nil {
		k = &class{rate: math.Inf(1)}
		h.tx[p] = k
	}
	k.c = c
}

// Receive sets the bytes delivered of a pair into its destination VM.
func (h *Host) Receive(p datapath.Pair, bytes uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.rx[p]
	if k == nil {
		k = &class{rate: math.Inf(1)}
		h.rx[p] = k
	}
	k.c.Bytes = bytes
}

// Device sets a device's counters (for a VM's device: Rx what the VM
// sent, Tx what it received).
func (h *Host) Device(name string, c datapath.DevCounters) {
	h.mu.Lock()
	h.devs[name] = c
	h.mu.Unlock()
}

// Lose adds n lost packets to a pair's count.
func (h *Host) Lose(p datapath.Pair, n uint64) {
	h.mu.Lock()
	h.lost[p] += n
	h.mu.Unlock()
}

// Limit returns the rate of a pair's limiter and whether it has one.
func (h *Host) Limit(p datapath.Pair) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k, ok := h.tx[p]
	if !ok {
		return 0, false
	}
	return k.rate, true
}

// Limits returns the pairs limited below +Inf and their rates.
func (h *Host) Limits() map[datapath.Pair]float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[datapath.Pair]float64{}
	for p, k := range h.tx {
		if !math.IsInf(k.rate, 1) {
			out[p] = k.rate
		}
	}
	return out
}

// LoseClass removes a pair's limiter behind its user's back (its limit
// and counters gone), as when someone deletes an HTB class.
func (h *Host) LoseClass(p datapath.Pair) {
	h.mu.Lock()
	delete(h.tx, p)
	h.mu.Unlock()
}

// Pin makes someone else keep a pair's class at bps bits/s: writes are
// accepted, but the class reads bps whatever they set, until Unpin.
func (h *Host) Pin(p datapath.Pair, bps float64) {
	h.mu.Lock()
	h.pinned[p] = bps
	h.mu.Unlock()
}

// Unpin ends Pin: the class reads what was set last.
func (h *Host) Unpin(p datapath.Pair) {
	h.mu.Lock()
	delete(h.pinned, p)
	h.mu.Unlock()
}

// limiter is one VM's pair limiter.
type limiter struct {
	h  *Host
	vm netip.Addr
}

func (l *limiter) SetPairRate(p datapath.Pair, bps float64) error {
	if math.IsNaN(bps) || bps < 0 {
		return fmt.Errorf("fake limiter: pair %s: rate %v", p, bps)
	}
	if p.Src != l.vm {
		return fmt.Errorf("fake limiter of %v: pair %s from another VM", l.vm, p)
	}
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if err := l.h.write(); err != nil {
		return err
	}
	k := l.h.tx[p]
	if k == nil {
		k = &class{}
		l.h.tx[p] = k
	}
	k.rate = bps
	return nil
}

func (l *limiter) RemovePair(p datapath.Pair) error {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if err := l.h.write(); err != nil {
		return err
	}
	delete(l.h.tx, p)
	return nil
}

func (l *limiter) Counters() (map[datapath.Pair]datapath.Counters, error) {
	return l.h.counters(l.h.tx, func(p datapath.Pair) bool { return p.Src == l.vm })
}

// counters reads the classes of cs that keep selects, their rates those
// a server holds for the limits set (datapath.Held).
func (h *Host) counters(cs map[datapath.Pair]*class, keep func(datapath.Pair) bool) (map[datapath.Pair]datapath.Counters, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.read(); err != nil {
		return nil, err
	}
	out := map[datapath.Pair]datapath.Counters{}
	for p, k := range cs {
		if keep(p) {
			c := k.c
			r := datapath.Held(k.rate)
			if pr, ok := h.pinned[p]; ok {
				r = pr
			}
			c.Rate, c.Ceil = r, r
			out[p] = c
		}
	}
	return out, nil
}

// receiver is one VM's receive counters.
type receiver struct {
	h  *Host
	vm netip.Addr
}

func (r *receiver) Counters() (map[datapath.Pair]datapath.Counters, error) {
	return r.h.counters(r.h.rx, func(p datapath.Pair) bool { return p.Dst == r.vm })
}

// loss is the server's loss counter.
type loss struct{ h *Host }

func (l loss) Side() mech.LossSide { return l.h.opt.LossSide }

func (l loss) Lost() (map[datapath.Pair]uint64, error) {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if err := l.h.read(); err != nil {
		return nil, err
	}
	return maps.Clone(l.h.lost), nil
}

func (l loss) Close() error { return nil }

// Scheduler is a fake per-VM scheduler: it records its rate, weights and
// VM limits, and reports the class counters and arrivals the test sets.
// As on a Linux server, its classes read the rates a server holds
// (datapath.Held), and removing it while a VM limit is finite leaves a
// scheduler that only limits.
type Scheduler struct {
	h   *Host
	dir mech.Direction

	// guarded by h.mu
	vms       map[string]netip.Addr
	installed bool
	rate      float64
	weights   map[string]float64
	limits    map[string]float64
	counters  map[string]datapath.Counters
	arrived   map[string]uint64
	lostClass map[string]bool
	lostTree  bool // the tree was deleted: no class until the next write
}

func (s *Scheduler) SetVMs(vms map[string]netip.Addr) error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.vms = maps.Clone(vms)
	gone := func(vm string, _ float64) bool { _, ok := vms[vm]; return !ok }
	maps.DeleteFunc(s.weights, gone)
	maps.DeleteFunc(s.limits, gone)
	return nil
}

func (s *Scheduler) Set(rate float64, weights map[string]float64) error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	for vm := range weights {
		if _, ok := s.vms[vm]; !ok {
			return fmt.Errorf("fake scheduler: VM %q is not on this host", vm)
		}
	}
	if err := s.h.write(); err != nil {
		return err
	}
	s.lostTree, s.lostClass = false, nil // built anew
	if math.IsInf(rate, 1) && len(weights) == 0 {
		s.installed, s.rate, s.weights = false, 0, nil
		for _, l := range s.limits {
			if !math.IsInf(l, 1) {
				s.limitOnly()
				break
			}
		}
		return nil
	}
	s.installed, s.rate, s.weights = true, rate, maps.Clone(weights)
	return nil
}

func (s *Scheduler) SetLimit(vm string, bps float64) error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if _, ok := s.vms[vm]; !ok {
		return fmt.Errorf("fake scheduler: VM %q is not on this host", vm)
	}
	if err := s.h.write(); err != nil {
		return err
	}
	if !s.installed {
		s.limitOnly()
	}
	s.limits[vm] = bps
	delete(s.lostClass, vm)
	if s.lostTree {
		// a class that cannot be changed: the tree is built anew
		s.lostTree, s.lostClass = false, nil
	}
	return nil
}

// limitOnly installs a scheduler that only limits (h.mu held), as
// datapath/linux does: unlimited rate, equal weights.
func (s *Scheduler) limitOnly() {
	s.installed, s.rate, s.weights = true, math.Inf(1), map[string]float64{}
	for n := range s.vms {
		s.weights[n] = 1
	}
}

func (s *Scheduler) Installed() bool {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.installed
}

func (s *Scheduler) Counters() (map[string]datapath.Counters, error) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if err := s.h.read(); err != nil {
		return nil, err
	}
	if !s.installed {
		return nil, nil
	}
	out := map[string]datapath.Counters{}
	for vm := range s.vms {
		if s.lostClass[vm] || s.lostTree {
			continue
		}
		c := s.counters[vm]
		c.Rate, c.Ceil = datapath.Held(s.rate), datapath.Held(s.rate)
		if l, ok := s.limits[vm]; ok {
			c.Ceil = datapath.Held(math.Min(l, s.rate))
		}
		out[vm] = c
	}
	return out, nil
}

func (s *Scheduler) Arrivals() (map[string]uint64, error) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if err := s.h.read(); err != nil {
		return nil, err
	}
	if !s.installed || s.dir != mech.Ingress || len(s.arrived) == 0 {
		return nil, nil
	}
	return maps.Clone(s.arrived), nil
}

// Count sets the counters of a VM's class.
func (s *Scheduler) Count(vm string, c datapath.Counters) {
	s.h.mu.Lock()
	s.counters[vm] = c
	s.h.mu.Unlock()
}

// Arrive sets the bytes that arrived for a VM before the scheduler.
func (s *Scheduler) Arrive(vm string, bytes uint64) {
	s.h.mu.Lock()
	s.arrived[vm] = bytes
	s.h.mu.Unlock()
}

// LoseClass removes a VM's class behind the scheduler's user's back.
func (s *Scheduler) LoseClass(vm string) {
	s.h.mu.Lock()
	if s.lostClass == nil {
		s.lostClass = map[string]bool{}
	}
	s.lostClass[vm] = true
	delete(s.limits, vm)
	s.h.mu.Unlock()
}

// LoseTree deletes the scheduler's tree behind its user's back, as when
// someone deletes the device's root qdisc: no class reads until the next
// write rebuilds it (with the rate, weights and limits the scheduler
// was given).
func (s *Scheduler) LoseTree() {
	s.h.mu.Lock()
	s.lostTree = true
	s.h.mu.Unlock()
}

// State returns whether the scheduler is installed, its rate and weights
// (a copy).
func (s *Scheduler) State() (installed bool, rate float64, weights map[string]float64) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.installed, s.rate, maps.Clone(s.weights)
}

// Limit returns a VM's limit and whether it has one.
func (s *Scheduler) Limit(vm string) (float64, bool) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	l, ok := s.limits[vm]
	return l, ok
}
