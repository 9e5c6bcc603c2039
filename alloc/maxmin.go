package alloc

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// MaxClassIterations caps the fixed-point iteration that splits hierarchical
// resources between their classes (see Solver). Problems without classes
// take one water-filling pass.
const MaxClassIterations = 64

// classSlack is the relative (and, times the residual capacity, absolute)
// headroom given to a class whose usage is known not to be limited by its
// share, so that its own sub-resource never ties with the resource that
// really holds its flows back.
const classSlack = 1e-12

// classTol is the relative change in a class's known usage below which the
// class split is considered converged.
const classTol = 1e-10

// MaxMin returns the weighted max-min rates of p's flows (see Solver.Solve
// for the semantics). It allocates a fresh Solver; use one Solver for
// repeated solves.
func MaxMin(p *Problem) ([]float64, error) {
	var s Solver
	rates := make([]float64, len(p.Flows))
	if err := s.Solve(p, rates); err != nil {
		return nil, err
	}
	return rates, nil
}

// Loads returns the load Σ coef·rate that rates put on each resource of p,
// in dst if it is long enough.
func Loads(p *Problem, rates, dst []float64) []float64 {
	dst = grow(dst, len(p.Resources))
	for r := range dst {
		dst[r] = 0
	}
	for i := range p.Flows {
		for _, u := range p.Flows[i].Uses {
			dst[u.Resource] += u.Coef * rates[i]
		}
	}
	return dst
}

// Solver computes weighted max-min allocations and keeps its scratch space
// between calls, so that a simulator can solve every tick without
// allocating. The zero value is ready to use. A Solver is not safe for
// concurrent use.
type Solver struct {
	eng       engine
	ids       map[string]int
	floorLoad []float64

	// Sub-resources: a flat resource is one sub-resource, a hierarchical one
	// has one per class (classes sorted by name).
	subBase []int32   // per resource: index of its first sub-resource
	nCls    []int32   // per resource: number of classes (0 = flat)
	clsName []string  // per sub-resource: class name ("" if flat)
	subRes  []int32   // per sub-resource: its resource
	clsW    []float64 // per sub-resource: class weight
	resid   []float64 // per resource: capacity left after floors

	// Class split state per sub-resource.
	flowsOn []int32   // number of uses of the sub-resource
	known   []bool    // the class's usage is not limited by its share
	known2  []bool    // scratch
	kdem    []float64 // its usage, when known
	wants   []bool

	iterations int
}

// Iterations reports how many water-filling passes the last Solve took (1
// without hierarchical resources).
func (s *Solver) Iterations() int { return s.iterations }

