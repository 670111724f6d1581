// SPDX-License-Identifier: GPL-2.0
/*
 * remu_mr.c - memory regions and the MR access layer (remu's software MMU;
 * the contract, errnos and lifetime rules are in remu_mr.h).
 *
 * Owns: the per-device key table (struct remu_mr_table; memory windows
 * share its index space), the MR verbs (get_dma_mr, reg_user_mr,
 * alloc_mr, map_mr_sg, dereg_mr, reg_dm_mr), fast registration and
 * invalidation for the engines, and every access to MR memory: lookup,
 * check, copies to and from buffers and skbs, page frags, atomics, FLUSH
 * and SGE lists.  The KERNEL, UMEM and FAST_REG backings are here; ODP,
 * DM, dma-buf and indirect keys plug in through their backing ops
 * (remu_odp.c, remu_dm.c, remu_dmabuf.c, remu_mkey.c).
 *
 * Locking: xa_lock for inserting and erasing keys, RCU for lookups; MR
 * lifetime by refcount and a completion; state transitions by cmpxchg
 * (FREE <-> VALID) and xchg (ZOMBIE); rdev->mrs.atomic_lock around an
 * atomic's read-modify-write only, never across ->map() or a copy.
 */
#include <linux/highmem.h>
#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/libnvdimm.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_umem.h>

#include "remu.h"
#include "remu_trace.h"

/* consecutive -EAGAIN answers without progress before giving up */
#define REMU_MR_MAX_RETRIES	16

static bool remu_mr_in_bounds(const struct remu_mr *mr, u64 iova, u64 len)
{
	u64 off;

	if (!len)
		return true;
	if (iova < mr->iova)
		return false;
	off = iova - mr->iova;
	return off <= mr->length && len <= mr->length - off;
}

/*
 * Access flags as the verbs spec wants them (also for kernel callers).
 * IB_ACCESS_FLUSH_GLOBAL is fine for any memory (the CPU places every
 * byte, so a barrier makes it visible); IB_ACCESS_FLUSH_PERSISTENT only
 * for memory that is persistent, which only pinned user pages can show to
 * be (remu_reg_user_mr() checks them and strips the flag before calling
 * this): anything else is refused with -EINVAL, as rxe does.
 */
static int remu_mr_check_access(unsigned int access)
{
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IB_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & ~IB_ACCESS_SUPPORTED)
		return -EINVAL;
	if (access & IB_ACCESS_FLUSH_PERSISTENT)
		return -EINVAL;
	/* ODP only through reg_user_mr (remu_odp.c) */
	if (access & IB_ACCESS_ON_DEMAND)
		return -EOPNOTSUPP;
	return 0;
}

/* @page is persistent memory (pmem): FLUSH_PERSISTENT can be honoured */
static bool remu_page_is_pmem(struct page *page)
{
	return region_intersects(page_to_phys(page), PAGE_SIZE, IORESOURCE_MEM,
				 IORES_DESC_PERSISTENT_MEMORY) ==
	       REGION_INTERSECTS;
}

/* ---- backings ---- */

/* KERNEL: iova 0, so the offset is the kernel (linear map) address. */
static int remu_kernel_map(struct remu_mr *mr, u64 off, u64 len, bool write,
			   struct remu_mr_seg *seg)
{
	void *kaddr = (void *)(uintptr_t)off;

	if (!virt_addr_valid(kaddr))
		return -EFAULT;
	seg->kaddr = kaddr;
	seg->len = min_t(u64, len, PAGE_SIZE - offset_in_page(kaddr));
	return 0;
}

static const struct remu_mr_backing_ops remu_kernel_ops = {
	.map = remu_kernel_map,
};

/* UMEM: one struct page per PAGE_SIZE, the MR starting at page_off. */
static int remu_umem_map(struct remu_mr *mr, u64 off, u64 len, bool write,
			 struct remu_mr_seg *seg)
{
	u64 pos = mr->page_off + off;
	u64 idx = pos >> PAGE_SHIFT;

	if (idx >= mr->npages || (write && !mr->umem->writable))
		return -EFAULT;
	seg->page = mr->pages[idx];
	seg->offset = pos & ~PAGE_MASK;
	seg->len = min_t(u64, len, PAGE_SIZE - seg->offset);
	return 0;
}

static void remu_umem_release(struct remu_mr *mr)
{
	atomic64_sub(mr->npages, &mr->rdev->mrs.pages_pinned);
	kvfree(mr->pages);
	ib_umem_release(mr->umem);
}

static const struct remu_mr_backing_ops remu_umem_ops = {
	.map = remu_umem_map,
	.release = remu_umem_release,
};

/*
 * FAST_REG: blocks of 1 << fr_shift bytes at kernel addresses (remu uses
 * virtual DMA, so map_mr_sg hands it kernel addresses).
 */
static int remu_fr_map(struct remu_mr *mr, u64 off, u64 len, bool write,
		       struct remu_mr_seg *seg)
{
	u64 pos = mr->page_off + off;
	u64 idx = pos >> mr->fr_shift;
	u64 in_block = pos & ((1ULL << mr->fr_shift) - 1);
	void *kaddr;

	if (idx >= mr->npages)
		return -EFAULT;
	kaddr = (void *)(uintptr_t)(mr->fr_addrs[idx] + in_block);
	seg->kaddr = kaddr;
	seg->len = min_t(u64, len, (1ULL << mr->fr_shift) - in_block);
	seg->len = min_t(u64, seg->len, PAGE_SIZE - offset_in_page(kaddr));
	return 0;
}

