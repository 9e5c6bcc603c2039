package eval

import (
	"fmt"
	"math"
)

// ImpossibleRates lists the measurements in in that no network could
// have produced: a pair's rate in a sample above the smallest capacity
// on its route by more than tolerance (a fraction). A real-traffic run
// shows them when the machine emulating the datacenter could not keep up
// (counters read late, offload packets counted in the wrong window). It
// reports how many samples were impossible and the worst one; nil when
// none was.
func ImpossibleRates(in *Input, tolerance float64) []string {
	bottleneck := make([]float64, len(in.Pairs))
	for i, p := range in.Pairs {
		bottleneck[i] = math.Inf(1)
		for _, l := range p.Links {
			if l >= 0 && l < len(in.LinkCapacity) {
				bottleneck[i] = math.Min(bottleneck[i], in.LinkCapacity[l])
			}
		}
	}
	count, worst, worstPair, worstT := 0, 0.0, -1, 0.0
	for _, s := range in.Samples {
		bad := false
		for i, ps := range s.Pairs {
			if i >= len(bottleneck) || math.IsInf(bottleneck[i], 1) || bottleneck[i] <= 0 {
				continue
			}
			if r := ps.Rate / bottleneck[i]; r > 1+tolerance {
				bad = true
				if r > worst {
					worst, worstPair, worstT = r, i, s.T.Seconds()
				}
			}
		}
		if bad {
			count++
		}
	}
	if count == 0 {
		return nil
	}
	p := in.Pairs[worstPair]
	scale := in.UnitScale
	if scale == 0 {
		scale = 1
	}
	return []string{fmt.Sprintf("%d of %d samples show a pair faster than its route allows (worst: %s->%s at %.1f %s at t=%.2fs, %.1f× its bottleneck of %.1f %s)",
		count, len(in.Samples), p.Src, p.Dst, worst*bottleneck[worstPair]/scale, in.Units, worstT, worst, bottleneck[worstPair]/scale, in.Units)}
}
