package topo_test

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/topo"
)

func mustNode(t *testing.T, top *topo.Topology, name string) int {
	t.Helper()
	n, ok := top.Node(name)
	if !ok {
		t.Fatalf("no node %q", name)
	}
	return n.ID
}

func linkNames(top *topo.Topology, path []int) string {
	names := make([]string, len(path))
	for i, l := range path {
		names[i] = top.Links[l].Name
	}
	return strings.Join(names, " ")
}

func countKinds(top *topo.Topology) (servers, switches int) {
	for _, n := range top.Nodes {
		if n.Kind == topo.Server {
			servers++
		} else {
			switches++
		}
	}
	return servers, switches
}

func TestBuilders(t *testing.T) {
	cases := []struct {
		name               string
		spec               spec.Topology
		servers, switches  int
		links              int // directed
		capacity           map[string]float64
		absent             []string
		firstSwitch, lastS string
	}{
		{
			name:    "two-tier oversubscribed",
			spec:    spec.Topology{Kind: "two-tier", TwoTier: &spec.TwoTier{Racks: 4, ServersPerRack: 10, Edge: 1e9, Oversubscription: 4}},
			servers: 40, switches: 5, links: 2 * (40 + 4),
			capacity: map[string]float64{"s1->tor1": 1e9, "tor1->s1": 1e9, "s40->tor4": 1e9, "tor1->core": 2.5e9, "core->tor4": 2.5e9},
		},
		{
			name:    "two-tier explicit core",
			spec:    spec.Topology{Kind: "two-tier", TwoTier: &spec.TwoTier{Racks: 2, ServersPerRack: 3, Edge: 1e9, Core: 1.5e9}},
			servers: 6, switches: 3, links: 2 * (6 + 2),
			capacity: map[string]float64{"s4->tor2": 1e9, "tor2->core": 1.5e9},
		},
		{
			name:    "two-tier default oversubscription",
			spec:    spec.Topology{Kind: "two-tier", TwoTier: &spec.TwoTier{Racks: 2, ServersPerRack: 3, Edge: 1e9}},
			servers: 6, switches: 3, links: 2 * (6 + 2),
			capacity: map[string]float64{"tor1->core": 3e9},
		},
		{
			name:    "two-tier one rack",
			spec:    spec.Topology{Kind: "two-tier", TwoTier: &spec.TwoTier{Racks: 1, ServersPerRack: 3, Edge: 1e9}},
			servers: 3, switches: 1, links: 2 * 3,
			capacity: map[string]float64{"s3->tor1": 1e9},
			absent:   []string{"core"},
		},
		{
			name:    "fat-tree k=4",
			spec:    spec.Topology{Kind: "fat-tree", FatTree: &spec.FatTree{K: 4, Link: 1e9}},
			servers: 16, switches: 8 + 8 + 4, links: 2 * (16 + 16 + 16),
			capacity: map[string]float64{"s1->e1.1": 1e9, "s16->e4.2": 1e9, "e1.1->a1.2": 1e9, "a1.1->c2": 1e9, "a4.2->c4": 1e9, "c3->a2.2": 1e9},
			absent:   []string{"a1.1->c3", "s3->e1.1"},
		},
		{
			name:    "fat-tree k=16",
			spec:    spec.Topology{Kind: "fat-tree", FatTree: &spec.FatTree{K: 16, Link: 10e9}},
			servers: 1024, switches: 128 + 128 + 64, links: 2 * (1024 + 1024 + 1024),
			capacity: map[string]float64{"s1024->e16.8": 10e9, "a16.8->c64": 10e9},
		},
		{
			name: "explicit",
			spec: spec.Topology{Kind: "explicit", Explicit: &spec.Explicit{
				Nodes: []spec.Node{{Name: "h1", Kind: "server"}, {Name: "h2", Kind: "server"}, {Name: "sw", Kind: "switch"}},
				Links: []spec.Link{{A: "h1", B: "sw", Capacity: 1e9}, {A: "sw", B: "h2", Capacity: 4e8}},
			}},
			servers: 2, switches: 1, links: 4,
			capacity: map[string]float64{"h1->sw": 1e9, "sw->h1": 1e9, "h2->sw": 4e8},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top, err := topo.FromSpec(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			servers, switches := countKinds(top)
			if servers != c.servers || switches != c.switches || len(top.Links) != c.links {
				t.Errorf("got %d servers, %d switches, %d links; want %d, %d, %d",
					servers, switches, len(top.Links), c.servers, c.switches, c.links)
			}
			byName := map[string]topo.Link{}
			for i, l := range top.Links {
				if l.ID != i || top.Links[l.Reverse].Reverse != i || top.Links[l.Reverse].From != l.To ||
					l.Name != top.Nodes[l.From].Name+"->"+top.Nodes[l.To].Name {
					t.Errorf("link %d inconsistent: %+v", i, l)
				}
				byName[l.Name] = l
			}
			for i, n := range top.Nodes {
				if n.ID != i {
					t.Errorf("node %d has ID %d", i, n.ID)
				}
			}
			for name, want := range c.capacity {
				if l, ok := byName[name]; !ok || l.Capacity != want {
					t.Errorf("link %s: %+v (present %v); want capacity %v", name, l, ok, want)
				}
			}
			for _, name := range c.absent {
				if _, ok := byName[name]; ok {
					t.Errorf("link %s should not exist", name)
				}
				if _, ok := top.Node(name); ok {
					t.Errorf("node %s should not exist", name)
				}
			}
			// Servers are exactly the names the spec declares, in order.
			var got []string
			for _, n := range top.Servers() {
				got = append(got, n.Name)
			}
			if want := c.spec.ServerNames(); !reflect.DeepEqual(got, want) {
				t.Errorf("servers %v; spec declares %v", got, want)
			}
			// Every server's access links.
			for _, n := range top.Servers() {
				up, down := top.Uplink(n.ID), top.Downlink(n.ID)
				if up < 0 || top.Links[up].From != n.ID || down < 0 || top.Links[down].To != n.ID || top.Links[up].Reverse != down {
					t.Errorf("server %s: uplink %d downlink %d", n.Name, up, down)
				}
			}
		})
	}
}

