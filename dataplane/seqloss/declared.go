package seqloss

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
)

// DeclareStamp declares pairs for the stamp program: with
// Config.DeclaredOnly, only declared pairs are stamped. dev is the
// device, in the probe's namespace, that the pairs' packets come in by
// (the source VM's device on the server): a packet of the pair that came
// in by another device — its source address forged by another VM of the
// server — is not stamped (Stats.TxForeign). dev "": any device. Each
// pair's numbering starts at zero; a pair declared already keeps its
// numbering (declaring it from another device is an error: undeclare it
// first). It is an error when the map holds MaxPairs pairs; the pairs
// before the one in error are declared.
func (p *Probe) DeclareStamp(dev string, pairs ...dataplane.Pair) error {
	var idx uint32
	if dev != "" {
		i, err := p.ns.LinkIndex(dev)
		if err != nil {
			return fmt.Errorf("seqloss: declare pairs stamped from %s: %w", dev, err)
		}
		idx = uint32(i)
	}
	return p.declareStamp(idx, pairs...)
}

// declareStamp is DeclareStamp with the device's ifindex (0: any).
func (p *Probe) declareStamp(idx uint32, pairs ...dataplane.Pair) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("seqloss: declare: probe closed")
	}
	m := p.objs.SeqlossTx
	for _, pair := range pairs {
		if old, ok := p.stamped[pair]; ok {
			if old != idx {
				return fmt.Errorf("seqloss: declare %s stamped from ifindex %d: declared from ifindex %d already", pair, idx, old)
			}
			continue
		}
		k, err := keyOf(pair)
		if err != nil {
			return err
		}
		if err := p.room(m, len(p.stamped)); err != nil {
			return fmt.Errorf("seqloss: declare %s stamped: %w", pair, err)
		}
		if err := m.Update(&k, seqlossTxVal{Ifindex: idx}, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("seqloss: declare %s stamped: %w", pair, err)
		}
		p.stamped[pair] = idx
	}
	return nil
}

// DeclareCount declares pairs for the count program: with
// Config.DeclaredOnly, only declared pairs are counted. Each pair's
// counts start at zero, its first packet setting the number expected
// next; a pair declared already keeps its counts. It is an error when
// the map holds MaxPairs pairs; the pairs before the one in error are
// declared.
func (p *Probe) DeclareCount(pairs ...dataplane.Pair) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("seqloss: declare: probe closed")
	}
	m := p.objs.SeqlossRx
	for _, pair := range pairs {
		if p.counted[pair] {
			continue
		}
		k, err := keyOf(pair)
		if err != nil {
			return err
		}
		if err := p.room(m, len(p.counted)); err != nil {
			return fmt.Errorf("seqloss: declare %s counted: %w", pair, err)
		}
		if err := m.Update(&k, seqlossRxVal{}, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("seqloss: declare %s counted: %w", pair, err)
		}
		p.counted[pair] = true
	}
	return nil
}

// room says whether a map holding n declared pairs has room for another
// one (in declared-only mode it holds nothing else).
func (p *Probe) room(m *ebpf.Map, n int) error {
	if uint32(n) >= m.MaxEntries() {
		return fmt.Errorf("%d pairs are declared, the most the map holds (Config.MaxPairs)", n)
	}
	return nil
}

// Undeclare removes pairs declared for a role's program, and their state
// (a pair not declared is not an error). With Config.DeclaredOnly their
// packets are then neither stamped nor counted.
func (p *Probe) Undeclare(role Role, pairs ...dataplane.Pair) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("seqloss: undeclare: probe closed")
	}
	for _, pair := range pairs {
		var m *ebpf.Map
		switch role {
		case Stamp:
			if _, ok := p.stamped[pair]; !ok {
				continue
			}
			m = p.objs.SeqlossTx
		case Count:
			if !p.counted[pair] {
				continue
			}
			m = p.objs.SeqlossRx
		default:
			return fmt.Errorf("seqloss: undeclare %s: unknown role %d", pair, int(role))
		}
		k, err := keyOf(pair)
		if err != nil {
			return err
		}
		if err := m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("seqloss: undeclare %s %s: %w", pair, role, err)
		}
		if role == Stamp {
			delete(p.stamped, pair)
		} else {
			delete(p.counted, pair)
		}
	}
	return nil
}

// Declared returns the pairs declared for a role's program, in
// datapath.ComparePairs order.
func (p *Probe) Declared(role Role) []dataplane.Pair {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []dataplane.Pair
	if role == Stamp {
		for pair := range p.stamped {
			out = append(out, pair)
		}
	} else {
		for pair := range p.counted {
			out = append(out, pair)
		}
	}
	slices.SortFunc(out, datapath.ComparePairs)
	return out
}
