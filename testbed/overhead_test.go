package testbed

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/spec"
	"golang.org/x/sys/unix"
)

// Issue 5 item 6, the enforcement overhead:
//
//	go test -run '^$' -bench 'Enforcement|AgentCPU' -benchtime 3x ./testbed

// benchUp brings a scenario's testbed up for a benchmark and registers its
// teardown.
func benchUp(b *testing.B, y string, o Options) (*spec.Scenario, *Testbed) {
	b.Helper()
	if err := dataplane.RequireRoot(); err != nil {
		b.Skip(err)
	}
	sc, tp := parseScenario(b, y)
	o.Prefix = "tb" + NewPrefix()[2:]
	o.Ephemeral = true
	tb, err := Up(context.Background(), sc, tp, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := tb.Down(ctx); err != nil {
			b.Error(err)
		}
	})
	return sc, tb
}

// pollOnly is a mechanism whose agents step every period (default 15 ms,
// ElasticSwitch's RA period) and never set a limit: the agent's cost of
// reading counters without the mechanism's.
type pollOnly struct{ period time.Duration }

func (pollOnly) Name() string                    { return "poll-only" }
func (pollOnly) Capabilities() mech.Capabilities { return mech.Capabilities{} }
func (m pollOnly) NewAgent(mech.Env) (mech.Agent, error) {
	if m.period == 0 {
		m.period = 15 * time.Millisecond
	}
	return pollAgent(m), nil
}
func (a pollAgent) Period() time.Duration                         { return a.period }
func (pollAgent) Step(*mech.HostObs, []mech.Message) mech.Actions { return mech.Actions{} }

type pollAgent struct{ period time.Duration }

// overheadYAML has links of 40 Gbit/s; overheadYAML1G the same at 1 Gbit/s,
// overheadYAMLBig at 100 Gbit/s, for the cases with BIG TCP: with it one
// flow runs at up to about 50 Gbit/s when the machine's two cores are
// near each other, more than a 40 Gbit/s link carries (38 Gbit/s of
// goodput), so such a link, not the path, would bound it and hide the
// path's cost.
var (
	overheadYAML1G  = strings.ReplaceAll(overheadYAML, "40Gbps", "1Gbps")
	overheadYAMLBig = strings.ReplaceAll(overheadYAML, "40Gbps", "100Gbps")
)

const overheadYAML = `
name: overhead
duration: 4s
topology:
  kind: explicit
  explicit:
    nodes: [{name: h1, kind: server}, {name: h2, kind: server}, {name: sw, kind: switch}]
    links: [{a: h1, b: sw, capacity: 40Gbps}, {a: sw, b: h2, capacity: 40Gbps}]
tenants:
  - {name: T, guarantee: 1Gbps, vms: [{name: x, server: h1}, {name: y, server: h2}]}
workloads:
  - {tenant: T, kind: tcp, src: x, dst: y}
`

