// SPDX-License-Identifier: GPL-2.0
/*
 * remu_ex_test - the extended verbs: ibv_create_qp_ex() with the ibv_wr_*
 * post API and ibv_create_cq_ex() with the ibv_start_poll() poll API,
 * completion timestamps and the device clock.
 *
 * Fixture create (remu0, no traffic): RC, UC and UD QPs through
 * ibv_create_qp_ex() with every send op of their type, with none, and
 * with comp_mask CREATE_FLAGS (flags 0: a plain QP; a flag: refused by
 * the kernel, except IBV_QP_CREATE_BLOCK_SELF_MCAST_LB on UD); send ops a type cannot do (and FLUSH under libibverbs 44,
 * TSO) refused with EOPNOTSUPP, comp_mask bits remu has no use for with EINVAL;
 * CQs: the read functions present exactly for the wc_flags asked (opcode,
 * vendor_err and wc_flags always), CVLAN/FLOW_TAG/TM_INFO and
 * IGNORE_OVERRUN refused with EOPNOTSUPP, cqe 0, a PD in comp_mask or an
 * unknown flag with EINVAL;
 * ibv_start_poll() on an empty CQ gives ENOENT, with a comp_mask EINVAL;
 * hca_core_clock, completion_timestamp_mask and ibv_query_rt_values_ex().
 *
 * Fixtures rc, uc, ud (remu0 -> remu1, and remu0 loopback): every op
 * each type can post, built with ibv_wr_<op>() and ibv_wr_set_sge(),
 * _sge_list() (three SGEs at unaligned addresses), _inline_data(),
 * _inline_data_list() and _ud_addr(), wr_id and wr_flags, compared byte
 * for byte at the other end: SEND, SEND_WITH_IMM, RDMA WRITE (with
 * immediate), RDMA READ, both atomics, ATOMIC_WRITE (and the device
 * capabilities of it and of FLUSH), type 2B BIND_MW, LOCAL_INV and
 * SEND_WITH_INV (the window's key dead afterwards), UD SEND and
 * SEND_WITH_IMM with their GRH area.  ibv_wr_abort() leaves nothing
 * behind (the next batch goes out alone); an error inside a batch (too
 * many SGEs, inline data too long, an opcode the type cannot post, the
 * ring full, an AH of another PD, a type 1 window, a setter with nothing
 * to set, the QP not in RTS) is returned by ibv_wr_complete() with
 * mlx5's errno and nothing of the batch posted, not even the WRs before
 * it.  The extended CQ's fields against ibv_poll_cq()'s for the same
 * traffic (RC and UD, errors included); completion timestamps inside the
 * ibv_query_rt_values_ex() window around each operation, never going
 * backwards, counting at hca_core_clock, the wall clock inside the
 * CLOCK_REALTIME window, with inline receive still used on such a CQ and
 * across ibv_resize_cq().
 *
 * fast_path_syscalls counts with ptrace: no system call per ibv_wr_*,
 * exactly one (the doorbell write) per ibv_wr_complete(), none for
 * ibv_wr_abort() or for polling with ibv_start_poll().
 *
 * The remu_datapath_test's *_ex variants run all of its data tests
 * through this API as well.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define BUF_SIZE	(1 << 20)
#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define QKEY		0x11223344
#define GRH_LEN		40
#define MAX_SGE		4
#define MAX_INLINE	256
#define SQ_WR		64
#define WC_TS		(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
			 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define WC_ALL		(REMU_WC_STANDARD | WC_TS)
/* FLUSH's send op (rdma-core 45 and later; not in this libibverbs' header) */
#define QP_EX_WITH_FLUSH	(1ull << 11)

/* ---- one end: device, PD, an extended CQ, an extended QP, one MR ---- */

struct xside {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;	/* ibv_create_cq_ex(WC_ALL) */
	struct ibv_qp *qp;	/* ibv_create_qp_ex(every send op) */
	struct ibv_qp_ex *qx;
	struct ibv_mr *mr;
	struct ibv_ah *ah;	/* UD: towards the peer */
	uint8_t *buf;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static struct ibv_qp_cap xcap(void)
{
	return (struct ibv_qp_cap){ .max_send_wr = SQ_WR, .max_recv_wr = 64,
				    .max_send_sge = MAX_SGE,
				    .max_recv_sge = MAX_SGE,
				    .max_inline_data = MAX_INLINE };
}

static int xside_open(struct xside *s, const char *dev, enum ibv_qp_type type)
{
	struct ibv_qp_cap cap = xcap();

	memset(s, 0, sizeof(*s));
	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? remu_create_cq_ex(s->ctx, 256, WC_ALL) : NULL;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq || !s->buf)
		return -1;
	memset(s->buf, 0xee, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   REMU_ACCESS_REMOTE_ALL | IBV_ACCESS_MW_BIND);
	s->qp = s->mr ? remu_create_qp_ex(s->pd, s->cq, type, &cap) : NULL;
	s->qx = s->qp ? ibv_qp_to_qp_ex(s->qp) : NULL;
	return s->qx ? 0 : -1;
}

static void xside_close(struct xside *s)
{
	if (s->ah)
		ibv_destroy_ah(s->ah);
	remu_close_objs(s->qp, NULL, s->mr, s->cq, s->pd, s->ctx);
	free(s->buf);
}

/*
 * @s ready to talk to @peer: RC/UC connected (through RESET first with
 * @reset), UD in RTS with an AH
 */
static int xside_connect(struct xside *s, struct xside *peer, bool reset)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x321);
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };
	struct ibv_ah_attr aa;

	ra.reset = reset;
	if (s->qp->qp_type != IBV_QPT_UD)
		return remu_qp_connect(s->qp, &ra, GID_INDEX, &d);
	if (remu_ud_ready(s->qp, QKEY, 0x42))
		return -1;
	remu_set_av(&aa, &peer->gid, GID_INDEX, 0);
	s->ah = ibv_create_ah(s->pd, &aa);
	return s->ah ? 0 : -1;
}

#define XFIXTURE(name, type)						\
FIXTURE(name) {								\
	struct xside a, b;						\
};									\
FIXTURE_VARIANT(name) {							\
	const char *dev_a, *dev_b;					\
};									\
FIXTURE_VARIANT_ADD(name, remu0_remu1) {				\
	.dev_a = "remu0", .dev_b = "remu1" };				\
FIXTURE_VARIANT_ADD(name, loopback) {					\
	.dev_a = "remu0", .dev_b = "remu0" };				\
FIXTURE_SETUP(name)							\
{									\
	remu_use_ex = true;						\
	memset(&self->a, 0, sizeof(self->a));				\
	memset(&self->b, 0, sizeof(self->b));				\
	ASSERT_EQ(0, xside_open(&self->a, variant->dev_a, type));	\
	ASSERT_EQ(0, xside_open(&self->b, variant->dev_b, type));	\
	ASSERT_EQ(0, xside_connect(&self->a, &self->b, false));	\
	ASSERT_EQ(0, xside_connect(&self->b, &self->a, false));	\
}									\
FIXTURE_TEARDOWN(name)							\
{									\
	xside_close(&self->a);						\
	xside_close(&self->b);						\
}

/* ---- helpers ---- */

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 7 + seed + (i >> 8));
}

/* three SGEs of @s->buf at @off: lengths @l0, @l1, @l2, gaps between */
static void sges3(struct xside *s, size_t off, uint32_t l0, uint32_t l1,
		  uint32_t l2, struct ibv_sge *sge)
{
	uint64_t base = (uintptr_t)s->buf + off;

	sge[0] = (struct ibv_sge){ base, l0, s->mr->lkey };
	sge[1] = (struct ibv_sge){ base + l0 + 11, l1, s->mr->lkey };
	sge[2] = (struct ibv_sge){ base + l0 + l1 + 11 + 5, l2, s->mr->lkey };
}

/* the bytes of @n SGEs, in order, into @out: their total length */
static size_t gather(const struct ibv_sge *sge, int n, uint8_t *out)
{
	size_t len = 0;
	int i;

	for (i = 0; i < n; i++) {
		memcpy(out + len, (void *)(uintptr_t)sge[i].addr,
		       sge[i].length);
		len += sge[i].length;
	}
	return len;
}

/* one receive of @len bytes at @off of @s's buffer, id @id */
static int post_recv(struct xside *s, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };

	return remu_post_recv(s->qp, id, &sge, 1);
}

