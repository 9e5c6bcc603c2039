package agent

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/prometheus/client_golang/prometheus"
)

// What the agent measures, every period, into a mech.HostObs (rates in
// the model's units: bits/s on the data path ÷ Scale), from the data
// path's counters only:
//
//   - Egress pairs (source VM here): the counters of the pair's limiter
//     at the VM — bytes sent (Rate), and LimiterBound when the pair is
//     limited and its queue had a backlog at the reading, was held back
//     by its rate (overlimits) or dropped during the period.
//   - Ingress pairs (destination VM here): the pair's receive counters
//     at the VM (bytes delivered).
//   - Losses: the loss counter's new losses of the period, on the side it
//     sees them (mech.LossAtSource: Egress, mech.LossAtDestination:
//     Ingress).
//   - VMs: OutRate what the VM's device received from it (or, with an
//     egress scheduler, what the VM's class sent), InRate what the device
//     delivered to it; with an ingress scheduler, InDrops the drops of the
//     VM's class: the bytes that arrived for the VM before the scheduler
//     (its arrival counters) minus what its class sent and queued;
//     InArrival = InRate + InDrops, and DropSrc the source of the VM's
//     ingress pair with the highest rate in the period (a drop-tail
//     queue drops in proportion to arrivals, so the largest sender loses
//     most).

// obsState is what observe keeps between readings.
type obsState struct {
	start     time.Time
	last      time.Time
	reads     uint64 // the pair limiters' readings so far (pairInfo.txRead)
	prevLoss  map[datapath.Pair]uint64
	prevDev   map[string]datapath.DevCounters // device → counters
	prevSch   [2]map[string]datapath.Counters // the latest reading of the schedulers' classes
	prevArr   map[string]uint64               // VM → bytes arrived for it before the ingress scheduler
	dropCarry map[string]float64              // VM → negative residue of the drop estimate (bytes)

	// pairAt indexes the pairs the data path reads into pairs, from
	// their first reading until the model changes (resetPairs): the hot
	// path names a pair, finds its tenant, its limit, its previous
	// reading and its metrics by integer index rather than by maps of
	// names; pairByID indexes the named ones by their VMs
	pairAt   map[datapath.Pair]int32
	pairByID map[mech.PairID]int32
	pairs    []pairInfo
	// pairGen counts the indexings (resetPairs): a VM's cached indices
	// (pairCache) are of the generation they were made in
	pairGen uint64
	// carryTX and carryRX are the previous readings of pairs across a
	// resetPairs, until each pair is indexed again (carryTX: only until
	// the next reading, which replaces the limiters' latest)
	carryTX map[datapath.Pair]datapath.Counters
	carryRX map[datapath.Pair]uint64
	// egIdx and inIdx are the pairs' indices of the latest observation's
	// Egress and Ingress, in order (for record)
	egIdx, inIdx []int32

	// reused from one observation to the next (the simulator, too,
	// gives mechanisms observations whose slices it reuses)
	obs    mech.HostObs
	vmList []*vmPath // the host's VMs by name (nil: to be sorted again)
}

// pairInfo is what the agent knows of one pair the data path reads.
type pairInfo struct {
	pair   datapath.Pair // its addresses
	id     mech.PairID   // its VMs, as the model names them
	named  bool          // both addresses name a VM of the model
	tenant string        // the source VM's tenant
	src    *vmPath       // its source VM, if on the host
	// its limit in force (enforcer.limits; limited false: none)
	lim     float64
	limited bool
	// the latest reading of its limiter, from reading number txRead
	// (obsState.reads; 0: never read)
	tx     datapath.Counters
	txRead uint64
	// the bytes of its receive counter at its latest reading (rxSeen:
	// read once at least)
	rx     uint64
	rxSeen bool
	// its metrics, made at first use: rates by direction, limit, and
	// the values they were last set to
	rate     [2]prometheus.Gauge
	limit    prometheus.Gauge
	rateSet  [2]float64
	limitSet float64
}

// pairCache is a VM's latest reading of its limiter or receive counters
// (buf, reused) and the pairs' indices, kept while the reading names the
// same pairs in the same order.
type pairCache struct {
	buf  []datapath.PairReading
	keys []datapath.Pair
	idx  []int32
	gen  uint64
}

