// SPDX-License-Identifier: GPL-2.0
/*
 * remu_datapath_test - the data path byte for byte: one process opens
 * two remu devices (remu0 and remu1 across the veth, or remu0 twice for
 * loopback), connects an RC QP on each without any TCP exchange, and
 * moves patterned data with SEND/RECV, RDMA WRITE and RDMA READ using
 * three SGEs on each side at unaligned addresses, for lengths that are
 * not multiples of the MTU (1, 4095, 4097, 65537, 1 MiB), comparing every
 * byte and the completions' byte_len; payload_by_reference checks that
 * RC payload from pinned and ODP MRs leaves as page frags (tx_frag_pkts)
 * and that short payloads, inline data and device memory are copied.
 * Then the rest of the data path:
 * immediate data (SEND_WITH_IMM, RDMA_WRITE_WITH_IMM), inline sends up to
 * max_inline, atomics (FETCH_ADD and CMP_SWP value for value, 2 x 500
 * concurrent FETCH_ADDs from two QPs, a misaligned target), READs and
 * atomics 16 at a time with 1 to 128 responder resources, also changed
 * through SQD (read_storm_rd_atomic), the error
 * completions (bad lkey, bad rkey, out of bounds, missing remote right:
 * exact status, the rest flushed; a receive WQE that fails at the
 * responder - bad lkey, another PD's MR, past its MR's end, too short -
 * completes there with the local error and the SEND with REM_OP_ERR or
 * REM_INV_REQ_ERR; qp_access_flags with MR-only bits accepted, the QP's
 * remote rights still enforced) and RNR (retried until a receive is
 * posted; with rnr_retry 0, RNR_RETRY_EXC_ERR; a stream of multi-packet
 * SENDs against a receiver that posts late, every message once, in
 * order), a QP pair reset after an error and used again both ways, the
 * affiliated async events (QP_ACCESS_ERR, QP_REQ_ERR on the responder,
 * COMM_EST for a QP in RTR), and with REMU_DP_OUTAGE=1 the retransmit timer across a short outage,
 * RETRY_EXC_ERR with the wire cut, and a duplicate atomic after RESET
 * answered with the new connection's result (remu_netem_test.sh).
 *
 * Every fixture runs each test through both verbs APIs: variants
 * remu0_remu1 and loopback post with ibv_post_send() and poll with
 * ibv_poll_cq(); remu0_remu1_ex and loopback_ex make their QPs and CQs
 * with ibv_create_qp_ex()/ibv_create_cq_ex() and post and poll through
 * ibv_wr_* and ibv_start_poll() (remu_use_ex: remu_post_list() and
 * remu_poll_cq() in remu_verbs_lib.h), with the same checks.
 *
 * Fixtures uc and ud do the same for the other transports: UC SEND,
 * SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM (0 B to 1 MiB) and
 * inline sends, READ/atomics refused at post, a WRITE to a bad rkey
 * dropped with the QP still working; UD SEND and SEND_WITH_IMM up to the
 * MTU with the 40-byte GRH area (IPv4 header checked) before the data,
 * src_qp, wc.sl the RoCE packet type as on mlx5 (0xa: UDP, IPv4), Q_Key
 * mismatch dropped, MTU + 1 refused with LOC_LEN_ERR.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define BUF_SIZE	((1 << 20) + 8192)
#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_cq *cq2;	/* a second QP, for the two-QP tests */
	struct ibv_qp *qp2;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static int side_open(struct side *s, const char *dev, enum ibv_qp_type type)
{
	struct ibv_qp_cap cap = { .max_send_wr = 16, .max_recv_wr = 16,
				  .max_send_sge = 4, .max_recv_sge = 4,
				  .max_inline_data = 256 };

	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? remu_create_cq(s->ctx, 64) : NULL;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq || !s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC);
	s->qp = s->mr ? remu_create_qp(s->pd, s->cq, type, &cap) : NULL;
	s->cq2 = s->qp ? remu_create_cq(s->ctx, 64) : NULL;
	s->qp2 = s->cq2 ? remu_create_qp(s->pd, s->cq2, type, &cap) : NULL;
	return s->qp2 ? 0 : -1;
}

/* the QPs' local ACK timeout (4.096 us * 2^14 = 67 ms) */
static int qp_timeout = 14;
/* max_rd_atomic and max_dest_rd_atomic of the QPs' connections */
static uint8_t qp_rd_atomic = 4;

static int qp_connect(struct ibv_qp *qp, struct side *s, struct ibv_qp *pqp,
		      struct side *peer, int rnr_retry)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x123);
	struct remu_conn_dest d = { .qpn = pqp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };

	ra.timeout = qp_timeout;
	ra.rnr_retry = rnr_retry;
	ra.rd_atomic = qp_rd_atomic;
	return remu_qp_connect(qp, &ra, GID_INDEX, &d);
}

/* @qp (in RESET) through INIT to RTR only, towards @pqp of @peer */
static int qp_to_rtr(struct ibv_qp *qp, struct side *s, struct ibv_qp *pqp,
		     struct side *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x123);
	struct remu_conn_dest d = { .qpn = pqp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };

	ra.rtr_only = true;
	return remu_qp_connect(qp, &ra, GID_INDEX, &d);
}

/* both QPs of @s to those of @peer; qp2 with rnr_retry 0 */
static int side_connect(struct side *s, struct side *peer)
{
	if (qp_connect(s->qp, s, peer->qp, peer, 7))
		return -1;
	return qp_connect(s->qp2, s, peer->qp2, peer, 0);
}

static void side_close(struct side *s)
{
	if (s->qp2)
		ibv_destroy_qp(s->qp2);
	if (s->cq2)
		ibv_destroy_cq(s->cq2);
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
	return remu_poll_one(cq, wc, 20);
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
	bool ex;	/* the extended verbs (remu_use_ex) */
};

FIXTURE_VARIANT_ADD(dp, remu0_remu1) { .dev_a = "remu0", .dev_b = "remu1" };
FIXTURE_VARIANT_ADD(dp, loopback) { .dev_a = "remu0", .dev_b = "remu0" };
FIXTURE_VARIANT_ADD(dp, remu0_remu1_ex) {
	.dev_a = "remu0", .dev_b = "remu1", .ex = true };
FIXTURE_VARIANT_ADD(dp, loopback_ex) {
	.dev_a = "remu0", .dev_b = "remu0", .ex = true };

FIXTURE_SETUP(dp)
{
	remu_use_ex = variant->ex;
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	ASSERT_EQ(0, side_open(&self->a, variant->dev_a, IBV_QPT_RC));
	ASSERT_EQ(0, side_open(&self->b, variant->dev_b, IBV_QPT_RC));
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
		ASSERT_EQ(0, remu_post_list(self->a.qp, &swr, &bad_s));
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
		ASSERT_EQ(0, remu_post_list(self->a.qp, &swr, &bad_s));
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
		ASSERT_EQ(0, remu_post_list(self->a.qp, &swr, &bad_s));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(IBV_WC_RDMA_READ, wc.opcode);
		EXPECT_EQ(-1, cmp_sges(rs, ls)) TH_LOG("len %u", lens[i]);
	}
}

/* tx_frag_pkts of both devices (once if the same), hw_stats cache waited out */
static long long frag_pkts(const char *da, const char *db)
{
	long long a = remu_hw_counter(da, "tx_frag_pkts", true);

	if (a < 0 || !strcmp(da, db))
		return a;
	return a + remu_hw_counter(db, "tx_frag_pkts", false);
}

/* packets of a @len-byte message that carry REMU_FRAG_MIN_PAYLOAD or more */
static long long ref_pkts(uint32_t len, uint32_t mtu)
{
	long long n = 0;
	uint32_t off;

	for (off = 0; off < len; off += mtu)
		n += (len - off < mtu ? len - off : mtu) >= 256;
	return n;
}

static void pattern(uint8_t *p, uint32_t len, uint32_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 13 + (i >> 9));
}

/*
 * Payload by reference (docs/performance-log.md, step 5): a
 * WRITE's request packets and a READ's responses from ordinary MRs (pinned
 * and ODP) of 256 bytes or more leave as page frags (tx_frag_pkts counts
 * each), the data arriving byte for byte; shorter payloads, inline data and
 * device memory are copied (tx_frag_pkts does not move).
 */
TEST_F(dp, payload_by_reference)
{
	const char *da = variant->dev_a, *db = variant->dev_b;
	uint8_t *sa = self->a.buf + 1, *sb = self->b.buf + 7;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_sge sge;
	struct ibv_send_wr swr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_RDMA_WRITE,
				   .send_flags = IBV_SEND_SIGNALED |
						 IBV_SEND_INLINE };
	struct ibv_wc wc;
	struct ibv_alloc_dm_attr dattr = { .length = 16384 };
	struct ibv_dm *dm;
	struct ibv_mr *dmr, *omr;
	uint32_t mtu, len;
	long long f0;
	uint8_t *odp;

	ASSERT_EQ(0, ibv_query_qp(self->a.qp, &qa, IBV_QP_PATH_MTU |
				  IBV_QP_CAP, &ia));
	mtu = 128u << qa.path_mtu;
	len = 16 * mtu + 100;	/* the last packet is copied */
	ASSERT_LE(len + 16, BUF_SIZE);

	/* WRITE from a pinned MR: the request packets */
	pattern(sa, len, 1);
	memset(self->b.buf, 0xee, BUF_SIZE);
	f0 = frag_pkts(da, db);
	ASSERT_LE(0, f0) TH_LOG("no tx_frag_pkts counter");
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(self->a.qp, self->a.cq, IBV_WR_RDMA_WRITE,
			     (uintptr_t)sa, self->a.mr->lkey, len,
			     (uintptr_t)sb, self->b.mr->rkey, 20));
	EXPECT_EQ(-1, remu_cmp(sa, sb, len));
	EXPECT_EQ(0xee, sb[-1]);
	EXPECT_EQ(0xee, sb[len]);
	EXPECT_LE(f0 + ref_pkts(len, mtu), frag_pkts(da, db));

	/* READ of a pinned MR: the responses */
	pattern(sb, len, 2);
	memset(self->a.buf, 0xee, BUF_SIZE);
	f0 = frag_pkts(da, db);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(self->a.qp, self->a.cq, IBV_WR_RDMA_READ,
			     (uintptr_t)sa, self->a.mr->lkey, len,
			     (uintptr_t)sb, self->b.mr->rkey, 20));
	EXPECT_EQ(-1, remu_cmp(sb, sa, len));
	EXPECT_EQ(0xee, sa[-1]);
	EXPECT_EQ(0xee, sa[len]);
	EXPECT_LE(f0 + ref_pkts(len, mtu), frag_pkts(da, db));

	/* below the threshold: copied */
	pattern(sa, 255, 3);
	f0 = frag_pkts(da, db);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(self->a.qp, self->a.cq, IBV_WR_RDMA_WRITE,
			     (uintptr_t)sa, self->a.mr->lkey, 255,
			     (uintptr_t)sb, self->b.mr->rkey, 20));
	EXPECT_EQ(-1, remu_cmp(sa, sb, 255));
	EXPECT_EQ(f0, frag_pkts(da, db));

	/* inline data (in the WQE, no MR): copied */
	ASSERT_GE(qa.cap.max_inline_data, 256);
	pattern(sa, 256, 4);
	sge = (struct ibv_sge){ (uintptr_t)sa, 256, 0 };
	swr.wr.rdma.remote_addr = (uintptr_t)sb;
	swr.wr.rdma.rkey = self->b.mr->rkey;
	f0 = frag_pkts(da, db);
	ASSERT_EQ(0, remu_post_send(self->a.qp, &swr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(-1, remu_cmp(sa, sb, 256));
	EXPECT_EQ(f0, frag_pkts(da, db));

	/* device memory, as the WRITE's source and as the READ's: copied */
	dm = ibv_alloc_dm(self->a.ctx, &dattr);
	ASSERT_NE(NULL, dm);
	dmr = ibv_reg_dm_mr(self->a.pd, dm, 0, dattr.length,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_ZERO_BASED);
	ASSERT_NE(NULL, dmr);
	pattern(self->b.buf, dattr.length, 5);
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, self->b.buf, dattr.length));
	memset(self->b.buf, 0xee, BUF_SIZE);
	f0 = frag_pkts(da, db);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(self->a.qp, self->a.cq, IBV_WR_RDMA_WRITE, 0,
			     dmr->lkey, dattr.length, (uintptr_t)sb,
			     self->b.mr->rkey, 20));
	/* b's READ of a's device memory: a's responder copies it */
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(self->b.qp, self->b.cq, IBV_WR_RDMA_READ,
			     (uintptr_t)self->b.buf + 65536, self->b.mr->lkey,
			     dattr.length, 0, dmr->rkey, 20));
	EXPECT_EQ(f0, frag_pkts(da, db));
	ASSERT_EQ(0, ibv_memcpy_from_dm(sa, dm, 0, dattr.length));
	EXPECT_EQ(-1, remu_cmp(sa, sb, dattr.length));
	EXPECT_EQ(-1, remu_cmp(sa, self->b.buf + 65536, dattr.length));
	EXPECT_EQ(0, ibv_dereg_mr(dmr));
	EXPECT_EQ(0, ibv_free_dm(dm));

	/* an ODP MR: its present pages go by reference, both ways */
	odp = mmap(NULL, 2 * BUF_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, odp);
	omr = ibv_reg_mr(self->a.pd, odp, 2 * BUF_SIZE,
			 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_READ);
	ASSERT_NE(NULL, omr) TH_LOG("ODP registration: %s", strerror(errno));
	pattern(odp + 3, len, 6);
	memset(self->b.buf, 0xee, BUF_SIZE);
	f0 = frag_pkts(da, db);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(self->a.qp, self->a.cq, IBV_WR_RDMA_WRITE,
			     (uintptr_t)odp + 3, omr->lkey, len,
			     (uintptr_t)sb, self->b.mr->rkey, 20));
	EXPECT_EQ(-1, remu_cmp(odp + 3, sb, len));
	EXPECT_LE(f0 + ref_pkts(len, mtu), frag_pkts(da, db));
	f0 = frag_pkts(da, db);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(self->b.qp, self->b.cq, IBV_WR_RDMA_READ,
			     (uintptr_t)self->b.buf + 9, self->b.mr->lkey, len,
			     (uintptr_t)odp + 3, omr->rkey, 20));
	EXPECT_EQ(-1, remu_cmp(odp + 3, self->b.buf + 9, len));
	EXPECT_LE(f0 + ref_pkts(len, mtu), frag_pkts(da, db));
	EXPECT_EQ(0, ibv_dereg_mr(omr));
	EXPECT_EQ(0, munmap(odp, 2 * BUF_SIZE));
}

