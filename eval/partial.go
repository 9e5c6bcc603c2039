package eval

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"
)

// spanTolerance: points of a sample interval (fractions) closer than this
// are one point, so that rounding in a driver's recorded activity makes no
// segments of no length.
const spanTolerance = 1e-9

// sampleOracle runs the Oracle on one sample, pro-rating for pairs that were
// active for part of the interval (PairSample.Active). The interval is cut
// at every point where a pair starts or stops; in each segment the pairs
// active there offer their demand while active (Demand ÷ Active) and the
// others nothing, the Oracle solves it, and every pair's guarantee and
// ideal rate over the sample is the segments' solutions weighted by their
// lengths. When every pair with demand is active over the whole interval
// (or Active is not recorded) that is one Oracle solve, as without
// partial activity. It keeps scratch space and the last solve, which it
// reuses while the demands stay the same.
type sampleOracle struct {
	o        *Oracle
	src, dst []int // VM index of each pair's ends

	lo, hi []int     // per active pair: its first and past-last segment
	rate   []float64 // per pair: demand while active
	pts    []float64 // segment bounds of this sample
	seg    []float64 // per pair: demand in the current segment
	stamp  []int     // per VM: the last segment counted in its weight
	segs   int       // segments counted so far (for stamp)

	// the last solve: its demands and results
	d, g, i []float64
	b       []bool
	solved  bool

	// a segmented sample's results; every sample's VM weights
	guar, ideal []float64
	bott        []bool
	vmW         []float64
	wholeW      bool // vmW holds the weights of the last solve, a whole sample
}

func newSampleOracle(o *Oracle, src, dst []int, nv int) *sampleOracle {
	np := len(src)
	return &sampleOracle{
		o: o, src: src, dst: dst,
		lo: make([]int, np), hi: make([]int, np),
		rate: make([]float64, np), seg: make([]float64, np),
		pts:   make([]float64, 0, 2*np+2),
		stamp: make([]int, nv),
		d:     make([]float64, np), g: make([]float64, np), i: make([]float64, np),
		b:    make([]bool, np),
		guar: make([]float64, np), ideal: make([]float64, np), bott: make([]bool, np),
		vmW: make([]float64, nv),
	}
}

// span is the part [lo, hi) of the interval, as fractions, in which a pair
// with demand is taken as active.
func span(ps PairSample) (lo, hi float64) {
	if ps.Active <= 0 {
		return 0, 1
	}
	return ps.ActiveFrom, math.Min(1, ps.ActiveFrom+ps.Active)
}

// sample returns, for the pair samples of one interval, every pair's
// guarantee and ideal rate over the interval (bits/s, pro-rated by the
// time it was active), whether it crossed a link the ideal saturates while
// it was active, and every VM's weight: the fraction of the interval in
// which it had a positive guarantee in some direction. The slices are
// valid until the next call.
func (s *sampleOracle) sample(ps []PairSample) (guar, ideal []float64, bott []bool, vmW []float64, err error) {
	whole := true
	s.pts = append(s.pts[:0], 0, 1)
	for i, p := range ps {
		s.rate[i] = 0
		if p.Demand == 0 {
			continue
		}
		lo, hi := span(p)
		if lo > spanTolerance || hi < 1-spanTolerance {
			whole = false
			s.pts = append(s.pts, lo, hi)
		}
		s.rate[i] = p.Demand
		if p.Active > 0 {
			s.rate[i] = p.Demand / p.Active
		}
	}
	if whole {
		solved, err := s.solve(s.rate)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if solved || !s.wholeW {
			clear(s.vmW)
			s.count(1)
			s.wholeW = true
		}
		return s.g, s.i, s.b, s.vmW, nil
	}
	s.wholeW = false
	guar, ideal, bott, vmW = s.guar, s.ideal, s.bott, s.vmW
	clear(vmW)

	// Segments: the distinct points, in order.
	sort.Float64s(s.pts)
	k := 0
	for _, x := range s.pts {
		if k == 0 || x > s.pts[k-1]+spanTolerance {
			s.pts[k] = x
			k++
		}
	}
	s.pts = s.pts[:k]
	if s.pts[k-1] < 1 {
		s.pts[k-1] = 1 // the last point merged with 1
	}
	first := k // the first segment where some pair is active
	last := 0  // past the last one
	for i, p := range ps {
		guar[i], ideal[i], bott[i] = 0, 0, false
		if s.rate[i] == 0 {
			continue
		}
		lo, hi := span(p)
		s.lo[i] = sort.SearchFloat64s(s.pts, lo-spanTolerance)
		s.hi[i] = sort.SearchFloat64s(s.pts, hi-spanTolerance)
		first, last = min(first, s.lo[i]), max(last, s.hi[i])
	}
	for j := first; j < last; j++ {
		w := s.pts[j+1] - s.pts[j]
		for i := range ps {
			s.seg[i] = 0
			if s.rate[i] > 0 && s.lo[i] <= j && j < s.hi[i] {
				s.seg[i] = s.rate[i]
			}
		}
		if _, err := s.solve(s.seg); err != nil {
			return nil, nil, nil, nil, err
		}
		for i, d := range s.seg {
			if d == 0 {
				continue
			}
			guar[i] += w * s.g[i]
			ideal[i] += w * s.i[i]
			bott[i] = bott[i] || s.b[i]
		}
		s.count(w)
	}
	return guar, ideal, bott, vmW, nil
}

// solve runs the Oracle on demands d unless they are those of the last
// solve; it says whether it ran it.
func (s *sampleOracle) solve(d []float64) (bool, error) {
	if s.solved && slices.Equal(d, s.d) {
		return false, nil
	}
	s.solved = false
	if err := s.o.Solve(d, s.g, s.i, s.b); err != nil {
		return false, err
	}
	copy(s.d, d)
	s.solved = true
	return true, nil
}

// count adds w, a segment's length, to the weight of every VM with a
// positive guarantee in the last solve.
func (s *sampleOracle) count(w float64) {
	vmW := s.vmW
	s.segs++
	for i, g := range s.g {
		if g <= 0 {
			continue
		}
		for _, v := range [2]int{s.src[i], s.dst[i]} {
			if s.stamp[v] != s.segs {
				s.stamp[v] = s.segs
				vmW[v] += w
			}
		}
	}
}

// Interval is a stretch of time [Start, Stop) in a run.
type Interval struct{ Start, Stop time.Duration }

// ActiveIn is what a driver that knows when a pair's traffic runs (the
// testbed: its workloads' phases) records in PairSample: the fraction of
// the sample window [from, to) that the intervals cover (Active) and the
// fraction of it that had passed when the first of them began there
// (ActiveFrom); 0, 0 when none overlaps the window. Intervals may overlap
// and come in any order.
func ActiveIn(from, to time.Duration, on []Interval) (active, activeFrom float64) {
	if to <= from {
		return 0, 0
	}
	clipped := make([]Interval, 0, len(on))
	for _, iv := range on {
		lo, hi := max(iv.Start, from), min(iv.Stop, to)
		if lo < hi {
			clipped = append(clipped, Interval{lo, hi})
		}
	}
	if len(clipped) == 0 {
		return 0, 0
	}
	slices.SortFunc(clipped, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	var covered time.Duration
	end := from
	for _, iv := range clipped {
		lo := max(iv.Start, end)
		if iv.Stop > lo {
			covered += iv.Stop - lo
			end = iv.Stop
		}
	}
	w := float64(to - from)
	return float64(covered) / w, float64(clipped[0].Start-from) / w
}
