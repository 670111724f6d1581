/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_compat.h - every difference between the kernels remu builds for
 * (Debian's 6.1, 6.12 and 7.3; docs/portability.md lists them all).
 *
 * Owns: the kernel-API shims.  The rest of the driver is written against
 * the 6.12 API and never tests a kernel version: what a kernel has is
 * found by scripts/compat-probe, which Kbuild runs against the target
 * kernel's headers and which writes remu_probes.h (REMU_HAVE_* macros).
 * Kbuild force-includes this file in every object of the module and of
 * the test modules (-include), so no source file includes it by hand.
 *
 * Rules: a missing function or constant gets its upstream name here (so
 * the driver keeps calling the upstream API); a changed signature gets a
 * REMU_* macro; a feature a kernel cannot offer is REMU_HAVE_* false and
 * the driver reports it absent (no silent difference).  No locking.
 */
#ifndef REMU_COMPAT_H
#define REMU_COMPAT_H

#include <linux/module.h>
#include <linux/mm.h>
#include <linux/ktime.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>

#include "remu_probes.h"

/* <linux/unaligned.h> since 6.12; <asm/unaligned.h> before */
#ifdef REMU_HAVE_LINUX_UNALIGNED_H
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

/*
 * IBA 1.5 FLUSH and ATOMIC_WRITE came to ib_core in 6.2.  Without them the
 * core rejects the MR access flags a FLUSH target needs and reports no
 * capability bit: remu then offers neither operation (REMU_HAVE_IBA15 is
 * 0: the requester refuses the work requests, the responder NAKs the
 * opcodes as unknown, the device reports no FLUSH/ATOMIC_WRITE caps).  The
 * constants below are wire and uverbs ABI numbers, the same on every
 * kernel, so that the code that handles them still compiles.
 */
#ifdef REMU_HAVE_IB_FLUSH
#define REMU_HAVE_IBA15 1
#else
#define REMU_HAVE_IBA15 0
/* enumerators, as the newer kernels' headers have them */
enum {
	IB_OPCODE_FLUSH			= 0x1C,
	IB_OPCODE_ATOMIC_WRITE		= 0x1D,
	IB_UVERBS_WR_FLUSH		= 14,
	IB_UVERBS_WR_ATOMIC_WRITE	= 15,
	IB_WC_FLUSH			= 8,
	IB_WC_ATOMIC_WRITE		= 9,
	IB_FLUSH_GLOBAL			= 1U << 0,
	IB_FLUSH_PERSISTENT		= 1U << 1,
	IB_FLUSH_RANGE			= 0,
	IB_FLUSH_MR			= 1,
	IB_ACCESS_FLUSH_GLOBAL		= 1 << 8,
	IB_ACCESS_FLUSH_PERSISTENT	= 1 << 9,
};

/* no capability bits to report */
#define IB_DEVICE_FLUSH_GLOBAL		0ULL
#define IB_DEVICE_FLUSH_PERSISTENT	0ULL
#define IB_DEVICE_ATOMIC_WRITE		0ULL
#endif

/*
 * ib_device_ops.create_cq and .reg_user_mr_dmabuf take the uverbs
 * attribute bundle since 6.11, the driver's udata before.  remu's
 * functions take the bundle; REMU_OP_*() names what goes into the ops
 * table, and REMU_DEFINE_*() (after the function, in remu_verbs.c)
 * defines the udata wrapper where the kernel needs one.  A user call's
 * udata is the driver_udata of its bundle; a kernel call has neither.
 */
static inline struct uverbs_attr_bundle *
remu_udata_to_attrs(struct ib_udata *udata)
{
	return udata ? container_of(udata, struct uverbs_attr_bundle,
				    driver_udata) : NULL;
}

#ifdef REMU_HAVE_CREATE_CQ_ATTRS
#define REMU_OP_CREATE_CQ(fn)		fn
#define REMU_DEFINE_CREATE_CQ(fn)
#else
#define REMU_OP_CREATE_CQ(fn)		fn##_udata
#define REMU_DEFINE_CREATE_CQ(fn)					\
static int fn##_udata(struct ib_cq *ibcq,				\
		      const struct ib_cq_init_attr *attr,		\
		      struct ib_udata *udata)				\
{									\
	return fn(ibcq, attr, remu_udata_to_attrs(udata));		\
}
#endif

