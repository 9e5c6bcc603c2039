// Package scengen generates random valid scenarios: a topology (two-tier,
// with or without oversubscription, or a small fat-tree, at 1 or 10 Gbps),
// tenants with hose guarantees that admission control accepts, and
// workloads among TCP pairs, many-to-one incasts, UDP at a rate, all-to-all
// shuffles, tenants going idle (tenant phases) and joining or leaving, and
// tenants with virtual datacenters sending open- or closed-loop requests
// to shared appliances.
//
// A scenario is a function of its Options alone (the seed among them):
// the same options give the same YAML, byte for byte. Every scenario
// Generate returns has been parsed back from its YAML (spec.Parse: the
// defaults applied, every field validated) and admitted (place.Admit), so
// `bulkhead validate` accepts the file.
//
// Guarantees are drawn first and scaled afterwards: the hose reservations
// of every tenant (place.Reservations) are linear in the guarantees, so
// scaling every guarantee by fill ÷ (the largest reservation-to-capacity
// ratio over the links) makes the most-reserved link exactly fill
// reserved (fill drawn in [0.5, 0.95]). Appliance traffic has no VM at the
// appliance's end, so for admission each appliance tenant gets a stand-in
// VM on the appliance's server whose hose carries its guaranteed requests
// and responses: the links on the way to an appliance are reserved too,
// and the scenario's own (smaller) reservations are admitted a fortiori.
// An appliance tenant's guarantee at the appliance is a share of the
// capacity the appliance has for the least favourable of its tenants'
// request mixes (model.Appliance.Capacity), so the guarantees fit whatever
// mix it serves; every appliance tenant demands more than its guarantee
// (closed loops with enough requests outstanding, open loops at a rate
// above it), so a guarantee missed is the mechanism's doing.
package scengen

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
	"gopkg.in/yaml.v3"
)

// Kind says what traffic a scenario holds.
type Kind string

// Kinds of scenarios.
const (
	// Network: tenants exchanging traffic between their VMs.
	Network Kind = "network"
	// Appliance: tenants with virtual datacenters sending requests to
	// shared appliances (key-value stores, filestores, encryption boxes).
	Appliance Kind = "appliance"
	// Mixed: both, on one topology.
	Mixed Kind = "mixed"
)

// Kinds lists the kinds, in the order of the constants.
func Kinds() []Kind { return []Kind{Network, Appliance, Mixed} }

// Size says how large a scenario is.
type Size string

// Sizes of scenarios.
const (
	// Small: 2-5 tenants on up to 16 servers (runs in tens of ms).
	Small Size = "small"
	// Medium: 3-8 tenants on up to 54 servers.
	Medium Size = "medium"
)

// Sizes lists the sizes.
func Sizes() []Size { return []Size{Small, Medium} }

// DefaultDuration is the simulated time of a generated scenario.
const DefaultDuration = 10 * time.Second

// Options are the knobs of a scenario; the zero value is a small network
// scenario of seed 0.
type Options struct {
	// Seed draws everything; it is also the scenario's seed (ECMP and
	// the workloads' random streams).
	Seed int64
	// Kind: Network (default), Appliance or Mixed.
	Kind Kind
	// Size: Small (default) or Medium.
	Size Size
	// Duration is the simulated time (default DefaultDuration); phases
	// and joins scale with it.
	Duration time.Duration
	// Mechanism is the scenario's mechanism (default none).
	Mechanism string
	// Joins lets tenants be declared during the run (tenants[].join,
	// .leave), which only mechanisms with mech.Capabilities.LiveTenants
	// can run. Without it, a tenant drawn to join at t is declared from
	// the start and idle until t (its traffic is the same).
	Joins bool
}

