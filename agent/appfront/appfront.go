// Package appfront is a host's front to the real appliances its VMs use:
// it steers the VMs' connections to an appliance's address to the host
// (datapath.Steering), relays them request by request through Pulsar's
// enforcer (package proxy: a multi-resource token bucket per flow, VM →
// appliance, at the central controller's allocation), and measures the
// flows for the controller (Pulsar §4.2's vectors, on the path the
// controller allocates on). The VMs connect to the appliance's address as
// they would without Bulkhead.
//
// A host agent under a controller runs one Front: Update with every model
// the controller sends (the real appliances, the host's VMs, the flows'
// paths), SetActions with every allocation, Collect with every report.
package appfront

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/proxy"
	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// Aliases map a protocol's request types (a Redis command, an HTTP
// method, lower case) to an appliance model's types, so that requests are
// charged with the virtual cost function of the type the model names: a
// Redis SET is a key-value store's put, an HTTP GET a file store's read.
var aliases = map[string]map[string]string{
	model.ProtoRedis: {"set": model.ReqPut, "get": model.ReqGet},
	model.ProtoHTTP:  {"get": model.ReqRead, "head": model.ReqRead, "put": model.ReqWrite},
}

// Config configures a Front.
type Config struct {
	// Host is the host's name: its VMs are those the model places on it.
	Host string
	// Steering takes the VMs' connections (required).
	Steering datapath.Steering
	// Source is the host's address the appliances route back to, which
	// the front connects to them from (invalid: the kernel chooses).
	Source netip.Addr
	// Clock drives the buckets and the statistics (default: the real
	// clock).
	Clock tokenbucket.TimerClock
	Log   *slog.Logger
}

// Front is one host's front to its VMs' real appliances.
type Front struct {
	cfg Config
	log *slog.Logger

	// who is who, read by the listeners' classification without mu
	who atomic.Pointer[table]

	mu   sync.Mutex
	p    *proxy.Proxy
	key  string // what p was made for (the appliances)
	apps map[string]*front
	// the latest actions, applied to every new proxy
	flows map[mech.FlowID][]float64
	def   float64
	bySrc map[string]float64
}

type vmInfo struct{ name, tenant string }

// table is what classifies connections: the host's VMs by address, the
// paths of their flows.
type table struct {
	vms   map[netip.Addr]vmInfo
	paths map[mech.FlowID][]mech.PathElem
}

// front is one appliance's listener.
type front struct {
	name   string
	ep     netip.AddrPort
	cancel context.CancelFunc
	done   chan struct{}
}

