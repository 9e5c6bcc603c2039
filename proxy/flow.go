package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// errClosed reports a Proxy closed while a request waited.
var errClosed = errors.New("proxy closed")

// appliance is an Appliance the proxy relays to. Its statistics are kept
// per flow (flow.nOut, appArea, done, doneTok) under the flow's lock, which
// the request's accounting holds anyway, and summed by Collect: the
// integral of the appliance's outstanding requests is the sum of its
// flows'.
type appliance struct {
	Appliance
}

// ticket is a request's place in its flow's bucket queue: done is closed
// when the buckets let it through.
type ticket struct{ done chan struct{} }

// vecInline is the path length up to which an exchange's vectors live in
// the exchange and a request's cost vectors on the stack (no allocation).
const vecInline = 8

// vecBuf is room for a cost vector on the caller's stack.
type vecBuf [vecInline]float64

// vec returns a vector of the path's length in b, or allocated for a
// longer path.
func (f *flow) vec(b *vecBuf) []float64 {
	if k := len(f.path); k <= len(b) {
		return b[:k]
	}
	return make([]float64, len(f.path))
}

// exchange is one request and its reply as the flow charges them.
type exchange struct {
	typ    string
	method string // HTTP: for the response's framing

	mu sync.Mutex // guards what follows: both relay goroutines charge
	// Wire bytes each way and payload bytes, known or expected so far.
	reqWire, reqSize, respWire, respSize int64
	charged                              []float64 // tokens charged per path element
	outTok                               []float64 // tokens counted as outstanding per path element
	sent                                 bool      // counted as outstanding at the appliance
	ended                                bool      // answered or abandoned

	vec [2 * vecInline]float64 // charged and outTok for a short path
}

// flow is a Pulsar flow: the shared buckets and statistics of every
// connection from one VM to one appliance.
type flow struct {
	p      *Proxy
	id     mech.FlowID
	tenant string
	path   []mech.PathElem
	app    *appliance
	m      *tokenbucket.Multi
	kick   chan struct{}
	alloc  []float64 // the allocation in force, nil on the default rate; guarded by p.mu

	// replies are the expected reply of each request type (wire and
	// payload bytes), learnt from the replies that passed: read without a
	// lock (newExchange); the map is replaced, never changed, when a type
	// is added, and the estimates are written holding mu.
	replies atomic.Pointer[map[string]*replyEstimate]

	mu      sync.Mutex
	conns   int    // connections being served
	refused uint64 // connections refused (MaxConnsPerFlow) since the last Collect
	pumping bool
	out     []float64 // tokens outstanding per element
	nOut    int       // exchanges with tokens in out: the flow's requests outstanding at the appliance
	area    []float64 // ∫ out dt, token·ns
	last    time.Time

	// The appliance's statistics from this flow since the last Collect:
	// ∫ nOut dt (request·ns) up to appLast, the requests answered and
	// their virtual cost.
	appArea float64
	appLast time.Time
	done    uint64
	doneTok float64
}

// replyEstimate is a request type's expected reply: a moving average of
// the replies seen, wire and payload bytes (float64 bits, written holding
// the flow's mu, read at any time).
type replyEstimate struct{ wire, size atomic.Uint64 }

func (e *replyEstimate) load() (wire, size float64) {
	return math.Float64frombits(e.wire.Load()), math.Float64frombits(e.size.Load())
}

func (e *replyEstimate) store(wire, size float64) {
	e.wire.Store(math.Float64bits(wire))
	e.size.Store(math.Float64bits(size))
}

// replyWeight is the weight of the latest reply in the moving average.
const replyWeight = 1.0 / 16

// maxReplyTypes bounds the request types a flow keeps estimates for (a
// client may send any command name).
const maxReplyTypes = 256

// addConn counts a connection of the flow, false (and counts a refusal)
// when the flow has Config.MaxConnsPerFlow already.
func (f *flow) addConn() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns >= f.p.cfg.MaxConnsPerFlow {
		f.refused++
		return false
	}
	f.conns++
	return true
}

func (f *flow) removeConn() {
	f.mu.Lock()
	f.conns--
	f.mu.Unlock()
}

