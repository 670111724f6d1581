// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * cq_ex.c - ibv_create_cq_ex(), the ibv_start_poll() poll API and the
 * device clock (ibv_query_rt_values_ex()) of libremu.
 *
 * The CQ is the ring ibv_create_cq() maps (queues.c), which ibv_poll_cq()
 * keeps reading too.  ibv_start_poll() takes the CQ lock and moves the
 * private consumer index past the oldest CQE, which stays where it is in
 * the ring: the ibv_wc_read_*() functions read it there, with no copy and
 * no system call.  ibv_next_poll() moves on; ibv_end_poll() publishes the
 * consumer index (the kernel may then reuse the slots) and unlocks.
 * Inline receive data is placed at start/next_poll, as poll_cq does.
 *
 * Completion timestamps: a CQ whose wc_flags ask for
 * IBV_WC_EX_WITH_COMPLETION_TIMESTAMP or _WALLCLOCK is created with
 * REMU_CREATE_CQ_TIMESTAMP when the module offers it
 * (REMU_UCTX_CQE_TIMESTAMP); the kernel then ends every slot with a
 * struct remu_cqe_ts.  The device clock is CLOCK_MONOTONIC_RAW in ns
 * (hca_core_clock 1000000 kHz), so ibv_query_rt_values_ex() reads it
 * here through the vDSO, as mlx5 reads its clock page.
 *
 * Refusals follow mlx5: cqe 0, an unknown comp_mask or creation flag,
 * a PD that is not a parent domain: EINVAL; wc_flags the CQ cannot
 * fill: EOPNOTSUPP; start_poll with a comp_mask: EINVAL.  A flag mlx5
 * has and remu has not (IGNORE_OVERRUN: remu's full CQ loses the CQE and
 * raises CQ_ERR) is EOPNOTSUPP, as for wc_flags.  A parent domain
 * (IBV_CQ_INIT_ATTR_MASK_PD) counts the CQ (domain.c) and changes
 * nothing else: its allocators have no buffer to give (remu's rings are
 * the kernel's) and a CQ keeps its lock in a thread domain, as on mlx5.
 *
 * Locking: cq->lock from ibv_start_poll() (when it returns 0) to
 * ibv_end_poll(), none with IBV_CREATE_CQ_ATTR_SINGLE_THREADED (the
 * application polls from one thread at a time, mlx5's single-threaded
 * poll functions); cq->cur is only touched there.  ibv_poll_cq() locks
 * either way, as mlx5's.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "remu-abi.h"
#include "remu.h"

#define REMU_WC_TS	(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
			 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

/* ---- polling ---- */

/* the timestamps at the end of @c's slot (CQs with timestamps only) */
static const struct remu_cqe_ts *remu_cqe_ts(const struct remu_cq *cq,
					     const struct remu_cqe *c)
{
	return (const void *)((const uint8_t *)c + cq->ring.slot_size -
			      REMU_CQE_TS_SIZE);
}

/*
 * Make the next CQE current: 0, ENOENT when there is none, EIO when the
 * device is gone (checked after the read: it may have been the dead
 * page).  Caller holds cq->lock.
 */
static int remu_cq_next(struct remu_cq *cq)
{
	struct ibv_cq_ex *cqx = &cq->vcq.cq_ex;
	struct remu_cqe *c = remu_uring_cons_slot(&cq->ring);

	cq->cur = NULL;
	if (remu_uring_dead(&cq->ring))
		return EIO;
	if (!c)
		return ENOENT;
	if (cq->inline_recv && (c->flags & REMU_CQE_INLINE))
		remu_cqe_place((const struct remu_cqe_ext *)c);
	remu_uring_cons_advance(&cq->ring);
	cq->cur = c;
	cqx->wr_id = c->wr_id;
	cqx->status = c->status;
	return 0;
}

static int remu_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct remu_cq *cq = ex_to_rcq(cqx);
	int ret;

	if (attr->comp_mask)
		return EINVAL;
	if (!cq->single_threaded)
		pthread_spin_lock(&cq->lock);
	ret = remu_cq_next(cq);
	if (ret && !cq->single_threaded)	/* no ibv_end_poll() follows */
		pthread_spin_unlock(&cq->lock);
	return ret;
}

/* ENOENT leaves the CQ locked: ibv_end_poll() follows */
static int remu_next_poll(struct ibv_cq_ex *cqx)
{
	return remu_cq_next(ex_to_rcq(cqx));
}

static void remu_end_poll(struct ibv_cq_ex *cqx)
{
	struct remu_cq *cq = ex_to_rcq(cqx);

	cq->cur = NULL;
	remu_uring_cons_publish(&cq->ring);
	if (!cq->single_threaded)
		pthread_spin_unlock(&cq->lock);
}

/* ---- the current completion's fields ---- */

static enum ibv_wc_opcode remu_read_opcode(struct ibv_cq_ex *cqx)
{
	return ex_to_rcq(cqx)->cur->opcode;
}

static uint32_t remu_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return ex_to_rcq(cqx)->cur->vendor_err;
}

static unsigned int remu_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return remu_cqe_wc_flags(ex_to_rcq(cqx)->cur);
}

static uint32_t remu_read_byte_len(struct ibv_cq_ex *cqx)
{
	return ex_to_rcq(cqx)->cur->byte_len;
}

/* also ibv_wc_read_invalidated_rkey() */
static __be32 remu_read_imm_data(struct ibv_cq_ex *cqx)
{
	return (__be32)ex_to_rcq(cqx)->cur->ex_data;
}

static uint32_t remu_read_qp_num(struct ibv_cq_ex *cqx)
{
	return ex_to_rcq(cqx)->cur->qp_num;
}

