package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// errClosed reports a Proxy closed while a request waited.
var errClosed = errors.New("proxy closed")

// appliance is an Appliance with its statistics.
type appliance struct {
	Appliance

	mu      sync.Mutex
	out     int       // requests forwarded and not answered
	area    float64   // ∫ out dt, request·ns, since last
	last    time.Time // time up to which area is integrated
	done    uint64    // requests answered since the last Collect
	doneTok float64   // their virtual cost
}

func (a *appliance) integrate(now time.Time) {
	if now.After(a.last) {
		a.area += float64(a.out) * float64(now.Sub(a.last))
		a.last = now
	}
}

func (a *appliance) add(now time.Time, d int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.integrate(now)
	a.out += d
}

func (a *appliance) answered(now time.Time, tokens float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.integrate(now)
	a.out--
	a.done++
	a.doneTok += tokens
}

// ticket is a request's place in its flow's bucket queue: done is closed
// when the buckets let it through.
type ticket struct{ done chan struct{} }

// exchange is one request and its reply as the flow charges them.
type exchange struct {
	typ    string
	method string // HTTP: for the response's framing
	// passthrough: the request switches the connection to unmatched
	// replies (SUBSCRIBE, MONITOR).
	passthrough bool

	mu sync.Mutex // guards what follows: both relay goroutines charge
	// Wire bytes each way and payload bytes, known or expected so far.
	reqWire, reqSize, respWire, respSize int64
	charged                              []float64 // tokens charged per path element
	outTok                               []float64 // tokens counted as outstanding per path element
	sent                                 bool      // counted as outstanding at the appliance
	ended                                bool      // answered or abandoned
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
	// payload bytes), learnt from the replies that passed; guarded by mu.
	replies map[string]replyEstimate

	mu      sync.Mutex
	pumping bool
	out     []float64 // tokens outstanding per element
	nOut    int       // exchanges with tokens in out
	area    []float64 // ∫ out dt, token·ns
	last    time.Time
}

// replyEstimate is a request type's expected reply: a moving average of
// the replies seen.
type replyEstimate struct{ wire, size float64 }

// replyWeight is the weight of the latest reply in the moving average.
const replyWeight = 1.0 / 16

// maxReplyTypes bounds the request types a flow keeps estimates for (a
// client may send any command name).
const maxReplyTypes = 256

func (f *flow) newExchange(typ string) *exchange {
	k := len(f.path)
	s := make([]float64, 2*k)
	ex := &exchange{typ: typ, charged: s[:k:k], outTok: s[k:]}
	// A request is charged its expected reply at once — on the reverse
	// links and in the appliance's cost — so that what waits and what is
	// outstanding count on every element of the path, as the simulator
	// charges a request type whose sizes it knows; the reply's excess is
	// charged when it passes.
	f.mu.Lock()
	if e, ok := f.replies[typ]; ok {
		ex.respWire, ex.respSize = int64(e.wire), int64(e.size)
	}
	f.mu.Unlock()
	return ex
}

// learnReply updates the expected reply of a request type.
func (f *flow) learnReply(typ string, wire, size int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.replies[typ]
	switch {
	case ok:
		e.wire += replyWeight * (float64(wire) - e.wire)
		e.size += replyWeight * (float64(size) - e.size)
	case len(f.replies) < maxReplyTypes:
		if f.replies == nil {
			f.replies = map[string]replyEstimate{}
		}
		e = replyEstimate{wire: float64(wire), size: float64(size)}
	default:
		return
	}
	f.replies[typ] = e
}

// target returns the tokens ex costs per path element by what is known of
// it: request bytes on Forward links, reply bytes on Reverse links, the
// virtual cost of its type and payload at the appliance. Holding ex.mu.
func (f *flow) target(ex *exchange) []float64 {
	t := make([]float64, len(f.path))
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
	return t
}

// charge returns what ex costs beyond what it was charged (nil: nothing)
// and counts it as charged. Overcharges are not refunded. Holding ex.mu.
func (f *flow) charge(ex *exchange) []float64 {
	var cost []float64
	for i, t := range f.target(ex) {
		if d := t - ex.charged[i]; d > 0 {
			if cost == nil {
				cost = make([]float64, len(f.path))
			}
			cost[i] = d
			ex.charged[i] = t
		}
	}
	return cost
}

