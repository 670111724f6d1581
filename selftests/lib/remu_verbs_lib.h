/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_verbs_lib.h - verbs helpers shared by the remu selftests and the
 * benchmarks in tools/: opening a device with its port's GID and MTU,
 * creating a QP, the INIT -> RTR -> RTS sequences of RC, UC and UD QPs
 * with the attributes each program chooses, one RC end (struct remu_end),
 * closing objects, waiting for one completion with a timeout, posting one
 * WR, comparing buffers, reading sysfs numbers and a port's hw_counters,
 * and reading asynchronous events (the next one; the device's fatal event).
 * The extended verbs: a CQ and a QP made with ibv_create_cq_ex() /
 * ibv_create_qp_ex(), a send WR list posted through ibv_wr_*, and
 * ibv_poll_cq()'s answer read through ibv_start_poll() (so that a test of
 * the old API runs through the new one unchanged).
 *
 * Header-only (static inline) so that every program stays one .c file;
 * remu_lib.h includes it.  No kselftest ASSERT/EXPECT in here: the tools
 * do not use the harness.  The helpers return 0 (or a value) on success
 * and -1, or the failing verb's errno, on failure; the caller asserts.
 */
#ifndef REMU_VERBS_LIB_H
#define REMU_VERBS_LIB_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "remu_lib.h"	/* remu_open() */

/* how long the core caches hw counters (10 ms), with a margin */
#define REMU_HW_STATS_SETTLE_US	20000

/*
 * The attributes of an RC or UC connection that the programs differ in;
 * the rest is the same everywhere: port 1, P_Key index 0, a global AV with
 * hop limit 64.  @psn is both the RQ and the SQ PSN, @rd_atomic both
 * max_dest_rd_atomic and max_rd_atomic.  With @reset the QP goes through
 * RESET first, so that a used (or errored) QP can be connected again.
 * UC uses only @access, @psn and @reset.
 */
struct remu_conn_attr {
	unsigned int access;	/* qp_access_flags at INIT */
	uint32_t psn;
	uint8_t rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t timeout;	/* local ACK timeout, 4.096 us * 2^timeout */
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	bool reset;
	bool rtr_only;		/* stop in RTR (RC) */
};

/* all remote rights */
#define REMU_ACCESS_REMOTE_ALL	(IBV_ACCESS_REMOTE_WRITE | \
				 IBV_ACCESS_REMOTE_READ | \
				 IBV_ACCESS_REMOTE_ATOMIC)

/*
 * The RC attributes most programs use, with SQ/RQ PSN @psn_: all remote
 * rights, 4 RDMA READ/atomic in flight, RNR timer 1 (0.01 ms), ACK
 * timeout 14 (67 ms), 7 retries and RNR retries.  Change a field after
 * initializing with it where a program differs.
 */
#define REMU_RC_ATTR(psn_)	((struct remu_conn_attr){		\
	.access = REMU_ACCESS_REMOTE_ALL, .psn = (psn_), .rd_atomic = 4,	\
	.min_rnr_timer = 1, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 })

/*
 * The far end of a connection: its QP number and GID, the path's MTU and
 * the traffic class of the AV towards it.
 */
struct remu_conn_dest {
	uint32_t qpn;
	union ibv_gid gid;
	enum ibv_mtu mtu;
	uint8_t traffic_class;
};

/* The smaller of two MTUs (the path MTU of two ports). */
static inline enum ibv_mtu remu_min_mtu(enum ibv_mtu a, enum ibv_mtu b)
{
	return a < b ? a : b;
}

/* Port 1's active MTU and the GID at @gid_index of @ctx: 0 or -1. */
static inline int remu_port_gid(struct ibv_context *ctx, int gid_index,
				union ibv_gid *gid, enum ibv_mtu *mtu)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, gid_index, gid))
		return -1;
	*mtu = pa.active_mtu;
	return 0;
}

/*
 * The index of port 1's first RoCEv2 GID of the wanted family (IPv4-mapped
 * with @want_v4, else IPv6 but not link-local), stored into @gid unless
 * NULL; or -1.
 */
