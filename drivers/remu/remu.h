/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu.h - structures, converters, debug helpers and the cross-file
 * prototype index of the remu module (a software RoCEv2 NIC).
 *
 * Lock order (outermost first):
 *   rtnl_lock (netdev notifier) -> remu_dev_lock (the device list)
 * remu_dev_lock is never held across ib_register_device() or any call back
 * into the RDMA core that may sleep on a device's unregistration.
 * remu_ns_lock (remu_net.c, the per-namespace sockets) is never held
 * together with remu_dev_lock.
 * remu_mcast.lock (remu_mcast.c) -> rtnl_lock: attach/detach join and
 * leave IP groups under rtnl_lock; neither is ever taken under
 * qp->mutex.
 */
#ifndef REMU_H
#define REMU_H

#ifdef pr_fmt
#undef pr_fmt
#endif
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/list.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

#include "remu_param.h"
#include "remu_mr.h"
#include "remu_queue.h"
#include "remu_counters.h"

/**
 * struct remu_dev - one emulated NIC, created by `rdma link add`
 * @ib_dev:	the RDMA core device; allocated by ib_alloc_device()
 * @attr:	device attributes, fixed at creation
 * @ndev:	the Ethernet device the port runs over; remu holds a
 *		tracked reference from newlink to dealloc_driver
 * @ndev_tracker: tracker of that reference
 * @list:	entry in remu_dev_list, under remu_dev_lock
 * @mrs:	memory regions: key table and access-layer state (remu_mr.h)
 * @q:		queue objects of the device (remu_queue.h)
 * @ns:		the wire layer's state for the netdev's namespace (remu_net.c)
 * @ns_node:	entry in that state's device list (RCU, read on receive)
 * @counters:	the port's hw counters (remu_counters.c), see remu_count()
 * @dm:		the device memory pool (remu_dm.c), NULL if none
 * @dmabuf_dev:	the struct device remu attaches to dma-bufs with
 *		(remu_dmabuf.c)
 * @dmabuf_pci:	the PCI function above the netdev, referenced, or NULL:
 *		what remu attaches to peer-to-peer dma-bufs with
 *		(remu_dmabuf.c, docs/dma-buf.md)
 * @mcast:	the multicast groups and their QPs (remu_mcast.c)
 * @nr_pd, @nr_uctx: live PDs and user contexts, against attr.max_pd and
 *		the context limit (remu_verbs.c)
 */
struct remu_dev {
	struct ib_device ib_dev;
	struct ib_device_attr attr;
	struct net_device *ndev;
	netdevice_tracker ndev_tracker;
	struct list_head list;
	struct remu_mr_table mrs;
	struct remu_dev_queues q;
	struct remu_ns *ns;
	struct list_head ns_node;
	atomic64_t counters[REMU_CNT_COUNT];
	struct remu_dm_pool *dm;
	struct device *dmabuf_dev;
	struct device *dmabuf_pci;
	struct remu_mcast *mcast;
	atomic_t nr_pd;
	atomic_t nr_uctx;
};

static inline void remu_count(struct remu_dev *rdev, enum remu_counter c)
{
	atomic64_inc(&rdev->counters[c]);
}

static inline void remu_count_add(struct remu_dev *rdev, enum remu_counter c,
				  s64 n)
{
	atomic64_add(n, &rdev->counters[c]);
}

/**
 * struct remu_ucontext - one process's open device context
 * @ib_uc:	core object
 * @umap:	its mappings (remu_umap.c)
 * @dmq:	its device memory quota (remu_dm.c)
 */
struct remu_ucontext {
	struct ib_ucontext ib_uc;
	struct remu_umap *umap;
	struct remu_dm_quota *dmq;
};

static inline struct remu_ucontext *to_remu_uc(struct ib_ucontext *uc)
{
	return container_of(uc, struct remu_ucontext, ib_uc);
}

/* remu_umap.c */
struct remu_umap *remu_umap_alloc(void);
void remu_umap_put(struct remu_umap *um);
int remu_umap_map(struct remu_umap *um, struct vm_area_struct *vma,
		  struct remu_mmap_entry *me);
void remu_umap_disassociate(struct remu_umap *um);

/**
 * struct remu_pd - a protection domain
 * @ib_pd:	the core's
 * @may_fault:	an MR whose backing may fault (ODP, dma-buf) was made in
 *		it; set once, before the MR gets a key, never cleared: the
 *		doorbell's caller then leaves the engines of its QPs to the
 *		work item (remu_eng_inline_ok())
 */
