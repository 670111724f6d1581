// SPDX-License-Identifier: GPL-2.0
/*
 * remu_odp.c - on-demand paging: the REMU_MR_ODP backing of the MR access
 * layer (remu_mr.h has the backing contract, docs/odp.md the design).
 *
 * Owns: registration of explicit ODP MRs (reg_user_mr with
 * IB_ACCESS_ON_DEMAND) and of implicit ones (start 0, length U64_MAX:
 * one key for the whole address space), their ->map/->unmap/->fault,
 * the mmu_interval_notifier invalidate callback, ibv_advise_mr prefetch
 * (synchronous with FLUSH, else a work item on remu_wq holding MR
 * references), the device's ODP capabilities and the ODP statistics (the
 * port counters, the per-MR struct remu_odp_stats, num_mrs_not_found).
 *
 * The state is the core's struct ib_umem_odp: pfn_list (one entry per
 * PAGE_SIZE) and dma_list (per device page of 1 << page_shift bytes,
 * with its read/write rights; IB_ACCESS_HUGETLB makes that a huge page).
 * Registration pins and faults nothing.  An implicit MR's root umem has
 * no pages: children of REMU_ODP_CHILD_SIZE bytes are created by the
 * first fault in their range (under struct remu_odp_implicit's mutex),
 * read locklessly from its xarray and freed at deregistration.
 *
 *  ->map()	takes umem_mutex; if the page's entry grants the access,
 *		hands out the page and keeps umem_mutex until ->unmap(),
 *		else drops it and answers -EAGAIN;
 *  ->fault()	ib_umem_odp_map_dma_and_lock() (hmm_range_fault() under the
 *		notifier sequence), then drops umem_mutex; the caller
 *		retries ->map();
 *  invalidate	under umem_mutex: bumps the sequence, clears the range.
 *
 * Locking: umem_mutex is held for one segment access (a page at most),
 * so an invalidation waits for the access in flight on that page and
 * every later ->map() sees the entry cleared: the device never touches a
 * page after the kernel took it back.  Everything here sleeps (process
 * context only), and no walker takes one MR's umem_mutex while holding
 * another's.
 */
#include <linux/hmm.h>
#include <linux/mmu_notifier.h>
#include <net/netlink.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/restrack.h>
#include <uapi/rdma/rdma_netlink.h>

#include "remu.h"
#include "remu_qp.h"	/* remu_wq */
#include "remu_trace.h"

/* at most this many bytes are faulted in by one ->fault() */
#define REMU_ODP_FAULT_MAX	(256UL * PAGE_SIZE)

/* implicit ODP: the address space in children of 2 MiB */
#define REMU_ODP_CHILD_SHIFT	21
#define REMU_ODP_CHILD_SIZE	BIT(REMU_ODP_CHILD_SHIFT)

/**
 * struct remu_odp_implicit - the children of an implicit ODP MR
 * @children:	va >> REMU_ODP_CHILD_SHIFT -> struct ib_umem_odp
 * @lock:	serialises creating children
 * @mm:		the address space (mmgrab'ed: the root holds no notifier)
 */
struct remu_odp_implicit {
	struct xarray children;
	struct mutex lock;	/* serialises creating children */
	struct mm_struct *mm;
};

static struct ib_umem_odp *remu_odp_umem(struct remu_mr *mr)
{
	return to_ib_umem_odp(mr->umem);
}

/* @n device pages of @odp (1 << page_shift bytes each) in PAGE_SIZE pages */
static u64 remu_odp_pages(struct ib_umem_odp *odp, u64 n)
{
	return n << (odp->page_shift - PAGE_SHIFT);
}

/*
 * The umem that holds MR offset @off and its user address; NULL when an
 * implicit MR has no child there yet.
 */
static struct ib_umem_odp *remu_odp_locate(struct remu_mr *mr, u64 off,
					   unsigned long *va)
{
	struct ib_umem_odp *root = remu_odp_umem(mr);
	struct remu_odp_implicit *imp;

	if (!root->is_implicit_odp) {
		*va = mr->umem->address + off;
		return root;
	}
	imp = root->private;
	*va = off;
	return xa_load(&imp->children, off >> REMU_ODP_CHILD_SHIFT);
}

