package sim_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// header is a one-rack topology: three servers on a 1 Gbps ToR; two
// tenants with 450 Mbps guarantees whose receivers share s3's link.
const header = `
name: t
duration: 2s
dt: 1ms
topology:
  kind: two-tier
  two_tier: {racks: 1, servers_per_rack: 3, edge: 1Gbps}
tenants:
  - name: A
    guarantee: 450Mbps
    vms: [{name: a-tx, server: s1}, {name: a-rx, server: s3}]
  - name: B
    guarantee: 450Mbps
    vms: [{name: b-tx, server: s2}, {name: b-rx, server: s3}]
`

// prepare parses and prepares a test scenario.
func prepare(t *testing.T, yaml string) *runner.Scenario {
	t.Helper()
	sc, err := spec.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := runner.Prepare(sc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t *testing.T, yaml, mechanism string) *eval.Input {
	t.Helper()
	s := prepare(t, yaml)
	m, err := all.New(mechanism, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// meanRate returns the mean rate (Mbps) of the pair src->dst over samples
// whose end time lies in [from, to) seconds.
func meanRate(t *testing.T, in *eval.Input, src, dst string, from, to float64) float64 {
	t.Helper()
	idx := -1
	for i, p := range in.Pairs {
		if p.Src == src && p.Dst == dst {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("no pair %s->%s", src, dst)
	}
	sum, n := 0.0, 0
	for _, s := range in.Samples {
		if sec := s.T.Seconds(); sec > from && sec <= to {
			sum += s.Pairs[idx].Rate
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no samples in (%g, %g]", from, to)
	}
	return sum / float64(n) / 1e6
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestPhysics(t *testing.T) {
	cases := []struct {
		name      string
		workloads string
		mechanism string
		wantA     float64 // Mbps
		wantB     float64
	}{
		{"TCP shares per connection 1:4", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx, connections: 1}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx, connections: 4}`, "none", 200, 800},
		{"equal TCP", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx, connections: 2}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx, connections: 2}`, "none", 500, 500},
		{"TCP application cap leaves the rest", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx, rate: 100Mbps}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx}`, "none", 100, 900},
		{"UDP below capacity squeezes TCP", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx, connections: 8}
  - {tenant: B, kind: udp, src: b-tx, dst: b-rx, rate: 700Mbps}`, "none", 300, 700},
		{"UDP overload starves TCP", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
  - {tenant: B, kind: udp, src: b-tx, dst: b-rx, rate: 3Gbps}`, "none", 0, 1000},
		{"two UDP share in proportion to offered load", `
  - {tenant: A, kind: udp, src: a-tx, dst: a-rx, rate: 300Mbps}
  - {tenant: B, kind: udp, src: b-tx, dst: b-rx, rate: 900Mbps}`, "none", 250, 750},
		// B's 1.5 Gbps is cut to 1 Gbps on its own access link first, then
		// meets A's 500 Mbps at the receivers' link: 1:2.
		{"UDP drops hop by hop", `
  - {tenant: A, kind: udp, src: a-tx, dst: a-rx, rate: 500Mbps}
  - {tenant: B, kind: udp, src: b-tx, dst: b-rx, rate: 1500Mbps}`, "none", 1000.0 / 3, 2000.0 / 3},
		{"static holds guarantees", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx, connections: 1}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx, connections: 4}`, "static", 450, 450},
		{"static caps UDP at its reservation", `
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
  - {tenant: B, kind: udp, src: b-tx, dst: b-rx, rate: 3Gbps}`, "static", 450, 450},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := run(t, header+"workloads:"+c.workloads+"\n", c.mechanism)
			a := meanRate(t, in, "a-tx", "a-rx", 0.1, 2)
			b := meanRate(t, in, "b-tx", "b-rx", 0.1, 2)
			if !near(a, c.wantA, 1) || !near(b, c.wantB, 1) {
				t.Errorf("A %.1f, B %.1f Mbps; want %.0f, %.0f", a, b, c.wantA, c.wantB)
			}
		})
	}
}

