// SPDX-License-Identifier: GPL-2.0
/*
 * remu_verbs.c - the verbs entry points of the device itself: device and
 * port queries, user contexts, protection domains, and the ib_device_ops
 * table that lists every verb remu implements.
 *
 * Limits: every object count the device reports (max_pd, max_qp,
 * max_cq, max_srq, max_mr, max_mw, max_ah) is enforced where the object
 * is made, with ENOMEM as mlx5 (its firmware's "resources exceeded"),
 * and so is the number of user contexts per device (max_ucontext, which
 * the verbs do not report).  Each is a module parameter of the same
 * name, read when a device is created, that can lower the default (the
 * compile-time maximum in remu_param.h) but not raise it: a host can
 * give its remu devices the size of a smaller NIC.
 *
 * Locking: the attributes here are fixed at creation or read live from
 * the netdev (under the reference ib_device_get_netdev() takes); PDs
 * carry no state of their own; a context's only state is its mapping
 * tracker (remu_umap.c, its own lock) and its device memory quota
 * (remu_dm.c); the live counts are atomics, so nothing here takes a
 * lock.
 */
#include <linux/ethtool.h>
#include <linux/module.h>
#include <linux/rtnetlink.h>
#include <linux/sysfs.h>
#include <net/addrconf.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/remu-abi.h>

#include "remu.h"
#include "remu_qp.h"

static unsigned int remu_max_pd = REMU_MAX_PD;
module_param_named(max_pd, remu_max_pd, uint, 0444);
MODULE_PARM_DESC(max_pd, "protection domains per device (default and maximum 65536)");
static unsigned int remu_max_qp = REMU_MAX_QP;
module_param_named(max_qp, remu_max_qp, uint, 0444);
MODULE_PARM_DESC(max_qp, "QPs per device, the GSI QP included (default and maximum 16384)");
static unsigned int remu_max_cq = REMU_MAX_CQ;
module_param_named(max_cq, remu_max_cq, uint, 0444);
MODULE_PARM_DESC(max_cq, "CQs per device (default and maximum 16384)");
static unsigned int remu_max_srq = REMU_MAX_SRQ;
module_param_named(max_srq, remu_max_srq, uint, 0444);
MODULE_PARM_DESC(max_srq, "SRQs per device (default and maximum 16384)");
static unsigned int remu_max_mr = REMU_MAX_MR;
module_param_named(max_mr, remu_max_mr, uint, 0444);
MODULE_PARM_DESC(max_mr, "memory regions per device (default and maximum 1048576)");
static unsigned int remu_max_mw = REMU_MAX_MW;
module_param_named(max_mw, remu_max_mw, uint, 0444);
MODULE_PARM_DESC(max_mw, "memory windows per device (default and maximum 65536)");
static unsigned int remu_max_ah = REMU_MAX_AH;
module_param_named(max_ah, remu_max_ah, uint, 0444);
MODULE_PARM_DESC(max_ah, "address handles per device (default and maximum 65536)");
static unsigned int remu_max_uctx = REMU_MAX_UCONTEXT;
module_param_named(max_ucontext, remu_max_uctx, uint, 0444);
MODULE_PARM_DESC(max_ucontext, "open user contexts per device (default and maximum 512)");

/* @param, at least 1 (the kernel's own objects need it) and at most @max */
static int remu_limit(unsigned int param, unsigned int max)
{
	return clamp(param, 1u, max);
}

/**
 * remu_limits_apply - the module parameters max_* on a new device
 * @rdev: the device, its attributes filled in (remu_init_attr(),
 *	  remu_mr_dev_init())
 *
 * Each limit reported is the one enforced: lowered here, never raised.
 */
