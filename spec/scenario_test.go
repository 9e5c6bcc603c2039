package spec_test

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/spec"
	"gopkg.in/yaml.v3"
)

// base is a small valid scenario: two racks of four servers; tenant A has
// two VMs, tenant B four.
const base = `
name: base
duration: 10s
topology:
  kind: two-tier
  two_tier: {racks: 2, servers_per_rack: 4, edge: 1Gbps}
tenants:
  - name: A
    guarantee: 200Mbps
    vms:
      - {name: a1, server: s1}
      - {name: a2, server: s5}
  - name: B
    guarantee: 100Mbps
    vms:
      - {name: b1, server: s1}
      - {name: b2, server: s2}
      - {name: b3, server: s5}
      - {name: b4, server: s6}
workloads:
  - {name: wa, tenant: A, kind: tcp, src: a1, dst: a2}
  - {name: wb, tenant: B, kind: udp, src: [b1, b2], dst: [b3, b4], rate: 50Mbps}
`

func parseBase(t *testing.T) *spec.Scenario {
	t.Helper()
	s, err := spec.Parse([]byte(base), "scenario.yaml")
	if err != nil {
		t.Fatalf("base scenario: %v", err)
	}
	return s
}

func messages(err error) []string {
	var out []string
	for _, fe := range spec.FieldErrors(err) {
		out = append(out, fe.Error())
	}
	return out
}

