// SPDX-License-Identifier: GPL-2.0
/*
 * remu_resp.c - the responder: request packets in, data placed, receive
 * completions, and the responses (ACK, NAK, RNR NAK, READ response,
 * atomic ACK) out.
 *
 * Owns: the receive side of a QP: the expected PSN and MSN (RC), the
 * receive WQE being filled (copied out of the RQ or SRQ ring once, then
 * only the copy is used), the RDMA WRITE in progress, and the responder
 * resources: the last max_dest_rd_atomic READs and atomics executed
 * (struct remu_rd_res).  RC checks the PSN: a duplicate is re-ACKed (a
 * duplicate READ is executed again, from the PSN, address and length it
 * carries, only as a repeat of a saved READ and for no more than its
 * rest; a duplicate atomic is answered with the result saved when it
 * ran, never executed twice; any other duplicate READ or atomic is
 * dropped, counted in rcvd_stale_dup), a packet from the future gets one
 * PSN sequence error NAK.  A READ longer than max_msg_sz is NAKed as an
 * invalid request.  IBA 1.5's FLUSH and ATOMIC_WRITE take a responder
 * resource like READs and atomics and are answered by an empty READ
 * response ONLY (as rxe does); a duplicate is answered again, not
 * executed again.  ACKs are coalesced: a SEND or
 * WRITE packet, new or duplicate, is ACKed only when it carries AckReq
 * (the requester sets it on the last packet of a message and every
 * REMU_ACK_EVERY PSNs, also when it resends, and on the first packet of
 * each go-back), so a go-back-N resend of a
 * window the responder already has costs a few ACKs, not one per packet;
 * the others count as ack_deferred.  UC resynchronises on
 * the next first/only packet and silently drops a WRITE it refuses (bad
 * rkey, bounds, length); UD checks the Q_Key and writes the 40-byte
 * GRH area (IPv4: the IPv4 header in its last 20 bytes) before the data.
 *
 * Async events: IB_EVENT_COMM_EST for the first packet a QP in RTR takes;
 * QP_ACCESS_ERR / QP_REQ_ERR / QP_FATAL for a fatal error that no receive
 * completion reports (remu_resp_fatal()).
 *
 * Inline receive (remu_resp_inline()): a small single-packet message for
 * a CQ that asked for it is not scattered but put in the CQE with the
 * checked process addresses of its receive buffers; libremu copies it at
 * poll time (uapi remu-abi.h, docs/architecture.md).
 *
 * Runs only in the engines' owner (remu_eng_run()).  RQ slots are
 * consumed under qp->rq.cons_lock when the completion is written (so a
 * flush and the responder never both complete one); SRQ slots are
 * consumed when taken.  MR copies happen with no lock held.
 */
#include <linux/ip.h>
#include <linux/ipv6.h>

#include "remu_qp.h"
#include "remu_mr.h"
#include "remu_net.h"
#include "remu_trace.h"

#define REMU_GRH_LEN	40

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
 * A fatal request error: move the QP to ERR, then NAK the request (RC), so
 * that by the time the requester sees the NAK this QP is in ERR already
 * (a consumer that resets both QPs on the error finds them settled).
 * With @event (an error no receive completion reports: a WRITE, READ or
 * atomic refused, a broken opcode sequence) the consumer also gets the
 * affiliated asynchronous error a real NIC raises for it: QP_ACCESS_ERR
 * for an access violation, QP_REQ_ERR for an invalid request, QP_FATAL
 * for anything else.
 */
