package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"time"

	"github.com/bulkhead-dc/bulkhead/alloc"
	"github.com/bulkhead-dc/bulkhead/mech/qshare"
	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// QShare's large-scale analysis (§7.3, Table 1 and Fig. 10; `bulkhead bench
// qshare`): tenants are embedded with QShare's placement into a
// fat-tree-based datacenter until it is full, and QShare's scores
// (qshare.Payment, qshare.Score) and tenant-queue binding (qshare.Binder,
// Alg. 2) run on the result at tenant level — the paper's own simulator
// "focuses on modeling tenant-level throughput", not packets.
// docs/qshare.md gives the reconstruction and assumptions.

// QShareScaleOptions configure the analysis; zero values take defaults.
type QShareScaleOptions struct {
	K     int     // fat-tree arity (default 16: 1024 servers)
	Slots int     // VM slots per server (default 100)
	Link  float64 // capacity of every link, bits/s (default 10 Gbps)
	// Ratios are the oversubscription ratios (default 1, 2, 4); each must
	// divide K/2.
	Ratios []int
	Queues int // WFQ queues per switch port (default 8)
	// MeanVMs is the mean of the exponential tenant size (default 49,
	// at least 1 VM); Guarantees are the per-VM hose values, bits/s
	// (default 50, 100, 200, 300, 500 Mbps).
	MeanVMs    float64
	Guarantees []float64
	Rounds     int       // binding rounds with random scores (default 20)
	Inactive   []float64 // inactive ratios of Fig. 10(a) (default 0, 0.2, ..., 0.8)
	UtilAt     float64   // inactive ratio of the utilization CDF (default 0.5)
	Seed       int64     // default 1
}

