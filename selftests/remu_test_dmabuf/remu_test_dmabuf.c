// SPDX-License-Identifier: GPL-2.0
/*
 * remu_test_dmabuf.c - a test exporter of dynamic dma-bufs whose backing
 * pages move or are evicted on command, for selftests/remu_dmabuf_test.
 *
 * Why it exists: Debian's kernel is built without CONFIG_DMABUF_MOVE_NOTIFY,
 * so every stock exporter keeps a buffer in place while an importer has it
 * mapped, and no stock exporter ever calls move_notify there.  This module
 * does, in the spirit of lib/test_hmm.c: /dev/remu_test_dmabuf creates
 * dma-bufs (REMU_TDB_CREATE) backed by pages it owns, with pin/unpin,
 * map/unmap_dma_buf and vmap/vunmap, so it is a dynamic exporter.  remu
 * attaches as a dynamic importer and only vmaps, so the dma-buf core never
 * pins these buffers for it, with or without CONFIG_DMABUF_MOVE_NOTIFY.
 *
 * A move (REMU_TDB_MOVE) takes the reservation lock, calls
 * dma_buf_move_notify() and then checks that no CPU mapping is left (an
 * importer that kept one fails the move with EBUSY and the old pages stay
 * where they are); only then are the pages switched and the old ones
 * freed, so an importer that touched them after move_notify would be
 * touching freed memory.  With delay_ms the new pages start zeroed and the
 * copy runs later behind a kernel fence in the reservation object: an
 * importer that maps without waiting for it reads zeroes.  An eviction
 * (REMU_TDB_EVICT) copies the content aside and frees the pages; the next
 * vmap/map/pin allocates new ones.  Pinned buffers refuse both (EBUSY), an
 * evicted one too (ENODATA: nothing to move).
 * REMU_TDB_READ/WRITE reach the backing store directly.
 *
 * Other kinds of exporter, by creation flag: REMU_TDB_P2P behaves as
 * VFIO's BAR export in 7.x (peer2peer importers only, no pin, no vmap,
 * a table of DMA addresses from dma_map_resource() with no struct page);
 * REMU_TDB_IOMEM hands its pages out as I/O memory from vmap, as a GPU
 * driver hands out VRAM behind a BAR (the pages are RAM; the importer
 * must still use the io accessors); REMU_TDB_BAD_DMA (with P2P) hands
 * out an address no memory is at, REMU_TDB_NO_PATH (with P2P) fails
 * every map with EINVAL, as 7.x's P2P helper does for an importer it
 * has no path to.  REMU_TDB_REVOKE revokes a buffer with no vmap and
 * re-enables it, as VFIO does when memory decode is turned off and on.
 *
 * The test importer (REMU_TDB_IMPORT*): each open file of the device can
 * attach to any dma-buf (remu's exported device memory, in the tests) as
 * a dynamic importer, with or without peer2peer, pin and map it, read and
 * write through the DMA addresses it was given, and count move_notify
 * (which unmaps at once).  It attaches with a struct device of its own
 * (64-bit DMA mask, direct mapped), or one with no DMA mask at all.
 *
 * Loaded and unloaded by selftests/run_tests.sh around remu_dmabuf_test
 * only; never part of a remu installation.
 *
 * Locking: all of a buffer's state is under its dma-buf's reservation lock
 * (the dma-buf core calls pin, map and vmap with it held).  User copies are
 * made outside it, through a bounce buffer.  An importer's state is under
 * its file's mutex and, for what move_notify changes, the imported
 * dma-buf's reservation lock (mutex first).
 */
#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/io.h>
#include <linux/iosys-map.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>

#include "remu_test_dmabuf.h"

REMU_IMPORT_NS(DMA_BUF);

/**
 * struct tdb_buf - one exported buffer
 * @dmabuf:	the dma-buf (its resv lock guards everything below)
 * @npages:	size in pages
 * @pages:	the backing pages, NULL while evicted
 * @swap:	the content while evicted
 * @vaddr:	the CPU mapping handed to vmap, or NULL
 * @pins:	pin count (P2P buffers: none, see @p2p_pins)
 * @flags:	REMU_TDB_* of its creation
 * @revoked:	REMU_TDB_REVOKE in force
 * @mapped:	sg tables mapped now
 * @p2p_pins:	P2P: pins the dma-buf core took around maps (they stop
 *		neither a move nor a revoke)
 * @moves, @evictions, @vmaps, @maps: statistics for REMU_TDB_INFO
 */
struct tdb_buf {
	struct dma_buf *dmabuf;
	unsigned int npages;
	struct page **pages;
	void *swap;
	void *vaddr;
	unsigned int pins;
	u32 flags;
	bool revoked;
	unsigned int mapped;
	unsigned int p2p_pins;
	u64 moves;
	u64 evictions;
	u64 vmaps;
	u64 maps;
};

/**
 * struct tdb_imp - the test importer of one open file
 * @lock:	serialises the ioctls of the file
 * @dmabuf:	the imported dma-buf, or NULL
 * @attach:	the attachment
 * @sgt:	the mapped table, or NULL (under the reservation lock)
 * @pinned:	dma_buf_pin() succeeded
 * @moves:	move_notify calls (under the reservation lock)
 */
