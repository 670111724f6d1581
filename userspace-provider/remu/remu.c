// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * remu.c - libremu, the rdma-core provider for the remu soft RoCEv2 device.
 *
 * This file: recognising a remu device, opening a user context, querying
 * the device and its port.  Protection, thread and parent domains are in
 * domain.c, taking objects of another process's context in import.c,
 * memory regions in mr.c, device memory in dm.c; CQs, QPs, SRQs and AHs,
 * with the ring fast path, in queues.c, their extended verbs in cq_ex.c
 * and qp_ex.c, ECE in ece.c.
 * Every verb not in remu_ctx_ops is left to libibverbs, which answers
 * EOPNOTSUPP.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* dladdr() */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remu-abi.h"
#include "remu.h"

/*
 * ibv_query_device(_ex).  A module that offers REMU_UCTX_RATE_LIMIT
 * answers the extended query with remu's part after the core's (struct
 * remu_query_device_resp: packet_pacing_caps); an older one is asked for
 * the core's part only.
 */
static int remu_query_device(struct ibv_context *ibctx,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct remu_cmd_query_device_ex_resp resp = {};
	size_t resp_size = (to_rctx(ibctx)->kernel_caps & REMU_UCTX_RATE_LIMIT) ?
			   sizeof(resp) : sizeof(resp.ibv_resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(ibctx, input, attr, attr_size,
				       &resp.ibv_resp, &resp_size);
	if (ret)
		return ret;

	if (attr_size >= offsetof(struct ibv_device_attr_ex,
				  packet_pacing_caps) +
			 sizeof(attr->packet_pacing_caps) &&
	    resp.response_length >= offsetof(struct remu_query_device_resp,
					      packet_pacing_caps) +
				     sizeof(resp.packet_pacing_caps)) {
		attr->packet_pacing_caps.qp_rate_limit_min =
			resp.packet_pacing_caps.qp_rate_limit_min;
		attr->packet_pacing_caps.qp_rate_limit_max =
			resp.packet_pacing_caps.qp_rate_limit_max;
		attr->packet_pacing_caps.supported_qpts =
			resp.packet_pacing_caps.supported_qpts;
	}

	/* The kernel packs the version as major:32 minor:16 sub:16. */
	fw = resp.ibv_resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw >> 32),
		 (unsigned int)(fw >> 16) & 0xffff, (unsigned int)fw & 0xffff);
	return 0;
}

static int remu_query_port(struct ibv_context *ibctx, uint8_t port,
			   struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd = {};

	return ibv_cmd_query_port(ibctx, port, attr, &cmd, sizeof(cmd));
}

