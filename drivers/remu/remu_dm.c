// SPDX-License-Identifier: GPL-2.0
/*
 * remu_dm.c - on-device memory: the per-device pool of reserved pages, the
 * DM verbs (alloc_dm, dealloc_dm), the mapping of an allocation into its
 * process, and the MR backing of ibv_reg_dm_mr.
 *
 * Owns struct remu_dm_pool (one per device) and struct remu_dm (one per
 * allocation).  The design, with a picture, is in docs/device-memory.md.
 *
 * The pool: when a device is created, remu_dm_pool_size_kb (module
 * parameter, default 1024, at most REMU_DM_POOL_MAX_KB) of memory is set
 * aside as physically contiguous chunks from alloc_pages(), each the largest
 * power of two that still fits, and at most 1 << MAX_PAGE_ORDER pages
 * (4 MiB).  One genalloc pool spans all chunks; genalloc never lets an
 * allocation span two chunks, so the largest single allocation is the
 * largest chunk.  max_dm_size reports the whole pool.
 *
 * Quota: one user context may hold at most dm_ctx_pct percent of its
 * device's pool (module parameter, default 50, writable at run time;
 * 100: no cap, as mlx5, which has a per-device total only); an
 * allocation beyond it fails with ENOMEM as if the pool were full.  What
 * counts is what the context's allocations keep out of the pool: an
 * allocation freed while a mapping or an MR still holds its pages counts
 * until they are gone (struct remu_dm_quota outlives the context for it).
 *
 * Allocations: lengths are rounded up to PAGE_SIZE and start on a page (or
 * on 1 << log_align_req, if larger), so every allocation has pages of its
 * own and mapping it never shows another allocation's bytes.  The pages
 * are zeroed when handed out.
 *
 * Lifetime: an allocation is an rdma_user_mmap_entry (struct remu_dm
 * embeds it) whose kref is held by the DM object itself (dropped by
 * dealloc_dm through rdma_user_mmap_entry_remove()), by every mapping of
 * it (remu_umap.c) and by every MR on it.  The core refuses to free a DM
 * while MRs are on it (EBUSY, ib_dm.usecnt).  Every entry is gone before
 * the device is released: the process's mappings hold its command file
 * open, and disassociation zaps them.  The pages themselves have a
 * reference count of their own (remu_dm.pages), held by the entry (dropped
 * at its last put, remu_dm_entry_free()) and by every dma-buf exported
 * from the allocation (remu_dmabuf_export.c, dropped at the dma-buf's
 * release, which may come after the context, the process or the device
 * are gone): the pages go back to the pool, and struct remu_dm is freed,
 * only when both are gone (remu_dm_pages_free()), so freed pages are never
 * handed to another allocation while a mapping, an MR or an importer of an
 * exported dma-buf can still reach them.  The pool is reference counted
 * too (the device and each allocation) and outlives the device while an
 * exported dma-buf holds pages of it.
 *
 * Exported dma-bufs: each allocation lists its exports (remu_dm.exports,
 * under remu_dm.exp_lock); dealloc_dm (ibv_free_dm, process exit, device
 * disassociation) revokes every one of them before it removes the entry
 * (remu_dmabuf_export_revoke(): importers get move_notify, later maps
 * fail), and a DM being freed takes no new export.  Lock order:
 * remu_dm.exp_lock, then the dma-buf's reservation lock.
 *
 * Statistics, readable by anyone: /sys/class/infiniband/DEV/dm_size (bytes
 * in the pool), dm_in_use (bytes allocated, whole pages), dm_allocs (live
 * allocations, including freed ones still mapped) and dm_largest_free (the
 * largest allocation that would succeed now).
 *
 * Locking: genalloc is lock-free for allocation and free; the pool's
 * statistics are atomics.  An allocation's bytes are accessed by the data
 * path (through the MR access layer, like any other memory) and by the
 * process through its mapping, without a lock, as real device memory is.
 */
#include <linux/genalloc.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/uverbs_ioctl.h>
#define UVERBS_MODULE_NAME remu_ib
#include <rdma/uverbs_named_ioctl.h>

#include "remu.h"
#include "remu_trace.h"

static unsigned int remu_dm_pool_size_kb = REMU_DM_POOL_DEFAULT_KB;
module_param_named(dm_pool_kb, remu_dm_pool_size_kb, uint, 0444);
MODULE_PARM_DESC(dm_pool_kb,
		 "device memory per device, in KiB (default 1024, at most 65536; 0: none)");

