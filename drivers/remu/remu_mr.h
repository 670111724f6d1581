/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_mr.h - memory regions and the MR access layer, the device's
 * software MMU: every byte the data path reads from or writes into a
 * memory region goes through the functions declared here.  This comment
 * is the contract; docs/memory-regions.md explains the design.
 *
 * Keys: lkey == rkey == index << 8 | tag.  The 24-bit index (never 0,
 * handed out cyclically from a random start per device) names the MR in
 * the per-device xarray; the tag is random per registration, or the
 * consumer's on each fast registration (ib_inc_rkey()).  A lookup matches
 * all 32 bits.
 *
 * Use (the engines):
 *
 *	mr = remu_mr_lookup(rdev, lkey, REMU_LKEY);	// reference taken
 *	if (!mr)
 *		-> invalid key
 *	err = remu_mr_check(mr, qp_pd, iova, len, IB_ACCESS_LOCAL_WRITE);
 *	if (!err)
 *		err = remu_mr_copy_skb(mr, iova, skb, off, len, REMU_TO_MR);
 *	remu_mr_put(mr);
 *
 * or remu_sge_copy() for a whole SGE list (struct remu_sgl).  A key from
 * the wire may also name a memory window: the responder uses
 * remu_rkey_get()/remu_rkey_check()/remu_rkey_put() (remu_mw.c), whose
 * descriptor is the MR plus the range and rights the key grants.  The
 * errnos are distinct, one per completion status:
 *
 *	lookup NULL / -ENOENT	no valid MR under the key
 *	-EPERM			MR of another PD
 *	-ERANGE			[iova, iova + len) not inside the MR
 *	-EACCES			the MR lacks the right asked for
 *	-EINVAL			misaligned atomic; bad fast-reg parameters
 *	-EMSGSIZE		SGE list shorter than offset + len
 *	-EFAULT			translation failed (backing gone or broken)
 *
 * Backings (enum remu_mr_kind) provide struct remu_mr_backing_ops, and
 * the copy loops see only segments (struct remu_mr_seg).  ->map() may
 * answer -EAGAIN (translation missing: ->fault(), then retry; ODP and
 * dma-buf do) and may keep a backing lock until ->unmap(), so that an
 * invalidation waits for the one segment being touched.
 *
 * Lifetime and locking:
 *  - the xarray changes under xa_lock, at registration and
 *    deregistration; lookups are lockless under RCU (xa_load, state and
 *    key, refcount_inc_not_zero); MRs are freed with kfree_rcu;
 *  - mr->refs is the owner's reference plus one per access in flight:
 *    deregistration unpublishes the key, drops the owner's reference and
 *    waits on mr->done before it releases the backing, so no access
 *    outlives the memory it touches.  A bound window counts in
 *    mr->num_mw (under xa_lock) and makes deregistration fail (-EBUSY);
 *  - rereg keeps the keys: remu_mr_replace() stores the new MR at the old
 *    index before the old one becomes a ZOMBIE, which lookups skip;
 *  - payload by reference: the packets' frags of an MR are read only
 *    inside sections of its zc (remu_zc.c), which deregistration closes
 *    and drains once the accesses in flight are done (mr->zc_lock);
 *  - a fast-reg or indirect MR's key, range and rights are written before
 *    a cmpxchg() makes it VALID, and read after an acquire of the state;
 *  - atomics hold rdev->mrs.atomic_lock (BH-safe) around the
 *    read-modify-write only;
 *  - copies may sleep (a backing may fault): process context, no
 *    spinlock held.
 */
#ifndef REMU_MR_H
#define REMU_MR_H

#include <linux/completion.h>
#include <linux/mutex.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/skbuff.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/remu-abi.h>

struct remu_dev;
struct remu_pd;
struct remu_dm;
struct remu_dmabuf;
struct ib_umem;
struct remu_zc;

#define REMU_KEY_TAG_BITS	8
#define REMU_KEY_TAG_MASK	0xffu
#define REMU_KEY_INDEX_MAX	0xffffffu	/* 24-bit index */

static inline u32 remu_key_index(u32 key)
{
	return key >> REMU_KEY_TAG_BITS;
}

/* the key of a new MR or window at @index: a random tag */
static inline u32 remu_key_new(u32 index)
{
	return index << REMU_KEY_TAG_BITS |
	       (get_random_u32() & REMU_KEY_TAG_MASK);
}

