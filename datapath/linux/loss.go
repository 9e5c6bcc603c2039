package linux

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

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
type TCPRetransmits struct {
	mu   sync.Mutex
	vms  []*diagVM
	cum  map[dataplane.Pair]uint64
	init bool
	last time.Time
}

// DiscoverEvery is how often TCPRetransmits dumps the VMs' sockets.
const DiscoverEvery = 500 * time.Millisecond

type diagVM struct {
	name  string
	addr  netip.Addr
	h     *netlink.Handle
	get   *diagConn
	socks map[uint64]*diagSock // by cookie
}

type diagSock struct {
	id   tcpID
	prev uint32
}

// NewTCPRetransmits opens sock_diag netlink sockets in each VM's named
// namespace (NetnsDir/NS); vms maps namespace names to the VMs' addresses.
func NewTCPRetransmits(vms map[string]netip.Addr) (*TCPRetransmits, error) {
	t := &TCPRetransmits{cum: map[dataplane.Pair]uint64{}}
	for ns, addr := range vms {
		n, err := dataplane.OpenNS(ns)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("tcp retransmits: %w", err)
		}
		v := &diagVM{name: ns, addr: addr, socks: map[uint64]*diagSock{}}
		err = n.Do(func() error {
			h, err := netlink.NewHandle(unix.NETLINK_INET_DIAG)
			if err != nil {
				return err
			}
			v.h = h
			v.get, err = newDiagConn()
			return err
		})
		n.Close()
		if err != nil {
			if v.h != nil {
				v.h.Close()
			}
			t.Close()
			return nil, fmt.Errorf("tcp retransmits: sock_diag sockets in %s: %w", ns, err)
		}
		t.vms = append(t.vms, v)
	}
	return t, nil
}

// Side implements datapath.LossCounter: retransmissions are seen at the
// source.
func (t *TCPRetransmits) Side() mech.LossSide { return mech.LossAtSource }

// Lost implements datapath.LossCounter.
func (t *TCPRetransmits) Lost() (map[dataplane.Pair]uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := !t.init
	t.init = true
	dump := first || time.Since(t.last) >= DiscoverEvery
	if dump {
		t.last = time.Now()
	}
	for _, v := range t.vms {
		if dump {
			if err := t.discover(v, first); err != nil {
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
				return nil, fmt.Errorf("tcp retransmits in %s: %w", v.name, err)
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

// discover dumps a VM's TCP sockets.
func (t *TCPRetransmits) discover(v *diagVM, first bool) error {
	socks, err := v.h.SocketDiagTCPInfo(unix.AF_INET)
	if err != nil && len(socks) == 0 {
		return fmt.Errorf("tcp retransmits: sock_diag dump in %s: %w", v.name, err)
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
	return nil
}

// Close implements datapath.LossCounter.
func (t *TCPRetransmits) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range t.vms {
		if v.h != nil {
			v.h.Close()
		}
		if v.get != nil {
			v.get.close()
		}
	}
	t.vms = nil
	return nil
}