static unsigned int remu_dm_ctx_pct = REMU_DM_CTX_PCT_DEFAULT;
module_param_named(dm_ctx_pct, remu_dm_ctx_pct, uint, 0644);
MODULE_PARM_DESC(dm_ctx_pct,
		 "percent of a device's memory pool one user context may hold (default 50; 100: no cap)");

/**
 * struct remu_dm_pool - the device memory of one device
 * @ref:	the device and each allocation (exported pages may outlive
 *		the device)
 * @gp:		genalloc pool over the chunks (PAGE_SIZE granules)
 * @size:	bytes in all chunks
 * @largest:	bytes in the largest chunk: the largest allocation
 * @in_use:	bytes allocated
 * @nr_alloc:	live allocations
 */
struct remu_dm_pool {
	struct kref ref;
	struct gen_pool *gp;
	u64 size;
	u64 largest;
	atomic64_t in_use;
	atomic_t nr_alloc;
};

/**
 * struct remu_dm - one allocation
 * @ib_dm:	the core's object
 * @me:		its mmap entry; the entry's kref is the allocation's lifetime
 * @pool:	the pool it came from
 * @quota:	its context's quota (referenced), charged with @size
 * @ibdev:	the device (for the trace events; an exported dma-buf that
 *		holds @pages holds the device's struct too)
 * @size:	bytes taken from the pool (the length rounded up to pages)
 * @pages:	the pages' users: the entry and each exported dma-buf
 * @exp_lock:	protects @exports and @revoked
 * @exports:	the dma-bufs exported from it and not revoked yet
 *		(remu_dmabuf_export.c)
 * @revoked:	dealloc_dm has begun: no more exports
 */
struct remu_dm {
	struct ib_dm ib_dm;
	struct remu_mmap_entry me;
	struct remu_dm_pool *pool;
	struct remu_dm_quota *quota;
	struct ib_device *ibdev;
	size_t size;
	struct kref pages;
	struct mutex exp_lock;
	struct list_head exports;
	bool revoked;
};

/**
 * struct remu_dm_quota - the device memory one user context holds
 * @ref:	the context and each of its allocations
 * @used:	bytes its allocations keep out of the pool
 */
struct remu_dm_quota {
	struct kref ref;
	atomic64_t used;
};

/** remu_dm_quota_new - the (empty) quota of a new user context, or NULL */
struct remu_dm_quota *remu_dm_quota_new(void)
{
	struct remu_dm_quota *q = kzalloc(sizeof(*q), GFP_KERNEL_ACCOUNT);

	if (q)
		kref_init(&q->ref);
	return q;
}

static void remu_dm_quota_release(struct kref *ref)
{
	kfree(container_of(ref, struct remu_dm_quota, ref));
}

/** remu_dm_quota_put - drop a reference (context freed, allocation gone) */
void remu_dm_quota_put(struct remu_dm_quota *q)
{
	if (q)
		kref_put(&q->ref, remu_dm_quota_release);
}

/* charge @size bytes to @q unless that passes the cap of @pool: 0 or -ENOMEM */
static int remu_dm_quota_charge(struct remu_dm_quota *q,
				const struct remu_dm_pool *pool, u64 size)
{
	u64 cap = div_u64(pool->size * clamp(READ_ONCE(remu_dm_ctx_pct), 1u,
					     100u), 100);

	if (atomic64_add_return(size, &q->used) > max_t(u64, cap, PAGE_SIZE)) {
		atomic64_sub(size, &q->used);
		return -ENOMEM;
	}
	return 0;
}

static inline struct remu_dm *to_remu_dm(struct ib_dm *ibdm)
{
	return container_of(ibdm, struct remu_dm, ib_dm);
}

/* The driver attribute of DM_ALLOC: where the provider maps the memory. */
ADD_UVERBS_ATTRIBUTES_SIMPLE(
	remu_dm_alloc, UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC,
	UVERBS_ATTR_PTR_OUT(REMU_ATTR_ALLOC_DM_RESP,
			    UVERBS_ATTR_STRUCT(struct remu_alloc_dm_resp,
					       mmap_size),
			    UA_MANDATORY));

static const struct uapi_definition remu_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DM, &remu_dm_alloc),
	/* REMU_METHOD_DM_EXPORT_DMABUF (remu_dmabuf_export.c) */
	UAPI_DEF_CHAIN(remu_dmabuf_export_defs),
	UAPI_DEF_CHAIN(remu_import_defs),
	{},
};