static int post1(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	return remu_post_send(qp, wr);
}

static int post_recv1(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge,
		      int nsge)
{
	return remu_post_recv(qp, wr_id, sge, nsge);
}

/* SEND_WITH_IMM: the immediate, its flag and the data at the receiver */
TEST_F(dp, send_with_imm)
{
	static const uint32_t ilens[] = { 0, 1, 4097, 65537 };
	struct ibv_sge ss[3], rs[3];
	struct ibv_wc wc;
	unsigned int i;

	for (i = 0; i < sizeof(ilens) / sizeof(ilens[0]); i++) {
		struct ibv_send_wr swr = { .wr_id = 500 + i, .sg_list = ss,
					   .num_sge = 3,
					   .opcode = IBV_WR_SEND_WITH_IMM,
					   .send_flags = IBV_SEND_SIGNALED,
					   .imm_data = htobe32(0xa5000000 + i) };

		make_sges(&self->a, ilens[i], 0, ss);
		make_sges(&self->b, ilens[i], 1, rs);
		fill_sges(ss, 3 + i);
		memset(self->b.buf, 0xee, BUF_SIZE);
		ASSERT_EQ(0, post_recv1(self->b.qp, 600 + i, rs, 3));
		ASSERT_EQ(0, post1(self->a.qp, &swr));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(500 + i, wc.wr_id);
		EXPECT_EQ(IBV_WC_SEND, wc.opcode);
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(600 + i, wc.wr_id);
		EXPECT_EQ(IBV_WC_RECV, wc.opcode);
		EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
		EXPECT_EQ(htobe32(0xa5000000 + i), wc.imm_data);
		EXPECT_EQ(ilens[i], wc.byte_len);
		EXPECT_EQ(-1, cmp_sges(ss, rs)) TH_LOG("len %u", ilens[i]);
	}
	/* a plain SEND after them carries no immediate */
	{
		struct ibv_send_wr swr = { .wr_id = 1, .sg_list = ss,
					   .num_sge = 3, .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED };

		make_sges(&self->a, 100, 0, ss);
		make_sges(&self->b, 100, 1, rs);
		ASSERT_EQ(0, post_recv1(self->b.qp, 2, rs, 3));
		ASSERT_EQ(0, post1(self->a.qp, &swr));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(IBV_WC_RECV, wc.opcode);
		EXPECT_FALSE(wc.wc_flags & IBV_WC_WITH_IMM);
		EXPECT_EQ(100, wc.byte_len);
	}
}

/* RDMA_WRITE_WITH_IMM: data placed, the immediate consumes a receive */
TEST_F(dp, write_with_imm)
{
	static const uint32_t ilens[] = { 0, 1, 4097, 1 << 20 };
	struct ibv_sge ss[3], rs[3];
	struct ibv_wc wc;
	unsigned int i;

	for (i = 0; i < sizeof(ilens) / sizeof(ilens[0]); i++) {
		struct ibv_send_wr swr = { .wr_id = 700 + i, .sg_list = ss,
					   .num_sge = 3,
					   .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					   .send_flags = IBV_SEND_SIGNALED,
					   .imm_data = htobe32(0x5a000000 + i) };
		struct ibv_sge junk = { (uintptr_t)self->b.buf + BUF_SIZE - 64,
					64, self->b.mr->lkey };

		make_sges(&self->a, ilens[i], 0, ss);
		fill_sges(ss, 17 + i);
		memset(self->b.buf, 0xee, BUF_SIZE);
		rs[0] = (struct ibv_sge){ (uintptr_t)self->b.buf + 5, ilens[i], 0 };
		rs[1] = (struct ibv_sge){ 0, 0, 0 };
		rs[2] = (struct ibv_sge){ 0, 0, 0 };
		swr.wr.rdma.remote_addr = rs[0].addr;
		swr.wr.rdma.rkey = self->b.mr->rkey;
		/* alternately a receive with no SGE and one with an SGE */
		ASSERT_EQ(0, post_recv1(self->b.qp, 800 + i, &junk, i & 1));
		ASSERT_EQ(0, post1(self->a.qp, &swr));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(700 + i, wc.wr_id);
		EXPECT_EQ(IBV_WC_RDMA_WRITE, wc.opcode);
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(800 + i, wc.wr_id);
		EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
		EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
		EXPECT_EQ(htobe32(0x5a000000 + i), wc.imm_data);
		EXPECT_EQ(ilens[i], wc.byte_len);
		EXPECT_EQ(-1, cmp_sges(ss, rs)) TH_LOG("len %u", ilens[i]);
		EXPECT_EQ(0xee, self->b.buf[4]);
		EXPECT_EQ(0xee, self->b.buf[5 + ilens[i]]);
		/* the receive's buffer is untouched */
		EXPECT_EQ(0xee, self->b.buf[BUF_SIZE - 64]);
		EXPECT_EQ(0xee, self->b.buf[BUF_SIZE - 1]);
	}
}

/* inline sends up to max_inline; the buffer is reusable once posted */
TEST_F(dp, inline_send)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_sge ss[2], rs[3];
	uint8_t src[1024], want[1024];
	struct ibv_wc wc;
	uint32_t max, ilens[4];
	unsigned int i;

	ASSERT_EQ(0, ibv_query_qp(self->a.qp, &qa, IBV_QP_CAP, &ia));
	max = qa.cap.max_inline_data;
	ASSERT_GE(max, 256);
	ASSERT_LE(max, sizeof(src));
	ilens[0] = 1;
	ilens[1] = 63;
	ilens[2] = max - 1;
	ilens[3] = max;
	for (i = 0; i < 4; i++) {
		struct ibv_send_wr swr = { .wr_id = 900 + i, .sg_list = ss,
					   .num_sge = 2, .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED |
							 IBV_SEND_INLINE };
		uint32_t l0 = ilens[i] / 3;

		for (uint32_t j = 0; j < ilens[i]; j++)
			src[j] = want[j] = (uint8_t)(j * 7 + i + 1);
		/* not in any MR, no lkey: inline data is copied at post */
		ss[0] = (struct ibv_sge){ (uintptr_t)src, l0, 0 };
		ss[1] = (struct ibv_sge){ (uintptr_t)src + l0, ilens[i] - l0,
					  0xdeadbeef };
		make_sges(&self->b, ilens[i], 1, rs);
		memset(self->b.buf, 0xee, BUF_SIZE);
		ASSERT_EQ(0, post_recv1(self->b.qp, 1000 + i, rs, 3));
		ASSERT_EQ(0, post1(self->a.qp, &swr));
		memset(src, 0, sizeof(src));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(900 + i, wc.wr_id);
		EXPECT_EQ(IBV_WC_SEND, wc.opcode);
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(1000 + i, wc.wr_id);
		EXPECT_EQ(ilens[i], wc.byte_len);
		ss[0] = (struct ibv_sge){ (uintptr_t)want, ilens[i], 0 };
		ss[1] = (struct ibv_sge){ 0, 0, 0 };
		{
			struct ibv_sge w3[3] = { ss[0], ss[1], ss[1] };

			EXPECT_EQ(-1, cmp_sges(w3, rs)) TH_LOG("len %u",
							      ilens[i]);
		}
	}
	/* one byte more than max_inline is refused at post */
	{
		struct ibv_send_wr swr = { .sg_list = ss, .num_sge = 1,
					   .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_INLINE };

		ss[0] = (struct ibv_sge){ (uintptr_t)src, max + 1, 0 };
		EXPECT_NE(0, post1(self->a.qp, &swr));
	}
}

/* FETCH_ADD and CMP_SWP: the old value comes back, the new one stays */
TEST_F(dp, atomics)
{
	uint64_t *local = (uint64_t *)(self->a.buf + 64);
	uint64_t *remote = (uint64_t *)(self->b.buf + 128);
	struct ibv_sge sge = { (uintptr_t)local, 8, self->a.mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 77, .sg_list = &sge,
				   .num_sge = 1,
				   .send_flags = IBV_SEND_SIGNALED };
	struct ibv_wc wc;

	swr.wr.atomic.remote_addr = (uintptr_t)remote;
	swr.wr.atomic.rkey = self->b.mr->rkey;

	*remote = 0x1122334455667788ull;
	*local = 0;
	swr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	swr.wr.atomic.compare_add = 0x0100000000000023ull;
	ASSERT_EQ(0, post1(self->a.qp, &swr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_FETCH_ADD, wc.opcode);
	EXPECT_EQ(77, wc.wr_id);
	EXPECT_EQ(8, wc.byte_len);
	EXPECT_EQ(0x1122334455667788ull, *local);
	EXPECT_EQ(0x12223344556677abull, *remote);

	/* compare matches: swapped */
	*local = 0;
	swr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	swr.wr.atomic.compare_add = 0x12223344556677abull;
	swr.wr.atomic.swap = 0xfedcba9876543210ull;
	ASSERT_EQ(0, post1(self->a.qp, &swr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_COMP_SWAP, wc.opcode);
	EXPECT_EQ(8, wc.byte_len);
	EXPECT_EQ(0x12223344556677abull, *local);
	EXPECT_EQ(0xfedcba9876543210ull, *remote);

	/* compare differs: left alone, the old value still returned */
	*local = 0;
	swr.wr.atomic.compare_add = 5;
	swr.wr.atomic.swap = 6;
	ASSERT_EQ(0, post1(self->a.qp, &swr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_COMP_SWAP, wc.opcode);
	EXPECT_EQ(0xfedcba9876543210ull, *local);
	EXPECT_EQ(0xfedcba9876543210ull, *remote);

	/* a wrapping add, then the same value read back by RDMA READ */
	*local = 0;
	swr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	swr.wr.atomic.compare_add = 0x0123456789abcdf0ull;
	ASSERT_EQ(0, post1(self->a.qp, &swr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(0xfedcba9876543210ull, *local);
	EXPECT_EQ(0x0000000000000000ull, *remote);
}

/* 2 x 500 FETCH_ADD(1) from two QPs on one word: every old value once */
TEST_F(dp, atomics_concurrent)
{
	uint64_t *remote = (uint64_t *)(self->b.buf + 4096);
	uint64_t *res = (uint64_t *)(self->a.buf + 8192);
	static uint8_t seen[1000];
	struct ibv_qp *qps[2] = { self->a.qp, self->a.qp2 };
	struct ibv_cq *cqs[2] = { self->a.cq, self->a.cq2 };
	struct ibv_wc wc;
	int q, k, n, batch = 8;

	memset(seen, 0, sizeof(seen));
	*remote = 0;
	for (n = 0; n < 500; n += batch) {
		for (q = 0; q < 2; q++)
			for (k = 0; k < batch; k++) {
				int slot = q * 500 + n + k;
				struct ibv_sge sge = { (uintptr_t)&res[slot], 8,
						       self->a.mr->lkey };
				struct ibv_send_wr swr = {
					.wr_id = slot, .sg_list = &sge,
					.num_sge = 1,
					.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					.send_flags = IBV_SEND_SIGNALED };

				if (n + k >= 500)
					continue;
				res[slot] = ~0ull;
				swr.wr.atomic.remote_addr = (uintptr_t)remote;
				swr.wr.atomic.rkey = self->b.mr->rkey;
				swr.wr.atomic.compare_add = 1;
				ASSERT_EQ(0, post1(qps[q], &swr));
			}
		for (q = 0; q < 2; q++)
			for (k = 0; k < batch && n + k < 500; k++) {
				ASSERT_EQ(IBV_WC_SUCCESS,
					  poll_one(cqs[q], &wc));
				EXPECT_EQ(IBV_WC_FETCH_ADD, wc.opcode);
			}
	}
	EXPECT_EQ(1000, *remote);
	for (k = 0; k < 1000; k++) {
		ASSERT_LT(res[k], 1000) TH_LOG("slot %d", k);
		EXPECT_EQ(0, seen[res[k]]) TH_LOG("old value %lu twice",
						  (unsigned long)res[k]);
		seen[res[k]] = 1;
	}
}

/* an atomic on a misaligned address is an invalid request; the QP errs */
TEST_F(dp, atomic_misaligned)
{
	uint64_t *local = (uint64_t *)(self->a.buf + 64);
	struct ibv_sge sge = { (uintptr_t)local, 8, self->a.mr->lkey };
	struct ibv_send_wr swr[2] = {
		{ .wr_id = 1, .sg_list = &sge, .num_sge = 1, .next = &swr[1],
		  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
		  .send_flags = IBV_SEND_SIGNALED },
		{ .wr_id = 2, .sg_list = &sge, .num_sge = 1,
		  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
		  .send_flags = IBV_SEND_SIGNALED } };
	struct ibv_wc wc;
	int i;

	memset(self->b.buf, 0, 256);
	swr[0].wr.atomic.remote_addr = (uintptr_t)self->b.buf + 132;
	swr[0].wr.atomic.rkey = self->b.mr->rkey;
	swr[0].wr.atomic.compare_add = 1;
	swr[1].wr.atomic = swr[0].wr.atomic;
	swr[1].wr.atomic.remote_addr = (uintptr_t)self->b.buf + 128;
	ASSERT_EQ(0, post1(self->a.qp, swr));
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, poll_one(self->a.cq, &wc));
	EXPECT_EQ(1, wc.wr_id);
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, poll_one(self->a.cq, &wc));
	EXPECT_EQ(2, wc.wr_id);
	for (i = 0; i < 256; i++)
		ASSERT_EQ(0, self->b.buf[i]) TH_LOG("byte %d", i);
}

/*
 * Post @wr (and a second WRITE after it) on a's QP; the first completes
 * with @status, the second is flushed.
 */
static void expect_err_on(struct __test_metadata *_metadata, struct side *a,
			  struct ibv_qp *qp, struct ibv_cq *cq,
			  struct ibv_send_wr *wr, int status)
{
	struct ibv_sge sge = { (uintptr_t)a->buf, 16, a->mr->lkey };
	struct ibv_send_wr next = { .wr_id = 99, .sg_list = &sge,
				    .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				    .send_flags = IBV_SEND_SIGNALED };
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	struct ibv_wc wc;

	next.wr.rdma = wr->wr.rdma;
	wr->next = &next;
	wr->wr_id = 98;
	wr->send_flags |= IBV_SEND_SIGNALED;
	ASSERT_EQ(0, post1(qp, wr));
	EXPECT_EQ(status, poll_one(cq, &wc));
	EXPECT_EQ(98, wc.wr_id);
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, poll_one(cq, &wc));
	EXPECT_EQ(99, wc.wr_id);
	ASSERT_EQ(0, ibv_query_qp(qp, &qa, IBV_QP_STATE, &ia));
	EXPECT_EQ(IBV_QPS_ERR, qa.qp_state);
}

#define expect_err(_m, a, wr, status) \
	expect_err_on(_m, a, (a)->qp, (a)->cq, wr, status)

/*
 * RTS -> RTS (here: a new min_rnr_timer, the state in the mask) keeps the
 * PSN stream: the SEND after it must land, not be taken for a duplicate.
 */
TEST_F(dp, rts_to_rts_keeps_psn)
{
	struct ibv_sge ss = { (uintptr_t)self->a.buf, 3000, self->a.mr->lkey };
	struct ibv_sge rs = { (uintptr_t)self->b.buf, 3000, self->b.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_RTS,
				  .min_rnr_timer = 2 };
	struct ibv_wc wc;
	int round, i;

	for (round = 0; round < 3; round++) {
		for (i = 0; i < 3000; i++)
			self->a.buf[i] = (uint8_t)(i * 13 + round * 7 + 1);
		memset(self->b.buf, 0, 3000);
		ASSERT_EQ(0, post_recv1(self->b.qp, 10 + round, &rs, 1));
		wr.wr_id = 20 + round;
		ASSERT_EQ(0, post1(self->a.qp, &wr));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		ASSERT_EQ(10 + round, wc.wr_id);
		ASSERT_EQ(3000, wc.byte_len);
		ASSERT_EQ(0, memcmp(self->a.buf, self->b.buf, 3000))
			TH_LOG("round %d: data not placed", round);
		/* both sides, as a ULP adjusting its QPs would */
		ASSERT_EQ(0, ibv_modify_qp(self->a.qp, &qa, IBV_QP_STATE |
					   IBV_QP_MIN_RNR_TIMER));
		ASSERT_EQ(0, ibv_modify_qp(self->b.qp, &qa, IBV_QP_STATE |
					   IBV_QP_MIN_RNR_TIMER));
	}
}

TEST_F(dp, err_bad_lkey)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 100,
			       self->a.mr->lkey ^ 0x80 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND };
	struct ibv_sge rs = { (uintptr_t)self->b.buf, 100, self->b.mr->lkey };

	ASSERT_EQ(0, post_recv1(self->b.qp, 5, &rs, 1));
	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.rdma.rkey = self->b.mr->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_LOC_PROT_ERR);
}

