package dataplane

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fastNL is a bare rtnetlink socket for the one request on a host agent's
// hot path, an HTB class change: the message is laid out by hand into a
// reused buffer (no rate tables, which the kernel does not need when the
// link layer is given, no reflection) and sent with one sendto and one
// recvfrom. BenchmarkClassChange measures it.
type fastNL struct {
	mu   sync.Mutex
	fd   int
	seq  uint32
	buf  []byte
	rbuf []byte
	tick float64 // psched ticks per microsecond
}

// newFastNL opens the socket inside ns.
func newFastNL(ns *NS) (*fastNL, error) {
	f := &fastNL{fd: -1, buf: make([]byte, 0, 128), rbuf: make([]byte, 8192), tick: netlink.TickInUsec()}
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netlink bind: %w", err)
		}
		f.fd = fd
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (f *fastNL) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd >= 0 {
		unix.Close(f.fd)
		f.fd = -1
	}
}

// xmittime is netlink.Xmittime with the clock read once: the time, in
// psched ticks, to send size bytes at rate bytes/s.
func (f *fastNL) xmittime(rate uint64, size uint32) uint32 {
	return uint32(1e6 * float64(size) / float64(rate) * f.tick)
}

// Linux uapi constants (linux/pkt_sched.h).
const (
	tcaKind          = 1
	tcaOptions       = 2
	tcaHTBParms      = 1
	tcaHTBRate64     = 6
	tcaHTBCeil64     = 7
	tcLinkLayerEther = 1
	sizeofTcHTBOpt   = 44
)

// changeHTBClass sends RTM_NEWTCLASS (change only: the class must exist)
// and waits for the kernel's answer.
func (f *fastNL) changeHTBClass(ifindex int, c HTBClass) error {
	ceil := c.Ceil
	if ceil == 0 {
		ceil = c.Rate
	}
	if !(c.Rate >= MinRate/2) || !(ceil >= c.Rate) || ceil > 1e12 {
		return fmt.Errorf("htb class %s: rate %v, ceil %v bits/s: need 0 < rate <= ceil <= 1e12", netlink.HandleStr(c.Handle), c.Rate, ceil)
	}
	rate, crate := uint64(c.Rate/8), uint64(ceil/8)
	burst, cburst, quantum := c.Burst, c.Cburst, c.Quantum
	if burst == 0 {
		burst = DefaultBurst(c.Rate)
	}
	if cburst == 0 {
		cburst = DefaultBurst(ceil)
	}
	if quantum == 0 {
		quantum = DefaultQuantum(c.Rate)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd < 0 {
		return fmt.Errorf("htb class %s: netlink socket closed", netlink.HandleStr(c.Handle))
	}
	f.seq++
	ne := binary.NativeEndian
	b := f.buf[:0]
	// nlmsghdr; the length is patched at the end
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint16(b, unix.RTM_NEWTCLASS)
	b = ne.AppendUint16(b, unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	b = ne.AppendUint32(b, f.seq)
	b = ne.AppendUint32(b, 0)
	// tcmsg
	b = append(b, unix.AF_UNSPEC, 0, 0, 0)
	b = ne.AppendUint32(b, uint32(int32(ifindex)))
	b = ne.AppendUint32(b, c.Handle)
	b = ne.AppendUint32(b, c.Parent)
	b = ne.AppendUint32(b, 0)
	// TCA_KIND "htb"
	b = ne.AppendUint16(b, 8)
	b = ne.AppendUint16(b, tcaKind)
	b = append(b, 'h', 't', 'b', 0)
	// TCA_OPTIONS { TCA_HTB_PARMS, [TCA_HTB_RATE64], [TCA_HTB_CEIL64] }
	opts := len(b)
	b = ne.AppendUint16(b, 0)
	b = ne.AppendUint16(b, tcaOptions)
	b = ne.AppendUint16(b, 4+sizeofTcHTBOpt)
	b = ne.AppendUint16(b, tcaHTBParms)
	b = appendRateSpec(b, rate)
	b = appendRateSpec(b, crate)
	b = ne.AppendUint32(b, f.xmittime(rate, burst))
	b = ne.AppendUint32(b, f.xmittime(crate, cburst))
	b = ne.AppendUint32(b, quantum)
	b = ne.AppendUint32(b, 0) // level
	b = ne.AppendUint32(b, c.Prio)
	if rate >= 1<<32 {
		b = ne.AppendUint16(b, 12)
		b = ne.AppendUint16(b, tcaHTBRate64)
		b = ne.AppendUint64(b, rate)
	}
	if crate >= 1<<32 {
		b = ne.AppendUint16(b, 12)
		b = ne.AppendUint16(b, tcaHTBCeil64)
		b = ne.AppendUint64(b, crate)
	}
	ne.PutUint16(b[opts:], uint16(len(b)-opts))
	ne.PutUint32(b[0:], uint32(len(b)))
	f.buf = b

	if err := unix.Sendto(f.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("change htb class %s: send: %w", netlink.HandleStr(c.Handle), err)
	}
	for {
		n, _, err := unix.Recvfrom(f.fd, f.rbuf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("change htb class %s: receive: %w", netlink.HandleStr(c.Handle), err)
		}
		msgs, err := syscall.ParseNetlinkMessage(f.rbuf[:n])
		if err != nil {
			return fmt.Errorf("change htb class %s: parse answer: %w", netlink.HandleStr(c.Handle), err)
		}
		for _, m := range msgs {
			if m.Header.Seq != f.seq || m.Header.Type != unix.NLMSG_ERROR {
				continue // a stale answer or a notification
			}
			if len(m.Data) < 4 {
				return fmt.Errorf("change htb class %s: short answer", netlink.HandleStr(c.Handle))
			}
			if e := int32(ne.Uint32(m.Data)); e != 0 {
				return fmt.Errorf("change htb class %s: %w", netlink.HandleStr(c.Handle), syscall.Errno(-e))
			}
			return nil
		}
	}
}

// appendRateSpec appends struct tc_ratespec for rate bytes/s: no rate
// table (cell_log 0), Ethernet link layer, the 32-bit rate (saturated: the
// 64-bit attribute carries larger ones).
func appendRateSpec(b []byte, rate uint64) []byte {
	ne := binary.NativeEndian
	b = append(b, 0, tcLinkLayerEther)
	b = ne.AppendUint16(b, 0) // overhead
	b = ne.AppendUint16(b, 0) // cell_align
	b = ne.AppendUint16(b, 0) // mpu
	return ne.AppendUint32(b, uint32(min(rate, math.MaxUint32)))
}
