// SPDX-License-Identifier: GPL-2.0
/*
 * remu_comp.c - the completer: responses to an RC requester (ACK, NAK,
 * RNR NAK, READ response, atomic ACK) retire send WQEs in order, and the
 * retransmit/RNR timer and the probe timer; also remu_comp_wqe(), which
 * every engine uses to retire a send WQE.
 *
 * Owns: qp->eng.una (oldest unacknowledged PSN), the retry counters, the
 * timer and the probe timer, the round-trip estimate, the READ
 * out-of-order maps.
 *
 * remu_comp_pkt() takes a response through checks, then the step of its
 * kind (NAK, ACK, READ response, atomic ACK); each step returns a verdict
 * (enum remu_comp_verdict) and remu_comp_act() carries out the one that
 * ended the response's way.  What is believed, how ACKs, NAKs and
 * responses complete WQEs, and when and from where the requester goes
 * back: docs/architecture.md and docs/reliability.md.
 *
 * Locking: runs only in the engines' owner (remu_eng_run()); SQ slots are
 * consumed under qp->sq.cons_lock, with the CQE written under it so
 * completions stay in ring order with the flush.
 */
#include "remu_qp.h"
#include "remu_mr.h"
#include "remu_trace.h"

/*
 * What a step of remu_comp_pkt() decided about a response.
 * REMU_COMP_NEXT (0) lets the next step run; any other verdict ends the
 * response's way, and remu_comp_act() carries it out.
 */
enum remu_comp_verdict {
	REMU_COMP_NEXT,		/* passed: on to the next step */
	REMU_COMP_DONE,		/* an ACK or NAK, acted on */
	REMU_COMP_DROP,		/* not believed, stale, a duplicate: counted */
	REMU_COMP_PLACED,	/* a READ response or atomic ACK taken */
	REMU_COMP_SEEN,		/* a READ response not placed (counted), but
				 * it shows how far the responder is
				 */
	REMU_COMP_FAIL,		/* the WQE fails (@status), the QP to ERR */
};

/**
 * struct remu_comp_resp - a response on its way through the steps
 * @skb:	the packet (skb->data at the BTH)
 * @info:	its opcode's entry
 * @psn:	its PSN
 * @idx:	a READ response or atomic ACK: the ring index of the READ or
 *		atomic WQE it answers
 * @sw:		that WQE's requester state
 * @w:		that WQE (the kernel's copy)
 * @status:	REMU_COMP_FAIL: the IB_WC_* status the WQE fails with
 */
struct remu_comp_resp {
	struct sk_buff *skb;
	const struct remu_opcode_info *info;
	u32 psn;
	u32 idx;
	struct remu_swqe *sw;
	struct remu_send_wqe *w;
	int status;
};

/* retire the WQE at ring index @idx (the oldest) with @status */
void remu_comp_wqe(struct remu_qp *qp, u32 idx, int status)
{
	struct remu_swqe *sw = &qp->eng.st[idx & qp->sq.ring.mask];
	struct remu_send_wqe *w = remu_req_copy(qp, idx);
	struct remu_cqe cqe = {};
	unsigned long flags;

	spin_lock_irqsave(&qp->sq.cons_lock, flags);
	if (qp->sq.ring.cons != idx || !remu_queue_used_by_consumer(&qp->sq.ring)) {
		spin_unlock_irqrestore(&qp->sq.cons_lock, flags);
		return;		/* flushed meanwhile */
	}
	if (sw->valid && sw->rd && qp->eng.rd_out)
		qp->eng.rd_out--;
	if (sw->map)
		qp->eng.rdmap_used &= ~BIT(sw->map - 1);
	sw->map = 0;
	sw->valid = false;
	sw->rd = false;
	/*
	 * Free the slot before the completion is visible: a consumer that
	 * polls the CQE may post into the slot at once (a one-deep SQ).
	 * The CQE is built from the kernel's copy, not the slot.
	 */
	remu_queue_consume(&qp->sq.ring);
	if (status != IB_WC_SUCCESS || qp->sq_sig_all ||
	    (w->flags & REMU_WQE_SIGNALED)) {
		cqe.wr_id = w->wr_id;
		cqe.status = status;
		cqe.opcode = remu_wc_opcode(w->opcode);
		cqe.byte_len = sw->len;
		cqe.qp_num = qp->ib_qp.qp_num;
		remu_cq_post(qp->scq, &cqe, false);
	}
	spin_unlock_irqrestore(&qp->sq.cons_lock, flags);
}

