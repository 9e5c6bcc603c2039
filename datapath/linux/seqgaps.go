package linux

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/dataplane/seqloss"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// SeqGaps is the datapath.LossCounter of ElasticSwitch §6: every packet leaving the
// server toward the network carries a per-(source, destination) sequence
// number in its IP ID, stamped by an eBPF program on the egress of the
// server's uplinks, and the eBPF program on the egress of each local VM's
// veth counts the numbers that never arrived (dataplane/seqloss). It sees
// TCP and UDP alike, and only losses in the network: the pair limiters on
// the VMs' interfaces sit before the stamp. Losses are detected at the
// destination (mech.LossAtDestination): a mechanism that reacts at the
// source takes them from the destination's feedback (mech.LossAdapter).
//
// Lost reports per pair the new gaps less the new late arrivals
// (reordering) since the previous call, accumulated: the counts only grow.
//
// It follows the VMs of a Host that builds their limiters
// (VMLossCounter): the count program goes on a VM's device on the
// server when the VM is attached and comes off when it is detached; the
// uplinks it stamps on are fixed when it is made.
//
// Only the pairs of the model are numbered and counted (the programs'
// declared-only mode, seqloss.Config.DeclaredOnly), so that what a VM
// sends — to any number of destinations, from any source address, with
// any mark — can neither fill the programs' maps, leaving the pairs
// that come after unnumbered and their losses unseen, nor add gaps to
// another pair. A Host tells it of each VM it attaches (pairFollower),
// with the VM's limiter and receive counters: the pairs the limiter has
// from the VM's address are numbered, only for packets that came in by
// the VM's device on the server when the Host knows it; the pairs the
// receive counters count into the VM's address are counted, only for
// packets that arrived by an uplink. They are read again at every Lost,
// so a pair the host agent adds is numbered and counted from the next
// reading on, and one it removes is no longer. The pairs declared are
// at most seqloss.DefaultMaxPairs each way; beyond, Lost reports the
// error.
type SeqGaps struct {
	mu    sync.Mutex
	ns    *dataplane.NS
	p     *seqloss.Probe
	made  map[string]bool // the devices whose clsact qdisc it added
	prev  map[dataplane.Pair]seqloss.Received
	cum   map[dataplane.Pair]uint64
	vms   map[string]seqVM   // attached by AttachVM, by name
	pairs map[string]seqPair // followed (followPairs), by VM name
	// stamped and counted are the pairs declared to the programs: the
	// device a stamped pair's packets must come in by ("": any).
	stamped map[dataplane.Pair]string
	counted map[dataplane.Pair]bool
	// wantTX and wantRX are sync's: the pairs to declare.
	wantTX   map[dataplane.Pair]string
	wantRX   map[dataplane.Pair]bool
	reported string // the declaration error Lost reported last
}

// seqVM is a VM SeqGaps counts at its device.
type seqVM struct {
	dev  string
	addr netip.Addr
}

// seqPair is a VM whose pairs SeqGaps declares to its programs.
type seqPair struct {
	addr           netip.Addr
	dev            string     // its device on the server ("": unknown)
	sent, received pairLister // nil: none
}

var _ pairFollower = (*SeqGaps)(nil)

var _ VMLossCounter = (*SeqGaps)(nil)

// NewSeqGaps loads the programs in the server's namespace ns, stamps on
// the egress of every uplink device and counts on the egress of every
// local VM's server-side veth (vmDevs; none: it counts the VMs attached
// later, AttachVM) — the pairs of the VMs a Host attaches. Marks are
// taken only from packets that arrived by an uplink. On error nothing
// stays attached. A clsact qdisc it adds to a device goes when its
// program comes off (Close, DetachVM), unless another filter is on it
// then.
func NewSeqGaps(ns *dataplane.NS, uplinks, vmDevs []string) (_ *SeqGaps, err error) {
	if len(uplinks) == 0 {
		return nil, fmt.Errorf("seq-gap loss counter: no uplink to stamp on")
	}
	p, err := seqloss.New(ns, seqloss.Config{DeclaredOnly: true})
	if err != nil {
		return nil, fmt.Errorf("seq-gap loss counter: %w", err)
	}
	s := &SeqGaps{ns: ns, p: p, made: map[string]bool{},
		prev: map[dataplane.Pair]seqloss.Received{}, cum: map[dataplane.Pair]uint64{}, vms: map[string]seqVM{},
		pairs: map[string]seqPair{}, stamped: map[dataplane.Pair]string{}, counted: map[dataplane.Pair]bool{},
		wantTX: map[dataplane.Pair]string{}, wantRX: map[dataplane.Pair]bool{}}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	for _, d := range uplinks {
		if err := s.attach(d, seqloss.Stamp); err != nil {
			return nil, fmt.Errorf("seq-gap loss counter: stamp on %s: %w", d, err)
		}
	}
	for _, d := range vmDevs {
		if err := s.attach(d, seqloss.Count); err != nil {
			return nil, fmt.Errorf("seq-gap loss counter: count on %s: %w", d, err)
		}
	}
	return s, nil
}

