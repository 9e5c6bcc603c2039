package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// TCHandle makes the tc handle major:minor.
func TCHandle(major, minor uint16) uint32 { return uint32(major)<<16 | uint32(minor) }

// Direction is a clsact hook of a device.
type Direction int

// clsact hooks.
const (
	Ingress Direction = iota
	Egress
)

func (d Direction) String() string {
	if d == Ingress {
		return "ingress"
	}
	return "egress"
}

// parent is the filter parent of the clsact hook.
func (d Direction) parent() uint32 {
	if d == Ingress {
		return netlink.HANDLE_MIN_INGRESS
	}
	return netlink.HANDLE_MIN_EGRESS
}

// MaxRate is the largest rate (bits/s) an HTB class is given here; a class
// "without limit" gets it. It is far above what any link the model can
// declare on a host carries today (1 Tbit/s: rates above 32 Gbit/s go to
// the kernel as 64-bit attributes), so that an unlimited class never caps
// a flow — at 10 Gbit/s it took 43% of a fast flow on this kind of
// machine (docs/results.md, "Enforcement at line rate").
const MaxRate = 1e12

// MinRate is the smallest rate (bits/s) an HTB class is given: HTB cannot
// express zero; a pair limited to 0 gets this.
const MinRate = 8e3

// HTB is an HTB qdisc.
type HTB struct {
	// Handle is the qdisc's handle (major:0), Parent where it attaches
	// (netlink.HANDLE_ROOT for the root).
	Handle, Parent uint32
	// Default is the minor of the class unclassified packets go to; 0 (or a
	// class that does not exist) sends them unshaped through the direct
	// queue.
	Default uint16
	// DirectQlen bounds the direct queue in packets (0: the device's
	// transmit queue length).
	DirectQlen uint32
}

// HTBClass is one HTB class. Rates are in bits/s; sizes in bytes.
type HTBClass struct {
	Parent, Handle uint32
	Rate           float64
	Ceil           float64 // 0: Rate
	Burst, Cburst  uint32  // 0: DefaultBurst of Rate / Ceil
	Quantum        uint32  // 0: DefaultQuantum of Rate
	Prio           uint32
}

// DefaultBurst is the burst given to an HTB class of the rate (bits/s)
// when none is set: 1 ms at the rate, at least two full-size frames.
func DefaultBurst(rate float64) uint32 {
	return uint32(math.Max(rate/8/1000, 2*1514))
}

// DefaultQuantum is the HTB quantum given to a class of the rate (bits/s)
// when none is set: rate/10 bytes per round (HTB's r2q), within
// [1514, 200000] bytes as the kernel wants.
func DefaultQuantum(rate float64) uint32 {
	return uint32(math.Min(math.Max(rate/8/10, 1514), 200000))
}

// ReplaceHTB installs (or replaces) an HTB qdisc on dev.
func (n *NS) ReplaceHTB(dev string, q HTB) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	h := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: q.Handle, Parent: q.Parent})
	h.Defcls = uint32(q.Default)
	if q.DirectQlen > 0 {
		dq := q.DirectQlen
		h.DirectQlen = &dq
	}
	if err := n.nl.QdiscReplace(h); err != nil {
		return fmt.Errorf("netns %s: replace htb qdisc %s on %s: %w", n.Name, netlink.HandleStr(q.Handle), dev, err)
	}
	return nil
}