static void remu_resp_fatal(struct remu_qp *qp, u32 psn, u8 syn, bool event)
{
	remu_count(qp->rdev, syn == REMU_AETH_NAK_REM_ACC_ERR ?
		   REMU_CNT_RESP_REMOTE_ACCESS_ERR :
		   syn == REMU_AETH_NAK_INVALID_REQ ?
		   REMU_CNT_RESP_INVALID_REQ : REMU_CNT_RESP_REMOTE_OP_ERR);
	remu_qp_error(qp);
	if (qp->ib_qp.qp_type == IB_QPT_RC)
		remu_resp_ack(qp, psn, syn, REMU_ACK, 0);
	if (!event)
		return;
	remu_qp_event(qp, syn == REMU_AETH_NAK_REM_ACC_ERR ?
			  IB_EVENT_QP_ACCESS_ERR :
			  syn == REMU_AETH_NAK_INVALID_REQ ?
			  IB_EVENT_QP_REQ_ERR : IB_EVENT_QP_FATAL);
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

static int remu_resp_scatter(struct remu_qp *qp, const void *buf, u32 len)
{
	struct remu_qp_eng *e = &qp->eng;
	int err;

	if (!len)
		return 0;
	err = remu_sge_copy(&(struct remu_sgl){
			.rdev = qp->rdev, .pd = to_remu_pd(qp->ib_qp.pd),
			.sges = e->rsge, .num = e->rwqe.num_sge,
			.access = IB_ACCESS_LOCAL_WRITE,
		}, e->roff, (void *)buf, len, REMU_TO_MR);
	if (!err)
		e->roff += len;
	return err;
}

/* the payload of a SEND (or the receive side of WRITE_WITH_IMM) */
static int remu_resp_send(struct remu_qp *qp, struct sk_buff *skb)
{
	struct remu_skb_cb *cb = remu_cb(skb);
	const struct remu_opcode_info *info = &remu_opcode[cb->opcode];
	struct remu_qp_eng *e = &qp->eng;
	struct remu_cqe_ext *ext = NULL;
	u8 grh[REMU_GRH_LEN];
	u32 glen = 0;
	int err;

	if (!remu_resp_get_rwqe(qp))
		return -EAGAIN;
	if (remu_qp_type(qp) == IB_QPT_UD) {
		memset(grh, 0, sizeof(grh));
		if (ip_hdr(skb)->version == 4)
			memcpy(grh + 20, ip_hdr(skb), sizeof(struct iphdr));
		else
			memcpy(grh, ipv6_hdr(skb), sizeof(struct ipv6hdr));
		glen = sizeof(grh);
	}
	if ((info->flags & REMU_OP_ONLY) && qp->rcq->inline_recv) {
		ext = &e->rext;
		memset(ext, 0, sizeof(*ext));
		if (remu_resp_inline(qp, skb, grh, glen, ext))
			e->roff = glen + cb->paylen;
		else
			ext = NULL;
	}
	if (!ext) {
		err = remu_resp_scatter(qp, grh, glen);
		if (err)
			goto err;
		if (cb->paylen)
			err = remu_sge_copy_skb(&(struct remu_sgl){
					.rdev = qp->rdev,
					.pd = to_remu_pd(qp->ib_qp.pd),
					.sges = e->rsge, .num = e->rwqe.num_sge,
					.access = IB_ACCESS_LOCAL_WRITE,
				}, e->roff, skb, cb->hdr_len, cb->paylen,
				REMU_TO_MR);
		if (err)
			goto err;
		e->roff += cb->paylen;
	}
	if (info->flags & (REMU_OP_LAST | REMU_OP_ONLY)) {
		void *ieth = remu_pkt_hdr_of(skb, info, REMU_HDR_IETH);

		if (ieth && remu_key_invalidate(qp->rdev,
						to_remu_pd(qp->ib_qp.pd),
						qp->ib_qp.qp_num,
						remu_ieth_rkey(ieth))) {
			remu_resp_complete(qp, skb, IB_WC_REM_INV_REQ_ERR,
					   IB_WC_RECV, e->roff);
			return -EINVAL;
		}
		remu_resp_complete_ext(qp, skb, IB_WC_SUCCESS, IB_WC_RECV,
				       e->roff, ext);
	}
	return 0;
err:
	remu_resp_complete(qp, skb, err == -EMSGSIZE ? IB_WC_LOC_LEN_ERR :
				    IB_WC_LOC_PROT_ERR, IB_WC_RECV, e->roff);
	return err;
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

/* place a WRITE packet; -EACCES for an access error */
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
	 * Looked up again for every packet: once a window is invalidated or
	 * rebound, the rest of the message fails with a remote access error.
	 */
	if (remu_resp_rkey(qp, e->wr_rkey, e->wr_va + e->wr_off, cb->paylen,
			   IB_ACCESS_REMOTE_WRITE, &rk))
		return -EACCES;
	err = remu_mr_copy_skb(rk.mr, e->wr_va + e->wr_off, skb, cb->hdr_len,
			       cb->paylen, REMU_TO_MR);
	remu_rkey_put(&rk);
	if (err)
		return -EACCES;
	e->wr_off += cb->paylen;
	return 0;
}

/*
 * Build READ response @i of @n (PSN @psn, @plen bytes from @va of @mr)
 * and send it; with @by_ref its payload is attached as page frags of the
 * MR.  Return 0; -EOPNOTSUPP or -E2BIG when the payload cannot go by
 * reference (build it again with a copy); -ENOMEM; or the MR layer's
 * error.
 */
static int remu_resp_read_pkt(struct remu_qp *qp, const struct remu_av *av,
			      struct remu_mr *mr, u64 va, u32 plen, u32 psn,
			      u32 i, u32 n, bool by_ref)
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
			      qp->eng.msn + 1);
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

