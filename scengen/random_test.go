package scengen_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/runner"
	"github.com/bulkhead-dc/bulkhead/scengen"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// The randomized check (TestRandomScenarios) runs every mechanism on
// random scenarios: seeds 1..N of each kind, N = defaultSeeds or
// $BULKHEAD_GEN_SEEDS (10 with -short); the mechanisms are
// defaultMechanisms or $BULKHEAD_GEN_MECHANISMS (comma separated, none
// added); the size $BULKHEAD_GEN_SIZE (small or medium; default small).
// `go test ./scengen -run TestRandomScenarios -v` prints the table.
const (
	defaultSeeds = 40
	seedsEnv     = "BULKHEAD_GEN_SEEDS"
	mechsEnv     = "BULKHEAD_GEN_MECHANISMS"
	sizeEnv      = "BULKHEAD_GEN_SIZE"
)

var defaultMechanisms = []string{"none", "elasticswitch", "gatekeeper", "pulsar", "qshare", "hosefill"}

// outcome is one run: a mechanism on one scenario.
type outcome struct {
	group     string // one of groups
	kind      scengen.Kind
	seed      int64
	mechanism string
	// worst is the lowest compliance of any tenant: the network
	// compliance of a tenant with guaranteed VM-to-VM traffic, or a
	// tenant's compliance at an appliance it has a guarantee on (who
	// says which: "B" or "C@kv"); 1 when nothing is guaranteed.
	worst float64
	who   string
	// own: the worst tenant is below 95% and also alone without
	// isolation (aloneUnderNone): its own traffic keeps it from its
	// guarantees.
	own bool
	// wc is the network work conservation (NaN without VM-to-VM
	// traffic); appUse the appliances' mean utilization (NaN without
	// appliances).
	wc, appUse float64
}

// Groups of scenarios in the table: network scenarios on topologies
// whose core is provisioned for every server's link (Gatekeeper's
// assumption; with ECMP a fat-tree's core can still congest) and on
// oversubscribed ones; scenarios with appliances.
const (
	groupNonBlocking = "network, non-blocking core"
	groupOversub     = "network, oversubscribed core"
	groupAppliance   = "appliance and mixed"
)

var groups = []string{groupNonBlocking, groupOversub, groupAppliance}

func groupOf(sc *spec.Scenario) string {
	switch tp := sc.Topology; {
	case len(sc.Appliances) > 0:
		return groupAppliance
	case tp.TwoTier != nil && tp.TwoTier.Racks > 1 && tp.TwoTier.Oversubscription > 1,
		tp.FatTree != nil && tp.FatTree.Oversubscription > 1:
		return groupOversub
	}
	return groupNonBlocking
}

func (o outcome) id() string { return fmt.Sprintf("%s-%d", o.kind, o.seed) }

// applies says whether a mechanism is measured on a kind of scenario:
// every mechanism on network scenarios; on scenarios with appliances,
// mechanisms that enforce appliance guarantees (Capabilities.Appliances)
// and none, the baseline. A network-only mechanism there would be held
// to guarantees it does not claim to enforce.
func applies(name string, caps mech.Capabilities, kind scengen.Kind) bool {
	return kind == scengen.Network || caps.Appliances || name == "none"
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("$%s: want a positive number, got %q", name, v)
	}
	return n
}

// runRandom runs every mechanism that applies on seeds 1..seeds of every
// kind, on up to GOMAXPROCS scenarios at once. A run that fails (an
// error, a panic) is a test error; the others are returned.
func runRandom(t *testing.T, mechanisms []string, seeds int, size scengen.Size) []outcome {
	type job struct {
		o    scengen.Options
		name string
	}
	caps := map[string]mech.Capabilities{}
	for _, name := range mechanisms {
		m, err := all.New(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		caps[name] = m.Capabilities()
	}
	var jobs []job
	for _, kind := range scengen.Kinds() {
		for seed := int64(1); seed <= int64(seeds); seed++ {
			for _, name := range mechanisms {
				if !applies(name, caps[name], kind) {
					continue
				}
				// A mechanism that takes no tenants at runtime gets them
				// declared from the start, idle until they would join:
				// the same traffic.
				jobs = append(jobs, job{scengen.Options{Seed: seed, Kind: kind, Size: size, Mechanism: name, Joins: caps[name].LiveTenants}, name})
			}
		}
	}
	outs := make([]outcome, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				outs[i], errs[i] = runOne(jobs[i].o)
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	var ok []outcome
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s under %s: %v", jobs[i].o.Name(), jobs[i].name, err)
			continue
		}
		ok = append(ok, outs[i])
	}
	return ok
}

