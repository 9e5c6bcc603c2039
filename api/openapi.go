package api

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.yaml
var openapi []byte

// OpenAPI returns the schema of the objects and of the controller's
// operator API (api/openapi.yaml): the controller serves it at
// /api/v1/openapi.yaml, and its tests check every request and response
// against it.
func OpenAPI() []byte { return bytes.Clone(openapi) }