/*
 * Execute a READ of @len bytes at @va (@rkey) whose first response has
 * PSN @psn: send the response packets, their payload by reference when
 * the MR allows it (remu_mr_frag_skb()), else copied.  Return 0, or the
 * NAK syndrome with *@nak_psn the PSN to NAK: @psn, or, when memory fails
 * midway (an ODP page gone), that of the first response not sent, so the
 * requester, which has taken the ones before it, does not see the NAK as
 * stale.
 */
static u8 remu_resp_read(struct remu_qp *qp, u32 psn, u64 va, u32 rkey,
			 u32 len, u32 *nak_psn)
{
	u32 mtu = qp->eng.mtu, n, i, off = 0;
	struct remu_rkey rk = {};
	struct remu_av av;
	/* a kernel QP's MRs are kernel memory: never by reference */
	bool copy = !qp->is_user;
	u8 syn = 0;
	int err;

	*nak_psn = psn;
	if (!remu_qp_allows(qp, IB_ACCESS_REMOTE_READ))
		return REMU_AETH_NAK_REM_ACC_ERR;
	/* one descriptor for the whole READ: it keeps the memory registered */
	if (len && remu_resp_rkey(qp, rkey, va, len, IB_ACCESS_REMOTE_READ,
				  &rk))
		return REMU_AETH_NAK_REM_ACC_ERR;
	if (remu_req_av(qp, &av)) {
		if (rk.mr)
			remu_rkey_put(&rk);
		return REMU_AETH_NAK_REM_OP_ERR;
	}
	n = max_t(u32, 1, DIV_ROUND_UP(len, mtu));
	for (i = 0; i < n; i++) {
		u32 plen = min(len - off, mtu);

		err = -EOPNOTSUPP;
		if (!copy && plen >= REMU_FRAG_MIN_PAYLOAD) {
			err = remu_resp_read_pkt(qp, &av, rk.mr, va + off, plen,
						 psn + i, i, n, true);
			/* the MR's memory cannot go by reference: copy */
			copy = err == -EOPNOTSUPP || err == -E2BIG;
		}
		if (err == -EOPNOTSUPP || err == -E2BIG)
			err = remu_resp_read_pkt(qp, &av, rk.mr, va + off,
						 plen, psn + i, i, n, false);
		if (err == -ENOMEM)
			break;
		if (err) {
			/*
			 * Checked above, so the translation failed (an ODP
			 * page that is not mapped): the requester sees a
			 * remote access error.
			 */
			syn = REMU_AETH_NAK_REM_ACC_ERR;
			*nak_psn = (psn + i) & REMU_PSN_MASK;
			break;
		}
		off += plen;
		if (!(i % 64))
			cond_resched();
	}
	if (rk.mr)
		remu_rkey_put(&rk);
	return syn;
}

/* execute an atomic: 0 and *orig, or a NAK syndrome */
static u8 remu_resp_atomic(struct remu_qp *qp, struct sk_buff *skb, u64 *orig)
{
	const struct remu_opcode_info *info = &remu_opcode[remu_cb(skb)->opcode];
	struct remu_atmeth *a = remu_pkt_hdr_of(skb, info, REMU_HDR_ATMETH);
	u64 va = remu_atmeth_va(a);
	struct remu_rkey rk;
	int err;

	if (!remu_qp_allows(qp, IB_ACCESS_REMOTE_ATOMIC))
		return REMU_AETH_NAK_REM_ACC_ERR;
	if (va & 7)
		return REMU_AETH_NAK_INVALID_REQ;
	if (remu_resp_rkey(qp, remu_atmeth_rkey(a), va, 8,
			   IB_ACCESS_REMOTE_ATOMIC, &rk))
		return REMU_AETH_NAK_REM_ACC_ERR;
	if (remu_cb(skb)->opcode == IB_OPCODE_RC_COMPARE_SWAP)
		err = remu_mr_atomic(rk.mr, va, REMU_ATOMIC_CMP_SWP,
				     remu_atmeth_compare(a),
				     remu_atmeth_swap_add(a), orig);
	else
		err = remu_mr_atomic(rk.mr, va, REMU_ATOMIC_FETCH_ADD,
				     remu_atmeth_swap_add(a), 0, orig);
	remu_rkey_put(&rk);
	if (err == -EINVAL)
		return REMU_AETH_NAK_INVALID_REQ;
	return err ? REMU_AETH_NAK_REM_ACC_ERR : 0;
}