// runOne runs one scenario; a panic in the run is an error of the run.
func runOne(o scengen.Options) (res outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			// The panic and the frames below the recovery, enough to find it.
			lines := strings.Split(string(debug.Stack()), "\n")
			err = fmt.Errorf("panic: %v\n%s", p, strings.Join(lines[min(7, len(lines)):min(17, len(lines))], "\n"))
		}
	}()
	res = outcome{kind: o.Kind, seed: o.Seed, mechanism: o.Mechanism, worst: 1, wc: math.NaN(), appUse: math.NaN()}
	sc, _, err := scengen.Generate(o)
	if err != nil {
		return res, err
	}
	res.group = groupOf(sc)
	s, err := runner.Prepare(sc)
	if err != nil {
		return res, err
	}
	r, err := runner.Run(context.Background(), s, o.Mechanism, runner.Options{})
	if err != nil {
		return res, err
	}
	worstOf(r, &res)
	if res.worst < eval.ServedFraction {
		c, err := aloneUnderNone(sc, strings.SplitN(res.who, "@", 2)[0])
		if err != nil {
			return res, fmt.Errorf("tenant %s alone: %w", res.who, err)
		}
		res.own = c < eval.ServedFraction
	}
	return res, nil
}

// worstOf fills the outcome from a report.
func worstOf(r *eval.Report, res *outcome) {
	if r.Worst != nil {
		res.worst, res.who = r.Worst.Compliance, r.Worst.Name
	}
	for _, a := range r.Appliances {
		if a.Guarantee > 0 && a.ActiveSamples > 0 && a.Compliance < res.worst {
			res.worst, res.who = a.Compliance, a.Tenant+"@"+a.Appliance
		}
	}
	if r.PairTraffic() {
		res.wc = r.WorkConservation
	}
	if len(r.ApplianceUse) > 0 {
		sum := 0.0
		for _, u := range r.ApplianceUse {
			sum += u.Mean
		}
		res.appUse = sum / float64(len(r.ApplianceUse))
	}
}

// summary is one mechanism's figures on one group of scenarios.
type summary struct {
	mechanism, group string
	runs             int
	allServed        int // runs in which every tenant is at ≥ 95% compliance
	own              int // runs failing through the worst tenant's own traffic
	// worseThanNone counts runs whose worst tenant is more than 0.05
	// below the worst tenant without isolation on the same scenario.
	worseThanNone int
	worst         outcome
	medianWorst   float64
	wcRuns        int
	medianWC      float64
	worstWC       outcome
	appRuns       int
	medianAppUse  float64 // median over runs of (appliance use ÷ none's on the same scenario)
}

func (s summary) servedShare() float64 { return float64(s.allServed) / float64(s.runs) }

// summarize groups outcomes by group and mechanism.
func summarize(outs []outcome, mechanisms []string) []summary {
	var sums []summary
	for _, g := range groups {
		for _, m := range mechanisms {
			if s := summarizeRuns(outs, m, g, func(o outcome) bool { return o.group == g }); s.runs > 0 {
				sums = append(sums, s)
			}
		}
	}
	return sums
}