// BenchmarkEnforcement is the goodput of one TCP flow between two VMs on
// links shaped at 40 Gbit/s (100 Gbit/s for the big- cases; far above
// what two cores forward: the flow is CPU-bound, unshaped in effect), 3 s
// per iteration, counted by the
// receiving generator: "plain" without any class of the agent (no pair
// limiter, receive counters removed); "counter" with the receiver's eBPF
// counter alone (no pair limiter); "htb-root" with the pair limiter's HTB
// root qdisc alone (the pair's class and classifier removed: its packets
// go through HTB's direct queue; no receive counter); "limiter" with the
// pair limiter and no receive counter, "limiter-default-tsq" the same with
// the kernel's TCP small-queue budget instead of VMTSQBytes; "hook-nop"
// with an eBPF program that does nothing where the receive counter goes
// (the egress hook of the receiver's device on its server), "hook-nop-vm"
// the same on the ingress hook of the receiving VM's own device, "tcx-nop"
// the program of "hook-nop" attached through TCX (a BPF link) instead of a
// clsact qdisc; "rx-htb" with an HTB root qdisc and no class there instead
// (every packet in its direct queue), "rx-htb-nop" the same with the
// program as its classifier; "classes" with the pair limiter (its class
// unlimited, i.e. at dataplane.MaxRate) on the sender's interface and the
// receive counter; "classes-default-tsq" the same with the kernel's TCP
// small-queue budget instead of VMTSQBytes (also "big-classes-default-tsq";
// "big-classes-1m-tsq" with a budget of two BIG TCP packets, 1 MB;
// "big-plain-small-tsq" is big-plain with VMTSQBytes, the budget the
// testbed gives VMs with pair limiters; "big-limiter" and "big-counter"
// are limiter and counter with BIG TCP, as are big-htb-root, big-hook-nop
// and big-tcx-nop; "big-plain-512k" and "big-classes-512k" have the
// sender write 512 KiB at a time instead of genWrite, for offload packets
// nearer BIG TCP's size);
// "agent" with the classes and
// both servers' agents reading every counter every 15 ms (reported with
// the agents' time in their steps, in thousandths of a core);
// "big-agent-150ms" the same every 150 ms. The iperf- cases run the flow
// as iperf3 processes in the VMs instead of this process's generator (so
// that the agents, goroutines of this process, do not share a Go
// scheduler with the traffic) and count it in the receiving VM's device
// (link-layer bytes); the -pinned ones write 512 KiB at a time with the
// sender on CPU 0 and the receiver on CPU 1 (iperf3's -A), with nothing,
// the limiter, the counter or both. The 1G variants
// are on 1 Gbit/s links, the experiments' scale. -test.count repeats each
// case back to back; scripts/enforcement-cost interleaves them. Each run
// logs the packets the receiving VM's device took and their mean size
// (offload packets: what a hook's program runs on).
func BenchmarkEnforcement(b *testing.B) {
	for _, tc := range []struct {
		name                    string
		classes, counter, agent bool
		tsq                     int // the sending VM's small-queue budget if not 0 (bytes)
		yaml                    string
		gso                     int
		write                   int // the sender's bytes per write, if not genWrite
	}{
		{"plain", false, false, false, 0, overheadYAML, 0, 0},
		{"counter", false, true, false, 0, overheadYAML, 0, 0},
		{"htb-root", true, false, false, 0, overheadYAML, 0, 0},
		{"limiter", true, false, false, 0, overheadYAML, 0, 0},
		{"limiter-default-tsq", true, false, false, 4 << 20, overheadYAML, 0, 0},
		{"hook-nop", false, false, false, 0, overheadYAML, 0, 0},
		{"hook-nop-vm", false, false, false, 0, overheadYAML, 0, 0},
		{"tcx-nop", false, false, false, 0, overheadYAML, 0, 0},
		{"rx-htb", false, false, false, 0, overheadYAML, 0, 0},
		{"rx-htb-nop", false, false, false, 0, overheadYAML, 0, 0},
		{"classes", true, true, false, 0, overheadYAML, 0, 0},
		{"classes-default-tsq", true, true, false, 4 << 20, overheadYAML, 0, 0},
		{"agent", true, true, true, 0, overheadYAML, 0, 0},
		{"big-plain", false, false, false, 0, overheadYAMLBig, MaxGSO, 0},
		{"big-plain-small-tsq", false, false, false, VMTSQBytes, overheadYAMLBig, MaxGSO, 0},
		{"big-classes", true, true, false, 0, overheadYAMLBig, MaxGSO, 0},
		{"big-limiter", true, false, false, 0, overheadYAMLBig, MaxGSO, 0},
		{"big-counter", false, true, false, 0, overheadYAMLBig, MaxGSO, 0},
		{"big-htb-root", true, false, false, 0, overheadYAMLBig, MaxGSO, 0},
		{"big-hook-nop", false, false, false, 0, overheadYAMLBig, MaxGSO, 0},
		{"big-tcx-nop", false, false, false, 0, overheadYAMLBig, MaxGSO, 0},
		{"big-plain-512k", false, false, false, 0, overheadYAMLBig, MaxGSO, 512 << 10},
		{"big-classes-512k", true, true, false, 0, overheadYAMLBig, MaxGSO, 512 << 10},
		{"big-classes-default-tsq", true, true, false, 4 << 20, overheadYAMLBig, MaxGSO, 0},
		{"big-classes-1m-tsq", true, true, false, 2 * MaxGSO, overheadYAMLBig, MaxGSO, 0},
		{"big-agent", true, true, true, 0, overheadYAMLBig, MaxGSO, 0},
		{"big-agent-150ms", true, true, true, 0, overheadYAMLBig, MaxGSO, 0},
		{"iperf-big-plain", false, false, false, 0, overheadYAMLBig, MaxGSO, 0},
		{"iperf-big-classes", true, true, false, 0, overheadYAMLBig, MaxGSO, 0},
		{"iperf-big-agent", true, true, true, 0, overheadYAMLBig, MaxGSO, 0},
		{"iperf-big-plain-pinned", false, false, false, 0, overheadYAMLBig, MaxGSO, 512 << 10},
		{"iperf-big-classes-pinned", true, true, false, 0, overheadYAMLBig, MaxGSO, 512 << 10},
		{"iperf-big-limiter-pinned", true, false, false, 0, overheadYAMLBig, MaxGSO, 512 << 10},
		{"iperf-big-counter-pinned", false, true, false, 0, overheadYAMLBig, MaxGSO, 512 << 10},
		{"1G-plain", false, false, false, 0, overheadYAML1G, 0, 0},
		{"1G-agent", true, true, true, 0, overheadYAML1G, 0, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			_, tb := benchUp(b, tc.yaml, Options{Limiters: tc.classes, GSOMaxSize: tc.gso})
			ctx := context.Background()
			if tc.tsq != 0 {
				x, _ := tb.plan.VM("x")
				if err := tb.ns[x.NS].Do(func() error {
					return os.WriteFile("/proc/sys/net/ipv4/tcp_limit_output_bytes", []byte(strconv.Itoa(tc.tsq)), 0o644)
				}); err != nil {
					b.Fatal(err)
				}
			}
			if !tc.counter {
				dropRX(b, tb, "y")
			}
			switch strings.TrimPrefix(tc.name, "big-") {
			case "hook-nop":
				nopHook(b, tb, "y", false)
			case "hook-nop-vm":
				nopHook(b, tb, "y", true)
			case "tcx-nop":
				nopTCX(b, tb, "y")
			case "rx-htb":
				nopQdisc(b, tb, "y", false)
			case "rx-htb-nop":
				nopQdisc(b, tb, "y", true)
			}
			if strings.TrimPrefix(tc.name, "big-") == "htb-root" {
				// the HTB root qdisc alone: the pair's class and
				// classifier removed, its packets through HTB's direct
				// queue
				p, err := tb.plan.dpPair("x", "y")
				if err != nil {
					b.Fatal(err)
				}
				if err := tb.tx["x"].RemovePair(p); err != nil {
					b.Fatal(err)
				}
			}
			var as *agents
			var t0 time.Time
			if tc.agent {
				var err error
				m := pollOnly{}
				if strings.HasSuffix(tc.name, "-150ms") {
					m.period = 150 * time.Millisecond
				}
				as, err = tb.startAgents(ctx, m, "", nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = as.stop() })
				t0 = time.Now()
			}
			fl := []flow{{pair: 0, src: "x", dst: "y", workload: "w", conns: 1, phase: phase(0, 3*time.Second), port: 5201}}
			if strings.HasPrefix(tc.name, "iperf-") {
				var client, server []string
				if strings.HasSuffix(tc.name, "-pinned") {
					// the sender on CPU 0, the receiver on CPU 1
					client, server = []string{"-A", "0"}, []string{"-A", "1"}
				}
				if tc.write > 0 {
					client = append(client, "-l", strconv.Itoa(tc.write))
				}
				measureIperf(b, tb, fl, client, server)
			} else {
				measureGoodput(b, tb, fl, tc.write)
			}
			if as != nil {
				// the agents' time in their steps (reading the counters),
				// in thousandths of a core
				var steps int64
				var in time.Duration
				for _, a := range as.list {
					steps += a.Steps()
					in += a.StepTime()
				}
				b.ReportMetric(1000*in.Seconds()/time.Since(t0).Seconds(), "agents-step-ms/s")
				b.ReportMetric(float64(in.Microseconds())/float64(max(steps, 1)), "µs/step")
			}
			// the packets (offload packets: what a hook's program runs
			// on) and bytes the receiving VM's device took
			if bytes, packets, err := vmReceived(tb, "y"); err == nil {
				b.Logf("y received %d packets, %d bytes: %.0f bytes a packet", packets, bytes, float64(bytes)/float64(max(packets, 1)))
			}
		})
	}
}

