// SPDX-License-Identifier: GPL-2.0
/*
 * remu_comp.c - the completer: responses to an RC requester (ACK, NAK,
 * RNR NAK, READ response, atomic ACK) retire send WQEs in order, and the
 * retransmit/RNR timer; also remu_comp_wqe(), which every engine uses to
 * retire a send WQE.
 *
 * Owns: qp->eng.una (oldest unacknowledged PSN), the retry counters, the
 * timer and the probe timer, the round-trip estimate, the READ
 * out-of-order maps.  Nothing is believed that answers a
 * PSN no request used (at or after qp->eng.sent_end, which the requester
 * moves): such a response is dropped and counted (rcvd_bad_resp_psn), as
 * is a READ response whose length is not exactly its share of the READ
 * (rcvd_bad_resp_len).  An ACK with PSN P completes every
 * outstanding WQE whose last PSN is at or before P, in ring order,
 * stopping at a READ or atomic not finished.  READ responses and atomic
 * ACKs are matched by PSN to any outstanding READ/atomic (not only the
 * oldest): a READ response is placed in order, or up to REMU_RD_MAP
 * responses beyond the first missing one (noted in its map); a READ or
 * atomic is finished when all its responses are placed, and completes in
 * ring order.  A response also implicitly ACKs the WQEs before its READ.
 * Lost responses are asked for again (remu_req_ask_again(), the READ
 * resent for the missing range only, once per gap) when enough responses
 * came after the gap (REMU_RD_GAP_THRESH, so reordering is not taken for
 * loss), its last response came, or an ACK or response of a later request
 * did; else the timer recovers them.  A NAK completes the WQEs before its
 * PSN (a NAK before una is stale and ignored), then: a sequence error goes
 * back to that PSN (unless it is a stale echo of the previous go-back: a
 * NAK for a PSN resent since, sooner than the least round trip measured
 * after that go-back), and arms the probe timer, which goes back again if
 * the hole is still unfilled after about two smoothed round trips (the
 * responder NAKs a gap once, so a lost resend of the hole is otherwise
 * found by the timer only; round trips are timed from AckReq packets to
 * their ACKs, never across a resend), an RNR NAK waits for the RNR timer
 * and goes back, anything else completes the WQE with its error status and
 * moves the QP to ERR (the rest is flushed).  The timer (the QP's timeout,
 * at least 10 ms; none when it is 0) goes back to una, or to the first
 * missing response of the oldest READ/atomic, retry_cnt times.  Progress
 * restarts it and refills the retry counts; a READ response, even a stale
 * one (a replay), only restarts it; a stale or duplicate ACK does neither.
 * An expiry that a restart overtook before the work item ran is ignored.
 *
 * Runs only in the engines' owner (remu_eng_run()); SQ slots are consumed under
 * qp->sq.cons_lock, with the CQE written under it so completions stay in
 * ring order with the flush.
 */
#include "remu_qp.h"
#include "remu_mr.h"
#include "remu_trace.h"

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

/* remu_comp_read_resp(): the response was not placed (counted) */
#define REMU_COMP_DROPPED	(-1)

/*
 * READ response @skb, response number @k of READ @sw (ring index @idx):
 * place it (in order, or up to REMU_RD_MAP ahead of the first missing).
 * Return: 0 (placed), REMU_COMP_DROPPED (not placed, counted; the QP goes
 * on), or the IB_WC_* status to fail the QP with.
 */