// summarizeRuns summarizes a mechanism's outcomes that in selects,
// comparing each with none's on the same scenario.
func summarizeRuns(outs []outcome, mechanism, group string, in func(outcome) bool) summary {
	none := map[string]outcome{}
	for _, o := range outs {
		if o.mechanism == "none" {
			none[o.id()] = o
		}
	}
	s := summary{mechanism: mechanism, group: group, worst: outcome{worst: math.Inf(1)}, worstWC: outcome{wc: math.Inf(1)}}
	var worsts, wcs, uses []float64
	for _, o := range outs {
		if o.mechanism != mechanism || !in(o) {
			continue
		}
		s.runs++
		worsts = append(worsts, o.worst)
		if o.worst >= eval.ServedFraction {
			s.allServed++
		}
		if o.own {
			s.own++
		}
		if o.worst < s.worst.worst {
			s.worst = o
		}
		if !math.IsNaN(o.wc) {
			wcs = append(wcs, o.wc)
			if o.wc < s.worstWC.wc {
				s.worstWC = o
			}
		}
		n, ok := none[o.id()]
		if ok && o.worst < n.worst-0.05 {
			s.worseThanNone++
		}
		if ok && !math.IsNaN(o.appUse) && n.appUse > 0 {
			uses = append(uses, o.appUse/n.appUse)
		}
	}
	s.medianWorst = median(worsts)
	s.wcRuns, s.medianWC = len(wcs), median(wcs)
	s.appRuns, s.medianAppUse = len(uses), median(uses)
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// table writes the summaries as a Markdown table.
func table(sums []summary) string {
	var b strings.Builder
	b.WriteString("| scenarios | mechanism | runs | every tenant ≥ 95% | short through own traffic | worse than none | worst tenant (scenario, tenant) | median worst tenant | work conservation median | worst (scenario) | appliance use ÷ none's, median |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: |\n")
	for _, s := range sums {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %.2f (%s, %s) | %.2f | ", s.group, s.mechanism, s.runs, s.allServed, s.own,
			s.worseThanNone, s.worst.worst, s.worst.id(), s.worst.who, s.medianWorst)
		if s.wcRuns > 0 {
			fmt.Fprintf(&b, "%.2f | %.2f (%s) | ", s.medianWC, s.worstWC.wc, s.worstWC.id())
		} else {
			b.WriteString("n/a | n/a | ")
		}
		if s.appRuns > 0 && s.mechanism != "none" {
			fmt.Fprintf(&b, "%.2f |\n", s.medianAppUse)
		} else {
			b.WriteString("n/a |\n")
		}
	}
	return b.String()
}

// worstRuns lists a mechanism's runs with the lowest worst-tenant
// compliance.
func worstRuns(outs []outcome, mechanism string, n int) []outcome {
	var xs []outcome
	for _, o := range outs {
		if o.mechanism == mechanism {
			xs = append(xs, o)
		}
	}
	sort.SliceStable(xs, func(i, j int) bool { return xs[i].worst < xs[j].worst })
	return xs[:min(n, len(xs))]
}

// floor is what a mechanism keeps today on the default scenarios (small,
// at least minFloorSeeds seeds of each kind), with a margin: a mechanism
// that falls below has regressed. Zero: not checked.
type floor struct {
	mechanism string
	// scenarios: network (both network groups) or one group.
	scenarios string
	// served: the least share of runs in which every tenant is at ≥ 95%
	// compliance; medianWorst: the least median over runs of the worst
	// tenant's compliance; worst: the least worst-tenant compliance of
	// any run; medianWC: the least median work conservation.
	served, medianWorst, worst, medianWC float64
}

const minFloorSeeds = 20

