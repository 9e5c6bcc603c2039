package linux

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TCPRetransmits is a datapath.LossCounter of the TCP segments that the sender
// VMs' connections retransmitted (tcp_info's total_retrans, read through
// sock_diag netlink in each local VM's namespace), attributed to VM pairs
// by the connections' addresses. It sees TCP only: an unresponsive UDP
// sender's losses are invisible to it.
//
// A retransmission stands for a segment the network lost (or one TCP
// believed lost: spurious retransmissions count too). The testbed's pair
// limiters sit on the VMs' interfaces, where TCP's small-queue budget
// holds the connection back instead of the limiter's queue dropping, so
// the retransmissions are the network's losses, not the limiter's. It
// was the agents' first loss source, before per-pair sequence-number gaps
// (ElasticSwitch §6) counted in eBPF at the receivers (SeqGaps).
//
// Connections are found by a sock_diag dump every DiscoverEvery (a dump
// walks the kernel's whole TCP hash table, about 0.3 ms here whatever the
// namespace holds) and read in between by exact lookups, one per
// connection. A connection found later reports all its retransmissions
// then.
//
// It follows the VMs of a Host that builds their limiters
// (VMLossCounter): a VM attached in a namespace of its own is watched
// from then on (its connections' earlier retransmissions are not
// counted); a VM without one (a tap of a virtual machine: its sockets
// are in its own kernel) cannot be watched (ErrNotWatchable).
type TCPRetransmits struct {
	mu   sync.Mutex
	vms  []*diagVM
	cum  map[dataplane.Pair]uint64
	init bool
	last time.Time
}

var _ VMLossCounter = (*TCPRetransmits)(nil)

// DiscoverEvery is how often TCPRetransmits dumps the VMs' sockets.
const DiscoverEvery = 500 * time.Millisecond

type diagVM struct {
	name  string // the VM (AttachVM) or its namespace (NewTCPRetransmits)
	netns string // the namespace as it was named
	addr  netip.Addr
	// seen: its connections were dumped once (those found then had
	// their earlier retransmissions set aside)
	seen  bool
	h     *netlink.Handle
	get   *diagConn
	socks map[uint64]*diagSock // by cookie
}

type diagSock struct {
	id   tcpID
	prev uint32
}

// NewTCPRetransmits opens sock_diag netlink sockets in each VM's named
// namespace (NetnsDir/NS); vms maps namespace names to the VMs' addresses
// (none: a counter that counts the VMs attached later, AttachVM).
func NewTCPRetransmits(vms map[string]netip.Addr) (*TCPRetransmits, error) {
	t := &TCPRetransmits{cum: map[dataplane.Pair]uint64{}}
	for ns, addr := range vms {
		v, err := openDiagVM(ns, ns, addr)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("tcp retransmits: %w", err)
		}
		t.vms = append(t.vms, v)
	}
	return t, nil
}

// openDiagVM opens the sock_diag sockets of a VM in namespace netns (a
// name or a path).
func openDiagVM(name, netns string, addr netip.Addr) (*diagVM, error) {
	n, err := openNetns(netns)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	v := &diagVM{name: name, netns: netns, addr: addr, socks: map[uint64]*diagSock{}}
	err = n.Do(func() error {
		h, err := netlink.NewHandle(unix.NETLINK_INET_DIAG)
		if err != nil {
			return err
		}
		v.h = h
		v.get, err = newDiagConn()
		return err
	})
	if err != nil {
		v.close()
		return nil, fmt.Errorf("sock_diag sockets in netns %s: %w", netns, err)
	}
	return v, nil
}

func (v *diagVM) close() {
	if v.h != nil {
		v.h.Close()
		v.h = nil
	}
	if v.get != nil {
		v.get.close()
		v.get = nil
	}
}

