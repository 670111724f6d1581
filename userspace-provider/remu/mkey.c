// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mkey.c - remu's direct verbs for indirect memory keys (remudv.h):
 * remudv_create_mkey(), remudv_destroy_mkey() and the two builders
 * remudv_wr_mr_list() and remudv_wr_mr_interleaved() reach through
 * remudv_qp_ex_from_ibv_qp_ex(), with mlx5dv's names and rules.
 *
 * The key rides on the kernel's MW object: ibv_cmd_alloc_mw() with a
 * struct remu_alloc_mw_cmd asking for an indirect key (the module
 * announces it with REMU_UCTX_INDIRECT_MKEY), ibv_cmd_dealloc_mw() to
 * destroy it.  A UMR is one REMU_WR_UMR send WQE whose entries are its
 * inline data (uapi/rdma/remu-abi.h); the kernel checks them again.
 *
 * Errors at post time, as mlx5 (kept as the batch's error and returned
 * by ibv_wr_complete()): IBV_SEND_INLINE not set: EOPNOTSUPP; rights
 * other than LOCAL_WRITE, REMOTE_READ/WRITE/ATOMIC, no key, not an RC
 * QP: EINVAL; more entries than the key takes or the WQE holds: ENOMEM.
 *
 * Locking: the builders run inside an ibv_wr_start() batch (qp->sq_lock).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "remu.h"
#include "remu-abi.h"
#include "wqe.h"

#define REMUDV_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

struct remudv_mkey *remudv_create_mkey(struct remudv_mkey_init_attr *attr)
{
	struct remu_cmd_alloc_mw_resp resp = {};
	struct remu_cmd_alloc_mw cmd = {};
	struct remu_mkey *mk;
	int ret;

	if (!attr || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	if (!remu_is_remu_context(attr->pd->context) ||
	    !(to_rctx(attr->pd->context)->kernel_caps &
	      REMU_UCTX_INDIRECT_MKEY) ||
	    (attr->create_flags &
	     ~(uint32_t)(REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT |
			 REMUDV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE)) ||
	    !(attr->create_flags & REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	mk = calloc(1, sizeof(*mk));
	if (!mk) {
		errno = ENOMEM;
		return NULL;
	}
	cmd.flags = REMU_ALLOC_MW_INDIRECT;
	if (attr->create_flags & REMUDV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE)
		cmd.flags |= REMU_ALLOC_MW_REMOTE_INV;
	cmd.max_entries = attr->max_entries;
	ret = ibv_cmd_alloc_mw(attr->pd, IBV_MW_TYPE_2, &mk->mw,
			       &cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
			       sizeof(resp));
	if (ret) {
		free(mk);
		errno = ret;
		return NULL;
	}
	mk->max_entries = resp.max_entries;
	attr->max_entries = resp.max_entries;
	mk->dv.lkey = mk->mw.rkey;
	mk->dv.rkey = mk->mw.rkey;
	return &mk->dv;
}

int remudv_destroy_mkey(struct remudv_mkey *dv)
{
	struct remu_mkey *mk = container_of(dv, struct remu_mkey, dv);
	int ret;

	ret = ibv_cmd_dealloc_mw(&mk->mw);
	if (ret)
		return ret;
	free(mk);
	return 0;
}

struct remudv_qp_ex *remudv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qpx)
{
	if (!qpx || !remu_is_remu_context(qpx->qp_base.context)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return &ex_to_rqp(qpx)->dv;
}

static struct remu_qp *dv_to_rqp(struct remudv_qp_ex *dv)
{
	return container_of(dv, struct remu_qp, dv);
}

static void remu_umr_fail(struct remu_qp *qp, int err)
{
	if (!qp->wr_err)
		qp->wr_err = err;
	qp->wr_cur = NULL;
}

/*
 * Claim a slot for a UMR of @n entries of @esz bytes on @mkey: the WQE
 * with its fixed part filled, or NULL (the batch's error recorded).
 */
static struct remu_send_wqe *remu_umr_new(struct remu_qp *qp,
					  struct remudv_mkey *dv,
					  uint32_t access, uint32_t n,
					  uint32_t esz, uint32_t layout)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	struct remu_send_wqe *w;
	struct remu_mkey *mk;
	uint32_t room;

	qp->wr_cur = NULL;
	if (qp->wr_err)
		return NULL;
	if (!(qpx->wr_flags & IBV_SEND_INLINE)) {
		remu_umr_fail(qp, EOPNOTSUPP);
		return NULL;
	}
	if (!dv || qp->vqp.qp.qp_type != IBV_QPT_RC ||
	    (access & ~(uint32_t)REMUDV_ACCESS)) {
		remu_umr_fail(qp, EINVAL);
		return NULL;
	}
	mk = container_of(dv, struct remu_mkey, dv);
	room = qp->max_inline / esz;
	if (n > mk->max_entries || n > room) {
		remu_umr_fail(qp, ENOMEM);
		return NULL;
	}
	if (remu_uring_dead(&qp->sq)) {
		remu_umr_fail(qp, EIO);
		return NULL;
	}
	w = remu_uring_prod_slot(&qp->sq);
	if (!w) {
		remu_umr_fail(qp, ENOMEM);
		return NULL;
	}
	remu_wqe_init(w, qpx->wr_id, REMU_WR_UMR, qpx->wr_flags);
	w->flags |= REMU_WQE_INLINE;
	w->ex_data = dv->lkey;
	w->remote_qkey = access;
	w->swap = layout;
	w->num_sge = n;
	w->inline_len = n * esz;
	remu_uring_prod_advance(&qp->sq);
	return w;
}

static void remu_wr_mr_list(struct remudv_qp_ex *dvqp, struct remudv_mkey *mkey,
			    uint32_t access_flags, uint16_t num_sges,
			    struct ibv_sge *sge)
{
	struct remu_qp *qp = dv_to_rqp(dvqp);
	struct remu_send_wqe *w;

	w = remu_umr_new(qp, mkey, access_flags, num_sges,
			 sizeof(struct remu_sge), REMU_UMR_LIST);
	if (!w)
		return;
	remu_wqe_sges(w, sge, num_sges);
	/* the entries are the WQE's inline data (remu_wqe_sges() cleared it) */
	w->flags |= REMU_WQE_INLINE;
	w->inline_len = num_sges * sizeof(struct remu_sge);
}

static void remu_wr_mr_interleaved(struct remudv_qp_ex *dvqp,
				   struct remudv_mkey *mkey,
				   uint32_t access_flags, uint32_t repeat_count,
				   uint16_t num_interleaved,
				   struct remudv_mr_interleaved *data)
{
	struct remu_qp *qp = dv_to_rqp(dvqp);
	struct remu_umr_ientry *e;
	struct remu_send_wqe *w;
	uint16_t i;

	w = remu_umr_new(qp, mkey, access_flags, num_interleaved,
			 sizeof(struct remu_umr_ientry), REMU_UMR_INTERLEAVED);
	if (!w)
		return;
	w->compare_add = repeat_count;
	e = (struct remu_umr_ientry *)(w + 1);
	for (i = 0; i < num_interleaved; i++) {
		e[i].addr = data[i].addr;
		e[i].bytes_count = data[i].bytes_count;
		e[i].bytes_skip = data[i].bytes_skip;
		e[i].lkey = data[i].lkey;
		e[i].reserved = 0;
	}
}

void remu_qp_fill_dv_ops(struct remu_qp *qp)
{
	qp->dv.wr_mr_list = remu_wr_mr_list;
	qp->dv.wr_mr_interleaved = remu_wr_mr_interleaved;
}
