package qshare

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/mech"
)

func dedicated(b *Binder) []int {
	var d []int
	for t := 0; t < b.Tenants(); t++ {
		if b.Dedicated(t) {
			d = append(d, t)
		}
	}
	return d
}

// TestBindAlg2 checks Alg. 2 round by round on small link sets.
func TestBindAlg2(t *testing.T) {
	type round struct {
		scores []float64
		want   []int // dedicated tenants after the round
	}
	cases := []struct {
		name   string
		queues []int
		trs    [][]int
		rounds []round
	}{
		{
			// One link with 3 queues: 2 dedicated. The two highest scores
			// take them; a held queue is kept while no higher-scored
			// tenant wants it; a higher score pre-empts the lowest holder.
			name: "one link", queues: []int{3}, trs: [][]int{{0}, {0}, {0}, {0}},
			rounds: []round{
				{[]float64{1, 4, 3, 2}, []int{1, 2}},
				// 0 and then 3 each pre-empt a holder whose score fell to 0.
				{[]float64{1, 0, 0, 0.5}, []int{0, 3}},
				// 1 (score 2) pre-empts the lowest holder, 3 (0.5); 0
				// keeps its queue although its score fell below 2.
				{[]float64{1.5, 2, 0, 0.5}, []int{0, 1}},
			},
		},
		{
			// A tenant is dedicated only with a queue on every link of its
			// TR: tenant 2 spans links 0 and 1; link 1 has no dedicated
			// queue at all (1 queue), so tenant 2 never gets one.
			name: "every link", queues: []int{3, 1}, trs: [][]int{{0}, {0}, {0, 1}},
			rounds: []round{{[]float64{1, 2, 9}, []int{0, 1}}},
		},
		{
			// Pre-emption needs a lower-scored victim on every full link:
			// tenant 2 (score 5) spans links 0 and 1, each with one
			// dedicated queue, held by 0 (score 1) and 1 (score 9); link 1
			// has no victim, so nothing changes.
			name: "no victim on one link", queues: []int{2, 2}, trs: [][]int{{0}, {1}, {0, 1}},
			rounds: []round{
				{[]float64{1, 9, 0}, []int{0, 1}},
				{[]float64{1, 9, 5}, []int{0, 1}},
				// Once 1 drops below 2, 2 pre-empts both holders.
				{[]float64{1, 3, 5}, []int{2}},
			},
		},
		{
			// Spare queues go to any tenant, even one with score 0.
			name: "spare", queues: []int{8}, trs: [][]int{{0}, {0}, {0}},
			rounds: []round{{[]float64{0, 0, 0}, []int{0, 1, 2}}},
		},
		{
			// Tenants without a TR (all VMs on one server) need no queue:
			// they count as dedicated and take none.
			name: "empty TR", queues: []int{2}, trs: [][]int{{}, {0}},
			rounds: []round{{[]float64{5, 1}, []int{0, 1}}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := make([][]float64, len(c.trs))
			for i, tr := range c.trs {
				for range tr {
					res[i] = append(res[i], 100e6)
				}
			}
			b := NewBinder(c.queues, c.trs, res)
			rng := rand.New(rand.NewSource(1))
			for i, r := range c.rounds {
				b.Bind(r.scores, rng)
				if got := dedicated(b); !slices.Equal(got, r.want) {
					t.Errorf("round %d: dedicated %v, want %v", i, got, r.want)
				}
			}
			// Invariants: a link never has more holders than dedicated
			// queues; every D-tenant holds a queue on each TR link.
			for l, q := range c.queues {
				n := 0
				for _, h := range b.Holders(l)[1:] {
					if h >= 0 {
						n++
					}
				}
				if n > max(q-1, 0) {
					t.Errorf("link %d: %d holders for %d queues", l, n, q)
				}
			}
			for _, d := range dedicated(b) {
				for _, l := range b.TR(d) {
					if !slices.Contains(b.Holders(l), d) {
						t.Errorf("D-tenant %d holds no queue on link %d of its TR", d, l)
					}
				}
			}
		})
	}
}

