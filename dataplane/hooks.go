package dataplane

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// What a data path that provisions its limiters on devices it did not
// create needs to know about them and to leave them as it found them:
// their veth peers, root qdiscs and clsact hooks.

// VethPeer returns the name of the peer of the veth dev (in n), which
// must be in the namespace peer: dev must be a veth, its peer must be a
// veth in peer whose own peer is dev (checked both ways, so that equal
// interface indexes in other namespaces are not mistaken for it).
func (n *NS) VethPeer(dev string, peer *NS) (string, error) {
	l, err := n.link(dev)
	if err != nil {
		return "", err
	}
	if l.Type() != "veth" {
		return "", fmt.Errorf("netns %s: %s is not a veth (its kind: %s)", n.Name, dev, l.Type())
	}
	a := l.Attrs()
	if a.ParentIndex == 0 {
		return "", fmt.Errorf("netns %s: veth %s: the kernel does not say where its peer is", n.Name, dev)
	}
	same, err := n.sameNS(peer)
	if err != nil {
		return "", err
	}
	want := -1 // the peer in the same namespace carries no namespace id
	if !same {
		if want, err = n.nl.GetNetNsIdByFd(int(peer.h)); err != nil {
			return "", fmt.Errorf("netns %s: id of netns %s: %w", n.Name, peer.Name, err)
		}
	}
	if a.NetNsID != want || (!same && want < 0) {
		return "", fmt.Errorf("netns %s: the peer of veth %s is not in netns %s", n.Name, dev, peer.Name)
	}
	pl, err := peer.nl.LinkByIndex(a.ParentIndex)
	if err != nil {
		return "", fmt.Errorf("netns %s: the peer of veth %s (index %d) is not in netns %s: %w", n.Name, dev, a.ParentIndex, peer.Name, err)
	}
	if pl.Type() != "veth" || pl.Attrs().ParentIndex != a.Index {
		return "", fmt.Errorf("netns %s: the peer of veth %s is not in netns %s (index %d there is %s %s)", n.Name, dev, peer.Name, a.ParentIndex, pl.Type(), pl.Attrs().Name)
	}
	return pl.Attrs().Name, nil
}

// sameNS reports whether n and o are the same namespace.
func (n *NS) sameNS(o *NS) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(n.h), &a); err != nil {
		return false, fmt.Errorf("netns %s: stat: %w", n.Name, err)
	}
	if err := unix.Fstat(int(o.h), &b); err != nil {
		return false, fmt.Errorf("netns %s: stat: %w", o.Name, err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// Qdisc is a qdisc as a device has it: its kind and handle.
type Qdisc struct {
	Kind   string
	Handle uint32
}

// Default reports whether the qdisc is one the kernel attached itself
// (handle 0: noqueue, pfifo_fast, mq, the default qdisc), which deleting
// the root qdisc brings back.
func (q Qdisc) Default() bool { return q.Handle == 0 }

func (q Qdisc) String() string { return q.Kind + " " + netlink.HandleStr(q.Handle) }

// RootQdisc returns dev's root qdisc (Kind "" if it has none).
func (n *NS) RootQdisc(dev string) (Qdisc, error) {
	l, err := n.link(dev)
	if err != nil {
		return Qdisc{}, err
	}
	qs, err := n.nl.QdiscList(l)
	if err != nil {
		return Qdisc{}, fmt.Errorf("netns %s: list qdiscs of %s: %w", n.Name, dev, err)
	}
	for _, q := range qs {
		if a := q.Attrs(); a.Parent == netlink.HANDLE_ROOT {
			return Qdisc{Kind: q.Type(), Handle: a.Handle}, nil
		}
	}
	return Qdisc{}, nil
}

// HasClsact reports whether dev has a clsact qdisc (EnsureClsact).
func (n *NS) HasClsact(dev string) (bool, error) {
	l, err := n.link(dev)
	if err != nil {
		return false, err
	}
	qs, err := n.nl.QdiscList(l)
	if err != nil {
		return false, fmt.Errorf("netns %s: list qdiscs of %s: %w", n.Name, dev, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_CLSACT && q.Type() == "clsact" {
			return true, nil
		}
	}
	return false, nil
}

// DeleteClsact removes dev's clsact qdisc and every filter (and BPF
// program) on its hooks; a device without one is not an error.
func (n *NS) DeleteClsact(dev string) error {
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := n.nl.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("netns %s: delete clsact of %s: %w", n.Name, dev, err)
	}
	return nil
}

// HookFilter is a filter on a clsact hook: its priority and kind (u32,
// bpf, ...).
type HookFilter struct {
	Prio uint16
	Kind string
}

// HookFilters lists the filters on one clsact hook of dev (none if dev
// has no clsact).
func (n *NS) HookFilters(dev string, d Direction) ([]HookFilter, error) {
	ok, err := n.HasClsact(dev)
	if err != nil || !ok {
		return nil, err
	}
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return nil, err
	}
	fs, err := n.nl.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}, d.parent())
	if err != nil {
		return nil, fmt.Errorf("netns %s: list %s filters of %s: %w", n.Name, d, dev, err)
	}
	out := make([]HookFilter, 0, len(fs))
	for _, f := range fs {
		out = append(out, HookFilter{Prio: f.Attrs().Priority, Kind: f.Type()})
	}
	return out, nil
}

// DeleteHookFilters deletes every filter of priority prio on one clsact
// hook of dev; none is not an error.
func (n *NS) DeleteHookFilters(dev string, d Direction, prio uint16) error {
	if prio == 0 {
		return fmt.Errorf("netns %s: delete %s filters of %s: priority 0 (every filter)", n.Name, d, dev)
	}
	ok, err := n.HasClsact(dev)
	if err != nil || !ok {
		return err
	}
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	req := n.request(unix.RTM_DELTFILTER, 0)
	// handle 0 and any protocol: the whole classifier at that priority
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(idx), Parent: d.parent(), Info: uint32(prio) << 16})
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns %s: delete %s filters of priority %d on %s: %w", n.Name, d, prio, dev, err)
	}
	return nil
}

// DeleteHookU32 deletes the u32 filter of the node (U32Filter.Node)
// under priority prio on one clsact hook of dev, leaving the other
// filters of that priority; none is not an error.
func (n *NS) DeleteHookU32(dev string, d Direction, prio, node uint16) error {
	ok, err := n.HasClsact(dev)
	if err != nil || !ok {
		return err
	}
	idx, err := n.LinkIndex(dev)
	if err != nil {
		return err
	}
	fs, err := n.nl.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}, d.parent())
	if err != nil {
		return fmt.Errorf("netns %s: list %s filters of %s: %w", n.Name, d, dev, err)
	}
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok || u.Priority != prio || u.Handle&0xfff != uint32(node) {
			continue
		}
		del := &netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: d.parent(), Priority: prio, Protocol: u.Protocol, Handle: u.Handle}}
		if err := n.nl.FilterDel(del); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("netns %s: delete u32 filter %s of priority %d on %s %s: %w", n.Name, netlink.HandleStr(u.Handle), prio, d, dev, err)
		}
	}
	return nil
}

// IsIFB reports whether the named device exists in n and is an IFB.
func (n *NS) IsIFB(name string) (exists, ifb bool, err error) {
	l, err := n.nl.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return false, false, nil
		}
		return false, false, fmt.Errorf("netns %s: link %s: %w", n.Name, name, err)
	}
	return true, l.Type() == "ifb", nil
}

// IsLinkNotFound reports whether err says a device does not exist.
func IsLinkNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}
