// SPDX-License-Identifier: GPL-2.0
/*
 * remu_mw_test - memory windows end to end, remu0 (side a, the remote
 * peer) against windows on remu1 (side b, the owner), data compared byte
 * for byte.  One process holds both sides, each with a PD, a CQ and two
 * RC QPs connected pairwise (qp to qp, qp2 to qp2) with no TCP exchange.
 *
 * Side b registers its buffer with LOCAL_WRITE | MW_BIND and no remote
 * right, so the MR's own rkey is refused and every remote access in these
 * tests is granted by a window.  Cases: device attributes and object
 * counts; type 1 bind (ibv_bind_mw), rebind (the tag bumps, the old rkey
 * fails), zero-length bind (unbinds); type 2B bind (IBV_WR_BIND_MW),
 * LOCAL_INV, SEND_WITH_INV (refused when it arrives on another QP than
 * the window's, which stays bound), a second bind of a bound window refused, a
 * zero-length type 2B bind refused; LOCAL_INV and SEND_WITH_INV refused
 * for a type 1 window; windows narrower than the MR in range (every edge)
 * and rights (READ, WRITE, ATOMIC each alone); binds refused with
 * IBV_WC_MW_BIND_ERR (QP to ERR) on an MR without MW_BIND, remote write on
 * an MR without local write, another PD's MR, another PD's window, a range
 * outside the MR, a key of another window; deregistration of an MR with a
 * bound window (EBUSY until unbound), and closing the device with windows
 * bound (the core cleans up, every count returns); windows over an
 * explicit and over the implicit ODP MR; and a peer looping WRITE/READ while another thread
 * rebinds and unbinds the window: every access either succeeds on the
 * window's memory or fails with REM_ACCESS_ERR, nothing outside the window
 * is ever written; the same with another thread invalidating a type 2B
 * window (LOCAL_INV) under the peer's accesses.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define BUF_SIZE	(1 << 20)
#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define WIN_OFF		(4096 + 7)	/* unaligned window start in b's buffer */
#define WIN_LEN		65537		/* several MTU-sized packets */
#define GUARD		0xa5
#define RIGHTS		(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_ATOMIC)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq, *cq2;
	struct ibv_qp *qp, *qp2;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static struct ibv_qp *make_qp(struct side *s, struct ibv_cq *cq)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 16,
		.max_send_sge = 1, .max_recv_sge = 1,
	};

	return remu_create_qp(s->pd, cq, IBV_QPT_RC, &cap);
}

static int side_open(struct side *s, const char *dev, int access)
{
	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->cq2 = s->cq ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq2 || !s->buf)
		return -1;
	memset(s->buf, GUARD, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, access);
	s->qp = s->mr ? make_qp(s, s->cq) : NULL;
	s->qp2 = s->qp ? make_qp(s, s->cq2) : NULL;
	return s->qp2 ? 0 : -1;
}

static void side_close(struct side *s)
{
	if (s->qp2)
		ibv_destroy_qp(s->qp2);
	if (s->cq2)
		ibv_destroy_cq(s->cq2);
	remu_close_objs(s->qp, NULL, s->mr, s->cq, s->pd, s->ctx);
	free(s->buf);
}

/* RESET -> INIT -> RTR -> RTS towards @pqp on @peer */
static int qp_connect(struct ibv_qp *qp, struct side *s, struct ibv_qp *pqp,
		      struct side *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x77);
	struct remu_conn_dest d = { .qpn = pqp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };

	ra.reset = true;
	return remu_qp_connect(qp, &ra, GID_INDEX, &d);
}

static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
}

/* qp <-> qp again after an error (QP numbers, hence 2B bindings, stay) */
static int reconnect(struct side *a, struct side *b)
{
	if (qp_connect(a->qp, a, b->qp, b) || qp_connect(b->qp, b, a->qp, a))
		return -1;
	drain(a->cq);
	drain(b->cq);
	return 0;
}

/* wait for one completion; its status, or -1 after 20 s */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return remu_poll_one(cq, wc, 20);
}

/* ibv_bind_mw of a type 1 window on @qp; the completion's status */
static int bind1(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw,
		 struct ibv_mr *mr, uint64_t addr, uint64_t len, int access)
{
	struct ibv_mw_bind mb = {
		.wr_id = 0xb1, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = addr, .length = len,
			       .mw_access_flags = access },
	};
	struct ibv_wc wc;
	int st;

	if (ibv_bind_mw(qp, mw, &mb))
		return -2;
	st = poll_one(cq, &wc);
	if (st == IBV_WC_SUCCESS && (wc.opcode != IBV_WC_BIND_MW ||
				     wc.wr_id != 0xb1))
		return -3;
	return st;
}

/* IBV_WR_BIND_MW of a type 2B window under @rkey; the status */
static int bind2(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw,
		 uint32_t rkey, struct ibv_mr *mr, uint64_t addr, uint64_t len,
		 int access)
{
	struct ibv_send_wr wr = {
		.wr_id = 0xb2, .opcode = IBV_WR_BIND_MW,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;
	int st;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr, .addr = addr, .length = len,
		.mw_access_flags = access };
	if (ibv_post_send(qp, &wr, &bad))
		return -2;
	st = poll_one(cq, &wc);
	if (st == IBV_WC_SUCCESS && (wc.opcode != IBV_WC_BIND_MW ||
				     wc.wr_id != 0xb2))
		return -3;
	return st;
}

