/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * wqe.h - filling a send WQE in an SQ slot (layout: struct remu_send_wqe
 * in <rdma/remu-abi.h>), the pieces shared by ibv_post_send() (queues.c)
 * and the ibv_wr_* API (qp_ex.c).  Nothing here checks a limit or takes
 * a lock: the callers check (each with its own errno) and hold the SQ
 * lock; the slot is not the kernel's until the producer index is
 * published.
 */
#ifndef REMU_WQE_H
#define REMU_WQE_H

#include <errno.h>
#include <string.h>

#include "remu.h"

/* A new WQE of @opcode in @w: the fixed part, no data yet. */
static inline void remu_wqe_init(struct remu_send_wqe *w, uint64_t wr_id,
				 uint32_t opcode, unsigned int send_flags)
{
	memset(w, 0, sizeof(*w));
	w->wr_id = wr_id;
	w->opcode = opcode;
	w->flags = send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED |
				 IBV_SEND_SOLICITED);
}

/* The data of @w: @n SGEs (replacing anything set before). */
static inline void remu_wqe_sges(struct remu_send_wqe *w,
				 const struct ibv_sge *sg, size_t n)
{
	struct remu_sge *sge = (struct remu_sge *)(w + 1);
	size_t i;

	for (i = 0; i < n; i++) {
		sge[i].addr = sg[i].addr;
		sge[i].length = sg[i].length;
		sge[i].lkey = sg[i].lkey;
	}
	w->num_sge = n;
	w->inline_len = 0;
	w->flags &= ~REMU_WQE_INLINE;
}

/* The data of @w is inline: none yet (replacing anything set before). */
static inline void remu_wqe_inline_start(struct remu_send_wqe *w)
{
	w->num_sge = 0;
	w->inline_len = 0;
	w->flags |= REMU_WQE_INLINE;
}

/* Append @len bytes at @src to @w's inline data (room checked by caller). */
static inline void remu_wqe_inline_add(struct remu_send_wqe *w,
				       const void *src, size_t len)
{
	if (!len)
		return;
	memcpy((uint8_t *)(w + 1) + w->inline_len, src, len);
	w->inline_len += len;
}

/* UD: where @w goes. */
static inline void remu_wqe_ud(struct remu_send_wqe *w, struct ibv_ah *ah,
			       uint32_t remote_qpn, uint32_t remote_qkey)
{
	w->ah_num = to_rah(ah)->ah_num;
	w->remote_qpn = remote_qpn;
	w->remote_qkey = remote_qkey;
}

/*
 * A bind WQE (@w initialised with IBV_WR_BIND_MW): @mw gets @rkey over
 * @b.  A type 1 window is bound only by ibv_bind_mw() (@type1_ok), a
 * type 2B window only by a bind WQE.  0 or EINVAL.
 */
static inline int remu_wqe_bind(struct remu_send_wqe *w, struct ibv_mw *mw,
				uint32_t rkey, const struct ibv_mw_bind_info *b,
				int type1_ok)
{
	if (!mw || (mw->type == IBV_MW_TYPE_1 && !type1_ok) ||
	    (b->mw_access_flags & IBV_ACCESS_ZERO_BASED))
		return EINVAL;
	w->flags &= IBV_SEND_FENCE | IBV_SEND_SIGNALED;
	w->ex_data = mw->rkey;
	w->rkey = rkey;
	w->remote_addr = b->addr;
	w->compare_add = b->length;
	w->swap = b->mr ? b->mr->lkey : 0;
	w->remote_qkey = b->mw_access_flags;
	return 0;
}

/* May @qp post @op (its type's opcodes, and what the module offers)? */
static inline int remu_opcode_ok(const struct remu_qp *qp,
				 enum ibv_wr_opcode op)
{
	return (unsigned int)op < 32 && (qp->op_mask & (1u << op));
}

#endif /* REMU_WQE_H */
