package testbed

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// Addressing: everything lives in Network, and only inside the run's
// namespaces. VM i's veth is the /31 VMNet+2i (server side) / +2i+1 (the
// VM); physical link j is the /31 LinkNet+2j (first endpoint) / +2j+1.
var (
	Network = netip.MustParsePrefix("10.200.0.0/16")
	VMNet   = netip.MustParsePrefix("10.200.0.0/17")
	LinkNet = netip.MustParsePrefix("10.200.128.0/17")
	// CtlNet holds the servers' control addresses (Ctl), on their
	// loopback and routed along the topology like VM addresses: host
	// agents exchange their messages in band, through the emulated links.
	CtlNet = netip.MustParsePrefix("10.201.0.0/16")
	// ApplianceNet holds the real appliances: appliance i's veth is the
	// /31 ApplianceNet+2i (its server's side) / +2i+1 (the appliance), in
	// scenario order, routed along the topology like VM addresses.
	ApplianceNet = netip.MustParsePrefix("10.202.0.0/16")
)

// Ports real appliances listen on (model.Appliance.Port).
const (
	RedisPort = 6379
	HTTPPort  = 80
)

// MaxAppliances is what ApplianceNet holds.
const MaxAppliances = 1 << 14

// AgentPort is the UDP port host agents listen on at their server's
// control address.
const AgentPort = 7471

// MaxVMs and MaxLinks are what the address plan holds (and interface
// names, with up to five digits).
const (
	MaxVMs   = 1 << 14
	MaxLinks = 1 << 14
)

// Depths of the emulated switch ports' drop-tail queues by default, as
// time at the link's rate on the wire (docs/testbed.md).
const (
	// QueueTime is the default: 8 ms, 1 MB at 1 Gbit/s. Real TCP shares
	// a link between connections as the simulator's fluid model does only
	// with buffers of this order here: with round trips of a few tens of
	// microseconds, a 1 ms queue let one connection against four fall to
	// nothing for seconds at a time (Pulsar Fig. 3's network part: the one
	// got 1-14% of the link over 10 s where the model gives 20%; with 8 ms,
	// 18-19%).
	QueueTime = 8 * time.Millisecond
	// LossQueueTime is the depth for mechanisms that react to losses
	// (mech.Capabilities.Losses): 1 ms, 125 KB at 1 Gbit/s, the order of
	// a datacenter switch's per-port buffer. Their congestion signal is a
	// loss: behind an 8 ms queue losses come in rare bursts, about one
	// loss event per second per pair, and ElasticSwitch's Rate Allocation
	// probes far above what the link carries between them (a tenant
	// guaranteed 600 Mbps got 477).
	LossQueueTime = time.Millisecond
)

// QueueTimeFor returns the default queue depth for a mechanism with
// these needs.
func QueueTimeFor(c mech.Capabilities) time.Duration {
	if c.Losses {
		return LossQueueTime
	}
	return QueueTime
}

// MinQueue is the smallest default queue, whatever the link's rate:
// one of the VMs' largest offload packets (64 KB) and as much again.
const MinQueue = 128 << 10

// QueueFor returns the drop-tail queue of a link direction of rate
// bits/s on the wire that holds d of it, at least MinQueue.
func QueueFor(rate float64, d time.Duration) int {
	q := int(rate * d.Seconds() / 8)
	return max(q, MinQueue)
}

// Plan is the emulated datacenter for one scenario: what Up creates. It is
// computed without touching the system (NewPlan).
type Plan struct {
	Prefix   string
	Scenario string
	// Scale multiplies every capacity and rate on the wire (link shapers,
	// pair limits, UDP rates); measurements are divided by it, so reports
	// are in the scenario's units.
	Scale float64
	// QueueBytes is every link direction's drop-tail queue when set; 0:
	// each link's own, QueueFor its rate and QueueTime (Shape.QueueBytes).
	QueueBytes uint32
	// Limiters: every VM that sends a declared pair has a pair limiter
	// (an HTB class per pair) on its interface's egress (see Options).
	Limiters bool
	// Schedulers: every server with VMs has two IFBs for per-VM
	// schedulers: TX receives what its VMs send, RX what arrives on its
	// links (see Options).
	Schedulers bool
	Nodes      []*NodePlan // servers and switches, in topology order
	VMs        []*VMPlan   // in scenario order
	Links      []*LinkPlan // physical links
	Pairs      []PairPlan  // declared VM pairs (the scenario's workloads)
	// Appliances are the scenario's appliances, each a real server in a
	// namespace of its own behind its server (see appliances.go).
	Appliances []*AppliancePlan
	// Requests are the request flows of the scenario's requests
	// workloads (a source VM to an appliance), with their routes.
	Requests []RequestPlan
	// Model is the scenario's declared model with what the testbed gives
	// each VM: its address and its device in its server (HostDev, whose
	// counters are the VM's). The host agents are configured from it.
	Model *model.Model

	nodeIdx map[string]int
	vmIdx   map[string]int
	appIdx  map[string]int
}