static bool remu_odp_invalidate(struct mmu_interval_notifier *mni,
				const struct mmu_notifier_range *range,
				unsigned long cur_seq)
{
	struct ib_umem_odp *odp =
		container_of(mni, struct ib_umem_odp, notifier);
	unsigned long start, end;
	struct remu_mr *mr;
	u64 pages = 0;

	if (!mmu_notifier_range_blockable(range))
		return false;

	mutex_lock(&odp->umem_mutex);
	mr = odp->private;	/* set under umem_mutex after insertion */
	mmu_interval_set_seq(mni, cur_seq);
	start = max_t(unsigned long, range->start, ib_umem_start(odp));
	end = min_t(unsigned long, range->end, ib_umem_end(odp));
	if (start < end)
		pages = remu_odp_take_range(odp, start, end);
	if (mr)
		trace_remu_odp_invalidate(mr, range, start, end, pages);
	if (mr && pages) {
		remu_count(mr->rdev, REMU_CNT_ODP_INVALIDATIONS);
		remu_count_add(mr->rdev, REMU_CNT_ODP_INVALIDATION_PAGES,
			       pages);
		atomic64_add(pages, &mr->odp_stats.invalidations);
	}
	mutex_unlock(&odp->umem_mutex);
	return true;
}

static const struct mmu_interval_notifier_ops remu_odp_mni_ops = {
	.invalidate = remu_odp_invalidate,
};

static int remu_odp_map(struct remu_mr *mr, u64 off, u64 len, bool write,
			struct remu_mr_seg *seg)
{
	u64 need = write ? REMU_ODP_WRITE : REMU_ODP_READ;
	struct ib_umem_odp *odp;
	unsigned long va;

	if (write && !mr->umem->writable)
		return -EFAULT;
	/* an implicit MR's offset is the address: none lives up there */
	if (off >= TASK_SIZE_MAX)
		return -EFAULT;
	odp = remu_odp_locate(mr, off, &va);
	if (!odp)
		return -EAGAIN;
	if (va < ib_umem_start(odp) || va >= ib_umem_end(odp))
		return -EFAULT;
	/* the device page's rights and the PAGE_SIZE page (remu_compat.h) */
	mutex_lock(&odp->umem_mutex);
	if ((remu_odp_access(odp, va) & need) != need) {
		mutex_unlock(&odp->umem_mutex);
		return -EAGAIN;
	}
	seg->page = remu_odp_page(odp, va);
	seg->offset = offset_in_page(va);
	seg->len = min_t(u64, len, PAGE_SIZE - seg->offset);
	seg->priv = odp;
	/* umem_mutex stays held until remu_odp_unmap() */
	return 0;
}

/* drops the umem_mutex remu_odp_map() left held (seg->priv) */
static void remu_odp_unmap(struct remu_mr *mr, struct remu_mr_seg *seg)
{
	struct ib_umem_odp *odp = seg->priv;

	lockdep_assert_held(&odp->umem_mutex);
	mutex_unlock(&odp->umem_mutex);
}

/*
 * Fault [va, va + len) of @odp in (@fault), or map only what the CPU page
 * tables have (!@fault).  Return: the pages of the range now mapped for
 * the device, or -errno.
 *
 * invalidations_faults_contentions: the notifier's sequence
 * (invalidate_seq, written by remu_odp_invalidate under umem_mutex) is
 * read under umem_mutex before the fault and again under the umem_mutex
 * that ib_umem_odp_map_dma_and_lock returns with.  If it moved, an
 * invalidation of this umem ran during the fault: the core waited for it
 * (mmu_interval_read_begin) or walked again (hmm_range_fault -EBUSY,
 * mmu_interval_read_retry).
 */
