package pairbytes

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/bulkhead-dc/bulkhead/dataplane"
)

// DefaultMaxPairs is the size of the per-pair map when Config.MaxPairs is
// 0 (as compiled into the object).
const DefaultMaxPairs = 16384

// DefaultPrio is the tc priority of the filter when Config.Prio is 0. The
// program continues to the next filter (TC_ACT_UNSPEC), so it should run
// before any filter that redirects or classifies terminally: it is one
// below the priority of the Linux data path's redirection filter
// (datapath/linux.IngressPrio, 0xb4), which a device on the server
// carries.
const DefaultPrio = 0xb3

// filterHandle is the tc handle of the filter.
const filterHandle = 1

// filterName is the name the kernel shows for the filter
// (tc filter show).
const filterName = "bulkhead_pairbytes"

// Config configures a Counter.
type Config struct {
	// MaxPairs bounds the per-pair map and the pairs that can be
	// declared (0: DefaultMaxPairs). Packets of
	// pairs beyond it are counted in Stats.Overflow.
	MaxPairs uint32
	// Prio is the tc priority of the filter (0: DefaultPrio). It must
	// differ from the priorities of the hook's other filters.
	Prio uint16
	// Hook is the clsact hook the program goes on: Ingress (the zero
	// value: what dev receives) or Egress (what dev sends: on the
	// server's end of a VM's veth, what is delivered to the VM).
	Hook dataplane.Direction
	// DeclaredOnly counts one by one only the pairs declared (Declare);
	// the packets of every other IPv4 pair are counted in
	// Stats.Overflow. Without it a pair seen for the first time gets an
	// entry of its own, up to MaxPairs, and declared pairs are counted
	// in their slots as well (Read reports both).
	DeclaredOnly bool
	// Replace removes an eBPF filter already at Prio on the hook — one a
	// Counter left when its process died without closing it — instead of
	// refusing to attach. A filter of another kind there is still an
	// error.
	Replace bool
}

// Pair is an IPv4 (source, destination) pair.
type Pair = dataplane.Pair

// Counts is what a Counter counts for a set of packets (see the package
// documentation for exactly what).
type Counts struct {
	// Bytes is the sum of the packets' lengths as tc sees them at
	// ingress: Ethernet header (14 bytes) + IP packet, a GSO packet's
	// headers once. It is what the device's rx_bytes counter adds.
	Bytes uint64
	// Packets is the number of packets (skbs; a GSO packet is one).
	Packets uint64
	// Segments is the number of frames the packets are on a wire (a GSO
	// packet counts its segments).
	Segments uint64
	// SegBytes is Bytes with each GSO packet's headers (Ethernet, IP,
	// TCP or UDP) counted once per segment: the bytes of the frames
	// once segmented, what a qdisc (HTB) counts. Equal to Bytes when no
	// packet was GSO.
	SegBytes uint64
}

// Add returns c + d.
func (c Counts) Add(d Counts) Counts {
	return Counts{Bytes: c.Bytes + d.Bytes, Packets: c.Packets + d.Packets, Segments: c.Segments + d.Segments, SegBytes: c.SegBytes + d.SegBytes}
}

// Sub returns c − prev (prev an earlier reading of the same counts).
func (c Counts) Sub(prev Counts) Counts {
	return Counts{Bytes: c.Bytes - prev.Bytes, Packets: c.Packets - prev.Packets, Segments: c.Segments - prev.Segments, SegBytes: c.SegBytes - prev.SegBytes}
}

// Stats counts the packets a Counter did not count under a pair.
type Stats struct {
	// Overflow: IPv4 packets of pairs that did not fit in the map.
	Overflow Counts
	// Other: packets that are not IPv4 over Ethernet (ARP, IPv6, ...).
	Other Counts
}

// Counter counts what one device receives per IPv4 pair: a program on the
// device's clsact ingress hook and its maps. Its methods are safe for
// concurrent use.
type Counter struct {
	ns      *dataplane.NS
	dev     string
	ifindex int
	prio    uint16
	hook    dataplane.Direction
	created bool // the clsact qdisc was added by Attach

	mu     sync.RWMutex // readers of the maps hold it shared, so Close waits for them
	objs   *pairbytesObjects
	closed bool

	bufMu sync.Mutex // the batches' buffers (Each) and the declared pairs
	keys  []pairbytesPair
	vals  []pairbytesCounts

	decl declared // the declared pairs and their slots
}

