package mechtest

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/pulsar"
)

// controllerState is the controller, its environment, its clock and what
// the enforcers have in force.
type controllerState struct {
	env     mech.ControllerEnv
	resIdx  map[string]int
	routes  map[mech.FlowID][]mech.PathElem
	c       mech.Controller
	now     time.Duration
	stepped bool
	// Allocations in force (absent: the flow runs at the default rate)
	// and the default rate last announced.
	allocs      map[mech.FlowID][]float64
	defaultRate float64
	defaultSet  bool
	// paths are the flows' paths as last observed, to label allocations.
	paths map[mech.FlowID][]mech.PathElem
}

// cmdController builds the controller of the mechanism (a mech.Central)
// over the env's VMs and the resources, VDCs, reservations and routes of
// its input lines:
//
//	link h1/up 1000 [queues=4] [maxweight=8]
//	appliance kv [cap=1000] [min=500] [max=2000]
//	vdc A [fixed] [policy=drf] [gweight=2] [sla=0.1] [app=kv:200[:400]]... [weight=a1->kv:2]...
//	reserve A h1/up 450Mbps
//	route a1->kv h1/up kv h1/down:rev
func (h *Harness) cmdController(args *kv, lines []line) (string, error) {
	if err := args.done(); err != nil {
		return "", err
	}
	if h.mech == nil {
		return "", args.l.errorf("controller needs a mechanism first")
	}
	if h.ctl != nil {
		return "", args.l.errorf("there is already a controller (use reset to start over)")
	}
	central, ok := h.mech.(mech.Central)
	if !ok {
		return "", args.l.errorf("mechanism %s has no controller", h.mech.Name())
	}
	cs := &controllerState{
		resIdx: map[string]int{},
		routes: map[mech.FlowID][]mech.PathElem{},
		allocs: map[mech.FlowID][]float64{},
		paths:  map[mech.FlowID][]mech.PathElem{},
	}
	cs.env.VMs = slices.Clone(h.vms)
	var routeLines []*line
	for i := range lines {
		l := &lines[i]
		f := l.fields
		switch f[0] {
		case "link":
			if len(f) < 3 {
				return "", l.errorf("expected link ID CAPACITY [queues=N] [maxweight=N]")
			}
			c, err := parseNum(f[2])
			if err != nil {
				return "", l.errorf("capacity: %v", err)
			}
			k := parseKV(l, f[3:])
			r := mech.ResourceInfo{ID: f[1], Kind: mech.LinkResource, Capacity: c,
				Queues: int(k.num("queues", 0)), MaxWeight: int(k.num("maxweight", 0))}
			if err := k.done(); err != nil {
				return "", err
			}
			if err := cs.addResource(l, r); err != nil {
				return "", err
			}
		case "appliance":
			if len(f) < 2 {
				return "", l.errorf("expected appliance ID [cap=C] [min=C] [max=C]")
			}
			k := parseKV(l, f[2:])
			r := mech.ResourceInfo{ID: f[1], Kind: mech.ApplianceResource,
				Capacity: k.num("cap", 0), CapacityMin: k.num("min", 0), CapacityMax: k.num("max", 0)}
			if err := k.done(); err != nil {
				return "", err
			}
			if err := cs.addResource(l, r); err != nil {
				return "", err
			}
		case "vdc":
			v, err := parseVDC(l)
			if err != nil {
				return "", err
			}
			cs.env.VDCs = append(cs.env.VDCs, v)
		case "reserve":
			if len(f) != 4 {
				return "", l.errorf("expected reserve TENANT LINK RATE")
			}
			r, ok := cs.resIdx[f[2]]
			if !ok {
				return "", l.errorf("unknown resource %s (declare it first)", f[2])
			}
			x, err := parseRate(f[3])
			if err != nil {
				return "", l.errorf("%v", err)
			}
			cs.env.Reservations = append(cs.env.Reservations, mech.Reservation{Tenant: f[1], Resource: r, Rate: x})
		case "route":
			routeLines = append(routeLines, l)
		default:
			return "", l.errorf("unknown line %q (known: link, appliance, vdc, reserve, route)", f[0])
		}
	}
	for _, l := range routeLines {
		if len(l.fields) < 3 {
			return "", l.errorf("expected route SRC->DST RESOURCE[:fwd|:rev|:app]...")
		}
		src, dst, err := parsePair(l.fields[1])
		if err != nil {
			return "", l.errorf("%v", err)
		}
		path, err := cs.parsePath(l, l.fields[2:])
		if err != nil {
			return "", err
		}
		id := mech.FlowID{Src: src, Dst: dst}
		if _, dup := cs.routes[id]; dup {
			return "", l.errorf("route of %s given twice", l.fields[1])
		}
		cs.routes[id] = path
	}
	c, err := central.NewController(cs.env)
	if err != nil {
		return "error: " + err.Error(), nil
	}
	cs.c = c
	h.ctl = cs
	return fmt.Sprintf("%s: period %s", h.mech.Name(), durString(c.Period())), nil
}