// htbClass converts c to the netlink form for device index idx.
func htbClass(idx int, c HTBClass) (*netlink.HtbClass, error) {
	ceil := c.Ceil
	if ceil == 0 {
		ceil = c.Rate
	}
	if !(c.Rate >= MinRate/2) || !(ceil >= c.Rate) || ceil > 1e12 {
		return nil, fmt.Errorf("htb class %s: rate %v, ceil %v bits/s: need 0 < rate <= ceil <= 1e12", netlink.HandleStr(c.Handle), c.Rate, ceil)
	}
	burst, cburst := c.Burst, c.Cburst
	if burst == 0 {
		burst = DefaultBurst(c.Rate)
	}
	if cburst == 0 {
		cburst = DefaultBurst(ceil)
	}
	quantum := c.Quantum
	if quantum == 0 {
		quantum = DefaultQuantum(c.Rate)
	}
	rate, crate := uint64(c.Rate/8), uint64(ceil/8)
	return &netlink.HtbClass{
		ClassAttrs: netlink.ClassAttrs{LinkIndex: idx, Handle: c.Handle, Parent: c.Parent},
		Rate:       rate,
		Ceil:       crate,
		Buffer:     netlink.Xmittime(rate, burst),
		Cbuffer:    netlink.Xmittime(crate, cburst),
		Quantum:    quantum,
		Prio:       c.Prio,
	}, nil
}

// ReplaceHTBClass creates or changes an HTB class on dev.
func (n *NS) ReplaceHTBClass(dev string, c HTBClass) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	return n.replaceHTBClass(idx, dev, c)
}

func (n *NS) replaceHTBClass(idx int, dev string, c HTBClass) error {
	hc, err := htbClass(idx, c)
	if err != nil {
		return fmt.Errorf("netns %s: %s: %w", n.Name, dev, err)
	}
	if err := n.nl.ClassReplace(hc); err != nil {
		return fmt.Errorf("netns %s: replace htb class %s on %s: %w", n.Name, netlink.HandleStr(c.Handle), dev, err)
	}
	return nil
}

// ChangeHTBClass changes an existing HTB class in place: one netlink
// request on the namespace's hot-path socket.
func (n *NS) ChangeHTBClass(dev string, c HTBClass) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	return n.changeHTBClass(idx, dev, c)
}

func (n *NS) changeHTBClass(idx int, dev string, c HTBClass) error {
	f, err := n.fastSocket()
	if err != nil {
		return err
	}
	if err := f.changeHTBClass(idx, c); err != nil {
		return fmt.Errorf("netns %s: %s: %w", n.Name, dev, err)
	}
	return nil
}

// DeleteClass deletes a class (it must have no children and no filter
// pointing at it).
func (n *NS) DeleteClass(dev string, parent, handle uint32) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	c := &netlink.HtbClass{ClassAttrs: netlink.ClassAttrs{LinkIndex: idx, Handle: handle, Parent: parent}}
	if err := n.nl.ClassDel(c); err != nil {
		return fmt.Errorf("netns %s: delete class %s on %s: %w", n.Name, netlink.HandleStr(handle), dev, err)
	}
	return nil
}

// ReplaceFIFO attaches a byte-limited FIFO (bfifo: drop-tail at
// limitBytes) under parent, e.g. as the leaf queue of an HTB class.
func (n *NS) ReplaceFIFO(dev string, parent, handle uint32, limitBytes uint32) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	if limitBytes == 0 {
		return fmt.Errorf("netns %s: bfifo on %s: zero limit", n.Name, dev)
	}
	req := n.request(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(idx), Handle: handle, Parent: parent})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("bfifo")))
	opt := make([]byte, 4)
	nl.NativeEndian().PutUint32(opt, limitBytes)
	req.AddData(nl.NewRtAttr(nl.TCA_OPTIONS, opt))
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("netns %s: replace bfifo %s (limit %d bytes) on %s: %w", n.Name, netlink.HandleStr(handle), limitBytes, dev, err)
	}
	return nil
}

func (n *NS) request(typ, flags int) *nl.NetlinkRequest {
	return &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{
			Len:   uint32(unix.SizeofNlMsghdr),
			Type:  uint16(typ),
			Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | uint16(flags),
		},
		Sockets: n.raw,
	}
}

// DeleteRootQdisc removes dev's root qdisc, whatever its kind, and
// everything under it; a device without one is not an error.
func (n *NS) DeleteRootQdisc(dev string) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	req := n.request(unix.RTM_DELQDISC, 0)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(idx), Parent: rootParent})
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns %s: delete root qdisc of %s: %w", n.Name, dev, err)
	}
	return nil
}

