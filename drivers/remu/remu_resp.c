// SPDX-License-Identifier: GPL-2.0
/*
 * remu_resp.c - the responder: request packets in, data placed, receive
 * completions, and the responses (ACK, NAK, RNR NAK, READ response,
 * atomic ACK) out.
 *
 * Owns: the receive side of a QP: the expected PSN and MSN (RC), the
 * receive WQE being filled (copied out of the RQ or SRQ ring once, then
 * only the copy is used), the RDMA WRITE in progress, the READ in
 * progress (eng.rd, and eng.rd_rest that a duplicate's repeat put off:
 * a READ sends REMU_RESP_READ_BURST responses per round, and requests
 * wait on eng.rxq until its last one is out; it holds no reference
 * between rounds), and the responder resources: the last
 * max_dest_rd_atomic READs, atomics, FLUSHes and ATOMIC_WRITEs executed
 * (struct remu_rd_res), the only requests a duplicate may repeat.
 *
 * remu_resp_pkt() takes a packet through named checks, then the execute
 * step of its class, then one tail; each step returns a verdict (enum
 * remu_resp_verdict: go on, done, drop, or the IBA error class) and
 * remu_resp_act() carries out the one that ended the packet's way.
 * docs/architecture.md has the table of checks and verdicts, the
 * duplicate, ACK coalescing and UC rules.
 *
 * Locking: runs only in the engines' owner (remu_eng_run()).  RQ slots
 * are consumed under qp->rq.cons_lock when the completion is written (so
 * a flush and the responder never both complete one); SRQ slots are
 * consumed when taken.  MR copies happen with no lock held.
 */
#include <linux/ip.h>
#include <linux/ipv6.h>

#include "remu_qp.h"
#include "remu_mr.h"
#include "remu_net.h"
#include "remu_trace.h"

#define REMU_GRH_LEN	40

/* the requests that take a responder resource, and every request */
#define REMU_RESP_RD_OPS	(REMU_OP_READ | REMU_OP_ATOMIC | \
				 REMU_OP_FLUSH | REMU_OP_ATOMIC_WRITE)
#define REMU_RESP_OPS		(REMU_OP_SEND | REMU_OP_WRITE | REMU_RESP_RD_OPS)

/*
 * What a step of remu_resp_pkt() decided about a request packet, in the
 * IBA's responder error classes (B: recoverable, the requester retries;
 * C: a fatal request error, NAKed, QP to ERR; A: the responder's own
 * fatal error; D: UC/UD, dropped silently).  REMU_RESP_NEXT (0) lets the
 * next step run; any other verdict ends the packet's way.
 */
enum remu_resp_verdict {
	REMU_RESP_NEXT,		/* passed: on to the next step */
	REMU_RESP_DONE,		/* executed and answered */
	REMU_RESP_DROP,		/* dropped; counted, or completed, already */
	REMU_RESP_UC_LOST,	/* UC, D: lost to its message; go on after it */
	REMU_RESP_DUPLICATE,	/* RC: before the expected PSN: answer again */
	REMU_RESP_PSN_SEQ,	/* RC, B: beyond the expected PSN: one NAK */
	REMU_RESP_RNR,		/* no receive WQE: RNR NAK (RC, B); else D */
	REMU_RESP_INV_REQ,	/* C: invalid request */
	REMU_RESP_ACC_ERR,	/* C: remote access error */
	REMU_RESP_OP_ERR,	/* A: remote operational error */
};

/**
 * struct remu_resp_req - a request packet on its way through the steps
 * @skb:	the packet (skb->data at the BTH)
 * @info:	its opcode's entry
 * @psn:	its PSN
 * @npkts:	PSNs it takes: a READ's response count, else 1
 * @nak_psn:	the PSN a NAK names: @psn, or that of the first READ
 *		response not sent (remu_resp_read_fail())
 * @cqe_reports: the receive completion reported the error (a SEND's): no
 *		affiliated asynchronous event
 * @res:	a READ, atomic, FLUSH or ATOMIC_WRITE: its responder resource
 *		(@res.orig: an atomic's original value)
 */
struct remu_resp_req {
	struct sk_buff *skb;
	const struct remu_opcode_info *info;
	u32 psn;
	u32 npkts;
	u32 nak_psn;
	bool cqe_reports;
	struct remu_rd_res res;
};

/*
 * Send a response with no payload and PSN @psn, AETH @syn: @opcode
 * IB_OPCODE_RC_ACKNOWLEDGE (ACK/NAK), IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE
 * (with @orig) or IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY (an empty one:
 * the answer to FLUSH and ATOMIC_WRITE)
 */
static void remu_resp_ack(struct remu_qp *qp, u32 psn, u8 syn, u8 opcode,
			  u64 orig)
{
	struct remu_pkt pkt = {};
	struct sk_buff *skb;
	struct remu_av av;

	if (remu_req_av(qp, &av))
		return;
	pkt.opcode = opcode;
	skb = remu_net_alloc_skb(qp->rdev, &av, 0, &pkt);
	if (!skb)
		return;
	remu_bth_set_qpn(pkt.bth, qp->attr.dest_qp_num);
	remu_bth_set_psn(pkt.bth, psn, false);
	remu_aeth_set(remu_pkt_hdr(&pkt, REMU_HDR_AETH), syn, qp->eng.msn);
	if (opcode == IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE)
		remu_atmack_set(remu_pkt_hdr(&pkt, REMU_HDR_ATMACK), orig);
	remu_net_xmit(qp->rdev, &av, skb);
}

#define REMU_ACK		IB_OPCODE_RC_ACKNOWLEDGE
#define REMU_ATOMIC_ACK		IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE
#define REMU_EMPTY_READ_RESP	IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY
#define REMU_ACK_OK		(REMU_AETH_ACK | REMU_AETH_CREDIT_INVALID)

/*
 * The fatal verdicts: the NAK syndrome, the counter, and the affiliated
 * asynchronous error a real NIC raises when no receive completion
 * reports the error.
 */
static const struct {
	u8 syn;
	enum remu_counter cnt;
	enum ib_event_type event;
} remu_resp_fatal_class[] = {
	[REMU_RESP_INV_REQ] = { REMU_AETH_NAK_INVALID_REQ,
				REMU_CNT_RESP_INVALID_REQ,
				IB_EVENT_QP_REQ_ERR },
	[REMU_RESP_ACC_ERR] = { REMU_AETH_NAK_REM_ACC_ERR,
				REMU_CNT_RESP_REMOTE_ACCESS_ERR,
				IB_EVENT_QP_ACCESS_ERR },
	[REMU_RESP_OP_ERR] = { REMU_AETH_NAK_REM_OP_ERR,
			       REMU_CNT_RESP_REMOTE_OP_ERR,
			       IB_EVENT_QP_FATAL },
};

/*
 * A fatal request error @v: move the QP to ERR, then NAK the request at
 * @rq->nak_psn (RC), so that by the time the requester sees the NAK this
 * QP is in ERR already (a consumer that resets both QPs on the error
 * finds them settled); then, unless a receive completion reported it,
 * raise the asynchronous error (QP_ACCESS_ERR, QP_REQ_ERR, QP_FATAL).
 */
static void remu_resp_fatal(struct remu_qp *qp, struct remu_resp_req *rq,
			    enum remu_resp_verdict v)
{
	remu_count(qp->rdev, remu_resp_fatal_class[v].cnt);
	remu_qp_error(qp);
	if (qp->ib_qp.qp_type == IB_QPT_RC)
		remu_resp_ack(qp, rq->nak_psn, remu_resp_fatal_class[v].syn,
			      REMU_ACK, 0);
	if (!rq->cqe_reports)
		remu_qp_event(qp, remu_resp_fatal_class[v].event);
}