func (o *Options) defaults() error {
	if o.Kind == "" {
		o.Kind = Network
	}
	if !slices.Contains(Kinds(), o.Kind) {
		return fmt.Errorf("scengen: unknown kind %q (use network, appliance or mixed)", o.Kind)
	}
	if o.Size == "" {
		o.Size = Small
	}
	if !slices.Contains(Sizes(), o.Size) {
		return fmt.Errorf("scengen: unknown size %q (use small or medium)", o.Size)
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Duration < time.Second {
		return fmt.Errorf("scengen: duration %v is shorter than 1s", o.Duration)
	}
	if o.Mechanism == "" {
		o.Mechanism = spec.DefaultMechanism
	}
	return nil
}

// Name is the scenario name Generate gives these options:
// gen-<kind>-<seed>, with -medium for medium ones.
func (o Options) Name() string {
	if err := o.defaults(); err != nil {
		return "gen"
	}
	n := fmt.Sprintf("gen-%s-%d", o.Kind, o.Seed)
	if o.Size != Small {
		n += "-" + string(o.Size)
	}
	return n
}

// Generate draws a scenario. It returns the scenario as parsed from its
// YAML (defaults applied, validated, File set to Name() + ".yaml") and the
// YAML itself.
func Generate(o Options) (*spec.Scenario, []byte, error) {
	if err := o.defaults(); err != nil {
		return nil, nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(string(o.Kind) + "/" + string(o.Size)))
	g := &gen{
		o:   o,
		rng: rand.New(rand.NewPCG(uint64(o.Seed), h.Sum64())),
		dur: o.Duration,
	}
	sc, err := g.build()
	if err != nil {
		return nil, nil, fmt.Errorf("scengen: %s: %w", o.Name(), err)
	}
	data, err := Marshal(sc, g.header())
	if err != nil {
		return nil, nil, fmt.Errorf("scengen: %s: %w", o.Name(), err)
	}
	file := o.Name() + ".yaml"
	parsed, err := spec.Parse(data, file)
	if err != nil {
		return nil, nil, fmt.Errorf("scengen: %s: the generated scenario is invalid (a bug): %w", o.Name(), err)
	}
	tp, err := topo.FromSpec(parsed.Topology)
	if err != nil {
		return nil, nil, fmt.Errorf("scengen: %s: topology: %w", o.Name(), err)
	}
	if err := place.Admit(parsed, tp); err != nil {
		return nil, nil, fmt.Errorf("scengen: %s: the generated scenario is not admitted (a bug): %w", o.Name(), err)
	}
	return parsed, data, nil
}

// Marshal writes a scenario as YAML, small mappings and lists of scalars
// on one line (as the shipped scenarios are written), after header lines
// written as comments.
func Marshal(sc *spec.Scenario, header []string) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(sc); err != nil {
		return nil, fmt.Errorf("encode scenario: %w", err)
	}
	compact(&n)
	var buf bytes.Buffer
	for _, l := range header {
		buf.WriteString(strings.TrimRight("# "+l, " ") + "\n")
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("encode scenario: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode scenario: %w", err)
	}
	return buf.Bytes(), nil
}

// compact sets flow style on mappings whose values are all scalars or
// flow-style nodes (up to a few keys) and on lists of such nodes, keeping
// lines short.
func compact(n *yaml.Node) (flat bool, width int) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			compact(c)
		}
		return false, 0
	case yaml.ScalarNode:
		return true, len(n.Value) + 2
	case yaml.MappingNode, yaml.SequenceNode:
		all := true
		w := 2
		for _, c := range n.Content {
			f, cw := compact(c)
			all = all && f
			w += cw + 2
		}
		const maxWidth = 110
		if all && w <= maxWidth {
			n.Style = yaml.FlowStyle
			return true, w
		}
		return false, w
	}
	return false, 0
}

// gen holds one generation's state.
type gen struct {
	o   Options
	rng *rand.Rand
	dur time.Duration

	topo    spec.Topology
	desc    string  // topology, for the description
	edge    float64 // access link rate, bits/s
	servers []string
	vmHosts []string // servers VMs may use (not the appliances')
	hot     []string // servers receivers favour, so that tenants meet there

	tenants []*tenantDraft
	apps    []*appDraft
	notes   []string
}

// vmDraft is a VM before its guarantees are final: in, out override the
// tenant's (0: the tenant's).
type vmDraft struct {
	name, server string
	in, out      float64
}

// tenantDraft is a tenant before scaling: hoses in bits/s.
type tenantDraft struct {
	name       string
	pattern    string
	in, out    float64
	bestEffort bool
	vms        []vmDraft
	workloads  []spec.Workload
	phases     []spec.Phase
	join       time.Duration
	leave      time.Duration

	// Appliance tenants.
	use *appUse
}

func (g *gen) uniform(lo, hi float64) float64 { return lo + (hi-lo)*g.rng.Float64() }

// between is a uniform integer in [lo, hi].
func (g *gen) between(lo, hi int) int { return lo + g.rng.IntN(hi-lo+1) }

