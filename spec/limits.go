package spec

import (
	"math"
	"time"
)

// Limits on a scenario's size and on its numbers, so that a scenario that
// validates can be run: each bounds the memory or time a run takes, or
// keeps every number the run derives (sums of rates over a link, rate /
// guarantee ratios, times between events) finite and representable.
// docs/scenarios.md lists them. Every size check is overflow-safe: each
// factor is bounded before a product is taken.
const (
	// MaxTicks bounds duration / dt.
	MaxTicks = 100_000_000
	// MaxServers bounds the servers of a topology: two_tier racks ×
	// servers_per_rack, fat_tree k³/4, explicit nodes of kind server.
	MaxServers = 1 << 20
	// MaxNodes and MaxLinks bound an explicit graph's nodes and links.
	MaxNodes = 1 << 21
	MaxLinks = 1 << 22
	// MaxFatTreeK is the largest fat_tree k within MaxServers (k³/4).
	MaxFatTreeK = 160
	// MaxVMs bounds the VMs of a scenario, over all tenants.
	MaxVMs = 1 << 20
	// MaxConnections bounds a workload's connections per VM pair (per VM
	// and destination for requests).
	MaxConnections = 1024
	// MaxWorkloadFlows bounds one workload's concurrent flows: its VM
	// pairs × connections (tcp, onoff), its pairs (udp).
	MaxWorkloadFlows = 1 << 24
	// MaxWorkloadArrivals bounds the flows a flows workload is expected to
	// start over the run: arrival_rate × pairs × the seconds it is active.
	MaxWorkloadArrivals = 100_000_000

	// MinRate and MaxRate bound every rate given in bits/s (links,
	// guarantees, sending rates) when it is not zero.
	MinRate = 1    // bps
	MaxRate = 1e15 // bps (1 Pbps)
	// MinSize and MaxSize bound sizes in bytes (flow sizes, requests).
	MinSize = 1    // B
	MaxSize = 1e15 // B (1 PB)
	// MinEventRate and MaxEventRate bound arrival_rate (flows/s per pair)
	// and request_rate (requests/s per VM).
	MinEventRate = 1e-6
	MaxEventRate = 1e9
	// MaxOversubscription bounds two_tier oversubscription (and
	// 1/MaxOversubscription is its least value).
	MaxOversubscription = 1e6
	// MaxLognormalShape bounds a lognormal size distribution's sigma.
	MaxLognormalShape = 10
)

// rateInRange reports whether a nonzero rate is representable: finite,
// within [MinRate, MaxRate].
func rateInRange(r float64) bool { return r >= MinRate && r <= MaxRate }

// sizeInRange reports whether a nonzero size is within [MinSize, MaxSize].
func sizeInRange(b float64) bool { return b >= MinSize && b <= MaxSize }

// eventRateInRange reports whether a rate of events per second is within
// [MinEventRate, MaxEventRate].
func eventRateInRange(r float64) bool { return r >= MinEventRate && r <= MaxEventRate }

// mulCapped returns a × b for non-negative a and b, or limit+1 if the
// product exceeds limit (without overflowing).
func mulCapped(a, b, limit int64) int64 {
	if a < 0 || b < 0 {
		return 0
	}
	if a != 0 && b > limit/a {
		return limit + 1
	}
	if p := a * b; p <= limit {
		return p
	}
	return limit + 1
}

// pairCount returns the number of directed pairs of Pairs (every src to
// every dst but itself) without building them, capped at limit+1.
func pairCount(src, dst []string, limit int64) int64 {
	inSrc := make(map[string]int64, len(src))
	for _, s := range src {
		inSrc[s]++
	}
	var self int64 // (src, dst) positions naming the same VM
	for _, d := range dst {
		self += inSrc[d]
	}
	n := mulCapped(int64(len(src)), int64(len(dst)), limit+self)
	if n > limit+self {
		return limit + 1
	}
	return n - self
}

// activeSeconds is the time a workload's intervals cover within the run.
func activeSeconds(w *Workload, duration Duration) float64 {
	var s float64
	for _, ph := range w.Intervals(time.Duration(duration)) {
		if ph.Stop > ph.Start {
			s += time.Duration(ph.Stop - ph.Start).Seconds()
		}
	}
	return math.Max(s, 0)
}
