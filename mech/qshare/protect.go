package qshare

import (
	"slices"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch/ra"
)

// ContentionKind is the kind of Contention messages.
const ContentionKind = "qshare.contention.v1"

// Contention is a hypervisor's message to the other hypervisors of a
// D-tenant (dedicated: hose): the tenant's VM pair Src → Dst, whose source
// is on the sender, is held back below its hose guarantee by the network
// (Deficit > 0: by that much), or was and still depends on the room its
// siblings made (Deficit 0). See protector.
type Contention struct {
	Tenant  string  `json:"tenant"`
	Src     string  `json:"src"`
	Dst     string  `json:"dst"`
	Deficit float64 `json:"deficit"`
	// Wide: the caps on the pairs that share a host link with it did not
	// help; every pair of the tenant is asked.
	Wide bool `json:"wide,omitempty"`
}

// MessageKind implements mech.Body.
func (Contention) MessageKind() string { return ContentionKind }

// MarshalJSON encodes the body with its kind (mech.MarshalBody).
func (c Contention) MarshalJSON() ([]byte, error) {
	type fields Contention
	return mech.MarshalBody(ContentionKind, fields(c))
}

// packetBits turns the observations' loss counts (packets) into bits:
// full-size Ethernet frames.
const packetBits = 1500 * 8

// capExpiry is how many agent periods a cap outlives the last Contention
// that asked for it: one for the next to be sent, one for it to be
// delivered, one to spare.
const capExpiry = 3

// protector keeps the hose guarantees of VM pairs inside their tenant's
// dedicated queue (dedicated: hose). The queue isolates the tenant from
// the others and gives it at least its reservation on every link, at
// least the sum of its pairs' hose guarantees there; how its own pairs
// share the queue is up to their traffic (TCP by connections, UDP by
// rate), so one pair can keep a sibling below its guarantee. The pairs
// stay unlimited, as in the paper, until that is seen (docs/qshare.md,
// "Inside a dedicated queue"):
//
//   - A pair is short when it is below its guarantee B (ElasticSwitch's
//     guarantee partitioning, which every hypervisor runs for every
//     tenant) while the network holds it back (congestion events, its own
//     limiter not binding) for two periods in a row (a pair that starts
//     or ends within a period is not). Its hypervisor tells every
//     hypervisor of the tenant how far below B it is (Contention).
//   - A hypervisor that hears it caps the tenant's pairs it sources that
//     share a host link with the short pair (the same source host or the
//     same destination host): a pair losing at least as much as it
//     delivers (unresponsive traffic the queue cannot carry, which takes
//     from its siblings through drops whatever they do) at its guarantee;
//     the others above their floor give up the deficit between them, in
//     proportion to what they have above it, so that the tenant's total
//     does not shrink and the short pair, held back by the network, takes
//     what they freed. A pair's floor is the larger of its guarantee and
//     what its hoses would give it unbounded: its source VM's out-hose
//     split equally among the VM's pairs, at most its destination VM's
//     in-hose (guarantee partitioning starts a new pair low).
//   - While the short pair still demands (held back by the network or by
//     its own cap) and keeps what the caps gave it (above its rate when
//     reported, and at most its guarantee plus the deficit it reported),
//     its hypervisor repeats the message every period with the deficit
//     left, and the caps stay; they end capExpiry periods after the last
//     one. A pair that did not gain is limited by its demand or where its
//     siblings do not cross: it is not reported again for a control
//     interval unless it falls further.
type protector struct {
	ivl, period time.Duration
	host        string
	det         *ra.Detector
	hostOf      func(vm string) string
	vm          func(name string) (mech.VM, bool)
	peers       map[string][]string // tenant → the other hosts with its VMs
	heard       []Contention        // since the last step
	short       map[mech.PairID]*shortPair
	capped      map[mech.PairID]*pairCap
	reps        []Contention   // scratch: the reports of this step
	pairs       map[string]int // scratch: local VM → pairs it sends on
}

// shortPair is a local-source pair of a D-tenant seen short.
type shortPair struct {
	periods  int           // short periods in a row (before a report)
	reported bool          // reported and still followed
	wide     bool          // to every hypervisor's pairs of the tenant, not only those on its host links
	at       time.Duration // when reported
	rate     float64       // its rate when reported
	deficit  float64       // and its deficit
	quiet    time.Duration // not reported again before, unless it falls below rate
}

