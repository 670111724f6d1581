// SPDX-License-Identifier: GPL-2.0
/*
 * remu_odp.c - on-demand paging: the REMU_MR_ODP backing of the MR access
 * layer (see remu_mr.h for the backing contract) and the device's ODP
 * capabilities.
 *
 * Owns: registration of explicit ODP MRs (reg_user_mr with
 * IB_ACCESS_ON_DEMAND), the translation of an MR offset to a page for the
 * copy loops (->map/->unmap), faulting pages in (->fault) and the
 * mmu_interval_notifier invalidate callback that takes translations away.
 *
 * The core's struct ib_umem_odp holds the state: pfn_list (the pages
 * hmm_range_fault found) and dma_list (per page: non-zero while the page
 * is mapped for the device, low bits ODP_READ_ALLOWED_BIT and
 * ODP_WRITE_ALLOWED_BIT).  Registration pins nothing and faults nothing.
 *
 *  ->map()	takes umem_mutex; if the page's dma_list entry grants the
 *		access, hands out the page and keeps umem_mutex until
 *		->unmap(); otherwise drops it and answers -EAGAIN.
 *  ->fault()	ib_umem_odp_map_dma_and_lock(): hmm_range_fault() under the
 *		notifier sequence (mmu_interval_read_begin/retry), then the
 *		entries are filled under umem_mutex; we drop it at once and
 *		the caller retries ->map().
 *  invalidate	takes umem_mutex, bumps the notifier sequence
 *		(mmu_interval_set_seq) and clears the entries of the range
 *		(ib_umem_odp_unmap_dma_pages).
 *
 * Locking: umem_mutex is held for exactly one segment access (one page at
 * most), so an invalidation waits for the access in flight on that page
 * and every later ->map() sees the entry cleared: the device never touches
 * a page after the kernel took it back.  A fault racing with an
 * invalidation is caught by the sequence check inside
 * ib_umem_odp_map_dma_and_lock and retried there.  All of this sleeps:
 * the copy loops run in process context (work items), never in softirq.
 * Never take umem_mutex of one MR while holding another's (->map() is only
 * ever called with no segment of any ODP MR mapped by the same walker).
 */
#include <linux/hmm.h>
#include <linux/mmu_notifier.h>
#include <rdma/ib_umem_odp.h>

#include "remu.h"

/* at most this many bytes are faulted in by one ->fault() */
#define REMU_ODP_FAULT_MAX	(256UL * PAGE_SIZE)

static struct ib_umem_odp *remu_odp_umem(struct remu_mr *mr)
{
	return to_ib_umem_odp(mr->umem);
}

