// Package mechtest runs golden-trace tests of mechanisms, in the manner of
// etcd-io/raft's interaction tests: a script (testdata/*.txt) feeds a
// mechanism's agents and controller a sequence of observations and
// messages, and after every command the harness prints what the mechanism
// did — limits, schedulers, messages, allocations — in a stable text form
// that the script holds inline as the expected output. Scripts are run by
// github.com/cockroachdb/datadriven (RunFile, or Harness.Handle for one
// command).
//
// The harness drives the mechanisms' real code (mech/all.New, then
// NewAgent and NewController) as a driver would, and nothing else: it
// imports no simulator, runner, agent daemon or data plane. Like a driver
// it keeps the limits and allocations in force (fed back as PairObs.Limit
// and FlowObs.Allocation unless a line says otherwise) and delivers the
// messages agents and controllers send at the recipient's first step
// after the one they were sent in, as JSON bodies (json.RawMessage), the
// way host agents read them from the wire. It keeps no global state and
// is deterministic.
//
// # Updating the golden files
//
// Run
//
//	go test ./mech/mechtest -rewrite
//
// to rewrite the expected output of every script with what the code does
// now (-rewrite is datadriven's flag), then read the diff: it is the change
// in behaviour. A mismatch without -rewrite fails the test with the
// script's file and line and a diff of the output.
//
// # Script syntax
//
// A command is a line "name key=value ... flag", optionally followed by
// input lines, then "----" and the expected output (datadriven's format).
// Lines starting with # are comments, among input lines too. Rates are in
// bits/s with an optional unit (450Mbps, 1Gbps, 100Kbps, 5e6) or inf;
// other numbers take an optional k, M or G (125M = 125e6); durations are
// Go's (15ms, 1s). An unknown command, line or key, a key given twice, a
// missing value or a malformed number fails the test, naming the script's
// file and line. Errors of the mechanism itself (a parameter it rejects,
// an environment it cannot serve) are printed as "error: ..." instead, so
// that scripts can record them.
//
//	reset
//	    Forget everything (a new scenario in the same file).
//
//	env
//	a1 A h1 450Mbps 450Mbps
//	pattern a1->b1 a2->b1
//	sla A=0.1
//	    Declare the VMs, one per line: name tenant host in out (hose
//	    guarantees); the traffic pattern and the tenants' SLAs are
//	    optional. Prints the VMs by host.
//
//	mechanism name=elasticswitch gp_period=60ms alpha=0.4
//	    Build the mechanism with all.New; every other key is a parameter,
//	    as a scenario's mechanism.params gives it (true/false, numbers,
//	    else strings such as 60ms or 5Mbps).
//
//	agent | agent host=h1 | agent host=(h1,h2)
//	    Make the agents of the given hosts (every host of the env if
//	    none). Prints each agent's period.
//
//	step [host=h1 | host=(h1,h2)] [t=15ms] [period=15ms] [repeat=N] [inspect]
//	egress a1->b1 rate=100Mbps|limit [limit=200Mbps] [bound] [losses=2] [marks=1] [tenant=A]
//	ingress a1->b1 rate=100Mbps [losses=2] [marks=1]
//	pair a1->b1 rate=limit bound losses=2
//	vm b1 [in=..] [arrival=..] [drops=..] [out=..|limit] [dropsrc=a1] [outdemand=..] [indemand=..]
//	msg from=h2 [to=h1] {"kind":"elasticswitch.guarantees","pairs":[...]}
//	    Step agents (all of them if host= is absent), in host order, at
//	    the same time t (default: one period after the latest step; the
//	    first step is at one period). period is the observation's length
//	    (default: the agents' Period). Every input line goes into the
//	    HostObs of the host it concerns: egress to the source's host,
//	    ingress to the destination's, pair to both (as the simulator
//	    reports losses at both ends), vm to the VM's host (VMObs, rates in
//	    bits/s), msg to the inbox of host to (by default the only host
//	    stepped), after the messages other agents sent; its body is the
//	    JSON a host agent reads from the wire. A pair's limit defaults to
//	    its limit in force and rate=limit sends exactly at it; out=limit
//	    is the VM's egress limit in force. repeat=N takes N steps of the
//	    same input, one period apart; inspect prints the state the agents
//	    expose after each step. Each step is printed under its time (per
//	    host when several step, leaving out hosts that received and did
//	    nothing): the inbox (sender and kind), then the actions: limits
//	    sorted by kind and target, schedulers with their weights sorted,
//	    and messages as canonical JSON (keys sorted, numbers to 6
//	    significant digits). Consecutive steps where nothing happened
//	    collapse into one line ("t=30ms..90ms: no actions (5 steps)").
//	    Rates are printed in Mbps, other numbers with 6 significant
//	    digits.
//
//	drop host=h1
//	    Discard the messages waiting for h1's agent (lost in the network).
//
//	inspect host=h1 | inspect host=controller
//	    Print what the agent or the controller exposes of its state:
//	    ElasticSwitch's GP shares and guarantees, Gatekeeper's LIM_j,
//	    drop rates and notifications sent, Pulsar's smoothed demands and
//	    capacity estimators.
//
//	controller
//	link h1/up 125M [queues=4] [maxweight=8]
//	appliance kv [cap=1000] [min=500] [max=2000]
//	vdc A [fixed] [policy=drf] [gweight=2] [sla=0.1] [app=kv:200[:400]]... [weight=a1->kv:2]...
//	reserve A h1/up 450Mbps
//	route a1->kv h1/up kv h1/down:rev
//	    Build the mechanism's controller (mech.Central) over the env's VMs
//	    and these resources (capacities in tokens/s), VDCs, reservations
//	    and flows' routes (a path element is a resource with an optional
//	    role :fwd, :rev or :app; by default fwd on links, app on
//	    appliances).
//
//	cstep [t=1s] [period=1s] [repeat=N] [inspect]
//	flow a1->kv [tenant=A] [path=h1/up,kv,h1/down:rev] used=100,400,50|alloc [backlog=..] [queued=..] [outstanding=..] [alloc=..|none]
//	vm a1 [in=..] [out=..] [outdemand=..] [indemand=..]
//	    Step the controller with these flow and VM observations. Vectors
//	    have one entry per path element; path defaults to the flow's
//	    route, alloc to the allocation in force (none: the flow ran at the
//	    default rate), and used=alloc is the allocation in force (or the
//	    default rate). Prints, under the step's time, the allocations
//	    sorted by flow with each element labelled by its resource, the
//	    default rate, the capacity estimates, ports, DSCP code points and
//	    messages (and the controller's state with inspect).
package mechtest