/*
 * No receive WQE for a SEND or WRITE_WITH_IMM: RC asks for a retry (RNR
 * NAK); UC and UD drop the message, counted as out_of_buffer.
 */
static void remu_resp_no_recv(struct remu_qp *qp, u32 psn)
{
	if (qp->ib_qp.qp_type != IB_QPT_RC) {
		remu_count(qp->rdev, REMU_CNT_OUT_OF_BUFFER);
		return;
	}
	remu_count(qp->rdev, REMU_CNT_RCV_RNR);
	trace_remu_rnr(qp, psn, REMU_RNR_NAK_SENT,
		       remu_rnr_usecs(qp->attr.min_rnr_timer), 0);
	remu_resp_ack(qp, psn, REMU_AETH_RNR_NAK |
		      (qp->attr.min_rnr_timer & 0x1f), REMU_ACK, 0);
}

/* take a receive WQE into qp->eng.rwqe; false if none */
static bool remu_resp_get_rwqe(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_wq *wq = qp->srq ? &qp->srq->rq : &qp->rq;
	struct remu_recv_wqe *w;
	unsigned long flags;
	u32 n;

	if (e->have_rwqe)
		return true;
	spin_lock_irqsave(&wq->cons_lock, flags);
	w = remu_queue_consumer_slot(&wq->ring);
	if (w) {
		memcpy(&e->rwqe, w, sizeof(*w));
		n = min_t(u32, e->rwqe.num_sge, wq->max_sge);
		n = min_t(u32, n, REMU_MAX_SGE);
		memcpy(e->rsge, w + 1, n * sizeof(struct remu_sge));
		e->rwqe.num_sge = n;
		e->rwqe_idx = wq->ring.cons;
		if (qp->srq)
			remu_queue_consume(&wq->ring);
	}
	spin_unlock_irqrestore(&wq->cons_lock, flags);
	if (!w)
		return false;
	e->have_rwqe = true;
	e->roff = 0;
	if (qp->srq)
		remu_srq_limit_event(qp->srq);
	return true;
}

/* the CQE for remu_resp_complete(): plain, or with inline data after it */
static void remu_resp_post(struct remu_qp *qp, struct remu_cqe *cqe,
			   struct remu_cqe_ext *ext, bool solicited)
{
	if (ext) {
		ext->cqe = *cqe;
		if (!remu_cq_post_ext(qp->rcq, ext, solicited))
			remu_count(qp->rdev, REMU_CNT_INLINE_RECV);
	} else {
		remu_cq_post(qp->rcq, cqe, solicited);
	}
}

/*
 * complete the receive WQE in qp->eng.rwqe; @ext: its data went inline
 * (remu_resp_inline()), post the CQE with it
 */
static void remu_resp_complete_ext(struct remu_qp *qp, struct sk_buff *skb,
				   int status, u32 opcode, u32 byte_len,
				   struct remu_cqe_ext *ext)
{
	struct remu_qp_eng *e = &qp->eng;
	const struct remu_opcode_info *info = &remu_opcode[remu_cb(skb)->opcode];
	struct remu_bth *bth = (struct remu_bth *)skb->data;
	struct remu_cqe cqe = {};
	unsigned long flags;
	void *h;

	cqe.wr_id = e->rwqe.wr_id;
	cqe.status = status;
	cqe.opcode = opcode;
	cqe.byte_len = byte_len;
	cqe.qp_num = qp->ib_qp.qp_num;
	if (status == IB_WC_SUCCESS) {
		h = remu_pkt_hdr_of(skb, info, REMU_HDR_IMMDT);
		if (h) {
			cqe.ex_data = (__force u32)((struct remu_immdt *)h)->imm;
			cqe.flags |= REMU_CQE_WITH_IMM;
		}
		h = remu_pkt_hdr_of(skb, info, REMU_HDR_IETH);
		if (h) {
			cqe.ex_data = remu_ieth_rkey(h);
			cqe.flags |= REMU_CQE_WITH_INV;
		}
		h = remu_pkt_hdr_of(skb, info, REMU_HDR_DETH);
		if (h) {
			cqe.src_qp = remu_deth_sqp(h);
			cqe.flags |= REMU_CQE_GRH;
			cqe.network_hdr_type = ip_hdr(skb)->version == 4 ?
					       REMU_NET_IPV4 : REMU_NET_IPV6;
		}
	}
	if (status == IB_WC_SUCCESS && ext) {
		cqe.flags |= REMU_CQE_INLINE;
		cqe.inline_sges = ext->cqe.inline_sges;
	} else {
		ext = NULL;
	}
	if (qp->srq) {
		remu_resp_post(qp, &cqe, ext, remu_bth_se(bth));
	} else {
		spin_lock_irqsave(&qp->rq.cons_lock, flags);
		if (qp->rq.ring.cons == e->rwqe_idx) {
			remu_queue_consume(&qp->rq.ring);
			remu_resp_post(qp, &cqe, ext, remu_bth_se(bth));
		}
		spin_unlock_irqrestore(&qp->rq.cons_lock, flags);
	}
	e->have_rwqe = false;
	e->roff = 0;
	if (status == IB_WC_SUCCESS)
		remu_count(qp->rdev, REMU_CNT_RDMA_RECV);
}

static void remu_resp_complete(struct remu_qp *qp, struct sk_buff *skb,
			       int status, u32 opcode, u32 byte_len)
{
	remu_resp_complete_ext(qp, skb, status, opcode, byte_len, NULL);
}

/*
 * Inline receive (scatter to CQE, see uapi remu-abi.h): a single-packet
 * message of 1 to REMU_CQE_INLINE_MAX bytes (the UD GRH area included)
 * for a CQ created with REMU_CREATE_CQ_INLINE_RECV goes into @ext with
 * the process addresses to copy it to, and the provider copies it at
 * poll time.  Every SGE the data reaches is first looked up and checked
 * exactly as remu_sge_copy() would (PD, bounds, LOCAL_WRITE) and must be
 * host memory (remu_mr_user_va()).  Returns false when any of that does
 * not hold: the caller then takes the normal scatter path, which also
 * reports the errors.  Nothing here touches MR memory.
 */
static bool remu_resp_inline(struct remu_qp *qp, struct sk_buff *skb,
			     const u8 *grh, u32 glen,
			     struct remu_cqe_ext *ext)
{
	struct remu_skb_cb *cb = remu_cb(skb);
	struct remu_pd *pd = to_remu_pd(qp->ib_qp.pd);
	struct remu_qp_eng *e = &qp->eng;
	u32 total = glen + cb->paylen, done = 0, n = 0, i;

	if (!qp->rcq->inline_recv || !total || total > REMU_CQE_INLINE_MAX)
		return false;
	/*
	 * never the sender's pages by reference (256 bytes or more, so not
	 * here): those are read only through remu_mr_copy_skb() (remu_zc.c)
	 */
	if (skb_zcopy(skb))
		return false;
	for (i = 0; i < e->rwqe.num_sge && done < total; i++) {
		const struct remu_sge *sge = &e->rsge[i];
		u32 here = min(sge->length, total - done);
		struct remu_mr *mr;
		u64 va;
		int err;

		if (!here)
			continue;
		if (n == REMU_CQE_INLINE_SGES)
			return false;
		mr = remu_mr_lookup(qp->rdev, sge->lkey, REMU_LKEY);
		if (!mr)
			return false;
		err = remu_mr_check(mr, pd, sge->addr, here,
				    IB_ACCESS_LOCAL_WRITE);
		if (!err)
			err = remu_mr_user_va(mr, sge->addr, &va);
		remu_mr_put(mr);
		if (err)
			return false;
		ext->sge[n].addr = va;
		ext->sge[n].length = here;
		n++;
		done += here;
	}
	if (done < total)
		return false;
	memcpy(ext->data, grh, glen);
	if (skb_copy_bits(skb, cb->hdr_len, ext->data + glen, cb->paylen))
		return false;
	ext->cqe.inline_sges = n;
	return true;
}

