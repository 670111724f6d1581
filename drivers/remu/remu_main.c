// SPDX-License-Identifier: GPL-2.0
/*
 * remu_main.c - module init and exit, the "remu" rdma link type, the list
 * of devices, and the netdev notifier that keeps each device's port in
 * step with its Ethernet device.
 *
 * A device lives from newlink (`rdma link add NAME type remu netdev IF`)
 * until one of: `rdma link delete NAME` (the RDMA core unregisters it),
 * its netdev going away (NETDEV_UNREGISTER queues the unregistration), or
 * module exit.  In every case the core calls remu_dealloc_driver() last,
 * which takes the device off remu_dev_list, releases its namespace's
 * RoCEv2 UDP sockets (remu_net.c) and drops the netdev reference.
 *
 * Locking: remu_dev_lock (a mutex) protects remu_dev_list.  The netdev
 * notifier runs under rtnl_lock and takes remu_dev_lock inside it; nothing
 * takes rtnl_lock while holding remu_dev_lock.
 */
#include <linux/module.h>
#include <linux/if_arp.h>
#include <net/addrconf.h>
#include <rdma/rdma_netlink.h>
#include <rdma/remu-abi.h>

#include "remu.h"
#include "remu_net.h"

static LIST_HEAD(remu_dev_list);
static DEFINE_MUTEX(remu_dev_lock);	/* protects remu_dev_list */

/* Find the device on @ndev.  Caller holds remu_dev_lock. */
static struct remu_dev *remu_find_by_netdev(struct net_device *ndev)
{
	struct remu_dev *rdev;

	lockdep_assert_held(&remu_dev_lock);
	list_for_each_entry(rdev, &remu_dev_list, list)
		if (rdev->ndev == ndev)
			return rdev;
	return NULL;
}

#ifndef REMU_HAVE_IB_DEVICE_GET_BY_NAME
/*
 * ib_device_get_by_name() for kernels that keep it to ib_core (7.x,
 * remu_compat.h): the remu device called @name, with a reference the
 * caller drops with ib_device_put(), or NULL.
 */
struct ib_device *remu_compat_get_by_name(const char *name,
					  enum rdma_driver_id driver_id)
{
	struct ib_device *found = NULL;
	struct remu_dev *rdev;

	mutex_lock(&remu_dev_lock);
	list_for_each_entry(rdev, &remu_dev_list, list) {
		if (!strcmp(dev_name(&rdev->ib_dev.dev), name) &&
		    ib_device_try_get(&rdev->ib_dev)) {
			found = &rdev->ib_dev;
			break;
		}
	}
	mutex_unlock(&remu_dev_lock);
	return found;
}
EXPORT_SYMBOL_NS_GPL(remu_compat_get_by_name, REMU_TEST_NS);
#endif

/*
 * A name containing "rxe" or "siw" would be claimed by those providers'
 * name match in libibverbs before libremu sees the device.
 */
static bool remu_name_ok(const char *name)
{
	return !strstr(name, "rxe") && !strstr(name, "siw");
}

/* May a device called @ibdev_name be made on @ndev?  0 or -errno. */
static int remu_newlink_check(const char *ibdev_name, struct net_device *ndev)
{
	struct ib_device *other;

	if (ndev->type != ARPHRD_ETHER) {
		pr_warn("%s: netdev %s is not an Ethernet device\n",
			ibdev_name, netdev_name(ndev));
		return -EINVAL;
	}
	if (!remu_name_ok(ibdev_name)) {
		pr_warn("%s: device names containing \"rxe\" or \"siw\" are claimed by other providers\n",
			ibdev_name);
		return -EINVAL;
	}
	other = ib_device_get_by_name(ibdev_name, RDMA_DRIVER_UNKNOWN);
	if (other) {
		ib_device_put(other);
		pr_warn("%s: an RDMA device of that name exists\n", ibdev_name);
		return -EEXIST;
	}
	return 0;
}

/*
 * A new device on @ndev, on remu_dev_list (so that a second newlink on
 * @ndev fails) and holding @ndev; or an ERR_PTR.
 */
