package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/runner"
)

func benchSim(b *testing.B, s *runner.Scenario) {
	b.Helper()
	benchSimUnder(b, s, "none")
}

func benchSimUnder(b *testing.B, s *runner.Scenario, mechanism string) {
	b.Helper()
	for b.Loop() {
		if _, _, err := runner.SimSpeed(context.Background(), s, mechanism, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(time.Duration(s.Spec.Duration).Seconds()*float64(b.N)/b.Elapsed().Seconds(), "sim-s/s")
}

// BenchmarkSim100Conn: 100 bulk TCP connections, 10 s at 1 ms ticks.
func BenchmarkSim100Conn(b *testing.B) {
	s, err := runner.BenchScenario(100, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	benchSim(b, s)
}

// BenchmarkManyToOne300: ElasticSwitch's 300-sender many-to-one, 30 s at
// 1 ms ticks.
func BenchmarkManyToOne300(b *testing.B) {
	s, err := runner.ManyToOneScenario(300, 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	benchSim(b, s)
}

// BenchmarkDatacenter10K: 1,024 VMs (4 per server), 10,000 bulk TCP
// connections under ElasticSwitch, 1 s at 1 ms ticks (issue 15's
// datacenter-scale case; bulkhead bench sim --vms 1024 --connections
// 10000 --mechanism elasticswitch for longer runs).
func BenchmarkDatacenter10K(b *testing.B) {
	s, err := runner.DatacenterScenario(1024, 4, 10000, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	benchSimUnder(b, s, "elasticswitch")
}

func TestBenchScenariosValid(t *testing.T) {
	if _, err := runner.BenchScenario(100, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := runner.ManyToOneScenario(300, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := runner.BenchScenario(30, time.Second); err == nil {
		t.Fatal("30 connections (not a multiple of 20) accepted")
	}
	s, err := runner.DatacenterScenario(64, 4, 100, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Spec.Workloads); n != 100 {
		t.Errorf("datacenter scenario of 100 connections has %d workloads", n)
	}
	for _, bad := range [][3]int{{60, 4, 100}, {64, 3, 100}, {64, 4, 64*31 + 1}, {64, 4, 0}} {
		if _, err := runner.DatacenterScenario(bad[0], bad[1], bad[2], time.Second); err == nil {
			t.Errorf("datacenter scenario of %d VMs, %d per server, %d connections accepted", bad[0], bad[1], bad[2])
		}
	}
}