func (f *flow) newExchange(typ string) *exchange {
	k := len(f.path)
	ex := &exchange{typ: typ}
	s := ex.vec[:]
	if 2*k > len(s) {
		s = make([]float64, 2*k)
	}
	ex.charged, ex.outTok = s[:k:k], s[k:2*k:2*k]
	// A request is charged its expected reply at once — on the reverse
	// links and in the appliance's cost — so that what waits and what is
	// outstanding count on every element of the path, as the simulator
	// charges a request type whose sizes it knows; the reply's excess is
	// charged when it passes.
	if m := f.replies.Load(); m != nil {
		if e := (*m)[typ]; e != nil {
			wire, size := e.load()
			ex.respWire, ex.respSize = int64(wire), int64(size)
		}
	}
	return ex
}

// learnReply updates the expected reply of a request type. Holding f.mu.
func (f *flow) learnReply(typ string, wire, size int64) {
	var m map[string]*replyEstimate
	if p := f.replies.Load(); p != nil {
		m = *p
	}
	if e := m[typ]; e != nil {
		w, s := e.load()
		e.store(w+replyWeight*(float64(wire)-w), s+replyWeight*(float64(size)-s))
		return
	}
	if len(m) >= maxReplyTypes {
		return
	}
	e := &replyEstimate{}
	e.store(float64(wire), float64(size))
	next := make(map[string]*replyEstimate, len(m)+1)
	maps.Copy(next, m)
	next[typ] = e
	f.replies.Store(&next)
}

// target sets t (len(f.path)) to the tokens ex costs per path element by
// what is known of it: request bytes on Forward links, reply bytes on
// Reverse links, the virtual cost of its type and payload at the
// appliance. Holding ex.mu.
func (f *flow) target(ex *exchange, t []float64) {
	app := math.NaN()
	for i, e := range f.path {
		switch e.Role {
		case mech.Forward:
			t[i] = float64(ex.reqWire)
		case mech.Reverse:
			t[i] = float64(ex.respWire)
		case mech.Appliance:
			if math.IsNaN(app) {
				app = f.app.Cost(ex.typ, float64(ex.reqSize+ex.respSize))
				if !(app >= 0) || math.IsInf(app, 1) {
					app = 0
				}
			}
			t[i] = app
		}
	}
}

// charge sets cost (len(f.path), on the caller's stack: see vec) to what
// ex costs beyond what it was charged and counts it as charged, and
// returns it, nil when nothing. Overcharges are not refunded. Holding
// ex.mu.
func (f *flow) charge(ex *exchange, cost []float64) []float64 {
	f.target(ex, cost)
	more := false
	for i, t := range cost {
		if d := t - ex.charged[i]; d > 0 {
			cost[i] = d
			ex.charged[i] = t
			more = true
		} else {
			cost[i] = 0
		}
	}
	if !more {
		return nil
	}
	return cost
}

// take debits cost from the flow's buckets if they let it through now,
// else queues it (a copy: cost may be on the caller's stack) with data,
// starts the release loop and returns false.
func (f *flow) take(now time.Time, cost []float64, data any) (bool, error) {
	if ok, err := f.m.TryTake(now, cost); ok || err != nil {
		return ok, err
	}
	ok, err := f.m.Offer(tokenbucket.Request{Cost: slices.Clone(cost), Data: data})
	if err == nil && !ok {
		f.ensurePump()
	}
	return ok, err
}

// admit charges the tokens ex's request adds by what is known of it (wire
// and payload bytes so far, set here), waiting until every bucket holds
// them. flush runs before a wait. Once admitted, the request's tokens count
// as outstanding. A request the buckets let through at once costs no
// allocation; one that waits takes a ticket.
func (f *flow) admit(ctx context.Context, ex *exchange, reqWire, reqSize int64, flush func() error) error {
	var b vecBuf
	ex.mu.Lock()
	ex.reqWire, ex.reqSize = reqWire, reqSize
	cost := f.charge(ex, f.vec(&b))
	ex.mu.Unlock()
	now := f.p.clock.Now()
	if cost != nil {
		ok, err := f.m.TryTake(now, cost)
		if err != nil {
			return fmt.Errorf("admit %s: %w", ex.typ, err)
		}
		if !ok {
			// The request queues: a ticket, and its own copy of cost.
			t := &ticket{done: make(chan struct{})}
			if ok, err = f.m.Offer(tokenbucket.Request{Cost: slices.Clone(cost), Data: t}); err != nil {
				return fmt.Errorf("admit %s: %w", ex.typ, err)
			}
			if !ok {
				f.ensurePump()
				if err := flush(); err != nil {
					return err
				}
				select {
				case <-t.done:
				case <-ctx.Done():
					return ctx.Err()
				case <-f.p.closed:
					return errClosed
				}
			}
			now = f.p.clock.Now()
		}
	}
	f.outstanding(ex, cost, now)
	return nil
}

