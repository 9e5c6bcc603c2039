package testbed

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/agent"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/vishvananda/netlink"
)

// tenantRates returns each tenant's mean received rate over samples with
// from <= T, and the mean of their sum (report units).
func tenantRates(in *eval.Input, from time.Duration) (map[string]float64, float64) {
	sum := map[string]float64{}
	n := 0
	for _, s := range in.Samples {
		if s.T <= from {
			continue
		}
		n++
		for i, p := range s.Pairs {
			sum[in.Pairs[i].Tenant] += p.Rate / in.UnitScale
		}
	}
	total := 0.0
	for k := range sum {
		sum[k] /= float64(n)
		total += sum[k]
	}
	return sum, total
}

// invalidDrops adds an agent's dropped datagrams to the running totals:
// invalid ones (malformed, unknown sender, wrong recipient, bad body,
// overflow: a bug between the agents) and stale ones. A datagram overtaken
// by a newer one from the same sender is dropped as stale by design (a
// newer message supersedes it); the emulated network, whose veths are
// served by both CPUs, occasionally reorders two of them.
func invalidDrops(a AgentStats, invalid, stale float64) (float64, float64) {
	for r, n := range a.Dropped {
		if r == agent.DropStale {
			stale += n
		} else {
			invalid += n
		}
	}
	return invalid, stale
}

// TestElasticSwitchCoreCongestion is issue 5's first Done-when test: two
// tenants with 450 Mbps guarantees on a 1 Gbps emulated core, X with one
// TCP sender and Y with 16 (scenarios/elasticswitch-real-fig5.yaml). Under
// none X is measured below its guarantee; under ElasticSwitch, run by the
// host agents on real traffic, X averages at least 90% of 450 Mbps over
// 10 s (after 2 s of start-up) and the core stays at least 85% utilized.
// The switch queues and offload packets are the testbed's defaults.
func TestElasticSwitchCoreCongestion(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		mech string
		dur  time.Duration
	}{{"none", 6 * time.Second}, {"elasticswitch", 12 * time.Second}} {
		t.Run(tc.mech, func(t *testing.T) {
			sc, tp := loadScenario(t, "../scenarios/elasticswitch-real-fig5.yaml")
			sc.Duration = spec.Duration(tc.dur)
			prefix := testPrefix(t)
			var dropped, stale float64
			var steps int64
			in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin,
				Options: Options{Prefix: prefix}, Mechanism: tc.mech,
				AfterRun: func(as []AgentStats) {
					for _, a := range as {
						steps += a.Steps
						dropped, stale = invalidDrops(a, dropped, stale)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			requireGone(t, prefix)
			m, total := tenantRates(in, 2*time.Second)
			t.Logf("%s: X %.0f Mbps, Y %.0f Mbps, core %.0f Mbps (t > 2 s); agents: %d steps, %.0f messages dropped as invalid, %.0f as stale (reordered)",
				tc.mech, m["X"], m["Y"], total, steps, dropped, stale)
			if dropped > 0 {
				t.Errorf("agents dropped %.0f control messages between themselves as invalid", dropped)
			}
			if stale > 0.01*float64(steps) {
				t.Errorf("agents dropped %.0f reordered control messages in %d steps: more than the network's occasional reordering", stale, steps)
			}
			switch tc.mech {
			case "none":
				if m["X"] >= 450 {
					t.Errorf("none: X got %.0f Mbps, want below its 450 Mbps guarantee", m["X"])
				}
			default:
				if steps == 0 {
					t.Fatal("the agents never stepped")
				}
				if m["X"] < 0.9*450 {
					t.Errorf("elasticswitch: X averaged %.0f Mbps, want ≥ 90%% of 450 (405)", m["X"])
				}
				if total < 0.85*1000 {
					t.Errorf("elasticswitch: the core carried %.0f Mbps, want ≥ 85%% of 1000", total)
				}
			}
		})
	}
}

// TestElasticSwitchUDPBlasters is ElasticSwitch Fig. 6 on real traffic
// (scenarios/elasticswitch-real-fig6-4.yaml): X's one TCP flow and four
// UDP blasters of tenant Y at 1 Gbps each share X's and Y's access link;
// both VMs are guaranteed 450 Mbps. The agents count losses as gaps in
// eBPF-stamped sequence numbers at the receivers (the default LossSeq),
// which see UDP's losses — TCP retransmissions cannot — and ElasticSwitch
// reads them from the receivers' feedback. X averages at least 85% of its
// guarantee once the blasters run (t > 3 s), Y at least its guarantee.
func TestElasticSwitchUDPBlasters(t *testing.T) {
	needRoot(t)
	sc, tp := loadScenario(t, "../scenarios/elasticswitch-real-fig6-4.yaml")
	prefix := testPrefix(t)
	in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin,
		Options:   Options{Prefix: prefix},
		Mechanism: "elasticswitch", Workload: WorkloadBuiltin,
	})
	if err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	m, total := tenantRates(in, 3*time.Second)
	t.Logf("X %.0f Mbps, Y %.0f Mbps, link %.0f Mbps (t > 3 s)", m["X"], m["Y"], total)
	if m["X"] < 0.85*450 {
		t.Errorf("X averaged %.0f Mbps against 4 UDP blasters, want ≥ 85%% of 450 (382)", m["X"])
	}
	if m["Y"] < 0.95*375 {
		t.Errorf("Y averaged %.0f Mbps, want about its 375 Mbps hose guarantee or more", m["Y"])
	}
}