// floors are set below what HEAD measured when they were written
// (commit ce30154; each figure in the comments is at 40 seeds, then at
// 100). They are floors, not targets: issue 11 asks for every tenant at
// ≥ 95% on every run. Pulsar's were added after issue 11's changes to it
// (at ce30154 its worst tenant on network scenarios was at 0 on every
// seed). Gatekeeper's compliance is held only where its paper says
// it works, a core that does not congest ("Gatekeeper assumes that fabric
// bandwidth is well provisioned").
var floors = []floor{
	// Stress: without isolation, most scenarios leave some tenant short
	// (network: every tenant served in 11 of 40 runs, 31 of 100; with
	// appliances 37 of 80, 94 of 200). Were it not so, the check would
	// not tell isolation from luck.
	{mechanism: "none", scenarios: "network", served: -0.5},
	{mechanism: "none", scenarios: groupAppliance, served: -0.7},
	// ElasticSwitch (working tree after issue 11's ElasticSwitch changes:
	// new pairs of idle VMs take the free hose, best-effort pairs weighted
	// as a 45 Mbps guarantee): served 40 of 40 runs, 100 of 100; worst
	// tenant 0.98, 0.98; median worst 1.00, 1.00; work conservation median
	// on non-blocking and oversubscribed cores 0.82 and 0.84, 0.84 and
	// 0.82; its worst run 0.57 (network-17), 0.43 (network-97), up from 0.01
	// (network-5, a best-effort tenant starved). (At ce30154: served 25 of
	// 40, 56 of 100; worst tenant 0.89, 0.86; median worst 0.96, 0.96.)
	{mechanism: "elasticswitch", scenarios: "network", served: 0.9, worst: 0.93, medianWorst: 0.95, medianWC: 0.75},
	// Gatekeeper, non-blocking core: served 19 of 29 runs (0.66), 47 of
	// 61 (0.77); median worst 1.00, 1.00. Work conservation median, all
	// network runs: 0.96, 0.96.
	{mechanism: "gatekeeper", scenarios: groupNonBlocking, served: 0.5, medianWorst: 0.9},
	{mechanism: "gatekeeper", scenarios: "network", medianWC: 0.85},
	// QShare (dedicated: hose, issue 11: a pair kept below its hose
	// guarantee by its own tenant's pairs in their dedicated queue has its
	// siblings capped): served 38 of 40 runs (0.95), 94 of 100; median
	// worst 1.00, 1.00; worst tenant 0.67 (network-9: two UDP senders
	// into one VM), 0.00 (network-52, -73: shortfalls not caused by
	// siblings, docs/qshare.md); work conservation median 1.00, 1.00.
	// (Before, the paper's tenant-level guarantee, dedicated: tenant: served
	// 30 of 40, 76 of 100.)
	{mechanism: "qshare", scenarios: "network", served: 0.85, medianWorst: 0.95, medianWC: 0.9},
	// hosefill (1% headroom, no limit below the guarantee a pair would
	// have, new pairs of busy VMs deemed starved only after two periods):
	// served 40 of 40 runs, 100 of 100; worst tenant 1.00, 1.00; median
	// worst 1.00, 1.00; work conservation median 0.99, 0.99 (the headroom
	// leaves 1% of a full link unallocated); its worst run 0.97, 0.93
	// (network-78). (Before, worst tenant 0.00 on network-29, -30: TCP
	// behind UDP that filled the link from the start was never seen.)
	{mechanism: "hosefill", scenarios: "network", served: 0.9, worst: 0.93, medianWorst: 0.95, medianWC: 0.95},
	// Pulsar (issue 11: guarantees first; until traffic is first seen, new
	// flows at the smallest share of a guarantee any flow of the model can
	// have; a new flow from a VM at that VM's default rate, its share of
	// what its tenant's known flows leave of its guarantees): network
	// (non-blocking and oversubscribed cores): served 8 + 4 of 40 runs,
	// 19 + 11 of 100 (0 of 40 and of 100 with one default rate for every
	// VM); median worst 0.90 and 0.87, 0.90 and 0.86 (0.83 and 0.84,
	// 0.85 and 0.84); worst tenant 0.44 (network-28) both; work
	// conservation median 0.76 and 0.72 both (0.68 and 0.61, 0.67 and
	// 0.61; 0.56, 0.58 with the fixed 8 Mbps start). Appliance and mixed:
	// served 1 of 80, 1 of 200; median worst 0.87, 0.86; work
	// conservation median 0.62, 0.66 (0.50, 0.56 with one default rate).
	// No floor on the worst tenant (it falls with the seeds: at
	// appliances 0.58 at 40, 0.40 at 100).
	{mechanism: "pulsar", scenarios: "network", served: 0.2, medianWorst: 0.85, medianWC: 0.7},
	{mechanism: "pulsar", scenarios: groupAppliance, medianWorst: 0.8, medianWC: 0.55},
}

// problems says where a summary falls below the floor (none: it holds).
// A negative served is a ceiling: at most that share of runs served.
func (f floor) problems(s summary) []string {
	if s.runs == 0 {
		return nil
	}
	where := fmt.Sprintf("%s on %s scenarios (%d runs)", s.mechanism, f.scenarios, s.runs)
	var ps []string
	switch sh := s.servedShare(); {
	case f.served > 0 && sh < f.served:
		ps = append(ps, fmt.Sprintf("%s: every tenant ≥ 95%% in %.2f of the runs, below the floor %.2f", where, sh, f.served))
	case f.served < 0 && sh > -f.served:
		ps = append(ps, fmt.Sprintf("%s: every tenant ≥ 95%% in %.2f of the runs, above %.2f: the scenarios no longer stress isolation", where, sh, -f.served))
	}
	if f.worst > 0 && s.worst.worst < f.worst {
		ps = append(ps, fmt.Sprintf("%s: worst tenant %.2f (%s, %s), below the floor %.2f", where, s.worst.worst, s.worst.id(), s.worst.who, f.worst))
	}
	if f.medianWorst > 0 && s.medianWorst < f.medianWorst {
		ps = append(ps, fmt.Sprintf("%s: median worst tenant %.2f, below the floor %.2f", where, s.medianWorst, f.medianWorst))
	}
	if f.medianWC > 0 && s.medianWC < f.medianWC {
		ps = append(ps, fmt.Sprintf("%s: median work conservation %.2f, below the floor %.2f", where, s.medianWC, f.medianWC))
	}
	return ps
}

