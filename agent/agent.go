package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
)

// Config is everything an agent needs. Rates the agent reads and sets on
// the data path are Scale × the model's units; the mechanism sees the
// model's units.
type Config struct {
	// Host is the server the agent runs for.
	Host string
	// Model is the declared model: every tenant and VM with its host,
	// addresses (the first IPv4 address names a VM's pairs; the host's
	// own VMs need one), device on its host (Interface: its counters are
	// the VM's) and guarantees.
	Model *model.Model
	// Pattern is the declared traffic pattern (pairs the operator said
	// would communicate); only reservation mechanisms use it.
	Pattern []mech.PairID
	// Mechanism makes the agent's mechanism (mech/all.New).
	Mechanism mech.Mechanism
	// Path is the server's data path. The agent owns it: Run and Close
	// close it, and so does New when it fails.
	Path datapath.Host
	// Listen opens the agent's UDP socket (e.g. inside the server's
	// network namespace); nil: no socket, messages to other hosts are
	// dropped (counted).
	Listen func() (net.PacketConn, error)
	// Peers resolves the UDP address of another host's agent (nil: none).
	// A message to a host without an agent is dropped (counted). The
	// agent resolves the model's other hosts (those of its VMs and those
	// it lists, model.Model.Hosts) when it starts, at every Update and
	// every step: a datagram from an address none of them resolves to
	// is dropped before it is read (counted as "sender"), and one is
	// accepted only from its sender's address (any port).
	Peers func(host string) (netip.AddrPort, bool)
	// Keys gives the key this host shares with a peer
	// (wireauth.PairKey; wireauth.KeyMap for keys handed out,
	// wireauth.Keys to derive them from a master secret). Every message
	// to a peer is sealed with its key, and a datagram is accepted only if
	// its tag verifies under the key of the sender it claims; a message
	// to or from a peer without a key is dropped (counted). Required with
	// Listen; called by the receiver and the steps at the same time.
	Keys func(peer string) ([]byte, bool)
	// Scale multiplies rates on the data path (default 1).
	Scale float64
	// HTTP, if set, is where the agent serves /metrics (Prometheus),
	// /state (JSON) and /healthz, in the caller's namespace.
	HTTP string
	// HTTPToken, if set, is the bearer token /metrics and /state require
	// (Authorization: Bearer TOKEN; Prometheus' authorization
	// credentials_file). /healthz needs none. An HTTP address off
	// loopback requires a token: /state and per-pair metrics describe
	// every tenant's traffic on the host.
	HTTPToken string
	// Restore puts every pair limiter the agent changed back to
	// unlimited and removes its schedulers when Run ends, and removes
	// what the data path built (datapath.Remover): the host's VMs then
	// run unlimited. Without it, Run ends by leaving the mechanism's
	// guarantee-safe settings in force (mech.Failsafe) and the data path
	// enforcing them, for the next agent to take over.
	Restore bool
	Logger  *slog.Logger
	// LoseSent is a fault to inject: the fraction of the control
	// messages the agent sends that it drops instead (after sealing and
	// counting them as sent), drawn from a stream seeded with LoseSeed —
	// to measure how a mechanism tolerates lost messages on real hosts,
	// whose kernels may lack netem. 0: none.
	LoseSent float64
	LoseSeed uint64
	// Trace, if set, receives one CSV line per egress pair per step:
	// time_s,host,src,dst,rate,limit,limiter_bound,losses (rates in Mbps
	// of the model's units), and one per VM with an egress limit or
	// ingress drops: time_s,host,vm,*,out_rate,egress_limit,false,in_drops.
	// Writes are serialized by the agent; share a Trace between agents
	// only through a writer safe for concurrent use.
	Trace io.Writer
}

// PeerMap resolves peers from a fixed map of host → agent address.
func PeerMap(peers map[string]netip.AddrPort) func(string) (netip.AddrPort, bool) {
	return func(h string) (netip.AddrPort, bool) {
		a, ok := peers[h]
		return a, ok
	}
}

// Agent is a host agent: every mechanism period it reads the server's
// counters through its data path into a mech.HostObs, steps the
// mechanism's agent through the driver core (drive.Host), which applies
// the limits and schedulers it returns through the data path (and
// re-applies those the data path refused or lost), and sends its messages
// to the other agents over UDP.
type Agent struct {
	cfg Config
	// keep: Run ends by leaving the guarantee-safe settings in force even
	// with Config.Restore (KeepOnStop: the next agent takes over at once)
	keep atomic.Bool
	drv  *drive.Host
	enf  *enforcer
	log  *slog.Logger
	conn net.PacketConn // nil: no socket
	met  *agentMetrics
	// traceErr is the first failed write to cfg.Trace (tracing stops).
	traceErr error
	epoch    int64
	seq      uint64
	lose     *rand.Rand // LoseSent's stream (nil: none); steps only
	foreign  int64      // the mechanism's foreign reports counted so far (steps only)

	// mu serializes steps and model updates: everything below.
	mu     sync.Mutex
	model  *model.Model
	vms    map[string]*vmPath
	byAddr map[netip.Addr]string
	addrOf map[string]netip.Addr
	// stale are pair limiters the data path refused to remove, by pair:
	// the source VM's name (retried every step)
	stale map[datapath.Pair]string
	obsState

	// peerHosts are the model's hosts other than this one, sorted, and
	// peerAddrs their agents' addresses as last resolved (invalid: none);
	// under mu.
	peerHosts []string
	peerAddrs []netip.Addr
	// peerAt maps each address in peerAddrs to its hosts (more than one
	// only when agents share an address, as tests on the loopback
	// interface do), for the receiver; replaced whole when they change.
	peerAt atomic.Pointer[map[netip.Addr][]string]

	inMu      sync.Mutex
	peerSeq   map[string]*sequence
	delivered atomic.Int64 // messages delivered since the last step

	stMu  sync.Mutex
	state State
	// totals are every VM's received and sent bits since the start
	// (record; under mu, as steps are).
	totals map[string][2]float64
}

