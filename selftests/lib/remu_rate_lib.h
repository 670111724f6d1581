/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_rate_lib.h - a stream of messages under a per-QP rate limit, shared
 * by selftests/remu_rate_test and tools/remu_rate_bench
 * (docs/rate-limits.md): one side (struct remu_rside: device, PD, a CQ
 * with completion timestamps, a QP, one MR), a rate limit set with
 * ibv_modify_qp_rate_limit(), a stream of RC/UC RDMA WRITEs or UD SENDs
 * from one side to the other with REMU_RATE_DEPTH in flight
 * (struct remu_stream), the rate it achieved from the completion
 * timestamps, in bytes of wire packets as remu's pacer counts them
 * (remu_wire_bytes()), and the data checked byte for byte.
 *
 * Header-only, like remu_verbs_lib.h; no kselftest macros.  The helpers
 * return 0 (or a value) on success, -1 or an errno on failure.
 */
#ifndef REMU_RATE_LIB_H
#define REMU_RATE_LIB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "remu_lib.h"

#define REMU_RATE_GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define REMU_RATE_QKEY		0x11223344
#define REMU_RATE_GRH		40
#define REMU_RATE_RC_SLICES	64	/* RC/UC: message slots per buffer */
#define REMU_RATE_RC_MSG	65536	/* RC/UC: an RDMA WRITE of 64 KiB */
#define REMU_RATE_UD_MSG	4096	/* UD: a SEND of one MTU */
#define REMU_RATE_DEPTH		16	/* WRs in flight */
#define REMU_RATE_RQ_DEPTH	1024	/* UD: receives posted, and slots */
#define REMU_RATE_WC_TS		IBV_WC_EX_WITH_COMPLETION_TIMESTAMP

/* the fixed part of every packet on the wire: Ethernet, IPv4, UDP, BTH, ICRC */
#define REMU_RATE_WIRE_FIXED	(14 + 20 + 8 + 12 + 4)
#define REMU_RATE_RETH		16
#define REMU_RATE_DETH		8

/* ---- one side: device, PD, a CQ with timestamps, a QP, one MR ---- */

struct remu_rside {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;		/* ibv_create_cq_ex(REMU_RATE_WC_TS) */
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;		/* UD: towards the peer */
	uint8_t *buf;
	size_t len;
	uint32_t slices;	/* message slots in @buf */
	uint32_t msg;		/* bytes per message */
	union ibv_gid gid;
	enum ibv_mtu mtu;
	const char *dev;
};

/*
 * Open @s on @dev: a QP of @type for messages of @msg bytes, its buffer of
 * message slots registered for local and remote writes.  0, or -1
 * (remu_rside_close() frees what was made).
 */
static inline int remu_rside_open(struct remu_rside *s, const char *dev,
				  enum ibv_qp_type type, size_t msg)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = type,
		.cap = { .max_send_wr = 64, .max_recv_wr = REMU_RATE_RQ_DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	memset(s, 0, sizeof(*s));
	s->dev = dev;
	s->msg = msg;
	/* UD: one slot per receive posted, never two receives in one */
	s->slices = type == IBV_QPT_UD ? REMU_RATE_RQ_DEPTH : REMU_RATE_RC_SLICES;
	s->len = (size_t)s->slices * (msg + REMU_RATE_GRH);
	s->ctx = remu_open_port(dev, REMU_RATE_GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? remu_create_cq_ex(s->ctx, 4096, REMU_RATE_WC_TS |
					  REMU_WC_STANDARD) : NULL;
	s->buf = aligned_alloc(4096, s->len);
	if (!s->cq || !s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, s->len, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	s->qp = s->mr ? ibv_create_qp(s->pd, &ia) : NULL;
	return s->qp ? 0 : -1;
}

/* Free what remu_rside_open() and remu_rside_connect() made of @s. */
static inline void remu_rside_close(struct remu_rside *s)
{
	if (s->ah)
		ibv_destroy_ah(s->ah);
	remu_close_objs(s->qp, NULL, s->mr, s->cq, s->pd, s->ctx);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

/*
 * @s ready to talk to @peer (through RESET first with @reset): RC/UC
 * connected, UD in RTS with an AH towards @peer.  0, or -1 / an errno.
 */
static inline int remu_rside_connect(struct remu_rside *s,
				     struct remu_rside *peer, bool reset)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x123);
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };
	struct ibv_ah_attr aa;

	ra.reset = reset;
	ra.access = IBV_ACCESS_REMOTE_WRITE;
	if (s->qp->qp_type != IBV_QPT_UD)
		return remu_qp_connect(s->qp, &ra, REMU_RATE_GID_INDEX, &d);
	if (reset) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

		if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE))
			return -1;
	}
	if (remu_ud_ready(s->qp, REMU_RATE_QKEY, 0x42))
		return -1;
	if (!s->ah) {
		remu_set_av(&aa, &peer->gid, REMU_RATE_GID_INDEX, 0);
		s->ah = ibv_create_ah(s->pd, &aa);
	}
	return s->ah ? 0 : -1;
}

