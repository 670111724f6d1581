// SPDX-License-Identifier: GPL-2.0
/*
 * remu_qp.c - queue pairs.
 *
 * Owns: QP creation in steps (checks; the SQ and RQ rings and the
 * engines' state; the mmap entries; the QPN) and destruction; the IBA
 * state machine with attribute validation; QP numbers and lookup
 * (remu_qp_get()); the doorbell (a process's POST_SEND command with no
 * WRs: remu_eng_doorbell() in RTS, else the work item, remu_eng.c); kernel
 * consumers' post_send/post_recv into the same rings (a REG_MR's MR, key
 * and rights go into the slot's kernel-only record, qp->eng.kreg, as the
 * WQE format is shared with processes); the flush; the QP's ECE options
 * (remu_ece_negotiate(): creation and modify_qp carry them in udata).
 *
 * Flush: entering ERR (modify_qp, or an engine) completes every WQE still
 * in the SQ, then the RQ, in ring order, with IB_WC_WR_FLUSH_ERR; WQEs
 * posted in ERR are flushed by the work item (a user post_recv in ERR
 * rings the doorbell for it), which on an SRQ also raises
 * IB_EVENT_QP_LAST_WQE_REACHED (ib_drain_qp() waits for it).  RESET and
 * destroy discard the WQEs without completions, as real NICs do; libremu
 * then takes the QP's CQEs out of its CQs, as mlx5's provider does.
 *
 * Locking:
 *   qp->mutex            modify_qp/query_qp: state changes and qp->attr;
 *                        rdma_cm calls modify_qp under its own locks, so
 *                        nothing under it may take rtnl_lock
 *   qp->sq/rq.prod_lock  kernel consumers' posts (irqsave); the SQ's also
 *                        UD QPs' AV capture at post time
 *   qp->sq/rq.cons_lock  consumer side of the rings (engines, flush)
 *   cq->lock             nests inside the cons_locks
 *   rdev->q.qp_xa lock   QPN table; remu_qp_get() takes a reference under it
 * qp->state is written under qp->mutex and read with READ_ONCE().
 */
#include <linux/log2.h>
#include <rdma/ib_cache.h>
#include <rdma/uverbs_ioctl.h>

#include "remu_qp.h"
#include "remu_trace.h"

static void remu_qp_send_work(struct work_struct *work);

/**
 * remu_dev_queues_init - per-device state of the queue objects
 * @rdev: a new device, before registration
 */
void remu_dev_queues_init(struct remu_dev *rdev)
{
	xa_init_flags(&rdev->q.qp_xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_IRQ);
	xa_init_flags(&rdev->q.ah_xa, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ);
	rdev->q.qp_next = 2;
}

/**
 * remu_qp_get - find a QP by number and take a reference
 * @rdev: the device
 * @qpn: the QP number
 *
 * Context: any.
 * Return: the QP, or NULL if there is none (or it is being created or
 * destroyed).  Release with remu_qp_put().
 */
struct remu_qp *remu_qp_get(struct remu_dev *rdev, u32 qpn)
{
	struct remu_qp *qp;
	unsigned long flags;

	xa_lock_irqsave(&rdev->q.qp_xa, flags);
	qp = xa_load(&rdev->q.qp_xa, qpn);
	if (qp && !refcount_inc_not_zero(&qp->ref))
		qp = NULL;
	xa_unlock_irqrestore(&rdev->q.qp_xa, flags);
	return qp;
}

/** remu_qp_put - drop a reference taken by remu_qp_get() */
void remu_qp_put(struct remu_qp *qp)
{
	if (refcount_dec_and_test(&qp->ref))
		complete(&qp->released);
}

/* Bytes of a send slot: the fixed part and the larger of SGEs / inline. */
static u32 remu_send_slot_size(u32 max_sge, u32 max_inline)
{
	u32 payload = max3(max_sge * (u32)sizeof(struct remu_sge), max_inline,
			   (u32)sizeof(struct remu_sge));

	return roundup_pow_of_two(sizeof(struct remu_send_wqe) + payload);
}

static int remu_wq_init(struct remu_wq *wq, u32 max_wr, u32 slot_size,
			bool user)
{
	int err;

	spin_lock_init(&wq->prod_lock);
	spin_lock_init(&wq->cons_lock);
	err = remu_queue_init(&wq->ring, max(max_wr, 1u), slot_size,
			      user ? REMU_RING_USER_PRODUCES : REMU_RING_KERNEL);
	if (err)
		return err;
	wq->max_wr = wq->ring.num_slots;
	return 0;
}

static int remu_qp_check_cap(struct ib_qp_init_attr *init)
{
	struct ib_qp_cap *cap = &init->cap;

	if (cap->max_send_wr > REMU_MAX_QP_WR ||
	    cap->max_send_sge > REMU_MAX_SGE ||
	    cap->max_inline_data > REMU_MAX_INLINE)
		return -EINVAL;
	if (!init->srq && (cap->max_recv_wr > REMU_MAX_QP_WR ||
			   cap->max_recv_sge > REMU_MAX_SGE))
		return -EINVAL;
	return 0;
}

/*
 * ECE: the options both sides can use when the QP is asked for @req (the
 * provider's request at creation, or the peer's options that
 * ibv_set_ece() took): the lower version, the capability bits remu has
 * too; 0 (ECE off) for version 0.  mlx5's firmware answers the same way
 * for its own version and bits.
 */
static u32 remu_ece_negotiate(u32 req)
{
	u32 ver = min_t(u32, req >> REMU_ECE_VER_SHIFT, REMU_ECE_VERSION);

	if (!ver)
		return 0;
	return ver << REMU_ECE_VER_SHIFT | (req & REMU_ECE_CAPS);
}