void remu_limits_apply(struct remu_dev *rdev)
{
	struct ib_device_attr *a = &rdev->attr;

	a->max_pd = remu_limit(remu_max_pd, REMU_MAX_PD);
	a->max_qp = remu_limit(remu_max_qp, REMU_MAX_QP);
	a->max_cq = remu_limit(remu_max_cq, REMU_MAX_CQ);
	a->max_srq = remu_limit(remu_max_srq, REMU_MAX_SRQ);
	a->max_mr = remu_limit(remu_max_mr, REMU_MAX_MR);
	a->max_mw = remu_limit(remu_max_mw, REMU_MAX_MW);
	a->max_ah = remu_limit(remu_max_ah, REMU_MAX_AH);
	atomic_set(&rdev->nr_pd, 0);
	atomic_set(&rdev->nr_uctx, 0);
}

/**
 * remu_init_attr - fill in the device attributes of a new device
 * @rdev: the device, before registration
 *
 * Only what remu implements is reported; everything a later feature adds
 * (ODP, masked atomics...) stays zero until it works; max_dm_size is set
 * by remu_dm_dev_init().
 */
void remu_init_attr(struct remu_dev *rdev)
{
	struct ib_device_attr *a = &rdev->attr;
	struct ib_device *ibdev = &rdev->ib_dev;

	a->fw_ver = ((u64)REMU_VERSION_MAJOR << 32) |
		    ((u64)REMU_VERSION_MINOR << 16) | REMU_VERSION_SUB;
	a->vendor_id = REMU_VENDOR_ID;
	a->vendor_part_id = REMU_VENDOR_PART_ID;
	a->hw_ver = REMU_HW_VER;
	a->page_size_cap = PAGE_SIZE;
	a->max_pd = REMU_MAX_PD;
	a->max_pkeys = REMU_PKEY_TBL_LEN;
	a->max_qp = REMU_MAX_QP;
	a->max_qp_wr = REMU_MAX_QP_WR;
	a->max_send_sge = REMU_MAX_SGE;
	a->max_recv_sge = REMU_MAX_SGE;
	a->max_sge_rd = REMU_MAX_SGE;
	a->max_qp_rd_atom = REMU_MAX_RD_ATOMIC;
	a->max_qp_init_rd_atom = REMU_MAX_RD_ATOMIC;
	a->max_cq = REMU_MAX_CQ;
	a->max_cqe = REMU_MAX_CQE;
	a->max_srq = REMU_MAX_SRQ;
	a->max_srq_wr = REMU_MAX_SRQ_WR;
	a->max_srq_sge = REMU_MAX_SRQ_SGE;
	a->max_ah = REMU_MAX_AH;
	a->kernel_cap_flags = IBK_ALLOW_USER_UNREG;
	/* one lock per device serialises its atomics (remu_mr_atomic) */
	a->atomic_cap = IB_ATOMIC_HCA;
	a->masked_atomic_cap = IB_ATOMIC_NONE;
	/* completion timestamps: the clock remu_cq.c stamps CQEs with */
	a->hca_core_clock = REMU_HCA_CORE_CLOCK_KHZ;
	a->timestamp_mask = REMU_TIMESTAMP_MASK;
	addrconf_addr_eui48((unsigned char *)&a->sys_image_guid,
			    rdev->ndev->dev_addr);

	strscpy(ibdev->node_desc, "remu", sizeof(ibdev->node_desc));
	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = 1;
	ibdev->node_guid = a->sys_image_guid;
	/* user post_send is the doorbell; user req_notify arms the CQ */
	ibdev->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				  BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
	remu_dev_queues_init(rdev);
}

/*
 * The extended query_device of a provider that saw REMU_UCTX_RATE_LIMIT
 * asks for remu's part of the response (struct remu_query_device_resp:
 * packet_pacing_caps); older providers ask for none.
 */
static int remu_query_device(struct ib_device *ibdev,
			     struct ib_device_attr *attr,
			     struct ib_udata *udata)
{
	struct remu_query_device_resp resp = {};

	/* 7.x registers with no udata at all (6.x: an empty one) */
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	*attr = to_remu_dev(ibdev)->attr;
	if (!udata || !udata->outlen)
		return 0;
	remu_pace_caps(&resp.packet_pacing_caps);
	resp.response_length = min_t(size_t, sizeof(resp), udata->outlen);
	return ib_copy_to_udata(udata, &resp, resp.response_length);
}

