// Package report writes what a run produced: an eval.Report as report.json,
// summary.md, timeseries.csv, appliances.csv, report.html (interactive,
// self-contained) and PNG/SVG plots, and the
// comparison of several runs' reports.
package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bulkhead-dc/bulkhead/eval"
)

// Report file names, written by WriteReport.
const (
	ReportJSON     = "report.json"
	SummaryMD      = "summary.md"
	TimeseriesCSV  = "timeseries.csv"
	AppliancesCSV  = "appliances.csv" // only with appliances
	ThroughputPlot = "throughput"     // .png and .svg
	TenantsPlot    = "tenants"        // .png and .svg
	FCTPlot        = "fct_cdf"        // .png and .svg, only when there are FCTs
)

// WriteReport writes r into dir (created if needed): report.json,
// summary.md, timeseries.csv, report.html (interactive, self-contained:
// see html.go) and, when plots is true, tenants.png/.svg,
// throughput.png/.svg (if r has time series, as Evaluate's reports do) and
// fct_cdf.png/.svg (if it has flow completion times). Everything is rendered in memory first, then written to
// temporary files in dir and renamed into place; on error nothing it wrote
// is left behind (nor dir, if this call created it).
func WriteReport(dir string, r *eval.Report, plots bool) error {
	if r == nil {
		return errors.New("report: nil report")
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %s: %w", ReportJSON, err)
	}
	files := []outFile{
		{ReportJSON, append(js, '\n')},
		{SummaryMD, summary(r)},
	}
	ts, err := timeseries(r)
	if err != nil {
		return err
	}
	files = append(files, outFile{TimeseriesCSV, ts})
	if len(r.Appliances) > 0 || len(r.ApplianceUse) > 0 {
		files = append(files, outFile{AppliancesCSV, applianceCSV(r)})
	}
	page, err := reportHTML(r)
	if err != nil {
		return err
	}
	files = append(files, outFile{ReportHTML, page})
	if plots {
		type maker func(*eval.Report) (*figure, error)
		names := []string{TenantsPlot}
		makers := []maker{tenantsPlot}
		if len(r.Times) > 0 {
			names = append(names, ThroughputPlot)
			makers = append(makers, throughputPlot)
		}
		if hasFCTs(r) {
			names = append(names, FCTPlot)
			makers = append(makers, fctPlot)
		}
		if len(r.Appliances) > 0 && len(r.Times) > 0 {
			names = append(names, AppliancePlot)
			makers = append(makers, appliancePlot)
		}
		for i, mk := range makers {
			f, err := mk(r)
			if err != nil {
				return err
			}
			out, err := f.files(names[i])
			if err != nil {
				return err
			}
			files = append(files, out...)
		}
	}
	return writeFiles(dir, files)
}

type outFile struct {
	name string
	data []byte
}

