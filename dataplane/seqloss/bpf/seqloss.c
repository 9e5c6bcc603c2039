// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// seqloss: per-VM-pair sequence numbers in the IPv4 Identification field and
// gap counting at the receiver, as ElasticSwitch (SIGCOMM 2013) §6 does in
// its Open vSwitch patch. Two tc cls_bpf programs in direct-action mode:
//
//   seqloss_stamp  on the sender's server: for every IPv4 packet that is not
//                  a fragment, takes the next sequence number(s) of its
//                  (source, destination) pair, writes the first one into the
//                  IP ID, sets the reserved flag bit (0x8000) as the mark
//                  "stamped", and fixes the header checksum. A packet it
//                  does not stamp leaves without the mark (a sender may
//                  have set it to forge a number).
//   seqloss_count  on the receiver's server: for every marked packet,
//                  compares the IP ID with the pair's next expected number,
//                  counts the gap (lost packets), clears the mark and fixes
//                  the checksum.
//
// Two modes, chosen at load (learn): learning, where any pair seen gets an
// entry of its own until the maps are full, and declared-only, where only
// the pairs user space declared (it inserts their entries) are stamped or
// counted, the count program counts only packets that arrived by a device
// the stamp program runs on (seqloss_uplinks), and the rest is counted in
// stats: what a VM sends, from any source address to any destination, can
// then neither fill a map nor feed a pair's count.
//
// Both return TC_ACT_UNSPEC: the packet continues to the next filter of the
// hook, or passes if there is none. They never drop or redirect.
//
// The file is self-contained (no kernel or libbpf headers): the few types,
// helper numbers and the prefix of struct __sk_buff below are the kernel's
// UAPI. Regenerate the objects with `go generate` (see doc.go).

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef short __s16;
typedef __u16 __be16;
typedef __u32 __be32;

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define htons(x) ((__be16)__builtin_bswap16(x))
#define ntohs(x) ((__u16)__builtin_bswap16(x))
#else
#define htons(x) ((__be16)(x))
#define ntohs(x) ((__u16)(x))
#endif

// include/uapi/linux/bpf.h (prefix of the user-visible sk_buff mirror; the
// verifier checks each access by offset).
struct __sk_buff {
	__u32 len;
	__u32 pkt_type;
	__u32 mark;
	__u32 queue_mapping;
	__u32 protocol;
	__u32 vlan_present;
	__u32 vlan_tci;
	__u32 vlan_proto;
	__u32 priority;
	__u32 ingress_ifindex;
	__u32 ifindex;
	__u32 tc_index;
	__u32 cb[5];
	__u32 hash;
	__u32 tc_classid;
	__u32 data;
	__u32 data_end;
	__u32 napi_id;
	__u32 family;
	__u32 remote_ip4;
	__u32 local_ip4;
	__u32 remote_ip6[4];
	__u32 local_ip6[4];
	__u32 remote_port;
	__u32 local_port;
	__u32 data_meta;
	__u64 flow_keys; // __bpf_md_ptr
	__u64 tstamp;
	__u32 wire_len;
	__u32 gso_segs;
};

struct bpf_spin_lock {
	__u32 val;
};

enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
};

#define BPF_NOEXIST 1
#define TC_ACT_UNSPEC (-1)

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static long (*bpf_skb_store_bytes)(struct __sk_buff *skb, __u32 offset, const void *from, __u32 len,
				   __u64 flags) = (void *)9;
static long (*bpf_l3_csum_replace)(struct __sk_buff *skb, __u32 offset, __u64 from, __u64 to,
				   __u64 size) = (void *)10;
static long (*bpf_skb_pull_data)(struct __sk_buff *skb, __u32 len) = (void *)39;
static long (*bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *)93;
static long (*bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *)94;

// Packet layout: Ethernet, then IPv4 (the fixed part of its header).
#define ETH_P_IP 0x0800
#define ETH_HLEN 14

struct eth {
	__u8 dst[6];
	__u8 src[6];
	__be16 proto;
};

struct ip4 {
	__u8 version_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__u8 saddr[4];
	__u8 daddr[4];
};

#define IP_OFF ETH_HLEN
#define IP_ID_OFF (IP_OFF + __builtin_offsetof(struct ip4, id))
#define IP_FRAG_OFF (IP_OFF + __builtin_offsetof(struct ip4, frag_off))
#define IP_CSUM_OFF (IP_OFF + __builtin_offsetof(struct ip4, check))
#define HDRS_LEN (ETH_HLEN + sizeof(struct ip4))

#define IP_MARK 0x8000   // the reserved flag: "carries a seqloss sequence number"
#define IP_MF 0x2000     // more fragments
#define IP_OFFSET 0x1fff // fragment offset

