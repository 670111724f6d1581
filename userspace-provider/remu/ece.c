// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * ece.c - ECE (enhanced connection establishment) in libremu:
 * ibv_set_ece(), ibv_query_ece(), and what the modify_qp that carries the
 * options to the kernel (queues.c's extended one) leaves.  librdmacm's
 * rdma_set_local_ece() / rdma_get_remote_ece() and its own QPs'
 * handshake come down to these.
 *
 * As mlx5's provider (providers/mlx5/verbs.c, read for the contract): a
 * QP is created asking for the options libremu knows (version 1), and
 * ibv_query_ece() then answers what the kernel offers; ibv_set_ece() with
 * remu's vendor id (REMU_ECE_VENDOR_ID) keeps the options for the next
 * ibv_modify_qp() and clears what ibv_query_ece() answers until then;
 * that modify_qp goes through the extended command with the options, and
 * the kernel's answer (the options both sides can use, remu_qp.c) is
 * what ibv_query_ece() returns afterwards.  Options 0 set nothing: the
 * QP answers 0 (ECE off) from then on.  A comp_mask or another vendor's
 * id is EINVAL, a module without ECE EOPNOTSUPP.
 *
 * Locking: none; like mlx5, set_ece and modify_qp of one QP are the
 * caller's to order.
 */
#include <errno.h>

#include "remu-abi.h"
#include "remu.h"

/* What a new QP of @ctx asks the kernel for: 0 without ECE. */
uint32_t remu_ece_request(struct ibv_context *ctx)
{
	if (!(to_rctx(ctx)->kernel_caps & REMU_UCTX_ECE))
		return 0;
	return REMU_ECE_VERSION << REMU_ECE_VER_SHIFT | REMU_ECE_CAPS;
}

int remu_set_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	struct remu_qp *qp = to_rqp(ibqp);

	if (ece->comp_mask || ece->vendor_id != REMU_ECE_VENDOR_ID) {
		errno = EINVAL;
		return EINVAL;
	}
	if (!(to_rctx(ibqp->context)->kernel_caps & REMU_UCTX_ECE)) {
		errno = EOPNOTSUPP;
		return EOPNOTSUPP;
	}
	qp->set_ece = ece->options;
	qp->get_ece = 0;
	return 0;
}

int remu_query_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	ece->vendor_id = REMU_ECE_VENDOR_ID;
	ece->options = to_rqp(ibqp)->get_ece;
	ece->comp_mask = 0;
	return 0;
}

/*
 * ibv_modify_qp() with options from ibv_set_ece() waiting went through
 * the extended command with them (queues.c) and succeeded: the kernel's
 * answer replaces them.
 */
void remu_ece_modified(struct remu_qp *qp, uint32_t options)
{
	qp->set_ece = 0;
	qp->get_ece = options;
}
