/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * remu-abi.h - the ABI between the remu kernel module and its rdma-core
 * provider (libremu).  This is the one header both sides include: the
 * module from uapi/rdma/, the provider from the rdma-core tree's
 * kernel-headers/rdma/ (a verbatim copy made at build time).
 *
 * Rules: fixed-size fields only (__u32, __aligned_u64), explicit padding,
 * no pointers.  New fields go at the end of a struct and are announced by a
 * comp_mask bit; reserved fields must be zero and are checked.
 */
#ifndef REMU_ABI_USER_H
#define REMU_ABI_USER_H

#include <linux/types.h>
#include <rdma/ib_user_ioctl_cmds.h>

/* Bumped on any incompatible change; the provider accepts exactly this. */
#define REMU_ABI_VERSION 1

/*
 * Value of the device's sysfs attribute "hca_type".  The provider recognises
 * remu devices by it, whatever name the user gave them.
 */
#define REMU_HCA_TYPE "remu"

/*
 * remu_alloc_ucontext_resp.comp_mask: what the module offers beyond
 * REMU_ABI_VERSION's base (a provider uses an offer only when it is here,
 * so old providers and old modules keep working with new ones).
 */
enum {
	/* create_cq takes REMU_CREATE_CQ_INLINE_RECV (inline receive) */
	REMU_UCTX_INLINE_RECV = 1 << 0,
	/* create_cq takes REMU_CREATE_CQ_TIMESTAMP (completion timestamps) */
	REMU_UCTX_CQE_TIMESTAMP = 1 << 1,
	/* send WQEs may be IB_UVERBS_WR_ATOMIC_WRITE and IB_UVERBS_WR_FLUSH */
	REMU_UCTX_FLUSH_ATOMIC_WRITE = 1 << 2,
	/* indirect memory keys: alloc_mw takes remu_alloc_mw_cmd, send
	 * WQEs may be REMU_WR_UMR (docs/indirect-keys.md) */
	REMU_UCTX_INDIRECT_MKEY = 1 << 3,
	/* per-QP rate limits: the extended query_device takes
	 * remu_query_device_resp, the extended modify_qp takes
	 * IB_QP_RATE_LIMIT and remu_modify_qp_cmd (docs/rate-limits.md) */
	REMU_UCTX_RATE_LIMIT = 1 << 4,
	/* objects can be imported into another process: the QUERY_CONTEXT,
	 * PD query and DM query methods below */
	REMU_UCTX_IMPORT = 1 << 5,
	/* ECE: create_qp takes remu_create_qp_cmd and answers its
	 * ece_options, the extended modify_qp takes remu_modify_qp_cmd's
	 * ece_options and answers remu_modify_qp_resp */
	REMU_UCTX_ECE = 1 << 6,
};

/* Response to ibv_open_device() (IB_USER_VERBS_CMD_GET_CONTEXT). */
struct remu_alloc_ucontext_resp {
	__u32 comp_mask;	/* REMU_UCTX_* */
	__u32 abi_version;	/* REMU_ABI_VERSION of the module */
	__aligned_u64 reserved;	/* 0 */
};

/*
 * Rings shared between the kernel and the provider.
 *
 * A ring is one mmap()ed buffer: a struct remu_ring_hdr, then
 * num_slots (a power of two) slots of slot_size bytes each, starting at
 * REMU_RING_HDR_SIZE.  prod and cons are free-running 32-bit counters;
 * slot i lives at (i & (num_slots - 1)).  The ring is empty when
 * prod == cons and full when prod - cons == num_slots.  Each index has
 * exactly one writer: the producer writes prod (after the slot, with
 * release order), the consumer writes cons (after it is done with the
 * slot, with release order); each side reads the other's index with
 * acquire order.  The two live on separate cache lines.
 *
 *   ring          producer          consumer
 *   CQ            kernel            provider (poll_cq)
 *   SQ, RQ, SRQ   provider (post)   kernel
 *
 * The kernel keeps its own copy of the geometry and of its own index and
 * never trusts the header for them.
 */