static bool remu_odp_invalidate(struct mmu_interval_notifier *mni,
				const struct mmu_notifier_range *range,
				unsigned long cur_seq)
{
	struct ib_umem_odp *odp =
		container_of(mni, struct ib_umem_odp, notifier);
	struct remu_mr *mr = odp->private;
	unsigned long start, end;
	int before;

	if (!mmu_notifier_range_blockable(range))
		return false;

	mutex_lock(&odp->umem_mutex);
	mmu_interval_set_seq(mni, cur_seq);
	start = max_t(unsigned long, range->start, ib_umem_start(odp));
	end = min_t(unsigned long, range->end, ib_umem_end(odp));
	before = odp->npages;
	if (start < end)
		ib_umem_odp_unmap_dma_pages(odp, start, end);
	if (mr && before != odp->npages) {
		remu_count(mr->rdev, REMU_CNT_ODP_INVALIDATIONS);
		remu_count_add(mr->rdev, REMU_CNT_ODP_INVALIDATION_PAGES,
			       before - odp->npages);
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
	struct ib_umem_odp *odp = remu_odp_umem(mr);
	u64 need = write ? ODP_WRITE_ALLOWED_BIT : ODP_READ_ALLOWED_BIT;
	unsigned long va, idx;

	if (write && !mr->umem->writable)
		return -EFAULT;
	va = mr->umem->address + off;
	if (va < ib_umem_start(odp) || va >= ib_umem_end(odp))
		return -EFAULT;
	idx = (va - ib_umem_start(odp)) >> PAGE_SHIFT;

	mutex_lock(&odp->umem_mutex);
	if ((odp->dma_list[idx] & need) != need) {
		mutex_unlock(&odp->umem_mutex);
		return -EAGAIN;
	}
	seg->page = hmm_pfn_to_page(odp->pfn_list[idx]);
	seg->offset = offset_in_page(va);
	seg->len = min_t(u64, len, PAGE_SIZE - seg->offset);
	/* umem_mutex stays held until remu_odp_unmap() */
	return 0;
}

/* drops the umem_mutex remu_odp_map() left held */
static void remu_odp_unmap(struct remu_mr *mr, struct remu_mr_seg *seg)
{
	mutex_unlock(&remu_odp_umem(mr)->umem_mutex);
}

static int remu_odp_fault_range(struct ib_umem_odp *odp, unsigned long va,
				u64 len, bool write)
{
	u64 mask = ODP_READ_ALLOWED_BIT;
	int ret;

	if (write)
		mask |= ODP_WRITE_ALLOWED_BIT;
	ret = ib_umem_odp_map_dma_and_lock(odp, va, len, mask, true);
	if (ret < 0)
		return ret;
	mutex_unlock(&odp->umem_mutex);
	return ret;
}

static int remu_odp_fault(struct remu_mr *mr, u64 off, u64 len, bool write)
{
	struct ib_umem_odp *odp = remu_odp_umem(mr);
	struct remu_dev *rdev = mr->rdev;
	unsigned long va = mr->umem->address + off;
	u64 here = min_t(u64, len, REMU_ODP_FAULT_MAX - offset_in_page(va));
	int ret;

	here = min_t(u64, here, ib_umem_end(odp) - va);
	ret = remu_odp_fault_range(odp, va, here, write);
	/*
	 * hmm_range_fault() fails the whole range if any page of it cannot
	 * be faulted in: try the one page this access needs before failing.
	 */
	if (ret < 0 && offset_in_page(va) + here > PAGE_SIZE)
		ret = remu_odp_fault_range(odp, va, 1, write);
	if (ret < 0) {
		remu_count(rdev, REMU_CNT_ODP_FAILED_RESOLUTIONS);
		return -EFAULT;
	}
	remu_count(rdev, REMU_CNT_ODP_PAGE_FAULTS);
	remu_count_add(rdev, REMU_CNT_ODP_PAGE_FAULT_PAGES, ret);
	return 0;
}

static void remu_odp_release(struct remu_mr *mr)
{
	struct ib_umem_odp *odp = remu_odp_umem(mr);

	remu_count_add(mr->rdev, REMU_CNT_ODP_MR_PAGES,
		       -(s64)ib_umem_odp_num_pages(odp));
	remu_count_add(mr->rdev, REMU_CNT_ODP_MRS, -1);
	/* unmaps whatever is still mapped, then removes the notifier */
	ib_umem_odp_release(odp);
}

static const struct remu_mr_backing_ops remu_odp_ops = {
	.map = remu_odp_map,
	.unmap = remu_odp_unmap,
	.fault = remu_odp_fault,
	.release = remu_odp_release,
};

/**
 * remu_odp_reg_user_mr - reg_user_mr for IB_ACCESS_ON_DEMAND
 * @ibpd:	protection domain
 * @start:	user address of the range
 * @length:	bytes
 * @iova:	iova of @start
 * @access:	IB_ACCESS_* rights, IB_ACCESS_ON_DEMAND included
 *
 * Pins nothing and faults nothing: the pages are found on first access.
 * Return: the MR, or ERR_PTR(-EINVAL/-EOPNOTSUPP/-ENOMEM/...).
 */
struct ib_mr *remu_odp_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 iova, int access)
{
	struct remu_dev *rdev = to_remu_dev(ibpd->device);
	struct ib_umem_odp *odp;
	struct remu_mr *mr;
	int err;

	/* implicit ODP (start 0, length U64_MAX) and huge pages: not yet */
	if (access & IB_ACCESS_HUGETLB)
		return ERR_PTR(-EOPNOTSUPP);
	if (!start && length == U64_MAX)
		return ERR_PTR(-EOPNOTSUPP);
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
		       ib_umem_odp_num_pages(odp));
	err = remu_mr_publish(mr);
	if (err) {
		remu_mr_discard(mr);
		return ERR_PTR(err);
	}
	return &mr->ib_mr;
}

/**
 * remu_odp_dev_init - report the device's ODP capabilities
 * @rdev: the device, before registration
 *
 * Only what the ODP tests prove (selftests/remu_odp_test.c): RC send,
 * receive, write, read and atomics.
 */
void remu_odp_dev_init(struct remu_dev *rdev)
{
	struct ib_odp_caps *c = &rdev->attr.odp_caps;

	rdev->attr.kernel_cap_flags |= IBK_ON_DEMAND_PAGING;
	c->general_caps = IB_ODP_SUPPORT;
	c->per_transport_caps.rc_odp_caps = IB_ODP_SUPPORT_SEND |
		IB_ODP_SUPPORT_RECV | IB_ODP_SUPPORT_WRITE |
		IB_ODP_SUPPORT_READ | IB_ODP_SUPPORT_ATOMIC;
}
