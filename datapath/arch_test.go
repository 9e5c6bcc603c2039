package datapath_test

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/bulkhead-dc/bulkhead/"

// linuxDeps are what only the Linux data path may depend on: netlink,
// eBPF and the packages over them.
var linuxDeps = []string{
	module + "dataplane", module + "datapath/linux",
	"github.com/vishvananda/netlink", "github.com/vishvananda/netns", "github.com/cilium/ebpf",
}

func under(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }

// goList runs go list with a template over patterns and returns its
// lines' fields.
func goList(t *testing.T, format string, patterns ...string) [][]string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", format}, patterns...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var lines [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		lines = append(lines, strings.Fields(l))
	}
	return lines
}

// TestSeam: the data path seam. The interfaces (datapath) and the fake
// depend on nothing of Linux; the host agent drives the interfaces only
// (no netlink, eBPF, dataplane or datapath/linux among its dependencies,
// tests included); datapath/linux is imported only by the testbed and the
// agent (and their tests): the command goes through the testbed
// (testbed.AttachAgent) to get a server's data path.
func TestSeam(t *testing.T) {
	for _, l := range goList(t, `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"datapath", module+"datapath/fake") {
		for _, dep := range l[1:] {
			for _, bad := range linuxDeps {
				if under(dep, bad) {
					t.Errorf("%s depends on %s", l[0], dep)
				}
			}
		}
	}
	// the agent and its tests, with their dependencies
	for _, l := range goList(t, `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "-test", module+"agent") {
		for _, dep := range l[1:] {
			for _, bad := range linuxDeps {
				if under(dep, bad) {
					t.Errorf("%s depends on %s", l[0], dep)
				}
			}
		}
	}
	importers := 0
	for _, l := range goList(t, `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, module+"...") {
		for _, imp := range l[1:] {
			if imp != module+"datapath/linux" {
				continue
			}
			if under(l[0], module+"agent") || under(l[0], module+"testbed") {
				importers++
				continue
			}
			t.Errorf("%s imports datapath/linux; only the agent and the testbed may", l[0])
		}
	}
	if importers == 0 {
		t.Error("nothing imports datapath/linux: the test lists no package")
	}
}

// TestNoMechanismNames: the drivers of real traffic know mechanisms only
// through the registry (mech/all) and their declared capabilities: no
// package of the agent or the testbed (tests included), nor the command's
// agent and testbed commands, imports a mechanism's package.
func TestNoMechanismNames(t *testing.T) {
	allowed := map[string]bool{module + "mech": true, module + "mech/all": true, module + "mech/drive": true}
	check := func(where, imp string) {
		if under(imp, module+"mech") && !allowed[imp] {
			t.Errorf("%s imports %s", where, imp)
		}
	}
	for _, l := range goList(t, `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`,
		module+"agent/...", module+"testbed/...", module+"datapath/...") {
		for _, imp := range l[1:] {
			check(l[0], imp)
		}
	}
	files := []string{"agent.go", "agent_test.go", "testbed.go"}
	for _, f := range files {
		path := filepath.Join("..", "cmd", "bulkhead", f)
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range file.Imports {
			imp, _ := strconv.Unquote(is.Path.Value)
			check(path, imp)
			if imp == module+"datapath/linux" || imp == module+"mech/all" {
				t.Errorf("%s imports %s: the command goes through the testbed", path, imp)
			}
		}
	}
}
