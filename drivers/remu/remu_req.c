// SPDX-License-Identifier: GPL-2.0
/*
 * remu_req.c - the requester: send WQEs -> request packets.
 *
 * Owns: the SQ consumer side while the QP is in RTS: each send WQE is
 * copied out of the ring once (qp->eng.copy) before it is validated or
 * used, given its PSNs, segmented by the path MTU into request packets
 * (an RC payload of REMU_FRAG_MIN_PAYLOAD bytes or more in UMEM/ODP MRs
 * attached by reference as page frags, remu_sge_frag_skb(); any other
 * gathered with remu_sge_copy() or taken from the inline data) and sent
 * with remu_net_xmit().  A packet sent again is built again from the
 * MRs, as a NIC reads memory again for a retransmission.  RC WQEs stay in
 * the ring (slot not consumed) until the completer retires them; UC/UD
 * WQEs retire as soon as their last packet is sent.  RC sends stop at a
 * window of REMU_REQ_WINDOW unacknowledged packets and at max_rd_atomic
 * outstanding READs/atomics.  Every RC packet sent starts the retransmit
 * timer if it is not running (remu_comp_arm(); the completer owns it), so
 * a WQE the window stopped before its last packet is still covered.
 * Going back (remu_req_go_back()) resends from a PSN; a READ is resent
 * for the responses it still lacks only (from PSN first + rcvd, address
 * and length moved to match), a finished READ/atomic is skipped.
 * LOCAL_INV, (kernel QPs only) REG_MR and (user QPs only) BIND_MW and UMR
 * send nothing: each runs when every WQE before it has completed, through
 * the MR layer (remu_key_invalidate(), remu_mr_fast_reg(), remu_mw_bind(),
 * remu_mkey_umr()), and completes at once, IB_WC_MW_BIND_ERR with the QP
 * to ERR if the MR layer refuses.  A UD WQE's address vector is resolved
 * when the WQE is posted (remu_req_post_av(), from the doorbell or a
 * kernel post_send), as a NIC copies it into the WQE: the AH may be
 * destroyed as soon as ibv_post_send() returns; the requester stops at
 * the first WQE posted but not yet rung.  A QP with a rate limit sends
 * each packet when the pacer lets it (remu_pace.c) and otherwise holds
 * (REMU_REQ_PACE): the pacer's timer queues the work when it may go.
 *
 * Locking: the requester runs only in the engines' owner (remu_eng.c),
 * whose state needs no lock.  SQ slots are read and consumed under
 * qp->sq.cons_lock, never held across an MR copy.
 */
#include <rdma/ib_cache.h>

#include "remu_qp.h"
#include "remu_mr.h"
#include "remu_net.h"

void *remu_req_copy(struct remu_qp *qp, u32 idx)
{
	return qp->eng.copy + (size_t)(idx & qp->sq.ring.mask) *
			      qp->sq.ring.slot_size;
}

/*
 * The QP's address vector (RC/UC), into @av, with the QP's route cache.
 * Only the engines' owner calls this (and so uses the cache): emptying the
 * cache here, when the path has changed since it was filled, cannot race
 * with a lookup.
 */
int remu_req_av(struct remu_qp *qp, struct remu_av *av)
{
	struct rdma_ah_attr attr = qp->attr.ah_attr;
	struct remu_qp_eng *e = &qp->eng;
	struct remu_dst_key key = {};
	int err;

	attr.grh.sgid_attr = qp->ib_qp.av_sgid_attr;
	err = remu_av_from_attr(qp->rdev, &attr, qp->ib_qp.qp_num,
				qp->attr.dest_qp_num, av);
	if (err)
		return err;
	key.family = av->family;
	key.tclass = av->tclass;
	key.flow_label = av->flow_label;
	key.saddr = av->saddr;
	key.daddr = av->daddr;
	if (memcmp(&key, &e->dst_key, sizeof(key))) {
		dst_cache_reset_now(&e->dst_cache);
		e->dst_key = key;
	}
	av->dcache = &e->dst_cache;
	return 0;
}

/* IBA opcode of packet @first/@last of a WQE with @wr_op on @type */
static int remu_req_opcode(enum ib_qp_type type, u32 wr_op, bool first,
			   bool last)
{
	int base = type == IB_QPT_RC ? IB_OPCODE_RC :
		   type == IB_QPT_UC ? IB_OPCODE_UC : IB_OPCODE_UD;
	int op;

	switch (wr_op) {
	case IB_UVERBS_WR_SEND:
		op = first && last ? IB_OPCODE_SEND_ONLY :
		     first ? IB_OPCODE_SEND_FIRST :
		     last ? IB_OPCODE_SEND_LAST : IB_OPCODE_SEND_MIDDLE;
		break;
	case IB_UVERBS_WR_SEND_WITH_IMM:
		op = first && last ? IB_OPCODE_SEND_ONLY_WITH_IMMEDIATE :
		     first ? IB_OPCODE_SEND_FIRST :
		     last ? IB_OPCODE_SEND_LAST_WITH_IMMEDIATE :
		     IB_OPCODE_SEND_MIDDLE;
		break;
	case IB_UVERBS_WR_SEND_WITH_INV:
		op = first && last ? IB_OPCODE_SEND_ONLY_WITH_INVALIDATE :
		     first ? IB_OPCODE_SEND_FIRST :
		     last ? IB_OPCODE_SEND_LAST_WITH_INVALIDATE :
		     IB_OPCODE_SEND_MIDDLE;
		break;
	case IB_UVERBS_WR_RDMA_WRITE:
		op = first && last ? IB_OPCODE_RDMA_WRITE_ONLY :
		     first ? IB_OPCODE_RDMA_WRITE_FIRST :
		     last ? IB_OPCODE_RDMA_WRITE_LAST :
		     IB_OPCODE_RDMA_WRITE_MIDDLE;
		break;
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
		op = first && last ? IB_OPCODE_RDMA_WRITE_ONLY_WITH_IMMEDIATE :
		     first ? IB_OPCODE_RDMA_WRITE_FIRST :
		     last ? IB_OPCODE_RDMA_WRITE_LAST_WITH_IMMEDIATE :
		     IB_OPCODE_RDMA_WRITE_MIDDLE;
		break;
	case IB_UVERBS_WR_RDMA_READ:
		op = IB_OPCODE_RDMA_READ_REQUEST;
		break;
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
		op = IB_OPCODE_COMPARE_SWAP;
		break;
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		op = IB_OPCODE_FETCH_ADD;
		break;
	case IB_UVERBS_WR_FLUSH:
		op = IB_OPCODE_FLUSH;
		break;
	case IB_UVERBS_WR_ATOMIC_WRITE:
		op = IB_OPCODE_ATOMIC_WRITE;
		break;
	default:
		return -1;
	}
	return base + op;
}