static void remu_free_context(struct ibv_context *ibctx)
{
	struct remu_context *ctx = to_rctx(ibctx);

	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static const struct verbs_context_ops remu_ctx_ops = {
	.advise_mr = remu_advise_mr,
	.alloc_dm = remu_alloc_dm,
	.alloc_mw = remu_alloc_mw,
	.alloc_parent_domain = remu_alloc_parent_domain,
	.alloc_pd = remu_alloc_pd,
	.alloc_td = remu_alloc_td,
	/* multicast attach/detach: the plain commands, no driver data */
	.attach_mcast = ibv_cmd_attach_mcast,
	.bind_mw = remu_bind_mw,
	.create_ah = remu_create_ah,
	.create_cq = remu_create_cq,
	.create_cq_ex = remu_create_cq_ex,
	.create_qp = remu_create_qp,
	.create_qp_ex = remu_create_qp_ex,
	.create_srq = remu_create_srq,
	.dealloc_mw = remu_dealloc_mw,
	.dealloc_pd = remu_dealloc_pd,
	.dealloc_td = remu_dealloc_td,
	.dereg_mr = remu_dereg_mr,
	.destroy_ah = remu_destroy_ah,
	.destroy_cq = remu_destroy_cq,
	.destroy_qp = remu_destroy_qp,
	.destroy_srq = remu_destroy_srq,
	.detach_mcast = ibv_cmd_detach_mcast,
#if REMU_HAVE_DM_EXPORT_DMABUF
	.dm_export_dmabuf_fd = remu_dm_export_dmabuf_fd,
#endif
	.free_context = remu_free_context,
	.free_dm = remu_free_dm,
	.import_dm = remu_import_dm,
	.import_mr = remu_import_mr,
	.import_pd = remu_import_pd,
	.modify_qp = remu_modify_qp,
	.modify_qp_rate_limit = remu_modify_qp_rate_limit,
	.modify_srq = remu_modify_srq,
	.poll_cq = remu_poll_cq,
	.post_recv = remu_post_recv,
	.post_send = remu_post_send,
	.post_srq_recv = remu_post_srq_recv,
	.query_device_ex = remu_query_device,
	.query_ece = remu_query_ece,
	.query_port = remu_query_port,
#if REMU_HAVE_QUERY_PORT_SPEED
	/* the kernel answers (7.x), or the ioctl is unknown: EOPNOTSUPP */
	.query_port_speed = ibv_cmd_query_port_speed,
#endif
	.query_qp = remu_query_qp,
	.query_rt_values = remu_query_rt_values,
	.query_srq = remu_query_srq,
	.reg_dm_mr = remu_reg_dm_mr,
	.reg_dmabuf_mr = remu_reg_dmabuf_mr,
	.reg_mr = remu_reg_mr,
	.req_notify_cq = remu_req_notify_cq,
	.rereg_mr = remu_rereg_mr,
	.resize_cq = remu_resize_cq,
	.set_ece = remu_set_ece,
	.unimport_dm = remu_unimport_dm,
	.unimport_mr = remu_unimport_mr,
	.unimport_pd = remu_unimport_pd,
};

/*
 * @ctx was opened (ibv_open_device()) or imported (ibv_import_device(),
 * import.c) and the module answered @resp: 0, or EPROTO for a module of
 * another ABI, and the context takes remu's verbs.
 */
int remu_context_ready(struct remu_context *ctx,
		       const struct remu_alloc_ucontext_resp *resp)
{
	/*
	 * libibverbs already held the device's uverbs abi_version against
	 * remu_dev_ops; this catches a module whose answer is from another
	 * ABI or shorter than ours.
	 */
	if (resp->abi_version != REMU_ABI_VERSION || resp->reserved) {
		verbs_err(&ctx->vctx,
			  "kernel answered ABI %u (reserved %#llx), provider has ABI %u\n",
			  resp->abi_version, (unsigned long long)resp->reserved,
			  REMU_ABI_VERSION);
		return EPROTO;
	}
	ctx->kernel_caps = resp->comp_mask;
	verbs_set_ops(&ctx->vctx, &remu_ctx_ops);
	return 0;
}

static struct verbs_context *remu_alloc_context(struct ibv_device *ibdev,
						int cmd_fd, void *private_data)
{
	struct remu_cmd_alloc_context_resp resp = {};
	struct remu_cmd_alloc_context cmd = {};
	struct remu_context *ctx;
	int ret;

	/* remu has no driver id: ioctl headers carry RDMA_DRIVER_UNKNOWN. */
	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, vctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	ret = ibv_cmd_get_context(&ctx->vctx, &cmd.ibv_cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err;
	ret = remu_context_ready(ctx, &resp.drv_payload);
	if (ret)
		goto err;
	return &ctx->vctx;

err:
	/* Closes cmd_fd, which tears down the kernel's ucontext. */
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
	errno = ret;
	return NULL;
}

static struct verbs_device *remu_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct remu_device *rdev;

	rdev = calloc(1, sizeof(*rdev));
	if (!rdev)
		return NULL;
	return &rdev->vdev;
}

static void remu_uninit_device(struct verbs_device *vdev)
{
	free(to_rdev(vdev));
}

/*
 * The release line (44 of "44.0") of the libibverbs that loaded us, read
 * from its file name (rdma-core installs it as libibverbs.so.1.14.RELEASE),
 * or 0 when the name says nothing.  *path gets that file's path.
 */
static unsigned long remu_verbs_release_line(char *path, size_t size)
{
	const char *base, *p;
	char *real;
	Dl_info info;

	if (!dladdr((void *)ibv_read_ibdev_sysfs_file, &info) || !info.dli_fname)
		return 0;
	real = realpath(info.dli_fname, NULL);
	if (!real)
		return 0;
	snprintf(path, size, "%s", real);
	free(real);
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strncmp(base, "libibverbs.so.1.", 16))
		return 0;
	p = strchr(base + 16, '.');	/* past the library's minor (14) */
	return p ? strtoul(p + 1, NULL, 10) : 0;
}