// writeFiles writes files into dir atomically per file (temp + rename) and,
// on any error, removes what it wrote, and dir if it created it.
func writeFiles(dir string, files []outFile) (err error) {
	created := false
	if _, statErr := os.Stat(dir); errors.Is(statErr, os.ErrNotExist) {
		created = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	var temps, done []string
	defer func() {
		if err == nil {
			return
		}
		for _, p := range temps {
			os.Remove(p)
		}
		for _, p := range done {
			os.Remove(p)
		}
		if created {
			os.Remove(dir) // only if empty
		}
	}()
	for _, f := range files {
		tf, err := os.CreateTemp(dir, "."+f.name+".tmp*")
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		temps = append(temps, tf.Name())
		_, werr := tf.Write(f.data)
		cerr := tf.Close()
		if werr != nil {
			return fmt.Errorf("report: writing %s: %w", f.name, werr)
		}
		if cerr != nil {
			return fmt.Errorf("report: writing %s: %w", f.name, cerr)
		}
		if err := os.Chmod(tf.Name(), 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	for i, f := range files {
		target := filepath.Join(dir, f.name)
		if err := os.Rename(temps[i], target); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		done = append(done, target)
		temps[i] = ""
	}
	return nil
}

// num formats a throughput-like value with a precision suited to its size.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsInf(v, 0) || math.IsNaN(v):
		return fmt.Sprint(v)
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a == 0:
		return "0"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

func secs(v float64) string {
	switch {
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 3, 64) + " s"
	case v >= 1e-3:
		return strconv.FormatFloat(v*1e3, 'f', 2, 64) + " ms"
	default:
		return strconv.FormatFloat(v*1e6, 'f', 1, 64) + " µs"
	}
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func hasFCTs(r *eval.Report) bool {
	for _, t := range r.Tenants {
		if len(t.FCTs) > 0 {
			return true
		}
	}
	return false
}

// summary renders the report as Markdown.
func summary(r *eval.Report) []byte {
	var b bytes.Buffer
	title := r.Scenario
	if title == "" {
		title = "run"
	}
	fmt.Fprintf(&b, "# %s — %s\n\n", mdEscape(title), mdEscape(r.Mechanism))
	fmt.Fprintf(&b, "%g s simulated, %d samples of %g s; throughputs in %s.\n\n", r.DurationS, r.Samples, r.IntervalS, r.Units)
	for _, why := range r.Invalid {
		fmt.Fprintf(&b, "**Invalid measurement**: %s. These figures are not results.\n\n", why)
	}
	if w := r.Worst; w != nil {
		fmt.Fprintf(&b, "**Worst tenant: %s**, compliance %s (mean %s against a guarantee of %s).\n\n", mdEscape(w.Name), pct(w.Compliance), num(w.MeanThroughput), num(w.Guarantee))
	}
	if a := r.WorstAtAppliance(); a != nil {
		fmt.Fprintf(&b, "**Worst tenant at an appliance: %s at %s**, VDC compliance %s (mean %s against a guarantee of %s %s).\n\n",
			mdEscape(a.Tenant), mdEscape(a.Appliance), pct(a.Compliance), num(a.Mean), num(a.Guarantee), r.TokenUnits)
	}
	pairs := r.PairTraffic()
	if pairs {
		b.WriteString("| work conservation | guarantee compliance | Jain (throughput / guarantee) | mean throughput | mean guarantee | mean ideal |\n")
		b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: |\n")
		fmt.Fprintf(&b, "| %s | %s | %.3f | %s | %s | %s |\n\n",
			pct(r.WorkConservation), compliancePct(r), r.Jain, num(r.MeanThroughput), num(r.Guarantee), num(r.IdealThroughput))

		b.WriteString("| tenant | VMs | guarantee | mean throughput | ideal | compliance | work conservation | spare share | ideal spare share | weight share |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, t := range r.Tenants {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				mdEscape(t.Name), t.VMs, num(t.Guarantee), num(t.MeanThroughput), num(t.IdealThroughput),
				pct(t.Compliance), pct(t.WorkConservation), pct(t.SpareShare), pct(t.IdealSpareShare), pct(t.WeightShare))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("No VM-to-VM traffic: the network figures (hose compliance, work conservation against the network oracle) do not apply; see the appliances below.\n\n")
	}
	if r.FCT != nil {
		b.WriteString("Flow completion times:\n\n| tenant | flows | mean | median | p99 | max |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
		row := func(name string, f *eval.FCTStats) {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", mdEscape(name), f.Count, secs(f.MeanS), secs(f.MedianS), secs(f.P99S), secs(f.MaxS))
		}
		for _, t := range r.Tenants {
			if t.FCT != nil {
				row(t.Name, t.FCT)
			}
		}
		row("all", r.FCT)
		b.WriteString("\n")
	}
	if len(r.Appliances) > 0 {
		fmt.Fprintf(&b, "Appliances (end-to-end throughput in %s, over the samples where the tenant is active there):\n\n", r.TokenUnits)
		b.WriteString("| appliance | tenant | guarantee | mean throughput | compliance |\n| --- | --- | ---: | ---: | ---: |\n")
		for _, a := range r.Appliances {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", mdEscape(a.Appliance), mdEscape(a.Tenant), num(a.Guarantee), num(a.Mean), pct(a.Compliance))
		}
		b.WriteString("\n")
		if r.VDCCompliance >= 0 {
			fmt.Fprintf(&b, "VDC compliance (share of a tenant's active samples at an appliance where it got at least 95%% of its end-to-end guarantee there, over all tenants and appliances): %s.\n\n", pct(r.VDCCompliance))
		}
		if len(r.ApplianceUse) > 0 {
			b.WriteString("| appliance | utilization (mean) |\n| --- | ---: |\n")
			for _, u := range r.ApplianceUse {
				fmt.Fprintf(&b, "| %s | %s |\n", mdEscape(u.Appliance), pct(u.Mean))
			}
			b.WriteString("\n")
		}
	}
	for _, t := range r.Tenants {
		if !pairs || t.Pairs == 0 {
			continue
		}
		b.WriteString(sentence(r, &t))
		b.WriteString("\n")
	}
	b.WriteString(`
Definitions: a pair's *guarantee* is its hose-model guarantee for its current demand (max-min of the tenant's demands on its hose network); *ideal* is the work-conserving allocation on the physical network with the guarantees as floors and the residual shared by weighted max-min, weights = guarantees. *Compliance* is the share of VM-seconds in which each VM with a positive guaranteed rate got at least 95% of it in every direction where it has one. *Work conservation* is Σ achieved ÷ Σ ideal over the pairs crossing a link the ideal saturates (` + "`work_conservation_scope`" + ` in report.json says if it fell back to all pairs), clipped at 1. *Spare share* is the tenant's part of the throughput above guarantees; *weight share* its part of the guarantees.
`)
	return b.Bytes()
}

// compliancePct is the hose compliance, or "n/a" when no VM had a
// guaranteed rate to serve.
func compliancePct(r *eval.Report) string {
	if r.VMSeconds == 0 {
		return "n/a"
	}
	return pct(r.Compliance)
}

func sentence(r *eval.Report, t *eval.TenantReport) string {
	var s strings.Builder
	fmt.Fprintf(&s, "- **%s** averaged %s %s against a guarantee of %s (ideal %s)", mdEscape(t.Name), num(t.MeanThroughput), r.Units, num(t.Guarantee), num(t.IdealThroughput))
	if t.VMSeconds > 0 {
		fmt.Fprintf(&s, "; its VMs were served %s of the time", pct(t.Compliance))
	} else {
		s.WriteString("; it had no guaranteed rate to serve")
	}
	if t.IdealThroughput > 0 {
		fmt.Fprintf(&s, ", it got %s of its ideal", pct(t.MeanThroughput/t.IdealThroughput))
	}
	if t.WeightShare > 0 {
		fmt.Fprintf(&s, ", and %s of the spare capacity for a %s weight share (%s in the ideal)", pct(t.SpareShare), pct(t.WeightShare), pct(t.IdealSpareShare))
	}
	s.WriteString(".")
	return s.String()
}

// applianceCSV renders the appliance time series as CSV (long format):
// t_s,appliance,what,tenant,value — what is "throughput" (a tenant's
// end-to-end tokens, TokenUnits), "guarantee", "utilization" (0–1),
// "capacity" (for the mix served, TokenUnits) or "estimate" (the
// controller's capacity estimate at its step at t_s).
func applianceCSV(r *eval.Report) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"t_s", "appliance", "what", "tenant", "value"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for k, tm := range r.Times {
		for _, a := range r.Appliances {
			if k < len(a.Series) {
				_ = w.Write([]string{f(tm), a.Appliance, "throughput", a.Tenant, f(a.Series[k])})
				_ = w.Write([]string{f(tm), a.Appliance, "guarantee", a.Tenant, f(a.Guarantee)})
			}
		}
		for _, u := range r.ApplianceUse {
			if k < len(u.Series) {
				_ = w.Write([]string{f(tm), u.Appliance, "utilization", "", f(u.Series[k])})
			}
			if k < len(u.Capacity) {
				_ = w.Write([]string{f(tm), u.Appliance, "capacity", "", f(u.Capacity[k])})
			}
		}
	}
	for _, e := range r.Estimates {
		for i, tm := range e.Times {
			_ = w.Write([]string{f(tm), e.Appliance, "estimate", "", f(e.Tokens[i])})
		}
	}
	w.Flush()
	return b.Bytes()
}

// timeseries renders per-tenant totals per sample as CSV (long format):
// t_s,tenant,achieved,guarantee,ideal, throughputs in the report's units.
func timeseries(r *eval.Report) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"t_s", "tenant", "achieved", "guarantee", "ideal"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, t := range r.Tenants {
		if len(r.Times) == 0 {
			break
		}
		s := t.Series
		if len(s.Achieved) != len(r.Times) || len(s.Guarantee) != len(r.Times) || len(s.Ideal) != len(r.Times) {
			return nil, fmt.Errorf("report: tenant %q: time series missing (report not from Evaluate?)", t.Name)
		}
	}
	for k, tm := range r.Times {
		for _, t := range r.Tenants {
			_ = w.Write([]string{f(tm), t.Name, f(t.Series.Achieved[k]), f(t.Series.Guarantee[k]), f(t.Series.Ideal[k])})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("report: %s: %w", TimeseriesCSV, err)
	}
	return b.Bytes(), nil
}