/* wait for one completion of @cq (through ibv_start_poll()) */
static int poll1(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return remu_poll_one(cq, wc, 20);
}

/*
 * ibv_start_poll() on @cq until a completion is there (20 s at most):
 * 0 (the CQ is then locked until ibv_end_poll()) or its errno
 */
static int start_poll_wait(struct ibv_cq *cq)
{
	struct ibv_poll_cq_attr pa = {};
	double end = remu_now() + 20;
	int ret;

	do
		ret = ibv_start_poll(remu_cq_ex(cq), &pa);
	while (ret == ENOENT && remu_now() < end);
	return ret;
}

/* nothing on @cq within 100 ms */
static int quiet(struct ibv_cq *cq)
{
	struct timespec d = { 0, 100 * 1000 * 1000 };
	struct ibv_wc wc;

	nanosleep(&d, NULL);
	return remu_poll_cq(cq, 1, &wc);
}

/* one signalled SEND of @s's bytes [off, off + len) in its own batch */
static int send1(struct xside *s, uint64_t id, size_t off, uint32_t len,
		 struct xside *peer)
{
	ibv_wr_start(s->qx);
	s->qx->wr_id = id;
	s->qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(s->qx);
	ibv_wr_set_sge(s->qx, s->mr->lkey, (uintptr_t)s->buf + off, len);
	if (s->qp->qp_type == IBV_QPT_UD)
		ibv_wr_set_ud_addr(s->qx, s->ah, peer->qp->qp_num, QKEY);
	return ibv_wr_complete(s->qx);
}

/* ---- fixture create: no traffic ---- */

FIXTURE(create) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

FIXTURE_SETUP(create)
{
	self->ctx = remu_open("remu0");
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	self->cq = ibv_create_cq(self->ctx, 16, NULL, NULL, 0);
	ASSERT_NE(NULL, self->cq);
}

FIXTURE_TEARDOWN(create)
{
	remu_close_objs(NULL, NULL, NULL, self->cq, self->pd, self->ctx);
}

static struct ibv_qp *qp_ex(struct ibv_pd *pd, struct ibv_cq *cq,
			    enum ibv_qp_type type, uint32_t comp_mask,
			    uint64_t ops, uint32_t create_flags)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = type, .cap = xcap(),
		.comp_mask = comp_mask, .pd = pd, .send_ops_flags = ops,
		.create_flags = create_flags,
	};

	return ibv_create_qp_ex(pd->context, &ia);
}

/* RC, UC, UD with every op of their type, with none, with CREATE_FLAGS */
TEST_F(create, qp_types)
{
	static const enum ibv_qp_type types[] = {
		IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	const uint32_t pd_ops = IBV_QP_INIT_ATTR_PD |
				IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	const uint32_t pd_cf = IBV_QP_INIT_ATTR_PD |
			       IBV_QP_INIT_ATTR_CREATE_FLAGS;
	struct ibv_qp_ex *qx;
	struct ibv_qp *qp;
	unsigned int i;

	for (i = 0; i < 3; i++) {
		qp = qp_ex(self->pd, self->cq, types[i], pd_ops,
			   remu_send_ops(types[i]), 0);
		ASSERT_NE(NULL, qp) TH_LOG("type %d: errno %d", types[i], errno);
		EXPECT_EQ(types[i], qp->qp_type);
		qx = ibv_qp_to_qp_ex(qp);
		ASSERT_NE(NULL, qx);
		/* every builder and setter, whatever the type */
		EXPECT_TRUE(qx->wr_start && qx->wr_complete && qx->wr_abort &&
			    qx->wr_send && qx->wr_send_imm && qx->wr_send_inv &&
			    qx->wr_rdma_write && qx->wr_rdma_write_imm &&
			    qx->wr_rdma_read && qx->wr_atomic_cmp_swp &&
			    qx->wr_atomic_fetch_add && qx->wr_bind_mw &&
			    qx->wr_local_inv && qx->wr_set_sge &&
			    qx->wr_set_sge_list && qx->wr_set_inline_data &&
			    qx->wr_set_inline_data_list &&
			    qx->wr_set_ud_addr && qx->wr_atomic_write);
		EXPECT_EQ(NULL, qx->wr_send_tso);
		EXPECT_EQ(0, ibv_destroy_qp(qp));

		/* UC may ask for SEND_WITH_INV (mlx5, rxe), not post it */
		qp = types[i] == IBV_QPT_UC ?
		     qp_ex(self->pd, self->cq, types[i], pd_ops,
			   IBV_QP_EX_WITH_SEND_WITH_INV, 0) : NULL;
		if (qp)
			EXPECT_EQ(0, ibv_destroy_qp(qp));
		EXPECT_EQ(types[i] == IBV_QPT_UC, qp != NULL);

		/* no send op asked for: still an ibv_qp_ex */
		qp = qp_ex(self->pd, self->cq, types[i], pd_ops, 0, 0);
		ASSERT_NE(NULL, qp) TH_LOG("type %d: errno %d", types[i], errno);
		EXPECT_NE(NULL, ibv_qp_to_qp_ex(qp));
		EXPECT_EQ(0, ibv_destroy_qp(qp));

		/* creation flags 0: a plain QP, not an ibv_qp_ex (as mlx5) */
		qp = qp_ex(self->pd, self->cq, types[i], pd_cf, 0, 0);
		ASSERT_NE(NULL, qp) TH_LOG("type %d: errno %d", types[i], errno);
		EXPECT_EQ(NULL, ibv_qp_to_qp_ex(qp));
		EXPECT_EQ(0, ibv_destroy_qp(qp));

		/*
		 * creation flags: the core takes none for RC/UC (EINVAL);
		 * remu takes BLOCK_SELF_MCAST_LB for UD (remu_mcast_test),
		 * no other (EOPNOTSUPP)
		 */
		errno = 0;
		qp = qp_ex(self->pd, self->cq, types[i], pd_cf, 0,
			   IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);
		EXPECT_EQ(types[i] == IBV_QPT_UD, qp != NULL);
		if (qp) {
			EXPECT_EQ(0, ibv_destroy_qp(qp));
		} else {
			EXPECT_EQ(EINVAL, errno);
		}
		errno = 0;
		EXPECT_EQ(NULL, qp_ex(self->pd, self->cq, types[i], pd_cf, 0,
				      IBV_QP_CREATE_PCI_WRITE_END_PADDING));
		EXPECT_EQ(types[i] == IBV_QPT_UD ? EOPNOTSUPP : EINVAL, errno);
	}
}

/*
 * send ops a type cannot do: EOPNOTSUPP (but UC may ask for SEND_WITH_INV,
 * as on mlx5 and rxe: posting one fails, uc.refused_ops); useless
 * comp_mask bits: EINVAL
 */
TEST_F(create, qp_refused)
{
	static const struct { enum ibv_qp_type type; uint64_t ops; } bad[] = {
		{ IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE },
		{ IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM },
		{ IBV_QPT_UD, IBV_QP_EX_WITH_SEND_WITH_INV },
		{ IBV_QPT_UD, IBV_QP_EX_WITH_LOCAL_INV },
		{ IBV_QPT_UD, IBV_QP_EX_WITH_BIND_MW },
		{ IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ },
		{ IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP },
		{ IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD },
		{ IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_WRITE },
		{ IBV_QPT_UD, IBV_QP_EX_WITH_ATOMIC_WRITE },
		/* libibverbs 44 has no ibv_wr_flush() (see qp_ex.c) */
		{ IBV_QPT_RC, QP_EX_WITH_FLUSH },
		{ IBV_QPT_RC, IBV_QP_EX_WITH_TSO },
		{ IBV_QPT_RC, 1ull << 40 },
		{ IBV_QPT_XRC_SEND, IBV_QP_EX_WITH_SEND },
	};
	const uint32_t pd_ops = IBV_QP_INIT_ATTR_PD |
				IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		EXPECT_EQ(NULL, qp_ex(self->pd, self->cq, bad[i].type, pd_ops,
				      bad[i].ops | IBV_QP_EX_WITH_SEND, 0))
			TH_LOG("case %u", i);
		EXPECT_EQ(EOPNOTSUPP, errno) TH_LOG("case %u", i);
	}
	errno = 0;
	EXPECT_EQ(NULL, qp_ex(self->pd, self->cq, IBV_QPT_RC,
			      pd_ops | IBV_QP_INIT_ATTR_MAX_TSO_HEADER,
			      IBV_QP_EX_WITH_SEND, 0));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, qp_ex(self->pd, self->cq, IBV_QPT_RC,
			      IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			      IBV_QP_EX_WITH_SEND, 0));
	EXPECT_EQ(EINVAL, errno);
}

