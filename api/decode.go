package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"gopkg.in/yaml.v3"
)

// Limits on what a client may send.
const (
	// MaxObjects is the most objects one apply may carry.
	MaxObjects = 1000
	// MaxBytes is the largest file or request body, bytes.
	MaxBytes = 8 << 20
	// MaxVMs is the most VMs one tenant may declare.
	MaxVMs = 10000
)

// nameRE is what an object's or a VM's name may look like: letters,
// digits, '-', '_' and '.', starting and ending with a letter or digit.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$`)

// CheckName says why s is not a valid name, or nil.
func CheckName(s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("%q is not a valid name (letters, digits, '-', '_', '.', starting and ending with a letter or digit, at most 253)", s)
	}
	return nil
}

// newSpec returns an empty spec for a kind, or nil for an unknown kind.
func newSpec(kind string) any {
	switch kind {
	case KindCluster:
		return &ClusterSpec{}
	case KindHost:
		return &HostSpec{}
	case KindTenant:
		return &TenantSpec{}
	case KindAppliance:
		return &ApplianceSpec{}
	}
	return nil
}

func unknownKind(kind string) string {
	if kind == "" {
		return "required (one of " + strings.Join(kinds, ", ") + ")"
	}
	return fmt.Sprintf("unknown kind %q (use %s)", kind, strings.Join(kinds, ", "))
}

// Decode reads the objects of a YAML file (one or more documents separated
// by "---"; JSON is YAML too). file names the source in errors. Unknown
// fields, unknown kinds, another apiVersion and invalid names are errors,
// each a *model.FieldError with the line and the field path:
//
//	tenants.yaml:7: spec.vms[0].gaurantee: unknown field "gaurantee"
//
// A status in a document (from `bulkhead get -o yaml`) is ignored.
func Decode(data []byte, file string) ([]Object, error) {
	if len(data) > MaxBytes {
		return nil, &model.FieldError{File: file, Msg: fmt.Sprintf("%d bytes, more than the %d an apply may carry", len(data), MaxBytes)}
	}
	// Pass 1: the documents as nodes, for kinds, lines and paths.
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, spec.YAMLErrors(err, file)
		}
		docs = append(docs, &n)
		if len(docs) > MaxObjects {
			return nil, &model.FieldError{File: file, Line: n.Line, Msg: fmt.Sprintf("more than %d objects in one apply", MaxObjects)}
		}
	}
	// Pass 2: each document into its kind's spec, unknown fields refused.
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	var (
		objs []Object
		errs []error
	)
	for _, n := range docs {
		kind, line := header(n, "kind")
		if len(n.Content) == 0 || newSpec(kind) == nil {
			var skip yaml.Node
			if err := strict.Decode(&skip); err != nil {
				return nil, spec.YAMLErrors(err, file, docs...)
			}
			if len(n.Content) > 0 {
				errs = append(errs, &model.FieldError{File: file, Line: line, Path: "kind", Msg: unknownKind(kind)})
			}
			continue
		}
		var (
			o   Object
			err error
		)
		switch kind {
		case KindCluster:
			o, err = decodeDoc[ClusterSpec](strict)
		case KindHost:
			o, err = decodeDoc[HostSpec](strict)
		case KindTenant:
			o, err = decodeDoc[TenantSpec](strict)
		default:
			o, err = decodeDoc[ApplianceSpec](strict)
		}
		if err != nil {
			errs = append(errs, locateValue(spec.YAMLErrors(err, file, docs...), n))
			continue
		}
		if o.Spec == nil {
			errs = append(errs, &model.FieldError{File: file, Line: n.Line, Path: "spec", Msg: "required"})
			continue
		}
		if err := checkHeader(&o); err != nil {
			_, l := header(n, "metadata")
			errs = append(errs, located(err, file, l))
			continue
		}
		objs = append(objs, o)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(objs) == 0 {
		return nil, &model.FieldError{File: file, Msg: "no objects (expected documents with apiVersion, kind, metadata.name and spec)"}
	}
	return objs, nil
}

// decodeDoc decodes the decoder's next document as an object whose spec
// is an S.
func decodeDoc[S any](dec *yaml.Decoder) (Object, error) {
	var doc struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   Meta   `yaml:"metadata"`
		Spec       *S     `yaml:"spec"`
		Status     any    `yaml:"status"`
	}
	if err := dec.Decode(&doc); err != nil {
		return Object{}, err
	}
	o := Object{APIVersion: doc.APIVersion, Kind: doc.Kind, Metadata: Meta{Name: doc.Metadata.Name}}
	if doc.Spec != nil {
		o.Spec = doc.Spec
	}
	return o, nil
}

var quotedRE = regexp.MustCompile(`"([^"]+)"`)

