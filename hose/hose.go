// Package hose computes hose-model pair guarantees.
//
// A tenant under the hose model sees its VMs joined by one non-blocking
// virtual switch: VM v has a dedicated out-link of capacity v.Out (what it
// may send) and a dedicated in-link of capacity v.In (what it may receive).
// Given the directed VM pairs the tenant uses and their demands, the
// guarantee of a pair is its share in the max-min allocation (weight 1 per
// pair) of the pairs' demands on that virtual network, a pair X→Y using the
// links out(X) and in(Y). This is the efficiency target of ElasticSwitch's
// guarantee partitioning (§4): a VM is never held below what it would get
// through a network of its hose capacity; e.g. with B_X = 100 Mbps and
// demands of 20 Mbps to Y and unbounded to Z and T, the guarantees are
// 20/40/40 Mbps.
//
// The same computation serves the oracle (package eval) and the static
// Oktopus-like reservation baseline (mech/static). Rates are in bits/s, but
// any consistent unit works.
package hose

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/bulkhead-dc/bulkhead/alloc"
)

// Unbounded is the demand of a pair with no demand cap.
var Unbounded = math.Inf(1)

// VM is one VM of a tenant with its hose guarantees: In is what it may
// receive, Out what it may send. Both must be finite and ≥ 0.
type VM struct {
	Name    string
	In, Out float64
}

// Pair is a directed VM pair with its demand: ≥ 0, +Inf for unbounded.
type Pair struct {
	Src, Dst string
	Demand   float64
}

// IndexPair is a Pair whose VMs are given by their index in the Network's
// VM list; it is the allocation-free form used by Network.Solve.
type IndexPair struct {
	Src, Dst int
	Demand   float64
}

// Guarantees returns the hose guarantee of every pair (indexed like pairs)
// of a tenant with the given VMs. Pairs with zero demand get 0; a pair never
// gets more than its demand. Errors: duplicate or unnamed VMs, negative or
// non-finite hose guarantees, pairs naming unknown VMs or a VM to itself,
// negative or NaN demands.
func Guarantees(vms []VM, pairs []Pair) ([]float64, error) {
	n, err := NewNetwork(vms)
	if err != nil {
		return nil, err
	}
	return n.Guarantees(pairs)
}

// Network is a tenant's hose network compiled for repeated solves: after a
// few calls, Solve does not allocate. A Network is not safe for concurrent
// use.
type Network struct {
	vms   []VM
	index map[string]int

	solver alloc.Solver
	prob   alloc.Problem
	uses   []alloc.Use // 2 per flow, backing store of prob.Flows[i].Uses
	rates  []float64
	active []int    // pair index of each flow in prob.Flows
	ids    []string // flow ID of pair k: "pair<k>", grown on demand
}

// NewNetwork checks the VMs and builds their hose network: resource 2i is
// VM i's out-link, 2i+1 its in-link.
func NewNetwork(vms []VM) (*Network, error) {
	n := &Network{
		solver: alloc.Solver{Trusted: true}, // problems built here from validated VMs
		vms:    append([]VM(nil), vms...),
		index:  make(map[string]int, len(vms)),
	}
	n.prob.Resources = make([]alloc.Resource, 0, 2*len(vms))
	for i, v := range vms {
		if v.Name == "" {
			return nil, fmt.Errorf("hose: VM %d has no name", i)
		}
		if _, dup := n.index[v.Name]; dup {
			return nil, fmt.Errorf("hose: duplicate VM %q", v.Name)
		}
		if !(v.Out >= 0) || math.IsInf(v.Out, 0) {
			return nil, fmt.Errorf("hose: VM %q: out guarantee %v must be finite and ≥ 0", v.Name, v.Out)
		}
		if !(v.In >= 0) || math.IsInf(v.In, 0) {
			return nil, fmt.Errorf("hose: VM %q: in guarantee %v must be finite and ≥ 0", v.Name, v.In)
		}
		n.index[v.Name] = i
		n.prob.Resources = append(n.prob.Resources,
			alloc.Resource{ID: "out:" + v.Name, Capacity: v.Out},
			alloc.Resource{ID: "in:" + v.Name, Capacity: v.In})
	}
	return n, nil
}