/** struct remu_mr_table - per-device MR state, embedded in remu_dev */
struct remu_mr_table {
	struct xarray xa;	/* index -> struct remu_mr, XA_FLAGS_ALLOC1 */
	u32 next_index;		/* xa_alloc_cyclic cursor (under xa_lock) */
	atomic_t count;		/* live MRs, bounded by REMU_MAX_MR */
	atomic64_t pages_pinned;
	spinlock_t atomic_lock;	/* serialises remu_mr_atomic() */
	struct xarray mw_xa;	/* index -> struct remu_window (remu_mw.c) */
	atomic_t mw_count;	/* live memory windows, bounded by REMU_MAX_MW */
	atomic64_t gen;		/* the last registration number handed out */
};

/** enum remu_mr_kind - the backing of an MR (how its memory is reached) */
enum remu_mr_kind {
	REMU_MR_KERNEL,		/* get_dma_mr: iova is a kernel address */
	REMU_MR_UMEM,		/* reg_user_mr: pinned user pages */
	REMU_MR_FAST_REG,	/* alloc_mr: page list set by map_mr_sg */
	REMU_MR_ODP,		/* reg_user_mr + ON_DEMAND: remu_odp.c */
	REMU_MR_DM,		/* reg_dm_mr: device memory (remu_dm.c) */
	REMU_MR_DMABUF,		/* reg_user_mr_dmabuf: remu_dmabuf.c */
	REMU_MR_INDIRECT,	/* indirect key, pieces of other keys: remu_mkey.c */
};

/** enum remu_mr_state - whether the key currently grants access */
enum remu_mr_state {
	REMU_MR_FREE,		/* fast-reg MR not registered (or invalidated) */
	REMU_MR_VALID,
	REMU_MR_ZOMBIE,		/* being deregistered */
	REMU_MR_CONFIG,		/* indirect key: a UMR is changing it */
};

/** enum remu_key_kind - where a key comes from */
enum remu_key_kind {
	REMU_LKEY,	/* from a local SGE (or a local WR) */
	REMU_RKEY,	/* from the wire (remu_rkey_get() also finds windows) */
};

enum remu_copy_dir {
	REMU_TO_MR,	/* write into the MR */
	REMU_FROM_MR,	/* read from the MR */
};

enum remu_atomic_op {
	REMU_ATOMIC_CMP_SWP,	/* if (*p == a) *p = b */
	REMU_ATOMIC_FETCH_ADD,	/* *p += a */
	REMU_ATOMIC_WRITE,	/* *p = a (IBA 1.5 ATOMIC_WRITE) */
};

/**
 * struct remu_mr_seg - one contiguous piece of an MR, as ->map() gives it
 * @page:	the page, or NULL when @kaddr is a direct kernel mapping
 * @kaddr:	kernel address of the data when @page is NULL
 * @iomem:	or I/O memory (a device's BAR, a dma-buf whose CPU mapping
 *		is I/O memory): reached with the io accessors only; @page
 *		and @kaddr are then unused
 * @offset:	byte offset of the data in @page (unused with @kaddr)
 * @len:	contiguous bytes available here (>= 1)
 * @priv:	for the backing's ->unmap()
 * @via:	the entries' MRs an indirect key went through to reach the
 *		segment, referenced until it is unmapped (remu_mkey.c)
 * @nvia:	entries used in @via
 */
struct remu_mr_seg {
	struct page *page;
	void *kaddr;
	void __iomem *iomem;
	unsigned int offset;
	unsigned int len;
	void *priv;
	struct remu_mr *via[REMU_MKEY_MAX_DEPTH];
	unsigned int nvia;
};

struct remu_mr;

/**
 * struct remu_mr_backing_ops - how one kind of backing reaches its memory
 * @map:	translate byte @off of the MR (at most @len bytes wanted) for
 *		reading or, when @write, writing; fill @seg.  Returns 0,
 *		-EAGAIN when the translation is missing (call @fault, then
 *		retry), or another negative errno (-EFAULT).  May sleep.
 * @unmap:	end the access to @seg (drop what @map took); may be NULL
 * @fault:	make [off, off + len) present for @write; NULL if the backing
 *		never answers -EAGAIN.  May sleep.
 * @release:	free the backing at deregistration, after the last access
 */
struct remu_mr_backing_ops {
	int (*map)(struct remu_mr *mr, u64 off, u64 len, bool write,
		   struct remu_mr_seg *seg);
	void (*unmap)(struct remu_mr *mr, struct remu_mr_seg *seg);
	int (*fault)(struct remu_mr *mr, u64 off, u64 len, bool write);
	void (*release)(struct remu_mr *mr);
};

