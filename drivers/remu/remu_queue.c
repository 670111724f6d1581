// SPDX-License-Identifier: GPL-2.0
/*
 * remu_queue.c - rings shared with userspace, and their mmap.
 *
 * Owns: the ring buffers of every CQ, SQ, RQ and SRQ (one vmalloc()ed,
 * zeroed buffer each: struct remu_ring_hdr, then a power-of-two number
 * of fixed-size slots), the mmap entries through which userspace maps
 * them, the module's workqueue and the kmem_cache of mmap entries.
 *
 * Accounting: the rings of user objects are charged to the memory cgroup
 * of the process that creates them (__GFP_ACCOUNT), as the kernel
 * charges other kernel memory a process maps and keeps resident (BPF
 * maps, io_uring rings); a container cannot pin more of it than its
 * memory.max.  They are not charged to RLIMIT_MEMLOCK: that limit is for
 * the process's own pages pinned by ib_umem_get() (pinned MRs), which is
 * what mlx5's rings are (user memory); docs/compatibility.md.
 *
 * Trust: for a ring userspace maps, the header is writable by the process.
 * The kernel keeps its own copy of the geometry (size, mask, slot size)
 * and of the index it owns (struct remu_queue.prod on the producer side,
 * .cons on the consumer side; each written only by its side), reads the
 * other side's index from the header with smp_load_acquire() and accepts
 * it only if it is within num_slots of its own; an index out of range
 * makes the ring look empty (consumer side) or full (producer side),
 * never an out-of-bounds access.  Kernel-only rings work the same way.
 * Slot addresses always come from a masked index.  A consumer must copy a
 * user-produced slot before validating it (the process may rewrite it at
 * any time).
 *
 * Memory ordering: the producer fills a slot, then publishes the new
 * producer index with smp_store_release(); the consumer reads that index
 * with smp_load_acquire() before reading the slot, and publishes its own
 * index with smp_store_release() once it no longer needs the slot; the
 * producer reads it with smp_load_acquire() before reusing a slot.
 *
 * Lifetime: a kernel ring is vfree()d by remu_queue_destroy().  Once a
 * ring has an mmap entry the entry owns the buffer:
 * remu_queue_destroy() removes the entry, and remu_mmap_free() frees the
 * buffer when the last reference is gone.  Every mapping of a ring holds
 * a reference (remu_umap.c), so mapped pages stay valid until the process
 * unmaps them, or until the mapping is zapped because the device was
 * disassociated from the process (rdma link delete with the process
 * alive); the process then sees a page of zeros, which libremu detects
 * by the ring's magic (uapi remu-abi.h).
 *
 * Locking: none here.  Each index has one writer: callers serialise the
 * producer side and the consumer side of a ring with their own locks
 * (see remu_cq.c, remu_qp.c, remu_srq.c).
 */
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>

#include "remu.h"
#include "remu_qp.h"

static struct kmem_cache *remu_mmap_cache;
struct workqueue_struct *remu_wq;

/**
 * remu_queue_init - allocate a ring
 * @q: the ring, zeroed by the caller
 * @min_slots: at least this many slots (rounded up to a power of two)
 * @slot_size: bytes per slot, a multiple of 8
 * @user: which side userspace will own
 *
 * Context: process context, may sleep; a user ring is charged to the
 * caller's memory cgroup.
 * Return: 0, -EINVAL for zero or absurd sizes, or -ENOMEM.
 */
int remu_queue_init(struct remu_queue *q, u32 min_slots, u32 slot_size,
		    enum remu_ring_user user)
{
	u32 n;

	if (!min_slots || min_slots > (1u << 24) || !slot_size ||
	    slot_size % 8 || slot_size > PAGE_SIZE)
		return -EINVAL;
	n = roundup_pow_of_two(min_slots);
	q->size = PAGE_ALIGN(REMU_RING_HDR_SIZE + (size_t)n * slot_size);
	/*
	 * A process's ring: charged to its memcg, and a ring beyond the
	 * memcg's limit fails (ENOMEM) rather than invoking its OOM killer.
	 */
	q->buf = __vmalloc(q->size, user == REMU_RING_KERNEL ?
			   GFP_KERNEL | __GFP_ZERO :
			   GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NOWARN |
			   __GFP_RETRY_MAYFAIL);
	if (!q->buf)
		return -ENOMEM;
	remu_obj_get(REMU_OBJ_RING);
	q->hdr = q->buf;
	q->hdr->magic = REMU_RING_MAGIC;
	q->num_slots = n;
	q->mask = n - 1;
	q->slot_size = slot_size;
	q->prod = 0;
	q->cons = 0;
	q->user = user;
	q->mentry = NULL;
	return 0;
}

