package drive

import (
	"math"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// TestCheckControllerActions: what a controller returns is bounded before
// any driver applies it.
func TestCheckControllerActions(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  mech.ControllerActions
		want string // "" : accepted
	}{
		{"empty", mech.ControllerActions{}, ""},
		{"default rates", mech.ControllerActions{DefaultRate: 1e6, DefaultBySrc: map[string]float64{"a": 2e6, "b": 3e6}}, ""},
		{"negative default", mech.ControllerActions{DefaultRate: -1}, "default rate -1"},
		{"zero per-VM default", mech.ControllerActions{DefaultBySrc: map[string]float64{"a": 0}}, `default rate 0 for VM "a"`},
		{"NaN per-VM default", mech.ControllerActions{DefaultBySrc: map[string]float64{"b": math.NaN()}}, `for VM "b"`},
		{"infinite per-VM default", mech.ControllerActions{DefaultBySrc: map[string]float64{"c": math.Inf(1)}}, `for VM "c"`},
		{"negative allocation", mech.ControllerActions{Allocations: []mech.FlowAllocation{{Flow: mech.FlowID{Src: "a", Dst: "b"}, Rates: []float64{-1}}}}, "a->b has rate -1"},
		{"DSCP out of range", mech.ControllerActions{DSCP: map[string]int{"T": 64}}, "T"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckControllerActions(&tc.act)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
