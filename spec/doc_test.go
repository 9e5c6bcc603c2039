package spec_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/spec"
	"gopkg.in/yaml.v3"
)

// TestDocExamples parses every complete scenario in docs/scenarios.md (YAML
// blocks starting with "name:") and every size-distribution and virtual
// cost fragment, so that the reference stays true to the code.
func TestDocExamples(t *testing.T) {
	data, err := os.ReadFile("../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlocks(string(data))
	full, fragments := 0, 0
	for i, b := range blocks {
		switch {
		case strings.HasPrefix(b, "name:"):
			full++
			if _, err := spec.Parse([]byte(b), "docs example"); err != nil {
				t.Errorf("example %d:\n%s\n%v", i, b, err)
			}
		case strings.HasPrefix(b, "# fragments"):
			for _, line := range strings.Split(b, "\n")[1:] {
				if line == "" {
					continue
				}
				fragments++
				var frag struct {
					Sizes spec.SizeDist `yaml:"sizes"`
				}
				dec := yaml.NewDecoder(bytes.NewReader([]byte(line)))
				dec.KnownFields(true)
				if err := dec.Decode(&frag); err != nil {
					t.Errorf("fragment %q: %v", line, err)
					continue
				}
				s := parseBase(t)
				flows(s, &frag.Sizes)
				s.ApplyDefaults()
				if err := s.Validate(); err != nil {
					t.Errorf("fragment %q: %v", line, err)
				}
			}
		case strings.HasPrefix(b, "# virtual_cost fragments"):
			for _, line := range strings.Split(b, "\n")[1:] {
				if line == "" {
					continue
				}
				fragments++
				var frag struct {
					VirtualCost []spec.VirtualCost `yaml:"virtual_cost"`
				}
				dec := yaml.NewDecoder(bytes.NewReader([]byte(line)))
				dec.KnownFields(true)
				if err := dec.Decode(&frag); err != nil {
					t.Errorf("fragment %q: %v", line, err)
					continue
				}
				s := parsePulsar(t)
				s.Appliances[0].VirtualCost = frag.VirtualCost
				s.ApplyDefaults()
				if err := s.Validate(); err != nil {
					t.Errorf("fragment %q: %v", line, err)
				}
			}
		default:
			t.Errorf("yaml block %d is neither a scenario nor fragments:\n%s", i, b)
		}
	}
	if full < 14 || fragments < 9 {
		t.Errorf("found %d scenarios and %d fragments", full, fragments)
	}
}

func yamlBlocks(md string) []string {
	var out []string
	var cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !in && line == "```yaml":
			in, cur = true, nil
		case in && line == "```":
			in = false
			out = append(out, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	return out
}
