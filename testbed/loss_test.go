package testbed

import (
	"reflect"
	"strings"
	"testing"
)

func TestLossParams(t *testing.T) {
	tests := []struct {
		loss, mech string
		params     map[string]any
		want       map[string]any
		err        string
	}{
		{"", "elasticswitch", nil, map[string]any{"congestion": "receiver"}, ""},
		{LossSeq, "seawall", map[string]any{"rate_allocation_period": "15ms"}, map[string]any{"rate_allocation_period": "15ms", "congestion": "receiver"}, ""},
		{LossSeq, "elasticswitch", map[string]any{"congestion": "both"}, map[string]any{"congestion": "both"}, ""},
		{LossSeq, "elasticswitch", map[string]any{"congestion": "egress"}, nil, "sees losses at the receivers"},
		{LossTCP, "elasticswitch", nil, nil, ""},
		{LossTCP, "elasticswitch", map[string]any{"congestion": "receiver"}, nil, "senders only"},
		{LossSeq, "gatekeeper", nil, nil, ""},
		{LossSeq, "static", map[string]any{}, map[string]any{}, ""},
	}
	for _, tc := range tests {
		got, err := LossParams(tc.loss, tc.mech, tc.params)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("LossParams(%q, %q, %v): err %v, want one containing %q", tc.loss, tc.mech, tc.params, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("LossParams(%q, %q, %v) = %v, %v; want %v", tc.loss, tc.mech, tc.params, got, err, tc.want)
		}
	}
	// The caller's map is never changed.
	in := map[string]any{"alpha": 0.4}
	if _, err := LossParams(LossSeq, "elasticswitch", in); err != nil || len(in) != 1 {
		t.Errorf("LossParams changed its input: %v (%v)", in, err)
	}
}

func TestCheckLoss(t *testing.T) {
	for _, ok := range []string{"", LossSeq, LossTCP} {
		if err := CheckLoss(ok); err != nil {
			t.Errorf("CheckLoss(%q): %v", ok, err)
		}
	}
	if err := CheckLoss("ebpf"); err == nil || !strings.Contains(err.Error(), `"seq"`) {
		t.Errorf("CheckLoss(ebpf) = %v, want an error naming the choices", err)
	}
	if !readsLosses("elasticswitch") || !readsLosses("seawall") || readsLosses("gatekeeper") || readsLosses("static") || readsLosses("none") {
		t.Error("readsLosses: only elasticswitch and seawall react to pair losses")
	}
}
