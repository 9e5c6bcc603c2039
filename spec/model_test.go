package spec_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// TestModel extracts the declared model of every shipped scenario: the
// tenants and their VMs in the scenario's order, hoses resolved, servers
// as hosts, VDCs and appliances as declared; the model is valid and
// shares nothing with the scenario.
func TestModel(t *testing.T) {
	files, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped scenarios: %v", err)
	}
	for _, f := range files {
		s, err := spec.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		m := s.Model()
		if err := m.Validate(); err != nil {
			t.Errorf("%s: model: %v", f, err)
		}
		if len(m.Tenants) != len(s.Tenants) || !reflect.DeepEqual(m.Appliances, s.Appliances) {
			t.Fatalf("%s: %d tenants, appliances %+v", f, len(m.Tenants), m.Appliances)
		}
		for i := range s.Tenants {
			st, mt := &s.Tenants[i], &m.Tenants[i]
			if mt.Name != st.Name || mt.BestEffort != st.BestEffort || mt.Weight != st.Weight || mt.SLA != st.SLA ||
				!reflect.DeepEqual(mt.VDC, st.VDC) || len(mt.VMs) != len(st.VMs) {
				t.Fatalf("%s: tenants[%d] = %+v", f, i, mt)
			}
			for j := range st.VMs {
				in, out := st.Hose(&st.VMs[j])
				want := model.VM{Name: st.VMs[j].Name, Tenant: st.Name, Host: st.VMs[j].Server, In: in, Out: out}
				if !reflect.DeepEqual(mt.VMs[j], want) {
					t.Errorf("%s: tenants[%d].vms[%d] = %+v; want %+v", f, i, j, mt.VMs[j], want)
				}
			}
		}
	}

	s, err := spec.Load("../scenarios/pulsar-fig12.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := s.Model()
	if v, tn, ok := m.VM("a1"); !ok || tn.Name != "A" || v.Host != "s1" || v.In != 3.2e9 || v.Out != 3.2e9 {
		t.Errorf("a1 = %+v, %v", v, ok)
	}
	if v, _, ok := m.VM("b2"); !ok || v.Host != "s2" || v.In != 400e6 {
		t.Errorf("b2 = %+v, %v", v, ok)
	}
	if a, ok := m.Appliance("enc"); !ok || !a.Hypervisor || a.Parallelism != 24 {
		t.Errorf("enc = %+v, %v", a, ok)
	}
	if g, ok := m.Tenants[0].VDC.Guarantee("enc"); !ok || g.Guarantee != 1.6e9 {
		t.Errorf("A's guarantee on enc = %+v, %v", g, ok)
	}

	// A copy: changing the model leaves the scenario as it was.
	m.Tenants[0].VDC.Appliances[0].Guarantee = 1
	m.Tenants[0].VDC.Policy = "maxmin"
	m.Appliances[1].VirtualCost[0].Points[0].Tokens = 1
	m.Tenants[0].VMs[0].Host = "s9"
	if s.Tenants[0].VDC.Appliances[0].Guarantee != 1.6e9 || s.Tenants[0].VDC.Policy != "drf" ||
		s.Appliances[1].VirtualCost[0].Points[0].Tokens != 8000 || s.Tenants[0].VMs[0].Server != "s1" {
		t.Error("the model shares data with the scenario")
	}
}

func TestModelAt(t *testing.T) {
	sc, err := spec.Parse([]byte(`
name: live
duration: 10s
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 2, edge: 1Gbps}}
tenants:
  - {name: A, guarantee: 100Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s2}]}
  - {name: B, guarantee: 100Mbps, join: 2s, leave: 6s, vms: [{name: b1, server: s1}, {name: b2, server: s2}]}
  - {name: C, guarantee: 100Mbps, join: 6s, vms: [{name: c1, server: s1}, {name: c2, server: s2}]}
workloads:
  - {tenant: B, kind: tcp, src: b1, dst: b2, start: 2s, stop: 6s}
  - {tenant: C, kind: tcp, src: c1, dst: c2, start: 7s}
`), "live.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.ModelChanges(); !reflect.DeepEqual(got, []time.Duration{2 * time.Second, 6 * time.Second}) {
		t.Errorf("ModelChanges = %v, want [2s 6s]", got)
	}
	for _, tc := range []struct {
		at   time.Duration
		want []string
	}{
		{0, []string{"A"}}, {2 * time.Second, []string{"A", "B"}}, {5999 * time.Millisecond, []string{"A", "B"}},
		{6 * time.Second, []string{"A", "C"}}, {9 * time.Second, []string{"A", "C"}},
	} {
		var got []string
		for _, tn := range sc.ModelAt(tc.at).Tenants {
			got = append(got, tn.Name)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ModelAt(%v) has %v, want %v", tc.at, got, tc.want)
		}
	}
	if n := len(sc.Model().Tenants); n != 3 {
		t.Errorf("Model has %d tenants, want all 3", n)
	}
}

// A tenant's phases are those of its workloads that have none of their
// own; bad tenant phases are reported at the tenant.
func TestTenantPhases(t *testing.T) {
	const head = `
name: phases
duration: 10s
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 2, edge: 1Gbps}}
tenants:
  - name: A
    guarantee: 100Mbps
    phases: [{start: 0s, stop: 2s}, {start: 5s, stop: 7s}]
    vms: [{name: a1, server: s1}, {name: a2, server: s2}]
workloads:
  - {tenant: A, kind: tcp, src: a1, dst: a2}
  - {tenant: A, kind: udp, src: a2, dst: a1, rate: 10Mbps, start: 1s}
`
	sc, err := spec.Parse([]byte(head), "phases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := sc.Workloads[0].Intervals(10 * time.Second)
	want := []spec.Phase{{Start: spec.Duration(0), Stop: spec.Duration(2 * time.Second)}, {Start: spec.Duration(5 * time.Second), Stop: spec.Duration(7 * time.Second)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inherited phases %v, want %v", got, want)
	}
	if got := sc.Workloads[1].Intervals(10 * time.Second); len(got) != 1 || got[0].Start != spec.Duration(time.Second) {
		t.Errorf("a workload's own start was overridden: %v", got)
	}
	_, err = spec.Parse([]byte(strings.Replace(head, "{start: 5s, stop: 7s}", "{start: 5s, stop: 4s}", 1)), "phases.yaml")
	if err == nil || !strings.Contains(err.Error(), "tenants[0].phases[1].stop: 4s is not after start 5s") {
		t.Errorf("bad tenant phase: %v", err)
	}
}