/* ibv_modify_qp_rate_limit(): 0 or its errno */
static inline int remu_set_rate(struct ibv_qp *qp, uint32_t kbps,
				uint32_t burst, uint16_t typical)
{
	struct ibv_qp_rate_limit_attr a = { .rate_limit = kbps,
					    .max_burst_sz = burst,
					    .typical_pkt_sz = typical };

	return ibv_modify_qp_rate_limit(qp, &a);
}

/*
 * The bytes a message of @len takes on the wire as remu's pacer counts
 * them (docs/rate-limits.md), at path MTU @mtu, IPv4: every packet's
 * Ethernet, IPv4, UDP headers, BTH and ICRC, its payload and pad, and the
 * RETH of a WRITE's first packet or the DETH of a UD SEND.
 */
static inline uint64_t remu_wire_bytes(enum ibv_qp_type type, uint32_t len,
				uint32_t mtu)
{
	uint32_t n = len ? (len + mtu - 1) / mtu : 1;
	uint64_t b = (uint64_t)n * REMU_RATE_WIRE_FIXED + len + (-len & 3);

	return b + (type == IBV_QPT_UD ? REMU_RATE_DETH : REMU_RATE_RETH);
}

/* ---- a stream of messages, a to b, with completion timestamps ---- */

struct remu_stream {
	struct remu_rside *a, *b;
	enum ibv_qp_type type;
	uint32_t msg;		/* bytes per message */
	uint64_t *ts;		/* completion timestamp (ns) of message i */
	uint32_t rcvd;		/* UD: receives completed at b */
	uint32_t bad;		/* UD: receives whose bytes differ */
	uint32_t posted_rq;	/* UD: receives posted at b so far */
	uint32_t errors;	/* completions in error */
};

static inline uint8_t *remu_rslice(struct remu_rside *s, uint32_t i)
{
	return s->buf + (size_t)(i % s->slices) * (s->msg + REMU_RATE_GRH);
}

/* the bytes message @i carries: its number in every byte pattern */
static inline void remu_rpattern(uint8_t *p, uint32_t len, uint32_t i)
{
	uint32_t k;

	for (k = 0; k < len; k++)
		p[k] = (uint8_t)(k * 13 + i * 7 + (k >> 9));
}

static inline int remu_stream_post_recv(struct remu_stream *st)
{
	struct remu_rside *b = st->b;
	uint32_t i = st->posted_rq;
	struct ibv_sge sge = { (uintptr_t)remu_rslice(b, i),
			       st->msg + REMU_RATE_GRH, b->mr->lkey };

	st->posted_rq++;
	return remu_post_recv(b->qp, i, &sge, 1);
}

static inline int remu_stream_post(struct remu_stream *st, uint32_t i)
{
	struct remu_rside *a = st->a, *b = st->b;
	struct ibv_sge sge = { (uintptr_t)remu_rslice(a, i), st->msg,
			       a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED };

	remu_rpattern(remu_rslice(a, i), st->msg, i);
	if (st->type == IBV_QPT_UD) {
		wr.opcode = IBV_WR_SEND;
		wr.wr.ud.ah = a->ah;
		wr.wr.ud.remote_qpn = b->qp->qp_num;
		wr.wr.ud.remote_qkey = REMU_RATE_QKEY;
	} else {
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = (uintptr_t)remu_rslice(b, i);
		wr.wr.rdma.rkey = b->mr->rkey;
	}
	return remu_post_send(a->qp, &wr);
}

