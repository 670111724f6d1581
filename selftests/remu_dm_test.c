// SPDX-License-Identifier: GPL-2.0
/*
 * remu_dm_test - device memory (ibv_alloc_dm) end to end: max_dm_size is
 * the pool (1 MiB by default); allocations are zeroed and freed; the
 * memcpy_to/from_dm round trips at every offset/length edge (zero
 * length, the last word) and, as on mlx5, copies past the length asked
 * for refused with EFAULT and unaligned ones (offset or length not a
 * multiple of 4) with EINVAL;
 * several zero-based MRs on one allocation; RDMA WRITE, READ, CMP_SWP and
 * FETCH_ADD from remu1 into DM MRs on remu0, and remu0 sending from a DM
 * MR as a local SGE, all checked byte for byte through memcpy_from_dm;
 * a distributed counter (two peers' concurrent FETCH_ADDs on one DM word,
 * exact total); two-process isolation (no mapping of another process's
 * allocation, fresh allocations zeroed); EBUSY when freeing a DM with MRs; a freed DM's pages kept out of the pool
 * while a second mapping of them lives; the pool filled with page-sized
 * allocations until ENOMEM, fragmented, then fully recovered; the pool's
 * statistics in sysfs (dm_size, dm_in_use, dm_allocs, dm_largest_free);
 * and the object counters (debugfs remu/objects) back to their baseline.
 *
 * Isolation across processes (dm.other_process_*): a forked process with
 * its own context cannot register the parent's DM by its handle number
 * (the raw REG_DM_MR command, which works on its own DM), and neither the
 * parent's DM MR rkey nor its lkey is usable from a QP in the child's PD.
 * A process killed with DMs, an MR and a second mapping live leaves the
 * pool and the object counts as they were (dm.process_exit_frees_all).
 *
 * These tests account for the whole pool from one context: the fixtures
 * lift the per-context cap (module parameter dm_ctx_pct, 50 by default)
 * to 100 while they run; remu_limits_test checks the cap itself.
 *
 * The dmpool fixture checks the pool's layout for any dm_pool_kb: the
 * pool size it expects comes from the environment (REMU_DM_POOL_KB, the
 * module parameter the module was loaded with; 1024 if unset), so
 * selftests/remu_dm_pool_test.sh reloads the module with other sizes and
 * runs `remu_dm_test -f dmpool` against each.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define POOL_SIZE	(1 << 20)	/* the module's default dm_pool_kb */
#define PAGE		4096
#define DM_RIGHTS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
			 IBV_ACCESS_ZERO_BASED)

static struct ibv_dm *dm_alloc(struct ibv_context *ctx, size_t len,
			       uint32_t log_align)
{
	struct ibv_alloc_dm_attr a = { .length = len,
				       .log_align_req = log_align };

	return ibv_alloc_dm(ctx, &a);
}

static void pattern(uint8_t *p, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

FIXTURE(dm) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int dm0, mr0;
	long pct0;
};

FIXTURE_SETUP(dm)
{
	self->pct0 = remu_param("dm_ctx_pct", 100);
	ASSERT_LT(0, self->pct0);
	self->dm0 = remu_obj_count("dm");
	self->mr0 = remu_obj_count("mr");
	ASSERT_LE(0, self->dm0);
	self->ctx = remu_open("remu0");
	ASSERT_NE(NULL, self->ctx);
	ASSERT_TRUE(remu_provider_loaded());
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
}

FIXTURE_TEARDOWN(dm)
{
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);
	/* everything the test took is back in the pool */
	EXPECT_EQ(self->dm0, remu_obj_count("dm"));
	EXPECT_EQ(self->mr0, remu_obj_count("mr"));
	remu_param("dm_ctx_pct", self->pct0);
}

TEST_F(dm, max_dm_size)
{
	struct ibv_device_attr_ex attr = {};

	ASSERT_EQ(0, ibv_query_device_ex(self->ctx, NULL, &attr));
	EXPECT_EQ(POOL_SIZE, attr.max_dm_size);
}

TEST_F(dm, alloc_zeroed_and_free)
{
	static uint8_t buf[3 * PAGE], zero[3 * PAGE];
	struct ibv_dm *dm;

	dm = dm_alloc(self->ctx, sizeof(buf), 0);
	ASSERT_NE(NULL, dm);
	EXPECT_EQ(self->dm0 + 1, remu_obj_count("dm"));
	memset(buf, 0xaa, sizeof(buf));
	ASSERT_EQ(0, ibv_memcpy_from_dm(buf, dm, 0, sizeof(buf)));
	EXPECT_EQ(0, memcmp(buf, zero, sizeof(buf)));
	/* leave junk behind: the next owner must not see it */
	memset(buf, 0x5c, sizeof(buf));
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, buf, sizeof(buf)));
	ASSERT_EQ(0, ibv_free_dm(dm));
	EXPECT_EQ(self->dm0, remu_obj_count("dm"));

	dm = dm_alloc(self->ctx, sizeof(buf), 0);
	ASSERT_NE(NULL, dm);
	ASSERT_EQ(0, ibv_memcpy_from_dm(buf, dm, 0, sizeof(buf)));
	EXPECT_EQ(0, memcmp(buf, zero, sizeof(buf)));
	ASSERT_EQ(0, ibv_free_dm(dm));

	/* zero length, too large, alignment beyond a chunk */
	EXPECT_EQ(NULL, dm_alloc(self->ctx, 0, 0));
	EXPECT_EQ(NULL, dm_alloc(self->ctx, POOL_SIZE + 1, 0));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(NULL, dm_alloc(self->ctx, PAGE, 30));
	EXPECT_EQ(EINVAL, errno);
	/* an alignment the pool can honour */
	dm = dm_alloc(self->ctx, 100, 16);
	ASSERT_NE(NULL, dm);
	ASSERT_EQ(0, ibv_free_dm(dm));
}

static long long dm_stat(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/infiniband/remu0/%s", name);
	return remu_read_num(path);
}

/* the pool's statistics in sysfs follow allocations and frees */
TEST_F(dm, stats)
{
	long long used0 = dm_stat("dm_in_use"), n0 = dm_stat("dm_allocs");
	struct ibv_dm *d1, *d2;

	EXPECT_EQ(POOL_SIZE, dm_stat("dm_size"));
	ASSERT_LE(0, used0);
	ASSERT_LE(0, n0);
	EXPECT_EQ(POOL_SIZE - used0, dm_stat("dm_largest_free"));
	d1 = dm_alloc(self->ctx, 3 * PAGE + 1, 0);	/* 4 pages */
	ASSERT_NE(NULL, d1);
	d2 = dm_alloc(self->ctx, 1, 0);			/* 1 page */
	ASSERT_NE(NULL, d2);
	EXPECT_EQ(used0 + 5 * PAGE, dm_stat("dm_in_use"));
	EXPECT_EQ(n0 + 2, dm_stat("dm_allocs"));
	EXPECT_EQ(POOL_SIZE - used0 - 5 * PAGE, dm_stat("dm_largest_free"));
	/* the 4-page hole d1 leaves is smaller than the space after d2 */
	ASSERT_EQ(0, ibv_free_dm(d1));
	EXPECT_EQ(used0 + PAGE, dm_stat("dm_in_use"));
	if (!used0)
		EXPECT_EQ(POOL_SIZE - 5 * PAGE, dm_stat("dm_largest_free"));
	EXPECT_EQ(n0 + 1, dm_stat("dm_allocs"));
	ASSERT_EQ(0, ibv_free_dm(d2));
	EXPECT_EQ(used0, dm_stat("dm_in_use"));
	EXPECT_EQ(n0, dm_stat("dm_allocs"));
	EXPECT_EQ(POOL_SIZE - used0, dm_stat("dm_largest_free"));
}

