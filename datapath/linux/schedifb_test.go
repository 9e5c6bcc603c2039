package linux

import (
	"math"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// schedPath is lossyPath with its link unshaped: the schedulers are the
// only bottleneck.
func schedPath(t *testing.T) *lossyPath {
	t.Helper()
	p := newLossyPath(t)
	if err := p.s1.DeleteRootQdisc(p.u1); err != nil {
		t.Fatal(err)
	}
	return p
}

// schedHost returns a data path for a server that builds its VMs'
// limiters and its per-VM schedulers itself, closed when the test ends
// (if the test did not close it).
func schedHost(t *testing.T, ns *dataplane.NS, uplink string, loss VMLossCounter) *Host {
	t.Helper()
	cfg := Config{NS: ns, Schedulers: true, Links: []string{uplink}}
	if loss != nil {
		cfg.Loss = loss
	}
	h, err := NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Remove(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

// uplinkRedirects returns the destinations of the redirections on an
// uplink's ingress by node ("any" for the catch-all).
func uplinkRedirects(t *testing.T, ns *dataplane.NS, dev string) map[uint16]string {
	t.Helper()
	rs, err := ns.IngressRedirected(dev)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint16]string{}
	for n, r := range rs {
		out[n] = "any"
		if r.Dst.IsValid() {
			out[n] = r.Dst.String()
		}
	}
	return out
}

func ifbs(t *testing.T, ns *dataplane.NS) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns.Name, "-o", "link", "show", "type", "ifb").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show type ifb: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestSchedulersRefused: a Host that builds its schedulers needs uplinks
// and excludes given IFBs; it refuses an uplink whose ingress has a
// filter it did not make, and a device of its IFBs' names that is not
// an IFB, leaving nothing behind; it replaces an IFB of those names (an
// earlier run's); it refuses a VM whose device is on the server, which
// stays untouched.
func TestSchedulersRefused(t *testing.T) {
	needRoot(t)
	p := schedPath(t)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{NS: p.s1, Schedulers: true}, "uplinks"},
		{Config{NS: p.s1, Schedulers: true, Links: []string{p.u1}, TXIFB: "x"}, "no TXIFB"},
		{Config{NS: p.s1, Schedulers: true, Links: []string{p.prefix + "nope"}}, "not made yet"},
	} {
		if h, err := NewHost(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			if h != nil {
				_ = h.Remove()
			}
			t.Errorf("NewHost(%+v): %v; want an error saying %q", c.cfg, err, c.want)
		}
	}
	// someone else's filter on the uplink's ingress
	foreign := p.prefix + "f"
	if err := p.s2.AddIFB(foreign); err != nil {
		t.Fatal(err)
	}
	if err := p.s2.RedirectIngress(p.u2, foreign, 7); err != nil {
		t.Fatal(err)
	}
	if h, err := NewHost(Config{NS: p.s2, Schedulers: true, Links: []string{p.u2}}); err == nil || !strings.Contains(err.Error(), "priority 7") {
		if h != nil {
			_ = h.Remove()
		}
		t.Errorf("an uplink with a foreign ingress filter: %v", err)
	}
	if err := p.s2.DeleteHookFilters(p.u2, dataplane.Ingress, 7); err != nil {
		t.Fatal(err)
	}
	if err := p.s2.DeleteClsact(p.u2); err != nil {
		t.Fatal(err)
	}
	if err := p.s2.DeleteLink(foreign); err != nil {
		t.Fatal(err)
	}
	// a device of the IFB's name that is not an IFB
	if err := p.s2.AddVeth(SchedRXIFB, p.b, p.prefix+"t"); err != nil {
		t.Fatal(err)
	}
	if h, err := NewHost(Config{NS: p.s2, Schedulers: true, Links: []string{p.u2}}); err == nil || !strings.Contains(err.Error(), "not an IFB") {
		if h != nil {
			_ = h.Remove()
		}
		t.Errorf("a veth named %s: %v", SchedRXIFB, err)
	}
	pristine(t, p.s2, p.u2)
	if l := ifbs(t, p.s2); l != "" {
		t.Errorf("a refused Host left IFBs: %s", l)
	}
	if err := p.s2.DeleteLink(SchedRXIFB); err != nil {
		t.Fatal(err)
	}
	// an earlier run's IFB is replaced
	if err := p.s1.AddIFB(SchedTXIFB); err != nil {
		t.Fatal(err)
	}
	h := schedHost(t, p.s1, p.u1, nil)
	if got := uplinkRedirects(t, p.s1, p.u1); len(got) != 1 || got[SchedCatchAll] != "any" {
		t.Errorf("redirections on %s with no VM: %v; want the catch-all alone", p.u1, got)
	}
	// a VM's device on the server
	if _, err := h.Attach(datapath.VM{Name: "x", Addr: p.pair.Src, Interface: p.sa}); err == nil || !strings.Contains(err.Error(), "namespace of its own") {
		t.Errorf("a VM without a namespace: %v", err)
	}
	pristine(t, p.s1, p.sa)
	if err := h.Remove(); err != nil {
		t.Fatal(err)
	}
	pristine(t, p.s1, p.u1)
	if l := ifbs(t, p.s1); l != "" {
		t.Errorf("IFBs after close: %s", l)
	}
}

