// SPDX-License-Identifier: GPL-2.0
/*
 * remu_req.c - the requester, and remu_eng_run(), which runs the three
 * engines in the QP's work item or the doorbell's caller.
 *
 * Owns: the SQ consumer side while the QP is in RTS: each send WQE is
 * copied out of the ring once (qp->eng.copy) before it is validated or
 * used, given its PSNs, segmented by the path MTU into request packets
 * (an RC payload of REMU_FRAG_MIN_PAYLOAD bytes or more in UMEM/ODP MRs
 * attached by reference as page frags, remu_sge_frag_skb(); any other
 * gathered with remu_sge_copy() or taken from the inline data) and sent
 * with remu_net_xmit().  A packet sent again is built again from the
 * MRs, as a NIC reads memory again for a retransmission.  RC WQEs stay in the ring (slot not
 * consumed) until the completer retires them; UC/UD WQEs retire as soon
 * as their last packet is sent.  RC sends stop at a window of
 * REMU_REQ_WINDOW unacknowledged packets and at max_rd_atomic
 * outstanding READs/atomics.  Every RC packet sent starts the retransmit
 * timer if it is not running (remu_comp_arm(); the completer owns it), so
 * a WQE the window stopped before its last packet is still covered.
 * Going back (remu_req_go_back()) resends
 * from a PSN; a READ is resent for the responses it still lacks only
 * (from PSN first + rcvd, address and length moved to match), a finished
 * READ/atomic is skipped.  LOCAL_INV, (kernel QPs only) REG_MR and (user
 * QPs only) BIND_MW send nothing: each runs when every WQE before it has
 * completed, through the MR layer (remu_key_invalidate(),
 * remu_mr_fast_reg(), remu_mw_bind()), and completes
 * at once, IB_WC_MW_BIND_ERR with the QP to ERR if the MR layer refuses.
 * A UD WQE's address vector is resolved when the WQE is posted
 * (remu_req_post_av(), from the doorbell or a kernel post_send), as a NIC
 * copies it into the WQE: the AH may be destroyed as soon as
 * ibv_post_send() returns; the requester stops at the first WQE posted
 * but not yet rung.
 *
 * The engines' owner (remu_eng_run(): the work item qp->send_work, or
 * the doorbell's caller in RTS, remu_eng_doorbell()) runs, in this order:
 * the completer and responder on every queued packet (qp->eng.rxq), the
 * completer's timer handling, then the requester.  One owner at a time
 * per QP (the RUNNING bit, remu_eng_own()): the engines' state in struct
 * remu_qp_eng needs no lock.  Ring slots are
 * consumed under the rings' cons_locks, never held across an MR copy.
 * RC's responder resources and READ response maps, sized by the QP's
 * max_dest_rd_atomic and max_rd_atomic, are made by modify_qp
 * (remu_eng_alloc(), under qp->mutex, before the QP changes: -ENOMEM
 * leaves it as it was) and passed to the work item through
 * eng.res_new/maps_new with xchg(); the work item takes them at the start
 * of each round (remu_eng_take()) and frees what they replace.
 */
#include <rdma/ib_cache.h>

#include "remu_qp.h"
#include "remu_mr.h"
#include "remu_net.h"

/* a UD WQE's destination, resolved at post time (remu_qp_eng.uav) */
struct remu_uav {
	struct remu_av av;
	int err;		/* the AH did not resolve: the WQE fails */
};

void *remu_req_copy(struct remu_qp *qp, u32 idx)
{
	return qp->eng.copy + (size_t)(idx & qp->sq.ring.mask) *
			      qp->sq.ring.slot_size;
}

static void remu_eng_timer(struct timer_list *t)
{
	struct remu_qp *qp = from_timer(qp, t, eng.timer);

	set_bit(0, &qp->eng.timed_out);
	queue_work(remu_wq, &qp->send_work);
}

