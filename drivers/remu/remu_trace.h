/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_trace.h - remu's tracepoints (system "remu"): every memory event
 * (MR registration, ODP faults, invalidations and prefetch, implicit ODP
 * children, device memory, dma-buf, memory windows, rereg) and the points
 * of the data path a reader needs to follow one message (packets sent and
 * received, retransmission, RNR, QP state changes, error completions).
 * Each event, its fields and recipes: docs/tracing.md.
 *
 * Cost when off: a tracepoint is a static branch (a NOP until enabled);
 * its arguments are pointers and values the caller already has, and
 * everything an event records is computed in TP_fast_assign, which runs
 * only when it is enabled.  The one event that needs work before the
 * fact (remu_odp_fault's duration) reads the clock only when
 * trace_remu_odp_fault_enabled().
 *
 * Portability (6.1 to 7.x): only TRACE_EVENT, TRACE_EVENT_CONDITION,
 * DECLARE_EVENT_CLASS/DEFINE_EVENT, TRACE_DEFINE_ENUM, __array and
 * __print_symbolic; strings are fixed-size __array(char) fields filled
 * with strscpy() (the __string()/__assign_str() pair changed signature in
 * 6.10).  Device names longer than REMU_TRACE_DEV_LEN - 1 are cut.
 *
 * Locking: none; events may fire in any context (the packet receive
 * event fires in softirq, the error completion under the CQ's lock).
 *
 * remu_trace.c defines CREATE_TRACE_POINTS and includes this header once;
 * kbuild finds it again through TRACE_INCLUDE_PATH "." and the
 * -I$(src)/drivers/remu in Kbuild (out of tree, M= build).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM remu

#if !defined(REMU_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define REMU_TRACE_H

#include <linux/dma-buf.h>
#include <linux/fs.h>
#include <linux/mmu_notifier.h>
#include <linux/string.h>
#include <linux/tracepoint.h>

#include "remu.h"
#include "remu_hdr.h"
#include "remu_opcode.h"
#include "remu_qp.h"

#ifndef REMU_TRACE_ONCE
#define REMU_TRACE_ONCE

#define REMU_TRACE_DEV_LEN	16
#define REMU_TRACE_OP_LEN	36

/*
 * The MR kinds as the events name them: enum remu_mr_kind, plus implicit
 * ODP (an ODP MR over the whole address space).
 */
enum remu_trace_mr_kind {
	REMU_TRACE_MR_KERNEL = REMU_MR_KERNEL,
	REMU_TRACE_MR_PINNED = REMU_MR_UMEM,
	REMU_TRACE_MR_FAST_REG = REMU_MR_FAST_REG,
	REMU_TRACE_MR_ODP = REMU_MR_ODP,
	REMU_TRACE_MR_DM = REMU_MR_DM,
	REMU_TRACE_MR_DMABUF = REMU_MR_DMABUF,
	REMU_TRACE_MR_INDIRECT = REMU_MR_INDIRECT,
	REMU_TRACE_MR_ODP_IMPLICIT,
};

static inline unsigned int remu_trace_mr_kind(const struct remu_mr *mr)
{
	if (mr->kind == REMU_MR_ODP && mr->length == U64_MAX)
		return REMU_TRACE_MR_ODP_IMPLICIT;
	return mr->kind;
}

/* pages an MR pinned: only a pinned (UMEM) MR pins its pages */
static inline u32 remu_trace_mr_pinned(const struct remu_mr *mr)
{
	return mr->kind == REMU_MR_UMEM ? mr->npages : 0;
}

/** enum remu_trace_retx - why the requester goes back (remu_retransmit) */
enum remu_trace_retx {
	REMU_RETX_TIMEOUT,	/* the retransmit timer expired */
	REMU_RETX_SEQ_NAK,	/* the responder NAKed a PSN sequence error */
	REMU_RETX_RNR,		/* after an RNR NAK's wait */
	REMU_RETX_READ_GAP,	/* READ/atomic responses missing: asked again */
	REMU_RETX_PROBE,	/* a go-back made no progress within the RTT probe */
};

/** enum remu_trace_rnr - which side of an RNR (remu_rnr) */
enum remu_trace_rnr {
	REMU_RNR_NAK_SENT,	/* responder: no receive WQE, RNR NAK sent */
	REMU_RNR_NAK_RCVD,	/* requester: RNR NAK received, will wait */
	REMU_RNR_EXCEEDED,	/* requester: rnr_retry exhausted */
};

#endif /* REMU_TRACE_ONCE */

#define REMU_TRACE_DEV_FIELD	__array(char, dev, REMU_TRACE_DEV_LEN)
#define REMU_TRACE_DEV_ASSIGN(ibdev) \
	strscpy(__entry->dev, (ibdev)->name, REMU_TRACE_DEV_LEN)

TRACE_DEFINE_ENUM(REMU_TRACE_MR_KERNEL);
TRACE_DEFINE_ENUM(REMU_TRACE_MR_PINNED);
TRACE_DEFINE_ENUM(REMU_TRACE_MR_FAST_REG);
TRACE_DEFINE_ENUM(REMU_TRACE_MR_ODP);
TRACE_DEFINE_ENUM(REMU_TRACE_MR_DM);
TRACE_DEFINE_ENUM(REMU_TRACE_MR_DMABUF);
TRACE_DEFINE_ENUM(REMU_TRACE_MR_ODP_IMPLICIT);

#define remu_show_mr_kind(k)					\
	__print_symbolic(k,					\
		{ REMU_TRACE_MR_KERNEL, "kernel" },		\
		{ REMU_TRACE_MR_PINNED, "pinned" },		\
		{ REMU_TRACE_MR_FAST_REG, "fast_reg" },		\
		{ REMU_TRACE_MR_ODP, "odp" },			\
		{ REMU_TRACE_MR_DM, "dm" },			\
		{ REMU_TRACE_MR_DMABUF, "dmabuf" },		\
		{ REMU_TRACE_MR_INDIRECT, "indirect" },		\
		{ REMU_TRACE_MR_ODP_IMPLICIT, "odp_implicit" })

TRACE_DEFINE_ENUM(MMU_NOTIFY_UNMAP);
TRACE_DEFINE_ENUM(MMU_NOTIFY_CLEAR);
TRACE_DEFINE_ENUM(MMU_NOTIFY_PROTECTION_VMA);
TRACE_DEFINE_ENUM(MMU_NOTIFY_PROTECTION_PAGE);
TRACE_DEFINE_ENUM(MMU_NOTIFY_SOFT_DIRTY);
TRACE_DEFINE_ENUM(MMU_NOTIFY_RELEASE);
TRACE_DEFINE_ENUM(MMU_NOTIFY_MIGRATE);

/* values of another kernel's newer events print as numbers */
#define remu_show_mmu_event(e)					\
	__print_symbolic(e,					\
		{ MMU_NOTIFY_UNMAP, "unmap" },			\
		{ MMU_NOTIFY_CLEAR, "clear" },			\
		{ MMU_NOTIFY_PROTECTION_VMA, "protection_vma" },\
		{ MMU_NOTIFY_PROTECTION_PAGE, "protection_page" },\
		{ MMU_NOTIFY_SOFT_DIRTY, "soft_dirty" },	\
		{ MMU_NOTIFY_RELEASE, "release" },		\
		{ MMU_NOTIFY_MIGRATE, "migrate" })

TRACE_DEFINE_ENUM(IB_QPS_RESET);
TRACE_DEFINE_ENUM(IB_QPS_INIT);
TRACE_DEFINE_ENUM(IB_QPS_RTR);
TRACE_DEFINE_ENUM(IB_QPS_RTS);
TRACE_DEFINE_ENUM(IB_QPS_SQD);
TRACE_DEFINE_ENUM(IB_QPS_SQE);
TRACE_DEFINE_ENUM(IB_QPS_ERR);

#define remu_show_qp_state(s)					\
	__print_symbolic(s,					\
		{ IB_QPS_RESET, "RESET" },			\
		{ IB_QPS_INIT, "INIT" },			\
		{ IB_QPS_RTR, "RTR" },				\
		{ IB_QPS_RTS, "RTS" },				\
		{ IB_QPS_SQD, "SQD" },				\
		{ IB_QPS_SQE, "SQE" },				\
		{ IB_QPS_ERR, "ERR" })

TRACE_DEFINE_ENUM(IB_QPT_GSI);
TRACE_DEFINE_ENUM(IB_QPT_RC);
TRACE_DEFINE_ENUM(IB_QPT_UC);
TRACE_DEFINE_ENUM(IB_QPT_UD);

#define remu_show_qp_type(t)					\
	__print_symbolic(t,					\
		{ IB_QPT_GSI, "GSI" },				\
		{ IB_QPT_RC, "RC" },				\
		{ IB_QPT_UC, "UC" },				\
		{ IB_QPT_UD, "UD" })

TRACE_DEFINE_ENUM(IB_WC_LOC_LEN_ERR);
TRACE_DEFINE_ENUM(IB_WC_LOC_QP_OP_ERR);
TRACE_DEFINE_ENUM(IB_WC_LOC_PROT_ERR);
TRACE_DEFINE_ENUM(IB_WC_WR_FLUSH_ERR);
TRACE_DEFINE_ENUM(IB_WC_MW_BIND_ERR);
TRACE_DEFINE_ENUM(IB_WC_BAD_RESP_ERR);
TRACE_DEFINE_ENUM(IB_WC_LOC_ACCESS_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_INV_REQ_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_ACCESS_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_OP_ERR);
TRACE_DEFINE_ENUM(IB_WC_RETRY_EXC_ERR);
TRACE_DEFINE_ENUM(IB_WC_RNR_RETRY_EXC_ERR);
TRACE_DEFINE_ENUM(IB_WC_FATAL_ERR);
TRACE_DEFINE_ENUM(IB_WC_GENERAL_ERR);

#define remu_show_wc_status(s)					\
	__print_symbolic(s,					\
		{ IB_WC_LOC_LEN_ERR, "LOC_LEN_ERR" },		\
		{ IB_WC_LOC_QP_OP_ERR, "LOC_QP_OP_ERR" },	\
		{ IB_WC_LOC_PROT_ERR, "LOC_PROT_ERR" },		\
		{ IB_WC_WR_FLUSH_ERR, "WR_FLUSH_ERR" },		\
		{ IB_WC_MW_BIND_ERR, "MW_BIND_ERR" },		\
		{ IB_WC_BAD_RESP_ERR, "BAD_RESP_ERR" },		\
		{ IB_WC_LOC_ACCESS_ERR, "LOC_ACCESS_ERR" },	\
		{ IB_WC_REM_INV_REQ_ERR, "REM_INV_REQ_ERR" },	\
		{ IB_WC_REM_ACCESS_ERR, "REM_ACCESS_ERR" },	\
		{ IB_WC_REM_OP_ERR, "REM_OP_ERR" },		\
		{ IB_WC_RETRY_EXC_ERR, "RETRY_EXC_ERR" },	\
		{ IB_WC_RNR_RETRY_EXC_ERR, "RNR_RETRY_EXC_ERR" },\
		{ IB_WC_FATAL_ERR, "FATAL_ERR" },		\
		{ IB_WC_GENERAL_ERR, "GENERAL_ERR" })

TRACE_DEFINE_ENUM(REMU_RETX_TIMEOUT);
TRACE_DEFINE_ENUM(REMU_RETX_SEQ_NAK);
TRACE_DEFINE_ENUM(REMU_RETX_RNR);
TRACE_DEFINE_ENUM(REMU_RETX_READ_GAP);
TRACE_DEFINE_ENUM(REMU_RETX_PROBE);
TRACE_DEFINE_ENUM(REMU_RNR_NAK_SENT);
TRACE_DEFINE_ENUM(REMU_RNR_NAK_RCVD);
TRACE_DEFINE_ENUM(REMU_RNR_EXCEEDED);

/* ---- memory regions ---- */

DECLARE_EVENT_CLASS(remu_mr_class,
	TP_PROTO(const struct remu_mr *mr),
	TP_ARGS(mr),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, key)
		__field(u32, kind)
		__field(u32, access)
		__field(u32, pinned)
		__field(u64, iova)
		__field(u64, length)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&mr->rdev->ib_dev);
		__entry->key = mr->key;
		__entry->kind = remu_trace_mr_kind(mr);
		__entry->access = mr->access;
		__entry->pinned = remu_trace_mr_pinned(mr);
		__entry->iova = mr->iova;
		__entry->length = mr->length;
	),
	TP_printk("dev=%s key=0x%x kind=%s iova=0x%llx length=%llu access=0x%x pinned=%u",
		  __entry->dev, __entry->key, remu_show_mr_kind(__entry->kind),
		  __entry->iova, __entry->length, __entry->access,
		  __entry->pinned)
);