// pairCap is a cap on a local-source pair made for short siblings.
type pairCap struct {
	rate float64
	atG  bool          // at its guarantee, whatever it becomes (unresponsive)
	last time.Duration // the last Contention that asked for it
}

func newProtector(p Params, env mech.Env) *protector {
	pr := &protector{ivl: p.Interval, period: p.ES.RA.Period, host: env.Host,
		det: ra.NewDetector(p.ES.RA.Congestion, p.ES.RA.Signal), hostOf: env.HostOf, vm: env.VM,
		peers: map[string][]string{}, short: map[mech.PairID]*shortPair{}, capped: map[mech.PairID]*pairCap{},
		pairs: map[string]int{}}
	for _, v := range env.VMs {
		if v.Host != env.Host && !slices.Contains(pr.peers[v.Tenant], v.Host) {
			pr.peers[v.Tenant] = append(pr.peers[v.Tenant], v.Host)
		}
	}
	for t := range pr.peers {
		slices.Sort(pr.peers[t])
	}
	return pr
}

// hear takes a Contention message.
func (pr *protector) hear(c Contention) { pr.heard = append(pr.heard, c) }

// step reports the short local pairs of D-tenants, caps the local pairs
// that share a host link with short pairs, and puts in want the limit
// every local-source pair of a D-tenant should have (mech.Unlimited when
// uncapped).
func (pr *protector) step(obs *mech.HostObs, inbox []mech.Message, ded func(tenant string) bool,
	es *elasticswitch.Agent, tenantOf func(vm string) string, want map[mech.PairID]float64) []mech.Message {
	now := obs.Now
	pr.det.Receive(inbox, pr.hostOf)
	pr.det.Report(pr.host, obs.Ingress, pr.hostOf) // feeds the pairs within this host
	defer pr.det.EndStep()
	pr.reps = pr.reps[:0]
	for _, c := range pr.heard {
		if ded(c.Tenant) {
			pr.reps = append(pr.reps, c)
		}
	}
	pr.heard = pr.heard[:0]
	var msgs []mech.Message
	seen := map[mech.PairID]bool{}
	for i := range obs.Egress {
		o := &obs.Egress[i]
		t := tenantOf(o.Pair.Src)
		g, ok := es.Guarantee(o.Pair)
		if !ded(t) || !ok || !(g > 0) {
			continue
		}
		seen[o.Pair] = true
		held := pr.det.Congestion(o) > 0 && !o.LimiterBound && o.Rate > 0
		s := pr.short[o.Pair]
		if s == nil {
			s = &shortPair{}
			pr.short[o.Pair] = s
		}
		var c *Contention
		switch {
		case s.reported && now-s.at < 2*pr.period:
			// The caps its report asked for take a period to be heard
			// and one to show.
		case s.reported && (held || o.LimiterBound) && o.Rate > s.rate && o.Rate <= g+s.deficit:
			c = &Contention{Deficit: max(g-o.Rate, 0), Wide: s.wide}
		case s.reported && (held || o.LimiterBound) && o.Rate <= s.rate && !s.wide:
			// The caps on the host links did not help: the pair may
			// meet its siblings on a link further in.
			s.wide, s.at, s.deficit = true, now, max(g-o.Rate, 0)
			c = &Contention{Deficit: s.deficit, Wide: true}
		case s.reported && (held || o.LimiterBound) && o.Rate <= s.rate:
			// The caps did not help: limited by its own demand, or
			// where its siblings do not cross.
			s.reported, s.periods, s.quiet = false, 0, now+pr.ivl
		case s.reported:
			s.reported, s.periods = false, 0
		case held && o.Rate < g && (now >= s.quiet || o.Rate < s.rate):
			if s.periods++; s.periods >= 2 {
				s.reported, s.wide, s.at, s.rate, s.deficit, s.periods = true, false, now, o.Rate, g-o.Rate, 0
				c = &Contention{Deficit: g - o.Rate}
			}
		default:
			s.periods = 0
		}
		if c == nil {
			continue
		}
		c.Tenant, c.Src, c.Dst = t, o.Pair.Src, o.Pair.Dst
		if pr.unresponsive(o, g, obs.Period) {
			// Short through its own drops as much as its siblings':
			// at its guarantee as well.
			pr.capAtG(o.Pair, now)
		} else if pc := pr.capped[o.Pair]; pc != nil {
			pc.last = now
		}
		pr.reps = append(pr.reps, *c)
		for _, h := range pr.peers[t] {
			msgs = append(msgs, mech.Message{To: h, Body: *c})
		}
	}
	for p, s := range pr.short {
		if !seen[p] || (!s.reported && s.periods == 0 && now >= s.quiet) {
			delete(pr.short, p)
		}
	}
	pr.cut(obs, es, tenantOf)
	for i := range obs.Egress {
		o := &obs.Egress[i]
		if !ded(tenantOf(o.Pair.Src)) {
			continue
		}
		want[o.Pair] = mech.Unlimited
		pc := pr.capped[o.Pair]
		if pc == nil {
			continue
		}
		if now-pc.last >= capExpiry*pr.period {
			delete(pr.capped, o.Pair)
			continue
		}
		g, _ := es.Guarantee(o.Pair)
		want[o.Pair] = max(pc.rate, g)
		if pc.atG {
			want[o.Pair] = g
		}
	}
	for p := range pr.capped {
		if _, ok := want[p]; !ok {
			delete(pr.capped, p) // not seen, or its tenant left its queue
		}
	}
	return msgs
}

