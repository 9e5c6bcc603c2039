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

// TestPlace checks the wiring of `bulkhead place`: flags, files, the
// scenario's tenants reserved first, the table, JSON to stdout or to a file
// (written whole or not at all), and errors on stderr with exit 1. The
// report and the topology file are tested in place and spec.
func TestPlace(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"topo.yaml":    "kind: two-tier\ntwo_tier: {racks: 2, servers_per_rack: 2, edge: 1Gbps, core: 300Mbps}\n",
		"tenants.yaml": "- {name: b, vms: 4, guarantee: 200Mbps}\n- {name: a, vms: 2, guarantee: 200Mbps}\n",
		"more.yaml":    "- {name: C, vms: 3, guarantee: 600Mbps}\n- {name: D, vms: 2, guarantee: 100Mbps}\n",
		"bad.yaml":     "- {name: a, vms: 2, guarantee: 1Mbps}\n- {name: b, vms: 2, gaurantee: 1Mbps}\n",
		"badtopo.yaml": "kind: fat-tree\nfat_tree: {k: 3, link: 1Gbps}\n",
		"typo.yaml":    "kind: fat-tree\nfat_tree: {k: 4, lnk: 1Gbps}\n",
		"old.json":     "previous result\n",
	})
	p := func(name string) string { return filepath.Join(dir, name) }
	scenario := filepath.Join("..", "..", "scenarios", "pulsar-fig3-network.yaml")
	topoArgs := func(more ...string) []string {
		return append([]string{"--topology", p("topo.yaml"), "--tenants", p("tenants.yaml")}, more...)
	}
	cases := []struct {
		name   string
		args   []string
		stdout string // what stdout holds (exit 0), or
		stderr string // what stderr holds (exit 1, nothing on stdout)
	}{
		{"table", topoArgs("--slots", "1"),
			"oktopus placement on two-tier 2 racks × 2 servers, edge 1 Gbps, core 300 Mbps: 4 servers × 1 slots, seed 1\n", ""},
		{"scenario", []string{"--scenario", scenario, "--tenants", p("more.yaml"), "--slots", "3", "--algorithm", "qshare"},
			"qshare placement on two-tier 1 racks × 3 servers, edge 1 Gbps, oversubscription 1: 3 servers × 3 slots, seed 1\nreserved first (scenario): A, B\n", ""},
		{"json", topoArgs("--queues", "2", "-o", "-"), `"queues": 2,`, ""},
		{"file", topoArgs("-o", p("out.json")), "; written to " + p("out.json") + "\n", ""},

		{"no topology", []string{"--tenants", p("tenants.yaml")}, "", "give --topology FILE or --scenario FILE"},
		{"both", topoArgs("--scenario", p("topo.yaml")), "", "--topology and --scenario are exclusive"},
		{"no tenants", []string{"--topology", p("topo.yaml")}, "", "--tenants FILE is required"},
		{"algorithm", topoArgs("--algorithm", "magic"), "", `--algorithm: expected oktopus or qshare, got "magic"`},
		{"slots", topoArgs("--slots", "0"), "", "--slots: expected at least 1, got 0"},
		{"k", topoArgs("--k", "0"), "", "--k: expected at least 1, got 0"},
		{"queues", topoArgs("--queues", "0"), "", "--queues: expected at least 1, got 0"},
		{"seed with scenario", []string{"--scenario", scenario, "--tenants", p("more.yaml"), "--seed", "2"}, "", "--seed: a scenario's own seed is used with --scenario"},
		{"weight", topoArgs("--bandwidth-weight", "2"), "", `--bandwidth-weight: expected a number in [0, 1] or "load", got "2"`},
		{"missing tenants", []string{"--topology", p("topo.yaml"), "--tenants", p("nope.yaml")}, "", "--tenants: open " + p("nope.yaml")},
		{"missing topology", []string{"--topology", p("nope.yaml"), "--tenants", p("tenants.yaml")}, "", "--topology: open " + p("nope.yaml")},
		{"bad request", []string{"--topology", p("topo.yaml"), "--tenants", p("bad.yaml")}, "", p("bad.yaml") + `:2: [1].gaurantee: unknown field "gaurantee"`},
		{"bad topology", []string{"--topology", p("badtopo.yaml"), "--tenants", p("tenants.yaml")}, "", p("badtopo.yaml") + ": topology.fat_tree.k: must be an even number of at least 2, got 3"},
		{"topology typo", []string{"--topology", p("typo.yaml"), "--tenants", p("tenants.yaml")}, "", p("typo.yaml") + `:2: fat_tree: unknown field "lnk"`},
		{"scenario does not fit", []string{"--scenario", scenario, "--tenants", p("more.yaml"), "--slots", "1"}, "",
			scenario + `: tenants[1]: cannot reserve with --slots 1: place: tenant "B": server "s3": 1 VMs, 0 free slots`},
		{"output dir", topoArgs("-o", p("no/such/dir.json")), "", "-o: open " + p("no/such")},
		{"keeps output", []string{"--topology", p("topo.yaml"), "--tenants", p("bad.yaml"), "-o", p("old.json")}, "", "gaurantee"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := run(t, "", append([]string{"place"}, c.args...)...)
			switch {
			case c.stderr == "" && (code != 0 || !strings.Contains(out, c.stdout)):
				t.Errorf("exit %d, stdout %q lacks %q; stderr %q", code, out, c.stdout, errs)
			case c.stderr != "" && (code != 1 || out != "" || !strings.Contains(errs, c.stderr)):
				t.Errorf("exit %d, stdout %q, stderr %q lacks %q", code, out, errs, c.stderr)
			}
		})
	}
	for name, check := range map[string]func([]byte) bool{
		"out.json": func(b []byte) bool { return json.Valid(b) && strings.Contains(string(b), `"algorithm": "oktopus"`) },
		"old.json": func(b []byte) bool { return string(b) == "previous result\n" },
	} {
		if b, err := os.ReadFile(p(name)); err != nil || !check(b) {
			t.Errorf("%s: %q %v", name, b, err)
		}
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