/*
 * A driver command of @size bytes from @udata into @cmd (zeroed first):
 * a shorter one is taken as far as it goes, bytes past @size must be 0;
 * 0 or -errno.  Without udata @cmd stays zero.
 */
static int remu_qp_udata_cmd(struct ib_udata *udata, void *cmd, size_t size)
{
	memset(cmd, 0, size);
	if (!udata || !udata->inlen)
		return 0;
	if (udata->inlen > size &&
	    !ib_is_udata_cleared(udata, size, udata->inlen - size))
		return -EINVAL;
	return ib_copy_from_udata(cmd, udata, min(udata->inlen, size));
}

/* What create_qp asks for, before anything is allocated. */
static int remu_qp_check_init(struct ib_qp_init_attr *init,
			      struct ib_udata *udata,
			      struct remu_create_qp_cmd *cmd)
{
	int err;

	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UC:
	case IB_QPT_UD:
		break;
	case IB_QPT_GSI:
		/* ib_mad's QP1, on the only port; processes get none */
		if (udata)
			return -EOPNOTSUPP;
		if (init->port_num != 1)
			return -EINVAL;
		break;
	default:
		return -EOPNOTSUPP;
	}
	/* mlx5 takes it for any type; it matters to UD QPs only */
	if (init->create_flags & ~IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK)
		return -EOPNOTSUPP;
	if (!init->send_cq || !init->recv_cq)
		return -EINVAL;
	err = remu_qp_check_cap(init);
	if (err)
		return err;
	err = remu_qp_udata_cmd(udata, cmd, sizeof(*cmd));
	if (err)
		return err;
	if (cmd->reserved)
		return -EINVAL;
	/* a provider without ECE has the response without its options */
	if (udata && udata->outlen < offsetofend(struct remu_create_qp_resp,
						 max_recv_sge))
		return -EINVAL;
	return 0;
}

static void remu_qp_init_fields(struct remu_qp *qp, struct remu_dev *rdev,
				const struct ib_qp_init_attr *init, bool user)
{
	qp->rdev = rdev;
	refcount_set(&qp->ref, 0);	/* remu_qp_get() fails until ready */
	init_completion(&qp->released);
	mutex_init(&qp->mutex);
	INIT_WORK(&qp->send_work, remu_qp_send_work);
	qp->state = IB_QPS_RESET;
	qp->attr.qp_state = IB_QPS_RESET;
	qp->attr.path_mig_state = IB_MIG_MIGRATED;
	qp->is_user = user;
	qp->sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	qp->mcast_no_self = !!(init->create_flags &
			       IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK);
	qp->scq = to_remu_cq(init->send_cq);
	qp->rcq = to_remu_cq(init->recv_cq);
	qp->srq = init->srq ? to_remu_srq(init->srq) : NULL;
}

/*
 * The QP's rings and the engines' state: the SQ ring (its slots sized for
 * the larger of the SGEs and the inline data asked for), the engines'
 * per-slot state (remu_eng_init()), the RQ ring unless the QP is on an SRQ.
 */
static int remu_qp_rings_init(struct remu_qp *qp,
			      const struct ib_qp_init_attr *init)
{
	u32 slot;
	int err;

	slot = remu_send_slot_size(init->cap.max_send_sge,
				   init->cap.max_inline_data);
	err = remu_wq_init(&qp->sq, init->cap.max_send_wr, slot, qp->is_user);
	if (err)
		return err;
	slot -= sizeof(struct remu_send_wqe);
	qp->sq.max_sge = min_t(u32, slot / sizeof(struct remu_sge), REMU_MAX_SGE);
	qp->max_inline = min_t(u32, slot, REMU_MAX_INLINE);

	err = remu_eng_init(qp);
	if (err)
		goto err_sq;
	if (qp->srq)
		return 0;
	qp->rq.max_sge = max(init->cap.max_recv_sge, 1u);
	slot = sizeof(struct remu_recv_wqe) +
	       qp->rq.max_sge * sizeof(struct remu_sge);
	err = remu_wq_init(&qp->rq, init->cap.max_recv_wr, slot, qp->is_user);
	if (err)
		goto err_eng;
	return 0;

err_eng:
	remu_eng_fini(qp);
err_sq:
	remu_queue_destroy(&qp->sq.ring);
	return err;
}

/*
 * Undo remu_qp_rings_init() (and remu_qp_mmap_rings()): the engines first,
 * which use the rings until they stop.
 */
static void remu_qp_rings_destroy(struct remu_qp *qp)
{
	remu_eng_fini(qp);
	remu_queue_destroy(&qp->rq.ring);
	remu_queue_destroy(&qp->sq.ring);
}

/* A process's QP: the mmap entries of its rings, into @resp. */
static int remu_qp_mmap_rings(struct remu_qp *qp, struct ib_udata *udata,
			      struct remu_create_qp_resp *resp)
{
	struct remu_ucontext *uc = rdma_udata_to_drv_context(udata,
							     struct remu_ucontext,
							     ib_uc);
	int err;

	err = remu_queue_mmap_insert(&qp->sq.ring, &uc->ib_uc, &resp->sq);
	if (err || qp->srq)
		return err;
	return remu_queue_mmap_insert(&qp->rq.ring, &uc->ib_uc, &resp->rq);
}

