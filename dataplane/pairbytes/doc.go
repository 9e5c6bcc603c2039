// Package pairbytes counts, per IPv4 (source, destination) pair, the bytes
// and packets a device receives: a tc cls_bpf program in direct-action
// mode (bpf/pairbytes.c) on the device's clsact ingress hook, loaded and
// attached with github.com/cilium/ebpf and netlink, and a BPF hash map the
// counts come out of.
//
// It is the emulated datacenter's measurement of what each VM receives
// when the host agents (bulkhead agent) own the limiters: attached to a
// VM's own device inside the VM's namespace, it touches nothing the agent
// builds or reads — the agent's transmit limiter is an HTB root qdisc on
// that device's egress, its receive limiter an HTB on the server-side
// peer's egress, its loss counter a program on the server-side device —
// and it changes no packet: the program only copies headers out of the
// packet (bpf_skb_load_bytes), never pulls, writes, drops or redirects,
// and returns TC_ACT_UNSPEC, so the hook's next filter runs (or the packet
// passes).
//
// # What is counted
//
// Every packet that reaches the hook (an skb: a GSO packet is one) is
// counted once:
//
//   - IPv4 over Ethernet (skb->protocol ETH_P_IP, IP version 4, header
//     length ≥ 20): under its (source, destination) pair — in the pair's
//     slot if it was declared (see "Declared pairs"), else in a hash map
//     of Config.MaxPairs entries (default 16384, allocated as pairs
//     appear); packets of a new pair when the map is full, or of any pair
//     not declared under Config.DeclaredOnly, go to Stats.Overflow.
//     Fragments are counted like any packet (the first and the rest).
//   - anything else (ARP, IPv6, an unparsable header): Stats.Other.
//
// For each packet, Counts adds:
//
//   - Bytes: skb->len as the program sees it at ingress, which is the
//     Ethernet header (14 bytes; cls_bpf pushes it back before running
//     the program) plus the whole IP packet (IP header, transport header,
//     payload). A GSO packet's headers count once. This is the length the
//     device's rx_bytes counter adds, so over the same interval
//     Total(Read()) + Other + Overflow equals the device's rx_bytes.
//   - Packets: 1.
//   - Segments: gso_segs for a GSO packet, else 1: the frames it is on a
//     wire.
//   - SegBytes: Bytes plus, for a GSO packet, (segments − 1) × the headers
//     each further segment carries (14 + IP header + TCP header with
//     options, or + 8 for UDP): the bytes of the frames once segmented,
//     which is what a qdisc such as HTB counts (qdisc_pkt_len_init) and
//     what the link-layer bits of the testbed's old HTB-class measurement
//     were.
//
// None of them includes the Ethernet FCS (4 bytes), preamble and
// inter-frame gap (20 bytes), or VLAN tags. Between namespaces over veth
// devices TCP arrives in GSO packets of up to 64 KB (tens of segments):
// there Bytes and SegBytes differ by the repeated headers (≈ 4.5% for
// 1448-byte segments); UDP without UDP_SEGMENT arrives one datagram per
// packet and the two are equal.
//
// The counts are cumulative from Attach; a reader takes differences. Each
// pair's four fields are updated one after another with atomic adds, so a
// Read racing a packet may see some of its fields and not yet the others.
//
// # Declared pairs
//
// Declare gives a pair a slot of its own in an array the program adds the
// pair's packets to, and that the Counter reads through a mapping of the
// array into its memory (BPF_F_MMAPABLE): EachDeclared copies the slots
// out with no system call, whatever the number of pairs, where Each walks
// every bucket of the hash map in batch system calls. A declared pair
// counts from zero when declared; Undeclare frees its slot for the next
// pair declared. With Config.DeclaredOnly the program counts only the
// declared pairs one by one and every other IPv4 packet as Overflow, so
// that a sender that forges source addresses cannot fill the hash map and
// keep later pairs from being counted (a host agent declares the pairs
// of its model); without it, pairs not declared are learned into the
// hash map as before and Read reports both.
//
// # Where to attach
//
// Attach(ns, dev) with the VM's namespace and its own device there (the
// VM's end of the veth): ingress of that device is what the VM receives,
// after every queue of the path. Packets the VM's own stack then drops (a
// full socket buffer) are counted: they reached the VM.
//
// Config.Hook Egress on the server's end of the veth (or a VM's tap)
// counts what the server delivers to the VM: that is where a host agent
// counts each pair's receive rate (package datapath/linux), without a
// qdisc on the device. There Bytes is the same length (skb->len at egress
// includes the Ethernet header), and SegBytes equals what an HTB class
// for the pair on that device counts.
//
// The filter takes priority Config.Prio (default DefaultPrio, 0xb3) with
// protocol ETH_P_ALL and handle 1. It coexists with other filters of the
// hook at other priorities (they run in priority order and the program
// always continues) and with any root qdisc (clsact is a separate
// qdisc). A filter already at its priority is an error, unless
// Config.Replace says to remove an eBPF filter there (one a counter left
// when its process died); a filter of another kind is never removed.
//
// # Cleanup
//
// Close deletes the filter, then the clsact qdisc if Attach added it and
// neither hook of the device holds a filter any more (another user's
// filters keep it), and closes the program and maps; nothing is pinned,
// so the kernel frees them then. A device deleted before Close took its
// filter with it (not an error). Nothing of a Counter outlives both its
// process and its device.
//
// # Cost
//
// The program's run time is about 65–75 ns per packet on the development
// machine (BenchmarkProgram, BPF_PROG_TEST_RUN, which includes the test
// harness); one TCP flow over a veth showed no throughput difference
// beyond run-to-run noise with and without it, with 64 KB GSO packets and
// with single-segment packets (BenchmarkTCPThroughput).
//
// # Generated objects
//
// pairbytes_bpfel.o and pairbytes_bpfeb.o (little- and big-endian BPF)
// and the Go bindings pairbytes_bpfel.go and pairbytes_bpfeb.go are
// generated from bpf/pairbytes.c by bpf2go (github.com/cilium/ebpf/cmd/bpf2go,
// a tool of this module) and committed, so building and testing need no
// clang. To regenerate, with clang and llvm-strip on the PATH (Debian:
// apt-get install -y clang llvm):
//
//	go generate ./dataplane/pairbytes
//
// go generate also records the source's SHA-256 (bpf/pairbytes.c.sha256);
// a test fails when the source changed but the objects were not
// regenerated. The C source includes no header. The committed objects
// were generated with Debian 12's clang 14.0.6.
//
// Requirements: Linux ≥ 5.5 (gso_segs in the program's context, BPF ISA
// v3, memory-mapped arrays), batch map reads from 5.6 (iteration
// before); tested on 6.18. Root
// (CAP_BPF, CAP_NET_ADMIN), clsact and cls_bpf.
package pairbytes