/*
 * Every offset/length edge of a 10000-byte allocation, with mlx5's rules:
 * a range past the length asked for is EFAULT (checked first, also when
 * it wraps around 64 bits), an offset or length that is not a multiple
 * of 4 bytes EINVAL; a refused copy moves no byte either way.
 */
TEST_F(dm, memcpy_edges)
{
	static const uint64_t offs[] = { 0, 1, 2, 3, 4, 8, 4092, 4095, 4096,
					 4097, 4100, 8188, 8191, 8192, 9996,
					 9998, 9999, 10000 };
	static const size_t lens[] = { 0, 1, 2, 3, 4, 8, 13, 4092, 4095, 4096,
				       4097, 4100, 9996, 9999, 10000 };
	const size_t len = 10000;
	uint8_t *model, *in, *out;
	struct ibv_dm *dm;
	unsigned int i, j, seed = 1;

	model = calloc(1, len);
	in = malloc(len);
	out = malloc(len);
	ASSERT_TRUE(model && in && out);
	dm = dm_alloc(self->ctx, len, 0);
	ASSERT_NE(NULL, dm);

	for (i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			uint64_t o = offs[i];
			size_t l = lens[j];
			int want = o + l > len ? EFAULT :
				   (o | l) & 3 ? EINVAL : 0;

			pattern(in, l, seed++);
			EXPECT_EQ(want, ibv_memcpy_to_dm(dm, o, in, l))
				TH_LOG("to_dm offset %llu length %zu",
				       (unsigned long long)o, l);
			if (!want)
				memcpy(model + o, in, l);
			memset(out, 0xee, len);
			EXPECT_EQ(want, ibv_memcpy_from_dm(out, dm, o, l))
				TH_LOG("from_dm offset %llu length %zu",
				       (unsigned long long)o, l);
			if (want) {
				ASSERT_EQ(0xee, out[0]);
			} else {
				ASSERT_EQ(0, memcmp(out, in, l));
			}
			/* the whole allocation matches the model */
			ASSERT_EQ(0, ibv_memcpy_from_dm(out, dm, 0, len));
			ASSERT_EQ(0, memcmp(out, model, len));
		}
	}
	/* ranges that wrap around, aligned or not */
	EXPECT_EQ(EFAULT, ibv_memcpy_to_dm(dm, UINT64_MAX, in, 2));
	EXPECT_EQ(EFAULT, ibv_memcpy_to_dm(dm, UINT64_MAX - 3, in, 8));
	EXPECT_EQ(EFAULT, ibv_memcpy_from_dm(out, dm, UINT64_MAX - 1, 4));
	EXPECT_EQ(EFAULT, ibv_memcpy_to_dm(dm, 1, in, SIZE_MAX));
	EXPECT_EQ(EFAULT, ibv_memcpy_from_dm(out, dm, 4, SIZE_MAX & ~3ul));
	ASSERT_EQ(0, ibv_free_dm(dm));

	/* the length asked for bounds the copies, not the page behind it */
	dm = dm_alloc(self->ctx, 10, 0);
	ASSERT_NE(NULL, dm);
	EXPECT_EQ(0, ibv_memcpy_to_dm(dm, 4, in, 4));
	EXPECT_EQ(EFAULT, ibv_memcpy_to_dm(dm, 8, in, 4));
	EXPECT_EQ(EFAULT, ibv_memcpy_from_dm(out, dm, 0, 12));
	EXPECT_EQ(EINVAL, ibv_memcpy_from_dm(out, dm, 8, 2));
	ASSERT_EQ(0, ibv_free_dm(dm));
	free(model);
	free(in);
	free(out);
}

TEST_F(dm, free_busy_with_mr)
{
	struct ibv_dm *dm;
	struct ibv_mr *mr1, *mr2;

	dm = dm_alloc(self->ctx, 2 * PAGE, 0);
	ASSERT_NE(NULL, dm);
	mr1 = ibv_reg_dm_mr(self->pd, dm, 0, PAGE, DM_RIGHTS);
	ASSERT_NE(NULL, mr1);
	mr2 = ibv_reg_dm_mr(self->pd, dm, 100, PAGE, DM_RIGHTS);
	ASSERT_NE(NULL, mr2);
	EXPECT_NE(mr1->lkey, mr2->lkey);
	EXPECT_EQ(self->mr0 + 2, remu_obj_count("mr"));
	/* outside the allocation, or not zero based: refused */
	EXPECT_EQ(NULL, ibv_reg_dm_mr(self->pd, dm, PAGE, 2 * PAGE, DM_RIGHTS));
	EXPECT_EQ(NULL, ibv_reg_dm_mr(self->pd, dm, 0, PAGE,
				      IBV_ACCESS_LOCAL_WRITE));

	EXPECT_EQ(EBUSY, ibv_free_dm(dm));
	ASSERT_EQ(0, ibv_dereg_mr(mr1));
	EXPECT_EQ(EBUSY, ibv_free_dm(dm));
	/* the DM still works after a refused free */
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, "xyz", 4));
	ASSERT_EQ(0, ibv_dereg_mr(mr2));
	ASSERT_EQ(0, ibv_free_dm(dm));
}

/* fill the pool page by page, fragment it, then take it whole */
TEST_F(dm, exhaust_fragment_recover)
{
	enum { N = POOL_SIZE / PAGE };
	struct ibv_dm *dms[N + 1];
	struct ibv_dm *big;
	unsigned int i, n = 0;
	uint64_t tag;

	for (i = 0; i <= N; i++) {
		dms[i] = dm_alloc(self->ctx, PAGE, 0);
		if (!dms[i])
			break;
		/* each allocation is its own: tag it with its number */
		tag = i;
		ASSERT_EQ(0, ibv_memcpy_to_dm(dms[i], PAGE - 8, &tag, 8));
		n++;
	}
	EXPECT_EQ(N, n);
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(self->dm0 + n, remu_obj_count("dm"));
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, ibv_memcpy_from_dm(&tag, dms[i], PAGE - 8, 8));
		ASSERT_EQ(i, tag);
	}
	/* free every other page: half the pool is free, no two pages adjoin */
	for (i = 0; i < n; i += 2)
		ASSERT_EQ(0, ibv_free_dm(dms[i]));
	big = dm_alloc(self->ctx, 2 * PAGE, 0);
	EXPECT_EQ(NULL, big);
	EXPECT_EQ(ENOMEM, errno);
	if (big)
		ibv_free_dm(big);
	/* the holes are still usable one page at a time */
	for (i = 0; i < n; i += 2) {
		dms[i] = dm_alloc(self->ctx, PAGE, 0);
		ASSERT_NE(NULL, dms[i]);
	}
	EXPECT_EQ(NULL, dm_alloc(self->ctx, PAGE, 0));
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, ibv_free_dm(dms[i]));
	EXPECT_EQ(self->dm0, remu_obj_count("dm"));

	/* full recovery: the whole pool in one allocation, twice */
	for (i = 0; i < 2; i++) {
		big = dm_alloc(self->ctx, POOL_SIZE, 0);
		ASSERT_NE(NULL, big);
		EXPECT_EQ(NULL, dm_alloc(self->ctx, 1, 0));
		ASSERT_EQ(0, ibv_free_dm(big));
	}
}

