package alloc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func rateJSON(t testing.TB, p *Problem) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteRateJSON(&b, UnitCoefs(p)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func vectorJSON(t testing.TB, p *VectorProblem, mechanism string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteVectorJSON(&b, p, mechanism); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The fast path answers the plain form byte for byte as the strict path
// (encoding/json, sorted maps) does: generated instances at 1× and 3×,
// every mechanism, and small problems with what the encoder must get
// right (flows out of ID order, names encoding/json escapes, numbers in
// exponent form, zero demands, classes, floors, group weights).
func TestSolveJSONFastSame(t *testing.T) {
	type input struct {
		name string
		data []byte
	}
	var inputs []input
	scales := []int{1, 3}
	if testing.Short() {
		scales = scales[:1]
	}
	for _, k := range scales {
		p, vp, err := PulsarScaleMixed(int64(k), k)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{fmt.Sprintf("mixed %d× rate", k), rateJSON(t, p)},
			input{fmt.Sprintf("mixed %d× drf", k), vectorJSON(t, vp, "drf")})
		if k == 1 {
			inputs = append(inputs, input{"mixed 1× hdrf", vectorJSON(t, vp, "hdrf")},
				input{"mixed 1× firstfit", vectorJSON(t, vp, "firstfit")})
		}
	}
	p, vp := PulsarScale(1)
	inputs = append(inputs, input{"pulsar rate", rateJSON(t, p)}, input{"pulsar drf", vectorJSON(t, vp, "drf")})
	for _, s := range []struct{ name, in string }{
		{"unsorted ids", `{"kind":"rate","resources":[{"id":"l","capacity":3}],"flows":[{"id":"z","path":["l"]},{"id":"a","path":["l"]},{"id":"m","path":["l"],"demand":0.5}]}`},
		{"escaped names", `{"kind":"rate","resources":[{"id":"l<&>","capacity":1e-3}],"flows":[{"id":"é\u00e8","path":["l<&>"]},{"id":"a\"b\\c\n\u2028","path":["l<&>"],"weight":3},{"id":"😀","path":["l<&>"]}]}`},
		{"exponents", `{"kind":"rate","resources":[{"id":"big","capacity":3e22},{"id":"small","capacity":3e-7}],"flows":[{"id":"b","path":["big"]},{"id":"s","path":["small"],"weight":2},{"id":"t","path":["small"]}]}`},
		{"classes and floors", `{"kind":"rate","resources":[{"id":"p","capacity":1000,"classes":{"A":3,"B":1}},{"id":"q","capacity":400}],"flows":[{"id":"a","path":["p","q"],"class":"A","floor":100},{"id":"b1","path":["p"],"class":"B"},{"id":"b2","path":["p"],"class":"B","demand":50}]}`},
		{"empty", `{"kind":"rate","resources":[],"flows":[]}`},
		{"vector zeros", `{"mechanism":"drf","kind":"vector","resources":[{"id":"cpu","capacity":9},{"id":"mem","capacity":18}],"flows":[{"id":"B","demand":{"mem":2,"cpu":3,"disk":0}},{"id":"A","demand":{"cpu":1,"mem":4},"weight":2}]}`},
		{"vector group weights", ` {"kind":"vector","mechanism":"hdrf","resources":[{"id":"r1","capacity":10},{"id":"r2","capacity":10}],"flows":[{"id":"f1","demand":{"r1":4,"r2":1},"group":"A"},{"id":"f2","demand":{"r1":1,"r2":4},"group":"B"},{"id":"f3","demand":{"r2":2},"group":"B"}],"group_weights":{"A":2,"B":1}}` + "\n\t"},
		{"vector empty demand", `{"kind":"vector","mechanism":"firstfit","resources":[{"id":"r","capacity":1}],"flows":[{"id":"f","demand":{}},{"id":"g","demand":{"r":0.7}}]}`},
	} {
		inputs = append(inputs, input{s.name, []byte(s.in)})
	}
	// "vector zeros" names a resource that does not exist ("disk"): the
	// fast path declines it and the strict path refuses it. Fix it up.
	inputs[len(inputs)-3].data = bytes.Replace(inputs[len(inputs)-3].data, []byte(`,"disk":0`), []byte(`,"mem":0`), 1)
	inputs[len(inputs)-3].data = bytes.Replace(inputs[len(inputs)-3].data, []byte(`{"mem":2,"cpu":3,"mem":0}`), []byte(`{"mem":0,"cpu":3}`), 1)

	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			want, err := solveJSONStrict(in.data)
			if err != nil {
				t.Fatalf("strict: %v", err)
			}
			got, ok := solveJSONFast(in.data)
			if !ok {
				t.Fatal("the fast path declined the plain form")
			}
			if !bytes.Equal(got, want) {
				t.Errorf("answers differ (%d and %d bytes)\nfast:   %.300s\nstrict: %.300s", len(got), len(want), got, want)
			}
		})
	}
}

