package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/internal/uplot"
)

// ReportHTML is the self-contained interactive report, written by
// WriteReport (one run) and WriteComparison (the comparison directory).
const ReportHTML = "report.html"

// The page inlines everything it needs: uPlot (internal/uplot, vendored
// from the npm registry), its own script and style, and the data as JSON. A
// Content-Security-Policy forbids every fetch, so a page that tried one
// would fail loudly rather than depend on the network.
var (
	//go:embed assets/report.js
	pageJS string
	//go:embed assets/report.css
	pageCSS string
	//go:embed assets/report.html.tmpl
	pageTmpl string
)

var htmlTmpl = template.Must(template.New(ReportHTML).Parse(pageTmpl))

// maxHTMLPoints bounds the points per time series in report.html (longer
// series are averaged in buckets, as in the PNG/SVG plots).
const maxHTMLPoints = 4000

// jnum is a float64 that marshals to JSON in 6 significant digits, and NaN
// or ±Inf to null (a gap in the chart).
type jnum float64

func (v jnum) MarshalJSON() ([]byte, error) {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', 6, 64), nil
}

// htmlData is the JSON the page's script draws from.
type htmlData struct {
	Kind    string      `json:"kind"` // "report" or "comparison"
	Tenants []string    `json:"tenants"`
	Charts  []htmlChart `json:"charts"`
}

// htmlChart is one uPlot chart: "time" (x in seconds, lines) or "bars"
// (x are slots, groups of bars with a gap between groups; Groups label the
// slots in Centers).
type htmlChart struct {
	ID      string       `json:"id"`
	Section string       `json:"section"`
	Title   string       `json:"title"`
	Kind    string       `json:"kind"`
	XLabel  string       `json:"xlabel"`
	YLabel  string       `json:"ylabel"`
	X       []jnum       `json:"x"`
	Groups  []string     `json:"groups,omitempty"`
	Centers []float64    `json:"centers,omitempty"`
	Series  []htmlSeries `json:"series"`
}

// htmlSeries is one line, bar series or set of marks. Values has one
// entry per X (null: none there).
type htmlSeries struct {
	Label  string `json:"label"`
	Tenant string `json:"tenant,omitempty"` // the tenant it shows, if one
	Color  string `json:"color"`
	Style  string `json:"style"` // line, dash, dot, bar, mark
	Values []jnum `json:"values"`
}

// htmlTable is a table rendered into the page; Num says which columns
// are right-aligned, Mark which rows are highlighted.
type htmlTable struct {
	Caption string
	Head    []string
	Num     []bool
	Rows    [][]string
	Mark    []bool
}

func (t *htmlTable) add(mark bool, cells ...string) {
	t.Rows = append(t.Rows, cells)
	t.Mark = append(t.Mark, mark)
}

func newTable(caption string, head ...string) *htmlTable {
	t := &htmlTable{Caption: caption}
	for i, h := range head {
		num := i > 0 && strings.HasPrefix(h, "#")
		t.Head = append(t.Head, strings.TrimPrefix(h, "#"))
		t.Num = append(t.Num, num)
	}
	return t
}

// htmlPage is what the template renders.
type htmlPage struct {
	Title    string
	Subtitle string
	Invalid  []string
	Headline template.HTML // already escaped
	Notes    []string
	Tables   []*htmlTable
	Sections []string // chart sections, in order
	Data     template.JS
	UPlotJS  template.JS
	UPlotCSS template.CSS
	PageJS   template.JS
	PageCSS  template.CSS
}

func hexColour(i int) string {
	c := palette[i%len(palette)]
	return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
}