// indices returns the pairs' indices of c's reading, indexing new ones.
func (a *Agent) indices(c *pairCache) []int32 {
	rs := c.buf
	if c.gen == a.pairGen && len(c.keys) == len(rs) {
		same := true
		for k := range rs {
			if rs[k].Pair != c.keys[k] {
				same = false
				break
			}
		}
		if same {
			return c.idx
		}
	}
	c.keys, c.idx = c.keys[:0], c.idx[:0]
	for _, r := range rs {
		c.keys = append(c.keys, r.Pair)
		c.idx = append(c.idx, a.pairIndex(r.Pair))
	}
	c.gen = a.pairGen
	return c.idx
}

// pairIndex returns the index of a pair the data path reads, indexing it
// on its first reading.
func (a *Agent) pairIndex(p datapath.Pair) int32 {
	if i, ok := a.pairAt[p]; ok {
		return i
	}
	id, named := a.pairName(p)
	info := pairInfo{pair: p, id: id, named: named}
	i := int32(len(a.pairs))
	if named {
		info.tenant = a.tenant(id.Src)
		info.src = a.vms[id.Src]
		info.lim, info.limited = a.enf.limits[id]
		a.pairByID[id] = i
	}
	if c, ok := a.carryTX[p]; ok {
		info.tx, info.txRead = c, a.reads
	}
	if c, ok := a.carryRX[p]; ok {
		info.rx, info.rxSeen = c, true
		delete(a.carryRX, p)
	}
	a.pairs = append(a.pairs, info)
	a.pairAt[p] = i
	return i
}

// resetPairs forgets the pairs' indices: the model, which names them,
// changed. Their latest readings are carried over to their next
// indexing.
func (s *obsState) resetPairs() {
	for p, i := range s.pairAt {
		info := &s.pairs[i]
		if info.txRead == s.reads && s.reads > 0 {
			s.carryTX[p] = info.tx
		}
		if info.rxSeen {
			s.carryRX[p] = info.rx
		}
	}
	clear(s.pairAt)
	clear(s.pairByID)
	s.pairs = s.pairs[:0]
	s.pairGen++
	s.egIdx, s.inIdx = s.egIdx[:0], s.inIdx[:0]
}

// prevRX returns the bytes of every pair's receive counter at its latest
// reading (for tests).
func (s *obsState) prevRX() map[datapath.Pair]uint64 {
	out := maps.Clone(s.carryRX)
	for p, i := range s.pairAt {
		if s.pairs[i].rxSeen {
			out[p] = s.pairs[i].rx
		}
	}
	return out
}

// setLimit records pair id's limit in force (limited false: none) where
// observe reads it; at is its index if known (-1: look it up).
func (s *obsState) setLimit(id mech.PairID, at int32, lim float64, limited bool) {
	if at < 0 {
		var ok bool
		if at, ok = s.pairByID[id]; !ok {
			return
		}
	}
	s.pairs[at].lim, s.pairs[at].limited = lim, limited
}

func newObsState() obsState {
	return obsState{prevLoss: map[datapath.Pair]uint64{},
		prevDev: map[string]datapath.DevCounters{}, prevArr: map[string]uint64{}, dropCarry: map[string]float64{},
		pairAt: map[datapath.Pair]int32{}, pairByID: map[mech.PairID]int32{}, pairGen: 1,
		carryTX: map[datapath.Pair]datapath.Counters{}, carryRX: map[datapath.Pair]uint64{}}
}

// forgetVM drops what observe keeps of a VM that left the host.
func (s *obsState) forgetVM(vm string) {
	delete(s.prevArr, vm)
	delete(s.dropCarry, vm)
}

// prune drops, after a model update, what observe keeps of devices and
// pairs that are no longer the host's to read (oldBy: the addresses
// before the update): a pair is kept while both its addresses name the
// VMs they named before, and the VM whose counter reads it (the
// destination's receive counter; either side's losses) is on the host.
func (a *Agent) prune(oldBy map[netip.Addr]string) {
	same := func(ad netip.Addr) bool { n, ok := a.byAddr[ad]; return ok && oldBy[ad] == n }
	here := func(ad netip.Addr) bool { return a.vms[a.byAddr[ad]] != nil }
	maps.DeleteFunc(a.carryRX, func(p datapath.Pair, _ uint64) bool {
		return !same(p.Src) || !same(p.Dst) || !here(p.Dst)
	})
	maps.DeleteFunc(a.prevLoss, func(p datapath.Pair, _ uint64) bool {
		return !same(p.Src) || !same(p.Dst) || !here(p.Src) && !here(p.Dst)
	})
	devs := map[string]bool{}
	for _, v := range a.vms {
		devs[v.dev] = true
	}
	maps.DeleteFunc(a.prevDev, func(d string, _ datapath.DevCounters) bool { return !devs[d] })
}

