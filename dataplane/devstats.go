package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/bulkhead-dc/bulkhead/datapath"
)

// sizeofIfStatsMsg is the size of struct if_stats_msg (linux/if_link.h).
const sizeofIfStatsMsg = 12

// devStats reads every device's byte counters in the namespace by name:
// one RTM_GETSTATS dump of the 64-bit link statistics alone (a device's
// whole description, which a link dump carries, costs the kernel several
// times more), named by the devices' indices. The names come from a link
// dump, made again whenever the link monitor — a socket subscribed to
// the namespace's link notifications — reports a change (a device added,
// removed or renamed) or lost some (its buffer overflowed). A device
// added between the monitor's check and the statistics is left out of
// this reading; its notification has the next reading name it.
func (f *fastNL) devStats(fn func(name string, c datapath.DevCounters)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	changed, err := f.linksChanged()
	if err != nil {
		return err
	}
	if changed || f.ifname == nil {
		names := map[int32]string{}
		if err := f.dumpLinkNames(func(idx int32, name []byte) { names[idx] = f.intern(name) }); err != nil {
			return err
		}
		f.ifname = names
	}
	ne := binary.NativeEndian
	b := f.request(unix.RTM_GETSTATS, sizeofIfStatsMsg)
	b = append(b, unix.AF_UNSPEC, 0, 0, 0)
	b = ne.AppendUint32(b, 0)                              // ifindex: every device
	b = ne.AppendUint32(b, 1<<(unix.IFLA_STATS_LINK_64-1)) // filter_mask: IFLA_STATS_LINK_64
	return f.dump("link statistics", b, func(typ uint16, m []byte) error {
		if typ != unix.RTM_NEWSTATS {
			return nil
		}
		if len(m) < sizeofIfStatsMsg {
			return errors.New("short statistics")
		}
		name, ok := f.ifname[int32(ne.Uint32(m[4:]))]
		if !ok {
			return nil // new since the monitor's check
		}
		attrs(m[sizeofIfStatsMsg:], func(typ uint16, v []byte) {
			if typ == unix.IFLA_STATS_LINK_64 && len(v) >= 32 {
				fn(name, datapath.DevCounters{Rx: ne.Uint64(v[16:]), Tx: ne.Uint64(v[24:])})
			}
		})
		return nil
	})
}

// linksChanged reads what the link monitor received since its previous
// check and says whether a link changed (true the first time, when it
// opens the monitor in the namespace). f.mu held.
func (f *fastNL) linksChanged() (bool, error) {
	if f.fd < 0 {
		return false, errors.New("link statistics: netlink socket closed")
	}
	if f.mon < 0 {
		err := f.ns.Do(func() error {
			fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
			if err != nil {
				return fmt.Errorf("link monitor: socket: %w", err)
			}
			if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
				unix.Close(fd)
				return fmt.Errorf("link monitor: bind: %w", err)
			}
			f.mon = fd
			return nil
		})
		return true, err
	}
	changed := false
	for {
		n, err := unix.Read(f.mon, f.rbuf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return changed, nil
		case err == unix.ENOBUFS:
			changed = true // notifications lost: a change, maybe
			continue
		case err != nil:
			return true, fmt.Errorf("link monitor: %w", err)
		case n == 0:
			return changed, nil
		}
		changed = true
	}
}
