package drive_test

import (
	"errors"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
)

// scripted is a mechanism whose agent returns the actions it is given,
// one per step.
type scripted struct {
	steps []mech.Actions
	envs  []mech.Env // environments handed over by UpdateEnv
	noUpd bool
}

func (s *scripted) Name() string                    { return "scripted" }
func (s *scripted) Capabilities() mech.Capabilities { return mech.Capabilities{} }
func (s *scripted) NewAgent(env mech.Env) (mech.Agent, error) {
	if s.noUpd {
		return &staticAgent{scriptedAgent{s: s}}, nil
	}
	return &scriptedAgent{s: s}, nil
}

type scriptedAgent struct {
	s *scripted
	n int
}

func (a *scriptedAgent) Period() time.Duration { return 10 * time.Millisecond }
func (a *scriptedAgent) Step(*mech.HostObs, []mech.Message) mech.Actions {
	if a.n >= len(a.s.steps) {
		return mech.Actions{}
	}
	a.n++
	return a.s.steps[a.n-1]
}
func (a *scriptedAgent) UpdateEnv(env mech.Env) error {
	a.s.envs = append(a.s.envs, env)
	return nil
}

type staticAgent struct{ scriptedAgent }

func (a *staticAgent) UpdateEnv() {} // not mech.EnvUpdater

// fakeEnforcer records what is in force; refuse makes the next writes fail.
type fakeEnforcer struct {
	limits map[string]float64
	scheds map[mech.Direction]mech.Scheduler
	refuse int
	lose   string // HoldsLimit says false for this key once
	// loseSched: HoldsScheduler says false once
	loseSched bool
	writes    []string
}

func newFake() *fakeEnforcer {
	return &fakeEnforcer{limits: map[string]float64{}, scheds: map[mech.Direction]mech.Scheduler{}}
}

func key(l mech.Limit) string {
	if l.Kind == mech.PairLimit {
		return l.Pair.Src + "->" + l.Pair.Dst
	}
	return [...]string{"", "egress:", "ingress:"}[l.Kind] + l.VM
}

func (f *fakeEnforcer) SetLimit(l mech.Limit) error {
	f.writes = append(f.writes, key(l))
	if f.refuse > 0 {
		f.refuse--
		return errors.New("refused")
	}
	if math.IsInf(l.Rate, 1) {
		delete(f.limits, key(l))
	} else {
		f.limits[key(l)] = l.Rate
	}
	return nil
}

func (f *fakeEnforcer) SetScheduler(s mech.Scheduler) error {
	f.writes = append(f.writes, "sched")
	if f.refuse > 0 {
		f.refuse--
		return errors.New("refused")
	}
	f.scheds[s.Dir] = s
	return nil
}

func (f *fakeEnforcer) HoldsScheduler(s mech.Scheduler) bool {
	if f.loseSched {
		f.loseSched = false
		delete(f.scheds, s.Dir)
		return false
	}
	_, ok := f.scheds[s.Dir]
	return ok
}

func (f *fakeEnforcer) HoldsLimit(l mech.Limit) bool {
	if f.lose == key(l) {
		f.lose = ""
		delete(f.limits, key(l))
		return false
	}
	_, ok := f.limits[key(l)]
	return ok || math.IsInf(l.Rate, 1)
}

func testEnv(host string) mech.Env {
	return mech.Env{Host: host, VMs: []mech.VM{
		{Name: "a1", Tenant: "A", Host: "h1", In: 1e8, Out: 1e8},
		{Name: "a2", Tenant: "A", Host: "h2", In: 1e8, Out: 1e8},
		{Name: "b1", Tenant: "B", Host: "h1", In: 2e8, Out: 2e8},
	}}
}

func pl(src, dst string, r float64) mech.Limit {
	return mech.Limit{Kind: mech.PairLimit, Pair: mech.PairID{Src: src, Dst: dst}, Rate: r}
}