// VMs returns the network's VMs (do not modify).
func (n *Network) VMs() []VM { return n.vms }

// Index returns the index of the named VM.
func (n *Network) Index(name string) (int, bool) {
	i, ok := n.index[name]
	return i, ok
}

// Guarantees is Guarantees for this network's VMs.
func (n *Network) Guarantees(pairs []Pair) ([]float64, error) {
	ip := make([]IndexPair, len(pairs))
	for k, p := range pairs {
		s, ok := n.index[p.Src]
		if !ok {
			return nil, fmt.Errorf("hose: pair %d (%s->%s): unknown VM %q", k, p.Src, p.Dst, p.Src)
		}
		d, ok := n.index[p.Dst]
		if !ok {
			return nil, fmt.Errorf("hose: pair %d (%s->%s): unknown VM %q", k, p.Src, p.Dst, p.Dst)
		}
		ip[k] = IndexPair{Src: s, Dst: d, Demand: p.Demand}
	}
	out := make([]float64, len(pairs))
	if err := n.Solve(ip, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ErrLength is returned by Solve when out and pairs differ in length.
var ErrLength = errors.New("hose: output length differs from the number of pairs")

// Solve writes the hose guarantee of pairs[k] to out[k].
func (n *Network) Solve(pairs []IndexPair, out []float64) error {
	if len(out) != len(pairs) {
		return ErrLength
	}
	nv := len(n.vms)
	if cap(n.uses) < 2*len(pairs) {
		n.uses = make([]alloc.Use, 2*len(pairs))
		n.prob.Flows = make([]alloc.Flow, 0, len(pairs))
		n.active = make([]int, 0, len(pairs))
	}
	for len(n.ids) < len(pairs) {
		n.ids = append(n.ids, "pair"+strconv.Itoa(len(n.ids)))
	}
	n.prob.Flows = n.prob.Flows[:0]
	n.active = n.active[:0]
	for k, p := range pairs {
		out[k] = 0
		if p.Src < 0 || p.Src >= nv || p.Dst < 0 || p.Dst >= nv {
			return fmt.Errorf("hose: pair %d: VM index out of range [0, %d)", k, nv)
		}
		if p.Src == p.Dst {
			return fmt.Errorf("hose: pair %d: VM %q to itself", k, n.vms[p.Src].Name)
		}
		if !(p.Demand >= 0) {
			return fmt.Errorf("hose: pair %d (%s->%s): demand %v must be ≥ 0", k, n.vms[p.Src].Name, n.vms[p.Dst].Name, p.Demand)
		}
		if p.Demand == 0 || n.vms[p.Src].Out == 0 || n.vms[p.Dst].In == 0 {
			continue
		}
		u := n.uses[2*len(n.active) : 2*len(n.active)+2 : 2*len(n.active)+2]
		u[0] = alloc.Use{Resource: 2 * p.Src, Coef: 1}
		u[1] = alloc.Use{Resource: 2*p.Dst + 1, Coef: 1}
		n.prob.Flows = append(n.prob.Flows, alloc.Flow{ID: n.ids[k], Uses: u, Demand: p.Demand, Weight: 1})
		n.active = append(n.active, k)
	}
	if len(n.active) == 0 {
		return nil
	}
	if cap(n.rates) < len(n.active) {
		n.rates = make([]float64, len(n.active), cap(n.active))
	}
	n.rates = n.rates[:len(n.active)]
	if err := n.solver.Solve(&n.prob, n.rates); err != nil {
		return fmt.Errorf("hose: %w", err)
	}
	for f, k := range n.active {
		r := n.rates[f]
		if r < 0 {
			r = 0
		}
		if d := pairs[k].Demand; r > d {
			r = d
		}
		out[k] = r
	}
	return nil
}
