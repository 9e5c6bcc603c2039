package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/runner"
)

func benchSim(b *testing.B, s *runner.Scenario) {
	b.Helper()
	for b.Loop() {
		if _, _, err := runner.SimSpeed(context.Background(), s, "none"); err != nil {
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
}
