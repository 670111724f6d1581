// SPDX-License-Identifier: GPL-2.0
/*
 * remu_recv.c - where received packets meet the transport engines.
 *
 * The wire layer (remu_net.c) calls remu_rcv() once per packet that
 * passed its checks: ICRC good, BTH version 0, an RC/UC/UD opcode, every
 * header the opcode carries present and linear, payload/pad/length
 * consistent, P_Key matching.
 *
 * Owns only the hand-off: find the QP by the BTH destination QPN
 * (remu_qp_get()), drop the packet (counted in rcvd_no_qp) if there is
 * none, it is of another transport, or it is not in a state that
 * receives, or (rcvd_rxq_full) if its packet list is full (module
 * parameter rxq_len, at most REMU_RXQ_MAX); drop an RC
 * or UC packet that does not come from the QP's peer to the QP's own
 * address (its IP source and destination must be the path's destination
 * and source GIDs, as on rxe; counted in rcvd_bad_path), so that a host
 * that learns a QPN and an rkey cannot write into the QP's memory or send
 * into it; otherwise queue the skb on the QP's bounded list
 * (qp->eng.rxq) and kick the QP's work item (remu_eng_kick(): queued, or
 * if the engines are running, in the work item or a doorbell's caller,
 * their owner is told to go round again), where the completer and
 * responder process it (remu_req.c, remu_resp.c, remu_comp.c).  A packet to the multicast QPN (0xffffff)
 * goes to remu_mcast_rcv() (remu_mcast.c), which hands a copy to each
 * attached QP through remu_rcv_qp().
 *
 * Context of remu_rcv(): softirq, under rcu_read_lock, with a reference
 * on the device held for the call; it must not sleep and owns the skb.
 * The QP reference taken here is dropped before returning: destroy_qp
 * waits for it, then cancels the work and purges the list.
 */
#include <linux/ip.h>
#include <linux/moduleparam.h>
#include <linux/ipv6.h>
#include <net/ipv6.h>

#include "remu_qp.h"
#include "remu_net.h"

/* how many packets may wait for a QP's work item (rcvd_rxq_full beyond) */
static unsigned int remu_rxq_len = REMU_RXQ_MAX;
module_param_named(rxq_len, remu_rxq_len, uint, 0644);
MODULE_PARM_DESC(rxq_len, "packets that may wait for one QP's work before more are dropped (counted in rcvd_rxq_full); default and maximum 1024");

static bool remu_rcv_type_ok(struct remu_qp *qp, u8 transport)
{
	switch (remu_qp_type(qp)) {
	case IB_QPT_RC:
		return transport == REMU_TR_RC;
	case IB_QPT_UC:
		return transport == REMU_TR_UC;
	case IB_QPT_UD:
		return transport == REMU_TR_UD;
	default:
		return false;
	}
}

/* an RC/UC packet travels from the QP's path destination to its source */
static bool remu_rcv_path_ok(struct remu_qp *qp, struct sk_buff *skb)
{
	struct in6_addr src, dst;

	if (remu_qp_type(qp) == IB_QPT_UD)
		return true;
	if (ip_hdr(skb)->version == 4) {
		ipv6_addr_set_v4mapped(ip_hdr(skb)->saddr, &src);
		ipv6_addr_set_v4mapped(ip_hdr(skb)->daddr, &dst);
	} else {
		src = ipv6_hdr(skb)->saddr;
		dst = ipv6_hdr(skb)->daddr;
	}
	return ipv6_addr_equal(&src, &qp->path_dst) &&
	       ipv6_addr_equal(&dst, &qp->path_src);
}

/**
 * remu_rcv_qp - hand a received packet to one QP
 * @qp: the QP, referenced by the caller for the call
 * @skb: the packet; consumed
 * @pkt: its parsed view
 *
 * Drops the packet if @qp is of another transport or not in a state that
 * receives (counted in rcvd_no_qp), has a full receive list
 * (rcvd_rxq_full), or if it does not come from the QP's path
 * (rcvd_bad_path).
 * Context: softirq, as remu_rcv().
 */
void remu_rcv_qp(struct remu_qp *qp, struct sk_buff *skb,
		 struct remu_pkt *pkt)
{
	struct remu_skb_cb *cb;
	enum ib_qp_state s;

	/* pairs with modify_qp's release: the path is set before RTR */
	s = smp_load_acquire(&qp->state);
	if (!remu_rcv_type_ok(qp, pkt->info->transport) ||
	    (s != IB_QPS_RTR && s != IB_QPS_RTS && s != IB_QPS_SQD) ||
	    ((pkt->info->flags & REMU_OP_RESP) && s == IB_QPS_RTR)) {
		remu_count(qp->rdev, REMU_CNT_RCVD_NO_QP);
		kfree_skb(skb);
		return;
	}
	if (skb_queue_len(&qp->eng.rxq) >=
	    clamp_t(unsigned int, READ_ONCE(remu_rxq_len), 1, REMU_RXQ_MAX)) {
		remu_count(qp->rdev, REMU_CNT_RCVD_RXQ_FULL);
		kfree_skb(skb);
		return;
	}
	if (!remu_rcv_path_ok(qp, skb)) {
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_PATH);
		kfree_skb(skb);
		return;
	}
	BUILD_BUG_ON(sizeof(*cb) > sizeof(skb->cb));
	cb = remu_cb(skb);
	memset(cb, 0, sizeof(*cb));
	cb->psn = pkt->psn;
	cb->paylen = pkt->paylen;
	cb->hdr_len = pkt->hdr_len;
	cb->opcode = pkt->opcode;
	skb_queue_tail(&qp->eng.rxq, skb);
	remu_eng_kick(qp);
}

void remu_rcv(struct remu_dev *rdev, struct sk_buff *skb,
	      struct remu_pkt *pkt)
{
	struct remu_qp *qp;

	if (pkt->qpn == IB_MULTICAST_QPN) {
		remu_mcast_rcv(rdev, skb, pkt);
		return;
	}
	qp = remu_qp_get(rdev, pkt->qpn);
	if (!qp) {
		remu_count(rdev, REMU_CNT_RCVD_NO_QP);
		kfree_skb(skb);
		return;
	}
	remu_rcv_qp(qp, skb, pkt);
	remu_qp_put(qp);
}