/* the receive WQE's SGE list: what a SEND scatters into */
static struct remu_sgl remu_resp_rsgl(struct remu_qp *qp)
{
	return (struct remu_sgl){
		.rdev = qp->rdev,
		.pd = to_remu_pd(qp->ib_qp.pd),
		.sges = qp->eng.rsge,
		.num = qp->eng.rwqe.num_sge,
		.access = IB_ACCESS_LOCAL_WRITE,
	};
}

static int remu_resp_scatter(struct remu_qp *qp, const void *buf, u32 len)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_sgl sgl = remu_resp_rsgl(qp);
	int err;

	if (!len)
		return 0;
	err = remu_sge_copy(&sgl, e->roff, (void *)buf, len, REMU_TO_MR);
	if (!err)
		e->roff += len;
	return err;
}

/*
 * UD: fill the 40-byte GRH area that goes before the data (an IPv4
 * header in its last 20 bytes); return its length, 0 for RC and UC
 */
static u32 remu_resp_grh(struct remu_qp *qp, struct sk_buff *skb, u8 *grh)
{
	if (remu_qp_type(qp) != IB_QPT_UD)
		return 0;
	memset(grh, 0, REMU_GRH_LEN);
	if (ip_hdr(skb)->version == 4)
		memcpy(grh + 20, ip_hdr(skb), sizeof(struct iphdr));
	else
		memcpy(grh, ipv6_hdr(skb), sizeof(struct ipv6hdr));
	return REMU_GRH_LEN;
}

/*
 * Place a SEND packet's payload (after a UD GRH area) into the receive
 * WQE: into the CQE (*@extp set) when remu_resp_inline() takes it, else
 * scattered.  Return 0 or the copy's error.
 */
static int remu_resp_place(struct remu_qp *qp, struct sk_buff *skb,
			   struct remu_cqe_ext **extp)
{
	struct remu_skb_cb *cb = remu_cb(skb);
	struct remu_qp_eng *e = &qp->eng;
	u8 grh[REMU_GRH_LEN];
	u32 glen = remu_resp_grh(qp, skb, grh);
	int err;

	if ((remu_opcode[cb->opcode].flags & REMU_OP_ONLY) &&
	    qp->rcq->inline_recv) {
		memset(&e->rext, 0, sizeof(e->rext));
		if (remu_resp_inline(qp, skb, grh, glen, &e->rext)) {
			e->roff = glen + cb->paylen;
			*extp = &e->rext;
			return 0;
		}
	}
	err = remu_resp_scatter(qp, grh, glen);
	if (err)
		return err;
	if (cb->paylen) {
		struct remu_sgl sgl = remu_resp_rsgl(qp);

		err = remu_sge_copy_skb(&sgl, e->roff, skb, cb->hdr_len,
					cb->paylen, REMU_TO_MR);
	}
	if (err)
		return err;
	e->roff += cb->paylen;
	return 0;
}

/*
 * The payload of a SEND (or the receive side of WRITE_WITH_IMM), and at
 * the message's end its receive completion (and the invalidation a SEND
 * WITH_INVALIDATE asks for).  Return 0, or an error the receive
 * completion reported (-EAGAIN: no receive WQE, nothing reported).
 */
static int remu_resp_send(struct remu_qp *qp, struct sk_buff *skb)
{
	const struct remu_opcode_info *info = &remu_opcode[remu_cb(skb)->opcode];
	struct remu_qp_eng *e = &qp->eng;
	struct remu_cqe_ext *ext = NULL;
	void *ieth;
	int err;

	if (!remu_resp_get_rwqe(qp))
		return -EAGAIN;
	err = remu_resp_place(qp, skb, &ext);
	/* by-reference payload taken back: the packet is lost, not failed */
	if (err == -ESTALE)
		return err;
	if (err) {
		remu_resp_complete(qp, skb, err == -EMSGSIZE ?
				   IB_WC_LOC_LEN_ERR : IB_WC_LOC_PROT_ERR,
				   IB_WC_RECV, e->roff);
		return err;
	}
	if (!(info->flags & (REMU_OP_LAST | REMU_OP_ONLY)))
		return 0;
	ieth = remu_pkt_hdr_of(skb, info, REMU_HDR_IETH);
	if (ieth && remu_key_invalidate(qp->rdev, to_remu_pd(qp->ib_qp.pd),
					qp->ib_qp.qp_num,
					remu_ieth_rkey(ieth))) {
		remu_resp_complete(qp, skb, IB_WC_REM_INV_REQ_ERR,
				   IB_WC_RECV, e->roff);
		return -EINVAL;
	}
	remu_resp_complete_ext(qp, skb, IB_WC_SUCCESS, IB_WC_RECV, e->roff,
			       ext);
	return 0;
}

static bool remu_qp_allows(struct remu_qp *qp, unsigned int access)
{
	return qp->attr.qp_access_flags & access;
}

/*
 * Find what @rkey grants (an MR or a memory window) and check an access
 * of @len bytes at @va needing @access.  Return: 0 with @rk referenced,
 * or -EACCES (bad key, other PD or QP, bounds, rights).
 */
static int remu_resp_rkey(struct remu_qp *qp, u32 rkey, u64 va, u64 len,
			  unsigned int access, struct remu_rkey *rk)
{
	if (remu_rkey_get(qp->rdev, rkey, rk)) {
		/* num_mrs_not_found while the device has ODP MRs */
		remu_odp_count_key_miss(qp->rdev);
		return -EACCES;
	}
	if (remu_rkey_check(rk, to_remu_pd(qp->ib_qp.pd), qp->ib_qp.qp_num,
			    va, len, access)) {
		remu_rkey_put(rk);
		return -EACCES;
	}
	return 0;
}

/*
 * place a WRITE packet; -EACCES for an access error, -ESTALE when its
 * by-reference payload was taken back (remu_mr_copy_skb())
 */
static int remu_resp_write(struct remu_qp *qp, struct sk_buff *skb)
{
	struct remu_skb_cb *cb = remu_cb(skb);
	const struct remu_opcode_info *info = &remu_opcode[cb->opcode];
	struct remu_qp_eng *e = &qp->eng;
	struct remu_reth *reth = remu_pkt_hdr_of(skb, info, REMU_HDR_RETH);
	struct remu_rkey rk;
	int err;

	if (reth) {
		e->wr_va = remu_reth_va(reth);
		e->wr_rkey = remu_reth_rkey(reth);
		e->wr_len = remu_reth_len(reth);
		e->wr_off = 0;
		if (!remu_qp_allows(qp, IB_ACCESS_REMOTE_WRITE))
			return -EACCES;
		/*
		 * The whole message must fit the MR before its first byte is
		 * placed: a WRITE that runs past the end in a later packet is
		 * refused here, not after its first packets landed.
		 */
		if (e->wr_len) {
			if (remu_resp_rkey(qp, e->wr_rkey, e->wr_va, e->wr_len,
					   IB_ACCESS_REMOTE_WRITE, &rk))
				return -EACCES;
			e->wr_gen = rk.gen;
			remu_rkey_put(&rk);
		}
	}
	if (e->wr_off + cb->paylen > e->wr_len)
		return -EINVAL;
	if ((info->flags & (REMU_OP_LAST | REMU_OP_ONLY)) &&
	    e->wr_off + cb->paylen != e->wr_len)
		return -EINVAL;
	if (!cb->paylen)
		return 0;
	/*
	 * Looked up again for every packet, and it must still name what the
	 * first packet found: once a window is invalidated or rebound, or the
	 * MR re-registered (even under the same key: remu_rereg.c), the rest
	 * of the message fails with a remote access error.
	 */
	if (remu_resp_rkey(qp, e->wr_rkey, e->wr_va + e->wr_off, cb->paylen,
			   IB_ACCESS_REMOTE_WRITE, &rk))
		return -EACCES;
	err = rk.gen == e->wr_gen ?
	      remu_mr_copy_skb(rk.mr, e->wr_va + e->wr_off, skb, cb->hdr_len,
			       cb->paylen, REMU_TO_MR) : -EACCES;
	remu_rkey_put(&rk);
	if (err == -ESTALE)
		return err;	/* the sender's memory, taken back: lost */
	if (err)
		return -EACCES;
	e->wr_off += cb->paylen;
	return 0;
}