static inline int remu_roce_gid(struct ibv_context *ctx, int want_v4,
				union ibv_gid *gid)
{
	static const uint8_t v4pfx[12] = { [10] = 0xff, [11] = 0xff };
	struct ibv_gid_entry e;
	int i, v4;

	for (i = 0; i < 128; i++) {
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0) ||
		    e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		v4 = !memcmp(e.gid.raw, v4pfx, sizeof(v4pfx));
		if (v4 != want_v4 || (!v4 && e.gid.raw[0] == 0xfe))
			continue;
		if (gid)
			*gid = e.gid;
		return i;
	}
	return -1;
}

/*
 * The index of port 1's IPv4-mapped RoCE v2 GID (stored into @gid), or
 * -1.  (remu has only RoCE v2 GIDs; rxe lists a RoCE v1 one first.)
 */
static inline int remu_ipv4_gid(struct ibv_context *ctx, union ibv_gid *gid)
{
	return remu_roce_gid(ctx, 1, gid);
}

/*
 * Open @dev and query port 1's MTU and the GID at @gid_index: the context,
 * or NULL (nothing left open).
 */
static inline struct ibv_context *remu_open_port(const char *dev,
						 int gid_index,
						 union ibv_gid *gid,
						 enum ibv_mtu *mtu)
{
	struct ibv_context *ctx = remu_open(dev);

	if (ctx && remu_port_gid(ctx, gid_index, gid, mtu)) {
		ibv_close_device(ctx);
		return NULL;
	}
	return ctx;
}

/*
 * Destroy those of @qp, @srq, @mr, @cq, @pd and @ctx that are not NULL, in
 * that order (each before what it depends on): 0, or -1 when any of the
 * verbs failed.
 */
static inline int remu_close_objs(struct ibv_qp *qp, struct ibv_srq *srq,
				  struct ibv_mr *mr, struct ibv_cq *cq,
				  struct ibv_pd *pd, struct ibv_context *ctx)
{
	int err = 0;

	if (qp)
		err |= ibv_destroy_qp(qp);
	if (srq)
		err |= ibv_destroy_srq(srq);
	if (mr)
		err |= ibv_dereg_mr(mr);
	if (cq)
		err |= ibv_destroy_cq(cq);
	if (pd)
		err |= ibv_dealloc_pd(pd);
	if (ctx)
		err |= ibv_close_device(ctx);
	return err ? -1 : 0;
}

/*
 * Which verbs remu_create_qp(), remu_create_cq(), remu_post_list() and
 * remu_poll_cq() use, and through them remu_post_send(), remu_poll_one(),
 * remu_run_wr() and remu_rdma1(): false (the default), ibv_create_qp(),
 * ibv_create_cq(), ibv_post_send() and ibv_poll_cq(); true, the extended
 * verbs (ibv_create_qp_ex() with every send op, ibv_create_cq_ex() with
 * REMU_WC_STANDARD, ibv_wr_*, ibv_start_poll()).  A program sets it
 * before it makes its QPs and CQs (remu_datapath_test's *_ex variants).
 */
static bool remu_use_ex;

/* every send op of each QP type (what ibv_post_send() can post there) */
#define REMU_SEND_OPS_UD	(IBV_QP_EX_WITH_SEND | \
				 IBV_QP_EX_WITH_SEND_WITH_IMM)
#define REMU_SEND_OPS_UC	(REMU_SEND_OPS_UD | \
				 IBV_QP_EX_WITH_RDMA_WRITE | \
				 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
				 IBV_QP_EX_WITH_LOCAL_INV | \
				 IBV_QP_EX_WITH_BIND_MW)
#define REMU_SEND_OPS_RC	(REMU_SEND_OPS_UC | \
				 IBV_QP_EX_WITH_SEND_WITH_INV | \
				 IBV_QP_EX_WITH_RDMA_READ | \
				 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
				 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static inline uint64_t remu_send_ops(enum ibv_qp_type type)
{
	return type == IBV_QPT_RC ? REMU_SEND_OPS_RC :
	       type == IBV_QPT_UC ? REMU_SEND_OPS_UC : REMU_SEND_OPS_UD;
}

/*
 * A QP of @type on @pd made by ibv_create_qp_ex() with every send op of
 * its type (an ibv_qp_ex: ibv_qp_to_qp_ex() works), @cq for both queues.
 */