/**
 * struct remu_odp_stats - per-MR ODP counters, in pages (remu_odp.c)
 * @faults:		pages made present by data-path faults
 * @invalidations:	translations removed by mmu notifier invalidations
 * @prefetch:		pages made present by ibv_advise_mr prefetch
 */
struct remu_odp_stats {
	atomic64_t faults;
	atomic64_t invalidations;
	atomic64_t prefetch;
};

/**
 * struct remu_mr - a memory region
 * @ib_mr:	the core's MR (lkey/rkey mirror @key)
 * @rdev:	owning device
 * @pd:		protection domain the MR was created in
 * @kind:	backing kind; @ops its operations
 * @state:	enum remu_mr_state (acquire/release, see file comment)
 * @key:	current lkey == rkey
 * @access:	IB_ACCESS_* rights of the current registration
 * @iova:	first valid iova; @length bytes from there (KERNEL: 0, ~0)
 * @gen:	registration number, unique on the device: a new one for
 *		every registration (reg, rereg's new MR, each fast
 *		registration), so that a message can tell whether its key
 *		still names what its first packet found (remu_rkey.gen)
 * @refs:	owner reference + one per access in flight
 * @done:	completed when @refs drops to zero
 * @num_mw:	memory windows bound to it (dereg then fails with -EBUSY)
 * @umem:	UMEM: the pinned pages' umem; ODP: &ib_umem_odp.umem
 * @pages:	UMEM: one struct page per PAGE_SIZE of the user range
 * @page_off:	UMEM/FAST_REG: offset of @iova in the first page/block
 * @npages:	UMEM: entries in @pages; FAST_REG: entries in @fr_addrs
 * @fr_addrs:	FAST_REG: kernel addresses of page_size blocks (map_mr_sg)
 * @fr_max:	FAST_REG: capacity of @fr_addrs (max_num_sg)
 * @fr_shift:	FAST_REG: log2 of the block size
 * @fr_ends:	FAST_REG of type IB_MR_TYPE_SG_GAPS: end offset in the MR of
 *		each entry (@fr_addrs holds its kernel address); NULL for a
 *		page-list MR
 * @dm:		DM: the allocation (referenced; @page_off is the MR's offset
 *		in it)
 * @odp_stats:	ODP: per-MR page counters (`rdma statistic show mr`), see
 *		struct remu_odp_stats
 * @dmabuf:	DMABUF: the attachment and CPU mapping (remu_dmabuf.c)
 * @mkey_layout: INDIRECT: the entries a UMR set (RCU, remu_mkey.c)
 * @mkey_max:	INDIRECT: entries it takes
 * @mkey_remote_inv: INDIRECT: SEND_WITH_INV may invalidate it
 * @zc:		UMEM/ODP: what the packets carrying its pages by reference
 *		carry (remu_zc.c), or NULL; revoked at deregistration
 * @zc_lock:	serialises the revocations of @zc
 * @rcu:	for kfree_rcu (lookups are lockless)
 */
struct remu_mr {
	struct ib_mr ib_mr;
	struct remu_dev *rdev;
	struct remu_pd *pd;
	enum remu_mr_kind kind;
	const struct remu_mr_backing_ops *ops;
	int state;
	u32 key;
	unsigned int access;
	u64 iova;
	u64 length;
	u64 gen;
	refcount_t refs;
	struct completion done;
	atomic_t num_mw;

	struct ib_umem *umem;
	struct page **pages;
	u64 page_off;
	u32 npages;

	u64 *fr_addrs;
	u32 fr_max;
	unsigned int fr_shift;
	u64 *fr_ends;

	struct remu_dm *dm;

	struct remu_odp_stats odp_stats;
	struct remu_dmabuf *dmabuf;

	struct remu_mkey_layout __rcu *mkey_layout;
	u32 mkey_max;
	bool mkey_remote_inv;

	struct remu_zc __rcu *zc;
	struct mutex zc_lock;	/* serialises revoking @zc */

	struct rcu_head rcu;
};

static inline struct remu_mr *to_remu_mr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct remu_mr, ib_mr);
}

/*
 * struct remu_sge (uapi/rdma/remu-abi.h) is one scatter/gather element, the
 * layout of struct ib_sge; SQ/RQ ring slots carry arrays of them.
 */