static struct ibv_cq_ex *cq_ex(struct ibv_context *ctx, int cqe,
			       uint64_t wc_flags, uint32_t comp_mask,
			       uint32_t flags)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = cqe, .wc_flags = wc_flags,
					  .comp_mask = comp_mask,
					  .flags = flags };

	return ibv_create_cq_ex(ctx, &ca);
}

/* a read function for each field asked for, and for no other */
TEST_F(create, cq_read_functions)
{
	static const uint64_t asks[] = {
		0, IBV_WC_EX_WITH_BYTE_LEN, IBV_WC_EX_WITH_IMM | WC_TS,
		REMU_WC_STANDARD, WC_ALL, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
		IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK };
	unsigned int i;

	for (i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
		uint64_t f = asks[i];
		struct ibv_cq_ex *cx = cq_ex(self->ctx, 8, f, 0, 0);

		ASSERT_NE(NULL, cx) TH_LOG("wc_flags %#llx errno %d",
					   (unsigned long long)f, errno);
		EXPECT_TRUE(cx->start_poll && cx->next_poll && cx->end_poll &&
			    cx->read_opcode && cx->read_vendor_err &&
			    cx->read_wc_flags);
#define HAS(flag, fn) EXPECT_EQ(!!(f & (flag)), cx->fn != NULL) TH_LOG(#fn)
		HAS(IBV_WC_EX_WITH_BYTE_LEN, read_byte_len);
		HAS(IBV_WC_EX_WITH_IMM, read_imm_data);
		HAS(IBV_WC_EX_WITH_QP_NUM, read_qp_num);
		HAS(IBV_WC_EX_WITH_SRC_QP, read_src_qp);
		HAS(IBV_WC_EX_WITH_SLID, read_slid);
		HAS(IBV_WC_EX_WITH_SL, read_sl);
		HAS(IBV_WC_EX_WITH_DLID_PATH_BITS, read_dlid_path_bits);
		HAS(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, read_completion_ts);
		HAS(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
		    read_completion_wallclock_ns);
#undef HAS
		EXPECT_EQ(NULL, cx->read_cvlan);
		EXPECT_EQ(NULL, cx->read_flow_tag);
		EXPECT_EQ(NULL, cx->read_tm_info);
		EXPECT_EQ(0, ibv_destroy_cq(ibv_cq_ex_to_cq(cx)));
	}
	/* SINGLE_THREADED is accepted */
	{
		struct ibv_cq_ex *cx = cq_ex(self->ctx, 8, WC_ALL,
					     IBV_CQ_INIT_ATTR_MASK_FLAGS,
					     IBV_CREATE_CQ_ATTR_SINGLE_THREADED);

		ASSERT_NE(NULL, cx);
		EXPECT_EQ(0, ibv_destroy_cq(ibv_cq_ex_to_cq(cx)));
	}
}

/*
 * mlx5's errnos: wc_flags EOPNOTSUPP, cqe 0 / comp_mask / unknown flags
 * EINVAL; IGNORE_OVERRUN, which remu cannot do, EOPNOTSUPP
 */
TEST_F(create, cq_refused)
{
	static const uint64_t no[] = {
		IBV_WC_EX_WITH_CVLAN, IBV_WC_EX_WITH_FLOW_TAG,
		IBV_WC_EX_WITH_TM_INFO };
	unsigned int i;

	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		errno = 0;
		EXPECT_EQ(NULL, cq_ex(self->ctx, 8, no[i] | REMU_WC_STANDARD,
				      0, 0));
		EXPECT_EQ(EOPNOTSUPP, errno) TH_LOG("wc_flags %#llx",
						    (unsigned long long)no[i]);
	}
	errno = 0;
	EXPECT_EQ(NULL, cq_ex(self->ctx, 0, REMU_WC_STANDARD, 0, 0));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, cq_ex(self->ctx, 8, 0, IBV_CQ_INIT_ATTR_MASK_PD, 0));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, cq_ex(self->ctx, 8, 0, IBV_CQ_INIT_ATTR_MASK_FLAGS,
			      1u << 5));
	EXPECT_EQ(EINVAL, errno);
	/* a flag mlx5 has and remu has not */
	errno = 0;
	EXPECT_EQ(NULL, cq_ex(self->ctx, 8, 0, IBV_CQ_INIT_ATTR_MASK_FLAGS,
			      IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN));
	EXPECT_EQ(EOPNOTSUPP, errno);
}

TEST_F(create, start_poll_empty)
{
	struct ibv_cq_ex *cx = cq_ex(self->ctx, 8, WC_ALL, 0, 0);
	struct ibv_poll_cq_attr pa = {};
	struct ibv_wc wc;

	ASSERT_NE(NULL, cx);
	EXPECT_EQ(ENOENT, ibv_start_poll(cx, &pa));
	/* not left locked: again, and the old API, both answer */
	EXPECT_EQ(ENOENT, ibv_start_poll(cx, &pa));
	EXPECT_EQ(0, ibv_poll_cq(ibv_cq_ex_to_cq(cx), 1, &wc));
	pa.comp_mask = 1;
	EXPECT_EQ(EINVAL, ibv_start_poll(cx, &pa));
	EXPECT_EQ(0, ibv_destroy_cq(ibv_cq_ex_to_cq(cx)));
}

static uint64_t rt_now(struct ibv_context *ctx)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };

	if (ibv_query_rt_values_ex(ctx, &v) ||
	    !(v.comp_mask & IBV_VALUES_MASK_RAW_CLOCK))
		return 0;
	return (uint64_t)v.raw_clock.tv_sec * 1000000000ull +
	       v.raw_clock.tv_nsec;
}

