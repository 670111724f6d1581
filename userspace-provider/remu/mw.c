// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mw.c - memory windows in libremu.
 *
 * Allocation and deallocation are the core's ALLOC_MW/DEALLOC_MW commands
 * with no driver data; the kernel answers the window's first rkey.
 * ibv_bind_mw() (type 1 windows only: libibverbs checks the type) posts a
 * bind WQE on the QP, as IBV_WR_BIND_MW does for type 2B windows (see
 * remu_post_send() in queues.c and the BIND_MW field layout in
 * remu-abi.h): the kernel binds when every WQE before it has completed,
 * and a refused bind completes with IBV_WC_MW_BIND_ERR.  The new rkey is
 * ibv_inc_rkey() of the old one (the tag bumped, the index kept) and is
 * stored in mw->rkey as soon as the WQE is posted; after an error
 * completion the consumer must not use it (the window keeps its old key),
 * as the verbs man page says for every provider.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "remu.h"

struct ibv_mw *remu_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp;
	struct ibv_alloc_mw cmd = {};
	struct ibv_mw *mw;
	int ret;

	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	return mw;
}

int remu_dealloc_mw(struct ibv_mw *mw)
{
	int ret;

	ret = ibv_cmd_dealloc_mw(mw);
	if (ret)
		return ret;
	free(mw);
	return 0;
}

int remu_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		 struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = {};
	int ret;

	if (mw->type != IBV_MW_TYPE_1 || !remu_pd_same(mw->pd, qp->pd))
		return EINVAL;
	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	ret = remu_post_bind(qp, &wr);
	if (ret)
		return ret;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}
