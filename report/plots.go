package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

	"github.com/bulkhead-dc/bulkhead/eval"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot geometry.
const (
	plotWidth   = 9 * vg.Inch
	plotHeight  = 4.5 * vg.Inch
	pngDPI      = 150
	maxPoints   = 1500 // time-series points per line (longer series are averaged in buckets)
	maxLegend   = 24   // legend entries listed before "… N more"
	legendGap   = 8 * vg.Millimeter
	legendThumb = 10 * vg.Millimeter
)

// palette is Tableau 10: distinct, colour-blind tolerable.
var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0xe1, 0x57, 0x59, 0xff},
	{0x76, 0xb7, 0xb2, 0xff}, {0x59, 0xa1, 0x4f, 0xff}, {0xed, 0xc9, 0x48, 0xff},
	{0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff}, {0x9c, 0x75, 0x5f, 0xff},
	{0xba, 0xb0, 0xac, 0xff},
}

func colour(i int) color.Color { return palette[i%len(palette)] }

var dashes = []vg.Length{vg.Points(6), vg.Points(3)}

// figure is a plot with an optional legend drawn in a column to its right,
// so that the legend never hides data.
type figure struct {
	p      *plot.Plot
	legend plot.Legend
	n      int // entries
}

func newFigure(title, xlabel, ylabel string) *figure {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	for _, sty := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label} {
		sty.Font.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Tick.Marker = cleanTicks{}
	p.Y.Tick.Marker = cleanTicks{}
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 0xe0}
	grid.Horizontal.Color = color.Gray{Y: 0xe0}
	p.Add(grid)
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.ThumbnailWidth = legendThumb
	l.Padding = vg.Points(3)
	l.TextStyle.Font.Variant = "Sans"
	l.TextStyle.Font.Size = vg.Points(10)
	return &figure{p: p, legend: l}
}

// cleanTicks is plot.DefaultTicks with labels in the fewest digits that
// tell them apart ("500", not "500.00").
type cleanTicks struct{}

func (cleanTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// headroom leaves 8% above the highest value.
func (f *figure) headroom() {
	if f.p.Y.Max > 0 && !math.IsInf(f.p.Y.Max, 0) {
		f.p.Y.Max *= 1.08
	}
}

func (f *figure) add(name string, thumbs ...plot.Thumbnailer) {
	f.legend.Add(name, thumbs...)
	f.n++
}

// render draws the figure in format "png" or "svg".
func (f *figure) render(format string) ([]byte, error) {
	var buf bytes.Buffer
	switch format {
	case "png":
		c := vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(pngDPI))
		f.draw(draw.New(c))
		if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
			return nil, err
		}
	case "svg":
		c := vgsvg.New(plotWidth, plotHeight)
		f.draw(draw.New(c))
		if _, err := c.WriteTo(&buf); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("report: unsupported plot format %q", format)
	}
	return buf.Bytes(), nil
}