static inline struct ibv_qp *remu_create_qp_ex(struct ibv_pd *pd,
					       struct ibv_cq *cq,
					       enum ibv_qp_type type,
					       const struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = type, .cap = *cap,
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd, .send_ops_flags = remu_send_ops(type),
	};

	return ibv_create_qp_ex(pd->context, &ia);
}

/* the standard fields of ibv_poll_cq()'s struct ibv_wc */
#define REMU_WC_STANDARD	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | \
				 IBV_WC_EX_WITH_QP_NUM | \
				 IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | \
				 IBV_WC_EX_WITH_SL | \
				 IBV_WC_EX_WITH_DLID_PATH_BITS)

/*
 * A CQ of @cqe entries made by ibv_create_cq_ex() with @wc_flags, as an
 * ibv_cq (ibv_poll_cq() works on it too); NULL with errno set on failure.
 */
static inline struct ibv_cq *remu_create_cq_ex(struct ibv_context *ctx,
					       int cqe, uint64_t wc_flags)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = cqe, .wc_flags = wc_flags };
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);

	return cqx ? ibv_cq_ex_to_cq(cqx) : NULL;
}

/* @cq, made by ibv_create_cq_ex(), as the ibv_cq_ex it is */
static inline struct ibv_cq_ex *remu_cq_ex(struct ibv_cq *cq)
{
	return (struct ibv_cq_ex *)cq;
}

/*
 * The list @wr posted on @qp (made with send ops) through ibv_wr_*: one
 * ibv_wr_start(), the builder and setters of each WR, one
 * ibv_wr_complete().  0, or ibv_wr_complete()'s errno with *@bad_wr at
 * @wr (the API posts all or nothing).  IBV_SEND_INLINE sends the SGEs'
 * bytes with ibv_wr_set_inline_data_list().
 */
static inline int remu_wr_post(struct ibv_qp *qp, struct ibv_send_wr *wr,
			       struct ibv_send_wr **bad_wr)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);
	struct ibv_data_buf bufs[32];
	struct ibv_send_wr *w;
	int i, ret;

	if (!qx)
		return EINVAL;
	ibv_wr_start(qx);
	for (w = wr; w; w = w->next) {
		qx->wr_id = w->wr_id;
		qx->wr_flags = w->send_flags;
		switch (w->opcode) {
		case IBV_WR_SEND:
			ibv_wr_send(qx);
			break;
		case IBV_WR_SEND_WITH_IMM:
			ibv_wr_send_imm(qx, w->imm_data);
			break;
		case IBV_WR_SEND_WITH_INV:
			ibv_wr_send_inv(qx, w->invalidate_rkey);
			break;
		case IBV_WR_RDMA_WRITE:
			ibv_wr_rdma_write(qx, w->wr.rdma.rkey,
					  w->wr.rdma.remote_addr);
			break;
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			ibv_wr_rdma_write_imm(qx, w->wr.rdma.rkey,
					      w->wr.rdma.remote_addr,
					      w->imm_data);
			break;
		case IBV_WR_RDMA_READ:
			ibv_wr_rdma_read(qx, w->wr.rdma.rkey,
					 w->wr.rdma.remote_addr);
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
			ibv_wr_atomic_cmp_swp(qx, w->wr.atomic.rkey,
					      w->wr.atomic.remote_addr,
					      w->wr.atomic.compare_add,
					      w->wr.atomic.swap);
			break;
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			ibv_wr_atomic_fetch_add(qx, w->wr.atomic.rkey,
						w->wr.atomic.remote_addr,
						w->wr.atomic.compare_add);
			break;
		case IBV_WR_LOCAL_INV:
			ibv_wr_local_inv(qx, w->invalidate_rkey);
			continue;
		case IBV_WR_BIND_MW:
			ibv_wr_bind_mw(qx, w->bind_mw.mw, w->bind_mw.rkey,
				       &w->bind_mw.bind_info);
			continue;
		default:
			ibv_wr_abort(qx);
			*bad_wr = wr;
			return EINVAL;
		}
		if (qp->qp_type == IBV_QPT_UD)
			ibv_wr_set_ud_addr(qx, w->wr.ud.ah, w->wr.ud.remote_qpn,
					   w->wr.ud.remote_qkey);
		if (!(w->send_flags & IBV_SEND_INLINE)) {
			ibv_wr_set_sge_list(qx, w->num_sge, w->sg_list);
			continue;
		}
		if (w->num_sge > 32) {
			ibv_wr_abort(qx);
			*bad_wr = wr;
			return EINVAL;
		}
		for (i = 0; i < w->num_sge; i++) {
			bufs[i].addr = (void *)(uintptr_t)w->sg_list[i].addr;
			bufs[i].length = w->sg_list[i].length;
		}
		ibv_wr_set_inline_data_list(qx, w->num_sge, bufs);
	}
	ret = ibv_wr_complete(qx);
	if (ret)
		*bad_wr = wr;
	return ret;
}

