/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * remu_test_dmabuf.h - the ioctl interface of remu_test_dmabuf.ko, the
 * test exporter that creates dynamic dma-bufs and moves or evicts their
 * backing pages on command (selftests only; not part of remu's ABI).
 * Included by the module and by remu_dmabuf_test.c.
 *
 * Open /dev/remu_test_dmabuf and create a buffer with REMU_TDB_CREATE
 * (it returns a dma-buf fd); every other ioctl names a buffer by that fd
 * and fails with EINVAL for a dma-buf of another exporter.
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
	__u32 reserved;
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

#endif /* REMU_TEST_DMABUF_H */
