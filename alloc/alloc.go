// Package alloc holds the pure allocators Bulkhead uses both as policy and as
// simulator physics: A = MRA(D, W, C).
//
//   - weighted max-min (progressive water-filling) over flows that consume one
//     or more resources, with demand caps, floors and per-resource classes
//     (hierarchical sharing: a resource splits its capacity between classes by
//     weight, work-conserving, and each class shares max-min among its flows);
//   - DRF with divisible demands, H-DRF (tenants, then flows) and a first-fit
//     heuristic over multi-resource demand vectors.
//
// Every function here is a pure function of its inputs; a Solver only keeps
// scratch buffers so that repeated solves (one per simulator tick) do not
// allocate.
//
// Files: waterfill.go is the water-filling engine every mechanism shares;
// maxmin.go holds MaxMin, Solver and the class split of hierarchical
// resources; drf.go DRF and FirstFit; hdrf.go HDRF; validate.go Validate and
// Error; json.go SolveJSON (`bulkhead alloc`), its strict reading and its
// fast path (jsonfast.go), jsonwrite.go the inverse (problems as its
// input); scale.go PulsarScale, scalemixed.go PulsarScaleMixed.
package alloc

import "math"

// Unbounded is the demand of a flow with no demand cap.
var Unbounded = math.Inf(1)

// Resource is one capacity: a link direction, an appliance, a rate limiter.
type Resource struct {
	ID       string
	Capacity float64
	// Classes, when non-empty, makes the resource hierarchical: capacity is
	// split between the named classes in proportion to their weights
	// (work-conserving: a class that cannot use its share leaves it to the
	// others), and each class shares its part max-min among its flows.
	Classes map[string]float64
}

// Use says that a flow consumes Coef units of a resource per unit of its
// rate. Network flows use Coef = 1 on every link of their path.
type Use struct {
	Resource int     // index into Problem.Resources
	Coef     float64 // > 0
	// Class at this resource when it is hierarchical; empty means the
	// flow's Class. (A connection crosses its sender's egress scheduler in
	// the sender's class and its receiver's ingress scheduler in the
	// receiver's.)
	Class string
}

// Flow is one client of the allocator.
type Flow struct {
	ID     string
	Uses   []Use
	Demand float64 // cap on the rate; Unbounded (+Inf) for none
	Weight float64 // > 0; share of spare capacity is proportional to it
	Floor  float64 // guaranteed minimum, met before anything is shared (≤ Demand)
	Class  string  // class at every hierarchical resource on the flow's path
}

// Problem is a weighted max-min problem.
type Problem struct {
	Resources []Resource
	Flows     []Flow
}

// VectorFlow is a client with a demand vector over all resources (DRF family).
// Its allocation is Demand scaled by x ∈ [0, 1].
type VectorFlow struct {
	ID     string
	Demand []float64 // per resource, indexed like VectorProblem.Resources
	Weight float64   // > 0
	Group  string    // tenant, for H-DRF; "" = a group of its own

	// Sparse is an alternative to Demand for large problems (a dense vector
	// per flow over thousands of resources does not fit in memory): the flow
	// demands Coef of resource Resource at x = 1; resources not listed are
	// not demanded, a resource listed twice demands the sum. Set Demand or
	// Sparse, not both.
	Sparse []Use
}

// VectorProblem is a multi-resource allocation problem.
type VectorProblem struct {
	Resources []Resource // Classes must be empty: vector problems are flat
	Flows     []VectorFlow

	// GroupWeights optionally gives H-DRF group weights by group name; a
	// group without an entry weighs the sum of its flows' weights. Only
	// HDRF reads it.
	GroupWeights map[string]float64
}

// API (implemented in this package):
//
//	func MaxMin(p *Problem) ([]float64, error)                // rate per flow
//	type Solver struct{ ... }                                 // reusable scratch space
//	func (s *Solver) Solve(p *Problem, rates []float64) error // same answer as MaxMin, no allocation in steady state
//	func DRF(p *VectorProblem) ([]float64, error)             // x per flow, allocation = x·Demand
//	func HDRF(p *VectorProblem) ([]float64, error)
//	func FirstFit(p *VectorProblem) ([]float64, error)
//	func Validate(p *Problem) error                           // also (p *Problem) Validate() error
//	func (p *VectorProblem) Validate() error
//	func Loads(p *Problem, rates, dst []float64) []float64    // load per resource
//	func PulsarScale(seed int64) (*Problem, *VectorProblem)   // Pulsar §6.4 instance (scale.go)
//	func PulsarScaleMixed(seed int64, k int) (*Problem, *VectorProblem, error) // k × §6.4, dominant resources differ
//	func SolveJSON(r io.Reader, w io.Writer) error            // `bulkhead alloc` (json.go)
//	func SolveJSONLimit(r io.Reader, w io.Writer, limit int64) error
//	func WriteRateJSON(w io.Writer, p *Problem) error         // SolveJSON's input (jsonwrite.go)
//	func WriteVectorJSON(w io.Writer, p *VectorProblem, mechanism string) error
//
// Validation errors are *Error values naming the flow or resource and the
// field at fault.
