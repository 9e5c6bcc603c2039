package alloc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// This file holds slow, obviously-correct references and checkers used by
// the property and differential tests. They share no code with the solvers.

// refMaxMin is a brute-force weighted max-min for flat problems: starting at
// the floors, it repeatedly computes, by scanning every resource and flow,
// the largest uniform level increment before some flow meets its demand or
// some resource fills, applies it, and freezes what became tight.
func refMaxMin(p *Problem) ([]float64, error) {
	nF, nR := len(p.Flows), len(p.Resources)
	x := make([]float64, nF)
	active := make([]bool, nF)
	for i, f := range p.Flows {
		x[i] = f.Floor
		active[i] = f.Demand > f.Floor
	}
	load := make([]float64, nR)
	computeLoad := func() {
		for r := range load {
			load[r] = 0
		}
		for i, f := range p.Flows {
			for _, u := range f.Uses {
				load[u.Resource] += u.Coef * x[i]
			}
		}
	}
	for {
		computeLoad()
		// Freeze flows on full resources.
		for r := range p.Resources {
			c := p.Resources[r].Capacity
			if math.IsInf(c, 1) || load[r] < c-1e-12*(c+1) {
				continue
			}
			for i, f := range p.Flows {
				for _, u := range f.Uses {
					if u.Resource == r {
						active[i] = false
					}
				}
			}
		}
		any := false
		for i := range active {
			any = any || active[i]
		}
		if !any {
			return x, nil
		}
		delta := math.Inf(1)
		for r := range p.Resources {
			c := p.Resources[r].Capacity
			if math.IsInf(c, 1) {
				continue
			}
			rate := 0.0
			for i, f := range p.Flows {
				if !active[i] {
					continue
				}
				for _, u := range f.Uses {
					if u.Resource == r {
						rate += u.Coef * f.Weight
					}
				}
			}
			if rate > 0 {
				delta = min(delta, max(0, c-load[r])/rate)
			}
		}
		for i, f := range p.Flows {
			if active[i] {
				delta = min(delta, (f.Demand-x[i])/f.Weight)
			}
		}
		if math.IsInf(delta, 1) {
			return nil, fmt.Errorf("unbounded")
		}
		for i, f := range p.Flows {
			if active[i] {
				x[i] += f.Weight * delta
				if x[i] >= f.Demand-1e-12*(f.Demand+1) {
					x[i] = f.Demand
					active[i] = false
				}
			}
		}
	}
}