static uint64_t ns_of(clockid_t clk)
{
	struct timespec t;

	clock_gettime(clk, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

/* the device clock: reported, readable, counting at hca_core_clock */
TEST_F(create, device_clock)
{
	struct ibv_values_ex v = { .comp_mask = 1u << 5 };
	struct timespec d = { 0, 200 * 1000 * 1000 };
	struct ibv_device_attr_ex da;
	uint64_t r0, r1, m0, m1;
	double ratio;

	ASSERT_EQ(0, ibv_query_device_ex(self->ctx, NULL, &da));
	EXPECT_EQ(1000000, da.hca_core_clock);	/* kHz: 1 ns per tick */
	EXPECT_EQ(0x7fffffffffffffffull, da.completion_timestamp_mask);
	EXPECT_EQ(EINVAL, ibv_query_rt_values_ex(self->ctx, &v));

	r0 = rt_now(self->ctx);
	m0 = ns_of(CLOCK_MONOTONIC);
	nanosleep(&d, NULL);
	r1 = rt_now(self->ctx);
	m1 = ns_of(CLOCK_MONOTONIC);
	ASSERT_NE(0, r0);
	ASSERT_GT(r1, r0);
	ratio = (double)(r1 - r0) / ((double)(m1 - m0) * da.hca_core_clock /
				     1e6);
	EXPECT_TRUE(ratio > 0.98 && ratio < 1.02) TH_LOG("ratio %f", ratio);
}

/* ---- rc ---- */

XFIXTURE(rc, IBV_QPT_RC)

/*
 * One batch of five SENDs, one doorbell: set_sge, set_sge_list (three
 * SGEs), SEND_WITH_IMM, inline_data, inline_data_list (three buffers,
 * overwritten right after the post); each compared byte for byte in its
 * own receive, in order, with the completions' fields.
 */
static void send_batch(struct __test_metadata *_metadata, struct xside *a,
		       struct xside *b, int ud)
{
	static uint8_t want[5][1024], got[1024];
	uint32_t lens[5] = { 777, 0, 300, MAX_INLINE, 0 };
	struct ibv_sge sl[3], il[3];
	struct ibv_data_buf bufs[3];
	size_t grh = ud ? GRH_LEN : 0;
	struct ibv_qp_ex *qx = a->qx;
	struct ibv_wc wc;
	int i;

	sges3(a, 1, 100, 201, 33, sl);
	sges3(a, 8193, 10, 90, 100, il);
	for (i = 0; i < 3; i++) {
		fill((void *)(uintptr_t)sl[i].addr, sl[i].length, 10 + i);
		fill((void *)(uintptr_t)il[i].addr, il[i].length, 20 + i);
		bufs[i].addr = (void *)(uintptr_t)il[i].addr;
		bufs[i].length = il[i].length;
	}
	fill(a->buf + 4097, 777, 1);
	fill(a->buf + 12289, 300, 2);
	fill(a->buf + 16385, MAX_INLINE, 3);
	memcpy(want[0], a->buf + 4097, 777);
	lens[1] = gather(sl, 3, want[1]);
	memcpy(want[2], a->buf + 12289, 300);
	memcpy(want[3], a->buf + 16385, MAX_INLINE);
	lens[4] = gather(il, 3, want[4]);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, post_recv(b, 50 + i, 65536 * (i + 1) + 3,
				       1024 + grh));

	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	qx->wr_id = 10;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf + 4097, 777);
	if (ud)
		ibv_wr_set_ud_addr(qx, a->ah, b->qp->qp_num, QKEY);
	qx->wr_id = 11;
	ibv_wr_send(qx);
	ibv_wr_set_sge_list(qx, 3, sl);
	if (ud)
		ibv_wr_set_ud_addr(qx, a->ah, b->qp->qp_num, QKEY);
	qx->wr_id = 12;
	ibv_wr_send_imm(qx, htobe32(0xabcd0012));
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf + 12289, 300);
	if (ud)
		ibv_wr_set_ud_addr(qx, a->ah, b->qp->qp_num, QKEY);
	qx->wr_id = 13;
	ibv_wr_send(qx);
	ibv_wr_set_inline_data(qx, a->buf + 16385, MAX_INLINE);
	if (ud)
		ibv_wr_set_ud_addr(qx, a->ah, b->qp->qp_num, QKEY);
	qx->wr_id = 14;
	ibv_wr_send_imm(qx, htobe32(0xabcd0014));
	ibv_wr_set_inline_data_list(qx, 3, bufs);
	if (ud)
		ibv_wr_set_ud_addr(qx, a->ah, b->qp->qp_num, QKEY);
	ASSERT_EQ(0, ibv_wr_complete(qx));
	/* inline data was copied at post: overwriting it changes nothing */
	memset(a->buf + 16385, 0, MAX_INLINE);
	for (i = 0; i < 3; i++)
		memset((void *)(uintptr_t)il[i].addr, 0, il[i].length);

	for (i = 0; i < 5; i++) {
		ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
		EXPECT_EQ(10 + i, wc.wr_id);
		EXPECT_EQ(IBV_WC_SEND, wc.opcode);
		EXPECT_EQ(a->qp->qp_num, wc.qp_num);
	}
	for (i = 0; i < 5; i++) {
		int imm = i == 2 || i == 4;

		ASSERT_EQ(IBV_WC_SUCCESS, poll1(b->cq, &wc));
		EXPECT_EQ(50 + i, wc.wr_id);
		EXPECT_EQ(IBV_WC_RECV, wc.opcode);
		EXPECT_EQ(lens[i] + grh, wc.byte_len);
		EXPECT_EQ(b->qp->qp_num, wc.qp_num);
		EXPECT_EQ((imm ? IBV_WC_WITH_IMM : 0) | (ud ? IBV_WC_GRH : 0),
			  wc.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_GRH));
		if (imm)
			EXPECT_EQ(htobe32(0xabcd0010 + i), wc.imm_data);
		if (ud)
			EXPECT_EQ(a->qp->qp_num, wc.src_qp);
		memcpy(got, b->buf + 65536 * (i + 1) + 3 + grh, lens[i]);
		EXPECT_EQ(-1, remu_cmp(want[i], got, lens[i]))
			TH_LOG("message %d", i);
		EXPECT_EQ(0xee, b->buf[65536 * (i + 1) + 3 + grh + lens[i]]);
	}
	EXPECT_EQ(0, quiet(b->cq));
}

TEST_F(rc, send_ops)
{
	send_batch(_metadata, &self->a, &self->b, 0);
}

/* RDMA WRITE (SGE list), WRITE_WITH_IMM and READ (SGE list), one batch */
TEST_F(rc, rdma_ops)
{
	static uint8_t want[70000], got[70000];
	struct xside *a = &self->a, *b = &self->b;
	uint64_t rbase = (uintptr_t)b->buf;
	struct ibv_qp_ex *qx = a->qx;
	struct ibv_sge ws[3], rs[3];
	size_t wlen, rlen;
	struct ibv_wc wc;

	sges3(a, 5, 4000, 10000, 50001, ws);	/* several MTUs */
	sges3(a, 300001, 1, 4097, 3000, rs);
	memset(a->buf + 300001, 0xee, 20000);
	fill((void *)(uintptr_t)ws[0].addr, 64100, 5);
	fill(a->buf + 200003, 999, 6);
	fill(b->buf + 500007, 8000, 7);
	wlen = gather(ws, 3, want);
	ASSERT_EQ(0, post_recv(b, 60, 0, 0));	/* WRITE_WITH_IMM's */

	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	qx->wr_id = 20;
	ibv_wr_rdma_write(qx, b->mr->rkey, rbase + 3);
	ibv_wr_set_sge_list(qx, 3, ws);
	qx->wr_id = 21;
	ibv_wr_rdma_write_imm(qx, b->mr->rkey, rbase + 100001,
			      htobe32(0x12345678));
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf + 200003, 999);
	qx->wr_id = 22;
	ibv_wr_rdma_read(qx, b->mr->rkey, rbase + 500007);
	ibv_wr_set_sge_list(qx, 3, rs);
	ASSERT_EQ(0, ibv_wr_complete(qx));

	ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
	EXPECT_EQ(20, wc.wr_id);
	EXPECT_EQ(IBV_WC_RDMA_WRITE, wc.opcode);
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
	EXPECT_EQ(21, wc.wr_id);
	EXPECT_EQ(IBV_WC_RDMA_WRITE, wc.opcode);
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
	EXPECT_EQ(22, wc.wr_id);
	EXPECT_EQ(IBV_WC_RDMA_READ, wc.opcode);
	EXPECT_EQ(7098, wc.byte_len);
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(b->cq, &wc));
	EXPECT_EQ(60, wc.wr_id);
	EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
	EXPECT_EQ(999, wc.byte_len);
	EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
	EXPECT_EQ(htobe32(0x12345678), wc.imm_data);

	EXPECT_EQ(-1, remu_cmp(want, b->buf + 3, wlen));
	EXPECT_EQ(0xee, b->buf[2]);
	EXPECT_EQ(0xee, b->buf[3 + wlen]);
	EXPECT_EQ(-1, remu_cmp(a->buf + 200003, b->buf + 100001, 999));
	EXPECT_EQ(0xee, b->buf[100001 + 999]);
	rlen = gather(rs, 3, got);
	EXPECT_EQ(-1, remu_cmp(b->buf + 500007, got, rlen));
	EXPECT_EQ(0xee, a->buf[rs[0].addr - (uintptr_t)a->buf + rs[0].length]);
}

/* FETCH_ADD and CMP_SWP (a match and a miss): old values, target */
TEST_F(rc, atomics)
{
	struct xside *a = &self->a, *b = &self->b;
	uint64_t *target = (uint64_t *)(b->buf + 4096);
	uint64_t *old = (uint64_t *)(a->buf + 8192);
	struct ibv_qp_ex *qx = a->qx;
	struct ibv_wc wc;
	int i;

	*target = 1000;
	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	qx->wr_id = 30;
	ibv_wr_atomic_fetch_add(qx, b->mr->rkey, (uintptr_t)target, 23);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)&old[0], 8);
	qx->wr_id = 31;
	ibv_wr_atomic_cmp_swp(qx, b->mr->rkey, (uintptr_t)target, 1023, 77);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)&old[1], 8);
	qx->wr_id = 32;
	ibv_wr_atomic_cmp_swp(qx, b->mr->rkey, (uintptr_t)target, 5, 99);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)&old[2], 8);
	ASSERT_EQ(0, ibv_wr_complete(qx));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
		EXPECT_EQ(30 + i, wc.wr_id);
		EXPECT_EQ(i ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD, wc.opcode);
	}
	EXPECT_EQ(1000, old[0]);
	EXPECT_EQ(1023, old[1]);
	EXPECT_EQ(77, old[2]);
	EXPECT_EQ(77, *target);
}

/*
 * IBA 1.5 ATOMIC_WRITE, ibv_wr_atomic_write(): the 8 bytes land at once,
 * as they were at the source, nothing around them changes, and it
 * completes as IBV_WC_ATOMIC_WRITE; a misaligned target is an invalid
 * request.  ibv_post_send() cannot carry one (no field for the value):
 * EINVAL.
 */
