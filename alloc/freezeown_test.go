package alloc

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// splitIn returns a Solver.Parallel that cuts [0, n) into parts parts
// and runs them at once, each on a goroutine of its own.
func splitIn(parts int) func(n int, fn func(lo, hi int)) {
	return func(n int, fn func(lo, hi int)) {
		var wg sync.WaitGroup
		for k := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fn(k*n/parts, (k+1)*n/parts)
			}()
		}
		wg.Wait()
	}
}

// ownProblem fills g with a random flat problem shaped to exercise
// freezeOwn: most flows behind a sub-resource of their own (a limiter),
// shared sub-resources from slack to tight, capacities and limits from a
// small set so that levels tie (between flows, a flow's demand and its
// limiter, two limiters of one flow), zero and infinite capacities, a
// sub-resource used twice by one flow, flows with no uses.
func ownProblem(g *engine, r *rand.Rand) {
	vals := []float64{0, math.Copysign(0, -1), 1, 2, 3, 4, 6, 8, 12}
	pick := func() float64 {
		if r.IntN(3) == 0 {
			return 0.5 + r.Float64()*10
		}
		return vals[r.IntN(len(vals))]
	}
	nShared := 1 + r.IntN(8)
	nF := 1 + r.IntN(40)
	// sub-resources: shared ones first, then at most two limiters a flow
	lims := make([][]int32, nF)
	nS := nShared
	for f := range lims {
		for range r.IntN(3) {
			lims[f] = append(lims[f], int32(nS))
			nS++
		}
	}
	g.reset(nS, nF)
	for s := 0; s < nShared; s++ {
		switch r.IntN(6) {
		case 0:
			g.cap[s] = math.Inf(1)
		case 1:
			g.cap[s] = 1e3 // slack
		default:
			g.cap[s] = pick() * float64(1+r.IntN(6))
		}
	}
	for s := nShared; s < nS; s++ {
		g.cap[s] = pick()
		if r.IntN(10) == 0 {
			g.cap[s] = math.Inf(1)
		}
	}
	for f := 0; f < nF; f++ {
		g.w[f] = 1
		if r.IntN(4) == 0 {
			g.w[f] = []float64{2, 0.5, 3, 0.1 + r.Float64()*4}[r.IntN(4)]
		}
		g.dem[f] = math.Inf(1)
		if r.IntN(3) == 0 {
			g.dem[f] = pick()
		}
		if r.IntN(12) > 0 {
			for range 1 + r.IntN(3) {
				c := 1.0
				if r.IntN(4) == 0 {
					c = 0.5 + r.Float64()*2
				}
				g.addUse(int32(r.IntN(nShared)), c)
			}
		}
		for _, s := range lims[f] {
			g.addUse(s, 1)
		}
		g.endFlow()
	}
}

// TestFreezeOwnSameAllocations: a run that freezes up front the flows
// nothing shared can hold back (eOnly) gives every flow the allocation of
// the full run, bit for bit, and reports the same unbounded flow; on the
// same engine again (sameUses) too; and so does one whose passes are
// split in parts that run at once (parallel). Enough instances freeze some flows up
// front and leave others to the queue for the comparison to mean
// something.
func TestFreezeOwnSameAllocations(t *testing.T) {
	mixed := 0
	const n = 20000
	for seed := uint64(0); seed < n; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		var full, own, par engine
		ownProblem(&full, r)
		ownProblem(&own, rand.New(rand.NewPCG(seed, 11)))
		ownProblem(&par, rand.New(rand.NewPCG(seed, 11)))
		own.eOnly, par.eOnly = true, true
		par.parallel = splitIn(1 + int(seed%4))
		for again := range 2 {
			if again == 1 {
				// new limits and demands, the same uses
				for s := range full.cap {
					if r.IntN(2) == 0 {
						full.cap[s] *= 0.5 + r.Float64()
					}
				}
				for f := range full.dem {
					if r.IntN(3) == 0 {
						full.dem[f] = r.Float64() * 10
					}
				}
				copy(own.cap, full.cap)
				copy(own.dem, full.dem)
				copy(par.cap, full.cap)
				copy(par.dem, full.dem)
				full.sameUses, own.sameUses, par.sameUses = true, true, true
			}
			own.ownSkip, par.ownSkip = 0, 0 // try it every time
			uf, uo, up := full.run(), own.run(), par.run()
			if uf != uo || uf != up {
				t.Fatalf("seed %d run %d: unbounded flow %d, with flows frozen up front %d, in parallel %d", seed, again, uf, uo, up)
			}
			if own.nOwn != par.nOwn {
				t.Fatalf("seed %d run %d: %d flows frozen up front, in parallel %d", seed, again, own.nOwn, par.nOwn)
			}
			if uf >= 0 {
				break
			}
			for f := range full.e {
				if math.Float64bits(full.e[f]) != math.Float64bits(own.e[f]) {
					t.Fatalf("seed %d run %d flow %d: %v in the full run, %v with %d flows frozen up front", seed, again, f, full.e[f], own.e[f], own.nOwn)
				}
				if math.Float64bits(full.e[f]) != math.Float64bits(par.e[f]) {
					t.Fatalf("seed %d run %d flow %d: %v in the full run, %v with %d flows frozen up front in parallel", seed, again, f, full.e[f], par.e[f], par.nOwn)
				}
			}
			if own.nOwn > 0 && own.nOwn < len(own.e) {
				mixed++
			}
		}
	}
	if mixed < n/4 {
		t.Errorf("only %d of %d runs froze some flows up front and queued others", mixed, 2*n)
	}
}

