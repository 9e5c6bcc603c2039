package place

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
	"github.com/bulkhead-dc/bulkhead/units"
)

// Algorithm names a placement algorithm.
type Algorithm string

// Placement algorithms.
const (
	// Oktopus: the first group, in topology order, of the lowest layer
	// (server, rack, pod, whole tree) that can hold the tenant; its
	// subgroups filled greedily in order.
	Oktopus Algorithm = "oktopus"
	// QShare: every group of the lowest feasible layer is a candidate
	// with its least-bandwidth layout; the one with the lowest combined
	// bandwidth and queue-occupation cost wins (Alg. 1).
	QShare Algorithm = "qshare"
)

// Defaults of Options.
const (
	DefaultK     = 4 // shortest paths per server and root on random graphs
	DefaultSlots = 4 // VM slots per server (Oktopus's evaluation)
)

// tolerance is the relative slack of capacity checks, as in
// LinkReservation.Oversubscribed.
const tolerance = 1e-9

// Options configure a Placer.
type Options struct {
	Algorithm Algorithm // default Oktopus
	// Slots is the number of VM slots of every server (default
	// DefaultSlots).
	Slots int
	// Seed is the scenario seed that picks every VM pair's ECMP route
	// (default spec.DefaultSeed). Reservations sit on the routes the
	// simulator uses for a scenario with this seed.
	Seed int64
	// K is the number of shortest paths from a server to a candidate's
	// root explored on topologies that are not trees (default DefaultK).
	K int
	// BandwidthWeight gives QShare's weight α ∈ [0, 1] of the bandwidth
	// cost, 1−α going to the queue-occupation cost, from the datacenter
	// load in [0, 1] (the larger of the fractions of slots and of link
	// capacity reserved). nil means α = load: balance queues while the
	// datacenter is lightly loaded, save bandwidth when it fills up.
	BandwidthWeight func(load float64) float64
}

// Request asks for a tenant of len(VMs) VMs with hose guarantees.
type Request struct {
	Name string
	VMs  []VMRequest
	// WCS is the worst-case survival ratio in [0, 1): at least this
	// fraction of the VMs must survive the failure of any one server, so a
	// server holds at most ⌊N·(1−WCS)⌋ of them. 0 means no constraint.
	WCS float64
}

// VMRequest is one requested VM.
type VMRequest struct {
	Name    string  // default "<tenant>-<i>", i from 1
	In, Out float64 // hose guarantees, bits/s
}

// Uniform is a request for n VMs with the same hose (in, out bits/s).
func Uniform(name string, n int, in, out float64) Request {
	r := Request{Name: name, VMs: make([]VMRequest, n)}
	for i := range r.VMs {
		r.VMs[i] = VMRequest{In: in, Out: out}
	}
	return r
}

// PlacedVM is a VM with its server.
type PlacedVM struct {
	Name    string
	Server  string
	In, Out float64
}

// Placement is an admitted tenant: where its VMs are and what it reserves.
type Placement struct {
	Tenant string
	VMs    []PlacedVM // in request order
	// Layer is the layer of the chosen group (0 server, 1 rack/ToR, 2 pod,
	// ...; on graphs that are not trees, the radius in hops around Root);
	// -1 for a tenant reserved with its fixed placement.
	Layer int
	Root  string // the chosen group (its first top switch, "+n" more)
	// Candidates is the number of feasible groups at Layer that were
	// compared (QShare) or tried (Oktopus).
	Candidates int
	// BandwidthCost (bits/s) and QueueCost (the most tenants already on
	// any port the tenant uses) of the chosen layout, and the weight α of
	// the bandwidth cost in QShare's election.
	BandwidthCost float64
	QueueCost     int
	Alpha         float64
	// Compact is set when the tenant was placed by the fallback: the most
	// compact layout by slots, which the exact admission check accepted
	// although the per-layer search (which is conservative on multipath
	// topologies and for mixed guarantees) found nothing.
	Compact bool
	// Links are the tenant's reservations, in link-ID order.
	Links []LinkRate

	servers []int // node ID of every VM
}

// SpecTenant returns the tenant as a scenario tenant with its placement
// (per-VM in/out), so that a scenario can be built from a Placer's state.
func (pl *Placement) SpecTenant() spec.Tenant {
	t := spec.Tenant{Name: pl.Tenant, BestEffort: true}
	for _, v := range pl.VMs {
		t.VMs = append(t.VMs, spec.VM{Name: v.Name, Server: v.Server, In: units.Rate(v.In), Out: units.Rate(v.Out)})
		if v.In > 0 || v.Out > 0 {
			t.BestEffort = false
		}
	}
	return t
}

