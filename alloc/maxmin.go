package alloc

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"
)

// MaxClassIterations caps the water-filling passes of the iteration that
// splits hierarchical resources between their classes (see Solver.Solve).
// Problems without classes take one pass.
const MaxClassIterations = 64

// classTol is the relative gap between a hierarchical resource's capacity
// and its usage under which the class split is considered converged.
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
	// Trusted skips input validation (IDs, duplicates, ranges, classes) on
	// every Solve, for callers that build problems themselves from
	// validated inputs and solve them many times (the simulator, the
	// oracle, controllers). Invalid input then gives undefined results.
	Trusted bool

	// Parallel, if set, runs fn on parts [lo, hi) that cover [0, n),
	// possibly several at once, and returns when all have returned. The
	// solver then splits among them its passes over flows and resources
	// that are independent (freezing up front the flows nothing shared
	// holds back); the allocations are the same. The caller decides how
	// many parts, and whether n is worth splitting.
	Parallel func(n int, fn func(lo, hi int))

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

	// Class split state.
	flowsOn  []int32   // per sub-resource: number of uses
	limited  []bool    // per class sub-resource: a flow was frozen by it
	settled  []bool    // scratch for waterLevel
	lambda   []float64 // per hierarchical resource: class level λ
	lamStep  []float64 // per hierarchical resource: λ of a full Newton step
	lamWL    []float64 // per hierarchical resource: water level
	alpha    []float64 // per hierarchical resource: step damping
	lastStep []float64 // per hierarchical resource: last step direction
	active   []int32   // Newton unknowns: resources with a limited class
	jac      []float64 // Jacobian and right-hand side
	dcap     []float64 // per sub-resource: capacity direction
	dsubs    []int32   // the sub-resources where dcap is not zero
	dx       []float64 // per flow: allocation derivative
	rowOf    []int32   // per sub-resource: its Jacobian row (−1: none)

	iterations int
	converged  bool

	// what the last Solve built (SolveAgain): flows and resources, and
	// whether none was hierarchical
	lastF, lastR int
	lastFlat     bool
}

// Iterations reports how many water-filling passes the last Solve took (1
// without hierarchical resources).
func (s *Solver) Iterations() int { return s.iterations }