func (g *gen) chance(p float64) bool { return g.rng.Float64() < p }

func (g *gen) build() (*spec.Scenario, error) {
	g.topology()
	nNet, nApp := g.tenantCounts()
	if nApp > 0 {
		g.appliances()
	}
	for i := range nNet {
		g.networkTenant(i)
	}
	for range nApp {
		g.applianceTenant()
	}
	g.timing()
	g.guarantees()
	if err := g.admit(); err != nil {
		return nil, err
	}
	g.requests()
	return g.scenario(), nil
}

func (g *gen) tenantCounts() (network, appliance int) {
	small := g.o.Size == Small
	switch g.o.Kind {
	case Network:
		if small {
			return g.between(2, 5), 0
		}
		return g.between(3, 8), 0
	case Appliance:
		if small {
			return 0, g.between(2, 4)
		}
		return 0, g.between(3, 6)
	default:
		if small {
			return g.between(1, 3), g.between(1, 3)
		}
		return g.between(2, 5), g.between(2, 4)
	}
}

// topology draws a two-tier tree (one to four racks, oversubscribed 1, 2
// or 4 to one) or a fat-tree (k = 4, medium also 6; oversubscribed or
// not), with 1 Gbps links or, for a third of them, 10 Gbps.
func (g *gen) topology() {
	g.edge = 1e9
	if g.chance(0.3) {
		g.edge = 10e9
	}
	small := g.o.Size == Small
	if g.chance(0.6) {
		racks, spr := g.between(1, 3), g.between(2, 5)
		if !small {
			racks, spr = g.between(2, 4), g.between(3, 8)
		}
		for racks*spr < 4 {
			spr++
		}
		tt := &spec.TwoTier{Racks: racks, ServersPerRack: spr, Edge: spec.Rate(g.edge)}
		over := 1.0
		if racks > 1 {
			over = []float64{1, 1, 2, 4}[g.rng.IntN(4)]
		}
		if over > 1 {
			tt.Oversubscription = over
		}
		g.topo = spec.Topology{Kind: spec.TopoTwoTier, TwoTier: tt}
		g.desc = fmt.Sprintf("two-tier %dx%d", racks, spr)
		if over > 1 {
			g.desc += fmt.Sprintf(" %g:1", over)
		}
	} else {
		k := 4
		if !small && g.chance(0.3) {
			k = 6
		}
		over := 1
		if g.chance(0.5) {
			over = k / 2
		}
		ft := &spec.FatTree{K: k, Link: spec.Rate(g.edge)}
		if over > 1 {
			ft.Oversubscription = over
		}
		g.topo = spec.Topology{Kind: spec.TopoFatTree, FatTree: ft}
		g.desc = fmt.Sprintf("fat-tree k=%d", k)
		if over > 1 {
			g.desc += fmt.Sprintf(" %d:1", over)
		}
	}
	g.desc += " " + spec.FormatRate(g.edge)
	g.servers = g.topo.ServerNames()
	g.vmHosts = g.servers
}

// pickHot chooses the servers receivers favour (one or two).
func (g *gen) pickHot() {
	g.hot = nil
	for range g.between(1, 2) {
		g.hot = append(g.hot, g.vmHosts[g.rng.IntN(len(g.vmHosts))])
	}
}

// server draws a VM's server, not one of avoid unless nothing else is
// left.
func (g *gen) server(avoid ...string) string {
	for range 20 {
		s := g.vmHosts[g.rng.IntN(len(g.vmHosts))]
		if !slices.Contains(avoid, s) {
			return s
		}
	}
	for _, s := range g.vmHosts {
		if !slices.Contains(avoid, s) {
			return s
		}
	}
	return g.vmHosts[0]
}

// receiver draws a receiving VM's server: a hot one more often than not.
func (g *gen) receiver() string {
	if g.hot == nil {
		g.pickHot()
	}
	if g.chance(0.6) {
		return g.hot[g.rng.IntN(len(g.hot))]
	}
	return g.server()
}

func tenantName(i int) string {
	if i < 26 {
		return string(rune('A' + i))
	}
	return fmt.Sprintf("T%d", i+1)
}

// newTenant adds a tenant with a guarantee drawn log-uniformly in
// [5%, 50%] of an access link (before scaling).
func (g *gen) newTenant() *tenantDraft {
	t := &tenantDraft{name: tenantName(len(g.tenants))}
	gu := g.edge * math.Exp(g.uniform(math.Log(0.05), math.Log(0.5)))
	t.in, t.out = gu, gu
	g.tenants = append(g.tenants, t)
	return t
}

