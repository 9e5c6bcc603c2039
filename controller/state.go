package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/bulkhead-dc/bulkhead/units"
)

// Invalid is a request the cluster cannot take: the objects are wrong,
// or their guarantees do not fit. Nothing was stored.
type Invalid struct{ Err error }

func (e *Invalid) Error() string { return e.Err.Error() }
func (e *Invalid) Unwrap() error { return e.Err }

// InUse is a delete refused because other objects depend on the object.
type InUse struct{ Msg string }

func (e *InUse) Error() string { return e.Msg }

// maxRetries is how often an apply or delete is redone when another
// controller's or request's commit came between its read and its write.
const maxRetries = 5

// snapshot is the stored cluster at one revision.
type snapshot struct {
	rev  int64
	objs []api.Object
}

func key(o *api.Object) store.Key { return store.Key{Kind: o.Kind, Name: o.Name()} }

// load reads every stored object.
func load(ctx context.Context, st store.Store) (*snapshot, error) {
	recs, rev, err := st.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read the store: %w", err)
	}
	s := &snapshot{rev: rev}
	for _, r := range recs {
		if !slices.Contains(api.Kinds(), r.Kind) {
			continue // the controller's own records (the agents' secret)
		}
		var o api.Object
		if err := json.Unmarshal(r.Data, &o); err != nil {
			return nil, fmt.Errorf("stored object %s is unreadable: %w", r.Key, err)
		}
		o.Metadata.ResourceVersion = strconv.FormatInt(r.Revision, 10)
		s.objs = append(s.objs, o)
	}
	return s, nil
}

func (s *snapshot) find(kind, name string) (int, bool) {
	for i := range s.objs {
		if s.objs[i].Kind == kind && s.objs[i].Name() == name {
			return i, true
		}
	}
	return -1, false
}

// specJSON is an object's spec in canonical JSON, to tell changes.
func specJSON(o *api.Object) []byte {
	b, _ := json.Marshal(o.Spec)
	return b
}

// apply merges objs into the snapshot, places unplaced VMs, admits the
// result and returns the objects to store with what happened to each.
// now stamps new objects.
func (s *snapshot) apply(objs []api.Object, now time.Time) (merged []api.Object, puts []api.Object, results []api.Result, err error) {
	merged = slices.Clone(s.objs)
	seen := map[store.Key]bool{}
	for i := range objs {
		o := objs[i]
		k := key(&o)
		if seen[k] {
			return nil, nil, nil, &Invalid{&model.FieldError{File: k.Kind + " " + strconv.Quote(k.Name), Path: "metadata.name", Msg: "given twice in one apply"}}
		}
		seen[k] = true
		o.Status = nil
		j, exists := s.find(o.Kind, o.Name())
		if exists {
			old := &s.objs[j]
			keepPlacement(&o, old)
			o.Metadata = old.Metadata
			if bytes.Equal(specJSON(&o), specJSON(old)) {
				results = append(results, api.Result{Kind: o.Kind, Name: o.Name(), Action: api.Unchanged})
				continue
			}
			o.Metadata.Generation++
			merged[j] = o
			results = append(results, api.Result{Kind: o.Kind, Name: o.Name(), Action: api.Configured})
		} else {
			t := now.UTC().Truncate(time.Second)
			o.Metadata = api.Meta{Name: o.Name(), Generation: 1, CreationTimestamp: &t}
			merged = append(merged, o)
			results = append(results, api.Result{Kind: o.Kind, Name: o.Name(), Action: api.Created})
		}
		puts = append(puts, o)
	}
	if len(puts) == 0 {
		return merged, nil, results, nil
	}
	placed, cl, err := admit(merged)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := checkSnapshots(cl, s.objs); err != nil {
		return nil, nil, nil, err
	}
	// Placement may have given VMs hosts: store those.
	for i := range puts {
		if j := slices.IndexFunc(placed, func(o api.Object) bool { return o.Kind == puts[i].Kind && o.Name() == puts[i].Name() }); j >= 0 {
			puts[i] = placed[j]
		}
	}
	return placed, puts, results, nil
}