// attach runs a program on the egress of dev, noting whether the clsact
// qdisc it needs is its own to remove.
func (s *SeqGaps) attach(dev string, role seqloss.Role) error {
	had, err := s.ns.HasClsact(dev)
	if err != nil {
		return err
	}
	err = s.p.Attach(dev, dataplane.Egress, role)
	if !had {
		s.made[dev] = true
	}
	if err != nil {
		return errors.Join(err, s.dropClsact(dev))
	}
	return nil
}

// dropClsact removes the clsact qdisc of dev if it added it and the
// qdisc holds no filter (another's filter keeps it); a device that is
// gone is not an error.
func (s *SeqGaps) dropClsact(dev string) error {
	if !s.made[dev] {
		return nil
	}
	delete(s.made, dev)
	in, err := s.ns.HookFilters(dev, dataplane.Ingress)
	if err == nil && len(in) == 0 {
		var eg []dataplane.HookFilter
		if eg, err = s.ns.HookFilters(dev, dataplane.Egress); err == nil && len(eg) == 0 {
			err = s.ns.DeleteClsact(dev)
		}
	}
	if err != nil && !dataplane.IsLinkNotFound(err) {
		return fmt.Errorf("remove the clsact of %s: %w", dev, err)
	}
	return nil
}

// AttachVM implements VMLossCounter: the count program goes on the
// egress of the VM's device on the server (vm.Device), where the
// packets into the VM leave the server.
func (s *SeqGaps) AttachVM(vm datapath.VM) error {
	if vm.Device == "" {
		return fmt.Errorf("seq-gap loss counter: VM %s: no device on the server to count on", vm.Name)
	}
	if !vm.Addr.Is4() {
		return fmt.Errorf("seq-gap loss counter: VM %s: address %v is not IPv4", vm.Name, vm.Addr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.vms[vm.Name]; ok {
		if o.dev == vm.Device && o.addr == vm.Addr {
			return nil
		}
		return fmt.Errorf("seq-gap loss counter: VM %s: counted on %s (%s) already; detach it first", vm.Name, o.dev, o.addr)
	}
	if err := s.attach(vm.Device, seqloss.Count); err != nil {
		return fmt.Errorf("seq-gap loss counter: VM %s: count on %s: %w", vm.Name, vm.Device, err)
	}
	s.vms[vm.Name] = seqVM{dev: vm.Device, addr: vm.Addr}
	return nil
}

// DetachVM implements VMLossCounter: the count program comes off the
// VM's device (a device that is gone is not an error), and the pairs
// from and into the VM are no longer followed: undeclared, so that a VM
// that comes back with the address starts its pairs afresh.
func (s *SeqGaps) DetachVM(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[name]
	if !ok {
		if err := s.unfollow(name); err != nil {
			return fmt.Errorf("seq-gap loss counter: detach VM %s: %w", name, err)
		}
		return nil
	}
	delete(s.vms, name)
	var errs []error
	if err := s.p.Detach(v.dev, dataplane.Egress); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.dropClsact(v.dev), s.unfollow(name))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("seq-gap loss counter: detach VM %s (%s): %w", name, v.dev, err)
	}
	return nil
}

// followPairs implements pairFollower: the VM's pairs are declared at
// once (an error is Lost's to report: it tries again).
func (s *SeqGaps) followPairs(vm string, addr netip.Addr, dev string, sent, received pairLister) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !addr.Is4() {
		return // nothing of it can be numbered (AttachVM says so)
	}
	if o, ok := s.pairs[vm]; ok && o.addr != addr {
		_ = s.unfollow(vm) // its pairs at the old address go
	}
	s.pairs[vm] = seqPair{addr: addr, dev: dev, sent: sent, received: received}
	_ = s.sync(false)
}

// unfollowPairs implements pairFollower.
func (s *SeqGaps) unfollowPairs(vm string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unfollow(vm); err != nil {
		return fmt.Errorf("seq-gap loss counter: VM %s: %w", vm, err)
	}
	return nil
}

// unfollow undeclares the pairs from and into a VM followed, once their
// losses so far are in the totals (which stay), and stops following it
// (s.mu held).
func (s *SeqGaps) unfollow(vm string) error {
	v, ok := s.pairs[vm]
	if !ok {
		return nil
	}
	delete(s.pairs, vm)
	_, err := s.lost()
	errs := []error{err}
	for pair := range s.stamped {
		if pair.Src == v.addr {
			errs = append(errs, s.undeclare(seqloss.Stamp, pair))
		}
	}
	for pair := range s.counted {
		if pair.Dst == v.addr {
			errs = append(errs, s.undeclare(seqloss.Count, pair))
		}
	}
	return errors.Join(errs...)
}

