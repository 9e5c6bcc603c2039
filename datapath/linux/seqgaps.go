package linux

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
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
type SeqGaps struct {
	mu   sync.Mutex
	ns   *dataplane.NS
	p    *seqloss.Probe
	made map[string]bool // the devices whose clsact qdisc it added
	prev map[dataplane.Pair]seqloss.Received
	cum  map[dataplane.Pair]uint64
	vms  map[string]seqVM // attached by AttachVM, by name
}

// seqVM is a VM SeqGaps counts at its device.
type seqVM struct {
	dev  string
	addr netip.Addr
}

var _ VMLossCounter = (*SeqGaps)(nil)

// NewSeqGaps loads the programs in the server's namespace ns, stamps on
// the egress of every uplink device and counts on the egress of every
// local VM's server-side veth (vmDevs; none: it counts the VMs attached
// later, AttachVM). On error nothing stays attached. A clsact qdisc it
// adds to a device goes when its program comes off (Close, DetachVM),
// unless another filter is on it then.
func NewSeqGaps(ns *dataplane.NS, uplinks, vmDevs []string) (_ *SeqGaps, err error) {
	if len(uplinks) == 0 {
		return nil, fmt.Errorf("seq-gap loss counter: no uplink to stamp on")
	}
	p, err := seqloss.New(ns, seqloss.Config{})
	if err != nil {
		return nil, fmt.Errorf("seq-gap loss counter: %w", err)
	}
	s := &SeqGaps{ns: ns, p: p, made: map[string]bool{},
		prev: map[dataplane.Pair]seqloss.Received{}, cum: map[dataplane.Pair]uint64{}, vms: map[string]seqVM{}}
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
// into the VM are forgotten by the program, so that a VM that comes
// back with the address starts its pairs afresh.
func (s *SeqGaps) DetachVM(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[name]
	if !ok {
		return nil
	}
	delete(s.vms, name)
	var errs []error
	if err := s.p.Detach(v.dev, dataplane.Egress); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.dropClsact(v.dev))
	// The totals so far stay; the program's state of the pairs goes.
	if _, err := s.lost(); err != nil {
		errs = append(errs, err)
	}
	var gone []dataplane.Pair
	for pair := range s.prev {
		if pair.Dst == v.addr {
			gone = append(gone, pair)
			delete(s.prev, pair)
		}
	}
	if err := s.p.Forget(gone...); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("seq-gap loss counter: detach VM %s (%s): %w", name, v.dev, err)
	}
	return nil
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

// Lost returns the cumulative losses per pair seen at this server.
func (s *SeqGaps) Lost() (map[dataplane.Pair]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost()
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
	errs := []error{s.p.Close()}
	for _, d := range slices.Sorted(maps.Keys(s.made)) {
		errs = append(errs, s.dropClsact(d))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("seq-gap loss counter: %w", err)
	}
	return nil
}
