package dataplane

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// MaxLinkName is the longest interface name Linux accepts (IFNAMSIZ-1).
const MaxLinkName = 15

// DefaultTxQLen is the transmit queue length given to the devices created
// here (veth and IFB); it bounds HTB's direct queue.
const DefaultTxQLen = 1000

func checkLinkName(name string) error {
	if name == "" || len(name) > MaxLinkName {
		return fmt.Errorf("interface name %q: must be 1 to %d bytes", name, MaxLinkName)
	}
	return nil
}

// AddVeth creates a veth pair with name in n and peerName in peer, both up.
// The pair is created directly in the two namespaces, never in the
// caller's.
func (n *NS) AddVeth(name string, peer *NS, peerName string) error {
	if err := checkLinkName(name); err != nil {
		return fmt.Errorf("netns %s: add veth: %w", n.Name, err)
	}
	if err := checkLinkName(peerName); err != nil {
		return fmt.Errorf("netns %s: add veth: %w", n.Name, err)
	}
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name, TxQLen: DefaultTxQLen},
		PeerName:      peerName,
		PeerNamespace: netlink.NsFd(int(peer.h)),
		PeerTxQLen:    DefaultTxQLen,
	}
	if err := n.nl.LinkAdd(v); err != nil {
		return fmt.Errorf("netns %s: add veth %s <-> %s/%s: %w", n.Name, name, peer.Name, peerName, err)
	}
	if err := n.SetUp(name); err != nil {
		return err
	}
	return peer.SetUp(peerName)
}

// AddIFB creates an IFB device (the target of ingress redirection) in n,
// up, with the default transmit queue length.
func (n *NS) AddIFB(name string) error {
	if err := checkLinkName(name); err != nil {
		return fmt.Errorf("netns %s: add ifb: %w", n.Name, err)
	}
	if err := n.nl.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name, TxQLen: DefaultTxQLen}}); err != nil {
		return fmt.Errorf("netns %s: add ifb %s: %w", n.Name, name, err)
	}
	return n.SetUp(name)
}

// DeleteLink deletes the named device.
func (n *NS) DeleteLink(name string) error {
	l, err := n.link(name)
	if err != nil {
		return err
	}
	if err := n.nl.LinkDel(l); err != nil {
		return fmt.Errorf("netns %s: delete link %s: %w", n.Name, name, err)
	}
	return nil
}

// SetUp brings the named device up.
func (n *NS) SetUp(name string) error {
	l, err := n.link(name)
	if err != nil {
		return err
	}
	if err := n.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("netns %s: set %s up: %w", n.Name, name, err)
	}
	return nil
}

// LinkIndex returns the interface index of the named device.
func (n *NS) LinkIndex(name string) (int, error) {
	l, err := n.link(name)
	if err != nil {
		return 0, err
	}
	return l.Attrs().Index, nil
}

// DevCounters returns every device's byte counters in the namespace, by
// name (datapath.DevCounters: Rx received, Tx transmitted, what the
// netlink package's LinkList reads as a link's statistics), on the
// namespace's hot-path socket: one dump of the devices' statistics
// alone, parsed by hand, named by a dump of the links made again only
// when a link changes (fastNL.devStats).
func (n *NS) DevCounters() (map[string]datapath.DevCounters, error) {
	f, err := n.fastSocket()
	if err != nil {
		return nil, err
	}
	out := map[string]datapath.DevCounters{}
	if err := f.devStats(func(name string, c datapath.DevCounters) { out[name] = c }); err != nil {
		return nil, fmt.Errorf("netns %s: %w", n.Name, err)
	}
	return out, nil
}

// Links returns the names of the devices in the namespace.
func (n *NS) Links() ([]string, error) {
	ls, err := n.nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("netns %s: list links: %w", n.Name, err)
	}
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Attrs().Name
	}
	return out, nil
}

func (n *NS) link(name string) (netlink.Link, error) {
	l, err := n.nl.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("netns %s: link %s: %w", n.Name, name, err)
	}
	return l, nil
}

// AddAddr assigns an IPv4 address with its prefix length to the device.
func (n *NS) AddAddr(dev string, addr netip.Prefix) error {
	l, err := n.link(dev)
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), addr.Addr().BitLen())}}
	if err := n.nl.AddrAdd(l, a); err != nil {
		return fmt.Errorf("netns %s: add address %s to %s: %w", n.Name, addr, dev, err)
	}
	return nil
}

// Route is a static IPv4 route: to Dst via the gateway Via out of Dev, in
// routing table Table (0: main).
type Route struct {
	Dst   netip.Prefix
	Via   netip.Addr
	Dev   string
	Table int
	// RTOMin, when set, is the least retransmission timeout of TCP
	// connections over the route (the rto_min route metric, locked so
	// that TCP uses it; whole milliseconds).
	RTOMin time.Duration
	// CongestionControl, when set, is the TCP congestion control of
	// connections over the route (the congctl route metric), whatever the
	// namespace's default.
	CongestionControl string
}

// AddRoute installs a route (replacing one to the same destination).
func (n *NS) AddRoute(r Route) error {
	l, err := n.link(r.Dev)
	if err != nil {
		return err
	}
	nr := &netlink.Route{
		LinkIndex: l.Attrs().Index,
		Dst:       prefixNet(r.Dst),
		Gw:        r.Via.AsSlice(),
		Table:     r.Table,
	}
	if r.RTOMin > 0 {
		nr.RtoMin = int(max(r.RTOMin.Milliseconds(), 1))
		nr.RtoMinLock = true
	}
	nr.Congctl = r.CongestionControl
	if err := n.nl.RouteReplace(nr); err != nil {
		return fmt.Errorf("netns %s: route %s via %s dev %s table %d: %w", n.Name, r.Dst, r.Via, r.Dev, r.Table, err)
	}
	return nil
}

// Rule is a policy routing rule: packets from Src to Dst look up Table.
type Rule struct {
	Src, Dst netip.Prefix
	Table    int
	Priority int
}

// AddRule installs a policy routing rule.
func (n *NS) AddRule(r Rule) error {
	nr := netlink.NewRule()
	nr.Family = unix.AF_INET
	nr.Src = prefixNet(r.Src)
	nr.Dst = prefixNet(r.Dst)
	nr.Table = r.Table
	nr.Priority = r.Priority
	if err := n.nl.RuleAdd(nr); err != nil {
		return fmt.Errorf("netns %s: rule from %s to %s table %d: %w", n.Name, r.Src, r.Dst, r.Table, err)
	}
	return nil
}

// prefixNet converts a prefix to a *net.IPNet; the zero prefix gives nil
// (any), as does 0.0.0.0/0 for the default route.
func prefixNet(p netip.Prefix) *net.IPNet {
	if !p.IsValid() {
		return nil
	}
	p = p.Masked()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// SetGSOMaxSize bounds the size of the segmentation-offload packets the
// device accepts (IPv4 and IPv6): TCP senders behind it then hand the
// stack at most that many bytes at once, which makes emulated queues
// behave more like real ones (fewer 64 KB bursts).
func (n *NS) SetGSOMaxSize(dev string, bytes int) error {
	l, err := n.link(dev)
	if err != nil {
		return err
	}
	if err := n.nl.LinkSetGSOMaxSize(l, bytes); err != nil {
		return fmt.Errorf("netns %s: set gso_max_size of %s to %d: %w", n.Name, dev, bytes, err)
	}
	if err := n.nl.LinkSetGSOIPv4MaxSize(l, bytes); err != nil {
		return fmt.Errorf("netns %s: set gso_ipv4_max_size of %s to %d: %w", n.Name, dev, bytes, err)
	}
	return nil
}