static int remu_comp_read_resp(struct remu_qp *qp, u32 idx,
			       struct remu_swqe *sw, struct sk_buff *skb,
			       u32 k)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_rd_map *m = remu_swqe_map(e, sw);
	struct remu_skb_cb *cb = remu_cb(skb);
	struct remu_send_wqe *w = remu_req_copy(qp, idx);
	int err = 0;

	/*
	 * Response k carries exactly its share of the READ (every one but
	 * the last a full MTU), and the READ's last one ends a response
	 * (LAST or ONLY; an earlier one may too: the answer to a READ
	 * asked again for a range ends where that range does).  Anything
	 * else would leave a hole or spill past the WQE: dropped.
	 */
	if (cb->paylen != min_t(u64, e->mtu, sw->len - (u64)k * e->mtu) ||
	    (k == sw->npkts - 1 &&
	     !(remu_opcode[cb->opcode].flags & REMU_OP_LAST))) {
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_LEN);
		return REMU_COMP_DROPPED;
	}
	if (k < sw->rcvd) {
		remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
		return REMU_COMP_DROPPED;
	}
	if (k > sw->rcvd) {
		if (!m || k >= sw->rcvd + REMU_RD_MAP) {
			remu_count(qp->rdev, REMU_CNT_RCVD_RESP_AHEAD);
			if (m)
				m->beyond = true;
			remu_comp_read_gap(qp, idx, sw);
			return REMU_COMP_DROPPED;
		}
		if (test_bit(k % REMU_RD_MAP, m->bits)) {
			remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
			return REMU_COMP_DROPPED;
		}
	}
	/* straight from the skb, linear part and page frags alike */
	if (cb->paylen)
		err = remu_sge_copy_skb(&(struct remu_sgl){
				.rdev = qp->rdev, .pd = to_remu_pd(qp->ib_qp.pd),
				.sges = (struct remu_sge *)(w + 1),
				.num = w->num_sge,
				.access = IB_ACCESS_LOCAL_WRITE,
			}, (u64)k * e->mtu, skb, cb->hdr_len, cb->paylen,
			REMU_TO_MR);
	if (err)
		return err == -EMSGSIZE ? IB_WC_LOC_LEN_ERR :
					  IB_WC_LOC_PROT_ERR;
	if (m && k == sw->npkts - 1)
		m->seen_last = true;
	if (k > sw->rcvd) {
		set_bit(k % REMU_RD_MAP, m->bits);
		m->nset++;
		remu_comp_read_gap(qp, idx, sw);
		return 0;
	}
	/* in order: move over what was placed ahead */
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
	return 0;
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

