package linux

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
)

// twoVMs is a server namespace with two VMs in namespaces of their own,
// each on a veth (VM side PREFIXa / PREFIXb, server side PREFIXsa /
// PREFIXsb), routed through the server; everything is removed when the
// test ends, whatever happened.
type twoVMs struct {
	prefix     string
	srv, a, b  *dataplane.NS
	aDev, bDev string // the VMs' own interfaces
	sa, sb     string // their server sides
	pair       datapath.Pair
}

func newTwoVMs(t *testing.T) *twoVMs {
	t.Helper()
	prefix := dataplane.RandomPrefix("dp")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := dataplane.Cleanup(ctx, prefix); err != nil {
			t.Errorf("cleanup %s: %v", prefix, err)
		}
		if left, err := dataplane.Find(prefix); err != nil || !left.Empty() {
			t.Errorf("run %s left %v (%v)", prefix, left, err)
		}
	})
	mk := func(name string, fwd bool) *dataplane.NS {
		n, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+name, dataplane.NSOptions{Forwarding: fwd})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	v := &twoVMs{prefix: prefix, srv: mk("s", true), a: mk("a", false), b: mk("b", false),
		aDev: prefix + "a", bDev: prefix + "b", sa: prefix + "sa", sb: prefix + "sb",
		pair: datapath.Pair{Src: netip.MustParseAddr("10.201.0.1"), Dst: netip.MustParseAddr("10.201.0.3")}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pfx := netip.MustParsePrefix
	must(v.srv.AddVeth(v.sa, v.a, v.aDev))
	must(v.srv.AddVeth(v.sb, v.b, v.bDev))
	must(v.srv.AddAddr(v.sa, pfx("10.201.0.0/31")))
	must(v.a.AddAddr(v.aDev, pfx("10.201.0.1/31")))
	must(v.srv.AddAddr(v.sb, pfx("10.201.0.2/31")))
	must(v.b.AddAddr(v.bDev, pfx("10.201.0.3/31")))
	must(v.a.AddRoute(dataplane.Route{Dst: pfx("0.0.0.0/0"), Via: netip.MustParseAddr("10.201.0.0"), Dev: v.aDev}))
	must(v.b.AddRoute(dataplane.Route{Dst: pfx("0.0.0.0/0"), Via: netip.MustParseAddr("10.201.0.2"), Dev: v.bDev}))
	return v
}

