package model

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FieldError is one problem with a declaration (a model, a scenario),
// located by the file and the path of the field in YAML and JSON terms
// (field names, [i] for list items):
//
//	scenario.yaml: tenants[1].vms[3].server: unknown server "s99"
//
// Errors found while decoding also carry the line:
//
//	scenario.yaml:12: tenants[0].gaurantee: unknown field "gaurantee"
//
// File, Line and Path are left out of the message when empty or zero.
type FieldError struct {
	File string // the path the declaration was read from, as given
	Line int    // 1-based line, when known (decoding errors)
	Path string // e.g. "tenants[1].vms[3].server"
	Msg  string
}

// Error formats the problem as "file[:line]: path: message".
func (e *FieldError) Error() string {
	s := ""
	if e.File != "" {
		s = e.File
		if e.Line > 0 {
			s += ":" + strconv.Itoa(e.Line)
		}
		s += ": "
	} else if e.Line > 0 {
		s = "line " + strconv.Itoa(e.Line) + ": "
	}
	if e.Path != "" {
		s += e.Path + ": "
	}
	return s + e.Msg
}

// FieldErrors returns every *FieldError in err (which may be a tree of
// errors.Join and wrapping), in order.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if fe, ok := e.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// Problems collects the problems found in one declaration, as
// *FieldErrors, in the order found.
type Problems struct {
	// File locates every problem added (FieldError.File); empty for a
	// model built in code.
	File string
	errs []error
}

// Add records a problem with the field at path.
func (p *Problems) Add(path, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{File: p.File, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// Len is the number of problems recorded.
func (p *Problems) Len() int { return len(p.errs) }

// Err returns the problems joined with errors.Join, nil if there are none.
func (p *Problems) Err() error { return errors.Join(p.errs...) }

// OrList joins the choices a message offers as "a, b or c" ("none" for
// none).
func OrList(names []string) string {
	switch len(names) {
	case 0:
		return "none"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
