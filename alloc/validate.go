package alloc

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Error is an input error (invalid problem, or a flow nothing bounds). It
// names what is at fault precisely enough for a caller to point at it in
// its own input (the JSON layer turns it into a field path such as
// flows[2].weight).
type Error struct {
	Flow     int    // index into Flows, or -1
	Resource int    // index into Resources, or -1
	Use      int    // index into Flow.Uses / VectorFlow.Sparse, or -1
	ID       string // ID of the flow (if Flow ≥ 0) or else of the resource
	Field    string // id, capacity, classes, weight, demand, floor, uses, resource, coef, class, sparse, group_weights
	Msg      string // what is wrong
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("alloc: ")
	switch {
	case e.Flow >= 0:
		fmt.Fprintf(&b, "flow %d (%q)", e.Flow, e.ID)
		if e.Use >= 0 {
			fmt.Fprintf(&b, " use %d", e.Use)
		}
	case e.Resource >= 0:
		fmt.Fprintf(&b, "resource %d (%q)", e.Resource, e.ID)
	default:
		b.WriteString("problem")
	}
	if e.Field != "" {
		b.WriteString(" ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func flowErr[I int | int32](i I, id string, use int, field, format string, args ...any) *Error {
	return &Error{Flow: int(i), Resource: -1, Use: use, ID: id, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func resErr(r int, id, field, format string, args ...any) *Error {
	return &Error{Flow: -1, Resource: r, Use: -1, ID: id, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// num formats a number for an error message.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// floorSlack is the relative excess over capacity tolerated when checking
// that floors fit (rounding in sums of floors).
const floorSlack = 1e-9

// Validate checks a max-min problem: non-empty unique IDs, capacities not
// negative or NaN (+Inf is allowed: a resource that never saturates), class
// weights > 0 and finite, flow weights > 0 and finite, demands not negative
// or NaN (+Inf = unbounded), floors finite, not negative and not above the
// demand, uses naming existing resources with finite coefficients > 0, a
// flow's class present at every hierarchical resource it uses, and floors
// that fit every resource. It returns an *Error.
func Validate(p *Problem) error {
	return validateProblem(p, make(map[string]int, len(p.Flows)+len(p.Resources)), nil)
}

// Validate is the method form of Validate(p).
func (p *Problem) Validate() error { return Validate(p) }

// validateResources checks IDs, capacities and classes of resources.
func validateResources(rs []Resource, ids map[string]int, vector bool) error {
	clear(ids)
	for r := range rs {
		res := &rs[r]
		if res.ID == "" {
			return resErr(r, "", "id", "empty id")
		}
		n := len(ids)
		ids[res.ID] = r
		if len(ids) == n {
			j := 0
			for rs[j].ID != res.ID {
				j++
			}
			return resErr(r, res.ID, "id", "duplicate resource id %q (also resource %d)", res.ID, j)
		}
		if math.IsNaN(res.Capacity) || res.Capacity < 0 {
			return resErr(r, res.ID, "capacity", "must be ≥ 0, got %s", num(res.Capacity))
		}
		if len(res.Classes) > 0 && vector {
			return resErr(r, res.ID, "classes", "classes are not supported in vector problems")
		}
		for name, w := range res.Classes {
			if name == "" {
				return resErr(r, res.ID, "classes", "empty class name")
			}
			if !(w > 0) || math.IsInf(w, 1) {
				return resErr(r, res.ID, "classes", "class %q: weight must be > 0 and finite, got %s", name, num(w))
			}
		}
	}
	return nil
}

// validateProblem validates p using ids as scratch. If floorLoad is non-nil
// (len(p.Resources)), it receives the load floors put on each resource.
func validateProblem(p *Problem, ids map[string]int, floorLoad []float64) error {
	if err := validateResources(p.Resources, ids, false); err != nil {
		return err
	}
	clear(ids)
	nr := len(p.Resources)
	for i := range p.Flows {
		f := &p.Flows[i]
		if f.ID == "" {
			return flowErr(i, "", -1, "id", "empty id")
		}
		n := len(ids)
		ids[f.ID] = i
		if len(ids) == n {
			j := 0
			for p.Flows[j].ID != f.ID {
				j++
			}
			return flowErr(i, f.ID, -1, "id", "duplicate flow id %q (also flow %d)", f.ID, j)
		}
		if !(f.Weight > 0) || math.IsInf(f.Weight, 1) {
			return flowErr(i, f.ID, -1, "weight", "must be > 0 and finite, got %s", num(f.Weight))
		}
		if math.IsNaN(f.Demand) || f.Demand < 0 {
			return flowErr(i, f.ID, -1, "demand", "must be ≥ 0 (+Inf for unbounded), got %s", num(f.Demand))
		}
		if math.IsNaN(f.Floor) || f.Floor < 0 || math.IsInf(f.Floor, 1) {
			return flowErr(i, f.ID, -1, "floor", "must be finite and ≥ 0, got %s", num(f.Floor))
		}
		if f.Floor > f.Demand {
			return flowErr(i, f.ID, -1, "floor", "floor %s exceeds demand %s", num(f.Floor), num(f.Demand))
		}
		for j, u := range f.Uses {
			if u.Resource < 0 || u.Resource >= nr {
				return flowErr(i, f.ID, j, "resource", "unknown resource index %d (have %d resources)", u.Resource, nr)
			}
			if !(u.Coef > 0) || math.IsInf(u.Coef, 1) {
				return flowErr(i, f.ID, j, "coef", "must be > 0 and finite, got %s", num(u.Coef))
			}
			res := &p.Resources[u.Resource]
			if len(res.Classes) > 0 {
				cls := u.Class
				if cls == "" {
					cls = f.Class
				}
				if _, ok := res.Classes[cls]; !ok {
					if cls == "" {
						return flowErr(i, f.ID, j, "class", "flow has no class but resource %q is hierarchical", res.ID)
					}
					return flowErr(i, f.ID, j, "class", "class %q is not a class of resource %q", cls, res.ID)
				}
			}
		}
	}
	if floorLoad == nil {
		floorLoad = make([]float64, nr)
	}
	for r := range floorLoad {
		floorLoad[r] = 0
	}
	for i := range p.Flows {
		f := &p.Flows[i]
		if f.Floor == 0 {
			continue
		}
		for _, u := range f.Uses {
			floorLoad[u.Resource] += u.Coef * f.Floor
		}
	}
	for r := range floorLoad {
		c := p.Resources[r].Capacity
		if floorLoad[r] > c*(1+floorSlack) {
			return resErr(r, p.Resources[r].ID, "", "floors sum to %s, more than capacity %s", num(floorLoad[r]), num(c))
		}
	}
	return nil
}

// Validate checks a vector problem: resources as for Validate (and no
// classes), non-empty unique flow IDs, weights > 0 and finite, exactly one
// of Demand (len(Resources) entries, finite and ≥ 0) and Sparse (existing
// resources, finite coefficients > 0) set (a flow that demands nothing may
// set neither), and group weights > 0, finite, for groups that have flows.
// It returns an *Error.
func (p *VectorProblem) Validate() error {
	ids := make(map[string]int, len(p.Flows)+len(p.Resources))
	if err := validateResources(p.Resources, ids, true); err != nil {
		return err
	}
	clear(ids)
	nr := len(p.Resources)
	groups := make(map[string]bool)
	for i := range p.Flows {
		f := &p.Flows[i]
		if f.ID == "" {
			return flowErr(i, "", -1, "id", "empty id")
		}
		if j, dup := ids[f.ID]; dup {
			return flowErr(i, f.ID, -1, "id", "duplicate flow id %q (also flow %d)", f.ID, j)
		}
		ids[f.ID] = i
		groups[f.Group] = true
		if !(f.Weight > 0) || math.IsInf(f.Weight, 1) {
			return flowErr(i, f.ID, -1, "weight", "must be > 0 and finite, got %s", num(f.Weight))
		}
		if f.Demand != nil && f.Sparse != nil {
			return flowErr(i, f.ID, -1, "demand", "both Demand and Sparse are set")
		}
		if f.Demand != nil {
			if len(f.Demand) != nr {
				return flowErr(i, f.ID, -1, "demand", "has %d entries, want one per resource (%d)", len(f.Demand), nr)
			}
			for r, d := range f.Demand {
				if math.IsNaN(d) || d < 0 || math.IsInf(d, 1) {
					e := flowErr(i, f.ID, -1, "demand", "demand for resource %q must be finite and ≥ 0, got %s", p.Resources[r].ID, num(d))
					e.Resource = r
					return e
				}
			}
		}
		for j, u := range f.Sparse {
			if u.Resource < 0 || u.Resource >= nr {
				return flowErr(i, f.ID, j, "resource", "unknown resource index %d (have %d resources)", u.Resource, nr)
			}
			if !(u.Coef > 0) || math.IsInf(u.Coef, 1) {
				return flowErr(i, f.ID, j, "coef", "must be > 0 and finite, got %s", num(u.Coef))
			}
		}
	}
	for g, w := range p.GroupWeights {
		if !groups[g] || g == "" {
			return &Error{Flow: -1, Resource: -1, Use: -1, ID: g, Field: "group_weights", Msg: fmt.Sprintf("weight for group %q, which has no flows", g)}
		}
		if !(w > 0) || math.IsInf(w, 1) {
			return &Error{Flow: -1, Resource: -1, Use: -1, ID: g, Field: "group_weights", Msg: fmt.Sprintf("group %q: weight must be > 0 and finite, got %s", g, num(w))}
		}
	}
	return nil
}
