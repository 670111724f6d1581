// SPDX-License-Identifier: GPL-2.0
/*
 * remu_dmabuf.c - dma-buf import: the REMU_MR_DMABUF backing of the MR
 * access layer (see remu_mr.h for the backing contract), the verb
 * reg_user_mr_dmabuf (ibv_reg_dmabuf_mr) and the struct devices each remu
 * device attaches to dma-bufs with.  Design and picture: docs/dma-buf.md.
 *
 * remu keeps ib_device.dma_device NULL (virtual DMA for everything else),
 * so it cannot use ib_umem_dmabuf_get(), which attaches with the ib
 * device's DMA device and hands out bus addresses.  Instead each MR
 * attaches itself as a dynamic importer (dma_buf_dynamic_attach() with
 * move_notify), in one of two ways:
 *
 *  - CPU (the exporter has vmap): attach with rdev->dmabuf_dev, a struct
 *    device of remu's own that is never added to sysfs and only carries a
 *    64-bit DMA mask (exporters that are not dynamic map their sg_table
 *    for it once, at attach), and copy through dma_buf_vmap(): ordinary
 *    memory with memcpy, I/O memory (iosys_map.is_iomem: VRAM behind a
 *    BAR) with the io accessors (I/O segments, remu_mr.c).
 *  - P2P (no vmap: VFIO's BAR export, remu's own device memory, the test
 *    exporter's P2P buffers): attach with allow_peer2peer, map the
 *    buffer for remu's P2P device with dma_buf_map_attachment(), as a
 *    NIC's DMA engine would be given it, and reach those addresses the way
 *    that engine would: the device must be direct mapped (no translating
 *    IOMMU, no DMA offset: a DMA address is the physical address, checked
 *    at every map), each range must be memory the kernel knows (RAM:
 *    memremap(), its linear map; anything else: a device's memory,
 *    ioremap() and the io accessors), else the map is refused
 *    (-EOPNOTSUPP).  Only the part the MR covers is mapped.  The P2P
 *    device is the PCI function above the netdev (rdev->dmabuf_pci), which
 *    pci_p2pdma_map_type() can place, or, on a netdev with none (veth),
 *    rdev->dmabuf_dev: exporters that map only for a PCI peer refuse that
 *    one, and registration fails with EOPNOTSUPP (the device's sysfs
 *    "absent" file says why).
 *
 * State (struct remu_dmabuf, one per MR), all under the reservation lock:
 *  - @mapped: the CPU view is valid: @map (CPU), or @sgt and @ranges (P2P).
 *
 *  ->map()	takes the dma-buf's reservation lock; if @mapped, hands out
 *		a kernel address or an I/O address (at most up to the next
 *		page boundary) and keeps the lock until ->unmap();
 *		otherwise drops it and answers -EAGAIN.
 *  ->fault()	under the reservation lock: maps the buffer again (CPU:
 *		waits for the exporter's kernel fences, dma_buf_vmap(); P2P:
 *		dma_buf_map_attachment(), the fences, the CPU ranges).  A
 *		revoked buffer fails the map (-ENODEV): the access fails
 *		(-EFAULT: REM_ACCESS_ERR, LOC_PROT_ERR) and the MR stays; a
 *		later access tries again, and works once the exporter lets it
 *		map again.
 *  move_notify	called by the exporter with the reservation lock held: drops
 *		the CPU view and (P2P) unmaps the attachment, @mapped = false.
 *
 * Locking: the reservation lock (dma_resv_lock, a ww_mutex taken without
 * an acquire context) protects the state above, and is held for exactly
 * one segment access, so a move or a revoke waits for the access in
 * flight and every later ->map() sees the mapping gone: remu never
 * touches the old memory after move_notify returns.  Never take a
 * dma-buf's lock while holding another's (->map() is only called with no
 * dma-buf segment mapped by the same walker).  Everything here sleeps;
 * the copy loops run in process context.
 *
 * Registration fails, rather than the first access, when the buffer cannot
 * be reached (-EOPNOTSUPP), or the dma-buf is read-only and a write right
 * is asked for (-EACCES).
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/io.h>
#include <linux/iommu.h>
#include <linux/ioport.h>
#include <linux/iosys-map.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "remu.h"
#include "remu_trace.h"

REMU_IMPORT_NS(DMA_BUF);

/**
 * struct remu_dmabuf_range - P2P: one physically contiguous piece
 * @start:	its first byte in the dma-buf
 * @len:	bytes
 * @phys:	its physical address (the DMA address remu was given)
 * @vaddr:	RAM: its kernel address (memremap())
 * @iomem:	anything else: its I/O mapping (ioremap())
 */
