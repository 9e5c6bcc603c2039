package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted (the same
// place `ip netns` uses).
const NetnsDir = "/run/netns"

// RequireRoot returns an error explaining why the data plane cannot run
// unless the process is root.
func RequireRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("the data plane needs root: it creates network namespaces, veth and IFB devices and HTB qdiscs " +
			"(CAP_SYS_ADMIN and CAP_NET_ADMIN); run as root (e.g. with sudo)")
	}
	return nil
}

var nsNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$`)

// ValidNSName reports whether name can name a network namespace here.
func ValidNSName(name string) bool { return nsNameRE.MatchString(name) }

// NSOptions configures a new namespace.
type NSOptions struct {
	// Forwarding enables IPv4 forwarding (routers: servers and switches).
	Forwarding bool
}

// NS is a named network namespace with a netlink handle inside it. The
// methods of an NS are safe for concurrent use.
type NS struct {
	Name string
	h    netns.NsHandle
	nl   *netlink.Handle
	// sockets for raw requests the netlink package does not build
	raw map[int]*nl.SocketHandle

	fastMu sync.Mutex
	fast   *fastNL // opened on first use
}

// fastSocket returns the namespace's hot-path netlink socket.
func (n *NS) fastSocket() (*fastNL, error) {
	n.fastMu.Lock()
	defer n.fastMu.Unlock()
	if n.fast == nil {
		f, err := newFastNL(n)
		if err != nil {
			return nil, fmt.Errorf("netns %s: %w", n.Name, err)
		}
		n.fast = f
	}
	return n.fast, nil
}

// CreateNS creates the named network namespace (failing if it exists),
// brings its loopback up, disables IPv6 in it (no neighbour discovery
// noise on the counters) and applies opts.
func CreateNS(name string, opts NSOptions) (*NS, error) {
	if !ValidNSName(name) {
		return nil, fmt.Errorf("create netns %q: invalid name", name)
	}
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return nil, fmt.Errorf("create netns %q: %w", name, err)
	}
	sysctls := map[string]string{
		"net/ipv6/conf/all/disable_ipv6":     "1",
		"net/ipv6/conf/default/disable_ipv6": "1",
		// IPv4 settings are inherited from the host's namespace: make
		// sure no reverse-path filter drops asymmetric (ECMP) routes.
		"net/ipv4/conf/all/rp_filter":     "0",
		"net/ipv4/conf/default/rp_filter": "0",
	}
	if opts.Forwarding {
		sysctls["net/ipv4/ip_forward"] = "1"
	}
	err := onLockedThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return fmt.Errorf("get current netns: %w", err)
		}
		defer orig.Close()
		// NewNamed moves this thread into the new namespace (even when it
		// fails after that), so return to orig in every case.
		h, serr := netns.NewNamed(name)
		if serr != nil {
			serr = fmt.Errorf("new netns: %w", serr)
		} else {
			h.Close()
			// /proc/sys/net resolves to the calling thread's namespace.
			for _, k := range sortedKeys(sysctls) {
				if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(sysctls[k]), 0o644); err != nil {
					serr = fmt.Errorf("sysctl %s: %w", strings.ReplaceAll(k, "/", "."), err)
					break
				}
			}
		}
		if err := netns.Set(orig); err != nil {
			return errThreadTainted{errors.Join(serr, fmt.Errorf("return to the original netns: %w", err))}
		}
		return serr
	})
	if err != nil {
		if !errors.Is(err, os.ErrExist) {
			_ = DeleteNS(name)
		}
		return nil, fmt.Errorf("create netns %q: %w", name, err)
	}
	n, err := OpenNS(name)
	if err != nil {
		_ = DeleteNS(name)
		return nil, err
	}
	if err := n.SetUp("lo"); err != nil {
		n.Close()
		_ = DeleteNS(name)
		return nil, fmt.Errorf("create netns %q: %w", name, err)
	}
	return n, nil
}

// OpenNS opens an existing named namespace.
func OpenNS(name string) (*NS, error) {
	if !ValidNSName(name) {
		return nil, fmt.Errorf("open netns %q: invalid name", name)
	}
	return openNS(name, filepath.Join(NetnsDir, name))
}

// OpenNSPath opens the namespace whose file is path (/proc/PID/ns/net,
// a bind mount a container runtime made, /proc/self/ns/net for the
// namespace the process runs in), called name in messages. Cleanup and
// ListNS know only the namespaces in NetnsDir.
func OpenNSPath(name, path string) (*NS, error) {
	if name == "" {
		return nil, fmt.Errorf("open netns at %s: no name", path)
	}
	return openNS(name, path)
}

func openNS(name, path string) (*NS, error) {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", name, err)
	}
	nh, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("open netns %q: netlink handle: %w", name, err)
	}
	s, err := nl.GetNetlinkSocketAt(h, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		nh.Close()
		h.Close()
		return nil, fmt.Errorf("open netns %q: netlink socket: %w", name, err)
	}
	return &NS{Name: name, h: h, nl: nh, raw: map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: s}}}, nil
}

// Close releases the handles; the namespace stays. A namespace is only
// destroyed once no process and no open handle refers to it, so close every
// NS before expecting DeleteNS to free its devices.
func (n *NS) Close() {
	if n == nil {
		return
	}
	if n.nl != nil {
		n.nl.Close()
		n.nl = nil
	}
	for _, s := range n.raw {
		s.Close()
	}
	n.raw = nil
	n.fastMu.Lock()
	if n.fast != nil {
		n.fast.close()
		n.fast = nil
	}
	n.fastMu.Unlock()
	if n.h.IsOpen() {
		n.h.Close()
	}
}

// Netlink returns the netlink handle bound to the namespace, for
// operations this package does not wrap.
func (n *NS) Netlink() *netlink.Handle { return n.nl }

// Inode returns the namespace's inode number (what /proc/PID/ns/net links
// to), which identifies it across processes.
func (n *NS) Inode() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(n.h), &st); err != nil {
		return 0, fmt.Errorf("stat netns %q: %w", n.Name, err)
	}
	return st.Ino, nil
}

func nsInode(name string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(NetnsDir, name), &st); err != nil {
		return 0, fmt.Errorf("stat netns %q: %w", name, err)
	}
	return st.Ino, nil
}

// Do runs fn on an OS thread that is inside the namespace; processes
// started by fn (os/exec) are born in it. fn must not start goroutines that
// expect to stay in the namespace.
func (n *NS) Do(fn func() error) error {
	return onLockedThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return fmt.Errorf("netns %s: get current netns: %w", n.Name, err)
		}
		defer orig.Close()
		if err := netns.Set(n.h); err != nil {
			return fmt.Errorf("netns %s: enter: %w", n.Name, err)
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			return errThreadTainted{fmt.Errorf("netns %s: leave: %w", n.Name, err)}
		}
		return ferr
	})
}

// errThreadTainted marks a thread left in a foreign namespace: it must
// not return to the scheduler's pool.
type errThreadTainted struct{ err error }

func (e errThreadTainted) Error() string { return e.err.Error() }
func (e errThreadTainted) Unwrap() error { return e.err }

// onLockedThread runs fn on a goroutine locked to its OS thread. When fn
// reports the thread tainted, the goroutine exits still locked, and the
// runtime then terminates the thread instead of reusing it.
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := fn()
		var t errThreadTainted
		if !errors.As(err, &t) {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// DeleteNS unmounts and removes the named namespace; the kernel destroys it
// (with its devices) once no process or handle refers to it. A namespace
// that does not exist is not an error.
func DeleteNS(name string) error {
	if !ValidNSName(name) {
		return fmt.Errorf("delete netns %q: invalid name", name)
	}
	p := filepath.Join(NetnsDir, name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("delete netns %q: unmount: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %q: %w", name, err)
	}
	return nil
}

// ListNS returns the named namespaces whose names start with prefix,
// sorted.
func ListNS(prefix string) ([]string, error) {
	ents, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list netns: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
