package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/bulkhead-dc/bulkhead/spec"
)

// A generator drives the connections of one workload on one VM pair.
type generator struct {
	w     *spec.Workload
	wi    int // workload index, for messages
	pair  int
	conns []int // fixed connections (tcp, udp, onoff)
	rflow int   // request flow (requests), -1 otherwise
	rng   *rand.Rand
	// epoch invalidates events scheduled in an earlier phase.
	epoch   int
	inPhase bool
	on      bool
	sizes   func(*rand.Rand) float64 // bytes, for flows and clients
	servers []int                    // clients: the pairs from each server to the client
}

type eventKind int

const (
	evPhaseStart eventKind = iota
	evPhaseStop
	evToggle
	evArrival
)

type event struct {
	t     time.Duration
	seq   int
	gen   int
	kind  eventKind
	epoch int
}

type eventQueue struct {
	items []event
	seq   int
}

func (q *eventQueue) Len() int { return len(q.items) }
func (q *eventQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}
func (q *eventQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *eventQueue) Push(x any)    { q.items = append(q.items, x.(event)) }
func (q *eventQueue) Pop() any {
	n := len(q.items)
	ev := q.items[n-1]
	q.items = q.items[:n-1]
	return ev
}

func (e *engine) schedule(t time.Duration, gen int, kind eventKind) {
	e.events.seq++
	heap.Push(&e.events, event{t: t, seq: e.events.seq, gen: gen, kind: kind, epoch: e.gens[gen].epoch})
}

// buildWorkloads creates the pairs, their fixed connections and the phase
// events of every workload. Each generator has its own random stream,
// derived from the scenario seed and its position, so that adding a
// workload does not change the draws of the others.
func (e *engine) buildWorkloads() error {
	// Most workloads have a pair and a connection or more: room for one
	// each, so that a large scenario's are not copied as they grow.
	e.pairs = slices.Grow(e.pairs, len(e.sc.Workloads))
	e.conns = slices.Grow(e.conns, len(e.sc.Workloads))
	for wi := range e.sc.Workloads {
		w := &e.sc.Workloads[wi]
		sizes, err := sizeSampler(w.Sizes)
		if err != nil {
			return fmt.Errorf("sim: %s: workloads[%d].sizes: %w", e.sc.File, wi, err)
		}
		if w.Kind == "requests" {
			dsts, toVM := []string{w.Appliance}, false
			if len(w.Dst) > 0 {
				dsts, toVM = w.Dst, true
			}
			for _, src := range w.Sources() {
				for _, dst := range dsts {
					if dst == src {
						continue
					}
					ri, err := e.newRequestFlow(w, wi, src, dst, toVM)
					if err != nil {
						return err
					}
					gi := len(e.gens)
					e.gens = append(e.gens, &generator{w: w, wi: wi, pair: -1, rflow: ri})
					e.schedulePhases(gi, w)
				}
			}
			continue
		}
		if w.Kind == spec.KindClients {
			for _, client := range w.Dst {
				g := &generator{w: w, wi: wi, pair: -1, sizes: sizes, rflow: -1,
					rng: rand.New(rand.NewPCG(uint64(e.sc.Seed), uint64(len(e.gens))+1))}
				for _, srv := range w.Src {
					if srv != client {
						g.servers = append(g.servers, e.pairFor(w.Tenant, srv, client))
					}
				}
				if len(g.servers) == 0 {
					continue
				}
				gi := len(e.gens)
				e.gens = append(e.gens, g)
				e.schedulePhases(gi, w)
			}
			continue
		}
		for _, pr := range w.Pairs() {
			p := e.pairFor(w.Tenant, pr[0], pr[1])
			g := &generator{w: w, wi: wi, pair: p, sizes: sizes, rflow: -1,
				rng: rand.New(rand.NewPCG(uint64(e.sc.Seed), uint64(len(e.gens))+1))}
			udp := w.Kind == "udp" || (w.Kind == "onoff" && w.Transport == "udp")
			switch w.Kind {
			case "tcp", "onoff", "udp":
				n := w.Connections
				if n <= 0 || udp {
					n = 1
				}
				for k := 0; k < n; k++ {
					offered, appCap := 0.0, math.Inf(1)
					if udp {
						offered = float64(w.Rate)
					} else if w.Rate > 0 {
						appCap = float64(w.Rate) / float64(n)
					}
					g.conns = append(g.conns, e.newConn(p, udp, offered, appCap))
				}
			case "flows":
			default:
				return fmt.Errorf("sim: %s: workloads[%d].kind: unknown kind %q", e.sc.File, wi, w.Kind)
			}
			gi := len(e.gens)
			e.gens = append(e.gens, g)
			e.schedulePhases(gi, w)
		}
	}
	return nil
}

func (e *engine) schedulePhases(gi int, w *spec.Workload) {
	dur := time.Duration(e.sc.Duration)
	for _, ph := range w.Intervals(dur) {
		e.schedule(time.Duration(ph.Start), gi, evPhaseStart)
		stop := time.Duration(ph.Stop)
		if stop > 0 && stop < dur {
			e.schedule(stop, gi, evPhaseStop)
		}
	}
}