/*
 * Build READ response @i of @n (PSN @psn, MSN @msn, @plen bytes from @va
 * of @mr) and send it; with @by_ref its payload is attached as page frags
 * of the MR.  Return 0; -EOPNOTSUPP or -E2BIG when the payload cannot go by
 * reference (build it again with a copy); -ENOMEM; or the MR layer's
 * error.
 */
static int remu_resp_read_pkt(struct remu_qp *qp, const struct remu_av *av,
			      struct remu_mr *mr, u64 va, u32 plen, u32 psn,
			      u32 msn, u32 i, u32 n, bool by_ref)
{
	struct remu_pkt pkt = {};
	struct sk_buff *rskb;
	void *aeth;
	int err = 0;

	pkt.opcode = n == 1 ? IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY :
		     i == 0 ? IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST :
		     i == n - 1 ? IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST :
		     IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE;
	rskb = by_ref ? remu_net_alloc_skb_ref(qp->rdev, av, plen, &pkt) :
			remu_net_alloc_skb(qp->rdev, av, plen, &pkt);
	if (!rskb)
		return -ENOMEM;
	remu_bth_set_qpn(pkt.bth, qp->attr.dest_qp_num);
	remu_bth_set_psn(pkt.bth, psn, false);
	aeth = remu_pkt_hdr(&pkt, REMU_HDR_AETH);
	if (aeth)
		remu_aeth_set(aeth, REMU_AETH_ACK | REMU_AETH_CREDIT_INVALID,
			      msn);
	if (by_ref) {
		err = remu_mr_frag_skb(mr, va, rskb, plen);
		if (!err)
			err = remu_net_end_ref(rskb, &pkt);
	} else if (plen) {
		err = remu_mr_copy_skb(mr, va, rskb, pkt.hdr_len, plen,
				       REMU_FROM_MR);
	}
	if (err) {
		kfree_skb(rskb);
		return err;
	}
	remu_net_xmit(qp->rdev, av, rskb);
	return 0;
}

/* PSN one past the last response of @c */
static u32 remu_rd_end(const struct remu_rd_cur *c)
{
	return (c->psn + c->n - c->i) & REMU_PSN_MASK;
}

/*
 * A duplicate asks again for the responses [@psn, @end).  If that reaches
 * into what @c has still to send, @c skips up to @end: the requester asks
 * again from its first missing response, so it has those before @psn,
 * and the duplicate's repeat sends the others.
 */
static void remu_rd_skip(struct remu_rd_cur *c, u32 psn, u32 end)
{
	u32 m;

	if (!c->active || !remu_psn_before(c->psn, end) ||
	    !remu_psn_before(psn, remu_rd_end(c)))
		return;
	m = remu_psn_diff(end, c->psn);
	if (m >= c->n - c->i) {
		memset(c, 0, sizeof(*c));
		return;
	}
	c->va += (u64)m * c->mtu;
	c->left -= m * c->mtu;
	c->psn = (c->psn + m) & REMU_PSN_MASK;
	c->i += m;
}

/*
 * Accept a READ of @len bytes at @va (@rkey) whose first response has
 * PSN @psn: check the QP's right and the key over the whole range, then
 * make it the READ in progress (eng.rd), whose responses the owner sends
 * from the next step on, REMU_RESP_READ_BURST per round
 * (remu_resp_read_more()), their payload by reference when the MR allows
 * it (remu_mr_frag_skb()), else copied.
 *
 * @replay: a duplicate's repeat, which NAKs nothing.  It may come while
 * a READ is in progress (requests wait, duplicate READs do not:
 * remu_resp_read_waits()) and goes first: the READ in progress waits in
 * eng.rd_rest and goes on after it, less what the repeat sends again
 * (remu_rd_skip()); a repeat that covers all of it (a requester asking
 * for the rest from its first missing response) replaces it.  With a
 * READ waiting already, a repeat in progress is replaced.
 *
 * Return: REMU_RESP_NEXT or the error's verdict (NAKed at @psn).
 */
static enum remu_resp_verdict remu_resp_read(struct remu_qp *qp, u32 psn,
					     u64 va, u32 rkey, u32 len,
					     bool replay)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_rd_cur *c = &e->rd;
	struct remu_rkey rk = {};
	struct remu_av av;
	u32 n = max_t(u32, 1, DIV_ROUND_UP(len, e->mtu));

	if (!remu_qp_allows(qp, IB_ACCESS_REMOTE_READ))
		return REMU_RESP_ACC_ERR;
	if (len && remu_resp_rkey(qp, rkey, va, len, IB_ACCESS_REMOTE_READ,
				  &rk))
		return REMU_RESP_ACC_ERR;
	if (rk.mr)
		remu_rkey_put(&rk);
	if (remu_req_av(qp, &av))
		return REMU_RESP_OP_ERR;
	if (c->active) {
		if (!e->rd_rest.active)
			e->rd_rest = *c;
		remu_rd_skip(&e->rd_rest, psn, (psn + n) & REMU_PSN_MASK);
	}
	memset(c, 0, sizeof(*c));
	c->active = true;
	c->replay = replay;
	/*
	 * A kernel QP's MRs are kernel memory: never by reference.  Through
	 * a window: copied too.  Only deregistration revokes frags
	 * (remu_zc.c), not an invalidation of the window, so its responses
	 * must not outlive the READ's execution
	 */
	c->copy = !qp->is_user || rk.win;
	c->rkey = rkey;
	c->gen = rk.gen;
	c->va = va;
	c->left = len;
	c->psn = psn;
	c->mtu = e->mtu;
	c->n = n;
	/* the MSN of the READ's completion: the tail counts it next */
	c->msn = e->msn + 1;
	return REMU_RESP_NEXT;
}

/* the READs in progress end: the QP is reset or in error, or one failed */
void remu_resp_read_stop(struct remu_qp *qp)
{
	memset(&qp->eng.rd, 0, sizeof(qp->eng.rd));
	memset(&qp->eng.rd_rest, 0, sizeof(qp->eng.rd_rest));
}

/* the READ in progress is over: the one a duplicate's repeat put off goes on */
static void remu_resp_read_next(struct remu_qp *qp)
{
	qp->eng.rd = qp->eng.rd_rest;
	memset(&qp->eng.rd_rest, 0, sizeof(qp->eng.rd_rest));
}

/*
 * The READ in progress failed at its response eng.rd.psn.  A first
 * execution is a remote access error NAKed at that PSN, so the requester,
 * which has taken the responses before it, does not see the NAK as
 * stale; the NAK carries the MSN before the READ, which did not complete.
 * A duplicate's repeat NAKs nothing: the requester asks again.
 */
