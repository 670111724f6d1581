// SPDX-License-Identifier: GPL-2.0
/*
 * remu_domain_test - thread domains and parent domains (ibv_alloc_td(),
 * ibv_alloc_parent_domain()), mlx5's contract (docs/compatibility.md,
 * "Parent domains and thread domains").
 *
 * Fixture rules (remu0, no traffic): the refusals (a thread domain with a
 * comp_mask, a parent domain without a PD, with an unknown comp_mask, or
 * with a PD or thread domain of another context: EINVAL); the reference
 * counts (a PD with parent domains on it, a thread domain in a parent
 * domain, a parent domain with QPs or CQs on it: EBUSY, and each freed
 * once its users are gone); ibv_create_cq_ex() with a parent domain
 * (IBV_CQ_INIT_ATTR_MASK_PD) works, with a plain PD or none is EINVAL;
 * the application's allocators are never called (remu's queues are the
 * kernel's rings), while QPs, CQs and SRQs are made, resized and
 * destroyed on the parent domain, not even an allocator that fails
 * every call (on mlx5 the creates would fail), nor is a parent domain
 * with the ALLOCATORS mask and no functions refused; the lock-free contract: a QP of a
 * thread domain has no lock, so a thread that posts to it while it is
 * inside ibv_wr_start()...ibv_wr_complete() is caught and the process
 * aborted, as mlx5 aborts (a QP with a lock would spin there forever).
 *
 * Fixture traffic (remu0 -> remu1, and remu0 loopback): side a's PD,
 * MR, extended CQ (with IBV_CREATE_CQ_ATTR_SINGLE_THREADED), SRQ and RC
 * and UD QPs are all made on a parent domain with a thread domain (and
 * counting allocators); side b's plainly.  SEND into the SRQ, RDMA WRITE
 * and READ both ways, UD SEND through an AH made on the protection
 * domain (the parent domain stands for it), all compared byte for byte;
 * an AH of another PD is refused.  Then four threads, each with its own
 * thread domain, parent domain, CQ and QP on side a, write at once, each
 * to its own part of b's memory, which is compared byte for byte.  The
 * allocators' count stays 0.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define BUF_SIZE	(1 << 20)
#define QKEY		0x11223344
#define GRH_LEN		40
#define NTHREADS	4
#define THREAD_WRITES	64
#define THREAD_LEN	4096

static const struct ibv_qp_cap dcap = { .max_send_wr = 64, .max_recv_wr = 64,
					.max_send_sge = 2, .max_recv_sge = 2 };

/* ---- counting allocators: remu never calls them ---- */

static int alloc_calls, free_calls;

static void *count_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
			 size_t alignment, uint64_t resource_type)
{
	__atomic_add_fetch(&alloc_calls, 1, __ATOMIC_RELAXED);
	return IBV_ALLOCATOR_USE_DEFAULT;
}

static void count_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		       uint64_t resource_type)
{
	__atomic_add_fetch(&free_calls, 1, __ATOMIC_RELAXED);
}

/* a parent domain on @pd with @td (or none) and the counting allocators */
static struct ibv_pd *parent_domain(struct ibv_context *ctx, struct ibv_pd *pd,
				    struct ibv_td *td, void *pd_context)
{
	struct ibv_parent_domain_init_attr pa = {
		.pd = pd, .td = td,
		.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
		.alloc = count_alloc, .free = count_free,
		.pd_context = pd_context,
	};

	return ibv_alloc_parent_domain(ctx, &pa);
}

/* an extended CQ of @cqe entries made on the parent domain @pdom */
static struct ibv_cq *pd_cq(struct ibv_context *ctx, struct ibv_pd *pdom,
			    int cqe, uint32_t flags)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = cqe, .wc_flags = REMU_WC_STANDARD,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD |
			     IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.parent_domain = pdom, .flags = flags,
	};
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);

	return cqx ? ibv_cq_ex_to_cq(cqx) : NULL;
}

static struct ibv_srq *make_srq(struct ibv_pd *pd)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 64, .max_sge = 2 } };

	return ibv_create_srq(pd, &sa);
}

