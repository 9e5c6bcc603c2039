package mechtest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
)

// Harness is the state of one script: the environment, the mechanism, its
// agents (one per host) and controller, the limits and allocations in
// force (as a driver applies them), and the messages in flight. Make one
// per script with New; it is not safe for concurrent use.
type Harness struct {
	vms     []mech.VM // sorted by name
	pattern []mech.PairID
	sla     map[string]float64

	mech   mech.Mechanism
	agents map[string]*agentState

	// Limits in force, as the driver applied them (absent: Unlimited).
	pairLimits map[mech.PairID]float64
	vmEgress   map[string]float64
	vmIngress  map[string]float64

	ctl *controllerState
}

// agentState is one host's agent, its clock and its mailbox (messages
// sent to it, delivered at its next step).
type agentState struct {
	host    string
	a       mech.Agent
	now     time.Duration
	stepped bool
	mailbox []pending
}

// pending is a message in a mailbox and when it was sent.
type pending struct {
	sent time.Duration
	m    mech.Message
}

// New returns an empty harness.
func New() *Harness {
	h := &Harness{}
	h.reset()
	return h
}

func (h *Harness) reset() {
	*h = Harness{
		agents:     map[string]*agentState{},
		pairLimits: map[mech.PairID]float64{},
		vmEgress:   map[string]float64{},
		vmIngress:  map[string]float64{},
	}
}

// RunFile runs the script at path with a new Harness (see the package
// documentation for the commands).
func RunFile(t *testing.T, path string) {
	t.Helper()
	h := New()
	datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
		return h.Handle(t, td)
	})
}

