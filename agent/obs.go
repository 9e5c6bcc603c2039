package agent

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// What the agent measures, every period, into a mech.HostObs (rates in
// the scenario's units: link-layer bits/s on the wire ÷ Scale):
//
//   - Egress pairs (source VM here): the pair limiter's class counters on
//     the VM's interface — bytes sent (Rate), and LimiterBound when the
//     pair is limited and its class had a backlog at the reading, went
//     over its rate (HTB overlimits) or dropped during the period.
//   - Ingress pairs (destination VM here): the counting class of the
//     pair on the VM's veth in the server (bytes delivered).
//   - Losses: the LossCounter's new losses of the period, on the side it
//     detects them (AtSource: Egress, AtDestination: Ingress).
//   - VMs: OutRate what the VM's veth received from it (or, with an
//     egress scheduler, what the VM's class sent), InRate what the veth
//     delivered to it; with an ingress scheduler, InDrops the drops of the
//     VM's class: the bytes that arrived for the VM on the server's links
//     (its redirection filter's counters) minus what its class sent and
//     queued; InArrival = InRate + InDrops, and DropSrc the source of the VM's
//     ingress pair with the highest rate in the period (a drop-tail
//     queue drops in proportion to arrivals, so the largest sender loses
//     most).

// baseline reads every counter once so that the first step measures one
// period.
func (a *Agent) baseline() error {
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
		}
	}()
	first := a.last.IsZero()
	sec := now.Sub(a.last).Seconds()
	if first {
		sec = 0
	}
	obs := &mech.HostObs{Now: now.Sub(a.start), Period: now.Sub(a.last)}
	if first {
		obs.Period = 0
	}
	a.last = now
	rate := func(bytes uint64) float64 {
		if sec <= 0 {
			return 0
		}
		return float64(bytes) * 8 / sec / a.cfg.Scale
	}

	var lost map[dataplane.Pair]uint64
	if a.cfg.Loss != nil {
		l, err := a.cfg.Loss.Lost()
		if err != nil {
			a.met.errors.WithLabelValues("loss").Inc()
			a.log.Warn("loss counter", "err", err)
		}
		lost = l
	}
	newLoss := func(p dataplane.Pair) float64 {
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
	lossSide := AtSource
	if a.cfg.Loss != nil {
		lossSide = a.cfg.Loss.Side()
	}

	vms := a.sortedVMs()
	inBy := map[string][]int{} // VM → indices into obs.Ingress
	for _, v := range vms {
		if v.TX != nil {
			cs, err := v.TX.Counters()
			if err != nil {
				return nil, fmt.Errorf("agent %s: %w", a.cfg.Host, err)
			}
			for _, p := range sortedPairs(cs) {
				c := cs[p]
				id, ok := a.pairName(p)
				if !ok {
					continue
				}
				prev, seen := a.prevTX[p]
				a.prevTX[p] = c
				if !seen {
					prev = c
				}
				lim, limited := a.limits[id]
				if !limited {
					lim = mech.Unlimited
				}
				limited = limited && !math.IsInf(lim, 1)
				o := mech.PairObs{Pair: id, Tenant: a.tenant(id.Src), Rate: rate(delta(c.Bytes, prev.Bytes)), Limit: lim}
				o.LimiterBound = limited && (c.Backlog > 0 || delta32(c.Overlimits, prev.Overlimits) > 0 || delta32(c.Drops, prev.Drops) > 0)
				if lossSide == AtSource {
					o.Losses = newLoss(p)
				}
				if o.Rate > 0 || limited || o.Losses > 0 {
					obs.Egress = append(obs.Egress, o)
				}
			}
		}
		if v.RX != nil {
			cs, err := v.RX.Counters()
			if err != nil {
				return nil, fmt.Errorf("agent %s: %w", a.cfg.Host, err)
			}
			for _, p := range sortedPairs(cs) {
				c := cs[p]
				id, ok := a.pairName(p)
				if !ok {
					continue
				}
				prev, seen := a.prevRX[p]
				a.prevRX[p] = c.Bytes
				if !seen {
					prev = c.Bytes
				}
				o := mech.PairObs{Pair: id, Tenant: a.tenant(id.Src), Rate: rate(delta(c.Bytes, prev)), Limit: mech.Unlimited}
				if l, ok := a.limits[id]; ok {
					o.Limit = l
				}
				if lossSide == AtDestination {
					o.Losses = newLoss(p)
				}
				if o.Rate > 0 || o.Losses > 0 {
					inBy[v.Name] = append(inBy[v.Name], len(obs.Ingress))
					obs.Ingress = append(obs.Ingress, o)
				}
			}
		}
	}

	// per-VM device counters
	links, err := a.cfg.NS.Netlink().LinkList()
	if err != nil {
		return nil, fmt.Errorf("agent %s: list links: %w", a.cfg.Host, err)
	}
	dev := map[string][2]uint64{}
	for _, l := range links {
		at := l.Attrs()
		if s := at.Statistics; s != nil {
			dev[at.Name] = [2]uint64{s.RxBytes, s.TxBytes}
		}
	}
	var sch [2]map[string]dataplane.Counters
	for d, s := range []*Scheduler{a.txSched, a.rxSched} {
		if s == nil {
			continue
		}
		cs, err := s.Counters()
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", a.cfg.Host, err)
		}
		sch[d] = cs
	}
	arr := map[string]uint64{}
	if a.rxSched != nil && a.rxSched.Installed() {
		for _, l := range a.cfg.Links {
			rs, err := a.cfg.NS.IngressRedirected(l)
			if err != nil {
				return nil, fmt.Errorf("agent %s: %w", a.cfg.Host, err)
			}
			for _, r := range rs {
				if !r.Dst.IsValid() || r.Dst.Bits() != 32 {
					continue
				}
				if vm, ok := a.byAddr[r.Dst.Addr()]; ok {
					arr[vm] += r.Bytes
				}
			}
		}
	}
	for _, v := range vms {
		o := mech.VMObs{VM: v.Name}
		cur, ok := dev[v.HostDev]
		prev, seen := a.prevDev[v.HostDev]
		if ok {
			a.prevDev[v.HostDev] = cur
			if seen {
				o.OutRate = rate(delta(cur[0], prev[0]))
				o.InRate = rate(delta(cur[1], prev[1]))
			}
		}
		if c, ok := sch[mech.Egress][v.Name]; ok {
			p := a.prevSch[mech.Egress][v.Name]
			o.OutRate = rate(delta(c.Bytes, p.Bytes))
		}
		if c, ok := sch[mech.Ingress][v.Name]; ok {
			p := a.prevSch[mech.Ingress][v.Name]
			if cur, ok := arr[v.Name]; ok {
				// dropped = arrived − sent − what was added to the queue
				prev, seen := a.prevArr[v.Name]
				a.prevArr[v.Name] = cur
				if seen && p != (dataplane.Counters{}) {
					// The two counters are read by separate dumps, so a
					// period's difference is noisy; the noise cancels over
					// periods if negative residues carry over. Drops are
					// only reported when the class did drop.
					in := float64(delta(cur, prev))
					out := float64(delta(c.Bytes, p.Bytes)) + float64(c.Backlog) - float64(p.Backlog)
					d := in - out + a.dropCarry[v.Name]
					a.dropCarry[v.Name] = 0
					switch {
					case d < 0:
						a.dropCarry[v.Name] = math.Max(d, -float64(SchedQueue))
					case delta32(c.Drops, p.Drops) > 0:
						o.InDrops = rate(uint64(d))
					default:
						// no drop: the difference was timing, keep none
					}
				}
			} else if drops := delta32(c.Drops, p.Drops); drops > 0 {
				// Without arrival counters: drops (whole offload
				// packets) × the class's mean segment size, which
				// underestimates when offload packets are dropped.
				size := 1514.0
				if pk := delta(c.Packets, p.Packets); pk > 0 {
					size = float64(delta(c.Bytes, p.Bytes)) / float64(pk)
				}
				o.InDrops = rate(uint64(float64(drops) * size))
			}
		}
		o.InArrival = o.InRate + o.InDrops
		if o.InDrops > 0 {
			best := -1.0
			for _, i := range inBy[v.Name] {
				if r := obs.Ingress[i].Rate; r > best {
					best, o.DropSrc = r, obs.Ingress[i].Pair.Src
				}
			}
		}
		obs.VMs = append(obs.VMs, o)
	}
	a.prevSch = sch
	return obs, nil
}

func (a *Agent) tenant(vm string) string {
	if v, ok := a.cfg.Env.VM(vm); ok {
		return v.Tenant
	}
	return ""
}

func sortedPairs[V any](m map[dataplane.Pair]V) []dataplane.Pair {
	out := make([]dataplane.Pair, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sortPairs(out)
	return out
}

func sortPairs(ps []dataplane.Pair) {
	sort.Slice(ps, func(i, j int) bool { return pairLess(ps[i], ps[j]) })
}

func pairLess(x, y dataplane.Pair) bool {
	if c := x.Src.Compare(y.Src); c != 0 {
		return c < 0
	}
	return x.Dst.Less(y.Dst)
}
