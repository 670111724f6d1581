// SPDX-License-Identifier: GPL-2.0
/*
 * remu_srq.c - shared receive queues.
 *
 * Owns: struct remu_srq and its receive ring (produced by the provider's
 * post_srq_recv with no system call, or by remu_post_srq_recv() for
 * kernel consumers; consumed by the responder), the SRQ limit and its
 * event.
 *
 * Locking: srq->rq.prod_lock serialises kernel consumers' posts;
 * srq->rq.cons_lock serialises the consumer side of the ring and guards
 * srq->limit (arming in modify_srq, firing in remu_srq_limit_event()).
 * The event handler is called with no remu lock held.
 */
#include <rdma/uverbs_ioctl.h>

#include "remu_qp.h"

int remu_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		    struct ib_udata *udata)
{
	struct remu_dev *rdev = to_remu_dev(ibsrq->device);
	struct remu_srq *srq = to_remu_srq(ibsrq);
	struct remu_create_srq_resp resp = {};
	struct remu_ucontext *uc;
	struct ib_srq_attr *a = &init->attr;
	u32 slot;
	int err;

	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (!a->max_wr || a->max_wr > REMU_MAX_SRQ_WR ||
	    a->max_sge > REMU_MAX_SRQ_SGE || a->srq_limit > a->max_wr)
		return -EINVAL;
	if (udata) {
		if (udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
			return -EINVAL;
		if (udata->outlen < sizeof(resp))
			return -EINVAL;
	}
	if (atomic_inc_return(&rdev->q.nr_srq) > rdev->attr.max_srq) {
		err = -ENOMEM;
		goto err_count;
	}

	spin_lock_init(&srq->rq.prod_lock);
	spin_lock_init(&srq->rq.cons_lock);
	srq->rq.max_sge = max(a->max_sge, 1u);
	slot = sizeof(struct remu_recv_wqe) +
	       srq->rq.max_sge * sizeof(struct remu_sge);
	err = remu_queue_init(&srq->rq.ring, a->max_wr, slot,
			      udata ? REMU_RING_USER_PRODUCES : REMU_RING_KERNEL);
	if (err)
		goto err_count;
	srq->rq.max_wr = srq->rq.ring.num_slots;
	srq->limit = a->srq_limit;

	if (udata) {
		uc = rdma_udata_to_drv_context(udata, struct remu_ucontext,
					       ib_uc);
		err = remu_queue_mmap_insert(&srq->rq.ring, &uc->ib_uc,
					     &resp.ring);
		if (err)
			goto err_ring;
		resp.max_sge = srq->rq.max_sge;
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_ring;
	}
	a->max_wr = srq->rq.max_wr;
	a->max_sge = srq->rq.max_sge;
	remu_obj_get(REMU_OBJ_SRQ);
	return 0;

err_ring:
	remu_queue_destroy(&srq->rq.ring);
err_count:
	atomic_dec(&rdev->q.nr_srq);
	return err;
}

/* Only the limit can change: remu does not resize SRQs (no IB_SRQ_MAX_WR). */
int remu_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		    enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct remu_srq *srq = to_remu_srq(ibsrq);
	unsigned long flags;

	if (mask & ~IB_SRQ_LIMIT)
		return -EINVAL;
	if (udata && udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	if (!(mask & IB_SRQ_LIMIT))
		return 0;
	if (attr->srq_limit > srq->rq.max_wr)
		return -EINVAL;
	spin_lock_irqsave(&srq->rq.cons_lock, flags);
	srq->limit = attr->srq_limit;
	spin_unlock_irqrestore(&srq->rq.cons_lock, flags);
	return 0;
}

int remu_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct remu_srq *srq = to_remu_srq(ibsrq);

	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = READ_ONCE(srq->limit);
	return 0;
}

int remu_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct remu_srq *srq = to_remu_srq(ibsrq);

	/* the core refuses while a QP uses the SRQ */
	remu_queue_destroy(&srq->rq.ring);
	atomic_dec(&to_remu_dev(ibsrq->device)->q.nr_srq);
	remu_obj_put(REMU_OBJ_SRQ);
	return 0;
}

/* post_srq_recv for kernel consumers; processes write the ring. */
int remu_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr)
{
	struct remu_srq *srq = to_remu_srq(ibsrq);
	unsigned long flags;
	int err = 0;

	if (ibsrq->uobject) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&srq->rq.prod_lock, flags);
	for (; wr; wr = wr->next) {
		err = remu_wq_post_recv(&srq->rq, wr);
		if (err)
			break;
	}
	spin_unlock_irqrestore(&srq->rq.prod_lock, flags);
	if (err)
		*bad_wr = wr;
	return err;
}

/**
 * remu_srq_limit_event - raise SRQ_LIMIT_REACHED if the SRQ dropped below
 * its armed limit
 * @srq: the SRQ, after the responder consumed a WQE from it
 *
 * The limit disarms when it fires (the consumer re-arms with
 * ibv_modify_srq).
 *
 * Context: any; takes srq->rq.cons_lock.
 */
void remu_srq_limit_event(struct remu_srq *srq)
{
	struct ib_srq *ibsrq = &srq->ib_srq;
	unsigned long flags;
	bool fire = false;

	spin_lock_irqsave(&srq->rq.cons_lock, flags);
	if (srq->limit &&
	    remu_queue_used_by_consumer(&srq->rq.ring) < srq->limit) {
		srq->limit = 0;
		fire = true;
	}
	spin_unlock_irqrestore(&srq->rq.cons_lock, flags);

	if (fire && ibsrq->event_handler) {
		struct ib_event ev = {
			.device = ibsrq->device,
			.element.srq = ibsrq,
			.event = IB_EVENT_SRQ_LIMIT_REACHED,
		};

		ibsrq->event_handler(&ev, ibsrq->srq_context);
	}
}
