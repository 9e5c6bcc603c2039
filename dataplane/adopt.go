package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// U32Filters lists the u32 classifiers under parent on dev as U32Filter
// values: their node, priority, class and the IPv4 source and destination
// they match (a key this package does not write, such as on another
// offset, makes the filter's Match invalid: Src and Dst both zero).
// The hash tables the kernel keeps for u32 are not listed.
func (n *NS) U32Filters(dev string, parent uint32) ([]U32Filter, error) {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return nil, err
	}
	fs, err := n.nl.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}, parent)
	if err != nil {
		return nil, fmt.Errorf("netns %s: list filters of %s under %s: %w", n.Name, dev, netlink.HandleStr(parent), err)
	}
	var out []U32Filter
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok || u.Sel == nil {
			continue
		}
		node := uint16(u.Handle & MaxU32Node)
		if node == 0 {
			continue
		}
		out = append(out, U32Filter{Parent: parent, Prio: u.Priority, Node: node, Match: matchOf(u.Sel.Keys), ClassID: u.ClassId})
	}
	return out, nil
}

// matchOf is the Match of a selector's keys (selector's inverse).
func matchOf(keys []netlink.TcU32Key) Match {
	var m Match
	for _, k := range keys {
		if k.Mask == 0 && k.Val == 0 && k.Off == 0 {
			continue // match all
		}
		bits := 32 - tz(k.Mask)
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], k.Val)
		p := netip.PrefixFrom(netip.AddrFrom4(a), bits)
		switch {
		case k.Mask != ^uint32(0)<<(32-bits):
			return Match{} // not a prefix: not ours
		case k.Off == offIPSrc:
			m.Src = p
		case k.Off == offIPDst:
			m.Dst = p
		default:
			return Match{}
		}
	}
	return m
}

// tz counts the trailing zero bits of a mask (32 for 0).
func tz(m uint32) int {
	n := 0
	for n < 32 && m&(1<<n) == 0 {
		n++
	}
	return n
}

// AdoptLimiter takes over the limiter an earlier Limiter left on
// cfg.Dev (one whose process stopped or died): the HTB qdisc of handle
// cfg.Major, its pair classes with the rates in force and their
// classifiers, so that the pairs stay limited while the new user takes
// over — rather than NewLimiter's empty limiter, under which every pair
// runs unlimited until it is set again. Classes without a classifier and
// classifiers without a class (what a process killed between the two
// writes leaves) are removed. It fails if the device's root qdisc is not
// that HTB.
func AdoptLimiter(ns *NS, cfg LimiterConfig) (*Limiter, error) {
	if cfg.Major == 0 {
		cfg.Major = 1
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = DefaultLimiterQueue
	}
	idx, err := ns.LinkIndex(cfg.Dev)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	root := TCHandle(cfg.Major, 0)
	q, err := ns.RootQdisc(cfg.Dev)
	if err != nil {
		return nil, fmt.Errorf("limiter: adopt on %s: %w", cfg.Dev, err)
	}
	if q.Kind != "htb" || q.Handle != root {
		return nil, fmt.Errorf("limiter: adopt on %s: its root qdisc is %s, not the limiter's htb %s", cfg.Dev, q, netlink.HandleStr(root))
	}
	classes, err := ns.classCounters(idx, cfg.Dev)
	if err != nil {
		return nil, fmt.Errorf("limiter: adopt: %w", err)
	}
	filters, err := ns.U32Filters(cfg.Dev, root)
	if err != nil {
		return nil, fmt.Errorf("limiter: adopt: %w", err)
	}
	l := &Limiter{ns: ns, dev: cfg.Dev, idx: idx, major: cfg.Major, queue: cfg.QueueBytes, pairs: map[Pair]*pairClass{}, next: 1}
	used := map[uint16]bool{}
	var errs []error
	for _, f := range filters {
		c, ok := classes[f.ClassID]
		src, dst := f.Match.Src, f.Match.Dst
		pair := Pair{Src: src.Addr(), Dst: dst.Addr()}
		_, dup := l.pairs[pair]
		if !ok || f.Prio != filterPrio || f.ClassID != TCHandle(cfg.Major, f.Node) || !src.IsValid() || src.Bits() != 32 || !dst.IsValid() || dst.Bits() != 32 || dup {
			errs = append(errs, ns.DeleteU32(cfg.Dev, root, f.Node))
			continue
		}
		rate := c.Rate
		if rate >= MaxRate {
			rate = math.Inf(1)
		}
		l.pairs[pair] = &pairClass{minor: f.Node, rate: rate}
		used[f.Node] = true
	}
	for h := range classes {
		if minor := uint16(h); h>>16 == uint32(cfg.Major) && minor != 0 && !used[minor] {
			errs = append(errs, ns.DeleteClass(cfg.Dev, root, h))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("limiter: adopt on %s: remove what an earlier limiter left half-made: %w", cfg.Dev, err)
	}
	for m := uint16(1); used[m] || m <= maxKey(used); m++ {
		if !used[m] {
			l.free = append(l.free, m)
		}
		l.next = m + 1
	}
	slices.Reverse(l.free) // lowest minors are reused first
	if _, err := ns.fastSocket(); err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	return l, nil
}

func maxKey(m map[uint16]bool) uint16 {
	var x uint16
	for k := range m {
		x = max(x, k)
	}
	return x
}
