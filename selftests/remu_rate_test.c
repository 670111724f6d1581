// SPDX-License-Identifier: GPL-2.0
/*
 * remu_rate_test - per-QP rate limits (docs/rate-limits.md):
 * ibv_modify_qp_rate_limit(), IBV_QP_RATE_LIMIT in ibv_modify_qp(), and
 * packet_pacing_caps in ibv_query_device_ex().
 *
 * caps: packet_pacing_caps (1 Mb/s to 100 Gb/s, RC, UC and UD).
 * refused: mlx5's errnos: a rate below qp_rate_limit_min or above
 * qp_rate_limit_max, a QP not in RTS (INIT, RTR, the plain modify in
 * INIT -> RTR with the flag), a burst or typical size without a rate
 * (EINVAL), a comp_mask (EINVAL); and the flag in RTR -> RTS and RTS ->
 * RTS through ibv_modify_qp() accepted; every QP type a process can
 * create here is in supported_qpts and takes a limit (qp_types).
 *
 * Fixture pace, variants RC and UC (16 KiB RDMA WRITEs) and UD (4 KiB
 * SENDs), remu0 -> remu1 across the veth, and RC in loopback on remu0.
 * What the pacer guarantees on any machine is checked, never how close
 * to the asked rate a run gets (that is scripts/bench --rate's):
 *   three_rates       10, 50 and 100 Mb/s in turn: every byte that
 *                     crossed compared, no completion in error, packets
 *                     held (paced_pkts), and each stream never faster
 *                     than the limit lets it be (its payload less the
 *                     burst and one packet, at the rate: a lower bound
 *                     on the time the pacer enforces by construction)
 *   unlimited         a limit holds packets; rate 0 lifts it: no packet
 *                     held after, data intact
 *   change_under_traffic  one stream through 20 Mb/s, 80 Mb/s, none and
 *                     40 Mb/s, changed while WRs are in flight: data
 *                     intact, no error, the QP in RTS
 *   burst             a transfer within max_burst_sz: no packet held; a
 *                     burst of one packet: held, never faster than the rate
 *   shown             paced_pkts counts held packets, `rdma resource show
 *                     qp -dd` shows the limit, and not after rate 0
 *   traced            remu_rate_limit for each change (rate, burst),
 *                     remu_pace_hold once per held packet (as many as
 *                     paced_pkts counted), each wait at most one packet's
 *                     time at the rate
 *   reset_forgets     (RC) RESET drops the limit, as mlx5 does
 *
 * A rate on a QP type without pacing (EINVAL, remu_pace_check()) cannot
 * be asked from a process: every type a process can create on remu is
 * in supported_qpts (qp_types checks that the two agree).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "kselftest_harness.h"
#include "remu_lib.h"
#include "remu_rate_lib.h"
#include "remu_trace_lib.h"

#define RATE_MIN	1000u		/* packet_pacing_caps, kbps */
#define RATE_MAX	100000000u

/* ---- capabilities and refusals ---- */

TEST(caps)
{
	struct ibv_context *ctx = remu_open("remu0");
	struct ibv_device_attr_ex da = {};

	ASSERT_NE(NULL, ctx);
	ASSERT_EQ(0, ibv_query_device_ex(ctx, NULL, &da));
	EXPECT_EQ(RATE_MIN, da.packet_pacing_caps.qp_rate_limit_min);
	EXPECT_EQ(RATE_MAX, da.packet_pacing_caps.qp_rate_limit_max);
	EXPECT_EQ((1u << IBV_QPT_RC) | (1u << IBV_QPT_UC) | (1u << IBV_QPT_UD),
		  da.packet_pacing_caps.supported_qpts);
	/* the plain query answers as before */
	EXPECT_EQ(0, ibv_query_device(ctx, &da.orig_attr));
	ibv_close_device(ctx);
}

FIXTURE(refuse) {
	struct remu_rside a, b;
};

FIXTURE_SETUP(refuse)
{
	ASSERT_EQ(0, remu_rside_open(&self->a, "remu0", IBV_QPT_RC, REMU_RATE_RC_MSG));
	ASSERT_EQ(0, remu_rside_open(&self->b, "remu1", IBV_QPT_RC, REMU_RATE_RC_MSG));
}