func (f *figure) draw(dc draw.Canvas) {
	r := dc.Rectangle
	dc.FillPolygon(color.White, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
	if f.n == 0 {
		f.p.Draw(dc)
		return
	}
	w := f.legend.Rectangle(dc).Size().X + legendGap
	if max := r.Size().X / 3; w > max {
		w = max
	}
	f.p.Draw(draw.Crop(dc, 0, -w, 0, -vg.Points(4)))
	lc := draw.Crop(dc, r.Size().X-w+legendGap/2, 0, 0, -f.p.Title.TextStyle.Font.Size*2-f.p.Title.Padding)
	f.legend.Draw(lc)
}

func (f *figure) files(base string) ([]outFile, error) {
	var out []outFile
	for _, ext := range []string{"png", "svg"} {
		b, err := f.render(ext)
		if err != nil {
			return nil, fmt.Errorf("report: %s.%s: %w", base, ext, err)
		}
		out = append(out, outFile{name: base + "." + ext, data: b})
	}
	return out, nil
}

// downsample averages y over buckets so that at most maxPoints remain.
func downsample(x, y []float64) plotter.XYs {
	n := len(x)
	step := 1
	if n > maxPoints {
		step = (n + maxPoints - 1) / maxPoints
	}
	xy := make(plotter.XYs, 0, (n+step-1)/step)
	for i := 0; i < n; i += step {
		j := min(i+step, n)
		var sx, sy float64
		for k := i; k < j; k++ {
			sx += x[k]
			sy += y[k]
		}
		xy = append(xy, plotter.XY{X: sx / float64(j-i), Y: sy / float64(j-i)})
	}
	return xy
}

func unitLabel(units string) string {
	if units == "" {
		return ""
	}
	return " (" + units + ")"
}

func plotTitle(r *eval.Report, what string) string {
	name := r.Scenario
	if r.Mechanism != "" {
		if name != "" {
			name += " · "
		}
		name += r.Mechanism
	}
	if name == "" {
		return what
	}
	return name + ": " + what
}

// throughputPlot: per-tenant achieved throughput over time (solid), each
// tenant's guarantee dashed in the same colour.
func throughputPlot(r *eval.Report) (*figure, error) {
	f := newFigure(plotTitle(r, "throughput per tenant"), "time (s)", "throughput"+unitLabel(r.Units))
	f.p.Y.Min = 0
	var guarantees []plot.Plotter // drawn over the achieved lines
	for i, t := range r.Tenants {
		if len(t.Series.Achieved) != len(r.Times) || len(t.Series.Guarantee) != len(r.Times) {
			return nil, fmt.Errorf("report: tenant %q: time series missing (report not from Evaluate?)", t.Name)
		}
		a, err := plotter.NewLine(downsample(r.Times, t.Series.Achieved))
		if err != nil {
			return nil, err
		}
		a.Color = colour(i)
		a.Width = vg.Points(1.5)
		g, err := plotter.NewLine(downsample(r.Times, t.Series.Guarantee))
		if err != nil {
			return nil, err
		}
		g.Color = colour(i)
		g.Width = vg.Points(1.2)
		g.Dashes = dashes
		f.p.Add(a)
		guarantees = append(guarantees, g)
		if i < maxLegend {
			f.add(t.Name, a)
		} else if i == maxLegend {
			f.add(fmt.Sprintf("… %d more", len(r.Tenants)-maxLegend))
		}
	}
	f.p.Add(guarantees...)
	if len(r.Tenants) > 0 {
		g := &plotter.Line{LineStyle: draw.LineStyle{Color: color.Gray{Y: 0x60}, Width: vg.Points(1.2), Dashes: dashes}}
		f.add("guarantee", g)
	}
	f.p.X.Min = math.Min(f.p.X.Min, 0)
	f.headroom()
	return f, nil
}

// groupedBars draws len(series) bars per group; values[s][g] is series s in
// group g. marks, when not nil, draws a black tick across bar (s, g) at
// marks[s][g] (NaN: none).
func groupedBars(f *figure, groups []string, series []string, values, marks [][]float64, colours []color.Color) error {
	ng, ns := len(groups), len(series)
	if ng == 0 || ns == 0 {
		return nil
	}
	// Bar width from the data area width available per group.
	area := plotWidth * 0.75
	w := area / vg.Length(ng) * 0.8 / vg.Length(ns)
	w = min(w, vg.Points(28))
	w = max(w, vg.Points(1))
	for s := range series {
		b, err := plotter.NewBarChart(plotter.Values(values[s]), w)
		if err != nil {
			return err
		}
		b.Color = colours[s]
		b.LineStyle.Width = 0
		b.Offset = (vg.Length(s) - vg.Length(ns-1)/2) * w
		f.p.Add(b)
		f.add(series[s], b)
		if marks != nil {
			m := &tickMarks{y: marks[s], offset: b.Offset, width: w}
			f.p.Add(m)
		}
	}
	if marks != nil {
		f.add("guarantee", &tickMarks{width: legendThumb})
	}
	f.p.NominalX(groups...)
	if ng > 6 {
		f.p.X.Tick.Label.Rotation = math.Pi / 5
		f.p.X.Tick.Label.XAlign = draw.XRight
		f.p.X.Tick.Label.YAlign = draw.YCenter
	}
	f.p.Y.Min = 0
	f.headroom()
	f.p.X.Min = -0.6
	f.p.X.Max = float64(ng) - 0.4
	return nil
}

// tickMarks is a plotter drawing a short horizontal black line at (g, y[g])
// shifted by offset: the guarantee marker on a bar.
type tickMarks struct {
	y      []float64
	offset vg.Length
	width  vg.Length
}

func (m *tickMarks) style() draw.LineStyle {
	return draw.LineStyle{Color: color.Black, Width: vg.Points(2.5)}
}

func (m *tickMarks) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	for g, y := range m.y {
		if math.IsNaN(y) {
			continue
		}
		x := tx(float64(g)) + m.offset
		yy := ty(y)
		c.StrokeLine2(m.style(), x-m.width/2, yy, x+m.width/2, yy)
	}
}

func (m *tickMarks) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = 0, float64(len(m.y)-1), 0, 0
	for _, y := range m.y {
		if !math.IsNaN(y) {
			ymax = math.Max(ymax, y)
		}
	}
	return
}

func (m *tickMarks) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(m.style(), c.Min.X, y, c.Max.X, y)
}

// tenantsPlot: per tenant, bars of mean achieved, mean ideal and mean
// guarantee.
func tenantsPlot(r *eval.Report) (*figure, error) {
	f := newFigure(plotTitle(r, "mean throughput per tenant"), "tenant", "throughput"+unitLabel(r.Units))
	names := make([]string, len(r.Tenants))
	vals := [][]float64{make([]float64, len(r.Tenants)), make([]float64, len(r.Tenants)), make([]float64, len(r.Tenants))}
	for i, t := range r.Tenants {
		names[i] = t.Name
		vals[0][i], vals[1][i], vals[2][i] = t.MeanThroughput, t.IdealThroughput, t.Guarantee
	}
	cols := []color.Color{palette[0], palette[4], color.Gray{Y: 0xa0}}
	if err := groupedBars(f, names, []string{"achieved", "ideal", "guarantee"}, vals, nil, cols); err != nil {
		return nil, err
	}
	return f, nil
}