// undeclare undeclares a pair to a program (s.mu held); a pair counted
// is forgotten (its totals stay).
func (s *SeqGaps) undeclare(role seqloss.Role, pair dataplane.Pair) error {
	if err := s.p.Undeclare(role, pair); err != nil {
		return err
	}
	if role == seqloss.Stamp {
		delete(s.stamped, pair)
	} else {
		delete(s.counted, pair)
		delete(s.prev, pair)
	}
	return nil
}

// sync declares to the programs the pairs of the VMs followed that are
// not declared yet — those of a VM's limiter from its address, those of
// its receive counters into its address — and, with undeclare, undeclares
// those no longer theirs (s.mu held; with undeclare, once their losses
// are in the totals). A pair that cannot be declared is tried again at
// the next sync.
func (s *SeqGaps) sync(undeclare bool) error {
	clear(s.wantTX)
	clear(s.wantRX)
	for _, v := range s.pairs {
		if v.sent != nil {
			for _, pair := range v.sent.Pairs() {
				if pair.Src == v.addr && pair.Dst.Is4() {
					s.wantTX[pair] = v.dev
				}
			}
		}
		if v.received != nil {
			for _, pair := range v.received.Pairs() {
				if pair.Dst == v.addr && pair.Src.Is4() {
					s.wantRX[pair] = true
				}
			}
		}
	}
	var errs []error
	if undeclare {
		for pair, dev := range s.stamped {
			if d, ok := s.wantTX[pair]; !ok || d != dev {
				errs = append(errs, s.undeclare(seqloss.Stamp, pair))
			}
		}
		for pair := range s.counted {
			if !s.wantRX[pair] {
				errs = append(errs, s.undeclare(seqloss.Count, pair))
			}
		}
	}
	for pair, dev := range s.wantTX {
		if _, ok := s.stamped[pair]; ok {
			continue
		}
		if err := s.p.DeclareStamp(dev, pair); err != nil {
			errs = append(errs, err)
			continue
		}
		s.stamped[pair] = dev
	}
	for pair := range s.wantRX {
		if s.counted[pair] {
			continue
		}
		if err := s.p.DeclareCount(pair); err != nil {
			errs = append(errs, err)
			continue
		}
		s.counted[pair] = true
	}
	// In a stable order: Lost reports an error once until it changes.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(errString(a), errString(b)) })
	return errors.Join(errs...)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Devices returns the devices the count program is on for the VMs
// attached (AttachVM), by VM name.
func (s *SeqGaps) Devices() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.vms))
	for n, v := range s.vms {
		out[n] = v.dev
	}
	return out
}

// Side is mech.LossAtDestination: gaps are seen where the packets arrive.
func (s *SeqGaps) Side() mech.LossSide { return mech.LossAtDestination }

// Lost returns the cumulative losses per pair seen at this server, then
// declares to the programs the pairs the VMs' limiters and receive
// counters have now, and undeclares those they no longer have. An error
// declaring them is returned with the losses, once until it changes.
func (s *SeqGaps) Lost() (map[dataplane.Pair]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, err := s.lost()
	if err != nil {
		return out, err
	}
	if err := s.sync(true); err != nil {
		if msg := err.Error(); msg != s.reported {
			s.reported = msg
			return out, fmt.Errorf("seq-gap loss counter: pairs not numbered or counted: %w", err)
		}
		return out, nil
	}
	s.reported = ""
	return out, nil
}

// lost is Lost with s.mu held.
func (s *SeqGaps) lost() (map[dataplane.Pair]uint64, error) {
	now, err := s.p.Received()
	if err != nil {
		return nil, fmt.Errorf("seq-gap loss counter: %w", err)
	}
	out := make(map[dataplane.Pair]uint64, len(now))
	for pair, r := range now {
		s.cum[pair] += r.Lost(s.prev[pair])
		s.prev[pair] = r
	}
	for pair, c := range s.cum {
		out[pair] = c
	}
	return out, nil
}

// Close detaches the programs (from the uplinks and every VM's device)
// and frees them and their maps; nothing is pinned, so nothing of the
// counter remains in the kernel.
func (s *SeqGaps) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.vms)
	clear(s.pairs)
	errs := []error{s.p.Close()}
	for _, d := range slices.Sorted(maps.Keys(s.made)) {
		errs = append(errs, s.dropClsact(d))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("seq-gap loss counter: %w", err)
	}
	return nil
}