// outstanding counts tokens of ex as outstanding (and ex itself at the
// appliance, the first time) from now on.
func (f *flow) outstanding(ex *exchange, cost []float64, now time.Time) {
	ex.mu.Lock()
	first := !ex.sent && !ex.ended
	ex.sent = true
	if ex.ended {
		cost = nil
	}
	for i, c := range cost {
		ex.outTok[i] += c
	}
	ex.mu.Unlock()
	if cost != nil || first {
		f.mu.Lock()
		f.integrate(now)
		for i, c := range cost {
			f.out[i] += c
		}
		if first {
			f.nOut++
		}
		f.mu.Unlock()
	}
}

// debt charges, without waiting, what ex turned out to cost beyond what it
// was charged: the tokens enter the flow's bucket queue as a request with
// no bytes, which later requests of the flow queue behind (Pulsar's buckets
// in debt). While ex is outstanding they count as outstanding too.
func (f *flow) debt(ex *exchange, reqWire, reqSize int64) error {
	var b vecBuf
	ex.mu.Lock()
	ex.reqWire, ex.reqSize = reqWire, reqSize
	cost := f.charge(ex, f.vec(&b))
	ex.mu.Unlock()
	if cost == nil {
		return nil
	}
	now := f.p.clock.Now()
	if _, err := f.take(now, cost, nil); err != nil {
		return fmt.Errorf("charge %s: %w", ex.typ, err)
	}
	f.outstanding(ex, cost, now)
	return nil
}

// unmatched charges, without waiting, wire bytes of replies that answer no
// request (RESP3 pushes, a subscriber's or a monitor's messages) on the
// flow's reverse links: nothing at the appliance, whose work for them was
// charged to the requests that caused them (a PUBLISH, a SUBSCRIBE). The
// tokens enter the flow's bucket queue like a debt when the buckets do
// not hold them; the returned ticket is then closed once they have passed
// (nil: they passed at once).
func (f *flow) unmatched(wire int64) (*ticket, error) {
	if wire <= 0 {
		return nil, nil
	}
	var b vecBuf
	cost := f.vec(&b)
	some := false
	for i, e := range f.path {
		cost[i] = 0
		if e.Role == mech.Reverse {
			cost[i], some = float64(wire), true
		}
	}
	if !some {
		return nil, nil
	}
	now := f.p.clock.Now()
	if ok, err := f.m.TryTake(now, cost); ok || err != nil {
		if err != nil {
			return nil, fmt.Errorf("charge unmatched replies: %w", err)
		}
		return nil, nil
	}
	t := &ticket{done: make(chan struct{})}
	ok, err := f.m.Offer(tokenbucket.Request{Cost: slices.Clone(cost), Data: t})
	if err != nil {
		return nil, fmt.Errorf("charge unmatched replies: %w", err)
	}
	if ok {
		return nil, nil
	}
	f.ensurePump()
	return t, nil
}

// answered settles ex once its reply has passed: wire and payload bytes of
// the reply, the debt of what it cost beyond its charge, the refund of
// what it was charged beyond its cost; it is no longer outstanding.
func (f *flow) answered(ex *exchange, respWire, respSize int64) error {
	var b1, b2 vecBuf
	ex.mu.Lock()
	ex.respWire, ex.respSize = respWire, respSize
	cost, refund := f.settle(ex, f.vec(&b1), f.vec(&b2))
	appTok := f.appTokens(ex)
	ex.mu.Unlock()
	now := f.p.clock.Now()
	var err error
	if cost != nil {
		_, err = f.take(now, cost, nil)
	}
	if refund != nil && err == nil {
		if err = f.m.Refund(refund); err == nil {
			f.nudge()
		}
	}
	f.end(ex, now, &reply{wire: respWire, size: respSize, tokens: appTok})
	return err
}