/* LOCAL_INV of @rkey on @qp; the status */
static int local_inv(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.wr_id = 0x1f, .opcode = IBV_WR_LOCAL_INV,
		.send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = rkey,
	}, *bad;
	struct ibv_wc wc;

	if (ibv_post_send(qp, &wr, &bad))
		return -2;
	return poll_one(cq, &wc);
}

/* a's @op of @len bytes (a's buffer at @loff) at b's @raddr under @rkey */
static int rdma_on(struct side *a, struct ibv_qp *qp, struct ibv_cq *cq,
		   int op, uint32_t rkey, uint64_t raddr, uint32_t len,
		   uint32_t loff)
{
	struct ibv_sge sge = { (uintptr_t)a->buf + loff, len, a->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 0xd0, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		return -2;
	return poll_one(cq, &wc);
}

#define rdma(a, op, rkey, raddr, len, loff) \
	rdma_on(a, (a)->qp, (a)->cq, op, rkey, raddr, len, loff)

/* fetch-and-add 1 at b's @raddr; the status, *@old the value before */
static int fadd(struct side *a, uint32_t rkey, uint64_t raddr, uint64_t *old)
{
	struct ibv_sge sge = { (uintptr_t)a->buf, 8, a->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 0xad, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;
	int st;

	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = 1;
	if (ibv_post_send(a->qp, &wr, &bad))
		return -2;
	st = poll_one(a->cq, &wc);
	memcpy(old, a->buf, 8);
	return st;
}

static void pattern(uint8_t *p, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 131 + seed + (i >> 9));
}

/* first byte of @p[0, len) that is not @v, or -1 */
static long not_all(const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return (long)i;
	return -1;
}

FIXTURE(mw) {
	struct side a, b;
	uint64_t win;		/* address of the window in b's buffer */
};

FIXTURE_VARIANT(mw) {
	const char *dev_a, *dev_b;
};

FIXTURE_VARIANT_ADD(mw, remu0_remu1) { .dev_a = "remu0", .dev_b = "remu1" };

FIXTURE_SETUP(mw)
{
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	ASSERT_EQ(0, side_open(&self->a, variant->dev_a,
			       IBV_ACCESS_LOCAL_WRITE | RIGHTS));
	/* no remote right on b's MR: only windows grant access */
	ASSERT_EQ(0, side_open(&self->b, variant->dev_b,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
	ASSERT_EQ(0, qp_connect(self->a.qp, &self->a, self->b.qp, &self->b));
	ASSERT_EQ(0, qp_connect(self->b.qp, &self->b, self->a.qp, &self->a));
	ASSERT_EQ(0, qp_connect(self->a.qp2, &self->a, self->b.qp2, &self->b));
	ASSERT_EQ(0, qp_connect(self->b.qp2, &self->b, self->a.qp2, &self->a));
	self->win = (uintptr_t)self->b.buf + WIN_OFF;
}

FIXTURE_TEARDOWN(mw)
{
	side_close(&self->a);
	side_close(&self->b);
}

/*
 * a WRITEs a pattern through @rkey into the window and READs it back; b's
 * memory holds it byte for byte and nothing around the window changed.
 */
static void write_read_ok(struct __test_metadata *_metadata, struct side *a,
			  struct side *b, uint32_t rkey, uint64_t win,
			  uint32_t len, uint32_t seed)
{
	uint8_t *bwin = (uint8_t *)(uintptr_t)win;

	pattern(a->buf, len, seed);
	memset(a->buf + len, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(a, IBV_WR_RDMA_WRITE, rkey, win, len, 0));
	EXPECT_EQ(0, memcmp(bwin, a->buf, len));
	EXPECT_EQ(-1, not_all(b->buf, bwin - b->buf, GUARD));
	EXPECT_EQ(-1, not_all(bwin + len, b->buf + BUF_SIZE - (bwin + len),
			      GUARD));
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(a, IBV_WR_RDMA_READ, rkey, win, len,
				       len));
	EXPECT_EQ(0, memcmp(a->buf + len, a->buf, len));
}

/* a's access fails with REM_ACCESS_ERR, both QPs go to ERR: reconnect */
static void access_fails(struct __test_metadata *_metadata, struct side *a,
			 struct side *b, int op, uint32_t rkey, uint64_t raddr,
			 uint32_t len)
{
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(a, op, rkey, raddr, len, 0));
	EXPECT_EQ(IBV_QPS_ERR, remu_qp_state(a->qp));
	ASSERT_EQ(0, reconnect(a, b));
}

/* a bind on b's qp is refused: MW_BIND_ERR, the QP in ERR; reconnect */
static void bind_refused(struct __test_metadata *_metadata, struct side *a,
			 struct side *b, int st)
{
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, st);
	EXPECT_EQ(IBV_QPS_ERR, remu_qp_state(b->qp));
	ASSERT_EQ(0, reconnect(a, b));
}

