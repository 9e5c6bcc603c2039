package drive_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
)

// batchEnforcer is a fakeEnforcer that also writes pair limits in
// batches (drive.BatchEnforcer); refuseKeys are pair limits it refuses,
// each once, wherever they stand in a batch.
type batchEnforcer struct {
	*fakeEnforcer
	refuseKeys map[string]bool
	batches    [][]string
}

func (b *batchEnforcer) SetLimits(ls []mech.Limit) []error {
	var names []string
	errs := make([]error, len(ls))
	for i, l := range ls {
		names = append(names, key(l))
		if b.refuseKeys[key(l)] {
			delete(b.refuseKeys, key(l))
			b.writes = append(b.writes, key(l))
			errs[i] = errors.New("refused")
			continue
		}
		errs[i] = b.SetLimit(l)
	}
	b.batches = append(b.batches, names)
	return errs
}

// oneByOne is the same enforcer without batches.
type oneByOne struct {
	*fakeEnforcer
	refuseKeys map[string]bool
}

func (o *oneByOne) SetLimit(l mech.Limit) error {
	if o.refuseKeys[key(l)] {
		delete(o.refuseKeys, key(l))
		o.writes = append(o.writes, key(l))
		return errors.New("refused")
	}
	return o.fakeEnforcer.SetLimit(l)
}

// TestHostBatches: with an enforcer that writes pair limits in batches,
// every step's pair limits — those the mechanism asks for and those the
// core re-applies — go in one batch (VM limits alone), and what is in
// force, what stays pending, the stats and the errors (one per refused
// limit, naming it) are those of the same enforcer written one limit at
// a time: a limit refused within a batch is reported and retried at the
// next step, the others in the batch are in force.
func TestHostBatches(t *testing.T) {
	vmLimit := mech.Limit{Kind: mech.VMEgress, VM: "a1", Rate: 3e7}
	tests := []struct {
		name    string
		steps   []mech.Actions
		refuse  []string // pair limits refused once
		lose    string   // a limit lost before step 2
		batches [][]string
		errs    []string // per step: what the error names ("" none)
	}{
		{
			name:    "all taken",
			steps:   []mech.Actions{{Limits: []mech.Limit{pl("a1", "a2", 5e7), pl("b1", "a2", 7e7)}}, {}},
			batches: [][]string{{"a1->a2", "b1->a2"}},
			errs:    []string{"", ""},
		},
		{
			name:    "one refused in a batch, retried alone",
			steps:   []mech.Actions{{Limits: []mech.Limit{pl("a1", "a2", 5e7), pl("b1", "a2", 7e7)}}, {}, {}},
			refuse:  []string{"b1->a2"},
			batches: [][]string{{"a1->a2", "b1->a2"}, {"b1->a2"}},
			errs:    []string{"pair b1->a2 to 7e+07 bit/s: refused", "", ""},
		},
		{
			name: "retry joins the next step's batch",
			steps: []mech.Actions{
				{Limits: []mech.Limit{pl("a1", "a2", 5e7), pl("b1", "a2", 7e7)}},
				{Limits: []mech.Limit{pl("a1", "a2", 6e7)}},
			},
			refuse:  []string{"b1->a2"},
			batches: [][]string{{"a1->a2", "b1->a2"}, {"a1->a2", "b1->a2"}},
			errs:    []string{"pair b1->a2 to 7e+07 bit/s: refused", ""},
		},
		{
			name: "lost limit re-applied with the step's",
			steps: []mech.Actions{
				{Limits: []mech.Limit{pl("a1", "a2", 5e7), pl("b1", "a2", 7e7)}},
				{Limits: []mech.Limit{pl("a1", "a2", 6e7)}},
			},
			lose:    "b1->a2",
			batches: [][]string{{"a1->a2", "b1->a2"}, {"a1->a2", "b1->a2"}},
			errs:    []string{"", ""},
		},
		{
			name: "a point twice in a step is written in order",
			steps: []mech.Actions{
				{Limits: []mech.Limit{pl("a1", "a2", 5e7), pl("b1", "a2", 7e7), pl("a1", "a2", mech.Unlimited), pl("a1", "a2", 4e7)}},
			},
			batches: [][]string{{"a1->a2", "b1->a2"}, {"a1->a2"}, {"a1->a2"}},
			errs:    []string{""},
		},
		{
			name:    "VM limits alone, pair limits batched",
			steps:   []mech.Actions{{Limits: []mech.Limit{pl("a1", "a2", 5e7), vmLimit, pl("b1", "a2", 7e7)}}},
			refuse:  []string{"a1->a2"},
			batches: [][]string{{"a1->a2", "b1->a2"}},
			errs:    []string{"pair a1->a2 to 5e+07 bit/s: refused"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			refuse := func() map[string]bool {
				m := map[string]bool{}
				for _, k := range tc.refuse {
					m[k] = true
				}
				return m
			}
			type run struct {
				h    *drive.Host
				f    *fakeEnforcer
				errs []string
			}
			be := &batchEnforcer{fakeEnforcer: newFake(), refuseKeys: refuse()}
			ob := &oneByOne{fakeEnforcer: newFake(), refuseKeys: refuse()}
			var runs [2]run
			for i, enf := range []drive.Enforcer{be, ob} {
				h, err := drive.NewHost(&scripted{steps: tc.steps}, testEnv("h1"), enf)
				if err != nil {
					t.Fatal(err)
				}
				runs[i] = run{h: h, f: []*fakeEnforcer{be.fakeEnforcer, ob.fakeEnforcer}[i]}
			}
			for s := range tc.steps {
				if s == 1 && tc.lose != "" {
					be.lose, ob.lose = tc.lose, tc.lose
				}
				for i := range runs {
					_, err := runs[i].h.Step(&mech.HostObs{Now: time.Duration(s) * 10 * time.Millisecond})
					msg := ""
					if err != nil {
						msg = err.Error()
					}
					runs[i].errs = append(runs[i].errs, msg)
				}
			}
			if !reflect.DeepEqual(be.batches, tc.batches) {
				t.Errorf("batches %q, want %q", be.batches, tc.batches)
			}
			b, o := runs[0], runs[1]
			if !reflect.DeepEqual(b.f.limits, o.f.limits) {
				t.Errorf("in force: batched %v, one by one %v", b.f.limits, o.f.limits)
			}
			if b.h.Pending() != o.h.Pending() || !reflect.DeepEqual(b.h.Desired(), o.h.Desired()) {
				t.Errorf("pending %d / %d, desired %v / %v", b.h.Pending(), o.h.Pending(), b.h.Desired(), o.h.Desired())
			}
			if b.h.Stats() != o.h.Stats() {
				t.Errorf("stats batched %+v, one by one %+v", b.h.Stats(), o.h.Stats())
			}
			for s, want := range tc.errs {
				for i, r := range runs {
					got := r.errs[s]
					if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
						t.Errorf("step %d (%s): error %q, want %q", s+1, []string{"batched", "one by one"}[i], got, want)
					}
				}
				if fmt.Sprint(b.errs[s] == "") != fmt.Sprint(o.errs[s] == "") {
					t.Errorf("step %d: batched error %q, one by one %q", s+1, b.errs[s], o.errs[s])
				}
			}
		})
	}
}
