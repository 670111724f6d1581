// SPDX-License-Identifier: GPL-2.0
/*
 * remu_dmabuf.c - dma-buf import: the REMU_MR_DMABUF backing of the MR
 * access layer (see remu_mr.h for the backing contract), the verb
 * reg_user_mr_dmabuf (ibv_reg_dmabuf_mr) and the private struct device
 * each remu device attaches to dma-bufs with.  Design and picture:
 * docs/dma-buf.md.
 *
 * remu keeps ib_device.dma_device NULL (virtual DMA for everything else),
 * so it cannot use ib_umem_dmabuf_get(), which attaches with the ib
 * device's DMA device and hands out bus addresses.  Instead each MR
 * attaches itself as a dynamic importer (dma_buf_dynamic_attach() with
 * move_notify) using rdev->dmabuf_dev, a struct device of remu's own that
 * is never added to sysfs and only carries a 64-bit DMA mask (exporters
 * that are not dynamic map their sg_table for it once, at attach), and
 * copies through a CPU mapping of the buffer (dma_buf_vmap()).
 *
 * State (struct remu_dmabuf, one per MR):
 *  - @map/@mapped: the vmap of the whole dma-buf, valid while @mapped.
 *
 *  ->map()	takes the dma-buf's reservation lock; if @mapped, hands out
 *		a kernel address (at most up to the next page boundary) and
 *		keeps the lock until ->unmap(); otherwise drops it and
 *		answers -EAGAIN.
 *  ->fault()	under the reservation lock: waits for the exporter's kernel
 *		fences (a move in flight), dma_buf_vmap(), @mapped = true.
 *  move_notify	called by the exporter with the reservation lock held:
 *		dma_buf_vunmap(), @mapped = false.
 *
 * Locking: the reservation lock (dma_resv_lock, a ww_mutex taken without
 * an acquire context) protects @map and @mapped, and is held for exactly
 * one segment access, so a move waits for the access in flight and every
 * later ->map() sees the mapping gone: remu never touches the old pages
 * after move_notify returns.  Never take a dma-buf's lock while holding
 * another's (->map() is only called with no dma-buf segment mapped by the
 * same walker).  Everything here sleeps; the copy loops run in process
 * context.
 *
 * Registration fails, rather than the first access, when the exporter has
 * no vmap (-EOPNOTSUPP), maps to I/O memory (-EOPNOTSUPP), or the dma-buf
 * is read-only and a write right is asked for (-EACCES).
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/iosys-map.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "remu.h"
#include "remu_trace.h"

REMU_IMPORT_NS(DMA_BUF);

/**
 * struct remu_dmabuf - the dma-buf behind one MR
 * @rdev:	device (for the counters)
 * @dmabuf:	the buffer (reference from dma_buf_get())
 * @attach:	remu's dynamic attachment to it
 * @offset:	byte of the dma-buf at the MR's first iova
 * @map:	CPU mapping of the whole buffer, valid while @mapped
 * @mapped:	@map is valid (under the reservation lock)
 * @mr:		the MR it backs, once there is one (for the trace events)
 */
