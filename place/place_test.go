package place_test

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// load parses a scenario and builds its topology.
func load(t *testing.T, doc string) (*spec.Scenario, *topo.Topology) {
	t.Helper()
	s, err := spec.Parse([]byte(doc), "scenario.yaml")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	top, err := topo.FromSpec(s.Topology)
	if err != nil {
		t.Fatalf("topology: %v", err)
	}
	return s, top
}

// twoTier is a scenario on 2 racks × 2 servers with 1 Gbps edges and the
// given core, plus the tenants given.
func twoTier(core, tenants string) string {
	return fmt.Sprintf(`
name: adm
duration: 1s
topology:
  kind: two-tier
  two_tier: {racks: 2, servers_per_rack: 2, edge: 1Gbps, %s}
tenants:
%s
workloads: []
`, core, tenants)
}

func messages(err error) []string {
	var out []string
	for _, fe := range model.FieldErrors(err) {
		out = append(out, fe.Error())
	}
	return out
}

// reservations maps "link/tenant" to the reserved rate.
func reservations(t *testing.T, s *spec.Scenario, top *topo.Topology) map[string]float64 {
	t.Helper()
	res, err := place.Reservations(s, top)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, r := range res {
		sum := 0.0
		for _, x := range r.Tenants {
			out[r.Name+"/"+x.Tenant] = x.Rate
			sum += x.Rate
		}
		if sum != r.Total || r.Capacity != top.Links[r.Link].Capacity || r.Name != top.Links[r.Link].Name {
			t.Errorf("inconsistent %+v", r)
		}
	}
	return out
}

func TestAdmitFits(t *testing.T) {
	// ElasticSwitch's many-vs-one: two tenants with 450 Mbps on a 1 Gbps link.
	s, top := load(t, twoTier("core: 1Gbps", `
  - {name: X, guarantee: 450Mbps, vms: [{name: x, server: s1}, {name: x2, server: s3}]}
  - {name: Y, guarantee: 450Mbps, vms: [{name: y, server: s1}, {name: y1, server: s2}, {name: y2, server: s4}]}
`))
	if err := place.Admit(s, top); err != nil {
		t.Fatalf("Admit: %v", err)
	}
	got := reservations(t, s, top)
	want := map[string]float64{
		"s1->tor1/X": 450e6, "tor1->s1/X": 450e6, "tor1->core/X": 450e6, "core->tor1/X": 450e6,
		"core->tor2/X": 450e6, "tor2->core/X": 450e6, "s3->tor2/X": 450e6, "tor2->s3/X": 450e6,
		// Y: y on s1, y1 on s2 (same rack), y2 on s4.
		"s1->tor1/Y": 450e6, "tor1->s1/Y": 450e6, "s2->tor1/Y": 450e6, "tor1->s2/Y": 450e6,
		"tor1->core/Y": 450e6, "core->tor1/Y": 450e6, "core->tor2/Y": 450e6, "tor2->core/Y": 450e6,
		"s4->tor2/Y": 450e6, "tor2->s4/Y": 450e6,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reservations\n got %v\nwant %v", got, want)
	}
}

