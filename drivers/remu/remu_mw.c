// SPDX-License-Identifier: GPL-2.0
/*
 * remu_mw.c - memory windows (type 1 and type 2B) and the rkey lookup that
 * finds either an MR or a window (docs/memory-windows.md).
 *
 * Owns: the windows (struct remu_window, one per ib_mw), alloc_mw and
 * dealloc_mw, bind WQEs (IB_UVERBS_WR_BIND_MW; libremu posts ibv_bind_mw
 * of a type 1 window as one), LOCAL_INV and SEND_WITH_INV of any key
 * (remu_key_invalidate(): a type 2B window here, an MR in remu_mr.c), and
 * the responder's access descriptor for an rkey (remu_rkey_get(),
 * remu_rkey_check()): the MR, referenced, with the range and rights the
 * key grants, a snapshot taken under the window's lock, so an access that
 * got it before a rebind or an invalidation finishes inside the old
 * window on memory that stays registered.  alloc_mw with
 * REMU_ALLOC_MW_INDIRECT makes an indirect key instead (remu_mkey.c).
 *
 * Keys: a window's index is reserved in the MR xarray (a NULL entry, so
 * MR lookups miss it) and the window is stored at the same index in
 * mrs.mw_xa.  The tag is random at allocation; a bind installs the key
 * its WQE carries (type 1: libremu's ibv_inc_rkey() of the old one).
 *
 * Locking:
 *  - win->lock (a plain spinlock: binds, invalidations and lookups all run
 *    in process context) protects the bind state (key, mr, addr, length,
 *    access, qpn, dead), held only to read or swap it, never across a
 *    copy;
 *  - a bound window counts in its MR's num_mw (remu_mr_mw_get()), so the
 *    MR cannot be deregistered, and a lookup takes its MR reference under
 *    win->lock: the MR outlives any access that got the descriptor;
 *  - windows are found under RCU and freed with kfree_rcu.
 */
#include <linux/overflow.h>
#include <linux/slab.h>

#include "remu.h"
#include "remu_trace.h"

/* the rights a window can grant */
#define REMU_MW_RIGHTS	(IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_ATOMIC)

/**
 * struct remu_window - the data path's view of a memory window
 * @lock:	protects everything below except @pd, @type and @index
 * @pd:		the PD it was allocated in
 * @type:	IB_MW_TYPE_1 or IB_MW_TYPE_2 (2B)
 * @index:	key index (fixed for its life)
 * @dead:	deallocated: binds fail
 * @key:	current rkey (the last bind's, or the one from alloc)
 * @mr:		bound MR (counted in its num_mw), NULL when not bound
 * @addr:	first iova of the window
 * @length:	bytes
 * @access:	IB_ACCESS_REMOTE_* rights granted
 * @qpn:	type 2B: the QP it was bound through (the only one it serves)
 * @gen:	the bind's number (remu_mrs_gen()): a new one for every bind,
 *		even one that installs the key of before (remu_rkey.gen)
 * @rcu:	for kfree_rcu
 */
struct remu_window {
	spinlock_t lock;	/* the bind state (see above) */
	struct remu_pd *pd;
	enum ib_mw_type type;
	u32 index;
	bool dead;
	u32 key;
	struct remu_mr *mr;
	u64 addr;
	u64 length;
	unsigned int access;
	u32 qpn;
	u64 gen;
	struct rcu_head rcu;
};

static inline struct remu_mw *to_remu_mw(struct ib_mw *ibmw)
{
	return container_of(ibmw, struct remu_mw, ib_mw);
}

static bool remu_range_in(u64 start, u64 length, u64 iova, u64 len)
{
	u64 off;

	if (!len)
		return true;
	if (iova < start)
		return false;
	off = iova - start;
	return off <= length && len <= length - off;
}

/* ---- the responder's rkey lookup ---- */