/*
 * A receive WQE that fails its own checks at the responder: the receive
 * completes there with the local error, the SEND that met it with the
 * error the responder's NAK names, and the rest is flushed.  A bad lkey
 * (wrong tag): LOC_PROT_ERR / REM_OP_ERR; a buffer too short for the
 * message: LOC_LEN_ERR / REM_INV_REQ_ERR.
 */
static void recv_wqe_fails(struct __test_metadata *_metadata, struct side *a,
			   struct side *b, struct ibv_sge *rs, int rstatus,
			   int sstatus)
{
	struct ibv_sge sge = { (uintptr_t)a->buf, 100, a->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND };
	struct ibv_wc wc;

	ASSERT_EQ(0, post_recv1(b->qp, 5, rs, 1));
	wr.wr.rdma.remote_addr = (uintptr_t)b->buf;
	wr.wr.rdma.rkey = b->mr->rkey;
	expect_err(_metadata, a, &wr, sstatus);
	EXPECT_EQ(rstatus, poll_one(b->cq, &wc));
	EXPECT_EQ(5, wc.wr_id);
	EXPECT_EQ(IBV_QPS_ERR, remu_qp_state(b->qp));
}

TEST_F(dp, err_recv_bad_lkey)
{
	struct ibv_sge rs = { (uintptr_t)self->b.buf, 100,
			      self->b.mr->lkey ^ 0x80 };

	recv_wqe_fails(_metadata, &self->a, &self->b, &rs,
		       IBV_WC_LOC_PROT_ERR, IBV_WC_REM_OP_ERR);
}

TEST_F(dp, err_recv_too_short)
{
	struct ibv_sge rs = { (uintptr_t)self->b.buf, 50, self->b.mr->lkey };

	recv_wqe_fails(_metadata, &self->a, &self->b, &rs,
		       IBV_WC_LOC_LEN_ERR, IBV_WC_REM_INV_REQ_ERR);
}

/* the receive's lkey names an MR of another PD (as after a rereg of its PD) */
TEST_F(dp, err_recv_other_pd)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(self->b.ctx);
	struct ibv_mr *mr2 = pd2 ? ibv_reg_mr(pd2, self->b.buf, 4096,
					      IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_sge rs = { (uintptr_t)self->b.buf, 100, 0 };

	ASSERT_NE(NULL, mr2);
	rs.lkey = mr2->lkey;
	recv_wqe_fails(_metadata, &self->a, &self->b, &rs,
		       IBV_WC_LOC_PROT_ERR, IBV_WC_REM_OP_ERR);
	EXPECT_EQ(0, ibv_dereg_mr(mr2));
	EXPECT_EQ(0, ibv_dealloc_pd(pd2));
}

/* the receive buffer runs past its MR's end, in the message's 2nd packet */
TEST_F(dp, err_recv_past_mr_end)
{
	struct ibv_mr *mr = ibv_reg_mr(self->b.pd, self->b.buf, 6000,
				       IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge rs = { (uintptr_t)self->b.buf, 10000, 0 };
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 9000, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND };
	struct ibv_wc wc;

	ASSERT_NE(NULL, mr);
	rs.lkey = mr->lkey;
	ASSERT_EQ(0, post_recv1(self->b.qp, 5, &rs, 1));
	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.rdma.rkey = self->b.mr->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_OP_ERR);
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR, poll_one(self->b.cq, &wc));
	EXPECT_EQ(5, wc.wr_id);
	EXPECT_EQ(0, ibv_dereg_mr(mr));
}

TEST_F(dp, err_lkey_out_of_bounds)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf + BUF_SIZE - 10, 100,
			       self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };

	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.rdma.rkey = self->b.mr->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_LOC_PROT_ERR);
}

/* an lkey of an MR in another PD of the same context: LOC_PROT_ERR */
TEST_F(dp, err_lkey_other_pd)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(self->a.ctx);
	struct ibv_mr *mr2;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };

	ASSERT_NE(NULL, pd2);
	mr2 = ibv_reg_mr(pd2, self->a.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr2);
	sge = (struct ibv_sge){ (uintptr_t)self->a.buf, 100, mr2->lkey };
	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.rdma.rkey = self->b.mr->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_LOC_PROT_ERR);
	ibv_dereg_mr(mr2);
	ibv_dealloc_pd(pd2);
}

/* an rkey of an MR in another PD on the responder: REM_ACCESS_ERR, and
 * not a byte of it written */
TEST_F(dp, err_rkey_other_pd)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(self->b.ctx);
	uint8_t *tgt = aligned_alloc(4096, 4096);
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 100, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };
	struct ibv_mr *mr2;
	int i;

	ASSERT_NE(NULL, pd2);
	ASSERT_NE(NULL, tgt);
	memset(tgt, 0x5a, 4096);
	memset(self->a.buf, 0xa5, 100);
	mr2 = ibv_reg_mr(pd2, tgt, 4096, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NE(NULL, mr2);
	wr.wr.rdma.remote_addr = (uintptr_t)tgt;
	wr.wr.rdma.rkey = mr2->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_ACCESS_ERR);
	for (i = 0; i < 4096; i++)
		ASSERT_EQ(0x5a, tgt[i]);
	ibv_dereg_mr(mr2);
	ibv_dealloc_pd(pd2);
	free(tgt);
}

/* keys of a deregistered MR: LOC_PROT_ERR locally, REM_ACCESS_ERR remotely */
TEST_F(dp, err_destroyed_mr_keys)
{
	uint8_t *tmp = aligned_alloc(4096, 4096);
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };
	struct ibv_mr *gone;
	uint32_t lkey, rkey;

	ASSERT_NE(NULL, tmp);
	gone = ibv_reg_mr(self->b.pd, tmp, 4096, IBV_ACCESS_LOCAL_WRITE |
			  IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NE(NULL, gone);
	rkey = gone->rkey;
	ASSERT_EQ(0, ibv_dereg_mr(gone));
	sge = (struct ibv_sge){ (uintptr_t)self->a.buf, 64, self->a.mr->lkey };
	wr.wr.rdma.remote_addr = (uintptr_t)tmp;
	wr.wr.rdma.rkey = rkey;
	expect_err_on(_metadata, &self->a, self->a.qp, self->a.cq, &wr,
		      IBV_WC_REM_ACCESS_ERR);

	gone = ibv_reg_mr(self->a.pd, tmp, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, gone);
	lkey = gone->lkey;
	ASSERT_EQ(0, ibv_dereg_mr(gone));
	sge = (struct ibv_sge){ (uintptr_t)tmp, 64, lkey };
	wr.next = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.rdma.rkey = self->b.mr->rkey;
	expect_err_on(_metadata, &self->a, self->a.qp2, self->a.cq2, &wr,
		      IBV_WC_LOC_PROT_ERR);
	free(tmp);
}

TEST_F(dp, err_bad_rkey)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 100, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };

	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.rdma.rkey = self->b.mr->rkey ^ 0x80;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(dp, err_remote_out_of_bounds)
{
	int i;
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 100, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };

	memset(self->b.buf + BUF_SIZE - 64, 0xee, 64);
	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf + BUF_SIZE - 10;
	wr.wr.rdma.rkey = self->b.mr->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_ACCESS_ERR);
	for (i = 0; i < 64; i++)
		ASSERT_EQ(0xee, self->b.buf[BUF_SIZE - 64 + i]);
}

/*
 * A multi-packet WRITE whose last packet would run one byte past the end
 * of the MR: refused as a whole, before any of its packets is placed.
 */
TEST_F(dp, err_remote_out_of_bounds_late)
{
	const uint32_t len = 3 * 4096 + 100;
	struct ibv_sge sge = { (uintptr_t)self->a.buf, len, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };
	uint8_t *tgt = self->b.buf + BUF_SIZE - len + 1;
	uint32_t i;

	memset(self->a.buf, 0x11, len);
	memset(tgt, 0xee, len - 1);
	wr.wr.rdma.remote_addr = (uintptr_t)tgt;
	wr.wr.rdma.rkey = self->b.mr->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_ACCESS_ERR);
	for (i = 0; i < len - 1; i++)
		ASSERT_EQ(0xee, tgt[i]) TH_LOG("byte %u was written", i);
}

TEST_F(dp, err_read_out_of_bounds)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 100, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ };

	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf - 4;
	wr.wr.rdma.rkey = self->b.mr->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_ACCESS_ERR);
}

/* an MR with REMOTE_READ only refuses WRITE and atomics */
TEST_F(dp, err_no_remote_right)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 8, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };
	struct ibv_mr *ro;
	int j;

	ro = ibv_reg_mr(self->b.pd, self->b.buf, 8192, IBV_ACCESS_REMOTE_READ);
	ASSERT_NE(NULL, ro);
	memset(self->b.buf, 0x3c, 64);
	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.rdma.rkey = ro->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_ACCESS_ERR);

	/* the first QP pair is in ERR now: the atomic on the second */
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.atomic.rkey = ro->rkey;
	wr.wr.atomic.compare_add = 1;
	expect_err_on(_metadata, &self->a, self->a.qp2, self->a.cq2, &wr,
		      IBV_WC_REM_ACCESS_ERR);
	for (j = 0; j < 64; j++)
		ASSERT_EQ(0x3c, self->b.buf[j]);
	ibv_dereg_mr(ro);
}

/* READ from an MR with no REMOTE_READ */
TEST_F(dp, err_read_no_right)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 100, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ };
	struct ibv_mr *wo;

	wo = ibv_reg_mr(self->b.pd, self->b.buf, 8192,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NE(NULL, wo);
	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.rdma.rkey = wo->rkey;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_ACCESS_ERR);
	ibv_dereg_mr(wo);
}

/*
 * qp_access_flags with bits that mean something only for an MR
 * (LOCAL_WRITE, ON_DEMAND, HUGETLB, RELAXED_ORDERING): mlx5 accepts them
 * at INIT and keeps only the remote rights, which query_qp returns and
 * the responder enforces.  b's QP gets REMOTE_WRITE with all of them: a
 * WRITE lands byte for byte, a READ (the MR allows it) is refused.
 */