#define REMU_RING_HDR_SIZE 128

/*
 * magic is written once by the kernel and never by the provider.  When
 * the device goes away under a live process (rdma link delete, module
 * removal: disassociation), the core replaces every ring mapping with a
 * page of zeros, so a provider that no longer reads REMU_RING_MAGIC
 * there knows the ring is gone and fails the verb instead of reading
 * junk.
 */
#define REMU_RING_MAGIC 0x756d6572	/* "remu" */

struct remu_ring_hdr {
	__u32 prod;
	__u32 magic;
	__u32 reserved0[14];
	__u32 cons;
	__u32 reserved1[15];
};

/* Where a ring is, in a create/resize response: mmap(cmd_fd, offset). */
struct remu_ring_info {
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_size;	/* bytes, a multiple of the page size */
	__u32 num_slots;		/* power of two */
	__u32 slot_size;		/* bytes */
};

/* Scatter/gather element, in send and receive WQEs. */
struct remu_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

/* remu_send_wqe.flags: the values of IB_SEND_* and IBV_SEND_* */
enum {
	REMU_WQE_FENCE = 1 << 0,
	REMU_WQE_SIGNALED = 1 << 1,
	REMU_WQE_SOLICITED = 1 << 2,
	REMU_WQE_INLINE = 1 << 3,
};

/*
 * A send WQE: a fixed part, then either num_sge SGEs or inline_len bytes
 * of inline data (REMU_WQE_INLINE).  opcode is an enum ib_uverbs_wr_opcode
 * (IB_UVERBS_WR_SEND, ...).  A slot holds one WQE; the slot size is fixed
 * per QP by the kernel (see remu_create_qp_resp).
 *
 * IB_UVERBS_WR_ATOMIC_WRITE (REMU_UCTX_FLUSH_ATOMIC_WRITE): remote_addr
 * and rkey, and the 8 bytes to write, as they are in memory, in
 * compare_add; no SGEs.  IB_UVERBS_WR_FLUSH (likewise): remote_addr,
 * rkey, compare_add the length, ex_data the FETH's bits (placement type
 * IB_FLUSH_GLOBAL/PERSISTENT in bits 3:0, selectivity IB_FLUSH_RANGE or
 * IB_FLUSH_MR in bits 5:4); no SGEs.
 *
 * IB_UVERBS_WR_BIND_MW (ibv_bind_mw of a type 1 window, or IBV_WR_BIND_MW
 * of a type 2B window) reuses the fields, with no SGEs: ex_data names the
 * window (its rkey; only the 24-bit index is used), rkey is the key it
 * gets (same index, new tag), remote_addr and compare_add are the
 * window's address and length, swap is the lkey of the MR (ignored when
 * the length is 0) and remote_qkey the window's IBV_ACCESS_* rights.
 */
struct remu_send_wqe {
	__aligned_u64 wr_id;
	__u32 opcode;
	__u32 flags;		/* REMU_WQE_* */
	__u32 ex_data;		/* immediate data (big endian) or the rkey to invalidate */
	__u32 num_sge;
	__u32 inline_len;
	__u32 reserved0;
	__aligned_u64 remote_addr;	/* RDMA and atomics */
	__u32 rkey;
	__u32 reserved1;
	__aligned_u64 compare_add;	/* atomics */
	__aligned_u64 swap;
	__u32 ah_num;		/* UD: remu_create_ah_resp.ah_num */
	__u32 remote_qpn;	/* UD */
	__u32 remote_qkey;	/* UD */
	__u32 reserved2;
	/* followed by struct remu_sge[num_sge] or inline data */
};