// Converged reports whether the last Solve's class split converged (always
// true without hierarchical resources). When it did not, the rates are
// still feasible but the classes' shares may be off their fair split.
func (s *Solver) Converged() bool { return s.converged }

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
//     class shares its part max-min among its flows. The split is a level
//     λ_r per hierarchical resource: every class there is capped at
//     λ_r·weight (a sub-resource per (resource, class), water-filled like
//     any other); a class is "limited" if one of its flows was frozen by its
//     cap, and the split is right when the resource is exactly full if some
//     class is limited, and not over-full otherwise. λ is found by
//     iteration, each pass a full water-filling: start from the plain split
//     among the classes present (λ_r = capacity/Σ weights), then step each
//     λ_r to its water level (capacity minus the usage of the classes not
//     limited, over the weights of those limited; +Inf if none is limited
//     and all fit) or, where it agrees in direction, to a Newton step that
//     accounts for how resources interact (the Jacobian of usage in λ is
//     exact on the current piece of the piecewise-linear allocation),
//     halving a resource's step while its direction alternates. It stops
//     when every hierarchical resource is within 1e-10 (relative) of that
//     condition or after MaxClassIterations passes (Converged reports
//     which); if the last pass over-fills a resource, one more pass with
//     each resource's total capacity enforced makes the answer feasible.
//     Random networks where every resource is hierarchical converge in 2–4
//     passes typically (99th percentile ≈ 15); about one in 20,000 does not
//     converge. At the result every flow below its demand has a saturated
//     resource where either (flat) its share is the largest, or
//     (hierarchical) its class's usage/weight is the largest among the
//     classes there and its share the largest within its class.
//   - A flow with no demand cap and no finite-capacity resource is an error.
//
// Errors are *Error values (validation, see Validate, and unbounded flows)
// or an error for a wrong len(rates).
func (s *Solver) Solve(p *Problem, rates []float64) error {
	nF, nR := len(p.Flows), len(p.Resources)
	if len(rates) != nF {
		return fmt.Errorf("alloc: Solve: len(rates) = %d, want len(p.Flows) = %d", len(rates), nF)
	}
	s.lastFlat = false // until this problem's uses are built
	if s.ids == nil {
		s.ids = make(map[string]int, nF+nR)
	}
	s.floorLoad = grow(s.floorLoad, nR)
	if s.Trusted {
		clear(s.floorLoad)
		for i := range p.Flows {
			if f := &p.Flows[i]; f.Floor > 0 {
				for _, u := range f.Uses {
					s.floorLoad[u.Resource] += u.Coef * f.Floor
				}
			}
		}
	} else if err := validateProblem(p, s.ids, s.floorLoad); err != nil {
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
				cls := u.Class
				if cls == "" {
					cls = f.Class
				}
				k, _ := slices.BinarySearch(names, cls)
				g.addUse(sub+1+int32(k), u.Coef)
			}
		}
		g.endFlow()
	}

	for r := range p.Resources {
		g.cap[s.subBase[r]] = s.resid[r]
	}
	s.lastF, s.lastR, s.lastFlat = nF, nR, !hier
	var err error
	g.usePrio = hier
	g.eOnly = !hier // the classes' passes read the engine's loads and levels
	if !hier {
		s.iterations = 1
		s.converged = true
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

// SolveAgain is Solve for a problem whose flows use the same resources
// with the same coefficients and classes, in the same order, as the
// problem of the last Solve (or SolveAgain): only capacities, demands,
// weights and floors may differ. A Trusted solver then keeps what it built
// of the uses last time; otherwise, or when a resource has classes, it is
// Solve. The rates are those Solve would give.
func (s *Solver) SolveAgain(p *Problem, rates []float64) error {
	nF, nR := len(p.Flows), len(p.Resources)
	if !s.Trusted || !s.lastFlat || nF != s.lastF || nR != s.lastR || len(rates) != nF {
		return s.Solve(p, rates)
	}
	for r := range p.Resources {
		if len(p.Resources[r].Classes) > 0 {
			return s.Solve(p, rates)
		}
	}
	clear(s.floorLoad)
	g := &s.eng
	g.parallel = s.Parallel
	var floors atomic.Bool
	g.each(nF, func(lo, hi int) {
		some := false
		for i := lo; i < hi; i++ {
			f := &p.Flows[i]
			g.w[i] = f.Weight
			g.dem[i] = f.Demand - f.Floor // +Inf stays +Inf
			some = some || f.Floor > 0
		}
		if some {
			floors.Store(true)
		}
	})
	if floors.Load() {
		for i := range p.Flows {
			if f := &p.Flows[i]; f.Floor > 0 {
				for _, u := range f.Uses {
					s.floorLoad[u.Resource] += u.Coef * f.Floor
				}
			}
		}
	}
	g.each(nR, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			// flat: resource r is sub-resource r
			s.resid[r] = max(0, p.Resources[r].Capacity-s.floorLoad[r])
			g.cap[r] = s.resid[r]
		}
	})
	s.iterations = 1
	s.converged = true
	g.usePrio = false
	g.eOnly = true
	g.sameUses = true
	err := s.runEngine(p)
	g.sameUses = false
	if err != nil {
		return err
	}
	g.each(nF, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			rates[i] = p.Flows[i].Floor + g.e[i]
		}
	})
	return nil
}

func (s *Solver) runEngine(p *Problem) error {
	s.eng.parallel = s.Parallel
	if f := s.eng.run(); f >= 0 {
		return flowErr(f, p.Flows[f].ID, -1, "demand", "unbounded: no demand cap and no finite-capacity resource on its path")
	}
	return nil
}