TEST_F(dp, qp_access_mr_bits)
{
	const unsigned int mr_only = IBV_ACCESS_LOCAL_WRITE |
				     IBV_ACCESS_ON_DEMAND |
				     IBV_ACCESS_HUGETLB |
				     IBV_ACCESS_RELAXED_ORDERING;
	struct remu_conn_attr ra = REMU_RC_ATTR(0x123);
	struct remu_conn_dest d = { .qpn = self->a.qp->qp_num,
				    .gid = self->a.gid,
				    .mtu = remu_min_mtu(self->a.mtu,
							self->b.mtu) };
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 3000,
			       self->a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr q;
	struct ibv_wc wc;
	int i;

	ra.access = IBV_ACCESS_REMOTE_WRITE | mr_only;
	ra.reset = true;
	ASSERT_EQ(0, remu_qp_connect(self->b.qp, &ra, GID_INDEX, &d));
	ASSERT_EQ(0, ibv_query_qp(self->b.qp, &q, IBV_QP_ACCESS_FLAGS, &qia));
	EXPECT_EQ(IBV_ACCESS_REMOTE_WRITE, q.qp_access_flags);

	for (i = 0; i < 3000; i++)
		self->a.buf[i] = (uint8_t)(i * 7 + 3);
	memset(self->b.buf, 0xee, 3002);
	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf + 1;
	wr.wr.rdma.rkey = self->b.mr->rkey;
	ASSERT_EQ(0, post1(self->a.qp, &wr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(-1, remu_cmp(self->a.buf, self->b.buf + 1, 3000));
	EXPECT_EQ(0xee, self->b.buf[0]);
	EXPECT_EQ(0xee, self->b.buf[3001]);

	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = 0;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_ACCESS_ERR);
}

/* a port counter of @dev, from sysfs; -1 if unreadable */
static long hw_counter(const char *dev, const char *name)
{
	return remu_hw_counter(dev, name, false);
}

/* RNR: no receive yet; RC retries until one is posted */
TEST_F(dp, rnr_retry)
{
	long rnr0 = hw_counter(variant->dev_a, "send_rnr_err");

	struct ibv_sge ss[3], rs[3];
	struct ibv_send_wr swr = { .wr_id = 11, .sg_list = ss, .num_sge = 3,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED };
	struct timespec d = { 0, 200 * 1000 * 1000 };
	struct ibv_wc wc;

	make_sges(&self->a, 5000, 0, ss);
	make_sges(&self->b, 5000, 1, rs);
	fill_sges(ss, 42);
	memset(self->b.buf, 0xee, BUF_SIZE);
	ASSERT_EQ(0, post1(self->a.qp, &swr));
	nanosleep(&d, NULL);
	EXPECT_EQ(0, remu_poll_cq(self->a.cq, 1, &wc));
	EXPECT_EQ(0, remu_poll_cq(self->b.cq, 1, &wc));
	ASSERT_EQ(0, post_recv1(self->b.qp, 12, rs, 3));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(11, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
	EXPECT_EQ(12, wc.wr_id);
	EXPECT_EQ(5000, wc.byte_len);
	EXPECT_EQ(-1, cmp_sges(ss, rs));
	/* and it was RNR NAKed, not held: the sender counted RNR NAKs */
	ASSERT_GE(rnr0, 0);
	EXPECT_GT(hw_counter(variant->dev_a, "send_rnr_err"), rnr0);
}

/*
 * RNR over a stream: 48 SENDs of 1 to 20000 bytes (up to five packets
 * each) against a receiver that posts its receives late and four at a
 * time, every 30 ms, so the sender meets RNR NAKs again and again (and,
 * in remu_netem_test.sh, loss, reordering and duplicates on top: a lost
 * RNR NAK, a resend overtaken by a duplicate).  Every message must land
 * once, in order, byte for byte, and both sides complete in order.
 * Whatever the speed of either side (a debug kernel under netem sends
 * more slowly than the receiver posts), the receiver holds back at
 * messages 0, 16 and 32, with every receive it posted used, until the
 * sender counted a new RNR NAK: at least three, by construction.
 */
#define RNR_HOLD	16
#define RNR_MSGS	48
#define RNR_SLOT	20480

static uint32_t rnr_len(unsigned int i)
{
	return (i * 7919u) % RNR_SLOT % 20000 + 1;
}

TEST_F(dp, rnr_stream)
{
	long rnr0 = hw_counter(variant->dev_a, "send_rnr_err");
	unsigned int posted = 0, sent = 0, rposted = 0, rdone = 0, i;
	double start = remu_now(), next_recv = start + 0.1;
	long held = -1;		/* the count when the current hold began */
	unsigned int released = ~0u;	/* the hold point last let go */
	struct ibv_wc wc;
	bool hold;

	for (i = 0; i < RNR_MSGS; i++)
		for (uint32_t j = 0; j < rnr_len(i); j++)
			self->a.buf[i * RNR_SLOT + j] = (uint8_t)(i * 13 + j * 7 +
								  (j >> 9));
	memset(self->b.buf, 0xee, BUF_SIZE);

	while (sent < RNR_MSGS || rdone < RNR_MSGS) {
		ASSERT_LT(remu_now() - start, 60)
			TH_LOG("stuck: %u/%u sent, %u/%u received", sent,
			       posted, rdone, rposted);
		/* the sender keeps up to 8 SENDs outstanding */
		while (posted < RNR_MSGS && posted - sent < 8) {
			struct ibv_sge sge = {
				(uintptr_t)self->a.buf + posted * RNR_SLOT,
				rnr_len(posted), self->a.mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = 1000 + posted, .sg_list = &sge,
				.num_sge = 1, .opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED };

			ASSERT_EQ(0, post1(self->a.qp, &wr));
			posted++;
		}
		/*
		 * The receiver: at a hold point, with nothing posted, wait
		 * for an RNR NAK counted after the hold began (the sender,
		 * rnr_retry 7, keeps retrying the SEND).
		 */
		hold = false;
		if (rposted < RNR_MSGS && rposted % RNR_HOLD == 0 &&
		    rposted != released) {
			/* first every receive posted so far must be used */
			hold = true;
			if (rposted == rdone) {
				long c = hw_counter(variant->dev_a,
						    "send_rnr_err");

				ASSERT_GE(c, 0);
				if (held < 0)
					held = c;
				hold = c <= held;
			}
			if (hold) {
				usleep(1000);
			} else {
				held = -1;
				released = rposted;
				next_recv = 0;	/* post at once */
			}
		}
		/* four more receives every 30 ms */
		if (!hold && rposted < RNR_MSGS && remu_now() >= next_recv) {
			/* (at most 16 outstanding: max_recv_wr) */
			for (i = 0; i < 4 && rposted < RNR_MSGS &&
				    rposted - rdone < 16; i++) {
				struct ibv_sge sge = {
					(uintptr_t)self->b.buf +
						rposted * RNR_SLOT,
					RNR_SLOT, self->b.mr->lkey };

				ASSERT_EQ(0, post_recv1(self->b.qp,
							2000 + rposted,
							&sge, 1));
				rposted++;
			}
			next_recv = remu_now() + 0.03;
		}
		if (remu_poll_cq(self->a.cq, 1, &wc) == 1) {
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
			ASSERT_EQ(1000 + sent, wc.wr_id);
			sent++;
		}
		if (remu_poll_cq(self->b.cq, 1, &wc) == 1) {
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
			ASSERT_EQ(2000 + rdone, wc.wr_id);
			ASSERT_EQ(rnr_len(rdone), wc.byte_len);
			ASSERT_EQ(0, memcmp(self->a.buf + rdone * RNR_SLOT,
					    self->b.buf + rdone * RNR_SLOT,
					    rnr_len(rdone)))
				TH_LOG("message %u", rdone);
			/* and not a byte more */
			ASSERT_EQ(0xee, self->b.buf[rdone * RNR_SLOT +
						    rnr_len(rdone)]);
			rdone++;
		}
	}
	ASSERT_GE(rnr0, 0);
	EXPECT_GE(hw_counter(variant->dev_a, "send_rnr_err"),
		  rnr0 + RNR_MSGS / RNR_HOLD);
}

/* RNR with rnr_retry 0 (the second QP pair): RNR_RETRY_EXC_ERR at once */
TEST_F(dp, rnr_retry_exceeded)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 100, self->a.mr->lkey };
	struct ibv_send_wr swr[2] = {
		{ .wr_id = 21, .sg_list = &sge, .num_sge = 1, .next = &swr[1],
		  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
		{ .wr_id = 22, .sg_list = &sge, .num_sge = 1,
		  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED } };
	struct ibv_wc wc;

	ASSERT_EQ(0, post1(self->a.qp2, swr));
	EXPECT_EQ(IBV_WC_RNR_RETRY_EXC_ERR, poll_one(self->a.cq2, &wc));
	EXPECT_EQ(21, wc.wr_id);
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, poll_one(self->a.cq2, &wc));
	EXPECT_EQ(22, wc.wr_id);
}

/*
 * The retransmit timer on its own, and retry exhaustion.  Both cut the
 * wire by dropping every packet remu0 sends (netem loss 100% on v0, set
 * with tc), so they run only on remu0_remu1 with REMU_DP_OUTAGE=1, which
 * remu_netem_test.sh sets; anywhere else they are skipped.
 */
static int outage_ok(const char *dev_b)
{
	return getenv("REMU_DP_OUTAGE") && strcmp(dev_b, "remu0");
}

static int wire_cut(int on)
{
	return remu_sh(on ? "tc qdisc replace dev v0 root netem loss 100%" :
			    "tc qdisc del dev v0 root");
}

/* both ends of the first QP pair through RESET, connected again */
static int reconnect(struct side *a, struct side *b)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_RESET };

	if (ibv_modify_qp(a->qp, &qa, IBV_QP_STATE) ||
	    ibv_modify_qp(b->qp, &qa, IBV_QP_STATE))
		return -1;
	if (qp_connect(a->qp, a, b->qp, b, 7))
		return -1;
	return qp_connect(b->qp, b, a->qp, a, 7);
}

/*
 * A 64 KiB WRITE sent into a 300 ms outage: nothing completes during it,
 * the timer (QP timeout 17: 537 ms, 7 retries) resends, the WRITE
 * completes with every byte in place and the completer counted the
 * retransmission.
 */
TEST_F(dp, outage_timer)
{
	struct ibv_sge ss[3], rs[3];
	struct ibv_send_wr swr = { .wr_id = 31, .sg_list = ss, .num_sge = 3,
				   .opcode = IBV_WR_RDMA_WRITE,
				   .send_flags = IBV_SEND_SIGNALED };
	struct timespec d = { 0, 300 * 1000 * 1000 };
	struct ibv_wc wc;
	long r0 = hw_counter(variant->dev_a, "completer_retry_err");
	int n, st;

	if (!outage_ok(variant->dev_b))
		SKIP(return, "needs REMU_DP_OUTAGE=1 and remu0_remu1");
	ASSERT_GE(r0, 0);
	qp_timeout = 17;
	st = reconnect(&self->a, &self->b);
	qp_timeout = 14;
	ASSERT_EQ(0, st);
	make_sges(&self->a, 65537, 0, ss);
	fill_sges(ss, 99);
	memset(self->b.buf, 0xee, BUF_SIZE);
	rs[0] = (struct ibv_sge){ (uintptr_t)self->b.buf + 5, 65537, 0 };
	rs[1] = (struct ibv_sge){ 0, 0, 0 };
	rs[2] = (struct ibv_sge){ 0, 0, 0 };
	swr.wr.rdma.remote_addr = rs[0].addr;
	swr.wr.rdma.rkey = self->b.mr->rkey;
	ASSERT_EQ(0, wire_cut(1));
	st = post1(self->a.qp, &swr);
	nanosleep(&d, NULL);
	n = remu_poll_cq(self->a.cq, 1, &wc);
	ASSERT_EQ(0, wire_cut(0));
	ASSERT_EQ(0, st);
	EXPECT_EQ(0, n);
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(31, wc.wr_id);
	EXPECT_EQ(-1, cmp_sges(ss, rs));
	EXPECT_EQ(0xee, self->b.buf[4]);
	EXPECT_EQ(0xee, self->b.buf[5 + 65537]);
	EXPECT_GT(hw_counter(variant->dev_a, "completer_retry_err"), r0);
}

/*
 * The wire stays cut: after retry_cnt (7) timer retransmissions the WRITE
 * completes with RETRY_EXC_ERR, the QP is in ERR, the WQE after it is
 * flushed, and retry_exceeded_err counted it.
 */
TEST_F(dp, retry_exceeded)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 3000, self->a.mr->lkey };
	struct ibv_send_wr swr[2] = {
		{ .wr_id = 41, .sg_list = &sge, .num_sge = 1, .next = &swr[1],
		  .opcode = IBV_WR_RDMA_WRITE,
		  .send_flags = IBV_SEND_SIGNALED },
		{ .wr_id = 42, .sg_list = &sge, .num_sge = 1,
		  .opcode = IBV_WR_RDMA_WRITE,
		  .send_flags = IBV_SEND_SIGNALED } };
	long x0 = hw_counter(variant->dev_a, "retry_exceeded_err");
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_wc wc;
	int st, s1, s2;

	if (!outage_ok(variant->dev_b))
		SKIP(return, "needs REMU_DP_OUTAGE=1 and remu0_remu1");
	ASSERT_GE(x0, 0);
	swr[0].wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	swr[0].wr.rdma.rkey = self->b.mr->rkey;
	swr[1].wr.rdma = swr[0].wr.rdma;
	ASSERT_EQ(0, wire_cut(1));
	st = post1(self->a.qp, swr);
	s1 = st ? -2 : poll_one(self->a.cq, &wc);
	ASSERT_EQ(0, wire_cut(0));
	ASSERT_EQ(0, st);
	ASSERT_EQ(IBV_WC_RETRY_EXC_ERR, s1);
	EXPECT_EQ(41, wc.wr_id);
	s2 = poll_one(self->a.cq, &wc);
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, s2);
	EXPECT_EQ(42, wc.wr_id);
	ASSERT_EQ(0, ibv_query_qp(self->a.qp, &qa, IBV_QP_STATE, &ia));
	EXPECT_EQ(IBV_QPS_ERR, qa.qp_state);
	EXPECT_GT(hw_counter(variant->dev_a, "retry_exceeded_err"), x0);
}

/*
 * drop (@on) or pass again every RoCE packet remu0 sends on v0 whose PSN
 * is one of @psns (u32 matches at offset 36 from the IPv4 header: IP 20,
 * UDP 8, then the BTH word that holds the PSN)
 */
static int drop_psns(int on, const uint32_t *psns, int n)
{
	char cmd[256];
	int i;

	if (!on)
		return remu_sh("tc qdisc del dev v0 clsact");
	if (remu_sh("tc qdisc replace dev v0 clsact"))
		return -1;
	for (i = 0; i < n; i++) {
		snprintf(cmd, sizeof(cmd),
			 "tc filter add dev v0 egress protocol ip u32 match ip protocol 17 0xff match ip dport 4791 0xffff match u32 0x%06x 0x00ffffff at 36 action drop",
			 psns[i]);
		if (remu_sh(cmd))
			return -1;
	}
	return 0;
}

/*
 * A resend asks for an ACK.  A four-packet WRITE (PSNs 0x123..0x126)
 * whose last two packets never arrive (dropped on v0, for good): remu1
 * takes the first two, neither asking for an ACK, without a word.  Each
 * timer go-back sends them again, now duplicates; the first packet of a
 * go-back carries AckReq, so remu1 answers it, and remu0 learns what got
 * through (without it the responder stayed silent through every resend).
 * The rest never arrives: RETRY_EXC_ERR all the same.
 */
TEST_F(dp, resend_asks_ack)
{
	static const uint32_t lost[] = { 0x125, 0x126 };
	/* four packets of the path MTU, the last one short */
	uint32_t mtu = 128u << remu_min_mtu(self->a.mtu, self->b.mtu);
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 3 * mtu + 100,
			       self->a.mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 45, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_RDMA_WRITE,
				   .send_flags = IBV_SEND_SIGNALED };
	long sent0 = remu_hw_counter(variant->dev_b, "sent_pkts", true);
	long dup0 = hw_counter(variant->dev_b, "duplicate_request");
	struct ibv_wc wc;
	int st, s1;

	if (!outage_ok(variant->dev_b))
		SKIP(return, "needs REMU_DP_OUTAGE=1 and remu0_remu1");
	ASSERT_GE(sent0, 0);
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	swr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	swr.wr.rdma.rkey = self->b.mr->rkey;
	st = drop_psns(1, lost, 2);
	if (!st)
		st = post1(self->a.qp, &swr);
	s1 = st ? -2 : poll_one(self->a.cq, &wc);
	ASSERT_EQ(0, drop_psns(0, NULL, 0));
	ASSERT_EQ(0, st);
	ASSERT_EQ(IBV_WC_RETRY_EXC_ERR, s1);
	EXPECT_EQ(45, wc.wr_id);
	/* the resends reached remu1 as duplicates, and it answered */
	EXPECT_LT(dup0, remu_hw_counter(variant->dev_b, "duplicate_request",
					true));
	EXPECT_LT(sent0, hw_counter(variant->dev_b, "sent_pkts"));
}

