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
 * receives; otherwise queue the skb on the QP's bounded list
 * (qp->eng.rxq) and queue the QP's work item, where the completer and
 * responder process it (remu_req.c, remu_resp.c, remu_comp.c).
 *
 * Context of remu_rcv(): softirq, under rcu_read_lock, with a reference
 * on the device held for the call; it must not sleep and owns the skb.
 * The QP reference taken here is dropped before returning: destroy_qp
 * waits for it, then cancels the work and purges the list.
 */
#include "remu_qp.h"
#include "remu_net.h"

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

void remu_rcv(struct remu_dev *rdev, struct sk_buff *skb,
	      struct remu_pkt *pkt)
{
	struct remu_skb_cb *cb;
	enum ib_qp_state s;
	struct remu_qp *qp;

	qp = remu_qp_get(rdev, pkt->qpn);
	if (!qp) {
		remu_count(rdev, REMU_CNT_RCVD_NO_QP);
		kfree_skb(skb);
		return;
	}
	s = READ_ONCE(qp->state);
	if (!remu_rcv_type_ok(qp, pkt->info->transport) ||
	    (s != IB_QPS_RTR && s != IB_QPS_RTS && s != IB_QPS_SQD) ||
	    ((pkt->info->flags & REMU_OP_RESP) && s == IB_QPS_RTR) ||
	    skb_queue_len(&qp->eng.rxq) >= REMU_RXQ_MAX) {
		remu_count(rdev, REMU_CNT_RCVD_NO_QP);
		kfree_skb(skb);
		goto out;
	}
	BUILD_BUG_ON(sizeof(*cb) > sizeof(skb->cb));
	cb = remu_cb(skb);
	memset(cb, 0, sizeof(*cb));
	cb->psn = pkt->psn;
	cb->paylen = pkt->paylen;
	cb->hdr_len = pkt->hdr_len;
	cb->opcode = pkt->opcode;
	skb_queue_tail(&qp->eng.rxq, skb);
	queue_work(remu_wq, &qp->send_work);
out:
	remu_qp_put(qp);
}