struct tdb_imp {
	struct mutex lock;
	struct dma_buf *dmabuf;
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
	bool pinned;
	u64 moves;
};

/*
 * what the test importer attaches with: direct mapped, 64-bit mask; and
 * a device with no DMA mask (REMU_TDB_IMP_NOMASK)
 */
static struct device *tdb_imp_dev, *tdb_imp_nomask_dev;

/* a delayed move: copies @old into @buf's pages, then signals @fence */
struct tdb_move_work {
	struct delayed_work work;
	struct tdb_buf *buf;
	struct page **old;
	struct dma_fence fence;
	spinlock_t lock;
};

static struct workqueue_struct *tdb_wq;
static u64 tdb_fence_context;
static atomic64_t tdb_fence_seqno;

static const struct dma_buf_ops tdb_ops, tdb_ops_novmap, tdb_ops_iomem,
	tdb_ops_p2p;

static void tdb_free_pages(struct page **pages, unsigned int n)
{
	unsigned int i;

	if (!pages)
		return;
	for (i = 0; i < n; i++)
		if (pages[i])
			__free_page(pages[i]);
	kvfree(pages);
}

static struct page **tdb_alloc_pages(unsigned int n)
{
	struct page **pages;
	unsigned int i;

	pages = kvcalloc(n, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return NULL;
	for (i = 0; i < n; i++) {
		pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!pages[i]) {
			tdb_free_pages(pages, n);
			return NULL;
		}
	}
	return pages;
}

/* resv held: bring an evicted buffer back into new pages */
static int tdb_populate(struct tdb_buf *buf)
{
	struct page **pages;
	unsigned int i;

	dma_resv_assert_held(buf->dmabuf->resv);
	if (buf->pages)
		return 0;
	pages = tdb_alloc_pages(buf->npages);
	if (!pages)
		return -ENOMEM;
	for (i = 0; i < buf->npages; i++)
		memcpy_to_page(pages[i], 0, buf->swap + i * PAGE_SIZE,
			       PAGE_SIZE);
	kvfree(buf->swap);
	buf->swap = NULL;
	buf->pages = pages;
	return 0;
}

/* ---- dma_buf_ops ---- */

static int tdb_pin(struct dma_buf_attachment *attach)
{
	struct tdb_buf *buf = attach->dmabuf->priv;
	int err = buf->revoked ? -ENODEV : tdb_populate(buf);

	if (!err)
		buf->pins++;
	return err;
}

static void tdb_unpin(struct dma_buf_attachment *attach)
{
	struct tdb_buf *buf = attach->dmabuf->priv;

	buf->pins--;
}

static struct sg_table *tdb_map(struct dma_buf_attachment *attach,
				enum dma_data_direction dir)
{
	struct tdb_buf *buf = attach->dmabuf->priv;
	struct sg_table *sgt;
	int err;

	err = buf->revoked ? -ENODEV : tdb_populate(buf);
	if (err)
		return ERR_PTR(err);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	err = sg_alloc_table_from_pages(sgt, buf->pages, buf->npages, 0,
					(size_t)buf->npages << PAGE_SHIFT,
					GFP_KERNEL);
	if (err)
		goto err_free;
	err = dma_map_sgtable(attach->dev, sgt, dir, 0);
	if (err)
		goto err_table;
	buf->mapped++;
	buf->maps++;
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(err);
}

static void tdb_unmap(struct dma_buf_attachment *attach, struct sg_table *sgt,
		      enum dma_data_direction dir)
{
	struct tdb_buf *buf = attach->dmabuf->priv;

	dma_unmap_sgtable(attach->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
	buf->mapped--;
}

static int tdb_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct tdb_buf *buf = dmabuf->priv;
	int err = tdb_populate(buf);

	if (err)
		return err;
	buf->vaddr = vmap(buf->pages, buf->npages, VM_MAP, PAGE_KERNEL);
	if (!buf->vaddr)
		return -ENOMEM;
	buf->vmaps++;
	if (buf->flags & REMU_TDB_IOMEM)
		/* RAM, but the importer must treat it as a BAR */
		iosys_map_set_vaddr_iomem(map, (void __iomem __force *)buf->vaddr);
	else
		iosys_map_set_vaddr(map, buf->vaddr);
	return 0;
}

static void tdb_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct tdb_buf *buf = dmabuf->priv;

	vunmap(buf->vaddr);
	buf->vaddr = NULL;
}

static void tdb_release(struct dma_buf *dmabuf)
{
	struct tdb_buf *buf = dmabuf->priv;

	tdb_free_pages(buf->pages, buf->npages);
	kvfree(buf->swap);
	kfree(buf);
}

static const struct dma_buf_ops tdb_ops = {
	.pin = tdb_pin,
	.unpin = tdb_unpin,
	.map_dma_buf = tdb_map,
	.unmap_dma_buf = tdb_unmap,
	.release = tdb_release,
	.vmap = tdb_vmap,
	.vunmap = tdb_vunmap,
};

static const struct dma_buf_ops tdb_ops_novmap = {
	.pin = tdb_pin,
	.unpin = tdb_unpin,
	.map_dma_buf = tdb_map,
	.unmap_dma_buf = tdb_unmap,
	.release = tdb_release,
};

