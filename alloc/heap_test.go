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
// capacities, demands and weights changed between the two, and with a
// limiter (a resource of one flow) on most flows.
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
		rates := make([]float64, len(p.Flows))
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
					}
				}
			}
			var err error
			if round == 0 {
				err = again.Solve(p, rates)
			} else {
				err = again.SolveAgain(p, rates)
			}
			if err != nil {
				t.Fatal(err)
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
			}
		}
	}
}