// TestColour: D-tenants sharing a link get different code points, disjoint
// ones may share; 0 stays the shared queue's; beyond 63 a tenant is
// demoted.
func TestColour(t *testing.T) {
	// Tenants 0,1 share link 0; tenant 2 is alone on link 1.
	b := NewBinder([]int{8, 8}, [][]int{{0}, {0}, {1}}, [][]float64{{1}, {1}, {1}})
	b.Bind([]float64{3, 2, 1}, rand.New(rand.NewSource(1)))
	if b.DSCP(0) == b.DSCP(1) || b.DSCP(0) == 0 || b.DSCP(1) == 0 || b.DSCP(2) == 0 {
		t.Errorf("code points %d %d %d", b.DSCP(0), b.DSCP(1), b.DSCP(2))
	}
	if b.CodePoints() != 2 {
		t.Errorf("%d code points used, want 2 (tenant 2 reuses one)", b.CodePoints())
	}
	// 70 tenants on one 64-queue link plus a private link each: 63 of
	// them can be coloured (the link has 63 dedicated queues anyway);
	// with chains of overlapping links more than 63 colours would be
	// needed only for a clique, so build one: 70 tenants each on link 0
	// and on its own link, link 0 with 64 queues → 63 D-tenants, 63 code
	// points.
	n := 70
	queues := []int{64}
	trs := make([][]int, n)
	res := make([][]float64, n)
	scores := make([]float64, n)
	for i := range trs {
		queues = append(queues, 8)
		trs[i] = []int{0, i + 1}
		res[i] = []float64{1, 1}
		scores[i] = float64(n - i)
	}
	b = NewBinder(queues, trs, res)
	b.Bind(scores, rand.New(rand.NewSource(1)))
	if got := len(dedicated(b)); got != 63 || b.CodePoints() != 63 {
		t.Errorf("%d D-tenants with %d code points, want 63 and 63", got, b.CodePoints())
	}
}

// TestWeights: a queue's weight is its share of the link's reservations,
// scaled to the port's integer range.
func TestWeights(t *testing.T) {
	// Link 0: tenants 0 (300), 1 (100), 2 (100) reserved; 2 queues → one
	// dedicated, held by tenant 0; the shared queue holds 1 and 2.
	b := NewBinder([]int{2}, [][]int{{0}, {0}, {0}}, [][]float64{{300}, {100}, {100}})
	b.Bind([]float64{3, 2, 1}, rand.New(rand.NewSource(1)))
	res := map[int]float64{0: 300, 1: 100, 2: 100}
	for _, c := range []struct {
		max  int
		want []float64
	}{
		{0, []float64{0.4, 0.6}},
		{100, []float64{67, 100}},
		{7, []float64{5, 7}},
	} {
		got := b.Weights(0, res, c.max)
		for q := range c.want {
			if d := got[q] - c.want[q]; d > 1e-9 || d < -1e-9 {
				t.Errorf("max %d: weights %v, want %v", c.max, got, c.want)
				break
			}
		}
	}
	// No D-tenant on the link: one FIFO.
	b2 := NewBinder([]int{1}, [][]int{{0}}, [][]float64{{1}})
	b2.Bind([]float64{1}, rand.New(rand.NewSource(1)))
	if w := b2.Weights(0, map[int]float64{0: 1}, 0); w != nil {
		t.Errorf("weights %v, want nil", w)
	}
}

// TestUFactor checks eq. (1) as reconstructed.
func TestUFactor(t *testing.T) {
	ti := &tenantInfo{hosts: []string{"h1", "h2", "h3"},
		bOut: []float64{100, 200, 0}, bIn: []float64{100, 50, 0},
		uOut: []float64{50, 100, 0}, uIn: []float64{20, 60, 900}}
	// h1: max(0.5, 0.2); h2: max(0.5, 1.2); h3 has no guarantee.
	if u := UFactor(ti, 2); u != 1.2 {
		t.Errorf("U = %g, want 1.2", u)
	}
	if u := UFactor(ti, 1); u != 1 {
		t.Errorf("U capped at 1 = %g", u)
	}
}

