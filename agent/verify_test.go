package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
)

// once is a live script mechanism that asks for act at step 1, for
// more[n] at step n, and for nothing otherwise.
func once(act mech.Actions, more map[int]mech.Actions) *script {
	return &script{live: true, act: func(_ string, step int, _ *mech.HostObs) mech.Actions {
		if step == 1 {
			return act
		}
		return more[step]
	}}
}

// steps runs n steps of s and fails on an error.
func (s *stepper) steps(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := s.step(); err != nil {
			t.Fatalf("step: %v", err)
		}
	}
}

// TestLostSchedulerReapplied: the schedulers of every mechanism host
// agents run that installs them (Gatekeeper, chosen by its capabilities
// from the registry), set once, are deleted behind the agent's back (the
// devices' trees deleted); the next step sees it in the counters and
// re-applies them (drive.SchedulerVerifier), counted as retries; then
// nothing more is written.
func TestLostSchedulerReapplied(t *testing.T) {
	m := testModel(t1VMs...)
	tested := 0
	for _, name := range all.Names() {
		mc, err := all.New(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		caps := mc.Capabilities()
		if ok, _ := caps.RealTraffic(); !ok || !caps.Schedulers {
			continue
		}
		tested++
		t.Run(name, func(t *testing.T) {
			p := fake.New(fake.Options{Schedulers: true})
			a := newTestAgent(t, Config{Host: "h1", Model: m, Mechanism: mc, Path: p, Scale: 2})
			s := newStepper(a)
			s.steps(t, 3)
			var lost []mech.Direction
			for _, d := range []mech.Direction{mech.Egress, mech.Ingress} {
				if in, _, w := p.Sched(d).State(); in && w["a1"] > 0 {
					lost = append(lost, d)
				}
			}
			if len(lost) == 0 {
				t.Fatal("no scheduler installed with a1's weight")
			}
			st := a.Stats()
			if st.Retries != 0 {
				t.Fatalf("stats %+v before anything was lost", st)
			}
			for _, d := range lost {
				p.Sched(d).LoseTree()
			}
			s.steps(t, 1) // reads the loss, re-applies
			if got := a.Stats().Retries; got != int64(len(lost)) {
				t.Fatalf("%d retries after %d schedulers were lost, want %d", got, len(lost), len(lost))
			}
			for _, d := range lost {
				cs, err := p.Sched(d).Counters()
				if err != nil || cs["a1"].Ceil == 0 {
					t.Errorf("%s scheduler after the retry: classes %v, %v", dirName(d), cs, err)
				}
			}
			s.steps(t, 3)
			if got := a.Stats(); got.Retries != int64(len(lost)) || got.Writes != st.Writes+int64(len(lost)) {
				t.Errorf("stats %+v (before the loss %+v): writes of schedulers the data path holds", got, st)
			}
		})
	}
	if tested == 0 {
		t.Fatal("no mechanism host agents run installs schedulers")
	}
}

// TestLimitsHeldAsRequested: whether the data path holds a limit is
// judged against the rate asked for, after the data path's clamping: a
// limit of 0 (held at datapath.MinRate) is written once, not every step;
// a rate someone changed before the agent first read it back is
// re-applied.
func TestLimitsHeldAsRequested(t *testing.T) {
	abID := mech.PairID{Src: "a", Dst: "b"}
	m := testModel(vmSpec{"a", "A", "h1", "10.0.0.1", 1e8, 1e8}, vmSpec{"b", "A", "h2", "10.0.0.2", 1e8, 1e8})
	for _, tc := range []struct {
		name  string
		limit mech.Limit
		// meddle changes the data path after the write, before the
		// next reading (nil: nothing)
		meddle  func(t *testing.T, p *fake.Host)
		retries int64
		rate    func(p *fake.Host) float64
		want    float64
	}{
		{
			name:  "pair limit of 0",
			limit: mech.Limit{Kind: mech.PairLimit, Pair: abID, Rate: 0},
			rate:  func(p *fake.Host) float64 { r, _ := p.Limit(ab); return r },
		},
		{
			name:  "VM limit of 0",
			limit: mech.Limit{Kind: mech.VMEgress, VM: "a", Rate: 0},
			rate:  func(p *fake.Host) float64 { r, _ := p.Sched(mech.Egress).Limit("a"); return r },
		},
		{
			name:  "pair rate changed before the first reading",
			limit: mech.Limit{Kind: mech.PairLimit, Pair: abID, Rate: 40e6},
			meddle: func(t *testing.T, p *fake.Host) {
				path, err := p.Attach(datapath.VM{Name: "a", Addr: ab.Src})
				if err != nil {
					t.Fatal(err)
				}
				if err := path.TX.SetPairRate(ab, 1e9); err != nil {
					t.Fatal(err)
				}
			},
			retries: 1,
			rate:    func(p *fake.Host) float64 { r, _ := p.Limit(ab); return r },
			want:    40e6,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakePath(mech.LossAtSource)
			a := newTestAgent(t, Config{Host: "h1", Model: m, Mechanism: once(mech.Actions{Limits: []mech.Limit{tc.limit}}, nil), Path: p})
			s := newStepper(a)
			s.steps(t, 1)
			if tc.meddle != nil {
				tc.meddle(t, p)
			}
			s.steps(t, 5)
			if st := a.Stats(); st.Retries != tc.retries || st.Writes != 1+tc.retries {
				t.Errorf("stats %+v, want %d retries", st, tc.retries)
			}
			if got := tc.rate(p); got != tc.want {
				t.Errorf("rate %v in force, want %v", got, tc.want)
			}
		})
	}
}

