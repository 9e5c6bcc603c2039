package linux

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/dataplane/pairbytes"
	"github.com/bulkhead-dc/bulkhead/dataplane/seqloss"
)

// ProvisionMajor is the major handle of the HTB qdiscs a Host builds
// itself on a VM's devices (Attach with an Interface): a root HTB of
// this handle on such a device is Bulkhead's (one left by an agent that
// died is replaced); a root qdisc of any other handle that is not the
// kernel's default is someone else's, and the VM is refused rather than
// have it destroyed.
const ProvisionMajor = 0xb4

// IngressPrio is the priority of the redirection filter a Host puts on
// the ingress hook of a VM's device on the server (a VM without a
// namespace): every IPv4 packet the VM sends goes to its IFB (IFBName).
const IngressPrio = 0xb4

// VMTSQBytes is the TCP small-queue budget
// (net.ipv4.tcp_limit_output_bytes) set in the namespace of a VM whose
// pair limiter is on its own interface: the most a TCP socket keeps
// queued below it, so that the limiter's queue (VMLimiterQueue) holds
// TCP back without dropping. The kernel's default (4 MB) would let a few
// connections overflow any reasonable limiter queue. (The testbed's
// testbed.VMTSQBytes.)
const VMTSQBytes = 256 << 10

// VMLimiterQueue is the queue of a pair class on a VM's interface: room
// for the TCP small-queue budget of 16 connections (the testbed's
// testbed.VMLimiterQueue).
const VMLimiterQueue = 16 * VMTSQBytes

// tsqSysctl is the TCP small-queue budget's file, in the calling
// thread's namespace.
const tsqSysctl = "/proc/sys/net/ipv4/tcp_limit_output_bytes"

// IFBName is the IFB device a Host makes in the server's namespace for
// the pair limiter of a VM whose device on the server is iface (a VM
// without a namespace): "bhx" and the FNV-1a hash of the name in hex, 11
// bytes, the same for the same device in every run (one left by an agent
// that died is replaced).
func IFBName(iface string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(iface))
	return fmt.Sprintf("bhx%08x", h.Sum32())
}

// provisioned is what a Host built itself for one VM.
type provisioned struct {
	vm   datapath.VM
	srv  *dataplane.NS
	vmNS *dataplane.NS // the VM's namespace (opened here; nil: none)
	dev  string        // the VM's device on the server
	ifb  string        // the IFB of its pair limiter ("": none made)
	// redirect: the redirection filter on dev's ingress was added (to
	// the IFB of the pair limiter, or of the egress scheduler);
	// clsact: the clsact qdisc on dev is this Host's to remove (once
	// empty: the loss counter's program goes first).
	redirect, clsact bool
	// sched: the per-VM schedulers' IFBs its traffic is redirected to
	// (nil: none), node its redirection filter on the uplinks.
	sched *schedIFBs
	node  uint16
	// lossWatched: the loss counter was told of the VM (VMLossCounter).
	lossWatched bool
	tsq         *nsTSQ // the VM namespace's TCP small-queue budget (nil: untouched)
	tx          *dataplane.Limiter
	rx          *RXCounters
}

func (p *provisioned) path() datapath.VMPath {
	vp := datapath.VMPath{Device: p.dev}
	if p.tx != nil {
		vp.TX = p.tx
	}
	if p.rx != nil {
		vp.RX = p.rx
	}
	return vp
}

// RXPrio is the tc priority of a receive counter's program on the egress
// hook of a VM's device on the server (package pairbytes).
const RXPrio = pairbytes.DefaultPrio

// RXCounters are a VM's receive counters: the pairbytes program on the
// egress hook of the VM's device on the server (what the server delivers
// to the VM), counting the pairs its user asks for
// (datapath.PairCounterSet) from when they are asked for. A pair's Bytes
// are the bytes of its frames once segmented and Packets the frames,
// what an HTB class for the pair there would count; no qdisc is put on
// the device.
//
// Only the pairs asked for are counted one by one (pairbytes'
// declared pairs; the rest is one overflow count), so that what a VM's
// peers send — from any address — can neither fill the program's maps
// nor grow the agent's view beyond its declared pairs, and a reading is a
// copy out of the mapped counters, with no system call and no walk of a
// hash table.
type RXCounters struct {
	c  *pairbytes.Counter
	mu sync.Mutex
	// sorted is the pairs asked for in ComparePairs order, at is each
	// one's index there (sorted nil: to be sorted again, for ReadPairs)
	want   map[datapath.Pair]bool
	sorted []datapath.Pair
	at     map[datapath.Pair]int
	// order is, for the k-th pair the counter gives (its slot order,
	// which changes only with the pairs), its index in sorted: learned
	// at the first reading after a change, checked at every reading
	order []int
}

