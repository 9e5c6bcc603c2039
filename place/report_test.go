package place_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// reportRun is a stream to report on: a topology file, or a scenario whose
// tenants are reserved first, and the requests.
type reportRun struct {
	topology string // a topology file's contents (spec.ParseTopology), or
	scenario string // a scenario file
	tenants  string
	alg      place.Algorithm
	slots    int
}

func (r reportRun) report(t *testing.T) *place.Report {
	t.Helper()
	var (
		st       spec.Topology
		sc       *spec.Scenario
		seed     int64 = spec.DefaultSeed
		reserved []string
		err      error
	)
	if r.scenario != "" {
		if sc, err = spec.Load(r.scenario); err != nil {
			t.Fatal(err)
		}
		st, seed = sc.Topology, sc.Seed
	} else if st, err = spec.ParseTopology([]byte(r.topology), "topo.yaml"); err != nil {
		t.Fatal(err)
	}
	top, err := topo.FromSpec(st)
	p := mustPlacer(t, top, err, place.Options{Algorithm: r.alg, Slots: r.slots, Seed: seed})
	if sc != nil {
		for i := range sc.Tenants {
			if err := p.Reserve(&sc.Tenants[i]); err != nil {
				t.Fatal(err)
			}
			reserved = append(reserved, sc.Tenants[i].Name)
		}
	}
	reqs, err := place.ParseRequests([]byte(r.tenants), "tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	events, err := place.Run(p, reqs)
	if err != nil {
		t.Fatal(err)
	}
	return place.BuildReport(p, events, place.ReportOptions{Algorithm: r.alg, Topology: st, Slots: r.slots, Seed: seed, Queues: 8, Reserved: reserved})
}

const (
	twoTierTopo = "kind: two-tier\ntwo_tier: {racks: 2, servers_per_rack: 2, edge: 1Gbps, core: 300Mbps}\n"
	fatTreeTopo = "topology:\n  kind: fat-tree\n  fat_tree: {k: 4, link: 1Gbps}\nname: ignored\n"
)

// TestReport builds reports of streams and checks them and their table.
func TestReport(t *testing.T) {
	cases := []struct {
		name  string
		run   reportRun
		table []string // lines the table holds
		check func(t *testing.T, r *place.Report)
	}{
		{
			name: "two-tier, oktopus, rejections",
			run: reportRun{topology: twoTierTopo, alg: place.Oktopus, slots: 1, tenants: `- {name: b, vms: 4, guarantee: 200Mbps}
- {name: a, vms: 2, guarantee: 200Mbps}
- {name: c, vms: 4, guarantee: 100Mbps, departure: 3}
- {name: d, vms: 1, guarantee: 1Gbps, arrival: 4}
`},
			table: []string{
				"oktopus placement on two-tier 2 racks × 2 servers, edge 1 Gbps, core 300 Mbps: 4 servers × 1 slots, seed 1",
				`0     b       rejected  4                 link "tor1->core" would carry 400 Mbps of 300 Mbps`,
				"0     a       accepted  2    1      tor1  s1×1 s2×1",
				"0     c       rejected  4                 no server slots left (needs 4, 2 free)",
				"4     d       accepted  1    0      s3    s3×1",
				"s1->tor1  200 Mbps  1 Gbps    1: a 200 Mbps",
				"switch ports: 8; most tenants on one port: 1; ports with more tenants than 8 queues: 0",
				"switch ports by tenant count (tenants:ports): 0:6 1:2",
				"4 requests: 2 accepted, 2 rejected (link 1, slots 1), 0 departed; 2 tenants placed, 75.0% of slots",
			},
			check: func(t *testing.T, r *place.Report) {
				b, c := r.Events[0], r.Events[2]
				if b.Resource != "link" || b.Link != "tor1->core" || b.Load != 400e6 || b.Capacity != 300e6 || b.Layer != nil {
					t.Errorf("b: %+v", b)
				}
				if c.Resource != "slots" || c.Need != 4 || c.Free != 2 {
					t.Errorf("c: %+v", c)
				}
				if a := r.Events[1]; a.Alpha != nil || *a.Layer != 1 || len(a.Layout) != 2 || a.Layout[0] != (place.ReportVM{Name: "a-1", Server: "s1", In: 200e6, Out: 200e6}) {
					t.Errorf("a: %+v", a)
				}
				want := []place.ReportTenant{{Name: "a", VMs: 2, Layout: "s1×1 s2×1"}, {Name: "d", VMs: 1, Layout: "s3×1"}}
				if !slices.Equal(r.Tenants, want) || r.Summary.ByResource["link"] != 1 || r.Summary.SlotLoad != 0.75 {
					t.Errorf("tenants %+v, summary %+v", r.Tenants, r.Summary)
				}
			},
		},
		{
			name: "fat-tree, qshare, departures and WCS",
			run: reportRun{topology: fatTreeTopo, alg: place.QShare, slots: 2, tenants: `[{"name": "a", "vms": 4, "in": "300Mbps", "out": "100Mbps", "departure": 2},
				{"name": "b", "vms": 6, "guarantee": "100Mbps", "arrival": 1, "wcs": 0.5},
				{"name": "c", "vms": 2, "guarantee": "1Gbps", "arrival": 3}]`},
			table: []string{"qshare placement on fat-tree k=4, 1 Gbps links: 16 servers × 2 slots, seed 1", "2     a       departed"},
			check: func(t *testing.T, r *place.Report) {
				if r.Algorithm != "qshare" || !r.Hierarchical || r.Servers != 16 || len(r.Events) != 4 || r.Summary.Accepted != 3 || r.Summary.Departed != 1 {
					t.Fatalf("report %+v", r)
				}
				if e := r.Events[2]; e.Tenant != "a" || e.Event != "departed" {
					t.Errorf("event 2: %+v", e)
				}
				b := r.Events[1]
				perServer := map[string]int{}
				for _, v := range b.Layout {
					perServer[v.Server]++
				}
				for s, n := range perServer {
					if n > 3 {
						t.Errorf("b: %d VMs on %s, WCS 0.5 allows 3", n, s)
					}
				}
				if b.Alpha == nil || b.Layer == nil || len(b.Reservations) == 0 {
					t.Errorf("b: %+v", b)
				}
				if r.Ports.SwitchPorts != 80 || r.Ports.Queues != 8 || len(r.Links) == 0 || len(r.Ports.PerPort) == 0 {
					t.Errorf("ports %+v, links %d", r.Ports, len(r.Links))
				}
			},
		},
		{
			name: "scenario reserved first",
			run: reportRun{scenario: "../scenarios/pulsar-fig3-network.yaml", slots: 3,
				tenants: "- {name: C, vms: 3, guarantee: 600Mbps}\n- {name: D, vms: 2, guarantee: 100Mbps}\n"},
			table: []string{
				"reserved first (scenario): A, B",
				`C       rejected  3                 link "s1->tor1" would carry 1.05 Gbps of 1 Gbps`,
				"D       accepted  2    0      s1    s1×2",
				"tor1->s3  900 Mbps  1 Gbps    2: A 450 Mbps, B 450 Mbps",
			},
			check: func(t *testing.T, r *place.Report) {
				if r.Summary.Current != 3 || len(r.Tenants) != 3 || r.Tenants[2].Name != "D" {
					t.Errorf("tenants %+v", r.Tenants)
				}
			},
		},
		{
			name: "best effort only, no links",
			run:  reportRun{topology: twoTierTopo, slots: 4, tenants: "- {name: be, vms: 3, best_effort: true}\n"},
			table: []string{
				"0     be      accepted  3    0      s1    s1×3",
				"no link reservations",
				"switch ports by tenant count (tenants:ports): 0:8",
			},
			check: func(t *testing.T, r *place.Report) {
				if len(r.Links) != 0 || len(r.Ports.PerPort) != 0 || r.Ports.MaxTenants != 0 {
					t.Errorf("links %+v, ports %+v", r.Links, r.Ports)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.run.report(t)
			var buf bytes.Buffer
			if err := r.WriteTable(&buf); err != nil {
				t.Fatal(err)
			}
			for _, want := range c.table {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, buf.String())
				}
			}
			c.check(t, r)
			checkJSON(t, r)
		})
	}
}

