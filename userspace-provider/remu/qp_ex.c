// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * qp_ex.c - ibv_create_qp_ex() and the ibv_wr_* post API of libremu.
 *
 * The QP is the one ibv_create_qp() makes (queues.c): same SQ ring, same
 * WQE layout (wqe.h), same doorbell.  ibv_wr_start() takes the SQ lock
 * and remembers the private producer index; each ibv_wr_<op>() claims
 * the next slot and fills its fixed part, each ibv_wr_set_*() fills the
 * data of the WQE claimed last, all in the ring memory and without a
 * system call; ibv_wr_complete() publishes the producer index once and
 * rings the doorbell once (one write()), ibv_wr_abort() puts the private
 * index back, so the kernel never sees a WQE of that batch.
 *
 * Errors, as mlx5: the first error of a batch (ring full, too many SGEs,
 * inline data too long: ENOMEM; an opcode the QP type cannot post, a
 * setter with no WQE to fill, a bad AH or bind: EINVAL; the device gone:
 * EIO) is kept, everything after it in the batch is ignored, and
 * ibv_wr_complete() returns it with nothing of the batch posted.
 *
 * The opcodes (remu_wr_ops[]): what each QP type may post, which types
 * may ask for its IBV_QP_EX_WITH_* flag at creation (the same, but for
 * SEND_WITH_INV on UC: mlx5 and rxe accept the flag, IBA has no such UC
 * packet, so remu refuses the WR), and, for an opcode the module must
 * offer, the REMU_UCTX_* bit it announces (ATOMIC_WRITE and FLUSH need
 * REMU_UCTX_FLUSH_ATOMIC_WRITE).  ibv_post_send() checks opcodes against
 * the same table (and refuses those two: ibv_send_wr cannot carry them).
 *
 * FLUSH also needs a libibverbs newer than 44 (ibv_qp_ex.wr_flush): at
 * build time, the tree's verbs.h must have it (REMU_HAVE_WR_FLUSH, a
 * compile probe in CMakeLists.txt: a provider built in rdma-core 44's
 * tree, the one Debian 12's libibverbs loads, has no FLUSH at all); at
 * run time, the loading libibverbs must have it (remu_qp_mark_ex()).
 *
 * Locking: the batch holds qp->sq_lock from ibv_wr_start() to
 * ibv_wr_complete()/ibv_wr_abort(); wr_cur, wr_start and wr_err are only
 * touched under it.
 */
#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "remu.h"
#include "wqe.h"

#define QPT(t)	(1u << (t))
#define RC_UC	(QPT(IBV_QPT_RC) | QPT(IBV_QPT_UC))
#define ALL	(RC_UC | QPT(IBV_QPT_UD))

#define RC	QPT(IBV_QPT_RC)

/* not the module's: the loading libibverbs knows ibv_qp_ex.wr_flush */
#define REMU_VERBS_WR_FLUSH	(1u << 31)

static const struct remu_wr_op {
	uint64_t send_op;		/* IBV_QP_EX_WITH_* */
	enum ibv_wr_opcode opcode;
	uint32_t post_types;		/* QPT()s of the types that post it */
	uint32_t ask_types;		/* ... that may ask for send_op */
	uint32_t kernel_cap;		/* REMU_UCTX_* (REMU_VERBS_*) it needs */
} remu_wr_ops[] = {
	{ IBV_QP_EX_WITH_SEND, IBV_WR_SEND, ALL, ALL, 0 },
	{ IBV_QP_EX_WITH_SEND_WITH_IMM, IBV_WR_SEND_WITH_IMM, ALL, ALL, 0 },
	{ IBV_QP_EX_WITH_SEND_WITH_INV, IBV_WR_SEND_WITH_INV, RC, RC_UC, 0 },
	{ IBV_QP_EX_WITH_RDMA_WRITE, IBV_WR_RDMA_WRITE, RC_UC, RC_UC, 0 },
	{ IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM,
	  RC_UC, RC_UC, 0 },
	{ IBV_QP_EX_WITH_RDMA_READ, IBV_WR_RDMA_READ, RC, RC, 0 },
	{ IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_CMP_AND_SWP,
	  RC, RC, 0 },
	{ IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_FETCH_AND_ADD,
	  RC, RC, 0 },
	{ IBV_QP_EX_WITH_LOCAL_INV, IBV_WR_LOCAL_INV, RC_UC, RC_UC, 0 },
	{ IBV_QP_EX_WITH_BIND_MW, IBV_WR_BIND_MW, RC_UC, RC_UC, 0 },
	{ IBV_QP_EX_WITH_ATOMIC_WRITE, IBV_WR_ATOMIC_WRITE, RC, RC,
	  REMU_UCTX_FLUSH_ATOMIC_WRITE },
#if REMU_HAVE_WR_FLUSH
	{ IBV_QP_EX_WITH_FLUSH, IBV_WR_FLUSH, RC, RC,
	  REMU_UCTX_FLUSH_ATOMIC_WRITE | REMU_VERBS_WR_FLUSH },
#endif
};

