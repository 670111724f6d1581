// SPDX-License-Identifier: GPL-2.0
/*
 * remu_recv.c - where received packets meet the transport engines.
 *
 * Owns only the hand-off: the wire layer (remu_net.c) calls remu_rcv()
 * once per packet that passed its checks (ICRC, BTH version, opcode,
 * headers, lengths, P_Key); remu_rcv() finds the QP by the BTH
 * destination QPN (a packet to the multicast QPN goes to
 * remu_mcast_rcv(), which hands each attached QP a copy through
 * remu_rcv_qp()), drops the packet, counted, when there is no such QP,
 * or it is of another transport, or the QP is not in a state that
 * receives (rcvd_no_qp), or its packet list is full (rcvd_rxq_full;
 * module parameter rxq_len, at most REMU_RXQ_MAX), or an RC or UC packet
 * does not come from the QP's peer to the QP's own address
 * (rcvd_bad_path: a host that learns a QPN and an rkey cannot write into
 * the QP's memory), and otherwise queues it on qp->eng.rxq and kicks the
 * engines (remu_eng_kick()), where the completer and responder take it.
 *
 * Locking: softirq (or the sender with BH off: loopback), under
 * rcu_read_lock, with a reference on the device held; nothing here
 * sleeps.  The QP reference taken here is dropped before returning:
 * destroy_qp waits for it, then cancels the work and purges the list.
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

	RCU_LOCKDEP_WARN(!rcu_read_lock_held(), "packet handed over outside rcu_read_lock");
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

/**
 * remu_rcv - hand a packet that passed the wire layer's checks to its QP
 * @rdev: the device it arrived on, referenced by the caller for the call
 * @skb: the packet; consumed
 * @pkt: its parsed view
 *
 * Context: softirq, or the sender with BH off (loopback); under
 * rcu_read_lock.
 */
void remu_rcv(struct remu_dev *rdev, struct sk_buff *skb,
	      struct remu_pkt *pkt)
{
	struct remu_qp *qp;

	RCU_LOCKDEP_WARN(!rcu_read_lock_held(), "packet received outside rcu_read_lock");
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
