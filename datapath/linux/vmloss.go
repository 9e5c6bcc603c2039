package linux

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
)

// VMLossCounter is a loss counter that follows the VMs of its server as
// they come and go: a Host tells it of every VM whose limiters it builds
// (Attach with an Interface) once they are built, and of the VM leaving
// (Detach, Close) before it removes them. VMs with limiters made for the
// Host (Config.VMs) are not told of: a counter for those is built
// knowing them (NewSeqGaps, NewTCPRetransmits with VMs).
type VMLossCounter interface {
	datapath.LossCounter
	// AttachVM starts counting a VM's losses. vm.Device is the VM's
	// device on the server as the data path found it (for a VM in a
	// namespace of its own, the server's side of its veth); Interface
	// and Netns are as the model names them. Attaching a VM counted
	// already, on the same device and namespace, is a no-op. An error
	// that wraps ErrNotWatchable says the counter cannot see this VM's
	// losses at all (the VM can still be enforced); any other error says
	// it could not start counting.
	AttachVM(vm datapath.VM) error
	// DetachVM stops counting a VM's losses and removes what the
	// counter put on its devices (a VM not counted: a no-op). Losses
	// counted so far stay in Lost's totals.
	DetachVM(name string) error
}

// pairFollower is a loss counter that counts only the pairs of the
// model (SeqGaps: eBPF maps that a VM's traffic must not fill): a Host
// tells it, for each VM it attaches, where the VM's pairs are — the
// pairs its limiter has (sent: the host agent gives it a class for each
// declared pair from the VM) and those its receive counters count
// (received: the agent asks for each declared pair into the VM) — and
// when the VM leaves. It reads them again whenever it counts.
type pairFollower interface {
	// followPairs follows the pairs of VM vm at addr (a VM followed
	// already: replaced). dev is its device on the server ("":
	// unknown); sent or received nil: none.
	followPairs(vm string, addr netip.Addr, dev string, sent, received pairLister)
	// unfollowPairs stops following them (a VM not followed: a no-op).
	unfollowPairs(vm string) error
}

// pairLister lists pairs: a VM's limiter (dataplane.Limiter) or receive
// counters (RXCounters).
type pairLister interface {
	Pairs() []datapath.Pair
}

// listers returns l's limiter and receive counters as pairLister, nil
// for those it has not (a nil pointer in an interface is not nil).
func (l Limiters) listers() (sent, received pairLister) {
	if l.TX != nil {
		sent = l.TX
	}
	if l.RX != nil {
		received = l.RX
	}
	return sent, received
}

// ErrNotWatchable is wrapped by VMLossCounter.AttachVM errors for a VM
// whose losses the counter cannot see (TCPRetransmits: a VM without a
// namespace of its own, whose sockets are in another kernel).
var ErrNotWatchable = errors.New("its losses cannot be counted by this loss counter")

// Loss counters by name (NewLossCounter).
const (
	// LossSeq counts gaps in per-pair sequence numbers stamped by eBPF
	// on the server's uplinks and counted at its VMs' devices (SeqGaps,
	// ElasticSwitch §6): at the destination, TCP and UDP, every VM.
	LossSeq = "seq"
	// LossTCP counts the TCP retransmissions of the server's VMs through
	// sock_diag in their namespaces (TCPRetransmits): at the source, TCP
	// only, VMs in a namespace of their own only.
	LossTCP = "tcp"
)

// NewLossCounter makes an empty loss counter of the given kind (LossSeq
// or LossTCP; "" is LossSeq) for the server whose namespace is ns, for a
// Host that builds its VMs' limiters (Config.Loss): it counts no VM
// until the Host attaches them. LossSeq stamps on the egress of every
// uplink (the server's devices toward the network, in ns: at least one)
// from now on; LossTCP needs neither ns nor uplinks. Close the counter
// (or the Host holding it) before ns.
func NewLossCounter(kind string, ns *dataplane.NS, uplinks []string) (VMLossCounter, error) {
	switch kind {
	case "", LossSeq:
		if ns == nil {
			return nil, errors.New("loss counter seq: no namespace")
		}
		return NewSeqGaps(ns, uplinks, nil)
	case LossTCP:
		return NewTCPRetransmits(nil)
	}
	return nil, fmt.Errorf("loss counter %q: want %q (eBPF sequence-number gaps at the receiver) or %q (TCP retransmissions at the sender)", kind, LossSeq, LossTCP)
}

// openNetns opens a VM's namespace as the model names it: a name in
// dataplane.NetnsDir, or the absolute path of the namespace's file.
func openNetns(netns string) (*dataplane.NS, error) {
	if strings.HasPrefix(netns, "/") {
		return dataplane.OpenNSPath(netns, netns)
	}
	return dataplane.OpenNS(netns)
}