// agentCPUYAML: 8 VMs on h1 each send to 8 VMs on h2 (64 pairs), paced
// at 4 Mbit/s per pair, under their ElasticSwitch guarantees (100 Mbps
// hoses: 12.5 per pair) so that the limits never bind.
func agentCPUYAML() string {
	y := `
name: agent-cpu
duration: 10s
topology:
  kind: explicit
  explicit:
    nodes: [{name: h1, kind: server}, {name: h2, kind: server}, {name: sw, kind: switch}]
    links: [{a: h1, b: sw, capacity: 1Gbps}, {a: sw, b: h2, capacity: 1Gbps}]
tenants:
  - name: T
    guarantee: 100Mbps
    vms: [`
	for i := 1; i <= 8; i++ {
		y += "{name: a" + string(rune('0'+i)) + ", server: h1}, {name: b" + string(rune('0'+i)) + ", server: h2}, "
	}
	y = y[:len(y)-2] + "]\nworkloads:\n"
	for i := 1; i <= 8; i++ {
		y += "  - {tenant: T, kind: tcp, rate: 4Mbps, src: a" + string(rune('0'+i)) + ", dst: [b1, b2, b3, b4, b5, b6, b7, b8]}\n"
	}
	return y
}

func processCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAgentCPU is the CPU the ElasticSwitch agents use with 64 active
// VM pairs at RA 15 ms (GP 60 ms): the agent of h1 (64 egress pairs,
// their limiters) and of h2 (64 ingress pairs), 4 s per iteration. It
// reports this process's CPU (user + system, in ms per second, i.e.
// thousandths of a core) with the agents running minus without (the
// generator alone), and the agents' own time in their steps.
func BenchmarkAgentCPU(b *testing.B) {
	m, err := NewMechanism("elasticswitch", nil, "")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// measure runs the flows for 4.5 s and returns the process's CPU per
	// second over the last 3 s.
	measure := func(g *generator, fl []flow) float64 {
		g.begin(ctx, fl, time.Now(), 1)
		time.Sleep(time.Second)
		c0, t0 := processCPU(), time.Now()
		time.Sleep(3 * time.Second)
		c := float64(processCPU()-c0) / float64(time.Since(t0))
		time.Sleep(600 * time.Millisecond)
		return c
	}
	var base, with, steps, stepTime, wall float64
	var updates int64
	var updTime time.Duration
	for i := 0; i < b.N; i++ {
		// A fresh testbed every iteration, so that iterations are
		// independent of what the previous agents left (limits lowered as
		// the flows ended, queues, HTB token balances).
		b.StopTimer()
		sc, tb := benchUp(b, agentCPUYAML(), Options{Limiters: true})
		fl, err := flows(sc, tb.plan)
		if err != nil {
			b.Fatal(err)
		}
		if len(fl) != 64 {
			b.Fatalf("%d flows, want 64", len(fl))
		}
		for i := range fl {
			fl[i].phase = phase(0, 4500*time.Millisecond)
		}
		g := &generator{tb: tb}
		if err := g.listen(fl); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		base += measure(g, fl)
		as, err := tb.startAgents(ctx, m, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		with += measure(g, fl)
		wall += time.Since(t0).Seconds()
		if err := as.stop(); err != nil {
			b.Fatal(err)
		}
		for _, a := range as.list {
			steps += float64(a.Steps())
			stepTime += a.StepTime().Seconds()
			n, d := a.LimitUpdates()
			updates += n
			updTime += d
		}
		g.stop()
		if err := g.err(); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(1000*(with-base)/n, "agents-cpu-ms/s")
	b.ReportMetric(1000*base/n, "generator-cpu-ms/s")
	b.ReportMetric(1000*stepTime/wall, "agents-step-ms/s")
	b.ReportMetric(1e6*stepTime/steps, "µs/step")
	if updates > 0 {
		b.ReportMetric(float64(updTime.Microseconds())/float64(updates), "µs/limit-update")
	}
}

// dropRX removes the receive counters the testbed put on a VM's device on
// the server (the agents' eBPF program), so that "plain" runs have no
// enforcement or counting of Bulkhead's on the path at all.
func dropRX(b *testing.B, tb *Testbed, vm string) {
	b.Helper()
	if c := tb.rx[vm]; c != nil {
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		delete(tb.rx, vm)
	}
	y, _ := tb.plan.VM(vm)
	srv, _ := tb.plan.Node(y.Server)
	if fs, err := tb.ns[srv.NS].HookFilters(y.HostDev, dataplane.Egress); err != nil || len(fs) > 0 {
		b.Fatalf("%s's device on the server still has egress filters %v (%v)", vm, fs, err)
	}
}

// pairsYAML has n sender VMs on h1 and n receivers on h2, links of
// capacity, one TCP flow from x_i to y_i each.
func pairsYAML(n int, capacity string) string {
	var vms, wl strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&vms, "      - {name: x%d, server: h1}\n      - {name: y%d, server: h2}\n", i, i)
		fmt.Fprintf(&wl, "  - {tenant: T, kind: tcp, src: x%d, dst: y%d}\n", i, i)
	}
	return fmt.Sprintf(`
name: overhead-pairs
duration: 4s
topology:
  kind: explicit
  explicit:
    nodes: [{name: h1, kind: server}, {name: h2, kind: server}, {name: sw, kind: switch}]
    links: [{a: h1, b: sw, capacity: %[1]s}, {a: sw, b: h2, capacity: %[1]s}]
tenants:
  - name: T
    guarantee: 100Mbps
    vms:
%[2]sworkloads:
%[3]s`, capacity, vms.String(), wl.String())
}