/* ---- the access layer (exported in namespace REMU_TEST for the tests) ---- */

/**
 * remu_mr_lookup - find the valid MR that @key names and take a reference
 * @rdev:	device
 * @key:	lkey or rkey (all 32 bits must match, tag included)
 * @kind:	where the key comes from
 *
 * Context: any; lockless (RCU).
 * Return: the MR with a reference the caller drops with remu_mr_put(), or
 * NULL if no valid MR has this key.
 */
struct remu_mr *remu_mr_lookup(struct remu_dev *rdev, u32 key,
			       enum remu_key_kind kind);

/**
 * remu_mr_put - drop a reference taken by remu_mr_lookup()
 * @mr: the MR
 *
 * Context: any.  The last put lets a waiting deregistration proceed.
 */
void remu_mr_put(struct remu_mr *mr);

/**
 * remu_mr_check - may this access happen?
 * @mr:		MR with a reference held
 * @pd:		PD of the QP doing the access (NULL: do not check)
 * @iova:	first byte
 * @len:	bytes (0 is always in bounds)
 * @access:	IB_ACCESS_* rights needed: LOCAL_WRITE, REMOTE_READ,
 *		REMOTE_WRITE, REMOTE_ATOMIC; 0 for a local read
 *
 * Return: 0, -EPERM (wrong PD), -ERANGE (bounds) or -EACCES (rights),
 * checked in that order.
 */
int remu_mr_check(struct remu_mr *mr, struct remu_pd *pd, u64 iova, u64 len,
		  unsigned int access);

/**
 * remu_mr_copy - copy between a kernel buffer and MR memory
 * @mr:		MR with a reference held, already checked
 * @iova:	first byte in the MR
 * @buf:	kernel buffer of @len bytes
 * @len:	bytes
 * @dir:	REMU_TO_MR or REMU_FROM_MR
 *
 * Context: process context, may sleep.
 * Return: 0, -ERANGE if outside the MR, -EFAULT if a translation failed
 * (part of the data may have been copied).
 */
int remu_mr_copy(struct remu_mr *mr, u64 iova, void *buf, u64 len,
		 enum remu_copy_dir dir);

/**
 * remu_mr_copy_skb - copy between packet payload and MR memory
 * @mr:		MR with a reference held, already checked
 * @iova:	first byte in the MR
 * @skb:	packet (linear part, page frags and frag list all work)
 * @skb_off:	offset of the payload in @skb
 * @len:	bytes
 * @dir:	REMU_TO_MR (receive: skb -> MR) or REMU_FROM_MR (build: MR ->
 *		skb, which must already have room for @len bytes at @skb_off)
 *
 * No bounce buffer: each MR segment is copied straight to or from the skb.
 * Payload @skb carries by reference (remu_mr_frag_skb()) is read inside a
 * section of its zc (remu_zc_begin()), segment by segment.
 * Context and return: as remu_mr_copy(); -EFAULT also if @skb is too short;
 * REMU_TO_MR: -ESTALE when @skb's payload is another MR's memory by
 * reference whose MR was deregistered (or re-registered) since: drop the
 * packet unread (the segments before may have been placed).
 */
int remu_mr_copy_skb(struct remu_mr *mr, u64 iova, struct sk_buff *skb,
		     int skb_off, u64 len, enum remu_copy_dir dir);

/* page frags remu_mr_frag_skb() fills; one more is kept for the ICRC */
#define REMU_FRAG_MAX		(MAX_SKB_FRAGS - 1)

/**
 * remu_mr_frag_skb - append MR memory to a packet by reference
 * @mr:		MR with a reference held, already checked
 * @iova:	first byte in the MR
 * @skb:	packet being built; the bytes go after its last frag
 * @len:	bytes
 *
 * Each page of [@iova, @iova + @len) is referenced (get_page) and attached
 * as a page fragment (contiguous pieces of one page are merged);
 * skb->len, data_len and truesize grow by @len, and the skb carries the
 * MR's zc (remu_zc.c: SKBFL_ZEROCOPY_FRAG, the frags are process memory
 * the owner may write meanwhile).  Only UMEM and ODP MRs qualify; an ODP
 * page is referenced under the umem_mutex that ->map() holds.  The
 * references keep the pages alive after the MR is deregistered or the
 * range invalidated, but the bytes are read only inside sections of the
 * zc, which deregistration closes: what is placed is what the memory
 * held while it was granted, or nothing
 * (docs/security.md, "Zero-copy safety").
 *
 * Context: process context, may sleep (ODP faults).
 * Return: 0; -EOPNOTSUPP (another backing, a page without struct page, an
 * skb that carries another MR's pages, no memory for the zc) or -E2BIG
 * (more than REMU_FRAG_MAX frags): the caller copies instead; -ERANGE,
 * -EFAULT as remu_mr_copy().  On error some frags may have been attached:
 * the caller frees @skb.
 */