static void remu_fr_release(struct remu_mr *mr)
{
	kfree(mr->fr_ends);
	kfree(mr->fr_addrs);
}

static const struct remu_mr_backing_ops remu_fr_ops = {
	.map = remu_fr_map,
	.release = remu_fr_release,
};

/*
 * FAST_REG of type IB_MR_TYPE_SG_GAPS: entry i holds the bytes
 * [fr_ends[i - 1], fr_ends[i]) of the MR (fr_ends[-1] being 0) at kernel
 * address fr_addrs[i]; entries have any address and length.
 */
static int remu_fr_gaps_map(struct remu_mr *mr, u64 off, u64 len, bool write,
			    struct remu_mr_seg *seg)
{
	u32 lo = 0, hi = mr->npages;
	u64 start, n;
	void *kaddr;

	/* the first entry that ends after @off */
	while (lo < hi) {
		u32 mid = lo + (hi - lo) / 2;

		if (mr->fr_ends[mid] > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo >= mr->npages)
		return -EFAULT;
	start = lo ? mr->fr_ends[lo - 1] : 0;
	kaddr = (void *)(uintptr_t)(mr->fr_addrs[lo] + (off - start));
	n = min(len, mr->fr_ends[lo] - off);
	seg->kaddr = kaddr;
	seg->len = min_t(u64, n, PAGE_SIZE - offset_in_page(kaddr));
	return 0;
}

static const struct remu_mr_backing_ops remu_fr_gaps_ops = {
	.map = remu_fr_gaps_map,
	.release = remu_fr_release,
};

/* bytes a fast-reg MR's current mapping covers from its first iova on */
static u64 remu_fr_span(const struct remu_mr *mr)
{
	u64 span;

	if (mr->fr_ends)
		return mr->npages ? mr->fr_ends[mr->npages - 1] : 0;
	span = (u64)mr->npages << mr->fr_shift;
	return mr->page_off > span ? 0 : span - mr->page_off;
}

/*
 * Map the segment at MR offset @off, faulting in a missing translation
 * (-EAGAIN from the backing) as often as the backing asks, within reason.
 */
int remu_mr_map_seg_depth(struct remu_mr *mr, u64 off, u64 len, bool write,
			  struct remu_mr_seg *seg, unsigned int depth)
{
	int tries = 0;
	int err;

	if (mr->kind == REMU_MR_INDIRECT)
		return remu_mkey_map(mr, off, len, write, seg, depth);
	for (;;) {
		memset(seg, 0, sizeof(*seg));
		err = mr->ops->map(mr, off, len, write, seg);
		if (err != -EAGAIN)
			return err;
		if (!mr->ops->fault || ++tries > REMU_MR_MAX_RETRIES)
			return -EFAULT;
		err = mr->ops->fault(mr, off, len, write);
		if (err)
			return err == -EAGAIN ? -EFAULT : err;
	}
}

static int remu_mr_map_seg(struct remu_mr *mr, u64 off, u64 len, bool write,
			   struct remu_mr_seg *seg)
{
	return remu_mr_map_seg_depth(mr, off, len, write, seg, 0);
}

void remu_mr_unmap_seg(struct remu_mr *mr, struct remu_mr_seg *seg)
{
	if (mr->kind == REMU_MR_INDIRECT)
		remu_mkey_unmap(seg);
	else if (mr->ops->unmap)
		mr->ops->unmap(mr, seg);
}

/* Copies one mapped piece; @done is how far the walk has come. */
typedef int (*remu_seg_fn)(void *kaddr, unsigned int n, u64 done, bool write,
			   void *arg);

/*
 * An I/O memory segment: @fn works on a bounce buffer, a piece at a time,
 * filled from (reads) or written to (writes) the segment with the io
 * accessors, which is all such memory may be touched with.
 */
static int remu_seg_io(void __iomem *io, unsigned int n, u64 done,
		       bool write, remu_seg_fn fn, void *arg)
{
	u8 bounce[256];
	unsigned int pos, c;
	int err;

	for (pos = 0; pos < n; pos += c) {
		c = min_t(unsigned int, n - pos, sizeof(bounce));
		if (!write)
			memcpy_fromio(bounce, io + pos, c);
		err = fn(bounce, c, done + pos, write, arg);
		if (err)
			return err;
		if (write)
			memcpy_toio(io + pos, bounce, c);
	}
	return 0;
}

/*
 * The one loop every copy goes through: bounds, then segment by segment
 * map (with fault-and-retry), kmap, copy, unmap.
 */
static int remu_mr_walk(struct remu_mr *mr, u64 iova, u64 len, bool write,
			remu_seg_fn fn, void *arg)
{
	u64 off, done = 0;
	int err;

	might_sleep();
	if (!remu_mr_in_bounds(mr, iova, len))
		return -ERANGE;
	off = iova - mr->iova;
	while (done < len) {
		struct remu_mr_seg seg;
		void *kaddr;

		err = remu_mr_map_seg(mr, off + done, len - done, write, &seg);
		if (err)
			return err;
		if (seg.iomem) {
			err = remu_seg_io(seg.iomem, seg.len, done, write, fn,
					  arg);
			remu_mr_unmap_seg(mr, &seg);
			if (err)
				return err;
			done += seg.len;
			cond_resched();
			continue;
		}
		if (seg.page)
			kaddr = kmap_local_page(seg.page) + seg.offset;
		else
			kaddr = seg.kaddr;
		err = fn(kaddr, seg.len, done, write, arg);
		if (seg.page) {
			if (write)
				flush_dcache_page(seg.page);
			kunmap_local(kaddr);
		}
		remu_mr_unmap_seg(mr, &seg);
		if (err)
			return err;
		done += seg.len;
		cond_resched();
	}
	return 0;
}

static int remu_seg_buf(void *kaddr, unsigned int n, u64 done, bool write,
			void *arg)
{
	u8 *buf = arg;

	if (write)
		memcpy(kaddr, buf + done, n);
	else
		memcpy(buf + done, kaddr, n);
	return 0;
}

struct remu_skb_pos {
	struct sk_buff *skb;
	int off;
};

static int remu_seg_skb(void *kaddr, unsigned int n, u64 done, bool write,
			void *arg)
{
	struct remu_skb_pos *p = arg;
	struct remu_zc *zc;
	int err;

	if (!write)
		return skb_store_bits(p->skb, p->off + (int)done, kaddr, n) ?
		       -EFAULT : 0;
	/*
	 * Another MR's memory by reference is read only inside a section
	 * of its zc: never once that MR was deregistered (remu_zc.c)
	 */
	err = remu_zc_begin(p->skb, &zc);
	if (err)
		return err;
	err = skb_copy_bits(p->skb, p->off + (int)done, kaddr, n);
	remu_zc_end(zc);
	return err ? -EFAULT : 0;
}

/* ---- the access layer ---- */

struct remu_mr *remu_mr_lookup(struct remu_dev *rdev, u32 key,
			       enum remu_key_kind kind)
{
	struct remu_mr *mr, *seen;