// settle sets ex's charges to what it costs by what is known of it: cost
// is set to what it costs beyond its charge, refund to what it was charged
// beyond its cost (an expected reply or a Range larger than the reply),
// each returned nil when nothing; both have len(f.path), on the caller's
// stack. Holding ex.mu.
func (f *flow) settle(ex *exchange, cost, refund []float64) ([]float64, []float64) {
	f.target(ex, cost)
	more, less := false, false
	for i, t := range cost {
		d := t - ex.charged[i]
		cost[i], refund[i] = 0, 0
		switch {
		case d > 0:
			cost[i], more = d, true
		case d < 0:
			refund[i], less = -d, true
		default:
			continue
		}
		ex.charged[i] = t
	}
	if !more {
		cost = nil
	}
	if !less {
		refund = nil
	}
	return cost, refund
}

// appTokens is ex's virtual cost at the appliance as charged. Holding ex.mu.
func (f *flow) appTokens(ex *exchange) float64 {
	for i, e := range f.path {
		if e.Role == mech.Appliance {
			return ex.charged[i]
		}
	}
	return f.app.Cost(ex.typ, float64(ex.reqSize+ex.respSize))
}

// reply is what an answered request's reply was: wire and payload bytes,
// and the request's virtual cost as charged.
type reply struct {
	wire, size int64
	tokens     float64
}

// end takes ex out of the outstanding counts at now: answered (r: its
// reply, which the flow learns), or abandoned with its connection (r nil).
func (f *flow) end(ex *exchange, now time.Time, r *reply) {
	ex.mu.Lock()
	ended := ex.ended
	ex.ended = true
	sent := ex.sent && !ended
	out := ex.outTok
	ex.mu.Unlock()
	if !sent && r == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r != nil {
		f.learnReply(ex.typ, r.wire, r.size)
	}
	if !sent {
		return
	}
	f.integrate(now)
	f.nOut--
	for i, c := range out {
		f.out[i] = max(0, f.out[i]-c)
	}
	if f.nOut == 0 {
		clear(f.out) // no rounding residue
	}
	if r != nil {
		f.done++
		f.doneTok += r.tokens
	}
}

// integrate adds the outstanding tokens and requests held since f.last
// and f.appLast. Holding f.mu.
func (f *flow) integrate(now time.Time) {
	f.integrateApp(now)
	if !now.After(f.last) {
		return
	}
	dt := float64(now.Sub(f.last))
	for i, x := range f.out {
		f.area[i] += x * dt
	}
	f.last = now
}

// integrateApp adds the requests outstanding at the appliance since
// f.appLast. Holding f.mu.
func (f *flow) integrateApp(now time.Time) {
	if now.After(f.appLast) {
		f.appArea += float64(f.nOut) * float64(now.Sub(f.appLast))
		f.appLast = now
	}
}

func (f *flow) setRates(rates []float64) error {
	if err := f.m.SetRates(rates); err != nil {
		return err
	}
	f.nudge()
	return nil
}

// ensurePump makes sure a release loop runs while requests are queued.
func (f *flow) ensurePump() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pumping {
		f.nudgeLocked()
		return
	}
	f.pumping = true
	go f.pump()
}

func (f *flow) nudge() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pumping {
		f.nudgeLocked()
	}
}