// TestControllerGuarantees: a host's guarantee on its interface is the hose
// reservation of its access link, min(n, N−n)·B for a homogeneous hose.
func TestControllerGuarantees(t *testing.T) {
	env := mech.ControllerEnv{
		Resources: []mech.ResourceInfo{{ID: "l", Kind: mech.LinkResource, Capacity: 1e9 / 8, Queues: 8}},
		VMs: []mech.VM{
			{Name: "a1", Tenant: "A", Host: "h1", In: 100, Out: 100},
			{Name: "a2", Tenant: "A", Host: "h1", In: 100, Out: 100},
			{Name: "a3", Tenant: "A", Host: "h1", In: 100, Out: 100},
			{Name: "a4", Tenant: "A", Host: "h2", In: 100, Out: 100},
		},
		VDCs:         []mech.VDC{{Tenant: "A"}},
		Reservations: []mech.Reservation{{Tenant: "A", Resource: 0, Rate: 100}},
	}
	c, err := NewController(DefaultParams(), env)
	if err != nil {
		t.Fatal(err)
	}
	ti := c.tenants[c.tix["A"]]
	if ti.bOut[0] != 100 || ti.bIn[0] != 100 || ti.bOut[1] != 100 || ti.bIn[1] != 100 {
		t.Errorf("host guarantees out %v in %v, want 100 everywhere (min(3,1)·100)", ti.bOut, ti.bIn)
	}
	if ti.pay != 4*100/1e9 {
		t.Errorf("payment %g, want N·B = 400 bits/s in Gbps", ti.pay)
	}
	// Usage: a1→a4 at 150 bits/s: h1 out 1.5, h2 in 1.5.
	act := c.Step(&mech.ControllerObs{Flows: []mech.FlowObs{{Flow: mech.FlowID{Src: "a1", Dst: "a4"}, Tenant: "A",
		Path: []mech.PathElem{{Resource: 0}}, Used: []float64{150.0 / 8}}}})
	if u, s := c.Score("A"); u != 1.5 || s != 1.5*ti.pay {
		t.Errorf("U = %g, S = %g; want 1.5 and 1.5·P", u, s)
	}
	if !c.Dedicated("A") || len(act.Ports) != 1 || len(act.Messages) != 2 {
		t.Errorf("dedicated %v, %d port configs, %d messages; want true, 1, 2", c.Dedicated("A"), len(act.Ports), len(act.Messages))
	}
	if _, err := NewController(DefaultParams(), mech.ControllerEnv{}); err == nil || !strings.Contains(err.Error(), "reservations") {
		t.Errorf("no reservations: %v", err)
	}
}

func TestParse(t *testing.T) {
	if _, err := Parse(nil); err != nil {
		t.Fatal(err)
	}
	p, err := Parse(map[string]any{"interval": "2s", "shared": "elasticswitch", "alpha": 0.5, "u_cap": 3})
	if err != nil || p.Interval.Seconds() != 2 || p.UCap != 3 || p.Shared != SharedElasticSwitch || p.Dedicated != DedicatedHose {
		t.Errorf("Parse: %+v, %v", p, err)
	}
	// The paper's QShare: caps in the shared queue, nothing inside
	// dedicated queues; hypervisors step every agent_period.
	p, err = Parse(map[string]any{"dedicated": "tenant", "agent_period": "5ms"})
	if err != nil || p.Dedicated != DedicatedTenant || p.AgentPeriod.Milliseconds() != 5 {
		t.Errorf("Parse: %+v, %v", p, err)
	}
	for _, c := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"interval": "0s"}, "mechanism.params.interval: must be > 0"},
		{map[string]any{"u_cap": -1}, "mechanism.params.u_cap: must be > 0, got -1"},
		{map[string]any{"price": 0}, "mechanism.params.price: must be > 0"},
		{map[string]any{"shared": "x"}, `mechanism.params.shared: must be "cap" or "elasticswitch", got "x"`},
		{map[string]any{"alpha": 0.5, "dedicated": "tenant"}, "mechanism.params.alpha: is an ElasticSwitch parameter; it needs shared: elasticswitch or dedicated: hose"},
		{map[string]any{"dedicated": "x"}, `mechanism.params.dedicated: must be "hose" or "tenant", got "x"`},
		{map[string]any{"agent_period": "5ms"}, "mechanism.params.agent_period: applies with shared: cap and dedicated: tenant only"},
		{map[string]any{"nosuch": 1}, "mechanism.params.nosuch: unknown parameter"},
		{map[string]any{"interval": "x"}, "mechanism.params.interval"},
	} {
		if _, err := Parse(c.params); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%v) = %v, want %q", c.params, err, c.want)
		}
	}
}
