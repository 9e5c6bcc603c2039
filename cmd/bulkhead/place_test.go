package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const placeTopo = `kind: two-tier
two_tier: {racks: 2, servers_per_rack: 2, edge: 1Gbps, core: 300Mbps}
`

const placeTenants = `- {name: b, vms: 4, guarantee: 200Mbps}
- {name: a, vms: 2, guarantee: 200Mbps}
- {name: c, vms: 4, guarantee: 100Mbps, departure: 3}
- {name: d, vms: 1, guarantee: 1Gbps, arrival: 4}
`

func TestPlaceTable(t *testing.T) {
	dir := writeFiles(t, map[string]string{"topo.yaml": placeTopo, "tenants.yaml": placeTenants})
	out, errs, code := run(t, "", "place", "--topology", filepath.Join(dir, "topo.yaml"), "--tenants", filepath.Join(dir, "tenants.yaml"), "--slots", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"oktopus placement on two-tier 2 racks × 2 servers, edge 1 Gbps, core 300 Mbps: 4 servers × 1 slots, seed 1",
		`0     b       rejected  4                 link "tor1->core" would carry 400 Mbps of 300 Mbps`,
		"0     a       accepted  2    1      tor1  s1×1 s2×1",
		"0     c       rejected  4                 no server slots left (needs 4, 2 free)",
		"4     d       accepted  1    0      s3    s3×1",
		"s1->tor1  200 Mbps  1 Gbps    1: a 200 Mbps",
		"switch ports: 8; most tenants on one port: 1; ports with more tenants than 8 queues: 0",
		"4 requests: 2 accepted, 2 rejected (link 1, slots 1), 0 departed; 2 tenants placed, 75.0% of slots",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPlaceJSON(t *testing.T) {
	dir := writeFiles(t, map[string]string{"topo.yaml": "topology:\n  kind: fat-tree\n  fat_tree: {k: 4, link: 1Gbps}\nname: ignored\n",
		"tenants.json": `[{"name": "a", "vms": 4, "in": "300Mbps", "out": "100Mbps", "departure": 2},
			{"name": "b", "vms": 6, "guarantee": "100Mbps", "arrival": 1, "wcs": 0.5},
			{"name": "c", "vms": 2, "guarantee": "1Gbps", "arrival": 3}]`})
	res := filepath.Join(dir, "out.json")
	out, errs, code := run(t, "", "place", "--topology", filepath.Join(dir, "topo.yaml"), "--tenants", filepath.Join(dir, "tenants.json"),
		"--algorithm", "qshare", "--slots", "2", "-o", res)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "3 requests: 3 accepted, 0 rejected") || !strings.Contains(out, "written to "+res) {
		t.Errorf("stdout %q", out)
	}
	data, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Algorithm    string `json:"algorithm"`
		Hierarchical bool   `json:"hierarchical"`
		Servers      int    `json:"servers"`
		Events       []struct {
			Tenant, Event, Root string
			Layer               *int
			Alpha               *float64
			Layout              []struct{ Name, Server string }
			Reservations        []struct {
				Link string
				Rate float64
			}
		} `json:"events"`
		Links []struct {
			Link     string  `json:"link"`
			Reserved float64 `json:"reserved"`
		} `json:"links"`
		Ports struct {
			SwitchPorts int `json:"switch_ports"`
			PerPort     []struct {
				Port    string
				Tenants int
			} `json:"per_port"`
		} `json:"ports"`
		Summary struct {
			Accepted, Departed int
		} `json:"summary"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Algorithm != "qshare" || !rep.Hierarchical || rep.Servers != 16 || len(rep.Events) != 4 || rep.Summary.Accepted != 3 || rep.Summary.Departed != 1 {
		t.Fatalf("report %+v", rep)
	}
	if e := rep.Events[2]; e.Tenant != "a" || e.Event != "departed" {
		t.Errorf("event 2: %+v", e)
	}
	b := rep.Events[1]
	perServer := map[string]int{}
	for _, v := range b.Layout {
		perServer[v.Server]++
	}
	for s, n := range perServer {
		if n > 3 {
			t.Errorf("b: %d VMs on %s, WCS 0.5 allows 3", n, s)
		}
	}
	if b.Alpha == nil || b.Layer == nil || len(b.Reservations) == 0 || !strings.Contains(string(data), `"link": "s`) {
		t.Errorf("b: %+v", b)
	}
	if rep.Ports.SwitchPorts != 80 || len(rep.Links) == 0 || len(rep.Ports.PerPort) == 0 {
		t.Errorf("ports %+v, links %d", rep.Ports, len(rep.Links))
	}
}