static bool remu_req_op_ok(struct remu_qp *qp, u32 op)
{
	enum ib_qp_type type = qp->ib_qp.qp_type;

	switch (op) {
	case IB_UVERBS_WR_SEND:
	case IB_UVERBS_WR_SEND_WITH_IMM:
		return true;
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
	case IB_UVERBS_WR_LOCAL_INV:
		return type != IB_QPT_UD;
	case IB_UVERBS_WR_BIND_MW:
		/* user QPs: libremu posts binds (kernel ULPs use no windows) */
		return type != IB_QPT_UD && !qp->eng.kreg;
	case IB_UVERBS_WR_RDMA_READ:
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
	case IB_UVERBS_WR_SEND_WITH_INV:
		return type == IB_QPT_RC;
	case IB_UVERBS_WR_FLUSH:
	case IB_UVERBS_WR_ATOMIC_WRITE:
		/* IBA 1.5: not on kernels without it (remu_compat.h) */
		return type == IB_QPT_RC && REMU_HAVE_IBA15;
	case IB_WR_REG_MR:
		/* kernel only: its parameters are in qp->eng.kreg */
		return type != IB_QPT_UD && qp->eng.kreg;
	case REMU_WR_UMR:
		/* user RC QPs: libremu's remudv_wr_mr_list/_interleaved */
		return type == IB_QPT_RC && !qp->eng.kreg;
	default:
		return false;
	}
}

/*
 * executed by the requester itself, no packet: LOCAL_INV, REG_MR, BIND_MW
 * and UMR
 */
static bool remu_is_local(u32 op)
{
	return op == IB_UVERBS_WR_LOCAL_INV || op == IB_WR_REG_MR ||
	       op == IB_UVERBS_WR_BIND_MW || op == REMU_WR_UMR;
}

/*
 * WQEs that take a responder resource and complete by their own response,
 * never by an ACK of a later request: READ, the atomics, and IBA 1.5's
 * FLUSH and ATOMIC_WRITE (answered by an empty READ response)
 */
static bool remu_is_rd_atomic(u32 op)
{
	return op == IB_UVERBS_WR_RDMA_READ ||
	       op == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP ||
	       op == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD ||
	       op == IB_UVERBS_WR_FLUSH ||
	       op == IB_UVERBS_WR_ATOMIC_WRITE;
}

/* a UMR WQE: its entries are inline, remu_mkey_umr() reads them */
static int remu_req_check_umr(struct remu_qp *qp,
			      const struct remu_send_wqe *w)
{
	if (!(w->flags & REMU_WQE_INLINE))
		return IB_WC_LOC_QP_OP_ERR;
	if (w->inline_len > qp->max_inline)
		return IB_WC_LOC_LEN_ERR;
	return 0;
}

/*
 * The message length of WQE @w into @len: its inline bytes, or the sum of
 * its SGEs.  Return: 0, or the IB_WC_* status to complete it with.
 */
static int remu_req_wqe_len(struct remu_qp *qp, const struct remu_send_wqe *w,
			    u64 *len)
{
	const struct remu_sge *sge = (const struct remu_sge *)(w + 1);
	u32 i;

	*len = 0;
	if (w->flags & REMU_WQE_INLINE) {
		if (w->inline_len > qp->max_inline)
			return IB_WC_LOC_LEN_ERR;
		*len = w->inline_len;
		if (remu_is_rd_atomic(w->opcode))
			return IB_WC_LOC_QP_OP_ERR;
	} else {
		if (w->num_sge > qp->sq.max_sge)
			return IB_WC_LOC_LEN_ERR;
		for (i = 0; i < w->num_sge; i++)
			*len += sge[i].length;
	}
	if (*len > 0x80000000ull)
		return IB_WC_LOC_LEN_ERR;
	return 0;
}

/*
 * What @sw keeps of WQE @w of @len bytes: the length its packets carry
 * and how many packets it takes.  Return: 0, or the IB_WC_* status.
 */
static int remu_req_size(struct remu_qp *qp, const struct remu_send_wqe *w,
			 struct remu_swqe *sw, u64 len)
{
	sw->len = len;
	switch (w->opcode) {
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		if (len < 8)
			return IB_WC_LOC_LEN_ERR;
		sw->len = 8;
		break;
	case IB_UVERBS_WR_ATOMIC_WRITE:
		sw->len = 8;		/* the value is in the WQE */
		break;
	case IB_UVERBS_WR_FLUSH:
		sw->len = 0;
		break;
	case IB_UVERBS_WR_LOCAL_INV:
	case IB_WR_REG_MR:
	case IB_UVERBS_WR_BIND_MW:
		break;
	default:
		if (remu_qp_type(qp) == IB_QPT_UD && len > qp->eng.mtu)
			return IB_WC_LOC_LEN_ERR;
		sw->npkts = max_t(u32, 1, DIV_ROUND_UP(len, qp->eng.mtu));
		break;
	}
	return 0;
}

