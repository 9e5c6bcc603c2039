package api

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// Placement algorithms a cluster may use.
const (
	PlacementOktopus = "oktopus"
	PlacementQShare  = "qshare"
)

// Cluster is a consistent set of objects, built: the cluster's settings
// with defaults, its topology, and the declared model every mechanism
// runs on.
type Cluster struct {
	Spec     ClusterSpec
	Topology *topo.Topology
	// Model holds every tenant and appliance, and every server of the
	// topology as a host with its access link.
	Model *model.Model
	// Hosts are the Host objects by name.
	Hosts map[string]*HostSpec
	// Objects are the objects it was built from, by kind then name.
	Objects []Object
}

// Build checks a set of objects as a whole — one cluster, hosts that are
// servers of its topology, VMs with unique names on known hosts, tenants
// and appliances as model.Validate checks them — and builds the cluster.
// VMs without a host are not in the model (the controller places them
// first). Every problem is a *model.FieldError whose File names the object
// (`Tenant "web"`) and whose Path is the field in it.
func Build(objs []Object) (*Cluster, error) {
	objs = Clone(objs)
	SortObjects(objs)
	var errs []error
	seen := map[string]bool{}
	var cl *ClusterSpec
	for i := range objs {
		o := &objs[i]
		id := o.Kind + "/" + o.Name()
		if seen[id] {
			errs = append(errs, &model.FieldError{File: where(o), Path: "metadata.name", Msg: "declared twice"})
		}
		seen[id] = true
		if o.Kind == KindCluster {
			cl = o.Spec.(*ClusterSpec)
		}
	}
	if cl == nil {
		return nil, &model.FieldError{File: KindCluster + " " + strconv.Quote(ClusterName),
			Msg: "no cluster declared: apply a Cluster object (its topology, slots, placement and mechanism) first"}
	}
	c := &Cluster{Spec: *cl, Hosts: map[string]*HostSpec{}, Model: &model.Model{}, Objects: objs}
	if err := c.checkCluster(); err != nil {
		return nil, err
	}
	c.Model.Hosts = c.Topology.Hosts()
	tenantAt := map[int]*Object{}
	applianceAt := map[int]*Object{}
	for i := range objs {
		o := &objs[i]
		switch o.Kind {
		case KindHost:
			errs = append(errs, c.addHost(o)...)
		case KindAppliance:
			a := *o.Spec.(*ApplianceSpec)
			if a.Name != "" && a.Name != o.Name() {
				errs = append(errs, &model.FieldError{File: where(o), Path: "spec.name", Msg: fmt.Sprintf("%q differs from metadata.name; leave it out", a.Name)})
				continue
			}
			a.Name = o.Name()
			a.ApplyDefaults()
			applianceAt[len(c.Model.Appliances)] = o
			c.Model.Appliances = append(c.Model.Appliances, a)
		case KindTenant:
			t, tErrs := tenantModel(o, c.Topology)
			errs = append(errs, tErrs...)
			tenantAt[len(c.Model.Tenants)] = o
			c.Model.Tenants = append(c.Model.Tenants, t)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.Model.ApplyDefaults()
	if err := c.Model.Validate(); err != nil {
		return nil, relocate(err, tenantAt, applianceAt)
	}
	return c, nil
}

// Clone deep-copies objects (their specs and statuses), so that what
// Build fills in (defaults) never reaches the caller's objects.
func Clone(objs []Object) []Object {
	out := make([]Object, len(objs))
	for i := range objs {
		out[i] = objs[i].Clone()
	}
	return out
}

// Clone deep-copies the object (a status is shared: the controller
// builds a new one each time).
func (o *Object) Clone() Object {
	c := *o
	if t := o.Metadata.CreationTimestamp; t != nil {
		tt := *t
		c.Metadata.CreationTimestamp = &tt
	}
	switch s := o.Spec.(type) {
	case *ClusterSpec:
		x := *s
		x.Topology = cloneTopology(s.Topology)
		x.Mechanism.Params = maps.Clone(s.Mechanism.Params)
		c.Spec = &x
	case *HostSpec:
		x := *s
		c.Spec = &x
	case *TenantSpec:
		x := *s
		x.VMs = slices.Clone(s.VMs)
		x.Pattern = slices.Clone(s.Pattern)
		for j := range x.VMs {
			x.VMs[j].Addrs = slices.Clone(x.VMs[j].Addrs)
		}
		if s.VDC != nil {
			m := model.Model{Tenants: []model.Tenant{{VDC: s.VDC}}}
			x.VDC = m.Clone().Tenants[0].VDC
		}
		c.Spec = &x
	case *ApplianceSpec:
		m := model.Model{Appliances: []model.Appliance{*s}}
		x := m.Clone().Appliances[0]
		c.Spec = &x
	}
	return c
}

func cloneTopology(t spec.Topology) spec.Topology {
	if t.TwoTier != nil {
		x := *t.TwoTier
		t.TwoTier = &x
	}
	if t.FatTree != nil {
		x := *t.FatTree
		t.FatTree = &x
	}
	if t.Explicit != nil {
		x := spec.Explicit{Nodes: slices.Clone(t.Explicit.Nodes), Links: slices.Clone(t.Explicit.Links)}
		t.Explicit = &x
	}
	return t
}

// where names an object in errors.
func where(o *Object) string { return o.Kind + " " + strconv.Quote(o.Name()) }

func (c *Cluster) checkCluster() error {
	at := KindCluster + " " + strconv.Quote(ClusterName)
	p := &model.Problems{File: at}
	if err := spec.CheckTopology(&c.Spec.Topology, at); err != nil {
		for _, fe := range model.FieldErrors(err) {
			fe.Path = "spec." + fe.Path
		}
		return err
	}
	t, err := topo.FromSpec(c.Spec.Topology)
	if err != nil {
		p.Add("spec.topology", "%v", err)
		return p.Err()
	}
	c.Topology = t
	switch {
	case c.Spec.Slots < 0 || c.Spec.Slots > 10000:
		p.Add("spec.slots", "must be between 1 and 10000 VMs per server, got %d", c.Spec.Slots)
	case c.Spec.Slots == 0:
		c.Spec.Slots = defaultSlots
	}
	switch c.Spec.Placement {
	case "":
		c.Spec.Placement = PlacementOktopus
	case PlacementOktopus, PlacementQShare:
	default:
		p.Add("spec.placement", "unknown algorithm %q (use %s or %s)", c.Spec.Placement, PlacementOktopus, PlacementQShare)
	}
	if c.Spec.Mechanism.Name == "" {
		c.Spec.Mechanism.Name = "none"
	}
	if c.Spec.Seed == 0 {
		c.Spec.Seed = spec.DefaultSeed
	}
	return p.Err()
}

// defaultSlots is place.DefaultSlots (api does not import the placer).
const defaultSlots = 4

func (c *Cluster) addHost(o *Object) []error {
	h := o.Spec.(*HostSpec)
	p := &model.Problems{File: where(o)}
	if n, ok := c.Topology.Node(o.Name()); !ok || n.Kind != topo.Server {
		p.Add("metadata.name", "%q is not a server of the cluster's topology", o.Name())
	}
	if !h.Address.IsValid() {
		p.Add("spec.address", "required: the IP address where the host's agent receives its peers' messages")
	}
	switch {
	case h.Port < 0 || h.Port > 65535:
		p.Add("spec.port", "must be a UDP port (1-65535), got %d", h.Port)
	case h.Port == 0:
		h.Port = DefaultAgentPort
	}
	c.Hosts[o.Name()] = h
	return asErrors(p.Err())
}

// tenantModel resolves a tenant object's VMs into the model's form.
func tenantModel(o *Object, tp *topo.Topology) (model.Tenant, []error) {
	ts := o.Spec.(*TenantSpec)
	p := &model.Problems{File: where(o)}
	t := model.Tenant{Name: o.Name(), BestEffort: ts.BestEffort, Weight: ts.Weight, SLA: ts.SLA, VDC: ts.VDC, Pattern: slices.Clone(ts.Pattern)}
	if len(ts.VMs) == 0 {
		p.Add("spec.vms", "required: at least one VM")
	}
	if len(ts.VMs) > MaxVMs {
		p.Add("spec.vms", "%d VMs, at most %d per tenant", len(ts.VMs), MaxVMs)
		return t, asErrors(p.Err())
	}
	for j := range ts.VMs {
		v := &ts.VMs[j]
		at := fmt.Sprintf("spec.vms[%d]", j)
		if err := CheckName(v.Name); err != nil {
			p.Add(at+".name", "%v", err)
		}
		for _, r := range []struct {
			f string
			v float64
		}{{"guarantee", float64(v.Guarantee)}, {"in", float64(v.In)}, {"out", float64(v.Out)}} {
			if r.v < 0 {
				p.Add(at+"."+r.f, "must be a non-negative rate, got %v", r.v)
			}
		}
		if v.Host == "" {
			continue // to be placed
		}
		if n, ok := tp.Node(v.Host); !ok || n.Kind != topo.Server {
			p.Add(at+".host", "%q is not a server of the cluster's topology", v.Host)
		}
		in, out := ts.Hose(v)
		t.VMs = append(t.VMs, model.VM{Name: v.Name, Tenant: t.Name, Host: v.Host, Addrs: slices.Clone(v.Addrs),
			Interface: v.Interface, Netns: v.Netns, In: in, Out: out})
	}
	return t, asErrors(p.Err())
}

var (
	modelPathRE = regexp.MustCompile(`^(tenants|appliances)\[(\d+)\](.*)$`)
	modelRefRE  = regexp.MustCompile(`(tenants|appliances)\[(\d+)\]((?:\.[a-z_]+(?:\[\d+\])?)*)`)
)

// relocate turns model.Validate's paths (tenants[2].vms[0].host) into the
// object and its field (Tenant "web": spec.vms[0].host). A VM index
// counts the tenant's placed VMs, which are its declared ones in order.
func relocate(err error, tenants, appliances map[int]*Object) error {
	for _, fe := range model.FieldErrors(err) {
		// Paths quoted in the message ("also tenants[0].vms[1]") too.
		fe.Msg = modelRefRE.ReplaceAllStringFunc(fe.Msg, func(ref string) string {
			m := modelRefRE.FindStringSubmatch(ref)
			i, _ := strconv.Atoi(m[2])
			objs := tenants
			if m[1] == "appliances" {
				objs = appliances
			}
			if o, ok := objs[i]; ok {
				return where(o) + " spec" + m[3]
			}
			return ref
		})
		m := modelPathRE.FindStringSubmatch(fe.Path)
		if m == nil {
			continue
		}
		i, _ := strconv.Atoi(m[2])
		objs := tenants
		if m[1] == "appliances" {
			objs = appliances
		}
		o, ok := objs[i]
		if !ok {
			continue
		}
		fe.File = where(o)
		rest := strings.TrimPrefix(m[3], ".")
		switch {
		case rest == "name":
			fe.Path = "metadata.name"
		case rest == "":
			fe.Path = "spec"
		default:
			fe.Path = "spec." + rest
		}
	}
	return err
}

// SortObjects orders objects by kind (Kinds' order) then name.
func SortObjects(objs []Object) {
	rank := func(k string) int {
		if i := slices.Index(kinds, k); i >= 0 {
			return i
		}
		return len(kinds)
	}
	slices.SortStableFunc(objs, func(a, b Object) int {
		if d := rank(a.Kind) - rank(b.Kind); d != 0 {
			return d
		}
		return strings.Compare(a.Name(), b.Name())
	})
}

// Unplaced returns the names of a tenant's VMs declared without a host.
func (t *TenantSpec) Unplaced() []string {
	var out []string
	for _, v := range t.VMs {
		if v.Host == "" {
			out = append(out, v.Name)
		}
	}
	return out
}

// asErrors lists the problems of err (nil: none).
func asErrors(err error) []error {
	var out []error
	for _, fe := range model.FieldErrors(err) {
		out = append(out, fe)
	}
	return out
}
