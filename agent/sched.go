package agent

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"sync"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// SchedQueue is the queue of each VM's class in a host scheduler, bytes:
// Gatekeeper's 160 packets of 1514 bytes (§3.1).
const SchedQueue = 160 * 1514

// Handles of a scheduler's tree: HTB 1:, the host class 1:1 at the
// scheduler's rate, VM i's class 1:(vmMinor0+i) under it with a
// drop-tail queue (0x8000|minor):, classified by a u32 filter (node i+1)
// on the VM's address.
const (
	schedMajor = 1
	hostMinor  = 1
	vmMinor0   = 0x10
)

// Scheduler is a host's per-VM scheduler on one device (an IFB that sees
// all the traffic of the host's VMs in one direction), as HTB: a host
// class at the scheduler's rate, and under it one class per VM with the
// VM's weighted share of that rate as its rate (what it gets when every
// VM wants more) and the scheduler's rate as its ceiling (what it may
// borrow when others are idle), so idle shares go to the busy VMs
// roughly in proportion to their rates (HTB lends by quantum, and
// quanta follow rates). A VM limit (mech.VMEgress, mech.VMIngress)
// lowers the VM's ceiling. It approximates the weighted fair queue of
// mech.Scheduler. Traffic of addresses without a class (the host's own)
// passes unshaped. Methods are safe for concurrent use.
type Scheduler struct {
	ns    *dataplane.NS
	dev   string
	dir   mech.Direction
	queue uint32

	mu      sync.Mutex
	rate    float64 // bits/s on the wire; 0: not installed (passthrough)
	vms     map[string]*schedVM
	weights map[string]float64
}

type schedVM struct {
	name   string
	addr   netip.Addr
	minor  uint16
	limit  float64 // bits/s on the wire, +Inf: none
	weight float64
}

// NewScheduler returns a scheduler for the VMs (name → address) on dev in
// ns, classifying by source address (Egress) or destination (Ingress).
// Nothing is installed until Set or SetLimit.
func NewScheduler(ns *dataplane.NS, dev string, dir mech.Direction, vms map[string]netip.Addr) *Scheduler {
	s := &Scheduler{ns: ns, dev: dev, dir: dir, queue: SchedQueue, vms: map[string]*schedVM{}}
	names := make([]string, 0, len(vms))
	for n := range vms {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		s.vms[n] = &schedVM{name: n, addr: vms[n], minor: uint16(vmMinor0 + i), limit: math.Inf(1)}
	}
	return s
}

// Installed reports whether a scheduler is in place.
func (s *Scheduler) Installed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate > 0
}

// Set installs (or replaces) the scheduler at rate bits/s on the wire
// with the VMs' weights (VMs not in weights get a negligible one); rate
// +Inf with no weights removes it (traffic passes unshaped). VM limits
// set earlier stay.
func (s *Scheduler) Set(rate float64, weights map[string]float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if math.IsInf(rate, 1) && len(weights) == 0 {
		s.rate = 0
		return s.passthrough()
	}
	if !(rate > 0) || math.IsNaN(rate) {
		return fmt.Errorf("scheduler on %s: rate %v", s.dev, rate)
	}
	rate = math.Min(rate, dataplane.MaxRate)
	for vm, w := range weights {
		if _, ok := s.vms[vm]; !ok {
			return fmt.Errorf("scheduler on %s: VM %q is not on this host", s.dev, vm)
		}
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("scheduler on %s: VM %s: weight %v", s.dev, vm, w)
		}
	}
	s.weights = weights
	for _, v := range s.vms {
		v.weight = weights[v.name]
	}
	if err := s.passthrough(); err != nil {
		return err
	}
	s.rate = rate
	host := dataplane.HTBClass{Parent: dataplane.TCHandle(schedMajor, 0), Handle: dataplane.TCHandle(schedMajor, hostMinor), Rate: rate, Ceil: rate}
	if err := s.ns.ReplaceHTBClass(s.dev, host); err != nil {
		s.rate = 0
		return fmt.Errorf("scheduler on %s: %w", s.dev, err)
	}
	for _, v := range s.sorted() {
		c := s.class(v)
		if err := s.ns.ReplaceHTBClass(s.dev, c); err != nil {
			s.rate = 0
			return fmt.Errorf("scheduler on %s: VM %s: %w", s.dev, v.name, err)
		}
		if err := s.ns.ReplaceFIFO(s.dev, c.Handle, dataplane.TCHandle(0x8000|v.minor, 0), s.queue); err != nil {
			s.rate = 0
			return fmt.Errorf("scheduler on %s: VM %s: %w", s.dev, v.name, err)
		}
		m := dataplane.Match{Src: netip.PrefixFrom(v.addr, 32)}
		if s.dir == mech.Ingress {
			m = dataplane.Match{Dst: netip.PrefixFrom(v.addr, 32)}
		}
		f := dataplane.U32Filter{Parent: dataplane.TCHandle(schedMajor, 0), Prio: 1, Node: v.minor - vmMinor0 + 1, Match: m, ClassID: c.Handle}
		if err := s.ns.AddU32(s.dev, f); err != nil {
			s.rate = 0
			return fmt.Errorf("scheduler on %s: VM %s: %w", s.dev, v.name, err)
		}
	}
	return nil
}