/*
 * Indirect memory keys (REMU_UCTX_INDIRECT_MKEY; docs/indirect-keys.md).
 *
 * An indirect key is created by ibv_alloc_mw() with a
 * struct remu_alloc_mw_cmd whose flags hold REMU_ALLOC_MW_INDIRECT (the
 * key rides on the uverbs MW object: ibv_dealloc_mw() destroys it); the
 * response gives its lkey (== rkey) and the number of entries it takes.
 * Without driver data, or with flags 0, ibv_alloc_mw() makes a window as
 * before.
 *
 * It is configured by a REMU_WR_UMR send WQE (RC only, flags must hold
 * REMU_WQE_INLINE): ex_data is the key, remote_qkey the IBV_ACCESS_*
 * rights (LOCAL_WRITE, REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC), swap
 * the layout (REMU_UMR_LIST or REMU_UMR_INTERLEAVED), compare_add the
 * repeat count (interleaved), num_sge the number of entries, which
 * follow the fixed part in place of SGEs or inline data, inline_len
 * bytes of them: struct remu_sge (addr, length, lkey) for a list,
 * struct remu_umr_ientry for an interleaved layout.  It completes with
 * opcode REMU_WC_UMR (IBV_WC_DRIVER1, as MLX5DV_WC_UMR).
 */
#define REMU_WR_UMR		0xf0
#define REMU_WC_UMR		135	/* IBV_WC_DRIVER1 */
#define REMU_MKEY_MAX_ENTRIES	16	/* per key; bounded by the slot too */
#define REMU_MKEY_MAX_DEPTH	4	/* keys made of keys, outermost counted */

enum {
	REMU_ALLOC_MW_INDIRECT = 1 << 0,	/* an indirect key, not a window */
	REMU_ALLOC_MW_REMOTE_INV = 1 << 1,	/* SEND_WITH_INV may invalidate it */
};

enum {
	REMU_UMR_LIST = 0,
	REMU_UMR_INTERLEAVED = 1,
};

struct remu_umr_ientry {
	__aligned_u64 addr;
	__u32 bytes_count;
	__u32 bytes_skip;
	__u32 lkey;
	__u32 reserved;		/* 0 */
};

struct remu_alloc_mw_cmd {
	__u32 flags;		/* REMU_ALLOC_MW_* */
	__u32 max_entries;	/* indirect: 1 to REMU_MKEY_MAX_ENTRIES */
};

struct remu_alloc_mw_resp {
	__u32 comp_mask;	/* 0 */
	__u32 max_entries;	/* indirect: what the key takes */
};

/* A receive WQE (RQ and SRQ rings): a fixed part and num_sge SGEs. */
struct remu_recv_wqe {
	__aligned_u64 wr_id;
	__u32 num_sge;
	__u32 reserved;
	/* followed by struct remu_sge[num_sge] */
};

/* remu_cqe.flags */
enum {
	REMU_CQE_GRH = 1 << 0,		/* UD receive: a GRH precedes the data */
	REMU_CQE_WITH_IMM = 1 << 1,	/* ex_data is immediate data */
	REMU_CQE_WITH_INV = 1 << 2,	/* ex_data is the invalidated rkey */
	REMU_CQE_IP_CSUM_OK = 1 << 3,
	REMU_CQE_WITH_SMAC = 1 << 4,	/* smac is valid */
	REMU_CQE_INLINE = 1 << 5,	/* data is in the slot: remu_cqe_ext */
};

/* remu_cqe.network_hdr_type: the network header of a UD receive */
enum {
	REMU_NET_NONE = 0,
	REMU_NET_IPV4 = 1,
	REMU_NET_IPV6 = 2,
};

/*
 * A completion.  status is an enum ib_wc_status value (the same numbers
 * as enum ibv_wc_status), opcode an enum ib_wc_opcode value (the same
 * numbers as enum ibv_wc_opcode: IB_UVERBS_WC_* plus 128 for RECV and 129
 * for RECV_RDMA_WITH_IMM).
 */