func TestAdmitOversubscribed(t *testing.T) {
	s, top := load(t, twoTier("core: 2Gbps", `
  - {name: A, guarantee: 600Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s3}]}
  - {name: B, guarantee: 600Mbps, vms: [{name: b1, server: s1}, {name: b2, server: s3}]}
`))
	want := []string{
		`scenario.yaml: admission: link "s1->tor1" oversubscribed: guarantees sum to 1.2 Gbps, capacity 1 Gbps (tenants A 600 Mbps, B 600 Mbps)`,
		`scenario.yaml: admission: link "tor1->s1" oversubscribed: guarantees sum to 1.2 Gbps, capacity 1 Gbps (tenants A 600 Mbps, B 600 Mbps)`,
		`scenario.yaml: admission: link "s3->tor2" oversubscribed: guarantees sum to 1.2 Gbps, capacity 1 Gbps (tenants A 600 Mbps, B 600 Mbps)`,
		`scenario.yaml: admission: link "tor2->s3" oversubscribed: guarantees sum to 1.2 Gbps, capacity 1 Gbps (tenants A 600 Mbps, B 600 Mbps)`,
	}
	err := place.Admit(s, top)
	if got := messages(err); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestAdmitMinOfSides: a hose reservation is the smaller of what can be
// sent and what can be received over a link.
func TestAdmitMinOfSides(t *testing.T) {
	// One VM in rack 1, three in rack 2, 400 Mbps each, on a 500 Mbps
	// core: summing the guarantees (1.6 Gbps) would reject; the hose needs
	// only min(400, 1200) = 400 Mbps each way.
	s, top := load(t, twoTier("core: 500Mbps", `
  - {name: A, guarantee: 400Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s3}, {name: a3, server: s3}, {name: a4, server: s4}]}
`))
	if err := place.Admit(s, top); err != nil {
		t.Fatalf("Admit: %v", err)
	}
	got := reservations(t, s, top)
	for link, want := range map[string]float64{
		"tor1->core/A": 400e6, "core->tor1/A": 400e6, "core->tor2/A": 400e6, "tor2->core/A": 400e6,
		"tor2->s3/A": 800e6, // two VMs on s3: min(3×400 from others, 2×400 into s3)
		"s3->tor2/A": 800e6,
		"tor2->s4/A": 400e6,
	} {
		if got[link] != want {
			t.Errorf("%s = %v; want %v", link, got[link], want)
		}
	}

	// Asymmetric hose: a1 only sends (out 800), the others only receive
	// (in 300 each). Out of rack 1: min(800, 900) = 800 > 500 Mbps core.
	s, top = load(t, twoTier("core: 500Mbps", `
  - name: A
    vms:
      - {name: a1, server: s1, out: 800Mbps}
      - {name: a2, server: s3, in: 300Mbps}
      - {name: a3, server: s3, in: 300Mbps}
      - {name: a4, server: s4, in: 300Mbps}
`))
	want := []string{
		`scenario.yaml: admission: link "tor1->core" oversubscribed: guarantees sum to 800 Mbps, capacity 500 Mbps (tenants A 800 Mbps)`,
		`scenario.yaml: admission: link "core->tor2" oversubscribed: guarantees sum to 800 Mbps, capacity 500 Mbps (tenants A 800 Mbps)`,
	}
	if got := messages(place.Admit(s, top)); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	got = reservations(t, s, top)
	if got["tor2->s3/A"] != 600e6 || got["tor2->s4/A"] != 300e6 || got["core->tor1/A"] != 0 || got["s1->tor1/A"] != 800e6 {
		t.Errorf("asymmetric reservations %v", got)
	}
}

func TestSameServerAndBestEffort(t *testing.T) {
	s, top := load(t, twoTier("core: 1Gbps", `
  - {name: A, guarantee: 900Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s1}]}
  - {name: C, best_effort: true, vms: [{name: c1, server: s1}, {name: c2, server: s4}]}
`))
	if err := place.Admit(s, top); err != nil {
		t.Fatal(err)
	}
	if res, err := place.Reservations(s, top); err != nil || len(res) != 0 {
		t.Errorf("Reservations = %+v, %v; want none", res, err)
	}
}

// TestMultipathUsesPairRoutes checks on a fat-tree that reservations sit
// exactly on the links of the routes the simulator uses (Route with
// PairHash), and that no other link carries any.
func TestMultipathUsesPairRoutes(t *testing.T) {
	s, top := load(t, `
name: ft
duration: 1s
seed: 3
topology: {kind: fat-tree, fat_tree: {k: 4, link: 1Gbps}}
tenants:
  - {name: A, guarantee: 100Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s5}, {name: a3, server: s9}, {name: a4, server: s16}]}
workloads: []
`)
	res, err := place.Reservations(s, top)
	if err != nil {
		t.Fatal(err)
	}
	onRoutes := map[int]bool{}
	vms := s.Tenants[0].VMs
	for _, a := range vms {
		for _, b := range vms {
			if a.Name == b.Name {
				continue
			}
			src, _ := top.Node(a.Server)
			dst, _ := top.Node(b.Server)
			for _, l := range top.Route(src.ID, dst.ID, topo.PairHash(s.Seed, a.Name, b.Name)) {
				onRoutes[l] = true
			}
		}
	}
	reserved := map[int]bool{}
	for _, r := range res {
		reserved[r.Link] = true
		// Four VMs of 100 Mbps: no link can need more than 3 × 100 Mbps.
		if r.Total <= 0 || r.Total > 300e6 {
			t.Errorf("%s: %v", r.Name, r.Total)
		}
	}
	if !reflect.DeepEqual(reserved, onRoutes) {
		t.Errorf("reserved links %v; routes use %v", reserved, onRoutes)
	}
	// Access links carry the VM's whole hose.
	up := top.Links[top.Uplink(mustID(t, top, "s1"))].Name
	for _, r := range res {
		if r.Name == up && r.Total != 100e6 {
			t.Errorf("%s = %v", up, r.Total)
		}
	}
	if err := place.Admit(s, top); err != nil {
		t.Errorf("Admit: %v", err)
	}
}

func mustID(t *testing.T, top *topo.Topology, name string) int {
	t.Helper()
	n, ok := top.Node(name)
	if !ok {
		t.Fatalf("no node %s", name)
	}
	return n.ID
}

func TestUnknownServer(t *testing.T) {
	s, _ := load(t, twoTier("core: 1Gbps", `
  - {name: A, guarantee: 1Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s2}]}
`))
	small, err := topo.TwoTier(1, 1, 1e9, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = place.Admit(s, small)
	want := `admission: scenario.yaml: tenants[0].vms[1].server: server "s2" is not in the topology`
	if err == nil || err.Error() != want {
		t.Errorf("error %v; want %q", err, want)
	}
}

// BenchmarkReservations: 1024 servers, 100 tenants of 30 VMs.
func BenchmarkReservations(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("name: big\nduration: 1s\ntopology: {kind: fat-tree, fat_tree: {k: 16, link: 10Gbps}}\ntenants:\n")
	vm := 0
	for t := range 100 {
		fmt.Fprintf(&sb, "  - name: T%d\n    guarantee: 50Mbps\n    vms:\n", t)
		for range 30 {
			fmt.Fprintf(&sb, "      - {name: v%d, server: s%d}\n", vm, (vm*37)%1024+1)
			vm++
		}
	}
	sb.WriteString("workloads: []\n")
	s, err := spec.Parse([]byte(sb.String()), "big.yaml")
	if err != nil {
		b.Fatal(err)
	}
	top, err := topo.FromSpec(s.Topology)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := place.Admit(s, top); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDocExamplesAdmitted checks that every complete scenario in
// docs/scenarios.md passes admission control.
func TestDocExamplesAdmitted(t *testing.T) {
	data, err := os.ReadFile("../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(data), "```yaml\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if !strings.HasPrefix(block, "name:") {
			continue
		}
		n++
		s, top := load(t, block)
		if err := place.Admit(s, top); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	if n == 0 {
		t.Error("no examples found")
	}
}

// TestAdmitWithHeadroom: a mechanism that keeps 5% of every server's
// access link free (Gatekeeper's LIM_IN) cannot take guarantees that fill
// an access link; core links keep their whole capacity.
func TestAdmitWithHeadroom(t *testing.T) {
	for _, tc := range []struct {
		name, tenants string
		want          []string
	}{
		{"fits in 95%", `
  - {name: A, guarantee: 500Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s3}]}
  - {name: B, guarantee: 450Mbps, vms: [{name: b1, server: s1}, {name: b2, server: s3}]}
`, nil},
		{"fills the link", `
  - {name: A, guarantee: 500Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s2}]}
  - {name: B, guarantee: 500Mbps, vms: [{name: b1, server: s1}, {name: b2, server: s2}]}
`, []string{
			`scenario.yaml: admission: link "s1->tor1" oversubscribed: guarantees sum to 1 Gbps, capacity 1 Gbps of which gatekeeper guarantees at most 950 Mbps (it keeps 5% of a server's link free) (tenants A 500 Mbps, B 500 Mbps)`,
			`scenario.yaml: admission: link "tor1->s1" oversubscribed: guarantees sum to 1 Gbps, capacity 1 Gbps of which gatekeeper guarantees at most 950 Mbps (it keeps 5% of a server's link free) (tenants A 500 Mbps, B 500 Mbps)`,
			`scenario.yaml: admission: link "s2->tor1" oversubscribed: guarantees sum to 1 Gbps, capacity 1 Gbps of which gatekeeper guarantees at most 950 Mbps (it keeps 5% of a server's link free) (tenants A 500 Mbps, B 500 Mbps)`,
			`scenario.yaml: admission: link "tor1->s2" oversubscribed: guarantees sum to 1 Gbps, capacity 1 Gbps of which gatekeeper guarantees at most 950 Mbps (it keeps 5% of a server's link free) (tenants A 500 Mbps, B 500 Mbps)`,
		}},
		{"core link keeps its capacity", `
  - {name: A, guarantee: 475Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s3}]}
  - {name: B, guarantee: 475Mbps, vms: [{name: b1, server: s2}, {name: b2, server: s4}]}
`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, top := load(t, twoTier("core: 950Mbps", tc.tenants))
			if err := place.Admit(s, top); err != nil {
				t.Fatalf("Admit: %v", err)
			}
			err := place.AdmitWithHeadroom(s, top, 0.05, "gatekeeper")
			if got := messages(err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}
