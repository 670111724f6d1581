// SPDX-License-Identifier: GPL-2.0
/*
 * remu_limits_test - every limit remu reports is the one it enforces, and
 * what a process takes is charged to it (docs/security.md, "Limits").
 *
 * counts: for each object the device counts (PD, CQ, QP, SRQ, AH, MR,
 * MW), made on remu0 until the device refuses: the refusal is ENOMEM (as
 * mlx5's firmware "resources exceeded"), it comes exactly at the limit
 * ibv_query_device() reports (less what the kernel's own users hold, from
 * `rdma resource show`), one more can be made once one is destroyed, and
 * all of them go again.  Limits above REMU_LIMITS_MAX (default 70000) are
 * skipped (max_mr, 1048576, at the defaults): remu_limits_test.sh reloads
 * remu with small max_* parameters and runs this test again, so that
 * every kind is exhausted once.  The AHs go to remu0's own address, but
 * above 1000 of them to an IPv4 multicast group: for a unicast
 * destination ib_core resolves the MAC through its address workqueue
 * (milliseconds per AH under TCG: 65536 of them took over two minutes),
 * for a multicast one it computes it; remu counts and refuses both alike,
 * and the small limits' run exhausts the AHs with unicast ones.
 *
 * ucontext: contexts of remu0 opened until ENOMEM, exactly at the module
 * parameter max_ucontext (the verbs do not report this one).
 *
 * memlock: an unprivileged process (uid nobody, no CAP_IPC_LOCK) with
 * RLIMIT_MEMLOCK of 256 KiB: a pinned MR within it is charged (VmPin),
 * one beyond it fails with ENOMEM as ib_umem_get() has it on mlx5, and
 * deregistration gives the charge back; an ODP MR of 64 MiB, device
 * memory and a CQ ring of 4 MiB are not charged there (as mlx5 and the
 * core have it: ODP pins nothing, device memory is not host memory).
 *
 * memcg: a process in a memory cgroup: its CQ ring is charged to the
 * cgroup (memory.current grows by at least the ring's size and drops
 * when the CQ is destroyed), and a ring larger than memory.max fails with
 * ENOMEM without the process being killed.
 *
 * dm_quota: one context may hold dm_ctx_pct percent (default 50) of the
 * device's memory pool; the next allocation fails with ENOMEM, another
 * context still gets the rest, a freed allocation makes room again, and
 * dm_ctx_pct=100 lifts the cap.
 *
 * rxq_full: with the module parameter rxq_len at 2, a 1 MiB WRITE and
 * READ between remu0 and remu1 overflow the QPs' packet lists: the
 * drops are counted in rcvd_rxq_full and retransmission recovers them
 * (the data compared byte for byte); rxq_len back at 1024.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define DEV		"remu0"
#define PAGE		4096

enum kind { K_PD, K_CQ, K_QP, K_SRQ, K_AH, K_MR, K_MW, K_COUNT };
static const char *const kind_name[K_COUNT] = {
	"pd", "cq", "qp", "srq", "ah", "mr", "mw",
};

/* remu0's count of @res ("pd", "mr", "ctx"...) in `rdma resource show`, or -1 */
static long rdma_res(const char *res)
{
	char cmd[200], line[64];
	long v = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "rdma resource show | awk '$2 == \"" DEV ":\" { for (i = 3; i < NF; i += 2) if ($i == \"%s\") print $(i + 1) }'",
		 res);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		v = atol(line);
	pclose(f);
	return v;
}

/*
 * objects of @k of remu0 in use by others (the fixture's PD and CQ
 * included), as `rdma resource` counts them.  MRs: also one per kernel PD
 * (all PDs but the fixture's), the DMA MR ib_alloc_pd() makes for a
 * kernel PD's local_dma_lkey on a device without one of its own, which
 * `rdma resource` does not list.  AHs and MWs are not listed: remu's
 * kernel users make none.
 */
static long in_use(enum kind k)
{
	switch (k) {
	case K_PD:
		return rdma_res("pd");
	case K_CQ:
		return rdma_res("cq");
	case K_QP:
		return rdma_res("qp");
	case K_SRQ:
		return rdma_res("srq");
	case K_MR:
		return rdma_res("mr") + rdma_res("pd") - 1;
	default:
		return 0;
	}
}

struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	union ibv_gid gid;
	union ibv_gid mgid;	/* ::ffff:239.0.0.1 */
	bool ah_mcast;		/* AHs to mgid, not to gid */
	int gidx;
	uint8_t *buf;
	void **o;
	long n;
};

/* one more object of kind @k, or NULL with errno */
static void *make(struct objs *s, enum kind k)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 1, .max_recv_wr = 1,
		.max_send_sge = 1, .max_recv_sge = 1,
	};
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 1, .max_sge = 1 } };
	struct ibv_qp_init_attr qa = { .send_cq = s->cq, .recv_cq = s->cq,
				       .cap = cap, .qp_type = IBV_QPT_UD };
	struct ibv_ah_attr ah;

	switch (k) {
	case K_PD:
		return ibv_alloc_pd(s->ctx);
	case K_CQ:
		return ibv_create_cq(s->ctx, 1, NULL, NULL, 0);
	case K_QP:
		return ibv_create_qp(s->pd, &qa);
	case K_SRQ:
		return ibv_create_srq(s->pd, &sa);
	case K_AH:
		remu_set_av(&ah, s->ah_mcast ? &s->mgid : &s->gid, s->gidx, 0);
		return ibv_create_ah(s->pd, &ah);
	case K_MR:
		return ibv_reg_mr(s->pd, s->buf, PAGE, IBV_ACCESS_LOCAL_WRITE);
	case K_MW:
		return ibv_alloc_mw(s->pd, IBV_MW_TYPE_1);
	default:
		return NULL;
	}
}

static int destroy(enum kind k, void *o)
{
	switch (k) {
	case K_PD:
		return ibv_dealloc_pd(o);
	case K_CQ:
		return ibv_destroy_cq(o);
	case K_QP:
		return ibv_destroy_qp(o);
	case K_SRQ:
		return ibv_destroy_srq(o);
	case K_AH:
		return ibv_destroy_ah(o);
	case K_MR:
		return ibv_dereg_mr(o);
	case K_MW:
		return ibv_dealloc_mw(o);
	default:
		return -1;
	}
}

static long limit_of(struct ibv_device_attr *a, enum kind k)
{
	switch (k) {
	case K_PD: return a->max_pd;
	case K_CQ: return a->max_cq;
	case K_QP: return a->max_qp;
	case K_SRQ: return a->max_srq;
	case K_AH: return a->max_ah;
	case K_MR: return a->max_mr;
	case K_MW: return a->max_mw;
	default: return -1;
	}
}

FIXTURE(limits)
{
	struct objs s;
	struct ibv_device_attr attr;
};

FIXTURE_SETUP(limits)
{
	struct objs *s = &self->s;

	memset(s, 0, sizeof(*s));
	s->ctx = remu_open(DEV);
	ASSERT_NE(NULL, s->ctx);
	ASSERT_EQ(0, ibv_query_device(s->ctx, &self->attr));
	s->gidx = remu_ipv4_gid(s->ctx, &s->gid);
	ASSERT_LE(0, s->gidx);
	s->mgid.raw[10] = 0xff;
	s->mgid.raw[11] = 0xff;
	s->mgid.raw[12] = 239;
	s->mgid.raw[15] = 1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 16, NULL, NULL, 0);
	s->buf = aligned_alloc(PAGE, PAGE);
	ASSERT_NE(NULL, s->pd);
	ASSERT_NE(NULL, s->cq);
	ASSERT_NE(NULL, s->buf);
}

FIXTURE_TEARDOWN(limits)
{
	struct objs *s = &self->s;

	remu_close_objs(NULL, NULL, NULL, s->cq, s->pd, s->ctx);
	free(s->buf);
}

/*
 * Exhaust kind @k: exactly @limit minus what others hold can be made,
 * the next one is ENOMEM; one destroyed makes room for one; all go.
 */
static void exhaust(struct __test_metadata *_metadata, struct objs *s,
		    enum kind k, long limit)
{
	long used = in_use(k), want, i, n = 0;
	int err = 0;
	void *o;

