package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath/linux"
	"github.com/bulkhead-dc/bulkhead/dataplane/pairbytes"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// Options configure Up.
type Options struct {
	// Prefix names every object of the run (default: NewPrefix()).
	Prefix string
	// Scale multiplies capacities and rates on the wire (default 1).
	Scale float64
	// QueueBytes is each link direction's drop-tail queue (0: QueueFor
	// the link's rate on the wire and QueueTime).
	QueueBytes int
	// QueueTime is the default queues' depth as time at their link's rate
	// (0: the package's QueueTime; Run sets QueueTimeFor the mechanism).
	QueueTime time.Duration
	// Limiters adds a pair limiter on the interface of every VM that sends
	// a declared pair: an HTB class per pair on the VM's veth egress (the
	// emulated vNIC's transmit queue, which the hypervisor controls). TCP
	// in the VM sees it as a real vNIC's backpressure (TCP small queues
	// hold a socket's packets back instead of a queue dropping them), so
	// the losses a connection sees are the network's, not the limiter's.
	Limiters bool
	// Schedulers adds two IFBs to every server with VMs for per-VM
	// schedulers (mech.Capabilities.Schedulers): PREFIXtx receives by mirred redirection
	// everything the server's VMs send, PREFIXrx everything arriving on
	// the server's links. They pass traffic unshaped until an agent
	// installs a scheduler.
	Schedulers bool
	// Loss is the loss counter of the agents of mechanisms that react to
	// losses (mech.Capabilities.Losses): LossSeq (default: eBPF
	// sequence-number gaps at the receivers) or LossTCP (see the
	// constants).
	Loss string
	// GSOMaxSize bounds the offload packets of the VMs' interfaces (0: the
	// kernel's 64 KB). Above 64 KB (up to MaxGSO) it is BIG TCP: every
	// link's and VM's veth, on both sides, takes packets that large, so
	// that they cross the datacenter whole.
	GSOMaxSize int
	// TCP is the congestion control of the VMs' and appliances' TCP
	// (DefaultTCP if empty), set on their routes so that the machine's
	// default (often bbr) does not decide how real connections share a
	// link: the simulator's TCP is loss-based and shares fairly
	// (docs/testbed.md).
	TCP string
	// Daemons leaves every VM's limiters, receive counters and schedulers
	// to host agents that build them (`bulkhead agent --controller`): the
	// testbed then measures what each pair receives with its own eBPF
	// counters inside the VMs' namespaces, which touch nothing the agents
	// use.
	Daemons bool
	// Ephemeral marks the run as this process's (ReapStale removes it if
	// the process dies).
	Ephemeral bool
	Logger    *slog.Logger

	// failAfter makes Up fail after the named step (tests of the failure
	// path).
	failAfter string
}

// Testbed is an emulated datacenter that is up.
type Testbed struct {
	plan *Plan
	log  *slog.Logger
	ns   map[string]*dataplane.NS      // by namespace name
	tx   map[string]*dataplane.Limiter // VM → limiter of its pairs (on its veth)
	rx   map[string]*linux.RXCounters  // VM → counters of the pairs into it (on its server-side device)
	pidx map[[2]string]int             // declared pair → index in plan.Pairs
	padr map[dataplane.Pair]int        // the same by addresses
	gso  int
	tcp  string
	loss string

	daemons bool                          // agents build limiters and counters (Options.Daemons)
	pb      map[string]*pairbytes.Counter // VM → the testbed's own receive counters (Daemons)
}

// cleanupTimeout bounds the teardown after a failure or at the end of a run.
const cleanupTimeout = 30 * time.Second