/* what the device reports is what it does; windows are counted objects */
TEST_F(mw, attributes_and_counts)
{
	int before = remu_obj_count("mw");
	struct ibv_device_attr da;
	struct ibv_mw *m1, *m2;

	ASSERT_EQ(0, ibv_query_device(self->b.ctx, &da));
	EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	EXPECT_FALSE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A);
	EXPECT_GE(da.max_mw, 1024);
	ASSERT_GE(before, 0);
	m1 = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_1);
	m2 = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_2);
	ASSERT_NE(NULL, m1);
	ASSERT_NE(NULL, m2);
	EXPECT_EQ(before + 2, remu_obj_count("mw"));
	EXPECT_NE(m1->rkey >> 8, m2->rkey >> 8);
	EXPECT_NE(m1->rkey >> 8, self->b.mr->rkey >> 8);
	/* an unbound window's rkey grants nothing */
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE,
		     m1->rkey, self->win, 16);
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_READ,
		     m2->rkey, self->win, 16);
	EXPECT_EQ(0, ibv_dealloc_mw(m1));
	EXPECT_EQ(0, ibv_dealloc_mw(m2));
	EXPECT_EQ(before, remu_obj_count("mw"));
}

/* type 1: bind, traffic, the MR's own rkey refused, rebind, unbind */
TEST_F(mw, type1_bind_rebind_unbind)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_1);
	uint32_t k0, k1, k2, k3;

	ASSERT_NE(NULL, mw);
	k0 = mw->rkey;
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw,
					self->b.mr, self->win, WIN_LEN,
					RIGHTS));
	k1 = mw->rkey;
	EXPECT_EQ(k1, ibv_inc_rkey(k0));
	write_read_ok(_metadata, &self->a, &self->b, k1, self->win, WIN_LEN, 1);
	/* the MR has no remote right of its own */
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE,
		     self->b.mr->rkey, self->win, 16);

	/* rebind elsewhere: a new tag, the old rkey misses */
	memset(self->b.buf, GUARD, BUF_SIZE);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp2, self->b.cq2, mw,
					self->b.mr, self->win + 8192, 4097,
					IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ));
	k2 = mw->rkey;
	EXPECT_EQ(k2, ibv_inc_rkey(k1));
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE, k1,
		     self->win + 8192, 16);
	write_read_ok(_metadata, &self->a, &self->b, k2, self->win + 8192,
		      4097, 2);

	/* zero-length bind: unbound, and the MR can go */
	EXPECT_EQ(EBUSY, ibv_dereg_mr(self->b.mr));
	/* nor can it be re-registered while bound; the window still works */
	errno = 0;
	EXPECT_NE(0, ibv_rereg_mr(self->b.mr, IBV_REREG_MR_CHANGE_ACCESS,
				  NULL, NULL, 0,
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
	EXPECT_EQ(EBUSY, errno);
	errno = 0;
	EXPECT_NE(0, ibv_rereg_mr(self->b.mr,
				  IBV_REREG_MR_CHANGE_TRANSLATION,
				  NULL, self->b.buf, BUF_SIZE, 0));
	EXPECT_EQ(EBUSY, errno);
	write_read_ok(_metadata, &self->a, &self->b, k2, self->win + 8192,
		      4097, 3);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw,
					self->b.mr, self->win, 0, RIGHTS));
	k3 = mw->rkey;
	EXPECT_EQ(k3, ibv_inc_rkey(k2));
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE, k3,
		     self->win + 8192, 1);
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_READ, k2,
		     self->win + 8192, 1);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
}

/* a type 1 window is not invalidated by LOCAL_INV nor SEND_WITH_INV */
TEST_F(mw, type1_not_invalidated)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_1);
	struct ibv_sge rs = { (uintptr_t)self->b.buf, 64, self->b.mr->lkey };
	struct ibv_sge ss = { (uintptr_t)self->a.buf, 64, self->a.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 0x5e, .sg_list = &rs,
				   .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 0x5f, .sg_list = &ss,
				   .num_sge = 1,
				   .opcode = IBV_WR_SEND_WITH_INV,
				   .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct ibv_wc wc;

	ASSERT_NE(NULL, mw);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw,
					self->b.mr, self->win, WIN_LEN,
					RIGHTS));
	bind_refused(_metadata, &self->a, &self->b,
		     local_inv(self->b.qp, self->b.cq, mw->rkey));
	write_read_ok(_metadata, &self->a, &self->b, mw->rkey, self->win,
		      WIN_LEN, 3);

	/*
	 * SEND_WITH_INV: the receive completes with REM_INV_REQ_ERR, the
	 * sender gets a remote operational error (as for an MR that cannot
	 * be invalidated), the window stays.
	 */
	ASSERT_EQ(0, ibv_post_recv(self->b.qp, &rwr, &rbad));
	swr.invalidate_rkey = mw->rkey;
	ASSERT_EQ(0, ibv_post_send(self->a.qp, &swr, &sbad));
	EXPECT_EQ(IBV_WC_REM_OP_ERR, poll_one(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, poll_one(self->b.cq, &wc));
	EXPECT_EQ(0x5e, wc.wr_id);
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	memset(self->b.buf, GUARD, BUF_SIZE);	/* the SEND's bytes landed */
	write_read_ok(_metadata, &self->a, &self->b, mw->rkey, self->win,
		      WIN_LEN, 4);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
}

