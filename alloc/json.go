package alloc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// JSON forms for `bulkhead alloc`.
//
// Rate (weighted max-min) problem:
//
//	{"kind": "rate",
//	 "resources": [{"id": "l1", "capacity": 1000, "classes": {"A": 3, "B": 1}}],
//	 "flows": [{"id": "f1", "path": ["l1"], "demand": 500, "weight": 1, "floor": 0, "class": "A"}]}
//
// classes, class, demand (absent = unbounded), weight (absent = 1) and floor
// (absent = 0) are optional; path entries name resources (coefficient 1).
// Answer: {"rates": {"f1": 500}}.
//
// Vector problem (DRF family):
//
//	{"kind": "vector", "mechanism": "drf" | "hdrf" | "firstfit",
//	 "resources": [{"id": "r1", "capacity": 10}],
//	 "flows": [{"id": "f1", "demand": {"r1": 4}, "weight": 1, "group": "tenantA"}],
//	 "group_weights": {"tenantA": 2}}
//
// weight (absent = 1), group and group_weights (hdrf only; see HDRF) are
// optional. Answer: {"allocations": {"f1": {"r1": 4}}}, x·demand for every
// resource the flow lists.
//
// Unknown fields, unknown kinds or mechanisms, unknown resources, trailing
// data, a key given twice in one object (encoding/json would keep the last)
// and strings that are not valid Unicode (invalid UTF-8 or unpaired
// surrogate escapes, which encoding/json would rewrite to U+FFFD) are
// errors; input over MaxJSONBytes (16 MiB) is refused before it is
// decoded. Every error names the offending field by its JSON path (e.g.
// flows[2].path[1]: unknown resource "l9"). Numbers in the
// answer are rounded to 10 significant digits, and values below 1e-9 of the
// largest finite capacity are written as 0. Map keys come out sorted.

type jsonProblem struct {
	Kind         string          `json:"kind"`
	Mechanism    *string         `json:"mechanism"`
	Resources    json.RawMessage `json:"resources"`
	Flows        json.RawMessage `json:"flows"`
	GroupWeights json.RawMessage `json:"group_weights"`
}

type jsonRateResource struct {
	ID       string             `json:"id"`
	Capacity *float64           `json:"capacity"`
	Classes  map[string]float64 `json:"classes"`
}

type jsonRateFlow struct {
	ID     string   `json:"id"`
	Path   []string `json:"path"`
	Demand *float64 `json:"demand"`
	Weight *float64 `json:"weight"`
	Floor  *float64 `json:"floor"`
	Class  string   `json:"class"`
}

type jsonVectorResource struct {
	ID       string   `json:"id"`
	Capacity *float64 `json:"capacity"`
}

type jsonVectorFlow struct {
	ID     string             `json:"id"`
	Demand map[string]float64 `json:"demand"`
	Weight *float64           `json:"weight"`
	Group  string             `json:"group"`
}

// pathError is an input error located by its JSON path.
type pathError struct {
	path string
	msg  string
	err  error // underlying error, if any
}

func (e *pathError) Unwrap() error { return e.err }