var (
	_ datapath.PairCounterSet = (*RXCounters)(nil)
	_ datapath.PairReader     = (*RXCounters)(nil)
)

// NewRXCounters attaches receive counters to dev (in ns), the VM's device
// on the server: a counter a process that died left there is replaced.
// Close removes them.
func NewRXCounters(ns *dataplane.NS, dev string) (*RXCounters, error) {
	c, err := pairbytes.AttachConfig(ns, dev, pairbytes.Config{Hook: dataplane.Egress, Prio: RXPrio, Replace: true, DeclaredOnly: true})
	if err != nil {
		return nil, fmt.Errorf("receive counters: %w", err)
	}
	return &RXCounters{c: c, want: map[datapath.Pair]bool{}}, nil
}

// CountPair implements datapath.PairCounterSet.
func (r *RXCounters) CountPair(p datapath.Pair) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.want[p] {
		return nil
	}
	if err := r.c.Declare(p); err != nil {
		return fmt.Errorf("receive counters: %w", err)
	}
	r.want[p] = true
	r.sorted = nil
	return nil
}

// RemovePair implements datapath.PairCounterSet.
func (r *RXCounters) RemovePair(p datapath.Pair) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.want[p] {
		return nil
	}
	if err := r.c.Undeclare(p); err != nil {
		return fmt.Errorf("receive counters: %w", err)
	}
	delete(r.want, p)
	r.sorted = nil
	return nil
}

// Dev returns the device the counters are on: the VM's device on the
// server.
func (r *RXCounters) Dev() string { return r.c.Dev() }

// Pairs returns the pairs counted (asked for), in
// datapath.ComparePairs order.
func (r *RXCounters) Pairs() []datapath.Pair {
	r.mu.Lock()
	defer r.mu.Unlock()
	return datapath.SortedPairs(r.want)
}

