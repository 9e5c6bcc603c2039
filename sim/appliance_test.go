package sim_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/sim"
)

// appHeader: two tenants on a 40 Gbps rack with a filestore and a
// key-value store behind s8; tenants have appliance guarantees (VDCs).
const appHeader = `
name: t
duration: 2s
dt: 1ms
units: MT/s
topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 8, edge: 40Gbps}}
appliances:
  - {name: fs, server: s8, model: filestore}
  - {name: kv, server: s7, model: kv}
tenants:
  - name: A
    guarantee: 3.2Gbps
    vms: [{name: a1, server: s1}, {name: a2, server: s2}]
    vdc: {appliances: [{appliance: fs, guarantee: 500MT/s}, {appliance: kv, guarantee: 500MT/s}]}
  - name: B
    guarantee: 3.2Gbps
    vms: [{name: b1, server: s3}, {name: b2, server: s4}]
    vdc: {appliances: [{appliance: fs, guarantee: 500MT/s}, {appliance: kv, guarantee: 500MT/s}]}
`

// applianceMean is the mean token throughput (MT/s) of a tenant at an
// appliance over samples in (from, to] seconds.
func applianceMean(t *testing.T, in *eval.Input, tenant, app string, from, to float64) float64 {
	t.Helper()
	sum, n := 0.0, 0
	for _, s := range in.Samples {
		if sec := s.T.Seconds(); sec > from && sec <= to {
			for i, f := range in.RequestFlows {
				if f.Tenant == tenant && f.Appliance == app {
					sum += s.Requests[i].Tokens
				}
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no samples in (%g, %g]", from, to)
	}
	return sum / float64(n) / 1e6
}

func TestAppliancePhysics(t *testing.T) {
	fsMix := "mix: [{type: read, size: 64KB, fraction: 0.5}, {type: write, size: 64KB, fraction: 0.5}]"
	cases := []struct {
		name      string
		workloads string
		app       string
		ratio     float64 // A ÷ B
		total     float64 // MT/s, 0: don't check
	}{
		{"closed loop shares by outstanding requests", `
  - {tenant: A, kind: requests, src: [a1, a2], appliance: fs, outstanding: 32, ` + fsMix + `}
  - {tenant: B, kind: requests, src: [b1, b2], appliance: fs, outstanding: 8, ` + fsMix + `}`, "fs", 4, 2210},
		{"equal outstanding share equally", `
  - {tenant: A, kind: requests, src: [a1, a2], appliance: fs, outstanding: 8, ` + fsMix + `}
  - {tenant: B, kind: requests, src: [b1, b2], appliance: fs, outstanding: 8, ` + fsMix + `}`, "fs", 1, 2210},
		{"open loop shares by arrivals", `
  - {tenant: A, kind: requests, src: [a1, a2], appliance: fs, request_rate: 30000, ` + fsMix + `}
  - {tenant: B, kind: requests, src: [b1, b2], appliance: fs, request_rate: 10000, ` + fsMix + `}`, "fs", 3, 2210},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := run(t, appHeader+"workloads:"+c.workloads+"\n", "none")
			a := applianceMean(t, in, "A", c.app, 0.1, 2)
			b := applianceMean(t, in, "B", c.app, 0.1, 2)
			if c.ratio > 0 && math.Abs(a/b-c.ratio) > 0.02*c.ratio {
				t.Errorf("A %.1f, B %.1f MT/s: ratio %.3f, want %g", a, b, a/b, c.ratio)
			}
			if c.total > 0 && math.Abs(a+b-c.total) > 0.01*c.total {
				t.Errorf("total %.1f MT/s, want ≈ %g (the filestore's capacity for this mix)", a+b, c.total)
			}
		})
	}
}

