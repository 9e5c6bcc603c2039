package spec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// rateUnits maps a lower-cased rate unit to bits/s.
func rateUnit(u string) (float64, bool) {
	switch strings.ToLower(u) {
	case "", "bps":
		return 1, true
	case "k", "kbps":
		return 1e3, true
	case "m", "mbps":
		return 1e6, true
	case "g", "gbps":
		return 1e9, true
	case "t", "tbps":
		return 1e12, true
	}
	return 0, false
}

// byteUnit maps a byte-size unit to bytes. Decimal units (KB, MB, ...) are
// powers of 1000, binary ones (KiB, MiB, ...) powers of 1024.
func byteUnit(u string) (float64, bool) {
	switch strings.ToLower(u) {
	case "", "b":
		return 1, true
	case "k", "kb":
		return 1e3, true
	case "m", "mb":
		return 1e6, true
	case "g", "gb":
		return 1e9, true
	case "t", "tb":
		return 1e12, true
	case "kib":
		return 1 << 10, true
	case "mib":
		return 1 << 20, true
	case "gib":
		return 1 << 30, true
	case "tib":
		return 1 << 40, true
	}
	return 0, false
}

var errNegative = errors.New("must not be negative")

// splitQuantity splits "1.5 Gbps" into its number and unit.
func splitQuantity(s string) (num float64, unit string, err error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == '+' || s[i] == '-' ||
		(s[i] == 'e' || s[i] == 'E') && i > 0 && i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '-' || s[i+1] == '+')) {
		i++
	}
	if i == 0 {
		return 0, "", errors.New("no number")
	}
	num, err = strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, "", fmt.Errorf("bad number %q", s[:i])
	}
	if math.IsNaN(num) || math.IsInf(num, 0) {
		return 0, "", fmt.Errorf("bad number %q", s[:i])
	}
	if num < 0 {
		return 0, "", errNegative
	}
	return num, strings.TrimSpace(s[i:]), nil
}

// ParseRate parses a rate such as "450Mbps", "1Gbps", "10Kbps", "1.5G",
// "100M" or "2500" (bits/s) into bits per second. Units are
// case-insensitive: bps, Kbps, Mbps, Gbps, Tbps or K, M, G, T (powers of
// 1000); a space between number and unit is allowed. Negative rates are
// rejected.
func ParseRate(s string) (float64, error) {
	num, unit, err := splitQuantity(s)
	if errors.Is(err, errNegative) {
		return 0, fmt.Errorf("invalid rate %q: %w", s, err)
	}
	if err != nil {
		return 0, fmt.Errorf("invalid rate %q: want a number with a unit such as \"450Mbps\" or \"1Gbps\"", s)
	}
	scale, ok := rateUnit(unit)
	if !ok {
		return 0, fmt.Errorf("invalid rate %q: unknown unit %q (use bps, Kbps, Mbps, Gbps, Tbps)", s, unit)
	}
	return num * scale, nil
}

// ParseBytes parses a size such as 1500, "64KB" (64000), "64KiB" (65536),
// "1MB" or "10MiB" into bytes. Units are case-insensitive: B, KB, MB, GB, TB
// (and K, M, G, T) are powers of 1000, KiB, MiB, GiB, TiB powers of 1024.
func ParseBytes(s string) (float64, error) {
	num, unit, err := splitQuantity(s)
	if errors.Is(err, errNegative) {
		return 0, fmt.Errorf("invalid size %q: %w", s, err)
	}
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes with an optional unit such as \"64KB\" or \"10MiB\"", s)
	}
	scale, ok := byteUnit(unit)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, KB, MB, GB, KiB, MiB, GiB)", s, unit)
	}
	return num * scale, nil
}

// ParseDuration parses a Go duration ("30s", "1ms", "1m30s"); "0" is zero.
// Negative durations are rejected.
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a number with a unit such as \"30s\" or \"1ms\"", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: negative", s)
	}
	return d, nil
}

// scalarError is the error a custom unmarshaler returns: a *yaml.TypeError
// so that the decoder keeps going and reports every problem with its line.
func scalarError(n *yaml.Node, err error) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
}

func scalarValue(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", scalarError(n, fmt.Errorf("expected %s, got a %s", what, nodeKind(n)))
	}
	return n.Value, nil
}

func nodeKind(n *yaml.Node) string {
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

// UnmarshalYAML reads a rate with units or a plain number of bits/s.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	v, err := scalarValue(n, "a rate")
	if err != nil {
		return err
	}
	f, err := ParseRate(v)
	if err != nil {
		return scalarError(n, err)
	}
	*r = Rate(f)
	return nil
}

// MarshalYAML writes the rate in the largest unit that keeps it exact.
func (r Rate) MarshalYAML() (any, error) {
	return exactQuantity(float64(r), []string{"Tbps", "Gbps", "Mbps", "Kbps"}, []float64{1e12, 1e9, 1e6, 1e3}, "bps"), nil
}