/* type 2B: bind with the consumer's key, LOCAL_INV, bind again */
TEST_F(mw, type2_bind_local_inv)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_2);
	uint32_t k1, k2;

	ASSERT_NE(NULL, mw);
	k1 = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->b.qp, self->b.cq, mw, k1,
					self->b.mr, self->win, WIN_LEN,
					RIGHTS));
	write_read_ok(_metadata, &self->a, &self->b, k1, self->win, WIN_LEN, 5);
	/* the window is tied to the QP it was bound on: qp2 is refused */
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma_on(&self->a, self->a.qp2, self->a.cq2,
			  IBV_WR_RDMA_WRITE, k1, self->win, 8, 0));
	ASSERT_EQ(0, qp_connect(self->a.qp2, &self->a, self->b.qp2, &self->b));
	ASSERT_EQ(0, qp_connect(self->b.qp2, &self->b, self->a.qp2, &self->a));
	drain(self->b.cq2);

	ASSERT_EQ(IBV_WC_SUCCESS, local_inv(self->b.qp, self->b.cq, k1));
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_READ, k1,
		     self->win, 8);
	/* invalidating it again is allowed (as for MRs) */
	ASSERT_EQ(IBV_WC_SUCCESS, local_inv(self->b.qp, self->b.cq, k1));

	k2 = ibv_inc_rkey(k1);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->b.qp, self->b.cq, mw, k2,
					self->b.mr, self->win + 100, 300,
					IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ));
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE, k1,
		     self->win + 100, 8);
	memset(self->b.buf, GUARD, BUF_SIZE);
	write_read_ok(_metadata, &self->a, &self->b, k2, self->win + 100, 300,
		      6);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
	/* the MR is free again */
	EXPECT_EQ(0, ibv_dereg_mr(self->b.mr));
	self->b.mr = NULL;
}

/* a new type 2B window over b's window area, bound on b's qp: its key */
static uint32_t bind_new2(struct __test_metadata *_metadata, struct side *b,
			  uint64_t win, struct ibv_mw **mwp)
{
	struct ibv_mw *mw = ibv_alloc_mw(b->pd, IBV_MW_TYPE_2);
	uint32_t k;

	*mwp = mw;
	if (!mw)
		return 0;
	k = ibv_inc_rkey(mw->rkey);
	EXPECT_EQ(IBV_WC_SUCCESS, bind2(b->qp, b->cq, mw, k, b->mr, win,
					WIN_LEN, RIGHTS));
	return k;
}

/*
 * @aq (of a) sends 64 patterned bytes with the invalidation of @k (id
 * 0x5f) into a receive posted on @bq (of b, id 0x5e)
 */
static void send_inv(struct __test_metadata *_metadata, struct side *a,
		     struct ibv_qp *aq, struct side *b, struct ibv_qp *bq,
		     uint32_t k)
{
	struct ibv_sge rs = { (uintptr_t)b->buf, 64, b->mr->lkey };
	struct ibv_sge ss = { (uintptr_t)a->buf + 2 * WIN_LEN, 64,
			      a->mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 0x5f, .sg_list = &ss,
				   .num_sge = 1,
				   .opcode = IBV_WR_SEND_WITH_INV,
				   .send_flags = IBV_SEND_SIGNALED };

	pattern(a->buf + 2 * WIN_LEN, 64, 8);
	ASSERT_EQ(0, remu_post_recv(bq, 0x5e, &rs, 1));
	swr.invalidate_rkey = k;
	ASSERT_EQ(0, remu_post_send(aq, &swr));
}

/* type 2B: the peer's SEND_WITH_INV unbinds it */
TEST_F(mw, type2_send_with_inv)
{
	struct ibv_mw *mw;
	uint32_t k = bind_new2(_metadata, &self->b, self->win, &mw);
	struct ibv_wc wc;

	ASSERT_NE(NULL, mw);
	write_read_ok(_metadata, &self->a, &self->b, k, self->win, WIN_LEN, 7);
	send_inv(_metadata, &self->a, self->a.qp, &self->b, self->b.qp, k);
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
	EXPECT_EQ(k, wc.invalidated_rkey);
	EXPECT_EQ(64, wc.byte_len);
	EXPECT_EQ(0, memcmp(self->b.buf, self->a.buf + 2 * WIN_LEN, 64));
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE, k,
		     self->win, 8);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
}

/*
 * type 2B: a window serves only the QP it was bound through, and only
 * that QP's peer can invalidate it: a SEND_WITH_INV of its rkey arriving
 * on another QP of the same PD fails there (the receive completes with
 * REM_INV_REQ_ERR, the sender's WQE with an error) and leaves the window
 * bound and working
 */
TEST_F(mw, type2_send_with_inv_other_qp)
{
	struct ibv_mw *mw;
	uint32_t k = bind_new2(_metadata, &self->b, self->win, &mw);
	struct ibv_wc wc;

	ASSERT_NE(NULL, mw);
	send_inv(_metadata, &self->a, self->a.qp2, &self->b, self->b.qp2, k);
	EXPECT_NE(IBV_WC_SUCCESS, poll_one(self->a.cq2, &wc));
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, poll_one(self->b.cq2, &wc));
	EXPECT_EQ(0x5e, wc.wr_id);
	/* still bound: its QP's peer reads and writes through it */
	write_read_ok(_metadata, &self->a, &self->b, k, self->win, WIN_LEN, 9);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
}