struct remu_dmabuf_range {
	u64 start;
	u64 len;
	phys_addr_t phys;
	void *vaddr;
	void __iomem *iomem;
};

/**
 * struct remu_dmabuf - the dma-buf behind one MR
 * @rdev:	device (for the counters)
 * @dmabuf:	the buffer (reference from dma_buf_get())
 * @attach:	remu's dynamic attachment to it
 * @offset:	byte of the dma-buf at the MR's first iova
 * @length:	the MR's bytes (P2P maps only [@offset, @offset + @length))
 * @p2p:	reached through DMA addresses (no vmap), not a CPU mapping
 * @mapped:	the view below is valid (under the reservation lock)
 * @map:	CPU: the vmap of the whole buffer
 * @sgt:	P2P: the exporter's table for remu's P2P device
 * @ranges:	P2P: the CPU ranges over it, sorted by @start
 * @nr_ranges:	P2P: entries in @ranges
 * @mr:		the MR it backs, once there is one (for the trace events)
 */
struct remu_dmabuf {
	struct remu_dev *rdev;
	struct dma_buf *dmabuf;
	struct dma_buf_attachment *attach;
	u64 offset;
	u64 length;
	bool p2p;
	bool mapped;
	struct iosys_map map;
	struct sg_table *sgt;
	struct remu_dmabuf_range *ranges;
	unsigned int nr_ranges;
	struct remu_mr *mr;
};

/* the key of @db's MR, for the trace events (0 before it has one) */
static u32 remu_dmabuf_key(const struct remu_dmabuf *db)
{
	const struct remu_mr *mr = READ_ONCE(db->mr);

	return mr ? READ_ONCE(mr->key) : 0;
}

/* rights that write into the memory */
#define REMU_DMABUF_WRITE_RIGHTS (IB_ACCESS_LOCAL_WRITE | \
				  IB_ACCESS_REMOTE_WRITE | \
				  IB_ACCESS_REMOTE_ATOMIC)

/* P2P: unmap the CPU ranges; reservation lock held */
static void remu_dmabuf_free_ranges(struct remu_dmabuf *db)
{
	unsigned int i;

	for (i = 0; i < db->nr_ranges; i++) {
		if (db->ranges[i].iomem)
			iounmap(db->ranges[i].iomem);
		else if (db->ranges[i].vaddr)
			memunmap(db->ranges[i].vaddr);
	}
	kvfree(db->ranges);
	db->ranges = NULL;
	db->nr_ranges = 0;
}

/* Reservation lock held: drop the CPU view (and P2P mapping), if any. */
static bool remu_dmabuf_drop_map(struct remu_dmabuf *db)
{
	dma_resv_assert_held(db->dmabuf->resv);
	if (!db->mapped)
		return false;
	if (db->p2p) {
		remu_dmabuf_free_ranges(db);
		dma_buf_unmap_attachment(db->attach, db->sgt,
					 DMA_BIDIRECTIONAL);
		db->sgt = NULL;
	} else {
		dma_buf_vunmap(db->dmabuf, &db->map);
		iosys_map_clear(&db->map);
	}
	db->mapped = false;
	return true;
}

/*
 * CPU: wait for the exporter's kernel fences (a move or clear in flight),
 * then map the buffer for the CPU.  Reservation lock held.
 */