/* a new MR got its key (every kind; rereg's new MR too, under a new key) */
DEFINE_EVENT(remu_mr_class, remu_mr_reg,
	TP_PROTO(const struct remu_mr *mr),
	TP_ARGS(mr));

/* an MR is gone: the last access finished, its backing is released next */
DEFINE_EVENT(remu_mr_class, remu_mr_dereg,
	TP_PROTO(const struct remu_mr *mr),
	TP_ARGS(mr));

/* ibv_rereg_mr: @old's key goes to @new (an ERR_PTR: failed, no change) */
TRACE_EVENT(remu_mr_rereg,
	TP_PROTO(const struct remu_mr *old, int flags, const struct ib_mr *new),
	TP_ARGS(old, flags, new),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, key)
		__field(u32, flags)
		__field(int, err)
		__field(u32, old_kind)
		__field(u32, new_kind)
		__field(u32, access)
		__field(u64, iova)
		__field(u64, length)
	),
	TP_fast_assign(
		const struct remu_mr *mr = IS_ERR(new) ? old :
			container_of(new, struct remu_mr, ib_mr);

		REMU_TRACE_DEV_ASSIGN(&old->rdev->ib_dev);
		__entry->key = old->key;
		__entry->flags = flags;
		__entry->err = PTR_ERR_OR_ZERO(new);
		__entry->old_kind = remu_trace_mr_kind(old);
		__entry->new_kind = remu_trace_mr_kind(mr);
		__entry->access = mr->access;
		__entry->iova = mr->iova;
		__entry->length = mr->length;
	),
	TP_printk("dev=%s key=0x%x flags=%s%s%s err=%d old_kind=%s new_kind=%s iova=0x%llx length=%llu access=0x%x",
		  __entry->dev, __entry->key,
		  __entry->flags & IB_MR_REREG_TRANS ? "T" : "",
		  __entry->flags & IB_MR_REREG_PD ? "P" : "",
		  __entry->flags & IB_MR_REREG_ACCESS ? "A" : "",
		  __entry->err, remu_show_mr_kind(__entry->old_kind),
		  remu_show_mr_kind(__entry->new_kind), __entry->iova,
		  __entry->length, __entry->access)
);

