package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Steering of VMs' connections to an appliance's address to a proxy on
// the server: a policy rule per VM sends what the VM sends to the
// appliance's address to SteerTable, where a local route delivers it to
// the server itself; the proxy listens on the appliance's address
// (IP_TRANSPARENT: the address is not the server's, and its replies leave
// from it), and its own
// connections to the appliance, which come from the server, follow the
// main table out. Nothing else changes: other VMs, other destinations and
// the server's own traffic are routed as before.
const (
	// SteerTable is the routing table of the steered destinations.
	SteerTable = 7471
	// SteerPriority is the priority of the steering rules (before the
	// main table's 32766).
	SteerPriority = 7471
)

// SteerRule is one steering rule: connections from VM to App go to the
// server.
type SteerRule struct {
	VM, App netip.Addr
}

// AddSteerLocal makes app a local destination in SteerTable (idempotent).
func (n *NS) AddSteerLocal(app netip.Addr) error {
	lo, err := n.link("lo")
	if err != nil {
		return err
	}
	r := &netlink.Route{LinkIndex: lo.Attrs().Index, Dst: prefixNet(netip.PrefixFrom(app, app.BitLen())),
		Table: SteerTable, Type: unix.RTN_LOCAL, Scope: netlink.SCOPE_HOST}
	if err := n.nl.RouteReplace(r); err != nil {
		return fmt.Errorf("netns %s: local route %s table %d: %w", n.Name, app, SteerTable, err)
	}
	return nil
}

// DeleteSteerLocal removes app from SteerTable (absent is not an error).
func (n *NS) DeleteSteerLocal(app netip.Addr) error {
	lo, err := n.link("lo")
	if err != nil {
		return err
	}
	r := &netlink.Route{LinkIndex: lo.Attrs().Index, Dst: prefixNet(netip.PrefixFrom(app, app.BitLen())),
		Table: SteerTable, Type: unix.RTN_LOCAL, Scope: netlink.SCOPE_HOST}
	if err := n.nl.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("netns %s: delete local route %s table %d: %w", n.Name, app, SteerTable, err)
	}
	return nil
}

// SteerLocals lists the destinations in SteerTable.
func (n *NS) SteerLocals() ([]netip.Addr, error) {
	rs, err := n.nl.RouteListFiltered(unix.AF_UNSPEC, &netlink.Route{Table: SteerTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("netns %s: list table %d: %w", n.Name, SteerTable, err)
	}
	var out []netip.Addr
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		if a, ok := netip.AddrFromSlice(r.Dst.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

func steerRule(s SteerRule) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = unix.AF_INET
	if s.VM.Is6() {
		r.Family = unix.AF_INET6
	}
	r.Src = prefixNet(netip.PrefixFrom(s.VM, s.VM.BitLen()))
	r.Dst = prefixNet(netip.PrefixFrom(s.App, s.App.BitLen()))
	r.Table = SteerTable
	r.Priority = SteerPriority
	return r
}

// AddSteerRule adds a steering rule (an existing one is kept).
func (n *NS) AddSteerRule(s SteerRule) error {
	if err := n.nl.RuleAdd(steerRule(s)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("netns %s: rule from %s to %s table %d: %w", n.Name, s.VM, s.App, SteerTable, err)
	}
	return nil
}

// DeleteSteerRule removes a steering rule (absent is not an error).
func (n *NS) DeleteSteerRule(s SteerRule) error {
	if err := n.nl.RuleDel(steerRule(s)); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns %s: delete rule from %s to %s: %w", n.Name, s.VM, s.App, err)
	}
	return nil
}

// SteerRules lists the steering rules (those into SteerTable).
func (n *NS) SteerRules() ([]SteerRule, error) {
	var out []SteerRule
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := n.nl.RuleListFiltered(fam, &netlink.Rule{Table: SteerTable}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("netns %s: list rules: %w", n.Name, err)
		}
		for _, r := range rs {
			if r.Src == nil || r.Dst == nil {
				continue
			}
			vm, ok1 := netip.AddrFromSlice(r.Src.IP)
			app, ok2 := netip.AddrFromSlice(r.Dst.IP)
			if ok1 && ok2 {
				out = append(out, SteerRule{VM: vm.Unmap(), App: app.Unmap()})
			}
		}
	}
	return out, nil
}

// ListenTransparent opens a TCP listener in the namespace on an address
// that need not be the namespace's own: the appliance's, for the
// connections the steering rules deliver. IP_TRANSPARENT (it needs
// CAP_NET_ADMIN) both lets it bind there and lets its connections send
// from that address (IP_FREEBIND alone binds, but the kernel finds no
// route for a SYN-ACK from an address that is not local).
func (n *NS) ListenTransparent(addr netip.AddrPort) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			level, opt := unix.IPPROTO_IP, unix.IP_TRANSPARENT
			if addr.Addr().Is6() {
				level, opt = unix.IPPROTO_IPV6, unix.IPV6_TRANSPARENT
			}
			serr = unix.SetsockoptInt(int(fd), level, opt, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	var ln net.Listener
	err := n.Do(func() (err error) {
		ln, err = lc.Listen(context.Background(), "tcp", addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns %s: listen on %v: %w", n.Name, addr, err)
	}
	return ln, nil
}

// DialTCP connects from the namespace, from address src if it is valid.
func (n *NS) DialTCP(ctx context.Context, src netip.Addr, addr netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() (err error) {
		var d net.Dialer
		if src.IsValid() {
			d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
		}
		c, err = d.DialContext(ctx, "tcp", addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns %s: connect to %v: %w", n.Name, addr, err)
	}
	return c, nil
}
