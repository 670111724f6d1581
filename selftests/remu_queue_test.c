// SPDX-License-Identifier: GPL-2.0
/*
 * remu_queue_test - CQs, QPs, SRQs and AHs on remu0: limits, the QP state
 * machine and its attribute checks, flush of posted WQEs into the CQ
 * ring, the async events of this layer (Last WQE Reached, SRQ limit,
 * SQ drained), CQ resize/notify/overflow,
 * cleanup when a process dies, and the
 * fast path: polling makes no system call, posting sends makes one (the
 * doorbell), posting receives makes none (counted with ptrace).
 *
 * Runs in the test VM after scripts/remu-up.  The QPs loop back to
 * themselves with SQ PSN 0x456 and RQ PSN 0x123, so the responder takes
 * none of their SENDs (they end in RETRY_EXC_ERR or are flushed); a test
 * that needs traffic sets the RQ PSN to the SQ PSN (srq_limit_event).
 */
#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define DEV "remu0"
#define MAX_QP_WR 16384
#define MAX_SGE 16
#define MAX_INLINE 256
#define MAX_CQE 4194303	/* mlx5's */

static const char * const counted[] = { "cq", "qp", "srq", "ah", "ring" };
#define NCOUNTED (sizeof(counted) / sizeof(counted[0]))

static void counts_now(int *c)
{
	unsigned int i;

	for (i = 0; i < NCOUNTED; i++)
		c[i] = remu_obj_count(counted[i]);
}

FIXTURE(q) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int base[NCOUNTED];
	int sgid4;
	union ibv_gid gid4;
};

FIXTURE_SETUP(q)
{
	counts_now(self->base);
	self->ctx = remu_open(DEV);
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	self->cq = ibv_create_cq(self->ctx, 256, NULL, NULL, 0);
	ASSERT_NE(NULL, self->cq);
	self->sgid4 = remu_roce_gid(self->ctx, 1, &self->gid4);
	ASSERT_LE(0, self->sgid4);
}

FIXTURE_TEARDOWN(q)
{
	int now[NCOUNTED];
	unsigned int i;

	if (self->cq)
		ibv_destroy_cq(self->cq);
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);
	counts_now(now);
	for (i = 0; i < NCOUNTED; i++)
		EXPECT_EQ(self->base[i], now[i]) TH_LOG("count of object type %u (cq qp srq ah ring)", i);
}

static struct ibv_qp *mkqp(struct ibv_pd *pd, struct ibv_cq *scq,
			   struct ibv_cq *rcq, enum ibv_qp_type type,
			   uint32_t swr, uint32_t rwr)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = type,
		.cap = { .max_send_wr = swr, .max_recv_wr = rwr,
			 .max_send_sge = 2, .max_recv_sge = 2 },
	};

	return ibv_create_qp(pd, &ia);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				     IBV_QP_PORT | IBV_QP_QKEY);
	}
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* RTR attributes of a connected QP looping back to itself. */
static int rtr_attr(struct ibv_qp *qp, int sgid, union ibv_gid *dgid,
		    struct ibv_qp_attr *a)
{
	int mask = IBV_QP_STATE;

	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	if (qp->qp_type == IBV_QPT_UD)
		return mask;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = qp->qp_num;
	a->rq_psn = 0x123;
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	a->ah_attr.grh.dgid = *dgid;
	a->ah_attr.grh.sgid_index = sgid;
	a->ah_attr.grh.hop_limit = 64;
	mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		a->max_dest_rd_atomic = 4;
		a->min_rnr_timer = 12;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	return mask;
}

static int rts_attr(struct ibv_qp *qp, struct ibv_qp_attr *a)
{
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->sq_psn = 0x456;
	if (qp->qp_type == IBV_QPT_RC) {
		a->timeout = 14;
		a->retry_cnt = 7;
		a->rnr_retry = 7;
		a->max_rd_atomic = 4;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return mask;
}

static int to_rts(struct ibv_qp *qp, int sgid, union ibv_gid *dgid)
{
	struct ibv_qp_attr a;
	int mask, ret;

	ret = to_init(qp);
	if (ret)
		return ret;
	mask = rtr_attr(qp, sgid, dgid, &a);
	ret = ibv_modify_qp(qp, &a, mask);
	if (ret)
		return ret;
	mask = rts_attr(qp, &a);
	return ibv_modify_qp(qp, &a, mask);
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static int post_recv(struct ibv_qp *qp, uint64_t id)
{
	struct ibv_recv_wr wr = { .wr_id = id }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static int post_send(struct ibv_qp *qp, uint64_t id, struct ibv_ah *ah)
{
	static char buf[8];
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8 };
	struct ibv_send_wr wr = {
		.wr_id = id, .opcode = IBV_WR_SEND, .sg_list = &sge,
		.num_sge = 1, .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
	}, *bad;

	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 2;
		wr.wr.ud.remote_qkey = 0x11111111;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* Poll @n completions from @cq, waiting up to about 3 s. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	int got = 0, i, r;

	for (i = 0; i < 3000 && got < n; i++) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			return r;
		got += r;
		if (got < n)
			usleep(1000);
	}
	return got;
}

/* Wait up to 3 s for the async event @type. */
static int wait_async(struct ibv_context *ctx, enum ibv_event_type type)
{
	struct ibv_async_event ev;
	int i;

	for (i = 0; i < 30; i++)
		if (!remu_next_async(ctx, 100, &ev) && ev.event_type == type)
			return 1;
	return 0;
}

TEST_F(q, device_limits)
{
	struct ibv_device_attr a;

	ASSERT_EQ(0, ibv_query_device(self->ctx, &a));
	EXPECT_EQ(16384, a.max_qp);
	EXPECT_EQ(MAX_QP_WR, a.max_qp_wr);
	EXPECT_EQ(MAX_SGE, a.max_sge);
	EXPECT_EQ(16384, a.max_cq);
	EXPECT_EQ(MAX_CQE, a.max_cqe);
	EXPECT_EQ(16384, a.max_srq);
	EXPECT_EQ(16384, a.max_srq_wr);
	EXPECT_EQ(16, a.max_srq_sge);
	EXPECT_EQ(65536, a.max_ah);
}

TEST_F(q, cq_create_limits)
{
	struct ibv_cq *cq;

	errno = 0;
	EXPECT_EQ(NULL, ibv_create_cq(self->ctx, 0, NULL, NULL, 0));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_create_cq(self->ctx, MAX_CQE + 1, NULL, NULL, 0));
	EXPECT_EQ(EINVAL, errno);
	/* 4 M entries of 64 bytes: libremu takes no 256-byte inline slots */
	cq = ibv_create_cq(self->ctx, MAX_CQE, NULL, NULL, 0);
	ASSERT_NE(NULL, cq);
	EXPECT_EQ(MAX_CQE + 1, cq->cqe);	/* a power of two */
	EXPECT_EQ(self->base[0] + 2, remu_obj_count("cq"));
	EXPECT_EQ(self->base[4] + 2, remu_obj_count("ring"));
	EXPECT_EQ(0, ibv_destroy_cq(cq));
	cq = ibv_create_cq(self->ctx, 100, NULL, NULL, 0);
	ASSERT_NE(NULL, cq);
	EXPECT_LE(100, cq->cqe);
	EXPECT_EQ(0, ibv_destroy_cq(cq));
}

