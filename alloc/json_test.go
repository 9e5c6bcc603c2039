package alloc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestSolveJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"rate with classes", `{"kind":"rate","resources":[{"id":"l1","capacity":1000,"classes":{"A":3,"B":1}}],
			"flows":[{"id":"f1","path":["l1"],"demand":500,"weight":1,"floor":0,"class":"A"},
			         {"id":"f2","path":["l1"],"class":"B"}]}`,
			`{"rates":{"f1":500,"f2":500}}`},
		{"rate defaults", `{"kind":"rate","resources":[{"id":"l1","capacity":90},{"id":"l2","capacity":1000}],
			"flows":[{"id":"b","path":["l1","l2"]},{"id":"a","path":["l1"],"weight":2},{"id":"c","path":["l2"],"floor":100}]}`,
			`{"rates":{"a":60,"b":30,"c":970}}`},
		{"rate thirds rounded", `{"kind":"rate","resources":[{"id":"l","capacity":1}],
			"flows":[{"id":"a","path":["l"]},{"id":"b","path":["l"]},{"id":"c","path":["l"]}]}`,
			`{"rates":{"a":0.3333333333,"b":0.3333333333,"c":0.3333333333}}`},
		{"rate empty", `{"kind":"rate","resources":[],"flows":[]}`, `{"rates":{}}`},
		{"drf", `{"kind":"vector","mechanism":"drf","resources":[{"id":"cpu","capacity":9},{"id":"mem","capacity":18}],
			"flows":[{"id":"A","demand":{"cpu":9,"mem":36}},{"id":"B","demand":{"cpu":27,"mem":9}}]}`,
			`{"allocations":{"A":{"cpu":3,"mem":12},"B":{"cpu":6,"mem":2}}}`},
		{"hdrf", `{"kind":"vector","mechanism":"hdrf","resources":[{"id":"r1","capacity":12}],
			"flows":[{"id":"a","demand":{"r1":12},"group":"g1"},{"id":"b","demand":{"r1":12},"group":"g1"},
			         {"id":"c","demand":{"r1":12},"group":"g2"}],"group_weights":{"g1":1,"g2":2}}`,
			`{"allocations":{"a":{"r1":2},"b":{"r1":2},"c":{"r1":8}}}`},
		{"firstfit with zero entry", `{"kind":"vector","mechanism":"firstfit","resources":[{"id":"r1","capacity":10},{"id":"r2","capacity":10}],
			"flows":[{"id":"a","demand":{"r1":4,"r2":0}},{"id":"b","demand":{"r1":12}},{"id":"c"}]}`,
			`{"allocations":{"a":{"r1":4,"r2":0},"b":{"r1":6},"c":{}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := SolveJSON(strings.NewReader(tc.in), &out); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(out.String()); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			// Deterministic: same bytes again.
			var again bytes.Buffer
			if err := SolveJSON(strings.NewReader(tc.in), &again); err != nil || again.String() != out.String() {
				t.Errorf("second run differs: %q vs %q (%v)", again.String(), out.String(), err)
			}
		})
	}
}

func TestSolveJSONErrors(t *testing.T) {
	rate := func(resources, flows string) string {
		return `{"kind":"rate","resources":` + resources + `,"flows":` + flows + `}`
	}
	vec := func(mech, resources, flows string) string {
		return `{"kind":"vector","mechanism":"` + mech + `","resources":` + resources + `,"flows":` + flows + `}`
	}
	l1 := `[{"id":"l1","capacity":100}]`
	tests := []struct {
		name, in, want string
	}{
		{"empty input", ``, "empty input"},
		{"not JSON", `{"kind":`, "truncated JSON"},
		{"syntax", `{"kind":"rate",}`, "invalid JSON"},
		{"trailing garbage", rate(l1, `[]`) + ` xyz`, "trailing data after the problem"},
		{"trailing object", rate(l1, `[]`) + `{}`, "trailing data after the problem"},
		{"unknown top field", `{"kind":"rate","resources":[],"flows":[],"extra":1}`, `unknown field "extra"`},
		{"missing kind", `{"resources":[],"flows":[]}`, `kind: missing`},
		{"unknown kind", `{"kind":"flow","resources":[],"flows":[]}`, `kind: unknown kind "flow"`},
		{"missing resources", `{"kind":"rate","flows":[]}`, `resources: missing`},
		{"missing flows", `{"kind":"rate","resources":[]}`, `flows: missing`},
		{"mechanism on rate", `{"kind":"rate","mechanism":"drf","resources":[],"flows":[]}`, `mechanism: not used by kind "rate"`},
		{"unknown resource field", rate(`[{"id":"l1","capacity":1,"speed":3}]`, `[]`), `resources[0]: unknown field "speed"`},
		{"unknown flow field", rate(l1, `[{"id":"f","path":["l1"],"prio":1}]`), `flows[0]: unknown field "prio"`},
		{"wrong type", rate(l1, `[{"id":"f","path":["l1"],"demand":"lots"}]`), `flows[0].demand: expected number, got string`},
		{"wrong type in list", rate(`{"id":"l1"}`, `[]`), `resources: expected array, got object`},
		{"missing capacity", rate(`[{"id":"l1"}]`, `[]`), `resources[0].capacity: missing`},
		{"negative capacity", rate(`[{"id":"l1","capacity":-5}]`, `[]`), `resources[0].capacity: must be ≥ 0, got -5`},
		{"empty resource id", rate(`[{"id":"","capacity":5}]`, `[]`), `resources[0].id: empty id`},
		{"duplicate resource", rate(`[{"id":"l1","capacity":5},{"id":"l1","capacity":6}]`, `[]`), `resources[1].id: duplicate resource id "l1"`},
		{"bad class weight", rate(`[{"id":"l1","capacity":5,"classes":{"A":0}}]`, `[]`), `resources[0].classes: class "A": weight must be > 0`},
		{"unknown resource in path", rate(`[{"id":"l1","capacity":5},{"id":"l2","capacity":5}]`,
			`[{"id":"a","path":["l1"]},{"id":"b","path":["l2"]},{"id":"c","path":["l1","l9"]}]`), `flows[2].path[1]: unknown resource "l9"`},
		{"zero weight", rate(l1, `[{"id":"f","path":["l1"],"weight":0}]`), `flows[0].weight: must be > 0`},
		{"negative demand", rate(l1, `[{"id":"f","path":["l1"],"demand":-1}]`), `flows[0].demand: must be ≥ 0`},
		{"floor above demand", rate(l1, `[{"id":"f","path":["l1"],"demand":5,"floor":6}]`), `flows[0].floor: floor 6 exceeds demand 5`},
		{"floors do not fit", rate(l1, `[{"id":"f","path":["l1"],"floor":60},{"id":"g","path":["l1"],"floor":50}]`),
			`resources[0]: floors sum to 110, more than capacity 100`},
		{"duplicate flow", rate(l1, `[{"id":"f","path":["l1"]},{"id":"f","path":["l1"]}]`), `flows[1].id: duplicate flow id "f"`},
		{"empty flow id", rate(l1, `[{"path":["l1"]}]`), `flows[0].id: empty id`},
		{"class missing", rate(`[{"id":"w","capacity":5,"classes":{"A":1}}]`, `[{"id":"f","path":["w"]}]`), `flows[0].class: flow has no class`},
		{"class unknown", rate(`[{"id":"w","capacity":5,"classes":{"A":1}}]`, `[{"id":"f","path":["w"],"class":"Z"}]`), `flows[0].class: class "Z" is not a class of resource "w"`},
		{"unbounded", rate(l1, `[{"id":"f","path":[]}]`), `flows[0].demand: unbounded`},
		{"missing mechanism", `{"kind":"vector","resources":[],"flows":[]}`, `mechanism: missing`},
		{"unknown mechanism", vec("lottery", `[]`, `[]`), `mechanism: unknown mechanism "lottery"`},
		{"vector classes", vec("drf", `[{"id":"r1","capacity":1,"classes":{"A":1}}]`, `[]`), `resources[0]: unknown field "classes"`},
		{"vector unknown resource", vec("drf", `[{"id":"r1","capacity":10}]`, `[{"id":"f1","demand":{"r1":4,"r2":1}}]`), `flows[0].demand.r2: unknown resource "r2"`},
		{"vector negative demand", vec("drf", `[{"id":"r1","capacity":10}]`, `[{"id":"f1","demand":{"r1":-4}}]`), `flows[0].demand.r1: must be ≥ 0, got -4`},
		{"vector negative capacity", vec("hdrf", `[{"id":"r1","capacity":-10}]`, `[]`), `resources[0].capacity: must be ≥ 0, got -10`},
		{"vector zero weight", vec("drf", `[{"id":"r1","capacity":10}]`, `[{"id":"f1","demand":{"r1":4},"weight":0}]`), `flows[0].weight: must be > 0`},
		{"vector duplicate flow", vec("firstfit", `[{"id":"r1","capacity":10}]`, `[{"id":"f1"},{"id":"f1"}]`), `flows[1].id: duplicate flow id "f1"`},
		{"group weights not hdrf", `{"kind":"vector","mechanism":"drf","resources":[],"flows":[],"group_weights":{}}`, `group_weights: only used by mechanism "hdrf"`},
		{"group weight unknown group", `{"kind":"vector","mechanism":"hdrf","resources":[],"flows":[{"id":"a","group":"g"}],"group_weights":{"h":1}}`, `group_weights.h: weight for group "h", which has no flows`},
		{"group weight type", `{"kind":"vector","mechanism":"hdrf","resources":[],"flows":[],"group_weights":{"h":"x"}}`, `group_weights: expected number, got string`},
		// Duplicate keys: encoding/json would keep the last one silently.
		{"duplicate top key", `{"kind":"rate","kind":"vector","mechanism":"drf","resources":[],"flows":[]}`, `kind: duplicate key "kind"`},
		{"duplicate flow key", rate(l1, `[{"id":"f","path":["l1"]},{"id":"g","demand":5,"path":["l1"],"demand":50}]`), `flows[1].demand: duplicate key "demand"`},
		{"duplicate id key", rate(`[{"id":"l1","capacity":5,"id":"l2"}]`, `[]`), `resources[0].id: duplicate key "id"`},
		{"duplicate class key", rate(`[{"id":"w","capacity":5,"classes":{"A":1,"B":2,"A":3}}]`, `[]`), `resources[0].classes.A: duplicate key "A"`},
		{"duplicate demand key", vec("drf", `[{"id":"r1","capacity":10}]`, `[{"id":"f1","demand":{"r1":4,"r1":1}}]`), `flows[0].demand.r1: duplicate key "r1"`},
		{"duplicate group weight", `{"kind":"vector","mechanism":"hdrf","resources":[],"flows":[{"id":"a","group":"g"}],"group_weights":{"g":1,"g":2}}`, `group_weights.g: duplicate key "g"`},
		{"duplicate key in an unknown field", `{"kind":"rate","resources":[],"flows":[],"x":{"a":1,"a":1}}`, `x.a: duplicate key "a"`},
		// Invalid Unicode: encoding/json would rewrite it to U+FFFD.
		{"invalid UTF-8 flow id", rate(l1, "[{\"id\":\"f\xff\",\"path\":[\"l1\"]}]"), `flows[0].id: invalid UTF-8 (byte 0xff at byte 1 of the string)`},
		{"invalid UTF-8 path entry", rate(l1, "[{\"id\":\"f\",\"path\":[\"l1\",\"\xc3\"]}]"), `flows[0].path[1]: invalid UTF-8 (byte 0xc3`},
		{"invalid UTF-8 resource id", rate("[{\"id\":\"\xe2\x82\",\"capacity\":1}]", `[]`), `resources[0].id: invalid UTF-8`},
		{"invalid UTF-8 key", rate(`[{"id":"w","capacity":5,"classes":{"`+"\xfe"+`":1}}]`, `[]`), `resources[0].classes: key "`},
		{"overlong UTF-8", rate(l1, "[{\"id\":\"\xc0\xaf\",\"path\":[\"l1\"]}]"), `flows[0].id: invalid UTF-8 (byte 0xc0`},
		{"lone high surrogate", rate(l1, `[{"id":"a\ud800","path":["l1"]}]`), `flows[0].id: unpaired surrogate escape \ud800`},
		{"lone low surrogate", rate(l1, `[{"id":"\udc00b","path":["l1"]}]`), `flows[0].id: unpaired surrogate escape \udc00`},
		{"high surrogate then non-surrogate", rate(l1, `[{"id":"\ud800\u0041","path":["l1"]}]`), `flows[0].id: unpaired surrogate escape \ud800`},
		{"invalid UTF-8 group", vec("hdrf", `[]`, "[{\"id\":\"a\",\"group\":\"g\x80\"}]"), `flows[0].group: invalid UTF-8`},
		{"invalid UTF-8 kind", "{\"kind\":\"rat\xe9\",\"resources\":[],\"flows\":[]}", `kind: invalid UTF-8`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := SolveJSON(strings.NewReader(tc.in), &out)
			if err == nil {
				t.Fatalf("no error; output %s", out.String())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to contain %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("wrote %q on error", out.String())
			}
		})
	}
}

