// SPDX-License-Identifier: GPL-2.0
/*
 * remu_cq.c - completion queues.
 *
 * Owns: struct remu_cq, its CQE ring (kernel produces; a process's ring
 * is consumed by the provider's poll_cq with no system call, a kernel
 * CQ's by remu_poll_cq()), arming for completion events, overflow,
 * resize, and remu_cq_post(), through which every completion enters a
 * CQ.  The slot format is a process's choice at creation, kept by
 * resize (remu-abi.h): struct remu_cqe, or struct remu_cqe_ext with
 * REMU_CREATE_CQ_INLINE_RECV (the responder may put small receives in
 * it, remu_cq_post_ext()), and with REMU_CREATE_CQ_TIMESTAMP a struct
 * remu_cqe_ts after either, which remu_cq_post_slot() fills with the
 * device and wall clocks as it writes the CQE; other CQs read no clock.
 *
 * Locking: cq->lock (spinlock, irqsave: kernel ULPs may poll and arm from
 * any context) protects the producer side of the ring, the arming state
 * and the overflow flag, so a CQ's stamps follow ring order; for kernel
 * CQs it also serialises poll_cq.  It nests inside the QP's work queue
 * locks (flush posts CQEs while holding a ring's cons_lock).  The
 * completion and event handlers are called without cq->lock, possibly
 * under a work queue's cons_lock, as a hardware interrupt handler would
 * call them: they must not sleep.
 */
#include <linux/log2.h>
#include <linux/timekeeping.h>
#include <rdma/uverbs_ioctl.h>

#include "remu_qp.h"
#include "remu_trace.h"

/* the slot size of @cq's format (remu-abi.h) */
static u32 remu_cq_slot_size(const struct remu_cq *cq)
{
	u32 size = cq->inline_recv ? sizeof(struct remu_cqe_ext) :
				     sizeof(struct remu_cqe);

	BUILD_BUG_ON(sizeof(struct remu_cqe_ts) != REMU_CQE_TS_SIZE);
	return cq->timestamp ? size + REMU_CQE_TS_SIZE : size;
}

/*
 * Ring a user CQ can use: all slots are usable (free-running indices),
 * so the core's cq->cqe is the slot count.
 */
static int remu_cq_ring_new(struct remu_cq *cq, struct remu_queue *q,
			    int cqe, struct ib_udata *udata,
			    struct remu_ring_info *info)
{
	struct remu_ucontext *uc;
	int err;

	err = remu_queue_init(q, cqe, remu_cq_slot_size(cq),
			      udata ? REMU_RING_USER_CONSUMES : REMU_RING_KERNEL);
	if (err)
		return err;
	if (!udata)
		return 0;
	uc = rdma_udata_to_drv_context(udata, struct remu_ucontext, ib_uc);
	err = remu_queue_mmap_insert(q, &uc->ib_uc, info);
	if (err)
		remu_queue_destroy(q);
	return err;
}

/* the optional struct remu_create_cq_cmd of a process's create_cq */
static int remu_cq_parse_cmd(struct remu_cq *cq, struct ib_udata *udata)
{
	struct remu_create_cq_cmd cmd = {};
	int err;

	if (!udata->inlen)
		return 0;
	if (udata->inlen > sizeof(cmd) &&
	    !ib_is_udata_cleared(udata, sizeof(cmd),
				 udata->inlen - sizeof(cmd)))
		return -EINVAL;
	err = ib_copy_from_udata(&cmd, udata, min(udata->inlen, sizeof(cmd)));
	if (err)
		return err;
	if ((cmd.flags & ~(REMU_CREATE_CQ_INLINE_RECV |
			   REMU_CREATE_CQ_TIMESTAMP)) || cmd.reserved)
		return -EINVAL;
	cq->inline_recv = cmd.flags & REMU_CREATE_CQ_INLINE_RECV;
	cq->timestamp = cmd.flags & REMU_CREATE_CQ_TIMESTAMP;
	return 0;
}