func (cs *controllerState) addResource(l *line, r mech.ResourceInfo) error {
	if _, dup := cs.resIdx[r.ID]; dup {
		return l.errorf("resource %s declared twice", r.ID)
	}
	cs.resIdx[r.ID] = len(cs.env.Resources)
	cs.env.Resources = append(cs.env.Resources, r)
	return nil
}

// parsePath reads path elements: RESOURCE with an optional role (:fwd,
// :rev, :app); the default is fwd on links and app on appliances.
func (cs *controllerState) parsePath(l *line, elems []string) ([]mech.PathElem, error) {
	var path []mech.PathElem
	for _, e := range elems {
		id, role, hasRole := strings.Cut(e, ":")
		r, ok := cs.resIdx[id]
		if !ok {
			return nil, l.errorf("unknown resource %s", id)
		}
		pe := mech.PathElem{Resource: r, Role: mech.Forward}
		if cs.env.Resources[r].Kind == mech.ApplianceResource {
			pe.Role = mech.Appliance
		}
		if hasRole {
			switch role {
			case "fwd":
				pe.Role = mech.Forward
			case "rev":
				pe.Role = mech.Reverse
			case "app":
				pe.Role = mech.Appliance
			default:
				return nil, l.errorf("unknown role %q in %s (known: fwd, rev, app)", role, e)
			}
		}
		path = append(path, pe)
	}
	return path, nil
}

// parseVDC reads "vdc TENANT [fixed] [policy=P] [gweight=W] [sla=S]
// [app=ID:MIN[:MAX]]... [weight=SRC->DST:W]...".
func parseVDC(l *line) (mech.VDC, error) {
	if len(l.fields) < 2 {
		return mech.VDC{}, l.errorf("expected vdc TENANT ...")
	}
	v := mech.VDC{Tenant: l.fields[1]}
	var rest []string
	for _, f := range l.fields[2:] {
		key, val, _ := strings.Cut(f, "=")
		switch key {
		case "app":
			parts := strings.Split(val, ":")
			if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
				return v, l.errorf("expected app=ID:MIN[:MAX], got %q", f)
			}
			g := mech.ApplianceGuarantee{Appliance: parts[0]}
			var err error
			if g.Min, err = parseNum(parts[1]); err != nil {
				return v, l.errorf("app min: %v", err)
			}
			if len(parts) == 3 {
				if g.Max, err = parseNum(parts[2]); err != nil {
					return v, l.errorf("app max: %v", err)
				}
			}
			v.Appliances = append(v.Appliances, g)
		case "weight":
			i := strings.LastIndexByte(val, ':')
			if i < 0 {
				return v, l.errorf("expected weight=SRC->DST:W, got %q", f)
			}
			if _, _, err := parsePair(val[:i]); err != nil {
				return v, l.errorf("%v", err)
			}
			w, err := parseNum(val[i+1:])
			if err != nil {
				return v, l.errorf("weight: %v", err)
			}
			if v.Weights == nil {
				v.Weights = map[string]float64{}
			}
			v.Weights[val[:i]] = w
		default:
			rest = append(rest, f)
		}
	}
	k := parseKV(l, rest)
	v.Fixed = k.flag("fixed")
	v.Policy = k.str("policy", "")
	v.GlobalWeight = k.num("gweight", 0)
	v.SLA = k.num("sla", 0)
	return v, k.done()
}

