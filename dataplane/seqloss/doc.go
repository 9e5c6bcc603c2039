// Package seqloss detects packet loss per VM pair the way ElasticSwitch
// does (SIGCOMM 2013, §6): the sender's hypervisor writes a per-destination
// sequence number into the IPv4 Identification field of every packet, and
// the receiver's hypervisor counts the gaps. Here the two halves are tc
// cls_bpf programs in direct-action mode (bpf/seqloss.c), loaded and
// attached with github.com/cilium/ebpf and netlink, and the loss counts per
// VM pair come out of a BPF map.
//
// # Programs and maps
//
//   - seqloss_stamp (sender's server): every IPv4 packet that is not a
//     fragment takes the next number of its (source, destination) pair:
//     the IP ID gets the low 16 bits, the reserved flag bit (Mark, 0x8000)
//     says "stamped", and the header checksum is fixed with
//     bpf_l3_csum_replace. A segmentation-offload (GSO) packet takes one
//     number per segment: when it is segmented, the kernel gives its
//     segments consecutive IDs from the first, so the numbers count wire
//     packets. Map seqloss_tx: per pair, segments and packets stamped.
//   - seqloss_count (receiver's server): every marked packet's ID is
//     compared with the pair's next expected number d = ID − expected
//     (16-bit, signed). d = 0: in order. 0 < d < SeqWindow: d numbers were
//     skipped, counted in Gaps. −SeqWindow < d < 0: a late packet
//     (reordered, or a duplicate), counted in Late, expected unchanged.
//     |d| ≥ SeqWindow: a resynchronisation (the sender's numbering
//     restarted, or SeqWindow or more consecutive packets were lost: the
//     two cannot be told apart), counted in Resyncs, not as loss. The first
//     packet of a pair only sets the expectation. The mark is cleared (and
//     the checksum fixed) before the packet goes on to the VM. Map
//     seqloss_rx: per pair, packets, segments, gaps, late, resyncs, under a
//     bpf_spin_lock (CPUs deliver packets of one pair concurrently).
//
// Loss over an interval is ΔGaps − ΔLate (Received.Lost): a packet counted
// in a gap that arrives later is not lost. A loss is seen when the pair's
// next packet arrives, so the last packets of a burst are counted once the
// pair sends again. SeqWindow (2^14) bounds the reordering tolerated and
// the longest run of losses counted: at 1 Gbit/s with 1500-byte packets
// (≈ 83 000 packets/s) the 16-bit space wraps every 0.8 s, and a pair that
// loses 16 384 packets in a row is, for congestion feedback, as good as
// disconnected.
//
// Packets without the mark are not counted (Stats.RxUnmarked): traffic
// between two VMs of one server (it never crosses a stamp hook) and
// traffic from senders whose stamp program is not attached yet. This is
// why the programs use the mark at all: ElasticSwitch's switch numbers
// every packet, here the two ends are attached at different times by
// different agents. Fragments are neither stamped nor counted (their
// common ID is what reassembles them); like the paper, the design assumes
// the datacenter does not fragment.
//
// On a real NIC the numbering would cost receive offload: GRO merges only
// packets of one flow with consecutive IDs and no flag but DF, and stamped
// packets have neither (the IDs of one pair are shared by its flows). The
// emulated datacenter's veth devices do no GRO, so nothing changes there.
//
// # Declared pairs
//
// By default (learning mode) any pair a program sees gets an entry of its
// own in its map, until the map holds Config.MaxPairs, and entries are
// never forgotten but by Forget. On a server whose VMs are not trusted
// that is a hole: a VM that sends one packet to each of MaxPairs
// addresses fills its server's stamp map, and every pair that starts
// after it is never stamped, so its losses are never seen; and a VM
// that forges another server's VM's source address gets its packets
// numbered from a second sequence of that pair, whose jumps the
// receiver counts as up to SeqWindow−1 lost packets each.
//
// With Config.DeclaredOnly only the pairs declared — DeclareStamp for the
// pairs leaving the server's VMs, DeclareCount for the pairs into them,
// by whoever knows which pairs the model has; Undeclare when they go —
// are stamped and counted, and the rest is counted in Stats
// (TxUndeclared, RxUndeclared): the maps hold the declared pairs and
// nothing else, whatever the VMs send. Three more checks bound what a
// VM can make the programs count:
//
//   - a pair declared for the stamp program with the device its packets
//     come in by (the source VM's device on the server) is stamped only
//     for packets that came in by that device (skb->ingress_ifindex; the
//     IFB of a pair limiter hands packets back as received by the device
//     that was redirected to it): another VM of the server forging the
//     source address does not get numbers of the pair (Stats.TxForeign);
//   - a packet the stamp program does not stamp leaves it without the
//     mark, should the VM have set it with an ID of its choosing;
//   - the count program counts only marked packets that arrived by a
//     device the probe's stamp program is attached to (the server's
//     uplinks, MaxStampDevices at most): a VM of the same server cannot
//     mark a packet to a local VM as another pair's (Stats.RxForeign).
//
// A declared pair's receiver state starts empty: its first marked packet
// sets the number expected next, as a learned pair's first packet does.
//
// Both programs return TC_ACT_UNSPEC: they never drop or redirect, and the
// next filter of the hook still runs. Give them a lower tc priority number
// (Config.Prio, default 1) than a filter that redirects, or they never see
// the packets it takes.
//
// # Where to attach (the testbed's layout)
//
// A Probe holds both programs and their maps for one server namespace; the
// host agent makes one per server (declared-only: the data path,
// datapath/linux.SeqGaps, declares the pairs of the VMs it attaches) and
// attaches:
//
//   - Stamp on the egress hook of the server's uplink(s) (the server's end
//     of each physical link, PREFIX lJa or lJb in testbed terms): after the
//     pair limiters (IFB), before the emulated link's queue. Packets the
//     server's own limiter drops are then not reported as network loss
//     (that loss is the limiter's doing, not congestion); every queue of
//     the network is after the stamp. Stamping where the VM's packets enter
//     the server (the ingress hook of its veth, PREFIX vIh) would number
//     packets before the limiter, which drops them when TCP overshoots its
//     limit, and the receiver would report those as congestion.
//   - Count on the egress hook of each local VM's server-side veth (PREFIX
//     vIh): the last hop before the VM, so every queue of the path,
//     including the receiver's access link, is before it.
//
// With several uplinks, attach the stamp program to each (one Probe: the
// numbers are per pair, whichever uplink a packet leaves by).
//
// # Cleanup
//
// The filters live on their devices: deleting a device or its namespace
// removes them, and the kernel frees the programs and maps once neither a
// filter nor an open descriptor refers to them. Close detaches the filters
// it attached (those whose devices still exist) and closes the
// descriptors. Nothing is pinned, so nothing of a Probe outlives both its
// process and its devices.
//
// # Generated objects
//
// seqloss_bpfel.o and seqloss_bpfeb.o (little- and big-endian BPF) and the
// Go bindings seqloss_bpfel.go and seqloss_bpfeb.go are generated from
// bpf/seqloss.c by bpf2go (github.com/cilium/ebpf/cmd/bpf2go, a tool of
// this module) and committed, so building and testing need no clang. To
// regenerate, with clang and llvm-strip on the PATH (Debian: apt-get
// install -y clang llvm):
//
//	go generate ./dataplane/seqloss
//
// go generate also records the source's SHA-256 (bpf/seqloss.c.sha256);
// a test fails when the source changed but the objects were not
// regenerated. The C source includes no header (the few kernel UAPI definitions it
// needs are in it), so only the compiler matters: Debian's clang 14.0.6
// reproduces the committed objects byte for byte; other versions produce
// equivalent but not identical code.
//
// Requirements: Linux ≥ 5.12 (BPF atomic fetch-and-add, spin locks in hash
// maps, batch map reads), root (CAP_BPF, CAP_NET_ADMIN), clsact and
// cls_bpf.
package seqloss
