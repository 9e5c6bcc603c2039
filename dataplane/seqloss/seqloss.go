package seqloss

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/bulkhead-dc/bulkhead/dataplane"
)

// SeqWindow is how far (in 16-bit sequence numbers) the receiver reads a
// jump as loss (ahead) or reordering (behind); a jump of SeqWindow or more
// either way is a resynchronisation. It matches SEQ_WINDOW in seqloss.c.
const SeqWindow = 1 << 14

// Mark is the IPv4 flag bit (the reserved one, RFC 791 bit 0) the stamp
// program sets on the packets it numbers and the count program clears.
const Mark = 0x8000

// DefaultMaxPairs is the size of each per-pair map when Config.MaxPairs
// is 0 (as compiled into the object).
const DefaultMaxPairs = 4096

// MaxStampDevices is the most devices a Probe's stamp program can be
// attached to at once (the size of the map of their ifindexes, which the
// count program checks arrivals against in declared-only mode).
const MaxStampDevices = 64

// DefaultPrio is the tc filter priority of the programs when Config.Prio
// is 0. Filters of a hook run in priority order (lowest first); the
// programs continue to the next filter (TC_ACT_UNSPEC), so they should come
// before any filter that redirects or classifies terminally.
const DefaultPrio = 1

// filterHandle is the tc handle of the programs' filters (one per
// priority and hook).
const filterHandle = 1

// Role is what a program does at a hook.
type Role int

// Roles.
const (
	Stamp Role = iota // number packets per pair (sender side)
	Count             // count gaps per pair (receiver side)
)

func (r Role) String() string {
	if r == Stamp {
		return "stamp"
	}
	return "count"
}

// Config configures a Probe.
type Config struct {
	// MaxPairs bounds each per-pair map (0: DefaultMaxPairs): the pairs
	// stamped and the pairs counted, declared ones included. Packets of
	// pairs beyond it are neither stamped nor counted (Stats says how
	// many).
	MaxPairs uint32
	// Prio is the tc priority of the filters (0: DefaultPrio).
	Prio uint16
	// DeclaredOnly stamps and counts only the pairs declared
	// (DeclareStamp, DeclareCount), and counts only the marked packets
	// that arrived by a device the probe's stamp program is attached to
	// (its uplinks): what a VM sends — to any destination, from any
	// source address, with any mark — can neither fill the maps nor add
	// to a declared pair's counts. The packets of other pairs pass
	// unstamped or uncounted, and without the mark (Stats.TxUndeclared,
	// RxUndeclared, RxForeign). Without it, a pair seen for the first
	// time gets an entry of its own, until the maps hold MaxPairs.
	DeclaredOnly bool
}

// Hook is one attachment of a program.
type Hook struct {
	Dev  string
	Dir  dataplane.Direction
	Role Role
}

func (h Hook) String() string { return fmt.Sprintf("%s on %s %s", h.Role, h.Dev, h.Dir) }

// Probe is the pair of programs and their maps for one network namespace
// (a server): attach the stamp program where the server's VM traffic
// leaves it and the count program where traffic to its VMs arrives. Its
// methods are safe for concurrent use.
type Probe struct {
	ns   *dataplane.NS
	prio uint16

	mu     sync.RWMutex // readers of the maps hold it shared, so Close waits for them
	objs   *seqlossObjects
	hooks  []Hook
	closed bool
	// stampDevs are the ifindexes of the devices the stamp program is
	// on, with the number of its hooks there (seqloss_uplinks), and
	// stampIdx the ifindex of each of its hooks' device.
	stampDevs map[uint32]int
	stampIdx  map[Hook]uint32
	// stamped and counted are the pairs declared for each program; a
	// stamped pair's value is the ifindex its packets must come in by
	// (0: any).
	stamped map[dataplane.Pair]uint32
	counted map[dataplane.Pair]bool
}