static int remu_dmabuf_take_vmap(struct remu_dmabuf *db)
{
	struct dma_buf *dmabuf = db->dmabuf;
	long t;
	int err;

	t = dma_resv_wait_timeout(dmabuf->resv, DMA_RESV_USAGE_KERNEL, false,
				  MAX_SCHEDULE_TIMEOUT);
	if (t < 0)
		return t;
	err = dma_buf_vmap(dmabuf, &db->map);
	if (err)
		return err;
	db->mapped = true;
	return 0;
}

/**
 * remu_dmabuf_dma_is_phys - are @dev's DMA addresses physical addresses?
 * @dev: a device remu attaches with
 *
 * True for a device with no IOMMU translation (none, or an identity
 * domain: iommu=pt) and no DMA offset (dma_range_map): the DMA engine of
 * an emulated NIC is the CPU, and it can only follow addresses that name
 * memory directly.
 */
static bool remu_dmabuf_dma_is_phys(struct device *dev)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(dev);

	if (dom && dom->type != IOMMU_DOMAIN_IDENTITY)
		return false;
	return !dev->dma_range_map;
}

/*
 * P2P: the CPU ranges over the part of @sgt the MR covers (page aligned),
 * neighbours that are contiguous in the buffer and in memory merged, each
 * mapped for the CPU: RAM through memremap() (the linear map), any other
 * memory the kernel knows of (a device's BAR) through ioremap().  Return:
 * 0, -EINVAL (the table does not cover the MR), -EOPNOTSUPP (an address
 * that is no memory the kernel knows, or part RAM and part not), -ENOMEM.
 */
static int remu_dmabuf_build_ranges(struct remu_dmabuf *db,
				    struct sg_table *sgt, u32 *nr_iomem)
{
	u64 first = ALIGN_DOWN(db->offset, PAGE_SIZE);
	u64 last = ALIGN(db->offset + db->length, PAGE_SIZE);
	struct remu_dmabuf_range *r;
	struct scatterlist *sg;
	unsigned int n = 0, i;
	u64 cur = 0;
	int err;

	r = kvcalloc(max_t(unsigned int, sgt->nents, 1), sizeof(*r),
		     GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	db->ranges = r;
	for_each_sgtable_dma_sg(sgt, sg, i) {
		u64 len = sg_dma_len(sg);
		u64 s = max(cur, first), e = min(cur + len, last);
		phys_addr_t phys = sg_dma_address(sg) + (s - cur);

		if (s < e) {
			if (n && r[n - 1].start + r[n - 1].len == s &&
			    r[n - 1].phys + r[n - 1].len == phys) {
				r[n - 1].len += e - s;
			} else {
				r[n].start = s;
				r[n].len = e - s;
				r[n].phys = phys;
				n++;
			}
		}
		cur += len;
		if (cur >= last)
			break;
	}
	db->nr_ranges = n;
	if (cur < last)
		return -EINVAL;
	*nr_iomem = 0;
	for (i = 0; i < n; i++) {
		int ram = region_intersects(r[i].phys, r[i].len,
					    IORESOURCE_SYSTEM_RAM,
					    IORES_DESC_NONE);

		if (ram == REGION_INTERSECTS) {
			r[i].vaddr = memremap(r[i].phys, r[i].len,
					      MEMREMAP_WB);
			err = r[i].vaddr ? 0 : -ENOMEM;
		} else if (ram == REGION_DISJOINT &&
			   region_intersects(r[i].phys, r[i].len,
					     IORESOURCE_MEM, IORES_DESC_NONE) ==
			   REGION_INTERSECTS) {
			r[i].iomem = ioremap(r[i].phys, r[i].len);
			err = r[i].iomem ? 0 : -ENOMEM;
			(*nr_iomem)++;
		} else {
			err = -EOPNOTSUPP;
		}
		if (err)
			return err;
	}
	return 0;
}

/*
 * P2P: map the buffer for remu's P2P device, wait for the exporter's
 * kernel fences, and map what the MR covers for the CPU.  Reservation
 * lock held.  Return: 0, the exporter's error (-ENODEV: revoked), or as
 * remu_dmabuf_build_ranges() (-EOPNOTSUPP also when the device's DMA
 * addresses are not physical ones).
 */
static int remu_dmabuf_take_p2p(struct remu_dmabuf *db)
{
	struct sg_table *sgt;
	u32 nr_iomem = 0;
	u64 addr = 0;
	long t;
	int err;

	sgt = dma_buf_map_attachment(db->attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt)) {
		err = PTR_ERR(sgt);
		goto out;
	}
	if (sgt->nents)
		addr = sg_dma_address(sgt->sgl);
	t = dma_resv_wait_timeout(db->dmabuf->resv, DMA_RESV_USAGE_KERNEL,
				  false, MAX_SCHEDULE_TIMEOUT);
	err = t < 0 ? t : 0;
	if (!err && !remu_dmabuf_dma_is_phys(db->attach->dev))
		err = -EOPNOTSUPP;
	if (!err)
		err = remu_dmabuf_build_ranges(db, sgt, &nr_iomem);
	if (err) {
		remu_dmabuf_free_ranges(db);
		dma_buf_unmap_attachment(db->attach, sgt, DMA_BIDIRECTIONAL);
		goto out;
	}
	db->sgt = sgt;
	db->mapped = true;
out:
	trace_remu_dmabuf_p2p_map(&db->rdev->ib_dev, db->dmabuf,
				  remu_dmabuf_key(db), addr, db->nr_ranges,
				  nr_iomem, err);
	return err;
}