/*
 * The WQE at ring index @idx (the oldest) fails with @status and the QP
 * goes to ERR: the state changes first, so a consumer that polls this
 * completion and then queries the QP sees ERR; the rest is flushed after
 * it, in ring order.
 */
void remu_comp_fail_wqe(struct remu_qp *qp, u32 idx, int status)
{
	bool entered = remu_qp_error_begin(qp);

	remu_comp_wqe(qp, idx, status);
	remu_qp_error_end(qp, entered);
}

static unsigned long remu_timeout_jiffies(u8 timeout)
{
	/* 4.096 us * 2^timeout, at least 10 ms (TCG guests are slow) */
	u64 ns = 4096ull << min_t(u8, timeout, 31);

	return max_t(unsigned long, nsecs_to_jiffies64(ns), msecs_to_jiffies(10));
}

/* (re)arm the retransmit timer if anything is outstanding */
void remu_comp_arm(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_swqe *sw = &e->st[qp->sq.ring.cons & qp->sq.ring.mask];

	if (e->rnr_wait || !qp->attr.timeout)
		return;
	/*
	 * Nothing outstanding only when the oldest WQE has not been taken
	 * yet: after going back, head is at the oldest WQE while it is
	 * being resent, and the window may stop it there half sent.
	 */
	if (qp->sq.ring.cons == e->head && !sw->valid) {
		del_timer(&e->timer);
		return;
	}
	mod_timer(&e->timer, jiffies + remu_timeout_jiffies(qp->attr.timeout));
}

/* probes after one go-back before only the timer is left */
#define REMU_PROBES	3

void remu_comp_rtt_start(struct remu_qp *qp, u32 psn)
{
	qp->eng.rtt_psn = psn;
	qp->eng.rtt_t = ktime_get_ns() ?: 1;
}

/* an ACK or NAK acknowledged everything up to @psn: a round trip ended? */
static void remu_comp_rtt_end(struct remu_qp *qp, u32 psn)
{
	struct remu_qp_eng *e = &qp->eng;
	u64 us;

	if (!e->rtt_t || remu_psn_before(psn, e->rtt_psn))
		return;
	us = div_u64(ktime_get_ns() - e->rtt_t, NSEC_PER_USEC);
	us = clamp_t(u64, us, 1, U32_MAX >> 4);
	e->rtt_t = 0;
	e->srtt_us = e->srtt_us ? e->srtt_us - (e->srtt_us >> 3) + (us >> 3) :
				  us;
	if (!e->rtt_min_us || us < e->rtt_min_us)
		e->rtt_min_us = us;
	else
		e->rtt_min_us += (us - e->rtt_min_us) >> 6;
}

/*
 * After a go-back to @psn (a sequence NAK): unless the hole is filled
 * (una passes it) within about two round trips, the probe timer resends
 * from una again, without waiting for the QP's timeout: the resend of the
 * hole was lost, and the responder, which NAKs a gap once, will not say
 * so.  The wait doubles with each probe, REMU_PROBES at most; none before
 * a round trip was measured or when the QP has no timeout.  @now: the
 * go-back was just sent (else the clock of the previous one stays).
 */
static void remu_comp_probe_arm(struct remu_qp *qp, u32 psn, bool now)
{
	struct remu_qp_eng *e = &qp->eng;
	unsigned long j;

	if (now)
		e->gb_t = ktime_get_ns();
	e->gb_psn = psn;
	if (!e->srtt_us || !qp->attr.timeout || e->probes >= REMU_PROBES) {
		e->probing = false;
		del_timer(&e->ptimer);
		return;
	}
	j = max_t(unsigned long, usecs_to_jiffies(2 * e->srtt_us) + 1, 2);
	j <<= e->probes;
	/* no sooner than the timer itself: leave it to the timer */
	if (j >= remu_timeout_jiffies(qp->attr.timeout)) {
		e->probing = false;
		del_timer(&e->ptimer);
		return;
	}
	e->probing = true;
	mod_timer(&e->ptimer, jiffies + j);
}

static void remu_comp_probe_stop(struct remu_qp *qp)
{
	if (!qp->eng.probing)
		return;
	qp->eng.probing = false;
	del_timer(&qp->eng.ptimer);
}