// TestSchedulersBuilt: two servers build their per-VM schedulers before
// any VM is attached (one with a sequence-gap loss counter on the same
// uplink); VMs a (on s1) and b (on s2) are attached afterwards, and one
// TCP transfer a→b is limited first by a's limit at s1's egress
// scheduler, then by b's at s2's ingress scheduler: the scheduler's
// class and b's receive counter each carry the limit within 10%, and
// the ingress scheduler counts b's arrivals before it. Detach leaves
// the VMs' devices as they were and the uplinks with the catch-all
// alone; Close leaves no IFB, filter or qdisc of its own.
func TestSchedulersBuilt(t *testing.T) {
	needRoot(t)
	const limit = 100e6
	p := schedPath(t)
	lc, err := NewLossCounter(LossSeq, p.s2, []string{p.u2})
	if err != nil {
		t.Fatal(err)
	}
	h1 := schedHost(t, p.s1, p.u1, nil)
	h2 := schedHost(t, p.s2, p.u2, lc)
	if _, err := h1.Attach(datapath.VM{Name: "a", Addr: p.pair.Src, Interface: p.aDev, Netns: p.a.Name}); err != nil {
		t.Fatal(err)
	}
	vb := datapath.VM{Name: "b", Addr: p.pair.Dst, Interface: p.bDev, Netns: p.b.Name}
	pb, err := h2.Attach(vb)
	if err != nil {
		t.Fatal(err)
	}
	if err := pb.RX.(datapath.PairCounterSet).CountPair(p.pair); err != nil {
		t.Fatal(err)
	}
	if got := uplinkRedirects(t, p.s2, p.u2); len(got) != 2 || got[1] != p.pair.Dst.String()+"/32" || got[SchedCatchAll] != "any" {
		t.Errorf("redirections on %s: %v; want b's (node 1) and the catch-all", p.u2, got)
	}
	if f := hookFilters(t, p.s1, p.sa); !strings.Contains(f, "ingress") || !strings.Contains(f, SchedTXIFB) {
		t.Errorf("%s's filters: %s; want its ingress redirected to %s", p.sa, f, SchedTXIFB)
	}
	// the agent tells the schedulers its VMs (agent.scheduleVMs)
	tx, rx := h1.Scheduler(mech.Egress), h2.Scheduler(mech.Ingress)
	if err := tx.SetVMs(map[string]netip.Addr{"a": p.pair.Src}); err != nil {
		t.Fatal(err)
	}
	if err := rx.SetVMs(map[string]netip.Addr{"b": p.pair.Dst}); err != nil {
		t.Fatal(err)
	}
	if err := tx.SetLimit("a", limit); err != nil {
		t.Fatal(err)
	}
	iperf3(t, p.prefix, p.a, p.b, p.pair, 9*time.Second)

	// measure reads, over d, the rate of the scheduler's class of vm
	// and of the pair at b's receive counter, and b's arrivals (bits/s).
	// (It logs the packets — segments — the class and b's redirection
	// filter on the uplink counted.)
	measure := func(s datapath.Scheduler, vm string, d time.Duration) (class, recv, arr float64) {
		t.Helper()
		read := func() (c datapath.Counters, r, a, ap uint64) {
			cs, err := s.Counters()
			if err != nil {
				t.Fatal(err)
			}
			rs, err := pb.RX.Counters()
			if err != nil {
				t.Fatal(err)
			}
			as, err := rx.Arrivals()
			if err != nil {
				t.Fatal(err)
			}
			rd, err := p.s2.IngressRedirected(p.u2)
			if err != nil {
				t.Fatal(err)
			}
			return cs[vm], rs[p.pair].Bytes, as["b"], rd[1].Packets
		}
		c0, r0, a0, ap0 := read()
		start := time.Now()
		time.Sleep(d)
		c1, r1, a1, ap1 := read()
		sec := time.Since(start).Seconds()
		t.Logf("%s's class: %d packets, %d drops; b's filter on %s: %d packets", vm, c1.Packets-c0.Packets, c1.Drops-c0.Drops, p.u2, ap1-ap0)
		return float64(c1.Bytes-c0.Bytes) * 8 / sec, float64(r1-r0) * 8 / sec, float64(a1-a0) * 8 / sec
	}
	within := func(what string, got float64) {
		t.Helper()
		t.Logf("%s: %.1f Mbit/s (limit %.0f)", what, got/1e6, limit/1e6)
		if math.Abs(got-limit) > 0.1*limit {
			t.Errorf("%s: %.1f Mbit/s, want %.0f ± 10%%", what, got/1e6, limit/1e6)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	class, recv, _ := measure(tx, "a", 2500*time.Millisecond)
	within("egress scheduler, a's class", class)
	within("egress scheduler, received by b", recv)

	// a's limit goes, b's comes at s2's ingress
	if err := tx.SetLimit("a", mech.Unlimited); err != nil {
		t.Fatal(err)
	}
	if err := tx.Set(mech.Unlimited, nil); err != nil {
		t.Fatal(err)
	}
	if err := rx.SetLimit("b", limit); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1000 * time.Millisecond)
	class, recv, arr := measure(rx, "b", 2500*time.Millisecond)
	within("ingress scheduler, b's class", class)
	within("ingress scheduler, received by b", recv)
	t.Logf("ingress scheduler, b's arrivals: %.1f Mbit/s", arr/1e6)
	// The arrivals are counted by the uplink's redirection filter, on
	// what the kernel hands its ingress hook: no Ethernet header, and a
	// GSO packet with one set of IP and TCP headers; the class counts
	// each segment with all its headers, as on the wire (~4% more for
	// full-size TCP segments). Within 10%, they are the same traffic.
	if math.Abs(arr-class) > 0.1*class {
		t.Errorf("b's arrivals before the ingress scheduler, %.1f Mbit/s, not the traffic its class passed, %.1f", arr/1e6, class/1e6)
	}

	// detach: the VMs' devices as they were, the uplinks' catch-alls alone
	if err := rx.SetVMs(nil); err != nil {
		t.Fatal(err)
	}
	if err := h2.Detach("b"); err != nil {
		t.Fatal(err)
	}
	if err := h1.Detach("a"); err != nil {
		t.Fatal(err)
	}
	pristine(t, p.s1, p.sa)
	pristine(t, p.a, p.aDev)
	pristine(t, p.s2, p.sb)
	pristine(t, p.b, p.bDev)
	for _, u := range []struct {
		ns  *dataplane.NS
		dev string
	}{{p.s1, p.u1}, {p.s2, p.u2}} {
		if got := uplinkRedirects(t, u.ns, u.dev); len(got) != 1 || got[SchedCatchAll] != "any" {
			t.Errorf("redirections on %s after detach: %v; want the catch-all alone", u.dev, got)
		}
	}
	// b comes back: its filter again, at the freed node
	if _, err := h2.Attach(vb); err != nil {
		t.Fatal(err)
	}
	if got := uplinkRedirects(t, p.s2, p.u2); len(got) != 2 || got[1] != p.pair.Dst.String()+"/32" {
		t.Errorf("redirections on %s after b came back: %v", p.u2, got)
	}
	// close (b still attached): nothing of theirs is left
	if err := h1.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := h2.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		ns  *dataplane.NS
		dev string
	}{{p.s1, p.u1}, {p.s2, p.u2}, {p.s1, p.sa}, {p.s2, p.sb}, {p.a, p.aDev}, {p.b, p.bDev}} {
		pristine(t, d.ns, d.dev)
	}
	for _, ns := range []*dataplane.NS{p.s1, p.s2} {
		if l := ifbs(t, ns); l != "" {
			t.Errorf("netns %s: IFBs after close: %s", ns.Name, l)
		}
	}
}
