/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * remu.h - objects of the remu provider.
 *
 * Each one embeds the libibverbs object it extends; the to_*() helpers go
 * from the libibverbs pointer back to the remu object.
 */
#ifndef REMU_H
#define REMU_H

#include <infiniband/driver.h>

struct remu_device {
	struct verbs_device vdev;
};

struct remu_context {
	struct verbs_context vctx;
};

static inline struct remu_device *to_rdev(struct verbs_device *vdev)
{
	return container_of(vdev, struct remu_device, vdev);
}

static inline struct remu_context *to_rctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct remu_context, vctx.context);
}

/* mr.c */
struct ibv_mr *remu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			   uint64_t hca_va, int access);
int remu_dereg_mr(struct verbs_mr *vmr);

#endif /* REMU_H */