int remu_rkey_get(struct remu_dev *rdev, u32 key, struct remu_rkey *rk)
{
	struct remu_window *win;
	int err = -ENOENT;

	memset(rk, 0, sizeof(*rk));
	rk->mr = remu_mr_lookup(rdev, key, REMU_RKEY);
	if (rk->mr) {
		/* after the lookup's acquire of the MR's state */
		rk->gen = READ_ONCE(rk->mr->gen);
		return 0;
	}

	rcu_read_lock();
	win = xa_load(&rdev->mrs.mw_xa, remu_key_index(key));
	if (win) {
		spin_lock(&win->lock);
		/* a bound window holds a count on its MR: refs cannot be 0 */
		if (win->mr && win->key == key &&
		    refcount_inc_not_zero(&win->mr->refs)) {
			rk->mr = win->mr;
			rk->win = true;
			rk->pd = win->pd;
			rk->qpn = win->qpn;
			rk->addr = win->addr;
			rk->length = win->length;
			rk->access = win->access;
			rk->gen = win->gen;
			err = 0;
		}
		spin_unlock(&win->lock);
	}
	rcu_read_unlock();
	return err;
}

int remu_rkey_check(const struct remu_rkey *rk, struct remu_pd *pd, u32 qpn,
		    u64 iova, u64 len, unsigned int access)
{
	if (!rk->win)
		return remu_mr_check(rk->mr, pd, iova, len, access);
	if (rk->pd != pd || (rk->qpn && rk->qpn != qpn))
		return -EPERM;
	if (!remu_range_in(rk->addr, rk->length, iova, len))
		return -ERANGE;
	if (access & ~rk->access)
		return -EACCES;
	/* the window lies inside its MR; the copy checks the MR again */
	return 0;
}

/* ---- bind and invalidate ---- */