/* The QP's number.  Return: >= 0, or a negative errno. */
static int remu_qp_alloc_qpn(struct remu_qp *qp, enum ib_qp_type type,
			     u32 *qpn)
{
	struct remu_dev *rdev = qp->rdev;

	if (type == IB_QPT_GSI) {
		/* QPN 1 is the GSI QP's; other QPs are allocated from 2 */
		*qpn = 1;
		return xa_insert_irq(&rdev->q.qp_xa, *qpn, qp, GFP_KERNEL);
	}
	/* 0xffffff is the multicast QPN (IB_MULTICAST_QPN) */
	return xa_alloc_cyclic_irq(&rdev->q.qp_xa, qpn, qp,
				   XA_LIMIT(2, IB_MULTICAST_QPN - 1),
				   &rdev->q.qp_next, GFP_KERNEL);
}

/* What the QP got: into @init for the caller, and into the QP's attributes. */
static void remu_qp_report_caps(struct remu_qp *qp,
				struct ib_qp_init_attr *init)
{
	init->cap.max_send_wr = qp->sq.max_wr;
	init->cap.max_send_sge = qp->sq.max_sge;
	init->cap.max_inline_data = qp->max_inline;
	if (!qp->srq) {
		init->cap.max_recv_wr = qp->rq.max_wr;
		init->cap.max_recv_sge = qp->rq.max_sge;
	}
	qp->attr.cap = init->cap;
}

/* A process's QP: its number, sizes and rings, for libremu. */
static int remu_qp_udata_resp(struct remu_qp *qp, struct ib_udata *udata,
			      struct remu_create_qp_resp *resp)
{
	resp->qpn = qp->ib_qp.qp_num;
	resp->max_inline = qp->max_inline;
	resp->max_send_sge = qp->sq.max_sge;
	resp->max_recv_sge = qp->srq ? 0 : qp->rq.max_sge;
	resp->ece_options = qp->ece;
	return ib_copy_to_udata(udata, resp,
				min_t(size_t, sizeof(*resp), udata->outlen));
}

int remu_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		   struct ib_udata *udata)
{
	struct remu_dev *rdev = to_remu_dev(ibqp->device);
	struct remu_qp *qp = to_remu_qp(ibqp);
	struct remu_create_qp_resp resp = {};
	struct remu_create_qp_cmd cmd;
	u32 qpn;
	int err;

	err = remu_qp_check_init(init, udata, &cmd);
	if (err)
		return err;
	if (atomic_inc_return(&rdev->q.nr_qp) > rdev->attr.max_qp) {
		err = -ENOMEM;
		goto err_count;
	}
	remu_qp_init_fields(qp, rdev, init, !!udata);
	qp->ece = remu_ece_negotiate(cmd.ece_options);
	err = remu_qp_rings_init(qp, init);
	if (err)
		goto err_count;
	if (udata) {
		err = remu_qp_mmap_rings(qp, udata, &resp);
		if (err)
			goto err_rings;
	}
	err = remu_qp_alloc_qpn(qp, init->qp_type, &qpn);
	if (err < 0)
		goto err_rings;
	ibqp->qp_num = qpn;
	if (udata) {
		err = remu_qp_udata_resp(qp, udata, &resp);
		if (err)
			goto err_xa;
	}
	remu_qp_report_caps(qp, init);
	refcount_set(&qp->ref, 1);
	remu_obj_get(REMU_OBJ_QP);
	return 0;

err_xa:
	xa_erase_irq(&rdev->q.qp_xa, qpn);
err_rings:
	remu_qp_rings_destroy(qp);
err_count:
	atomic_dec(&rdev->q.nr_qp);
	return err;
}

int remu_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct remu_qp *qp = to_remu_qp(ibqp);
	struct remu_dev *rdev = qp->rdev;

	/* no new lookups, then wait for the ones in flight */
	xa_erase_irq(&rdev->q.qp_xa, ibqp->qp_num);
	remu_qp_put(qp);
	wait_for_completion(&qp->released);
	remu_qp_rings_destroy(qp);
	mutex_destroy(&qp->mutex);
	atomic_dec(&rdev->q.nr_qp);
	remu_obj_put(REMU_OBJ_QP);
	return 0;
}

/**
 * remu_check_av - is @ah a RoCEv2 address vector remu can use
 * @ah: from modify_qp or create_ah, sgid_attr filled in by the core
 *
 * Return: 0, or -EINVAL unless it has a GRH, port 1 and a RoCEv2 sgid.
 */
int remu_check_av(struct rdma_ah_attr *ah)
{
	const struct ib_global_route *grh;

	if (ah->type != RDMA_AH_ATTR_TYPE_ROCE ||
	    rdma_ah_get_port_num(ah) != 1 ||
	    !(rdma_ah_get_ah_flags(ah) & IB_AH_GRH))
		return -EINVAL;
	grh = rdma_ah_read_grh(ah);
	if (grh->sgid_index >= REMU_GID_TBL_LEN || !grh->sgid_attr ||
	    grh->sgid_attr->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP)
		return -EINVAL;
	return 0;
}

/*
 * The rights a QP's responder grants (FLUSH_*: for IBA 1.5 FLUSH).
 * qp_access_flags may carry any other bit (LOCAL_WRITE, ON_DEMAND,
 * HUGETLB, RELAXED_ORDERING... mean something only for an MR): as on
 * mlx5 they are accepted and dropped, and query_qp returns the remote
 * rights (docs/compatibility.md).
 */
#define REMU_QP_ACCESS (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ | \
			IB_ACCESS_REMOTE_ATOMIC | IB_ACCESS_FLUSH_GLOBAL | \
			IB_ACCESS_FLUSH_PERSISTENT)