/* ---- fixture rules: remu0, no traffic ---- */

FIXTURE(rules) {
	struct ibv_context *ctx, *ctx2;
	struct ibv_pd *pd;
};

FIXTURE_SETUP(rules)
{
	self->ctx = remu_open("remu0");
	ASSERT_NE(NULL, self->ctx);
	self->ctx2 = remu_open("remu0");
	ASSERT_NE(NULL, self->ctx2);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	alloc_calls = free_calls = 0;
}

FIXTURE_TEARDOWN(rules)
{
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	ibv_close_device(self->ctx2);
	ibv_close_device(self->ctx);
}

TEST_F(rules, refused)
{
	struct ibv_td_init_attr ta = { .comp_mask = 1 };
	struct ibv_parent_domain_init_attr pa = {};
	struct ibv_pd *pd2 = ibv_alloc_pd(self->ctx2);
	struct ibv_td *td, *td2;

	ASSERT_NE(NULL, pd2);
	errno = 0;
	EXPECT_EQ(NULL, ibv_alloc_td(self->ctx, &ta));
	EXPECT_EQ(EINVAL, errno);
	ta.comp_mask = 0;
	td = ibv_alloc_td(self->ctx, &ta);
	td2 = ibv_alloc_td(self->ctx2, &ta);
	ASSERT_NE(NULL, td);
	ASSERT_NE(NULL, td2);
	EXPECT_EQ(self->ctx, td->context);

	/* no PD */
	errno = 0;
	EXPECT_EQ(NULL, ibv_alloc_parent_domain(self->ctx, &pa));
	EXPECT_EQ(EINVAL, errno);
	/* a comp_mask bit that means nothing */
	pa.pd = self->pd;
	pa.comp_mask = 1 << 2;
	errno = 0;
	EXPECT_EQ(NULL, ibv_alloc_parent_domain(self->ctx, &pa));
	EXPECT_EQ(EINVAL, errno);
	/* a PD, or a thread domain, of another context */
	pa.comp_mask = 0;
	pa.pd = pd2;
	errno = 0;
	EXPECT_EQ(NULL, ibv_alloc_parent_domain(self->ctx, &pa));
	EXPECT_EQ(EINVAL, errno);
	pa.pd = self->pd;
	pa.td = td2;
	errno = 0;
	EXPECT_EQ(NULL, ibv_alloc_parent_domain(self->ctx, &pa));
	EXPECT_EQ(EINVAL, errno);
	/* none of them holds anything: all free at once */
	EXPECT_EQ(0, ibv_dealloc_td(td));
	EXPECT_EQ(0, ibv_dealloc_td(td2));
	EXPECT_EQ(0, ibv_dealloc_pd(pd2));
}

TEST_F(rules, reference_counts)
{
	struct ibv_td_init_attr ta = {};
	struct ibv_td *td = ibv_alloc_td(self->ctx, &ta);
	struct ibv_pd *pdom, *pdom2;
	struct ibv_cq *cq, *pcq;
	struct ibv_qp *qp;
	struct ibv_srq *srq;

	ASSERT_NE(NULL, td);
	pdom = parent_domain(self->ctx, self->pd, td, self);
	ASSERT_NE(NULL, pdom);
	/* it stands in for its PD */
	EXPECT_EQ(self->pd->handle, pdom->handle);
	EXPECT_EQ(self->ctx, pdom->context);
	/* a parent domain made on a parent domain counts on the first */
	pdom2 = parent_domain(self->ctx, pdom, NULL, NULL);
	ASSERT_NE(NULL, pdom2);
	EXPECT_EQ(EBUSY, ibv_dealloc_pd(pdom));
	EXPECT_EQ(0, ibv_dealloc_pd(pdom2));

	EXPECT_EQ(EBUSY, ibv_dealloc_td(td));
	EXPECT_EQ(EBUSY, ibv_dealloc_pd(self->pd));

	cq = ibv_create_cq(self->ctx, 16, NULL, NULL, 0);
	pcq = pd_cq(self->ctx, pdom, 16, 0);
	ASSERT_NE(NULL, cq);
	ASSERT_NE(NULL, pcq);
	qp = remu_create_qp(pdom, cq, IBV_QPT_RC, &dcap);
	ASSERT_NE(NULL, qp);
	EXPECT_EQ(pdom, qp->pd);
	srq = make_srq(pdom);	/* not counted, as on mlx5 */
	ASSERT_NE(NULL, srq);

	EXPECT_EQ(EBUSY, ibv_dealloc_pd(pdom));		/* QP and CQ */
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(EBUSY, ibv_dealloc_pd(pdom));		/* the CQ */
	EXPECT_EQ(0, ibv_destroy_cq(pcq));
	EXPECT_EQ(0, ibv_dealloc_pd(pdom));
	EXPECT_EQ(0, ibv_destroy_srq(srq));
	EXPECT_EQ(0, ibv_dealloc_td(td));
	EXPECT_EQ(0, ibv_destroy_cq(cq));
	EXPECT_EQ(0, ibv_dealloc_pd(self->pd));
	self->pd = NULL;
}

