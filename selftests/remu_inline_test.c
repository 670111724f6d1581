// SPDX-License-Identifier: GPL-2.0
/*
 * remu_inline_test - inline receive (scatter to CQE), remu0 -> remu1,
 * byte for byte, with the switch on (default) and off
 * (REMU_SCATTER_TO_CQE=0 when the receiver's CQ is created).
 *
 * Fixture inl, variants rc/srq/ud x on/off: the receiver (remu1) has an
 * RC QP, an RC QP on an SRQ, or a UD QP.  sizes: SENDs of 0, 1,
 * threshold - 1, threshold, threshold + 1 and 4096 bytes, where the
 * threshold is 64 bytes of receive buffer (REMU_CQE_INLINE_MAX), the UD
 * GRH area's 40 bytes included (so 24 bytes of UD payload); each into a
 * buffer with guard bytes around it, compared byte for byte, byte_len
 * checked; the port counter inline_recvs moves by exactly one for every
 * message that fits when the switch is on and never otherwise (the proof
 * that the data went through the CQE; a 0-byte UD SEND still carries the
 * 40-byte GRH area and goes inline).  multi_sge: 20 bytes over SGEs of 10
 * (+ GRH), 20 and 100 bytes with gaps; more SGEs than a CQE carries (60
 * bytes over 10 SGEs of 6) takes the normal path, same bytes.  imm:
 * SEND_WITH_IMM keeps its immediate data and flag.  errors (UD, where a
 * local error completes the receive and the QP goes on): a bad lkey and
 * an MR without LOCAL_WRITE give LOC_PROT_ERR, a buffer too short gives
 * LOC_LEN_ERR, and nothing is written: the kernel checks the WQE before
 * choosing the inline path.  odp: receive buffers in never touched pages
 * of an explicit and of an implicit ODP MR go inline too.  dm: a receive into device memory takes the
 * normal path (counter unchanged) and lands in the DM.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define GID_INDEX	1
#define BUF_LEN		8192
#define INLINE_MAX	64	/* REMU_CQE_INLINE_MAX */
#define GRH_LEN		40
#define QKEY		0x11223344
#define GUARD		0xee

enum { X_RC, X_SRQ, X_UD };

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static long long inline_recvs(void)
{
	return remu_hw_counter("remu1", "inline_recvs", true);
}

static int side_open(struct side *s, const char *dev, int xport)
{
	struct ibv_qp_init_attr ia = {};
	struct ibv_srq_init_attr sa = {};

	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = aligned_alloc(4096, BUF_LEN);
	if (!s->cq || !s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr)
		return -1;
	if (xport == X_SRQ) {
		sa.attr.max_wr = 16;
		sa.attr.max_sge = 16;
		s->srq = ibv_create_srq(s->pd, &sa);
		if (!s->srq)
			return -1;
	}
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.srq = s->srq;
	ia.qp_type = xport == X_UD ? IBV_QPT_UD : IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 16;
	s->qp = ibv_create_qp(s->pd, &ia);
	return s->qp ? 0 : -1;
}

static void side_close(struct side *s)
{
	remu_close_objs(s->qp, s->srq, s->mr, s->cq, s->pd, s->ctx);
	free(s->buf);
}

/* RC: no remote rights, no RDMA READ/atomic resources */
static int qp_ready(struct side *s, struct side *peer, int xport)
{
	static const struct remu_conn_attr ra = {
		.psn = 0x42, .min_rnr_timer = 1, .timeout = 14,
		.retry_cnt = 7, .rnr_retry = 7,
	};
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };

	if (xport == X_UD)
		return remu_ud_ready(s->qp, QKEY, 0x42);
	return remu_qp_connect(s->qp, &ra, GID_INDEX, &d);
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return remu_poll_one(cq, wc, 20);
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 37 + seed + 1);
}

FIXTURE(inl) {
	struct side s, r;	/* sender remu0, receiver remu1 */
	struct ibv_ah *ah;
	int grh;		/* bytes of GRH area before the data (UD) */
};

FIXTURE_VARIANT(inl) {
	int xport;
	int on;
};

FIXTURE_VARIANT_ADD(inl, rc_on) { .xport = X_RC, .on = 1 };
FIXTURE_VARIANT_ADD(inl, rc_off) { .xport = X_RC, .on = 0 };
FIXTURE_VARIANT_ADD(inl, srq_on) { .xport = X_SRQ, .on = 1 };
FIXTURE_VARIANT_ADD(inl, srq_off) { .xport = X_SRQ, .on = 0 };
FIXTURE_VARIANT_ADD(inl, ud_on) { .xport = X_UD, .on = 1 };
FIXTURE_VARIANT_ADD(inl, ud_off) { .xport = X_UD, .on = 0 };

