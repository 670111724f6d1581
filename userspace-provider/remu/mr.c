// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mr.c - memory regions in libremu.
 *
 * Registration is a plain uverbs REG_MR: the kernel pins the pages (or,
 * with IBV_ACCESS_ON_DEMAND, registers an ODP MR that pins nothing) and
 * returns lkey == rkey; remu has no driver-private request or response
 * for it.  ibv_advise_mr (ODP prefetch) is the core's ADVISE_MR method
 * (ibv_cmd_advise_mr, exported by libibverbs since rdma-core 22).
 * ibv_rereg_mr is a plain uverbs REREG_MR too: the kernel builds a new MR
 * (new lkey/rkey, which ibv_cmd_rereg_mr stores in the ibv_mr) and drops
 * the old one; on failure the old MR is unchanged (docs/memory-regions.md).
 * ibv_cmd_reg_mr() and ibv_cmd_rereg_mr() have had the same signatures
 * and meaning from rdma-core 44 to 56 (PABI 34), so this builds in the
 * 56.1 tree and runs on bookworm's libibverbs 44.
 */
#include <errno.h>
#include <stdlib.h>

#include "remu.h"

struct ibv_mr *remu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			   uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd = {};
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;

	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

/*
 * ibv_reg_dmabuf_mr: the core's REG_DMABUF_MR method; the kernel attaches
 * to the dma-buf and maps it (drivers/remu/remu_dmabuf.c).  rdma-core 54
 * gave ibv_cmd_reg_dmabuf_mr a trailing driver command buffer argument
 * without a private-ABI bump (REMU_CMD_DMABUF_DRIVER, CMakeLists.txt's
 * probe): we pass NULL there, which libibverbs 44 (no such argument)
 * would never read if that build were loaded by it.
 */
struct ibv_mr *remu_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				  size_t length, uint64_t iova, int fd,
				  int access)
{
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;

#if REMU_CMD_DMABUF_DRIVER
	ret = ibv_cmd_reg_dmabuf_mr(pd, offset, length, iova, fd, access, vmr,
				    NULL);
#else
	ret = ibv_cmd_reg_dmabuf_mr(pd, offset, length, iova, fd, access, vmr);
#endif
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

int remu_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;
	free(vmr);
	return 0;
}

int remu_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		  void *addr, size_t length, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd = {};
	int ret;

	/* ibv_rereg_mr() has no iova argument: the MR's iova is @addr */
	ret = ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr,
			       access, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret)
		errno = ret;
	return ret;
}

int remu_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		   uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
{
	return ibv_cmd_advise_mr(pd, advice, flags, sg_list, num_sge);
}