FIXTURE_TEARDOWN(refuse)
{
	remu_rside_close(&self->a);
	remu_rside_close(&self->b);
}

/* the rules, with mlx5's errnos */
TEST_F(refuse, errnos)
{
	struct ibv_qp *qp = self->a.qp;
	struct remu_conn_attr ra = REMU_RC_ATTR(0x123);
	struct remu_conn_dest d = { .qpn = self->b.qp->qp_num,
				    .gid = self->b.gid,
				    .mtu = remu_min_mtu(self->a.mtu,
							self->b.mtu) };
	struct ibv_qp_rate_limit_attr rl = { .rate_limit = 10000,
					     .comp_mask = 1 };
	struct ibv_qp_attr a = {};

	/* RESET: not RTS */
	EXPECT_EQ(EINVAL, remu_set_rate(qp, 10000, 0, 0));
	ra.rtr_only = true;
	ASSERT_EQ(0, remu_qp_connect(qp, &ra, REMU_RATE_GID_INDEX, &d));
	/* RTR: RTR -> RTR is no transition */
	EXPECT_EQ(EINVAL, remu_set_rate(qp, 10000, 0, 0));
	/* RTR -> RTS with the flag: taken */
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x123;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	a.rate_limit = 30000;
	ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
				   IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
				   IBV_QP_RATE_LIMIT));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(qp));
	/* out of packet_pacing_caps */
	EXPECT_EQ(EINVAL, remu_set_rate(qp, RATE_MAX + 1, 0, 0));
	EXPECT_EQ(EINVAL, remu_set_rate(qp, RATE_MIN - 1, 0, 0));
	EXPECT_EQ(EINVAL, remu_set_rate(qp, 1, 0, 0));
	EXPECT_EQ(EINVAL, remu_set_rate(qp, UINT32_MAX, 0, 0));
	/* the bounds themselves are in */
	EXPECT_EQ(0, remu_set_rate(qp, RATE_MAX, 0, 0));
	EXPECT_EQ(0, remu_set_rate(qp, RATE_MIN, 0, 0));
	/* a burst or a typical size needs a rate; no comp_mask */
	EXPECT_EQ(EINVAL, remu_set_rate(qp, 0, 65536, 0));
	EXPECT_EQ(EINVAL, remu_set_rate(qp, 0, 0, 1024));
	EXPECT_EQ(EINVAL, ibv_modify_qp_rate_limit(qp, &rl));
	EXPECT_EQ(0, remu_set_rate(qp, 50000, 65536, 4096));
	/* RTS -> RTS through ibv_modify_qp(): taken; 0 lifts it */
	memset(&a, 0, sizeof(a));
	a.rate_limit = 0;
	EXPECT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_RATE_LIMIT));
	a.qp_state = IBV_QPS_RTS;
	a.rate_limit = 20000;
	EXPECT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_RATE_LIMIT));
	/* ... but not with a transition that takes none: RTS -> SQD */
	a.qp_state = IBV_QPS_SQD;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, IBV_QP_STATE |
					IBV_QP_RATE_LIMIT));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(qp));
	/* a refused modify changed nothing: the QP still works */
	ASSERT_EQ(0, remu_qp_connect(self->b.qp, &ra, REMU_RATE_GID_INDEX,
				     &(struct remu_conn_dest){
					.qpn = qp->qp_num, .gid = self->a.gid,
					.mtu = d.mtu }));
	EXPECT_EQ(0, remu_rdma1(qp, self->a.cq, IBV_WR_RDMA_WRITE,
				(uintptr_t)self->a.buf, self->a.mr->lkey, 4096,
				(uintptr_t)self->b.buf, self->b.mr->rkey, 10));
}