// keepPlacement gives the VMs of a re-applied tenant that name no host
// the host they were placed on before, so that applying the same file
// again changes nothing.
func keepPlacement(o, old *api.Object) {
	ts, ok := o.Spec.(*api.TenantSpec)
	if !ok {
		return
	}
	prev := old.Spec.(*api.TenantSpec)
	hosts := map[string]string{}
	for _, v := range prev.VMs {
		hosts[v.Name] = v.Host
	}
	c := *ts
	c.VMs = slices.Clone(ts.VMs)
	for i := range c.VMs {
		if c.VMs[i].Host == "" {
			c.VMs[i].Host = hosts[c.VMs[i].Name]
		}
	}
	o.Spec = &c
}

// admit places the VMs without a host and checks that every tenant's
// hose guarantees fit the topology, as the cluster's mechanism can
// guarantee them. It returns the objects with the placed hosts, and
// their cluster.
func admit(objs []api.Object) ([]api.Object, *api.Cluster, error) {
	objs = slices.Clone(objs)
	api.SortObjects(objs)
	cl, err := api.Build(objs) // the cluster's settings and topology
	if err != nil {
		return nil, nil, &Invalid{err}
	}
	m, err := all.New(cl.Spec.Mechanism.Name, cl.Spec.Mechanism.Params)
	if err != nil {
		return nil, nil, &Invalid{&model.FieldError{File: api.KindCluster + ` "default"`, Path: "spec.mechanism", Msg: err.Error()}}
	}
	pl, err := place.NewPlacer(cl.Topology, place.Options{Algorithm: place.Algorithm(cl.Spec.Placement), Slots: cl.Spec.Slots, Seed: cl.Spec.Seed})
	if err != nil {
		return nil, nil, &Invalid{fmt.Errorf("placement: %w", err)}
	}
	// Tenants with every VM on a host first, then those to place, in name
	// order (reproducible).
	var toPlace []int
	for i := range objs {
		o := &objs[i]
		ts, ok := o.Spec.(*api.TenantSpec)
		if !ok {
			continue
		}
		unplaced := ts.Unplaced()
		switch {
		case len(unplaced) == len(ts.VMs):
			toPlace = append(toPlace, i)
			continue
		case len(unplaced) > 0:
			return nil, nil, &Invalid{&model.FieldError{File: api.KindTenant + " " + strconv.Quote(o.Name()), Path: "spec.vms",
				Msg: fmt.Sprintf("VMs %v name no host while others do: give every VM a host, or none (the controller then places them all)", unplaced)}}
		}
		st := specTenant(o.Name(), ts)
		if err := pl.Reserve(&st); err != nil {
			return nil, nil, &Invalid{&model.FieldError{File: api.KindTenant + " " + strconv.Quote(o.Name()), Path: "admission", Msg: err.Error()}}
		}
	}
	for _, i := range toPlace {
		o := &objs[i]
		ts := o.Spec.(*api.TenantSpec)
		req := place.Request{Name: o.Name()}
		for j := range ts.VMs {
			in, out := ts.Hose(&ts.VMs[j])
			req.VMs = append(req.VMs, place.VMRequest{Name: ts.VMs[j].Name, In: in, Out: out})
		}
		p, err := pl.Place(req)
		if err != nil {
			return nil, nil, &Invalid{&model.FieldError{File: api.KindTenant + " " + strconv.Quote(o.Name()), Path: "admission", Msg: err.Error()}}
		}
		c := *ts
		c.VMs = slices.Clone(ts.VMs)
		for j := range c.VMs {
			c.VMs[j].Host = p.VMs[j].Server
		}
		o.Spec = &c
	}
	built, err := api.Build(objs)
	if err != nil {
		return nil, nil, &Invalid{err}
	}
	// The mechanism may guarantee less than a link (it keeps headroom).
	if h := m.Capabilities().Headroom; h > 0 {
		sc := scenarioOf(built)
		if err := place.AdmitWithHeadroom(sc, built.Topology, h, m.Name()); err != nil {
			return nil, nil, &Invalid{err}
		}
	}
	return objs, built, nil
}

