package api

import "strings"

// Action is what an apply did to one object.
type Action string

// Actions, in kubectl's words.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
)

// Result is one object's outcome of an apply.
type Result struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Action Action `json:"action"`
}

// ApplyResult is the answer to an apply: the objects as stored (placed
// VMs carry their hosts) and what happened to each.
type ApplyResult struct {
	Objects  []Object `json:"objects"`
	Results  []Result `json:"results"`
	Revision int64    `json:"revision,omitempty"`
	DryRun   bool     `json:"dryRun,omitempty"`
}

// ObjectList is a list of objects: the body of an apply, and the answer
// to a list.
type ObjectList struct {
	Objects []Object `json:"objects"`
}

// Problem is the body of every error answer of the operator API.
type Problem struct {
	Error    string        `json:"error"`
	Problems []ProblemItem `json:"problems,omitempty"`
	// Leader is the leading controller's API URL, when a follower
	// refuses a write (421).
	Leader string `json:"leader,omitempty"`
}

// ProblemItem is one located problem.
type ProblemItem struct {
	Object  string `json:"object,omitempty"`
	Line    int    `json:"line,omitempty"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// Plural is a kind's path segment in the API ("tenants").
func Plural(kind string) string { return strings.ToLower(kind) + "s" }
