package all_test

import (
	"strings"
	"testing"

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