// Rejection says why a tenant was not admitted: the resource that ran out.
type Rejection struct {
	Tenant   string
	Resource string // "link" or "slots"
	// Link: the link that would be oversubscribed, what it would carry
	// with the tenant's most compact layout (bits/s), and its capacity.
	Link     string
	Load     float64
	Capacity float64
	// Slots: VMs requested, usable free slots, and the per-server limit
	// of the worst-case survival constraint (0 when there is none).
	Need, Free, PerServer int
}

// Error reads, for example,
//
//	tenant "t17": rejected: link "tor3->core" would carry 1.2 Gbps of 1 Gbps
//	tenant "t17": rejected: no server slots left (needs 30, 12 free)
func (r *Rejection) Error() string {
	msg := fmt.Sprintf("tenant %q: rejected: ", r.Tenant)
	if r.Resource == "link" {
		return msg + fmt.Sprintf("link %q would carry %s of %s", r.Link, units.FormatRate(r.Load), units.FormatRate(r.Capacity))
	}
	msg += fmt.Sprintf("no server slots left (needs %d, %d free", r.Need, r.Free)
	if r.PerServer > 0 {
		msg += fmt.Sprintf(", with at most %d per server for worst-case survival", r.PerServer)
	}
	return msg + ")"
}

// PortCount is the number of tenants with a reservation on a directed link,
// i.e. competing for the queues of its egress port.
type PortCount struct {
	Link    int
	Name    string
	Switch  bool // the port is on a switch (not a server's NIC)
	Tenants int
}

// Placer admits and places tenants one after the other on a topology with
// VM slots, keeping every link's hose reservations. It is not safe for
// concurrent use.
type Placer struct {
	top  *topo.Topology
	opt  Options
	adj  [][]int // links out of every node
	used []float64
	cnt  []int // tenants with a reservation on each link
	free []int // free slots per node (servers)

	total   int                   // slots
	tenants map[string]*Placement // current tenants
	order   []*Placement          // current tenants in admission order
	vmNames map[string]string     // VM → tenant

	hier *hierarchy // nil when the topology is not a (multi-rooted) tree
	tree treeState
	gen  *graphState
	calc hoseCalc
}

// NewPlacer returns a Placer for the topology with nothing reserved.
func NewPlacer(t *topo.Topology, opt Options) (*Placer, error) {
	switch opt.Algorithm {
	case "":
		opt.Algorithm = Oktopus
	case Oktopus, QShare:
	default:
		return nil, fmt.Errorf("place: unknown algorithm %q (use oktopus or qshare)", opt.Algorithm)
	}
	switch {
	case opt.Slots == 0:
		opt.Slots = DefaultSlots
	case opt.Slots < 0:
		return nil, fmt.Errorf("place: slots per server must be positive, got %d", opt.Slots)
	}
	if opt.Seed == 0 {
		opt.Seed = spec.DefaultSeed
	}
	switch {
	case opt.K == 0:
		opt.K = DefaultK
	case opt.K < 0:
		return nil, fmt.Errorf("place: k must be positive, got %d", opt.K)
	}
	p := &Placer{
		top:     t,
		opt:     opt,
		adj:     make([][]int, len(t.Nodes)),
		used:    make([]float64, len(t.Links)),
		cnt:     make([]int, len(t.Links)),
		free:    make([]int, len(t.Nodes)),
		tenants: map[string]*Placement{},
		vmNames: map[string]string{},
	}
	for _, l := range t.Links {
		p.adj[l.From] = append(p.adj[l.From], l.ID)
	}
	for _, n := range t.Nodes {
		if n.Kind == topo.Server {
			p.free[n.ID] = opt.Slots
			p.total += opt.Slots
		}
	}
	p.hier = buildHierarchy(t, p.adj)
	if p.hier == nil {
		p.gen = newGraphState(t)
	}
	return p, nil
}

// Topology returns the placer's topology.
func (p *Placer) Topology() *topo.Topology { return p.top }

// Hierarchical reports whether the topology is a tree or multi-rooted tree
// (searched layer by layer over its groups); otherwise it is searched as a
// random graph with k shortest paths.
func (p *Placer) Hierarchical() bool { return p.hier != nil }

// FreeSlots returns the free VM slots of the server (0 for unknown names).
func (p *Placer) FreeSlots(server string) int {
	n, ok := p.top.Node(server)
	if !ok || n.Kind != topo.Server {
		return 0
	}
	return p.free[n.ID]
}