int remu_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		   struct uverbs_attr_bundle *attrs)
{
	struct ib_udata *udata = attrs ? &attrs->driver_udata : NULL;
	struct remu_dev *rdev = to_remu_dev(ibcq->device);
	struct remu_cq *cq = to_remu_cq(ibcq);
	struct remu_create_cq_resp resp = {};
	int err;

	/*
	 * The core's TIMESTAMP_COMPLETION (libibverbs sets it for a CQ that
	 * wants timestamps) is accepted as mlx5 does; the slot format that
	 * carries them is remu's own flag.  IGNORE_OVERRUN is not offered.
	 */
	if (attr->flags & ~IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > REMU_MAX_CQE ||
	    attr->comp_vector >= ibcq->device->num_comp_vectors)
		return -EINVAL;
	if (udata) {
		err = remu_cq_parse_cmd(cq, udata);
		if (err)
			return err;
	}
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	if (atomic_inc_return(&rdev->q.nr_cq) > rdev->attr.max_cq) {
		err = -ENOMEM;
		goto err_count;
	}

	spin_lock_init(&cq->lock);
	err = remu_cq_ring_new(cq, &cq->ring, attr->cqe, udata, &resp.ring);
	if (err)
		goto err_count;
	if (udata) {
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_ring;
	}
	ibcq->cqe = cq->ring.num_slots;
	remu_obj_get(REMU_OBJ_CQ);
	return 0;

err_ring:
	remu_queue_destroy(&cq->ring);
err_count:
	atomic_dec(&rdev->q.nr_cq);
	return err;
}

int remu_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct remu_cq *cq = to_remu_cq(ibcq);

	/* the core refuses while a QP or SRQ uses the CQ (usecnt) */
	remu_queue_destroy(&cq->ring);
	atomic_dec(&to_remu_dev(ibcq->device)->q.nr_cq);
	remu_obj_put(REMU_OBJ_CQ);
	return 0;
}

/*
 * Let the engines' run in progress and the work already queued on the QPs
 * of @cq finish (remu_eng_wait_run()) before a resize counts its CQEs: a
 * NIC executes a command after the WQEs doorbelled before it,
 * so a UD or UC send posted before ibv_resize_cq() has its CQE in the CQ
 * by then, and a resize below the CQEs pending fails with EINVAL (as on
 * mlx5) instead of racing the requester and shrinking the ring under
 * completions still to come (rdma-core's test_cq.test_resize_cq).  RC
 * sends still wait for their ACKs.  Every QP of the device is looked at:
 * resize is rare, and a CQ keeps no list of its QPs.
 */
static void remu_cq_sync_qps(struct remu_cq *cq)
{
	struct remu_dev *rdev = to_remu_dev(cq->ib_cq.device);
	unsigned long qpn = 0, flags;
	struct remu_qp *qp;

	for (;;) {
		xa_lock_irqsave(&rdev->q.qp_xa, flags);
		qp = xa_find(&rdev->q.qp_xa, &qpn, ULONG_MAX, XA_PRESENT);
		while (qp && ((qp->scq != cq && qp->rcq != cq) ||
			      !refcount_inc_not_zero(&qp->ref)))
			qp = xa_find_after(&rdev->q.qp_xa, &qpn, ULONG_MAX,
					   XA_PRESENT);
		xa_unlock_irqrestore(&rdev->q.qp_xa, flags);
		if (!qp)
			return;
		remu_eng_wait_run(qp);
		remu_qp_put(qp);
		qpn++;
	}
}

/*
 * Resize: a new ring, the pending CQEs copied over in order, then the old
 * ring released.  The provider maps the new ring from the response and
 * continues at its consumer index (0 + what was pending = its prod).
 */
