// SPDX-License-Identifier: GPL-2.0
/*
 * remu_zc.c - payload by reference, and taking access back from it
 * (docs/security.md, "Zero-copy safety").
 *
 * A packet whose payload is MR memory attached by reference (page frags,
 * remu_mr_frag_skb(): READ responses, RC WRITE and SEND payload of pinned
 * and ODP MRs) is read when the peer's engine places it, not when it is
 * built.  A deregistration (a re-registration deregisters the old MR)
 * must still mean what it means on a NIC: once it returns, the device
 * reads nothing more from that memory.  So the frags carry the kernel's
 * zero-copy descriptor (struct ubuf_info, the one MSG_ZEROCOPY uses),
 * embedded in struct remu_zc: one per MR at a time (mr->zc, made by the
 * first packet that needs it, replaced after each revocation).
 *
 *  - remu_zc_attach() hangs it on every skb with frags of the MR
 *    (skb_zcopy_set(): SKBFL_ZEROCOPY_FRAG), one reference per skb, which
 *    the networking core drops through ->complete() when the frags go;
 *  - every read of such frags happens inside a section, remu_zc_begin()
 *    .. remu_zc_end(), which can be entered only while the zc is open and
 *    spans the copy alone (nothing inside sleeps or takes a lock);
 *  - remu_zc_revoke_mr() closes the MR's zc and waits for the sections in
 *    progress.  From then on its frags are never read again: the packets
 *    still carrying them are dropped where they would be placed
 *    (remu_mr_copy_skb() answers -ESTALE); their pages stay referenced
 *    until the skbs are freed, unread;
 *  - an ODP invalidation revokes nothing: the MR still grants the range,
 *    and a page it unmapped stays referenced by the frags, so they read
 *    what the range held before the invalidation, never what a later
 *    owner of the page writes (the page is not reused while referenced);
 *  - only remu's own engines read frags that stay by reference: a packet
 *    that leaves through the IP stack (any destination but a remu device
 *    of the sender's namespace) gets a private copy in remu_net_xmit(),
 *    inside a section, before its ICRC (remu_zc_orphan(): skb_copy_ubufs(),
 *    what the stack itself does to zero-copy skbs it forwards or
 *    delivers), so no qdisc, tap, veth peer or NIC ever holds them.
 *
 * Locking: mr->zc is installed with cmpxchg() and read under RCU (a zc
 * is freed with kfree_rcu() once its last reference goes); mr->zc_lock
 * serialises the revokers, so each returns only after the zc in force
 * when it started is closed and drained.  A section is two atomics on zc->readers; revokers sleep
 * (wait_var_event()), readers never wait.
 */
#include <linux/rcupdate.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>

#include "remu.h"

/**
 * struct remu_zc - what by-reference payload of one MR carries
 * @ubuf:	the zero-copy descriptor skbs point to; @ubuf.refcnt is one
 *		per skb (shared info) carrying it, plus the MR's own while
 *		it is the MR's zc in force, plus transient ones
 * @readers:	1 while open, plus one per section in progress; 0 once
 *		closed (no section can start again)
 * @rcu:	for kfree_rcu() (remu_zc_get() reads mr->zc under RCU)
 */
struct remu_zc {
	struct ubuf_info ubuf;
	atomic_t readers;
	struct rcu_head rcu;
};

static void remu_zc_complete(struct sk_buff *skb, struct ubuf_info *ubuf,
			     bool zerocopy_success)
{
	struct remu_zc *zc = container_of(ubuf, struct remu_zc, ubuf);

	if (refcount_dec_and_test(&ubuf->refcnt)) {
		remu_obj_put(REMU_OBJ_ZC);
		kfree_rcu(zc, rcu);
	}
}

REMU_UBUF_OPS(remu_zc_ops, remu_zc_complete);

/* drop a reference remu_zc_get() gave */
static void remu_zc_put(struct remu_zc *zc)
{
	remu_zc_complete(NULL, &zc->ubuf, true);
}

/* the remu zc @skb carries, or NULL */
static struct remu_zc *remu_zc_of(struct sk_buff *skb)
{
	struct ubuf_info *u = skb_zcopy(skb);

	if (!u || !remu_ubuf_is(u, remu_zc_ops))
		return NULL;
	return container_of(u, struct remu_zc, ubuf);
}

static struct remu_zc *remu_zc_new(void)
{
	struct remu_zc *zc = kzalloc(sizeof(*zc), GFP_KERNEL);

	if (!zc)
		return NULL;
	remu_ubuf_init(&zc->ubuf, remu_zc_ops);
	/*
	 * ZEROCOPY_FRAG: the frags are not the skb's own; whatever in the
	 * stack would keep or read them copies them first (skb_orphan_frags())
	 */
	zc->ubuf.flags = SKBFL_ZEROCOPY_FRAG;
	refcount_set(&zc->ubuf.refcnt, 1);	/* the MR's */
	atomic_set(&zc->readers, 1);
	remu_obj_get(REMU_OBJ_ZC);
	return zc;
}

