package mechtest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// line is one input line of a command, split into fields, with its
// position in the script for error messages.
type line struct {
	pos    string   // "file:line"
	text   string   // the whole line, trimmed
	fields []string // whitespace-separated
}

// errorf returns an error naming the line's position and text.
func (l *line) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s (in %q)", l.pos, fmt.Sprintf(format, args...), l.text)
}

// inputLines splits a command's input into lines, skipping blank lines and
// comments (#). Positions count from the directive's line pos ("file:N"):
// the input starts on line N+1.
func inputLines(pos, input string) []line {
	file, n := pos, -1
	if i := strings.LastIndexByte(pos, ':'); i >= 0 {
		if k, err := strconv.Atoi(pos[i+1:]); err == nil {
			file, n = pos[:i], k
		}
	}
	var out []line
	for i, s := range strings.Split(input, "\n") {
		s = strings.TrimSpace(s)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		p := pos
		if n >= 0 {
			p = fmt.Sprintf("%s:%d", file, n+1+i)
		}
		out = append(out, line{pos: p, text: s, fields: strings.Fields(s)})
	}
	return out
}

// kv holds the key=value (or bare flag) fields of a line; every key must
// be consumed, so that a misspelt key fails the test.
type kv struct {
	l    *line
	vals map[string]string
	used map[string]bool
	err  error
}

// parseKV reads fields as key=value or bare keys (value ""). A key given
// twice is an error.
func parseKV(l *line, fields []string) *kv {
	k := &kv{l: l, vals: map[string]string{}, used: map[string]bool{}}
	for _, f := range fields {
		key, val, _ := strings.Cut(f, "=")
		if key == "" {
			k.fail("empty key in %q", f)
			continue
		}
		if _, dup := k.vals[key]; dup {
			k.fail("%s given twice", key)
			continue
		}
		k.vals[key] = val
	}
	return k
}

func (k *kv) fail(format string, args ...any) {
	if k.err == nil {
		k.err = k.l.errorf(format, args...)
	}
}

func (k *kv) has(key string) bool {
	_, ok := k.vals[key]
	return ok
}

// str returns the value of key, def if absent.
func (k *kv) str(key, def string) string {
	v, ok := k.vals[key]
	if !ok {
		return def
	}
	k.used[key] = true
	if v == "" {
		k.fail("%s needs a value", key)
	}
	return v
}

// rate returns key as a rate in bits/s (see parseRate).
func (k *kv) rate(key string, def float64) float64 {
	v, ok := k.vals[key]
	if !ok {
		return def
	}
	k.used[key] = true
	r, err := parseRate(v)
	if err != nil {
		k.fail("%s: %v", key, err)
	}
	return r
}

// num returns key as a number (see parseNum).
func (k *kv) num(key string, def float64) float64 {
	v, ok := k.vals[key]
	if !ok {
		return def
	}
	k.used[key] = true
	r, err := parseNum(v)
	if err != nil {
		k.fail("%s: %v", key, err)
	}
	return r
}

// flag returns a boolean key: bare ("bound"), or =true / =false.
func (k *kv) flag(key string) bool {
	v, ok := k.vals[key]
	if !ok {
		return false
	}
	k.used[key] = true
	switch v {
	case "", "true":
		return true
	case "false":
		return false
	}
	k.fail("%s: expected true or false, got %q", key, v)
	return false
}

// dur returns key as a duration ("15ms").
func (k *kv) dur(key string, def time.Duration) time.Duration {
	v, ok := k.vals[key]
	if !ok {
		return def
	}
	k.used[key] = true
	d, err := time.ParseDuration(v)
	if err != nil {
		k.fail("%s: %v", key, err)
	}
	return d
}

// done reports the first error, or a key that was not consumed.
func (k *kv) done() error {
	if k.err != nil {
		return k.err
	}
	var unknown []string
	for key := range k.vals {
		if !k.used[key] {
			unknown = append(unknown, key)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return k.l.errorf("unknown key %s", strings.Join(unknown, ", "))
	}
	return nil
}

// rateUnits are the suffixes parseRate accepts, longest first.
var rateUnits = []struct {
	suffix string
	mult   float64
}{
	{"Tbps", 1e12}, {"Gbps", 1e9}, {"Mbps", 1e6}, {"Kbps", 1e3}, {"kbps", 1e3}, {"bps", 1},
}

// parseRate reads a rate in bits/s: "450Mbps", "1Gbps", "100Kbps", "12bps",
// a plain number of bits/s ("5e6"), or "inf" (mech.Unlimited).
func parseRate(s string) (float64, error) {
	if s == "inf" {
		return mech.Unlimited, nil
	}
	mult := 1.0
	num := s
	for _, u := range rateUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("expected a rate such as 450Mbps, 5e6 or inf, got %q", s)
	}
	return v * mult, nil
}

// parseNum reads a number with an optional SI suffix (k or K, M, G: "125M"
// is 125e6), or "inf".
func parseNum(s string) (float64, error) {
	if s == "inf" {
		return math.Inf(1), nil
	}
	mult := 1.0
	num := s
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		num, mult = s[:len(s)-1], 1e3
	case strings.HasSuffix(s, "M"):
		num, mult = s[:len(s)-1], 1e6
	case strings.HasSuffix(s, "G"):
		num, mult = s[:len(s)-1], 1e9
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("expected a number such as 1000, 2.5e3, 125M or inf, got %q", s)
	}
	return v * mult, nil
}

// parseNums reads a comma-separated vector of numbers ("100,400,50").
func parseNums(s string) ([]float64, error) {
	parts := strings.Split(s, ",")
	out := make([]float64, len(parts))
	for i, p := range parts {
		v, err := parseNum(p)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// parsePair reads "src->dst".
func parsePair(s string) (src, dst string, err error) {
	src, dst, ok := strings.Cut(s, "->")
	if !ok || src == "" || dst == "" || strings.Contains(dst, "->") {
		return "", "", fmt.Errorf("expected a pair such as a1->b1, got %q", s)
	}
	return src, dst, nil
}

// paramValue turns a mechanism parameter written on a command line into
// the value a scenario's YAML would give: true/false, a number, or a
// string ("60ms", "5Mbps", "receiver").
func paramValue(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	if i, err := strconv.Atoi(s); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	return s
}