static int remu_odp_fault_range(struct remu_mr *mr, struct ib_umem_odp *odp,
				unsigned long va, u64 len, u64 mask,
				bool fault)
{
	unsigned long seq;
	int ret;

	mutex_lock(&odp->umem_mutex);
	seq = odp->notifier.invalidate_seq;
	mutex_unlock(&odp->umem_mutex);
	ret = ib_umem_odp_map_dma_and_lock(odp, va, len, mask, fault);
	if (ret < 0)
		return ret;
	if (odp->notifier.invalidate_seq != seq)
		remu_count(mr->rdev, REMU_CNT_ODP_FAULT_CONTENTIONS);
	if (!fault) {
		/* the core answers the range's size: count what is there */
		unsigned long size = 1UL << odp->page_shift;
		unsigned long i = (ALIGN_DOWN(va, size) - ib_umem_start(odp)) >>
				  odp->page_shift;
		unsigned long end = (ALIGN(va + len, size) -
				     ib_umem_start(odp)) >> odp->page_shift;

		for (ret = 0; i < end; i++)
			ret += !!(remu_odp_access(odp, ib_umem_start(odp) +
						  (i << odp->page_shift)) &
				  REMU_ODP_READ);
	}
	mutex_unlock(&odp->umem_mutex);
	return remu_odp_pages(odp, ret);
}

/* implicit ODP: the child covering @va, created if need be */
static struct ib_umem_odp *remu_odp_child(struct remu_mr *mr,
					  unsigned long va)
{
	struct ib_umem_odp *root = remu_odp_umem(mr);
	struct remu_odp_implicit *imp = root->private;
	unsigned long idx = va >> REMU_ODP_CHILD_SHIFT;
	struct ib_umem_odp *child;
	int err;

	mutex_lock(&imp->lock);
	child = xa_load(&imp->children, idx);
	if (child)
		goto out;
	child = ib_umem_odp_alloc_child(root, idx << REMU_ODP_CHILD_SHIFT,
					REMU_ODP_CHILD_SIZE,
					&remu_odp_mni_ops);
	if (IS_ERR(child)) {
		trace_remu_odp_implicit_child(mr, idx << REMU_ODP_CHILD_SHIFT,
					      REMU_ODP_CHILD_SIZE,
					      PTR_ERR(child));
		goto out;
	}
	mutex_lock(&child->umem_mutex);
	child->private = mr;
	mutex_unlock(&child->umem_mutex);
	err = xa_err(xa_store(&imp->children, idx, child, GFP_KERNEL));
	if (err) {
		ib_umem_odp_release(child);
		child = ERR_PTR(err);
		trace_remu_odp_implicit_child(mr, idx << REMU_ODP_CHILD_SHIFT,
					      REMU_ODP_CHILD_SIZE, err);
		goto out;
	}
	remu_count_add(mr->rdev, REMU_CNT_ODP_MR_PAGES,
		       REMU_ODP_CHILD_SIZE >> PAGE_SHIFT);
	trace_remu_odp_implicit_child(mr, idx << REMU_ODP_CHILD_SHIFT,
				      REMU_ODP_CHILD_SIZE, 0);
out:
	mutex_unlock(&imp->lock);
	return child;
}

/*
 * Make the first piece of [off, off + len) present (@fault) or map what the
 * CPU page tables already have (!@fault: PREFETCH_NO_FAULT).  The piece
 * ends at REMU_ODP_FAULT_MAX bytes or at the end of its umem.
 * Return: the bytes handled (>= 1), or -EFAULT.
 */
