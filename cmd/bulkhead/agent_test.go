package main

import (
	"strings"
	"testing"
)

// TestAgentBadInvocations: the agent refuses, with a clear message and a
// non-zero exit, what it cannot run.
func TestAgentBadInvocations(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "../../scenarios/elasticswitch-real-fig5.yaml"}, "--prefix and --server are required"},
		{[]string{"agent", "../../scenarios/elasticswitch-real-fig5.yaml", "--prefix", "bhnope1", "--server", "s1"}, ""},
		{[]string{"agent"}, "give --controller ADDR --host NAME, or a scenario"},
		{[]string{"agent", "--controller", "127.0.0.1:1"}, "--host is required"},
		{[]string{"agent", "x.yaml", "--controller", "127.0.0.1:1", "--host", "s1"}, "no scenario, --prefix or --server"},
		{[]string{"agent", "--controller", "127.0.0.1:1", "--host", "s1", "--pki", "/nonexistent"}, "bulkhead controller issue --host s1"},
		{[]string{"agent", "--controller", "127.0.0.1:1", "--host", "s1", "--http", "0.0.0.0:9100"}, "--http-token-file"},
		{[]string{"agent", "--controller", "127.0.0.1:1", "--host", "s1", "--http", "9100"}, "expected IP:PORT"},
		{[]string{"agent", "--controller", "127.0.0.1:1", "--host", "s1", "--http", "10.1.2.3:9100", "--http-token-file", "/nonexistent"}, "--http-token-file"},
		{[]string{"agent", "--controller", "127.0.0.1:1", "--host", "s1", "--http-token-file", "agent_test.go"}, "expected one token on one line"},
	} {
		out, errs, code := run(t, "", tc.args...)
		if code == 0 {
			t.Errorf("%v: exit 0: %s", tc.args, out)
		}
		if tc.want != "" && !strings.Contains(errs, tc.want) {
			t.Errorf("%v: stderr %q, want it to mention %q", tc.args, errs, tc.want)
		}
	}
}