/* INIT -> RTR with the flag: not a transition that takes a rate limit */
TEST_F(refuse, init_to_rtr)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x123);
	struct ibv_qp_attr a = {};

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = ra.access;
	ASSERT_EQ(0, ibv_modify_qp(self->a.qp, &a, IBV_QP_STATE |
				   IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = remu_min_mtu(self->a.mtu, self->b.mtu);
	a.dest_qp_num = self->b.qp->qp_num;
	a.rq_psn = 0x123;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.rate_limit = 10000;
	remu_set_av(&a.ah_attr, &self->b.gid, REMU_RATE_GID_INDEX, 0);
	EXPECT_EQ(EINVAL, ibv_modify_qp(self->a.qp, &a, IBV_QP_STATE |
					IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER |
					IBV_QP_RATE_LIMIT));
	EXPECT_EQ(IBV_QPS_INIT, remu_qp_state(self->a.qp));
}

/*
 * supported_qpts says exactly which QP types take a limit: every type a
 * process can create on remu (RC, UC, UD) is in it and takes one in RTS;
 * the types remu has no QPs of (raw packet) cannot be created at all.
 */
TEST(qp_types)
{
	static const enum ibv_qp_type types[] = {
		IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET,
	};
	struct ibv_device_attr_ex da = {};
	unsigned int k;

	for (k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		enum ibv_qp_type t = types[k];
		struct remu_rside a = {}, b = {};
		int in_caps, made;

		made = !remu_rside_open(&a, "remu0", t, REMU_RATE_UD_MSG) &&
		       !remu_rside_open(&b, "remu1", t, REMU_RATE_UD_MSG);
		if (!k)
			ASSERT_EQ(0, ibv_query_device_ex(a.ctx, NULL, &da));
		in_caps = !!(da.packet_pacing_caps.supported_qpts & (1u << t));
		if (!made) {
			/* no QP of the type: nothing to limit, none offered */
			EXPECT_EQ(0, in_caps) TH_LOG("type %d", t);
			remu_rside_close(&a);
			remu_rside_close(&b);
			continue;
		}
		ASSERT_EQ(0, remu_rside_connect(&a, &b, false));
		EXPECT_EQ(in_caps ? 0 : EINVAL, remu_set_rate(a.qp, 10000, 0, 0))
			TH_LOG("type %d", t);
		remu_rside_close(&a);
		remu_rside_close(&b);
	}
}

/* ---- traffic under a limit ---- */

FIXTURE(pace) {
	struct remu_rside a, b;
	struct remu_stream st;
	uint32_t mtu;
};

FIXTURE_VARIANT(pace) {
	enum ibv_qp_type type;
	const char *dev_a, *dev_b;
};

FIXTURE_VARIANT_ADD(pace, rc) {
	.type = IBV_QPT_RC, .dev_a = "remu0", .dev_b = "remu1",
};

FIXTURE_VARIANT_ADD(pace, rc_loopback) {
	.type = IBV_QPT_RC, .dev_a = "remu0", .dev_b = "remu0",
};

FIXTURE_VARIANT_ADD(pace, uc) {
	.type = IBV_QPT_UC, .dev_a = "remu0", .dev_b = "remu1",
};

FIXTURE_VARIANT_ADD(pace, ud) {
	.type = IBV_QPT_UD, .dev_a = "remu0", .dev_b = "remu1",
};

#define MAX_MSGS	2048
#define RC_MSG		16384	/* RC/UC here: WRITEs of 16 KiB, short streams */

FIXTURE_SETUP(pace)
{
	uint32_t msg = variant->type == IBV_QPT_UD ? REMU_RATE_UD_MSG : RC_MSG;
	uint32_t i;

	ASSERT_EQ(0, remu_rside_open(&self->a, variant->dev_a, variant->type, msg));
	ASSERT_EQ(0, remu_rside_open(&self->b, variant->dev_b, variant->type, msg));
	ASSERT_EQ(0, remu_rside_connect(&self->a, &self->b, false));
	ASSERT_EQ(0, remu_rside_connect(&self->b, &self->a, false));
	self->mtu = remu_rside_mtu(&self->a, &self->b);
	self->st = (struct remu_stream){ .a = &self->a, .b = &self->b,
				    .type = variant->type, .msg = msg };
	self->st.ts = calloc(MAX_MSGS, sizeof(*self->st.ts));
	ASSERT_NE(NULL, self->st.ts);
	for (i = 0; variant->type == IBV_QPT_UD && i < REMU_RATE_RQ_DEPTH; i++)
		ASSERT_EQ(0, remu_stream_post_recv(&self->st));
}

FIXTURE_TEARDOWN(pace)
{
	free(self->st.ts);
	remu_rside_close(&self->a);
	remu_rside_close(&self->b);
}

/* messages of the stream that take about @secs at @kbps, at least 4 */
static uint32_t msgs_for(struct remu_stream *st, uint32_t kbps, double secs,
			 uint32_t mtu)
{
	double n = kbps * 1000.0 / 8 * secs /
		   remu_wire_bytes(st->type, st->msg, mtu);

	return n < 4 ? 4 : (uint32_t)n;
}

/*
 * The pacer never lets more than rate * T + burst bytes out in T
 * (remu_pace.c), on any machine: @n messages took at least their payload,
 * less the burst (@burst bytes, 0: the default of 2 ms at the rate) and
 * one packet, at @kbps.  A lower bound on the time only: how close to
 * the rate remu gets is scripts/bench --rate's to measure.
 */
static double least_secs(uint32_t n, uint32_t msg, uint32_t kbps,
			 uint32_t burst, uint32_t mtu)
{
	double rate = kbps * 1000.0 / 8;	/* bytes/s */
	double b = burst ? (double)burst : rate * 0.002;

	return ((double)n * msg - b - mtu - 256) / rate;
}

#define EXPECT_NOT_FASTER(secs, n, msg, kbps, burst, mtu) do {		\
	double least_ = least_secs(n, msg, kbps, burst, mtu);		\
	TH_LOG("%u messages at %u kbps: %.3f s (at least %.3f s)",	\
	       (unsigned int)(n), (unsigned int)(kbps), secs, least_);	\
	EXPECT_GE(secs, least_);					\
} while (0)