// solveClasses runs the class-split iteration (see Solve).
func (s *Solver) solveClasses(p *Problem) error {
	g := &s.eng
	nS, nR := len(s.subRes), len(p.Resources)
	s.flowsOn = grow(s.flowsOn, nS)
	s.limited = grow(s.limited, nS)
	s.settled = grow(s.settled, nS)
	s.lambda = grow(s.lambda, nR)
	s.lamStep = grow(s.lamStep, nR)
	s.lamWL = grow(s.lamWL, nR)
	s.alpha = grow(s.alpha, nR)
	s.lastStep = grow(s.lastStep, nR)
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
	// Start from the plain weighted split among the classes present: every
	// class is treated as limited.
	for r := 0; r < nR; r++ {
		if s.nCls[r] == 0 {
			continue
		}
		b, n := int(s.subBase[r])+1, int(s.nCls[r])
		for sub := b; sub < b+n; sub++ {
			s.limited[sub] = true
		}
		s.lambda[r] = s.waterLevel(r, false)
		s.alpha[r] = 1
		s.lastStep[r] = 0
		g.cap[b-1] = math.Inf(1) // aggregate off while iterating
	}
	s.iterations = 0
	rho, err := s.classPass(p)
	if err != nil {
		return err
	}
	converged := rho <= classTol
	for !converged && s.iterations < MaxClassIterations {
		// Newton step where it agrees in direction with the water level
		// (it accounts for the coupling between resources), the water
		// level elsewhere (usage need not grow with λ, and only raising λ
		// can lift an under-used resource's caps), damped per resource
		// while its steps alternate in direction.
		for r := 0; r < nR; r++ {
			if s.nCls[r] > 0 {
				s.lamWL[r] = s.waterLevel(r, true)
				s.lamStep[r] = s.lamWL[r]
			}
		}
		s.newtonStep(p)
		for r := 0; r < nR; r++ {
			if s.nCls[r] == 0 {
				continue
			}
			old, wl, nt := s.lambda[r], s.lamWL[r], s.lamStep[r]
			if math.IsInf(old, 1) || math.IsInf(wl, 1) {
				s.lambda[r] = wl
				s.lastStep[r] = 0
				continue
			}
			target := nt
			if (nt-old)*(wl-old) <= 0 {
				target = wl
			}
			d := target - old
			if d*s.lastStep[r] < 0 {
				s.alpha[r] = max(1.0/64, s.alpha[r]/2)
			} else if d != 0 {
				s.alpha[r] = min(1, s.alpha[r]*2)
			}
			if d != 0 {
				s.lastStep[r] = d
			}
			s.lambda[r] = max(0, old+s.alpha[r]*d)
		}
		r2, err := s.classPass(p)
		if err != nil {
			return err
		}
		rho = r2
		converged = rho <= classTol
	}
	s.converged = converged
	// The classes' caps may overcommit a resource until the iteration has
	// converged; enforce the aggregates if the last pass exceeds one.
	over := !converged
	for r := 0; r < nR && !over; r++ {
		if s.nCls[r] > 0 && g.used[s.subBase[r]] > s.resid[r]*(1+1e-12) {
			over = true
		}
	}
	if !over {
		return nil
	}
	s.iterations++
	for r := 0; r < nR; r++ {
		if s.nCls[r] > 0 {
			g.cap[s.subBase[r]] = s.resid[r]
		}
	}
	return s.runEngine(p)
}

// classPass water-fills with every class of a hierarchical resource r
// capped at λ_r·weight, marks the classes limited by their cap, and returns
// the residual: the largest relative gap between a hierarchical resource's
// capacity and its usage, counting only overuse where no class is limited.
func (s *Solver) classPass(p *Problem) (float64, error) {
	g := &s.eng
	s.iterations++
	for r := range p.Resources {
		if s.nCls[r] == 0 {
			continue
		}
		b, n := int(s.subBase[r])+1, int(s.nCls[r])
		for sub := b; sub < b+n; sub++ {
			g.cap[sub] = s.lambda[r] * s.clsW[sub]
		}
	}
	if err := s.runEngine(p); err != nil {
		return 0, err
	}
	for sub := range s.limited {
		s.limited[sub] = false
	}
	for _, b := range g.by {
		if b >= 0 && g.prio[b] == 1 {
			s.limited[b] = true
		}
	}
	rho := 0.0
	for r := range p.Resources {
		if s.nCls[r] == 0 {
			continue
		}
		R, U := s.resid[r], g.used[s.subBase[r]]
		if math.IsInf(R, 1) {
			continue
		}
		any := false
		b, n := int(s.subBase[r])+1, int(s.nCls[r])
		for sub := b; sub < b+n; sub++ {
			any = any || s.limited[sub]
		}
		gap := U - R
		if any {
			gap = math.Abs(gap)
		}
		rho = max(rho, gap/max(R, 1e-300))
	}
	return rho, nil
}

