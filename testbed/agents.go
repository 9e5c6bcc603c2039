package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sort"
	"strconv"
	"sync"

	"github.com/bulkhead-dc/bulkhead/agent"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
	"github.com/bulkhead-dc/bulkhead/mech/gatekeeper"
	"github.com/bulkhead-dc/bulkhead/mech/none"
	"github.com/bulkhead-dc/bulkhead/mech/seawall"
	"github.com/bulkhead-dc/bulkhead/mech/static"
)

// Env returns the mechanism environment of a server: every VM of the
// scenario and the declared pairs.
func (p *Plan) Env(server string) mech.Env {
	env := mech.Env{Host: server}
	for _, v := range p.VMs {
		env.VMs = append(env.VMs, mech.VM{Name: v.Name, Tenant: v.Tenant, Host: v.Server, In: v.In, Out: v.Out})
	}
	sort.Slice(env.VMs, func(i, j int) bool { return env.VMs[i].Name < env.VMs[j].Name })
	for _, pr := range p.Pairs {
		env.Pattern = append(env.Pattern, mech.PairID{Src: pr.Src, Dst: pr.Dst})
	}
	return env
}

// Agents lists the servers that run a host agent: those with VMs.
func (p *Plan) Agents() []*NodePlan {
	var out []*NodePlan
	for _, n := range p.Nodes {
		if n.Ctl.IsValid() {
			out = append(out, n)
		}
	}
	return out
}

// agentBase is the part of an agent's configuration that only depends on
// the plan.
func (p *Plan) agentBase(server string, m mech.Mechanism) (agent.Config, *NodePlan, error) {
	n, ok := p.Node(server)
	if !ok || !n.Ctl.IsValid() {
		return agent.Config{}, nil, fmt.Errorf("testbed: %q is not a server with VMs", server)
	}
	cfg := agent.Config{
		Host: server, Mechanism: m, Env: p.Env(server), Scale: p.Scale,
		Addrs:  map[string]netip.Addr{},
		Listen: netip.AddrPortFrom(n.Ctl, AgentPort),
		Peers:  map[string]netip.AddrPort{},
		TXIFB:  n.TXIFB, RXIFB: n.RXIFB,
	}
	for _, sh := range n.Shapes {
		cfg.Links = append(cfg.Links, sh.Dev)
	}
	for _, v := range p.VMs {
		cfg.Addrs[v.Name] = v.Addr
	}
	for _, o := range p.Agents() {
		if o != n {
			cfg.Peers[o.Name] = netip.AddrPortFrom(o.Ctl, AgentPort)
		}
	}
	return cfg, n, nil
}

