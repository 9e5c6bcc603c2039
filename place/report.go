package place

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/units"
)

// Report is the result of a stream of requests (`bulkhead place`): every
// event, the final link reservations and per-port tenant counts, and a
// summary. Its JSON form (JSON) is the command's -o output; rates are in
// bits/s.
type Report struct {
	Algorithm      string         `json:"algorithm"`
	Topology       string         `json:"topology"`
	Hierarchical   bool           `json:"hierarchical"`
	Servers        int            `json:"servers"`
	SlotsPerServer int            `json:"slots_per_server"`
	Seed           int64          `json:"seed"`
	Reserved       []string       `json:"reserved_from_scenario,omitempty"`
	Events         []ReportEvent  `json:"events"`
	Links          []ReportLink   `json:"links"`
	Ports          ReportPorts    `json:"ports"`
	Summary        ReportSummary  `json:"summary"`
	Tenants        []ReportTenant `json:"tenants"`
}

// ReportEvent is one Event: an arrival, accepted with its layout or
// rejected with the resource that ran out, or a departure.
type ReportEvent struct {
	Time          float64      `json:"time"`
	Tenant        string       `json:"tenant"`
	Event         string       `json:"event"` // accepted, rejected, departed
	VMs           int          `json:"vms,omitempty"`
	Layer         *int         `json:"layer,omitempty"`
	Root          string       `json:"root,omitempty"`
	Candidates    int          `json:"candidates,omitempty"`
	BandwidthCost float64      `json:"bandwidth_cost,omitempty"`
	QueueCost     int          `json:"queue_cost,omitempty"`
	Alpha         *float64     `json:"alpha,omitempty"`
	Compact       bool         `json:"compact,omitempty"`
	Layout        []ReportVM   `json:"layout,omitempty"`
	Reservations  []ReportRate `json:"reservations,omitempty"`
	Resource      string       `json:"resource,omitempty"` // link, slots
	Reason        string       `json:"reason,omitempty"`
	Link          string       `json:"link,omitempty"`       // rejected: the link that ran out,
	Load          float64      `json:"load,omitempty"`       // what it would carry,
	Capacity      float64      `json:"capacity,omitempty"`   // its capacity
	Need          int          `json:"need_slots,omitempty"` // rejected: slots needed,
	Free          int          `json:"free_slots,omitempty"` // usable free slots
}

// ReportVM is a placed VM and its hose.
type ReportVM struct {
	Name   string  `json:"name"`
	Server string  `json:"server"`
	In     float64 `json:"in"`
	Out    float64 `json:"out"`
}

// ReportRate is a tenant's reservation on one link.
type ReportRate struct {
	Link string  `json:"link"`
	Rate float64 `json:"rate"`
}

// ReportTenant is a tenant placed at the end, its layout as "s1×4 s2×2".
type ReportTenant struct {
	Name   string `json:"name"`
	VMs    int    `json:"vms"`
	Layout string `json:"layout"`
}

// ReportLink is the final reservation on a link.
type ReportLink struct {
	Link     string        `json:"link"`
	Capacity float64       `json:"capacity"`
	Reserved float64       `json:"reserved"`
	Tenants  []ReportShare `json:"tenants"`
}

// ReportShare is what one tenant reserves on a ReportLink.
type ReportShare struct {
	Tenant string  `json:"tenant"`
	Rate   float64 `json:"rate"`
}

// ReportPorts counts the tenants on every port (PortCount) against the
// queues of a switch port.
type ReportPorts struct {
	Queues      int             `json:"queues"`
	SwitchPorts int             `json:"switch_ports"`
	MaxTenants  int             `json:"max_tenants"`
	OverQueues  int             `json:"over_queues"` // switch ports with more tenants than queues
	Histogram   []PortHistogram `json:"histogram"`   // switch ports by tenant count
	PerPort     []PortTenants   `json:"per_port"`    // every port (switch or NIC) with tenants
}

// PortHistogram is the number of switch ports with a number of tenants.
type PortHistogram struct {
	Tenants int `json:"tenants"`
	Ports   int `json:"ports"`
}

// PortTenants is the number of tenants on one port.
type PortTenants struct {
	Port    string `json:"port"`
	Switch  bool   `json:"switch"`
	Tenants int    `json:"tenants"`
}

// ReportSummary counts the events and gives the final load and the time
// placement took.
type ReportSummary struct {
	Requests   int            `json:"requests"`
	Accepted   int            `json:"accepted"`
	Rejected   int            `json:"rejected"`
	ByResource map[string]int `json:"rejected_by_resource"`
	Departed   int            `json:"departed"`
	Current    int            `json:"current_tenants"`
	SlotLoad   float64        `json:"slot_load"`
	LinkLoad   float64        `json:"link_load"`
	MeanTimeUS float64        `json:"place_time_mean_us"`
	MaxTimeUS  float64        `json:"place_time_max_us"`
}