/* UD: check what b received (GRH area, then the message) and repost */
static inline void remu_stream_poll_b(struct remu_stream *st)
{
	struct ibv_wc wc[32];
	int n, k;

	n = ibv_poll_cq(st->b->cq, 32, wc);
	for (k = 0; k < n; k++) {
		uint8_t want[REMU_RATE_UD_MSG];
		uint32_t i = wc[k].wr_id;

		remu_rpattern(want, st->msg, i);
		if (wc[k].status != IBV_WC_SUCCESS ||
		    wc[k].byte_len != st->msg + REMU_RATE_GRH ||
		    memcmp(remu_rslice(st->b, i) + REMU_RATE_GRH, want, st->msg))
			st->bad++;
		st->rcvd++;
		remu_stream_post_recv(st);
	}
}

/*
 * Run messages [@from, @to) of @st: REMU_RATE_DEPTH in flight, each
 * completion's timestamp into st->ts; @hook(st, i) is called before
 * message i is posted (a rate change under traffic).  0, or -1 (a post
 * failed, or no completion for 20 s).
 */
static inline int remu_stream_run(struct remu_stream *st, uint32_t from,
				  uint32_t to,
				  void (*hook)(struct remu_stream *, uint32_t))
{
	struct ibv_cq_ex *cx = remu_cq_ex(st->a->cq);
	struct ibv_poll_cq_attr pa = {};
	uint32_t next = from, done = from;
	double idle = remu_now();

	while (done < to) {
		while (next < to && next - done < REMU_RATE_DEPTH) {
			if (hook)
				hook(st, next);
			if (remu_stream_post(st, next))
				return -1;
			next++;
		}
		if (st->type == IBV_QPT_UD)
			remu_stream_poll_b(st);
		if (ibv_start_poll(cx, &pa)) {
			if (remu_now() - idle > 20)
				return -1;
			continue;
		}
		do {
			if (cx->status != IBV_WC_SUCCESS)
				st->errors++;
			st->ts[cx->wr_id] = ibv_wc_read_completion_ts(cx);
			done++;
		} while (!ibv_next_poll(cx));
		ibv_end_poll(cx);
		idle = remu_now();
	}
	/* UD: the last receives */
	while (st->type == IBV_QPT_UD && st->rcvd < to &&
	       remu_now() - idle < 5)
		remu_stream_poll_b(st);
	return 0;
}

/* kbps achieved by messages (@from, @to] of @st, from their timestamps */
static inline double remu_stream_kbps(struct remu_stream *st, uint32_t from,
				      uint32_t to, uint32_t mtu)
{
	double secs = (st->ts[to] - st->ts[from]) / 1e9;
	double bytes = (double)(to - from) *
		       remu_wire_bytes(st->type, st->msg, mtu);

	return secs > 0 ? bytes * 8 / 1000 / secs : 0;
}

/* RC/UC: b's slices hold the last message written into each */
static inline long remu_stream_check_rdma(struct remu_stream *st, uint32_t to)
{
	uint8_t *want = malloc(st->msg);
	uint32_t i;
	long bad = 0;

	for (i = to > st->b->slices ? to - st->b->slices : 0; want && i < to;
	     i++) {
		remu_rpattern(want, st->msg, i);
		if (memcmp(remu_rslice(st->b, i), want, st->msg))
			bad++;
	}
	free(want);
	return want ? bad : -1;
}

/* the path MTU between @a and @b, in bytes */
static inline uint32_t remu_rside_mtu(struct remu_rside *a,
				      struct remu_rside *b)
{
	return 128u << remu_min_mtu(a->mtu, b->mtu);
}

/* messages of @st that take about @secs at @kbps */
static inline uint32_t remu_stream_msgs(struct remu_stream *st, uint32_t kbps,
					double secs, uint32_t mtu)
{
	double n = kbps * 1000.0 / 8 * secs /
		   remu_wire_bytes(st->type, st->msg, mtu);

	return n < 20 ? 20 : (uint32_t)n;
}

/* the stream's data arrived whole: 0 */
static inline long remu_stream_bad(struct remu_stream *st, uint32_t to)
{
	if (st->type != IBV_QPT_UD)
		return remu_stream_check_rdma(st, to);
	return st->bad + (to - st->rcvd);
}

#endif /* REMU_RATE_LIB_H */
