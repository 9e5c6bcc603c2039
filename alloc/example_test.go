package alloc_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/bulkhead-dc/bulkhead/alloc"
)

// Two tenants' classes share a 1 Gbit/s WFQ port 3:1; tenant B's two flows
// split B's share. Tenant A's flow is capped at 500 Mbit/s, so B gets the
// rest (work conservation).
func ExampleMaxMin() {
	p := &alloc.Problem{
		Resources: []alloc.Resource{{ID: "port", Capacity: 1000, Classes: map[string]float64{"A": 3, "B": 1}}},
		Flows: []alloc.Flow{
			{ID: "a", Uses: []alloc.Use{{Resource: 0, Coef: 1}}, Demand: 500, Weight: 1, Class: "A"},
			{ID: "b1", Uses: []alloc.Use{{Resource: 0, Coef: 1}}, Demand: alloc.Unbounded, Weight: 1, Class: "B"},
			{ID: "b2", Uses: []alloc.Use{{Resource: 0, Coef: 1}}, Demand: alloc.Unbounded, Weight: 1, Class: "B"},
		},
	}
	rates, err := alloc.MaxMin(p)
	if err != nil {
		panic(err)
	}
	fmt.Println(rates)
	// Output: [500 250 250]
}

// The DRF paper's example with divisible demands: 9 CPUs, 18 GB; A's tasks
// need ⟨1, 4⟩, B's ⟨3, 1⟩; each demands enough for 9 tasks.
func ExampleDRF() {
	p := &alloc.VectorProblem{
		Resources: []alloc.Resource{{ID: "cpu", Capacity: 9}, {ID: "mem", Capacity: 18}},
		Flows: []alloc.VectorFlow{
			{ID: "A", Weight: 1, Demand: []float64{9, 36}},
			{ID: "B", Weight: 1, Demand: []float64{27, 9}},
		},
	}
	x, _ := alloc.DRF(p)
	fmt.Printf("A runs %.0f tasks, B runs %.0f\n", 9*x[0], 9*x[1])
	// Output: A runs 3 tasks, B runs 2
}

func ExampleSolveJSON() {
	in := `{"kind":"rate",
	  "resources":[{"id":"l1","capacity":1000,"classes":{"A":3,"B":1}}],
	  "flows":[{"id":"f1","path":["l1"],"demand":500,"class":"A"},
	           {"id":"f2","path":["l1"],"class":"B"}]}`
	if err := alloc.SolveJSON(strings.NewReader(in), os.Stdout); err != nil {
		fmt.Println(err)
	}
	bad := `{"kind":"rate","resources":[{"id":"l1","capacity":10}],"flows":[{"id":"f1","path":["l9"]}]}`
	fmt.Println(alloc.SolveJSON(strings.NewReader(bad), os.Stdout))
	// Output:
	// {"rates":{"f1":500,"f2":500}}
	// alloc: flows[0].path[0]: unknown resource "l9"
}
