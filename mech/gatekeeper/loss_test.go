package gatekeeper_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/gatekeeper"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Control-message loss (issue 13, soft state): with 30% of control
// messages lost (network.control_loss, drawn from the scenario's seed),
// every tenant of the shipped isolation scenarios — the protected ones
// and the aggressor — stays ≥ 90% compliant under Gatekeeper's defaults.
// A notification lost for good (one message per decision, repeat: false)
// left the protected tenant at 0.88 in gatekeeper-full-link and 0.86 in
// gatekeeper-churn.
func TestSimControlLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const loss = 0.3
	for _, file := range []string{
		"gatekeeper-full-link.yaml",
		"gatekeeper-churn.yaml",
		"gatekeeper-incast.yaml",
		"gatekeeper-fig5-rx.yaml",
		"gatekeeper-real-rx.yaml",
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			r := run(t, load(t, file, func(sc *spec.Scenario) { sc.Network.ControlLoss = loss }), gk)
			var b strings.Builder
			fmt.Fprintf(&b, "%s at %.0f%% control loss: work conservation %.3f", file, 100*loss, r.WorkConservation)
			for _, tr := range r.Tenants {
				fmt.Fprintf(&b, "; %s compliance %.3f", tr.Name, tr.Compliance)
				if tr.Compliance < 0.9 {
					t.Errorf("%s at %.0f%% control loss: tenant %s compliance %.3f, want ≥ 0.90 (mean %.1f Mbps, guarantee %.1f)",
						file, 100*loss, tr.Name, tr.Compliance, tr.MeanThroughput, tr.Guarantee)
				}
			}
			t.Log(b.String())
		})
	}
}

// Every receiver silent (issue 13, fail to guarantees): with every
// control message lost, no sender hears from any receiver, and after
// peer_timeout every VM sending to another host is held at its egress
// guarantee. Before, silence read as "no congestion" and this was
// Gatekeeper without feedback: the protected tenant at 0.33
// (gatekeeper-full-link), 0.40 (gatekeeper-churn, B), 0.50
// (gatekeeper-incast) and 0.71 (gatekeeper-fig5-rx). Not
// gatekeeper-real-rx: B's two senders, each at its 215 Mbps guarantee,
// send 430 Mbps into b-rx's 215 Mbps ingress guarantee (an incast the
// hose model does not guarantee, which only the receiver's floors can
// split), leaving A's TCP 520 of its 645 Mbps — it stays at the
// no-feedback baseline (0.20).
func TestSimSilentReceivers(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, file := range []string{
		"gatekeeper-full-link.yaml",
		"gatekeeper-churn.yaml",
		"gatekeeper-incast.yaml",
		"gatekeeper-fig5-rx.yaml",
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			r := run(t, load(t, file, func(sc *spec.Scenario) { sc.Network.ControlLoss = 1 }), gk)
			var b strings.Builder
			fmt.Fprintf(&b, "%s with every control message lost: work conservation %.3f", file, r.WorkConservation)
			for _, tr := range r.Tenants {
				fmt.Fprintf(&b, "; %s compliance %.3f", tr.Name, tr.Compliance)
				if tr.Compliance < 0.9 {
					t.Errorf("%s with every control message lost: tenant %s compliance %.3f, want ≥ 0.90 (mean %.1f Mbps, guarantee %.1f)",
						file, tr.Name, tr.Compliance, tr.MeanThroughput, tr.Guarantee)
				}
			}
			t.Log(b.String())
		})
	}
}

// spy is Gatekeeper keeping its agents, to read their counters after a
// run.
type spy struct {
	*gatekeeper.Mechanism
	agents []*gatekeeper.Agent
}

func (s *spy) NewAgent(env mech.Env) (mech.Agent, error) {
	a, err := s.Mechanism.NewAgent(env)
	if err == nil {
		s.agents = append(s.agents, a.(*gatekeeper.Agent))
	}
	return a, err
}

// Heartbeats keep live receivers heard: with no control message lost,
// and with 30% lost (all 10 heartbeats of a 300 ms peer timeout lost:
// 0.3^10 = 6·10⁻⁶ per heartbeat), no sender takes a receiver for
// silent in the shipped isolation scenarios. Every control message lost
// makes every receiver silent to its senders.
func TestSimHeartbeats(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, file := range []string{
		"gatekeeper-full-link.yaml",
		"gatekeeper-churn.yaml",
		"gatekeeper-incast.yaml",
		"gatekeeper-fig5-rx.yaml",
		"gatekeeper-real-rx.yaml",
	} {
		for _, loss := range []float64{0, 0.3, 1} {
			s := load(t, file, func(sc *spec.Scenario) { sc.Network.ControlLoss = loss })
			m, err := gatekeeper.New(s.Spec.Mechanism.Params)
			if err != nil {
				t.Fatal(err)
			}
			sp := &spy{Mechanism: m}
			if _, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: sp}); err != nil {
				t.Fatal(err)
			}
			silences, beats := 0, 0
			for _, a := range sp.agents {
				silences += a.Silences()
				beats += a.Heartbeats()
			}
			t.Logf("%s at %.0f%% control loss: %d heartbeats, %d silences", file, 100*loss, beats, silences)
			if beats == 0 {
				t.Errorf("%s at %.0f%% control loss: no heartbeat sent", file, 100*loss)
			}
			if loss < 1 && silences > 0 {
				t.Errorf("%s at %.0f%% control loss: %d receivers taken for silent, want none", file, 100*loss, silences)
			}
			if loss == 1 && silences == 0 {
				t.Errorf("%s with every control message lost: no receiver taken for silent", file)
			}
		}
	}
}