/* the same ops; tdb_vmap() marks the mapping as I/O memory */
static const struct dma_buf_ops tdb_ops_iomem = {
	.pin = tdb_pin,
	.unpin = tdb_unpin,
	.map_dma_buf = tdb_map,
	.unmap_dma_buf = tdb_unmap,
	.release = tdb_release,
	.vmap = tdb_vmap,
	.vunmap = tdb_vunmap,
};

/* ---- P2P buffers: as VFIO's BAR export ---- */

/* an address no memory is at (REMU_TDB_BAD_DMA) */
#define TDB_BAD_DMA	(1ULL << 45)

static int tdb_p2p_attach(struct dma_buf *dmabuf,
			  struct dma_buf_attachment *attach)
{
	struct tdb_buf *buf = dmabuf->priv;

	if (!attach->peer2peer)
		return -EOPNOTSUPP;
	return READ_ONCE(buf->revoked) ? -ENODEV : 0;
}

/*
 * Refused as VFIO does, but where the dma-buf core pins around every map
 * by a dynamic importer (REMU_DMABUF_PIN_ON_MAP): there such a pin only
 * brackets a mapping, and neither a move nor a revoke waits for it.
 */
static int tdb_p2p_pin(struct dma_buf_attachment *attach)
{
	struct tdb_buf *buf = attach->dmabuf->priv;

	if (!REMU_DMABUF_PIN_ON_MAP)
		return -EOPNOTSUPP;
	if (buf->revoked)
		return -ENODEV;
	buf->p2p_pins++;
	return 0;
}

static void tdb_p2p_unpin(struct dma_buf_attachment *attach)
{
	struct tdb_buf *buf = attach->dmabuf->priv;

	buf->p2p_pins--;
}

/* undo the first @n entries of a P2P table */
static void tdb_p2p_unmap_n(struct device *dev, struct sg_table *sgt,
			    unsigned int n, bool bad,
			    enum dma_data_direction dir)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sgtable_dma_sg(sgt, sg, i) {
		if (i >= n)
			break;
		if (!bad)
			dma_unmap_resource(dev, sg_dma_address(sg),
					   sg_dma_len(sg), dir, 0);
	}
}

/*
 * A table of DMA addresses only: one entry per run of physically
 * contiguous pages, each from dma_map_resource(), no struct page.
 */
static struct sg_table *tdb_p2p_map(struct dma_buf_attachment *attach,
				    enum dma_data_direction dir)
{
	struct tdb_buf *buf = attach->dmabuf->priv;
	bool bad = buf->flags & REMU_TDB_BAD_DMA;
	unsigned int i, n = 0, runs = 0;
	struct scatterlist *sg;
	struct sg_table *sgt;
	int err;

	err = buf->revoked ? -ENODEV : tdb_populate(buf);
	if (err)
		return ERR_PTR(err);
	if (buf->flags & REMU_TDB_NO_PATH)
		return ERR_PTR(-EINVAL);
	if (!attach->dev->dma_mask)
		return ERR_PTR(-EOPNOTSUPP);
	for (i = 0; i < buf->npages; i++)
		if (!i || page_to_phys(buf->pages[i]) !=
			  page_to_phys(buf->pages[i - 1]) + PAGE_SIZE)
			runs++;
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	err = sg_alloc_table(sgt, runs, GFP_KERNEL);
	if (err)
		goto err_free;
	sg = sgt->sgl;
	for (i = 0; i < buf->npages; ) {
		phys_addr_t phys = page_to_phys(buf->pages[i]);
		unsigned int len = PAGE_SIZE;
		dma_addr_t addr;
		u64 off = (u64)i << PAGE_SHIFT;

		while (++i < buf->npages &&
		       page_to_phys(buf->pages[i]) == phys + len)
			len += PAGE_SIZE;
		if (bad) {
			addr = TDB_BAD_DMA + off;
		} else {
			addr = dma_map_resource(attach->dev, phys, len, dir, 0);
			if (dma_mapping_error(attach->dev, addr)) {
				err = -EIO;
				goto err_unmap;
			}
		}
		sg_dma_address(sg) = addr;
		sg_dma_len(sg) = len;
		sg = sg_next(sg);
		n++;
	}
	buf->mapped++;
	buf->maps++;
	return sgt;

err_unmap:
	tdb_p2p_unmap_n(attach->dev, sgt, n, bad, dir);
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(err);
}

static void tdb_p2p_unmap(struct dma_buf_attachment *attach,
			  struct sg_table *sgt, enum dma_data_direction dir)
{
	struct tdb_buf *buf = attach->dmabuf->priv;

	tdb_p2p_unmap_n(attach->dev, sgt, sgt->nents,
			buf->flags & REMU_TDB_BAD_DMA, dir);
	sg_free_table(sgt);
	kfree(sgt);
	buf->mapped--;
}

static const struct dma_buf_ops tdb_ops_p2p = {
	.attach = tdb_p2p_attach,
	.pin = tdb_p2p_pin,
	.unpin = tdb_p2p_unpin,
	.map_dma_buf = tdb_p2p_map,
	.unmap_dma_buf = tdb_p2p_unmap,
	.release = tdb_release,
};

/* ---- the move fence ---- */