#if defined(REMU_HAVE_REG_DMABUF_ATTRS)
#define REMU_OP_REG_DMABUF(fn)		fn
#define REMU_DEFINE_REG_DMABUF(fn)
#elif defined(REMU_HAVE_REG_USER_MR_DMAH)
/* 7.x: and a DMA handle (TPH steering tags), which remu does not offer */
#define REMU_OP_REG_DMABUF(fn)		fn##_dmah
#define REMU_DEFINE_REG_DMABUF(fn)					\
static struct ib_mr *fn##_dmah(struct ib_pd *ibpd, u64 offset,		\
			       u64 length, u64 iova, int fd,		\
			       int access, struct ib_dmah *dmah,	\
			       struct uverbs_attr_bundle *attrs)	\
{									\
	if (dmah)							\
		return ERR_PTR(-EOPNOTSUPP);				\
	return fn(ibpd, offset, length, iova, fd, access, attrs);	\
}
#else
#define REMU_OP_REG_DMABUF(fn)		fn##_udata
#define REMU_DEFINE_REG_DMABUF(fn)					\
static struct ib_mr *fn##_udata(struct ib_pd *ibpd, u64 offset,	\
				u64 length, u64 iova, int fd,		\
				int access, struct ib_udata *udata)	\
{									\
	return fn(ibpd, offset, length, iova, fd, access,		\
		  remu_udata_to_attrs(udata));				\
}
#endif

/* ib_device_ops.reg_user_mr: a DMA handle since 7.x (refused, as above) */
#ifdef REMU_HAVE_REG_USER_MR_DMAH
#define REMU_OP_REG_USER_MR(fn)		fn##_dmah
#define REMU_DEFINE_REG_USER_MR(fn)					\
static struct ib_mr *fn##_dmah(struct ib_pd *ibpd, u64 start,		\
			       u64 length, u64 iova, int access,	\
			       struct ib_dmah *dmah,			\
			       struct ib_udata *udata)			\
{									\
	if (dmah)							\
		return ERR_PTR(-EOPNOTSUPP);				\
	return fn(ibpd, start, length, iova, access, udata);		\
}
#else
#define REMU_OP_REG_USER_MR(fn)		fn
#define REMU_DEFINE_REG_USER_MR(fn)
#endif

/*
 * ib_device_ops.resize_cq became .resize_user_cq in 7.x (user CQs only,
 * an unsigned size): REMU_RESIZE_CQ names the member.
 */
#ifdef REMU_HAVE_RESIZE_USER_CQ
#define REMU_RESIZE_CQ			resize_user_cq
#define REMU_OP_RESIZE_CQ(fn)		fn##_user
#define REMU_DEFINE_RESIZE_CQ(fn)					\
static int fn##_user(struct ib_cq *ibcq, unsigned int cqe,		\
		     struct ib_udata *udata)				\
{									\
	if (cqe > INT_MAX)						\
		return -EINVAL;						\
	return fn(ibcq, cqe, udata);					\
}
#else
#define REMU_RESIZE_CQ			resize_cq
#define REMU_OP_RESIZE_CQ(fn)		fn
#define REMU_DEFINE_RESIZE_CQ(fn)
#endif

/* ib_umem_get() is ib_umem_get_va() in 7.x */
#ifndef REMU_HAVE_IB_UMEM_GET
#define ib_umem_get ib_umem_get_va
#endif

/*
 * ib_device_get_by_name() is kept to ib_core in 7.x (device names are per
 * network namespace there): remu_compat.c looks among remu's own devices,
 * which is what remu's callers need (newlink refuses a name a remu device
 * has; another driver's device of that name makes ib_register_device()
 * fail instead).
 */
#ifndef REMU_HAVE_IB_DEVICE_GET_BY_NAME
struct ib_device *remu_compat_get_by_name(const char *name,
					  enum rdma_driver_id driver_id);