	rcu_read_lock();
	mr = xa_load(&rdev->mrs.xa, remu_key_index(key));
	/*
	 * acquire: pairs with the cmpxchg() to VALID in remu_mr_fast_reg()
	 * and remu_mkey_umr_one() (the range and rights are seen with it);
	 * other MRs are VALID before xa_store() publishes them
	 */
	while (mr && (smp_load_acquire(&mr->state) != REMU_MR_VALID ||
		      READ_ONCE(mr->key) != key ||
		      !refcount_inc_not_zero(&mr->refs))) {
		/*
		 * A re-registration puts its new MR under the key before the
		 * old one becomes a ZOMBIE (remu_mr_replace()): look again,
		 * and give up when the index still names the same MR.
		 */
		seen = mr;
		mr = xa_load(&rdev->mrs.xa, remu_key_index(key));
		if (mr == seen)
			mr = NULL;
	}
	rcu_read_unlock();
	return mr;
}
EXPORT_SYMBOL_NS_GPL(remu_mr_lookup, REMU_TEST_NS);

void remu_mr_put(struct remu_mr *mr)
{
	if (refcount_dec_and_test(&mr->refs))
		complete(&mr->done);
}
EXPORT_SYMBOL_NS_GPL(remu_mr_put, REMU_TEST_NS);

int remu_mr_check_depth(struct remu_mr *mr, struct remu_pd *pd, u64 iova,
			u64 len, unsigned int access, unsigned int depth)
{
	if (pd && mr->pd != pd)
		return -EPERM;
	if (!remu_mr_in_bounds(mr, iova, len))
		return -ERANGE;
	if (access & ~READ_ONCE(mr->access))
		return -EACCES;
	/* an indirect key: each piece's MR must allow it too */
	if (mr->kind == REMU_MR_INDIRECT)
		return remu_mkey_check(mr, pd, iova, len, access, depth);
	return 0;
}

int remu_mr_check(struct remu_mr *mr, struct remu_pd *pd, u64 iova, u64 len,
		  unsigned int access)
{
	return remu_mr_check_depth(mr, pd, iova, len, access, 0);
}
EXPORT_SYMBOL_NS_GPL(remu_mr_check, REMU_TEST_NS);

int remu_mr_copy(struct remu_mr *mr, u64 iova, void *buf, u64 len,
		 enum remu_copy_dir dir)
{
	return remu_mr_walk(mr, iova, len, dir == REMU_TO_MR, remu_seg_buf,
			    buf);
}
EXPORT_SYMBOL_NS_GPL(remu_mr_copy, REMU_TEST_NS);

int remu_mr_copy_skb(struct remu_mr *mr, u64 iova, struct sk_buff *skb,
		     int skb_off, u64 len, enum remu_copy_dir dir)
{
	struct remu_skb_pos pos = { .skb = skb, .off = skb_off };

	if (skb_off < 0 || len > skb->len || skb_off > skb->len - len)
		return -EFAULT;
	return remu_mr_walk(mr, iova, len, dir == REMU_TO_MR, remu_seg_skb,
			    &pos);
}
EXPORT_SYMBOL_NS_GPL(remu_mr_copy_skb, REMU_TEST_NS);

/*
 * Backings whose pages may go into a packet by reference: ordinary
 * process memory with struct pages.  UMEM pages are pinned for the MR's
 * life; an ODP page is referenced under the umem_mutex that ->map()
 * holds, so an invalidation cannot take it away in between.  Kernel and
 * fast-reg MRs (their memory may be slab), device memory, dma-buf and
 * indirect keys are always copied.
 */
static bool remu_mr_can_frag(const struct remu_mr *mr)
{
	return mr->kind == REMU_MR_UMEM || mr->kind == REMU_MR_ODP;
}

int remu_mr_frag_skb(struct remu_mr *mr, u64 iova, struct sk_buff *skb,
		     u64 len)
{
	struct skb_shared_info *sh = skb_shinfo(skb);
	struct remu_zc *zc;
	u64 off, done = 0;
	int err;

	might_sleep();
	if (!remu_mr_can_frag(mr))
		return -EOPNOTSUPP;
	if (!remu_mr_in_bounds(mr, iova, len))
		return -ERANGE;
	/* the MR's zc, taken before any page is mapped (remu_zc_get()) */
	zc = remu_zc_get(mr);
	if (!zc)
		return -EOPNOTSUPP;
	err = remu_zc_attach(skb, zc);
	if (err)
		return err;
	off = iova - mr->iova;
	while (done < len) {
		struct remu_mr_seg seg;
		int i = sh->nr_frags;

		err = remu_mr_map_seg(mr, off + done, len - done, false, &seg);
		if (err)
			return err;
		if (!seg.page) {
			err = -EOPNOTSUPP;
		} else if (i && skb_can_coalesce(skb, i, seg.page,
						 seg.offset)) {
			skb_frag_size_add(&sh->frags[i - 1], seg.len);
		} else if (i >= REMU_FRAG_MAX) {
			err = -E2BIG;
		} else {
			/* under ->map(): the page cannot go away meanwhile */
			get_page(seg.page);
			skb_fill_page_desc(skb, i, seg.page, seg.offset,
					   seg.len);
		}
		remu_mr_unmap_seg(mr, &seg);
		if (err)
			return err;
		skb->len += seg.len;
		skb->data_len += seg.len;
		skb->truesize += seg.len;
		done += seg.len;
	}
	return 0;
}

/*
 * remu_mr_atomic() on I/O memory: the operand is read and written with
 * 64-bit io accessors under the device's atomic lock, so it is atomic
 * with respect to every other remu atomic, as on ordinary memory.
 */
static int remu_mr_atomic_io(struct remu_mr *mr, struct remu_mr_seg *seg,
			     enum remu_atomic_op op, u64 a, u64 b, u64 *orig)
{
	spinlock_t *lock = &mr->rdev->mrs.atomic_lock;
	u64 old;