int remu_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct remu_cq *cq = to_remu_cq(ibcq);
	struct remu_resize_cq_resp resp = {};
	struct remu_queue nq = {}, oq;
	void *src, *dst;
	unsigned long flags;
	u32 pending, i;
	int err;

	if (cqe < 1 || cqe > REMU_MAX_CQE)
		return -EINVAL;
	if (udata && udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	err = remu_cq_ring_new(cq, &nq, cqe, udata, &resp.ring);
	if (err)
		return err;

	remu_cq_sync_qps(cq);
	spin_lock_irqsave(&cq->lock, flags);
	pending = remu_queue_used_by_producer(&cq->ring);
	if (pending > nq.num_slots) {
		spin_unlock_irqrestore(&cq->lock, flags);
		err = -EINVAL;
		goto err_new;
	}
	for (i = 0; i < pending; i++) {
		src = remu_queue_slot_at(&cq->ring, cq->ring.prod - pending + i);
		dst = remu_queue_producer_slot(&nq);
		memcpy(dst, src, nq.slot_size);
		remu_queue_produce(&nq);
	}
	oq = cq->ring;
	cq->ring = nq;
	spin_unlock_irqrestore(&cq->lock, flags);

	if (udata) {
		/*
		 * Too late to fail cleanly once the rings are swapped; the
		 * response buffer was checked above, so this only fails on a
		 * bad user pointer, and the provider then sees the error.
		 */
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
	}
	ibcq->cqe = cq->ring.num_slots;
	remu_queue_destroy(&oq);
	return err;

err_new:
	remu_queue_destroy(&nq);
	return err;
}

/* A CQE as the core's ib_wc (kernel CQs). */
static void remu_cqe_to_wc(struct remu_dev *rdev, const struct remu_cqe *c,
			   struct ib_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = c->wr_id;
	wc->status = c->status;
	wc->opcode = c->opcode;
	wc->vendor_err = c->vendor_err;
	wc->byte_len = c->byte_len;
	/* the ULP must not destroy a QP with completions still queued */
	wc->qp = xa_load(&rdev->q.qp_xa, c->qp_num);
	wc->src_qp = c->src_qp;
	wc->pkey_index = c->pkey_index;
	wc->slid = c->slid;
	wc->sl = c->sl;
	wc->dlid_path_bits = c->dlid_path_bits;
	wc->port_num = 1;
	if (c->flags & REMU_CQE_GRH)
		wc->wc_flags |= IB_WC_GRH;
	if (c->flags & REMU_CQE_WITH_IMM) {
		wc->wc_flags |= IB_WC_WITH_IMM;
		wc->ex.imm_data = (__force __be32)c->ex_data;
	}
	if (c->flags & REMU_CQE_WITH_INV) {
		wc->wc_flags |= IB_WC_WITH_INVALIDATE;
		wc->ex.invalidate_rkey = c->ex_data;
	}
	if (c->flags & REMU_CQE_IP_CSUM_OK)
		wc->wc_flags |= IB_WC_IP_CSUM_OK;
	if (c->flags & REMU_CQE_WITH_SMAC) {
		wc->wc_flags |= IB_WC_WITH_SMAC;
		memcpy(wc->smac, c->smac, ETH_ALEN);
	}
	if (c->network_hdr_type != REMU_NET_NONE) {
		wc->wc_flags |= IB_WC_WITH_NETWORK_HDR_TYPE;
		wc->network_hdr_type = c->network_hdr_type == REMU_NET_IPV4 ?
				       RDMA_NETWORK_IPV4 : RDMA_NETWORK_IPV6;
	}
}