func TestPlaceScenario(t *testing.T) {
	dir := writeFiles(t, map[string]string{"more.yaml": "- {name: C, vms: 3, guarantee: 600Mbps}\n- {name: D, vms: 2, guarantee: 100Mbps}\n"})
	scenario := filepath.Join("..", "..", "scenarios", "pulsar-fig3-network.yaml")
	out, errs, code := run(t, "", "place", "--scenario", scenario, "--tenants", filepath.Join(dir, "more.yaml"), "--slots", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"reserved first (scenario): A, B",
		`C       rejected  3                 link "s1->tor1" would carry 1.05 Gbps of 1 Gbps`,
		"D       accepted  2    0      s1    s1×2",
		"tor1->s3  900 Mbps  1 Gbps    2: A 450 Mbps, B 450 Mbps",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The scenario's own placement must fit the slots.
	_, errs, code = run(t, "", "place", "--scenario", scenario, "--tenants", filepath.Join(dir, "more.yaml"), "--slots", "1")
	if code == 0 || !strings.Contains(errs, scenario+`: tenants[1]: cannot reserve with --slots 1: place: tenant "B": server "s3": 1 VMs, 0 free slots`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

func TestPlaceErrors(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"topo.yaml":    placeTopo,
		"tenants.yaml": placeTenants,
		"bad.yaml":     "- {name: a, vms: 2, guarantee: 1Mbps}\n- {name: b, vms: 2, gaurantee: 1Mbps}\n",
		"badtopo.yaml": "kind: fat-tree\nfat_tree: {k: 3, link: 1Gbps}\n",
		"typo.yaml":    "kind: fat-tree\nfat_tree: {k: 4, lnk: 1Gbps}\n",
		"old.json":     "previous result\n",
	})
	p := func(name string) string { return filepath.Join(dir, name) }
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no topology", []string{"--tenants", p("tenants.yaml")}, "give --topology FILE or --scenario FILE"},
		{"both", []string{"--topology", p("topo.yaml"), "--scenario", p("topo.yaml"), "--tenants", p("tenants.yaml")}, "--topology and --scenario are exclusive"},
		{"no tenants", []string{"--topology", p("topo.yaml")}, "--tenants FILE is required"},
		{"algorithm", []string{"--topology", p("topo.yaml"), "--tenants", p("tenants.yaml"), "--algorithm", "magic"}, `--algorithm: expected oktopus or qshare, got "magic"`},
		{"slots", []string{"--topology", p("topo.yaml"), "--tenants", p("tenants.yaml"), "--slots", "0"}, "--slots: expected at least 1, got 0"},
		{"weight", []string{"--topology", p("topo.yaml"), "--tenants", p("tenants.yaml"), "--bandwidth-weight", "2"}, `--bandwidth-weight: expected a number in [0, 1] or "load", got "2"`},
		{"missing file", []string{"--topology", p("topo.yaml"), "--tenants", p("nope.yaml")}, "--tenants: open " + p("nope.yaml")},
		{"bad request", []string{"--topology", p("topo.yaml"), "--tenants", p("bad.yaml")}, p("bad.yaml") + `:2: [1].gaurantee: unknown field "gaurantee"`},
		{"bad topology", []string{"--topology", p("badtopo.yaml"), "--tenants", p("tenants.yaml")}, p("badtopo.yaml") + ": topology.fat_tree.k: must be an even number of at least 2, got 3"},
		{"topology typo", []string{"--topology", p("typo.yaml"), "--tenants", p("tenants.yaml")}, p("typo.yaml") + `:2: unknown field "lnk"`},
		{"output dir", []string{"--topology", p("topo.yaml"), "--tenants", p("tenants.yaml"), "-o", p("no/such/dir.json")}, "-o: open " + p("no/such")},
		{"keeps output", []string{"--topology", p("topo.yaml"), "--tenants", p("bad.yaml"), "-o", p("old.json")}, "gaurantee"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := run(t, "", append([]string{"place"}, c.args...)...)
			if code == 0 {
				t.Fatalf("exit 0; stdout %q", out)
			}
			if out != "" {
				t.Errorf("stdout %q", out)
			}
			if !strings.Contains(errs, c.want) {
				t.Errorf("stderr %q lacks %q", errs, c.want)
			}
		})
	}
	if data, _ := os.ReadFile(p("old.json")); string(data) != "previous result\n" {
		t.Errorf("-o file changed on error: %q", data)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if out, _, code := run(t, "", "place", "--help"); code != 0 || !strings.Contains(out, "Usage:") {
		t.Errorf("help: %d %q", code, out)
	}
}
