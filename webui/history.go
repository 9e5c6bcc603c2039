package webui

import (
	"math"
	"strconv"
)

// Series kinds the history keeps.
const (
	kindTenantAchieved  = "tenant.achieved"
	kindTenantGuarantee = "tenant.guarantee"
	kindTenantBelow     = "tenant.below"
	kindVMReceived      = "vm.received"
	kindVMSent          = "vm.sent"
	kindAppThroughput   = "appliance.throughput"
	kindAppEstimate     = "appliance.estimate"
	kindAppTenant       = "appliance.tenant"
)

// key names one series: its kind, the object (tenant, VM, appliance) and,
// for an appliance's tenants, the tenant.
type key struct {
	kind, name, sub string
}

// history keeps the last n samples of a bounded number of series on one
// time axis (a ring): memory is at most n × (maxSeries + 1) values,
// whatever the cluster does. A series with no value in the whole window
// is forgotten; one that would exceed maxSeries is not kept (counted in
// refused).
type history struct {
	n, maxSeries int
	times        []int64 // Unix milliseconds, ring
	head         int     // the newest sample's index
	count        int     // samples held (≤ n)
	total        uint64  // samples ever added
	series       map[key]*series
	refused      int // series not kept at the latest sample
}

type series struct {
	v    []float32 // aligned with times; NaN: no value
	last uint64    // the sample (total) at which it last had a value
}

func newHistory(n, maxSeries int) *history {
	return &history{n: n, maxSeries: maxSeries, times: make([]int64, n), head: n - 1, series: map[key]*series{}}
}

// add appends a sample at t (Unix milliseconds) with the values given;
// series not given have no value at t.
func (h *history) add(t int64, vals map[key]float64) {
	h.head = (h.head + 1) % h.n
	h.times[h.head] = t
	h.count = min(h.count+1, h.n)
	h.total++
	nan := float32(math.NaN())
	for _, s := range h.series {
		s.v[h.head] = nan
	}
	h.refused = 0
	for k, x := range vals {
		s := h.series[k]
		if s == nil {
			if len(h.series) >= h.maxSeries {
				h.refused++
				continue
			}
			s = &series{v: make([]float32, h.n)}
			for i := range s.v {
				s.v[i] = nan
			}
			h.series[k] = s
		}
		s.v[h.head] = float32(x)
		s.last = h.total
	}
	for k, s := range h.series {
		if h.total-s.last >= uint64(h.n) {
			delete(h.series, k)
		}
	}
}

// values returns a series' samples, oldest first (nil if not kept).
func (h *history) values(k key) values {
	s := h.series[k]
	if s == nil {
		return nil
	}
	out := make(values, h.count)
	for i := range out {
		out[i] = s.v[h.index(i)]
	}
	return out
}

// timesSec returns the samples' times in seconds, oldest first.
func (h *history) timesSec() []float64 {
	out := make([]float64, h.count)
	for i := range out {
		out[i] = float64(h.times[h.index(i)]) / 1000
	}
	return out
}

// index is the ring index of the i-th sample held, oldest first.
func (h *history) index(i int) int { return (h.head - h.count + 1 + i + h.n) % h.n }

// stats summarizes a series over the window: the mean and lowest of its
// values and how many samples have one (NaN mean and min when none).
func (h *history) stats(k key) (mean, lo float64, n int) {
	s := h.series[k]
	if s == nil {
		return math.NaN(), math.NaN(), 0
	}
	sum := 0.0
	lo = math.Inf(1)
	for i := 0; i < h.count; i++ {
		x := s.v[h.index(i)]
		if x != x { // NaN
			continue
		}
		sum += float64(x)
		lo = min(lo, float64(x))
		n++
	}
	if n == 0 {
		return math.NaN(), math.NaN(), 0
	}
	return sum / float64(n), lo, n
}

// values is a series as JSON: numbers to 6 significant digits, null where
// there is no value.
type values []float32

// MarshalJSON implements json.Marshaler.
func (v values) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+8*len(v))
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		if x != x || math.IsInf(float64(x), 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, float64(x), 'g', 6, 32)
	}
	return append(b, ']'), nil
}