// Load returns the fractions of VM slots and of link capacity (over all
// directed links) reserved.
func (p *Placer) Load() (slots, links float64) {
	usedSlots := 0
	for _, n := range p.top.Nodes {
		if n.Kind == topo.Server {
			usedSlots += p.opt.Slots - p.free[n.ID]
		}
	}
	var u, c float64
	for i, l := range p.top.Links {
		u += p.used[i]
		c += l.Capacity
	}
	if p.total > 0 {
		slots = float64(usedSlots) / float64(p.total)
	}
	if c > 0 {
		links = u / c
	}
	return slots, links
}

// Tenants returns the current tenants in admission order.
func (p *Placer) Tenants() []*Placement { return slices.Clone(p.order) }

// Tenant returns the named current tenant.
func (p *Placer) Tenant(name string) (*Placement, bool) {
	pl, ok := p.tenants[name]
	return pl, ok
}

// Links returns the reservations on every link that has some, in link-ID
// order, tenants in admission order.
func (p *Placer) Links() []LinkReservation {
	perLink := make([][]TenantReservation, len(p.top.Links))
	for _, pl := range p.order {
		for _, r := range pl.Links {
			perLink[r.Link] = append(perLink[r.Link], TenantReservation{Tenant: pl.Tenant, Rate: r.Rate})
		}
	}
	return linkReservations(p.top, perLink)
}

// Ports returns the number of tenants on every directed link, in link-ID
// order.
func (p *Placer) Ports() []PortCount {
	out := make([]PortCount, len(p.top.Links))
	for i, l := range p.top.Links {
		out[i] = PortCount{Link: i, Name: l.Name, Switch: p.top.Nodes[l.From].Kind == topo.Switch, Tenants: p.cnt[i]}
	}
	return out
}

// Reserved returns the total reserved on a link (bits/s).
func (p *Placer) Reserved(link int) float64 { return p.used[link] }