/* Reservation lock held: make the CPU view valid again. */
static int remu_dmabuf_take_map(struct remu_dmabuf *db)
{
	dma_resv_assert_held(db->dmabuf->resv);
	return db->p2p ? remu_dmabuf_take_p2p(db) : remu_dmabuf_take_vmap(db);
}

/* dma_buf_attach_ops.move_notify: the exporter holds the reservation lock */
static void remu_dmabuf_move_notify(struct dma_buf_attachment *attach)
{
	struct remu_dmabuf *db = attach->importer_priv;
	bool dropped = remu_dmabuf_drop_map(db);

	remu_count(db->rdev, REMU_CNT_DMABUF_MOVES);
	if (dropped)
		remu_count(db->rdev, REMU_CNT_DMABUF_INVALIDATIONS);
	trace_remu_dmabuf_move_notify(&db->rdev->ib_dev, db->dmabuf,
				      remu_dmabuf_key(db), dropped);
}

static const struct dma_buf_attach_ops remu_dmabuf_attach_ops = {
	.allow_peer2peer = false,
	.REMU_DMABUF_MOVE_NOTIFY = remu_dmabuf_move_notify,
};

/* P2P: remu takes DMA addresses with no struct page behind them */
static const struct dma_buf_attach_ops remu_dmabuf_p2p_ops = {
	.allow_peer2peer = true,
	.REMU_DMABUF_MOVE_NOTIFY = remu_dmabuf_move_notify,
};

/* P2P: the range holding byte @pos of the buffer, or NULL */
static const struct remu_dmabuf_range *
remu_dmabuf_range_at(const struct remu_dmabuf *db, u64 pos)
{
	unsigned int lo = 0, hi = db->nr_ranges;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;
		const struct remu_dmabuf_range *r = &db->ranges[mid];

		if (pos < r->start)
			hi = mid;
		else if (pos - r->start >= r->len)
			lo = mid + 1;
		else
			return r;
	}
	return NULL;
}

static int remu_dmabuf_map(struct remu_mr *mr, u64 off, u64 len, bool write,
			   struct remu_mr_seg *seg)
{
	struct remu_dmabuf *db = mr->dmabuf;
	u64 pos = db->offset + off;
	u64 n = min_t(u64, len, PAGE_SIZE - offset_in_page(pos));

