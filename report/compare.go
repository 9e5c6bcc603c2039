package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"math"
	"strings"

	"github.com/bulkhead-dc/bulkhead/eval"
)

// Comparison file names, written by WriteComparison.
const (
	ComparisonJSON = "comparison.json"
	ComparisonMD   = "comparison.md"
	ComparisonPlot = "comparison" // .png and .svg
)

// Comparison lines up the reports of several runs (typically one scenario
// under several mechanisms).
type Comparison struct {
	Scenario   string             `json:"scenario"` // the common scenario, or the names joined by ", "
	Units      string             `json:"units"`
	Mechanisms []MechanismSummary `json:"mechanisms"`
	Rows       []ComparisonRow    `json:"rows"` // one per report per tenant, in report order
	// Appliances: one row per report per tenant and appliance (scenarios
	// with request flows), in TokenUnits.
	TokenUnits string         `json:"token_units,omitempty"`
	Appliances []ApplianceRow `json:"appliances,omitempty"`
}

// MechanismSummary is one report's overall figures.
type MechanismSummary struct {
	Mechanism        string  `json:"mechanism"`
	Scenario         string  `json:"scenario"`
	WorkConservation float64 `json:"work_conservation"`
	Compliance       float64 `json:"compliance"`
	Jain             float64 `json:"jain"`
	MeanThroughput   float64 `json:"mean_throughput"`
	Guarantee        float64 `json:"guarantee"`
	IdealThroughput  float64 `json:"ideal_throughput"`
	// VDCCompliance as in eval.Report (−1: no VDC guarantees; 0 and omitted:
	// no request flows).
	VDCCompliance float64 `json:"vdc_compliance,omitempty"`
	// GuaranteedVMSeconds is eval.Report.VMSeconds (0: hose compliance n/a).
	GuaranteedVMSeconds float64 `json:"guaranteed_vm_seconds"`
	// Worst is eval.Report.Worst.
	Worst *eval.WorstTenant `json:"worst_tenant,omitempty"`
	// WorstAtAppliance is the tenant and appliance with the lowest VDC
	// compliance among those with a guarantee (nil: none).
	WorstAtAppliance *eval.ApplianceReport `json:"worst_at_appliance,omitempty"`
}

// ComparisonRow is one tenant under one mechanism.
type ComparisonRow struct {
	Mechanism        string  `json:"mechanism"`
	Tenant           string  `json:"tenant"`
	MeanThroughput   float64 `json:"mean_throughput"`
	Guarantee        float64 `json:"guarantee"`
	IdealThroughput  float64 `json:"ideal_throughput"`
	Compliance       float64 `json:"compliance"`
	WorkConservation float64 `json:"work_conservation"`
	SpareShare       float64 `json:"spare_share"`
	// FCT: the tenant's flow completion times, if it has sized flows.
	FCT *eval.FCTStats `json:"fct,omitempty"`
}

// ApplianceRow is one tenant's end-to-end token throughput at one
// appliance (or VM destination of requests) under one mechanism.
type ApplianceRow struct {
	Mechanism string `json:"mechanism"`
	eval.ApplianceReport
}

// Compare builds the Comparison of reports, which must be non-empty and in
// the same units.
func Compare(reports []*eval.Report) (*Comparison, error) {
	if len(reports) == 0 {
		return nil, errors.New("report: comparison of no reports")
	}
	c := &Comparison{}
	var scen []string
	seen := map[string]bool{}
	for i, r := range reports {
		if r == nil {
			return nil, fmt.Errorf("report: comparison: report %d is nil", i)
		}
		if r.Units != reports[0].Units || r.UnitScale != reports[0].UnitScale {
			return nil, fmt.Errorf("report: comparison: report %d (%s) is in %s (scale %g), report 0 (%s) in %s (scale %g)",
				i, r.Mechanism, r.Units, r.UnitScale, reports[0].Mechanism, reports[0].Units, reports[0].UnitScale)
		}
		if !seen[r.Scenario] {
			seen[r.Scenario] = true
			scen = append(scen, r.Scenario)
		}
		c.Mechanisms = append(c.Mechanisms, MechanismSummary{
			Mechanism: r.Mechanism, Scenario: r.Scenario,
			WorkConservation: r.WorkConservation, Compliance: r.Compliance, Jain: r.Jain,
			VDCCompliance: r.VDCCompliance, GuaranteedVMSeconds: r.VMSeconds, Worst: r.Worst,
			WorstAtAppliance: r.WorstAtAppliance(),
			MeanThroughput:   r.MeanThroughput, Guarantee: r.Guarantee, IdealThroughput: r.IdealThroughput,
		})
		for _, t := range r.Tenants {
			c.Rows = append(c.Rows, ComparisonRow{
				Mechanism: r.Mechanism, Tenant: t.Name,
				MeanThroughput: t.MeanThroughput, Guarantee: t.Guarantee, IdealThroughput: t.IdealThroughput,
				Compliance: t.Compliance, WorkConservation: t.WorkConservation, SpareShare: t.SpareShare,
				FCT: t.FCT,
			})
		}
		for _, a := range r.Appliances {
			c.Appliances = append(c.Appliances, ApplianceRow{Mechanism: r.Mechanism, ApplianceReport: a})
			c.TokenUnits = r.TokenUnits
		}
	}
	c.Scenario = strings.Join(scen, ", ")
	c.Units = reports[0].Units
	return c, nil
}

