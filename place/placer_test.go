package place_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
	"github.com/bulkhead-dc/bulkhead/units"
)

// refReservations is an independent, deliberately plain computation of the
// hose reservations of a set of placed tenants: for every tenant and link,
// the senders are the VMs with a route to another VM of the tenant (on
// another server, a guarantee at one end at least) over the link, the
// receivers likewise, and the reservation is min(Σ out of the senders, Σ in
// of the receivers). It returns the total per link.
func refReservations(top *topo.Topology, seed int64, tenants []*place.Placement) []float64 {
	total := make([]float64, len(top.Links))
	for _, pl := range tenants {
		senders := map[int]map[int]bool{}
		receivers := map[int]map[int]bool{}
		for a, va := range pl.VMs {
			for b, vb := range pl.VMs {
				if a == b || va.Server == vb.Server || va.Out == 0 && vb.In == 0 {
					continue
				}
				sa, _ := top.Node(va.Server)
				sb, _ := top.Node(vb.Server)
				for _, l := range top.Route(sa.ID, sb.ID, topo.PairHash(seed, va.Name, vb.Name)) {
					if senders[l] == nil {
						senders[l], receivers[l] = map[int]bool{}, map[int]bool{}
					}
					senders[l][a] = true
					receivers[l][b] = true
				}
			}
		}
		for l := range senders {
			var out, in float64
			for a := range senders[l] {
				out += pl.VMs[a].Out
			}
			for b := range receivers[l] {
				in += pl.VMs[b].In
			}
			total[l] += min(out, in)
		}
	}
	return total
}

// checkState verifies a placer's state independently: slots per server,
// the WCS limit of every tenant, every link within capacity by the
// reference computation and by Admit on the equivalent scenario, and the
// placer's own totals equal to the reference.
func checkState(t *testing.T, p *place.Placer, seed int64, slots int, wcs map[string]float64) {
	t.Helper()
	top := p.Topology()
	tenants := p.Tenants()
	perServer := map[string]int{}
	for _, pl := range tenants {
		mine := map[string]int{}
		for _, v := range pl.VMs {
			perServer[v.Server]++
			mine[v.Server]++
		}
		if w := wcs[pl.Tenant]; w > 0 {
			limit := int(math.Floor(float64(len(pl.VMs))*(1-w) + 1e-9))
			for s, k := range mine {
				if k > limit {
					t.Fatalf("tenant %s: %d VMs on %s, WCS %v allows %d", pl.Tenant, k, s, w, limit)
				}
			}
		}
	}
	for s, k := range perServer {
		if k > slots {
			t.Fatalf("server %s holds %d VMs, %d slots", s, k, slots)
		}
		if free := p.FreeSlots(s); free != slots-k {
			t.Fatalf("server %s: FreeSlots %d, want %d", s, free, slots-k)
		}
	}
	ref := refReservations(top, seed, tenants)
	for l, r := range ref {
		c := top.Links[l].Capacity
		if r > c*(1+1e-9) {
			t.Fatalf("link %s oversubscribed: %v of %v", top.Links[l].Name, r, c)
		}
		if got := p.Reserved(l); math.Abs(got-r) > 1e-6*c {
			t.Fatalf("link %s: placer has %v reserved, reference %v", top.Links[l].Name, got, r)
		}
	}
	// The same through the scenario path (Admit), when there are tenants.
	if len(tenants) == 0 {
		return
	}
	s := &spec.Scenario{Name: "check", Seed: seed}
	for _, pl := range tenants {
		s.Tenants = append(s.Tenants, pl.SpecTenant())
	}
	if err := place.Admit(s, top); err != nil {
		t.Fatalf("Admit on the placed tenants: %v", err)
	}
}