static const char *tdb_fence_name(struct dma_fence *fence)
{
	return REMU_TDB_DEVNAME;
}

static void tdb_fence_release(struct dma_fence *fence)
{
	kfree(container_of(fence, struct tdb_move_work, fence));
}

static const struct dma_fence_ops tdb_fence_ops = {
	.get_driver_name = tdb_fence_name,
	.get_timeline_name = tdb_fence_name,
	.release = tdb_fence_release,
};

/* the copy engine: nobody touches the new pages before the fence signals */
static void tdb_move_work_fn(struct work_struct *work)
{
	struct tdb_move_work *mw =
		container_of(work, struct tdb_move_work, work.work);
	struct tdb_buf *buf = mw->buf;
	unsigned int i;

	for (i = 0; i < buf->npages; i++)
		copy_highpage(buf->pages[i], mw->old[i]);
	tdb_free_pages(mw->old, buf->npages);
	dma_fence_signal(&mw->fence);
	dma_buf_put(buf->dmabuf);	/* taken when the move was queued */
	dma_fence_put(&mw->fence);	/* frees mw */
}

/* ---- ioctls ---- */

/* the buffer behind @fd, with a dma-buf reference; only our own */
static struct tdb_buf *tdb_get(int fd)
{
	struct dma_buf *dmabuf = dma_buf_get(fd);

	if (IS_ERR(dmabuf))
		return ERR_CAST(dmabuf);
	if (dmabuf->ops->release != tdb_release) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-EINVAL);
	}
	return dmabuf->priv;
}

/* lock the buffer with no move in flight */
static int tdb_lock_idle(struct tdb_buf *buf)
{
	struct dma_resv *resv = buf->dmabuf->resv;
	long t;

	dma_resv_lock(resv, NULL);
	t = dma_resv_wait_timeout(resv, DMA_RESV_USAGE_BOOKKEEP, false,
				  MAX_SCHEDULE_TIMEOUT);
	if (t < 0) {
		dma_resv_unlock(resv);
		return t;
	}
	return 0;
}

static long tdb_create(struct remu_tdb_create __user *uarg)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp);
	struct remu_tdb_create c;
	struct dma_buf *dmabuf;
	struct tdb_buf *buf;
	int fd;

	if (copy_from_user(&c, uarg, sizeof(c)))
		return -EFAULT;
	if (!c.size || c.size > REMU_TDB_MAX_SIZE ||
	    c.flags & ~(REMU_TDB_RDONLY | REMU_TDB_NO_VMAP | REMU_TDB_P2P |
			REMU_TDB_IOMEM | REMU_TDB_BAD_DMA | REMU_TDB_NO_PATH) ||
	    hweight32(c.flags & (REMU_TDB_NO_VMAP | REMU_TDB_P2P |
				 REMU_TDB_IOMEM)) > 1 ||
	    ((c.flags & (REMU_TDB_BAD_DMA | REMU_TDB_NO_PATH)) &&
	     !(c.flags & REMU_TDB_P2P)))
		return -EINVAL;
	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	buf->npages = DIV_ROUND_UP(c.size, PAGE_SIZE);
	buf->flags = c.flags;
	buf->pages = tdb_alloc_pages(buf->npages);
	if (!buf->pages) {
		kfree(buf);
		return -ENOMEM;
	}
	if (c.flags & REMU_TDB_NO_VMAP)
		exp.ops = &tdb_ops_novmap;
	else if (c.flags & REMU_TDB_P2P)
		exp.ops = &tdb_ops_p2p;
	else if (c.flags & REMU_TDB_IOMEM)
		exp.ops = &tdb_ops_iomem;
	else
		exp.ops = &tdb_ops;
	exp.size = (size_t)buf->npages << PAGE_SHIFT;
	exp.flags = c.flags & REMU_TDB_RDONLY ? O_RDONLY : O_RDWR;
	exp.priv = buf;
	dmabuf = dma_buf_export(&exp);	/* takes a module reference */
	if (IS_ERR(dmabuf)) {
		tdb_free_pages(buf->pages, buf->npages);
		kfree(buf);
		return PTR_ERR(dmabuf);
	}
	buf->dmabuf = dmabuf;
	fd = dma_buf_fd(dmabuf, O_CLOEXEC);
	if (fd < 0) {
		dma_buf_put(dmabuf);	/* frees buf through tdb_release */
		return fd;
	}
	c.fd = fd;
	if (copy_to_user(uarg, &c, sizeof(c)))
		return -EFAULT;	/* the fd stays: the process owns it */
	return 0;
}