// nopHook puts, where the receive counter goes (the egress hook of vm's
// device on its server; inVM: the ingress hook of the VM's own device, the
// other end of the veth), an eBPF program that does nothing and lets
// every packet pass: what the hook costs a packet without the counter's
// work.
func nopHook(b *testing.B, tb *Testbed, vm string, inVM bool) {
	b.Helper()
	prog, ns, dev, idx := nopAt(b, tb, vm, inVM)
	parent := uint32(netlink.HANDLE_MIN_EGRESS)
	if inVM {
		parent = netlink.HANDLE_MIN_INGRESS
	}
	if err := ns.EnsureClsact(dev); err != nil {
		b.Fatal(err)
	}
	nopFilter(b, ns, idx, parent, prog)
}

// nopFilter attaches prog as a cls_bpf filter in direct-action mode under
// parent on the device of index idx.
func nopFilter(b *testing.B, ns *dataplane.NS, idx int, parent uint32, prog *ebpf.Program) {
	b.Helper()
	f := &netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: idx, Parent: parent, Handle: 1, Priority: 0xb3, Protocol: unix.ETH_P_ALL},
		Fd:           prog.FD(),
		Name:         "nop",
		DirectAction: true,
	}
	if err := ns.Netlink().FilterAdd(f); err != nil {
		b.Fatal(err)
	}
}