// Solve computes the weighted max-min rates of p's flows into rates
// (len(rates) must be len(p.Flows)). Semantics:
//
//   - Floors first: rate_f = Floor_f + e_f, where e is the weighted max-min
//     allocation of the capacity left after all floors (resource capacity −
//     Σ Coef·Floor), with residual demands Demand_f − Floor_f. Floors that do
//     not fit a resource are an error naming it.
//   - Weighted max-min by progressive filling with coefficients: e_f =
//     Weight_f·L for a water level L common to all unfrozen flows; flow f
//     puts Coef·rate on each resource it uses; it freezes at its demand or
//     when a resource on its path saturates. Every flow below its demand
//     then has a saturated resource on its path on which its share
//     e_f/Weight_f is the largest.
//   - A hierarchical resource (Classes non-empty) splits its capacity left
//     after floors between classes by weight, work-conserving, and each
//     class shares its part max-min among its flows. Each (resource, class)
//     pair is a sub-resource; the split is found by fixed-point iteration:
//     start from the plain weighted split among the classes that have flows
//     there, water-fill, then call a class "satisfied" when none of its
//     flows was frozen by its own sub-resource (they are demand-limited or
//     held elsewhere) and give it exactly its usage (plus 1e-12 relative
//     slack so its sub-resource does not tie with the real bottleneck);
//     the others share the rest by weight (weighted water-filling over
//     classes). Repeat until no class changes status and satisfied usages
//     move by less than 1e-10 relative, at most MaxClassIterations passes,
//     then make a last pass without the slack (the allocation is feasible
//     whether or not the iteration converged). At the result every
//     flow below its demand has a saturated resource where either (flat) its
//     share is the largest, or (hierarchical) its class's usage/weight is the
//     largest among the classes and its share the largest within its class.
//   - A flow with no demand cap and no finite-capacity resource is an error.
//
// Errors are *Error values from validation (see Validate) or an error for an
// unbounded flow or a wrong len(rates).
func (s *Solver) Solve(p *Problem, rates []float64) error {
	nF, nR := len(p.Flows), len(p.Resources)
	if len(rates) != nF {
		return fmt.Errorf("alloc: Solve: len(rates) = %d, want len(p.Flows) = %d", len(rates), nF)
	}
	if s.ids == nil {
		s.ids = make(map[string]int, nF+nR)
	}
	s.floorLoad = grow(s.floorLoad, nR)
	if err := validateProblem(p, s.ids, s.floorLoad); err != nil {
		return err
	}

	// Sub-resources.
	s.subBase = grow(s.subBase, nR)
	s.nCls = grow(s.nCls, nR)
	s.resid = grow(s.resid, nR)
	s.clsName = s.clsName[:0]
	s.subRes = s.subRes[:0]
	s.clsW = s.clsW[:0]
	hier := false
	for r := range p.Resources {
		res := &p.Resources[r]
		s.subBase[r] = int32(len(s.subRes))
		s.resid[r] = max(0, res.Capacity-s.floorLoad[r])
		if len(res.Classes) == 0 {
			s.nCls[r] = 0
			s.clsName = append(s.clsName, "")
			s.subRes = append(s.subRes, int32(r))
			s.clsW = append(s.clsW, 0)
			continue
		}
		hier = true
		s.nCls[r] = int32(len(res.Classes))
		start := len(s.clsName)
		for name := range res.Classes {
			s.clsName = append(s.clsName, name)
		}
		slices.Sort(s.clsName[start:])
		for _, name := range s.clsName[start:] {
			s.subRes = append(s.subRes, int32(r))
			s.clsW = append(s.clsW, res.Classes[name])
		}
	}
	nS := len(s.subRes)

	g := &s.eng
	g.reset(nS, nF)
	for i := range p.Flows {
		f := &p.Flows[i]
		g.w[i] = f.Weight
		g.dem[i] = f.Demand - f.Floor // +Inf stays +Inf
		for _, u := range f.Uses {
			sub := s.subBase[u.Resource]
			if n := s.nCls[u.Resource]; n > 0 {
				names := s.clsName[sub : sub+n]
				k, _ := slices.BinarySearch(names, f.Class)
				sub += int32(k)
			}
			g.addUse(sub, u.Coef)
		}
		g.endFlow()
	}

	var err error
	if !hier {
		for sub := 0; sub < nS; sub++ {
			g.cap[sub] = s.resid[s.subRes[sub]]
		}
		s.iterations = 1
		err = s.runEngine(p)
	} else {
		err = s.solveClasses(p)
	}
	if err != nil {
		return err
	}
	for i := range p.Flows {
		rates[i] = p.Flows[i].Floor + g.e[i]
	}
	return nil
}

// errUnbounded is wrapped by the error for a flow nothing bounds.
var errUnbounded = errors.New("unbounded flow")

func (s *Solver) runEngine(p *Problem) error {
	if f := s.eng.run(); f >= 0 {
		return fmt.Errorf("alloc: flow %d (%q): %w: no demand cap and no finite-capacity resource on its path", f, p.Flows[f].ID, errUnbounded)
	}
	return nil
}

