package alloc

import (
	"math"
	"math/rand/v2"
	"testing"
)

// queueKeys are keys with ties, both zeros, fractions and +Inf.
var queueKeys = []float64{0, math.Copysign(0, -1), 0.5, 1, 1.5, 2, 3, 1e-300, 1e300, math.Inf(1)}

// TestQueueSortedPartSameOrder: a queue whose fixed-key items wait in the
// sorted part, and whose raised keys take effect lazily, pops, removes and
// re-keys exactly as one heap of them all.
func TestQueueSortedPartSameOrder(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		n := 1 + r.IntN(300) // radixSort from 64
		var both, heap idxHeap
		both.reset(n)
		heap.reset(n)
		both.lazy = true
		for i := range int32(n) {
			k := queueKeys[r.IntN(len(queueKeys))] // ties are common
			if r.IntN(3) > 0 {
				both.pushSorted(i, k)
			} else {
				both.push(i, k)
			}
			heap.push(i, k)
		}
		both.heapify()
		heap.heapify()
		for heap.len() > 0 {
			if both.len() != heap.len() || both.minKey() != heap.minKey() {
				t.Fatalf("seed %d: len %d/%d, min %g/%g", seed, both.len(), heap.len(), both.minKey(), heap.minKey())
			}
			i := int32(r.IntN(n))
			switch op := r.IntN(4); {
			case op == 0 && heap.contains(i):
				both.remove(i)
				heap.remove(i)
			case op == 1 && heap.contains(i):
				k := queueKeys[r.IntN(len(queueKeys))]
				both.fix(i, k)
				heap.fix(i, k)
			default:
				if a, b := both.pop(), heap.pop(); a != b {
					t.Fatalf("seed %d: popped %d, one heap pops %d", seed, a, b)
				}
			}
			for j := range int32(n) {
				if both.contains(j) != heap.contains(j) {
					t.Fatalf("seed %d: item %d queued %v, in one heap %v", seed, j, both.contains(j), heap.contains(j))
				}
			}
		}
		if both.len() != 0 {
			t.Fatalf("seed %d: %d left", seed, both.len())
		}
	}
}

// TestSolveAgainSameRates: SolveAgain, after Solve of a problem with the
// same flows and uses, gives the rates of a fresh Solve bit for bit, with
// capacities, demands, weights and floors changed between the two, and
// with a limiter (a resource of one flow) on most flows; and so does a
// solver whose passes run in parts at once (Parallel).
func TestSolveAgainSameRates(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		p := smallProblem(seed, false)
		for i := range p.Flows {
			if r.IntN(4) == 0 {
				continue
			}
			p.Resources = append(p.Resources, Resource{ID: "lim" + itoa(i), Capacity: 1e6 + r.Float64()*1e9})
			p.Flows[i].Uses = append(p.Flows[i].Uses, Use{Resource: len(p.Resources) - 1, Coef: 1})
		}
		again := Solver{Trusted: true}
		par := Solver{Trusted: true, Parallel: splitIn(1 + int(seed%3))}
		rates := make([]float64, len(p.Flows))
		parRates := make([]float64, len(p.Flows))
		for round := 0; round < 4; round++ {
			if round > 0 {
				for k := range p.Resources {
					if r.IntN(2) == 0 {
						p.Resources[k].Capacity *= 0.5 + r.Float64()
					}
				}
				for k := range p.Flows {
					switch r.IntN(4) {
					case 0:
						p.Flows[k].Demand = 1e7 + r.Float64()*3e8
					case 1:
						p.Flows[k].Weight = float64(1 + r.IntN(4))
					case 2:
						if round == 3 {
							p.Flows[k].Floor = 1e3 * float64(r.IntN(3))
						}
					}
				}
			}
			var err, perr error
			if round == 0 {
				err, perr = again.Solve(p, rates), par.Solve(p, parRates)
			} else {
				err, perr = again.SolveAgain(p, rates), par.SolveAgain(p, parRates)
			}
			if err != nil || perr != nil {
				t.Fatal(err, perr)
			}
			fresh := Solver{Trusted: true}
			want := make([]float64, len(p.Flows))
			if err := fresh.Solve(p, want); err != nil {
				t.Fatal(err)
			}
			for k := range want {
				if math.Float64bits(rates[k]) != math.Float64bits(want[k]) {
					t.Fatalf("seed %d round %d flow %d: %v again, %v fresh", seed, round, k, rates[k], want[k])
				}
				if math.Float64bits(parRates[k]) != math.Float64bits(want[k]) {
					t.Fatalf("seed %d round %d flow %d: %v again in parallel, %v fresh", seed, round, k, parRates[k], want[k])
				}
			}
		}
	}
}

// datacenterProblem is a problem shaped like the simulator's datacenter
// run: 256 hosts in 8 racks (10 Gbit/s links, 2:1 oversubscribed), n
// flows between random hosts, each behind its own limiter.
func datacenterProblem(n int, seed uint64) *Problem {
	r := rand.New(rand.NewPCG(seed, 5))
	const hosts, perRack = 256, 32
	p := &Problem{}
	add := func(id string, c float64) int {
		p.Resources = append(p.Resources, Resource{ID: id, Capacity: c})
		return len(p.Resources) - 1
	}
	up, down := make([]int, hosts), make([]int, hosts)
	for h := range hosts {
		up[h], down[h] = add("up"+itoa(h), 10e9), add("down"+itoa(h), 10e9)
	}
	torUp, torDown := make([]int, hosts/perRack), make([]int, hosts/perRack)
	for k := range torUp {
		torUp[k], torDown[k] = add("torup"+itoa(k), perRack*10e9/2), add("tordown"+itoa(k), perRack*10e9/2)
	}
	for i := range n {
		s, d := r.IntN(hosts), r.IntN(hosts)
		for d == s {
			d = r.IntN(hosts)
		}
		lim := add("lim"+itoa(i), 50e6+r.Float64()*1e9)
		uses := []Use{{Resource: lim, Coef: 1}, {Resource: up[s], Coef: 1}}
		if s/perRack != d/perRack {
			uses = append(uses, Use{Resource: torUp[s/perRack], Coef: 1}, Use{Resource: torDown[d/perRack], Coef: 1})
		}
		uses = append(uses, Use{Resource: down[d], Coef: 1})
		p.Flows = append(p.Flows, Flow{ID: "f" + itoa(i), Weight: 1, Demand: Unbounded, Uses: uses})
	}
	return p
}

// BenchmarkSolveAgainDatacenter: the simulator's re-solve of 10,000
// flows whose limits all changed.
func BenchmarkSolveAgainDatacenter(b *testing.B) {
	p := datacenterProblem(10000, 1)
	s := Solver{Trusted: true}
	rates := make([]float64, len(p.Flows))
	if err := s.Solve(p, rates); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	caps := make([][]float64, 8)
	for k := range caps {
		caps[k] = make([]float64, len(p.Resources))
		for i := range caps[k] {
			caps[k][i] = p.Resources[i].Capacity * (0.8 + 0.4*r.Float64())
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for k, c := range caps[i%len(caps)] {
			p.Resources[k].Capacity = c
		}
		if err := s.SolveAgain(p, rates); err != nil {
			b.Fatal(err)
		}
	}
}