#define NR_WR_OPS (sizeof(remu_wr_ops) / sizeof(remu_wr_ops[0]))

/*
 * Does the libibverbs that loaded libremu know ibv_qp_ex.wr_flush (added
 * after rdma-core 44, with no private ABI change)?  There is no version
 * to ask; ibv_cmd_create_cq_ex2, a private symbol of later releases, says
 * it is new enough.  A release between the two is taken for old: FLUSH is
 * then refused, which is safe.
 */
static int remu_verbs_has_wr_flush(void)
{
	static int known = -1;

	if (!REMU_HAVE_WR_FLUSH)
		return 0;
	if (known < 0)
		known = dlsym(RTLD_DEFAULT, "ibv_cmd_create_cq_ex2") != NULL;
	return known;
}

/* Is a QP of @type, one of @types, on @ctx, offered @op? */
static int remu_wr_op_ok(struct ibv_context *ctx, enum ibv_qp_type type,
			 uint32_t types, const struct remu_wr_op *op)
{
	uint32_t caps = to_rctx(ctx)->kernel_caps;

	if (remu_verbs_has_wr_flush())
		caps |= REMU_VERBS_WR_FLUSH;
	return (unsigned int)type < 32 && (types & QPT(type)) &&
	       (caps & op->kernel_cap) == op->kernel_cap;
}

/* 1 << IBV_WR_* of each opcode a QP of @type may post (struct remu_qp) */
uint32_t remu_qp_op_mask(struct ibv_context *ctx, enum ibv_qp_type type)
{
	const struct remu_wr_op *op;
	uint32_t mask = 0;

	for (op = remu_wr_ops; op < remu_wr_ops + NR_WR_OPS; op++)
		if (remu_wr_op_ok(ctx, type, op->post_types, op))
			mask |= 1u << op->opcode;
	return mask;
}

/* May a QP of @type ask for every IBV_QP_EX_WITH_* in @ops? */
static int remu_send_ops_ok(struct ibv_context *ctx, enum ibv_qp_type type,
			    uint64_t ops)
{
	const struct remu_wr_op *op;

	for (op = remu_wr_ops; op < remu_wr_ops + NR_WR_OPS; op++)
		if (remu_wr_op_ok(ctx, type, op->ask_types, op))
			ops &= ~op->send_op;
	return !ops;
}

/* ---- the batch ---- */

static void remu_wr_fail(struct remu_qp *qp, int err)
{
	if (!qp->wr_err)
		qp->wr_err = err;
	qp->wr_cur = NULL;
}

/*
 * Claim the next SQ slot for a WQE of @op with the QP's wr_id and
 * wr_flags: the WQE, or NULL (the batch's error recorded).
 */
static struct remu_send_wqe *remu_wr_new(struct ibv_qp_ex *qpx,
					 enum ibv_wr_opcode op)
{
	struct remu_qp *qp = ex_to_rqp(qpx);
	struct remu_send_wqe *w;

	qp->wr_cur = NULL;
	if (qp->wr_err)
		return NULL;
	if (!remu_opcode_ok(qp, op)) {
		remu_wr_fail(qp, EINVAL);
		return NULL;
	}
	if (remu_uring_dead(&qp->sq)) {
		remu_wr_fail(qp, EIO);
		return NULL;
	}
	w = remu_uring_prod_slot(&qp->sq);
	if (!w) {
		remu_wr_fail(qp, ENOMEM);
		return NULL;
	}
	remu_wqe_init(w, qpx->wr_id, op, qpx->wr_flags);
	remu_uring_prod_advance(&qp->sq);
	qp->wr_cur = w;
	return w;
}

static void remu_wr_start(struct ibv_qp_ex *qpx)
{
	struct remu_qp *qp = ex_to_rqp(qpx);

	remu_lock(&qp->sq_lock);
	qp->wr_start = qp->sq.idx;
	qp->wr_cur = NULL;
	qp->wr_err = 0;
}