/* Values of the attributes in @mask, once the mask itself is known good. */
static int remu_qp_check_attr(struct remu_qp *qp, struct ib_qp_attr *a,
			      int mask)
{
	int err;

	if ((mask & IB_QP_PORT) && a->port_num != 1)
		return -EINVAL;
	if ((mask & IB_QP_PKEY_INDEX) && a->pkey_index >= REMU_PKEY_TBL_LEN)
		return -EINVAL;
	/* the GSI QP's Q_Key is fixed by IBA */
	if ((mask & IB_QP_QKEY) && remu_qp_is_gsi(qp) && a->qkey != IB_QP1_QKEY)
		return -EINVAL;
	if (mask & IB_QP_PATH_MTU) {
		if (a->path_mtu < IB_MTU_256 || a->path_mtu > IB_MTU_4096)
			return -EINVAL;
		/* not ib_query_port(): it takes rtnl_lock (see there) */
		err = remu_port_active_mtu(&qp->rdev->ib_dev);
		if (err < 0)
			return err;
		if (a->path_mtu > err)
			return -EINVAL;
	}
	if (mask & IB_QP_AV) {
		err = remu_check_av(&a->ah_attr);
		if (err)
			return err;
	}
	/* no automatic path migration: no alternate path, always migrated */
	if (mask & IB_QP_ALT_PATH)
		return -EINVAL;
	if ((mask & IB_QP_PATH_MIG_STATE) &&
	    a->path_mig_state != IB_MIG_MIGRATED)
		return -EINVAL;
	if ((mask & IB_QP_TIMEOUT) && a->timeout > 31)
		return -EINVAL;
	if ((mask & IB_QP_RETRY_CNT) && a->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IB_QP_RNR_RETRY) && a->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IB_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IB_QP_MAX_QP_RD_ATOMIC) &&
	    a->max_rd_atomic > REMU_MAX_RD_ATOMIC)
		return -EINVAL;
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) &&
	    a->max_dest_rd_atomic > REMU_MAX_RD_ATOMIC)
		return -EINVAL;
	if ((mask & IB_QP_SQ_PSN) && a->sq_psn > 0xffffff)
		return -EINVAL;
	if ((mask & IB_QP_RQ_PSN) && a->rq_psn > 0xffffff)
		return -EINVAL;
	if ((mask & IB_QP_DEST_QPN) &&
	    (!a->dest_qp_num || a->dest_qp_num > REMU_MAX_QPN))
		return -EINVAL;
	return 0;
}

/* Keep what the engines need; the AV's gid reference stays the core's. */
static void remu_qp_store_attr(struct remu_qp *qp, struct ib_qp_attr *a,
			       int mask)
{
	struct ib_qp_attr *s = &qp->attr;

	if (mask & IB_QP_PORT)
		s->port_num = a->port_num;
	if (mask & IB_QP_PKEY_INDEX)
		s->pkey_index = a->pkey_index;
	if (mask & IB_QP_ACCESS_FLAGS)
		s->qp_access_flags = a->qp_access_flags & REMU_QP_ACCESS;
	if (mask & IB_QP_QKEY)
		s->qkey = a->qkey;
	if (mask & IB_QP_PATH_MTU)
		s->path_mtu = a->path_mtu;
	if (mask & IB_QP_AV) {
		s->ah_attr = a->ah_attr;
		s->ah_attr.grh.sgid_attr = NULL;
		/* remu_check_av() made sure of a RoCEv2 source GID */
		memcpy(&qp->path_src, a->ah_attr.grh.sgid_attr->gid.raw,
		       sizeof(qp->path_src));
		memcpy(&qp->path_dst, a->ah_attr.grh.dgid.raw,
		       sizeof(qp->path_dst));
	}
	if (mask & IB_QP_TIMEOUT)
		s->timeout = a->timeout;
	if (mask & IB_QP_RETRY_CNT)
		s->retry_cnt = a->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		s->rnr_retry = a->rnr_retry;
	if (mask & IB_QP_MIN_RNR_TIMER)
		s->min_rnr_timer = a->min_rnr_timer;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		s->max_rd_atomic = a->max_rd_atomic;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		s->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IB_QP_SQ_PSN)
		s->sq_psn = a->sq_psn;
	if (mask & IB_QP_RQ_PSN)
		s->rq_psn = a->rq_psn;
	if (mask & IB_QP_DEST_QPN)
		s->dest_qp_num = a->dest_qp_num;
	if (mask & IB_QP_EN_SQD_ASYNC_NOTIFY)
		s->en_sqd_async_notify = a->en_sqd_async_notify;
}

u32 remu_wc_opcode(u32 wr_opcode)
{
	switch (wr_opcode) {
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
		return IB_WC_RDMA_WRITE;
	case IB_UVERBS_WR_RDMA_READ:
		return IB_WC_RDMA_READ;
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
		return IB_WC_COMP_SWAP;
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		return IB_WC_FETCH_ADD;
	case IB_UVERBS_WR_ATOMIC_WRITE:
		return IB_WC_ATOMIC_WRITE;
	case IB_UVERBS_WR_FLUSH:
		return IB_WC_FLUSH;
	case IB_UVERBS_WR_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case IB_WR_REG_MR:
		return IB_WC_REG_MR;
	case IB_UVERBS_WR_BIND_MW:
		return IB_WC_BIND_MW;
	case REMU_WR_UMR:
		return REMU_WC_UMR;
	default:
		return IB_WC_SEND;
	}
}