// Valid Unicode in any form is kept as given: raw UTF-8, escapes, paired
// surrogates and a literal U+FFFD.
func TestSolveJSONUnicodeKept(t *testing.T) {
	in := `{"kind":"rate","resources":[{"id":"l","capacity":4}],"flows":[` +
		`{"id":"é","path":["l"]},{"id":"\u00e8","path":["l"]},{"id":"\ud83d\ude00","path":["l"]},{"id":"\ufffd` + "\uFFFD" + `","path":["l"]}]}`
	want := `{"rates":{"è":1,"é":1,"` + "\uFFFD\uFFFD" + `":1,"😀":1}}`
	var out bytes.Buffer
	if err := SolveJSON(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Input over MaxJSONBytes is refused before it is decoded, and reading
// stops after MaxJSONBytes+1 bytes; input of exactly MaxJSONBytes is read.
func TestSolveJSONSizeBound(t *testing.T) {
	head := `{"kind":"rate","resources":[],"flows":[]}`
	tests := []struct {
		name    string
		size    int64 // total input bytes (head, then spaces)
		wantErr string
	}{
		{"at the bound", MaxJSONBytes, ""},
		{"one byte over", MaxJSONBytes + 1, "input larger than 16777216 bytes"},
		{"far over", 1 << 30, "input larger than 16777216 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &countingReader{r: io.MultiReader(strings.NewReader(head), &spaces{n: tc.size - int64(len(head))})}
			var out bytes.Buffer
			err := SolveJSON(r, &out)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
			if tc.wantErr != "" && out.Len() != 0 {
				t.Errorf("wrote %q on error", out.String())
			}
			if lim := int64(MaxJSONBytes + 1); r.n > lim {
				t.Errorf("read %d bytes, want at most %d", r.n, lim)
			}
		})
	}
}

type spaces struct{ n int64 }

func (s *spaces) Read(p []byte) (int, error) {
	if s.n <= 0 {
		return 0, io.EOF
	}
	k := int64(len(p))
	if k > s.n {
		k = s.n
	}
	for i := range p[:k] {
		p[i] = ' '
	}
	s.n -= k
	return int(k), nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

func TestSolveJSONReadError(t *testing.T) {
	boom := errors.New("boom")
	var out bytes.Buffer
	err := SolveJSON(iotest.ErrReader(boom), &out)
	if !errors.Is(err, boom) {
		t.Errorf("got %v, want it to wrap the read error", err)
	}
	if out.Len() != 0 {
		t.Error("wrote output on error")
	}
}
