package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
)

// Pair is a VM pair by IPv4 address: source and destination (the data
// path's pair, datapath.Pair).
type Pair = datapath.Pair

func pairMatch(p Pair) Match {
	return Match{Src: netip.PrefixFrom(p.Src, 32), Dst: netip.PrefixFrom(p.Dst, 32)}
}

// LimiterConfig configures a Limiter.
type LimiterConfig struct {
	// Dev is the device whose egress the limiter shapes (an IFB that
	// receives a host's VM traffic, or any device).
	Dev string
	// Major is the HTB qdisc's major handle (default 1).
	Major uint16
	// QueueBytes is the drop-tail queue of each pair class (default
	// DefaultLimiterQueue).
	QueueBytes uint32
}

// DefaultLimiterQueue is the queue of a pair class when none is set.
const DefaultLimiterQueue = 256 << 10

// filterPrio is the priority of the limiter's classifiers (one u32 table).
const filterPrio = 1

// Limiter is an HTB tree of per-VM-pair rate limiters on one device: the
// root qdisc sends unclassified traffic through unshaped (HTB's direct
// queue), and each pair has a class (rate = ceil = its limit) with a
// drop-tail queue and a u32 classifier on its source and destination
// addresses. Its methods are safe for concurrent use.
type Limiter struct {
	ns    *NS
	dev   string
	idx   int
	major uint16
	queue uint32

	mu        sync.Mutex
	pairs     map[Pair]*pairClass
	sorted    []pairMinor // the pairs in ComparePairs order (nil: to be sorted again)
	slot      []int32     // minor → index into sorted (ReadPairs), -1: none
	free      []uint16    // minors (= u32 nodes) released by RemovePair
	next      uint16
	recreated int
	batches   uint64 // SetPairRates batches that locked the limiter
}

type pairClass struct {
	minor uint16
	rate  float64 // bits/s in force; +Inf: unlimited (MaxRate)
	// named is how many ops of batch number batch (SetPairRates) name
	// the pair
	batch uint64
	named int
}

// pairMinor is a pair and the minor of its class.
type pairMinor struct {
	p     Pair
	minor uint16
}

// NewLimiter installs an empty limiter on cfg.Dev in ns, replacing the
// device's root qdisc.
func NewLimiter(ns *NS, cfg LimiterConfig) (*Limiter, error) {
	if cfg.Major == 0 {
		cfg.Major = 1
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = DefaultLimiterQueue
	}
	idx, err := ns.LinkIndex(cfg.Dev)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	if err := ns.ReplaceHTB(cfg.Dev, HTB{Handle: TCHandle(cfg.Major, 0), Parent: rootParent, DirectQlen: DefaultTxQLen}); err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	if _, err := ns.fastSocket(); err != nil { // open it now, not on the first update
		return nil, fmt.Errorf("limiter: %w", err)
	}
	return &Limiter{ns: ns, dev: cfg.Dev, idx: idx, major: cfg.Major, queue: cfg.QueueBytes, pairs: map[Pair]*pairClass{}, next: 1}, nil
}

// rootParent is netlink.HANDLE_ROOT.
const rootParent = 0xFFFFFFFF

// Dev returns the device the limiter shapes.
func (l *Limiter) Dev() string { return l.dev }

// ClassOf returns the HTB class handle of the pair's limiter, if it has one.
func (l *Limiter) ClassOf(p Pair) (uint32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pc, ok := l.pairs[p]
	if !ok {
		return 0, false
	}
	return TCHandle(l.major, pc.minor), true
}

func (l *Limiter) class(minor uint16, bps float64) HTBClass {
	r := bps
	switch {
	case math.IsInf(r, 1) || r > MaxRate:
		r = MaxRate
	case r < MinRate:
		r = MinRate
	}
	return HTBClass{Parent: TCHandle(l.major, 0), Handle: TCHandle(l.major, minor), Rate: r, Ceil: r}
}

