// SPDX-License-Identifier: GPL-2.0
/*
 * remu_coexist_test - libremu next to another vendor's device and
 * provider, as on a machine with a real NIC: upstream soft-RoCE (rxe0 on
 * v0, initial namespace) and remu1 (v1, namespace peer), both seen by one
 * process.  remu_coexist_test.sh runs it once for every provider order
 * and configuration (RDMAV_DRIVERS by path and by name, the driver files
 * of /etc/libibverbs.d) and says, in REMU_COEXIST_EXPECT, which devices
 * the device list must hold and whose provider must serve each one:
 *     REMU_COEXIST_EXPECT="rxe0=rxe remu1=remu"   both providers loaded
 *     REMU_COEXIST_EXPECT="rxe0=- remu1=remu"     rxe's provider absent:
 *                                                 rxe0 is not listed
 * Tests: the list is as expected, each device opened by its own provider
 * (the library its context's poll_cq lives in), and, when both are
 * served, one process moving data both ways over RC between rxe0 and
 * remu1: SEND of several MTUs, RDMA WRITE, RDMA READ, FETCH_ADD, byte
 * for byte, and rxe's refusal of remu's misaligned atomic seen as
 * REM_INV_REQ_ERR.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define LEN	(3 * 4096 + 123)	/* several packets at any MTU */
#define SECS	10

/* the provider that must serve @dev per REMU_COEXIST_EXPECT ("-": none) */
static const char *expected_provider(const char *dev)
{
	static char val[32];
	const char *env = getenv("REMU_COEXIST_EXPECT");
	char key[40];
	const char *p;

	if (!env)
		return NULL;
	snprintf(key, sizeof(key), "%s=", dev);
	p = strstr(env, key);
	if (!p || (p != env && p[-1] != ' '))
		return NULL;
	p += strlen(key);
	snprintf(val, sizeof(val), "%.*s", (int)strcspn(p, " "), p);
	return val;
}

/* "remu", "rxe", ...: the provider library @ctx's poll_cq is in */
static const char *provider_of(struct ibv_context *ctx, char *buf,
			       size_t len)
{
	const char *base, *dash;
	Dl_info info;

	if (!dladdr((void *)ctx->ops.poll_cq, &info) || !info.dli_fname)
		return "?";
	base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	if (strncmp(base, "lib", 3))
		return "?";
	base += 3;
	dash = strstr(base, "-rdmav");
	snprintf(buf, len, "%.*s", dash ? (int)(dash - base) : 0, base);
	return buf;
}

TEST(device_list)
{
	static const char *const devs[] = { "rxe0", "remu1" };
	struct ibv_context *ctx;
	unsigned int i;
	char lib[64];

	ASSERT_NE(NULL, getenv("REMU_COEXIST_EXPECT"));
	for (i = 0; i < ARRAY_SIZE(devs); i++) {
		const char *want = expected_provider(devs[i]);

		ASSERT_NE(NULL, want);
		if (!strcmp(want, "-")) {
			EXPECT_EQ(0, remu_device_listed(devs[i])) {
				TH_LOG("%s listed with no provider for it",
				       devs[i]);
			}
			continue;
		}
		ctx = remu_open(devs[i]);
		ASSERT_NE(NULL, ctx) TH_LOG("cannot open %s", devs[i]);
		EXPECT_STREQ(want, provider_of(ctx, lib, sizeof(lib)));
		ibv_close_device(ctx);
	}
}

/* one end: an RC QP with a registered, patterned buffer */
struct end {
	struct remu_end e;
	struct ibv_mr *mr;
	uint8_t *buf;
	int gidx;
};

static int end_open(struct end *x, const char *dev)
{
	struct ibv_qp_cap cap = { .max_send_wr = 8, .max_recv_wr = 8,
				  .max_send_sge = 1, .max_recv_sge = 1 };
	struct ibv_context *ctx = remu_open(dev);
	union ibv_gid gid;

	x->gidx = ctx ? remu_ipv4_gid(ctx, &gid) : -1;
	if (ctx)
		ibv_close_device(ctx);
	if (x->gidx < 0 || remu_end_open(&x->e, dev, x->gidx, 16, &cap))
		return -1;
	x->buf = aligned_alloc(4096, 2 * LEN + 4096);
	if (!x->buf)
		return -1;
	x->mr = ibv_reg_mr(x->e.pd, x->buf, 2 * LEN + 4096,
			   IBV_ACCESS_LOCAL_WRITE | REMU_ACCESS_REMOTE_ALL);
	return x->mr ? 0 : -1;
}

static void end_close(struct end *x)
{
	if (x->mr)
		ibv_dereg_mr(x->mr);
	free(x->buf);
	remu_end_close(&x->e);
}