/**
 * remu_zc_get - the zc in force of @mr, referenced
 * @mr: a UMEM or ODP MR, with a reference held
 *
 * Makes one if the MR has none yet.  Never called once the MR's
 * deregistration has waited for the accesses in flight (the caller's
 * reference is one), so no zc is installed after remu_zc_revoke_mr().
 *
 * Context: process context (GFP_KERNEL).
 * Return: the zc, or NULL when out of memory (copy instead).
 */
struct remu_zc *remu_zc_get(struct remu_mr *mr)
{
	struct remu_zc *zc, *new;
	bool got;

	for (;;) {
		rcu_read_lock();
		zc = rcu_dereference(mr->zc);
		got = zc && refcount_inc_not_zero(&zc->ubuf.refcnt);
		rcu_read_unlock();
		if (got)
			return zc;
		if (zc)
			continue;	/* revoked as we looked: look again */
		new = remu_zc_new();
		if (!new)
			return NULL;
		refcount_inc(&new->ubuf.refcnt);	/* the caller's */
		zc = unrcu_pointer(cmpxchg(&mr->zc, NULL,
					   RCU_INITIALIZER(new)));
		if (!zc)
			return new;
		/* another packet installed one first: use that */
		remu_zc_put(new);
		remu_zc_put(new);
	}
}

/**
 * remu_zc_attach - hang @zc on @skb, whose frags are (or will be) its MR's
 * @skb: the packet being built
 * @zc: from remu_zc_get(); the reference passes to @skb (or is dropped)
 *
 * Return: 0, or -EOPNOTSUPP when @skb already carries another MR's zc (an
 * skb has room for one: copy instead).
 */
int remu_zc_attach(struct sk_buff *skb, struct remu_zc *zc)
{
	struct ubuf_info *u = skb_zcopy(skb);
	bool have_ref = true;

	if (!u) {
		skb_zcopy_set(skb, &zc->ubuf, &have_ref);
		return 0;
	}
	remu_zc_put(zc);
	return u == &zc->ubuf ? 0 : -EOPNOTSUPP;
}

/**
 * remu_zc_begin - enter a section before reading @skb's payload
 * @skb: a packet (any: one without a remu zc needs no section)
 * @zcp: set to the zc entered, or NULL; pass it to remu_zc_end()
 *
 * Context: any; @skb must stay alive until remu_zc_end() (its reference
 * keeps the zc).
 * Return: 0, or -ESTALE when the payload's memory was taken back: do not
 * read it (and call no remu_zc_end()).
 */
int remu_zc_begin(struct sk_buff *skb, struct remu_zc **zcp)
{
	struct remu_zc *zc = remu_zc_of(skb);

	*zcp = zc;
	if (!zc || atomic_inc_not_zero(&zc->readers))
		return 0;
	*zcp = NULL;
	return -ESTALE;
}

/* leave the section remu_zc_begin() entered */
void remu_zc_end(struct remu_zc *zc)
{
	/* fully ordered: the reads above happen before a revoker returns */
	if (zc && atomic_dec_and_test(&zc->readers))
		wake_up_var(&zc->readers);
}

/**
 * remu_zc_orphan - give a packet leaving through the IP stack its own copy
 * @skb: a finished packet (frags by reference or not)
 *
 * The frags of a remu zc are copied to fresh pages (skb_copy_ubufs(), which
 * also drops the skb's reference to the zc) inside a section, so the copy
 * is a snapshot taken while the memory was still granted.
 *
 * Context: any (GFP_ATOMIC).
 * Return: 0; -ESTALE (taken back already: drop the packet) or -ENOMEM.
 */
int remu_zc_orphan(struct sk_buff *skb)
{
	struct remu_zc *zc = remu_zc_of(skb);
	int err;

	if (!zc)
		return 0;
	/* skb_copy_ubufs() drops the skb's reference inside the section */
	refcount_inc(&zc->ubuf.refcnt);
	if (atomic_inc_not_zero(&zc->readers)) {
		err = skb_copy_ubufs(skb, GFP_ATOMIC);
		remu_zc_end(zc);
	} else {
		err = -ESTALE;
	}
	remu_zc_put(zc);
	return err;
}

/**
 * remu_zc_revoke_mr - no packet reads @mr's memory by reference any more
 * @mr: the MR being deregistered, its accesses in flight done
 *
 * Closes the zc in force and waits for the sections in progress (each a
 * copy of at most a page).
 *
 * Context: process context, may sleep; no lock a section takes is held.
 */
void remu_zc_revoke_mr(struct remu_mr *mr)
{
	struct remu_zc *zc;

	might_sleep();
	mutex_lock(&mr->zc_lock);
	zc = unrcu_pointer(xchg(&mr->zc,
				RCU_INITIALIZER((struct remu_zc *)NULL)));
	if (zc) {
		/* the MR's open count: the last section out wakes us */
		if (!atomic_dec_and_test(&zc->readers))
			wait_var_event(&zc->readers,
				       !atomic_read(&zc->readers));
		/* the sections' reads before whatever the caller does next */
		smp_mb();
		remu_zc_put(zc);
	}
	mutex_unlock(&mr->zc_lock);
}
