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

// classTol is the relative change in a class's known usage below which the
// class split is considered converged.
const classTol = 1e-10

var debugClasses = false

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

	// Sub-resources: a flat resource is one sub-resource; a hierarchical
	// one is an aggregate sub-resource (its whole capacity) followed by one
	// per class (classes sorted by name).
	subBase []int32   // per resource: index of its first sub-resource
	nCls    []int32   // per resource: number of classes (0 = flat)
	clsName []string  // per sub-resource: class name ("" if not a class)
	subRes  []int32   // per sub-resource: its resource
	clsW    []float64 // per sub-resource: class weight
	resid   []float64 // per resource: capacity left after floors

	// Class split state per class sub-resource.
	flowsOn []int32   // number of uses of the sub-resource
	known   []bool    // the class's usage is not limited at this resource
	settled []bool    // scratch for splitClasses
	kdem    []float64 // its usage, when known
	wants   []bool    // a flow of the class was frozen here

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
		s.clsName = append(s.clsName, "")
		s.subRes = append(s.subRes, int32(r))
		s.clsW = append(s.clsW, 0)
		if len(res.Classes) == 0 {
			s.nCls[r] = 0
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
			g.addUse(sub, u.Coef)
			if n := s.nCls[u.Resource]; n > 0 {
				names := s.clsName[sub+1 : sub+1+n]
				k, _ := slices.BinarySearch(names, f.Class)
				g.addUse(sub+1+int32(k), u.Coef)
			}
		}
		g.endFlow()
	}

	for r := range p.Resources {
		g.cap[s.subBase[r]] = s.resid[r]
	}
	var err error
	g.usePrio = hier
	if !hier {
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
	s.settled = grow(s.settled, nS)
	s.kdem = grow(s.kdem, nS)
	s.wants = grow(s.wants, nS)
	g.prio = grow(g.prio, nS)
	for sub := range s.flowsOn {
		s.flowsOn[sub] = 0
		switch {
		case s.clsName[sub] != "":
			g.prio[sub] = 1
		case s.nCls[s.subRes[sub]] > 0:
			g.prio[sub] = 2 // aggregate of a hierarchical resource
		default:
			g.prio[sub] = 0
		}
	}
	for _, sub := range g.useSub {
		s.flowsOn[sub]++
	}
	for sub := 0; sub < nS; sub++ {
		// Classes without flows use nothing; the others start limited.
		s.known[sub] = s.flowsOn[sub] == 0
		s.kdem[sub] = 0
	}
	s.iterations = 0
	for s.iterations < MaxClassIterations {
		s.iterations++
		for r := range p.Resources {
			if s.nCls[r] > 0 {
				s.splitClasses(r)
			}
		}
		if err := s.runEngine(p); err != nil {
			return err
		}
		// A class is limited at a resource if one of its flows was frozen
		// by its class sub-resource (which wins ties with the aggregate). A
		// class whose flows the aggregate froze below the class's cap is
		// not limited by the split: it stays known with its new usage, so
		// the next split lowers the others' level to make room for it.
		for sub := range s.wants {
			s.wants[sub] = false
		}
		for _, b := range g.by {
			if b >= 0 && g.prio[b] == 1 {
				s.wants[b] = true
			}
		}
		changed := false
		for sub := 0; sub < nS; sub++ {
			if s.clsName[sub] == "" || s.flowsOn[sub] == 0 {
				continue
			}
			k := !s.wants[sub]
			u := g.used[sub]
			if k != s.known[sub] || (k && math.Abs(u-s.kdem[sub]) > classTol*s.resid[s.subRes[sub]]) {
				changed = true
			}
			s.known[sub] = k
			if k {
				s.kdem[sub] = u
			}
		}
		if debugClasses {
			fmt.Println("iter", s.iterations)
			for sub := 0; sub < nS; sub++ {
				fmt.Printf("  sub %d res %d cls %s cap %.6g used %.6g known %v kdem %.6g\n", sub, s.subRes[sub], s.clsName[sub], g.cap[sub], g.used[sub], s.known[sub], s.kdem[sub])
			}
		}
		if !changed {
			break
		}
	}
	return nil
}

// splitClasses sets the capacities of resource r's class sub-resources to
// λ·weight, where λ is the level of a weighted water-filling of r's residual
// capacity over its classes in which a known class demands its known usage
// and the others demand without bound (λ = +Inf if every class is known and
// they all fit). The aggregate sub-resource keeps the split feasible while
// the iteration has not converged.
func (s *Solver) splitClasses(r int) {
	g := &s.eng
	R := s.resid[r]
	b, n := int(s.subBase[r])+1, int(s.nCls[r])
	rem, wsum := R, 0.0
	for sub := b; sub < b+n; sub++ {
		s.settled[sub] = s.flowsOn[sub] == 0
		if !s.settled[sub] {
			wsum += s.clsW[sub]
		}
	}
	lambda := math.Inf(1)
	for wsum > 0 && !math.IsInf(R, 1) {
		lambda = rem / wsum
		progress := false
		for sub := b; sub < b+n; sub++ {
			if s.settled[sub] || !s.known[sub] {
				continue
			}
			if q := s.kdem[sub]; q <= lambda*s.clsW[sub] {
				rem -= q
				wsum -= s.clsW[sub]
				s.settled[sub] = true
				progress = true
			}
		}
		if !progress {
			break
		}
		lambda = math.Inf(1)
	}
	for sub := b; sub < b+n; sub++ {
		if s.flowsOn[sub] == 0 {
			g.cap[sub] = 0
		} else {
			g.cap[sub] = max(0, lambda*s.clsW[sub])
		}
	}
}