	dma_resv_lock(db->dmabuf->resv, NULL);
	if (!db->mapped) {
		dma_resv_unlock(db->dmabuf->resv);
		return -EAGAIN;
	}
	if (db->p2p) {
		const struct remu_dmabuf_range *r = remu_dmabuf_range_at(db,
									 pos);

		if (!r) {
			dma_resv_unlock(db->dmabuf->resv);
			return -EFAULT;
		}
		n = min_t(u64, n, r->start + r->len - pos);
		if (r->iomem)
			seg->iomem = r->iomem + (pos - r->start);
		else
			seg->kaddr = r->vaddr + (pos - r->start);
	} else if (db->map.is_iomem) {
		seg->iomem = db->map.vaddr_iomem + pos;
	} else {
		seg->kaddr = db->map.vaddr + pos;
	}
	seg->len = n;
	seg->priv = db;
	/* the reservation lock stays held until remu_dmabuf_unmap() */
	return 0;
}

static void remu_dmabuf_unmap(struct remu_mr *mr, struct remu_mr_seg *seg)
{
	struct remu_dmabuf *db = seg->priv;

	dma_resv_unlock(db->dmabuf->resv);
}

static int remu_dmabuf_fault(struct remu_mr *mr, u64 off, u64 len, bool write)
{
	struct remu_dmabuf *db = mr->dmabuf;
	int err = 0;

	dma_resv_lock(db->dmabuf->resv, NULL);
	if (!db->mapped) {
		err = remu_dmabuf_take_map(db);
		remu_count(db->rdev, err ? REMU_CNT_DMABUF_MAP_ERRORS :
			   REMU_CNT_DMABUF_REMAPS);
		trace_remu_dmabuf_remap(&db->rdev->ib_dev, db->dmabuf,
					remu_dmabuf_key(db), err);
	}
	dma_resv_unlock(db->dmabuf->resv);
	return err ? -EFAULT : 0;
}

/* Undo a registration, whatever of it was done. */
static void remu_dmabuf_free(struct remu_dmabuf *db)
{
	if (db->attach) {
		dma_resv_lock(db->dmabuf->resv, NULL);
		remu_dmabuf_drop_map(db);
		dma_resv_unlock(db->dmabuf->resv);
		/* no move_notify comes after this */
		dma_buf_detach(db->dmabuf, db->attach);
	}
	dma_buf_put(db->dmabuf);
	kfree(db);
}

static void remu_dmabuf_release(struct remu_mr *mr)
{
	if (!mr->dmabuf)
		return;
	if (mr->dmabuf->p2p)
		remu_count_add(mr->rdev, REMU_CNT_DMABUF_P2P_MRS, -1);
	remu_dmabuf_free(mr->dmabuf);
	mr->dmabuf = NULL;
	remu_count_add(mr->rdev, REMU_CNT_DMABUF_MRS, -1);
}

static const struct remu_mr_backing_ops remu_dmabuf_ops = {
	.map = remu_dmabuf_map,
	.unmap = remu_dmabuf_unmap,
	.fault = remu_dmabuf_fault,
	.release = remu_dmabuf_release,
};

/*
 * The importer's state for @length bytes at @offset of @dmabuf, whose
 * reference it takes over: reached through the CPU mapping, or as a DMA
 * engine would (P2P) when the exporter gives none.  NULL without memory.
 */
static struct remu_dmabuf *remu_dmabuf_new(struct remu_dev *rdev,
					   struct dma_buf *dmabuf,
					   u64 offset, u64 length)
{
	struct remu_dmabuf *db = kzalloc(sizeof(*db), GFP_KERNEL);

	if (!db)
		return NULL;
	db->rdev = rdev;
	db->dmabuf = dmabuf;
	db->offset = offset;
	db->length = length;
	db->p2p = !dmabuf->ops->vmap;
	return db;
}

/*
 * Attach @db as a dynamic importer (the PCI function above the netdev
 * for a P2P buffer, where there is one) and map the buffer once.
 * Return: 0, or the attach's or map's error; a P2P exporter that cannot
 * map for remu's device (no P2P path from it: dma_buf_phys_vec_to_sgt()'s
 * -EINVAL) is memory remu cannot reach, -EOPNOTSUPP.
 */