// New makes a Front that steers nothing yet.
func New(cfg Config) (*Front, error) {
	if cfg.Steering == nil {
		return nil, errors.New("appfront: no steering")
	}
	if cfg.Clock == nil {
		cfg.Clock = tokenbucket.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Front{cfg: cfg, log: cfg.Log.With("host", cfg.Host), apps: map[string]*front{}}, nil
}

// Update takes a model and the paths of the host's flows to appliances
// (as the controller allocates them): the host's VMs' connections to every
// real appliance are steered to a listener on its address and relayed
// through the enforcer; appliances that left are no longer steered.
func (f *Front) Update(ctx context.Context, m *model.Model, paths map[mech.FlowID][]mech.PathElem) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	vms := map[netip.Addr]vmInfo{}
	var vmAddrs []netip.Addr
	for _, v := range m.VMs() {
		if v.Host != f.cfg.Host {
			continue
		}
		for _, a := range v.Addrs {
			vms[a] = vmInfo{name: v.Name, tenant: v.Tenant}
			vmAddrs = append(vmAddrs, a)
		}
	}
	slices.SortFunc(vmAddrs, netip.Addr.Compare)
	f.who.Store(&table{vms: vms, paths: maps.Clone(paths)})

	var apps []proxy.Appliance
	want := map[string]netip.AddrPort{}
	key := ""
	for _, a := range m.Appliances {
		ep, ok := a.Endpoint()
		if !ok {
			continue
		}
		proto := proxy.RESP
		if a.Protocol == model.ProtoHTTP {
			proto = proxy.HTTP
		}
		want[a.Name] = ep
		apps = append(apps, proxy.Appliance{Name: a.Name, Protocol: proto, Cost: proxy.ModelCost(a, aliases[a.Protocol]),
			Dial: func(ctx context.Context) (net.Conn, error) { return f.cfg.Steering.Dial(ctx, f.cfg.Source, ep) }})
		key += fmt.Sprintf("%s|%v|%s|%+v\n", a.Name, ep, a.Protocol, a.VirtualCost)
	}
	var errs []error
	if key != f.key {
		// The appliances changed: a new enforcer (their connections
		// close; clients reconnect).
		f.stopLocked()
		f.key = key
		if len(apps) > 0 {
			p, err := proxy.New(proxy.Config{Clock: f.cfg.Clock, Logger: f.log}, apps...)
			if err != nil {
				return fmt.Errorf("appfront: %w", err)
			}
			f.p = p
			f.applyLocked()
		}
	}
	// Listeners first, then steering: a steered connection always finds
	// the listener.
	for name, ep := range want {
		if fr := f.apps[name]; fr == nil || fr.ep != ep {
			if err := f.listenLocked(ctx, name, ep); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := f.cfg.Steering.Steer(ep.Addr(), vmAddrs); err != nil {
			errs = append(errs, fmt.Errorf("appfront: steer to %s (%v): %w", name, ep, err))
		}
	}
	for name, fr := range f.apps {
		if _, ok := want[name]; !ok {
			fr.cancel()
			<-fr.done
			delete(f.apps, name)
		}
	}
	// Steering left for addresses no appliance has (an earlier agent's).
	steered, err := f.cfg.Steering.Steered()
	if err != nil {
		errs = append(errs, err)
	}
	for app := range steered {
		if !slices.ContainsFunc(slices.Collect(maps.Values(want)), func(ep netip.AddrPort) bool { return ep.Addr() == app }) {
			errs = append(errs, f.cfg.Steering.Steer(app, nil))
		}
	}
	return errors.Join(errs...)
}

// Restarts of a listener that stopped with an error: the first delay,
// doubled after each further failure up to the last (a listener that ran
// longer than that starts again from the first).
const (
	restartMin = 100 * time.Millisecond
	restartMax = 10 * time.Second
)

// listenLocked starts (or restarts) an appliance's listener. A listener
// that stops with an error (proxy.Listen returns on an Accept error it
// cannot retry; its connections close) is opened again, after a delay,
// until the front stops it.
func (f *Front) listenLocked(ctx context.Context, name string, ep netip.AddrPort) error {
	if fr := f.apps[name]; fr != nil {
		fr.cancel()
		<-fr.done
		delete(f.apps, name)
	}
	ln, err := f.cfg.Steering.Listen(ep)
	if err != nil {
		return fmt.Errorf("appfront: appliance %s: %w", name, err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	fr := &front{name: name, ep: ep, cancel: cancel, done: make(chan struct{})}
	f.apps[name] = fr
	p := f.p
	classify := func(c net.Conn) (proxy.Flow, error) { return f.classify(name, c) }
	go func() {
		defer close(fr.done)
		var delay time.Duration
		for {
			start := time.Now()
			err := p.Listen(lctx, ln, classify)
			if err == nil || lctx.Err() != nil {
				return // stopped, or its proxy closed
			}
			if time.Since(start) > restartMax {
				delay = 0
			}
			for {
				delay = min(max(2*delay, restartMin), restartMax)
				f.log.Warn("appliance front stopped: restarting", "appliance", name, "in", delay, "err", err)
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-lctx.Done():
					t.Stop()
					return
				}
				if ln, err = f.cfg.Steering.Listen(ep); err == nil {
					break
				}
				err = fmt.Errorf("appfront: appliance %s: %w", name, err)
			}
			f.log.Info("appliance front restarted", "appliance", name, "addr", ep)
		}
	}()
	f.log.Info("appliance front", "appliance", name, "addr", ep)
	return nil
}

// classify names a steered connection's flow: its source VM by address,
// the path the controller allocates on.
func (f *Front) classify(app string, c net.Conn) (proxy.Flow, error) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return proxy.Flow{}, fmt.Errorf("appfront: peer %v: %w", c.RemoteAddr(), err)
	}
	who := f.who.Load()
	if who == nil {
		return proxy.Flow{}, fmt.Errorf("appfront: connection to %s before any model", app)
	}
	vm, ok := who.vms[ap.Addr().Unmap()]
	if !ok {
		return proxy.Flow{}, fmt.Errorf("appfront: connection to %s from %v, not a VM of this host", app, ap.Addr())
	}
	id := mech.FlowID{Src: vm.name, Dst: app}
	path, ok := who.paths[id]
	if !ok {
		return proxy.Flow{}, fmt.Errorf("appfront: flow %s->%s: the controller gave no path", id.Src, id.Dst)
	}
	return proxy.Flow{ID: id, Tenant: vm.tenant, Path: path}, nil
}

// SetActions takes the controller's latest allocations (tokens/s per path
// element; one value: the same on every element) and default rates; the
// enforcer applies those of the flows to its appliances.
func (f *Front) SetActions(flows map[mech.FlowID][]float64, def float64, bySrc map[string]float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flows, f.def, f.bySrc = maps.Clone(flows), def, maps.Clone(bySrc)
	f.applyLocked()
}

func (f *Front) applyLocked() {
	if f.p == nil {
		return
	}
	if err := f.p.SetDefault(f.def, f.bySrc); err != nil {
		f.log.Warn("default rates not applied", "err", err)
	}
	who := f.who.Load()
	if who == nil {
		return
	}
	for id, r := range f.flows {
		path, ok := who.paths[id]
		if !ok {
			continue // not a flow to an appliance of this host's VMs
		}
		rates := r
		if len(r) == 1 && len(path) > 1 {
			rates = slices.Repeat(r, len(path))
		}
		if err := f.p.SetAllocation(id, rates); err != nil {
			f.log.Warn("allocation not applied", "flow", id, "err", err)
		}
	}
}

// Collect returns the flows' vectors since the previous Collect, on
// their paths (Pulsar §4.2).
func (f *Front) Collect() []mech.FlowObs {
	f.mu.Lock()
	p := f.p
	f.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Collect().Flows
}

// Close stops the listeners and the enforcer (their connections close;
// clients reconnect to the next agent's). With remove it also stops
// steering, so that the VMs reach the appliances directly again;
// without, their connections are refused until an agent listens again —
// an appliance is never reached unenforced.
func (f *Front) Close(remove bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	if remove {
		for _, fr := range f.apps {
			errs = append(errs, f.cfg.Steering.Steer(fr.ep.Addr(), nil))
		}
	}
	f.stopLocked()
	errs = append(errs, f.cfg.Steering.Close())
	return errors.Join(errs...)
}

func (f *Front) stopLocked() {
	for name, fr := range f.apps {
		fr.cancel()
		<-fr.done
		delete(f.apps, name)
	}
	if f.p != nil {
		_ = f.p.Close()
		f.p = nil
	}
	f.key = ""
}
