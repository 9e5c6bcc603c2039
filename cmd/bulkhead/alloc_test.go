package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// alloc refuses, with the JSON field path, what encoding/json would take
// silently: duplicate keys (the last would win) and strings that are not
// valid Unicode (they would be rewritten, so the answer's ids would not
// match the question's).
func TestAllocStrictInput(t *testing.T) {
	rate := func(flows string) string {
		return `{"kind":"rate","resources":[{"id":"l1","capacity":10}],"flows":` + flows + `}`
	}
	cases := []struct {
		name, in, want string
	}{
		{"duplicate demand", rate(`[{"id":"f","path":["l1"],"demand":1,"demand":9}]`), `flows[0].demand: duplicate key "demand"`},
		{"duplicate kind", `{"kind":"vector","kind":"rate","resources":[],"flows":[]}`, `kind: duplicate key "kind"`},
		{"duplicate vector demand", `{"kind":"vector","mechanism":"drf","resources":[{"id":"r","capacity":1}],"flows":[{"id":"a","demand":{"r":1,"r":2}}]}`,
			`flows[0].demand.r: duplicate key "r"`},
		{"invalid UTF-8 id", rate("[{\"id\":\"a\xff\",\"path\":[\"l1\"]}]"), `flows[0].id: invalid UTF-8`},
		{"unpaired surrogate id", rate(`[{"id":"a\udfff","path":["l1"]}]`), `flows[0].id: unpaired surrogate escape`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := run(t, c.in, "alloc")
			if code == 0 {
				t.Fatalf("exit 0; stdout %q", out)
			}
			if out != "" {
				t.Errorf("answer on stdout: %q", out)
			}
			if !strings.Contains(errs, "stdin: alloc: "+c.want) {
				t.Errorf("stderr %q does not mention %q", errs, c.want)
			}
		})
	}
}

// Input over the documented bound is refused before it is decoded; input
// at the bound is solved.
func TestAllocSizeBound(t *testing.T) {
	const limit = 16 << 20 // alloc.MaxJSONBytes, as documented in alloc --help
	head := `{"kind":"rate","resources":[],"flows":[]}`
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		size int
		want string // "" = solved
	}{
		{"at the bound", limit, ""},
		{"over the bound", limit + 1, "stdin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := head + strings.Repeat(" ", c.size-len(head))
			out, errs, code := run(t, in, "alloc")
			if c.want == "" {
				if code != 0 || strings.TrimSpace(out) != `{"rates":{}}` {
					t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
				}
				return
			}
			if code == 0 || out != "" || !strings.Contains(errs, "input larger than 16777216 bytes") {
				t.Errorf("exit %d, stdout %q, stderr %q; want the size error", code, out, errs)
			}
			// The same through a file argument.
			f := filepath.Join(dir, "big.json")
			if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, errs, code := run(t, "", "alloc", f); code == 0 || !strings.Contains(errs, f+": alloc: input larger than") {
				t.Errorf("file: exit %d, stderr %q", code, errs)
			}
		})
	}
}