static void remu_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	snprintf(str, IB_FW_VERSION_NAME_MAX, "%s", REMU_VERSION_STR);
}

/**
 * remu_port_state - the IB port state that follows @ndev's link
 * @ndev: the port's netdev
 *
 * Return: IB_PORT_ACTIVE when the netdev is up with carrier, else
 * IB_PORT_DOWN: the rule of mlx5's RoCE ports, of rxe and, after 6.12, of
 * ib_core's own port events (ib_get_curr_port_state()), so that a query
 * after an event agrees with it.  The operational state (netif_oper_up())
 * would not: the link watch updates it after NETDEV_UP.
 */
enum ib_port_state remu_port_state(struct net_device *ndev)
{
	return netif_running(ndev) && netif_carrier_ok(ndev) ?
	       IB_PORT_ACTIVE : IB_PORT_DOWN;
}

/* The largest IB MTU whose RoCEv2 packet fits in one frame of @mtu. */
static enum ib_mtu remu_mtu_for(unsigned int mtu)
{
	enum ib_mtu m;

	for (m = IB_MTU_4096; m > IB_MTU_256; m--)
		if (ib_mtu_enum_to_int(m) + REMU_ROCE_OVERHEAD <= mtu)
			return m;
	return IB_MTU_256;
}

/**
 * remu_port_active_mtu - the port's active MTU, from its netdev's MTU
 * @ibdev: the device
 *
 * What remu_query_port() reports as active_mtu, without the rtnl_lock
 * that ib_query_port() takes (ib_get_eth_speed()): modify_qp calls this
 * under qp->mutex, which rdma_cm takes inside its own locks, and those
 * nest inside rtnl_lock.
 * Return: the IB_MTU_* value, or -ENODEV without a netdev.
 */
int remu_port_active_mtu(struct ib_device *ibdev)
{
	struct net_device *ndev = ib_device_get_netdev(ibdev, 1);
	int mtu;

	if (!ndev)
		return -ENODEV;
	mtu = remu_mtu_for(READ_ONCE(ndev->mtu));
	dev_put(ndev);
	return mtu;
}

static int remu_query_port(struct ib_device *ibdev, u32 port,
			   struct ib_port_attr *attr)
{
	struct net_device *ndev;
	int err;

	ndev = ib_device_get_netdev(ibdev, port);
	if (!ndev)
		return -ENODEV;

	/* the core zeroed *attr */
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = remu_mtu_for(READ_ONCE(ndev->mtu));
	attr->phys_mtu = ib_mtu_enum_to_int(IB_MTU_4096);
	attr->gid_tbl_len = REMU_GID_TBL_LEN;
	attr->ip_gids = true;
	/* the GSI QP serves ib_mad, so the CM can run over this port */
	attr->port_cap_flags = IB_PORT_CM_SUP;
	attr->max_msg_sz = REMU_MAX_MSG_SZ;
	attr->pkey_tbl_len = REMU_PKEY_TBL_LEN;
	attr->max_vl_num = 1;
	attr->state = remu_port_state(ndev);
	attr->phys_state = attr->state == IB_PORT_ACTIVE ?
			   IB_PORT_PHYS_STATE_LINK_UP :
			   IB_PORT_PHYS_STATE_DISABLED;
	dev_put(ndev);

	err = ib_get_eth_speed(ibdev, port, &attr->active_speed,
			       &attr->active_width);
	return err;
}

#ifdef REMU_HAVE_QUERY_PORT_SPEED
/*
 * ibv_query_port_speed() (7.x): the port's bandwidth in units of 100 Mb/s,
 * from the netdev's link speed as ethtool reports it, the speed that
 * remu_query_port()'s active_speed and active_width encode (an unknown
 * speed counts as 1 Gb/s there and here); 0 while the port is down, as
 * mlx5 answers.
 */