static s64 remu_odp_fault_piece(struct remu_mr *mr, u64 off, u64 len,
				bool write, bool fault, bool prefetch)
{
	/* the clock is read only while the event is on */
	u64 t0 = trace_remu_odp_fault_enabled() ? ktime_get_ns() : 0;
	struct remu_dev *rdev = mr->rdev;
	struct ib_umem_odp *odp;
	unsigned long va = off;
	u64 here, mask;
	int ret;

	if (off >= TASK_SIZE_MAX) {
		trace_remu_odp_fault(mr, off, len, write, prefetch, fault,
				     -EFAULT, t0);
		return -EFAULT;
	}
	odp = remu_odp_locate(mr, off, &va);
	if (!odp)
		odp = remu_odp_child(mr, va);
	if (IS_ERR(odp)) {
		remu_count(rdev, REMU_CNT_ODP_FAILED_RESOLUTIONS);
		trace_remu_odp_fault(mr, va, len, write, prefetch, fault,
				     -EFAULT, t0);
		return -EFAULT;
	}
	here = min_t(u64, len, REMU_ODP_FAULT_MAX - offset_in_page(va));
	here = min_t(u64, here, ib_umem_end(odp) - va);
	if (!fault) {
		mask = REMU_ODP_READ;
		if (mr->umem->writable)
			mask |= REMU_ODP_WRITE;
		ret = remu_odp_fault_range(mr, odp, va, here, mask, false);
		trace_remu_odp_fault(mr, va, here, write, prefetch, false,
				     ret < 0 ? -EFAULT : ret, t0);
		if (ret < 0)
			return -EFAULT;
		atomic64_add(ret, &mr->odp_stats.prefetch);
		return here;
	}
	mask = REMU_ODP_READ;
	if (write)
		mask |= REMU_ODP_WRITE;
	ret = remu_odp_fault_range(mr, odp, va, here, mask, true);
	/*
	 * hmm_range_fault() fails the whole range if any page of it cannot
	 * be faulted in: try the one page this access needs before failing.
	 */
	if (ret < 0 && offset_in_page(va) + here > PAGE_SIZE) {
		here = PAGE_SIZE - offset_in_page(va);
		ret = remu_odp_fault_range(mr, odp, va, here, mask, true);
	}
	trace_remu_odp_fault(mr, va, here, write, prefetch, true,
			     ret < 0 ? -EFAULT : ret, t0);
	if (ret < 0) {
		remu_count(rdev, REMU_CNT_ODP_FAILED_RESOLUTIONS);
		return -EFAULT;
	}
	remu_count(rdev, REMU_CNT_ODP_PAGE_FAULTS);
	remu_count_add(rdev, REMU_CNT_ODP_PAGE_FAULT_PAGES, ret);
	atomic64_add(ret, prefetch ? &mr->odp_stats.prefetch :
				     &mr->odp_stats.faults);
	return here;
}

static int remu_odp_fault(struct remu_mr *mr, u64 off, u64 len, bool write)
{
	s64 ret = remu_odp_fault_piece(mr, off, len, write, true, false);

	return ret < 0 ? ret : 0;
}

static void remu_odp_release_implicit(struct remu_mr *mr)
{
	struct ib_umem_odp *root = remu_odp_umem(mr);
	struct remu_odp_implicit *imp = root->private;
	struct ib_umem_odp *child;
	unsigned long idx;

	xa_for_each(&imp->children, idx, child) {
		remu_count_add(mr->rdev, REMU_CNT_ODP_MR_PAGES,
			       -(s64)remu_odp_pages(child,
						   ib_umem_odp_num_pages(child)));
		ib_umem_odp_release(child);
	}
	xa_destroy(&imp->children);
	mmdrop(imp->mm);
	kfree(imp);
	ib_umem_odp_release(root);
}

static void remu_odp_release(struct remu_mr *mr)
{
	struct ib_umem_odp *odp = remu_odp_umem(mr);

	remu_count_add(mr->rdev, REMU_CNT_ODP_MRS, -1);
	if (odp->is_implicit_odp) {
		remu_odp_release_implicit(mr);
		return;
	}
	remu_count_add(mr->rdev, REMU_CNT_ODP_MR_PAGES,
		       -(s64)remu_odp_pages(odp, ib_umem_odp_num_pages(odp)));
	/* unmaps whatever is still mapped, then removes the notifier */
	ib_umem_odp_release(odp);
}

static const struct remu_mr_backing_ops remu_odp_ops = {
	.map = remu_odp_map,
	.unmap = remu_odp_unmap,
	.fault = remu_odp_fault,
	.release = remu_odp_release,
};