static uint32_t remu_read_src_qp(struct ibv_cq_ex *cqx)
{
	return ex_to_rcq(cqx)->cur->src_qp;
}

static uint32_t remu_read_slid(struct ibv_cq_ex *cqx)
{
	return ex_to_rcq(cqx)->cur->slid;
}

static uint8_t remu_read_sl(struct ibv_cq_ex *cqx)
{
	return remu_cqe_sl(ex_to_rcq(cqx)->cur);
}

static uint8_t remu_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return ex_to_rcq(cqx)->cur->dlid_path_bits;
}

static uint64_t remu_read_completion_ts(struct ibv_cq_ex *cqx)
{
	struct remu_cq *cq = ex_to_rcq(cqx);

	return remu_cqe_ts(cq, cq->cur)->ts;
}

static uint64_t remu_read_completion_wallclock_ns(struct ibv_cq_ex *cqx)
{
	struct remu_cq *cq = ex_to_rcq(cqx);

	return remu_cqe_ts(cq, cq->cur)->wallclock;
}

/*
 * The poll functions, and a read function for each field @wc_flags asks
 * for (opcode, vendor_err and wc_flags always), as mlx5 sets them.
 */
static void remu_cq_fill_ops(struct ibv_cq_ex *cqx, uint64_t wc_flags)
{
	cqx->start_poll = remu_start_poll;
	cqx->next_poll = remu_next_poll;
	cqx->end_poll = remu_end_poll;
	cqx->read_opcode = remu_read_opcode;
	cqx->read_vendor_err = remu_read_vendor_err;
	cqx->read_wc_flags = remu_read_wc_flags;
	if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx->read_byte_len = remu_read_byte_len;
	if (wc_flags & IBV_WC_EX_WITH_IMM)
		cqx->read_imm_data = remu_read_imm_data;
	if (wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx->read_qp_num = remu_read_qp_num;
	if (wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx->read_src_qp = remu_read_src_qp;
	if (wc_flags & IBV_WC_EX_WITH_SLID)
		cqx->read_slid = remu_read_slid;
	if (wc_flags & IBV_WC_EX_WITH_SL)
		cqx->read_sl = remu_read_sl;
	if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx->read_dlid_path_bits = remu_read_dlid_path_bits;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		cqx->read_completion_ts = remu_read_completion_ts;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		cqx->read_completion_wallclock_ns =
			remu_read_completion_wallclock_ns;
}

/* ---- creation ---- */

/* the wc_flags a CQ of @ctx can fill */
static uint64_t remu_cq_wc_flags(struct ibv_context *ctx)
{
	uint64_t f = IBV_WC_STANDARD_FLAGS;

	if (to_rctx(ctx)->kernel_caps & REMU_UCTX_CQE_TIMESTAMP)
		f |= REMU_WC_TS;
	return f;
}

struct ibv_cq_ex *remu_create_cq_ex(struct ibv_context *ctx,
				    struct ibv_cq_init_attr_ex *attr)
{
	struct remu_cmd_create_cq_ex_resp resp = {};
	struct remu_cmd_create_cq_ex cmd = {};
	uint32_t flags = attr->flags;
	struct remu_cq *cq;
	int ret;

	if (!(attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS))
		flags = 0;
	if (!attr->cqe ||
	    (attr->comp_mask & ~(IBV_CQ_INIT_ATTR_MASK_FLAGS |
				 IBV_CQ_INIT_ATTR_MASK_PD)) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	     (!attr->parent_domain || !to_rpd(attr->parent_domain)->parent ||
	      attr->parent_domain->context != ctx)) ||
	    (flags & ~(IBV_CREATE_CQ_ATTR_SINGLE_THREADED |
		       IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN))) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->wc_flags & ~remu_cq_wc_flags(ctx)) ||
	    (flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	cq->single_threaded = !!(flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	cq->inline_recv = remu_want_inline_recv(ctx, attr->cqe);
	cq->timestamp = !!(attr->wc_flags & REMU_WC_TS);
	if (cq->inline_recv)
		cmd.flags |= REMU_CREATE_CQ_INLINE_RECV;
	if (cq->timestamp)
		cmd.flags |= REMU_CREATE_CQ_TIMESTAMP;
	remu_cq_fill_ops(&cq->vcq.cq_ex, attr->wc_flags);
	ret = ibv_cmd_create_cq_ex(ctx, attr, &cq->vcq, &cmd.ibv_cmd,
				   sizeof(cmd), &resp.ibv_resp, sizeof(resp),
				   0);
	if (ret)
		goto err_free;
	ret = remu_cq_map(cq, ctx, &resp.ring);
	if (ret) {
		ibv_cmd_destroy_cq(&cq->vcq.cq);
		goto err_free;
	}
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)
		cq->parent = remu_parent_domain_get(attr->parent_domain);
	return &cq->vcq.cq_ex;

err_free:
	remu_cq_free(cq);
	errno = ret;
	return NULL;
}

/*
 * The device clock now, in the units of ibv_wc_read_completion_ts()
 * (ns: tv_sec 0, tv_nsec the count, as mlx5 reports cycles).
 */
int remu_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *values)
{
	struct timespec now;

	if (values->comp_mask & ~IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (!(to_rctx(ctx)->kernel_caps & REMU_UCTX_CQE_TIMESTAMP))
		return EOPNOTSUPP;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		clock_gettime(CLOCK_MONOTONIC_RAW, &now);
		values->raw_clock.tv_sec = 0;
		values->raw_clock.tv_nsec = now.tv_sec * 1000000000L +
					    now.tv_nsec;
	}
	return 0;
}