/* the stream's messages [@from, @to) under the QP's limit: seconds, or -1 */
static double timed_run(struct remu_stream *st, uint32_t from, uint32_t to)
{
	double t0 = remu_now();

	if (remu_stream_run(st, from, to, NULL))
		return -1;
	return remu_now() - t0;
}

/*
 * Three rates in turn on one QP: at each, the data crosses byte for byte
 * with no completion in error, the limit holds packets back (paced_pkts)
 * and the stream is never faster than the limit lets it be.
 */
TEST_F_TIMEOUT(pace, three_rates, 60)
{
	static const uint32_t rates[] = { 10000, 50000, 100000 };
	uint32_t from = 0, n, k;
	long long held;
	double secs;

	for (k = 0; k < 3; k++) {
		n = msgs_for(&self->st, rates[k], 0.15, self->mtu);
		ASSERT_LE(from + n, MAX_MSGS);
		ASSERT_EQ(0, remu_set_rate(self->a.qp, rates[k], 0, 0));
		held = remu_hw_counter(self->a.dev, "paced_pkts", true);
		secs = timed_run(&self->st, from, from + n);
		ASSERT_LE(0, secs);
		EXPECT_EQ(0, self->st.errors);
		EXPECT_EQ(0, remu_stream_bad(&self->st, from + n));
		EXPECT_NOT_FASTER(secs, n, self->st.msg, rates[k], 0, self->mtu);
		/*
		 * The limit held packets back, unless the stream was
		 * slower than the limit on its own (a loaded machine: UD
		 * at 100 Mb/s once took 0.192 s for 0.145 s of payload,
		 * and nothing needed holding)
		 */
		if (remu_hw_counter(self->a.dev, "paced_pkts", true) == held) {
			TH_LOG("nothing held back at %u kbps", rates[k]);
			EXPECT_LT(1.15 * least_secs(n, self->st.msg, rates[k],
						    0, self->mtu), secs);
		}
		from += n;
	}
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(self->a.qp));
}

/* rate 0 lifts a limit: no packet held after it, data intact */
TEST_F_TIMEOUT(pace, unlimited, 60)
{
	uint32_t n = (1 << 20) / self->st.msg;	/* 1 MiB */
	long long held;

	/* one message at 1 Mb/s: held */
	held = remu_hw_counter(self->a.dev, "paced_pkts", true);
	ASSERT_EQ(0, remu_set_rate(self->a.qp, RATE_MIN, 0, 0));
	ASSERT_EQ(0, remu_stream_run(&self->st, 0, 2, NULL));
	EXPECT_LT(held, remu_hw_counter(self->a.dev, "paced_pkts", true));
	/* then no limit: 1 MiB, none held */
	ASSERT_EQ(0, remu_set_rate(self->a.qp, 0, 0, 0));
	held = remu_hw_counter(self->a.dev, "paced_pkts", true);
	ASSERT_EQ(0, remu_stream_run(&self->st, 2, n + 2, NULL));
	EXPECT_EQ(held, remu_hw_counter(self->a.dev, "paced_pkts", true));
	EXPECT_EQ(0, self->st.errors);
	EXPECT_EQ(0, remu_stream_bad(&self->st, n + 2));
}

