package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestKillRestart: a member killed stops answering; restarted on its data
// it answers again; cleanup kills the rest.
func TestKillRestart(t *testing.T) {
	c := Start(t, 1)
	if got := len(c.Endpoints()); got != 1 {
		t.Fatalf("%d endpoints, want 1", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx, 0); err != nil {
		t.Fatal(err)
	}
	c.Kill(0)
	if c.Running(0) {
		t.Fatal("member 0 still runs after Kill")
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if err := c.WaitHealthy(short, 0); err == nil {
		t.Fatal("a killed member reports healthy")
	}
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}
	if !c.Running(0) {
		t.Fatal("member 0 does not run after Restart")
	}
	if err := c.WaitHealthy(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// fakeTB records Fatalf instead of failing the real test, to check that
// Start fails (rather than skips) without etcd.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	failed   string
	skipped  bool
	cleanups []func()
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Fatal(args ...any)    { f.Fatalf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) FailNow()             { f.Fatalf("FailNow") }
func (f *fakeTB) Skip(...any)          { f.skipped = true; runtime.Goexit() }
func (f *fakeTB) Skipf(string, ...any) { f.skipped = true; runtime.Goexit() }
func (f *fakeTB) SkipNow()             { f.skipped = true; runtime.Goexit() }
func (f *fakeTB) Cleanup(fn func())    { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Failed() bool         { return f.failed != "" }

func TestStartFails(t *testing.T) {
	cases := []struct {
		name   string
		binary string
		n      int
		want   string
	}{
		{"missing binary", "/nonexistent/etcd", 1, "etcd is not installed"},
		{"no members", Binary, 0, "at least one member"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				start(f, tc.binary, tc.n)
			}()
			<-done
			for i := len(f.cleanups) - 1; i >= 0; i-- {
				f.cleanups[i]()
			}
			if f.skipped {
				t.Fatal("Start skipped; it must fail")
			}
			if !strings.Contains(f.failed, tc.want) {
				t.Fatalf("Start failed with %q, want it to mention %q", f.failed, tc.want)
			}
		})
	}
}

// TestNoOrphans: a test process that dies without its cleanups (os.Exit,
// a crash, a timeout) leaves no etcd running: the members get SIGKILL
// when it dies.
func TestNoOrphans(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanHelper$")
	cmd.Env = append(os.Environ(), "ETCDTEST_ORPHAN_HELPER=1")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("helper: %v, output %q", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("etcd (pid %d) outlived its test process by 5 s", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestOrphanHelper is TestNoOrphans' test process: it starts a member,
// prints its pid and exits without cleaning up.
func TestOrphanHelper(t *testing.T) {
	if os.Getenv("ETCDTEST_ORPHAN_HELPER") == "" {
		return // run only as TestNoOrphans' helper process
	}
	c := Start(t, 1)
	fmt.Println(c.members[0].cmd.Process.Pid)
	os.Exit(3)
}