/*
 * May this libremu run in the libibverbs that loaded it?  The private ABI
 * (IBVERBS_PRIVATE_34, checked by libibverbs itself) stayed the same from
 * rdma-core 44 to 56 while the private interface under it changed: 54
 * gave ibv_cmd_reg_dmabuf_mr() a trailing argument, which a libremu built
 * in an older tree never passes, and 56's library would read stack
 * garbage as a command buffer.  A libremu built in a later tree than the
 * library is fine (CMakeLists.txt's probes, remu_verbs_has_wr_flush()), so
 * only a library of a later release line than the tree is refused, once
 * per process with a message saying what to do; remu devices are then
 * left unclaimed.
 */
static bool remu_verbs_release_ok(void)
{
	static int ok = -1;
	unsigned long built = strtoul(REMU_RDMA_CORE_RELEASE, NULL, 10), line;
	char path[PATH_MAX] = "";

	if (ok >= 0)
		return ok;
	line = remu_verbs_release_line(path, sizeof(path));
	ok = !line || !built || line <= built;
	if (!ok)
		fprintf(stderr,
			"libremu: built in rdma-core " REMU_RDMA_CORE_RELEASE
			" but loaded by libibverbs %lu (%s), a later release with"
			" the same private ABI and another private interface:"
			" remu devices are not used.  Rebuild libremu against this"
			" libibverbs (make deb, or scripts/build-provider --system,"
			" on this machine).\n", line, path);
	return ok;
}

/*
 * remu is an out-of-tree driver, so it has no rdma_driver_id, and its
 * devices carry whatever name `rdma link add` gave them.  The kernel module
 * instead exposes <ibdev>/hca_type containing REMU_HCA_TYPE, and that is
 * what identifies a remu device here.  libibverbs calls this for every
 * device not yet claimed by a provider tried before us, after the table
 * below has matched nothing.
 */
static bool remu_match_device(struct verbs_sysfs_dev *sysfs_dev)
{
	char hca_type[sizeof(REMU_HCA_TYPE) + 1];

	/* Strips the newline; fails if the value does not fit. */
	if (ibv_read_ibdev_sysfs_file(hca_type, sizeof(hca_type), sysfs_dev,
				      "hca_type") <= 0)
		return false;
	return strcmp(hca_type, REMU_HCA_TYPE) == 0 && remu_verbs_release_ok();
}

/*
 * Nothing to match by id, name or modalias, but the table must exist:
 * for a device that has a driver id (rxe, mlx5, ...), libibverbs (44 to
 * 56 alike) first offers it to every loaded provider's table without
 * checking that the provider has one, so a NULL table crashes every
 * program on a machine with another vendor's device.
 */
static const struct verbs_match_ent remu_match_table[] = {
	{},
};

static const struct verbs_device_ops remu_dev_ops = {
	.name = "remu",
	.match_table = remu_match_table,
	.match_min_abi_version = REMU_ABI_VERSION,
	.match_max_abi_version = REMU_ABI_VERSION,
	.match_device = remu_match_device,
	.alloc_device = remu_alloc_device,
	.uninit_device = remu_uninit_device,
	.alloc_context = remu_alloc_context,
	.import_context = remu_import_context,
};
PROVIDER_DRIVER(remu, remu_dev_ops);

/* for remudv.h: objects of another provider are refused (EOPNOTSUPP) */
int remu_is_remu_context(struct ibv_context *ctx)
{
	return ctx && verbs_get_device(ctx->device)->ops == &remu_dev_ops;
}

bool remudv_is_supported(struct ibv_device *device)
{
	return device && verbs_get_device(device)->ops == &remu_dev_ops;
}