// vmPath is one of the host's VMs and its data path.
type vmPath struct {
	name         string
	addr         netip.Addr
	dev          string                 // the VM's device on the server, for its counters
	iface, netns string                 // as the model names them
	counted      map[datapath.Pair]bool // pairs its receive counters were asked to count
	// the latest readings of its limiters and receive counters and their
	// pairs' indices (observe reuses them while they read the same
	// pairs)
	tx, rx pairCache
	// inLo and inHi delimit its pairs in the latest observation's Ingress
	inLo, inHi int
	datapath.VMPath
}

// addressing maps the model's VMs to their first IPv4 addresses and
// back. The host's VMs must have one; addresses must be unique.
func addressing(m *model.Model, host string) (byAddr map[netip.Addr]string, addrOf map[string]netip.Addr, err error) {
	byAddr, addrOf = map[netip.Addr]string{}, map[string]netip.Addr{}
	for _, v := range m.VMs() {
		i := slices.IndexFunc(v.Addrs, netip.Addr.Is4)
		if i < 0 {
			if v.Host == host {
				return nil, nil, fmt.Errorf("VM %s has no IPv4 address in the model", v.Name)
			}
			continue
		}
		a := v.Addrs[i]
		if o, dup := byAddr[a]; dup {
			return nil, nil, fmt.Errorf("VMs %s and %s have the same address %v", o, v.Name, a)
		}
		byAddr[a], addrOf[v.Name] = v.Name, a
	}
	return byAddr, addrOf, nil
}

// New checks the configuration, builds the mechanism's agent on the
// driver core, attaches the host's VMs to the data path and opens the
// UDP socket. On error it closes cfg.Path.
func New(cfg Config) (_ *Agent, err error) {
	defer func() {
		if err != nil && cfg.Path != nil {
			err = errors.Join(err, cfg.Path.Close())
		}
	}()
	if cfg.Host == "" || cfg.Model == nil || cfg.Mechanism == nil || cfg.Path == nil {
		return nil, errors.New("agent: config needs a host, a model, a mechanism and a data path")
	}
	if cfg.Scale == 0 {
		cfg.Scale = 1
	}
	if !(cfg.Scale > 0) {
		return nil, fmt.Errorf("agent %s: scale %v", cfg.Host, cfg.Scale)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Peers == nil {
		cfg.Peers = PeerMap(nil)
	}
	if cfg.Listen != nil && cfg.Keys == nil {
		return nil, fmt.Errorf("agent %s: a UDP socket (Config.Listen) needs the keys shared with the peers (Config.Keys) to authenticate messages", cfg.Host)
	}
	if cfg.Keys == nil {
		cfg.Keys = func(string) ([]byte, bool) { return nil, false }
	}
	a := &Agent{
		cfg: cfg, log: cfg.Logger.With("host", cfg.Host, "mechanism", cfg.Mechanism.Name()),
		epoch: time.Now().UnixNano(), vms: map[string]*vmPath{}, peerSeq: map[string]*sequence{}, stale: map[datapath.Pair]string{},
		obsState: newObsState(),
	}
	a.enf = newEnforcer(a)
	if !(cfg.LoseSent >= 0 && cfg.LoseSent <= 1) {
		return nil, fmt.Errorf("agent %s: fraction of sent messages to lose %v, want one in [0, 1]", cfg.Host, cfg.LoseSent)
	}
	if cfg.LoseSent > 0 {
		a.lose = rand.New(rand.NewPCG(cfg.LoseSeed, 0x6c6f7365))
	}
	if a.byAddr, a.addrOf, err = addressing(cfg.Model, cfg.Host); err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.Host, err)
	}
	a.drv, err = drive.NewHost(cfg.Mechanism, drive.Env(cfg.Model, cfg.Host, cfg.Pattern), a.enf)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.Host, err)
	}
	a.model = cfg.Model
	a.setPeerHosts(cfg.Model)
	a.met = newMetrics(cfg.Host, a.drv)
	if _, err := a.attach(cfg.Model.VMsOn(cfg.Host)); err != nil {
		return nil, err
	}
	if err := a.scheduleVMs(); err != nil {
		return nil, err
	}
	if err := a.countPairs(); err != nil {
		return nil, err
	}
	if cfg.Listen != nil {
		if a.conn, err = cfg.Listen(); err != nil {
			return nil, fmt.Errorf("agent %s: listen: %w", cfg.Host, err)
		}
	}
	a.state = State{Host: cfg.Host, Mechanism: cfg.Mechanism.Name(), Period: a.drv.Period().String()}
	return a, nil
}

