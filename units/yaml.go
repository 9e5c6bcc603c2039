package units

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// YAMLError is the error an UnmarshalYAML method returns for a bad node:
// a *yaml.TypeError with the node's line, so that the decoder keeps going
// and reports every problem with its line.
func YAMLError(n *yaml.Node, err error) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
}

// YAMLKind names a node's kind for messages: "mapping", "list", "alias" or
// "scalar".
func YAMLKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "scalar"
}

// decodeYAML parses a scalar node with parse into *dst (left as it is on
// error); what says what the node should hold ("a rate") when it is not a
// scalar.
func decodeYAML[T any](n *yaml.Node, what string, dst *T, parse func(string) (T, error)) error {
	if n.Kind != yaml.ScalarNode {
		return YAMLError(n, fmt.Errorf("expected %s, got a %s", what, YAMLKind(n)))
	}
	v, err := parse(n.Value)
	if err != nil {
		return YAMLError(n, err)
	}
	*dst = v
	return nil
}

// UnmarshalYAML reads a rate with units or a plain number of bits/s.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	return decodeYAML(n, "a rate", (*float64)(r), ParseRate)
}

// MarshalYAML writes the rate in the largest unit that keeps it exact.
func (r Rate) MarshalYAML() (any, error) {
	return exactQuantity(float64(r), []string{"Tbps", "Gbps", "Mbps", "Kbps"}, []float64{1e12, 1e9, 1e6, 1e3}, "bps"), nil
}

// UnmarshalYAML reads a size in bytes, with or without units.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	return decodeYAML(n, "a size", (*float64)(b), ParseBytes)
}

// MarshalYAML writes the size in the largest unit that keeps it exact.
func (b Bytes) MarshalYAML() (any, error) {
	v := float64(b)
	if v == math.Trunc(v) && v < 1e15 {
		for i, sc := range []float64{1 << 30, 1 << 20, 1 << 10} {
			if v >= sc && math.Mod(v, sc) == 0 {
				return strconv.FormatFloat(v/sc, 'f', -1, 64) + []string{"GiB", "MiB", "KiB"}[i], nil
			}
		}
	}
	if v < 1e3 {
		return v, nil
	}
	return exactQuantity(v, []string{"TB", "GB", "MB", "KB"}, []float64{1e12, 1e9, 1e6, 1e3}, ""), nil
}

// UnmarshalYAML reads tokens with or without units.
func (t *Tokens) UnmarshalYAML(n *yaml.Node) error {
	return decodeYAML(n, "a number of tokens", (*float64)(t), ParseTokens)
}

// MarshalYAML writes the amount in the largest of K, M, G that keeps it
// exact, or as a plain number.
func (t Tokens) MarshalYAML() (any, error) {
	v := float64(t)
	if v < 1e3 {
		return v, nil
	}
	return exactQuantity(v, []string{"G", "M", "K"}, []float64{1e9, 1e6, 1e3}, ""), nil
}

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	return decodeYAML(n, "a duration", (*time.Duration)(d), ParseDuration)
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }
