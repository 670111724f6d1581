/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_hdr.h - the InfiniBand transport headers as RoCEv2 carries them
 * inside UDP (port 4791), and struct remu_pkt, the parsed view of one
 * packet that the wire layer hands to the engines and that the engines
 * fill in when they build a packet.
 *
 * Layout of a RoCEv2 packet (all fields big-endian on the wire):
 *
 *   Ethernet | IPv4 or IPv6 | UDP (dport 4791) | BTH | [ext. headers]
 *            | payload | pad (0-3 bytes) | ICRC (4 bytes)
 *
 * The extended headers an opcode carries, and their order, come from the
 * opcode table (remu_opcode.h); nothing in remu decodes the opcode byte
 * itself.  All structs here are the exact wire layout (packed, __be);
 * the accessors only ever read or write whole fields through be*_to_cpu.
 *
 * Locking: none; these are plain views of packet memory owned by the
 * caller.
 */
#ifndef REMU_HDR_H
#define REMU_HDR_H

#include <linux/types.h>
#include <linux/in6.h>
#include <linux/if_ether.h>
#include <asm/byteorder.h>

struct sk_buff;
struct net_device;
struct remu_dev;
struct remu_opcode_info;

#define REMU_ROCE_V2_PORT	4791
#define REMU_ICRC_LEN		4
#define REMU_PSN_MASK		0x00ffffffu
#define REMU_QPN_MASK		0x00ffffffu
#define REMU_BTH_TVER		0	/* the only transport header version */

/*
 * BTH, base transport header, 12 bytes:
 *   byte 0      opcode
 *   byte 1      SE:1 M:1 PadCnt:2 TVer:4
 *   bytes 2-3   P_Key
 *   byte 4      FECN:1 BECN:1 Resv6a:6
 *   bytes 5-7   destination QP
 *   byte 8      AckReq:1 Resv7:7
 *   bytes 9-11  PSN
 * Resv8a (byte 4's reserved bits in the IBA's original layout) is what
 * the ICRC masks: see remu_icrc.c.
 */
struct remu_bth {
	u8	opcode;
	u8	flags;
	__be16	pkey;
	__be32	qpn;
	__be32	apsn;
} __packed;

#define REMU_BTH_SE		0x80
#define REMU_BTH_MIG		0x40
#define REMU_BTH_PAD_MASK	0x30
#define REMU_BTH_PAD_SHIFT	4
#define REMU_BTH_TVER_MASK	0x0f
#define REMU_BTH_FECN		0x80000000u
#define REMU_BTH_BECN		0x40000000u
#define REMU_BTH_RESV6A		0x3f000000u
#define REMU_BTH_ACK_REQ	0x80000000u
#define REMU_BTH_RESV7		0x7f000000u

static inline u8 remu_bth_opcode(const struct remu_bth *b)
{
	return b->opcode;
}

static inline void remu_bth_set_opcode(struct remu_bth *b, u8 opcode)
{
	b->opcode = opcode;
}

static inline bool remu_bth_se(const struct remu_bth *b)
{
	return b->flags & REMU_BTH_SE;
}

static inline bool remu_bth_mig(const struct remu_bth *b)
{
	return b->flags & REMU_BTH_MIG;
}

static inline unsigned int remu_bth_pad(const struct remu_bth *b)
{
	return (b->flags & REMU_BTH_PAD_MASK) >> REMU_BTH_PAD_SHIFT;
}

static inline unsigned int remu_bth_tver(const struct remu_bth *b)
{
	return b->flags & REMU_BTH_TVER_MASK;
}

/* set SE, M, PadCnt and TVer (always REMU_BTH_TVER) at once */
static inline void remu_bth_set_flags(struct remu_bth *b, bool se, bool mig,
				      unsigned int pad)
{
	b->flags = (se ? REMU_BTH_SE : 0) | (mig ? REMU_BTH_MIG : 0) |
		   ((pad << REMU_BTH_PAD_SHIFT) & REMU_BTH_PAD_MASK) |
		   REMU_BTH_TVER;
}

static inline u16 remu_bth_pkey(const struct remu_bth *b)
{
	return be16_to_cpu(b->pkey);
}

static inline void remu_bth_set_pkey(struct remu_bth *b, u16 pkey)
{
	b->pkey = cpu_to_be16(pkey);
}

static inline u32 remu_bth_qpn(const struct remu_bth *b)
{
	return be32_to_cpu(b->qpn) & REMU_QPN_MASK;
}

static inline bool remu_bth_fecn(const struct remu_bth *b)
{
	return be32_to_cpu(b->qpn) & REMU_BTH_FECN;
}

static inline bool remu_bth_becn(const struct remu_bth *b)
{
	return be32_to_cpu(b->qpn) & REMU_BTH_BECN;
}

static inline u32 remu_bth_resv6a(const struct remu_bth *b)
{
	return (be32_to_cpu(b->qpn) & REMU_BTH_RESV6A) >> 24;
}