/*
 * The mmap offset of the newest mapping of @len bytes of the uverbs
 * command file (libremu's mapping of a DM just allocated), or -1.
 */
static long long dm_map_offset(size_t len)
{
	unsigned long start, end;
	unsigned long long off;
	long long found = -1;
	char line[512], path[256];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		path[0] = 0;
		if (sscanf(line, "%lx-%lx %*s %llx %*s %*s %255s", &start, &end,
			   &off, path) == 4 && end - start == len &&
		    strstr(path, "/dev/infiniband/uverbs"))
			found = off;
	}
	fclose(f);
	return found;
}

/*
 * A freed DM's pages stay out of the pool while a mapping of them lives:
 * map the allocation a second time, free the DM, and the pool is one
 * allocation short (dm_allocs, ENOMEM one page early) with the old bytes
 * still visible through the mapping; unmapping gives the pages back.
 */
TEST_F(dm, freed_pages_held_by_mapping)
{
	enum { N = POOL_SIZE / PAGE };
	static struct ibv_dm *dms[N];
	long long n0 = dm_stat("dm_allocs"), off;
	uint64_t tag = 0x6d656d2d64657669ull, zero = 0;
	unsigned int i, n = 0;
	struct ibv_dm *dm;
	uint64_t *p;

	dm = dm_alloc(self->ctx, 2 * PAGE, 0);
	ASSERT_NE(NULL, dm);
	off = dm_map_offset(2 * PAGE);
	ASSERT_LE(0, off);
	p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->ctx->cmd_fd, off);
	ASSERT_NE(MAP_FAILED, p);
	/* the same memory as libremu's mapping */
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, PAGE + 8, &tag, 8));
	EXPECT_EQ(tag, p[PAGE / 8 + 1]);

	ASSERT_EQ(0, ibv_free_dm(dm));
	/* no new mapping of a freed allocation */
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 2 * PAGE, PROT_READ, MAP_SHARED,
				   self->ctx->cmd_fd, off));
	EXPECT_EQ(n0 + 1, dm_stat("dm_allocs"));
	EXPECT_EQ(self->dm0 + 1, remu_obj_count("dm"));

	/* the rest of the pool is handed out, never these two pages */
	while (n < N && (dms[n] = dm_alloc(self->ctx, PAGE, 0)))
		n++;
	EXPECT_EQ(N - 2, n);
	for (i = 0; i < n; i++) {
		uint64_t v = 1;

		ASSERT_EQ(0, ibv_memcpy_from_dm(&v, dms[i], 8, 8));
		ASSERT_EQ(zero, v);
		ASSERT_EQ(0, ibv_memcpy_to_dm(dms[i], 8, &zero, 8));
	}
	EXPECT_EQ(tag, p[PAGE / 8 + 1]);
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, ibv_free_dm(dms[i]));

	ASSERT_EQ(0, munmap(p, 2 * PAGE));
	EXPECT_EQ(n0, dm_stat("dm_allocs"));
	EXPECT_EQ(self->dm0, remu_obj_count("dm"));
	dm = dm_alloc(self->ctx, POOL_SIZE, 0);
	ASSERT_NE(NULL, dm);
	ASSERT_EQ(0, ibv_free_dm(dm));
}

/* ---- remote access: remu1 -> DM MRs on remu0 ---- */

/* remu0 or remu1 with one RC QP; a remu_end of remu_verbs_lib.h */
static int side_open(struct remu_end *s, const char *dev)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 16,
		.max_send_sge = 2, .max_recv_sge = 2,
	};

	return remu_end_open(s, dev, GID_INDEX, 16, &cap);
}

static int side_connect(struct remu_end *s, struct remu_end *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x42);

	return remu_end_connect(s, peer, &ra, GID_INDEX);
}

/* one signaled WR on @s, waited for; returns the completion status */
static int run_wr(struct remu_end *s, struct ibv_send_wr *wr)
{
	return remu_run_wr(s->qp, s->cq, wr, 20);
}

#define DM_LEN		(3 * PAGE + 1000)
#define MR1_OFF		0		/* MR1: DM bytes [0, 2 pages) */
#define MR1_LEN		(2 * PAGE)
#define MR2_OFF		(2 * PAGE + 64)	/* MR2: the rest of the DM */
#define MR2_LEN		(DM_LEN - MR2_OFF)
#define HOST_LEN	(64 * 1024)

FIXTURE(rdm) {
	struct remu_end a, b;	/* a: remu0 owns the DM; b: remu1, the peer */
	struct ibv_dm *dm;
	struct ibv_mr *mr1, *mr2;	/* DM MRs on a */
	struct ibv_mr *hmr;		/* host MR on b */
	uint8_t *host;
	int dm0, mr0;
};

FIXTURE_SETUP(rdm)
{
	self->dm0 = remu_obj_count("dm");
	self->mr0 = remu_obj_count("mr");
	ASSERT_EQ(0, side_open(&self->a, "remu0"));
	ASSERT_EQ(0, side_open(&self->b, "remu1"));
	ASSERT_EQ(0, side_connect(&self->a, &self->b));
	ASSERT_EQ(0, side_connect(&self->b, &self->a));
	self->dm = dm_alloc(self->a.ctx, DM_LEN, 0);
	ASSERT_NE(NULL, self->dm);
	self->mr1 = ibv_reg_dm_mr(self->a.pd, self->dm, MR1_OFF, MR1_LEN,
				  DM_RIGHTS);
	self->mr2 = ibv_reg_dm_mr(self->a.pd, self->dm, MR2_OFF, MR2_LEN,
				  DM_RIGHTS);
	ASSERT_TRUE(self->mr1 && self->mr2);
	self->host = aligned_alloc(PAGE, HOST_LEN);
	ASSERT_NE(NULL, self->host);
	self->hmr = ibv_reg_mr(self->b.pd, self->host, HOST_LEN,
			       IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ);
	ASSERT_NE(NULL, self->hmr);
}