static struct remu_dev *remu_dev_alloc(const char *ibdev_name,
				       struct net_device *ndev)
{
	struct remu_dev *rdev;

	mutex_lock(&remu_dev_lock);
	rdev = remu_find_by_netdev(ndev);
	if (rdev) {
		pr_warn("%s: netdev %s already carries %s\n", ibdev_name,
			netdev_name(ndev), dev_name(&rdev->ib_dev.dev));
		mutex_unlock(&remu_dev_lock);
		return ERR_PTR(-EEXIST);
	}
	rdev = ib_alloc_device(remu_dev, ib_dev);
	if (!rdev) {
		mutex_unlock(&remu_dev_lock);
		return ERR_PTR(-ENOMEM);
	}
	remu_obj_get(REMU_OBJ_DEV);
	rdev->ndev = ndev;
	netdev_hold(ndev, &rdev->ndev_tracker, GFP_KERNEL);
	list_add_tail(&rdev->list, &remu_dev_list);
	mutex_unlock(&remu_dev_lock);
	return rdev;
}

/*
 * Everything a device needs before registration.  On error the caller's
 * ib_dealloc_device() undoes what was done, through dealloc_driver.
 */
static int remu_dev_setup(struct remu_dev *rdev)
{
	int err;

	remu_init_attr(rdev);
	remu_mr_dev_init(rdev);
	remu_limits_apply(rdev);	/* the module parameters max_* */
	ib_set_device_ops(&rdev->ib_dev, &remu_dev_ops);
	err = remu_dm_dev_init(rdev);	/* the device memory pool */
	if (err)
		return err;
	err = remu_dmabuf_dev_init(rdev);	/* for dma-buf attachments */
	if (err)
		return err;
	err = remu_mcast_dev_init(rdev);	/* the multicast groups */
	if (err)
		return err;
	err = remu_net_dev_add(rdev);	/* UDP 4791 in the netdev's netns */
	if (err)
		return err;
	return ib_device_set_netdev(&rdev->ib_dev, rdev->ndev, 1);
}

/**
 * remu_newlink - create a device on @ndev; the rdma_link_ops callback
 * @ibdev_name: the name the user chose
 * @ndev: the Ethernet device, referenced by the caller for the call
 *
 * Context: process context, may sleep; called without rtnl_lock.
 * Return: 0 or a negative errno: -EINVAL for a non-Ethernet netdev or a
 * name another provider would claim, -EEXIST when @ndev already carries a
 * remu device or the name is taken, -EADDRINUSE when UDP port 4791 is
 * taken in @ndev's network namespace, -ENOMEM, or the core's error.
 */
static int remu_newlink(const char *ibdev_name, struct net_device *ndev)
{
	struct remu_dev *rdev;
	int err;

	err = remu_newlink_check(ibdev_name, ndev);
	if (err)
		return err;
	rdev = remu_dev_alloc(ibdev_name, ndev);
	if (IS_ERR(rdev))
		return PTR_ERR(rdev);
	err = remu_dev_setup(rdev);
	if (err)
		goto err_dealloc;
	err = ib_register_device(&rdev->ib_dev, ibdev_name, NULL);
	if (err) {
		/* the core returns -ENFILE for a name that is taken */
		if (err == -ENFILE)
			err = -EEXIST;
		goto err_dealloc;
	}
	/* rdev may be gone already if it was unregistered concurrently */
	return 0;

err_dealloc:
	pr_warn("%s: cannot create device on %s: %d\n", ibdev_name,
		netdev_name(ndev), err);
	ib_dealloc_device(&rdev->ib_dev);	/* calls remu_dealloc_driver() */
	return err;
}

/**
 * remu_dealloc_driver - release what remu holds for a device
 * @ibdev: the device; the core frees it after this returns
 *
 * Context: process context; called by the core once the device is
 * unregistered (or failed to register), never concurrently with any
 * other op on it.
 */