/*
 * Copy the WQE at @idx out of the ring and validate the copy.
 * Return: 0, or the IB_WC_* status to complete it with.
 */
static int remu_req_fetch(struct remu_qp *qp, u32 idx)
{
	struct remu_swqe *sw = &qp->eng.st[idx & qp->sq.ring.mask];
	struct remu_send_wqe *w = remu_req_copy(qp, idx);
	unsigned long flags;
	u64 len;
	int err;

	spin_lock_irqsave(&qp->sq.cons_lock, flags);
	memcpy(w, remu_queue_slot_at(&qp->sq.ring, idx), qp->sq.ring.slot_size);
	spin_unlock_irqrestore(&qp->sq.cons_lock, flags);

	memset(sw, 0, sizeof(*sw));
	sw->valid = true;
	sw->npkts = 1;
	if (!remu_req_op_ok(qp, w->opcode))
		return IB_WC_LOC_QP_OP_ERR;
	if (w->opcode == REMU_WR_UMR)
		return remu_req_check_umr(qp, w);
	err = remu_req_wqe_len(qp, w, &len);
	if (err)
		return err;
	return remu_req_size(qp, w, sw, len);
}

/**
 * struct remu_req_pkt - a request packet being built (remu_req_build_pkt())
 * @qp:		the sending QP
 * @w:		the WQE (the requester's copy)
 * @sw:		its state: the packet is number @sw->sent
 * @av:		where it goes
 * @by_ref:	its payload is attached as page frags of the MRs
 * @pkt:	the headers' layout, from the wire layer
 * @skb:	the packet
 * @psn:	its PSN (not masked)
 * @off:	offset of its payload in the message
 * @plen:	payload bytes
 * @roff:	READ: offset in the message of what it asks for
 * @rlen:	the RETH's DMA length
 * @first, @last: the message's first / last request packet
 * @rd:		a READ, atomic, FLUSH or ATOMIC_WRITE (one request packet)
 * @ack_every:	asks for an ACK as a last packet or a multiple of
 *		REMU_ACK_EVERY, or before a hold of the pacer
 * @gb_first:	the first packet of a go-back (remu_req_go_back())
 * @wire:	its bytes on the wire, as the rate limit counts them
 */
struct remu_req_pkt {
	struct remu_qp *qp;
	struct remu_send_wqe *w;
	struct remu_swqe *sw;
	const struct remu_av *av;
	bool by_ref;
	struct remu_pkt pkt;
	struct sk_buff *skb;
	u32 psn;
	u32 off;
	u32 plen;
	u32 roff;
	u32 rlen;
	bool first;
	bool last;
	bool rd;
	bool ack_every;
	bool gb_first;
	u32 wire;
};

/* opcode, PSN, payload and AckReq of the packet.  Return: 0 or -EINVAL */
static int remu_req_pkt_plan(struct remu_req_pkt *p)
{
	const struct remu_send_wqe *w = p->w;
	struct remu_swqe *sw = p->sw;
	struct remu_qp_eng *e = &p->qp->eng;
	int op;

	p->first = sw->sent == 0;
	p->rd = remu_is_rd_atomic(w->opcode);
	p->last = p->rd || sw->sent + 1 == sw->npkts;
	op = remu_req_opcode(remu_qp_type(p->qp), w->opcode, p->first, p->last);
	if (op < 0)
		return -EINVAL;
	p->pkt.opcode = op;
	p->off = sw->sent * e->mtu;
	if (!p->rd || w->opcode == IB_UVERBS_WR_ATOMIC_WRITE)
		p->plen = min(sw->len - p->off, e->mtu);
	p->psn = sw->first_psn + (p->rd ? 0 : sw->sent);
	p->rlen = sw->len;
	if (w->opcode == IB_UVERBS_WR_RDMA_READ) {
		/*
		 * Sent again: ask only for the responses still missing
		 * first (IBA allows a resent READ to start at any PSN of the
		 * original, with its address and length moved to match).
		 */
		p->roff = sw->rcvd * e->mtu;
		p->rlen = min_t(u64, (u64)remu_swqe_read_end(e, sw) * e->mtu,
				sw->len) - p->roff;
		p->psn = sw->first_psn + sw->rcvd;
	}
	/*
	 * AckReq: a message's last packet, every REMU_ACK_EVERY PSNs, and
	 * the first packet of a go-back (remu_req_go_back())
	 */
	p->ack_every = p->last || (p->psn % REMU_ACK_EVERY) == 0;
	p->gb_first = e->areq && p->psn == e->areq_psn;
	p->wire = remu_pace_wire_len(p->av, remu_opcode[op].length, p->plen);
	/*
	 * RC under a rate limit: the packet before a hold asks for an ACK,
	 * so that the hold leaves nothing unacknowledged (remu_req_pace())
	 */
	if (!p->ack_every && remu_qp_type(p->qp) == IB_QPT_RC &&
	    remu_pace_will_hold(p->qp, p->wire))
		p->ack_every = true;
	return 0;
}