/* implicit ODP: one key for the whole address space, iova == address */
static struct ib_mr *remu_odp_reg_implicit(struct ib_pd *ibpd, u64 iova,
					   int access)
{
	struct remu_odp_implicit *imp;
	struct ib_umem_odp *root;
	struct remu_mr *mr;

	if (iova)
		return ERR_PTR(-EINVAL);
	imp = kzalloc(sizeof(*imp), GFP_KERNEL);
	if (!imp)
		return ERR_PTR(-ENOMEM);
	mr = remu_mr_new(ibpd, REMU_MR_ODP, &remu_odp_ops);
	if (!mr) {
		kfree(imp);
		return ERR_PTR(-ENOMEM);
	}
	root = ib_umem_odp_alloc_implicit(ibpd->device, access);
	if (IS_ERR(root)) {
		kfree(mr);
		kfree(imp);
		return ERR_CAST(root);
	}
	xa_init(&imp->children);
	mutex_init(&imp->lock);
	imp->mm = root->umem.owning_mm;
	mmgrab(imp->mm);
	root->private = imp;
	mr->umem = &root->umem;
	mr->access = access;
	mr->iova = 0;
	mr->length = U64_MAX;
	mr->state = REMU_MR_VALID;
	remu_count_add(mr->rdev, REMU_CNT_ODP_MRS, 1);
	return remu_mr_publish(mr);
}

/**
 * remu_odp_reg_user_mr - reg_user_mr for IB_ACCESS_ON_DEMAND
 * @ibpd:	protection domain
 * @start:	user address of the range
 * @length:	bytes
 * @iova:	iova of @start
 * @access:	IB_ACCESS_* rights, IB_ACCESS_ON_DEMAND included
 *
 * Pins nothing and faults nothing: the pages are found on first access.
 * @start 0 and @length U64_MAX ask for an implicit MR (see top).
 * Return: the MR, or ERR_PTR(-EINVAL/-EOPNOTSUPP/-ENOMEM/...).
 */
struct ib_mr *remu_odp_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 iova, int access)
{
	struct remu_dev *rdev = to_remu_dev(ibpd->device);
	struct ib_umem_odp *odp;
	struct remu_mr *mr;

	/* HUGETLB: ib_umem_odp_get() (huge pages), or EINVAL if implicit */
	if (!start && length == U64_MAX)
		return remu_odp_reg_implicit(ibpd, iova, access);
	if (!length || length > REMU_MAX_MR_SIZE)
		return ERR_PTR(-EINVAL);

	mr = remu_mr_new(ibpd, REMU_MR_ODP, &remu_odp_ops);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	odp = ib_umem_odp_get(&rdev->ib_dev, start, length, access,
			      &remu_odp_mni_ops);
	if (IS_ERR(odp)) {
		kfree(mr);
		return ERR_CAST(odp);
	}
	mutex_lock(&odp->umem_mutex);
	odp->private = mr;
	mutex_unlock(&odp->umem_mutex);
	mr->umem = &odp->umem;
	mr->access = access;
	mr->iova = iova;
	mr->length = length;
	mr->state = REMU_MR_VALID;
	remu_count_add(rdev, REMU_CNT_ODP_MRS, 1);
	remu_count_add(rdev, REMU_CNT_ODP_MR_PAGES,
		       remu_odp_pages(odp, ib_umem_odp_num_pages(odp)));
	return remu_mr_publish(mr);
}

/* ---- ibv_advise_mr: prefetch ---- */

/**
 * struct remu_odp_prefetch - one advise_mr call, run now or in a work item
 * @work:	for the asynchronous case (on remu_wq)
 * @write:	PREFETCH_WRITE
 * @fault:	false for PREFETCH_NO_FAULT
 * @n:		entries in @sge
 * @sge:	each with its MR (a reference held until done) and range
 */