// nopAt loads a program that lets every packet pass (closed when b
// ends) and finds the device it goes on: vm's device on its server, or
// with inVM the VM's own device; its namespace, name and index there.
func nopAt(b *testing.B, tb *Testbed, vm string, inVM bool) (*ebpf.Program, *dataplane.NS, string, int) {
	b.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = prog.Close() })
	y, _ := tb.plan.VM(vm)
	srv, _ := tb.plan.Node(y.Server)
	ns, dev := tb.ns[srv.NS], y.HostDev
	if inVM {
		ns, dev = tb.ns[y.NS], y.Dev
	}
	idx, err := ns.LinkIndex(dev)
	if err != nil {
		b.Fatal(err)
	}
	return prog, ns, dev, idx
}

// nopQdisc puts an HTB root qdisc with no class on vm's device on its
// server (egress, where the receive counter goes): every packet takes its
// direct queue. With classify, nopHook's program is its classifier
// (cls_bpf, direct action: it matches nothing, so the packet still takes
// the direct queue).
func nopQdisc(b *testing.B, tb *Testbed, vm string, classify bool) {
	b.Helper()
	prog, ns, _, idx := nopAt(b, tb, vm, false)
	q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(0x7a, 0), Parent: netlink.HANDLE_ROOT})
	if err := ns.Netlink().QdiscAdd(q); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ns.Netlink().QdiscDel(q) })
	if classify {
		nopFilter(b, ns, idx, q.Handle, prog)
	}
}

