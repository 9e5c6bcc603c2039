package agent

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Side is where a loss counter detects losses.
type Side int

// Sides of a pair.
const (
	// AtSource: losses are known at the source host; the agent reports
	// them in the pair's egress observation (mech.HostObs.Egress), where
	// ElasticSwitch's default congestion source ("egress") reads them.
	AtSource Side = iota
	// AtDestination: losses are detected at the destination host (e.g.
	// gaps in per-pair sequence numbers, ElasticSwitch §6); the agent
	// reports them in the ingress observation, and the mechanism feeds
	// them back to the source (ElasticSwitch with congestion: receiver).
	AtDestination
)

// LossCounter is a source of per-VM-pair packet losses for one host.
// Lost returns, for the pairs it has seen, the packets detected lost since
// the counter was made (cumulative counts; the agent takes differences
// between steps). Pairs are by address.
type LossCounter interface {
	Side() Side
	Lost() (map[dataplane.Pair]uint64, error)
	Close() error
}

// TCPRetransmits is a LossCounter of the TCP segments that the sender
// VMs' connections retransmitted (tcp_info's total_retrans, read with
// sock_diag netlink dumps of each local VM's namespace), attributed to
// VM pairs by the connections' addresses. It sees TCP only: an
// unresponsive UDP sender's losses are invisible to it.
//
// A retransmission stands for a segment the network lost (or one TCP
// believed lost: spurious retransmissions count too). The testbed's pair
// limiters sit on the VMs' interfaces, where TCP's small-queue budget
// holds the connection back instead of the limiter's queue dropping, so
// the retransmissions are the network's losses, not the limiter's. It
// is the first loss source of the agent, until per-pair sequence-number
// gaps (ElasticSwitch §6) are counted in eBPF at the receivers.
type TCPRetransmits struct {
	mu   sync.Mutex
	vms  []*diagVM
	cum  map[dataplane.Pair]uint64
	init bool
}

type diagVM struct {
	name string
	addr netip.Addr
	h    *netlink.Handle
	prev map[uint64]uint32 // socket cookie → total_retrans
}

// NewTCPRetransmits opens a sock_diag netlink socket in each VM's named
// namespace (NetnsDir/NS); vms maps namespace names to the VMs' addresses.
func NewTCPRetransmits(vms map[string]netip.Addr) (*TCPRetransmits, error) {
	t := &TCPRetransmits{cum: map[dataplane.Pair]uint64{}}
	for ns, addr := range vms {
		h, err := netns.GetFromPath(filepath.Join(dataplane.NetnsDir, ns))
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("tcp retransmits: open netns %s: %w", ns, err)
		}
		nh, err := netlink.NewHandleAt(h, unix.NETLINK_INET_DIAG)
		h.Close()
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("tcp retransmits: sock_diag socket in %s: %w", ns, err)
		}
		t.vms = append(t.vms, &diagVM{name: ns, addr: addr, h: nh, prev: map[uint64]uint32{}})
	}
	return t, nil
}

// Side implements LossCounter: retransmissions are seen at the source.
func (t *TCPRetransmits) Side() Side { return AtSource }

// Lost implements LossCounter.
func (t *TCPRetransmits) Lost() (map[dataplane.Pair]uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := !t.init
	t.init = true
	for _, v := range t.vms {
		socks, err := v.h.SocketDiagTCPInfo(unix.AF_INET)
		if err != nil && len(socks) == 0 {
			return nil, fmt.Errorf("tcp retransmits: sock_diag dump in %s: %w", v.name, err)
		}
		seen := make(map[uint64]uint32, len(socks))
		for _, s := range socks {
			m, ti := s.InetDiagMsg, s.TCPInfo
			if m == nil || ti == nil {
				continue
			}
			src, ok1 := netip.AddrFromSlice(m.ID.Source.To4())
			dst, ok2 := netip.AddrFromSlice(m.ID.Destination.To4())
			if !ok1 || !ok2 || src != v.addr {
				continue
			}
			cookie := uint64(m.ID.Cookie[0]) | uint64(m.ID.Cookie[1])<<32
			tot := ti.Total_retrans
			seen[cookie] = tot
			prev, known := v.prev[cookie]
			switch {
			case known && tot >= prev:
				t.cum[dataplane.Pair{Src: src, Dst: dst}] += uint64(tot - prev)
			case !known && !first:
				// a connection born since the last dump
				t.cum[dataplane.Pair{Src: src, Dst: dst}] += uint64(tot)
			}
		}
		v.prev = seen
	}
	out := make(map[dataplane.Pair]uint64, len(t.cum))
	for p, c := range t.cum {
		out[p] = c
	}
	return out, nil
}

// Close implements LossCounter.
func (t *TCPRetransmits) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range t.vms {
		v.h.Close()
	}
	t.vms = nil
	return nil
}
