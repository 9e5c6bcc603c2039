package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/topo"
	"google.golang.org/protobuf/proto"
)

// Bounds of the central controller's messages.
const (
	// maxReportFlows bounds the flows of one report.
	maxReportFlows = 100000
	// MaxActionAllocations is the most allocations one Actions message
	// carries; a host's step is split into parts beyond it.
	MaxActionAllocations = 10000
	// centralIdle is how often the leader looks for a central mechanism
	// in the declared cluster when none runs.
	centralIdle = time.Second
	// staleReports: a host's report older than this many periods is not
	// used.
	staleReports = 3
)

// CentralStats describe the leader's central controller (mech.Central:
// Pulsar's controller) and its latest step.
type CentralStats struct {
	// Mechanism is the cluster's mechanism; Running says whether it has a
	// central controller that runs here.
	Mechanism string
	Running   bool
	// Revision is the store revision of the model the controller runs on.
	Revision int64
	// Builds counts controllers built (the first and every rebuild when
	// the model changed and the controller could not take it),
	// Updates models handed to the running controller.
	Builds, Updates uint64
	Steps           uint64
	// Failures counts steps whose actions the driver core refused, and
	// builds that failed.
	Failures uint64
	// Hosts, Flows and VMs are what the latest step observed.
	Hosts, Flows, VMs int
	// Rejected counts flows and VM observations left out: a source not on
	// the reporting host, an unknown VM or appliance, a malformed vector
	// or path.
	Rejected uint64
	// Step is the latest mechanism step (drive.Controller.Step);
	// Interval the latest whole interval: gathering the reports, the
	// step, splitting and sending the actions.
	Step, Interval time.Duration
	// Sent counts Actions messages queued to agents, Dropped those not
	// queued (an agent not reading its session), BytesDown their encoded
	// size (proto.Size of the ControllerMessage), Allocations the flow
	// allocations in them.
	Sent, Dropped, BytesDown, Allocations uint64
}

// central runs a cluster's central controller while this controller leads.
type central struct {
	mu      sync.Mutex
	reports map[string]hostReport // the latest report of each host
	stats   CentralStats
	// estimates are the latest step's capacity estimates by appliance
	// (mech.ControllerActions.Estimates, tokens/s), for the metrics.
	estimates map[string]float64

	// Owned by the loop (runCentral).
	rev    int64             // the store revision last looked at
	digest [sha256.Size]byte // of the model and mechanism built
	drv    *drive.Controller
	mkey   string // the mechanism's name and parameters the controller was built with
	seed   int64
	tp     *topo.Topology
	vms    map[string]vmInfo
	apps   map[string]appInfo
	paths  map[mech.FlowID][]mech.PathElem
	start  time.Time
	last   time.Time
	seq    uint64
}

type hostReport struct {
	r  *controlpb.Report
	at time.Time
}

type vmInfo struct {
	tenant, host string
	node         int
}

type appInfo struct {
	res  int // resource index
	node int // the server behind which it sits; -1: in every hypervisor
}

func newCentral() *central { return &central{reports: map[string]hostReport{}} }

// CentralStats returns the state of the central controller.
func (c *Controller) CentralStats() CentralStats {
	c.cen.mu.Lock()
	defer c.cen.mu.Unlock()
	return c.cen.stats
}

// observe keeps a host's report, within its bounds (checkReport), for
// the central controller's next step, which checks each flow and VM
// observation against the model it runs on (flowObs).
func (cen *central) observe(host string, r *controlpb.Report, now time.Time) {
	if len(r.Flows) == 0 && len(r.VmObs) == 0 {
		return
	}
	cen.mu.Lock()
	cen.reports[host] = hostReport{r: r, at: now}
	cen.mu.Unlock()
}

