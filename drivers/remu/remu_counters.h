/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_counters.h - the per-port hardware counters (`rdma statistic show
 * link DEV/1`).  The names live in one table in remu_counters.c; each
 * counter here is counted somewhere, by the wire layer today or by the
 * engines (requester, responder, completer) that own the event.
 *
 * Locking: counters are atomic64_t in struct remu_dev; any context may
 * count.
 */
#ifndef REMU_COUNTERS_H
#define REMU_COUNTERS_H

enum remu_counter {
	/* wire layer (remu_net.c), counted today */
	REMU_CNT_SENT_PKTS,
	REMU_CNT_RCVD_PKTS,
	REMU_CNT_RCVD_ICRC_ERR,
	REMU_CNT_RCVD_TOO_SHORT,
	REMU_CNT_RCVD_IP_OPTIONS,
	REMU_CNT_RCVD_BAD_OPCODE,
	REMU_CNT_RCVD_BAD_VERSION,
	REMU_CNT_RCVD_BAD_PKEY,
	REMU_CNT_RCVD_BAD_LENGTH,
	REMU_CNT_RCVD_NO_QP,
	REMU_CNT_SEND_ERR,
	/* of sent_pkts: handed to a remu device of this namespace directly */
	REMU_CNT_LOOPBACK_PKTS,
	/*
	 * of the packets sent: payload by reference (page frags), no copy;
	 * and of those, the ones copied as they left through the IP stack
	 * (remu_zc.c: only the loopback path keeps them by reference)
	 */
	REMU_CNT_TX_FRAG_PKTS,
	REMU_CNT_TX_FRAG_COPIED,
	/* multicast (remu_mcast.c) */
	REMU_CNT_RCVD_MCAST_PKTS,	/* to a group with attached QPs */
	REMU_CNT_RCVD_MCAST_NO_QP,	/* to a group with none: dropped */
	/* engines; names and meaning as in rdma_rxe */
	REMU_CNT_DUP_REQ,
	REMU_CNT_OUT_OF_SEQ_REQ,
	REMU_CNT_RCV_RNR,
	REMU_CNT_SND_RNR,
	REMU_CNT_RCV_SEQ_ERR,
	/* remu's meaning: an RC packet not ACKed on its own (coalesced) */
	REMU_CNT_ACK_DEFERRED,
	REMU_CNT_RETRY_EXCEEDED,
	REMU_CNT_RNR_RETRY_EXCEEDED,
	REMU_CNT_COMP_RETRY,
	/* resent after a go-back left the hole unfilled for ~2 round trips */
	REMU_CNT_RETRY_PROBE,
	/* sequence NAK for a resend still on its way: no go-back */
	REMU_CNT_STALE_SEQ_NAK,
	REMU_CNT_RDMA_SEND,
	REMU_CNT_RDMA_RECV,
	REMU_CNT_INLINE_RECV,		/* receives delivered through the CQE */
	/* UC/UD message dropped: no receive WQE (mlx5's name; RC RNR NAKs) */
	REMU_CNT_OUT_OF_BUFFER,
	/* hostile or broken input the engines drop (docs/security.md) */
	/* RC/UC packet whose IP addresses are not the QP's path */
	REMU_CNT_RCVD_BAD_PATH,
	REMU_CNT_RCVD_BAD_RESP_PSN,	/* response for a PSN never sent */
	REMU_CNT_RCVD_BAD_RESP_LEN,	/* READ response of the wrong length */
	/* duplicate READ/atomic matching none of the saved ones */
	REMU_CNT_RCVD_STALE_DUP,
	REMU_CNT_RCVD_RXQ_FULL,		/* the QP's receive list was full */
	REMU_CNT_RCVD_BAD_QKEY,		/* UD: Q_Key not the QP's */
	/* UC: opcode does not continue or start a message */
	REMU_CNT_RCVD_BAD_OP_SEQ,
	/* UC: WRITE refused (key, bounds, rights, length), its message lost */
	REMU_CNT_RCVD_UC_BAD_WRITE,
	/* response for a request answered already, or a stale NAK */
	REMU_CNT_RCVD_DUP_RESP,
	/* READ response too far beyond the first missing one to be kept */
	REMU_CNT_RCVD_RESP_AHEAD,
	/* response of the wrong kind for the request at its PSN */
	REMU_CNT_RCVD_BAD_RESP_OP,
	REMU_CNT_RCVD_NO_MEM,		/* dropped for want of memory */
	/* by-reference payload whose memory was taken back: not placed */
	REMU_CNT_RCVD_REVOKED,
	REMU_CNT_RCVD_MAD_TOO_LONG,	/* GSI: longer than a MAD */
	/* requests the responder refused: NAK and QP to ERR (mlx5's names) */
	REMU_CNT_RESP_REMOTE_ACCESS_ERR,
	REMU_CNT_RESP_INVALID_REQ,
	REMU_CNT_RESP_REMOTE_OP_ERR,
	/* on-demand paging (remu_odp.c); names of the classic ODP counters */
	REMU_CNT_ODP_PAGE_FAULTS,
	REMU_CNT_ODP_PAGE_FAULT_PAGES,
	REMU_CNT_ODP_INVALIDATIONS,
	REMU_CNT_ODP_INVALIDATION_PAGES,
	REMU_CNT_ODP_FAILED_RESOLUTIONS,
	REMU_CNT_ODP_PREFETCHES,
	REMU_CNT_ODP_FAULT_CONTENTIONS,
	REMU_CNT_ODP_MRS_NOT_FOUND,
	REMU_CNT_ODP_MRS,		/* a gauge: live ODP MRs */
	REMU_CNT_ODP_MR_PAGES,		/* a gauge: pages they span */
	/* dma-buf import (remu_dmabuf.c) */
	REMU_CNT_DMABUF_MOVES,		/* move_notify calls seen */
	REMU_CNT_DMABUF_INVALIDATIONS,	/* ... that dropped a live mapping */
	REMU_CNT_DMABUF_REMAPS,		/* re-maps on access after that */
	REMU_CNT_DMABUF_MRS,		/* a gauge: live dma-buf MRs */
	REMU_CNT_DMABUF_P2P_MRS,	/* a gauge: of those, P2P (DMA addrs) */
	REMU_CNT_DMABUF_MAP_ERRORS,	/* failed re-maps (revoked, no path) */
	/* device memory exported as a dma-buf (remu_dmabuf_export.c) */
	REMU_CNT_DMABUF_EXPORTS,	/* a gauge: live exported dma-bufs */
	REMU_CNT_DMABUF_EXPORT_MAPS,	/* a gauge: importers' live mappings */
	REMU_CNT_DMABUF_EXPORT_REVOKES,	/* exported dma-bufs revoked */
	/* indirect memory keys (remu_mkey.c) */
	REMU_CNT_UMR_CONFIGS,		/* UMRs that configured a key */
	REMU_CNT_UMR_ERRORS,		/* UMRs refused when executed */
	/* segments mapped through a key (each nesting level counts) */
	REMU_CNT_MKEY_SEGMENTS,
	REMU_CNT_MKEY_ENTRY_ERRORS,	/* accesses a key's entries refused */
	REMU_CNT_MKEYS,			/* a gauge: live indirect keys */
	/* request packets a QP's rate limit held back (remu_pace.c) */
	REMU_CNT_PACED_PKTS,
	REMU_CNT_COUNT
};

#endif /* REMU_COUNTERS_H */
