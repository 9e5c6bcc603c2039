package sim_test

import (
	"math"
	"sort"
	"testing"
	"time"
)

// TestClients: a closed-loop client has one flow at a time, back to back
// when it never sleeps (it keeps its 1 Gbps access link busy), and fetches
// from every server; with sleep_prob 1 and sleeps up to 1 s between 10 MB
// flows (80 ms each at 1 Gbps), it is idle ~0.5/(0.5+0.08) of the time.
func TestClients(t *testing.T) {
	const hdr = `
name: clients
duration: 20s
dt: 1ms
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 3, edge: 1Gbps}}
tenants:
  - {name: A, guarantee: 100Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s2}, {name: a3, server: s3}]}
workloads:
  - {tenant: A, kind: clients, src: [a1, a2], dst: a3, sizes: {dist: fixed, mean: 10MB}`
	for _, c := range []struct {
		name, extra string
		busy        float64 // expected fraction of time with a flow
	}{
		{"back to back", "}\n", 1},
		{"sleepy", ", sleep: 1s, sleep_prob: 1}\n", 0.08 / (0.08 + 0.5)},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := run(t, hdr+c.extra, "none")
			fcts := in.FCTs
			sort.Slice(fcts, func(i, j int) bool { return fcts[i].Start < fcts[j].Start })
			from := map[string]int{}
			busy := time.Duration(0)
			for i, f := range fcts {
				from[f.Src]++
				if f.Dst != "a3" {
					t.Fatalf("flow to %s", f.Dst)
				}
				if i > 0 && f.Start < fcts[i-1].Start+fcts[i-1].Duration {
					t.Fatalf("flow %d starts at %v before the previous one ends", i, f.Start)
				}
				busy += f.Duration
			}
			if from["a1"] == 0 || from["a2"] == 0 {
				t.Errorf("flows per server %v, want both", from)
			}
			frac := busy.Seconds() / 20
			if math.Abs(frac-c.busy) > 0.15*c.busy+0.01 {
				t.Errorf("busy %.2f of the time (%d flows), want ≈ %.2f", frac, len(fcts), c.busy)
			}
		})
	}
}