// SetPairRate limits the pair to bps bits/s (+Inf: no limit, the class
// stays for its counters; below MinRate: MinRate). The first call for a
// pair creates its class, queue and classifier; later calls are one
// netlink class change, except when raising a rate slow enough to leave
// the class in a long token debt (see DebtLimit): the class is then
// recreated, which drops what it had queued and restarts its counters.
// A class change that fails (the class was deleted behind the limiter's
// back) also recreates the class.
func (l *Limiter) SetPairRate(p Pair, bps float64) error {
	if err := l.checkRate(p, bps); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.setPairRate(p, bps)
}

// checkRate checks a pair and its rate.
func (l *Limiter) checkRate(p Pair, bps float64) error {
	if math.IsNaN(bps) || bps < 0 {
		return fmt.Errorf("limiter %s: pair %s: rate %v bits/s", l.dev, p, bps)
	}
	if !p.Src.Is4() || !p.Dst.Is4() {
		return fmt.Errorf("limiter %s: pair %s: IPv4 addresses only", l.dev, p)
	}
	return nil
}

// setPairRate is SetPairRate of a checked pair and rate (l.mu held).
func (l *Limiter) setPairRate(p Pair, bps float64) error {
	if pc, ok := l.pairs[p]; ok {
		if !indebted(pc.rate, bps) {
			cerr := l.ns.changeHTBClass(l.idx, l.dev, l.class(pc.minor, bps))
			if cerr == nil {
				pc.rate = bps
				return nil
			}
			// The class, its queue or its classifier is gone: make
			// them anew (what remains of them is removed first).
			l.forget(p, pc)
			if err := l.create(p, bps); err != nil {
				return errors.Join(fmt.Errorf("limiter: pair %s: %w", p, cerr), err)
			}
			return nil
		}
		// Raised from a rate at which one offload packet costs a long
		// token debt: a class change keeps the debt (HTB does not rescale
		// tokens), and the pair would stay stalled at the new rate until
		// it is repaid. A new class starts with full tokens.
		if err := l.removePair(p, pc); err != nil {
			return err
		}
		l.recreated++
	}
	return l.create(p, bps)
}

// RateOp is one pair's rate for SetPairRates: pair P of limiter L at Bps
// bits/s.
type RateOp struct {
	L   *Limiter
	P   Pair
	Bps float64
}