FIXTURE(pair)
{
	struct end c, s;	/* the client (requester) and the server */
};

FIXTURE_VARIANT(pair)
{
	const char *client;
	const char *server;
};

FIXTURE_VARIANT_ADD(pair, rxe0_to_remu1)
{
	.client = "rxe0",
	.server = "remu1",
};

FIXTURE_VARIANT_ADD(pair, remu1_to_rxe0)
{
	.client = "remu1",
	.server = "rxe0",
};

FIXTURE_SETUP(pair)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x4242);
	const char *a = expected_provider("rxe0");

	memset(self, 0, sizeof(*self));
	if (!a || strcmp(a, "rxe"))
		SKIP(return, "rxe's provider is not loaded in this run");
	ASSERT_EQ(0, end_open(&self->c, variant->client));
	ASSERT_EQ(0, end_open(&self->s, variant->server));
	ASSERT_EQ(0, remu_end_connect(&self->c.e, &self->s.e, &ra,
				      self->c.gidx));
	ASSERT_EQ(0, remu_end_connect(&self->s.e, &self->c.e, &ra,
				      self->s.gidx));
}

FIXTURE_TEARDOWN(pair)
{
	end_close(&self->c);
	end_close(&self->s);
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 7 + seed + (i >> 8));
}

TEST_F(pair, send_write_read_atomic)
{
	struct end *c = &self->c, *s = &self->s;
	struct ibv_sge rsge = { (uintptr_t)s->buf, LEN, s->mr->lkey };
	struct ibv_sge sge = { (uintptr_t)c->buf, LEN, c->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND };
	uint64_t *ctr = (uint64_t *)(s->buf + 2 * LEN + 2);	/* aligned */
	struct ibv_wc wc;

	/* SEND: several packets into the server's receive */
	fill(c->buf, LEN, 1);
	memset(s->buf, 0, 2 * LEN);
	ASSERT_EQ(0, remu_post_recv(s->e.qp, 7, &rsge, 1));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_run_wr(c->e.qp, c->e.cq, &wr, SECS));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(s->e.cq, &wc, SECS));
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_EQ(LEN, wc.byte_len);
	EXPECT_EQ(-1, remu_cmp(c->buf, s->buf, LEN));

	/* WRITE to the second half of the server's buffer */
	fill(c->buf, LEN, 2);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(c->e.qp, c->e.cq, IBV_WR_RDMA_WRITE,
			     (uintptr_t)c->buf, c->mr->lkey, LEN,
			     (uintptr_t)s->buf + LEN, s->mr->rkey, SECS));
	EXPECT_EQ(-1, remu_cmp(c->buf, s->buf + LEN, LEN));

	/* READ it back from the server's first half */
	memset(c->buf + LEN, 0, LEN);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(c->e.qp, c->e.cq, IBV_WR_RDMA_READ,
			     (uintptr_t)c->buf + LEN, c->mr->lkey, LEN,
			     (uintptr_t)s->buf, s->mr->rkey, SECS));
	fill(c->buf, LEN, 1);
	EXPECT_EQ(-1, remu_cmp(c->buf, c->buf + LEN, LEN));

	/* FETCH_ADD on an 8-byte counter of the server */
	*ctr = 1000;
	sge.addr = (uintptr_t)c->buf;
	sge.length = 8;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = (uintptr_t)ctr;
	wr.wr.atomic.rkey = s->mr->rkey;
	wr.wr.atomic.compare_add = 42;
	ASSERT_EQ(IBV_WC_SUCCESS, remu_run_wr(c->e.qp, c->e.cq, &wr, SECS));
	EXPECT_EQ(1000, *(uint64_t *)c->buf);
	EXPECT_EQ(1042, *ctr);
}

/*
 * remu's requester takes rxe's NAK of a misaligned atomic as hardware
 * would: REM_INV_REQ_ERR.  (rxe's requester neither sends one nor
 * completes it, so the other direction tests nothing of remu's; remu's
 * own NAK is checked by remu_datapath_test.)
 */
TEST_F(pair, misaligned_atomic)
{
	struct end *c = &self->c, *s = &self->s;
	struct ibv_sge sge = { (uintptr_t)c->buf, 8, c->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD };

	if (strcmp(variant->client, "remu1"))
		SKIP(return, "rxe's requester never sends a misaligned atomic");

	wr.wr.atomic.remote_addr = (uintptr_t)s->buf + 4;
	wr.wr.atomic.rkey = s->mr->rkey;
	wr.wr.atomic.compare_add = 1;
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR,
		  remu_run_wr(c->e.qp, c->e.cq, &wr, SECS));
}

TEST_HARNESS_MAIN