func TestHostChecksLimits(t *testing.T) {
	tests := []struct {
		name string
		act  mech.Actions
		err  string
	}{
		{"ok", mech.Actions{Limits: []mech.Limit{pl("a1", "a2", 5e7)}}, ""},
		{"nan", mech.Actions{Limits: []mech.Limit{pl("a1", "a2", math.NaN())}}, "invalid rate NaN"},
		{"negative", mech.Actions{Limits: []mech.Limit{pl("a1", "a2", -1)}}, "invalid rate -1"},
		{"remote source", mech.Actions{Limits: []mech.Limit{pl("a2", "a1", 1)}}, "whose source is not on that host"},
		{"unknown destination", mech.Actions{Limits: []mech.Limit{pl("a1", "zz", 1)}}, "unknown VM"},
		{"remote VM", mech.Actions{Limits: []mech.Limit{{Kind: mech.VMEgress, VM: "a2", Rate: 1}}}, "not on that host"},
		{"kind", mech.Actions{Limits: []mech.Limit{{Kind: 7, VM: "a1", Rate: 1}}}, "unknown kind 7"},
		{"scheduler weight", mech.Actions{Schedulers: []mech.Scheduler{{Dir: mech.Egress, Rate: 1e9, Weights: map[string]float64{"a1": 0}}}}, "weight 0"},
		{"scheduler VM", mech.Actions{Schedulers: []mech.Scheduler{{Dir: mech.Ingress, Rate: 1e9, Weights: map[string]float64{"a2": 1}}}}, "not on that host"},
		{"scheduler dir", mech.Actions{Schedulers: []mech.Scheduler{{Dir: 3, Rate: 1e9}}}, "unknown direction"},
		{"message", mech.Actions{Messages: []mech.Message{{To: "h9"}}}, "unknown host \"h9\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			h, err := drive.NewHost(&scripted{steps: []mech.Actions{tc.act}}, testEnv("h1"), f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.Step(&mech.HostObs{})
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Step: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "agent on h1") {
				t.Fatalf("Step: err %v, want one naming the host and containing %q", err, tc.err)
			}
			if len(f.limits) != 0 || len(f.scheds) != 0 {
				t.Errorf("a refused setting reached the data path: %v %v", f.limits, f.scheds)
			}
		})
	}
}

// A write the data path refuses is retried at the next step, although the
// mechanism asked only once; so is a limit the data path lost.
func TestHostReconciles(t *testing.T) {
	f := newFake()
	m := &scripted{steps: []mech.Actions{
		{Limits: []mech.Limit{pl("a1", "a2", 5e7), pl("b1", "a2", 7e7)}},
		{},
		{},
		{Limits: []mech.Limit{pl("b1", "a2", mech.Unlimited)}},
		{},
	}}
	h, err := drive.NewHost(m, testEnv("h1"), f)
	if err != nil {
		t.Fatal(err)
	}
	f.refuse = 1
	if _, err := h.Step(&mech.HostObs{Now: 0}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("step 1: err %v, want the refusal", err)
	}
	if h.Pending() != 1 || f.limits["a1->a2"] != 0 || f.limits["b1->a2"] != 7e7 {
		t.Fatalf("after a refused write: pending %d, limits %v", h.Pending(), f.limits)
	}
	if _, err := h.Step(&mech.HostObs{Now: 10 * time.Millisecond}); err != nil {
		t.Fatalf("step 2: %v", err)
	}
	if f.limits["a1->a2"] != 5e7 || h.Pending() != 0 {
		t.Fatalf("the refused limit was not re-applied: %v, pending %d", f.limits, h.Pending())
	}
	if s := h.Stats(); s.Retries != 1 || s.Failed != 1 || s.Writes != 3 {
		t.Errorf("stats %+v, want 3 writes, 1 failed, 1 retry", s)
	}
	f.lose = "b1->a2"
	if _, err := h.Step(&mech.HostObs{Now: 20 * time.Millisecond}); err != nil {
		t.Fatalf("step 3: %v", err)
	}
	if f.limits["b1->a2"] != 7e7 || h.Stats().Retries != 2 {
		t.Fatalf("a lost limit was not re-applied: %v, %+v", f.limits, h.Stats())
	}
	if _, err := h.Step(&mech.HostObs{Now: 30 * time.Millisecond}); err != nil {
		t.Fatalf("step 4: %v", err)
	}
	if _, ok := f.limits["b1->a2"]; ok {
		t.Fatalf("removed limit still in force: %v", f.limits)
	}
	if got := h.Desired(); len(got) != 1 || got[0].Pair.Src != "a1" {
		t.Errorf("desired %v, want only a1->a2", got)
	}
}