/* the rates change_under_traffic goes through, and where */
static const uint32_t seg_rate[] = { 20000, 80000, 0, 40000 };
static uint32_t seg_start[5];

static void change_hook(struct remu_stream *st, uint32_t i)
{
	unsigned int k;

	for (k = 1; k < 4; k++)
		if (i == seg_start[k])
			remu_set_rate(st->a->qp, seg_rate[k], 0, 0);
}

/*
 * One stream through 20 Mb/s, 80 Mb/s, no limit and 40 Mb/s, each change
 * made while WRs are in flight: every message arrives byte for byte, no
 * completion in error, the QP stays in RTS.
 */
TEST_F_TIMEOUT(pace, change_under_traffic, 60)
{
	unsigned int k;
	uint32_t n;

	seg_start[0] = 0;
	for (k = 0; k < 4; k++) {
		n = seg_rate[k] ? msgs_for(&self->st, seg_rate[k], 0.1,
					   self->mtu) : 64;
		seg_start[k + 1] = seg_start[k] + n;
	}
	ASSERT_LE(seg_start[4], MAX_MSGS);
	ASSERT_EQ(0, remu_set_rate(self->a.qp, seg_rate[0], 0, 0));
	ASSERT_EQ(0, remu_stream_run(&self->st, 0, seg_start[4], change_hook));
	EXPECT_EQ(0, self->st.errors);
	EXPECT_EQ(0, remu_stream_bad(&self->st, seg_start[4]));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(self->a.qp));
}

/*
 * max_burst_sz: a transfer the burst covers leaves with no packet held
 * (the bucket starts full), one larger than a small burst has packets
 * held and is never faster than the limit.
 */
TEST_F_TIMEOUT(pace, burst, 60)
{
	uint64_t per = remu_wire_bytes(self->st.type, self->st.msg, self->mtu);
	uint32_t big = 1 << 20, n = 8, kbps = 20000;
	long long held;
	double secs;

	/* 8 messages under a 1 MiB burst at 1 Mb/s: none held */
	ASSERT_LE(n * per, big);
	ASSERT_EQ(0, remu_set_rate(self->a.qp, RATE_MIN, big, 0));
	held = remu_hw_counter(self->a.dev, "paced_pkts", true);
	ASSERT_EQ(0, remu_stream_run(&self->st, 0, n, NULL));
	EXPECT_EQ(held, remu_hw_counter(self->a.dev, "paced_pkts", true));
	/* a burst of one packet: held, at the rate */
	ASSERT_EQ(0, remu_set_rate(self->a.qp, kbps, self->mtu, 0));
	held = remu_hw_counter(self->a.dev, "paced_pkts", true);
	secs = timed_run(&self->st, n, 3 * n);
	ASSERT_LE(0, secs);
	EXPECT_LT(held, remu_hw_counter(self->a.dev, "paced_pkts", true));
	EXPECT_NOT_FASTER(secs, 2 * n, self->st.msg, kbps, self->mtu,
			  self->mtu);
	EXPECT_EQ(0, self->st.errors);
	EXPECT_EQ(0, remu_stream_bad(&self->st, 3 * n));
}

/* paced_pkts and `rdma resource show qp -dd` */
TEST_F_TIMEOUT(pace, shown, 60)
{
	long long held = remu_hw_counter(self->a.dev, "paced_pkts", true);
	uint32_t n = msgs_for(&self->st, 20000, 0.1, self->mtu);
	char cmd[256];

	ASSERT_EQ(0, remu_set_rate(self->a.qp, 20000, 0, 0));
	snprintf(cmd, sizeof(cmd), "rdma -dd resource show qp link %s/1 lqpn %u"
		 " | grep -q 'rate_limit_kbps 20000'", self->a.dev,
		 self->a.qp->qp_num);
	EXPECT_EQ(0, remu_sh(cmd));
	ASSERT_EQ(0, remu_stream_run(&self->st, 0, n, NULL));
	EXPECT_LT(held, remu_hw_counter(self->a.dev, "paced_pkts", true));
	EXPECT_EQ(0, remu_stream_bad(&self->st, n));
	ASSERT_EQ(0, remu_set_rate(self->a.qp, 0, 0, 0));
	EXPECT_NE(0, remu_sh(cmd));
}