	ASSERT_LE(0, used);
	want = limit - used;
	s->ah_mcast = limit > 1000;
	s->o = calloc(want + 2, sizeof(void *));
	ASSERT_NE(NULL, s->o);
	while (n < want + 2) {
		o = make(s, k);
		if (!o) {
			err = errno;
			break;
		}
		s->o[n++] = o;
	}
	TH_LOG("%s: limit %ld, %ld in use by others, %ld made, then errno %d%s",
	       kind_name[k], limit, used, n, err,
	       k == K_AH && s->ah_mcast ? " (to a multicast group)" : "");
	EXPECT_EQ(want, n);
	EXPECT_EQ(ENOMEM, err);
	if (n) {
		EXPECT_EQ(0, destroy(k, s->o[--n]));
		s->o[n] = make(s, k);
		EXPECT_NE(NULL, s->o[n]);
		if (s->o[n])
			n++;
		EXPECT_EQ(NULL, make(s, k));
	}
	for (i = 0; i < n; i++)
		EXPECT_EQ(0, destroy(k, s->o[i]));
	free(s->o);
	s->o = NULL;
	/* and all of them come back */
	o = make(s, k);
	EXPECT_NE(NULL, o);
	if (o)
		EXPECT_EQ(0, destroy(k, o));
}

TEST_F_TIMEOUT(limits, counts, 300)
{
	long max = 70000, limit;
	const char *env = getenv("REMU_LIMITS_MAX");
	int k;

	if (env && *env)
		max = atol(env);
	/* the parameters say what the device reports */
	EXPECT_EQ(self->attr.max_pd, remu_param("max_pd", -1));
	EXPECT_EQ(self->attr.max_qp, remu_param("max_qp", -1));
	EXPECT_EQ(self->attr.max_cq, remu_param("max_cq", -1));
	EXPECT_EQ(self->attr.max_srq, remu_param("max_srq", -1));
	EXPECT_EQ(self->attr.max_mr, remu_param("max_mr", -1));
	EXPECT_EQ(self->attr.max_mw, remu_param("max_mw", -1));
	EXPECT_EQ(self->attr.max_ah, remu_param("max_ah", -1));
	for (k = 0; k < K_COUNT; k++) {
		limit = limit_of(&self->attr, k);
		if (limit > max) {
			TH_LOG("%s: limit %ld above REMU_LIMITS_MAX, not exhausted here",
			       kind_name[k], limit);
			continue;
		}
		exhaust(_metadata, &self->s, k, limit);
	}
}

/* open remu0, keeping ibv_open_device()'s errno */
static struct ibv_context *open_keep_errno(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n, err = ENODEV;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), DEV)) {
			ctx = ibv_open_device(list[i]);
			err = errno;
		}
	ibv_free_device_list(list);
	errno = err;
	return ctx;
}

TEST(ucontext)
{
	long max = remu_param("max_ucontext", -1), used = rdma_res("ctx");
	struct rlimit nofile = { 4096, 4096 };
	struct ibv_context **c;
	long n = 0, i;
	int err = 0;

	/* each context holds two files (command fd, async fd) */
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &nofile));
	ASSERT_LT(0, max);
	ASSERT_LE(0, used);
	c = calloc(max + 2, sizeof(*c));
	ASSERT_NE(NULL, c);
	while (n < max + 2) {
		c[n] = open_keep_errno();
		if (!c[n]) {
			err = errno;
			break;
		}
		n++;
	}
	TH_LOG("contexts: max_ucontext %ld, %ld open elsewhere, %ld opened, then errno %d",
	       max, used, n, err);
	EXPECT_EQ(max - used, n);
	EXPECT_EQ(ENOMEM, err);
	if (n) {
		EXPECT_EQ(0, ibv_close_device(c[--n]));
		c[n] = remu_open(DEV);
		EXPECT_NE(NULL, c[n]);
		if (c[n])
			n++;
	}
	for (i = 0; i < n; i++)
		EXPECT_EQ(0, ibv_close_device(c[i]));
	free(c);
}

/* VmPin of this process, in KiB, or -1 */
static long vmpin_kb(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		sscanf(line, "VmPin: %ld kB", &v);
	fclose(f);
	return v;
}