// Counters implements datapath.PairCounters.
func (r *RXCounters) Counters() (map[datapath.Pair]datapath.Counters, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[datapath.Pair]datapath.Counters, len(r.want))
	err := r.c.EachDeclared(func(p datapath.Pair, c pairbytes.Counts) {
		out[p] = datapath.Counters{Bytes: c.SegBytes, Packets: c.Segments}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadPairs implements datapath.PairReader: Counters into dst, with no
// allocation once dst holds every pair.
func (r *RXCounters) ReadPairs(dst []datapath.PairReading) ([]datapath.PairReading, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sorted == nil {
		r.sorted = datapath.SortedPairs(r.want)
		r.at = make(map[datapath.Pair]int, len(r.sorted))
		for i, p := range r.sorted {
			r.at[p] = i
		}
		r.order = r.order[:0]
	}
	dst = slices.Grow(dst[:0], len(r.sorted))[:len(r.sorted)]
	for i, p := range r.sorted {
		dst[i] = datapath.PairReading{Pair: p}
	}
	k := 0
	err := r.c.EachDeclared(func(p datapath.Pair, c pairbytes.Counts) {
		var i int
		if k < len(r.order) && r.order[k] >= 0 && r.sorted[r.order[k]] == p {
			i = r.order[k]
		} else {
			j, ok := r.at[p]
			if !ok {
				j = -1 // not asked for: keeps the order's positions
			}
			i = j
			r.order = append(r.order[:k], j)
		}
		k++
		if i >= 0 {
			dst[i].Counters = datapath.Counters{Bytes: c.SegBytes, Packets: c.Segments}
		}
	})
	if err != nil {
		return dst[:0], err
	}
	return dst, nil
}

// Close removes the counters' program (and the clsact qdisc if it added
// it and nothing else uses it).
func (r *RXCounters) Close() error { return r.c.Close() }

// nsTSQ is the TCP small-queue budget of a VM namespace that a Host
// set: what it was before, and how many of the Host's VMs are in the
// namespace (the last one detached puts it back).
type nsTSQ struct {
	old   string
	users int
}

// where names a device and its namespace in errors.
func where(dev, ns string) string { return fmt.Sprintf("device %s in netns %s", dev, ns) }

// provision builds a VM's limiters on its Interface (h.mu held).
func (h *Host) provision(vm datapath.VM) (datapath.VMPath, error) {
	if p, ok := h.prov[vm.Name]; ok {
		if p.vm.Interface == vm.Interface && p.vm.Netns == vm.Netns {
			return p.path(), nil
		}
		return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: attached on %s already; detach it before attaching it on %s",
			vm.Name, where(p.vm.Interface, nsName(p.vm.Netns, h.cfg.NS)), where(vm.Interface, nsName(vm.Netns, h.cfg.NS)))
	}
	for _, o := range h.prov {
		if o.vm.Interface == vm.Interface && o.vm.Netns == vm.Netns {
			return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: %s is VM %s's", vm.Name, where(vm.Interface, nsName(vm.Netns, h.cfg.NS)), o.vm.Name)
		}
	}
	if h.built != nil && vm.Netns == "" {
		return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: %s: the per-VM schedulers need the VM in a namespace of its own (netns, with Interface its end of a veth): the ingress of a VM's device on the server feeds its pair limiter's IFB, and a packet follows one redirection only, so the egress scheduler could not see what it sends",
			vm.Name, where(vm.Interface, h.cfg.NS.Name))
	}
	var p *provisioned
	var err error
	if vm.Netns != "" {
		p, err = h.provisionNetns(vm)
	} else {
		p, err = h.provisionServer(vm)
	}
	if err != nil {
		return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: %w", vm.Name, err)
	}
	if h.built != nil {
		if err := h.built.attach(p); err != nil {
			return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: per-VM schedulers: %w", vm.Name, errors.Join(err, h.teardown(p)))
		}
	}
	if err := h.watchLoss(p); err != nil {
		return datapath.VMPath{}, fmt.Errorf("linux data path: VM %s: %w", vm.Name, errors.Join(err, h.teardown(p)))
	}
	h.prov[vm.Name] = p
	return p.path(), nil
}