// admit charges the tokens ex's request adds by what is known of it (set
// fields under ex.mu first, then call), waiting until every bucket holds
// them. flush runs before a wait. Once admitted, the request's tokens count
// as outstanding.
func (f *flow) admit(ctx context.Context, ex *exchange, flush func() error) error {
	ex.mu.Lock()
	cost := f.charge(ex)
	ex.mu.Unlock()
	if cost != nil {
		t := &ticket{done: make(chan struct{})}
		ok, err := f.m.Offer(tokenbucket.Request{Cost: cost, Data: t})
		if err != nil {
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
	}
	f.outstanding(ex, cost)
	return nil
}

// outstanding counts tokens of ex as outstanding (and ex itself at the
// appliance, the first time).
func (f *flow) outstanding(ex *exchange, cost []float64) {
	now := f.p.clock.Now()
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
	if first {
		f.app.add(now, 1)
	}
}

// debt charges, without waiting, what ex turned out to cost beyond what it
// was charged: the tokens enter the flow's bucket queue as a request with
// no bytes, which later requests of the flow queue behind (Pulsar's buckets
// in debt). While ex is outstanding they count as outstanding too.
func (f *flow) debt(ex *exchange) error {
	ex.mu.Lock()
	cost := f.charge(ex)
	ex.mu.Unlock()
	if cost == nil {
		return nil
	}
	ok, err := f.m.Offer(tokenbucket.Request{Cost: cost})
	if err != nil {
		return fmt.Errorf("charge %s: %w", ex.typ, err)
	}
	if !ok {
		f.ensurePump()
	}
	f.outstanding(ex, cost)
	return nil
}

// answered settles ex once its reply has passed: wire and payload bytes of
// the reply, the debt of what it cost beyond its charge; it is no longer
// outstanding.
func (f *flow) answered(ex *exchange, respWire, respSize int64) error {
	f.learnReply(ex.typ, respWire, respSize)
	ex.mu.Lock()
	ex.respWire, ex.respSize = respWire, respSize
	cost := f.charge(ex)
	refund := f.overcharge(ex)
	appTok := f.appTokens(ex)
	ex.mu.Unlock()
	var err error
	if cost != nil {
		var ok bool
		if ok, err = f.m.Offer(tokenbucket.Request{Cost: cost}); err == nil && !ok {
			f.ensurePump()
		}
	}
	if refund != nil && err == nil {
		if err = f.m.Refund(refund); err == nil {
			f.nudge()
		}
	}
	f.end(ex, true, appTok)
	return err
}

// overcharge returns what ex was charged beyond what it cost (nil:
// nothing), an expected reply or a Range larger than the reply, and counts
// it as no longer charged. Holding ex.mu.
func (f *flow) overcharge(ex *exchange) []float64 {
	var back []float64
	for i, t := range f.target(ex) {
		if d := ex.charged[i] - t; d > 0 {
			if back == nil {
				back = make([]float64, len(f.path))
			}
			back[i] = d
			ex.charged[i] = t
		}
	}
	return back
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

// end takes ex out of the outstanding counts: answered, or abandoned with
// its connection.
func (f *flow) end(ex *exchange, answered bool, appTok float64) {
	now := f.p.clock.Now()
	ex.mu.Lock()
	if ex.ended {
		ex.mu.Unlock()
		return
	}
	ex.ended = true
	sent := ex.sent
	out := ex.outTok
	ex.mu.Unlock()
	if sent {
		f.mu.Lock()
		f.integrate(now)
		f.nOut--
		for i, c := range out {
			f.out[i] = max(0, f.out[i]-c)
		}
		if f.nOut == 0 {
			clear(f.out) // no rounding residue
		}
		f.mu.Unlock()
	}
	switch {
	case sent && answered:
		f.app.answered(now, appTok)
	case sent:
		f.app.add(now, -1)
	}
}

// integrate adds the outstanding tokens held since f.last. Holding f.mu.
func (f *flow) integrate(now time.Time) {
	if !now.After(f.last) {
		return
	}
	dt := float64(now.Sub(f.last))
	for i, x := range f.out {
		f.area[i] += x * dt
	}
	f.last = now
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
	for i, fl := range flows {
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
		a := p.apps[name]
		a.mu.Lock()
		a.integrate(now)
		st := ApplianceStats{Appliance: name, Completed: a.done}
		if span := now.Sub(obs.Start); span > 0 {
			st.Throughput = a.doneTok / span.Seconds()
			st.Outstanding = a.area / float64(span)
		} else {
			st.Outstanding = float64(a.out)
		}
		a.area, a.done, a.doneTok = 0, 0, 0
		a.mu.Unlock()
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