FIXTURE_SETUP(inl)
{
	struct ibv_ah_attr ah;

	memset(&self->s, 0, sizeof(self->s));
	memset(&self->r, 0, sizeof(self->r));
	self->ah = NULL;
	self->grh = variant->xport == X_UD ? GRH_LEN : 0;
	ASSERT_EQ(0, side_open(&self->s, "remu0", variant->xport));
	/* the switch is read when the receiver's CQ is created */
	if (variant->on) {
		ASSERT_EQ(0, unsetenv("REMU_SCATTER_TO_CQE"));
	} else {
		ASSERT_EQ(0, setenv("REMU_SCATTER_TO_CQE", "0", 1));
	}
	ASSERT_EQ(0, side_open(&self->r, "remu1", variant->xport));
	unsetenv("REMU_SCATTER_TO_CQE");
	ASSERT_EQ(0, qp_ready(&self->s, &self->r, variant->xport));
	ASSERT_EQ(0, qp_ready(&self->r, &self->s, variant->xport));
	if (variant->xport == X_UD) {
		remu_set_av(&ah, &self->r.gid, GID_INDEX, 0);
		self->ah = ibv_create_ah(self->s.pd, &ah);
		ASSERT_NE(NULL, self->ah);
	}
}

FIXTURE_TEARDOWN(inl)
{
	if (self->ah)
		ibv_destroy_ah(self->ah);
	side_close(&self->s);
	side_close(&self->r);
}

static int post_recv(FIXTURE_DATA(inl) *self, struct ibv_sge *sg, int n)
{
	struct ibv_recv_wr wr = { .wr_id = 0x77, .sg_list = sg, .num_sge = n };
	struct ibv_recv_wr *bad;

	if (self->r.srq)
		return ibv_post_srq_recv(self->r.srq, &wr, &bad);
	return ibv_post_recv(self->r.qp, &wr, &bad);
}

/*
 * the sender SENDs @len bytes at s.buf (with @imm unless 0); returns the
 * receive completion's status, with *@wc
 */
static int send_msg(FIXTURE_DATA(inl) *self, uint32_t len, uint32_t imm,
		    struct ibv_wc *wc)
{
	struct ibv_sge sg = { (uintptr_t)self->s.buf, len, self->s.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1,
				  .opcode = imm ? IBV_WR_SEND_WITH_IMM :
						  IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc swc;