/* type 2B: a bound window cannot be bound again; no zero-length bind */
TEST_F(mw, type2_bind_errors)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_2);
	uint32_t k1;

	ASSERT_NE(NULL, mw);
	bind_refused(_metadata, &self->a, &self->b,
		     bind2(self->b.qp, self->b.cq, mw, ibv_inc_rkey(mw->rkey),
			   self->b.mr, self->win, 0, RIGHTS));
	k1 = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->b.qp, self->b.cq, mw, k1,
					self->b.mr, self->win, WIN_LEN,
					RIGHTS));
	bind_refused(_metadata, &self->a, &self->b,
		     bind2(self->b.qp, self->b.cq, mw, ibv_inc_rkey(k1),
			   self->b.mr, self->win, 64, RIGHTS));
	/* the binding in force is untouched */
	write_read_ok(_metadata, &self->a, &self->b, k1, self->win, WIN_LEN, 9);
	/* a type 1 window cannot be bound by a WR, nor a 2B by ibv_bind_mw */
	{
		struct ibv_mw *m1 = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_1);

		ASSERT_NE(NULL, m1);
		EXPECT_EQ(-2, bind2(self->b.qp, self->b.cq, m1,
				    ibv_inc_rkey(m1->rkey), self->b.mr,
				    self->win, 64, RIGHTS));
		EXPECT_EQ(-2, bind1(self->b.qp, self->b.cq, mw, self->b.mr,
				    self->win, 64, RIGHTS));
		EXPECT_EQ(0, ibv_dealloc_mw(m1));
	}
	/* a window with a bound 2B window is deallocated with it */
	EXPECT_EQ(EBUSY, ibv_dereg_mr(self->b.mr));
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
	EXPECT_EQ(0, ibv_dereg_mr(self->b.mr));
	self->b.mr = NULL;
}

/* rights narrower than the MR's: each one alone */
TEST_F(mw, narrower_rights)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_1);
	uint64_t old, *p = (uint64_t *)(uintptr_t)(self->win + 1);

	ASSERT_NE(NULL, mw);
	/* READ only */
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw,
					self->b.mr, self->win, WIN_LEN,
					IBV_ACCESS_REMOTE_READ));
	pattern((uint8_t *)(uintptr_t)self->win, WIN_LEN, 10);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(&self->a, IBV_WR_RDMA_READ, mw->rkey,
				       self->win, WIN_LEN, 0));
	EXPECT_EQ(0, memcmp(self->a.buf, (void *)(uintptr_t)self->win,
			    WIN_LEN));
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE,
		     mw->rkey, self->win, 8);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, fadd(&self->a, mw->rkey,
					      self->win + 1, &old));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));

	/* WRITE only */
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw,
					self->b.mr, self->win, WIN_LEN,
					IBV_ACCESS_REMOTE_WRITE));
	pattern(self->a.buf, WIN_LEN, 11);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(&self->a, IBV_WR_RDMA_WRITE, mw->rkey,
				       self->win, WIN_LEN, 0));
	EXPECT_EQ(0, memcmp(self->a.buf, (void *)(uintptr_t)self->win,
			    WIN_LEN));
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_READ,
		     mw->rkey, self->win, 8);

	/* ATOMIC only (the window starts 7 bytes in: win + 1 is aligned) */
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw,
					self->b.mr, self->win, WIN_LEN,
					IBV_ACCESS_REMOTE_ATOMIC));
	*p = 41;
	ASSERT_EQ(IBV_WC_SUCCESS, fadd(&self->a, mw->rkey, self->win + 1,
				       &old));
	EXPECT_EQ(41, old);
	EXPECT_EQ(42, *p);
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_READ,
		     mw->rkey, self->win, 8);
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE,
		     mw->rkey, self->win, 8);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
}

/* a range narrower than the MR's: every edge */
TEST_F(mw, narrower_range)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_2);
	uint32_t k;

	ASSERT_NE(NULL, mw);
	k = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->b.qp, self->b.cq, mw, k,
					self->b.mr, self->win, 5000,
					RIGHTS));
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE, k,
		     self->win - 1, 8);
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE, k,
		     self->win + 4993, 8);
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_READ, k,
		     self->win + 5000, 1);
	/* a WRITE longer than the window is refused before any byte lands */
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE, k,
		     self->win, 5001);
	EXPECT_EQ(-1, not_all(self->b.buf, BUF_SIZE, GUARD));
	/* the whole window, and its last byte alone */
	write_read_ok(_metadata, &self->a, &self->b, k, self->win, 5000, 12);
	memset(self->b.buf, GUARD, BUF_SIZE);
	write_read_ok(_metadata, &self->a, &self->b, k, self->win + 4999, 1,
		      13);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
}