static void remu_eng_ptimer(struct timer_list *t)
{
	struct remu_qp *qp = from_timer(qp, t, eng.ptimer);

	set_bit(1, &qp->eng.timed_out);
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

static bool remu_state_live(int s)
{
	return s >= IB_QPS_RTR && s <= IB_QPS_SQD;
}

/**
 * remu_eng_alloc - what the engines of an RC QP need for a modify_qp
 * @qp: the QP
 * @attr, @mask: the modify_qp's attributes, already checked
 * @cur, @next: the state before and after it
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
int remu_eng_alloc(struct remu_qp *qp, const struct ib_qp_attr *attr,
		   int mask, int cur, int next, struct remu_eng_new *n)
{
	bool live = remu_state_live(cur) && remu_state_live(next);
	bool fresh = next == IB_QPS_RTR && cur != IB_QPS_RTR;
	gfp_t gfp = qp->is_user ? GFP_KERNEL_ACCOUNT : GFP_KERNEL;
	u32 k;

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
	if ((cur == IB_QPS_RTR && next == IB_QPS_RTS) ||
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

	if (n->res) {
		old_res = xchg(&e->res_new, NULL);
		if (old_res && !old_res->carry)
			n->res->carry = false;
		kfree(old_res);
		/* pairs with the xchg() of remu_eng_take() */
		smp_store_release(&e->res_new, n->res);
	}
	if (n->maps) {
		kfree(xchg(&e->maps_new, NULL));
		/* likewise */
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

/* after every lookup is gone: stop the timer and the work, drop packets */
void remu_eng_fini(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;

	timer_shutdown_sync(&e->timer);
	timer_shutdown_sync(&e->ptimer);
	/*
	 * No doorbell can start any more (uverbs destroys a QP only when no
	 * command uses it); wait for those in flight to let go of the
	 * engines and to queue what they leave, then for the work item.
	 */
	wait_var_event(&e->inl, !atomic_read(&e->inl));
	cancel_work_sync(&qp->send_work);
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

/* bits of remu_qp_eng.run */
enum {
	REMU_ENG_RUNNING,
	REMU_ENG_AGAIN,
	REMU_ENG_RESET,		/* modify_qp moved the QP to RESET */
};

static bool remu_eng_own(struct remu_qp *qp);
static void remu_eng_release(struct remu_qp *qp, bool more);

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
	clear_bit(0, &e->timed_out);
	clear_bit(1, &e->timed_out);
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

	switch (next) {
	case IB_QPS_RESET:
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
		break;
	default:
		break;
	}
}

/*
 * The QP's address vector (RC/UC), into @avp (a struct remu_av), with the
 * QP's route cache.  Only the engines' owner calls this (and so uses the
 * cache): emptying the cache here, when the path has changed since it was
 * filled, cannot race with a lookup.
 */
int remu_req_av(struct remu_qp *qp, void *avp)
{
	struct rdma_ah_attr attr = qp->attr.ah_attr;
	struct remu_qp_eng *e = &qp->eng;
	struct remu_av *av = avp;
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

/* rounds and packets one run may take before it hands over to the work */
#define REMU_ENG_BUDGET		256

/*
 * May the doorbell's caller run the engines of @qp?  Not once its PD has
 * an MR that may have to fault (ODP, dma-buf): a fault sleeps for as long
 * as the backing takes and must not be served in the caller's context
 * (its signals, its time).  pd->may_fault is set before such an MR gets
 * a key, so whatever names the MR (a WQE posted after its registration,
 * a request carrying its rkey) reaches the engines after the flag; it is
 * read again for each WQE and packet (remu_req_run(), remu_eng_run()).
 */
static bool remu_eng_inline_ok(struct remu_qp *qp)
{
	return !READ_ONCE(to_remu_pd(qp->ib_qp.pd)->may_fault);
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
		/* what the caller published is visible before AGAIN */
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
	/* everything the round wrote is visible before RUNNING clears */
	smp_mb__before_atomic();
	clear_bit(REMU_ENG_RUNNING, &e->run);
	/* pairs with remu_eng_own(): RUNNING clear before AGAIN is read */
	smp_mb__after_atomic();
	wake_up_var(&e->run);
	if (more || test_bit(REMU_ENG_AGAIN, &e->run))
		queue_work(remu_wq, &qp->send_work);
}

/*
 * The engines: completer/responder on received packets, the timers, the
 * requester; or in ERR the flush of what was posted since
 * (remu_qp_err_work()).  It goes round again, within its budget (each
 * round and each packet take one), as long as someone set AGAIN while it
 * ran (remu_eng_kick(), the doorbell, a timer): one work item run,
 * wake-up and context switch less each time.
 *
 * @caller: the doorbell's caller runs them (remu_eng_doorbell()): only
 * while the QP is in RTS and remu_eng_inline_ok(); anything else (another
 * state, an MR that may fault, the budget spent) is handed to the work
 * item, which the release queues.
 */
void remu_eng_run(struct remu_qp *qp, bool caller)
{
	struct remu_qp_eng *e = &qp->eng;
	int budget = REMU_ENG_BUDGET;
	bool more = false, live;
	struct sk_buff *skb;
	enum ib_qp_state s;

	if (!remu_eng_own(qp))
		return;
again:
	budget--;
	clear_bit(REMU_ENG_AGAIN, &e->run);
	/* a packet kicked after this is seen below, or by the next round */
	smp_mb__after_atomic();
	/* a modify_qp to RESET while someone else owned the engines */
	remu_eng_reset_pending(qp);
	s = READ_ONCE(qp->state);
	if (caller && (s != IB_QPS_RTS || !remu_eng_inline_ok(qp))) {
		more = true;
		goto out;
	}
	live = s >= IB_QPS_RTR && s <= IB_QPS_SQD;
	if (s == IB_QPS_ERR)
		remu_qp_err_work(qp);
	if (!live)
		goto out;
	remu_eng_take(e);
	while (budget > 0 && (skb = skb_dequeue(&e->rxq))) {
		s = READ_ONCE(qp->state);
		if (caller && !remu_eng_inline_ok(qp)) {
			/* the work item takes it from here, in order */
			skb_queue_head(&e->rxq, skb);
			more = true;
			goto out;
		}
		budget--;
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
	if (test_and_clear_bit(0, &e->timed_out))
		remu_comp_timeout(qp);
	if (test_and_clear_bit(1, &e->timed_out))
		remu_comp_probe(qp);
	if (READ_ONCE(qp->state) == IB_QPS_RTS && !remu_req_run(qp, caller)) {
		more = true;
		goto out;
	}
	if (budget > 0 && test_bit(REMU_ENG_AGAIN, &e->run))
		goto again;
	more = !skb_queue_empty(&e->rxq);
out:
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
	/* the packet is on the list before AGAIN says so */
	smp_mb__before_atomic();
	set_bit(REMU_ENG_AGAIN, &qp->eng.run);
	/* pairs with remu_eng_release(): AGAIN set before RUNNING is read */
	smp_mb__after_atomic();
	if (!test_bit(REMU_ENG_RUNNING, &qp->eng.run))
		queue_work(remu_wq, &qp->send_work);
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

/*
 * Copy the WQE at @idx out of the ring and validate the copy.
 * Return: 0, or the IB_WC_* status to complete it with.
 */
static int remu_req_fetch(struct remu_qp *qp, u32 idx)
{
	struct remu_swqe *sw = &qp->eng.st[idx & qp->sq.ring.mask];
	struct remu_send_wqe *w = remu_req_copy(qp, idx);
	struct remu_sge *sge = (struct remu_sge *)(w + 1);
	enum ib_qp_type type = remu_qp_type(qp);
	unsigned long flags;
	u64 len = 0;
	u32 i;

	spin_lock_irqsave(&qp->sq.cons_lock, flags);
	memcpy(w, remu_queue_slot_at(&qp->sq.ring, idx), qp->sq.ring.slot_size);
	spin_unlock_irqrestore(&qp->sq.cons_lock, flags);

	memset(sw, 0, sizeof(*sw));
	sw->valid = true;
	sw->npkts = 1;
	if (!remu_req_op_ok(qp, w->opcode))
		return IB_WC_LOC_QP_OP_ERR;
	if (w->opcode == REMU_WR_UMR) {
		/* its entries are inline: remu_mkey_umr() reads them */
		if (!(w->flags & REMU_WQE_INLINE))
			return IB_WC_LOC_QP_OP_ERR;
		if (w->inline_len > qp->max_inline)
			return IB_WC_LOC_LEN_ERR;
		sw->len = 0;
		return 0;
	}
	if (w->flags & REMU_WQE_INLINE) {
		if (w->inline_len > qp->max_inline)
			return IB_WC_LOC_LEN_ERR;
		len = w->inline_len;
		if (remu_is_rd_atomic(w->opcode))
			return IB_WC_LOC_QP_OP_ERR;
	} else {
		if (w->num_sge > qp->sq.max_sge)
			return IB_WC_LOC_LEN_ERR;
		for (i = 0; i < w->num_sge; i++)
			len += sge[i].length;
	}
	if (len > 0x80000000ull)
		return IB_WC_LOC_LEN_ERR;
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
		if (type == IB_QPT_UD && len > qp->eng.mtu)
			return IB_WC_LOC_LEN_ERR;
		sw->npkts = max_t(u32, 1, DIV_ROUND_UP(len, qp->eng.mtu));
		break;
	}
	return 0;
}

/*
 * Build packet number @sw->sent of the WQE at @idx and send it; with
 * @by_ref its payload is attached as page frags of the MRs (-EOPNOTSUPP
 * or -E2BIG when it cannot be: the caller builds it again with a copy).
 */
static int remu_req_build_pkt(struct remu_qp *qp, u32 idx,
			      const struct remu_av *av, bool by_ref)
{
	struct remu_swqe *sw = &qp->eng.st[idx & qp->sq.ring.mask];
	struct remu_send_wqe *w = remu_req_copy(qp, idx);
	struct remu_dev *rdev = qp->rdev;
	enum ib_qp_type type = remu_qp_type(qp);
	bool first = sw->sent == 0, last, rd = remu_is_rd_atomic(w->opcode);
	bool ack_every, gb_first;
	u32 off = sw->sent * qp->eng.mtu, plen = 0, psn, qkey, roff = 0;
	u32 rlen = sw->len;
	struct remu_pkt pkt = {};
	struct sk_buff *skb;
	void *h;
	int op, err;

	last = rd || sw->sent + 1 == sw->npkts;
	op = remu_req_opcode(type, w->opcode, first, last);
	if (op < 0)
		return -EINVAL;
	if (!rd || w->opcode == IB_UVERBS_WR_ATOMIC_WRITE)
		plen = min(sw->len - off, qp->eng.mtu);
	psn = sw->first_psn + (rd ? 0 : sw->sent);
	if (w->opcode == IB_UVERBS_WR_RDMA_READ) {
		/*
		 * Sent again: ask only for the responses still missing
		 * first (IBA allows a resent READ to start at any PSN of the
		 * original, with its address and length moved to match).
		 */
		roff = sw->rcvd * qp->eng.mtu;
		rlen = min_t(u64, (u64)remu_swqe_read_end(&qp->eng, sw) *
			     qp->eng.mtu, sw->len) - roff;
		psn = sw->first_psn + sw->rcvd;
	}

	pkt.opcode = op;
	skb = by_ref ? remu_net_alloc_skb_ref(rdev, av, plen, &pkt) :
		       remu_net_alloc_skb(rdev, av, plen, &pkt);
	if (!skb)
		return -ENOMEM;
	remu_bth_set_flags(pkt.bth, last && (w->flags & REMU_WQE_SOLICITED),
			   false, pkt.pad);
	remu_bth_set_qpn(pkt.bth, type == IB_QPT_UD ? w->remote_qpn :
				  qp->attr.dest_qp_num);
	/*
	 * AckReq: a message's last packet, every REMU_ACK_EVERY PSNs, and
	 * the first packet of a go-back (remu_req_go_back())
	 */
	ack_every = last || (psn % REMU_ACK_EVERY) == 0;
	gb_first = qp->eng.areq && psn == qp->eng.areq_psn;
	remu_bth_set_psn(pkt.bth, psn, type == IB_QPT_RC &&
			 (ack_every || gb_first));

	h = remu_pkt_hdr(&pkt, REMU_HDR_RETH);
	if (h)
		remu_reth_set(h, w->remote_addr + roff, w->rkey,
			      w->opcode == IB_UVERBS_WR_FLUSH ?
			      (u32)w->compare_add : rlen);
	h = remu_pkt_hdr(&pkt, REMU_HDR_FETH);
	if (h)
		remu_feth_set(h, w->ex_data);
	h = remu_pkt_hdr(&pkt, REMU_HDR_IMMDT);
	if (h)
		((struct remu_immdt *)h)->imm = (__force __be32)w->ex_data;
	h = remu_pkt_hdr(&pkt, REMU_HDR_IETH);
	if (h)
		remu_ieth_set(h, w->ex_data);
	h = remu_pkt_hdr(&pkt, REMU_HDR_DETH);
	if (h) {
		qkey = (w->remote_qkey & 0x80000000u) ? qp->attr.qkey :
							w->remote_qkey;
		if (remu_qp_is_gsi(qp))
			qkey = IB_QP1_QKEY;
		remu_deth_set(h, qkey, qp->ib_qp.qp_num);
	}
	h = remu_pkt_hdr(&pkt, REMU_HDR_ATMETH);
	if (h) {
		if (w->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP)
			remu_atmeth_set(h, w->remote_addr, w->rkey, w->swap,
					w->compare_add);
		else
			remu_atmeth_set(h, w->remote_addr, w->rkey,
					w->compare_add, 0);
	}

	if (by_ref) {
		err = remu_sge_frag_skb(&(struct remu_sgl){
				.rdev = rdev, .pd = to_remu_pd(qp->ib_qp.pd),
				.sges = (struct remu_sge *)(w + 1),
				.num = w->num_sge,
			}, off, skb, plen);
		if (!err)
			err = remu_net_end_ref(skb, &pkt);
		if (err) {
			kfree_skb(skb);
			return err;
		}
	} else if (plen) {
		u8 *buf = skb->data + pkt.hdr_len;

		if (w->opcode == IB_UVERBS_WR_ATOMIC_WRITE) {
			/* the 8 bytes, as they were in the WQE's memory */
			memcpy(buf, &w->compare_add, sizeof(w->compare_add));
		} else if (w->flags & REMU_WQE_INLINE) {
			memcpy(buf, (u8 *)(w + 1) + off, plen);
		} else {
			err = remu_sge_copy(&(struct remu_sgl){
					.rdev = rdev,
					.pd = to_remu_pd(qp->ib_qp.pd),
					.sges = (struct remu_sge *)(w + 1),
					.num = w->num_sge,
				}, off, buf, plen, REMU_FROM_MR);
			if (err) {
				kfree_skb(skb);
				return err;
			}
		}
	}
	if (first && !(w->opcode == IB_UVERBS_WR_RDMA_READ) &&
	    (w->opcode == IB_UVERBS_WR_SEND ||
	     w->opcode == IB_UVERBS_WR_SEND_WITH_IMM ||
	     w->opcode == IB_UVERBS_WR_SEND_WITH_INV))
		remu_count(rdev, REMU_CNT_RDMA_SEND);
	/* time a round trip: the first sending of an RC packet that asks for an ACK */
	if (type == IB_QPT_RC && !rd && !qp->eng.rtt_t && ack_every &&
	    !remu_psn_before(psn, qp->eng.sent_end))
		remu_comp_rtt_start(qp, psn);
	remu_net_xmit(rdev, av, skb);	/* a lost packet is retransmitted */
	if (gb_first)
		qp->eng.areq = false;
	/* responses may now come up to here (READ: one per response) */
	psn = rd ? sw->first_psn + sw->npkts : psn + 1;
	if (remu_psn_before(qp->eng.sent_end, psn))
		qp->eng.sent_end = psn & REMU_PSN_MASK;
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
 * Context: any; takes qp->sq.cons_lock to read the ring's extent.
 */
void remu_req_post_av(struct remu_qp *qp)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	const struct remu_send_wqe *w;
	struct remu_uav *u;
	unsigned long flags;
	u32 idx, end;

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
	smp_store_release(&e->av_next, end);
}

/*
 * The requester.  Return: false if @caller (the doorbell's caller) must
 * hand the rest to the work item (remu_eng_inline_ok()), else true.
 */
bool remu_req_run(struct remu_qp *qp, bool caller)
{
	struct remu_qp_eng *e = &qp->eng;
	struct remu_queue *q = &qp->sq.ring;
	bool rc = qp->ib_qp.qp_type == IB_QPT_RC;
	bool have_av = false;
	struct remu_av av;
	const struct remu_av *dst = &av;
	unsigned long flags;
	int budget = 512;
	u32 used;

	while (budget-- > 0 && !e->rnr_wait &&
	       READ_ONCE(qp->state) == IB_QPS_RTS) {
		struct remu_send_wqe *w;
		struct remu_swqe *sw;
		u32 idx;
		int err;

		spin_lock_irqsave(&qp->sq.cons_lock, flags);
		used = remu_queue_used_by_consumer(q);
		if ((s32)(e->head - q->cons) < 0)
			e->head = q->cons;
		idx = e->head;
		spin_unlock_irqrestore(&qp->sq.cons_lock, flags);
		if (idx - q->cons >= used)
			break;
		/* UD: posted, its AV not resolved yet; the doorbell requeues */
		if (e->uav && (s32)(idx - smp_load_acquire(&e->av_next)) >= 0)
			break;
		/* after the producer index: an MR the WQE names is seen */
		if (caller && !remu_eng_inline_ok(qp))
			return false;

		sw = &e->st[idx & q->mask];
		w = remu_req_copy(qp, idx);
		if (!sw->valid) {
			err = remu_req_fetch(qp, idx);
			if (err) {
				remu_comp_fail_wqe(qp, idx, err);
				return true;
			}
			if (remu_is_rd_atomic(w->opcode) && rc &&
			    e->rd_out >= max_t(u32, 1, qp->attr.max_rd_atomic)) {
				sw->valid = false;
				break;
			}
			sw->first_psn = e->psn;
			if (remu_is_rd_atomic(w->opcode)) {
				e->rd_out++;
				sw->rd = true;
			}
			if (w->opcode == IB_UVERBS_WR_RDMA_READ)
				remu_req_map_get(e, sw);
		}
		if (rc && sw->rd && sw->rcvd >= sw->npkts) {
			/* gone back over a finished READ/atomic: skip it */
			if (remu_psn_before(e->psn, sw->first_psn + sw->npkts))
				e->psn = (sw->first_psn + sw->npkts) &
					 REMU_PSN_MASK;
			e->head++;
			continue;
		}
		if (remu_is_local(w->opcode)) {
			/* local: done when all before it are */
			if (idx != q->cons)
				break;
			err = remu_req_local(qp, idx, w);
			e->head++;
			if (err) {
				remu_comp_fail_wqe(qp, idx, IB_WC_MW_BIND_ERR);
				return true;
			}
			remu_comp_wqe(qp, idx, IB_WC_SUCCESS);
			continue;
		}
		if ((w->flags & REMU_WQE_FENCE) && rc && e->rd_out &&
		    idx != q->cons)
			break;
		if (rc && remu_psn_diff(sw->first_psn + sw->sent, e->una) >=
			  REMU_REQ_WINDOW)
			break;

		err = 0;
		if (e->uav) {		/* UD: the AV resolved at post time */
			err = e->uav[idx & q->mask].err;
			dst = &e->uav[idx & q->mask].av;
		} else if (!have_av) {
			err = remu_req_av(qp, &av);
			have_av = !err;
		}
		if (err) {
			remu_comp_fail_wqe(qp, idx, IB_WC_LOC_QP_OP_ERR);
			return true;
		}

		err = remu_req_send_pkt(qp, idx, dst);
		if (err) {
			remu_comp_fail_wqe(qp, idx, remu_local_status(err));
			return true;
		}
		sw->sent = remu_is_rd_atomic(w->opcode) ? sw->npkts :
			   sw->sent + 1;
		if (remu_psn_before(e->psn, sw->first_psn + sw->sent))
			e->psn = (sw->first_psn + sw->sent) & REMU_PSN_MASK;
		/*
		 * Something is unacknowledged from the first packet on: the
		 * window can stop a long WQE before its last packet, and if
		 * what went out (or its ACKs) is lost, only the timer
		 * recovers.  A running timer is left as it is until the
		 * WQE's last packet, which restarts it.
		 */
		if (rc && (sw->sent == sw->npkts || !timer_pending(&e->timer)))
			remu_comp_arm(qp);
		if (sw->sent < sw->npkts)
			continue;
		e->head++;
		if (!rc)
			remu_comp_wqe(qp, idx, IB_WC_SUCCESS);
	}
	if (budget <= 0)
		queue_work(remu_wq, &qp->send_work);
	return true;
}