TEST_F(rules, cq_ex_parent_domain)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 8, .wc_flags = REMU_WC_STANDARD,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
	};
	struct ibv_pd *pdom = parent_domain(self->ctx, self->pd, NULL, NULL);
	struct ibv_cq_ex *cqx;

	ASSERT_NE(NULL, pdom);
	/* no parent domain, a plain PD, one of another context: EINVAL */
	errno = 0;
	EXPECT_EQ(NULL, ibv_create_cq_ex(self->ctx, &ca));
	EXPECT_EQ(EINVAL, errno);
	ca.parent_domain = self->pd;
	errno = 0;
	EXPECT_EQ(NULL, ibv_create_cq_ex(self->ctx, &ca));
	EXPECT_EQ(EINVAL, errno);
	ca.parent_domain = pdom;
	errno = 0;
	EXPECT_EQ(NULL, ibv_create_cq_ex(self->ctx2, &ca));
	EXPECT_EQ(EINVAL, errno);
	cqx = ibv_create_cq_ex(self->ctx, &ca);
	ASSERT_NE(NULL, cqx);
	EXPECT_EQ(0, ibv_resize_cq(ibv_cq_ex_to_cq(cqx), 64));
	EXPECT_EQ(0, ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));
	EXPECT_EQ(0, ibv_dealloc_pd(pdom));
}

TEST_F(rules, allocators_not_called)
{
	struct ibv_td_init_attr ta = {};
	struct ibv_td *td = ibv_alloc_td(self->ctx, &ta);
	struct ibv_pd *pdom;
	struct ibv_cq *cq;
	struct ibv_qp *qp, *ud;
	struct ibv_srq *srq;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC, .cap = dcap };

	ASSERT_NE(NULL, td);
	pdom = parent_domain(self->ctx, self->pd, td, self);
	ASSERT_NE(NULL, pdom);
	cq = pd_cq(self->ctx, pdom, 128, IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	ASSERT_NE(NULL, cq);
	EXPECT_EQ(0, ibv_resize_cq(cq, 1024));
	srq = make_srq(pdom);
	ASSERT_NE(NULL, srq);
	ia.send_cq = ia.recv_cq = cq;
	ia.srq = srq;
	qp = ibv_create_qp(pdom, &ia);
	ASSERT_NE(NULL, qp);
	ud = remu_create_qp_ex(pdom, cq, IBV_QPT_UD, &dcap);
	ASSERT_NE(NULL, ud);
	EXPECT_EQ(0, remu_ud_ready(ud, QKEY, 1));
	EXPECT_EQ(0, ibv_destroy_qp(ud));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	EXPECT_EQ(0, ibv_destroy_srq(srq));
	EXPECT_EQ(0, ibv_destroy_cq(cq));
	EXPECT_EQ(0, ibv_dealloc_pd(pdom));
	EXPECT_EQ(0, ibv_dealloc_td(td));
	EXPECT_EQ(0, alloc_calls);
	EXPECT_EQ(0, free_calls);
}