void remu_dealloc_driver(struct ib_device *ibdev)
{
	struct remu_dev *rdev = to_remu_dev(ibdev);

	mutex_lock(&remu_dev_lock);
	list_del(&rdev->list);
	mutex_unlock(&remu_dev_lock);
	remu_net_dev_del(rdev);
	remu_mcast_dev_fini(rdev);	/* leaves IP groups: before netdev_put */
	netdev_put(rdev->ndev, &rdev->ndev_tracker);
	remu_mr_dev_fini(rdev);
	remu_dm_dev_fini(rdev);
	remu_dmabuf_dev_fini(rdev);
	remu_obj_put(REMU_OBJ_DEV);
}

static void remu_port_event(struct remu_dev *rdev, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &rdev->ib_dev,
		.element.port_num = 1,
		.event = type,
	};

	ib_dispatch_event(&ev);
}

static int remu_netdev_event(struct notifier_block *nb, unsigned long event,
			     void *ptr)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);
	struct remu_dev *rdev;

	mutex_lock(&remu_dev_lock);
	rdev = remu_find_by_netdev(ndev);
	/* a device whose unregistration has begun takes no more events */
	if (!rdev || !ib_device_try_get(&rdev->ib_dev)) {
		mutex_unlock(&remu_dev_lock);
		return NOTIFY_DONE;
	}
	mutex_unlock(&remu_dev_lock);

	switch (event) {
	case NETDEV_UNREGISTER:
		remu_dbg_dev(rdev, "netdev %s going away\n", netdev_name(ndev));
		ib_unregister_device_queued(&rdev->ib_dev);
		break;
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		/* after 6.12 ib_core sends these itself, once per change */
		if (!REMU_CORE_PORT_EVENTS)
			remu_port_event(rdev,
					remu_port_state(ndev) == IB_PORT_ACTIVE ?
					IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR);
		break;
	default:
		break;
	}
	ib_device_put(&rdev->ib_dev);
	return NOTIFY_DONE;
}

static struct notifier_block remu_netdev_notifier = {
	.notifier_call = remu_netdev_event,
};

static struct rdma_link_ops remu_link_ops = {
	.type = "remu",
	.newlink = remu_newlink,
};

/*
 * Unregister every device and wait until each one's dealloc_driver has
 * run.  ib_unregister_device() is fenced by the core: when it returns the
 * device is fully unregistered, even if another path (dellink, a queued
 * netdev unregistration) got there first.
 */
static void remu_remove_all(void)
{
	struct remu_dev *rdev;

	mutex_lock(&remu_dev_lock);
	while (!list_empty(&remu_dev_list)) {
		rdev = list_first_entry(&remu_dev_list, struct remu_dev, list);
		get_device(&rdev->ib_dev.dev);
		mutex_unlock(&remu_dev_lock);
		ib_unregister_device(&rdev->ib_dev);
		put_device(&rdev->ib_dev.dev);
		mutex_lock(&remu_dev_lock);
	}
	mutex_unlock(&remu_dev_lock);
}

static int __init remu_init(void)
{
	int err;

	remu_obj_init();
	err = remu_queues_init();
	if (err)
		goto err_obj;
	err = remu_net_init();
	if (err)
		goto err_queues;
	err = register_netdevice_notifier(&remu_netdev_notifier);
	if (err)
		goto err_net;
	rdma_link_register(&remu_link_ops);
	pr_info("loaded, version %s, uverbs ABI %d\n", REMU_VERSION_STR,
		REMU_ABI_VERSION);
	return 0;

err_net:
	remu_net_exit();
err_queues:
	remu_queues_exit();
err_obj:
	remu_obj_exit();
	return err;
}

static void __exit remu_exit(void)
{
	rdma_link_unregister(&remu_link_ops);
	remu_remove_all();
	unregister_netdevice_notifier(&remu_netdev_notifier);
	remu_net_exit();
	remu_queues_exit();
	if (remu_obj_exit())
		pr_info("unloaded\n");
}

module_init(remu_init);
module_exit(remu_exit);

MODULE_AUTHOR("The remu developers");
MODULE_DESCRIPTION("remu: software RoCEv2 NIC with on-demand paging, device memory and dma-buf import");
MODULE_LICENSE("GPL");
MODULE_VERSION(REMU_VERSION_STR);
MODULE_ALIAS_RDMA_LINK("remu");