func (e *pathError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

func perr(path, format string, args ...any) error {
	return &pathError{path: path, msg: fmt.Sprintf(format, args...)}
}

// SolveJSON reads one problem in the JSON form above from r, solves it and
// writes the answer to w (one JSON object and a newline). On error nothing
// is written. Input over MaxJSONBytes is refused; SolveJSONLimit takes
// another bound.
func SolveJSON(r io.Reader, w io.Writer) error {
	return SolveJSONLimit(r, w, MaxJSONBytes)
}

// SolveJSONLimit is SolveJSON with input refused over limit bytes instead
// of MaxJSONBytes (`bulkhead alloc --max-input`). Peak memory grows with
// the input: about 6 bytes per input byte for a problem in the plain form
// (jsonfast.go; 144 MB of DRF problem: 0.85 GB), up to 16 for others.
func SolveJSONLimit(r io.Reader, w io.Writer, limit int64) error {
	if limit < 1 {
		return fmt.Errorf("alloc: input limit %d: want at least 1 byte", limit)
	}
	out, err := solveJSON(r, limit)
	if err != nil {
		return fmt.Errorf("alloc: %w", err)
	}
	_, err = w.Write(out)
	return err
}

// solveJSON answers from the fast path when it accepts the input, from
// the strict path otherwise (every error comes from the strict path).
func solveJSON(r io.Reader, limit int64) ([]byte, error) {
	data, err := readBounded(r, limit)
	if err != nil {
		return nil, err
	}
	if out, ok := solveJSONFast(data); ok {
		return out, nil
	}
	return solveJSONStrict(data)
}

// solveJSONStrict is the reference reading of the input: every check of
// the JSON form above with errors located by their JSON path, through
// encoding/json; the answer is encoded from maps (sorted keys).
func solveJSONStrict(data []byte) ([]byte, error) {
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var top jsonProblem
	if err := dec.Decode(&top); err != nil {
		return nil, decodeError("", err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, perr("", "trailing data after the problem")
	}
	if top.Resources == nil || string(top.Resources) == "null" {
		return nil, perr("resources", "missing")
	}
	if top.Flows == nil || string(top.Flows) == "null" {
		return nil, perr("flows", "missing")
	}
	switch top.Kind {
	case "rate":
		if top.Mechanism != nil {
			return nil, perr("mechanism", "not used by kind \"rate\"")
		}
		if top.GroupWeights != nil {
			return nil, perr("group_weights", "not used by kind \"rate\"")
		}
		return solveRateJSON(&top)
	case "vector":
		return solveVectorJSON(&top)
	case "":
		return nil, perr("kind", "missing (want \"rate\" or \"vector\")")
	default:
		return nil, perr("kind", "unknown kind %q (want \"rate\" or \"vector\")", top.Kind)
	}
}

// decodeStrict decodes raw into v, rejecting unknown fields and trailing
// data, with errors located under path.
func decodeStrict(path string, raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(path, err)
	}
	return nil
}

// decodeList decodes a JSON array element by element so that errors carry
// the element's index.
func decodeList[T any](path string, raw json.RawMessage) ([]T, error) {
	var elems []json.RawMessage
	if err := decodeStrict(path, raw, &elems); err != nil {
		return nil, err
	}
	out := make([]T, len(elems))
	for i, e := range elems {
		if err := decodeStrict(fmt.Sprintf("%s[%d]", path, i), e, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}

func decodeError(path string, err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return perr(joinPath(path, te.Field), "expected %s, got %s", jsonType(te.Type.String()), te.Value)
	case errors.As(err, &se):
		return perr(path, "invalid JSON at byte %d: %v", se.Offset, err)
	case errors.Is(err, io.EOF):
		return perr(path, "empty input")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return perr(path, "truncated JSON")
	}
	return &pathError{path: path, msg: strings.TrimPrefix(err.Error(), "json: "), err: err}
}

func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map"), strings.HasPrefix(goType, "alloc.json"), strings.HasPrefix(goType, "struct"):
		return "object"
	case strings.HasPrefix(goType, "[]"):
		return "array"
	case goType == "string":
		return "string"
	case strings.Contains(goType, "float"), strings.Contains(goType, "int"):
		return "number"
	}
	return goType
}

// fromCoreError locates a core validation error in the JSON input.
func fromCoreError(err error, resIDs []string, vector bool) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.Field == "group_weights":
		return perr("group_weights."+e.ID, "%s", e.Msg)
	case e.Flow >= 0:
		field := e.Field
		switch {
		case vector && e.Field == "demand" && e.Resource >= 0:
			field = "demand." + resIDs[e.Resource]
		case e.Field == "resource" || e.Field == "coef":
			field = "path"
			if e.Use >= 0 {
				field = fmt.Sprintf("path[%d]", e.Use)
			}
		}
		return perr(fmt.Sprintf("flows[%d].%s", e.Flow, field), "%s", e.Msg)
	case e.Resource >= 0:
		return perr(joinPath(fmt.Sprintf("resources[%d]", e.Resource), e.Field), "%s", e.Msg)
	}
	return perr("", "%s", e.Msg)
}

func solveRateJSON(top *jsonProblem) ([]byte, error) {
	jr, err := decodeList[jsonRateResource]("resources", top.Resources)
	if err != nil {
		return nil, err
	}
	jf, err := decodeList[jsonRateFlow]("flows", top.Flows)
	if err != nil {
		return nil, err
	}
	p := &Problem{Resources: make([]Resource, len(jr)), Flows: make([]Flow, len(jf))}
	index := make(map[string]int, len(jr))
	ids := make([]string, len(jr))
	for i, r := range jr {
		if r.Capacity == nil {
			return nil, perr(fmt.Sprintf("resources[%d].capacity", i), "missing")
		}
		p.Resources[i] = Resource{ID: r.ID, Capacity: *r.Capacity, Classes: r.Classes}
		if _, dup := index[r.ID]; !dup {
			index[r.ID] = i
		}
		ids[i] = r.ID
	}
	if err := validateResources(p.Resources, make(map[string]int), false); err != nil {
		return nil, fromCoreError(err, ids, false)
	}
	for i, f := range jf {
		fl := Flow{ID: f.ID, Demand: Unbounded, Weight: 1, Class: f.Class}
		if f.Demand != nil {
			fl.Demand = *f.Demand
		}
		if f.Weight != nil {
			fl.Weight = *f.Weight
		}
		if f.Floor != nil {
			fl.Floor = *f.Floor
		}
		for j, name := range f.Path {
			r, ok := index[name]
			if !ok {
				return nil, perr(fmt.Sprintf("flows[%d].path[%d]", i, j), "unknown resource %q", name)
			}
			fl.Uses = append(fl.Uses, Use{Resource: r, Coef: 1})
		}
		p.Flows[i] = fl
	}
	rates, err := MaxMin(p)
	if err != nil {
		return nil, fromCoreError(err, ids, false)
	}
	scale := capScale(p.Resources)
	out := struct {
		Rates map[string]float64 `json:"rates"`
	}{Rates: make(map[string]float64, len(rates))}
	for i, x := range rates {
		out.Rates[p.Flows[i].ID] = roundOut(x, scale)
	}
	return marshalLine(out)
}