/* Resize keeps pending completions, in order; too small fails. */
TEST_F(q, cq_resize_keeps_cqes)
{
	struct ibv_cq *cq = ibv_create_cq(self->ctx, 8, NULL, NULL, 0);
	struct ibv_wc wc[8];
	struct ibv_qp *qp;
	int i;

	ASSERT_NE(NULL, cq);
	qp = mkqp(self->pd, cq, cq, IBV_QPT_RC, 4, 8);
	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_init(qp));
	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, post_recv(qp, 100 + i));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_ERR));
	EXPECT_EQ(EINVAL, ibv_resize_cq(cq, 4));
	EXPECT_EQ(EINVAL, ibv_resize_cq(cq, MAX_CQE + 1));
	ASSERT_EQ(0, ibv_resize_cq(cq, 100));
	EXPECT_LE(100, cq->cqe);
	ASSERT_EQ(5, poll_n(cq, wc, 5));
	for (i = 0; i < 5; i++) {
		EXPECT_EQ(100 + i, wc[i].wr_id);
		EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[i].status);
	}
	EXPECT_EQ(0, ibv_poll_cq(cq, 1, wc));
	/* the new ring keeps working */
	ASSERT_EQ(0, post_recv(qp, 7));
	ASSERT_EQ(1, poll_n(cq, wc, 1));
	EXPECT_EQ(7, wc[0].wr_id);
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_destroy_cq(cq));
}

/*
 * A resize right after posting counts what was posted: the WQEs
 * doorbelled before it complete first (a NIC runs a command after them),
 * so 33 UD SENDs posted as one chain leave 33 CQEs that a 32-slot ring
 * cannot hold: EINVAL, as on mlx5 and rxe, and nothing lost.  Before,
 * the resize could run before the send work and shrink the ring under
 * the completions still to come (rdma-core's test_resize_cq).
 */
TEST_F(q, cq_resize_counts_posted)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_send_wr wr[33], *bad;
	struct ibv_sge sge;
	struct ibv_wc wc[33];
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	static char buf[8];
	int round, i;

	aa.grh.dgid = self->gid4;
	aa.grh.sgid_index = self->sgid4;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(self->pd, &aa);
	ASSERT_NE(NULL, ah);
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 8 };
	for (round = 0; round < 20; round++) {
		cq = ibv_create_cq(self->ctx, 64, NULL, NULL, 0);
		ASSERT_NE(NULL, cq);
		qp = mkqp(self->pd, cq, cq, IBV_QPT_UD, 64, 4);
		ASSERT_NE(NULL, qp);
		ASSERT_EQ(0, to_rts(qp, self->sgid4, &self->gid4));
		for (i = 0; i < 33; i++) {
			wr[i] = (struct ibv_send_wr){
				.wr_id = 500 + i, .opcode = IBV_WR_SEND,
				.sg_list = &sge, .num_sge = 1,
				.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
				.next = i < 32 ? &wr[i + 1] : NULL,
			};
			wr[i].wr.ud.ah = ah;
			wr[i].wr.ud.remote_qpn = qp->qp_num;
			wr[i].wr.ud.remote_qkey = 0x11111111;
		}
		ASSERT_EQ(0, ibv_post_send(qp, wr, &bad));
		EXPECT_EQ(EINVAL, ibv_resize_cq(cq, 32)) TH_LOG("round %d", round);
		ASSERT_EQ(33, poll_n(cq, wc, 33)) TH_LOG("round %d", round);
		for (i = 0; i < 33; i++) {
			EXPECT_EQ(500 + i, wc[i].wr_id);
			EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
		}
		EXPECT_EQ(0, ibv_poll_cq(cq, 1, wc));
		EXPECT_EQ(0, ibv_destroy_qp(qp));
		EXPECT_EQ(0, ibv_destroy_cq(cq));
	}
	EXPECT_EQ(0, ibv_destroy_ah(ah));
}

/*
 * RESET and destroy take the QP's completions out of its CQ, as mlx5's
 * provider does (rdma-core's test_mr_rereg_pd/_addr reset a QP after an
 * error and expect its old flush completions gone); the other QPs'
 * completions stay, in order.  Three RC QPs share one CQ: a's two flushed
 * receives, b's one and c's two; b reset leaves a, a, c, c (a's move
 * up over b's); a reset leaves c, c; a again (one receive) after them.
 * Then a, c with c destroyed leaves a's.
 */
TEST_F(q, reset_takes_cqes_out)
{
	struct ibv_qp *a, *b, *c;
	struct ibv_wc wc[8];

	a = mkqp(self->pd, self->cq, self->cq, IBV_QPT_RC, 4, 4);
	b = mkqp(self->pd, self->cq, self->cq, IBV_QPT_RC, 4, 4);
	c = mkqp(self->pd, self->cq, self->cq, IBV_QPT_RC, 4, 4);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, to_init(a));
	ASSERT_EQ(0, to_init(b));
	ASSERT_EQ(0, to_init(c));
	ASSERT_EQ(0, post_recv(a, 10));
	ASSERT_EQ(0, post_recv(a, 11));
	ASSERT_EQ(0, post_recv(b, 20));
	ASSERT_EQ(0, post_recv(c, 30));
	ASSERT_EQ(0, post_recv(c, 31));
	/* entering ERR flushes at once, in this order */
	ASSERT_EQ(0, to_state(a, IBV_QPS_ERR));
	ASSERT_EQ(0, to_state(b, IBV_QPS_ERR));
	ASSERT_EQ(0, to_state(c, IBV_QPS_ERR));

	ASSERT_EQ(0, to_state(b, IBV_QPS_RESET));
	ASSERT_EQ(0, to_state(a, IBV_QPS_RESET));
	ASSERT_EQ(0, to_init(a));
	ASSERT_EQ(0, post_recv(a, 12));
	ASSERT_EQ(0, to_state(a, IBV_QPS_ERR));
	ASSERT_EQ(3, poll_n(self->cq, wc, 3));
	EXPECT_EQ(30, wc[0].wr_id);
	EXPECT_EQ(31, wc[1].wr_id);
	EXPECT_EQ(12, wc[2].wr_id);
	EXPECT_EQ(c->qp_num, wc[0].qp_num);
	EXPECT_EQ(c->qp_num, wc[1].qp_num);
	EXPECT_EQ(a->qp_num, wc[2].qp_num);
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[2].status);
	EXPECT_EQ(0, ibv_poll_cq(self->cq, 8, wc));

	/* destroy: a, c; c destroyed leaves a */
	ASSERT_EQ(0, to_state(a, IBV_QPS_RESET));
	ASSERT_EQ(0, to_state(c, IBV_QPS_RESET));
	ASSERT_EQ(0, to_init(a));
	ASSERT_EQ(0, to_init(c));
	ASSERT_EQ(0, post_recv(a, 13));
	ASSERT_EQ(0, post_recv(c, 32));
	ASSERT_EQ(0, to_state(a, IBV_QPS_ERR));
	ASSERT_EQ(0, to_state(c, IBV_QPS_ERR));
	EXPECT_EQ(0, ibv_destroy_qp(c));
	ASSERT_EQ(1, poll_n(self->cq, wc, 1));
	EXPECT_EQ(13, wc[0].wr_id);
	EXPECT_EQ(a->qp_num, wc[0].qp_num);
	usleep(100000);
	EXPECT_EQ(0, ibv_poll_cq(self->cq, 8, wc));
	EXPECT_EQ(0, ibv_destroy_qp(a));
	EXPECT_EQ(0, ibv_destroy_qp(b));
}