// New loads the programs and their maps (BPF objects are not bound to a
// namespace; the filters that run them are) for attachment in ns. Close
// releases them.
func New(ns *dataplane.NS, cfg Config) (*Probe, error) {
	if ns == nil {
		return nil, errors.New("seqloss: nil namespace")
	}
	if cfg.Prio == 0 {
		cfg.Prio = DefaultPrio
	}
	objs, err := load(cfg.MaxPairs, !cfg.DeclaredOnly)
	if err != nil {
		return nil, err
	}
	return newProbe(ns, cfg.Prio, objs), nil
}

func newProbe(ns *dataplane.NS, prio uint16, objs *seqlossObjects) *Probe {
	return &Probe{ns: ns, prio: prio, objs: objs, stampDevs: map[uint32]int{}, stampIdx: map[Hook]uint32{},
		stamped: map[dataplane.Pair]uint32{}, counted: map[dataplane.Pair]bool{}}
}

// load loads the programs and maps into the kernel (maxPairs 0: as
// compiled); learn says whether pairs not declared get entries of their
// own.
func load(maxPairs uint32, learn bool) (*seqlossObjects, error) {
	spec, err := loadSeqloss()
	if err != nil {
		return nil, fmt.Errorf("seqloss: %w", err)
	}
	if maxPairs > 0 {
		spec.Maps[seqlossMapSeqlossTx].MaxEntries = maxPairs
		spec.Maps[seqlossMapSeqlossRx].MaxEntries = maxPairs
	}
	spec.Maps[seqlossMapSeqlossUplinks].MaxEntries = MaxStampDevices
	l := uint32(0)
	if learn {
		l = 1
	}
	if err := spec.Variables[seqlossVarLearn].Set(l); err != nil {
		return nil, fmt.Errorf("seqloss: set learn: %w", err)
	}
	objs := new(seqlossObjects)
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("seqloss: load programs: %+v", verr)
		}
		return nil, fmt.Errorf("seqloss: load programs: %w", err)
	}
	return objs, nil
}

// parent is the tc filter parent of the clsact hook.
func parent(d dataplane.Direction) uint32 {
	if d == dataplane.Ingress {
		return netlink.HANDLE_MIN_INGRESS
	}
	return netlink.HANDLE_MIN_EGRESS
}

