package sim_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Agents of a mech.Concurrent mechanism step in parallel, and large
// runs add up their accumulators and samples in parallel; the results do
// not depend on how many workers.
func TestWorkersSameResults(t *testing.T) {
	t.Run("600 pairs", func(t *testing.T) { workersSameResults(t, 64, 600, 300*time.Millisecond) })
	// enough pairs for the simulator's own loops to be split
	t.Run("5000 pairs", func(t *testing.T) { workersSameResults(t, 256, 5000, 100*time.Millisecond) })
}

func workersSameResults(t *testing.T, vms, conns int, d time.Duration) {
	s, err := runner.DatacenterScenario(vms, 4, conns, d)
	if err != nil {
		t.Fatal(err)
	}
	sameForWorkers(t, s, "elasticswitch", func(in *eval.Input) bool { return len(in.Pairs) == conns })
}

// sameForWorkers runs s under mechanism mech with 1, 2 and 5 workers and
// fails unless every run has samples, passes ok, and has the results of
// the first.
func sameForWorkers(t *testing.T, s *runner.Scenario, mech string, ok func(*eval.Input) bool) {
	t.Helper()
	res, err := runner.Reservations(s)
	if err != nil {
		t.Fatal(err)
	}
	var first *eval.Input
	for _, w := range []int{1, 2, 5} {
		m, err := all.New(mech, nil)
		if err != nil {
			t.Fatal(err)
		}
		in, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m, Reservations: res, Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		if len(in.Samples) == 0 || !ok(in) {
			t.Fatalf("%s, %d workers: %d samples, %d pairs, %d flows completed: not what the run should give", mech, w, len(in.Samples), len(in.Pairs), len(in.FCTs))
		}
		if first == nil {
			first = in
			continue
		}
		if !reflect.DeepEqual(first, in) {
			t.Errorf("%s, %d workers: results differ from one worker's", mech, w)
		}
	}
}

// The same with what the datacenter run lacks, on a run large enough for
// the simulator's loops over connections and resources to be split: four
// TCP connections per pair, UDP, Poisson flows that come and go (their
// slots reused), and links that fill under no isolation (congestion,
// losses) as under ElasticSwitch.
func TestWorkersSameResultsMixed(t *testing.T) {
	s := mixedScenario(t, 128, "300ms")
	for _, mech := range []string{"none", "elasticswitch"} {
		sameForWorkers(t, s, mech, func(in *eval.Input) bool { return len(in.FCTs) > 0 })
	}
}

// mixedScenario is TestWorkersSameResultsMixed's run with vms VMs (a
// multiple of 32, 4 to a server in two racks) for duration d: tenants of
// 32 VMs, every VM with four TCP connections to each of its next 10
// peers, a 300 Mbit/s UDP flow to the 11th and Poisson flows of 50 KB
// (200 a second) to the 12th.
func mixedScenario(tb testing.TB, vms int, d string) *runner.Scenario {
	tb.Helper()
	const size, peers = 32, 10
	var b strings.Builder
	fmt.Fprintf(&b, "name: mixed\nduration: %s\ndt: 1ms\nseed: 3\n", d)
	fmt.Fprintf(&b, "topology:\n  kind: two-tier\n  two_tier: {racks: 2, servers_per_rack: %d, edge: 10Gbps, oversubscription: 2}\ntenants:\n", vms/8)
	name := func(t, j int) string { return fmt.Sprintf("t%d-%d", t, j) }
	for tn := range vms / size {
		fmt.Fprintf(&b, "  - name: T%d\n    guarantee: 200Mbps\n    vms:\n", tn)
		for j := range size {
			fmt.Fprintf(&b, "      - {name: %s, server: s%d}\n", name(tn, j), (j*(vms/size)+tn)%(vms/4)+1)
		}
	}
	b.WriteString("workloads:\n")
	for tn := range vms / size {
		for j := range size {
			for d := 1; d <= peers; d++ {
				fmt.Fprintf(&b, "  - {tenant: T%d, kind: tcp, connections: 4, src: %s, dst: %s}\n", tn, name(tn, j), name(tn, (j+d)%size))
			}
			fmt.Fprintf(&b, "  - {tenant: T%d, kind: udp, rate: 300Mbps, src: %s, dst: %s}\n", tn, name(tn, j), name(tn, (j+peers+1)%size))
			fmt.Fprintf(&b, "  - {tenant: T%d, kind: flows, arrival_rate: 200, sizes: {dist: exponential, mean: 50KB}, src: %s, dst: %s}\n", tn, name(tn, j), name(tn, (j+peers+2)%size))
		}
	}
	sc, err := spec.Parse([]byte(b.String()), "mixed.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := runner.Prepare(sc)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkMixed: 100 ms of mixedScenario at 256 VMs (12,800 TCP
// connections, UDP, Poisson flows) under each mechanism named, in
// simulated seconds per wall second. Gatekeeper's host schedulers make
// every re-solve split classes (alloc's Newton iteration).
//
//	go test ./sim -run '^$' -bench 'Mixed' -benchtime 1x
func BenchmarkMixed(b *testing.B) {
	s := mixedScenario(b, 256, "100ms")
	res, err := runner.Reservations(s)
	if err != nil {
		b.Fatal(err)
	}
	for _, mech := range []string{"none", "elasticswitch", "gatekeeper"} {
		b.Run(mech, func(b *testing.B) {
			for b.Loop() {
				m, err := all.New(mech, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m, Reservations: res}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(0.1*float64(b.N)/b.Elapsed().Seconds(), "sim-s/s")
		})
	}
}
