// SPDX-License-Identifier: GPL-2.0
/*
 * remu_rereg.c - ibv_rereg_mr (ib_device_ops.rereg_user_mr).
 *
 * Owns: what a re-registration becomes.  remu never changes an MR in
 * place: a successful rereg builds a complete new MR with remu_reg_user_mr()
 * (so pinned, explicit and implicit ODP MRs come out as a fresh
 * registration would) from the old MR's parameters with the requested
 * ones substituted, gives it the old MR's key (remu_mr_replace()) and
 * returns it; the core then deregisters the old MR, which waits for the
 * accesses in flight on it.  So the keys stay the same for every flag
 * combination (as on mlx5 and rxe; docs/compatibility.md), a lookup
 * finds the old or the new MR and never neither, and on any error the old
 * MR is unchanged (stronger than IBV_REREG_MR_ERR_CMD's "MR shouldn't be
 * used").
 *
 * Refused as mlx5 refuses them: flags other than TRANS/PD/ACCESS
 * (-EOPNOTSUPP), MRs that are not user MRs (-EINVAL), MRs with windows
 * bound (-EBUSY), write rights added without a new translation to pages
 * pinned read-only (-EACCES, ib_umem_check_rereg()), and an implicit ODP
 * MR losing ON_DEMAND without a new translation (-EOPNOTSUPP).
 *
 * Locking: none of its own.  The core holds the MR's uobject for writing,
 * so no other verb on this MR runs concurrently; the data path is kept
 * safe by the access layer's reference/done protocol (remu_mr.h).
 */
#include <rdma/ib_umem.h>

#include "remu.h"
#include "remu_trace.h"

#define REMU_REREG_FLAGS \
	(IB_MR_REREG_TRANS | IB_MR_REREG_PD | IB_MR_REREG_ACCESS)

/* implicit ODP: the only MR kind whose length is the whole address space */
static bool remu_mr_is_implicit(const struct remu_mr *mr)
{
	return mr->kind == REMU_MR_ODP && mr->length == U64_MAX;
}

/**
 * struct remu_rereg_args - what the new registration is made of
 * @ibpd:	its PD
 * @start:	user address
 * @length:	bytes
 * @iova:	iova of @start
 * @access:	IB_ACCESS_* rights
 */
struct remu_rereg_args {
	struct ib_pd *ibpd;
	u64 start;
	u64 length;
	u64 iova;
	int access;
};

/*
 * Fill what @flags does not change in @a from @mr.  Return: 0, or
 * -EOPNOTSUPP for an implicit ODP MR losing ON_DEMAND without a new
 * translation.
 */
static int remu_rereg_keep(struct remu_mr *mr, int flags,
			   struct remu_rereg_args *a)
{
	if (!(flags & IB_MR_REREG_ACCESS))
		a->access = mr->access;
	if (!(flags & IB_MR_REREG_PD))
		a->ibpd = mr->ib_mr.pd;
	if (flags & IB_MR_REREG_TRANS)
		return 0;
	if (remu_mr_is_implicit(mr)) {
		if (!(a->access & IB_ACCESS_ON_DEMAND))
			return -EOPNOTSUPP;
		a->start = 0;
		a->length = U64_MAX;
		a->iova = 0;
	} else {
		a->start = mr->umem->address;
		a->length = mr->length;
		a->iova = mr->iova;
	}
	return 0;
}

static struct ib_mr *remu_rereg(struct remu_mr *mr, int flags,
				struct remu_rereg_args *a,
				struct ib_udata *udata)
{
	struct ib_mr *new;
	int err;

	if (flags & ~REMU_REREG_FLAGS)
		return ERR_PTR(-EOPNOTSUPP);
	if (mr->kind != REMU_MR_UMEM && mr->kind != REMU_MR_ODP)
		return ERR_PTR(-EINVAL);
	if (atomic_read(&mr->num_mw))
		return ERR_PTR(-EBUSY);
	err = ib_umem_check_rereg(mr->umem, flags, a->access);
	if (!err)
		err = remu_rereg_keep(mr, flags, a);
	if (err)
		return ERR_PTR(err);

	new = remu_reg_user_mr(a->ibpd, a->start, a->length, a->iova,
			       a->access, udata);
	if (IS_ERR(new))
		return new;
	err = remu_mr_replace(mr, to_remu_mr(new));
	if (err) {
		remu_dereg_mr(new, udata);
		return ERR_PTR(err);
	}
	return new;
}

/**
 * remu_rereg_user_mr - re-register a user MR as a new MR
 * @ibmr:	the MR (its uobject held for writing by the core)
 * @flags:	IB_MR_REREG_* (the core made sure it is non-zero and known)
 * @start:	with IB_MR_REREG_TRANS: new user address
 * @length:	with IB_MR_REREG_TRANS: new length
 * @iova:	with IB_MR_REREG_TRANS: new iova (same page offset as @start)
 * @access:	with IB_MR_REREG_ACCESS: new IB_ACCESS_* (core-checked)
 * @ibpd:	with IB_MR_REREG_PD: new PD
 * @udata:	driver data (remu has none)
 *
 * Return: the new MR under @ibmr's keys (the core deregisters @ibmr), or
 * an ERR_PTR with @ibmr untouched.  Never NULL (nothing changes in place).
 */
struct ib_mr *remu_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				 u64 length, u64 iova, int access,
				 struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct remu_rereg_args a = {
		.ibpd = ibpd, .start = start, .length = length, .iova = iova,
		.access = access,
	};
	struct ib_mr *new = remu_rereg(to_remu_mr(ibmr), flags, &a, udata);

	trace_remu_mr_rereg(to_remu_mr(ibmr), flags, new);
	return new;
}