static int remu_query_port_speed(struct ib_device *ibdev, u32 port,
				 u64 *speed)
{
	struct ethtool_link_ksettings ks = {};
	struct net_device *ndev;
	u32 mbps = SPEED_1000;
	int err = 0;

	ndev = ib_device_get_netdev(ibdev, port);
	if (!ndev)
		return -ENODEV;
	rtnl_lock();
	if (READ_ONCE(ndev->reg_state) != NETREG_REGISTERED) {
		err = -ENODEV;
	} else if (remu_port_state(ndev) != IB_PORT_ACTIVE) {
		mbps = 0;
	} else if (!__ethtool_get_link_ksettings(ndev, &ks) &&
		   ks.base.speed != (u32)SPEED_UNKNOWN) {
		mbps = ks.base.speed;
	}
	rtnl_unlock();
	dev_put(ndev);
	*speed = mbps / 100;
	return err;
}
#endif

static int remu_get_port_immutable(struct ib_device *ibdev, u32 port,
				   struct ib_port_immutable *immutable)
{
	struct ib_port_attr attr = {};
	int err;

	/*
	 * RoCEv2 only, with MADs (ib_mad creates the GSI QP, QPN 1, at
	 * registration) and therefore the IB CM and the RDMA CM.
	 */
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	err = ib_query_port(ibdev, port, &attr);
	if (err)
		return err;
	immutable->pkey_tbl_len = attr.pkey_tbl_len;
	immutable->gid_tbl_len = attr.gid_tbl_len;
	return 0;
}

static enum rdma_link_layer remu_get_link_layer(struct ib_device *ibdev,
						u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int remu_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			   u16 *pkey)
{
	if (index >= REMU_PKEY_TBL_LEN)
		return -EINVAL;
	*pkey = REMU_DEFAULT_PKEY;
	return 0;
}

/*
 * What a process's provider learns about the module: the answer to
 * ibv_open_device(), and again to QUERY_CONTEXT for ibv_import_device().
 */
static const struct remu_alloc_ucontext_resp remu_uctx_resp = {
	.abi_version = REMU_ABI_VERSION,
	/*
	 * FLUSH and ATOMIC_WRITE only where ib_core has IBA 1.5.  Without
	 * this bit the provider refuses their IBV_QP_EX_WITH_* flags at QP
	 * creation with EOPNOTSUPP, as mlx5 refuses send ops it lacks (6.1).
	 */
	.comp_mask = REMU_UCTX_INLINE_RECV | REMU_UCTX_CQE_TIMESTAMP |
		     (REMU_HAVE_IBA15 ? REMU_UCTX_FLUSH_ATOMIC_WRITE : 0) |
		     REMU_UCTX_INDIRECT_MKEY | REMU_UCTX_RATE_LIMIT |
		     REMU_UCTX_IMPORT | REMU_UCTX_ECE,
};

static int remu_alloc_ucontext(struct ib_ucontext *uctx,
			       struct ib_udata *udata)
{
	struct remu_alloc_ucontext_resp resp = remu_uctx_resp;
	struct remu_dev *rdev = to_remu_dev(uctx->device);
	struct remu_ucontext *uc = to_remu_uc(uctx);
	int err;