// SEQ_WINDOW bounds what the receiver reads as loss or reordering: an ID at
// most SEQ_WINDOW-1 ahead of the expected one is a gap of that many lost
// packets, one at most SEQ_WINDOW-1 behind is a late (reordered or
// duplicated) packet, anything further away in the 16-bit space is a
// resynchronisation (the sender restarted, or more than SEQ_WINDOW-1
// consecutive packets of the pair were lost): the receiver adopts the new
// number without counting a gap. Keep in sync with SeqWindow in seqloss.go.
#define SEQ_WINDOW 16384

// pair is the key of both per-pair maps: IPv4 source and destination in
// network byte order.
struct pair {
	__u8 src[4];
	__u8 dst[4];
};

// tx_val is the sender's state of one pair. The sequence number stamped on
// a packet is the low 16 bits of segs before the packet.
struct tx_val {
	__u64 segs;    // segments stamped (a GSO packet counts its segments)
	__u64 packets; // packets (skbs) stamped
	// ifindex, set by user space when it declares the pair: the device
	// (the source VM's, on the server) the pair's packets come in by;
	// a packet of the pair that came in by another (its source address
	// forged by another VM) is not stamped. 0: any device.
	__u32 ifindex;
	__u32 pad;
};

// rx_val is the receiver's state of one pair. An entry user space
// inserted (a declared pair) starts at zero: its first packet sets next.
struct rx_val {
	struct bpf_spin_lock lock;
	__u32 next;    // next expected sequence number (low 16 bits used)
	__u64 packets; // marked packets (skbs) seen: 0, next is not set yet
	__u64 segs;    // marked segments seen
	__u64 gaps;    // sequence numbers skipped: segments lost
	__u64 late;    // segments that arrived behind the expected number
	__u64 resyncs; // jumps beyond SEQ_WINDOW
};

// stats counts what the programs skipped, per CPU. A packet not stamped
// leaves the stamp program without the mark; a marked packet not counted
// leaves the count program without it.
struct stats {
	__u64 tx_full;       // stamp: the pair map was full, packet not stamped
	__u64 rx_full;       // count: the pair map was full, packet not counted
	__u64 rx_unmarked;   // count: IPv4 packets without the mark (not stamped)
	__u64 fragments;     // either: IP fragments, left alone
	__u64 tx_undeclared; // stamp, declared-only: the pair is not declared
	__u64 tx_foreign;    // stamp: the pair's packet came in by another device than its own
	__u64 rx_undeclared; // count, declared-only: marked, the pair is not declared
	__u64 rx_foreign;    // count, declared-only: marked, not arrived by a stamp device
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct pair);
	__type(value, struct tx_val);
	__uint(max_entries, 4096);
} seqloss_tx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct pair);
	__type(value, struct rx_val);
	__uint(max_entries, 4096);
} seqloss_rx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct stats);
	__uint(max_entries, 1);
} seqloss_stats SEC(".maps");

// seqloss_uplinks: the ifindexes of the devices the stamp program runs on
// (the server's uplinks), which user space keeps. In declared-only mode
// the count program counts only marked packets that arrived by one of
// them: a packet from a VM of the same server never crossed a stamp
// program, and a mark on it is the VM's own.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 64);
} seqloss_uplinks SEC(".maps");

// learn is set at load: 1, a pair seen for the first time gets an entry of
// its own (until the map is full); 0, only the pairs user space inserted
// (declared) are stamped and counted, and the count program takes marks
// only from packets that arrived by a device of seqloss_uplinks.
const volatile __u32 learn = 1;

static __always_inline struct stats *stats(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&seqloss_stats, &zero);
}

// ip4_header returns the packet's IPv4 header, or 0 if it is not an IPv4
// packet over Ethernet.
static __always_inline struct ip4 *ip4_header(struct __sk_buff *skb)
{
	if (skb->protocol != htons(ETH_P_IP))
		return 0;
	if ((void *)(long)skb->data + HDRS_LEN > (void *)(long)skb->data_end)
		bpf_skb_pull_data(skb, HDRS_LEN); // headers not linear
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct eth *eth = data;
	struct ip4 *ip = data + ETH_HLEN;
	if ((void *)(ip + 1) > end)
		return 0;
	if (eth->proto != htons(ETH_P_IP) || (ip->version_ihl >> 4) != 4)
		return 0;
	return ip;
}

static __always_inline __u32 segments(struct __sk_buff *skb)
{
	__u32 n = skb->gso_segs;
	return n ? n : 1;
}

// unmark clears the mark of a packet whose flags field is frag and fixes
// the checksum (nothing if it carries none).
static __always_inline void unmark(struct __sk_buff *skb, __be16 frag)
{
	if (!(frag & htons(IP_MARK)))
		return;
	__be16 clear = frag & ~htons(IP_MARK);
	bpf_l3_csum_replace(skb, IP_CSUM_OFF, frag, clear, 2);
	bpf_skb_store_bytes(skb, IP_FRAG_OFF, &clear, sizeof(clear), 0);
}

