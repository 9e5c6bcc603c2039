package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// probeScenario is a small scenario for the validate/sim agreement tests:
// edge, the tenant T's guarantee, an extra line for T, and the mechanism
// line are filled in by each case.
func probeScenario(edge, guarantee, tenantExtra, mechanism string) string {
	return `name: probe
duration: 100ms
dt: 1ms
seed: 1
topology:
  kind: two-tier
  two_tier: {racks: 1, servers_per_rack: 3, edge: ` + edge + `}
tenants:
  - {name: T, guarantee: ` + guarantee + tenantExtra + `, vms: [{name: t-rx, server: s1}, {name: t-tx, server: s2}]}
  - {name: U, guarantee: 450Mbps, vms: [{name: u-rx, server: s1}, {name: u-tx, server: s3}]}
workloads:
  - {name: tcp, tenant: T, kind: tcp, src: t-tx, dst: t-rx}
  - {name: udp, tenant: U, kind: udp, src: u-tx, dst: u-rx, rate: 800Mbps}
mechanism: ` + mechanism + `
`
}

// validate must refuse, with the field path, everything that sim refuses
// before it simulates (and sim must refuse it before the run, leaving
// nothing behind); both agree on what is fine. The inputs are the ones
// probed in issue 13.
func TestValidateAgreesWithSim(t *testing.T) {
	es := "{name: elasticswitch}"
	cases := []struct {
		name     string
		scenario string
		flags    []string // for both validate and sim
		want     []string // in stderr of both; none: both succeed
	}{
		{"fine", probeScenario("1Gbps", "450Mbps", "", es), nil, nil},
		{"fine under other mechanisms", probeScenario("1Gbps", "450Mbps", "", es), []string{"--compare", "static,gatekeeper"}, nil},
		{"unknown mechanism", probeScenario("1Gbps", "450Mbps", "", "{name: nosuch}"), nil,
			[]string{`mechanism.name: unknown mechanism "nosuch"`}},
		{"hosefill headroom 2", probeScenario("1Gbps", "450Mbps", "", "{name: hosefill, params: {headroom: 2}}"), nil,
			[]string{"mechanism.params.headroom: must be in [0, 1), got 2"}},
		{"pulsar headroom 2", probeScenario("1Gbps", "450Mbps", "", "{name: pulsar, params: {headroom: 2}}"), nil,
			[]string{"mechanism.params.headroom: must be in [0, 0.5], got 2"}},
		{"gatekeeper headroom NaN", probeScenario("1Gbps", "450Mbps", "", "{name: gatekeeper, params: {headroom: .nan}}"), nil,
			[]string{"mechanism.params.headroom: expected a number, got NaN"}},
		{"gatekeeper negative period", probeScenario("1Gbps", "450Mbps", "", "{name: gatekeeper, params: {period: -10ms}}"), nil,
			[]string{"mechanism.params.period: expected a duration"}},
		{"elasticswitch negative period", probeScenario("1Gbps", "450Mbps", "", "{name: elasticswitch, params: {ra_period: -1ms}}"), nil,
			[]string{"mechanism.params.ra_period:"}},
		{"elasticswitch unknown parameter", probeScenario("1Gbps", "450Mbps", "", "{name: elasticswitch, params: {period: 1ms}}"), nil,
			[]string{"mechanism.params.period: unknown parameter"}},
		{"unknown mechanism on the command line", probeScenario("1Gbps", "450Mbps", "", es), []string{"--mechanism", "magic"},
			[]string{`mechanism "magic" (from the command line): mechanism.name: unknown mechanism "magic"`}},
		// Every bad mechanism of a comparison, before the first run.
		{"compare with two unknown", probeScenario("1Gbps", "450Mbps", "", es), []string{"--compare", "static,magic,none,wizard"},
			[]string{`unknown mechanism "magic"`, `unknown mechanism "wizard"`}},
		{"joining tenant under static", strings.Replace(probeScenario("1Gbps", "450Mbps", ", join: 50ms", es),
			"dst: t-rx}", "dst: t-rx, start: 50ms}", 1), []string{"--mechanism", "static"},
			[]string{"tenants[0]: joins or leaves during the run, but mechanism static cannot take tenants at runtime"}},
		// Numbers the evaluation cannot carry (the report held NaN or
		// +Inf, or the oracle failed, after the run): spec's range now
		// refuses them; runner.Check's oracle check is the backstop
		// (runner's TestCheckOracle).
		{"edge 1e308", probeScenario("1e308", "450Mbps", "", es), nil,
			[]string{"topology.two_tier.edge: 1e+308 bps is outside the representable range"}},
		{"edge 1e308 under static", probeScenario("1e308", "450Mbps", "", "{name: static}"), nil,
			[]string{"topology.two_tier.edge:"}},
		{"guarantee 1e-300", probeScenario("1Gbps", "1e-300", "", es), nil,
			[]string{"tenants[0].guarantee: 1e-300 bps is outside the representable range"}},
		{"bad scenario parameter with --compare", probeScenario("1Gbps", "450Mbps", "", "{name: hosefill, params: {headroom: 2}}"),
			[]string{"--compare", "hosefill,magic"},
			[]string{"mechanism.params.headroom: must be in [0, 1)"}},
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
			if err := os.WriteFile(file, []byte(c.scenario), 0o644); err != nil {
				t.Fatal(err)
			}
			vout, verr, vcode := run(t, "", append([]string{"validate"}, append(c.flags, file)...)...)
			outDir := filepath.Join(dir, "out", string(rune('a'+i)))
			_, serr, scode := run(t, "", append([]string{"sim", "-q", "--no-plots", "-o", outDir}, append(c.flags, file)...)...)
			if len(c.want) == 0 {
				if vcode != 0 || !strings.Contains(vout, file+": ok") {
					t.Errorf("validate: exit %d, stdout %q, stderr %q; want ok", vcode, vout, verr)
				}
				if scode != 0 {
					t.Errorf("sim: exit %d, stderr %q; want success", scode, serr)
				}
				return
			}
			if vcode == 0 {
				t.Errorf("validate: exit 0 (stdout %q); want non-zero", vout)
			}
			if scode == 0 {
				t.Errorf("sim: exit 0; want non-zero")
			}
			for _, w := range c.want {
				if !strings.Contains(verr, w) {
					t.Errorf("validate stderr %q does not mention %q", verr, w)
				}
				if !strings.Contains(serr, w) {
					t.Errorf("sim stderr %q does not mention %q", serr, w)
				}
			}
			if strings.Contains(serr, "evaluate") || strings.Contains(serr, "write report") {
				t.Errorf("sim failed after the run: %q", serr)
			}
			if _, err := os.Stat(outDir); !os.IsNotExist(err) {
				t.Errorf("failed sim left %s behind", outDir)
			}
		})
	}
}