// Up builds the emulated datacenter of a validated scenario. On any error,
// and when ctx is cancelled, everything it created is removed before it
// returns.
func Up(ctx context.Context, sc *spec.Scenario, tp *topo.Topology, opts Options) (_ *Testbed, err error) {
	if err := dataplane.RequireRoot(); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if opts.Prefix == "" {
		opts.Prefix = NewPrefix()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := CheckLoss(opts.Loss); err != nil {
		return nil, err
	}
	if opts.TCP == "" {
		opts.TCP = DefaultTCP
	}
	if err := CheckTCP(opts.TCP); err != nil {
		return nil, err
	}
	if opts.GSOMaxSize != 0 && (opts.GSOMaxSize < 1500 || opts.GSOMaxSize > MaxGSO) {
		return nil, fmt.Errorf("testbed: offload packets of %d bytes: want 1500 to %d (above 65536: BIG TCP), or 0 for the kernel's 64 KB", opts.GSOMaxSize, MaxGSO)
	}
	plan, err := NewPlan(sc, tp, PlanOptions{Prefix: opts.Prefix, Scale: opts.Scale, QueueBytes: opts.QueueBytes, QueueTime: opts.QueueTime,
		Limiters: opts.Limiters, Schedulers: opts.Schedulers})
	if err != nil {
		return nil, err
	}
	left, err := dataplane.Find(plan.Prefix)
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if !left.Empty() {
		return nil, fmt.Errorf("testbed: run prefix %s is in use (%s); choose another or run `bulkhead testbed down --prefix %s`", plan.Prefix, left, plan.Prefix)
	}
	tb := &Testbed{plan: plan, log: log.With("run", plan.Prefix), ns: map[string]*dataplane.NS{},
		tx: map[string]*dataplane.Limiter{}, rx: map[string]*linux.RXCounters{}, pidx: plan.pairIndex(), padr: map[dataplane.Pair]int{}, gso: opts.GSOMaxSize, tcp: opts.TCP, loss: opts.Loss,
		daemons: opts.Daemons, pb: map[string]*pairbytes.Counter{}}
	for i, pr := range plan.Pairs {
		dp, err := plan.dpPair(pr.Src, pr.Dst)
		if err != nil {
			return nil, err
		}
		tb.padr[dp] = i
	}
	state := newState(plan, opts.Ephemeral)
	if err := writeState(state); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tb.close()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			if derr := Down(cctx, plan.Prefix); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	start := time.Now()
	steps := []struct {
		name string
		fn   func() error
	}{
		{"namespaces", tb.createNamespaces},
		{"links", tb.createLinks},
		{"vms", tb.createVMs},
		{"appliances", tb.createAppliances},
		{"routes", tb.createRoutes},
		{"shapers", tb.createShapers},
		{"counters", tb.createCounters},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("testbed up %s: %w", plan.Prefix, err)
		}
		if err := s.fn(); err != nil {
			return nil, fmt.Errorf("testbed up %s: %s: %w", plan.Prefix, s.name, err)
		}
		if opts.failAfter == s.name {
			return nil, fmt.Errorf("testbed up %s: injected failure after %s", plan.Prefix, s.name)
		}
	}
	state.Ready = true
	if err := writeState(state); err != nil {
		return nil, err
	}
	tb.log.Info("testbed up", "scenario", plan.Scenario, "namespaces", len(tb.ns), "links", len(plan.Links),
		"vms", len(plan.VMs), "appliances", len(plan.Appliances), "scale", plan.Scale, "took", time.Since(start).Round(time.Millisecond))
	return tb, nil
}

// Plan returns what the testbed was built from.
func (tb *Testbed) Plan() *Plan { return tb.plan }

// Prefix returns the run prefix.
func (tb *Testbed) Prefix() string { return tb.plan.Prefix }

// NS returns the open namespace of a node or VM by its namespace name.
func (tb *Testbed) NS(name string) (*dataplane.NS, bool) {
	n, ok := tb.ns[name]
	return n, ok
}