/*
 * Saved atomic results do not outlive RESET.  A FETCH_ADD at the first
 * PSN; both QPs through RESET and connected again with the same PSNs; a
 * FETCH_ADD at that PSN again, whose ACK is lost (everything remu1 sends
 * is dropped for 300 ms; QP timeout 17: 537 ms).  The resend is a
 * duplicate and is answered with the saved result: it must be the new
 * connection's (500), not the one saved before the RESET (100).
 */
TEST_F(dp, atomic_replay_after_reset)
{
	volatile uint64_t *target = (uint64_t *)(self->b.buf + 64);
	volatile uint64_t *res = (uint64_t *)self->a.buf;
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 8, self->a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 51, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				  .send_flags = IBV_SEND_SIGNALED };
	struct timespec d = { 0, 300 * 1000 * 1000 };
	struct ibv_wc wc;
	int n, st;

	if (!outage_ok(variant->dev_b))
		SKIP(return, "needs REMU_DP_OUTAGE=1 and remu0_remu1");
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = self->b.mr->rkey;
	wr.wr.atomic.compare_add = 1;
	*target = 100;
	ASSERT_EQ(0, post1(self->a.qp, &wr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(100, *res);
	EXPECT_EQ(101, *target);

	qp_timeout = 17;
	st = reconnect(&self->a, &self->b);
	qp_timeout = 14;
	ASSERT_EQ(0, st);
	*target = 500;
	*res = 0;
	wr.wr_id = 52;
	ASSERT_EQ(0, remu_sh("ip netns exec peer tc qdisc replace dev v1 root netem loss 100%"));
	st = post1(self->a.qp, &wr);
	nanosleep(&d, NULL);
	n = remu_poll_cq(self->a.cq, 1, &wc);
	ASSERT_EQ(0, remu_sh("ip netns exec peer tc qdisc del dev v1 root"));
	ASSERT_EQ(0, st);
	EXPECT_EQ(0, n);
	/* executed once, while the ACK was being dropped */
	EXPECT_EQ(501, *target);
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(52, wc.wr_id);
	EXPECT_EQ(500, *res);
	EXPECT_EQ(501, *target);
}

/*
 * Four rounds of 16 WRs posted at once from @a to @b, READs (1 B to 9 KiB,
 * several packets each) and every fifth a FETCH_ADD(1) on @target, which
 * holds @base: 0 when every WR completed in order and every byte and
 * returned value is right, else the number of the first wrong one, or -1
 * when a post or a poll failed.
 */
static int read_storm(struct side *a, struct side *b, uint64_t *target,
		      uint64_t base, uint32_t seed)
{
	struct ibv_send_wr wr[16];
	struct ibv_sge sge[16];
	uint64_t adds = 0;
	unsigned int round, i;
	struct ibv_wc wc;

	*target = base;
	for (round = 0; round < 4; round++) {
		memset(a->buf, 0xee, 170000 + 16 * 8);
		for (i = 0; i < 16; i++) {
			uint8_t *src = b->buf + 200000 + i * 10000 + 3;
			uint32_t len = 1 + (i * 2099 + round * 313 + seed) % 9000;

			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = i;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].send_flags = IBV_SEND_SIGNALED;
			wr[i].next = i < 15 ? &wr[i + 1] : NULL;
			if (i % 5 == 4) {
				sge[i] = (struct ibv_sge){
					(uintptr_t)a->buf + 170000 + i * 8, 8,
					a->mr->lkey };
				wr[i].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
				wr[i].wr.atomic.remote_addr = (uintptr_t)target;
				wr[i].wr.atomic.rkey = b->mr->rkey;
				wr[i].wr.atomic.compare_add = 1;
				continue;
			}
			for (uint32_t k = 0; k < len; k++)
				src[k] = (uint8_t)(k * 7 + seed + round + (k >> 9));
			sge[i] = (struct ibv_sge){
				(uintptr_t)a->buf + i * 10000 + 1, len,
				a->mr->lkey };
			wr[i].opcode = IBV_WR_RDMA_READ;
			wr[i].wr.rdma.remote_addr = (uintptr_t)src;
			wr[i].wr.rdma.rkey = b->mr->rkey;
		}
		if (remu_post_send(a->qp, wr))
			return -1;
		for (i = 0; i < 16; i++)
			if (poll_one(a->cq, &wc) != IBV_WC_SUCCESS ||
			    wc.wr_id != i)
				return -1;
		for (i = 0; i < 16; i++) {
			uint8_t *dst = (uint8_t *)(uintptr_t)sge[i].addr;

			if (wr[i].opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
				if (*(uint64_t *)dst != base + adds++)
					return 1 + round * 16 + i;
				continue;
			}
			if (memcmp(dst, b->buf + 200000 + i * 10000 + 3,
				   sge[i].length) || dst[-1] != 0xee ||
			    dst[sge[i].length] != 0xee)
				return 1 + round * 16 + i;
		}
	}
	return *target == base + adds ? 0 : 65;
}

/* @qp from RTS to SQD, to SQD with @rd READs/atomics each way, to RTS */
static int sqd_rd_atomic(struct ibv_qp *qp, uint8_t rd)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_SQD };
	struct ibv_qp_init_attr qia;

	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE))
		return -1;
	/* the drain is over once the state query says SQD, not draining */
	for (int i = 0; i < 1000; i++) {
		if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia))
			return -1;
		if (qa.qp_state == IBV_QPS_SQD && !qa.sq_draining)
			break;
		usleep(1000);
	}
	qa.qp_state = IBV_QPS_SQD;
	qa.max_rd_atomic = rd;
	qa.max_dest_rd_atomic = rd;
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC |
			  IBV_QP_MAX_DEST_RD_ATOMIC))
		return -1;
	qa.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &qa, IBV_QP_STATE);
}

/*
 * READs and atomics posted 16 at a time, more than the responder keeps
 * responder resources for: with max_rd_atomic and max_dest_rd_atomic 1,
 * 16, 128 (the device's maximum) and 2, each connection made again from
 * RESET, so that every RTR makes a set of responder resources and every
 * RTS a set of READ response maps of another size (remu_eng_alloc());
 * then changed to 8 and to 1 through SQD -> SQD, which replaces the sets
 * of a live QP.  Every READ lands byte for byte, every FETCH_ADD runs
 * once and returns the values before it in order, and query_qp gives
 * the numbers back.  remu_netem_test.sh runs it under loss, reordering
 * and duplication, where duplicate READs and atomics hit the responder
 * resources and reordered READ responses the maps.
 */
TEST_F(dp, read_storm_rd_atomic)
{
	static const uint8_t rd[] = { 1, 16, 128, 2 }, sqd[] = { 8, 1 };
	uint64_t *target = (uint64_t *)(self->b.buf + 180000);
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	unsigned int r;
	int st;

	for (r = 0; r < sizeof(rd); r++) {
		qp_rd_atomic = rd[r];
		st = reconnect(&self->a, &self->b);
		qp_rd_atomic = 4;
		ASSERT_EQ(0, st) TH_LOG("rd_atomic %u", rd[r]);
		ASSERT_EQ(0, ibv_query_qp(self->b.qp, &qa,
					  IBV_QP_MAX_DEST_RD_ATOMIC |
					  IBV_QP_MAX_QP_RD_ATOMIC, &qia));
		EXPECT_EQ(rd[r], qa.max_dest_rd_atomic);
		EXPECT_EQ(rd[r], qa.max_rd_atomic);
		EXPECT_EQ(0, read_storm(&self->a, &self->b, target, 1000 * r, r))
			TH_LOG("rd_atomic %u", rd[r]);
	}
	for (r = 0; r < sizeof(sqd); r++) {
		ASSERT_EQ(0, sqd_rd_atomic(self->a.qp, sqd[r]));
		ASSERT_EQ(0, sqd_rd_atomic(self->b.qp, sqd[r]));
		ASSERT_EQ(0, ibv_query_qp(self->b.qp, &qa,
					  IBV_QP_STATE | IBV_QP_MAX_DEST_RD_ATOMIC,
					  &qia));
		EXPECT_EQ(IBV_QPS_RTS, qa.qp_state);
		EXPECT_EQ(sqd[r], qa.max_dest_rd_atomic);
		EXPECT_EQ(0, read_storm(&self->a, &self->b, target,
					5000 + 1000 * r, 7 + r))
			TH_LOG("SQD -> SQD rd_atomic %u", sqd[r]);
	}
}

/*
 * Twelve 1 MiB READs, one at a time, on a QP with a short timeout (12:
 * 16.8 ms; 14, 67 ms, with REMU_TIMEOUT_SCALE=4 on the debug kernel), each
 * checked byte for byte; remu_netem_test.sh runs it under loss, where the
 * requester asks for lost responses again and the responder replays them.
 * A replay of a READ the requester already finished delays the next one:
 * its responses restart the timer, so that wait is not taken for a loss.
 * (On the debug kernel one 1 MiB READ takes longer than 67 ms, and
 * ib_read_lat -s 1048576 in remu_perftest_test.sh ended with
 * RETRY_EXC_ERR: the waiting READ was resent at every expiry and each
 * resend queued one more 1 MiB replay in front of it.  This test did not
 * fail that way on Debian's kernel, where READs are fast.)
 */
TEST_F(dp, read_1m_short_timeout)
{
	long r0 = hw_counter(variant->dev_a, "completer_retry_err");
	const uint32_t len = 1 << 20;
	struct ibv_wc wc;
	int i, st;

	ASSERT_GE(r0, 0);
	qp_timeout = remu_timeout_scale() >= 4 ? 14 : 12;
	st = reconnect(&self->a, &self->b);
	qp_timeout = 14;
	ASSERT_EQ(0, st);
	for (i = 0; i < 12; i++) {
		struct ibv_sge sge = { (uintptr_t)self->a.buf + 8, len,
				       self->a.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 600 + i, .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_READ,
					  .send_flags = IBV_SEND_SIGNALED };

		for (uint32_t j = 0; j < len; j++)
			self->b.buf[j] = (uint8_t)(j * 7 + i * 29 + (j >> 10));
		memset(self->a.buf, 0xee, BUF_SIZE);
		wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
		wr.wr.rdma.rkey = self->b.mr->rkey;
		ASSERT_EQ(0, post1(self->a.qp, &wr));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc))
			TH_LOG("READ %d: %s", i, ibv_wc_status_str(wc.status));
		ASSERT_EQ(600 + i, wc.wr_id);
		ASSERT_EQ(0, memcmp(self->a.buf + 8, self->b.buf, len))
			TH_LOG("READ %d", i);
		ASSERT_EQ(0xee, self->a.buf[7]);
		ASSERT_EQ(0xee, self->a.buf[8 + len]);
	}
	TH_LOG("%ld timer expiries or requests for lost responses",
	       hw_counter(variant->dev_a, "completer_retry_err") - r0);
}

/*
 * A QP pair used again after an error.  A WRITE to a bad rkey sends both
 * QPs to ERR (the requester with REM_ACCESS_ERR and the WQE after it
 * flushed, the responder as it NAKs); both go through RESET and are
 * connected again with the same PSNs, so every PSN of the old connection
 * comes again.  Then SEND, WRITE and READ of 1 B to 1 MiB go both ways
 * byte for byte: nothing the engines kept from before the error (a
 * sequence NAK sent, a message half received, the retransmit state) gets
 * in the way.
 */
TEST_F(dp, reuse_after_error)
{
	struct ibv_sge bs = { (uintptr_t)self->a.buf, 100, self->a.mr->lkey };
	struct ibv_send_wr bad = { .sg_list = &bs, .num_sge = 1,
				   .opcode = IBV_WR_RDMA_WRITE };
	struct side *x, *y;
	struct ibv_sge ss[3], rs[3];
	struct ibv_wc wc;
	unsigned int i;
	int dir;

	bad.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	bad.wr.rdma.rkey = self->b.mr->rkey ^ 0x80;
	expect_err(_metadata, &self->a, &bad, IBV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(0, reconnect(&self->a, &self->b));

	for (dir = 0; dir < 2; dir++) {
		x = dir ? &self->b : &self->a;
		y = dir ? &self->a : &self->b;
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			struct ibv_send_wr wr = { .wr_id = 60 + i,
						  .sg_list = ss, .num_sge = 3,
						  .opcode = IBV_WR_SEND,
						  .send_flags =
							IBV_SEND_SIGNALED };

			/* SEND into three receive SGEs */
			make_sges(x, lens[i], 0, ss);
			make_sges(y, lens[i], 1, rs);
			fill_sges(ss, 17 * i + dir);
			memset(y->buf, 0xee, BUF_SIZE);
			ASSERT_EQ(0, post_recv1(y->qp, 70 + i, rs, 3));
			ASSERT_EQ(0, post1(x->qp, &wr));
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(x->cq, &wc));
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(y->cq, &wc));
			EXPECT_EQ(70 + i, wc.wr_id);
			EXPECT_EQ(lens[i], wc.byte_len);
			EXPECT_EQ(-1, cmp_sges(ss, rs))
				TH_LOG("SEND %u dir %d", lens[i], dir);

			/* WRITE to y, then READ it back into x */
			fill_sges(ss, 29 * i + dir);
			memset(y->buf, 0xee, BUF_SIZE);
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.wr.rdma.remote_addr = (uintptr_t)y->buf + 5;
			wr.wr.rdma.rkey = y->mr->rkey;
			ASSERT_EQ(0, post1(x->qp, &wr));
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(x->cq, &wc));
			rs[0] = (struct ibv_sge){ (uintptr_t)y->buf + 5,
						  lens[i], 0 };
			rs[1] = (struct ibv_sge){ 0, 0, 0 };
			rs[2] = (struct ibv_sge){ 0, 0, 0 };
			EXPECT_EQ(-1, cmp_sges(ss, rs))
				TH_LOG("WRITE %u dir %d", lens[i], dir);
			memset(x->buf, 0xee, BUF_SIZE);
			make_sges(x, lens[i], 1, ss);
			wr.opcode = IBV_WR_RDMA_READ;
			ASSERT_EQ(0, post1(x->qp, &wr));
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(x->cq, &wc));
			EXPECT_EQ(-1, cmp_sges(rs, ss))
				TH_LOG("READ %u dir %d", lens[i], dir);
		}
	}
}