struct remu_cqe {
	__aligned_u64 wr_id;
	__u32 status;
	__u32 opcode;
	__u32 vendor_err;
	__u32 byte_len;
	__u32 ex_data;		/* immediate data (big endian) or invalidated rkey */
	__u32 qp_num;		/* the local QP */
	__u32 src_qp;		/* UD: the sender's QP */
	__u32 flags;		/* REMU_CQE_* */
	__u16 pkey_index;
	__u16 slid;		/* 0 on RoCE */
	__u8 sl;
	__u8 dlid_path_bits;
	__u8 network_hdr_type;	/* REMU_NET_* */
	__u8 reserved0;
	__u8 smac[6];
	__u16 vlan_id;
	__u32 inline_sges;	/* REMU_CQE_INLINE: entries of remu_cqe_ext.sge */
	__u32 reserved1;
};

/*
 * Inline receive (scatter to CQE).  A CQ created with
 * REMU_CREATE_CQ_INLINE_RECV has slots of struct remu_cqe_ext.  When a
 * receive completion there has REMU_CQE_INLINE, the kernel did not write
 * the receive buffers: the byte_len bytes the receive WQE would have got
 * (for UD the 40-byte GRH area first) are in data, and the provider copies
 * them, in order, to the inline_sges process addresses in sge (each
 * checked by the kernel against the WQE's lkey: PD, bounds, LOCAL_WRITE,
 * host memory) before it returns the completion.  Used for single-packet
 * messages of 1 to REMU_CQE_INLINE_MAX bytes whose data spans at most
 * REMU_CQE_INLINE_SGES SGEs.
 */
#define REMU_CQE_INLINE_MAX	64
#define REMU_CQE_INLINE_SGES	8

struct remu_cqe_sge {
	__aligned_u64 addr;	/* process virtual address */
	__u32 length;
	__u32 reserved;
};

struct remu_cqe_ext {
	struct remu_cqe cqe;
	__u8 data[REMU_CQE_INLINE_MAX];
	struct remu_cqe_sge sge[REMU_CQE_INLINE_SGES];
};

/*
 * Completion timestamps.  A CQ created with REMU_CREATE_CQ_TIMESTAMP has
 * slots REMU_CQE_TS_SIZE bytes larger than it would have without it (64 or
 * 256: 128 or 320), and the last REMU_CQE_TS_SIZE bytes of every slot are
 * a struct remu_cqe_ts, written by the kernel with the CQE, under the CQ's
 * producer lock, so the stamps of one CQ never go backwards in ring order:
 *   ts         the device clock when the CQE was written, in ns (the
 *              device's hca_core_clock is 1000000 kHz, its timestamp_mask
 *              all ones): the kernel's CLOCK_MONOTONIC_RAW, which the
 *              provider reads for ibv_query_rt_values_ex() without a
 *              system call;
 *   wallclock  CLOCK_REALTIME at the same moment, in ns since the epoch.
 * Both clocks are the initial time namespace's.  The rest is zero.
 */
struct remu_cqe_ts {
	__aligned_u64 ts;
	__aligned_u64 wallclock;
	__aligned_u64 reserved[6];
};

#define REMU_CQE_TS_SIZE	64	/* sizeof(struct remu_cqe_ts) */

/* remu_create_cq_cmd.flags */
enum {
	REMU_CREATE_CQ_INLINE_RECV = 1 << 0,	/* slots of remu_cqe_ext */
	REMU_CREATE_CQ_TIMESTAMP = 1 << 1,	/* slots end in remu_cqe_ts */
};

/*
 * Driver data of ibv_create_cq() and ibv_create_cq_ex() (optional: absent
 * means flags 0).  A flag is used only when the module offered it in
 * remu_alloc_ucontext_resp.comp_mask; the response's slot_size is the
 * format's (remu_cqe or remu_cqe_ext, plus REMU_CQE_TS_SIZE).
 */
struct remu_create_cq_cmd {
	__u32 flags;		/* REMU_CREATE_CQ_* */
	__u32 reserved;		/* 0 */
};

/* Response to ibv_create_cq() and ibv_resize_cq(): the (new) CQ ring. */
struct remu_create_cq_resp {
	struct remu_ring_info ring;
};

struct remu_resize_cq_resp {
	struct remu_ring_info ring;
};