// cut makes and renews the caps the reports of this step ask for (see
// protector).
func (pr *protector) cut(obs *mech.HostObs, es *elasticswitch.Agent, tenantOf func(string) string) {
	if len(pr.reps) == 0 {
		return
	}
	now := obs.Now
	clear(pr.pairs)
	for i := range obs.Egress {
		if obs.Egress[i].Rate > 0 {
			pr.pairs[obs.Egress[i].Pair.Src]++
		}
	}
	type cand struct {
		o     *mech.PairObs
		extra float64 // above its floor
	}
	var cands []cand
	for _, c := range pr.reps {
		short := mech.PairID{Src: c.Src, Dst: c.Dst}
		srcHost, dstHost := pr.hostOf(c.Src), pr.hostOf(c.Dst)
		cands = cands[:0]
		sum := 0.0
		for i := range obs.Egress {
			o := &obs.Egress[i]
			if o.Pair == short || tenantOf(o.Pair.Src) != c.Tenant ||
				(!c.Wide && pr.host != srcHost && pr.hostOf(o.Pair.Dst) != dstHost) {
				continue
			}
			g, ok := es.Guarantee(o.Pair)
			if !ok || !(g > 0) {
				continue
			}
			pc := pr.capped[o.Pair]
			if pc != nil {
				pc.last = now // still needed
			}
			if !(c.Deficit > 0) {
				continue
			}
			if pr.unresponsive(o, g, obs.Period) {
				pr.capAtG(o.Pair, now)
				continue
			}
			floor := g
			if src, ok := pr.vm(o.Pair.Src); ok && pr.pairs[o.Pair.Src] > 0 {
				hose := src.Out / float64(pr.pairs[o.Pair.Src])
				if dst, ok := pr.vm(o.Pair.Dst); ok {
					hose = min(hose, dst.In)
				}
				floor = max(floor, hose)
			}
			if o.Rate > floor {
				cands = append(cands, cand{o, o.Rate - floor})
				sum += o.Rate - floor
			}
		}
		for _, k := range cands {
			pr.capAt(k.o.Pair, k.o.Rate-min(k.extra, c.Deficit*k.extra/sum), now)
		}
	}
}

// unresponsive says whether a pair lost at least as much as it delivered,
// and at least its guarantee g, in the period: traffic that does not
// back off (UDP) beyond what its path carries.
func (pr *protector) unresponsive(o *mech.PairObs, g float64, period time.Duration) bool {
	secs := period.Seconds()
	lost := o.Losses * packetBits / secs
	return secs > 0 && lost >= max(o.Rate, g)
}

// capAtG caps a pair at its guarantee, from now.
func (pr *protector) capAtG(p mech.PairID, now time.Duration) {
	pc := pr.capped[p]
	if pc == nil {
		pc = &pairCap{}
		pr.capped[p] = pc
	}
	pc.atG, pc.last = true, now
}

// capAt caps a pair at rate (or lower, if it is already), from now.
func (pr *protector) capAt(p mech.PairID, rate float64, now time.Duration) {
	pc := pr.capped[p]
	if pc == nil {
		pc = &pairCap{rate: rate}
		pr.capped[p] = pc
	}
	pc.rate, pc.last = min(pc.rate, rate), now
}