static void remu_resp_read_fail(struct remu_qp *qp)
{
	struct remu_rd_cur *c = &qp->eng.rd;
	struct remu_resp_req rq = { .nak_psn = c->psn };
	u32 msn = c->msn;

	if (c->replay) {
		remu_resp_read_next(qp);
		return;
	}
	remu_resp_read_stop(qp);
	qp->eng.msn = msn - 1;
	remu_resp_fatal(qp, &rq, REMU_RESP_ACC_ERR);
}

/**
 * remu_resp_read_more - send the next responses of the READ in progress
 * @qp: the QP (eng.rd.active)
 * @budget: the run's budget; each response takes one
 *
 * At most REMU_RESP_READ_BURST responses.  The key is looked up again
 * and must name what it named when the READ was accepted: a deregistered
 * or re-registered MR, an invalidated or rebound window fails the rest
 * as a remote access error, as memory that fails midway (an ODP page
 * that cannot be mapped).  No memory: the rest is lost, as on the wire,
 * and the requester asks again.  When it is over, the READ a duplicate's
 * repeat put off (eng.rd_rest) goes on.
 *
 * Context: the engines' owner (remu_eng_run()); may sleep.
 */
void remu_resp_read_more(struct remu_qp *qp, int *budget)
{
	struct remu_rd_cur *c = &qp->eng.rd;
	struct remu_rkey rk = {};
	struct remu_av av;
	u32 k = 0, plen;
	int err = 0;

	if (remu_req_av(qp, &av)) {
		/* no route any more: nothing can be sent, not even a NAK */
		remu_resp_read_stop(qp);
		return;
	}
	if (c->left) {
		if (remu_resp_rkey(qp, c->rkey, c->va, c->left,
				   IB_ACCESS_REMOTE_READ, &rk)) {
			remu_resp_read_fail(qp);
			return;
		}
		if (rk.gen != c->gen) {
			remu_rkey_put(&rk);
			remu_resp_read_fail(qp);
			return;
		}
	}
	while (c->i < c->n && k < REMU_RESP_READ_BURST && *budget > 0) {
		plen = min(c->left, c->mtu);
		err = -EOPNOTSUPP;
		if (!c->copy && plen >= REMU_FRAG_MIN_PAYLOAD) {
			err = remu_resp_read_pkt(qp, &av, rk.mr, c->va, plen,
						 c->psn, c->msn, c->i, c->n,
						 true);
			/* the MR's memory cannot go by reference: copy */
			c->copy = err == -EOPNOTSUPP || err == -E2BIG;
		}
		if (err == -EOPNOTSUPP || err == -E2BIG)
			err = remu_resp_read_pkt(qp, &av, rk.mr, c->va, plen,
						 c->psn, c->msn, c->i, c->n,
						 false);
		if (err)
			break;
		c->va += plen;
		c->left -= plen;
		c->psn = (c->psn + 1) & REMU_PSN_MASK;
		c->i++;
		k++;
		(*budget)--;
	}
	if (rk.mr)
		remu_rkey_put(&rk);
	if (err == -ENOMEM || (!err && c->i == c->n))
		remu_resp_read_next(qp);
	else if (err)
		/*
		 * The key was checked, so the translation failed (an ODP page
		 * that is not mapped): a remote access error.
		 */
		remu_resp_read_fail(qp);
	cond_resched();
}

/*
 * While a READ's responses are being sent, must @skb wait on eng.rxq?
 * Requests are executed in order, each after the responses of the READ
 * before it (IBA 9.7.5.1.3), so every request waits, except a duplicate
 * READ, which replaces the READ in progress (its requester lost
 * responses and asks again from one of them).  Responses, for the
 * completer, do not wait.
 */
bool remu_resp_read_waits(struct remu_qp *qp, struct sk_buff *skb)
{
	struct remu_skb_cb *cb = remu_cb(skb);
	u32 flags = remu_opcode[cb->opcode].flags;

	if (!qp->eng.rd.active || (flags & REMU_OP_RESP))
		return false;
	return !(flags & REMU_OP_READ) ||
	       !remu_psn_before(cb->psn, qp->eng.rpsn);
}

/* execute an atomic: REMU_RESP_NEXT and *@orig, or the error's verdict */
static enum remu_resp_verdict remu_resp_atomic(struct remu_qp *qp,
					       struct sk_buff *skb, u64 *orig)
{
	const struct remu_opcode_info *info = &remu_opcode[remu_cb(skb)->opcode];
	struct remu_atmeth *a = remu_pkt_hdr_of(skb, info, REMU_HDR_ATMETH);
	u64 va = remu_atmeth_va(a);
	struct remu_rkey rk;
	int err;

	if (!remu_qp_allows(qp, IB_ACCESS_REMOTE_ATOMIC))
		return REMU_RESP_ACC_ERR;
	if (va & 7)
		return REMU_RESP_INV_REQ;
	if (remu_resp_rkey(qp, remu_atmeth_rkey(a), va, 8,
			   IB_ACCESS_REMOTE_ATOMIC, &rk))
		return REMU_RESP_ACC_ERR;
	if (remu_cb(skb)->opcode == IB_OPCODE_RC_COMPARE_SWAP)
		err = remu_mr_atomic(rk.mr, va, REMU_ATOMIC_CMP_SWP,
				     remu_atmeth_compare(a),
				     remu_atmeth_swap_add(a), orig);
	else
		err = remu_mr_atomic(rk.mr, va, REMU_ATOMIC_FETCH_ADD,
				     remu_atmeth_swap_add(a), 0, orig);
	remu_rkey_put(&rk);
	if (err == -EINVAL)
		return REMU_RESP_INV_REQ;
	return err ? REMU_RESP_ACC_ERR : REMU_RESP_NEXT;
}

/*
 * Execute an ATOMIC_WRITE (IBA 1.5): its 8 payload bytes stored at once
 * at an 8-byte aligned address, under the REMOTE_WRITE right.  Return
 * REMU_RESP_NEXT or the error's verdict.
 */
static enum remu_resp_verdict remu_resp_atomic_write(struct remu_qp *qp,
						     struct sk_buff *skb)
{
	struct remu_skb_cb *cb = remu_cb(skb);
	const struct remu_opcode_info *info = &remu_opcode[cb->opcode];
	struct remu_reth *reth = remu_pkt_hdr_of(skb, info, REMU_HDR_RETH);
	u64 va = remu_reth_va(reth), val, orig;
	struct remu_rkey rk;
	int err;

	if (!remu_qp_allows(qp, IB_ACCESS_REMOTE_WRITE))
		return REMU_RESP_ACC_ERR;
	/* exactly 8 bytes, aligned (IBA oA19-28) */
	if (remu_reth_len(reth) != sizeof(val) || cb->paylen != sizeof(val) ||
	    (va & 7))
		return REMU_RESP_INV_REQ;
	if (remu_resp_rkey(qp, remu_reth_rkey(reth), va, sizeof(val),
			   IB_ACCESS_REMOTE_WRITE, &rk))
		return REMU_RESP_ACC_ERR;
	if (skb_copy_bits(skb, cb->hdr_len, &val, sizeof(val))) {
		remu_rkey_put(&rk);
		return REMU_RESP_INV_REQ;
	}
	err = remu_mr_atomic(rk.mr, va, REMU_ATOMIC_WRITE, val, 0, &orig);
	remu_rkey_put(&rk);
	if (err == -EINVAL)
		return REMU_RESP_INV_REQ;
	return err ? REMU_RESP_ACC_ERR : REMU_RESP_NEXT;
}

