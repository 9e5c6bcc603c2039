package testbed

import (
	"strings"
	"testing"
)

// TestSetShareRefuses: a run's appliance can be given another CPU share
// only if it exists, the testbed limits its CPU, and the share is one the
// testbed gives; nothing is written otherwise.
func TestSetShareRefuses(t *testing.T) {
	as := &appliances{runs: []*running{
		{plan: &AppliancePlan{Name: "free"}},
		{plan: &AppliancePlan{Name: "kv", CPU: 0.4}, cg: &cpuGroup{dir: t.TempDir() + "/absent"}, share: 0.4},
	}}
	for _, c := range []struct {
		name  string
		share float64
		want  string
	}{
		{"nope", 0.5, `no appliance "nope"`},
		{"free", 0.5, "runs without a CPU limit"},
		{"kv", 0.1, "a CPU share of 0.1, want 0.2 to 1"},
		{"kv", 1.5, "a CPU share of 1.5, want 0.2 to 1"},
	} {
		err := as.setShare(c.name, c.share)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("setShare(%q, %g) = %v, want an error containing %q", c.name, c.share, err, c.want)
		}
	}
	if as.runs[1].share != 0.4 {
		t.Errorf("a refused share changed the recorded one to %g", as.runs[1].share)
	}
}