// randomTopology returns one of: a two-tier tree, a fat-tree, an explicit
// tree of uneven depth, or an explicit random graph (not a tree).
func randomTopology(t *testing.T, rng *rand.Rand) (*topo.Topology, string) {
	t.Helper()
	var (
		top  *topo.Topology
		err  error
		kind string
	)
	switch rng.IntN(4) {
	case 0:
		racks, spr := 2+rng.IntN(4), 1+rng.IntN(5)
		core := float64(1+rng.IntN(8)) * 250e6
		top, err = topo.TwoTier(racks, spr, 1e9, core)
		kind = fmt.Sprintf("two-tier %d×%d core %v", racks, spr, core)
	case 1:
		k := 4 + 2*rng.IntN(2)
		top, err = topo.FatTree(k, 1e9)
		kind = fmt.Sprintf("fat-tree k=%d", k)
	case 2:
		// A tree: root → aggs → tors → servers, with uneven fan-out and
		// capacities.
		var nodes []topo.NodeSpec
		var links []topo.LinkSpec
		nodes = append(nodes, topo.NodeSpec{Name: "root", Kind: topo.Switch})
		srv := 0
		for a := range 1 + rng.IntN(3) {
			an := fmt.Sprintf("agg%d", a+1)
			nodes = append(nodes, topo.NodeSpec{Name: an, Kind: topo.Switch})
			links = append(links, topo.LinkSpec{A: an, B: "root", Capacity: float64(1+rng.IntN(4)) * 500e6})
			for r := range 1 + rng.IntN(3) {
				tn := fmt.Sprintf("tor%d.%d", a+1, r+1)
				nodes = append(nodes, topo.NodeSpec{Name: tn, Kind: topo.Switch})
				links = append(links, topo.LinkSpec{A: tn, B: an, Capacity: float64(1+rng.IntN(4)) * 500e6})
				for range 1 + rng.IntN(4) {
					srv++
					sn := fmt.Sprintf("s%d", srv)
					nodes = append(nodes, topo.NodeSpec{Name: sn, Kind: topo.Server})
					links = append(links, topo.LinkSpec{A: sn, B: tn, Capacity: 1e9})
				}
			}
		}
		top, err = topo.Explicit(nodes, links)
		kind = "explicit tree"
	default:
		// A random graph: switches on a ring plus chords, servers on
		// random switches.
		ns := 4 + rng.IntN(5)
		var nodes []topo.NodeSpec
		var links []topo.LinkSpec
		seen := map[[2]int]bool{}
		link := func(a, b int, c float64) {
			if a == b || seen[[2]int{min(a, b), max(a, b)}] {
				return
			}
			seen[[2]int{min(a, b), max(a, b)}] = true
			links = append(links, topo.LinkSpec{A: fmt.Sprintf("w%d", a), B: fmt.Sprintf("w%d", b), Capacity: c})
		}
		for i := range ns {
			nodes = append(nodes, topo.NodeSpec{Name: fmt.Sprintf("w%d", i), Kind: topo.Switch})
		}
		for i := range ns {
			link(i, (i+1)%ns, float64(1+rng.IntN(4))*500e6)
		}
		for range rng.IntN(ns) {
			link(rng.IntN(ns), rng.IntN(ns), float64(1+rng.IntN(4))*500e6)
		}
		for i := range 2 * ns {
			sn := fmt.Sprintf("s%d", i+1)
			nodes = append(nodes, topo.NodeSpec{Name: sn, Kind: topo.Server})
			links = append(links, topo.LinkSpec{A: sn, B: fmt.Sprintf("w%d", rng.IntN(ns)), Capacity: 1e9})
		}
		top, err = topo.Explicit(nodes, links)
		kind = fmt.Sprintf("random graph, %d switches", ns)
	}
	if err != nil {
		t.Fatal(err)
	}
	return top, kind
}

// randomRequest draws a tenant: uniform, asymmetric or per-VM hoses,
// sometimes with a worst-case survival constraint.
func randomRequest(rng *rand.Rand, name string) place.Request {
	n := 1 + rng.IntN(12)
	rates := []float64{50e6, 100e6, 200e6, 300e6, 500e6, 800e6}
	pick := func() float64 { return rates[rng.IntN(len(rates))] }
	var r place.Request
	switch rng.IntN(3) {
	case 0:
		g := pick()
		r = place.Uniform(name, n, g, g)
	case 1:
		r = place.Uniform(name, n, pick(), pick()/2)
	default:
		r = place.Request{Name: name}
		for range n {
			v := place.VMRequest{In: pick(), Out: pick()}
			if rng.IntN(4) == 0 {
				v.In = 0
			}
			r.VMs = append(r.VMs, v)
		}
	}
	if n >= 2 && rng.IntN(4) == 0 {
		r.WCS = 0.5
	}
	return r
}

