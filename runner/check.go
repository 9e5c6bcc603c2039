package runner

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// Check runs every check that a run makes before it simulates, for each of
// the named mechanisms (none: the scenario's own), and returns every
// problem found, joined (nil if none). `bulkhead validate` and `bulkhead
// sim` both call it, sim before its first run, so that nothing the
// scenario or the command line gets wrong fails after a run:
//
//   - the mechanism's name and parameters (mech/all.New; the scenario's
//     parameters apply to the scenario's own mechanism only, as in Run);
//   - admission for that mechanism (place.AdmitFor);
//   - that it can take the tenants that join or leave during the run;
//   - the oracle: the evaluation's ideal allocation, computed up front
//     with every pair of every workload active, at its workload's rate and
//     then unbounded (the heaviest demand the evaluation can meet), must be
//     computable and its totals over the run representable as float64, or
//     the evaluation or the report would fail after the run. (The demands
//     of a run vary; this catches what fails for every demand, such as
//     guarantees and capacities too far apart to share by weight, not a
//     failure at one particular demand.)
func Check(s *Scenario, mechanisms []string) error {
	if len(mechanisms) == 0 {
		mechanisms = []string{s.Spec.Mechanism.Name}
	}
	var errs []error
	seen := map[string]bool{}
	for _, name := range mechanisms {
		if seen[name] {
			continue
		}
		seen[name] = true
		if _, err := newMechanism(s, name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := checkOracle(s); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// newMechanism builds the named mechanism for the scenario (the
// scenario's parameters apply when the name is the scenario's mechanism)
// and checks that the scenario can run under it: admission and live
// tenants. Prepare, Simulate and Check share it.
func newMechanism(s *Scenario, name string) (mech.Mechanism, error) {
	sc := s.Spec
	own := name == "" || name == sc.Mechanism.Name
	if name == "" {
		name = sc.Mechanism.Name
	}
	var params map[string]any
	if own {
		params = sc.Mechanism.Params
	}
	m, err := all.New(name, params)
	if err != nil {
		if !own {
			return nil, fmt.Errorf("%s: mechanism %q (from the command line): %w", sc.File, name, err)
		}
		return nil, fmt.Errorf("%s: %w", sc.File, err)
	}
	if err := place.AdmitFor(sc, s.Topo, m); err != nil {
		if !own {
			return nil, fmt.Errorf("under mechanism %s: %w", name, err)
		}
		return nil, err
	}
	if len(sc.ModelChanges()) > 0 && !m.Capabilities().LiveTenants {
		for i, t := range sc.Tenants {
			if t.Join > 0 || t.Leave > 0 {
				return nil, &spec.FieldError{File: sc.File, Path: fmt.Sprintf("tenants[%d]", i),
					Msg: fmt.Sprintf("joins or leaves during the run, but mechanism %s cannot take tenants at runtime (none, elasticswitch and gatekeeper can)", m.Name())}
			}
		}
	}
	return m, nil
}

// checkOracle computes the oracle's ideal allocation once, up front, with
// every VM pair of every workload active with unbounded demand, and checks
// that the evaluation's sums over the run stay finite.
func checkOracle(s *Scenario) error {
	sc, tp := s.Spec, s.Topo
	caps := make([]float64, len(tp.Links))
	for i, l := range tp.Links {
		caps[i] = l.Capacity
	}
	tenants := make([]eval.Tenant, 0, len(sc.Tenants))
	host := map[string]int{}
	for ti := range sc.Tenants {
		t := &sc.Tenants[ti]
		et := eval.Tenant{Name: t.Name, VMs: make([]eval.VM, len(t.VMs))}
		for vi := range t.VMs {
			v := &t.VMs[vi]
			in, out := t.Hose(v)
			et.VMs[vi] = eval.VM{Name: v.Name, In: in, Out: out}
			if n, ok := tp.Node(v.Server); ok {
				host[v.Name] = n.ID
			}
		}
		tenants = append(tenants, et)
	}
	type key struct{ tenant, src, dst string }
	seen := map[key]bool{}
	var pairs []eval.Pair
	var declared []float64 // per pair: the workload's rate, +Inf if none
	for _, w := range sc.Workloads {
		rate := math.Inf(1)
		if w.Rate > 0 {
			rate = float64(w.Rate)
		}
		for _, p := range w.Pairs() {
			k := key{w.Tenant, p[0], p[1]}
			if seen[k] {
				continue
			}
			seen[k] = true
			declared = append(declared, rate)
			// The route does not matter to what is checked here (that
			// the numbers can be computed), only that it is a real one.
			links := tp.Route(host[p[0]], host[p[1]], 0)
			pairs = append(pairs, eval.Pair{Tenant: w.Tenant, Src: p[0], Dst: p[1], Links: links})
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	o, err := eval.NewOracle(tenants, pairs, caps)
	if err != nil {
		return fmt.Errorf("%s: oracle: %w", sc.File, err)
	}
	n := len(pairs)
	unbounded := make([]float64, n)
	for i := range unbounded {
		unbounded[i] = math.Inf(1)
	}
	guarantee, ideal := make([]float64, n), make([]float64, n)
	// Every pair at its workload's declared rate (unbounded where none),
	// then every pair unbounded: the totals below use the latter.
	for _, c := range []struct {
		what   string
		demand []float64
	}{{"at their workloads' rates", declared}, {"unbounded", unbounded}} {
		if err := o.Solve(c.demand, guarantee, ideal, nil); err != nil {
			return fmt.Errorf("%s: the evaluation's ideal allocation cannot be computed for this scenario (every workload's pairs active, %s): %w; are guarantees and capacities within a representable range of each other?", sc.File, c.what, err)
		}
	}
	// The evaluation sums rates over pairs and samples; link capacities
	// bound the achieved rates.
	samples := 1.0
	if ivl := time.Duration(sc.Outputs.Sample); ivl > 0 {
		samples = math.Ceil(float64(sc.Duration) / float64(ivl))
	}
	var total float64
	for i := range pairs {
		if !math.IsInf(ideal[i], 1) {
			total += ideal[i]
		}
		total += guarantee[i]
	}
	for _, c := range caps {
		if !math.IsInf(c, 1) {
			total += c
		}
	}
	if t := total * samples; math.IsInf(t, 0) || math.IsNaN(t) {
		big, at := 0.0, ""
		for i, l := range tp.Links {
			if !math.IsInf(caps[i], 1) && caps[i] > big {
				big, at = caps[i], l.Name
			}
		}
		return fmt.Errorf("%s: rates too large to evaluate: the evaluation's sums over %d pairs and %.0f samples overflow float64 (largest link capacity %g bit/s on %q)", sc.File, n, samples, big, at)
	}
	return nil
}