// newtonStep replaces, in lamStep, the water level of every hierarchical
// resource that has a limited class by a Newton step on the system
// usage_r(λ) = capacity_r over those resources, with the Jacobian computed
// exactly on the current piece by engine.sensitivity. It leaves lamStep
// alone and reports false if there is no such resource or the Jacobian is
// singular.
func (s *Solver) newtonStep(p *Problem) bool {
	g := &s.eng
	s.active = s.active[:0]
	for r := range p.Resources {
		if s.nCls[r] == 0 || math.IsInf(s.resid[r], 1) || math.IsInf(s.lambda[r], 1) {
			continue
		}
		b, n := int(s.subBase[r])+1, int(s.nCls[r])
		for sub := b; sub < b+n; sub++ {
			if s.limited[sub] {
				s.active = append(s.active, int32(r))
				break
			}
		}
	}
	m := len(s.active)
	if m == 0 {
		return false
	}
	s.jac = grow(s.jac, m*m+m)
	s.dcap = grow(s.dcap, len(s.subRes))
	s.dx = grow(s.dx, len(g.w))
	clear(s.dcap)
	clear(s.dx)
	// row of the Jacobian of each active resource's aggregate sub-resource
	s.rowOf = grow(s.rowOf, len(s.subRes))
	for sub := range s.rowOf {
		s.rowOf[sub] = -1
	}
	for i, ri := range s.active {
		s.rowOf[s.subBase[ri]] = int32(i)
	}
	jac, rhs := s.jac[:m*m], s.jac[m*m:]
	for j, rj := range s.active {
		b, n := int(s.subBase[rj])+1, int(s.nCls[rj])
		s.dsubs = s.dsubs[:0]
		for sub := b; sub < b+n; sub++ {
			s.dcap[sub] = s.clsW[sub]
			s.dsubs = append(s.dsubs, int32(sub))
		}
		wrote := g.sensitivity(s.dcap, s.dx, s.dsubs)
		for sub := b; sub < b+n; sub++ {
			s.dcap[sub] = 0
		}
		// Column j: each active resource's usage moves by Σ coef·dx over
		// its aggregate's flows. Only flows that moved add to it; taken in
		// flow order, each row adds them in the order of its aggregate's
		// index, as a pass over all of its flows would.
		for i := range s.active {
			jac[i*m+j] = 0
		}
		for _, f := range wrote {
			x := s.dx[f]
			if x == 0 {
				continue
			}
			for u := g.useStart[f]; u < g.useStart[f+1]; u++ {
				if i := s.rowOf[g.useSub[u]]; i >= 0 {
					jac[int(i)*m+j] += g.useCoef[u] * x
				}
			}
		}
		g.clearDx(s.dx, wrote)
	}
	for i, r := range s.active {
		rhs[i] = s.resid[r] - g.used[s.subBase[r]]
	}
	if !solveLinear(jac, rhs, m) {
		return false
	}
	for i, r := range s.active {
		s.lamStep[r] = max(0, s.lambda[r]+rhs[i])
	}
	return true
}

// solveLinear solves the m×m system a·x = b (row-major a) in place by
// Gaussian elimination with partial pivoting, leaving x in b. It reports
// false if a is (numerically) singular.
func solveLinear(a, b []float64, m int) bool {
	scale := 0.0
	for _, v := range a[:m*m] {
		scale = max(scale, math.Abs(v))
	}
	if scale == 0 {
		return false
	}
	for c := 0; c < m; c++ {
		piv := c
		for r := c + 1; r < m; r++ {
			if math.Abs(a[r*m+c]) > math.Abs(a[piv*m+c]) {
				piv = r
			}
		}
		if math.Abs(a[piv*m+c]) <= 1e-12*scale {
			return false
		}
		if piv != c {
			for k := 0; k < m; k++ {
				a[c*m+k], a[piv*m+k] = a[piv*m+k], a[c*m+k]
			}
			b[c], b[piv] = b[piv], b[c]
		}
		for r := c + 1; r < m; r++ {
			f := a[r*m+c] / a[c*m+c]
			if f == 0 {
				continue
			}
			for k := c; k < m; k++ {
				a[r*m+k] -= f * a[c*m+k]
			}
			b[r] -= f * b[c]
		}
	}
	for c := m - 1; c >= 0; c-- {
		v := b[c]
		for k := c + 1; k < m; k++ {
			v -= a[c*m+k] * b[k]
		}
		b[c] = v / a[c*m+c]
	}
	return true
}

// waterLevel returns the class level λ of hierarchical resource r: the
// level of a weighted water-filling of its residual capacity over its
// classes present, in which a limited class demands without bound and any
// other class demands what it used in the last pass (if used, else
// nothing). It is +Inf when no class is limited and the usages fit. When the
// classes limited are exactly those at the cap λ_old·ω, this is the Newton
// step λ_old + (capacity − usage)/Σ_limited ω on the piecewise-linear usage.
func (s *Solver) waterLevel(r int, used bool) float64 {
	g := &s.eng
	R := s.resid[r]
	if math.IsInf(R, 1) {
		return R
	}
	b, n := int(s.subBase[r])+1, int(s.nCls[r])
	rem, wsum := R, 0.0
	for sub := b; sub < b+n; sub++ {
		s.settled[sub] = s.flowsOn[sub] == 0
		if !s.settled[sub] {
			wsum += s.clsW[sub]
		}
	}
	for wsum > 0 {
		lambda := max(rem, 0) / wsum
		progress := false
		for sub := b; sub < b+n; sub++ {
			if s.settled[sub] || s.limited[sub] {
				continue
			}
			q := 0.0
			if used {
				q = g.used[sub]
			}
			if q <= lambda*s.clsW[sub] {
				rem -= q
				wsum -= s.clsW[sub]
				s.settled[sub] = true
				progress = true
			}
		}
		if !progress {
			return lambda
		}
	}
	return math.Inf(1)
}