/* binds the verbs forbid: IBV_WC_MW_BIND_ERR, nothing bound */
TEST_F(mw, bind_errors)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_1);
	struct ibv_mw *other = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_2);
	struct ibv_pd *pd2 = ibv_alloc_pd(self->b.ctx);
	struct ibv_mr *nobind, *ronly, *otherpd;
	struct ibv_mw *mw2;
	uint8_t *buf2 = aligned_alloc(4096, 65536);

	ASSERT_NE(NULL, mw);
	ASSERT_NE(NULL, other);
	ASSERT_NE(NULL, pd2);
	ASSERT_NE(NULL, buf2);
	nobind = ibv_reg_mr(self->b.pd, buf2, 65536, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_WRITE);
	ronly = ibv_reg_mr(self->b.pd, buf2, 65536, IBV_ACCESS_MW_BIND |
			   IBV_ACCESS_REMOTE_READ);
	otherpd = ibv_reg_mr(pd2, buf2, 65536, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_MW_BIND);
	mw2 = ibv_alloc_mw(pd2, IBV_MW_TYPE_2);
	ASSERT_NE(NULL, nobind);
	ASSERT_NE(NULL, ronly);
	ASSERT_NE(NULL, otherpd);
	ASSERT_NE(NULL, mw2);

	/* MR registered without IBV_ACCESS_MW_BIND */
	bind_refused(_metadata, &self->a, &self->b,
		     bind1(self->b.qp, self->b.cq, mw, nobind,
			   (uintptr_t)buf2, 4096, IBV_ACCESS_REMOTE_READ));
	/* remote write / atomic need local write on the MR */
	bind_refused(_metadata, &self->a, &self->b,
		     bind1(self->b.qp, self->b.cq, mw, ronly,
			   (uintptr_t)buf2, 4096, IBV_ACCESS_REMOTE_WRITE));
	bind_refused(_metadata, &self->a, &self->b,
		     bind1(self->b.qp, self->b.cq, mw, ronly,
			   (uintptr_t)buf2, 4096, IBV_ACCESS_REMOTE_ATOMIC));
	/*
	 * Another PD's MR: libibverbs' ibv_bind_mw refuses it itself
	 * (EPERM); a type 2B bind WR reaches the device.  Another PD's
	 * window.
	 */
	EXPECT_EQ(-2, bind1(self->b.qp, self->b.cq, mw, otherpd,
			    (uintptr_t)buf2, 4096, IBV_ACCESS_REMOTE_READ));
	bind_refused(_metadata, &self->a, &self->b,
		     bind2(self->b.qp, self->b.cq, other,
			   ibv_inc_rkey(other->rkey), otherpd,
			   (uintptr_t)buf2, 4096, IBV_ACCESS_REMOTE_READ));
	bind_refused(_metadata, &self->a, &self->b,
		     bind2(self->b.qp, self->b.cq, mw2, ibv_inc_rkey(mw2->rkey),
			   self->b.mr, self->win, 64, IBV_ACCESS_REMOTE_READ));
	/* outside the MR: before it, past its end, wrapping around */
	bind_refused(_metadata, &self->a, &self->b,
		     bind1(self->b.qp, self->b.cq, mw, self->b.mr,
			   (uintptr_t)self->b.buf - 1, 64,
			   IBV_ACCESS_REMOTE_READ));
	bind_refused(_metadata, &self->a, &self->b,
		     bind1(self->b.qp, self->b.cq, mw, self->b.mr,
			   (uintptr_t)self->b.buf + BUF_SIZE - 63, 64,
			   IBV_ACCESS_REMOTE_READ));
	bind_refused(_metadata, &self->a, &self->b,
		     bind1(self->b.qp, self->b.cq, mw, self->b.mr,
			   (uintptr_t)self->b.buf, UINT64_MAX,
			   IBV_ACCESS_REMOTE_READ));
	/* a bad lkey */
	{
		struct ibv_mr fake = *self->b.mr;

		fake.lkey ^= 0x80;
		bind_refused(_metadata, &self->a, &self->b,
			     bind1(self->b.qp, self->b.cq, mw, &fake,
				   self->win, 64, IBV_ACCESS_REMOTE_READ));
	}
	/* the key of another window (index of @other) */
	bind_refused(_metadata, &self->a, &self->b,
		     bind2(self->b.qp, self->b.cq, other,
			   ibv_inc_rkey(mw->rkey), self->b.mr, self->win, 64,
			   IBV_ACCESS_REMOTE_READ));
	/* a right windows cannot grant */
	bind_refused(_metadata, &self->a, &self->b,
		     bind1(self->b.qp, self->b.cq, mw, self->b.mr, self->win,
			   64, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND));
	/* nothing got bound: the MRs deregister */
	EXPECT_EQ(0, ibv_dereg_mr(nobind));
	EXPECT_EQ(0, ibv_dereg_mr(ronly));
	EXPECT_EQ(0, ibv_dealloc_mw(mw2));
	EXPECT_EQ(0, ibv_dereg_mr(otherpd));
	EXPECT_EQ(0, ibv_dealloc_pd(pd2));
	/* and the window still works */
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw,
					self->b.mr, self->win, 4096, RIGHTS));
	write_read_ok(_metadata, &self->a, &self->b, mw->rkey, self->win,
		      4096, 14);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
	EXPECT_EQ(0, ibv_dealloc_mw(other));
	free(buf2);
}