func (t *tenantDraft) addVM(server string) string {
	name := fmt.Sprintf("%s%d", strings.ToLower(t.name), len(t.vms)+1)
	t.vms = append(t.vms, vmDraft{name: name, server: server})
	return name
}

func (t *tenantDraft) workload(w spec.Workload) {
	w.Tenant = t.name
	w.Name = fmt.Sprintf("%s-%s-%d", strings.ToLower(t.name), t.pattern, len(t.workloads)+1)
	t.workloads = append(t.workloads, w)
}

// connections draws TCP connections per pair: mostly 1-4, an aggressive
// tenant 8-16.
func (g *gen) connections() int {
	if g.chance(0.2) {
		return g.between(8, 16)
	}
	return g.between(1, 4)
}

// networkTenant adds a tenant with VM-to-VM traffic: TCP pairs, an incast
// (many senders to one receiver over TCP), UDP at a rate, a shuffle (all
// to all over TCP), or TCP and UDP into one receiver.
func (g *gen) networkTenant(i int) {
	t := g.newTenant()
	if i > 0 && g.chance(0.1) && !slices.ContainsFunc(g.tenants, func(x *tenantDraft) bool { return x.bestEffort }) {
		t.bestEffort = true
	}
	medium := g.o.Size == Medium
	switch x := g.rng.Float64(); {
	case x < 0.3:
		t.pattern = "pairs"
		n := g.between(1, 3)
		for range n {
			dst := t.addVM(g.receiver())
			src := t.addVM(g.server(t.vms[len(t.vms)-1].server))
			t.workload(spec.Workload{Kind: spec.KindTCP, Src: spec.StringList{src}, Dst: spec.StringList{dst}, Connections: g.connections()})
		}
	case x < 0.55:
		t.pattern = "incast"
		rx := g.receiver()
		dst := t.addVM(rx)
		n := g.between(2, 8)
		if medium {
			n = g.between(4, 16)
		}
		var srcs spec.StringList
		for range n {
			srcs = append(srcs, t.addVM(g.server(rx)))
		}
		t.workload(spec.Workload{Kind: spec.KindTCP, Src: srcs, Dst: spec.StringList{dst}, Connections: g.between(1, 4)})
	case x < 0.75:
		t.pattern = "udp"
		rx := g.receiver()
		dst := t.addVM(rx)
		for range g.between(1, 2) {
			src := t.addVM(g.server(rx))
			rate := math.Round(g.uniform(0.2, 1.2)*g.edge/1e6) * 1e6
			t.workload(spec.Workload{Kind: spec.KindUDP, Src: spec.StringList{src}, Dst: spec.StringList{dst}, Rate: spec.Rate(rate)})
		}
	case x < 0.9:
		t.pattern = "shuffle"
		// On distinct servers (as far as there are), so that every pair
		// crosses the network.
		var all spec.StringList
		var used []string
		for range g.between(3, 5) {
			s := g.server(used...)
			used = append(used, s)
			all = append(all, t.addVM(s))
		}
		t.workload(spec.Workload{Kind: spec.KindTCP, Src: all, Dst: all, Connections: g.between(1, 2)})
	default:
		t.pattern = "tcp-udp"
		rx := g.receiver()
		dst := t.addVM(rx)
		a := t.addVM(g.server(rx))
		b := t.addVM(g.server(rx))
		t.workload(spec.Workload{Kind: spec.KindTCP, Src: spec.StringList{a}, Dst: spec.StringList{dst}, Connections: g.connections()})
		rate := math.Round(g.uniform(0.2, 1.0)*g.edge/1e6) * 1e6
		t.workload(spec.Workload{Kind: spec.KindUDP, Src: spec.StringList{b}, Dst: spec.StringList{dst}, Rate: spec.Rate(rate)})
	}
	if t.bestEffort {
		t.in, t.out = 0, 0
		return
	}
	// Asymmetric hoses and per-VM overrides, now and then.
	if g.chance(0.15) {
		if g.chance(0.5) {
			t.out *= g.uniform(0.25, 1)
		} else {
			t.in *= g.uniform(0.25, 1)
		}
	}
	if g.chance(0.1) {
		v := &t.vms[g.rng.IntN(len(t.vms))]
		f := g.uniform(0.5, 2)
		v.in, v.out = t.in*f, t.out*f
	}
}

