package testbed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chaosEvent is one agent failure of a chaos run: at At the agent of
// Server gets Sig; For later it is started again (SIGTERM, SIGKILL) or
// let go on (SIGSTOP).
type chaosEvent struct {
	At, For time.Duration
	Server  string
	Sig     syscall.Signal
}

// chaosSchedule draws n failures, one at a time, from a seeded stream:
// each of a random server's agent, with a random signal, for 0.5–2.5 s,
// 0.5–1.5 s after the previous one ended, from 1.5 s on.
func chaosSchedule(seed uint64, servers []string, n int) []chaosEvent {
	r := rand.New(rand.NewPCG(seed, 0xc4a05))
	sigs := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, syscall.SIGSTOP}
	at := 1500 * time.Millisecond
	var out []chaosEvent
	for range n {
		at += time.Duration(500+r.IntN(1000)) * time.Millisecond
		e := chaosEvent{At: at, For: time.Duration(500+r.IntN(2000)) * time.Millisecond,
			Server: servers[r.IntN(len(servers))], Sig: sigs[r.IntN(len(sigs))]}
		out = append(out, e)
		at += e.For
	}
	return out
}

func (e chaosEvent) String() string {
	return fmt.Sprintf("%s %s at %.1fs for %.1fs", e.Server, sigName(e.Sig), e.At.Seconds(), e.For.Seconds())
}

// run injects the failures.
func chaosRun(events []chaosEvent) func(ctx context.Context, c *RunControl) error {
	return func(ctx context.Context, c *RunControl) error {
		for _, e := range events {
			if err := c.Sleep(ctx, e.At); err != nil {
				return err
			}
			if err := c.SignalAgent(e.Server, e.Sig); err != nil {
				return fmt.Errorf("%v: %w", e, err)
			}
			if e.Sig != syscall.SIGSTOP {
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := c.WaitAgent(wctx, e.Server)
				cancel()
				if err != nil {
					return fmt.Errorf("%v: the agent did not exit: %w", e, err)
				}
			}
			if err := c.Sleep(ctx, e.At+e.For); err != nil {
				return err
			}
			if e.Sig == syscall.SIGSTOP {
				if err := c.SignalAgent(e.Server, syscall.SIGCONT); err != nil {
					return fmt.Errorf("%v: %w", e, err)
				}
			} else if err := c.StartAgent(e.Server); err != nil {
				return fmt.Errorf("%v: %w", e, err)
			}
		}
		return nil
	}
}

// TestChaos: real-connections for 15 s (A 600 and B 200 Mbps from one
// sending server; A receives on s2, B on s3) under each host mechanism,
// with 20% of the agents' control messages lost and four agent failures
// one after another at random moments (fixed seed): any server's agent
// stopped, killed or frozen for 0.5–2.5 s, then started again or let go
// on. Every tenant averages ≥ 95% of its guarantee over the run and gets
// ≥ 90% in its worst 1-second window; nothing is left behind.
func TestChaos(t *testing.T) {
	needRoot(t)
	sc, tp := loadScenario(t, "../scenarios/real-connections.yaml")
	sc.Duration = 15 * sc.Duration / 10
	events := chaosSchedule(1, []string{"s1", "s2", "s3"}, 4)
	var sched []string
	for _, e := range events {
		sched = append(sched, e.String())
	}
	t.Logf("failures: %s; 20%% of control messages lost", strings.Join(sched, "; "))
	guarantees := map[string]float64{"A": 600, "B": 200}
	for _, mechanism := range []string{"elasticswitch", "gatekeeper"} {
		t.Run(mechanism, func(t *testing.T) {
			prefix := testPrefix(t)
			in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix},
				Mechanism: mechanism, Workload: WorkloadBuiltin, LoseMessages: 0.2, During: chaosRun(events)})
			if err != nil {
				t.Fatal(err)
			}
			requireGone(t, prefix)
			end := time.Duration(sc.Duration)
			for _, tenant := range []string{"A", "B"} {
				g := guarantees[tenant]
				mean := meanIn(in, tenant, time.Second, end)
				lo, at := worstWindow(in, tenant, end)
				t.Logf("%s %s: mean %.0f Mbps (%.2f of its guarantee %.0f) from 1 s; worst 1-s window %.0f (%.2f) at %v",
					mechanism, tenant, mean, mean/g, g, lo, lo/g, at)
				if mean < 0.95*g {
					t.Errorf("%s averaged %.0f Mbps, below 95%% of its %.0f guarantee", tenant, mean, g)
				}
				if lo < 0.9*g {
					t.Errorf("%s: %.0f Mbps in the window from %v, below 90%% of its %.0f guarantee", tenant, lo, at, g)
				}
			}
		})
	}
}
