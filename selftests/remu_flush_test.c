// SPDX-License-Identifier: GPL-2.0
/*
 * remu_flush_test - IBA 1.5 FLUSH from a process, end to end, under a
 * libibverbs that has ibv_wr_flush() (rdma-core 45 and later).
 *
 * Bookworm's libibverbs 44 has neither ibv_wr_flush() nor room for it in
 * struct ibv_qp_ex, so libremu refuses IBV_QP_EX_WITH_FLUSH there (see
 * userspace-provider/remu/qp_ex.c).  This program is built against, and
 * runs with, the libibverbs of the rdma-core 56.1 tree (build/rdma-core/
 * build: headers and library, found through the program's rpath) and the
 * libremu built in that tree (by RDMAV_DRIVERS; scripts/build-provider
 * --test), as it would on a newer distribution.  Fixture flush, remu0 -> remu1 and remu0 loopback:
 *   - the device reports ATOMIC_WRITE, FLUSH_GLOBAL, FLUSH_PERSISTENT;
 *   - ibv_create_qp_ex() takes IBV_QP_EX_WITH_FLUSH, and libremu is the
 *     provider (the loaded libibverbs is the tree's);
 *   - a WRITE then a FLUSH of its range (global visibility), then of the
 *     whole MR: both complete as IBV_WC_FLUSH, the data byte for byte;
 *   - FLUSH persistent on an MR that cannot be persistent (ordinary
 *     memory: no FLUSH_PERSISTENT right can be registered, EINVAL), and
 *     FLUSH through a QP without the FLUSH right: REM_ACCESS_ERR;
 *   - a placement type of 0: the batch fails with EINVAL, nothing posted.
 */
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define BUF_SIZE	(1 << 16)
#define GID_INDEX	1

/* the tree's libremu for the tree's libibverbs, which has no driver files */
static void __attribute__((constructor)) remu_drivers(void)
{
	char exe[PATH_MAX], lib[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return;
	exe[n] = 0;
	snprintf(lib, sizeof(lib), "%s/../build/rdma-core/build/lib/libremu",
		 dirname(exe));
	setenv("RDMAV_DRIVERS", lib, 0);
}

struct fside {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qx;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static int fside_open(struct fside *s, const char *dev)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_FLUSH |
				  IBV_QP_EX_WITH_ATOMIC_WRITE,
	};

	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq || !s->buf)
		return -1;
	memset(s->buf, 0x5a, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_FLUSH_GLOBAL);
	ia.pd = s->pd;
	ia.send_cq = ia.recv_cq = s->cq;
	s->qp = s->mr ? ibv_create_qp_ex(s->ctx, &ia) : NULL;
	s->qx = s->qp ? ibv_qp_to_qp_ex(s->qp) : NULL;
	return s->qx ? 0 : -1;
}

static int fside_connect(struct fside *s, struct fside *peer,
			 unsigned int access)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x77);
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };

	ra.access = access;
	ra.reset = true;
	return remu_qp_connect(s->qp, &ra, GID_INDEX, &d);
}

static void fside_close(struct fside *s)
{
	remu_close_objs(s->qp, NULL, s->mr, s->cq, s->pd, s->ctx);
	free(s->buf);
}

FIXTURE(flush) {
	struct fside a, b;
};

FIXTURE_VARIANT(flush) {
	const char *dev_a, *dev_b;
};

FIXTURE_VARIANT_ADD(flush, remu0_remu1) { .dev_a = "remu0", .dev_b = "remu1" };
FIXTURE_VARIANT_ADD(flush, loopback) { .dev_a = "remu0", .dev_b = "remu0" };

#define RIGHTS	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_FLUSH_GLOBAL)

FIXTURE_SETUP(flush)
{
	char why[256];

	memset(self, 0, sizeof(*self));
	/* a kernel without IBA 1.5 in ib_core (6.1): docs/portability.md */
	if (remu_absent(variant->dev_a, "flush", why, sizeof(why)))
		SKIP(return, "%s", why);
	ASSERT_EQ(0, fside_open(&self->a, variant->dev_a))
		TH_LOG("errno %d", errno);
	ASSERT_EQ(0, fside_open(&self->b, variant->dev_b));
	ASSERT_EQ(0, fside_connect(&self->a, &self->b, RIGHTS));
	ASSERT_EQ(0, fside_connect(&self->b, &self->a, RIGHTS));
}

FIXTURE_TEARDOWN(flush)
{
	fside_close(&self->a);
	fside_close(&self->b);
}