// Attach counts what dev (in ns) receives, with the default Config.
func Attach(ns *dataplane.NS, dev string) (*Counter, error) {
	return AttachConfig(ns, dev, Config{})
}

// AttachConfig loads the program and its maps and attaches the program to
// dev's clsact hook cfg.Hook in ns (adding a clsact qdisc if dev has
// none), at cfg.Prio. A filter already at that priority (another
// counter's included) is an error unless cfg.Replace says to remove an
// eBPF one. The counts start at zero. Close detaches and releases
// everything.
func AttachConfig(ns *dataplane.NS, dev string, cfg Config) (_ *Counter, err error) {
	if ns == nil {
		return nil, errors.New("pairbytes: nil namespace")
	}
	if cfg.Prio == 0 {
		cfg.Prio = DefaultPrio
	}
	at := fmt.Sprintf("netns %s: %s %s (tc prio %d)", ns.Name, dev, cfg.Hook, cfg.Prio)
	if cfg.Replace {
		fs, err := ns.HookFilters(dev, cfg.Hook)
		if err != nil {
			return nil, fmt.Errorf("pairbytes: %s: %w", at, err)
		}
		for _, f := range fs {
			if f.Prio != cfg.Prio {
				continue
			}
			if f.Kind != "bpf" {
				return nil, fmt.Errorf("pairbytes: %s: a %s filter is at that priority, not a counter's", at, f.Kind)
			}
			if err := ns.DeleteHookFilters(dev, cfg.Hook, cfg.Prio); err != nil {
				return nil, fmt.Errorf("pairbytes: %s: remove the filter left there: %w", at, err)
			}
		}
	}
	objs, err := load(cfg.MaxPairs, !cfg.DeclaredOnly)
	if err != nil {
		return nil, err
	}
	c := &Counter{ns: ns, dev: dev, prio: cfg.Prio, hook: cfg.Hook, objs: objs}
	defer func() {
		if err != nil {
			_ = objs.Close()
		}
	}()
	if c.decl.mem, err = objs.PairbytesDeclared.Memory(); err != nil {
		return nil, fmt.Errorf("pairbytes: map the declared pairs' counts: %w", err)
	}
	if c.ifindex, err = ns.LinkIndex(dev); err != nil {
		return nil, fmt.Errorf("pairbytes: %s: %w", at, err)
	}
	had, err := ns.HasClsact(dev)
	if err != nil {
		return nil, fmt.Errorf("pairbytes: %s: %w", at, err)
	}
	if !had {
		if err := ns.EnsureClsact(dev); err != nil {
			return nil, fmt.Errorf("pairbytes: %s: %w", at, err)
		}
		c.created = true
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.dropClsact())
		}
	}()
	f := &netlink.BpfFilter{
		FilterAttrs:  c.filterAttrs(),
		Fd:           objs.PairbytesCount.FD(),
		Name:         filterName,
		DirectAction: true,
	}
	if err := ns.Netlink().FilterAdd(f); err != nil {
		hint := ""
		switch {
		case errors.Is(err, unix.EINVAL):
			hint = " (another kind of filter at that priority? choose another Config.Prio)"
		case errors.Is(err, unix.EEXIST):
			hint = " (another counter at that priority)"
		}
		return nil, fmt.Errorf("pairbytes: %s: attach: %w%s", at, err, hint)
	}
	return c, nil
}