#define ib_device_get_by_name remu_compat_get_by_name
#endif

/*
 * timers: del_timer() is timer_delete() since 6.16, from_timer() is
 * timer_container_of()
 */
#ifndef REMU_HAVE_DEL_TIMER
#define del_timer timer_delete
#endif
#ifndef from_timer
#define from_timer timer_container_of
#endif

/* hrtimer_setup() since 6.13; before it, hrtimer_init() and ->function */
#ifndef REMU_HAVE_HRTIMER_SETUP
#include <linux/hrtimer.h>
static inline void
remu_compat_hrtimer_setup(struct hrtimer *timer,
			  enum hrtimer_restart (*function)(struct hrtimer *),
			  clockid_t clock_id, enum hrtimer_mode mode)
{
	hrtimer_init(timer, clock_id, mode);
	timer->function = function;
}

#define hrtimer_setup remu_compat_hrtimer_setup
#endif

/* zap_vma_ptes() is zap_vma_range() in 7.x */
#ifndef REMU_HAVE_ZAP_VMA_PTES
#define zap_vma_ptes zap_vma_range
#endif

/* the UDP tunnel helpers take the socket's struct sock in 7.x */
#ifdef REMU_HAVE_UDP_TUNNEL_SOCKET
#define REMU_UDP_TUNNEL_SK(sock)	(sock)
#else
#define REMU_UDP_TUNNEL_SK(sock)	((sock)->sk)
#endif

/*
 * struct flowi4's TOS became a DSCP (7.x): REMU_FLOWI4_TOS(tclass) is the
 * designated initializer of either.
 */
#ifdef flowi4_tos
#define REMU_FLOWI4_TOS(tclass)	.flowi4_tos = (tclass) & IPTOS_TOS_MASK
#else
#include <net/inet_dscp.h>
#define REMU_FLOWI4_TOS(tclass)	.flowi4_dscp = inet_dsfield_to_dscp(tclass)
#endif

/*
 * ODP page state.  Before 6.16 struct ib_umem_odp has dma_list (one entry
 * per device page, with ODP_READ/WRITE_ALLOWED_BIT) and pfn_list (HMM pfns
 * per PAGE_SIZE); since then only map.pfn_list, whose HMM_PFN_VALID and
 * HMM_PFN_WRITE bits say what the device may do.  REMU_ODP_READ/WRITE are
 * the access_mask bits of ib_umem_odp_map_dma_and_lock(), and what
 * remu_odp_access() answers for a page mapped for reading or writing.
 */
#ifdef CONFIG_INFINIBAND_ON_DEMAND_PAGING
#include <linux/hmm.h>
#include <rdma/ib_umem_odp.h>
#ifdef REMU_HAVE_ODP_DMA_LIST
#define REMU_ODP_READ	ODP_READ_ALLOWED_BIT
#define REMU_ODP_WRITE	ODP_WRITE_ALLOWED_BIT
#define remu_odp_pfns(odp)	((odp)->pfn_list)
static inline u64 remu_odp_access(struct ib_umem_odp *odp, unsigned long va)
{
	return odp->dma_list[(va - ib_umem_start(odp)) >> odp->page_shift] &
	       (ODP_READ_ALLOWED_BIT | ODP_WRITE_ALLOWED_BIT);
}
#else
#define REMU_ODP_READ	HMM_PFN_VALID
#define REMU_ODP_WRITE	(HMM_PFN_VALID | HMM_PFN_WRITE)
#define remu_odp_pfns(odp)	((odp)->map.pfn_list)
static inline u64 remu_odp_access(struct ib_umem_odp *odp, unsigned long va)
{
	return odp->map.pfn_list[(va - ib_umem_start(odp)) >> PAGE_SHIFT] &
	       (HMM_PFN_VALID | HMM_PFN_WRITE);
}
#endif
/*
 * remu_odp_take_range - take [@start, @end) of @odp away from the device,
 * under umem_mutex, as an invalidation must; return how many PAGE_SIZE
 * pages were mapped there.  Before 6.16 ib_umem_odp_unmap_dma_pages() does it
 * all, and odp->npages counts the device pages mapped.  Since then that
 * function serves DMA-mapped entries only: for a device without DMA
 * (ib_uses_virt_dma(), remu) the core never counts the pages it faults in,
 * clears the entry of index offset >> page_shift where map.pfn_list has one
 * entry per PAGE_SIZE (a huge-page umem kept most of its pages mapped after
 * munmap), and does not mark written pages dirty.  So remu clears the
 * entries itself, one per PAGE_SIZE page, and marks dirty what the device
 * could write, as the core does for DMA-mapped pages.
 */