/* destination QP with FECN/BECN clear and Resv6a zero, as senders emit */
static inline void remu_bth_set_qpn(struct remu_bth *b, u32 qpn)
{
	b->qpn = cpu_to_be32(qpn & REMU_QPN_MASK);
}

static inline void remu_bth_set_ecn(struct remu_bth *b, bool fecn, bool becn)
{
	u32 v = be32_to_cpu(b->qpn) & ~(REMU_BTH_FECN | REMU_BTH_BECN);

	b->qpn = cpu_to_be32(v | (fecn ? REMU_BTH_FECN : 0) |
			     (becn ? REMU_BTH_BECN : 0));
}

static inline bool remu_bth_ack_req(const struct remu_bth *b)
{
	return be32_to_cpu(b->apsn) & REMU_BTH_ACK_REQ;
}

static inline u32 remu_bth_psn(const struct remu_bth *b)
{
	return be32_to_cpu(b->apsn) & REMU_PSN_MASK;
}

/* PSN and AckReq at once; Resv7 stays zero */
static inline void remu_bth_set_psn(struct remu_bth *b, u32 psn, bool ack_req)
{
	b->apsn = cpu_to_be32((psn & REMU_PSN_MASK) |
			      (ack_req ? REMU_BTH_ACK_REQ : 0));
}

/* RETH, RDMA extended transport header, 16 bytes */
struct remu_reth {
	__be64	va;
	__be32	rkey;
	__be32	len;
} __packed;

static inline u64 remu_reth_va(const struct remu_reth *h)
{
	return be64_to_cpu(h->va);
}

static inline u32 remu_reth_rkey(const struct remu_reth *h)
{
	return be32_to_cpu(h->rkey);
}

static inline u32 remu_reth_len(const struct remu_reth *h)
{
	return be32_to_cpu(h->len);
}

static inline void remu_reth_set(struct remu_reth *h, u64 va, u32 rkey,
				 u32 len)
{
	h->va = cpu_to_be64(va);
	h->rkey = cpu_to_be32(rkey);
	h->len = cpu_to_be32(len);
}

/*
 * AETH, ACK extended transport header, 4 bytes: Syndrome:8 MSN:24.
 * Syndrome bits 7..5: 000 ACK (credits in 4..0), 001 RNR NAK (timer in
 * 4..0), 011 NAK (code in 4..0).
 */
struct remu_aeth {
	__be32	smsn;
} __packed;

#define REMU_AETH_SYN_SHIFT	24
#define REMU_AETH_MSN_MASK	0x00ffffffu
#define REMU_AETH_TYPE_MASK	0xe0
#define REMU_AETH_ACK		0x00
#define REMU_AETH_RNR_NAK	0x20
#define REMU_AETH_NAK		0x60
#define REMU_AETH_CREDIT_INVALID 0x1f
#define REMU_AETH_NAK_PSN_SEQ_ERR	0x60
#define REMU_AETH_NAK_INVALID_REQ	0x61
#define REMU_AETH_NAK_REM_ACC_ERR	0x62
#define REMU_AETH_NAK_REM_OP_ERR	0x63
#define REMU_AETH_NAK_INVALID_RD_REQ	0x64

static inline u8 remu_aeth_syndrome(const struct remu_aeth *h)
{
	return be32_to_cpu(h->smsn) >> REMU_AETH_SYN_SHIFT;
}

static inline u32 remu_aeth_msn(const struct remu_aeth *h)
{
	return be32_to_cpu(h->smsn) & REMU_AETH_MSN_MASK;
}

static inline void remu_aeth_set(struct remu_aeth *h, u8 syndrome, u32 msn)
{
	h->smsn = cpu_to_be32(((u32)syndrome << REMU_AETH_SYN_SHIFT) |
			      (msn & REMU_AETH_MSN_MASK));
}

/* AtomicETH, 28 bytes: CmpSwap/FetchAdd requests */
struct remu_atmeth {
	__be64	va;
	__be32	rkey;
	__be64	swap_add;
	__be64	compare;
} __packed;

static inline u64 remu_atmeth_va(const struct remu_atmeth *h)
{
	return be64_to_cpu(h->va);
}

static inline u32 remu_atmeth_rkey(const struct remu_atmeth *h)
{
	return be32_to_cpu(h->rkey);
}

static inline u64 remu_atmeth_swap_add(const struct remu_atmeth *h)
{
	return be64_to_cpu(h->swap_add);
}

static inline u64 remu_atmeth_compare(const struct remu_atmeth *h)
{
	return be64_to_cpu(h->compare);
}

static inline void remu_atmeth_set(struct remu_atmeth *h, u64 va, u32 rkey,
				   u64 swap_add, u64 compare)
{
	h->va = cpu_to_be64(va);
	h->rkey = cpu_to_be32(rkey);
	h->swap_add = cpu_to_be64(swap_add);
	h->compare = cpu_to_be64(compare);
}

