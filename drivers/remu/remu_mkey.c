// SPDX-License-Identifier: GPL-2.0
/*
 * remu_mkey.c - indirect memory keys (user-mode memory registration).
 *
 * Owns: the REMU_MR_INDIRECT kind of MR, whose memory is a list of pieces
 * of other keys (docs/indirect-keys.md): its creation and destruction
 * (through the uverbs MW object, remu_mw.c calls in), its configuration
 * by a REMU_WR_UMR send WQE (remu_req.c calls in), and the translation
 * of "byte offset in the key" into "a segment of the piece's MR" for the
 * access layer (remu_mr.c calls remu_mkey_map() from its map loop and
 * remu_mkey_check() from remu_mr_check()).
 *
 * An entry names its MR by key, never by pointer: every access looks the
 * entry's key up again (remu_mr_lookup(), which takes a reference that
 * lives until the segment is unmapped), so deregistering an MR that an
 * indirect key points to is never delayed and never leaves a dangling
 * pointer; the access then fails.
 *
 * Locking: the layout is RCU-protected (mr->mkey_layout): a UMR publishes
 * a new one with rcu_replace_pointer() while the key is in the transient
 * REMU_MR_CONFIG state (which lookups ignore, as FREE), the old one is
 * freed with kfree_rcu; translations read it under rcu_read_lock() only
 * and copy out what they need.  State changes are cmpxchg()es as for
 * fast-reg MRs: FREE -> CONFIG (UMR) -> VALID, VALID -> FREE
 * (remu_mr_invalidate()), anything -> ZOMBIE (remu_dereg_mr()).
 *
 * Counters (remu_counters.h): umr_configs / umr_errors per UMR executed,
 * mkey_segments per segment mapped through a key (at each nesting
 * level), mkey_entry_errors per access the outermost key's entries
 * refused (a check or a map at depth 0), the mkeys gauge; trace events
 * remu_umr and remu_mkey_err (remu_trace.h) at the same points.
 */
#include <linux/math64.h>
#include <linux/overflow.h>
#include <linux/slab.h>

#include "remu.h"
#include "remu_trace.h"

/**
 * struct remu_mkey_ent - one entry of a layout
 * @start:	offset of the entry in the key (list) or in a row (interleaved)
 * @addr:	iova of its first byte in the entry's MR (first row)
 * @stride:	interleaved: iova step from one row to the next
 * @len:	bytes (per row)
 * @key:	lkey of the entry's MR (or indirect key)
 */
struct remu_mkey_ent {
	u64 start;
	u64 addr;
	u64 stride;
	u32 len;
	u32 key;
};

/**
 * struct remu_mkey_layout - what a UMR configured
 * @rcu:	freed with kfree_rcu
 * @n:		entries
 * @rowlen:	bytes of one row (the sum of the entries' lengths)
 * @rows:	1 for a list, the repeat count for an interleaved layout
 * @ent:	the entries
 */
struct remu_mkey_layout {
	struct rcu_head rcu;
	u32 n;
	u64 rowlen;
	u64 rows;
	struct remu_mkey_ent ent[] __counted_by(n);
};

/* what one translation found: a piece of one entry */
struct remu_mkey_piece {
	u32 key;
	u64 addr;
	u64 avail;	/* bytes of the entry from @addr on */
};

static void remu_mkey_release(struct remu_mr *mr)
{
	struct remu_mkey_layout *l;

	l = rcu_dereference_protected(mr->mkey_layout, true);
	if (l)
		kfree_rcu(l, rcu);
	remu_count_add(mr->rdev, REMU_CNT_MKEYS, -1);
	remu_obj_put(REMU_OBJ_MKEY);
}

static const struct remu_mr_backing_ops remu_mkey_ops = {
	/* remu_mr.c calls remu_mkey_map() itself, with the nesting depth */
	.release = remu_mkey_release,
};

/* offset @off of the key -> the piece there; -EFAULT if nothing is */
static int remu_mkey_translate(struct remu_mr *mr, u64 off,
			       struct remu_mkey_piece *p)
{
	const struct remu_mkey_layout *l;
	u64 row = 0, r = off, in;
	int err = -EFAULT;
	u32 i;

	rcu_read_lock();
	l = rcu_dereference(mr->mkey_layout);
	if (!l || !l->rowlen)
		goto out;
	if (l->rows > 1) {
		row = div64_u64_rem(off, l->rowlen, &r);
		if (row >= l->rows)
			goto out;
	}
	for (i = 0; i < l->n; i++) {
		const struct remu_mkey_ent *e = &l->ent[i];

		if (r < e->start || r - e->start >= e->len)
			continue;
		in = r - e->start;
		if (check_add_overflow(e->addr, row * e->stride + in, &p->addr))
			break;
		p->key = e->key;
		p->avail = e->len - in;
		err = 0;
		break;
	}
out:
	rcu_read_unlock();
	return err;
}