/*
 * Execute an ATOMIC_WRITE (IBA 1.5): its 8 payload bytes stored at once
 * at an 8-byte aligned address, under the REMOTE_WRITE right.  Return 0
 * or a NAK syndrome.
 */
static u8 remu_resp_atomic_write(struct remu_qp *qp, struct sk_buff *skb)
{
	struct remu_skb_cb *cb = remu_cb(skb);
	const struct remu_opcode_info *info = &remu_opcode[cb->opcode];
	struct remu_reth *reth = remu_pkt_hdr_of(skb, info, REMU_HDR_RETH);
	u64 va = remu_reth_va(reth), val, orig;
	struct remu_rkey rk;
	int err;

	if (!remu_qp_allows(qp, IB_ACCESS_REMOTE_WRITE))
		return REMU_AETH_NAK_REM_ACC_ERR;
	/* exactly 8 bytes, aligned (IBA oA19-28) */
	if (remu_reth_len(reth) != sizeof(val) || cb->paylen != sizeof(val) ||
	    (va & 7))
		return REMU_AETH_NAK_INVALID_REQ;
	if (remu_resp_rkey(qp, remu_reth_rkey(reth), va, sizeof(val),
			   IB_ACCESS_REMOTE_WRITE, &rk))
		return REMU_AETH_NAK_REM_ACC_ERR;
	if (skb_copy_bits(skb, cb->hdr_len, &val, sizeof(val))) {
		remu_rkey_put(&rk);
		return REMU_AETH_NAK_INVALID_REQ;
	}
	err = remu_mr_atomic(rk.mr, va, REMU_ATOMIC_WRITE, val, 0, &orig);
	remu_rkey_put(&rk);
	if (err == -EINVAL)
		return REMU_AETH_NAK_INVALID_REQ;
	return err ? REMU_AETH_NAK_REM_ACC_ERR : 0;
}

/*
 * Execute a FLUSH (IBA 1.5): make what was placed in a range (or the
 * whole MR or window, IB_FLUSH_MR) globally visible, and for
 * IB_FLUSH_PERSISTENT persistent; the QP and the key must grant the
 * FLUSH right of each placement type asked for.  Return 0 or a NAK
 * syndrome.
 */
static u8 remu_resp_flush(struct remu_qp *qp, struct sk_buff *skb)
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
		return REMU_AETH_NAK_INVALID_REQ;
	if (plt & IB_FLUSH_GLOBAL)
		access |= IB_ACCESS_FLUSH_GLOBAL;
	if (plt & IB_FLUSH_PERSISTENT)
		access |= IB_ACCESS_FLUSH_PERSISTENT;
	if ((qp->attr.qp_access_flags & access) != access)
		return REMU_AETH_NAK_REM_ACC_ERR;
	if (sel == IB_FLUSH_MR) {
		/* the whole MR (or window): address and length unused */
		if (remu_resp_rkey(qp, remu_reth_rkey(reth), 0, 0, access,
				   &rk))
			return REMU_AETH_NAK_REM_ACC_ERR;
		va = rk.win ? rk.addr : rk.mr->iova;
		len = rk.win ? rk.length : rk.mr->length;
	} else if (remu_resp_rkey(qp, remu_reth_rkey(reth), va, len, access,
				  &rk)) {
		return REMU_AETH_NAK_REM_ACC_ERR;
	}
	err = remu_mr_flush(rk.mr, va, len, plt & IB_FLUSH_PERSISTENT);
	remu_rkey_put(&rk);
	return err ? REMU_AETH_NAK_REM_ACC_ERR : 0;
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
 * asks again for those, with address and length moved to match).  One
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
	u32 nak_psn;

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
			/* an error now NAKs nothing: the requester retries */
			remu_resp_read(qp, psn, remu_reth_va(reth), r->rkey,
				       remu_reth_len(reth), &nak_psn);
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