// load loads the program and maps into the kernel (maxPairs 0: as
// compiled); learn says whether pairs not declared get entries of their
// own.
func load(maxPairs uint32, learn bool) (*pairbytesObjects, error) {
	spec, err := loadPairbytes()
	if err != nil {
		return nil, fmt.Errorf("pairbytes: %w", err)
	}
	if maxPairs > 0 {
		for _, m := range []string{pairbytesMapPairbytesPairs, pairbytesMapPairbytesSlots, pairbytesMapPairbytesDeclared} {
			spec.Maps[m].MaxEntries = maxPairs
		}
	}
	l := uint32(0)
	if learn {
		l = 1
	} else {
		// nothing is learned: the hash map stays empty, and small
		spec.Maps[pairbytesMapPairbytesPairs].MaxEntries = 1
	}
	if err := spec.Variables[pairbytesVarLearn].Set(l); err != nil {
		return nil, fmt.Errorf("pairbytes: set learn: %w", err)
	}
	objs := new(pairbytesObjects)
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("pairbytes: load program: %+v", verr)
		}
		return nil, fmt.Errorf("pairbytes: load program: %w", err)
	}
	return objs, nil
}

func (c *Counter) filterAttrs() netlink.FilterAttrs {
	return netlink.FilterAttrs{
		LinkIndex: c.ifindex,
		Parent:    c.parent(),
		Handle:    filterHandle,
		Priority:  c.prio,
		Protocol:  unix.ETH_P_ALL,
	}
}

// parent is the tc parent of the counter's hook.
func (c *Counter) parent() uint32 {
	if c.hook == dataplane.Egress {
		return netlink.HANDLE_MIN_EGRESS
	}
	return netlink.HANDLE_MIN_INGRESS
}

// dropClsact removes the clsact qdisc if Attach added it and neither hook
// holds a filter any more (another user's filters keep it).
func (c *Counter) dropClsact() error {
	if !c.created {
		return nil
	}
	c.created = false
	in, err := c.ns.HookFilters(c.dev, dataplane.Ingress)
	if err != nil {
		return err
	}
	eg, err := c.ns.HookFilters(c.dev, dataplane.Egress)
	if err != nil {
		return err
	}
	if len(in)+len(eg) > 0 {
		return nil
	}
	return c.ns.DeleteClsact(c.dev)
}

// Dev returns the device the counter is attached to.
func (c *Counter) Dev() string { return c.dev }

// Prio returns the tc priority of the counter's filter.
func (c *Counter) Prio() uint16 { return c.prio }

// Close detaches the filter, removes the clsact qdisc if Attach added it
// and no other filter uses it, and releases the program and maps (nothing
// is pinned: the kernel frees them once the filter is gone). A device
// that no longer exists is not an error (its filter went with it). Close
// the Counter before the NS it was made with. Calling Close again does
// nothing.
func (c *Counter) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	if err := c.detach(); err != nil {
		errs = append(errs, err)
	}
	if err := c.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("pairbytes: close objects: %w", err))
	}
	return errors.Join(errs...)
}

func (c *Counter) detach() error {
	nh := c.ns.Netlink()
	if nh == nil {
		return nil // the namespace handle is closed: nothing to reach
	}
	l, err := nh.LinkByName(c.dev)
	if dataplane.IsLinkNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pairbytes: netns %s: detach from %s: %w", c.ns.Name, c.dev, err)
	}
	if l.Attrs().Index != c.ifindex {
		return nil // another device of that name: ours went, and its filter with it
	}
	f := &netlink.BpfFilter{FilterAttrs: c.filterAttrs()}
	if err := nh.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("pairbytes: netns %s: detach from %s: %w", c.ns.Name, c.dev, err)
	}
	if err := c.dropClsact(); err != nil && !dataplane.IsLinkNotFound(err) {
		return fmt.Errorf("pairbytes: netns %s: %w", c.ns.Name, err)
	}
	return nil
}

// ProgramID returns the kernel id of the counter's program (to check,
// e.g., that it is gone after Close).
func (c *Counter) ProgramID() (ebpf.ProgramID, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, errors.New("pairbytes: counter closed")
	}
	info, err := c.objs.PairbytesCount.Info()
	if err != nil {
		return 0, fmt.Errorf("pairbytes: program info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("pairbytes: program id not available")
	}
	return id, nil
}

