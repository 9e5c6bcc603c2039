package drx_test

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/bulkhead-dc/bulkhead/mech/drx"
)

// trace is Fig. 5's data, one value per second 0..65 s: each interfering
// VME's cluster-wide price and mean cap over its VMs, and Nectere's
// degradation as the platform manager measured it (NaN while idle).
type trace struct {
	price, cap map[string][]float64
	pd         []float64
}

func traceOf(t *testing.T, policy string, params map[string]any) trace {
	t.Helper()
	rec := &drx.Recorder{}
	simulateWith(t, "drx-symmetric.yaml", policy, params, rec, nil)
	n := int(to/time.Second) + 1
	tr := trace{price: map[string][]float64{}, cap: map[string][]float64{}, pd: make([]float64, n)}
	vms := map[string]map[string]float64{} // tenant → VM → cap
	for _, tn := range []string{"Hadoop", "Linpack"} {
		tr.price[tn] = make([]float64, n)
		tr.cap[tn] = make([]float64, n)
		vms[tn] = map[string]float64{}
	}
	for i := range tr.pd {
		tr.pd[i] = math.NaN()
	}
	price := map[string]float64{"Hadoop": 1, "Linpack": 1}
	ev := rec.Events()
	k := 0
	for s := 0; s < n; s++ {
		for ; k < len(ev) && ev[k].T <= time.Duration(s)*time.Second; k++ {
			e := ev[k]
			switch {
			case e.Kind == drx.EventPrice && e.Host == "":
				price[e.Tenant] = e.Value
			case e.Kind == drx.EventCap && vms[e.Tenant] != nil:
				vms[e.Tenant][e.VM] = e.Value
			case e.Kind == drx.EventDegradation && e.Host == "" && e.Tenant == "Nectere":
				tr.pd[s] = e.Value
			}
		}
		for tn, caps := range vms {
			tr.price[tn][s] = price[tn]
			sum := 0.0
			for _, c := range caps {
				sum += c
			}
			// 32 VMs each; those never capped are at 100.
			tr.cap[tn][s] = (sum + 100*float64(32-len(caps))) / 32
		}
	}
	return tr
}

