package report

import (
	"fmt"
	"image/color"
	"math"

	"github.com/bulkhead-dc/bulkhead/eval"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// AppliancePlot is the base name of the appliance throughput plot.
const AppliancePlot = "appliances"

// appliancePlot draws, per appliance, every tenant's token throughput over
// time with its guarantee dashed, and the capacity estimate in black.
func appliancePlot(r *eval.Report) (*figure, error) {
	f := newFigure(plotTitle(r, "appliance throughput"), "time (s)", "throughput"+unitLabel(r.TokenUnits))
	f.p.Y.Min = 0
	for i, a := range r.Appliances {
		if len(a.Series) != len(r.Times) {
			return nil, fmt.Errorf("report: appliance %s tenant %s: time series missing", a.Appliance, a.Tenant)
		}
		l, err := plotter.NewLine(downsample(r.Times, a.Series))
		if err != nil {
			return nil, err
		}
		l.Color = colour(i)
		l.Width = vg.Points(1.5)
		f.p.Add(l)
		f.add(a.Tenant+" @ "+a.Appliance, l)
		if a.Guarantee > 0 {
			g, err := plotter.NewLine(plotter.XYs{{X: 0, Y: a.Guarantee}, {X: r.DurationS, Y: a.Guarantee}})
			if err != nil {
				return nil, err
			}
			g.Color = colour(i)
			g.Width = vg.Points(1.2)
			g.Dashes = dashes
			f.p.Add(g)
		}
	}
	for _, u := range r.ApplianceUse {
		if u.Capacity == nil || len(r.Estimates) == 0 {
			continue
		}
		// the true capacity for the mix served, where the controller
		// estimates it (points where the appliance was idle are left out)
		var xy plotter.XYs
		for s, c := range u.Capacity {
			if c > 0 {
				xy = append(xy, plotter.XY{X: r.Times[s], Y: c})
			}
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: 140}
		l.Width = vg.Points(1.2)
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		f.p.Add(l)
		f.add("capacity for the mix served "+u.Appliance, l)
	}
	for _, e := range r.Estimates {
		if len(e.Times) == 0 {
			continue
		}
		l, err := plotter.NewLine(downsample(e.Times, e.Tokens))
		if err != nil {
			return nil, err
		}
		l.Color = color.Black
		l.Width = vg.Points(1.8)
		f.p.Add(l)
		f.add("capacity estimate "+e.Appliance, l)
	}
	f.p.X.Min = math.Min(f.p.X.Min, 0)
	f.headroom()
	return f, nil
}