// sameAsFull runs g as built, then again without freezing up front, and
// fails unless every flow got the same allocation both times.
func sameAsFull(t *testing.T, name string, g *engine) {
	t.Helper()
	for _, par := range []func(int, func(int, int)){nil, splitIn(3)} {
		g.eOnly, g.ownSkip, g.parallel = true, 0, par
		if f := g.run(); f >= 0 {
			t.Fatalf("%s: flow %d unbounded", name, f)
		}
		got, n := append([]float64(nil), g.e...), g.nOwn
		g.eOnly, g.sameUses, g.parallel = false, true, nil
		g.run()
		g.sameUses = false
		for f := range got {
			if math.Float64bits(got[f]) != math.Float64bits(g.e[f]) {
				t.Errorf("%s (parallel: %v): flow %d got %v with %d flows frozen up front, %v in the full run", name, par != nil, f, got[f], n, g.e[f])
			}
		}
	}
}

// TestFreezeOwnEdges: two problems a second reader built where an
// earlier freezeOwn gave other allocations than the full run. A shared
// link of capacity 0 whose flows' own limiters are 0 too: it saturates at
// level 0 with them and freezes its flows in its own order, which rounds
// another link's slope differently. A shared link slack by just over
// 10⁻⁹ of its capacity while most of its flows froze early: its running
// slope, near satLevel's threshold, is off by more than that.
func TestFreezeOwnEdges(t *testing.T) {
	inf := math.Inf(1)
	var g engine
	g.reset(5, 4)
	copy(g.cap, []float64{0, 1, 1, 0, 0}) // link0, link1, three limiters
	uses := [][][2]float64{{{2, 1}}, {{0, 1}, {1, 1}, {4, 1}}, {{0, 1}, {1, 1}, {3, 1}}, {{1, 1}}}
	for f, us := range uses {
		g.w[f], g.dem[f] = []float64{1, 0.1, 0.7, 0.1}[f], inf
		for _, u := range us {
			g.addUse(int32(u[0]), u[1])
		}
		g.endFlow()
	}
	sameAsFull(t, "a shared link of capacity 0", &g)

	for seed := uint64(0); seed < 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		const n = 2000
		var g engine
		g.reset(n+2, n+1)
		sumc, tot := 0.0, 0.0
		for f := 0; f < n; f++ {
			g.w[f], g.dem[f] = 1, inf
			c := 0.5 + 1.5*r.Float64()
			g.addUse(0, c)
			g.addUse(int32(1+f), 1)
			g.endFlow()
			g.cap[1+f] = 1e-7 * (1 + r.Float64())
			sumc += c
			tot += c * g.cap[1+f]
		}
		g.w[n], g.dem[n] = 1.02e-6*sumc*(1+0.01*r.Float64()), inf
		g.addUse(0, 1)
		g.addUse(int32(1+n), 1)
		g.endFlow()
		g.cap[1+n] = 1 + r.Float64()
		g.cap[0] = (tot + g.cap[1+n]) / (1 - 1.0000001e-9)
		sameAsFull(t, "a link slack by 1e-9 behind a decayed slope", &g)
	}
}