/* the skb with its BTH.  Return: 0 or -ENOMEM */
static int remu_req_pkt_alloc(struct remu_req_pkt *p)
{
	struct remu_qp *qp = p->qp;
	const struct remu_send_wqe *w = p->w;
	enum ib_qp_type type = remu_qp_type(qp);

	p->skb = p->by_ref ?
		 remu_net_alloc_skb_ref(qp->rdev, p->av, p->plen, &p->pkt) :
		 remu_net_alloc_skb(qp->rdev, p->av, p->plen, &p->pkt);
	if (!p->skb)
		return -ENOMEM;
	remu_bth_set_flags(p->pkt.bth,
			   p->last && (w->flags & REMU_WQE_SOLICITED), false,
			   p->pkt.pad);
	remu_bth_set_qpn(p->pkt.bth, type == IB_QPT_UD ? w->remote_qpn :
			 qp->attr.dest_qp_num);
	remu_bth_set_psn(p->pkt.bth, p->psn, type == IB_QPT_RC &&
			 (p->ack_every || p->gb_first));
	return 0;
}

/* the extended headers the opcode has, from the WQE */
static void remu_req_pkt_ext(struct remu_req_pkt *p)
{
	const struct remu_send_wqe *w = p->w;
	struct remu_qp *qp = p->qp;
	u32 qkey;
	void *h;

	h = remu_pkt_hdr(&p->pkt, REMU_HDR_RETH);
	if (h)
		remu_reth_set(h, w->remote_addr + p->roff, w->rkey,
			      w->opcode == IB_UVERBS_WR_FLUSH ?
			      (u32)w->compare_add : p->rlen);
	h = remu_pkt_hdr(&p->pkt, REMU_HDR_FETH);
	if (h)
		remu_feth_set(h, w->ex_data);
	h = remu_pkt_hdr(&p->pkt, REMU_HDR_IMMDT);
	if (h)
		((struct remu_immdt *)h)->imm = (__force __be32)w->ex_data;
	h = remu_pkt_hdr(&p->pkt, REMU_HDR_IETH);
	if (h)
		remu_ieth_set(h, w->ex_data);
	h = remu_pkt_hdr(&p->pkt, REMU_HDR_DETH);
	if (h) {
		qkey = (w->remote_qkey & 0x80000000u) ? qp->attr.qkey :
							w->remote_qkey;
		if (remu_qp_is_gsi(qp))
			qkey = IB_QP1_QKEY;
		remu_deth_set(h, qkey, qp->ib_qp.qp_num);
	}
	h = remu_pkt_hdr(&p->pkt, REMU_HDR_ATMETH);
	if (!h)
		return;
	if (w->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP)
		remu_atmeth_set(h, w->remote_addr, w->rkey, w->swap,
				w->compare_add);
	else
		remu_atmeth_set(h, w->remote_addr, w->rkey, w->compare_add, 0);
}

/*
 * The payload: page frags of the MRs (@p->by_ref), ATOMIC_WRITE's value
 * or the inline bytes from the WQE, or a copy from the MRs.
 * Return: 0 or the MR layer's errno.
 */
static int remu_req_pkt_payload(struct remu_req_pkt *p)
{
	struct remu_send_wqe *w = p->w;
	struct remu_qp *qp = p->qp;
	struct remu_sgl sgl = {
		.rdev = qp->rdev,
		.pd = to_remu_pd(qp->ib_qp.pd),
		.sges = (struct remu_sge *)(w + 1),
		.num = w->num_sge,
	};
	u8 *buf;
	int err;

	if (p->by_ref) {
		err = remu_sge_frag_skb(&sgl, p->off, p->skb, p->plen);
		if (!err)
			err = remu_net_end_ref(p->skb, &p->pkt);
		return err;
	}
	if (!p->plen)
		return 0;
	buf = p->skb->data + p->pkt.hdr_len;
	if (w->opcode == IB_UVERBS_WR_ATOMIC_WRITE) {
		/* the 8 bytes, as they were in the WQE's memory */
		memcpy(buf, &w->compare_add, sizeof(w->compare_add));
		return 0;
	}
	if (w->flags & REMU_WQE_INLINE) {
		memcpy(buf, (u8 *)(w + 1) + p->off, p->plen);
		return 0;
	}
	return remu_sge_copy(&sgl, p->off, buf, p->plen, REMU_FROM_MR);
}

static bool remu_is_send(u32 op)
{
	return op == IB_UVERBS_WR_SEND || op == IB_UVERBS_WR_SEND_WITH_IMM ||
	       op == IB_UVERBS_WR_SEND_WITH_INV;
}

/* send the finished packet: counters, a round trip to time, sent_end */
static void remu_req_pkt_xmit(struct remu_req_pkt *p)
{
	struct remu_qp *qp = p->qp;
	struct remu_qp_eng *e = &qp->eng;
	struct remu_swqe *sw = p->sw;
	u32 end;

	if (p->first && remu_is_send(p->w->opcode))
		remu_count(qp->rdev, REMU_CNT_RDMA_SEND);
	/* time a round trip: the first sending of an RC packet that asks for an ACK */
	if (remu_qp_type(qp) == IB_QPT_RC && !p->rd && !e->rtt_t &&
	    p->ack_every && !remu_psn_before(p->psn, e->sent_end))
		remu_comp_rtt_start(qp, p->psn);
	remu_pace_sent(qp, p->wire);
	remu_net_xmit(qp->rdev, p->av, p->skb);	/* a lost packet is retransmitted */
	if (p->gb_first)
		e->areq = false;
	/* responses may now come up to here (READ: one per response) */
	end = p->rd ? sw->first_psn + sw->npkts : p->psn + 1;
	if (remu_psn_before(e->sent_end, end))
		e->sent_end = end & REMU_PSN_MASK;
}