/* windows over an explicit and over the implicit ODP MR */
TEST_F(mw, odp)
{
	const int acc = IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_MW_BIND;
	size_t len = 1 << 20;
	struct ibv_mr *odp, *imp;
	struct ibv_mw *mw;
	uint8_t *m;

	m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	odp = ibv_reg_mr(self->b.pd, m, len, acc);
	ASSERT_NE(NULL, odp);
	mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_1);
	ASSERT_NE(NULL, mw);
	/* nothing faulted in yet: the WRITE faults the window's pages */
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw, odp,
					(uintptr_t)m + 4093, WIN_LEN, RIGHTS));
	pattern(self->a.buf, WIN_LEN, 15);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(&self->a, IBV_WR_RDMA_WRITE, mw->rkey,
				       (uintptr_t)m + 4093, WIN_LEN, 0));
	EXPECT_EQ(0, memcmp(m + 4093, self->a.buf, WIN_LEN));
	EXPECT_EQ(-1, not_all(m, 4093, 0));
	EXPECT_EQ(-1, not_all(m + 4093 + WIN_LEN, len - 4093 - WIN_LEN, 0));
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(&self->a, IBV_WR_RDMA_READ, mw->rkey,
				       (uintptr_t)m + 4093, WIN_LEN, WIN_LEN));
	EXPECT_EQ(0, memcmp(self->a.buf + WIN_LEN, self->a.buf, WIN_LEN));
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_WRITE,
		     mw->rkey, (uintptr_t)m + 4092, 8);
	EXPECT_EQ(EBUSY, ibv_dereg_mr(odp));
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw, odp,
					(uintptr_t)m, 0, 0));
	EXPECT_EQ(0, ibv_dereg_mr(odp));

	/* the implicit ODP MR: the whole address space */
	imp = ibv_reg_mr(self->b.pd, NULL, SIZE_MAX, acc);
	ASSERT_NE(NULL, imp);
	memset(m, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, mw, imp,
					(uintptr_t)m + 8191, 70000,
					IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ));
	pattern(self->a.buf, 70000, 16);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(&self->a, IBV_WR_RDMA_WRITE, mw->rkey,
				       (uintptr_t)m + 8191, 70000, 0));
	EXPECT_EQ(0, memcmp(m + 8191, self->a.buf, 70000));
	EXPECT_EQ(-1, not_all(m, 8191, 0));
	EXPECT_EQ(-1, not_all(m + 8191 + 70000, len - 8191 - 70000, 0));
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(&self->a, IBV_WR_RDMA_READ, mw->rkey,
				       (uintptr_t)m + 8191, 70000, 70000));
	EXPECT_EQ(0, memcmp(self->a.buf + 70000, self->a.buf, 70000));
	/* past the window, though inside the implicit MR */
	access_fails(_metadata, &self->a, &self->b, IBV_WR_RDMA_READ,
		     mw->rkey, (uintptr_t)m + 8191 + 70000, 1);
	EXPECT_EQ(EBUSY, ibv_dereg_mr(imp));
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
	EXPECT_EQ(0, ibv_dereg_mr(imp));
	munmap(m, len);
}

/*
 * A process that closes the device with windows bound to its MR: the
 * core deallocates the windows, then the MR (whose first dereg said
 * EBUSY) and the PD; every object count returns.
 */
TEST_F(mw, close_with_bound_windows)
{
	int mw0 = remu_obj_count("mw"), mr0 = remu_obj_count("mr");
	int pd0 = remu_obj_count("pd");
	struct ibv_mw *m1, *m2;

	ASSERT_GE(mw0, 0);
	m1 = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_1);
	m2 = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_2);
	ASSERT_NE(NULL, m1);
	ASSERT_NE(NULL, m2);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->b.qp, self->b.cq, m1,
					self->b.mr, self->win, 4096, RIGHTS));
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->b.qp, self->b.cq, m2,
					ibv_inc_rkey(m2->rkey), self->b.mr,
					self->win, 4096, RIGHTS));
	EXPECT_EQ(mw0 + 2, remu_obj_count("mw"));
	EXPECT_EQ(EBUSY, ibv_dereg_mr(self->b.mr));
	/* b's QPs, CQs, MR (EBUSY again), PD (EBUSY) and context */
	side_close(&self->b);
	memset(&self->b, 0, sizeof(self->b));
	EXPECT_EQ(mw0, remu_obj_count("mw"));
	EXPECT_EQ(mr0 - 1, remu_obj_count("mr"));
	EXPECT_EQ(pd0 - 1, remu_obj_count("pd"));
}

/* ---- the race: a peer's accesses against rebinds and unbinds ---- */

struct racer {
	struct side *b;
	struct ibv_mw *mw;
	uint64_t win;
	volatile uint32_t rkey;	/* the key of the last bind */
	volatile int stop;
	int binds, errors;	/* bind/unbind cycles or invalidations */
};

#define RACE_LEN	8192

/* every byte of @p is the one of @pat or GUARD */
static int pattern_or_guard(const uint8_t *p, const uint8_t *pat,
			    uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		if (p[i] != pat[i] && p[i] != GUARD)
			return 0;
	return 1;
}

/* b's qp2: bind (published to the peer), unbind, over and over */
static void *race_binder(void *arg)
{
	struct racer *r = arg;
	struct timespec d = { 0, 300 * 1000 };

	while (!r->stop) {
		if (bind1(r->b->qp2, r->b->cq2, r->mw, r->b->mr, r->win,
			  RACE_LEN, IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ) != IBV_WC_SUCCESS) {
			r->errors++;
			break;
		}
		r->rkey = r->mw->rkey;
		nanosleep(&d, NULL);
		if (bind1(r->b->qp2, r->b->cq2, r->mw, r->b->mr, r->win, 0,
			  0) != IBV_WC_SUCCESS) {
			r->errors++;
			break;
		}
		r->binds++;
		nanosleep(&d, NULL);
	}
	return NULL;
}