// timing gives tenants idle phases, late starts, early stops, and joins
// (and leaves): a quarter of the tenants go idle or start late or stop
// early; in network scenarios one in eight tenants (not the first) joins
// during the run, and of those two in five leave before its end.
func (g *gen) timing() {
	d := g.dur.Seconds()
	at := func(f float64) time.Duration {
		return time.Duration(math.Round(f*d*100)) * 10 * time.Millisecond
	}
	for i, t := range g.tenants {
		if i > 0 && g.o.Kind == Network && g.chance(0.125) {
			t.join = at(g.uniform(0.15, 0.5))
			if g.chance(0.4) {
				t.leave = at(g.uniform(t.join.Seconds()/d+0.3, 0.9))
				t.phases = []spec.Phase{{Start: spec.Duration(t.join), Stop: spec.Duration(t.leave)}}
			} else {
				t.phases = []spec.Phase{{Start: spec.Duration(t.join)}}
			}
			continue
		}
		if !g.chance(0.25) {
			continue
		}
		switch g.rng.IntN(3) {
		case 0: // idle in the middle
			a := g.uniform(0.2, 0.45)
			b := a + g.uniform(0.15, 0.35)
			t.phases = []spec.Phase{{Start: 0, Stop: spec.Duration(at(a))}, {Start: spec.Duration(at(b))}}
		case 1: // late start
			t.phases = []spec.Phase{{Start: spec.Duration(at(g.uniform(0.15, 0.5)))}}
		default: // early stop
			t.phases = []spec.Phase{{Start: 0, Stop: spec.Duration(at(g.uniform(0.5, 0.85)))}}
		}
	}
}

// admissionScenario is the scenario admission sees: the tenants with
// their hoses as drafted, appliance tenants with their stand-in VMs.
func (g *gen) admissionScenario(withStandIns bool) *spec.Scenario {
	sc := &spec.Scenario{Name: "admission", Seed: g.o.Seed, Duration: spec.Duration(g.dur), Topology: g.topo}
	for _, t := range g.tenants {
		st := spec.Tenant{Name: t.name, BestEffort: t.bestEffort, In: spec.Rate(t.in), Out: spec.Rate(t.out)}
		for _, v := range t.vms {
			st.VMs = append(st.VMs, spec.VM{Name: v.name, Server: v.server, In: spec.Rate(v.in), Out: spec.Rate(v.out)})
		}
		if withStandIns && t.use != nil {
			u := t.use
			st.VMs = append(st.VMs, spec.VM{Name: t.name + "@" + u.app.name, Server: u.app.server, In: spec.Rate(u.standIn), Out: spec.Rate(u.standOut)})
		}
		sc.Tenants = append(sc.Tenants, st)
	}
	return sc
}

// admit scales the guarantees so that the most reserved link is reserved
// to a fill drawn in [0.5, 0.95]: network tenants' up or down, appliance
// tenants' (hoses and appliance guarantees) only down, since their
// appliance guarantees are already a share of the appliance's capacity.
func (g *gen) admit() error {
	tp, err := topo.FromSpec(g.topo)
	if err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	sc := g.admissionScenario(true)
	res, err := place.Reservations(sc, tp)
	if err != nil {
		return err
	}
	worst := 0.0
	for _, r := range res {
		worst = max(worst, r.Total/r.Capacity)
	}
	fill := g.uniform(0.5, 0.95)
	g.notes = append(g.notes, fmt.Sprintf("guarantees fill the most reserved link to %.0f%%", 100*fill))
	if worst == 0 {
		return nil
	}
	s := fill / worst
	for _, t := range g.tenants {
		f := s
		if t.use != nil {
			f = min(s, 1)
			t.use.guarantee *= f
			t.use.standIn *= f
			t.use.standOut *= f
		}
		t.in, t.out = roundRate(t.in*f), roundRate(t.out*f)
		for j := range t.vms {
			v := &t.vms[j]
			v.in, v.out = roundRate(v.in*f), roundRate(v.out*f)
		}
	}
	// Rounding only lowers guarantees, and reservations grow with them;
	// check anyway.
	if err := place.Admit(g.admissionScenario(true), tp); err != nil {
		return fmt.Errorf("scaled guarantees not admitted: %w", err)
	}
	return nil
}