int remu_mr_frag_skb(struct remu_mr *mr, u64 iova, struct sk_buff *skb,
		     u64 len);

/* ---- payload by reference: remu_zc.c ---- */
struct remu_zc *remu_zc_get(struct remu_mr *mr);
int remu_zc_attach(struct sk_buff *skb, struct remu_zc *zc);
int remu_zc_begin(struct sk_buff *skb, struct remu_zc **zcp);
void remu_zc_end(struct remu_zc *zc);
int remu_zc_orphan(struct sk_buff *skb);
void remu_zc_revoke_mr(struct remu_mr *mr);

/**
 * remu_mr_atomic - 64-bit compare-and-swap or fetch-and-add in an MR
 * @mr:		MR with a reference held, checked for IB_ACCESS_REMOTE_ATOMIC
 * @iova:	address of the 8-byte operand, 8-byte aligned
 * @op:		REMU_ATOMIC_CMP_SWP (compare @a, swap in @b),
 *		REMU_ATOMIC_FETCH_ADD (add @a) or REMU_ATOMIC_WRITE (store @a)
 * @a, @b:	operands
 * @orig:	the value before the operation
 *
 * Atomic with respect to every other remu_mr_atomic() on the device.
 * Context: process context, may sleep (before taking the atomic lock).
 * Return: 0, -EINVAL if misaligned, -ERANGE if outside the MR, -EFAULT.
 */
int remu_mr_atomic(struct remu_mr *mr, u64 iova, enum remu_atomic_op op,
		   u64 a, u64 b, u64 *orig);

/**
 * remu_mr_flush - IBA 1.5 FLUSH of [@iova, @iova + @len) of @mr
 * @mr:		MR with a reference held, checked for the FLUSH rights
 * @iova, @len:	the range (the caller passes the whole MR for
 *		IB_FLUSH_MR)
 * @persistent:	IB_FLUSH_PERSISTENT: write the cache lines back to the
 *		(persistent) memory; else global visibility only
 *
 * Context: process context, may sleep.
 * Return: 0, or as remu_mr_copy() (persistent only).
 */
int remu_mr_flush(struct remu_mr *mr, u64 iova, u64 len, bool persistent);

/**
 * struct remu_sgl - an SGE list with what every access through it needs
 * @rdev:	device the lkeys belong to
 * @pd:		PD of the QP (each SGE's MR must belong to it)
 * @sges:	the list; zero-length SGEs are skipped without a key lookup
 * @num:	entries
 * @access:	rights each MR must grant: IB_ACCESS_LOCAL_WRITE to scatter
 *		into a receive WQE or a READ/atomic response, 0 to gather
 */
struct remu_sgl {
	struct remu_dev *rdev;
	struct remu_pd *pd;
	const struct remu_sge *sges;
	int num;
	unsigned int access;
};

/**
 * remu_sge_copy - copy between a buffer and the memory an SGE list names
 * @sgl:	the list, its PD and the rights asked for
 * @offset:	bytes of the list to skip first (a message's later packets)
 * @buf:	kernel buffer
 * @len:	bytes to copy
 * @dir:	REMU_TO_MR (scatter) or REMU_FROM_MR (gather)
 *
 * Context: process context, may sleep.
 * Return: 0; -ENOENT (bad lkey), -EPERM, -ERANGE, -EACCES, -EFAULT as
 * above; -EMSGSIZE if the list holds fewer than @offset + @len bytes.
 */
int remu_sge_copy(const struct remu_sgl *sgl, u64 offset, void *buf, u64 len,
		  enum remu_copy_dir dir);

/**
 * remu_sge_copy_skb - remu_sge_copy() to or from packet payload
 * @skb, @skb_off: the packet and the offset of the bytes in it (linear
 *		part and page frags alike)
 * Other parameters, context and return: as remu_sge_copy(); -EFAULT also
 * if @skb is shorter than @skb_off + @len.
 */