/* the tracepoints (docs/tracing.md) */
TEST_F_TIMEOUT(pace, traced, 60)
{
	uint32_t qpn = self->a.qp->qp_num, n = 8, kbps = 20000;
	uint32_t burst = self->mtu;	/* less than 8 messages of any variant */
	/*
	 * The longest hold: the bucket let the packet before go, so the
	 * next waits at most that one's time at the rate
	 */
	long long most = (self->mtu + 200) * 8000000LL / kbps;
	const char *dev = self->a.dev;
	struct rt_ev *ev = NULL;
	long long held;
	int cnt, i, k;

	i = rt_setup("remu_rate_test", 4096, 1);
	ASSERT_EQ(0, i) TH_LOG("tracefs: %s", strerror(-i));
	held = remu_hw_counter(dev, "paced_pkts", true);
	ASSERT_EQ(0, remu_set_rate(self->a.qp, kbps, burst, 0));
	ASSERT_EQ(0, remu_stream_run(&self->st, 0, n, NULL));
	ASSERT_EQ(0, remu_set_rate(self->a.qp, 0, 0, 0));
	held = remu_hw_counter(dev, "paced_pkts", true) - held;
	cnt = rt_read(&ev);
	rt_close();
	ASSERT_LT(0, cnt);
	EXPECT_EQ(2, rt_count(ev, cnt, "remu_rate_limit", dev, "qpn", qpn));
	i = rt_find(ev, cnt, 0, 0, "remu_rate_limit", dev, "qpn", qpn);
	ASSERT_LE(0, i);
	EXPECT_EQ(kbps, rt_num(&ev[i], "rate_kbps", -1));
	EXPECT_EQ(burst, rt_num(&ev[i], "max_burst_sz", -1));
	i = rt_find(ev, cnt, i + 1, 0, "remu_rate_limit", dev, "qpn", qpn);
	ASSERT_LE(0, i);
	EXPECT_EQ(0, rt_num(&ev[i], "rate_kbps", -1));
	EXPECT_LT(0, held);
	EXPECT_EQ(held, rt_count(ev, cnt, "remu_pace_hold", dev, "qpn", qpn));
	for (k = 0; k < held; k++) {
		i = rt_find(ev, cnt, 0, k, "remu_pace_hold", dev, "qpn", qpn);
		ASSERT_LE(0, i);
		EXPECT_EQ(kbps, rt_num(&ev[i], "rate_kbps", -1));
		EXPECT_LT(0, rt_num(&ev[i], "wait_ns", -1));
		EXPECT_GE(most, rt_num(&ev[i], "wait_ns", -1));
	}
	EXPECT_EQ(0, remu_stream_bad(&self->st, n));
	free(ev);
}

/* RESET drops the limit (mlx5 drops it when the send queue leaves RTS) */
TEST_F_TIMEOUT(pace, reset_forgets, 60)
{
	long long held;
	uint32_t n = 64;

	if (variant->type != IBV_QPT_RC || variant->dev_b == variant->dev_a)
		SKIP(return, "RC remu0 -> remu1 only");
	ASSERT_EQ(0, remu_set_rate(self->a.qp, RATE_MIN, 0, 0));
	ASSERT_EQ(0, remu_rside_connect(&self->a, &self->b, true));
	ASSERT_EQ(0, remu_rside_connect(&self->b, &self->a, true));
	held = remu_hw_counter(self->a.dev, "paced_pkts", true);
	/* 1 MiB: 8 s at 1 Mb/s */
	ASSERT_EQ(0, remu_stream_run(&self->st, 0, n, NULL));
	EXPECT_EQ(held, remu_hw_counter(self->a.dev, "paced_pkts", true));
	EXPECT_EQ(0, self->st.errors);
	EXPECT_EQ(0, remu_stream_bad(&self->st, n));
}

TEST_HARNESS_MAIN