func (tb *Testbed) createNamespaces() error {
	for _, n := range tb.plan.Nodes {
		ns, err := dataplane.CreateNS(n.NS, dataplane.NSOptions{Forwarding: true})
		if err != nil {
			return err
		}
		tb.ns[n.NS] = ns
	}
	for _, v := range tb.plan.VMs {
		ns, err := dataplane.CreateNS(v.NS, dataplane.NSOptions{})
		if err != nil {
			return err
		}
		tb.ns[v.NS] = ns
	}
	for _, a := range tb.plan.Appliances {
		ns, err := dataplane.CreateNS(a.NS, dataplane.NSOptions{})
		if err != nil {
			return err
		}
		tb.ns[a.NS] = ns
	}
	return nil
}

func (tb *Testbed) nodeNS(name string) *dataplane.NS {
	n, _ := tb.plan.Node(name)
	return tb.ns[n.NS]
}

func (tb *Testbed) createLinks() error {
	for _, l := range tb.plan.Links {
		a, b := tb.nodeNS(l.A), tb.nodeNS(l.B)
		if err := a.AddVeth(l.DevA, b, l.DevB); err != nil {
			return err
		}
		if err := a.AddAddr(l.DevA, netip.PrefixFrom(l.AddrA, 31)); err != nil {
			return err
		}
		if err := b.AddAddr(l.DevB, netip.PrefixFrom(l.AddrB, 31)); err != nil {
			return err
		}
		if tb.gso > kernelGSO {
			if err := a.SetGSOMaxSize(l.DevA, tb.gso); err != nil {
				return err
			}
			if err := b.SetGSOMaxSize(l.DevB, tb.gso); err != nil {
				return err
			}
		}
	}
	return nil
}

func (tb *Testbed) createVMs() error {
	for _, v := range tb.plan.VMs {
		srv, vm := tb.nodeNS(v.Server), tb.ns[v.NS]
		if err := srv.AddVeth(v.HostDev, vm, v.Dev); err != nil {
			return err
		}
		if err := srv.AddAddr(v.HostDev, netip.PrefixFrom(v.Gateway, 31)); err != nil {
			return err
		}
		if err := vm.AddAddr(v.Dev, netip.PrefixFrom(v.Addr, 31)); err != nil {
			return err
		}
		if err := vm.AddRoute(dataplane.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: v.Gateway, Dev: v.Dev, RTOMin: VMRTOMin, CongestionControl: tb.tcp}); err != nil {
			return err
		}
		if tb.gso > 0 {
			if err := vm.SetGSOMaxSize(v.Dev, tb.gso); err != nil {
				return err
			}
		}
		if tb.gso > kernelGSO {
			if err := srv.SetGSOMaxSize(v.HostDev, tb.gso); err != nil {
				return err
			}
		}
	}
	return nil
}