static void remu_wr_abort(struct ibv_qp_ex *qpx)
{
	struct remu_qp *qp = ex_to_rqp(qpx);

	qp->sq.idx = qp->wr_start;	/* prod was never published */
	qp->wr_cur = NULL;
	remu_unlock(&qp->sq_lock);
}

/*
 * Publish the batch and ring the doorbell once, or, after an error (or
 * in a state ibv_post_send() refuses too), put nothing out and return it.
 */
static int remu_wr_complete(struct ibv_qp_ex *qpx)
{
	struct remu_qp *qp = ex_to_rqp(qpx);
	struct ibv_qp *ibqp = &qpx->qp_base;
	uint32_t n = qp->sq.idx - qp->wr_start;
	int err = qp->wr_err;

	if (!err && n) {
		if (remu_uring_dead(&qp->sq))
			err = EIO;
		else if (ibqp->state == IBV_QPS_RESET ||
			 ibqp->state == IBV_QPS_INIT ||
			 ibqp->state == IBV_QPS_RTR)
			err = EINVAL;
	}
	if (err) {
		remu_wr_abort(qpx);
		return err;
	}
	qp->wr_cur = NULL;
	if (n)
		remu_uring_prod_publish(&qp->sq);
	remu_unlock(&qp->sq_lock);
	return n ? remu_doorbell(ibqp) : 0;
}

/* ---- one builder per opcode ---- */

static void remu_wr_send(struct ibv_qp_ex *qpx)
{
	remu_wr_new(qpx, IBV_WR_SEND);
}

static void remu_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct remu_send_wqe *w = remu_wr_new(qpx, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->ex_data = (uint32_t)imm_data;
}

static void remu_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct remu_send_wqe *w = remu_wr_new(qpx, IBV_WR_SEND_WITH_INV);

	if (w)
		w->ex_data = invalidate_rkey;
}

/* the remote side of a WQE of @op */
static struct remu_send_wqe *remu_wr_remote(struct ibv_qp_ex *qpx,
					    enum ibv_wr_opcode op,
					    uint32_t rkey, uint64_t remote_addr)
{
	struct remu_send_wqe *w = remu_wr_new(qpx, op);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = remote_addr;
	}
	return w;
}

static void remu_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			       uint64_t remote_addr)
{
	remu_wr_remote(qpx, IBV_WR_RDMA_WRITE, rkey, remote_addr);
}

static void remu_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				   uint64_t remote_addr, __be32 imm_data)
{
	struct remu_send_wqe *w = remu_wr_remote(qpx,
						 IBV_WR_RDMA_WRITE_WITH_IMM,
						 rkey, remote_addr);

	if (w)
		w->ex_data = (uint32_t)imm_data;
}

static void remu_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr)
{
	remu_wr_remote(qpx, IBV_WR_RDMA_READ, rkey, remote_addr);
}

static void remu_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				   uint64_t remote_addr, uint64_t compare,
				   uint64_t swap)
{
	struct remu_send_wqe *w = remu_wr_remote(qpx,
						 IBV_WR_ATOMIC_CMP_AND_SWP,
						 rkey, remote_addr);

	if (w) {
		w->compare_add = compare;
		w->swap = swap;
	}
}

static void remu_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				     uint64_t remote_addr, uint64_t add)
{
	struct remu_send_wqe *w = remu_wr_remote(qpx,
						 IBV_WR_ATOMIC_FETCH_AND_ADD,
						 rkey, remote_addr);

	if (w)
		w->compare_add = add;
}

/* type 2B windows only (type 1: ibv_bind_mw()); no data to set after it */
static void remu_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
			    uint32_t rkey,
			    const struct ibv_mw_bind_info *bind_info)
{
	struct remu_send_wqe *w = remu_wr_new(qpx, IBV_WR_BIND_MW);
	struct remu_qp *qp = ex_to_rqp(qpx);

	if (!w)
		return;
	if (remu_wqe_bind(w, mw, rkey, bind_info, 0))
		remu_wr_fail(qp, EINVAL);
	qp->wr_cur = NULL;
}

/* IBA 1.5 ATOMIC_WRITE: the 8 bytes at @atomic_wr; no data to set after */
static void remu_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				 uint64_t remote_addr, const void *atomic_wr)
{
	struct remu_send_wqe *w = remu_wr_remote(qpx, IBV_WR_ATOMIC_WRITE,
						 rkey, remote_addr);

	if (w)
		memcpy(&w->compare_add, atomic_wr, sizeof(w->compare_add));
	ex_to_rqp(qpx)->wr_cur = NULL;
}

