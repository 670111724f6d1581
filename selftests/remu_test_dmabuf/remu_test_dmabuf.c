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
 * Loaded and unloaded by selftests/run_tests.sh around remu_dmabuf_test
 * only; never part of a remu installation.
 *
 * Locking: all of a buffer's state is under its dma-buf's reservation lock
 * (the dma-buf core calls pin, map and vmap with it held).  User copies are
 * made outside it, through a bounce buffer.
 */
#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/fs.h>
#include <linux/highmem.h>
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
 * @pins:	pin count
 * @moves, @evictions, @vmaps: statistics for REMU_TDB_INFO
 */
struct tdb_buf {
	struct dma_buf *dmabuf;
	unsigned int npages;
	struct page **pages;
	void *swap;
	void *vaddr;
	unsigned int pins;
	u64 moves;
	u64 evictions;
	u64 vmaps;
};

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

static const struct dma_buf_ops tdb_ops, tdb_ops_novmap;

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
	int err = tdb_populate(buf);

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

	err = tdb_populate(buf);
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
	dma_unmap_sgtable(attach->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
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
	if (dmabuf->ops != &tdb_ops && dmabuf->ops != &tdb_ops_novmap) {
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
	    c.flags & ~(REMU_TDB_RDONLY | REMU_TDB_NO_VMAP))
		return -EINVAL;
	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	buf->npages = DIV_ROUND_UP(c.size, PAGE_SIZE);
	buf->pages = tdb_alloc_pages(buf->npages);
	if (!buf->pages) {
		kfree(buf);
		return -ENOMEM;
	}
	exp.ops = c.flags & REMU_TDB_NO_VMAP ? &tdb_ops_novmap : &tdb_ops;
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
	if (!buf->vaddr)
		return 0;
	pr_err("%s: an importer kept its CPU mapping across move_notify; %s refused\n",
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
	list_for_each_entry(a, &buf->dmabuf->attachments, node)
		info.attachments++;
	dma_resv_unlock(buf->dmabuf->resv);
	dma_buf_put(buf->dmabuf);
	return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
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
	default:
		return -ENOTTY;
	}
}

static const struct file_operations tdb_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = tdb_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice tdb_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = REMU_TDB_DEVNAME,
	.fops = &tdb_fops,
	.mode = 0600,
};

static int __init tdb_init(void)
{
	int err;

	tdb_wq = alloc_workqueue("remu_test_dmabuf", WQ_UNBOUND, 0);
	if (!tdb_wq)
		return -ENOMEM;
	tdb_fence_context = dma_fence_context_alloc(1);
	err = misc_register(&tdb_misc);
	if (err)
		destroy_workqueue(tdb_wq);
	return err;
}

static void __exit tdb_exit(void)
{
	misc_deregister(&tdb_misc);
	/* every buffer holds a module reference: no move is pending */
	destroy_workqueue(tdb_wq);
}

module_init(tdb_init);
module_exit(tdb_exit);
MODULE_DESCRIPTION("remu selftest: dma-buf exporter that moves its buffers");
MODULE_LICENSE("GPL");
