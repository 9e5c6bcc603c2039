package hostpath

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/agent"
	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/linux"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/model"
)

// peersPerVM is how many remote VMs each local VM of a scale host talks
// to: N pairs are N/peersPerVM local VMs (at least one) × peersPerVM.
const peersPerVM = 64

// scaleAddr is the address of the k-th VM of a scale model.
func scaleAddr(k int) netip.Addr {
	k += 1 << 16
	return netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
}

// scaleModel is a host h1 with n egress pairs and n ingress pairs: local
// VMs l0, l1, ... each with its own tenant of peersPerVM remote VMs on
// hosts h2... (one host per tenant).
func scaleModel(n int) (m *model.Model, local []string) {
	vms := max(1, n/peersPerVM)
	peers := n / vms
	m = &model.Model{}
	k := 0
	for i := 0; i < vms; i++ {
		t := model.Tenant{Name: fmt.Sprintf("t%d", i)}
		name := fmt.Sprintf("l%d", i)
		t.VMs = append(t.VMs, model.VM{Name: name, Tenant: t.Name, Host: "h1", Addrs: []netip.Addr{scaleAddr(k)}, In: 1e9, Out: 1e9})
		local = append(local, name)
		k++
		for j := 0; j < peers; j++ {
			t.VMs = append(t.VMs, model.VM{Name: fmt.Sprintf("r%d-%d", i, j), Tenant: t.Name, Host: fmt.Sprintf("h%d", i+2),
				Addrs: []netip.Addr{scaleAddr(k)}, In: 100e6, Out: 100e6})
			k++
		}
		m.Tenants = append(m.Tenants, t)
	}
	return m, local
}

// scaleServer builds, in a namespace of its own, what the testbed builds
// for a server's VMs: per local VM a pair limiter (an HTB on an IFB) and
// receive counters (the eBPF program of linux.RXCounters on another). Everything is removed
// when the benchmark ends.
func scaleServer(b *testing.B, m *model.Model, local []string) (*dataplane.NS, map[string]linux.Limiters) {
	b.Helper()
	if err := dataplane.RequireRoot(); err != nil {
		b.Skipf("needs root: %v", err)
	}
	prefix := dataplane.RandomPrefix("as")
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dataplane.Cleanup(ctx, prefix); err != nil {
			b.Errorf("cleanup %s: %v", prefix, err)
		}
	})
	ns, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+"h1", dataplane.NSOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ns.Close)
	lims := map[string]linux.Limiters{}
	for i, name := range local {
		tx, rx := fmt.Sprintf("%st%d", prefix, i), fmt.Sprintf("%sr%d", prefix, i)
		var l linux.Limiters
		for _, dev := range []string{tx, rx} {
			if err := ns.AddIFB(dev); err != nil {
				b.Fatal(err)
			}
		}
		if l.TX, err = dataplane.NewLimiter(ns, dataplane.LimiterConfig{Dev: tx}); err != nil {
			b.Fatal(err)
		}
		if l.RX, err = linux.NewRXCounters(ns, rx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.RX.Close() })
		v, t, _ := m.VM(name)
		for _, o := range t.VMs {
			if o.Name != name {
				if err := l.RX.CountPair(datapath.Pair{Src: o.Addrs[0], Dst: v.Addrs[0]}); err != nil {
					b.Fatal(err)
				}
			}
		}
		lims[name] = l
	}
	return ns, lims
}

// traffic is a data path whose pairs' counters show traffic on top of
// what the kernel counts: every reading, each egress pair sent a period
// at its limit (at most 1 Gbit/s) and was held back by it, each ingress
// pair received a period at 100 Mbit/s — so that the mechanism limits
// every pair and moves every limit every period.
type traffic struct {
	datapath.Host
	period time.Duration

	mu  sync.Mutex
	add map[datapath.Pair]*datapath.Counters
}

func (t *traffic) Attach(vm datapath.VM) (datapath.VMPath, error) {
	p, err := t.Host.Attach(vm)
	if p.TX != nil {
		p.TX = trafficTX{p.TX, t, &pairAdds{}}
	}
	if p.RX != nil {
		p.RX = trafficRX{p.RX, t, &pairAdds{}}
	}
	return p, err
}

// show adds a period of traffic at rate r (bits/s, or the limit read:
// limit) to the counters cs.
func (t *traffic) show(cs map[datapath.Pair]datapath.Counters, r float64, limit bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, c := range cs {
		t.showOne(p, &c, r, limit)
		cs[p] = c
	}
}

// pairAdds is what traffic adds to the pairs of one reader's latest
// reading, in its order: the pairs' entries of traffic.add, kept while
// the reader reads the same pairs (so that the benchmark's synthetic
// counters cost the step as little as they can).
type pairAdds struct {
	keys []datapath.Pair
	adds []*datapath.Counters
}

// showPairs is show of a reading into a slice (datapath.PairReader) by
// the reader whose pairs' entries are c.
func (t *traffic) showPairs(c *pairAdds, rs []datapath.PairReading, r float64, limit bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	same := len(c.keys) == len(rs)
	for i := 0; same && i < len(rs); i++ {
		same = c.keys[i] == rs[i].Pair
	}
	if !same {
		c.keys, c.adds = c.keys[:0], c.adds[:0]
		for i := range rs {
			c.keys = append(c.keys, rs[i].Pair)
			c.adds = append(c.adds, t.entry(rs[i].Pair))
		}
	}
	for i := range rs {
		t.addTo(c.adds[i], &rs[i].Counters, r, limit)
	}
}