func (f *flow) nudgeLocked() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// pump releases the flow's queued requests as the buckets refill, in FIFO
// order, and exits when the queue is empty.
func (f *flow) pump() {
	var buf []tokenbucket.Request
	for {
		buf = f.m.Release(buf[:0])
		for i := range buf {
			if t, ok := buf[i].Data.(*ticket); ok {
				close(t.done)
			}
			buf[i] = tokenbucket.Request{}
		}
		f.mu.Lock()
		if f.m.Queued() == 0 {
			f.pumping = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		var timer <-chan time.Time
		if d, ok := f.m.NextRelease(); ok {
			if d <= 0 {
				continue
			}
			timer = f.p.clock.After(d)
		}
		select {
		case <-f.kick:
		case <-timer:
		case <-f.p.closed:
			return
		}
	}
}

// ApplianceStats is what the proxy measured at one appliance over a
// Collect period (Pulsar §4.3's inputs as one host sees them).
type ApplianceStats struct {
	Appliance string
	// Throughput is the virtual cost, tokens/s, of the requests answered
	// in the period; Completed counts them.
	Throughput float64
	Completed  uint64
	// Outstanding is the time average of the requests forwarded to the
	// appliance and not yet answered.
	Outstanding float64
}

// Observation is one Collect period's measurements.
type Observation struct {
	Start, End time.Time
	// Flows holds, per flow active in the period or allocated, Pulsar
	// §4.2's vectors in the controller's shape (see Collect).
	Flows      []mech.FlowObs
	Appliances []ApplianceStats
	// Refused counts, per flow, the connections closed at once in the
	// period for being beyond Config.MaxConnsPerFlow (nil: none).
	Refused map[mech.FlowID]uint64
}

// Collect returns the measurements since the previous Collect (or New) and
// starts a new period. Per flow (mech.FlowObs, indexed like the flow's
// Path): Used, the tokens/s its requests consumed (what its buckets let
// through, debts included); Backlog, the tokens of the requests queued at
// the end; Queued and Outstanding, the time averages of the tokens queued
// at its buckets and of the tokens of requests forwarded and not yet
// answered; Allocation, the allocation in force (nil on the default rate).
// A flow appears when it had traffic in the period, still has requests
// queued or outstanding, or is allocated.
func (p *Proxy) Collect() Observation {
	now := p.clock.Now()
	p.mu.Lock()
	flows := slices.Clone(p.order)
	allocs := make([][]float64, len(flows))
	for i, fl := range flows {
		allocs[i] = slices.Clone(fl.alloc)
	}
	obs := Observation{Start: p.last, End: now}
	p.last = now
	p.mu.Unlock()
	// Per appliance, the sums over its flows.
	type appSums struct {
		area, doneTok float64
		out           int
		done          uint64
	}
	sums := make(map[*appliance]*appSums, len(p.apps))
	for _, a := range p.apps {
		sums[a] = &appSums{}
	}
	for i, fl := range flows {
		// The appliance's period ends at now (first: collect integrates
		// the flow further, up to its buckets' end of period).
		s := sums[fl.app]
		fl.mu.Lock()
		fl.integrateApp(now)
		s.area += fl.appArea
		s.out += fl.nOut
		s.done += fl.done
		s.doneTok += fl.doneTok
		fl.appArea, fl.done, fl.doneTok = 0, 0, 0
		if fl.refused > 0 {
			if obs.Refused == nil {
				obs.Refused = make(map[mech.FlowID]uint64)
			}
			obs.Refused[fl.id] = fl.refused
			fl.refused = 0
		}
		fl.mu.Unlock()
		if fo, ok := fl.collect(allocs[i]); ok {
			obs.Flows = append(obs.Flows, fo)
		}
	}
	names := make([]string, 0, len(p.apps))
	for name := range p.apps {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := sums[p.apps[name]]
		st := ApplianceStats{Appliance: name, Completed: s.done}
		if span := now.Sub(obs.Start); span > 0 {
			st.Throughput = s.doneTok / span.Seconds()
			st.Outstanding = s.area / float64(span)
		} else {
			st.Outstanding = float64(s.out)
		}
		obs.Appliances = append(obs.Appliances, st)
	}
	return obs
}

func (f *flow) collect(alloc []float64) (mech.FlowObs, bool) {
	st := f.m.Stats()
	k := len(f.path)
	fo := mech.FlowObs{
		Flow: f.id, Tenant: f.tenant, Path: slices.Clone(f.path),
		Used: make([]float64, k), Backlog: st.Backlog, Queued: st.AvgQueued,
		Outstanding: make([]float64, k), Allocation: alloc,
	}
	span := st.End.Sub(st.Start)
	if span > 0 {
		for i, u := range st.Used {
			fo.Used[i] = u / span.Seconds()
		}
	}
	f.mu.Lock()
	f.integrate(st.End)
	active := st.Offered > 0 || st.Passed > 0 || alloc != nil
	for i := range f.out {
		if span > 0 {
			fo.Outstanding[i] = f.area[i] / float64(span)
		} else {
			fo.Outstanding[i] = f.out[i]
		}
		active = active || f.out[i] > 0 || f.area[i] > 0 || st.Backlog[i] > 0
	}
	clear(f.area)
	f.mu.Unlock()
	return fo, active
}