// TestPlacementNeverOversubscribes feeds seeded random streams of arrivals
// and departures to both algorithms on random trees, fat-trees and random
// graphs, and checks after every step, independently of the placer, that
// no link is oversubscribed and that every rejection names a resource that
// did run out.
func TestPlacementNeverOversubscribes(t *testing.T) {
	streams := 60
	if testing.Short() {
		streams = 12
	}
	accepted, rejected := map[string]int{}, map[string]int{}
	for seed := range uint64(streams) {
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
		top, kind := randomTopology(t, rng)
		slots := 1 + rng.IntN(8)
		alg := []place.Algorithm{place.Oktopus, place.QShare}[seed%2]
		pseed := int64(seed + 1)
		p, err := place.NewPlacer(top, place.Options{Algorithm: alg, Slots: slots, Seed: pseed, K: 1 + rng.IntN(4)})
		if err != nil {
			t.Fatal(err)
		}
		wcs := map[string]float64{}
		t.Run(fmt.Sprintf("%d-%s-%s", seed, alg, strings.ReplaceAll(kind, " ", "_")), func(t *testing.T) {
			for i := range 80 {
				if cur := p.Tenants(); len(cur) > 0 && rng.IntN(5) == 0 {
					victim := cur[rng.IntN(len(cur))].Tenant
					if err := p.Remove(victim); err != nil {
						t.Fatal(err)
					}
					checkState(t, p, pseed, slots, wcs)
					continue
				}
				req := randomRequest(rng, fmt.Sprintf("t%d", i))
				free := 0
				for _, s := range top.Servers() {
					free += min(p.FreeSlots(s.Name), perServer(req))
				}
				pl, err := p.Place(req)
				var rj *place.Rejection
				switch {
				case errors.As(err, &rj):
					rejected[rj.Resource]++
					checkRejection(t, p, rj, req, free)
				case err != nil:
					t.Fatalf("%s: %v", req.Name, err)
				default:
					accepted[string(alg)]++
					if pl.Compact {
						accepted["compact"]++
					}
					wcs[req.Name] = req.WCS
					if len(pl.VMs) != len(req.VMs) {
						t.Fatalf("%s: %d VMs placed of %d", req.Name, len(pl.VMs), len(req.VMs))
					}
				}
				checkState(t, p, pseed, slots, wcs)
			}
		})
	}
	t.Logf("accepted %v, rejected %v", accepted, rejected)
	if rejected["link"] == 0 || rejected["slots"] == 0 || accepted["oktopus"] == 0 || accepted["qshare"] == 0 {
		t.Errorf("streams too easy or too hard: accepted %v, rejected %v", accepted, rejected)
	}
}

func perServer(r place.Request) int {
	if r.WCS == 0 {
		return len(r.VMs)
	}
	return int(math.Floor(float64(len(r.VMs))*(1-r.WCS) + 1e-9))
}

// checkRejection verifies that a rejection names a resource that ran out.
func checkRejection(t *testing.T, p *place.Placer, rj *place.Rejection, req place.Request, free int) {
	t.Helper()
	msg := rj.Error()
	if !strings.HasPrefix(msg, fmt.Sprintf("tenant %q: rejected: ", req.Name)) {
		t.Fatalf("rejection %q does not name the tenant", msg)
	}
	switch rj.Resource {
	case "slots":
		if rj.Need != len(req.VMs) || rj.Free != free || free >= len(req.VMs) {
			t.Fatalf("%s: slots: need %d free %d; independently %d VMs, %d free", msg, rj.Need, rj.Free, len(req.VMs), free)
		}
		if !strings.Contains(msg, fmt.Sprintf("no server slots left (needs %d, %d free", rj.Need, rj.Free)) {
			t.Fatalf("message %q", msg)
		}
	case "link":
		if free < len(req.VMs) {
			t.Fatalf("%s: a link named while slots ran out (%d free for %d)", msg, free, len(req.VMs))
		}
		var link *topo.Link
		for i := range p.Topology().Links {
			if l := &p.Topology().Links[i]; l.Name == rj.Link {
				link = l
			}
		}
		if link == nil || rj.Capacity != link.Capacity || !(rj.Load > link.Capacity*(1+1e-9)) || rj.Load < p.Reserved(link.ID) {
			t.Fatalf("%s: link %v, load %v, capacity %v", msg, link, rj.Load, rj.Capacity)
		}
		if !strings.Contains(msg, fmt.Sprintf("link %q would carry %s of %s", rj.Link, units.FormatRate(rj.Load), units.FormatRate(rj.Capacity))) {
			t.Fatalf("message %q", msg)
		}
	default:
		t.Fatalf("rejection %q names no resource (%q)", msg, rj.Resource)
	}
}

