// Package appliancetest starts real appliances for tests: redis-server and
// nginx as a WebDAV file store (Debian's redis-server and nginx), on
// loopback ports with temporary directories, stopped when the test ends.
package appliancetest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Need returns the path of a binary the integration tests run, failing the
// test when it is missing: CI installs it (Debian: redis-server, redis-tools,
// nginx).
func Need(t testing.TB, bin, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s not found: install the Debian package %s (apt-get install -y %s)", bin, pkg, pkg)
	}
	return p
}

// FreePort returns a loopback TCP port nobody listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitDial waits until addr accepts connections.
func waitDial(t testing.TB, addr string, cmd *exec.Cmd, logFile string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(logFile)
	t.Fatalf("%s did not listen on %s: log:\n%s", cmd.Path, addr, log)
}

// StartRedis runs a redis-server on a loopback port with a temporary
// directory, stopped at cleanup; it returns its address.
func StartRedis(t testing.TB) string {
	t.Helper()
	bin := Need(t, "redis-server", "redis-server")
	dir := t.TempDir()
	port := FreePort(t)
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", logFile, "--daemonize", "no",
		"--proto-max-bulk-len", "1gb", "--client-query-buffer-limit", "1gb")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitDial(t, addr, cmd, logFile)
	return addr
}

// StartNginx runs nginx as a WebDAV file store (PUT, DELETE) on a loopback
// port over a temporary directory, stopped at cleanup; it returns its
// address.
func StartNginx(t testing.TB) string {
	t.Helper()
	bin := Need(t, "nginx", "nginx")
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for _, d := range []string{root, filepath.Join(dir, "tmp"), filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777) // the workers may run as nobody
	}
	os.Chmod(dir, 0o755)
	port := FreePort(t)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	conf := fmt.Sprintf(`%s
worker_processes 1;
daemon off;
pid %[2]s/nginx.pid;
error_log %[2]s/logs/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %[2]s/tmp/body;
  proxy_temp_path %[2]s/tmp/proxy;
  fastcgi_temp_path %[2]s/tmp/fastcgi;
  uwsgi_temp_path %[2]s/tmp/uwsgi;
  scgi_temp_path %[2]s/tmp/scgi;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:%[3]d;
    root %[4]s;
    client_max_body_size 0;
    dav_methods PUT DELETE;
    create_full_put_path on;
  }
}
`, user, dir, port, root)
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", confFile, "-p", dir, "-e", filepath.Join(dir, "logs", "error.log"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	t.Cleanup(func() {
		// SIGTERM: the master stops its workers, then exits.
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitDial(t, addr, cmd, filepath.Join(dir, "logs", "error.log"))
	return addr
}
