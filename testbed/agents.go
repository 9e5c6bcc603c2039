package testbed

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/bulkhead-dc/bulkhead/agent/hostpath"

	"github.com/bulkhead-dc/bulkhead/agent"
	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/linux"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/wireauth"
)

// Mechanisms lists the registered mechanisms the testbed's host agents
// can run (mech.Capabilities.RealTraffic).
func Mechanisms() []string {
	var out []string
	for _, n := range all.Names() {
		if m, err := all.New(n, nil); err == nil {
			if ok, _ := m.Capabilities().RealTraffic(); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// NewMechanism builds a mechanism from the registry for the testbed's
// host agents: it must run on real traffic (mech.Capabilities.RealTraffic)
// and, when its agents react to losses, it is set up for the side where
// the loss counter (loss: LossSeq or LossTCP) sees them (mech.LossAdapter).
func NewMechanism(name string, params map[string]any, loss string) (mech.Mechanism, error) {
	m, err := hostpath.Mechanism(name, params, loss)
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	return m, nil
}

// Needs returns what the data plane must have for a mechanism's agents:
// pair limiters (mech.Capabilities.PairLimits) and per-VM schedulers
// (Schedulers).
func Needs(m mech.Mechanism) (limiters, schedulers bool) {
	c := m.Capabilities()
	return c.PairLimits, c.Schedulers
}

// ForMechanism sets what the emulated datacenter needs for a mechanism's
// agents: pair limiters and schedulers (Needs), and, unless set, the
// queues' depth (QueueTimeFor).
func (o *Options) ForMechanism(m mech.Mechanism) {
	o.Limiters, o.Schedulers = Needs(m)
	if o.QueueTime == 0 {
		o.QueueTime = QueueTimeFor(m.Capabilities())
	}
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

// peers resolves the host agents' addresses: each server's control
// address.
func (p *Plan) peers(host string) (netip.AddrPort, bool) {
	n, ok := p.Node(host)
	if !ok || !n.Ctl.IsValid() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(n.Ctl, AgentPort), true
}

// agentBase is the part of an agent's configuration that only depends on
// the plan: the model, pattern, mechanism, scale and peers; the socket
// opened inside the server's namespace ns at its control address.
func (p *Plan) agentBase(server string, m mech.Mechanism, ns *dataplane.NS) (agent.Config, *NodePlan, error) {
	n, ok := p.Node(server)
	if !ok || !n.Ctl.IsValid() {
		return agent.Config{}, nil, fmt.Errorf("testbed: %q is not a server with VMs", server)
	}
	listen := netip.AddrPortFrom(n.Ctl, AgentPort)
	cfg := agent.Config{
		Host: server, Model: p.Model, Pattern: p.Pattern(), Mechanism: m, Scale: p.Scale, Peers: p.peers,
		Listen: func() (net.PacketConn, error) {
			var c net.PacketConn
			err := ns.Do(func() (err error) {
				c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(listen))
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("%s in netns %s: %w", listen, ns.Name, err)
			}
			return c, nil
		},
	}
	return cfg, n, nil
}

// linuxConfig is the part of a server's data path that only depends on
// the plan: its namespace, scheduler devices and links.
func (p *Plan) linuxConfig(n *NodePlan, ns *dataplane.NS) linux.Config {
	lc := linux.Config{NS: ns, VMs: map[string]linux.Limiters{}, TXIFB: n.TXIFB, RXIFB: n.RXIFB}
	for _, sh := range n.Shapes {
		lc.Links = append(lc.Links, sh.Dev)
	}
	return lc
}

// AgentConfig returns the configuration of the host agent of a server of
// this testbed, on a data path that shares the testbed's namespace
// handles and limiters (for agents run inside the testbed's process). A
// mechanism that reacts to losses gets the testbed's loss counter. Keys
// is left to the caller (startAgents derives them from a master secret
// of the run).
func (tb *Testbed) AgentConfig(server string, m mech.Mechanism, log *slog.Logger) (agent.Config, error) {
	return tb.agentConfig(server, m, log, m.Capabilities().Losses)
}

func (tb *Testbed) agentConfig(server string, m mech.Mechanism, log *slog.Logger, losses bool) (agent.Config, error) {
	var ns *dataplane.NS
	if n, ok := tb.plan.Node(server); ok {
		ns = tb.ns[n.NS]
	}
	cfg, n, err := tb.plan.agentBase(server, m, ns)
	if err != nil {
		return cfg, err
	}
	cfg.Logger = log
	lc := tb.plan.linuxConfig(n, ns)
	for _, vi := range n.VMs {
		v := tb.plan.VMs[vi]
		lc.VMs[v.Name] = linux.Limiters{TX: tb.tx[v.Name], RX: tb.rx[v.Name]}
	}
	if losses {
		if lc.Loss, err = tb.plan.lossCounter(tb.loss, n, ns); err != nil {
			return cfg, err
		}
	}
	if cfg.Path, err = linux.NewHost(lc); err != nil {
		return cfg, errors.Join(err, closeLoss(lc.Loss))
	}
	return cfg, nil
}

func closeLoss(l datapath.LossCounter) error {
	if l == nil {
		return nil
	}
	return l.Close()
}

// Loss counters of the host agents (Options.Loss; "" is LossSeq).
const (
	// LossTCP counts the sender VMs' TCP retransmissions
	// (linux.TCPRetransmits): at the source, TCP only.
	LossTCP = hostpath.LossTCP
	// LossSeq counts gaps in per-pair sequence numbers stamped by eBPF
	// (linux.SeqGaps, ElasticSwitch §6): at the destination, TCP and UDP.
	// Mechanisms that react at the source then take their congestion
	// from the receivers' feedback (mech.LossAdapter; NewMechanism).
	LossSeq = hostpath.LossSeq
)

// CheckLoss says whether name is a loss counter ("" is LossSeq).
func CheckLoss(name string) error {
	_, err := LossSide(name)
	return err
}

// LossSide returns where a loss counter sees losses ("" is LossSeq).
func LossSide(name string) (mech.LossSide, error) {
	side, err := hostpath.LossSide(name)
	if err != nil {
		return 0, fmt.Errorf("testbed: %w", err)
	}
	return side, nil
}

// lossCounter makes the loss counter of server n (namespace ns):
// sequence-number gaps stamped on its links and counted at its VMs'
// veths (LossSeq), or its VMs' TCP retransmissions (LossTCP).
func (p *Plan) lossCounter(loss string, n *NodePlan, ns *dataplane.NS) (datapath.LossCounter, error) {
	switch loss {
	case "", LossSeq:
		var uplinks, hostDevs []string
		for _, sh := range n.Shapes {
			uplinks = append(uplinks, sh.Dev)
		}
		for _, vi := range n.VMs {
			hostDevs = append(hostDevs, p.VMs[vi].HostDev)
		}
		return linux.NewSeqGaps(ns, uplinks, hostDevs)
	case LossTCP:
		nsAddr := map[string]netip.Addr{}
		for _, vi := range n.VMs {
			nsAddr[p.VMs[vi].NS] = p.VMs[vi].Addr
		}
		return linux.NewTCPRetransmits(nsAddr)
	}
	return nil, CheckLoss(loss)
}

// AttachAgent opens what the host agent of one server of a testbed that
// is up (`testbed up`) needs, for an agent in another process (`bulkhead
// agent`): the server's and its VMs' namespaces, and its own limiters —
// it replaces the root qdiscs of its VMs' interfaces (pair limiters) and
// of their veths in the server (receive counters) with new ones, so it
// owns them — and the keys it shares with the other agents of the run,
// derived from the run's master secret (runMaster). The agent owns the
// data path: closing it (agent.Run, Agent.Close, a failed agent.New)
// releases the namespaces.
func AttachAgent(p *Plan, server string, m mech.Mechanism, loss string, log *slog.Logger) (_ agent.Config, err error) {
	if err := CheckLoss(loss); err != nil {
		return agent.Config{}, err
	}
	if ok, why := m.Capabilities().RealTraffic(); !ok {
		return agent.Config{}, fmt.Errorf("testbed: mechanism %s runs in the simulator only: %s", m.Name(), why)
	}
	if m.Capabilities().Central {
		return agent.Config{}, fmt.Errorf("testbed: mechanism %s has a central controller: run it through the control plane ('bulkhead testbed run', or agents under 'bulkhead controller'), not as agents of a testbed that is up", m.Name())
	}
	n, ok := p.Node(server)
	if !ok || !n.Ctl.IsValid() {
		return agent.Config{}, fmt.Errorf("testbed: %q is not a server with VMs", server)
	}
	var opened []*dataplane.NS
	release := func() {
		for _, ns := range opened {
			ns.Close()
		}
	}
	var lc linux.Config
	defer func() {
		if err != nil {
			err = errors.Join(err, closeLoss(lc.Loss))
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
		return agent.Config{}, err
	}
	cfg, n, err := p.agentBase(server, m, srv)
	if err != nil {
		return cfg, err
	}
	master, err := runMaster(p.Prefix)
	if err != nil {
		return cfg, err
	}
	cfg.Keys = wireauth.Keys(master, server)
	cfg.Logger = log
	lc = p.linuxConfig(n, srv)
	sends, recvs := map[string][]dataplane.Pair{}, map[string][]dataplane.Pair{}
	for _, pr := range p.Pairs {
		dp, err := p.dpPair(pr.Src, pr.Dst)
		if err != nil {
			return cfg, err
		}
		sends[pr.Src] = append(sends[pr.Src], dp)
		recvs[pr.Dst] = append(recvs[pr.Dst], dp)
	}
	for _, vi := range n.VMs {
		v := p.VMs[vi]
		var l linux.Limiters
		if len(recvs[v.Name]) > 0 {
			if l.RX, err = linux.NewRXCounters(srv, v.HostDev); err != nil {
				return cfg, err
			}
			for _, dp := range recvs[v.Name] {
				if err := l.RX.CountPair(dp); err != nil {
					return cfg, err
				}
			}
		}
		if p.Limiters && len(sends[v.Name]) > 0 {
			vns, err := open(v.NS)
			if err != nil {
				return cfg, err
			}
			if err := vns.Do(limitTSQ); err != nil {
				return cfg, fmt.Errorf("netns %s: %w", v.NS, err)
			}
			if err := vns.DeleteRootQdisc(v.Dev); err != nil {
				return cfg, err
			}
			if l.TX, err = dataplane.NewLimiter(vns, dataplane.LimiterConfig{Dev: v.Dev, QueueBytes: VMLimiterQueue}); err != nil {
				return cfg, err
			}
			for _, dp := range sends[v.Name] {
				if err := l.TX.SetPairRate(dp, mech.Unlimited); err != nil {
					return cfg, err
				}
			}
		}
		lc.VMs[v.Name] = l
	}
	if m.Capabilities().Losses {
		if lc.Loss, err = p.lossCounter(loss, n, srv); err != nil {
			return cfg, err
		}
	}
	lc.Release = release
	if cfg.Path, err = linux.NewHost(lc); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// Apply steps the mechanism's agent of every server with VMs once, on a
// first observation (no traffic yet), and leaves what it set on the data
// plane, with no agent running: what a mechanism sets from the model
// alone (a reservation mechanism's pair limits, a scheduler's weights).
// Messages between the agents are dropped.
func (tb *Testbed) Apply(m mech.Mechanism) error {
	for _, n := range tb.plan.Agents() {
		// a first step measures no loss: no loss counter
		cfg, err := tb.agentConfig(n.Name, m, tb.log, false)
		if err != nil {
			return err
		}
		st, err := agent.Apply(cfg)
		if err != nil {
			return fmt.Errorf("testbed: apply %s on %s: %w", m.Name(), n.Name, err)
		}
		tb.log.Info("mechanism applied", "mechanism", m.Name(), "server", n.Name, "writes", st.Writes)
	}
	return nil
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
	// The agents' pair keys come from a master secret of this run that
	// only this process holds.
	master, err := wireauth.NewMaster()
	if err != nil {
		return fail(fmt.Errorf("testbed: %w", err))
	}
	for i, n := range tb.plan.Agents() {
		cfg, err := tb.AgentConfig(n.Name, m, tb.log)
		if err != nil {
			return fail(err)
		}
		cfg.Keys = wireauth.Keys(master, n.Name)
		if httpBase != "" {
			cfg.HTTP = host + ":" + strconv.Itoa(port+i)
		}
		cfg.Trace = trace
		cfg.Restore = true
		a, err := agent.New(cfg) // closes cfg.Path on error
		if err != nil {
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

// keyPath is the file of a run's master secret for the agents' keys.
func keyPath(prefix string) string { return filepath.Join(StateDir, prefix+".key") }

// runMaster returns the master secret from which the agents of a run
// that is up derive their pair keys (wireauth.Keys), shared between the
// agents' processes through keyPath(prefix) (hex, 0600, on the tmpfs
// of StateDir): the first agent of the run creates it, the others read
// it.
func runMaster(prefix string) ([]byte, error) {
	if err := dataplane.ValidPrefix(prefix); err != nil {
		return nil, fmt.Errorf("testbed: agents' keys: %w", err)
	}
	return masterAt(keyPath(prefix))
}

// masterAt returns the master secret in the file path, which it creates
// if there is none.
func masterAt(path string) ([]byte, error) {
	dir := filepath.Dir(path)
	read := func() ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		m, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(m) != wireauth.KeySize {
			return nil, fmt.Errorf("testbed: agents' master secret %s: not %d bytes in hex", path, wireauth.KeySize)
		}
		return m, nil
	}
	m, err := read()
	if !errors.Is(err, os.ErrNotExist) {
		return m, err
	}
	if m, err = wireauth.NewMaster(); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("testbed: agents' keys: %w", err)
	}
	// Written whole under another name, then linked in place: an agent
	// that starts at the same time either sees no file or all of it, and
	// if it linked its own first, both use that one.
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*") // 0600
	if err != nil {
		return nil, fmt.Errorf("testbed: agents' keys: %w", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.WriteString(hex.EncodeToString(m) + "\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, fmt.Errorf("testbed: agents' keys: %w", err)
	}
	if err := os.Link(f.Name(), path); errors.Is(err, os.ErrExist) {
		return read()
	} else if err != nil {
		return nil, fmt.Errorf("testbed: agents' keys: %w", err)
	}
	return m, nil
}

// stop ends the agents and waits for them.
// AgentStats are one host agent's statistics at the end of a run.
type AgentStats struct {
	Host  string
	Steps int64
	// Dropped counts the peers' messages the agent dropped, by reason
	// (agent.DropStale, ...).
	Dropped map[string]float64
}

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