/*
 * Execute a FLUSH (IBA 1.5): make what was placed in a range (or the
 * whole MR or window, IB_FLUSH_MR) globally visible, and for
 * IB_FLUSH_PERSISTENT persistent; the QP and the key must grant the
 * FLUSH right of each placement type asked for.  Return REMU_RESP_NEXT
 * or the error's verdict.
 */
static enum remu_resp_verdict remu_resp_flush(struct remu_qp *qp,
					      struct sk_buff *skb)
{
	const struct remu_opcode_info *info = &remu_opcode[remu_cb(skb)->opcode];
	struct remu_feth *feth = remu_pkt_hdr_of(skb, info, REMU_HDR_FETH);
	struct remu_reth *reth = remu_pkt_hdr_of(skb, info, REMU_HDR_RETH);
	u32 plt = remu_feth_plt(feth), sel = remu_feth_sel(feth);
	u64 va = remu_reth_va(reth), len = remu_reth_len(reth);
	unsigned int access = 0;
	struct remu_rkey rk;
	int err;

	if (!plt || (plt & ~(IB_FLUSH_GLOBAL | IB_FLUSH_PERSISTENT)) ||
	    (sel != IB_FLUSH_RANGE && sel != IB_FLUSH_MR))
		return REMU_RESP_INV_REQ;
	if (plt & IB_FLUSH_GLOBAL)
		access |= IB_ACCESS_FLUSH_GLOBAL;
	if (plt & IB_FLUSH_PERSISTENT)
		access |= IB_ACCESS_FLUSH_PERSISTENT;
	if ((qp->attr.qp_access_flags & access) != access)
		return REMU_RESP_ACC_ERR;
	if (sel == IB_FLUSH_MR) {
		/* the whole MR (or window): address and length unused */
		if (remu_resp_rkey(qp, remu_reth_rkey(reth), 0, 0, access,
				   &rk))
			return REMU_RESP_ACC_ERR;
		va = rk.win ? rk.addr : rk.mr->iova;
		len = rk.win ? rk.length : rk.mr->length;
	} else if (remu_resp_rkey(qp, remu_reth_rkey(reth), va, len, access,
				  &rk)) {
		return REMU_RESP_ACC_ERR;
	}
	err = remu_mr_flush(rk.mr, va, len, plt & IB_FLUSH_PERSISTENT);
	remu_rkey_put(&rk);
	return err ? REMU_RESP_ACC_ERR : REMU_RESP_NEXT;
}

/*
 * Keep the READ or atomic request @r in the next responder resource: the
 * last max_dest_rd_atomic of them are all a requester may still be
 * waiting for, so they are the only ones a duplicate may repeat.
 */
static void remu_resp_save_res(struct remu_qp *qp,
			       const struct remu_rd_res *r)
{
	struct remu_rd_res_set *s = qp->eng.res;

	/* an RC QP past RTR always has its set (remu_eng_take()) */
	if (!s)
		return;
	s->r[s->next] = *r;
	s->next = (s->next + 1) % s->n;
}

/* the saved READ or atomic whose PSNs include @psn, or NULL */
static struct remu_rd_res *remu_resp_find_res(struct remu_qp *qp, u32 psn)
{
	struct remu_rd_res_set *s = qp->eng.res;
	unsigned int i;

	for (i = 0; s && i < s->n; i++) {
		struct remu_rd_res *r = &s->r[i];
		s32 k = remu_psn_diff(psn, r->psn);

		if (r->opcode && k >= 0 && k < r->npkts)
			return r;
	}
	return NULL;
}

/*
 * A duplicate READ or atomic (its responses were lost, or the request was
 * duplicated).  An atomic is answered again with its saved result.  A
 * READ is executed again from the response PSN it names, for at most the
 * rest of what the saved one read (a requester that lost some responses
 * asks again for those, with address and length moved to match): it
 * becomes the READ in progress, replacing one still sending.  One
 * that matches no saved request (too old, or never made) is dropped and
 * counted: replaying whatever a packet asks for would let one small
 * packet make the responder stream gigabytes.
 */
static void remu_resp_dup_rd(struct remu_qp *qp, struct sk_buff *skb,
			     u32 psn)
{
	u8 opcode = remu_cb(skb)->opcode;
	const struct remu_opcode_info *info = &remu_opcode[opcode];
	struct remu_rd_res *r = remu_resp_find_res(qp, psn);
	struct remu_reth *reth;
	u64 off;

	if (r && (info->flags & REMU_OP_ATOMIC) && r->opcode == opcode &&
	    r->psn == psn) {
		remu_resp_ack(qp, psn, REMU_ACK_OK, REMU_ATOMIC_ACK, r->orig);
		return;
	}
	/* FLUSH, ATOMIC_WRITE: answered again, never executed again */
	if (r && (info->flags & (REMU_OP_FLUSH | REMU_OP_ATOMIC_WRITE)) &&
	    r->opcode == opcode && r->psn == psn) {
		remu_resp_ack(qp, psn, REMU_ACK_OK, REMU_EMPTY_READ_RESP, 0);
		return;
	}
	if (r && (info->flags & REMU_OP_READ) && r->opcode == opcode) {
		reth = remu_pkt_hdr_of(skb, info, REMU_HDR_RETH);
		off = (u64)remu_psn_diff(psn, r->psn) * qp->eng.mtu;
		if (remu_reth_rkey(reth) == r->rkey &&
		    remu_reth_va(reth) == r->va + off && off <= r->len &&
		    remu_reth_len(reth) <= r->len - off) {
			/*
			 * It replaces a READ in progress; an error NAKs
			 * nothing: the requester retries
			 */
			remu_resp_read(qp, psn, remu_reth_va(reth), r->rkey,
				       remu_reth_len(reth), true);
			return;
		}
	}
	remu_count(qp->rdev, REMU_CNT_RCVD_STALE_DUP);
}

/* the opcode continues the message in progress, or starts one */
static bool remu_resp_seq_ok(struct remu_qp *qp, u32 flags)
{
	struct remu_qp_eng *e = &qp->eng;
	bool cont = !(flags & REMU_OP_FIRST);	/* ONLY includes FIRST */

	if (e->in_send)
		return cont && (flags & REMU_OP_SEND);
	if (e->in_write)
		return cont && (flags & REMU_OP_WRITE);
	return !cont;
}

/* check: a QP in INIT takes nothing */
static enum remu_resp_verdict remu_resp_chk_state(struct remu_qp *qp,
						  struct remu_resp_req *rq)
{
	if (READ_ONCE(qp->state) != IB_QPS_INIT)
		return REMU_RESP_NEXT;
	remu_count(qp->rdev, REMU_CNT_RCVD_NO_QP);
	return REMU_RESP_DROP;
}

/* check, UD: the Q_Key; on the GSI QP, a MAD's size */
static enum remu_resp_verdict remu_resp_chk_ud(struct remu_qp *qp,
					       struct remu_resp_req *rq)
{
	struct remu_deth *deth;

	if (remu_qp_type(qp) != IB_QPT_UD)
		return REMU_RESP_NEXT;
	deth = remu_pkt_hdr_of(rq->skb, rq->info, REMU_HDR_DETH);
	if (!deth || remu_deth_qkey(deth) != qp->attr.qkey) {
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_QKEY);
		return REMU_RESP_DROP;
	}
	/*
	 * GSI: a MAD fits ib_mad's receive buffers; anything longer is
	 * dropped before it takes (and errors) one of them.
	 */
	if (remu_qp_is_gsi(qp) && remu_cb(rq->skb)->paylen > IB_MGMT_MAD_SIZE) {
		remu_count(qp->rdev, REMU_CNT_RCVD_MAD_TOO_LONG);
		return REMU_RESP_DROP;
	}
	return REMU_RESP_NEXT;
}

