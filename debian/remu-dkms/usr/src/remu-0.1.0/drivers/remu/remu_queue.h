/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_queue.h - the rings remu shares with userspace (CQ, SQ, RQ, SRQ)
 * and the per-device state of the queue objects.  The ring layout is
 * defined in uapi/rdma/remu-abi.h; see remu_queue.c for the rules.
 */
#ifndef REMU_QUEUE_H
#define REMU_QUEUE_H

#include <linux/types.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/remu-abi.h>

/* Which side of a ring userspace owns; the kernel owns the other one. */
enum remu_ring_user {
	REMU_RING_KERNEL,		/* both sides in the kernel, not mapped */
	REMU_RING_USER_PRODUCES,	/* SQ/RQ/SRQ of a user QP/SRQ */
	REMU_RING_USER_CONSUMES,	/* CQ of a user CQ */
};

struct remu_mmap_entry;

/**
 * struct remu_mmap_ops - an mmap entry whose buffer is not a vmalloc()ed ring
 * @pfn:	page frame number of byte @off of the buffer (page aligned)
 * @free:	the last reference to the entry is gone: free it and its buffer
 * @mapped:	optional: a process mapped the entry at @va (tracing)
 */
struct remu_mmap_ops {
	unsigned long (*pfn)(struct remu_mmap_entry *me, unsigned long off);
	void (*free)(struct remu_mmap_entry *me);
	void (*mapped)(struct remu_mmap_entry *me, unsigned long va);
};

/*
 * An mmap entry: owns the ring buffer once the ring is mapped.  With @ops
 * NULL, @buf is a vmalloc()ed ring; otherwise @ops says how to reach and
 * free the buffer (device memory, remu_dm.c).
 */
struct remu_mmap_entry {
	struct rdma_user_mmap_entry rdma;
	void *buf;
	const struct remu_mmap_ops *ops;
};

/**
 * struct remu_queue - one ring, the kernel's view
 * @buf:	vmalloc_user() buffer: header then slots
 * @hdr:	the header at the start of @buf
 * @size:	bytes of @buf, page aligned
 * @num_slots:	number of slots, a power of two (the kernel's copy)
 * @mask:	@num_slots - 1
 * @slot_size:	bytes per slot
 * @prod:	producer index; written by the producer side only (when
 *		the kernel produces; unused when userspace does)
 * @cons:	consumer index; written by the consumer side only
 * @user:	which side userspace owns
 * @mentry:	the mmap entry once inserted (it then owns @buf), or NULL
 */
struct remu_queue {
	void *buf;
	struct remu_ring_hdr *hdr;
	size_t size;
	u32 num_slots;
	u32 mask;
	u32 slot_size;
	u32 prod;
	u32 cons;
	enum remu_ring_user user;
	struct remu_mmap_entry *mentry;
};

/**
 * struct remu_dev_queues - per-device state of the queue objects
 * @qp_xa:	QPN -> struct remu_qp (ALLOC, irq-safe lock)
 * @qp_next:	cyclic QPN allocation cursor
 * @ah_xa:	AH number -> struct remu_ah (ALLOC, irq-safe lock)
 * @ah_next:	cyclic AH number cursor
 * @nr_qp, @nr_cq, @nr_srq, @nr_ah: live objects, against the limits
 */
struct remu_dev_queues {
	struct xarray qp_xa;
	u32 qp_next;
	struct xarray ah_xa;
	u32 ah_next;
	atomic_t nr_qp;
	atomic_t nr_cq;
	atomic_t nr_srq;
	atomic_t nr_ah;
};

int remu_queue_init(struct remu_queue *q, u32 min_slots, u32 slot_size,
		    enum remu_ring_user user);
void remu_queue_destroy(struct remu_queue *q);
int remu_queue_mmap_insert(struct remu_queue *q, struct ib_ucontext *uc,
			   struct remu_ring_info *info);
void *remu_queue_slot_at(struct remu_queue *q, u32 idx);
void *remu_queue_producer_slot(struct remu_queue *q);
void remu_queue_produce(struct remu_queue *q);
void *remu_queue_consumer_slot(struct remu_queue *q);
void remu_queue_consume(struct remu_queue *q);
u32 remu_queue_used_by_producer(struct remu_queue *q);
u32 remu_queue_used_by_consumer(struct remu_queue *q);
void remu_queue_discard(struct remu_queue *q);

int remu_mmap(struct ib_ucontext *uc, struct vm_area_struct *vma);
void remu_mmap_free(struct rdma_user_mmap_entry *entry);

int remu_queues_init(void);
void remu_queues_exit(void);

#endif /* REMU_QUEUE_H */