/*
 * UC and UD.  Same two devices and layouts as the RC fixture; what
 * differs is what the transports promise: UC and UD completions on the
 * sender mean "sent", so a receive completion (or a SEND behind a WRITE,
 * processed in order) is what shows the data is there.
 */

/* the bytes around the three SGEs of make_sges() are untouched (0xee) */
static int sges_fenced(const struct ibv_sge *sge)
{
	int i;

	for (i = 0; i < 3; i++) {
		const uint8_t *p = (const uint8_t *)(uintptr_t)sge[i].addr;

		if (p[-1] != 0xee || p[sge[i].length] != 0xee)
			return i;
	}
	return -1;
}

/* the bytes of three SGEs one after the other into @out; their total */
static uint32_t gather_sges(const struct ibv_sge *sge, uint8_t *out)
{
	uint32_t n = 0;
	int i;

	for (i = 0; i < 3; i++) {
		memcpy(out + n, (void *)(uintptr_t)sge[i].addr, sge[i].length);
		n += sge[i].length;
	}
	return n;
}

static void set_av(struct ibv_ah_attr *ah, struct side *peer)
{
	remu_set_av(ah, &peer->gid, GID_INDEX, 0x28);
}

/* PSNs just below the 24-bit wrap: a 1 MiB message crosses it */
#define UC_PSN		0xffffc0

/* UC: REMOTE_WRITE is the only remote right UC has; no RNR, no retries */
static int uc_connect(struct ibv_qp *qp, struct side *s, struct ibv_qp *pqp,
		      struct side *peer)
{
	struct remu_conn_attr ra = { .access = IBV_ACCESS_REMOTE_WRITE,
				     .psn = UC_PSN };
	struct remu_conn_dest d = { .qpn = pqp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu),
				    .traffic_class = 0x28 };

	return remu_qp_connect(qp, &ra, GID_INDEX, &d);
}


/* nothing arrives on @cq within 100 ms */
static int cq_quiet(struct ibv_cq *cq)
{
	struct timespec d = { 0, 100 * 1000 * 1000 };
	struct ibv_wc wc;

	nanosleep(&d, NULL);
	return remu_poll_cq(cq, 1, &wc);
}

/*
 * Affiliated asynchronous events.  next_async(): the type of the next
 * event of @ctx within @ms milliseconds (and its QP in @qp, for QP
 * events), or -1 if none came.
 */
static int next_async(struct ibv_context *ctx, int ms, struct ibv_qp **qp)
{
	struct ibv_async_event ev;

	if (remu_next_async(ctx, ms, &ev))
		return -1;
	if (qp)
		*qp = ev.element.qp;
	return ev.event_type;
}

/*
 * An error the responder cannot report through a receive completion
 * reaches its consumer as the affiliated error a real NIC raises, naming
 * the responder's QP, which is in ERR by then: a WRITE to a bad rkey is an
 * access violation (QP_ACCESS_ERR), a misaligned atomic an invalid request
 * (QP_REQ_ERR).  The requester learns of it from its completion only.
 */
TEST_F(dp, async_access_err)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 100, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };
	struct ibv_qp *qp = NULL;

	wr.wr.rdma.remote_addr = (uintptr_t)self->b.buf;
	wr.wr.rdma.rkey = self->b.mr->rkey ^ 0x80;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_ACCESS_ERR);
	EXPECT_EQ(IBV_EVENT_QP_ACCESS_ERR, next_async(self->b.ctx, 5000, &qp));
	EXPECT_EQ(self->b.qp, qp);
	EXPECT_EQ(IBV_QPS_ERR, remu_qp_state(self->b.qp));
	EXPECT_EQ(-1, next_async(self->b.ctx, 100, NULL));
	EXPECT_EQ(-1, next_async(self->a.ctx, 100, NULL));
}

TEST_F(dp, async_req_err)
{
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 8, self->a.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD };
	struct ibv_qp *qp = NULL;

	wr.wr.atomic.remote_addr = (uintptr_t)self->b.buf + 132;
	wr.wr.atomic.rkey = self->b.mr->rkey;
	wr.wr.atomic.compare_add = 1;
	expect_err(_metadata, &self->a, &wr, IBV_WC_REM_INV_REQ_ERR);
	EXPECT_EQ(IBV_EVENT_QP_REQ_ERR, next_async(self->b.ctx, 5000, &qp));
	EXPECT_EQ(self->b.qp, qp);
	EXPECT_EQ(IBV_QPS_ERR, remu_qp_state(self->b.qp));
	EXPECT_EQ(-1, next_async(self->a.ctx, 100, NULL));
}

/*
 * Completions of @cq until it stays empty for 20 ms: their number (what
 * a RESET left in flight may or may not have completed).
 */
static int cq_drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];
	double quiet = remu_now() + 0.02;
	int n, got = 0;

	while (remu_now() < quiet) {
		n = remu_poll_cq(cq, 16, wc);
		if (n > 0) {
			got += n;
			quiet = remu_now() + 0.02;
		}
	}
	return got;
}

/*
 * One burst on the first QP pair: 8 WRITEs of 64 KiB, 4 SENDs of 4 KiB
 * (into 4 receives posted at b) and 4 READs of 16 KiB, all signalled, a's
 * source bytes made from @seed.  Returns the number of WRs posted at a
 * (16), or -1.
 */
static int rst_burst(struct side *a, struct side *b, uint32_t seed)
{
	struct ibv_send_wr wr[16];
	struct ibv_sge sg[16], rs;
	int i;

	for (i = 0; i < 768 * 1024; i++)
		a->buf[i] = (uint8_t)(i * 13 + seed + (i >> 12));
	for (i = 768 * 1024; i < 832 * 1024; i++)
		b->buf[i] = (uint8_t)(i * 7 + seed);
	for (i = 0; i < 4; i++) {
		rs = (struct ibv_sge){ (uintptr_t)b->buf + 512 * 1024 + i * 4096,
				       4096, b->mr->lkey };
		if (remu_post_recv(b->qp, 700 + i, &rs, 1))
			return -1;
	}
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 16; i++) {
		uint64_t off;
		uint32_t len;

		if (i < 8) {
			off = (uint64_t)i * 65536;
			len = 65536;
			wr[i].opcode = IBV_WR_RDMA_WRITE;
		} else if (i < 12) {
			off = 512 * 1024 + (i - 8) * 4096;
			len = 4096;
			wr[i].opcode = IBV_WR_SEND;
		} else {
			off = 768 * 1024 + (i - 12) * 16384;
			len = 16384;
			wr[i].opcode = IBV_WR_RDMA_READ;
		}
		sg[i] = (struct ibv_sge){ (uintptr_t)a->buf + off, len,
					  a->mr->lkey };
		wr[i].wr_id = 600 + i;
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = (uintptr_t)b->buf + off;
		wr[i].wr.rdma.rkey = b->mr->rkey;
		wr[i].next = i < 15 ? &wr[i + 1] : NULL;
	}
	return remu_post_send(a->qp, wr) ? -1 : 16;
}

/*
 * modify_qp to RESET while the engines are busy (remu_eng_reset_mark():
 * the engines' owner forgets what is in flight, not modify_qp under its
 * feet), twelve times, at different moments of a burst of WRITEs, SENDs
 * and READs: at once, after 100 us, after 1 ms, after the first
 * completion.  Both QPs go to RESET, what completed is drained, and they
 * connect again.  Then a last burst must complete in full, in order,
 * every byte in place, with nothing left over from the bursts before.
 */
TEST_F(dp, reset_under_traffic)
{
	struct ibv_qp_attr rst = { .qp_state = IBV_QPS_RESET };
	struct timespec settle = { 0, 20 * 1000 * 1000 };
	struct ibv_wc wc;
	int r, i;

	for (r = 0; r < 12; r++) {
		ASSERT_EQ(16, rst_burst(&self->a, &self->b, r));
		switch (r % 4) {
		case 1:
			usleep(100);
			break;
		case 2:
			usleep(1000);
			break;
		case 3:
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
			break;
		}
		ASSERT_EQ(0, ibv_modify_qp(self->a.qp, &rst, IBV_QP_STATE));
		ASSERT_EQ(0, ibv_modify_qp(self->b.qp, &rst, IBV_QP_STATE));
		EXPECT_EQ(IBV_QPS_RESET, remu_qp_state(self->a.qp));
		EXPECT_EQ(IBV_QPS_RESET, remu_qp_state(self->b.qp));
		/* packets of this connection still on the way die meanwhile */
		nanosleep(&settle, NULL);
		EXPECT_LE(cq_drain(self->a.cq), 16);
		EXPECT_LE(cq_drain(self->b.cq), 4);
		ASSERT_EQ(0, qp_connect(self->a.qp, &self->a, self->b.qp,
					&self->b, 7));
		ASSERT_EQ(0, qp_connect(self->b.qp, &self->b, self->a.qp,
					&self->a, 7));
	}
	memset(self->b.buf, 0xee, 768 * 1024);
	memset(self->a.buf + 768 * 1024, 0xee, 64 * 1024);
	ASSERT_EQ(16, rst_burst(&self->a, &self->b, 99));
	for (i = 0; i < 16; i++) {
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(600 + i, wc.wr_id);
	}
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(700 + i, wc.wr_id);
		EXPECT_EQ(4096, wc.byte_len);
	}
	/* the WRITEs, the SENDs, the READs (into a) */
	EXPECT_EQ(0, memcmp(self->a.buf, self->b.buf, 512 * 1024));
	EXPECT_EQ(0, memcmp(self->a.buf + 512 * 1024,
			    self->b.buf + 512 * 1024, 4 * 4096));
	EXPECT_EQ(0, memcmp(self->a.buf + 768 * 1024,
			    self->b.buf + 768 * 1024, 64 * 1024));
	EXPECT_EQ(0, cq_drain(self->a.cq));
	EXPECT_EQ(0, cq_drain(self->b.cq));
}

/*
 * IB_EVENT_COMM_EST: a QP in RTR that takes its first packet tells its
 * consumer that communication is established (the CM relies on it when
 * the RTU is lost).  b's second QP goes back to RTR only; two SENDs from
 * a's second QP land in it and the event names that QP, once.  After the
 * move to RTS a third SEND raises none.
 */
TEST_F(dp, comm_est)
{
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .sq_psn = 0x123,
				   .timeout = 14, .retry_cnt = 7,
				   .max_rd_atomic = 4 };
	struct ibv_qp_attr rst = { .qp_state = IBV_QPS_RESET };
	struct ibv_sge ss = { (uintptr_t)self->a.buf, 3000, self->a.mr->lkey };
	struct ibv_sge rs = { (uintptr_t)self->b.buf, 3000, self->b.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_qp *qp = NULL;
	struct ibv_wc wc;
	int i;

	ASSERT_EQ(0, ibv_modify_qp(self->b.qp2, &rst, IBV_QP_STATE));
	ASSERT_EQ(0, qp_to_rtr(self->b.qp2, &self->b, self->a.qp2, &self->a));
	EXPECT_EQ(-1, next_async(self->b.ctx, 100, NULL));
	for (i = 0; i < 3; i++) {
		if (i == 2) {
			EXPECT_EQ(IBV_EVENT_COMM_EST,
				  next_async(self->b.ctx, 5000, &qp));
			EXPECT_EQ(self->b.qp2, qp);
			EXPECT_EQ(-1, next_async(self->b.ctx, 100, NULL));
			ASSERT_EQ(0, ibv_modify_qp(self->b.qp2, &rts,
						   IBV_QP_STATE |
						   IBV_QP_SQ_PSN |
						   IBV_QP_TIMEOUT |
						   IBV_QP_RETRY_CNT |
						   IBV_QP_RNR_RETRY |
						   IBV_QP_MAX_QP_RD_ATOMIC));
		}
		for (int j = 0; j < 3000; j++)
			self->a.buf[j] = (uint8_t)(j * 7 + i);
		memset(self->b.buf, 0xee, 4096);
		ASSERT_EQ(0, post_recv1(self->b.qp2, 80 + i, &rs, 1));
		wr.wr_id = 90 + i;
		ASSERT_EQ(0, post1(self->a.qp2, &wr));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq2, &wc));
		EXPECT_EQ(90 + i, wc.wr_id);
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq2, &wc));
		EXPECT_EQ(80 + i, wc.wr_id);
		EXPECT_EQ(0, memcmp(self->a.buf, self->b.buf, 3000));
	}
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(self->b.qp2));
	EXPECT_EQ(-1, next_async(self->b.ctx, 100, NULL));
}

FIXTURE(uc) {
	struct side a, b;
};

FIXTURE_VARIANT(uc) {
	const char *dev_a, *dev_b;
	bool ex;	/* the extended verbs (remu_use_ex) */
};

FIXTURE_VARIANT_ADD(uc, remu0_remu1) { .dev_a = "remu0", .dev_b = "remu1" };
FIXTURE_VARIANT_ADD(uc, loopback) { .dev_a = "remu0", .dev_b = "remu0" };
FIXTURE_VARIANT_ADD(uc, remu0_remu1_ex) {
	.dev_a = "remu0", .dev_b = "remu1", .ex = true };
FIXTURE_VARIANT_ADD(uc, loopback_ex) {
	.dev_a = "remu0", .dev_b = "remu0", .ex = true };

FIXTURE_SETUP(uc)
{
	remu_use_ex = variant->ex;
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	ASSERT_EQ(0, side_open(&self->a, variant->dev_a, IBV_QPT_UC));
	ASSERT_EQ(0, side_open(&self->b, variant->dev_b, IBV_QPT_UC));
	ASSERT_EQ(0, uc_connect(self->a.qp, &self->a, self->b.qp, &self->b));
	ASSERT_EQ(0, uc_connect(self->b.qp, &self->b, self->a.qp, &self->a));
}

FIXTURE_TEARDOWN(uc)
{
	side_close(&self->a);
	side_close(&self->b);
}

static const uint32_t uc_lens[] = { 0, 1, 4095, 4097, 65537, 1 << 20 };