/* ---- on-demand paging ---- */

/*
 * One device page fault (or one prefetch piece): [va, va + len) asked
 * for, @pages PAGE_SIZE pages mapped (or -errno), @t0 ktime_get_ns() when
 * it began (0 if the event was off then): ns is how long it took.
 * @fault false: PREFETCH_NO_FAULT (maps what the CPU has).
 */
TRACE_EVENT(remu_odp_fault,
	TP_PROTO(const struct remu_mr *mr, u64 va, u64 len, bool write,
		 bool prefetch, bool fault, int pages, u64 t0),
	TP_ARGS(mr, va, len, write, prefetch, fault, pages, t0),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, key)
		__field(u64, va)
		__field(u64, len)
		__field(int, pages)
		__field(int, err)
		__field(u64, ns)
		__field(u8, write)
		__field(u8, prefetch)
		__field(u8, fault)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&mr->rdev->ib_dev);
		__entry->key = mr->key;
		__entry->va = va;
		__entry->len = len;
		__entry->pages = pages < 0 ? 0 : pages;
		__entry->err = pages < 0 ? pages : 0;
		__entry->ns = t0 ? ktime_get_ns() - t0 : 0;
		__entry->write = write;
		__entry->prefetch = prefetch;
		__entry->fault = fault;
	),
	TP_printk("dev=%s key=0x%x va=0x%llx len=%llu write=%u prefetch=%u fault=%u pages=%d err=%d ns=%llu",
		  __entry->dev, __entry->key, __entry->va, __entry->len,
		  __entry->write, __entry->prefetch, __entry->fault,
		  __entry->pages, __entry->err, __entry->ns)
);

