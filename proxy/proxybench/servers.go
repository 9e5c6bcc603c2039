package proxybench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Binaries the bench runs, with the Debian package of each.
var binaries = map[string]string{
	"redis-server":    "redis-server",
	"redis-benchmark": "redis-tools",
	"nutcracker":      "nutcracker",
}

// need returns the path of bin, or an error naming the Debian package that
// provides it.
func need(bin string) (string, error) {
	p, err := exec.LookPath(bin)
	if err != nil {
		pkg := binaries[bin]
		return "", fmt.Errorf("%s not found in PATH: install the Debian package %s (apt-get install -y %s)", bin, pkg, pkg)
	}
	return p, nil
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// process is a server the bench started: stopped by Stop, and killed by
// the kernel if the bench dies first (Pdeathsig).
type process struct {
	name string
	cmd  *exec.Cmd
	addr string
	log  string
	done chan struct{}
	err  error // of Wait, once done is closed
}

func start(name, bin string, args []string, addr, logFile string) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, addr: addr, log: logFile, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	if err := p.waitReady(); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// waitReady waits until the server answers PING on its address.
func (p *process) waitReady() error {
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before listening on %s; log %s:\n%s", p.name, p.err, p.addr, p.log, tail(p.log))
		default:
		}
		if last = ping(p.addr); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer PING on %s within 10 s (%v); log %s:\n%s", p.name, p.addr, last, p.log, tail(p.log))
}

// ping sends a RESP PING to addr and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

func tail(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Stop ends the server: SIGTERM, then SIGKILL after 5 s.
func (p *process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// cpu returns the process's CPU time so far (user + system), from
// /proc/PID/stat.
func (p *process) cpu() (time.Duration, error) {
	return procCPU(p.cmd.Process.Pid)
}

// syscalls returns the read and write system calls the process made so
// far.
func (p *process) syscalls() (uint64, error) {
	return procSyscalls(strconv.Itoa(p.cmd.Process.Pid))
}

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat's times (100
// on every Linux ABI).
const clockTicks = 100

func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU returns utime + stime from a /proc/PID/stat line. The
// command name (field 2) is in parentheses and may hold spaces: the fields
// are counted after its closing parenthesis.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// procSyscalls returns the read and write system calls pid made so far
// (syscr + syscw of /proc/PID/io: read, write, recv, send and their
// vector forms; not epoll_wait).
func procSyscalls(pid string) (uint64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return 0, err
	}
	return parseIOSyscalls(string(b))
}

func parseIOSyscalls(io string) (uint64, error) {
	var n uint64
	found := 0
	for _, line := range strings.Split(io, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "syscr" && k != "syscw") {
			continue
		}
		x, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc io: %s: %w", k, err)
		}
		n += x
		found++
	}
	if found != 2 {
		return 0, errors.New("/proc io: no syscr and syscw")
	}
	return n, nil
}

// selfCPU returns this process's CPU time so far (user + system), from
// getrusage: the in-process proxy's, since nothing else here works while
// redis-benchmark runs.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startRedis runs redis-server on a loopback port in dir, without
// persistence.
func startRedis(dir string) (*process, error) {
	bin, err := need("redis-server")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "redis.log")
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", logFile, "--daemonize", "no"}
	return start("redis-server", bin, args, fmt.Sprintf("127.0.0.1:%d", port), logFile)
}

// twemproxyConfig is nutcracker's configuration: one pool on listen, in
// front of the one Redis server.
func twemproxyConfig(listen, redis string) string {
	return fmt.Sprintf(`bench:
  listen: %s
  redis: true
  hash: fnv1a_64
  distribution: ketama
  preconnect: true
  auto_eject_hosts: false
  server_connections: 1
  timeout: 10000
  servers:
    - %s:1
`, listen, redis)
}

// startTwemproxy runs nutcracker on a loopback port in front of redis,
// its configuration, log and pid file in dir.
func startTwemproxy(dir, redis string) (*process, error) {
	bin, err := need("nutcracker")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	stats, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	conf := filepath.Join(dir, "nutcracker.yml")
	if err := os.WriteFile(conf, []byte(twemproxyConfig(addr, redis)), 0o644); err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "nutcracker.log")
	check, err := exec.Command(bin, "--test-conf", "--conf-file", conf).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("nutcracker refuses its configuration %s: %v\n%s", conf, err, check)
	}
	args := []string{"--conf-file", conf, "--stats-port", strconv.Itoa(stats), "--stats-addr", "127.0.0.1",
		"--pid-file", filepath.Join(dir, "nutcracker.pid"), "--output", logFile, "--verbose", "4"}
	return start("nutcracker", bin, args, addr, logFile)
}

// version returns the first line bin prints for --version.
func version(ctx context.Context, bin string) string {
	out, _ := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}
