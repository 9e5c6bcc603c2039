package linux

import (
	"fmt"
	"sync"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/dataplane/seqloss"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// SeqGaps is the datapath.LossCounter of ElasticSwitch §6: every packet leaving the
// server toward the network carries a per-(source, destination) sequence
// number in its IP ID, stamped by an eBPF program on the egress of the
// server's uplinks, and the eBPF program on the egress of each local VM's
// veth counts the numbers that never arrived (dataplane/seqloss). It sees
// TCP and UDP alike, and only losses in the network: the pair limiters on
// the VMs' interfaces sit before the stamp. Losses are detected at the
// destination (mech.LossAtDestination): a mechanism that reacts at the
// source takes them from the destination's feedback (mech.LossAdapter).
//
// Lost reports per pair the new gaps less the new late arrivals
// (reordering) since the previous call, accumulated: the counts only grow.
type SeqGaps struct {
	mu   sync.Mutex
	p    *seqloss.Probe
	prev map[dataplane.Pair]seqloss.Received
	cum  map[dataplane.Pair]uint64
}

// NewSeqGaps loads the programs in the server's namespace ns, stamps on
// the egress of every uplink device and counts on the egress of every
// local VM's server-side veth (vmDevs). On error nothing stays attached.
func NewSeqGaps(ns *dataplane.NS, uplinks, vmDevs []string) (_ *SeqGaps, err error) {
	if len(uplinks) == 0 {
		return nil, fmt.Errorf("seq-gap loss counter: no uplink to stamp on")
	}
	p, err := seqloss.New(ns, seqloss.Config{})
	if err != nil {
		return nil, fmt.Errorf("seq-gap loss counter: %w", err)
	}
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()
	for _, d := range uplinks {
		if err := p.AttachStamp(d, dataplane.Egress); err != nil {
			return nil, fmt.Errorf("seq-gap loss counter: stamp on %s: %w", d, err)
		}
	}
	for _, d := range vmDevs {
		if err := p.AttachCount(d, dataplane.Egress); err != nil {
			return nil, fmt.Errorf("seq-gap loss counter: count on %s: %w", d, err)
		}
	}
	return &SeqGaps{p: p, prev: map[dataplane.Pair]seqloss.Received{}, cum: map[dataplane.Pair]uint64{}}, nil
}

// Side is mech.LossAtDestination: gaps are seen where the packets arrive.
func (s *SeqGaps) Side() mech.LossSide { return mech.LossAtDestination }

// Lost returns the cumulative losses per pair seen at this server.
func (s *SeqGaps) Lost() (map[dataplane.Pair]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.p.Received()
	if err != nil {
		return nil, fmt.Errorf("seq-gap loss counter: %w", err)
	}
	out := make(map[dataplane.Pair]uint64, len(now))
	for pair, r := range now {
		s.cum[pair] += r.Lost(s.prev[pair])
		s.prev[pair] = r
	}
	for pair, c := range s.cum {
		out[pair] = c
	}
	return out, nil
}

// Close detaches the programs and frees their maps.
func (s *SeqGaps) Close() error {
	if err := s.p.Close(); err != nil {
		return fmt.Errorf("seq-gap loss counter: %w", err)
	}
	return nil
}