// Attach runs the role's program on every IPv4 packet through the dev's
// clsact hook dir (adding clsact to dev if needed). A hook holds at most
// one program of a Probe.
func (p *Probe) Attach(dev string, dir dataplane.Direction, role Role) error {
	h := Hook{Dev: dev, Dir: dir, Role: role}
	if role != Stamp && role != Count {
		return fmt.Errorf("seqloss: attach to %s %s: unknown role %d", dev, dir, int(role))
	}
	if dir != dataplane.Ingress && dir != dataplane.Egress {
		return fmt.Errorf("seqloss: attach to %s: unknown direction %d", dev, int(dir))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("seqloss: attach %s: probe closed", h)
	}
	for _, o := range p.hooks {
		if o.Dev == dev && o.Dir == dir {
			return fmt.Errorf("seqloss: attach %s: the hook already runs %s", h, o.Role)
		}
	}
	prog := p.objs.SeqlossStamp
	if role == Count {
		prog = p.objs.SeqlossCount
	}
	if err := p.ns.EnsureClsact(dev); err != nil {
		return fmt.Errorf("seqloss: attach %s: %w", h, err)
	}
	idx, err := p.ns.LinkIndex(dev)
	if err != nil {
		return fmt.Errorf("seqloss: attach %s: %w", h, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs:  p.filterAttrs(idx, dir),
		Fd:           prog.FD(),
		Name:         "bulkhead_seqloss_" + role.String(),
		DirectAction: true,
	}
	if err := p.removeStale(idx, dir); err != nil {
		return fmt.Errorf("seqloss: attach %s: %w", h, err)
	}
	if role == Stamp {
		// Before the program runs there: what arrives by the device
		// may carry its marks at once.
		if err := p.addStampDev(uint32(idx)); err != nil {
			return fmt.Errorf("seqloss: attach %s: %w", h, err)
		}
	}
	if err := p.ns.Netlink().FilterAdd(f); err != nil {
		if role == Stamp {
			err = errors.Join(err, p.dropStampDev(uint32(idx)))
		}
		hint := ""
		switch {
		case errors.Is(err, unix.EINVAL):
			hint = " (another kind of filter at that priority? choose another Config.Prio)"
		case errors.Is(err, unix.EEXIST):
			hint = " (another seqloss probe at that priority)"
		}
		return fmt.Errorf("seqloss: netns %s: attach %s (tc prio %d): %w%s", p.ns.Name, h, p.prio, err, hint)
	}
	p.hooks = append(p.hooks, h)
	if role == Stamp {
		p.stampIdx[h] = uint32(idx)
	}
	return nil
}

// addStampDev notes that the stamp program runs on the device of
// ifindex idx (once more).
func (p *Probe) addStampDev(idx uint32) error {
	if p.stampDevs[idx] == 0 {
		if err := p.objs.SeqlossUplinks.Update(idx, uint32(1), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("note the stamp device (at most %d): %w", MaxStampDevices, err)
		}
	}
	p.stampDevs[idx]++
	return nil
}

// dropStampDev undoes addStampDev.
func (p *Probe) dropStampDev(idx uint32) error {
	if p.stampDevs[idx]--; p.stampDevs[idx] > 0 {
		return nil
	}
	delete(p.stampDevs, idx)
	if err := p.objs.SeqlossUplinks.Delete(idx); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("forget the stamp device: %w", err)
	}
	return nil
}

// removeStale deletes a seqloss filter left at the probe's priority on a
// hook by a probe whose process died without detaching (a killed agent):
// its program would go on stamping or counting, and the new filter could
// not be added. Filters of other kinds are left alone.
func (p *Probe) removeStale(idx int, dir dataplane.Direction) error {
	link, err := p.ns.Netlink().LinkByIndex(idx)
	if err != nil {
		return err
	}
	fs, err := p.ns.Netlink().FilterList(link, parent(dir))
	if err != nil {
		return fmt.Errorf("list filters: %w", err)
	}
	for _, f := range fs {
		b, ok := f.(*netlink.BpfFilter)
		if !ok || b.Priority != p.prio || !strings.HasPrefix(b.Name, "bulkhead_seqloss_") {
			continue
		}
		if err := p.ns.Netlink().FilterDel(b); err != nil {
			return fmt.Errorf("remove stale filter %s: %w", b.Name, err)
		}
	}
	return nil
}

func (p *Probe) filterAttrs(idx int, dir dataplane.Direction) netlink.FilterAttrs {
	return netlink.FilterAttrs{
		LinkIndex: idx,
		Parent:    parent(dir),
		Handle:    filterHandle,
		Priority:  p.prio,
		Protocol:  unix.ETH_P_IP,
	}
}

// AttachStamp attaches the stamp program (Attach with Stamp).
func (p *Probe) AttachStamp(dev string, dir dataplane.Direction) error {
	return p.Attach(dev, dir, Stamp)
}

// AttachCount attaches the count program (Attach with Count).
func (p *Probe) AttachCount(dev string, dir dataplane.Direction) error {
	return p.Attach(dev, dir, Count)
}

// Hooks returns the hooks the probe's programs are attached to.
func (p *Probe) Hooks() []Hook {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Hook(nil), p.hooks...)
}

