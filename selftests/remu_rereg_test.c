// SPDX-License-Identifier: GPL-2.0
/*
 * remu_rereg_test - ibv_rereg_mr end to end, remu0 (the MR's owner, side
 * a) <-> remu1 (the peer, side b), byte for byte.
 *
 * Fixture rereg, variants pinned, odp (explicit) and implicit (one
 * implicit ODP MR as the old MR).  Side a has two PDs, each with an RC QP
 * connected to a QP of side b, and two buffers (old and new range).
 *
 * flags_*: every combination of CHANGE_TRANSLATION, CHANGE_PD and
 * CHANGE_ACCESS.  Before: the peer WRITEs and READs through the rkey and
 * a SENDs from the MR (lkey).  After: the keys are the same (as on mlx5
 * and rxe); the peer READs the new range through the rkey it held before,
 * over the QP of the new PD, WRITEs it (or, with the access change that
 * drops REMOTE_WRITE, gets REM_ACCESS_ERR), a SENDs from it with the
 * lkey; with a new translation the old range is out of the MR (a WRITE
 * there gets REM_ACCESS_ERR and changes nothing, a local SGE there
 * LOC_PROT_ERR), and with a PD change the QP of the old PD gets
 * REM_ACCESS_ERR.
 *
 * race: the peer streams WRITEs through the rkey and, once the first
 * have landed, a moves the MR to another range; every WRITE completes or
 * fails with REM_ACCESS_ERR
 * (then the rest are flushed), and once ibv_rereg_mr has returned the old
 * range never changes again.  race_keep: the peer streams one-packet
 * WRITEs through the rkey while a re-registers the MR again and again without moving it
 * (rights changed back and forth with REMOTE_WRITE kept, a new translation
 * of the same range): the key is never missing, every WRITE lands, and
 * the range holds what the WRITEs wrote, in order.
 *
 * bad_input: unknown flags and flags 0, a new range that is not mapped
 * (pinned: EFAULT; ODP registers and the first access fails with
 * REM_ACCESS_ERR, as ibv_reg_mr with ODP), a PD of another context
 * (ENOENT: uverbs handles are per context), REMOTE_WRITE without
 * LOCAL_WRITE (EINVAL), LOCAL_WRITE added to an MR whose pages were taken
 * read-only (EACCES), an implicit MR losing ON_DEMAND (EOPNOTSUPP); after
 * each refusal the MR keeps its keys and a WRITE through it still lands.  dm_mr: a device-memory MR cannot be
 * re-registered (EINVAL) and stays usable.  MR object counts are back at
 * baseline after every test.
 *
 * read_dereg, span_write (docs/security.md, "Zero-copy safety"): a READ
 * whose responses carry the MR's pages by reference never delivers bytes
 * written after ibv_dereg_mr returned; a multi-packet WRITE spanning a
 * rereg never lands in the new MR.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define LEN		(64 * 1024 + 123)
#define MAP_LEN		(128 * 1024)
#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define RW_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ)
#define T		IBV_REREG_MR_CHANGE_TRANSLATION
#define P		IBV_REREG_MR_CHANGE_PD
#define A		IBV_REREG_MR_CHANGE_ACCESS

enum { MR_PINNED, MR_ODP, MR_IMPLICIT };

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd[2];
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];	/* qp[i] in pd[i] (side b: both in pd[0]) */
	struct ibv_mr *mr;	/* b: over buf; a: the MR under test */
	uint8_t *buf;		/* a: old range; b: local buffer */
	uint8_t *buf2;		/* a: new range */
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static uint8_t *map_buf(void)
{
	void *p = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int side_open(struct side *s, const char *dev, int two_pds)
{
	struct ibv_qp_cap cap = { .max_send_wr = 128, .max_recv_wr = 16,
				  .max_send_sge = 2, .max_recv_sge = 2 };
	int i;

	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	if (!s->ctx)
		return -1;
	s->pd[0] = ibv_alloc_pd(s->ctx);
	s->pd[1] = two_pds ? ibv_alloc_pd(s->ctx) : s->pd[0];
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->buf = map_buf();
	s->buf2 = map_buf();
	if (!s->pd[0] || !s->pd[1] || !s->cq || !s->buf || !s->buf2)
		return -1;
	for (i = 0; i < 2; i++) {
		s->qp[i] = remu_create_qp(s->pd[i], s->cq, IBV_QPT_RC, &cap);
		if (!s->qp[i])
			return -1;
	}
	return 0;
}

static void side_close(struct side *s)
{
	int i;

	for (i = 0; i < 2; i++)
		if (s->qp[i])
			ibv_destroy_qp(s->qp[i]);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd[1] && s->pd[1] != s->pd[0])
		ibv_dealloc_pd(s->pd[1]);
	if (s->pd[0])
		ibv_dealloc_pd(s->pd[0]);
	if (s->ctx)
		ibv_close_device(s->ctx);
	if (s->buf)
		munmap(s->buf, MAP_LEN);
	if (s->buf2)
		munmap(s->buf2, MAP_LEN);
}

