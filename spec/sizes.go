package spec

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Sampler returns a sampler of flow sizes in bytes drawn from the
// distribution; the simulator's and the testbed's workload generators both
// use it.
func (d *SizeDist) Sampler() (func(*rand.Rand) float64, error) {
	mean := float64(d.Mean)
	switch d.Dist {
	case "fixed":
		return func(*rand.Rand) float64 { return mean }, nil
	case "exponential":
		return func(r *rand.Rand) float64 { return math.Max(1, r.ExpFloat64()*mean) }, nil
	case "pareto":
		a := d.Shape
		if a <= 1 {
			return nil, fmt.Errorf("pareto shape %g must exceed 1 for a finite mean", a)
		}
		xm := mean * (a - 1) / a
		return func(r *rand.Rand) float64 { return xm / math.Pow(1-r.Float64(), 1/a) }, nil
	case "lognormal":
		sigma := d.Shape
		mu := math.Log(mean) - sigma*sigma/2
		return func(r *rand.Rand) float64 { return math.Exp(mu + sigma*r.NormFloat64()) }, nil
	case "cdf":
		pts := append([]CDFPoint(nil), d.CDF...)
		if len(pts) == 0 {
			return nil, errors.New("empty cdf")
		}
		return func(r *rand.Rand) float64 {
			u := r.Float64()
			i := sort.Search(len(pts), func(i int) bool { return pts[i].P >= u })
			if i == 0 {
				return float64(pts[0].Size)
			}
			if i >= len(pts) {
				return float64(pts[len(pts)-1].Size)
			}
			a, b := pts[i-1], pts[i]
			f := (u - a.P) / (b.P - a.P)
			return float64(a.Size) + f*float64(b.Size-a.Size)
		}, nil
	}
	return nil, fmt.Errorf("unknown distribution %q", d.Dist)
}