struct remu_dmabuf {
	struct remu_dev *rdev;
	struct dma_buf *dmabuf;
	struct dma_buf_attachment *attach;
	u64 offset;
	struct iosys_map map;
	bool mapped;
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

/* Reservation lock held: drop the CPU mapping, if any. */
static bool remu_dmabuf_drop_map(struct remu_dmabuf *db)
{
	dma_resv_assert_held(db->dmabuf->resv);
	if (!db->mapped)
		return false;
	dma_buf_vunmap(db->dmabuf, &db->map);
	iosys_map_clear(&db->map);
	db->mapped = false;
	return true;
}

/*
 * Reservation lock held: wait for the exporter's kernel fences (a move or
 * clear in flight), then map the buffer for the CPU.
 */
static int remu_dmabuf_take_map(struct remu_dmabuf *db)
{
	struct dma_buf *dmabuf = db->dmabuf;
	long t;
	int err;

	dma_resv_assert_held(dmabuf->resv);
	t = dma_resv_wait_timeout(dmabuf->resv, DMA_RESV_USAGE_KERNEL, false,
				  MAX_SCHEDULE_TIMEOUT);
	if (t < 0)
		return t;
	err = dma_buf_vmap(dmabuf, &db->map);
	if (err)
		return err;
	if (db->map.is_iomem) {
		/* device memory behind a PCI BAR: not for memcpy */
		dma_buf_vunmap(dmabuf, &db->map);
		iosys_map_clear(&db->map);
		return -EOPNOTSUPP;
	}
	db->mapped = true;
	return 0;
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

static int remu_dmabuf_map(struct remu_mr *mr, u64 off, u64 len, bool write,
			   struct remu_mr_seg *seg)
{
	struct remu_dmabuf *db = mr->dmabuf;
	u64 pos = db->offset + off;

	dma_resv_lock(db->dmabuf->resv, NULL);
	if (!db->mapped) {
		dma_resv_unlock(db->dmabuf->resv);
		return -EAGAIN;
	}
	seg->kaddr = db->map.vaddr + pos;
	seg->len = min_t(u64, len, PAGE_SIZE - offset_in_page(pos));
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
		if (!err)
			remu_count(db->rdev, REMU_CNT_DMABUF_REMAPS);
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
	/* remu copies with the CPU: an exporter without vmap cannot work */
	if (!dmabuf->ops->vmap) {
		err = -EOPNOTSUPP;
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
 * Attaches as a dynamic importer and maps the buffer once, so an exporter
 * that cannot be mapped fails here.  Return: the MR, or ERR_PTR(-EBADF
 * (bad fd), -EINVAL (not a dma-buf, empty or out-of-buffer range),
 * -EOPNOTSUPP (exporter without a CPU mapping), -EACCES (write rights on a
 * read-only dma-buf), -ENOMEM, or the exporter's error).
 */
struct ib_mr *remu_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset,
				      u64 length, u64 iova, int fd,
				      int access,
				      struct uverbs_attr_bundle *attrs)
{
	struct remu_dev *rdev = to_remu_dev(ibpd->device);
	struct dma_buf_attachment *attach;
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
	db = kzalloc(sizeof(*db), GFP_KERNEL);
	if (!db) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-ENOMEM);
	}
	db->rdev = rdev;
	db->dmabuf = dmabuf;
	db->offset = offset;

	attach = dma_buf_dynamic_attach(dmabuf, rdev->dmabuf_dev,
					&remu_dmabuf_attach_ops, db);
	trace_remu_dmabuf_attach(&rdev->ib_dev, dmabuf, 0,
				 PTR_ERR_OR_ZERO(attach));
	if (IS_ERR(attach)) {
		err = PTR_ERR(attach);
		goto err_free;
	}
	db->attach = attach;
	dma_resv_lock(dmabuf->resv, NULL);
	err = remu_dmabuf_take_map(db);
	dma_resv_unlock(dmabuf->resv);
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
	return remu_mr_publish(mr);

err_free:
	remu_dmabuf_free(db);
	return ERR_PTR(err);
}

static void remu_dmabuf_dev_release(struct device *dev)
{
	kfree(dev);
}

/**
 * remu_dmabuf_dev_init - create the device remu attaches to dma-bufs with
 * @rdev: the new remu device
 *
 * The struct device is initialised, named and given a 64-bit DMA mask but
 * never added: exporters only use it to map their pages (direct mapping).
 * Return: 0 or -ENOMEM/-EIO.
 */
int remu_dmabuf_dev_init(struct remu_dev *rdev)
{
	struct device *dev;
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
	return 0;
}

/**
 * remu_dmabuf_dev_fini - drop the device of remu_dmabuf_dev_init()
 * @rdev: the device; every MR, hence every attachment, is gone
 */
void remu_dmabuf_dev_fini(struct remu_dev *rdev)
{
	if (rdev->dmabuf_dev)
		put_device(rdev->dmabuf_dev);
	rdev->dmabuf_dev = NULL;
}
