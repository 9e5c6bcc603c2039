package spec_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/spec"
)

// TestParseTopology reads topology files: the section itself or a document
// with a topology: section (other fields ignored), with the scenario
// defaults, and every problem with file, line or field path.
func TestParseTopology(t *testing.T) {
	cases := []struct {
		name, doc string
		want      string   // the topology read, as "kind racks×servers edge core oversubscription" or "kind k link"
		errs      []string // or the problems
	}{
		{"section", "kind: two-tier\ntwo_tier: {racks: 2, servers_per_rack: 2, edge: 1Gbps, core: 300Mbps}\n",
			"two-tier 2×2 1 Gbps 300 Mbps 0", nil},
		{"section, defaults", "kind: two-tier\ntwo_tier: {racks: 3, servers_per_rack: 4, edge: 10Gbps}\n",
			"two-tier 3×4 10 Gbps 0 bps 1", nil},
		{"wrapped, other fields ignored", "topology:\n  kind: fat-tree\n  fat_tree: {k: 4, link: 1Gbps}\nname: ignored\ntenants: [{name: A}]\n",
			"fat-tree 4 1 Gbps", nil},
		{"wrapped scenario", "name: x\nduration: 1s\ntopology:\n  kind: two-tier\n  two_tier: {racks: 1, servers_per_rack: 3, edge: 1Gbps}\n",
			"two-tier 1×3 1 Gbps 0 bps 1", nil},
		{"first document only", "kind: fat-tree\nfat_tree: {k: 2, link: 1Gbps}\n---\nkind: two-tier\n", "fat-tree 2 1 Gbps", nil},

		{"unknown field", "kind: fat-tree\nfat_tree: {k: 4, lnk: 1Gbps}\n", "",
			[]string{`t.yaml:2: fat_tree: unknown field "lnk"`}},
		{"unknown field, wrapped", "topology:\n  kind: fat-tree\n  fat_tree: {k: 4, lnk: 1Gbps}\nname: x\n", "",
			[]string{`t.yaml:3: topology.fat_tree: unknown field "lnk"`}},
		{"unknown top-level field", "kind: fat-tree\nfat_tree: {k: 4, link: 1Gbps}\nseed: 3\n", "",
			[]string{`t.yaml:3: seed: unknown field "seed"`}},
		{"bad values", "kind: fat-tree\nfat_tree: {k: four, link: 1Gbs}\n", "", []string{
			"t.yaml:2: fat_tree: expected an integer, got \"four\"",
			`t.yaml:2: fat_tree: invalid rate "1Gbs": unknown unit "Gbs" (use bps, Kbps, Mbps, Gbps, Tbps)`}},
		{"wrong shape", "topology: [1]\n", "", []string{"t.yaml:1: topology: expected a mapping, got a list"}},
		{"syntax", "kind: fat-tree\nfat_tree: {k: 4, link: 1Gbps\n", "", []string{`t.yaml:1: did not find expected ',' or '}'`}},
		{"duplicate key", "kind: fat-tree\nfat_tree: {k: 4, link: 1Gbps}\nkind: two-tier\n", "",
			[]string{`t.yaml:3: kind: mapping key "kind" already defined at line 1`}},
		{"empty", "", "", []string{"t.yaml: expected a mapping with a topology: section, or the section itself (kind: ...)"}},
		{"list", "- a\n- b\n", "", []string{"t.yaml: expected a mapping with a topology: section, or the section itself (kind: ...)"}},

		{"invalid", "kind: fat-tree\nfat_tree: {k: 3, link: 1Gbps}\n", "",
			[]string{"t.yaml: topology.fat_tree.k: must be an even number of at least 2, got 3"}},
		{"invalid, wrapped", "topology:\n  kind: fat-tree\n  fat_tree: {k: 3, link: 0Gbps}\nname: x\nbogus: 1\n", "", []string{
			"t.yaml: topology.fat_tree.k: must be an even number of at least 2, got 3",
			`t.yaml: topology.fat_tree.link: required (a positive rate such as "1Gbps")`}},
		{"no kind", "topology:\n", "", []string{"t.yaml: topology.kind: required (two-tier, fat-tree or explicit)"}},
		{"unknown kind", "kind: torus\n", "", []string{`t.yaml: topology.kind: unknown kind "torus" (use two-tier, fat-tree or explicit)`}},
		{"explicit", "kind: explicit\nexplicit:\n  nodes: [{name: s1, kind: server}, {name: sw, kind: switch}]\n  links: [{a: s1, b: s9, capacity: 1Gbps}]\n", "",
			[]string{`t.yaml: topology.explicit.links[0].b: unknown node "s9"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top, err := spec.ParseTopology([]byte(c.doc), "t.yaml")
			if got := messages(err); !reflect.DeepEqual(got, c.errs) {
				t.Fatalf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.errs, "\n  "))
			}
			if err != nil {
				if err.Error() != strings.Join(c.errs, "\n") { // nothing but the *FieldErrors
					t.Errorf("error %q", err)
				}
				return
			}
			if got := describe(top); got != c.want {
				t.Errorf("topology %q, want %q", got, c.want)
			}
		})
	}
}

func describe(t spec.Topology) string {
	switch {
	case t.TwoTier != nil:
		tt := t.TwoTier
		return fmt.Sprintf("%s %d×%d %s %s %g", t.Kind, tt.Racks, tt.ServersPerRack, tt.Edge, tt.Core, tt.Oversubscription)
	case t.FatTree != nil:
		return fmt.Sprintf("%s %d %s", t.Kind, t.FatTree.K, t.FatTree.Link)
	}
	return t.Kind
}
