// SPDX-License-Identifier: GPL-2.0
/*
 * remu_datapath_test - the data path byte for byte: one process opens
 * two remu devices (remu0 and remu1 across the veth, or remu0 twice for
 * loopback), connects an RC QP on each without any TCP exchange, and
 * moves patterned data with SEND/RECV, RDMA WRITE and RDMA READ using
 * three SGEs on each side at unaligned addresses, for lengths that are
 * not multiples of the MTU (1, 4095, 4097, 65537, 1 MiB), comparing every
 * byte and the completions' byte_len.
 */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "kselftest_harness.h"
#include "remu_test.h"

#define BUF_SIZE	((1 << 20) + 8192)
#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static int side_open(struct side *s, const char *dev)
{
	struct ibv_qp_init_attr ia = {};
	struct ibv_port_attr pa;

	s->ctx = remu_open(dev);
	if (!s->ctx)
		return -1;
	if (ibv_query_port(s->ctx, 1, &pa) ||
	    ibv_query_gid(s->ctx, 1, GID_INDEX, &s->gid))
		return -1;
	s->mtu = pa.active_mtu;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq || !s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 4;
	s->qp = s->mr ? ibv_create_qp(s->pd, &ia) : NULL;
	return s->qp ? 0 : -1;
}

static int side_connect(struct side *s, struct side *peer)
{
	struct ibv_qp_attr a = {};

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = s->mtu < peer->mtu ? s->mtu : peer->mtu;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = 0x123;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x123;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void side_close(struct side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
}

/* wait for one completion; returns its status or -1 on timeout */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return wc->status;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			return -1;
	}
}

/*
 * Three SGEs covering @len bytes of @s->buf at unaligned offsets with
 * gaps between them; @split picks one of two different layouts.  The
 * bytes are described in @off[i]/@sl[i] for checking.
 */
static void make_sges(struct side *s, uint32_t len, int split,
		      struct ibv_sge *sge)
{
	uint32_t l0 = split ? len / 2 : len / 3;
	uint32_t l1 = split ? len / 4 : len / 3;
	uint32_t l2 = len - l0 - l1;
	uint64_t base = (uintptr_t)s->buf + (split ? 3 : 1);

	sge[0] = (struct ibv_sge){ base, l0, s->mr->lkey };
	sge[1] = (struct ibv_sge){ base + l0 + 13, l1, s->mr->lkey };
	sge[2] = (struct ibv_sge){ base + l0 + l1 + 13 + 5, l2, s->mr->lkey };
}

static void fill_sges(const struct ibv_sge *sge, uint32_t seed)
{
	uint32_t k = 0;
	int i;

	for (i = 0; i < 3; i++)
		for (uint32_t j = 0; j < sge[i].length; j++, k++)
			((uint8_t *)(uintptr_t)sge[i].addr)[j] =
				(uint8_t)(k * 31 + seed + (k >> 8));
}

/* byte-for-byte: the SGE list @b holds what @a holds */
static long cmp_sges(const struct ibv_sge *a, const struct ibv_sge *b)
{
	uint32_t ai = 0, bi = 0, ao = 0, bo = 0;
	long pos = 0;

	while (ai < 3 && bi < 3) {
		if (ao == a[ai].length) { ai++; ao = 0; continue; }
		if (bo == b[bi].length) { bi++; bo = 0; continue; }
		if (((uint8_t *)(uintptr_t)a[ai].addr)[ao] !=
		    ((uint8_t *)(uintptr_t)b[bi].addr)[bo])
			return pos;
		ao++; bo++; pos++;
	}
	return -1;
}

static const uint32_t lens[] = { 1, 4095, 4097, 65537, 1 << 20 };

FIXTURE(dp) {
	struct side a, b;
};

FIXTURE_VARIANT(dp) {
	const char *dev_a, *dev_b;
};

FIXTURE_VARIANT_ADD(dp, remu0_remu1) { .dev_a = "remu0", .dev_b = "remu1" };
FIXTURE_VARIANT_ADD(dp, loopback) { .dev_a = "remu0", .dev_b = "remu0" };

FIXTURE_SETUP(dp)
{
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	ASSERT_EQ(0, side_open(&self->a, variant->dev_a));
	ASSERT_EQ(0, side_open(&self->b, variant->dev_b));
	ASSERT_EQ(0, side_connect(&self->a, &self->b));
	ASSERT_EQ(0, side_connect(&self->b, &self->a));
}