// refHDRF is a discrete H-DRF scheduler with tiny steps: it repeatedly gives
// a small increment of dominant share to the unfrozen flow with the lowest
// weighted dominant share inside the group with the lowest weighted dominant
// share (consumption over unsaturated resources, frozen flows included).
// As the step shrinks it tends to the progressive-filling H-DRF.
func refHDRF(p *VectorProblem, eps float64) []float64 {
	nF, nR := len(p.Flows), len(p.Resources)
	dem := make([][]float64, nF)
	for i, f := range p.Flows {
		dem[i] = make([]float64, nR)
		if f.Demand != nil {
			copy(dem[i], f.Demand)
		}
		for _, u := range f.Sparse {
			dem[i][u.Resource] += u.Coef
		}
	}
	groupOf := make([]int, nF)
	names := map[string]int{}
	var gw []float64
	for i, f := range p.Flows {
		if f.Group == "" {
			groupOf[i] = len(gw)
			gw = append(gw, f.Weight)
			continue
		}
		g, ok := names[f.Group]
		if !ok {
			g = len(gw)
			names[f.Group] = g
			gw = append(gw, 0)
		}
		groupOf[i] = g
		gw[g] += f.Weight
	}
	for n, w := range p.GroupWeights {
		gw[names[n]] = w
	}
	x := make([]float64, nF)
	active := make([]bool, nF)
	dom := make([]float64, nF)
	for i := range p.Flows {
		blocked := false
		for r := range p.Resources {
			c := p.Resources[r].Capacity
			if dem[i][r] > 0 && c == 0 {
				blocked = true
			}
			if dem[i][r] > 0 && c > 0 && !math.IsInf(c, 1) {
				dom[i] = max(dom[i], dem[i][r]/c)
			}
		}
		switch {
		case blocked:
			x[i] = 0
		case dom[i] == 0:
			x[i] = 1
		default:
			active[i] = true
		}
	}
	load := make([]float64, nR)
	sat := make([]bool, nR)
	for {
		// group shares
		bestG, bestTau := -1, math.Inf(1)
		for g := range gw {
			has := false
			for i := range p.Flows {
				if groupOf[i] == g && active[i] {
					has = true
				}
			}
			if !has {
				continue
			}
			tau := 0.0
			for r := range p.Resources {
				c := p.Resources[r].Capacity
				if sat[r] || math.IsInf(c, 1) || c == 0 {
					continue
				}
				cons := 0.0
				for i := range p.Flows {
					if groupOf[i] == g {
						cons += x[i] * dem[i][r]
					}
				}
				tau = max(tau, cons/(c*gw[g]))
			}
			if tau < bestTau {
				bestG, bestTau = g, tau
			}
		}
		if bestG < 0 {
			return x
		}
		bi := -1
		for i := range p.Flows {
			if groupOf[i] == bestG && active[i] && (bi < 0 || x[i]*dom[i]/p.Flows[i].Weight < x[bi]*dom[bi]/p.Flows[bi].Weight) {
				bi = i
			}
		}
		// increment of x for flow bi: eps of weighted dominant share
		dx := eps * p.Flows[bi].Weight / dom[bi]
		dx = min(dx, 1-x[bi])
		for r := range p.Resources {
			c := p.Resources[r].Capacity
			if dem[bi][r] > 0 && !math.IsInf(c, 1) {
				dx = min(dx, max(0, c-load[r])/dem[bi][r])
			}
		}
		x[bi] += dx
		if x[bi] >= 1-1e-12 {
			x[bi] = 1
			active[bi] = false
		}
		for r := range p.Resources {
			load[r] += dx * dem[bi][r]
			c := p.Resources[r].Capacity
			if !sat[r] && !math.IsInf(c, 1) && load[r] >= c-1e-12*c {
				sat[r] = true
				for i := range p.Flows {
					if dem[i][r] > 0 {
						active[i] = false
					}
				}
			}
		}
	}
}

// --- checkers ---

const checkTol = 1e-7

func near(a, b, scale float64) bool {
	if math.IsInf(a, 1) || math.IsInf(b, 1) {
		return a == b
	}
	return math.Abs(a-b) <= checkTol*(scale+math.Abs(a)+math.Abs(b))
}

// checkFeasible verifies capacities, demands and floors only.
func checkFeasible(p *Problem, x []float64) error {
	load := make([]float64, len(p.Resources))
	for i, f := range p.Flows {
		if x[i] < f.Floor-checkTol*(1+f.Floor) || x[i] > f.Demand+checkTol*(1+f.Demand) {
			return fmt.Errorf("flow %s: rate %g outside [floor %g, demand %g]", f.ID, x[i], f.Floor, f.Demand)
		}
		for _, u := range f.Uses {
			load[u.Resource] += u.Coef * x[i]
		}
	}
	for r, res := range p.Resources {
		if load[r] > res.Capacity*(1+checkTol)+checkTol {
			return fmt.Errorf("resource %s: load %g > capacity %g", res.ID, load[r], res.Capacity)
		}
	}
	return nil
}

