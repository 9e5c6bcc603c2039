package fake

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
)

// Steering is a datapath.Steering on loopback, for tests without root:
// the listener for an appliance is a loopback port (ListenAddr says which:
// what the VMs would reach at the appliance's address), Dial connects to
// the address Real maps the appliance to, and Steer records what is
// steered.
type Steering struct {
	mu   sync.Mutex
	real map[netip.AddrPort]string
	lns  map[netip.AddrPort]string
	st   map[netip.Addr][]netip.Addr
}

// NewSteering makes a loopback steering; real maps appliances' endpoints
// to the addresses where they really listen; left is what an earlier
// agent left steered.
func NewSteering(real map[netip.AddrPort]string, left map[netip.Addr][]netip.Addr) *Steering {
	st := map[netip.Addr][]netip.Addr{}
	for a, v := range left {
		st[a] = slices.Clone(v)
	}
	return &Steering{real: maps.Clone(real), lns: map[netip.AddrPort]string{}, st: st}
}

// Listen implements datapath.Steering. A later listener for the same
// appliance (an agent restarted) takes the same loopback port, as the
// real steering keeps the appliance's address.
func (s *Steering) Listen(app netip.AddrPort) (net.Listener, error) {
	s.mu.Lock()
	at := s.lns[app]
	s.mu.Unlock()
	if at == "" {
		at = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", at)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.lns[app] = ln.Addr().String()
	s.mu.Unlock()
	return ln, nil
}

// ListenAddr returns where the listener for app is ("" if none was
// opened).
func (s *Steering) ListenAddr(app netip.AddrPort) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lns[app]
}

// Steer implements datapath.Steering.
func (s *Steering) Steer(app netip.Addr, vms []netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(vms) == 0 {
		delete(s.st, app)
		return nil
	}
	s.st[app] = slices.Clone(vms)
	return nil
}

// Steered implements datapath.Steering.
func (s *Steering) Steered() (map[netip.Addr][]netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[netip.Addr][]netip.Addr{}
	for a, v := range s.st {
		out[a] = slices.Clone(v)
	}
	return out, nil
}

// Dial implements datapath.Steering.
func (s *Steering) Dial(ctx context.Context, _ netip.Addr, app netip.AddrPort) (net.Conn, error) {
	s.mu.Lock()
	addr, ok := s.real[app]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fake steering: no real address for %v", app)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Close implements datapath.Steering.
func (s *Steering) Close() error { return nil }