static long tdb_rw(struct remu_tdb_rw __user *uarg, bool write)
{
	struct remu_tdb_rw rw;
	struct tdb_buf *buf;
	void __user *ubuf;
	u64 size, pos, done;
	void *bounce;
	long err;

	if (copy_from_user(&rw, uarg, sizeof(rw)))
		return -EFAULT;
	if (!rw.len || rw.len > REMU_TDB_MAX_RW)
		return -EINVAL;
	buf = tdb_get(rw.fd);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	size = (u64)buf->npages << PAGE_SHIFT;
	err = -EINVAL;
	if (rw.offset > size || rw.len > size - rw.offset)
		goto out_put;
	err = -ENOMEM;
	bounce = kvmalloc(rw.len, GFP_KERNEL);
	if (!bounce)
		goto out_put;
	ubuf = u64_to_user_ptr(rw.buf);
	err = -EFAULT;
	if (write && copy_from_user(bounce, ubuf, rw.len))
		goto out_free;
	err = tdb_lock_idle(buf);
	if (err)
		goto out_free;
	for (done = 0; done < rw.len; ) {
		unsigned int n;

		pos = rw.offset + done;
		n = min_t(u64, rw.len - done, PAGE_SIZE - offset_in_page(pos));
		if (!buf->pages) {
			if (write)
				memcpy(buf->swap + pos, bounce + done, n);
			else
				memcpy(bounce + done, buf->swap + pos, n);
		} else if (write) {
			memcpy_to_page(buf->pages[pos >> PAGE_SHIFT],
				       offset_in_page(pos), bounce + done, n);
		} else {
			memcpy_from_page(bounce + done,
					 buf->pages[pos >> PAGE_SHIFT],
					 offset_in_page(pos), n);
		}
		done += n;
	}
	dma_resv_unlock(buf->dmabuf->resv);
	err = 0;
	if (!write && copy_to_user(ubuf, bounce, rw.len))
		err = -EFAULT;
out_free:
	kvfree(bounce);
out_put:
	dma_buf_put(buf->dmabuf);
	return err;
}

/*
 * resv held, move_notify called: an importer that still has the buffer
 * mapped broke the contract, and the old pages must stay.
 */
static int tdb_check_unmapped(struct tdb_buf *buf, const char *what)
{
	if (!buf->vaddr && !((buf->flags & REMU_TDB_P2P) && buf->mapped))
		return 0;
	pr_err("%s: an importer kept its mapping across move_notify; %s refused\n",
	       REMU_TDB_DEVNAME, what);
	return -EBUSY;
}

static long tdb_move(struct remu_tdb_move __user *uarg)
{
	struct tdb_move_work *mw = NULL;
	struct remu_tdb_move m;
	struct page **pages;
	struct tdb_buf *buf;
	struct dma_resv *resv;
	unsigned int i;
	long err;

	if (copy_from_user(&m, uarg, sizeof(m)))
		return -EFAULT;
	if (m.delay_ms > 10000)
		return -EINVAL;
	buf = tdb_get(m.fd);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	resv = buf->dmabuf->resv;
	err = -ENOMEM;
	pages = tdb_alloc_pages(buf->npages);
	if (!pages)
		goto out_put;
	if (m.delay_ms) {
		mw = kzalloc(sizeof(*mw), GFP_KERNEL);
		if (!mw)
			goto out_pages;
	}
	err = tdb_lock_idle(buf);
	if (err)
		goto out_mw;
	err = buf->pins ? -EBUSY : -ENODATA;
	if (buf->pins || !buf->pages)
		goto out_unlock;
	if (mw) {
		err = dma_resv_reserve_fences(resv, 1);
		if (err)
			goto out_unlock;
	}
	dma_buf_move_notify(buf->dmabuf);
	err = tdb_check_unmapped(buf, "move");
	if (err)
		goto out_unlock;
	if (!mw) {
		for (i = 0; i < buf->npages; i++)
			copy_highpage(pages[i], buf->pages[i]);
		tdb_free_pages(buf->pages, buf->npages);
	} else {
		INIT_DELAYED_WORK(&mw->work, tdb_move_work_fn);
		spin_lock_init(&mw->lock);
		mw->buf = buf;
		mw->old = buf->pages;
		dma_fence_init(&mw->fence, &tdb_fence_ops, &mw->lock,
			       tdb_fence_context,
			       atomic64_inc_return(&tdb_fence_seqno));
		dma_resv_add_fence(resv, &mw->fence, DMA_RESV_USAGE_KERNEL);
		get_dma_buf(buf->dmabuf);	/* for the work */
		queue_delayed_work(tdb_wq, &mw->work,
				   msecs_to_jiffies(m.delay_ms));
		mw = NULL;
	}
	buf->pages = pages;
	pages = NULL;
	buf->moves++;
	err = 0;
out_unlock:
	dma_resv_unlock(resv);
out_mw:
	kfree(mw);
out_pages:
	tdb_free_pages(pages, buf->npages);
out_put:
	dma_buf_put(buf->dmabuf);
	return err;
}

static long tdb_evict(int __user *uarg)
{
	struct tdb_buf *buf;
	unsigned int i;
	void *swap;
	long err;
	int fd;

	if (get_user(fd, uarg))
		return -EFAULT;
	buf = tdb_get(fd);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	err = -ENOMEM;
	swap = kvmalloc((size_t)buf->npages << PAGE_SHIFT, GFP_KERNEL);
	if (!swap)
		goto out_put;
	err = tdb_lock_idle(buf);
	if (err)
		goto out_free;
	err = buf->pins ? -EBUSY : -ENODATA;
	if (buf->pins || !buf->pages)
		goto out_unlock;
	dma_buf_move_notify(buf->dmabuf);
	err = tdb_check_unmapped(buf, "eviction");
	if (err)
		goto out_unlock;
	for (i = 0; i < buf->npages; i++)
		memcpy_from_page(swap + i * PAGE_SIZE, buf->pages[i], 0,
				 PAGE_SIZE);
	tdb_free_pages(buf->pages, buf->npages);
	buf->pages = NULL;
	buf->swap = swap;
	swap = NULL;
	buf->evictions++;
	err = 0;
out_unlock:
	dma_resv_unlock(buf->dmabuf->resv);
out_free:
	kvfree(swap);
out_put:
	dma_buf_put(buf->dmabuf);
	return err;
}