	if (seg->len < sizeof(u64) || !IS_ALIGNED((uintptr_t)seg->iomem, 8))
		return -EINVAL;
	spin_lock_bh(lock);
	old = readq(seg->iomem);
	if (op == REMU_ATOMIC_FETCH_ADD)
		writeq(old + a, seg->iomem);
	else if (op == REMU_ATOMIC_CMP_SWP && old == a)
		writeq(b, seg->iomem);
	else if (op == REMU_ATOMIC_WRITE)
		writeq(a, seg->iomem);
	spin_unlock_bh(lock);
	*orig = old;
	return 0;
}

int remu_mr_atomic(struct remu_mr *mr, u64 iova, enum remu_atomic_op op,
		   u64 a, u64 b, u64 *orig)
{
	spinlock_t *lock = &mr->rdev->mrs.atomic_lock;
	struct remu_mr_seg seg;
	void *kaddr;
	u64 *p, old;
	int err;

	might_sleep();
	if (iova & 7)
		return -EINVAL;
	if (!remu_mr_in_bounds(mr, iova, sizeof(u64)))
		return -ERANGE;
	err = remu_mr_map_seg(mr, iova - mr->iova, sizeof(u64), true, &seg);
	if (err)
		return err;
	if (seg.iomem) {
		err = remu_mr_atomic_io(mr, &seg, op, a, b, orig);
		remu_mr_unmap_seg(mr, &seg);
		return err;
	}
	kaddr = seg.page ? kmap_local_page(seg.page) + seg.offset : seg.kaddr;
	/*
	 * The core makes a user MR's iova agree with its address within the
	 * page, so an aligned iova is aligned memory; a fast-reg MR mapped
	 * at an odd offset may not be: refuse rather than tear the operand.
	 */
	if (seg.len < sizeof(u64) || !IS_ALIGNED((uintptr_t)kaddr, 8)) {
		err = -EINVAL;
		goto out;
	}
	p = kaddr;
	spin_lock_bh(lock);
	old = READ_ONCE(*p);
	switch (op) {
	case REMU_ATOMIC_FETCH_ADD:
		WRITE_ONCE(*p, old + a);
		break;
	case REMU_ATOMIC_CMP_SWP:
		if (old == a)
			WRITE_ONCE(*p, b);
		break;
	case REMU_ATOMIC_WRITE:
		WRITE_ONCE(*p, a);
		break;
	}
	spin_unlock_bh(lock);
	*orig = old;
out:
	if (seg.page) {
		flush_dcache_page(seg.page);
		kunmap_local(kaddr);
	}
	remu_mr_unmap_seg(mr, &seg);
	return err;
}
EXPORT_SYMBOL_NS_GPL(remu_mr_atomic, REMU_TEST_NS);

static int remu_seg_wb_pmem(void *kaddr, unsigned int n, u64 done,
			    bool write, void *arg)
{
	arch_wb_cache_pmem(kaddr, n);
	return 0;
}

int remu_mr_flush(struct remu_mr *mr, u64 iova, u64 len, bool persistent)
{
	int err = 0;

	/*
	 * Every byte was placed by a CPU store; once those are ordered
	 * before the response, they are visible to every agent.  Persistent
	 * memory also needs its cache lines written back (the MR's pages
	 * were checked to be pmem when it was registered).
	 */
	if (persistent)
		err = remu_mr_walk(mr, iova, len, false, remu_seg_wb_pmem,
				   NULL);
	/*
	 * every placement before the response that reports it; the other
	 * side is the requester completing the FLUSH (its CQE's release),
	 * after which the consumer reads the memory
	 */
	smp_mb();
	return err;
}

/* what remu_sge_walk() does with each SGE's piece (@done bytes before it) */
struct remu_sge_op {
	int (*fn)(struct remu_mr *mr, u64 iova, u64 len, u64 done,
		  const struct remu_sge_op *op);
	void *buf;
	struct sk_buff *skb;
	int skb_off;
	enum remu_copy_dir dir;
};

/* the one loop over an SGE list: lookup, check, then @op on each piece */
static int remu_sge_walk(const struct remu_sgl *sgl, u64 offset, u64 len,
			 const struct remu_sge_op *op)
{
	u64 done = 0;
	int i, err;

	for (i = 0; i < sgl->num && len; i++) {
		const struct remu_sge *sge = &sgl->sges[i];
		struct remu_mr *mr;
		u64 iova, here;

		if (offset >= sge->length) {
			offset -= sge->length;
			continue;
		}
		here = min_t(u64, len, sge->length - offset);
		if (check_add_overflow(sge->addr, offset, &iova))
			return -ERANGE;
		mr = remu_mr_lookup(sgl->rdev, sge->lkey, REMU_LKEY);
		if (!mr)
			return -ENOENT;
		err = remu_mr_check(mr, sgl->pd, iova, here, sgl->access);
		if (!err)
			err = op->fn(mr, iova, here, done, op);
		remu_mr_put(mr);
		if (err)
			return err;
		done += here;
		len -= here;
		offset = 0;
	}
	return len ? -EMSGSIZE : 0;
}

static int remu_sge_op_buf(struct remu_mr *mr, u64 iova, u64 len, u64 done,
			   const struct remu_sge_op *op)
{
	return remu_mr_copy(mr, iova, (u8 *)op->buf + done, len, op->dir);
}

int remu_sge_copy(const struct remu_sgl *sgl, u64 offset, void *buf, u64 len,
		  enum remu_copy_dir dir)
{
	struct remu_sge_op op = {
		.fn = remu_sge_op_buf, .buf = buf, .dir = dir,
	};