func TestHostUpdate(t *testing.T) {
	f := newFake()
	m := &scripted{steps: []mech.Actions{{Limits: []mech.Limit{pl("a1", "a2", 5e7), pl("b1", "a2", 7e7), {Kind: mech.VMEgress, VM: "b1", Rate: 1e8}}}}}
	h, err := drive.NewHost(m, testEnv("h1"), f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Step(&mech.HostObs{}); err != nil {
		t.Fatal(err)
	}
	// Tenant B leaves.
	env := testEnv("h1")
	env.VMs = env.VMs[:2]
	if err := h.Update(env); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if len(m.envs) != 1 || len(m.envs[0].VMs) != 2 {
		t.Fatalf("the agent got %d updates", len(m.envs))
	}
	if len(f.limits) != 1 || f.limits["a1->a2"] != 5e7 {
		t.Fatalf("limits after B left: %v, want only a1->a2", f.limits)
	}
	if h.Local("b1") {
		t.Error("b1 is still local")
	}
	if err := h.Update(testEnv("h2")); err == nil {
		t.Error("an update for another host was taken")
	}
	st, err := drive.NewHost(&scripted{noUpd: true}, testEnv("h1"), newFake())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(env); !errors.Is(err, drive.ErrStaticEnv) || !strings.Contains(err.Error(), "scripted") {
		t.Errorf("Update of a mechanism without EnvUpdater: %v, want ErrStaticEnv naming it", err)
	}
}

func TestHostInboxBound(t *testing.T) {
	h, err := drive.NewHost(&scripted{}, testEnv("h1"), newFake())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < drive.MaxInbox+3; i++ {
		h.Deliver(mech.Message{From: "h2", To: "h1"})
	}
	if s := h.Stats(); s.Dropped != 3 {
		t.Errorf("dropped %d, want 3", s.Dropped)
	}
}

// A VM that leaves has its limits removed once: a refused removal is
// reported and not retried, and desired schedulers lose its weight.
func TestHostUpdateForgetsDeparted(t *testing.T) {
	f := newFake()
	m := &scripted{steps: []mech.Actions{{
		Limits:     []mech.Limit{pl("b1", "a2", 7e7)},
		Schedulers: []mech.Scheduler{{Dir: mech.Egress, Rate: 1e9, Weights: map[string]float64{"a1": 1, "b1": 2}}},
	}}}
	h, err := drive.NewHost(m, testEnv("h1"), f)
	if err != nil {
		t.Fatal(err)
	}
	f.refuse = 1 // the scheduler is refused, the limit set
	if _, err := h.Step(&mech.HostObs{}); err == nil {
		t.Fatal("the refused scheduler was not reported")
	}
	env := testEnv("h1")
	env.VMs = env.VMs[:2] // B leaves
	f.refuse = 1          // and the removal of b1->a2 is refused
	if err := h.Update(env); err == nil || !strings.Contains(err.Error(), "pair b1->a2 to +Inf bit/s") {
		t.Fatalf("Update: %v, want the refused removal named", err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := h.Step(&mech.HostObs{Now: time.Duration(i) * 10 * time.Millisecond}); err != nil {
			t.Fatalf("step %d after B left: %v", i, err)
		}
	}
	if w := f.scheds[mech.Egress].Weights; len(w) != 1 || w["a1"] != 1 {
		t.Errorf("scheduler re-applied with weights %v, want only a1", w)
	}
	if h.Pending() != 0 || len(h.Desired()) != 0 {
		t.Errorf("after B left: pending %d, desired %v", h.Pending(), h.Desired())
	}
	for _, w := range f.writes[3:] {
		if w == "b1->a2" {
			t.Errorf("b1->a2 written again after its removal was refused: %v", f.writes)
		}
	}
}

// A scheduler the data path lost is re-applied, though the mechanism set
// it only once.
func TestHostReappliesLostScheduler(t *testing.T) {
	f := newFake()
	m := &scripted{steps: []mech.Actions{{Schedulers: []mech.Scheduler{{Dir: mech.Ingress, Rate: 9.5e8, Weights: map[string]float64{"a1": 1}}}}}}
	h, err := drive.NewHost(m, testEnv("h1"), f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Step(&mech.HostObs{}); err != nil {
		t.Fatal(err)
	}
	f.loseSched = true
	if _, err := h.Step(&mech.HostObs{Now: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if s, ok := f.scheds[mech.Ingress]; !ok || s.Rate != 9.5e8 || h.Stats().Retries != 1 {
		t.Errorf("lost scheduler: in force %v (%+v), stats %+v", ok, s, h.Stats())
	}
}

// hinted is a fakeEnforcer that is a drive.HintedVerifier: it gives
// each enforcement point the hint 100+n (n: the points hinted before)
// and records the points asked about and the hints they came with.
type hinted struct {
	*fakeEnforcer
	hints map[string]int32
	asked map[string]int32 // point → hint given in the latest step
}

func (f *hinted) HoldsLimitHint(l mech.Limit, hint *int32) bool {
	k := key(l)
	f.asked[k] = *hint
	if *hint < 0 {
		if _, ok := f.hints[k]; !ok {
			f.hints[k] = int32(100 + len(f.hints))
		}
		*hint = f.hints[k]
	}
	return f.HoldsLimit(l)
}

// TestHostHintedVerifier: every desired limit not written in a step is
// checked once per step, with the hint the enforcer left for its point
// (-1 the first time), whatever limits come and go around it; a limit
// its check finds lost is re-applied.
func TestHostHintedVerifier(t *testing.T) {
	env := mech.Env{Host: "h1"}
	for _, n := range []string{"a", "b", "c", "d", "x"} {
		env.VMs = append(env.VMs, mech.VM{Name: n, Tenant: "T", Host: "h1", In: 1e8, Out: 1e8})
	}
	tests := []struct {
		name   string
		limits []mech.Limit
		lose   string
		asked  map[string]int32 // points checked and the hints they came with
	}{
		{"four limits", []mech.Limit{pl("x", "a", 1e6), pl("x", "b", 1e6), pl("x", "c", 1e6), pl("x", "d", 1e6)}, "", map[string]int32{}},
		{"first check", nil, "", map[string]int32{"x->a": -1, "x->b": -1, "x->c": -1, "x->d": -1}},
		{"hints kept", nil, "", map[string]int32{"x->a": 100, "x->b": 101, "x->c": 102, "x->d": 103}},
		{"one removed, one changed", []mech.Limit{pl("x", "a", mech.Unlimited), pl("x", "c", 2e6)}, "", map[string]int32{"x->b": 101, "x->d": 103}},
		{"after the removal", nil, "x->d", map[string]int32{"x->b": 101, "x->c": 102, "x->d": 103}},
		{"re-added", []mech.Limit{pl("x", "a", 3e6)}, "", map[string]int32{"x->b": 101, "x->c": 102, "x->d": 103}},
		{"a new point's hint", nil, "", map[string]int32{"x->a": -1, "x->b": 101, "x->c": 102, "x->d": 103}},
	}
	m := &scripted{}
	for _, tc := range tests {
		m.steps = append(m.steps, mech.Actions{Limits: tc.limits})
	}
	f := &hinted{fakeEnforcer: newFake(), hints: map[string]int32{}}
	h, err := drive.NewHost(m, env, f)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range tests {
		f.asked = map[string]int32{}
		f.lose = tc.lose
		if _, err := h.Step(&mech.HostObs{Now: time.Duration(i) * 10 * time.Millisecond}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !maps.Equal(f.asked, tc.asked) {
			t.Errorf("%s: checked %v, want %v", tc.name, f.asked, tc.asked)
		}
		if tc.lose != "" {
			if _, ok := f.limits[tc.lose]; !ok {
				t.Errorf("%s: lost limit %s not re-applied: %v", tc.name, tc.lose, f.limits)
			}
		}
	}
	if got := len(h.Desired()); got != 4 {
		t.Errorf("%d limits desired, want 4", got)
	}
}