#ifdef REMU_HAVE_ODP_DMA_LIST
static inline u64 remu_odp_take_range(struct ib_umem_odp *odp, u64 start,
				      u64 end)
{
	int before = odp->npages;

	lockdep_assert_held(&odp->umem_mutex);
	ib_umem_odp_unmap_dma_pages(odp, start, end);
	return (u64)(before - odp->npages) << (odp->page_shift - PAGE_SHIFT);
}
#else
static inline u64 remu_odp_take_range(struct ib_umem_odp *odp, u64 start,
				      u64 end)
{
	unsigned long *pfn = odp->map.pfn_list;
	u64 i = (ALIGN_DOWN(start, PAGE_SIZE) - ib_umem_start(odp)) >> PAGE_SHIFT;
	u64 last = (ALIGN(end, PAGE_SIZE) - ib_umem_start(odp)) >> PAGE_SHIFT;
	u64 pages = 0;

	lockdep_assert_held(&odp->umem_mutex);
	for (; i < last; i++) {
		if (pfn[i] & HMM_PFN_VALID) {
			if (pfn[i] & HMM_PFN_WRITE)
				set_page_dirty(compound_head(hmm_pfn_to_page(pfn[i])));
			pages++;
		}
		pfn[i] &= ~HMM_PFN_FLAGS;
	}
	return pages;
}
#endif
/* the struct page of the PAGE_SIZE page of @odp holding @va */
static inline struct page *remu_odp_page(struct ib_umem_odp *odp,
					 unsigned long va)
{
	return hmm_pfn_to_page(remu_odp_pfns(odp)[(va - ib_umem_start(odp)) >>
						  PAGE_SHIFT]);
}
#endif

/*
 * dma_buf_attach_ops.move_notify is .invalidate_mappings since 7.2, and
 * an exporter calls dma_buf_invalidate_mappings() for
 * dma_buf_move_notify(): REMU_DMABUF_MOVE_NOTIFY names the member.
 */
#ifdef REMU_HAVE_DMABUF_MOVE_NOTIFY
#define REMU_DMABUF_MOVE_NOTIFY		move_notify
#else
#define REMU_DMABUF_MOVE_NOTIFY		invalidate_mappings
#define dma_buf_move_notify		dma_buf_invalidate_mappings
#endif

/*
 * Does the dma-buf core pin a dynamic exporter's buffer around every map
 * by a dynamic importer?  Before 7.x it does unless CONFIG_DMABUF_MOVE_NOTIFY
 * is set (Debian's 6.1 and 6.12 leave it off); 7.x dropped the option
 * (with the rename above) and never does.  A revocable exporter that
 * refuses pin (as the core's and VFIO's) can only be mapped where it does
 * not: remu's DM export and the test exporter's P2P buffers accept pin
 * where this is 1 (docs/dma-buf.md).
 */
#if defined(REMU_HAVE_DMABUF_MOVE_NOTIFY) && !IS_ENABLED(CONFIG_DMABUF_MOVE_NOTIFY)
#define REMU_DMABUF_PIN_ON_MAP	1
#else
#define REMU_DMABUF_PIN_ON_MAP	0
#endif

/* the device's sysfs "absent" file (remu_compat.c) */
extern struct device_attribute dev_attr_absent;

/*
 * ib_device_get_netdev() is exported since 6.10; before, remu_compat.c
 * gives the netdev remu holds a reference on from newlink to
 * dealloc_driver (with a reference of the caller's own, as upstream).
 */