// watchLoss tells the loss counter, if it follows VMs (VMLossCounter),
// of a VM whose limiters were built. A counter that cannot see the VM's
// losses at all (ErrNotWatchable) is logged, once, and the VM is
// attached: its limits are enforced, its losses not counted.
func (h *Host) watchLoss(p *provisioned) error {
	lc, ok := h.cfg.Loss.(VMLossCounter)
	if !ok {
		return nil
	}
	vm := p.vm
	vm.Device = p.dev
	err := lc.AttachVM(vm)
	if errors.Is(err, ErrNotWatchable) {
		h.log.Warn("linux data path: the VM's losses are not counted", "vm", vm.Name, "interface", vm.Interface, "netns", nsName(vm.Netns, h.cfg.NS), "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	p.lossWatched = true
	if f, ok := lc.(pairFollower); ok {
		sent, received := Limiters{TX: p.tx, RX: p.rx}.listers()
		f.followPairs(vm.Name, vm.Addr, p.dev, sent, received)
	}
	return nil
}

// unwatchLoss tells the loss counter that a VM leaves, before its
// limiters are removed.
func (h *Host) unwatchLoss(p *provisioned) error {
	if !p.lossWatched {
		return nil
	}
	p.lossWatched = false
	if err := h.cfg.Loss.(VMLossCounter).DetachVM(p.vm.Name); err != nil {
		return fmt.Errorf("loss counter: %w", err)
	}
	return nil
}

// leftovers says whether a device's clsact hooks (in, eg) hold nothing
// but what a Host and its loss counter put there — the redirection to an
// IFB (IngressPrio, u32) and the sequence-gap count program (bpf,
// seqloss.DefaultPrio) — and something of it: left by an agent that
// died, they make the clsact this Host's to remove.
func leftovers(in, eg []dataplane.HookFilter) bool {
	for _, f := range in {
		if f.Prio != IngressPrio || f.Kind != "u32" {
			return false
		}
	}
	for _, f := range eg {
		if (f.Prio != seqloss.DefaultPrio && f.Prio != RXPrio) || f.Kind != "bpf" {
			return false
		}
	}
	return len(in)+len(eg) > 0
}

// clsactOurs says whether dev's clsact qdisc, if any, is for the Host to
// remove once it is empty: there is none yet (the Host or its loss
// counter will make it), or it holds leftovers only.
func clsactOurs(ns *dataplane.NS, dev string) (bool, error) {
	had, err := ns.HasClsact(dev)
	if err != nil || !had {
		return !had, err
	}
	in, err := ns.HookFilters(dev, dataplane.Ingress)
	if err != nil {
		return false, err
	}
	eg, err := ns.HookFilters(dev, dataplane.Egress)
	if err != nil {
		return false, err
	}
	return leftovers(in, eg), nil
}

func nsName(netns string, srv *dataplane.NS) string {
	if netns == "" {
		return srv.Name
	}
	return netns
}

// provisionNetns builds the limiters of a VM in its own namespace: the
// pair limiter on its interface there, the receive counters on the
// interface's veth peer in the server's namespace.
func (h *Host) provisionNetns(vm datapath.VM) (_ *provisioned, err error) {
	srv := h.cfg.NS
	at := where(vm.Interface, vm.Netns)
	vns, err := openNetns(vm.Netns)
	if err != nil {
		return nil, fmt.Errorf("%s: the namespace cannot be opened (not made yet?): %w", at, err)
	}
	p := &provisioned{vm: vm, srv: srv, vmNS: vns}
	defer func() {
		if err != nil {
			err = errors.Join(err, h.teardown(p))
		}
	}()
	vi, err := vns.Inode()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	if si, err := srv.Inode(); err != nil || si == vi {
		return nil, errors.Join(fmt.Errorf("%s: netns %s is the server's own namespace: for a device on the server, leave the VM's netns empty", at, vm.Netns), err)
	}
	if err := exists(vns, vm.Interface); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	peer, err := vns.VethPeer(vm.Interface, srv)
	if err != nil {
		return nil, fmt.Errorf("%s: a VM in its own namespace must be attached by a veth whose peer is in the server's netns %s: %w", at, srv.Name, err)
	}
	p.dev = peer
	if err := ownable(vns, vm.Interface); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	if err := ownable(srv, peer); err != nil {
		return nil, fmt.Errorf("%s (the server's side of %s): %w", where(peer, srv.Name), at, err)
	}
	// the loss counter may put a clsact on the peer
	if p.clsact, err = clsactOurs(srv, peer); err != nil {
		return nil, fmt.Errorf("%s: %w", where(peer, srv.Name), err)
	}
	// The TCP small-queue budget of the VM's namespace, as the testbed
	// sets it for its VMs: the limiter's queue then holds TCP back
	// without dropping.
	st := h.tsq[vm.Netns]
	if st == nil {
		var old []byte
		err = vns.Do(func() error {
			var err error
			if old, err = os.ReadFile(tsqSysctl); err != nil {
				return err
			}
			return os.WriteFile(tsqSysctl, []byte(fmt.Sprint(VMTSQBytes)), 0o644)
		})
		if err != nil {
			return nil, fmt.Errorf("netns %s: sysctl net.ipv4.tcp_limit_output_bytes: %w", vm.Netns, err)
		}
		st = &nsTSQ{old: strings.TrimSpace(string(old))}
		h.tsq[vm.Netns] = st
	}
	st.users++
	p.tsq = st
	if p.tx, err = newLimiter(vns, vm.Interface, VMLimiterQueue); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	// (receive counting classes an earlier version left on the peer go)
	if err := unroot(srv, peer); err != nil {
		return nil, fmt.Errorf("%s: %w", where(peer, srv.Name), err)
	}
	if p.rx, err = NewRXCounters(srv, peer); err != nil {
		return nil, fmt.Errorf("%s: %w", where(peer, srv.Name), err)
	}
	return p, nil
}

// provisionServer builds the limiters of a VM whose device is on the
// server (a tap or a veth in the server's namespace): the receive
// counters on the device's egress, the pair limiter on an IFB fed by its
// ingress.
func (h *Host) provisionServer(vm datapath.VM) (_ *provisioned, err error) {
	srv := h.cfg.NS
	dev := vm.Interface
	at := where(dev, srv.Name)
	if err := exists(srv, dev); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	if err := ownable(srv, dev); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	// Another filter on the device's ingress would take the VM's
	// traffic past the limiter (or the limiter past it): a redirection
	// goes to one device only.
	in, err := srv.HookFilters(dev, dataplane.Ingress)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	for _, f := range in {
		if f.Prio != IngressPrio {
			return nil, fmt.Errorf("%s: its ingress hook has a %s filter of priority %d that Bulkhead did not make; a VM's traffic goes to one redirection only, so it cannot be limited here", at, f.Kind, f.Prio)
		}
	}
	clsact, err := clsactOurs(srv, dev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	ifb := IFBName(dev)
	found, isIFB, err := srv.IsIFB(ifb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	if found && !isIFB {
		return nil, fmt.Errorf("%s: the name of its limiter's IFB, %s, is taken by a device that is not an IFB", at, ifb)
	}
	// a clsact holding nothing but what an agent that died left is
	// this Host's to remove, as is one it makes
	p := &provisioned{vm: vm, srv: srv, dev: dev, clsact: clsact}
	defer func() {
		if err != nil {
			err = errors.Join(err, h.teardown(p))
		}
	}()
	// Left by an earlier Host (its agent stopped or died): the IFB and
	// the redirection into it are adopted with the limiter on it, so
	// that the VM stays limited; half of them is removed and made anew.
	adopt := len(in) > 0 && found
	if !adopt && (len(in) > 0 || found) {
		p.redirect = len(in) > 0
		if found {
			p.ifb = ifb
		}
		if err := p.unredirect(); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		p.ifb = ""
	}
	if err := unroot(srv, dev); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	if p.rx, err = NewRXCounters(srv, dev); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	if !adopt {
		if err := srv.AddIFB(ifb); err != nil {
			return nil, fmt.Errorf("%s: its limiter's IFB: %w", at, err)
		}
	}
	p.ifb = ifb
	if p.tx, err = newLimiter(srv, ifb, 0); err != nil {
		return nil, fmt.Errorf("%s: its limiter's IFB: %w", at, err)
	}
	p.redirect = true
	if !adopt {
		if err := srv.RedirectIngress(dev, ifb, IngressPrio); err != nil {
			return nil, fmt.Errorf("%s: redirect its ingress to %s: %w", at, ifb, err)
		}
	}
	return p, nil
}

// exists says clearly that a device is not there (yet).
func exists(ns *dataplane.NS, dev string) error {
	if _, err := ns.LinkIndex(dev); err != nil {
		if dataplane.IsLinkNotFound(err) {
			return fmt.Errorf("no such device (not made yet?): %w", err)
		}
		return err
	}
	return nil
}

// ownable checks that a device's root qdisc may be replaced by a
// limiter: the kernel's default, or a limiter of a Host (ProvisionMajor).
func ownable(ns *dataplane.NS, dev string) error {
	q, err := ns.RootQdisc(dev)
	if err != nil {
		return err
	}
	if q.Kind == "" || q.Default() || ours(q) {
		return nil
	}
	return fmt.Errorf("its root qdisc %s was not made by Bulkhead; it is not replaced (remove it to let Bulkhead enforce the VM here)", q)
}

func ours(q dataplane.Qdisc) bool {
	return q.Kind == "htb" && q.Handle == dataplane.TCHandle(ProvisionMajor, 0)
}

// newLimiter makes the device's limiter: a limiter of an earlier Host
// (whose agent stopped or died) is adopted with its pairs' classes and
// rates, so that they stay limited while the new agent takes over;
// otherwise an empty limiter replaces the kernel's default root qdisc.
func newLimiter(ns *dataplane.NS, dev string, queue uint32) (*dataplane.Limiter, error) {
	q, err := ns.RootQdisc(dev)
	if err != nil {
		return nil, err
	}
	if ours(q) {
		l, err := dataplane.AdoptLimiter(ns, dataplane.LimiterConfig{Dev: dev, Major: ProvisionMajor, QueueBytes: queue})
		if err == nil {
			return l, nil
		}
		// Not what a Host leaves: start anew (HTB cannot be changed in
		// place).
		if err := ns.DeleteRootQdisc(dev); err != nil {
			return nil, err
		}
	}
	return dataplane.NewLimiter(ns, dataplane.LimiterConfig{Dev: dev, Major: ProvisionMajor, QueueBytes: queue})
}

// unroot removes the device's root qdisc if it is a limiter of a Host:
// the kernel's default comes back. A device that is gone is not an
// error.
func unroot(ns *dataplane.NS, dev string) error {
	q, err := ns.RootQdisc(dev)
	if dataplane.IsLinkNotFound(err) {
		return nil
	}
	if err != nil || !ours(q) {
		return err
	}
	if err := ns.DeleteRootQdisc(dev); err != nil && !dataplane.IsLinkNotFound(err) {
		return err
	}
	return nil
}

// unredirect removes the redirection to the IFB, then the IFB, and the
// clsact qdisc if it is this Host's and holds nothing else.
func (p *provisioned) unredirect() error {
	var errs []error
	if p.redirect {
		if err := p.srv.DeleteHookFilters(p.dev, dataplane.Ingress, IngressPrio); err != nil && !dataplane.IsLinkNotFound(err) {
			errs = append(errs, err)
		}
		p.redirect = false
	}
	errs = append(errs, p.dropClsact())
	if p.ifb != "" {
		if err := p.srv.DeleteLink(p.ifb); err != nil && !dataplane.IsLinkNotFound(err) {
			errs = append(errs, err)
		}
		p.ifb = ""
	}
	return errors.Join(errs...)
}

// closeRX removes the VM's receive counters (the program only: a Host
// that closes leaves the limiters enforcing, and the next one counts
// anew).
func (p *provisioned) closeRX() error {
	if p.rx == nil {
		return nil
	}
	err := p.rx.Close()
	p.rx = nil
	return err
}

// dropClsact removes the clsact qdisc of the VM's device on the server
// if it is this Host's and holds no filter.
func (p *provisioned) dropClsact() error {
	if !p.clsact || p.dev == "" {
		return nil
	}
	if err := dropEmptyClsact(p.srv, p.dev); err != nil && !dataplane.IsLinkNotFound(err) {
		return err
	}
	return nil
}

// teardown removes everything built for a VM (p.teardown) and forgets
// the TCP small-queue budget of its namespace once no VM of the Host is
// in it (h.mu held).
func (h *Host) teardown(p *provisioned) error {
	err := p.teardown()
	if p.tsq != nil && p.tsq.users == 0 && h.tsq[p.vm.Netns] == p.tsq {
		delete(h.tsq, p.vm.Netns)
	}
	p.tsq = nil
	return err
}

// teardown removes everything built for the VM, leaving its devices as
// they were found; devices that are gone (the VM went with them) are not
// errors. It keeps going after errors and returns them all.
func (p *provisioned) teardown() error {
	var errs []error
	errs = append(errs, p.closeRX())
	if p.vmNS == nil {
		errs = append(errs, p.unredirect())
		if p.dev != "" {
			errs = append(errs, unroot(p.srv, p.dev))
		}
	} else {
		if p.sched != nil {
			errs = append(errs, p.sched.detach(p))
		}
		if p.redirect {
			if err := p.srv.DeleteHookFilters(p.dev, dataplane.Ingress, IngressPrio); err != nil && !dataplane.IsLinkNotFound(err) {
				errs = append(errs, err)
			}
			p.redirect = false
		}
		errs = append(errs, unroot(p.vmNS, p.vm.Interface))
		if p.dev != "" {
			errs = append(errs, unroot(p.srv, p.dev), p.dropClsact())
		}
		if p.tsq != nil {
			if p.tsq.users--; p.tsq.users == 0 {
				err := p.vmNS.Do(func() error { return os.WriteFile(tsqSysctl, []byte(p.tsq.old), 0o644) })
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, fmt.Errorf("netns %s: restore sysctl net.ipv4.tcp_limit_output_bytes: %w", p.vm.Netns, err))
				}
			}
		}
		p.vmNS.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove the limiters of VM %s (%s): %w", p.vm.Name, where(p.vm.Interface, nsName(p.vm.Netns, p.srv)), err)
	}
	return nil
}
