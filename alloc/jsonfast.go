package alloc

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The fast path of SolveJSON.
//
// solveJSONStrict (json.go) is the reference: checkJSON's walk of every
// token, encoding/json's decoding of every list element by element, maps
// for the answer that encoding/json sorts while it encodes. On a large
// problem it spends most of its time there rather than in the solver.
//
// solveJSONFast reads the same input in one pass with a streaming
// tokenizer (jsontext, which itself refuses duplicate keys, invalid UTF-8
// and unpaired surrogate escapes, as checkJSON does), builds the core
// problem directly, and writes the answer in order into one buffer: flows
// sorted by ID (already in order for generated problems, so no sort at
// all), each vector flow's resources by name, numbers and strings
// formatted exactly as encoding/json formats them. It accepts only the
// plain form of the input (the exact field names, kind and resources
// before flows, no nulls, numbers that parse) and declines anything else
// — including every input the strict path would refuse, and any
// validation or solver error — so that the strict path answers it, with
// its own errors. An answer of the fast path is byte for byte the strict
// path's (TestSolveJSONFastSame).

// fastDecoder walks one problem with a jsontext.Decoder.
type fastDecoder struct {
	dec     *jsontext.Decoder
	scratch []byte // unquoted strings with escapes
	key     []byte // the current member name of a map
}

// value reads the next value, which must be of kind k.
func (d *fastDecoder) value(k jsontext.Kind) (jsontext.Value, bool) {
	v, err := d.dec.ReadValue()
	if err != nil || v.Kind() != k {
		return nil, false
	}
	return v, true
}

// str reads a string value and returns its unquoted bytes, valid until
// the next read.
func (d *fastDecoder) str() ([]byte, bool) {
	v, ok := d.value('"')
	if !ok {
		return nil, false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], true
	}
	var err error
	d.scratch, err = jsontext.AppendUnquote(d.scratch[:0], v)
	return d.scratch, err == nil
}

// num reads a number as encoding/json reads it into a float64.
func (d *fastDecoder) num() (float64, bool) {
	v, ok := d.value('0')
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}

// delim reads the next token, which must be the delimiter k.
func (d *fastDecoder) delim(k jsontext.Kind) bool {
	t, err := d.dec.ReadToken()
	return err == nil && t.Kind() == k
}

// next says whether the array or object being read has another element
// (and reads its end if not).
func (d *fastDecoder) next(end jsontext.Kind) (more, ok bool) {
	if d.dec.PeekKind() == end {
		return false, d.delim(end)
	}
	return true, true
}

// name reads an object member's name (quoted, escapes left as they are:
// a name spelled with escapes is not one of ours and is declined).
func (d *fastDecoder) name() (jsontext.Value, bool) { return d.value('"') }

// array reads an array, calling elem to read each element.
func (d *fastDecoder) array(elem func() bool) bool {
	if !d.delim('[') {
		return false
	}
	for {
		more, ok := d.next(']')
		if !ok || !more {
			return ok
		}
		if !elem() {
			return false
		}
	}
}

// object reads an object, calling member with each member's name (see
// name) to read its value.
func (d *fastDecoder) object(member func(name jsontext.Value) bool) bool {
	if !d.delim('{') {
		return false
	}
	for {
		more, ok := d.next('}')
		if !ok || !more {
			return ok
		}
		name, ok := d.name()
		if !ok || !member(name) {
			return false
		}
	}
}

// strTo reads a string value into *dst.
func (d *fastDecoder) strTo(dst *string) bool {
	s, ok := d.str()
	if ok {
		*dst = string(s)
	}
	return ok
}

// numTo reads a number into *dst.
func (d *fastDecoder) numTo(dst *float64) bool {
	v, ok := d.num()
	if ok {
		*dst = v
	}
	return ok
}

// numMap reads an object of numbers, calling f for each member.
func (d *fastDecoder) numMap(f func(name []byte, v float64) bool) bool {
	if !d.delim('{') {
		return false
	}
	for {
		more, ok := d.next('}')
		if !ok || !more {
			return ok
		}
		name, ok := d.str()
		if !ok {
			return false
		}
		// name lives in the decoder's buffer, which the next read may
		// overwrite: keep a copy.
		d.key = append(d.key[:0], name...)
		v, ok := d.num()
		if !ok || !f(d.key, v) {
			return false
		}
	}
}

// fastEntry is one (resource, amount) of a vector flow's demand, in input
// order, zeros kept (the answer lists them).
type fastEntry struct {
	res int
	amt float64
}

// fastProblem is what the fast decoder builds.
type fastProblem struct {
	kind, mechanism string
	hasMechanism    bool
	hasResources    bool
	hasFlows        bool
	groupWeights    map[string]float64
	resources       []Resource
	index           map[string]int // resource ID → first index

	rateFlows []Flow
	uses      []Use // backing store of rateFlows' Uses
	useEnd    []int

	vecFlows []VectorFlow
	entries  []fastEntry // every vector flow's demand, in input order
	entryEnd []int
}

