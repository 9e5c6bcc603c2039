package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// RedirectIngressMatch redirects the IPv4 packets arriving at dev that
// match m to the egress of the device to (an IFB), with a u32 filter of
// the given node (1..MaxU32Node, in match order) under prio on dev's
// ingress hook. Its mirred action counts what it redirected
// (IngressRedirected), so one filter per destination measures each
// destination's arrivals, offload packets counted whole.
func (n *NS) RedirectIngressMatch(dev, to string, prio, node uint16, m Match) error {
	if err := n.EnsureClsact(dev); err != nil {
		return err
	}
	toIdx, err := n.LinkIndex(to)
	if err != nil {
		return err
	}
	return n.AddU32(dev, U32Filter{Parent: Ingress.parent(), Prio: prio, Node: node, Match: m, RedirectTo: toIdx})
}

// Redirected is what one ingress redirection filter matched: its
// destination prefix (invalid if it matches any) and the bytes and
// packets its action redirected.
type Redirected struct {
	Dst            netip.Prefix
	Bytes, Packets uint64
}

// IngressRedirected returns the counters of the u32 redirection filters
// on dev's ingress hook, by node.
func (n *NS) IngressRedirected(dev string) (map[uint16]Redirected, error) {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return nil, err
	}
	fs, err := n.nl.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}, Ingress.parent())
	if err != nil {
		return nil, fmt.Errorf("netns %s: list ingress filters of %s: %w", n.Name, dev, err)
	}
	out := map[uint16]Redirected{}
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok {
			continue
		}
		var r Redirected
		if u.Sel != nil {
			for _, k := range u.Sel.Keys {
				if k.Off == offIPDst && k.Mask != 0 {
					var a [4]byte
					binary.BigEndian.PutUint32(a[:], k.Val)
					bits := 32
					for m := k.Mask; m&1 == 0; m >>= 1 {
						bits--
					}
					r.Dst = netip.PrefixFrom(netip.AddrFrom4(a), bits)
				}
			}
		}
		for _, a := range u.Actions {
			if s := a.Attrs().Statistics; s != nil && s.Basic != nil {
				r.Bytes += s.Basic.Bytes
				r.Packets += uint64(s.Basic.Packets)
			}
		}
		out[uint16(u.Handle&0xfff)] = r
	}
	return out, nil
}
