/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_net.h - the wire layer's interface to the engines: building and
 * sending RoCEv2 packets (remu_net_alloc_skb, remu_net_xmit) and the one
 * receive entry point they implement (remu_rcv).  See remu_net.c.
 */
#ifndef REMU_NET_H
#define REMU_NET_H

#include <linux/skbuff.h>
#include <rdma/ib_verbs.h>

#include "remu_hdr.h"
#include "remu_opcode.h"

struct remu_dev;
struct remu_qp;

/**
 * struct remu_av - where a packet goes: the resolved address vector
 * @dcache:	RC/UC: the QP's route cache (remu_qp_eng.dst_cache), which
 *		remu_net_xmit() uses and fills; NULL: a route lookup per
 *		packet (UD, whose destination changes with every WQE)
 * @family:	AF_INET or AF_INET6 (from the source GID's network type)
 * @tclass:	IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN)
 * @hop_limit:	IPv4 TTL / IPv6 hop limit; 0 means the route's default
 * @flow_label:	IPv6 flow label (20 bits); also what @sport derives from
 * @sport:	UDP source port (network order), from the flow label, or a
 *		hash of the two QPNs when the flow label is 0
 * @dmac:	destination MAC as resolved by the core (informational: the
 *		IP stack resolves the next hop itself)
 * @saddr:	source address; IPv4 as ::ffff:a.b.c.d (the source GID)
 * @daddr:	destination address, same form (the destination GID)
 */
struct remu_av {
	struct dst_cache *dcache;
	u8		family;
	u8		tclass;
	u8		hop_limit;
	u32		flow_label;
	__be16		sport;
	u8		dmac[ETH_ALEN];
	struct in6_addr	saddr;
	struct in6_addr	daddr;
};

int remu_av_from_attr(struct remu_dev *rdev, const struct rdma_ah_attr *attr,
		      u32 src_qpn, u32 dst_qpn, struct remu_av *av);

struct sk_buff *remu_net_alloc_skb(struct remu_dev *rdev,
				   const struct remu_av *av,
				   unsigned int paylen, struct remu_pkt *pkt);
struct sk_buff *remu_net_alloc_skb_ref(struct remu_dev *rdev,
				       const struct remu_av *av,
				       unsigned int paylen,
				       struct remu_pkt *pkt);
int remu_net_end_ref(struct sk_buff *skb, const struct remu_pkt *pkt);
int remu_net_xmit(struct remu_dev *rdev, const struct remu_av *av,
		  struct sk_buff *skb);

/*
 * Payloads of at least this many bytes in ordinary process memory (UMEM
 * and ODP MRs) are sent by reference, as page frags, instead of copied
 * into the skb (docs/performance-log.md, step 5).
 */
#define REMU_FRAG_MIN_PAYLOAD	256

/* implemented by the engines (today: remu_recv.c) */
void remu_rcv(struct remu_dev *rdev, struct sk_buff *skb,
	      struct remu_pkt *pkt);
void remu_rcv_qp(struct remu_qp *qp, struct sk_buff *skb,
		 struct remu_pkt *pkt);

/* remu_mcast.c: a packet to the multicast QPN, from remu_rcv() */
void remu_mcast_rcv(struct remu_dev *rdev, struct sk_buff *skb,
		    struct remu_pkt *pkt);

/* remu_icrc.c */
int remu_icrc_init(void);
void remu_icrc_exit(void);
const char *remu_icrc_driver(void);
u32 remu_icrc(struct sk_buff *skb, const struct remu_bth *bth);

/* remu_net.c, called by remu_main.c */
int remu_net_init(void);
void remu_net_exit(void);
int remu_net_dev_add(struct remu_dev *rdev);
void remu_net_dev_del(struct remu_dev *rdev);

#endif /* REMU_NET_H */