FIXTURE_TEARDOWN(rdm)
{
	if (self->hmr)
		ibv_dereg_mr(self->hmr);
	if (self->mr1)
		ibv_dereg_mr(self->mr1);
	if (self->mr2)
		ibv_dereg_mr(self->mr2);
	if (self->dm)
		EXPECT_EQ(0, ibv_free_dm(self->dm));
	remu_end_close(&self->a);
	remu_end_close(&self->b);
	free(self->host);
	EXPECT_EQ(self->dm0, remu_obj_count("dm"));
	EXPECT_EQ(self->mr0, remu_obj_count("mr"));
}

/* b WRITEs into both DM MRs at zero-based addresses */
TEST_F(rdm, remote_write)
{
	static const struct { int mr2; uint64_t iova; uint32_t len; } w[] = {
		{ 0, 0, 1 }, { 0, 1, 4095 }, { 0, 4000, 200 },
		{ 0, 0, MR1_LEN }, { 1, 0, MR2_LEN }, { 1, 13, 999 },
		{ 1, MR2_LEN - 1, 1 },
	};
	uint8_t *model = calloc(1, DM_LEN), *out = malloc(DM_LEN);
	unsigned int i;

	ASSERT_TRUE(model && out);
	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		struct ibv_mr *mr = w[i].mr2 ? self->mr2 : self->mr1;
		uint64_t dmoff = (w[i].mr2 ? MR2_OFF : MR1_OFF) + w[i].iova;
		struct ibv_sge sge = { (uintptr_t)self->host + 3, w[i].len,
				       self->hmr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE };

		pattern(self->host + 3, w[i].len, 17 * i + 1);
		wr.wr.rdma.remote_addr = w[i].iova;
		wr.wr.rdma.rkey = mr->rkey;
		ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&self->b, &wr));
		memcpy(model + dmoff, self->host + 3, w[i].len);
		ASSERT_EQ(0, ibv_memcpy_from_dm(out, self->dm, 0, DM_LEN));
		ASSERT_EQ(0, memcmp(out, model, DM_LEN));
	}
	free(model);
	free(out);
}

/* past the end of a DM MR: a remote access error, the DM untouched */
TEST_F(rdm, remote_write_out_of_bounds)
{
	struct ibv_sge sge = { (uintptr_t)self->host, 2, self->hmr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };
	uint8_t out[2 * PAGE + 64], zero[sizeof(out)] = {};

	memset(self->host, 0x77, 2);
	wr.wr.rdma.remote_addr = MR1_LEN - 1;
	wr.wr.rdma.rkey = self->mr1->rkey;
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, run_wr(&self->b, &wr));
	ASSERT_EQ(0, ibv_memcpy_from_dm(out, self->dm, 0, sizeof(out)));
	EXPECT_EQ(0, memcmp(out, zero, sizeof(out)));
}

/* b READs what a put into the DM */
TEST_F(rdm, remote_read)
{
	uint8_t *in = malloc(DM_LEN);
	struct ibv_sge sge = { (uintptr_t)self->host + 5, 0, self->hmr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ };

	ASSERT_NE(NULL, in);
	pattern(in, DM_LEN, 99);
	ASSERT_EQ(0, ibv_memcpy_to_dm(self->dm, 0, in, DM_LEN));

	sge.length = MR1_LEN - 7;
	wr.wr.rdma.remote_addr = 7;
	wr.wr.rdma.rkey = self->mr1->rkey;
	ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&self->b, &wr));
	EXPECT_EQ(0, memcmp(self->host + 5, in + MR1_OFF + 7, MR1_LEN - 7));

	sge.length = MR2_LEN;
	wr.wr.rdma.remote_addr = 0;
	wr.wr.rdma.rkey = self->mr2->rkey;
	ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&self->b, &wr));
	EXPECT_EQ(0, memcmp(self->host + 5, in + MR2_OFF, MR2_LEN));
	free(in);
}

/* CMP_SWP and FETCH_ADD on a word of MR2 (DM offset MR2_OFF + 8) */
TEST_F(rdm, remote_atomics)
{
	uint64_t *local = (uint64_t *)(self->host + 64);
	struct ibv_sge sge = { (uintptr_t)local, 8, self->hmr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1 };
	uint64_t v = 0x1122334455667788ull, neighbours[3];

	ASSERT_EQ(0, ibv_memcpy_to_dm(self->dm, MR2_OFF + 8, &v, 8));
	wr.wr.atomic.remote_addr = 8;
	wr.wr.atomic.rkey = self->mr2->rkey;

	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.compare_add = 0x0100000000000023ull;
	*local = 0;
	ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&self->b, &wr));
	EXPECT_EQ(0x1122334455667788ull, *local);
	ASSERT_EQ(0, ibv_memcpy_from_dm(&v, self->dm, MR2_OFF + 8, 8));
	EXPECT_EQ(0x12223344556677abull, v);

	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 0x12223344556677abull;
	wr.wr.atomic.swap = 0xfedcba9876543210ull;
	*local = 0;
	ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&self->b, &wr));
	EXPECT_EQ(0x12223344556677abull, *local);
	ASSERT_EQ(0, ibv_memcpy_from_dm(&v, self->dm, MR2_OFF + 8, 8));
	EXPECT_EQ(0xfedcba9876543210ull, v);

	/* compare differs: unchanged, old value returned */
	wr.wr.atomic.compare_add = 1;
	wr.wr.atomic.swap = 2;
	*local = 0;
	ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&self->b, &wr));
	EXPECT_EQ(0xfedcba9876543210ull, *local);
	ASSERT_EQ(0, ibv_memcpy_from_dm(neighbours, self->dm, MR2_OFF, 24));
	EXPECT_EQ(0, neighbours[0]);
	EXPECT_EQ(0xfedcba9876543210ull, neighbours[1]);
	EXPECT_EQ(0, neighbours[2]);

	/* and on MR1 at its last word */
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = MR1_LEN - 8;
	wr.wr.atomic.rkey = self->mr1->rkey;
	wr.wr.atomic.compare_add = 5;
	ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&self->b, &wr));
	EXPECT_EQ(0, *local);
	ASSERT_EQ(0, ibv_memcpy_from_dm(&v, self->dm, MR1_LEN - 8, 8));
	EXPECT_EQ(5, v);
}

/* a WRITEs from DM MRs (two local SGEs) into b's host memory */
TEST_F(rdm, local_sge_from_dm)
{
	uint8_t *in = malloc(DM_LEN);
	struct ibv_sge sge[2] = {
		{ 4000, 100, self->mr1->lkey },		/* DM [4000, 4100) */
		{ 3, MR2_LEN - 3, self->mr2->lkey },	/* DM [MR2_OFF+3, end) */
	};
	struct ibv_send_wr wr = { .sg_list = sge, .num_sge = 2,
				  .opcode = IBV_WR_RDMA_WRITE };

	ASSERT_NE(NULL, in);
	pattern(in, DM_LEN, 5);
	ASSERT_EQ(0, ibv_memcpy_to_dm(self->dm, 0, in, DM_LEN));
	memset(self->host, 0, HOST_LEN);
	wr.wr.rdma.remote_addr = (uintptr_t)self->host + 1;
	wr.wr.rdma.rkey = self->hmr->rkey;
	ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&self->a, &wr));
	EXPECT_EQ(0, memcmp(self->host + 1, in + 4000, 100));
	EXPECT_EQ(0, memcmp(self->host + 101, in + MR2_OFF + 3, MR2_LEN - 3));
	EXPECT_EQ(0, self->host[0]);
	EXPECT_EQ(0, self->host[101 + MR2_LEN - 3]);
	free(in);
}