static int remu_dmabuf_attach_map(struct remu_dmabuf *db)
{
	struct remu_dev *rdev = db->rdev;
	struct dma_buf_attachment *attach;
	int err;

	if (db->p2p)
		attach = dma_buf_dynamic_attach(db->dmabuf, rdev->dmabuf_pci ?:
						rdev->dmabuf_dev,
						&remu_dmabuf_p2p_ops, db);
	else
		attach = dma_buf_dynamic_attach(db->dmabuf, rdev->dmabuf_dev,
						&remu_dmabuf_attach_ops, db);
	trace_remu_dmabuf_attach(&rdev->ib_dev, db->dmabuf, 0,
				 PTR_ERR_OR_ZERO(attach));
	if (IS_ERR(attach))
		return PTR_ERR(attach);
	db->attach = attach;
	dma_resv_lock(db->dmabuf->resv, NULL);
	err = remu_dmabuf_take_map(db);
	dma_resv_unlock(db->dmabuf->resv);
	if (err == -EINVAL && db->p2p)
		return -EOPNOTSUPP;
	return err;
}

/*
 * Take a reference on the dma-buf behind @fd and check that it can back
 * [@offset, @offset + @length) with @access: every refusal happens here,
 * before remu attaches.
 */
static struct dma_buf *remu_dmabuf_get(int fd, u64 offset, u64 length,
				       int access)
{
	struct dma_buf *dmabuf;
	u64 end;
	int err;

	if (!length || length > REMU_MAX_MR_SIZE ||
	    check_add_overflow(offset, length, &end))
		return ERR_PTR(-EINVAL);
	dmabuf = dma_buf_get(fd);	/* -EBADF, or -EINVAL: not a dma-buf */
	if (IS_ERR(dmabuf))
		return dmabuf;
	if (end > dmabuf->size) {
		err = -EINVAL;
		goto err_put;
	}
	/* a dma-buf opened read-only gives no write rights */
	if ((access & REMU_DMABUF_WRITE_RIGHTS) &&
	    !(dmabuf->file->f_mode & FMODE_WRITE)) {
		err = -EACCES;
		goto err_put;
	}
	return dmabuf;

err_put:
	dma_buf_put(dmabuf);
	return ERR_PTR(err);
}

/**
 * remu_reg_user_mr_dmabuf - ib_device_ops.reg_user_mr_dmabuf
 * @ibpd:	protection domain
 * @offset:	byte of the dma-buf at @iova
 * @length:	bytes
 * @iova:	the MR's first address as keys see it (the core has checked
 *		that it agrees with @offset within a page)
 * @fd:		the dma-buf
 * @access:	IB_ACCESS_* rights (the core has checked them)
 * @attrs:	unused
 *
 * Attaches as a dynamic importer (CPU, or P2P for an exporter without
 * vmap) and maps the buffer once, so an exporter that cannot be reached
 * fails here.  Return: the MR, or ERR_PTR(-EBADF (bad fd), -EINVAL (not a
 * dma-buf, empty or out-of-buffer range), -EOPNOTSUPP (memory remu cannot
 * reach, or an exporter that cannot map for remu's P2P device), -EACCES
 * (write rights on a read-only dma-buf), -ENODEV (revoked), -ENOMEM, or
 * the exporter's error).
 */
struct ib_mr *remu_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset,
				      u64 length, u64 iova, int fd,
				      int access,
				      struct uverbs_attr_bundle *attrs)
{
	struct remu_dev *rdev = to_remu_dev(ibpd->device);
	struct dma_buf *dmabuf;
	struct remu_dmabuf *db;
	struct remu_mr *mr;
	int err;