/* SEND and SEND_WITH_IMM, three SGEs each side, up to 1 MiB */
TEST_F(uc, send_recv)
{
	struct ibv_sge ss[3], rs[3];
	struct ibv_wc wc;
	unsigned int i, imm;

	for (imm = 0; imm < 2; imm++)
		for (i = 0; i < sizeof(uc_lens) / sizeof(uc_lens[0]); i++) {
			uint32_t len = uc_lens[i], id = imm * 100 + i;
			struct ibv_send_wr swr = {
				.wr_id = 200 + id, .sg_list = ss, .num_sge = 3,
				.opcode = imm ? IBV_WR_SEND_WITH_IMM :
						IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED,
				.imm_data = htobe32(0xc0de0000 + id) };

			make_sges(&self->a, len, 0, ss);
			make_sges(&self->b, len, 1, rs);
			fill_sges(ss, 5 + id);
			memset(self->b.buf, 0xee, BUF_SIZE);
			ASSERT_EQ(0, post_recv1(self->b.qp, 100 + id, rs, 3));
			ASSERT_EQ(0, post1(self->a.qp, &swr));
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
			EXPECT_EQ(200 + id, wc.wr_id);
			EXPECT_EQ(IBV_WC_SEND, wc.opcode);
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc))
				TH_LOG("len %u imm %u", len, imm);
			EXPECT_EQ(100 + id, wc.wr_id);
			EXPECT_EQ(IBV_WC_RECV, wc.opcode);
			EXPECT_EQ(self->b.qp->qp_num, wc.qp_num);
			EXPECT_EQ(len, wc.byte_len);
			EXPECT_EQ(imm ? IBV_WC_WITH_IMM : 0,
				  wc.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_GRH));
			if (imm)
				EXPECT_EQ(htobe32(0xc0de0000 + id), wc.imm_data);
			EXPECT_EQ(-1, cmp_sges(ss, rs)) TH_LOG("len %u", len);
			EXPECT_EQ(-1, sges_fenced(rs)) TH_LOG("len %u", len);
		}
}

/*
 * RDMA_WRITE and RDMA_WRITE_WITH_IMM from three SGEs to an odd remote
 * address.  A plain WRITE is followed by a zero-byte SEND: UC processes
 * messages in order, so its receive completion means the WRITE landed.
 */
TEST_F(uc, rdma_write)
{
	struct ibv_sge junk = { (uintptr_t)self->b.buf + BUF_SIZE - 64, 64,
				self->b.mr->lkey };
	struct ibv_sge ss[3], rs[3];
	struct ibv_wc wc;
	unsigned int i, imm;

	for (imm = 0; imm < 2; imm++)
		for (i = 0; i < sizeof(uc_lens) / sizeof(uc_lens[0]); i++) {
			uint32_t len = uc_lens[i], id = imm * 100 + i;
			struct ibv_send_wr mark = { .wr_id = 1, .opcode =
						    IBV_WR_SEND };
			struct ibv_send_wr swr = {
				.wr_id = 300 + id, .sg_list = ss, .num_sge = 3,
				.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM :
						IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.imm_data = htobe32(0x0dd00000 + id),
				.next = imm ? NULL : &mark };

			make_sges(&self->a, len, 0, ss);
			fill_sges(ss, 9 + id);
			memset(self->b.buf, 0xee, BUF_SIZE);
			rs[0] = (struct ibv_sge){ (uintptr_t)self->b.buf + 5,
						  len, 0 };
			rs[1] = (struct ibv_sge){ 0, 0, 0 };
			rs[2] = (struct ibv_sge){ 0, 0, 0 };
			swr.wr.rdma.remote_addr = rs[0].addr;
			swr.wr.rdma.rkey = self->b.mr->rkey;
			/* with or without an SGE: a WRITE_WITH_IMM leaves it */
			ASSERT_EQ(0, post_recv1(self->b.qp, 400 + id, &junk,
						i & 1));
			ASSERT_EQ(0, post1(self->a.qp, &swr));
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
			EXPECT_EQ(300 + id, wc.wr_id);
			EXPECT_EQ(IBV_WC_RDMA_WRITE, wc.opcode);
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc))
				TH_LOG("len %u imm %u", len, imm);
			EXPECT_EQ(400 + id, wc.wr_id);
			if (imm) {
				EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
				EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
				EXPECT_EQ(htobe32(0x0dd00000 + id),
					  wc.imm_data);
				EXPECT_EQ(len, wc.byte_len);
			} else {
				EXPECT_EQ(IBV_WC_RECV, wc.opcode);
				EXPECT_EQ(0, wc.byte_len);
			}
			EXPECT_EQ(-1, cmp_sges(ss, rs)) TH_LOG("len %u", len);
			EXPECT_EQ(0xee, self->b.buf[4]);
			EXPECT_EQ(0xee, self->b.buf[5 + len]);
			EXPECT_EQ(0xee, self->b.buf[BUF_SIZE - 64]);
			EXPECT_EQ(0xee, self->b.buf[BUF_SIZE - 1]);
		}
}

/* inline SEND_WITH_IMM and RDMA_WRITE, up to max_inline, two SGEs */
TEST_F(uc, inline_send)
{
	struct ibv_sge ss[2], rs[3];
	uint8_t src[1024], want[1024], got[1024];
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_wc wc;
	uint32_t max, ilens[4];
	unsigned int i;

	ASSERT_EQ(0, ibv_query_qp(self->a.qp, &qa, IBV_QP_CAP, &ia));
	max = qa.cap.max_inline_data;
	ASSERT_GE(max, 256);
	ASSERT_LE(max, sizeof(src));
	ilens[0] = 1;
	ilens[1] = 63;
	ilens[2] = max - 1;
	ilens[3] = max;
	for (i = 0; i < 4; i++) {
		uint32_t len = ilens[i], l0 = len / 3;
		struct ibv_send_wr mark = { .wr_id = 2, .opcode = IBV_WR_SEND };
		struct ibv_send_wr swr = { .wr_id = 500 + i, .sg_list = ss,
					   .num_sge = 2,
					   .opcode = IBV_WR_SEND_WITH_IMM,
					   .imm_data = htobe32(i),
					   .send_flags = IBV_SEND_SIGNALED |
							 IBV_SEND_INLINE };

		for (uint32_t j = 0; j < len; j++)
			src[j] = want[j] = (uint8_t)(j * 13 + i + 3);
		/* not in any MR: inline data is copied at post */
		ss[0] = (struct ibv_sge){ (uintptr_t)src, l0, 0 };
		ss[1] = (struct ibv_sge){ (uintptr_t)src + l0, len - l0,
					  0xdeadbeef };
		make_sges(&self->b, len, 1, rs);
		memset(self->b.buf, 0xee, BUF_SIZE);
		ASSERT_EQ(0, post_recv1(self->b.qp, 600 + i, rs, 3));
		ASSERT_EQ(0, post1(self->a.qp, &swr));
		memset(src, 0, sizeof(src));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(500 + i, wc.wr_id);
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(600 + i, wc.wr_id);
		EXPECT_EQ(len, wc.byte_len);
		EXPECT_EQ(htobe32(i), wc.imm_data);
		EXPECT_EQ(len, gather_sges(rs, got));
		EXPECT_EQ(0, memcmp(want, got, len)) TH_LOG("len %u", len);
		EXPECT_EQ(-1, sges_fenced(rs));

		/* the same bytes by an inline RDMA_WRITE, then a marker */
		for (uint32_t j = 0; j < len; j++)
			src[j] = want[j];
		swr.opcode = IBV_WR_RDMA_WRITE;
		swr.wr.rdma.remote_addr = (uintptr_t)self->b.buf + 4099;
		swr.wr.rdma.rkey = self->b.mr->rkey;
		swr.next = &mark;
		ASSERT_EQ(0, post_recv1(self->b.qp, 700 + i, NULL, 0));
		ASSERT_EQ(0, post1(self->a.qp, &swr));
		memset(src, 0, sizeof(src));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(IBV_WC_RDMA_WRITE, wc.opcode);
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(700 + i, wc.wr_id);
		EXPECT_EQ(0, memcmp(want, self->b.buf + 4099, len));
		EXPECT_EQ(0xee, self->b.buf[4098]);
		EXPECT_EQ(0xee, self->b.buf[4099 + len]);
	}
}

/*
 * UC has no RDMA READ, atomics or SEND_WITH_INV (IBA defines no UC
 * opcode for them): libremu refuses them at post with EINVAL, as rxe
 * does, and nothing reaches the send queue; the QP goes on working.
 */
TEST_F(uc, refuses_read_atomic)
{
	static const enum ibv_wr_opcode bad_ops[] = {
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV };
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 8, self->a.mr->lkey };
	struct ibv_sge rs = { (uintptr_t)self->b.buf + 1, 100,
			      self->b.mr->lkey };
	struct ibv_sge ss = { (uintptr_t)self->a.buf + 3, 100,
			      self->a.mr->lkey };
	struct ibv_send_wr send = { .wr_id = 99, .sg_list = &ss, .num_sge = 1,
				    .opcode = IBV_WR_SEND,
				    .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	unsigned int i;

	*(uint64_t *)self->b.buf = 7;
	for (i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
		struct ibv_send_wr wr = { .wr_id = 10 + i, .sg_list = &sge,
					  .num_sge = 1, .opcode = bad_ops[i],
					  .send_flags = IBV_SEND_SIGNALED };

		wr.wr.atomic.remote_addr = (uintptr_t)self->b.buf;
		wr.wr.atomic.rkey = self->b.mr->rkey;
		wr.wr.atomic.compare_add = 1;
		bad = NULL;
		EXPECT_EQ(EINVAL, remu_post_list(self->a.qp, &wr, &bad))
			TH_LOG("opcode %d", bad_ops[i]);
		EXPECT_EQ(&wr, bad);
	}
	EXPECT_EQ(0, cq_quiet(self->a.cq));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(self->a.qp));
	EXPECT_EQ(7, *(uint64_t *)self->b.buf);

	/* a SEND behind them: the next completion is its own */
	memset(self->a.buf + 3, 0x5c, 100);
	ASSERT_EQ(0, post_recv1(self->b.qp, 98, &rs, 1));
	ASSERT_EQ(0, post1(self->a.qp, &send));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(99, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
	EXPECT_EQ(98, wc.wr_id);
	EXPECT_EQ(100, wc.byte_len);
	EXPECT_EQ(0, memcmp(self->a.buf + 3, self->b.buf + 1, 100));
}

/*
 * A UC WRITE the responder refuses (bad rkey, out of the MR's bounds,
 * WRITE_WITH_IMM to a bad rkey) has no NAK to carry the error: the
 * sender completes it successfully (sent), and the responder drops the
 * whole message silently (IBA class D, as rxe does), places nothing and
 * consumes no receive; both QPs stay in RTS and the next messages
 * arrive.
 */
TEST_F(uc, write_bad_rkey)
{
	struct ibv_sge ss[3], rs[3];
	struct ibv_send_wr wr[3];
	struct ibv_wc wc;
	uint32_t len = 10000;	/* three packets at a 4096 MTU */
	int i;

	make_sges(&self->a, len, 0, ss);
	fill_sges(ss, 77);
	memset(self->b.buf, 0xee, BUF_SIZE);
	for (i = 0; i < 3; i++) {
		wr[i] = (struct ibv_send_wr){
			.wr_id = 20 + i, .sg_list = ss, .num_sge = 3,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.next = i < 2 ? &wr[i + 1] : NULL };
		wr[i].wr.rdma.remote_addr = (uintptr_t)self->b.buf + 300001;
		wr[i].wr.rdma.rkey = self->b.mr->rkey;
	}
	wr[0].wr.rdma.rkey ^= 0x80;
	wr[1].wr.rdma.remote_addr = (uintptr_t)self->b.buf + BUF_SIZE - 100;
	wr[2].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr[2].imm_data = htobe32(0xbad);
	wr[2].wr.rdma.rkey ^= 0x100;
	rs[0] = (struct ibv_sge){ (uintptr_t)self->b.buf + 500000, 64,
				  self->b.mr->lkey };
	ASSERT_EQ(0, post_recv1(self->b.qp, 30, rs, 1));
	ASSERT_EQ(0, post1(self->a.qp, wr));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		EXPECT_EQ(20 + i, wc.wr_id);
	}

	/* a good WRITE_WITH_IMM now takes the receive posted before */
	wr[0].wr_id = 23;
	wr[0].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr[0].imm_data = htobe32(0x900d);
	wr[0].next = NULL;
	wr[0].wr.rdma.remote_addr = (uintptr_t)self->b.buf + 7;
	wr[0].wr.rdma.rkey = self->b.mr->rkey;
	ASSERT_EQ(0, post1(self->a.qp, wr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
	EXPECT_EQ(30, wc.wr_id);
	EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
	EXPECT_EQ(htobe32(0x900d), wc.imm_data);
	EXPECT_EQ(len, wc.byte_len);
	rs[0] = (struct ibv_sge){ (uintptr_t)self->b.buf + 7, len, 0 };
	rs[1] = (struct ibv_sge){ 0, 0, 0 };
	rs[2] = (struct ibv_sge){ 0, 0, 0 };
	EXPECT_EQ(-1, cmp_sges(ss, rs));
	/* the refused ones placed nothing, anywhere */
	for (i = 0; i < (int)len + 2; i++)
		ASSERT_EQ(0xee, self->b.buf[300000 + i]) TH_LOG("byte %d", i);
	for (i = 0; i < 100; i++)
		ASSERT_EQ(0xee, self->b.buf[BUF_SIZE - 100 + i]);
	for (i = 0; i < 64; i++)
		ASSERT_EQ(0xee, self->b.buf[500000 + i]);
	EXPECT_EQ(0xee, self->b.buf[6]);
	EXPECT_EQ(0xee, self->b.buf[7 + len]);
	EXPECT_EQ(0, cq_quiet(self->b.cq));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(self->a.qp));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(self->b.qp));
}

/*
 * A UC SEND finding no receive is dropped (no RNR on UC): the sender
 * still completes it, and the next message goes into the next receive.
 */