int remu_sge_copy_skb(const struct remu_sgl *sgl, u64 offset,
		      struct sk_buff *skb, int skb_off, u64 len,
		      enum remu_copy_dir dir);

/**
 * remu_sge_frag_skb - gather an SGE list into @skb by reference
 * @sgl, @offset, @len: as remu_sge_copy() (a local read: @sgl->access 0)
 * @skb:	packet being built: remu_mr_frag_skb() for each piece
 *
 * Return: as remu_sge_copy(), or -EOPNOTSUPP / -E2BIG when a piece cannot
 * be referenced (see remu_mr_frag_skb()): free @skb and copy instead.
 */
int remu_sge_frag_skb(const struct remu_sgl *sgl, u64 offset,
		      struct sk_buff *skb, u64 len);

/**
 * remu_mr_user_va - the process address behind @iova of a host-memory MR
 * @mr:		MR with a reference held, already checked for the range
 * @iova:	an iova inside the MR
 * @va:		the user virtual address there
 *
 * For inline receive (remu_resp.c): the provider, not the kernel, then
 * writes the bytes, so only MRs over the process's own ordinary memory
 * qualify: pinned (REMU_MR_UMEM) and ODP (REMU_MR_ODP, implicit: iova ==
 * address).  Device memory, dma-buf, kernel and fast-reg MRs do not.
 * Return: 0, or -EOPNOTSUPP for any other backing.
 */
int remu_mr_user_va(struct remu_mr *mr, u64 iova, u64 *va);

/**
 * remu_mr_fast_reg - IB_WR_REG_MR: make a fast-reg MR valid under @key
 * @mr:		an MR from alloc_mr whose pages map_mr_sg set
 * @key:	new lkey == rkey; same index as the MR's, any tag
 * @access:	IB_ACCESS_* rights
 * @iova:	first iova (the page list's first block holds it at the
 *		offset map_mr_sg recorded)
 * @length:	bytes
 *
 * Context: the engine processing the REG_MR WR.
 * Return: 0; -EINVAL for a key of another MR, an MR that is not a fast-reg
 * MR or is already valid, bad access flags, or a range the page list does
 * not cover.
 */
int remu_mr_fast_reg(struct remu_mr *mr, u32 key, unsigned int access,
		     u64 iova, u64 length);

/**
 * remu_mr_invalidate - IB_WR_LOCAL_INV or an incoming SEND_WITH_INV
 * @rdev:	device
 * @pd:		PD of the QP carrying the invalidation
 * @key:	the key to invalidate (all 32 bits)
 *
 * Invalidating a fast-reg MR that is already free is allowed.
 * Return: 0; -EINVAL if no fast-reg MR has this key (bad index or tag),
 * -EPERM if it belongs to another PD, -EACCES if the MR is not a fast-reg
 * MR (user and DMA MRs cannot be invalidated), -EBUSY if memory windows are
 * bound to it.
 */
int remu_mr_invalidate(struct remu_dev *rdev, struct remu_pd *pd, u32 key);

/* ---- memory windows (remu_mw.c) ---- */

struct remu_window;

/**
 * struct remu_mw - a memory window as the core sees it
 * @ib_mw:	the core's MW (rkey mirrors the window's current key at alloc)
 * @win:	the window, looked up by the data path under RCU; NULL
 *		when the MW object carries an indirect key instead
 * @mkey:	the indirect key (REMU_ALLOC_MW_INDIRECT), or NULL
 */
struct remu_mw {
	struct ib_mw ib_mw;
	struct remu_window *win;
	struct remu_mr *mkey;
};

/**
 * struct remu_rkey - what an rkey from the wire grants (access descriptor)
 * @mr:		the MR whose memory is reached, referenced
 * @win:	the key names a window: the fields below apply; otherwise
 *		remu_rkey_check() checks against @mr itself
 * @pd:		window: its PD
 * @qpn:	type 2B window: the only QP it may be used through; 0: any
 * @addr:	window: first iova (in the MR's iova space)
 * @length:	window: bytes
 * @access:	window: IB_ACCESS_REMOTE_* rights
 * @gen:	the registration or bind the key named when looked up
 *		(remu_mr.gen, or the window's bind number): two lookups found
 *		the same thing if and only if their @gen are equal
 */
struct remu_rkey {
	struct remu_mr *mr;
	bool win;
	struct remu_pd *pd;
	u32 qpn;
	u64 addr;
	u64 length;
	unsigned int access;
	u64 gen;
};

