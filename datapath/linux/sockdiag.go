package linux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// diagConn is a raw NETLINK_SOCK_DIAG socket for exact lookups of single
// TCP sockets (an O(1) hash lookup in the kernel, where a dump walks the
// whole TCP hash table of the machine, empty buckets included).
type diagConn struct {
	fd   int
	seq  uint32
	buf  []byte
	rbuf []byte
}

// tcpID is a TCP socket's identity for sock_diag.
type tcpID struct {
	src, dst     netip.Addr
	sport, dport uint16
	cookie       [2]uint32
}

// Linux uapi (linux/inet_diag.h, linux/sock_diag.h).
const (
	sockDiagByFamily  = 20
	inetDiagInfo      = 2
	sizeofInetDiagMsg = 72
	// offset of tcpi_total_retrans in struct tcp_info
	tcpInfoTotalRetrans = 100
)

// errNoSocket: the socket is gone.
var errNoSocket = errors.New("no such socket")

func newDiagConn() (*diagConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sock_diag bind: %w", err)
	}
	// A lost answer must not block the agent's step for ever.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sock_diag receive timeout: %w", err)
	}
	return &diagConn{fd: fd, buf: make([]byte, 0, 128), rbuf: make([]byte, 8192)}, nil
}

func (d *diagConn) close() {
	if d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// totalRetrans returns the socket's tcpi_total_retrans.
func (d *diagConn) totalRetrans(id tcpID) (uint32, error) {
	d.seq++
	ne := binary.NativeEndian
	b := d.buf[:0]
	b = ne.AppendUint32(b, 0) // length, patched
	b = ne.AppendUint16(b, sockDiagByFamily)
	b = ne.AppendUint16(b, unix.NLM_F_REQUEST)
	b = ne.AppendUint32(b, d.seq)
	b = ne.AppendUint32(b, 0)
	// struct inet_diag_req_v2
	b = append(b, unix.AF_INET, unix.IPPROTO_TCP, 1<<(inetDiagInfo-1), 0)
	b = ne.AppendUint32(b, 0xfff) // states
	// struct inet_diag_sockid: ports and addresses in network order
	b = binary.BigEndian.AppendUint16(b, id.sport)
	b = binary.BigEndian.AppendUint16(b, id.dport)
	s4, d4 := id.src.As4(), id.dst.As4()
	b = append(b, s4[:]...)
	b = append(b, make([]byte, 12)...)
	b = append(b, d4[:]...)
	b = append(b, make([]byte, 12)...)
	b = ne.AppendUint32(b, 0) // interface
	b = ne.AppendUint32(b, id.cookie[0])
	b = ne.AppendUint32(b, id.cookie[1])
	ne.PutUint32(b[0:], uint32(len(b)))
	d.buf = b
	if err := unix.Sendto(d.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag send: %w", err)
	}
	for {
		n, _, err := unix.Recvfrom(d.fd, d.rbuf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("sock_diag receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(d.rbuf[:n])
		if err != nil {
			return 0, fmt.Errorf("sock_diag parse: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != d.seq {
				continue
			}
			if m.Header.Type == unix.NLMSG_ERROR {
				if len(m.Data) >= 4 {
					if e := int32(ne.Uint32(m.Data)); e != 0 {
						if syscall.Errno(-e) == unix.ENOENT {
							return 0, errNoSocket
						}
						return 0, fmt.Errorf("sock_diag: %w", syscall.Errno(-e))
					}
				}
				return 0, errNoSocket
			}
			if m.Header.Type != sockDiagByFamily || len(m.Data) < sizeofInetDiagMsg {
				continue
			}
			attrs := m.Data[sizeofInetDiagMsg:]
			for len(attrs) >= 4 {
				l := int(ne.Uint16(attrs))
				t := ne.Uint16(attrs[2:])
				if l < 4 || l > len(attrs) {
					break
				}
				if t == inetDiagInfo && l >= 4+tcpInfoTotalRetrans+4 {
					return ne.Uint32(attrs[4+tcpInfoTotalRetrans:]), nil
				}
				attrs = attrs[min((l+3)&^3, len(attrs)):]
			}
			return 0, fmt.Errorf("sock_diag: answer without tcp_info")
		}
	}
}