/* May @mr carry the window @b asks for, on a QP of @pd? */
static int remu_mw_check_mr(struct remu_mr *mr, struct remu_pd *pd,
			    const struct remu_mw_bind *b)
{
	unsigned int maccess = READ_ONCE(mr->access);

	if (mr->pd != pd)
		return -EPERM;
	/* kernel-only MRs (DMA, fast-reg) carry no windows */
	if (mr->kind == REMU_MR_KERNEL || mr->kind == REMU_MR_FAST_REG)
		return -EACCES;
	if (!(maccess & IB_ACCESS_MW_BIND))
		return -EACCES;
	/* C10-76: remote write and atomic need local write on the MR */
	if ((b->access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(maccess & IB_ACCESS_LOCAL_WRITE))
		return -EACCES;
	if (!remu_range_in(mr->iova, mr->length, b->addr, b->length))
		return -ERANGE;
	return 0;
}

/* May @win be bound as @b asks, through a QP of @pd?  win->lock held. */
static int remu_mw_may_bind(struct remu_window *win, struct remu_pd *pd,
			    const struct remu_mw_bind *b)
{
	lockdep_assert_held(&win->lock);
	if (win->dead)
		return -EINVAL;
	if (win->pd != pd)
		return -EPERM;
	if (remu_key_index(b->new_key) != win->index)
		return -EINVAL;
	if (win->type == IB_MW_TYPE_2) {
		/* a bound type 2B window must be invalidated first */
		if (win->mr)
			return -EBUSY;
		/* and it is bound to memory: no zero-length bind */
		if (!b->length)
			return -EINVAL;
	}
	return 0;
}

int remu_mw_bind(struct remu_dev *rdev, struct remu_pd *pd, u32 qpn,
		 const struct remu_mw_bind *b)
{
	struct remu_mr *mr = NULL, *drop = NULL;
	struct remu_window *win;
	u32 type = 0;
	u64 end;
	int err;

	if (b->access & ~(REMU_MW_RIGHTS | IB_ACCESS_LOCAL_WRITE)) {
		err = -EINVAL;
		goto out_trace;
	}
	if (check_add_overflow(b->addr, b->length, &end)) {
		err = -ERANGE;
		goto out_trace;
	}
	if (b->length) {
		struct remu_mr *ref = remu_mr_lookup(rdev, b->lkey, REMU_LKEY);

		if (!ref) {
			err = -ENOENT;
			goto out_trace;
		}
		err = remu_mw_check_mr(ref, pd, b);
		if (!err && !remu_mr_mw_get(ref))
			err = -ENOENT;
		/* from here the window's count keeps the MR registered */
		remu_mr_put(ref);
		if (err)
			goto out_trace;
		mr = ref;
	}

	rcu_read_lock();
	win = xa_load(&rdev->mrs.mw_xa, remu_key_index(b->mw_key));
	if (!win) {
		err = -EINVAL;
		drop = mr;
		goto out;
	}
	type = win->type;	/* fixed for the window's life */
	spin_lock(&win->lock);
	err = remu_mw_may_bind(win, pd, b);
	if (err) {
		drop = mr;
	} else {
		drop = win->mr;
		win->mr = mr;
		win->key = b->new_key;
		win->addr = b->addr;
		win->length = b->length;
		win->access = b->access & REMU_MW_RIGHTS;
		win->qpn = win->type == IB_MW_TYPE_2 ? qpn : 0;
		win->gen = remu_mrs_gen(&rdev->mrs);
	}
	spin_unlock(&win->lock);
out:
	rcu_read_unlock();
	if (drop)
		remu_mr_mw_put(drop);
out_trace:
	trace_remu_mw_bind(rdev, b, type, qpn, err);
	return err;
}

int remu_key_invalidate(struct remu_dev *rdev, struct remu_pd *pd, u32 qpn,
			u32 key)
{
	struct remu_window *win;
	struct remu_mr *drop = NULL;
	int err = 0;

	rcu_read_lock();
	win = xa_load(&rdev->mrs.mw_xa, remu_key_index(key));
	if (!win) {
		rcu_read_unlock();
		/* an indirect key must have asked for remote invalidation */
		if (qpn && remu_mkey_no_remote_inv(rdev, key))
			return -EACCES;
		return remu_mr_invalidate(rdev, pd, key);
	}
	spin_lock(&win->lock);
	if (win->dead || win->key != key)
		err = -EINVAL;
	else if (win->pd != pd || (qpn && win->mr && win->qpn != qpn))
		err = -EPERM;
	else if (win->type != IB_MW_TYPE_2)
		err = -EACCES;	/* type 1 windows are unbound by a bind */
	else
		swap(drop, win->mr);	/* already free: allowed, as for MRs */
	spin_unlock(&win->lock);
	rcu_read_unlock();
	if (drop)
		remu_mr_mw_put(drop);
	trace_remu_mw_invalidate(rdev, key, qpn, err);
	return err;
}

/* ---- verbs ---- */

/*
 * An indirect key on the MW object (struct remu_alloc_mw_cmd with
 * REMU_ALLOC_MW_INDIRECT): 0 (made), -ENOENT (flags 0: make a window),
 * or an errno.
 */
static int remu_alloc_mw_mkey(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct remu_alloc_mw_resp resp = {};
	struct remu_alloc_mw_cmd cmd = {};
	struct remu_mr *mr;
	int err;

	if (udata->inlen > sizeof(cmd) &&
	    !ib_is_udata_cleared(udata, sizeof(cmd),
				 udata->inlen - sizeof(cmd)))
		return -EOPNOTSUPP;
	err = ib_copy_from_udata(&cmd, udata, min(udata->inlen, sizeof(cmd)));
	if (err)
		return err;
	if (!cmd.flags)
		return -ENOENT;
	if (cmd.flags & ~(REMU_ALLOC_MW_INDIRECT | REMU_ALLOC_MW_REMOTE_INV))
		return -EOPNOTSUPP;
	if (!(cmd.flags & REMU_ALLOC_MW_INDIRECT))
		return -EINVAL;
	mr = remu_mkey_create(ibmw->pd, cmd.max_entries,
			      cmd.flags & REMU_ALLOC_MW_REMOTE_INV);
	if (IS_ERR(mr))
		return PTR_ERR(mr);
	resp.max_entries = mr->mkey_max;
	err = ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
	if (err) {
		remu_mkey_destroy(mr);
		return err;
	}
	ibmw->rkey = mr->key;
	to_remu_mw(ibmw)->mkey = mr;
	return 0;
}

/**
 * remu_alloc_mw - the .alloc_mw op: a window, not bound, with its own key
 * @ibmw:	the core's MW (pd and type set)
 * @udata:	none for a window; struct remu_alloc_mw_cmd for an indirect key
 *
 * Return: 0, -ENOMEM (no memory, or max_mw windows live), or an
 * xarray error.
 */
int remu_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct remu_dev *rdev = to_remu_dev(ibmw->device);
	struct remu_mr_table *t = &rdev->mrs;
	struct remu_window *win;
	u32 index;
	int err;

	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	if (udata && udata->inlen) {
		err = remu_alloc_mw_mkey(ibmw, udata);
		if (err != -ENOENT)
			return err;
	}
	if (atomic_inc_return(&t->mw_count) > rdev->attr.max_mw) {
		err = -ENOMEM;
		goto err_count;
	}
	win = kzalloc(sizeof(*win), GFP_KERNEL);
	if (!win) {
		err = -ENOMEM;
		goto err_count;
	}
	spin_lock_init(&win->lock);
	win->pd = to_remu_pd(ibmw->pd);
	win->type = ibmw->type;

	/* the index is reserved among the MRs' (NULL: MR lookups miss it) */
	err = xa_alloc_cyclic(&t->xa, &index, NULL,
			      XA_LIMIT(1, REMU_KEY_INDEX_MAX), &t->next_index,
			      GFP_KERNEL);
	if (err < 0)
		goto err_free;
	win->index = index;
	win->key = remu_key_new(index);
	err = xa_err(xa_store(&t->mw_xa, index, win, GFP_KERNEL));
	if (err)
		goto err_index;

	ibmw->rkey = win->key;
	to_remu_mw(ibmw)->win = win;
	remu_obj_get(REMU_OBJ_MW);
	return 0;

err_index:
	xa_erase(&t->xa, index);
err_free:
	kfree(win);
err_count:
	atomic_dec(&t->mw_count);
	return err;
}

