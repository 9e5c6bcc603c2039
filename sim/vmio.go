package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// vmIO accumulates, per VM, the offered load of its connections (what its
// applications try to send, and what peers try to send to it) and, for the
// central controller, what it sent and received: mech.VMObs.OutDemand and
// InDemand for the host agents, ControllerObs.VMs for the controller
// (DRX's platform manager measures every VM's I/O against its demand).
type vmIO struct {
	agent, ctl []vmDemandAcc
	// ctlOut, ctlIn are bits sent and received since the controller's last
	// step.
	ctlOut, ctlIn []float64
	// the tick an unbounded connection was last seen, per VM and direction
	outStamp, inStamp []time.Duration
}

// vmDemandAcc is one consumer's demand accumulator for one VM: Σ offered ·
// dt of rate-bound connections (bits) and the ticks in which an unbounded
// (bulk) connection was active.
type vmDemandAcc struct {
	out, in       float64
	outUnb, inUnb int
}

// accountVMIO adds one tick of pair p (sent and received bits) to its VMs'
// accumulators (those of the controller only if ctl).
func (e *engine) accountVMIO(p *pairState, sent, recv float64, ctl bool) {
	a := e.vmioInit()
	if ctl {
		a.ctlOut[p.src] += sent
		a.ctlIn[p.dst] += recv
	}
	if p.unboundedActive > 0 {
		if a.outStamp[p.src] != e.now {
			a.outStamp[p.src] = e.now
			a.agent[p.src].outUnb++
			a.ctl[p.src].outUnb++
		}
		if a.inStamp[p.dst] != e.now {
			a.inStamp[p.dst] = e.now
			a.agent[p.dst].inUnb++
			a.ctl[p.dst].inUnb++
		}
		return
	}
	if d := p.boundedOffered * e.dtSec; d > 0 {
		a.agent[p.src].out += d
		a.agent[p.dst].in += d
		if ctl {
			a.ctl[p.src].out += d
			a.ctl[p.dst].in += d
		}
	}
}

// vmioInit makes the accumulators when first needed and returns them.
func (e *engine) vmioInit() *vmIO {
	a := &e.vmio
	if a.agent == nil {
		n := len(e.vms)
		a.agent, a.ctl = make([]vmDemandAcc, n), make([]vmDemandAcc, n)
		a.ctlOut, a.ctlIn = make([]float64, n), make([]float64, n)
		a.outStamp, a.inStamp = make([]time.Duration, n), make([]time.Duration, n)
		for i := range a.outStamp {
			a.outStamp[i], a.inStamp[i] = -1, -1
		}
	}
	return a
}

// demand turns an accumulator over sec seconds into demands (bits/s) and
// resets it. Unbounded for most of the period is +Inf.
func (e *engine) demand(acc *vmDemandAcc, sec float64) (out, in float64) {
	defer func() { *acc = vmDemandAcc{} }()
	if sec <= 0 {
		return 0, 0
	}
	ticks := sec / e.dtSec
	out, in = acc.out/sec, acc.in/sec
	if 2*float64(acc.outUnb) >= ticks && acc.outUnb > 0 {
		out = math.Inf(1)
	}
	if 2*float64(acc.inUnb) >= ticks && acc.inUnb > 0 {
		in = math.Inf(1)
	}
	return out, in
}

// agentDemand is VM vi's demand since its host agent's last step.
func (e *engine) agentDemand(vi int, sec float64) (out, in float64) {
	if e.vmio.agent == nil {
		return 0, 0
	}
	return e.demand(&e.vmio.agent[vi], sec)
}

// controllerVMs is every VM's I/O since the controller's last step.
func (e *engine) controllerVMs(buf []mech.VMObs, sec float64) []mech.VMObs {
	buf = buf[:0]
	a := &e.vmio
	for vi := range e.vms {
		o := mech.VMObs{VM: e.vms[vi].name}
		if a.agent != nil && sec > 0 {
			o.OutRate, o.InRate = a.ctlOut[vi]/sec, a.ctlIn[vi]/sec
			o.InArrival = o.InRate
			o.OutDemand, o.InDemand = e.demand(&a.ctl[vi], sec)
			a.ctlOut[vi], a.ctlIn[vi] = 0, 0
		}
		buf = append(buf, o)
	}
	return buf
}

// sendControllerMessages queues the controller's messages to host agents,
// delivered like agents' messages (network.control_delay and
// network.control_loss apply).
func (e *engine) sendControllerMessages(msgs []mech.Message) error {
	for _, m := range msgs {
		m.From = mech.ControllerHost
		j, ok := e.hostN[m.To]
		if !ok {
			return fmt.Errorf("sim: mechanism %s: controller sent a message to unknown host %q", e.opts.Mechanism.Name(), m.To)
		}
		if l := e.sc.Network.ControlLoss; l > 0 && e.ctlRand.Float64() < l {
			continue
		}
		e.inflight = append(e.inflight, inflightMsg{sent: e.now, at: e.now + time.Duration(e.sc.Network.ControlDelay), to: j, msg: m})
	}
	return nil
}