#if REMU_HAVE_WR_FLUSH
/*
 * IBA 1.5 FLUSH of @len bytes (IBV_FLUSH_RANGE) or of the whole MR
 * (IBV_FLUSH_MR, @level), placement @type IBV_FLUSH_GLOBAL and/or
 * IBV_FLUSH_PERSISTENT: the FETH's bits; no data to set after
 */
static void remu_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey,
			  uint64_t remote_addr, size_t len, uint8_t type,
			  uint8_t level)
{
	struct remu_send_wqe *w = remu_wr_remote(qpx, IBV_WR_FLUSH, rkey,
						 remote_addr);
	struct remu_qp *qp = ex_to_rqp(qpx);

	if (w && (!type || (type & ~(IBV_FLUSH_GLOBAL | IBV_FLUSH_PERSISTENT)) ||
		  level > IBV_FLUSH_MR || len > UINT32_MAX))
		remu_wr_fail(qp, EINVAL);
	else if (w) {
		w->compare_add = len;
		w->ex_data = type | (uint32_t)level << 4;
	}
	qp->wr_cur = NULL;
}
#endif

static void remu_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct remu_send_wqe *w = remu_wr_new(qpx, IBV_WR_LOCAL_INV);

	if (w)
		w->ex_data = invalidate_rkey;
	ex_to_rqp(qpx)->wr_cur = NULL;
}

/* ---- the data of the WQE built last ---- */

/* the WQE the setters fill, or NULL (error recorded unless one was) */
static struct remu_send_wqe *remu_wr_cur(struct remu_qp *qp)
{
	if (!qp->wr_cur && !qp->wr_err)
		remu_wr_fail(qp, EINVAL);
	return qp->wr_cur;
}

static void remu_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey,
			    uint64_t addr, uint32_t length)
{
	struct remu_send_wqe *w = remu_wr_cur(ex_to_rqp(qpx));
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	if (w)
		remu_wqe_sges(w, &sge, 1);
}

static void remu_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				 const struct ibv_sge *sg_list)
{
	struct remu_qp *qp = ex_to_rqp(qpx);
	struct remu_send_wqe *w = remu_wr_cur(qp);

	if (!w)
		return;
	if (num_sge > qp->max_send_sge) {
		remu_wr_fail(qp, ENOMEM);
		return;
	}
	remu_wqe_sges(w, sg_list, num_sge);
}

static void remu_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
					 const struct ibv_data_buf *buf_list)
{
	struct remu_qp *qp = ex_to_rqp(qpx);
	struct remu_send_wqe *w = remu_wr_cur(qp);
	size_t i, len = 0;

	if (!w)
		return;
	for (i = 0; i < num_buf; i++) {
		len += buf_list[i].length;
		if (len > qp->max_inline) {
			remu_wr_fail(qp, ENOMEM);
			return;
		}
	}
	remu_wqe_inline_start(w);
	for (i = 0; i < num_buf; i++)
		remu_wqe_inline_add(w, buf_list[i].addr, buf_list[i].length);
}

static void remu_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				    size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	remu_wr_set_inline_data_list(qpx, 1, &buf);
}

/* UD only; the AH must be of the QP's PD, as for ibv_post_send() */
static void remu_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
				uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct remu_qp *qp = ex_to_rqp(qpx);
	struct remu_send_wqe *w = remu_wr_cur(qp);

	if (!w)
		return;
	if (qpx->qp_base.qp_type != IBV_QPT_UD || !ah ||
	    !remu_pd_same(ah->pd, qpx->qp_base.pd)) {
		remu_wr_fail(qp, EINVAL);
		return;
	}
	remu_wqe_ud(w, ah, remote_qpn, remote_qkey);
}

/*
 * Every builder and setter is there whatever the QP type and
 * send_ops_flags (mlx5 sets all its QP type supports, regardless of the
 * request); one the type cannot post records EINVAL where mlx5 leaves a
 * NULL pointer (docs/compatibility.md).
 */