func TestPhasesAndOnOff(t *testing.T) {
	in := run(t, header+`workloads:
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx, phases: [{start: 500ms, stop: 1s}, {start: 1500ms}]}
`, "none")
	for _, c := range []struct {
		from, to float64
		a, b     float64
	}{{0, 0.5, 1000, 0}, {0.5, 1, 500, 500}, {1, 1.5, 1000, 0}, {1.5, 2, 500, 500}} {
		a := meanRate(t, in, "a-tx", "a-rx", c.from, c.to)
		b := meanRate(t, in, "b-tx", "b-rx", c.from, c.to)
		if !near(a, c.a, 1) || !near(b, c.b, 1) {
			t.Errorf("(%g,%g]: A %.1f B %.1f, want %g %g", c.from, c.to, a, b, c.a, c.b)
		}
	}

	in = run(t, header+`workloads:
  - {tenant: B, kind: onoff, src: b-tx, dst: b-rx, on: 100ms, off: 300ms}
`, "none")
	// On a quarter of the time at the full 1 Gbps.
	if b := meanRate(t, in, "b-tx", "b-rx", 0, 2); !near(b, 250, 5) {
		t.Errorf("on/off mean %.1f Mbps, want 250", b)
	}
}

func TestFlowsFinishWithFCTs(t *testing.T) {
	in := run(t, header+`workloads:
  - tenant: A
    kind: flows
    src: a-tx
    dst: a-rx
    arrival_rate: 20
    sizes: {dist: fixed, mean: 1MB}
`, "none")
	if len(in.FCTs) < 20 {
		t.Fatalf("%d flows finished in 2 s at 20 flows/s, want ≥ 20", len(in.FCTs))
	}
	for _, f := range in.FCTs {
		// 1 MB alone at 1 Gbps takes 8 ms; overlapping flows take longer
		// but never shorter.
		if d := f.Duration.Seconds(); d < 0.008-1e-6 {
			t.Fatalf("flow of %g B finished in %v, faster than the link allows", f.Bytes, f.Duration)
		}
	}
	// Conservation: bytes delivered equal the sizes of finished flows plus
	// those still in flight at the end (at 20 flows/s of 8 ms each,
	// rarely more than one; up to 5 allowed).
	total := 0.0
	for _, s := range in.Samples {
		total += s.Pairs[0].Rate * in.Interval.Seconds() / 8
	}
	done := float64(len(in.FCTs)) * 1e6
	if total < done-1 || total > done+5e6 {
		t.Errorf("delivered %.0f B, finished flows %.0f B", total, done)
	}
}

func TestDeterministic(t *testing.T) {
	y := header + `workloads:
  - {tenant: A, kind: flows, src: a-tx, dst: a-rx, arrival_rate: 50, sizes: {dist: pareto, mean: 500KB}}
  - {tenant: B, kind: onoff, src: b-tx, dst: b-rx, on: 50ms, off: 50ms, exponential: true}
`
	a, b := run(t, y, "none"), run(t, y, "none")
	if len(a.FCTs) != len(b.FCTs) || len(a.FCTs) == 0 {
		t.Fatalf("FCT counts differ or empty: %d vs %d", len(a.FCTs), len(b.FCTs))
	}
	for i := range a.Samples {
		for j := range a.Samples[i].Pairs {
			if a.Samples[i].Pairs[j] != b.Samples[i].Pairs[j] {
				t.Fatalf("sample %d pair %d differs", i, j)
			}
		}
	}
	other := strings.Replace(y, "duration: 2s", "duration: 2s\nseed: 7", 1)
	c := run(t, other, "none")
	if len(c.FCTs) == len(a.FCTs) && c.FCTs[0] == a.FCTs[0] {
		t.Errorf("a different seed gave the same flows")
	}
}

// Two VMs of one server talk through the hypervisor's virtual switch.
func TestSameServerPair(t *testing.T) {
	in := run(t, strings.Replace(header, "{name: a-rx, server: s3}", "{name: a-rx, server: s1}", 1)+`workloads:
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
`, "none")
	if r := meanRate(t, in, "a-tx", "a-rx", 0.1, 2); !near(r, sim.VSwitchCapacity/1e6, 1) {
		t.Errorf("same-server pair at %.0f Mbps, want the virtual switch's %.0f", r, sim.VSwitchCapacity/1e6)
	}
}