/*
 * Build packet number @sw->sent of the WQE at @idx and send it; with
 * @by_ref its payload is attached as page frags of the MRs (-EOPNOTSUPP
 * or -E2BIG when it cannot be: the caller builds it again with a copy).
 */
static int remu_req_build_pkt(struct remu_qp *qp, u32 idx,
			      const struct remu_av *av, bool by_ref)
{
	struct remu_req_pkt p = {
		.qp = qp,
		.w = remu_req_copy(qp, idx),
		.sw = &qp->eng.st[idx & qp->sq.ring.mask],
		.av = av,
		.by_ref = by_ref,
	};
	int err;

	err = remu_req_pkt_plan(&p);
	if (err)
		return err;
	err = remu_req_pkt_alloc(&p);
	if (err)
		return err;
	remu_req_pkt_ext(&p);
	err = remu_req_pkt_payload(&p);
	if (err) {
		kfree_skb(p.skb);
		return err;
	}
	remu_req_pkt_xmit(&p);
	return 0;
}

/* build and send packet number @sw->sent of the WQE at @idx */
static int remu_req_send_pkt(struct remu_qp *qp, u32 idx,
			     const struct remu_av *av)
{
	struct remu_swqe *sw = &qp->eng.st[idx & qp->sq.ring.mask];
	struct remu_send_wqe *w = remu_req_copy(qp, idx);
	int err;

	/*
	 * By reference: a payload of REMU_FRAG_MIN_PAYLOAD bytes or more
	 * (below that one copy into the skb costs less than the page
	 * references and the frag for the ICRC), gathered from SGEs of a
	 * process's RC QP.  RC only: its WQE completes once the responder
	 * has placed the bytes (the ACK comes after), so a buffer reused
	 * after the completion is read by no packet still to be placed (a
	 * stale duplicate is dropped for its ICRC or as a duplicate).  UC
	 * and UD complete when the packet leaves, as a NIC's do once it has
	 * read the memory: their payload is copied.  A kernel QP's MRs are
	 * kernel memory: copied.  Never inline data or ATOMIC_WRITE's value,
	 * which live in the WQE.
	 */
	if (qp->is_user && qp->ib_qp.qp_type == IB_QPT_RC && !sw->copy &&
	    !(w->flags & REMU_WQE_INLINE) &&
	    !remu_is_rd_atomic(w->opcode) &&
	    min_t(u32, sw->len - sw->sent * qp->eng.mtu, qp->eng.mtu) >=
	    REMU_FRAG_MIN_PAYLOAD) {
		err = remu_req_build_pkt(qp, idx, av, true);
		if (err != -EOPNOTSUPP && err != -E2BIG)
			return err;
		sw->copy = true;
	}
	return remu_req_build_pkt(qp, idx, av, false);
}

static int remu_local_status(int err)
{
	switch (err) {
	case -EMSGSIZE:
		return IB_WC_LOC_LEN_ERR;
	case -ENOMEM:
		return IB_WC_LOC_QP_OP_ERR;
	default:
		return IB_WC_LOC_PROT_ERR;
	}
}

/* the bind WQE's fields (see uapi/rdma/remu-abi.h) */
static int remu_req_bind(struct remu_qp *qp, const struct remu_send_wqe *w)
{
	struct remu_mw_bind b = {
		.mw_key = w->ex_data,
		.new_key = w->rkey,
		.lkey = (u32)w->swap,
		.addr = w->remote_addr,
		.length = w->compare_add,
		.access = w->remote_qkey,
	};

	return remu_mw_bind(qp->rdev, to_remu_pd(qp->ib_qp.pd),
			    qp->ib_qp.qp_num, &b);
}

/*
 * Execute the local WQE @w at ring index @idx (LOCAL_INV, REG_MR, BIND_MW).
 * Return: 0, or the errno of the MR layer (the WQE then completes with
 * IB_WC_MW_BIND_ERR, the status of a failed memory registration
 * operation, and the QP goes to ERR).
 */
static int remu_req_local(struct remu_qp *qp, u32 idx,
			  const struct remu_send_wqe *w)
{
	struct remu_pd *pd = to_remu_pd(qp->ib_qp.pd);
	const struct remu_kreg *r;

	if (w->opcode == IB_UVERBS_WR_LOCAL_INV)
		return remu_key_invalidate(qp->rdev, pd, 0, w->ex_data);
	if (w->opcode == IB_UVERBS_WR_BIND_MW)
		return remu_req_bind(qp, w);
	if (w->opcode == REMU_WR_UMR)
		return remu_mkey_umr(qp->rdev, pd, qp->ib_qp.qp_num, w);
	r = &qp->eng.kreg[idx & qp->sq.ring.mask];
	/* the MR must belong to the QP's PD */
	if (r->mr->pd != pd)
		return -EPERM;
	return remu_mr_fast_reg(r->mr, r->key, r->access, r->iova, r->length);
}

/* give READ @sw an out-of-order map, if one of the QP's maps is free */
static void remu_req_map_get(struct remu_qp_eng *e, struct remu_swqe *sw)
{
	unsigned long used = e->rdmap_used;
	unsigned int i;

	if (!e->maps)
		return;
	i = find_first_zero_bit(&used, e->maps->n);
	if (i >= e->maps->n)
		return;		/* none: responses placed in order only */
	memset(&e->maps->m[i], 0, sizeof(e->maps->m[i]));
	e->rdmap_used |= BIT(i);
	sw->map = i + 1;
}

/*
 * Send the request of the READ or atomic at ring index @idx once more,
 * now, without going back: the completer saw its responses go missing.
 */
void remu_req_ask_again(struct remu_qp *qp, u32 idx)
{
	struct remu_av av;

	if (READ_ONCE(qp->state) != IB_QPS_RTS || remu_req_av(qp, &av))
		return;
	remu_req_send_pkt(qp, idx, &av);
}

