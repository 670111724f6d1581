// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * dm.c - device memory in libremu: ibv_alloc_dm, ibv_free_dm,
 * ibv_memcpy_to_dm / ibv_memcpy_from_dm and ibv_reg_dm_mr.
 *
 * The kernel hands out page-rounded allocations from the device's pool and
 * answers DM_ALLOC with where to mmap() the allocation on the command fd
 * (struct remu_alloc_dm_resp, a driver attribute).  The copies go through
 * that mapping, the way a real NIC's memory is reached through its BAR;
 * as on mlx5, offset and length are checked against the length the user
 * asked for (EFAULT) and must be multiples of 4 bytes (EINVAL).
 * Freeing fails (EBUSY, from the kernel) while MRs are on the allocation,
 * and the mapping is kept then; it is removed only after a successful free.
 *
 * Export as a dma-buf: ibv_dm_export_dmabuf_fd() (the verbs op, rdma-core
 * 62 and later: REMU_HAVE_DM_EXPORT_DMABUF) and remudv_dm_export_dmabuf_fd()
 * (any release) run the kernel's REMU_METHOD_DM_EXPORT_DMABUF on the DM's
 * handle and return the new dma-buf's fd; a module without the method
 * answers EPROTONOSUPPORT, reported as EOPNOTSUPP.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "remu-abi.h"
#include "remu.h"

/*
 * The checks of mlx5's copies, in its order: the range must lie inside
 * the length the user asked for (EFAULT; here also without 64-bit wrap),
 * then offset and length must be whole 4-byte words (EINVAL), the unit a
 * NIC's memory BAR is written in.  Return: 0 or that errno.
 */
static int remu_dm_check(struct remu_dm *dm, uint64_t off, size_t len)
{
	if (off > dm->length || len > dm->length - off)
		return EFAULT;
	if ((off | len) & 3)
		return EINVAL;
	return 0;
}

static int remu_memcpy_to_dm(struct ibv_dm *ibdm, uint64_t dm_offset,
			     const void *host_addr, size_t length)
{
	struct remu_dm *dm = to_rdm(ibdm);
	int ret = remu_dm_check(dm, dm_offset, length);

	if (!ret && length)
		memcpy((uint8_t *)dm->va + dm_offset, host_addr, length);
	return ret;
}

static int remu_memcpy_from_dm(void *host_addr, struct ibv_dm *ibdm,
			       uint64_t dm_offset, size_t length)
{
	struct remu_dm *dm = to_rdm(ibdm);
	int ret = remu_dm_check(dm, dm_offset, length);

	if (!ret && length)
		memcpy(host_addr, (uint8_t *)dm->va + dm_offset, length);
	return ret;
}

/*
 * Map the allocation @dm names (DM_ALLOC's or, for an imported DM, the DM
 * query's answer) and make it usable: 0 or an errno.
 */
int remu_dm_map(struct remu_dm *dm, struct ibv_context *ctx,
		uint64_t mmap_offset, uint64_t mmap_size, uint64_t length)
{
	dm->va = mmap(NULL, mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      ctx->cmd_fd, mmap_offset);
	if (dm->va == MAP_FAILED)
		return errno;
	dm->map_size = mmap_size;
	dm->length = length;
	dm->vdm.dm.memcpy_to_dm = remu_memcpy_to_dm;
	dm->vdm.dm.memcpy_from_dm = remu_memcpy_from_dm;
	return 0;
}

struct ibv_dm *remu_alloc_dm(struct ibv_context *ctx,
			     struct ibv_alloc_dm_attr *attr)
{
	DECLARE_COMMAND_BUFFER(cmdb, UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC,
			       1);
	struct remu_alloc_dm_resp resp = {};
	struct remu_dm *dm;
	int ret;

	if (attr->comp_mask) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	dm = calloc(1, sizeof(*dm));
	if (!dm) {
		errno = ENOMEM;
		return NULL;
	}
	fill_attr_out_ptr(cmdb, REMU_ATTR_ALLOC_DM_RESP, &resp);
	ret = ibv_cmd_alloc_dm(ctx, attr, &dm->vdm, cmdb);
	if (ret)
		goto err_free;

	ret = remu_dm_map(dm, ctx, resp.mmap_offset, resp.mmap_size,
			  attr->length);
	if (ret) {
		ibv_cmd_free_dm(&dm->vdm);
		goto err_free;
	}
	return &dm->vdm.dm;

err_free:
	free(dm);
	errno = ret;
	return NULL;
}

int remu_free_dm(struct ibv_dm *ibdm)
{
	struct remu_dm *dm = to_rdm(ibdm);
	int ret;

	ret = ibv_cmd_free_dm(&dm->vdm);
	if (ret)
		return ret;
	munmap(dm->va, dm->map_size);
	free(dm);
	return 0;
}

struct ibv_mr *remu_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm,
			      uint64_t dm_offset, size_t length,
			      unsigned int access)
{
	struct remu_dm *dm = to_rdm(ibdm);
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_reg_dm_mr(pd, &dm->vdm, dm_offset, length, access, vmr,
				NULL);
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

int remu_dm_export_dmabuf_fd(struct ibv_dm *ibdm)
{
	DECLARE_COMMAND_BUFFER(cmdb, UVERBS_OBJECT_DM,
			       REMU_METHOD_DM_EXPORT_DMABUF, 2);
	struct remu_dm *dm = to_rdm(ibdm);
	uint32_t fd = 0;
	int ret;

	fill_attr_in_obj(cmdb, REMU_ATTR_EXPORT_DMABUF_DM_HANDLE,
			 dm->vdm.handle);
	fill_attr_out_ptr(cmdb, REMU_ATTR_EXPORT_DMABUF_FD, &fd);
	ret = execute_ioctl(ibdm->context, cmdb);
	if (ret) {
		errno = ret == EPROTONOSUPPORT ? EOPNOTSUPP : ret;
		return -1;
	}
	return (int)fd;
}

int remudv_dm_export_dmabuf_fd(struct ibv_dm *dm)
{
	if (!dm || !remu_is_remu_context(dm->context)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return remu_dm_export_dmabuf_fd(dm);
}