/*
 * The kernel takes [start, end) of an ODP MR's range back (the part inside
 * the umem); @pages translations removed (0: none were there).
 */
TRACE_EVENT(remu_odp_invalidate,
	TP_PROTO(const struct remu_mr *mr,
		 const struct mmu_notifier_range *range, unsigned long start,
		 unsigned long end, u64 pages),
	TP_ARGS(mr, range, start, end, pages),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, key)
		__field(u32, event)
		__field(u64, start)
		__field(u64, end)
		__field(u64, pages)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&mr->rdev->ib_dev);
		__entry->key = mr->key;
		__entry->event = range->event;
		__entry->start = start;
		__entry->end = end;
		__entry->pages = pages;
	),
	TP_printk("dev=%s key=0x%x start=0x%llx end=0x%llx pages=%llu event=%s",
		  __entry->dev, __entry->key, __entry->start, __entry->end,
		  __entry->pages, remu_show_mmu_event(__entry->event))
);

/* one ibv_advise_mr call done (@sync: FLUSH, the caller waited) */
TRACE_EVENT(remu_odp_prefetch,
	TP_PROTO(const struct remu_dev *rdev, bool write, bool fault,
		 u32 num_sge, bool sync, int err),
	TP_ARGS(rdev, write, fault, num_sge, sync, err),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, num_sge)
		__field(int, err)
		__field(u8, write)
		__field(u8, fault)
		__field(u8, sync)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&rdev->ib_dev);
		__entry->num_sge = num_sge;
		__entry->err = err;
		__entry->write = write;
		__entry->fault = fault;
		__entry->sync = sync;
	),
	TP_printk("dev=%s advice=%s num_sge=%u flush=%u err=%d", __entry->dev,
		  !__entry->fault ? "PREFETCH_NO_FAULT" :
		  __entry->write ? "PREFETCH_WRITE" : "PREFETCH",
		  __entry->num_sge, __entry->sync,
		  __entry->err)
);

/* implicit ODP: the child umem covering [start, start + size) is created */
TRACE_EVENT(remu_odp_implicit_child,
	TP_PROTO(const struct remu_mr *mr, u64 start, u64 size, int err),
	TP_ARGS(mr, start, size, err),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, key)
		__field(int, err)
		__field(u64, start)
		__field(u64, size)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&mr->rdev->ib_dev);
		__entry->key = mr->key;
		__entry->err = err;
		__entry->start = start;
		__entry->size = size;
	),
	TP_printk("dev=%s key=0x%x start=0x%llx size=%llu err=%d", __entry->dev,
		  __entry->key, __entry->start, __entry->size, __entry->err)
);

/* ---- device memory ---- */

DECLARE_EVENT_CLASS(remu_dm_class,
	TP_PROTO(const struct ib_device *ibdev, u64 offset, u64 size,
		 u64 in_use),
	TP_ARGS(ibdev, offset, size, in_use),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u64, mmap_off)
		__field(u64, size)
		__field(u64, in_use)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(ibdev);
		__entry->mmap_off = offset;
		__entry->size = size;
		__entry->in_use = in_use;
	),
	TP_printk("dev=%s mmap_off=0x%llx size=%llu in_use=%llu", __entry->dev,
		  __entry->mmap_off, __entry->size, __entry->in_use)
);