// EnsureClsact adds the clsact qdisc (ingress and egress filter hooks) to
// dev unless it has one.
func (n *NS) EnsureClsact(dev string) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := n.nl.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("netns %s: add clsact to %s: %w", n.Name, dev, err)
	}
	return nil
}

// Match selects IPv4 packets by source and destination prefix; an invalid
// (zero) prefix matches any address.
type Match struct {
	Src, Dst netip.Prefix
}

func (m Match) String() string {
	s, d := "any", "any"
	if m.Src.IsValid() {
		s = m.Src.String()
	}
	if m.Dst.IsValid() {
		d = m.Dst.String()
	}
	return s + "->" + d
}

// u32 offsets of the IPv4 source and destination in the network header.
const (
	offIPSrc = 12
	offIPDst = 16
)

// selector builds the u32 selector of m.
func (m Match) selector() (*nl.TcU32Sel, error) {
	sel := &nl.TcU32Sel{Flags: nl.TC_U32_TERMINAL}
	add := func(p netip.Prefix, off int32) error {
		if !p.IsValid() {
			return nil
		}
		if !p.Addr().Is4() {
			return fmt.Errorf("match %s: IPv4 only", p)
		}
		p = p.Masked()
		a := p.Addr().As4()
		var mask uint32
		if p.Bits() > 0 {
			mask = ^uint32(0) << (32 - p.Bits())
		}
		sel.Keys = append(sel.Keys, nl.TcU32Key{Mask: mask, Val: binary.BigEndian.Uint32(a[:]) & mask, Off: off})
		return nil
	}
	if err := add(m.Src, offIPSrc); err != nil {
		return nil, err
	}
	if err := add(m.Dst, offIPDst); err != nil {
		return nil, err
	}
	if len(sel.Keys) == 0 {
		sel.Keys = append(sel.Keys, nl.TcU32Key{}) // match all
	}
	sel.Nkeys = uint8(len(sel.Keys))
	return sel, nil
}

// MaxU32Node is the largest u32 node number in a hash table.
const MaxU32Node = 0xfff

// The filters here live in the root hash table of their u32 instance,
// whose id the kernel picks (800:, 801:, ... as u32 instances share a
// qdisc): they are added with the node number alone as handle and found
// again by node, so each parent (qdisc or clsact hook) must hold u32
// filters of a single priority.

// U32Filter is a u32 classifier on IPv4 packets. When it matches: with
// ClassID, it classifies the packet into that class (an HTB filter); with
// RedirectTo, it redirects the packet to that device's egress (mirred; on
// a clsact hook). The kernel here has no gact, police or matchall, so
// counting is done by HTB classes (see Limiter).
type U32Filter struct {
	Parent     uint32
	Prio       uint16
	Node       uint16 // 1..MaxU32Node: the filter's node in its u32 root table
	Match      Match
	ClassID    uint32
	RedirectTo int // ifindex
}

// AddU32 adds the filter to dev.
func (n *NS) AddU32(dev string, f U32Filter) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	return n.addU32(idx, dev, f)
}

func (n *NS) addU32(idx int, dev string, f U32Filter) error {
	if f.Node == 0 || f.Node > MaxU32Node {
		return fmt.Errorf("netns %s: u32 filter on %s: node %d out of [1, %d]", n.Name, dev, f.Node, MaxU32Node)
	}
	sel, err := f.Match.selector()
	if err != nil {
		return fmt.Errorf("netns %s: u32 filter on %s: %w", n.Name, dev, err)
	}
	u := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: idx,
			Parent:    f.Parent,
			Priority:  f.Prio,
			Protocol:  unix.ETH_P_IP,
			Handle:    uint32(f.Node),
		},
		Sel:     sel,
		ClassId: f.ClassID,
	}
	if f.RedirectTo != 0 {
		u.Actions = append(u.Actions, netlink.NewMirredAction(f.RedirectTo))
	}
	if err := n.nl.FilterAdd(u); err != nil {
		return fmt.Errorf("netns %s: add u32 filter %s (%s) on %s: %w", n.Name, netlink.HandleStr(u.Handle), f.Match, dev, err)
	}
	return nil
}