// flowLine is one parsed flow observation of a cstep.
type flowLine struct {
	l        *line
	obs      mech.FlowObs
	usedLim  bool // used=alloc
	allocSet bool // alloc= given (none: nil)
}

// cmdCStep steps the controller: "cstep t=1s period=1s repeat=3 inspect"
// with input lines
//
//	flow a1->kv [tenant=A] [path=h1/up,kv,h1/down:rev] used=100,400,50|alloc
//	     [backlog=..] [queued=..] [outstanding=..] [alloc=..|none]
//	vm a1 in=.. out=.. outdemand=.. indemand=..
//
// Vectors are comma-separated, one entry per path element; path= defaults
// to the flow's route, alloc= to the allocation in force (none: the flow
// runs at the default rate), used=alloc is the allocation in force.
func (h *Harness) cmdCStep(args *kv, lines []line) (string, error) {
	cs := h.ctl
	if cs == nil {
		return "", args.l.errorf("cstep needs a controller first")
	}
	period := args.dur("period", cs.c.Period())
	inspect := args.flag("inspect")
	times, err := stepTimes(args, cs.now, cs.stepped, period)
	if err != nil {
		return "", err
	}
	if err := args.done(); err != nil {
		return "", err
	}
	var flows []flowLine
	var vms []mech.VMObs
	for i := range lines {
		l := &lines[i]
		switch l.fields[0] {
		case "flow":
			f, err := h.parseFlowLine(l)
			if err != nil {
				return "", err
			}
			flows = append(flows, f)
		case "vm":
			o, err := h.parseObsLine(l, "")
			if err != nil {
				return "", err
			}
			vms = append(vms, o.vmObs)
		default:
			return "", l.errorf("unknown line %q (known: flow, vm)", l.fields[0])
		}
	}
	var r repeatWriter
	for _, now := range times {
		var w writer
		obs := &mech.ControllerObs{Now: now, Period: period, VMs: slices.Clone(vms)}
		for _, f := range flows {
			o := f.obs
			o.Path = slices.Clone(o.Path)
			if !f.allocSet {
				o.Allocation = slices.Clone(cs.allocs[o.Flow])
			}
			if f.usedLim {
				used, err := cs.inForce(f.l, o.Flow, len(o.Path))
				if err != nil {
					return "", err
				}
				o.Used = used
			}
			obs.Flows = append(obs.Flows, o)
			cs.paths[o.Flow] = o.Path
		}
		act := cs.c.Step(obs)
		cs.now, cs.stepped = now, true
		for _, a := range act.Allocations {
			cs.allocs[a.Flow] = slices.Clone(a.Rates)
		}
		cs.defaultRate, cs.defaultSet = act.DefaultRate, true
		formatControllerActions(&w, act, cs.paths, cs.env.Resources)
		h.send(&w, mech.ControllerHost, now, act.Messages)
		if inspect {
			w.linef("state:")
			w.indent = "  "
			h.inspectController(&w)
			w.indent = ""
		}
		r.add(now, false, w.String())
	}
	return r.String(), nil
}

// inForce returns what the enforcer of a flow lets through: its
// allocation in force, or the default rate on every element.
func (cs *controllerState) inForce(l *line, id mech.FlowID, n int) ([]float64, error) {
	if a, ok := cs.allocs[id]; ok {
		if len(a) != n {
			return nil, l.errorf("used=alloc: allocation in force has %d elements, path %d", len(a), n)
		}
		for _, x := range a {
			if math.IsInf(x, 1) {
				return nil, l.errorf("used=alloc: allocation in force is unlimited on some element")
			}
		}
		return slices.Clone(a), nil
	}
	if !cs.defaultSet || !(cs.defaultRate > 0) {
		return nil, l.errorf("used=alloc: flow %s has no allocation and no finite default rate is known", flowString(id))
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = cs.defaultRate
	}
	return v, nil
}

