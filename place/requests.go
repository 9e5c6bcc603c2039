package place

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/units"
	"gopkg.in/yaml.v3"
)

// MaxRequestVMs bounds the VMs of one request.
const MaxRequestVMs = 1 << 20

// TenantRequest is one request of a stream: a tenant, when it arrives and,
// optionally, when it leaves (in the same arbitrary time unit).
type TenantRequest struct {
	Request
	Arrival      float64
	Departure    float64
	HasDeparture bool
	// Where the request was read: file, line and field path ("[3]").
	File string
	Line int
	Path string
}

var requestFields = []string{"name", "vms", "guarantee", "in", "out", "best_effort", "arrival", "departure", "wcs"}
var vmFields = []string{"name", "guarantee", "in", "out"}

// ParseRequests reads a stream of tenant requests, YAML or JSON: a list (or
// a mapping with the list under "tenants") of
//
//	name: t1              # required, unique
//	vms: 10               # a count, or a list of {name, guarantee, in, out}
//	guarantee: 100Mbps    # symmetric hose of every VM, or
//	in: 200Mbps           #   per direction (asymmetric)
//	out: 50Mbps
//	best_effort: true     # no guarantees: slots only
//	arrival: 3            # optional; default: the previous request's (0)
//	departure: 10         # optional, after arrival: the tenant leaves
//	wcs: 0.5              # optional worst-case survival ratio in [0, 1)
//
// A VM's hose in each direction is the first nonzero of its in (out), its
// guarantee, the tenant's in (out), the tenant's guarantee, as in scenarios;
// default VM names are "<tenant>-<i>". Every problem is reported, each a
// *model.FieldError with file, line and field path:
//
//	tenants.yaml:7: [1].guarantee: invalid rate "1Gbs": unknown unit "Gbs" (use bps, Kbps, Mbps, Gbps, Tbps)
func ParseRequests(data []byte, file string) ([]TenantRequest, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(err, file)
	}
	pr := &reqParser{file: file}
	if len(root.Content) == 0 {
		return nil, &model.FieldError{File: file, Msg: "empty file: expected a list of tenant requests"}
	}
	list, prefix := root.Content[0], ""
	if list.Kind == yaml.MappingNode {
		var found *yaml.Node
		for i := 0; i+1 < len(list.Content); i += 2 {
			if k := list.Content[i]; k.Value == "tenants" {
				found = list.Content[i+1]
			} else {
				pr.add(k, k.Value, "unknown field %q (expected a list of tenant requests, or tenants: [...])", k.Value)
			}
		}
		if found == nil {
			pr.add(list, "", "expected a list of tenant requests, or a mapping with tenants: [...]")
			return nil, pr.err()
		}
		list, prefix = found, "tenants"
	}
	if list.Kind != yaml.SequenceNode {
		pr.add(list, prefix, "expected a list of tenant requests, got %s", nodeKind(list))
		return nil, pr.err()
	}
	if len(list.Content) == 0 {
		pr.add(list, prefix, "no tenant requests")
	}
	var out []TenantRequest
	names := map[string]string{}
	vmNames := map[string]string{}
	arrival := 0.0
	for i, item := range list.Content {
		at := fmt.Sprintf("%s[%d]", prefix, i)
		r, ok := pr.request(item, at, &arrival, names, vmNames)
		if ok {
			out = append(out, r)
		}
	}
	if err := pr.err(); err != nil {
		return nil, err
	}
	return out, nil
}

type reqParser struct {
	file string
	errs []error
}

func (pr *reqParser) add(n *yaml.Node, path, format string, args ...any) {
	pr.errs = append(pr.errs, &model.FieldError{File: pr.file, Line: n.Line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (pr *reqParser) err() error { return errors.Join(pr.errs...) }

// fields returns a mapping's values by key, reporting unknown and duplicate
// keys.
func (pr *reqParser) fields(n *yaml.Node, at string, known []string) (map[string]*yaml.Node, bool) {
	if n.Kind != yaml.MappingNode {
		pr.add(n, at, "expected a mapping, got %s", nodeKind(n))
		return nil, false
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case !contains(known, k.Value):
			pr.add(k, join(at, k.Value), "unknown field %q (use %s)", k.Value, strings.Join(known, ", "))
		case out[k.Value] != nil:
			pr.add(k, join(at, k.Value), "given twice")
		default:
			out[k.Value] = v
		}
	}
	return out, true
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func join(at, field string) string {
	if at == "" {
		return field
	}
	return at + "." + field
}

func (pr *reqParser) str(n *yaml.Node, at string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" {
		pr.add(n, at, "expected a string, got %s", nodeKind(n))
		return "", false
	}
	return n.Value, true
}

func (pr *reqParser) number(n *yaml.Node, at string) (float64, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, true
		}
	}
	pr.add(n, at, "expected a number, got %s", nodeKind(n))
	return 0, false
}

func (pr *reqParser) rate(n *yaml.Node, at string) (float64, bool) {
	if n.Kind != yaml.ScalarNode {
		pr.add(n, at, "expected a rate such as \"100Mbps\", got %s", nodeKind(n))
		return 0, false
	}
	r, err := units.ParseRate(n.Value)
	if err != nil {
		pr.add(n, at, "%v", err)
		return 0, false
	}
	return r, true
}

