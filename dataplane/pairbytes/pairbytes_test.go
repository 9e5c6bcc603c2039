package pairbytes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/bulkhead-dc/bulkhead/dataplane"
)

// newPrefix returns a fresh run prefix and registers a cleanup that removes
// everything of it and fails the test if anything is left.
func newPrefix(tb testing.TB) string {
	tb.Helper()
	prefix := dataplane.RandomPrefix("pb")
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := dataplane.Cleanup(ctx, prefix); err != nil {
			tb.Errorf("cleanup %s: %v", prefix, err)
		}
		if left, err := dataplane.Find(prefix); err != nil {
			tb.Errorf("find leftovers of %s: %v", prefix, err)
		} else if !left.Empty() {
			tb.Errorf("run %s left %s", prefix, left)
		}
	})
	return prefix
}

// link is a veth pair between a server's namespace (srv, device h, two
// addresses: the two sources) and a VM's namespace (vm, device v: the VM's
// own device, where the counters attach).
type link struct {
	prefix  string
	srv, vm *dataplane.NS
	h, v    string
	src1    netip.Addr
	src2    netip.Addr
	dst     netip.Addr
	p1, p2  Pair
	limiter *dataplane.Limiter // the VM's transmit limiter on v (newLink with limiter)
	ctx     context.Context
}

func newLink(tb testing.TB, limiter bool) *link {
	tb.Helper()
	prefix := newPrefix(tb)
	mk := func(name string) *dataplane.NS {
		n, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+name, dataplane.NSOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(n.Close)
		return n
	}
	ip := netip.MustParseAddr
	l := &link{prefix: prefix, srv: mk("s"), vm: mk("vm"), h: prefix + "h", v: prefix + "v",
		src1: ip("10.201.0.1"), src2: ip("10.201.0.2"), dst: ip("10.201.0.10")}
	l.p1, l.p2 = Pair{Src: l.src1, Dst: l.dst}, Pair{Src: l.src2, Dst: l.dst}
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(l.srv.AddVeth(l.h, l.vm, l.v))
	must(l.srv.AddAddr(l.h, netip.PrefixFrom(l.src1, 24)))
	must(l.srv.AddAddr(l.h, netip.PrefixFrom(l.src2, 24)))
	must(l.vm.AddAddr(l.v, netip.PrefixFrom(l.dst, 24)))
	if limiter {
		// The agent's transmit limiter: an HTB root qdisc on the VM's
		// device, with a class for each reverse pair.
		lim, err := dataplane.NewLimiter(l.vm, dataplane.LimiterConfig{Dev: l.v, Major: 0xb})
		must(err)
		must(lim.SetPairRate(Pair{Src: l.dst, Dst: l.src1}, 100e6))
		must(lim.SetPairRate(Pair{Src: l.dst, Dst: l.src2}, 100e6))
		l.limiter = lim
	}
	var cancel context.CancelFunc
	l.ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return l
}