// nopTCX is nopHook's program on the same device and direction attached
// through TCX (a BPF link, Linux 6.6+) instead of a cls_bpf filter on a
// clsact qdisc.
func nopTCX(b *testing.B, tb *Testbed, vm string) {
	b.Helper()
	prog, ns, _, idx := nopAt(b, tb, vm, false)
	if err := ns.Do(func() error {
		l, err := link.AttachTCX(link.TCXOptions{Interface: idx, Program: prog, Attach: ebpf.AttachTCXEgress})
		if err != nil {
			return err
		}
		b.Cleanup(func() { _ = l.Close() })
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEnforcementPairs is BenchmarkEnforcement's "plain" against
// "classes" with 16 and 64 VM pairs, one TCP flow each, between two hosts
// on links of 40 Gbit/s (CPU-bound at the kernel's 64 KB offload packets:
// their total is what the two cores forward), 100 Gbit/s for the big-
// cases (which 40 Gbit/s links would bound): the aggregate goodput with and without the agent's classes
// (a pair limiter per pair, unlimited, and the receiver's eBPF counter);
// the "big-" cases with BIG TCP (offload packets of MaxGSO bytes).
func BenchmarkEnforcementPairs(b *testing.B) {
	for _, gso := range []int{0, MaxGSO} {
		for _, n := range []int{16, 64} {
			for _, classes := range []bool{false, true} {
				name := fmt.Sprintf("%d-plain", n)
				if classes {
					name = fmt.Sprintf("%d-classes", n)
				}
				if gso > 0 {
					name = "big-" + name
				}
				b.Run(name, func(b *testing.B) { enforcementPairs(b, n, classes, gso) })
			}
		}
	}
}

// enforcementPairs is one case of BenchmarkEnforcementPairs: n pairs, one
// TCP flow each, with the agents' classes or none, offload packets of gso
// bytes (0: the kernel's 64 KB).
func enforcementPairs(b *testing.B, n int, classes bool, gso int) {
	capacity := "40Gbps"
	if gso > 0 {
		capacity = "100Gbps" // 40 Gbit/s links would bound them, not the path
	}
	_, tb := benchUp(b, pairsYAML(n, capacity), Options{Limiters: classes, GSOMaxSize: gso})
	var fl []flow
	for i := 1; i <= n; i++ {
		src, dst := fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)
		pair := -1
		for k, p := range tb.plan.Pairs {
			if p.Src == src && p.Dst == dst {
				pair = k
			}
		}
		if pair < 0 {
			b.Fatalf("no pair %s->%s in the plan", src, dst)
		}
		if !classes {
			dropRX(b, tb, dst)
		}
		fl = append(fl, flow{pair: pair, src: src, dst: dst, workload: "w", conns: 1, phase: phase(0, 3*time.Second), port: 5201})
	}
	measureGoodput(b, tb, fl, 0)
}

// measureGoodput runs the flows b.N times for 3.1 s and reports their
// aggregate goodput (Gbit/s) over 2.4 s of each, after 0.5 s of slow start.
func measureGoodput(b *testing.B, tb *Testbed, fl []flow, write int) {
	b.Helper()
	ctx := context.Background()
	g := &generator{tb: tb, write: write}
	defer g.stop()
	if err := g.listen(fl); err != nil {
		b.Fatal(err)
	}
	var bits, secs float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g.begin(ctx, fl, time.Now(), 1)
		n, d := window(func() uint64 { return uint64(g.received.Load()) })
		bits, secs = bits+n, secs+d
	}
	if err := g.err(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(bits/secs/1e9, "Gbit/s")
}

// window is one measured run of flows just started: 0.5 s of slow start,
// then the bits a byte count rises by over 2.4 s, then 0.2 s more before
// the flows stop at 3.1 s. It returns the bits and the seconds.
func window(count func() uint64) (bits, secs float64) {
	time.Sleep(500 * time.Millisecond) // slow start
	b0, t0 := count(), time.Now()
	time.Sleep(2400 * time.Millisecond)
	bits, secs = float64(count()-b0)*8, time.Since(t0).Seconds()
	time.Sleep(200 * time.Millisecond)
	return bits, secs
}

// vmReceived is the bytes and packets a VM's own device has received
// (link-layer bytes; offload packets).
func vmReceived(tb *Testbed, vm string) (bytes, packets uint64, err error) {
	v, ok := tb.plan.VM(vm)
	if !ok {
		return 0, 0, fmt.Errorf("no VM %s", vm)
	}
	l, err := tb.ns[v.NS].Netlink().LinkByName(v.Dev)
	if err != nil {
		return 0, 0, fmt.Errorf("%s's device: %w", vm, err)
	}
	if l.Attrs().Statistics == nil {
		return 0, 0, fmt.Errorf("%s's device: no statistics", vm)
	}
	return l.Attrs().Statistics.RxBytes, l.Attrs().Statistics.RxPackets, nil
}

// measureIperf is measureGoodput with the flows run by iperf3 clients and
// servers in the VMs, counted by the bytes the destination VM's device
// took (link-layer: about 4.5% more than the payload).
func measureIperf(b *testing.B, tb *Testbed, fl []flow, clientArgs, serverArgs []string) {
	b.Helper()
	ctx := context.Background()
	rx := func() uint64 {
		bytes, _, err := vmReceived(tb, fl[0].dst)
		if err != nil {
			b.Fatal(err)
		}
		return bytes
	}
	var bits, secs float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		func() {
			w := &workers{tb: tb, iperf: "iperf3", clientArgs: clientArgs, serverArgs: serverArgs}
			defer w.stop()
			if err := w.startServers(ctx, fl); err != nil {
				b.Fatal(err)
			}
			w.begin(ctx, fl, time.Now(), 1)
			n, d := window(rx)
			bits, secs = bits+n, secs+d
			w.stop()
			if err := w.err(); err != nil {
				b.Fatal(err)
			}
		}()
	}
	b.ReportMetric(bits/secs/1e9, "Gbit/s")
}