// Reserve admits a tenant with a fixed placement (a scenario's tenant):
// it fails, reserving nothing, if a VM name is taken, a server is unknown or
// out of slots, or a link would be oversubscribed.
func (p *Placer) Reserve(tn *spec.Tenant) error {
	if _, dup := p.tenants[tn.Name]; dup || tn.Name == "" {
		return fmt.Errorf("place: tenant %q: empty or already placed", tn.Name)
	}
	pl := &Placement{Tenant: tn.Name, Layer: -1}
	need := map[int]int{}
	var errs []error
	for i := range tn.VMs {
		v := &tn.VMs[i]
		n, ok := p.top.Node(v.Server)
		if !ok || n.Kind != topo.Server {
			errs = append(errs, fmt.Errorf("VM %q: server %q is not in the topology", v.Name, v.Server))
			continue
		}
		if t, taken := p.vmNames[v.Name]; taken {
			errs = append(errs, fmt.Errorf("VM %q: name already used by tenant %q", v.Name, t))
		}
		in, out := tn.Hose(v)
		if tn.BestEffort {
			in, out = 0, 0
		}
		need[n.ID]++
		pl.VMs = append(pl.VMs, PlacedVM{Name: v.Name, Server: v.Server, In: in, Out: out})
		pl.servers = append(pl.servers, n.ID)
	}
	for _, s := range slices.Sorted(maps.Keys(need)) {
		if k := need[s]; k > p.free[s] {
			errs = append(errs, fmt.Errorf("server %q: %d VMs, %d free slots", p.top.Nodes[s].Name, k, p.free[s]))
		}
	}
	if len(errs) == 0 {
		pl.Links = p.exact(pl)
		if l, load := p.worst(pl.Links); l >= 0 {
			errs = append(errs, fmt.Errorf("link %q would carry %s of %s", p.top.Links[l].Name,
				units.FormatRate(load), units.FormatRate(p.top.Links[l].Capacity)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("place: tenant %q: %w", tn.Name, errors.Join(errs...))
	}
	p.commit(pl)
	return nil
}

// Remove releases a current tenant's slots and reservations.
func (p *Placer) Remove(name string) error {
	pl, ok := p.tenants[name]
	if !ok {
		return fmt.Errorf("place: no tenant %q", name)
	}
	for _, s := range pl.servers {
		p.free[s]++
	}
	for _, r := range pl.Links {
		p.used[r.Link] -= r.Rate
		p.cnt[r.Link]--
		if p.cnt[r.Link] == 0 {
			p.used[r.Link] = 0 // no drift once a link is empty
		}
	}
	for _, v := range pl.VMs {
		delete(p.vmNames, v.Name)
	}
	delete(p.tenants, name)
	p.order = slices.DeleteFunc(p.order, func(x *Placement) bool { return x == pl })
	return nil
}

// Place admits the tenant if it fits: it returns the placement, already
// reserved, or a *Rejection naming the resource that ran out. Other errors
// are bad requests (a duplicate name, no VMs, negative guarantees...).
func (p *Placer) Place(r Request) (*Placement, error) {
	tr, err := p.newTenantReq(r)
	if err != nil {
		return nil, err
	}
	// Slots first: without them no layout exists.
	usable := 0
	for _, n := range p.top.Nodes {
		if n.Kind == topo.Server {
			usable += min(p.free[n.ID], tr.perServer)
		}
	}
	if usable < tr.n {
		rj := &Rejection{Tenant: r.Name, Resource: "slots", Need: tr.n, Free: usable}
		if tr.perServer < tr.n {
			rj.PerServer = tr.perServer
		}
		return nil, rj
	}
	var pl *Placement
	if p.hier != nil {
		pl = p.treePlace(tr)
	} else {
		pl = p.graphPlace(tr)
	}
	if pl == nil {
		var rj *Rejection
		pl, rj = p.compact(tr)
		if rj != nil {
			return nil, rj
		}
		pl.Compact = true
	}
	p.commit(pl)
	return pl, nil
}

// tenantReq is a validated request with the hose requirement of a group
// holding m of its VMs.
type tenantReq struct {
	name      string
	n         int
	vms       []VMRequest
	perServer int // most VMs on one server (WCS)
	// reqUp[m] bounds what a group holding m of the VMs needs on each of
	// its uplinks, whichever m: min(the m largest outs, the n−m largest
	// ins); reqDown[m] the same for its downlinks. Exact for uniform
	// hoses.
	reqUp, reqDown []float64
	maxUp, maxDown float64
}

func (p *Placer) newTenantReq(r Request) (*tenantReq, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("place: tenant %q: %s", r.Name, fmt.Sprintf(format, args...))
	}
	if r.Name == "" {
		return nil, errors.New("place: tenant without a name")
	}
	if _, dup := p.tenants[r.Name]; dup {
		return nil, bad("already placed")
	}
	n := len(r.VMs)
	if n == 0 {
		return nil, bad("no VMs")
	}
	if !(r.WCS >= 0 && r.WCS < 1) {
		return nil, bad("worst-case survival %v is not in [0, 1)", r.WCS)
	}
	tr := &tenantReq{name: r.Name, n: n, vms: slices.Clone(r.VMs), perServer: n}
	if r.WCS > 0 {
		tr.perServer = int(math.Floor(float64(n)*(1-r.WCS) + 1e-9))
		if tr.perServer < 1 {
			return nil, bad("worst-case survival %v with %d VMs allows no VM on any server", r.WCS, n)
		}
	}
	seen := map[string]bool{}
	ins := make([]float64, n)
	outs := make([]float64, n)
	for i := range tr.vms {
		v := &tr.vms[i]
		if v.Name == "" {
			v.Name = r.Name + "-" + strconv.Itoa(i+1)
		}
		if seen[v.Name] {
			return nil, bad("duplicate VM %q", v.Name)
		}
		seen[v.Name] = true
		if t, taken := p.vmNames[v.Name]; taken {
			return nil, bad("VM %q: name already used by tenant %q", v.Name, t)
		}
		for _, x := range []float64{v.In, v.Out} {
			if !(x >= 0) || math.IsInf(x, 0) {
				return nil, bad("VM %q: guarantee %v is not a non-negative rate", v.Name, x)
			}
		}
		ins[i], outs[i] = v.In, v.Out
	}
	top := func(xs []float64) []float64 { // top[j] = sum of the j largest
		slices.SortFunc(xs, func(a, b float64) int { return -cmpFloat(a, b) })
		s := make([]float64, n+1)
		for j, x := range xs {
			s[j+1] = s[j] + x
		}
		return s
	}
	oTop, iTop := top(outs), top(ins)
	tr.reqUp = make([]float64, n+1)
	tr.reqDown = make([]float64, n+1)
	for m := 0; m <= n; m++ {
		tr.reqUp[m] = min(oTop[m], iTop[n-m])
		tr.reqDown[m] = min(oTop[n-m], iTop[m])
		tr.maxUp = max(tr.maxUp, tr.reqUp[m])
		tr.maxDown = max(tr.maxDown, tr.reqDown[m])
	}
	return tr, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// headroom is what link l can still take.
func (p *Placer) headroom(l int) float64 {
	return p.top.Links[l].Capacity*(1+tolerance) - p.used[l]
}

// layout builds a placement from per-server VM counts, VMs in request
// order filling the servers in the order given.
func (p *Placer) layout(tr *tenantReq, servers, counts []int) *Placement {
	pl := &Placement{Tenant: tr.name, VMs: make([]PlacedVM, 0, tr.n), servers: make([]int, 0, tr.n)}
	i := 0
	for k, s := range servers {
		for range counts[k] {
			v := tr.vms[i]
			pl.VMs = append(pl.VMs, PlacedVM{Name: v.Name, Server: p.top.Nodes[s].Name, In: v.In, Out: v.Out})
			pl.servers = append(pl.servers, s)
			i++
		}
	}
	return pl
}

// exact computes the placement's reservations on the routes the simulator
// uses.
func (p *Placer) exact(pl *Placement) []LinkRate {
	vms := make([]VMHose, len(pl.VMs))
	for i, v := range pl.VMs {
		vms[i] = VMHose{Name: v.Name, Server: pl.servers[i], In: v.In, Out: v.Out}
	}
	var out []LinkRate
	p.calc.tenant(p.top, p.opt.Seed, vms, func(l int, r float64) {
		out = append(out, LinkRate{Link: l, Name: p.top.Links[l].Name, Rate: r})
	})
	return out
}

// worst returns the link that the rates would oversubscribe the most
// (relative to capacity) and what it would carry, or -1.
func (p *Placer) worst(rates []LinkRate) (int, float64) {
	best, load, ratio := -1, 0.0, 0.0
	for _, r := range rates {
		if r.Rate <= p.headroom(r.Link) {
			continue
		}
		l := p.used[r.Link] + r.Rate
		if x := l / p.top.Links[r.Link].Capacity; best < 0 || x > ratio {
			best, load, ratio = r.Link, l, x
		}
	}
	return best, load
}

// fits computes the placement's exact reservations and reports whether they
// fit.
func (p *Placer) fits(pl *Placement) bool {
	pl.Links = p.exact(pl)
	l, _ := p.worst(pl.Links)
	return l < 0
}

func (p *Placer) commit(pl *Placement) {
	for _, s := range pl.servers {
		p.free[s]--
	}
	for _, r := range pl.Links {
		p.used[r.Link] += r.Rate
		p.cnt[r.Link]++
	}
	for _, v := range pl.VMs {
		p.vmNames[v.Name] = pl.Tenant
	}
	p.tenants[pl.Tenant] = pl
	p.order = append(p.order, pl)
}

// alpha is QShare's weight of the bandwidth cost at the current load.
func (p *Placer) alpha() float64 {
	s, l := p.Load()
	load := max(s, l)
	a := load
	if p.opt.BandwidthWeight != nil {
		a = p.opt.BandwidthWeight(load)
	}
	if !(a >= 0) {
		return 0
	}
	return min(a, 1)
}

// candidate is one feasible layout compared by QShare's election: its
// placement, or (built only if it is tried) its per-server counts.
type candidate struct {
	pl              *Placement
	servers, counts []int
	layer           int
	root            string
	bandwidth       float64 // C_B
	queues          int     // C_Q
	freeAfter       int     // free slots left in the group (best fit breaks ties)
}

// elect orders the candidates by QShare's combined cost
// α·C_B/max C_B + (1−α)·C_Q/max C_Q, then by C_B, C_Q, fewer free slots left
// (best fit), then topology order.
func elect(cands []candidate, alpha float64) {
	maxB, maxQ := 0.0, 0
	for _, c := range cands {
		maxB = max(maxB, c.bandwidth)
		maxQ = max(maxQ, c.queues)
	}
	cost := func(c candidate) float64 {
		x := 0.0
		if maxB > 0 {
			x += alpha * c.bandwidth / maxB
		}
		if maxQ > 0 {
			x += (1 - alpha) * float64(c.queues) / float64(maxQ)
		}
		return x
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if c := cmpFloat(cost(a), cost(b)); c != 0 {
			return c
		}
		if c := cmpFloat(a.bandwidth, b.bandwidth); c != 0 {
			return c
		}
		if a.queues != b.queues {
			return a.queues - b.queues
		}
		return a.freeAfter - b.freeAfter
	})
}