/* the MR of @p's entry, referenced and of @pd, or NULL */
static struct remu_mr *remu_mkey_entry_mr(struct remu_mr *mr,
					  const struct remu_mkey_piece *p)
{
	struct remu_mr *inner = remu_mr_lookup(mr->rdev, p->key, REMU_LKEY);

	if (inner && inner->pd != mr->pd) {
		remu_mr_put(inner);
		inner = NULL;
	}
	return inner;
}

static int remu_mkey_map_one(struct remu_mr *mr, u64 off, u64 len,
			     bool write, struct remu_mr_seg *seg,
			     unsigned int depth)
{
	struct remu_mkey_piece p;
	struct remu_mr_seg tmp;
	struct remu_mr *inner;
	u64 n;
	int err;

	if (depth >= REMU_MKEY_MAX_DEPTH)
		return -EFAULT;
	err = remu_mkey_translate(mr, off, &p);
	if (err)
		return err;
	n = min(p.avail, len);
	inner = remu_mkey_entry_mr(mr, &p);
	if (!inner)
		return -EFAULT;
	/* the entry may be past its MR: check, never trust the layout */
	if (p.addr < inner->iova || p.addr - inner->iova > inner->length ||
	    n > inner->length - (p.addr - inner->iova) ||
	    (write && !(READ_ONCE(inner->access) & IB_ACCESS_LOCAL_WRITE))) {
		remu_mr_put(inner);
		return -EFAULT;
	}
	err = remu_mr_map_seg_depth(inner, p.addr - inner->iova, n, write,
				    &tmp, depth + 1);
	if (err) {
		remu_mr_put(inner);
		return err;
	}
	*seg = tmp;
	/* depth < REMU_MKEY_MAX_DEPTH, so there is room (remu_mr.h) */
	seg->via[seg->nvia++] = inner;
	return 0;
}

/* an access the outermost key's entries refused: counted and traced */
static void remu_mkey_refused(struct remu_mr *mr, u64 off, u64 len, int err)
{
	remu_count(mr->rdev, REMU_CNT_MKEY_ENTRY_ERRORS);
	trace_remu_mkey_err(mr, off, len, err);
}

int remu_mkey_map(struct remu_mr *mr, u64 off, u64 len, bool write,
		  struct remu_mr_seg *seg, unsigned int depth)
{
	int err = remu_mkey_map_one(mr, off, len, write, seg, depth);

	if (!err)
		remu_count(mr->rdev, REMU_CNT_MKEY_SEGMENTS);
	else if (!depth)
		remu_mkey_refused(mr, off, len, err);
	return err;
}

void remu_mkey_unmap(struct remu_mr_seg *seg)
{
	struct remu_mr *inner = seg->via[--seg->nvia];

	remu_mr_unmap_seg(inner, seg);
	remu_mr_put(inner);
}

static int remu_mkey_check_one(struct remu_mr *mr, struct remu_pd *pd,
			       u64 off, u64 len, unsigned int access,
			       unsigned int depth)
{
	u64 done = 0;
	int err = 0;

	if (depth >= REMU_MKEY_MAX_DEPTH)
		return -EACCES;
	while (done < len && !err) {
		struct remu_mkey_piece p;
		struct remu_mr *inner;
		u64 n;

		if (remu_mkey_translate(mr, off + done, &p))
			return -EACCES;
		n = min(p.avail, len - done);
		inner = remu_mkey_entry_mr(mr, &p);
		if (!inner)
			return -EACCES;
		/* rights: the key's (checked by the caller) and the entry's */
		err = remu_mr_check_depth(inner, pd, p.addr, n, access,
					  depth + 1);
		remu_mr_put(inner);
		done += n;
	}
	return err;
}

int remu_mkey_check(struct remu_mr *mr, struct remu_pd *pd, u64 iova,
		    u64 len, unsigned int access, unsigned int depth)
{
	u64 off = iova - mr->iova;
	int err = remu_mkey_check_one(mr, pd, off, len, access, depth);

	if (err && !depth)
		remu_mkey_refused(mr, off, len, err);
	return err;
}

