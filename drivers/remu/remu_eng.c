// SPDX-License-Identifier: GPL-2.0
/*
 * remu_eng.c - scheduling of a QP's engines (remu_eng.h): who runs them,
 * when, and for how long.
 *
 * Owns: the round (remu_eng_run(): the next responses of the READ in
 * progress, queued packets to the completer and responder, the timers,
 * then the requester; in ERR the flush) and its budget, which READ
 * responses take too, so a run is bounded whatever a peer asks for;
 * ownership of the engines (the RUNNING bit of eng.run); the two
 * owners: the QP's work item, and in RTS the process that rings the
 * doorbell (remu_eng_doorbell(): no queueing, wake-up and context switch
 * per message), which hands over to the work item outside RTS, when its
 * PD has an MR that may fault (remu_eng_inline_ok()) or when the budget is
 * spent; the timers, which queue the work (the pacer's: remu_pace.c);
 * the engines' life cycle: init,
 * the sets modify_qp makes (remu_eng_alloc(), remu_eng_set()) and the
 * owner takes (remu_eng_take()), state changes and the RESET mark,
 * waiting for the owner (remu_eng_wait_run()) and fini.
 *
 * Locking: the engines' state needs no lock: one owner at a time per QP,
 * taken with test_and_set_bit() (remu_eng_own() has the barrier
 * argument).  modify_qp calls in under qp->mutex, which an owner may take
 * itself (an error completion): nothing under it waits for the owner.
 * Owners run in process context and may sleep; the doorbell's caller is
 * under the uverbs SRCU read lock only.  The receive softirq only queues
 * packets and kicks (remu_eng_kick()).  To stop the engines, wait for the
 * owner, not only the work: remu_eng_wait_run(), remu_eng_fini().
 */
#include "remu_qp.h"

/* bits of remu_qp_eng.run */
enum {
	REMU_ENG_RUNNING,
	REMU_ENG_AGAIN,
	REMU_ENG_RESET,		/* modify_qp moved the QP to RESET */
};

/* bits of remu_qp_eng.timed_out: which timer fired */
enum {
	REMU_ENG_TIMEOUT,	/* the retransmit / RNR timer */
	REMU_ENG_PROBE,		/* the probe timer */
};

/* rounds and packets one run may take before it hands over to the work */
#define REMU_ENG_BUDGET		256

static void remu_eng_timer(struct timer_list *t)
{
	struct remu_qp *qp = from_timer(qp, t, eng.timer);

	set_bit(REMU_ENG_TIMEOUT, &qp->eng.timed_out);
	queue_work(remu_wq, &qp->send_work);
}

static void remu_eng_ptimer(struct timer_list *t)
{
	struct remu_qp *qp = from_timer(qp, t, eng.ptimer);

	set_bit(REMU_ENG_PROBE, &qp->eng.timed_out);
	queue_work(remu_wq, &qp->send_work);
}

