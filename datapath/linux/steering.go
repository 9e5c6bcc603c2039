package linux

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/bulkhead-dc/bulkhead/dataplane"
)

// Steering is datapath.Steering over policy routing in the server's
// namespace (dataplane's steering: a rule per VM and appliance into
// dataplane.SteerTable, a local route there for the appliance's address,
// a transparent listener on it).
type Steering struct {
	ns      *dataplane.NS
	release func()
	mu      sync.Mutex
}

// NewSteering steers in ns; release, if not nil, is called by Close.
func NewSteering(ns *dataplane.NS, release func()) *Steering {
	return &Steering{ns: ns, release: release}
}

// Listen implements datapath.Steering.
func (s *Steering) Listen(app netip.AddrPort) (net.Listener, error) {
	return s.ns.ListenTransparent(app)
}

// Dial implements datapath.Steering.
func (s *Steering) Dial(ctx context.Context, src netip.Addr, app netip.AddrPort) (net.Conn, error) {
	return s.ns.DialTCP(ctx, src, app)
}

// Steer implements datapath.Steering: it adds the missing rules, removes
// those of VMs no longer listed, and the appliance's local route with
// the last rule.
func (s *Steering) Steer(app netip.Addr, vms []netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules, err := s.ns.SteerRules()
	if err != nil {
		return err
	}
	var errs []error
	if len(vms) > 0 {
		if err := s.ns.AddSteerLocal(app); err != nil {
			return err
		}
	}
	for _, vm := range vms {
		if !slices.Contains(rules, dataplane.SteerRule{VM: vm, App: app}) {
			errs = append(errs, s.ns.AddSteerRule(dataplane.SteerRule{VM: vm, App: app}))
		}
	}
	for _, r := range rules {
		if r.App == app && !slices.Contains(vms, r.VM) {
			errs = append(errs, s.ns.DeleteSteerRule(r))
		}
	}
	if len(vms) == 0 {
		errs = append(errs, s.ns.DeleteSteerLocal(app))
	}
	return errors.Join(errs...)
}

// Steered implements datapath.Steering.
func (s *Steering) Steered() (map[netip.Addr][]netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules, err := s.ns.SteerRules()
	if err != nil {
		return nil, err
	}
	locals, err := s.ns.SteerLocals()
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr][]netip.Addr{}
	for _, a := range locals {
		out[a] = nil
	}
	for _, r := range rules {
		out[r.App] = append(out[r.App], r.VM)
	}
	return out, nil
}

// Close implements datapath.Steering.
func (s *Steering) Close() error {
	if s.release != nil {
		s.release()
	}
	return nil
}