TEST_F(rc, atomic_write)
{
	static const uint8_t val[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct xside *a = &self->a, *b = &self->b;
	uint8_t *target = b->buf + 4096;
	struct ibv_sge sge = { (uintptr_t)a->buf, 8, a->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_WRITE }, *bad;
	struct ibv_qp_ex *qx = a->qx;
	struct ibv_device_attr_ex da;
	struct ibv_wc wc;
	char why[256];
	int i;

	ASSERT_EQ(0, ibv_query_device_ex(a->ctx, NULL, &da));
	/* a kernel without IBA 1.5 in ib_core (6.1): none of the three */
	if (remu_absent(variant->dev_a, "atomic_write", why, sizeof(why))) {
		EXPECT_EQ(0, da.device_cap_flags_ex & (7ull << 38));
		SKIP(return, "%s", why);
	}
	/* IB_UVERBS_DEVICE_ATOMIC_WRITE, _FLUSH_GLOBAL, _FLUSH_PERSISTENT */
	EXPECT_EQ(7ull << 38, da.device_cap_flags_ex & (7ull << 38));
	EXPECT_EQ(EINVAL, ibv_post_send(a->qp, &wr, &bad));

	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	qx->wr_id = 40;
	ibv_wr_atomic_write(qx, b->mr->rkey, (uintptr_t)target, val);
	ASSERT_EQ(0, ibv_wr_complete(qx));
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
	EXPECT_EQ(40, wc.wr_id);
	EXPECT_EQ(IBV_WC_ATOMIC_WRITE, wc.opcode);
	EXPECT_EQ(0, memcmp(target, val, 8));
	for (i = 1; i <= 8; i++) {
		EXPECT_EQ(0xee, target[-i]);
		EXPECT_EQ(0xee, target[7 + i]);
	}

	ibv_wr_start(qx);
	qx->wr_id = 41;
	ibv_wr_atomic_write(qx, b->mr->rkey, (uintptr_t)target + 4, val);
	ASSERT_EQ(0, ibv_wr_complete(qx));
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, poll1(a->cq, &wc));
	EXPECT_EQ(41, wc.wr_id);
}

/*
 * b binds a type 2B window with ibv_wr_bind_mw(): a's WRITE through its
 * key lands; b invalidates it with ibv_wr_local_inv(): a's next WRITE
 * through the key fails with REM_ACCESS_ERR and lands nothing.
 */
TEST_F(rc, bind_mw_local_inv)
{
	struct xside *a = &self->a, *b = &self->b;
	struct ibv_mw_bind_info bi = {
		.mr = b->mr, .addr = (uintptr_t)b->buf + 4096,
		.length = 8192, .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct ibv_mw *mw = ibv_alloc_mw(b->pd, IBV_MW_TYPE_2);
	struct ibv_wc wc;
	uint32_t key;

	ASSERT_NE(NULL, mw);
	key = ibv_inc_rkey(mw->rkey);
	ibv_wr_start(b->qx);
	b->qx->wr_id = 40;
	b->qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(b->qx, mw, key, &bi);
	ASSERT_EQ(0, ibv_wr_complete(b->qx));
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(b->cq, &wc));
	EXPECT_EQ(40, wc.wr_id);
	EXPECT_EQ(IBV_WC_BIND_MW, wc.opcode);

	fill(a->buf, 5000, 9);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(a->qp, a->cq, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf,
			     a->mr->lkey, 5000, bi.addr + 100, key, 20));
	EXPECT_EQ(-1, remu_cmp(a->buf, b->buf + 4096 + 100, 5000));

	ibv_wr_start(b->qx);
	b->qx->wr_id = 41;
	b->qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(b->qx, key);
	ASSERT_EQ(0, ibv_wr_complete(b->qx));
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(b->cq, &wc));
	EXPECT_EQ(41, wc.wr_id);
	EXPECT_EQ(IBV_WC_LOCAL_INV, wc.opcode);

	memset(b->buf + 4096, 0xee, 8192);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  remu_rdma1(a->qp, a->cq, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf,
			     a->mr->lkey, 100, bi.addr, key, 20));
	EXPECT_EQ(0xee, b->buf[4096]);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
}

/*
 * SEND_WITH_INV of b's bound window: b's receive completes WITH_INV and
 * the key (ibv_wc_read_invalidated_rkey()), which is dead afterwards.
 */
TEST_F(rc, send_inv)
{
	struct xside *a = &self->a, *b = &self->b;
	struct ibv_mw_bind_info bi = {
		.mr = b->mr, .addr = (uintptr_t)b->buf + 4096,
		.length = 4096, .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct ibv_mw *mw = ibv_alloc_mw(b->pd, IBV_MW_TYPE_2);
	struct ibv_cq_ex *bx = remu_cq_ex(b->cq);
	struct ibv_wc wc;
	uint32_t key;

	ASSERT_NE(NULL, mw);
	key = ibv_inc_rkey(mw->rkey);
	ibv_wr_start(b->qx);
	b->qx->wr_id = 42;
	b->qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(b->qx, mw, key, &bi);
	ASSERT_EQ(0, ibv_wr_complete(b->qx));
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(b->cq, &wc));

	ASSERT_EQ(0, post_recv(b, 61, 65536, 100));
	fill(a->buf, 100, 4);
	ibv_wr_start(a->qx);
	a->qx->wr_id = 43;
	a->qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(a->qx, key);
	ibv_wr_set_sge(a->qx, a->mr->lkey, (uintptr_t)a->buf, 100);
	ASSERT_EQ(0, ibv_wr_complete(a->qx));
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
	EXPECT_EQ(43, wc.wr_id);
	EXPECT_EQ(IBV_WC_SEND, wc.opcode);

	ASSERT_EQ(0, start_poll_wait(b->cq));
	EXPECT_EQ(IBV_WC_SUCCESS, bx->status);
	EXPECT_EQ(61, bx->wr_id);
	EXPECT_EQ(IBV_WC_RECV, ibv_wc_read_opcode(bx));
	EXPECT_EQ(IBV_WC_WITH_INV, ibv_wc_read_wc_flags(bx) & IBV_WC_WITH_INV);
	EXPECT_EQ(key, ibv_wc_read_invalidated_rkey(bx));
	EXPECT_EQ(100, ibv_wc_read_byte_len(bx));
	ibv_end_poll(bx);
	EXPECT_EQ(-1, remu_cmp(a->buf, b->buf + 65536, 100));

	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  remu_rdma1(a->qp, a->cq, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf,
			     a->mr->lkey, 100, bi.addr, key, 20));
	EXPECT_EQ(0xee, b->buf[4096]);
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
}

/*
 * ibv_wr_abort() leaves nothing: three SENDs built and aborted, then a
 * batch of one; only that one arrives and completes.
 */
TEST_F(rc, abort_leaves_nothing)
{
	struct xside *a = &self->a, *b = &self->b;
	struct ibv_qp_ex *qx = a->qx;
	struct ibv_wc wc;
	int i;

	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, post_recv(b, 70 + i, 4096 * (i + 1), 64));
	fill(a->buf, 64, 1);
	fill(a->buf + 64, 64, 2);
	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	for (i = 0; i < 3; i++) {
		qx->wr_id = 80 + i;
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf, 64);
	}
	ibv_wr_abort(qx);
	EXPECT_EQ(0, quiet(b->cq));

	ASSERT_EQ(0, send1(a, 90, 64, 64, b));
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
	EXPECT_EQ(90, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(b->cq, &wc));
	EXPECT_EQ(70, wc.wr_id);
	EXPECT_EQ(-1, remu_cmp(a->buf + 64, b->buf + 4096, 64));
	EXPECT_EQ(0, quiet(a->cq));
	EXPECT_EQ(0, quiet(b->cq));
}

/*
 * An error anywhere in a batch: ibv_wr_complete() returns mlx5's errno
 * and nothing of the batch goes out, not even the good WR built before
 * it; the QP goes on.  @bad builds the faulty WR.
 */