	return remu_sge_walk(sgl, offset, len, &op);
}
EXPORT_SYMBOL_NS_GPL(remu_sge_copy, REMU_TEST_NS);

static int remu_sge_op_skb(struct remu_mr *mr, u64 iova, u64 len, u64 done,
			   const struct remu_sge_op *op)
{
	return remu_mr_copy_skb(mr, iova, op->skb, op->skb_off + (int)done,
				len, op->dir);
}

int remu_sge_copy_skb(const struct remu_sgl *sgl, u64 offset,
		      struct sk_buff *skb, int skb_off, u64 len,
		      enum remu_copy_dir dir)
{
	struct remu_sge_op op = {
		.fn = remu_sge_op_skb, .skb = skb, .skb_off = skb_off,
		.dir = dir,
	};

	if (skb_off < 0 || len > skb->len || skb_off > skb->len - len)
		return -EFAULT;
	return remu_sge_walk(sgl, offset, len, &op);
}

static int remu_sge_op_frag(struct remu_mr *mr, u64 iova, u64 len, u64 done,
			    const struct remu_sge_op *op)
{
	return remu_mr_frag_skb(mr, iova, op->skb, len);
}

int remu_sge_frag_skb(const struct remu_sgl *sgl, u64 offset,
		      struct sk_buff *skb, u64 len)
{
	struct remu_sge_op op = { .fn = remu_sge_op_frag, .skb = skb };