/* the probe timer expired: resend from una if the hole is still there */
void remu_comp_probe(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	struct remu_swqe *sw = &e->st[q->cons & q->mask];

	if (READ_ONCE(qp->state) != IB_QPS_RTS &&
	    READ_ONCE(qp->state) != IB_QPS_SQD)
		return;
	/* re-armed (a stale NAK moved it) after it expired */
	if (!e->probing || timer_pending(&e->ptimer) || e->rnr_wait)
		return;
	e->probing = false;
	if (remu_psn_before(e->gb_psn, e->una))
		return;		/* filled meanwhile */
	if (q->cons == e->head && !sw->valid)
		return;		/* nothing outstanding */
	/* READs/atomics: asked again by their own rule, or by the timer */
	if (sw->valid && sw->rd)
		return;
	e->probes++;
	remu_count(qp->rdev, REMU_CNT_RETRY_PROBE);
	trace_remu_retransmit(qp, e->una, REMU_RETX_PROBE, e->retries);
	remu_req_go_back(qp, e->una);
	remu_comp_probe_arm(qp, e->una, true);
}

static bool remu_is_atomic(u32 op)
{
	return op == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP ||
	       op == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
}

/* FLUSH and ATOMIC_WRITE: answered by one empty READ response */
static bool remu_is_empty_rd(u32 op)
{
	return op == IB_UVERBS_WR_FLUSH || op == IB_UVERBS_WR_ATOMIC_WRITE;
}

/* completed by their own responses only (remu_req.c's rd_atomic WQEs) */
static bool remu_is_rd(u32 op)
{
	return op == IB_UVERBS_WR_RDMA_READ || remu_is_atomic(op) ||
	       remu_is_empty_rd(op);
}

/*
 * Complete the outstanding WQEs that end before @psn (@inclusive: at or
 * before it), in order; READ/atomic WQEs only by their own responses.
 * Return: how many completed.
 */
static int remu_comp_upto(struct remu_qp *qp, u32 psn, bool inclusive)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	int n = 0;

	for (;;) {
		u32 idx = q->cons;
		struct remu_swqe *sw = &e->st[idx & q->mask];
		struct remu_send_wqe *w = remu_req_copy(qp, idx);
		u32 last = (sw->first_psn + sw->npkts - 1) & REMU_PSN_MASK;

		if (!sw->valid || !remu_queue_used_by_consumer(q))
			break;
		if (remu_is_rd(w->opcode)) {
			/*
			 * By its own responses, all placed; possibly while
			 * the requester went back to resend it (head here).
			 */
			if (sw->rcvd < sw->npkts)
				break;
			if (remu_psn_before(e->psn, last + 1))
				e->psn = (last + 1) & REMU_PSN_MASK;
			remu_comp_wqe(qp, idx, IB_WC_SUCCESS);
			n++;
			continue;
		}
		if (inclusive ? remu_psn_before(psn, last) :
				!remu_psn_before(last, psn))
			break;
		/*
		 * All of it arrived, though the requester may have gone back
		 * into it meanwhile (sent < npkts): new PSNs start after it.
		 */
		if (remu_psn_before(e->psn, last + 1))
			e->psn = (last + 1) & REMU_PSN_MASK;
		remu_comp_wqe(qp, idx, IB_WC_SUCCESS);
		n++;
	}
	return n;
}

/*
 * Everything before @una has been acknowledged.  Only real progress (una
 * moves, or @force: a WQE completed, a READ response was placed) resets
 * the retry counts and restarts the timer: a stale or duplicated ACK must
 * not postpone the retransmission of what is still missing.
 */
static void remu_comp_progress(struct remu_qp *qp, u32 una, bool force)
{
	struct remu_qp_eng *e = &qp->eng;
	bool moved = remu_psn_before(e->una, una & REMU_PSN_MASK);

	if (moved) {
		e->una = una & REMU_PSN_MASK;
		if (e->probing && remu_psn_before(e->gb_psn, e->una))
			remu_comp_probe_stop(qp);
	}
	if (!moved && !force)
		return;
	e->retries = qp->attr.retry_cnt;
	e->rnr_left = qp->attr.rnr_retry;
	remu_comp_arm(qp);
}

/*
 * Where a retransmission starts: una, unless the oldest WQE is a READ or
 * atomic still missing responses.  An ACK of a later request implies the
 * READ was executed, so una can be beyond responses that were lost.
 */
static u32 remu_comp_resume_psn(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	struct remu_swqe *sw = &e->st[q->cons & q->mask];
	u32 psn;

	if (q->cons == e->head || !sw->valid || !sw->rd)
		return e->una;
	psn = (sw->first_psn + sw->rcvd) & REMU_PSN_MASK;
	return remu_psn_before(psn, e->una) ? psn : e->una;
}

/*
 * A response from beyond what the oldest WQE, a READ or atomic @sw, still
 * expects shows that its responses were lost (or overtaken): ask again,
 * once per gap, from the first one missing.  Later evidence of the same
 * gap waits for that request to make progress, or for the timer.
 */