static void batch_fails(struct __test_metadata *_metadata, struct xside *a,
			struct xside *b, int err,
			void (*bad)(struct xside *a, struct xside *b))
{
	struct ibv_qp_ex *qx = a->qx;
	struct ibv_wc wc;

	/* a receive waits: a WR of the batch that went out would take it */
	ASSERT_EQ(0, post_recv(b, 99, 0, 64 + GRH_LEN));
	ibv_wr_start(qx);
	qx->wr_id = 100;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf, 16);
	if (a->qp->qp_type == IBV_QPT_UD)
		ibv_wr_set_ud_addr(qx, a->ah, b->qp->qp_num, QKEY);
	qx->wr_id = 101;
	bad(a, b);
	EXPECT_EQ(err, ibv_wr_complete(qx));
	EXPECT_EQ(0, quiet(a->cq));
	EXPECT_EQ(0, quiet(b->cq));
	/* the next batch goes out, alone */
	ASSERT_EQ(0, send1(a, 102, 0, 16, b));
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
	EXPECT_EQ(102, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(b->cq, &wc));
	EXPECT_EQ(99, wc.wr_id);
	EXPECT_EQ(0, quiet(a->cq));
	EXPECT_EQ(0, quiet(b->cq));
}

/* the capacities the QP got (at least those asked for) */
static struct ibv_qp_cap qp_cap(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa = {};

	ibv_query_qp(qp, &qa, IBV_QP_CAP, &ia);
	return qa.cap;
}

static void bad_sges(struct xside *a, struct xside *b)
{
	uint32_t n = qp_cap(a->qp).max_send_sge + 1;
	struct ibv_sge sge[64];
	uint32_t i;

	for (i = 0; i < n && i < 64; i++)
		sge[i] = (struct ibv_sge){ (uintptr_t)a->buf + i, 1,
					   a->mr->lkey };
	ibv_wr_send(a->qx);
	ibv_wr_set_sge_list(a->qx, n, sge);
}

static void bad_inline(struct xside *a, struct xside *b)
{
	ibv_wr_send(a->qx);
	ibv_wr_set_inline_data(a->qx, a->buf,
			       qp_cap(a->qp).max_inline_data + 1);
}

static void bad_inline_list(struct xside *a, struct xside *b)
{
	uint32_t max = qp_cap(a->qp).max_inline_data;
	struct ibv_data_buf bufs[3] = { { a->buf, 100 }, { a->buf, 100 },
					{ a->buf, max - 199 } };

	ibv_wr_send(a->qx);
	ibv_wr_set_inline_data_list(a->qx, 3, bufs);
}

/* more WRs than the SQ ring holds (it is at most 2 * SQ_WR slots) */
static void bad_full(struct xside *a, struct xside *b)
{
	int i;

	for (i = 0; i < 4 * SQ_WR; i++) {
		ibv_wr_send(a->qx);
		ibv_wr_set_sge(a->qx, a->mr->lkey, (uintptr_t)a->buf, 1);
		if (a->qp->qp_type == IBV_QPT_UD)
			ibv_wr_set_ud_addr(a->qx, a->ah, b->qp->qp_num, QKEY);
	}
}

static void bad_read(struct xside *a, struct xside *b)
{
	ibv_wr_rdma_read(a->qx, b->mr->rkey, (uintptr_t)b->buf);
	ibv_wr_set_sge(a->qx, a->mr->lkey, (uintptr_t)a->buf, 8);
}

static void bad_write(struct xside *a, struct xside *b)
{
	ibv_wr_rdma_write(a->qx, b->mr->rkey, (uintptr_t)b->buf);
	ibv_wr_set_sge(a->qx, a->mr->lkey, (uintptr_t)a->buf, 8);
}

static void bad_no_wqe(struct xside *a, struct xside *b)
{
	ibv_wr_local_inv(a->qx, 0x1234);
	ibv_wr_set_sge(a->qx, a->mr->lkey, (uintptr_t)a->buf, 8);
}

static void bad_type1(struct xside *a, struct xside *b)
{
	struct ibv_mw_bind_info bi = { .mr = a->mr,
				       .addr = (uintptr_t)a->buf,
				       .length = 64,
				       .mw_access_flags =
					IBV_ACCESS_REMOTE_WRITE };
	struct ibv_mw *mw = ibv_alloc_mw(a->pd, IBV_MW_TYPE_1);

	ibv_wr_bind_mw(a->qx, mw, mw ? ibv_inc_rkey(mw->rkey) : 0, &bi);
	if (mw)
		ibv_dealloc_mw(mw);
}

TEST_F(rc, errors_at_complete)
{
	batch_fails(_metadata, &self->a, &self->b, ENOMEM, bad_sges);
	batch_fails(_metadata, &self->a, &self->b, ENOMEM, bad_inline);
	batch_fails(_metadata, &self->a, &self->b, ENOMEM, bad_inline_list);
	batch_fails(_metadata, &self->a, &self->b, ENOMEM, bad_full);
	batch_fails(_metadata, &self->a, &self->b, EINVAL, bad_no_wqe);
	batch_fails(_metadata, &self->a, &self->b, EINVAL, bad_type1);
}

/* a QP not in RTS refuses the batch at complete, as ibv_post_send does */
TEST_F(rc, complete_in_rtr)
{
	struct xside *a = &self->a, *b = &self->b;
	struct remu_conn_attr ra = REMU_RC_ATTR(0x321);
	struct remu_conn_dest d = { .qpn = b->qp->qp_num, .gid = b->gid,
				    .mtu = remu_min_mtu(a->mtu, b->mtu) };

	ra.reset = true;
	ra.rtr_only = true;
	ASSERT_EQ(0, remu_qp_connect(a->qp, &ra, GID_INDEX, &d));
	EXPECT_EQ(EINVAL, send1(a, 1, 0, 8, b));
	EXPECT_EQ(0, quiet(a->cq));
	EXPECT_EQ(0, quiet(b->cq));
}

/* ---- uc ---- */

XFIXTURE(uc, IBV_QPT_UC)

TEST_F(uc, send_ops)
{
	send_batch(_metadata, &self->a, &self->b, 0);
}

/* WRITE (SGE list) and WRITE_WITH_IMM; READ, atomics, SEND_WITH_INV refused */
TEST_F(uc, rdma_ops)
{
	struct xside *a = &self->a, *b = &self->b;
	static uint8_t want[20000];
	struct ibv_qp_ex *qx = a->qx;
	struct ibv_sge ws[3];
	struct ibv_wc wc;
	size_t wlen;

	sges3(a, 5, 3000, 7000, 9000, ws);
	fill((void *)(uintptr_t)ws[0].addr, 19100, 3);
	wlen = gather(ws, 3, want);
	ASSERT_EQ(0, post_recv(b, 62, 0, 0));
	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	qx->wr_id = 23;
	ibv_wr_rdma_write(qx, b->mr->rkey, (uintptr_t)b->buf + 1);
	ibv_wr_set_sge_list(qx, 3, ws);
	qx->wr_id = 24;
	ibv_wr_rdma_write_imm(qx, b->mr->rkey, (uintptr_t)b->buf + 30001,
			      htobe32(0x55aa));
	ibv_wr_set_sge_list(qx, 3, ws);
	ASSERT_EQ(0, ibv_wr_complete(qx));
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
	EXPECT_EQ(23, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(a->cq, &wc));
	EXPECT_EQ(24, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, poll1(b->cq, &wc));
	EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
	EXPECT_EQ(htobe32(0x55aa), wc.imm_data);
	EXPECT_EQ(wlen, wc.byte_len);
	EXPECT_EQ(-1, remu_cmp(want, b->buf + 1, wlen));
	EXPECT_EQ(-1, remu_cmp(want, b->buf + 30001, wlen));

	batch_fails(_metadata, a, b, EINVAL, bad_read);
}

static void bad_atomic(struct xside *a, struct xside *b)
{
	ibv_wr_atomic_fetch_add(a->qx, b->mr->rkey, (uintptr_t)b->buf, 1);
	ibv_wr_set_sge(a->qx, a->mr->lkey, (uintptr_t)a->buf, 8);
}

static void bad_send_inv(struct xside *a, struct xside *b)
{
	ibv_wr_send_inv(a->qx, 0x100);
}

TEST_F(uc, refused_ops)
{
	batch_fails(_metadata, &self->a, &self->b, EINVAL, bad_atomic);
	batch_fails(_metadata, &self->a, &self->b, EINVAL, bad_send_inv);
	batch_fails(_metadata, &self->a, &self->b, ENOMEM, bad_full);
}

/* ---- ud ---- */

XFIXTURE(ud, IBV_QPT_UD)

TEST_F(ud, send_ops)
{
	send_batch(_metadata, &self->a, &self->b, 1);
}