// hoseFields reads guarantee, in and out.
func (pr *reqParser) hoseFields(f map[string]*yaml.Node, at string) (g, in, out float64, ok bool) {
	ok = true
	for _, x := range []struct {
		name string
		dst  *float64
	}{{"guarantee", &g}, {"in", &in}, {"out", &out}} {
		if n := f[x.name]; n != nil {
			v, good := pr.rate(n, join(at, x.name))
			*x.dst = v
			ok = ok && good
		}
	}
	return g, in, out, ok
}

func firstPositive(xs ...float64) float64 {
	for _, x := range xs {
		if x != 0 {
			return x
		}
	}
	return 0
}

func (pr *reqParser) request(item *yaml.Node, at string, arrival *float64, names, vmNames map[string]string) (TenantRequest, bool) {
	r := TenantRequest{File: pr.file, Line: item.Line, Path: at}
	f, ok := pr.fields(item, at, requestFields)
	if !ok {
		return r, false
	}
	before := len(pr.errs)
	if n := f["name"]; n == nil {
		pr.add(item, join(at, "name"), "required")
	} else if s, ok := pr.str(n, join(at, "name")); ok {
		switch prev, dup := names[s]; {
		case s == "":
			pr.add(n, join(at, "name"), "must not be empty")
		case dup:
			pr.add(n, join(at, "name"), "duplicate tenant %q (also %s)", s, prev)
		default:
			names[s] = at
			r.Name = s
		}
	}
	g, in, out, _ := pr.hoseFields(f, at)
	bestEffort := false
	if n := f["best_effort"]; n != nil {
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			pr.add(n, join(at, "best_effort"), "expected true or false, got %s", nodeKind(n))
		} else {
			bestEffort = n.Value == "true"
		}
	}
	if n := f["arrival"]; n != nil {
		if v, ok := pr.number(n, join(at, "arrival")); ok {
			if v < 0 {
				pr.add(n, join(at, "arrival"), "must not be negative, got %v", v)
			} else {
				*arrival = v
			}
		}
	}
	r.Arrival = *arrival
	if n := f["departure"]; n != nil {
		if v, ok := pr.number(n, join(at, "departure")); ok {
			if v <= r.Arrival {
				pr.add(n, join(at, "departure"), "%v is not after the arrival %v", v, r.Arrival)
			}
			r.Departure, r.HasDeparture = v, true
		}
	}
	if n := f["wcs"]; n != nil {
		if v, ok := pr.number(n, join(at, "wcs")); ok {
			if v < 0 || v >= 1 {
				pr.add(n, join(at, "wcs"), "%v is not a ratio in [0, 1)", v)
			} else {
				r.WCS = v
			}
		}
	}
	// VMs.
	vn := f["vms"]
	var vmLines []*yaml.Node // the node of every listed VM
	switch {
	case vn == nil:
		pr.add(item, join(at, "vms"), "required (a number of VMs, or a list of VMs)")
	case vn.Kind == yaml.ScalarNode && vn.Tag == "!!int":
		k, err := strconv.Atoi(vn.Value)
		if err != nil || k < 1 || k > MaxRequestVMs {
			pr.add(vn, join(at, "vms"), "expected a number of VMs from 1 to %d, got %s", MaxRequestVMs, vn.Value)
			break
		}
		r.VMs = make([]VMRequest, k)
		for i := range r.VMs {
			r.VMs[i] = VMRequest{In: firstPositive(in, g), Out: firstPositive(out, g)}
		}
	case vn.Kind == yaml.SequenceNode:
		vmLines = make([]*yaml.Node, 0, len(vn.Content))
		if len(vn.Content) == 0 || len(vn.Content) > MaxRequestVMs {
			pr.add(vn, join(at, "vms"), "expected 1 to %d VMs, got %d", MaxRequestVMs, len(vn.Content))
		}
		for j, vnode := range vn.Content {
			vat := fmt.Sprintf("%s.vms[%d]", at, j)
			vf, ok := pr.fields(vnode, vat, vmFields)
			if !ok {
				continue
			}
			v := VMRequest{}
			if n := vf["name"]; n != nil {
				if s, ok := pr.str(n, join(vat, "name")); ok {
					if s == "" {
						pr.add(n, join(vat, "name"), "must not be empty")
					}
					v.Name = s
				}
			}
			vg, vin, vout, _ := pr.hoseFields(vf, vat)
			if bestEffort && (vg != 0 || vin != 0 || vout != 0) {
				pr.add(vnode, vat, "a best_effort tenant has no guarantees")
			}
			v.In, v.Out = firstPositive(vin, vg, in, g), firstPositive(vout, vg, out, g)
			r.VMs = append(r.VMs, v)
			vmLines = append(vmLines, vnode)
		}
	default:
		pr.add(vn, join(at, "vms"), "expected a number of VMs or a list of VMs, got %s", nodeKind(vn))
	}
	anyGuarantee := g != 0 || in != 0 || out != 0
	for _, v := range r.VMs {
		anyGuarantee = anyGuarantee || v.In != 0 || v.Out != 0
	}
	switch {
	case bestEffort && (g != 0 || in != 0 || out != 0):
		pr.add(item, at, "a best_effort tenant has no guarantees")
	case !bestEffort && !anyGuarantee && len(r.VMs) > 0:
		pr.add(item, at, "no guarantees: set guarantee (or in and out), or best_effort: true")
	case !bestEffort && vmLines != nil:
		for j, v := range r.VMs {
			if v.In == 0 && v.Out == 0 {
				pr.add(vmLines[j], fmt.Sprintf("%s.vms[%d]", at, j), "no guarantee in either direction: set guarantee, in or out (here or on the tenant), or best_effort: true on the tenant")
			}
		}
	}
	if r.WCS > 0 && len(r.VMs) > 0 && math.Floor(float64(len(r.VMs))*(1-r.WCS)+1e-9) < 1 {
		pr.add(f["wcs"], join(at, "wcs"), "%v with %d VMs allows no VM on any server (at most ⌊N·(1−wcs)⌋ per server)", r.WCS, len(r.VMs))
	}
	// VM names, defaults included, are unique across the file.
	for j := range r.VMs {
		if r.VMs[j].Name == "" {
			r.VMs[j].Name = r.Name + "-" + strconv.Itoa(j+1)
		}
		name := r.VMs[j].Name
		if prev, dup := vmNames[name]; dup && r.Name != "" {
			pr.add(item, fmt.Sprintf("%s.vms[%d]", at, j), "duplicate VM name %q (also %s)", name, prev)
		} else {
			vmNames[name] = fmt.Sprintf("%s.vms[%d]", at, j)
		}
	}
	return r, len(pr.errs) == before
}