func (tb *Testbed) createRoutes() error {
	for _, n := range tb.plan.Nodes {
		ns := tb.ns[n.NS]
		if n.Ctl.IsValid() {
			if err := ns.AddAddr("lo", netip.PrefixFrom(n.Ctl, 32)); err != nil {
				return err
			}
		}
		for _, r := range n.Routes {
			r.CongestionControl = tb.tcp // the proxies' connections to appliances
			if err := ns.AddRoute(r); err != nil {
				return err
			}
		}
		for _, r := range n.Rules {
			if err := ns.AddRule(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Handles of the link shapers: HTB 1:, its class 1:1 at the link's rate,
// the drop-tail queue 10: under it.
var (
	shapeQdisc = dataplane.TCHandle(1, 0)
	shapeClass = dataplane.TCHandle(1, 1)
	shapeQueue = dataplane.TCHandle(10, 0)
)

func (tb *Testbed) createShapers() error {
	for _, n := range tb.plan.Nodes {
		ns := tb.ns[n.NS]
		for _, s := range n.Shapes {
			if err := ns.ReplaceHTB(s.Dev, dataplane.HTB{Handle: shapeQdisc, Parent: 0xFFFFFFFF, Default: 1}); err != nil {
				return err
			}
			if err := ns.ReplaceHTBClass(s.Dev, dataplane.HTBClass{Parent: shapeQdisc, Handle: shapeClass, Rate: s.Rate, Ceil: s.Rate}); err != nil {
				return err
			}
			if err := ns.ReplaceFIFO(s.Dev, shapeClass, shapeQueue, s.QueueBytes); err != nil {
				return err
			}
		}
	}
	return nil
}

// createPairBytes attaches the testbed's own receive counters (eBPF,
// package pairbytes) to the device of every VM that receives a declared
// pair, inside the VM's namespace: host agents build everything on the
// server's side and on the VM's egress, and these see only what arrives.
func (tb *Testbed) createPairBytes() error {
	for _, pr := range tb.plan.Pairs {
		dst, _ := tb.plan.VM(pr.Dst)
		if tb.pb[dst.Name] != nil {
			continue
		}
		c, err := pairbytes.Attach(tb.ns[dst.NS], dst.Dev)
		if err != nil {
			return fmt.Errorf("testbed: receive counters of VM %s: %w", dst.Name, err)
		}
		tb.pb[dst.Name] = c
	}
	return nil
}

// createCounters installs, on the server side of every VM that receives a
// declared pair, the receive counters of the pairs into it (a host
// agent's: linux.RXCounters, on the egress of its server-side device),
// and with Limiters the transmit IFBs and pair classes.
func (tb *Testbed) createCounters() error {
	if tb.daemons {
		return tb.createPairBytes()
	}
	for _, pr := range tb.plan.Pairs {
		dst, _ := tb.plan.VM(pr.Dst)
		srv := tb.nodeNS(dst.Server)
		rx := tb.rx[dst.Name]
		if rx == nil {
			var err error
			if rx, err = linux.NewRXCounters(srv, dst.HostDev); err != nil {
				return fmt.Errorf("testbed: VM %s: %w", dst.Name, err)
			}
			tb.rx[dst.Name] = rx
		}
		p, err := tb.plan.dpPair(pr.Src, pr.Dst)
		if err != nil {
			return err
		}
		if err := rx.CountPair(p); err != nil {
			return err
		}
	}
	if tb.plan.Schedulers {
		if err := tb.createSchedulerIFBs(); err != nil {
			return err
		}
	}
	if !tb.plan.Limiters {
		return nil
	}
	for _, pr := range tb.plan.Pairs {
		src, _ := tb.plan.VM(pr.Src)
		lim := tb.tx[src.Name]
		if lim == nil {
			vm := tb.ns[src.NS]
			if err := vm.Do(limitTSQ); err != nil {
				return fmt.Errorf("netns %s: %w", vm.Name, err)
			}
			var err error
			if lim, err = dataplane.NewLimiter(vm, dataplane.LimiterConfig{Dev: src.Dev, QueueBytes: VMLimiterQueue}); err != nil {
				return err
			}
			tb.tx[src.Name] = lim
		}
		p, err := tb.plan.dpPair(pr.Src, pr.Dst)
		if err != nil {
			return err
		}
		if err := lim.SetPairRate(p, math.Inf(1)); err != nil {
			return err
		}
	}
	return nil
}

// DefaultTCP is the VMs' TCP congestion control unless Options.TCP says
// otherwise: Linux's default, loss-based like the simulator's TCP.
const DefaultTCP = "cubic"

// CheckTCP returns an error unless cc is a TCP congestion control this
// kernel offers (net.ipv4.tcp_available_congestion_control).
func CheckTCP(cc string) error {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return fmt.Errorf("testbed: TCP congestion controls: %w", err)
	}
	avail := strings.Fields(string(b))
	if !slices.Contains(avail, cc) {
		return fmt.Errorf("testbed: TCP congestion control %q: this kernel offers %s (load another with modprobe tcp_NAME)", cc, strings.Join(avail, ", "))
	}
	return nil
}

// MaxGSO is the largest offload packet a veth takes (its tso_max_size):
// Options.GSOMaxSize above the kernel's 64 KB is BIG TCP, the kernel's
// way (Linux 6.3+ for IPv4) of sending fewer, larger packets through a
// host, as Cilium configures it on fast paths. The kernel segments a
// packet larger than a device's gso_max_size in software, so every veth
// on the path takes the size.
const MaxGSO = 524280

// kernelGSO is the kernel's default gso_max_size.
const kernelGSO = 65536

// VMRTOMin is the least TCP retransmission timeout in the VMs (the
// rto_min metric of their default route): 5 ms instead of Linux's
// 200 ms, as datacenter hosts are configured against incast. With round
// trips of well under a millisecond, a connection that loses a whole
// window to a full queue otherwise waits 200 ms, then 400, 800, ...: a
// tenant with one connection against four sat near zero for seconds
// (docs/testbed.md).
const VMRTOMin = 5 * time.Millisecond

// VMLimiterQueue is the queue of a pair class on a VM's interface: room
// for the TCP small-queue budget (VMTSQBytes) of 16 connections, so that a
// limiter holds TCP back without dropping.
const VMLimiterQueue = 16 * VMTSQBytes

// VMTSQBytes is the TCP small-queue budget (net.ipv4.tcp_limit_output_bytes)
// in VMs with pair limiters: the most a TCP socket keeps queued below it.
// The kernel's default (4 MB) would let a few connections overflow any
// reasonable limiter queue.
const VMTSQBytes = 256 << 10

// limitTSQ sets VMTSQBytes in the calling thread's namespace.
func limitTSQ() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/tcp_limit_output_bytes", []byte(strconv.Itoa(VMTSQBytes)), 0o644); err != nil {
		return fmt.Errorf("sysctl net.ipv4.tcp_limit_output_bytes: %w", err)
	}
	return nil
}

// createSchedulerIFBs adds every server's scheduler IFBs: TX fed by its
// VMs' veths' ingress, RX by its links' ingress, each with an HTB root
// that passes everything through its direct queue until an agent
// installs a scheduler.
func (tb *Testbed) createSchedulerIFBs() error {
	for _, n := range tb.plan.Nodes {
		if n.TXIFB == "" {
			continue
		}
		ns := tb.ns[n.NS]
		for _, ifb := range []string{n.TXIFB, n.RXIFB} {
			if err := ns.AddIFB(ifb); err != nil {
				return err
			}
			if err := ns.ReplaceHTB(ifb, dataplane.HTB{Handle: shapeQdisc, Parent: 0xFFFFFFFF, DirectQlen: dataplane.DefaultTxQLen}); err != nil {
				return err
			}
		}
		for _, vi := range n.VMs {
			if err := ns.RedirectIngress(tb.plan.VMs[vi].HostDev, n.TXIFB, 1); err != nil {
				return err
			}
		}
		// one redirection per local VM (its counters are the VM's
		// arrivals, before the ingress scheduler), then the rest
		for _, s := range n.Shapes {
			for i, vi := range n.VMs {
				m := dataplane.Match{Dst: netip.PrefixFrom(tb.plan.VMs[vi].Addr, 32)}
				if err := ns.RedirectIngressMatch(s.Dev, n.RXIFB, 1, uint16(i+1), m); err != nil {
					return err
				}
			}
			if err := ns.RedirectIngressMatch(s.Dev, n.RXIFB, 1, dataplane.MaxU32Node, dataplane.Match{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetPairRate limits a declared pair at its source server to bps bits/s in
// the scenario's units (scaled on the wire; +Inf: no limit). The testbed
// needs Limiters.
func (tb *Testbed) SetPairRate(src, dst string, bps float64) error {
	if !tb.plan.Limiters {
		return errors.New("testbed: pair limiters not built (Options.Limiters)")
	}
	if _, ok := tb.plan.VM(src); !ok {
		return fmt.Errorf("testbed: unknown VM %q", src)
	}
	if _, ok := tb.pidx[[2]string{src, dst}]; !ok {
		return fmt.Errorf("testbed: %s->%s is not a declared pair", src, dst)
	}
	p, err := tb.plan.dpPair(src, dst)
	if err != nil {
		return err
	}
	return tb.tx[src].SetPairRate(p, bps*tb.plan.Scale)
}

// ReceivedBytes returns the bytes every declared pair delivered to its
// destination VM's veth so far (link-layer bytes), indexed like
// Plan().Pairs.
func (tb *Testbed) ReceivedBytes() ([]uint64, error) {
	out := make([]uint64, len(tb.plan.Pairs))
	if tb.daemons {
		for vm, c := range tb.pb {
			cs, err := c.Read()
			if err != nil {
				return nil, fmt.Errorf("testbed: counters of %s: %w", vm, err)
			}
			for p, n := range cs {
				if i, ok := tb.pairByAddr(dataplane.Pair(p)); ok {
					out[i] = n.SegBytes // as the HTB classes of the in-process agents count
				}
			}
		}
		return out, nil
	}
	for vm, lim := range tb.rx {
		cs, err := lim.Counters()
		if err != nil {
			return nil, fmt.Errorf("testbed: counters of %s: %w", vm, err)
		}
		for p, c := range cs {
			if i, ok := tb.pairByAddr(p); ok {
				out[i] = c.Bytes
			}
		}
	}
	return out, nil
}

// SentCounters returns every declared pair's limiter counters at its
// source VM (Limiters only), indexed like Plan().Pairs.
func (tb *Testbed) SentCounters() ([]dataplane.Counters, error) {
	out := make([]dataplane.Counters, len(tb.plan.Pairs))
	for vm, lim := range tb.tx {
		cs, err := lim.Counters()
		if err != nil {
			return nil, fmt.Errorf("testbed: limiter of %s: %w", vm, err)
		}
		for p, c := range cs {
			if i, ok := tb.pairByAddr(p); ok {
				out[i] = c
			}
		}
	}
	return out, nil
}

func (tb *Testbed) pairByAddr(p dataplane.Pair) (int, bool) {
	i, ok := tb.padr[p]
	return i, ok
}

// PairID returns the mechanism-level name of declared pair i.
func (tb *Testbed) PairID(i int) mech.PairID {
	return mech.PairID{Src: tb.plan.Pairs[i].Src, Dst: tb.plan.Pairs[i].Dst}
}

// Command returns a command to run inside the VM's namespace, marked as the
// run's (so that Down kills it); start it with Start.
func (tb *Testbed) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return dataplane.Command(ctx, tb.plan.Prefix, name, args...)
}

// Start starts cmd inside the VM's namespace.
func (tb *Testbed) Start(vm string, cmd *exec.Cmd) error {
	v, ok := tb.plan.VM(vm)
	if !ok {
		return fmt.Errorf("testbed: unknown VM %q", vm)
	}
	return tb.ns[v.NS].StartIn(cmd)
}

// close releases this process's handles on the namespaces.
func (tb *Testbed) close() {
	for vm, c := range tb.pb {
		if err := c.Close(); err != nil {
			tb.log.Warn("closing receive counters", "vm", vm, "err", err)
		}
	}
	tb.pb = map[string]*pairbytes.Counter{}
	for vm, c := range tb.rx {
		if err := c.Close(); err != nil {
			tb.log.Warn("closing receive counters", "vm", vm, "err", err)
		}
	}
	for _, n := range tb.ns {
		n.Close()
	}
	tb.ns = map[string]*dataplane.NS{}
	tb.tx, tb.rx = map[string]*dataplane.Limiter{}, map[string]*linux.RXCounters{}
}

// Close releases this process's handles and leaves the testbed up (for
// `testbed up`); Down removes it later.
func (tb *Testbed) Close() { tb.close() }

// Down removes the testbed and everything of its run.
func (tb *Testbed) Down(ctx context.Context) error {
	tb.close()
	return Down(ctx, tb.plan.Prefix)
}
