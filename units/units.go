// Package units holds quantities with units as operators write them and as
// Bulkhead holds them: rates in bits/s ("450Mbps", "1Gbps"), sizes in bytes
// ("64KB", "10MiB"), amounts or rates of tokens ("8K", "1600MT/s") and
// durations ("30s", "1ms"); their parsers and formatters; and their YAML
// (scenarios, docs/scenarios.md) and JSON (APIs) encodings. In both
// encodings a quantity is read from a string with units or a plain number
// of its base unit, and written in YAML with the largest exact unit, in
// JSON as a plain number of its base unit.
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rate is a rate in bits per second, written with units. See ParseRate.
type Rate float64

// Bytes is a size in bytes, written as 1500, "64KB", "1MB", "10MiB". See
// ParseBytes.
type Bytes float64

// Tokens is an amount (or rate) of tokens, written 8000, "8K", "1.6M",
// "1600MT" or "1600MT/s" (powers of 1000). See ParseTokens.
type Tokens float64

// Duration is a time.Duration written as "30s", "1ms". See ParseDuration.
type Duration time.Duration

// rateUnit maps a rate unit to bits/s.
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

// parseQuantity parses a number with a unit that scale maps to the base
// unit; what names the quantity in errors, want says what a good value
// looks like and known lists the units.
func parseQuantity(s, what string, scale func(string) (float64, bool), want, known string) (float64, error) {
	num, unit, err := splitQuantity(s)
	if errors.Is(err, errNegative) {
		return 0, fmt.Errorf("invalid %s %q: %w", what, s, err)
	}
	if err != nil {
		return 0, fmt.Errorf("invalid %s %q: want %s", what, s, want)
	}
	f, ok := scale(unit)
	if !ok {
		return 0, fmt.Errorf("invalid %s %q: unknown unit %q (use %s)", what, s, unit, known)
	}
	return num * f, nil
}

// ParseRate parses a rate such as "450Mbps", "1Gbps", "10Kbps", "1.5G",
// "100M" or "2500" (bits/s) into bits per second. Units are
// case-insensitive: bps, Kbps, Mbps, Gbps, Tbps or K, M, G, T (powers of
// 1000); a space between number and unit is allowed. Negative rates are
// rejected.
func ParseRate(s string) (float64, error) {
	return parseQuantity(s, "rate", rateUnit,
		`a number with a unit such as "450Mbps" or "1Gbps"`, "bps, Kbps, Mbps, Gbps, Tbps")
}

// ParseBytes parses a size such as 1500, "64KB" (64000), "64KiB" (65536),
// "1MB" or "10MiB" into bytes. Units are case-insensitive: B, KB, MB, GB, TB
// (and K, M, G, T) are powers of 1000, KiB, MiB, GiB, TiB powers of 1024.
func ParseBytes(s string) (float64, error) {
	return parseQuantity(s, "size", byteUnit,
		`a number of bytes with an optional unit such as "64KB" or "10MiB"`, "B, KB, MB, GB, KiB, MiB, GiB")
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

// String formats the rate for people, as FormatRate.
func (r Rate) String() string { return FormatRate(float64(r)) }

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

// String formats the duration as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

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
	return parseQuantity(s, "tokens", tokenUnit,
		`a number with an optional unit such as "8K", "1.6M" or "1600MT/s"`,
		`K, M, G or T, optionally followed by T or T/s: "8K", "1600MT/s"`)
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
