package alloc

import "testing"

func TestScratch(t *testing.T) {
	p := &Problem{
		Resources: []Resource{{ID: "l1", Capacity: 1000, Classes: map[string]float64{"A": 1, "B": 1}}, {ID: "l2", Capacity: 400}},
		Flows: []Flow{
			{ID: "a", Uses: []Use{{0, 1}, {1, 1}}, Demand: Unbounded, Weight: 1, Class: "A"},
			{ID: "b1", Uses: []Use{{0, 1}}, Demand: Unbounded, Weight: 1, Class: "B"},
			{ID: "b2", Uses: []Use{{0, 1}}, Demand: 50, Weight: 1, Class: "B"},
		},
	}
	var s Solver
	r := make([]float64, 3)
	err := s.Solve(p, r)
	t.Log(r, err, s.Iterations())
}