/*
 * A QP on an SRQ keeps its receive completions through RESET (unlike
 * mlx5, which gives the SRQ WQE back: remu's kernel has consumed it, and
 * only the consumer that polls the completion can post the buffer again);
 * its send completions go.  A UD QP on an SRQ sends to itself: one send
 * CQE in scq, one SRQ receive in rcq; each CQ's event says it arrived.
 */
TEST_F(q, reset_keeps_srq_recv_cqes)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(self->ctx);
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	struct ibv_recv_wr rwr = { .wr_id = 77, .num_sge = 1 }, *rbad;
	static char sbuf[8] = "srq-cqe", rbuf[40 + 8];
	struct ibv_sge sge = { .addr = (uintptr_t)sbuf, .length = 8 };
	struct ibv_send_wr swr = {
		.wr_id = 66, .opcode = IBV_WR_SEND, .sg_list = &sge,
		.num_sge = 1, .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
	}, *sbad;
	struct ibv_cq *scq, *rcq, *ecq;
	struct ibv_sge rsge;
	struct ibv_srq *srq;
	struct pollfd pfd;
	struct ibv_wc wc[2];
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	void *cqctx;
	int i;

	ASSERT_NE(NULL, ch);
	scq = ibv_create_cq(self->ctx, 4, NULL, ch, 0);
	rcq = ibv_create_cq(self->ctx, 4, NULL, ch, 0);
	ASSERT_NE(NULL, scq);
	ASSERT_NE(NULL, rcq);
	srq = ibv_create_srq(self->pd, &sia);
	ASSERT_NE(NULL, srq);
	mr = ibv_reg_mr(self->pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr);
	rsge = (struct ibv_sge){ .addr = (uintptr_t)rbuf,
				 .length = sizeof(rbuf), .lkey = mr->lkey };
	rwr.sg_list = &rsge;
	ASSERT_EQ(0, ibv_post_srq_recv(srq, &rwr, &rbad));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.srq = srq;
	qp = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_rts(qp, self->sgid4, &self->gid4));
	aa.grh.dgid = self->gid4;
	aa.grh.sgid_index = self->sgid4;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(self->pd, &aa);
	ASSERT_NE(NULL, ah);

	ASSERT_EQ(0, ibv_req_notify_cq(scq, 0));
	ASSERT_EQ(0, ibv_req_notify_cq(rcq, 0));
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = qp->qp_num;
	swr.wr.ud.remote_qkey = 0x11111111;
	ASSERT_EQ(0, ibv_post_send(qp, &swr, &sbad));
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(1, poll(&pfd, 1, 3000)) TH_LOG("event %d", i);
		ASSERT_EQ(0, ibv_get_cq_event(ch, &ecq, &cqctx));
		ibv_ack_cq_events(ecq, 1);
	}

	ASSERT_EQ(0, to_state(qp, IBV_QPS_RESET));
	EXPECT_EQ(0, ibv_poll_cq(scq, 2, wc));
	ASSERT_EQ(1, ibv_poll_cq(rcq, 2, wc));
	EXPECT_EQ(77, wc[0].wr_id);
	EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
	EXPECT_EQ(IBV_WC_RECV, wc[0].opcode);
	EXPECT_EQ(qp->qp_num, wc[0].qp_num);
	EXPECT_EQ(40 + 8, wc[0].byte_len);
	EXPECT_EQ(0, memcmp(rbuf + 40, "srq-cqe", 8));

	EXPECT_EQ(0, ibv_destroy_ah(ah));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_dereg_mr(mr));
	EXPECT_EQ(0, ibv_destroy_srq(srq));
	EXPECT_EQ(0, ibv_destroy_cq(scq));
	EXPECT_EQ(0, ibv_destroy_cq(rcq));
	EXPECT_EQ(0, ibv_destroy_comp_channel(ch));
}

/* Completion channel: an armed CQ raises one event on the next CQE. */
TEST_F(q, cq_notify_channel)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(self->ctx);
	struct pollfd pfd;
	struct ibv_cq *cq, *ecq;
	struct ibv_wc wc[4];
	struct ibv_qp *qp;
	void *cqctx;

	ASSERT_NE(NULL, ch);
	cq = ibv_create_cq(self->ctx, 16, (void *)0x1234, ch, 0);
	ASSERT_NE(NULL, cq);
	qp = mkqp(self->pd, cq, cq, IBV_QPT_RC, 4, 4);
	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_init(qp));
	ASSERT_EQ(0, post_recv(qp, 1));
	ASSERT_EQ(0, ibv_req_notify_cq(cq, 0));
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	EXPECT_EQ(0, poll(&pfd, 1, 200));	/* nothing yet */
	ASSERT_EQ(0, to_state(qp, IBV_QPS_ERR));
	ASSERT_EQ(1, poll(&pfd, 1, 3000));
	ASSERT_EQ(0, ibv_get_cq_event(ch, &ecq, &cqctx));
	EXPECT_EQ(cq, ecq);
	EXPECT_EQ((void *)0x1234, cqctx);
	ibv_ack_cq_events(cq, 1);
	ASSERT_EQ(1, poll_n(cq, wc, 1));
	/* not re-armed: the next completion raises no event */
	ASSERT_EQ(0, post_recv(qp, 2));
	ASSERT_EQ(1, poll_n(cq, wc, 1));
	EXPECT_EQ(0, poll(&pfd, 1, 200));
	/* solicited-only arming: a flush completion is not solicited */
	ASSERT_EQ(0, ibv_req_notify_cq(cq, 1));
	ASSERT_EQ(0, post_recv(qp, 3));
	ASSERT_EQ(1, poll_n(cq, wc, 1));
	EXPECT_EQ(0, poll(&pfd, 1, 200));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_destroy_cq(cq));
	EXPECT_EQ(0, ibv_destroy_comp_channel(ch));
}