// The appliance's capacity in tokens moves with the request mix: 64 KB
// GETs alone yield ~6957 MT/s from the key-value store; 512 B GETs, charged
// 8K tokens but costing 2.85 µs each, yield ~2806 MT/s; mixed, less than
// the large ones alone.
func TestCapacityMovesWithMix(t *testing.T) {
	// 100 Gbps links so that the key-value store, not its link, is the
	// bottleneck; 64 outstanding so that round trips do not limit.
	hdr := strings.Replace(appHeader, "edge: 40Gbps", "edge: 100Gbps", 1)
	big := "  - {tenant: A, kind: requests, src: [a1, a2], appliance: kv, outstanding: 64, mix: [{type: get, size: 64KB}]}\n"
	small := "  - {tenant: B, kind: requests, src: [b1, b2], appliance: kv, outstanding: 64, mix: [{type: get, size: 512}]}\n"
	alone := applianceMean(t, run(t, hdr+"workloads:\n"+big, "none"), "A", "kv", 0.1, 2)
	smallOnly := applianceMean(t, run(t, hdr+"workloads:\n"+small, "none"), "B", "kv", 0.1, 2)
	in := run(t, hdr+"workloads:\n"+big+small, "none")
	mixed := applianceMean(t, in, "A", "kv", 0.1, 2) + applianceMean(t, in, "B", "kv", 0.1, 2)
	if math.Abs(alone-6957) > 70 || math.Abs(smallOnly-2806) > 30 {
		t.Errorf("alone: 64 KB %.0f MT/s (want ≈ 6957), 512 B %.0f MT/s (want ≈ 2806)", alone, smallOnly)
	}
	if !(mixed < alone && mixed > smallOnly) {
		t.Errorf("mixed %.0f MT/s, want between %.0f and %.0f", mixed, smallOnly, alone)
	}
}

// An open-loop tenant that asks for more than the appliance serves builds
// a backlog that drains when the load goes away: the appliance never drops.
func TestOpenLoopBacklogDrains(t *testing.T) {
	in := run(t, appHeader+`workloads:
  - {tenant: A, kind: requests, src: a1, appliance: fs, request_rate: 60000, stop: 1s, mix: [{type: read, size: 64KB}]}
`, "none")
	// Reads of 64 KB take 20.92 µs: capacity ≈ 47.8K requests/s, so 1 s
	// at 60K leaves ≈ 12.2K requests queued, served in the next ≈ 0.26 s.
	busy := applianceMean(t, in, "A", "fs", 0.9, 1.2)
	if math.Abs(busy-3059) > 40 {
		t.Errorf("throughput while draining %.0f MT/s, want the capacity ≈ 3059", busy)
	}
	if after := applianceMean(t, in, "A", "fs", 1.4, 2); after > 1 {
		t.Errorf("still serving %.1f MT/s after the backlog should have drained", after)
	}
	total := 0.0
	for _, s := range in.Samples {
		total += s.Requests[0].Requests * in.Interval.Seconds()
	}
	if math.Abs(total-60000) > 60 {
		t.Errorf("served %.0f requests, want all 60000 offered (never drops)", total)
	}
}

