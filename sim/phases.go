package sim

import "time"

// Phases is where a run's wall time went (Options.Phases), so that whoever
// sizes a large run sees which part bounds it: the host agents step on up
// to Options.Workers goroutines at once, the network's re-solves split
// their passes over flows, resources and pairs among the workers around a
// serial water-filling, and the accumulators and samples are added up on
// the workers.
// Timing costs a clock reading per part and tick, and two per catching
// up.
type Phases struct {
	Setup      time.Duration // building the engine: topology, pairs, agents
	Agents     time.Duration // observing, stepping the host agents, applying their limits and messages
	Controller time.Duration // the central controller's steps
	Physics    time.Duration // re-solving the network after a change (partly serial)
	Accounting time.Duration // adding up the ticks: catching up the accumulators, or tick by tick with sized or request flows
	Samples    time.Duration // taking the samples, without catching up
	Other      time.Duration // events, model updates, the ticks themselves
	Solves     int           // network re-solves
	Steps      int           // host agent steps
}

// Total is the run's wall time, Setup included.
func (p *Phases) Total() time.Duration {
	return p.Setup + p.Agents + p.Controller + p.Physics + p.Accounting + p.Samples + p.Other
}

// clock times the parts of a run into Options.Phases (a nil *clock when
// there is none: every method then does nothing).
type clock struct {
	ph *Phases
	at time.Time // the end of the part last timed
	// the accounting timed so far, to leave out of the part that did it
	acc time.Duration
}

// start begins timing at now.
func (c *clock) start() {
	if c != nil {
		c.at, c.acc = time.Now(), c.ph.Accounting
	}
}

// part is a part of a run that clock.lap times.
type part int

const (
	partOther part = iota
	partAgents
	partController
	partPhysics
	partAccounting
	partSamples
)

// lap adds the time since the last lap (or start), less the accounting
// done meanwhile, to part k.
func (c *clock) lap(k part) {
	if c == nil {
		return
	}
	now := time.Now()
	d := &c.ph.Other
	switch k {
	case partAgents:
		d = &c.ph.Agents
	case partController:
		d = &c.ph.Controller
	case partPhysics:
		d = &c.ph.Physics
	case partAccounting:
		// the catching up within it is already there
		d = &c.ph.Accounting
	case partSamples:
		d = &c.ph.Samples
	}
	*d += now.Sub(c.at) - (c.ph.Accounting - c.acc)
	c.at, c.acc = now, c.ph.Accounting
}
