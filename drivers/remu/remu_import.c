// SPDX-License-Identifier: GPL-2.0
/*
 * remu_import.c - what a process needs to take up objects of a context it
 * did not open: ibv_import_device(), ibv_import_pd(), ibv_import_dm()
 * (ibv_import_mr() needs nothing of remu: the core's QUERY_MR).
 *
 * A context is shared by handing its command fd to another process
 * (SCM_RIGHTS, or inherited over fork): both then use the same
 * ib_ucontext, the same handle table and the same mmap entries, so an
 * import only has to check that a handle names a live object of the
 * right type and tell the provider what it needs to use it.  The core's
 * handle lookup does the check (ENOENT: no such object; EINVAL: an object
 * of another type); the methods here add the driver's part:
 *   - UVERBS_METHOD_QUERY_CONTEXT's driver attribute, the
 *     remu_alloc_ucontext_resp of the context (filled by
 *     remu_query_ucontext(), remu_verbs.c);
 *   - REMU_METHOD_PD_QUERY: nothing beyond the lookup (a remu PD has no
 *     state the provider needs);
 *   - REMU_METHOD_DM_QUERY: where to map the allocation (remu_dm_query()).
 * The UAPI is in uapi/rdma/remu-abi.h; docs/sharing.md has the design.
 *
 * Locking: none here.  The core holds each object's uobject for reading
 * while a method runs, so the object cannot be destroyed under it.
 */
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/remu-abi.h>
#define UVERBS_MODULE_NAME remu_ib
#include <rdma/uverbs_named_ioctl.h>

#include "remu.h"

/* the core refuses the whole API of a device with a method past these */
static_assert((REMU_METHOD_PD_QUERY & ~UVERBS_API_NS_FLAG) <
	      UVERBS_API_METHOD_KEY_NUM_DRIVER);
static_assert((REMU_METHOD_DM_QUERY & ~UVERBS_API_NS_FLAG) <
	      UVERBS_API_METHOD_KEY_NUM_DRIVER);

static int UVERBS_HANDLER(REMU_METHOD_PD_QUERY)(struct uverbs_attr_bundle *attrs)
{
	/* the core found a PD of this context under the handle */
	return 0;
}

static int UVERBS_HANDLER(REMU_METHOD_DM_QUERY)(struct uverbs_attr_bundle *attrs)
{
	struct ib_dm *ibdm = uverbs_attr_get_obj(attrs,
						 REMU_ATTR_QUERY_DM_HANDLE);
	struct remu_query_dm_resp resp = {};

	remu_dm_query(ibdm, &resp);
	return uverbs_copy_to_struct_or_zero(attrs, REMU_ATTR_QUERY_DM_RESP,
					     &resp, sizeof(resp));
}

ADD_UVERBS_ATTRIBUTES_SIMPLE(
	remu_query_context, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_CONTEXT,
	UVERBS_ATTR_PTR_OUT(REMU_ATTR_QUERY_CONTEXT_RESP,
			    UVERBS_ATTR_STRUCT(struct remu_alloc_ucontext_resp,
					       reserved),
			    UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	REMU_METHOD_PD_QUERY,
	UVERBS_ATTR_IDR(REMU_ATTR_QUERY_PD_HANDLE, UVERBS_OBJECT_PD,
			UVERBS_ACCESS_READ, UA_MANDATORY));

ADD_UVERBS_METHODS(remu_pd_import, UVERBS_OBJECT_PD,
		   &UVERBS_METHOD(REMU_METHOD_PD_QUERY));

DECLARE_UVERBS_NAMED_METHOD(
	REMU_METHOD_DM_QUERY,
	UVERBS_ATTR_IDR(REMU_ATTR_QUERY_DM_HANDLE, UVERBS_OBJECT_DM,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(REMU_ATTR_QUERY_DM_RESP,
			    UVERBS_ATTR_STRUCT(struct remu_query_dm_resp,
					       length),
			    UA_MANDATORY));

ADD_UVERBS_METHODS(remu_dm_import, UVERBS_OBJECT_DM,
		   &UVERBS_METHOD(REMU_METHOD_DM_QUERY));

const struct uapi_definition remu_import_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DEVICE, &remu_query_context),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_PD, &remu_pd_import),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DM, &remu_dm_import),
	{},
};