static void bad_ah_pd(struct xside *a, struct xside *b)
{
	struct ibv_pd *pd = ibv_alloc_pd(a->ctx);
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;

	remu_set_av(&aa, &b->gid, GID_INDEX, 0);
	ah = pd ? ibv_create_ah(pd, &aa) : NULL;
	ibv_wr_send(a->qx);
	ibv_wr_set_sge(a->qx, a->mr->lkey, (uintptr_t)a->buf, 8);
	ibv_wr_set_ud_addr(a->qx, ah, b->qp->qp_num, QKEY);
	if (ah)
		ibv_destroy_ah(ah);
	if (pd)
		ibv_dealloc_pd(pd);
}

TEST_F(ud, errors_at_complete)
{
	batch_fails(_metadata, &self->a, &self->b, EINVAL, bad_write);
	batch_fails(_metadata, &self->a, &self->b, EINVAL, bad_read);
	batch_fails(_metadata, &self->a, &self->b, EINVAL, bad_send_inv);
	batch_fails(_metadata, &self->a, &self->b, EINVAL, bad_ah_pd);
	batch_fails(_metadata, &self->a, &self->b, ENOMEM, bad_sges);
	batch_fails(_metadata, &self->a, &self->b, ENOMEM, bad_inline);
}

/* ---- the extended CQ against ibv_poll_cq() ---- */

/* every field ibv_poll_cq() gives but pkey_index (not in the ex API) */
static void wc_same(struct __test_metadata *_metadata, const struct ibv_wc *o,
		    const struct ibv_wc *n)
{
	EXPECT_EQ(o->wr_id, n->wr_id);
	EXPECT_EQ(o->status, n->status);
	EXPECT_EQ(o->opcode, n->opcode);
	EXPECT_EQ(o->vendor_err, n->vendor_err);
	EXPECT_EQ(o->byte_len, n->byte_len);
	EXPECT_EQ(o->imm_data, n->imm_data);
	EXPECT_EQ(o->qp_num, n->qp_num);
	EXPECT_EQ(o->src_qp, n->src_qp);
	EXPECT_EQ(o->wc_flags, n->wc_flags);
	EXPECT_EQ(o->slid, n->slid);
	EXPECT_EQ(o->sl, n->sl);
	EXPECT_EQ(o->dlid_path_bits, n->dlid_path_bits);
}

typedef int (*poll_fn)(struct ibv_cq *, int, struct ibv_wc *);

/* exactly @na completions of @a's CQ into @wa and @nb of @b's into @wb */
static int poll_both(struct xside *a, int na, struct ibv_wc *wa,
		     struct xside *b, int nb, struct ibv_wc *wb, poll_fn poll)
{
	int ga = 0, gb = 0, spin;

	for (spin = 0; spin < 20000 && (ga < na || gb < nb); spin++) {
		int n = poll(a->cq, na - ga, wa + ga);
		int m = poll(b->cq, nb - gb, wb + gb);

		if (n < 0 || m < 0)
			return -1;
		ga += n;
		gb += m;
		if (!n && !m)
			usleep(1000);
	}
	return ga == na && gb == nb ? 0 : -1;
}

/*
 * The same RC traffic twice (SEND, SEND_WITH_IMM, WRITE_WITH_IMM, READ,
 * FETCH_ADD, then a WRITE to a bad rkey: REM_ACCESS_ERR and a flushed
 * receive), polled once with ibv_poll_cq() and once through
 * ibv_start_poll() (remu_poll_cq_ex(): every ibv_wc_read_*()).
 */
static int rc_round(struct xside *a, struct xside *b, struct ibv_wc *wa,
		    struct ibv_wc *wb, poll_fn poll)
{
	struct ibv_qp_ex *qx = a->qx;

	if (post_recv(b, 1, 0, 512) || post_recv(b, 2, 512, 512) ||
	    post_recv(b, 3, 1024, 512) || post_recv(b, 4, 2048, 512))
		return -1;
	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	qx->wr_id = 11;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf, 100);
	qx->wr_id = 12;
	ibv_wr_send_imm(qx, htobe32(7));
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf, 0);
	qx->wr_id = 13;
	ibv_wr_rdma_write_imm(qx, b->mr->rkey, (uintptr_t)b->buf + 8192,
			      htobe32(8));
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf, 33);
	qx->wr_id = 14;
	ibv_wr_rdma_read(qx, b->mr->rkey, (uintptr_t)b->buf + 8192);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf + 4096, 33);
	qx->wr_id = 15;
	ibv_wr_atomic_fetch_add(qx, b->mr->rkey, (uintptr_t)b->buf + 16384, 1);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf + 8192, 8);
	qx->wr_id = 16;
	ibv_wr_rdma_write(qx, b->mr->rkey ^ 0x80, (uintptr_t)b->buf);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf, 8);
	if (ibv_wr_complete(qx))
		return -1;
	return poll_both(a, 6, wa, b, 4, wb, poll);
}

TEST_F(rc, cq_fields_match_poll_cq)
{
	struct ibv_wc oa[6], ob[4], xa[6], xb[4];
	int i;

	ASSERT_EQ(0, rc_round(&self->a, &self->b, oa, ob, ibv_poll_cq));
	/* the QPs are in ERR now: connect them again */
	ASSERT_EQ(0, xside_connect(&self->a, &self->b, true));
	ASSERT_EQ(0, xside_connect(&self->b, &self->a, true));
	ASSERT_EQ(0, rc_round(&self->a, &self->b, xa, xb, remu_poll_cq_ex));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, oa[5].status);
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, ob[3].status);
	for (i = 0; i < 6; i++)
		wc_same(_metadata, &oa[i], &xa[i]);
	for (i = 0; i < 4; i++)
		wc_same(_metadata, &ob[i], &xb[i]);
}

/*
 * The same UD traffic twice (SEND, SEND_WITH_IMM, inline), polled once
 * with ibv_poll_cq() and once through ibv_start_poll(): the receives
 * carry GRH, src_qp and the immediate.
 */
static int ud_round(struct xside *a, struct xside *b, struct ibv_wc *wa,
		    struct ibv_wc *wb, poll_fn poll)
{
	struct ibv_qp_ex *qx = a->qx;

	if (post_recv(b, 1, 0, 512) || post_recv(b, 2, 512, 512) ||
	    post_recv(b, 3, 1024, 512))
		return -1;
	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	qx->wr_id = 21;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf, 200);
	ibv_wr_set_ud_addr(qx, a->ah, b->qp->qp_num, QKEY);
	qx->wr_id = 22;
	ibv_wr_send_imm(qx, htobe32(0x600d));
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf, 1);
	ibv_wr_set_ud_addr(qx, a->ah, b->qp->qp_num, QKEY);
	qx->wr_id = 23;
	ibv_wr_send(qx);
	ibv_wr_set_inline_data(qx, a->buf, 20);
	ibv_wr_set_ud_addr(qx, a->ah, b->qp->qp_num, QKEY);
	if (ibv_wr_complete(qx))
		return -1;
	return poll_both(a, 3, wa, b, 3, wb, poll);
}

TEST_F(ud, cq_fields_match_poll_cq)
{
	struct ibv_wc oa[3], ob[3], xa[3], xb[3];
	int i;

	ASSERT_EQ(0, ud_round(&self->a, &self->b, oa, ob, ibv_poll_cq));
	ASSERT_EQ(0, ud_round(&self->a, &self->b, xa, xb, remu_poll_cq_ex));
	EXPECT_TRUE(ob[1].wc_flags & IBV_WC_WITH_IMM);
	EXPECT_EQ(self->a.qp->qp_num, ob[0].src_qp);
	for (i = 0; i < 3; i++) {
		EXPECT_TRUE(ob[i].wc_flags & IBV_WC_GRH);
		wc_same(_metadata, &oa[i], &xa[i]);
		wc_same(_metadata, &ob[i], &xb[i]);
	}
}

/* ---- completion timestamps ---- */

/*
 * The next completion of @s's CQ, id @id: its stamps inside the windows
 * that opened at @t0 (device clock) and @w0 (CLOCK_REALTIME) and close
 * after the poll, and not before *@prev, which becomes its stamp.
 * 0, or -1 when no completion came.
 */
