package spec

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Params are a mechanism's parameters as written under mechanism.params.
// The typed getters return the default when a parameter is absent and a
// *FieldError such as
//
//	mechanism.params.alpha: expected a number, got "x"
//
// when it has the wrong type. A mechanism reads its parameters with them and
// calls Check with the names it knows, to catch typos.
type Params map[string]any

func (p Params) typeError(name, want string, v any) error {
	got := fmt.Sprintf("%v", v)
	if s, ok := v.(string); ok {
		got = fmt.Sprintf("%q", s)
	}
	return &FieldError{Path: "mechanism.params." + name, Msg: fmt.Sprintf("expected %s, got %s", want, got)}
}

// Float returns the number name, or def if absent.
func (p Params) Float(name string, def float64) (float64, error) {
	v, ok := p[name]
	if !ok {
		return def, nil
	}
	if f, ok := toFloat(v); ok {
		return f, nil
	}
	return 0, p.typeError(name, "a number", v)
}

// Int returns the integer name, or def if absent.
func (p Params) Int(name string, def int) (int, error) {
	v, ok := p[name]
	if !ok {
		return def, nil
	}
	if f, ok := toFloat(v); ok && f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32 {
		return int(f), nil
	}
	return 0, p.typeError(name, "an integer", v)
}

// Bool returns the boolean name, or def if absent.
func (p Params) Bool(name string, def bool) (bool, error) {
	v, ok := p[name]
	if !ok {
		return def, nil
	}
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return false, p.typeError(name, "true or false", v)
}

// String returns the string name, or def if absent.
func (p Params) String(name string, def string) (string, error) {
	v, ok := p[name]
	if !ok {
		return def, nil
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	return "", p.typeError(name, "a string", v)
}

// Duration returns the duration name ("60ms"), or def if absent.
func (p Params) Duration(name string, def time.Duration) (time.Duration, error) {
	v, ok := p[name]
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case string:
		if d, err := ParseDuration(x); err == nil {
			return d, nil
		}
	case int:
		if x == 0 {
			return 0, nil
		}
	}
	return 0, p.typeError(name, `a duration such as "60ms"`, v)
}

// Rate returns the rate name in bits/s ("450Mbps", or a plain number of
// bits/s), or def if absent.
func (p Params) Rate(name string, def float64) (float64, error) {
	v, ok := p[name]
	if !ok {
		return def, nil
	}
	if f, ok := toFloat(v); ok && f >= 0 {
		return f, nil
	}
	if s, ok := v.(string); ok {
		if r, err := ParseRate(s); err == nil {
			return r, nil
		}
	}
	return 0, p.typeError(name, `a rate such as "450Mbps"`, v)
}

// Tokens returns the amount (or rate) of tokens name ("1600MT/s", "8K", or
// a plain number), or def if absent.
func (p Params) Tokens(name string, def float64) (float64, error) {
	v, ok := p[name]
	if !ok {
		return def, nil
	}
	if f, ok := toFloat(v); ok && f >= 0 {
		return f, nil
	}
	if s, ok := v.(string); ok {
		if t, err := ParseTokens(s); err == nil {
			return t, nil
		}
	}
	return 0, p.typeError(name, `an amount of tokens such as "1600MT/s"`, v)
}

// Check returns a *FieldError for every parameter not in known (joined),
// or nil.
func (p Params) Check(known ...string) error {
	var bad []string
	for name := range p {
		found := false
		for _, k := range known {
			found = found || k == name
		}
		if !found {
			bad = append(bad, name)
		}
	}
	sort.Strings(bad)
	pr := &problems{}
	for _, name := range bad {
		if len(known) == 0 {
			pr.Add("mechanism.params."+name, "unknown parameter (the mechanism takes none)")
		} else {
			pr.Add("mechanism.params."+name, "unknown parameter (known: %s)", strings.Join(known, ", "))
		}
	}
	return pr.Err()
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	return 0, false
}

// ParamReader reads parameters into a configuration's fields, keeping
// each field's current value as its default and collecting every problem
// instead of stopping at the first (Err joins them).
type ParamReader struct {
	p    Params
	errs []error
}

// Reader returns a ParamReader over the parameters.
func (p Params) Reader() *ParamReader { return &ParamReader{p: p} }

func read[T any](r *ParamReader, dst *T, name string, get func(string, T) (T, error)) {
	v, err := get(name, *dst)
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	*dst = v
}

// Float reads the number name into dst.
func (r *ParamReader) Float(dst *float64, name string) { read(r, dst, name, r.p.Float) }

// Int reads the integer name into dst.
func (r *ParamReader) Int(dst *int, name string) { read(r, dst, name, r.p.Int) }

// Bool reads the boolean name into dst.
func (r *ParamReader) Bool(dst *bool, name string) { read(r, dst, name, r.p.Bool) }

// String reads the string name into dst.
func (r *ParamReader) String(dst *string, name string) { read(r, dst, name, r.p.String) }

// Duration reads the duration name into dst.
func (r *ParamReader) Duration(dst *time.Duration, name string) { read(r, dst, name, r.p.Duration) }

// Rate reads the rate name (bits/s) into dst.
func (r *ParamReader) Rate(dst *float64, name string) { read(r, dst, name, r.p.Rate) }

// Tokens reads the token rate name into dst.
func (r *ParamReader) Tokens(dst *float64, name string) { read(r, dst, name, r.p.Tokens) }

// Add records a problem found otherwise (a nested configuration's).
func (r *ParamReader) Add(err error) {
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

// Err returns every problem met, joined, or nil.
func (r *ParamReader) Err() error { return errors.Join(r.errs...) }

// ParamErrors collects the problems a mechanism finds in its parameters'
// values, as *FieldError values named mechanism.params.NAME.
type ParamErrors struct{ errs []error }

// Bad records that parameter name's value is wrong, and why.
func (e *ParamErrors) Bad(name, format string, args ...any) {
	e.errs = append(e.errs, &FieldError{Path: "mechanism.params." + name, Msg: fmt.Sprintf(format, args...)})
}

// Add records a problem found otherwise (a nested configuration's).
func (e *ParamErrors) Add(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

// Err returns every problem recorded, joined, or nil.
func (e *ParamErrors) Err() error { return errors.Join(e.errs...) }
