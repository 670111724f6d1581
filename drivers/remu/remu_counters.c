// SPDX-License-Identifier: GPL-2.0
/*
 * remu_counters.c - the port's hardware counters as the RDMA core shows
 * them (`rdma statistic show link DEV/1`, and
 * /sys/class/infiniband/DEV/ports/1/hw_counters/).
 *
 * Owns the one table of counter names; the counters themselves are the
 * atomic64_t array in struct remu_dev, counted with remu_count().  The
 * names the engines will count are those of rdma_rxe, so tools and tests
 * that read rxe's counters read remu's the same way.
 *
 * Locking: none; each value is read with atomic64_read().
 */
#include "remu.h"

static const struct rdma_stat_desc remu_counter_desc[REMU_CNT_COUNT] = {
	[REMU_CNT_SENT_PKTS]		= { .name = "sent_pkts" },
	[REMU_CNT_RCVD_PKTS]		= { .name = "rcvd_pkts" },
	[REMU_CNT_RCVD_ICRC_ERR]	= { .name = "rcvd_icrc_err" },
	[REMU_CNT_RCVD_TOO_SHORT]	= { .name = "rcvd_too_short" },
	[REMU_CNT_RCVD_IP_OPTIONS]	= { .name = "rcvd_ip_options" },
	[REMU_CNT_RCVD_BAD_OPCODE]	= { .name = "rcvd_bad_opcode" },
	[REMU_CNT_RCVD_BAD_VERSION]	= { .name = "rcvd_bad_version" },
	[REMU_CNT_RCVD_BAD_PKEY]	= { .name = "rcvd_bad_pkey" },
	[REMU_CNT_RCVD_BAD_LENGTH]	= { .name = "rcvd_bad_length" },
	[REMU_CNT_RCVD_NO_QP]		= { .name = "rcvd_no_qp" },
	[REMU_CNT_SEND_ERR]		= { .name = "send_err" },
	[REMU_CNT_LOOPBACK_PKTS]	= { .name = "loopback_pkts" },
	[REMU_CNT_TX_FRAG_PKTS]		= { .name = "tx_frag_pkts" },
	[REMU_CNT_TX_FRAG_COPIED]	= { .name = "tx_frag_copied" },
	[REMU_CNT_RCVD_MCAST_PKTS]	= { .name = "rcvd_mcast_pkts" },
	[REMU_CNT_RCVD_MCAST_NO_QP]	= { .name = "rcvd_mcast_no_qp" },
	[REMU_CNT_DUP_REQ]		= { .name = "duplicate_request" },
	[REMU_CNT_OUT_OF_SEQ_REQ]	= { .name = "out_of_seq_request" },
	[REMU_CNT_RCV_RNR]		= { .name = "rcvd_rnr_err" },
	[REMU_CNT_SND_RNR]		= { .name = "send_rnr_err" },
	[REMU_CNT_RCV_SEQ_ERR]		= { .name = "rcvd_seq_err" },
	[REMU_CNT_ACK_DEFERRED]		= { .name = "ack_deferred" },
	[REMU_CNT_RETRY_EXCEEDED]	= { .name = "retry_exceeded_err" },
	[REMU_CNT_RNR_RETRY_EXCEEDED]	= { .name = "retry_rnr_exceeded_err" },
	[REMU_CNT_COMP_RETRY]		= { .name = "completer_retry_err" },
	[REMU_CNT_RETRY_PROBE]		= { .name = "retry_probe" },
	[REMU_CNT_STALE_SEQ_NAK]	= { .name = "stale_seq_nak" },
	[REMU_CNT_RDMA_SEND]		= { .name = "rdma_sends" },
	[REMU_CNT_RDMA_RECV]		= { .name = "rdma_recvs" },
	[REMU_CNT_INLINE_RECV]		= { .name = "inline_recvs" },
	[REMU_CNT_OUT_OF_BUFFER]	= { .name = "out_of_buffer" },
	[REMU_CNT_RCVD_BAD_PATH]	= { .name = "rcvd_bad_path" },
	[REMU_CNT_RCVD_BAD_RESP_PSN]	= { .name = "rcvd_bad_resp_psn" },
	[REMU_CNT_RCVD_BAD_RESP_LEN]	= { .name = "rcvd_bad_resp_len" },
	[REMU_CNT_RCVD_STALE_DUP]	= { .name = "rcvd_stale_dup" },
	[REMU_CNT_RCVD_RXQ_FULL]	= { .name = "rcvd_rxq_full" },
	[REMU_CNT_RCVD_BAD_QKEY]	= { .name = "rcvd_bad_qkey" },
	[REMU_CNT_RCVD_BAD_OP_SEQ]	= { .name = "rcvd_bad_op_seq" },
	[REMU_CNT_RCVD_UC_BAD_WRITE]	= { .name = "rcvd_uc_bad_write" },
	[REMU_CNT_RCVD_DUP_RESP]	= { .name = "rcvd_dup_resp" },
	[REMU_CNT_RCVD_RESP_AHEAD]	= { .name = "rcvd_resp_ahead" },
	[REMU_CNT_RCVD_BAD_RESP_OP]	= { .name = "rcvd_bad_resp_op" },
	[REMU_CNT_RCVD_NO_MEM]		= { .name = "rcvd_no_mem" },
	[REMU_CNT_RCVD_REVOKED]		= { .name = "rcvd_revoked" },
	[REMU_CNT_RCVD_MAD_TOO_LONG]	= { .name = "rcvd_mad_too_long" },
	[REMU_CNT_RESP_REMOTE_ACCESS_ERR] = {
		.name = "resp_remote_access_errors" },
	[REMU_CNT_RESP_INVALID_REQ]	= { .name = "resp_invalid_request" },
	[REMU_CNT_RESP_REMOTE_OP_ERR]	= { .name = "resp_remote_op_errors" },
	[REMU_CNT_ODP_PAGE_FAULTS]	= { .name = "num_page_faults" },
	[REMU_CNT_ODP_PAGE_FAULT_PAGES]	= { .name = "num_page_fault_pages" },
	[REMU_CNT_ODP_INVALIDATIONS]	= { .name = "num_invalidations" },
	[REMU_CNT_ODP_INVALIDATION_PAGES] = { .name = "num_invalidation_pages" },
	[REMU_CNT_ODP_FAILED_RESOLUTIONS] = { .name = "num_failed_resolutions" },
	[REMU_CNT_ODP_PREFETCHES]	= { .name = "num_prefetches_handled" },
	[REMU_CNT_ODP_FAULT_CONTENTIONS] = {
		.name = "invalidations_faults_contentions" },
	[REMU_CNT_ODP_MRS_NOT_FOUND]	= { .name = "num_mrs_not_found" },
	[REMU_CNT_ODP_MRS]		= { .name = "num_odp_mrs" },
	[REMU_CNT_ODP_MR_PAGES]		= { .name = "num_odp_mr_pages" },
	[REMU_CNT_DMABUF_MOVES]		= { .name = "dmabuf_moves" },
	[REMU_CNT_DMABUF_INVALIDATIONS]	= { .name = "dmabuf_invalidations" },
	[REMU_CNT_DMABUF_REMAPS]	= { .name = "dmabuf_remaps" },
	[REMU_CNT_DMABUF_MRS]		= { .name = "dmabuf_mrs" },
	[REMU_CNT_DMABUF_P2P_MRS]	= { .name = "dmabuf_p2p_mrs" },
	[REMU_CNT_DMABUF_MAP_ERRORS]	= { .name = "dmabuf_map_errors" },
	[REMU_CNT_DMABUF_EXPORTS]	= { .name = "dmabuf_exports" },
	[REMU_CNT_DMABUF_EXPORT_MAPS]	= { .name = "dmabuf_export_maps" },
	[REMU_CNT_DMABUF_EXPORT_REVOKES] = { .name = "dmabuf_export_revokes" },
	[REMU_CNT_UMR_CONFIGS]		= { .name = "umr_configs" },
	[REMU_CNT_UMR_ERRORS]		= { .name = "umr_errors" },
	[REMU_CNT_MKEY_SEGMENTS]	= { .name = "mkey_segments" },
	[REMU_CNT_MKEY_ENTRY_ERRORS]	= { .name = "mkey_entry_errors" },
	[REMU_CNT_MKEYS]		= { .name = "mkeys" },
	[REMU_CNT_PACED_PKTS]		= { .name = "paced_pkts" },
};

struct rdma_hw_stats *remu_alloc_hw_port_stats(struct ib_device *ibdev,
					       u32 port)
{
	return rdma_alloc_hw_stats_struct(remu_counter_desc, REMU_CNT_COUNT,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

int remu_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
		      u32 port, int index)
{
	struct remu_dev *rdev = to_remu_dev(ibdev);
	int i;

	if (port != 1 || !stats)
		return -EINVAL;
	for (i = 0; i < REMU_CNT_COUNT; i++)
		stats->value[i] = atomic64_read(&rdev->counters[i]);
	return REMU_CNT_COUNT;
}