/*
 * Device memory: @offset is the allocation's mmap offset (what the
 * provider passes to mmap(); it names the allocation), @in_use the pool's
 * bytes allocated after the event.
 */

/* ibv_alloc_dm: @size bytes (whole pages) taken from the device's pool */
DEFINE_EVENT(remu_dm_class, remu_dm_alloc,
	TP_PROTO(const struct ib_device *ibdev, u64 offset, u64 size,
		 u64 in_use),
	TP_ARGS(ibdev, offset, size, in_use));

/* the last user (DM object, mapping, MR) is gone: back to the pool */
DEFINE_EVENT(remu_dm_class, remu_dm_free,
	TP_PROTO(const struct ib_device *ibdev, u64 offset, u64 size,
		 u64 in_use),
	TP_ARGS(ibdev, offset, size, in_use));

/* a process maps the allocation at user address @va */
TRACE_EVENT(remu_dm_map,
	TP_PROTO(const struct ib_device *ibdev, u64 offset, u64 size,
		 unsigned long va),
	TP_ARGS(ibdev, offset, size, va),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u64, mmap_off)
		__field(u64, size)
		__field(u64, va)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(ibdev);
		__entry->mmap_off = offset;
		__entry->size = size;
		__entry->va = va;
	),
	TP_printk("dev=%s mmap_off=0x%llx size=%llu va=0x%llx", __entry->dev,
		  __entry->mmap_off, __entry->size, __entry->va)
);

/* ---- dma-buf import ---- */

/*
 * @ino names the dma-buf (its inode number, as /proc/PID/fdinfo shows
 * it); @key is its MR's key (0 while it is being registered).
 */
DECLARE_EVENT_CLASS(remu_dmabuf_class,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u32 key, int ret),
	TP_ARGS(ibdev, dmabuf, key, ret),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u64, ino)
		__field(u64, size)
		__field(u32, key)
		__field(int, ret)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(ibdev);
		__entry->ino = file_inode(dmabuf->file)->i_ino;
		__entry->size = dmabuf->size;
		__entry->key = key;
		__entry->ret = ret;
	),
	TP_printk("dev=%s ino=%llu size=%llu key=0x%x ret=%d", __entry->dev,
		  __entry->ino, __entry->size, __entry->key, __entry->ret)
);

/* remu attached to the dma-buf as a dynamic importer (@ret: 0 or -errno) */
DEFINE_EVENT(remu_dmabuf_class, remu_dmabuf_attach,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u32 key, int ret),
	TP_ARGS(ibdev, dmabuf, key, ret));

/* the exporter moves the buffer; @ret 1 if remu dropped a live mapping */
DEFINE_EVENT(remu_dmabuf_class, remu_dmabuf_move_notify,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u32 key, int ret),
	TP_ARGS(ibdev, dmabuf, key, ret));

/* the next access after a move maps the buffer again (@ret: 0 or -errno) */
DEFINE_EVENT(remu_dmabuf_class, remu_dmabuf_remap,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u32 key, int ret),
	TP_ARGS(ibdev, dmabuf, key, ret));

/*
 * A peer-to-peer import mapped the exporter's DMA addresses (@addr the
 * first) and reached them as @ranges CPU ranges, @iomem of them I/O
 * memory (@ret: 0 or -errno; -ENODEV: the exporter revoked the buffer).
 */
TRACE_EVENT(remu_dmabuf_p2p_map,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u32 key, u64 addr, u32 ranges, u32 iomem, int ret),
	TP_ARGS(ibdev, dmabuf, key, addr, ranges, iomem, ret),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u64, ino)
		__field(u64, addr)
		__field(u32, key)
		__field(u32, ranges)
		__field(u32, iomem)
		__field(int, ret)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(ibdev);
		__entry->ino = file_inode(dmabuf->file)->i_ino;
		__entry->addr = addr;
		__entry->key = key;
		__entry->ranges = ranges;
		__entry->iomem = iomem;
		__entry->ret = ret;
	),
	TP_printk("dev=%s ino=%llu key=0x%x addr=0x%llx ranges=%u iomem=%u ret=%d",
		  __entry->dev, __entry->ino, __entry->key, __entry->addr,
		  __entry->ranges, __entry->iomem, __entry->ret)
);

/* ---- device memory exported as a dma-buf ---- */

/*
 * @ino names the exported dma-buf (0 when the export failed before it
 * existed), @mmap_off the DM allocation (as the remu_dm_* events name it);
 * @val is per event.
 */