static void remu_dm_free_chunk(struct gen_pool *gp, struct gen_pool_chunk *c,
			       void *data)
{
	size_t size = c->end_addr - c->start_addr + 1;

	free_pages(c->start_addr, get_order(size));
}

static void remu_dm_pool_free(struct remu_dm_pool *pool)
{
	gen_pool_for_each_chunk(pool->gp, remu_dm_free_chunk, NULL);
	gen_pool_destroy(pool->gp);
	kfree(pool);
}

/* the device and the last allocation are gone */
static void remu_dm_pool_release(struct kref *ref)
{
	struct remu_dm_pool *pool = container_of(ref, struct remu_dm_pool,
						 ref);

	if (gen_pool_avail(pool->gp) != pool->size) {
		/* genalloc BUGs on a pool in use: leak it, loudly, instead */
		pr_err("%d device memory allocation(s) left at release\n",
		       atomic_read(&pool->nr_alloc));
		return;
	}
	remu_dm_pool_free(pool);
}

/**
 * remu_dm_dev_init - reserve a new device's device memory
 * @rdev: the device, after remu_init_attr() and before registration
 *
 * Also declares remu's driver attributes of the uverbs methods.
 *
 * Return: 0 (also with the pool size parameter 0: no device memory) or
 * -ENOMEM.
 */
int remu_dm_dev_init(struct remu_dev *rdev)
{
	u64 left = (u64)min(remu_dm_pool_size_kb, REMU_DM_POOL_MAX_KB) << 10;
	struct remu_dm_pool *pool;
	int err;

	rdev->ib_dev.driver_def = remu_uapi_defs;
	if (remu_dm_pool_size_kb > REMU_DM_POOL_MAX_KB)
		pr_warn_once("dm_pool_kb=%u is above the maximum, %u KiB used\n",
			     remu_dm_pool_size_kb, REMU_DM_POOL_MAX_KB);
	left = PAGE_ALIGN(left);
	if (!left)
		return 0;
	pool = kzalloc(sizeof(*pool), GFP_KERNEL);
	if (!pool)
		return -ENOMEM;
	kref_init(&pool->ref);
	pool->gp = gen_pool_create(PAGE_SHIFT, NUMA_NO_NODE);
	if (!pool->gp) {
		kfree(pool);
		return -ENOMEM;
	}
	while (left) {
		unsigned int order = min_t(unsigned int,
					   ilog2(left >> PAGE_SHIFT),
					   MAX_PAGE_ORDER);
		unsigned long addr;

		addr = __get_free_pages(GFP_KERNEL | __GFP_ZERO |
					__GFP_NOWARN, order);
		if (!addr) {
			err = -ENOMEM;
			goto err_pool;
		}
		err = gen_pool_add(pool->gp, addr, PAGE_SIZE << order,
				   NUMA_NO_NODE);
		if (err) {
			free_pages(addr, order);
			goto err_pool;
		}
		pool->size += PAGE_SIZE << order;
		pool->largest = max_t(u64, pool->largest, PAGE_SIZE << order);
		left -= PAGE_SIZE << order;
	}
	rdev->dm = pool;
	rdev->attr.max_dm_size = pool->size;
	return 0;

err_pool:
	remu_dm_pool_free(pool);
	return err;
}

/**
 * remu_dm_dev_fini - give a device's device memory back
 * @rdev: the device; every allocation is gone by now, but for pages an
 *	exported dma-buf still holds: the pool outlives the device then
 *	(see the file comment)
 */
void remu_dm_dev_fini(struct remu_dev *rdev)
{
	struct remu_dm_pool *pool = rdev->dm;

	if (!pool)
		return;
	rdev->dm = NULL;
	kref_put(&pool->ref, remu_dm_pool_release);
}

/* ---- statistics: sysfs, /sys/class/infiniband/DEV/dm_* ---- */

/* the longest run of free granules of one chunk, in bytes */
static void remu_dm_chunk_largest(struct gen_pool *gp,
				  struct gen_pool_chunk *c, void *data)
{
	unsigned long nbits = (c->end_addr - c->start_addr + 1) >>
			      gp->min_alloc_order;
	unsigned long start = 0, end;
	u64 *largest = data;

	for (;;) {
		start = find_next_zero_bit(c->bits, nbits, start);
		if (start >= nbits)
			return;
		end = find_next_bit(c->bits, nbits, start);
		*largest = max_t(u64, *largest,
				 (u64)(end - start) << gp->min_alloc_order);
		start = end;
	}
}