// String formats the rate for people, as FormatRate.
func (r Rate) String() string { return FormatRate(float64(r)) }

// UnmarshalYAML reads a size in bytes, with or without units.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	v, err := scalarValue(n, "a size")
	if err != nil {
		return err
	}
	f, err := ParseBytes(v)
	if err != nil {
		return scalarError(n, err)
	}
	*b = Bytes(f)
	return nil
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

// exactQuantity formats v in the largest unit whose text parses back to
// exactly v (ParseRate and ParseBytes multiply the number by the scale).
func exactQuantity(v float64, units []string, scales []float64, base string) string {
	for i, sc := range scales {
		if v < sc {
			continue
		}
		s := strconv.FormatFloat(v/sc, 'f', -1, 64)
		if f, err := strconv.ParseFloat(s, 64); err == nil && f*sc == v {
			return s + units[i]
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + base
}

// FormatRate formats bits/s for people in the largest unit that keeps the
// number at least 1, with up to three decimals: "450 Mbps", "1.2 Gbps",
// "56.25 Mbps", "0 bps".
func FormatRate(bps float64) string {
	units := []string{"Tbps", "Gbps", "Mbps", "Kbps"}
	scales := []float64{1e12, 1e9, 1e6, 1e3}
	a := math.Abs(bps)
	for i, sc := range scales {
		if a >= sc {
			return trimFloat(bps/sc) + " " + units[i]
		}
	}
	return trimFloat(bps) + " bps"
}

func trimFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := scalarValue(n, "a duration")
	if err != nil {
		return err
	}
	x, err := ParseDuration(v)
	if err != nil {
		return scalarError(n, err)
	}
	*d = Duration(x)
	return nil
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// String formats the duration as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

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
				errs = append(errs, fmt.Sprintf("line %d: expected a name, got a %s", c.Line, nodeKind(c)))
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
	return scalarError(n, fmt.Errorf("expected a name or a list of names, got a %s", nodeKind(n)))
}

// MarshalYAML writes a single name as a scalar, several as a list.
func (l StringList) MarshalYAML() (any, error) {
	if len(l) == 1 {
		return l[0], nil
	}
	return []string(l), nil
}

// tokenUnit maps a token unit to tokens: a prefix K, M, G, T (powers of
// 1000; T alone is tera, as for rates) optionally followed by T (tokens)
// or T/s; case-insensitive. "" and "T/s" are 1.
func tokenUnit(u string) (float64, bool) {
	u = strings.ToLower(u)
	prefix := func(p string) (float64, bool) {
		switch p {
		case "":
			return 1, true
		case "k":
			return 1e3, true
		case "m":
			return 1e6, true
		case "g":
			return 1e9, true
		case "t":
			return 1e12, true
		}
		return 0, false
	}
	if p, ok := strings.CutSuffix(u, "t/s"); ok {
		return prefix(p)
	}
	if f, ok := prefix(u); ok {
		return f, true
	}
	if p, ok := strings.CutSuffix(u, "t"); ok && p != "" {
		return prefix(p)
	}
	return 0, false
}

// ParseTokens parses an amount or rate of tokens such as 8000, "8K",
// "1.6M", "1600MT", "1600MT/s" or "5GT/s". Units are case-insensitive: a
// prefix K, M, G, T (powers of 1000; T alone is tera, as for rates),
// optionally followed by T (tokens) or T/s; "T/s" alone is tokens/s. A
// space before the unit is allowed; negative amounts are rejected.
func ParseTokens(s string) (float64, error) {
	num, unit, err := splitQuantity(s)
	if errors.Is(err, errNegative) {
		return 0, fmt.Errorf("invalid tokens %q: %w", s, err)
	}
	if err != nil {
		return 0, fmt.Errorf("invalid tokens %q: want a number with an optional unit such as \"8K\", \"1.6M\" or \"1600MT/s\"", s)
	}
	scale, ok := tokenUnit(unit)
	if !ok {
		return 0, fmt.Errorf("invalid tokens %q: unknown unit %q (use K, M, G or T, optionally followed by T or T/s: \"8K\", \"1600MT/s\")", s, unit)
	}
	return num * scale, nil
}

// UnmarshalYAML reads tokens with or without units.
func (t *Tokens) UnmarshalYAML(n *yaml.Node) error {
	v, err := scalarValue(n, "a number of tokens")
	if err != nil {
		return err
	}
	f, err := ParseTokens(v)
	if err != nil {
		return scalarError(n, err)
	}
	*t = Tokens(f)
	return nil
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

// String formats the amount for messages: a plain number below a million
// ("8000", "2.5"), else millions with up to three decimals ("1600M",
// "6.84M"), as the Pulsar paper counts (MT/s).
func (t Tokens) String() string { return FormatTokens(float64(t)) }

// FormatTokens formats an amount of tokens as Tokens.String does.
func FormatTokens(v float64) string {
	if math.Abs(v) < 1e6 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return trimFloat(v/1e6) + "M"
}
