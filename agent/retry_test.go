package agent

import (
	"errors"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// counterValue returns the value of one of the agent's counters.
func counterValue(t *testing.T, a *Agent, name string) float64 {
	t.Helper()
	mfs, err := a.met.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// stepper steps an agent at 10 ms intervals of a synthetic clock.
type stepper struct {
	a   *Agent
	now time.Time
}

func newStepper(a *Agent) *stepper {
	s := &stepper{a: a, now: time.Unix(1000, 0)}
	a.start = s.now
	return s
}

func (s *stepper) step() error {
	s.now = s.now.Add(10 * time.Millisecond)
	return s.a.step(s.now)
}

// TestRefusedWritesRetried: the mechanism asks for a setting once (as
// mechanisms do: a limit only when its value changes); the data path
// refuses it; the next step re-applies it without the mechanism asking
// again, and the retry is counted. The same for a VM limit and a
// scheduler.
func TestRefusedWritesRetried(t *testing.T) {
	ab := mech.PairID{Src: "a", Dst: "b"}
	for _, tc := range []struct {
		name string
		act  mech.Actions
		held func(p *fake.Host) bool
	}{
		{
			name: "pair limit",
			act:  mech.Actions{Limits: []mech.Limit{{Kind: mech.PairLimit, Pair: ab, Rate: 40e6}}},
			held: func(p *fake.Host) bool { r, ok := p.Limit(pair("10.0.0.1", "10.0.0.2")); return ok && r == 80e6 },
		},
		{
			name: "VM limit",
			act:  mech.Actions{Limits: []mech.Limit{{Kind: mech.VMIngress, VM: "a", Rate: 40e6}}},
			held: func(p *fake.Host) bool { r, ok := p.Sched(mech.Ingress).Limit("a"); return ok && r == 80e6 },
		},
		{
			name: "scheduler",
			act:  mech.Actions{Schedulers: []mech.Scheduler{{Dir: mech.Egress, Rate: 100e6, Weights: map[string]float64{"a": 2}}}},
			held: func(p *fake.Host) bool {
				in, r, w := p.Sched(mech.Egress).State()
				return in && r == 200e6 && w["a"] == 2
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testModel(vmSpec{"a", "A", "h1", "10.0.0.1", 1e8, 1e8}, vmSpec{"b", "A", "h2", "10.0.0.2", 1e8, 1e8})
			mech1 := &script{act: func(_ string, step int, _ *mech.HostObs) mech.Actions {
				if step == 1 {
					return tc.act
				}
				return mech.Actions{}
			}}
			p := fakePath(mech.LossAtSource)
			a := newTestAgent(t, Config{Host: "h1", Model: m, Mechanism: mech1, Path: p, Scale: 2})
			s := newStepper(a)
			p.RefuseWrites(1)
			if err := s.step(); !errors.Is(err, fake.ErrRefused) {
				t.Fatalf("first step: %v, want the refusal", err)
			}
			if tc.held(p) {
				t.Fatal("the data path holds a setting it refused")
			}
			if err := s.step(); err != nil {
				t.Fatalf("second step: %v", err)
			}
			if !tc.held(p) {
				t.Fatal("not re-applied at the next step")
			}
			st := a.Stats()
			if st.Retries != 1 || st.Failed != 1 {
				t.Errorf("stats %+v, want one failure and one retry", st)
			}
			if n := counterValue(t, a, "bulkhead_agent_retries_total"); n != 1 {
				t.Errorf("bulkhead_agent_retries_total = %v, want 1", n)
			}
			if err := s.step(); err != nil || a.Stats().Retries != 1 {
				t.Errorf("third step: %v, stats %+v: retried what the data path holds", err, a.Stats())
			}
		})
	}
}

// TestLostLimitsReapplied: a limit the data path loses behind the agent's
// back — its class deleted, or its rate changed — is seen in the next
// step's counters and re-applied (drive.Verifier), though the mechanism
// said it once.
func TestLostLimitsReapplied(t *testing.T) {
	abID := mech.PairID{Src: "a", Dst: "b"}
	m := testModel(vmSpec{"a", "A", "h1", "10.0.0.1", 1e8, 1e8}, vmSpec{"b", "A", "h2", "10.0.0.2", 1e8, 1e8})
	mech1 := &script{act: func(_ string, step int, _ *mech.HostObs) mech.Actions {
		if step == 1 {
			return mech.Actions{Limits: []mech.Limit{{Kind: mech.PairLimit, Pair: abID, Rate: 40e6}, {Kind: mech.VMEgress, VM: "a", Rate: 30e6}}}
		}
		return mech.Actions{}
	}}
	p := fakePath(mech.LossAtSource)
	a := newTestAgent(t, Config{Host: "h1", Model: m, Mechanism: mech1, Path: p})
	s := newStepper(a)
	pairLimit := func() float64 { r, _ := p.Limit(ab); return r }
	vmLimit := func() float64 { r, _ := p.Sched(mech.Egress).Limit("a"); return r }
	for i := 0; i < 3; i++ {
		if err := s.step(); err != nil {
			t.Fatal(err)
		}
	}
	if pairLimit() != 40e6 || vmLimit() != 30e6 || a.Stats().Retries != 0 {
		t.Fatalf("limits %v and %v, stats %+v", pairLimit(), vmLimit(), a.Stats())
	}
	// the pair's class and the VM's class are deleted
	p.LoseClass(ab)
	p.Sched(mech.Egress).LoseClass("a")
	if err := s.step(); err != nil {
		t.Fatal(err)
	}
	if pairLimit() != 40e6 || vmLimit() != 30e6 || a.Stats().Retries != 2 {
		t.Fatalf("after the classes were lost: limits %v and %v, stats %+v", pairLimit(), vmLimit(), a.Stats())
	}
	// someone else changes the pair's rate
	path, err := p.Attach(datapath.VM{Name: "a", Addr: ab.Src})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.step(); err != nil { // a reading of the re-applied limit
		t.Fatal(err)
	}
	if err := path.TX.SetPairRate(ab, 1e9); err != nil {
		t.Fatal(err)
	}
	if err := s.step(); err != nil {
		t.Fatal(err)
	}
	if pairLimit() != 40e6 || a.Stats().Retries != 3 {
		t.Fatalf("after the rate was changed: limit %v, stats %+v", pairLimit(), a.Stats())
	}
	for i := 0; i < 3; i++ {
		if err := s.step(); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.Retries != 3 || st.Writes != 5 {
		t.Errorf("stats %+v: writes of limits the data path holds", st)
	}
}
