package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
	"github.com/bulkhead-dc/bulkhead/units"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

type placeFlags struct {
	topology, scenario, tenants string
	algorithm                   string
	slots, k, queues            int
	seed                        int64
	weight                      string
	out                         string
}

func newPlaceCmd() *cobra.Command {
	f := &placeFlags{}
	cmd := &cobra.Command{
		Use:   "place (--topology FILE | --scenario FILE) --tenants FILE",
		Short: "Admit and place a stream of tenant requests (Oktopus or QShare)",
		Long: `Place a stream of tenant requests with hose-model guarantees on a
topology with VM slots per server, admitting a tenant only if every link can
carry its hose reservations on the routes the simulator uses (ECMP by VM
pair, --seed), on top of what is already reserved.

  --topology FILE   a topology: a file with a topology: section (a scenario,
                    whose other fields are ignored) or the section itself
                    (kind: fat-tree, fat_tree: {k: 16, link: 10Gbps})
  --scenario FILE   a scenario: its topology, its seed, and its tenants,
                    whose fixed placements are reserved first
  --tenants FILE    the requests, YAML or JSON: a list of
                      {name, vms: N | [{name, guarantee, in, out}],
                       guarantee | in/out, best_effort, arrival, departure, wcs}
                    in order of arrival (ties in file order); a departure
                    releases the tenant's slots and bandwidth

Algorithms (docs/placement.md):
  oktopus  the smallest subtree that fits (server, rack, pod, whole tree),
           the first in topology order, filled greedily
  qshare   QShare Alg. 1: every group of the lowest feasible layer laid out
           with the least bandwidth, elected by a cost that weighs bandwidth
           against the tenants already on the ports (queue occupation) by
           the datacenter load; k shortest paths on random graphs

Prints every arrival (accepted with its layout, or rejected with the
resource that ran out), departures, the final per-link reservations and the
tenants per port; with -o FILE the same as JSON (written whole, or not at
all), and a one-line summary on stdout. Invalid input is reported with the
file, line and field, and a non-zero exit.`,
		Example: `  bulkhead place --topology topo.yaml --tenants tenants.yaml
  bulkhead place --scenario scenarios/pulsar-fig3-network.yaml --tenants more.json --algorithm qshare -o placed.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlace(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.topology, "topology", "", "topology file (a topology: section, or the section itself)")
	fl.StringVar(&f.scenario, "scenario", "", "scenario file: topology, seed and tenants already placed")
	fl.StringVar(&f.tenants, "tenants", "", "tenant requests, YAML or JSON (required)")
	fl.StringVar(&f.algorithm, "algorithm", string(place.Oktopus), "oktopus or qshare")
	fl.IntVar(&f.slots, "slots", place.DefaultSlots, "VM slots per server")
	fl.Int64Var(&f.seed, "seed", spec.DefaultSeed, "ECMP seed of the routes (with --topology; a scenario has its own)")
	fl.IntVar(&f.k, "k", place.DefaultK, "shortest paths per server on topologies that are not trees (qshare and oktopus)")
	fl.IntVar(&f.queues, "queues", 8, "queues per switch port, for the port report")
	fl.StringVar(&f.weight, "bandwidth-weight", "load", `qshare: weight of the bandwidth cost against queue occupation, a number in [0, 1] or "load" (the datacenter load)`)
	fl.StringVarP(&f.out, "out", "o", "", "write the result as JSON to this file (- for stdout)")
	return cmd
}

func runPlace(cmd *cobra.Command, f *placeFlags) error {
	// Flags.
	switch {
	case f.topology == "" && f.scenario == "":
		return errors.New("give --topology FILE or --scenario FILE")
	case f.topology != "" && f.scenario != "":
		return errors.New("--topology and --scenario are exclusive")
	case f.tenants == "":
		return errors.New("--tenants FILE is required")
	case f.slots < 1:
		return fmt.Errorf("--slots: expected at least 1, got %d", f.slots)
	case f.k < 1:
		return fmt.Errorf("--k: expected at least 1, got %d", f.k)
	case f.queues < 1:
		return fmt.Errorf("--queues: expected at least 1, got %d", f.queues)
	case f.scenario != "" && cmd.Flags().Changed("seed"):
		return errors.New("--seed: a scenario's own seed is used with --scenario")
	}
	alg := place.Algorithm(f.algorithm)
	if alg != place.Oktopus && alg != place.QShare {
		return fmt.Errorf("--algorithm: expected oktopus or qshare, got %q", f.algorithm)
	}
	var weight func(float64) float64
	if f.weight != "load" {
		w, err := strconv.ParseFloat(f.weight, 64)
		if err != nil || !(w >= 0 && w <= 1) {
			return fmt.Errorf("--bandwidth-weight: expected a number in [0, 1] or \"load\", got %q", f.weight)
		}
		weight = func(float64) float64 { return w }
	}

	// Inputs.
	var (
		top      *topo.Topology
		sc       *spec.Scenario
		seed     = f.seed
		topoDesc string
	)
	if f.scenario != "" {
		s, err := spec.Load(f.scenario)
		if err != nil {
			return err
		}
		if top, err = topo.FromSpec(s.Topology); err != nil {
			return fmt.Errorf("%s: %w", f.scenario, err)
		}
		if err := place.Admit(s, top); err != nil {
			return err
		}
		sc, seed, topoDesc = s, s.Seed, describeTopology(s.Topology)
	} else {
		t, err := loadTopologyFile(f.topology)
		if err != nil {
			return err
		}
		if top, err = topo.FromSpec(t); err != nil {
			return fmt.Errorf("%s: %w", f.topology, err)
		}
		topoDesc = describeTopology(t)
	}
	data, err := os.ReadFile(f.tenants)
	if err != nil {
		return fmt.Errorf("--tenants: %w", err)
	}
	reqs, err := place.ParseRequests(data, f.tenants)
	if err != nil {
		return err
	}

	// Placement.
	p, err := place.NewPlacer(top, place.Options{Algorithm: alg, Slots: f.slots, Seed: seed, K: f.k, BandwidthWeight: weight})
	if err != nil {
		return err
	}
	var reserved []string
	if sc != nil {
		for i := range sc.Tenants {
			if err := p.Reserve(&sc.Tenants[i]); err != nil {
				return &model.FieldError{File: sc.File, Path: fmt.Sprintf("tenants[%d]", i),
					Msg: fmt.Sprintf("cannot reserve with --slots %d: %v", f.slots, err)}
			}
			reserved = append(reserved, sc.Tenants[i].Name)
		}
	}
	events, err := place.Run(p, reqs)
	if err != nil {
		return err
	}
	rep := buildPlaceReport(p, f, alg, seed, topoDesc, reserved, events)

	w := cmd.OutOrStdout()
	switch f.out {
	case "":
		writePlaceTable(w, rep)
	case "-":
		js, err := marshalReport(rep)
		if err != nil {
			return err
		}
		_, err = w.Write(js)
		return err
	default:
		js, err := marshalReport(rep)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(f.out, js); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s; written to %s\n", rep.Summary.line(), f.out)
	}
	return nil
}

// marshalReport is the report as indented JSON, "->" in link names kept
// as is.
func marshalReport(rep *placeReport) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return nil, fmt.Errorf("place: report: %w", err)
	}
	return buf.Bytes(), nil
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

var (
	unknownFieldRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	lineMsgRE      = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
)

// loadTopologyFile reads a topology: a document with a topology: section
// (other fields ignored) or the section itself. Problems are
// *model.FieldErrors with the file, line where known, and field path.
func loadTopologyFile(path string) (spec.Topology, error) {
	var t spec.Topology
	data, err := os.ReadFile(path)
	if err != nil {
		return t, fmt.Errorf("--topology: %w", err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return t, yamlFieldError(err.Error(), path)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return t, &model.FieldError{File: path, Msg: "expected a mapping with a topology: section, or the section itself (kind: ...)"}
	}
	wrapped := false
	for i := 0; i < len(root.Content[0].Content); i += 2 {
		if root.Content[0].Content[i].Value == "topology" {
			wrapped = true
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if wrapped {
		var doc struct {
			Topology spec.Topology  `yaml:"topology"`
			Rest     map[string]any `yaml:",inline"`
		}
		err = dec.Decode(&doc)
		t = doc.Topology
	} else {
		err = dec.Decode(&t)
	}
	if err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			errs := make([]error, len(te.Errors))
			for i, e := range te.Errors {
				errs[i] = yamlFieldError(e, path)
			}
			return t, errors.Join(errs...)
		}
		return t, yamlFieldError(err.Error(), path)
	}
	// Validate the section as part of a scenario, keeping only its problems.
	s := spec.Scenario{Name: "place", Duration: units.Duration(time.Second), Topology: t, File: path}
	s.ApplyDefaults()
	var errs []error
	for _, fe := range model.FieldErrors(s.Validate()) {
		if strings.HasPrefix(fe.Path, "topology") {
			errs = append(errs, fe)
		}
	}
	return s.Topology, errors.Join(errs...)
}

func yamlFieldError(msg, file string) *model.FieldError {
	fe := &model.FieldError{File: file, Msg: strings.TrimPrefix(msg, "yaml: ")}
	if m := lineMsgRE.FindStringSubmatch(fe.Msg); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		fe.Msg = m[2]
	}
	if m := unknownFieldRE.FindStringSubmatch(fe.Msg); m != nil {
		fe.Msg = fmt.Sprintf("unknown field %q", m[1])
	}
	return fe
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it, so that path holds either the whole result or what it held before.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("-o: %w", err)
	}
	return nil
}

// The JSON report. Rates are in bits/s.
type placeReport struct {
	Algorithm      string        `json:"algorithm"`
	Topology       string        `json:"topology"`
	Hierarchical   bool          `json:"hierarchical"`
	Servers        int           `json:"servers"`
	SlotsPerServer int           `json:"slots_per_server"`
	Seed           int64         `json:"seed"`
	Reserved       []string      `json:"reserved_from_scenario,omitempty"`
	Events         []placeEvent  `json:"events"`
	Links          []placeLink   `json:"links"`
	Ports          placePorts    `json:"ports"`
	Summary        placeSummary  `json:"summary"`
	Tenants        []placeTenant `json:"tenants"`
}

type placeEvent struct {
	Time          float64     `json:"time"`
	Tenant        string      `json:"tenant"`
	Event         string      `json:"event"` // accepted, rejected, departed
	VMs           int         `json:"vms,omitempty"`
	Layer         *int        `json:"layer,omitempty"`
	Root          string      `json:"root,omitempty"`
	Candidates    int         `json:"candidates,omitempty"`
	BandwidthCost float64     `json:"bandwidth_cost,omitempty"`
	QueueCost     int         `json:"queue_cost,omitempty"`
	Alpha         *float64    `json:"alpha,omitempty"`
	Compact       bool        `json:"compact,omitempty"`
	Layout        []placeVM   `json:"layout,omitempty"`
	Reservations  []placeRate `json:"reservations,omitempty"`
	Resource      string      `json:"resource,omitempty"` // link, slots
	Reason        string      `json:"reason,omitempty"`
	Link          string      `json:"link,omitempty"`       // rejected: the link that ran out,
	Load          float64     `json:"load,omitempty"`       // what it would carry,
	Capacity      float64     `json:"capacity,omitempty"`   // its capacity
	Need          int         `json:"need_slots,omitempty"` // rejected: slots needed,
	Free          int         `json:"free_slots,omitempty"` // usable free slots
}

type placeVM struct {
	Name   string  `json:"name"`
	Server string  `json:"server"`
	In     float64 `json:"in"`
	Out    float64 `json:"out"`
}

type placeRate struct {
	Link string  `json:"link"`
	Rate float64 `json:"rate"`
}

type placeTenant struct {
	Name   string `json:"name"`
	VMs    int    `json:"vms"`
	Layout string `json:"layout"`
}

type placeLink struct {
	Link     string       `json:"link"`
	Capacity float64      `json:"capacity"`
	Reserved float64      `json:"reserved"`
	Tenants  []placeShare `json:"tenants"`
}

type placeShare struct {
	Tenant string  `json:"tenant"`
	Rate   float64 `json:"rate"`
}

type placePorts struct {
	Queues      int             `json:"queues"`
	SwitchPorts int             `json:"switch_ports"`
	MaxTenants  int             `json:"max_tenants"`
	OverQueues  int             `json:"over_queues"` // switch ports with more tenants than queues
	Histogram   []portHistogram `json:"histogram"`   // switch ports by tenant count
	PerPort     []portTenants   `json:"per_port"`    // every port (switch or NIC) with tenants
}

type portHistogram struct {
	Tenants int `json:"tenants"`
	Ports   int `json:"ports"`
}

type portTenants struct {
	Port    string `json:"port"`
	Switch  bool   `json:"switch"`
	Tenants int    `json:"tenants"`
}

type placeSummary struct {
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

func (s placeSummary) line() string {
	return fmt.Sprintf("%d requests: %d accepted, %d rejected (link %d, slots %d), %d departed; %d tenants placed, %.1f%% of slots and %.1f%% of link capacity reserved; placement %.0f µs mean, %.0f µs max",
		s.Requests, s.Accepted, s.Rejected, s.ByResource["link"], s.ByResource["slots"], s.Departed, s.Current,
		100*s.SlotLoad, 100*s.LinkLoad, s.MeanTimeUS, s.MaxTimeUS)
}

func buildPlaceReport(p *place.Placer, f *placeFlags, alg place.Algorithm, seed int64, desc string, reserved []string, events []place.Event) *placeReport {
	rep := &placeReport{
		Algorithm: string(alg), Topology: desc, Hierarchical: p.Hierarchical(),
		Servers: len(p.Topology().Servers()), SlotsPerServer: f.slots, Seed: seed, Reserved: reserved,
		Events: []placeEvent{}, Links: []placeLink{}, Tenants: []placeTenant{},
	}
	sum := &rep.Summary
	sum.ByResource = map[string]int{"link": 0, "slots": 0}
	var total time.Duration
	for _, e := range events {
		ev := placeEvent{Time: e.Time, Tenant: e.Tenant, VMs: e.VMs}
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
			if alg == place.QShare && !pl.Compact {
				a := pl.Alpha
				ev.Alpha = &a
			}
			for _, v := range pl.VMs {
				ev.Layout = append(ev.Layout, placeVM{Name: v.Name, Server: v.Server, In: v.In, Out: v.Out})
			}
			for _, r := range pl.Links {
				ev.Reservations = append(ev.Reservations, placeRate{Link: r.Name, Rate: r.Rate})
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
		rep.Tenants = append(rep.Tenants, placeTenant{Name: pl.Tenant, VMs: len(pl.VMs), Layout: compactLayout(pl.VMs)})
	}
	sum.Current = len(rep.Tenants)
	sum.SlotLoad, sum.LinkLoad = p.Load()
	for _, r := range p.Links() {
		l := placeLink{Link: r.Name, Capacity: r.Capacity, Reserved: r.Total}
		for _, t := range r.Tenants {
			l.Tenants = append(l.Tenants, placeShare{Tenant: t.Tenant, Rate: t.Rate})
		}
		rep.Links = append(rep.Links, l)
	}
	ports := &rep.Ports
	ports.Queues = f.queues
	hist := map[int]int{}
	ports.PerPort = []portTenants{}
	for _, pc := range p.Ports() {
		if pc.Switch {
			ports.SwitchPorts++
			hist[pc.Tenants]++
			ports.MaxTenants = max(ports.MaxTenants, pc.Tenants)
			if pc.Tenants > f.queues {
				ports.OverQueues++
			}
		}
		if pc.Tenants > 0 {
			ports.PerPort = append(ports.PerPort, portTenants{Port: pc.Name, Switch: pc.Switch, Tenants: pc.Tenants})
		}
	}
	for k, n := range hist {
		ports.Histogram = append(ports.Histogram, portHistogram{Tenants: k, Ports: n})
	}
	sort.Slice(ports.Histogram, func(i, j int) bool { return ports.Histogram[i].Tenants < ports.Histogram[j].Tenants })
	return rep
}

// compactLayout writes a layout as "s1×4 s2×2" (servers in order of first
// use).
func compactLayout(vms []place.PlacedVM) string {
	var order []string
	n := map[string]int{}
	for _, v := range vms {
		if n[v.Server] == 0 {
			order = append(order, v.Server)
		}
		n[v.Server]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%s×%d", s, n[s])
	}
	return strings.Join(parts, " ")
}

func writePlaceTable(w io.Writer, rep *placeReport) {
	fmt.Fprintf(w, "%s placement on %s: %d servers × %d slots, seed %d\n", rep.Algorithm, rep.Topology, rep.Servers, rep.SlotsPerServer, rep.Seed)
	if len(rep.Reserved) > 0 {
		fmt.Fprintf(w, "reserved first (scenario): %s\n", strings.Join(rep.Reserved, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "time\ttenant\tresult\tVMs\tlayer\troot\tlayout or reason")
	for _, e := range rep.Events {
		switch e.Event {
		case "accepted":
			root := e.Root
			if e.Compact {
				root += " (compact)"
			}
			layout := make([]place.PlacedVM, len(e.Layout))
			for i, v := range e.Layout {
				layout[i] = place.PlacedVM{Name: v.Name, Server: v.Server}
			}
			fmt.Fprintf(tw, "%g\t%s\taccepted\t%d\t%d\t%s\t%s\n", e.Time, e.Tenant, e.VMs, *e.Layer, root, compactLayout(layout))
		case "rejected":
			fmt.Fprintf(tw, "%g\t%s\trejected\t%d\t\t\t%s\n", e.Time, e.Tenant, e.VMs, e.Reason)
		default:
			fmt.Fprintf(tw, "%g\t%s\tdeparted\t\t\t\t\n", e.Time, e.Tenant)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(rep.Links) == 0 {
		fmt.Fprintln(w, "no link reservations")
	} else {
		fmt.Fprintln(w, "link reservations (final):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "link\treserved\tcapacity\ttenants")
		for _, l := range rep.Links {
			parts := make([]string, len(l.Tenants))
			for i, t := range l.Tenants {
				parts[i] = t.Tenant + " " + units.FormatRate(t.Rate)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d: %s\n", l.Link, units.FormatRate(l.Reserved), units.FormatRate(l.Capacity), len(l.Tenants), strings.Join(parts, ", "))
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	pp := rep.Ports
	hist := make([]string, len(pp.Histogram))
	for i, h := range pp.Histogram {
		hist[i] = fmt.Sprintf("%d:%d", h.Tenants, h.Ports)
	}
	fmt.Fprintf(w, "switch ports: %d; most tenants on one port: %d; ports with more tenants than %d queues: %d\n",
		pp.SwitchPorts, pp.MaxTenants, pp.Queues, pp.OverQueues)
	fmt.Fprintf(w, "switch ports by tenant count (tenants:ports): %s\n", strings.Join(hist, " "))
	fmt.Fprintln(w, rep.Summary.line())
}