// SetPairRates sets the rates of many pairs, of one limiter or several,
// each as SetPairRate would, and returns each one's error (errs[i] is
// ops[i]'s; nil: in force). The class changes of the limiters of one
// namespace — every op on a pair whose class exists and needs no
// recreating — go to the kernel together, in one netlink round trip
// (requests in one sendmsg, each answered); the rest (a pair's first
// class, a class recreated to clear a token debt or because its change
// failed, a pair named twice) are written one by one, in order. A
// refused change is reported for its op alone. The limiters of each
// namespace are locked while their ops are written.
func SetPairRates(ops []RateOp) []error {
	errs := make([]error, len(ops))
	// group the ops by namespace, in order of first appearance
	var groups [][]int
	at := map[*NS]int{}
	for i, op := range ops {
		if op.L == nil {
			errs[i] = errors.New("limiter: no limiter")
			continue
		}
		if errs[i] = op.L.checkRate(op.P, op.Bps); errs[i] != nil {
			continue
		}
		g, ok := at[op.L.ns]
		if !ok {
			g = len(groups)
			at[op.L.ns] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range groups {
		setGroup(ops, g, errs)
	}
	return errs
}

// setGroup writes the ops of one namespace (indices g into ops).
func setGroup(ops []RateOp, g []int, errs []error) {
	// lock the group's limiters in a fixed order (by device)
	var lims []*Limiter
	for _, i := range g {
		if !slices.Contains(lims, ops[i].L) {
			lims = append(lims, ops[i].L)
		}
	}
	slices.SortStableFunc(lims, func(a, b *Limiter) int { return a.idx - b.idx })
	for _, l := range lims {
		l.mu.Lock()
		l.batches++
	}
	defer func() {
		for _, l := range lims {
			l.mu.Unlock()
		}
	}()
	// how many ops name each pair with a class (pairClass.named, of
	// this batch)
	for _, i := range g {
		if pc, ok := ops[i].L.pairs[ops[i].P]; ok {
			if pc.batch != ops[i].L.batches {
				pc.batch, pc.named = ops[i].L.batches, 0
			}
			pc.named++
		}
	}
	// the class changes that go together, and the class of each (ops
	// written alone do not touch them)
	var changes []classChange
	var classes []*pairClass
	alone := make([]bool, len(g))
	for j, i := range g {
		op := ops[i]
		pc, ok := op.L.pairs[op.P]
		if !ok || pc.named > 1 || indebted(pc.rate, op.Bps) {
			alone[j] = true
			continue
		}
		changes = append(changes, classChange{ifindex: op.L.idx, c: op.L.class(pc.minor, op.Bps)})
		classes = append(classes, pc)
	}
	var cerrs []error
	if len(changes) > 0 {
		f, err := ops[g[0]].L.ns.fastSocket()
		if err != nil {
			cerrs = make([]error, len(changes))
			for k := range cerrs {
				cerrs[k] = err
			}
		} else {
			cerrs = f.changeHTBClasses(changes)
		}
	}
	k := 0
	for j, i := range g {
		op := ops[i]
		l := op.L
		if alone[j] {
			errs[i] = l.setPairRate(op.P, op.Bps)
			continue
		}
		cerr, pc := cerrs[k], classes[k]
		k++
		if cerr == nil {
			pc.rate = op.Bps
			continue
		}
		// as SetPairRate: the class, its queue or its classifier is
		// gone; make them anew
		cerr = fmt.Errorf("netns %s: %s: %w", l.ns.Name, l.dev, cerr)
		l.forget(op.P, pc)
		if err := l.create(op.P, op.Bps); err != nil {
			errs[i] = errors.Join(fmt.Errorf("limiter: pair %s: %w", op.P, cerr), err)
		}
	}
}

// forget removes what is left of a pair's class (best effort) and frees
// its minor.
func (l *Limiter) forget(p Pair, pc *pairClass) {
	_ = l.ns.DeleteU32(l.dev, TCHandle(l.major, 0), pc.minor)
	_ = l.ns.DeleteClass(l.dev, TCHandle(l.major, 0), TCHandle(l.major, pc.minor))
	delete(l.pairs, p)
	l.sorted = nil
	l.free = append(l.free, pc.minor)
}

// create makes the pair's class, queue and classifier (l.mu held).
func (l *Limiter) create(p Pair, bps float64) error {
	var minor uint16
	if n := len(l.free); n > 0 {
		minor = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		if l.next > MaxU32Node {
			return fmt.Errorf("limiter %s: pair %s: more than %d pairs", l.dev, p, MaxU32Node)
		}
		minor = l.next
		l.next++
	}
	c := l.class(minor, bps)
	err := l.ns.replaceHTBClass(l.idx, l.dev, c)
	if err == nil {
		err = l.ns.ReplaceFIFO(l.dev, c.Handle, TCHandle(0x8000|minor, 0), l.queue)
	}
	if err == nil {
		err = l.ns.addU32(l.idx, l.dev, U32Filter{Parent: TCHandle(l.major, 0), Prio: filterPrio, Node: minor, Match: pairMatch(p), ClassID: c.Handle})
	}
	if err != nil {
		_ = l.ns.DeleteClass(l.dev, c.Parent, c.Handle)
		l.free = append(l.free, minor)
		return fmt.Errorf("limiter: pair %s: %w", p, err)
	}
	l.pairs[p] = &pairClass{minor: minor, rate: bps}
	l.sorted = nil
	return nil
}

// PairRate returns the limit in force for the pair (+Inf: none).
func (l *Limiter) PairRate(p Pair) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pc, ok := l.pairs[p]; ok {
		return pc.rate
	}
	return math.Inf(1)
}

// DebtLimit is how long one offload packet (64 KB) may take at a pair's
// rate before raising that rate recreates the class (SetPairRate): at
// rates below 64 KB / DebtLimit (about 26 Mbit/s) a dequeued packet can
// leave the class that much in token debt.
const DebtLimit = 20 * time.Millisecond

// maxOffload is the largest packet a class may be charged for at once.
const maxOffload = 64 << 10

// indebted reports whether raising a class from rate old to rate new
// should recreate it (see DebtLimit): old is slow enough for a packet to
// cost more than DebtLimit, and new at least twice as fast.
func indebted(old, new float64) bool {
	return old*DebtLimit.Seconds() < maxOffload*8 && new > 2*old
}

// Recreated returns how many times SetPairRate recreated a class to clear
// a token debt.
func (l *Limiter) Recreated() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recreated
}