// push appends v, doubling the capacity when s is full (append grows
// large slices by 1.25×: four copies of a list of a million flows).
func push[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, max(len(s), 256))
	}
	return append(s, v)
}

func solveJSONFast(data []byte) ([]byte, bool) {
	d := &fastDecoder{dec: jsontext.NewDecoder(bytes.NewReader(data))}
	var fp fastProblem
	if !d.problem(&fp) {
		return nil, false
	}
	// Exactly one value: what follows must be the end of the input.
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return nil, false
	}
	if !fp.hasResources || !fp.hasFlows {
		return nil, false
	}
	switch fp.kind {
	case "rate":
		if fp.hasMechanism || fp.groupWeights != nil {
			return nil, false
		}
		return fp.solveRate()
	case "vector":
		return fp.solveVector()
	}
	return nil, false
}

func (d *fastDecoder) problem(fp *fastProblem) bool {
	return d.object(func(name jsontext.Value) bool {
		switch string(name) {
		case `"kind"`:
			return d.strTo(&fp.kind)
		case `"mechanism"`:
			fp.hasMechanism = true
			return d.strTo(&fp.mechanism)
		case `"group_weights"`:
			fp.groupWeights = map[string]float64{}
			return d.numMap(func(name []byte, v float64) bool {
				fp.groupWeights[string(name)] = v
				return true
			})
		case `"resources"`:
			if fp.hasResources || !d.resources(fp) {
				return false
			}
			fp.hasResources = true
			return true
		case `"flows"`:
			// The kind says how to read a flow, the resources what its
			// names mean: both must come first.
			if !fp.hasResources {
				return false
			}
			var ok bool
			switch fp.kind {
			case "rate":
				ok = d.rateFlows(fp)
			case "vector":
				ok = d.vectorFlows(fp)
			}
			fp.hasFlows = ok
			return ok
		default:
			return false
		}
	})
}

func (d *fastDecoder) resources(fp *fastProblem) bool {
	fp.index = make(map[string]int)
	return d.array(func() bool {
		var r Resource
		hasCap := false
		if !d.object(func(name jsontext.Value) bool {
			switch string(name) {
			case `"id"`:
				return d.strTo(&r.ID)
			case `"capacity"`:
				hasCap = true
				return d.numTo(&r.Capacity)
			case `"classes"`:
				if fp.kind != "rate" {
					return false
				}
				r.Classes = map[string]float64{}
				return d.numMap(func(name []byte, v float64) bool {
					r.Classes[string(name)] = v
					return true
				})
			default:
				return false
			}
		}) || !hasCap {
			return false
		}
		if _, dup := fp.index[r.ID]; !dup {
			fp.index[r.ID] = len(fp.resources)
		}
		fp.resources = push(fp.resources, r)
		return true
	})
}

func (d *fastDecoder) rateFlows(fp *fastProblem) bool {
	return d.array(func() bool {
		f := Flow{Demand: Unbounded, Weight: 1}
		if !d.object(func(name jsontext.Value) bool {
			switch string(name) {
			case `"id"`:
				return d.strTo(&f.ID)
			case `"path"`:
				return d.array(func() bool {
					s, ok := d.str()
					if !ok {
						return false
					}
					r, known := fp.index[string(s)]
					if !known {
						return false
					}
					fp.uses = push(fp.uses, Use{Resource: r, Coef: 1})
					return true
				})
			case `"demand"`:
				return d.numTo(&f.Demand)
			case `"weight"`:
				return d.numTo(&f.Weight)
			case `"floor"`:
				return d.numTo(&f.Floor)
			case `"class"`:
				return d.strTo(&f.Class)
			default:
				return false
			}
		}) {
			return false
		}
		fp.rateFlows = push(fp.rateFlows, f)
		fp.useEnd = push(fp.useEnd, len(fp.uses))
		return true
	})
}

func (d *fastDecoder) vectorFlows(fp *fastProblem) bool {
	return d.array(func() bool {
		f := VectorFlow{Weight: 1}
		if !d.object(func(name jsontext.Value) bool {
			switch string(name) {
			case `"id"`:
				return d.strTo(&f.ID)
			case `"demand"`:
				return d.numMap(func(name []byte, v float64) bool {
					r, known := fp.index[string(name)]
					if !known || math.IsNaN(v) || v < 0 {
						return false
					}
					fp.entries = push(fp.entries, fastEntry{res: r, amt: v})
					return true
				})
			case `"weight"`:
				return d.numTo(&f.Weight)
			case `"group"`:
				return d.strTo(&f.Group)
			default:
				return false
			}
		}) {
			return false
		}
		fp.vecFlows = push(fp.vecFlows, f)
		fp.entryEnd = push(fp.entryEnd, len(fp.entries))
		return true
	})
}

