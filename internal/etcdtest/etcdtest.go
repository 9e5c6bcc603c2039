// Package etcdtest starts real etcd clusters for tests: Debian's etcd
// binary (/usr/bin/etcd, package etcd-server), one process per member,
// listening on loopback ports picked free, with data in t.TempDir().
//
// A test that needs etcd fails (never skips) when the binary is missing:
// CI installs it (scripts/test). The processes are killed when the test
// ends, whether it passed or failed; they also die if the test binary dies
// (parent-death signal), so a crashed test leaves no etcd behind.
package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is where Debian installs etcd.
const Binary = "/usr/bin/etcd"

// Server limits the members start with: large enough for the store's
// maximal commit (store.MaxCommitObjects+1 operations, store.MaxCommitBytes
// plus framing); etcd's defaults are 128 operations and 1.5 MiB. 10 MiB is
// etcd's recommended ceiling, and etcd 3.4 cannot replay a WAL entry over
// 10 MiB when it restarts.
const (
	// MaxTxnOps is the members' --max-txn-ops.
	MaxTxnOps = 10240
	// MaxRequestBytes is the members' --max-request-bytes.
	MaxRequestBytes = 10 << 20
)

// StartTimeout bounds how long a member may take to report healthy.
const StartTimeout = 30 * time.Second

// Cluster is a running etcd cluster.
type Cluster struct {
	t       testing.TB
	members []*member
	spawn   chan spawnReq // served by a goroutine locked to its OS thread
	mu      sync.Mutex    // guards the members' processes
}

type member struct {
	name      string
	clientURL string
	peerURL   string
	dataDir   string
	logPath   string
	args      []string
	cmd       *exec.Cmd
	exited    chan struct{} // closed when cmd has been waited for
	waitErr   error
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// Start starts a cluster of n members and waits until every member is
// healthy. It fails the test if etcd is missing or does not come up. The
// members are killed (SIGKILL) in t.Cleanup.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return start(t, Binary, n)
}

func start(t testing.TB, binary string, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest: a cluster needs at least one member, not %d", n)
	}
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("etcdtest: etcd is not installed (%v); install Debian's etcd-server (apt-get install etcd-server) or run scripts/test, which does", err)
	}
	c := &Cluster{t: t, spawn: make(chan spawnReq)}
	// Processes get a parent-death signal, which Linux sends when the
	// thread that started them exits; one goroutine locked to its thread
	// starts them all, and exits (its thread with it) at cleanup.
	stopSpawner := make(chan struct{})
	go c.spawner(stopSpawner)
	t.Cleanup(func() {
		c.killAll()
		if t.Failed() {
			c.dumpLogs()
		}
		close(stopSpawner)
	})

	// The ports were free when picked, but another process may take one
	// before etcd binds it: then start again on new ports.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		err := c.launch(t, binary, n)
		if err == nil {
			return c
		}
		c.killAll()
		if attempt == attempts || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("etcdtest: a port was taken (%v); starting again on new ports", err)
	}
}

// launch starts n members on fresh ports and data directories and waits
// until they are healthy.
func (c *Cluster) launch(t testing.TB, binary string, n int) error {
	dir := t.TempDir()
	ports, err := freePorts(2 * n)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.members = nil
	var initial []string
	for i := 0; i < n; i++ {
		m := &member{
			name:      fmt.Sprintf("m%d", i),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		}
		m.dataDir = filepath.Join(dir, m.name)
		m.logPath = filepath.Join(dir, m.name+".log")
		initial = append(initial, m.name+"="+m.peerURL)
		c.members = append(c.members, m)
	}
	token := fmt.Sprintf("etcdtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, m := range c.members {
		m.args = []string{binary,
			"--name", m.name,
			"--data-dir", m.dataDir,
			"--listen-client-urls", m.clientURL,
			"--advertise-client-urls", m.clientURL,
			"--listen-peer-urls", m.peerURL,
			"--initial-advertise-peer-urls", m.peerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--max-txn-ops", fmt.Sprint(MaxTxnOps),
			"--max-request-bytes", fmt.Sprint(MaxRequestBytes),
			"--logger", "zap",
			"--log-outputs", m.logPath,
		}
	}
	c.mu.Unlock()
	for i := range c.members {
		if err := c.startMember(i); err != nil {
			return err
		}
	}
	for i := range c.members {
		if err := c.waitHealthy(i); err != nil {
			return err
		}
	}
	return nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var (
		ports []int
		lns   []net.Listener
	)
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *Cluster) spawner(stop <-chan struct{}) {
	runtime.LockOSThread()
	// Never unlocked: the thread exits with this goroutine, which sends
	// the parent-death signal to whatever is still running.
	for {
		select {
		case r := <-c.spawn:
			r.done <- r.cmd.Start()
		case <-stop:
			return
		}
	}
}