// nodeKind names what a node holds for messages: a scalar's value (quoted),
// "nothing" for null, else its kind (units.YAMLKind) with an article.
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	case yaml.MappingNode, yaml.SequenceNode:
		return "a " + units.YAMLKind(n)
	case yaml.AliasNode:
		return "an " + units.YAMLKind(n)
	}
	return "nothing"
}

var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlError turns a YAML syntax error into a *model.FieldError with its line.
func yamlError(err error, file string) error {
	fe := &model.FieldError{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	if m := yamlLineRE.FindStringSubmatch(fe.Msg); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		fe.Msg = m[2]
	}
	return fe
}

// Event is one step of a stream: a tenant arriving (accepted with its
// placement, or rejected) or leaving.
type Event struct {
	Time      float64
	Tenant    string
	VMs       int // requested (arrivals)
	Departure bool
	Placement *Placement    // accepted arrival
	Rejection *Rejection    // rejected arrival
	Elapsed   time.Duration // time the placement took (arrivals)
}

// Run feeds the requests to the placer in order of arrival (ties in the
// order given), each departure before any arrival at the same or a later
// time, and the departures left at the end. A request the placer refuses as
// malformed (not a *Rejection, e.g. a VM name a reserved tenant already
// uses) stops the run with an error naming the request.
func Run(p *Placer, reqs []TenantRequest) ([]Event, error) {
	idx := make([]int, len(reqs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return reqs[idx[a]].Arrival < reqs[idx[b]].Arrival })
	var (
		events []Event
		deps   departures
		seq    int
	)
	leave := func(until float64, all bool) error {
		for deps.Len() > 0 && (all || deps[0].time <= until) {
			d := heap.Pop(&deps).(departure)
			if err := p.Remove(d.tenant); err != nil {
				return err
			}
			events = append(events, Event{Time: d.time, Tenant: d.tenant, Departure: true})
		}
		return nil
	}
	for _, i := range idx {
		r := &reqs[i]
		if err := leave(r.Arrival, false); err != nil {
			return nil, err
		}
		start := time.Now()
		pl, err := p.Place(r.Request)
		ev := Event{Time: r.Arrival, Tenant: r.Name, VMs: len(r.VMs), Elapsed: time.Since(start)}
		var rj *Rejection
		switch {
		case errors.As(err, &rj):
			ev.Rejection = rj
		case err != nil:
			return nil, &model.FieldError{File: r.File, Line: r.Line, Path: r.Path, Msg: err.Error()}
		default:
			ev.Placement = pl
			if r.HasDeparture {
				heap.Push(&deps, departure{time: r.Departure, seq: seq, tenant: r.Name})
				seq++
			}
		}
		events = append(events, ev)
	}
	if err := leave(0, true); err != nil {
		return nil, err
	}
	return events, nil
}

type departure struct {
	time   float64
	seq    int
	tenant string
}

// departures is a min-heap by time, then by admission order.
type departures []departure

func (d departures) Len() int { return len(d) }
func (d departures) Less(i, j int) bool {
	if d[i].time != d[j].time {
		return d[i].time < d[j].time
	}
	return d[i].seq < d[j].seq
}
func (d departures) Swap(i, j int) { d[i], d[j] = d[j], d[i] }
func (d *departures) Push(x any)   { *d = append(*d, x.(departure)) }
func (d *departures) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}
