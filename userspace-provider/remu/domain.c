// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * domain.c - libremu's protection domains, thread domains and parent
 * domains, and the lock of a ring that a thread domain takes away.
 *
 * A protection domain is the kernel's PD.  A thread domain
 * (ibv_alloc_td()) is a promise of the application: every object made
 * on a parent domain that holds it is used by one thread at a time.  A
 * parent domain (ibv_alloc_parent_domain()) is a PD, a thread domain or
 * none, and the application's allocators; it stands in for its PD in
 * every verb (its handle is the PD's), so the kernel never sees it.
 * What it changes, as on mlx5 (providers/mlx5/verbs.c, read for the
 * contract only):
 *   - a QP or SRQ made on a parent domain with a thread domain has no
 *     locks on its rings (struct remu_lock); a CQ keeps its lock (mlx5's
 *     too: a CQ is lock-free with IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
 *     cq_ex.c);
 *   - ibv_create_cq_ex() takes a parent domain (IBV_CQ_INIT_ATTR_MASK_PD;
 *     a plain PD there is EINVAL);
 *   - the allocators are kept but never called: mlx5 calls them for the
 *     buffers it allocates in user space and hands to the device (queue
 *     buffers, doorbell records); remu's queues are rings the kernel
 *     allocates and the process maps (remu_ring.h), so libremu allocates
 *     no such buffer and uses the default for every one, as if each call
 *     had answered IBV_ALLOCATOR_USE_DEFAULT (docs/compatibility.md).
 * Reference counts, as mlx5's: a PD counts the parent domains made on
 * it, a thread domain its parent domains, a parent domain its QPs and
 * CQs; freeing one that is counted fails with EBUSY and changes nothing.
 * SRQs and MRs on a parent domain are not counted (nor on mlx5).
 *
 * Locking: the counts are atomics; nothing else here is shared.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "remu.h"

/* ---- the lock of a ring ---- */

/* @l for an object made on @pd: none when @pd holds a thread domain */
void remu_lock_init(struct remu_lock *l, struct ibv_pd *pd)
{
	l->need_lock = !(pd && to_rpd(pd)->td);
	l->in_use = false;
	pthread_spin_init(&l->spin, PTHREAD_PROCESS_PRIVATE);
}

void remu_lock_destroy(struct remu_lock *l)
{
	pthread_spin_destroy(&l->spin);
}

void remu_lock_violation(void)
{
	fprintf(stderr,
		"libremu: two threads at once in a QP or SRQ of a thread domain"
		" (ibv_alloc_td: one thread at a time); aborting\n");
	abort();
}

/* ---- protection domains ---- */

struct ibv_pd *remu_alloc_pd(struct ibv_context *ctx)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd = {};
	struct remu_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	ret = ibv_cmd_alloc_pd(ctx, &pd->ibpd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	atomic_init(&pd->refs, 1);
	return &pd->ibpd;
}

static int remu_dealloc_parent_domain(struct remu_pd *pd)
{
	if (atomic_load(&pd->refs) > 1)
		return EBUSY;
	atomic_fetch_sub(&pd->parent->refs, 1);
	if (pd->td)
		atomic_fetch_sub(&pd->td->refs, 1);
	free(pd);
	return 0;
}

/* ibv_dealloc_pd(): a PD (also an imported one, as mlx5) or a parent domain */
int remu_dealloc_pd(struct ibv_pd *ibpd)
{
	struct remu_pd *pd = to_rpd(ibpd);
	int ret;

	if (pd->parent)
		return remu_dealloc_parent_domain(pd);
	if (atomic_load(&pd->refs) > 1)
		return EBUSY;
	ret = ibv_cmd_dealloc_pd(ibpd);
	if (ret)
		return ret;
	free(pd);
	return 0;
}

/* ---- thread domains ---- */

struct ibv_td *remu_alloc_td(struct ibv_context *ctx,
			     struct ibv_td_init_attr *attr)
{
	struct remu_td *td;

	if (attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->ibtd.context = ctx;
	atomic_init(&td->refs, 1);
	return &td->ibtd;
}

int remu_dealloc_td(struct ibv_td *ibtd)
{
	struct remu_td *td = to_rtd(ibtd);

	if (atomic_load(&td->refs) > 1)
		return EBUSY;
	free(td);
	return 0;
}

/* ---- parent domains ---- */

/*
 * The checks are mlx5's (a PD is required, comp_mask only the two
 * attributes), and a PD or thread domain of another context is EINVAL
 * (mlx5 takes it and builds a parent domain that cannot work).  A parent
 * domain made on a parent domain stands for the same protection domain
 * and counts as one of the first's.
 */
struct ibv_pd *remu_alloc_parent_domain(struct ibv_context *ctx,
				struct ibv_parent_domain_init_attr *attr)
{
	struct remu_pd *pd;

	if (ibv_check_alloc_parent_domain(attr))
		return NULL;
	if (!check_comp_mask(attr->comp_mask,
			     IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) ||
	    attr->pd->context != ctx ||
	    (attr->td && attr->td->context != ctx)) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->parent = to_rpd(attr->pd);
	atomic_fetch_add(&pd->parent->refs, 1);
	if (attr->td) {
		pd->td = to_rtd(attr->td);
		atomic_fetch_add(&pd->td->refs, 1);
	}
	atomic_init(&pd->refs, 1);
	ibv_initialize_parent_domain(&pd->ibpd, attr->pd);
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	return &pd->ibpd;
}

/*
 * A QP or CQ is being made on @ibpd: if it is a parent domain, count the
 * object (remu_parent_domain_put() when it is destroyed) and return it.
 */
struct remu_pd *remu_parent_domain_get(struct ibv_pd *ibpd)
{
	struct remu_pd *pd = ibpd ? to_rpd(ibpd) : NULL;

	if (!pd || !pd->parent)
		return NULL;
	atomic_fetch_add(&pd->refs, 1);
	return pd;
}

/* A QP or CQ made on @pd is gone (a PD that is no parent domain: nothing) */
void remu_parent_domain_put(struct remu_pd *pd)
{
	if (pd && pd->parent)
		atomic_fetch_sub(&pd->refs, 1);
}