// renderHTML renders the page with its data.
func renderHTML(p *htmlPage, d *htmlData) ([]byte, error) {
	seen := map[string]bool{}
	for _, c := range d.Charts {
		if !seen[c.Section] {
			seen[c.Section] = true
			p.Sections = append(p.Sections, c.Section)
		}
	}
	js, err := json.Marshal(d) // escapes <, > and & so the data cannot close its script
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", ReportHTML, err)
	}
	p.Data = template.JS(js)
	p.UPlotJS = template.JS(uplot.JS())
	p.UPlotCSS = template.CSS(uplot.CSS())
	p.PageJS = template.JS(pageJS)
	p.PageCSS = template.CSS(pageCSS)
	var b bytes.Buffer
	if err := htmlTmpl.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("report: %s: %w", ReportHTML, err)
	}
	return b.Bytes(), nil
}

// series downsampled like the PNG plots: x and every y averaged in the same
// buckets.
func bucket(x []float64, ys ...[]float64) ([]jnum, [][]jnum) {
	n := len(x)
	step := 1
	if n > maxHTMLPoints {
		step = (n + maxHTMLPoints - 1) / maxHTMLPoints
	}
	avg := func(v []float64, i, j int) jnum {
		var s float64
		for k := i; k < j; k++ {
			s += v[k]
		}
		return jnum(s / float64(j-i))
	}
	var xs []jnum
	out := make([][]jnum, len(ys))
	for i := 0; i < n; i += step {
		j := min(i+step, n)
		xs = append(xs, avg(x, i, j))
		for k, y := range ys {
			if len(y) == n {
				out[k] = append(out[k], avg(y, i, j))
			} else {
				out[k] = append(out[k], jnum(math.NaN()))
			}
		}
	}
	return xs, out
}

