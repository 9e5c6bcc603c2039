package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fastNL is a bare rtnetlink socket for the one request on a host agent's
// hot path, an HTB class change: the message is laid out by hand into a
// reused buffer (no rate tables, which the kernel does not need when the
// link layer is given, no reflection) and sent with one sendto and one
// recvfrom. BenchmarkClassChange measures it.
type fastNL struct {
	mu    sync.Mutex
	fd    int
	seq   uint32
	buf   []byte
	rbuf  []byte
	tick  float64           // psched ticks per microsecond
	batch int               // the most requests of one sendmsg (changeHTBClasses)
	names map[string]string // devices' names dumpLinks read, each one string (intern)

	// devStats' names of the devices by index, valid while the link
	// monitor (mon, -1: not open yet) reports no change of a link
	ns     *NS
	mon    int
	ifname map[int32]string
}

// maxNames bounds the names intern keeps.
const maxNames = 4096

// intern returns name as a string, the same string every time it reads
// the same (f.mu held): a host agent reads the same devices' names
// every period.
func (f *fastNL) intern(name []byte) string {
	if s, ok := f.names[string(name)]; ok {
		return s
	}
	if f.names == nil || len(f.names) >= maxNames {
		f.names = map[string]string{}
	}
	s := string(name)
	f.names[s] = s
	return s
}

// newFastNL opens the socket inside ns.
func newFastNL(ns *NS) (*fastNL, error) {
	f := &fastNL{fd: -1, buf: make([]byte, 0, 128), rbuf: make([]byte, 64<<10), tick: netlink.TickInUsec(), ns: ns, mon: -1}
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netlink bind: %w", err)
		}
		// An answer the kernel never sends must not hang the agent: a
		// receive gives up after rcvTimeout and the requests waiting for
		// it are reported failed (a limiter is re-applied at the next
		// step).
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: int64(rcvTimeout / time.Second)}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netlink receive timeout: %w", err)
		}
		f.fd = fd
		f.batch = batchSize(fd)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// batchSize sizes the socket's buffers for batches of requests (beyond
// the system's limits with CAP_NET_ADMIN, as a host agent runs) and
// returns how many requests one sendmsg may carry: their acks must fit
// the receive buffer and the requests the send buffer. Error answers
// carry no copy of their request (NETLINK_CAP_ACK).
func batchSize(fd int) int {
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], sockBuf) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], sockBuf)
		}
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	rcv, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	snd, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if err1 != nil || err2 != nil {
		return 1
	}
	return max(1, min(maxBatch, rcv/ackCost, (snd-64)/maxChangeLen))
}

// maxChangeLen is the length of the longest class change request.
const maxChangeLen = unix.SizeofNlMsghdr + sizeofTcMsg + 8 + 4 + 4 + sizeofTcHTBOpt + 12 + 12

func (f *fastNL) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd >= 0 {
		unix.Close(f.fd)
		f.fd = -1
	}
	if f.mon >= 0 {
		unix.Close(f.mon)
		f.mon = -1
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
	return f.changeHTBClasses([]classChange{{ifindex: ifindex, c: c}})[0]
}

// classChange is one HTB class change of a batch.
type classChange struct {
	ifindex int
	c       HTBClass
}

// maxBatch bounds the requests of one sendmsg: their acks (one socket
// buffer each, about 1 KB of the receive buffer) must fit the socket's
// receive buffer, and the requests its send buffer.
const maxBatch = 4096

// rcvTimeout bounds every wait for the kernel's answer.
const rcvTimeout = 2 * time.Second

// sockBuf is the send and receive buffer the socket asks for (with
// CAP_NET_ADMIN, beyond the system's defaults), for batches of acks.
const sockBuf = 8 << 20

// ackCost is what one ack takes of the receive buffer (its socket
// buffer's truesize, generously).
const ackCost = 2048