TEST_F(mw, race_rebind_unbind)
{
	struct racer r = { .b = &self->b, .win = self->win };
	uint8_t *bwin = (uint8_t *)(uintptr_t)self->win;
	int ok = 0, refused = 0, i, st;
	pthread_t t;

	r.mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_1);
	ASSERT_NE(NULL, r.mw);
	r.rkey = r.mw->rkey;
	pattern(self->a.buf, RACE_LEN, 17);
	ASSERT_EQ(0, pthread_create(&t, NULL, race_binder, &r));
	for (i = 0; i < 300; i++) {
		int op = i & 1 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		uint32_t off = i & 1 ? RACE_LEN : 0;

		memset(self->a.buf + RACE_LEN, 0, RACE_LEN);
		st = rdma(&self->a, op, r.rkey, self->win, RACE_LEN, off);
		if (st == IBV_WC_SUCCESS) {
			ok++;
			/*
			 * A READ that succeeded read the window's memory:
			 * each byte the pattern or, not yet written, GUARD.
			 */
			if (op == IBV_WR_RDMA_READ &&
			    !pattern_or_guard(self->a.buf + RACE_LEN,
					      self->a.buf, RACE_LEN))
				break;
			continue;
		}
		ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, st);
		refused++;
		ASSERT_EQ(0, reconnect(&self->a, &self->b));
	}
	r.stop = 1;
	pthread_join(t, NULL);
	EXPECT_EQ(300, i);
	EXPECT_EQ(0, r.errors);
	TH_LOG("%d accesses completed, %d refused, %d bind/unbind cycles",
	       ok, refused, r.binds);
	EXPECT_GT(ok, 0);
	EXPECT_GT(refused, 0);
	EXPECT_GT(r.binds, 0);
	/* only the window was ever written, and only with the pattern */
	EXPECT_EQ(-1, not_all(self->b.buf, WIN_OFF, GUARD));
	EXPECT_EQ(-1, not_all(bwin + RACE_LEN,
			      self->b.buf + BUF_SIZE - bwin - RACE_LEN, GUARD));
	EXPECT_TRUE(pattern_or_guard(bwin, self->a.buf, RACE_LEN));
	EXPECT_EQ(0, ibv_dealloc_mw(r.mw));
}

/* b's qp2: LOCAL_INV of the type 2B window's key, over and over */
static void *race_invalidator(void *arg)
{
	struct racer *r = arg;
	struct timespec d = { 0, 500 * 1000 };

	while (!r->stop) {
		nanosleep(&d, NULL);
		if (local_inv(r->b->qp2, r->b->cq2, r->rkey) !=
		    IBV_WC_SUCCESS) {
			r->errors++;
			break;
		}
		r->binds++;
	}
	return NULL;
}

/*
 * A type 2B window bound on b's qp (the QP the peer's accesses arrive
 * on) and invalidated by another thread through qp2 while the peer loops
 * on WRITE and READ; after each refusal the window is bound again under
 * the same key.
 */
TEST_F(mw, race_local_inv)
{
	struct racer r = { .b = &self->b, .win = self->win };
	uint8_t *bwin = (uint8_t *)(uintptr_t)self->win;
	int ok = 0, refused = 0, i, st;
	pthread_t t;

	r.mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_2);
	ASSERT_NE(NULL, r.mw);
	r.rkey = ibv_inc_rkey(r.mw->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->b.qp, self->b.cq, r.mw, r.rkey,
					self->b.mr, self->win, RACE_LEN,
					IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ));
	pattern(self->a.buf, RACE_LEN, 18);
	ASSERT_EQ(0, pthread_create(&t, NULL, race_invalidator, &r));
	for (i = 0; i < 300; i++) {
		int op = i & 1 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		uint32_t off = i & 1 ? RACE_LEN : 0;

		memset(self->a.buf + RACE_LEN, 0, RACE_LEN);
		st = rdma(&self->a, op, r.rkey, self->win, RACE_LEN, off);
		if (st == IBV_WC_SUCCESS) {
			ok++;
			if (op == IBV_WR_RDMA_READ &&
			    !pattern_or_guard(self->a.buf + RACE_LEN,
					      self->a.buf, RACE_LEN))
				break;
			continue;
		}
		ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, st);
		refused++;
		ASSERT_EQ(0, reconnect(&self->a, &self->b));
		/* invalidated (only the other thread does that): bind again */
		ASSERT_EQ(IBV_WC_SUCCESS,
			  bind2(self->b.qp, self->b.cq, r.mw, r.rkey,
				self->b.mr, self->win, RACE_LEN,
				IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ));
	}
	r.stop = 1;
	pthread_join(t, NULL);
	EXPECT_EQ(300, i);
	EXPECT_EQ(0, r.errors);
	TH_LOG("%d accesses completed, %d refused, %d invalidations",
	       ok, refused, r.binds);
	EXPECT_GT(ok, 0);
	EXPECT_GT(refused, 0);
	EXPECT_EQ(-1, not_all(self->b.buf, WIN_OFF, GUARD));
	EXPECT_EQ(-1, not_all(bwin + RACE_LEN,
			      self->b.buf + BUF_SIZE - bwin - RACE_LEN, GUARD));
	EXPECT_TRUE(pattern_or_guard(bwin, self->a.buf, RACE_LEN));
	EXPECT_EQ(0, ibv_dealloc_mw(r.mw));
}

TEST_HARNESS_MAIN