/*
 * ibv_poll_cq() through the extended API: up to @ne completions of @cq
 * (made by ibv_create_cq_ex()) into @wc, each field read with its
 * ibv_wc_read_*() when the CQ has it (REMU_WC_STANDARD: all of them but
 * pkey_index, which the extended API does not carry: 0).  The number
 * read, or -(the errno) of ibv_start_poll()/ibv_next_poll().
 */
static inline int remu_poll_cq_ex(struct ibv_cq *cq, int ne, struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr pa = {};
	struct ibv_cq_ex *cx = remu_cq_ex(cq);
	int n = 0, ret;

	if (ne <= 0)
		return 0;
	ret = ibv_start_poll(cx, &pa);
	while (!ret) {
		struct ibv_wc *w = &wc[n++];

		memset(w, 0, sizeof(*w));
		w->wr_id = cx->wr_id;
		w->status = cx->status;
		w->opcode = ibv_wc_read_opcode(cx);
		w->vendor_err = ibv_wc_read_vendor_err(cx);
		w->wc_flags = ibv_wc_read_wc_flags(cx);
		if (cx->read_byte_len)
			w->byte_len = ibv_wc_read_byte_len(cx);
		if (cx->read_imm_data)
			w->imm_data = ibv_wc_read_imm_data(cx);
		if (cx->read_qp_num)
			w->qp_num = ibv_wc_read_qp_num(cx);
		if (cx->read_src_qp)
			w->src_qp = ibv_wc_read_src_qp(cx);
		if (cx->read_slid)
			w->slid = ibv_wc_read_slid(cx);
		if (cx->read_sl)
			w->sl = ibv_wc_read_sl(cx);
		if (cx->read_dlid_path_bits)
			w->dlid_path_bits = ibv_wc_read_dlid_path_bits(cx);
		if (n == ne)
			break;
		ret = ibv_next_poll(cx);
	}
	if (ret == ENOENT && !n)	/* start_poll found nothing */
		return 0;
	if (ret && ret != ENOENT && !n)
		return -ret;		/* start_poll failed: no end_poll */
	ibv_end_poll(cx);
	return ret && ret != ENOENT ? -ret : n;
}

/*
 * A QP of @type on @pd with @cq for both queues and the capacities @cap
 * (with every send op when remu_use_ex).
 */
static inline struct ibv_qp *remu_create_qp(struct ibv_pd *pd,
					    struct ibv_cq *cq,
					    enum ibv_qp_type type,
					    const struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = type, .cap = *cap,
	};

	if (remu_use_ex)
		return remu_create_qp_ex(pd, cq, type, cap);
	return ibv_create_qp(pd, &ia);
}

/* A CQ of @cqe entries, no channel (REMU_WC_STANDARD when remu_use_ex). */
static inline struct ibv_cq *remu_create_cq(struct ibv_context *ctx, int cqe)
{
	if (remu_use_ex)
		return remu_create_cq_ex(ctx, cqe, REMU_WC_STANDARD);
	return ibv_create_cq(ctx, cqe, NULL, NULL, 0);
}

/* Post the list @wr on @qp: 0 or the errno of the post, as ibv_post_send. */
static inline int remu_post_list(struct ibv_qp *qp, struct ibv_send_wr *wr,
				 struct ibv_send_wr **bad_wr)
{
	if (remu_use_ex)
		return remu_wr_post(qp, wr, bad_wr);
	return ibv_post_send(qp, wr, bad_wr);
}