// TestGatekeeperRXBlast is issue 5's second Done-when test: Gatekeeper's
// RX bottleneck (Fig. 5) with a UDP blast at twice the link
// (scenarios/gatekeeper-real-rx.yaml: B's two senders blast 1 Gbps each
// into B's VM on s1 from t = 2 s; A's one TCP flow into its VM on s1 has
// a 75% target, 645 Mbps). With feedback A gets at least 85% of its
// target over the blast (t > 3 s: a second for the notifications to act);
// without feedback (gatekeeper-real-rx-nofb.yaml) measurably less: below
// 80% of what it got with feedback. Flows come from the built-in
// generator (iperf3's UDP cannot offer 2 Gbit/s on two shared cores).
// The runs last 20 s (the blast 18 s): A's rate depends on the random
// sequence of notifications between the two blasters, and over the
// scenario's 8 s of blast it varied from 518 to 685 Mbps between runs on
// this two-core machine shared with other jobs.

func TestGatekeeperRXBlast(t *testing.T) {
	needRoot(t)
	got := map[string]float64{}
	for _, file := range []string{"gatekeeper-real-rx", "gatekeeper-real-rx-nofb"} {
		t.Run(file, func(t *testing.T) {
			sc, tp := loadScenario(t, "../scenarios/"+file+".yaml")
			sc.Duration = spec.Duration(20 * time.Second)
			prefix := testPrefix(t)
			var dropped, stale float64
			in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin,
				Options: Options{Prefix: prefix}, Workload: WorkloadBuiltin,
				AfterRun: func(as []AgentStats) {
					for _, a := range as {
						dropped, stale = invalidDrops(a, dropped, stale)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			requireGone(t, prefix)
			m, total := tenantRates(in, 3*time.Second)
			got[file] = m["A"]
			t.Logf("%s: A %.0f Mbps (target 645), B %.0f Mbps, link %.0f Mbps (t > 3 s); %.0f control messages dropped",
				file, m["A"], m["B"], total, dropped)
			if dropped > 0 {
				t.Errorf("agents dropped %.0f control messages between themselves", dropped)
			}
		})
	}
	with, without := got["gatekeeper-real-rx"], got["gatekeeper-real-rx-nofb"]
	if with < 0.85*645 {
		t.Errorf("with feedback A got %.0f Mbps, want ≥ 85%% of its 645 Mbps target (548)", with)
	}
	if !(without < 0.8*with) {
		t.Errorf("without feedback A got %.0f Mbps, not measurably less than the %.0f it got with feedback", without, with)
	}
}

// TestAttachAgent: the `bulkhead agent` path. A testbed is up for
// ElasticSwitch (pair limiters, no agents); an agent attached to the
// sender's server (AttachAgent: its own limiters) and one to the
// receiver's run as they would in their own processes; one TCP flow runs.
// The sender's agent limits the pair, the receiver's sends it remote
// guarantees, nobody drops a message, and with Restore the pair's limit
// is gone after the agents stop.
func TestAttachAgent(t *testing.T) {
	needRoot(t)
	sc, tp, err := loadFig3()
	if err != nil {
		t.Fatal(err)
	}
	prefix := testPrefix(t)
	ctx := context.Background()
	tb, err := Up(ctx, sc, tp, Options{Prefix: prefix, Limiters: true, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	m, err := NewMechanism("elasticswitch", nil, LossTCP)
	if err != nil {
		t.Fatal(err)
	}
	// a new plan, as the agent process computes it from the scenario
	plan, err := NewPlan(sc, tp, PlanOptions{Prefix: prefix, Limiters: true})
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	var agents []*agent.Agent
	var wg sync.WaitGroup
	src, _ := plan.VM("a-tx")
	dst, _ := plan.VM("a-rx")
	for _, server := range []string{src.Server, dst.Server} {
		cfg, err := AttachAgent(plan, server, m, LossTCP, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Restore = true
		a, err := agent.New(cfg) // the agent owns the data path and its namespaces
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(actx); err != nil {
				t.Error(err)
			}
		}()
	}
	w := &workers{tb: tb, iperf: "iperf3"}
	defer w.stop()
	fl := []flow{{pair: 0, src: "a-tx", dst: "a-rx", workload: "w", conns: 1, phase: phase(0, 2*time.Second), port: 5201}}
	if err := w.startServers(ctx, fl); err != nil {
		t.Fatal(err)
	}
	w.startClient(ctx, fl[0], time.Now(), 1)
	time.Sleep(1500 * time.Millisecond)
	st := agents[0].Snapshot()
	var limited bool
	for _, p := range st.Egress {
		if p.Src == "a-tx" && p.Dst == "a-rx" && p.Limit != nil && p.Rate > 0 {
			limited = true
		}
	}
	if !limited {
		t.Errorf("the sender's agent did not limit a-tx->a-rx: %+v", st.Egress)
	}
	if got := agents[0].Snapshot(); got.Steps == 0 || agents[1].Steps() == 0 {
		t.Errorf("agents stepped %d and %d times", got.Steps, agents[1].Steps())
	}
	cancel()
	wg.Wait()
	for _, a := range agents {
		for r, n := range a.Dropped() {
			if n > 0 {
				t.Errorf("%s dropped %.0f messages (%s)", a.Snapshot().Host, n, r)
			}
		}
	}
	if n, _ := agents[0].LimitUpdates(); n == 0 {
		t.Error("no limiter update")
	}
	// Restore: the pair's class is unlimited again (dataplane.MaxRate)
	vns, err := dataplane.OpenNS(src.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer vns.Close()
	idx, err := vns.LinkIndex(src.Dev)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := vns.Netlink().ClassList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 {
		t.Error("no class on the sender's interface")
	} else {
		for _, c := range cs {
			if h, ok := c.(*netlink.HtbClass); ok && h.Rate*8 < dataplane.MaxRate/2 {
				t.Errorf("class %x still limited at %d bit/s after the agent stopped", h.Handle, h.Rate*8)
			}
		}
	}
}

// TestRunRejects: mechanisms the agents cannot run, unknown workload
// engines and TCP congestion controls the kernel lacks are refused before
// anything is built.
func TestRunRejects(t *testing.T) {
	sc, tp, err := loadFig3()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    RunOptions
		want string
	}{
		{RunOptions{Binary: bulkheadBin, Mechanism: "qshare"}, "switch ports' WFQ queues"},
		{RunOptions{Binary: bulkheadBin, Mechanism: "hosefill"}, "every few milliseconds"},
		{RunOptions{Binary: bulkheadBin, Mechanism: "nope"}, "unknown mechanism"},
		{RunOptions{Binary: bulkheadBin, Mechanism: "drx-eb-local"}, "simulator only"},
		{RunOptions{Binary: bulkheadBin, Mechanism: "none", Workload: "ns3"}, "workload engine"},
		{RunOptions{Binary: bulkheadBin, Mechanism: "none", Options: Options{TCP: "nosuchcc"}}, `TCP congestion control "nosuchcc": this kernel offers`},
	} {
		_, err := Run(context.Background(), sc, tp, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", tc.o, err, tc.want)
		}
	}
	late := *sc
	late.Tenants = append([]spec.Tenant(nil), sc.Tenants...)
	late.Tenants[1].Join = spec.Duration(time.Second)
	if _, err := Run(context.Background(), &late, tp, RunOptions{Binary: bulkheadBin, Mechanism: "none"}); err == nil || !strings.Contains(err.Error(), "joins or leaves during the run") {
		t.Errorf("a tenant joining during the run: error %v, want a refusal", err)
	}
}

// TestShortFlows: the built-in generator's short flows (kind flows) run
// as a Poisson stream of sized TCP connections and report their
// completion times; iperf3 cannot run them.
func TestShortFlows(t *testing.T) {
	needRoot(t)
	sc, tp := parseScenario(t, `
name: short
duration: 3s
seed: 7
topology:
  kind: explicit
  explicit:
    nodes: [{name: h1, kind: server}, {name: h2, kind: server}, {name: sw, kind: switch}]
    links: [{a: h1, b: sw, capacity: 1Gbps}, {a: sw, b: h2, capacity: 1Gbps}]
tenants:
  - name: T
    guarantee: 500Mbps
    vms: [{name: x, server: h1}, {name: y, server: h2}]
workloads:
  - {tenant: T, kind: flows, src: x, dst: y, arrival_rate: 20, sizes: {dist: fixed, mean: 100KB}}
mechanism:
  name: none
`)
	if _, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: "tb" + NewPrefix()[2:]}}); err == nil ||
		!strings.Contains(err.Error(), "short flows need the builtin") {
		t.Errorf("iperf3 engine with short flows: %v", err)
	}
	prefix := testPrefix(t)
	in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix}, Workload: WorkloadBuiltin})
	if err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	// 20 flows/s for 3 s: 60 expected; Poisson, and the last may not finish
	if n := len(in.FCTs); n < 30 || n > 100 {
		t.Fatalf("%d completed flows, want about 60", n)
	}
	var sum time.Duration
	for _, f := range in.FCTs {
		if f.Bytes != 100e3 || f.Src != "x" || f.Dst != "y" || f.Tenant != "T" || f.Duration <= 0 || f.Start < 0 || f.Start > 3*time.Second {
			t.Fatalf("flow %+v", f)
		}
		sum += f.Duration
	}
	// 100 KB at 1 Gbit/s is 0.8 ms of transmission; with connection setup
	// on an idle link a flow takes a few ms, not a second
	mean := sum / time.Duration(len(in.FCTs))
	t.Logf("%d flows, mean FCT %v", len(in.FCTs), mean)
	if mean > 200*time.Millisecond {
		t.Errorf("mean FCT %v on an idle 1 Gbit/s path", mean)
	}
}
