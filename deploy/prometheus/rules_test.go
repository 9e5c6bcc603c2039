// Package prometheus holds Bulkhead's Prometheus alerting and recording
// rules (bulkhead-rules.yaml) and their unit tests
// (bulkhead-rules_test.yaml); its Go test runs promtool on them.
package prometheus

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// promtool finds promtool, failing the test when it is missing: the
// rules are part of what CI checks.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install it (Debian: apt-get install -y prometheus; scripts/test does)")
	}
	return p
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// TestCheckRules: the rules are valid (`promtool check rules`).
func TestCheckRules(t *testing.T) {
	run(t, "check", "rules", "bulkhead-rules.yaml")
}

// TestRules runs the rules' unit tests (`promtool test rules`).
func TestRules(t *testing.T) {
	run(t, "test", "rules", "bulkhead-rules_test.yaml")
}

// TestAgentMetricNames: every agent metric the rules use is one the agent
// defines (agent/metrics.go). The controller's are checked against a
// running controller by controller/metrics_test.go.
func TestAgentMetricNames(t *testing.T) {
	rules, err := os.ReadFile("bulkhead-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../agent/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`bulkhead_agent_[a-z_]+`).FindAllString(string(rules), -1)
	if len(used) == 0 {
		t.Fatal("the rules use no agent metric")
	}
	for _, name := range used {
		if !strings.Contains(string(src), `"`+name+`"`) {
			t.Errorf("bulkhead-rules.yaml uses %s, which agent/metrics.go does not define", name)
		}
	}
}