// TestUnheldReported: a limit the data path keeps not holding (someone
// else keeps its class at another rate) is re-applied every step, and
// reported once — a warning in the log and bulkhead_agent_unheld_total —
// when it is still not held after unheldAfter consecutive re-applies;
// once held again, it is no longer re-applied.
func TestUnheldReported(t *testing.T) {
	m := testModel(vmSpec{"a", "A", "h1", "10.0.0.1", 1e8, 1e8}, vmSpec{"b", "A", "h2", "10.0.0.2", 1e8, 1e8})
	var log bytes.Buffer
	p := fakePath(mech.LossAtSource)
	lim := mech.Limit{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a", Dst: "b"}, Rate: 40e6}
	a := newTestAgent(t, Config{Host: "h1", Model: m, Mechanism: once(mech.Actions{Limits: []mech.Limit{lim}}, nil), Path: p,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	s := newStepper(a)
	s.steps(t, 1)
	p.Pin(ab, 1e9)
	reported := func() (float64, int) {
		return counterValue(t, a, "bulkhead_agent_unheld_total"), strings.Count(log.String(), "not held")
	}
	s.steps(t, unheldAfter)
	if n, lines := reported(); n != 0 || lines != 0 || a.Stats().Retries != unheldAfter {
		t.Fatalf("after %d re-applies: reported %v times, %d log lines, stats %+v", unheldAfter, n, lines, a.Stats())
	}
	s.steps(t, 5)
	if n, lines := reported(); n != 1 || lines != 1 {
		t.Fatalf("still not held: reported %v times, %d log lines; want once:\n%s", n, lines, log.String())
	}
	p.Unpin(ab)
	s.steps(t, 1) // the last re-apply reads as held at the next step
	r := a.Stats().Retries
	s.steps(t, 3)
	if got := a.Stats().Retries; got != r {
		t.Errorf("%d retries after the limit was held again (%d before)", got, r)
	}
}

// TestSchedulerRemovalKeepsVMLimits: removing a scheduler leaves the VM
// limits in force (a tree that only limits), so they are not lost and
// re-applied; Restore lifts them and leaves no scheduler.
func TestSchedulerRemovalKeepsVMLimits(t *testing.T) {
	m := testModel(vmSpec{"a", "A", "h1", "10.0.0.1", 1e8, 1e8}, vmSpec{"c", "A", "h1", "10.0.0.3", 1e8, 1e8},
		vmSpec{"b", "A", "h2", "10.0.0.2", 1e8, 1e8})
	mc := once(mech.Actions{
		Schedulers: []mech.Scheduler{{Dir: mech.Egress, Rate: 500e6, Weights: map[string]float64{"a": 1, "c": 1}}},
		Limits:     []mech.Limit{{Kind: mech.VMEgress, VM: "a", Rate: 30e6}},
	}, map[int]mech.Actions{3: {Schedulers: []mech.Scheduler{{Dir: mech.Egress, Rate: mech.Unlimited}}}})
	p := fakePath(mech.LossAtSource)
	a := newTestAgent(t, Config{Host: "h1", Model: m, Mechanism: mc, Path: p})
	s := newStepper(a)
	s.steps(t, 6)
	if st := a.Stats(); st.Retries != 0 || st.Writes != 3 {
		t.Errorf("stats %+v: the VM limit was lost with the scheduler", st)
	}
	cs, err := p.Sched(mech.Egress).Counters()
	if err != nil || cs["a"].Ceil != 30e6 {
		t.Errorf("a's class after the scheduler was removed: %+v, %v", cs["a"], err)
	}
	a.restore()
	if p.Sched(mech.Egress).Installed() {
		t.Error("a scheduler left after Restore")
	}
	if r, ok := p.Sched(mech.Egress).Limit("a"); ok && !math.IsInf(r, 1) {
		t.Errorf("a's limit %v left after Restore", r)
	}
}

// TestHoldsLimitHint: the verdict the driver core gets with a hint (the
// index of the pair's record) is the one it gets without, for limits
// held, pinned at another rate, lost, of pairs never read, VM limits,
// and whatever the hint: none, right, another pair's, out of range.
func TestHoldsLimitHint(t *testing.T) {
	c1 := vmSpec{"c1", "T1", "h2", "10.0.2.3", 100e6, 100e6}
	d1 := vmSpec{"d1", "T1", "h2", "10.0.2.4", 100e6, 100e6}
	m := testModel(append(t1VMs, c1, d1)...)
	ab, ac := pl("a1", "b1", 5e6), pl("a1", "c1", 6e6)
	p := fake.New(fake.Options{Limiters: true})
	a := newTestAgent(t, Config{Host: "h1", Model: m, Mechanism: once(mech.Actions{Limits: []mech.Limit{ab, ac}}, nil), Path: p})
	s := newStepper(a)
	s.steps(t, 3)
	tests := []struct {
		name   string
		change func()
		l      mech.Limit
		held   bool
	}{
		{"held", func() {}, ab, true},
		{"another rate", func() {}, pl("a1", "b1", 7e6), false},
		{"pinned", func() { p.Pin(pair("10.0.1.1", "10.0.2.3"), 1e6) }, ac, false},
		{"lost", func() { p.LoseClass(pair("10.0.1.1", "10.0.2.1")) }, ab, false},
		{"never limited", func() {}, pl("a1", "d1", 8e6), false},
		{"a VM's", func() {}, mech.Limit{Kind: mech.VMEgress, VM: "a1", Rate: 1e6}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.change()
			if _, err := a.observe(s.now.Add(10 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			want := a.enf.HoldsLimit(tc.l)
			if want != tc.held {
				t.Fatalf("HoldsLimit %v, want %v", want, tc.held)
			}
			other := int32(-1)
			if i, ok := a.pairByID[mech.PairID{Src: "a1", Dst: "c1"}]; ok && tc.l.Pair.Dst != "c1" {
				other = i
			}
			for _, h := range []int32{-1, a.pairByID[tc.l.Pair], other, int32(len(a.pairs)), 1 << 30} {
				hint := h
				if got := a.enf.HoldsLimitHint(tc.l, &hint); got != want {
					t.Errorf("hint %d: %v, want %v", h, got, want)
				}
				if i, ok := a.pairByID[tc.l.Pair]; ok && tc.l.Kind == mech.PairLimit && hint != i {
					t.Errorf("hint %d left %d, want the pair's index %d", h, hint, i)
				}
			}
		})
	}
}

func pl(src, dst string, r float64) mech.Limit {
	return mech.Limit{Kind: mech.PairLimit, Pair: mech.PairID{Src: src, Dst: dst}, Rate: r}
}

// TestSnapshotKept: a snapshot keeps what the step before it recorded
// while later steps reuse the state's storage (pairs, their limits).
func TestSnapshotKept(t *testing.T) {
	c1 := vmSpec{"c1", "T1", "h2", "10.0.2.3", 100e6, 100e6}
	m := testModel(append(t1VMs, c1)...)
	rates := []float64{5e6, 6e6, mech.Unlimited, 7e6}
	p := fake.New(fake.Options{Limiters: true})
	a := newTestAgent(t, Config{Host: "h1", Model: m, Path: p, Mechanism: &script{live: true, act: func(_ string, step int, _ *mech.HostObs) mech.Actions {
		if step > len(rates) {
			return mech.Actions{}
		}
		return mech.Actions{Limits: []mech.Limit{pl("a1", "b1", rates[step-1]), pl("a1", "c1", 1e6)}}
	}}})
	s := newStepper(a)
	limitOf := func(st State, dst string) string {
		for _, e := range st.Egress {
			if e.Dst == dst {
				if e.Limit == nil {
					return "none"
				}
				return fmt.Sprint(*e.Limit)
			}
		}
		return "absent"
	}
	var snaps []State
	for range len(rates) + 1 {
		s.steps(t, 1)
		snaps = append(snaps, a.Snapshot())
	}
	// the limit a step observes is the one in force: the previous step's (a
	// pair neither limited nor sending is not observed)
	want := []string{"absent", "5e+06", "6e+06", "absent", "7e+06"}
	for i, st := range snaps {
		if got := limitOf(st, "b1"); got != want[i] {
			t.Errorf("snapshot %d: a1->b1 limit %s, want %s", i, got, want[i])
		}
	}
}