func (o *QShareScaleOptions) defaults() error {
	if o.K == 0 {
		o.K = 16
	}
	if o.Slots == 0 {
		o.Slots = 100
	}
	if o.Link == 0 {
		o.Link = 10e9
	}
	if len(o.Ratios) == 0 {
		o.Ratios = []int{1, 2, 4}
	}
	if o.Queues == 0 {
		o.Queues = 8
	}
	if o.MeanVMs == 0 {
		o.MeanVMs = 49
	}
	if len(o.Guarantees) == 0 {
		o.Guarantees = []float64{50e6, 100e6, 200e6, 300e6, 500e6}
	}
	if o.Rounds == 0 {
		o.Rounds = 20
	}
	if len(o.Inactive) == 0 {
		o.Inactive = []float64{0, 0.2, 0.4, 0.6, 0.8}
	}
	if o.UtilAt == 0 {
		o.UtilAt = 0.5
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	switch {
	case o.K < 2 || o.K%2 != 0:
		return fmt.Errorf("qshare scale: k must be even and ≥ 2, got %d", o.K)
	case o.Slots < 1:
		return fmt.Errorf("qshare scale: slots must be ≥ 1, got %d", o.Slots)
	case o.Queues < 1 || o.Queues > 64:
		return fmt.Errorf("qshare scale: queues must be in [1, 64], got %d", o.Queues)
	case o.Rounds < 1:
		return fmt.Errorf("qshare scale: rounds must be ≥ 1, got %d", o.Rounds)
	case !(o.MeanVMs > 0):
		return fmt.Errorf("qshare scale: mean tenant size must be > 0 VMs, got %g", o.MeanVMs)
	case !(o.Link > 0):
		return fmt.Errorf("qshare scale: link capacity must be > 0 bits/s, got %g", o.Link)
	}
	for _, r := range o.Ratios {
		if r < 1 || (o.K/2)%r != 0 {
			return fmt.Errorf("qshare scale: oversubscription %d:1 must divide k/2 = %d", r, o.K/2)
		}
	}
	for _, r := range append(slices.Clone(o.Inactive), o.UtilAt) {
		if r < 0 || r >= 1 {
			return fmt.Errorf("qshare scale: inactive ratio %g not in [0, 1)", r)
		}
	}
	return nil
}

// QShareScaleRow is Table 1's row for one oversubscription ratio, with
// Fig. 10's numbers.
type QShareScaleRow struct {
	Ratio                  int
	Servers, Slots         int
	Requests, Tenants      int     // requests tried, tenants placed
	SlotLoad, LinkLoad     float64 // fractions reserved
	SwitchPorts            int     // switch ports serving ≥ 1 tenant
	Below                  map[int]float64
	MaxPerPort, Overloaded int // most tenants on a port; ports with more than Queues−1
	// Local: tenants with all VMs on one server (no link, no queue
	// needed); they count as dedicated below and are left out of gains.
	Local int
	// Permanent: fraction of tenants with at most Queues−1 tenants on every
	// switch port of their TR (a dedicated queue throughout their lifetime).
	Permanent float64
	// Dedicated: fraction of tenants with dedicated queues after a binding
	// round with random scores (min and mean over the rounds).
	DedicatedMin, DedicatedMean float64
	// CodePoints: most DSCP code points the D-tenants used in a round
	// (shared queue's 0 not counted).
	CodePoints int
	// Gain[i]: mean throughput gain (throughput ÷ guarantee) of the active
	// tenants with a TR at inactive ratio Inactive[i], averaged over five
	// random sets of inactive tenants.
	Inactive, Gain []float64
	// Link utilization at inactive ratio UtilAt over links with a
	// reservation: median, and fraction of links ≥ 99.9%, under QShare and
	// static reservation.
	UtilAt                           float64
	UtilMedianQ, UtilMedianS         float64
	UtilFullQ, UtilFullS             float64
	PlaceTime, BindTime, AnalyzeTime time.Duration
}

// QShareScale runs the analysis for every ratio.
func QShareScale(ctx context.Context, o QShareScaleOptions) ([]QShareScaleRow, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	var rows []QShareScaleRow
	for _, ratio := range o.Ratios {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		row, err := qshareScaleOne(o, ratio)
		if err != nil {
			return nil, fmt.Errorf("qshare scale, %d:1: %w", ratio, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// QShareFill embeds tenants drawn as in §7.3.1 into an empty topology with
// QShare's placement (Alg. 1, all weight on the bandwidth cost: the paper's
// stress test for queue scarcity) until the slots are full or 50 requests
// in a row are rejected. It returns the placer and the requests tried.
func QShareFill(top *topo.Topology, slots int, meanVMs float64, guarantees []float64, seed int64) (*place.Placer, int, error) {
	p, err := place.NewPlacer(top, place.Options{Algorithm: place.QShare, Slots: slots,
		BandwidthWeight: func(float64) float64 { return 1 }})
	if err != nil {
		return nil, 0, fmt.Errorf("qshare fill: %w", err)
	}
	rng := rand.New(rand.NewSource(seed))
	tried, streak := 0, 0
	for streak < 50 {
		if s, _ := p.Load(); s >= 1 {
			break
		}
		n := max(1, int(math.Round(rng.ExpFloat64()*meanVMs)))
		g := guarantees[rng.Intn(len(guarantees))]
		tried++
		name := fmt.Sprintf("t%d", tried)
		_, err := p.Place(place.Uniform(name, n, g, g))
		var rj *place.Rejection
		switch {
		case errors.As(err, &rj):
			streak++
		case err != nil:
			return nil, 0, fmt.Errorf("qshare fill: tenant %s (%d VMs): %w", name, n, err)
		default:
			streak = 0
		}
	}
	return p, tried, nil
}

// scaleState is a placement seen by the binding: tenants, TRs, queues, and
// QShare's payment factors and usage-factor cap (its default parameters).
type scaleState struct {
	top    *topo.Topology
	tens   []*place.Placement
	trs    [][]int
	res    [][]float64
	queues []int
	pay    []float64
	uCap   float64
}

func newScaleState(p *place.Placer, queues int) *scaleState {
	qp := qshare.DefaultParams()
	st := &scaleState{top: p.Topology(), tens: p.Tenants(), uCap: qp.UCap}
	ports := p.Ports()
	st.queues = make([]int, len(ports))
	for _, pc := range ports {
		if pc.Switch {
			st.queues[pc.Link] = queues
		} else {
			// A server's NIC: software WFQ on the hypervisor, one queue per
			// tenant if need be.
			st.queues[pc.Link] = pc.Tenants + 1
		}
	}
	for _, pl := range st.tens {
		var tr []int
		var rs []float64
		for _, lr := range pl.Links {
			tr = append(tr, lr.Link)
			rs = append(rs, lr.Rate)
		}
		st.trs = append(st.trs, tr)
		st.res = append(st.res, rs)
		pay := 0.0
		for _, v := range pl.VMs {
			pay += qshare.Payment(qp.Price, v.In, v.Out)
		}
		st.pay = append(st.pay, pay)
	}
	return st
}

func qshareScaleOne(o QShareScaleOptions, ratio int) (QShareScaleRow, error) {
	row := QShareScaleRow{Ratio: ratio, Slots: o.Slots, Below: map[int]float64{}, UtilAt: o.UtilAt}
	top, err := topo.OversubscribedFatTree(o.K, ratio, o.Link)
	if err != nil {
		return row, err
	}
	row.Servers = len(top.Servers())
	start := time.Now()
	p, tried, err := QShareFill(top, o.Slots, o.MeanVMs, o.Guarantees, o.Seed)
	if err != nil {
		return row, err
	}
	row.PlaceTime = time.Since(start)
	row.Requests, row.Tenants = tried, len(p.Tenants())
	row.SlotLoad, row.LinkLoad = p.Load()

	start = time.Now()
	// Ports by tenant count.
	cnt := make([]int, len(top.Links))
	for _, pc := range p.Ports() {
		cnt[pc.Link] = pc.Tenants
		if !pc.Switch || pc.Tenants == 0 {
			continue
		}
		row.SwitchPorts++
		row.MaxPerPort = max(row.MaxPerPort, pc.Tenants)
		if pc.Tenants > o.Queues-1 {
			row.Overloaded++
		}
		for _, x := range []int{o.Queues, 2 * o.Queues, 4 * o.Queues} {
			if pc.Tenants < x {
				row.Below[x]++
			}
		}
	}
	for x := range row.Below {
		row.Below[x] /= float64(max(row.SwitchPorts, 1))
	}
	st := newScaleState(p, o.Queues)
	n := len(st.tens)
	perm := 0
	for t := range st.trs {
		ok := true
		for _, l := range st.trs[t] {
			if top.Nodes[top.Links[l].From].Kind == topo.Switch && cnt[l] > o.Queues-1 {
				ok = false
			}
		}
		if ok {
			perm++
		}
		if len(st.trs[t]) == 0 {
			row.Local++
		}
	}
	row.Permanent = float64(perm) / float64(max(n, 1))

	// Binding rounds with unpredictable demand: random scores.
	rng := rand.New(rand.NewSource(o.Seed + 1))
	b := qshare.NewBinder(st.queues, st.trs, st.res)
	scores := make([]float64, n)
	row.DedicatedMin = 1
	var bind time.Duration
	for r := 0; r < o.Rounds; r++ {
		for t := range scores {
			scores[t] = qshare.Score(rng.Float64(), st.pay[t])
		}
		t0 := time.Now()
		b.Bind(scores, rng)
		bind += time.Since(t0)
		d := 0
		for t := 0; t < n; t++ {
			if b.Dedicated(t) {
				d++
			}
		}
		f := float64(d) / float64(max(n, 1))
		row.DedicatedMin = math.Min(row.DedicatedMin, f)
		row.DedicatedMean += f / float64(o.Rounds)
		row.CodePoints = max(row.CodePoints, b.CodePoints())
	}
	row.BindTime = bind / time.Duration(o.Rounds)

	// Fig. 10: gains averaged over gainDraws random inactive sets.
	const gainDraws = 5
	for _, r := range o.Inactive {
		mean := 0.0
		for range gainDraws {
			g, _, _, err := st.gain(r, rng)
			if err != nil {
				return row, err
			}
			mean += g / gainDraws
		}
		row.Inactive = append(row.Inactive, r)
		row.Gain = append(row.Gain, mean)
	}
	_, uq, us, err := st.gain(o.UtilAt, rng)
	if err != nil {
		return row, err
	}
	row.UtilMedianQ, row.UtilFullQ = medianAndFull(uq)
	row.UtilMedianS, row.UtilFullS = medianAndFull(us)
	row.AnalyzeTime = time.Since(start)
	return row, nil
}

func medianAndFull(u []float64) (median, full float64) {
	if len(u) == 0 {
		return 0, 0
	}
	s := slices.Clone(u)
	sort.Float64s(s)
	for _, x := range s {
		if x >= 0.999 {
			full++
		}
	}
	return s[len(s)/2], full / float64(len(s))
}

// gain computes Fig. 10 at one inactive ratio: a random fraction r of the
// tenants is inactive (sends nothing), the others have unbounded demand
// and score U_cap·P; one binding round from scratch decides who is
// dedicated. Active tenants in the shared queue send exactly their
// guarantee (gain 1, the paper's assumption); active D-tenants spread
// their traffic over their TR in proportion to their reservations (the
// paper's pattern) and share what is left on every link by WFQ with
// weights ∝ reservations, i.e. every D-tenant on a link at the same gain
// unless held back elsewhere: max-min fair gains (alloc.MaxMin, a
// D-tenant's gain putting gain × reservation on every link of its TR).
// It returns the mean gain of the active tenants and the utilization of
// every link with a reservation under QShare and static reservation.
func (st *scaleState) gain(r float64, rng *rand.Rand) (mean float64, uq, us []float64, err error) {
	n := len(st.tens)
	active := make([]bool, n)
	scores := make([]float64, n)
	for t := range active {
		active[t] = rng.Float64() >= r && len(st.trs[t]) > 0
		if active[t] {
			scores[t] = qshare.Score(st.uCap, st.pay[t]) // U at its cap
		}
	}
	b := qshare.NewBinder(st.queues, st.trs, st.res)
	b.Bind(scores, rng)
	L := len(st.top.Links)
	fixed := make([]float64, L)  // active shared tenants' guarantees
	static := make([]float64, L) // every active tenant at its guarantee
	reserved := make([]bool, L)
	var ded []int // active D-tenants
	for t := 0; t < n; t++ {
		if active[t] && b.Dedicated(t) {
			ded = append(ded, t)
		}
		for k, l := range st.trs[t] {
			reserved[l] = true
			if !active[t] {
				continue
			}
			static[l] += st.res[t][k]
			if !b.Dedicated(t) {
				fixed[l] += st.res[t][k]
			}
		}
	}
	// The D-tenants share what the shared tenants leave of every link.
	p := alloc.Problem{Resources: make([]alloc.Resource, L), Flows: make([]alloc.Flow, len(ded))}
	for l, lk := range st.top.Links {
		p.Resources[l] = alloc.Resource{ID: lk.Name, Capacity: max(0, lk.Capacity-fixed[l])}
	}
	for i, t := range ded {
		f := alloc.Flow{ID: st.tens[t].Tenant, Demand: alloc.Unbounded, Weight: 1}
		for k, l := range st.trs[t] {
			f.Uses = append(f.Uses, alloc.Use{Resource: l, Coef: st.res[t][k]})
		}
		p.Flows[i] = f
	}
	g, err := alloc.MaxMin(&p)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("gains at inactive ratio %g: %w", r, err)
	}
	load := alloc.Loads(&p, g, nil) // the D-tenants' traffic per link
	sum, cnt, d := 0.0, 0, 0
	for t := 0; t < n; t++ {
		if !active[t] {
			continue
		}
		cnt++
		if b.Dedicated(t) {
			sum += g[d]
			d++
		} else {
			sum++
		}
	}
	for l := 0; l < L; l++ {
		if reserved[l] {
			c := st.top.Links[l].Capacity
			uq = append(uq, (fixed[l]+load[l])/c)
			us = append(us, static[l]/c)
		}
	}
	return sum / float64(max(cnt, 1)), uq, us, nil
}