// changeHTBClasses sends the class changes (RTM_NEWTCLASS, change only)
// in as few sendmsg calls as the socket's buffers allow — one for up to
// maxBatch changes with the buffers it asks for — each request with its
// own sequence number and ack, and returns each change's error (nil:
// the kernel took it). The kernel processes the requests of one message
// in order and answers each: one refused does not stop the others. A
// change whose answer never came (a receive error) is reported failed.
func (f *fastNL) changeHTBClasses(cs []classChange) []error {
	errs := make([]error, len(cs))
	if len(cs) == 0 {
		return errs
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd < 0 {
		for i := range errs {
			errs[i] = fmt.Errorf("htb class %s: netlink socket closed", netlink.HandleStr(cs[i].c.Handle))
		}
		return errs
	}
	for lo := 0; lo < len(cs); lo += f.batch {
		hi := min(lo+f.batch, len(cs))
		f.changeChunk(cs[lo:hi], errs[lo:hi])
	}
	return errs
}

// changeChunk sends one sendmsg of changes and collects their answers
// (f.mu held). Only the last request asks for an ack: the kernel
// handles the requests of one sendmsg in order before sendmsg returns
// and answers every refused one whether or not it asked (netlink_rcv_skb),
// so once the last one's ack is read every refusal before it has been,
// and a request without an answer was taken. One ack per request would
// cost a receive each (netlink hands over one answer per recvmsg).
func (f *fastNL) changeChunk(cs []classChange, errs []error) {
	b := f.buf[:0]
	first := f.seq + 1
	lastAt := -1 // where the last request starts in b
	for i, c := range cs {
		var err error
		f.seq++
		at := len(b)
		if b, err = f.appendHTBChange(b, f.seq, c.ifindex, c.c); err != nil {
			errs[i] = err
			continue
		}
		lastAt = at
	}
	if lastAt >= 0 {
		binary.NativeEndian.PutUint16(b[lastAt+6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	}
	f.buf = b
	pending := 0
	for i := range cs {
		if errs[i] == nil {
			errs[i] = errNoAnswer
			pending++
		}
	}
	if pending == 0 {
		return
	}
	if _, err := unix.Write(f.fd, b); err != nil {
		for i := range cs {
			if errs[i] == errNoAnswer {
				errs[i] = fmt.Errorf("change htb class %s: send: %w", netlink.HandleStr(cs[i].c.Handle), err)
			}
		}
		return
	}
	last := f.seq
	// the seq of the request whose ack ends the answers
	acked := uint32(0)
	for i := len(cs) - 1; i >= 0; i-- {
		if errs[i] == errNoAnswer {
			acked = first + uint32(i)
			break
		}
	}
	for pending > 0 {
		n, err := unix.Read(f.fd, f.rbuf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// ENOBUFS: answers were lost; the changes without one are
			// reported failed (their user re-applies them).
			for i := range cs {
				if errs[i] == errNoAnswer {
					errs[i] = fmt.Errorf("change htb class %s: receive: %w", netlink.HandleStr(cs[i].c.Handle), err)
				}
			}
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(f.rbuf[:n])
		if err != nil {
			for i := range cs {
				if errs[i] == errNoAnswer {
					errs[i] = fmt.Errorf("change htb class %s: parse answer: %w", netlink.HandleStr(cs[i].c.Handle), err)
				}
			}
			return
		}
		for _, m := range msgs {
			seq := m.Header.Seq
			if seq < first || seq > last || m.Header.Type != unix.NLMSG_ERROR {
				continue // a stale answer or a notification
			}
			i := int(seq - first)
			if errs[i] != errNoAnswer {
				continue
			}
			pending--
			switch {
			case len(m.Data) < 4:
				errs[i] = fmt.Errorf("change htb class %s: short answer", netlink.HandleStr(cs[i].c.Handle))
			case int32(binary.NativeEndian.Uint32(m.Data)) != 0:
				errs[i] = fmt.Errorf("change htb class %s: %w", netlink.HandleStr(cs[i].c.Handle), syscall.Errno(-int32(binary.NativeEndian.Uint32(m.Data))))
			default:
				errs[i] = nil
			}
			if seq == acked {
				// every request before it that was refused has its
				// answer: the others were taken
				for j := range i {
					if errs[j] == errNoAnswer {
						errs[j] = nil
						pending--
					}
				}
			}
		}
	}
}

// errNoAnswer marks a change sent and not answered yet.
var errNoAnswer = errors.New("no answer from the kernel")

// appendHTBChange appends one RTM_NEWTCLASS request (change only, with an
// ack) for class c on device ifindex.
func (f *fastNL) appendHTBChange(b []byte, seq uint32, ifindex int, c HTBClass) ([]byte, error) {
	ceil := c.Ceil
	if ceil == 0 {
		ceil = c.Rate
	}
	if !(c.Rate >= MinRate/2) || !(ceil >= c.Rate) || ceil > 1e12 {
		return b, fmt.Errorf("htb class %s: rate %v, ceil %v bits/s: need 0 < rate <= ceil <= 1e12", netlink.HandleStr(c.Handle), c.Rate, ceil)
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
	ne := binary.NativeEndian
	start := len(b)
	// nlmsghdr; the length is patched at the end
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint16(b, unix.RTM_NEWTCLASS)
	b = ne.AppendUint16(b, unix.NLM_F_REQUEST) // changeChunk asks the last one's ack
	b = ne.AppendUint32(b, seq)
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
	ne.PutUint32(b[start:], uint32(len(b)-start))
	return b, nil
}

// Linux uapi constants of the class dump (linux/rtnetlink.h,
// linux/gen_stats.h).
const (
	tcaStats2       = 7
	tcaStatsBasic   = 1
	tcaStatsQueue   = 3
	tcaStatsPkt64   = 8
	sizeofTcMsg     = 20
	sizeofHTBParms  = sizeofTcHTBOpt
	nlaHeaderLen    = 4
	nlaTypeMask     = 0x3fff
	sizeofStatsQ    = 20
	sizeofStatsBase = 12
)

// dumpClasses reads every class of device ifindex in one netlink dump
// (RTM_GETTCLASS), parsed by hand: each class's handle and counters (an
// HTB class's rate and ceiling with them), as the netlink package's
// ClassList reads them, given to fn in the kernel's order.
func (f *fastNL) dumpClasses(ifindex int, fn func(handle uint32, c Counters)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ne := binary.NativeEndian
	b := f.request(unix.RTM_GETTCLASS, sizeofTcMsg)
	b = append(b, unix.AF_UNSPEC, 0, 0, 0)
	b = ne.AppendUint32(b, uint32(int32(ifindex)))
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint32(b, 0)
	return f.dump("list classes", b, func(typ uint16, m []byte) error {
		if typ != unix.RTM_NEWTCLASS {
			return nil
		}
		if len(m) < sizeofTcMsg {
			return errors.New("short class")
		}
		fn(ne.Uint32(m[8:]), parseClass(m[sizeofTcMsg:]))
		return nil
	})
}

// Linux uapi constants (linux/if_link.h, linux/rtnetlink.h).
const (
	sizeofIfInfoMsg = 16
	iflaIfname      = 3
	iflaExtMask     = 29
)

// dumpLinkNames reads every device of the namespace in one netlink dump
// (RTM_GETLINK), parsed by hand: each device's index and name, given to
// fn in the kernel's order; name is valid during the call only. f.mu
// held.
func (f *fastNL) dumpLinkNames(fn func(idx int32, name []byte)) error {
	ne := binary.NativeEndian
	b := f.request(unix.RTM_GETLINK, sizeofIfInfoMsg+8)
	b = append(b, unix.AF_UNSPEC, 0)
	b = ne.AppendUint16(b, 0) // type
	b = ne.AppendUint32(b, 0) // index
	b = ne.AppendUint32(b, 0) // flags
	b = ne.AppendUint32(b, 0) // change
	// IFLA_EXT_MASK 0: no VF or other extended information
	b = ne.AppendUint16(b, 8)
	b = ne.AppendUint16(b, iflaExtMask)
	b = ne.AppendUint32(b, 0)
	return f.dump("list links", b, func(typ uint16, m []byte) error {
		if typ != unix.RTM_NEWLINK {
			return nil
		}
		if len(m) < sizeofIfInfoMsg {
			return errors.New("short link")
		}
		attrs(m[sizeofIfInfoMsg:], func(typ uint16, v []byte) {
			if typ == iflaIfname {
				if i := bytesIndexZero(v); i >= 0 {
					v = v[:i]
				}
				fn(int32(ne.Uint32(m[4:])), v)
			}
		})
		return nil
	})
}

// bytesIndexZero is the index of the first NUL of b, -1 if none.
func bytesIndexZero(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// request starts a dump request of type typ whose body (after the
// netlink header) is n bytes, in f's buffer (f.mu held).
func (f *fastNL) request(typ uint16, n int) []byte {
	f.seq++
	ne := binary.NativeEndian
	b := f.buf[:0]
	b = ne.AppendUint32(b, uint32(unix.SizeofNlMsghdr+n))
	b = ne.AppendUint16(b, typ)
	b = ne.AppendUint16(b, unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	b = ne.AppendUint32(b, f.seq)
	b = ne.AppendUint32(b, 0)
	return b
}

// dump sends the dump request req (f.request's, completed) and gives
// each message of the answer to fn (its type and body) until the dump
// is done (f.mu held). what names the request in errors.
func (f *fastNL) dump(what string, req []byte, fn func(typ uint16, m []byte) error) error {
	if f.fd < 0 {
		return fmt.Errorf("%s: netlink socket closed", what)
	}
	f.buf = req
	seq := f.seq
	ne := binary.NativeEndian
	// to the kernel (an unconnected netlink socket's default), and read
	// without the sender's address: neither allocates
	if _, err := unix.Write(f.fd, req); err != nil {
		return fmt.Errorf("%s: send: %w", what, err)
	}
	for {
		n, err := unix.Read(f.fd, f.rbuf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: receive: %w", what, err)
		}
		rb := f.rbuf[:n]
		for len(rb) >= unix.SizeofNlMsghdr {
			l := int(ne.Uint32(rb))
			typ := ne.Uint16(rb[4:])
			mseq := ne.Uint32(rb[8:])
			if l < unix.SizeofNlMsghdr || l > len(rb) {
				return fmt.Errorf("%s: malformed answer", what)
			}
			m := rb[unix.SizeofNlMsghdr:l]
			rb = rb[min(nlmAlign(l), len(rb)):]
			if mseq != seq {
				continue // a stale answer or a notification
			}
			switch typ {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(m) >= 4 {
					if e := int32(ne.Uint32(m)); e != 0 {
						return fmt.Errorf("%s: %w", what, syscall.Errno(-e))
					}
				}
				return nil
			default:
				if err := fn(typ, m); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
			}
		}
	}
}

func nlmAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

func nlaAlign(n int) int { return (n + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1) }

// attrs calls fn for each netlink attribute of b.
func attrs(b []byte, fn func(typ uint16, v []byte)) {
	ne := binary.NativeEndian
	for len(b) >= nlaHeaderLen {
		l := int(ne.Uint16(b))
		if l < nlaHeaderLen || l > len(b) {
			return
		}
		fn(ne.Uint16(b[2:])&nlaTypeMask, b[nlaHeaderLen:l])
		b = b[min(nlaAlign(l), len(b)):]
	}
}

// parseClass reads a class's counters from its attributes: the basic
// and queue statistics, and an HTB class's rate and ceiling (bits/s).
func parseClass(b []byte) Counters {
	ne := binary.NativeEndian
	var k Counters
	htb := false
	var opts []byte
	pkt64 := false
	attrs(b, func(typ uint16, v []byte) {
		switch typ {
		case tcaKind:
			htb = string(v) == "htb\x00" || string(v) == "htb"
		case tcaOptions:
			opts = v
		case tcaStats2:
			attrs(v, func(typ uint16, v []byte) {
				switch typ {
				case tcaStatsBasic:
					if len(v) >= sizeofStatsBase {
						k.Bytes = ne.Uint64(v)
						if !pkt64 {
							k.Packets = uint64(ne.Uint32(v[8:]))
						}
					}
				case tcaStatsPkt64:
					if len(v) >= 8 {
						k.Packets, pkt64 = ne.Uint64(v), true
					}
				case tcaStatsQueue:
					if len(v) >= sizeofStatsQ {
						k.Qlen, k.Backlog, k.Drops = ne.Uint32(v), ne.Uint32(v[4:]), ne.Uint32(v[8:])
						k.Overlimits = ne.Uint32(v[16:])
					}
				}
			})
		}
	})
	if htb && opts != nil {
		var rate, ceil uint64
		attrs(opts, func(typ uint16, v []byte) {
			switch typ {
			case tcaHTBParms:
				if len(v) >= sizeofHTBParms {
					// struct tc_htb_opt: rate and ceil tc_ratespecs, their
					// 32-bit rate at offset 8 of each
					if rate == 0 {
						rate = uint64(ne.Uint32(v[8:]))
					}
					if ceil == 0 {
						ceil = uint64(ne.Uint32(v[20:]))
					}
				}
			case tcaHTBRate64:
				if len(v) >= 8 {
					rate = ne.Uint64(v)
				}
			case tcaHTBCeil64:
				if len(v) >= 8 {
					ceil = ne.Uint64(v)
				}
			}
		})
		k.Rate, k.Ceil = float64(rate)*8, float64(ceil)*8
	}
	return k
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