TEST_F(uc, send_no_recv_dropped)
{
	struct ibv_sge ss[3], rs[3];
	struct ibv_send_wr wr = { .sg_list = ss, .num_sge = 3,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	long ob0 = hw_counter(variant->dev_b, "out_of_buffer");
	struct ibv_wc wc;

	ASSERT_GE(ob0, 0);
	make_sges(&self->a, 9000, 0, ss);
	fill_sges(ss, 1);
	wr.wr_id = 40;
	ASSERT_EQ(0, post1(self->a.qp, &wr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(40, wc.wr_id);
	EXPECT_EQ(0, cq_quiet(self->b.cq));
	/* counted once for the message, not per packet (9000 B: three) */
	EXPECT_EQ(ob0 + 1, hw_counter(variant->dev_b, "out_of_buffer"));

	make_sges(&self->a, 5000, 0, ss);
	fill_sges(ss, 2);
	make_sges(&self->b, 5000, 1, rs);
	memset(self->b.buf, 0xee, BUF_SIZE);
	ASSERT_EQ(0, post_recv1(self->b.qp, 41, rs, 3));
	wr.wr_id = 42;
	ASSERT_EQ(0, post1(self->a.qp, &wr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
	EXPECT_EQ(41, wc.wr_id);
	EXPECT_EQ(5000, wc.byte_len);
	EXPECT_EQ(-1, cmp_sges(ss, rs));
	EXPECT_EQ(-1, sges_fenced(rs));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(self->b.qp));
}

#define UD_QKEY		0x1a2b3c4d
#define GRH_LEN		40

static int ud_ready(struct ibv_qp *qp)
{
	return remu_ud_ready(qp, UD_QKEY, 0x42);
}

static struct ibv_ah *ud_ah(struct side *s, struct side *peer)
{
	struct ibv_ah_attr attr;

	set_av(&attr, peer);
	return ibv_create_ah(s->pd, &attr);
}

FIXTURE(ud) {
	struct side a, b;
	struct ibv_ah *ah_ab, *ah_ba;
	uint32_t mtu;
};

FIXTURE_VARIANT(ud) {
	const char *dev_a, *dev_b;
	bool ex;	/* the extended verbs (remu_use_ex) */
};

FIXTURE_VARIANT_ADD(ud, remu0_remu1) { .dev_a = "remu0", .dev_b = "remu1" };
FIXTURE_VARIANT_ADD(ud, loopback) { .dev_a = "remu0", .dev_b = "remu0" };
FIXTURE_VARIANT_ADD(ud, remu0_remu1_ex) {
	.dev_a = "remu0", .dev_b = "remu1", .ex = true };
FIXTURE_VARIANT_ADD(ud, loopback_ex) {
	.dev_a = "remu0", .dev_b = "remu0", .ex = true };

FIXTURE_SETUP(ud)
{
	remu_use_ex = variant->ex;
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	self->ah_ab = NULL;
	self->ah_ba = NULL;
	ASSERT_EQ(0, side_open(&self->a, variant->dev_a, IBV_QPT_UD));
	ASSERT_EQ(0, side_open(&self->b, variant->dev_b, IBV_QPT_UD));
	ASSERT_EQ(0, ud_ready(self->a.qp));
	ASSERT_EQ(0, ud_ready(self->b.qp));
	self->ah_ab = ud_ah(&self->a, &self->b);
	self->ah_ba = ud_ah(&self->b, &self->a);
	ASSERT_NE(NULL, self->ah_ab);
	ASSERT_NE(NULL, self->ah_ba);
	/* UD's message limit: the port's active MTU */
	self->mtu = 128u << self->a.mtu;
	ASSERT_EQ(self->a.mtu, self->b.mtu);
	ASSERT_LE(self->mtu, 4096);
}

FIXTURE_TEARDOWN(ud)
{
	if (self->ah_ab)
		ibv_destroy_ah(self->ah_ab);
	if (self->ah_ba)
		ibv_destroy_ah(self->ah_ba);
	side_close(&self->a);
	side_close(&self->b);
}

static uint16_t ip_csum(const uint8_t *h, int len)
{
	uint32_t sum = 0;
	int i;

	for (i = 0; i < len; i += 2)
		sum += (h[i] << 8) | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/*
 * One UD message of @len bytes in three SGEs (inline if @inl) from
 * @s's QP to @r's through @ah, with an immediate if @imm; the receive
 * has three SGEs, split elsewhere, covering the 40-byte GRH area and the
 * data.  Checks both completions, the GRH (IPv4 header in its last 20
 * bytes: addresses from the GIDs, TTL and TOS from the AH, length,
 * checksum) and the data byte for byte.
 */
static void ud_send_check(struct __test_metadata *_metadata, struct side *s,
			  struct side *r, struct ibv_ah *ah, uint32_t len,
			  int imm, int inl, uint32_t seed)
{
	static uint8_t want[8192], got[8192];
	struct ibv_sge ss[3], rs[3];
	struct ibv_send_wr wr = { .wr_id = 0x5000 + seed, .sg_list = ss,
				  .num_sge = 3,
				  .opcode = imm ? IBV_WR_SEND_WITH_IMM :
						  IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htobe32(0xd0000000 + seed) };
	const uint8_t *ip = got + 20;
	uint32_t tot;
	struct ibv_wc wc;

	ASSERT_LE(len + GRH_LEN, sizeof(got));
	make_sges(s, len, 0, ss);
	fill_sges(ss, seed);
	ASSERT_EQ(len, gather_sges(ss, want));
	if (inl) {
		wr.send_flags |= IBV_SEND_INLINE;
		ss[1].lkey = 0xdeadbeef;
	}
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = r->qp->qp_num;
	wr.wr.ud.remote_qkey = UD_QKEY;
	make_sges(r, len + GRH_LEN, 1, rs);
	memset(r->buf, 0xee, 2 * len + 4096);
	ASSERT_EQ(0, post_recv1(r->qp, 0x6000 + seed, rs, 3));
	ASSERT_EQ(0, post1(s->qp, &wr));
	if (inl)
		memset(s->buf, 0, len + 64);
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(s->cq, &wc));
	EXPECT_EQ(0x5000 + seed, wc.wr_id);
	EXPECT_EQ(IBV_WC_SEND, wc.opcode);
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(r->cq, &wc))
		TH_LOG("len %u imm %d inline %d", len, imm, inl);
	EXPECT_EQ(0x6000 + seed, wc.wr_id);
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_EQ(len + GRH_LEN, wc.byte_len);
	EXPECT_EQ(r->qp->qp_num, wc.qp_num);
	EXPECT_EQ(s->qp->qp_num, wc.src_qp);
	EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
	/* the RoCE packet type, as mlx5 reports it: UDP (8) | IPv4 (2) */
	EXPECT_EQ(0xa, wc.sl);
	EXPECT_EQ(imm ? IBV_WC_WITH_IMM : 0, wc.wc_flags & IBV_WC_WITH_IMM);
	if (imm)
		EXPECT_EQ(htobe32(0xd0000000 + seed), wc.imm_data);
	ASSERT_EQ(len + GRH_LEN, gather_sges(rs, got));
	EXPECT_EQ(0, memcmp(want, got + GRH_LEN, len)) TH_LOG("len %u", len);
	EXPECT_EQ(-1, sges_fenced(rs)) TH_LOG("len %u", len);

	/* IPv4 (the GIDs are IPv4-mapped): the header in bytes 20..39 */
	EXPECT_EQ(0x45, ip[0]);
	EXPECT_EQ(0x28, ip[1]);			/* TOS = traffic class */
	tot = 20 + 8 + 12 + 8 + (imm ? 4 : 0) + ((len + 3) & ~3u) + 4;
	EXPECT_EQ(tot, (uint32_t)(ip[2] << 8 | ip[3]));
	EXPECT_EQ(64, ip[8]);			/* TTL = hop limit */
	EXPECT_EQ(17, ip[9]);			/* UDP */
	EXPECT_EQ(0xffff, ip_csum(ip, 20));
	EXPECT_EQ(0, memcmp(ip + 12, s->gid.raw + 12, 4));
	EXPECT_EQ(0, memcmp(ip + 16, r->gid.raw + 12, 4));
}

/* SEND and SEND_WITH_IMM, 0 B to the MTU, both directions */
TEST_F(ud, send_recv)
{
	uint32_t lens[] = { 0, 1, 63, 1000, self->mtu - 1, self->mtu };
	unsigned int i, imm;

	for (imm = 0; imm < 2; imm++)
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
			ud_send_check(_metadata, &self->a, &self->b,
				      self->ah_ab, lens[i], imm, 0,
				      imm * 16 + i);
	ud_send_check(_metadata, &self->b, &self->a, self->ah_ba, self->mtu,
		      1, 0, 40);
	ud_send_check(_metadata, &self->b, &self->a, self->ah_ba, 777, 0, 0,
		      41);
}

/* inline, up to max_inline, the source overwritten right after the post */
TEST_F(ud, inline_send)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	uint32_t max;

	ASSERT_EQ(0, ibv_query_qp(self->a.qp, &qa, IBV_QP_CAP, &ia));
	max = qa.cap.max_inline_data;
	ASSERT_GE(max, 256);
	ud_send_check(_metadata, &self->a, &self->b, self->ah_ab, 1, 0, 1, 50);
	ud_send_check(_metadata, &self->a, &self->b, self->ah_ab, 63, 1, 1, 51);
	ud_send_check(_metadata, &self->a, &self->b, self->ah_ab, max - 1, 1,
		      1, 52);
	ud_send_check(_metadata, &self->a, &self->b, self->ah_ab, max, 0, 1,
		      53);
}

/*
 * A wrong Q_Key: the sender completes (sent), the receiver drops the
 * message without a completion; the next one, whose WR Q_Key has the
 * high bit set (so the QP's own Q_Key goes out), lands in the first
 * receive.
 */
TEST_F(ud, qkey_mismatch_dropped)
{
	struct ibv_sge ss = { (uintptr_t)self->a.buf + 1, 500,
			      self->a.mr->lkey };
	struct ibv_sge rs[2] = {
		{ (uintptr_t)self->b.buf + 3, GRH_LEN + 500, self->b.mr->lkey },
		{ (uintptr_t)self->b.buf + 8195, GRH_LEN + 500,
		  self->b.mr->lkey } };
	struct ibv_send_wr wr = { .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_wc wc;
	int i;

	memset(self->b.buf, 0xee, 16384);
	ASSERT_EQ(0, post_recv1(self->b.qp, 61, &rs[0], 1));
	ASSERT_EQ(0, post_recv1(self->b.qp, 62, &rs[1], 1));
	wr.wr.ud.ah = self->ah_ab;
	wr.wr.ud.remote_qpn = self->b.qp->qp_num;

	memset(self->a.buf + 1, 0x11, 500);
	wr.wr_id = 63;
	wr.wr.ud.remote_qkey = UD_QKEY ^ 1;
	ASSERT_EQ(0, post1(self->a.qp, &wr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(63, wc.wr_id);

	memset(self->a.buf + 1, 0x22, 500);
	wr.wr_id = 64;
	wr.wr.ud.remote_qkey = 0x80000000u;
	ASSERT_EQ(0, post1(self->a.qp, &wr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(64, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
	EXPECT_EQ(61, wc.wr_id);
	EXPECT_EQ(GRH_LEN + 500, wc.byte_len);
	for (i = 0; i < 500; i++)
		ASSERT_EQ(0x22, self->b.buf[3 + GRH_LEN + i]) TH_LOG("%d", i);
	EXPECT_EQ(0, cq_quiet(self->b.cq));
	for (i = 0; i < GRH_LEN + 500; i++)
		ASSERT_EQ(0xee, self->b.buf[8195 + i]);
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(self->b.qp));
}

/* UD has no RNR: a SEND finding no receive is gone, the next one lands */
TEST_F(ud, send_no_recv_dropped)
{
	struct ibv_sge ss = { (uintptr_t)self->a.buf + 1, 300,
			      self->a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 70, .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	long ob0 = hw_counter(variant->dev_b, "out_of_buffer");
	struct ibv_wc wc;

	ASSERT_GE(ob0, 0);
	wr.wr.ud.ah = self->ah_ab;
	wr.wr.ud.remote_qpn = self->b.qp->qp_num;
	wr.wr.ud.remote_qkey = UD_QKEY;
	ASSERT_EQ(0, post1(self->a.qp, &wr));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(0, cq_quiet(self->b.cq));
	EXPECT_EQ(ob0 + 1, hw_counter(variant->dev_b, "out_of_buffer"));
	ud_send_check(_metadata, &self->a, &self->b, self->ah_ab, 300, 1, 0,
		      71);
	EXPECT_EQ(ob0 + 1, hw_counter(variant->dev_b, "out_of_buffer"));
}

/*
 * One byte more than the MTU is refused with LOC_LEN_ERR and puts the
 * send queue in error (remu moves the QP to ERR; IBA's SQE would do the
 * same for the send queue): the WR behind it is flushed and nothing
 * reaches the receiver.
 */
TEST_F(ud, larger_than_mtu)
{
	struct ibv_sge ss[3], rs = { (uintptr_t)self->b.buf, 8192,
				     self->b.mr->lkey };
	struct ibv_send_wr wr[2] = {
		{ .wr_id = 80, .sg_list = ss, .num_sge = 3, .next = &wr[1],
		  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
		{ .wr_id = 81, .sg_list = ss, .num_sge = 1,
		  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED } };
	enum ibv_qp_state st;
	struct ibv_wc wc;

	make_sges(&self->a, self->mtu + 1, 0, ss);
	wr[0].wr.ud.ah = self->ah_ab;
	wr[0].wr.ud.remote_qpn = self->b.qp->qp_num;
	wr[0].wr.ud.remote_qkey = UD_QKEY;
	wr[1].wr.ud = wr[0].wr.ud;
	ASSERT_EQ(0, post_recv1(self->b.qp, 82, &rs, 1));
	ASSERT_EQ(0, post1(self->a.qp, wr));
	EXPECT_EQ(IBV_WC_LOC_LEN_ERR, poll_one(self->a.cq, &wc));
	EXPECT_EQ(80, wc.wr_id);
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, poll_one(self->a.cq, &wc));
	EXPECT_EQ(81, wc.wr_id);
	st = remu_qp_state(self->a.qp);
	EXPECT_TRUE(st == IBV_QPS_ERR || st == IBV_QPS_SQE) TH_LOG("%d", st);
	EXPECT_EQ(0, cq_quiet(self->b.cq));
}

/* UD has SENDs only: WRITE, READ, atomics are refused at post */
TEST_F(ud, refuses_rdma_atomic)
{
	static const enum ibv_wr_opcode bad_ops[] = {
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV };
	struct ibv_sge sge = { (uintptr_t)self->a.buf, 8, self->a.mr->lkey };
	struct ibv_send_wr *bad;
	unsigned int i;

	for (i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
		struct ibv_send_wr wr = { .wr_id = 90 + i, .sg_list = &sge,
					  .num_sge = 1, .opcode = bad_ops[i],
					  .send_flags = IBV_SEND_SIGNALED };

		wr.wr.ud.ah = self->ah_ab;
		wr.wr.ud.remote_qpn = self->b.qp->qp_num;
		wr.wr.ud.remote_qkey = UD_QKEY;
		bad = NULL;
		EXPECT_EQ(EINVAL, remu_post_list(self->a.qp, &wr, &bad))
			TH_LOG("opcode %d", bad_ops[i]);
		EXPECT_EQ(&wr, bad);
	}
	EXPECT_EQ(0, cq_quiet(self->a.cq));
	ud_send_check(_metadata, &self->a, &self->b, self->ah_ab, 10, 0, 0,
		      99);
}

TEST_HARNESS_MAIN