// entry is what traffic adds to pair p's counters (t.mu held).
func (t *traffic) entry(p datapath.Pair) *datapath.Counters {
	a := t.add[p]
	if a == nil {
		a = &datapath.Counters{}
		t.add[p] = a
	}
	return a
}

// showOne adds a period of traffic to pair p's counters c (t.mu held).
func (t *traffic) showOne(p datapath.Pair, c *datapath.Counters, r float64, limit bool) {
	t.addTo(t.entry(p), c, r, limit)
}

// addTo adds a period of traffic to a (what was added to the pair so
// far) and a to the pair's counters c.
func (t *traffic) addTo(a, c *datapath.Counters, r float64, limit bool) {
	rate := r
	if limit {
		rate = min(c.Rate, 1e9)
	}
	a.Bytes += uint64(rate * t.period.Seconds() / 8)
	a.Packets += uint64(rate*t.period.Seconds()/8/1500) + 1
	if limit {
		a.Overlimits++
	}
	c.Bytes += a.Bytes
	c.Packets += a.Packets
	c.Overlimits += a.Overlimits
}

// batchTraffic is traffic whose data path writes pairs' rates in
// batches (datapath.RateBatcher), as datapath/linux does.
type batchTraffic struct{ *traffic }

func (t batchTraffic) SetPairRates(ops []datapath.PairRate) []error {
	in := make([]datapath.PairRate, len(ops))
	for i, op := range ops {
		in[i] = op
		if tx, ok := op.TX.(trafficTX); ok {
			in[i].TX = tx.PairLimiter
		}
	}
	return datapath.SetPairRates(t.Host, in)
}

type trafficTX struct {
	datapath.PairLimiter
	t *traffic
	c *pairAdds
}

func (l trafficTX) Counters() (map[datapath.Pair]datapath.Counters, error) {
	cs, err := l.PairLimiter.Counters()
	l.t.show(cs, 0, true)
	return cs, err
}

func (l trafficTX) ReadPairs(dst []datapath.PairReading) ([]datapath.PairReading, error) {
	rs, err := datapath.ReadPairs(l.PairLimiter, dst)
	l.t.showPairs(l.c, rs, 0, true)
	return rs, err
}

type trafficRX struct {
	datapath.PairCounters
	t *traffic
	c *pairAdds
}

func (l trafficRX) Counters() (map[datapath.Pair]datapath.Counters, error) {
	cs, err := l.PairCounters.Counters()
	l.t.show(cs, 100e6, false)
	return cs, err
}

func (l trafficRX) ReadPairs(dst []datapath.PairReading) ([]datapath.PairReading, error) {
	rs, err := datapath.ReadPairs(l.PairCounters, dst)
	l.t.showPairs(l.c, rs, 100e6, false)
	return rs, err
}

// BenchmarkAgentStep measures the host agent's step under ElasticSwitch
// on a real data path (HTB limiters in a namespace) with 64 to 4,096
// egress pairs (and as many ingress pairs), every pair sending at its
// limit: reading the counters, the mechanism's step, the driver core's
// checks and reconciliation, and the limiter updates. It reports the
// limiter updates per step and their mean time.
//
// writes=batched is the agent as it runs (a batch of limiter updates per
// step, datapath.RateBatcher); writes=each hides the batching, so that
// every update is its own netlink round trip, as before batching.
func BenchmarkAgentStep(b *testing.B) {
	for _, n := range []int{64, 256, 1024, 4096} {
		for _, batched := range []bool{false, true} {
			name := fmt.Sprintf("pairs=%d/writes=each", n)
			if batched {
				name = fmt.Sprintf("pairs=%d/writes=batched", n)
			}
			b.Run(name, func(b *testing.B) { benchStep(b, n, batched) })
		}
	}
}

func benchStep(b *testing.B, n int, batched bool) {
	{
		{
			m, local := scaleModel(n)
			ns, lims := scaleServer(b, m, local)
			mc, err := all.New("elasticswitch", nil)
			if err != nil {
				b.Fatal(err)
			}
			lp, err := linux.NewHost(linux.Config{NS: ns, VMs: lims})
			if err != nil {
				b.Fatal(err)
			}
			period := 15 * time.Millisecond
			var path datapath.Host = &traffic{Host: lp, period: period, add: map[datapath.Pair]*datapath.Counters{}}
			if batched {
				path = batchTraffic{path.(*traffic)}
			}
			a, err := agent.New(agent.Config{Host: "h1", Model: m, Mechanism: mc, Path: path})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = a.Close() })
			now := time.Unix(1000, 0)
			// the first steps: baseline, classes made, GP's first round
			for i := 0; i < 8; i++ {
				if err := a.Step(now); err != nil {
					b.Fatal(err)
				}
				now = now.Add(period)
			}
			w0 := a.Stats().Writes
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for b.Loop() {
				if err := a.Step(now); err != nil {
					b.Fatal(err)
				}
				now = now.Add(period)
			}
			b.StopTimer()
			writes := float64(a.Stats().Writes - w0)
			b.ReportMetric(writes/float64(b.N), "updates/step")
			// the process's CPU time (user and system, every thread: the
			// kernel's work for the step's system calls, the garbage
			// collector) per step: what the step costs a core, less
			// sensitive than ns/op to other work on the machine
			b.ReportMetric((cpuTime(b)-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/step")
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		b.Fatal(err)
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
