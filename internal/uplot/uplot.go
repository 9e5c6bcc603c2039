// Package uplot is the repository's one vendored copy of uPlot, a small
// charting library (MIT, see LICENSE and README.md), embedded in the
// binary: report.html inlines it and the controller's web UI serves it.
package uplot

import _ "embed"

var (
	//go:embed uPlot.iife.min.js
	js string
	//go:embed uPlot.min.css
	css string
	//go:embed LICENSE
	license string
)

// JS is uPlot's script (the IIFE build: it defines the global uPlot).
func JS() string { return js }

// CSS is uPlot's style sheet.
func CSS() string { return css }

// License is uPlot's licence text, which copies of it carry.
func License() string { return license }