static void remu_ring_buf_free(void *buf)
{
	vfree(buf);
	remu_obj_put(REMU_OBJ_RING);
}

/**
 * remu_queue_destroy - release a ring
 * @q: the ring; its buffer lives on while an mmap of it is pending
 *
 * Context: process context.
 */
void remu_queue_destroy(struct remu_queue *q)
{
	if (!q->buf)
		return;
	if (q->mentry)
		rdma_user_mmap_entry_remove(&q->mentry->rdma);
	else
		remu_ring_buf_free(q->buf);
	q->buf = NULL;
	q->hdr = NULL;
	q->mentry = NULL;
}

/**
 * remu_queue_mmap_insert - make @q mappable by the process of @uc
 * @q: the ring
 * @uc: the user context
 * @info: filled with what the provider needs to map and use the ring
 *
 * From here on the mmap entry owns the buffer (see the file comment).
 * Return: 0 or a negative errno.
 */
int remu_queue_mmap_insert(struct remu_queue *q, struct ib_ucontext *uc,
			   struct remu_ring_info *info)
{
	struct remu_mmap_entry *me;
	int err;

	me = kmem_cache_zalloc(remu_mmap_cache, GFP_KERNEL);
	if (!me)
		return -ENOMEM;
	me->buf = q->buf;
	err = rdma_user_mmap_entry_insert(uc, &me->rdma, q->size);
	if (err) {
		kmem_cache_free(remu_mmap_cache, me);
		return err;
	}
	q->mentry = me;
	info->mmap_offset = rdma_user_mmap_get_offset(&me->rdma);
	info->mmap_size = q->size;
	info->num_slots = q->num_slots;
	info->slot_size = q->slot_size;
	return 0;
}

/**
 * remu_mmap - the .mmap op: map a ring into the calling process
 * @uc: the user context the offset belongs to
 * @vma: the mapping; its size must be the ring's
 *
 * Return: 0, -EINVAL for an unknown offset or a wrong size or flags,
 * -EIO once the context is disassociated, -ENOMEM.
 */
int remu_mmap(struct ib_ucontext *uc, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *re;
	struct remu_mmap_entry *me;
	int err;

	re = rdma_user_mmap_entry_get(uc, vma);
	if (!re)
		return -EINVAL;
	me = container_of(re, struct remu_mmap_entry, rdma);
	if (vma->vm_end - vma->vm_start != re->npages << PAGE_SHIFT ||
	    !(vma->vm_flags & VM_SHARED)) {
		err = -EINVAL;
		goto out;
	}
	err = remu_umap_map(to_remu_uc(uc)->umap, vma, me);
	if (!err)
		return 0;	/* the mapping holds the entry reference */
out:
	rdma_user_mmap_entry_put(re);
	return err;
}

/**
 * remu_mmap_free - the .mmap_free op: the last reference to an entry is gone
 * @entry: the entry, removed and no longer mapped through the core
 */
void remu_mmap_free(struct rdma_user_mmap_entry *entry)
{
	struct remu_mmap_entry *me = container_of(entry, struct remu_mmap_entry,
						  rdma);

	if (me->ops) {
		me->ops->free(me);
		return;
	}
	remu_ring_buf_free(me->buf);
	kmem_cache_free(remu_mmap_cache, me);
}

/**
 * remu_queue_slot_at - the slot of index @idx (masked)
 * @q: the ring
 * @idx: a free-running index
 */
void *remu_queue_slot_at(struct remu_queue *q, u32 idx)
{
	return q->buf + REMU_RING_HDR_SIZE + (size_t)(idx & q->mask) * q->slot_size;
}

