package all_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The architecture's one rule: a mechanism is control logic over
// observations and actions, driven the same way by the simulator and by
// the host agents. No package under mech/ may depend (directly or not) on
// the simulator, the runner, the Linux data plane, the testbed or the
// agent daemon, nor on netlink or eBPF.
func TestMechanismsImportNoDriver(t *testing.T) {
	const module = "github.com/bulkhead-dc/bulkhead/"
	forbidden := []string{
		module + "sim", module + "runner", module + "dataplane", module + "testbed",
		module + "agent", module + "cmd",
		"github.com/vishvananda/netlink", "github.com/cilium/ebpf",
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"mech/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 8 {
		t.Fatalf("go list found %d mechanism packages, want every package under mech/", len(lines))
	}
	for _, line := range lines {
		f := strings.Fields(line)
		for _, dep := range f[1:] {
			for _, bad := range forbidden {
				if dep == bad || strings.HasPrefix(dep, bad+"/") {
					t.Errorf("%s depends on %s", f[0], dep)
				}
			}
		}
	}
}