/* RESET -> INIT -> RTR -> RTS of @qp towards @peer_qp on @peer */
static int qp_connect(struct side *s, struct ibv_qp *qp, struct side *peer,
		      struct ibv_qp *peer_qp)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x100);
	struct remu_conn_dest d = { .qpn = peer_qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };

	ra.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	ra.reset = true;
	return remu_qp_connect(qp, &ra, GID_INDEX, &d);
}

/* (re)connect pair @i: a.qp[i] <-> b.qp[i]; drains the CQs */
static int pair_connect(struct side *a, struct side *b, int i)
{
	struct ibv_wc wc[16];

	while (ibv_poll_cq(a->cq, 16, wc) > 0)
		;
	while (ibv_poll_cq(b->cq, 16, wc) > 0)
		;
	if (qp_connect(a, a->qp[i], b, b->qp[i]) ||
	    qp_connect(b, b->qp[i], a, a->qp[i]))
		return -1;
	return 0;
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return remu_poll_one(cq, wc, 20);
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 8));
}

/* one signalled RDMA WRITE or READ from b over qp[@i] */
static int rdma1(struct side *b, int i, enum ibv_wr_opcode op,
		 uint8_t *laddr, uint32_t len, uint8_t *raddr, uint32_t rkey)
{
	return remu_rdma1(b->qp[i], b->cq, op, (uintptr_t)laddr, b->mr->lkey,
			  len, (uintptr_t)raddr, rkey, 20);
}

/*
 * a SENDs @len bytes at @addr (lkey @lkey) over qp[@i] into b's buffer;
 * returns a's send status (b's receive is checked when it succeeded).
 */
static int send1(struct side *a, struct side *b, int i, uint8_t *addr,
		 uint32_t len, uint32_t lkey)
{
	struct ibv_sge rs = { (uintptr_t)b->buf, MAP_LEN, b->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 };
	struct ibv_sge ss = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr swr = { .wr_id = 8, .sg_list = &ss, .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_recv_wr *rbad;
	struct ibv_wc wc;
	int st;

	if (ibv_post_recv(b->qp[i], &rwr, &rbad) ||
	    ibv_post_send(a->qp[i], &swr, &bad))
		return -1;
	st = poll_one(a->cq, &wc);
	if (st)
		return st;
	if (poll_one(b->cq, &wc) || wc.byte_len != len ||
	    memcmp(b->buf, addr, len))
		return -2;
	return 0;
}

FIXTURE(rereg) {
	struct side a, b;
	int mrs;
};

FIXTURE_VARIANT(rereg) {
	int kind;
};

FIXTURE_VARIANT_ADD(rereg, pinned) { .kind = MR_PINNED };
FIXTURE_VARIANT_ADD(rereg, odp) { .kind = MR_ODP };
FIXTURE_VARIANT_ADD(rereg, implicit) { .kind = MR_IMPLICIT };

static int odp_access(int kind)
{
	return kind == MR_PINNED ? 0 : IBV_ACCESS_ON_DEMAND;
}

FIXTURE_SETUP(rereg)
{
	struct side *a = &self->a, *b = &self->b;

	memset(a, 0, sizeof(*a));
	memset(b, 0, sizeof(*b));
	self->mrs = remu_obj_count("mr");
	ASSERT_LE(0, self->mrs);
	ASSERT_EQ(0, side_open(a, "remu0", 1));
	ASSERT_EQ(0, side_open(b, "remu1", 0));
	b->mr = ibv_reg_mr(b->pd[0], b->buf, MAP_LEN, RW_ACCESS);
	ASSERT_NE(NULL, b->mr);
	if (variant->kind == MR_IMPLICIT)
		a->mr = ibv_reg_mr(a->pd[0], NULL, SIZE_MAX,
				   RW_ACCESS | IBV_ACCESS_ON_DEMAND);
	else
		a->mr = ibv_reg_mr(a->pd[0], a->buf, LEN,
				   RW_ACCESS | odp_access(variant->kind));
	ASSERT_NE(NULL, a->mr);
	ASSERT_EQ(0, pair_connect(a, b, 0));
	ASSERT_EQ(0, pair_connect(a, b, 1));
}

FIXTURE_TEARDOWN(rereg)
{
	side_close(&self->a);
	side_close(&self->b);
	EXPECT_EQ(self->mrs, remu_obj_count("mr"));
}

/* traffic through a's MR before a rereg: WRITE, READ, local SEND */
static void traffic_before(struct __test_metadata *_metadata,
			   struct side *a, struct side *b)
{
	fill(b->buf, LEN, 1);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma1(b, 0, IBV_WR_RDMA_WRITE, b->buf, LEN,
				       a->buf, a->mr->rkey));
	ASSERT_EQ(0, memcmp(a->buf, b->buf, LEN));
	fill(a->buf, LEN, 2);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma1(b, 0, IBV_WR_RDMA_READ, b->buf, LEN,
				       a->buf, a->mr->rkey));
	ASSERT_EQ(0, memcmp(a->buf, b->buf, LEN));
	fill(a->buf, LEN, 3);
	ASSERT_EQ(0, send1(a, b, 0, a->buf + 1, LEN - 1, a->mr->lkey));
}