// NodePlan is a server (hypervisor) or a switch: a namespace that routes.
type NodePlan struct {
	Name   string
	Server bool
	NS     string
	// Routes to every VM not behind this node (main table), and the
	// default routes of the per-neighbour tables that Rules select for
	// pairs whose route differs from their destination's (ECMP).
	Routes []dataplane.Route
	Rules  []dataplane.Rule
	Shapes []Shape
	VMs    []int // servers: indices into Plan.VMs
	// Ctl is the control address of a server with VMs (in CtlNet, on its
	// loopback): where its host agent listens.
	Ctl netip.Addr
	// TXIFB and RXIFB are the scheduler IFBs of a server with VMs (with
	// Schedulers).
	TXIFB, RXIFB string
}

// Shape is one emulated link direction: the HTB shaper on the device that
// sends onto it.
type Shape struct {
	Dev  string
	Rate float64 // bits/s on the wire (scaled)
	// QueueBytes is the drop-tail queue after the shaper.
	QueueBytes uint32
	Link       int // topology link ID
}

// VMPlan is a VM: a namespace behind its server's namespace.
type VMPlan struct {
	Name, Tenant, Server string
	NS                   string
	Addr, Gateway        netip.Addr
	Dev                  string // in the VM
	HostDev              string // its peer in the server
	In, Out              float64
}

// AppliancePlan is a real appliance: a namespace behind its server's
// namespace, like a VM, running the appliance's server (redis-server for
// model kv, nginx for filestore).
type AppliancePlan struct {
	Name, Server, Model string
	NS                  string
	Addr, Gateway       netip.Addr
	Dev                 string // in the appliance's namespace
	HostDev             string // its peer in the server
	Port                int
	Protocol            string // model.ProtoRedis or model.ProtoHTTP
	// CPU is the share of one CPU its server may use: the appliance's
	// parallelism when below 1 (0: no limit; see cpulimit.go).
	CPU float64 `json:",omitempty"`
}

// Endpoint is where clients reach the appliance.
func (a *AppliancePlan) Endpoint() netip.AddrPort { return netip.AddrPortFrom(a.Addr, uint16(a.Port)) }

// RequestPlan is a request flow: a VM's requests to an appliance during a
// workload's phases, with the routes the simulator gives it (Fwd: the VM's
// server to the appliance's, Rev: back).
type RequestPlan struct {
	Tenant, Workload, Src, Appliance string
	Fwd, Rev                         []int
}

// LinkPlan is a physical link: a veth pair between two node namespaces.
type LinkPlan struct {
	A, B         string
	DevA, DevB   string
	AddrA, AddrB netip.Addr
	Capacity     float64 // bits/s per direction, unscaled
	AB, BA       int     // topology link IDs
}

// PairPlan is a declared VM pair with its route (topology link IDs).
type PairPlan struct {
	Tenant, Src, Dst string
	Links            []int
}

// Node returns the named node's plan.
func (p *Plan) Node(name string) (*NodePlan, bool) {
	i, ok := p.nodeIdx[name]
	if !ok {
		return nil, false
	}
	return p.Nodes[i], true
}

// VM returns the named VM's plan.
func (p *Plan) VM(name string) (*VMPlan, bool) {
	i, ok := p.vmIdx[name]
	if !ok {
		return nil, false
	}
	return p.VMs[i], true
}

// Appliance returns the named appliance's plan.
func (p *Plan) Appliance(name string) (*AppliancePlan, bool) {
	i, ok := p.appIdx[name]
	if !ok {
		return nil, false
	}
	return p.Appliances[i], true
}

// NewPrefix returns a fresh random run prefix: "bh" and five letters or
// digits.
func NewPrefix() string { return dataplane.RandomPrefix("bh") }