static long tdb_info(struct remu_tdb_info __user *uarg)
{
	struct dma_buf_attachment *a;
	struct remu_tdb_info info;
	struct tdb_buf *buf;

	int fd;

	if (get_user(fd, &uarg->fd))
		return -EFAULT;
	buf = tdb_get(fd);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	memset(&info, 0, sizeof(info));
	info.fd = fd;
	dma_resv_lock(buf->dmabuf->resv, NULL);
	info.evicted = !buf->pages;
	info.moves = buf->moves;
	info.evictions = buf->evictions;
	info.vmaps = buf->vmaps;
	info.vmapped = !!buf->vaddr;
	info.pins = buf->pins;
	info.mapped = buf->mapped;
	info.maps = buf->maps;
	info.revoked = buf->revoked;
	info.p2p_pins = buf->p2p_pins;
	list_for_each_entry(a, &buf->dmabuf->attachments, node)
		info.attachments++;
	dma_resv_unlock(buf->dmabuf->resv);
	dma_buf_put(buf->dmabuf);
	return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long tdb_revoke(struct remu_tdb_revoke __user *uarg)
{
	struct remu_tdb_revoke r;
	struct tdb_buf *buf;
	long err;

	if (copy_from_user(&r, uarg, sizeof(r)))
		return -EFAULT;
	if (r.revoke > 1)
		return -EINVAL;
	buf = tdb_get(r.fd);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	/*
	 * Only buffers with no CPU mapping (as VFIO's): the dma-buf core
	 * WARNs when an exporter's vmap fails, so an exporter that offers
	 * vmap cannot take it away.
	 */
	err = -EINVAL;
	if (buf->dmabuf->ops->vmap)
		goto out_put;
	err = tdb_lock_idle(buf);
	if (err)
		goto out_put;
	buf->revoked = r.revoke;
	/* revoked: importers unmap; re-enabled: they may map again */
	dma_buf_move_notify(buf->dmabuf);
	if (r.revoke)
		err = tdb_check_unmapped(buf, "revoke");
	dma_resv_unlock(buf->dmabuf->resv);
out_put:
	dma_buf_put(buf->dmabuf);
	return err;
}

/* ---- the test importer ---- */

/* move_notify: the exporter holds the reservation lock; unmap at once */
static void tdb_imp_move_notify(struct dma_buf_attachment *attach)
{
	struct tdb_imp *imp = attach->importer_priv;

	imp->moves++;
	if (imp->sgt) {
		dma_buf_unmap_attachment(attach, imp->sgt, DMA_BIDIRECTIONAL);
		imp->sgt = NULL;
	}
}

static const struct dma_buf_attach_ops tdb_imp_ops = {
	.allow_peer2peer = false,
	.REMU_DMABUF_MOVE_NOTIFY = tdb_imp_move_notify,
};

static const struct dma_buf_attach_ops tdb_imp_p2p_ops = {
	.allow_peer2peer = true,
	.REMU_DMABUF_MOVE_NOTIFY = tdb_imp_move_notify,
};

/* imp->lock held: map (again); the reservation lock held */
static int tdb_imp_map(struct tdb_imp *imp)
{
	struct sg_table *sgt;

	dma_resv_assert_held(imp->dmabuf->resv);
	if (imp->sgt)
		return 0;
	sgt = dma_buf_map_attachment(imp->attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt))
		return PTR_ERR(sgt);
	imp->sgt = sgt;
	return 0;
}

/* imp->lock held: let go of the imported dma-buf */
static void tdb_imp_drop(struct tdb_imp *imp)
{
	if (!imp->dmabuf)
		return;
	dma_resv_lock(imp->dmabuf->resv, NULL);
	if (imp->sgt)
		dma_buf_unmap_attachment(imp->attach, imp->sgt,
					 DMA_BIDIRECTIONAL);
	imp->sgt = NULL;
	if (imp->pinned)
		dma_buf_unpin(imp->attach);
	imp->pinned = false;
	dma_resv_unlock(imp->dmabuf->resv);
	dma_buf_detach(imp->dmabuf, imp->attach);
	dma_buf_put(imp->dmabuf);
	imp->dmabuf = NULL;
	imp->attach = NULL;
	imp->moves = 0;
}

