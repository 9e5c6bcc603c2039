package spec

import (
	"fmt"
	"time"

	"github.com/bulkhead-dc/bulkhead/units"
	"gopkg.in/yaml.v3"
)

// Quantities with units live in package units; these aliases and wrappers
// keep spec's names.
type (
	// Rate is a rate in bits per second; it now lives in package units
	// (units.Rate).
	Rate = units.Rate
	// Bytes is a size in bytes; it now lives in package units
	// (units.Bytes).
	Bytes = units.Bytes
	// Tokens is an amount (or rate) of tokens; it now lives in package
	// units (units.Tokens).
	Tokens = units.Tokens
	// Duration is a time.Duration written as "30s"; it now lives in
	// package units (units.Duration).
	Duration = units.Duration
)

// ParseRate is units.ParseRate.
func ParseRate(s string) (float64, error) { return units.ParseRate(s) }

// ParseBytes is units.ParseBytes.
func ParseBytes(s string) (float64, error) { return units.ParseBytes(s) }

// ParseTokens is units.ParseTokens.
func ParseTokens(s string) (float64, error) { return units.ParseTokens(s) }

// ParseDuration is units.ParseDuration.
func ParseDuration(s string) (time.Duration, error) { return units.ParseDuration(s) }

// FormatRate is units.FormatRate.
func FormatRate(bps float64) string { return units.FormatRate(bps) }

// FormatTokens is units.FormatTokens.
func FormatTokens(v float64) string { return units.FormatTokens(v) }

// StringList is a YAML scalar or sequence of strings.
type StringList []string

// UnmarshalYAML reads a single string or a list of strings.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		var errs []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				errs = append(errs, fmt.Sprintf("line %d: expected a name, got a %s", c.Line, units.YAMLKind(c)))
				continue
			}
			out = append(out, c.Value)
		}
		if len(errs) > 0 {
			return &yaml.TypeError{Errors: errs}
		}
		*l = out
		return nil
	}
	return units.YAMLError(n, fmt.Errorf("expected a name or a list of names, got a %s", units.YAMLKind(n)))
}

// MarshalYAML writes a single name as a scalar, several as a list.
func (l StringList) MarshalYAML() (any, error) {
	if len(l) == 1 {
		return l[0], nil
	}
	return []string(l), nil
}