// host returns a data path for the server that builds its VMs' limiters
// itself (no Config.VMs), closed when the test ends.
func (v *twoVMs) host(t *testing.T) *Host {
	t.Helper()
	h, err := NewHost(Config{NS: v.srv})
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

// iperf3 runs a TCP transfer from VM a to VM b for d in the background.
func (v *twoVMs) iperf3(t *testing.T, d time.Duration) {
	t.Helper()
	iperf3(t, v.prefix, v.a, v.b, v.pair, d)
}

// iperf3 runs a TCP transfer of pair from namespace a to namespace b for
// d in the background (both ends stopped when the test ends).
func iperf3(t *testing.T, prefix string, a, b *dataplane.NS, pair datapath.Pair, d time.Duration) {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Fatal("iperf3 not found: install it (apt-get install -y iperf3)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := dataplane.Command(ctx, prefix, "iperf3", "-s", "-1", "-B", pair.Dst.String(), "-p", "5299")
	if err := b.StartIn(srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	deadline := time.Now().Add(3 * time.Second)
	for {
		cli := dataplane.Command(ctx, prefix, "iperf3", "-c", pair.Dst.String(), "-B", pair.Src.String(), "-p", "5299",
			"-t", fmt.Sprint(int(math.Ceil(d.Seconds()))), "--connect-timeout", "500")
		if err := a.StartIn(cli); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cli.Wait() }()
		select {
		case err := <-done: // the server was not listening yet
			if time.Now().After(deadline) {
				t.Fatalf("iperf3 client: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		case <-time.After(300 * time.Millisecond):
		}
		t.Cleanup(func() { _ = cli.Process.Kill(); <-done })
		return
	}
}

// rates measures the pair over d at the sender's limiter and at the
// receiver's counters, bits/s.
func rates(t *testing.T, tx datapath.PairLimiter, rx datapath.PairCounters, p datapath.Pair, d time.Duration) (float64, float64) {
	t.Helper()
	read := func() (uint64, uint64) {
		cs, err := tx.Counters()
		if err != nil {
			t.Fatal(err)
		}
		rs, err := rx.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rs[p]; !ok {
			t.Fatalf("receive counters %v: no pair %s", rs, p)
		}
		return cs[p].Bytes, rs[p].Bytes
	}
	t0, r0 := read()
	start := time.Now()
	time.Sleep(d)
	t1, r1 := read()
	s := time.Since(start).Seconds()
	return float64(t1-t0) * 8 / s, float64(r1-r0) * 8 / s
}

func drops(t *testing.T, l datapath.PairLimiter, p datapath.Pair) uint32 {
	t.Helper()
	cs, err := l.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return cs[p].Drops
}

// pristine fails the test unless the device is as the kernel makes it:
// no qdisc but its default one, no filter, as tc shows them.
func pristine(t *testing.T, ns *dataplane.NS, dev string) {
	t.Helper()
	out, err := exec.Command("tc", "-n", ns.Name, "qdisc", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("tc qdisc show dev %s: %v: %s", dev, err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) < 3 || f[2] != "0:" {
			t.Errorf("netns %s: %s still has %q", ns.Name, dev, l)
		}
	}
	for _, hook := range []string{"ingress", "egress"} {
		out, err := exec.Command("tc", "-n", ns.Name, "filter", "show", "dev", dev, hook).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("netns %s: %s %s filters: %q (%v)", ns.Name, dev, hook, out, err)
		}
	}
}

// noIFB fails the test if the namespace has an IFB.
func noIFB(t *testing.T, ns *dataplane.NS) {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns.Name, "link", "show", "type", "ifb").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("netns %s: IFBs left: %q (%v)", ns.Name, out, err)
	}
}

func tsq(t *testing.T, ns *dataplane.NS) string {
	t.Helper()
	var b []byte
	if err := ns.Do(func() (err error) { b, err = os.ReadFile(tsqSysctl); return err }); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// provisionLimit is the pair limit the provisioning tests enforce.
const provisionLimit = 100e6

// TestProvisionNetns: VMs named by their interface inside their own
// namespaces get a pair limiter on that interface and receive counters
// on its veth peer in the server; a pair limited to 100 Mbit/s carries
// TCP at that rate as both measure it; detached, the devices are as they
// were (default qdiscs, no filters, the TCP small-queue budget back).
func TestProvisionNetns(t *testing.T) {
	needRoot(t)
	v := newTwoVMs(t)
	h := v.host(t)
	tsqA := tsq(t, v.a)
	pa, err := h.Attach(datapath.VM{Name: "a", Addr: v.pair.Src, Interface: v.aDev, Netns: v.a.Name})
	if err != nil {
		t.Fatal(err)
	}
	// b's namespace by the path of its file
	pb, err := h.Attach(datapath.VM{Name: "b", Addr: v.pair.Dst, Interface: v.bDev, Netns: filepath.Join(dataplane.NetnsDir, v.b.Name)})
	if err != nil {
		t.Fatal(err)
	}
	if pa.TX == nil || pa.RX == nil || pa.Device != v.sa || pb.Device != v.sb {
		t.Fatalf("paths %+v, %+v: want limiters and counters, devices %s and %s", pa, pb, v.sa, v.sb)
	}
	if got := tsq(t, v.a); got != fmt.Sprint(VMTSQBytes) {
		t.Errorf("TCP small-queue budget in the VM's namespace: %s, want %d", got, VMTSQBytes)
	}
	if q, err := v.a.RootQdisc(v.aDev); err != nil || !ours(q) {
		t.Errorf("root qdisc of the VM's interface: %v, %v", q, err)
	}
	// attached again on the same interface: the same path
	if again, err := h.Attach(datapath.VM{Name: "a", Addr: v.pair.Src, Interface: v.aDev, Netns: v.a.Name}); err != nil || again.TX != pa.TX {
		t.Errorf("a attached twice: %+v, %v", again, err)
	}
	if err := pa.TX.SetPairRate(v.pair, provisionLimit); err != nil {
		t.Fatal(err)
	}
	if err := pb.RX.(datapath.PairCounterSet).CountPair(v.pair); err != nil {
		t.Fatal(err)
	}
	v.iperf3(t, 5*time.Second)
	time.Sleep(time.Second)
	txr, rxr := rates(t, pa.TX, pb.RX, v.pair, 3*time.Second)
	t.Logf("pair limited to %.0f Mbit/s: %.1f Mbit/s at the limiter, %.1f Mbit/s into b; %d drops at the limiter", provisionLimit/1e6, txr/1e6, rxr/1e6, drops(t, pa.TX, v.pair))
	if math.Abs(txr-provisionLimit) > 0.1*provisionLimit || math.Abs(rxr-provisionLimit) > 0.1*provisionLimit {
		t.Errorf("rates %.1f and %.1f Mbit/s, want %.0f ±10%%", txr/1e6, rxr/1e6, provisionLimit/1e6)
	}
	// under traffic, the readings into kept storage are the maps'
	readsAsCounters(t, "limiter", pa.TX, v.pair)
	readsAsCounters(t, "receive counters", pb.RX, v.pair)
	// a second VM in a's namespace, on a veth of its own
	if err := v.srv.AddVeth(v.prefix+"sc", v.a, v.prefix+"c"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Attach(datapath.VM{Name: "c", Addr: netip.MustParseAddr("10.201.0.5"), Interface: v.prefix + "c", Netns: v.a.Name}); err != nil {
		t.Fatal(err)
	}
	for _, vm := range []string{"a", "b"} {
		if err := h.Detach(vm); err != nil {
			t.Fatal(err)
		}
	}
	if got := tsq(t, v.a); got != fmt.Sprint(VMTSQBytes) {
		t.Errorf("TCP small-queue budget while c is attached in the namespace: %s, want %d", got, VMTSQBytes)
	}
	if err := h.Detach("c"); err != nil {
		t.Fatal(err)
	}
	pristine(t, v.a, v.aDev)
	pristine(t, v.a, v.prefix+"c")
	pristine(t, v.b, v.bDev)
	pristine(t, v.srv, v.sa)
	pristine(t, v.srv, v.sb)
	pristine(t, v.srv, v.prefix+"sc")
	if got := tsq(t, v.a); got != tsqA {
		t.Errorf("TCP small-queue budget after detach: %s, want %s as before", got, tsqA)
	}
}

// TestProvisionServer: VMs named by their device in the server's
// namespace get receive counters on its egress and a pair limiter on an
// IFB fed by its ingress; a pair limited to 100 Mbit/s carries TCP at
// that rate; detached, no qdisc, filter or IFB is left. A data path that
// died without detaching leaves its limiters; the next one replaces them
// and leaves nothing when it detaches.
func TestProvisionServer(t *testing.T) {
	needRoot(t)
	v := newTwoVMs(t)
	h := v.host(t)
	pa, err := h.Attach(datapath.VM{Name: "a", Addr: v.pair.Src, Interface: v.sa})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := h.Attach(datapath.VM{Name: "b", Addr: v.pair.Dst, Interface: v.sb})
	if err != nil {
		t.Fatal(err)
	}
	if pa.TX == nil || pb.RX == nil || pa.Device != v.sa {
		t.Fatalf("paths %+v, %+v", pa, pb)
	}
	if found, ifb, err := v.srv.IsIFB(IFBName(v.sa)); err != nil || !found || !ifb {
		t.Fatalf("a's IFB %s: found %v, IFB %v, %v", IFBName(v.sa), found, ifb, err)
	}
	if err := pa.TX.SetPairRate(v.pair, provisionLimit); err != nil {
		t.Fatal(err)
	}
	if err := pb.RX.(datapath.PairCounterSet).CountPair(v.pair); err != nil {
		t.Fatal(err)
	}
	v.iperf3(t, 5*time.Second)
	time.Sleep(time.Second)
	txr, rxr := rates(t, pa.TX, pb.RX, v.pair, 3*time.Second)
	t.Logf("pair limited to %.0f Mbit/s: %.1f Mbit/s at the limiter, %.1f Mbit/s into b; %d drops at the limiter", provisionLimit/1e6, txr/1e6, rxr/1e6, drops(t, pa.TX, v.pair))
	if math.Abs(txr-provisionLimit) > 0.1*provisionLimit || math.Abs(rxr-provisionLimit) > 0.1*provisionLimit {
		t.Errorf("rates %.1f and %.1f Mbit/s, want %.0f ±10%%", txr/1e6, rxr/1e6, provisionLimit/1e6)
	}
	for _, vm := range []string{"a", "b"} {
		if err := h.Detach(vm); err != nil {
			t.Fatal(err)
		}
	}
	pristine(t, v.srv, v.sa)
	pristine(t, v.srv, v.sb)
	noIFB(t, v.srv)

	// a data path that died (never detached, never closed)
	dead, err := NewHost(Config{NS: v.srv})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.Attach(datapath.VM{Name: "a", Addr: v.pair.Src, Interface: v.sa}); err != nil {
		t.Fatal(err)
	}
	next := v.host(t)
	p, err := next.Attach(datapath.VM{Name: "a", Addr: v.pair.Src, Interface: v.sa})
	if err != nil {
		t.Fatalf("attach over what a dead data path left: %v", err)
	}
	if err := p.TX.SetPairRate(v.pair, provisionLimit); err != nil {
		t.Fatal(err)
	}
	if err := next.Remove(); err != nil {
		t.Fatal(err)
	}
	pristine(t, v.srv, v.sa)
	noIFB(t, v.srv)
}

// TestProvisionRefused: a VM whose interface cannot carry its limiters
// is refused with an error naming the VM, the device and the namespace,
// and leaves nothing behind; a device made later is attached.
func TestProvisionRefused(t *testing.T) {
	needRoot(t)
	v := newTwoVMs(t)
	h := v.host(t)
	// a veth between the two VMs' namespaces: its peer is not the server's
	if err := v.a.AddVeth(v.prefix+"x", v.b, v.prefix+"y"); err != nil {
		t.Fatal(err)
	}
	// a root qdisc Bulkhead did not make
	if err := v.srv.ReplaceHTB(v.sb, dataplane.HTB{Handle: dataplane.TCHandle(7, 0), Parent: 0xFFFFFFFF}); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("10.201.0.9")
	for _, c := range []struct {
		name      string
		vm        datapath.VM
		want      []string
		untouched []string // devices of the server left as they were
	}{
		{"no such device", datapath.VM{Name: "vm1", Interface: v.prefix + "late"}, []string{"vm1", v.prefix + "late", v.srv.Name, "not made yet"}, nil},
		{"no such namespace", datapath.VM{Name: "vm2", Interface: v.aDev, Netns: v.prefix + "-nope"}, []string{"vm2", v.aDev, v.prefix + "-nope"}, nil},
		{"not a veth", datapath.VM{Name: "vm3", Interface: "lo", Netns: v.a.Name}, []string{"vm3", "lo", v.a.Name, "not a veth"}, nil},
		{"peer elsewhere", datapath.VM{Name: "vm4", Interface: v.prefix + "x", Netns: v.a.Name}, []string{"vm4", v.prefix + "x", v.a.Name, "not in netns " + v.srv.Name}, nil},
		{"the server's namespace", datapath.VM{Name: "vm5", Interface: v.sa, Netns: v.srv.Name}, []string{"vm5", v.sa, "server's own namespace"}, []string{v.sa}},
		{"foreign qdisc", datapath.VM{Name: "vm6", Interface: v.sb}, []string{"vm6", v.sb, v.srv.Name, "not made by Bulkhead"}, nil},
		{"foreign qdisc on the peer", datapath.VM{Name: "vm7", Interface: v.bDev, Netns: v.b.Name}, []string{"vm7", v.sb, v.srv.Name, "not made by Bulkhead"}, []string{}},
		{"no interface", datapath.VM{Name: "vm8"}, []string{"vm8", "no interface"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.vm.Addr = addr
			_, err := h.Attach(c.vm)
			if err == nil {
				t.Fatal("attached")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, d := range c.untouched {
				pristine(t, v.srv, d)
			}
		})
	}
	pristine(t, v.a, v.aDev)
	if q, err := v.b.RootQdisc(v.bDev); err != nil || !q.Default() {
		t.Errorf("vm7's interface after it was refused: %v, %v", q, err)
	}
	if got := tsq(t, v.b); got == fmt.Sprint(VMTSQBytes) {
		t.Errorf("a refused VM's namespace keeps the TCP small-queue budget %s", got)
	}
	noIFB(t, v.srv)
	// the device is made: the agent's next attach succeeds
	if err := v.srv.AddVeth(v.prefix+"late", v.b, v.prefix+"l"); err != nil {
		t.Fatal(err)
	}
	if p, err := h.Attach(datapath.VM{Name: "vm1", Addr: addr, Interface: v.prefix + "late"}); err != nil || p.TX == nil {
		t.Fatalf("attach once the device exists: %+v, %v", p, err)
	}
	if _, err := h.Attach(datapath.VM{Name: "vm9", Addr: addr, Interface: v.prefix + "late"}); err == nil || !strings.Contains(err.Error(), "vm1") {
		t.Errorf("a second VM on vm1's device: %v", err)
	}
	if err := h.Detach("vm1"); err != nil {
		t.Fatal(err)
	}
	pristine(t, v.srv, v.prefix+"late")
	noIFB(t, v.srv)
}

// TestCloseLeavesLimitsAdopted: a Host that closes (its agent stopped)
// leaves its VMs' limiters enforcing at the rates last set, in both
// layouts; the next Host adopts them — the pair keeps its class and
// rate, nothing runs unlimited in between — and a transfer started after
// the first Host closed runs at the limit. Remove then leaves nothing.
func TestCloseLeavesLimitsAdopted(t *testing.T) {
	needRoot(t)
	for _, layout := range []string{"netns", "server"} {
		t.Run(layout, func(t *testing.T) {
			v := newTwoVMs(t)
			vms := []datapath.VM{{Name: "a", Addr: v.pair.Src, Interface: v.sa}, {Name: "b", Addr: v.pair.Dst, Interface: v.sb}}
			if layout == "netns" {
				vms = []datapath.VM{{Name: "a", Addr: v.pair.Src, Interface: v.aDev, Netns: v.a.Name}, {Name: "b", Addr: v.pair.Dst, Interface: v.bDev, Netns: v.b.Name}}
			}
			first, err := NewHost(Config{NS: v.srv})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = first.Remove() })
			pa, err := first.Attach(vms[0])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := first.Attach(vms[1]); err != nil {
				t.Fatal(err)
			}
			if err := pa.TX.SetPairRate(v.pair, provisionLimit); err != nil {
				t.Fatal(err)
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			// nobody in charge: the pair is limited all the same
			v.iperf3(t, 6*time.Second)
			time.Sleep(time.Second)
			next := v.host(t)
			na, err := next.Attach(vms[0])
			if err != nil {
				t.Fatalf("attach over what a closed data path left: %v", err)
			}
			nb, err := next.Attach(vms[1])
			if err != nil {
				t.Fatal(err)
			}
			lim, ok := na.TX.(*dataplane.Limiter)
			if !ok {
				t.Fatalf("a's pair limiter is a %T", na.TX)
			}
			if r := lim.PairRate(v.pair); r != provisionLimit {
				t.Errorf("adopted pair rate %v, want %v", r, provisionLimit)
			}
			if err := nb.RX.(datapath.PairCounterSet).CountPair(v.pair); err != nil {
				t.Fatal(err)
			}
			txr, _ := rates(t, na.TX, nb.RX, v.pair, 2*time.Second)
			t.Logf("%s: after the first data path closed and the next adopted it: %.1f Mbit/s at the limiter (limit %.0f)", layout, txr/1e6, provisionLimit/1e6)
			if math.Abs(txr-provisionLimit) > 0.1*provisionLimit {
				t.Errorf("rate %.1f Mbit/s, want %.0f ±10%%", txr/1e6, provisionLimit/1e6)
			}
			if err := next.Remove(); err != nil {
				t.Fatal(err)
			}
			pristine(t, v.srv, v.sa)
			pristine(t, v.srv, v.sb)
			pristine(t, v.a, v.aDev)
			noIFB(t, v.srv)
		})
	}
}

// readsAsCounters checks, while pair p's traffic runs, that src's
// ReadPairs (datapath.PairReader) reads the pairs Counters reads, in
// order, each counter between two readings of Counters, the rates the
// same.
func readsAsCounters(t *testing.T, what string, src datapath.PairCounters, p datapath.Pair) {
	t.Helper()
	r, ok := src.(datapath.PairReader)
	if !ok {
		t.Fatalf("%s: not a datapath.PairReader", what)
	}
	for range 3 {
		before, err := src.Counters()
		if err != nil {
			t.Fatal(err)
		}
		rs, err := r.ReadPairs(nil)
		if err != nil {
			t.Fatal(err)
		}
		after, err := src.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(rs), len(before); got != want || !slices.IsSortedFunc(rs, func(a, b datapath.PairReading) int { return datapath.ComparePairs(a.Pair, b.Pair) }) {
			t.Fatalf("%s: %d pairs read (sorted: %v), Counters %d", what, got, slices.IsSortedFunc(rs, func(a, b datapath.PairReading) int { return datapath.ComparePairs(a.Pair, b.Pair) }), want)
		}
		for _, c := range rs {
			lo, hi := before[c.Pair], after[c.Pair]
			if c.Bytes < lo.Bytes || c.Bytes > hi.Bytes || c.Packets < lo.Packets || c.Packets > hi.Packets ||
				c.Overlimits < lo.Overlimits || c.Overlimits > hi.Overlimits || c.Drops < lo.Drops || c.Drops > hi.Drops ||
				c.Rate != lo.Rate || c.Ceil != lo.Ceil {
				t.Errorf("%s: %s read %+v, Counters %+v then %+v", what, c.Pair, c.Counters, lo, hi)
			}
		}
		if c := after[p]; c.Bytes == 0 {
			t.Errorf("%s: no traffic counted for %s: %+v", what, p, c)
		}
	}
}