// MapIDs returns the kernel ids of the counter's maps (to check, e.g.,
// that they are gone after Close).
func (c *Counter) MapIDs() ([]ebpf.MapID, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, errors.New("pairbytes: counter closed")
	}
	var ids []ebpf.MapID
	for _, m := range []*ebpf.Map{c.objs.PairbytesPairs, c.objs.PairbytesStats} {
		info, err := m.Info()
		if err != nil {
			return nil, fmt.Errorf("pairbytes: map info: %w", err)
		}
		id, ok := info.ID()
		if !ok {
			return nil, errors.New("pairbytes: map id not available")
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func countsOf(v pairbytesCounts) Counts {
	return Counts{Bytes: v.Bytes, Packets: v.Packets, Segments: v.Segs, SegBytes: v.SegBytes}
}

// batchSize is the number of entries read per batch syscall.
const batchSize = 256

// Read returns the cumulative counts of every pair seen since Attach (a
// declared pair's since it was declared; with Config.DeclaredOnly, the
// declared pairs only).
// Each pair's fields are updated one after the other by the program, so
// a reading taken while a packet is being counted may have its bytes and
// not yet its packet; the next reading has both.
func (c *Counter) Read() (map[Pair]Counts, error) {
	out := make(map[Pair]Counts)
	if err := c.Each(func(p Pair, n Counts) { out[p] = n }); err != nil {
		return nil, err
	}
	return out, nil
}

// Each reads the map as Read does and gives each pair's counts to fn, in
// the map's order, then the declared pairs', with no allocation after the
// first reading (the batches' buffers are kept). A failed batch read may
// have given fn some pairs already.
func (c *Counter) Each(fn func(Pair, Counts)) error {
	return c.locked(func() error {
		if err := c.eachLearned(fn); err != nil {
			return err
		}
		return c.eachDeclared(fn)
	})
}

// locked runs fn with the counter open (Close waits for it) and its
// buffers and declared pairs to itself.
func (c *Counter) locked(fn func() error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return errors.New("pairbytes: counter closed")
	}
	c.bufMu.Lock()
	defer c.bufMu.Unlock()
	return fn()
}

// eachLearned reads the pairs counted in entries of their own (not
// declared) for Each, with the locks held.
func (c *Counter) eachLearned(fn func(Pair, Counts)) error {
	m := c.objs.PairbytesPairs
	chunk := int(min(m.MaxEntries(), batchSize))
	if len(c.keys) < chunk {
		c.keys, c.vals = make([]pairbytesPair, chunk), make([]pairbytesCounts, chunk)
	}
	keys, vals := c.keys[:chunk], c.vals[:chunk]
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			fn(pairOf(keys[i]), countsOf(vals[i]))
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if errors.Is(err, ebpf.ErrNotSupported) {
			if n > 0 {
				return fmt.Errorf("pairbytes: read %s: batch lookup unsupported after %d pairs", c.dev, n)
			}
			break
		}
		if err != nil {
			return fmt.Errorf("pairbytes: read %s: %w", c.dev, err)
		}
	}
	// No batch operations: iterate.
	var k pairbytesPair
	var v pairbytesCounts
	it := m.Iterate()
	for it.Next(&k, &v) {
		fn(pairOf(k), countsOf(v))
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("pairbytes: read %s: %w", c.dev, err)
	}
	return nil
}

// Stats returns the counts of the packets not counted under a pair,
// summed over CPUs.
func (c *Counter) Stats() (Stats, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return Stats{}, errors.New("pairbytes: counter closed")
	}
	var per []pairbytesStats
	if err := c.objs.PairbytesStats.Lookup(uint32(0), &per); err != nil {
		return Stats{}, fmt.Errorf("pairbytes: read stats of %s: %w", c.dev, err)
	}
	var s Stats
	for _, p := range per {
		s.Overflow = s.Overflow.Add(countsOf(p.Overflow))
		s.Other = s.Other.Add(countsOf(p.Other))
	}
	return s, nil
}

// Total returns the sum of counts over pairs.
func Total(m map[Pair]Counts) Counts {
	var t Counts
	for _, c := range m {
		t = t.Add(c)
	}
	return t
}

// pairOf decodes a map key (addresses in network byte order).
func pairOf(k pairbytesPair) Pair {
	return Pair{Src: netip.AddrFrom4(k.Src), Dst: netip.AddrFrom4(k.Dst)}
}
