/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_param.h - limits and identity of the emulated device.  A limit is
 * reported to users only once the matching feature works: the ones here
 * are the ones remu implements today.
 */
#ifndef REMU_PARAM_H
#define REMU_PARAM_H

#include <linux/bits.h>

#define REMU_VERSION_MAJOR	0
#define REMU_VERSION_MINOR	1
#define REMU_VERSION_SUB	0
#define REMU_VERSION_STR	"0.1.0"

/* No IEEE OUI is assigned to remu: report the "none" value rxe uses too. */
#define REMU_VENDOR_ID		0xffffff
#define REMU_VENDOR_PART_ID	0x7265	/* "re" */
#define REMU_HW_VER		1

#define REMU_MAX_PD		0x10000
#define REMU_MAX_UCONTEXT	512
#define REMU_GID_TBL_LEN	128
#define REMU_PKEY_TBL_LEN	1
#define REMU_DEFAULT_PKEY	0xffff
/*
 * Memory regions.  Keys have a 24-bit index, so REMU_MAX_MR live MRs leave
 * most of the index space free for cyclic reuse (stale keys keep missing).
 * A pinned MR costs one pointer per 4 KiB page for its page array, so
 * 512 GiB keeps that array (1 GiB) within what kvmalloc hands out.
 */
#define REMU_MAX_MR		0x100000
#define REMU_MAX_MR_SIZE	BIT_ULL(39)	/* 512 GiB */
#define REMU_MAX_FAST_REG_PAGES	512
/* memory windows: their keys share the MRs' 24-bit index space */
#define REMU_MAX_MW		0x10000
#define REMU_MAX_MSG_SZ		0x80000000u	/* 2 GiB, as IBTA allows */

/*
 * RoCEv2 overhead inside one Ethernet frame: IPv6 header (the larger of
 * the two) + UDP + BTH + the largest extended header set (RETH/AETH/...)
 * + ICRC.  The IB MTU reported is the largest one that fits what is left.
 */
#define REMU_ROCE_OVERHEAD	(40 + 8 + 12 + 28 + 4)

/*
 * Device memory (remu_dm.c): the pool reserved per device, in KiB (module
 * parameter dm_pool_kb).  64 MiB is 16 chunks of 4 MiB; the largest single
 * allocation is one chunk.
 */
#define REMU_DM_POOL_DEFAULT_KB	1024
#define REMU_DM_POOL_MAX_KB	65536
/* the share of a device's pool one user context may hold (dm_ctx_pct) */
#define REMU_DM_CTX_PCT_DEFAULT	50

/* queues (remu_cq.c, remu_qp.c, remu_srq.c, remu_ah.c) */
#define REMU_MAX_QP		16384
#define REMU_MAX_QPN		0xffffff	/* QPNs are 24 bits; 0 and 1 are special */
#define REMU_MAX_QP_WR		16384
#define REMU_MAX_SGE		16
#define REMU_MAX_INLINE		256
/*
 * READs/atomics in flight per QP, each way.  rxe's figure: perftest (and
 * the RDMA CM's defaults) give each side's max_rd_atomic the other
 * side's limit, which every NIC refuses above its own, so a smaller
 * limit here than a peer's makes such programs fail against it.
 */
#define REMU_MAX_RD_ATOMIC	128
/* READs that can place responses out of order at once (remu_rd_map) */
#define REMU_RD_MAPS		16
#define REMU_MAX_CQ		16384
#define REMU_MAX_CQE		4194303		/* mlx5's: (1 << 22) - 1 */
#define REMU_MAX_SRQ		16384
#define REMU_MAX_SRQ_WR		16384
#define REMU_MAX_SRQ_SGE	16
#define REMU_MAX_AH		65536

/*
 * Completion timestamps (remu_cq.c): the device clock counts nanoseconds
 * (CLOCK_MONOTONIC_RAW), so its frequency is 1 GHz; the mask is mlx5's.
 */
#define REMU_HCA_CORE_CLOCK_KHZ	1000000ULL
#define REMU_TIMESTAMP_MASK	0x7fffffffffffffffULL

/*
 * UD multicast (remu_mcast.c): groups per device, QPs per group, and the
 * attachments of the whole device, which is their product as on mlx5
 * (so the first two are the ones ever reached).
 */
#define REMU_MAX_MCAST_GRP	1024
#define REMU_MAX_MCAST_QP_ATTACH 64
#define REMU_MAX_TOTAL_MCAST_QP_ATTACH \
	(REMU_MAX_MCAST_GRP * REMU_MAX_MCAST_QP_ATTACH)

/*
 * Per-QP rate limits (remu_pace.c), in kbps as the verbs give them
 * (1 kbps = 1000 bit/s): the packet_pacing_caps reported.  mlx5 reports
 * its firmware's range; these are remu's own: 1 Mb/s, at which one packet
 * of the largest MTU already takes 34 ms, to 100 Gb/s, faster than remu
 * moves packets over any netdev.
 */
#define REMU_RATE_LIMIT_MIN	1000U		/* 1 Mb/s */
#define REMU_RATE_LIMIT_MAX	100000000U	/* 100 Gb/s */

#endif /* REMU_PARAM_H */
