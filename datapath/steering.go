package datapath

import (
	"context"
	"net"
	"net/netip"
)

// Steering takes the connections of a server's VMs to a real appliance's
// address to the server itself, where the enforcer in front of the
// appliance (a proxy) accepts them on the appliance's address, and
// connects from the server to the appliance. The VMs connect to the
// appliance as they would without Bulkhead.
type Steering interface {
	// Listen opens a listener on the appliance's address and port that
	// receives the connections Steer takes.
	Listen(app netip.AddrPort) (net.Listener, error)
	// Steer takes the connections from exactly these VM addresses to
	// app (replacing app's earlier set; none: app is no longer steered).
	Steer(app netip.Addr, vms []netip.Addr) error
	// Steered returns what is steered now, by appliance address
	// (including what an earlier agent left).
	Steered() (map[netip.Addr][]netip.Addr, error)
	// Dial connects to the appliance from the server itself (not
	// steered), from address src (the server's address the appliance
	// routes back to; invalid: the kernel chooses).
	Dial(ctx context.Context, src netip.Addr, app netip.AddrPort) (net.Conn, error)
	// Close releases the steering's handles; the steering stays.
	Close() error
}