// runCentral runs the cluster's central controller, if its mechanism has
// one, until ctx ends (leadership lost): it builds the controller from
// the declared model through the driver core, steps it every period with
// the agents' latest reports and sends each source host its flows'
// allocations. A changed model is handed to the controller
// (drive.Controller.Update), or a new controller built when it cannot
// take one.
func (c *Controller) runCentral(ctx context.Context) {
	cen := c.cen
	cen.mu.Lock()
	cen.reports = map[string]hostReport{}
	cen.stats = CentralStats{}
	cen.estimates = nil
	cen.mu.Unlock()
	defer func() {
		cen.mu.Lock()
		cen.estimates = nil // a follower estimates nothing
		cen.mu.Unlock()
	}()
	cen.drv, cen.rev, cen.digest, cen.start, cen.last = nil, 0, [sha256.Size]byte{}, c.cfg.Now(), time.Time{}
	var lastErr string
	t := time.NewTimer(0)
	defer t.Stop()
	next := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.refreshCentral(ctx); err != nil && ctx.Err() == nil {
			cen.rev = 0 // look again at the next tick
			if err.Error() != lastErr {
				c.log.Warn("central controller", "err", err)
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
		wait := centralIdle
		if cen.drv != nil {
			c.centralStep()
			wait = cen.drv.Period()
		}
		// Steps at a steady rate: the next one a period after this one
		// began (at once if the step took longer).
		next = next.Add(wait)
		if now := time.Now(); next.Before(now) {
			next = now
		}
		t.Reset(time.Until(next))
	}
}

// refreshCentral builds or updates the controller when the declared
// model or mechanism changed.
func (c *Controller) refreshCentral(ctx context.Context) error {
	cen := c.cen
	if _, rev, err := c.cfg.Store.List(ctx, api.KindCluster); err != nil {
		return err
	} else if rev == cen.rev {
		return nil
	}
	snap, cl, err := c.cluster(ctx)
	if snap == nil {
		return err
	}
	cen.rev = snap.rev
	if err != nil {
		c.stopCentral("", snap.rev)
		return nil // nothing declared yet, or incomplete: no central controller
	}
	h := sha256.New()
	if err := json.NewEncoder(h).Encode([]any{cl.Model, cl.Spec.Mechanism, cl.Spec.Topology, cl.Spec.Seed}); err != nil {
		return fmt.Errorf("digest of the model: %w", err)
	}
	var digest [sha256.Size]byte
	h.Sum(digest[:0])
	if digest == cen.digest {
		return nil
	}
	m, err := all.New(cl.Spec.Mechanism.Name, cl.Spec.Mechanism.Params)
	if err != nil {
		return fmt.Errorf("mechanism %s: %w", cl.Spec.Mechanism.Name, err)
	}
	if _, ok := m.(mech.Central); !ok {
		c.stopCentral(m.Name(), snap.rev)
		cen.digest = digest
		return nil
	}
	links := drive.LinkResources(cl.Topology, 0, 0)
	res, err := place.MechReservations(scenarioOf(cl), cl.Topology)
	if err != nil {
		return fmt.Errorf("reservations: %w", err)
	}
	env := drive.ControllerEnv(cl.Model, links, res)
	pj, err := json.Marshal(cl.Spec.Mechanism.Params)
	if err != nil {
		return fmt.Errorf("mechanism parameters: %w", err)
	}
	mkey := m.Name() + "\x00" + string(pj)
	sameMech := cen.drv != nil && cen.mkey == mkey && cen.seed == cl.Spec.Seed && slices.Equal(cen.drv.Env().Resources[:len(links)], links)
	var updated bool
	if sameMech {
		switch err := cen.drv.Update(env); {
		case err == nil:
			updated = true
		case !errors.Is(err, drive.ErrStaticEnv):
			cen.count(func(s *CentralStats) { s.Failures++ })
			return fmt.Errorf("update: %w", err)
		}
	}
	if !updated {
		drv, err := drive.NewController(m, env)
		if err != nil {
			cen.count(func(s *CentralStats) { s.Failures++ })
			return err
		}
		cen.drv = drv
	}
	cen.digest, cen.mkey, cen.seed, cen.tp = digest, mkey, cl.Spec.Seed, cl.Topology
	if err := cen.index(cl, len(links)); err != nil {
		return err
	}
	cen.paths = map[mech.FlowID][]mech.PathElem{}
	cen.count(func(s *CentralStats) {
		s.Mechanism, s.Running, s.Revision = m.Name(), true, snap.rev
		if updated {
			s.Updates++
		} else {
			s.Builds++
		}
	})
	c.log.Info("central controller", "mechanism", m.Name(), "revision", snap.rev, "updated", updated,
		"resources", len(env.Resources), "vms", len(env.VMs))
	return nil
}

// index records the cluster's VMs and appliances for the controller's
// paths (nlinks: the resources before the appliances).
func (cen *central) index(cl *api.Cluster, nlinks int) error {
	cen.vms = map[string]vmInfo{}
	for _, v := range cl.Model.VMs() {
		n, _ := cl.Topology.Node(v.Host)
		cen.vms[v.Name] = vmInfo{tenant: v.Tenant, host: v.Host, node: n.ID}
	}
	cen.apps = map[string]appInfo{}
	for i, a := range cl.Model.Appliances {
		ai := appInfo{res: nlinks + i, node: -1}
		if !a.Hypervisor {
			n, ok := cl.Topology.Node(a.Server)
			if !ok {
				return fmt.Errorf("appliance %s: server %q is not in the topology", a.Name, a.Server)
			}
			ai.node = n.ID
		}
		cen.apps[a.Name] = ai
	}
	return nil
}

// stopCentral forgets the central controller (the cluster's mechanism
// has none).
func (c *Controller) stopCentral(mechanism string, rev int64) {
	c.cen.drv, c.cen.digest = nil, [sha256.Size]byte{}
	c.cen.count(func(s *CentralStats) {
		s.Mechanism, s.Running, s.Revision = mechanism, false, rev
		c.cen.estimates = nil
	})
}

func (cen *central) count(f func(*CentralStats)) {
	cen.mu.Lock()
	f(&cen.stats)
	cen.mu.Unlock()
}

// centralStep runs one control interval: the hosts' latest reports in,
// the checked actions out to the source hosts' agents.
func (c *Controller) centralStep() {
	cen := c.cen
	now := c.cfg.Now()
	per := cen.drv.Period()
	period := per
	if !cen.last.IsZero() {
		period = now.Sub(cen.last)
	}
	cen.last = now
	cen.mu.Lock()
	hosts := make([]string, 0, len(cen.reports))
	for h, hr := range cen.reports {
		if now.Sub(hr.at) > staleReports*per {
			delete(cen.reports, h)
			continue
		}
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	reports := make([]*controlpb.Report, len(hosts))
	for i, h := range hosts {
		reports[i] = cen.reports[h].r
	}
	cen.mu.Unlock()

	obs := &mech.ControllerObs{Now: now.Sub(cen.start), Period: period}
	var rejected uint64
	for i, r := range reports {
		for _, f := range r.Flows {
			fo, err := cen.flowObs(hosts[i], f)
			if err != nil {
				rejected++
				continue
			}
			obs.Flows = append(obs.Flows, fo)
		}
		for _, v := range r.VmObs {
			if vi, ok := cen.vms[v.Vm]; !ok || vi.host != hosts[i] {
				rejected++
				continue
			}
			obs.VMs = append(obs.VMs, mech.VMObs{VM: v.Vm, InArrival: v.InArrival, InRate: v.InRate, InDrops: v.InDrops,
				OutRate: v.OutRate, DropSrc: v.DropSrc, OutDemand: v.OutDemand, InDemand: v.InDemand})
		}
	}
	t0 := time.Now()
	act, err := cen.drv.Step(obs)
	stepTime := time.Since(t0)
	if err != nil {
		c.log.Warn("central controller step refused; nothing sent", "err", err)
		cen.count(func(s *CentralStats) { s.Failures++; s.Steps++; s.Rejected += rejected })
		return
	}
	sent, dropped, bytes, allocs := c.sendActions(&act)
	total := c.cfg.Now().Sub(now)
	cen.count(func(s *CentralStats) {
		cen.estimates = act.Estimates
		s.Steps++
		s.Hosts, s.Flows, s.VMs = len(hosts), len(obs.Flows), len(obs.VMs)
		s.Rejected += rejected
		s.Step, s.Interval = stepTime, total
		s.Sent += sent
		s.Dropped += dropped
		s.BytesDown += bytes
		s.Allocations += allocs
	})
}

// flowObs turns a reported flow of host into the mechanism's
// observation, checking that its source VM is on host.
func (cen *central) flowObs(host string, f *controlpb.FlowObs) (mech.FlowObs, error) {
	src, ok := cen.vms[f.Src]
	if !ok || src.host != host {
		return mech.FlowObs{}, fmt.Errorf("flow %s->%s: the source is not a VM of host %s", f.Src, f.Dst, host)
	}
	id := mech.FlowID{Src: f.Src, Dst: f.Dst}
	var path []mech.PathElem
	if len(f.Path) > 0 {
		var err error
		if path, err = cen.decodePath(f.Path); err != nil {
			return mech.FlowObs{}, fmt.Errorf("flow %s->%s: %w", f.Src, f.Dst, err)
		}
	} else {
		var err error
		if path, err = cen.path(id, src); err != nil {
			return mech.FlowObs{}, err
		}
	}
	fo := mech.FlowObs{Flow: id, Tenant: src.tenant, Path: path}
	n := len(path)
	var okAll = true
	vec := func(v []float32, zeroNil bool) []float64 {
		out, ok := expand(v, n, zeroNil)
		okAll = okAll && ok
		return out
	}
	fo.Used = vec(f.Used, false)
	fo.Backlog = vec(f.Backlog, false)
	fo.Queued = vec(f.Queued, false)
	fo.Outstanding = vec(f.Outstanding, false)
	fo.Allocation = vec(f.Allocation, true)
	if !okAll {
		return mech.FlowObs{}, fmt.Errorf("flow %s->%s: a vector is neither empty, one value nor one per path element (%d), or not finite and non-negative", f.Src, f.Dst, n)
	}
	return fo, nil
}

// expand decodes a compact vector for a path of n elements: empty is
// zeros (nil when zeroNil), one value is that value on every element.
func expand(v []float32, n int, zeroNil bool) ([]float64, bool) {
	if len(v) == 0 && zeroNil {
		return nil, true
	}
	if len(v) > 1 && len(v) != n {
		return nil, false
	}
	for _, x := range v {
		if !(x >= 0) || math.IsInf(float64(x), 1) {
			return nil, false
		}
	}
	out := make([]float64, n)
	for i := range out {
		var x float32
		switch len(v) {
		case 0:
		case 1:
			x = v[0]
		default:
			x = v[i]
		}
		out[i] = float64(x)
	}
	return out, true
}

// decodePath checks and unpacks a reported path.
func (cen *central) decodePath(p []uint32) ([]mech.PathElem, error) {
	res := cen.drv.Env().Resources
	out := make([]mech.PathElem, len(p))
	for i, x := range p {
		r, role := int(x>>2), mech.PathRole(x&3)
		if r >= len(res) || role > mech.Appliance || (role == mech.Appliance) != (res[r].Kind == mech.ApplianceResource) {
			return nil, fmt.Errorf("path element %d (resource %d, role %d) is not a resource in that role", i, r, role)
		}
		out[i] = mech.PathElem{Resource: r, Role: role}
	}
	return out, nil
}

// path is a flow's path as the controller routes it (routeFlow), kept
// for the flow.
func (cen *central) path(id mech.FlowID, src vmInfo) ([]mech.PathElem, error) {
	if p, ok := cen.paths[id]; ok {
		return p, nil
	}
	var to endpoint
	if dst, ok := cen.vms[id.Dst]; ok {
		to = endpoint{node: dst.node}
	} else if app, ok := cen.apps[id.Dst]; ok {
		to = endpoint{node: app.node, app: true, res: app.res}
	} else {
		return nil, fmt.Errorf("flow %s->%s: the destination is neither a VM nor an appliance", id.Src, id.Dst)
	}
	p := routeFlow(cen.tp, cen.seed, id, src.node, to)
	cen.paths[id] = p
	return p, nil
}

// endpoint is a flow's destination: a VM's server (node), or an
// appliance (app: its resource res, behind node, or in the hypervisor
// when node is -1).
type endpoint struct {
	node, res int
	app       bool
}

// routeFlow is the path the controller allocates a flow on, from the
// source VM's server: a VM pair on the route admission reserved on
// (topo.PairHash); a flow to an appliance forward to the appliance's
// server, the appliance, and back, on the hops the simulator and the
// testbed route it on (topo.ConnHash). Agents get the paths of their VMs'
// flows to appliances from it (appliancePaths), so that their enforcers
// charge and report on the elements the controller allocates.
func routeFlow(tp *topo.Topology, seed int64, id mech.FlowID, src int, to endpoint) []mech.PathElem {
	var p []mech.PathElem
	links := func(from, to int, a, b string, role mech.PathRole) {
		for _, l := range tp.Route(from, to, topo.PairHash(seed, a, b)) {
			p = append(p, mech.PathElem{Resource: l, Role: role})
		}
	}
	if !to.app {
		links(src, to.node, id.Src, id.Dst, mech.Forward)
		return p
	}
	// A request flow goes where the simulator and the testbed route it
	// (topo.ConnHash), each way.
	hop := func(from, to int, a, b string, role mech.PathRole) {
		for _, l := range tp.Route(from, to, topo.ConnHash(seed, a, b, 0)) {
			p = append(p, mech.PathElem{Resource: l, Role: role})
		}
	}
	if to.node >= 0 {
		hop(src, to.node, id.Src, id.Dst, mech.Forward)
	}
	p = append(p, mech.PathElem{Resource: to.res, Role: mech.Appliance})
	if to.node >= 0 {
		hop(to.node, src, id.Dst, id.Src, mech.Reverse)
	}
	return p
}

// appliancePaths are the paths of the flows from host's VMs to the real
// appliances (those with an address), packed as FlowObs.path packs them.
func appliancePaths(cl *api.Cluster, host string) []*controlpb.FlowPath {
	var vms []model.VM
	for _, v := range cl.Model.VMs() {
		if v.Host == host {
			vms = append(vms, v)
		}
	}
	return vmPaths(cl, vms)
}

// vmPaths are the paths of the flows from vms to the real appliances.
func vmPaths(cl *api.Cluster, vms []model.VM) []*controlpb.FlowPath {
	nlinks := len(cl.Topology.Links)
	var out []*controlpb.FlowPath
	for _, v := range vms {
		src, ok := cl.Topology.Node(v.Host)
		if !ok {
			continue
		}
		for i, a := range cl.Model.Appliances {
			if _, real := a.Endpoint(); !real {
				continue
			}
			to := endpoint{node: -1, res: nlinks + i, app: true}
			if n, ok := cl.Topology.Node(a.Server); ok {
				to.node = n.ID
			}
			p := routeFlow(cl.Topology, cl.Spec.Seed, mech.FlowID{Src: v.Name, Dst: a.Name}, src.ID, to)
			fp := &controlpb.FlowPath{Src: v.Name, Dst: a.Name, Path: make([]uint32, len(p))}
			for k, e := range p {
				fp.Path[k] = uint32(e.Resource)<<2 | uint32(e.Role)
			}
			out = append(out, fp)
		}
	}
	return out
}

// sendActions splits the actions by source host and queues them to the
// connected agents.
func (c *Controller) sendActions(act *mech.ControllerActions) (sent, dropped, bytes, allocs uint64) {
	cen := c.cen
	cen.seq++
	byHost := map[string][]*controlpb.FlowAllocation{}
	for _, a := range act.Allocations {
		src, ok := cen.vms[a.Flow.Src]
		if !ok {
			continue
		}
		byHost[src.host] = append(byHost[src.host], &controlpb.FlowAllocation{Src: a.Flow.Src, Dst: a.Flow.Dst, Rates: compact(a.Rates)})
	}
	defaults := map[string]map[string]float64{}
	for vm, r := range act.DefaultBySrc {
		if src, ok := cen.vms[vm]; ok {
			if defaults[src.host] == nil {
				defaults[src.host] = map[string]float64{}
			}
			defaults[src.host][vm] = r
		}
	}
	rev := c.CentralStats().Revision
	period := cen.drv.Period().Seconds()
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	for host, s := range c.rt.sessions {
		fa := byHost[host]
		for part := 0; part == 0 || len(fa) > 0; part++ {
			n := min(len(fa), MaxActionAllocations)
			a := &controlpb.Actions{Seq: cen.seq, Allocations: fa[:n], DefaultRate: act.DefaultRate, Part: uint32(part),
				Last: n == len(fa), Revision: rev, Period: period}
			if part == 0 {
				a.DefaultBySrc = defaults[host]
			}
			fa = fa[n:]
			m := &controlpb.ControllerMessage{Msg: &controlpb.ControllerMessage_Actions{Actions: a}}
			select {
			case s.send <- m:
				sent++
				bytes += uint64(proto.Size(m))
				allocs += uint64(n)
			default:
				dropped++
			}
		}
	}
	return sent, dropped, bytes, allocs
}

// compact encodes an allocation vector: one value when every element
// has the same.
func compact(r []float64) []float32 {
	if len(r) > 0 && !slices.ContainsFunc(r[1:], func(x float64) bool { return float32(x) != float32(r[0]) }) {
		return []float32{float32(r[0])}
	}
	out := make([]float32, len(r))
	for i, x := range r {
		out[i] = float32(x)
	}
	return out
}