/* go back to @psn: resend everything from there (RC) */
void remu_req_go_back(struct remu_qp *qp, u32 psn)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	u32 old = e->head, idx;
	bool moved = false;

	/* the packet being timed is sent again: its ACK times nothing */
	if (e->rtt_t && !remu_psn_before(e->rtt_psn, psn))
		e->rtt_t = 0;

	for (idx = q->cons; idx - q->cons <= old - q->cons; idx++) {
		struct remu_swqe *sw = &e->st[idx & q->mask];
		struct remu_send_wqe *w = remu_req_copy(qp, idx);

		if (!sw->valid || idx - q->cons >= q->num_slots)
			break;
		if (remu_psn_before(psn, sw->first_psn))
			sw->sent = 0;
		else if (remu_psn_diff(psn, sw->first_psn) < sw->npkts)
			sw->sent = remu_is_rd_atomic(w->opcode) ? 0 :
				   remu_psn_diff(psn, sw->first_psn);
		else
			continue;
		if (!moved) {
			e->head = idx;
			e->psn = (sw->first_psn + sw->sent) & REMU_PSN_MASK;
			moved = true;
		}
	}
	/*
	 * The first packet resent asks for an ACK, whatever its PSN: when
	 * only the first few packets of a resend get through (a receive list
	 * that overflows, a burst lost behind them), the responder would take
	 * them without a word (AckReq goes on a message's last packet and
	 * every REMU_ACK_EVERY PSNs), and timeout after timeout would resend
	 * the same packets until retry_cnt ran out.
	 */
	if (moved) {
		e->areq = true;
		e->areq_psn = e->psn;
	}
}

/* the address vector of AH number @ah_num, for a UD WQE of @qp */
static int remu_req_ud_av(struct remu_qp *qp, u32 ah_num, u32 remote_qpn,
			  struct remu_av *av)
{
	const struct ib_gid_attr *sgid;
	struct rdma_ah_attr attr;
	int err;

	err = remu_ah_resolve(qp->rdev, ah_num, qp->ib_qp.pd, &attr);
	if (err)
		return err;
	sgid = rdma_get_gid_attr(&qp->rdev->ib_dev, 1, attr.grh.sgid_index);
	if (IS_ERR(sgid))
		return PTR_ERR(sgid);
	attr.grh.sgid_attr = sgid;
	err = remu_av_from_attr(qp->rdev, &attr, qp->ib_qp.qp_num, remote_qpn,
				av);
	rdma_put_gid_attr(sgid);
	return err;
}

/**
 * remu_req_post_av - resolve the AHs of the UD WQEs posted since last time
 * @qp: a UD QP; the caller holds qp->sq.prod_lock
 *
 * A NIC copies a UD WQE's address vector into the WQE when it is posted,
 * so destroying the AH once ibv_post_send() has returned does not affect
 * the sends already posted (mlx5; a process may post and destroy at once,
 * as rdmacm-utils' mckey does).  The doorbell (user QPs) and
 * remu_post_send() (kernel QPs) call this before they queue the work;
 * the requester sends no WQE beyond @qp->eng.av_next.  An AH that does
 * not resolve (unknown, another PD's) is recorded: its WQE completes with
 * IB_WC_LOC_QP_OP_ERR when the requester gets to it.
 *
 * Context: any; under qp->sq.prod_lock, takes qp->sq.cons_lock to read
 * the ring's extent.
 */
void remu_req_post_av(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	const struct remu_send_wqe *w;
	struct remu_uav *u;
	unsigned long flags;
	u32 idx, end;

	lockdep_assert_held(&qp->sq.prod_lock);
	spin_lock_irqsave(&qp->sq.cons_lock, flags);
	idx = (s32)(e->av_next - q->cons) < 0 ? q->cons : e->av_next;
	end = q->cons + remu_queue_used_by_consumer(q);
	spin_unlock_irqrestore(&qp->sq.cons_lock, flags);
	for (; idx != end; idx++) {
		w = remu_queue_slot_at(q, idx);
		u = &e->uav[idx & q->mask];
		u->err = remu_req_ud_av(qp, READ_ONCE(w->ah_num),
					READ_ONCE(w->remote_qpn), &u->av);
	}
	/* the AVs before the index: pairs with remu_req_get_wqe()'s acquire */
	smp_store_release(&e->av_next, end);
}

/*
 * The requester's states (remu_req_run()): each step looks at the WQE at
 * eng.head and returns the next state; the last three end the run.
 */
enum remu_req_state {
	REMU_REQ_GET_WQE,	/* the WQE at eng.head, if one may go now */
	REMU_REQ_START_WQE,	/* first look: copy, validate, give PSNs */
	REMU_REQ_CHECK_DONE,	/* a finished READ/atomic gone back over */
	REMU_REQ_LOCAL_OP,	/* LOCAL_INV, REG_MR, BIND_MW, UMR */
	REMU_REQ_CHECK_WINDOW,	/* RC: the fence and the window */
	REMU_REQ_GET_AV,	/* where its packets go */
	REMU_REQ_PACE,		/* the rate limit lets its next packet go? */
	REMU_REQ_SEND_PKT,	/* its next packet */
	REMU_REQ_WAIT,		/* nothing more to send now */
	REMU_REQ_ERROR,		/* a WQE completed in error, the QP to ERR */
	REMU_REQ_HANDOFF,	/* the doorbell's caller hands over */
};

/* WQE steps one run may take before it queues the work for the rest */
#define REMU_REQ_BUDGET		512