/* one signalled FLUSH from a; its completion's status (-1: none) */
static int flush1(struct fside *a, uint32_t rkey, uint64_t addr, size_t len,
		  uint8_t type, uint8_t level)
{
	struct ibv_wc wc;
	int st;

	ibv_wr_start(a->qx);
	a->qx->wr_id = 0xf1;
	a->qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_flush(a->qx, rkey, addr, len, type, level);
	if (ibv_wr_complete(a->qx))
		return -1;
	st = remu_poll_one(a->cq, &wc, 10);
	if (!st && (wc.opcode != IBV_WC_FLUSH || wc.wr_id != 0xf1))
		return -2;
	return st;
}

TEST_F(flush, device_and_provider)
{
	struct ibv_device_attr_ex da;
	Dl_info info;

	ASSERT_EQ(0, ibv_query_device_ex(self->a.ctx, NULL, &da));
	EXPECT_TRUE(da.device_cap_flags_ex & IB_UVERBS_DEVICE_FLUSH_GLOBAL);
	EXPECT_TRUE(da.device_cap_flags_ex & IB_UVERBS_DEVICE_FLUSH_PERSISTENT);
	EXPECT_TRUE(da.device_cap_flags_ex & IB_UVERBS_DEVICE_ATOMIC_WRITE);
	/* this libibverbs is the tree's, and libremu serves the device */
	ASSERT_NE(0, dladdr((void *)ibv_get_device_list, &info));
	EXPECT_NE(NULL, strstr(info.dli_fname, "build/rdma-core/build/lib"));
	ASSERT_NE(0, dladdr((void *)self->a.qx->wr_flush, &info));
	EXPECT_NE(NULL, strstr(info.dli_fname, "libremu-rdmav34.so"));
}

TEST_F(flush, write_then_flush)
{
	struct fside *a = &self->a, *b = &self->b;
	uint8_t *dst = b->buf + 4096;
	struct ibv_wc wc;
	int i;

	for (i = 0; i < 3000; i++)
		a->buf[i] = (uint8_t)(i * 11 + 3);
	ibv_wr_start(a->qx);
	a->qx->wr_id = 1;
	a->qx->wr_flags = 0;
	ibv_wr_rdma_write(a->qx, b->mr->rkey, (uintptr_t)dst);
	ibv_wr_set_sge(a->qx, a->mr->lkey, (uintptr_t)a->buf, 3000);
	ASSERT_EQ(0, ibv_wr_complete(a->qx));
	ASSERT_EQ(IBV_WC_SUCCESS, flush1(a, b->mr->rkey, (uintptr_t)dst, 3000,
					 IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE));
	EXPECT_EQ(-1, remu_cmp(a->buf, dst, 3000));
	/* the whole MR: address and length unused */
	ASSERT_EQ(IBV_WC_SUCCESS, flush1(a, b->mr->rkey, 0, 0,
					 IBV_FLUSH_GLOBAL, IBV_FLUSH_MR));
	EXPECT_EQ(0, remu_poll_one(a->cq, &wc, 0.2) == -1 ? 0 : -1);
}

TEST_F(flush, refused)
{
	struct fside *a = &self->a, *b = &self->b;

	/* ordinary memory cannot be registered for persistence */
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(b->pd, b->buf, 4096, IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_FLUSH_PERSISTENT));
	EXPECT_EQ(EINVAL, errno);
	/* so the key has no persistent right */
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  flush1(a, b->mr->rkey, (uintptr_t)b->buf, 64,
			 IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE));
	ASSERT_EQ(0, fside_connect(a, b, RIGHTS));
	/* a QP without the FLUSH right */
	ASSERT_EQ(0, fside_connect(b, a, IBV_ACCESS_REMOTE_WRITE));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  flush1(a, b->mr->rkey, (uintptr_t)b->buf, 64,
			 IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE));
	ASSERT_EQ(0, fside_connect(a, b, RIGHTS));
	ASSERT_EQ(0, fside_connect(b, a, RIGHTS));
	/* no placement type: refused in the batch, nothing posted */
	ibv_wr_start(a->qx);
	ibv_wr_flush(a->qx, b->mr->rkey, (uintptr_t)b->buf, 64, 0,
		     IBV_FLUSH_RANGE);
	EXPECT_EQ(EINVAL, ibv_wr_complete(a->qx));
	EXPECT_EQ(IBV_WC_SUCCESS, flush1(a, b->mr->rkey, (uintptr_t)b->buf,
					 64, IBV_FLUSH_GLOBAL,
					 IBV_FLUSH_RANGE));
}

TEST_HARNESS_MAIN