// checkMaxMin verifies feasibility, demands, floors and the (hierarchical)
// bottleneck condition of rates for p.
func checkMaxMin(p *Problem, x []float64) error {
	nR := len(p.Resources)
	load := make([]float64, nR)
	floorLoad := make([]float64, nR)
	for i, f := range p.Flows {
		if x[i] < f.Floor-checkTol*(1+f.Floor) {
			return fmt.Errorf("flow %s: rate %g below floor %g", f.ID, x[i], f.Floor)
		}
		if x[i] > f.Demand+checkTol*(1+f.Demand) {
			return fmt.Errorf("flow %s: rate %g above demand %g", f.ID, x[i], f.Demand)
		}
		for _, u := range f.Uses {
			load[u.Resource] += u.Coef * x[i]
			floorLoad[u.Resource] += u.Coef * f.Floor
		}
	}
	for r, res := range p.Resources {
		if load[r] > res.Capacity*(1+checkTol)+checkTol {
			return fmt.Errorf("resource %s: load %g > capacity %g", res.ID, load[r], res.Capacity)
		}
	}
	saturated := func(r int) bool {
		c := p.Resources[r].Capacity
		return !math.IsInf(c, 1) && load[r] >= c*(1-checkTol)-checkTol
	}
	share := func(i int) float64 { return (x[i] - p.Flows[i].Floor) / p.Flows[i].Weight }
	for i, f := range p.Flows {
		if x[i] >= f.Demand-checkTol*(1+f.Demand) {
			continue
		}
		ok := false
		for _, u := range f.Uses {
			r := u.Resource
			if !saturated(r) {
				continue
			}
			res := &p.Resources[r]
			best := true
			if len(res.Classes) == 0 {
				for j, g := range p.Flows {
					for _, v := range g.Uses {
						if v.Resource == r && share(j) > share(i)+checkTol*(1+share(i)) {
							best = false
						}
					}
				}
			} else {
				// class usage (after floors) / class weight
				use := map[string]float64{}
				for j, g := range p.Flows {
					for _, v := range g.Uses {
						if v.Resource == r {
							use[g.Class] += v.Coef * (x[j] - g.Floor)
						}
					}
				}
				mine := use[f.Class] / res.Classes[f.Class]
				for c, u := range use {
					if u/res.Classes[c] > mine+checkTol*(1+mine+res.Capacity) {
						best = false
					}
				}
				for j, g := range p.Flows {
					if g.Class != f.Class {
						continue
					}
					for _, v := range g.Uses {
						if v.Resource == r && share(j) > share(i)+checkTol*(1+share(i)) {
							best = false
						}
					}
				}
			}
			if best {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("flow %s (rate %g < demand %g) has no bottleneck", f.ID, x[i], f.Demand)
		}
	}
	return nil
}

// denseDemand returns flow i's demand vector.
func denseDemand(p *VectorProblem, i int) []float64 {
	d := make([]float64, len(p.Resources))
	f := p.Flows[i]
	if f.Demand != nil {
		copy(d, f.Demand)
	}
	for _, u := range f.Sparse {
		d[u.Resource] += u.Coef
	}
	return d
}

// checkVector verifies x ∈ [0,1] and feasibility; if drf, also the DRF
// bottleneck condition; if nonWasteful, that every flow with x < 1 demands a
// saturated resource.
func checkVector(p *VectorProblem, x []float64, drf, nonWasteful bool) error {
	nR := len(p.Resources)
	d := make([][]float64, len(p.Flows))
	load := make([]float64, nR)
	dom := make([]float64, len(p.Flows))
	for i := range p.Flows {
		if x[i] < -checkTol || x[i] > 1+checkTol || math.IsNaN(x[i]) {
			return fmt.Errorf("flow %s: x = %g", p.Flows[i].ID, x[i])
		}
		d[i] = denseDemand(p, i)
		for r := range d[i] {
			load[r] += x[i] * d[i][r]
			if c := p.Resources[r].Capacity; c > 0 && !math.IsInf(c, 1) {
				dom[i] = max(dom[i], d[i][r]/c)
			}
		}
	}
	for r, res := range p.Resources {
		if load[r] > res.Capacity*(1+checkTol)+1e-12 {
			return fmt.Errorf("resource %s: load %g > capacity %g", res.ID, load[r], res.Capacity)
		}
	}
	sat := func(r int) bool {
		c := p.Resources[r].Capacity
		return !math.IsInf(c, 1) && load[r] >= c*(1-checkTol)
	}
	for i, f := range p.Flows {
		if x[i] >= 1-checkTol {
			continue
		}
		ok := false
		for r := range d[i] {
			if d[i][r] == 0 || !sat(r) {
				continue
			}
			if !drf {
				ok = true
				break
			}
			si := x[i] * dom[i] / f.Weight
			best := true
			for j, g := range p.Flows {
				if d[j][r] > 0 && x[j]*dom[j]/g.Weight > si+checkTol*(1+si) {
					best = false
				}
			}
			if best {
				ok = true
				break
			}
		}
		if !ok && (drf || nonWasteful) {
			return fmt.Errorf("flow %s: x = %g < 1 without a (DRF) bottleneck", f.ID, x[i])
		}
	}
	return nil
}

// --- random instances ---

func randCap(rng *rand.Rand) float64 {
	switch rng.IntN(20) {
	case 0:
		return 0
	case 1:
		return math.Inf(1)
	case 2, 3:
		return float64(1 + rng.IntN(10)) // small integers: ties
	default:
		return 1 + rng.Float64()*99
	}
}

// randProblem builds a random feasible flat (classes=false) or hierarchical
// max-min problem with up to nR resources and nF flows.
func randProblem(rng *rand.Rand, maxR, maxF int, classes bool) *Problem {
	nR := 1 + rng.IntN(maxR)
	nF := 1 + rng.IntN(maxF)
	p := &Problem{}
	names := []string{"A", "B", "C"}
	for r := 0; r < nR; r++ {
		res := Resource{ID: fmt.Sprintf("r%d", r), Capacity: randCap(rng)}
		if classes && rng.IntN(2) == 0 {
			res.Classes = map[string]float64{}
			for _, n := range names {
				res.Classes[n] = float64(1 + rng.IntN(4))
			}
		}
		p.Resources = append(p.Resources, res)
	}
	for i := 0; i < nF; i++ {
		f := Flow{ID: fmt.Sprintf("f%d", i), Demand: Unbounded, Weight: 1}
		if classes {
			f.Class = names[rng.IntN(len(names))]
		}
		k := 1 + rng.IntN(min(3, nR))
		for j := 0; j < k; j++ {
			c := 1.0
			if rng.IntN(3) == 0 {
				c = 0.5 + rng.Float64()*2.5
			}
			f.Uses = append(f.Uses, Use{Resource: rng.IntN(nR), Coef: c})
		}
		switch rng.IntN(4) {
		case 0:
			f.Weight = float64(1 + rng.IntN(3))
		case 1:
			f.Weight = 0.1 + rng.Float64()*5
		}
		if rng.IntN(5) < 3 {
			f.Demand = rng.Float64() * 60
			if rng.IntN(8) == 0 {
				f.Demand = 0
			}
		}
		bounded := !math.IsInf(f.Demand, 1)
		for _, u := range f.Uses {
			bounded = bounded || !math.IsInf(p.Resources[u.Resource].Capacity, 1)
		}
		if !bounded {
			f.Demand = 50
		}
		if rng.IntN(4) == 0 {
			f.Floor = min(f.Demand, rng.Float64()*10)
		}
		p.Flows = append(p.Flows, f)
	}
	// Scale floors down until they fit.
	for {
		load := make([]float64, nR)
		for _, f := range p.Flows {
			for _, u := range f.Uses {
				load[u.Resource] += u.Coef * f.Floor
			}
		}
		fits := true
		for r := range load {
			if load[r] > p.Resources[r].Capacity {
				fits = false
			}
		}
		if fits {
			break
		}
		for i := range p.Flows {
			p.Flows[i].Floor /= 2
			if p.Flows[i].Floor < 1e-3 {
				p.Flows[i].Floor = 0
			}
		}
	}
	return p
}

func randVector(rng *rand.Rand, maxR, maxF, maxG int, sparse bool) *VectorProblem {
	nR := 1 + rng.IntN(maxR)
	nF := 1 + rng.IntN(maxF)
	p := &VectorProblem{}
	for r := 0; r < nR; r++ {
		c := randCap(rng)
		if rng.IntN(4) > 0 && (c == 0 || math.IsInf(c, 1)) {
			c = 10
		}
		p.Resources = append(p.Resources, Resource{ID: fmt.Sprintf("r%d", r), Capacity: c})
	}
	for i := 0; i < nF; i++ {
		f := VectorFlow{ID: fmt.Sprintf("f%d", i), Weight: 1}
		if rng.IntN(3) == 0 {
			f.Weight = float64(1 + rng.IntN(4))
		}
		if maxG > 0 {
			f.Group = fmt.Sprintf("g%d", rng.IntN(maxG))
		}
		d := make([]float64, nR)
		for r := range d {
			if rng.IntN(2) == 0 {
				d[r] = rng.Float64() * 10
				if rng.IntN(4) == 0 {
					d[r] = float64(1 + rng.IntN(5))
				}
			}
		}
		if sparse {
			for r, v := range d {
				if v > 0 {
					f.Sparse = append(f.Sparse, Use{Resource: r, Coef: v})
				}
			}
		} else {
			f.Demand = d
		}
		p.Flows = append(p.Flows, f)
	}
	return p
}

// nInstances scales property-test sizes down with -short.
func nInstances(full int) int {
	if testing.Short() {
		return full / 4
	}
	return full
}