static void remu_flush_sq(struct remu_qp *qp)
{
	struct remu_send_wqe *w;
	struct remu_cqe cqe;
	unsigned long flags;

	spin_lock_irqsave(&qp->sq.cons_lock, flags);
	while ((w = remu_queue_consumer_slot(&qp->sq.ring))) {
		memset(&cqe, 0, sizeof(cqe));
		cqe.wr_id = READ_ONCE(w->wr_id);
		cqe.opcode = remu_wc_opcode(READ_ONCE(w->opcode));
		cqe.status = IB_WC_WR_FLUSH_ERR;
		cqe.qp_num = qp->ib_qp.qp_num;
		remu_queue_consume(&qp->sq.ring);
		remu_cq_post(qp->scq, &cqe, false);
	}
	spin_unlock_irqrestore(&qp->sq.cons_lock, flags);
}

static void remu_flush_rq(struct remu_qp *qp)
{
	struct remu_recv_wqe *w;
	struct remu_cqe cqe;
	unsigned long flags;

	if (qp->srq)	/* SRQ WQEs belong to the SRQ, not to this QP */
		return;
	spin_lock_irqsave(&qp->rq.cons_lock, flags);
	while ((w = remu_queue_consumer_slot(&qp->rq.ring))) {
		memset(&cqe, 0, sizeof(cqe));
		cqe.wr_id = READ_ONCE(w->wr_id);
		cqe.opcode = IB_WC_RECV;
		cqe.status = IB_WC_WR_FLUSH_ERR;
		cqe.qp_num = qp->ib_qp.qp_num;
		remu_queue_consume(&qp->rq.ring);
		remu_cq_post(qp->rcq, &cqe, false);
	}
	spin_unlock_irqrestore(&qp->rq.cons_lock, flags);
}

/*
 * On entry to ERR (modify_qp or an engine): flush both queues; a QP on an
 * SRQ has its work item raise Last WQE Reached.  Caller holds qp->mutex.
 */
static void remu_qp_flush_all(struct remu_qp *qp)
{
	lockdep_assert_held(&qp->mutex);
	remu_flush_sq(qp);
	remu_flush_rq(qp);
	if (qp->srq)
		queue_work(remu_wq, &qp->send_work);
}

static void remu_qp_discard(struct remu_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->sq.cons_lock, flags);
	remu_queue_discard(&qp->sq.ring);
	spin_unlock_irqrestore(&qp->sq.cons_lock, flags);
	if (qp->srq)
		return;
	spin_lock_irqsave(&qp->rq.cons_lock, flags);
	remu_queue_discard(&qp->rq.ring);
	spin_unlock_irqrestore(&qp->rq.cons_lock, flags);
}

/* an affiliated asynchronous event of @qp to its consumer */
void remu_qp_event(struct remu_qp *qp, enum ib_event_type type)
{
	struct ib_qp *ibqp = &qp->ib_qp;
	struct ib_event ev = {
		.device = ibqp->device,
		.element.qp = ibqp,
		.event = type,
	};

	if (ibqp->event_handler)
		ibqp->event_handler(&ev, ibqp->qp_context);
}

/*
 * The QP enters @next (from @cur): the state is published, the engines
 * told (remu_eng_modify()), the queues discarded (RESET) or flushed (ERR).
 */
static void remu_qp_enter(struct remu_qp *qp, enum ib_qp_state cur,
			  enum ib_qp_state next)
{
	lockdep_assert_held(&qp->mutex);
	qp->attr.qp_state = next;
	/*
	 * The path stored before is visible to the receive path with the
	 * state: pairs with remu_rcv_qp()'s smp_load_acquire()
	 */
	smp_store_release(&qp->state, next);
	trace_remu_qp_state(qp, cur, next);
	remu_eng_modify(qp, cur, next);
	switch (next) {
	case IB_QPS_RESET:
		remu_qp_discard(qp);
		qp->last_wqe = false;
		break;
	case IB_QPS_ERR:
		remu_qp_flush_all(qp);
		break;
	case IB_QPS_SQD:
		/* nothing is in flight without a requester: drained */
		if (qp->attr.en_sqd_async_notify)
			remu_qp_event(qp, IB_EVENT_SQ_DRAINED);
		break;
	case IB_QPS_RTS:
		queue_work(remu_wq, &qp->send_work);
		break;
	default:
		break;
	}
}

/*
 * modify_qp under qp->mutex: the transition and the attributes checked,
 * the engines' sets allocated, then (nothing can fail any more) the
 * attributes stored and the new state entered.  @drv: the command's
 * driver data.  @reset: set if the QP entered RESET.
 *
 * IB_QP_RATE_LIMIT: ib_modify_qp_is_ok() lets it through for raw packet
 * QPs only, where mlx5 offers it; remu offers it on the QP types of its
 * packet_pacing_caps, with the same transitions (remu_pace_check()).
 */
static int remu_qp_modify_locked(struct remu_qp *qp, struct ib_qp_attr *attr,
				 int mask, const struct remu_modify_qp_cmd *drv,
				 bool *reset)
{
	struct remu_qp_change c = { .attr = attr, .mask = mask, .drv = drv };
	struct remu_eng_new eng_new;
	int err;

	lockdep_assert_held(&qp->mutex);
	c.cur = qp->state;
	if ((mask & IB_QP_CUR_STATE) && attr->cur_qp_state != c.cur)
		return -EINVAL;
	c.next = (mask & IB_QP_STATE) ? attr->qp_state : c.cur;
	if (!ib_modify_qp_is_ok(c.cur, c.next, qp->ib_qp.qp_type,
				mask & ~IB_QP_RATE_LIMIT))
		return -EINVAL;
	err = remu_pace_check(qp, &c);
	if (err)
		return err;
	err = remu_qp_check_attr(qp, attr, mask);
	if (err)
		return err;
	/* the only allocations: before anything changes */
	err = remu_eng_alloc(qp, &c, &eng_new);
	if (err)
		return err;
	remu_qp_store_attr(qp, attr, mask);
	remu_pace_set(qp, &c);
	/* before the state: the first packet in RTR finds them */
	remu_eng_set(qp, &eng_new);
	if (mask & IB_QP_STATE) {
		remu_qp_enter(qp, c.cur, c.next);
		*reset = c.next == IB_QPS_RESET;
	}
	return 0;
}