/* one flag combination: see the top of the file */
static void rereg_case(struct __test_metadata *_metadata,
		       FIXTURE_DATA(rereg) *self, int kind, int flags)
{
	struct side *a = &self->a, *b = &self->b;
	uint32_t old_key = a->mr->rkey;
	int new_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			 odp_access(kind);
	int np = flags & P ? 1 : 0;
	uint8_t *nbuf = flags & T ? a->buf2 : a->buf;
	uint8_t *snap = malloc(LEN);
	int ret;

	ASSERT_NE(NULL, snap);
	traffic_before(_metadata, a, b);

	ret = ibv_rereg_mr(a->mr, flags, a->pd[1], flags & T ? nbuf : NULL,
			   flags & T ? LEN : 0, flags & A ? new_access : 0);
	ASSERT_EQ(0, ret) TH_LOG("rereg 0x%x: %s", flags, strerror(errno));
	EXPECT_EQ(old_key, a->mr->rkey);
	EXPECT_EQ(old_key, a->mr->lkey);
	EXPECT_EQ(a->pd[np], a->mr->pd);
	if (flags & T) {
		EXPECT_EQ(nbuf, a->mr->addr);
		EXPECT_EQ(LEN, a->mr->length);
	}

	/* after: remote READ of the new range through the rkey of before */
	fill(nbuf, LEN, 4);
	memset(b->buf, 0, LEN);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma1(b, np, IBV_WR_RDMA_READ, b->buf, LEN,
				       nbuf, old_key));
	ASSERT_EQ(0, memcmp(nbuf, b->buf, LEN));
	/* local SGE: SEND from the new range with the lkey of before */
	ASSERT_EQ(0, send1(a, b, np, nbuf + 7, LEN - 7, old_key));

	/* remote WRITE through the rkey: allowed unless access dropped */
	memcpy(snap, nbuf, LEN);
	fill(b->buf, LEN, 5);
	ret = rdma1(b, np, IBV_WR_RDMA_WRITE, b->buf, LEN, nbuf, old_key);
	if (flags & A) {
		EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, ret);
		EXPECT_EQ(0, memcmp(nbuf, snap, LEN));
		ASSERT_EQ(0, pair_connect(a, b, np));
	} else {
		ASSERT_EQ(IBV_WC_SUCCESS, ret);
		EXPECT_EQ(0, memcmp(nbuf, b->buf, LEN));
	}

	if (flags & T) {
		/* the old range is outside the MR now and is not touched */
		memcpy(snap, a->buf, LEN);
		fill(b->buf, LEN, 6);
		EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
			  rdma1(b, np, IBV_WR_RDMA_WRITE, b->buf, LEN, a->buf,
				old_key));
		EXPECT_EQ(0, memcmp(a->buf, snap, LEN));
		ASSERT_EQ(0, pair_connect(a, b, np));
		/* nor can a local SGE reach it */
		EXPECT_EQ(IBV_WC_LOC_PROT_ERR,
			  send1(a, b, np, a->buf, 64, old_key));
		ASSERT_EQ(0, pair_connect(a, b, np));
	}

	if (flags & P) {
		/* the QP of the old PD may not use the MR any more */
		EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
			  rdma1(b, 0, IBV_WR_RDMA_READ, b->buf, LEN, nbuf,
				old_key));
		ASSERT_EQ(0, pair_connect(a, b, 0));
	}
	free(snap);
}