// Line is the summary in one line.
func (s ReportSummary) Line() string {
	return fmt.Sprintf("%d requests: %d accepted, %d rejected (link %d, slots %d), %d departed; %d tenants placed, %.1f%% of slots and %.1f%% of link capacity reserved; placement %.0f µs mean, %.0f µs max",
		s.Requests, s.Accepted, s.Rejected, s.ByResource["link"], s.ByResource["slots"], s.Departed, s.Current,
		100*s.SlotLoad, 100*s.LinkLoad, s.MeanTimeUS, s.MaxTimeUS)
}

// ReportOptions describe the run a Report is about, as given to the Placer.
type ReportOptions struct {
	Algorithm Algorithm
	Topology  spec.Topology // described in Report.Topology
	Slots     int           // VM slots per server
	Seed      int64         // ECMP seed of the routes
	Queues    int           // queues per switch port, for the port counts
	Reserved  []string      // tenants reserved before the stream (a scenario's)
}

// BuildReport reports the events of a stream (Run) and the placer's state
// after them.
func BuildReport(p *Placer, events []Event, o ReportOptions) *Report {
	rep := &Report{
		Algorithm: string(o.Algorithm), Topology: describeTopology(o.Topology), Hierarchical: p.Hierarchical(),
		Servers: len(p.Topology().Servers()), SlotsPerServer: o.Slots, Seed: o.Seed, Reserved: o.Reserved,
		Events: []ReportEvent{}, Links: []ReportLink{}, Tenants: []ReportTenant{},
	}
	sum := &rep.Summary
	sum.ByResource = map[string]int{"link": 0, "slots": 0}
	var total time.Duration
	for _, e := range events {
		ev := ReportEvent{Time: e.Time, Tenant: e.Tenant, VMs: e.VMs}
		switch {
		case e.Departure:
			ev.Event = "departed"
			sum.Departed++
		case e.Rejection != nil:
			ev.Event, ev.Resource = "rejected", e.Rejection.Resource
			ev.Reason = strings.TrimPrefix(e.Rejection.Error(), fmt.Sprintf("tenant %q: rejected: ", e.Tenant))
			rj := e.Rejection
			ev.Link, ev.Load, ev.Capacity, ev.Need, ev.Free = rj.Link, rj.Load, rj.Capacity, rj.Need, rj.Free
			sum.Rejected++
			sum.ByResource[e.Rejection.Resource]++
		default:
			pl := e.Placement
			layer := pl.Layer
			ev.Event, ev.VMs, ev.Layer, ev.Root = "accepted", len(pl.VMs), &layer, pl.Root
			ev.Candidates, ev.BandwidthCost, ev.QueueCost, ev.Compact = pl.Candidates, pl.BandwidthCost, pl.QueueCost, pl.Compact
			if o.Algorithm == QShare && !pl.Compact {
				a := pl.Alpha
				ev.Alpha = &a
			}
			for _, v := range pl.VMs {
				ev.Layout = append(ev.Layout, ReportVM(v))
			}
			for _, r := range pl.Links {
				ev.Reservations = append(ev.Reservations, ReportRate{Link: r.Name, Rate: r.Rate})
			}
			sum.Accepted++
		}
		if !e.Departure {
			sum.Requests++
			total += e.Elapsed
			sum.MaxTimeUS = max(sum.MaxTimeUS, float64(e.Elapsed)/1e3)
		}
		rep.Events = append(rep.Events, ev)
	}
	if sum.Requests > 0 {
		sum.MeanTimeUS = float64(total) / 1e3 / float64(sum.Requests)
	}
	for _, pl := range p.Tenants() {
		servers := make([]string, len(pl.VMs))
		for i, v := range pl.VMs {
			servers[i] = v.Server
		}
		rep.Tenants = append(rep.Tenants, ReportTenant{Name: pl.Tenant, VMs: len(pl.VMs), Layout: compactLayout(servers)})
	}
	sum.Current = len(rep.Tenants)
	sum.SlotLoad, sum.LinkLoad = p.Load()
	for _, r := range p.Links() {
		l := ReportLink{Link: r.Name, Capacity: r.Capacity, Reserved: r.Total}
		for _, t := range r.Tenants {
			l.Tenants = append(l.Tenants, ReportShare(t))
		}
		rep.Links = append(rep.Links, l)
	}
	ports := &rep.Ports
	ports.Queues = o.Queues
	hist := map[int]int{}
	ports.PerPort = []PortTenants{}
	for _, pc := range p.Ports() {
		if pc.Switch {
			ports.SwitchPorts++
			hist[pc.Tenants]++
			ports.MaxTenants = max(ports.MaxTenants, pc.Tenants)
			if pc.Tenants > o.Queues {
				ports.OverQueues++
			}
		}
		if pc.Tenants > 0 {
			ports.PerPort = append(ports.PerPort, PortTenants{Port: pc.Name, Switch: pc.Switch, Tenants: pc.Tenants})
		}
	}
	for k, n := range hist {
		ports.Histogram = append(ports.Histogram, PortHistogram{Tenants: k, Ports: n})
	}
	sort.Slice(ports.Histogram, func(i, j int) bool { return ports.Histogram[i].Tenants < ports.Histogram[j].Tenants })
	return rep
}