/*
 * ECE (enhanced connection establishment: ibv_set_ece(), ibv_query_ece(),
 * rdma_set_local_ece(), rdma_get_remote_ece(); docs/compatibility.md).
 * The options are laid out as mlx5's: a version in bits 31:28 and
 * capability bits in 27:0, under remu's vendor id (the device's
 * vendor_id).  remu is version 1 and has no capability bit yet.  The
 * kernel answers a request R with the options both sides can use:
 * version min(R's, remu's), R's capability bits that remu has; 0 (ECE
 * off) when R is version 0.
 */
#define REMU_ECE_VENDOR_ID	0xffffff
#define REMU_ECE_VER_SHIFT	28
#define REMU_ECE_VERSION	1
#define REMU_ECE_CAPS		0

/*
 * Driver data of ibv_create_qp() (REMU_UCTX_ECE; optional: absent means
 * all zero): ece_options, what the provider asks for (mlx5's provider
 * asks for version 1 to learn what the device offers); the response's
 * ece_options is the kernel's answer, the QP's options until a
 * modify_qp changes them.
 */
struct remu_create_qp_cmd {
	__u32 ece_options;
	__u32 reserved;		/* 0 */
};

/*
 * Response to ibv_create_qp(): the SQ ring and, without an SRQ, the RQ
 * ring (all zero with an SRQ), the QP number and the inline size; with
 * REMU_UCTX_ECE the QP's ECE options (a provider without it passes a
 * shorter response, which the kernel fills up to max_recv_sge).
 */
struct remu_create_qp_resp {
	struct remu_ring_info sq;
	struct remu_ring_info rq;
	__u32 qpn;
	__u32 max_inline;
	__u32 max_send_sge;
	__u32 max_recv_sge;
	__u32 ece_options;
	__u32 reserved;
};

/* Response to ibv_create_srq(). */
struct remu_create_srq_resp {
	struct remu_ring_info ring;
	__u32 max_sge;
	__u32 reserved;
};

/* Response to ibv_create_ah(): the handle UD send WQEs carry. */
struct remu_create_ah_resp {
	__u32 ah_num;
	__u32 reserved;
};

/*
 * Driver data of the extended modify_qp (IB_USER_VERBS_EX_CMD_MODIFY_QP),
 * which libremu sends for a rate limit (ibv_modify_qp_rate_limit(), or
 * IBV_QP_RATE_LIMIT in ibv_modify_qp()) or for ECE options:
 * - the burst, as mlx5's burst_info.  Read only with IB_QP_RATE_LIMIT in
 *   the mask; a burst or a typical size with rate 0 (no limit) is
 *   EINVAL, as on mlx5.
 * - ece_options (REMU_UCTX_ECE): not 0 asks the kernel to negotiate them
 *   (the options ibv_set_ece() took, mlx5's "set_ece"); with the
 *   modification done, the response (remu_modify_qp_resp) holds the
 *   QP's options then.  0 changes nothing and no response is written.
 */
struct remu_modify_qp_cmd {
	__u32 comp_mask;	/* 0 */
	__u32 max_burst_sz;	/* bytes; 0: the default */
	__u16 typical_pkt_sz;	/* bytes; accepted, remu paces real sizes */
	__u16 reserved0;	/* 0 */
	__u32 ece_options;
};

struct remu_modify_qp_resp {
	__u32 ece_options;
	__u32 reserved;
};

/* ibv_device_attr_ex.packet_pacing_caps: rates in kbps */
struct remu_packet_pacing_caps {
	__u32 qp_rate_limit_min;
	__u32 qp_rate_limit_max;
	__u32 supported_qpts;	/* bit (1 << IBV_QPT_*) per QP type */
	__u32 reserved;
};

/*
 * Driver data of the extended query_device response
 * (IB_USER_VERBS_EX_CMD_QUERY_DEVICE), after the core's.
 */
struct remu_query_device_resp {
	__u32 comp_mask;	/* 0 */
	__u32 response_length;	/* bytes of this struct the module filled */
	struct remu_packet_pacing_caps packet_pacing_caps;
};

