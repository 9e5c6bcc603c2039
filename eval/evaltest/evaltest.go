// Package evaltest builds evaluation inputs for tests of eval and of what
// reads its reports.
package evaltest

import (
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
)

// Mbps is a megabit per second in bits/s.
const Mbps = 1e6

// Sym is a VM with a symmetric hose in Mbps.
func Sym(name string, b float64) eval.VM { return eval.VM{Name: name, In: b * Mbps, Out: b * Mbps} }

// ManyToOne builds ElasticSwitch's Fig. 5 layout: tenant X (X1→X0) and
// tenant Y (n senders Yi→Y0) with 450 Mbps hoses, every pair crossing the
// 1 Gbps link 0 (the receivers' access link) and its own sender link.
func ManyToOne(n int) eval.Input {
	in := eval.Input{
		Scenario: "many-to-one", Mechanism: "test",
		Interval: 100 * time.Millisecond, Units: "Mbps", UnitScale: Mbps,
		LinkCapacity: []float64{1000 * Mbps},
	}
	x := eval.Tenant{Name: "X", VMs: []eval.VM{Sym("X0", 450), Sym("X1", 450)}}
	y := eval.Tenant{Name: "Y", VMs: []eval.VM{Sym("Y0", 450)}}
	in.LinkCapacity = append(in.LinkCapacity, 1000*Mbps) // X1's access link
	in.Pairs = append(in.Pairs, eval.Pair{Tenant: "X", Src: "X1", Dst: "X0", Links: []int{1, 0}})
	for i := 1; i <= n; i++ {
		name := "Y" + string(rune('0'+i))
		y.VMs = append(y.VMs, Sym(name, 450))
		in.LinkCapacity = append(in.LinkCapacity, 1000*Mbps)
		in.Pairs = append(in.Pairs, eval.Pair{Tenant: "Y", Src: name, Dst: "Y0", Links: []int{len(in.LinkCapacity) - 1, 0}})
	}
	in.Tenants = []eval.Tenant{x, y}
	in.LinkNames = []string{"bottleneck"}
	for l := 1; l < len(in.LinkCapacity); l++ {
		in.LinkNames = append(in.LinkNames, "access"+string(rune('0'+l)))
	}
	return in
}

// AddSample appends a sample with the given (rate, demand) per pair in Mbps.
func AddSample(in *eval.Input, rd ...[2]float64) {
	s := eval.Sample{T: time.Duration(len(in.Samples)+1) * in.Interval, Pairs: make([]eval.PairSample, len(rd))}
	for i, v := range rd {
		s.Pairs[i] = eval.PairSample{Rate: v[0] * Mbps, Demand: v[1] * Mbps}
	}
	in.Samples = append(in.Samples, s)
}

// AddParts appends a sample with the given (rate, demand, active, active
// from) per pair, rates and demands in Mbps: each pair active over [from,
// from+active) of the interval (active 0: not recorded, the whole interval).
func AddParts(in *eval.Input, ps ...[4]float64) {
	s := eval.Sample{T: time.Duration(len(in.Samples)+1) * in.Interval, Pairs: make([]eval.PairSample, len(ps))}
	for i, p := range ps {
		s.Pairs[i] = eval.PairSample{Rate: p[0] * Mbps, Demand: p[1] * Mbps, Active: p[2], ActiveFrom: p[3]}
	}
	in.Samples = append(in.Samples, s)
}

// RequestsOnly is a run with request flows only (no VM pairs): two
// tenants at one appliance with guarantees of 100 tokens/s each.
func RequestsOnly(tokens [][2]float64, busy []float64) eval.Input {
	in := eval.Input{
		Scenario: "appliance", Mechanism: "test", Interval: time.Second, Units: "Mbps", UnitScale: Mbps,
		Tenants:      []eval.Tenant{{Name: "A", VMs: []eval.VM{Sym("a1", 0)}}, {Name: "B", VMs: []eval.VM{Sym("b1", 0)}}},
		RequestFlows: []eval.RequestFlow{{Tenant: "A", Src: "a1", Appliance: "kv"}, {Tenant: "B", Src: "b1", Appliance: "kv"}},
		ApplianceGuarantees: map[string]map[string]float64{
			"A": {"kv": 100}, "B": {"kv": 100},
		},
		TokenScale: 1,
		Appliances: []string{"kv"},
	}
	for i, tk := range tokens {
		in.Samples = append(in.Samples, eval.Sample{
			T:             time.Duration(i+1) * time.Second,
			Requests:      []eval.RequestSample{{Requests: tk[0] / 10, Tokens: tk[0]}, {Requests: tk[1] / 10, Tokens: tk[1]}},
			ApplianceBusy: []float64{busy[i]},
		})
	}
	return in
}
