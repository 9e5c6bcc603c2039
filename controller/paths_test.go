package controller

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/units"
)

// TestAppliancePaths: a host's snapshot carries, for each of its VMs and
// each real appliance, the path the controller allocates the flow on —
// forward links to the appliance's server, the appliance, the links back
// — and nothing for an appliance of the simulator only or another host's
// VMs.
func TestAppliancePaths(t *testing.T) {
	o := func(kind, name string, s any) api.Object {
		return api.Object{APIVersion: api.Version, Kind: kind, Metadata: api.Meta{Name: name}, Spec: s}
	}
	objs := []api.Object{o(api.KindCluster, api.ClusterName, &api.ClusterSpec{
		Topology:  spec.Topology{Kind: "two-tier", TwoTier: &spec.TwoTier{Racks: 2, ServersPerRack: 2, Edge: spec.Rate(1e9)}},
		Mechanism: api.Mechanism{Name: "pulsar"},
	})}
	for _, h := range []string{"s1", "s2", "s3", "s4"} {
		objs = append(objs, o(api.KindHost, h, &api.HostSpec{Address: netip.MustParseAddr("10.9.0.1")}))
	}
	objs = append(objs,
		o(api.KindAppliance, "kv", &api.ApplianceSpec{Server: "s4", Model: "kv", Address: "10.8.0.1", Port: 6379, Protocol: "redis"}),
		o(api.KindAppliance, "sim", &api.ApplianceSpec{Server: "s4", Model: "kv"}),
		o(api.KindTenant, "a", &api.TenantSpec{Guarantee: units.Rate(1e8), VMs: []api.VMSpec{{Name: "a1", Host: "s1"}, {Name: "a2", Host: "s2"}}}))
	cl, err := api.Build(objs)
	if err != nil {
		t.Fatal(err)
	}
	got := appliancePaths(cl, "s1")
	if len(got) != 1 || got[0].Src != "a1" || got[0].Dst != "kv" {
		t.Fatalf("paths of s1: %v, want a1->kv only", got)
	}
	var roles []mech.PathRole
	nlinks := len(cl.Topology.Links)
	for _, x := range got[0].Path {
		r, role := int(x>>2), mech.PathRole(x&3)
		roles = append(roles, role)
		if (role == mech.Appliance) != (r == nlinks) || r > nlinks {
			t.Errorf("element %d: resource %d in role %v (links 0..%d, kv is %d)", len(roles)-1, r, role, nlinks-1, nlinks)
		}
	}
	// s1 -> tor1 -> core -> tor2 -> s4, kv, and back: 4 links each way.
	want := []mech.PathRole{mech.Forward, mech.Forward, mech.Forward, mech.Forward, mech.Appliance, mech.Reverse, mech.Reverse, mech.Reverse, mech.Reverse}
	if !slices.Equal(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}
	if p := appliancePaths(cl, "s3"); len(p) != 0 {
		t.Errorf("s3 has no VM, got paths %v", p)
	}
}