TEST_F(rereg, flags_t) { rereg_case(_metadata, self, variant->kind, T); }
TEST_F(rereg, flags_p) { rereg_case(_metadata, self, variant->kind, P); }
TEST_F(rereg, flags_a) { rereg_case(_metadata, self, variant->kind, A); }
TEST_F(rereg, flags_tp) { rereg_case(_metadata, self, variant->kind, T | P); }
TEST_F(rereg, flags_ta) { rereg_case(_metadata, self, variant->kind, T | A); }
TEST_F(rereg, flags_pa) { rereg_case(_metadata, self, variant->kind, P | A); }
TEST_F(rereg, flags_tpa)
{
	rereg_case(_metadata, self, variant->kind, T | P | A);
}

#define RACE_WRS	96
#define RACE_LEN	4096
#define RACE_FIRST	8

/* WRITEs in flight through the old rkey while the MR moves */
TEST_F(rereg, race)
{
	struct side *a = &self->a, *b = &self->b;
	struct ibv_sge sge = { (uintptr_t)b->buf, RACE_LEN, b->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	uint32_t old_key = a->mr->rkey;
	int i, ok = 0, failed = 0, flushed = 0;
	uint8_t *snap = malloc(LEN);
	struct ibv_wc wc;

	ASSERT_NE(NULL, snap);
	memset(a->buf, 0, LEN);
	fill(b->buf, RACE_LEN, 9);
	wr.wr.rdma.rkey = old_key;
	for (i = 0; i < RACE_WRS; i++) {
		wr.wr_id = i;
		wr.wr.rdma.remote_addr = (uintptr_t)a->buf +
					 (i * 512) % (LEN - RACE_LEN);
		ASSERT_EQ(0, ibv_post_send(b->qp[0], &wr, &bad));
	}
	/* let the first WRITEs land, move the MR while the rest fly */
	for (i = 0; i < RACE_FIRST; i++) {
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(b->cq, &wc));
		ok++;
	}
	ASSERT_EQ(0, ibv_rereg_mr(a->mr, T, NULL, a->buf2, LEN, 0));
	memcpy(snap, a->buf, LEN);
	for (i = RACE_FIRST; i < RACE_WRS; i++) {
		int st = poll_one(b->cq, &wc);

		if (st == IBV_WC_SUCCESS)
			ok++;
		else if (st == IBV_WC_REM_ACCESS_ERR)
			failed++;
		else if (st == IBV_WC_WR_FLUSH_ERR)
			flushed++;
		else
			ASSERT_EQ(IBV_WC_SUCCESS, st);
	}
	TH_LOG("%d WRITEs landed, %d failed, %d flushed", ok, failed, flushed);
	EXPECT_LE(failed, 1);
	EXPECT_EQ(RACE_WRS, ok + failed + flushed);
	/* nothing wrote the old range after ibv_rereg_mr returned */
	EXPECT_EQ(0, memcmp(a->buf, snap, LEN));
	/* the moved MR works */
	ASSERT_EQ(0, pair_connect(a, b, 0));
	fill(b->buf, LEN, 10);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma1(b, 0, IBV_WR_RDMA_WRITE, b->buf, LEN,
				       a->buf2, a->mr->rkey));
	EXPECT_EQ(0, memcmp(a->buf2, b->buf, LEN));
	EXPECT_EQ(0, memcmp(a->buf, snap, LEN));
	free(snap);
}

#define KEEP_ROUNDS	3