// AgentConfig returns the configuration of the host agent of a server of
// this testbed, sharing the testbed's namespace handles and limiters (for
// agents run inside the testbed's process). The loss counter is
// agent.TCPRetransmits over the server's VMs.
func (tb *Testbed) AgentConfig(server string, m mech.Mechanism, log *slog.Logger) (agent.Config, error) {
	cfg, n, err := tb.plan.agentBase(server, m)
	if err != nil {
		return cfg, err
	}
	cfg.NS = tb.ns[n.NS]
	cfg.Logger = log
	nsAddr := map[string]netip.Addr{}
	for _, vi := range n.VMs {
		v := tb.plan.VMs[vi]
		cfg.VMs = append(cfg.VMs, agent.VM{Name: v.Name, Addr: v.Addr, HostDev: v.HostDev, TX: tb.tx[v.Name], RX: tb.rx[v.Name]})
		nsAddr[v.NS] = v.Addr
	}
	if readsLosses(m.Name()) {
		var hostDevs []string
		for _, vi := range n.VMs {
			hostDevs = append(hostDevs, tb.plan.VMs[vi].HostDev)
		}
		if cfg.Loss, err = newLossCounter(tb.loss, cfg.NS, cfg.Links, hostDevs, nsAddr); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// readsLosses says whether a mechanism's agents react to per-pair losses
// (ElasticSwitch and Seawall); only theirs get a loss counter.
func readsLosses(mechanism string) bool {
	return mechanism == elasticswitch.Name || mechanism == seawall.Name
}

// Loss counters of the host agents (Options.Loss; "" is LossSeq).
const (
	// LossTCP counts the sender VMs' TCP retransmissions
	// (agent.TCPRetransmits): at the source, TCP only.
	LossTCP = "tcp"
	// LossSeq counts gaps in per-pair sequence numbers stamped by eBPF
	// (agent.SeqGaps, ElasticSwitch §6): at the destination, TCP and UDP.
	// ElasticSwitch and Seawall then take their congestion from the
	// receivers' feedback (parameter congestion: receiver, set by
	// LossParams).
	LossSeq = "seq"
)

// CheckLoss says whether name is a loss counter ("" is LossSeq).
func CheckLoss(name string) error {
	switch name {
	case "", LossTCP, LossSeq:
		return nil
	}
	return fmt.Errorf("testbed: loss counter %q: want %q (TCP retransmissions at the sender) or %q (eBPF sequence-number gaps at the receiver)", name, LossTCP, LossSeq)
}

// LossParams returns the mechanism parameters that go with a loss
// counter: with LossSeq, losses are seen at the destination, so
// ElasticSwitch and Seawall must read them from the receivers' feedback
// (congestion: receiver, unless params already say receiver or both). A
// params that asks for the source's own count is an error: it would see
// no loss at all; so is receiver feedback with LossTCP, which counts at the
// senders.
func LossParams(loss, mechanism string, params map[string]any) (map[string]any, error) {
	if !readsLosses(mechanism) {
		return params, nil
	}
	if loss == LossTCP {
		if c := params["congestion"]; c == "receiver" {
			return nil, fmt.Errorf("testbed: mechanism.params.congestion is receiver, but the %s loss counter sees losses at the senders only: use egress (default) or both, or --loss %s", LossTCP, LossSeq)
		}
		return params, nil
	}
	out := make(map[string]any, len(params)+1)
	for k, v := range params {
		out[k] = v
	}
	switch c, ok := params["congestion"]; {
	case !ok:
		out["congestion"] = "receiver"
	case c == "receiver" || c == "both":
	default:
		return nil, fmt.Errorf("testbed: mechanism.params.congestion is %v, but the %s loss counter sees losses at the receivers: use receiver or both", c, LossSeq)
	}
	return out, nil
}

// newLossCounter makes a server agent's loss counter: nsAddr maps its VMs'
// namespaces to their addresses (LossTCP); uplinks are the server's link
// devices and hostDevs its VMs' veths in the server (LossSeq).
func newLossCounter(loss string, ns *dataplane.NS, uplinks, hostDevs []string, nsAddr map[string]netip.Addr) (agent.LossCounter, error) {
	switch loss {
	case "", LossSeq:
		return agent.NewSeqGaps(ns, uplinks, hostDevs)
	case LossTCP:
		return agent.NewTCPRetransmits(nsAddr)
	}
	return nil, CheckLoss(loss)
}

// AttachAgent opens what the host agent of one server of a testbed that
// is up (`testbed up`) needs, for an agent in another process (`bulkhead
// agent`): the server's and its VMs' namespaces, and its own limiters —
// it replaces the root qdiscs of its VMs' interfaces (pair limiters) and
// of their veths in the server (receive counters) with new ones, so it
// owns them. close releases the namespaces.
func AttachAgent(p *Plan, server string, m mech.Mechanism, loss string, log *slog.Logger) (_ agent.Config, _ func(), err error) {
	if err := CheckLoss(loss); err != nil {
		return agent.Config{}, nil, err
	}
	if err := Supported(m.Name()); err != nil {
		return agent.Config{}, nil, fmt.Errorf("testbed: %w", err)
	}
	cfg, n, err := p.agentBase(server, m)
	if err != nil {
		return cfg, nil, err
	}
	var opened []*dataplane.NS
	release := func() {
		for _, ns := range opened {
			ns.Close()
		}
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	open := func(name string) (*dataplane.NS, error) {
		ns, err := dataplane.OpenNS(name)
		if err != nil {
			return nil, err
		}
		opened = append(opened, ns)
		return ns, nil
	}
	srv, err := open(n.NS)
	if err != nil {
		return cfg, nil, err
	}
	cfg.NS, cfg.Logger = srv, log
	sends, recvs := map[string][]dataplane.Pair{}, map[string][]dataplane.Pair{}
	for _, pr := range p.Pairs {
		dp, err := p.dpPair(pr.Src, pr.Dst)
		if err != nil {
			return cfg, nil, err
		}
		sends[pr.Src] = append(sends[pr.Src], dp)
		recvs[pr.Dst] = append(recvs[pr.Dst], dp)
	}
	nsAddr := map[string]netip.Addr{}
	for _, vi := range n.VMs {
		v := p.VMs[vi]
		av := agent.VM{Name: v.Name, Addr: v.Addr, HostDev: v.HostDev}
		if len(recvs[v.Name]) > 0 {
			// HTB cannot be changed in place: remove what is there first
			if err := srv.DeleteRootQdisc(v.HostDev); err != nil {
				return cfg, nil, err
			}
			if av.RX, err = dataplane.NewLimiter(srv, dataplane.LimiterConfig{Dev: v.HostDev}); err != nil {
				return cfg, nil, err
			}
			for _, dp := range recvs[v.Name] {
				if err := av.RX.SetPairRate(dp, mech.Unlimited); err != nil {
					return cfg, nil, err
				}
			}
		}
		if p.Limiters && len(sends[v.Name]) > 0 {
			vns, err := open(v.NS)
			if err != nil {
				return cfg, nil, err
			}
			if err := vns.Do(limitTSQ); err != nil {
				return cfg, nil, fmt.Errorf("netns %s: %w", v.NS, err)
			}
			if err := vns.DeleteRootQdisc(v.Dev); err != nil {
				return cfg, nil, err
			}
			if av.TX, err = dataplane.NewLimiter(vns, dataplane.LimiterConfig{Dev: v.Dev, QueueBytes: VMLimiterQueue}); err != nil {
				return cfg, nil, err
			}
			for _, dp := range sends[v.Name] {
				if err := av.TX.SetPairRate(dp, mech.Unlimited); err != nil {
					return cfg, nil, err
				}
			}
		}
		cfg.VMs = append(cfg.VMs, av)
		nsAddr[v.NS] = v.Addr
	}
	if readsLosses(m.Name()) {
		var hostDevs []string
		for _, vi := range n.VMs {
			hostDevs = append(hostDevs, p.VMs[vi].HostDev)
		}
		if cfg.Loss, err = newLossCounter(loss, srv, cfg.Links, hostDevs, nsAddr); err != nil {
			return cfg, nil, err
		}
	}
	return cfg, release, nil
}

// Supported says whether the testbed's host agents can run a mechanism:
// the per-host mechanisms whose observations and actions the data plane
// provides (none, static, seawall, elasticswitch, gatekeeper). Central
// controllers (Pulsar, QShare, DRX's distributed variants) and DRX's
// local variants (per-VM demands and SLAs the agents do not measure) run
// in the simulator only.
func Supported(name string) error {
	switch name {
	case none.Name, static.Name, seawall.Name, elasticswitch.Name, gatekeeper.Name:
		return nil
	}
	return fmt.Errorf("mechanism %q runs in the simulator only; the testbed's host agents run %s, %s, %s, %s and %s",
		name, none.Name, static.Name, seawall.Name, elasticswitch.Name, gatekeeper.Name)
}

// Needs returns what the data plane must have for a mechanism's agents:
// pair limiters (every mechanism but none and Gatekeeper) and per-VM
// schedulers (Gatekeeper: its egress and ingress schedulers and VM
// limits).
func Needs(name string) (limiters, schedulers bool) {
	switch name {
	case none.Name:
		return false, false
	case gatekeeper.Name:
		return false, true
	}
	return true, false
}

// agents runs the host agents of a testbed as goroutines.
type agents struct {
	list   []*agent.Agent
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

// startAgents makes and starts one agent per server with VMs. httpBase,
// if set (host:port), gives agent i the port + i for its HTTP server.
func (tb *Testbed) startAgents(ctx context.Context, m mech.Mechanism, httpBase string, trace io.Writer) (*agents, error) {
	if trace != nil {
		trace = &lockedWriter{w: trace}
	}
	ctx, cancel := context.WithCancel(ctx)
	as := &agents{cancel: cancel}
	var host string
	var port int
	if httpBase != "" {
		h, p, err := splitHostPort(httpBase)
		if err != nil {
			cancel()
			return nil, err
		}
		host, port = h, p
	}
	// On an error, the agents already built never run: close them.
	fail := func(err error) (*agents, error) {
		for _, a := range as.list {
			if cerr := a.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
		as.list = nil
		as.stop()
		return nil, err
	}
	for i, n := range tb.plan.Agents() {
		cfg, err := tb.AgentConfig(n.Name, m, tb.log)
		if err != nil {
			return fail(err)
		}
		if httpBase != "" {
			cfg.HTTP = host + ":" + strconv.Itoa(port+i)
		}
		cfg.Trace = trace
		cfg.Restore = true
		a, err := agent.New(cfg)
		if err != nil {
			if cfg.Loss != nil {
				err = errors.Join(err, cfg.Loss.Close())
			}
			return fail(err)
		}
		as.list = append(as.list, a)
	}
	for _, a := range as.list {
		as.wg.Add(1)
		go func() {
			defer as.wg.Done()
			if err := a.Run(ctx); err != nil {
				as.mu.Lock()
				as.errs = append(as.errs, err)
				as.mu.Unlock()
			}
		}()
	}
	return as, nil
}

// stop ends the agents and waits for them.
func (as *agents) stop() error {
	as.cancel()
	as.wg.Wait()
	as.mu.Lock()
	defer as.mu.Unlock()
	return errors.Join(as.errs...)
}

func splitHostPort(s string) (string, int, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("testbed: agent http address %q: want IP:PORT: %w", s, err)
	}
	return ap.Addr().String(), int(ap.Port()), nil
}

// lockedWriter serializes writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
