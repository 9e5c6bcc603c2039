package main

import (
	"fmt"
	"io"

	"github.com/bulkhead-dc/bulkhead/eval"
)

// writeSummary prints a run's headline and per-tenant lines (the same for
// the simulator and the testbed; where says which ran it).
func writeSummary(w io.Writer, r *eval.Report, where string) {
	if r.PairTraffic() {
		fmt.Fprintf(w, "%s under %s%s: work conservation %.2f, compliance %.2f", r.Scenario, r.Mechanism, where, r.WorkConservation, r.Compliance)
		if r.Worst != nil {
			fmt.Fprintf(w, ", worst tenant %s %.2f", r.Worst.Name, r.Worst.Compliance)
		}
	} else {
		fmt.Fprintf(w, "%s under %s%s: no VM-to-VM traffic", r.Scenario, r.Mechanism, where)
	}
	if len(r.Appliances) > 0 && r.VDCCompliance >= 0 {
		fmt.Fprintf(w, ", VDC compliance %.2f", r.VDCCompliance)
		if a := r.WorstAtAppliance(); a != nil {
			fmt.Fprintf(w, ", worst tenant %s at %s %.2f", a.Tenant, a.Appliance, a.Compliance)
		}
	}
	for _, u := range r.ApplianceUse {
		fmt.Fprintf(w, ", %s %.0f%% busy", u.Appliance, 100*u.Mean)
	}
	fmt.Fprintln(w)
	for _, t := range r.Tenants {
		if t.Pairs == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-12s guarantee %8.1f  mean %8.1f  ideal %8.1f %s  compliance %.2f",
			t.Name, t.Guarantee, t.MeanThroughput, t.IdealThroughput, r.Units, t.Compliance)
		if f := t.FCT; f != nil {
			fmt.Fprintf(w, "  FCT mean %.3g s p99 %.3g s (%d flows)", f.MeanS, f.P99S, f.Count)
		}
		fmt.Fprintln(w)
	}
	for _, a := range r.Appliances {
		fmt.Fprintf(w, "  %-12s at %-8s guarantee %8.1f  mean %8.1f %s  compliance %.2f\n",
			a.Tenant, a.Appliance, a.Guarantee, a.Mean, r.TokenUnits, a.Compliance)
	}
}