/* WRITEs in flight through the rkey while the MR is re-registered in place */
TEST_F(rereg, race_keep)
{
	struct side *a = &self->a, *b = &self->b;
	/* one packet each: a message spanning a rereg fails (span_write) */
	uint32_t klen = 128u << remu_min_mtu(a->mtu, b->mtu);
	struct ibv_sge sge = { (uintptr_t)b->buf, klen, b->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	int odp = odp_access(variant->kind);
	const struct { int flags, access; } steps[] = {
		{ A, RW_ACCESS | IBV_ACCESS_REMOTE_ATOMIC | odp },
		{ T, 0 },
		{ A, RW_ACCESS | odp },
		{ T | A, RW_ACCESS | IBV_ACCESS_REMOTE_ATOMIC | odp },
	};
	uint32_t key = a->mr->rkey;
	uint8_t *model = calloc(1, LEN);
	unsigned int i, j, r;
	struct ibv_wc wc;

	ASSERT_NE(NULL, model);
	memset(a->buf, 0, LEN);
	wr.wr.rdma.rkey = key;
	for (r = 0; r < KEEP_ROUNDS; r++) {
		fill(b->buf, klen, 40 + r);
		for (i = 0; i < RACE_WRS; i++) {
			size_t off = (i * 512 + r * 8) % (LEN - klen);

			wr.wr_id = i;
			wr.wr.rdma.remote_addr = (uintptr_t)a->buf + off;
			ASSERT_EQ(0, ibv_post_send(b->qp[0], &wr, &bad));
			memcpy(model + off, b->buf, klen);
		}
		for (i = 0; i < RACE_FIRST; i++)
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(b->cq, &wc));
		for (j = 0; j < sizeof(steps) / sizeof(steps[0]); j++) {
			ASSERT_EQ(0, ibv_rereg_mr(a->mr, steps[j].flags, NULL,
						  a->buf, LEN,
						  steps[j].access))
				TH_LOG("round %u step %u: %s", r, j,
				       strerror(errno));
			EXPECT_EQ(key, a->mr->rkey);
			EXPECT_EQ(key, a->mr->lkey);
		}
		for (i = RACE_FIRST; i < RACE_WRS; i++) {
			ASSERT_EQ(IBV_WC_SUCCESS, poll_one(b->cq, &wc))
				TH_LOG("round %u WRITE %llu", r,
				       (unsigned long long)wc.wr_id);
		}
		/* the WRITEs ran in order: the range holds the model */
		ASSERT_EQ(-1, remu_cmp(model, a->buf, LEN)) TH_LOG("round %u", r);
	}
	free(model);
}

/* the MR still works under @key after a refused rereg */
static void still_valid(struct __test_metadata *_metadata, struct side *a,
			struct side *b, uint32_t key, unsigned int seed)
{
	EXPECT_EQ(key, a->mr->rkey);
	EXPECT_EQ(key, a->mr->lkey);
	fill(b->buf, LEN, seed);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma1(b, 0, IBV_WR_RDMA_WRITE, b->buf, LEN,
				       a->buf, a->mr->rkey));
	EXPECT_EQ(0, memcmp(a->buf, b->buf, LEN));
}