var safeName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`)

// nsName names a namespace of the run: PREFIX-n-NODE, PREFIX-v-VM,
// PREFIX-a-APPLIANCE (the
// index instead of a name that would not be a safe file name).
func nsName(prefix, kind, name string, idx int) string {
	if !safeName.MatchString(name) {
		name = "_" + strconv.Itoa(idx)
	}
	return dataplane.NSPrefix(prefix) + kind + "-" + name
}

func addrAt(base netip.Prefix, off int) netip.Addr {
	a := base.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(off)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// PlanOptions are the choices of NewPlan.
type PlanOptions struct {
	Prefix     string        // required (NewPrefix makes one)
	Scale      float64       // default 1
	QueueBytes int           // 0: each link QueueFor its rate on the wire and QueueTime
	QueueTime  time.Duration // 0: the package's QueueTime
	Limiters   bool
	Schedulers bool
}

// NewPlan computes the emulated datacenter of a validated scenario on its
// topology.
func NewPlan(sc *spec.Scenario, tp *topo.Topology, o PlanOptions) (*Plan, error) {
	if err := dataplane.ValidPrefix(o.Prefix); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	if !(o.Scale > 0) || o.Scale > 100 {
		return nil, fmt.Errorf("testbed: scale %v: want 0 < scale <= 100", o.Scale)
	}
	if o.QueueTime == 0 {
		o.QueueTime = QueueTime
	}
	if o.QueueTime < 0 || o.QueueTime > time.Second {
		return nil, fmt.Errorf("testbed: queue time %v: want up to 1s", o.QueueTime)
	}
	if o.QueueBytes != 0 && (o.QueueBytes < 3000 || o.QueueBytes > 1<<30) {
		return nil, fmt.Errorf("testbed: queue %d bytes: want 3000 to 1 GiB", o.QueueBytes)
	}
	p := &Plan{
		Prefix: o.Prefix, Scenario: sc.Name, Scale: o.Scale, QueueBytes: uint32(o.QueueBytes), Limiters: o.Limiters,
		Schedulers: o.Schedulers, nodeIdx: map[string]int{}, vmIdx: map[string]int{}, appIdx: map[string]int{},
	}
	for _, n := range tp.Nodes {
		kind := "n"
		np := &NodePlan{Name: n.Name, Server: n.Kind == topo.Server, NS: nsName(o.Prefix, kind, n.Name, n.ID)}
		p.nodeIdx[n.Name] = len(p.Nodes)
		p.Nodes = append(p.Nodes, np)
	}
	// Physical links: the direction with the lower ID first.
	for _, l := range tp.Links {
		if l.ID > l.Reverse {
			continue
		}
		j := len(p.Links)
		if j >= MaxLinks {
			return nil, fmt.Errorf("testbed: more than %d links", MaxLinks)
		}
		js := strconv.Itoa(j)
		p.Links = append(p.Links, &LinkPlan{
			A: tp.Nodes[l.From].Name, B: tp.Nodes[l.To].Name,
			DevA: o.Prefix + "l" + js + "a", DevB: o.Prefix + "l" + js + "b",
			AddrA: addrAt(LinkNet, 2*j), AddrB: addrAt(LinkNet, 2*j+1),
			Capacity: l.Capacity, AB: l.ID, BA: l.Reverse,
		})
	}
	for _, lp := range p.Links {
		a, _ := p.Node(lp.A)
		b, _ := p.Node(lp.B)
		rate := lp.Capacity * o.Scale
		q := uint32(o.QueueBytes)
		if q == 0 {
			q = uint32(min(QueueFor(rate, o.QueueTime), 1<<30))
		}
		a.Shapes = append(a.Shapes, Shape{Dev: lp.DevA, Rate: rate, QueueBytes: q, Link: lp.AB})
		b.Shapes = append(b.Shapes, Shape{Dev: lp.DevB, Rate: rate, QueueBytes: q, Link: lp.BA})
	}
	p.Model = sc.Model()
	p.Model.Hosts = tp.Hosts() // access links in the scenario's units, as mechanisms see rates
	for ti := range p.Model.Tenants {
		t := &p.Model.Tenants[ti]
		for vi := range t.VMs {
			v := &t.VMs[vi]
			i := len(p.VMs)
			if i >= MaxVMs {
				return nil, fmt.Errorf("testbed: more than %d VMs", MaxVMs)
			}
			srv, ok := p.Node(v.Host)
			if !ok || !srv.Server {
				return nil, fmt.Errorf("testbed: VM %q: unknown server %q", v.Name, v.Host)
			}
			if _, dup := p.vmIdx[v.Name]; dup {
				return nil, fmt.Errorf("testbed: duplicate VM %q", v.Name)
			}
			is := strconv.Itoa(i)
			p.vmIdx[v.Name] = i
			srv.VMs = append(srv.VMs, i)
			vp := &VMPlan{
				Name: v.Name, Tenant: t.Name, Server: v.Host, NS: nsName(o.Prefix, "v", v.Name, i),
				Addr: addrAt(VMNet, 2*i+1), Gateway: addrAt(VMNet, 2*i),
				Dev: o.Prefix + "v" + is, HostDev: o.Prefix + "v" + is + "h",
				In: v.In, Out: v.Out,
			}
			p.VMs = append(p.VMs, vp)
			v.Addrs, v.Interface = []netip.Addr{vp.Addr}, vp.HostDev
		}
	}
	if err := p.planAppliances(sc, tp); err != nil {
		return nil, err
	}
	ctl := 0
	for _, np := range p.Nodes {
		if !np.Server || len(np.VMs) == 0 {
			continue
		}
		if ctl >= 1<<16-2 {
			return nil, fmt.Errorf("testbed: more than %d servers with VMs", 1<<16-2)
		}
		ctl++
		np.Ctl = addrAt(CtlNet, ctl)
		if o.Schedulers {
			np.TXIFB, np.RXIFB = o.Prefix+"tx", o.Prefix+"rx"
		}
	}
	seen := map[[2]string]bool{}
	for _, w := range sc.Workloads {
		for _, pr := range w.Pairs() {
			if seen[pr] {
				continue
			}
			seen[pr] = true
			s, ok1 := p.VM(pr[0])
			d, ok2 := p.VM(pr[1])
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("testbed: workload %q: pair %s->%s: unknown VM", w.Name, pr[0], pr[1])
			}
			sn, _ := tp.Node(s.Server)
			dn, _ := tp.Node(d.Server)
			p.Pairs = append(p.Pairs, PairPlan{Tenant: w.Tenant, Src: pr[0], Dst: pr[1],
				Links: tp.Route(sn.ID, dn.ID, topo.PairHash(sc.Seed, pr[0], pr[1]))})
		}
	}
	if err := p.route(tp, sc.Seed); err != nil {
		return nil, err
	}
	return p, nil
}

// devOn returns node's device and address on the physical link of the
// topology link l, and the address of the far end.
func (p *Plan) devOn(tp *topo.Topology, l int) (dev string, far netip.Addr, err error) {
	lk := tp.Links[l]
	id := min(l, lk.Reverse)
	for _, lp := range p.Links {
		if lp.AB != id {
			continue
		}
		if lk.ID == lp.AB {
			return lp.DevA, lp.AddrB, nil
		}
		return lp.DevB, lp.AddrA, nil
	}
	return "", netip.Addr{}, fmt.Errorf("testbed: link %s not planned", lk.Name)
}

// endpoint is a destination of routes: a VM (index < len(VMs)) or an
// appliance (len(VMs) + its index).
func (p *Plan) endpoint(e int) (name, server string, addr netip.Addr) {
	if e < len(p.VMs) {
		v := p.VMs[e]
		return v.Name, v.Server, v.Addr
	}
	a := p.Appliances[e-len(p.VMs)]
	return a.Name, a.Server, a.Addr
}

// route computes every node's routes: to each VM and appliance along a
// shortest path; where declared pairs or request flows toward one of them
// take different next hops from one node (ECMP), the most common next hop
// is its route and the others get policy rules (by source address) that
// select a per-neighbour table. A request flow's requests follow its Fwd
// route and the appliance's replies its Rev route.
func (p *Plan) route(tp *topo.Topology, seed int64) error {
	type key struct{ node, dst int }
	// next hops (topology link IDs) wanted by declared pairs and request
	// flows, by source endpoint
	want := map[key]map[int]int{} // → source endpoint → link
	add := func(src, dst int, links []int) {
		for _, l := range links {
			k := key{tp.Links[l].From, dst}
			if want[k] == nil {
				want[k] = map[int]int{}
			}
			want[k][src] = l
		}
	}
	for _, pr := range p.Pairs {
		add(p.vmIdx[pr.Src], p.vmIdx[pr.Dst], pr.Links)
	}
	for _, rq := range p.Requests {
		vm, app := p.vmIdx[rq.Src], len(p.VMs)+p.appIdx[rq.Appliance]
		add(vm, app, rq.Fwd)
		add(app, vm, rq.Rev)
	}
	n := len(p.VMs) + len(p.Appliances)
	for ni, np := range p.Nodes {
		tables := map[int]int{} // link → table
		var tableOrder []int
		for e := 0; e < n; e++ {
			name, server, addr := p.endpoint(e)
			sn, _ := tp.Node(server)
			if sn.ID == ni {
				continue // behind this server: the connected /31
			}
			byLink := want[key{ni, e}]
			def := -1
			if len(byLink) > 0 {
				count := map[int]int{}
				for _, l := range byLink {
					count[l]++
				}
				for l, c := range count {
					if def < 0 || c > count[def] || c == count[def] && l < def {
						def = l
					}
				}
			} else {
				r := tp.Route(ni, sn.ID, topo.PairHash(seed, np.Name, name))
				if len(r) == 0 {
					return fmt.Errorf("testbed: no route from %s to %s on %s", np.Name, name, server)
				}
				def = r[0]
			}
			dev, via, err := p.devOn(tp, def)
			if err != nil {
				return err
			}
			np.Routes = append(np.Routes, dataplane.Route{Dst: netip.PrefixFrom(addr, 32), Via: via, Dev: dev})
			srcs := make([]int, 0, len(byLink))
			for s, l := range byLink {
				if l != def {
					srcs = append(srcs, s)
				}
			}
			sort.Ints(srcs)
			for _, s := range srcs {
				l := byLink[s]
				t, ok := tables[l]
				if !ok {
					t = 100 + len(tableOrder)
					tables[l] = t
					tableOrder = append(tableOrder, l)
				}
				_, _, saddr := p.endpoint(s)
				np.Rules = append(np.Rules, dataplane.Rule{
					Src: netip.PrefixFrom(saddr, 32), Dst: netip.PrefixFrom(addr, 32),
					Table: t, Priority: 1000 + len(np.Rules),
				})
			}
		}
		// control addresses of the other servers with VMs
		for _, sp := range p.Nodes {
			if !sp.Ctl.IsValid() || sp == np {
				continue
			}
			sn, _ := tp.Node(sp.Name)
			r := tp.Route(ni, sn.ID, topo.PairHash(seed, np.Name, sp.Name))
			if len(r) == 0 {
				return fmt.Errorf("testbed: no route from %s to server %s", np.Name, sp.Name)
			}
			dev, via, err := p.devOn(tp, r[0])
			if err != nil {
				return err
			}
			np.Routes = append(np.Routes, dataplane.Route{Dst: netip.PrefixFrom(sp.Ctl, 32), Via: via, Dev: dev})
		}
		for _, l := range tableOrder {
			dev, via, err := p.devOn(tp, l)
			if err != nil {
				return err
			}
			np.Routes = append(np.Routes, dataplane.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: via, Dev: dev, Table: tables[l]})
		}
	}
	return nil
}

// Namespaces lists the plan's namespaces: nodes, VMs, then appliances.
func (p *Plan) Namespaces() []string {
	out := make([]string, 0, len(p.Nodes)+len(p.VMs)+len(p.Appliances))
	for _, n := range p.Nodes {
		out = append(out, n.NS)
	}
	for _, v := range p.VMs {
		out = append(out, v.NS)
	}
	for _, a := range p.Appliances {
		out = append(out, a.NS)
	}
	return out
}

// Pattern returns the declared pairs (the scenario's workloads) as the
// mechanisms name them.
func (p *Plan) Pattern() []mech.PairID {
	out := make([]mech.PairID, len(p.Pairs))
	for i, pr := range p.Pairs {
		out[i] = mech.PairID{Src: pr.Src, Dst: pr.Dst}
	}
	return out
}

// pairIndex maps a declared pair to its index in Pairs.
func (p *Plan) pairIndex() map[[2]string]int {
	m := make(map[[2]string]int, len(p.Pairs))
	for i, pr := range p.Pairs {
		m[[2]string{pr.Src, pr.Dst}] = i
	}
	return m
}

// dpPair is the data-plane pair (addresses) of a declared pair.
func (p *Plan) dpPair(src, dst string) (dataplane.Pair, error) {
	s, ok1 := p.VM(src)
	d, ok2 := p.VM(dst)
	if !ok1 || !ok2 {
		return dataplane.Pair{}, errors.New("testbed: pair " + src + "->" + dst + ": unknown VM")
	}
	return dataplane.Pair{Src: s.Addr, Dst: d.Addr}, nil
}