static void remu_comp_nak(struct remu_qp *qp, u32 psn, u8 syn)
{
	struct remu_qp_eng *e = &qp->eng;
	bool stale;

	/*
	 * A NAK acknowledges everything before its PSN; one for a PSN
	 * before una is stale (duplicated, or overtaken by a later ACK):
	 * acting on it would resend what has arrived.
	 */
	if (remu_psn_before(psn, e->una)) {
		remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
		return;
	}
	/*
	 * So is a sequence NAK for a PSN the requester has sent again since
	 * it last went back, if it comes sooner than a round trip after
	 * that go-back: the packet that made the responder NAK was sent
	 * before the resend (a packet sent after it cannot be answered yet),
	 * so the resend is still on its way, and going back once more would
	 * send the whole window a third time.  If the resend was lost after
	 * all, the probe timer finds the hole unfilled and goes back.
	 */
	stale = syn == REMU_AETH_NAK_PSN_SEQ_ERR && e->probing &&
		e->rtt_min_us && !remu_psn_before(psn, e->gb_psn) &&
		remu_psn_before(psn, e->psn) &&
		ktime_get_ns() - e->gb_t < (u64)e->rtt_min_us * NSEC_PER_USEC;
	remu_comp_rtt_end(qp, (psn - 1) & REMU_PSN_MASK);
	remu_comp_upto(qp, psn, false);
	remu_comp_progress(qp, psn, false);
	if ((syn & REMU_AETH_TYPE_MASK) == REMU_AETH_RNR_NAK) {
		remu_count(qp->rdev, REMU_CNT_SND_RNR);
		if (e->rnr_left != 7) {
			if (!e->rnr_left) {
				trace_remu_rnr(qp, psn, REMU_RNR_EXCEEDED,
					       remu_rnr_usecs(syn), 0);
				remu_count(qp->rdev,
					   REMU_CNT_RNR_RETRY_EXCEEDED);
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
		mod_timer(&e->timer, jiffies +
			  usecs_to_jiffies(remu_rnr_usecs(syn)));
		return;
	}
	if (syn == REMU_AETH_NAK_PSN_SEQ_ERR) {
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
		return;
	}
	remu_comp_fail(qp, remu_nak_status(syn));
}

void remu_comp_pkt(struct remu_qp *qp, struct sk_buff *skb)
{
	struct remu_skb_cb *cb = remu_cb(skb);
	const struct remu_opcode_info *info = &remu_opcode[cb->opcode];
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	struct remu_aeth *aeth = remu_pkt_hdr_of(skb, info, REMU_HDR_AETH);
	u32 psn = cb->psn, idx;
	u8 syn = aeth ? remu_aeth_syndrome(aeth) : 0;
	struct remu_send_wqe *w;
	struct remu_swqe *sw;
	bool dropped = false;
	int status;

	if (qp->ib_qp.qp_type != IB_QPT_RC) {
		remu_count(qp->rdev, REMU_CNT_RCVD_NO_QP);
		goto drop;
	}
	/*
	 * Nothing this QP sent is answered at or after sent_end: such an
	 * ACK, NAK or response is forged or broken, and believing it would
	 * complete WQEs whose data never left, or fail the QP.
	 */
	if (!remu_psn_before(psn, e->sent_end)) {
		remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_PSN);
		goto drop;
	}
	if (aeth && (syn & REMU_AETH_TYPE_MASK) != REMU_AETH_ACK) {
		remu_comp_nak(qp, psn, syn);
		goto done;
	}
	if (cb->opcode == IB_OPCODE_RC_ACKNOWLEDGE) {
		remu_comp_rtt_end(qp, psn);
		remu_comp_progress(qp, psn + 1,
				   remu_comp_upto(qp, psn, true) > 0);
		sw = &e->st[q->cons & q->mask];
		/* an ACK of a request after a READ/atomic still waiting */
		if (q->cons != e->head && sw->valid && sw->rd &&
		    sw->rcvd < sw->npkts &&
		    !remu_psn_before(psn, sw->first_psn + sw->npkts))
			remu_comp_ask_again(qp, q->cons);
		goto done;
	}

	/* READ response or atomic ACK: implicitly ACKs what came before */
	remu_comp_upto(qp, psn, false);
	sw = remu_comp_find_rd(qp, psn, &idx);
	if (!sw) {
		/*
		 * Stale: a READ the responder replays after this side had
		 * all of it (a PSN already sent; one never sent is bogus).
		 * It answers in order, so what is outstanding waits behind
		 * the replay: its responses restart the timer (no retry
		 * count is refilled).  Otherwise a replay longer than the
		 * timeout (1 MiB on a slow kernel) has the request behind it
		 * time out again and again, and each resend queues one more
		 * replay in front of it.
		 */
		if (!(info->flags & REMU_OP_ATOMIC) &&
		    remu_psn_before(psn, e->psn))
			remu_comp_arm(qp);
		remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
		goto drop;
	}
	w = remu_req_copy(qp, idx);
	if (info->flags & REMU_OP_ATOMIC) {
		struct remu_atmack *ack = remu_pkt_hdr_of(skb, info,
							  REMU_HDR_ATMACK);
		__u64 orig = remu_atmack_orig(ack);

		if (!remu_is_atomic(w->opcode)) {
			remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_OP);
			goto drop;
		}
		if (sw->rcvd) {
			remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
			goto drop;
		}
		if (remu_sge_copy(&(struct remu_sgl){
				qp->rdev, to_remu_pd(qp->ib_qp.pd),
				(struct remu_sge *)(w + 1), w->num_sge,
				IB_ACCESS_LOCAL_WRITE,
			}, 0, &orig, 8, REMU_TO_MR)) {
			remu_comp_fail(qp, IB_WC_LOC_PROT_ERR);
			goto drop;
		}
		sw->rcvd = 1;
		remu_comp_progress(qp, psn + 1, true);
	} else if (remu_is_empty_rd(w->opcode)) {
		/* FLUSH, ATOMIC_WRITE: done; their answer is one empty ONLY */
		if (cb->opcode != IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY ||
		    cb->paylen) {
			remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_LEN);
			goto drop;
		}
		if (sw->rcvd) {
			remu_count(qp->rdev, REMU_CNT_RCVD_DUP_RESP);
			goto drop;
		}
		sw->rcvd = 1;
		remu_comp_progress(qp, psn + 1, true);
	} else {
		if (w->opcode != IB_UVERBS_WR_RDMA_READ) {
			remu_count(qp->rdev, REMU_CNT_RCVD_BAD_RESP_OP);
			goto drop;
		}
		status = remu_comp_read_resp(qp, idx, sw, skb,
					     remu_psn_diff(psn, sw->first_psn));
		if (status > 0) {
			remu_comp_fail(qp, status);
			goto drop;
		}
		dropped = status == REMU_COMP_DROPPED;
	}
	if (idx != q->cons)
		remu_comp_later(qp);
	/* finished in order, with the WQEs after them an ACK covered */
	remu_comp_upto(qp, e->una, false);
	remu_comp_arm(qp);
	if (dropped)
		goto drop;
done:
	/* processed: consume_skb, so that the drop tracepoint sees drops only */
	consume_skb(skb);
	return;
drop:
	kfree_skb(skb);
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
