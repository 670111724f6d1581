/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * remu_ring.h - the provider's side of the rings shared with the kernel
 * (layout and index rules in <rdma/remu-abi.h>).
 *
 * The provider produces into SQ, RQ and SRQ rings and consumes from CQ
 * rings.  It owns one index per ring (struct remu_uring.idx: the producer
 * index of a WQ ring, the consumer index of a CQ ring), keeps it in
 * private memory, and publishes it in the shared header; it only reads
 * the kernel's index from the header.  Callers serialise each ring with
 * their own lock.
 *
 * Memory ordering, per function:
 *   remu_uring_prod_slot()    acquire-load of the kernel's cons: the
 *                             kernel is done with a slot before we refill it
 *   remu_uring_prod_publish() release-store of prod: the WQEs written
 *                             before it are visible to the kernel that
 *                             acquire-loads prod
 *   remu_uring_cons_slot()    acquire-load of the kernel's prod: the CQE
 *                             it published is visible before we read it
 *   remu_uring_cons_publish() release-store of cons: our reads of the
 *                             CQEs are done before the kernel may reuse
 *                             their slots
 *   *_advance()               private index only, no ordering
 */
#ifndef REMU_RING_H
#define REMU_RING_H

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <rdma/remu-abi.h>

struct remu_uring {
	void *map;
	size_t map_size;
	struct remu_ring_hdr *hdr;
	uint8_t *slots;
	uint32_t num_slots;
	uint32_t mask;
	uint32_t slot_size;
	uint32_t idx;
};

/* Map the ring the kernel described in @info; 0 or an errno. */
static inline int remu_uring_map(struct remu_uring *r, int cmd_fd,
				 const struct remu_ring_info *info,
				 int provider_produces)
{
	void *p;

	if (!info->num_slots || (info->num_slots & (info->num_slots - 1)) ||
	    REMU_RING_HDR_SIZE + (uint64_t)info->num_slots * info->slot_size >
	    info->mmap_size)
		return EPROTO;
	p = mmap(NULL, info->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 cmd_fd, info->mmap_offset);
	if (p == MAP_FAILED)
		return errno;
	r->map = p;
	r->map_size = info->mmap_size;
	r->hdr = p;
	r->slots = (uint8_t *)p + REMU_RING_HDR_SIZE;
	r->num_slots = info->num_slots;
	r->mask = info->num_slots - 1;
	r->slot_size = info->slot_size;
	r->idx = provider_produces ? r->hdr->prod : r->hdr->cons;
	return 0;
}

static inline void remu_uring_unmap(struct remu_uring *r)
{
	if (r->map)
		munmap(r->map, r->map_size);
	r->map = NULL;
}

static inline void *remu_uring_slot(struct remu_uring *r, uint32_t i)
{
	return r->slots + (size_t)(i & r->mask) * r->slot_size;
}

/*
 * The ring is gone: the device was removed under the process and the
 * kernel replaced the mapping with a page of zeros (no magic there).
 * Callers fail with EIO instead of reading or writing that page.
 */
static inline int remu_uring_dead(struct remu_uring *r)
{
	return __atomic_load_n(&r->hdr->magic, __ATOMIC_ACQUIRE) !=
	       REMU_RING_MAGIC;
}

/* Producer: the slot for the next WQE, or NULL when the ring is full. */
static inline void *remu_uring_prod_slot(struct remu_uring *r)
{
	uint32_t cons = __atomic_load_n(&r->hdr->cons, __ATOMIC_ACQUIRE);

	if (r->idx - cons >= r->num_slots)
		return NULL;
	return remu_uring_slot(r, r->idx);
}

static inline void remu_uring_prod_advance(struct remu_uring *r)
{
	r->idx++;
}

static inline void remu_uring_prod_publish(struct remu_uring *r)
{
	__atomic_store_n(&r->hdr->prod, r->idx, __ATOMIC_RELEASE);
}

/* Consumer: the oldest unread CQE, or NULL when the ring is empty. */
static inline void *remu_uring_cons_slot(struct remu_uring *r)
{
	uint32_t prod = __atomic_load_n(&r->hdr->prod, __ATOMIC_ACQUIRE);

	if (prod == r->idx)
		return NULL;
	return remu_uring_slot(r, r->idx);
}

static inline void remu_uring_cons_advance(struct remu_uring *r)
{
	r->idx++;
}

static inline void remu_uring_cons_publish(struct remu_uring *r)
{
	__atomic_store_n(&r->hdr->cons, r->idx, __ATOMIC_RELEASE);
}

#endif /* REMU_RING_H */