// roundTokens rounds an appliance guarantee down to three significant
// digits.
func roundTokens(t float64) float64 {
	if t <= 0 {
		return 0
	}
	step := math.Pow(10, math.Floor(math.Log10(t))-2)
	return math.Floor(t/step) * step
}

// roundRate rounds a guarantee down to 1 Mbps (10 Kbps below 10 Mbps).
func roundRate(r float64) float64 {
	step := 1e6
	if r < 10e6 {
		step = 1e4
	}
	return math.Floor(r/step) * step
}

func (g *gen) header() []string {
	h := []string{"Generated by `" + g.o.Command() + "` (package scengen)."}
	h = append(h, g.desc+"; "+strings.Join(g.notes, "; ")+".")
	for _, t := range g.tenants {
		h = append(h, "  "+t.summary())
	}
	return h
}

// Command is the `bulkhead gen` command line that generates the scenario
// of these options.
func (o Options) Command() string {
	if err := o.defaults(); err != nil {
		return "bulkhead gen"
	}
	c := fmt.Sprintf("bulkhead gen --seed %d --kind %s", o.Seed, o.Kind)
	if o.Size != Small {
		c += " --size " + string(o.Size)
	}
	if o.Duration != DefaultDuration {
		c += " --duration " + o.Duration.String()
	}
	if o.Mechanism != spec.DefaultMechanism {
		c += " --mechanism " + o.Mechanism
	}
	return c + fmt.Sprintf(" --joins=%t", o.Joins)
}

func (t *tenantDraft) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s, %d VMs", t.name, t.pattern, len(t.vms))
	if t.bestEffort {
		b.WriteString(", best effort")
	}
	if t.use != nil {
		fmt.Fprintf(&b, ", %s at %s", t.use.loop(), t.use.app.name)
	}
	if t.join > 0 {
		fmt.Fprintf(&b, ", joins at %v", t.join)
		if t.leave > 0 {
			fmt.Fprintf(&b, ", leaves at %v", t.leave)
		}
	} else if len(t.phases) > 0 {
		b.WriteString(", phases")
		for _, p := range t.phases {
			stop := "end"
			if p.Stop > 0 {
				stop = time.Duration(p.Stop).String()
			}
			fmt.Fprintf(&b, " [%v, %s)", time.Duration(p.Start), stop)
		}
	}
	return b.String()
}

// scenario writes the drafts as a scenario.
func (g *gen) scenario() *spec.Scenario {
	var kinds []string
	for _, t := range g.tenants {
		kinds = append(kinds, t.pattern)
	}
	sc := &spec.Scenario{
		Name:        g.o.Name(),
		Description: fmt.Sprintf("random %s scenario: %s; tenants: %s", g.o.Kind, g.desc, strings.Join(kinds, ", ")),
		Duration:    spec.Duration(g.dur),
		Seed:        g.o.Seed,
		Topology:    g.topo,
		Mechanism:   spec.Mechanism{Name: g.o.Mechanism},
	}
	if len(g.apps) > 0 {
		sc.Units = "MT/s"
	}
	for _, a := range g.apps {
		sc.Appliances = append(sc.Appliances, a.spec())
	}
	for _, t := range g.tenants {
		st := spec.Tenant{Name: t.name, BestEffort: t.bestEffort}
		if t.in == t.out {
			st.Guarantee = spec.Rate(t.in)
		} else {
			st.In, st.Out = spec.Rate(t.in), spec.Rate(t.out)
		}
		for _, v := range t.vms {
			sv := spec.VM{Name: v.name, Server: v.server}
			if v.in == v.out {
				sv.Guarantee = spec.Rate(v.in)
			} else {
				sv.In, sv.Out = spec.Rate(v.in), spec.Rate(v.out)
			}
			st.VMs = append(st.VMs, sv)
		}
		st.Phases = t.phases
		if g.o.Joins {
			st.Join, st.Leave = spec.Duration(t.join), spec.Duration(t.leave)
		}
		if t.use != nil {
			st.VDC = &spec.VDC{Appliances: []spec.ApplianceGuarantee{{Appliance: t.use.app.name, Guarantee: spec.Tokens(t.use.guarantee)}}}
		}
		sc.Tenants = append(sc.Tenants, st)
		sc.Workloads = append(sc.Workloads, t.workloads...)
	}
	return sc
}