/*
 * The driver data of a modify_qp into @cmd (zeroes without any): the
 * burst of a rate limit, ECE options (uapi/rdma/remu-abi.h).  Bytes beyond the struct,
 * a comp_mask or reserved field that is not zero: -EINVAL.
 */
static int remu_modify_qp_drv(struct ib_udata *udata,
			      struct remu_modify_qp_cmd *cmd)
{
	size_t len;

	memset(cmd, 0, sizeof(*cmd));
	if (!udata || !udata->inlen)
		return 0;
	len = min(udata->inlen, sizeof(*cmd));
	if (udata->inlen > len &&
	    !ib_is_udata_cleared(udata, len, udata->inlen - len))
		return -EINVAL;
	if (ib_copy_from_udata(cmd, udata, len))
		return -EFAULT;
	if (cmd->comp_mask || cmd->reserved0)
		return -EINVAL;
	return 0;
}

int remu_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_udata *udata)
{
	struct remu_qp *qp = to_remu_qp(ibqp);
	struct remu_modify_qp_resp resp = {};
	struct remu_modify_qp_cmd drv;
	bool reset = false;
	int err;

	if (mask & ~(IB_QP_ATTR_STANDARD_BITS | IB_QP_RATE_LIMIT))
		return -EOPNOTSUPP;
	err = remu_modify_qp_drv(udata, &drv);
	if (err)
		return err;
	if (drv.ece_options && udata->outlen < sizeof(resp))
		return -EINVAL;

	mutex_lock(&qp->mutex);
	err = remu_qp_modify_locked(qp, attr, mask, &drv, &reset);
	/* ECE asked for with the modification: negotiated once it is made */
	if (!err && drv.ece_options) {
		qp->ece = remu_ece_negotiate(drv.ece_options);
		resp.ece_options = qp->ece;
	}
	mutex_unlock(&qp->mutex);
	if (!err && drv.ece_options)
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
	/*
	 * RESET: the round the engines' owner was in is over, and so is the
	 * reset it then did (remu_eng_reset_mark()), before modify_qp
	 * returns: no completion of the QP comes after (libremu cleans the
	 * CQs next).  Not under qp->mutex, which an owner may wait for; not
	 * from the QP's own work item (an event handler of a kernel ULP).
	 */
	if (reset && current_work() != &qp->send_work)
		remu_eng_wait_run(qp);
	return err;
}

/* `rdma resource show qp -dd`: the driver's part (the rate limit) */
int remu_fill_res_qp_entry(struct sk_buff *msg, struct ib_qp *ibqp)
{
	return remu_pace_fill_res(msg, to_remu_qp(ibqp));
}

int remu_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_qp_init_attr *init)
{
	struct remu_qp *qp = to_remu_qp(ibqp);

	mutex_lock(&qp->mutex);
	*attr = qp->attr;
	mutex_unlock(&qp->mutex);
	attr->cur_qp_state = attr->qp_state;
	attr->sq_draining = 0;

	memset(init, 0, sizeof(*init));
	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->attr.cap;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	if (qp->mcast_no_self)
		init->create_flags = IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK;
	return 0;
}

/**
 * remu_qp_error_begin - an engine moves the QP to ERR (a completion error)
 * @qp: the QP
 *
 * Takes qp->mutex and sets the state, so that a consumer that polls the
 * error completion the caller posts next already finds the QP in ERR (as
 * on real NICs).  remu_qp_error_end() flushes and drops the mutex.
 * Context: the engines' owner (the work item or the doorbell's caller).
 * Return: true if this call moved the QP to ERR.
 */
bool remu_qp_error_begin(struct remu_qp *qp)
{
	enum ib_qp_state cur;

	mutex_lock(&qp->mutex);
	cur = qp->state;
	if (cur == IB_QPS_ERR || cur == IB_QPS_RESET)
		return false;
	qp->attr.qp_state = IB_QPS_ERR;
	WRITE_ONCE(qp->state, IB_QPS_ERR);
	trace_remu_qp_state(qp, cur, IB_QPS_ERR);
	remu_eng_modify(qp, cur, IB_QPS_ERR);
	return true;
}

/**
 * remu_qp_error_end - finish remu_qp_error_begin()
 * @qp: the QP
 * @entered: what remu_qp_error_begin() returned
 *
 * Flushes what is left in the SQ and RQ, as modify_qp to ERR does, and
 * drops qp->mutex.
 */
void remu_qp_error_end(struct remu_qp *qp, bool entered)
{
	if (entered)
		remu_qp_flush_all(qp);
	mutex_unlock(&qp->mutex);
}

/* remu_qp_error - move the QP to ERR and flush (no completion of its own) */
void remu_qp_error(struct remu_qp *qp)
{
	remu_qp_error_end(qp, remu_qp_error_begin(qp));
}