// Handle runs one command and returns its output. A malformed command or
// input line fails the test, naming the script's file and line.
func (h *Harness) Handle(t testing.TB, td *datadriven.TestData) string {
	t.Helper()
	out, err := h.Exec(td)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Exec runs one command and returns its output, or an error for a script
// mistake (unknown command, bad line). Errors of the mechanism itself (a
// parameter it rejects, an environment it cannot serve) are outputs
// ("error: ..."), so that scripts can record them.
func (h *Harness) Exec(td *datadriven.TestData) (string, error) {
	cmd := &line{pos: td.Pos, text: td.FullCmd()}
	var fields []string
	for _, a := range td.CmdArgs {
		if len(a.Vals) == 0 {
			fields = append(fields, a.Key)
			continue
		}
		fields = append(fields, a.Key+"="+strings.Join(a.Vals, ","))
	}
	args := parseKV(cmd, fields)
	lines := inputLines(td.Pos, td.Input)
	noInput := func() error {
		if len(lines) > 0 {
			return lines[0].errorf("%s takes no input lines", td.Cmd)
		}
		return nil
	}
	switch td.Cmd {
	case "reset":
		if err := noInput(); err != nil {
			return "", err
		}
		if err := args.done(); err != nil {
			return "", err
		}
		h.reset()
		return "ok", nil
	case "env":
		return h.cmdEnv(args, lines)
	case "mechanism":
		if err := noInput(); err != nil {
			return "", err
		}
		return h.cmdMechanism(args)
	case "agent":
		if err := noInput(); err != nil {
			return "", err
		}
		return h.cmdAgent(args)
	case "step":
		return h.cmdStep(args, lines)
	case "drop":
		if err := noInput(); err != nil {
			return "", err
		}
		return h.cmdDrop(args)
	case "inspect":
		if err := noInput(); err != nil {
			return "", err
		}
		return h.cmdInspect(args)
	case "controller":
		return h.cmdController(args, lines)
	case "cstep":
		return h.cmdCStep(args, lines)
	}
	return "", cmd.errorf("unknown command %q (known: reset, env, mechanism, agent, step, drop, inspect, controller, cstep)", td.Cmd)
}

// cmdEnv declares the VMs (one per line: name tenant host in out), the
// traffic pattern ("pattern a1->b1 a2->b1") and SLAs ("sla A=0.1").
func (h *Harness) cmdEnv(args *kv, lines []line) (string, error) {
	if err := args.done(); err != nil {
		return "", err
	}
	if h.mech != nil || len(h.agents) > 0 || h.ctl != nil {
		return "", args.l.errorf("env must come before mechanism, agents and controller (use reset to start over)")
	}
	h.vms, h.pattern, h.sla = nil, nil, nil
	seen := map[string]bool{}
	var patternLines []*line
	for i := range lines {
		l := &lines[i]
		switch l.fields[0] {
		case "pattern":
			if len(l.fields) < 2 {
				return "", l.errorf("pattern needs at least one pair")
			}
			patternLines = append(patternLines, l)
			for _, f := range l.fields[1:] {
				src, dst, err := parsePair(f)
				if err != nil {
					return "", l.errorf("%v", err)
				}
				h.pattern = append(h.pattern, mech.PairID{Src: src, Dst: dst})
			}
		case "sla":
			k := parseKV(l, l.fields[1:])
			if h.sla == nil {
				h.sla = map[string]float64{}
			}
			for tenant := range k.vals {
				h.sla[tenant] = k.num(tenant, 0)
			}
			if err := k.done(); err != nil {
				return "", err
			}
		default:
			if len(l.fields) != 5 {
				return "", l.errorf("expected a VM as: name tenant host in out")
			}
			f := l.fields
			in, err := parseRate(f[3])
			if err != nil {
				return "", l.errorf("in: %v", err)
			}
			out, err := parseRate(f[4])
			if err != nil {
				return "", l.errorf("out: %v", err)
			}
			if seen[f[0]] {
				return "", l.errorf("VM %s declared twice", f[0])
			}
			seen[f[0]] = true
			h.vms = append(h.vms, mech.VM{Name: f[0], Tenant: f[1], Host: f[2], In: in, Out: out})
		}
	}
	slices.SortFunc(h.vms, func(a, b mech.VM) int { return strings.Compare(a.Name, b.Name) })
	for _, l := range patternLines {
		for _, f := range l.fields[1:] {
			src, dst, _ := parsePair(f)
			for _, vm := range []string{src, dst} {
				if !seen[vm] {
					return "", l.errorf("unknown VM %s", vm)
				}
			}
		}
	}
	var w writer
	for _, host := range h.hosts() {
		var names []string
		for _, v := range h.vms {
			if v.Host == host {
				names = append(names, v.Name)
			}
		}
		w.linef("%s: %s", host, strings.Join(names, " "))
	}
	if len(h.pattern) > 0 {
		w.linef("pattern: %d pairs", len(h.pattern))
	}
	if len(h.sla) > 0 {
		w.linef("sla: %s", weights(h.sla))
	}
	if len(h.vms) == 0 {
		w.linef("no VMs")
	}
	return w.String(), nil
}

// hosts returns the hosts of the env's VMs, sorted.
func (h *Harness) hosts() []string {
	set := map[string]bool{}
	for _, v := range h.vms {
		set[v.Host] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func (h *Harness) vm(name string) (mech.VM, bool) {
	i, ok := slices.BinarySearchFunc(h.vms, name, func(v mech.VM, n string) int { return strings.Compare(v.Name, n) })
	if !ok {
		return mech.VM{}, false
	}
	return h.vms[i], true
}

// cmdMechanism builds the mechanism with all.New: "mechanism
// name=elasticswitch gp_period=60ms alpha=0.4".
func (h *Harness) cmdMechanism(args *kv) (string, error) {
	name := args.str("name", "")
	if name == "" {
		return "", args.l.errorf("mechanism needs name=")
	}
	var params map[string]any
	for k, v := range args.vals {
		if k == "name" {
			continue
		}
		args.used[k] = true
		if params == nil {
			params = map[string]any{}
		}
		params[k] = paramValue(v)
	}
	if err := args.done(); err != nil {
		return "", err
	}
	if len(h.agents) > 0 || h.ctl != nil {
		return "", args.l.errorf("mechanism must come before agents and controller (use reset to start over)")
	}
	m, err := all.New(name, params)
	if err != nil {
		h.mech = nil
		return "error: " + err.Error(), nil
	}
	h.mech = m
	return m.Name(), nil
}

// cmdAgent makes the agents of the given hosts (all hosts of the env if
// none): "agent host=h1", "agent host=(h1,h2)".
func (h *Harness) cmdAgent(args *kv) (string, error) {
	var hosts []string
	if args.has("host") {
		hosts = strings.Split(args.str("host", ""), ",")
	} else {
		hosts = h.hosts()
	}
	if err := args.done(); err != nil {
		return "", err
	}
	if h.mech == nil {
		return "", args.l.errorf("agent needs a mechanism first")
	}
	var w writer
	for _, host := range hosts {
		host = strings.TrimSpace(host)
		if host == "" {
			return "", args.l.errorf("empty host name")
		}
		if _, dup := h.agents[host]; dup {
			return "", args.l.errorf("host %s already has an agent", host)
		}
		env := drive.Env(h.model(), host, slices.Clone(h.pattern))
		a, err := h.mech.NewAgent(env)
		if err != nil {
			w.linef("%s: error: %v", host, err)
			continue
		}
		h.agents[host] = &agentState{host: host, a: a}
		w.linef("%s: period %s", host, durString(a.Period()))
	}
	return w.String(), nil
}

// model is the declared model of the script's env: its tenants in the
// order they first appear, with their VMs and SLAs.
func (h *Harness) model() *model.Model {
	m := &model.Model{}
	idx := map[string]int{}
	for _, v := range h.vms {
		i, ok := idx[v.Tenant]
		if !ok {
			i = len(m.Tenants)
			idx[v.Tenant] = i
			m.Tenants = append(m.Tenants, model.Tenant{Name: v.Tenant, SLA: h.sla[v.Tenant]})
		}
		m.Tenants[i].VMs = append(m.Tenants[i].VMs, model.VM{Name: v.Name, Tenant: v.Tenant, Host: v.Host, In: v.In, Out: v.Out})
	}
	return m
}

// pickAgent returns the agent named by host= (the only agent if there is
// one and host= is absent).
func (h *Harness) pickAgent(args *kv) (*agentState, error) {
	if args.has("host") {
		host := args.str("host", "")
		ag := h.agents[host]
		if ag == nil {
			return nil, args.l.errorf("no agent on host %q", host)
		}
		return ag, nil
	}
	if len(h.agents) != 1 {
		return nil, args.l.errorf("%d agents: say which with host=", len(h.agents))
	}
	for _, ag := range h.agents {
		return ag, nil
	}
	return nil, nil
}

// pickAgents returns the agents named by host= ("h1" or "(h1,h2)"), all
// agents if it is absent, sorted by host.
func (h *Harness) pickAgents(args *kv) ([]*agentState, error) {
	var hosts []string
	if args.has("host") {
		hosts = strings.Split(args.str("host", ""), ",")
	} else {
		hosts = slices.Sorted(maps.Keys(h.agents))
	}
	if len(hosts) == 0 {
		return nil, args.l.errorf("no agents (make them with agent)")
	}
	for i := range hosts {
		hosts[i] = strings.TrimSpace(hosts[i])
	}
	slices.Sort(hosts)
	var ags []*agentState
	for i, host := range hosts {
		ag := h.agents[host]
		if ag == nil {
			return nil, args.l.errorf("no agent on host %q", host)
		}
		if i > 0 && host == hosts[i-1] {
			return nil, args.l.errorf("host %s named twice", host)
		}
		ags = append(ags, ag)
	}
	return ags, nil
}

// stepTimes returns the times of repeat steps of a clock at now (stepped:
// whether it ever stepped) with the given period, the first at t= if
// given.
func stepTimes(args *kv, now time.Duration, stepped bool, period time.Duration) ([]time.Duration, error) {
	repeat := args.num("repeat", 1)
	first := now + period
	if args.has("t") {
		first = args.dur("t", 0)
	}
	if err := args.err; err != nil {
		return nil, err
	}
	if repeat != math.Trunc(repeat) || repeat < 1 || repeat > 10000 {
		return nil, args.l.errorf("repeat must be an integer in [1, 10000]")
	}
	if period <= 0 {
		return nil, args.l.errorf("period must be positive")
	}
	if stepped && first <= now {
		return nil, args.l.errorf("time must advance: t=%s after a step at %s", first, now)
	}
	ts := make([]time.Duration, int(repeat))
	for i := range ts {
		ts[i] = first + time.Duration(i)*period
	}
	return ts, nil
}

// obsLine is one parsed input line of a step, resolved into the
// observation at each repetition (rate=limit follows the limit in force).
type obsLine struct {
	l      *line
	verb   string // egress, ingress, pair, vm, msg
	hosts  []string
	obs    mech.PairObs
	atLim  bool // rate=limit (pairs), out=limit (VMs)
	limSet bool // limit= given
	vmObs  mech.VMObs
	msg    mech.Message
}

// pairObs resolves a pair observation against the limits in force.
func (h *Harness) pairObs(p *obsLine) (mech.PairObs, error) {
	o := p.obs
	if !p.limSet {
		o.Limit = h.pairLimit(o.Pair)
	}
	if p.atLim {
		lim := h.pairLimit(o.Pair)
		if math.IsInf(lim, 1) {
			return o, p.l.errorf("rate=limit but pair %s has no limit in force", pairString(o.Pair))
		}
		o.Rate = lim
	}
	return o, nil
}

// cmdStep steps agents: "step [host=h1|host=(h1,h2)] [t=15ms]
// [period=15ms] [repeat=N] [inspect]" (every agent if host= is absent)
// with input lines
//
//	egress a1->b1 rate=100Mbps|limit [limit=200Mbps] [bound] [losses=2] [marks=0] [tenant=A]
//	ingress a1->b1 rate=100Mbps [losses=2]
//	pair a1->b1 ...     (both: egress at the source's host, ingress at the destination's)
//	vm b1 [in=..] [arrival=..] [drops=..] [out=..|limit] [dropsrc=a1] [outdemand=..] [indemand=..]
//	msg from=h2 [to=h1] {"kind":"...", ...}
//
// Every line goes to the host it concerns, which must be stepped. The
// agents step in host order at the same time; what they send is delivered
// at the recipients' next step, never in the step it was sent.
func (h *Harness) cmdStep(args *kv, lines []line) (string, error) {
	ags, err := h.pickAgents(args)
	if err != nil {
		return "", err
	}
	period := args.dur("period", 0)
	inspect := args.flag("inspect")
	if args.err != nil {
		return "", args.err
	}
	now, stepped, p0 := time.Duration(0), false, ags[0].a.Period()
	for _, ag := range ags {
		if ag.stepped && (!stepped || ag.now > now) {
			now, stepped = ag.now, true
		}
		if period == 0 && ag.a.Period() != p0 {
			return "", args.l.errorf("agents with different periods: step them apart or give period=")
		}
	}
	if period == 0 {
		period = p0
	}
	times, err := stepTimes(args, now, stepped, period)
	if err != nil {
		return "", err
	}
	if err := args.done(); err != nil {
		return "", err
	}
	stepping := map[string]bool{}
	for _, ag := range ags {
		stepping[ag.host] = true
		if ag.stepped && times[0] <= ag.now {
			return "", args.l.errorf("time must advance: t=%s after %s stepped at %s", times[0], ag.host, ag.now)
		}
	}
	single := ""
	if len(ags) == 1 {
		single = ags[0].host
	}
	var parsed []obsLine
	for i := range lines {
		o, err := h.parseObsLine(&lines[i], single)
		if err != nil {
			return "", err
		}
		for _, host := range o.hosts {
			if !stepping[host] {
				return "", lines[i].errorf("line for host %s, which this step does not step", host)
			}
		}
		parsed = append(parsed, o)
	}
	var r repeatWriter
	for _, now := range times {
		// Observations first, from the limits in force before the round.
		obs := map[string]*mech.HostObs{}
		inboxes := map[string][]mech.Message{}
		for _, ag := range ags {
			obs[ag.host] = &mech.HostObs{Now: now, Period: period}
			inboxes[ag.host] = ag.deliver(now)
		}
		for i := range parsed {
			p := &parsed[i]
			switch p.verb {
			case "egress", "ingress", "pair":
				o, err := h.pairObs(p)
				if err != nil {
					return "", err
				}
				if p.verb != "ingress" {
					ob := obs[p.hosts[0]]
					ob.Egress = append(ob.Egress, o)
				}
				if p.verb != "egress" {
					ob := obs[p.hosts[len(p.hosts)-1]]
					ob.Ingress = append(ob.Ingress, o)
				}
			case "vm":
				vo := p.vmObs
				if p.atLim {
					lim, ok := h.vmEgress[vo.VM]
					if !ok || math.IsInf(lim, 1) {
						return "", p.l.errorf("out=limit but VM %s has no egress limit in force", vo.VM)
					}
					vo.OutRate = lim
				}
				ob := obs[p.hosts[0]]
				ob.VMs = append(ob.VMs, vo)
			case "msg":
				inboxes[p.hosts[0]] = append(inboxes[p.hosts[0]], p.msg)
			}
		}
		var w writer
		quiet := true
		for _, ag := range ags {
			var hw writer
			hostQuiet := !inspect
			inbox := inboxes[ag.host]
			if len(inbox) > 0 {
				hostQuiet = false
				hw.linef("inbox:")
				for _, m := range inbox {
					data, _ := wireJSON(m.Body)
					hw.linef("  %s->%s %s", m.From, m.To, kindOf(data))
				}
			}
			act := ag.a.Step(obs[ag.host], inbox)
			ag.now, ag.stepped = now, true
			if len(act.Limits)+len(act.Schedulers)+len(act.Messages) > 0 {
				hostQuiet = false
			}
			h.apply(act.Limits)
			formatActions(&hw, ag.host, act)
			h.send(&hw, ag.host, now, act.Messages)
			if inspect {
				hw.linef("state:")
				hw.indent = "  "
				h.inspectAgent(&hw, ag)
				hw.indent = ""
			}
			switch {
			case len(ags) == 1:
				w.b.WriteString(hw.String())
			case !hostQuiet:
				w.linef("%s:", ag.host)
				writeIndented(&w.b, hw.String())
			}
			quiet = quiet && hostQuiet
		}
		if quiet && len(ags) > 1 {
			w.linef("no actions")
		}
		r.add(now, quiet, w.String())
	}
	return r.String(), nil
}

// repeatWriter collects the outputs of the steps of one command, each
// under its time; a run of steps where nothing happened (no message in,
// no action) collapses into one line.
type repeatWriter struct {
	b          strings.Builder
	quietFrom  time.Duration
	quietTo    time.Duration
	quietSteps int
}

func (r *repeatWriter) add(now time.Duration, quiet bool, out string) {
	if quiet {
		if r.quietSteps == 0 {
			r.quietFrom = now
		}
		r.quietTo = now
		r.quietSteps++
		return
	}
	r.flush()
	fmt.Fprintf(&r.b, "t=%s:\n", durString(now))
	writeIndented(&r.b, out)
}

// writeIndented writes text with every line indented by two spaces.
func writeIndented(b interface{ WriteString(string) (int, error) }, text string) {
	for _, l := range strings.SplitAfter(text, "\n") {
		if l != "" {
			b.WriteString("  " + l)
		}
	}
}

func (r *repeatWriter) flush() {
	switch r.quietSteps {
	case 0:
		return
	case 1:
		fmt.Fprintf(&r.b, "t=%s: no actions\n", durString(r.quietFrom))
	default:
		fmt.Fprintf(&r.b, "t=%s..%s: no actions (%d steps)\n", durString(r.quietFrom), durString(r.quietTo), r.quietSteps)
	}
	r.quietSteps = 0
}

func (r *repeatWriter) String() string {
	r.flush()
	return r.b.String()
}

// deliver takes the messages sent before now out of the mailbox.
func (ag *agentState) deliver(now time.Duration) []mech.Message {
	var in []mech.Message
	keep := ag.mailbox[:0]
	for _, p := range ag.mailbox {
		if p.sent < now {
			in = append(in, p.m)
		} else {
			keep = append(keep, p)
		}
	}
	ag.mailbox = keep
	return in
}

func (h *Harness) pairLimit(p mech.PairID) float64 {
	if r, ok := h.pairLimits[p]; ok {
		return r
	}
	return mech.Unlimited
}

// apply records the limits in force.
func (h *Harness) apply(ls []mech.Limit) {
	for _, l := range ls {
		switch l.Kind {
		case mech.PairLimit:
			h.pairLimits[l.Pair] = l.Rate
		case mech.VMEgress:
			h.vmEgress[l.VM] = l.Rate
		case mech.VMIngress:
			h.vmIngress[l.VM] = l.Rate
		}
	}
}

// send puts messages sent at now in their recipients' mailboxes, as JSON
// (a host agent delivers what it read from the wire as a
// json.RawMessage), and notes those no agent will receive.
func (h *Harness) send(w *writer, from string, now time.Duration, msgs []mech.Message) {
	for _, m := range msgs {
		if m.From == "" {
			m.From = from
		}
		data, err := wireJSON(m.Body)
		if err != nil {
			continue // formatActions showed the error
		}
		to := h.agents[m.To]
		if to == nil {
			w.linef("undelivered (no agent on %q): %s", m.To, kindOf(data))
			continue
		}
		to.mailbox = append(to.mailbox, pending{sent: now, m: mech.Message{From: m.From, To: m.To, Body: json.RawMessage(data)}})
	}
}

// parseObsLine parses one input line of a step; single is the host
// stepped if only one is.
func (h *Harness) parseObsLine(l *line, single string) (obsLine, error) {
	o := obsLine{l: l, verb: l.fields[0]}
	switch o.verb {
	case "egress", "ingress", "pair":
		if len(l.fields) < 2 {
			return o, l.errorf("%s needs a pair", o.verb)
		}
		src, dst, err := parsePair(l.fields[1])
		if err != nil {
			return o, l.errorf("%v", err)
		}
		sv, ok := h.vm(src)
		if !ok {
			return o, l.errorf("unknown VM %s", src)
		}
		dv, ok := h.vm(dst)
		if !ok {
			return o, l.errorf("unknown VM %s", dst)
		}
		switch o.verb {
		case "egress":
			o.hosts = []string{sv.Host}
		case "ingress":
			o.hosts = []string{dv.Host}
		default:
			o.hosts = []string{sv.Host, dv.Host}
		}
		k := parseKV(l, l.fields[2:])
		o.obs = mech.PairObs{Pair: mech.PairID{Src: src, Dst: dst}, Tenant: k.str("tenant", sv.Tenant)}
		if k.vals["rate"] == "limit" {
			k.used["rate"] = true
			o.atLim = true
		} else {
			o.obs.Rate = k.rate("rate", 0)
		}
		o.limSet = k.has("limit")
		o.obs.Limit = k.rate("limit", mech.Unlimited)
		o.obs.LimiterBound = k.flag("bound")
		o.obs.Losses = k.num("losses", 0)
		o.obs.Marks = k.num("marks", 0)
		return o, k.done()
	case "vm":
		if len(l.fields) < 2 {
			return o, l.errorf("vm needs a VM name")
		}
		v, ok := h.vm(l.fields[1])
		if !ok {
			return o, l.errorf("unknown VM %s", l.fields[1])
		}
		o.hosts = []string{v.Host}
		fields := l.fields[2:]
		if i := slices.Index(fields, "out=limit"); i >= 0 {
			fields = slices.Delete(slices.Clone(fields), i, i+1)
			o.atLim = true
		}
		vo, err := h.parseVMObs(l, v.Name, fields)
		o.vmObs = vo
		return o, err
	case "msg":
		rest := strings.TrimSpace(strings.TrimPrefix(l.text, "msg"))
		var from, to string
		for len(rest) > 0 && rest[0] != '{' {
			f, r, _ := strings.Cut(rest, " ")
			key, val, _ := strings.Cut(f, "=")
			switch {
			case key == "from" && val != "" && from == "":
				from = val
			case key == "to" && val != "" && to == "":
				to = val
			default:
				return o, l.errorf(`expected msg from=HOST [to=HOST] {"kind":...}, got %q`, f)
			}
			rest = strings.TrimSpace(r)
		}
		if from == "" {
			return o, l.errorf(`expected msg from=HOST [to=HOST] {"kind":...}`)
		}
		if to == "" {
			if single == "" {
				return o, l.errorf("msg needs to= when several hosts step")
			}
			to = single
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(rest), &obj); err != nil {
			return o, l.errorf("message body is not a JSON object: %v", err)
		}
		o.hosts = []string{to}
		o.msg = mech.Message{From: from, To: to, Body: json.RawMessage(rest)}
		return o, nil
	}
	return o, l.errorf("unknown line %q (known: egress, ingress, pair, vm, msg)", o.verb)
}

// parseVMObs reads a VM observation's keys (rates in bits/s).
func (h *Harness) parseVMObs(l *line, name string, fields []string) (mech.VMObs, error) {
	k := parseKV(l, fields)
	o := mech.VMObs{
		VM:        name,
		InArrival: k.rate("arrival", 0),
		InRate:    k.rate("in", 0),
		InDrops:   k.rate("drops", 0),
		OutRate:   k.rate("out", 0),
		DropSrc:   k.str("dropsrc", ""),
		OutDemand: k.rate("outdemand", 0),
		InDemand:  k.rate("indemand", 0),
	}
	if o.DropSrc != "" {
		if _, ok := h.vm(o.DropSrc); !ok {
			return o, l.errorf("dropsrc: unknown VM %s", o.DropSrc)
		}
	}
	return o, k.done()
}

// cmdDrop discards the messages waiting for a host's agent (a lost
// control message): "drop host=h1".
func (h *Harness) cmdDrop(args *kv) (string, error) {
	ag, err := h.pickAgent(args)
	if err != nil {
		return "", err
	}
	if err := args.done(); err != nil {
		return "", err
	}
	n := len(ag.mailbox)
	ag.mailbox = nil
	return fmt.Sprintf("dropped %d message(s) to %s", n, ag.host), nil
}

// cmdInspect prints what an agent (host=h1) or the controller
// (host=controller) exposes of its state.
func (h *Harness) cmdInspect(args *kv) (string, error) {
	var w writer
	if args.vals["host"] == mech.ControllerHost {
		args.used["host"] = true
		if err := args.done(); err != nil {
			return "", err
		}
		if h.ctl == nil {
			return "", args.l.errorf("no controller")
		}
		h.inspectController(&w)
		return w.String(), nil
	}
	ag, err := h.pickAgent(args)
	if err != nil {
		return "", err
	}
	if err := args.done(); err != nil {
		return "", err
	}
	h.inspectAgent(&w, ag)
	return w.String(), nil
}

// gpState is what ElasticSwitch's agent exposes: GP shares and guarantees.
type gpState interface {
	Guarantee(p mech.PairID) (float64, bool)
	Share(p mech.PairID, out bool) (float64, bool)
}

// vmLimitState is what Gatekeeper's agent exposes: LIM_j, drop rates and
// notifications sent.
type vmLimitState interface {
	Limit(vm string) (float64, bool)
	DropRate(vm string) (float64, bool)
	Sent() int
}

func (h *Harness) inspectAgent(w *writer, ag *agentState) {
	printed := false
	if s, ok := ag.a.(gpState); ok {
		for _, src := range h.vms {
			for _, dst := range h.vms {
				if src.Name == dst.Name {
					continue
				}
				p := mech.PairID{Src: src.Name, Dst: dst.Name}
				if src.Host == ag.host {
					if sh, ok := s.Share(p, true); ok {
						g, _ := s.Guarantee(p)
						w.linef("%s src-share=%s guarantee=%s", pairString(p), rate(sh), rate(g))
						printed = true
					}
				}
				if dst.Host == ag.host {
					if sh, ok := s.Share(p, false); ok {
						w.linef("%s dst-share=%s", pairString(p), rate(sh))
						printed = true
					}
				}
			}
		}
	}
	if s, ok := ag.a.(vmLimitState); ok {
		for _, v := range h.vms {
			if v.Host != ag.host {
				continue
			}
			lim, _ := s.Limit(v.Name)
			dr, _ := s.DropRate(v.Name)
			w.linef("%s lim=%s drop-rate=%s", v.Name, rate(lim), rate(dr))
		}
		w.linef("notifications sent: %d", s.Sent())
		printed = true
	}
	if !printed {
		w.linef("nothing to inspect")
	}
}