// attach attaches the VMs of the host that are not attached yet and
// returns their names.
func (a *Agent) attach(vms []model.VM) ([]string, error) {
	var added []string
	for _, v := range vms {
		if _, ok := a.vms[v.Name]; ok {
			continue
		}
		addr := a.addrOf[v.Name]
		// The VM's device on the server: its interface, unless that is
		// inside the VM's own namespace (the data path then finds it).
		dev := v.Interface
		if v.Netns != "" {
			dev = ""
		}
		p, err := a.cfg.Path.Attach(datapath.VM{Name: v.Name, Addr: addr, Device: dev, Interface: v.Interface, Netns: v.Netns})
		if err != nil {
			return added, fmt.Errorf("agent %s: attach VM %s: %w", a.cfg.Host, v.Name, err)
		}
		if p.Device != "" {
			dev = p.Device
		}
		a.vms[v.Name] = &vmPath{name: v.Name, addr: addr, dev: dev, iface: v.Interface, netns: v.Netns, VMPath: p}
		a.vmList = nil
		added = append(added, v.Name)
	}
	return added, nil
}

// scheduleVMs tells the schedulers which VMs the host has.
func (a *Agent) scheduleVMs() error {
	vms := make(map[string]netip.Addr, len(a.vms))
	for n, v := range a.vms {
		vms[n] = v.addr
	}
	for _, d := range []mech.Direction{mech.Egress, mech.Ingress} {
		if s := a.cfg.Path.Scheduler(d); s != nil {
			if err := s.SetVMs(vms); err != nil {
				return fmt.Errorf("agent %s: %s scheduler: %w", a.cfg.Host, dirName(d), err)
			}
		}
	}
	return nil
}

// countPairs asks the receive counters that count only the pairs they
// are told (datapath.PairCounterSet: a data path that built them from
// the VM's interface) for every pair into a local VM from another VM of
// its tenant, and to stop counting pairs that are no longer declared.
func (a *Agent) countPairs() error {
	var errs []error
	for _, v := range a.vms {
		errs = append(errs, a.sendPairs(v))
		cs, ok := v.RX.(datapath.PairCounterSet)
		if !ok {
			continue
		}
		want := map[datapath.Pair]bool{}
		for _, p := range a.declaredPairs(v.name) {
			if p.Dst == v.addr {
				want[p] = true
			}
		}
		if v.counted == nil {
			v.counted = map[datapath.Pair]bool{}
		}
		for p := range want {
			if !v.counted[p] {
				if err := cs.CountPair(p); err != nil {
					errs = append(errs, fmt.Errorf("agent %s: count pair %v into VM %s: %w", a.cfg.Host, p, v.name, err))
					continue
				}
				v.counted[p] = true
			}
		}
		for p := range v.counted {
			if !want[p] {
				if err := cs.RemovePair(p); err != nil {
					errs = append(errs, fmt.Errorf("agent %s: stop counting pair %v into VM %s: %w", a.cfg.Host, p, v.name, err))
					continue
				}
				delete(v.counted, p)
			}
		}
	}
	return errors.Join(errs...)
}

// declaredPairs are the pairs to and from a local VM that its data path
// counts: those of the declared pattern (Config.Pattern, or the tenant's
// in the model) when there is one, else every pair with another VM of
// its tenant.
func (a *Agent) declaredPairs(vm string) []datapath.Pair {
	mv, t, ok := a.model.VM(vm)
	if !ok || mv.Host != a.cfg.Host {
		return nil
	}
	var pattern []mech.PairID
	if a.cfg.Pattern != nil {
		pattern = a.cfg.Pattern
	} else {
		for _, p := range t.Pattern {
			pattern = append(pattern, mech.PairID{Src: p.Src, Dst: p.Dst})
		}
	}
	var out []datapath.Pair
	add := func(src, dst string) {
		sa, ok1 := a.addrOf[src]
		da, ok2 := a.addrOf[dst]
		if ok1 && ok2 && src != dst {
			out = append(out, datapath.Pair{Src: sa, Dst: da})
		}
	}
	if len(pattern) > 0 {
		for _, p := range pattern {
			if p.Src == vm || p.Dst == vm {
				add(p.Src, p.Dst)
			}
		}
		return out
	}
	for _, o := range t.VMs {
		add(vm, o.Name)
		add(o.Name, vm)
	}
	return out
}