	if (udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	err = ib_copy_to_udata(udata, &resp,
			       min_t(size_t, sizeof(resp), udata->outlen));
	if (err)
		return err;
	/* as mlx5 when it has no doorbell pages left for another context */
	if (atomic_inc_return(&rdev->nr_uctx) >
	    remu_limit(remu_max_uctx, REMU_MAX_UCONTEXT)) {
		err = -ENOMEM;
		goto err_count;
	}
	err = -ENOMEM;
	uc->umap = remu_umap_alloc();
	if (!uc->umap)
		goto err_count;
	uc->dmq = remu_dm_quota_new();
	if (!uc->dmq)
		goto err_umap;
	/*
	 * With disassociate_ucontext the core no longer pins the module for
	 * an open device; remu does, per context, so that rmmod with a live
	 * user fails with EBUSY (rdma link delete still works: it
	 * disassociates the context, which drops this reference).
	 */
	if (!try_module_get(THIS_MODULE)) {
		err = -ENODEV;
		goto err_dmq;
	}
	remu_obj_get(REMU_OBJ_UCONTEXT);
	return 0;

err_dmq:
	remu_dm_quota_put(uc->dmq);
err_umap:
	remu_umap_put(uc->umap);
err_count:
	atomic_dec(&rdev->nr_uctx);
	return err;
}

static void remu_dealloc_ucontext(struct ib_ucontext *uctx)
{
	struct remu_ucontext *uc = to_remu_uc(uctx);

	remu_dm_quota_put(uc->dmq);
	remu_umap_put(uc->umap);
	atomic_dec(&to_remu_dev(uctx->device)->nr_uctx);
	remu_obj_put(REMU_OBJ_UCONTEXT);
	module_put(THIS_MODULE);
}

/*
 * QUERY_CONTEXT (ibv_import_device() in another process, or this one, on
 * the context's command fd): the answer ibv_open_device() got, in the
 * driver attribute (remu_import.c declares it).
 */
static int remu_query_ucontext(struct ib_ucontext *uctx,
			       struct uverbs_attr_bundle *attrs)
{
	return uverbs_copy_to_struct_or_zero(attrs,
					     REMU_ATTR_QUERY_CONTEXT_RESP,
					     &remu_uctx_resp,
					     sizeof(remu_uctx_resp));
}

/*
 * The device is going away under a live process: the core has destroyed
 * the context's objects; take its ring mappings back.  The core then
 * raises IB_EVENT_DEVICE_FATAL and fails the process's further commands
 * with EIO.
 */
static void remu_disassociate_ucontext(struct ib_ucontext *uctx)
{
	remu_umap_disassociate(to_remu_uc(uctx)->umap);
}

static int remu_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct remu_dev *rdev = to_remu_dev(ibpd->device);

	if (atomic_inc_return(&rdev->nr_pd) > rdev->attr.max_pd) {
		atomic_dec(&rdev->nr_pd);
		return -ENOMEM;
	}
	remu_obj_get(REMU_OBJ_PD);
	return 0;
}

static int remu_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	atomic_dec(&to_remu_dev(ibpd->device)->nr_pd);
	remu_obj_put(REMU_OBJ_PD);
	return 0;
}

/* sysfs: hca_type is how the provider recognises a remu device */
static ssize_t hca_type_show(struct device *device,
			     struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", REMU_HCA_TYPE);
}
static DEVICE_ATTR_RO(hca_type);

static ssize_t parent_show(struct device *device,
			   struct device_attribute *attr, char *buf)
{
	struct remu_dev *rdev = rdma_device_to_drv_device(device,
							  struct remu_dev,
							  ib_dev);

	return sysfs_emit(buf, "%s\n", netdev_name(rdev->ndev));
}
static DEVICE_ATTR_RO(parent);

static struct attribute *remu_dev_attrs[] = {
	&dev_attr_hca_type.attr,
	&dev_attr_parent.attr,
	&dev_attr_absent.attr,		/* what this kernel lacks (remu_compat.c) */
	&dev_attr_dm_size.attr,		/* device memory pool (remu_dm.c) */
	&dev_attr_dm_in_use.attr,
	&dev_attr_dm_allocs.attr,
	&dev_attr_dm_largest_free.attr,
	NULL
};

static const struct attribute_group remu_attr_group = {
	.attrs = remu_dev_attrs,
};

/* udata wrappers for kernels before 6.11 (remu_compat.h) */
REMU_DEFINE_CREATE_CQ(remu_create_cq)
REMU_DEFINE_REG_DMABUF(remu_reg_user_mr_dmabuf)
REMU_DEFINE_REG_USER_MR(remu_reg_user_mr)
REMU_DEFINE_RESIZE_CQ(remu_resize_cq)