static void remu_comp_ask_again(struct remu_qp *qp, u32 idx)
{
	struct remu_swqe *sw = &qp->eng.st[idx & qp->sq.ring.mask];

	if (sw->sent != sw->npkts || sw->asked == sw->rcvd + 1)
		return;
	sw->asked = sw->rcvd + 1;
	remu_count(qp->rdev, REMU_CNT_COMP_RETRY);
	trace_remu_retransmit(qp, (sw->first_psn + sw->rcvd) & REMU_PSN_MASK,
			      REMU_RETX_READ_GAP,
			      qp->eng.retries);
	remu_req_ask_again(qp, idx);
}

/*
 * READ @sw (ring index @idx) lacks response @sw->rcvd: ask again once
 * enough came after it to call it lost rather than overtaken (netem and
 * real networks reorder), or when its last response, or one from beyond
 * the map, arrived.
 */
static void remu_comp_read_gap(struct remu_qp *qp, u32 idx,
			       struct remu_swqe *sw)
{
	struct remu_rd_map *m = remu_swqe_map(&qp->eng, sw);

	if (sw->rcvd >= sw->npkts)
		return;
	if (m && !m->beyond && !m->seen_last &&
	    m->nset + m->later < REMU_RD_GAP_THRESH)
		return;
	remu_comp_ask_again(qp, idx);
}

/*
 * A response of a later READ/atomic arrived while the oldest WQE, a READ
 * or atomic, is not finished: the responder answers in order, so that
 * one's responses are missing (or overtaken).
 */
static void remu_comp_later(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	struct remu_swqe *sw = &e->st[q->cons & q->mask];
	struct remu_rd_map *m = remu_swqe_map(e, sw);

	if (!sw->valid || !sw->rd || sw->rcvd >= sw->npkts)
		return;
	if (!m) {
		remu_comp_ask_again(qp, q->cons);
		return;
	}
	if (m->later < U16_MAX)
		m->later++;
	remu_comp_read_gap(qp, q->cons, sw);
}

/* the outstanding READ/atomic WQE whose responses include @psn */
static struct remu_swqe *remu_comp_find_rd(struct remu_qp *qp, u32 psn,
					   u32 *idxp)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	u32 idx;

	for (idx = q->cons; idx - q->cons < q->num_slots; idx++) {
		struct remu_swqe *sw = &e->st[idx & q->mask];

		if (!sw->valid || remu_psn_before(psn, sw->first_psn))
			break;
		if (sw->rd && remu_psn_diff(psn, sw->first_psn) < sw->npkts) {
			*idxp = idx;
			return sw;
		}
	}
	return NULL;
}

/*
 * READ response @k of @rs's READ: may it be placed?  Not if it is a
 * duplicate, or beyond the map (or, with no map, beyond the first
 * missing one): REMU_COMP_SEEN, counted.
 */
static enum remu_comp_verdict remu_comp_read_chk_order(struct remu_qp *qp,
						       struct remu_comp_resp *rs,
						       u32 k)
{
	struct remu_swqe *sw = rs->sw;
	struct remu_rd_map *m = remu_swqe_map(&qp->eng, sw);

	if (k < sw->rcvd) {
		remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
		return REMU_COMP_SEEN;
	}
	if (k == sw->rcvd)
		return REMU_COMP_NEXT;
	if (!m || k >= sw->rcvd + REMU_RD_MAP) {
		remu_count(qp->rdev, REMU_CNT_RCVD_RESP_AHEAD);
		if (m)
			m->beyond = true;
		remu_comp_read_gap(qp, rs->idx, sw);
		return REMU_COMP_SEEN;
	}
	if (test_bit(k % REMU_RD_MAP, m->bits)) {
		remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
		return REMU_COMP_SEEN;
	}
	return REMU_COMP_NEXT;
}

/*
 * READ response @k of @sw (ring index @idx) was placed: ahead of the
 * first missing one, noted in the map; in order, the READ moves over it
 * and what was placed ahead of it, which is progress.
 */
static void remu_comp_read_placed(struct remu_qp *qp, u32 idx,
				  struct remu_swqe *sw, u32 k)
{
	struct remu_rd_map *m = remu_swqe_map(&qp->eng, sw);

	if (m && k == sw->npkts - 1)
		m->seen_last = true;
	if (k > sw->rcvd) {
		set_bit(k % REMU_RD_MAP, m->bits);
		m->nset++;
		remu_comp_read_gap(qp, idx, sw);
		return;
	}
	sw->rcvd++;
	while (m && m->nset && sw->rcvd < sw->npkts &&
	       test_bit(sw->rcvd % REMU_RD_MAP, m->bits)) {
		clear_bit(sw->rcvd % REMU_RD_MAP, m->bits);
		m->nset--;
		sw->rcvd++;
	}
	if (m && !m->nset)
		m->beyond = false;
	remu_comp_progress(qp, sw->first_psn + sw->rcvd, true);
	if (m && m->nset)
		remu_comp_read_gap(qp, idx, sw);
}