/* Poll up to @ne completions of @cq into @wc, as ibv_poll_cq. */
static inline int remu_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc)
{
	if (remu_use_ex)
		return remu_poll_cq_ex(cq, ne, wc);
	return ibv_poll_cq(cq, ne, wc);
}

/* A global address vector on port 1 towards @dgid, hop limit 64. */
static inline void remu_set_av(struct ibv_ah_attr *ah,
			       const union ibv_gid *dgid, int sgid_index,
			       uint8_t traffic_class)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->grh.dgid = *dgid;
	ah->grh.sgid_index = sgid_index;
	ah->grh.hop_limit = 64;
	ah->grh.traffic_class = traffic_class;
	ah->port_num = 1;
}

/*
 * [RESET ->] INIT -> RTR -> RTS of the RC or UC QP @qp towards @dest, with
 * the source GID at @sgid_index and the attributes @ra: 0, or the failing
 * ibv_modify_qp's error.
 */
static inline int remu_qp_connect(struct ibv_qp *qp,
				  const struct remu_conn_attr *ra,
				  int sgid_index,
				  const struct remu_conn_dest *dest)
{
	bool rc = qp->qp_type == IBV_QPT_RC;
	struct ibv_qp_attr a = {};
	int err;

	if (ra->reset) {
		a.qp_state = IBV_QPS_RESET;
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE);
		if (err)
			return err;
	}
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = ra->access;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = dest->mtu;
	a.dest_qp_num = dest->qpn;
	a.rq_psn = ra->psn;
	remu_set_av(&a.ah_attr, &dest->gid, sgid_index, dest->traffic_class);
	if (!rc) {
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
				    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN);
		if (err)
			return err;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = ra->psn;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	a.max_dest_rd_atomic = ra->rd_atomic;
	a.min_rnr_timer = ra->min_rnr_timer;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
			    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER);
	if (err || ra->rtr_only)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = ra->psn;
	a.timeout = ra->timeout;
	a.retry_cnt = ra->retry_cnt;
	a.rnr_retry = ra->rnr_retry;
	a.max_rd_atomic = ra->rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* INIT -> RTR -> RTS of the UD QP @qp with @qkey and SQ PSN @psn. */
static inline int remu_ud_ready(struct ibv_qp *qp, uint32_t qkey,
				uint32_t psn)
{
	struct ibv_qp_attr a = {};
	int err;

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = qkey;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_QKEY);
	if (err)
		return err;
	a.qp_state = IBV_QPS_RTR;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (err)
		return err;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* The state @qp is in, or -1 when it cannot be queried. */
static inline int remu_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;

	if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &ia))
		return -1;
	return qa.qp_state;
}

/*
 * struct remu_end - one end of an RC connection with nothing else: a
 * device, a PD, one CQ for both queues and one QP, with port 1's GID and
 * MTU for the peer.
 */
struct remu_end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

/*
 * Open @e on @dev (GID at @gid_index) with a CQ of @cqe entries and an RC
 * QP of capacities @cap: 0, or -1 (remu_end_close() frees what was made).
 */
static inline int remu_end_open(struct remu_end *e, const char *dev,
				int gid_index, int cqe,
				const struct ibv_qp_cap *cap)
{
	e->ctx = remu_open_port(dev, gid_index, &e->gid, &e->mtu);
	e->pd = e->ctx ? ibv_alloc_pd(e->ctx) : NULL;
	e->cq = e->pd ? remu_create_cq(e->ctx, cqe) : NULL;
	e->qp = e->cq ? remu_create_qp(e->pd, e->cq, IBV_QPT_RC, cap) : NULL;
	return e->qp ? 0 : -1;
}

/* Connect @e's QP to @peer's with @ra: 0 or ibv_modify_qp's error. */
static inline int remu_end_connect(struct remu_end *e, struct remu_end *peer,
				   const struct remu_conn_attr *ra,
				   int gid_index)
{
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(e->mtu, peer->mtu) };

	return remu_qp_connect(e->qp, ra, gid_index, &d);
}