func solveVectorJSON(top *jsonProblem) ([]byte, error) {
	if top.Mechanism == nil {
		return nil, perr("mechanism", "missing (want \"drf\", \"hdrf\" or \"firstfit\")")
	}
	var solve func(*VectorProblem) ([]float64, error)
	switch *top.Mechanism {
	case "drf":
		solve = DRF
	case "hdrf":
		solve = HDRF
	case "firstfit":
		solve = FirstFit
	default:
		return nil, perr("mechanism", "unknown mechanism %q (want \"drf\", \"hdrf\" or \"firstfit\")", *top.Mechanism)
	}
	jr, err := decodeList[jsonVectorResource]("resources", top.Resources)
	if err != nil {
		return nil, err
	}
	jf, err := decodeList[jsonVectorFlow]("flows", top.Flows)
	if err != nil {
		return nil, err
	}
	p := &VectorProblem{Resources: make([]Resource, len(jr)), Flows: make([]VectorFlow, len(jf))}
	if top.GroupWeights != nil {
		if *top.Mechanism != "hdrf" {
			return nil, perr("group_weights", "only used by mechanism \"hdrf\"")
		}
		if err := decodeStrict("group_weights", top.GroupWeights, &p.GroupWeights); err != nil {
			return nil, err
		}
	}
	index := make(map[string]int, len(jr))
	ids := make([]string, len(jr))
	for i, r := range jr {
		if r.Capacity == nil {
			return nil, perr(fmt.Sprintf("resources[%d].capacity", i), "missing")
		}
		p.Resources[i] = Resource{ID: r.ID, Capacity: *r.Capacity}
		if _, dup := index[r.ID]; !dup {
			index[r.ID] = i
		}
		ids[i] = r.ID
	}
	if err := validateResources(p.Resources, make(map[string]int), true); err != nil {
		return nil, fromCoreError(err, ids, true)
	}
	// Demands as sparse lists in resource order (deterministic).
	for i, f := range jf {
		vf := VectorFlow{ID: f.ID, Weight: 1, Group: f.Group, Sparse: []Use{}}
		if f.Weight != nil {
			vf.Weight = *f.Weight
		}
		for name, d := range f.Demand {
			r, ok := index[name]
			if !ok {
				return nil, perr(fmt.Sprintf("flows[%d].demand.%s", i, name), "unknown resource %q", name)
			}
			if math.IsNaN(d) || d < 0 {
				return nil, perr(fmt.Sprintf("flows[%d].demand.%s", i, name), "must be ≥ 0, got %s", num(d))
			}
			if d > 0 {
				vf.Sparse = append(vf.Sparse, Use{Resource: r, Coef: d})
			}
		}
		sortUses(vf.Sparse)
		p.Flows[i] = vf
	}
	x, err := solve(p)
	if err != nil {
		return nil, fromCoreError(err, ids, true)
	}
	scale := capScale(p.Resources)
	out := struct {
		Allocations map[string]map[string]float64 `json:"allocations"`
	}{Allocations: make(map[string]map[string]float64, len(x))}
	for i, f := range jf {
		a := make(map[string]float64, len(f.Demand))
		for name, d := range f.Demand {
			a[name] = roundOut(x[i]*d, scale)
		}
		out.Allocations[f.ID] = a
	}
	return marshalLine(out)
}

func sortUses(u []Use) {
	for i := 1; i < len(u); i++ {
		for j := i; j > 0 && u[j].Resource < u[j-1].Resource; j-- {
			u[j], u[j-1] = u[j-1], u[j]
		}
	}
}

// capScale is the largest finite capacity (1 if none).
func capScale(rs []Resource) float64 {
	s := 0.0
	for _, r := range rs {
		if !math.IsInf(r.Capacity, 1) {
			s = max(s, r.Capacity)
		}
	}
	if s == 0 {
		return 1
	}
	return s
}

// roundOut rounds v to 10 significant digits and snaps values below 1e-9
// of scale to 0 (rounding noise of the solvers).
func roundOut(v, scale float64) float64 {
	if math.Abs(v) < 1e-9*scale {
		return 0
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 10, 64), 64)
	if err != nil {
		return v
	}
	return r
}

func marshalLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