static struct remu_dm_pool *remu_dm_pool_of(struct device *device)
{
	return rdma_device_to_drv_device(device, struct remu_dev, ib_dev)->dm;
}

static ssize_t dm_size_show(struct device *device,
			    struct device_attribute *attr, char *buf)
{
	struct remu_dm_pool *pool = remu_dm_pool_of(device);

	return sysfs_emit(buf, "%llu\n", pool ? pool->size : 0);
}
DEVICE_ATTR_RO(dm_size);

static ssize_t dm_in_use_show(struct device *device,
			      struct device_attribute *attr, char *buf)
{
	struct remu_dm_pool *pool = remu_dm_pool_of(device);

	return sysfs_emit(buf, "%lld\n",
			  pool ? atomic64_read(&pool->in_use) : 0);
}
DEVICE_ATTR_RO(dm_in_use);

static ssize_t dm_allocs_show(struct device *device,
			      struct device_attribute *attr, char *buf)
{
	struct remu_dm_pool *pool = remu_dm_pool_of(device);

	return sysfs_emit(buf, "%d\n", pool ? atomic_read(&pool->nr_alloc) : 0);
}
DEVICE_ATTR_RO(dm_allocs);

static ssize_t dm_largest_free_show(struct device *device,
				    struct device_attribute *attr, char *buf)
{
	struct remu_dm_pool *pool = remu_dm_pool_of(device);
	u64 largest = 0;

	if (pool)
		gen_pool_for_each_chunk(pool->gp, remu_dm_chunk_largest,
					&largest);
	return sysfs_emit(buf, "%llu\n", largest);
}
DEVICE_ATTR_RO(dm_largest_free);

/* ---- the mapping ---- */

static unsigned long remu_dm_pfn(struct remu_mmap_entry *me, unsigned long off)
{
	return PHYS_PFN(virt_to_phys(me->buf + off));
}

/*
 * The last user of the pages (the entry, exported dma-bufs) is gone: back
 * to the pool.  dm->ibdev is still there: an export holds the device's
 * struct until after it drops the pages.
 */
static void remu_dm_pages_free(struct kref *ref)
{
	struct remu_dm *dm = container_of(ref, struct remu_dm, pages);
	struct remu_dm_pool *pool = dm->pool;

	gen_pool_free(pool->gp, (unsigned long)dm->me.buf, dm->size);
	atomic64_sub(dm->size, &pool->in_use);
	atomic_dec(&pool->nr_alloc);
	atomic64_sub(dm->size, &dm->quota->used);
	remu_dm_quota_put(dm->quota);
	trace_remu_dm_free(dm->ibdev, rdma_user_mmap_get_offset(&dm->me.rdma),
			   dm->size, atomic64_read(&pool->in_use));
	mutex_destroy(&dm->exp_lock);
	kfree(dm);
	kref_put(&pool->ref, remu_dm_pool_release);
	remu_obj_put(REMU_OBJ_DM);
}

/* the last reference to the entry (DM object, mappings, MRs) is gone */
static void remu_dm_entry_free(struct remu_mmap_entry *me)
{
	struct remu_dm *dm = container_of(me, struct remu_dm, me);

	kref_put(&dm->pages, remu_dm_pages_free);
}

static void remu_dm_mapped(struct remu_mmap_entry *me, unsigned long va)
{
	struct remu_dm *dm = container_of(me, struct remu_dm, me);

	trace_remu_dm_map(dm->ibdev, rdma_user_mmap_get_offset(&me->rdma),
			  dm->size, va);
}

static const struct remu_mmap_ops remu_dm_mmap_ops = {
	.pfn = remu_dm_pfn,
	.free = remu_dm_entry_free,
	.mapped = remu_dm_mapped,
};

/* ---- verbs ---- */

/**
 * remu_alloc_dm - the .alloc_dm op
 * @ibdev: the device
 * @uctx: the process's context (the mapping belongs to it alone)
 * @attr: length and log2 of the alignment wanted
 * @attrs: the command, for the driver attribute out
 *
 * Return: the DM, or -EOPNOTSUPP (no pool), -EINVAL (zero length, an
 * alignment larger than a chunk), -ENOMEM (no free range large enough,
 * or the context's quota would be passed).
 */
struct ib_dm *remu_alloc_dm(struct ib_device *ibdev, struct ib_ucontext *uctx,
			    struct ib_dm_alloc_attr *attr,
			    struct uverbs_attr_bundle *attrs)
{
	struct remu_dm_pool *pool = to_remu_dev(ibdev)->dm;
	struct genpool_data_align align = { .align = PAGE_SIZE };
	struct remu_dm_quota *quota;
	struct remu_alloc_dm_resp resp = {};
	struct remu_dm *dm;
	unsigned long addr;
	int err;