	return remu_sge_walk(sgl, offset, len, &op);
}

int remu_mr_user_va(struct remu_mr *mr, u64 iova, u64 *va)
{
	if (mr->kind != REMU_MR_UMEM && mr->kind != REMU_MR_ODP)
		return -EOPNOTSUPP;
	/* an implicit ODP MR's root umem starts at address 0 == iova 0 */
	*va = mr->umem->address + (iova - mr->iova);
	return 0;
}

int remu_mr_fast_reg(struct remu_mr *mr, u32 key, unsigned int access,
		     u64 iova, u64 length)
{
	u64 span, end;

	if (mr->kind != REMU_MR_FAST_REG ||
	    remu_key_index(key) != remu_key_index(mr->key) ||
	    READ_ONCE(mr->state) != REMU_MR_FREE ||
	    remu_mr_check_access(access) ||
	    check_add_overflow(iova, length, &end))
		return -EINVAL;
	span = remu_fr_span(mr);
	if (length > span)
		return -EINVAL;

	mr->iova = iova;
	mr->length = length;
	WRITE_ONCE(mr->access, access);
	WRITE_ONCE(mr->key, key);
	/* a new registration, even under the key of before */
	WRITE_ONCE(mr->gen, remu_mrs_gen(&mr->rdev->mrs));
	/* full barrier: the above is visible before the MR is VALID */
	if (cmpxchg(&mr->state, REMU_MR_FREE, REMU_MR_VALID) != REMU_MR_FREE)
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(remu_mr_fast_reg, REMU_TEST_NS);

int remu_mr_invalidate(struct remu_dev *rdev, struct remu_pd *pd, u32 key)
{
	struct remu_mr *mr;
	int err = 0;

	rcu_read_lock();
	mr = xa_load(&rdev->mrs.xa, remu_key_index(key));
	if (!mr || READ_ONCE(mr->key) != key)
		err = -EINVAL;
	else if (mr->kind != REMU_MR_FAST_REG && mr->kind != REMU_MR_INDIRECT)
		err = -EACCES;
	else if (mr->pd != pd)
		err = -EPERM;
	else if (atomic_read(&mr->num_mw))
		err = -EBUSY;
	else if (cmpxchg(&mr->state, REMU_MR_VALID, REMU_MR_FREE) ==
		 REMU_MR_ZOMBIE)
		err = -EINVAL;
	rcu_read_unlock();
	return err;
}
EXPORT_SYMBOL_NS_GPL(remu_mr_invalidate, REMU_TEST_NS);

struct remu_dev *remu_dev_of(struct ib_device *ibdev)
{
	if (ibdev->ops.dealloc_driver != remu_dealloc_driver)
		return NULL;
	return to_remu_dev(ibdev);
}
EXPORT_SYMBOL_NS_GPL(remu_dev_of, REMU_TEST_NS);

/* ---- key table ---- */

struct remu_mr *remu_mr_new(struct ib_pd *ibpd, enum remu_mr_kind kind,
			    const struct remu_mr_backing_ops *ops)
{
	struct remu_mr *mr = kzalloc(sizeof(*mr), GFP_KERNEL);

	if (!mr)
		return NULL;
	mr->rdev = to_remu_dev(ibpd->device);
	mr->pd = to_remu_pd(ibpd);
	mr->kind = kind;
	mr->ops = ops;
	/* before the MR is published (remu_eng_inline_ok()) */
	if (ops && ops->fault && !mr->pd->may_fault)
		WRITE_ONCE(mr->pd->may_fault, true);
	mr->state = REMU_MR_FREE;
	refcount_set(&mr->refs, 1);
	init_completion(&mr->done);
	mutex_init(&mr->zc_lock);
	return mr;
}

/* An MR that never got a key: release its backing and free it. */
void remu_mr_discard(struct remu_mr *mr)
{
	if (mr->ops->release)
		mr->ops->release(mr);
	kfree(mr);
}

/*
 * Give @mr a key and make it reachable.  Its state (VALID, or FREE for
 * fast-reg MRs) and backing are complete before xa_store publishes it.
 * Return: its ib_mr, or an ERR_PTR once @mr is discarded (no key left).
 */
struct ib_mr *remu_mr_publish(struct remu_mr *mr)
{
	struct remu_mr_table *t = &mr->rdev->mrs;
	u32 index;
	int err;

	if (atomic_inc_return(&t->count) > mr->rdev->attr.max_mr) {
		err = -ENOMEM;
		goto err_count;
	}
	/* reserve the index first: the key needs it */
	err = xa_alloc_cyclic(&t->xa, &index, NULL,
			      XA_LIMIT(1, REMU_KEY_INDEX_MAX), &t->next_index,
			      GFP_KERNEL);
	if (err < 0)
		goto err_count;
	mr->key = remu_key_new(index);
	mr->ib_mr.lkey = mr->key;
	mr->ib_mr.rkey = mr->key;
	/*
	 * The range as registered, which the core's QUERY_MR returns
	 * (ibv_import_mr()): the core sets it after REG_MR, not for a DM
	 * or dma-buf MR.  A kernel or fast-reg MR's is the core's and
	 * map_mr_sg's.
	 */
	if (mr->kind != REMU_MR_KERNEL && mr->kind != REMU_MR_FAST_REG) {
		mr->ib_mr.iova = mr->iova;
		mr->ib_mr.length = mr->length;
	}
	mr->gen = remu_mrs_gen(t);
	err = xa_err(xa_store(&t->xa, index, mr, GFP_KERNEL));
	if (err) {
		xa_erase(&t->xa, index);
		goto err_count;
	}
	remu_obj_get(REMU_OBJ_MR);
	trace_remu_mr_reg(mr);
	return &mr->ib_mr;

err_count:
	atomic_dec(&t->count);
	remu_mr_discard(mr);
	return ERR_PTR(err);
}

/**
 * remu_mr_replace - @new takes @old's key (ibv_rereg_mr keeps the keys)
 * @old:	a published user MR; the core holds its uobject for writing
 * @new:	a published MR, made by a fresh registration, under its own key
 *
 * Under xa_lock @new moves to @old's index with @old's key, then @old
 * becomes a ZOMBIE: a lookup of the key at any moment finds one of the
 * two (remu_mr_lookup() looks again when it meets the ZOMBIE).  @new's
 * own index is freed.  @old keeps its backing and the accesses in flight
 * on it; its deregistration, which the core does next, waits for them
 * and leaves the index to @new.
 * Return: 0, or -EBUSY when a memory window was bound to @old meanwhile
 * (then nothing changed and the caller deregisters @new).
 */
int remu_mr_replace(struct remu_mr *old, struct remu_mr *new)
{
	struct remu_mr_table *t = &old->rdev->mrs;
	u32 new_key = new->key;
	int err;

	xa_lock(&t->xa);
	if (atomic_read(&old->num_mw)) {
		xa_unlock(&t->xa);
		return -EBUSY;
	}
	WRITE_ONCE(new->key, old->key);
	/* the slot exists: replacing its entry allocates nothing */
	err = xa_err(__xa_store(&t->xa, remu_key_index(old->key), new,
				GFP_NOWAIT));
	if (err) {
		WRITE_ONCE(new->key, new_key);
		xa_unlock(&t->xa);
		return err;
	}
	__xa_erase(&t->xa, remu_key_index(new_key));
	/* full barrier: @new is in the slot before @old reads as ZOMBIE */
	xchg(&old->state, REMU_MR_ZOMBIE);
	xa_unlock(&t->xa);
	new->ib_mr.lkey = old->key;
	new->ib_mr.rkey = old->key;
	return 0;
}

int remu_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct remu_mr *mr = to_remu_mr(ibmr);
	struct remu_mr_table *t = &mr->rdev->mrs;

	/*
	 * The verbs spec: an MR with bound memory windows stays.  Checked
	 * under xa_lock, which remu_mr_mw_get() takes to count a window, so
	 * a bind racing this either counts first (-EBUSY here) or sees the
	 * MR ZOMBIE and fails.
	 */
	xa_lock(&t->xa);
	if (atomic_read(&mr->num_mw)) {
		xa_unlock(&t->xa);
		return -EBUSY;
	}
	xchg(&mr->state, REMU_MR_ZOMBIE);
	/* after remu_mr_replace() the index is the new MR's */
	__xa_cmpxchg(&t->xa, remu_key_index(mr->key), mr, NULL, 0);
	xa_unlock(&t->xa);
	atomic_dec(&t->count);
	/* drop the owner's reference, then wait for accesses in flight */
	remu_mr_put(mr);
	wait_for_completion(&mr->done);
	/* and packets in flight that carry its pages by reference */
	remu_zc_revoke_mr(mr);

	trace_remu_mr_dereg(mr);
	if (mr->ops->release)
		mr->ops->release(mr);
	remu_obj_put(REMU_OBJ_MR);
	kfree_rcu(mr, rcu);
	return 0;
}

bool remu_mr_mw_get(struct remu_mr *mr)
{
	struct xarray *xa = &mr->rdev->mrs.xa;
	bool ok;

	xa_lock(xa);
	ok = READ_ONCE(mr->state) == REMU_MR_VALID;
	if (ok)
		atomic_inc(&mr->num_mw);
	xa_unlock(xa);
	return ok;
}

void remu_mr_mw_put(struct remu_mr *mr)
{
	atomic_dec(&mr->num_mw);
}

/* ---- verbs ---- */

struct ib_mr *remu_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct remu_mr *mr;
	int err;