FIXTURE_TEARDOWN(dp)
{
	side_close(&self->a);
	side_close(&self->b);
}

TEST_F(dp, send_recv)
{
	struct ibv_sge ss[3], rs[3];
	struct ibv_wc wc;
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct ibv_recv_wr rwr = { .wr_id = 100 + i, .sg_list = rs,
					   .num_sge = 3 }, *bad_r;
		struct ibv_send_wr swr = { .wr_id = 200 + i, .sg_list = ss,
					   .num_sge = 3, .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED },
				   *bad_s;

		make_sges(&self->a, lens[i], 0, ss);
		make_sges(&self->b, lens[i], 1, rs);
		fill_sges(ss, i);
		memset(self->b.buf, 0xee, BUF_SIZE);
		ASSERT_EQ(0, ibv_post_recv(self->b.qp, &rwr, &bad_r));
		ASSERT_EQ(0, ibv_post_send(self->a.qp, &swr, &bad_s));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(200 + i, wc.wr_id);
		EXPECT_EQ(IBV_WC_SEND, wc.opcode);
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(100 + i, wc.wr_id);
		EXPECT_EQ(IBV_WC_RECV, wc.opcode);
		EXPECT_EQ(lens[i], wc.byte_len);
		EXPECT_EQ(-1, cmp_sges(ss, rs)) TH_LOG("len %u", lens[i]);
	}
}

TEST_F(dp, rdma_write)
{
	struct ibv_sge ss[3], rs[3];
	struct ibv_wc wc;
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct ibv_send_wr swr = { .wr_id = 300 + i, .sg_list = ss,
					   .num_sge = 3,
					   .opcode = IBV_WR_RDMA_WRITE,
					   .send_flags = IBV_SEND_SIGNALED },
				   *bad_s;

		make_sges(&self->a, lens[i], 0, ss);
		fill_sges(ss, 7 + i);
		memset(self->b.buf, 0xee, BUF_SIZE);
		/* the target: one contiguous range at an odd address */
		rs[0] = (struct ibv_sge){ (uintptr_t)self->b.buf + 5, lens[i], 0 };
		rs[1] = (struct ibv_sge){ 0, 0, 0 };
		rs[2] = (struct ibv_sge){ 0, 0, 0 };
		swr.wr.rdma.remote_addr = rs[0].addr;
		swr.wr.rdma.rkey = self->b.mr->rkey;
		ASSERT_EQ(0, ibv_post_send(self->a.qp, &swr, &bad_s));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(IBV_WC_RDMA_WRITE, wc.opcode);
		EXPECT_EQ(-1, cmp_sges(ss, rs)) TH_LOG("len %u", lens[i]);
		EXPECT_EQ(0xee, self->b.buf[4]);
		EXPECT_EQ(0xee, self->b.buf[5 + lens[i]]);
	}
}

TEST_F(dp, rdma_read)
{
	struct ibv_sge ls[3], rs[3];
	struct ibv_wc wc;
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct ibv_send_wr swr = { .wr_id = 400 + i, .sg_list = ls,
					   .num_sge = 3,
					   .opcode = IBV_WR_RDMA_READ,
					   .send_flags = IBV_SEND_SIGNALED },
				   *bad_s;

		memset(self->a.buf, 0xee, BUF_SIZE);
		make_sges(&self->a, lens[i], 1, ls);
		rs[0] = (struct ibv_sge){ (uintptr_t)self->b.buf + 9, lens[i], 0 };
		rs[1] = (struct ibv_sge){ 0, 0, 0 };
		rs[2] = (struct ibv_sge){ 0, 0, 0 };
		fill_sges(rs, 11 + i);
		swr.wr.rdma.remote_addr = rs[0].addr;
		swr.wr.rdma.rkey = self->b.mr->rkey;
		ASSERT_EQ(0, ibv_post_send(self->a.qp, &swr, &bad_s));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(IBV_WC_RDMA_READ, wc.opcode);
		EXPECT_EQ(-1, cmp_sges(rs, ls)) TH_LOG("len %u", lens[i]);
	}
}

TEST_HARNESS_MAIN