// DeleteU32 deletes the u32 filter with the node number under parent.
func (n *NS) DeleteU32(dev string, parent uint32, node uint16) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	fs, err := n.nl.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}, parent)
	if err != nil {
		return fmt.Errorf("netns %s: list filters of %s: %w", n.Name, dev, err)
	}
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok || u.Handle&0xfff != uint32(node) {
			continue
		}
		d := &netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: parent, Priority: u.Priority, Protocol: u.Protocol, Handle: u.Handle}}
		if err := n.nl.FilterDel(d); err != nil {
			return fmt.Errorf("netns %s: delete u32 filter %s on %s: %w", n.Name, netlink.HandleStr(u.Handle), dev, err)
		}
		return nil
	}
	return fmt.Errorf("netns %s: delete u32 filter node %d under %s on %s: not found", n.Name, node, netlink.HandleStr(parent), dev)
}

// RedirectIngress sends every IPv4 packet arriving at dev to the egress of
// the device to (an IFB), whose qdisc then shapes it before it continues
// up dev's receive path. It adds clsact to dev if needed; prio orders it
// among dev's ingress filters.
func (n *NS) RedirectIngress(dev, to string, prio uint16) error {
	if err := n.EnsureClsact(dev); err != nil {
		return err
	}
	toIdx, err := n.LinkIndex(to)
	if err != nil {
		return err
	}
	return n.AddU32(dev, U32Filter{Parent: Ingress.parent(), Prio: prio, Node: 1, RedirectTo: toIdx})
}

// Counters are the counters of an HTB class (datapath.Counters: bytes
// and packets sent, drops at its queue, times it was over its rate,
// bytes and packets queued now, its rate and ceiling).
type Counters = datapath.Counters

// ClassCounters returns the counters of every class on dev by handle.
func (n *NS) ClassCounters(dev string) (map[uint32]Counters, error) {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return nil, err
	}
	return n.classCounters(idx, dev)
}

func (n *NS) classCounters(idx int, dev string) (map[uint32]Counters, error) {
	out := map[uint32]Counters{}
	if err := n.dumpClasses(idx, dev, func(h uint32, c Counters) { out[h] = c }); err != nil {
		return nil, err
	}
	return out, nil
}

// dumpClasses reads every class of dev (index idx) in one netlink dump
// on the namespace's hot-path socket, parsed by hand (no reflection).
func (n *NS) dumpClasses(idx int, dev string, fn func(handle uint32, c Counters)) error {
	f, err := n.fastSocket()
	if err != nil {
		return err
	}
	if err := f.dumpClasses(idx, fn); err != nil {
		return fmt.Errorf("netns %s: %s: %w", n.Name, dev, err)
	}
	return nil
}

// classCountersLib is classCounters through the netlink package's
// ClassList (reflection-based parsing), for comparison in tests and
// benchmarks.
func (n *NS) classCountersLib(idx int, dev string) (map[uint32]Counters, error) {
	cs, err := n.nl.ClassList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}, 0)
	if err != nil {
		return nil, fmt.Errorf("netns %s: list classes of %s: %w", n.Name, dev, err)
	}
	out := make(map[uint32]Counters, len(cs))
	for _, c := range cs {
		a := c.Attrs()
		var k Counters
		if s := a.Statistics; s != nil {
			if s.Basic != nil {
				k.Bytes, k.Packets = s.Basic.Bytes, uint64(s.Basic.Packets)
			}
			if s.Queue != nil {
				k.Drops, k.Overlimits, k.Backlog, k.Qlen = s.Queue.Drops, s.Queue.Overlimits, s.Queue.Backlog, s.Queue.Qlen
			}
		}
		if h, ok := c.(*netlink.HtbClass); ok {
			k.Rate, k.Ceil = float64(h.Rate)*8, float64(h.Ceil)*8
		}
		out[a.Handle] = k
	}
	return out, nil
}