/* Overflowing a CQ raises IBV_EVENT_CQ_ERR. */
TEST_F(q, cq_overflow_event)
{
	struct ibv_cq *cq = ibv_create_cq(self->ctx, 4, NULL, NULL, 0);
	struct ibv_qp *qp;
	int i;

	ASSERT_NE(NULL, cq);
	EXPECT_EQ(4, cq->cqe);
	qp = mkqp(self->pd, cq, cq, IBV_QPT_RC, 4, 16);
	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_init(qp));
	for (i = 0; i < 10; i++)
		ASSERT_EQ(0, post_recv(qp, i));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_ERR));
	EXPECT_TRUE(wait_async(self->ctx, IBV_EVENT_CQ_ERR));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_destroy_cq(cq));
}

/* RC, UC and UD QPs with their caps; limits are enforced. */
TEST_F(q, qp_create_caps)
{
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	unsigned int t;

	for (t = 0; t < 3; t++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = self->cq;
		ia.qp_type = types[t];
		ia.cap.max_send_wr = 100;
		ia.cap.max_recv_wr = 200;
		ia.cap.max_send_sge = 3;
		ia.cap.max_recv_sge = 4;
		ia.cap.max_inline_data = 64;
		qp = ibv_create_qp(self->pd, &ia);
		ASSERT_NE(NULL, qp) TH_LOG("type %d", types[t]);
		EXPECT_LE(100, ia.cap.max_send_wr);
		EXPECT_LE(200, ia.cap.max_recv_wr);
		EXPECT_LE(3, ia.cap.max_send_sge);
		EXPECT_LE(4, ia.cap.max_recv_sge);
		EXPECT_LE(64, ia.cap.max_inline_data);
		EXPECT_LE(2, qp->qp_num);
		EXPECT_EQ(IBV_QPS_RESET, qp->state);
		EXPECT_EQ(self->base[1] + 1, remu_obj_count("qp"));
		EXPECT_EQ(0, ibv_destroy_qp(qp));

		ia.cap.max_send_sge = MAX_SGE + 1;
		errno = 0;
		EXPECT_EQ(NULL, ibv_create_qp(self->pd, &ia));
		EXPECT_EQ(EINVAL, errno);
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = MAX_SGE + 1;
		errno = 0;
		EXPECT_EQ(NULL, ibv_create_qp(self->pd, &ia));
		EXPECT_EQ(EINVAL, errno);
		ia.cap.max_recv_sge = 1;
		ia.cap.max_send_wr = MAX_QP_WR + 1;
		errno = 0;
		EXPECT_EQ(NULL, ibv_create_qp(self->pd, &ia));
		EXPECT_EQ(EINVAL, errno);
		ia.cap.max_send_wr = 1;
		ia.cap.max_recv_wr = MAX_QP_WR + 1;
		errno = 0;
		EXPECT_EQ(NULL, ibv_create_qp(self->pd, &ia));
		EXPECT_EQ(EINVAL, errno);
		ia.cap.max_recv_wr = 1;
		ia.cap.max_inline_data = MAX_INLINE + 1;
		errno = 0;
		EXPECT_EQ(NULL, ibv_create_qp(self->pd, &ia));
		EXPECT_EQ(EINVAL, errno);
		ia.cap.max_inline_data = MAX_INLINE;
		ia.cap.max_send_sge = MAX_SGE;
		ia.cap.max_send_wr = MAX_QP_WR;
		qp = ibv_create_qp(self->pd, &ia);
		ASSERT_NE(NULL, qp);
		EXPECT_EQ(MAX_INLINE, ia.cap.max_inline_data);
		EXPECT_EQ(MAX_SGE, ia.cap.max_send_sge);
		EXPECT_EQ(0, ibv_destroy_qp(qp));
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = self->cq;
	ia.qp_type = IBV_QPT_RAW_PACKET;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	EXPECT_EQ(NULL, ibv_create_qp(self->pd, &ia));
	EXPECT_EQ(self->base[1], remu_obj_count("qp"));
}

/* Every legal transition of RC with its attributes; query returns them. */
TEST_F(q, rc_state_machine)
{
	struct ibv_qp *qp = mkqp(self->pd, self->cq, self->cq, IBV_QPT_RC, 4, 4);
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr a, q;
	int mask;

	ASSERT_NE(NULL, qp);
	/* illegal transitions from RESET */
	EXPECT_EQ(EINVAL, to_state(qp, IBV_QPS_RTR));
	EXPECT_EQ(EINVAL, to_state(qp, IBV_QPS_RTS));
	/* INIT needs pkey index, port, access; an extra attribute fails */
	EXPECT_EQ(EINVAL, to_state(qp, IBV_QPS_INIT));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	a.sq_psn = 1;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS |
					IBV_QP_SQ_PSN));
	a.pkey_index = 1;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
	a.pkey_index = 0;
	a.port_num = 2;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
	a.port_num = 1;
	ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
	EXPECT_EQ(IBV_QPS_INIT, qp->state);
	/* INIT -> INIT */
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS));
	EXPECT_EQ(EINVAL, to_state(qp, IBV_QPS_RTS));

	/* INIT -> RTR: missing attribute, bad values, then right */
	mask = rtr_attr(qp, self->sgid4, &self->gid4, &a);
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, mask & ~IBV_QP_DEST_QPN));
	a.ah_attr.grh.sgid_index = 127;	/* empty GID entry: the core says ENODATA */
	EXPECT_NE(0, ibv_modify_qp(qp, &a, mask));
	a.ah_attr.grh.sgid_index = 128;	/* beyond the table */
	EXPECT_NE(0, ibv_modify_qp(qp, &a, mask));
	a.ah_attr.grh.sgid_index = self->sgid4;
	a.path_mtu = 7;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, mask));
	a.path_mtu = IBV_MTU_1024;
	a.max_dest_rd_atomic = 200;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, mask));
	a.max_dest_rd_atomic = 4;
	a.dest_qp_num = 1 << 24;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, mask));
	a.dest_qp_num = 0;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, mask));
	a.dest_qp_num = 0x77;
	ASSERT_EQ(0, ibv_modify_qp(qp, &a, mask));
	EXPECT_EQ(IBV_QPS_RTR, qp->state);

	/* RTR -> RTS: bad timeout and retry values, then right */
	mask = rts_attr(qp, &a);
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, mask & ~IBV_QP_SQ_PSN));
	a.timeout = 32;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, mask));
	a.timeout = 14;
	a.retry_cnt = 8;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, mask));
	a.retry_cnt = 7;
	ASSERT_EQ(0, ibv_modify_qp(qp, &a, mask));
	EXPECT_EQ(IBV_QPS_RTS, qp->state);

	memset(&q, 0, sizeof(q));
	ASSERT_EQ(0, ibv_query_qp(qp, &q, IBV_QP_STATE | IBV_QP_AV |
				  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_SQ_PSN |
				  IBV_QP_ACCESS_FLAGS | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_CAP, &qia));
	EXPECT_EQ(IBV_QPS_RTS, q.qp_state);
	EXPECT_EQ(IBV_MTU_1024, q.path_mtu);
	EXPECT_EQ(0x77, q.dest_qp_num);
	EXPECT_EQ(0x123, q.rq_psn);
	EXPECT_EQ(0x456, q.sq_psn);
	EXPECT_EQ(IBV_ACCESS_REMOTE_WRITE, q.qp_access_flags);
	EXPECT_EQ(14, q.timeout);
	EXPECT_EQ(7, q.retry_cnt);
	EXPECT_EQ(7, q.rnr_retry);
	EXPECT_EQ(4, q.max_rd_atomic);
	EXPECT_EQ(4, q.max_dest_rd_atomic);
	EXPECT_EQ(self->sgid4, q.ah_attr.grh.sgid_index);
	EXPECT_EQ(0, memcmp(&self->gid4, &q.ah_attr.grh.dgid, 16));
	EXPECT_LE(4, qia.cap.max_send_wr);

	/* RTS -> RTS, RTS -> SQD -> SQD -> RTS, -> ERR -> RESET -> ERR */
	a.min_rnr_timer = 3;
	EXPECT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER));
	EXPECT_EQ(0, to_state(qp, IBV_QPS_SQD));
	EXPECT_EQ(0, to_state(qp, IBV_QPS_SQD));
	EXPECT_EQ(EINVAL, to_state(qp, IBV_QPS_RTR));
	EXPECT_EQ(0, to_state(qp, IBV_QPS_RTS));
	EXPECT_EQ(0, to_state(qp, IBV_QPS_ERR));
	EXPECT_EQ(EINVAL, to_state(qp, IBV_QPS_RTS));
	EXPECT_EQ(0, to_state(qp, IBV_QPS_ERR));
	EXPECT_EQ(0, to_state(qp, IBV_QPS_RESET));
	EXPECT_EQ(0, to_state(qp, IBV_QPS_RESET));
	/* the core's table (IBA 10.3.1) has no RESET -> ERR */
	EXPECT_EQ(EINVAL, to_state(qp, IBV_QPS_ERR));
	/* INIT -> ERR */
	EXPECT_EQ(0, to_init(qp));
	EXPECT_EQ(0, to_state(qp, IBV_QPS_ERR));
	EXPECT_EQ(0, to_state(qp, IBV_QPS_RESET));
	/* and again from the start */
	EXPECT_EQ(0, to_rts(qp, self->sgid4, &self->gid4));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
}