// RemovePair removes the pair's classifier and class: its traffic goes
// unshaped and uncounted. Removing a pair without a class is a no-op.
func (l *Limiter) RemovePair(p Pair) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	pc, ok := l.pairs[p]
	if !ok {
		return nil
	}
	return l.removePair(p, pc)
}

func (l *Limiter) removePair(p Pair, pc *pairClass) error {
	if err := l.ns.DeleteU32(l.dev, TCHandle(l.major, 0), pc.minor); err != nil {
		return fmt.Errorf("limiter: pair %s: %w", p, err)
	}
	if err := l.ns.DeleteClass(l.dev, TCHandle(l.major, 0), TCHandle(l.major, pc.minor)); err != nil {
		return fmt.Errorf("limiter: pair %s: %w", p, err)
	}
	delete(l.pairs, p)
	l.sorted = nil
	l.free = append(l.free, pc.minor)
	return nil
}

// Pairs returns the pairs with a class, sorted.
func (l *Limiter) Pairs() []Pair {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.SortedFunc(maps.Keys(l.pairs), datapath.ComparePairs)
}

// Counters returns every pair class's counters (one netlink dump).
func (l *Limiter) Counters() (map[Pair]Counters, error) {
	cs, err := l.ns.classCounters(l.idx, l.dev)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[Pair]Counters, len(l.pairs))
	for p, pc := range l.pairs {
		out[p] = cs[TCHandle(l.major, pc.minor)]
	}
	return out, nil
}

var _ datapath.PairReader = (*Limiter)(nil)

// ReadPairs implements datapath.PairReader: Counters into dst, with no
// allocation once dst holds every pair (one netlink dump, parsed into
// dst in place; the pairs' order is kept from one reading to the next
// while they stay the same).
func (l *Limiter) ReadPairs(dst []datapath.PairReading) ([]datapath.PairReading, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sorted == nil {
		l.sorted = make([]pairMinor, 0, len(l.pairs))
		for p, pc := range l.pairs {
			l.sorted = append(l.sorted, pairMinor{p, pc.minor})
		}
		slices.SortFunc(l.sorted, func(a, b pairMinor) int { return datapath.ComparePairs(a.p, b.p) })
		n := 0
		for _, pm := range l.sorted {
			n = max(n, int(pm.minor)+1)
		}
		l.slot = slices.Grow(l.slot[:0], n)[:n]
		for i := range l.slot {
			l.slot[i] = -1
		}
		for i, pm := range l.sorted {
			l.slot[pm.minor] = int32(i)
		}
	}
	dst = slices.Grow(dst[:0], len(l.sorted))[:len(l.sorted)]
	for i, pm := range l.sorted {
		dst[i] = datapath.PairReading{Pair: pm.p}
	}
	err := l.ns.dumpClasses(l.idx, l.dev, func(h uint32, c Counters) {
		if uint16(h>>16) != l.major {
			return
		}
		if m := int(h & 0xffff); m < len(l.slot) && l.slot[m] >= 0 {
			dst[l.slot[m]].Counters = c
		}
	})
	if err != nil {
		return dst[:0], fmt.Errorf("limiter: %w", err)
	}
	return dst, nil
}