/* the send WQE's SGE list: where a READ response or an atomic's value goes */
static struct remu_sgl remu_comp_sgl(struct remu_qp *qp,
				     struct remu_send_wqe *w)
{
	return (struct remu_sgl){
		.rdev = qp->rdev,
		.pd = to_remu_pd(qp->ib_qp.pd),
		.sges = (struct remu_sge *)(w + 1),
		.num = w->num_sge,
		.access = IB_ACCESS_LOCAL_WRITE,
	};
}

/*
 * A READ response whose payload is the responder's memory by reference,
 * taken back since it was sent (remu_zc.c): not read, not placed.  The
 * responder's MR was deregistered (or re-registered): the READ fails with
 * a remote access error, as a NIC's READ does when the key goes before
 * the NIC read the memory.
 */
static enum remu_comp_verdict remu_comp_read_revoked(struct remu_qp *qp,
						     struct remu_comp_resp *rs)
{
	remu_count(qp->rdev, REMU_CNT_RCVD_REVOKED);
	rs->status = IB_WC_REM_ACCESS_ERR;
	return REMU_COMP_FAIL;
}

/*
 * step, a READ response: place it (in order, or up to REMU_RD_MAP ahead
 * of the first missing one), straight from the skb, linear part and
 * page frags alike (payload by reference inside sections of its zc).
 */
static enum remu_comp_verdict remu_comp_read_resp(struct remu_qp *qp,
						  struct remu_comp_resp *rs)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_skb_cb *cb = remu_cb(rs->skb);
	struct remu_swqe *sw = rs->sw;
	struct remu_send_wqe *w = rs->w;
	struct remu_sgl sgl = remu_comp_sgl(qp, w);
	u32 k = remu_psn_diff(rs->psn, sw->first_psn);
	enum remu_comp_verdict v;
	int err = 0;

	if (w->opcode != IB_UVERBS_WR_RDMA_READ) {
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_OP);
		return REMU_COMP_DROP;
	}
	/*
	 * Response k carries exactly its share of the READ (every one but
	 * the last a full MTU), and the READ's last one ends a response
	 * (LAST or ONLY; an earlier one may too: the answer to a READ
	 * asked again for a range ends where that range does).  Anything
	 * else would leave a hole or spill past the WQE.
	 */
	if (cb->paylen != min_t(u64, e->mtu, sw->len - (u64)k * e->mtu) ||
	    (k == sw->npkts - 1 && !(rs->info->flags & REMU_OP_LAST))) {
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_LEN);
		return REMU_COMP_SEEN;
	}
	v = remu_comp_read_chk_order(qp, rs, k);
	if (v)
		return v;
	if (cb->paylen)
		err = remu_sge_copy_skb(&sgl, (u64)k * e->mtu, rs->skb,
					cb->hdr_len, cb->paylen, REMU_TO_MR);
	if (err == -ESTALE)
		return remu_comp_read_revoked(qp, rs);
	if (err) {
		rs->status = err == -EMSGSIZE ? IB_WC_LOC_LEN_ERR :
						IB_WC_LOC_PROT_ERR;
		return REMU_COMP_FAIL;
	}
	remu_comp_read_placed(qp, rs->idx, sw, k);
	return REMU_COMP_PLACED;
}

static int remu_nak_status(u8 syn)
{
	switch (syn) {
	case REMU_AETH_NAK_INVALID_REQ:
		return IB_WC_REM_INV_REQ_ERR;
	case REMU_AETH_NAK_REM_ACC_ERR:
		return IB_WC_REM_ACCESS_ERR;
	case REMU_AETH_NAK_REM_OP_ERR:
		return IB_WC_REM_OP_ERR;
	default:
		return IB_WC_REM_INV_RD_REQ_ERR;
	}
}

/* RNR timer value (IBA table 45), in microseconds */
unsigned int remu_rnr_usecs(u8 t)
{
	static const unsigned int us[32] = {
		655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640,
		960, 1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480,
		30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680,
		491520
	};

	return us[t & 0x1f];
}