// checkJSON checks that the JSON form of r reads back as r, with "->" in
// link names as is.
func checkJSON(t *testing.T, r *place.Report) {
	t.Helper()
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back place.Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if again, _ := back.JSON(); !bytes.Equal(again, js) {
		t.Errorf("JSON does not read back:\n%s\n%s", js, again)
	}
	if len(r.Links) > 0 && (!bytes.Contains(js, []byte(`"link": "s1->`)) || bytes.Contains(js, []byte(`\u003e`))) {
		t.Errorf("link names escaped:\n%s", js)
	}
}

// TestReportDocExample renders the example of docs/placement.md and
// compares it with the table there.
func TestReportDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/placement.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "    time  tenant") })
	if start < 0 {
		t.Fatal("no example table in docs/placement.md")
	}
	var want []string
	for _, l := range lines[start:] {
		if l == "" {
			break
		}
		want = append(want, strings.TrimPrefix(l, "    "))
	}
	topoFile, err := os.ReadFile("testdata/fat-tree-k4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tenants, err := os.ReadFile("testdata/tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := reportRun{topology: string(topoFile), tenants: string(tenants), alg: place.QShare, slots: 2}.report(t)
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(buf.String(), "\n\n")
	table, _, _ = strings.Cut(table, "\n\n")
	var got []string
	for _, line := range strings.Split(table, "\n") {
		got = append(got, strings.TrimRight(line, " "))
	}
	if !slices.Equal(got, want) {
		t.Errorf("table:\n%s\ndocs/placement.md:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n--; w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestReportWriteError: WriteTable returns the first write error.
func TestReportWriteError(t *testing.T) {
	r := reportRun{topology: twoTierTopo, slots: 1, tenants: "- {name: a, vms: 2, guarantee: 1Mbps}\n"}.report(t)
	for _, n := range []int{0, 3} {
		if err := r.WriteTable(&failWriter{n: n}); err == nil || err.Error() != "disk full" {
			t.Errorf("after %d writes: %v", n, err)
		}
	}
}