#ifndef REMU_HAVE_IB_DEVICE_GET_NETDEV
struct net_device *remu_compat_get_netdev(struct ib_device *ibdev, u32 port);
#define ib_device_get_netdev remu_compat_get_netdev
#endif

/*
 * remu_crc32_lib_optimized(): on kernels whose crypto API "crc32" is
 * "crc32-lib" (6.14+: a shim over the library crc32_le()), whether that
 * library uses the CPU's carry-less multiply; false where the kernel
 * cannot say (there the crypto driver's own name says it: crc32-pclmul).
 */
#ifdef REMU_HAVE_CRC32_OPTIMIZATIONS
#include <linux/bits.h>
#include <linux/crc32.h>
#define remu_crc32_lib_optimized() \
	(!!(crc32_optimizations() & CRC32_LE_OPTIMIZATION))
#else
#define remu_crc32_lib_optimized()	false
#endif

/*
 * After 6.12 ib_core follows a RoCE port's netdev itself and dispatches
 * IB_EVENT_PORT_ACTIVE / PORT_ERR once per change of state
 * (ib_dispatch_port_state_event()); before, the driver does.
 */
#ifdef REMU_HAVE_CORE_PORT_EVENTS
#define REMU_CORE_PORT_EVENTS	1
#else
#define REMU_CORE_PORT_EVENTS	0
#endif

/*
 * ib_umem_check_rereg(): may a registration change its access flags
 * without a new translation?  Not if it gains write access to pages that
 * were pinned read-only.
 */
#ifndef REMU_HAVE_IB_UMEM_CHECK_REREG
static inline int ib_umem_check_rereg(struct ib_umem *umem, int flags,
				      int new_access)
{
	if (umem && (flags & IB_MR_REREG_ACCESS) &&
	    !(flags & IB_MR_REREG_TRANS) &&
	    ib_access_writable(new_access) && !umem->writable)
		return -EACCES;
	return 0;
}
#endif

/* vm_flags_set() since 6.3, when vma->vm_flags became read-only */
#ifndef REMU_HAVE_VM_FLAGS_SET
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}
#endif

/*
 * MAX_PAGE_ORDER (6.8+) is the largest order the buddy allocator hands
 * out; 6.1's MAX_ORDER is one more than that.
 */
#ifndef MAX_PAGE_ORDER
#define MAX_PAGE_ORDER (MAX_ORDER - 1)
#endif

/*
 * Symbol namespaces are strings since 6.13 (MODULE_IMPORT_NS("DMA_BUF")),
 * bare words before (which the kernel's macros stringify after expansion).
 * Write REMU_IMPORT_NS(DMA_BUF), and EXPORT_SYMBOL_NS_GPL(sym, REMU_TEST_NS)
 * for the test module's namespace REMU_TEST.
 */
#ifdef REMU_HAVE_NS_BARE
#define REMU_IMPORT_NS(ns)	MODULE_IMPORT_NS(ns)
#define REMU_TEST_NS		REMU_TEST
#else
#define REMU_IMPORT_NS(ns)	MODULE_IMPORT_NS(#ns)
#define REMU_TEST_NS		"REMU_TEST"
#endif

/*
 * struct ubuf_info (zero-copy frags, remu_zc.c): 6.1 has the completion
 * callback in the struct itself; since 6.5 it points to a struct
 * ubuf_info_ops with .complete.  REMU_UBUF_OPS(name, fn) defines what
 * remu_ubuf_init() installs, remu_ubuf_is() tells one of remu's own.
 */
#ifdef REMU_HAVE_UBUF_INFO_OPS
#define REMU_UBUF_OPS(name, fn) \
	static const struct ubuf_info_ops name = { .complete = fn }
#define remu_ubuf_init(u, name)		((u)->ops = &(name))
#define remu_ubuf_is(u, name)		((u)->ops == &(name))
#else
#define REMU_UBUF_OPS(name, fn) \
	static void (*const name)(struct sk_buff *, struct ubuf_info *, \
				  bool) = fn
#define remu_ubuf_init(u, name)		((u)->callback = (name))
#define remu_ubuf_is(u, name)		((u)->callback == (name))
#endif

#endif /* REMU_COMPAT_H */