/**
 * struct remu_mw_bind - the parameters of a bind WQE (IB_UVERBS_WR_BIND_MW)
 * @mw_key:	names the window (its index; the tag is ignored)
 * @new_key:	the rkey the window gets: same index, any tag
 * @lkey:	the MR to bind to (unused when @length is 0)
 * @addr:	first iova of the window, inside the MR
 * @length:	bytes; 0 unbinds a type 1 window
 * @access:	IB_ACCESS_REMOTE_{READ,WRITE,ATOMIC} (LOCAL_WRITE ignored)
 */
struct remu_mw_bind {
	u32 mw_key;
	u32 new_key;
	u32 lkey;
	u64 addr;
	u64 length;
	unsigned int access;
};

/**
 * remu_rkey_get - find what @key names, for a remote access
 * @rdev:	device
 * @key:	rkey from the wire (all 32 bits must match)
 * @rk:		filled in; rk->mr is referenced
 *
 * Context: any; lockless for MRs, the window's spinlock for windows.
 * Return: 0, or -ENOENT if no valid MR or bound window has this key.
 */
int remu_rkey_get(struct remu_dev *rdev, u32 key, struct remu_rkey *rk);

/**
 * remu_rkey_check - may this remote access happen?
 * @rk:		from remu_rkey_get()
 * @pd:		PD of the QP doing the access
 * @qpn:	number of that QP
 * @iova, @len, @access: as remu_mr_check()
 *
 * Return: 0, -EPERM (other PD, or a type 2B window bound through another
 * QP), -ERANGE (outside the MR or the window), -EACCES (rights).
 */
int remu_rkey_check(const struct remu_rkey *rk, struct remu_pd *pd, u32 qpn,
		    u64 iova, u64 len, unsigned int access);

static inline void remu_rkey_put(struct remu_rkey *rk)
{
	remu_mr_put(rk->mr);
}

/**
 * remu_mw_bind - execute a bind WQE posted on a QP of @pd
 * @rdev:	device
 * @pd:		the QP's PD (window and MR must belong to it)
 * @qpn:	the QP's number (a type 2B window is tied to it)
 * @b:		the parameters
 *
 * Context: the requester engine; may sleep.
 * Return: 0; -EINVAL (no such window, key of another window, bad rights,
 * type 2B zero-length bind), -EBUSY (type 2B window already bound),
 * -ENOENT (bad lkey), -EPERM (window or MR of another PD), -EACCES (MR
 * without IB_ACCESS_MW_BIND, a kernel or fast-reg MR, or remote
 * write/atomic on an MR without local write), -ERANGE (outside the MR).
 * On error the window is unchanged.
 */
int remu_mw_bind(struct remu_dev *rdev, struct remu_pd *pd, u32 qpn,
		 const struct remu_mw_bind *b);

/**
 * remu_key_invalidate - IB_WR_LOCAL_INV or SEND_WITH_INV of @key
 * @rdev:	device
 * @pd:		PD of the QP carrying the invalidation
 * @qpn:	SEND_WITH_INV: the QP it arrived on (a type 2B window serves,
 *		and is invalidated through, only the QP it is bound to);
 *		0 for LOCAL_INV, which any QP of the PD may post
 * @key:	the key (all 32 bits)
 *
 * A type 2B window is unbound; any other key goes to remu_mr_invalidate().
 * Return: 0; as remu_mr_invalidate(), and for a window -EINVAL (another
 * key), -EPERM (another PD or, with @qpn, another QP), -EACCES (a type 1
 * window).
 */
int remu_key_invalidate(struct remu_dev *rdev, struct remu_pd *pd, u32 qpn,
			u32 key);

int remu_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int remu_dealloc_mw(struct ib_mw *ibmw);
void remu_mw_dev_init(struct remu_dev *rdev);
void remu_mw_dev_fini(struct remu_dev *rdev);

/*
 * remu_mr.c, for remu_mw.c: count a window bound to @mr, unless @mr is
 * being deregistered (false); and uncount it
 */
bool remu_mr_mw_get(struct remu_mr *mr);
void remu_mr_mw_put(struct remu_mr *mr);

/* a new registration (or bind) number of @rdev's key space */
static inline u64 remu_mrs_gen(struct remu_mr_table *t)
{
	return atomic64_inc_return(&t->gen);
}

/* For the test module: the remu device behind @ibdev, or NULL. */
struct remu_dev *remu_dev_of(struct ib_device *ibdev);