	wr.imm_data = htobe32(imm);
	if (self->ah) {
		wr.wr.ud.ah = self->ah;
		wr.wr.ud.remote_qpn = self->r.qp->qp_num;
		wr.wr.ud.remote_qkey = QKEY;
	}
	if (ibv_post_send(self->s.qp, &wr, &bad))
		return -1;
	if (poll_one(self->s.cq, &swc) != IBV_WC_SUCCESS)
		return -1;
	return poll_one(self->r.cq, wc);
}

/*
 * does a message of @len payload bytes go through the CQE?  What counts
 * is what the receive buffer gets: the UD GRH area included, so a 0-byte
 * UD SEND (40 bytes of GRH) goes inline too.
 */
static int expect_inline(FIXTURE_DATA(inl) *self, int on, uint32_t len)
{
	uint32_t total = self->grh + len;

	return on && total && total <= INLINE_MAX;
}

/* one message of @len bytes into one SGE, guards around it */
static void one_size(struct __test_metadata *_metadata,
		     FIXTURE_DATA(inl) *self, int on, uint32_t len)
{
	uint8_t *rb = self->r.buf + 100;	/* unaligned on purpose */
	uint32_t room = self->grh + len;
	struct ibv_sge sg = { (uintptr_t)rb, room, self->r.mr->lkey };
	long long before = inline_recvs();
	struct ibv_wc wc;

	memset(self->r.buf, GUARD, BUF_LEN);
	fill(self->s.buf, len, len);
	ASSERT_EQ(0, post_recv(self, &sg, 1));
	ASSERT_EQ(IBV_WC_SUCCESS, send_msg(self, len, 0, &wc));
	EXPECT_EQ(0x77, wc.wr_id);
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_EQ(room, wc.byte_len);
	EXPECT_EQ(0, memcmp(rb + self->grh, self->s.buf, len))
		TH_LOG("%u bytes differ", len);
	EXPECT_EQ(GUARD, rb[-1]);
	EXPECT_EQ(GUARD, rb[room]);
	if (self->grh) {	/* IPv4 GRH area: version/IHL at byte 20 */
		EXPECT_EQ(0x45, rb[20]);
	}
	EXPECT_EQ(before + expect_inline(self, on, len), inline_recvs())
		TH_LOG("%u bytes, switch %s", len, on ? "on" : "off");
}

TEST_F(inl, sizes)
{
	uint32_t t = INLINE_MAX - self->grh;
	uint32_t lens[] = { 0, 1, t - 1, t, t + 1, 4096 - self->grh };
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		one_size(_metadata, self, variant->on, lens[i]);
}

TEST_F(inl, multi_sge)
{
	uint8_t *b = self->r.buf;
	uint32_t k = self->r.mr->lkey, len = 20, off, i;
	uint8_t lin[60];
	struct ibv_sge sg[10] = {
		{ (uintptr_t)b + 1000, 10 + self->grh, k },
		{ (uintptr_t)b + 2000, 20, k },
		{ (uintptr_t)b + 3000, 100, k },
	};
	long long before = inline_recvs();
	struct ibv_wc wc;

	memset(b, GUARD, BUF_LEN);
	fill(self->s.buf, len, 3);
	ASSERT_EQ(0, post_recv(self, sg, 3));
	ASSERT_EQ(IBV_WC_SUCCESS, send_msg(self, len, 0, &wc));
	EXPECT_EQ(self->grh + len, wc.byte_len);
	/* 10 bytes in the first, 10 in the second SGE, the third untouched */
	EXPECT_EQ(0, memcmp(b + 1000 + self->grh, self->s.buf, 10));
	EXPECT_EQ(0, memcmp(b + 2000, self->s.buf + 10, 10));
	EXPECT_EQ(GUARD, b[2010]);
	EXPECT_EQ(GUARD, b[3000]);
	EXPECT_EQ(GUARD, b[999]);
	EXPECT_EQ(before + expect_inline(self, variant->on, len),
		  inline_recvs());

	/*
	 * ten SGEs of 6 bytes, all reached: more than a CQE carries, so the
	 * normal path, same bytes (the GRH area too is scattered over them)
	 */
	len = 60 - self->grh;
	memset(b, GUARD, BUF_LEN);
	fill(self->s.buf, len, 4);
	for (i = 0; i < 10; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)b + 200 * i, 6, k };
	before = inline_recvs();
	ASSERT_EQ(0, post_recv(self, sg, 10));
	ASSERT_EQ(IBV_WC_SUCCESS, send_msg(self, len, 0, &wc));
	EXPECT_EQ(60, wc.byte_len);
	for (off = 0, i = 0; i < 10; i++) {
		memcpy(lin + off, b + 200 * i, 6);
		EXPECT_EQ(GUARD, b[200 * i + 6]);
		off += 6;
	}
	EXPECT_EQ(0, memcmp(lin + self->grh, self->s.buf, len));
	EXPECT_EQ(before, inline_recvs());
}

TEST_F(inl, imm)
{
	uint8_t *rb = self->r.buf + 8;
	uint32_t len = 16;
	struct ibv_sge sg = { (uintptr_t)rb, 64, self->r.mr->lkey };
	long long before = inline_recvs();
	struct ibv_wc wc;

	memset(self->r.buf, GUARD, BUF_LEN);
	fill(self->s.buf, len, 5);
	ASSERT_EQ(0, post_recv(self, &sg, 1));
	ASSERT_EQ(IBV_WC_SUCCESS, send_msg(self, len, 0xabcd1234, &wc));
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
	EXPECT_EQ(0xabcd1234, be32toh(wc.imm_data));
	EXPECT_EQ(self->grh + len, wc.byte_len);
	EXPECT_EQ(0, memcmp(rb + self->grh, self->s.buf, len));
	EXPECT_EQ(GUARD, rb[self->grh + len]);
	EXPECT_EQ(before + expect_inline(self, variant->on, len),
		  inline_recvs());
}