func (c *Cluster) startMember(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	logf, err := os.OpenFile(m.logPath+".stderr", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	cmd := exec.Command(m.args[0], m.args[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	done := make(chan error, 1)
	c.spawn <- spawnReq{cmd: cmd, done: done}
	if err := <-done; err != nil {
		_ = logf.Close()
		return fmt.Errorf("etcdtest: start member %s: %w", m.name, err)
	}
	m.cmd = cmd
	m.exited = make(chan struct{})
	go func(exited chan struct{}) {
		m.waitErr = cmd.Wait()
		_ = logf.Close()
		close(exited)
	}(m.exited)
	return nil
}

// waitHealthy polls the member's /health until it reports healthy (which
// needs a quorum), failing the test if the process exits or StartTimeout
// passes.
func (c *Cluster) waitHealthy(i int) error {
	m := c.members[i]
	c.mu.Lock()
	exited := m.exited
	c.mu.Unlock()
	deadline := time.Now().Add(StartTimeout)
	client := &http.Client{Timeout: time.Second}
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("etcdtest: member %s exited while starting (%v); log:\n%s", m.name, m.waitErr, tail(m.logPath, 30))
		default:
		}
		if last = healthy(context.Background(), client, m.clientURL); last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("etcdtest: member %s not healthy within %v (last: %v); log:\n%s", m.name, StartTimeout, last, tail(m.logPath, 30))
}

// Endpoints returns the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// Endpoint returns member i's client URL.
func (c *Cluster) Endpoint(i int) string { return c.members[i].clientURL }

// Size returns the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Kill sends SIGKILL to member i and waits for it to exit. Killing a
// stopped member does nothing. Kill, Restart and the other methods may be
// called from any goroutine and subtest.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.killLocked(c.members[i])
}

func (c *Cluster) killLocked(m *member) {
	if m.cmd == nil {
		return
	}
	select {
	case <-m.exited:
	default:
		// The whole process group: etcd starts no children, but be sure.
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
	}
	m.cmd = nil
}

// Restart kills member i if it runs, starts it again on its data
// directory and ports, and waits until it is healthy (for a member of a
// larger cluster, until it rejoined a quorum). The error carries the
// member's log.
func (c *Cluster) Restart(i int) error {
	c.Kill(i)
	if err := c.startMember(i); err != nil {
		return err
	}
	return c.waitHealthy(i)
}

// Running reports whether member i's process runs.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

func (c *Cluster) killAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		c.killLocked(m)
	}
}

func (c *Cluster) dumpLogs() {
	for _, m := range c.members {
		c.t.Logf("etcdtest: member %s (%s), last lines of its log:\n%s", m.name, m.clientURL, tail(m.logPath, 20))
	}
}

// tail returns the last n lines of the file (and of its .stderr twin).
func tail(path string, n int) string {
	var out []string
	for _, p := range []string{path, path + ".stderr"} {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		out = append(out, lines...)
	}
	return strings.Join(out, "\n")
}

// WaitHealthy waits until member i reports healthy, or ctx ends.
func (c *Cluster) WaitHealthy(ctx context.Context, i int) error {
	client := &http.Client{Timeout: time.Second}
	for {
		err := healthy(ctx, client, c.members[i].clientURL)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: member %s not healthy (%v): %w", c.members[i].name, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// healthy asks the member at url for /health; nil when it reports healthy
// (it has a leader and no alarm).
func healthy(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), `"health":"true"`) {
		return fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(body.String()))
	}
	return nil
}
