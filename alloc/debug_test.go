package alloc

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func dumpHier(p *Problem, x []float64) {
	load := Loads(p, x, nil)
	for r, res := range p.Resources {
		fmt.Printf("res %s cap %.6g load %.6g\n", res.ID, res.Capacity, load[r])
		use := map[string]float64{}
		for j, g := range p.Flows {
			for _, v := range g.Uses {
				if v.Resource == r {
					use[g.Class] += v.Coef * (x[j] - g.Floor)
				}
			}
		}
		for c, u := range use {
			fmt.Printf("   class %s use %.6g w %g sigma %.6g\n", c, u, res.Classes[c], u/res.Classes[c])
		}
		for j, g := range p.Flows {
			for _, v := range g.Uses {
				if v.Resource == r {
					fmt.Printf("     flow %s class %s share %.6g x %.6g dem %.6g\n", g.ID, g.Class, (x[j]-g.Floor)/g.Weight, x[j], g.Demand)
					break
				}
			}
		}
	}
}

func TestDebug(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for k := 0; k < 35; k++ {
		p := randProblem(rng, 5, 10, true)
		if k == 34 {
			debugClasses = true
			var s Solver
			x := make([]float64, len(p.Flows))
			s.Solve(p, x)
			fmt.Println("iters", s.Iterations())
			dumpHier(p, x)
		}
	}
}