struct adder {
	struct remu_end *s;
	uint32_t rkey;
	uint64_t *olds;		/* ADDS old values, the results */
	uint64_t *res;		/* registered 8-byte result buffer */
	struct ibv_mr *mr;
	int err;
};

#define ADDS	500

static void *adder_run(void *arg)
{
	struct adder *ad = arg;
	struct ibv_sge sge = { (uintptr_t)ad->res, 8, ad->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD };
	int i;

	wr.wr.atomic.remote_addr = 16;
	wr.wr.atomic.rkey = ad->rkey;
	wr.wr.atomic.compare_add = 1;
	for (i = 0; i < ADDS; i++) {
		if (run_wr(ad->s, &wr) != IBV_WC_SUCCESS) {
			ad->err = i + 1;
			break;
		}
		ad->olds[i] = *ad->res;
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * A distributed counter: two peers (two contexts on remu1, each with its
 * own RC QP to its own QP on remu0) FETCH_ADD 1 to one DM word at once;
 * the total is exact and every old value comes back exactly once.
 */
TEST_F(rdm, distributed_counter)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 16,
		.max_send_sge = 1, .max_recv_sge = 1,
	};
	struct remu_end a2 = { .ctx = self->a.ctx, .pd = self->a.pd,
			       .gid = self->a.gid, .mtu = self->a.mtu };
	struct remu_end c = {};
	struct adder ad[2] = {};
	uint64_t *olds = calloc(2 * ADDS, sizeof(*olds)), v;
	pthread_t th[2];
	int i;

	ASSERT_NE(NULL, olds);
	/* a second QP on remu0, in the DM MRs' PD */
	a2.cq = ibv_create_cq(a2.ctx, 16, NULL, NULL, 0);
	ASSERT_NE(NULL, a2.cq);
	a2.qp = remu_create_qp(a2.pd, a2.cq, IBV_QPT_RC, &cap);
	ASSERT_NE(NULL, a2.qp);
	ASSERT_EQ(0, side_open(&c, "remu1"));
	ASSERT_EQ(0, side_connect(&a2, &c));
	ASSERT_EQ(0, side_connect(&c, &a2));

	ad[0].s = &self->b;
	ad[0].mr = self->hmr;
	ad[0].res = (uint64_t *)(self->host + 256);
	ad[1].s = &c;
	ad[1].res = (uint64_t *)(self->host + 512);
	ad[1].mr = ibv_reg_mr(c.pd, self->host, HOST_LEN,
			      IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, ad[1].mr);
	for (i = 0; i < 2; i++) {
		ad[i].rkey = self->mr2->rkey;
		ad[i].olds = olds + i * ADDS;
	}
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, adder_run, &ad[i]));
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	EXPECT_EQ(0, ad[0].err);
	EXPECT_EQ(0, ad[1].err);
	ASSERT_EQ(0, ibv_memcpy_from_dm(&v, self->dm, MR2_OFF + 16, 8));
	EXPECT_EQ(2 * ADDS, v);
	qsort(olds, 2 * ADDS, sizeof(*olds), cmp_u64);
	for (i = 0; i < 2 * ADDS; i++)
		ASSERT_EQ(i, olds[i]);

	ibv_dereg_mr(ad[1].mr);
	remu_end_close(&c);
	ibv_destroy_qp(a2.qp);
	ibv_destroy_cq(a2.cq);
	free(olds);
}

/*
 * Two processes: another process cannot map this one's allocation (the
 * mmap offset means nothing on its own command fd), and its allocations
 * never show this one's bytes.
 */
TEST_F(dm, two_process_isolation)
{
	uint8_t secret[PAGE], got[PAGE];
	struct ibv_dm *dm;
	long long off;
	int st;
	pid_t pid;

	memset(secret, 0xa5, sizeof(secret));
	dm = dm_alloc(self->ctx, PAGE, 0);
	ASSERT_NE(NULL, dm);
	off = dm_map_offset(PAGE);
	ASSERT_LE(0, off);
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, secret, sizeof(secret)));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ibv_context *ctx = remu_open("remu0");
		uint8_t zero[PAGE] = {};
		struct ibv_dm *mine;
		int i, bad = 0;

		if (!ctx)
			_exit(10);
		/* the parent's offset on the child's own file */
		if (mmap(NULL, PAGE, PROT_READ, MAP_SHARED, ctx->cmd_fd,
			 off) != MAP_FAILED)
			_exit(11);
		/* fresh allocations, all zero, whatever pages they get */
		for (i = 0; i < 8; i++) {
			mine = dm_alloc(ctx, PAGE, 0);
			if (!mine)
				_exit(12);
			if (ibv_memcpy_from_dm(got, mine, 0, PAGE) ||
			    memcmp(got, zero, PAGE))
				bad = 1;
			ibv_free_dm(mine);
		}
		ibv_close_device(ctx);
		_exit(bad ? 13 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	/* untouched by the other process */
	memset(got, 0, sizeof(got));
	ASSERT_EQ(0, ibv_memcpy_from_dm(got, dm, 0, PAGE));
	EXPECT_EQ(0, memcmp(got, secret, PAGE));
	ASSERT_EQ(0, ibv_free_dm(dm));
}

/* ---- isolation between processes ---- */

/*
 * REG_DM_MR as a raw uverbs ioctl on @ctx's command file, naming the DM
 * and the PD by handle number: what any process can send, whatever
 * libibverbs would do.  Returns 0 (the MR's handle in *@mr_handle) or the
 * errno.
 */
static int raw_reg_dm_mr(struct ibv_context *ctx, uint32_t pd_handle,
			 uint32_t dm_handle, uint64_t off, uint64_t len,
			 uint32_t *mr_handle, uint32_t *lkey, uint32_t *rkey)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attr[8];
	} cmd = {};
	struct ib_uverbs_attr *a = cmd.attr;

	cmd.hdr.length = sizeof(cmd);
	cmd.hdr.object_id = UVERBS_OBJECT_MR;
	cmd.hdr.method_id = UVERBS_METHOD_DM_MR_REG;
	cmd.hdr.num_attrs = 8;
	a[0].attr_id = UVERBS_ATTR_REG_DM_MR_HANDLE;
	a[1].attr_id = UVERBS_ATTR_REG_DM_MR_OFFSET;
	a[1].len = 8;
	a[1].data = off;
	a[2].attr_id = UVERBS_ATTR_REG_DM_MR_LENGTH;
	a[2].len = 8;
	a[2].data = len;
	a[3].attr_id = UVERBS_ATTR_REG_DM_MR_PD_HANDLE;
	a[3].data = pd_handle;
	a[4].attr_id = UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS;
	a[4].len = 8;
	a[4].data = DM_RIGHTS;
	a[5].attr_id = UVERBS_ATTR_REG_DM_MR_DM_HANDLE;
	a[5].data = dm_handle;
	a[6].attr_id = UVERBS_ATTR_REG_DM_MR_RESP_LKEY;
	a[6].len = sizeof(*lkey);
	a[6].data = (uintptr_t)lkey;
	a[7].attr_id = UVERBS_ATTR_REG_DM_MR_RESP_RKEY;
	a[7].len = sizeof(*rkey);
	a[7].data = (uintptr_t)rkey;
	if (ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &cmd))
		return errno;
	*mr_handle = a[0].data;
	return 0;
}