SEC("tc")
int seqloss_stamp(struct __sk_buff *skb)
{
	struct ip4 *ip = ip4_header(skb);
	if (!ip)
		return TC_ACT_UNSPEC;
	struct stats *st = stats();
	if (ip->frag_off & htons(IP_MF | IP_OFFSET)) {
		// Fragments of one datagram must keep a common ID.
		if (st)
			st->fragments++;
		return TC_ACT_UNSPEC;
	}
	struct pair k;
	__builtin_memcpy(k.src, ip->saddr, 4);
	__builtin_memcpy(k.dst, ip->daddr, 4);
	__be16 old_id = ip->id, old_frag = ip->frag_off;
	__u32 segs = segments(skb);

	struct tx_val *v = bpf_map_lookup_elem(&seqloss_tx, &k);
	if (!v) {
		if (!learn) {
			if (st)
				st->tx_undeclared++;
			unmark(skb, old_frag);
			return TC_ACT_UNSPEC;
		}
		struct tx_val zero = {};
		bpf_map_update_elem(&seqloss_tx, &k, &zero, BPF_NOEXIST); // may race another CPU: fine
		v = bpf_map_lookup_elem(&seqloss_tx, &k);
		if (!v) {
			if (st)
				st->tx_full++;
			unmark(skb, old_frag);
			return TC_ACT_UNSPEC;
		}
	}
	if (v->ifindex && v->ifindex != skb->ingress_ifindex) {
		if (st)
			st->tx_foreign++;
		unmark(skb, old_frag);
		return TC_ACT_UNSPEC;
	}
	// GSO: the packet takes segs numbers; segmentation later gives its
	// segments consecutive IDs from the first (inet_gso_segment).
	__u64 seq = __sync_fetch_and_add(&v->segs, segs);
	__sync_fetch_and_add(&v->packets, 1);

	__be16 w[2] = {htons((__u16)seq), old_frag | htons(IP_MARK)};
	bpf_l3_csum_replace(skb, IP_CSUM_OFF, old_id, w[0], 2);
	bpf_l3_csum_replace(skb, IP_CSUM_OFF, old_frag, w[1], 2);
	bpf_skb_store_bytes(skb, IP_ID_OFF, w, sizeof(w), 0);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int seqloss_count(struct __sk_buff *skb)
{
	struct ip4 *ip = ip4_header(skb);
	if (!ip)
		return TC_ACT_UNSPEC;
	struct stats *st = stats();
	__be16 frag = ip->frag_off;
	if (frag & htons(IP_MF | IP_OFFSET)) {
		if (st)
			st->fragments++;
		return TC_ACT_UNSPEC;
	}
	if (!(frag & htons(IP_MARK))) {
		if (st)
			st->rx_unmarked++;
		return TC_ACT_UNSPEC;
	}
	struct pair k;
	__builtin_memcpy(k.src, ip->saddr, 4);
	__builtin_memcpy(k.dst, ip->daddr, 4);
	__u16 id = ntohs(ip->id);
	__u32 segs = segments(skb);
	__u32 iif = skb->ingress_ifindex;

	// Deliver the packet without the mark.
	unmark(skb, frag);

	if (!learn && !bpf_map_lookup_elem(&seqloss_uplinks, &iif)) {
		if (st)
			st->rx_foreign++;
		return TC_ACT_UNSPEC;
	}
	struct rx_val *v = bpf_map_lookup_elem(&seqloss_rx, &k);
	if (!v) {
		if (!learn) {
			if (st)
				st->rx_undeclared++;
			return TC_ACT_UNSPEC;
		}
		struct rx_val first = {};
		first.next = (__u16)(id + segs);
		first.packets = 1;
		first.segs = segs;
		if (bpf_map_update_elem(&seqloss_rx, &k, &first, BPF_NOEXIST) == 0)
			return TC_ACT_UNSPEC;
		v = bpf_map_lookup_elem(&seqloss_rx, &k); // another CPU inserted it
		if (!v) {
			if (st)
				st->rx_full++;
			return TC_ACT_UNSPEC;
		}
	}
	bpf_spin_lock(&v->lock);
	__s16 d = (__s16)(__u16)(id - (__u16)v->next);
	if (v->packets == 0) {
		// A declared pair's first packet: it only sets the expectation.
		v->next = (__u16)(id + segs);
	} else if (d >= 0 && d < SEQ_WINDOW) {
		v->gaps += d;
		v->next = (__u16)(id + segs);
	} else if (d < 0 && d > -SEQ_WINDOW) {
		v->late += segs;
	} else {
		v->resyncs++;
		v->next = (__u16)(id + segs);
	}
	v->packets++;
	v->segs += segs;
	bpf_spin_unlock(&v->lock);
	return TC_ACT_UNSPEC;
}

char _license[] SEC("license") = "Dual BSD/GPL";
