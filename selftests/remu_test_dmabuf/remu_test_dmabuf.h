/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * remu_test_dmabuf.h - the ioctl interface of remu_test_dmabuf.ko, the
 * test exporter that creates dynamic dma-bufs and moves or evicts their
 * backing pages on command (selftests only; not part of remu's ABI).
 * Included by the module and by remu_dmabuf_test.c.
 *
 * Open /dev/remu_test_dmabuf and create a buffer with REMU_TDB_CREATE
 * (it returns a dma-buf fd); every other ioctl names a buffer by that fd
 * and fails with EINVAL for a dma-buf of another exporter, but the test
 * importer's (REMU_TDB_IMPORT*), which takes any dma-buf.
 */
#ifndef REMU_TEST_DMABUF_H
#define REMU_TEST_DMABUF_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define REMU_TDB_DEVNAME	"remu_test_dmabuf"
#define REMU_TDB_MAX_SIZE	(64u << 20)	/* largest buffer */
#define REMU_TDB_MAX_RW		(16u << 20)	/* largest direct read/write */

/* flags of struct remu_tdb_create */
#define REMU_TDB_RDONLY		0x1	/* the dma-buf file is read-only */
#define REMU_TDB_NO_VMAP	0x2	/* exporter without a CPU mapping */
/*
 * A peer-to-peer buffer that behaves as VFIO's BAR export: peer2peer
 * importers only (others EOPNOTSUPP), no pin (accepted where the kernel
 * pins around every map, REMU_DMABUF_PIN_ON_MAP; it never stops a move or
 * a revoke), no vmap, a table of DMA addresses with no struct page.
 */
#define REMU_TDB_P2P		0x4
/* vmap hands the pages as I/O memory (iosys_map.is_iomem), as VRAM is */
#define REMU_TDB_IOMEM		0x8
/* with REMU_TDB_P2P: map hands an address no memory is at */
#define REMU_TDB_BAD_DMA	0x10
/* with REMU_TDB_P2P: map fails with EINVAL, as 7.x's
 * dma_buf_phys_vec_to_sgt() does for an importer it has no P2P path to */
#define REMU_TDB_NO_PATH	0x20

struct remu_tdb_create {
	__aligned_u64 size;		/* bytes, rounded up to pages */
	__u32 flags;
	__s32 fd;			/* out: the dma-buf */
};

/* direct access to the backing store, wherever it is now */
struct remu_tdb_rw {
	__s32 fd;
	__u32 reserved;
	__aligned_u64 offset;
	__aligned_u64 len;
	__aligned_u64 buf;		/* user buffer of len bytes */
};

/*
 * Move the backing to new pages (EBUSY: pinned, or an importer kept its
 * CPU mapping across move_notify; ENODATA: evicted).  delay_ms 0: the copy is done under the
 * reservation lock; else the pages are switched at once and the copy runs
 * delay_ms later, behind a kernel fence in the reservation object (as a
 * GPU's copy engine would), which an importer must wait for.
 */
struct remu_tdb_move {
	__s32 fd;
	__u32 delay_ms;
};

struct remu_tdb_info {
	__s32 fd;
	__u32 evicted;			/* out: the backing is swapped out */
	__aligned_u64 moves;		/* out: completed moves */
	__aligned_u64 evictions;	/* out */
	__aligned_u64 vmaps;		/* out: ops->vmap calls */
	__u32 vmapped;			/* out: a CPU mapping exists now */
	__u32 pins;			/* out: pin count */
	__u32 attachments;		/* out: importers attached now */
	__u32 mapped;			/* out: sg tables mapped now */
	__aligned_u64 maps;		/* out: ops->map_dma_buf successes */
	__u32 revoked;			/* out: REMU_TDB_REVOKE in force */
	__u32 p2p_pins;			/* out: P2P: pins the core took */
};

/*
 * Revoke (revoke 1) or re-enable (0) a buffer without vmap (P2P, NO_VMAP;
 * others EINVAL: the dma-buf core WARNs when a vmap fails), as VFIO does
 * when a device's memory decode is turned off and on: under the
 * reservation lock the state changes and every importer gets move_notify;
 * while revoked, attach (P2P), map and pin fail with ENODEV.  A revoke
 * after which an importer still holds a mapping fails with EBUSY (it
 * stays revoked).
 */
struct remu_tdb_revoke {
	__s32 fd;
	__u32 revoke;
};

/*
 * The test importer: each open file of the device can import one dma-buf
 * (any exporter's) as a dynamic importer whose move_notify unmaps at
 * once, with or without peer2peer, optionally pinning and mapping it;
 * errors of each step are reported, not returned.
 */
#define REMU_TDB_IMP_P2P	0x1	/* allow_peer2peer */
#define REMU_TDB_IMP_PIN	0x2	/* dma_buf_pin() after attaching */
#define REMU_TDB_IMP_MAP	0x4	/* dma_buf_map_attachment() */
#define REMU_TDB_IMP_NOMASK	0x8	/* attach with a device that has no
					 * DMA mask (cannot do DMA at all) */

struct remu_tdb_import {
	__s32 fd;			/* in: the dma-buf */
	__u32 flags;			/* in: REMU_TDB_IMP_* */
	__s32 attach_err;		/* out: 0 or -errno */
	__s32 pin_err;			/* out */
	__s32 map_err;			/* out */
	__u32 nents;			/* out: entries of the mapped table */
	__aligned_u64 dma_addr;		/* out: its first DMA address */
	__aligned_u64 dma_len;		/* out: bytes it maps in all */
	__u32 pages;			/* out: entries with a struct page */
	__u32 pin_on_map;		/* out: the kernel's dma-buf core pins
					 * around maps by dynamic importers
					 * (REMU_DMABUF_PIN_ON_MAP: 6.x
					 * without CONFIG_DMABUF_MOVE_NOTIFY) */
};

struct remu_tdb_import_info {
	__u32 attached;			/* out */
	__u32 mapped;			/* out */
	__u32 pinned;			/* out */
	__u32 reserved;
	__aligned_u64 moves;		/* out: move_notify calls */
};

#define REMU_TDB_IOC		'R'
#define REMU_TDB_CREATE	_IOWR(REMU_TDB_IOC, 0x40, struct remu_tdb_create)
#define REMU_TDB_READ		_IOW(REMU_TDB_IOC, 0x41, struct remu_tdb_rw)
#define REMU_TDB_WRITE		_IOW(REMU_TDB_IOC, 0x42, struct remu_tdb_rw)
#define REMU_TDB_MOVE		_IOW(REMU_TDB_IOC, 0x43, struct remu_tdb_move)
/* evict: the content goes to a swap copy and the pages are freed; the
 * next vmap, map or pin brings it back in new pages (errors as a move) */
#define REMU_TDB_EVICT		_IOW(REMU_TDB_IOC, 0x44, __s32)
#define REMU_TDB_INFO		_IOWR(REMU_TDB_IOC, 0x45, struct remu_tdb_info)
#define REMU_TDB_REVOKE	_IOW(REMU_TDB_IOC, 0x46, struct remu_tdb_revoke)
/* the test importer (one per open file) */
#define REMU_TDB_IMPORT	_IOWR(REMU_TDB_IOC, 0x47, struct remu_tdb_import)
#define REMU_TDB_IMPORT_INFO	_IOR(REMU_TDB_IOC, 0x48, struct remu_tdb_import_info)
/* map again (the reservation lock held): 0 or the exporter's error */
#define REMU_TDB_IMPORT_MAP	_IO(REMU_TDB_IOC, 0x49)
/* read or write through the mapping's DMA addresses (direct mapped
 * machine: they are physical addresses); fd unused; ENODEV if unmapped */
#define REMU_TDB_IMPORT_READ	_IOW(REMU_TDB_IOC, 0x4a, struct remu_tdb_rw)
#define REMU_TDB_IMPORT_WRITE	_IOW(REMU_TDB_IOC, 0x4b, struct remu_tdb_rw)
/* unmap, unpin, detach, drop the dma-buf (also done at close) */
#define REMU_TDB_IMPORT_DROP	_IO(REMU_TDB_IOC, 0x4c)

#endif /* REMU_TEST_DMABUF_H */