// Detach removes the probe's program from dev's hook dir. A device that
// no longer exists (its filters went with it) is not an error.
func (p *Probe) Detach(dev string, dir dataplane.Direction) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.hooks {
		if h.Dev == dev && h.Dir == dir {
			p.hooks = append(p.hooks[:i], p.hooks[i+1:]...)
			err := p.detach(h)
			if idx, ok := p.stampIdx[h]; ok {
				delete(p.stampIdx, h)
				err = errors.Join(err, p.dropStampDev(idx))
			}
			return err
		}
	}
	return fmt.Errorf("seqloss: detach %s %s: not attached", dev, dir)
}

func (p *Probe) detach(h Hook) error {
	nh := p.ns.Netlink()
	if nh == nil {
		return nil // the namespace handle is closed: nothing to reach
	}
	l, err := nh.LinkByName(h.Dev)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil
		}
		return fmt.Errorf("seqloss: netns %s: detach %s: %w", p.ns.Name, h, err)
	}
	f := &netlink.BpfFilter{FilterAttrs: p.filterAttrs(l.Attrs().Index, h.Dir)}
	if err := nh.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("seqloss: netns %s: detach %s: %w", p.ns.Name, h, err)
	}
	return nil
}

// Close detaches every filter the probe attached (where the device still
// exists) and releases the programs and maps; the kernel frees them once
// no filter refers to them. Close the Probe before the NS it was made
// with: without the namespace's handle it cannot reach the filters (they
// then go with their devices). Calling Close again does nothing.
func (p *Probe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for _, h := range p.hooks {
		if err := p.detach(h); err != nil {
			errs = append(errs, err)
		}
	}
	p.hooks = nil
	if err := p.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("seqloss: close objects: %w", err))
	}
	return errors.Join(errs...)
}

// ProgramIDs returns the kernel ids of the stamp and count programs (to
// check, e.g., that they are gone after Close).
func (p *Probe) ProgramIDs() (stamp, count ebpf.ProgramID, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, 0, errors.New("seqloss: probe closed")
	}
	for _, x := range []struct {
		prog *ebpf.Program
		id   *ebpf.ProgramID
	}{{p.objs.SeqlossStamp, &stamp}, {p.objs.SeqlossCount, &count}} {
		info, err := x.prog.Info()
		if err != nil {
			return 0, 0, fmt.Errorf("seqloss: program info: %w", err)
		}
		id, ok := info.ID()
		if !ok {
			return 0, 0, errors.New("seqloss: program id not available")
		}
		*x.id = id
	}
	return stamp, count, nil
}

