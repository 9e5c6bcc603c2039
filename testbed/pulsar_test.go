package testbed

import (
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
)

// TestPulsarRealTraffic runs Pulsar on real traffic through the control
// plane: the leading controller runs Pulsar's controller (the simulator's
// code) over the flows the agents report every second, and each agent
// holds its VM pairs at their allocations (drive.CentralPairs, the rule
// the simulator applies). pulsar-fig3-network: two tenants with 450 Mbps
// guarantees into one 1 Gbps access link, B with 4 times A's TCP
// connections. After the first two control intervals every tenant must
// hold at least 90% of the smaller of its guarantee and the simulator's
// figure, and reach 95% of its guarantee in some 1-second window within
// the first three seconds.
func TestPulsarRealTraffic(t *testing.T) {
	needRoot(t)
	const warmup = 2 * time.Second
	s, in, got, want := runSimAndReal(t, "pulsar-fig3-network", "pulsar", 1, warmup)
	first := firstAt(in, 0.95)
	for _, tn := range s.Spec.Tenants {
		t.Logf("tenant %s: 95%% of its guarantee in the 1-second window ending at %v", tn.Name, first[tn.Name])
	}
	for _, tn := range s.Spec.Tenants {
		g, w := got[tn.Name], want[tn.Name]
		held := math.Min(guarantee(s.Spec, tn.Name), w)
		if g < 0.9*held {
			t.Errorf("tenant %s: %.0f Mbps on real traffic, below 90%% of %.0f (its guarantee, or the simulator's figure if lower)", tn.Name, g, held)
		}
		if at, ok := first[tn.Name]; !ok || at > 3*time.Second {
			t.Errorf("tenant %s: no 1-second window at 95%% of its guarantee ending by 3 s (first: %v)", tn.Name, at)
		}
	}
}

// firstAt returns, per tenant, the end of the first 1-second window in
// which its rate reached frac of its guarantee (the receiving VM's
// ingress hose).
func firstAt(in *eval.Input, frac float64) map[string]time.Duration {
	type acc struct{ sum, n float64 }
	win := map[string]*acc{}
	out := map[string]time.Duration{}
	var start time.Duration
	for _, s := range in.Samples {
		for i, p := range s.Pairs {
			tn := in.Pairs[i].Tenant
			if win[tn] == nil {
				win[tn] = &acc{}
			}
			win[tn].sum += p.Rate
		}
		for _, a := range win {
			a.n++
		}
		if s.T-start < time.Second {
			continue
		}
		for tn, a := range win {
			if _, done := out[tn]; !done && a.n > 0 && a.sum/a.n >= frac*tenantGuarantee(in, tn) {
				out[tn] = s.T
			}
			a.sum, a.n = 0, 0
		}
		start = s.T
	}
	return out
}

// tenantGuarantee is the largest hose guarantee of the tenant's pairs,
// bits/s.
func tenantGuarantee(in *eval.Input, tenant string) float64 {
	g := 0.0
	for _, tn := range in.Tenants {
		if tn.Name == tenant {
			for _, v := range tn.VMs {
				g = math.Max(g, v.In)
			}
		}
	}
	return g
}