func TestRandomScenarios(t *testing.T) {
	seeds := envInt(t, seedsEnv, defaultSeeds)
	if testing.Short() && os.Getenv(seedsEnv) == "" {
		seeds = 10
	}
	size := scengen.Size(os.Getenv(sizeEnv))
	if size == "" {
		size = scengen.Small
	}
	mechanisms := defaultMechanisms
	if v := os.Getenv(mechsEnv); v != "" {
		mechanisms = strings.Split(v, ",")
		if !slices.Contains(mechanisms, "none") {
			mechanisms = append([]string{"none"}, mechanisms...)
		}
	}
	start := time.Now()
	outs := runRandom(t, mechanisms, seeds, size)
	t.Logf("%d runs in %v (%d seeds of each kind; $%s sets it)\n%s", len(outs), time.Since(start).Round(time.Millisecond), seeds, seedsEnv, table(summarize(outs, mechanisms)))
	for _, m := range mechanisms {
		var l []string
		for _, o := range worstRuns(outs, m, 6) {
			own := ""
			if o.own {
				own = " (own traffic)"
			}
			l = append(l, fmt.Sprintf("%s %s %.2f%s", o.id(), o.who, o.worst, own))
		}
		t.Logf("%s, worst runs: %s", m, strings.Join(l, "; "))
	}
	if seeds < minFloorSeeds || size != scengen.Small {
		t.Logf("floors not checked: they hold for small scenarios and at least %d seeds", minFloorSeeds)
		return
	}
	for _, f := range floors {
		if !slices.Contains(mechanisms, f.mechanism) {
			continue
		}
		in := func(o outcome) bool { return o.group == f.scenarios }
		if f.scenarios == "network" {
			in = func(o outcome) bool { return o.kind == scengen.Network }
		}
		for _, p := range f.problems(summarizeRuns(outs, f.mechanism, f.scenarios, in)) {
			t.Error(p)
		}
		// A compliance floor that no isolation at all would pass is no
		// floor: none's figures on the same scenarios must fail it.
		if f.mechanism != "none" && (f.served > 0 || f.medianWorst > 0 || f.worst > 0) {
			g := f
			g.medianWC = 0
			if len(g.problems(summarizeRuns(outs, "none", f.scenarios, in))) == 0 {
				t.Errorf("the floor of %s on %s scenarios passes without isolation (none): too low to catch a regression", f.mechanism, f.scenarios)
			}
		}
	}
}

// alone is the scenario with only the named tenant and its workloads.
func alone(sc *spec.Scenario, tenant string) *spec.Scenario {
	c := *sc
	c.Tenants, c.Workloads = nil, nil
	for _, t := range sc.Tenants {
		if t.Name == tenant {
			c.Tenants = append(c.Tenants, t)
		}
	}
	for _, w := range sc.Workloads {
		if w.Tenant == tenant {
			c.Workloads = append(c.Workloads, w)
		}
	}
	return &c
}

// aloneUnderNone runs a tenant alone without isolation and returns its
// worst compliance (network, or at an appliance): below 95%, the tenant's
// own traffic keeps it from its guarantees (UDP senders of one tenant
// overloading its receiver, TCP pairs with more connections than others
// of the tenant), whatever the other tenants do.
func aloneUnderNone(sc *spec.Scenario, tenant string) (float64, error) {
	s, err := runner.Prepare(alone(sc, tenant))
	if err != nil {
		return 0, err
	}
	r, err := runner.Run(context.Background(), s, "none", runner.Options{})
	if err != nil {
		return 0, err
	}
	var o outcome
	o.worst = 1
	worstOf(r, &o)
	return o.worst, nil
}