// MapIDs returns the kernel ids of the probe's maps (to check, e.g.,
// that they are gone after Close: none is pinned).
func (p *Probe) MapIDs() ([]ebpf.MapID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("seqloss: probe closed")
	}
	var ids []ebpf.MapID
	for _, m := range []*ebpf.Map{p.objs.SeqlossTx, p.objs.SeqlossRx, p.objs.SeqlossStats, p.objs.SeqlossUplinks} {
		info, err := m.Info()
		if err != nil {
			return nil, fmt.Errorf("seqloss: map info: %w", err)
		}
		id, ok := info.ID()
		if !ok {
			return nil, errors.New("seqloss: map id not available")
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Sent is a pair's counters at the sender (stamp program).
type Sent struct {
	Packets  uint64 // packets (skbs) stamped
	Segments uint64 // sequence numbers used: a GSO packet takes one per segment
}

// Received is a pair's counters at the receiver (count program). Gaps −
// Late is the number of segments lost; a packet counted in a gap that
// arrives later (reordered) adds to Late.
type Received struct {
	Packets  uint64 // marked packets (skbs) seen
	Segments uint64 // marked segments seen
	Gaps     uint64 // sequence numbers skipped
	Late     uint64 // segments that arrived behind the expected number
	Resyncs  uint64 // jumps of SeqWindow or more, not counted as loss
}

// Lost is the pair's loss in segments since prev (an earlier reading of
// the same pair): new gaps less new late arrivals, never negative.
func (r Received) Lost(prev Received) uint64 {
	if r.Gaps < prev.Gaps || r.Late < prev.Late {
		prev = Received{} // the pair's counters restarted (Forget, a new map entry)
	}
	g, l := r.Gaps-prev.Gaps, r.Late-prev.Late
	if l >= g {
		return 0
	}
	return g - l
}

// Stats counts, over all CPUs, the packets the programs left alone. A
// packet not stamped leaves the stamp program without the mark, a marked
// packet not counted leaves the count program without it.
type Stats struct {
	TxFull     uint64 // not stamped: the sender's pair map was full
	RxFull     uint64 // not counted: the receiver's pair map was full
	RxUnmarked uint64 // IPv4 packets at a count hook that carried no mark
	Fragments  uint64 // IP fragments (never stamped or counted)
	// TxUndeclared: not stamped, the pair is not declared
	// (Config.DeclaredOnly).
	TxUndeclared uint64
	// TxForeign: not stamped, a packet of a declared pair that came in
	// by another device than the one declared for it (DeclareStamp): its
	// source address is forged.
	TxForeign uint64
	// RxUndeclared: marked, not counted, the pair is not declared
	// (Config.DeclaredOnly).
	RxUndeclared uint64
	// RxForeign: marked, not counted, it did not arrive by a device the
	// stamp program is on (Config.DeclaredOnly): a VM of this server
	// (or a host that does not stamp) set the mark.
	RxForeign uint64
}

// pairOf decodes a map key (addresses in network byte order).
func pairOf(k seqlossPair) dataplane.Pair {
	return dataplane.Pair{Src: netip.AddrFrom4(k.Src), Dst: netip.AddrFrom4(k.Dst)}
}

// keyOf encodes a pair as a map key.
func keyOf(p dataplane.Pair) (seqlossPair, error) {
	if !p.Src.Is4() || !p.Dst.Is4() {
		return seqlossPair{}, fmt.Errorf("seqloss: pair %s: IPv4 addresses only", p)
	}
	return seqlossPair{Src: p.Src.As4(), Dst: p.Dst.As4()}, nil
}

func sentOf(v seqlossTxVal) Sent { return Sent{Packets: v.Packets, Segments: v.Segs} }

func receivedOf(v seqlossRxVal) Received {
	return Received{Packets: v.Packets, Segments: v.Segs, Gaps: v.Gaps, Late: v.Late, Resyncs: v.Resyncs}
}

// batchSize is the number of entries read per batch syscall.
const batchSize = 256

// dump reads every entry of m (flags: BPF_F_LOCK for spin-locked values)
// in batches.
func dump[K comparable, V any](m *ebpf.Map, flags uint64) ([]K, []V, error) {
	chunk := int(min(m.MaxEntries(), batchSize))
	var keys []K
	var vals []V
	var cursor ebpf.MapBatchCursor
	for {
		keys, vals = slices.Grow(keys, chunk), slices.Grow(vals, chunk)
		k, v := keys[len(keys):len(keys)+chunk], vals[len(vals):len(vals)+chunk]
		n, err := m.BatchLookup(&cursor, k, v, &ebpf.BatchOptions{ElemFlags: flags})
		keys, vals = keys[:len(keys)+n], vals[:len(vals)+n]
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return keys, vals, nil
		}
		if errors.Is(err, ebpf.ErrNotSupported) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	// No batch operations: iterate (values are then read unlocked).
	keys, vals = keys[:0], vals[:0]
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		keys, vals = append(keys, k), append(vals, v)
	}
	if err := it.Err(); err != nil {
		return nil, nil, err
	}
	return keys, vals, nil
}

// maps returns the maps and a function to call when done with them.
func (p *Probe) maps() (*seqlossMaps, func(), error) {
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return nil, nil, errors.New("seqloss: probe closed")
	}
	return &p.objs.seqlossMaps, p.mu.RUnlock, nil
}