/* UC and UD: their own required attributes. */
TEST_F(q, uc_ud_state_machine)
{
	struct ibv_qp *uc = mkqp(self->pd, self->cq, self->cq, IBV_QPT_UC, 4, 4);
	struct ibv_qp *ud = mkqp(self->pd, self->cq, self->cq, IBV_QPT_UD, 4, 4);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	ASSERT_NE(NULL, uc);
	ASSERT_NE(NULL, ud);
	/* UD needs a qkey, not access flags */
	EXPECT_EQ(EINVAL, ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
	EXPECT_EQ(0, to_rts(ud, self->sgid4, &self->gid4));
	EXPECT_EQ(0, to_rts(uc, self->sgid4, &self->gid4));
	EXPECT_EQ(0, to_state(uc, IBV_QPS_ERR));
	EXPECT_EQ(0, ibv_destroy_qp(uc));
	EXPECT_EQ(0, ibv_destroy_qp(ud));
}

/* A path MTU above the port's active MTU is refused. */
TEST_F(q, path_mtu_above_port_mtu)
{
	struct ibv_qp *qp = mkqp(self->pd, self->cq, self->cq, IBV_QPT_RC, 4, 4);
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;
	int mask;

	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_init(qp));
	ASSERT_EQ(0, remu_sh("ip link set v0 mtu 1500"));
	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &pa));
	EXPECT_EQ(IBV_MTU_1024, pa.active_mtu);
	mask = rtr_attr(qp, self->sgid4, &self->gid4, &a);
	a.path_mtu = IBV_MTU_4096;
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, mask));
	a.path_mtu = IBV_MTU_1024;
	EXPECT_EQ(0, ibv_modify_qp(qp, &a, mask));
	EXPECT_EQ(0, remu_sh("ip link set v0 mtu 9000"));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
}

/* Posting in the wrong state fails with EINVAL. */
TEST_F(q, post_wrong_state)
{
	struct ibv_qp *qp = mkqp(self->pd, self->cq, self->cq, IBV_QPT_RC, 4, 4);

	ASSERT_NE(NULL, qp);
	EXPECT_EQ(EINVAL, post_recv(qp, 1));
	EXPECT_EQ(EINVAL, post_send(qp, 1, NULL));
	ASSERT_EQ(0, to_init(qp));
	EXPECT_EQ(0, post_recv(qp, 1));
	EXPECT_EQ(EINVAL, post_send(qp, 1, NULL));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
}

/* Bad send WRs: too many SGEs, inline too large, opcode for the QP type. */
TEST_F(q, post_send_bad_wr)
{
	struct ibv_qp *qp = mkqp(self->pd, self->cq, self->cq, IBV_QPT_UC, 4, 4);
	static char big[4096];
	struct ibv_sge sge[MAX_SGE + 1] = {};
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = IBV_WR_SEND,
				  .sg_list = sge }, *bad;
	struct ibv_wc wc[4];

	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_rts(qp, self->sgid4, &self->gid4));
	wr.num_sge = MAX_SGE + 1;
	EXPECT_EQ(EINVAL, ibv_post_send(qp, &wr, &bad));
	EXPECT_EQ(&wr, bad);
	sge[0].addr = (uintptr_t)big;
	sge[0].length = sizeof(big);
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_INLINE;
	EXPECT_EQ(EINVAL, ibv_post_send(qp, &wr, &bad));
	wr.send_flags = 0;
	wr.opcode = IBV_WR_RDMA_READ;	/* not on UC */
	EXPECT_EQ(EINVAL, ibv_post_send(qp, &wr, &bad));
	wr.opcode = IBV_WR_RDMA_WRITE;
	EXPECT_EQ(0, ibv_post_send(qp, &wr, &bad));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_ERR));
	ASSERT_EQ(1, poll_n(self->cq, wc, 1));
	/*
	 * The WRITE (its SGE has no MR) is flushed if the QP reaches ERR
	 * first, or fails with a local protection error if the send engine
	 * got to it first (a slow kernel: the debug kernel of make
	 * check-debug).  Either way it completes exactly once.
	 */
	if (wc[0].status != IBV_WC_LOC_PROT_ERR) {
		EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[0].status);
		EXPECT_EQ(IBV_WC_RDMA_WRITE, wc[0].opcode);
	}
	EXPECT_EQ(1, wc[0].wr_id);
	EXPECT_EQ(0, ibv_destroy_qp(qp));
}