// What is not the plain form goes to the strict path, which answers or
// refuses it as before: SolveJSON's answer and error are the strict path's.
func TestSolveJSONFastDeclines(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"flows before resources", `{"kind":"rate","flows":[{"id":"f","path":["l"]}],"resources":[{"id":"l","capacity":2}]}`},
		{"kind after flows", `{"resources":[{"id":"l","capacity":2}],"flows":[{"id":"f","path":["l"]}],"kind":"rate"}`},
		{"field names in another case", `{"Kind":"rate","resources":[{"ID":"l","Capacity":2}],"flows":[{"id":"f","Path":["l"]}]}`},
		{"null mechanism", `{"kind":"rate","mechanism":null,"resources":[{"id":"l","capacity":2}],"flows":[{"id":"f","path":["l"],"demand":null}]}`},
		{"escaped field name", `{"kind":"rate","resources":[{"\u0069d":"l","capacity":2}],"flows":[{"id":"f","path":["l"]}]}`},
		{"number out of range", `{"kind":"rate","resources":[{"id":"l","capacity":1e999}],"flows":[]}`},
		{"unknown resource", `{"kind":"rate","resources":[{"id":"l","capacity":2}],"flows":[{"id":"f","path":["m"]}]}`},
		{"duplicate key", `{"kind":"rate","resources":[{"id":"l","capacity":2,"capacity":3}],"flows":[]}`},
		{"duplicate flow", `{"kind":"rate","resources":[{"id":"l","capacity":2}],"flows":[{"id":"f","path":["l"]},{"id":"f","path":["l"]}]}`},
		{"trailing data", `{"kind":"rate","resources":[],"flows":[]} {}`},
		{"invalid UTF-8", "{\"kind\":\"rate\",\"resources\":[],\"flows\":[{\"id\":\"\xff\"}]}"},
		{"negative demand", `{"kind":"vector","mechanism":"drf","resources":[{"id":"r","capacity":1}],"flows":[{"id":"f","demand":{"r":-1}}]}`},
		{"group weights for drf", `{"kind":"vector","mechanism":"drf","resources":[{"id":"r","capacity":1}],"flows":[{"id":"f","demand":{"r":1}}],"group_weights":{"":1}}`},
		{"no mechanism", `{"kind":"vector","resources":[],"flows":[]}`},
		{"classes on a vector resource", `{"kind":"vector","mechanism":"drf","resources":[{"id":"r","capacity":1,"classes":{}}],"flows":[]}`},
		{"not an object", `[]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			if _, ok := solveJSONFast(data); ok {
				t.Error("the fast path answered")
			}
			want, wantErr := solveJSONStrict(data)
			got, err := solveJSON(bytes.NewReader(data), MaxJSONBytes)
			if !bytes.Equal(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("got %q, %v; strict %q, %v", got, err, want, wantErr)
			}
		})
	}
}

func TestSolveJSONLimit(t *testing.T) {
	in := `{"kind":"rate","resources":[{"id":"l","capacity":2}],"flows":[{"id":"f","path":["l"]}]}`
	for _, tc := range []struct {
		limit   int64
		wantErr string
	}{
		{int64(len(in)), ""},
		{int64(len(in)) - 1, fmt.Sprintf("input larger than %d bytes", len(in)-1)},
		{0, "input limit 0"},
	} {
		var out bytes.Buffer
		err := SolveJSONLimit(strings.NewReader(in), &out, tc.limit)
		switch {
		case tc.wantErr == "" && (err != nil || out.String() != `{"rates":{"f":2}}`+"\n"):
			t.Errorf("limit %d: %q, %v", tc.limit, out.String(), err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("limit %d: got %v, want %q", tc.limit, err, tc.wantErr)
		}
	}
}

// BenchmarkSolveJSON: the strict path (the encoder and decoder `bulkhead
// alloc` had before the fast path) against SolveJSON, side by side, on
// PulsarScaleMixed's vector form for DRF and its rate form.
func BenchmarkSolveJSON(b *testing.B) {
	for _, k := range []int{1, 10} {
		p, vp, err := PulsarScaleMixed(1, k)
		if err != nil {
			b.Fatal(err)
		}
		for _, form := range []struct {
			name string
			data []byte
		}{{"drf", vectorJSON(b, vp, "drf")}, {"rate", rateJSON(b, p)}} {
			for _, path := range []struct {
				name  string
				solve func([]byte) ([]byte, error)
			}{
				{"strict", solveJSONStrict},
				{"fast", func(d []byte) ([]byte, error) { return solveJSON(bytes.NewReader(d), int64(len(d))) }},
			} {
				b.Run(fmt.Sprintf("%dx/%s/%s", k, form.name, path.name), func(b *testing.B) {
					b.SetBytes(int64(len(form.data)))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := path.solve(form.data); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
