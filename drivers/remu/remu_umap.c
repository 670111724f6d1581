// SPDX-License-Identifier: GPL-2.0
/*
 * remu_umap.c - a process's mappings of device memory (rings and
 * device-memory allocations), and taking them back when the device goes
 * away under the process.
 *
 * Every mmap() of a remu user context goes through an rdma_user_mmap_entry
 * (remu_queue.c and remu_dm.c insert them).  The pages are mapped as PFN
 * mappings; each mapping is tracked here with remu's own vm_operations
 * (rings are vmalloc()ed, which the core's rdma_user_mmap_io() cannot
 * map) and holds a reference on its entry, so the memory stays allocated
 * while a mapping can reach it, and one on the module.  Mappings are
 * whole and stay put: no split, no move, not inherited by a fork.
 *
 * Disassociation (the device unregistered under a live process):
 * remu_umap_disassociate() zaps every mapping and drops its entry, so
 * the memory is freed; a later access faults in one zeroed page per
 * context instead of SIGBUS, and libremu fails the verb when it finds the
 * ring magic gone.  struct remu_umap is shared by the context and each
 * mapping (kref) and outlives a disassociated context.
 *
 * Locking: remu_umap.lock protects the list of mappings, their entries,
 * the dead page and the gone flag.  It nests inside the mm's mmap_lock
 * (mmap, .open, .close and .fault run under it: remu's .fault is never
 * called under a VMA lock, it has no ->map_pages); the zap takes
 * mmap_lock first, one mm at a time.
 */
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "remu.h"

/**
 * struct remu_umap - the mappings of one user context
 * @ref:	the context and each mapping
 * @lock:	see the file comment
 * @vmas:	struct remu_vma of every live mapping
 * @dead:	the zeroed page zapped mappings show, or NULL
 * @gone:	the context is disassociated: no new mappings, faults get @dead
 */
struct remu_umap {
	struct kref ref;
	struct mutex lock;	/* see the file comment */
	struct list_head vmas;
	struct page *dead;
	bool gone;
};

/**
 * struct remu_vma - one mapping (vma->vm_private_data)
 * @node:	in remu_umap.vmas
 * @vma:	the mapping
 * @umap:	its context's mappings (referenced)
 * @me:		the entry it maps (referenced), NULL once zapped
 */
struct remu_vma {
	struct list_head node;
	struct vm_area_struct *vma;
	struct remu_umap *umap;
	struct remu_mmap_entry *me;
};

static void remu_umap_release(struct kref *ref)
{
	struct remu_umap *um = container_of(ref, struct remu_umap, ref);

	if (um->dead)
		__free_page(um->dead);
	kfree(um);
}

/**
 * remu_umap_alloc - the mapping tracker of a new user context
 *
 * Return: the tracker (one reference, for the context) or NULL.
 */
struct remu_umap *remu_umap_alloc(void)
{
	struct remu_umap *um = kzalloc(sizeof(*um), GFP_KERNEL);

	if (!um)
		return NULL;
	kref_init(&um->ref);
	mutex_init(&um->lock);
	INIT_LIST_HEAD(&um->vmas);
	return um;
}

/** remu_umap_put - the context is freed; mappings may keep @um alive */
void remu_umap_put(struct remu_umap *um)
{
	kref_put(&um->ref, remu_umap_release);
}

/* drop a mapping's entry reference; under um->lock */
static void remu_vma_drop_entry(struct remu_vma *rv)
{
	lockdep_assert_held(&rv->umap->lock);
	if (rv->me) {
		rdma_user_mmap_entry_put(&rv->me->rdma);
		rv->me = NULL;
	}
}

/* track @vma as a mapping of @me (reference passed in); under um->lock */
static struct remu_vma *remu_vma_track(struct remu_umap *um,
				       struct vm_area_struct *vma,
				       struct remu_mmap_entry *me)
{
	struct remu_vma *rv;

	lockdep_assert_held(&um->lock);
	rv = kzalloc(sizeof(*rv), GFP_KERNEL);
	if (!rv)
		return NULL;
	rv->vma = vma;
	rv->umap = um;
	rv->me = me;
	kref_get(&um->ref);
	list_add(&rv->node, &um->vmas);
	vma->vm_private_data = rv;
	return rv;
}

/*
 * .open: a copy of a mapping (fork, mremap).  It must be tracked too; if
 * it cannot be, it is zapped at once and faults SIGBUS, never reaching
 * memory that may be freed under it.
 */
static void remu_vma_open(struct vm_area_struct *vma)
{
	struct remu_vma *old = vma->vm_private_data;
	struct remu_umap *um;

	__module_get(THIS_MODULE);	/* dropped in remu_vma_close() */
	if (!old)
		goto zap;
	um = old->umap;
	mutex_lock(&um->lock);
	if (old->me && !um->gone) {
		kref_get(&old->me->rdma.ref);
		if (remu_vma_track(um, vma, old->me)) {
			mutex_unlock(&um->lock);
			return;
		}
		rdma_user_mmap_entry_put(&old->me->rdma);
	} else if (remu_vma_track(um, vma, NULL)) {
		/* a copy of a zapped mapping: tracked, shows the dead page */
		mutex_unlock(&um->lock);
		zap_vma_ptes(vma, vma->vm_start, vma->vm_end - vma->vm_start);
		return;
	}
	mutex_unlock(&um->lock);
zap:
	vma->vm_private_data = NULL;
	zap_vma_ptes(vma, vma->vm_start, vma->vm_end - vma->vm_start);
}