/**
 * remu_dealloc_mw - the .dealloc_mw op; a bound window is unbound first
 * @ibmw: the MW
 *
 * Accesses that already hold a descriptor finish on the MR they
 * referenced; new lookups miss from here.
 * Return: 0.
 */
int remu_dealloc_mw(struct ib_mw *ibmw)
{
	struct remu_window *win = to_remu_mw(ibmw)->win;
	struct remu_mr_table *t = &to_remu_dev(ibmw->device)->mrs;
	struct remu_mr *drop = NULL;

	if (to_remu_mw(ibmw)->mkey) {
		remu_mkey_destroy(to_remu_mw(ibmw)->mkey);
		return 0;
	}
	spin_lock(&win->lock);
	win->dead = true;
	swap(drop, win->mr);
	spin_unlock(&win->lock);
	if (drop)
		remu_mr_mw_put(drop);

	xa_erase(&t->mw_xa, win->index);
	xa_erase(&t->xa, win->index);
	atomic_dec(&t->mw_count);
	remu_obj_put(REMU_OBJ_MW);
	kfree_rcu(win, rcu);
	return 0;
}

/* ---- device ---- */

/**
 * remu_mw_dev_init - window table and attributes of a new device
 * @rdev: the device (called from remu_mr_dev_init())
 */
void remu_mw_dev_init(struct remu_dev *rdev)
{
	struct ib_device_attr *a = &rdev->attr;

	xa_init(&rdev->mrs.mw_xa);
	atomic_set(&rdev->mrs.mw_count, 0);
	a->max_mw = REMU_MAX_MW;
	a->device_cap_flags |= IB_DEVICE_MEM_WINDOW |
			       IB_DEVICE_MEM_WINDOW_TYPE_2B;
}

/**
 * remu_mw_dev_fini - release the window table
 * @rdev: the device; the core has deallocated every window by now
 */
void remu_mw_dev_fini(struct remu_dev *rdev)
{
	if (!xa_empty(&rdev->mrs.mw_xa))
		pr_err("%s: %d memory window(s) left at device release\n",
		       dev_name(&rdev->ib_dev.dev),
		       atomic_read(&rdev->mrs.mw_count));
	xa_destroy(&rdev->mrs.mw_xa);
}