	if (!pool)
		return ERR_PTR(-EOPNOTSUPP);
	if (!uctx || !attr->length || attr->alignment >= 32 ||
	    (1ULL << attr->alignment) > pool->largest)
		return ERR_PTR(-EINVAL);
	if (attr->length > pool->largest)
		return ERR_PTR(-ENOMEM);
	if (attr->alignment > PAGE_SHIFT)
		align.align = 1 << attr->alignment;

	quota = to_remu_uc(uctx)->dmq;
	if (remu_dm_quota_charge(quota, pool, PAGE_ALIGN(attr->length)))
		return ERR_PTR(-ENOMEM);
	dm = kzalloc(sizeof(*dm), GFP_KERNEL_ACCOUNT);
	if (!dm)
		goto err_quota;
	dm->pool = pool;
	dm->ibdev = ibdev;
	dm->size = PAGE_ALIGN(attr->length);
	kref_init(&dm->pages);
	mutex_init(&dm->exp_lock);
	INIT_LIST_HEAD(&dm->exports);
	addr = gen_pool_alloc_algo(pool->gp, dm->size,
				   gen_pool_first_fit_align, &align);
	if (!addr) {
		kfree(dm);
		goto err_quota;
	}
	/* no bytes of an earlier allocation reach a new owner */
	memset((void *)addr, 0, dm->size);
	atomic64_add(dm->size, &pool->in_use);
	atomic_inc(&pool->nr_alloc);
	dm->me.buf = (void *)addr;
	dm->me.ops = &remu_dm_mmap_ops;
	err = rdma_user_mmap_entry_insert(uctx, &dm->me.rdma, dm->size);
	if (err) {
		gen_pool_free(pool->gp, addr, dm->size);
		atomic64_sub(dm->size, &pool->in_use);
		atomic_dec(&pool->nr_alloc);
		mutex_destroy(&dm->exp_lock);
		kfree(dm);
		atomic64_sub(PAGE_ALIGN(attr->length), &quota->used);
		return ERR_PTR(err);
	}
	/* from here on the entry owns dm: remu_dm_entry_free() undoes all */
	kref_get(&quota->ref);
	dm->quota = quota;
	kref_get(&pool->ref);
	remu_obj_get(REMU_OBJ_DM);

	resp.mmap_offset = rdma_user_mmap_get_offset(&dm->me.rdma);
	resp.mmap_size = dm->size;
	trace_remu_dm_alloc(ibdev, resp.mmap_offset, dm->size,
			    atomic64_read(&pool->in_use));
	err = uverbs_copy_to_struct_or_zero(attrs, REMU_ATTR_ALLOC_DM_RESP,
					    &resp, sizeof(resp));
	if (err) {
		rdma_user_mmap_entry_remove(&dm->me.rdma);
		return ERR_PTR(err);
	}
	return &dm->ib_dm;

err_quota:
	atomic64_sub(PAGE_ALIGN(attr->length), &quota->used);
	return ERR_PTR(-ENOMEM);
}

/**
 * remu_dealloc_dm - the .dealloc_dm op (the core has checked no MR is on it)
 * @ibdm: the DM
 * @attrs: unused
 *
 * Called for ibv_free_dm() and, with the process's other objects, at
 * process exit and device disassociation.  Every dma-buf exported from
 * the DM is revoked first: importers are told (move_notify) and can map
 * it no more.  The pages stay out of the pool until the process unmaps
 * them and every exported dma-buf is released.
 * Return: 0.
 */
int remu_dealloc_dm(struct ib_dm *ibdm, struct uverbs_attr_bundle *attrs)
{
	struct remu_dm *dm = to_remu_dm(ibdm);
	struct list_head *node, *next;

	mutex_lock(&dm->exp_lock);
	dm->revoked = true;
	list_for_each_safe(node, next, &dm->exports) {
		list_del_init(node);
		remu_dmabuf_export_revoke(node);
	}
	mutex_unlock(&dm->exp_lock);
	rdma_user_mmap_entry_remove(&dm->me.rdma);
	return 0;
}

/**
 * remu_dm_query - where @ibdm is mapped, for another process's import
 * @ibdm: a live DM (the caller holds its uobject)
 * @resp: filled as DM_ALLOC's answer was, with the length asked for
 *
 * The mapping is the allocation's own mmap entry: every process that
 * shares the context maps the same pages.
 */