/* Free what remu_end_open() made of @e. */
static inline void remu_end_close(struct remu_end *e)
{
	remu_close_objs(e->qp, NULL, NULL, e->cq, e->pd, e->ctx);
	memset(e, 0, sizeof(*e));
}

static inline int remu_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of the @n values of @v (sorted in place), for benchmarks. */
static inline double remu_median(double *v, int n)
{
	qsort(v, n, sizeof(*v), remu_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* CLOCK_MONOTONIC in seconds. */
static inline double remu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Busy-poll @cq for one completion for up to @secs seconds: its status
 * (IBV_WC_SUCCESS is 0), or -1 on a poll error or timeout.
 */
static inline int remu_poll_one(struct ibv_cq *cq, struct ibv_wc *wc,
				double secs)
{
	double end = remu_now() + secs;
	int n;

	do {
		n = remu_poll_cq(cq, 1, wc);
		if (n)
			return n < 0 ? -1 : (int)wc->status;
	} while (remu_now() < end);
	return -1;
}

/* Post the list @wr on @qp: 0 or the errno of the post. */
static inline int remu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	return remu_post_list(qp, wr, &bad);
}

/* Post one receive of @nsge SGEs, id @wr_id, on @qp: 0 or an errno. */
static inline int remu_post_recv(struct ibv_qp *qp, uint64_t wr_id,
				 struct ibv_sge *sge, int nsge)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sge,
				  .num_sge = nsge }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/*
 * @wr posted on @qp with send_flags IBV_SEND_SIGNALED (only) and its
 * completion awaited on @cq for up to @secs: the completion's status, or
 * -1 when the post or the poll failed.
 */
static inline int remu_run_wr(struct ibv_qp *qp, struct ibv_cq *cq,
			      struct ibv_send_wr *wr, double secs)
{
	struct ibv_wc wc;

	wr->send_flags = IBV_SEND_SIGNALED;
	if (remu_post_send(qp, wr))
		return -1;
	return remu_poll_one(cq, &wc, secs);
}

/*
 * One signalled RDMA WRITE or READ (@op) of @len bytes between @laddr
 * (@lkey) and @raddr (@rkey), waited for: its status, or -1.  The WR's
 * id is @op.
 */
static inline int remu_rdma1(struct ibv_qp *qp, struct ibv_cq *cq,
			     enum ibv_wr_opcode op, uint64_t laddr,
			     uint32_t lkey, uint32_t len, uint64_t raddr,
			     uint32_t rkey, double secs)
{
	struct ibv_sge sge = { laddr, len, lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1,
				  .opcode = op };

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return remu_run_wr(qp, cq, &wr, secs);
}

/*
 * A fresh RC connection between @dev_a and @dev_b (their IPv4 RoCE v2
 * GIDs) moves @len bytes byte for byte: an RDMA WRITE from @dev_a into
 * @dev_b's MR and an RDMA READ of them back.  0, or -1.  For the tests
 * that check a device still works after what they did to it.
 */