struct remu_odp_prefetch {
	struct work_struct work;
	bool write;
	bool fault;
	u32 n;
	struct {
		struct remu_mr *mr;
		u64 off;
		u64 len;
	} sge[] __counted_by(n);
};

static int remu_odp_prefetch_run(struct remu_odp_prefetch *pf)
{
	int err = 0;
	u32 i;

	for (i = 0; i < pf->n; i++) {
		struct remu_mr *mr = pf->sge[i].mr;
		u64 off = pf->sge[i].off, len = pf->sge[i].len;

		while (len && !err) {
			s64 done = remu_odp_fault_piece(mr, off, len, pf->write,
							pf->fault, true);

			if (done < 0)
				err = done;
			else
				off += done, len -= done;
			cond_resched();
		}
		remu_mr_put(mr);
	}
	return err;
}

static void remu_odp_prefetch_work(struct work_struct *work)
{
	struct remu_odp_prefetch *pf =
		container_of(work, struct remu_odp_prefetch, work);
	struct remu_dev *rdev = pf->n ? pf->sge[0].mr->rdev : NULL;

	/* nobody waits for an asynchronous prefetch: errors are dropped */
	int err = remu_odp_prefetch_run(pf);

	if (rdev) {
		remu_count(rdev, REMU_CNT_ODP_PREFETCHES);
		trace_remu_odp_prefetch(rdev, pf->write, pf->fault, pf->n,
					false, err);
	}
	kfree(pf);
}

/**
 * remu_advise_mr - ib_device_ops.advise_mr: prefetch ranges of ODP MRs
 * @ibpd:	PD every SGE's MR must belong to
 * @advice:	PREFETCH, PREFETCH_WRITE or PREFETCH_NO_FAULT
 * @flags:	IB_UVERBS_ADVISE_MR_FLAG_FLUSH: done before returning
 * @sg_list:	lkey, address and length of each range
 * @num_sge:	entries
 * @attrs:	unused
 *
 * Every SGE is checked first, so a bad one fails the call before anything
 * is done.  Return: 0; -EOPNOTSUPP (advice, flags); -ENOENT (no ODP MR of
 * this PD under the lkey, or PREFETCH_WRITE to an MR without LOCAL_WRITE);
 * -EINVAL (range outside the MR); -ENOMEM; with FLUSH, -EFAULT when a
 * page could not be faulted in.
 */
int remu_advise_mr(struct ib_pd *ibpd, enum ib_uverbs_advise_mr_advice advice,
		   u32 flags, struct ib_sge *sg_list, u32 num_sge,
		   struct uverbs_attr_bundle *attrs)
{
	struct remu_dev *rdev = to_remu_dev(ibpd->device);
	struct remu_odp_prefetch *pf;
	int err = 0;
	u32 i;

	if (advice > IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT ||
	    flags & ~IB_UVERBS_ADVISE_MR_FLAG_FLUSH)
		return -EOPNOTSUPP;
	pf = kzalloc(struct_size(pf, sge, num_sge), GFP_KERNEL);
	if (!pf)
		return -ENOMEM;
	pf->write = advice == IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	pf->fault = advice != IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT;
	for (i = 0; i < num_sge; i++) {
		const struct ib_sge *sge = &sg_list[i];
		struct remu_mr *mr = remu_mr_lookup(rdev, sge->lkey, REMU_LKEY);

		if (!mr) {
			err = -ENOENT;
			break;
		}
		pf->sge[i].mr = mr;
		pf->n = i + 1;
		if (mr->kind != REMU_MR_ODP || mr->pd != to_remu_pd(ibpd) ||
		    (pf->write && !(mr->access & IB_ACCESS_LOCAL_WRITE))) {
			err = -ENOENT;
			break;
		}
		if (remu_mr_check(mr, NULL, sge->addr, sge->length, 0)) {
			err = -EINVAL;
			break;
		}
		pf->sge[i].off = sge->addr - mr->iova;
		pf->sge[i].len = sge->length;
	}
	if (err) {
		for (i = 0; i < pf->n; i++)
			remu_mr_put(pf->sge[i].mr);
		kfree(pf);
		return err;
	}
	if (!(flags & IB_UVERBS_ADVISE_MR_FLAG_FLUSH)) {
		INIT_WORK(&pf->work, remu_odp_prefetch_work);
		queue_work(remu_wq, &pf->work);
		return 0;
	}
	err = remu_odp_prefetch_run(pf);
	trace_remu_odp_prefetch(rdev, pf->write, pf->fault, pf->n, true, err);
	kfree(pf);
	remu_count(rdev, REMU_CNT_ODP_PREFETCHES);
	return err;
}