	/* an exporter's buffer is not known to be persistent memory */
	if (access & (~IB_ACCESS_SUPPORTED | IB_ACCESS_FLUSH_PERSISTENT))
		return ERR_PTR(-EINVAL);
	dmabuf = remu_dmabuf_get(fd, offset, length, access);
	if (IS_ERR(dmabuf))
		return ERR_CAST(dmabuf);
	db = remu_dmabuf_new(rdev, dmabuf, offset, length);
	if (!db) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-ENOMEM);
	}
	err = remu_dmabuf_attach_map(db);
	if (err)
		goto err_free;

	mr = remu_mr_new(ibpd, REMU_MR_DMABUF, &remu_dmabuf_ops);
	if (!mr) {
		err = -ENOMEM;
		goto err_free;
	}
	mr->dmabuf = db;
	WRITE_ONCE(db->mr, mr);
	mr->access = access;
	mr->iova = iova;
	mr->length = length;
	mr->state = REMU_MR_VALID;
	remu_count_add(rdev, REMU_CNT_DMABUF_MRS, 1);
	if (db->p2p)
		remu_count_add(rdev, REMU_CNT_DMABUF_P2P_MRS, 1);
	return remu_mr_publish(mr);

err_free:
	remu_dmabuf_free(db);
	return ERR_PTR(err);
}

static void remu_dmabuf_dev_release(struct device *dev)
{
	kfree(dev);
}

/* the PCI function above @ndev (its driver's device), or NULL (veth) */
static struct device *remu_dmabuf_pci_of(struct net_device *ndev)
{
	struct device *d;

	for (d = ndev->dev.parent; d; d = d->parent)
		if (dev_is_pci(d))
			return d;
	return NULL;
}

/**
 * remu_dmabuf_absent - the "absent" lines of peer-to-peer import
 * @rdev: the device
 * @buf: the sysfs page
 * @len: bytes already in it
 *
 * Return: bytes added: why exporters that map only for a PCI peer (VFIO's
 * BAR export, pci_p2pdma) cannot be registered on this device, if they
 * cannot.
 */
int remu_dmabuf_absent(struct remu_dev *rdev, char *buf, int len)
{
	struct device *pci = rdev->dmabuf_pci;

	if (!IS_ENABLED(CONFIG_PCI_P2PDMA))
		return sysfs_emit_at(buf, len,
				     "p2p_pci: this kernel is built without CONFIG_PCI_P2PDMA: no PCI BAR (VFIO) can be exported to a peer\n");
	if (!pci)
		return sysfs_emit_at(buf, len,
				     "p2p_pci: netdev %s has no PCI function above it: exporters that map only for a PCI peer (VFIO BARs) refuse this device\n",
				     netdev_name(rdev->ndev));
	if (!remu_dmabuf_dma_is_phys(pci))
		return sysfs_emit_at(buf, len,
				     "p2p_pci: %s is behind a translating IOMMU (boot with iommu=pt): its DMA addresses are not physical ones\n",
				     dev_name(pci));
	return 0;
}

/**
 * remu_dmabuf_dev_init - find and create the devices remu attaches with
 * @rdev: the new remu device (rdev->ndev set)
 *
 * The private struct device is initialised, named and given a 64-bit DMA
 * mask but never added: exporters only use it to map their pages (direct
 * mapping).  The PCI function above the netdev, if any, is referenced for
 * peer-to-peer attachments.
 * Return: 0 or -ENOMEM/-EIO.
 */
int remu_dmabuf_dev_init(struct remu_dev *rdev)
{
	struct device *dev, *pci;
	int err;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return -ENOMEM;
	device_initialize(dev);
	dev->release = remu_dmabuf_dev_release;
	err = dev_set_name(dev, "remu-dmabuf");
	if (!err)
		err = dma_coerce_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (err) {
		put_device(dev);
		return err;
	}
	rdev->dmabuf_dev = dev;
	pci = remu_dmabuf_pci_of(rdev->ndev);
	if (pci)
		rdev->dmabuf_pci = get_device(pci);
	return 0;
}

/**
 * remu_dmabuf_dev_fini - drop the devices of remu_dmabuf_dev_init()
 * @rdev: the device; every MR, hence every attachment, is gone
 */
void remu_dmabuf_dev_fini(struct remu_dev *rdev)
{
	if (rdev->dmabuf_dev)
		put_device(rdev->dmabuf_dev);
	rdev->dmabuf_dev = NULL;
	if (rdev->dmabuf_pci)
		put_device(rdev->dmabuf_pci);
	rdev->dmabuf_pci = NULL;
}