/*
 * The other side's index, as the producer sees it: the consumer index
 * from the header.  One more than num_slots behind (only a broken or
 * hostile process writes that) reads as "full".
 */
static u32 remu_queue_peer_cons(struct remu_queue *q)
{
	/* pairs with the consumer's release of the index: done with the slots */
	u32 v = smp_load_acquire(&q->hdr->cons);

	if (q->prod - v > q->num_slots)
		v = q->prod - q->num_slots;
	return v;
}

/* Likewise for the consumer: a bad producer index reads as "empty". */
static u32 remu_queue_peer_prod(struct remu_queue *q)
{
	/* pairs with the producer's release of the index: the slots are filled */
	u32 v = smp_load_acquire(&q->hdr->prod);

	if (v - q->cons > q->num_slots)
		v = q->cons;
	return v;
}

/**
 * remu_queue_producer_slot - the next free slot, kernel producer side
 * @q: a ring the kernel produces into
 *
 * Context: caller serialises the producer side.
 * Return: the slot to fill, or NULL when the ring is full.
 */
void *remu_queue_producer_slot(struct remu_queue *q)
{
	if (q->prod - remu_queue_peer_cons(q) >= q->num_slots)
		return NULL;
	return remu_queue_slot_at(q, q->prod);
}

/** remu_queue_produce - publish the slot remu_queue_producer_slot() gave */
void remu_queue_produce(struct remu_queue *q)
{
	q->prod++;
	/* the slot before the index: pairs with remu_queue_peer_prod(), libremu */
	smp_store_release(&q->hdr->prod, q->prod);
}

/**
 * remu_queue_consumer_slot - the oldest filled slot, kernel consumer side
 * @q: a ring the kernel consumes from
 *
 * Context: caller serialises the consumer side.
 * Return: the slot, or NULL when the ring is empty.  For a user-produced
 * ring the caller copies what it uses (READ_ONCE()) before trusting it.
 */
void *remu_queue_consumer_slot(struct remu_queue *q)
{
	if (remu_queue_peer_prod(q) == q->cons)
		return NULL;
	return remu_queue_slot_at(q, q->cons);
}

/** remu_queue_consume - release the slot remu_queue_consumer_slot() gave */
void remu_queue_consume(struct remu_queue *q)
{
	q->cons++;
	/* done with the slot: pairs with remu_queue_peer_cons(), libremu */
	smp_store_release(&q->hdr->cons, q->cons);
}

/**
 * remu_queue_used_by_producer - filled slots, seen from the producer side
 * @q: the ring; caller serialises the producer side
 */
u32 remu_queue_used_by_producer(struct remu_queue *q)
{
	return q->prod - remu_queue_peer_cons(q);
}

/**
 * remu_queue_used_by_consumer - filled slots, seen from the consumer side
 * @q: the ring; caller serialises the consumer side
 */
u32 remu_queue_used_by_consumer(struct remu_queue *q)
{
	return remu_queue_peer_prod(q) - q->cons;
}

/**
 * remu_queue_discard - drop every filled slot (QP to RESET)
 * @q: a ring the kernel consumes from; consumer side serialised
 */
void remu_queue_discard(struct remu_queue *q)
{
	q->cons = remu_queue_peer_prod(q);
	/* as remu_queue_consume(): pairs with remu_queue_peer_cons(), libremu */
	smp_store_release(&q->hdr->cons, q->cons);
}

/**
 * remu_queues_init - module init: workqueue and caches of the queue objects
 *
 * Return: 0 or -ENOMEM.
 */
int remu_queues_init(void)
{
	remu_mmap_cache = KMEM_CACHE(remu_mmap_entry, 0);
	if (!remu_mmap_cache)
		return -ENOMEM;
	remu_wq = alloc_workqueue("remu", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!remu_wq) {
		kmem_cache_destroy(remu_mmap_cache);
		return -ENOMEM;
	}
	return 0;
}

/**
 * remu_queues_exit - module exit, after every device is gone
 *
 * kmem_cache_destroy() complains about any object still allocated.
 */
void remu_queues_exit(void)
{
	destroy_workqueue(remu_wq);
	kmem_cache_destroy(remu_mmap_cache);
}