/* MR_DESTROY as a raw uverbs ioctl: undoes raw_reg_dm_mr() */
static int raw_destroy_mr(struct ibv_context *ctx, uint32_t mr_handle)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attr[1];
	} cmd = {};

	cmd.hdr.length = sizeof(cmd);
	cmd.hdr.object_id = UVERBS_OBJECT_MR;
	cmd.hdr.method_id = UVERBS_METHOD_MR_DESTROY;
	cmd.hdr.num_attrs = 1;
	cmd.attr[0].attr_id = UVERBS_ATTR_DESTROY_MR_HANDLE;
	cmd.attr[0].data = mr_handle;
	return ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &cmd) ? errno : 0;
}

/*
 * The child's half of dm.other_process_handle_refused: its own context
 * names the parent's DM by handle number.  Exit 0 if refused, and only
 * then; other codes say which step went wrong.
 */
static int child_reg_other_dm(uint32_t their_handle)
{
	struct ibv_context *ctx = remu_open("remu0");
	uint32_t h, lkey = 0, rkey = 0;
	struct ibv_dm *mine;
	struct ibv_pd *pd;
	int mrs, err;

	if (!ctx)
		return 10;
	pd = ibv_alloc_pd(ctx);
	mine = dm_alloc(ctx, PAGE, 0);
	if (!pd || !mine)
		return 11;
	/* the number must mean nothing of ours, or the test proves nothing */
	if (their_handle == mine->handle || their_handle == pd->handle)
		return 12;
	/* the raw command works: on our own DM */
	if (raw_reg_dm_mr(ctx, pd->handle, mine->handle, 0, PAGE, &h, &lkey,
			  &rkey))
		return 13;
	if (raw_destroy_mr(ctx, h))
		return 14;
	/* and is refused on the parent's, nothing created */
	mrs = remu_obj_count("mr");
	err = raw_reg_dm_mr(ctx, pd->handle, their_handle, 0, PAGE, &h, &lkey,
			    &rkey);
	if (!err)
		return 15;
	printf("# the parent's DM handle %u: %s\n", their_handle,
	       strerror(err));
	if (remu_obj_count("mr") != mrs)
		return 16;
	if (ibv_free_dm(mine) || ibv_dealloc_pd(pd))
		return 17;
	ibv_close_device(ctx);
	return 0;
}

/*
 * Another process cannot register this one's DM by its handle number:
 * handles are per context, so on the child's own command file the number
 * names nothing (the raw command, which the child shows working on a DM
 * of its own, fails and creates no MR).  The parent's DM is untouched.
 */
TEST_F(dm, other_process_handle_refused)
{
	uint8_t secret[PAGE], got[PAGE];
	struct ibv_dm *pad, *dm;
	int st;
	pid_t pid;

	/* a DM first, so that this one's handle is past the child's two */
	pad = dm_alloc(self->ctx, PAGE, 0);
	dm = dm_alloc(self->ctx, PAGE, 0);
	ASSERT_TRUE(pad && dm);
	memset(secret, 0x3c, sizeof(secret));
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, secret, PAGE));

	fflush(stdout);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(child_reg_other_dm(dm->handle));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	ASSERT_EQ(0, ibv_memcpy_from_dm(got, dm, 0, PAGE));
	EXPECT_EQ(0, memcmp(got, secret, PAGE));
	ASSERT_EQ(0, ibv_free_dm(dm));
	ASSERT_EQ(0, ibv_free_dm(pad));
}

/*
 * The child's half of dm.other_process_keys_refused: two connections
 * remu0 <-> remu1, each in a context and PD of its own; each has a DM MR
 * of its own on remu0 to show the operation works.  Exit 0 when the
 * parent's lkey and rkey were refused, and only then.
 */
struct kid_conn {
	struct remu_end a, b;	/* a: remu0, b: remu1 */
	struct ibv_dm *dm;	/* on a */
	struct ibv_mr *dmr;	/* on dm, a's PD */
	struct ibv_mr *hmr;	/* host memory on b */
};

static int kid_conn_open(struct kid_conn *k, uint8_t *host)
{
	if (side_open(&k->a, "remu0") || side_open(&k->b, "remu1") ||
	    side_connect(&k->a, &k->b) || side_connect(&k->b, &k->a))
		return -1;
	k->dm = dm_alloc(k->a.ctx, PAGE, 0);
	k->dmr = k->dm ? ibv_reg_dm_mr(k->a.pd, k->dm, 0, PAGE, DM_RIGHTS) :
			 NULL;
	k->hmr = ibv_reg_mr(k->b.pd, host, PAGE, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_WRITE);
	return k->dmr && k->hmr ? 0 : -1;
}

static void kid_conn_close(struct kid_conn *k)
{
	if (k->hmr)
		ibv_dereg_mr(k->hmr);
	if (k->dmr)
		ibv_dereg_mr(k->dmr);
	if (k->dm)
		ibv_free_dm(k->dm);
	remu_end_close(&k->a);
	remu_end_close(&k->b);
}

static int child_use_other_keys(uint32_t their_rkey, uint32_t their_lkey)
{
	struct kid_conn k1 = {}, k2 = {};
	uint8_t *host = aligned_alloc(PAGE, PAGE), got[64], zero[64] = {};
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };
	int ret = 0;

	if (!host)
		return 20;
	memset(host, 0, PAGE);
	if (kid_conn_open(&k1, host) || kid_conn_open(&k2, host))
		return 21;

	/* remu0 WRITEs from its own DM MR (local SGE) to remu1: works */
	memset(got, 0x5a, sizeof(got));
	if (ibv_memcpy_to_dm(k1.dm, 0, got, sizeof(got)))
		return 22;
	sge = (struct ibv_sge){ 0, 64, k1.dmr->lkey };
	wr.wr.rdma.remote_addr = (uintptr_t)host;
	wr.wr.rdma.rkey = k1.hmr->rkey;
	if (run_wr(&k1.a, &wr) != IBV_WC_SUCCESS || memcmp(host, got, 64))
		return 23;
	/* the parent's lkey from a QP in our PD: a local protection error */
	sge.lkey = their_lkey;
	wr.wr.rdma.remote_addr = (uintptr_t)host + 128;
	if (run_wr(&k1.a, &wr) != IBV_WC_LOC_PROT_ERR)
		ret = 24;
	if (memcmp(host + 128, zero, 64))
		ret = ret ? ret : 25;

	/* remu1 WRITEs into our own DM MR on remu0: works */
	memset(host, 0x99, 64);
	sge = (struct ibv_sge){ (uintptr_t)host, 64, k2.hmr->lkey };
	wr.wr.rdma.remote_addr = 0;
	wr.wr.rdma.rkey = k2.dmr->rkey;
	if (run_wr(&k2.b, &wr) != IBV_WC_SUCCESS ||
	    ibv_memcpy_from_dm(got, k2.dm, 0, 64) || memcmp(got, host, 64))
		return 26;
	/* the parent's rkey, arriving at a QP in our PD: refused */
	wr.wr.rdma.rkey = their_rkey;
	if (run_wr(&k2.b, &wr) != IBV_WC_REM_ACCESS_ERR)
		ret = ret ? ret : 27;

	kid_conn_close(&k1);
	kid_conn_close(&k2);
	free(host);
	return ret;
}