/* the WQE at the oldest index fails with @status; the QP goes to ERR */
static void remu_comp_fail(struct remu_qp *qp, int status)
{
	del_timer(&qp->eng.timer);
	remu_comp_probe_stop(qp);
	if (qp->sq.ring.cons != qp->eng.head ||
	    qp->eng.st[qp->sq.ring.cons & qp->sq.ring.mask].valid)
		remu_comp_fail_wqe(qp, qp->sq.ring.cons, status);
	else
		remu_qp_error(qp);
}

/* check: an RC QP, and a PSN a request of this QP used */
static enum remu_comp_verdict remu_comp_chk(struct remu_qp *qp,
					    struct remu_comp_resp *rs)
{
	if (qp->ib_qp.qp_type != IB_QPT_RC) {
		remu_count(qp->rdev, REMU_CNT_RCVD_NO_QP);
		return REMU_COMP_DROP;
	}
	/*
	 * Nothing this QP sent is answered at or after sent_end: such an
	 * ACK, NAK or response is forged or broken, and believing it would
	 * complete WQEs whose data never left, or fail the QP.
	 */
	if (!remu_psn_before(rs->psn, qp->eng.sent_end)) {
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_PSN);
		return REMU_COMP_DROP;
	}
	return REMU_COMP_NEXT;
}

/*
 * A sequence NAK for a PSN the requester has sent again since it last
 * went back is stale if it comes sooner than a round trip after that
 * go-back: the packet that made the responder NAK was sent before the
 * resend (a packet sent after it cannot be answered yet), so the resend
 * is still on its way, and going back once more would send the whole
 * window a third time.  If the resend was lost after all, the probe
 * timer finds the hole unfilled and goes back.
 */
static bool remu_comp_nak_stale(struct remu_qp *qp, u32 psn, u8 syn)
{
	struct remu_qp_eng *e = &qp->eng;

	return syn == REMU_AETH_NAK_PSN_SEQ_ERR && e->probing &&
	       e->rtt_min_us && !remu_psn_before(psn, e->gb_psn) &&
	       remu_psn_before(psn, e->psn) &&
	       ktime_get_ns() - e->gb_t < (u64)e->rtt_min_us * NSEC_PER_USEC;
}