// Sent returns the sender-side counters of every pair the stamp program
// has seen.
func (p *Probe) Sent() (map[dataplane.Pair]Sent, error) {
	m, done, err := p.maps()
	if err != nil {
		return nil, err
	}
	defer done()
	keys, vals, err := dump[seqlossPair, seqlossTxVal](m.SeqlossTx, 0)
	if err != nil {
		return nil, fmt.Errorf("seqloss: read sender counters: %w", err)
	}
	out := make(map[dataplane.Pair]Sent, len(keys))
	for i, k := range keys {
		out[pairOf(k)] = sentOf(vals[i])
	}
	return out, nil
}

// Received returns the receiver-side counters of every pair the count
// program has seen. Each pair's counters are read under its lock, so they
// are consistent with each other.
func (p *Probe) Received() (map[dataplane.Pair]Received, error) {
	m, done, err := p.maps()
	if err != nil {
		return nil, err
	}
	defer done()
	keys, vals, err := dump[seqlossPair, seqlossRxVal](m.SeqlossRx, uint64(ebpf.LookupLock))
	if err != nil {
		return nil, fmt.Errorf("seqloss: read receiver counters: %w", err)
	}
	out := make(map[dataplane.Pair]Received, len(keys))
	for i, k := range keys {
		out[pairOf(k)] = receivedOf(vals[i])
	}
	return out, nil
}

// ReceivedPair returns one pair's receiver-side counters (zero if the
// pair has not been seen).
func (p *Probe) ReceivedPair(pair dataplane.Pair) (Received, error) {
	m, done, err := p.maps()
	if err != nil {
		return Received{}, err
	}
	defer done()
	k, err := keyOf(pair)
	if err != nil {
		return Received{}, err
	}
	var v seqlossRxVal
	if err := m.SeqlossRx.LookupWithFlags(&k, &v, ebpf.LookupLock); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return Received{}, nil
		}
		return Received{}, fmt.Errorf("seqloss: read receiver counters of %s: %w", pair, err)
	}
	return receivedOf(v), nil
}

// Forget removes pairs from both maps (e.g. when a VM pair goes away); a
// pair's next packets start it afresh. A declared pair stays declared,
// its numbering and counts back at zero.
func (p *Probe) Forget(pairs ...dataplane.Pair) error {
	m, done, err := p.maps()
	if err != nil {
		return err
	}
	defer done()
	for _, pair := range pairs {
		k, err := keyOf(pair)
		if err != nil {
			return err
		}
		if idx, ok := p.stamped[pair]; ok {
			err = m.SeqlossTx.Update(&k, seqlossTxVal{Ifindex: idx}, ebpf.UpdateExist)
		} else {
			err = m.SeqlossTx.Delete(&k)
		}
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("seqloss: forget %s: %w", pair, err)
		}
		if p.counted[pair] {
			err = m.SeqlossRx.Update(&k, seqlossRxVal{}, ebpf.UpdateExist)
		} else {
			err = m.SeqlossRx.Delete(&k)
		}
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("seqloss: forget %s: %w", pair, err)
		}
	}
	return nil
}

// Stats returns the programs' skip counters summed over CPUs.
func (p *Probe) Stats() (Stats, error) {
	m, done, err := p.maps()
	if err != nil {
		return Stats{}, err
	}
	defer done()
	var per []seqlossStats
	if err := m.SeqlossStats.Lookup(uint32(0), &per); err != nil {
		return Stats{}, fmt.Errorf("seqloss: read stats: %w", err)
	}
	var s Stats
	for _, c := range per {
		s.TxFull += c.TxFull
		s.RxFull += c.RxFull
		s.RxUnmarked += c.RxUnmarked
		s.Fragments += c.Fragments
		s.TxUndeclared += c.TxUndeclared
		s.TxForeign += c.TxForeign
		s.RxUndeclared += c.RxUndeclared
		s.RxForeign += c.RxForeign
	}
	return s, nil
}