func constant(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// barsChart lays out groups of bars: series m of group g at slot
// g*(M+1)+m, a gap slot between groups. vals[m][g] is series m's bar in
// group g (NaN: none); marks, if non-nil, are drawn as points on the bars
// (e.g. the guarantee), with markLabel.
func barsChart(id, section, title, ylabel string, groups, labels []string, vals [][]float64, marks [][]float64, markLabel string) htmlChart {
	M := len(labels)
	n := len(groups)*(M+1) - 1
	if n < 1 {
		n = 1
	}
	c := htmlChart{ID: id, Section: section, Title: title, Kind: "bars", YLabel: ylabel, Groups: groups}
	for i := 0; i < n; i++ {
		c.X = append(c.X, jnum(i))
	}
	for g := range groups {
		c.Centers = append(c.Centers, float64(g*(M+1))+float64(M-1)/2)
	}
	nan := func() []jnum {
		v := make([]jnum, n)
		for i := range v {
			v[i] = jnum(math.NaN())
		}
		return v
	}
	var mk []jnum
	if marks != nil {
		mk = nan()
	}
	for m, l := range labels {
		v := nan()
		for g := range groups {
			v[g*(M+1)+m] = jnum(vals[m][g])
			if marks != nil {
				mk[g*(M+1)+m] = jnum(marks[m][g])
			}
		}
		c.Series = append(c.Series, htmlSeries{Label: l, Color: hexColour(m), Style: "bar", Values: v})
	}
	if marks != nil {
		c.Series = append(c.Series, htmlSeries{Label: markLabel, Color: "#222222", Style: "mark", Values: mk})
	}
	return c
}

// reportHTML renders one run's report.html.
func reportHTML(r *eval.Report) ([]byte, error) {
	title := r.Scenario
	if title == "" {
		title = "run"
	}
	p := &htmlPage{
		Title:    title + " — " + r.Mechanism,
		Subtitle: fmt.Sprintf("%g s simulated, %d samples of %g s; throughputs in %s.", r.DurationS, r.Samples, r.IntervalS, r.Units),
		Invalid:  r.Invalid,
	}
	d := &htmlData{Kind: "report"}
	for _, t := range r.Tenants {
		d.Tenants = append(d.Tenants, t.Name)
	}
	pairs := r.PairTraffic()
	if w := r.Worst; w != nil {
		p.Headline = template.HTML(fmt.Sprintf("Worst tenant: <b>%s</b> — compliance %s (mean %s against a guarantee of %s %s)",
			template.HTMLEscapeString(w.Name), pct(w.Compliance), num(w.MeanThroughput), num(w.Guarantee), template.HTMLEscapeString(r.Units)))
	}
	worstApp := r.WorstAtAppliance()
	if worstApp != nil && (r.Worst == nil || !pairs) {
		p.Headline = template.HTML(fmt.Sprintf("Worst tenant at an appliance: <b>%s</b> at %s — compliance %s (mean %s against a VDC guarantee of %s %s)",
			template.HTMLEscapeString(worstApp.Tenant), template.HTMLEscapeString(worstApp.Appliance), pct(worstApp.Compliance),
			num(worstApp.Mean), num(worstApp.Guarantee), template.HTMLEscapeString(r.TokenUnits)))
	}
	if pairs {
		t := newTable("Run", "work conservation", "#guarantee compliance", "#Jain (throughput / guarantee)", "#mean throughput", "#mean guarantee", "#mean ideal")
		t.Num[0] = true
		t.add(false, pct(r.WorkConservation), compliancePct(r), strconv.FormatFloat(r.Jain, 'f', 3, 64), num(r.MeanThroughput), num(r.Guarantee), num(r.IdealThroughput))
		p.Tables = append(p.Tables, t)
		t = newTable("Tenants ("+r.Units+")", "tenant", "#VMs", "#guarantee", "#mean throughput", "#ideal", "#compliance", "#work conservation", "#spare share", "#ideal spare share", "#weight share")
		for _, tn := range r.Tenants {
			t.add(r.Worst != nil && r.Worst.Name == tn.Name, tn.Name, strconv.Itoa(tn.VMs), num(tn.Guarantee), num(tn.MeanThroughput), num(tn.IdealThroughput),
				pct(tn.Compliance), pct(tn.WorkConservation), pct(tn.SpareShare), pct(tn.IdealSpareShare), pct(tn.WeightShare))
		}
		p.Tables = append(p.Tables, t)
	} else {
		p.Notes = append(p.Notes, "No VM-to-VM traffic: the network figures (hose compliance, work conservation against the network oracle) do not apply; see the appliances.")
	}
	if r.FCT != nil {
		t := newTable("Flow completion times", "tenant", "#flows", "#mean", "#median", "#p99", "#max")
		for _, tn := range r.Tenants {
			if f := tn.FCT; f != nil {
				t.add(false, tn.Name, strconv.Itoa(f.Count), secs(f.MeanS), secs(f.MedianS), secs(f.P99S), secs(f.MaxS))
			}
		}
		f := r.FCT
		t.add(false, "all", strconv.Itoa(f.Count), secs(f.MeanS), secs(f.MedianS), secs(f.P99S), secs(f.MaxS))
		p.Tables = append(p.Tables, t)
	}
	if len(r.Appliances) > 0 {
		t := newTable("Appliances (end-to-end throughput in "+r.TokenUnits+", over the samples where the tenant is active there)", "appliance", "tenant", "#guarantee", "#mean throughput", "#compliance")
		t.Num[1] = false
		for i, a := range r.Appliances {
			t.add(worstApp == &r.Appliances[i], a.Appliance, a.Tenant, num(a.Guarantee), num(a.Mean), pct(a.Compliance))
		}
		p.Tables = append(p.Tables, t)
		if r.VDCCompliance >= 0 {
			p.Notes = append(p.Notes, "VDC compliance (share of a tenant's active samples at an appliance where it got at least 95% of its end-to-end guarantee there, over all tenants and appliances): "+pct(r.VDCCompliance)+".")
		}
	}
	if len(r.ApplianceUse) > 0 {
		t := newTable("Appliance utilization", "appliance", "#utilization (mean)")
		for _, u := range r.ApplianceUse {
			t.add(false, u.Appliance, pct(u.Mean))
		}
		p.Tables = append(p.Tables, t)
	}

	// Charts.
	if pairs {
		var groups []string
		vals := [][]float64{nil, nil, nil}
		for _, tn := range r.Tenants {
			groups = append(groups, tn.Name)
			vals[0] = append(vals[0], tn.MeanThroughput)
			vals[1] = append(vals[1], tn.Guarantee)
			vals[2] = append(vals[2], tn.IdealThroughput)
		}
		d.Charts = append(d.Charts, barsChart("tenant-means", "Tenants", "mean throughput, guarantee and ideal per tenant", r.Units, groups,
			[]string{"mean throughput", "guarantee", "ideal"}, vals, nil, ""))
		d.Charts[len(d.Charts)-1].XLabel = "tenant"
	}
	if pairs && len(r.Times) > 0 {
		all := htmlChart{ID: "all-tenants", Section: "Tenants over time", Title: "every tenant's throughput (solid) and guarantee (dashed)", Kind: "time", XLabel: "time (s)", YLabel: r.Units}
		for i, tn := range r.Tenants {
			s := tn.Series
			xs, ys := bucket(r.Times, s.Achieved, s.Guarantee, s.Ideal)
			all.X = xs
			all.Series = append(all.Series,
				htmlSeries{Label: tn.Name, Tenant: tn.Name, Color: hexColour(i), Style: "line", Values: ys[0]},
				htmlSeries{Label: tn.Name + " guarantee", Tenant: tn.Name, Color: hexColour(i), Style: "dash", Values: ys[1]})
			d.Charts = append(d.Charts, htmlChart{
				ID: fmt.Sprintf("tenant-%d", i), Section: "Tenants over time", Kind: "time", XLabel: "time (s)", YLabel: r.Units,
				Title: fmt.Sprintf("%s: throughput against its guarantee and the ideal", tn.Name), X: xs,
				Series: []htmlSeries{
					{Label: tn.Name, Tenant: tn.Name, Color: hexColour(i), Style: "line", Values: ys[0]},
					{Label: tn.Name + " guarantee", Tenant: tn.Name, Color: hexColour(i), Style: "dash", Values: ys[1]},
					{Label: tn.Name + " ideal", Tenant: tn.Name, Color: "#555555", Style: "dot", Values: ys[2]},
				},
			})
		}
		// the overview first
		d.Charts = append(d.Charts[:1], append([]htmlChart{all}, d.Charts[1:]...)...)
	}
	if len(r.Appliances) > 0 {
		var groups []string
		vals := [][]float64{nil}
		marks := [][]float64{nil}
		for _, a := range r.Appliances {
			groups = append(groups, a.Tenant+" @ "+a.Appliance)
			vals[0] = append(vals[0], a.Mean)
			marks[0] = append(marks[0], a.Guarantee)
		}
		d.Charts = append(d.Charts, barsChart("appliance-means", "Appliances", "per-tenant end-to-end throughput at appliances against the VDC guarantee", r.TokenUnits,
			groups, []string{"mean throughput"}, vals, marks, "VDC guarantee"))
		d.Charts[len(d.Charts)-1].XLabel = "tenant @ appliance"
	}
	if len(r.Appliances) > 0 && len(r.Times) > 0 {
		var apps []string
		seen := map[string]bool{}
		for _, a := range r.Appliances {
			if !seen[a.Appliance] {
				seen[a.Appliance] = true
				apps = append(apps, a.Appliance)
			}
		}
		for ai, app := range apps {
			c := htmlChart{ID: fmt.Sprintf("appliance-%d", ai), Section: "Appliances", Kind: "time", XLabel: "time (s)", YLabel: r.TokenUnits,
				Title: app + ": per-tenant throughput against the VDC guarantee, capacity estimate against measured capacity"}
			var ys [][]float64
			var ss []htmlSeries
			for i, a := range r.Appliances {
				if a.Appliance != app {
					continue
				}
				ys = append(ys, a.Series)
				ss = append(ss, htmlSeries{Label: a.Tenant + " @ " + app, Tenant: a.Tenant, Color: hexColour(i), Style: "line"})
				if a.Guarantee > 0 {
					ys = append(ys, constant(a.Guarantee, len(r.Times)))
					ss = append(ss, htmlSeries{Label: a.Tenant + " VDC guarantee", Tenant: a.Tenant, Color: hexColour(i), Style: "dash"})
				}
			}
			for _, u := range r.ApplianceUse {
				if u.Appliance != app || len(u.Capacity) != len(r.Times) {
					continue
				}
				capy := make([]float64, len(u.Capacity))
				any := false
				for k, v := range u.Capacity {
					capy[k] = math.NaN()
					if v > 0 {
						capy[k], any = v, true
					}
				}
				if any {
					ys = append(ys, capy)
					ss = append(ss, htmlSeries{Label: "measured capacity (mix served)", Color: "#8c8c8c", Style: "dot"})
				}
			}
			for _, e := range r.Estimates {
				if e.Appliance != app || len(e.Times) == 0 {
					continue
				}
				ys = append(ys, stepAt(r.Times, e.Times, e.Tokens))
				ss = append(ss, htmlSeries{Label: "capacity estimate", Color: "#000000", Style: "line"})
			}
			xs, bs := bucket(r.Times, ys...)
			c.X = xs
			for k := range ss {
				ss[k].Values = bs[k]
			}
			c.Series = ss
			d.Charts = append(d.Charts, c)
		}
	}
	return renderHTML(p, d)
}

// stepAt samples a step function (value v[i] from t[i] on) at times x (NaN
// before its first step).
func stepAt(x, t, v []float64) []float64 {
	out := make([]float64, len(x))
	j := -1
	for k, tm := range x {
		for j+1 < len(t) && t[j+1] <= tm+1e-9 {
			j++
		}
		if j < 0 || j >= len(v) {
			out[k] = math.NaN()
		} else {
			out[k] = v[j]
		}
	}
	return out
}

// comparisonHTML renders the comparison directory's report.html: the
// mechanisms side by side.
func comparisonHTML(c *Comparison, reports []*eval.Report) ([]byte, error) {
	p := &htmlPage{Title: c.Scenario + " — mechanisms compared", Subtitle: "Throughputs in " + c.Units + "."}
	d := &htmlData{Kind: "comparison"}
	labels := make([]string, len(reports))
	multi := strings.Contains(c.Scenario, ", ")
	for m, r := range reports {
		labels[m] = r.Mechanism
		if multi || labels[m] == "" {
			labels[m] = strings.TrimPrefix(r.Scenario+" / "+r.Mechanism, " / ")
		}
		for _, iv := range r.Invalid {
			p.Invalid = append(p.Invalid, labels[m]+": "+iv)
		}
	}
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
	d.Tenants = tenants
	vdc := len(c.Appliances) > 0
	pairs := !appliancesOnly(reports)

	// headline: the worst tenant under each mechanism
	var hl []string
	for m, ms := range c.Mechanisms {
		if w := ms.Worst; w != nil && (ms.GuaranteedVMSeconds > 0 || ms.MeanThroughput > 0) {
			hl = append(hl, fmt.Sprintf("%s: <b>%s</b> %s", template.HTMLEscapeString(labels[m]), template.HTMLEscapeString(w.Name), pct(w.Compliance)))
		}
	}
	if !pairs {
		for m, ms := range c.Mechanisms {
			if w := ms.WorstAtAppliance; w != nil {
				hl = append(hl, fmt.Sprintf("%s: <b>%s</b> at %s %s", template.HTMLEscapeString(labels[m]), template.HTMLEscapeString(w.Tenant),
					template.HTMLEscapeString(w.Appliance), pct(w.Compliance)))
			}
		}
	}
	if len(hl) > 0 {
		p.Headline = template.HTML("Worst tenant — " + strings.Join(hl, "; "))
	}

	head := []string{"mechanism"}
	if vdc {
		head = append(head, "#VDC compliance", "worst tenant at an appliance")
	}
	head = append(head, "worst tenant", "#worst tenant's compliance", "#work conservation", "#compliance", "#Jain", "#mean throughput", "#mean guarantee", "#mean ideal")
	t := newTable("Mechanisms", head...)
	for m, ms := range c.Mechanisms {
		row := []string{labels[m]}
		if vdc {
			v := "n/a"
			if ms.VDCCompliance >= 0 {
				v = pct(ms.VDCCompliance)
			}
			wa := "n/a"
			if w := ms.WorstAtAppliance; w != nil {
				wa = fmt.Sprintf("%s at %s %s", w.Tenant, w.Appliance, pct(w.Compliance))
			}
			row = append(row, v, wa)
		}
		if ms.GuaranteedVMSeconds == 0 && ms.MeanThroughput == 0 {
			row = append(row, "n/a", "n/a", "n/a", "n/a", "–", "–", "–", "–")
		} else {
			wn, wc := "n/a", "n/a"
			if w := ms.Worst; w != nil {
				wn, wc = w.Name, pct(w.Compliance)
			}
			comp := pct(ms.Compliance)
			if ms.GuaranteedVMSeconds == 0 {
				comp = "n/a"
			}
			row = append(row, wn, wc, pct(ms.WorkConservation), comp, strconv.FormatFloat(ms.Jain, 'f', 3, 64),
				num(ms.MeanThroughput), num(ms.Guarantee), num(ms.IdealThroughput))
		}
		t.add(false, row...)
	}
	p.Tables = append(p.Tables, t)
	if pairs {
		t := newTable("Tenants per mechanism ("+c.Units+")", "mechanism", "tenant", "#mean throughput", "#guarantee", "#ideal", "#compliance", "#work conservation", "#spare share")
		t.Num[1] = false
		for m, r := range reports {
			for _, tn := range r.Tenants {
				if tn.MeanThroughput > 0 || tn.Guarantee > 0 || tn.IdealThroughput > 0 || tn.FCT != nil {
					t.add(r.Worst != nil && r.Worst.Name == tn.Name, labels[m], tn.Name, num(tn.MeanThroughput), num(tn.Guarantee), num(tn.IdealThroughput),
						pct(tn.Compliance), pct(tn.WorkConservation), pct(tn.SpareShare))
				}
			}
		}
		p.Tables = append(p.Tables, t)
	}
	if vdc {
		t := newTable("End-to-end throughput at appliances ("+c.TokenUnits+")", "mechanism", "appliance", "tenant", "#guarantee", "#mean throughput", "#compliance")
		t.Num[1], t.Num[2] = false, false
		for m, r := range reports {
			for _, a := range r.Appliances {
				t.add(false, labels[m], a.Appliance, a.Tenant, num(a.Guarantee), num(a.Mean), pct(a.Compliance))
			}
		}
		p.Tables = append(p.Tables, t)
	}

	// Charts: the figures per mechanism side by side.
	metrics := []string{"worst tenant's compliance", "compliance", "work conservation"}
	if vdc {
		metrics = append(metrics, "VDC compliance")
	}
	if !pairs {
		metrics = []string{"worst tenant's VDC compliance", "VDC compliance"}
	}
	mv := make([][]float64, len(reports))
	for m, ms := range c.Mechanisms {
		net := ms.GuaranteedVMSeconds > 0 || ms.MeanThroughput > 0
		w := math.NaN()
		if ms.Worst != nil && net {
			w = 100 * ms.Worst.Compliance
		}
		comp, wc := math.NaN(), math.NaN()
		if ms.GuaranteedVMSeconds > 0 {
			comp = 100 * ms.Compliance
		}
		if net {
			wc = 100 * ms.WorkConservation
		}
		mv[m] = []float64{w, comp, wc}
		if !pairs {
			mv[m] = []float64{math.NaN(), math.NaN()}
			if wa := ms.WorstAtAppliance; wa != nil {
				mv[m][0] = 100 * wa.Compliance
			}
			if ms.VDCCompliance >= 0 {
				mv[m][1] = 100 * ms.VDCCompliance
			}
			continue
		}
		if vdc {
			v := math.NaN()
			if ms.VDCCompliance >= 0 {
				v = 100 * ms.VDCCompliance
			}
			mv[m] = append(mv[m], v)
		}
	}
	d.Charts = append(d.Charts, barsChart("mechanisms", "Mechanisms", "worst tenant, compliance and work conservation per mechanism", "%", metrics, labels, mv, nil, ""))
	d.Charts[len(d.Charts)-1].XLabel = "figure"
	if pairs {
		vals := make([][]float64, len(reports))
		marks := make([][]float64, len(reports))
		for m, r := range reports {
			vals[m] = constant(math.NaN(), len(tenants))
			marks[m] = constant(math.NaN(), len(tenants))
			for _, tn := range r.Tenants {
				vals[m][ti[tn.Name]] = tn.MeanThroughput
				marks[m][ti[tn.Name]] = tn.Guarantee
			}
		}
		d.Charts = append(d.Charts, barsChart("tenant-means", "Tenants per mechanism", "each tenant's mean throughput per mechanism (marks: guarantee)", c.Units,
			tenants, labels, vals, marks, "guarantee"))
		d.Charts[len(d.Charts)-1].XLabel = "tenant"
	}
	if vdc {
		groups, gi := applianceGroups(reports)
		vals := make([][]float64, len(reports))
		marks := make([][]float64, len(reports))
		for m, r := range reports {
			vals[m] = constant(math.NaN(), len(groups))
			marks[m] = constant(math.NaN(), len(groups))
			for _, a := range r.Appliances {
				vals[m][gi[a.Tenant+" @ "+a.Appliance]] = a.Mean
				marks[m][gi[a.Tenant+" @ "+a.Appliance]] = a.Guarantee
			}
		}
		d.Charts = append(d.Charts, barsChart("appliance-means", "Appliances per mechanism", "each tenant's end-to-end throughput at appliances per mechanism (marks: VDC guarantee)", c.TokenUnits,
			groups, labels, vals, marks, "VDC guarantee"))
		d.Charts[len(d.Charts)-1].XLabel = "tenant @ appliance"
	}
	// each tenant over time, a line per mechanism, when the runs sampled
	// the same times
	if pairs && sameTimes(reports) {
		times := reports[0].Times
		for i, name := range tenants {
			ch := htmlChart{ID: fmt.Sprintf("tenant-%d", i), Section: "Tenants over time, per mechanism", Kind: "time", XLabel: "time (s)", YLabel: c.Units,
				Title: name + ": throughput per mechanism against its guarantee"}
			var ys [][]float64
			var ss []htmlSeries
			var guar []float64
			for m, r := range reports {
				for _, tn := range r.Tenants {
					if tn.Name != name || len(tn.Series.Achieved) != len(times) {
						continue
					}
					ys = append(ys, tn.Series.Achieved)
					ss = append(ss, htmlSeries{Label: name + " · " + labels[m], Tenant: name, Color: hexColour(m), Style: "line"})
					if guar == nil && len(tn.Series.Guarantee) == len(times) {
						guar = tn.Series.Guarantee
					}
				}
			}
			if guar != nil {
				ys = append(ys, guar)
				ss = append(ss, htmlSeries{Label: name + " guarantee", Tenant: name, Color: "#222222", Style: "dash"})
			}
			xs, bs := bucket(times, ys...)
			ch.X = xs
			for k := range ss {
				ss[k].Values = bs[k]
			}
			ch.Series = ss
			d.Charts = append(d.Charts, ch)
		}
	}
	return renderHTML(p, d)
}

func sameTimes(reports []*eval.Report) bool {
	if len(reports[0].Times) == 0 {
		return false
	}
	for _, r := range reports[1:] {
		if len(r.Times) != len(reports[0].Times) {
			return false
		}
		for i, t := range r.Times {
			if math.Abs(t-reports[0].Times[i]) > 1e-9 {
				return false
			}
		}
	}
	return true
}
