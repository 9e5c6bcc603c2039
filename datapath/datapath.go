// Package datapath is the seam between a host agent and the data path of
// its server: what the agent reads (per-pair, per-VM and per-device
// counters, losses) and what it sets (pair limits, per-VM schedulers and
// VM limits), as interfaces. It imports nothing of Linux: datapath/linux
// implements it over netlink, HTB, IFB and eBPF (package dataplane);
// datapath/fake in memory, for tests of the agent without root.
//
// Rates here are bits/s on the wire; the agent converts from the
// mechanism's units. Pairs are named by address; the agent maps them to
// VM names with the declared model.
package datapath

import (
	"maps"
	"math"
	"net/netip"
	"slices"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// Pair is a VM pair by IPv4 address: source and destination.
type Pair struct {
	Src, Dst netip.Addr
}

func (p Pair) String() string { return p.Src.String() + "->" + p.Dst.String() }

// ComparePairs orders pairs by source, then destination.
func ComparePairs(a, b Pair) int {
	if c := a.Src.Compare(b.Src); c != 0 {
		return c
	}
	return a.Dst.Compare(b.Dst)
}

// SortedPairs returns the keys of a map by pair in ComparePairs order.
func SortedPairs[V any](m map[Pair]V) []Pair {
	return slices.SortedFunc(maps.Keys(m), ComparePairs)
}

// Counters are the counters of one queue of the data path (a pair's
// limiter, a pair's receive counter, a VM's class in a scheduler) and the
// rates it was given, as one reading shows them.
type Counters struct {
	Bytes, Packets uint64 // sent (delivered) since the queue was made
	Drops          uint32 // dropped at the queue
	Overlimits     uint32 // times the queue was held back by its rate
	Backlog        uint32 // bytes queued at the reading
	Qlen           uint32 // packets queued at the reading
	// Rate and Ceil are the queue's guaranteed and largest rates in
	// force, bits/s (0: unknown, or the queue is gone).
	Rate, Ceil float64
}

// MinRate and MaxRate bound the rates a data path holds, bits/s: HTB
// cannot express 0, so a limit below MinRate (0 included) is held at
// MinRate, and one above MaxRate (+Inf: no limit) at MaxRate.
// datapath/linux checks that they are the netlink toolkit's.
const (
	MinRate = 8e3
	MaxRate = 1e12
)

// Held is the rate a data path holds for a limit of bps bits/s: what its
// queue's counters show (a pair's Rate, a VM's Ceil) while it is in force.
func Held(bps float64) float64 { return min(max(bps, MinRate), MaxRate) }

// Shows says whether a queue's rate as read (Counters.Rate or Ceil) is
// that of a limit of bps bits/s: Held(bps), within what a data path
// rounds (HTB keeps whole bytes per second).
func Shows(read, bps float64) bool {
	h := Held(bps)
	return math.Abs(read-h) <= 8+1e-6*h
}

// DevCounters are a device's byte counters as its server sees them: for
// a VM's device on the server's side, Rx is what the VM sent and Tx what
// was delivered to it.
type DevCounters struct {
	Rx, Tx uint64
}

// PairLimiter holds the limiters of the pairs one VM sends, where its
// traffic leaves it (its interface's transmit queue).
type PairLimiter interface {
	// SetPairRate limits the pair to bps bits/s on the wire; +Inf lifts
	// the limit and keeps the pair's counters.
	SetPairRate(p Pair, bps float64) error
	// RemovePair removes the pair's limiter and counters (a no-op for a
	// pair without one).
	RemovePair(p Pair) error
	// Counters reads every pair's counters (those with a limiter).
	Counters() (map[Pair]Counters, error)
}

// PairRate is one pair's rate for RateBatcher: pair Pair of limiter TX (a
// VMPath.TX of the Host) at Bps bits/s.
type PairRate struct {
	TX   PairLimiter
	Pair Pair
	Bps  float64
}

// RateBatcher is a Host that writes many pairs' rates at once: one round
// trip to the kernel for all the pairs of a namespace, rather than one
// per pair.
type RateBatcher interface {
	// SetPairRates sets each pair's rate on its limiter, in order, as
	// SetPairRate would, and returns each one's error (errs[i] is
	// ops[i]'s; nil: in force). One refused does not stop the others.
	SetPairRates(ops []PairRate) []error
}

// SetPairRates writes the rates through h if it is a RateBatcher, else
// one by one (SetPairRate): errs[i] is ops[i]'s.
func SetPairRates(h Host, ops []PairRate) []error {
	if b, ok := h.(RateBatcher); ok {
		return b.SetPairRates(ops)
	}
	errs := make([]error, len(ops))
	for i, op := range ops {
		errs[i] = op.TX.SetPairRate(op.Pair, op.Bps)
	}
	return errs
}

// PairCounters counts, per pair, what was delivered into one VM.
type PairCounters interface {
	Counters() (map[Pair]Counters, error)
}

// PairReading is one pair's counters in a reading (PairReader).
type PairReading struct {
	Pair Pair
	Counters
}

// PairReader is a PairLimiter or PairCounters that reads into storage
// its caller reuses from one reading to the next: a host agent reads
// every pair every period, and a map made per reading is most of what
// it allocates.
type PairReader interface {
	// ReadPairs reads every pair's counters, as Counters does, into
	// dst[:0] (grown if needed), in ComparePairs order, and returns it.
	ReadPairs(dst []PairReading) ([]PairReading, error)
}

// ReadPairs reads src's pairs into dst[:0] in ComparePairs order:
// through PairReader when src is one, else from the map Counters
// returns.
func ReadPairs(src PairCounters, dst []PairReading) ([]PairReading, error) {
	if r, ok := src.(PairReader); ok {
		return r.ReadPairs(dst)
	}
	cs, err := src.Counters()
	dst = dst[:0]
	for _, p := range SortedPairs(cs) {
		dst = append(dst, PairReading{Pair: p, Counters: cs[p]})
	}
	return dst, err
}

// SchedQueue is the queue of each VM's class in a server's per-VM
// scheduler, bytes: Gatekeeper's 160 packets of 1514 bytes (§3.1).
const SchedQueue = 160 * 1514

// Scheduler is a server's per-VM scheduler on its access link in one
// direction (mech.Scheduler): a work-conserving weighted share of a rate
// across the server's VMs, and per-VM limits (mech.VMEgress, VMIngress).
type Scheduler interface {
	// SetVMs sets the VMs scheduled (name → address), for a server whose
	// VMs changed; weights and limits of VMs that left are dropped.
	SetVMs(vms map[string]netip.Addr) error
	// Set installs or changes the scheduler at rate bits/s with the VMs'
	// weights (VMs not in weights get a negligible one); rate +Inf with
	// no weights removes it: traffic passes unscheduled, but VM limits
	// stay in force (while one is finite, a scheduler that only limits
	// stays in place).
	Set(rate float64, weights map[string]float64) error
	// SetLimit caps one VM at bps bits/s (+Inf: no cap), installing a
	// scheduler that only limits if none is in place. The class's Ceil
	// then reads Held of the lower of bps and the scheduler's rate.
	SetLimit(vm string, bps float64) error
	// Installed says whether a scheduler is in place.
	Installed() bool
	// Counters reads each VM's class (none when not installed).
	Counters() (map[string]Counters, error)
	// Arrivals reads the bytes that arrived for each VM before the
	// scheduler since it was built (nil: not counted; ingress only).
	Arrivals() (map[string]uint64, error)
}

// LossCounter counts the packets of each pair lost in the network, on
// the side of the pair it sees them.
type LossCounter interface {
	// Side is where losses are seen: at the source (reported in the
	// pair's egress observation) or at the destination (ingress).
	Side() mech.LossSide
	// Lost returns, per pair seen, the packets detected lost since the
	// counter was made (cumulative).
	Lost() (map[Pair]uint64, error)
	Close() error
}

// VM is a VM on the server as the data path knows it.
type VM struct {
	Name string
	Addr netip.Addr
	// Device is the VM's device on the server (whose counters say what
	// the VM sent and received), "" if unknown.
	Device string
	// Interface and Netns are the VM's interface as the declared model
	// names it (model.VM.Interface, Netns), for a data path that builds
	// the VM's limiters itself: with Netns, Interface is the VM's own
	// device inside that namespace (the VM's side of a veth); without,
	// it is the VM's device on the server (a tap or a veth), in the
	// server's namespace. Netns is a name in /run/netns (as `ip netns`
	// names them) or the path of the namespace's file. "": the data path has what it needs already
	// (or cannot enforce the VM).
	Interface string
	Netns     string
}

// VMPath is the data path of one VM.
type VMPath struct {
	TX PairLimiter  // the limiters of the pairs it sends (nil: none)
	RX PairCounters // the counters of the pairs into it (nil: none)
	// Device is the VM's device on the server as the data path found it
	// (for a VM in its own namespace, the server's side of its veth):
	// its counters (Host.Devices) say what the VM sent and received.
	// "": the VM's Device as attached.
	Device string
}

// PairCounterSet is a PairCounters whose pairs its user chooses: a data
// path that builds a VM's receive counters itself counts no pair until
// it is told which (the pairs into the VM the agent knows of).
type PairCounterSet interface {
	PairCounters
	// CountPair starts counting the pair (a no-op for a pair counted).
	CountPair(p Pair) error
	// RemovePair stops counting the pair (a no-op for one not counted).
	RemovePair(p Pair) error
}

// Host is the data path of one server.
type Host interface {
	// Attach returns the data path of a VM on the server (what the
	// server has for it; both nil if it was given nothing). A VM the
	// server cannot enforce (one it was not set up for) is an error: a
	// VM left unenforced silently is worse than a refusal.
	Attach(vm VM) (VMPath, error)
	// Detach releases a VM that left the server: its pair limiters are
	// removed. What the server has for the VM stays, for the VM to
	// rejoin, except what the data path built itself for the VM (from
	// its Interface), which goes: the VM's devices are left as they
	// were found.
	Detach(vm string) error
	// Devices reads the server's device counters, by device name.
	Devices() (map[string]DevCounters, error)
	// Scheduler returns the per-VM scheduler of a direction (nil: the
	// server has none).
	Scheduler(dir mech.Direction) Scheduler
	// Loss returns the server's loss counter (nil: none).
	Loss() LossCounter
	// Close releases what the data path holds for its user (the loss
	// counter, handles it opened); the enforcement it set stays in force,
	// limiters and schedulers it built itself included: a host whose
	// agent stops keeps its VMs limited (the agent leaves guarantee-safe
	// settings, mech.Failsafe), and the next agent takes them over.
	Close() error
}

// Remover is a data path that can remove the enforcement it built
// itself (limiters, schedulers, redirections) as well as close: what an
// operator asks for when Bulkhead leaves a host.
type Remover interface {
	// Remove removes what the data path built, leaving the devices as
	// it found them, and closes it.
	Remove() error
}