// placeAll places the requests in order and returns the results as
// "name: layer root layout" or the rejection message.
func placeAll(t *testing.T, p *place.Placer, reqs ...place.Request) []string {
	t.Helper()
	var out []string
	for _, r := range reqs {
		pl, err := p.Place(r)
		var rj *place.Rejection
		switch {
		case errors.As(err, &rj):
			out = append(out, rj.Error())
		case err != nil:
			t.Fatal(err)
		default:
			var servers []string
			for _, v := range pl.VMs {
				servers = append(servers, v.Server)
			}
			out = append(out, fmt.Sprintf("%s: %d %s %s", pl.Tenant, pl.Layer, pl.Root, strings.Join(servers, ",")))
		}
	}
	return out
}

func mustPlacer(t *testing.T, top *topo.Topology, err error, opt place.Options) *place.Placer {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	p, err := place.NewPlacer(top, opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSmallTrees are hand-checked placements on small trees.
func TestSmallTrees(t *testing.T) {
	twoTier := func(racks, spr int, core float64) (*topo.Topology, error) {
		return topo.TwoTier(racks, spr, 1e9, core)
	}
	cases := []struct {
		name string
		top  func() (*topo.Topology, error)
		opt  place.Options
		reqs []place.Request
		want []string
	}{{
		// 3 VMs, 2 slots per server: a rack. s1 sends min(800, 400) =
		// 400 Mbps, s2 min(400, 800).
		name: "smallest subtree",
		top:  func() (*topo.Topology, error) { return twoTier(2, 2, 1e9) },
		opt:  place.Options{Slots: 2},
		reqs: []place.Request{place.Uniform("a", 2, 400e6, 400e6), place.Uniform("b", 3, 400e6, 400e6), place.Uniform("c", 1, 1e6, 1e6)},
		want: []string{"a: 0 s1 s1,s1", "b: 1 tor2 s3,s3,s4", "c: 0 s2 s2"},
	}, {
		// One slot per server: 4 VMs split 2/2 across the core need
		// min(2, 2) × 200 = 400 Mbps on a 300 Mbps core link.
		name: "core too small",
		top:  func() (*topo.Topology, error) { return twoTier(2, 2, 300e6) },
		opt:  place.Options{Slots: 1},
		reqs: []place.Request{place.Uniform("t", 4, 200e6, 200e6), place.Uniform("u", 4, 150e6, 150e6)},
		want: []string{`tenant "t": rejected: link "tor1->core" would carry 400 Mbps of 300 Mbps`, "u: 2 core s1,s2,s3,s4"},
	}, {
		// Asymmetric: one sender of 800 Mbps and three receivers of 300
		// Mbps split 2/2 need min(800, 600) = 600 Mbps out of the
		// sender's rack, over the 500 Mbps core.
		name: "asymmetric min of sides",
		top:  func() (*topo.Topology, error) { return twoTier(2, 2, 500e6) },
		opt:  place.Options{Slots: 1},
		reqs: []place.Request{{Name: "a", VMs: []place.VMRequest{{Out: 800e6}, {In: 300e6}, {In: 300e6}, {In: 300e6}}}},
		want: []string{`tenant "a": rejected: link "tor1->core" would carry 600 Mbps of 500 Mbps`},
	}, {
		name: "slots",
		top:  func() (*topo.Topology, error) { return twoTier(2, 2, 1e9) },
		opt:  place.Options{Slots: 2},
		reqs: []place.Request{place.Uniform("a", 5, 1e6, 1e6), place.Uniform("b", 4, 1e6, 1e6)},
		want: []string{"a: 2 core s1,s1,s2,s2,s3", `tenant "b": rejected: no server slots left (needs 4, 3 free)`},
	}, {
		// WCS 0.5: at most 2 of 4 VMs per server.
		name: "worst-case survival",
		top:  func() (*topo.Topology, error) { return twoTier(2, 2, 1e9) },
		opt:  place.Options{Slots: 4},
		reqs: []place.Request{{Name: "a", VMs: place.Uniform("", 4, 1e8, 1e8).VMs, WCS: 0.5},
			{Name: "b", VMs: place.Uniform("", 6, 1e8, 1e8).VMs, WCS: 0.5},
			{Name: "c", VMs: place.Uniform("", 6, 1e8, 1e8).VMs, WCS: 0.8}},
		want: []string{"a: 1 tor1 s1,s1,s2,s2",
			"b: 1 tor2 s3,s3,s3,s4,s4,s4",
			`tenant "c": rejected: no server slots left (needs 6, 4 free, with at most 1 per server for worst-case survival)`},
	}, {
		// Fat-tree k=4, one slot per server: 4 VMs fill a pod (two edge
		// switches), rooted at its two aggregation switches.
		name: "fat-tree pod",
		top:  func() (*topo.Topology, error) { return topo.FatTree(4, 1e9) },
		opt:  place.Options{Slots: 1},
		reqs: []place.Request{place.Uniform("a", 4, 3e8, 3e8), place.Uniform("b", 2, 3e8, 3e8), place.Uniform("c", 8, 1e8, 1e8)},
		want: []string{"a: 2 a1.1+1 s1,s2,s3,s4", "b: 1 e2.1 s5,s6", "c: 3 c1+3 s7,s8,s9,s10,s11,s12,s13,s14"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top, err := c.top()
			p := mustPlacer(t, top, err, c.opt)
			got := placeAll(t, p, c.reqs...)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
			checkState(t, p, spec.DefaultSeed, c.opt.Slots, nil)
		})
	}
}

// TestQShareBalancesPorts: with a rack whose port already serves a tenant
// and an empty rack, both able to hold the tenant with the same bandwidth,
// Oktopus takes the first rack; QShare (light load, queue occupation
// weighs) the empty one.
func TestQShareBalancesPorts(t *testing.T) {
	reqs := []place.Request{place.Uniform("a", 3, 1e8, 1e8), place.Uniform("b", 3, 1e8, 1e8)}
	for _, c := range []struct {
		opt  place.Options
		want string
	}{
		{place.Options{Algorithm: place.Oktopus, Slots: 2}, "b: 1 tor1 s2,s3,s3"},
		{place.Options{Algorithm: place.QShare, Slots: 2}, "b: 1 tor2 s4,s4,s5"},
		// All the weight on bandwidth: a tie, broken by queue occupation.
		{place.Options{Algorithm: place.QShare, Slots: 2, BandwidthWeight: func(float64) float64 { return 1 }}, "b: 1 tor2 s4,s4,s5"},
	} {
		top, err := topo.TwoTier(2, 3, 1e9, 1e9)
		p := mustPlacer(t, top, err, c.opt)
		got := placeAll(t, p, reqs...)
		if got[0] != "a: 1 tor1 s1,s1,s2" || got[1] != c.want {
			t.Errorf("%s: got %q; want a in tor1 and %q", c.opt.Algorithm, got, c.want)
		}
		pl, _ := p.Tenant("b")
		if c.opt.Algorithm == place.QShare && (pl.Candidates != 2 || pl.BandwidthCost != 4e8) {
			t.Errorf("qshare: %d candidates, bandwidth cost %v; want 2, 400 Mbps", pl.Candidates, pl.BandwidthCost)
		}
	}
}

// TestAsymmetricCompact: the per-layer search bounds a group's need by
// the largest hoses of the tenant (it does not know yet which VMs go
// where); the exact check of the most compact layout admits the tenant
// when its actual VMs fit.
func TestAsymmetricCompact(t *testing.T) {
	top, err := topo.TwoTier(2, 4, 1e9, 500e6)
	p := mustPlacer(t, top, err, place.Options{Slots: 1})
	got := placeAll(t, p, place.Request{Name: "a", VMs: []place.VMRequest{{Out: 800e6}, {In: 300e6}, {In: 300e6}}},
		place.Request{Name: "b", VMs: []place.VMRequest{{Out: 800e6}, {In: 300e6}, {In: 300e6}, {In: 300e6}, {In: 300e6}}})
	// b: the sender and three receivers in rack 2, one receiver in rack
	// 1: the core carries min(800, 300) = 300 Mbps down to rack 1 and
	// nothing up.
	want := []string{"a: 1 tor1 s1,s2,s3", "b: 2 core s5,s6,s7,s8,s4"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	pl, _ := p.Tenant("b")
	if !pl.Compact {
		t.Error("b not placed by the compact fallback")
	}
	for _, r := range p.Links() {
		if r.Name == "core->tor1" && r.Total != 300e6 || r.Name == "tor1->core" {
			t.Errorf("%s: %v", r.Name, r.Total)
		}
	}
	checkState(t, p, spec.DefaultSeed, 1, nil)
}

// TestQShareBestFit: tenants that fit in one server go, under QShare, to
// the server they fill the most (no network cost either way); Oktopus takes
// the first that fits.
func TestQShareBestFit(t *testing.T) {
	reqs := []place.Request{place.Uniform("a", 2, 1e8, 1e8), place.Uniform("b", 3, 1e8, 1e8), place.Uniform("c", 1, 1e8, 1e8)}
	for alg, want := range map[place.Algorithm]string{place.Oktopus: "c: 0 s1 s1", place.QShare: "c: 0 s2 s2"} {
		top, err := topo.TwoTier(2, 2, 1e9, 1e9)
		p := mustPlacer(t, top, err, place.Options{Algorithm: alg, Slots: 4})
		got := placeAll(t, p, reqs...)
		if got[0] != "a: 0 s1 s1,s1" || got[1] != "b: 0 s2 s2,s2,s2" || got[2] != want {
			t.Errorf("%s: %q; want c %q", alg, got, want)
		}
	}
}

// TestDepartures: a departure frees slots and bandwidth exactly.
func TestDepartures(t *testing.T) {
	top, err := topo.TwoTier(2, 2, 1e9, 300e6)
	p := mustPlacer(t, top, err, place.Options{Slots: 1})
	if got := placeAll(t, p, place.Uniform("a", 2, 2e8, 2e8), place.Uniform("b", 2, 2e8, 2e8)); got[1] != "b: 1 tor2 s3,s4" {
		t.Fatal(got)
	}
	if got := placeAll(t, p, place.Uniform("c", 2, 1e6, 1e6)); !strings.Contains(got[0], "no server slots left (needs 2, 0 free)") {
		t.Fatal(got)
	}
	if err := p.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := p.Remove("a"); err == nil {
		t.Error("removing twice succeeded")
	}
	if got := placeAll(t, p, place.Uniform("c", 2, 1e6, 1e6)); got[0] != "c: 1 tor1 s1,s2" {
		t.Fatal(got)
	}
	checkState(t, p, spec.DefaultSeed, 1, nil)
	for _, pc := range p.Ports() {
		if pc.Name == "tor1->s1" && pc.Tenants != 1 || pc.Name == "tor1->core" && pc.Tenants != 0 {
			t.Errorf("%+v", pc)
		}
	}
}

// TestReserveFixed: a scenario's tenants reserve slots and bandwidth
// before the stream.
func TestReserveFixed(t *testing.T) {
	s, top := load(t, twoTier("core: 1Gbps", `
  - {name: A, guarantee: 450Mbps, vms: [{name: a1, server: s1}, {name: a2, server: s3}]}
`))
	p := mustPlacer(t, top, nil, place.Options{Slots: 1, Seed: s.Seed})
	if err := p.Reserve(&s.Tenants[0]); err != nil {
		t.Fatal(err)
	}
	got := placeAll(t, p, place.Uniform("B", 2, 600e6, 600e6), place.Uniform("C", 2, 500e6, 500e6))
	want := []string{`tenant "B": rejected: link "tor1->core" would carry 1.05 Gbps of 1 Gbps`, "C: 2 core s2,s4"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if err := p.Reserve(&s.Tenants[0]); err == nil {
		t.Error("reserved a tenant twice")
	}
	if _, err := p.Place(place.Request{Name: "D", VMs: []place.VMRequest{{Name: "a1", In: 1}}}); err == nil || errors.As(err, new(*place.Rejection)) {
		t.Errorf("VM name clash: %v", err)
	}
	checkState(t, p, s.Seed, 1, nil)
}

func TestBadRequests(t *testing.T) {
	top, err := topo.TwoTier(1, 2, 1e9, 0)
	p := mustPlacer(t, top, err, place.Options{})
	for _, r := range []place.Request{
		{},
		{Name: "x"},
		{Name: "x", VMs: []place.VMRequest{{In: -1}}},
		{Name: "x", VMs: []place.VMRequest{{Name: "v"}, {Name: "v"}}},
		{Name: "x", VMs: []place.VMRequest{{}}, WCS: 0.5},
		{Name: "x", VMs: []place.VMRequest{{}}, WCS: 1},
	} {
		if _, err := p.Place(r); err == nil || errors.As(err, new(*place.Rejection)) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	if _, err := place.NewPlacer(top, place.Options{Algorithm: "magic"}); err == nil {
		t.Error("unknown algorithm accepted")
	}
	if _, err := place.NewPlacer(top, place.Options{Slots: -1}); err == nil {
		t.Error("negative slots accepted")
	}
}

// TestRandomGraph: a ring of four switches is not a tree; placement grows
// balls around switches and checks every layout on the real routes.
func TestRandomGraph(t *testing.T) {
	nodes := []topo.NodeSpec{{Name: "w1", Kind: topo.Switch}, {Name: "w2", Kind: topo.Switch}, {Name: "w3", Kind: topo.Switch}, {Name: "w4", Kind: topo.Switch}}
	links := []topo.LinkSpec{{A: "w1", B: "w2", Capacity: 1e9}, {A: "w2", B: "w3", Capacity: 1e9}, {A: "w3", B: "w4", Capacity: 1e9}, {A: "w4", B: "w1", Capacity: 1e9}}
	for i := range 8 {
		s := fmt.Sprintf("s%d", i+1)
		nodes = append(nodes, topo.NodeSpec{Name: s, Kind: topo.Server})
		links = append(links, topo.LinkSpec{A: s, B: fmt.Sprintf("w%d", i/2+1), Capacity: 1e9})
	}
	top, err := topo.Explicit(nodes, links)
	for _, alg := range []place.Algorithm{place.Oktopus, place.QShare} {
		p := mustPlacer(t, top, err, place.Options{Algorithm: alg, Slots: 1})
		if p.Hierarchical() {
			t.Fatal("a ring taken for a tree")
		}
		got := placeAll(t, p, place.Uniform("a", 2, 4e8, 4e8), place.Uniform("b", 4, 4e8, 4e8), place.Uniform("c", 2, 9e8, 9e8))
		// Oktopus: the first ball of radius 2 with four free slots is
		// the one around w1 (its neighbours' servers); c fits under w3.
		want := []string{"a: 1 w1 s1,s2", "b: 2 w1 s3,s4,s7,s8", "c: 1 w3 s5,s6"}
		if alg == place.QShare {
			// QShare compares the four balls of radius 2: around w2 and w3
			// b spans two adjacent switches (the least bandwidth), and
			// w2's ball has no slot left after it (best fit).
			want = []string{"a: 1 w1 s1,s2", "b: 2 w2 s3,s4,s5,s6", "c: 1 w4 s7,s8"}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got\n  %s\nwant\n  %s", alg, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		checkState(t, p, spec.DefaultSeed, 1, nil)
	}
}