/*
 * remu_qp_last_wqe - a QP on an SRQ in ERR will take no more WQEs from the
 * SRQ: raise IB_EVENT_QP_LAST_WQE_REACHED, once per entry to ERR.  The
 * core's ib_drain_qp() (__ib_drain_srq()) waits for it before it frees
 * the QP's receive buffers.
 * Context: the work item as the engines' owner (remu_qp_err_work()):
 * the responder takes SRQ WQEs only as their owner, so none is being
 * used while this runs; takes qp->mutex.
 */
static void remu_qp_last_wqe(struct remu_qp *qp)
{
	bool fire = false;

	mutex_lock(&qp->mutex);
	if (qp->state == IB_QPS_ERR && !qp->last_wqe) {
		qp->last_wqe = true;
		fire = true;
	}
	mutex_unlock(&qp->mutex);
	if (fire)
		remu_qp_event(qp, IB_EVENT_QP_LAST_WQE_REACHED);
}

/*
 * In ERR, from the engines' owner in the work item (remu_eng_run()):
 * drop what arrived, flush what was posted since the QP entered ERR, and
 * on an SRQ raise Last WQE Reached.
 */
void remu_qp_err_work(struct remu_qp *qp)
{
	skb_queue_purge(&qp->eng.rxq);
	remu_flush_sq(qp);
	remu_flush_rq(qp);
	if (qp->srq)
		remu_qp_last_wqe(qp);
}

/*
 * The QP's work item on remu_wq: the engines (remu_eng_run()) unless
 * someone else owns them, for a kernel consumer's post, a doorbell that
 * could not run them itself, a packet, a timer, a state change.
 */
static void remu_qp_send_work(struct work_struct *work)
{
	struct remu_qp *qp = container_of(work, struct remu_qp, send_work);

	remu_eng_run(qp, false);
}

static bool remu_opcode_ok(enum ib_qp_type type, enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
		return true;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_LOCAL_INV:
	case IB_WR_REG_MR:
		return type != IB_QPT_UD;
	case IB_WR_RDMA_READ:
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
	case IB_WR_SEND_WITH_INV:
		return type == IB_QPT_RC;
	default:
		/* integrity, memory windows, masked atomics: not supported */
		return false;
	}
}

/*
 * A REG_MR's parameters go into the slot's side record @r, not the WQE:
 * the MR must be a fast-reg MR of this device; its state, PD, key and
 * rights are checked when the requester executes it, in order.
 */
static int remu_fill_reg_mr(struct remu_qp *qp, const struct ib_reg_wr *wr,
			    struct remu_kreg *r)
{
	struct remu_mr *mr;

	if (!wr->mr || wr->mr->device != qp->ib_qp.device)
		return -EINVAL;
	mr = to_remu_mr(wr->mr);
	if (mr->kind != REMU_MR_FAST_REG)
		return -EINVAL;
	r->mr = mr;
	r->key = wr->key;
	r->access = wr->access;
	r->iova = wr->mr->iova;
	r->length = wr->mr->length;
	return 0;
}

/*
 * Can @qp take @wr: its opcode, its SGE count, its inline bytes (summed
 * into @len).  Return: 0 or -EINVAL.
 */
static int remu_send_wr_check(struct remu_qp *qp, const struct ib_send_wr *wr,
			      u32 *len)
{
	int i;

	if (!remu_opcode_ok(remu_qp_type(qp), wr->opcode))
		return -EINVAL;
	if (wr->num_sge < 0 || wr->num_sge > qp->sq.max_sge)
		return -EINVAL;
	*len = 0;
	if (!(wr->send_flags & IB_SEND_INLINE))
		return 0;
	for (i = 0; i < wr->num_sge; i++)
		*len += wr->sg_list[i].length;
	return *len > qp->max_inline ? -EINVAL : 0;
}

/* The WQE's fixed part, from @wr: flags, immediate data or key, remote VA. */
static void remu_fill_wqe_hdr(struct remu_qp *qp, const struct ib_send_wr *wr,
			      struct remu_send_wqe *w)
{
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->flags = wr->send_flags & (IB_SEND_FENCE | IB_SEND_SIGNALED |
				     IB_SEND_SOLICITED | IB_SEND_INLINE);
	if (qp->sq_sig_all)
		w->flags |= REMU_WQE_SIGNALED;
	if (wr->opcode == IB_WR_SEND_WITH_IMM ||
	    wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM)
		w->ex_data = (__force u32)wr->ex.imm_data;
	else if (wr->opcode == IB_WR_SEND_WITH_INV ||
		 wr->opcode == IB_WR_LOCAL_INV)
		w->ex_data = wr->ex.invalidate_rkey;

	switch (wr->opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_RDMA_READ:
		w->remote_addr = rdma_wr(wr)->remote_addr;
		w->rkey = rdma_wr(wr)->rkey;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		w->remote_addr = atomic_wr(wr)->remote_addr;
		w->rkey = atomic_wr(wr)->rkey;
		w->compare_add = atomic_wr(wr)->compare_add;
		w->swap = atomic_wr(wr)->swap;
		break;
	default:
		break;
	}
}

/* A UD WQE's destination: an AH of the QP's PD.  Return: 0 or -EINVAL. */
static int remu_fill_wqe_ud(struct remu_qp *qp, const struct ib_send_wr *wr,
			    struct remu_send_wqe *w)
{
	struct ib_ah *ah = ud_wr(wr)->ah;

	if (!ah || ah->pd != qp->ib_qp.pd)
		return -EINVAL;
	if (ud_wr(wr)->pkey_index >= REMU_PKEY_TBL_LEN)
		return -EINVAL;
	w->ah_num = to_remu_ah(ah)->ah_num;
	w->remote_qpn = ud_wr(wr)->remote_qpn;
	w->remote_qkey = ud_wr(wr)->remote_qkey;
	return 0;
}