// A request through an appliance on its way (via) is served at both: the
// slower one limits it, and its end-to-end throughput counts at its
// destination.
func TestViaChain(t *testing.T) {
	hdr := strings.Replace(appHeader, "edge: 40Gbps", "edge: 100Gbps", 1)
	hdr = strings.Replace(hdr, "  - {name: kv, server: s7, model: kv}", "  - {name: kv, server: s7, model: kv}\n  - {name: enc, server: s6, model: encryption}", 1)
	hdr = strings.Replace(hdr, "vdc: {appliances: [{appliance: fs, guarantee: 500MT/s}, {appliance: kv, guarantee: 500MT/s}]}",
		"vdc: {appliances: [{appliance: fs, guarantee: 500MT/s}, {appliance: kv, guarantee: 500MT/s}, {appliance: enc, guarantee: 500MT/s}]}", 2)
	cases := []struct {
		cipher string
		want   float64 // MT/s at kv
	}{
		// 8 KB GETs cost 3.6 µs at kv; RC4 of 8 KB 2 µs: kv limits,
		// 1/3.6 µs × 8K tokens.
		{"rc4", 8000 / 3.6},
		// AES of 8 KB costs 6 µs: the encryption box limits.
		{"aes", 8000 / 6.0},
	}
	for _, c := range cases {
		in := run(t, hdr+`workloads:
  - {tenant: A, kind: requests, src: [a1, a2], appliance: kv, via: [{appliance: enc, type: `+c.cipher+`}], outstanding: 64, mix: [{type: get, size: 8KB}]}
`, "none")
		if got := applianceMean(t, in, "A", "kv", 0.1, 2); math.Abs(got-c.want) > 0.01*c.want {
			t.Errorf("%s: %.0f MT/s at kv, want %.0f", c.cipher, got, c.want)
		}
	}
	// To a VM through the encryption box: throughput in bytes.
	in := run(t, hdr+`workloads:
  - {tenant: A, kind: requests, src: a1, dst: a2, via: [{appliance: enc, type: rc4}], outstanding: 64, mix: [{type: write, size: 64KB}]}
`, "none")
	// RC4 of 64 KB: 0.4 + 0.2 × 64 µs = 13.2 µs → 64000 B / 13.2 µs.
	if got, want := applianceMean(t, in, "A", "a2", 0.1, 2), 64000/13.2; math.Abs(got-want) > 0.01*want {
		t.Errorf("to a VM via enc: %.0f MT/s, want %.0f", got, want)
	}
}

// A hypervisor appliance serves requests on their sender's server: on the
// way to a VM it adds no hop (B's TCP flow into s6, where a central box
// would sit, keeps the whole link), and requests to it cross no link at
// all (its own capacity limits them, however slow the links).
func TestHypervisorAppliance(t *testing.T) {
	hdr := strings.Replace(appHeader, "edge: 40Gbps", "edge: 10Gbps", 1)
	hdr = strings.Replace(hdr, "  - {name: kv, server: s7, model: kv}", "  - {name: kv, server: s7, model: kv}\n  - {name: enc, hypervisor: true, model: encryption}", 1)
	hdr = strings.Replace(hdr, "vdc: {appliances: [{appliance: fs, guarantee: 500MT/s}, {appliance: kv, guarantee: 500MT/s}]}",
		"vdc: {appliances: [{appliance: fs, guarantee: 500MT/s}, {appliance: kv, guarantee: 500MT/s}, {appliance: enc, guarantee: 500MT/s}]}", 2)
	hdr = strings.Replace(hdr, "{name: b2, server: s4}", "{name: b2, server: s6}", 1)
	hdr = strings.Replace(hdr, "{name: b1, server: s3}", "{name: b1, server: s5}", 1)
	in := run(t, hdr+`workloads:
  - {tenant: A, kind: requests, src: a1, dst: a2, via: [{appliance: enc, type: rc4}], outstanding: 64, mix: [{type: write, size: 64KB}]}
  - {tenant: B, kind: tcp, src: b1, dst: b2}
`, "none")
	// The link (1250 MB/s) limits A, not RC4 (4848 MT/s).
	if got, want := applianceMean(t, in, "A", "a2", 0.1, 2), 1250.0; math.Abs(got-want) > 0.01*want {
		t.Errorf("to a VM via a hypervisor enc: %.0f MT/s, want %.0f (the link)", got, want)
	}
	if got := meanRate(t, in, "b1", "b2", 0.1, 2); math.Abs(got-10000) > 100 {
		t.Errorf("B's TCP into s6: %.0f Mbps, want the whole 10 Gbps link", got)
	}
	slow := strings.ReplaceAll(strings.Replace(hdr, "edge: 10Gbps", "edge: 1Gbps", 1), "guarantee: 3.2Gbps", "guarantee: 400Mbps")
	in = run(t, slow+`workloads:
  - {tenant: A, kind: requests, src: [a1, a2], appliance: enc, outstanding: 64, mix: [{type: rc4, size: 64KB}]}
`, "none")
	// RC4 of 64 KB: 13.2 µs → 64000 B / 13.2 µs, shared by a1 and a2.
	if got, want := applianceMean(t, in, "A", "enc", 0.1, 2), 64000/13.2; math.Abs(got-want) > 0.01*want {
		t.Errorf("to a hypervisor enc over 1 Gbps links: %.0f MT/s, want %.0f (its capacity)", got, want)
	}
}

