package linux

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sync"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// Handles of a scheduler's tree: HTB 1:, the host class 1:1 at the
// scheduler's rate, VM i's class 1:(vmMinor0+i) under it with a
// drop-tail queue (0x8000|minor):, classified by a u32 filter (node i+1)
// on the VM's address.
const (
	schedMajor = 1
	hostMinor  = 1
	vmMinor0   = 0x10
)

// Scheduler is a server's per-VM scheduler (datapath.Scheduler) on one
// device (an IFB that sees all the traffic of the server's VMs in one
// direction), as HTB: a host class at the scheduler's rate, and under it
// one class per VM with the VM's weighted share of that rate as its rate
// (what it gets when every VM wants more) and the scheduler's rate as its
// ceiling (what it may borrow when others are idle), so idle shares go to
// the busy VMs roughly in proportion to their rates (HTB lends by
// quantum, and quanta follow rates). A VM limit (mech.VMEgress,
// mech.VMIngress) lowers the VM's ceiling. It approximates the weighted
// fair queue of mech.Scheduler. Traffic of addresses without a class
// (the server's own) passes unshaped. Methods are safe for concurrent
// use.
type Scheduler struct {
	ns    *dataplane.NS
	dev   string
	dir   mech.Direction
	queue uint32
	links []string // ingress: the devices whose redirection filters count arrivals

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

// NewScheduler returns a scheduler on dev in ns, classifying by source
// address (mech.Egress) or destination (mech.Ingress), for no VM yet
// (SetVMs). An ingress scheduler reads each VM's arrivals from the
// redirection filters (dataplane.RedirectIngressMatch) on links. Nothing
// is installed until Set or SetLimit.
func NewScheduler(ns *dataplane.NS, dev string, dir mech.Direction, links []string) *Scheduler {
	s := &Scheduler{ns: ns, dev: dev, dir: dir, queue: datapath.SchedQueue, vms: map[string]*schedVM{}}
	if dir == mech.Ingress {
		s.links = links
	}
	return s
}

// SetVMs sets the VMs scheduled (name → address). VMs that stay keep their
// limits; weights and limits of VMs that left are dropped. An installed
// scheduler is rebuilt for the new VMs.
func (s *Scheduler) SetVMs(vms map[string]netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	same := len(vms) == len(s.vms)
	for n, a := range vms {
		if v, ok := s.vms[n]; !ok || v.addr != a {
			same = false
		}
		if !a.Is4() {
			return fmt.Errorf("scheduler on %s: VM %s: address %v is not IPv4", s.dev, n, a)
		}
	}
	if same {
		return nil
	}
	if len(vms) > dataplane.MaxU32Node {
		return fmt.Errorf("scheduler on %s: %d VMs, more than %d", s.dev, len(vms), dataplane.MaxU32Node)
	}
	old := s.vms
	s.vms = make(map[string]*schedVM, len(vms))
	for i, n := range slices.Sorted(maps.Keys(vms)) {
		v := &schedVM{name: n, addr: vms[n], minor: uint16(vmMinor0 + i), limit: math.Inf(1)}
		if o, ok := old[n]; ok {
			v.limit = o.limit
		}
		s.vms[n] = v
	}
	w := map[string]float64{}
	for n, x := range s.weights {
		if v, ok := s.vms[n]; ok {
			w[n] = x
			v.weight = x
		}
	}
	s.weights = w
	if s.rate > 0 {
		return s.install()
	}
	return nil
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
// set earlier stay: while one is finite, the removal leaves a tree that
// only limits (as SetLimit installs) rather than none.
func (s *Scheduler) Set(rate float64, weights map[string]float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if math.IsInf(rate, 1) && len(weights) == 0 {
		if s.limited() {
			return s.limitOnly()
		}
		s.rate = 0
		return s.passthrough()
	}
	if !(rate > 0) || math.IsNaN(rate) {
		return fmt.Errorf("scheduler on %s: rate %v", s.dev, rate)
	}
	for vm, w := range weights {
		if _, ok := s.vms[vm]; !ok {
			return fmt.Errorf("scheduler on %s: VM %q is not on this host", s.dev, vm)
		}
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("scheduler on %s: VM %s: weight %v", s.dev, vm, w)
		}
	}
	s.weights = maps.Clone(weights)
	for _, v := range s.vms {
		v.weight = weights[v.name]
	}
	s.rate = math.Min(rate, dataplane.MaxRate)
	return s.install()
}

// install builds the tree at s.rate (s.mu held): an empty HTB, the host
// class, each VM's class, queue and classifier.
func (s *Scheduler) install() error {
	rate := s.rate
	if err := s.passthrough(); err != nil {
		s.rate = 0
		return err
	}
	fail := func(err error) error {
		s.rate = 0
		return err
	}
	host := dataplane.HTBClass{Parent: dataplane.TCHandle(schedMajor, 0), Handle: dataplane.TCHandle(schedMajor, hostMinor), Rate: rate, Ceil: rate}
	if err := s.ns.ReplaceHTBClass(s.dev, host); err != nil {
		return fail(fmt.Errorf("scheduler on %s: %w", s.dev, err))
	}
	for _, v := range s.sorted() {
		c := s.class(v)
		if err := s.ns.ReplaceHTBClass(s.dev, c); err != nil {
			return fail(fmt.Errorf("scheduler on %s: VM %s: %w", s.dev, v.name, err))
		}
		if err := s.ns.ReplaceFIFO(s.dev, c.Handle, dataplane.TCHandle(0x8000|v.minor, 0), s.queue); err != nil {
			return fail(fmt.Errorf("scheduler on %s: VM %s: %w", s.dev, v.name, err))
		}
		m := dataplane.Match{Src: netip.PrefixFrom(v.addr, 32)}
		if s.dir == mech.Ingress {
			m = dataplane.Match{Dst: netip.PrefixFrom(v.addr, 32)}
		}
		f := dataplane.U32Filter{Parent: dataplane.TCHandle(schedMajor, 0), Prio: 1, Node: v.minor - vmMinor0 + 1, Match: m, ClassID: c.Handle}
		if err := s.ns.AddU32(s.dev, f); err != nil {
			return fail(fmt.Errorf("scheduler on %s: VM %s: %w", s.dev, v.name, err))
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
	return slices.SortedFunc(maps.Values(s.vms), func(a, b *schedVM) int { return cmp.Compare(a.minor, b.minor) })
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
// dataplane.MaxRate, equal weights). When the VM's class cannot be
// changed (the tree was deleted behind the scheduler's back), the tree is
// built anew.
func (s *Scheduler) SetLimit(vm string, bps float64) error {
	if math.IsNaN(bps) || bps < 0 {
		return fmt.Errorf("scheduler on %s: VM %s: limit %v", s.dev, vm, bps)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[vm]
	if !ok {
		return fmt.Errorf("scheduler on %s: VM %q is not on this host", s.dev, vm)
	}
	v.limit = bps
	if s.rate == 0 {
		return s.limitOnly()
	}
	if cerr := s.ns.ChangeHTBClass(s.dev, s.class(v)); cerr != nil {
		if err := s.install(); err != nil {
			return errors.Join(fmt.Errorf("scheduler on %s: VM %s: %w", s.dev, vm, cerr), err)
		}
	}
	return nil
}

// limited says whether a VM limit is finite (s.mu held).
func (s *Scheduler) limited() bool {
	for _, v := range s.vms {
		if !math.IsInf(v.limit, 1) {
			return true
		}
	}
	return false
}

// limitOnly installs a tree that only limits (s.mu held): at
// dataplane.MaxRate, equal weights, each VM's class capped by its limit.
func (s *Scheduler) limitOnly() error {
	s.weights = map[string]float64{}
	for n, v := range s.vms {
		s.weights[n] = 1
		v.weight = 1
	}
	s.rate = dataplane.MaxRate
	return s.install()
}

// Counters returns each VM class's counters (none if not installed).
func (s *Scheduler) Counters() (map[string]dataplane.Counters, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rate == 0 {
		return nil, nil
	}
	cs, err := s.ns.ClassCounters(s.dev)
	if err != nil {
		return nil, fmt.Errorf("scheduler on %s: %w", s.dev, err)
	}
	out := make(map[string]dataplane.Counters, len(s.vms))
	for n, v := range s.vms {
		out[n] = cs[dataplane.TCHandle(schedMajor, v.minor)]
	}
	return out, nil
}

// Arrivals returns, for an installed ingress scheduler, the bytes that
// arrived for each VM on the server's links (the counters of their
// redirection filters, before the scheduler); nil otherwise.
func (s *Scheduler) Arrivals() (map[string]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rate == 0 || len(s.links) == 0 {
		return nil, nil
	}
	byAddr := make(map[netip.Addr]string, len(s.vms))
	for n, v := range s.vms {
		byAddr[v.addr] = n
	}
	arr := map[string]uint64{}
	for _, l := range s.links {
		rs, err := s.ns.IngressRedirected(l)
		if err != nil {
			return nil, fmt.Errorf("scheduler on %s: arrivals: %w", s.dev, err)
		}
		for _, r := range rs {
			if !r.Dst.IsValid() || r.Dst.Bits() != 32 {
				continue
			}
			if vm, ok := byAddr[r.Dst.Addr()]; ok {
				arr[vm] += r.Bytes
			}
		}
	}
	return arr, nil
}
