/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * remu-abi.h - the provider's side of the remu command ABI.
 *
 * <rdma/remu-abi.h> is the kernel's uapi header, copied verbatim into the
 * rdma-core tree; <kernel-abi/remu-abi.h> is generated from it and holds
 * each struct as a _STRUCT_<name> macro.  DECLARE_DRV_CMD() glues a core
 * uverbs command to remu's private request and response, giving
 * struct <name> and struct <name>_resp.
 */
#ifndef REMU_PROVIDER_ABI_H
#define REMU_PROVIDER_ABI_H

#include <infiniband/kern-abi.h>
#include <rdma/remu-abi.h>
#include <kernel-abi/remu-abi.h>

DECLARE_DRV_CMD(remu_cmd_alloc_context, IB_USER_VERBS_CMD_GET_CONTEXT,
		empty, remu_alloc_ucontext_resp);
DECLARE_DRV_CMD(remu_cmd_create_cq, IB_USER_VERBS_CMD_CREATE_CQ,
		remu_create_cq_cmd, remu_create_cq_resp);
DECLARE_DRV_CMD(remu_cmd_create_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ,
		remu_create_cq_cmd, remu_create_cq_resp);
DECLARE_DRV_CMD(remu_cmd_resize_cq, IB_USER_VERBS_CMD_RESIZE_CQ,
		empty, remu_resize_cq_resp);
DECLARE_DRV_CMD(remu_cmd_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		remu_create_qp_cmd, remu_create_qp_resp);
DECLARE_DRV_CMD(remu_cmd_create_qp_ex, IB_USER_VERBS_EX_CMD_CREATE_QP,
		remu_create_qp_cmd, remu_create_qp_resp);
DECLARE_DRV_CMD(remu_cmd_modify_qp_ex, IB_USER_VERBS_EX_CMD_MODIFY_QP,
		remu_modify_qp_cmd, remu_modify_qp_resp);
DECLARE_DRV_CMD(remu_cmd_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ,
		empty, remu_create_srq_resp);
DECLARE_DRV_CMD(remu_cmd_alloc_mw, IB_USER_VERBS_CMD_ALLOC_MW,
		remu_alloc_mw_cmd, remu_alloc_mw_resp);
DECLARE_DRV_CMD(remu_cmd_create_ah, IB_USER_VERBS_CMD_CREATE_AH,
		empty, remu_create_ah_resp);
DECLARE_DRV_CMD(remu_cmd_query_device_ex, IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
		empty, remu_query_device_resp);

#endif /* REMU_PROVIDER_ABI_H */