/*
 * check, RC and UC: the PSN.  RC takes the expected one only: before it a
 * duplicate, beyond it a sequence error.  UC takes any: a lost packet
 * ends the message in progress, and the next first or only packet
 * starts a new one.  The first packet a QP in RTR takes establishes
 * communication.
 */
static enum remu_resp_verdict remu_resp_chk_psn(struct remu_qp *qp,
						struct remu_resp_req *rq)
{
	enum ib_qp_type type = remu_qp_type(qp);
	struct remu_qp_eng *e = &qp->eng;
	s32 d = remu_psn_diff(rq->psn, e->rpsn);

	if (type == IB_QPT_UD)
		return REMU_RESP_NEXT;
	if (type == IB_QPT_RC && d < 0)
		return REMU_RESP_DUPLICATE;
	if (type == IB_QPT_RC && d > 0)
		return REMU_RESP_PSN_SEQ;
	if (d) {
		e->in_send = false;
		e->in_write = false;
		e->roff = 0;
		e->rpsn = rq->psn;
		if (!(rq->info->flags & (REMU_OP_FIRST | REMU_OP_ONLY))) {
			remu_count(qp->rdev, REMU_CNT_OUT_OF_SEQ_REQ);
			return REMU_RESP_UC_LOST;
		}
	}
	e->nak_sent = false;
	if (unlikely(READ_ONCE(qp->state) == IB_QPS_RTR) && !e->comm_est) {
		e->comm_est = true;
		remu_qp_event(qp, IB_EVENT_COMM_EST);
	}
	return REMU_RESP_NEXT;
}

/*
 * check, RC and UC: the opcode continues the message in progress, or
 * starts one.  RC: an invalid request; UC: the message is lost.
 */
static enum remu_resp_verdict remu_resp_chk_op_seq(struct remu_qp *qp,
						   struct remu_resp_req *rq)
{
	if (remu_qp_type(qp) == IB_QPT_UD ||
	    remu_resp_seq_ok(qp, rq->info->flags))
		return REMU_RESP_NEXT;
	if (remu_qp_type(qp) == IB_QPT_RC)
		return REMU_RESP_INV_REQ;
	qp->eng.in_send = false;
	qp->eng.in_write = false;
	remu_count(qp->rdev, REMU_CNT_RCVD_BAD_OP_SEQ);
	return REMU_RESP_UC_LOST;
}

/*
 * check: a request remu executes, and no READ or WRITE longer than
 * max_msg_sz (the RETH's DMA length, in the first packet).  RC: an
 * invalid request, as the length error of a NIC; UC: the WRITE is
 * dropped whole (IBA class D) and the QP goes on.
 */
static enum remu_resp_verdict remu_resp_chk_op_valid(struct remu_qp *qp,
						     struct remu_resp_req *rq)
{
	u32 flags = rq->info->flags;
	struct remu_reth *reth;

	/* no other request exists; the opcode table says so */
	if (!(flags & REMU_RESP_OPS))
		return REMU_RESP_INV_REQ;
	if (!(flags & (REMU_OP_READ | REMU_OP_WRITE)) ||
	    !remu_op_has(rq->info, REMU_HDR_RETH))
		return REMU_RESP_NEXT;
	reth = remu_pkt_hdr_of(rq->skb, rq->info, REMU_HDR_RETH);
	if (remu_reth_len(reth) <= REMU_MAX_MSG_SZ)
		return REMU_RESP_NEXT;
	if (remu_qp_type(qp) == IB_QPT_RC)
		return REMU_RESP_INV_REQ;
	qp->eng.in_write = false;
	remu_count(qp->rdev, REMU_CNT_RCVD_UC_BAD_WRITE);
	return REMU_RESP_UC_LOST;
}

/*
 * check: a receive WQE for the first packet of a SEND (every UD packet)
 * and for a WRITE_WITH_IMM, taken now; the rest of a SEND goes on into
 * the one its first packet took.
 */
static enum remu_resp_verdict remu_resp_chk_resource(struct remu_qp *qp,
						     struct remu_resp_req *rq)
{
	u32 flags = rq->info->flags;
	bool need = (flags & REMU_OP_SEND) ? flags & REMU_OP_FIRST :
		    (flags & REMU_OP_WRITE) && (flags & REMU_OP_IMM);

	if (need && !remu_resp_get_rwqe(qp))
		return REMU_RESP_RNR;
	return REMU_RESP_NEXT;
}

/*
 * A SEND or WRITE packet whose payload is the sender's memory by
 * reference, taken back since it was sent (its MR deregistered:
 * remu_zc.c): not placed, as if lost on the wire.  RC: the
 * requester goes back to it (and reads its memory anew, or fails the WQE
 * on a key that is gone); UC: the message is lost.
 */
static enum remu_resp_verdict remu_resp_revoked(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;

	remu_count(qp->rdev, REMU_CNT_RCVD_REVOKED);
	if (remu_qp_type(qp) == IB_QPT_RC)
		return REMU_RESP_DROP;
	e->in_send = false;
	e->in_write = false;
	e->roff = 0;
	return remu_qp_type(qp) == IB_QPT_UC ? REMU_RESP_UC_LOST :
					       REMU_RESP_DROP;
}

/* execute a SEND packet (UD: the whole message, done here) */
static enum remu_resp_verdict remu_resp_exec_send(struct remu_qp *qp,
						  struct remu_resp_req *rq)
{
	int err = remu_resp_send(qp, rq->skb);

	if (err == -ESTALE)
		return remu_resp_revoked(qp);
	/* UD: an error was completed as such, and the QP goes on */
	if (remu_qp_type(qp) == IB_QPT_UD)
		return err ? REMU_RESP_DROP : REMU_RESP_DONE;
	if (err) {
		/* NAKs on RC; every transport goes to ERR */
		qp->eng.in_send = false;
		rq->cqe_reports = true;
		return err == -EMSGSIZE ? REMU_RESP_INV_REQ : REMU_RESP_OP_ERR;
	}
	qp->eng.in_send = !(rq->info->flags & (REMU_OP_LAST | REMU_OP_ONLY));
	return REMU_RESP_NEXT;
}

/* execute a WRITE packet; its end completes a WRITE_WITH_IMM's receive */
static enum remu_resp_verdict remu_resp_exec_write(struct remu_qp *qp,
						   struct remu_resp_req *rq)
{
	u32 flags = rq->info->flags;
	bool end = flags & (REMU_OP_LAST | REMU_OP_ONLY);
	int err = remu_resp_write(qp, rq->skb);

	if (err == -ESTALE)
		return remu_resp_revoked(qp);
	if (err) {
		qp->eng.in_write = false;
		/*
		 * UC has no NAK: the rest of the message is dropped (IBA
		 * class D), a receive it took stays for the next one, and
		 * the QP goes on.
		 */
		if (remu_qp_type(qp) != IB_QPT_RC) {
			remu_count(qp->rdev, REMU_CNT_RCVD_UC_BAD_WRITE);
			return REMU_RESP_UC_LOST;
		}
		return err == -EACCES ? REMU_RESP_ACC_ERR : REMU_RESP_INV_REQ;
	}
	qp->eng.in_write = !end;
	if (end && (flags & REMU_OP_IMM))
		remu_resp_complete(qp, rq->skb, IB_WC_SUCCESS,
				   IB_WC_RECV_RDMA_WITH_IMM, qp->eng.wr_len);
	return REMU_RESP_NEXT;
}