// describeTopology names a topology for reports.
func describeTopology(t spec.Topology) string {
	switch {
	case t.Kind == spec.TopoFatTree && t.FatTree != nil:
		return fmt.Sprintf("fat-tree k=%d, %s links", t.FatTree.K, t.FatTree.Link)
	case t.Kind == spec.TopoTwoTier && t.TwoTier != nil:
		tt := t.TwoTier
		core := "core " + tt.Core.String()
		if tt.Core == 0 {
			core = fmt.Sprintf("oversubscription %g", tt.Oversubscription)
		}
		return fmt.Sprintf("two-tier %d racks × %d servers, edge %s, %s", tt.Racks, tt.ServersPerRack, tt.Edge, core)
	case t.Kind == spec.TopoExplicit && t.Explicit != nil:
		return fmt.Sprintf("explicit, %d nodes, %d links", len(t.Explicit.Nodes), len(t.Explicit.Links))
	}
	return t.Kind
}

// compactLayout writes the servers of a layout's VMs as "s1×4 s2×2"
// (servers in order of first use).
func compactLayout(servers []string) string {
	var order []string
	n := map[string]int{}
	for _, s := range servers {
		if n[s] == 0 {
			order = append(order, s)
		}
		n[s]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%s×%d", s, n[s])
	}
	return strings.Join(parts, " ")
}

// JSON is the report as indented JSON, "->" in link names kept as is.
func (r *Report) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("place: report: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteTable writes the report for people: the events, the final link
// reservations, the switch ports by tenant count and the summary line.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "%s placement on %s: %d servers × %d slots, seed %d\n", r.Algorithm, r.Topology, r.Servers, r.SlotsPerServer, r.Seed)
	if len(r.Reserved) > 0 {
		fmt.Fprintf(ew, "reserved first (scenario): %s\n", strings.Join(r.Reserved, ", "))
	}
	fmt.Fprintln(ew)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "time\ttenant\tresult\tVMs\tlayer\troot\tlayout or reason")
	for _, e := range r.Events {
		switch e.Event {
		case "accepted":
			root := e.Root
			if e.Compact {
				root += " (compact)"
			}
			servers := make([]string, len(e.Layout))
			for i, v := range e.Layout {
				servers[i] = v.Server
			}
			fmt.Fprintf(tw, "%g\t%s\taccepted\t%d\t%d\t%s\t%s\n", e.Time, e.Tenant, e.VMs, *e.Layer, root, compactLayout(servers))
		case "rejected":
			fmt.Fprintf(tw, "%g\t%s\trejected\t%d\t\t\t%s\n", e.Time, e.Tenant, e.VMs, e.Reason)
		default:
			fmt.Fprintf(tw, "%g\t%s\tdeparted\t\t\t\t\n", e.Time, e.Tenant)
		}
	}
	tw.Flush()
	fmt.Fprintln(ew)
	if len(r.Links) == 0 {
		fmt.Fprintln(ew, "no link reservations")
	} else {
		fmt.Fprintln(ew, "link reservations (final):")
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "link\treserved\tcapacity\ttenants")
		for _, l := range r.Links {
			parts := make([]string, len(l.Tenants))
			for i, t := range l.Tenants {
				parts[i] = t.Tenant + " " + units.FormatRate(t.Rate)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d: %s\n", l.Link, units.FormatRate(l.Reserved), units.FormatRate(l.Capacity), len(l.Tenants), strings.Join(parts, ", "))
		}
		tw.Flush()
	}
	fmt.Fprintln(ew)
	pp := r.Ports
	hist := make([]string, len(pp.Histogram))
	for i, h := range pp.Histogram {
		hist[i] = fmt.Sprintf("%d:%d", h.Tenants, h.Ports)
	}
	fmt.Fprintf(ew, "switch ports: %d; most tenants on one port: %d; ports with more tenants than %d queues: %d\n",
		pp.SwitchPorts, pp.MaxTenants, pp.Queues, pp.OverQueues)
	fmt.Fprintf(ew, "switch ports by tenant count (tenants:ports): %s\n", strings.Join(hist, " "))
	fmt.Fprintln(ew, r.Summary.Line())
	return ew.err
}

// errWriter keeps the first write error and writes nothing after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
