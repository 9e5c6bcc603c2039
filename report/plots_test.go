package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteLinePlot: a line figure is written as PNG and SVG, one legend
// entry per name (a dashed line sharing a name adds none), with the ticks
// asked for; lines whose x and y differ in length fail and leave nothing.
func TestWriteLinePlot(t *testing.T) {
	x := []float64{0, 10, 20}
	for _, c := range []struct {
		name    string
		lines   []Line
		entries int    // legend entries
		err     string // "" : no error
	}{
		{"solid and dashed share an entry", []Line{
			{Name: "alpha", X: x, Y: []float64{1, 0.9, 0.8}},
			{Name: "beta", X: x, Y: []float64{1, 1, 1}},
			{Name: "alpha", X: x, Y: []float64{0.5, 0.4, 0.3}, Dashed: true},
		}, 2, ""},
		{"x and y lengths differ", []Line{{Name: "alpha", X: x, Y: []float64{1}}}, 0, "3 x values, 1 y values"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := LinePlot{Title: "t", XLabel: "x", YLabel: "y", YMin: 0, YMax: 1.05, XTicks: x, Lines: c.lines}
			dir := filepath.Join(t.TempDir(), "out")
			err := WriteLinePlot(dir, "fig", p)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				if _, err := os.Stat(dir); err == nil {
					t.Errorf("%s left behind", dir)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, ext := range []string{"png", "svg"} {
				if fi, err := os.Stat(filepath.Join(dir, "fig."+ext)); err != nil || fi.Size() == 0 {
					t.Errorf("fig.%s: %v", ext, err)
				}
			}
			f, err := linePlot(p)
			if err != nil {
				t.Fatal(err)
			}
			if f.n != c.entries {
				t.Errorf("%d legend entries, want %d", f.n, c.entries)
			}
			svg, err := os.ReadFile(filepath.Join(dir, "fig.svg"))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{">alpha<", ">beta<", ">20<"} {
				if !strings.Contains(string(svg), s) {
					t.Errorf("fig.svg has no %s", s)
				}
			}
		})
	}
}