/* an allocator that refuses every buffer, as one out of memory would */
static void *failing_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
			   size_t alignment, uint64_t resource_type)
{
	__atomic_add_fetch(&alloc_calls, 1, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * Allocator failures: mlx5 fails a QP, CQ or SRQ whose buffer or doorbell
 * record its alloc() refuses (NULL); remu has no such buffer and never
 * calls alloc(), so the same parent domain serves every queue
 * (docs/compatibility.md).  An ALLOCATORS comp_mask with no functions is
 * taken, as on mlx5, and means the default allocator.
 */
TEST_F(rules, allocator_failures)
{
	struct ibv_parent_domain_init_attr pa = {
		.pd = self->pd,
		.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS,
		.alloc = failing_alloc, .free = count_free,
	};
	struct ibv_pd *pdom[2];
	int i;

	pdom[0] = ibv_alloc_parent_domain(self->ctx, &pa);
	ASSERT_NE(NULL, pdom[0]);
	pa.alloc = NULL;
	pa.free = NULL;
	pdom[1] = ibv_alloc_parent_domain(self->ctx, &pa);
	ASSERT_NE(NULL, pdom[1]);
	for (i = 0; i < 2; i++) {
		struct ibv_cq *cq = pd_cq(self->ctx, pdom[i], 32, 0);
		struct ibv_srq *srq;
		struct ibv_qp *qp;

		ASSERT_NE(NULL, cq) TH_LOG("parent domain %d", i);
		EXPECT_EQ(0, ibv_resize_cq(cq, 256));
		srq = make_srq(pdom[i]);
		ASSERT_NE(NULL, srq);
		qp = remu_create_qp_ex(pdom[i], cq, IBV_QPT_UD, &dcap);
		ASSERT_NE(NULL, qp);
		EXPECT_EQ(0, remu_ud_ready(qp, QKEY, 1));
		EXPECT_EQ(0, ibv_destroy_qp(qp));
		EXPECT_EQ(0, ibv_destroy_srq(srq));
		EXPECT_EQ(0, ibv_destroy_cq(cq));
		EXPECT_EQ(0, ibv_dealloc_pd(pdom[i]));
	}
	EXPECT_EQ(0, alloc_calls);
	EXPECT_EQ(0, free_calls);
}

/*
 * The lock-free contract: a child process holds its thread domain QP's
 * send side inside ibv_wr_start() and posts to it again; libremu must
 * see the second user and abort (SIGABRT), where a locked QP would spin.
 */
TEST_F(rules, thread_domain_violation_aborts)
{
	struct ibv_td_init_attr ta = {};
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* a context of its own, gone with the child */
		struct ibv_context *ctx = remu_open("remu0");
		struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
		struct ibv_td *td = pd ? ibv_alloc_td(ctx, &ta) : NULL;
		struct ibv_pd *pdom = td ? parent_domain(ctx, pd, td, NULL) :
					   NULL;
		struct ibv_cq *cq = pdom ? ibv_create_cq(ctx, 16, NULL, NULL,
							 0) : NULL;
		struct rlimit nocore = {};
		struct ibv_qp *qp = cq ?
			remu_create_qp_ex(pdom, cq, IBV_QPT_UD, &dcap) : NULL;
		struct ibv_send_wr wr = { .opcode = IBV_WR_SEND }, *bad;

		setrlimit(RLIMIT_CORE, &nocore);
		alarm(10);	/* a lock would spin: fail by SIGALRM */
		if (!qp || remu_ud_ready(qp, QKEY, 1))
			_exit(2);
		ibv_wr_start(ibv_qp_to_qp_ex(qp));
		ibv_post_send(qp, &wr, &bad);
		_exit(3);	/* not caught */
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSIGNALED(status)) TH_LOG("child exited %d",
						 WEXITSTATUS(status));
	EXPECT_EQ(SIGABRT, WTERMSIG(status));
}

/* ---- fixture traffic: a on parent domains, b plain ---- */

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;	/* the protection domain */
	struct ibv_td *td;	/* side a */
	struct ibv_pd *dom;	/* what the objects are made on: a parent
				 * domain (side a) or @pd (side b) */
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *rc, *ud;
	struct ibv_ah *ah;	/* UD towards the peer, made on @pd */
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static int side_open(struct side *s, const char *dev, bool parent)
{
	struct ibv_td_init_attr ta = {};
	/* an ibv_qp_ex with an SRQ: remu_use_ex posts through ibv_wr_*() */
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC, .cap = dcap,
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = remu_send_ops(IBV_QPT_RC),
	};

	memset(s, 0, sizeof(*s));
	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	if (!s->pd)
		return -1;
	s->dom = s->pd;
	if (parent) {
		s->td = ibv_alloc_td(s->ctx, &ta);
		s->dom = s->td ? parent_domain(s->ctx, s->pd, s->td, s) : NULL;
		s->cq = s->dom ? pd_cq(s->ctx, s->dom, 256,
				IBV_CREATE_CQ_ATTR_SINGLE_THREADED) : NULL;
	} else {
		s->cq = remu_create_cq_ex(s->ctx, 256, REMU_WC_STANDARD);
	}
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq || !s->buf)
		return -1;
	memset(s->buf, 0, BUF_SIZE);
	s->mr = ibv_reg_mr(s->dom, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   REMU_ACCESS_REMOTE_ALL);
	s->srq = s->mr ? make_srq(s->dom) : NULL;
	ia.send_cq = ia.recv_cq = s->cq;
	ia.srq = s->srq;
	ia.pd = s->dom;
	s->rc = s->srq ? ibv_create_qp_ex(s->ctx, &ia) : NULL;
	s->ud = s->rc ? remu_create_qp_ex(s->dom, s->cq, IBV_QPT_UD,
					  &dcap) : NULL;
	return s->ud ? 0 : -1;
}