func (h *Harness) parseFlowLine(l *line) (flowLine, error) {
	cs := h.ctl
	f := flowLine{l: l}
	if len(l.fields) < 2 {
		return f, l.errorf("flow needs SRC->DST")
	}
	src, dst, err := parsePair(l.fields[1])
	if err != nil {
		return f, l.errorf("%v", err)
	}
	sv, ok := h.vm(src)
	if !ok {
		return f, l.errorf("unknown VM %s", src)
	}
	if _, ok := h.vm(dst); !ok {
		if _, ok := cs.resIdx[dst]; !ok {
			return f, l.errorf("unknown destination %s (neither a VM nor a resource)", dst)
		}
	}
	id := mech.FlowID{Src: src, Dst: dst}
	k := parseKV(l, l.fields[2:])
	f.obs = mech.FlowObs{Flow: id, Tenant: k.str("tenant", sv.Tenant)}
	if k.has("path") {
		p, err := cs.parsePath(l, strings.Split(k.str("path", ""), ","))
		if err != nil {
			return f, err
		}
		f.obs.Path = p
	} else if p, ok := cs.routes[id]; ok {
		f.obs.Path = p
	} else {
		return f, l.errorf("flow %s has no path= and no route", l.fields[1])
	}
	n := len(f.obs.Path)
	vec := func(key string) []float64 {
		if !k.has(key) {
			return nil
		}
		v, err := parseNums(k.str(key, ""))
		if err != nil {
			k.fail("%s: %v", key, err)
			return nil
		}
		if len(v) != n {
			k.fail("%s has %d entries, the path %d", key, len(v), n)
		}
		return v
	}
	if k.vals["used"] == "alloc" {
		k.used["used"] = true
		f.usedLim = true
	} else {
		f.obs.Used = vec("used")
	}
	f.obs.Backlog = vec("backlog")
	f.obs.Queued = vec("queued")
	f.obs.Outstanding = vec("outstanding")
	if k.has("alloc") {
		f.allocSet = true
		if k.vals["alloc"] == "none" {
			k.used["alloc"] = true
		} else {
			f.obs.Allocation = vec("alloc")
		}
	}
	return f, k.done()
}

// demandState is what Pulsar's controller exposes: smoothed demands and
// capacity estimators.
type demandState interface {
	Demand(id mech.FlowID) []float64
}

type estimatorState interface {
	Estimator(appliance string) *pulsar.CapacityEstimator
}

func (h *Harness) inspectController(w *writer) {
	cs := h.ctl
	printed := false
	if s, ok := cs.c.(demandState); ok {
		ids := slices.SortedFunc(maps.Keys(cs.paths), func(a, b mech.FlowID) int {
			return cmp.Or(cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst))
		})
		for _, id := range ids {
			d := s.Demand(id)
			if d == nil {
				continue
			}
			w.linef("demand %s %s", flowString(id), labelled(d, cs.paths[id], cs.env.Resources))
			printed = true
		}
	}
	if s, ok := cs.c.(estimatorState); ok {
		for _, r := range cs.env.Resources {
			e := s.Estimator(r.ID)
			if e == nil {
				continue
			}
			lo, hi := e.Window()
			w.linef("estimator %s phase=%s estimate=%s window=[%s,%s]", r.ID, e.Phase(), num(e.Estimate()), num(lo), num(hi))
			printed = true
		}
	}
	if !printed {
		w.linef("nothing to inspect")
	}
}

// labelled formats a vector along a path: "h1/up=100 kv=400".
func labelled(v []float64, path []mech.PathElem, res []mech.ResourceInfo) string {
	parts := make([]string, len(v))
	for e, x := range v {
		label := fmt.Sprintf("#%d", e)
		if e < len(path) && path[e].Resource >= 0 && path[e].Resource < len(res) {
			label = res[path[e].Resource].ID
		}
		parts[e] = label + "=" + num(x)
	}
	return strings.Join(parts, " ")
}