// sendPairs gives the VM's pair limiter a class, unlimited, for every
// pair from the VM to another VM of its tenant that has none, so that the
// mechanism sees what each declared pair sends before it limits any (a
// data path that built the limiter itself starts with no class; one the
// testbed built has them all, and limits in force are never touched).
// Under a mechanism that sets no pair limit (Gatekeeper, DRX, none) it
// lifts the limits an earlier agent left on the limiter (one of another
// mechanism, whose failsafe held each pair at its guarantee): nothing
// would ever change them, and a VM that sent to fewer peers than then
// would stay below its guarantee.
func (a *Agent) sendPairs(v *vmPath) error {
	if v.TX == nil {
		return nil
	}
	have, err := v.TX.Counters()
	if err != nil {
		return fmt.Errorf("agent %s: pair limiter of VM %s: %w", a.cfg.Host, v.name, err)
	}
	var errs []error
	if !a.cfg.Mechanism.Capabilities().PairLimits {
		for _, p := range slices.SortedFunc(maps.Keys(have), datapath.ComparePairs) {
			if c := have[p]; c.Ceil > 0 && c.Ceil < datapath.MaxRate {
				if err := v.TX.SetPairRate(p, math.Inf(1)); err != nil {
					errs = append(errs, fmt.Errorf("agent %s: lift the limit an earlier agent left on pair %v from VM %s: %w", a.cfg.Host, p, v.name, err))
				}
			}
		}
	}
	for _, p := range a.declaredPairs(v.name) {
		if _, ok := have[p]; ok || p.Src != v.addr {
			continue
		}
		if err := v.TX.SetPairRate(p, math.Inf(1)); err != nil {
			errs = append(errs, fmt.Errorf("agent %s: pair %v from VM %s: %w", a.cfg.Host, p, v.name, err))
		}
	}
	return errors.Join(errs...)
}