	err = remu_mr_check_access(access);
	if (err)
		return ERR_PTR(err);
	mr = remu_mr_new(ibpd, REMU_MR_KERNEL, &remu_kernel_ops);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->access = access;
	mr->iova = 0;
	mr->length = U64_MAX;
	mr->state = REMU_MR_VALID;
	return remu_mr_publish(mr);
}

struct ib_mr *remu_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
			       u64 iova, int access, struct ib_udata *udata)
{
	struct remu_dev *rdev = to_remu_dev(ibpd->device);
	struct sg_page_iter iter;
	struct ib_umem *umem;
	struct remu_mr *mr;
	size_t npages;
	u32 i = 0;
	int err;

	/* FLUSH_PERSISTENT: checked below, page by page (not for ODP) */
	err = remu_mr_check_access(access & ~(IB_ACCESS_ON_DEMAND |
		(access & IB_ACCESS_ON_DEMAND ? 0 : IB_ACCESS_FLUSH_PERSISTENT)));
	if (err)
		return ERR_PTR(err);
	if (access & IB_ACCESS_ON_DEMAND)
		return remu_odp_reg_user_mr(ibpd, start, length, iova, access);
	if (!length || length > REMU_MAX_MR_SIZE)
		return ERR_PTR(-EINVAL);

	umem = ib_umem_get(&rdev->ib_dev, start, length, access);
	if (IS_ERR(umem))
		return ERR_CAST(umem);
	mr = remu_mr_new(ibpd, REMU_MR_UMEM, &remu_umem_ops);
	if (!mr) {
		ib_umem_release(umem);
		return ERR_PTR(-ENOMEM);
	}
	npages = ib_umem_num_pages(umem);
	/* the pages are charged to RLIMIT_MEMLOCK, their array to the memcg */
	mr->pages = kvcalloc(npages, sizeof(*mr->pages),
			     GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!mr->pages) {
		ib_umem_release(umem);
		kfree(mr);
		return ERR_PTR(-ENOMEM);
	}
	for_each_sgtable_page(&umem->sgt_append.sgt, &iter, 0) {
		if (i == npages)
			break;
		mr->pages[i++] = sg_page_iter_page(&iter);
	}
	mr->umem = umem;
	mr->npages = i;
	atomic64_add(i, &rdev->mrs.pages_pinned);
	if (i != npages) {
		remu_mr_discard(mr);
		return ERR_PTR(-EFAULT);
	}
	for (i = 0; (access & IB_ACCESS_FLUSH_PERSISTENT) && i < npages; i++) {
		if (!remu_page_is_pmem(mr->pages[i])) {
			remu_mr_discard(mr);
			return ERR_PTR(-EINVAL);
		}
	}
	mr->page_off = ib_umem_offset(umem);
	mr->access = access;
	mr->iova = iova;
	mr->length = length;
	mr->state = REMU_MR_VALID;
	return remu_mr_publish(mr);
}

struct ib_mr *remu_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
			    u32 max_num_sg)
{
	bool gaps = type == IB_MR_TYPE_SG_GAPS;
	struct remu_mr *mr;

	if (type != IB_MR_TYPE_MEM_REG && !gaps)
		return ERR_PTR(-EINVAL);
	if (!max_num_sg || max_num_sg > REMU_MAX_FAST_REG_PAGES)
		return ERR_PTR(-EINVAL);
	mr = remu_mr_new(ibpd, REMU_MR_FAST_REG,
			 gaps ? &remu_fr_gaps_ops : &remu_fr_ops);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->fr_addrs = kcalloc(max_num_sg, sizeof(*mr->fr_addrs), GFP_KERNEL);
	if (gaps)
		mr->fr_ends = kcalloc(max_num_sg, sizeof(*mr->fr_ends),
				      GFP_KERNEL);
	if (!mr->fr_addrs || (gaps && !mr->fr_ends)) {
		kfree(mr->fr_ends);
		kfree(mr->fr_addrs);
		kfree(mr);
		return ERR_PTR(-ENOMEM);
	}
	mr->fr_max = max_num_sg;
	mr->fr_shift = PAGE_SHIFT;
	return remu_mr_publish(mr);
}