TEST_F(rereg, bad_input)
{
	struct side *a = &self->a, *b = &self->b;
	uint32_t key = a->mr->rkey;
	int odp = odp_access(variant->kind);
	struct ibv_pd *pd2, *pds[16];
	struct ibv_context *ctx2;
	uint8_t *hole;
	int i, ret;

	/* unknown flag: libibverbs refuses it; flags 0: the kernel does */
	errno = 0;
	EXPECT_EQ(IBV_REREG_MR_ERR_INPUT, ibv_rereg_mr(a->mr, 0x8, NULL,
						       NULL, 0, 0));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(IBV_REREG_MR_ERR_CMD, ibv_rereg_mr(a->mr, 0, NULL, NULL,
						     0, 0));
	EXPECT_EQ(EINVAL, errno);
	still_valid(_metadata, a, b, key, 20);

	/* REMOTE_WRITE without LOCAL_WRITE */
	errno = 0;
	EXPECT_EQ(IBV_REREG_MR_ERR_CMD,
		  ibv_rereg_mr(a->mr, A, NULL, NULL, 0,
			       IBV_ACCESS_REMOTE_WRITE | odp));
	EXPECT_EQ(EINVAL, errno);
	still_valid(_metadata, a, b, key, 21);

	/*
	 * a PD of another context; uverbs handles are per context, so take
	 * one whose number names no object of a's context
	 */
	ctx2 = remu_open("remu0");
	ASSERT_NE(NULL, ctx2);
	for (i = 0; i < 16; i++) {
		pds[i] = ibv_alloc_pd(ctx2);
		ASSERT_NE(NULL, pds[i]);
	}
	pd2 = pds[15];
	errno = 0;
	EXPECT_EQ(IBV_REREG_MR_ERR_CMD, ibv_rereg_mr(a->mr, P, pd2, NULL, 0,
						     0));
	/* the handle names no PD of a's context */
	EXPECT_EQ(ENOENT, errno);
	for (i = 0; i < 16; i++)
		EXPECT_EQ(0, ibv_dealloc_pd(pds[i]));
	EXPECT_EQ(0, ibv_close_device(ctx2));
	/* libibverbs moved mr->pd only on success */
	EXPECT_EQ(a->pd[0], a->mr->pd);
	still_valid(_metadata, a, b, key, 22);

	if (variant->kind == MR_IMPLICIT) {
		/* an implicit MR cannot lose ON_DEMAND in place (as mlx5) */
		errno = 0;
		EXPECT_EQ(IBV_REREG_MR_ERR_CMD,
			  ibv_rereg_mr(a->mr, A, NULL, NULL, 0, RW_ACCESS));
		EXPECT_EQ(EOPNOTSUPP, errno);
		still_valid(_metadata, a, b, key, 23);
		return;
	}

	/* a new range that is not mapped */
	hole = mmap(NULL, MAP_LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	ASSERT_EQ(0, munmap(hole, MAP_LEN));
	errno = 0;
	ret = ibv_rereg_mr(a->mr, T, NULL, hole, LEN, 0);
	if (variant->kind == MR_PINNED) {
		EXPECT_EQ(IBV_REREG_MR_ERR_CMD, ret);
		EXPECT_EQ(EFAULT, errno);
		still_valid(_metadata, a, b, key, 24);
	} else {
		/* ODP registers what is not mapped; an access then fails */
		ASSERT_EQ(0, ret);
		EXPECT_EQ(key, a->mr->rkey);
		EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
			  rdma1(b, 0, IBV_WR_RDMA_WRITE, b->buf, 64, hole,
				a->mr->rkey));
		ASSERT_EQ(0, pair_connect(a, b, 0));
		/* and it can move back onto mapped memory */
		ASSERT_EQ(0, ibv_rereg_mr(a->mr, T, NULL, a->buf, LEN, 0));
		key = a->mr->rkey;
		still_valid(_metadata, a, b, key, 25);
	}

	/* pages taken read-only cannot become writable in place */
	ASSERT_EQ(0, ibv_rereg_mr(a->mr, A, NULL, NULL, 0,
				  IBV_ACCESS_REMOTE_READ | odp));
	key = a->mr->rkey;
	errno = 0;
	EXPECT_EQ(IBV_REREG_MR_ERR_CMD,
		  ibv_rereg_mr(a->mr, A, NULL, NULL, 0, RW_ACCESS | odp));
	EXPECT_EQ(EACCES, errno);
	EXPECT_EQ(key, a->mr->rkey);
	/* with a new translation the pages are taken again, writable */
	ASSERT_EQ(0, ibv_rereg_mr(a->mr, T | A, NULL, a->buf, LEN,
				  RW_ACCESS | odp));
	still_valid(_metadata, a, b, a->mr->rkey, 26);
}

