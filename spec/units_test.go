package spec_test

import (
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/spec"
	"gopkg.in/yaml.v3"
)

// TestStringListYAML decodes a name or a list of names, good and bad, and
// writes them back. (The quantities' tests are in package units.)
func TestStringListYAML(t *testing.T) {
	type doc struct {
		L spec.StringList `yaml:"l,omitempty"`
	}
	good := []struct {
		in   string
		want spec.StringList
		out  string
	}{
		{"l: a1", spec.StringList{"a1"}, "l: a1\n"},
		{"l: [a1, a2]", spec.StringList{"a1", "a2"}, "l:\n    - a1\n    - a2\n"},
	}
	for _, c := range good {
		var d doc
		if err := yaml.Unmarshal([]byte(c.in), &d); err != nil || strings.Join(d.L, ",") != strings.Join(c.want, ",") {
			t.Errorf("%q: got %v, %v; want %v", c.in, d.L, err, c.want)
			continue
		}
		out, err := yaml.Marshal(d)
		if err != nil || string(out) != c.out {
			t.Errorf("%q: marshal = %q, %v; want %q", c.in, out, err, c.out)
		}
	}
	bad := []struct{ in, msg string }{
		{"l: {a: 1}", "yaml: unmarshal errors:\n  line 1: expected a name or a list of names, got a mapping"},
		{"l: [a1, [a2]]", "yaml: unmarshal errors:\n  line 1: expected a name, got a list"},
	}
	for _, c := range bad {
		var d doc
		err := yaml.Unmarshal([]byte(c.in), &d)
		if err == nil || err.Error() != c.msg {
			t.Errorf("%q: error %q; want %q", c.in, err, c.msg)
		}
	}
}