/*
 * Device memory (ibv_alloc_dm).  The DM_ALLOC method carries one
 * driver-namespace attribute out: where to mmap() the allocation.  The
 * kernel rounds the length up to the page size, so each allocation has
 * pages of its own; the provider maps mmap_size bytes at mmap_offset on
 * the command fd and copies through that mapping (ibv_memcpy_to/from_dm).
 */
enum remu_dm_alloc_attrs {
	REMU_ATTR_ALLOC_DM_RESP = (1U << UVERBS_ID_NS_SHIFT),
};

struct remu_alloc_dm_resp {
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_size;	/* bytes, a multiple of the page size */
};

/*
 * Device memory exported as a dma-buf (ibv_dm_export_dmabuf_fd() of
 * rdma-core 62 and later, remudv_dm_export_dmabuf_fd() with any release):
 * a driver method of the DM object.  In: the DM's handle.  Out: the file
 * descriptor of a new dma-buf over the whole allocation (page rounded),
 * O_RDWR | O_CLOEXEC, installed in the caller's file table.  The dma-buf
 * serves peer-to-peer importers only and is revoked when the DM is freed
 * (docs/dma-buf.md, "Device memory as a dma-buf").  A module without the
 * method fails the command with EPROTONOSUPPORT.
 */
enum remu_dm_methods {
	REMU_METHOD_DM_EXPORT_DMABUF = (1U << UVERBS_ID_NS_SHIFT),
};

enum remu_dm_export_dmabuf_attrs {
	REMU_ATTR_EXPORT_DMABUF_DM_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	REMU_ATTR_EXPORT_DMABUF_FD,	/* __u32 out */
};

/*
 * Sharing objects between processes (REMU_UCTX_IMPORT): a process that
 * was given another's command fd (SCM_RIGHTS, fork) opens it with
 * ibv_import_device() and reaches the objects of that context by handle.
 *   - UVERBS_METHOD_QUERY_CONTEXT of the device object carries
 *     REMU_ATTR_QUERY_CONTEXT_RESP out: the context's
 *     remu_alloc_ucontext_resp, as ibv_open_device() got it.
 *   - REMU_METHOD_PD_QUERY, a driver method of the PD object: succeeds
 *     for the handle of a live PD of the context (ENOENT for no object,
 *     EINVAL for an object of another type, as every handle lookup).
 *   - REMU_METHOD_DM_QUERY, a driver method of the DM object: where to
 *     mmap() the allocation, as DM_ALLOC answered, and the length
 *     ibv_alloc_dm() asked for.
 * MRs need nothing of remu: the core's UVERBS_METHOD_QUERY_MR.
 */
enum remu_query_context_attrs {
	REMU_ATTR_QUERY_CONTEXT_RESP = (1U << UVERBS_ID_NS_SHIFT),
};

enum remu_pd_methods {
	REMU_METHOD_PD_QUERY = (1U << UVERBS_ID_NS_SHIFT),
};

enum remu_pd_query_attrs {
	REMU_ATTR_QUERY_PD_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
};

/*
 * The DM object's driver methods are numbered together, after
 * REMU_METHOD_DM_EXPORT_DMABUF, and each below 8 after the namespace bit
 * (the core's UVERBS_API_METHOD_KEY_NUM_DRIVER): a larger one makes the
 * device's whole uverbs API fail to build, and the device unusable.
 */
enum remu_dm_query_methods {
	REMU_METHOD_DM_QUERY = REMU_METHOD_DM_EXPORT_DMABUF + 1,
};

enum remu_dm_query_attrs {
	REMU_ATTR_QUERY_DM_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	REMU_ATTR_QUERY_DM_RESP,
};

struct remu_query_dm_resp {
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_size;	/* bytes, a multiple of the page size */
	__aligned_u64 length;		/* bytes ibv_alloc_dm() asked for */
};

#endif /* REMU_ABI_USER_H */