struct remu_pd {
	struct ib_pd ib_pd;
	bool may_fault;
};

static inline struct remu_dev *to_remu_dev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct remu_dev, ib_dev);
}

static inline struct remu_pd *to_remu_pd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct remu_pd, ib_pd);
}

#define remu_dbg_dev(rdev, fmt, ...) \
	ibdev_dbg(&(rdev)->ib_dev, "%s: " fmt, __func__, ##__VA_ARGS__)

/*
 * Object accounting.  Every object remu creates is counted by type; the
 * counts are readable in debugfs (remu/objects) and must all be zero when
 * the module unloads, or the unload reports "remu: leaked ...".
 */
enum remu_obj_type {
	REMU_OBJ_DEV,
	REMU_OBJ_UCONTEXT,
	REMU_OBJ_PD,
	REMU_OBJ_MR,
	REMU_OBJ_CQ,
	REMU_OBJ_QP,
	REMU_OBJ_SRQ,
	REMU_OBJ_AH,
	REMU_OBJ_RING,
	REMU_OBJ_DM,
	REMU_OBJ_MW,
	REMU_OBJ_MCAST_GRP,
	REMU_OBJ_MCAST_ATTACH,
	REMU_OBJ_MKEY,
	REMU_OBJ_ZC,		/* remu_zc.c: payload by reference */
	REMU_OBJ_TYPE_COUNT
};

/* remu_obj.c */
extern struct dentry *remu_debugfs_root;
void remu_obj_get(enum remu_obj_type type);
void remu_obj_put(enum remu_obj_type type);
int remu_obj_init(void);
bool remu_obj_exit(void);

/* remu_verbs.c */
extern const struct ib_device_ops remu_dev_ops;
void remu_init_attr(struct remu_dev *rdev);
void remu_limits_apply(struct remu_dev *rdev);
enum ib_port_state remu_port_state(struct net_device *ndev);
int remu_port_active_mtu(struct ib_device *ibdev);

/* remu_qp.c */
void remu_dev_queues_init(struct remu_dev *rdev);
/* remu_counters.c */
struct rdma_hw_stats *remu_alloc_hw_port_stats(struct ib_device *ibdev,
					       u32 port);
int remu_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
		      u32 port, int index);

/* remu_dm.c */
extern struct device_attribute dev_attr_dm_size, dev_attr_dm_in_use,
	dev_attr_dm_allocs, dev_attr_dm_largest_free;
int remu_dm_dev_init(struct remu_dev *rdev);
void remu_dm_dev_fini(struct remu_dev *rdev);
struct remu_dm_quota *remu_dm_quota_new(void);
void remu_dm_quota_put(struct remu_dm_quota *q);
struct ib_dm *remu_alloc_dm(struct ib_device *ibdev, struct ib_ucontext *uctx,
			    struct ib_dm_alloc_attr *attr,
			    struct uverbs_attr_bundle *attrs);
int remu_dealloc_dm(struct ib_dm *ibdm, struct uverbs_attr_bundle *attrs);
void remu_dm_mr_init(struct remu_mr *mr, struct ib_dm *ibdm, u64 offset,
		     u64 length);
void remu_dm_query(struct ib_dm *ibdm, struct remu_query_dm_resp *resp);

/* remu_import.c */
extern const struct uapi_definition remu_import_defs[];

struct remu_dm *remu_dm_export_pages(struct ib_dm *ibdm, phys_addr_t *phys,
				     size_t *size);
int remu_dm_export_publish(struct remu_dm *dm, struct list_head *node);
void remu_dm_export_drop(struct remu_dm *dm, struct list_head *node);
u64 remu_dm_mmap_offset(struct remu_dm *dm);

/* remu_dmabuf_export.c: device memory exported as a dma-buf */
extern const struct uapi_definition remu_dmabuf_export_defs[];
void remu_dmabuf_export_revoke(struct list_head *node);

/* remu_dmabuf.c: the sysfs "absent" lines of peer-to-peer import */
int remu_dmabuf_absent(struct remu_dev *rdev, char *buf, int len);

/* remu_mcast.c */
int remu_mcast_dev_init(struct remu_dev *rdev);
void remu_mcast_dev_fini(struct remu_dev *rdev);
int remu_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
int remu_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);

/* remu_main.c */
void remu_dealloc_driver(struct ib_device *ibdev);

#endif /* REMU_H */