// solveClasses runs the class-split fixed point (see Solve).
func (s *Solver) solveClasses(p *Problem) error {
	g := &s.eng
	nS := len(s.subRes)
	s.flowsOn = grow(s.flowsOn, nS)
	s.known = grow(s.known, nS)
	s.known2 = grow(s.known2, nS)
	s.kdem = grow(s.kdem, nS)
	s.wants = grow(s.wants, nS)
	for sub := range s.flowsOn {
		s.flowsOn[sub] = 0
	}
	for _, sub := range g.useSub {
		s.flowsOn[sub]++
	}
	for sub := 0; sub < nS; sub++ {
		// Classes without flows use nothing; the others start unknown.
		s.known[sub] = s.flowsOn[sub] == 0
		s.kdem[sub] = 0
	}
	s.iterations = 0
	for s.iterations < MaxClassIterations {
		s.iterations++
		for r := range p.Resources {
			if s.nCls[r] == 0 {
				g.cap[s.subBase[r]] = s.resid[r]
			} else {
				s.splitClasses(r, classSlack)
			}
		}
		if err := s.runEngine(p); err != nil {
			return err
		}
		for sub := range s.wants {
			s.wants[sub] = false
		}
		for _, b := range g.by {
			if b >= 0 {
				s.wants[b] = true
			}
		}
		changed := false
		for sub := 0; sub < nS; sub++ {
			r := s.subRes[sub]
			if s.nCls[r] == 0 || s.flowsOn[sub] == 0 {
				continue
			}
			k := !s.wants[sub]
			u := g.used[sub]
			if k != s.known[sub] || (k && math.Abs(u-s.kdem[sub]) > classTol*s.resid[r]) {
				changed = true
			}
			s.known[sub] = k
			if k {
				s.kdem[sub] = u
			}
		}
		if !changed {
			break
		}
	}
	// Final pass without slack: satisfied classes get exactly their usage,
	// which returns the slack to the classes that can use it. Rates change
	// only at rounding level for satisfied classes (their sub-resource now
	// saturates exactly when their last flow freezes elsewhere).
	s.iterations++
	for r := range p.Resources {
		if s.nCls[r] > 0 {
			s.splitClasses(r, 0)
		}
	}
	return s.runEngine(p)
}

// splitClasses sets the capacities of resource r's class sub-resources: a
// weighted water-filling of its residual capacity over its classes, where a
// known class demands its known usage (plus slack) and the others demand
// without bound. If every class is known, the capacity left over is spread
// by weight so that none is lost.
func (s *Solver) splitClasses(r int, slack float64) {
	g := &s.eng
	R := s.resid[r]
	b, n := int(s.subBase[r]), int(s.nCls[r])
	if math.IsInf(R, 1) {
		for sub := b; sub < b+n; sub++ {
			g.cap[sub] = R
		}
		return
	}
	rem, wsum := R, 0.0
	// known2 marks settled classes here.
	for sub := b; sub < b+n; sub++ {
		if s.flowsOn[sub] == 0 {
			g.cap[sub] = 0
			s.known2[sub] = true
			continue
		}
		s.known2[sub] = false
		wsum += s.clsW[sub]
	}
	wPresent := wsum
	for wsum > 0 {
		lambda := rem / wsum
		progress := false
		for sub := b; sub < b+n; sub++ {
			if s.known2[sub] || !s.known[sub] {
				continue
			}
			q := s.kdem[sub]*(1+slack) + slack*R
			if q <= lambda*s.clsW[sub] {
				g.cap[sub] = q
				rem -= q
				wsum -= s.clsW[sub]
				s.known2[sub] = true
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	if wsum > 0 {
		lambda := max(rem, 0) / wsum
		for sub := b; sub < b+n; sub++ {
			if !s.known2[sub] {
				g.cap[sub] = lambda * s.clsW[sub]
			}
		}
		return
	}
	if wPresent > 0 && rem > 0 {
		for sub := b; sub < b+n; sub++ {
			if s.flowsOn[sub] > 0 {
				g.cap[sub] += rem * s.clsW[sub] / wPresent
			}
		}
	}
}