static int side_connect(struct side *s, struct side *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x456);
	struct remu_conn_dest d = { .qpn = peer->rc->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };
	struct ibv_ah_attr aa;

	if (remu_qp_connect(s->rc, &ra, GID_INDEX, &d) ||
	    remu_ud_ready(s->ud, QKEY, 0x42))
		return -1;
	remu_set_av(&aa, &peer->gid, GID_INDEX, 0);
	s->ah = ibv_create_ah(s->pd, &aa);	/* the protection domain */
	return s->ah ? 0 : -1;
}

static void side_close(struct side *s)
{
	if (s->ah)
		ibv_destroy_ah(s->ah);
	if (s->ud)
		ibv_destroy_qp(s->ud);
	if (s->rc)
		ibv_destroy_qp(s->rc);
	if (s->srq)
		ibv_destroy_srq(s->srq);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->dom && s->dom != s->pd)
		ibv_dealloc_pd(s->dom);
	if (s->td)
		ibv_dealloc_td(s->td);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 13 + seed + (i >> 7));
}

/* one receive of @len bytes at @off of @s->buf into its SRQ */
static int srq_recv(struct side *s, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_srq_recv(s->srq, &wr, &bad);
}

FIXTURE(traffic) {
	struct side a, b;
};

FIXTURE_VARIANT(traffic) {
	const char *dev_a, *dev_b;
};

FIXTURE_VARIANT_ADD(traffic, remu0_remu1) {
	.dev_a = "remu0", .dev_b = "remu1",
};

FIXTURE_VARIANT_ADD(traffic, loopback) {
	.dev_a = "remu0", .dev_b = "remu0",
};

FIXTURE_SETUP(traffic)
{
	remu_use_ex = true;	/* remu_poll_one() through ibv_start_poll() */
	alloc_calls = free_calls = 0;
	ASSERT_EQ(0, side_open(&self->a, variant->dev_a, true));
	ASSERT_EQ(0, side_open(&self->b, variant->dev_b, false));
	ASSERT_EQ(0, side_connect(&self->a, &self->b));
	ASSERT_EQ(0, side_connect(&self->b, &self->a));
}

FIXTURE_TEARDOWN(traffic)
{
	side_close(&self->a);
	side_close(&self->b);
}