static int ts_check(struct __test_metadata *_metadata, struct xside *s,
		    uint64_t id, uint64_t t0, uint64_t w0, uint64_t *prev)
{
	struct ibv_cq_ex *cx = remu_cq_ex(s->cq);
	uint64_t ts, wall, t1, w1;

	if (start_poll_wait(s->cq))
		return -1;
	EXPECT_EQ(IBV_WC_SUCCESS, cx->status);
	EXPECT_EQ(id, cx->wr_id);
	ts = ibv_wc_read_completion_ts(cx);
	wall = ibv_wc_read_completion_wallclock_ns(cx);
	ibv_end_poll(cx);
	t1 = rt_now(s->ctx);
	w1 = ns_of(CLOCK_REALTIME);
	EXPECT_TRUE(t0 <= ts && ts <= t1)
		TH_LOG("wr %llu: %llu not in [%llu, %llu]",
		       (unsigned long long)id, (unsigned long long)ts,
		       (unsigned long long)t0, (unsigned long long)t1);
	EXPECT_TRUE(w0 <= wall && wall <= w1)
		TH_LOG("wr %llu: wall clock %llu not in [%llu, %llu]",
		       (unsigned long long)id, (unsigned long long)wall,
		       (unsigned long long)w0, (unsigned long long)w1);
	EXPECT_LE(*prev, ts);
	*prev = ts;
	return 0;
}

/*
 * @n SENDs a -> b, one at a time, small enough for inline receive (40
 * bytes; UD 20, after the 40-byte GRH area), each completion's stamps
 * (sender and receiver) inside the window of the device clock
 * (ibv_query_rt_values_ex()) and of CLOCK_REALTIME around the post and
 * the poll, each CQ's stamps never going backwards, the data byte for
 * byte.  Return: how many receives b's port delivered inline meanwhile.
 */
static long ts_rounds(struct __test_metadata *_metadata, struct xside *a,
		      struct xside *b, const char *dev_b, int n)
{
	long inl0 = remu_hw_counter(dev_b, "inline_recvs", true);
	size_t grh = a->qp->qp_type == IBV_QPT_UD ? GRH_LEN : 0;
	uint32_t len = grh ? 20 : 40;
	uint64_t prev_a = 0, prev_b = 0, t0, w0;
	int i;

	for (i = 0; i < n; i++) {
		fill(a->buf + 128, len, i);
		memset(b->buf + 4096, 0xee, 64 + 1);
		if (post_recv(b, 200 + i, 4096, 64))
			return -1;
		t0 = rt_now(a->ctx);
		w0 = ns_of(CLOCK_REALTIME);
		if (send1(a, 300 + i, 128, len, b) ||
		    ts_check(_metadata, a, 300 + i, t0, w0, &prev_a) ||
		    ts_check(_metadata, b, 200 + i, t0, w0, &prev_b))
			return -1;
		EXPECT_EQ(-1, remu_cmp(a->buf + 128, b->buf + 4096 + grh, len));
		EXPECT_EQ(0xee, b->buf[4096 + grh + len]);
	}
	return remu_hw_counter(dev_b, "inline_recvs", true) - inl0;
}

/* timestamps on CQs that also take inline receives (320-byte slots) */
TEST_F(rc, timestamps)
{
	EXPECT_EQ(20, ts_rounds(_metadata, &self->a, &self->b, variant->dev_b,
				20));
}

/* resizing keeps the slot format: timestamps and inline receive still on */
TEST_F(rc, timestamps_after_resize)
{
	ASSERT_EQ(0, ibv_resize_cq(self->a.cq, 1000));
	ASSERT_EQ(0, ibv_resize_cq(self->b.cq, 3));
	EXPECT_EQ(10, ts_rounds(_metadata, &self->a, &self->b, variant->dev_b,
				10));
}

/* REMU_SCATTER_TO_CQE=0: timestamps alone (128-byte slots) */
TEST_F(rc, timestamps_no_inline_recv)
{
	setenv("REMU_SCATTER_TO_CQE", "0", 1);
	xside_close(&self->b);
	ASSERT_EQ(0, xside_open(&self->b, variant->dev_b, IBV_QPT_RC));
	ASSERT_EQ(0, xside_connect(&self->b, &self->a, false));
	ASSERT_EQ(0, xside_connect(&self->a, &self->b, true));
	EXPECT_EQ(0, ts_rounds(_metadata, &self->a, &self->b, variant->dev_b,
			       10));
}

/* UD: the same, the GRH area inline too */
TEST_F(ud, timestamps)
{
	EXPECT_EQ(10, ts_rounds(_metadata, &self->a, &self->b, variant->dev_b,
				10));
}

/* ---- the fast path, counted with ptrace ---- */

#define WINDOWS	5
#define BATCHES	100
#define FIRST	16

static int syscall_child(void)
{
	struct ibv_qp_cap cap = { .max_send_wr = 512, .max_recv_wr = 1,
				  .max_send_sge = 1, .max_recv_sge = 1 };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_context *c = remu_open("remu0");
	static uint64_t ids[FIRST + BATCHES];
	struct ibv_poll_cq_attr pa = {};
	static uint8_t buf[64];
	struct ibv_cq_ex *cx;
	struct ibv_qp_ex *qx;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	int i, got = 0;
	long spin;

	pd = c ? ibv_alloc_pd(c) : NULL;
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) :
		  NULL;
	cq = mr ? remu_create_cq_ex(c, 4096, WC_ALL) : NULL;
	qp = cq ? remu_create_qp_ex(pd, cq, IBV_QPT_RC, &cap) : NULL;
	qx = qp ? ibv_qp_to_qp_ex(qp) : NULL;
	if (!qx)
		return 2;
	cx = remu_cq_ex(cq);
	/* in ERR every WQE is flushed to the CQ as soon as it is posted */
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return 3;
	qa.qp_state = IBV_QPS_ERR;
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE))
		return 3;

	remu_mark();		/* window 0: a batch of 16 WRs built */
	ibv_wr_start(qx);
	for (i = 0; i < FIRST; i++) {
		qx->wr_id = i;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 8);
	}
	remu_mark();
	remu_mark();		/* window 1: its ibv_wr_complete() */
	if (ibv_wr_complete(qx))
		return 4;
	remu_mark();

	remu_mark();		/* window 2: 8 WRs built and aborted */
	ibv_wr_start(qx);
	for (i = 0; i < 8; i++) {
		qx->wr_id = 1000 + i;
		ibv_wr_send_imm(qx, 0);
		ibv_wr_set_inline_data(qx, buf, 8);
	}
	ibv_wr_abort(qx);
	remu_mark();

	remu_mark();		/* window 3: 100 batches of one WR */
	for (i = 0; i < BATCHES; i++) {
		ibv_wr_start(qx);
		qx->wr_id = 100 + i;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 8);
		if (ibv_wr_complete(qx))
			return 5;
	}
	remu_mark();

	remu_mark();		/* window 4: their completions, start_poll */
	for (spin = 0; got < FIRST + BATCHES && spin < 400000000L; spin++) {
		if (ibv_start_poll(cx, &pa))
			continue;
		do {
			if (cx->status != IBV_WC_WR_FLUSH_ERR)
				return 6;
			ids[got++] = cx->wr_id;
		} while (got < FIRST + BATCHES && !ibv_next_poll(cx));
		ibv_end_poll(cx);
	}
	remu_mark();

	if (got != FIRST + BATCHES)
		return 7;
	for (i = 0; i < FIRST + BATCHES; i++)
		if (ids[i] != (uint64_t)(i < FIRST ? i : 100 + i - FIRST))
			return 8;
	return remu_close_objs(qp, NULL, mr, cq, pd, c) ? 9 : 0;
}

TEST(fast_path_syscalls)
{
	long calls[WINDOWS] = {}, writes[WINDOWS] = {};
	int status;

	ASSERT_EQ(WINDOWS, remu_count_syscalls(syscall_child, WINDOWS, calls,
					       writes, &status))
		TH_LOG("child wait status %#x", status);
	EXPECT_EQ(0, calls[0]) TH_LOG("building 16 WRs");
	EXPECT_EQ(1, calls[1]) TH_LOG("ibv_wr_complete of 16 WRs");
	EXPECT_EQ(1, writes[1]);
	EXPECT_EQ(0, calls[2]) TH_LOG("building and aborting 8 WRs");
	EXPECT_EQ(BATCHES, calls[3]) TH_LOG("%d batches of one", BATCHES);
	EXPECT_EQ(BATCHES, writes[3]);
	EXPECT_EQ(0, calls[4]) TH_LOG("polling with ibv_start_poll");
}

TEST_HARNESS_MAIN