DECLARE_EVENT_CLASS(remu_dmabuf_exp_class,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u64 mmap_off, u64 val, int ret),
	TP_ARGS(ibdev, dmabuf, mmap_off, val, ret),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u64, ino)
		__field(u64, mmap_off)
		__field(u64, val)
		__field(int, ret)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(ibdev);
		__entry->ino = dmabuf ? file_inode(dmabuf->file)->i_ino : 0;
		__entry->mmap_off = mmap_off;
		__entry->val = val;
		__entry->ret = ret;
	),
	TP_printk("dev=%s ino=%llu mmap_off=0x%llx val=0x%llx ret=%d",
		  __entry->dev, __entry->ino, __entry->mmap_off, __entry->val,
		  __entry->ret)
);

/* a DM exported: @val its size, @ret the new fd or -errno */
DEFINE_EVENT(remu_dmabuf_exp_class, remu_dmabuf_export,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u64 mmap_off, u64 val, int ret),
	TP_ARGS(ibdev, dmabuf, mmap_off, val, ret));

/* an importer attaches: @val 1 if it takes peer-to-peer addresses */
DEFINE_EVENT(remu_dmabuf_exp_class, remu_dmabuf_exp_attach,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u64 mmap_off, u64 val, int ret),
	TP_ARGS(ibdev, dmabuf, mmap_off, val, ret));

/* an importer maps it: @val the DMA address it got (@ret 0 or -errno) */
DEFINE_EVENT(remu_dmabuf_exp_class, remu_dmabuf_exp_map,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u64 mmap_off, u64 val, int ret),
	TP_ARGS(ibdev, dmabuf, mmap_off, val, ret));

/* an importer unmaps it: @val the DMA address */
DEFINE_EVENT(remu_dmabuf_exp_class, remu_dmabuf_exp_unmap,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u64 mmap_off, u64 val, int ret),
	TP_ARGS(ibdev, dmabuf, mmap_off, val, ret));

/*
 * The DM was freed (ibv_free_dm, process exit, device removal): the
 * importers were told; @val the mappings they still hold after it
 */
DEFINE_EVENT(remu_dmabuf_exp_class, remu_dmabuf_exp_revoke,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u64 mmap_off, u64 val, int ret),
	TP_ARGS(ibdev, dmabuf, mmap_off, val, ret));

/* the dma-buf's last reference is gone: it lets go of the DM's pages */
DEFINE_EVENT(remu_dmabuf_exp_class, remu_dmabuf_exp_release,
	TP_PROTO(const struct ib_device *ibdev, const struct dma_buf *dmabuf,
		 u64 mmap_off, u64 val, int ret),
	TP_ARGS(ibdev, dmabuf, mmap_off, val, ret));

/* ---- memory windows ---- */

/* a bind WQE executed: window @b->mw_key gets @b->new_key (@err 0 or -errno) */
TRACE_EVENT(remu_mw_bind,
	TP_PROTO(const struct remu_dev *rdev, const struct remu_mw_bind *b,
		 u32 type, u32 qpn, int err),
	TP_ARGS(rdev, b, type, qpn, err),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, mw_key)
		__field(u32, new_key)
		__field(u32, mr_key)
		__field(u32, type)
		__field(u32, qpn)
		__field(u32, access)
		__field(int, err)
		__field(u64, addr)
		__field(u64, length)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&rdev->ib_dev);
		__entry->mw_key = b->mw_key;
		__entry->new_key = b->new_key;
		__entry->mr_key = b->lkey;
		__entry->type = type;
		__entry->qpn = qpn;
		__entry->access = b->access;
		__entry->err = err;
		__entry->addr = b->addr;
		__entry->length = b->length;
	),
	TP_printk("dev=%s mw=0x%x new_key=0x%x type=%s mr=0x%x addr=0x%llx length=%llu access=0x%x qpn=%u err=%d",
		  __entry->dev, __entry->mw_key, __entry->new_key,
		  __entry->type == IB_MW_TYPE_2 ? "2B" :
		  __entry->type == IB_MW_TYPE_1 ? "1" : "?", __entry->mr_key,
		  __entry->addr, __entry->length, __entry->access,
		  __entry->qpn, __entry->err)
);

/* LOCAL_INV or SEND_WITH_INV of a type 2B window's key (@qpn 0: LOCAL_INV) */
TRACE_EVENT(remu_mw_invalidate,
	TP_PROTO(const struct remu_dev *rdev, u32 key, u32 qpn, int err),
	TP_ARGS(rdev, key, qpn, err),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, key)
		__field(u32, qpn)
		__field(int, err)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&rdev->ib_dev);
		__entry->key = key;
		__entry->qpn = qpn;
		__entry->err = err;
	),
	TP_printk("dev=%s key=0x%x qpn=%u err=%d", __entry->dev, __entry->key,
		  __entry->qpn, __entry->err)
);

/* ---- indirect memory keys (remu_mkey.c) ---- */

/*
 * A UMR WQE executed on QP @qpn: key @w->ex_data configured with the
 * layout in @w (entries, rows) to @length bytes, or refused (@err).
 */
