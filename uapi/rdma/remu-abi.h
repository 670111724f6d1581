/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * remu-abi.h - the ABI between the remu kernel module and its rdma-core
 * provider (libremu).  This is the one header both sides include: the
 * module from uapi/rdma/, the provider from the rdma-core tree's
 * kernel-headers/rdma/ (a verbatim copy made at build time).
 *
 * Rules: fixed-size fields only (__u32, __aligned_u64), explicit padding,
 * no pointers.  New fields go at the end of a struct and are announced by a
 * comp_mask bit; reserved fields must be zero and are checked.
 */
#ifndef REMU_ABI_USER_H
#define REMU_ABI_USER_H

#include <linux/types.h>

/* Bumped on any incompatible change; the provider accepts exactly this. */
#define REMU_ABI_VERSION 1

/*
 * Value of the device's sysfs attribute "hca_type".  The provider recognises
 * remu devices by it, whatever name the user gave them.
 */
#define REMU_HCA_TYPE "remu"

/* Response to ibv_open_device() (IB_USER_VERBS_CMD_GET_CONTEXT). */
struct remu_alloc_ucontext_resp {
	__u32 comp_mask;	/* no optional fields yet: 0 */
	__u32 abi_version;	/* REMU_ABI_VERSION of the module */
	__aligned_u64 reserved;	/* 0 */
};

#endif /* REMU_ABI_USER_H */