/**
 * struct remu_req_ctx - the requester's walk of the SQ in one run
 * @qp:		the QP
 * @caller:	the doorbell's caller runs the engines (remu_eng_doorbell())
 * @rc:		an RC QP
 * @budget:	WQE steps left in this run
 * @have_av:	@av holds the QP's path (RC/UC: resolved once per run)
 * @av:		the QP's path
 * @dst:	where the WQE's packets go: @av, or UD's resolved AV
 * @idx:	ring index of the WQE
 * @sw:		its requester state
 * @w:		its copy
 */
struct remu_req_ctx {
	struct remu_qp *qp;
	bool caller;
	bool rc;
	int budget;
	bool have_av;
	struct remu_av av;
	const struct remu_av *dst;
	u32 idx;
	struct remu_swqe *sw;
	struct remu_send_wqe *w;
};

/* REMU_REQ_GET_WQE: the WQE at eng.head, if one may be sent now */
static enum remu_req_state remu_req_get_wqe(struct remu_req_ctx *c)
{
	struct remu_qp *qp = c->qp;
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	unsigned long flags;
	u32 used;

	if (c->budget-- <= 0 || e->rnr_wait ||
	    READ_ONCE(qp->state) != IB_QPS_RTS)
		return REMU_REQ_WAIT;
	spin_lock_irqsave(&qp->sq.cons_lock, flags);
	used = remu_queue_used_by_consumer(q);
	if ((s32)(e->head - q->cons) < 0)
		e->head = q->cons;
	c->idx = e->head;
	spin_unlock_irqrestore(&qp->sq.cons_lock, flags);
	if (c->idx - q->cons >= used)
		return REMU_REQ_WAIT;
	/*
	 * UD: posted, its AV not resolved yet; the doorbell requeues.  The
	 * AVs are seen with the index: pairs with remu_req_post_av()'s
	 * smp_store_release()
	 */
	if (e->uav && (s32)(c->idx - smp_load_acquire(&e->av_next)) >= 0)
		return REMU_REQ_WAIT;
	/* after the producer index: an MR the WQE names is seen */
	if (c->caller && !remu_eng_inline_ok(qp))
		return REMU_REQ_HANDOFF;
	c->sw = &e->st[c->idx & q->mask];
	c->w = remu_req_copy(qp, c->idx);
	return c->sw->valid ? REMU_REQ_CHECK_DONE : REMU_REQ_START_WQE;
}

/*
 * REMU_REQ_START_WQE: copy and validate the WQE, give it its first PSN,
 * count a READ/atomic (RC: at most max_rd_atomic outstanding)
 */
static enum remu_req_state remu_req_start_wqe(struct remu_req_ctx *c)
{
	struct remu_qp *qp = c->qp;
	struct remu_qp_eng *e = &qp->eng;
	struct remu_swqe *sw = c->sw;
	int err;

	err = remu_req_fetch(qp, c->idx);
	if (err) {
		remu_comp_fail_wqe(qp, c->idx, err);
		return REMU_REQ_ERROR;
	}
	if (remu_is_rd_atomic(c->w->opcode) && c->rc &&
	    e->rd_out >= max_t(u32, 1, qp->attr.max_rd_atomic)) {
		sw->valid = false;
		return REMU_REQ_WAIT;
	}
	sw->first_psn = e->psn;
	if (remu_is_rd_atomic(c->w->opcode)) {
		e->rd_out++;
		sw->rd = true;
	}
	if (c->w->opcode == IB_UVERBS_WR_RDMA_READ)
		remu_req_map_get(e, sw);
	return REMU_REQ_CHECK_DONE;
}

/* REMU_REQ_CHECK_DONE: a finished READ/atomic gone back over is skipped */
static enum remu_req_state remu_req_check_done(struct remu_req_ctx *c)
{
	struct remu_qp_eng *e = &c->qp->eng;
	struct remu_swqe *sw = c->sw;

	if (c->rc && sw->rd && sw->rcvd >= sw->npkts) {
		if (remu_psn_before(e->psn, sw->first_psn + sw->npkts))
			e->psn = (sw->first_psn + sw->npkts) & REMU_PSN_MASK;
		e->head++;
		return REMU_REQ_GET_WQE;
	}
	return remu_is_local(c->w->opcode) ? REMU_REQ_LOCAL_OP :
					     REMU_REQ_CHECK_WINDOW;
}

/* REMU_REQ_LOCAL_OP: executed when every WQE before it has completed */
static enum remu_req_state remu_req_local_op(struct remu_req_ctx *c)
{
	struct remu_qp *qp = c->qp;
	int err;

	if (c->idx != qp->sq.ring.cons)
		return REMU_REQ_WAIT;
	err = remu_req_local(qp, c->idx, c->w);
	qp->eng.head++;
	if (err) {
		remu_comp_fail_wqe(qp, c->idx, IB_WC_MW_BIND_ERR);
		return REMU_REQ_ERROR;
	}
	remu_comp_wqe(qp, c->idx, IB_WC_SUCCESS);
	return REMU_REQ_GET_WQE;
}

/*
 * REMU_REQ_CHECK_WINDOW (RC): a fenced WQE waits for the READs/atomics
 * before it; no packet beyond REMU_REQ_WINDOW unacknowledged PSNs
 */
static enum remu_req_state remu_req_check_window(struct remu_req_ctx *c)
{
	struct remu_qp_eng *e = &c->qp->eng;

	if (!c->rc)
		return REMU_REQ_GET_AV;
	if ((c->w->flags & REMU_WQE_FENCE) && e->rd_out &&
	    c->idx != c->qp->sq.ring.cons)
		return REMU_REQ_WAIT;
	if (remu_psn_diff(c->sw->first_psn + c->sw->sent, e->una) >=
	    REMU_REQ_WINDOW)
		return REMU_REQ_WAIT;
	return REMU_REQ_GET_AV;
}