/* RC both ways: SEND into the other's SRQ, RDMA WRITE, RDMA READ */
TEST_F(traffic, rc)
{
	struct side *ends[2] = { &self->a, &self->b };
	const uint32_t len = 60000;
	struct ibv_wc wc;
	int i;

	for (i = 0; i < 2; i++) {
		struct side *s = ends[i], *p = ends[!i];
		struct ibv_sge sge = { (uintptr_t)s->buf, len, s->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge,
					  .num_sge = 1, .opcode = IBV_WR_SEND };

		memset(p->buf, 0, BUF_SIZE);
		fill(s->buf, len, 3 + i);
		ASSERT_EQ(0, srq_recv(p, 77, 4096, len));
		ASSERT_EQ(IBV_WC_SUCCESS, remu_run_wr(s->rc, s->cq, &wr, 10));
		ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(p->cq, &wc, 10));
		EXPECT_EQ(77, wc.wr_id);
		EXPECT_EQ(IBV_WC_RECV, wc.opcode);
		EXPECT_EQ(len, wc.byte_len);
		EXPECT_EQ(-1, remu_cmp(s->buf, p->buf + 4096, len));

		fill(s->buf, len, 40 + i);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  remu_rdma1(s->rc, s->cq, IBV_WR_RDMA_WRITE,
				     (uintptr_t)s->buf, s->mr->lkey, len,
				     (uintptr_t)p->buf + 65536, p->mr->rkey,
				     10));
		EXPECT_EQ(-1, remu_cmp(s->buf, p->buf + 65536, len));
		fill(p->buf + 262144, len, 90 + i);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  remu_rdma1(s->rc, s->cq, IBV_WR_RDMA_READ,
				     (uintptr_t)s->buf + 131072, s->mr->lkey,
				     len, (uintptr_t)p->buf + 262144,
				     p->mr->rkey, 10));
		EXPECT_EQ(-1, remu_cmp(p->buf + 262144, s->buf + 131072, len));
	}
	EXPECT_EQ(0, alloc_calls);
}

/*
 * UD from a's QP (made on the parent domain) through an AH made on the
 * protection domain behind it: the same PD.  An AH of another PD is
 * refused, by ibv_post_send() and by ibv_wr_set_ud_addr().
 */
