// SPDX-License-Identifier: GPL-2.0
/*
 * remu_ah.c - address handles (RoCEv2, IPv4-mapped and IPv6 GIDs).
 *
 * Owns: struct remu_ah and the per-device table of AH numbers
 * (rdev->q.ah_xa).  A UD send WQE names its destination by AH number
 * (the provider has no kernel pointers); the engine turns the number back
 * into an address vector with remu_ah_resolve(), which also checks that
 * the AH belongs to the QP's PD.  Kernel consumers' WQEs are built from
 * their ib_ah, checked at post time.
 *
 * Locking: the xarray's own lock (irq-safe: create_ah and destroy_ah may
 * run in atomic context for kernel consumers) guards the table; an AH is
 * immutable between creation and destruction, and remu_ah_resolve()
 * copies it out under the lock.
 */
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include <rdma/uverbs_ioctl.h>

#include "remu_qp.h"

int remu_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		   struct ib_udata *udata)
{
	struct remu_dev *rdev = to_remu_dev(ibah->device);
	struct remu_ah *ah = to_remu_ah(ibah);
	struct rdma_ah_attr *a = init->ah_attr;
	struct remu_create_ah_resp resp = {};
	gfp_t gfp = init->flags & RDMA_CREATE_AH_SLEEPABLE ?
		    GFP_KERNEL : GFP_ATOMIC;
	const struct ib_global_route *grh;
	enum rdma_network_type net;
	unsigned long flags;
	bool v4, src_v4;
	int err;

	err = remu_check_av(a);
	if (err)
		return err;
	grh = rdma_ah_read_grh(a);
	net = rdma_gid_attr_network_type(grh->sgid_attr);
	v4 = ipv6_addr_v4mapped((const struct in6_addr *)grh->dgid.raw);
	src_v4 = net == RDMA_NETWORK_IPV4;
	/* source and destination must be of the same IP family */
	if (v4 != src_v4)
		return -EINVAL;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	if (atomic_inc_return(&rdev->q.nr_ah) > rdev->attr.max_ah) {
		err = -ENOMEM;
		goto err_count;
	}

	ah->attr = *a;
	ah->attr.grh.sgid_attr = NULL;	/* the core holds ibah->sgid_attr */
	ah->net_type = net;
	xa_lock_irqsave(&rdev->q.ah_xa, flags);
	err = __xa_alloc_cyclic(&rdev->q.ah_xa, &ah->ah_num, ah,
				XA_LIMIT(1, REMU_MAX_QPN), &rdev->q.ah_next,
				gfp);
	xa_unlock_irqrestore(&rdev->q.ah_xa, flags);
	if (err < 0)
		goto err_count;

	if (udata) {
		resp.ah_num = ah->ah_num;
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_xa;
	}
	remu_obj_get(REMU_OBJ_AH);
	return 0;

err_xa:
	xa_erase_irq(&rdev->q.ah_xa, ah->ah_num);
err_count:
	atomic_dec(&rdev->q.nr_ah);
	return err;
}

int remu_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	struct remu_dev *rdev = to_remu_dev(ibah->device);
	struct remu_ah *ah = to_remu_ah(ibah);
	unsigned long irqf;

	xa_lock_irqsave(&rdev->q.ah_xa, irqf);
	__xa_erase(&rdev->q.ah_xa, ah->ah_num);
	xa_unlock_irqrestore(&rdev->q.ah_xa, irqf);
	atomic_dec(&rdev->q.nr_ah);
	remu_obj_put(REMU_OBJ_AH);
	return 0;
}

int remu_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	*attr = to_remu_ah(ibah)->attr;
	return 0;
}

/**
 * remu_ah_resolve - the address vector of AH number @ah_num
 * @rdev: the device
 * @ah_num: from a UD send WQE
 * @pd: the PD of the QP the WQE was posted to
 * @attr: filled with a copy (no sgid_attr reference: look the source GID
 *	up by attr->grh.sgid_index when building the packet)
 *
 * Context: any.
 * Return: 0, or -EINVAL for an unknown AH or one of another PD.
 */
int remu_ah_resolve(struct remu_dev *rdev, u32 ah_num, struct ib_pd *pd,
		    struct rdma_ah_attr *attr)
{
	struct remu_ah *ah;
	unsigned long flags;
	int err = -EINVAL;

	xa_lock_irqsave(&rdev->q.ah_xa, flags);
	ah = xa_load(&rdev->q.ah_xa, ah_num);
	if (ah && ah->ib_ah.pd == pd) {
		*attr = ah->attr;
		err = 0;
	}
	xa_unlock_irqrestore(&rdev->q.ah_xa, flags);
	return err;
}