/*
 * The parent's DM MR cannot be reached from another process's QPs: its
 * rkey in a WRITE arriving at a QP in another PD gives REM_ACCESS_ERR, its
 * lkey in a local SGE LOC_PROT_ERR; the DM keeps its bytes.
 */
TEST_F(dm, other_process_keys_refused)
{
	uint8_t secret[PAGE], got[PAGE];
	struct ibv_dm *dm;
	struct ibv_mr *mr;
	int st;
	pid_t pid;

	dm = dm_alloc(self->ctx, PAGE, 0);
	ASSERT_NE(NULL, dm);
	mr = ibv_reg_dm_mr(self->pd, dm, 0, PAGE, DM_RIGHTS);
	ASSERT_NE(NULL, mr);
	memset(secret, 0xc3, sizeof(secret));
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, secret, PAGE));

	fflush(stdout);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(child_use_other_keys(mr->rkey, mr->lkey));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	ASSERT_EQ(0, ibv_memcpy_from_dm(got, dm, 0, PAGE));
	EXPECT_EQ(0, memcmp(got, secret, PAGE));
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	ASSERT_EQ(0, ibv_free_dm(dm));
}

/*
 * Process exit frees everything: a child allocates DMs, registers an MR on
 * one, maps one a second time and exits without freeing anything; the
 * pool, its statistics and the object counts are back where they were.
 */
TEST_F(dm, process_exit_frees_all)
{
	long long used0 = dm_stat("dm_in_use"), n0 = dm_stat("dm_allocs");
	int pipefd[2], st;
	char c;
	pid_t pid;

	ASSERT_EQ(0, pipe(pipefd));
	fflush(stdout);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ibv_context *ctx = remu_open("remu0");
		struct ibv_dm *d1, *d2;
		struct ibv_pd *pd;
		long long off;

		close(pipefd[0]);
		if (!ctx)
			_exit(10);
		pd = ibv_alloc_pd(ctx);
		d1 = dm_alloc(ctx, 3 * PAGE, 0);
		d2 = dm_alloc(ctx, 5 * PAGE, 0);
		if (!pd || !d1 || !d2 ||
		    !ibv_reg_dm_mr(pd, d1, 0, PAGE, DM_RIGHTS))
			_exit(11);
		off = dm_map_offset(5 * PAGE);
		if (off < 0 || mmap(NULL, 5 * PAGE, PROT_READ, MAP_SHARED,
				    ctx->cmd_fd, off) == MAP_FAILED)
			_exit(12);
		if (write(pipefd[1], "r", 1) != 1)
			_exit(13);
		pause();	/* killed by the parent */
		_exit(14);
	}
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &c, 1));
	close(pipefd[0]);
	/* the child's allocations are live */
	EXPECT_EQ(used0 + 8 * PAGE, dm_stat("dm_in_use"));
	EXPECT_EQ(n0 + 2, dm_stat("dm_allocs"));
	EXPECT_EQ(self->mr0 + 1, remu_obj_count("mr"));
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFSIGNALED(st));
	EXPECT_EQ(used0, dm_stat("dm_in_use"));
	EXPECT_EQ(n0, dm_stat("dm_allocs"));
	EXPECT_EQ(self->dm0, remu_obj_count("dm"));
	EXPECT_EQ(self->mr0, remu_obj_count("mr"));
}

/* ---- the pool's layout for any dm_pool_kb ---- */

#define MAX_CHUNKS	64
#define CHUNK_MAX	(4 << 20)	/* 1 << MAX_PAGE_ORDER pages */
#define POOL_MAX_KB	65536

/*
 * The chunks the module makes of REMU_DM_POOL_KB (docs/device-memory.md):
 * the size capped at the maximum and rounded up to pages, cut greedily
 * into the largest power of two of pages that fits, at most 4 MiB each.
 * Returns the number of chunks, largest first.
 */
static int pool_chunks(uint64_t *chunk, uint64_t *total)
{
	const char *env = getenv("REMU_DM_POOL_KB");
	uint64_t kb = env ? strtoull(env, NULL, 0) : 1024, left, c;
	int n = 0;

	if (kb > POOL_MAX_KB)
		kb = POOL_MAX_KB;
	left = (kb * 1024 + PAGE - 1) / PAGE * PAGE;
	*total = left;
	while (left && n < MAX_CHUNKS) {
		for (c = CHUNK_MAX; c > left; c /= 2)
			;
		chunk[n++] = c;
		left -= c;
	}
	return n;
}

FIXTURE(dmpool) {
	struct remu_end a;		/* remu0: the pool's device */
	struct ibv_context *ctx;	/* a.ctx */
	uint64_t chunk[MAX_CHUNKS], total;
	int nchunks, dm0;
	long pct0;
};

FIXTURE_SETUP(dmpool)
{
	self->pct0 = remu_param("dm_ctx_pct", 100);
	ASSERT_LT(0, self->pct0);
	self->nchunks = pool_chunks(self->chunk, &self->total);
	self->dm0 = remu_obj_count("dm");
	ASSERT_LE(0, self->dm0);
	ASSERT_EQ(0, side_open(&self->a, "remu0"));
	self->ctx = self->a.ctx;
	/* the pool is idle: these tests account for all of it */
	ASSERT_EQ(0, dm_stat("dm_in_use"));
	ASSERT_EQ(0, dm_stat("dm_allocs"));
	TH_LOG("pool %llu bytes in %d chunk(s), largest %llu",
	       (unsigned long long)self->total, self->nchunks,
	       (unsigned long long)(self->nchunks ? self->chunk[0] : 0));
}

FIXTURE_TEARDOWN(dmpool)
{
	remu_end_close(&self->a);
	EXPECT_EQ(self->dm0, remu_obj_count("dm"));
	EXPECT_EQ(0, dm_stat("dm_in_use"));
	remu_param("dm_ctx_pct", self->pct0);
}

