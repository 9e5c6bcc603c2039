package mechtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/bulkhead-dc/bulkhead/mech/mechtest"
)

// TestGolden runs every script in testdata (update the expected outputs
// with go test ./mech/mechtest -rewrite).
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			mechtest.RunFile(t, path)
		})
	}
	if len(files) < 3 {
		t.Errorf("found %d scripts in testdata, want at least 3", len(files))
	}
}

// exec runs a script against a new harness and returns the first error
// of its commands (expected outputs are not checked).
func exec(t *testing.T, script string) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.txt")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	h := mechtest.New()
	var first error
	datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
		if _, err := h.Exec(td); err != nil && first == nil {
			first = err
		}
		return td.Expected
	})
	return first
}

// The parser is strict: a bad line is an error naming the script's file
// and line ("@N" in a wanted error is the N-th line of the command).
func TestBadLinesFail(t *testing.T) {
	const setup = "env\na1 A h1 450Mbps 450Mbps\nb1 B h2 450Mbps 450Mbps\n----\nh1: a1\nh2: b1\n\n" +
		"mechanism name=elasticswitch\n----\nelasticswitch\n\nagent\n----\nh1: period 15ms\nh2: period 15ms\n\n"
	if err := exec(t, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	base := strings.Count(setup, "\n")
	for _, tc := range []struct {
		cmd, want string
	}{
		{"step host=h1\negress a1->b1 rat=5Mbps\n", `@2: unknown key rat (in "egress a1->b1 rat=5Mbps")`},
		{"step host=h1\n# a comment\negress a1->b1 rate=fast\n", `@3: rate: expected a rate`},
		{"step host=h1\negress a1-b1 rate=5Mbps\n", `@2: expected a pair such as a1->b1`},
		{"step host=h1\ningress a1->b1 rate=5Mbps\n", `@2: line for host h2, which this step does not step`},
		{"step host=h1\negress a1->zz rate=5Mbps\n", `@2: unknown VM zz`},
		{"step host=h1\nmsg from=h2 {not json}\n", `@2: message body is not a JSON object`},
		{"step host=h1\nblah a1\n", `@2: unknown line "blah"`},
		{"step\nmsg from=h2 {}\n", `@2: msg needs to= when several hosts step`},
		{"step host=h1\nmsg from=h2 to=h1 {\"kind\":\"x\"} junk\n", `@2: message body is not a JSON object`},
		{"step host=h3\n", `@1: no agent on host "h3"`},
		{"step host=h1 t=1x\n", `@1: t: time: unknown unit`},
		{"step host=h1 colour=red\n", `@1: unknown key colour`},
		{"step host=h1 repeat=0\n", `@1: repeat must be an integer`},
		{"frobnicate\n", `@1: unknown command "frobnicate"`},
		{"cstep\n", `@1: cstep needs a controller first`},
		{"controller\n", `@1: mechanism elasticswitch has no controller`},
		{"drop host=h9\n", `@1: no agent on host "h9"`},
		{"step host=(h1,h1)\n", `@1: host h1 named twice`},
		{"step host=h1 t=15ms\negress a1->b1 rate=5Mbps\n----\n\nstep host=h1 t=15ms\n", `@5: time must advance`},
		{"step host=h1\negress a1->b1 rate=limit\n", `@2: rate=limit but pair a1->b1 has no limit in force`},
		{"step host=h1\nvm a1 out=limit\n", `@2: out=limit but VM a1 has no egress limit in force`},
	} {
		at, rest, _ := strings.Cut(strings.TrimPrefix(tc.want, "@"), ":")
		n, _ := strconv.Atoi(at)
		want := fmt.Sprintf("script.txt:%d:%s", base+n, rest)
		err := exec(t, setup+tc.cmd+"----\n")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", tc.cmd, err, want)
		}
	}
}

// Errors in env and controller scripts name their lines too.
func TestBadSetupLinesFail(t *testing.T) {
	const pulsar = "env\na1 A h1 8000 8000\n----\n\nmechanism name=pulsar\n----\n\n"
	for _, tc := range []struct {
		script, want string
	}{
		{"env\na1 A h1 1Mbps\n----\n", "script.txt:2: expected a VM as: name tenant host in out"},
		{"env\na1 A h1 1Mbps 1Mbps\npattern a1->zz\n----\n", "script.txt:3: unknown VM zz"},
		{"env\na1 A h1 1Mbps 1Mbps\na1 A h2 1Mbps 1Mbps\n----\n", "script.txt:3: VM a1 declared twice"},
		{"env\na1 A h1 1Mbps 1Mbit\n----\n", "script.txt:2: out: expected a rate"},
		{pulsar + "controller\nlink h1/up 1000\nlink h1/up 1000\n----\n", "script.txt:10: resource h1/up declared twice"},
		{pulsar + "controller\nlink h1/up 1000\nroute a1->x h1/up:sideways\n----\n", `script.txt:10: unknown role "sideways"`},
		{pulsar + "controller\nlink h1/up 1000\nvdc A app=kv\n----\n", "script.txt:10: expected app=ID:MIN[:MAX]"},
		{pulsar + "controller\nlink h1/up 1000\n----\n\ncstep\nflow a1->x used=1\n----\n", "script.txt:13: unknown destination x"},
		{pulsar + "controller\nlink h1/up 1000\nappliance kv cap=100\n----\n\ncstep\nflow a1->kv used=1\n----\n", "script.txt:14: flow a1->kv has no path= and no route"},
		{pulsar + "controller\nlink h1/up 1000\nroute a1->h1/up h1/up\n----\n\ncstep\nflow a1->h1/up used=1,2\n----\n", "script.txt:14: used has 2 entries, the path 1"},
		{pulsar + "controller\nlink h1/up 1000\nroute a1->h1/up h1/up\n----\n\ncstep\nflow a1->h1/up used=alloc\n----\n", "script.txt:14: used=alloc: flow a1->h1/up has no allocation"},
	} {
		err := exec(t, tc.script)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.script, err, tc.want)
		}
	}
}
