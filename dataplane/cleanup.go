package dataplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
)

// EnvRun is the environment variable that marks a process as belonging to
// a run: Command sets EnvRun=prefix, and Cleanup kills every process that
// carries its prefix.
const EnvRun = "BULKHEAD_RUN"

// MaxPrefix is the longest run prefix: interface names (15 bytes) must fit
// the prefix and a short suffix.
const MaxPrefix = 8

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]{1,7}$`)

// ValidPrefix checks a run prefix: 2 to 8 lowercase letters and digits,
// starting with a letter. Namespaces of the run are named PREFIX-..., its
// links PREFIX...
func ValidPrefix(p string) error {
	if !prefixRE.MatchString(p) {
		return fmt.Errorf("run prefix %q: want 2 to %d lowercase letters or digits, starting with a letter", p, MaxPrefix)
	}
	return nil
}

// RandomPrefix returns a fresh run prefix: lead (a lowercase letter and
// one more letter or digit) and five random lowercase letters or digits.
func RandomPrefix(lead string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	p := []byte(lead)
	for _, c := range b {
		p = append(p, alphabet[int(c)%len(alphabet)])
	}
	return string(p)
}

// NSPrefix is the name prefix of a run's namespaces.
func NSPrefix(prefix string) string { return prefix + "-" }

// Command returns a command that runs inside ns, marked as belonging to the
// run prefix (EnvRun) so that Cleanup finds it, in its own process group,
// and killed if the thread that started it exits. Start it with
// StartIn.
func Command(ctx context.Context, prefix string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), EnvRun+"="+prefix)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// StartIn starts cmd inside the namespace.
func (n *NS) StartIn(cmd *exec.Cmd) error {
	if err := n.Do(cmd.Start); err != nil {
		return fmt.Errorf("netns %s: start %s: %w", n.Name, cmd.Path, err)
	}
	return nil
}

// Processes returns the PIDs (sorted) of the processes that belong to the
// run: those marked with EnvRun=prefix and those whose network namespace is
// one of the run's named namespaces. The calling process is never listed.
func Processes(prefix string) ([]int, error) {
	if err := ValidPrefix(prefix); err != nil {
		return nil, err
	}
	names, err := ListNS(NSPrefix(prefix))
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, n := range names {
		if ino, err := nsInode(n); err == nil {
			inodes[ino] = true
		}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	marker := []byte(EnvRun + "=" + prefix)
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if len(inodes) > 0 {
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join("/proc", e.Name(), "ns/net"), &st) == nil && inodes[st.Ino] {
				pids = append(pids, pid)
				continue
			}
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue // gone, or a kernel thread
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, marker) {
				pids = append(pids, pid)
				break
			}
		}
	}
	sort.Ints(pids)
	return pids, nil
}

// KillProcesses kills (SIGKILL) the run's processes and waits until they
// are gone or ctx ends.
func KillProcesses(ctx context.Context, prefix string) error {
	for {
		pids, err := Processes(prefix)
		if err != nil {
			return err
		}
		live := 0
		for _, pid := range pids {
			if zombie(pid) {
				continue // dead, waiting for its parent to reap it
			}
			live++
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill process %d of run %s: %w", pid, prefix, err)
			}
		}
		if live == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes of run %s still alive: %v: %w", prefix, pids, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// zombie reports whether the process has exited but not been reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true // gone
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// Cleanup removes everything of the run prefix: it kills its processes,
// deletes its namespaces (and with them every device, qdisc, class and
// filter inside them, and veth peers elsewhere) and any device named with
// the prefix in the caller's namespace (where nothing of a run is ever
// created, but a crashed foreign tool might have). Handles (NS) of the run
// held by this process must be closed first, or the namespaces linger
// until they are. It keeps going after errors and returns them all.
func Cleanup(ctx context.Context, prefix string) error {
	if err := ValidPrefix(prefix); err != nil {
		return err
	}
	var errs []error
	if err := KillProcesses(ctx, prefix); err != nil {
		errs = append(errs, err)
	}
	names, err := ListNS(NSPrefix(prefix))
	if err != nil {
		errs = append(errs, err)
	}
	for _, n := range names {
		if err := DeleteNS(n); err != nil {
			errs = append(errs, err)
		}
	}
	links, err := hostLinks(prefix)
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range links {
		if err := netlink.LinkDel(l); err != nil && !errors.Is(err, syscall.ENODEV) {
			errs = append(errs, fmt.Errorf("delete link %s: %w", l.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

func hostLinks(prefix string) ([]netlink.Link, error) {
	ls, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []netlink.Link
	for _, l := range ls {
		if strings.HasPrefix(l.Attrs().Name, prefix) {
			out = append(out, l)
		}
	}
	return out, nil
}

// Leftovers is what of a run still exists.
type Leftovers struct {
	Namespaces []string
	Links      []string // in the caller's namespace
	Processes  []int
}

// Empty reports whether nothing is left.
func (l Leftovers) Empty() bool {
	return len(l.Namespaces) == 0 && len(l.Links) == 0 && len(l.Processes) == 0
}

func (l Leftovers) String() string {
	if l.Empty() {
		return "nothing"
	}
	var parts []string
	if len(l.Namespaces) > 0 {
		parts = append(parts, "namespaces "+strings.Join(l.Namespaces, ", "))
	}
	if len(l.Links) > 0 {
		parts = append(parts, "links "+strings.Join(l.Links, ", "))
	}
	if len(l.Processes) > 0 {
		s := make([]string, len(l.Processes))
		for i, p := range l.Processes {
			s[i] = strconv.Itoa(p) + " " + comm(p)
		}
		parts = append(parts, "processes "+strings.Join(s, ", "))
	}
	return strings.Join(parts, "; ")
}

func comm(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return "(gone)"
	}
	return "(" + strings.TrimSpace(string(b)) + ")"
}

// Find lists what of the run prefix exists: its namespaces, links named
// with it in the caller's namespace, and its live processes.
func Find(prefix string) (Leftovers, error) {
	var l Leftovers
	if err := ValidPrefix(prefix); err != nil {
		return l, err
	}
	var err error
	if l.Namespaces, err = ListNS(NSPrefix(prefix)); err != nil {
		return l, err
	}
	links, err := hostLinks(prefix)
	if err != nil {
		return l, err
	}
	for _, k := range links {
		l.Links = append(l.Links, k.Attrs().Name)
	}
	pids, err := Processes(prefix)
	if err != nil {
		return l, err
	}
	for _, p := range pids {
		if !zombie(p) {
			l.Processes = append(l.Processes, p)
		}
	}
	return l, nil
}
