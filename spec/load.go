package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load reads, parses, defaults and validates the scenario file at path. See
// Parse.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes one YAML scenario, applies the defaults (ApplyDefaults) and
// validates it (Validate). Unknown fields are errors. file names the source
// in error messages and is kept in Scenario.File.
//
// Decoding problems are reported all at once where yaml.v3 can go on, each a
// *FieldError with the line and, where it can be told, the field path:
//
//	scenario.yaml:12: tenants[0].gaurantee: unknown field "gaurantee"
//	scenario.yaml:7: topology.two_tier.edge: invalid rate "1Gbs": unknown unit "Gbs" (use bps, Kbps, Mbps, Gbps, Tbps)
//
// Validation problems are *FieldError values joined with errors.Join (use
// FieldErrors to list them).
func Parse(data []byte, file string) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, decodeError(err, file, nil)
	}
	if len(root.Content) == 0 {
		return nil, &FieldError{File: file, Msg: "empty scenario"}
	}
	lines := pathsByLine(&root)

	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, decodeError(err, file, lines)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &FieldError{File: file, Line: extra.Line, Msg: "more than one YAML document; a scenario file holds exactly one"}
	}
	s.File = file
	s.ApplyDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// ParseTopology decodes a topology file: a document with a topology:
// section (a scenario, whose other fields are ignored) or the section
// itself (kind: fat-tree, fat_tree: {k: 16, link: 10Gbps}). Unknown fields
// of the section are errors; the section gets the scenario defaults
// (ApplyDefaults) and is validated as in a scenario (Validate). Every
// problem is a *FieldError with the file and the line (decoding) or the
// field path (validation):
//
//	topo.yaml:2: unknown field "lnk"
//	topo.yaml: topology.fat_tree.k: must be an even number of at least 2, got 3
func ParseTopology(data []byte, file string) (Topology, error) {
	var t Topology
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return t, decodeError(err, file, nil)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return t, &FieldError{File: file, Msg: "expected a mapping with a topology: section, or the section itself (kind: ...)"}
	}
	lines := pathsByLine(&root)
	wrapped := false
	for i := 0; i < len(root.Content[0].Content); i += 2 {
		if root.Content[0].Content[i].Value == "topology" {
			wrapped = true
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var err error
	if wrapped {
		var doc struct {
			Topology Topology       `yaml:"topology"`
			Rest     map[string]any `yaml:",inline"`
		}
		err = dec.Decode(&doc)
		t = doc.Topology
	} else {
		err = dec.Decode(&t)
	}
	if err != nil {
		return t, decodeError(err, file, lines)
	}
	t.applyDefaults()
	p := &problems{File: file}
	t.validate(p)
	return t, p.Err()
}

var (
	lineRE      = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownRE   = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	unmarshalRE = regexp.MustCompile("^cannot unmarshal !!(\\w+) (?:`(.*)` )?into (.+)$")
)

// decodeError turns a yaml.v3 error into *FieldErrors with lines and paths.
func decodeError(err error, file string, lines map[int]string) error {
	return yamlErrors(err, func(msg string) *FieldError { return lineError(msg, file, lines) })
}

// yamlErrors turns a yaml.v3 error into one error per problem, each made by
// fe from yaml.v3's message ("line 3: ...").
func yamlErrors(err error, fe func(msg string) *FieldError) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		errs := make([]error, 0, len(te.Errors))
		for _, e := range te.Errors {
			errs = append(errs, fe(e))
		}
		return errors.Join(errs...)
	}
	return fe(strings.TrimPrefix(err.Error(), "yaml: "))
}

// lineError is locateError with type mismatches worded as what was
// expected and what was found.
func lineError(msg, file string, lines map[int]string) *FieldError {
	fe := locateError(msg, file, lines)
	if m := unmarshalRE.FindStringSubmatch(fe.Msg); m != nil {
		fe.Msg = "expected " + goTypeName(m[3]) + ", got " + yamlTagName(m[1], m[2])
	}
	return fe
}

// locateError turns one yaml.v3 message into a *FieldError with its line,
// the field path on that line (from lines, if any) and unknown fields
// named as such.
func locateError(msg, file string, lines map[int]string) *FieldError {
	fe := &FieldError{File: file, Msg: msg}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		fe.Msg = m[2]
		fe.Path = lines[fe.Line]
	}
	if m := unknownRE.FindStringSubmatch(fe.Msg); m != nil {
		fe.Msg = fmt.Sprintf("unknown field %q", m[1])
	}
	return fe
}

func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "spec."), strings.HasPrefix(t, "*spec."),
		strings.HasPrefix(t, "model."), strings.HasPrefix(t, "*model."):
		return "a mapping"
	}
	return t
}

func yamlTagName(tag, value string) string {
	switch tag {
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	}
	if value != "" {
		return strconv.Quote(value)
	}
	return "!!" + tag
}

// pathsByLine maps each line of the document to the path of the first
// mapping key on it (or, failing that, of the first list item or value).
func pathsByLine(root *yaml.Node) map[int]string {
	keys := map[int]string{}
	other := map[int]string{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if _, ok := keys[k.Line]; !ok {
					keys[k.Line] = p
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if _, ok := other[c.Line]; !ok {
					other[c.Line] = p
				}
				walk(c, p)
			}
		case yaml.ScalarNode:
			if _, ok := other[n.Line]; !ok {
				other[n.Line] = path
			}
		}
	}
	walk(root, "")
	for l, p := range other {
		if _, ok := keys[l]; !ok {
			keys[l] = p
		}
	}
	return keys
}

// CheckTopology applies the scenario defaults to a topology section given
// on its own (an operator's cluster declaration) and validates it as in a
// scenario; problems are *FieldErrors with paths under "topology." and
// the given file.
func CheckTopology(t *Topology, file string) error {
	t.applyDefaults()
	p := &problems{File: file}
	t.validate(p)
	return p.Err()
}

// YAMLErrors turns an error of yaml.v3 decoding into *FieldErrors with
// the file, the line and, where root (the parsed document or documents,
// may be nil) tells it, the field path on that line — the same messages
// as a scenario's (expected types, unknown fields).
func YAMLErrors(err error, file string, roots ...*yaml.Node) error {
	lines := map[int]string{}
	for _, r := range roots {
		if r != nil {
			maps.Copy(lines, pathsByLine(r))
		}
	}
	return decodeError(err, file, lines)
}
