package qshare_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/sim"
	"github.com/bulkhead-dc/bulkhead/spec"
)

const scenarioDir = "../../scenarios"

// simulate runs scenarios/<file> under mechanism (the scenario's own
// parameters apply when it is the scenario's mechanism) after edit, if
// any, changed the parsed scenario; the controller gets admission's
// reservations as with `bulkhead sim`.
func simulate(t testing.TB, file, mechanism string, edit func(*spec.Scenario)) *eval.Input {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(scenarioDir, file))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := spec.Parse(data, file)
	if err != nil {
		t.Fatal(err)
	}
	if mechanism == "" {
		mechanism = sc.Mechanism.Name
	}
	if edit != nil {
		edit(sc)
	}
	s, err := runner.Prepare(sc)
	if err != nil {
		t.Fatal(err)
	}
	var params map[string]any
	if mechanism == sc.Mechanism.Name {
		params = sc.Mechanism.Params
	}
	m, err := all.New(mechanism, params)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Reservations(s)
	if err != nil {
		t.Fatal(err)
	}
	in, err := sim.Run(context.Background(), s.Spec, s.Topo, sim.Options{Mechanism: m, Reservations: res})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// linkRates returns, per sample, the total rate (bits/s) on the named link
// and each tenant's share of it.
func linkRates(t testing.TB, in *eval.Input, link string) (total []float64, byTenant []map[string]float64) {
	t.Helper()
	id := -1
	for i, n := range in.LinkNames {
		if n == link {
			id = i
		}
	}
	if id < 0 {
		t.Fatalf("no link %q", link)
	}
	var on []bool
	for _, p := range in.Pairs {
		crosses := false
		for _, l := range p.Links {
			crosses = crosses || l == id
		}
		on = append(on, crosses)
	}
	for _, s := range in.Samples {
		sum, m := 0.0, map[string]float64{}
		for i, ps := range s.Pairs {
			if on[i] {
				sum += ps.Rate
				m[in.Pairs[i].Tenant] += ps.Rate
			}
		}
		total = append(total, sum)
		byTenant = append(byTenant, m)
	}
	return total, byTenant
}

// linkCapacity returns the named link's capacity.
func linkCapacity(t testing.TB, in *eval.Input, link string) float64 {
	for i, n := range in.LinkNames {
		if n == link {
			return in.LinkCapacity[i]
		}
	}
	t.Fatalf("no link %q", link)
	return 0
}