/* ---- statistics ---- */

/**
 * remu_odp_fill_stat_mr_entry - ib_device_ops.fill_stat_mr_entry
 * @msg:	the netlink message of `rdma statistic show mr`
 * @ibmr:	one MR of the device
 *
 * An ODP MR gets the three per-MR counters of struct remu_odp_stats, under
 * the names mlx5 uses; any other MR gets none.
 * Return: 0, or -EMSGSIZE when @msg is full.
 */
int remu_odp_fill_stat_mr_entry(struct sk_buff *msg, struct ib_mr *ibmr)
{
	struct remu_mr *mr = to_remu_mr(ibmr);
	struct remu_odp_stats *st = &mr->odp_stats;
	struct nlattr *table;

	if (mr->kind != REMU_MR_ODP)
		return 0;
	table = nla_nest_start(msg, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
	if (!table)
		return -EMSGSIZE;
	if (rdma_nl_stat_hwcounter_entry(msg, "page_faults",
					 atomic64_read(&st->faults)) ||
	    rdma_nl_stat_hwcounter_entry(msg, "page_invalidations",
					 atomic64_read(&st->invalidations)) ||
	    rdma_nl_stat_hwcounter_entry(msg, "page_prefetch",
					 atomic64_read(&st->prefetch))) {
		nla_nest_cancel(msg, table);
		return -EMSGSIZE;
	}
	nla_nest_end(msg, table);
	return 0;
}

/**
 * remu_odp_count_key_miss - a responder found no MR under a request's rkey
 * @rdev:	the responder's device
 *
 * Counted as num_mrs_not_found only while the device has an ODP MR
 * (num_odp_mrs > 0): on an ODP NIC this is the page-fault event whose key
 * names no MR (any more).
 */
void remu_odp_count_key_miss(struct remu_dev *rdev)
{
	if (atomic64_read(&rdev->counters[REMU_CNT_ODP_MRS]) > 0)
		remu_count(rdev, REMU_CNT_ODP_MRS_NOT_FOUND);
}

/**
 * remu_odp_dev_init - report the device's ODP capabilities
 * @rdev: the device, before registration
 *
 * Only what the ODP tests prove (selftests/remu_odp_test.c): explicit and
 * implicit MRs; RC send, receive, write, read, atomics and SRQ receive;
 * UC send, receive and write; UD send and receive.
 */
void remu_odp_dev_init(struct remu_dev *rdev)
{
	struct ib_odp_caps *c = &rdev->attr.odp_caps;

	rdev->attr.kernel_cap_flags |= IBK_ON_DEMAND_PAGING;
	c->general_caps = IB_ODP_SUPPORT | IB_ODP_SUPPORT_IMPLICIT;
	c->per_transport_caps.rc_odp_caps = IB_ODP_SUPPORT_SEND |
		IB_ODP_SUPPORT_RECV | IB_ODP_SUPPORT_WRITE |
		IB_ODP_SUPPORT_READ | IB_ODP_SUPPORT_ATOMIC |
		IB_ODP_SUPPORT_SRQ_RECV;
	c->per_transport_caps.uc_odp_caps = IB_ODP_SUPPORT_SEND |
		IB_ODP_SUPPORT_RECV | IB_ODP_SUPPORT_WRITE;
	c->per_transport_caps.ud_odp_caps = IB_ODP_SUPPORT_SEND |
		IB_ODP_SUPPORT_RECV;
}