/* max_dm_size and sysfs say what the parameter asked for */
TEST_F(dmpool, size_reported)
{
	struct ibv_device_attr_ex attr = {};

	ASSERT_EQ(0, ibv_query_device_ex(self->ctx, NULL, &attr));
	EXPECT_EQ(self->total, attr.max_dm_size);
	EXPECT_EQ(self->total, dm_stat("dm_size"));
	EXPECT_EQ(self->nchunks ? self->chunk[0] : 0,
		  dm_stat("dm_largest_free"));
	if (!self->total) {
		/* no device memory: every allocation refused, nothing made */
		EXPECT_EQ(NULL, dm_alloc(self->ctx, 1, 0));
		EXPECT_EQ(EOPNOTSUPP, errno);
		EXPECT_EQ(NULL, dm_alloc(self->ctx, PAGE, 12));
		EXPECT_EQ(EOPNOTSUPP, errno);
		EXPECT_EQ(self->dm0, remu_obj_count("dm"));
		EXPECT_EQ(0, dm_stat("dm_allocs"));
	}
}

/*
 * The largest allocation is one chunk, even when the pool holds more; one
 * byte more is ENOMEM.  The alignment of a whole chunk is honoured, one
 * more power of two refused.
 */
TEST_F(dmpool, largest_is_one_chunk)
{
	uint64_t big = self->nchunks ? self->chunk[0] : 0;
	uint8_t *in, *out;
	struct ibv_dm *dm;
	int log;

	if (!self->total)
		SKIP(return, "dm_pool_kb=0: no device memory");
	in = malloc(big);
	out = malloc(big);
	ASSERT_TRUE(in && out);
	dm = dm_alloc(self->ctx, big, 0);
	ASSERT_NE(NULL, dm);
	pattern(in, big, 41);
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, in, big));
	ASSERT_EQ(0, ibv_memcpy_from_dm(out, dm, 0, big));
	EXPECT_EQ(0, memcmp(in, out, big));
	ASSERT_EQ(0, ibv_free_dm(dm));

	EXPECT_EQ(NULL, dm_alloc(self->ctx, big + 1, 0));
	EXPECT_EQ(ENOMEM, errno);
	TH_LOG("%llu + 1 bytes refused with %llu free in all",
	       (unsigned long long)big,
	       (unsigned long long)(self->total - dm_stat("dm_in_use")));

	for (log = 0; (1ULL << log) < big; log++)
		;
	dm = dm_alloc(self->ctx, PAGE, log);
	ASSERT_NE(NULL, dm);
	ASSERT_EQ(0, ibv_free_dm(dm));
	EXPECT_EQ(NULL, dm_alloc(self->ctx, PAGE, log + 1));
	EXPECT_EQ(EINVAL, errno);
	free(in);
	free(out);
}

#define EDGE	64	/* bytes remu1 writes at the end of each allocation */

/* the bytes remu1 WRITEs into the last EDGE bytes of allocation @i */
static void edge_pattern(uint8_t *p, int i)
{
	int j;

	for (j = 0; j < EDGE; j++)
		p[j] = (uint8_t)(i * 13 + j + 5);
}

/*
 * One allocation per chunk, largest first, fills the pool exactly: each
 * takes a whole chunk (genalloc places an allocation in one chunk, and
 * sizes equal to the chunks leave no room for anything else), nothing is
 * left (ENOMEM for one byte, dm_largest_free 0), and every allocation
 * keeps its own bytes.  Each allocation, in whichever chunk, is also a
 * DM MR that remu1 WRITEs into (its last bytes) and READs from (its
 * first), byte for byte.
 */
TEST_F(dmpool, fill_every_chunk)
{
	struct ibv_dm *dms[MAX_CHUNKS];
	struct remu_end b = {};
	struct ibv_mr *hmr;
	long long used = 0;
	uint8_t *host;
	uint64_t big = self->nchunks ? self->chunk[0] : 0;
	uint8_t *buf, *out;
	int i;

	if (!self->total)
		SKIP(return, "dm_pool_kb=0: no device memory");
	buf = malloc(big);
	out = malloc(big);
	ASSERT_TRUE(buf && out);
	for (i = 0; i < self->nchunks; i++) {
		dms[i] = dm_alloc(self->ctx, self->chunk[i], 0);
		ASSERT_NE(NULL, dms[i]) TH_LOG("chunk %d (%llu bytes)", i,
					      (unsigned long long)self->chunk[i]);
		pattern(buf, self->chunk[i], 1000 + i);
		ASSERT_EQ(0, ibv_memcpy_to_dm(dms[i], 0, buf, self->chunk[i]));
		used += self->chunk[i];
		EXPECT_EQ(used, dm_stat("dm_in_use"));
	}
	EXPECT_EQ(self->total, dm_stat("dm_in_use"));
	EXPECT_EQ(self->nchunks, dm_stat("dm_allocs"));
	EXPECT_EQ(0, dm_stat("dm_largest_free"));
	EXPECT_EQ(NULL, dm_alloc(self->ctx, 1, 0));
	EXPECT_EQ(ENOMEM, errno);

	/* remu1 -> each allocation through a DM MR on remu0 */
	ASSERT_EQ(0, side_open(&b, "remu1"));
	ASSERT_EQ(0, side_connect(&self->a, &b));
	ASSERT_EQ(0, side_connect(&b, &self->a));
	host = aligned_alloc(PAGE, PAGE);
	ASSERT_NE(NULL, host);
	hmr = ibv_reg_mr(b.pd, host, PAGE, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, hmr);
	for (i = 0; i < self->nchunks; i++) {
		uint32_t n = self->chunk[i] < EDGE ? self->chunk[i] : EDGE;
		struct ibv_sge sge = { (uintptr_t)host, n, hmr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE };
		struct ibv_mr *mr;

		mr = ibv_reg_dm_mr(self->a.pd, dms[i], 0, self->chunk[i],
				   DM_RIGHTS);
		ASSERT_NE(NULL, mr);
		edge_pattern(host, i);
		wr.wr.rdma.remote_addr = self->chunk[i] - n;
		wr.wr.rdma.rkey = mr->rkey;
		ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&b, &wr));
		sge.addr = (uintptr_t)host + 2 * EDGE;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = 0;
		ASSERT_EQ(IBV_WC_SUCCESS, run_wr(&b, &wr));
		pattern(buf, self->chunk[i], 1000 + i);
		edge_pattern(buf + self->chunk[i] - n, i);
		EXPECT_EQ(0, memcmp(host + 2 * EDGE, buf, n))
			TH_LOG("READ from allocation %d", i);
		ASSERT_EQ(0, ibv_dereg_mr(mr));
	}
	ibv_dereg_mr(hmr);
	remu_end_close(&b);
	free(host);

	for (i = 0; i < self->nchunks; i++) {
		pattern(buf, self->chunk[i], 1000 + i);
		edge_pattern(buf + self->chunk[i] -
			     (self->chunk[i] < EDGE ? self->chunk[i] : EDGE), i);
		ASSERT_EQ(0, ibv_memcpy_from_dm(out, dms[i], 0,
						self->chunk[i]));
		EXPECT_EQ(0, memcmp(buf, out, self->chunk[i]))
			TH_LOG("allocation %d", i);
	}
	for (i = 0; i < self->nchunks; i++)
		ASSERT_EQ(0, ibv_free_dm(dms[i]));
	EXPECT_EQ(0, dm_stat("dm_allocs"));
	EXPECT_EQ(big, dm_stat("dm_largest_free"));
	free(buf);
	free(out);
}

TEST_HARNESS_MAIN