// WriteComparison writes comparison.md, comparison.json, report.html (the
// mechanisms side by side, interactive and self-contained) and, when plots is
// true, comparison.png/.svg (grouped bars of mean throughput, tenants ×
// mechanisms, with each bar's guarantee marked) into dir, with the same
// all-or-nothing behaviour as WriteReport.
func WriteComparison(dir string, reports []*eval.Report, plots bool) error {
	c, err := Compare(reports)
	if err != nil {
		return err
	}
	js, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %s: %w", ComparisonJSON, err)
	}
	page, err := comparisonHTML(c, reports)
	if err != nil {
		return err
	}
	files := []outFile{{ComparisonJSON, append(js, '\n')}, {ComparisonMD, comparisonMD(c)}, {ReportHTML, page}}
	if plots {
		f, err := comparisonPlot(c, reports)
		if err != nil {
			return err
		}
		out, err := f.files(ComparisonPlot)
		if err != nil {
			return err
		}
		files = append(files, out...)
	}
	return writeFiles(dir, files)
}

func comparisonMD(c *Comparison) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s — mechanisms compared\n\nThroughputs in %s.\n\n", mdEscape(c.Scenario), c.Units)
	vdc := len(c.Appliances) > 0
	if vdc {
		b.WriteString("| mechanism | VDC compliance | worst tenant at an appliance | worst tenant | work conservation | compliance | Jain | mean throughput | mean guarantee | mean ideal |\n")
		b.WriteString("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	} else {
		b.WriteString("| mechanism | worst tenant | work conservation | compliance | Jain | mean throughput | mean guarantee | mean ideal |\n")
		b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	}
	for _, m := range c.Mechanisms {
		comp := pct(m.Compliance)
		if m.GuaranteedVMSeconds == 0 {
			comp = "n/a"
		}
		fmt.Fprintf(&b, "| %s |", mdEscape(m.Mechanism))
		if vdc {
			v := "n/a"
			if m.VDCCompliance >= 0 {
				v = pct(m.VDCCompliance)
			}
			fmt.Fprintf(&b, " %s |", v)
			if w := m.WorstAtAppliance; w != nil {
				fmt.Fprintf(&b, " %s at %s %s |", mdEscape(w.Tenant), mdEscape(w.Appliance), pct(w.Compliance))
			} else {
				b.WriteString(" n/a |")
			}
		}
		if m.GuaranteedVMSeconds == 0 && m.MeanThroughput == 0 {
			b.WriteString(" n/a | n/a | n/a | n/a | – | – | – |\n") // no VM-to-VM traffic
			continue
		}
		if w := m.Worst; w != nil {
			fmt.Fprintf(&b, " %s %s |", mdEscape(w.Name), pct(w.Compliance))
		} else {
			b.WriteString(" n/a |")
		}
		fmt.Fprintf(&b, " %s | %s | %.3f | %s | %s | %s |\n", pct(m.WorkConservation), comp, m.Jain,
			num(m.MeanThroughput), num(m.Guarantee), num(m.IdealThroughput))
	}
	var rows []ComparisonRow
	for _, r := range c.Rows {
		// Tenants with request flows only have no network figures.
		if r.MeanThroughput > 0 || r.Guarantee > 0 || r.IdealThroughput > 0 || r.FCT != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) > 0 {
		b.WriteString("\n| mechanism | tenant | mean throughput | guarantee | ideal | compliance | work conservation | spare share |\n")
		b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", mdEscape(r.Mechanism), mdEscape(r.Tenant),
			num(r.MeanThroughput), num(r.Guarantee), num(r.IdealThroughput), pct(r.Compliance), pct(r.WorkConservation), pct(r.SpareShare))
	}
	fcts := false
	for _, r := range c.Rows {
		fcts = fcts || r.FCT != nil
	}
	if fcts {
		b.WriteString("\nFlow completion times (finished flows):\n\n| mechanism | tenant | flows | mean | median | p99 | max |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
		for _, r := range c.Rows {
			if f := r.FCT; f != nil {
				fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", mdEscape(r.Mechanism), mdEscape(r.Tenant), f.Count,
					secs(f.MeanS), secs(f.MedianS), secs(f.P99S), secs(f.MaxS))
			}
		}
	}
	if len(c.Appliances) > 0 {
		fmt.Fprintf(&b, "\nEnd-to-end throughput at appliances (%s):\n\n| mechanism | appliance | tenant | guarantee | mean throughput | compliance |\n| --- | --- | --- | ---: | ---: | ---: |\n", c.TokenUnits)
		for _, a := range c.Appliances {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mdEscape(a.Mechanism), mdEscape(a.Appliance), mdEscape(a.Tenant),
				num(a.Guarantee), num(a.Mean), pct(a.Compliance))
		}
	}
	return b.Bytes()
}

