package sim_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// probe is a test mechanism: every agent pings every other host each
// step and records what it observes and receives.
type probe struct{ log *probeLog }

type probeLog struct {
	egress   []mech.PairObs
	received []time.Duration // send times of received pings
	arrived  []time.Duration // when they were handed over
	sent     int
}

func (probe) Name() string                    { return "probe" }
func (probe) Capabilities() mech.Capabilities { return mech.Capabilities{} }
func (p probe) NewAgent(env mech.Env) (mech.Agent, error) {
	var peers []string
	seen := map[string]bool{env.Host: true}
	for _, v := range env.VMs {
		if !seen[v.Host] {
			seen[v.Host] = true
			peers = append(peers, v.Host)
		}
	}
	return &probeAgent{log: p.log, peers: peers}, nil
}

type probeAgent struct {
	log   *probeLog
	peers []string
}

func (a *probeAgent) Period() time.Duration { return 10 * time.Millisecond }
func (a *probeAgent) Step(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	a.log.egress = append(a.log.egress, obs.Egress...)
	for _, m := range inbox {
		a.log.received = append(a.log.received, m.Body.(time.Duration))
		a.log.arrived = append(a.log.arrived, obs.Now)
	}
	var act mech.Actions
	for _, p := range a.peers {
		act.Messages = append(act.Messages, mech.Message{To: p, Body: obs.Now})
		a.log.sent++
	}
	return act
}

func runProbe(t *testing.T, yaml string) *probeLog {
	t.Helper()
	s := prepare(t, yaml)
	log := &probeLog{}
	if _, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: probe{log}}); err != nil {
		t.Fatal(err)
	}
	return log
}

const twoTCP = `workloads:
  - {tenant: A, kind: tcp, src: a-tx, dst: a-rx}
  - {tenant: B, kind: tcp, src: b-tx, dst: b-rx}
`

func TestECNMarksInsteadOfLosses(t *testing.T) {
	for _, ecn := range []bool{false, true} {
		y := header + twoTCP
		if ecn {
			y += "network: {ecn: true}\n"
		}
		log := runProbe(t, y)
		var loss, marks float64
		for _, o := range log.egress {
			loss += o.Losses
			marks += o.Marks
		}
		if ecn && (marks == 0 || loss != 0) || !ecn && (loss == 0 || marks != 0) {
			t.Errorf("ecn %v: losses %.0f, marks %.0f", ecn, loss, marks)
		}
	}
}

func TestControlDelayAndLoss(t *testing.T) {
	base := runProbe(t, header+twoTCP)
	if len(base.received) == 0 || len(base.received) < base.sent-10 {
		t.Fatalf("received %d of %d pings without loss", len(base.received), base.sent)
	}
	for i := range base.received {
		if d := base.arrived[i] - base.received[i]; d != 10*time.Millisecond {
			t.Fatalf("ping sent at %v delivered at %v: want the next step", base.received[i], base.arrived[i])
		}
	}
	delayed := runProbe(t, header+twoTCP+"network: {control_delay: 25ms}\n")
	for i := range delayed.received {
		if d := delayed.arrived[i] - delayed.received[i]; d != 30*time.Millisecond {
			t.Fatalf("ping delayed 25 ms delivered after %v: want the first step after it arrives (30 ms)", d)
		}
	}
	lossy := runProbe(t, header+twoTCP+"network: {control_loss: 0.3}\n")
	frac := 1 - float64(len(lossy.received))/float64(len(base.received))
	if math.Abs(frac-0.3) > 0.05 {
		t.Errorf("lost %.3f of pings, want ≈ 0.3", frac)
	}
	if _, err := spec.Parse([]byte(header+twoTCP+"network: {control_loss: 1.5}\n"), "x.yaml"); err == nil ||
		!strings.Contains(err.Error(), "network.control_loss: 1.5 is not a probability") {
		t.Errorf("bad control_loss: %v", err)
	}
}
