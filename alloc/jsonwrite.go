package alloc

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// WriteRateJSON writes p in the rate form SolveJSON reads (`bulkhead
// alloc`'s input): the inverse of its parser. The rate form names a flow's
// resources without coefficients, so every use must have Coef 1 (see
// UnitCoefs). Numbers are written exactly (shortest round-trip form).
func WriteRateJSON(w io.Writer, p *Problem) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	b := make([]byte, 0, 256)
	b = append(b, `{"kind":"rate","resources":[`...)
	for r, res := range p.Resources {
		if r > 0 {
			b = append(b, ',')
		}
		b = appendResource(b, res)
		if len(res.Classes) > 0 {
			b = append(b[:len(b)-1], `,"classes":{`...)
			names := make([]string, 0, len(res.Classes))
			for c := range res.Classes {
				names = append(names, c)
			}
			sort.Strings(names)
			for k, c := range names {
				if k > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, c)
				b = append(b, ':')
				b = appendNum(b, res.Classes[c])
			}
			b = append(b, "}}"...)
		}
		var err error
		if b, err = flushIf(bw, b); err != nil {
			return fmt.Errorf("write rate problem: %w", err)
		}
	}
	b = append(b, `],"flows":[`...)
	for i, f := range p.Flows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, f.ID)
		b = append(b, `,"path":[`...)
		for j, u := range f.Uses {
			if u.Coef != 1 || u.Class != "" {
				return fmt.Errorf("write rate problem: flow %s, use %d: coefficient %g, class %q (the rate form has coefficient 1 and the flow's class only)", f.ID, j, u.Coef, u.Class)
			}
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p.Resources[u.Resource].ID)
		}
		b = append(b, ']')
		if !math.IsInf(f.Demand, 1) {
			b = append(b, `,"demand":`...)
			b = appendNum(b, f.Demand)
		}
		if f.Weight != 1 {
			b = append(b, `,"weight":`...)
			b = appendNum(b, f.Weight)
		}
		if f.Floor != 0 {
			b = append(b, `,"floor":`...)
			b = appendNum(b, f.Floor)
		}
		if f.Class != "" {
			b = append(b, `,"class":`...)
			b = appendJSONString(b, f.Class)
		}
		b = append(b, '}')
		var err error
		if b, err = flushIf(bw, b); err != nil {
			return fmt.Errorf("write rate problem: %w", err)
		}
	}
	b = append(b, "]}\n"...)
	if _, err := bw.Write(b); err != nil {
		return fmt.Errorf("write rate problem: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write rate problem: %w", err)
	}
	return nil
}

// WriteVectorJSON writes p in the vector form SolveJSON reads, for
// mechanism "drf", "hdrf" or "firstfit". A flow's demand lists the
// resources it demands (Demand's non-zero entries, or Sparse's, summed per
// resource).
func WriteVectorJSON(w io.Writer, p *VectorProblem, mechanism string) error {
	switch mechanism {
	case "drf", "hdrf", "firstfit":
	default:
		return fmt.Errorf("write vector problem: unknown mechanism %q (want drf, hdrf or firstfit)", mechanism)
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	b := make([]byte, 0, 256)
	b = append(b, `{"kind":"vector","mechanism":"`...)
	b = append(b, mechanism...)
	b = append(b, `","resources":[`...)
	for r, res := range p.Resources {
		if r > 0 {
			b = append(b, ',')
		}
		b = appendResource(b, res)
		var err error
		if b, err = flushIf(bw, b); err != nil {
			return fmt.Errorf("write vector problem: %w", err)
		}
	}
	b = append(b, `],"flows":[`...)
	var res []int
	amt := make(map[int]float64)
	for i, f := range p.Flows {
		if i > 0 {
			b = append(b, ',')
		}
		res = res[:0]
		clear(amt)
		for r, d := range f.Demand {
			if d > 0 {
				res = append(res, r)
				amt[r] = d
			}
		}
		for _, u := range f.Sparse {
			if _, seen := amt[u.Resource]; !seen {
				res = append(res, u.Resource)
			}
			amt[u.Resource] += u.Coef
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, f.ID)
		b = append(b, `,"demand":{`...)
		for j, r := range res {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p.Resources[r].ID)
			b = append(b, ':')
			b = appendNum(b, amt[r])
		}
		b = append(b, '}')
		if f.Weight != 1 {
			b = append(b, `,"weight":`...)
			b = appendNum(b, f.Weight)
		}
		if f.Group != "" {
			b = append(b, `,"group":`...)
			b = appendJSONString(b, f.Group)
		}
		b = append(b, '}')
		var err error
		if b, err = flushIf(bw, b); err != nil {
			return fmt.Errorf("write vector problem: %w", err)
		}
	}
	b = append(b, ']')
	if len(p.GroupWeights) > 0 {
		names := make([]string, 0, len(p.GroupWeights))
		for g := range p.GroupWeights {
			names = append(names, g)
		}
		sort.Strings(names)
		b = append(b, `,"group_weights":{`...)
		for k, g := range names {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, g)
			b = append(b, ':')
			b = appendNum(b, p.GroupWeights[g])
		}
		b = append(b, '}')
	}
	b = append(b, "}\n"...)
	if _, err := bw.Write(b); err != nil {
		return fmt.Errorf("write vector problem: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write vector problem: %w", err)
	}
	return nil
}

// UnitCoefs returns a copy of p with every coefficient 1 (what the rate
// form of `bulkhead alloc` can express: a flow's path, not what it costs
// each resource).
func UnitCoefs(p *Problem) *Problem {
	q := &Problem{Resources: p.Resources, Flows: make([]Flow, len(p.Flows))}
	n := 0
	for _, f := range p.Flows {
		n += len(f.Uses)
	}
	uses := make([]Use, 0, n)
	for i, f := range p.Flows {
		start := len(uses)
		for _, u := range f.Uses {
			u.Coef = 1
			uses = append(uses, u)
		}
		f.Uses = uses[start:len(uses):len(uses)]
		q.Flows[i] = f
	}
	return q
}

func appendResource(b []byte, res Resource) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, res.ID)
	b = append(b, `,"capacity":`...)
	b = appendNum(b, res.Capacity)
	return append(b, '}')
}

// appendNum writes a finite number exactly; infinities and NaN, which JSON
// has no numbers for, as 1e999 / null so that the parser refuses them.
func appendNum(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "1e999"...)
	case math.IsInf(v, -1):
		return append(b, "-1e999"...)
	case math.IsNaN(v):
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// flushIf hands b to bw once it holds 32 KiB, returning it emptied.
func flushIf(bw *bufio.Writer, b []byte) ([]byte, error) {
	if len(b) < 32<<10 {
		return b, nil
	}
	if _, err := bw.Write(b); err != nil {
		return nil, err
	}
	return b[:0], nil
}