void remu_resp_pkt(struct remu_qp *qp, struct sk_buff *skb)
{
	struct remu_skb_cb *cb = remu_cb(skb);
	const struct remu_opcode_info *info = &remu_opcode[cb->opcode];
	struct remu_bth *bth = (struct remu_bth *)skb->data;
	struct remu_qp_eng *e = &qp->eng;
	enum ib_qp_type type = remu_qp_type(qp);
	bool rc = type == IB_QPT_RC, end;
	u32 psn = cb->psn, nak_psn;
	u64 orig = 0;
	s32 d;
	u8 syn;
	int err;

	if (READ_ONCE(qp->state) == IB_QPS_INIT) {
		remu_count(qp->rdev, REMU_CNT_RCVD_NO_QP);
		goto drop;
	}

	if (type == IB_QPT_UD) {
		struct remu_deth *deth = remu_pkt_hdr_of(skb, info,
							 REMU_HDR_DETH);

		if (!deth || remu_deth_qkey(deth) != qp->attr.qkey) {
			remu_count(qp->rdev, REMU_CNT_RCVD_BAD_QKEY);
			goto drop;
		}
		/*
		 * GSI: a MAD fits ib_mad's receive buffers; anything longer
		 * is dropped before it takes (and errors) one of them.
		 */
		if (remu_qp_is_gsi(qp) && cb->paylen > IB_MGMT_MAD_SIZE) {
			remu_count(qp->rdev, REMU_CNT_RCVD_MAD_TOO_LONG);
			goto drop;
		}
		if (!remu_resp_get_rwqe(qp)) {
			remu_resp_no_recv(qp, psn);
			goto drop;
		}
		if (!remu_resp_send(qp, skb))
			goto done;
		/* local error on UD: completed with an error, QP goes on */
		goto drop;
	}

	d = remu_psn_diff(psn, e->rpsn);
	if (rc && d < 0) {
		remu_count(qp->rdev, REMU_CNT_DUP_REQ);
		if (info->flags & (REMU_OP_READ | REMU_OP_ATOMIC |
				   REMU_OP_FLUSH | REMU_OP_ATOMIC_WRITE))
			remu_resp_dup_rd(qp, skb, psn);
		else if (remu_bth_ack_req(bth))
			remu_resp_ack(qp, (e->rpsn - 1) & REMU_PSN_MASK,
				      REMU_ACK_OK, REMU_ACK, 0);
		else
			remu_count(qp->rdev, REMU_CNT_ACK_DEFERRED);
		goto drop;
	}
	if (rc && d > 0) {
		remu_count(qp->rdev, REMU_CNT_OUT_OF_SEQ_REQ);
		if (!e->nak_sent) {
			e->nak_sent = true;
			remu_resp_ack(qp, e->rpsn, REMU_AETH_NAK_PSN_SEQ_ERR,
				      REMU_ACK, 0);
		}
		goto drop;
	}
	if (!rc && d) {
		/* UC: a lost packet ends the message in progress */
		e->in_send = false;
		e->in_write = false;
		e->roff = 0;
		e->rpsn = psn;
		if (!(info->flags & (REMU_OP_FIRST | REMU_OP_ONLY))) {
			remu_count(qp->rdev, REMU_CNT_OUT_OF_SEQ_REQ);
			goto next;
		}
	}
	e->nak_sent = false;
	/* the first packet a QP in RTR takes: communication established */
	if (unlikely(READ_ONCE(qp->state) == IB_QPS_RTR) && !e->comm_est) {
		e->comm_est = true;
		remu_qp_event(qp, IB_EVENT_COMM_EST);
	}
	if (!remu_resp_seq_ok(qp, info->flags)) {
		if (rc) {
			remu_resp_fatal(qp, psn, REMU_AETH_NAK_INVALID_REQ,
					true);
			goto drop;
		}
		e->in_send = false;
		e->in_write = false;
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_OP_SEQ);
		goto next;
	}
	end = info->flags & (REMU_OP_LAST | REMU_OP_ONLY);

	if (info->flags & REMU_OP_SEND) {
		if ((info->flags & REMU_OP_FIRST) &&
		    !remu_resp_get_rwqe(qp)) {
			remu_resp_no_recv(qp, psn);
			goto drop;
		}
		err = remu_resp_send(qp, skb);
		if (err) {
			e->in_send = false;
			/* NAKs on RC; every transport goes to ERR */
			remu_resp_fatal(qp, psn, err == -EMSGSIZE ?
					REMU_AETH_NAK_INVALID_REQ :
					REMU_AETH_NAK_REM_OP_ERR, false);
			goto drop;
		}
		e->in_send = !end;
	} else if (info->flags & REMU_OP_WRITE) {
		if ((info->flags & REMU_OP_IMM) && !remu_resp_get_rwqe(qp)) {
			remu_resp_no_recv(qp, psn);
			goto drop;
		}
		err = remu_resp_write(qp, skb);
		if (err) {
			e->in_write = false;
			/*
			 * UC has no NAK: the rest of the message is dropped
			 * (IBA class D), a receive it took stays for the
			 * next one, and the QP goes on.
			 */
			if (!rc) {
				remu_count(qp->rdev,
					   REMU_CNT_RCVD_UC_BAD_WRITE);
				goto next;
			}
			remu_resp_fatal(qp, psn, err == -EACCES ?
					REMU_AETH_NAK_REM_ACC_ERR :
					REMU_AETH_NAK_INVALID_REQ, true);
			goto drop;
		}
		e->in_write = !end;
		if (end && (info->flags & REMU_OP_IMM))
			remu_resp_complete(qp, skb, IB_WC_SUCCESS,
					   IB_WC_RECV_RDMA_WITH_IMM, e->wr_len);
	} else if (info->flags & REMU_OP_READ) {
		struct remu_reth *reth = remu_pkt_hdr_of(skb, info,
							 REMU_HDR_RETH);
		struct remu_rd_res r = {
			.opcode = cb->opcode, .psn = psn,
			.rkey = remu_reth_rkey(reth), .va = remu_reth_va(reth),
			.len = remu_reth_len(reth),
		};

		/* no message is longer than max_msg_sz */
		if (r.len > REMU_MAX_MSG_SZ) {
			remu_resp_fatal(qp, psn, REMU_AETH_NAK_INVALID_REQ,
					true);
			goto drop;
		}
		r.npkts = max_t(u32, 1, DIV_ROUND_UP(r.len, e->mtu));
		syn = remu_resp_read(qp, psn, r.va, r.rkey, r.len, &nak_psn);
		if (syn) {
			remu_resp_fatal(qp, nak_psn, syn, true);
			goto drop;
		}
		remu_resp_save_res(qp, &r);
		e->msn++;
		e->rpsn = (psn + r.npkts) & REMU_PSN_MASK;
		goto done;
	} else if (info->flags & REMU_OP_ATOMIC) {
		struct remu_rd_res r = {
			.opcode = cb->opcode, .psn = psn, .npkts = 1,
		};

		syn = remu_resp_atomic(qp, skb, &orig);
		if (syn) {
			remu_resp_fatal(qp, psn, syn, true);
			goto drop;
		}
		e->msn++;
		e->rpsn = (psn + 1) & REMU_PSN_MASK;
		r.orig = orig;
		remu_resp_save_res(qp, &r);
		remu_resp_ack(qp, psn, REMU_ACK_OK, REMU_ATOMIC_ACK, orig);
		goto done;
	} else if (info->flags & (REMU_OP_FLUSH | REMU_OP_ATOMIC_WRITE)) {
		struct remu_rd_res r = {
			.opcode = cb->opcode, .psn = psn, .npkts = 1,
		};

		syn = (info->flags & REMU_OP_FLUSH) ?
		      remu_resp_flush(qp, skb) :
		      remu_resp_atomic_write(qp, skb);
		if (syn) {
			remu_resp_fatal(qp, psn, syn, true);
			goto drop;
		}
		e->msn++;
		e->rpsn = (psn + 1) & REMU_PSN_MASK;
		remu_resp_save_res(qp, &r);
		remu_resp_ack(qp, psn, REMU_ACK_OK, REMU_EMPTY_READ_RESP, 0);
		goto done;
	} else {
		/* no other RC request exists; the opcode table says so */
		remu_resp_fatal(qp, psn, REMU_AETH_NAK_INVALID_REQ, true);
		goto drop;
	}
	if (end)
		e->msn++;
	if (rc && remu_bth_ack_req(bth))
		remu_resp_ack(qp, psn, REMU_ACK_OK, REMU_ACK, 0);
	else if (rc)
		remu_count(qp->rdev, REMU_CNT_ACK_DEFERRED);
	e->rpsn = (psn + 1) & REMU_PSN_MASK;
done:
	/* processed: consume_skb, so that the drop tracepoint sees drops only */
	consume_skb(skb);
	return;
next:
	/* UC: a packet lost to the message, the next PSN expected after it */
	e->rpsn = (psn + 1) & REMU_PSN_MASK;
drop:
	kfree_skb(skb);
}