// A request flow competes in the network like its connections: two
// tenants writing to a filestore behind one 1 Gbps link, A's requests
// spread over 3 connections and B's over 1, share the link 3:1.
func TestRequestConnections(t *testing.T) {
	hdr := strings.ReplaceAll(strings.Replace(appHeader, "edge: 40Gbps", "edge: 1Gbps", 1), "guarantee: 3.2Gbps", "guarantee: 400Mbps")
	in := run(t, hdr+`workloads:
  - {tenant: A, kind: requests, src: a1, appliance: fs, connections: 3, outstanding: 8, mix: [{type: write, size: 64KB}]}
  - {tenant: B, kind: requests, src: b1, appliance: fs, outstanding: 8, mix: [{type: write, size: 64KB}]}
`, "none")
	a := applianceMean(t, in, "A", "fs", 0.1, 2)
	b := applianceMean(t, in, "B", "fs", 0.1, 2)
	// 64 KB writes: 64000 B on the wire for 64000 tokens.
	if math.Abs(a-93.75) > 1 || math.Abs(b-31.25) > 1 {
		t.Errorf("A %.1f, B %.1f MT/s through the 125 MB/s link, want 93.75 and 31.25 (3:1)", a, b)
	}
}

// A closed-loop request's round trip follows its path: with one request
// outstanding a flow runs at 1 / (service time + sim.RoundTrip(links
// going, links coming back)). The same 10 µs requests to an appliance in
// the sender's rack (2 links each way), in the other rack (4) and in the
// sender's hypervisor (none).
func TestClosedLoopRoundTrip(t *testing.T) {
	in := run(t, `
name: rtt
duration: 1s
dt: 1ms
units: MT/s
topology: {kind: two-tier, two_tier: {racks: 2, servers_per_rack: 2, edge: 40Gbps}}
appliances:
  - {name: near, server: s2, model: custom, costs: [{type: op, base: 10us}]}
  - {name: far, server: s3, model: custom, costs: [{type: op, base: 10us}]}
  - {name: local, hypervisor: true, model: custom, costs: [{type: op, base: 10us}]}
tenants:
  - name: A
    guarantee: 1Gbps
    vms: [{name: a1, server: s1}]
    vdc: {appliances: [{appliance: near, guarantee: 1MT/s}, {appliance: far, guarantee: 1MT/s}, {appliance: local, guarantee: 1MT/s}]}
workloads:
  - {tenant: A, kind: requests, src: a1, appliance: near, outstanding: 1, mix: [{type: op, size: 1KB}]}
  - {tenant: A, kind: requests, src: a1, appliance: far, outstanding: 1, mix: [{type: op, size: 1KB}]}
  - {tenant: A, kind: requests, src: a1, appliance: local, outstanding: 1, mix: [{type: op, size: 1KB}]}
`, "none")
	links := map[string]int{"near": 2, "far": 4, "local": 0}
	for i, f := range in.RequestFlows {
		n, ok := links[f.Appliance]
		if !ok {
			t.Fatalf("unexpected flow to %s", f.Appliance)
		}
		want := 1 / (10e-6 + sim.RoundTrip(n, n).Seconds())
		sum, k := 0.0, 0
		for _, s := range in.Samples {
			if s.T.Seconds() > 0.1 {
				sum += s.Requests[i].Requests
				k++
			}
		}
		if got := sum / float64(k); math.Abs(got-want) > 1e-3*want {
			t.Errorf("to %s (%d links each way): %.0f requests/s, want %.0f", f.Appliance, n, got, want)
		}
	}
	if got := sim.RoundTrip(2, 2); got != 100*time.Microsecond {
		t.Errorf("round trip within a rack %v, want 100µs", got)
	}
}