/* the layout of a UMR WQE @w, or an ERR_PTR */
static struct remu_mkey_layout *
remu_mkey_layout_new(const struct remu_send_wqe *w, u32 max_entries)
{
	u32 n = w->num_sge, i, esz;
	struct remu_mkey_layout *l;
	u64 total;

	if (w->swap != REMU_UMR_LIST && w->swap != REMU_UMR_INTERLEAVED)
		return ERR_PTR(-EINVAL);
	esz = w->swap == REMU_UMR_LIST ? sizeof(struct remu_sge) :
					 sizeof(struct remu_umr_ientry);
	if (!n || n > max_entries || w->inline_len != n * esz)
		return ERR_PTR(-EINVAL);
	if (w->swap == REMU_UMR_INTERLEAVED && !w->compare_add)
		return ERR_PTR(-EINVAL);
	l = kzalloc(struct_size(l, ent, n), GFP_KERNEL);
	if (!l)
		return ERR_PTR(-ENOMEM);
	l->n = n;
	l->rows = 1;
	for (i = 0; i < n; i++) {
		struct remu_mkey_ent *e = &l->ent[i];

		if (w->swap == REMU_UMR_LIST) {
			const struct remu_sge *s =
				(const struct remu_sge *)(w + 1) + i;

			e->addr = s->addr;
			e->len = s->length;
			e->key = s->lkey;
		} else {
			const struct remu_umr_ientry *s =
				(const struct remu_umr_ientry *)(w + 1) + i;

			e->addr = s->addr;
			e->len = s->bytes_count;
			e->key = s->lkey;
			e->stride = (u64)s->bytes_count + s->bytes_skip;
		}
		e->start = l->rowlen;
		l->rowlen += e->len;
	}
	if (w->swap == REMU_UMR_INTERLEAVED)
		l->rows = w->compare_add;
	if (check_mul_overflow(l->rowlen, l->rows, &total) ||
	    total > REMU_MAX_MR_SIZE) {
		kfree(l);
		return ERR_PTR(-EINVAL);
	}
	return l;
}

static int remu_mkey_umr_one(struct remu_dev *rdev, struct remu_pd *pd,
			     const struct remu_send_wqe *w, u64 *length)
{
	struct remu_mkey_layout *l, *old;
	unsigned int access = w->remote_qkey;
	struct remu_mr *mr;
	int err = 0;

	if (access & ~(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ |
		       IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC))
		return -EINVAL;
	rcu_read_lock();
	mr = xa_load(&rdev->mrs.xa, remu_key_index(w->ex_data));
	if (!mr || mr->kind != REMU_MR_INDIRECT ||
	    READ_ONCE(mr->key) != w->ex_data ||
	    !refcount_inc_not_zero(&mr->refs))
		mr = NULL;
	rcu_read_unlock();
	if (!mr)
		return -EINVAL;
	if (mr->pd != pd) {
		err = -EPERM;
		goto out;
	}
	l = remu_mkey_layout_new(w, mr->mkey_max);
	if (IS_ERR(l)) {
		err = PTR_ERR(l);
		goto out;
	}
	/* a valid key is reconfigured only after an invalidation (mlx5) */
	if (cmpxchg(&mr->state, REMU_MR_FREE, REMU_MR_CONFIG) !=
	    REMU_MR_FREE) {
		kfree(l);
		err = -EBUSY;
		goto out;
	}
	mr->iova = 0;		/* zero based, as mlx5's indirect mkeys */
	mr->length = l->rowlen * l->rows;
	*length = mr->length;
	WRITE_ONCE(mr->access, access);
	old = rcu_replace_pointer(mr->mkey_layout, l, true);
	if (old)
		kfree_rcu(old, rcu);
	/* full barrier: the layout is visible before the key is VALID */
	if (cmpxchg(&mr->state, REMU_MR_CONFIG, REMU_MR_VALID) !=
	    REMU_MR_CONFIG)
		err = -EINVAL;	/* deregistered meanwhile */
out:
	remu_mr_put(mr);
	return err;
}

int remu_mkey_umr(struct remu_dev *rdev, struct remu_pd *pd, u32 qpn,
		  const struct remu_send_wqe *w)
{
	u64 length = 0;
	int err = remu_mkey_umr_one(rdev, pd, w, &length);

	remu_count(rdev, err ? REMU_CNT_UMR_ERRORS : REMU_CNT_UMR_CONFIGS);
	trace_remu_umr(rdev, w, qpn, err ? 0 : length, err);
	return err;
}

struct remu_mr *remu_mkey_create(struct ib_pd *ibpd, u32 max_entries,
				 bool remote_inv)
{
	struct ib_mr *ibmr;
	struct remu_mr *mr;

	if (!max_entries || max_entries > REMU_MKEY_MAX_ENTRIES)
		return ERR_PTR(-EINVAL);
	mr = remu_mr_new(ibpd, REMU_MR_INDIRECT, &remu_mkey_ops);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->mkey_max = max_entries;
	mr->mkey_remote_inv = remote_inv;
	/* counted before publish: a failed publish releases (and uncounts) */
	remu_obj_get(REMU_OBJ_MKEY);
	remu_count_add(to_remu_dev(ibpd->device), REMU_CNT_MKEYS, 1);
	ibmr = remu_mr_publish(mr);
	if (IS_ERR(ibmr))
		return ERR_CAST(ibmr);
	return mr;
}

bool remu_mkey_no_remote_inv(struct remu_dev *rdev, u32 key)
{
	struct remu_mr *mr;
	bool no;

	rcu_read_lock();
	mr = xa_load(&rdev->mrs.xa, remu_key_index(key));
	no = mr && mr->kind == REMU_MR_INDIRECT && !mr->mkey_remote_inv;
	rcu_read_unlock();
	return no;
}

void remu_mkey_destroy(struct remu_mr *mr)
{
	remu_dereg_mr(&mr->ib_mr, NULL);
}