/* The WQE's data: @len inline bytes copied in, or the SGEs. */
static void remu_fill_wqe_data(const struct ib_send_wr *wr,
			       struct remu_send_wqe *w, u32 len)
{
	struct remu_sge *sge = (struct remu_sge *)(w + 1);
	u8 *inl = (u8 *)(w + 1);
	int i;

	if (wr->send_flags & IB_SEND_INLINE) {
		for (i = 0; i < wr->num_sge; i++) {
			memcpy(inl, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			inl += wr->sg_list[i].length;
		}
		w->inline_len = len;
		return;
	}
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}
	w->num_sge = wr->num_sge;
}

/*
 * Build the WQE for a kernel consumer's @wr into the (kernel) slot of
 * ring index @idx.
 */
static int remu_fill_send_wqe(struct remu_qp *qp, const struct ib_send_wr *wr,
			      u32 idx)
{
	struct remu_send_wqe *w = remu_queue_slot_at(&qp->sq.ring, idx);
	u32 len;
	int err;

	err = remu_send_wr_check(qp, wr, &len);
	if (err)
		return err;
	if (wr->opcode == IB_WR_REG_MR) {
		err = remu_fill_reg_mr(qp, reg_wr(wr),
				       &qp->eng.kreg[idx & qp->sq.ring.mask]);
		if (err)
			return err;
	}
	remu_fill_wqe_hdr(qp, wr, w);
	if (remu_qp_type(qp) == IB_QPT_UD) {
		err = remu_fill_wqe_ud(qp, wr, w);
		if (err)
			return err;
	}
	remu_fill_wqe_data(wr, w, len);
	return 0;
}

/*
 * post_send.  From a process this is only the doorbell (wr == NULL, the
 * WQEs are in the ring already); from a kernel consumer it writes WQEs.
 */
int remu_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		   const struct ib_send_wr **bad_wr)
{
	struct remu_qp *qp = to_remu_qp(ibqp);
	enum ib_qp_state state = READ_ONCE(qp->state);
	unsigned long flags;
	int err = 0;

	if (!wr) {
		if (state == IB_QPS_RESET || state == IB_QPS_INIT ||
		    state == IB_QPS_RTR)
			return -EINVAL;
		if (qp->eng.uav) {	/* UD: the AVs of what was posted */
			spin_lock_irqsave(&qp->sq.prod_lock, flags);
			remu_req_post_av(qp);
			spin_unlock_irqrestore(&qp->sq.prod_lock, flags);
		}
		/* in RTS the caller runs the engines (remu_eng.c) */
		if (state == IB_QPS_RTS)
			remu_eng_doorbell(qp);
		else
			queue_work(remu_wq, &qp->send_work);
		return 0;
	}
	if (qp->is_user || state == IB_QPS_RESET || state == IB_QPS_INIT ||
	    state == IB_QPS_RTR) {
		*bad_wr = wr;
		return -EINVAL;
	}

	spin_lock_irqsave(&qp->sq.prod_lock, flags);
	for (; wr; wr = wr->next) {
		if (!remu_queue_producer_slot(&qp->sq.ring)) {
			err = -ENOMEM;
			break;
		}
		err = remu_fill_send_wqe(qp, wr, qp->sq.ring.prod);
		if (err)
			break;
		remu_queue_produce(&qp->sq.ring);
	}
	if (qp->eng.uav)
		remu_req_post_av(qp);
	spin_unlock_irqrestore(&qp->sq.prod_lock, flags);
	if (err)
		*bad_wr = wr;
	queue_work(remu_wq, &qp->send_work);
	return err;
}

/**
 * remu_wq_post_recv - write one kernel consumer's receive WQE
 * @wq: the RQ or SRQ; caller holds @wq->prod_lock
 * @wr: the WR
 *
 * Return: 0, -EINVAL for too many SGEs, -ENOMEM when the ring is full.
 */
int remu_wq_post_recv(struct remu_wq *wq, const struct ib_recv_wr *wr)
{
	struct remu_recv_wqe *w;
	struct remu_sge *sge;
	int i;

	lockdep_assert_held(&wq->prod_lock);
	if (wr->num_sge < 0 || wr->num_sge > wq->max_sge)
		return -EINVAL;
	w = remu_queue_producer_slot(&wq->ring);
	if (!w)
		return -ENOMEM;
	w->wr_id = wr->wr_id;
	w->num_sge = wr->num_sge;
	w->reserved = 0;
	sge = (struct remu_sge *)(w + 1);
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}
	remu_queue_produce(&wq->ring);
	return 0;
}

/* post_recv for kernel consumers; processes write the RQ ring themselves. */
int remu_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		   const struct ib_recv_wr **bad_wr)
{
	struct remu_qp *qp = to_remu_qp(ibqp);
	enum ib_qp_state state = READ_ONCE(qp->state);
	unsigned long flags;
	int err = 0;

	if (qp->is_user || qp->srq || state == IB_QPS_RESET) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&qp->rq.prod_lock, flags);
	for (; wr; wr = wr->next) {
		err = remu_wq_post_recv(&qp->rq, wr);
		if (err)
			break;
	}
	spin_unlock_irqrestore(&qp->rq.prod_lock, flags);
	if (err)
		*bad_wr = wr;
	if (state == IB_QPS_ERR)
		queue_work(remu_wq, &qp->send_work);
	return err;
}
