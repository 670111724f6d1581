// SPDX-License-Identifier: GPL-2.0
/*
 * remu_compat.c - the out-of-line half of remu_compat.h: stand-ins for
 * kernel functions that older kernels do not export to drivers.
 *
 * Owns nothing; each function's locking is the one of the upstream
 * function it stands in for.
 */
#include "remu.h"

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
