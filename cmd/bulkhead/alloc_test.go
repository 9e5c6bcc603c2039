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

// --max-input moves the bound; bench alloc --write-json writes an instance
// alloc answers; bench alloc --scale prints the per-allocator table.
func TestAllocMaxInputAndBench(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "mixed.json")
	if out, errs, code := run(t, "", "bench", "alloc", "--scale", "5", "--write-json", in, "--form", "drf"); code != 0 { // 18 MB
		t.Fatalf("write-json: exit %d, %q, %q", code, out, errs)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // in stdout if exit 0, else in stderr
		ok   bool
	}{
		{"default bound", []string{"alloc", in}, "input larger than 16777216 bytes", false},
		{"raised bound", []string{"alloc", "--max-input", "64MiB", in}, `{"allocations":{"vm0000000":{`, true},
		{"bad bound", []string{"alloc", "--max-input", "lots", in}, "--max-input", false},
		{"zero bound", []string{"alloc", "--max-input", "0", in}, "outside 1 B–1 TiB", false},
		{"unknown form", []string{"bench", "alloc", "--write-json", filepath.Join(dir, "x.json"), "--form", "lp"}, `unknown form "lp"`, false},
		{"scale out of range", []string{"bench", "alloc", "--scale", "0", "--runs", "1"}, "scale factor 0", false},
		{"table", []string{"bench", "alloc", "--scale", "1", "--runs", "1"}, "| H-DRF |", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := run(t, "", tc.args...)
			switch {
			case tc.ok && (code != 0 || !strings.Contains(out, tc.want)):
				t.Errorf("exit %d, stdout %.200q, stderr %q; want %q", code, out, errs, tc.want)
			case !tc.ok && (code == 0 || !strings.Contains(errs, tc.want)):
				t.Errorf("exit %d, stderr %q; want an error with %q", code, errs, tc.want)
			}
		})
	}
}