/* the child of memlock: exit code 0, or the number of the failed step */
static int memlock_child(void)
{
	struct rlimit rl = { 256 * 1024, 256 * 1024 };
	struct ibv_alloc_dm_attr da = { .length = 64 * 1024 };
	size_t big = 64 << 20;
	struct ibv_context *ctx;
	struct ibv_mr *mr, *mr2, *odp;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_dm *dm;
	uint8_t *buf;

	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgid(65534) || setuid(65534))
		return 1;
	ctx = remu_open(DEV);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	buf = mmap(NULL, big, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || buf == MAP_FAILED)
		return 2;
	if (vmpin_kb() != 0)
		return 3;
	mr = ibv_reg_mr(pd, buf, 128 * 1024, IBV_ACCESS_LOCAL_WRITE);
	if (!mr || vmpin_kb() != 128)
		return 4;
	/* 128 + 192 KiB > 256 KiB: refused as mlx5's ib_umem_get() does */
	mr2 = ibv_reg_mr(pd, buf + (1 << 20), 192 * 1024,
			 IBV_ACCESS_LOCAL_WRITE);
	if (mr2 || errno != ENOMEM || vmpin_kb() != 128)
		return 5;
	if (ibv_dereg_mr(mr) || vmpin_kb() != 0)
		return 6;
	/* ODP pins nothing: not charged */
	odp = ibv_reg_mr(pd, buf, big, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_ON_DEMAND);
	if (odp && (vmpin_kb() != 0 || ibv_dereg_mr(odp)))
		return 7;
	/* device memory is not host memory: not charged */
	dm = ibv_alloc_dm(ctx, &da);
	if (!dm || vmpin_kb() != 0 || ibv_free_dm(dm))
		return 8;
	/* a 4 MiB CQ ring: kernel memory, charged to the memcg instead */
	cq = ibv_create_cq(ctx, 65535, NULL, NULL, 0);
	if (!cq || vmpin_kb() != 0 || ibv_destroy_cq(cq))
		return 9;
	if (ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		return 10;
	return 0;
}

TEST(memlock)
{
	int st;
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (!pid)
		_exit(memlock_child());
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
}

#define CG		"/sys/fs/cgroup"
#define CG_TEST		CG "/remu_limits_test"

static long cg_read(const char *file)
{
	char path[128];

	snprintf(path, sizeof(path), CG_TEST "/%s", file);
	return remu_read_num(path);
}

static int cg_write(const char *path, const char *val)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(val, f);
	return fclose(f) ? -1 : 0;
}

/* a memory cgroup CG_TEST with memory.max @max, or -1 (none here) */
static int cg_make(long max)
{
	char v[32];

	if (access(CG "/cgroup.controllers", F_OK) &&
	    remu_sh("mkdir -p " CG " && mount -t cgroup2 none " CG))
		return -1;
	if (remu_sh("grep -qw memory " CG "/cgroup.controllers") ||
	    cg_write(CG "/cgroup.subtree_control", "+memory"))
		return -1;
	rmdir(CG_TEST);
	if (mkdir(CG_TEST, 0755))
		return -1;
	snprintf(v, sizeof(v), "%ld", max);
	return cg_write(CG_TEST "/memory.max", v);
}

/* the child of memcg, in the cgroup: 0 or the number of the failed step */
static int memcg_child(int out)
{
	struct ibv_context *ctx = remu_open(DEV);
	long before, with;
	struct ibv_cq *cq;

	if (!ctx)
		return 1;
	before = cg_read("memory.current");
	/* 131072 64-byte CQEs: an 8 MiB ring */
	cq = ibv_create_cq(ctx, 131071, NULL, NULL, 0);
	if (!cq)
		return 2;
	with = cg_read("memory.current");
	if (write(out, &before, sizeof(before)) != sizeof(before) ||
	    write(out, &with, sizeof(with)) != sizeof(with))
		return 3;
	if (with - before < 8 << 20)
		return 4;
	if (ibv_destroy_cq(cq))
		return 5;
	/* the ring is gone, and its charge with it (give or take a page table) */
	if (cg_read("memory.current") > with - (7 << 20))
		return 6;
	/* 1048576 CQEs (64 MiB) do not fit in 48 MiB: ENOMEM, no OOM kill */
	cq = ibv_create_cq(ctx, 1048575, NULL, NULL, 0);
	if (cq || errno != ENOMEM)
		return 7;
	return ibv_close_device(ctx) ? 8 : 0;
}