static void remu_vma_close(struct vm_area_struct *vma)
{
	struct remu_vma *rv = vma->vm_private_data;

	if (rv) {
		struct remu_umap *um = rv->umap;

		mutex_lock(&um->lock);
		list_del(&rv->node);
		remu_vma_drop_entry(rv);
		mutex_unlock(&um->lock);
		remu_umap_put(um);
		kfree(rv);
		vma->vm_private_data = NULL;
	}
	module_put(THIS_MODULE);
}

/* rings are mapped whole and stay where they are: no split, no move */
static int remu_vma_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

static int remu_vma_mremap(struct vm_area_struct *vma)
{
	return -EINVAL;
}

/*
 * .fault: a live mapping has every page mapped and never faults; a zapped
 * one shows the context's dead page, so a process that touches its rings
 * after the device went away reads zeros instead of dying.
 */
static vm_fault_t remu_vma_fault(struct vm_fault *vmf)
{
	struct remu_vma *rv = vmf->vma->vm_private_data;
	struct remu_umap *um;
	vm_fault_t ret = VM_FAULT_SIGBUS;

	if (!rv)
		return VM_FAULT_SIGBUS;
	um = rv->umap;
	mutex_lock(&um->lock);
	if (!rv->me && um->gone) {
		if (!um->dead)
			um->dead = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (um->dead)
			ret = vmf_insert_pfn(vmf->vma, vmf->address,
					     page_to_pfn(um->dead));
		else
			ret = VM_FAULT_OOM;
	}
	mutex_unlock(&um->lock);
	return ret;
}

static const struct vm_operations_struct remu_vm_ops = {
	.open = remu_vma_open,
	.close = remu_vma_close,
	.may_split = remu_vma_may_split,
	.mremap = remu_vma_mremap,
	.fault = remu_vma_fault,
};

/**
 * remu_umap_map - map the buffer of @me into @vma and track the mapping
 * @um: the context's mappings
 * @vma: the new mapping (size and flags already checked)
 * @me: the entry; the caller's reference on it passes to the mapping on
 *	success and stays the caller's on failure
 *
 * Context: the .mmap op, mmap_lock held for writing.
 * Return: 0, -EIO if the context is disassociated, -ENOMEM, or the error
 * of remap_pfn_range() (the core unmaps whatever was mapped).
 */
int remu_umap_map(struct remu_umap *um, struct vm_area_struct *vma,
		  struct remu_mmap_entry *me)
{
	unsigned long off, len = vma->vm_end - vma->vm_start;
	int err = 0;

	mmap_assert_write_locked(vma->vm_mm);
	mutex_lock(&um->lock);
	if (um->gone) {
		err = -EIO;
		goto out;
	}
	for (off = 0; off < len; off += PAGE_SIZE) {
		err = remap_pfn_range(vma, vma->vm_start + off,
				      me->ops ? me->ops->pfn(me, off) :
				      vmalloc_to_pfn(me->buf + off), PAGE_SIZE,
				      vma->vm_page_prot);
		if (err)
			goto out;
	}
	if (!remu_vma_track(um, vma, me)) {
		err = -ENOMEM;
		goto out;
	}
	/* a forked child has no use for its parent's rings */
	vm_flags_set(vma, VM_DONTCOPY);
	vma->vm_ops = &remu_vm_ops;
	__module_get(THIS_MODULE);	/* dropped in remu_vma_close() */
	if (me->ops && me->ops->mapped)
		me->ops->mapped(me, vma->vm_start);
out:
	mutex_unlock(&um->lock);
	return err;
}

/*
 * Find a process whose mappings are not zapped yet and pin its mm; drop the
 * entries of mappings whose process is exiting (exit_mmap() unmaps them
 * soon, and nothing runs in that address space any more).  Under um->lock.
 */
static struct mm_struct *remu_umap_next_mm(struct remu_umap *um)
{
	struct remu_vma *rv;

	lockdep_assert_held(&um->lock);
	list_for_each_entry(rv, &um->vmas, node) {
		if (!rv->me)
			continue;
		if (mmget_not_zero(rv->vma->vm_mm))
			return rv->vma->vm_mm;
		remu_vma_drop_entry(rv);
	}
	return NULL;
}

/**
 * remu_umap_disassociate - take every mapping of a context back
 * @um: the context's mappings
 *
 * After this no mapping reaches ring memory: the pages are unmapped and
 * the entries released, and new mmap() calls fail.
 * Context: process context, may sleep; no mmap_lock held.
 */
void remu_umap_disassociate(struct remu_umap *um)
{
	struct mm_struct *mm;
	struct remu_vma *rv;

	mutex_lock(&um->lock);
	um->gone = true;
	for (;;) {
		mm = remu_umap_next_mm(um);
		mutex_unlock(&um->lock);
		if (!mm)
			return;
		/* mmap_lock before um->lock, as in .open/.close/.fault */
		mmap_read_lock(mm);
		mutex_lock(&um->lock);
		list_for_each_entry(rv, &um->vmas, node) {
			if (rv->vma->vm_mm != mm || !rv->me)
				continue;
			zap_vma_ptes(rv->vma, rv->vma->vm_start,
				     rv->vma->vm_end - rv->vma->vm_start);
			remu_vma_drop_entry(rv);
		}
		mutex_unlock(&um->lock);
		mmap_read_unlock(mm);
		mmput(mm);
		mutex_lock(&um->lock);
	}
}