func TestFullScenarioRoundTrip(t *testing.T) {
	s, err := spec.Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.File != "testdata/full.yaml" || s.Name != "full" || s.Seed != 7 {
		t.Errorf("header: %+v", s)
	}
	if got := float64(s.Topology.TwoTier.Edge); got != 1e9 {
		t.Errorf("edge = %v", got)
	}
	if w := s.Workloads[1]; w.Name != "B-udp-2" || len(w.Phases) != 2 {
		t.Errorf("workload 1: %+v", w)
	}
	if got := s.Workloads[4].Sizes.CDF[1].Size; got != 100*1024 {
		t.Errorf("cdf size = %v", got)
	}
	out, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := spec.Parse(out, "testdata/full.yaml")
	if err != nil {
		t.Fatalf("re-parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(s, s2) {
		t.Errorf("round trip differs:\n%+v\n%+v\n%s", s, s2, out)
	}
}

func TestDefaults(t *testing.T) {
	s, err := spec.Parse([]byte(`
name: d
duration: 1s
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 2, edge: 1G}}
tenants: [{name: A, guarantee: 1M, vms: [{name: a1, server: s1}, {name: a2, server: s2}]}]
workloads:
  - {tenant: A, kind: tcp, src: a1, dst: a2}
  - {tenant: A, kind: onoff, src: a1, dst: a2, on: 1ms, off: 1ms}
  - {tenant: A, kind: flows, src: a1, dst: a2, arrival_rate: 1, sizes: {dist: pareto, mean: 1KB}}
  - {tenant: A, kind: flows, src: a1, dst: a2, arrival_rate: 1, sizes: {dist: lognormal, mean: 1KB}}
`), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Units != "Mbps" || s.DT.Std() != time.Millisecond || s.Seed != 1 || s.Mechanism.Name != "none" ||
		s.Outputs.Sample.Std() != 10*time.Millisecond || s.Outputs.Plots == nil || !*s.Outputs.Plots {
		t.Errorf("scenario defaults: %+v", s)
	}
	if s.Topology.TwoTier.Oversubscription != 1 {
		t.Errorf("oversubscription = %v", s.Topology.TwoTier.Oversubscription)
	}
	w := s.Workloads
	if w[0].Name != "A-tcp-1" || w[0].Connections != 1 || w[1].Transport != "tcp" || w[1].Connections != 1 {
		t.Errorf("workload defaults: %+v %+v", w[0], w[1])
	}
	if w[2].Sizes.Shape != 1.2 || w[3].Sizes.Shape != 1 {
		t.Errorf("shape defaults: %v %v", w[2].Sizes.Shape, w[3].Sizes.Shape)
	}
	if s.UnitScale() != 1e6 {
		t.Errorf("UnitScale = %v", s.UnitScale())
	}

	// A long dt raises the default sample; a unit is spelled canonically.
	s2 := &spec.Scenario{DT: spec.Duration(time.Second), Units: "gbps"}
	s2.ApplyDefaults()
	if s2.Outputs.Sample.Std() != time.Second || s2.Units != "Gbps" || s2.UnitScale() != 1e9 {
		t.Errorf("sample %v units %q", s2.Outputs.Sample, s2.Units)
	}
}

func TestAccessors(t *testing.T) {
	s, err := spec.Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		vm      string
		in, out float64
	}{
		{"a1", 200e6, 200e6}, // tenant symmetric
		{"a3", 300e6, 300e6}, // VM symmetric override
		{"b1", 100e6, 400e6}, // tenant in, VM out
		{"b2", 100e6, 50e6},  // tenant asymmetric
		{"c1", 0, 0},         // best effort
		{"zz", 0, 0},         // unknown
	}
	for _, c := range cases {
		if in, out := s.VMGuarantee(c.vm); in != c.in || out != c.out {
			t.Errorf("VMGuarantee(%s) = %v, %v; want %v, %v", c.vm, in, out, c.in, c.out)
		}
	}
	vm, tn, ok := s.LookupVM("b3")
	if !ok || vm.Server != "s7" || tn.Name != "B" {
		t.Errorf("LookupVM(b3) = %+v %+v %v", vm, tn, ok)
	}
	if ref := s.VMIndex()["a3"]; ref != (spec.VMRef{Tenant: 0, VM: 2}) {
		t.Errorf("VMIndex[a3] = %+v", ref)
	}
	if tn, ok := s.LookupTenant("C"); !ok || !tn.BestEffort {
		t.Errorf("LookupTenant(C) = %+v %v", tn, ok)
	}

	d := 10 * time.Second
	ph := func(a, b time.Duration) spec.Phase {
		return spec.Phase{Start: spec.Duration(a), Stop: spec.Duration(b)}
	}
	intervals := []struct {
		w    int
		want []spec.Phase
	}{
		{0, []spec.Phase{ph(0, d)}},
		{1, []spec.Phase{ph(time.Second, 3*time.Second), ph(5*time.Second, d)}},
		{2, []spec.Phase{ph(2*time.Second, 8*time.Second)}},
	}
	for _, c := range intervals {
		if got := s.Workloads[c.w].Intervals(d); !reflect.DeepEqual(got, c.want) {
			t.Errorf("workload %d Intervals = %v; want %v", c.w, got, c.want)
		}
	}
	w := spec.Workload{Src: spec.StringList{"a", "b"}, Dst: spec.StringList{"b", "c"}}
	if got, want := w.Pairs(), [][2]string{{"a", "b"}, {"a", "c"}, {"b", "c"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Pairs = %v; want %v", got, want)
	}

	names := []struct {
		top  spec.Topology
		want []string
	}{
		{spec.Topology{Kind: "two-tier", TwoTier: &spec.TwoTier{Racks: 2, ServersPerRack: 2}}, []string{"s1", "s2", "s3", "s4"}},
		{spec.Topology{Kind: "fat-tree", FatTree: &spec.FatTree{K: 2}}, []string{"s1", "s2"}},
		{spec.Topology{Kind: "explicit", Explicit: &spec.Explicit{Nodes: []spec.Node{{Name: "h", Kind: "server"}, {Name: "x", Kind: "switch"}, {Name: "g", Kind: "server"}}}}, []string{"h", "g"}},
	}
	for _, c := range names {
		if got := c.top.ServerNames(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s ServerNames = %v; want %v", c.top.Kind, got, c.want)
		}
	}
}

func TestParams(t *testing.T) {
	p := spec.Params{"alpha": 0.4, "n": 3, "x": "x", "on": true, "gp": "60ms", "min": "0.5Mbps", "bits": 1000, "f": 2.5}
	if v, err := p.Float("alpha", 0); v != 0.4 || err != nil {
		t.Errorf("alpha = %v, %v", v, err)
	}
	if v, err := p.Float("n", 0); v != 3 || err != nil {
		t.Errorf("n as float = %v, %v", v, err)
	}
	if v, err := p.Float("missing", 7); v != 7 || err != nil {
		t.Errorf("default = %v, %v", v, err)
	}
	if v, err := p.Int("n", 0); v != 3 || err != nil {
		t.Errorf("n = %v, %v", v, err)
	}
	if v, err := p.Bool("on", false); !v || err != nil {
		t.Errorf("on = %v, %v", v, err)
	}
	if v, err := p.String("x", ""); v != "x" || err != nil {
		t.Errorf("x = %v, %v", v, err)
	}
	if v, err := p.Duration("gp", 0); v != 60*time.Millisecond || err != nil {
		t.Errorf("gp = %v, %v", v, err)
	}
	if v, err := p.Rate("min", 0); v != 0.5e6 || err != nil {
		t.Errorf("min = %v, %v", v, err)
	}
	if v, err := p.Rate("bits", 0); v != 1000 || err != nil {
		t.Errorf("bits = %v, %v", v, err)
	}
	bad := []struct {
		err  error
		want string
	}{
		{second(p.Float("x", 0)), `mechanism.params.x: expected a number, got "x"`},
		{second(p.Int("f", 0)), `mechanism.params.f: expected an integer, got 2.5`},
		{second(p.Bool("n", false)), `mechanism.params.n: expected true or false, got 3`},
		{second(p.String("n", "")), `mechanism.params.n: expected a string, got 3`},
		{second(p.Duration("n", 0)), `mechanism.params.n: expected a duration such as "60ms", got 3`},
		{second(p.Rate("x", 0)), `mechanism.params.x: expected a rate such as "450Mbps", got "x"`},
		{p.Check("alpha", "n"), "mechanism.params.bits: unknown parameter (known: alpha, n)\n" +
			"mechanism.params.f: unknown parameter (known: alpha, n)\n" +
			"mechanism.params.gp: unknown parameter (known: alpha, n)\n" +
			"mechanism.params.min: unknown parameter (known: alpha, n)\n" +
			"mechanism.params.on: unknown parameter (known: alpha, n)\n" +
			"mechanism.params.x: unknown parameter (known: alpha, n)"},
		{spec.Params{"k": 1}.Check(), "mechanism.params.k: unknown parameter (the mechanism takes none)"},
	}
	for _, c := range bad {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("error %v; want %q", c.err, c.want)
		}
	}
	if err := p.Check("alpha", "n", "x", "on", "gp", "min", "bits", "f"); err != nil {
		t.Errorf("Check all known: %v", err)
	}
	var fe *spec.FieldError
	if _, err := p.Float("x", 0); !errors.As(err, &fe) || fe.Path != "mechanism.params.x" {
		t.Errorf("not a FieldError: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"unknown field", "name: x\nduration: 1s\ntopolgy: {}\n",
			[]string{`s.yaml:3: topolgy: unknown field "topolgy"`}},
		{"nested unknown field and bad values", `name: x
duration: 1s
topology:
  kind: two-tier
  two_tier:
    racks: many
    edge: 1Gbs
tenants:
  - name: A
    gaurantee: 1G
    vms: [{name: a, server: s1, out: -1M}]
`, []string{
			`s.yaml:6: topology.two_tier.racks: expected an integer, got "many"`,
			`s.yaml:7: topology.two_tier.edge: invalid rate "1Gbs": unknown unit "Gbs" (use bps, Kbps, Mbps, Gbps, Tbps)`,
			`s.yaml:10: tenants[0].gaurantee: unknown field "gaurantee"`,
			`s.yaml:11: tenants[0].vms: invalid rate "-1M": must not be negative`,
		}},
		{"bad duration", "name: x\nduration: 30\n",
			[]string{`s.yaml:2: duration: invalid duration "30": want a number with a unit such as "30s" or "1ms"`}},
		{"wrong shape", "name: x\ntenants: {a: 1}\n",
			[]string{`s.yaml:2: tenants: expected a list, got a mapping`}},
		{"syntax", "name: x\n  duration: 1s\n",
			[]string{`s.yaml:2: mapping values are not allowed in this context`}},
		{"duplicate key", "name: x\nname: y\n",
			[]string{`s.yaml:2: name: mapping key "name" already defined at line 1`}},
		{"empty", "", []string{`s.yaml: empty scenario`}},
		{"two documents", "name: x\n---\nname: y\n", []string{`s.yaml:2: more than one YAML document; a scenario file holds exactly one`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := spec.Parse([]byte(c.doc), "s.yaml")
			if got := messages(err); !reflect.DeepEqual(got, c.want) {
				t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := spec.Load("testdata/nope.yaml")
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "load scenario: ") {
		t.Errorf("Load missing = %v", err)
	}
}