func comparisonPlot(c *Comparison, reports []*eval.Report) (*figure, error) {
	title := "mean throughput by mechanism"
	if c.Scenario != "" {
		title = c.Scenario + ": " + title
	}
	if appliancesOnly(reports) {
		return applianceComparisonPlot(c, reports, title)
	}
	f := newFigure(title, "tenant", "throughput"+unitLabel(c.Units))
	var tenants []string
	ti := map[string]int{}
	for _, r := range reports {
		for _, t := range r.Tenants {
			if _, ok := ti[t.Name]; !ok {
				ti[t.Name] = len(tenants)
				tenants = append(tenants, t.Name)
			}
		}
	}
	multi := strings.Contains(c.Scenario, ", ")
	labels := make([]string, len(reports))
	vals := make([][]float64, len(reports))
	marks := make([][]float64, len(reports))
	cols := make([]color.Color, len(reports))
	for m, r := range reports {
		labels[m] = r.Mechanism
		if multi || labels[m] == "" {
			labels[m] = strings.TrimPrefix(r.Scenario+" / "+r.Mechanism, " / ")
		}
		vals[m] = make([]float64, len(tenants))
		marks[m] = make([]float64, len(tenants))
		for t := range marks[m] {
			marks[m][t] = math.NaN()
		}
		for _, t := range r.Tenants {
			vals[m][ti[t.Name]] = t.MeanThroughput
			marks[m][ti[t.Name]] = t.Guarantee
		}
		cols[m] = colour(m)
	}
	if err := groupedBars(f, tenants, labels, vals, marks, cols); err != nil {
		return nil, err
	}
	return f, nil
}

// appliancesOnly is true when no report has VM-to-VM traffic but some have
// request flows at appliances.
func appliancesOnly(reports []*eval.Report) bool {
	apps := false
	for _, r := range reports {
		if r.PairTraffic() {
			return false
		}
		apps = apps || len(r.Appliances) > 0
	}
	return apps
}

// applianceGroups lists every "tenant @ appliance" of the reports in the
// order they first appear, and their positions.
func applianceGroups(reports []*eval.Report) ([]string, map[string]int) {
	var groups []string
	gi := map[string]int{}
	for _, r := range reports {
		for _, a := range r.Appliances {
			k := a.Tenant + " @ " + a.Appliance
			if _, ok := gi[k]; !ok {
				gi[k] = len(groups)
				groups = append(groups, k)
			}
		}
	}
	return groups, gi
}

// applianceComparisonPlot draws each tenant's mean end-to-end throughput at
// each appliance (token units) per mechanism, with its VDC guarantee.
func applianceComparisonPlot(c *Comparison, reports []*eval.Report, title string) (*figure, error) {
	f := newFigure(title, "tenant @ appliance", "end-to-end throughput"+unitLabel(c.TokenUnits))
	groups, gi := applianceGroups(reports)
	labels := make([]string, len(reports))
	vals := make([][]float64, len(reports))
	marks := make([][]float64, len(reports))
	cols := make([]color.Color, len(reports))
	for m, r := range reports {
		labels[m] = r.Mechanism
		vals[m] = make([]float64, len(groups))
		marks[m] = make([]float64, len(groups))
		for g := range marks[m] {
			marks[m][g] = math.NaN()
		}
		for _, a := range r.Appliances {
			g := gi[a.Tenant+" @ "+a.Appliance]
			vals[m][g] = a.Mean
			marks[m][g] = a.Guarantee
		}
		cols[m] = colour(m)
	}
	if err := groupedBars(f, groups, labels, vals, marks, cols); err != nil {
		return nil, err
	}
	return f, nil
}