TEST_F(traffic, ud_ah_of_the_protection_domain)
{
	struct side *a = &self->a, *b = &self->b;
	struct ibv_pd *other = ibv_alloc_pd(a->ctx);
	const uint32_t len = 1000;
	struct ibv_sge rsge = { (uintptr_t)b->buf, len + GRH_LEN, b->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 5, .sg_list = &rsge, .num_sge = 1 };
	struct ibv_sge sge = { (uintptr_t)a->buf, len, a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 6, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_ah_attr aa;
	struct ibv_ah *oah;
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(a->ud);
	struct ibv_recv_wr *rbad;
	struct ibv_wc wc;

	ASSERT_NE(NULL, other);
	ASSERT_NE(NULL, qx);
	remu_set_av(&aa, &b->gid, GID_INDEX, 0);
	oah = ibv_create_ah(other, &aa);
	ASSERT_NE(NULL, oah);

	fill(a->buf, len, 21);
	ASSERT_EQ(0, ibv_post_recv(b->ud, &rwr, &rbad));
	wr.wr.ud.ah = a->ah;
	wr.wr.ud.remote_qpn = b->ud->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	ASSERT_EQ(0, ibv_post_send(a->ud, &wr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(a->cq, &wc, 10));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(b->cq, &wc, 10));
	EXPECT_EQ(5, wc.wr_id);
	EXPECT_EQ(len + GRH_LEN, wc.byte_len);
	EXPECT_EQ(-1, remu_cmp(a->buf, b->buf + GRH_LEN, len));

	wr.wr.ud.ah = oah;
	EXPECT_EQ(EINVAL, ibv_post_send(a->ud, &wr, &bad));
	ibv_wr_start(qx);
	qx->wr_id = 7;
	ibv_wr_send(qx);
	ibv_wr_set_ud_addr(qx, oah, b->ud->qp_num, QKEY);
	ibv_wr_set_sge(qx, a->mr->lkey, (uintptr_t)a->buf, len);
	EXPECT_EQ(EINVAL, ibv_wr_complete(qx));

	EXPECT_EQ(0, ibv_destroy_ah(oah));
	EXPECT_EQ(0, ibv_dealloc_pd(other));
	EXPECT_EQ(0, alloc_calls);
}

/* ---- one writer thread per thread domain ---- */

struct writer {
	struct side *a, *b;
	int n;
	struct ibv_td *td;
	struct ibv_pd *dom;
	struct ibv_cq *cq;
	struct ibv_qp *qp, *peer;	/* peer: b's QP for this one */
	struct ibv_cq *peer_cq;
	int failed;
};

static void *writer_run(void *arg)
{
	struct writer *w = arg;
	size_t base = 524288 + (size_t)w->n * THREAD_LEN;
	int i, st;

	for (i = 0; i < THREAD_WRITES; i++) {
		/* each round rewrites the thread's part with a new pattern */
		fill(w->a->buf + base, THREAD_LEN, w->n * 100 + i);
		st = remu_rdma1(w->qp, w->cq, IBV_WR_RDMA_WRITE,
				(uintptr_t)w->a->buf + base, w->a->mr->lkey,
				THREAD_LEN, (uintptr_t)w->b->buf + base,
				w->b->mr->rkey, 10);
		if (st || remu_cmp(w->a->buf + base, w->b->buf + base,
				   THREAD_LEN) != -1) {
			w->failed = st ? st : -2;
			return NULL;
		}
	}
	return NULL;
}

TEST_F(traffic, threads_with_thread_domains)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x789);
	struct writer w[NTHREADS] = {};
	pthread_t t[NTHREADS];
	struct ibv_td_init_attr ta = {};
	int i;

	for (i = 0; i < NTHREADS; i++) {
		struct remu_conn_dest da, db;

		w[i].a = &self->a;
		w[i].b = &self->b;
		w[i].n = i;
		w[i].td = ibv_alloc_td(self->a.ctx, &ta);
		ASSERT_NE(NULL, w[i].td);
		w[i].dom = parent_domain(self->a.ctx, self->a.pd, w[i].td,
					 &w[i]);
		ASSERT_NE(NULL, w[i].dom);
		w[i].cq = pd_cq(self->a.ctx, w[i].dom, 16,
				IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
		ASSERT_NE(NULL, w[i].cq);
		w[i].qp = remu_create_qp_ex(w[i].dom, w[i].cq, IBV_QPT_RC,
					    &dcap);
		w[i].peer_cq = remu_create_cq(self->b.ctx, 16);
		ASSERT_NE(NULL, w[i].peer_cq);
		w[i].peer = remu_create_qp(self->b.pd, w[i].peer_cq,
					   IBV_QPT_RC, &dcap);
		ASSERT_NE(NULL, w[i].qp);
		ASSERT_NE(NULL, w[i].peer);
		da = (struct remu_conn_dest){ .qpn = w[i].peer->qp_num,
			.gid = self->b.gid,
			.mtu = remu_min_mtu(self->a.mtu, self->b.mtu) };
		db = (struct remu_conn_dest){ .qpn = w[i].qp->qp_num,
			.gid = self->a.gid, .mtu = da.mtu };
		ASSERT_EQ(0, remu_qp_connect(w[i].qp, &ra, GID_INDEX, &da));
		ASSERT_EQ(0, remu_qp_connect(w[i].peer, &ra, GID_INDEX, &db));
	}
	for (i = 0; i < NTHREADS; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, writer_run, &w[i]));
	for (i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < NTHREADS; i++) {
		EXPECT_EQ(0, w[i].failed) TH_LOG("thread %d", i);
		EXPECT_EQ(0, ibv_destroy_qp(w[i].qp));
		EXPECT_EQ(0, ibv_destroy_qp(w[i].peer));
		EXPECT_EQ(0, ibv_destroy_cq(w[i].cq));
		EXPECT_EQ(0, ibv_destroy_cq(w[i].peer_cq));
		EXPECT_EQ(0, ibv_dealloc_pd(w[i].dom));
		EXPECT_EQ(0, ibv_dealloc_td(w[i].td));
	}
	EXPECT_EQ(0, alloc_calls);
	EXPECT_EQ(0, free_calls);
}

TEST_HARNESS_MAIN
