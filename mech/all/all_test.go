package all_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/spec"

	"github.com/bulkhead-dc/bulkhead/mech/all"
)

func TestRegistry(t *testing.T) {
	for _, n := range all.Names() {
		m, err := all.New(n, nil)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if m.Name() != n {
			t.Errorf("mechanism %q reports name %q", n, m.Name())
		}
	}
	cases := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"nosuch", nil, `mechanism.name: unknown mechanism "nosuch"`},
		{"static", map[string]any{"alpha": 1}, "mechanism.params.alpha: unknown parameter"},
	}
	for _, c := range cases {
		_, err := all.New(c.name, c.params)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%q, %v) = %v, want error containing %q", c.name, c.params, err, c.want)
		}
	}
}

// Every example scenario in docs/scenarios.md names a mechanism that exists
// with parameters it accepts.
func TestDocExamplesMechanisms(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "scenarios.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(data), "```yaml\n")
	checked := 0
	for _, b := range blocks[1:] {
		text := b[:strings.Index(b, "```")]
		if !strings.Contains(text, "\nmechanism:") {
			continue
		}
		sc, err := spec.Parse([]byte(text), "docs/scenarios.md")
		if err != nil {
			continue // fragments and error examples are spec's business
		}
		if _, err := all.New(sc.Mechanism.Name, sc.Mechanism.Params); err != nil {
			t.Errorf("example %q: %v", sc.Name, err)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no example with a mechanism found")
	}
}