/* N receives and M sends, then ERR: exactly N + M flushed, in order. */
TEST_F(q, flush_on_error)
{
	struct ibv_cq *rcq = ibv_create_cq(self->ctx, 64, NULL, NULL, 0);
	struct ibv_qp *qp;
	struct ibv_wc wc[64];
	int i, n = 9, m = 7;

	ASSERT_NE(NULL, rcq);
	qp = mkqp(self->pd, self->cq, rcq, IBV_QPT_RC, 16, 16);
	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_init(qp));
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, post_recv(qp, 1000 + i));
	ASSERT_EQ(0, to_rts(qp, self->sgid4, &self->gid4));
	for (i = 0; i < m; i++)
		ASSERT_EQ(0, post_send(qp, 2000 + i, NULL));
	/* in RTS nothing completes: the WQEs wait for the requester */
	usleep(100000);
	EXPECT_EQ(0, ibv_poll_cq(self->cq, 64, wc));
	EXPECT_EQ(0, ibv_poll_cq(rcq, 64, wc));

	ASSERT_EQ(0, to_state(qp, IBV_QPS_ERR));
	ASSERT_EQ(m, poll_n(self->cq, wc, m));
	for (i = 0; i < m; i++) {
		EXPECT_EQ(2000 + i, wc[i].wr_id);
		EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[i].status);
		EXPECT_EQ(IBV_WC_SEND, wc[i].opcode);
		EXPECT_EQ(qp->qp_num, wc[i].qp_num);
	}
	ASSERT_EQ(n, poll_n(rcq, wc, n));
	for (i = 0; i < n; i++) {
		EXPECT_EQ(1000 + i, wc[i].wr_id);
		EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[i].status);
		EXPECT_EQ(IBV_WC_RECV, wc[i].opcode);
	}
	usleep(100000);
	EXPECT_EQ(0, ibv_poll_cq(self->cq, 64, wc));
	EXPECT_EQ(0, ibv_poll_cq(rcq, 64, wc));

	/* posted while in ERR: flushed too */
	ASSERT_EQ(0, post_send(qp, 3000, NULL));
	ASSERT_EQ(0, post_recv(qp, 3001));
	ASSERT_EQ(1, poll_n(self->cq, wc, 1));
	EXPECT_EQ(3000, wc[0].wr_id);
	ASSERT_EQ(1, poll_n(rcq, wc, 1));
	EXPECT_EQ(3001, wc[0].wr_id);

	/* RESET discards without completions */
	ASSERT_EQ(0, to_state(qp, IBV_QPS_RESET));
	ASSERT_EQ(0, to_init(qp));
	ASSERT_EQ(0, post_recv(qp, 4000));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_RESET));
	ASSERT_EQ(0, to_init(qp));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_ERR));
	usleep(100000);
	EXPECT_EQ(0, ibv_poll_cq(rcq, 64, wc));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_destroy_cq(rcq));
}

/* SRQ: create, arm the limit, query, post, attach, destroy. */
TEST_F(q, srq_basic)
{
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 100, .max_sge = 2 } };
	struct ibv_qp_init_attr ia = {};
	struct ibv_recv_wr wr = { .wr_id = 5 }, *bad;
	struct ibv_srq_attr sa;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	int i;

	srq = ibv_create_srq(self->pd, &sia);
	ASSERT_NE(NULL, srq);
	EXPECT_LE(100, sia.attr.max_wr);
	EXPECT_EQ(self->base[2] + 1, remu_obj_count("srq"));
	ASSERT_EQ(0, ibv_query_srq(srq, &sa));
	EXPECT_LE(100, sa.max_wr);
	EXPECT_EQ(0, sa.srq_limit);
	sa.srq_limit = 10;
	ASSERT_EQ(0, ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
	memset(&sa, 0, sizeof(sa));
	ASSERT_EQ(0, ibv_query_srq(srq, &sa));
	EXPECT_EQ(10, sa.srq_limit);
	sa.srq_limit = 100000;
	EXPECT_EQ(EINVAL, ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
	sa.max_wr = 1000;
	EXPECT_NE(0, ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR));
	for (i = 0; i < 50; i++)
		ASSERT_EQ(0, ibv_post_srq_recv(srq, &wr, &bad));
	wr.num_sge = 3;
	EXPECT_EQ(EINVAL, ibv_post_srq_recv(srq, &wr, &bad));

	ia.send_cq = ia.recv_cq = self->cq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 4;
	qp = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_init(qp));
	EXPECT_EQ(EINVAL, post_recv(qp, 1));
	EXPECT_NE(0, ibv_destroy_srq(srq));	/* in use */
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_destroy_srq(srq));

	sia.attr.max_wr = 16385;
	EXPECT_EQ(NULL, ibv_create_srq(self->pd, &sia));
	sia.attr.max_wr = 10;
	sia.attr.max_sge = 17;
	EXPECT_EQ(NULL, ibv_create_srq(self->pd, &sia));
}

/* the next async event within 1 s, for @qp only: its type, or -1 */
static int qp_async_event(struct ibv_context *ctx, struct ibv_qp *qp)
{
	struct ibv_async_event ev;
	int i;

	for (i = 0; i < 10; i++)
		if (!remu_next_async(ctx, 100, &ev) && ev.element.qp == qp)
			return ev.event_type;
	return -1;
}

/*
 * A QP on an SRQ that enters ERR raises IBV_EVENT_QP_LAST_WQE_REACHED
 * (the kernel's ib_drain_qp() waits for it), once per entry to ERR; the
 * SRQ's WQEs are not flushed by it.  A QP without an SRQ raises none.
 */
