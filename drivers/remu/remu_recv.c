// SPDX-License-Identifier: GPL-2.0
/*
 * remu_recv.c - where received packets meet the transport engines.
 *
 * The wire layer (remu_net.c) calls remu_rcv() once per packet that
 * passed its checks: ICRC good, BTH version 0, an RC/UC/UD opcode, every
 * header the opcode carries present and linear, payload/pad/length
 * consistent, P_Key matching.  The engines (QP lookup by pkt->qpn, then
 * responder or completer) will own this function and replace this file.
 *
 * Today remu has no QPs, so no packet can find one: each is counted in
 * rcvd_no_qp and freed.  Nothing is processed.
 *
 * Context of remu_rcv(): softirq, under rcu_read_lock, with a reference
 * on the device held for the call; it must not sleep (the engines will
 * queue to work items) and owns the skb.
 */
#include "remu.h"
#include "remu_net.h"

void remu_rcv(struct remu_dev *rdev, struct sk_buff *skb,
	      struct remu_pkt *pkt)
{
	remu_count(rdev, REMU_CNT_RCVD_NO_QP);
	kfree_skb(skb);
}
