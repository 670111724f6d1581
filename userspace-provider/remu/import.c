// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * import.c - taking up the objects of another process's context:
 * ibv_import_device(), ibv_import_pd(), ibv_import_mr(), ibv_import_dm()
 * and their ibv_unimport_*().
 *
 * A process hands its context's command fd to another (SCM_RIGHTS, or a
 * child inherits it); ibv_import_device() on a dup of it makes a second
 * ibv_context over the same kernel context, so both see the same objects
 * under the same handles.  An import asks the kernel whether a handle
 * names a live object of that type (ENOENT: none; EINVAL: another type)
 * and what libremu needs to use it: the context's remu_alloc_ucontext_resp
 * (QUERY_CONTEXT), nothing for a PD, the MR's keys and length (the core's
 * QUERY_MR; the address is NULL, as on mlx5), where to map a DM.  An
 * unimport frees only this process's struct; the object lives on until
 * someone destroys it (ibv_dealloc_pd() and the like work on an imported
 * object too, as on mlx5) or the context goes.  The application
 * coordinates the users of a shared object (ibv_import_pd(3)).
 *
 * Addresses: an imported MR's lkey and rkey reach the memory the owner
 * registered.  SGEs name addresses as the owner sees them; the kernel
 * reaches them through the MR, but the small receives libremu places
 * itself (inline receive, queues.c) are copied in the polling process, so
 * a receive buffer of an imported MR must be mapped at the same address
 * there too (shared memory mapped before a fork is), as mlx5's scatter to
 * CQE requires.
 *
 * The kernel side is drivers/remu/remu_import.c; docs/sharing.md.
 * Locking: none; an imported object is as thread-safe as any other.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "remu-abi.h"
#include "remu.h"

struct verbs_context *remu_import_context(struct ibv_device *ibdev, int cmd_fd)
{
	DECLARE_COMMAND_BUFFER_LINK(driver, UVERBS_OBJECT_DEVICE,
				    UVERBS_METHOD_QUERY_CONTEXT, 1, NULL);
	struct remu_alloc_ucontext_resp resp = {};
	struct remu_context *ctx;
	int ret;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, vctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;
	fill_attr_out_ptr(driver, REMU_ATTR_QUERY_CONTEXT_RESP, &resp);
	/* a module without the import answers EOPNOTSUPP here */
	ret = ibv_cmd_query_context(&ctx->vctx.context, driver);
	if (!ret)
		ret = remu_context_ready(ctx, &resp);
	/* the fd is another process's: its write() is refused (queues.c) */
	atomic_init(&ctx->doorbell_ioctl, true);
	if (ret) {
		/* closes cmd_fd, as every provider's failed import */
		verbs_uninit_context(&ctx->vctx);
		free(ctx);
		errno = ret;
		return NULL;
	}
	return &ctx->vctx;
}

static int remu_import_ok(struct ibv_context *ctx)
{
	return to_rctx(ctx)->kernel_caps & REMU_UCTX_IMPORT ? 0 : EOPNOTSUPP;
}

struct ibv_pd *remu_import_pd(struct ibv_context *ctx, uint32_t pd_handle)
{
	DECLARE_COMMAND_BUFFER(cmd, UVERBS_OBJECT_PD, REMU_METHOD_PD_QUERY, 1);
	struct remu_pd *pd;
	int ret;

	ret = remu_import_ok(ctx);
	if (ret)
		goto err;
	fill_attr_in_obj(cmd, REMU_ATTR_QUERY_PD_HANDLE, pd_handle);
	ret = execute_ioctl(ctx, cmd);
	if (ret)
		goto err;
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		ret = ENOMEM;
		goto err;
	}
	pd->ibpd.context = ctx;
	pd->ibpd.handle = pd_handle;
	atomic_init(&pd->refs, 1);
	pd->imported = true;
	return &pd->ibpd;

err:
	errno = ret;
	return NULL;
}

/*
 * Forget @ibpd without destroying the kernel's PD.  A PD still in use
 * here (parent domains on it) is kept, and so is a parent domain, which
 * is this process's own object (ibv_dealloc_pd() frees it): the verb
 * returns nothing to say so (mlx5 asserts).
 */
void remu_unimport_pd(struct ibv_pd *ibpd)
{
	struct remu_pd *pd = to_rpd(ibpd);

	if (pd->parent || atomic_load(&pd->refs) > 1)
		return;
	free(pd);
}

struct ibv_mr *remu_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_query_mr(pd, vmr, mr_handle);
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

void remu_unimport_mr(struct ibv_mr *mr)
{
	free(verbs_get_mr(mr));
}

struct ibv_dm *remu_import_dm(struct ibv_context *ctx, uint32_t dm_handle)
{
	DECLARE_COMMAND_BUFFER(cmd, UVERBS_OBJECT_DM, REMU_METHOD_DM_QUERY, 2);
	struct remu_query_dm_resp resp = {};
	struct remu_dm *dm;
	int ret;

	ret = remu_import_ok(ctx);
	if (ret)
		goto err;
	fill_attr_in_obj(cmd, REMU_ATTR_QUERY_DM_HANDLE, dm_handle);
	fill_attr_out_ptr(cmd, REMU_ATTR_QUERY_DM_RESP, &resp);
	ret = execute_ioctl(ctx, cmd);
	if (ret)
		goto err;
	dm = calloc(1, sizeof(*dm));
	if (!dm) {
		ret = ENOMEM;
		goto err;
	}
	/* the owner's mapping entry: the same pages, mapped here too */
	ret = remu_dm_map(dm, ctx, resp.mmap_offset, resp.mmap_size,
			  resp.length);
	if (ret) {
		free(dm);
		goto err;
	}
	dm->vdm.dm.context = ctx;
	dm->vdm.dm.handle = dm_handle;
	dm->vdm.handle = dm_handle;
	return &dm->vdm.dm;

err:
	errno = ret;
	return NULL;
}

void remu_unimport_dm(struct ibv_dm *ibdm)
{
	struct remu_dm *dm = to_rdm(ibdm);

	munmap(dm->va, dm->map_size);
	free(dm);
}