func TestUplinkOfSwitch(t *testing.T) {
	top, err := topo.TwoTier(2, 2, 1e9, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	if up, down := top.Uplink(mustNode(t, top, "tor1")), top.Downlink(mustNode(t, top, "core")); up != -1 || down != -1 {
		t.Errorf("switch access links = %d, %d", up, down)
	}
	if up := top.Uplink(-3); up != -1 {
		t.Errorf("Uplink(-3) = %d", up)
	}
	if top.Links[top.Uplink(mustNode(t, top, "s3"))].Name != "s3->tor2" {
		t.Errorf("s3 uplink = %s", top.Links[top.Uplink(mustNode(t, top, "s3"))].Name)
	}
}

func TestBuilderErrors(t *testing.T) {
	srv := func(n string) topo.NodeSpec { return topo.NodeSpec{Name: n, Kind: topo.Server} }
	sw := func(n string) topo.NodeSpec { return topo.NodeSpec{Name: n, Kind: topo.Switch} }
	ln := func(a, b string) topo.LinkSpec { return topo.LinkSpec{A: a, B: b, Capacity: 1e9} }
	explicit := []struct {
		name  string
		nodes []topo.NodeSpec
		links []topo.LinkSpec
		want  string
	}{
		{"unknown node", []topo.NodeSpec{srv("h1"), sw("x")}, []topo.LinkSpec{ln("h1", "y")},
			`explicit: links[0]: unknown node "y"`},
		{"duplicate link", []topo.NodeSpec{srv("h1"), srv("h2"), sw("x")}, []topo.LinkSpec{ln("h1", "x"), ln("h2", "x"), ln("x", "h1")},
			`explicit: links[2]: duplicate of links[0] (x—h1)`},
		{"self link", []topo.NodeSpec{srv("h1"), sw("x")}, []topo.LinkSpec{ln("h1", "x"), ln("x", "x")},
			`explicit: links[1]: links node "x" to itself`},
		{"duplicate node", []topo.NodeSpec{srv("h1"), sw("h1")}, nil,
			`explicit: nodes[1]: duplicate node "h1"`},
		{"disconnected", []topo.NodeSpec{srv("h1"), srv("h2"), sw("x"), sw("y")}, []topo.LinkSpec{ln("h1", "x"), ln("h2", "y")},
			`explicit: server "h2" is not connected to server "h1"`},
		{"server with two links", []topo.NodeSpec{srv("h1"), sw("x"), sw("y")}, []topo.LinkSpec{ln("h1", "x"), ln("h1", "y")},
			`explicit: server "h1" has 2 links; a server needs exactly one`},
		{"no servers", []topo.NodeSpec{sw("x")}, nil, `explicit: no servers`},
		{"capacity", []topo.NodeSpec{srv("h1"), sw("x")}, []topo.LinkSpec{{A: "h1", B: "x"}},
			`explicit: links[0] (h1—x): capacity must be positive, got 0`},
	}
	for _, c := range explicit {
		if _, err := topo.Explicit(c.nodes, c.links); err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v; want %q", c.name, err, c.want)
		}
	}
	others := []struct {
		name string
		err  error
		want string
	}{
		{"odd k", second(topo.FatTree(5, 1e9)), "fat-tree: k must be even and at least 2, got 5"},
		{"no racks", second(topo.TwoTier(0, 4, 1e9, 1e9)), "two-tier: need at least one rack and one server per rack, got 0 × 4"},
		{"no core", second(topo.TwoTier(2, 4, 1e9, 0)), "two-tier: core capacity must be positive, got 0"},
		{"spec kind", second(topo.FromSpec(spec.Topology{Kind: "ring"})), `topology: unknown kind "ring"`},
		{"spec wrapped", second(topo.FromSpec(spec.Topology{Kind: "fat-tree", FatTree: &spec.FatTree{K: 3, Link: 1}})),
			"topology: fat-tree: k must be even and at least 2, got 3"},
	}
	for _, c := range others {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("%s: error %v; want %q", c.name, c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestTreeRoutes(t *testing.T) {
	top, err := topo.TwoTier(3, 4, 1e9, 2e9)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ src, dst, want string }{
		{"s1", "s2", "s1->tor1 tor1->s2"},
		{"s1", "s5", "s1->tor1 tor1->core core->tor2 tor2->s5"},
		{"s12", "s1", "s12->tor3 tor3->core core->tor1 tor1->s1"},
		{"s1", "tor3", "s1->tor1 tor1->core core->tor3"},
	}
	for _, c := range cases {
		src, dst := mustNode(t, top, c.src), mustNode(t, top, c.dst)
		paths := top.Paths(src, dst)
		if len(paths) != 1 || linkNames(top, paths[0]) != c.want {
			t.Errorf("Paths(%s, %s) = %v; want one: %s", c.src, c.dst, paths, c.want)
		}
		for h := range uint64(20) {
			if got := linkNames(top, top.Route(src, dst, h*0x9e3779b97f4a7c15)); got != c.want {
				t.Errorf("Route(%s, %s, %d) = %s; want %s", c.src, c.dst, h, got, c.want)
			}
		}
		if top.Hops(src, dst) != len(paths[0]) {
			t.Errorf("Hops(%s, %s) = %d", c.src, c.dst, top.Hops(src, dst))
		}
	}
	s1 := mustNode(t, top, "s1")
	if top.Route(s1, s1, 1) != nil || top.Paths(s1, s1) != nil || top.Hops(s1, s1) != 0 {
		t.Errorf("self route not empty")
	}
	if top.Route(s1, 999, 1) != nil || top.Hops(-1, s1) != -1 {
		t.Errorf("invalid node routes")
	}
}

func TestFatTreeRoutes(t *testing.T) {
	for _, k := range []int{4, 8} {
		top, err := topo.FatTree(k, 1e9)
		if err != nil {
			t.Fatal(err)
		}
		h := k / 2
		perPod := k * k / 4
		name := func(i int) string { return "s" + itoa(i) }
		cases := []struct {
			src, dst    string
			hops, paths int
		}{
			{name(1), name(2), 2, 1},                           // same edge switch
			{name(1), name(h + 1), 4, h},                       // same pod, other edge
			{name(1), name(perPod + 1), 6, h * h},              // other pod
			{name(k * k * k / 4), name(1), 6, h * h},           // last to first
			{name(perPod + h), name(perPod + h + 1), 4, h},     // pod 2, edges 1 and 2
			{name(perPod + 1), name(perPod + h), 2, 1},         // pod 2, same edge
			{name(2*perPod + 1), name(3*perPod + 1), 6, h * h}, // pods 3 and 4
		}
		for _, c := range cases {
			src, dst := mustNode(t, top, c.src), mustNode(t, top, c.dst)
			paths := top.Paths(src, dst)
			if len(paths) != c.paths {
				t.Errorf("k=%d %s→%s: %d paths; want %d", k, c.src, c.dst, len(paths), c.paths)
			}
			seen := map[string]bool{}
			for _, p := range paths {
				if len(p) != c.hops {
					t.Errorf("k=%d %s→%s: path of %d hops; want %d", k, c.src, c.dst, len(p), c.hops)
				}
				checkPath(t, top, src, dst, p)
				seen[linkNames(top, p)] = true
			}
			if len(seen) != len(paths) {
				t.Errorf("k=%d %s→%s: duplicate paths", k, c.src, c.dst)
			}
			// ECMP: deterministic per hash, spread over all paths.
			counts := map[string]int{}
			const n = 4000
			for i := range uint64(n) {
				hash := topo.PairHash(1, "vm"+itoa(int(i)), "x")
				r := top.Route(src, dst, hash)
				key := linkNames(top, r)
				if !seen[key] {
					t.Fatalf("k=%d %s→%s: route %s is not a shortest path", k, c.src, c.dst, key)
				}
				if again := linkNames(top, top.Route(src, dst, hash)); again != key {
					t.Fatalf("route not deterministic: %s then %s", key, again)
				}
				counts[key]++
			}
			if len(counts) != c.paths {
				t.Errorf("k=%d %s→%s: hashes used %d of %d paths", k, c.src, c.dst, len(counts), c.paths)
			}
			for p, cnt := range counts {
				if expect := n / c.paths; cnt < expect/2 || cnt > expect*3/2 {
					t.Errorf("k=%d %s→%s: path %s used %d times of %d (expected about %d)", k, c.src, c.dst, p, cnt, n, expect)
				}
			}
		}
	}
}

// checkPath checks that p is a connected walk from src to dst.
func checkPath(t *testing.T, top *topo.Topology, src, dst int, p []int) {
	t.Helper()
	at := src
	for _, l := range p {
		if top.Links[l].From != at {
			t.Fatalf("path %s broken at %s", linkNames(top, p), top.Links[l].Name)
		}
		at = top.Links[l].To
	}
	if at != dst {
		t.Fatalf("path %s ends at %s", linkNames(top, p), top.Nodes[at].Name)
	}
}

func TestExplicitECMP(t *testing.T) {
	// A diamond: h1 - a - {b, c} - d - h2: two equal paths.
	top, err := topo.Explicit(
		[]topo.NodeSpec{{Name: "h1"}, {Name: "h2"}, {Name: "a", Kind: topo.Switch}, {Name: "b", Kind: topo.Switch},
			{Name: "c", Kind: topo.Switch}, {Name: "d", Kind: topo.Switch}, {Name: "e", Kind: topo.Switch}},
		[]topo.LinkSpec{{A: "h1", B: "a", Capacity: 1}, {A: "a", B: "b", Capacity: 1}, {A: "a", B: "c", Capacity: 1},
			{A: "b", B: "d", Capacity: 1}, {A: "c", B: "d", Capacity: 1}, {A: "d", B: "h2", Capacity: 1},
			{A: "a", B: "e", Capacity: 1}, {A: "e", B: "b", Capacity: 1}}) // a longer detour, never used
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := mustNode(t, top, "h1"), mustNode(t, top, "h2")
	paths := top.Paths(h1, h2)
	want := []string{"h1->a a->b b->d d->h2", "h1->a a->c c->d d->h2"}
	if len(paths) != 2 || linkNames(top, paths[0]) != want[0] || linkNames(top, paths[1]) != want[1] {
		t.Errorf("paths %v", paths)
	}
	used := map[string]bool{}
	for i := range uint64(64) {
		used[linkNames(top, top.Route(h1, h2, topo.PairHash(int64(i), "x", "y")))] = true
	}
	if len(used) != 2 {
		t.Errorf("ECMP used %v", used)
	}
}

func TestPairHash(t *testing.T) {
	// Pinned: the simulator and admission must agree on it across builds.
	if got := topo.PairHash(1, "a", "b"); got != pinnedHash {
		t.Errorf("PairHash(1, a, b) = %#x; want %#x", got, uint64(pinnedHash))
	}
	distinct := map[uint64]bool{}
	for _, x := range []uint64{
		topo.PairHash(1, "a", "b"), topo.PairHash(1, "b", "a"), topo.PairHash(2, "a", "b"),
		topo.PairHash(1, "ab", ""), topo.PairHash(1, "", "ab"),
	} {
		distinct[x] = true
	}
	if len(distinct) != 5 {
		t.Errorf("collisions: %v", distinct)
	}
}

func TestServersNaturalOrder(t *testing.T) {
	var nodes []topo.NodeSpec
	var links []topo.LinkSpec
	nodes = append(nodes, topo.NodeSpec{Name: "sw", Kind: topo.Switch})
	for _, n := range []string{"s10", "s2", "s1", "web03", "web1"} {
		nodes = append(nodes, topo.NodeSpec{Name: n, Kind: topo.Server})
		links = append(links, topo.LinkSpec{A: n, B: "sw", Capacity: 1})
	}
	top, err := topo.Explicit(nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range top.Servers() {
		got = append(got, n.Name)
	}
	if want := []string{"s1", "s2", "s10", "web1", "web03"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Servers = %v; want %v", got, want)
	}
}

// TestConcurrentRoutes exercises the lazy per-destination cache from many
// goroutines (run with -race).
func TestConcurrentRoutes(t *testing.T) {
	top, err := topo.FatTree(8, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	servers := top.Servers()
	want := make([]string, len(servers))
	for i, s := range servers {
		want[i] = linkNames(top, top.Route(servers[0].ID, s.ID, uint64(i)))
	}
	top2, _ := topo.FatTree(8, 1e9)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range servers {
				i := (j + g*17) % len(servers)
				if got := linkNames(top2, top2.Route(servers[0].ID, servers[i].ID, uint64(i))); got != want[i] {
					t.Errorf("route to %s = %s; want %s", servers[i].Name, got, want[i])
				}
			}
		}()
	}
	wg.Wait()
}

// TestLargeFatTree routes every server to a spread of destinations on
// k = 16 (1024 servers).
func TestLargeFatTree(t *testing.T) {
	top, err := topo.FatTree(16, 10e9)
	if err != nil {
		t.Fatal(err)
	}
	servers := top.Servers()
	for i, s := range servers {
		for _, j := range []int{0, 7, 8, 63, 64, 511, 1023} {
			d := servers[(i+j)%len(servers)]
			r := top.Route(s.ID, d.ID, uint64(i*31+j))
			if s.ID != d.ID && (len(r) < 2 || len(r) > 6 || len(r)%2 != 0) {
				t.Fatalf("%s→%s: %d hops", s.Name, d.Name, len(r))
			}
		}
	}
}

func BenchmarkFatTree16Build(b *testing.B) {
	for b.Loop() {
		if _, err := topo.FatTree(16, 10e9); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFatTree16Route routes from every server to every other on a
// warm cache (one op = one Route).
func BenchmarkFatTree16Route(b *testing.B) {
	top, _ := topo.FatTree(16, 10e9)
	servers := top.Servers()
	n := len(servers)
	for i := range n {
		top.Route(servers[0].ID, servers[i].ID, 0)
		top.Route(servers[i].ID, servers[0].ID, 0)
	}
	i := 0
	for b.Loop() {
		src, dst := servers[i%n], servers[(i*7+1)%n]
		top.Route(src.ID, dst.ID, uint64(i))
		i++
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

const pinnedHash = 0xc8f26557ecfd52fc

// An oversubscribed fat-tree from a scenario: 2:1 at k = 4 keeps one
// aggregation switch per pod and two cores, so an edge switch has two
// servers below and one uplink.
func TestFatTreeOversubscribedFromSpec(t *testing.T) {
	top, err := topo.FromSpec(spec.Topology{Kind: spec.TopoFatTree, FatTree: &spec.FatTree{K: 4, Link: 1e9, Oversubscription: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var switches, servers int
	for _, n := range top.Nodes {
		if n.Kind == topo.Server {
			servers++
		} else {
			switches++
		}
	}
	// 16 servers; 8 edge, 4 aggregation (1 per pod), 2 core switches.
	if servers != 16 || switches != 14 {
		t.Errorf("%d servers, %d switches; want 16 and 14", servers, switches)
	}
	e, _ := top.Node("e1.1")
	up := 0
	for _, l := range top.Links {
		if l.From == e.ID && top.Nodes[l.To].Kind == topo.Switch {
			up++
		}
	}
	if up != 1 {
		t.Errorf("edge switch e1.1 has %d uplinks, want 1", up)
	}
}
