package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bulkhead-cli")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "bulkhead")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run executes the binary and returns stdout, stderr and the exit code.
func run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"sim", "--help"}, {"alloc", "--help"}, {"bench", "--help"},
		{"bench", "alloc", "--help"}, {"bench", "sim", "--help"}, {"bench", "pulsar", "--help"}, {"validate", "--help"}} {
		out, _, code := run(t, "", args...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}

func TestAlloc(t *testing.T) {
	cases := []struct {
		name, in, out string
	}{
		{"rate with classes", `{"kind":"rate","resources":[{"id":"l1","capacity":1000,"classes":{"A":3,"B":1}}],
			"flows":[{"id":"f1","path":["l1"],"demand":500,"weight":1,"floor":0,"class":"A"},{"id":"f2","path":["l1"],"class":"B"}]}`,
			`{"rates":{"f1":500,"f2":500}}`},
		{"rate weights and demand", `{"kind":"rate","resources":[{"id":"l1","capacity":1000}],
			"flows":[{"id":"f1","path":["l1"],"demand":100},{"id":"f2","path":["l1"],"weight":2},{"id":"f3","path":["l1"]}]}`,
			`{"rates":{"f1":100,"f2":600,"f3":300}}`},
		{"drf", `{"kind":"vector","mechanism":"drf","resources":[{"id":"cpu","capacity":9},{"id":"mem","capacity":18}],
			"flows":[{"id":"A","demand":{"cpu":9,"mem":36}},{"id":"B","demand":{"cpu":27,"mem":9}}]}`,
			`{"allocations":{"A":{"cpu":3,"mem":12},"B":{"cpu":6,"mem":2}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := run(t, c.in, "alloc")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if strings.TrimSpace(out) != c.out {
				t.Errorf("got %s\nwant %s", strings.TrimSpace(out), c.out)
			}
		})
	}
}

func TestAllocErrors(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"unknown resource", `{"kind":"rate","resources":[{"id":"l1","capacity":1}],"flows":[{"id":"f","path":["l1","l9"]}]}`, `flows[0].path[1]: unknown resource "l9"`},
		{"negative capacity", `{"kind":"rate","resources":[{"id":"l1","capacity":-5}],"flows":[]}`, "resources[0].capacity"},
		{"floors do not fit", `{"kind":"rate","resources":[{"id":"l1","capacity":10}],"flows":[{"id":"a","path":["l1"],"floor":6},{"id":"b","path":["l1"],"floor":6}]}`, "floors"},
		{"bad json", `{"kind":"rate",`, "stdin"},
		{"unknown mechanism", `{"kind":"vector","mechanism":"magic","resources":[],"flows":[]}`, "mechanism"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := run(t, c.in, "alloc")
			if code == 0 {
				t.Fatalf("exit 0 for invalid input; stdout %q", out)
			}
			if out != "" {
				t.Errorf("partial answer on stdout: %q", out)
			}
			if !strings.Contains(errs, c.want) {
				t.Errorf("stderr %q does not mention %q", errs, c.want)
			}
		})
	}
}

func TestSimBadScenario(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "scenario.yaml")
	data, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "pulsar-fig3-network.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, from, to, want string
	}{
		{"unknown server", "{name: b-rx, server: s3}", "{name: b-rx, server: s99}", bad + `: tenants[1].vms[1].server: unknown server "s99"`},
		{"oversubscribed", "guarantee: 450Mbps\n    vms:\n      - {name: b-tx", "guarantee: 650Mbps\n    vms:\n      - {name: b-tx",
			`link "tor1->s3" oversubscribed`},
		{"unknown mechanism", "name: none", "name: magic", `mechanism.name: unknown mechanism "magic"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(string(data), c.from, c.to, 1)
			if text == string(data) {
				t.Fatalf("replacement %q not found", c.from)
			}
			if err := os.WriteFile(bad, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			outDir := filepath.Join(dir, "out")
			_, errs, code := run(t, "", "sim", bad, "-o", outDir, "-q")
			if code == 0 || !strings.Contains(errs, c.want) {
				t.Errorf("exit %d, stderr %q; want non-zero and %q", code, errs, c.want)
			}
			if _, err := os.Stat(outDir); !os.IsNotExist(err) {
				t.Errorf("failed run left %s behind", outDir)
			}
		})
	}
}

func TestShippedScenariosValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	out, errs, code := run(t, "", append([]string{"validate"}, files...)...)
	if code != 0 {
		t.Fatalf("validate failed: %s%s", out, errs)
	}
}

func TestSimWritesReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, errs, code := run(t, "", "sim", filepath.Join("..", "..", "scenarios", "pulsar-fig3-network.yaml"), "-o", dir, "--no-plots", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "report written") {
		t.Errorf("stdout %q", out)
	}
	for _, f := range []string{"report.json", "summary.md", "timeseries.csv"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