/* an RNR NAK: wait for the RNR timer, then go back, rnr_retry times */
static void remu_comp_rnr_nak(struct remu_qp *qp, u32 psn, u8 syn)
{
	struct remu_qp_eng *e = &qp->eng;

	remu_count(qp->rdev, REMU_CNT_SND_RNR);
	if (e->rnr_left != 7) {
		if (!e->rnr_left) {
			trace_remu_rnr(qp, psn, REMU_RNR_EXCEEDED,
				       remu_rnr_usecs(syn), 0);
			remu_count(qp->rdev, REMU_CNT_RNR_RETRY_EXCEEDED);
			remu_comp_fail(qp, IB_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		e->rnr_left--;
	}
	trace_remu_rnr(qp, psn, REMU_RNR_NAK_RCVD, remu_rnr_usecs(syn),
		       e->rnr_left);
	trace_remu_retransmit(qp, psn, REMU_RETX_RNR, e->rnr_left);
	remu_comp_probe_stop(qp);
	remu_req_go_back(qp, psn);
	e->rnr_wait = true;
	mod_timer(&e->timer, jiffies + usecs_to_jiffies(remu_rnr_usecs(syn)));
}

/* a sequence NAK: go back to its PSN, and arm the probe (unless @stale) */
static void remu_comp_seq_nak(struct remu_qp *qp, u32 psn, bool stale)
{
	struct remu_qp_eng *e = &qp->eng;

	remu_count(qp->rdev, REMU_CNT_RCV_SEQ_ERR);
	if (stale) {
		remu_count(qp->rdev, REMU_CNT_STALE_SEQ_NAK);
		remu_comp_probe_arm(qp, psn, false);
		return;
	}
	trace_remu_retransmit(qp, psn, REMU_RETX_SEQ_NAK, e->retries);
	remu_req_go_back(qp, psn);
	e->probes = 0;
	remu_comp_probe_arm(qp, psn, true);
}

/*
 * step: a NAK acknowledges everything before its PSN, then: an RNR NAK
 * waits and goes back, a sequence NAK goes back, any other completes the
 * oldest WQE with its error and moves the QP to ERR.  One for a PSN
 * before una is stale (duplicated, or overtaken by a later ACK): acting
 * on it would resend what has arrived.
 */
static enum remu_comp_verdict remu_comp_nak(struct remu_qp *qp,
					    struct remu_comp_resp *rs)
{
	struct remu_aeth *aeth = remu_pkt_hdr_of(rs->skb, rs->info,
						 REMU_HDR_AETH);
	u32 psn = rs->psn;
	bool stale;
	u8 syn;

	if (!aeth)
		return REMU_COMP_NEXT;
	syn = remu_aeth_syndrome(aeth);
	if ((syn & REMU_AETH_TYPE_MASK) == REMU_AETH_ACK)
		return REMU_COMP_NEXT;
	if (remu_psn_before(psn, qp->eng.una)) {
		remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
		return REMU_COMP_DONE;
	}
	stale = remu_comp_nak_stale(qp, psn, syn);
	remu_comp_rtt_end(qp, (psn - 1) & REMU_PSN_MASK);
	remu_comp_upto(qp, psn, false);
	remu_comp_progress(qp, psn, false);
	if ((syn & REMU_AETH_TYPE_MASK) == REMU_AETH_RNR_NAK)
		remu_comp_rnr_nak(qp, psn, syn);
	else if (syn == REMU_AETH_NAK_PSN_SEQ_ERR)
		remu_comp_seq_nak(qp, psn, stale);
	else
		remu_comp_fail(qp, remu_nak_status(syn));
	return REMU_COMP_DONE;
}

/*
 * step: an ACK completes the WQEs it covers; one that covers a request
 * after a READ or atomic still waiting shows that READ's or atomic's
 * responses were lost: ask again.
 */
static enum remu_comp_verdict remu_comp_ack(struct remu_qp *qp,
					    struct remu_comp_resp *rs)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	struct remu_swqe *sw;
	u32 psn = rs->psn;

	if (remu_cb(rs->skb)->opcode != IB_OPCODE_RC_ACKNOWLEDGE)
		return REMU_COMP_NEXT;
	remu_comp_rtt_end(qp, psn);
	remu_comp_progress(qp, psn + 1, remu_comp_upto(qp, psn, true) > 0);
	sw = &e->st[q->cons & q->mask];
	if (q->cons != e->head && sw->valid && sw->rd &&
	    sw->rcvd < sw->npkts &&
	    !remu_psn_before(psn, sw->first_psn + sw->npkts))
		remu_comp_ask_again(qp, q->cons);
	return REMU_COMP_DONE;
}

/*
 * step, a READ response or atomic ACK: it implicitly ACKs the WQEs before
 * its READ or atomic; find that one, by PSN, among all outstanding.
 */
static enum remu_comp_verdict remu_comp_chk_rd(struct remu_qp *qp,
					       struct remu_comp_resp *rs)
{
	remu_comp_upto(qp, rs->psn, false);
	rs->sw = remu_comp_find_rd(qp, rs->psn, &rs->idx);
	if (rs->sw) {
		rs->w = remu_req_copy(qp, rs->idx);
		return REMU_COMP_NEXT;
	}
	/*
	 * Stale: a READ the responder replays after this side had all of
	 * it (a PSN already sent; one never sent is bogus).  It answers in
	 * order, so what is outstanding waits behind the replay: its
	 * responses restart the timer (no retry count is refilled).
	 * Otherwise a replay longer than the timeout (1 MiB on a slow
	 * kernel) has the request behind it time out again and again, and
	 * each resend queues one more replay in front of it.
	 */
	if (!(rs->info->flags & REMU_OP_ATOMIC) &&
	    remu_psn_before(rs->psn, qp->eng.psn))
		remu_comp_arm(qp);
	remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
	return REMU_COMP_DROP;
}

/* step, an atomic ACK: write the original value; the atomic is done */
static enum remu_comp_verdict remu_comp_atomic_ack(struct remu_qp *qp,
						   struct remu_comp_resp *rs)
{
	struct remu_atmack *ack = remu_pkt_hdr_of(rs->skb, rs->info,
						  REMU_HDR_ATMACK);
	struct remu_send_wqe *w = rs->w;
	__u64 orig = remu_atmack_orig(ack);
	struct remu_sgl sgl;

	if (!remu_is_atomic(w->opcode)) {
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_OP);
		return REMU_COMP_DROP;
	}
	if (rs->sw->rcvd) {
		remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
		return REMU_COMP_DROP;
	}
	sgl = remu_comp_sgl(qp, w);
	if (remu_sge_copy(&sgl, 0, &orig, 8, REMU_TO_MR)) {
		rs->status = IB_WC_LOC_PROT_ERR;
		return REMU_COMP_FAIL;
	}
	rs->sw->rcvd = 1;
	remu_comp_progress(qp, rs->psn + 1, true);
	return REMU_COMP_PLACED;
}

/* step, FLUSH or ATOMIC_WRITE: done; their answer is one empty ONLY */
static enum remu_comp_verdict remu_comp_empty_rd(struct remu_qp *qp,
						 struct remu_comp_resp *rs)
{
	struct remu_skb_cb *cb = remu_cb(rs->skb);

