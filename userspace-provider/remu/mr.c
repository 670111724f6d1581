// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mr.c - memory regions in libremu.
 *
 * Registration is a plain uverbs REG_MR: the kernel pins the pages and
 * returns lkey == rkey; remu has no driver-private request or response
 * for it.  ibv_cmd_reg_mr() has had the same signature and meaning from
 * rdma-core 44 to 56 (PABI 34), so this builds in the 56.1 tree and runs
 * on bookworm's libibverbs 44.
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

int remu_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;
	free(vmr);
	return 0;
}