// locateValue gives problems that yaml.v3 reports without a line (a value
// its type refused to parse, such as an IP address) the line and path of
// the first scalar in the document with the value the message quotes.
func locateValue(err error, doc *yaml.Node) error {
	for _, fe := range model.FieldErrors(err) {
		if fe.Line > 0 {
			continue
		}
		for _, q := range quotedRE.FindAllStringSubmatch(fe.Msg, -1) {
			if line, path := findScalar(doc, q[1], ""); line > 0 {
				fe.Line, fe.Path = line, path
				break
			}
		}
	}
	return err
}

// findScalar returns the line and path of the first scalar value v under n.
func findScalar(n *yaml.Node, v, path string) (int, string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if l, p := findScalar(c, v, path); l > 0 {
				return l, p
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			if l, pp := findScalar(n.Content[i+1], v, p); l > 0 {
				return l, pp
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if l, p := findScalar(c, v, fmt.Sprintf("%s[%d]", path, i)); l > 0 {
				return l, p
			}
		}
	case yaml.ScalarNode:
		if n.Value == v {
			return n.Line, path
		}
	}
	return 0, ""
}

// header returns the scalar value and line of a top-level key of a
// document node ("" and 0 when absent).
func header(doc *yaml.Node, key string) (string, int) {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return "", doc.Line
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1].Value, m.Content[i].Line
		}
	}
	return "", 0
}

// located sets the file and line of the FieldErrors in err.
func located(err error, file string, line int) error {
	for _, fe := range model.FieldErrors(err) {
		fe.File, fe.Line = file, line
	}
	return err
}

// checkHeader checks apiVersion, kind and name.
func checkHeader(o *Object) error {
	p := &model.Problems{}
	if o.APIVersion != Version {
		if o.APIVersion == "" {
			p.Add("apiVersion", "required (%s)", Version)
		} else {
			p.Add("apiVersion", "unknown version %q (use %s)", o.APIVersion, Version)
		}
	}
	if newSpec(o.Kind) == nil {
		p.Add("kind", "%s", unknownKind(o.Kind))
	}
	switch {
	case o.Metadata.Name == "":
		p.Add("metadata.name", "required")
	case o.Kind == KindCluster && o.Metadata.Name != ClusterName:
		p.Add("metadata.name", "the cluster is named %q, got %q", ClusterName, o.Metadata.Name)
	default:
		if err := CheckName(o.Metadata.Name); err != nil {
			p.Add("metadata.name", "%v", err)
		}
	}
	return p.Err()
}

// UnmarshalJSON decodes an object sent to the controller: its spec (and
// status) by kind, unknown fields refused.
func (o *Object) UnmarshalJSON(b []byte) error {
	var raw struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   Meta            `json:"metadata"`
		Spec       json.RawMessage `json:"spec"`
		Status     json.RawMessage `json:"status"`
	}
	if err := strictJSON(b, &raw, ""); err != nil {
		return err
	}
	*o = Object{APIVersion: raw.APIVersion, Kind: raw.Kind, Metadata: raw.Metadata}
	if err := checkHeader(o); err != nil {
		return err
	}
	if len(raw.Spec) == 0 || string(raw.Spec) == "null" {
		return &model.FieldError{Path: "spec", Msg: "required"}
	}
	o.Spec = newSpec(o.Kind)
	if err := strictJSON(raw.Spec, o.Spec, "spec"); err != nil {
		return err
	}
	if len(raw.Status) > 0 && string(raw.Status) != "null" {
		switch o.Kind {
		case KindTenant:
			o.Status = &TenantStatus{}
		case KindHost:
			o.Status = &HostStatus{}
		default:
			return &model.FieldError{Path: "status", Msg: "a " + o.Kind + " has no status"}
		}
		if err := strictJSON(raw.Status, o.Status, "status"); err != nil {
			return err
		}
	}
	return nil
}

var jsonUnknownRE = regexp.MustCompile(`^json: unknown field "(.*)"$`)

// strictJSON decodes one JSON value into v, refusing unknown fields and
// trailing data; errors are *model.FieldErrors under path.
func strictJSON(b []byte, v any, path string) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	join := func(field string) string {
		switch {
		case path == "":
			return field
		case field == "":
			return path
		}
		return path + "." + field
	}
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return &model.FieldError{Path: join(te.Field), Msg: fmt.Sprintf("expected %s, got a JSON %s", te.Type, te.Value)}
		case errors.As(err, &se):
			return &model.FieldError{Path: path, Msg: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)}
		}
		if m := jsonUnknownRE.FindStringSubmatch(err.Error()); m != nil {
			return &model.FieldError{Path: join(""), Msg: fmt.Sprintf("unknown field %q", m[1])}
		}
		return &model.FieldError{Path: path, Msg: err.Error()}
	}
	if d.More() {
		return &model.FieldError{Path: path, Msg: "trailing data after the JSON value"}
	}
	return nil
}