func TestFig5PricesAndCaps(t *testing.T) {
	for _, policy := range []string{"drx-eb-dist", "drx-hb-dist"} {
		tr := traceOf(t, policy, nil)
		var b strings.Builder
		fmt.Fprintf(&b, "%s (symmetric): t, Nectere degradation %%, price and mean cap of Hadoop / Linpack\n", policy)
		for s := range tr.pd {
			if s < int(from/time.Second) || (s > 45 && s%5 != 0) {
				continue
			}
			fmt.Fprintf(&b, "%3ds %6.1f   %5.2f %5.1f   %5.2f %5.1f\n", s, 100*tr.pd[s],
				tr.price["Hadoop"][s], tr.cap["Hadoop"][s], tr.price["Linpack"][s], tr.cap["Linpack"][s])
		}
		t.Log("\n" + b.String())
		for _, tn := range []string{"Hadoop", "Linpack"} {
			p, c := tr.price[tn], tr.cap[tn]
			for s := 1; s < len(p); s++ {
				if p[s] < p[s-1] || c[s] > c[s-1]+1e-9 {
					t.Errorf("%s: %s's price fell or cap rose at %d s", policy, tn, s)
				}
				if time.Duration(s)*time.Second <= from && (p[s] != 1 || c[s] != 100) {
					t.Errorf("%s: %s priced %g, capped %g at %d s, before Nectere runs", policy, tn, p[s], c[s], s)
				}
			}
			if p[len(p)-1] <= 1 || c[len(c)-1] >= 100 {
				t.Errorf("%s: %s never priced up or capped", policy, tn)
			}
		}
		// Once the prices stop rising, Nectere is within its SLA.
		last := 0
		for s := 1; s < len(tr.pd); s++ {
			if tr.price["Hadoop"][s] != tr.price["Hadoop"][s-1] || tr.price["Linpack"][s] != tr.price["Linpack"][s-1] {
				last = s
			}
		}
		for s := last + 2; s < len(tr.pd); s++ {
			if tr.pd[s] > 0.15 {
				t.Errorf("%s: Nectere degraded %.1f%% at %d s, after the last price change (%d s)", policy, 100*tr.pd[s], s, last)
			}
		}
		if *outDir != "" {
			if err := writeFig5(*outDir, policy, tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// writeFig5 writes DIR/fig5-<policy>.csv and .png (price, cap and
// Nectere's degradation over time).
func writeFig5(dir, policy string, tr trace) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fig5: %w", err)
	}
	var b strings.Builder
	b.WriteString("t_s,nectere_degradation_pct,hadoop_price,hadoop_cap_pct,linpack_price,linpack_cap_pct\n")
	for s := range tr.pd {
		fmt.Fprintf(&b, "%d,%.3f,%.4f,%.2f,%.4f,%.2f\n", s, 100*tr.pd[s], tr.price["Hadoop"][s], tr.cap["Hadoop"][s], tr.price["Linpack"][s], tr.cap["Linpack"][s])
	}
	base := filepath.Join(dir, "fig5-"+policy)
	if err := os.WriteFile(base+".csv", []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("fig5: %w", err)
	}
	line := func(p *plot.Plot, name string, y []float64, scale float64, c color.Color, dashed bool) error {
		var xy plotter.XYs
		for s, v := range y {
			if time.Duration(s)*time.Second >= from-5*time.Second && !math.IsNaN(v) {
				xy = append(xy, plotter.XY{X: float64(s), Y: v * scale})
			}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = c
		l.Width = vg.Points(2)
		if dashed {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(name, l)
		return nil
	}
	blue, orange, grey := color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{80, 80, 80, 255}
	caps := plot.New()
	caps.Title.Text = "DRX Fig. 5 (" + policy + ", symmetric): caps and Nectere's degradation"
	caps.X.Label.Text = "time (s)"
	caps.Y.Label.Text = "%"
	caps.Y.Min, caps.Y.Max = 0, 105
	caps.Legend.Top = true
	prices := plot.New()
	prices.Title.Text = "DRX Fig. 5 (" + policy + ", symmetric): VME prices"
	prices.X.Label.Text = "time (s)"
	prices.Y.Label.Text = "price (Resos/MTU)"
	prices.Legend.Top = true
	prices.Legend.Left = true
	sla := make([]float64, len(tr.pd))
	for i := range sla {
		sla[i] = 15
	}
	keys := []string{"Hadoop", "Linpack"}
	sort.Strings(keys)
	for i, err := range []error{
		line(caps, "Hadoop cap", tr.cap["Hadoop"], 1, blue, false),
		line(caps, "Linpack cap", tr.cap["Linpack"], 1, orange, false),
		line(caps, "Nectere degradation", tr.pd, 100, grey, false),
		line(caps, "SLA 15%", sla, 1, grey, true),
		line(prices, "Hadoop price", tr.price["Hadoop"], 1, blue, false),
		line(prices, "Linpack price", tr.price["Linpack"], 1, orange, false),
	} {
		if err != nil {
			return fmt.Errorf("fig5: line %d: %w", i, err)
		}
	}
	if err := caps.Save(8*vg.Inch, 4*vg.Inch, base+"-caps.png"); err != nil {
		return fmt.Errorf("fig5: %w", err)
	}
	if err := prices.Save(8*vg.Inch, 4*vg.Inch, base+"-prices.png"); err != nil {
		return fmt.Errorf("fig5: %w", err)
	}
	return nil
}

// TestFig5ResosSensitivity: with Resos enough for every VM to use its
// host's whole link both ways for the epoch (8.5 times the default fair
// share), no VME has overspent when Nectere starts, β_C ≈ EL/RL stays
// near or below 1 and the caps fall in smaller steps, as in the paper's
// Fig. 5.
func TestFig5ResosSensitivity(t *testing.T) {
	resos := 2 * 32e9 / 8 * 60 / drx.MTU
	for _, policy := range []string{"drx-eb-dist", "drx-hb-dist"} {
		tr := traceOf(t, policy, map[string]any{"resos": resos})
		end := len(tr.pd) - 1
		var b strings.Builder
		fmt.Fprintf(&b, "%s, resos %.4g per VM: t, Nectere degradation %%, price and mean cap of Hadoop / Linpack\n", policy, resos)
		for s := int(from / time.Second); s <= end; s++ {
			if s > 45 && s%5 != 0 {
				continue
			}
			fmt.Fprintf(&b, "%3ds %6.1f   %5.2f %5.1f   %5.2f %5.1f\n", s, 100*tr.pd[s],
				tr.price["Hadoop"][s], tr.cap["Hadoop"][s], tr.price["Linpack"][s], tr.cap["Linpack"][s])
		}
		t.Log("\n" + b.String())
		for _, tn := range []string{"Hadoop", "Linpack"} {
			if c := tr.cap[tn][end]; c <= 25 || c >= 100 {
				t.Errorf("%s: %s's final cap %.1f, want between the floor and 100", policy, tn, c)
			}
		}
		if *outDir != "" {
			if err := writeFig5(*outDir, policy+"-resos", tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range []string{"drx-eb-dist", "drx-hb-dist"} {
		in := simulateWith(t, "drx-symmetric.yaml", p, map[string]any{"resos": resos}, nil, nil)
		var row []string
		for _, tn := range tenants {
			row = append(row, fmt.Sprintf("%s %.1f%%", tn, 100*degradation(t, in, tn, from, to)))
		}
		t.Logf("%s, resos %.4g: degradation over Nectere's run: %s", p, resos, strings.Join(row, ", "))
		if d := degradation(t, in, "Nectere", from, to); d > sla {
			t.Errorf("%s with ample Resos: Nectere degraded %.1f%%", p, 100*d)
		}
	}
}