// AttachVM implements VMLossCounter: the VM's connections in its
// namespace (vm.Netns) are watched from now on; what they retransmitted
// before is not counted. A VM without a namespace is refused with
// ErrNotWatchable.
func (t *TCPRetransmits) AttachVM(vm datapath.VM) error {
	if vm.Netns == "" {
		return fmt.Errorf("tcp retransmits: VM %s (device %s on the server): %w: its TCP sockets are not in a namespace of this kernel (no netns named); count losses with %q instead",
			vm.Name, vm.Interface, ErrNotWatchable, LossSeq)
	}
	if !vm.Addr.Is4() {
		return fmt.Errorf("tcp retransmits: VM %s: address %v is not IPv4", vm.Name, vm.Addr)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.vms {
		if o.name == vm.Name {
			if o.netns == vm.Netns && o.addr == vm.Addr {
				return nil
			}
			return fmt.Errorf("tcp retransmits: VM %s: watched in netns %s (%s) already; detach it first", vm.Name, o.netns, o.addr)
		}
	}
	v, err := openDiagVM(vm.Name, vm.Netns, vm.Addr)
	if err != nil {
		return fmt.Errorf("tcp retransmits: VM %s: %w", vm.Name, err)
	}
	// The connections it has now: their retransmissions so far happened
	// before it was watched.
	if err := t.discover(v); err != nil {
		v.close()
		return fmt.Errorf("tcp retransmits: VM %s: %w", vm.Name, err)
	}
	t.vms = append(t.vms, v)
	return nil
}

// DetachVM implements VMLossCounter: it closes the VM's sockets.
func (t *TCPRetransmits) DetachVM(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, v := range t.vms {
		if v.name == name {
			v.close()
			t.vms = slices.Delete(t.vms, i, i+1)
			return nil
		}
	}
	return nil
}

// VMs returns the names of the VMs (or namespaces, for those given to
// NewTCPRetransmits) it watches, sorted.
func (t *TCPRetransmits) VMs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.vms))
	for _, v := range t.vms {
		out = append(out, v.name)
	}
	slices.Sort(out)
	return out
}

// Side implements datapath.LossCounter: retransmissions are seen at the
// source.
func (t *TCPRetransmits) Side() mech.LossSide { return mech.LossAtSource }

// Lost implements datapath.LossCounter.
func (t *TCPRetransmits) Lost() (map[dataplane.Pair]uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dump := !t.init || time.Since(t.last) >= DiscoverEvery
	t.init = true
	if dump {
		t.last = time.Now()
	}
	for _, v := range t.vms {
		if dump {
			if err := t.discover(v); err != nil {
				return nil, err
			}
			continue
		}
		for c, s := range v.socks {
			tot, err := v.get.totalRetrans(s.id)
			if errors.Is(err, errNoSocket) {
				delete(v.socks, c)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("tcp retransmits in netns %s: %w", v.netns, err)
			}
			t.add(s, tot)
		}
	}
	out := make(map[dataplane.Pair]uint64, len(t.cum))
	for p, c := range t.cum {
		out[p] = c
	}
	return out, nil
}

func (t *TCPRetransmits) add(s *diagSock, tot uint32) {
	if tot > s.prev {
		t.cum[dataplane.Pair{Src: s.id.src, Dst: s.id.dst}] += uint64(tot - s.prev)
	}
	s.prev = tot
}

// discover dumps a VM's TCP sockets. The first dump of a VM sets aside
// what its connections retransmitted before it was watched.
func (t *TCPRetransmits) discover(v *diagVM) error {
	first := !v.seen
	socks, err := v.h.SocketDiagTCPInfo(unix.AF_INET)
	if err != nil && len(socks) == 0 {
		return fmt.Errorf("tcp retransmits: sock_diag dump in netns %s: %w", v.netns, err)
	}
	seen := make(map[uint64]*diagSock, len(socks))
	for _, r := range socks {
		m, ti := r.InetDiagMsg, r.TCPInfo
		if m == nil || ti == nil || m.State != 1 { // TCP_ESTABLISHED
			continue
		}
		src, ok1 := netip.AddrFromSlice(m.ID.Source.To4())
		dst, ok2 := netip.AddrFromSlice(m.ID.Destination.To4())
		if !ok1 || !ok2 || src != v.addr {
			continue
		}
		cookie := uint64(m.ID.Cookie[0]) | uint64(m.ID.Cookie[1])<<32
		s, known := v.socks[cookie]
		if !known {
			s = &diagSock{id: tcpID{src: src, dst: dst, sport: m.ID.SourcePort, dport: m.ID.DestinationPort, cookie: m.ID.Cookie}}
			if first {
				s.prev = ti.Total_retrans // what happened before the agent started
			}
		}
		t.add(s, ti.Total_retrans)
		seen[cookie] = s
	}
	v.socks = seen
	v.seen = true
	return nil
}

// Close implements datapath.LossCounter.
func (t *TCPRetransmits) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range t.vms {
		v.close()
	}
	t.vms = nil
	return nil
}