	if (cb->opcode != IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY ||
	    cb->paylen) {
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_LEN);
		return REMU_COMP_DROP;
	}
	if (rs->sw->rcvd) {
		remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
		return REMU_COMP_DROP;
	}
	rs->sw->rcvd = 1;
	remu_comp_progress(qp, rs->psn + 1, true);
	return REMU_COMP_PLACED;
}

/* step: the READ response or atomic ACK, by the class of its WQE */
static enum remu_comp_verdict remu_comp_execute(struct remu_qp *qp,
						struct remu_comp_resp *rs)
{
	if (rs->info->flags & REMU_OP_ATOMIC)
		return remu_comp_atomic_ack(qp, rs);
	if (remu_is_empty_rd(rs->w->opcode))
		return remu_comp_empty_rd(qp, rs);
	return remu_comp_read_resp(qp, rs);
}

/*
 * Carry out the verdict @v that ended @rs's way, and free the packet.
 * After a READ response or atomic ACK (placed or not): a response of a
 * later READ or atomic shows the oldest one's are missing; READs and
 * atomics finished complete in ring order, with the WQEs after them an
 * ACK covered; the timer restarts.
 */
static void remu_comp_act(struct remu_qp *qp, struct remu_comp_resp *rs,
			  enum remu_comp_verdict v)
{
	if (v == REMU_COMP_PLACED || v == REMU_COMP_SEEN) {
		if (rs->idx != qp->sq.ring.cons)
			remu_comp_later(qp);
		remu_comp_upto(qp, qp->eng.una, false);
		remu_comp_arm(qp);
	}
	if (v == REMU_COMP_FAIL)
		remu_comp_fail(qp, rs->status);
	/* consume_skb: the drop tracepoint sees drops only */
	if (v == REMU_COMP_DONE || v == REMU_COMP_PLACED)
		consume_skb(rs->skb);
	else
		kfree_skb(rs->skb);
}

/**
 * remu_comp_pkt - the completer: take one response (RC)
 * @qp: the QP it is for
 * @skb: the packet (skb->data at the BTH, remu_cb() filled); consumed
 *
 * The checks, then the step of its kind: NAK, ACK, or READ response and
 * atomic ACK (found, then by class); the first verdict other than
 * REMU_COMP_NEXT ends the way, and remu_comp_act() carries it out.
 *
 * Context: the engines' owner (remu_eng_run()); may sleep.
 */
void remu_comp_pkt(struct remu_qp *qp, struct sk_buff *skb)
{
	struct remu_comp_resp rs = {
		.skb = skb,
		.info = &remu_opcode[remu_cb(skb)->opcode],
		.psn = remu_cb(skb)->psn,
	};
	enum remu_comp_verdict v;

	v = remu_comp_chk(qp, &rs) ?:
	    remu_comp_nak(qp, &rs) ?:
	    remu_comp_ack(qp, &rs) ?:
	    remu_comp_chk_rd(qp, &rs) ?:
	    remu_comp_execute(qp, &rs);
	remu_comp_act(qp, &rs, v);
}

void remu_comp_timeout(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	u32 psn;

	if (READ_ONCE(qp->state) != IB_QPS_RTS &&
	    READ_ONCE(qp->state) != IB_QPS_SQD)
		return;
	/* re-armed (progress, a response) after it expired: not a timeout */
	if (timer_pending(&e->timer))
		return;
	if (e->rnr_wait) {
		e->rnr_wait = false;
		return;		/* the requester resends from una */
	}
	/* READs/atomics finished while the requester went back over them */
	remu_comp_upto(qp, e->una, false);
	/* idle only if the oldest WQE has not been taken (see remu_comp_arm) */
	if (qp->sq.ring.cons == e->head &&
	    !e->st[qp->sq.ring.cons & qp->sq.ring.mask].valid)
		return;
	if (!e->retries) {
		remu_count(qp->rdev, REMU_CNT_RETRY_EXCEEDED);
		remu_comp_fail(qp, IB_WC_RETRY_EXC_ERR);
		return;
	}
	e->retries--;
	remu_count(qp->rdev, REMU_CNT_COMP_RETRY);
	psn = remu_comp_resume_psn(qp);
	trace_remu_retransmit(qp, psn, REMU_RETX_TIMEOUT, e->retries);
	/* the timer's go-back stands on its own: no probe, no stale NAK */
	remu_comp_probe_stop(qp);
	remu_req_go_back(qp, psn);
	remu_comp_arm(qp);
}