TEST_F(q, srq_last_wqe_reached)
{
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_qp_init_attr ia = {};
	struct ibv_recv_wr wr = { .wr_id = 6 }, *bad;
	struct ibv_qp *qp, *plain;
	struct ibv_srq *srq;
	struct ibv_wc wc;

	srq = ibv_create_srq(self->pd, &sia);
	ASSERT_NE(NULL, srq);
	ASSERT_EQ(0, ibv_post_srq_recv(srq, &wr, &bad));
	ia.send_cq = ia.recv_cq = self->cq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 4;
	qp = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, qp);
	ia.srq = NULL;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_recv_sge = 1;
	plain = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, plain);

	ASSERT_EQ(0, to_init(plain));
	ASSERT_EQ(0, to_state(plain, IBV_QPS_ERR));
	EXPECT_EQ(-1, qp_async_event(self->ctx, plain));

	ASSERT_EQ(0, to_init(qp));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_ERR));
	EXPECT_EQ(IBV_EVENT_QP_LAST_WQE_REACHED, qp_async_event(self->ctx, qp));
	EXPECT_EQ(-1, qp_async_event(self->ctx, qp));	/* only once */
	EXPECT_EQ(0, ibv_poll_cq(self->cq, 1, &wc));	/* SRQ WQE kept */
	/* through RESET into ERR again: raised again */
	ASSERT_EQ(0, to_state(qp, IBV_QPS_RESET));
	ASSERT_EQ(0, to_init(qp));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_ERR));
	EXPECT_EQ(IBV_EVENT_QP_LAST_WQE_REACHED, qp_async_event(self->ctx, qp));

	EXPECT_EQ(0, ibv_destroy_qp(plain));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_destroy_srq(srq));
}

/*
 * IBV_EVENT_SQ_DRAINED: RTS -> SQD with en_sqd_async_notify raises it for
 * the QP (nothing is in flight, so at once); without the flag, none.
 */
TEST_F(q, sq_drained_event)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD,
				 .en_sqd_async_notify = 1 };
	struct ibv_qp *qp;

	qp = mkqp(self->pd, self->cq, self->cq, IBV_QPT_RC, 4, 4);
	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_rts(qp, self->sgid4, &self->gid4));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_SQD));
	EXPECT_EQ(-1, qp_async_event(self->ctx, qp));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_RTS));
	ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE |
				   IBV_QP_EN_SQD_ASYNC_NOTIFY));
	EXPECT_EQ(IBV_EVENT_SQ_DRAINED, qp_async_event(self->ctx, qp));
	EXPECT_EQ(-1, qp_async_event(self->ctx, qp));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
}

/* the next async event within @ms milliseconds for @srq: its type, or -1 */
static int srq_async_event(struct ibv_context *ctx, struct ibv_srq *srq,
			   int ms)
{
	struct ibv_async_event ev;

	if (remu_next_async(ctx, ms, &ev))
		return -1;
	return ev.element.srq == srq ? (int)ev.event_type : -2;
}

/*
 * IBV_EVENT_SRQ_LIMIT_REACHED: 12 receives on an SRQ armed at 10; a QP on
 * it sending to itself takes two (10 left: no event), then a third (9
 * left: the event, for that SRQ, and the limit reads 0: disarmed); a
 * fourth raises no second one.
 */
TEST_F(q, srq_limit_event)
{
	static char rbuf[16 * 64];
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 16,
						   .max_sge = 1 } };
	struct ibv_srq_attr sa = { .srq_limit = 10 };
	struct ibv_qp_init_attr ia = {};
	struct ibv_recv_wr *bad;
	struct ibv_qp_attr qa;
	struct ibv_wc wc[2];
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	int i, mask;

	mr = ibv_reg_mr(self->pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr);
	srq = ibv_create_srq(self->pd, &sia);
	ASSERT_NE(NULL, srq);
	for (i = 0; i < 12; i++) {
		struct ibv_sge sge = { (uintptr_t)rbuf + 64 * i, 64, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge,
					  .num_sge = 1 };

		ASSERT_EQ(0, ibv_post_srq_recv(srq, &wr, &bad));
	}
	ASSERT_EQ(0, ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
	ia.send_cq = ia.recv_cq = self->cq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_inline_data = 16;
	qp = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, qp);
	/* it sends to itself: its RQ PSN must be its SQ PSN */
	ASSERT_EQ(0, to_init(qp));
	mask = rtr_attr(qp, self->sgid4, &self->gid4, &qa);
	qa.rq_psn = 0x456;
	ASSERT_EQ(0, ibv_modify_qp(qp, &qa, mask));
	mask = rts_attr(qp, &qa);
	ASSERT_EQ(0x456, qa.sq_psn);
	ASSERT_EQ(0, ibv_modify_qp(qp, &qa, mask));

	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, post_send(qp, i, NULL));
		ASSERT_EQ(2, poll_n(self->cq, wc, 2));
		EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
		EXPECT_EQ(IBV_WC_SUCCESS, wc[1].status);
		if (i == 2) {
			EXPECT_EQ(IBV_EVENT_SRQ_LIMIT_REACHED,
				  srq_async_event(self->ctx, srq, 3000));
			ASSERT_EQ(0, ibv_query_srq(srq, &sa));
			EXPECT_EQ(0, sa.srq_limit);
		} else {
			EXPECT_EQ(-1, srq_async_event(self->ctx, srq, 200))
				TH_LOG("after SEND %d", i);
		}
	}
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_destroy_srq(srq));
	EXPECT_EQ(0, ibv_dereg_mr(mr));
}