const struct ib_device_ops remu_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = REMU_ABI_VERSION,

	.advise_mr = remu_advise_mr,
	.alloc_dm = remu_alloc_dm,
	.alloc_hw_port_stats = remu_alloc_hw_port_stats,
	.alloc_mr = remu_alloc_mr,
	.alloc_mw = remu_alloc_mw,
	.alloc_pd = remu_alloc_pd,
	.alloc_ucontext = remu_alloc_ucontext,
	.attach_mcast = remu_attach_mcast,
	.create_ah = remu_create_ah,
	.create_cq = REMU_OP_CREATE_CQ(remu_create_cq),
	.create_qp = remu_create_qp,
	.create_srq = remu_create_srq,
	.create_user_ah = remu_create_ah,
	.dealloc_dm = remu_dealloc_dm,
	.dealloc_mw = remu_dealloc_mw,
	.dealloc_driver = remu_dealloc_driver,
	.dealloc_pd = remu_dealloc_pd,
	.dealloc_ucontext = remu_dealloc_ucontext,
	.dereg_mr = remu_dereg_mr,
	.disassociate_ucontext = remu_disassociate_ucontext,
	.fill_res_qp_entry = remu_fill_res_qp_entry,
	.fill_stat_mr_entry = remu_odp_fill_stat_mr_entry,
	.destroy_ah = remu_destroy_ah,
	.destroy_cq = remu_destroy_cq,
	.destroy_qp = remu_destroy_qp,
	.destroy_srq = remu_destroy_srq,
	.detach_mcast = remu_detach_mcast,
	.device_group = &remu_attr_group,
	.get_dev_fw_str = remu_get_dev_fw_str,
	.get_dma_mr = remu_get_dma_mr,
	.get_hw_stats = remu_get_hw_stats,
	.get_link_layer = remu_get_link_layer,
	.get_port_immutable = remu_get_port_immutable,
	.map_mr_sg = remu_map_mr_sg,
	.mmap = remu_mmap,
	.mmap_free = remu_mmap_free,
	.modify_qp = remu_modify_qp,
	.modify_srq = remu_modify_srq,
	.poll_cq = remu_poll_cq,
	.post_recv = remu_post_recv,
	.post_send = remu_post_send,
	.post_srq_recv = remu_post_srq_recv,
	.query_ah = remu_query_ah,
	.query_device = remu_query_device,
	.query_pkey = remu_query_pkey,
	.query_port = remu_query_port,
#ifdef REMU_HAVE_QUERY_PORT_SPEED
	.query_port_speed = remu_query_port_speed,
#endif
	.query_qp = remu_query_qp,
	.query_srq = remu_query_srq,
	.query_ucontext = remu_query_ucontext,
	.reg_dm_mr = remu_reg_dm_mr,
	.reg_user_mr = REMU_OP_REG_USER_MR(remu_reg_user_mr),
	.reg_user_mr_dmabuf = REMU_OP_REG_DMABUF(remu_reg_user_mr_dmabuf),
	.req_notify_cq = remu_req_notify_cq,
	.rereg_user_mr = remu_rereg_user_mr,
	.REMU_RESIZE_CQ = REMU_OP_RESIZE_CQ(remu_resize_cq),

	INIT_RDMA_OBJ_SIZE(ib_ah, remu_ah, ib_ah),
	INIT_RDMA_OBJ_SIZE(ib_cq, remu_cq, ib_cq),
	INIT_RDMA_OBJ_SIZE(ib_mw, remu_mw, ib_mw),
	INIT_RDMA_OBJ_SIZE(ib_pd, remu_pd, ib_pd),
	INIT_RDMA_OBJ_SIZE(ib_qp, remu_qp, ib_qp),
	INIT_RDMA_OBJ_SIZE(ib_srq, remu_srq, ib_srq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, remu_ucontext, ib_uc),
};
