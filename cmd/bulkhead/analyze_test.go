package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lossScenario is the first phase of scenarios/gatekeeper-full-link.yaml,
// 3 s long: A, B and C receive on one link, C blasts UDP.
const lossScenario = `name: loss-tiny
duration: 3s
seed: 1
topology:
  kind: two-tier
  two_tier: {racks: 1, servers_per_rack: 4, edge: 1Gbps}
tenants:
  - {name: A, guarantee: 500Mbps, vms: [{name: a-rx, server: s1}, {name: a-tx, server: s2}]}
  - {name: B, guarantee: 300Mbps, vms: [{name: b-rx, server: s1}, {name: b-tx, server: s3}]}
  - {name: C, guarantee: 150Mbps, vms: [{name: c-rx, server: s1}, {name: c-tx, server: s4}]}
workloads:
  - {name: a, tenant: A, kind: tcp, src: a-tx, dst: a-rx, connections: 4}
  - {name: b, tenant: B, kind: tcp, src: b-tx, dst: b-rx, connections: 4}
  - {name: c, tenant: C, kind: udp, src: c-tx, dst: c-rx, rate: 400Mbps}
mechanism: {name: gatekeeper}
`

// TestAnalyzeLoss runs `bulkhead analyze loss` on a short scenario at two
// loss levels: the tables on stdout, a progress line per level on stderr
// (none with -q), and with -o the CSV (a row per level and mechanism), the
// Markdown and the figures; bad arguments fail with a message.
func TestAnalyzeLoss(t *testing.T) {
	scen := t.TempDir()
	if err := os.WriteFile(filepath.Join(scen, "loss-tiny.yaml"), []byte(lossScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	mechs := []string{"elasticswitch", "gatekeeper", "seawall", "qshare", "gatekeeper (one-shot)"}
	for _, c := range []struct {
		name     string
		args     []string
		out      bool // -o DIR added
		code     int
		progress int    // progress lines on stderr
		stderr   string // in stderr
	}{
		{"two levels", []string{"--cases", "loss-tiny:A", "--loss", "0,0.5"}, true, 0, 2, ""},
		{"quiet, no files", []string{"--cases", "loss-tiny.yaml:A", "--loss", "0.5", "-q"}, false, 0, 0, ""},
		{"case without tenant", []string{"--cases", "loss-tiny"}, false, 1, 0, "not SCENARIO:TENANT"},
		{"no such scenario", []string{"--cases", "no-such:A"}, false, 1, 0, "--scenarios"},
		{"no such tenant", []string{"--cases", "loss-tiny:Z"}, false, 1, 0, `no tenant "Z"`},
		{"loss above 1", []string{"--cases", "loss-tiny:A", "--loss", "2"}, false, 1, 0, "not a fraction"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"analyze", "loss", "--scenarios", scen}, c.args...)
			dir := filepath.Join(t.TempDir(), "out")
			if c.out {
				args = append(args, "-o", dir)
			}
			stdout, stderr, code := run(t, "", args...)
			if code != c.code || !strings.Contains(stderr, c.stderr) {
				t.Fatalf("exit %d, want %d; stderr (want %q in it):\n%s", code, c.code, c.stderr, stderr)
			}
			if got := strings.Count(stderr, "analyze loss ["); got != c.progress {
				t.Errorf("%d progress lines, want %d:\n%s", got, c.progress, stderr)
			}
			if code != 0 {
				return
			}
			if !strings.Contains(stdout, "| loss | "+strings.Join(mechs, " | ")+" |") {
				t.Errorf("stdout has no table with a column per mechanism:\n%s", stdout)
			}
			if !c.out {
				return
			}
			f, err := os.Open(filepath.Join(dir, "loss.csv"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			rows, err := csv.NewReader(f).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1+2*len(mechs) {
				t.Fatalf("loss.csv: %d rows, want a header and %d", len(rows), 2*len(mechs))
			}
			for i, r := range rows[1:] {
				want := []string{"loss-tiny", "A", []string{"0", "0.5"}[i/len(mechs)], mechs[i%len(mechs)]}
				if strings.Join(r[:4], ",") != strings.Join(want, ",") {
					t.Errorf("loss.csv row %d: %v, want it to start %v", i+1, r, want)
				}
			}
			md, err := os.ReadFile(filepath.Join(dir, "loss.md"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stdout, string(md)) {
				t.Errorf("loss.md is not the table printed:\n%s", md)
			}
			for _, ext := range []string{"png", "svg"} {
				if fi, err := os.Stat(filepath.Join(dir, "loss-loss-tiny."+ext)); err != nil || fi.Size() == 0 {
					t.Errorf("figure .%s: %v", ext, err)
				}
			}
		})
	}
}