int remu_eng_init(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	/* a process's QP: charged to its memory cgroup, as its rings */
	gfp_t gfp = qp->is_user ? GFP_KERNEL_ACCOUNT : GFP_KERNEL;

	skb_queue_head_init(&e->rxq);
	timer_setup(&e->timer, remu_eng_timer, 0);
	timer_setup(&e->ptimer, remu_eng_ptimer, 0);
	remu_pace_init(qp);
	/* every transport: remu_req_av() (RC/UC) uses it, destroy frees it */
	if (dst_cache_init(&e->dst_cache, gfp))
		return -ENOMEM;
	e->st = kvcalloc(qp->sq.ring.num_slots, sizeof(*e->st), gfp);
	e->copy = kvcalloc(qp->sq.ring.num_slots, qp->sq.ring.slot_size, gfp);
	if (!qp->is_user)
		e->kreg = kvcalloc(qp->sq.ring.num_slots, sizeof(*e->kreg),
				   GFP_KERNEL);
	/* RC's responder resources and READ maps: remu_eng_alloc() */
	if (remu_qp_type(qp) == IB_QPT_UD)
		e->uav = kvcalloc(qp->sq.ring.num_slots, sizeof(*e->uav), gfp);
	if (!e->st || !e->copy || (!qp->is_user && !e->kreg) ||
	    (remu_qp_type(qp) == IB_QPT_UD && !e->uav)) {
		kvfree(e->st);
		kvfree(e->copy);
		kvfree(e->kreg);
		kvfree(e->uav);
		dst_cache_destroy(&e->dst_cache);
		e->kreg = NULL;
		e->uav = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* after every lookup is gone: stop the timer and the work, drop packets */
void remu_eng_fini(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;

	timer_shutdown_sync(&e->timer);
	timer_shutdown_sync(&e->ptimer);
	/* no run arms the pacer's timer after this (remu_pace_hold()) */
	WRITE_ONCE(e->pace.stopped, true);
	/*
	 * No doorbell can start any more (uverbs destroys a QP only when no
	 * command uses it); wait for those in flight to let go of the
	 * engines and to queue what they leave, then for the work item.
	 */
	wait_var_event(&e->inl, !atomic_read(&e->inl));
	cancel_work_sync(&qp->send_work);
	/* a timer a run armed before, and the work it queued since */
	remu_pace_fini(qp);
	skb_queue_purge(&e->rxq);
	kvfree(e->st);
	kvfree(e->copy);
	kvfree(e->kreg);
	kfree(e->maps);
	kfree(e->maps_new);
	kfree(e->res);
	kfree(e->res_new);
	kvfree(e->uav);
	dst_cache_destroy(&e->dst_cache);
}

static bool remu_state_live(int s)
{
	return s >= IB_QPS_RTR && s <= IB_QPS_SQD;
}

/**
 * remu_eng_alloc - what the engines of an RC QP need for a modify_qp
 * @qp: the QP
 * @c: the modify_qp
 * @n: set to the new sets, or to NULLs where none is needed
 *
 * The responder resources: entering RTR, an empty set of
 * max_dest_rd_atomic entries (at least one; at most REMU_MAX_RD_ATOMIC,
 * remu_qp_check_attr()); a change of max_dest_rd_atomic past RTR
 * (SQD -> SQD), a set that keeps the newest entries.  The READ response
 * maps: on RTR -> RTS or a change of max_rd_atomic past RTR,
 * min(max_rd_atomic, REMU_RD_MAPS) of them (at least one).  Called under
 * qp->mutex before anything of the QP changes, so that a failure leaves
 * the QP as it was.
 *
 * Return: 0 or -ENOMEM (nothing allocated).
 */
int remu_eng_alloc(struct remu_qp *qp, const struct remu_qp_change *c,
		   struct remu_eng_new *n)
{
	bool live = remu_state_live(c->cur) && remu_state_live(c->next);
	bool fresh = c->next == IB_QPS_RTR && c->cur != IB_QPS_RTR;
	const struct ib_qp_attr *attr = c->attr;
	int mask = c->mask;
	gfp_t gfp = qp->is_user ? GFP_KERNEL_ACCOUNT : GFP_KERNEL;
	u32 k;

	lockdep_assert_held(&qp->mutex);
	memset(n, 0, sizeof(*n));
	if (qp->ib_qp.qp_type != IB_QPT_RC)
		return 0;
	if (fresh || (live && (mask & IB_QP_MAX_DEST_RD_ATOMIC))) {
		k = (mask & IB_QP_MAX_DEST_RD_ATOMIC) ?
		    attr->max_dest_rd_atomic : qp->attr.max_dest_rd_atomic;
		k = clamp_t(u32, k, 1, REMU_MAX_RD_ATOMIC);
		n->res = kzalloc(struct_size(n->res, r, k), gfp);
		if (!n->res)
			return -ENOMEM;
		n->res->n = k;
		n->res->carry = !fresh;
	}
	if ((c->cur == IB_QPS_RTR && c->next == IB_QPS_RTS) ||
	    (live && (mask & IB_QP_MAX_QP_RD_ATOMIC))) {
		k = (mask & IB_QP_MAX_QP_RD_ATOMIC) ? attr->max_rd_atomic :
						      qp->attr.max_rd_atomic;
		k = clamp_t(u32, k, 1, REMU_RD_MAPS);
		n->maps = kzalloc(struct_size(n->maps, m, k), gfp);
		if (!n->maps) {
			kfree(n->res);
			n->res = NULL;
			return -ENOMEM;
		}
		n->maps->n = k;
	}
	return 0;
}

/*
 * remu_eng_set - hand the sets of remu_eng_alloc() to the work item, once
 * the modify_qp cannot fail any more; under qp->mutex.  Only modify_qp
 * adds a set and the work item only takes one (remu_eng_take()), so a set
 * made before and still there was never used: it is freed (and if it was
 * a responder set to start empty, so is the new one).
 */
void remu_eng_set(struct remu_qp *qp, struct remu_eng_new *n)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_rd_res_set *old_res;

	lockdep_assert_held(&qp->mutex);
	if (n->res) {
		old_res = xchg(&e->res_new, NULL);
		if (old_res && !old_res->carry)
			n->res->carry = false;
		kfree(old_res);
		/* the set is filled: pairs with the xchg() of remu_eng_take() */
		smp_store_release(&e->res_new, n->res);
	}
	if (n->maps) {
		kfree(xchg(&e->maps_new, NULL));
		/* likewise: pairs with the xchg() of remu_eng_take() */
		smp_store_release(&e->maps_new, n->maps);
	}
}

/*
 * The work item, before it looks at a packet or a WQE: take the sets that
 * modify_qp made and free the old ones, which nothing else reads.  The
 * responder resources before a change of their number stay for a
 * duplicate until overwritten, as in a ring that grew or shrank.  New
 * maps wait until no READ holds a map beyond their end.
 */
static void remu_eng_take(struct remu_qp_eng *e)
{
	struct remu_rd_res_set *s, *old;
	struct remu_rd_map_set *m, *old_m;
	u32 i, k;

	if (READ_ONCE(e->res_new)) {
		s = xchg(&e->res_new, NULL);
		old = e->res;
		if (s->carry && old) {
			/* the newest min(old->n, s->n), oldest first */
			k = min(old->n, s->n);
			for (i = 0; i < k; i++)
				s->r[i] = old->r[(old->next + old->n - k + i) %
						 old->n];
			s->next = k % s->n;
		}
		e->res = s;
		kfree(old);
	}
	if (READ_ONCE(e->maps_new)) {
		m = xchg(&e->maps_new, NULL);
		if (e->rdmap_used >> m->n) {
			/* not yet; unless modify_qp made another meanwhile */
			if (cmpxchg(&e->maps_new, NULL, m))
				kfree(m);
			return;
		}
		old_m = e->maps;
		if (old_m)
			memcpy(m->m, old_m->m,
			       min(old_m->n, m->n) * sizeof(m->m[0]));
		e->maps = m;
		kfree(old_m);
	}
}

/*
 * Ownership of the engines.  The work item and the doorbell's caller both
 * run them, one at a time: RUNNING is taken with test_and_set_bit().
 * Whoever finds it taken sets AGAIN and leaves; the owner looks at AGAIN
 * after each round and goes round again, and when it lets go
 * (remu_eng_release()) it clears RUNNING, then looks at AGAIN once more
 * and queues the work if it is set.  Each side has a full barrier
 * between its two steps (set AGAIN, read RUNNING / clear RUNNING, read
 * AGAIN), so at least one of them sees the other's write: either the
 * owner sees AGAIN (and goes round, or queues the work), or the one that
 * set it sees RUNNING clear and tries to take it again.  Whatever the one
 * that set AGAIN published before (a WQE and the producer index, a
 * packet on rxq, a timer's bit) is ordered before AGAIN by the barrier
 * before it, and the owner reads it after clearing AGAIN (barrier after),
 * so a round that starts after the owner saw AGAIN sees it too.
 *
 * Return: true if the caller owns the engines now.
 */
static bool remu_eng_own(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;

	for (;;) {
		/* fully ordered when it sets the bit: taken like a lock */
		if (!test_and_set_bit(REMU_ENG_RUNNING, &e->run))
			return true;
		/*
		 * What the caller published is visible before AGAIN: pairs
		 * with the barrier after the owner clears it (remu_eng_round())
		 */
		smp_mb__before_atomic();
		set_bit(REMU_ENG_AGAIN, &e->run);
		/* pairs with remu_eng_release(): AGAIN set before RUNNING read */
		smp_mb__after_atomic();
		if (test_bit(REMU_ENG_RUNNING, &e->run))
			return false;
		/* the owner let go meanwhile: try to take it ourselves */
	}
}

/*
 * Let go of the engines.  @more: work is left over (budget spent, or the
 * caller handed the rest to the work item).  A waiter of
 * remu_eng_wait_run() is told through eng.gen.
 */
static void remu_eng_release(struct remu_qp *qp, bool more)
{
	struct remu_qp_eng *e = &qp->eng;

	WRITE_ONCE(e->gen, e->gen + 1);
	/*
	 * Everything the round wrote is visible before RUNNING clears: pairs
	 * with the next owner's test_and_set_bit() in remu_eng_own()
	 */
	smp_mb__before_atomic();
	clear_bit(REMU_ENG_RUNNING, &e->run);
	/* pairs with remu_eng_own(): RUNNING clear before AGAIN is read */
	smp_mb__after_atomic();
	wake_up_var(&e->run);
	if (more || test_bit(REMU_ENG_AGAIN, &e->run))
		queue_work(remu_wq, &qp->send_work);
}

/*
 * RESET: forget everything in flight.  Only the engines' owner may touch
 * what it clears: remu_eng_run() calls it at the top of a round when
 * modify_qp asked for it (REMU_ENG_RESET, remu_eng_reset_mark()).
 */
static void remu_eng_reset(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;

	del_timer(&e->timer);
	del_timer(&e->ptimer);
	remu_pace_reset(qp);
	clear_bit(REMU_ENG_TIMEOUT, &e->timed_out);
	clear_bit(REMU_ENG_PROBE, &e->timed_out);
	e->probing = false;
	e->areq = false;
	/* the next connection may take another path: measure it anew */
	e->rtt_t = 0;
	e->srtt_us = 0;
	e->rtt_min_us = 0;
	skb_queue_purge(&e->rxq);
	memset(e->st, 0, qp->sq.ring.num_slots * sizeof(*e->st));
	e->rd_out = 0;
	e->rdmap_used = 0;
	e->rnr_wait = false;
	e->nak_sent = false;
	e->in_send = false;
	e->in_write = false;
	e->have_rwqe = false;
	e->roff = 0;
	remu_resp_read_stop(qp);
}

/* the owner: the reset modify_qp asked for, if it is still to be done */
static void remu_eng_reset_pending(struct remu_qp *qp)
{
	if (test_and_clear_bit(REMU_ENG_RESET, &qp->eng.run))
		remu_eng_reset(qp);
}

/*
 * modify_qp to RESET, under qp->mutex: the engines' state is the owner's,
 * and modify_qp cannot wait for the owner here (an owner that meets a
 * completion error takes qp->mutex, remu_qp_error_begin()).  So it marks
 * the reset and does it at once if it can take ownership; if someone
 * owns the engines, remu_eng_own() set AGAIN, the owner goes round again
 * and does the reset at the top of that round, before it looks at the
 * state.  Until then the owner only finishes the round it is in, in which
 * the QP's new state stops the requester and drops arriving packets.
 */
static void remu_eng_reset_mark(struct remu_qp *qp)
{
	lockdep_assert_held(&qp->mutex);
	set_bit(REMU_ENG_RESET, &qp->eng.run);
	if (!remu_eng_own(qp))
		return;
	remu_eng_reset_pending(qp);
	remu_eng_release(qp, false);
}

/*
 * The path MTU, which both the requester (segmentation) and the responder
 * (READ responses, from RTR on) use: the QP's path_mtu, or for UD the
 * port's active MTU.
 */
static void remu_eng_set_mtu(struct remu_qp *qp)
{
	/* under qp->mutex: not ib_query_port(), which takes rtnl */
	int m = remu_qp_type(qp) != IB_QPT_UD ? qp->attr.path_mtu :
		remu_port_active_mtu(&qp->rdev->ib_dev);

	lockdep_assert_held(&qp->mutex);
	qp->eng.mtu = m > 0 ? ib_mtu_enum_to_int(m) : 256;
}

/*
 * modify_qp, under qp->mutex, once the new state @next is set (@cur the
 * state before).  The send PSN is taken from sq_psn only on RTR->RTS:
 * RTS->RTS and SQD->RTS keep the PSN stream going.
 */
void remu_eng_modify(struct remu_qp *qp, int cur, int next)
{
	struct remu_qp_eng *e = &qp->eng;

	lockdep_assert_held(&qp->mutex);
	switch (next) {
	case IB_QPS_RESET:
		/* the rate limit goes with the state (remu_pace_clear()) */
		remu_pace_clear(qp);
		remu_eng_reset_mark(qp);
		break;
	case IB_QPS_RTR:
		e->rpsn = qp->attr.rq_psn;
		e->msn = 0;
		e->comm_est = false;
		/* RC: the responder resources start empty (remu_eng_set()) */
		remu_eng_set_mtu(qp);
		break;
	case IB_QPS_RTS:
		remu_eng_set_mtu(qp);
		if (cur == IB_QPS_RTR) {
			e->psn = qp->attr.sq_psn;
			e->sent_end = e->psn;
			e->una = e->psn;
			e->head = qp->sq.ring.cons;
		}
		e->retries = qp->attr.retry_cnt;
		e->rnr_left = qp->attr.rnr_retry;
		break;
	case IB_QPS_ERR:
		del_timer(&e->timer);
		del_timer(&e->ptimer);
		remu_pace_clear(qp);
		break;
	default:
		break;
	}
}

/*
 * May the doorbell's caller run the engines of @qp?  Not once its PD has
 * an MR that may have to fault (ODP, dma-buf): a fault sleeps for as long
 * as the backing takes and must not be served in the caller's context
 * (its signals, its time).  pd->may_fault is set before such an MR gets
 * a key, so whatever names the MR (a WQE posted after its registration,
 * a request carrying its rkey) reaches the engines after the flag; it is
 * read again for each WQE and packet (remu_req_run(), remu_eng_run()).
 */
bool remu_eng_inline_ok(struct remu_qp *qp)
{
	return !READ_ONCE(to_remu_pd(qp->ib_qp.pd)->may_fault);
}

/* how a round of remu_eng_run() ended */
enum remu_eng_round {
	REMU_ROUND_DONE,	/* another if someone set AGAIN meanwhile */
	REMU_ROUND_IDLE,	/* the QP's state runs no engine */
	REMU_ROUND_HANDOFF,	/* the rest is the work item's (@caller) */
};

/*
 * The next responses of the READ in progress (remu_resp_read_more()),
 * then the packets queued on eng.rxq, to the completer (responses) or
 * the responder (requests), each taking one of @budget.  While a READ
 * is in progress, the first request that must wait for it
 * (remu_resp_read_waits()) stops the loop, in its place at the head of
 * the queue.  Return: false if the doorbell's caller must hand the rest
 * to the work item.
 */
static bool remu_eng_rx(struct remu_qp *qp, bool caller, int *budget)
{
	struct remu_qp_eng *e = &qp->eng;
	struct sk_buff *skb;
	enum ib_qp_state s;

	if (e->rd.active && remu_state_live(READ_ONCE(qp->state))) {
		if (caller && !remu_eng_inline_ok(qp))
			return false;
		remu_resp_read_more(qp, budget);
	}
	while (*budget > 0 && (skb = skb_dequeue(&e->rxq))) {
		s = READ_ONCE(qp->state);
		if (caller && !remu_eng_inline_ok(qp)) {
			/* the work item takes it from here, in order */
			skb_queue_head(&e->rxq, skb);
			return false;
		}
		if (remu_resp_read_waits(qp, skb)) {
			/* after the READ's last response, next round on */
			skb_queue_head(&e->rxq, skb);
			break;
		}
		(*budget)--;
		if (s == IB_QPS_ERR || s == IB_QPS_RESET) {
			/* the QP stopped receiving since remu_rcv() */
			remu_count(qp->rdev, REMU_CNT_RCVD_NO_QP);
			kfree_skb(skb);
			continue;
		}
		if (remu_opcode[remu_cb(skb)->opcode].flags & REMU_OP_RESP)
			remu_comp_pkt(qp, skb);
		else
			remu_resp_pkt(qp, skb);
	}
	return true;
}

/*
 * One round, taking one of @budget: the reset modify_qp asked for, then by
 * the QP's state the flush (ERR), or the sets modify_qp made, the queued
 * packets, the timers and the requester (RTR to SQD).
 */
static enum remu_eng_round remu_eng_round(struct remu_qp *qp, bool caller,
					  int *budget)
{
	struct remu_qp_eng *e = &qp->eng;
	enum ib_qp_state s;

	(*budget)--;
	clear_bit(REMU_ENG_AGAIN, &e->run);
	/*
	 * Pairs with the barrier before AGAIN is set (remu_eng_kick(),
	 * remu_eng_own()): what was published before it is seen below.
	 */
	smp_mb__after_atomic();
	/* a modify_qp to RESET while someone else owned the engines */
	remu_eng_reset_pending(qp);
	s = READ_ONCE(qp->state);
	if (caller && (s != IB_QPS_RTS || !remu_eng_inline_ok(qp)))
		return REMU_ROUND_HANDOFF;
	if (s == IB_QPS_ERR)
		remu_qp_err_work(qp);
	if (!remu_state_live(s)) {
		/* a READ in progress ends with the responder */
		remu_resp_read_stop(qp);
		return REMU_ROUND_IDLE;
	}
	remu_eng_take(e);
	if (!remu_eng_rx(qp, caller, budget))
		return REMU_ROUND_HANDOFF;
	if (test_and_clear_bit(REMU_ENG_TIMEOUT, &e->timed_out))
		remu_comp_timeout(qp);
	if (test_and_clear_bit(REMU_ENG_PROBE, &e->timed_out))
		remu_comp_probe(qp);
	if (READ_ONCE(qp->state) == IB_QPS_RTS && !remu_req_run(qp, caller))
		return REMU_ROUND_HANDOFF;
	return REMU_ROUND_DONE;
}

/*
 * The engines: rounds of remu_eng_round() as long as someone set AGAIN
 * while one ran (remu_eng_kick(), the doorbell, a timer) or a READ's
 * responses are left to send (eng.rd), within the budget (each round,
 * each packet taken and each READ response sent take one): one work item
 * run, wake-up and context switch less each time.  So a run is bounded
 * whatever a peer asks for, and so is what remu_eng_wait_run() and
 * remu_eng_fini() wait for: a READ of 2 GiB goes on over many runs.
 *
 * @caller: the doorbell's caller runs them (remu_eng_doorbell()): only
 * while the QP is in RTS and remu_eng_inline_ok(); anything else (another
 * state, an MR that may fault, the budget spent) is handed to the work
 * item, which the release queues.
 */
void remu_eng_run(struct remu_qp *qp, bool caller)
{
	int budget = REMU_ENG_BUDGET;
	enum remu_eng_round r;
	bool more;

	if (!remu_eng_own(qp))
		return;
	do {
		r = remu_eng_round(qp, caller, &budget);
	} while (r == REMU_ROUND_DONE && budget > 0 &&
		 (test_bit(REMU_ENG_AGAIN, &qp->eng.run) || qp->eng.rd.active));
	more = r == REMU_ROUND_HANDOFF ||
	       (r == REMU_ROUND_DONE && (!skb_queue_empty(&qp->eng.rxq) ||
					 qp->eng.rd.active));
	remu_eng_release(qp, more);
}

/**
 * remu_eng_doorbell - a process rang @qp's doorbell
 * @qp: the QP, in RTS when the caller looked
 *
 * Runs the engines here, in the caller's context, unless someone else
 * runs them (then they go round once more for this doorbell) or they may
 * not run here (remu_eng_inline_ok()): then the work item does.  The
 * call is counted in eng.inl until it has touched @qp for the last time,
 * for remu_eng_fini().
 *
 * Context: process context, may sleep (the engines take qp->mutex on a
 * completion error and the MR layer's mutexes); under the uverbs SRCU
 * read lock, not under RCU.
 */
void remu_eng_doorbell(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;

	atomic_inc(&e->inl);
	if (remu_eng_inline_ok(qp))
		remu_eng_run(qp, true);
	else
		queue_work(remu_wq, &qp->send_work);
	if (atomic_dec_and_test(&e->inl))
		wake_up_var(&e->inl);
}

/**
 * remu_eng_wait_run - wait for the engines' run in progress to end
 * @qp: the QP
 *
 * Whoever owns the engines when this is called (the work item or a
 * doorbell's caller) has finished its run when this returns, and so has
 * the work item queued at that time.  Runs that start later (a new
 * doorbell, a packet) are not waited for: the callers stop those first
 * if they must (remu_eng_fini()).
 *
 * Context: process context, may sleep; not from the engines themselves.
 */
void remu_eng_wait_run(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	unsigned long gen = READ_ONCE(e->gen);

	/* pairs with remu_eng_release(): gen read before RUNNING */
	smp_rmb();
	wait_var_event(&e->run, !test_bit(REMU_ENG_RUNNING, &e->run) ||
		       READ_ONCE(e->gen) != gen);
	flush_work(&qp->send_work);
}

/**
 * remu_eng_kick - a packet was queued on @qp's receive list
 * @qp: the QP
 *
 * Queues the QP's work, unless the engines are running: then it only
 * marks the packet (REMU_ENG_AGAIN) and their owner goes round once more
 * (remu_eng_own() explains the pairing).
 *
 * Context: any (softirq, or the sender's loopback path).
 */
void remu_eng_kick(struct remu_qp *qp)
{
	/*
	 * The packet is on the list before AGAIN says so: pairs with the
	 * barrier after the owner clears it (remu_eng_round())
	 */
	smp_mb__before_atomic();
	set_bit(REMU_ENG_AGAIN, &qp->eng.run);
	/* pairs with remu_eng_release(): AGAIN set before RUNNING is read */
	smp_mb__after_atomic();
	if (!test_bit(REMU_ENG_RUNNING, &qp->eng.run))
		queue_work(remu_wq, &qp->send_work);
}
