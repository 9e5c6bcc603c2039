package static_test

import (
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/static"
)

func env(host string) mech.Env {
	return mech.Env{
		Host: host,
		VMs: []mech.VM{
			{Name: "x", Tenant: "T", Host: "h1", In: 100e6, Out: 100e6},
			{Name: "y", Tenant: "T", Host: "h2", In: 100e6, Out: 100e6},
			{Name: "z", Tenant: "T", Host: "h2", In: 100e6, Out: 100e6},
			{Name: "w", Tenant: "U", Host: "h1", In: 50e6, Out: 50e6},
		},
		Pattern: []mech.PairID{{Src: "x", Dst: "y"}, {Src: "x", Dst: "z"}, {Src: "y", Dst: "x"}},
	}
}

// Driven through the interface with hand-written observations: the first
// step sets the host's reservations, later steps close unreserved pairs.
func TestAgentThroughInterface(t *testing.T) {
	a, err := static.New().NewAgent(env("h1"))
	if err != nil {
		t.Fatal(err)
	}
	act := a.Step(&mech.HostObs{}, nil)
	got := map[mech.PairID]float64{}
	for _, l := range act.Limits {
		if l.Kind != mech.PairLimit {
			t.Fatalf("unexpected limit kind %v", l.Kind)
		}
		got[l.Pair] = l.Rate
	}
	// x's 100 Mbps out-hose split between y and z.
	want := map[mech.PairID]float64{{Src: "x", Dst: "y"}: 50e6, {Src: "x", Dst: "z"}: 50e6}
	if len(got) != len(want) {
		t.Fatalf("limits %v, want %v", got, want)
	}
	for p, r := range want {
		if math.Abs(got[p]-r) > 1 {
			t.Errorf("%v: %g, want %g", p, got[p], r)
		}
	}
	act = a.Step(&mech.HostObs{Now: 100 * time.Millisecond, Egress: []mech.PairObs{
		{Pair: mech.PairID{Src: "x", Dst: "y"}, Rate: 50e6, Limit: 50e6},
		{Pair: mech.PairID{Src: "w", Dst: "x"}, Rate: 10e6, Limit: mech.Unlimited},
	}}, nil)
	if len(act.Limits) != 1 || act.Limits[0].Pair != (mech.PairID{Src: "w", Dst: "x"}) || act.Limits[0].Rate != 0 {
		t.Errorf("second step limits %+v, want only w->x closed at 0", act.Limits)
	}
	if act = a.Step(&mech.HostObs{Now: 200 * time.Millisecond}, nil); len(act.Limits) != 0 {
		t.Errorf("third step changed limits: %+v", act.Limits)
	}
}

func TestReservationErrors(t *testing.T) {
	e := env("h1")
	e.Pattern = append(e.Pattern, mech.PairID{Src: "x", Dst: "nope"})
	if _, err := static.Reservations(e); err == nil {
		t.Error("unknown VM accepted")
	}
	e = env("h1")
	e.Pattern = append(e.Pattern, mech.PairID{Src: "x", Dst: "w"})
	if _, err := static.Reservations(e); err == nil {
		t.Error("cross-tenant pair accepted")
	}
}