/* ---- verbs and device set-up (remu_mr.c) ---- */
void remu_mr_dev_init(struct remu_dev *rdev);
void remu_mr_dev_fini(struct remu_dev *rdev);
struct ib_mr *remu_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *remu_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
			       u64 iova, int access, struct ib_udata *udata);
struct ib_mr *remu_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				 u64 length, u64 iova, int access,
				 struct ib_pd *ibpd, struct ib_udata *udata);
struct ib_mr *remu_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
			    u32 max_num_sg);
int remu_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		   unsigned int *sg_offset);
int remu_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
int remu_mr_replace(struct remu_mr *old, struct remu_mr *new);
struct ib_mr *remu_reg_dm_mr(struct ib_pd *ibpd, struct ib_dm *ibdm,
			     struct ib_dm_mr_attr *attr,
			     struct uverbs_attr_bundle *attrs);

/* ---- for backings in other files (remu_mr.c) ---- */
struct remu_mr *remu_mr_new(struct ib_pd *ibpd, enum remu_mr_kind kind,
			    const struct remu_mr_backing_ops *ops);
struct ib_mr *remu_mr_publish(struct remu_mr *mr);
void remu_mr_discard(struct remu_mr *mr);

/* ---- indirect keys (remu_mkey.c; remu_mr.c's map and check loops) ---- */
struct remu_mkey_layout;
struct remu_send_wqe;
int remu_mr_map_seg_depth(struct remu_mr *mr, u64 off, u64 len, bool write,
			  struct remu_mr_seg *seg, unsigned int depth);
void remu_mr_unmap_seg(struct remu_mr *mr, struct remu_mr_seg *seg);
int remu_mr_check_depth(struct remu_mr *mr, struct remu_pd *pd, u64 iova,
			u64 len, unsigned int access, unsigned int depth);
int remu_mkey_map(struct remu_mr *mr, u64 off, u64 len, bool write,
		  struct remu_mr_seg *seg, unsigned int depth);
void remu_mkey_unmap(struct remu_mr_seg *seg);
int remu_mkey_check(struct remu_mr *mr, struct remu_pd *pd, u64 iova,
		    u64 len, unsigned int access, unsigned int depth);
/* REMU_WR_UMR: 0, or -EINVAL/-EPERM/-EBUSY/-ENOMEM (IB_WC_MW_BIND_ERR) */
int remu_mkey_umr(struct remu_dev *rdev, struct remu_pd *pd, u32 qpn,
		  const struct remu_send_wqe *w);
struct remu_mr *remu_mkey_create(struct ib_pd *ibpd, u32 max_entries,
				 bool remote_inv);
void remu_mkey_destroy(struct remu_mr *mr);
/* SEND_WITH_INV of an indirect key created without REMOTE_INV? */
bool remu_mkey_no_remote_inv(struct remu_dev *rdev, u32 key);

/* ---- on-demand paging (remu_odp.c) ---- */
#ifdef CONFIG_INFINIBAND_ON_DEMAND_PAGING
struct ib_mr *remu_odp_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 iova, int access);
void remu_odp_dev_init(struct remu_dev *rdev);
int remu_odp_fill_stat_mr_entry(struct sk_buff *msg, struct ib_mr *ibmr);
void remu_odp_count_key_miss(struct remu_dev *rdev);
int remu_advise_mr(struct ib_pd *ibpd, enum ib_uverbs_advise_mr_advice advice,
		   u32 flags, struct ib_sge *sg_list, u32 num_sge,
		   struct uverbs_attr_bundle *attrs);
#else
static inline struct ib_mr *remu_odp_reg_user_mr(struct ib_pd *ibpd,
						 u64 start, u64 length,
						 u64 iova, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static inline void remu_odp_dev_init(struct remu_dev *rdev) {}
static inline void remu_odp_count_key_miss(struct remu_dev *rdev) {}
#define remu_advise_mr NULL
#define remu_odp_fill_stat_mr_entry NULL
#endif

/* ---- dma-buf import (remu_dmabuf.c) ---- */
struct ib_mr *remu_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset,
				      u64 length, u64 iova, int fd,
				      int access,
				      struct uverbs_attr_bundle *attrs);
int remu_dmabuf_dev_init(struct remu_dev *rdev);
void remu_dmabuf_dev_fini(struct remu_dev *rdev);

#endif /* REMU_MR_H */