// specTenant is a tenant object as a scenario's tenant (the placer's and
// admission's input).
func specTenant(name string, ts *api.TenantSpec) spec.Tenant {
	t := spec.Tenant{Name: name, BestEffort: ts.BestEffort}
	for j := range ts.VMs {
		v := &ts.VMs[j]
		in, out := ts.Hose(v)
		t.VMs = append(t.VMs, spec.VM{Name: v.Name, Server: v.Host, In: units.Rate(in), Out: units.Rate(out)})
	}
	return t
}

// scenarioOf is the cluster's tenants as a scenario, for admission.
func scenarioOf(c *api.Cluster) *spec.Scenario {
	sc := &spec.Scenario{Seed: c.Spec.Seed, File: "admission"}
	for _, o := range c.Objects {
		if ts, ok := o.Spec.(*api.TenantSpec); ok {
			sc.Tenants = append(sc.Tenants, specTenant(o.Name(), ts))
		}
	}
	return sc
}

// remove deletes one object from the snapshot, refusing what others
// depend on.
func (s *snapshot) remove(kind, name string) (api.Object, error) {
	i, ok := s.find(kind, name)
	if !ok {
		return api.Object{}, fmt.Errorf("%s %q: %w", kind, name, store.ErrNotFound)
	}
	o := s.objs[i]
	rest := slices.Delete(slices.Clone(s.objs), i, i+1)
	switch kind {
	case api.KindCluster:
		if len(rest) > 0 {
			return o, &InUse{fmt.Sprintf("the cluster still has %d objects: delete its tenants, appliances and hosts first", len(rest))}
		}
		return o, nil
	case api.KindHost:
		for _, x := range rest {
			if ts, ok := x.Spec.(*api.TenantSpec); ok {
				for _, v := range ts.VMs {
					if v.Host == name {
						return o, &InUse{fmt.Sprintf("host %q runs VM %q of tenant %q: delete or move the tenant's VMs first", name, v.Name, x.Name())}
					}
				}
			}
		}
	}
	if _, err := api.Build(rest); err != nil && len(rest) > 0 {
		return o, &InUse{fmt.Sprintf("%s %q is still needed: %v", kind, name, err)}
	}
	return o, nil
}

// encode is an object as the store keeps it.
func encode(o *api.Object) (store.Object, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return store.Object{}, fmt.Errorf("encode %s %q: %w", o.Kind, o.Name(), err)
	}
	return store.Object{Key: key(o), Data: b}, nil
}

// built is the stored cluster at one revision, built (cl nil, err set when
// the declared objects do not make a cluster yet).
type built struct {
	snap *snapshot
	cl   *api.Cluster
	err  error
}

// cluster returns the stored cluster, built, rebuilding it only when the
// store's revision moved: every agent's snapshot and every compliance
// count would otherwise decode and build the whole cluster again.
func (c *Controller) cluster(ctx context.Context) (*snapshot, *api.Cluster, error) {
	_, rev, err := c.cfg.Store.List(ctx, api.KindCluster)
	if err != nil {
		return nil, nil, fmt.Errorf("read the store: %w", err)
	}
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	if b := c.cache; b != nil && b.snap.rev == rev {
		return b.snap, b.cl, b.err
	}
	snap, err := load(ctx, c.cfg.Store)
	if err != nil {
		return nil, nil, err
	}
	cl, berr := api.Build(snap.objs)
	c.cache = &built{snap: snap, cl: cl, err: berr}
	return snap, cl, berr
}