static inline int remu_pair_check(const char *dev_a, const char *dev_b,
				  uint32_t len)
{
	static const struct ibv_qp_cap cap = { .max_send_wr = 4,
		.max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 };
	struct remu_conn_attr ra = REMU_RC_ATTR(0x321);
	uint8_t *ba = aligned_alloc(4096, 2 * (size_t)len + 4096);
	uint8_t *bb = aligned_alloc(4096, (size_t)len + 4096);
	struct remu_end a = {}, b = {};
	struct ibv_mr *ma = NULL, *mb = NULL;
	int gi, st, ret = -1;
	uint32_t i;

	if (!ba || !bb || remu_end_open(&a, dev_a, 0, 16, &cap) ||
	    remu_end_open(&b, dev_b, 0, 16, &cap))
		goto out;
	gi = remu_ipv4_gid(a.ctx, &a.gid);
	if (gi < 0 || remu_ipv4_gid(b.ctx, &b.gid) != gi ||
	    remu_end_connect(&a, &b, &ra, gi) ||
	    remu_end_connect(&b, &a, &ra, gi))
		goto out;
	ma = ibv_reg_mr(a.pd, ba, 2 * (size_t)len, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(b.pd, bb, len, IBV_ACCESS_LOCAL_WRITE |
			REMU_ACCESS_REMOTE_ALL);
	if (!ma || !mb)
		goto out;
	for (i = 0; i < len; i++)
		ba[i] = (uint8_t)(i * 7 + 3 + (i >> 9));
	memset(ba + len, 0, len);
	/* what failed goes to stderr: status, -1 for no completion */
	st = remu_rdma1(a.qp, a.cq, IBV_WR_RDMA_WRITE, (uintptr_t)ba, ma->lkey,
			len, (uintptr_t)bb, mb->rkey, 20);
	if (st) {
		fprintf(stderr, "# pair_check %s -> %s: WRITE of %u: %d (%s)\n",
			dev_a, dev_b, len, st, st < 0 ? "no completion in 20 s" :
			ibv_wc_status_str(st));
		goto out;
	}
	st = remu_rdma1(a.qp, a.cq, IBV_WR_RDMA_READ, (uintptr_t)ba + len,
			ma->lkey, len, (uintptr_t)bb, mb->rkey, 20);
	if (st) {
		fprintf(stderr, "# pair_check %s -> %s: READ of %u: %d (%s)\n",
			dev_a, dev_b, len, st, st < 0 ? "no completion in 20 s" :
			ibv_wc_status_str(st));
		goto out;
	}
	ret = memcmp(ba, bb, len) || memcmp(ba, ba + len, len) ? -1 : 0;
	if (ret)
		fprintf(stderr, "# pair_check %s -> %s: data differs\n",
			dev_a, dev_b);
out:
	if (ma)
		ibv_dereg_mr(ma);
	if (mb)
		ibv_dereg_mr(mb);
	remu_end_close(&a);
	remu_end_close(&b);
	free(ba);
	free(bb);
	return ret;
}

/* Byte for byte: the first offset where @a and @b differ, or -1. */
static inline long remu_cmp(const uint8_t *a, const uint8_t *b, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (a[i] != b[i])
			return i;
	return -1;
}

/*
 * The reason device @dev gives for not offering @feature on this kernel
 * (a "feature: reason" line of /sys/class/infiniband/DEV/absent, written
 * into @why), or NULL when the device offers it.  docs/portability.md.
 */
static inline const char *remu_absent(const char *dev, const char *feature,
				      char *why, size_t len)
{
	char path[256], line[256];
	size_t n = strlen(feature);
	const char *found = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/absent", dev);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, feature, n) || line[n] != ':')
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(why, len, "%s", line);
		found = why;
	}
	fclose(f);
	return found;
}

/* The number at the start of the file @path (sysfs, procfs), or -1. */
static inline long long remu_read_num(const char *path)
{
	long long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * Port 1's hw counter @name of the device @dev from sysfs, or -1.  With
 * @settle, first wait out the core's hw_stats cache so that the value is
 * not older than the last event.
 */
static inline long long remu_hw_counter(const char *dev, const char *name,
					bool settle)
{
	char path[256];

	if (settle)
		usleep(REMU_HW_STATS_SETTLE_US);
	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev, name);
	return remu_read_num(path);
}

/*
 * The next asynchronous event of @ctx, if one comes within @ms
 * milliseconds, into @ev, already acknowledged (its type and element
 * pointer stay readable): 0, or -1 if none came.
 */
static inline int remu_next_async(struct ibv_context *ctx, int ms,
				  struct ibv_async_event *ev)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };

	if (poll(&pfd, 1, ms) != 1 || ibv_get_async_event(ctx, ev))
		return -1;
	ibv_ack_async_event(ev);
	return 0;
}

/*
 * Wait up to about @secs seconds for IBV_EVENT_DEVICE_FATAL on @ctx's
 * async queue, acking every event read: 0 once it came, -1 otherwise.
 */
static inline int remu_wait_fatal(struct ibv_context *ctx, int secs)
{
	struct ibv_async_event ev;
	int i;

	for (i = 0; i < secs; i++) {
		if (remu_next_async(ctx, 1000, &ev))
			continue;
		if (ev.event_type == IBV_EVENT_DEVICE_FATAL)
			return 0;
	}
	return -1;
}

#endif /* REMU_VERBS_LIB_H */