// BenchmarkFreezeOwn: the water-filling of 10,000 flows shaped like the
// simulator's datacenter run, each behind its limiter, side by side with
// (own) and without (full) the flows that nothing shared can hold back
// frozen up front: "slack", limits of 10–200 Mbit/s, under which no link
// fills (ElasticSwitch's limits between its congestion events); "tight",
// limits of 50–1,050 Mbit/s, under which the hosts' links fill and every
// flow waits in the queue (and "own" tries freezing up front in one run
// of eight, as a solver does after runs that freeze little); and
// "own-2-parts", the same with its passes split in two parts that run at
// once on goroutines started for each pass.
func BenchmarkFreezeOwn(b *testing.B) {
	for _, lim := range []struct {
		name     string
		lo, span float64
	}{{"slack", 10e6, 190e6}, {"tight", 50e6, 1e9}} {
		p := datacenterProblem(10000, 1)
		r := rand.New(rand.NewPCG(3, 3))
		for i := range p.Flows {
			p.Resources[p.Flows[i].Uses[0].Resource].Capacity = lim.lo + lim.span*r.Float64()
		}
		for _, mode := range []string{"full", "own", "own-2-parts"} {
			b.Run(lim.name+"/"+mode, func(b *testing.B) {
				s := Solver{Trusted: true}
				if mode == "own-2-parts" {
					s.Parallel = splitIn(2)
				}
				rates := make([]float64, len(p.Flows))
				if err := s.Solve(p, rates); err != nil {
					b.Fatal(err)
				}
				g := &s.eng
				g.eOnly, g.sameUses = mode != "full", true
				g.parallel = s.Parallel
				for b.Loop() {
					if f := g.run(); f >= 0 {
						b.Fatalf("flow %d unbounded", f)
					}
				}
				b.ReportMetric(float64(g.nOwn), "frozen-up-front")
			})
		}
	}
}

// sensitivityAll is sensitivity as a pass over every saturated
// sub-resource, the reference for TestSensitivitySparse.
func sensitivityAll(g *engine, dcap, dx []float64) {
	clear(dx)
	for _, s := range g.satList {
		g.moveLevel(s, dcap, dx)
	}
}

// TestSensitivitySparse: sensitivity, which works out only the
// sub-resources whose level can move, gives the derivative of a pass over
// all of them bit for bit (zeros' signs included), and so do the usages'
// derivatives added up from the flows it wrote, in flow order, against a
// pass over each sub-resource's flows; clearDx leaves dx all zero.
func TestSensitivitySparse(t *testing.T) {
	moved := 0
	for seed := uint64(0); seed < 3000; seed++ {
		r := rand.New(rand.NewPCG(seed, 13))
		var g engine
		ownProblem(&g, r)
		if g.run() >= 0 {
			continue
		}
		nS, nF := len(g.cap), len(g.w)
		dcap, all, dx := make([]float64, nS), make([]float64, nF), make([]float64, nF)
		for trial := range 4 {
			var dsubs []int32
			for range 1 + r.IntN(3) {
				s := int32(r.IntN(nS))
				if trial == 0 && len(g.satList) > 0 {
					s = g.satList[r.IntN(len(g.satList))]
				}
				dcap[s] = []float64{1, 0.5, 3, 1e-300, -2}[r.IntN(5)]
				dsubs = append(dsubs, s)
			}
			sensitivityAll(&g, dcap, all)
			wrote := g.sensitivity(dcap, dx, dsubs)
			for f := range dx {
				if math.Float64bits(dx[f]) != math.Float64bits(all[f]) {
					t.Fatalf("seed %d trial %d flow %d: dx %v, a pass over all gives %v", seed, trial, f, dx[f], all[f])
				}
				if dx[f] != 0 {
					moved++
				}
			}
			for agg := range nS {
				want := 0.0
				for k := g.subStart[agg]; k < g.subStart[agg+1]; k++ {
					want += g.subCoef[k] * all[g.subFlow[k]]
				}
				got := 0.0
				for _, f := range wrote {
					if x := dx[f]; x != 0 {
						for u := g.useStart[f]; u < g.useStart[f+1]; u++ {
							if g.useSub[u] == int32(agg) {
								got += g.useCoef[u] * x
							}
						}
					}
				}
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("seed %d trial %d sub-resource %d: usage moves by %v, a pass over its flows gives %v", seed, trial, agg, got, want)
				}
			}
			g.clearDx(dx, wrote)
			for f := range dx {
				if math.Float64bits(dx[f]) != 0 {
					t.Fatalf("seed %d trial %d: dx[%d] = %v after clearDx", seed, trial, f, dx[f])
				}
			}
			for _, s := range dsubs {
				dcap[s] = 0
			}
		}
	}
	if moved < 1000 {
		t.Errorf("only %d flows moved in all trials", moved)
	}
}