/* a device-memory MR cannot be re-registered and stays usable */
TEST(dm_mr)
{
	struct ibv_alloc_dm_attr da = { .length = 8192 };
	struct ibv_context *ctx = remu_open("remu0");
	uint8_t in[256], out[256];
	struct ibv_pd *pd;
	struct ibv_dm *dm;
	struct ibv_mr *mr;
	uint32_t key;

	ASSERT_NE(NULL, ctx);
	pd = ibv_alloc_pd(ctx);
	ASSERT_NE(NULL, pd);
	dm = ibv_alloc_dm(ctx, &da);
	ASSERT_NE(NULL, dm);
	mr = ibv_reg_dm_mr(pd, dm, 0, 8192, IBV_ACCESS_ZERO_BASED |
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	ASSERT_NE(NULL, mr);
	key = mr->rkey;
	errno = 0;
	EXPECT_NE(0, ibv_rereg_mr(mr, A, NULL, NULL, 0,
				  IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(key, mr->rkey);
	fill(in, sizeof(in), 30);
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 100, in, sizeof(in)));
	ASSERT_EQ(0, ibv_memcpy_from_dm(out, dm, 100, sizeof(out)));
	EXPECT_EQ(0, memcmp(in, out, sizeof(in)));
	EXPECT_EQ(0, ibv_dereg_mr(mr));
	EXPECT_EQ(0, ibv_free_dm(dm));
	EXPECT_EQ(0, ibv_dealloc_pd(pd));
	ibv_close_device(ctx);
}

/*
 * ---- by-reference payload and revocation (docs/security.md) ----
 * Both run between two QPs of remu0: the loopback path, where a payload
 * of REMU_FRAG_MIN_PAYLOAD bytes or more stays the sender's pages by
 * reference until the receiver's engine places it (a packet that leaves
 * through the IP stack, to remu1 in its namespace, is copied as it goes).
 */
#define BIG_LEN		(8u << 20)
#define BIG_ROUNDS	3
#define OLD_BYTE	0x11
#define SECRET_BYTE	0x5e

static uint8_t *map_big(void)
{
	void *p = mmap(NULL, BIG_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* post one signalled RDMA WRITE or READ on @qp, not waited for */
static int post_rdma(struct ibv_qp *qp, enum ibv_wr_opcode op,
		     uint64_t laddr, uint32_t lkey, uint32_t len,
		     uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { laddr, len, lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return remu_post_send(qp, &wr);
}

/* the first offset of @p[0..@len) that is not @c, or -1 */
static long cmp_byte(const uint8_t *p, uint8_t c, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != c)
			return (long)i;
	return -1;
}

/* wait (10 s at most) until @p[0] is not @was: the first packet landed */
static int wait_changed(volatile uint8_t *p, uint8_t was)
{
	double end = remu_now() + 10;

	while (*p == was)
		if (remu_now() > end)
			return -1;
	return 0;
}

/*
 * read_dereg: b READs 8 MiB of a's pinned MR into an ODP MR (each page
 * placed faults first, so the responses wait on b while a has sent them
 * all); once the first has landed, a deregisters the MR, which returns
 * after the READ has executed, and writes a secret over the pages.  The
 * READ completes with what the memory held before (SUCCESS) or fails
 * (REM_ACCESS_ERR, the responses not yet placed are dropped): the secret
 * never reaches b.  Before remu_zc.c the responses were the pages by
 * reference and b placed the secret.
 */
TEST(read_dereg)
{
	struct side a = {}, b = {};
	uint8_t *abig = map_big(), *bbig = map_big();
	int r, ok = 0, revoked = 0, mrs = remu_obj_count("mr");
	struct ibv_mr *amr, *bmr;

	ASSERT_NE(NULL, abig);
	ASSERT_NE(NULL, bbig);
	ASSERT_EQ(0, side_open(&a, "remu0", 0));
	ASSERT_EQ(0, side_open(&b, "remu0", 0));
	b.mr = ibv_reg_mr(b.pd[0], b.buf, MAP_LEN, RW_ACCESS);
	ASSERT_NE(NULL, b.mr);
	bmr = ibv_reg_mr(b.pd[0], bbig, BIG_LEN,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	ASSERT_NE(NULL, bmr);
	for (r = 0; r < BIG_ROUNDS; r++) {
		struct ibv_wc wc;
		int st;

		ASSERT_EQ(0, pair_connect(&a, &b, 0));
		memset(abig, OLD_BYTE, BIG_LEN);
		/* b's pages not mapped: every response placed faults one in */
		ASSERT_EQ(0, madvise(bbig, BIG_LEN, MADV_DONTNEED));
		amr = ibv_reg_mr(a.pd[0], abig, BIG_LEN, RW_ACCESS);
		ASSERT_NE(NULL, amr);
		ASSERT_EQ(0, post_rdma(b.qp[0], IBV_WR_RDMA_READ,
					    (uintptr_t)bbig, bmr->lkey, BIG_LEN,
					    (uintptr_t)abig, amr->rkey));
		ASSERT_EQ(0, wait_changed(bbig, 0));
		ASSERT_EQ(0, ibv_dereg_mr(amr));
		memset(abig, SECRET_BYTE, BIG_LEN);
		st = poll_one(b.cq, &wc);
		if (st == IBV_WC_SUCCESS)
			ok++;
		else if (st == IBV_WC_REM_ACCESS_ERR)
			revoked++;
		else
			ASSERT_EQ(IBV_WC_SUCCESS, st);
		/* what landed is what a's MR granted: old bytes or none */
		ASSERT_EQ(NULL, memchr(bbig, SECRET_BYTE, BIG_LEN))
			TH_LOG("round %d: the secret written after ibv_dereg_mr reached the peer at %td",
			       r, (uint8_t *)memchr(bbig, SECRET_BYTE,
						    BIG_LEN) - bbig);
		if (st == IBV_WC_SUCCESS)
			ASSERT_EQ(-1, cmp_byte(bbig, OLD_BYTE, BIG_LEN));
	}
	TH_LOG("%d READs complete, %d failed for the deregistration", ok,
	       revoked);
	EXPECT_EQ(0, ibv_dereg_mr(bmr));
	side_close(&a);
	side_close(&b);
	munmap(abig, BIG_LEN);
	munmap(bbig, BIG_LEN);
	EXPECT_EQ(mrs, remu_obj_count("mr"));
}

/*
 * span_write: b WRITEs 8 MiB into a's pinned MR; once the first packets
 * have landed, a moves fresh zero pages (populated beforehand) under the
 * second half of the range (mremap) and re-registers the MR over the same
 * address, length and iova (ibv_rereg_mr CHANGE_TRANSLATION: only
 * present pages to pin, so it returns while the WRITE is still running).
 * The rest of the message must not land in the new MR: the WRITE
 * completes before the rereg (SUCCESS) or fails (REM_ACCESS_ERR); the
 * fresh pages stay zero either way.  Before, every packet looked the key
 * up again, and those after the rereg landed in the new MR.
 */
TEST(span_write)
{
	const size_t half = BIG_LEN / 2;
	struct side a = {}, b = {};
	uint8_t *abig = map_big(), *bbig = map_big();
	int r, ok = 0, failed = 0, mrs = remu_obj_count("mr");
	struct ibv_mr *amr, *bmr;

	ASSERT_NE(NULL, abig);
	ASSERT_NE(NULL, bbig);
	ASSERT_EQ(0, side_open(&a, "remu0", 0));
	ASSERT_EQ(0, side_open(&b, "remu0", 0));
	b.mr = ibv_reg_mr(b.pd[0], b.buf, MAP_LEN, RW_ACCESS);
	ASSERT_NE(NULL, b.mr);
	memset(bbig, OLD_BYTE, BIG_LEN);
	bmr = ibv_reg_mr(b.pd[0], bbig, BIG_LEN, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, bmr);
	for (r = 0; r < BIG_ROUNDS; r++) {
		uint8_t *fresh;
		struct ibv_wc wc;
		void *p;
		int st;

		ASSERT_EQ(0, pair_connect(&a, &b, 0));
		memset(abig, 0, BIG_LEN);
		fresh = mmap(NULL, half, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		ASSERT_NE(MAP_FAILED, fresh);
		amr = ibv_reg_mr(a.pd[0], abig, BIG_LEN, RW_ACCESS);
		ASSERT_NE(NULL, amr);
		ASSERT_EQ(0, post_rdma(b.qp[0], IBV_WR_RDMA_WRITE,
				       (uintptr_t)bbig, bmr->lkey, BIG_LEN,
				       (uintptr_t)abig, amr->rkey));
		ASSERT_EQ(0, wait_changed(abig, 0));
		/* fresh pages under the second half; the old stay pinned */
		p = mremap(fresh, half, half, MREMAP_MAYMOVE | MREMAP_FIXED,
			   abig + half);
		ASSERT_EQ((void *)(abig + half), p);
		ASSERT_EQ(0, ibv_rereg_mr(amr, T, NULL, abig, BIG_LEN, 0));
		st = poll_one(b.cq, &wc);
		if (st == IBV_WC_SUCCESS)
			ok++;
		else if (st == IBV_WC_REM_ACCESS_ERR)
			failed++;
		else
			ASSERT_EQ(IBV_WC_SUCCESS, st);
		ASSERT_EQ(-1, cmp_byte(abig + half, 0, half))
			TH_LOG("round %d: the WRITE went on into the new MR at %ld",
			       r, cmp_byte(abig + half, 0, half));
		ASSERT_EQ(0, ibv_dereg_mr(amr));
	}
	TH_LOG("%d WRITEs done before the rereg, %d failed by it", ok, failed);
	EXPECT_EQ(0, ibv_dereg_mr(bmr));
	side_close(&a);
	side_close(&b);
	munmap(abig, BIG_LEN);
	munmap(bbig, BIG_LEN);
	EXPECT_EQ(mrs, remu_obj_count("mr"));
}

TEST_HARNESS_MAIN