TRACE_EVENT(remu_umr,
	TP_PROTO(const struct remu_dev *rdev, const struct remu_send_wqe *w,
		 u32 qpn, u64 length, int err),
	TP_ARGS(rdev, w, qpn, length, err),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, key)
		__field(u32, qpn)
		__field(u32, mode)
		__field(u32, entries)
		__field(u32, repeat)
		__field(u32, access)
		__field(int, err)
		__field(u64, length)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&rdev->ib_dev);
		__entry->key = w->ex_data;
		__entry->qpn = qpn;
		__entry->mode = w->swap;
		__entry->entries = w->num_sge;
		__entry->repeat = w->swap == REMU_UMR_INTERLEAVED ?
				  (u32)w->compare_add : 1;
		__entry->access = w->remote_qkey;
		__entry->err = err;
		__entry->length = length;
	),
	TP_printk("dev=%s key=0x%x mode=%s entries=%u repeat=%u length=%llu access=0x%x qpn=%u err=%d",
		  __entry->dev, __entry->key,
		  __entry->mode == REMU_UMR_LIST ? "list" :
		  __entry->mode == REMU_UMR_INTERLEAVED ? "interleaved" : "?",
		  __entry->entries, __entry->repeat, __entry->length,
		  __entry->access, __entry->qpn, __entry->err)
);

/*
 * An access of @len bytes at offset @off of indirect key @mr that its
 * entries refused (no entry there, an entry's MR gone, of another PD,
 * too short or without the right, a chain too deep): @err.
 */
TRACE_EVENT(remu_mkey_err,
	TP_PROTO(const struct remu_mr *mr, u64 off, u64 len, int err),
	TP_ARGS(mr, off, len, err),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, key)
		__field(int, err)
		__field(u64, off)
		__field(u64, len)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&mr->rdev->ib_dev);
		__entry->key = mr->key;
		__entry->err = err;
		__entry->off = off;
		__entry->len = len;
	),
	TP_printk("dev=%s key=0x%x offset=%llu length=%llu err=%d",
		  __entry->dev, __entry->key, __entry->off, __entry->len,
		  __entry->err)
);

/* ---- the data path ---- */

/*
 * One RoCEv2 packet; @bth at the start of BTH + headers + payload + pad +
 * ICRC (@len bytes).  @qpn is the BTH's destination QP.
 */
DECLARE_EVENT_CLASS(remu_pkt_class,
	TP_PROTO(const struct remu_dev *rdev, const struct remu_bth *bth,
		 unsigned int len),
	TP_ARGS(rdev, bth, len),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__array(char, op, REMU_TRACE_OP_LEN)
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, paylen)
		__field(u8, opcode)
		__field(u8, ack_req)
	),
	TP_fast_assign(
		const struct remu_opcode_info *info =
			&remu_opcode[remu_bth_opcode(bth)];
		unsigned int over = info->length + remu_bth_pad(bth) +
				    REMU_ICRC_LEN;

		REMU_TRACE_DEV_ASSIGN(&rdev->ib_dev);
		strscpy(__entry->op, info->name ?: "?", REMU_TRACE_OP_LEN);
		__entry->qpn = remu_bth_qpn(bth);
		__entry->psn = remu_bth_psn(bth);
		__entry->paylen = len > over ? len - over : 0;
		__entry->opcode = remu_bth_opcode(bth);
		__entry->ack_req = remu_bth_ack_req(bth);
	),
	TP_printk("dev=%s qpn=%u psn=%u op=%s opcode=0x%02x paylen=%u ackreq=%u",
		  __entry->dev, __entry->qpn, __entry->psn, __entry->op,
		  __entry->opcode, __entry->paylen, __entry->ack_req)
);

/* the device hands a packet to the IP layer */
DEFINE_EVENT(remu_pkt_class, remu_pkt_send,
	TP_PROTO(const struct remu_dev *rdev, const struct remu_bth *bth,
		 unsigned int len),
	TP_ARGS(rdev, bth, len));

/* a packet passed the receive checks (ICRC, headers) */
DEFINE_EVENT(remu_pkt_class, remu_pkt_recv,
	TP_PROTO(const struct remu_dev *rdev, const struct remu_bth *bth,
		 unsigned int len),
	TP_ARGS(rdev, bth, len));

/* the requester goes back to @psn and sends again */
TRACE_EVENT(remu_retransmit,
	TP_PROTO(const struct remu_qp *qp, u32 psn, u32 reason, u32 left),
	TP_ARGS(qp, psn, reason, left),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, reason)
		__field(u32, left)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&qp->rdev->ib_dev);
		__entry->qpn = qp->ib_qp.qp_num;
		__entry->psn = psn;
		__entry->reason = reason;
		__entry->left = left;
	),
	TP_printk("dev=%s qpn=%u psn=%u reason=%s retries_left=%u", __entry->dev,
		  __entry->qpn, __entry->psn,
		  __print_symbolic(__entry->reason,
				   { REMU_RETX_TIMEOUT, "timeout" },
				   { REMU_RETX_SEQ_NAK, "seq_nak" },
				   { REMU_RETX_RNR, "rnr" },
				   { REMU_RETX_READ_GAP, "read_gap" },
				   { REMU_RETX_PROBE, "probe" }),
		  __entry->left)
);

