// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// pairbytes: bytes and packets received per IPv4 (source, destination) pair,
// counted by a tc cls_bpf program in direct-action mode on the ingress hook
// of a VM's own device (inside the VM's network namespace).
//
// The program only reads: it copies the headers it needs out of the packet
// (bpf_skb_load_bytes, which neither pulls nor writes), updates the maps and
// returns TC_ACT_UNSPEC, so the packet continues to the next filter of the
// hook, or passes if there is none. It never drops, redirects or modifies.
//
// What is counted for each packet (an skb: for a GSO packet, the whole
// super-packet):
//   bytes     skb->len as cls_bpf sees it at ingress: the Ethernet header
//             (14 bytes, pushed back for the program) + the IP packet
//             (headers and payload once, even for a GSO packet). The same
//             length the device's rx_bytes counter adds.
//   packets   1
//   segs      skb->gso_segs, or 1 for a packet that is not GSO: the frames
//             it is (or would be) on a wire
//   seg_bytes bytes + (segs - 1) * hdr_len, hdr_len = 14 + IP header +
//             TCP header (data offset) or UDP header (8) for TCP and UDP,
//             14 + IP header otherwise: the bytes of the frames once
//             segmented, what a qdisc counts (qdisc_pkt_len_init).
// Neither includes the Ethernet FCS, preamble or inter-frame gap.
//
// The file is self-contained (no kernel or libbpf headers): the few types,
// helper numbers and the prefix of struct __sk_buff below are the kernel's
// UAPI. Regenerate the objects with `go generate` (see doc.go).

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef __u16 __be16;

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define htons(x) ((__be16)__builtin_bswap16(x))
#else
#define htons(x) ((__be16)(x))
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

enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
};

#define BPF_F_NO_PREALLOC 1
#define BPF_F_MMAPABLE (1U << 10)
#define BPF_NOEXIST 1
#define TC_ACT_UNSPEC (-1)

#define NULL ((void *)0)

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static long (*bpf_skb_load_bytes)(const struct __sk_buff *skb, __u32 offset, void *to, __u32 len) = (void *)26;

#define ETH_P_IP 0x0800
#define ETH_HLEN 14
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define UDP_HLEN 8

// The fixed part of the IPv4 header.
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

// pair is the key of the per-pair map: IPv4 source and destination in
// network byte order.
struct pair {
	__u8 src[4];
	__u8 dst[4];
};

// counts is what is counted per pair (see the top of the file).
struct counts {
	__u64 bytes;
	__u64 packets;
	__u64 segs;
	__u64 seg_bytes;
};

// stats counts, per CPU, the packets not counted under a pair.
struct stats {
	struct counts overflow; // IPv4 packets of pairs that did not fit in the map
	struct counts other;    // packets that are not IPv4 over Ethernet (ARP, ...)
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct pair);
	__type(value, struct counts);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} pairbytes_pairs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct stats);
	__uint(max_entries, 1);
} pairbytes_stats SEC(".maps");

// Declared pairs: user space gives each pair it wants counted a slot
// (pairbytes_slots, which the program only reads) in an array that user
// space reads by mapping it into its memory (pairbytes_declared), with no
// system call per reading and no walk of a hash table's buckets.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct pair);
	__type(value, __u32);
	__uint(max_entries, 16384);
} pairbytes_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct counts);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_MMAPABLE);
} pairbytes_declared SEC(".maps");

// learn is set at load: 1, a pair that is not declared gets an entry of
// its own in pairbytes_pairs; 0, its packets are counted as overflow
// (only declared pairs are counted one by one, so that what a VM's peers
// send cannot fill a map).
const volatile __u32 learn = 1;

static __always_inline void add(struct counts *c, const struct counts *d)
{
	c->bytes += d->bytes;
	c->packets += d->packets;
	c->segs += d->segs;
	c->seg_bytes += d->seg_bytes;
}

static __always_inline void add_atomic(struct counts *c, const struct counts *d)
{
	__sync_fetch_and_add(&c->bytes, d->bytes);
	__sync_fetch_and_add(&c->packets, d->packets);
	__sync_fetch_and_add(&c->segs, d->segs);
	__sync_fetch_and_add(&c->seg_bytes, d->seg_bytes);
}

// hdr_len is the length of the headers every segment of a GSO packet
// carries: Ethernet, IPv4 and the TCP or UDP header.
static __always_inline __u32 hdr_len(struct __sk_buff *skb, const struct ip4 *ip)
{
	__u32 l4 = ETH_HLEN + (__u32)(ip->version_ihl & 0x0f) * 4;
	if (ip->protocol == IPPROTO_UDP)
		return l4 + UDP_HLEN;
	if (ip->protocol != IPPROTO_TCP)
		return l4;
	__u8 doff;
	if (bpf_skb_load_bytes(skb, l4 + 12, &doff, 1) < 0)
		return l4;
	return l4 + (__u32)(doff >> 4) * 4;
}

SEC("tc")
int pairbytes_count(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct counts d = {.bytes = skb->len, .packets = 1, .segs = 1, .seg_bytes = skb->len};
	struct ip4 ip;
	if (skb->protocol != htons(ETH_P_IP) || bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0 ||
	    (ip.version_ihl >> 4) != 4 || (ip.version_ihl & 0x0f) < 5) {
		struct stats *st = bpf_map_lookup_elem(&pairbytes_stats, &zero);
		if (st)
			add(&st->other, &d);
		return TC_ACT_UNSPEC;
	}
	__u32 segs = skb->gso_segs;
	if (segs > 1) {
		d.segs = segs;
		d.seg_bytes += (__u64)(segs - 1) * hdr_len(skb, &ip);
	}
	struct pair k;
	__builtin_memcpy(k.src, ip.saddr, 4);
	__builtin_memcpy(k.dst, ip.daddr, 4);
	__u32 *slot = bpf_map_lookup_elem(&pairbytes_slots, &k);
	if (slot) {
		__u32 i = *slot;
		struct counts *dc = bpf_map_lookup_elem(&pairbytes_declared, &i);
		if (dc) {
			add_atomic(dc, &d);
			return TC_ACT_UNSPEC;
		}
	}
	struct counts *c = NULL;
	if (!learn)
		goto overflow;
	c = bpf_map_lookup_elem(&pairbytes_pairs, &k);
	if (c) {
		add_atomic(c, &d);
		return TC_ACT_UNSPEC;
	}
	// A new pair starts with this packet's counts. Another CPU may insert
	// the pair between the lookup and the update (then add to its entry);
	// a full map refuses it (then the packet is an overflow).
	if (bpf_map_update_elem(&pairbytes_pairs, &k, &d, BPF_NOEXIST) == 0)
		return TC_ACT_UNSPEC;
	c = bpf_map_lookup_elem(&pairbytes_pairs, &k);
	if (c) {
		add_atomic(c, &d);
		return TC_ACT_UNSPEC;
	}
overflow:;
	struct stats *st = bpf_map_lookup_elem(&pairbytes_stats, &zero);
	if (st)
		add(&st->overflow, &d);
	return TC_ACT_UNSPEC;
}

char _license[] SEC("license") = "Dual BSD/GPL";
