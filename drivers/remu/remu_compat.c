// SPDX-License-Identifier: GPL-2.0
/*
 * remu_compat.c - the out-of-line half of remu_compat.h: stand-ins for
 * kernel functions that older kernels do not export to drivers.
 *
 * Owns nothing; each function's locking is the one of the upstream
 * function it stands in for.
 */
#include "remu.h"

/*
 * /sys/class/infiniband/<dev>/absent: what this build of remu cannot offer
 * on the kernel it was built for, one "feature: reason" line each (empty
 * when nothing is missing).  docs/portability.md lists the same; tests
 * that need a feature listed here skip with the reason.
 */
static ssize_t absent_show(struct device *device,
			   struct device_attribute *attr, char *buf)
{
	struct remu_dev *rdev = rdma_device_to_drv_device(device,
							   struct remu_dev,
							   ib_dev);
	int len = 0;

	if (!REMU_HAVE_IBA15) {
		len += sysfs_emit_at(buf, len,
				     "flush: this kernel's ib_core has no IBA 1.5 FLUSH (6.2 and later)\n");
		len += sysfs_emit_at(buf, len,
				     "atomic_write: this kernel's ib_core has no IBA 1.5 ATOMIC_WRITE (6.2 and later)\n");
	}
	len += remu_dmabuf_absent(rdev, buf, len);
	return len;
}
DEVICE_ATTR_RO(absent);

#ifndef REMU_HAVE_IB_DEVICE_GET_NETDEV
/*
 * ib_device_get_netdev() for kernels that keep it to ib_core (before
 * 6.10): remu's single port runs over rdev->ndev, on which remu holds a
 * reference from newlink to dealloc_driver; the caller gets one of its own
 * and drops it with dev_put(), as with the upstream function.
 */
struct net_device *remu_compat_get_netdev(struct ib_device *ibdev, u32 port)
{
	struct net_device *ndev;

	if (port != 1)
		return NULL;
	ndev = READ_ONCE(to_remu_dev(ibdev)->ndev);
	if (ndev)
		dev_hold(ndev);
	return ndev;
}
#endif