/*
 * REMU_REQ_GET_AV: UD, the AV resolved when the WQE was posted; RC/UC,
 * the QP's path, resolved once per run
 */
static enum remu_req_state remu_req_get_av(struct remu_req_ctx *c)
{
	struct remu_qp_eng *e = &c->qp->eng;
	u32 slot = c->idx & c->qp->sq.ring.mask;
	int err = 0;

	if (e->uav) {
		err = e->uav[slot].err;
		c->dst = &e->uav[slot].av;
	} else if (!c->have_av) {
		err = remu_req_av(c->qp, &c->av);
		c->have_av = !err;
	}
	if (err) {
		remu_comp_fail_wqe(c->qp, c->idx, IB_WC_LOC_QP_OP_ERR);
		return REMU_REQ_ERROR;
	}
	return REMU_REQ_PACE;
}

/*
 * REMU_REQ_PACE: the QP's rate limit lets the next packet go now, or the
 * requester holds it (remu_pace.c) and the pacer's timer queues the work
 * when it may go.  RC: when nothing is unacknowledged (the packet before
 * the hold asked for an ACK, remu_req_pkt_plan()), the retransmit timer
 * stops for the hold, which loses nothing: a hold longer than the QP's
 * timeout must not count as a retry; remu_req_send() arms it again with
 * the next packet.  Not in an RNR wait (remu_req_get_wqe() stops first),
 * when the same timer is the RNR timer.
 */
static enum remu_req_state remu_req_pace(struct remu_req_ctx *c)
{
	struct remu_qp_eng *e = &c->qp->eng;
	u64 when = remu_pace_wait(c->qp);

	if (!when)
		return REMU_REQ_SEND_PKT;
	remu_pace_hold(c->qp, when);
	if (c->rc && e->una == e->sent_end)
		del_timer(&e->timer);
	return REMU_REQ_WAIT;
}

/*
 * REMU_REQ_SEND_PKT: the WQE's next packet; after its last the requester
 * moves on, and a UC/UD WQE completes
 */
static enum remu_req_state remu_req_send(struct remu_req_ctx *c)
{
	struct remu_qp *qp = c->qp;
	struct remu_qp_eng *e = &qp->eng;
	struct remu_swqe *sw = c->sw;
	int err;

	err = remu_req_send_pkt(qp, c->idx, c->dst);
	if (err) {
		remu_comp_fail_wqe(qp, c->idx, remu_local_status(err));
		return REMU_REQ_ERROR;
	}
	sw->sent = remu_is_rd_atomic(c->w->opcode) ? sw->npkts : sw->sent + 1;
	if (remu_psn_before(e->psn, sw->first_psn + sw->sent))
		e->psn = (sw->first_psn + sw->sent) & REMU_PSN_MASK;
	/*
	 * Something is unacknowledged from the first packet on: the window
	 * can stop a long WQE before its last packet, and if what went out
	 * (or its ACKs) is lost, only the timer recovers.  A running timer
	 * is left as it is until the WQE's last packet, which restarts it.
	 */
	if (c->rc && (sw->sent == sw->npkts || !timer_pending(&e->timer)))
		remu_comp_arm(qp);
	if (sw->sent < sw->npkts)
		return REMU_REQ_GET_WQE;
	e->head++;
	if (!c->rc)
		remu_comp_wqe(qp, c->idx, IB_WC_SUCCESS);
	return REMU_REQ_GET_WQE;
}

/**
 * remu_req_run - the requester: send what the SQ holds, from eng.head on
 * @qp: the QP, in RTS
 * @caller: the doorbell's caller runs the engines (remu_eng_doorbell())
 *
 * Steps through the states of enum remu_req_state until one ends the run:
 * nothing more may go now (the ring, the window, a fence, a local WQE
 * waiting for those before it, the rate limit, the budget: then the work
 * item does the rest), a WQE completed in error, or @caller must hand
 * over.
 *
 * Context: the engines' owner (remu_eng.c).
 * Return: false if @caller must hand the rest to the work item
 * (remu_eng_inline_ok()), else true.
 */
bool remu_req_run(struct remu_qp *qp, bool caller)
{
	struct remu_req_ctx c = {
		.qp = qp,
		.caller = caller,
		.rc = qp->ib_qp.qp_type == IB_QPT_RC,
		.budget = REMU_REQ_BUDGET,
	};
	enum remu_req_state s = REMU_REQ_GET_WQE;

	c.dst = &c.av;
	for (;;) {
		switch (s) {
		case REMU_REQ_GET_WQE:
			s = remu_req_get_wqe(&c);
			break;
		case REMU_REQ_START_WQE:
			s = remu_req_start_wqe(&c);
			break;
		case REMU_REQ_CHECK_DONE:
			s = remu_req_check_done(&c);
			break;
		case REMU_REQ_LOCAL_OP:
			s = remu_req_local_op(&c);
			break;
		case REMU_REQ_CHECK_WINDOW:
			s = remu_req_check_window(&c);
			break;
		case REMU_REQ_GET_AV:
			s = remu_req_get_av(&c);
			break;
		case REMU_REQ_PACE:
			s = remu_req_pace(&c);
			break;
		case REMU_REQ_SEND_PKT:
			s = remu_req_send(&c);
			break;
		case REMU_REQ_WAIT:
			if (c.budget <= 0)
				queue_work(remu_wq, &qp->send_work);
			return true;
		case REMU_REQ_ERROR:
			return true;
		case REMU_REQ_HANDOFF:
			return false;
		}
	}
}