// setActive switches a connection on or off, keeping the pair's offered
// load in step.
func (e *engine) setActive(i int, on bool) {
	c := &e.conns[i]
	if c.active == on {
		return
	}
	c.active = on
	e.dirty = true
	e.shape++
	p := &e.pairs[c.pair]
	d := 1
	if !on {
		d = -1
		c.rate, c.drop = 0, 0
	}
	switch {
	case c.udp:
		e.activeUDP += d
		p.boundedOffered += float64(d) * c.offered
	case math.IsInf(c.appCap, 1):
		p.unboundedActive += d
	default:
		p.boundedOffered += float64(d) * c.appCap
	}
	if p.boundedOffered < 1e-9 {
		p.boundedOffered = 0
	}
}

func (e *engine) finishConn(i int) {
	e.setActive(i, false)
	e.conns[i].pair = -1
	e.connGen++
	e.free = append(e.free, i)
}

func (e *engine) fireEvents() error {
	if e.events.Len() > 0 && e.events.items[0].t <= e.now {
		e.catchUp() // connections come and go
	}
	for e.events.Len() > 0 && e.events.items[0].t <= e.now {
		ev := heap.Pop(&e.events).(event)
		g := e.gens[ev.gen]
		switch ev.kind {
		case evPhaseStart:
			g.epoch++
			g.inPhase = true
			switch g.w.Kind {
			case "onoff":
				g.on = true
				e.setConns(g, true)
				e.schedule(e.now+e.period(g, time.Duration(g.w.On)), ev.gen, evToggle)
			case "flows":
				// Poisson arrivals from the phase's start: each gap
				// runs from the previous arrival's time, not from the
				// tick that handles it (below).
				e.schedule(ev.t+e.expDelay(g), ev.gen, evArrival)
			case spec.KindClients:
				e.schedule(e.now, ev.gen, evArrival)
			default:
				e.setConns(g, true)
			}
		case evPhaseStop:
			g.epoch++
			g.inPhase = false
			g.on = false
			e.setConns(g, false)
		case evToggle:
			if ev.epoch != g.epoch || !g.inPhase {
				continue
			}
			g.on = !g.on
			e.setConns(g, g.on)
			next := time.Duration(g.w.Off)
			if g.on {
				next = time.Duration(g.w.On)
			}
			e.schedule(e.now+e.period(g, next), ev.gen, evToggle)
		case evArrival:
			if ev.epoch != g.epoch || !g.inPhase {
				continue
			}
			if g.w.Kind == spec.KindClients {
				e.fetch(ev.gen)
				continue
			}
			size := g.sizes(g.rng)
			i := e.newConn(g.pair, false, 0, math.Inf(1))
			c := &e.conns[i]
			c.size = size
			c.remaining = size * 8
			e.sized = true
			c.arrival = ev.t
			c.start = e.now
			e.setActive(i, true)
			// The next arrival follows this one's time, ev.t, which
			// may lie before the tick: when it too is due by now, this
			// loop starts it in the same tick, so a tick takes as many
			// arrivals as fall into it. (From e.now, at most one flow
			// a tick would arrive and every gap would be rounded up to
			// the tick: 8,644 instead of 20,000 flows in 10 s at
			// 2,000 flows/s and 1 ms ticks.)
			e.schedule(ev.t+e.expDelay(g), ev.gen, evArrival)
		}
	}
	return nil
}

// fetch starts a client's next flow, from a server drawn at random.
func (e *engine) fetch(gi int) {
	g := e.gens[gi]
	p := g.servers[g.rng.IntN(len(g.servers))]
	i := e.newConn(p, false, 0, math.Inf(1))
	c := &e.conns[i]
	c.size = g.sizes(g.rng)
	c.remaining = c.size * 8
	e.sized = true
	c.start = e.now
	c.gen, c.epoch = gi, g.epoch
	e.setActive(i, true)
}

// clientDone schedules a client's next fetch after its flow finished at
// fin: at once, or after a sleep uniform in [0, sleep] with probability
// sleep_prob; not if the client's phase has ended since.
func (e *engine) clientDone(gi, epoch int, fin time.Duration) {
	if gi < 0 {
		return
	}
	g := e.gens[gi]
	if g.epoch != epoch || !g.inPhase {
		return
	}
	next := fin
	if g.rng.Float64() < g.w.SleepProb {
		next += secondsToDuration(g.rng.Float64() * time.Duration(g.w.Sleep).Seconds())
	}
	e.schedule(next, gi, evArrival)
}

func (e *engine) setConns(g *generator, on bool) {
	for _, i := range g.conns {
		e.setActive(i, on)
	}
	if g.rflow >= 0 {
		e.setGenerating(g.rflow, on)
	}
}

// period returns an on or off period: fixed, or exponential with that mean.
// It is at least one tick so that a toggle always makes progress.
func (e *engine) period(g *generator, mean time.Duration) time.Duration {
	d := mean
	if g.w.Exponential {
		d = secondsToDuration(g.rng.ExpFloat64() * mean.Seconds())
	}
	if d < e.dt {
		d = e.dt
	}
	return d
}

// expDelay draws the gap to the next flow arrival (Poisson process).
func (e *engine) expDelay(g *generator) time.Duration {
	d := secondsToDuration(g.rng.ExpFloat64() / g.w.ArrivalRate)
	if d <= 0 {
		d = 1
	}
	return d
}

// sizeSampler returns a sampler of flow sizes in bytes (nil dist: none).
func sizeSampler(d *spec.SizeDist) (func(*rand.Rand) float64, error) {
	if d == nil {
		return nil, nil
	}
	return d.Sampler()
}
