package testbed

import (
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// TestNewMechanismLosses: every mechanism whose agents react to losses is
// set up for the side where the loss counter sees them
// (mech.LossAdapter): with the default or explicit receiver feedback
// under LossSeq (at the destination), with its own count under LossTCP
// (at the source); parameters that would read the side the counter does
// not see are refused with a clear message.
func TestNewMechanismLosses(t *testing.T) {
	lossy := 0
	for _, name := range Mechanisms() {
		m, err := NewMechanism(name, nil, "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !m.Capabilities().Losses {
			continue
		}
		if _, ok := m.(mech.LossAdapter); !ok {
			t.Errorf("%s reacts to losses but cannot be set up for where they are seen", name)
			continue
		}
		lossy++
		for _, tc := range []struct {
			loss   string
			params map[string]any
			err    string
		}{
			{LossSeq, nil, ""},
			{LossSeq, map[string]any{"congestion": "receiver"}, ""},
			{LossSeq, map[string]any{"congestion": "both"}, ""},
			{LossSeq, map[string]any{"congestion": "egress"}, "sees losses at the receivers"},
			{LossTCP, nil, ""},
			{LossTCP, map[string]any{"congestion": "receiver"}, "senders only"},
		} {
			_, err := NewMechanism(name, tc.params, tc.loss)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("%s, %v, --loss %s: %v; want error %q", name, tc.params, tc.loss, err, tc.err)
			}
		}
	}
	if lossy == 0 {
		t.Error("no mechanism reacts to losses: the test tests nothing")
	}
}

func TestCheckLoss(t *testing.T) {
	for _, tc := range []struct {
		name string
		side mech.LossSide
	}{{"", mech.LossAtDestination}, {LossSeq, mech.LossAtDestination}, {LossTCP, mech.LossAtSource}} {
		if s, err := LossSide(tc.name); err != nil || s != tc.side {
			t.Errorf("LossSide(%q) = %v, %v; want %v", tc.name, s, err, tc.side)
		}
	}
	if err := CheckLoss("ebpf"); err == nil || !strings.Contains(err.Error(), `"seq"`) {
		t.Errorf("CheckLoss(ebpf) = %v, want an error naming the choices", err)
	}
	if _, err := NewMechanism(Mechanisms()[0], nil, "ebpf"); err == nil {
		t.Error("NewMechanism accepted an unknown loss counter")
	}
}

// TestMechanisms: the mechanisms the testbed offers are those host
// agents can run; the others are refused with the reason.
func TestMechanisms(t *testing.T) {
	offered := map[string]bool{}
	for _, n := range Mechanisms() {
		offered[n] = true
	}
	for _, n := range []string{"none", "static", "elasticswitch", "seawall", "gatekeeper", "pulsar"} {
		if !offered[n] {
			t.Errorf("%s not offered (offered: %v)", n, Mechanisms())
		}
	}
	for _, n := range []string{"hosefill", "qshare", "drx", "drx-eb-local"} {
		if offered[n] {
			t.Errorf("%s offered", n)
		}
		if _, err := NewMechanism(n, nil, ""); err == nil || !strings.Contains(err.Error(), "simulator only") {
			t.Errorf("NewMechanism(%s): %v, want refused", n, err)
		}
	}
}
