package dataplane

import (
	"net/netip"
	"strings"
	"testing"
)

// TestHooks: a veth's peer is found in its namespace, both ways, and
// refused in another; root qdiscs read as the kernel's default until one
// is set; a clsact hook's filters are listed and deleted by priority,
// and the clsact removed; IFBs are told from other devices.
func TestHooks(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	mk := func(name string) *NS {
		n, err := CreateNS(NSPrefix(prefix)+name, NSOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	h, a, b := mk("h"), mk("a"), mk("b")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.AddVeth(prefix+"h", a, prefix+"a"))
	must(a.AddVeth(prefix+"x", b, prefix+"y"))
	must(h.AddIFB(prefix + "i"))
	for _, c := range []struct {
		ns, peer *NS
		dev      string
		want     string // the peer's name, or the error's words
		ok       bool
	}{
		{a, h, prefix + "a", prefix + "h", true},
		{h, a, prefix + "h", prefix + "a", true},
		{a, h, prefix + "x", "not in netns " + h.Name, false},
		{a, h, "lo", "not a veth", false},
		{h, a, prefix + "i", "not a veth", false},
		{a, h, prefix + "nope", "not found", false},
	} {
		got, err := c.ns.VethPeer(c.dev, c.peer)
		if c.ok && (err != nil || got != c.want) || !c.ok && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("peer of %s/%s in %s: %q, %v; want %q", c.ns.Name, c.dev, c.peer.Name, got, err, c.want)
		}
	}
	// a namespace opened by the path of its file is the same
	hp, err := OpenNSPath("by-path", NetnsDir+"/"+h.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer hp.Close()
	hi, err1 := h.Inode()
	pi, err2 := hp.Inode()
	if err1 != nil || err2 != nil || hi != pi {
		t.Errorf("inodes %d and %d (%v, %v): want the same namespace", hi, pi, err1, err2)
	}
	if got, err := a.VethPeer(prefix+"a", hp); err != nil || got != prefix+"h" {
		t.Errorf("peer in the namespace opened by path: %q, %v", got, err)
	}
	dev := prefix + "h"
	if q, err := h.RootQdisc(dev); err != nil || !q.Default() {
		t.Errorf("root qdisc of a new veth: %v, %v", q, err)
	}
	must(h.ReplaceHTB(dev, HTB{Handle: TCHandle(3, 0), Parent: rootParent}))
	if q, err := h.RootQdisc(dev); err != nil || q.Default() || q.Kind != "htb" || q.Handle != TCHandle(3, 0) {
		t.Errorf("root qdisc after an HTB 3: %v, %v", q, err)
	}
	must(h.DeleteRootQdisc(dev))
	if ok, err := h.HasClsact(dev); err != nil || ok {
		t.Errorf("clsact on a new veth: %v, %v", ok, err)
	}
	if fs, err := h.HookFilters(dev, Ingress); err != nil || len(fs) != 0 {
		t.Errorf("ingress filters without clsact: %v, %v", fs, err)
	}
	must(h.DeleteHookFilters(dev, Ingress, 5)) // nothing there
	must(h.RedirectIngress(dev, prefix+"i", 5))
	if fs, err := h.HookFilters(dev, Ingress); err != nil || len(fs) != 1 || fs[0] != (HookFilter{Prio: 5, Kind: "u32"}) {
		t.Errorf("ingress filters: %v, %v; want one u32 of priority 5", fs, err)
	}
	must(h.DeleteHookFilters(dev, Ingress, 5))
	if fs, err := h.HookFilters(dev, Ingress); err != nil || len(fs) != 0 {
		t.Errorf("ingress filters once deleted: %v, %v", fs, err)
	}
	// one node of a priority is deleted, the others and other
	// priorities stay
	m := Match{Dst: netip.MustParsePrefix("10.9.0.1/32")}
	must(h.RedirectIngressMatch(dev, prefix+"i", 5, 1, m))
	must(h.RedirectIngressMatch(dev, prefix+"i", 5, 2, Match{Dst: netip.MustParsePrefix("10.9.0.2/32")}))
	must(h.RedirectIngressMatch(dev, prefix+"i", 6, 1, m))
	must(h.DeleteHookU32(dev, Ingress, 5, 1))
	must(h.DeleteHookU32(dev, Ingress, 5, 1)) // gone: not an error
	if rs, err := h.IngressRedirected(dev); err != nil || len(rs) != 2 {
		t.Errorf("redirections once node 1 of priority 5 was deleted: %v, %v; want node 2 of 5 and node 1 of 6", rs, err)
	} else if rs[2].Dst != netip.MustParsePrefix("10.9.0.2/32") || rs[1].Dst != m.Dst {
		t.Errorf("redirections left: %v", rs)
	}
	must(h.DeleteHookFilters(dev, Ingress, 5))
	must(h.DeleteHookFilters(dev, Ingress, 6))
	if fs, err := h.HookFilters(dev, Ingress); err != nil || len(fs) != 0 {
		t.Errorf("ingress filters once deleted: %v, %v", fs, err)
	}
	must(h.DeleteClsact(dev))
	if ok, err := h.HasClsact(dev); err != nil || ok {
		t.Errorf("clsact once deleted: %v, %v", ok, err)
	}
	must(h.DeleteClsact(dev)) // none: not an error
	for name, want := range map[string][2]bool{prefix + "i": {true, true}, dev: {true, false}, prefix + "z": {false, false}} {
		if found, ifb, err := h.IsIFB(name); err != nil || [2]bool{found, ifb} != want {
			t.Errorf("IsIFB(%s): %v %v, %v; want %v", name, found, ifb, err, want)
		}
	}
}