static long tdb_import(struct tdb_imp *imp, struct remu_tdb_import __user *uarg)
{
	struct dma_buf_attachment *attach;
	struct remu_tdb_import in;
	struct scatterlist *sg;
	struct dma_buf *dmabuf;
	unsigned int i;

	if (copy_from_user(&in, uarg, sizeof(in)))
		return -EFAULT;
	if (in.flags & ~(REMU_TDB_IMP_P2P | REMU_TDB_IMP_PIN |
			 REMU_TDB_IMP_MAP | REMU_TDB_IMP_NOMASK))
		return -EINVAL;
	if (imp->dmabuf)
		return -EBUSY;
	dmabuf = dma_buf_get(in.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	in.attach_err = in.pin_err = in.map_err = 0;
	in.nents = in.pages = 0;
	in.dma_addr = in.dma_len = 0;
	in.pin_on_map = REMU_DMABUF_PIN_ON_MAP;
	attach = dma_buf_dynamic_attach(dmabuf,
					in.flags & REMU_TDB_IMP_NOMASK ?
					tdb_imp_nomask_dev : tdb_imp_dev,
					in.flags & REMU_TDB_IMP_P2P ?
					&tdb_imp_p2p_ops : &tdb_imp_ops, imp);
	if (IS_ERR(attach)) {
		in.attach_err = PTR_ERR(attach);
		dma_buf_put(dmabuf);
		goto out;
	}
	imp->dmabuf = dmabuf;
	imp->attach = attach;
	dma_resv_lock(dmabuf->resv, NULL);
	if (in.flags & REMU_TDB_IMP_PIN) {
		in.pin_err = dma_buf_pin(attach);
		imp->pinned = !in.pin_err;
	}
	if (in.flags & REMU_TDB_IMP_MAP) {
		in.map_err = tdb_imp_map(imp);
		if (imp->sgt) {
			for_each_sgtable_dma_sg(imp->sgt, sg, i) {
				if (!in.nents)
					in.dma_addr = sg_dma_address(sg);
				in.dma_len += sg_dma_len(sg);
				in.nents++;
			}
			/* the CPU list: entries with a page, if any */
			if (imp->sgt->orig_nents)
				for_each_sgtable_sg(imp->sgt, sg, i)
					if (sg_page(sg))
						in.pages++;
		}
	}
	dma_resv_unlock(dmabuf->resv);
out:
	return copy_to_user(uarg, &in, sizeof(in)) ? -EFAULT : 0;
}

static long tdb_import_info(struct tdb_imp *imp,
			    struct remu_tdb_import_info __user *uarg)
{
	struct remu_tdb_import_info info = {};

	if (imp->dmabuf) {
		info.attached = 1;
		dma_resv_lock(imp->dmabuf->resv, NULL);
		info.mapped = !!imp->sgt;
		info.moves = imp->moves;
		dma_resv_unlock(imp->dmabuf->resv);
		info.pinned = imp->pinned;
	}
	return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long tdb_import_remap(struct tdb_imp *imp)
{
	long err;

	if (!imp->dmabuf)
		return -EINVAL;
	dma_resv_lock(imp->dmabuf->resv, NULL);
	err = tdb_imp_map(imp);
	dma_resv_unlock(imp->dmabuf->resv);
	return err;
}

/*
 * Copy through the DMA addresses of the mapping: on the test machine
 * (direct mapped, the importer's device has no IOMMU) they are physical
 * addresses of RAM, which checks that an exporter handed out the right
 * memory.  Reservation lock held: the mapping cannot go meanwhile.
 */
static long tdb_import_rw(struct tdb_imp *imp, struct remu_tdb_rw __user *uarg,
			  bool write)
{
	struct remu_tdb_rw rw;
	struct scatterlist *sg;
	void *bounce;
	u64 cur = 0, done = 0;
	unsigned int i;
	long err;

	if (copy_from_user(&rw, uarg, sizeof(rw)))
		return -EFAULT;
	if (!rw.len || rw.len > REMU_TDB_MAX_RW)
		return -EINVAL;
	if (!imp->dmabuf)
		return -EINVAL;
	bounce = kvmalloc(rw.len, GFP_KERNEL);
	if (!bounce)
		return -ENOMEM;
	err = -EFAULT;
	if (write && copy_from_user(bounce, u64_to_user_ptr(rw.buf), rw.len))
		goto out_free;
	dma_resv_lock(imp->dmabuf->resv, NULL);
	err = -ENODEV;
	if (!imp->sgt)
		goto out_unlock;
	err = 0;
	for_each_sgtable_dma_sg(imp->sgt, sg, i) {
		u64 len = sg_dma_len(sg), pos = rw.offset + done;
		phys_addr_t phys;
		void *p;
		u64 n;

		if (done == rw.len)
			break;
		if (pos >= cur + len) {
			cur += len;
			continue;
		}
		n = min(rw.len - done, cur + len - pos);
		phys = sg_dma_address(sg) + (pos - cur);
		if (region_intersects(phys, n, IORESOURCE_SYSTEM_RAM,
				      IORES_DESC_NONE) != REGION_INTERSECTS) {
			err = -EOPNOTSUPP;
			break;
		}
		p = memremap(phys, n, MEMREMAP_WB);
		if (!p) {
			err = -ENOMEM;
			break;
		}
		if (write)
			memcpy(p, bounce + done, n);
		else
			memcpy(bounce + done, p, n);
		memunmap(p);
		done += n;
		cur += len;
	}
	if (!err && done < rw.len)
		err = -EINVAL;
out_unlock:
	dma_resv_unlock(imp->dmabuf->resv);
	if (!err && !write &&
	    copy_to_user(u64_to_user_ptr(rw.buf), bounce, rw.len))
		err = -EFAULT;
out_free:
	kvfree(bounce);
	return err;
}

static int tdb_open(struct inode *inode, struct file *file)
{
	struct tdb_imp *imp = kzalloc(sizeof(*imp), GFP_KERNEL);

	if (!imp)
		return -ENOMEM;
	mutex_init(&imp->lock);
	file->private_data = imp;
	return 0;
}

static int tdb_file_release(struct inode *inode, struct file *file)
{
	struct tdb_imp *imp = file->private_data;

	mutex_lock(&imp->lock);
	tdb_imp_drop(imp);
	mutex_unlock(&imp->lock);
	mutex_destroy(&imp->lock);
	kfree(imp);
	return 0;
}

static long tdb_imp_ioctl(struct tdb_imp *imp, unsigned int cmd,
			  void __user *uarg)
{
	long err;

	mutex_lock(&imp->lock);
	switch (cmd) {
	case REMU_TDB_IMPORT:
		err = tdb_import(imp, uarg);
		break;
	case REMU_TDB_IMPORT_INFO:
		err = tdb_import_info(imp, uarg);
		break;
	case REMU_TDB_IMPORT_MAP:
		err = tdb_import_remap(imp);
		break;
	case REMU_TDB_IMPORT_READ:
		err = tdb_import_rw(imp, uarg, false);
		break;
	case REMU_TDB_IMPORT_WRITE:
		err = tdb_import_rw(imp, uarg, true);
		break;
	default:	/* REMU_TDB_IMPORT_DROP */
		tdb_imp_drop(imp);
		err = 0;
		break;
	}
	mutex_unlock(&imp->lock);
	return err;
}

static long tdb_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case REMU_TDB_CREATE:
		return tdb_create(uarg);
	case REMU_TDB_READ:
		return tdb_rw(uarg, false);
	case REMU_TDB_WRITE:
		return tdb_rw(uarg, true);
	case REMU_TDB_MOVE:
		return tdb_move(uarg);
	case REMU_TDB_EVICT:
		return tdb_evict(uarg);
	case REMU_TDB_INFO:
		return tdb_info(uarg);
	case REMU_TDB_REVOKE:
		return tdb_revoke(uarg);
	case REMU_TDB_IMPORT:
	case REMU_TDB_IMPORT_INFO:
	case REMU_TDB_IMPORT_MAP:
	case REMU_TDB_IMPORT_READ:
	case REMU_TDB_IMPORT_WRITE:
	case REMU_TDB_IMPORT_DROP:
		return tdb_imp_ioctl(file->private_data, cmd, uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations tdb_fops = {
	.owner = THIS_MODULE,
	.open = tdb_open,
	.release = tdb_file_release,
	.unlocked_ioctl = tdb_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice tdb_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = REMU_TDB_DEVNAME,
	.fops = &tdb_fops,
	.mode = 0600,
};

static void tdb_imp_dev_release(struct device *dev)
{
	kfree(dev);
}

/* a device for the test importer: never added; a 64-bit mask or none */
static struct device *tdb_imp_dev_new(const char *name, bool mask)
{
	struct device *dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	int err;

	if (!dev)
		return ERR_PTR(-ENOMEM);
	device_initialize(dev);
	dev->release = tdb_imp_dev_release;
	err = dev_set_name(dev, "%s", name);
	if (!err && mask)
		err = dma_coerce_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (err) {
		put_device(dev);
		return ERR_PTR(err);
	}
	return dev;
}

static int tdb_imp_dev_init(void)
{
	tdb_imp_dev = tdb_imp_dev_new("remu-tdb-importer", true);
	if (IS_ERR(tdb_imp_dev))
		return PTR_ERR(tdb_imp_dev);
	tdb_imp_nomask_dev = tdb_imp_dev_new("remu-tdb-importer-nomask",
					     false);
	if (IS_ERR(tdb_imp_nomask_dev)) {
		put_device(tdb_imp_dev);
		return PTR_ERR(tdb_imp_nomask_dev);
	}
	return 0;
}

static void tdb_imp_dev_fini(void)
{
	put_device(tdb_imp_nomask_dev);
	put_device(tdb_imp_dev);
}

static int __init tdb_init(void)
{
	int err;

	err = tdb_imp_dev_init();
	if (err)
		return err;
	tdb_wq = alloc_workqueue("remu_test_dmabuf", WQ_UNBOUND, 0);
	if (!tdb_wq) {
		err = -ENOMEM;
		goto err_dev;
	}
	tdb_fence_context = dma_fence_context_alloc(1);
	err = misc_register(&tdb_misc);
	if (err)
		goto err_wq;
	return 0;

err_wq:
	destroy_workqueue(tdb_wq);
err_dev:
	tdb_imp_dev_fini();
	return err;
}

static void __exit tdb_exit(void)
{
	misc_deregister(&tdb_misc);
	/* every buffer holds a module reference: no move is pending */
	destroy_workqueue(tdb_wq);
	/* every importer went with its file */
	tdb_imp_dev_fini();
}

module_init(tdb_init);
module_exit(tdb_exit);
MODULE_DESCRIPTION("remu selftest: dma-buf exporter that moves and revokes its buffers, and a test importer");
MODULE_LICENSE("GPL");