func (fp *fastProblem) solveRate() ([]byte, bool) {
	p := &Problem{Resources: fp.resources, Flows: fp.rateFlows}
	if p.Resources == nil {
		p.Resources = []Resource{}
	}
	if p.Flows == nil {
		p.Flows = []Flow{}
	}
	start := 0
	for i := range p.Flows {
		if end := fp.useEnd[i]; end > start {
			p.Flows[i].Uses = fp.uses[start:end:end]
			start = end
		}
	}
	rates, err := MaxMin(p)
	if err != nil {
		return nil, false
	}
	scale := capScale(p.Resources)
	order := idOrder(len(p.Flows), func(i int) string { return p.Flows[i].ID })
	b := make([]byte, 0, 16+32*len(p.Flows))
	b = append(b, `{"rates":{`...)
	ok := true
	for k, i := range order {
		if k > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, p.Flows[i].ID)
		b = append(b, ':')
		if b, ok = appendJSONFloat(b, roundOut(rates[i], scale)); !ok {
			return nil, false
		}
	}
	return append(b, "}}\n"...), true
}

func (fp *fastProblem) solveVector() ([]byte, bool) {
	var solve func(*VectorProblem) ([]float64, error)
	switch {
	case !fp.hasMechanism:
		return nil, false
	case fp.mechanism == "drf":
		solve = DRF
	case fp.mechanism == "hdrf":
		solve = HDRF
	case fp.mechanism == "firstfit":
		solve = FirstFit
	default:
		return nil, false
	}
	if fp.groupWeights != nil && fp.mechanism != "hdrf" {
		return nil, false
	}
	p := &VectorProblem{Resources: fp.resources, Flows: fp.vecFlows, GroupWeights: fp.groupWeights}
	if p.Resources == nil {
		p.Resources = []Resource{}
	}
	if p.Flows == nil {
		p.Flows = []VectorFlow{}
	}
	// Demands as sparse lists in resource order, zeros dropped, as
	// solveVectorJSON builds them.
	sparse := make([]Use, 0, len(fp.entries))
	start := 0
	for i := range p.Flows {
		end := fp.entryEnd[i]
		first := len(sparse)
		for _, e := range fp.entries[start:end] {
			if e.amt > 0 {
				sparse = append(sparse, Use{Resource: e.res, Coef: e.amt})
			}
		}
		p.Flows[i].Sparse = sparse[first:len(sparse):len(sparse)]
		sortUses(p.Flows[i].Sparse)
		start = end
	}
	x, err := solve(p)
	if err != nil {
		return nil, false
	}
	scale := capScale(p.Resources)
	order := idOrder(len(p.Flows), func(i int) string { return p.Flows[i].ID })
	b := make([]byte, 0, 24+len(fp.entries)*40)
	b = append(b, `{"allocations":{`...)
	var names []int // a flow's entries, by resource name
	ok := true
	for k, i := range order {
		if k > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, p.Flows[i].ID)
		b = append(b, ":{"...)
		lo := 0
		if i > 0 {
			lo = fp.entryEnd[i-1]
		}
		es := fp.entries[lo:fp.entryEnd[i]]
		names = names[:0]
		for j := range es {
			names = append(names, j)
		}
		for j := 1; j < len(names); j++ {
			for m := j; m > 0 && p.Resources[es[names[m]].res].ID < p.Resources[es[names[m-1]].res].ID; m-- {
				names[m], names[m-1] = names[m-1], names[m]
			}
		}
		for m, j := range names {
			if m > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p.Resources[es[j].res].ID)
			b = append(b, ':')
			if b, ok = appendJSONFloat(b, roundOut(x[i]*es[j].amt, scale)); !ok {
				return nil, false
			}
		}
		b = append(b, '}')
	}
	return append(b, "}}\n"...), true
}

// idOrder is the order of n flows by ID (byte order, as encoding/json
// sorts map keys): 0…n-1 when they are in order already.
func idOrder(n int, id func(int) string) []int {
	order := make([]int, n)
	sorted := true
	for i := range order {
		order[i] = i
		if i > 0 && id(i) < id(i-1) {
			sorted = false
		}
	}
	if !sorted {
		slices.SortFunc(order, func(a, b int) int { return strings.Compare(id(a), id(b)) })
	}
	return order
}

// appendJSONString appends s as encoding/json writes a string (HTML
// characters escaped): printable ASCII other than " \ < > & as it is,
// anything else through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64 (ES6 number
// formatting); false for NaN and infinities, which encoding/json refuses.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json does.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}