TEST(memcg)
{
	long before = 0, with = 0;
	char pidstr[32];
	int st, p[2];
	pid_t pid;

	if (cg_make(48 << 20))
		SKIP(return, "no cgroup v2 memory controller");
	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		snprintf(pidstr, sizeof(pidstr), "%d", getpid());
		if (cg_write(CG_TEST "/cgroup.procs", pidstr))
			_exit(100);
		_exit(memcg_child(p[1]));
	}
	close(p[1]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	if (read(p[0], &before, sizeof(before)) == sizeof(before) &&
	    read(p[0], &with, sizeof(with)) == sizeof(with))
		TH_LOG("memory.current %ld before the 8 MiB CQ ring, %ld with it",
		       before, with);
	close(p[0]);
	ASSERT_TRUE(WIFEXITED(st)) {
		TH_LOG("child killed by signal %d", WTERMSIG(st));
	}
	EXPECT_EQ(0, WEXITSTATUS(st));
	rmdir(CG_TEST);
}

static struct ibv_dm *dm_alloc(struct ibv_context *ctx, size_t len)
{
	struct ibv_alloc_dm_attr a = { .length = len };

	return ibv_alloc_dm(ctx, &a);
}

TEST(dm_quota)
{
	struct ibv_context *a = remu_open(DEV), *b = remu_open(DEV);
	struct ibv_device_attr_ex da = {};
	struct ibv_dm *dms[1024], *extra;
	long pct = remu_param("dm_ctx_pct", -1), cap, n = 0, i;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, ibv_query_device_ex(a, NULL, &da));
	ASSERT_EQ(50, pct);
	if (!da.max_dm_size)
		SKIP(return, "no device memory (dm_pool_kb=0)");
	ASSERT_EQ(0, remu_read_num("/sys/class/infiniband/" DEV "/dm_in_use"));
	cap = da.max_dm_size * pct / 100;
	/* a: page by page up to its half of the pool, then ENOMEM */
	while (n < 1024 && (dms[n] = dm_alloc(a, PAGE)))
		n++;
	TH_LOG("pool %llu bytes, cap %ld: %ld pages allocated, then errno %d",
	       (unsigned long long)da.max_dm_size, cap, n, errno);
	EXPECT_EQ(cap / PAGE, n);
	EXPECT_EQ(ENOMEM, errno);
	/* b: the other half */
	extra = dm_alloc(b, da.max_dm_size - cap);
	EXPECT_NE(NULL, extra);
	if (extra)
		EXPECT_EQ(0, ibv_free_dm(extra));
	/* a freed page is room for one more */
	if (n) {
		EXPECT_EQ(0, ibv_free_dm(dms[--n]));
		dms[n] = dm_alloc(a, PAGE);
		EXPECT_NE(NULL, dms[n]);
		if (dms[n])
			n++;
		EXPECT_EQ(NULL, dm_alloc(a, PAGE));
	}
	/* no cap: a takes the rest */
	EXPECT_EQ(50, remu_param("dm_ctx_pct", 100));
	extra = dm_alloc(a, PAGE);
	EXPECT_NE(NULL, extra);
	if (extra)
		EXPECT_EQ(0, ibv_free_dm(extra));
	remu_param("dm_ctx_pct", pct);
	for (i = 0; i < n; i++)
		EXPECT_EQ(0, ibv_free_dm(dms[i]));
	EXPECT_EQ(0, remu_read_num("/sys/class/infiniband/" DEV "/dm_in_use"));
	EXPECT_EQ(0, ibv_close_device(a));
	EXPECT_EQ(0, ibv_close_device(b));
}

/*
 * A QP's packet list full: what does not fit is dropped and counted
 * (rcvd_rxq_full), and RC's retransmission recovers it, byte for byte
 */
TEST(rxq_full)
{
	long long full0 = remu_hw_counter("remu1", "rcvd_rxq_full", false) +
			  remu_hw_counter("remu0", "rcvd_rxq_full", false);
	long old = remu_param("rxq_len", 2), full;

	ASSERT_EQ(1024, old);
	EXPECT_EQ(0, remu_pair_check("remu0", "remu1", 1 << 20));
	EXPECT_EQ(2, remu_param("rxq_len", old));
	full = remu_hw_counter("remu1", "rcvd_rxq_full", true) +
	       remu_hw_counter("remu0", "rcvd_rxq_full", false) - full0;
	TH_LOG("rxq_len 2: %lld packets dropped for a full list", (long long)full);
	EXPECT_LT(0, full);
	/* and at the default again */
	EXPECT_EQ(0, remu_pair_check("remu0", "remu1", 1 << 20));
}

TEST_HARNESS_MAIN