// passthrough puts an empty HTB on the device: everything passes
// through its direct queue. (HTB cannot be changed in place, so the old
// tree is deleted first.)
func (s *Scheduler) passthrough() error {
	if err := s.ns.DeleteRootQdisc(s.dev); err != nil {
		return fmt.Errorf("scheduler on %s: %w", s.dev, err)
	}
	if err := s.ns.ReplaceHTB(s.dev, dataplane.HTB{Handle: dataplane.TCHandle(schedMajor, 0), Parent: 0xFFFFFFFF, DirectQlen: dataplane.DefaultTxQLen}); err != nil {
		return fmt.Errorf("scheduler on %s: %w", s.dev, err)
	}
	return nil
}

func (s *Scheduler) sorted() []*schedVM {
	out := make([]*schedVM, 0, len(s.vms))
	for _, v := range s.vms {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].minor < out[j].minor })
	return out
}

// class is VM v's HTB class: rate its weighted share (capped by its
// limit), ceiling the scheduler's rate or its limit.
func (s *Scheduler) class(v *schedVM) dataplane.HTBClass {
	sum := 0.0
	for _, w := range s.weights {
		sum += w
	}
	share := dataplane.MinRate
	if sum > 0 && v.weight > 0 {
		share = math.Max(s.rate*v.weight/sum, dataplane.MinRate)
	}
	ceil := math.Max(math.Min(v.limit, s.rate), dataplane.MinRate)
	return dataplane.HTBClass{
		Parent: dataplane.TCHandle(schedMajor, hostMinor), Handle: dataplane.TCHandle(schedMajor, v.minor),
		Rate: math.Min(share, ceil), Ceil: ceil,
	}
}

// SetLimit caps a VM at bps bits/s on the wire (+Inf: no cap). Without a
// scheduler in place it first installs one that only limits (at
// dataplane.MaxRate, equal weights).
func (s *Scheduler) SetLimit(vm string, bps float64) error {
	if math.IsNaN(bps) || bps < 0 {
		return fmt.Errorf("scheduler on %s: VM %s: limit %v", s.dev, vm, bps)
	}
	s.mu.Lock()
	v, ok := s.vms[vm]
	installed := s.rate > 0
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("scheduler on %s: VM %q is not on this host", s.dev, vm)
	}
	if !installed {
		w := map[string]float64{}
		for n := range s.vms {
			w[n] = 1
		}
		if err := s.Set(dataplane.MaxRate, w); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v.limit = bps
	if err := s.ns.ChangeHTBClass(s.dev, s.class(v)); err != nil {
		return fmt.Errorf("scheduler on %s: VM %s: %w", s.dev, vm, err)
	}
	return nil
}

// Counters returns each VM class's counters (none if not installed).
func (s *Scheduler) Counters() (map[string]dataplane.Counters, error) {
	s.mu.Lock()
	if s.rate == 0 {
		s.mu.Unlock()
		return nil, nil
	}
	s.mu.Unlock()
	cs, err := s.ns.ClassCounters(s.dev)
	if err != nil {
		return nil, fmt.Errorf("scheduler on %s: %w", s.dev, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]dataplane.Counters, len(s.vms))
	for n, v := range s.vms {
		out[n] = cs[dataplane.TCHandle(schedMajor, v.minor)]
	}
	return out, nil
}
