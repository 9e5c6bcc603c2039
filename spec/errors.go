package spec

import "github.com/bulkhead-dc/bulkhead/model"

// FieldError is one problem with a scenario, located by the file, the
// line (decoding errors) and the path of the field in YAML terms:
//
//	scenario.yaml: tenants[1].vms[3].server: unknown server "s99"
//
// It now lives in package model (model.FieldError).
type FieldError = model.FieldError

// FieldErrors returns every *FieldError in err, in order
// (model.FieldErrors).
func FieldErrors(err error) []*FieldError { return model.FieldErrors(err) }

// problems collects the FieldErrors of one scenario.
type problems = model.Problems
