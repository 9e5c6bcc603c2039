package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startController runs `bulkhead controller` on a free port with dataDir
// and returns its URL and a function that kills it (SIGKILL when hard).
func startController(t *testing.T, dataDir string) (string, func(hard bool)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := os.Stat(filepath.Join(dataDir, "pki")); os.IsNotExist(err) {
		if out, errOut, code := run(t, "", "controller", "init", "--pki", filepath.Join(dataDir, "pki"), "--host", "s1"); code != 0 {
			t.Fatalf("controller init: exit %d\n%s%s", code, out, errOut)
		}
	}
	cmd := exec.Command(bin, "controller", "--data-dir", dataDir, "--listen", addr, "--agents-listen", "127.0.0.1:0")
	logf, err := os.Create(filepath.Join(dataDir, "controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop := func(hard bool) {
		sig := syscall.SIGTERM
		if hard {
			sig = syscall.SIGKILL
		}
		_ = cmd.Process.Signal(sig)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(func() { stop(true); logf.Close() })
	url := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-ctx.Done():
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("controller not ready within 10 s:\n%s", b)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return url, stop
}

func TestControllerNewcomerPath(t *testing.T) {
	dir := t.TempDir()
	url, stop := startController(t, dir)
	cli := func(args ...string) (string, string, int) {
		return run(t, "", append(args, "--server", url, "--token-file", filepath.Join(dir, "operator.token"))...)
	}
	if out, errOut, code := cli("apply", "-f", "../../docs/examples/cluster.yaml", "-f", "../../docs/examples/tenants.yaml"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	} else if !strings.Contains(out, "tenant/batch created") {
		t.Errorf("apply output:\n%s", out)
	}
	out, errOut, code := cli("get", "tenants")
	if code != 0 || !strings.Contains(out, "batch") || !strings.Contains(out, "450 Mbps/VM") {
		t.Fatalf("get tenants: exit %d\n%s%s", code, out, errOut)
	}
	// The same files again: unchanged.
	if out, _, _ := cli("apply", "-f", "../../docs/examples/tenants.yaml"); !strings.Contains(out, "tenant/web unchanged") {
		t.Errorf("re-apply:\n%s", out)
	}
	// Killed and restarted from its store: nothing declared is lost.
	stop(true)
	url, _ = startController(t, dir)
	out, errOut, code = cli("get", "tenant", "batch", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "host: s") {
		t.Fatalf("after a restart: exit %d\n%s%s", code, out, errOut)
	}
	// What get -o yaml prints applies back unchanged.
	f := filepath.Join(t.TempDir(), "batch.yaml")
	if err := os.WriteFile(f, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli("apply", "-f", f); code != 0 || !strings.Contains(out, "unchanged") {
		t.Errorf("apply of get -o yaml: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := cli("describe", "tenant", "web"); code != 0 || !strings.Contains(out, "s1->tor1") {
		t.Errorf("describe: exit %d\n%s%s", code, out, errOut)
	}
	// top: one frame, both tenants, the hosts' agents (none connected).
	if out, errOut, code := cli("top", "--once"); code != 0 || !strings.Contains(out, "tenants 2, below their guarantee 0") ||
		!strings.Contains(out, "agents 0 of 4 connected") || !strings.Contains(out, "batch") || !strings.Contains(out, "web") {
		t.Errorf("top --once: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli("top", "--interval", "1ms"); code == 0 || !strings.Contains(errOut, "at least 100ms") {
		t.Errorf("top --interval 1ms: exit %d, %s", code, errOut)
	}
	if out, errOut, code := cli("delete", "tenant", "web"); code != 0 || !strings.Contains(out, "tenant/web deleted") {
		t.Errorf("delete: exit %d\n%s%s", code, out, errOut)
	}
}

func TestControllerInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	out, errOut, code := run(t, "", "controller", "init", "--pki", dir, "--host", "s1", "--host", "s2", "--ip", "10.0.0.1")
	if code != 0 || !strings.Contains(out, "host s2") || !strings.Contains(out, "operator admin") {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := run(t, "", "controller", "init", "--pki", dir); code == 0 || !strings.Contains(errOut, "ca.") {
		t.Errorf("a second init: exit %d, %s", code, errOut)
	}
	if out, errOut, code := run(t, "", "controller", "issue", "--pki", dir, "--host", "s3"); code != 0 || !strings.Contains(out, "s3.crt") {
		t.Errorf("issue: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := run(t, "", "controller", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"); code == 0 || !strings.Contains(errOut, "bulkhead controller init") {
		t.Errorf("a controller without certificates: exit %d, %s", code, errOut)
	}
}

func TestControllerCLIErrors(t *testing.T) {
	dir := t.TempDir()
	url, _ := startController(t, dir)
	tok := filepath.Join(dir, "operator.token")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: bulkhead.dev/v1\nkind: Tenant\nmetadata: {name: a}\nspec:\n  vms: [{name: a1, gaurantee: 1Gbps}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte(`apiVersion: bulkhead.dev/v1
kind: Tenant
metadata: {name: big}
spec:
  guarantee: 800Mbps
  vms: [{name: b1, host: s1}, {name: b2, host: s2}]
---
apiVersion: bulkhead.dev/v1
kind: Tenant
metadata: {name: big2}
spec:
  guarantee: 800Mbps
  vms: [{name: c1, host: s1}, {name: c2, host: s3}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, "", "apply", "-f", "../../docs/examples/cluster.yaml", "--server", url, "--token-file", tok); code != 0 {
		t.Fatalf("cluster: %s", errOut)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"malformed file", []string{"apply", "-f", bad}, []string{bad + ":5:", "spec.vms", `unknown field "gaurantee"`}},
		{"guarantees that do not fit", []string{"apply", "-f", big}, []string{"admission", "would carry 1.6 Gbps of 1 Gbps"}},
		{"unknown kind", []string{"get", "widgets"}, []string{`unknown kind "widgets"`}},
		{"unknown object", []string{"get", "tenant", "ghost"}, []string{"ghost", "not found"}},
		{"wrong token", []string{"get", "tenants", "--token", "nope"}, []string{"unauthorized"}},
		{"no controller", []string{"get", "tenants", "--server", "http://127.0.0.1:1"}, []string{"controller at http://127.0.0.1:1"}},
		{"bad output format", []string{"get", "tenants", "-o", "xml"}, []string{"-o: expected yaml, json or wide"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{}, tt.args...), "--token-file", tok)
			if !strings.Contains(strings.Join(tt.args, " "), "--server") {
				args = append(args, "--server", url)
			}
			out, errOut, code := run(t, "", args...)
			if code == 0 {
				t.Fatalf("exit 0:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not contain %q", errOut, w)
				}
			}
		})
	}
	// Nothing of the refused applies was stored.
	out, _, _ := run(t, "", "get", "tenants", "--server", url, "--token-file", tok)
	if strings.Contains(out, "big") || strings.Contains(out, "a1") {
		t.Errorf("refused objects stored:\n%s", out)
	}
}

// TestNewcomerPath is the README's "Operating a cluster" path, as root: a
// controller with the embedded store, the emulated datacenter's agents
// under it (testbed run --controller), the scenario's tenants applied
// from the file the run writes, and `get tenants` showing achieved rates.
func TestNewcomerPath(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (network namespaces, traffic control): run the tests as root")
	}
	dir := t.TempDir()
	if out, errOut, code := run(t, "", "controller", "init", "--pki", filepath.Join(dir, "pki"), "--host", "s1", "--host", "s2", "--host", "s3"); code != 0 {
		t.Fatalf("init: %s%s", out, errOut)
	}
	url, _ := startController(t, dir)
	agents := agentsAddrOf(t, dir) // startController lets it pick a port

	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	outDir := t.TempDir()
	tb := exec.Command(bin, "testbed", "run", "../../scenarios/real-join.yaml", "-o", outDir, "--no-plots", "--workload", "builtin",
		"--controller", url, "--controller-agents", agents, "--token-file", filepath.Join(dir, "operator.token"),
		"--pki", filepath.Join(dir, "pki"), "--tenants-file", tenants, "--duration", "12s", "--prefix", "tnew"+strconv.Itoa(os.Getpid()%1000))
	var tbOut strings.Builder
	tb.Stdout, tb.Stderr = &tbOut, &tbOut
	if err := tb.Start(); err != nil {
		t.Fatal(err)
	}
	tbDone := make(chan error, 1)
	go func() { tbDone <- tb.Wait() }()
	t.Cleanup(func() {
		_ = tb.Process.Signal(syscall.SIGTERM)
		select {
		case <-tbDone:
		case <-time.After(30 * time.Second):
			_ = tb.Process.Kill()
		}
	})
	cli := func(args ...string) (string, string, int) {
		return run(t, "", append(args, "--server", url, "--token-file", filepath.Join(dir, "operator.token"))...)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(tenants); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the testbed wrote no tenants file within 60 s:\n%s", tbOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, errOut, code := cli("apply", "-f", tenants); code != 0 {
		t.Fatalf("apply the tenants: %s%s", out, errOut)
	}
	time.Sleep(8 * time.Second) // A starts 3 s into the run
	out, errOut, code := cli("get", "tenants", "-o", "json")
	if code != 0 {
		t.Fatalf("get tenants: %s%s", out, errOut)
	}
	var list struct {
		Objects []struct {
			Metadata struct{ Name string }
			Status   struct {
				Achieved, Guarantee float64
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Objects) != 2 {
		t.Fatalf("get tenants: %d tenants, want A and B:\n%s", len(list.Objects), out)
	}
	for _, o := range list.Objects {
		if o.Status.Achieved <= 0 {
			t.Errorf("tenant %s: no achieved rate reported:\n%s", o.Metadata.Name, out)
		}
	}
	table, _, _ := cli("get", "tenants")
	t.Logf("bulkhead get tenants:\n%s", table)
	if err := <-tbDone; err != nil {
		t.Errorf("testbed run: %v\n%s", err, tbOut.String())
	}
}

// agentsAddrOf reads the agents' address from the controller's log.
func agentsAddrOf(t *testing.T, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, " agents="); i >= 0 {
			f := strings.Fields(l[i+1:])[0]
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(f, "agents="))
			return "localhost:" + port
		}
	}
	t.Fatalf("no agents address in the controller's log:\n%s", b)
	return ""
}