/*
 * execute a READ: accepted here, its responses (one PSN each) go out from
 * the next step of the owner on (remu_resp_read_more())
 */
static enum remu_resp_verdict remu_resp_exec_read(struct remu_qp *qp,
						  struct remu_resp_req *rq)
{
	struct remu_reth *reth = remu_pkt_hdr_of(rq->skb, rq->info,
						 REMU_HDR_RETH);
	struct remu_rd_res *r = &rq->res;

	r->rkey = remu_reth_rkey(reth);
	r->va = remu_reth_va(reth);
	r->len = remu_reth_len(reth);
	r->npkts = max_t(u32, 1, DIV_ROUND_UP(r->len, qp->eng.mtu));
	rq->npkts = r->npkts;
	return remu_resp_read(qp, rq->psn, r->va, r->rkey, r->len, false);
}

/* execute the request: the step of its class */
static enum remu_resp_verdict remu_resp_execute(struct remu_qp *qp,
						struct remu_resp_req *rq)
{
	u32 flags = rq->info->flags;

	if (flags & REMU_OP_SEND)
		return remu_resp_exec_send(qp, rq);
	if (flags & REMU_OP_WRITE)
		return remu_resp_exec_write(qp, rq);
	/* the others take a responder resource */
	rq->res.opcode = remu_cb(rq->skb)->opcode;
	rq->res.psn = rq->psn;
	rq->res.npkts = 1;
	if (flags & REMU_OP_READ)
		return remu_resp_exec_read(qp, rq);
	if (flags & REMU_OP_ATOMIC)
		return remu_resp_atomic(qp, rq->skb, &rq->res.orig);
	if (flags & REMU_OP_FLUSH)
		return remu_resp_flush(qp, rq->skb);
	return remu_resp_atomic_write(qp, rq->skb);
}

/*
 * The one tail of every RC and UC request executed: keep its responder
 * resource, move the MSN (at a message's end) and the expected PSN on,
 * and answer: an atomic ACK with the original value; the empty READ
 * response of a FLUSH or ATOMIC_WRITE; nothing more for a READ (its
 * responses are its answer); for SEND and WRITE on RC, an ACK if the
 * packet asks for one (AckReq), else the ACK is coalesced with a later
 * one (ack_deferred).
 */
static enum remu_resp_verdict remu_resp_finish(struct remu_qp *qp,
					       struct remu_resp_req *rq)
{
	struct remu_bth *bth = (struct remu_bth *)rq->skb->data;
	struct remu_qp_eng *e = &qp->eng;
	u32 flags = rq->info->flags;

	if (flags & REMU_RESP_RD_OPS)
		remu_resp_save_res(qp, &rq->res);
	if (flags & (REMU_OP_LAST | REMU_OP_ONLY))
		e->msn++;
	e->rpsn = (rq->psn + rq->npkts) & REMU_PSN_MASK;
	if (flags & REMU_OP_ATOMIC)
		remu_resp_ack(qp, rq->psn, REMU_ACK_OK, REMU_ATOMIC_ACK,
			      rq->res.orig);
	else if (flags & (REMU_OP_FLUSH | REMU_OP_ATOMIC_WRITE))
		remu_resp_ack(qp, rq->psn, REMU_ACK_OK, REMU_EMPTY_READ_RESP, 0);
	else if ((flags & REMU_OP_READ) || remu_qp_type(qp) != IB_QPT_RC)
		return REMU_RESP_DONE;
	else if (remu_bth_ack_req(bth))
		remu_resp_ack(qp, rq->psn, REMU_ACK_OK, REMU_ACK, 0);
	else
		remu_count(qp->rdev, REMU_CNT_ACK_DEFERRED);
	return REMU_RESP_DONE;
}

/*
 * RC, a duplicate: a READ, atomic, FLUSH or ATOMIC_WRITE is answered
 * again from its responder resource (remu_resp_dup_rd()); a SEND or
 * WRITE packet is ACKed again if it asks for an ACK, so a go-back-N
 * resend of a window the responder already has costs a few ACKs.
 */
static void remu_resp_duplicate(struct remu_qp *qp, struct remu_resp_req *rq)
{
	struct remu_bth *bth = (struct remu_bth *)rq->skb->data;

	remu_count(qp->rdev, REMU_CNT_DUP_REQ);
	if (rq->info->flags & REMU_RESP_RD_OPS)
		remu_resp_dup_rd(qp, rq->skb, rq->psn);
	else if (remu_bth_ack_req(bth))
		remu_resp_ack(qp, (qp->eng.rpsn - 1) & REMU_PSN_MASK,
			      REMU_ACK_OK, REMU_ACK, 0);
	else
		remu_count(qp->rdev, REMU_CNT_ACK_DEFERRED);
}

/* RC, a packet from beyond the expected PSN: one NAK per gap */
static void remu_resp_psn_seq(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;

	remu_count(qp->rdev, REMU_CNT_OUT_OF_SEQ_REQ);
	if (e->nak_sent)
		return;
	e->nak_sent = true;
	remu_resp_ack(qp, e->rpsn, REMU_AETH_NAK_PSN_SEQ_ERR, REMU_ACK, 0);
}

/* carry out the verdict @v that ended @rq's way, and free the packet */
static void remu_resp_act(struct remu_qp *qp, struct remu_resp_req *rq,
			  enum remu_resp_verdict v)
{
	switch (v) {
	case REMU_RESP_DONE:
		/* consume_skb: the drop tracepoint sees drops only */
		consume_skb(rq->skb);
		return;
	case REMU_RESP_UC_LOST:
		qp->eng.rpsn = (rq->psn + 1) & REMU_PSN_MASK;
		break;
	case REMU_RESP_DUPLICATE:
		remu_resp_duplicate(qp, rq);
		break;
	case REMU_RESP_PSN_SEQ:
		remu_resp_psn_seq(qp);
		break;
	case REMU_RESP_RNR:
		remu_resp_no_recv(qp, rq->psn);
		break;
	case REMU_RESP_INV_REQ:
	case REMU_RESP_ACC_ERR:
	case REMU_RESP_OP_ERR:
		remu_resp_fatal(qp, rq, v);
		break;
	case REMU_RESP_NEXT:
	case REMU_RESP_DROP:
		break;
	}
	kfree_skb(rq->skb);
}

/**
 * remu_resp_pkt - the responder: take one request packet
 * @qp: the QP it is for
 * @skb: the packet (skb->data at the BTH, remu_cb() filled); consumed
 *
 * The checks in order, then the execute step of the request's class and
 * the tail they share; the first verdict other than REMU_RESP_NEXT ends
 * the way, and remu_resp_act() carries it out.
 *
 * Context: the engines' owner (remu_eng_run()); may sleep.
 */
void remu_resp_pkt(struct remu_qp *qp, struct sk_buff *skb)
{
	struct remu_resp_req rq = {
		.skb = skb,
		.info = &remu_opcode[remu_cb(skb)->opcode],
		.psn = remu_cb(skb)->psn,
		.npkts = 1,
		.nak_psn = remu_cb(skb)->psn,
	};
	enum remu_resp_verdict v;

	v = remu_resp_chk_state(qp, &rq) ?:
	    remu_resp_chk_ud(qp, &rq) ?:
	    remu_resp_chk_psn(qp, &rq) ?:
	    remu_resp_chk_op_seq(qp, &rq) ?:
	    remu_resp_chk_op_valid(qp, &rq) ?:
	    remu_resp_chk_resource(qp, &rq) ?:
	    remu_resp_execute(qp, &rq) ?:
	    remu_resp_finish(qp, &rq);
	remu_resp_act(qp, &rq, v);
}