/*
 * Receiver not ready: the responder NAKs (@usecs: the delay it asks for),
 * or the requester got the NAK and waits @usecs (@left retries left, 7:
 * forever), or gives up.
 */
TRACE_EVENT(remu_rnr,
	TP_PROTO(const struct remu_qp *qp, u32 psn, u32 what, u32 usecs,
		 u32 left),
	TP_ARGS(qp, psn, what, usecs, left),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, what)
		__field(u32, usecs)
		__field(u32, left)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&qp->rdev->ib_dev);
		__entry->qpn = qp->ib_qp.qp_num;
		__entry->psn = psn;
		__entry->what = what;
		__entry->usecs = usecs;
		__entry->left = left;
	),
	TP_printk("dev=%s qpn=%u psn=%u what=%s usecs=%u rnr_left=%u", __entry->dev,
		  __entry->qpn, __entry->psn,
		  __print_symbolic(__entry->what,
				   { REMU_RNR_NAK_SENT, "nak_sent" },
				   { REMU_RNR_NAK_RCVD, "nak_rcvd" },
				   { REMU_RNR_EXCEEDED, "exceeded" }),
		  __entry->usecs, __entry->left)
);

/* modify_qp, or an engine moving the QP to ERR */
TRACE_EVENT(remu_qp_state,
	TP_PROTO(const struct remu_qp *qp, int cur, int next),
	TP_ARGS(qp, cur, next),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, qpn)
		__field(u32, type)
		__field(u32, cur)
		__field(u32, next)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&qp->rdev->ib_dev);
		__entry->qpn = qp->ib_qp.qp_num;
		__entry->type = qp->ib_qp.qp_type;
		__entry->cur = cur;
		__entry->next = next;
	),
	TP_printk("dev=%s qpn=%u type=%s old=%s new=%s", __entry->dev, __entry->qpn,
		  remu_show_qp_type(__entry->type),
		  remu_show_qp_state(__entry->cur),
		  remu_show_qp_state(__entry->next))
);

/* a completion with an error status is written into a CQ */
TRACE_EVENT_CONDITION(remu_cqe_err,
	TP_PROTO(const struct remu_cq *cq, const struct remu_cqe *cqe),
	TP_ARGS(cq, cqe),
	TP_CONDITION(cqe->status != IB_WC_SUCCESS),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u64, wr_id)
		__field(u32, qpn)
		__field(u32, status)
		__field(u32, opcode)
		__field(u32, vendor_err)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(cq->ib_cq.device);
		__entry->wr_id = cqe->wr_id;
		__entry->qpn = cqe->qp_num;
		__entry->status = cqe->status;
		__entry->opcode = cqe->opcode;
		__entry->vendor_err = cqe->vendor_err;
	),
	TP_printk("dev=%s qpn=%u wr_id=0x%llx status=%s status_num=%u opcode=%u vendor_err=0x%x",
		  __entry->dev, __entry->qpn, __entry->wr_id,
		  remu_show_wc_status(__entry->status), __entry->status,
		  __entry->opcode, __entry->vendor_err)
);

/* modify_qp set a rate limit on @qp (@rate_kbps 0: none; @burst 0: default) */
TRACE_EVENT(remu_rate_limit,
	TP_PROTO(const struct remu_qp *qp, u32 rate_kbps, u32 burst),
	TP_ARGS(qp, rate_kbps, burst),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, qpn)
		__field(u32, rate_kbps)
		__field(u32, burst)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&qp->rdev->ib_dev);
		__entry->qpn = qp->ib_qp.qp_num;
		__entry->rate_kbps = rate_kbps;
		__entry->burst = burst;
	),
	TP_printk("dev=%s qpn=%u rate_kbps=%u max_burst_sz=%u", __entry->dev,
		  __entry->qpn, __entry->rate_kbps, __entry->burst)
);

/* the rate limit holds @qp's next request packet for @wait_ns */
TRACE_EVENT(remu_pace_hold,
	TP_PROTO(const struct remu_qp *qp, u32 rate_kbps, u64 wait_ns),
	TP_ARGS(qp, rate_kbps, wait_ns),
	TP_STRUCT__entry(
		REMU_TRACE_DEV_FIELD
		__field(u32, qpn)
		__field(u32, rate_kbps)
		__field(u64, wait_ns)
	),
	TP_fast_assign(
		REMU_TRACE_DEV_ASSIGN(&qp->rdev->ib_dev);
		__entry->qpn = qp->ib_qp.qp_num;
		__entry->rate_kbps = rate_kbps;
		__entry->wait_ns = wait_ns;
	),
	TP_printk("dev=%s qpn=%u rate_kbps=%u wait_ns=%llu", __entry->dev,
		  __entry->qpn, __entry->rate_kbps, __entry->wait_ns)
);

#endif /* REMU_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE remu_trace
#include <trace/define_trace.h>
