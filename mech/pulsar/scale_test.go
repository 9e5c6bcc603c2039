package pulsar

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
)

func TestScaleInstance(t *testing.T) {
	env, obs := ScaleInstance(1, 0.2)
	if len(env.Resources) != 4200 || len(env.VMs) != 24000 {
		t.Fatalf("%d resources, %d VMs", len(env.Resources), len(env.VMs))
	}
	if len(obs.Flows) != 4800 {
		t.Errorf("%d flows, want 4800 (20%% active)", len(obs.Flows))
	}
	toApp := 0
	for _, f := range obs.Flows {
		if len(f.Path) == 3 && f.Path[1].Role == mech.Appliance {
			toApp++
		}
	}
	if frac := float64(toApp) / float64(len(obs.Flows)); frac < 0.40 || frac > 0.48 {
		t.Errorf("%.2f of the flows go to appliances, want ≈ 0.44", frac)
	}
	env2, obs2 := ScaleInstance(1, 0.2)
	if !reflect.DeepEqual(env, env2) || !reflect.DeepEqual(obs, obs2) {
		t.Error("not deterministic")
	}
	if _, err := NewController(env, DefaultParams()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkStep is one controller step (demand estimation, capacity
// estimation, local and global allocation) at Pulsar §6.4's scale: 24K VMs
// on 2000 servers, 200 appliances, 4200 resources, 44% of flows to
// appliances, with 20% and 100% of the VMs active, global policy DRF and
// H-DRF. The controller has seen the flows once (steady state).
func BenchmarkStep(b *testing.B) {
	for _, pol := range []Policy{DRF, HDRF} {
		for _, act := range []float64{0.2, 1} {
			b.Run(fmt.Sprintf("%s/active=%d%%", pol, int(act*100)), func(b *testing.B) {
				env, obs := ScaleInstance(1, act)
				p := DefaultParams()
				p.GlobalPolicy = pol
				c, err := NewController(env, p)
				if err != nil {
					b.Fatal(err)
				}
				c.Step(obs)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					c.Step(obs)
				}
				b.ReportMetric(float64(len(obs.Flows)), "flows")
			})
		}
	}
}