// Update hands a new model to the mechanism at runtime: tenants and VMs
// added, removed or their guarantees, addresses or devices changed
// (drive.Host.Update). The host's new VMs are attached to the data path
// first; once the mechanism has the model, the limits of VMs that left
// are removed and the VMs that left the host detached; a VM whose
// address or device changed is detached and attached anew, and the
// limits of pairs whose addresses changed move to the new addresses.
// A mechanism whose agents cannot take a new model, or a new VM the data
// path cannot enforce, is refused and the old model stays.
func (a *Agent) Update(m *model.Model) error {
	if m == nil {
		return fmt.Errorf("agent %s: update without a model", a.cfg.Host)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Peers may have moved with the update (the caller's resolver
	// changed): resolved anew, for the model in force after it.
	defer func() { a.setPeerHosts(a.model) }()
	byAddr, addrOf, err := addressing(m, a.cfg.Host)
	if err != nil {
		return fmt.Errorf("agent %s: update: %w", a.cfg.Host, err)
	}
	// While the update moves VMs and addresses, limits are set by name
	// (enforcer.limiterOf), not through the pairs' records, which are
	// made anew after it (their readings carried over).
	a.resetPairs()
	// Until the mechanism has the new model and the limits of VMs that
	// left are removed, VMs are addressed where the data path has them:
	// VMs that stay at their old addresses, new ones at theirs.
	oldBy, oldOf := a.byAddr, a.addrOf
	a.byAddr, a.addrOf = union(byAddr, oldBy), union(addrOf, oldOf)
	added, aerr := a.attach(m.VMsOn(a.cfg.Host))
	updates := a.drv.Stats().Updates
	var uerr error
	if aerr == nil {
		uerr = a.drv.Update(drive.Env(m, a.cfg.Host, a.cfg.Pattern))
	}
	if aerr != nil || a.drv.Stats().Updates == updates {
		// Refused: the old model stays.
		var errs []error
		for _, n := range added {
			errs = append(errs, a.cfg.Path.Detach(n))
			delete(a.vms, n)
			a.vmList = nil
		}
		a.byAddr, a.addrOf = oldBy, oldOf
		err := errors.Join(append([]error{aerr, uerr}, errs...)...)
		a.log.Warn("model update refused", "err", err)
		return err
	}
	// The mechanism has the new model (uerr: limits of VMs that left
	// that the data path refused to remove).
	errs := []error{uerr}
	known := map[string]bool{}
	var moved []model.VM // VMs of the host whose address or device changed
	for _, v := range m.VMs() {
		known[v.Name] = true
		if o := a.vms[v.Name]; o != nil && v.Host == a.cfg.Host && (o.addr != addrOf[v.Name] || o.iface != v.Interface || o.netns != v.Netns) {
			moved = append(moved, v)
		}
	}
	for n := range a.vms {
		if v, _, ok := m.VM(n); !ok || v.Host != a.cfg.Host {
			errs = append(errs, a.detach(n))
		}
	}
	readd, rerrs := a.unaddress(known, addrOf, moved)
	errs = append(errs, rerrs...)
	for _, v := range moved {
		errs = append(errs, a.detach(v.Name))
	}
	a.byAddr, a.addrOf, a.model = byAddr, addrOf, m
	a.resetPairs()
	if _, err := a.attach(moved); err != nil {
		a.log.Error("a VM whose address or device changed could not be attached again; it is not enforced", "err", err)
		errs = append(errs, err)
	}
	a.enf.forget(func(vm string) bool { return known[vm] }, func(vm string) bool { return a.vms[vm] != nil })
	errs = append(errs, a.readdress(readd), a.scheduleVMs(), a.countPairs())
	a.prune(oldBy)
	a.prunePeers(m)
	a.log.Info("model updated", "tenants", len(m.Tenants), "vms", len(a.vms), "added", added, "moved", len(moved))
	return errors.Join(errs...)
}

// prunePeers forgets the message sequences of hosts that are not m's.
func (a *Agent) prunePeers(m *model.Model) {
	hosts := modelHosts(m)
	a.inMu.Lock()
	maps.DeleteFunc(a.peerSeq, func(h string, _ *sequence) bool { return !hosts[h] })
	a.inMu.Unlock()
}

// modelHosts are the hosts of m: those of its VMs and those it lists.
func modelHosts(m *model.Model) map[string]bool {
	hosts := map[string]bool{}
	for _, v := range m.VMs() {
		hosts[v.Host] = true
	}
	for _, h := range m.Hosts {
		hosts[h.Name] = true
	}
	return hosts
}

// setPeerHosts makes m's hosts other than this one the agent's peers and
// resolves their addresses.
func (a *Agent) setPeerHosts(m *model.Model) {
	hosts := modelHosts(m)
	delete(hosts, a.cfg.Host)
	a.peerHosts = slices.Sorted(maps.Keys(hosts))
	a.resolvePeers(true)
}

// resolvePeers resolves the peers' addresses (Config.Peers) and, when
// they changed or force is set, hands the receiver their new map.
func (a *Agent) resolvePeers(force bool) {
	if len(a.peerAddrs) != len(a.peerHosts) {
		a.peerAddrs, force = make([]netip.Addr, len(a.peerHosts)), true
	}
	for i, h := range a.peerHosts {
		var ad netip.Addr
		if p, ok := a.cfg.Peers(h); ok {
			ad = p.Addr().Unmap()
		}
		if ad != a.peerAddrs[i] {
			a.peerAddrs[i], force = ad, true
		}
	}
	if !force {
		return
	}
	at := make(map[netip.Addr][]string, len(a.peerHosts))
	for i, h := range a.peerHosts {
		if ad := a.peerAddrs[i]; ad.IsValid() {
			at[ad] = append(at[ad], h)
		}
	}
	a.peerAt.Store(&at)
}

// detach releases a VM that left the host, or whose address or device
// changed, from the data path (its pair limiters go) and forgets it.
func (a *Agent) detach(vm string) error {
	err := a.cfg.Path.Detach(vm)
	delete(a.vms, vm)
	a.vmList = nil
	a.forgetVM(vm)
	if err != nil {
		return fmt.Errorf("agent %s: detach VM %s: %w", a.cfg.Host, vm, err)
	}
	return nil
}

// unaddress removes, before the address map changes, the limiters at
// their old addresses of the pairs whose destination left the model or
// whose addresses change (addrOf: the new addresses); those of sources
// that are detached and attached anew (moved) go with them. It returns
// the pairs that stay and change addresses or sources, whose limits
// readdress re-applies.
func (a *Agent) unaddress(known map[string]bool, addrOf map[string]netip.Addr, moved []model.VM) (readd []mech.PairID, errs []error) {
	for _, id := range slices.SortedFunc(maps.Keys(a.enf.limits), comparePairIDs) {
		v := a.vms[id.Src]
		old, ok := a.pairAddr(id)
		if v == nil || v.TX == nil || !ok {
			continue
		}
		detached := slices.ContainsFunc(moved, func(m model.VM) bool { return m.Name == id.Src })
		if known[id.Dst] {
			if !detached && old == (datapath.Pair{Src: addrOf[id.Src], Dst: addrOf[id.Dst]}) {
				continue
			}
			readd = append(readd, id)
		}
		if !detached {
			errs = append(errs, a.removePair(v, old))
		}
	}
	return readd, errs
}

// readdress re-applies the limits of pairs at their new addresses. One
// the data path refuses is not in force: the driver core re-applies it
// at the next step.
func (a *Agent) readdress(pairs []mech.PairID) error {
	var errs []error
	for _, id := range pairs {
		r, ok := a.enf.limits[id]
		if !ok {
			continue
		}
		if err := a.enf.SetLimit(mech.Limit{Kind: mech.PairLimit, Pair: id, Rate: r}); err != nil {
			a.enf.dropLimit(id)
			errs = append(errs, fmt.Errorf("agent %s: move the limit of pair %s->%s to its new addresses: %w", a.cfg.Host, id.Src, id.Dst, err))
		}
	}
	return errors.Join(errs...)
}

// removePair removes a pair's limiter from VM v's data path. One the data
// path refuses to remove is logged and kept, to be retried at the next
// steps (retryRemovals).
func (a *Agent) removePair(v *vmPath, p datapath.Pair) error {
	err := v.TX.RemovePair(p)
	if err == nil {
		delete(a.stale, p)
		return nil
	}
	a.stale[p] = v.name
	a.met.errors.WithLabelValues("remove").Inc()
	a.log.Warn("pair limiter not removed; retried at the next steps", "pair", p.String(), "vm", v.name, "err", err)
	return fmt.Errorf("agent %s: remove the limiter of pair %s of VM %s: %w", a.cfg.Host, p, v.name, err)
}

// retryRemovals retries the removals of pair limiters the data path
// refused, until it takes them. A removal is dropped when its VM left or
// moved (detaching it removed its limiters) or its pair is limited again.
func (a *Agent) retryRemovals() error {
	var errs []error
	for _, p := range datapath.SortedPairs(a.stale) {
		v := a.vms[a.stale[p]]
		id, named := a.pairName(p)
		_, limited := a.enf.limits[id]
		if v == nil || v.TX == nil || v.addr != p.Src || named && limited {
			delete(a.stale, p)
			continue
		}
		if err := v.TX.RemovePair(p); err != nil {
			a.met.errors.WithLabelValues("remove").Inc()
			errs = append(errs, fmt.Errorf("agent %s: remove the limiter of pair %s of VM %s (retry): %w", a.cfg.Host, p, v.name, err))
			continue
		}
		delete(a.stale, p)
		a.log.Info("pair limiter removed at last", "pair", p.String(), "vm", v.name)
	}
	return errors.Join(errs...)
}

func comparePairIDs(x, y mech.PairID) int {
	return cmp.Or(strings.Compare(x.Src, y.Src), strings.Compare(x.Dst, y.Dst))
}

// union returns the union of two maps (b's values win).
func union[K comparable, V any](a, b map[K]V) map[K]V {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// Close releases what New opened (the UDP socket and the data path) for
// an agent that will not Run; Run releases them itself.
func (a *Agent) Close() error {
	var err error
	if a.conn != nil {
		err = a.conn.Close()
	}
	return errors.Join(err, a.cfg.Path.Close())
}

// pairName names a pair by its VMs (false if an address is unknown).
func (a *Agent) pairName(p datapath.Pair) (mech.PairID, bool) {
	s, ok1 := a.byAddr[p.Src]
	d, ok2 := a.byAddr[p.Dst]
	return mech.PairID{Src: s, Dst: d}, ok1 && ok2
}

// pairAddr returns a pair's addresses.
func (a *Agent) pairAddr(p mech.PairID) (datapath.Pair, bool) {
	s, ok1 := a.addrOf[p.Src]
	d, ok2 := a.addrOf[p.Dst]
	return datapath.Pair{Src: s, Dst: d}, ok1 && ok2
}

// Addr returns the agent's UDP address (invalid without a socket).
func (a *Agent) Addr() netip.AddrPort {
	if a.conn == nil {
		return netip.AddrPort{}
	}
	return addrPort(a.conn.LocalAddr())
}

func addrPort(ad net.Addr) netip.AddrPort {
	if u, ok := ad.(*net.UDPAddr); ok {
		return u.AddrPort()
	}
	p, _ := netip.ParseAddrPort(ad.String())
	return p
}

// Mech returns the mechanism's agent (for inspection in tests; it must not
// be used while Run runs).
func (a *Agent) Mech() mech.Agent { return a.drv.Agent() }

// Stats returns what the driver core did so far: steps, writes to the data
// path, failed writes and retries, model updates.
func (a *Agent) Stats() drive.Stats { return a.drv.Stats() }

// Run runs the agent until ctx ends: the receiver in the background, a
// step every mechanism period, the HTTP server if configured. It closes
// the socket and the data path before it returns. It leaves the
// mechanism's guarantee-safe settings in force (mech.Failsafe: each pair
// at its guarantee, for ElasticSwitch), so that the host's VMs stay
// limited until the next agent takes over; with Restore it removes its
// limits instead. The error is nil when ctx ended it.
func (a *Agent) Run(ctx context.Context) (err error) {
	defer func() {
		err = errors.Join(err, a.traceErr, a.leave())
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	if a.conn != nil {
		defer a.conn.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.receive()
		}()
	}
	if a.cfg.HTTP != "" {
		srv, ln, err := a.httpServer()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("http server", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	a.start = time.Now()
	if err := a.baseline(); err != nil {
		return err
	}
	period := a.drv.Period()
	a.mu.Lock()
	nvms := len(a.vms) // Update may change them meanwhile
	a.mu.Unlock()
	a.log.Info("agent running", "period", period, "listen", a.Addr(), "vms", nvms)
	_ = drive.Pace(ctx, drive.NewPacer(a.start, period), func(now time.Time, skipped bool) {
		if skipped {
			a.met.late.Inc()
		}
		if err := a.step(now); err != nil {
			// A failed read or write of the data path is logged and
			// counted; the next period tries again (the driver core
			// re-applies what was refused).
			a.met.errors.WithLabelValues("step").Inc()
			a.log.Warn("step", "err", err)
		}
	})
	a.log.Info("agent stopped", "steps", a.met.nSteps.Load())
	return nil
}

// KeepOnStop makes Run end as without Config.Restore: the mechanism's
// guarantee-safe settings left in force for the next agent. A driver
// that stops an agent only to start another at once (a new model it
// cannot take, a new mechanism) calls it before it stops the agent, so
// that the host's VMs do not run unlimited in between.
func (a *Agent) KeepOnStop() { a.keep.Store(true) }

// leave is the end of Run: with Restore the agent's limits and what the
// data path built are removed; otherwise the mechanism's guarantee-safe
// settings are applied and left in force. The data path is closed.
func (a *Agent) leave() error {
	if a.cfg.Restore && !a.keep.Load() {
		a.restore()
		if r, ok := a.cfg.Path.(datapath.Remover); ok {
			return r.Remove()
		}
		return a.cfg.Path.Close()
	}
	a.mu.Lock()
	n, err := a.drv.Failsafe()
	a.mu.Unlock()
	if err != nil {
		a.log.Warn("some guarantee-safe settings were not applied on stop; the last ones stay in force", "err", err)
	}
	a.log.Info("left guarantee-safe settings in force", "settings", n)
	return a.cfg.Path.Close()
}

// Apply builds an agent without a socket, steps its mechanism once on a
// first observation (no traffic measured yet), applies what it sets and
// closes it: the settings a mechanism makes from the model alone (a
// reservation mechanism's limits, a scheduler's weights), with no agent
// left running. Messages to other hosts are dropped.
func Apply(cfg Config) (drive.Stats, error) {
	cfg.Listen, cfg.HTTP, cfg.Restore = nil, "", false
	a, err := New(cfg)
	if err != nil {
		return drive.Stats{}, err
	}
	a.start = time.Now()
	err = a.step(a.start)
	return a.Stats(), errors.Join(err, a.Close())
}

// Step runs one period at now by hand, for callers that pace the agent
// themselves (benchmarks, tests on a real data path): the first call
// starts the agent's clock and reads the counters' baseline. It must not
// be called while Run runs.
func (a *Agent) Step(now time.Time) error {
	if a.start.IsZero() {
		a.start = now
	}
	return a.step(now)
}

// step is one period: retry the removals the data path refused,
// observe, step the mechanism through the driver core (which applies its
// settings), send its messages.
func (a *Agent) step(now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t0 := time.Now()
	a.resolvePeers(false)
	rerr := a.retryRemovals()
	obs, err := a.observe(now)
	if err != nil {
		return errors.Join(rerr, err)
	}
	inbox := a.delivered.Swap(0)
	msgs, serr := a.drv.Step(obs)
	if r, ok := a.drv.Agent().(mech.Rejecter); ok {
		if n := r.Foreign(); n > a.foreign {
			a.met.dropN(DropForeign, n-a.foreign)
			a.foreign = n
		}
	}
	if serr != nil {
		a.met.errors.WithLabelValues("apply").Inc()
	}
	a.send(msgs)
	a.met.step()
	took := time.Since(t0)
	a.met.stepNanos.Add(int64(took))
	a.met.stepSeconds.Observe(took.Seconds())
	a.record(obs, int(inbox), len(msgs))
	if a.cfg.Trace != nil && a.traceErr == nil {
		a.trace(obs)
	}
	return errors.Join(rerr, serr)
}

func dirName(d mech.Direction) string {
	if d == mech.Ingress {
		return "ingress"
	}
	return "egress"
}

// send encodes and sends the mechanism's messages; one to this host is
// queued for the next step directly.
func (a *Agent) send(msgs []mech.Message) {
	for _, m := range msgs {
		if m.To == a.cfg.Host {
			a.deliver(m)
			continue
		}
		to, ok := a.cfg.Peers(m.To)
		if !ok || a.conn == nil {
			a.met.sendErrors.WithLabelValues("unknown-host").Inc()
			a.log.Debug("message to a host without an agent", "to", m.To)
			continue
		}
		key, ok := a.cfg.Keys(m.To)
		if !ok {
			a.met.sendErrors.WithLabelValues("no-key").Inc()
			a.log.Debug("message to a host without a key", "to", m.To)
			continue
		}
		a.seq++
		b, err := EncodeMessage(key, a.cfg.Host, m.To, a.epoch, a.seq, m.Body)
		if err != nil {
			a.met.sendErrors.WithLabelValues("encode").Inc()
			a.log.Warn("encode message", "err", err)
			continue
		}
		if a.lose != nil && a.lose.Float64() < a.cfg.LoseSent {
			a.met.sent.Inc() // lost on the way, as far as the sender knows
			a.met.lost.Inc()
			continue
		}
		if _, err := a.conn.WriteTo(b, net.UDPAddrFromAddrPort(to)); err != nil {
			a.met.sendErrors.WithLabelValues("send").Inc()
			a.log.Debug("send message", "to", m.To, "err", err)
			continue
		}
		a.met.sent.Inc()
		a.met.sentBytes.Add(float64(len(b)))
	}
}

// deliver queues a message for the next step (the driver core bounds the
// inbox: drive.MaxInbox).
func (a *Agent) deliver(m mech.Message) bool {
	if !a.drv.Deliver(m) {
		a.met.drop(DropOverflow)
		return false
	}
	a.delivered.Add(1)
	return true
}

// receive reads datagrams until the socket is closed.
func (a *Agent) receive() {
	buf := make([]byte, 65536)
	for {
		n, from, err := a.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			a.log.Warn("receive", "err", err)
			continue
		}
		a.handle(buf[:n], addrPort(from))
	}
}

// handle validates one datagram and queues its message; anything wrong is
// counted by reason and dropped. The sender's sequence is checked, and
// moved on, only for a datagram from that sender's address whose tag
// verifies under the key of the sender it claims.
func (a *Agent) handle(b []byte, from netip.AddrPort) {
	e, err := a.open(b, from)
	if err == nil {
		a.inMu.Lock()
		sq := a.peerSeq[e.From]
		if sq == nil {
			sq = &sequence{}
			a.peerSeq[e.From] = sq
		}
		why := sq.check(e.Epoch, e.Seq, e.Sent, time.Now().UnixNano())
		a.inMu.Unlock()
		if why != "" {
			err = wireErr(why, "message %d of epoch %d sent at %d from %s", e.Seq, e.Epoch, e.Sent, e.From)
		}
	}
	if err != nil {
		a.met.drop(reason(err))
		a.log.Debug("message dropped", "from", from, "err", err)
		return
	}
	if a.deliver(mech.Message{From: e.From, To: e.To, Body: e.Body}) {
		a.met.received.Inc()
	}
}

// errNoPeerAddr is the error of a datagram from an address that is no
// peer's.
var errNoPeerAddr error = &WireError{Reason: DropSender, Err: errors.New("not from a peer agent's address")}

// open authenticates and checks one datagram: its source address a
// peer's (a map lookup, before anything else: a flood from elsewhere, of
// datagrams as large as they come, costs no parsing and no hashing), the
// sender it claims the peer at that address, the key shared with it, the
// tag, the format, the recipient and the body.
func (a *Agent) open(b []byte, from netip.AddrPort) (Envelope, error) {
	var hosts []string
	if at := a.peerAt.Load(); at != nil {
		hosts = (*at)[from.Addr().Unmap()]
	}
	if len(hosts) == 0 {
		return Envelope{}, errNoPeerAddr
	}
	sender, err := Sender(b)
	if err != nil {
		return Envelope{}, err
	}
	if !slices.Contains(hosts, sender) {
		return Envelope{}, wireErr(DropSender, "sender %q from %v, the address of %v", sender, from.Addr(), hosts)
	}
	key, ok := a.cfg.Keys(sender)
	if !ok {
		return Envelope{}, wireErr(DropAuth, "no key for sender %q", sender)
	}
	e, err := DecodeMessage(b, a.cfg.Host, key)
	if err != nil {
		return e, err
	}
	if e.From != sender {
		// Sender and DecodeMessage read the same bytes the same way:
		// this cannot happen, and is refused if it does.
		return e, wireErr(DropSender, "sender %q read as %q", e.From, sender)
	}
	return e, nil
}

// sortedVMs returns the host's VMs by name (kept until a VM comes or
// goes).
func (a *Agent) sortedVMs() []*vmPath {
	if a.vmList == nil {
		a.vmList = slices.SortedFunc(maps.Values(a.vms), func(x, y *vmPath) int { return strings.Compare(x.name, y.name) })
	}
	return a.vmList
}

// trace writes the step's egress pairs to cfg.Trace.
func (a *Agent) trace(obs *mech.HostObs) {
	var b []byte
	for _, o := range obs.Egress {
		lim := o.Limit
		if l, ok := a.enf.limits[o.Pair]; ok {
			lim = l // after this step's changes
		}
		b = fmt.Appendf(b, "%.3f,%s,%s,%s,%.1f,%.1f,%t,%g\n", obs.Now.Seconds(), a.cfg.Host, o.Pair.Src, o.Pair.Dst,
			o.Rate/1e6, lim/1e6, o.LimiterBound, o.Losses)
	}
	for _, v := range obs.VMs {
		lim, ok := a.enf.vmLimits[mech.Egress][v.VM]
		if !ok && v.InDrops == 0 {
			continue
		}
		if !ok {
			lim = mech.Unlimited
		}
		b = fmt.Appendf(b, "%.3f,%s,%s,*,%.1f,%.1f,false,%.1f\n", obs.Now.Seconds(), a.cfg.Host, v.VM, v.OutRate/1e6, lim/1e6, v.InDrops/1e6)
	}
	if len(b) > 0 {
		if _, err := a.cfg.Trace.Write(b); err != nil {
			// Stop tracing rather than leave a trace with holes; Run
			// returns the error.
			a.traceErr = fmt.Errorf("agent %s: trace: %w", a.cfg.Host, err)
			a.log.Error("trace write failed; tracing stopped", "err", err)
		}
	}
}