func mustAttach(tb testing.TB, ns *dataplane.NS, dev string, cfg Config) *Counter {
	tb.Helper()
	c, err := AttachConfig(ns, dev, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return c
}

// rx returns the device's receive counters (bytes, packets).
func rx(tb testing.TB, ns *dataplane.NS, dev string) (uint64, uint64) {
	tb.Helper()
	l, err := ns.Netlink().LinkByName(dev)
	if err != nil {
		tb.Fatal(err)
	}
	s := l.Attrs().Statistics
	if s == nil {
		tb.Fatalf("%s: no statistics", dev)
	}
	return s.RxBytes, s.RxPackets
}

// flow is one UDP sender: size-byte IP packets at rate bits/s.
type flow struct {
	src  netip.Addr
	port int
	size int
	rate float64
}

// udp sends the flows from srv to the VM concurrently for d, each paced
// (at most 8 datagrams at once), and returns how many datagrams each sent.
func (l *link) udp(t *testing.T, d time.Duration, flows ...flow) []int {
	t.Helper()
	var wg sync.WaitGroup
	sent := make([]int, len(flows))
	errs := make([]error, len(flows))
	for i, f := range flows {
		var rc *net.UDPConn
		if err := l.vm.Do(func() error {
			var err error
			rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: l.dst.AsSlice(), Port: f.port})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_ = rc.SetReadBuffer(4 << 20)
		go func() {
			buf := make([]byte, 65536)
			for {
				if _, err := rc.Read(buf); err != nil {
					return
				}
			}
		}()
		defer rc.Close()
		var sc *net.UDPConn
		if err := l.srv.Do(func() error {
			var err error
			sc, err = net.DialUDP("udp4", &net.UDPAddr{IP: f.src.AsSlice()}, &net.UDPAddr{IP: l.dst.AsSlice(), Port: f.port})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := make([]byte, f.size-28)
			pps := f.rate / 8 / float64(f.size)
			start := time.Now()
			for time.Since(start) < d {
				due := min(int(time.Since(start).Seconds()*pps)+1, sent[i]+8)
				for ; sent[i] < due; sent[i]++ {
					if _, err := sc.Write(payload); err != nil {
						errs[i] = err
						return
					}
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("send: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // let the last packets arrive
	return sent
}

func within(got, want uint64, tol float64) bool {
	return math.Abs(float64(got)-float64(want)) <= tol*float64(want)
}

// TestUDPTwoSources: two UDP flows from two sources for 2 s into a VM's
// device that carries the agent's transmit limiter (an HTB root) and
// another counter on a different priority of the same ingress hook. Each
// pair's counts are what its source sent (frame = IP packet + 14), the sum
// over pairs and other frames is what the device's rx counters say, and
// both counters agree.
func TestUDPTwoSources(t *testing.T) {
	needRoot(t)
	l := newLink(t, true)
	other := mustAttach(t, l.vm, l.v, Config{Prio: 7}) // the other clsact user, attached first
	c := mustAttach(t, l.vm, l.v, Config{})
	b0, n0 := rx(t, l.vm, l.v)
	flows := []flow{
		{src: l.src1, port: 9001, size: 1200, rate: 150e6},
		{src: l.src2, port: 9002, size: 400, rate: 50e6},
	}
	sent := l.udp(t, 2*time.Second, flows...)
	b1, n1 := rx(t, l.vm, l.v)
	pairs, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %v datagrams; link rx %d bytes, %d packets; pairs %v; stats %+v", sent, b1-b0, n1-n0, pairs, st)
	for i, p := range []Pair{l.p1, l.p2} {
		got, f := pairs[p], flows[i]
		want := uint64(sent[i]) * uint64(f.size+14)
		if !within(got.Bytes, want, 0.01) || !within(got.Packets, uint64(sent[i]), 0.01) {
			t.Errorf("pair %s: counted %d bytes in %d packets; sent %d datagrams of %d-byte frames = %d bytes: want within 1%%",
				p, got.Bytes, got.Packets, sent[i], f.size+14, want)
		}
		if got.Bytes != got.Packets*uint64(f.size+14) || got.Segments != got.Packets || got.SegBytes != got.Bytes {
			t.Errorf("pair %s: %+v: want %d bytes per packet, one segment each", p, got, f.size+14)
		}
		if sent[i] < 10000 {
			t.Errorf("source %s sent only %d datagrams in 2 s", f.src, sent[i])
		}
	}
	if len(pairs) != 2 {
		t.Errorf("pairs %v: want %s and %s only", pairs, l.p1, l.p2)
	}
	all := Total(pairs).Add(st.Other).Add(st.Overflow)
	if !within(all.Bytes, b1-b0, 0.01) || !within(all.Packets, n1-n0, 0.01) {
		t.Errorf("counted %d bytes in %d packets (pairs and other), the device received %d bytes in %d packets: want within 1%%",
			all.Bytes, all.Packets, b1-b0, n1-n0)
	}
	if all.Bytes != b1-b0 || all.Packets != n1-n0 {
		t.Logf("counted %d bytes in %d packets, the device received %d bytes in %d packets (not exactly equal)", all.Bytes, all.Packets, b1-b0, n1-n0)
	}
	if st.Overflow != (Counts{}) {
		t.Errorf("overflow %+v with 2 pairs", st.Overflow)
	}
	op, err := other.Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Pair{l.p1, l.p2} {
		if op[p] != pairs[p] {
			t.Errorf("pair %s: the counter at prio %d saw %+v, the one at prio %d %+v", p, other.Prio(), op[p], c.Prio(), pairs[p])
		}
	}
	if q, err := l.vm.RootQdisc(l.v); err != nil || q.Kind != "htb" {
		t.Errorf("the VM device's root qdisc is %v (%v), want the limiter's HTB", q, err)
	}
}

// iperf3 runs one TCP flow from src to the VM for d and returns what the
// receiver got (bits/s).
func (l *link) iperf3(tb testing.TB, src netip.Addr, d time.Duration) float64 {
	tb.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		tb.Fatal("iperf3 not found: install it (apt-get install -y iperf3)")
	}
	srv := dataplane.Command(l.ctx, l.prefix, "iperf3", "-s", "-1", "-B", l.dst.String(), "-p", "5299")
	if err := l.vm.StartIn(srv); err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	deadline := time.Now().Add(3 * time.Second)
	for {
		cli := dataplane.Command(l.ctx, l.prefix, "iperf3", "-J", "-c", l.dst.String(), "-B", src.String(),
			"-p", "5299", "-t", fmt.Sprint(d.Seconds()), "--connect-timeout", "500")
		var out, errOut strings.Builder
		cli.Stdout, cli.Stderr = &out, &errOut
		if err := l.srv.StartIn(cli); err != nil {
			tb.Fatal(err)
		}
		err := cli.Wait()
		// -J: an error is reported in the output (the exit status may be 0)
		var r struct {
			Error string `json:"error"`
			End   struct {
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
			} `json:"end"`
		}
		if jerr := json.Unmarshal([]byte(out.String()), &r); jerr != nil {
			err = errors.Join(err, fmt.Errorf("output: %w", jerr))
		} else if r.Error != "" {
			err = errors.Join(err, errors.New(r.Error))
		}
		if err == nil {
			if r.End.SumReceived.BitsPerSecond <= 0 {
				tb.Fatalf("iperf3 client: received %.0f bits/s: %s", r.End.SumReceived.BitsPerSecond, out.String())
			}
			return r.End.SumReceived.BitsPerSecond
		}
		// a client that fails at once did not find the server listening yet
		if time.Now().After(deadline) {
			tb.Fatalf("iperf3 client: %v: %s%s", err, out.String(), errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTCP: one TCP flow for 2 s (GSO packets over the veth): the pair's
// bytes are what the device received, and SegBytes, which adds the
// headers of every segment but the first of each GSO packet, is what an
// HTB class for the pair on the server-side device's egress (the
// testbed's measurement before the agents owned those devices) counted.
func TestTCP(t *testing.T) {
	needRoot(t)
	l := newLink(t, true)
	htb, err := dataplane.NewLimiter(l.srv, dataplane.LimiterConfig{Dev: l.h})
	if err != nil {
		t.Fatal(err)
	}
	if err := htb.SetPairRate(l.p1, dataplane.MaxRate); err != nil {
		t.Fatal(err)
	}
	c := mustAttach(t, l.vm, l.v, Config{})
	cls0, err := htb.Counters()
	if err != nil {
		t.Fatal(err)
	}
	b0, n0 := rx(t, l.vm, l.v)
	bps := l.iperf3(t, l.src1, 2*time.Second)
	time.Sleep(100 * time.Millisecond)
	b1, n1 := rx(t, l.vm, l.v)
	cls1, err := htb.Counters()
	if err != nil {
		t.Fatal(err)
	}
	class := cls1[l.p1].Bytes - cls0[l.p1].Bytes
	pairs, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	got := pairs[l.p1]
	t.Logf("iperf3 %.2f Gbit/s; link rx %d bytes, %d packets; HTB class %d bytes; pair %+v; stats %+v", bps/1e9, b1-b0, n1-n0, class, got, st)
	if !within(got.SegBytes, class, 0.01) {
		t.Errorf("pair %s: SegBytes %d, the HTB class on the sending side counted %d bytes: want within 1%%", l.p1, got.SegBytes, class)
	}
	all := Total(pairs).Add(st.Other)
	if !within(all.Bytes, b1-b0, 0.01) || !within(all.Packets, n1-n0, 0.01) {
		t.Errorf("counted %d bytes in %d packets, the device received %d bytes in %d packets: want within 1%%",
			all.Bytes, all.Packets, b1-b0, n1-n0)
	}
	if got.Bytes < uint64(bps/8*1.9) {
		t.Errorf("pair %s: %d bytes counted, iperf3 received %.0f bytes/s for 2 s", l.p1, got.Bytes, bps/8)
	}
	if got.Segments <= got.Packets {
		t.Errorf("pair %s: %d segments in %d packets: expected GSO packets over the veth", l.p1, got.Segments, got.Packets)
	}
	// Every segment carries Ethernet + IP + TCP (with timestamps) headers:
	// 14 + 20 + 32 bytes.
	if extra := got.SegBytes - got.Bytes; extra != (got.Segments-got.Packets)*66 {
		t.Errorf("pair %s: SegBytes − Bytes = %d for %d extra segments, want 66 bytes each", l.p1, extra, got.Segments-got.Packets)
	}
	if len(pairs) != 1 {
		t.Errorf("pairs %v: want %s only", pairs, l.p1)
	}
}

// bpfFilters lists the BPF filters on dev's ingress hook (names).
func bpfFilters(t *testing.T, ns *dataplane.NS, dev string) []string {
	t.Helper()
	ok, err := ns.HasClsact(dev)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil
	}
	idx, err := ns.LinkIndex(dev)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := ns.Netlink().FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		if b, ok := f.(*netlink.BpfFilter); ok {
			out = append(out, b.Name)
		}
	}
	return out
}

// gone waits until the program and maps no longer exist in the kernel.
func gone(t *testing.T, prog ebpf.ProgramID, maps []ebpf.MapID) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		if p, err := ebpf.NewProgramFromID(prog); err == nil {
			p.Close()
			left = append(left, fmt.Sprintf("program %d", prog))
		}
		for _, id := range maps {
			if m, err := ebpf.NewMapFromID(id); err == nil {
				m.Close()
				left = append(left, fmt.Sprintf("map %d", id))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("still in the kernel after Close: %s", strings.Join(left, ", "))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tcShow runs tc in the namespace (what an operator would look at).
func tcShow(t *testing.T, ns *dataplane.NS, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns.Name, "tc"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tc %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAttachClose: Close removes the filter, the clsact qdisc the counter
// added, the program and the maps; a clsact that another user needs
// stays, with that user's filter; misuse is refused.
func TestAttachClose(t *testing.T) {
	needRoot(t)
	l := newLink(t, true)
	qdiscs := tcShow(t, l.vm, "qdisc", "show", "dev", l.v)

	c, err := Attach(l.vm, l.v)
	if err != nil {
		t.Fatal(err)
	}
	if f := bpfFilters(t, l.vm, l.v); len(f) != 1 || !strings.HasPrefix(f[0], filterName) {
		t.Errorf("ingress filters %v, want the counter's", f)
	}
	if _, err := AttachConfig(l.vm, l.v, Config{Prio: c.Prio()}); err == nil {
		t.Error("a second counter at the same priority: attached (replacing the first?), want an error")
	} else {
		t.Logf("a second counter at the same priority: %v", err)
		if f := bpfFilters(t, l.vm, l.v); len(f) != 1 {
			t.Errorf("after the refused attach: filters %v", f)
		}
	}
	prog, err := c.ProgramID()
	if err != nil {
		t.Fatal(err)
	}
	maps, err := c.MapIDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Read(); err == nil {
		t.Error("Read after Close: no error")
	}
	gone(t, prog, maps)
	if ok, err := l.vm.HasClsact(l.v); err != nil || ok {
		t.Errorf("clsact after Close: %v (%v), want none", ok, err)
	}
	if got := tcShow(t, l.vm, "qdisc", "show", "dev", l.v); got != qdiscs {
		t.Errorf("qdiscs after Close:\n%s\nbefore Attach:\n%s", got, qdiscs)
	}
	if got := tcShow(t, l.vm, "filter", "show", "dev", l.v, "ingress"); got != "" {
		t.Errorf("ingress filters after Close: %q", got)
	}
	// What an operator would look at, when bpftool is installed (the ids
	// were checked above).
	if _, err := exec.LookPath("bpftool"); err == nil {
		out, err := exec.Command("bpftool", "prog", "show", "id", fmt.Sprint(prog)).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Error") {
			t.Errorf("bpftool prog show id %d after Close: %v: %s", prog, err, out)
		}
		for _, id := range maps {
			out, err := exec.Command("bpftool", "map", "show", "id", fmt.Sprint(id)).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "Error") {
				t.Errorf("bpftool map show id %d after Close: %v: %s", id, err, out)
			}
		}
	}

	// Another user's filter keeps the clsact the counter added.
	c, err = Attach(l.vm, l.v)
	if err != nil {
		t.Fatal(err)
	}
	other := mustAttach(t, l.vm, l.v, Config{Prio: 7})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if f := bpfFilters(t, l.vm, l.v); len(f) != 1 || other.Prio() != 7 {
		t.Errorf("after closing one of two counters: filters %v, want the other's", f)
	}
	if _, err := other.Read(); err != nil {
		t.Errorf("the other counter: %v", err)
	}

	// A device that went away is not an error.
	c = mustAttach(t, l.srv, l.h, Config{})
	if err := l.srv.DeleteLink(l.h); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after the device went: %v", err)
	}

	if _, err := Attach(nil, "x"); err == nil {
		t.Error("nil namespace: no error")
	}
	if _, err := Attach(l.vm, "nosuchdev"); err == nil {
		t.Error("no such device: no error")
	}
}

// BenchmarkTCPThroughput: one TCP flow over a bare veth for 3 s without
// and with the counter on the receiving device, alternately; reports
// both rates (Gbit/s) and their ratio. gso64k: the kernel's offload
// packets (up to 64 KB); gso1500: the sender's device takes offload
// packets of at most 1500 bytes, so every packet is one segment (the
// most packets per byte, the program's worst case).
func BenchmarkTCPThroughput(b *testing.B) {
	for _, bc := range []struct {
		name string
		gso  int
	}{{"gso64k", 0}, {"gso1500", 1500}} {
		b.Run(bc.name, func(b *testing.B) {
			needRoot(b)
			l := newLink(b, false)
			if bc.gso > 0 {
				if err := l.srv.SetGSOMaxSize(l.h, bc.gso); err != nil {
					b.Fatal(err)
				}
			}
			var without, with []float64
			var pkts uint64
			for b.Loop() {
				without = append(without, l.iperf3(b, l.src1, 3*time.Second)/1e9)
				c, err := Attach(l.vm, l.v)
				if err != nil {
					b.Fatal(err)
				}
				with = append(with, l.iperf3(b, l.src1, 3*time.Second)/1e9)
				pairs, err := c.Read()
				if err != nil {
					b.Fatal(err)
				}
				pkts += pairs[l.p1].Packets
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			}
			mean := func(xs []float64) float64 {
				s := 0.0
				for _, x := range xs {
					s += x
				}
				return s / float64(len(xs))
			}
			b.Logf("Gbit/s without %.2f, with %.2f; %.0f packets/s counted", without, with, float64(pkts)/(3*float64(len(with))))
			b.ReportMetric(mean(without), "Gbit/s-without")
			b.ReportMetric(mean(with), "Gbit/s-with")
			b.ReportMetric(mean(with)/mean(without), "ratio")
		})
	}
}

// BenchmarkProgram: the program's run time per packet
// (BPF_PROG_TEST_RUN) for a packet of a pair already in the map, of a
// new pair when the map is full (overflow), and of a declared pair.
func BenchmarkProgram(b *testing.B) {
	needRoot(b)
	for _, bc := range []struct {
		name     string
		maxPairs uint32
	}{{"known", 0}, {"overflow", 1}, {"declared", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			objs, err := load(bc.maxPairs, true)
			if err != nil {
				b.Fatal(err)
			}
			defer objs.Close()
			if bc.maxPairs == 1 {
				ret, _, err := objs.PairbytesCount.Benchmark(frame("10.0.0.9", "10.0.0.8", 17, 5, 0, 1000), 1, nil)
				if err != nil || int32(ret) != -1 {
					b.Fatalf("fill the map: %d, %v", int32(ret), err)
				}
			}
			if bc.name == "declared" {
				mem, err := objs.PairbytesDeclared.Memory()
				if err != nil {
					b.Fatal(err)
				}
				c := &Counter{objs: objs, dev: "bench", decl: declared{mem: mem}}
				if err := c.Declare(pair("10.0.0.1", "10.0.0.2")); err != nil {
					b.Fatal(err)
				}
			}
			in := frame("10.0.0.1", "10.0.0.2", 6, 5, 8, 1400)
			b.ResetTimer()
			_, per, err := objs.PairbytesCount.Benchmark(in, b.N, b.ResetTimer)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/packet")
		})
	}
}

// TestEgressOfServerDevice: the counter on the egress hook of the
// server's end of a VM's veth — where a host agent counts what each pair
// delivers to the VM — counts one TCP flow as the HTB class the agents
// used there before (SegBytes within 1%), beside that HTB root qdisc, and
// as the VM's own device receives it.
func TestEgressOfServerDevice(t *testing.T) {
	needRoot(t)
	l := newLink(t, false)
	htb, err := dataplane.NewLimiter(l.srv, dataplane.LimiterConfig{Dev: l.h})
	if err != nil {
		t.Fatal(err)
	}
	if err := htb.SetPairRate(l.p1, dataplane.MaxRate); err != nil {
		t.Fatal(err)
	}
	eg := mustAttach(t, l.srv, l.h, Config{Hook: dataplane.Egress})
	in := mustAttach(t, l.vm, l.v, Config{})
	cls0, err := htb.Counters()
	if err != nil {
		t.Fatal(err)
	}
	bps := l.iperf3(t, l.src1, 2*time.Second)
	time.Sleep(100 * time.Millisecond)
	cls1, err := htb.Counters()
	if err != nil {
		t.Fatal(err)
	}
	class := cls1[l.p1].Bytes - cls0[l.p1].Bytes
	out, err := eg.Read()
	if err != nil {
		t.Fatal(err)
	}
	got, err := in.Read()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("iperf3 %.2f Gbit/s; HTB class %d bytes; egress of %s %+v; ingress of %s %+v", bps/1e9, class, l.h, out[l.p1], l.v, got[l.p1])
	if !within(out[l.p1].SegBytes, class, 0.01) {
		t.Errorf("egress counter: SegBytes %d, the HTB class beside it %d: want within 1%%", out[l.p1].SegBytes, class)
	}
	if !within(out[l.p1].Bytes, got[l.p1].Bytes, 0.01) {
		t.Errorf("egress counter %d bytes, the VM's device received %d: want within 1%%", out[l.p1].Bytes, got[l.p1].Bytes)
	}
	if len(out) != 1 {
		t.Errorf("egress pairs %v: want %s only (the reverse pair leaves by the other device)", out, l.p1)
	}
}

// TestReplace: a counter whose process died leaves its filter; a new one
// with Replace takes its place at that priority (without Replace it is
// refused), and a filter of another kind there is never removed.
func TestReplace(t *testing.T) {
	needRoot(t)
	l := newLink(t, false)
	old, err := AttachConfig(l.srv, l.h, Config{Hook: dataplane.Egress})
	if err != nil {
		t.Fatal(err)
	}
	// The process dies: its descriptors go, the filter stays.
	old.mu.Lock()
	old.closed = true
	_ = old.objs.Close()
	old.mu.Unlock()
	if _, err := AttachConfig(l.srv, l.h, Config{Hook: dataplane.Egress}); err == nil {
		t.Fatal("attached over the filter left there without Replace")
	}
	c := mustAttach(t, l.srv, l.h, Config{Hook: dataplane.Egress, Replace: true})
	fs, err := l.srv.HookFilters(l.h, dataplane.Egress)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Prio != c.Prio() {
		t.Errorf("egress filters %+v: want the new counter's only", fs)
	}
	l.udp(t, 300*time.Millisecond, flow{src: l.src1, port: 9003, size: 1000, rate: 10e6})
	if got, err := c.Read(); err != nil || got[l.p1].Packets == 0 {
		t.Errorf("the new counter read %v (%v): want the pair's packets", got, err)
	}
	if err := l.srv.RedirectIngress(l.h, l.h, 0xb4); err != nil {
		t.Fatal(err)
	}
	if c, err := AttachConfig(l.srv, l.h, Config{Prio: 0xb4, Replace: true}); err == nil {
		_ = c.Close()
		t.Error("Replace removed a filter of another kind")
	}
}

// BenchmarkRead: one reading of 64 pairs of a counter with the default
// MaxPairs (16384), as a host agent reads each VM's counter every
// period: pairs learned into the hash map (Each: batch lookups walk its
// buckets) against the same pairs declared (EachDeclared: one copy out of
// the mapped array).
func BenchmarkRead(b *testing.B) {
	needRoot(b)
	for _, declare := range []bool{false, true} {
		name := "hash"
		if declare {
			name = "declared"
		}
		b.Run(name, func(b *testing.B) {
			objs, err := load(0, !declare)
			if err != nil {
				b.Fatal(err)
			}
			defer objs.Close()
			mem, err := objs.PairbytesDeclared.Memory()
			if err != nil {
				b.Fatal(err)
			}
			c := &Counter{objs: objs, dev: "bench", decl: declared{mem: mem}}
			for i := range 64 {
				src := fmt.Sprintf("10.1.%d.%d", i/250, 1+i%250)
				if declare {
					if err := c.Declare(pair(src, "10.0.0.1")); err != nil {
						b.Fatal(err)
					}
				}
				if _, _, err := objs.PairbytesCount.Benchmark(frame(src, "10.0.0.1", 17, 5, 0, 100), 1, nil); err != nil {
					b.Fatal(err)
				}
			}
			read := c.Each
			if declare {
				read = c.EachDeclared
			}
			n := 0
			b.ResetTimer()
			for range b.N {
				n = 0
				if err := read(func(Pair, Counts) { n++ }); err != nil {
					b.Fatal(err)
				}
			}
			if n != 64 {
				b.Fatalf("read %d pairs, want 64", n)
			}
		})
	}
}