void remu_dm_query(struct ib_dm *ibdm, struct remu_query_dm_resp *resp)
{
	struct remu_dm *dm = to_remu_dm(ibdm);

	resp->mmap_offset = remu_dm_mmap_offset(dm);
	resp->mmap_size = dm->size;
	resp->length = ibdm->length;
}

/* ---- exported dma-bufs (remu_dmabuf_export.c) ---- */

/**
 * remu_dm_export_pages - an exported dma-buf takes the pages of @ibdm
 * @ibdm: the DM; its uverbs object is locked by the caller's method
 * @phys: out: physical address of the allocation (contiguous pages)
 * @size: out: bytes (whole pages)
 *
 * Return: the allocation, whose pages stay out of the pool until
 * remu_dm_export_drop(); the exporter lists itself with
 * remu_dm_export_publish() once its dma-buf exists.
 */
struct remu_dm *remu_dm_export_pages(struct ib_dm *ibdm, phys_addr_t *phys,
				     size_t *size)
{
	struct remu_dm *dm = to_remu_dm(ibdm);

	kref_get(&dm->pages);
	*phys = virt_to_phys(dm->me.buf);
	*size = dm->size;
	return dm;
}

/**
 * remu_dm_export_publish - list an exported dma-buf among @dm's exports
 * @dm: from remu_dm_export_pages()
 * @node: the export's entry, revoked by remu_dealloc_dm()
 *
 * Return: 0, or -ENODEV if the DM is being freed (nothing listed).
 */
int remu_dm_export_publish(struct remu_dm *dm, struct list_head *node)
{
	int err = 0;

	mutex_lock(&dm->exp_lock);
	if (dm->revoked)
		err = -ENODEV;
	else
		list_add_tail(node, &dm->exports);
	mutex_unlock(&dm->exp_lock);
	return err;
}

/**
 * remu_dm_export_drop - an exported dma-buf is released
 * @dm: from remu_dm_export_pages()
 * @node: its entry (taken off the list if still there; initialised)
 *
 * Drops the pages; the last user gives them back to the pool.
 * Context: may sleep; no reservation lock held.
 */
void remu_dm_export_drop(struct remu_dm *dm, struct list_head *node)
{
	mutex_lock(&dm->exp_lock);
	if (!list_empty(node))
		list_del_init(node);
	mutex_unlock(&dm->exp_lock);
	kref_put(&dm->pages, remu_dm_pages_free);
}

/** remu_dm_mmap_offset - the mmap offset that names @dm (trace events) */
u64 remu_dm_mmap_offset(struct remu_dm *dm)
{
	return rdma_user_mmap_get_offset(&dm->me.rdma);
}

/* ---- the MR backing (REMU_MR_DM) ---- */

/* byte @off of a DM MR: pool memory is in the kernel's linear map */
static int remu_dm_mr_map(struct remu_mr *mr, u64 off, u64 len, bool write,
			  struct remu_mr_seg *seg)
{
	struct remu_dm *dm = mr->dm;
	u64 pos = mr->page_off + off;
	void *kaddr;

	if (pos >= dm->size)
		return -EFAULT;
	kaddr = dm->me.buf + pos;
	seg->kaddr = kaddr;
	seg->len = min_t(u64, len, PAGE_SIZE - offset_in_page(kaddr));
	return 0;
}

static void remu_dm_mr_release(struct remu_mr *mr)
{
	rdma_user_mmap_entry_put(&mr->dm->me.rdma);
}

static const struct remu_mr_backing_ops remu_dm_mr_ops = {
	.map = remu_dm_mr_map,
	.release = remu_dm_mr_release,
};

/**
 * remu_dm_mr_init - back @mr by [offset, offset + length) of @ibdm
 * @mr: a new MR of kind REMU_MR_DM, not yet published
 * @ibdm: the DM (the core has checked the range against its length)
 * @offset: first byte of the DM in the MR (at iova 0: zero based)
 * @length: bytes
 *
 * The MR holds a reference on the allocation until it is released.
 */
void remu_dm_mr_init(struct remu_mr *mr, struct ib_dm *ibdm, u64 offset,
		     u64 length)
{
	struct remu_dm *dm = to_remu_dm(ibdm);

	kref_get(&dm->me.rdma.ref);
	mr->dm = dm;
	mr->ops = &remu_dm_mr_ops;
	mr->page_off = offset;
	mr->iova = 0;
	mr->length = length;
}