/* poll_cq for kernel consumers; user CQs are polled by the provider. */
int remu_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct remu_dev *rdev = to_remu_dev(ibcq->device);
	struct remu_cq *cq = to_remu_cq(ibcq);
	struct remu_cqe *c;
	unsigned long flags;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	while (n < num_entries && (c = remu_queue_consumer_slot(&cq->ring))) {
		remu_cqe_to_wc(rdev, c, &wc[n++]);
		remu_queue_consume(&cq->ring);
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

/*
 * Arm the CQ.  A solicited-only request does not weaken an armed
 * next-completion request.  With IB_CQ_REPORT_MISSED_EVENTS, returns 1
 * when completions are already queued.
 */
int remu_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct remu_cq *cq = to_remu_cq(ibcq);
	unsigned long irqf;
	int ret = 0;

	spin_lock_irqsave(&cq->lock, irqf);
	if ((flags & IB_CQ_SOLICITED_MASK) == IB_CQ_NEXT_COMP)
		cq->notify = IB_CQ_NEXT_COMP;
	else if (cq->notify != IB_CQ_NEXT_COMP)
		cq->notify = IB_CQ_SOLICITED;
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && remu_queue_used_by_producer(&cq->ring))
		ret = 1;
	spin_unlock_irqrestore(&cq->lock, irqf);
	return ret;
}

/*
 * copy @len bytes of @src into the next slot, and stamp it on a CQ with
 * timestamps; see remu_cq_post()
 */
static int remu_cq_post_slot(struct remu_cq *cq, const void *src,
			     size_t len, bool solicited)
{
	struct ib_cq *ibcq = &cq->ib_cq;
	bool fire = false, overflow = false;
	unsigned long flags;
	void *slot;

	spin_lock_irqsave(&cq->lock, flags);
	slot = remu_queue_producer_slot(&cq->ring);
	if (!slot) {
		overflow = !cq->overflowed;
		cq->overflowed = true;
		spin_unlock_irqrestore(&cq->lock, flags);
		if (overflow && ibcq->event_handler) {
			struct ib_event ev = {
				.device = ibcq->device,
				.element.cq = ibcq,
				.event = IB_EVENT_CQ_ERR,
			};

			ibcq->event_handler(&ev, ibcq->cq_context);
		}
		return -ENOSPC;
	}
	memcpy(slot, src, len);
	trace_remu_cqe_err(cq, src);
	if (cq->timestamp) {
		struct remu_cqe_ts *ts = slot + cq->ring.slot_size -
					 sizeof(*ts);

		ts->ts = ktime_get_raw_ns();
		ts->wallclock = ktime_get_real_ns();
	}
	remu_queue_produce(&cq->ring);
	if (cq->notify == IB_CQ_NEXT_COMP ||
	    (cq->notify == IB_CQ_SOLICITED && solicited)) {
		cq->notify = 0;
		fire = true;
	}
	spin_unlock_irqrestore(&cq->lock, flags);

	if (fire && ibcq->comp_handler)
		ibcq->comp_handler(ibcq, ibcq->cq_context);
	return 0;
}

/**
 * remu_cq_post - write a completion into a CQ
 * @cq: the CQ
 * @cqe: the completion
 * @solicited: the completion is for a solicited event (fires a
 *	solicited-only arming too)
 *
 * Raises the completion event when the CQ is armed for it.  When the ring
 * is full the completion is lost, the CQ is in error and IB_EVENT_CQ_ERR
 * is raised (once).
 *
 * Context: any; takes cq->lock with interrupts saved; calls the
 * consumer's handlers with no lock held.
 * Return: 0, or -ENOSPC on overflow.
 */
int remu_cq_post(struct remu_cq *cq, const struct remu_cqe *cqe,
		 bool solicited)
{
	return remu_cq_post_slot(cq, cqe, sizeof(*cqe), solicited);
}

/**
 * remu_cq_post_ext - write a completion with inline data into a CQ
 * @cq: the CQ; must have been created with REMU_CREATE_CQ_INLINE_RECV
 * @ext: the completion (@ext->cqe.flags has REMU_CQE_INLINE), its data
 *	and where the provider is to copy it
 * @solicited: as for remu_cq_post()
 *
 * Context and return: as remu_cq_post().
 */
int remu_cq_post_ext(struct remu_cq *cq, const struct remu_cqe_ext *ext,
		     bool solicited)
{
	if (!cq->inline_recv)
		return -EINVAL;
	return remu_cq_post_slot(cq, ext, sizeof(*ext), solicited);
}