// fctPlot: per-tenant CDF of flow completion times (log x-axis when they
// span more than a decade and are all positive).
func fctPlot(r *eval.Report) (*figure, error) {
	f := newFigure(plotTitle(r, "flow completion times"), "flow completion time (s)", "fraction of flows (CDF)")
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, t := range r.Tenants {
		if len(t.FCTs) > 0 {
			lo = math.Min(lo, t.FCTs[0])
			hi = math.Max(hi, t.FCTs[len(t.FCTs)-1])
		}
	}
	logx := lo > 0 && hi/lo > 10
	if logx {
		f.p.X.Scale = plot.LogScale{}
		f.p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	f.p.Y.Min, f.p.Y.Max = 0, 1
	for i, t := range r.Tenants {
		n := len(t.FCTs)
		if n == 0 {
			continue
		}
		step := max(1, n/maxPoints)
		var xy plotter.XYs
		for k := 0; k < n; k += step {
			xy = append(xy, plotter.XY{X: t.FCTs[k], Y: float64(k+1) / float64(n)})
		}
		if xy[len(xy)-1].Y != 1 {
			xy = append(xy, plotter.XY{X: t.FCTs[n-1], Y: 1})
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.PostStep
		l.Color = colour(i)
		l.Width = vg.Points(1.5)
		f.p.Add(l)
		f.add(t.Name, l)
	}
	return f, nil
}

// Line is one line of a LinePlot: y against x. Lines with the same Name
// share a colour and one legend entry (the first of them is its sample),
// so a quantity and a related one (dashed) read as one series.
type Line struct {
	Name   string
	X, Y   []float64
	Dashed bool // dashed, without point markers; else solid with points
}

// LinePlot is a figure of lines, such as a measure against a parameter
// swept, one line per mechanism.
type LinePlot struct {
	Title, XLabel, YLabel string
	// YMin and YMax fix the y axis when YMax > YMin (default: from the
	// data, from 0, with headroom).
	YMin, YMax float64
	// XTicks and YTicks, when set, are the labelled ticks (and grid lines)
	// of the axes (default: chosen from the range).
	XTicks, YTicks []float64
	Lines          []Line
}

// WriteLinePlot draws p into dir/base.png and dir/base.svg (dir created if
// needed) in the style of the report's plots; on error nothing it wrote is
// left behind.
func WriteLinePlot(dir, base string, p LinePlot) error {
	f, err := linePlot(p)
	if err != nil {
		return fmt.Errorf("report: %s: %w", base, err)
	}
	files, err := f.files(base)
	if err != nil {
		return err
	}
	return writeFiles(dir, files)
}

func linePlot(lp LinePlot) (*figure, error) {
	f := newFigure(lp.Title, lp.XLabel, lp.YLabel)
	var names []string
	for _, ln := range lp.Lines {
		if len(ln.X) != len(ln.Y) {
			return nil, fmt.Errorf("line %q: %d x values, %d y values", ln.Name, len(ln.X), len(ln.Y))
		}
		xy := make(plotter.XYs, len(ln.X))
		for i := range ln.X {
			xy[i] = plotter.XY{X: ln.X[i], Y: ln.Y[i]}
		}
		i := slices.Index(names, ln.Name)
		first := i < 0
		if first {
			i = len(names)
			names = append(names, ln.Name)
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", ln.Name, err)
		}
		l.Color = colour(i)
		l.Width = vg.Points(1.5)
		thumbs := []plot.Thumbnailer{l}
		f.p.Add(l)
		if ln.Dashed {
			l.Width = vg.Points(1.2)
			l.Dashes = dashes
		} else {
			s, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, fmt.Errorf("line %q: %w", ln.Name, err)
			}
			s.Color = colour(i)
			s.Shape = draw.CircleGlyph{}
			s.Radius = vg.Points(2.5)
			f.p.Add(s)
			thumbs = append(thumbs, s)
		}
		if first {
			f.add(ln.Name, thumbs...)
		}
	}
	for _, a := range []struct {
		axis  *plot.Axis
		ticks []float64
	}{{&f.p.X, lp.XTicks}, {&f.p.Y, lp.YTicks}} {
		if len(a.ticks) == 0 {
			continue
		}
		ts := make(plot.ConstantTicks, len(a.ticks))
		for i, v := range a.ticks {
			ts[i] = plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)}
		}
		a.axis.Tick.Marker = ts
	}
	if lp.YMax > lp.YMin {
		f.p.Y.Min, f.p.Y.Max = lp.YMin, lp.YMax
	} else {
		f.p.Y.Min = math.Min(f.p.Y.Min, 0)
		f.headroom()
	}
	return f, nil
}