/* AHs with IPv4-mapped and IPv6 GIDs; bad sgid index; UD post with AH. */
TEST_F(q, ah_create)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_qp *qp;
	struct ibv_ah *ah4, *ah6;
	union ibv_gid gid6;
	struct ibv_wc wc[2];
	int i, sgid6 = -1;

	/*
	 * IPv6 addresses of our own on both ends (link tests may have
	 * flushed v0's); the core resolves the peer's MAC for a user AH.
	 */
	ASSERT_EQ(0, remu_sh("ip addr add fd77:9::1/64 dev v0 nodad && "
			     "ip -n peer addr add fd77:9::2/64 dev v1 nodad"));
	for (i = 0; i < 30 && sgid6 < 0; i++) {
		sgid6 = remu_roce_gid(self->ctx, 0, &gid6);
		if (sgid6 < 0)
			usleep(100000);
	}
	ASSERT_LE(0, sgid6);
	aa.grh.sgid_index = self->sgid4;
	aa.grh.hop_limit = 64;
	inet_pton(AF_INET6, "::ffff:10.77.0.2", aa.grh.dgid.raw);
	ah4 = ibv_create_ah(self->pd, &aa);
	ASSERT_NE(NULL, ah4);
	aa.grh.sgid_index = sgid6;
	inet_pton(AF_INET6, "fd77:9::2", aa.grh.dgid.raw);
	ah6 = ibv_create_ah(self->pd, &aa);
	ASSERT_NE(NULL, ah6) TH_LOG("sgid %d: %s", sgid6, strerror(errno));
	EXPECT_EQ(self->base[3] + 2, remu_obj_count("ah"));
	aa.grh.sgid_index = 127;
	EXPECT_EQ(NULL, ibv_create_ah(self->pd, &aa));
	/* IPv6 source, IPv4 destination */
	aa.grh.sgid_index = sgid6;
	inet_pton(AF_INET6, "::ffff:10.77.0.2", aa.grh.dgid.raw);
	EXPECT_EQ(NULL, ibv_create_ah(self->pd, &aa));

	qp = mkqp(self->pd, self->cq, self->cq, IBV_QPT_UD, 4, 4);
	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, to_rts(qp, self->sgid4, &self->gid4));
	EXPECT_EQ(0, post_send(qp, 11, ah4));
	EXPECT_EQ(0, post_send(qp, 12, ah6));
	ASSERT_EQ(0, to_state(qp, IBV_QPS_ERR));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	EXPECT_EQ(11, wc[0].wr_id);
	EXPECT_EQ(12, wc[1].wr_id);
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_destroy_ah(ah4));
	EXPECT_EQ(0, ibv_destroy_ah(ah6));
	EXPECT_EQ(0, remu_sh("ip addr del fd77:9::1/64 dev v0 && "
			     "ip -n peer addr del fd77:9::2/64 dev v1"));
}

/* A process that dies holding every kind of queue object leaves none. */
TEST_F(q, cleanup_on_process_exit)
{
	int before[NCOUNTED], after[NCOUNTED], status;
	unsigned int i;
	pid_t pid;

	counts_now(before);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ibv_context *c = remu_open(DEV);
		struct ibv_srq_init_attr sia = { .attr = { .max_wr = 8 } };
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
		struct ibv_pd *pd;
		struct ibv_cq *cq;
		struct ibv_qp *qp;
		int k;

		if (!c)
			_exit(1);
		pd = ibv_alloc_pd(c);
		cq = ibv_create_cq(c, 64, NULL, NULL, 0);
		if (!pd || !cq)
			_exit(2);
		for (k = 0; k < 4; k++) {
			qp = mkqp(pd, cq, cq, k & 1 ? IBV_QPT_UD : IBV_QPT_RC,
				  8, 8);
			if (!qp || to_init(qp) || post_recv(qp, k))
				_exit(3);
		}
		if (!ibv_create_srq(pd, &sia))
			_exit(4);
		aa.grh.sgid_index = self->sgid4;
		aa.grh.dgid = self->gid4;
		if (!ibv_create_ah(pd, &aa))
			_exit(5);
		_exit(remu_obj_count("qp") == before[1] + 4 ? 0 : 6);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
	counts_now(after);
	for (i = 0; i < NCOUNTED; i++)
		EXPECT_EQ(before[i], after[i]) TH_LOG("object type %u (cq qp srq ah ring)", i);
}

/*
 * The fast path, counted with ptrace (remu_count_syscalls()): the child
 * brackets each measured window with remu_mark() calls.
 */
#define WINDOWS 5
#define BURST 1000

static int fast_path_child(void)
{
	struct ibv_context *c = remu_open(DEV);
	struct ibv_wc wc[64];
	struct ibv_send_wr swr[16], *bad;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	long spin;
	int i, got, bad_ids = 0;

	if (!c)
		return 1;
	pd = ibv_alloc_pd(c);
	cq = ibv_create_cq(c, 4096, NULL, NULL, 0);
	if (!pd || !cq)
		return 2;
	qp = mkqp(pd, cq, cq, IBV_QPT_RC, 2048, BURST);
	if (!qp || to_init(qp))
		return 3;
	memset(swr, 0, sizeof(swr));
	for (i = 0; i < 16; i++) {
		swr[i].wr_id = 5000 + i;
		swr[i].opcode = IBV_WR_SEND;
		swr[i].next = i < 15 ? &swr[i + 1] : NULL;
	}

	remu_mark();			/* window 0: 1000 post_recv */
	for (i = 0; i < BURST; i++)
		if (post_recv(qp, i))
			return 4;
	remu_mark();

	if (to_state(qp, IBV_QPS_ERR))	/* flushes the 1000, synchronously */
		return 5;

	remu_mark();			/* window 1: poll the 1000 */
	for (got = 0; got < BURST;) {
		int n = ibv_poll_cq(cq, 64, wc);

		if (n <= 0)
			break;
		for (i = 0; i < n; i++)
			bad_ids += wc[i].wr_id != (uint64_t)(got + i) ||
				   wc[i].status != IBV_WC_WR_FLUSH_ERR;
		got += n;
	}
	remu_mark();
	if (got != BURST || bad_ids)
		return 6;

	remu_mark();			/* window 2: a list of 16 sends, one doorbell */
	if (ibv_post_send(qp, swr, &bad))
		return 7;
	remu_mark();

	remu_mark();			/* window 3: spin-poll their flush */
	for (got = 0, spin = 0; got < 16 && spin < 400000000L; spin++) {
		int n = ibv_poll_cq(cq, 16 - got, wc + got);

		if (n < 0)
			break;
		got += n;
	}
	remu_mark();
	if (got != 16)
		return 8;
	for (i = 0; i < 16; i++)
		if (wc[i].wr_id != (uint64_t)(5000 + i))
			return 9;

	remu_mark();			/* window 4: 1000 single sends */
	for (i = 0; i < BURST; i++) {
		swr[15].wr_id = i;
		if (ibv_post_send(qp, &swr[15], &bad))
			return 10;
		if (!(i % 512))	/* keep the CQ from overflowing */
			while (ibv_poll_cq(cq, 64, wc) > 0)
				;
	}
	remu_mark();
	return 0;
}

TEST(fast_path_syscalls)
{
	long calls[WINDOWS] = {}, writes[WINDOWS] = {};
	int status;

	ASSERT_EQ(WINDOWS, remu_count_syscalls(fast_path_child, WINDOWS, calls,
					       writes, &status))
		TH_LOG("child wait status %#x", status);
	EXPECT_EQ(0, calls[0]) TH_LOG("%d post_recv", BURST);
	EXPECT_EQ(0, calls[1]) TH_LOG("polling %d completions", BURST);
	EXPECT_EQ(1, calls[2]) TH_LOG("post_send of 16 WRs");
	EXPECT_EQ(1, writes[2]);
	EXPECT_EQ(0, calls[3]) TH_LOG("spin-polling");
	EXPECT_EQ(BURST, calls[4]) TH_LOG("%d post_send", BURST);
	EXPECT_EQ(BURST, writes[4]);
}

TEST_HARNESS_MAIN