static int remu_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct remu_mr *mr = to_remu_mr(ibmr);

	if (mr->npages == mr->fr_max)
		return -ENOMEM;
	mr->fr_addrs[mr->npages++] = addr;
	return 0;
}

/*
 * SG_GAPS: each scatterlist entry (the first from *@sg_offset on) is one
 * entry of the MR, whatever its address and length; at most fr_max of
 * them, as mlx5's KLM MRs.  The MR's iova is the first byte's address.
 */
static int remu_map_mr_sg_gaps(struct remu_mr *mr, struct scatterlist *sgl,
			       int sg_nents, unsigned int *sg_offset_p)
{
	unsigned int off = sg_offset_p ? *sg_offset_p : 0;
	struct scatterlist *sg;
	u64 total = 0;
	int i;

	mr->npages = 0;
	mr->ib_mr.length = 0;
	for_each_sg(sgl, sg, sg_nents, i) {
		u64 len = sg_dma_len(sg);

		if (i >= mr->fr_max)
			break;
		/* an offset past the first entry, or more than an MR holds */
		if (off > len || total + (len - off) > REMU_MAX_MR_SIZE)
			return i ? i : -EINVAL;
		len -= off;
		if (!i)
			mr->ib_mr.iova = sg_dma_address(sg) + off;
		mr->fr_addrs[i] = sg_dma_address(sg) + off;
		total += len;
		mr->fr_ends[i] = total;
		mr->npages = i + 1;
		mr->ib_mr.length = total;
		off = 0;
	}
	if (sg_offset_p)
		*sg_offset_p = 0;
	mr->page_off = 0;
	return mr->npages;
}

int remu_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		   unsigned int *sg_offset)
{
	struct remu_mr *mr = to_remu_mr(ibmr);
	int n;

	if (mr->fr_ends)
		return remu_map_mr_sg_gaps(mr, sg, sg_nents, sg_offset);
	if (!is_power_of_2(ibmr->page_size))
		return -EINVAL;
	mr->npages = 0;
	n = ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, remu_set_page);
	mr->fr_shift = ilog2(ibmr->page_size);
	mr->page_off = ibmr->iova & (ibmr->page_size - 1);
	return n;
}

/*
 * reg_dm_mr: @attr->offset/length are checked against the DM by the core,
 * which also insists on IB_ZERO_BASED: the MR's iova 0 is the DM's byte
 * @attr->offset.
 */
struct ib_mr *remu_reg_dm_mr(struct ib_pd *ibpd, struct ib_dm *ibdm,
			     struct ib_dm_mr_attr *attr,
			     struct uverbs_attr_bundle *attrs)
{
	struct remu_mr *mr;
	int err;

	err = remu_mr_check_access(attr->access_flags);
	if (err)
		return ERR_PTR(err);
	mr = remu_mr_new(ibpd, REMU_MR_DM, NULL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	remu_dm_mr_init(mr, ibdm, attr->offset, attr->length);
	mr->access = attr->access_flags;
	mr->state = REMU_MR_VALID;
	return remu_mr_publish(mr);
}

/* ---- device ---- */

/**
 * remu_mr_dev_init - set up a new device's key table and MR attributes
 * @rdev: the device, after remu_init_attr() and before registration
 */
void remu_mr_dev_init(struct remu_dev *rdev)
{
	struct remu_mr_table *t = &rdev->mrs;
	struct ib_device_attr *a = &rdev->attr;

	xa_init_flags(&t->xa, XA_FLAGS_ALLOC1);
	/* keys differ between devices and module loads */
	t->next_index = get_random_u32() % REMU_KEY_INDEX_MAX + 1;
	atomic_set(&t->count, 0);
	atomic64_set(&t->pages_pinned, 0);
	atomic64_set(&t->gen, 0);
	spin_lock_init(&t->atomic_lock);

	a->max_mr = REMU_MAX_MR;
	a->max_mr_size = REMU_MAX_MR_SIZE;
	a->page_size_cap = PAGE_SIZE;
	a->max_fast_reg_page_list_len = REMU_MAX_FAST_REG_PAGES;
	a->device_cap_flags |= IB_DEVICE_MEM_MGT_EXTENSIONS;
	/* IB_MR_TYPE_SG_GAPS: ib_map_mr_sg() takes entries of any shape */
	a->kernel_cap_flags |= IBK_SG_GAPS_REG;
	/*
	 * IBA 1.5 FLUSH (global visibility; persistence for MRs over
	 * persistent memory) and ATOMIC_WRITE (remu_resp.c)
	 */
	a->device_cap_flags |= IB_DEVICE_FLUSH_GLOBAL |
			       IB_DEVICE_FLUSH_PERSISTENT |
			       IB_DEVICE_ATOMIC_WRITE;
	remu_odp_dev_init(rdev);
	remu_mw_dev_init(rdev);
}

/**
 * remu_mr_dev_fini - release the key table
 * @rdev: the device; the core has destroyed every MR by now
 */
void remu_mr_dev_fini(struct remu_dev *rdev)
{
	if (!xa_empty(&rdev->mrs.xa))
		pr_err("%s: %d MR(s) left at device release\n",
		       dev_name(&rdev->ib_dev.dev),
		       atomic_read(&rdev->mrs.count));
	xa_destroy(&rdev->mrs.xa);
	remu_mw_dev_fini(rdev);
}
