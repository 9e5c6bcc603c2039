package drive_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
)

// hintedFake is a fakeEnforcer that is a drive.HintedEnforcer: the hint
// of a limit is a number it gave the limit's point; it counts the hints it
// was handed back for the right point and for another.
type hintedFake struct {
	*fakeEnforcer
	ids         map[string]int32
	right, bad  int
	unhintedSet int
}

func (f *hintedFake) SetLimitHint(l mech.Limit, hint *int32) error {
	k := key(l)
	id, ok := f.ids[k]
	switch {
	case *hint < 0:
		f.unhintedSet++
	case ok && *hint == id:
		f.right++
	default:
		f.bad++
	}
	if !ok {
		id = int32(len(f.ids))
		f.ids[k] = id
	}
	*hint = id
	return f.SetLimit(l)
}

// The driver core finds a step's limits by their position in the last
// step and hands a HintedEnforcer back its hints: what is written and
// desired is what a plain enforcer gets, with limits reordered, removed
// and added again, and messages to known and unknown hosts.
func TestHostHints(t *testing.T) {
	inf := math.Inf(1)
	msg := func(to ...string) []mech.Message {
		var ms []mech.Message
		for _, h := range to {
			ms = append(ms, mech.Message{To: h, Body: "x"})
		}
		return ms
	}
	steps := []mech.Actions{
		{Limits: []mech.Limit{pl("a1", "a2", 1e6), pl("b1", "a2", 2e6)}, Messages: msg("h2", "h1")},
		{Limits: []mech.Limit{pl("a1", "a2", 3e6), pl("b1", "a2", 4e6)}, Messages: msg("h2", "h1")},
		{Limits: []mech.Limit{pl("b1", "a2", 5e6), pl("a1", "a2", 6e6)}, Messages: msg("h1", "hX")},
		{Limits: []mech.Limit{pl("a1", "a2", inf), pl("b1", "a2", 7e6)}, Messages: msg("hX", "h2")},
		{Limits: []mech.Limit{pl("a1", "a2", 8e6), pl("b1", "a2", 9e6), {Kind: mech.VMEgress, VM: "a1", Rate: 1e7}}},
		{Limits: []mech.Limit{pl("a1", "a2", 8e6), pl("b1", "a2", 9e6), {Kind: mech.VMEgress, VM: "a1", Rate: 2e7}}},
	}
	run := func(enf drive.Enforcer, plain *fakeEnforcer) ([]string, []mech.Limit, []string) {
		h, err := drive.NewHost(&scripted{steps: steps}, testEnv("h1"), enf)
		if err != nil {
			t.Fatal(err)
		}
		var errs []string
		for i := range steps {
			_, err := h.Step(&mech.HostObs{Now: time.Duration(i) * 10 * time.Millisecond})
			if err != nil {
				errs = append(errs, err.Error())
			} else {
				errs = append(errs, "")
			}
		}
		return plain.writes, h.Desired(), errs
	}
	plain := newFake()
	w1, d1, e1 := run(plain, plain)
	hf := &hintedFake{fakeEnforcer: newFake(), ids: map[string]int32{}}
	w2, d2, e2 := run(hf, hf.fakeEnforcer)
	if !reflect.DeepEqual(w1, w2) || !reflect.DeepEqual(d1, d2) || !reflect.DeepEqual(e1, e2) {
		t.Fatalf("hinted enforcer: writes %v, desired %v, errors %q; plain: %v, %v, %q", w2, d2, e2, w1, d1, e1)
	}
	if hf.bad > 0 || hf.right == 0 {
		t.Fatalf("hints handed back: %d right, %d for another point, %d writes without", hf.right, hf.bad, hf.unhintedSet)
	}
	if e1[2] == "" || e1[3] == "" || e1[1] != "" {
		t.Fatalf("errors for the unknown host in steps 3 and 4 only: %q", e1)
	}
}