/* AtomicAckETH, 8 bytes: the original value an atomic found */
struct remu_atmack {
	__be64	orig;
} __packed;

static inline u64 remu_atmack_orig(const struct remu_atmack *h)
{
	return be64_to_cpu(h->orig);
}

static inline void remu_atmack_set(struct remu_atmack *h, u64 orig)
{
	h->orig = cpu_to_be64(orig);
}

/* DETH, datagram extended transport header, 8 bytes: Q_Key, Resv8, SrcQP:24 */
struct remu_deth {
	__be32	qkey;
	__be32	sqp;
} __packed;

static inline u32 remu_deth_qkey(const struct remu_deth *h)
{
	return be32_to_cpu(h->qkey);
}

static inline u32 remu_deth_sqp(const struct remu_deth *h)
{
	return be32_to_cpu(h->sqp) & REMU_QPN_MASK;
}

static inline void remu_deth_set(struct remu_deth *h, u32 qkey, u32 sqp)
{
	h->qkey = cpu_to_be32(qkey);
	h->sqp = cpu_to_be32(sqp & REMU_QPN_MASK);
}

/* ImmDt, immediate data, 4 bytes; passed to the receiver as it is (__be32) */
struct remu_immdt {
	__be32	imm;
} __packed;

/* IETH, invalidate extended transport header, 4 bytes: the R_Key */
struct remu_ieth {
	__be32	rkey;
} __packed;

static inline u32 remu_ieth_rkey(const struct remu_ieth *h)
{
	return be32_to_cpu(h->rkey);
}

static inline void remu_ieth_set(struct remu_ieth *h, u32 rkey)
{
	h->rkey = cpu_to_be32(rkey);
}

/* FETH, flush extended transport header (IBA 1.5 RDMA FLUSH), 4 bytes */
struct remu_feth {
	__be32	bits;	/* Resv:26 SEL:2 PLT:4 */
} __packed;

/* placement type: IB_FLUSH_GLOBAL and/or IB_FLUSH_PERSISTENT */
static inline u32 remu_feth_plt(const struct remu_feth *h)
{
	return be32_to_cpu(h->bits) & 0xf;
}

/* selectivity: IB_FLUSH_RANGE or IB_FLUSH_MR */
static inline u32 remu_feth_sel(const struct remu_feth *h)
{
	return (be32_to_cpu(h->bits) >> 4) & 0x3;
}

static inline void remu_feth_set(struct remu_feth *h, u32 bits)
{
	h->bits = cpu_to_be32(bits & 0x3f);
}

/*
 * The network a packet came from or goes to.  Addresses are kept as IPv6
 * (an IPv4 address in its ::ffff:a.b.c.d form, which is also its RoCEv2
 * GID), with the family telling which header is on the wire.
 */
struct remu_pkt_net {
	u8		family;		/* AF_INET or AF_INET6 */
	u8		tclass;		/* IPv4 TOS / IPv6 traffic class */
	u8		hop_limit;	/* IPv4 TTL / IPv6 hop limit */
	__be16		sport;		/* UDP source port */
	u32		flow_label;	/* IPv6 only */
	struct in6_addr	saddr;
	struct in6_addr	daddr;
};

/**
 * struct remu_pkt - one RoCEv2 packet, parsed (receive) or being built
 * (transmit)
 * @rdev:	the remu device it arrived on / leaves from
 * @ndev:	receive: the netdev it arrived on (lo for a local
 *		destination); transmit: the netdev it will leave by
 * @info:	the opcode's table entry (remu_opcode.h): headers, flags
 * @bth:	the BTH; it and every extended header are in the skb's
 *		linear part, starting at skb->data, so
 *		remu_pkt_hdr(pkt, REMU_HDR_RETH) etc. are plain pointers
 * @opcode:	the BTH opcode (copied for convenience)
 * @pad:	PadCnt of the BTH
 * @qpn:	destination QP of the BTH
 * @psn:	PSN of the BTH
 * @hdr_len:	BTH + extended headers, = @info->length
 * @paylen:	payload bytes after the headers, not counting pad and ICRC;
 *		at skb offset @hdr_len, possibly in skb frags: read it with
 *		skb_copy_bits()/skb_seq_read(), never assume it is linear
 * @net:	the network header's addresses, ports and class
 *
 * Receive: remu_rcv() gets a pointer valid only during the call; copy the
 * fields needed before queuing the skb to a work item.  The skb's data
 * starts at the BTH and its length is hdr_len + paylen + pad + ICRC.
 */
struct remu_pkt {
	struct remu_dev			*rdev;
	struct net_device		*ndev;
	const struct remu_opcode_info	*info;
	struct remu_bth			*bth;
	u8				opcode;
	u8				pad;
	u32				qpn;
	u32				psn;
	unsigned int			hdr_len;
	unsigned int			paylen;
	struct remu_pkt_net		net;
};

#endif /* REMU_HDR_H */