/* UD only: a local error completes the receive and the QP goes on */
TEST_F(inl, errors)
{
	uint8_t *rb = self->r.buf + 64;
	struct ibv_sge sg = { (uintptr_t)rb, 64, self->r.mr->lkey ^ 0x80 };
	long long before = inline_recvs();
	struct ibv_mr *ro;
	struct ibv_wc wc;

	if (!self->grh)
		SKIP(return, "errors are checked on UD (the QP goes on)");
	memset(self->r.buf, GUARD, BUF_LEN);
	fill(self->s.buf, 16, 6);
	/* bad lkey */
	ASSERT_EQ(0, post_recv(self, &sg, 1));
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR, send_msg(self, 16, 0, &wc));
	/* buffer shorter than GRH + data */
	sg.lkey = self->r.mr->lkey;
	sg.length = GRH_LEN + 8;
	ASSERT_EQ(0, post_recv(self, &sg, 1));
	EXPECT_EQ(IBV_WC_LOC_LEN_ERR, send_msg(self, 16, 0, &wc));
	/* an MR without LOCAL_WRITE */
	ro = ibv_reg_mr(self->r.pd, self->r.buf, BUF_LEN, 0);
	ASSERT_NE(NULL, ro);
	sg.lkey = ro->lkey;
	sg.length = 64;
	ASSERT_EQ(0, post_recv(self, &sg, 1));
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR, send_msg(self, 16, 0, &wc));
	EXPECT_EQ(0, ibv_dereg_mr(ro));
	/* nothing went inline, nothing was written past the GRH area */
	EXPECT_EQ(before, inline_recvs());
	EXPECT_EQ(GUARD, rb[GRH_LEN + 8]);
	/* and the QP still delivers */
	one_size(_metadata, self, variant->on, 16);
}

/* receive buffers in ODP MRs (explicit and implicit) qualify too */
TEST_F(inl, odp)
{
	size_t maplen = 1 << 16;
	uint8_t *m = mmap(NULL, maplen, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND;
	uint32_t len = 24, room = self->grh + len;
	struct ibv_mr *mr[2];
	long long before;
	struct ibv_sge sg;
	struct ibv_wc wc;
	int i;

	ASSERT_NE(MAP_FAILED, m);
	mr[0] = ibv_reg_mr(self->r.pd, m, maplen, access);
	ASSERT_NE(NULL, mr[0]);
	mr[1] = ibv_reg_mr(self->r.pd, NULL, SIZE_MAX, access);
	ASSERT_NE(NULL, mr[1]);
	for (i = 0; i < 2; i++) {
		/* a page never touched before: nothing resident */
		uint8_t *rb = m + 4096 * (1 + 2 * i) + 5;

		sg = (struct ibv_sge){ (uintptr_t)rb, room, mr[i]->lkey };
		fill(self->s.buf, len, 8 + i);
		before = inline_recvs();
		ASSERT_EQ(0, post_recv(self, &sg, 1));
		ASSERT_EQ(IBV_WC_SUCCESS, send_msg(self, len, 0, &wc));
		EXPECT_EQ(room, wc.byte_len);
		EXPECT_EQ(0, memcmp(rb + self->grh, self->s.buf, len));
		EXPECT_EQ(0, rb[room]);
		EXPECT_EQ(before + expect_inline(self, variant->on, len),
			  inline_recvs());
	}
	EXPECT_EQ(0, ibv_dereg_mr(mr[1]));
	EXPECT_EQ(0, ibv_dereg_mr(mr[0]));
	munmap(m, maplen);
}

/* device memory as the receive buffer: the normal path */
TEST_F(inl, dm)
{
	struct ibv_alloc_dm_attr da = { .length = 4096 };
	uint32_t len = 20, room = self->grh + len;
	uint8_t out[128];
	long long before;
	struct ibv_dm *dm;
	struct ibv_mr *mr;
	struct ibv_sge sg;
	struct ibv_wc wc;

	dm = ibv_alloc_dm(self->r.ctx, &da);
	ASSERT_NE(NULL, dm);
	mr = ibv_reg_dm_mr(self->r.pd, dm, 0, 4096, IBV_ACCESS_ZERO_BASED |
			   IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr);
	memset(out, GUARD, sizeof(out));
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, out, sizeof(out)));
	sg = (struct ibv_sge){ 8, room, mr->lkey };
	fill(self->s.buf, len, 7);
	before = inline_recvs();
	ASSERT_EQ(0, post_recv(self, &sg, 1));
	ASSERT_EQ(IBV_WC_SUCCESS, send_msg(self, len, 0, &wc));
	EXPECT_EQ(room, wc.byte_len);
	ASSERT_EQ(0, ibv_memcpy_from_dm(out, dm, 0, sizeof(out)));
	EXPECT_EQ(0, memcmp(out + 8 + self->grh, self->s.buf, len));
	EXPECT_EQ(GUARD, out[7]);
	EXPECT_EQ(GUARD, out[8 + room]);
	EXPECT_EQ(before, inline_recvs());
	EXPECT_EQ(0, ibv_dereg_mr(mr));
	EXPECT_EQ(0, ibv_free_dm(dm));
}

TEST_HARNESS_MAIN
