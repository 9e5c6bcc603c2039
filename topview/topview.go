// Package topview renders `bulkhead top`: the controller's tenant table
// for a terminal, refreshed in place — every tenant's guarantee, what it
// achieved in the latest interval and over the last frames (a sparkline),
// its compliance so far; tenants below their guarantee first and marked;
// the agents' state in the header.
package topview

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
)

// History is how many frames of a tenant's achieved rate the sparkline
// shows.
const History = 30

// View keeps what earlier frames saw (the sparklines' history).
type View struct {
	history map[string][]float64
}

// New makes a view with no history.
func New() *View { return &View{history: map[string][]float64{}} }

// Frame is what one refresh shows.
type Frame struct {
	At      time.Time
	Tenants []api.Object // KindTenant objects with their status
	Hosts   []api.Object // KindHost objects with their status
	// Color marks tenants below their guarantee in reverse video (for a
	// terminal).
	Color bool
}

// Render writes a frame and records its achieved rates in the history.
func (v *View) Render(w io.Writer, f Frame) error {
	type row struct {
		name          string
		vms           int
		st            api.TenantStatus
		ratio         float64 // achieved / guarantee
		compliance    float64
		hasCompliance bool
	}
	var rows []row
	below := 0
	seen := map[string]bool{}
	for _, o := range f.Tenants {
		ts, ok := o.Spec.(*api.TenantSpec)
		if !ok {
			continue
		}
		var st api.TenantStatus
		if s, ok := o.Status.(*api.TenantStatus); ok && s != nil {
			st = *s
		}
		r := row{name: o.Name(), vms: len(ts.VMs), st: st, ratio: math.NaN()}
		if st.Guarantee > 0 {
			r.ratio = st.Achieved / st.Guarantee
		}
		if st.Compliance != nil {
			r.compliance, r.hasCompliance = *st.Compliance, true
		}
		if st.Below {
			below++
		}
		h := append(v.history[r.name], st.Achieved)
		if len(h) > History {
			h = h[len(h)-History:]
		}
		v.history[r.name] = h
		seen[r.name] = true
		rows = append(rows, r)
	}
	for name := range v.history {
		if !seen[name] {
			delete(v.history, name) // a deleted tenant
		}
	}
	// Below their guarantee first, then the lowest compliance, then by name.
	slices.SortFunc(rows, func(a, b row) int {
		if a.st.Below != b.st.Below {
			if a.st.Below {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(complianceKey(a.hasCompliance, a.compliance), complianceKey(b.hasCompliance, b.compliance)); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})

	connected, silent := 0, 0
	for _, o := range f.Hosts {
		hs, _ := o.Status.(*api.HostStatus)
		switch {
		case hs == nil || !hs.Connected:
		case hs.LastReport == nil || f.At.Sub(*hs.LastReport) > 10*time.Second:
			connected++
			silent++
		default:
			connected++
		}
	}
	fmt.Fprintf(w, "bulkhead top — %s   tenants %d, below their guarantee %d   agents %d of %d connected",
		f.At.Format("15:04:05"), len(rows), below, connected, len(f.Hosts))
	if silent > 0 {
		fmt.Fprintf(w, ", %d silent", silent)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tTENANT\tVMS\tGUARANTEE\tACHIEVED\t%\tCOMPLIANCE\tLAST "+fmt.Sprint(History)+" FRAMES\t")
	for _, r := range rows {
		mark, on, off := " ", "", ""
		if r.st.Below {
			mark = "!"
			if f.Color {
				on, off = "\x1b[7m", "\x1b[0m"
			}
		}
		pct := "-"
		if !math.IsNaN(r.ratio) {
			pct = fmt.Sprintf("%.0f", 100*r.ratio)
		}
		comp := "-"
		if r.hasCompliance {
			comp = fmt.Sprintf("%.1f%%", 100*r.compliance)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", on, mark, r.name, r.vms, rate(r.st.Guarantee), rate(r.st.Achieved),
			pct, comp, Sparkline(v.history[r.name], r.st.Guarantee), off)
	}
	return tw.Flush()
}

func complianceKey(has bool, c float64) float64 {
	if !has {
		return 2 // not judged yet: after every judged tenant
	}
	return c
}

// sparks are the levels of a sparkline, lowest first.
var sparks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values on a scale from 0 to the larger of the
// guarantee and the highest value, so that a tenant at its guarantee sits
// at the same height whatever its rate.
func Sparkline(values []float64, guarantee float64) string {
	top := guarantee
	for _, x := range values {
		top = math.Max(top, x)
	}
	var b strings.Builder
	for _, x := range values {
		i := 0
		if top > 0 && x > 0 {
			i = int(math.Round(x / top * float64(len(sparks)-1)))
		}
		b.WriteRune(sparks[min(max(i, 0), len(sparks)-1)])
	}
	return b.String()
}

// rate formats bits/s.
func rate(bps float64) string {
	switch {
	case bps <= 0:
		return "-"
	case bps >= 1e9:
		return fmt.Sprintf("%.2f Gbps", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.1f Mbps", bps/1e6)
	default:
		return fmt.Sprintf("%.0f kbps", bps/1e3)
	}
}