// baseline reads every counter once so that the first step measures one
// period.
func (a *Agent) baseline() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, err := a.observe(time.Now())
	return err
}

// delta returns cur − prev for a counter that may have been reset.
func delta(cur, prev uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

func delta32(cur, prev uint32) uint64 {
	if cur < prev {
		return uint64(cur)
	}
	return uint64(cur - prev)
}

// observe reads the counters and returns the observation of the period
// since the previous reading.
//
// When a read fails, some counters' previous readings have moved and others
// have not: the next observation starts afresh (rates 0, like the first)
// rather than divide two periods of bytes by one.
func (a *Agent) observe(now time.Time) (_ *mech.HostObs, err error) {
	defer func() {
		if err != nil {
			a.last = time.Time{}
			err = fmt.Errorf("agent %s: %w", a.cfg.Host, err)
		}
	}()
	first := a.last.IsZero()
	sec := now.Sub(a.last).Seconds()
	// a new observation whose slices are the previous one's storage, as
	// the simulator gives them
	obs := &mech.HostObs{Now: now.Sub(a.start), Period: now.Sub(a.last), Egress: a.obs.Egress[:0], Ingress: a.obs.Ingress[:0], VMs: a.obs.VMs[:0]}
	defer func() { a.obs = *obs }()
	if first {
		sec, obs.Period = 0, 0
	}
	a.last = now
	rate := func(bytes uint64) float64 {
		if sec <= 0 {
			return 0
		}
		return float64(bytes) * 8 / sec / a.cfg.Scale
	}

	var lost map[datapath.Pair]uint64
	lossSide := mech.LossAtSource
	if lc := a.cfg.Path.Loss(); lc != nil {
		lossSide = lc.Side()
		l, err := lc.Lost()
		if err != nil {
			a.met.errors.WithLabelValues("loss").Inc()
			a.log.Warn("loss counter", "err", err)
		}
		lost = l
	}
	newLoss := func(p datapath.Pair) float64 {
		c, ok := lost[p]
		if !ok {
			return 0
		}
		d := delta(c, a.prevLoss[p])
		a.prevLoss[p] = c
		if first {
			return 0
		}
		return float64(d)
	}

	vms := a.sortedVMs()
	a.egIdx, a.inIdx = a.egIdx[:0], a.inIdx[:0]
	for _, v := range vms {
		if v.TX != nil {
			rs, err := datapath.ReadPairs(v.TX, v.tx.buf)
			v.tx.buf = rs
			if err != nil {
				return nil, fmt.Errorf("pair limiters of %s: %w", v.name, err)
			}
			idx := a.indices(&v.tx)
			for k := range rs {
				c := &rs[k].Counters
				pi := idx[k]
				info := &a.pairs[pi]
				if !info.named {
					continue
				}
				prev := c
				if a.reads > 0 && info.txRead == a.reads {
					prev = &info.tx
				}
				lim, limited := info.lim, info.limited
				if !limited {
					lim = mech.Unlimited
				}
				limited = limited && !math.IsInf(lim, 1)
				o := mech.PairObs{Pair: info.id, Tenant: info.tenant, Rate: rate(delta(c.Bytes, prev.Bytes)), Limit: lim}
				o.LimiterBound = limited && (c.Backlog > 0 || delta32(c.Overlimits, prev.Overlimits) > 0 || delta32(c.Drops, prev.Drops) > 0)
				if lossSide == mech.LossAtSource {
					o.Losses = newLoss(rs[k].Pair)
				}
				if o.Rate > 0 || limited || o.Losses > 0 {
					obs.Egress = append(obs.Egress, o)
					a.egIdx = append(a.egIdx, pi)
				}
			}
		}
		v.inLo = len(obs.Ingress)
		if v.RX != nil {
			rs, err := datapath.ReadPairs(v.RX, v.rx.buf)
			v.rx.buf = rs
			if err != nil {
				return nil, fmt.Errorf("receive counters of %s: %w", v.name, err)
			}
			idx := a.indices(&v.rx)
			for k := range rs {
				c := &rs[k].Counters
				pi := idx[k]
				info := &a.pairs[pi]
				if !info.named {
					continue
				}
				prev := c.Bytes
				if info.rxSeen {
					prev = info.rx
				}
				info.rx, info.rxSeen = c.Bytes, true
				o := mech.PairObs{Pair: info.id, Tenant: info.tenant, Rate: rate(delta(c.Bytes, prev)), Limit: mech.Unlimited}
				if info.limited {
					o.Limit = info.lim
				}
				if lossSide == mech.LossAtDestination {
					o.Losses = newLoss(rs[k].Pair)
				}
				if o.Rate > 0 || o.Losses > 0 {
					obs.Ingress = append(obs.Ingress, o)
					a.inIdx = append(a.inIdx, pi)
				}
			}
		}
		v.inHi = len(obs.Ingress)
	}
	// the limiters' reading is now the latest
	a.reads++
	clear(a.carryTX)
	for _, v := range vms {
		if v.TX == nil {
			continue
		}
		for k, i := range v.tx.idx {
			a.pairs[i].tx, a.pairs[i].txRead = v.tx.buf[k].Counters, a.reads
		}
	}

	dev, err := a.cfg.Path.Devices()
	if err != nil {
		return nil, err
	}
	var sch [2]map[string]datapath.Counters
	for _, d := range []mech.Direction{mech.Egress, mech.Ingress} {
		if s := a.cfg.Path.Scheduler(d); s != nil {
			cs, err := s.Counters()
			if err != nil {
				return nil, fmt.Errorf("%s scheduler: %w", dirName(d), err)
			}
			sch[d] = cs
		}
	}
	var arr map[string]uint64
	if s := a.cfg.Path.Scheduler(mech.Ingress); s != nil {
		if arr, err = s.Arrivals(); err != nil {
			return nil, fmt.Errorf("ingress scheduler: %w", err)
		}
	}
	for _, v := range vms {
		o := mech.VMObs{VM: v.name}
		cur, ok := dev[v.dev]
		prev, seen := a.prevDev[v.dev]
		if ok {
			a.prevDev[v.dev] = cur
			if seen {
				o.OutRate = rate(delta(cur.Rx, prev.Rx))
				o.InRate = rate(delta(cur.Tx, prev.Tx))
			}
		}
		if c, ok := sch[mech.Egress][v.name]; ok {
			p := a.prevSch[mech.Egress][v.name]
			o.OutRate = rate(delta(c.Bytes, p.Bytes))
		}
		if c, ok := sch[mech.Ingress][v.name]; ok {
			o.InDrops = a.inDrops(v.name, c, a.prevSch[mech.Ingress][v.name], arr, rate)
		}
		o.InArrival = o.InRate + o.InDrops
		if o.InDrops > 0 {
			best := -1.0
			for _, in := range obs.Ingress[v.inLo:v.inHi] {
				if in.Rate > best {
					best, o.DropSrc = in.Rate, in.Pair.Src
				}
			}
		}
		obs.VMs = append(obs.VMs, o)
	}
	a.prevSch = sch
	a.enf.observed()
	return obs, nil
}

// inDrops estimates what a VM's ingress class dropped in the period (a
// rate), from its class counters c (previous reading p) and, when the
// data path counts them, the VM's arrivals.
func (a *Agent) inDrops(vm string, c, p datapath.Counters, arr map[string]uint64, rate func(uint64) float64) float64 {
	cur, ok := arr[vm]
	if !ok {
		drops := delta32(c.Drops, p.Drops)
		if drops == 0 {
			return 0
		}
		// Without arrival counters: drops (whole offload packets) × the
		// class's mean segment size, which underestimates when offload
		// packets are dropped.
		size := 1514.0
		if pk := delta(c.Packets, p.Packets); pk > 0 {
			size = float64(delta(c.Bytes, p.Bytes)) / float64(pk)
		}
		return rate(uint64(float64(drops) * size))
	}
	// dropped = arrived − sent − what was added to the queue
	prev, seen := a.prevArr[vm]
	a.prevArr[vm] = cur
	if !seen || p == (datapath.Counters{}) {
		return 0
	}
	// The two counters are read separately, so a period's difference is
	// noisy; the noise cancels over periods if negative residues carry
	// over. Drops are only reported when the class did drop.
	in := float64(delta(cur, prev))
	out := float64(delta(c.Bytes, p.Bytes)) + float64(c.Backlog) - float64(p.Backlog)
	d := in - out + a.dropCarry[vm]
	a.dropCarry[vm] = 0
	switch {
	case d < 0:
		a.dropCarry[vm] = math.Max(d, -float64(datapath.SchedQueue))
	case delta32(c.Drops, p.Drops) > 0:
		return rate(uint64(d))
	}
	// no drop: the difference was timing, keep none
	return 0
}

func (a *Agent) tenant(vm string) string {
	if v, ok := a.drv.Env().VM(vm); ok {
		return v.Tenant
	}
	return ""
}
