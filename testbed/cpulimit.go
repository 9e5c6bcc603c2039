package testbed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// An appliance's real server gets the CPU its model declares, as a link
// gets its rate: an appliance with `parallelism` p below 1 serves p
// service-seconds per second, so its server runs in a control group of
// its own whose CPU quota is p of one CPU (the kernel's CFS bandwidth
// control), with the largest CPU weight, so that it gets that share
// however busy the machine is. Without it, a real server on the emulating machine is never
// the bottleneck that the scenario describes: the clients, the agents'
// proxies and the emulated links share the same cores and run out first.
// Parallelism of 1 or more leaves the server alone (Redis and the file
// store's nginx serve on one thread).

// cpuPeriod is the quota's period: short, so that a server at its quota
// waits a few milliseconds at most, and long enough for quotas down to
// 5% (the kernel's smallest quota is 1 ms).
const cpuPeriod = 5 * time.Millisecond

// minCPUShare is the smallest share a server can be given.
const minCPUShare = float64(time.Millisecond) / float64(cpuPeriod)

// Where the kernel's cpu controller is mounted: cgroup v2's unified
// hierarchy (cpu.max), or v1's cpu hierarchy (cpu.cfs_quota_us).
const (
	cgroupV2Root = "/sys/fs/cgroup"
	cgroupV1CPU  = "/sys/fs/cgroup/cpu"
)

// The largest CPU weights of cgroup v2 (cpu.weight) and v1 (cpu.shares).
const (
	cgroupV2MaxWeight = 10000
	cgroupV1MaxShares = 262144
)

// cpuGroup is a control group holding one server at a CPU quota.
type cpuGroup struct {
	dir string
}

// setQuota sets the group's quota per cpuPeriod (µs).
func (g *cpuGroup) setQuota(v2 bool, quota int64) error {
	file, v := "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)
	if v2 {
		file, v = "cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriod.Microseconds())
	}
	if err := os.WriteFile(filepath.Join(g.dir, file), []byte(v), 0); err != nil {
		return fmt.Errorf("control group %s: writing %q to %s: %w", g.dir, v, file, err)
	}
	return nil
}

// setShare gives the group's server share of one CPU (its quota per
// cpuPeriod; the burst follows the quota).
func (g *cpuGroup) setShare(share float64) error {
	_, v2, err := cpuRoot()
	if err != nil {
		return err
	}
	quota := int64(share * float64(cpuPeriod.Microseconds()))
	// The kernel refuses a quota below the burst: no burst first.
	if err := g.allowBurst(v2, 0); err != nil {
		return err
	}
	if err := g.setQuota(v2, quota); err != nil {
		return err
	}
	return g.allowBurst(v2, quota)
}

// cgroupName is the group of a run's appliance.
func cgroupName(prefix, appliance string) string { return "bulkhead-" + prefix + "-" + appliance }

// cpuRoot finds the cpu controller's hierarchy and whether it is cgroup
// v2.
func cpuRoot() (dir string, v2 bool, err error) {
	if b, err := os.ReadFile(filepath.Join(cgroupV2Root, "cgroup.controllers")); err == nil {
		if !strings.Contains(" "+strings.TrimSpace(string(b))+" ", " cpu ") {
			return "", false, errors.New("cgroup v2 is mounted at /sys/fs/cgroup without its cpu controller")
		}
		return cgroupV2Root, true, nil
	}
	if _, err := os.Stat(filepath.Join(cgroupV1CPU, "cpu.cfs_quota_us")); err == nil {
		return cgroupV1CPU, false, nil
	}
	return "", false, errors.New("no cgroup cpu controller found (neither /sys/fs/cgroup/cgroup.controllers nor /sys/fs/cgroup/cpu/cpu.cfs_quota_us)")
}

// limitCPU moves pid into a new control group named name that lets it use
// share of one CPU.
func limitCPU(name string, pid int, share float64) (*cpuGroup, error) {
	if !(share >= minCPUShare) {
		return nil, fmt.Errorf("a CPU share of %g is below the smallest the testbed gives (%g)", share, minCPUShare)
	}
	root, v2, err := cpuRoot()
	if err != nil {
		return nil, fmt.Errorf("limiting the server to %g of a CPU: %w", share, err)
	}
	if v2 {
		// The root must hand the cpu controller to its children.
		if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			return nil, fmt.Errorf("enabling the cpu controller in %s: %w", root, err)
		}
	}
	g := &cpuGroup{dir: filepath.Join(root, name)}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating control group %s: %w", g.dir, err)
	}
	period := cpuPeriod.Microseconds()
	quota := int64(share * float64(period))
	write := func(file, v string) error {
		if err := os.WriteFile(filepath.Join(g.dir, file), []byte(v), 0); err != nil {
			return fmt.Errorf("control group %s: writing %q to %s: %w", g.dir, v, file, err)
		}
		return nil
	}
	// The quota caps the server; the weight makes sure it gets it on a
	// machine whose cores the clients, the agents and the emulated links
	// keep busy, as a server of its own would.
	if v2 {
		err = g.setQuota(true, quota)
		if err == nil {
			err = write("cpu.weight", strconv.Itoa(cgroupV2MaxWeight))
		}
	} else {
		err = write("cpu.cfs_period_us", strconv.FormatInt(period, 10))
		if err == nil {
			err = g.setQuota(false, quota)
		}
		if err == nil {
			err = write("cpu.shares", strconv.Itoa(cgroupV1MaxShares))
		}
	}
	if err == nil {
		err = g.allowBurst(v2, quota)
	}
	if err == nil {
		err = write("cgroup.procs", strconv.Itoa(pid))
	}
	if err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

// allowBurst lets the server carry one period's quota it left unused
// into the next (the kernel's CFS burst: cpu.max.burst, cpu.cfs_burst_us;
// the long-run share stays the quota). A server at 0.4 of a CPU then runs
// like a slower CPU of its own: below its capacity it is not stopped for
// the rest of a period because its requests came in a burst, which would
// queue them for up to 3 ms when it is far from saturated and make a
// capacity estimator that watches queues (Pulsar's) stop short of its
// capacity. A kernel without burst (before 5.14) leaves the file out;
// the group then works as before.
func (g *cpuGroup) allowBurst(v2 bool, quota int64) error {
	file, v := "cpu.cfs_burst_us", strconv.FormatInt(quota, 10)
	if v2 {
		file = "cpu.max.burst"
	}
	path := filepath.Join(g.dir, file)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(path, []byte(v), 0); err != nil {
		return fmt.Errorf("control group %s: writing %q to %s: %w", g.dir, v, file, err)
	}
	return nil
}

// remove deletes the group once its processes are gone (moving any left
// to the parent first).
func (g *cpuGroup) remove() {
	if g == nil {
		return
	}
	removeCgroup(g.dir)
}

func removeCgroup(dir string) {
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		for _, p := range strings.Fields(string(b)) {
			_ = os.WriteFile(filepath.Join(filepath.Dir(dir), "cgroup.procs"), []byte(p), 0)
		}
	}
	for i := 0; i < 50; i++ {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeCgroups deletes every control group of a run's appliances (what a
// run that died left).
func removeCgroups(prefix string) {
	for _, d := range leftCgroups(prefix) {
		removeCgroup(d)
	}
}

// leftCgroups lists a run's appliances' control groups still there.
func leftCgroups(prefix string) []string {
	var out []string
	for _, root := range []string{cgroupV2Root, cgroupV1CPU} {
		dirs, _ := filepath.Glob(filepath.Join(root, cgroupName(prefix, "*")))
		out = append(out, dirs...)
	}
	return out
}