static void remu_qp_fill_wr_ops(struct ibv_qp_ex *qpx)
{
	qpx->wr_start = remu_wr_start;
	qpx->wr_complete = remu_wr_complete;
	qpx->wr_abort = remu_wr_abort;
	qpx->wr_send = remu_wr_send;
	qpx->wr_send_imm = remu_wr_send_imm;
	qpx->wr_send_inv = remu_wr_send_inv;
	qpx->wr_rdma_write = remu_wr_rdma_write;
	qpx->wr_rdma_write_imm = remu_wr_rdma_write_imm;
	qpx->wr_rdma_read = remu_wr_rdma_read;
	qpx->wr_atomic_cmp_swp = remu_wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = remu_wr_atomic_fetch_add;
	qpx->wr_atomic_write = remu_wr_atomic_write;
#if REMU_HAVE_WR_FLUSH
	if (remu_verbs_has_wr_flush())
		qpx->wr_flush = remu_wr_flush;
#endif
	qpx->wr_bind_mw = remu_wr_bind_mw;
	qpx->wr_local_inv = remu_wr_local_inv;
	qpx->wr_set_sge = remu_wr_set_sge;
	qpx->wr_set_sge_list = remu_wr_set_sge_list;
	qpx->wr_set_inline_data = remu_wr_set_inline_data;
	qpx->wr_set_inline_data_list = remu_wr_set_inline_data_list;
	qpx->wr_set_ud_addr = remu_wr_set_ud_addr;
}

/*
 * Mark @qp an ibv_qp_ex for ibv_qp_to_qp_ex(), which reads
 * verbs_qp.comp_mask right after libibverbs' own struct ibv_qp_ex.  That
 * struct grew by wr_flush after rdma-core 44 with no private ABI change
 * (PABI 34 in both), and a libremu built in a newer tree (56.1) may be
 * loaded by libibverbs 44 (bookworm's), which looks 8 bytes earlier: at
 * the low half of wr_flush.  Under such a libibverbs the flag goes to
 * both words, and wr_flush is never set (FLUSH is refused at creation; a
 * program built against 44 has no ibv_wr_flush()); under a newer one
 * wr_flush is a real member and only the real comp_mask is marked.  The
 * assertion catches a tree whose ibv_qp_ex grew again.
 *
 * Built in rdma-core 44's tree, libremu's struct is the one of the
 * libibverbs it is made for; a newer libibverbs would look 8 bytes too
 * far, which no marking can serve: the provider package depends on the
 * libibverbs1 release it was built for (debian/rules).
 */
#if REMU_HAVE_WR_FLUSH
static void remu_qp_mark_ex(struct remu_qp *qp)
{
	uint8_t *v44 = (uint8_t *)&qp->vqp.qp_ex +
		       offsetof(struct ibv_qp_ex, wr_flush);
	uint32_t mask;

	static_assert(offsetof(struct ibv_qp_ex, wr_flush) + sizeof(void *) ==
		      sizeof(struct ibv_qp_ex), "ibv_qp_ex: not 44 + wr_flush");
	qp->vqp.comp_mask |= VERBS_QP_EX;
	if (remu_verbs_has_wr_flush())
		return;
	memcpy(&mask, v44, sizeof(mask));
	mask |= VERBS_QP_EX;
	memcpy(v44, &mask, sizeof(mask));
}
#else
static void remu_qp_mark_ex(struct remu_qp *qp)
{
	qp->vqp.comp_mask |= VERBS_QP_EX;
}
#endif

/*
 * ibv_create_qp_ex(): comp_mask PD (required), CREATE_FLAGS (the kernel
 * judges the flags: none is offered, EOPNOTSUPP) and SEND_OPS_FLAGS;
 * the other attributes (XRC, RSS, TSO) are for QP types remu has not:
 * EINVAL.  send_ops_flags the QP type cannot do: EOPNOTSUPP, as mlx5.
 * Only a QP created with SEND_OPS_FLAGS is an ibv_qp_ex (as on mlx5,
 * ibv_qp_to_qp_ex() gives NULL for the others).
 */
struct ibv_qp *remu_create_qp_ex(struct ibv_context *ctx,
				 struct ibv_qp_init_attr_ex *attr)
{
	int ex = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	struct remu_qp *qp;

	if ((attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD |
				 IBV_QP_INIT_ATTR_CREATE_FLAGS |
				 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
	    !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	if (ex && !remu_send_ops_ok(ctx, attr->qp_type,
				    attr->send_ops_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = remu_qp_new(ctx, attr);
	if (!qp)
		return NULL;
	if (ex) {
		remu_qp_fill_wr_ops(&qp->vqp.qp_ex);
		remu_qp_fill_dv_ops(qp);
		remu_qp_mark_ex(qp);
	}
	return &qp->vqp.qp;
}
